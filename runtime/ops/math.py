"""Math ops: elementwise arithmetic with broadcasting, comparisons, matmul, reductions."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import Tensor, TensorShape, name_scope
from ..registry import (
    Cost,
    apply,
    broadcast_shape,
    convert_pair,
    convert_to_tensor,
    defop,
    elementwise_cost,
    nbytes,
    numel,
    same_dtype,
    unchanged_shape,
)
from . import intraop

# ---- helpers for gradients of broadcasting ops ------------------------------------------------

SumTo = defop("SumTo")


@SumTo.shape
def _sum_to_shape(op):
    return [(op.inputs[1].shape, op.inputs[0].dtype)]


@SumTo.kernel("cpu", "gpu", aliases_input=True)
def _sum_to(ctx, g, like):
    return sum_to_shape(ctx.xp, g, like.shape)


@SumTo.gradient
def _sum_to_grad(op, g):
    return [broadcast_like(g, op.inputs[0]), None]


SumTo.cost(elementwise_cost(1))


def sum_to_shape(xp: Any, g: Any, shape: tuple) -> Any:
    """Sum ``g`` over the axes that broadcasting added or stretched to reach ``shape``.

    The result keeps ``g``'s dtype (numpy would widen int32 sums to int64).
    """
    shape = tuple(shape)
    if g.shape == shape:
        return g
    if g.ndim < len(shape):
        g = g.reshape((1,) * (len(shape) - g.ndim) + tuple(g.shape))
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        i + lead for i, d in enumerate(shape) if d == 1 and g.shape[i + lead] != 1
    )
    r = g.sum(axis=axes, keepdims=True, dtype=g.dtype) if axes else g
    return r.reshape(shape)


def _reduction_axes(x_shape: TensorShape, y_shape: TensorShape) -> tuple | None:
    """TF's ``_InferGradientReductionAxes``: the axes of a broadcast result that ``x``'s
    gradient sums (axes where ``x`` is 1, or absent, and ``y`` is not), as far as the static
    shapes say; None where broadcasting is decided only when the step runs (an unknown size
    against an unknown or a size other than 1)."""
    if x_shape.ndims is None or y_shape.ndims is None:
        return None
    xs, ys = x_shape.as_list(), y_shape.as_list()
    rank = max(len(xs), len(ys))
    axes = []
    for a in range(rank):
        xd = 1 if a < rank - len(xs) else xs[a - (rank - len(xs))]
        yd = 1 if a < rank - len(ys) else ys[a - (rank - len(ys))]
        if xd == 1 and yd != 1:
            axes.append(a)
        elif yd == 1 and xd != 1:
            continue
        elif xd is None or yd is None:
            return None
    return tuple(axes)


def _unbroadcast(g: Tensor | None, x: Tensor, other: Tensor | None = None) -> Tensor | None:
    """Gradient ``g`` of a broadcast result, reduced to the shape of input ``x``. Given the
    op's ``other`` input, as TF's gradients of broadcasting ops: where the static shapes say
    which axes broadcasting stretched, ``g`` itself when ``x`` was not stretched, else
    ``Reshape(Sum(g, axes), shape of x)`` (programs walk that structure: baselines' K-FAC finds
    a bias's output gradient as the Sum's input); otherwise one ``SumTo`` (the axes found when
    the step runs)."""
    if g is None:
        return None
    if x.shape.is_fully_defined() and g.shape.is_fully_defined() and x.shape == g.shape:
        return g
    if other is not None:
        axes = _reduction_axes(x.shape, other.shape)
        if axes is not None:
            if not axes and x.shape.ndims >= other.shape.ndims:
                return g
            from .array import reshape, reshape_like

            s = apply("Sum", [g], {"axis": axes, "keepdims": False}, name="Sum")
            if x.shape.is_fully_defined():
                return reshape(s, x.shape.as_list(), name="Reshape")
            return reshape_like(s, x, name="Reshape")
    return apply("SumTo", [g, x], name="SumTo")


BroadcastLike = defop("BroadcastLike")


@BroadcastLike.shape
def _bl_shape(op):
    from ..registry import broadcast_shapes

    return [
        (
            broadcast_shapes("BroadcastLike", op.inputs[0].shape, op.inputs[1].shape),
            op.inputs[0].dtype,
        )
    ]


@BroadcastLike.kernel("cpu", "gpu", aliases_input=True)  # a read-only view of x
def _broadcast_like(ctx, x, like):
    return ctx.xp.broadcast_to(x, np.broadcast_shapes(x.shape, like.shape))


# a view: no bytes move (its consumers read them), no buffer is allocated
BroadcastLike.cost(lambda op, ins, outs: Cost())


@BroadcastLike.gradient
def _bl_grad(op, g):
    return [_unbroadcast(g, op.inputs[0]), None]


def broadcast_like(x: Any, like: Any, name: str | None = None) -> Tensor:
    return apply("BroadcastLike", [x, like], name=name or "BroadcastLike")


# ---- binary elementwise ------------------------------------------------------------------------


def _binary(
    name: str, np_fn: Any, flops: float = 1.0, dtypes: Any = _dt.NUMERIC, cfactor: float = 4.0
):
    d = defop(name, shape=broadcast_shape, cost=elementwise_cost(flops, cfactor))

    def kernel(ctx, x, y):
        return np_fn(x, y)

    kernel.__name__ = f"_{name.lower()}"
    d.kernel("cpu", dtypes=dtypes)(kernel)

    def gpu_kernel(ctx, x, y):
        return getattr(ctx.xp, np_fn.__name__)(x, y)

    d.kernel("gpu", dtypes=dtypes)(gpu_kernel)
    return d


_NC = _dt.NUMERIC_COMPLEX
_FC = _dt.FLOAT_COMPLEX
Add = _binary("Add", np.add, dtypes=_NC, cfactor=2.0)  # two real sums
Sub = _binary("Sub", np.subtract, dtypes=_NC, cfactor=2.0)
Mul = _binary("Mul", np.multiply, dtypes=_NC, cfactor=6.0)  # four products, two sums
Maximum = _binary("Maximum", np.maximum)
Minimum = _binary("Minimum", np.minimum)
Pow = _binary("Pow", np.power, flops=10.0, dtypes=_NC)
RealDiv = _binary("RealDiv", np.true_divide, dtypes=_FC)
FloorDiv = _binary("FloorDiv", np.floor_divide)
FloorMod = _binary("FloorMod", np.mod)
SquaredDifference = defop("SquaredDifference", shape=broadcast_shape, cost=elementwise_cost(2))


@SquaredDifference.kernel("cpu", "gpu", dtypes=_dt.NUMERIC)
def _sqdiff(ctx, x, y):
    d = x - y
    return ctx.xp.multiply(d, d, out=d) if d.ndim else d * d


@Add.gradient
def _add_grad(op, g):
    x, y = op.inputs
    return [_unbroadcast(g, x, y), _unbroadcast(g, y, x)]


@Sub.gradient
def _sub_grad(op, g):
    x, y = op.inputs
    return [_unbroadcast(g, x, y), _unbroadcast(negative(g), y, x)]


def _cj(t: Tensor) -> Tensor:
    """conj(t) for a complex t (TF's gradients conjugate the other factors), else t."""
    from .complex_ops import conj_if_complex

    return conj_if_complex(t)


@Mul.gradient
def _mul_grad(op, g):
    x, y = op.inputs
    return [_unbroadcast(multiply(g, _cj(y)), x, y), _unbroadcast(multiply(g, _cj(x)), y, x)]


@RealDiv.gradient
def _div_grad(op, g):
    x, y = (_cj(t) for t in op.inputs)
    gx = divide(g, y)
    gy = negative(multiply(gx, divide(x, y)))
    return [_unbroadcast(gx, x, y), _unbroadcast(gy, y, x)]


@Pow.gradient
def _pow_grad(op, g):
    x, y = (_cj(t) for t in op.inputs)
    z = _cj(op.outputs[0])
    gx = multiply(g, multiply(y, pow(x, subtract(y, convert_to_tensor(1, dtype=y.dtype)))))
    keep = not_equal(x, zeros_like(x)) if x.dtype.is_complex else greater(x, 0)
    safe_x = where(keep, x, ones_like(x))
    gy = multiply(g, multiply(z, log(safe_x)))
    return [_unbroadcast(gx, x, y), _unbroadcast(gy, y, x)]


def _minmax_grad(pick_x_fn):
    def grad(op, g):
        x, y = op.inputs
        mask = pick_x_fn(x, y)
        zeros = zeros_like(g)
        return [
            _unbroadcast(where(mask, g, zeros), x, y),
            _unbroadcast(where(mask, zeros, g), y, x),
        ]

    return grad


Maximum.gradient(_minmax_grad(lambda x, y: greater_equal(x, y)))
Minimum.gradient(_minmax_grad(lambda x, y: less_equal(x, y)))


@SquaredDifference.gradient
def _sqdiff_grad(op, g):
    x, y = op.inputs
    d = multiply(multiply(convert_to_tensor(2, dtype=g.dtype), g), subtract(x, y))
    return [_unbroadcast(d, x, y), _unbroadcast(negative(d), y, x)]


FloorDiv.gradient(lambda op, g: [None, None])


@FloorMod.gradient
def _floormod_grad(op, g):
    """x - floor(x / y) * y: dx = g, dy = -floor(x / y) * g (as TF; zero almost everywhere)."""
    x, y = op.inputs
    return [_unbroadcast(g, x, y), _unbroadcast(multiply(g, negative(floordiv(x, y))), y, x)]


# ---- comparisons and logic ---------------------------------------------------------------------


def _compare_shape(op):
    ((shape, _),) = broadcast_shape(op)
    return [(shape, _dt.bool_)]


_ORDERED = tuple(d for d in _dt.NON_STRING if not d.is_complex)  # complex numbers have no order


def _compare(name: str, np_fn: Any, dtypes: Any = _ORDERED, strings: bool = False):
    d = defop(name, shape=_compare_shape, cost=elementwise_cost(1), differentiable=False)

    def kernel(ctx, x, y):
        return np.asarray(np_fn(x, y), dtype=np.bool_)

    d.kernel("cpu", dtypes=(*dtypes, _dt.string) if strings else dtypes)(kernel)
    d.kernel("gpu", dtypes=dtypes)(lambda ctx, x, y: getattr(ctx.xp, np_fn.__name__)(x, y))
    return d


Less = _compare("Less", np.less)
LessEqual = _compare("LessEqual", np.less_equal)
Greater = _compare("Greater", np.greater)
GreaterEqual = _compare("GreaterEqual", np.greater_equal)
Equal = _compare("Equal", np.equal, dtypes=_dt.NON_STRING, strings=True)
NotEqual = _compare("NotEqual", np.not_equal, dtypes=_dt.NON_STRING, strings=True)
LogicalAnd = _compare("LogicalAnd", np.logical_and, dtypes=[_dt.bool_])
LogicalOr = _compare("LogicalOr", np.logical_or, dtypes=[_dt.bool_])

LogicalNot = defop("LogicalNot", shape=unchanged_shape, differentiable=False)


@LogicalNot.kernel("cpu", "gpu", dtypes=[_dt.bool_])
def _logical_not(ctx, x):
    return ctx.xp.logical_not(x)


# ---- Select (where) ----------------------------------------------------------------------------

Select = defop("Select", cost=elementwise_cost(1))


@Select.shape
def _select_shape(op):
    from ..registry import broadcast_shapes

    c, x, y = op.inputs
    if c.dtype != _dt.bool_:
        raise InvalidArgumentError(f"where: condition must be bool, got {c.dtype.name}")
    if x.dtype != y.dtype:
        raise InvalidArgumentError(
            f"where: x and y dtypes differ: {x.dtype.name} vs {y.dtype.name}"
        )
    xy = broadcast_shapes("Select", x.shape, y.shape)
    if c.shape.ndims is None:  # TF1: the condition has x's shape (or is a scalar or its rows)
        return [(xy, x.dtype)]
    return [(broadcast_shapes("Select", c.shape, xy), x.dtype)]


@Select.kernel("cpu", "gpu")
def _select(ctx, c, x, y):
    return ctx.xp.where(c, x, y)


@Select.gradient
def _select_grad(op, g):
    c, x, y = op.inputs
    z = zeros_like(g)
    return [None, _unbroadcast(where(c, g, z), x), _unbroadcast(where(c, z, g), y)]


def where(condition: Any, x: Any = None, y: Any = None, name: str | None = None) -> Tensor:
    """TF1's ``tf.where``: elementwise ``x if condition else y``; a condition of rank 1 beside
    ``x`` and ``y`` of one higher-rank shape picks whole rows when its length is their first
    dimension, as TF1 does; otherwise the shapes broadcast (``where_v2``). With ``condition``
    alone, the int64 coordinates of its true elements (``[n, rank]``)."""
    if x is None and y is None:  # WP2
        from .segments import where_indices

        return where_indices(condition, name=name)
    if x is None or y is None:
        raise InvalidArgumentError(
            "where: x without y (or y without x) is not supported; pass both or neither"
        )
    x, y = convert_pair(x, y)
    c = convert_to_tensor(condition)
    rank = x.shape.ndims
    if (
        c.shape.ndims == 1
        and rank is not None
        and rank > 1
        and x.shape.is_compatible_with(y.shape)
        and y.shape.ndims == rank
    ):
        n, first = c.shape.dims[0], x.shape.dims[0]
        if n is None or first is None or n == first:  # TF1's row selection
            from .array import reshape

            c = reshape(c, [-1] + [1] * (rank - 1))
    return apply("Select", [c, x, y], name=name or "Select")


def where_v2(condition: Any, x: Any = None, y: Any = None, name: str | None = None) -> Tensor:
    """``where`` with the condition, ``x`` and ``y`` broadcast together (TF's ``where_v2``)."""
    if x is None and y is None:
        return where(condition, name=name)
    if x is None or y is None:
        raise InvalidArgumentError(
            "where_v2: x without y (or y without x) is not supported; pass both or neither"
        )
    x, y = convert_pair(x, y)
    return apply("Select", [condition, x, y], name=name or "SelectV2")


# ---- unary elementwise -------------------------------------------------------------------------


def _unary(name: str, np_fn: Any, flops: float = 1.0, dtypes: Any = _dt.NUMERIC):
    d = defop(name, shape=unchanged_shape, cost=elementwise_cost(flops))
    d.kernel("cpu", dtypes=dtypes)(lambda ctx, x: np_fn(x))
    d.kernel("gpu", dtypes=dtypes)(lambda ctx, x: getattr(ctx.xp, np_fn.__name__)(x))
    return d


Neg = _unary("Neg", np.negative, dtypes=_NC)
Abs = _unary("Abs", np.abs)
Sign = _unary("Sign", np.sign, dtypes=_NC)
Square = _unary("Square", np.square, dtypes=_NC)
Exp = _unary("Exp", np.exp, 10.0, _FC)
Log = _unary("Log", np.log, 10.0, _FC)
Log1p = _unary("Log1p", np.log1p, 10.0, _FC)
Sqrt = _unary("Sqrt", np.sqrt, 4.0, _FC)
Reciprocal = _unary("Reciprocal", np.reciprocal, 4.0, _FC)
Floor = _unary("Floor", np.floor, 1.0, _dt.FLOATS)
Ceil = _unary("Ceil", np.ceil, 1.0, _dt.FLOATS)
Round = _unary("Round", np.round, 1.0, _dt.FLOATS)
Rsqrt = defop("Rsqrt", shape=unchanged_shape, cost=elementwise_cost(5.0))


@Rsqrt.kernel("cpu", "gpu", dtypes=_FC)
def _rsqrt(ctx, x):
    r = ctx.xp.sqrt(x)
    return ctx.xp.reciprocal(r, out=r) if r.ndim else 1 / r


Neg.gradient(lambda op, g: [negative(g)])
Abs.gradient(lambda op, g: [multiply(g, sign(op.inputs[0]))])
Sign.gradient(lambda op, g: [zeros_like(op.inputs[0])])
Floor.gradient(lambda op, g: [None])
Ceil.gradient(lambda op, g: [None])
Round.gradient(lambda op, g: [None])


@Square.gradient
def _square_grad(op, g):
    x = _cj(op.inputs[0])
    return [multiply(g, multiply(convert_to_tensor(2, dtype=x.dtype), x))]


# (for complex inputs TF multiplies by the conjugate of the derivative)
Exp.gradient(lambda op, g: [multiply(g, _cj(op.outputs[0]))])
Log.gradient(lambda op, g: [divide(g, _cj(op.inputs[0]))])
Log1p.gradient(
    lambda op, g: [divide(g, _cj(add(op.inputs[0], convert_to_tensor(1, dtype=g.dtype))))]
)


@Sqrt.gradient
def _sqrt_grad(op, g):
    y = _cj(op.outputs[0])
    return [divide(multiply(g, convert_to_tensor(0.5, dtype=y.dtype)), y)]


@Rsqrt.gradient
def _rsqrt_grad(op, g):
    y = _cj(op.outputs[0])
    half = convert_to_tensor(-0.5, dtype=y.dtype)
    return [multiply(g, multiply(half, multiply(y, multiply(y, y))))]


@Reciprocal.gradient
def _reciprocal_grad(op, g):
    y = _cj(op.outputs[0])
    return [negative(multiply(g, multiply(y, y)))]


# ---- AddN --------------------------------------------------------------------------------------

AddN = defop("AddN")


@AddN.shape
def _addn_shape(op):
    dt = same_dtype(op)
    s = op.inputs[0].shape
    for t in op.inputs[1:]:
        if not s.is_compatible_with(t.shape):
            raise InvalidArgumentError(f"AddN: inputs have different shapes {s} and {t.shape}")
        s = s.merge_with(t.shape)
    return [(s, dt)]


@AddN.kernel("cpu", "gpu")
def _add_n(ctx, *xs):
    r = xs[0] + xs[1] if len(xs) > 1 else xs[0].copy()
    for x in xs[2:]:
        r += x
    return r


AddN.gradient(lambda op, g: [g] * len(op.inputs))


@AddN.cost
def _addn_cost(op, ins, outs):
    """k inputs of n elements: k - 1 additions per element."""
    base = elementwise_cost(1)(op, ins, outs)
    return Cost(base.flops * max(len(ins) - 1, 0), base.bytes_read, base.bytes_written)


def add_n(inputs: list, name: str | None = None) -> Tensor:
    inputs = [convert_to_tensor(x) for x in inputs]
    if not inputs:
        raise InvalidArgumentError("add_n needs at least one input")
    if len(inputs) == 1:
        return inputs[0]
    return apply("AddN", inputs, name=name or "AddN")


# ---- MatMul and BatchMatMul ---------------------------------------------------------------------

MatMul = defop("MatMul")


@MatMul.shape
def _matmul_shape(op):
    a, b = op.inputs
    dt = same_dtype(op)
    ta, tb = op.attrs["transpose_a"], op.attrs["transpose_b"]
    for t in (a, b):
        if t.shape.ndims is not None and t.shape.ndims != 2:
            raise InvalidArgumentError(
                f"MatMul: {t.name} must be rank 2, got shape {t.shape} (use hb.matmul for batches)"
            )
    m, k1 = (a.shape[1], a.shape[0]) if ta else (a.shape[0], a.shape[1])
    k2, n = (b.shape[1], b.shape[0]) if tb else (b.shape[0], b.shape[1])
    if k1 is not None and k2 is not None and k1 != k2:
        raise InvalidArgumentError(
            f"MatMul: inner dimensions differ: {a.name} {a.shape}{' (T)' if ta else ''} "
            f"and {b.name} {b.shape}{' (T)' if tb else ''} ({k1} vs {k2})"
        )
    return [(TensorShape([m, n]), dt)]


@MatMul.kernel("cpu", "gpu", dtypes=_NC)
def _matmul(ctx, a, b):
    at = ctx.attrs
    if at["transpose_a"]:
        a = a.T
    if at["transpose_b"]:
        b = b.T
    if ctx.xp is np:
        return intraop.matmul(a, b)
    return a @ b


@MatMul.gradient
def _matmul_grad(op, g):
    a, b = (_cj(t) for t in op.inputs)  # TF's: the conjugates for complex inputs
    ta, tb = op.attrs["transpose_a"], op.attrs["transpose_b"]
    if not ta and not tb:
        return [matmul(g, b, transpose_b=True), matmul(a, g, transpose_a=True)]
    if not ta and tb:
        return [matmul(g, b), matmul(g, a, transpose_a=True)]
    if ta and not tb:
        return [matmul(b, g, transpose_b=True), matmul(a, g)]
    return [
        matmul(b, g, transpose_a=True, transpose_b=True),
        matmul(g, a, transpose_a=True, transpose_b=True),
    ]


@MatMul.cost
def _matmul_cost(op, ins, outs):
    (a, b), (o,) = ins, outs
    k = a[0] if op.attrs["transpose_a"] else a[1]
    dt = op.inputs[0].dtype
    f = 2.0 * numel(o) * k * (4.0 if dt.is_complex else 1.0)  # complex: four real products
    return Cost(f, float(nbytes(a, dt) + nbytes(b, dt)), float(nbytes(o, dt)))


BatchMatMul = defop("BatchMatMul")


@BatchMatMul.shape
def _bmm_shape(op):
    from ..registry import broadcast_shapes

    a, b = op.inputs
    dt = same_dtype(op)
    if a.shape.ndims is None or b.shape.ndims is None:
        return [(TensorShape(None), dt)]
    if a.shape.ndims < 2 or b.shape.ndims < 2:
        raise InvalidArgumentError(
            f"BatchMatMul: inputs need rank >= 2, got {a.shape} and {b.shape}"
        )
    ad, bd = list(a.shape.dims), list(b.shape.dims)
    if op.attrs["adj_x"]:
        ad[-1], ad[-2] = ad[-2], ad[-1]
    if op.attrs["adj_y"]:
        bd[-1], bd[-2] = bd[-2], bd[-1]
    if ad[-1] is not None and bd[-2] is not None and ad[-1] != bd[-2]:
        raise InvalidArgumentError(
            f"BatchMatMul: inner dimensions differ: {a.shape} and {b.shape} ({ad[-1]} vs {bd[-2]})"
        )
    batch = broadcast_shapes("BatchMatMul", TensorShape(ad[:-2]), TensorShape(bd[:-2]))
    return [(TensorShape(list(batch.dims) + [ad[-2], bd[-1]]), dt)]


@BatchMatMul.kernel("cpu", "gpu", dtypes=_NC)
def _bmm(ctx, a, b):
    if ctx.attrs["adj_x"]:
        a = ctx.xp.swapaxes(a, -1, -2)
    if ctx.attrs["adj_y"]:
        b = ctx.xp.swapaxes(b, -1, -2)
    if ctx.xp is np:
        return intraop.matmul(a, b)
    return ctx.xp.matmul(a, b)


@BatchMatMul.gradient
def _bmm_grad(op, g):
    a, b = (_cj(t) for t in op.inputs)
    ax, ay = op.attrs["adj_x"], op.attrs["adj_y"]
    if not ax:
        ga = matmul(g, b, transpose_b=not ay) if not ay else matmul(g, b)
    else:
        ga = (
            matmul(b, g, transpose_b=True)
            if not ay
            else matmul(b, g, transpose_a=True, transpose_b=True)
        )
    if not ay:
        gb = matmul(a, g, transpose_a=not ax) if not ax else matmul(a, g)
    else:
        gb = (
            matmul(g, a, transpose_a=True)
            if not ax
            else matmul(g, a, transpose_a=True, transpose_b=True)
        )
    return [_unbroadcast_batch(ga, op.inputs[0]), _unbroadcast_batch(gb, op.inputs[1])]


def _unbroadcast_batch(g: Tensor, x: Tensor) -> Tensor:
    return _unbroadcast(g, x)


@BatchMatMul.cost
def _bmm_cost(op, ins, outs):
    a = ins[0]
    k = a[-2] if op.attrs["adj_x"] else a[-1]
    dt = op.inputs[0].dtype
    return Cost(
        2.0 * numel(outs[0]) * k * (4.0 if dt.is_complex else 1.0),
        float(nbytes(ins[0], dt) + nbytes(ins[1], dt)),
        float(nbytes(outs[0], dt)),
    )


def matmul(
    a: Any,
    b: Any,
    transpose_a: bool = False,
    transpose_b: bool = False,
    adjoint_a: bool = False,
    adjoint_b: bool = False,
    name: str | None = None,
) -> Tensor:
    """Matrix product; rank > 2 inputs are batched (broadcasting over leading dimensions)."""
    a, b = convert_pair(a, b)
    if adjoint_a and a.dtype.is_complex:  # the adjoint: the conjugate transpose
        a = _cj(a)
    if adjoint_b and b.dtype.is_complex:
        b = _cj(b)
    ta, tb = transpose_a or adjoint_a, transpose_b or adjoint_b
    if a.shape.ndims == 2 and b.shape.ndims == 2:
        return apply("MatMul", [a, b], {"transpose_a": ta, "transpose_b": tb}, name or "MatMul")
    return apply("BatchMatMul", [a, b], {"adj_x": ta, "adj_y": tb}, name or "BatchMatMul")


# ---- reductions --------------------------------------------------------------------------------


def _norm_axes(op_name: str, axis: Any, ndims: int | None) -> tuple | None:
    if axis is None:
        return None
    if isinstance(axis, Tensor):
        raise TypeError(f"{op_name}: axis must be a static int or list of ints in hetbed")
    axes = [int(axis)] if np.ndim(axis) == 0 else [int(a) for a in np.ravel(axis)]
    if ndims is not None:
        for a in axes:
            if not -ndims <= a < ndims:
                raise InvalidArgumentError(f"{op_name}: axis {a} out of range for rank {ndims}")
        axes = [a % ndims for a in axes]
    return tuple(sorted(set(axes)))


def _reduce_shape(op):
    x = op.inputs[0]
    axes, keep = op.attrs["axis"], op.attrs["keepdims"]
    if x.shape.ndims is None:
        return [(TensorShape(None), _reduce_out_dtype(op))]
    if axes is None:
        dims = [1] * x.shape.ndims if keep else []
    else:
        dims = [(1 if keep else "drop") if i in axes else d for i, d in enumerate(x.shape.dims)]
        dims = [d for d in dims if d != "drop"]
    return [(TensorShape(dims), _reduce_out_dtype(op))]


def _reduce_out_dtype(op):
    if op.type in ("ArgMax", "ArgMin"):
        return op.attrs["output_type"]
    return op.inputs[0].dtype


def _reduce_cost(op, ins, outs):
    return Cost(
        float(numel(ins[0])),
        float(nbytes(ins[0], op.inputs[0].dtype)),
        float(nbytes(outs[0], op.outputs[0].dtype)),
    )


def _empty_identity(np_fn: str, dtype: Any) -> Any:
    """What Max/Min/Mean give for an empty reduction (TF: lowest/highest value, NaN)."""
    if np_fn == "mean":
        return np.nan if dtype.kind == "f" else 0
    if dtype.kind == "f":
        return -np.inf if np_fn == "max" else np.inf
    info = np.iinfo(dtype)
    return info.min if np_fn == "max" else info.max


def _reduction(name: str, np_fn: str, dtypes: Any = _dt.NUMERIC):
    d = defop(name, shape=_reduce_shape, cost=_reduce_cost)

    def kernel(ctx, x):
        at = ctx.attrs
        xp = ctx.xp
        if x.size == 0 and np_fn in ("max", "min", "mean"):
            shape = xp.sum(x, axis=at["axis"], keepdims=at["keepdims"]).shape
            return xp.full(shape, _empty_identity(np_fn, x.dtype), dtype=x.dtype)
        r = getattr(xp, np_fn)(x, axis=at["axis"], keepdims=at["keepdims"])
        return r if r.dtype == x.dtype else r.astype(x.dtype)

    d.kernel("cpu", "gpu", dtypes=dtypes)(kernel)
    return d


Sum = _reduction("Sum", "sum", dtypes=_NC)
Mean = _reduction("Mean", "mean", dtypes=_NC)
Max = _reduction("Max", "max")
Min = _reduction("Min", "min")
Prod = _reduction("Prod", "prod", dtypes=_NC)
All = _reduction("All", "all", dtypes=[_dt.bool_])
AnyOp = _reduction("Any", "any", dtypes=[_dt.bool_])


def _keep_shape_grad(op, g):
    """``g`` reshaped so it broadcasts against the reduction's input."""
    x = op.inputs[0]
    if op.attrs["keepdims"] or op.attrs["axis"] is None and x.shape.ndims == 0:
        return g
    if op.attrs["axis"] is None:
        return reshape_keep(g, x, None)
    return reshape_keep(g, x, op.attrs["axis"])


KeepDims = defop("KeepDims")


@KeepDims.shape
def _keepdims_shape(op):
    x = op.inputs[1]
    axes = op.attrs["axis"]
    if x.shape.ndims is None:
        return [(TensorShape(None), op.inputs[0].dtype)]
    if axes is not None:
        axes = {a % x.shape.ndims for a in axes}
    dims = [1 if axes is None or i in axes else d for i, d in enumerate(x.shape.dims)]
    return [(TensorShape(dims), op.inputs[0].dtype)]


@KeepDims.kernel("cpu", "gpu", aliases_input=True)
def _keepdims(ctx, g, x):
    axes = ctx.attrs["axis"]
    if axes is not None and any(a < 0 for a in axes):  # axes counted from the end (unknown rank)
        axes = {a % x.ndim for a in axes}
    return g.reshape([1 if axes is None or i in axes else d for i, d in enumerate(x.shape)])


@KeepDims.gradient
def _keepdims_grad(op, g):
    from .array import reshape_like

    return [reshape_like(g, op.inputs[0]), None]


def reshape_keep(g: Tensor, x: Tensor, axes: tuple | None) -> Tensor:
    return apply("KeepDims", [g, x], {"axis": axes}, name="KeepDims")


@Sum.gradient
def _sum_grad(op, g):
    return [broadcast_like(_keep_shape_grad(op, g), op.inputs[0])]


@Mean.gradient
def _mean_grad(op, g):
    x = op.inputs[0]
    gk = broadcast_like(_keep_shape_grad(op, g), x)
    return [apply("ScaleByCount", [gk, x], {"axis": op.attrs["axis"]}, name="ScaleByCount")]


ScaleByCount = defop("ScaleByCount", shape=unchanged_shape, cost=elementwise_cost(1))


@ScaleByCount.kernel("cpu", "gpu", dtypes=_FC)
def _scale_by_count(ctx, g, x):
    axes = ctx.attrs["axis"]
    n = x.size if axes is None else int(np.prod([x.shape[a] for a in axes]))
    return g * g.real.dtype.type(1.0 / max(n, 1))


@ScaleByCount.gradient
def _sbc_grad(op, g):
    return [apply("ScaleByCount", [g, op.inputs[1]], dict(op.attrs), name="ScaleByCount"), None]


def _minmax_reduce_grad(op, g):
    x, y = op.inputs[0], op.outputs[0]
    yk = broadcast_like(_keep_shape_grad(op, y), x)
    gk = broadcast_like(_keep_shape_grad(op, g), x)
    mask = cast_like(equal(x, yk), g)
    count = broadcast_like(
        _keep_shape_grad(
            op,
            apply(
                "Sum",
                [mask],
                {"axis": op.attrs["axis"], "keepdims": op.attrs["keepdims"]},
                name="Sum",
            ),
        ),
        x,
    )
    return [divide(multiply(gk, mask), count)]


Max.gradient(_minmax_reduce_grad)
Min.gradient(_minmax_reduce_grad)


@Prod.gradient
def _prod_grad(op, g):
    x = op.inputs[0]
    gk = broadcast_like(_keep_shape_grad(op, g), x)
    others = apply("ProdOthers", [x], {"axis": op.attrs["axis"]}, name="ProdOthers")
    return [multiply(gk, _cj(others))]


# Each element's d(prod)/dx: the product of the other elements of its reduced group, from
# exclusive cumulative products (exact where x has zeros, unlike prod / x). No gradient itself.
ProdOthers = defop("ProdOthers", shape=unchanged_shape, cost=elementwise_cost(3))


@ProdOthers.kernel("cpu", "gpu", dtypes=_NC)
def _prod_others(ctx, x):
    xp = ctx.xp
    axes = ctx.attrs["axis"]
    axes = tuple(range(x.ndim)) if axes is None else tuple(axes)
    if x.size == 0 or not axes:
        return xp.zeros_like(x) if x.size == 0 else xp.ones_like(x)
    perm = [i for i in range(x.ndim) if i not in axes] + list(axes)
    xt = xp.transpose(x, perm)
    lead = xt.shape[: x.ndim - len(axes)]
    flat = xt.reshape(lead + (-1,))
    ones = xp.ones(lead + (1,), dtype=x.dtype)
    left = xp.cumprod(xp.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1, dtype=x.dtype)
    rev = xp.flip(flat, axis=-1)[..., :-1]
    right = xp.cumprod(xp.concatenate([ones, rev], axis=-1), axis=-1, dtype=x.dtype)
    out = (left * xp.flip(right, axis=-1)).reshape(xt.shape)
    inverse = tuple(int(i) for i in np.argsort(perm))
    return xp.ascontiguousarray(xp.transpose(out, inverse))


def cast_like(x: Tensor, like: Tensor) -> Tensor:
    from .array import cast

    return cast(x, like.dtype)


def _reduce_fn(op_type: str):
    def fn(
        input_tensor: Any,
        axis: Any = None,
        keepdims: bool | None = None,
        name: str | None = None,
        reduction_indices: Any = None,
        keep_dims: bool | None = None,
    ) -> Tensor:
        x = convert_to_tensor(input_tensor)
        if axis is None:
            axis = reduction_indices
        keep = bool(keepdims if keepdims is not None else (keep_dims or False))
        axes = _norm_axes(op_type, axis, x.shape.ndims)
        if x.shape.ndims is None and axes is not None and any(a < 0 for a in axes):
            raise InvalidArgumentError(f"{op_type}: negative axis needs a known rank")
        return apply(op_type, [x], {"axis": axes, "keepdims": keep}, name or op_type)

    fn.__name__ = "reduce_" + op_type.lower()
    return fn


reduce_sum = _reduce_fn("Sum")
reduce_mean = _reduce_fn("Mean")
reduce_max = _reduce_fn("Max")
reduce_min = _reduce_fn("Min")
reduce_prod = _reduce_fn("Prod")
reduce_all = _reduce_fn("All")
reduce_any = _reduce_fn("Any")


def _arg_shape(op):
    x = op.inputs[0]
    a = op.attrs["axis"]
    if x.shape.ndims is None:
        return [(TensorShape(None), op.attrs["output_type"])]
    dims = [d for i, d in enumerate(x.shape.dims) if i != a]
    return [(TensorShape(dims), op.attrs["output_type"])]


ArgMax = defop("ArgMax", shape=_arg_shape, cost=_reduce_cost, differentiable=False)
ArgMin = defop("ArgMin", shape=_arg_shape, cost=_reduce_cost, differentiable=False)


@ArgMax.kernel("cpu", "gpu", dtypes=_dt.NUMERIC)
def _argmax(ctx, x):
    return ctx.xp.argmax(x, axis=ctx.attrs["axis"]).astype(ctx.attrs["output_type"].np)


@ArgMin.kernel("cpu", "gpu", dtypes=_dt.NUMERIC)
def _argmin(ctx, x):
    return ctx.xp.argmin(x, axis=ctx.attrs["axis"]).astype(ctx.attrs["output_type"].np)


def _arg_fn(op_type: str):
    def fn(
        input: Any,
        axis: int | None = None,
        name: str | None = None,
        dimension: Any = None,
        output_type: Any = _dt.int64,
    ) -> Tensor:
        x = convert_to_tensor(input)
        if axis is None:
            axis = dimension if dimension is not None else 0
        (a,) = _norm_axes(op_type, axis, x.shape.ndims) or (0,)
        if a < 0:
            raise InvalidArgumentError(f"{op_type}: negative axis needs a known rank")
        return apply(
            op_type, [x], {"axis": a, "output_type": _dt.as_dtype(output_type)}, name or op_type
        )

    fn.__name__ = op_type.lower()
    return fn


argmax = _arg_fn("ArgMax")
argmin = _arg_fn("ArgMin")


# ---- public elementwise functions --------------------------------------------------------------


def _is_graph_value(v: Any) -> bool:
    return isinstance(v, Tensor) or hasattr(v, "_as_graph_element")


def _binary_fn(op_type: str):
    def fn(x: Any, y: Any, name: str | None = None) -> Tensor:
        if _is_graph_value(x) and _is_graph_value(y):
            x, y = convert_pair(x, y)
            return apply(op_type, [x, y], name=name or op_type)
        # a Python or numpy operand becomes a constant in the op's scope, named as TF1 names
        # it: "Maximum/y", "predictions/y"
        with name_scope(name or op_type) as scope:
            x, y = convert_pair(x, y, ("x", "y"))
            return apply(op_type, [x, y], name=scope)

    fn.__name__ = op_type.lower()
    return fn


def _unary_fn(op_type: str):
    def fn(x: Any, name: str | None = None) -> Tensor:
        return apply(op_type, [x], name=name or op_type)

    fn.__name__ = op_type.lower()
    return fn


add = _binary_fn("Add")
subtract = _binary_fn("Sub")
multiply = _binary_fn("Mul")
maximum = _binary_fn("Maximum")
minimum = _binary_fn("Minimum")
pow = _binary_fn("Pow")  # noqa: A001 - TF's name
floordiv = _binary_fn("FloorDiv")
floormod = _binary_fn("FloorMod")
squared_difference = _binary_fn("SquaredDifference")
less = _binary_fn("Less")
less_equal = _binary_fn("LessEqual")
greater = _binary_fn("Greater")
greater_equal = _binary_fn("GreaterEqual")
equal = _binary_fn("Equal")
not_equal = _binary_fn("NotEqual")
logical_and = _binary_fn("LogicalAnd")
logical_or = _binary_fn("LogicalOr")
logical_not = _unary_fn("LogicalNot")
negative = _unary_fn("Neg")
_abs_real = _unary_fn("Abs")


def abs(x: Any, name: str | None = None) -> Tensor:  # noqa: A001 - TF's name
    """``|x|``; of a complex tensor, its magnitude as a real tensor (TF's ``ComplexAbs``)."""
    x = convert_to_tensor(x)
    if x.dtype.is_complex:
        return apply("ComplexAbs", [x], name=name or "ComplexAbs")
    return _abs_real(x, name=name)


sign = _unary_fn("Sign")
square = _unary_fn("Square")
exp = _unary_fn("Exp")
log = _unary_fn("Log")
log1p = _unary_fn("Log1p")
sqrt = _unary_fn("Sqrt")
rsqrt = _unary_fn("Rsqrt")
reciprocal = _unary_fn("Reciprocal")
floor = _unary_fn("Floor")
ceil = _unary_fn("Ceil")
round = _unary_fn("Round")  # noqa: A001


def rint(x: Any, name: str | None = None) -> Tensor:
    """The nearest integer, halves to the even one (TF1's ``tf.rint``, as ``round``)."""
    return round(x, name=name or "Rint")


def divide(x: Any, y: Any, name: str | None = None) -> Tensor:
    """``x / y``; int32/int64 inputs are divided as float64 (TF's truediv table).

    Raises InvalidArgumentError when ``x`` and ``y`` have different dtypes.
    """
    if not (_is_graph_value(x) and _is_graph_value(y)):
        with name_scope(name or "truediv") as scope:
            return divide(*convert_pair(x, y, ("x", "y")), name=scope)
    x, y = convert_pair(x, y)
    if x.dtype != y.dtype:
        raise InvalidArgumentError(
            f"divide: x and y must have the same dtype, got {x.dtype.name} ({x.name}) "
            f"and {y.dtype.name} ({y.name})"
        )
    if x.dtype.is_integer:
        from .array import cast

        x, y = cast(x, _dt.float64), cast(y, _dt.float64)
    return apply("RealDiv", [x, y], name=name or "truediv")


truediv = divide


def div(x: Any, y: Any, name: str | None = None) -> Tensor:
    """TF1's ``div`` (Python 2 division): floor division for integers, ``x / y`` for floats."""
    x, y = convert_pair(x, y)
    if x.dtype.is_integer and y.dtype.is_integer:
        return floordiv(x, y, name=name)
    return divide(x, y, name=name)


def scalar_mul(scalar: Any, x: Any, name: str | None = None) -> Tensor:
    return multiply(scalar, x, name=name)


def zeros_like(
    tensor: Any, dtype: Any = None, name: str | None = None, optimize: bool = True
) -> Tensor:
    return apply(
        "ZerosLike",
        [tensor],
        {"dtype": _dt.as_dtype(dtype) if dtype else None},
        name or "zeros_like",
    )


def ones_like(
    tensor: Any, dtype: Any = None, name: str | None = None, optimize: bool = True
) -> Tensor:
    return apply(
        "OnesLike", [tensor], {"dtype": _dt.as_dtype(dtype) if dtype else None}, name or "ones_like"
    )


def _like_shape(op):
    return [(op.inputs[0].shape, op.attrs.get("dtype") or op.inputs[0].dtype)]


ZerosLike = defop("ZerosLike", shape=_like_shape, differentiable=False)
OnesLike = defop("OnesLike", shape=_like_shape, differentiable=False)


@ZerosLike.kernel("cpu", "gpu")
def _zeros_like(ctx, x):
    if type(x) is not np.ndarray and hasattr(x, "ragged_zeros"):  # a TensorArray's flow
        return x.ragged_zeros()
    return ctx.xp.zeros(x.shape, dtype=(ctx.attrs.get("dtype") or _dt.as_dtype(x.dtype)).np)


@OnesLike.kernel("cpu", "gpu")
def _ones_like(ctx, x):
    return ctx.xp.ones(x.shape, dtype=(ctx.attrs.get("dtype") or _dt.as_dtype(x.dtype)).np)


# ---- operators on Tensor and Variable ----------------------------------------------------------


def _install_operators() -> None:
    from ..graph import Tensor
    from ..variables import Variable

    # TF1 names an operator's op after the operator ("add", "mul", "sub", "truediv", ...), in
    # lower case, unlike the functions ("Add", "Mul"): programs fetch "add:0" by name. A Python
    # or numpy operand becomes a constant of the tensor's dtype named "y" (or "x" when
    # reflected) in the operator's scope: TF's "mul/y", "sub/x".
    def binop(fn, k):
        def op(self, other):
            if isinstance(other, (Tensor, Variable)):  # no constant to name: no scope needed
                return fn(self, other, name=k)
            with name_scope(k) as scope:
                return fn(*convert_pair(self, other, ("x", "y")), name=scope)

        return op

    def rbinop(fn, k):
        def op(self, other):
            if isinstance(other, (Tensor, Variable)):
                return fn(other, self, name=k)
            with name_scope(k) as scope:
                return fn(*convert_pair(other, self, ("x", "y")), name=scope)

        return op

    table = {
        "add": add,
        "sub": subtract,
        "mul": multiply,
        "truediv": divide,
        "floordiv": floordiv,
        "mod": floormod,
        "pow": pow,
        "matmul": matmul,
        "and": logical_and,
        "or": logical_or,
    }
    for cls in (Tensor, Variable):
        for k, fn in table.items():
            setattr(cls, f"__{k}__", binop(fn, k))
            setattr(cls, f"__r{k}__", rbinop(fn, k))
        cls.__neg__ = lambda self: negative(self)
        cls.__abs__ = lambda self: abs(self)
        cls.__invert__ = lambda self: logical_not(self)
        cls.__lt__ = binop(less, "Less")
        cls.__le__ = binop(less_equal, "LessEqual")
        cls.__gt__ = binop(greater, "Greater")
        cls.__ge__ = binop(greater_equal, "GreaterEqual")
        cls.__getitem__ = lambda self, key: _getitem(self, key)


def _getitem(x: Any, key: Any) -> Tensor:
    from .manip import strided_slice_from_key

    return strided_slice_from_key(convert_to_tensor(x), key)


_install_operators()
