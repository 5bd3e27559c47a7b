"""Summary ops: TF1's ``tf.summary.scalar/histogram/image/audio/text/merge`` as graph ops.

Each op's output is a 0-d ``string`` tensor holding a serialized ``tensorboard`` ``Summary``
protocol buffer (the protos come from the ``tensorboard`` package, imported when a kernel first
runs). ``MergeSummary`` concatenates its inputs' bytes: concatenated protobuf messages parse as
one message whose repeated ``value`` fields are appended, which is exactly a merged Summary.
Fetched, a summary is a 0-d object array holding ``bytes``; ``FileWriter.add_summary`` takes it
(or the bytes, or a ``Summary`` proto).

Histograms use TensorFlow's default bucket limits (±1e-12 growing by 10% up to ±1e20, then
±DBL_MAX); a value falls in the first bucket whose limit is above it. Images follow
``tf.summary.image``: integers are clipped to [0, 255]; floats (each image on its own) are scaled
so that the largest value is 255 when all are non-negative, otherwise so that 0 maps to 127 and
the largest magnitude to 127 or -128 (as TF does). PNGs are encoded here with ``zlib``.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import TensorShape
from ..registry import Cost, defop


def _pb():
    try:
        from tensorboard.compat.proto import summary_pb2
    except ImportError as e:  # pragma: no cover - tensorboard is a dependency
        raise ImportError(
            "summaries need the 'tensorboard' package (a dependency of hetbed): "
            "pip install tensorboard"
        ) from e
    return summary_pb2


def _out(data: bytes) -> np.ndarray:
    a = np.empty((), dtype=object)
    a[()] = data
    return a


def _host(ctx: Any, x: Any) -> np.ndarray:
    return np.asarray(ctx.device.to_host(x))


def _string_shape(op: Any) -> list:
    return [(TensorShape([]), _dt.string)]


def _summary_cost(op: Any, ins: list, outs: list) -> Cost:
    n = sum(int(np.prod(s)) if s else 1 for s in ins)
    return Cost(float(10 * n), float(4 * n), 64.0)


def _numeric_input(op: Any, what: str) -> None:
    for t in op.inputs:
        if not t.dtype.is_numeric and not t.dtype.is_bool:
            raise InvalidArgumentError(
                f"{op.type} {op.name}: {what} must be numeric, got {t.dtype}"
            )


# ---- scalar ----------------------------------------------------------------------------------

ScalarSummary = defop("ScalarSummary", differentiable=False, cost=_summary_cost)


@ScalarSummary.shape
def _scalar_shape(op):
    _numeric_input(op, "the value")
    s = op.inputs[0].shape
    if s.ndims is not None and s.num_elements() not in (None, 1):
        raise InvalidArgumentError(
            f"ScalarSummary {op.name}: the value must be a scalar, got shape {s}"
        )
    return _string_shape(op)


@ScalarSummary.kernel("cpu")
def _scalar(ctx, x):
    v = _host(ctx, x)
    if v.size != 1:
        raise InvalidArgumentError(
            f"ScalarSummary (tag {ctx.attrs['tag']!r}): the value must be a scalar, got shape "
            f"{list(v.shape)}"
        )
    pb = _pb()
    s = pb.Summary(value=[pb.Summary.Value(tag=ctx.attrs["tag"], simple_value=float(v.ravel()[0]))])
    return _out(s.SerializeToString())


# ---- histogram -------------------------------------------------------------------------------


def default_bucket_limits() -> np.ndarray:
    """TensorFlow's default histogram bucket limits (its ``InitDefaultBuckets``)."""
    pos = []
    v = 1e-12
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    pos = np.array(pos)
    dmax = np.finfo(np.float64).max
    return np.concatenate([-pos[::-1], [0.0], pos, [dmax]])


_LIMITS: np.ndarray | None = None


def histogram_proto(values: np.ndarray) -> Any:
    """A ``HistogramProto`` of ``values`` with TF's buckets, each run of empty buckets merged
    into one (TF's ``Histogram::EncodeToProto``)."""
    global _LIMITS
    if _LIMITS is None:
        _LIMITS = default_bucket_limits()
    v = np.asarray(values, dtype=np.float64).ravel()
    if not np.all(np.isfinite(v)):
        raise InvalidArgumentError("HistogramSummary: the values contain NaN or Inf")
    counts = np.bincount(np.searchsorted(_LIMITS, v, side="right"), minlength=_LIMITS.size)
    # as TF's EncodeToProto: each run of empty buckets becomes one, ending where the run ends
    # (so a reader still knows each kept bucket's lower edge)
    empty = counts == 0
    keep = np.flatnonzero(~empty | np.append(~empty[1:], True))
    pb = _pb()
    return pb.HistogramProto(
        min=float(v.min()) if v.size else 0.0,
        max=float(v.max()) if v.size else 0.0,
        num=float(v.size),
        sum=float(v.sum()),
        sum_squares=float(np.dot(v, v)),
        bucket_limit=_LIMITS[keep].tolist(),
        bucket=counts[keep].astype(np.float64).tolist(),
    )


HistogramSummary = defop("HistogramSummary", differentiable=False, cost=_summary_cost)


@HistogramSummary.shape
def _histogram_shape(op):
    _numeric_input(op, "the values")
    return _string_shape(op)


@HistogramSummary.kernel("cpu")
def _histogram(ctx, x):
    try:
        h = histogram_proto(_host(ctx, x))
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"{e.message} (tag {ctx.attrs['tag']!r})") from None
    pb = _pb()
    return _out(
        pb.Summary(value=[pb.Summary.Value(tag=ctx.attrs["tag"], histo=h)]).SerializeToString()
    )


# ---- image -----------------------------------------------------------------------------------


def encode_png(img: np.ndarray) -> bytes:
    """PNG bytes of an ``[h, w, c]`` uint8 array, c in 1 (gray), 3 (RGB) or 4 (RGBA)."""
    h, w, c = img.shape
    color = {1: 0, 3: 2, 4: 6}[c]
    raw = b"".join(b"\x00" + img[i].tobytes() for i in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    ihdr = struct.pack(">IIBBBBB", w, h, 8, color, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(raw, 6))
        + chunk(b"IEND", b"")
    )


def to_uint8_images(t: np.ndarray) -> np.ndarray:
    """TF1 ``tf.summary.image``'s conversion of a float or integer batch to uint8."""
    if t.dtype.kind in "iu":
        return np.clip(t, 0, 255).astype(np.uint8)
    t = t.astype(np.float64)
    if t.size == 0:
        return t.astype(np.uint8)
    lo, hi = float(t.min()), float(t.max())
    if lo >= 0:
        scale = 255.0 / hi if hi > 0 else 0.0
        out = t * scale
    else:
        scale = min(127.0 / hi if hi > 0 else np.inf, 128.0 / -lo)
        out = t * scale + 127.0
    return np.clip(np.round(out), 0, 255).astype(np.uint8)


ImageSummary = defop("ImageSummary", differentiable=False, cost=_summary_cost)


@ImageSummary.shape
def _image_shape(op):
    _numeric_input(op, "the images")
    s = op.inputs[0].shape
    if s.ndims is not None and (s.ndims != 4 or (s[3] is not None and s[3] not in (1, 3, 4))):
        raise InvalidArgumentError(
            f"ImageSummary {op.name}: images must be [batch, height, width, channels] with 1, 3 "
            f"or 4 channels, got shape {s}"
        )
    return _string_shape(op)


@ImageSummary.kernel("cpu")
def _image(ctx, x):
    t = _host(ctx, x)
    tag, n = ctx.attrs["tag"], ctx.attrs["max_outputs"]
    if t.ndim != 4 or t.shape[3] not in (1, 3, 4):
        raise InvalidArgumentError(
            f"ImageSummary (tag {tag!r}): images must be [batch, height, width, channels] with "
            f"1, 3 or 4 channels, got shape {list(t.shape)}"
        )
    imgs = [to_uint8_images(img) for img in t[:n]]  # TF scales each image on its own
    pb = _pb()
    vals = []
    for i, img in enumerate(imgs):
        im = pb.Summary.Image(
            height=img.shape[0],
            width=img.shape[1],
            colorspace=img.shape[2],
            encoded_image_string=encode_png(img),
        )
        vals.append(pb.Summary.Value(tag=f"{tag}/image/{i}" if n > 1 else f"{tag}/image", image=im))
    return _out(pb.Summary(value=vals).SerializeToString())


# ---- audio -----------------------------------------------------------------------------------


def encode_wav_s16(frames: np.ndarray, sample_rate: float) -> bytes:
    """TF's ``EncodeAudioAsS16LEWav``: a RIFF/WAVE file of 16-bit PCM from ``[frames,
    channels]`` floats in [-1, 1] (each sample times 32768, rounded half away from zero, clamped
    to int16; the header's rate is the rate rounded to an integer, as TF's)."""
    n, c = frames.shape
    f = frames.astype(np.float32) * np.float32(32768.0)
    r = np.trunc(f)  # roundf: half away from zero (f - trunc(f) is exact)
    q = np.clip(r + np.where(np.abs(f - r) >= 0.5, np.sign(f), 0), -32768, 32767)
    data = q.astype("<i2").tobytes()
    rate = int(np.floor(sample_rate + 0.5))
    header = b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVE"
    fmt = b"fmt " + struct.pack("<IHHIIHH", 16, 1, c, rate, rate * c * 2, c * 2, 16)
    return header + fmt + b"data" + struct.pack("<I", len(data)) + data


AudioSummaryV2 = defop("AudioSummaryV2", differentiable=False, cost=_summary_cost)


@AudioSummaryV2.shape
def _audio_shape(op):
    x, rate = op.inputs
    if not x.dtype.is_floating:
        raise InvalidArgumentError(
            f"AudioSummaryV2 {op.name}: the audio must be float, got {x.dtype.name}"
        )
    s = x.shape
    if s.ndims is not None and s.ndims not in (2, 3):
        raise InvalidArgumentError(
            f"AudioSummaryV2 {op.name}: audio must be [batch, frames] or [batch, frames, "
            f"channels], got shape {s}"
        )
    if rate.shape.ndims not in (None, 0):
        raise InvalidArgumentError(
            f"AudioSummaryV2 {op.name}: sample_rate must be a scalar, got shape {rate.shape}"
        )
    return _string_shape(op)


@AudioSummaryV2.kernel("cpu")
def _audio(ctx, x, rate):
    t, r = _host(ctx, x), _host(ctx, rate)
    tag, n = ctx.attrs["tag"], ctx.attrs["max_outputs"]
    if t.ndim not in (2, 3):
        raise InvalidArgumentError(
            f"AudioSummaryV2 (tag {tag!r}): audio must be [batch, frames] or [batch, frames, "
            f"channels], got shape {list(t.shape)}"
        )
    sample_rate = float(r.reshape(-1)[0]) if r.size == 1 else None
    if sample_rate is None or not sample_rate > 0:
        raise InvalidArgumentError(
            f"AudioSummaryV2 (tag {tag!r}): sample_rate must be a positive scalar, got {r!r}"
        )
    if t.ndim == 2:
        t = t[:, :, None]
    pb = _pb()
    vals = []
    for i in range(min(n, t.shape[0])):
        au = pb.Summary.Audio(
            sample_rate=sample_rate,
            num_channels=t.shape[2],
            length_frames=t.shape[1],
            encoded_audio_string=encode_wav_s16(t[i], sample_rate),
            content_type="audio/wav",
        )
        vals.append(pb.Summary.Value(tag=f"{tag}/audio/{i}" if n > 1 else f"{tag}/audio", audio=au))
    return _out(pb.Summary(value=vals).SerializeToString())


# ---- text ------------------------------------------------------------------------------------

TextSummary = defop("TextSummary", differentiable=False, shape=_string_shape)


@TextSummary.kernel("cpu")
def _text(ctx, *value):
    from tensorboard.compat.proto import tensor_pb2, tensor_shape_pb2, types_pb2

    pb = _pb()
    if value:  # a string tensor (WP5): all its elements, with its shape
        v = np.asarray(value[0], dtype=object)
        dims = [tensor_shape_pb2.TensorShapeProto.Dim(size=n) for n in v.shape]
        shape, strings = tensor_shape_pb2.TensorShapeProto(dim=dims), list(v.reshape(-1))
    else:
        shape, strings = tensor_shape_pb2.TensorShapeProto(), [ctx.attrs["text"].encode("utf-8")]
    tensor = tensor_pb2.TensorProto(
        dtype=types_pb2.DT_STRING, tensor_shape=shape, string_val=strings
    )
    meta = pb.SummaryMetadata(plugin_data=pb.SummaryMetadata.PluginData(plugin_name="text"))
    v = pb.Summary.Value(tag=ctx.attrs["tag"], tensor=tensor, metadata=meta)
    return _out(pb.Summary(value=[v]).SerializeToString())


# ---- merge -----------------------------------------------------------------------------------

MergeSummary = defop("MergeSummary", differentiable=False)


@MergeSummary.shape
def _merge_shape(op):
    for t in op.inputs:
        if t.dtype != _dt.string:
            raise InvalidArgumentError(
                f"MergeSummary {op.name}: input {t.name} is {t.dtype.name}, not a summary"
            )
    return _string_shape(op)


@MergeSummary.kernel("cpu")
def _merge(ctx, *parts):
    return _out(b"".join(bytes(np.asarray(p).item()) for p in parts))
