"""Fourier transforms: TF's ``fft``/``ifft`` (and 2-D, 3-D) over the innermost dimensions of a
complex tensor, ``rfft``/``irfft`` (and 2-D, 3-D) between real signals and their half spectra,
with TF's gradients.

* ``fft`` is unnormalized, ``ifft`` divides by the transform's size (numpy's and TF's
  convention). Their gradients (TF's conjugate convention, see complex_ops.py): ``fft``'s is
  ``size * ifft(g)``, ``ifft``'s ``fft(g) / size``.
* ``rfft(x, fft_length)``: ``x`` cut or zero-padded to ``fft_length`` in its inner dimensions,
  its transform keeping ``fft_length[-1] // 2 + 1`` frequencies in the last one; ``irfft``
  the inverse (the input cut or padded to those frequencies). ``fft_length`` must be known
  when the graph is built (a Python list, a numpy array or a constant); without it, the
  input's static inner shape (``2 * (n - 1)`` in ``irfft``'s last dimension).
* ``rfft``'s gradient is the real part of the adjoint of the cut/pad-and-transform (what
  TF's ``_rfft_grad_helper`` computes where TF can: ``fft_length`` equal to the input's
  shape); ``irfft``'s is TF's: ``rfft(g) * mask / size`` with the mask 1 at the zero
  frequency (and at the Nyquist one when the length is even), 2 elsewhere.
* The simulator prices a transform of n points at 5 n log2(n) flops (a complex radix-2 FFT;
  half that for the real transforms).
"""

from __future__ import annotations

import math as _math
from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import Tensor, TensorShape
from ..registry import Cost, apply, convert_to_tensor, defop, nbytes, numel

__all__ = [
    "fft",
    "fft2d",
    "fft3d",
    "ifft",
    "ifft2d",
    "ifft3d",
    "irfft",
    "irfft2d",
    "irfft3d",
    "rfft",
    "rfft2d",
    "rfft3d",
]

_SWAP = {"backward": "forward", "forward": "backward"}


def _check_rank(op_name: str, x: Tensor, rank: int) -> None:
    nd = x.shape.ndims
    if nd is not None and nd < rank:
        raise InvalidArgumentError(
            f"{op_name}: input must have rank of at least {rank}, got shape {x.shape} ({x.name})"
        )


def _fft_cost(real: bool):
    def cost(op, ins, outs):
        rank = op.attrs["rank"]
        shape = ins[0]
        inner = [int(d) for d in shape[len(shape) - rank :]] if len(shape) >= rank else []
        n = max(int(np.prod(inner)) if inner else 1, 1)
        batch = numel(shape) // max(n, 1) if numel(shape) else 0
        if real:
            n = max(int(np.prod(op.attrs["fft_length"])), 1)
        flops = 5.0 * n * max(_math.log2(n), 1.0) * batch * (0.5 if real else 1.0)
        return Cost(
            flops,
            float(nbytes(shape, op.inputs[0].dtype)),
            float(nbytes(outs[0], op.outputs[0].dtype)),
        )

    return cost


# ---- complex to complex ----------------------------------------------------------------------


def _c2c_shape(op):
    x = op.inputs[0]
    if not x.dtype.is_complex:
        raise InvalidArgumentError(
            f"{op.type}: input must be complex64 or complex128, got {x.dtype.name} ({x.name})"
        )
    _check_rank(op.type, x, op.attrs["rank"])
    return [(x.shape, x.dtype)]


def _c2c(name: str, rank: int, inverse: bool):
    d = defop(name, shape=_c2c_shape, cost=_fft_cost(False))

    @d.kernel("cpu", "gpu", dtypes=_dt.COMPLEX)
    def kernel(ctx, x):
        xp = ctx.xp
        axes = tuple(range(x.ndim - rank, x.ndim))
        if x.size == 0:
            return xp.zeros_like(x)
        fn = xp.fft.ifftn if ctx.attrs["inverse"] else xp.fft.fftn
        return fn(x, axes=axes, norm=ctx.attrs["norm"]).astype(x.dtype, copy=False)

    @d.gradient
    def grad(op, g):
        # the adjoint: the other direction, the scaling moved to the other side
        at = op.attrs
        attrs = {"rank": at["rank"], "inverse": not at["inverse"], "norm": _SWAP[at["norm"]]}
        return [apply(_C2C_NAMES[(at["rank"], not at["inverse"])], [g], attrs, name=f"{name}Grad")]

    return d


_C2C_NAMES = {}
for _r, _suffix in ((1, ""), (2, "2D"), (3, "3D")):
    for _inv in (False, True):
        _n = ("IFFT" if _inv else "FFT") + _suffix
        _C2C_NAMES[(_r, _inv)] = _n
        _c2c(_n, _r, _inv)


def _c2c_fn(rank: int, inverse: bool, tf_name: str):
    op_type = _C2C_NAMES[(rank, inverse)]

    def fn(input: Any, name: str | None = None) -> Tensor:  # noqa: A002 - TF's name
        x = convert_to_tensor(input)
        if not x.dtype.is_complex:
            raise TypeError(
                f"{tf_name}: input must be complex64 or complex128, got {x.dtype.name} ({x.name})"
            )
        attrs = {"rank": rank, "inverse": inverse, "norm": "backward"}
        return apply(op_type, [x], attrs, name=name or op_type)

    fn.__name__ = tf_name
    fn.__doc__ = (
        f"TF's ``tf.signal.{tf_name}``: the {'inverse ' if inverse else ''}discrete Fourier "
        f"transform over the innermost {rank} dimension{'s' if rank > 1 else ''}"
        f"{' (divided by their size)' if inverse else ''}."
    )
    return fn


fft = _c2c_fn(1, False, "fft")
ifft = _c2c_fn(1, True, "ifft")
fft2d = _c2c_fn(2, False, "fft2d")
ifft2d = _c2c_fn(2, True, "ifft2d")
fft3d = _c2c_fn(3, False, "fft3d")
ifft3d = _c2c_fn(3, True, "ifft3d")


# ---- real to complex and back --------------------------------------------------------------


def _fit(xp: Any, x: Any, shape: tuple) -> Any:
    """``x`` cut or zero-padded at the end of its innermost ``len(shape)`` dimensions."""
    k = len(shape)
    lead = x.shape[: x.ndim - k]
    if tuple(x.shape[x.ndim - k :]) == tuple(shape):
        return x
    out = xp.zeros(lead + tuple(shape), dtype=x.dtype)
    src = tuple(slice(0, min(a, b)) for a, b in zip(x.shape[x.ndim - k :], shape))
    out[(Ellipsis, *src)] = x[(Ellipsis, *src)]
    return out


def _rfft_shape(op):
    x, n = op.inputs[0], op.attrs["fft_length"]
    rank = op.attrs["rank"]
    if x.dtype not in (_dt.float32, _dt.float64):
        raise InvalidArgumentError(
            f"{op.type}: input must be float32 or float64, got {x.dtype.name} ({x.name})"
        )
    _check_rank(op.type, x, rank)
    out = _dt.complex64 if x.dtype == _dt.float32 else _dt.complex128
    if x.shape.ndims is None:
        return [(TensorShape(None), out)]
    inner = list(n[:-1]) + [n[-1] // 2 + 1]
    return [(TensorShape(list(x.shape.dims[: x.shape.ndims - rank]) + inner), out)]


def _irfft_shape(op):
    x, n = op.inputs[0], op.attrs["fft_length"]
    rank = op.attrs["rank"]
    if not x.dtype.is_complex:
        raise InvalidArgumentError(
            f"{op.type}: input must be complex64 or complex128, got {x.dtype.name} ({x.name})"
        )
    _check_rank(op.type, x, rank)
    if x.shape.ndims is None:
        return [(TensorShape(None), x.dtype.real_dtype)]
    return [(TensorShape(list(x.shape.dims[: x.shape.ndims - rank]) + list(n)), x.dtype.real_dtype)]


def _real_ops(rank: int, suffix: str) -> None:
    r = defop(f"RFFT{suffix}", shape=_rfft_shape, cost=_fft_cost(True))
    ir = defop(f"IRFFT{suffix}", shape=_irfft_shape, cost=_fft_cost(True))

    @r.kernel("cpu", "gpu", dtypes=(_dt.float32, _dt.float64))
    def _rfft(ctx, x):
        xp, n = ctx.xp, tuple(ctx.attrs["fft_length"])
        out = np.complex64 if x.dtype == np.float32 else np.complex128
        axes = tuple(range(x.ndim - rank, x.ndim))
        if x.size == 0 or 0 in n:
            shape = x.shape[: x.ndim - rank] + n[:-1] + (n[-1] // 2 + 1,)
            return xp.zeros(shape, dtype=out)
        return xp.fft.rfftn(_fit(xp, x, n), s=n, axes=axes).astype(out, copy=False)

    @ir.kernel("cpu", "gpu", dtypes=_dt.COMPLEX)
    def _irfft(ctx, x):
        xp, n = ctx.xp, tuple(ctx.attrs["fft_length"])
        half = n[:-1] + (n[-1] // 2 + 1,)
        axes = tuple(range(x.ndim - rank, x.ndim))
        if x.size == 0 or 0 in n:
            return xp.zeros(x.shape[: x.ndim - rank] + n, dtype=x.real.dtype)
        return xp.fft.irfftn(_fit(xp, x, half), s=n, axes=axes).astype(x.real.dtype, copy=False)

    @r.gradient
    def _rfft_grad(op, g):
        return [apply("RFFTGrad", [g, op.inputs[0]], dict(op.attrs), name=f"RFFT{suffix}Grad")]

    @ir.gradient
    def _irfft_grad(op, g):
        return [apply("IRFFTGrad", [g, op.inputs[0]], dict(op.attrs), name=f"IRFFT{suffix}Grad")]


for _r, _suffix in ((1, ""), (2, "2D"), (3, "3D")):
    _real_ops(_r, _suffix)

# the gradients of RFFT and IRFFT (second derivatives: none)
RFFTGrad = defop("RFFTGrad", cost=_fft_cost(True), differentiable=False)
IRFFTGrad = defop("IRFFTGrad", cost=_fft_cost(True), differentiable=False)


@RFFTGrad.shape
def _rfft_grad_shape(op):
    return [(op.inputs[1].shape, op.inputs[1].dtype)]


@IRFFTGrad.shape
def _irfft_grad_shape(op):
    return [(op.inputs[1].shape, op.inputs[1].dtype)]


@RFFTGrad.kernel("cpu", "gpu", dtypes=_dt.COMPLEX)
def _rfft_grad_kernel(ctx, g, x):
    """Re(A^H g) for A = the half-spectrum transform of ``x`` cut or padded to fft_length: g
    on the kept frequencies, zeros on the others, through the unnormalized inverse."""
    xp, n = ctx.xp, tuple(ctx.attrs["fft_length"])
    rank = len(n)
    axes = tuple(range(g.ndim - rank, g.ndim))
    full = xp.zeros(g.shape[: g.ndim - rank] + n, dtype=g.dtype)
    full[..., : n[-1] // 2 + 1] = g
    adj = xp.fft.ifftn(full, axes=axes, norm="forward").real.astype(x.dtype, copy=False)
    return _fit(xp, adj, tuple(x.shape[x.ndim - rank :]))


@IRFFTGrad.kernel("cpu", "gpu", dtypes=_dt.FLOATS)
def _irfft_grad_kernel(ctx, g, x):
    """TF's: rfft(g) * mask / size, the mask 2 on the frequencies whose conjugates irfft also
    used (1 at frequency 0 and, for an even length, at n / 2)."""
    xp, n = ctx.xp, tuple(ctx.attrs["fft_length"])
    rank = len(n)
    axes = tuple(range(g.ndim - rank, g.ndim))
    spec = xp.fft.rfftn(g, s=n, axes=axes)
    half = n[-1] // 2 + 1
    mask = np.full(half, 2.0)
    mask[0] = 1.0
    if n[-1] % 2 == 0:
        mask[-1] = 1.0
    spec = spec * xp.asarray(mask / float(np.prod(n)))
    return _fit(xp, spec.astype(x.dtype, copy=False), tuple(x.shape[x.ndim - rank :]))


def _static_fft_length(fn_name: str, fft_length: Any, rank: int) -> tuple | None:
    if fft_length is None:
        return None
    if isinstance(fft_length, Tensor):
        from .array import Const  # noqa: F401 - the op whose value a constant holds

        if fft_length.op.type != "Const":
            raise InvalidArgumentError(
                f"{fn_name}: fft_length must be known when the graph is built (a list or a "
                f"constant), got the tensor {fft_length.name}"
            )
        fft_length = fft_length.op.attrs["value"]
    n = tuple(int(v) for v in np.ravel(np.asarray(fft_length)))
    if len(n) != rank or any(v < 0 for v in n):
        raise InvalidArgumentError(
            f"{fn_name}: fft_length must hold {rank} non-negative lengths, got {list(n)}"
        )
    return n


def _inner_static(fn_name: str, x: Tensor, rank: int) -> list:
    _check_rank(fn_name, x, rank)
    dims = x.shape.dims[x.shape.ndims - rank :] if x.shape.ndims is not None else None
    if dims is None or any(d is None for d in dims):
        raise InvalidArgumentError(
            f"{fn_name}: without fft_length, {x.name}'s innermost {rank} dimensions must be "
            f"known, got shape {x.shape}"
        )
    return [int(d) for d in dims]


def _rfft_fn(rank: int, suffix: str):
    op_type = f"RFFT{suffix}"
    tf_name = f"rfft{suffix.lower()}"

    def fn(input_tensor: Any, fft_length: Any = None, name: str | None = None) -> Tensor:
        x = convert_to_tensor(input_tensor)
        if x.dtype.is_integer:
            from .array import cast

            x = cast(x, _dt.float32)
        if x.dtype not in (_dt.float32, _dt.float64):
            raise TypeError(
                f"{tf_name}: input must be float32 or float64, got {x.dtype.name} ({x.name})"
            )
        n = _static_fft_length(tf_name, fft_length, rank)
        if n is None:
            n = tuple(_inner_static(tf_name, x, rank))
        return apply(op_type, [x], {"rank": rank, "fft_length": n}, name=name or op_type)

    fn.__name__ = tf_name
    fn.__doc__ = (
        f"TF's ``tf.signal.{tf_name}``: the real-input Fourier transform over the innermost "
        f"{rank} dimension(s), ``fft_length[-1] // 2 + 1`` frequencies in the last."
    )
    return fn


def _irfft_fn(rank: int, suffix: str):
    op_type = f"IRFFT{suffix}"
    tf_name = f"irfft{suffix.lower()}"

    def fn(input_tensor: Any, fft_length: Any = None, name: str | None = None) -> Tensor:
        x = convert_to_tensor(input_tensor)
        if not x.dtype.is_complex:
            raise TypeError(
                f"{tf_name}: input must be complex64 or complex128, got {x.dtype.name} ({x.name})"
            )
        n = _static_fft_length(tf_name, fft_length, rank)
        if n is None:
            inner = _inner_static(tf_name, x, rank)
            n = tuple(inner[:-1] + [2 * (inner[-1] - 1)])
        return apply(op_type, [x], {"rank": rank, "fft_length": n}, name=name or op_type)

    fn.__name__ = tf_name
    fn.__doc__ = (
        f"TF's ``tf.signal.{tf_name}``: the inverse of ``rfft{suffix.lower()}``, a real signal "
        "of ``fft_length`` samples in its innermost dimension(s)."
    )
    return fn


rfft = _rfft_fn(1, "")
rfft2d = _rfft_fn(2, "2D")
rfft3d = _rfft_fn(3, "3D")
irfft = _irfft_fn(1, "")
irfft2d = _irfft_fn(2, "2D")
irfft3d = _irfft_fn(3, "3D")
