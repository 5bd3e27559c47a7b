"""TF's ``tf.signal`` (also ``tf.contrib.signal``) beyond the Fourier transforms: ``frame``,
``overlap_and_add``, ``hann_window``/``hamming_window``, ``stft``/``inverse_stft`` (and
``inverse_stft_window_fn``), ``linear_to_mel_weight_matrix``,
``mfccs_from_log_mel_spectrograms`` and ``dct``/``idct`` (types 1-4, ``norm`` None or
"ortho", as scipy's and TF's).

All are built from other ops, so their gradients are those ops' (``frame`` a gather,
``overlap_and_add`` a segment sum, ``dct`` a product with the DCT matrix). Lengths and steps
(``frame_length``, ``frame_step``, ``fft_length``, ``n``) must be Python ints (or constants)
and the framed axis's length known when the graph is built; the windows and the mel matrix are
constants computed as TF's ops compute them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import Tensor, name_scope
from ..registry import convert_to_tensor
from . import spectral

__all__ = [
    "dct",
    "frame",
    "hamming_window",
    "hann_window",
    "idct",
    "inverse_stft",
    "inverse_stft_window_fn",
    "linear_to_mel_weight_matrix",
    "mfccs_from_log_mel_spectrograms",
    "overlap_and_add",
    "stft",
]


def _static_int(fn: str, what: str, v: Any) -> int:
    if isinstance(v, Tensor):
        if v.op.type != "Const":
            raise InvalidArgumentError(
                f"{fn}: {what} must be known when the graph is built, got the tensor {v.name}"
            )
        v = v.op.attrs["value"]
    a = np.asarray(v)
    if a.ndim != 0 or a.dtype.kind not in "iu":
        raise InvalidArgumentError(f"{fn}: {what} must be an integer scalar, got {v!r}")
    return int(a)


def _static_dim(fn: str, x: Tensor, axis: int) -> int:
    if x.shape.ndims is None or x.shape.dims[axis] is None:
        raise InvalidArgumentError(
            f"{fn}: the length of axis {axis} of {x.name} must be known when the graph is "
            f"built, got shape {x.shape}"
        )
    return int(x.shape.dims[axis])


# ---- frame and overlap_and_add ------------------------------------------------------------


def frame(
    signal: Any,
    frame_length: Any,
    frame_step: Any,
    pad_end: bool = False,
    pad_value: Any = 0,
    axis: int = -1,
    name: str | None = None,
) -> Tensor:
    """TF's ``tf.signal.frame``: frames of ``frame_length`` samples every ``frame_step`` along
    ``axis`` (replaced by ``[frames, frame_length]``); with ``pad_end`` the signal is padded
    at its end with ``pad_value`` to ``ceil(n / frame_step)`` whole frames, else only the whole
    frames it holds are kept."""
    from .manip import concat, fill, gather

    with name_scope(name or "frame"):
        x = convert_to_tensor(signal, name="signal")
        fl = _static_int("frame", "frame_length", frame_length)
        fs = _static_int("frame", "frame_step", frame_step)
        if fl < 0 or fs <= 0:
            raise InvalidArgumentError(
                f"frame: frame_length must be >= 0 and frame_step > 0, got {fl} and {fs}"
            )
        if x.shape.ndims is None or x.shape.ndims == 0:
            raise InvalidArgumentError(f"frame: signal must have rank >= 1, got {x.shape}")
        rank = x.shape.ndims
        ax = axis + rank if axis < 0 else axis
        if not 0 <= ax < rank:
            raise InvalidArgumentError(f"frame: axis {axis} out of range for rank {rank}")
        n = _static_dim("frame", x, ax)
        if pad_end:
            frames = -(-n // fs)
            want = max((frames - 1) * fs + fl, n) if frames else n
            if want > n:
                dims = list(x.shape.as_list())
                dims[ax] = want - n
                if any(d is None for d in dims):
                    raise InvalidArgumentError(
                        f"frame: pad_end needs {x.name}'s shape known, got {x.shape}"
                    )
                pad = fill(dims, convert_to_tensor(pad_value, dtype=x.dtype))
                x = concat([x, pad], ax)
        else:
            frames = max(0, 1 + (n - fl) // fs) if n >= fl else 0
        idx = (np.arange(frames)[:, None] * fs + np.arange(fl)[None, :]).astype(np.int32)
        if ax == 0:  # (a gather along axis 0 passes back IndexedSlices; TF's frame, dense)
            from .manip import expand_dims, squeeze

            return squeeze(gather(expand_dims(x, 0), idx, axis=1), [0])
        return gather(x, idx, axis=ax)


def overlap_and_add(signal: Any, frame_step: Any, name: str | None = None) -> Tensor:
    """TF's ``tf.signal.overlap_and_add``: ``[..., frames, frame_length]`` frames, each
    ``frame_step`` after the previous, summed into ``[..., (frames - 1) * frame_step +
    frame_length]``."""
    from .array import reshape
    from .manip import transpose, unsorted_segment_sum

    with name_scope(name or "overlap_and_add"):
        x = convert_to_tensor(signal, name="signal")
        fs = _static_int("overlap_and_add", "frame_step", frame_step)
        if x.shape.ndims is None or x.shape.ndims < 2:
            raise InvalidArgumentError(
                f"overlap_and_add: signal must have rank >= 2, got shape {x.shape}"
            )
        if fs <= 0:
            raise InvalidArgumentError(f"overlap_and_add: frame_step must be > 0, got {fs}")
        rank = x.shape.ndims
        frames = _static_dim("overlap_and_add", x, rank - 2)
        fl = _static_dim("overlap_and_add", x, rank - 1)
        out_len = (frames - 1) * fs + fl if frames else 0
        ids = (np.arange(frames)[:, None] * fs + np.arange(fl)[None, :]).astype(np.int32)
        perm = [rank - 2, rank - 1] + list(range(rank - 2))
        summed = unsorted_segment_sum(transpose(x, perm), ids, out_len)  # [out_len, outer...]
        out = transpose(summed, list(range(1, rank - 1)) + [0])
        outer = x.shape.as_list()[: rank - 2]
        if all(d is not None for d in outer):
            out = reshape(out, outer + [out_len])
        return out


# ---- windows ------------------------------------------------------------------------------


def _raised_cosine(
    fn: str, window_length: Any, periodic: Any, dtype: Any, a: float, b: float
) -> Tensor:
    from .array import constant

    n = _static_int(fn, "window_length", window_length)
    dt = _dt.as_dtype(dtype)
    if not dt.is_floating:
        raise ValueError(f"{fn}: dtype must be a floating point type, got {dt.name}")
    if n == 1:
        return constant(np.ones(1, dt.np), name=fn)
    npdt = dt.np
    # TF's denominator: n - 1, or n for a periodic window of even length
    denom = npdt.type(n - 1 + (1 - n % 2) * int(bool(periodic)))
    k = np.arange(n).astype(npdt)
    w = npdt.type(a) - npdt.type(b) * np.cos(npdt.type(2.0 * np.pi) * k / denom).astype(npdt)
    return constant(w.astype(npdt), name=fn)


def hann_window(
    window_length: Any, periodic: bool = True, dtype: Any = _dt.float32, name: str | None = None
) -> Tensor:
    """TF's ``tf.signal.hann_window``: ``0.5 - 0.5 cos(2 pi k / N)``, N the length when
    ``periodic`` (for spectral analysis), the length - 1 otherwise; ``[1]`` for length 1."""
    return _raised_cosine("hann_window", window_length, periodic, dtype, 0.5, 0.5)


def hamming_window(
    window_length: Any, periodic: bool = True, dtype: Any = _dt.float32, name: str | None = None
) -> Tensor:
    """TF's ``tf.signal.hamming_window``: ``0.54 - 0.46 cos(2 pi k / N)`` (N as in Hann's)."""
    return _raised_cosine("hamming_window", window_length, periodic, dtype, 0.54, 0.46)


# ---- STFT ---------------------------------------------------------------------------------


def _next_pow2(n: int) -> int:
    return 1 << max(int(n) - 1, 0).bit_length()


def stft(
    signals: Any,
    frame_length: Any,
    frame_step: Any,
    fft_length: Any = None,
    window_fn: Any = hann_window,
    pad_end: bool = False,
    name: str | None = None,
) -> Tensor:
    """TF's ``tf.signal.stft``: ``rfft`` of the windowed frames of the last axis
    (``fft_length`` by default the smallest power of 2 >= ``frame_length``)."""
    from .math import multiply

    with name_scope(name or "stft"):
        x = convert_to_tensor(signals, name="signals")
        fl = _static_int("stft", "frame_length", frame_length)
        fs = _static_int("stft", "frame_step", frame_step)
        n = _next_pow2(fl) if fft_length is None else _static_int("stft", "fft_length", fft_length)
        framed = frame(x, fl, fs, pad_end=pad_end)
        if window_fn is not None:
            framed = multiply(framed, window_fn(fl, dtype=framed.dtype))
        return spectral.rfft(framed, [n])


def inverse_stft_window_fn(
    frame_step: Any, forward_window_fn: Any = hann_window, name: str | None = None
) -> Any:
    """TF's ``tf.signal.inverse_stft_window_fn``: a window function giving the forward window
    divided by the sum of its overlapping squares (Griffin and Lim's equation 7), so that
    ``inverse_stft`` inverts ``stft``."""

    def window_fn(frame_length: Any, dtype: Any = _dt.float32) -> Tensor:
        from .array import reshape
        from .manip import pad, tile
        from .math import divide, reduce_sum, square

        with name_scope(name or "inverse_stft_window_fn"):
            fs = _static_int("inverse_stft_window_fn", "frame_step", frame_step)
            fl = _static_int("inverse_stft_window_fn", "frame_length", frame_length)
            forward = forward_window_fn(fl, dtype=dtype)
            overlaps = -(-fl // fs)
            denom = pad(square(forward), [[0, overlaps * fs - fl]])
            denom = reduce_sum(reshape(denom, [overlaps, fs]), 0, keepdims=True)
            denom = reshape(tile(denom, [overlaps, 1]), [overlaps * fs])
            return divide(forward, denom[:fl])

    return window_fn


def inverse_stft(
    stfts: Any,
    frame_length: Any,
    frame_step: Any,
    fft_length: Any = None,
    window_fn: Any = hann_window,
    name: str | None = None,
) -> Tensor:
    """TF's ``tf.signal.inverse_stft``: ``irfft`` of each frame, cut or zero-padded to
    ``frame_length``, times the window, overlapped and added. Pass
    ``window_fn=inverse_stft_window_fn(frame_step)`` to invert ``stft``."""
    from .manip import pad
    from .math import multiply

    with name_scope(name or "inverse_stft"):
        s = convert_to_tensor(stfts, name="stfts")
        if not s.dtype.is_complex:
            raise InvalidArgumentError(f"inverse_stft: stfts must be complex, got {s.dtype.name}")
        fl = _static_int("inverse_stft", "frame_length", frame_length)
        fs = _static_int("inverse_stft", "frame_step", frame_step)
        n = (
            _next_pow2(fl)
            if fft_length is None
            else _static_int("inverse_stft", "fft_length", fft_length)
        )
        frames = spectral.irfft(s, [n])
        rank = frames.shape.ndims
        if rank is None:
            raise InvalidArgumentError("inverse_stft: stfts must have a known rank")
        if n > fl:
            frames = frames[..., :fl]
        elif n < fl:
            frames = pad(frames, [[0, 0]] * (rank - 1) + [[0, fl - n]])
        if window_fn is not None:
            frames = multiply(frames, window_fn(fl, dtype=s.dtype.real_dtype))
        return overlap_and_add(frames, fs)


# ---- mel filterbank and MFCCs -------------------------------------------------------------


def _hertz_to_mel(f: np.ndarray) -> np.ndarray:
    dt = f.dtype.type
    return dt(1127.0) * np.log(dt(1.0) + f / dt(700.0))


def linear_to_mel_weight_matrix(
    num_mel_bins: int = 20,
    num_spectrogram_bins: int = 129,
    sample_rate: Any = 8000,
    lower_edge_hertz: float = 125.0,
    upper_edge_hertz: float = 3800.0,
    dtype: Any = _dt.float32,
    name: str | None = None,
) -> Tensor:
    """TF's ``tf.signal.linear_to_mel_weight_matrix``: ``[num_spectrogram_bins,
    num_mel_bins]`` triangular filters evenly spaced on the HTK mel scale ``1127 ln(1 +
    f / 700)`` between the edges (the DC bin zero), a constant computed as TF's ops do."""
    from .array import constant

    dt = _dt.as_dtype(dtype)
    if not dt.is_floating:
        raise ValueError(f"linear_to_mel_weight_matrix: dtype must be floating, got {dt.name}")
    nm = _static_int("linear_to_mel_weight_matrix", "num_mel_bins", num_mel_bins)
    ns = _static_int("linear_to_mel_weight_matrix", "num_spectrogram_bins", num_spectrogram_bins)
    if nm <= 0:
        raise ValueError("linear_to_mel_weight_matrix: num_mel_bins must be positive")
    if ns <= 0:
        raise ValueError("linear_to_mel_weight_matrix: num_spectrogram_bins must be positive")
    lo, hi, rate = float(lower_edge_hertz), float(upper_edge_hertz), float(sample_rate)
    if lo < 0.0:
        raise ValueError(f"linear_to_mel_weight_matrix: lower_edge_hertz must be >= 0, got {lo}")
    if lo >= hi:
        raise ValueError(
            f"linear_to_mel_weight_matrix: lower_edge_hertz {lo} >= upper_edge_hertz {hi}"
        )
    if rate <= 0.0:
        raise ValueError(f"linear_to_mel_weight_matrix: sample_rate must be positive, got {rate}")
    if hi > rate / 2:
        raise ValueError(
            f"linear_to_mel_weight_matrix: upper_edge_hertz {hi} exceeds the Nyquist frequency "
            f"{rate / 2}"
        )
    t = dt.np.type
    nyquist = t(rate) / t(2.0)
    lin = np.linspace(t(0.0), nyquist, ns, dtype=dt.np)[1:]
    bins_mel = _hertz_to_mel(lin)[:, None]
    edges = np.linspace(
        _hertz_to_mel(np.array(lo, dt.np)), _hertz_to_mel(np.array(hi, dt.np)), nm + 2
    )
    edges = edges.astype(dt.np)
    lower, center, upper = edges[None, :-2], edges[None, 1:-1], edges[None, 2:]
    lower_slopes = (bins_mel - lower) / (center - lower)
    upper_slopes = (upper - bins_mel) / (upper - center)
    w = np.maximum(t(0.0), np.minimum(lower_slopes, upper_slopes)).astype(dt.np)
    w = np.concatenate([np.zeros((1, nm), dt.np), w], axis=0)
    return constant(w, name=name or "linear_to_mel_weight_matrix")


def mfccs_from_log_mel_spectrograms(log_mel_spectrograms: Any, name: str | None = None) -> Tensor:
    """TF's ``tf.signal.mfccs_from_log_mel_spectrograms``: the unnormalized DCT-II of the last
    axis times ``rsqrt(2 * num_mel_bins)`` (HTK's scaling)."""
    from .math import multiply

    with name_scope(name or "mfccs_from_log_mel_spectrograms"):
        x = convert_to_tensor(log_mel_spectrograms, name="log_mel_spectrograms")
        m = _static_dim("mfccs_from_log_mel_spectrograms", x, -1)
        if m == 0:
            raise ValueError(
                f"mfccs_from_log_mel_spectrograms: num_mel_bins must be positive, got {x.shape}"
            )
        d = dct(x, type=2)
        return multiply(d, convert_to_tensor(1.0 / np.sqrt(2.0 * m), dtype=d.dtype))


# ---- DCT ----------------------------------------------------------------------------------


def _dct_matrix(kind: int, n: int, norm: str | None) -> np.ndarray:
    """M with y = M @ x for scipy's (and TF's) DCT of type ``kind`` of length ``n``."""
    k = np.arange(n)[:, None].astype(np.float64)
    j = np.arange(n)[None, :].astype(np.float64)
    if kind == 1:
        m = 2.0 * np.cos(np.pi * k * j / (n - 1))
        m[:, 0] = 1.0
        m[:, -1] = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
        return m
    if kind == 2:
        m = 2.0 * np.cos(np.pi * k * (2 * j + 1) / (2 * n))
        if norm == "ortho":
            m[0] *= np.sqrt(1.0 / (4 * n))
            m[1:] *= np.sqrt(1.0 / (2 * n))
        return m
    if kind == 3:
        if norm == "ortho":
            return _dct_matrix(2, n, "ortho").T
        m = 2.0 * np.cos(np.pi * j * (2 * k + 1) / (2 * n))
        m[:, 0] = 1.0
        return m
    m = 2.0 * np.cos(np.pi * (2 * j + 1) * (2 * k + 1) / (4 * n))
    if norm == "ortho":
        m *= np.sqrt(1.0 / (2 * n))
    return m


def dct(
    input: Any,  # noqa: A002 - TF's name
    type: int = 2,  # noqa: A002
    n: Any = None,
    axis: int = -1,
    norm: str | None = None,
    name: str | None = None,
) -> Tensor:
    """TF's ``tf.signal.dct``: the discrete cosine transform of the last axis, types 1-4 as
    scipy's ``fftpack.dct`` (``norm`` None or "ortho", not for type 1); ``n`` cuts or zero-pads
    the input first. A product with the DCT matrix (its gradient the transposed product)."""
    from .array import constant, reshape
    from .manip import concat, pad
    from .math import matmul

    if type not in (1, 2, 3, 4):
        raise ValueError(f"dct: only types 1, 2, 3 and 4 are supported, got type {type}")
    if axis != -1:
        raise NotImplementedError(f"dct: axis must be -1, got {axis}")
    if norm not in (None, "ortho"):
        raise ValueError(f"dct: unknown normalization {norm!r}; expected None or 'ortho'")
    if type == 1 and norm == "ortho":
        raise ValueError("dct: normalization is not supported for the type-I DCT")
    with name_scope(name or "dct"):
        x = convert_to_tensor(input, name="input")
        if not x.dtype.is_floating:
            raise ValueError(f"dct: input must be float32 or float64, got {x.dtype.name}")
        length = _static_dim("dct", x, -1)
        rank = x.shape.ndims
        if n is not None:
            nn = _static_int("dct", "n", n)
            if nn < 1:
                raise ValueError(f"dct: n must be positive, got {nn}")
            if nn < length:
                x = x[..., :nn]
            elif nn > length:
                x = pad(x, [[0, 0]] * (rank - 1) + [[0, nn - length]])
            length = nn
        if type == 1 and length < 2:
            raise ValueError(f"dct: the type-I DCT needs more than one sample, got {length}")
        mt = constant(_dct_matrix(type, length, norm).T.astype(x.dtype.np))
        if rank == 2:
            return matmul(x, mt)
        from .array import shape as shape_of

        flat = reshape(x, [-1, length])
        out = matmul(flat, mt)
        static = x.shape.as_list()
        if all(d is not None for d in static):
            return reshape(out, static)
        return reshape(out, concat([shape_of(x)[:-1], [length]], 0))


def idct(
    input: Any,  # noqa: A002
    type: int = 2,  # noqa: A002
    n: Any = None,
    axis: int = -1,
    norm: str | None = None,
    name: str | None = None,
) -> Tensor:
    """TF's ``tf.signal.idct``: the DCT of the inverse type (2 <-> 3; 1 and 4 are their own),
    which inverts ``dct`` up to a factor (``2 N`` for types 2-4 unnormalized; none with
    "ortho")."""
    inverse = {1: 1, 2: 3, 3: 2, 4: 4}.get(type)
    if inverse is None:
        raise ValueError(f"idct: only types 1, 2, 3 and 4 are supported, got type {type}")
    return dct(input, type=inverse, n=n, axis=axis, norm=norm, name=name or "idct")
