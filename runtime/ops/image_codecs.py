"""Image files to tensors and back: TF1's ``tf.image.decode_jpeg/png/bmp/gif/image`` and
``encode_png/encode_jpeg`` (also under ``tf.io``), CPU only.

A decoder takes a scalar string tensor (the file's bytes, e.g. from ``tf.read_file``) and returns
``uint8`` ``[height, width, channels]`` (``decode_gif``: ``[frames, height, width, 3]``);
``channels`` 0 keeps the file's own (gray 1, gray+alpha 2, RGB 3, RGBA 4; a palette image
decodes to RGB, or RGBA when it has transparency), 1, 3 or 4 convert as TF does. Pillow does the
codec work (it comes with matplotlib). JPEG pixels are libjpeg's accurate integer inverse DCT
with fancy upsampling: those of TensorFlow's ``dct_method="INTEGER_ACCURATE"`` exactly; TF's
default (``""``, its fast integer DCT) differs by about one level on average (a few at most).
PNG, GIF and BMP pixels are exact. A file of another format
than the decoder's name fails the step naming the op and the format found, except
``decode_image``, which takes any of the four. ``decode_png`` with ``dtype=tf.uint16`` keeps
16-bit samples.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import TensorShape
from ..registry import apply, defop

__all__ = [
    "decode_bmp",
    "decode_gif",
    "decode_image",
    "decode_jpeg",
    "decode_png",
    "encode_jpeg",
    "encode_png",
    "is_jpeg",
]

_MAGIC = (
    (b"\xff\xd8\xff", "jpeg"),
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
    (b"BM", "bmp"),
)


def _format_of(data: bytes) -> str | None:
    for magic, fmt in _MAGIC:
        if data.startswith(magic):
            return fmt
    return None


def _scalar_bytes(ctx: Any, x: Any) -> bytes:
    arr = np.asarray(x, dtype=object)
    if arr.shape != ():
        raise InvalidArgumentError(
            f"{ctx.op.type} {ctx.op.name!r}: contents must be a scalar string, got shape "
            f"{list(arr.shape)}"
        )
    v = arr.item()
    return v if isinstance(v, bytes) else bytes(v)


def _string_scalar_input(op: Any) -> None:
    t = op.inputs[0]
    if not t.dtype.is_string:
        raise InvalidArgumentError(
            f"{op.type} {op.name!r}: contents must be a string tensor, got {t.dtype.name}"
        )
    if t.shape.ndims not in (None, 0):
        raise InvalidArgumentError(
            f"{op.type} {op.name!r}: contents must be a scalar, got shape {t.shape}"
        )


# ---- decoding ---------------------------------------------------------------------------------

DecodeImage = defop("DecodeImage", differentiable=False)


@DecodeImage.shape
def _decode_shape(op):
    _string_scalar_input(op)
    c = op.attrs["channels"] or None
    if op.attrs["format"] == "gif":
        return [(TensorShape([None, None, None, 3]), op.attrs["dtype"])]
    return [(TensorShape([None, None, c]), op.attrs["dtype"])]


def _to_array(img: Any, channels: int, dtype: _dt.DType, where: str) -> np.ndarray:
    """A PIL image as ``[h, w, c]`` of ``dtype`` with ``channels`` (0: the image's own)."""
    if img.mode in ("I;16", "I;16B", "I;16L", "I"):  # 16-bit gray
        a = np.asarray(img, dtype=np.uint32)
        if dtype == _dt.uint8:
            a = a >> 8  # TF keeps the high byte
        a = a.astype(dtype.np)[..., None]
        if channels in (3, 4):
            a = np.repeat(a, 3, axis=-1)
            if channels == 4:
                full = np.iinfo(dtype.np).max
                a = np.concatenate([a, np.full(a.shape[:-1] + (1,), full, dtype.np)], -1)
        return a
    if img.mode == "P":
        img = img.convert("RGBA" if "transparency" in img.info else "RGB")
    elif img.mode not in ("L", "LA", "RGB", "RGBA"):
        img = img.convert("RGBA" if "A" in img.mode else "RGB")
    want = {1: "L", 3: "RGB", 4: "RGBA"}.get(channels)
    if want == "L" and img.mode in ("RGB", "RGBA"):
        # TF's (libpng's) conversion to gray: 601 luma in 15-bit fixed point, truncated
        rgb = np.asarray(img.convert("RGB"), dtype=np.uint32)
        y = (rgb[..., 0] * 9797 + rgb[..., 1] * 19234 + rgb[..., 2] * 3737) >> 15
        img = None
        a = y.astype(np.uint8)
    else:
        if want is not None and img.mode != want:
            img = img.convert(want)
        a = np.asarray(img, dtype=np.uint8)
    if a.ndim == 2:
        a = a[..., None]
    if dtype == _dt.uint16:  # 8-bit samples widened as TF does (x * 257)
        a = a.astype(np.uint16) * np.uint16(257)
    elif dtype != _dt.uint8:
        raise InvalidArgumentError(f"{where}: dtype must be uint8 or uint16, got {dtype.name}")
    return np.ascontiguousarray(a)


@DecodeImage.kernel("cpu")
def _decode(ctx, x):
    from PIL import Image, UnidentifiedImageError

    at = ctx.attrs
    where = f"{ctx.op.type} {ctx.op.name!r}"
    data = _scalar_bytes(ctx, x)
    found = _format_of(data)
    want = at["format"]
    if found is None:
        raise InvalidArgumentError(
            f"{where}: the contents are not a JPEG, PNG, GIF or BMP file ({len(data)} bytes, "
            f"starting {data[:8]!r})"
        )
    if want != "any" and found != want:
        raise InvalidArgumentError(
            f"{where}: expected a {want.upper()} file, got {found.upper()} (decode_image takes "
            "any of JPEG, PNG, GIF and BMP)"
        )
    try:
        img = Image.open(io.BytesIO(data))
        if found == "jpeg" and at["channels"] == 1:
            img.draft("L", img.size)  # libjpeg decodes the luma plane alone, as TF's does
        img.load()
    except (UnidentifiedImageError, OSError, ValueError) as e:
        raise InvalidArgumentError(f"{where}: cannot decode the {found.upper()} file: {e}") from e
    if found == "gif" and (want == "gif" or at["expand_animations"]):
        frames = []
        for k in range(getattr(img, "n_frames", 1)):
            img.seek(k)
            frames.append(np.asarray(img.convert("RGB"), dtype=np.uint8))
        out = np.stack(frames)
        if want == "gif":
            return out
        return out if len(frames) > 1 else out[0]
    if found == "gif":
        img.seek(0)
        img = img.convert("RGB")
    return _to_array(img, at["channels"], at["dtype"], where)


def _decoder(fmt: str, contents: Any, channels: int, dtype: Any, name: str, **extra: Any):
    if channels not in (0, 1, 3, 4):
        raise ValueError(f"decode_{fmt}: channels must be 0, 1, 3 or 4, got {channels!r}")
    dt = _dt.as_dtype(dtype)
    if dt not in (_dt.uint8, _dt.uint16) or (dt == _dt.uint16 and fmt not in ("png", "any")):
        raise TypeError(f"decode_{fmt}: dtype must be uint8 (uint16: PNG), got {dt.name}")
    attrs = {"format": fmt, "channels": int(channels), "dtype": dt}
    attrs["expand_animations"] = bool(extra.get("expand_animations", True))
    return apply("DecodeImage", [contents], attrs, name)


def decode_jpeg(
    contents: Any,
    channels: int = 0,
    ratio: int = 1,
    fancy_upscaling: bool = True,
    try_recover_truncated: bool = False,
    acceptable_fraction: float = 1,
    dct_method: str = "",
    name: str | None = None,
):
    """A JPEG file's pixels, uint8 ``[h, w, channels]`` (see the module docstring: the
    accurate integer DCT whatever ``dct_method`` asks). ``ratio`` (downscaling while decoding)
    other than 1 is not supported; the other options are accepted."""
    if ratio != 1:
        raise ValueError(f"decode_jpeg: ratio {ratio} is not supported (only 1)")
    return _decoder("jpeg", contents, channels, _dt.uint8, name or "DecodeJpeg")


def decode_png(contents: Any, channels: int = 0, dtype: Any = _dt.uint8, name: str | None = None):
    """A PNG file's pixels, ``[h, w, channels]`` of uint8 or uint16."""
    return _decoder("png", contents, channels, dtype, name or "DecodePng")


def decode_bmp(contents: Any, channels: int = 0, name: str | None = None):
    """A BMP file's pixels, uint8 ``[h, w, channels]``."""
    return _decoder("bmp", contents, channels, _dt.uint8, name or "DecodeBmp")


def decode_gif(contents: Any, name: str | None = None):
    """A GIF file's frames, uint8 ``[frames, h, w, 3]``."""
    return _decoder("gif", contents, 0, _dt.uint8, name or "DecodeGif")


def decode_image(
    contents: Any,
    channels: int | None = None,
    dtype: Any = _dt.uint8,
    name: str | None = None,
    expand_animations: bool = True,
):
    """Any JPEG, PNG, GIF or BMP file: ``[h, w, c]`` (an animated GIF ``[frames, h, w, 3]`` with
    ``expand_animations``). ``dtype`` float32 scales to [0, 1] as ``convert_image_dtype``."""
    dt = _dt.as_dtype(dtype)
    out = _decoder(
        "any",
        contents,
        channels or 0,
        dt if dt in (_dt.uint8, _dt.uint16) else _dt.uint8,
        name or "decode_image",
        expand_animations=expand_animations,
    )
    if dt not in (_dt.uint8, _dt.uint16):
        from .image import convert_image_dtype

        return convert_image_dtype(out, dt)
    return out


IsJpeg = defop("IsJpeg", differentiable=False)


@IsJpeg.shape
def _is_jpeg_shape(op):
    _string_scalar_input(op)
    return [(TensorShape([]), _dt.bool_)]


@IsJpeg.kernel("cpu")
def _is_jpeg(ctx, x):
    return np.array(_format_of(_scalar_bytes(ctx, x)) == "jpeg")


def is_jpeg(contents: Any, name: str | None = None):
    """Whether the bytes start as a JPEG file does."""
    return apply("IsJpeg", [contents], {}, name or "is_jpeg")


# ---- encoding ---------------------------------------------------------------------------------

EncodeImage = defop("EncodeImage", differentiable=False)


@EncodeImage.shape
def _encode_shape(op):
    x = op.inputs[0]
    fmt = op.attrs["format"]
    ok = (_dt.uint8, _dt.uint16) if fmt == "png" else (_dt.uint8,)
    if x.dtype not in ok:
        names = " or ".join(d.name for d in ok)
        raise InvalidArgumentError(
            f"{op.type} {op.name!r}: image must be {names}, got {x.dtype.name}"
        )
    if x.shape.ndims not in (None, 3):
        raise InvalidArgumentError(
            f"{op.type} {op.name!r}: image must be [height, width, channels], got {x.shape}"
        )
    return [(TensorShape([]), _dt.string)]


@EncodeImage.kernel("cpu")
def _encode(ctx, x):
    from PIL import Image

    at = ctx.attrs
    a = np.asarray(x)
    c = a.shape[-1]
    where = f"{ctx.op.type} {ctx.op.name!r}"
    modes = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"} if at["format"] == "png" else {1: "L", 3: "RGB"}
    if c not in modes:
        raise InvalidArgumentError(
            f"{where}: {at['format'].upper()} takes {sorted(modes)} channels, got {c} "
            f"(shape {list(a.shape)})"
        )
    buf = io.BytesIO()
    if a.dtype == np.uint16:
        if c != 1:
            raise InvalidArgumentError(f"{where}: 16-bit PNG here takes 1 channel, got {c}")
        img = Image.fromarray(a[..., 0].astype(np.uint16), mode="I;16")
    else:
        img = Image.fromarray(a[..., 0] if c == 1 else a, mode=modes[c])
    if at["format"] == "png":
        level = at["compression"]
        img.save(buf, format="PNG", compress_level=6 if level < 0 else level)
    else:
        img.save(buf, format="JPEG", quality=at["quality"])
    return np.array(buf.getvalue(), dtype=object)


def encode_png(image: Any, compression: int = -1, name: str | None = None):
    """A PNG file of a uint8 (or 1-channel uint16) ``[h, w, c]`` image; ``compression`` 0-9
    (-1: the default)."""
    if not -1 <= compression <= 9:
        raise ValueError(f"encode_png: compression must be in -1..9, got {compression}")
    attrs = {"format": "png", "compression": int(compression), "quality": 0}
    return apply("EncodeImage", [image], attrs, name or "EncodePng")


def encode_jpeg(
    image: Any, format: str = "", quality: int = 95, name: str | None = None, **unused: Any
):  # noqa: A002 - TF1's argument name
    """A JPEG file of a uint8 ``[h, w, c]`` image (c 1 or 3); ``quality`` 0-100."""
    if not 0 <= quality <= 100:
        raise ValueError(f"encode_jpeg: quality must be in 0..100, got {quality}")
    attrs = {"format": "jpeg", "compression": -1, "quality": int(quality)}
    return apply("EncodeImage", [image], attrs, name or "EncodeJpeg")
