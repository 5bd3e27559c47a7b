"""Complex numbers: ``complex``, ``real``, ``imag``, ``conj``, ``angle`` and the absolute value of
a complex tensor (TF's ``ComplexAbs``), with TF's gradients.

TF's convention for a gradient through complex values (``tf.gradients``): the gradient passed
back to a complex tensor ``z`` is ``conj(dL/dz)`` summed with ``dL/dconj(z)``: for a holomorphic
``f``, ``grad_z = grad_f * conj(f'(z))`` (``Mul``: ``grad * conj(y)``), so for a real loss it
is ``dL/dRe(z) + i dL/dIm(z)``. ``real``'s gradient is ``complex(g, 0)``, ``imag``'s
``complex(0, g)``, ``conj``'s ``conj(g)``, ``complex``'s ``(real(g), imag(g))``, ``abs``'s
``g * z / |z|`` (0 where z is 0) and ``angle``'s ``-g / (Im z + i Re z)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import Tensor
from ..registry import (
    apply,
    broadcast_shape,
    convert_pair,
    convert_to_tensor,
    defop,
    elementwise_cost,
)

__all__ = ["angle", "complex", "conj", "imag", "real", "complex_abs"]


def _complex_of(real_dtype: _dt.DType) -> _dt.DType:
    return _dt.complex64 if real_dtype == _dt.float32 else _dt.complex128


# ---- Complex(real, imag) ------------------------------------------------------------------

Complex = defop("Complex", cost=elementwise_cost(1))


@Complex.shape
def _complex_shape(op):
    ((shape, dt),) = broadcast_shape(op)
    if dt not in (_dt.float32, _dt.float64):
        raise InvalidArgumentError(
            f"Complex: real and imag must be float32 or float64, got {dt.name}"
        )
    return [(shape, _complex_of(dt))]


@Complex.kernel("cpu", "gpu", dtypes=(_dt.float32, _dt.float64))
def _complex(ctx, re, im):
    xp = ctx.xp
    shape = np.broadcast_shapes(re.shape, im.shape)
    out = xp.empty(shape, dtype=np.complex64 if re.dtype == np.float32 else np.complex128)
    out.real = re
    out.imag = im
    return out


@Complex.gradient
def _complex_grad(op, g):
    from .math import _unbroadcast

    re, im = op.inputs
    return [_unbroadcast(real(g), re), _unbroadcast(imag(g), im)]


def complex(real: Any, imag: Any, name: str | None = None) -> Tensor:  # noqa: A001 - TF's name
    """TF's ``tf.complex``: ``real + i imag`` elementwise (broadcasting); float32 parts make
    complex64, float64 parts complex128. Raises TypeError for other or mixed dtypes."""
    re, im = convert_pair(real, imag)
    if re.dtype != im.dtype or re.dtype not in (_dt.float32, _dt.float64):
        raise TypeError(
            f"complex: the real and imag parts have dtypes {re.dtype.name} and {im.dtype.name}; "
            "they must be the same, float32 or float64"
        )
    return apply("Complex", [re, im], name=name or "Complex")


# ---- Real, Imag, Conj, Angle, ComplexAbs ---------------------------------------------------


def _to_real_shape(op):
    x = op.inputs[0]
    if not x.dtype.is_complex:
        raise InvalidArgumentError(f"{op.type}: input must be complex, got {x.dtype.name}")
    return [(x.shape, x.dtype.real_dtype)]


def _part(name: str, fn: Any, flops: float = 1.0):
    d = defop(name, shape=_to_real_shape, cost=elementwise_cost(flops))

    @d.kernel("cpu", "gpu", dtypes=_dt.COMPLEX)
    def kernel(ctx, x):
        return ctx.xp.ascontiguousarray(fn(ctx.xp, x)).astype(x.real.dtype, copy=False)

    return d


Real = _part("Real", lambda xp, x: xp.real(x))
Imag = _part("Imag", lambda xp, x: xp.imag(x))
Angle = _part("Angle", lambda xp, x: xp.angle(x), 10.0)
ComplexAbs = _part("ComplexAbs", lambda xp, x: xp.abs(x), 4.0)


def _complex_shape_unchanged(op):
    x = op.inputs[0]
    if not x.dtype.is_complex:
        raise InvalidArgumentError(f"{op.type}: input must be complex, got {x.dtype.name}")
    return [(x.shape, x.dtype)]


Conj = defop("Conj", shape=_complex_shape_unchanged, cost=elementwise_cost(1))


@Conj.kernel("cpu", "gpu", dtypes=_dt.COMPLEX)
def _conj(ctx, x):
    return ctx.xp.conj(x)


Conj.gradient(lambda op, g: [conj(g)])


@Real.gradient
def _real_grad(op, g):
    from .math import zeros_like

    return [complex(g, zeros_like(g))]


@Imag.gradient
def _imag_grad(op, g):
    from .math import zeros_like

    return [complex(zeros_like(g), g)]


@Angle.gradient
def _angle_grad(op, g):
    """-g / (Im x + i Re x), as TF's."""
    from .math import multiply, negative, reciprocal, zeros_like

    x = op.inputs[0]
    z = reciprocal(complex(imag(x), real(x)))
    return [negative(multiply(complex(g, zeros_like(g)), z))]


# the gradient of |x|: g * x / |x|, zero where x is zero (TF's div_no_nan)
ComplexAbsGrad = defop("ComplexAbsGrad", cost=elementwise_cost(8), differentiable=False)


@ComplexAbsGrad.shape
def _cag_shape(op):
    return [(op.inputs[1].shape, op.inputs[1].dtype)]


@ComplexAbsGrad.kernel("cpu", "gpu", dtypes=_dt.FLOATS)
def _complex_abs_grad(ctx, g, x, y):
    xp = ctx.xp
    safe = xp.where(y == 0, xp.ones_like(y), y)
    out = (g / safe) * x
    return xp.where(y == 0, xp.zeros_like(out), out).astype(x.dtype, copy=False)


@ComplexAbs.gradient
def _complex_abs_grad_fn(op, g):
    return [apply("ComplexAbsGrad", [g, op.inputs[0], op.outputs[0]], name="ComplexAbsGrad")]


def real(input: Any, name: str | None = None) -> Tensor:  # noqa: A002 - TF's name
    """TF's ``tf.real``/``tf.math.real``: a complex tensor's real part (float32 for complex64,
    float64 for complex128); a real tensor is returned as it is."""
    x = convert_to_tensor(input)
    if not x.dtype.is_complex:
        return x
    return apply("Real", [x], name=name or "Real")


def imag(input: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """TF's ``tf.imag``: a complex tensor's imaginary part; zeros for a real tensor."""
    x = convert_to_tensor(input)
    if not x.dtype.is_complex:
        from .math import zeros_like

        return zeros_like(x, name=name or "Imag")
    return apply("Imag", [x], name=name or "Imag")


def conj(x: Any, name: str | None = None) -> Tensor:
    """TF's ``tf.conj``: the complex conjugate; a real tensor is returned as it is."""
    x = convert_to_tensor(x)
    if not x.dtype.is_complex:
        if not x.dtype.is_numeric:
            raise TypeError(f"conj: expected a numeric tensor, got {x.dtype.name} ({x.name})")
        return x
    return apply("Conj", [x], name=name or "Conj")


def angle(input: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """TF's ``tf.angle``: the argument of each complex element, in (-pi, pi]; for a real tensor
    pi where it is negative and 0 elsewhere, as TF's."""
    x = convert_to_tensor(input)
    if not x.dtype.is_complex:
        from .math import less, where, zeros_like

        zero = zeros_like(x)
        pi = convert_to_tensor(np.pi, dtype=x.dtype) + zero
        return where(less(x, zero), pi, zero, name=name or "Angle")
    return apply("Angle", [x], name=name or "Angle")


def complex_abs(x: Any, name: str | None = None) -> Tensor:
    """``|x|`` of a complex tensor, a real tensor (``tf.abs`` of a complex tensor)."""
    return apply("ComplexAbs", [convert_to_tensor(x)], name=name or "ComplexAbs")


def conj_if_complex(t: Tensor) -> Tensor:
    """``conj(t)`` for a complex tensor, ``t`` itself otherwise (what TF's gradients apply)."""
    return apply("Conj", [t], name="Conj") if t.dtype.is_complex else t
