"""Audio: TF's ``decode_wav``/``encode_wav`` (``tf.audio``) and the speech features of its
audio ops (``contrib.framework``'s ``audio_ops``, ``gen_audio_ops``): ``audio_spectrogram`` and
``mfcc``, computed as TF's kernels compute them (CPU only, not differentiable).

* ``decode_wav``: a 16-bit PCM RIFF/WAVE file (chunks other than ``fmt `` and ``data``
  skipped) to float32 ``[samples, channels]`` of sample / 32768, and its sample rate;
  ``desired_channels`` keeps the first channels or repeats the last one, ``desired_samples``
  cuts or pads with zeros. ``encode_wav``: the reverse, each sample clamped and rounded from
  x * 32768 (TF's rule: 0.5 -> 16384, 1.0 -> 32767).
* ``audio_spectrogram``: for each channel, frames of ``window_size`` samples every ``stride``
  (only whole frames), times a periodic Hann window, zero-padded to the next power of two, and
  the squared magnitude of their real FFT (or its square root); ``[channels, frames, bins]``.
* ``mfcc``: from a squared-magnitude spectrogram, TF's mel filterbank (``filterbank_channel_count``
  triangular bands evenly spaced on the mel scale 1127 ln(1 + f/700) between
  ``lower_frequency_limit`` and ``upper_frequency_limit``, each bin's magnitude, the square root
  of its power, split between its two neighbouring bands), the log of each band (floored at
  1e-12) and the first ``dct_coefficient_count`` coefficients of a DCT-II scaled by
  sqrt(2 / bands). Values equal TF 2.21's (tests/test_audio.py).
"""

from __future__ import annotations

import collections
import functools
import struct
from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import TensorShape
from ..registry import apply, apply_op, convert_to_tensor, defop
from .image_codecs import _scalar_bytes, _string_scalar_input

__all__ = ["audio_spectrogram", "decode_wav", "encode_wav", "mfcc"]

DecodeWav = defop("DecodeWav", differentiable=False)
EncodeWav = defop("EncodeWav", differentiable=False)
AudioSpectrogram = defop("AudioSpectrogram", differentiable=False)
Mfcc = defop("Mfcc", differentiable=False)

DecodeWavResult = collections.namedtuple("DecodeWav", ["audio", "sample_rate"])


# ---- WAV files ------------------------------------------------------------------------------------


@DecodeWav.shape
def _decode_wav_shape(op):
    _string_scalar_input(op)
    at = op.attrs
    dims = [at["desired_samples"] if at["desired_samples"] > 0 else None]
    dims.append(at["desired_channels"] if at["desired_channels"] > 0 else None)
    return [(TensorShape(dims), _dt.float32), (TensorShape([]), _dt.int32)]


def _parse_wav(data: bytes, where: str) -> tuple[np.ndarray, int]:
    def need(n: int, at: int, what: str) -> None:
        if at + n > len(data):
            raise InvalidArgumentError(
                f"{where}: data too short when trying to read {what} ({len(data)} bytes)"
            )

    need(12, 0, "the RIFF header")
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise InvalidArgumentError(
            f"{where}: header mismatch: expected RIFF....WAVE, found {data[:4]!r}....{data[8:12]!r}"
        )
    pos, fmt, samples = 12, None, None
    while pos + 8 <= len(data):
        tag, size = data[pos : pos + 4], struct.unpack_from("<I", data, pos + 4)[0]
        pos += 8
        if tag == b"fmt ":
            need(16, pos, "the fmt chunk")
            fmt = struct.unpack_from("<HHIIHH", data, pos)
        elif tag == b"data":
            if fmt is None:
                raise InvalidArgumentError(f"{where}: a data chunk before the fmt chunk")
            need(size, pos, "the data chunk")
            samples = data[pos : pos + size]
            break
        pos += size + (size & 1)  # chunks are padded to an even length
    if fmt is None or samples is None:
        raise InvalidArgumentError(f"{where}: data too short: no fmt or data chunk found")
    audio_format, channels, rate, _, _, bits = fmt
    if audio_format != 1:
        raise InvalidArgumentError(
            f"{where}: bad audio format {audio_format}: only PCM (1) is read"
        )
    if bits != 16:
        raise InvalidArgumentError(f"{where}: can only read 16-bit WAV files, but received {bits}")
    if channels < 1:
        raise InvalidArgumentError(f"{where}: the file has {channels} channels")
    frames = len(samples) // (2 * channels)
    pcm = np.frombuffer(samples[: frames * 2 * channels], dtype="<i2").reshape(frames, channels)
    return pcm.astype(np.float32) / np.float32(32768.0), rate


@DecodeWav.kernel("cpu")
def _decode_wav(ctx, contents):
    where = f"DecodeWav {ctx.op.name!r}"
    audio, rate = _parse_wav(_scalar_bytes(ctx, contents), where)
    want_c, want_n = ctx.attrs["desired_channels"], ctx.attrs["desired_samples"]
    if want_c > 0 and want_c != audio.shape[1]:
        idx = np.minimum(np.arange(want_c), audio.shape[1] - 1)  # extra channels repeat the last
        audio = audio[:, idx]
    if want_n > 0 and want_n != audio.shape[0]:
        out = np.zeros((want_n, audio.shape[1]), np.float32)
        n = min(want_n, audio.shape[0])
        out[:n] = audio[:n]
        audio = out
    return np.ascontiguousarray(audio), np.int32(rate)


@EncodeWav.shape
def _encode_wav_shape(op):
    a, r = op.inputs
    if a.shape.ndims not in (None, 2) or r.shape.ndims not in (None, 0):
        raise InvalidArgumentError(
            f"EncodeWav {op.name!r}: audio must be [samples, channels] and sample_rate a scalar, "
            f"got {a.shape} and {r.shape}"
        )
    return [(TensorShape([]), _dt.string)]


@EncodeWav.kernel("cpu")
def _encode_wav(ctx, audio, rate):
    a = np.asarray(audio, np.float64)
    if a.ndim != 2:
        raise InvalidArgumentError(f"EncodeWav {ctx.op.name!r}: audio must be 2-D, got {a.shape}")
    y = a * 32768.0
    pcm = np.clip(np.sign(y) * np.floor(np.abs(y) + 0.5), -32768, 32767).astype("<i2")
    channels, sr = a.shape[1], int(rate)
    body = pcm.tobytes()
    head = b"RIFF" + struct.pack("<I", 36 + len(body)) + b"WAVE"
    head += b"fmt " + struct.pack(
        "<IHHIIHH", 16, 1, channels, sr, sr * 2 * channels, 2 * channels, 16
    )
    head += b"data" + struct.pack("<I", len(body))
    return np.array(head + body, dtype=object)


def decode_wav(
    contents: Any, desired_channels: int = -1, desired_samples: int = -1, name: Any = None
):
    """A 16-bit PCM WAV file's samples, float32 ``[samples, channels]`` in [-1, 1), and its
    sample rate (int32): ``(audio, sample_rate)``."""
    op = apply_op(
        "DecodeWav",
        [contents],
        {"desired_channels": int(desired_channels), "desired_samples": int(desired_samples)},
        name=name or "DecodeWav",
    )
    return DecodeWavResult(*op.outputs)


def encode_wav(audio: Any, sample_rate: Any, name: Any = None) -> Any:
    """float32 ``[samples, channels]`` as a 16-bit PCM WAV file (a scalar string)."""
    audio = convert_to_tensor(audio, _dt.float32)
    rate = convert_to_tensor(sample_rate, _dt.int32)
    return apply("EncodeWav", [audio, rate], {}, name or "EncodeWav")


# ---- spectrogram and MFCC -------------------------------------------------------------------------


def _fft_length(window: int) -> int:
    return 1 << max(int(np.ceil(np.log2(window))), 0)


@AudioSpectrogram.shape
def _spectrogram_shape(op):
    x, at = op.inputs[0], op.attrs
    if x.shape.ndims not in (None, 2):
        raise InvalidArgumentError(
            f"AudioSpectrogram {op.name!r}: input must be [samples, channels], got {x.shape}"
        )
    bins = _fft_length(at["window_size"]) // 2 + 1
    channels = samples = None
    if x.shape.ndims == 2:
        samples, channels = x.shape.as_list()
    frames = None
    if samples is not None:
        frames = (
            0 if samples < at["window_size"] else 1 + (samples - at["window_size"]) // at["stride"]
        )
    return [(TensorShape([channels, frames, bins]), _dt.float32)]


@AudioSpectrogram.kernel("cpu")
def _spectrogram(ctx, x):
    ws, st, sq = ctx.attrs["window_size"], ctx.attrs["stride"], ctx.attrs["magnitude_squared"]
    a = np.asarray(x, np.float64)
    if a.ndim != 2:
        raise InvalidArgumentError(
            f"AudioSpectrogram {ctx.op.name!r}: input must be 2-D [samples, channels], got {a.shape}"
        )
    n, fft = a.shape[0], _fft_length(ws)
    frames = 0 if n < ws else 1 + (n - ws) // st
    window = 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(ws) / ws)  # periodic Hann
    starts = np.arange(frames) * st
    segs = a.T[:, starts[:, None] + np.arange(ws)[None, :]] * window  # [channels, frames, ws]
    z = np.fft.rfft(segs, fft, axis=-1)
    power = z.real**2 + z.imag**2
    return (power if sq else np.sqrt(power)).astype(np.float32)


def _mel(f: Any) -> Any:
    return 1127.0 * np.log1p(np.asarray(f, np.float64) / 700.0)


@functools.lru_cache(maxsize=32)
def _mfcc_matrices(bins: int, rate: float, upper: float, lower: float, bands: int, coeffs: int):
    """(filterbank [bands, bins], DCT [coeffs, bands]) as TF's MfccMelFilterbank and MfccDct
    build them."""
    low, high = _mel(lower), _mel(upper)
    centers = low + (high - low) / (bands + 1) * (np.arange(bands + 1) + 1)
    hz = 0.5 * rate / (bins - 1)
    start, end = int(1.5 + lower / hz), int(upper / hz)
    bank = np.zeros((bands, bins))
    channel = 0
    for i in range(start, min(end, bins - 1) + 1):
        m = _mel(i * hz)
        while channel < bands and centers[channel] < m:
            channel += 1
        band = channel - 1
        if band >= 0:
            w = (centers[band + 1] - m) / (centers[band + 1] - centers[band])
            bank[band, i] += w
        else:
            w = (centers[0] - m) / (centers[0] - low)
        if band + 1 < bands:
            bank[band + 1, i] += 1.0 - w
    k = np.arange(coeffs)[:, None]
    j = np.arange(bands)[None, :]
    dct = np.sqrt(2.0 / bands) * np.cos(k * (np.pi / bands) * (j + 0.5))
    return bank, dct


@Mfcc.shape
def _mfcc_shape(op):
    s = op.inputs[0].shape
    if s.ndims not in (None, 3):
        raise InvalidArgumentError(
            f"Mfcc {op.name!r}: spectrogram must be [channels, frames, bins], got {s}"
        )
    lead = [None, None] if s.ndims is None else s.as_list()[:2]
    return [(TensorShape([*lead, op.attrs["dct_coefficient_count"]]), _dt.float32)]


@Mfcc.kernel("cpu")
def _mfcc(ctx, spectrogram, sample_rate):
    at = ctx.attrs
    s = np.asarray(spectrogram, np.float64)
    where = f"Mfcc {ctx.op.name!r}"
    if s.ndim != 3 or s.shape[-1] < 2:
        raise InvalidArgumentError(
            f"{where}: spectrogram must be [channels, frames, bins], got {s.shape}"
        )
    rate = float(sample_rate)
    if rate <= 0:
        raise InvalidArgumentError(f"{where}: sample_rate must be positive, got {rate}")
    bank, dct = _mfcc_matrices(
        s.shape[-1], rate, float(at["upper_frequency_limit"]), float(at["lower_frequency_limit"]),
        int(at["filterbank_channel_count"]), int(at["dct_coefficient_count"]),
    )  # fmt: skip
    energies = np.sqrt(s) @ bank.T
    return (np.log(np.maximum(energies, 1e-12)) @ dct.T).astype(np.float32)


def audio_spectrogram(
    input: Any,  # noqa: A002 - TF's name
    window_size: int,
    stride: int,
    magnitude_squared: bool = False,
    name: Any = None,
) -> Any:
    """The spectrogram of each channel of ``input`` ([samples, channels]): see the module."""
    if int(window_size) < 1 or int(stride) < 1:
        raise InvalidArgumentError(
            f"audio_spectrogram: window_size and stride must be positive, got {window_size}, {stride}"
        )
    attrs = {
        "window_size": int(window_size),
        "stride": int(stride),
        "magnitude_squared": bool(magnitude_squared),
    }
    return apply("AudioSpectrogram", [convert_to_tensor(input, _dt.float32)], attrs,
                 name or "AudioSpectrogram")  # fmt: skip


def mfcc(
    spectrogram: Any,
    sample_rate: Any,
    upper_frequency_limit: float = 4000,
    lower_frequency_limit: float = 20,
    filterbank_channel_count: int = 40,
    dct_coefficient_count: int = 13,
    name: Any = None,
) -> Any:
    """Mel-frequency cepstral coefficients of a squared-magnitude spectrogram (see the module)."""
    lo, hi = float(lower_frequency_limit), float(upper_frequency_limit)
    bands, coeffs = int(filterbank_channel_count), int(dct_coefficient_count)
    if not 0 <= lo < hi:
        raise InvalidArgumentError(
            f"mfcc: need 0 <= lower_frequency_limit < upper_frequency_limit, got {lo}, {hi}"
        )
    if bands < 1 or coeffs < 1:
        raise InvalidArgumentError(
            f"mfcc: filterbank_channel_count and dct_coefficient_count must be positive, got "
            f"{bands}, {coeffs}"
        )
    attrs = {
        "upper_frequency_limit": hi,
        "lower_frequency_limit": lo,
        "filterbank_channel_count": bands,
        "dct_coefficient_count": coeffs,
    }
    rate = convert_to_tensor(sample_rate, _dt.int32)
    return apply("Mfcc", [convert_to_tensor(spectrogram, _dt.float32), rate], attrs, name or "Mfcc")
