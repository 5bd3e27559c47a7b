"""More math ops (TF1 semantics): trigonometric and special functions, finiteness tests, cumulative
sums and products, top_k and sorting, and composites: logsumexp, variance, norms and clipping."""

from __future__ import annotations

import math as _math
from collections import namedtuple
from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import Tensor, TensorShape
from ..registry import (
    apply,
    apply_op,
    broadcast_shape,
    convert_pair,
    convert_to_tensor,
    default_cost,
    defop,
    elementwise_cost,
    unchanged_shape,
)
from .math import (
    _unbroadcast,
    add,
    add_n,
    cast_like,
    divide,
    log,
    maximum,
    minimum,
    multiply,
    negative,
    not_equal,
    reduce_max,
    reduce_mean,
    reduce_sum,
    sqrt,
    square,
    squared_difference,
    subtract,
    where,
    zeros_like,
)


def _const(v: float, like: Tensor) -> Tensor:
    return convert_to_tensor(np.asarray(v, dtype=like.dtype.np), graph=like.graph)


# ---- unary elementwise ---------------------------------------------------------------------


def _special(fn_name: str, fallback: Any = None):
    """A kernel for a scipy.special function: cupyx.scipy.special on GPU; on CPU scipy when
    installed, else ``fallback`` (elementwise Python math)."""

    def kernel(ctx, x):
        if ctx.xp is np:
            try:
                import scipy.special as sp
            except ImportError:  # scipy is optional for hetbed
                r = np.vectorize(fallback, otypes=[x.dtype])(x)
                return np.asarray(r, dtype=x.dtype)
            return np.asarray(getattr(sp, fn_name)(x), dtype=x.dtype)
        import cupyx.scipy.special as csp

        return getattr(csp, fn_name)(x).astype(x.dtype, copy=False)

    return kernel


def _digamma_py(v: float) -> float:
    """psi(v) by recurrence up to v >= 10, then the asymptotic series (reflection below 0)."""
    if v <= 0 and v == _math.floor(v):
        return _math.nan
    if v < 0:
        return _digamma_py(1 - v) - _math.pi / _math.tan(_math.pi * v)
    r = 0.0
    while v < 10:
        r -= 1 / v
        v += 1
    f = 1 / (v * v)
    return (
        r
        + _math.log(v)
        - 0.5 / v
        - f * (1 / 12 - f * (1 / 120 - f * (1 / 252 - f * (1 / 240 - f / 132))))
    )


def _trigamma_py(v: float) -> float:
    r = 0.0
    while v < 10:
        r += 1 / (v * v)
        v += 1
    f = 1 / (v * v)
    return (
        r
        + 1 / v
        + f / 2
        + f / v * (1 / 6 - f * (1 / 30 - f * (1 / 42 - f * (1 / 30 - f * 5 / 66))))
    )


def _unary(
    name: str,
    np_name: str | None,
    flops: float,
    kernel: Any = None,
    out_bool=False,
    complex_ok: bool = False,
):
    def shape(op):
        x = op.inputs[0]
        if not (x.dtype.is_floating or complex_ok and x.dtype.is_complex):
            what = "float or complex" if complex_ok else "float"
            raise InvalidArgumentError(f"{name}: x must be {what}, got {x.dtype.name} ({x.name})")
        return [(x.shape, _dt.bool_ if out_bool else x.dtype)]

    d = defop(name, shape=shape, cost=elementwise_cost(flops), differentiable=not out_bool)
    if kernel is None:

        def kernel(ctx, x):
            return getattr(ctx.xp, np_name)(x)

    kernel.__name__ = f"_{name.lower()}"
    d.kernel("cpu", "gpu", dtypes=_dt.FLOAT_COMPLEX if complex_ok else _dt.FLOATS)(kernel)
    return d


Sin = _unary("Sin", "sin", 10.0, complex_ok=True)
Cos = _unary("Cos", "cos", 10.0, complex_ok=True)
Tan = _unary("Tan", "tan", 10.0)
Asin = _unary("Asin", "arcsin", 10.0)
Acos = _unary("Acos", "arccos", 10.0)
Atan = _unary("Atan", "arctan", 10.0)
Sinh = _unary("Sinh", "sinh", 10.0)
Cosh = _unary("Cosh", "cosh", 10.0)
Expm1 = _unary("Expm1", "expm1", 10.0, complex_ok=True)
Erf = _unary("Erf", None, 20.0, _special("erf", _math.erf))
Erfc = _unary("Erfc", None, 20.0, _special("erfc", _math.erfc))
Lgamma = _unary("Lgamma", None, 40.0, _special("gammaln", _math.lgamma))
Digamma = _unary("Digamma", None, 40.0, _special("digamma", _digamma_py))
IsNan = _unary("IsNan", "isnan", 1.0, out_bool=True)
IsInf = _unary("IsInf", "isinf", 1.0, out_bool=True)
IsFinite = _unary("IsFinite", "isfinite", 1.0, out_bool=True)

# d digamma / dx, for Digamma's gradient (no gradient itself)
Trigamma = defop("Trigamma", shape=unchanged_shape, cost=elementwise_cost(40.0))


@Trigamma.kernel("cpu", "gpu", dtypes=_dt.FLOATS)
def _trigamma(ctx, x):
    if ctx.xp is np:
        try:
            import scipy.special as sp
        except ImportError:
            return np.vectorize(_trigamma_py, otypes=[x.dtype])(x).astype(x.dtype)
        return np.asarray(sp.polygamma(1, x), dtype=x.dtype)
    import cupyx.scipy.special as csp

    # trigamma(x) = zeta(2, x) (cupy's polygamma fails on a Python int order)
    return csp.zeta(2.0, x).astype(x.dtype, copy=False)


def _one_minus_sq(x: Tensor) -> Tensor:
    return subtract(_const(1, x), square(x))


def _cj(t: Tensor) -> Tensor:
    from .complex_ops import conj_if_complex

    return conj_if_complex(t)


# (complex inputs: TF's conjugate of the derivative)
Sin.gradient(lambda op, g: [multiply(g, _cj(cos(op.inputs[0])))])
Cos.gradient(lambda op, g: [negative(multiply(g, _cj(sin(op.inputs[0]))))])
Tan.gradient(lambda op, g: [multiply(g, add(_const(1, g), square(op.outputs[0])))])
Asin.gradient(lambda op, g: [divide(g, sqrt(_one_minus_sq(op.inputs[0])))])
Acos.gradient(lambda op, g: [negative(divide(g, sqrt(_one_minus_sq(op.inputs[0]))))])
Atan.gradient(lambda op, g: [divide(g, add(_const(1, g), square(op.inputs[0])))])
Sinh.gradient(lambda op, g: [multiply(g, cosh(op.inputs[0]))])
Cosh.gradient(lambda op, g: [multiply(g, sinh(op.inputs[0]))])
Expm1.gradient(lambda op, g: [multiply(g, _cj(add(op.outputs[0], _const(1, g))))])
Lgamma.gradient(lambda op, g: [multiply(g, digamma(op.inputs[0]))])
Digamma.gradient(lambda op, g: [multiply(g, apply("Trigamma", [op.inputs[0]], name="Trigamma"))])


def _erf_grad(sign: float):
    def grad(op, g):
        from .math import exp

        x = op.inputs[0]
        c = _const(sign * 2 / _math.sqrt(_math.pi), g)
        return [multiply(g, multiply(c, exp(negative(square(x)))))]

    return grad


Erf.gradient(_erf_grad(1.0))
Erfc.gradient(_erf_grad(-1.0))

Atan2 = defop("Atan2", shape=broadcast_shape, cost=elementwise_cost(20.0))


@Atan2.kernel("cpu", "gpu", dtypes=_dt.FLOATS)
def _atan2(ctx, y, x):
    return ctx.xp.arctan2(y, x)


@Atan2.gradient
def _atan2_grad(op, g):
    y, x = op.inputs
    s = divide(g, add(square(x), square(y)))
    return [_unbroadcast(multiply(s, x), y, x), _unbroadcast(negative(multiply(s, y)), x, y)]


def _unary_fn(op_type: str, fn_name: str):
    def fn(x: Any, name: str | None = None) -> Tensor:
        return apply(op_type, [x], name=name or op_type)

    fn.__name__ = fn_name
    fn.__doc__ = f"Elementwise ``{fn_name}`` (op {op_type}) of a float tensor."
    return fn


sin = _unary_fn("Sin", "sin")
cos = _unary_fn("Cos", "cos")
tan = _unary_fn("Tan", "tan")
asin = _unary_fn("Asin", "asin")
acos = _unary_fn("Acos", "acos")
atan = _unary_fn("Atan", "atan")
sinh = _unary_fn("Sinh", "sinh")
cosh = _unary_fn("Cosh", "cosh")
expm1 = _unary_fn("Expm1", "expm1")
erf = _unary_fn("Erf", "erf")
erfc = _unary_fn("Erfc", "erfc")
lgamma = _unary_fn("Lgamma", "lgamma")
digamma = _unary_fn("Digamma", "digamma")
is_nan = _unary_fn("IsNan", "is_nan")
is_inf = _unary_fn("IsInf", "is_inf")
is_finite = _unary_fn("IsFinite", "is_finite")


def atan2(y: Any, x: Any, name: str | None = None) -> Tensor:
    """Elementwise angle of the point (x, y), ``arctan(y / x)`` in the right quadrant."""
    y, x = convert_pair(y, x)
    return apply("Atan2", [y, x], name=name or "Atan2")


# ---- Cumsum / Cumprod ---------------------------------------------------------------------------


def _cumulative(name: str, np_name: str, identity: int, dtypes: Any = _dt.NUMERIC):
    d = defop(name, shape=unchanged_shape, cost=elementwise_cost(1.0))

    @d.kernel("cpu", "gpu", dtypes=dtypes)
    def _kernel(ctx, x):
        xp = ctx.xp
        at = ctx.attrs
        axis = at["axis"] % x.ndim
        if at["reverse"]:
            x = xp.flip(x, axis)
        r = getattr(xp, np_name)(x, axis=axis, dtype=x.dtype)
        if at["exclusive"] and x.shape[axis]:
            pad = list(x.shape)
            pad[axis] = 1
            cut = [slice(None)] * x.ndim
            cut[axis] = slice(0, -1)
            first = xp.full(tuple(pad), identity, dtype=x.dtype)
            r = xp.concatenate([first, r[tuple(cut)]], axis=axis)
        if at["reverse"]:
            r = xp.flip(r, axis)
        return xp.ascontiguousarray(r)

    return d


Cumsum = _cumulative("Cumsum", "cumsum", 0, _dt.NUMERIC_COMPLEX)  # linear: complex too
Cumprod = _cumulative("Cumprod", "cumprod", 1)


@Cumsum.gradient
def _cumsum_grad(op, g):
    at = op.attrs
    return [_cum("Cumsum", g, at["axis"], at["exclusive"], not at["reverse"], None)]


@Cumprod.gradient
def _cumprod_grad(op, g):
    # TF's rule: exact where x has no zeros
    x, y = op.inputs[0], op.outputs[0]
    at = op.attrs
    s = _cum("Cumsum", multiply(g, y), at["axis"], at["exclusive"], not at["reverse"], None)
    return [divide(s, x)]


def _cum(op_type: str, x: Any, axis: Any, exclusive: bool, reverse: bool, name: str | None):
    x = convert_to_tensor(x)
    if isinstance(axis, Tensor):
        raise TypeError(f"{op_type}: axis must be a static int in hetbed")
    axis = int(axis)
    n = x.shape.ndims
    if n is not None and not -n <= axis < max(n, 1):
        raise InvalidArgumentError(f"{op_type}: axis {axis} out of range for shape {x.shape}")
    if n == 0:
        raise InvalidArgumentError(f"{op_type}: input must have rank >= 1, got a scalar {x.name}")
    attrs = {"axis": axis, "exclusive": bool(exclusive), "reverse": bool(reverse)}
    return apply(op_type, [x], attrs, name or op_type)


def cumsum(
    x: Any, axis: Any = 0, exclusive: bool = False, reverse: bool = False, name: str | None = None
) -> Tensor:
    """Running sum along ``axis``; ``exclusive`` leaves out each element itself, ``reverse``
    sums from the end."""
    return _cum("Cumsum", x, axis, exclusive, reverse, name)


def cumprod(
    x: Any, axis: Any = 0, exclusive: bool = False, reverse: bool = False, name: str | None = None
) -> Tensor:
    """Running product along ``axis`` (``exclusive`` and ``reverse`` as in cumsum)."""
    return _cum("Cumprod", x, axis, exclusive, reverse, name)


# ---- TopKV2, sort, argsort ----------------------------------------------------------------------

TopKV2 = defop("TopKV2", cost=default_cost)


@TopKV2.shape
def _topk_shape(op):
    x = op.inputs[0]
    k = op.attrs["k"]
    if len(op.inputs) == 2:  # k given as a tensor: known when the step runs
        if op.inputs[1].shape.ndims not in (None, 0):
            raise InvalidArgumentError(
                f"TopKV2: k must be a scalar, got shape {op.inputs[1].shape}"
            )
        if x.shape.ndims is None:
            return [(TensorShape(None), x.dtype), (TensorShape(None), _dt.int32)]
        s = TensorShape([*x.shape.dims[:-1], None])
        return [(s, x.dtype), (s, _dt.int32)]
    if x.shape.ndims is None:
        return [(TensorShape(None), x.dtype), (TensorShape(None), _dt.int32)]
    if x.shape.ndims == 0:
        raise InvalidArgumentError(f"TopKV2: input must have rank >= 1, got shape {x.shape}")
    last = x.shape.dims[-1]
    if k >= 0 and last is not None and k > last:
        raise InvalidArgumentError(f"TopKV2: k = {k} is larger than the last dimension {last}")
    s = TensorShape([*x.shape.dims[:-1], last if k < 0 else k])
    return [(s, x.dtype), (s, _dt.int32)]


@TopKV2.kernel("cpu", "gpu", dtypes=_dt.NUMERIC)
def _topk(ctx, x, k_tensor=None):
    xp = ctx.xp
    n = x.shape[-1]
    if k_tensor is None:
        k = ctx.attrs["k"]
    else:  # (a device array's item comes to the host)
        k = int(k_tensor.item()) if hasattr(k_tensor, "item") else int(k_tensor)
    if k_tensor is not None and k < 0:
        raise InvalidArgumentError(f"TopKV2 {ctx.op.name!r}: k = {k} must be >= 0")
    k = n if k < 0 else k
    if k > n:
        raise InvalidArgumentError(
            f"TopKV2 {ctx.op.name!r}: k = {k} is larger than the last dimension of shape "
            f"{tuple(x.shape)}"
        )
    key = -x if ctx.attrs["largest"] else x
    idx = xp.argsort(key, axis=-1, kind="stable")[..., :k]
    vals = xp.take_along_axis(x, idx, axis=-1)
    return xp.ascontiguousarray(vals), xp.ascontiguousarray(idx.astype(np.int32))


@TopKV2.gradient
def _topk_grad(op, g, gi=None):
    extra = [None] * (len(op.inputs) - 1)  # (k, when a tensor)
    if g is None:
        return [None, *extra]
    return [apply("TopKGrad", [g, op.outputs[1], op.inputs[0]], name="TopKGrad"), *extra]


# Scatters the values' gradient to the chosen positions of the last axis (zeros elsewhere).
TopKGrad = defop("TopKGrad", differentiable=False, cost=default_cost)


@TopKGrad.shape
def _topk_grad_shape(op):
    return [(op.inputs[2].shape, op.inputs[0].dtype)]


@TopKGrad.kernel("cpu", "gpu", dtypes=_dt.NUMERIC)
def _topk_grad_kernel(ctx, g, idx, x):
    xp = ctx.xp
    n = x.shape[-1]
    k = idx.shape[-1]
    out = xp.zeros(x.shape, dtype=g.dtype)
    if out.size == 0 or k == 0:
        return out
    flat = out.reshape(-1, n)
    rows = xp.arange(flat.shape[0]).reshape(-1, 1)
    flat[rows, idx.reshape(-1, k)] = g.reshape(-1, k)
    return out


def _topk(x: Any, k: int, largest: bool, name: str) -> tuple[Tensor, Tensor]:
    op = apply_op("TopKV2", [x], {"k": int(k), "sorted": True, "largest": largest}, name)
    return op.outputs[0], op.outputs[1]


TopK = namedtuple("TopKV2", ["values", "indices"])


def top_k(input: Any, k: Any = 1, sorted: bool = True, name: str | None = None):
    """``(values, indices)`` of the ``k`` largest entries along the last axis, largest first
    (equal values: lower index first). ``k``: an int, or an int32 scalar tensor (the last
    dimension of the outputs is then known when the step runs)."""
    if isinstance(k, Tensor):
        from .scatter import const_value

        known = const_value(k)
        if known is None:
            op = apply_op(
                "TopKV2",
                [input, k],
                {"k": -1, "sorted": True, "largest": True},
                name or "TopKV2",
            )
            return TopK(op.outputs[0], op.outputs[1])
        k = int(known)
    if int(k) < 0:
        raise InvalidArgumentError(f"top_k: k must be >= 0, got {k}")
    return TopK(*_topk(input, int(k), True, name or "TopKV2"))


def _along_last(x: Tensor, axis: int, fn: Any) -> Any:
    from .manip import transpose

    n = x.shape.ndims
    if n is None:
        if axis != -1:
            raise InvalidArgumentError("sort: an axis other than -1 needs a known rank")
        return fn(x)
    a = axis % max(n, 1)
    if a == n - 1:
        return fn(x)
    perm = list(range(n))
    perm[a], perm[-1] = perm[-1], perm[a]
    return transpose(fn(transpose(x, perm)), perm)


def _direction(direction: str) -> bool:
    if direction not in ("ASCENDING", "DESCENDING"):
        raise InvalidArgumentError(
            f"sort: direction must be 'ASCENDING' or 'DESCENDING', got {direction!r}"
        )
    return direction == "DESCENDING"


def sort(
    values: Any, axis: int = -1, direction: str = "ASCENDING", name: str | None = None
) -> Tensor:
    """``values`` sorted along ``axis``."""
    x = convert_to_tensor(values)
    largest = _direction(direction)
    return _along_last(x, int(axis), lambda t: _topk(t, -1, largest, name or "sort")[0])


def argsort(
    values: Any,
    axis: int = -1,
    direction: str = "ASCENDING",
    stable: bool = False,
    name: str | None = None,
) -> Tensor:
    """int32 indices that sort ``values`` along ``axis`` (always stable here)."""
    x = convert_to_tensor(values)
    largest = _direction(direction)
    return _along_last(x, int(axis), lambda t: _topk(t, -1, largest, name or "argsort")[1])


# ---- reductions composed of other ops -----------------------------------------------------------


def _keep(keepdims: Any, keep_dims: Any) -> bool:
    return bool(keepdims if keepdims is not None else (keep_dims or False))


def reduce_logsumexp(
    input_tensor: Any,
    axis: Any = None,
    keepdims: bool | None = None,
    name: str | None = None,
    reduction_indices: Any = None,
    keep_dims: bool | None = None,
) -> Tensor:
    """``log(sum(exp(x)))`` over ``axis``, computed as ``m + log(sum(exp(x - m)))`` with ``m``
    the (finite) maximum, so it neither overflows nor underflows."""
    from ..graph import name_scope
    from .array import stop_gradient
    from .math import exp

    x = convert_to_tensor(input_tensor)
    axis = reduction_indices if axis is None else axis
    keep = _keep(keepdims, keep_dims)
    with name_scope(name or "ReduceLogSumExp"):
        mk = stop_gradient(reduce_max(x, axis, keepdims=True))
        mk = where(is_finite(mk), mk, zeros_like(mk))
        m = stop_gradient(reduce_max(x, axis, keepdims=keep))
        m = where(is_finite(m), m, zeros_like(m))
        s = reduce_sum(exp(subtract(x, mk)), axis, keepdims=keep)
        return add(log(s), m)


def count_nonzero(
    input_tensor: Any = None,
    axis: Any = None,
    keepdims: bool | None = None,
    dtype: Any = _dt.int64,
    name: str | None = None,
    reduction_indices: Any = None,
    keep_dims: bool | None = None,
    input: Any = None,
) -> Tensor:
    """How many entries along ``axis`` are not zero (not False), as ``dtype`` (int64)."""
    from ..graph import name_scope
    from .array import cast

    x = convert_to_tensor(input if input_tensor is None else input_tensor)
    axis = reduction_indices if axis is None else axis
    with name_scope(name or "count_nonzero"):
        zero = convert_to_tensor(np.zeros((), dtype=x.dtype.np))
        nz = cast(not_equal(x, zero), _dt.int64)
        r = reduce_sum(nz, axis, keepdims=_keep(keepdims, keep_dims))
        return r if _dt.as_dtype(dtype) == _dt.int64 else cast(r, dtype)


def accumulate_n(
    inputs: list, shape: Any = None, tensor_dtype: Any = None, name: str | None = None
) -> Tensor:
    """The elementwise sum of ``inputs`` (same shapes and dtype), like add_n."""
    inputs = [convert_to_tensor(t) for t in inputs]
    if tensor_dtype is not None:
        for t in inputs:
            if t.dtype != _dt.as_dtype(tensor_dtype):
                raise InvalidArgumentError(
                    f"accumulate_n: {t.name} is {t.dtype.name}, expected "
                    f"{_dt.as_dtype(tensor_dtype).name}"
                )
    if shape is not None:
        want = TensorShape(shape)
        for t in inputs:
            if not t.shape.is_compatible_with(want):
                raise InvalidArgumentError(
                    f"accumulate_n: {t.name} has shape {t.shape}, expected {want}"
                )
    return add_n(inputs, name=name or "AccumulateN")


def reduce_variance(
    input_tensor: Any, axis: Any = None, keepdims: bool = False, name: str | None = None
) -> Tensor:
    """Population variance ``mean((x - mean(x))**2)`` over ``axis``."""
    from ..graph import name_scope

    x = convert_to_tensor(input_tensor)
    with name_scope(name or "reduce_variance"):
        mean = reduce_mean(x, axis, keepdims=True)
        return reduce_mean(squared_difference(x, mean), axis, keepdims=keepdims)


def reduce_std(
    input_tensor: Any, axis: Any = None, keepdims: bool = False, name: str | None = None
) -> Tensor:
    """Population standard deviation over ``axis``."""
    from ..graph import name_scope

    with name_scope(name or "reduce_std"):
        return sqrt(reduce_variance(input_tensor, axis, keepdims))


# ---- norms and clipping -------------------------------------------------------------------------


def norm(
    tensor: Any,
    ord: Any = "euclidean",
    axis: Any = None,
    keepdims: bool | None = None,
    name: str | None = None,
    keep_dims: bool | None = None,
) -> Tensor:
    """Vector norm over ``axis`` (all entries when None): ``ord`` 'euclidean' (= 2, and 'fro'
    over two axes), 1, or np.inf. Matrix 1- and inf-norms are not supported."""
    from ..graph import name_scope
    from .math import abs as abs_

    x = convert_to_tensor(tensor)
    keep = _keep(keepdims, keep_dims)
    two_axes = axis is not None and not isinstance(axis, int) and len(list(axis)) == 2
    if ord in ("euclidean", 2, 2.0) or (ord == "fro" and (axis is None or two_axes)):
        if two_axes and ord == 2:
            raise InvalidArgumentError("norm: the spectral (ord=2) matrix norm is not supported")
        with name_scope(name or "norm"):
            return sqrt(reduce_sum(multiply(x, x), axis, keepdims=keep))
    if two_axes:
        raise InvalidArgumentError(f"norm: matrix norm ord={ord!r} is not supported")
    if ord in (1, 1.0):
        with name_scope(name or "norm"):
            return reduce_sum(abs_(x), axis, keepdims=keep)
    if ord == np.inf:
        with name_scope(name or "norm"):
            return reduce_max(abs_(x), axis, keepdims=keep)
    raise InvalidArgumentError(f"norm: ord must be 'euclidean', 'fro', 1, 2 or np.inf, got {ord!r}")


def _is_slices(t: Any) -> bool:
    from ..gradients import IndexedSlices

    return isinstance(t, IndexedSlices)


def clip_by_norm(t: Any, clip_norm: Any, axes: Any = None, name: str | None = None) -> Any:
    """``t * clip_norm / max(l2norm(t), clip_norm)``, the L2 norm taken over ``axes`` (all when
    None); an IndexedSlices clips its values and stays sparse."""
    from ..gradients import IndexedSlices
    from ..graph import name_scope
    from .array import identity

    values = t.values if _is_slices(t) else convert_to_tensor(t)
    with name_scope(name or "clip_by_norm"):
        c = (
            convert_to_tensor(clip_norm, dtype=values.dtype)
            if isinstance(clip_norm, Tensor)
            else _const(clip_norm, values)
        )
        l2sum = reduce_sum(multiply(values, values), axes, keepdims=True)
        pos = l2sum > _const(0, l2sum)
        safe = where(pos, l2sum, _const(1, l2sum) + zeros_like(l2sum))
        l2norm = where(pos, sqrt(safe), l2sum)
        out = identity(divide(multiply(values, c), maximum(l2norm, c)), name="clipped")
    if _is_slices(t):
        return IndexedSlices(out, t.indices, t.dense_shape)
    return out


def global_norm(t_list: list, name: str | None = None) -> Tensor:
    """``sqrt(sum of squares of every entry of every tensor)``; None entries are skipped."""
    from ..graph import name_scope

    if isinstance(t_list, Tensor) or not hasattr(t_list, "__iter__"):
        raise TypeError("global_norm: t_list must be a sequence of tensors")
    vals = [t.values if _is_slices(t) else convert_to_tensor(t) for t in t_list if t is not None]
    if not vals:
        raise InvalidArgumentError("global_norm: t_list has no tensors (all None)")
    with name_scope(name or "global_norm"):
        dt = vals[0].dtype
        sums = []
        for v in vals:
            if v.dtype != dt:
                raise InvalidArgumentError(
                    f"global_norm: {v.name} is {v.dtype.name}, {vals[0].name} is {dt.name}"
                )
            sums.append(reduce_sum(multiply(v, v)))
        return sqrt(add_n(sums), name="global_norm")


def clip_by_global_norm(
    t_list: list, clip_norm: Any, use_norm: Any = None, name: str | None = None
) -> tuple[list, Tensor]:
    """``(clipped list, global norm)``: every tensor scaled by
    ``clip_norm / max(global_norm, clip_norm)``. None entries stay None, IndexedSlices stay
    sparse; an infinite or NaN global norm makes every entry NaN, as in TF."""
    from ..gradients import IndexedSlices
    from ..graph import name_scope
    from .array import identity

    if isinstance(t_list, Tensor) or not hasattr(t_list, "__iter__"):
        raise TypeError("clip_by_global_norm: t_list must be a sequence of tensors")
    t_list = list(t_list)
    gn = global_norm(t_list) if use_norm is None else convert_to_tensor(use_norm)
    with name_scope(name or "clip_by_global_norm"):
        c = clip_norm if isinstance(clip_norm, Tensor) else _const(clip_norm, gn)
        one = _const(1, gn)
        scale = multiply(c, minimum(divide(one, gn), divide(one, c)))
        nan = _const(np.nan, gn)
        scale = add(scale, where(is_finite(gn), zeros_like(gn), nan + zeros_like(gn)))
        out: list = []
        for i, t in enumerate(t_list):
            if t is None:
                out.append(None)
                continue
            v = t.values if _is_slices(t) else convert_to_tensor(t)
            s = scale if scale.dtype == v.dtype else cast_like(scale, v)
            clipped = identity(multiply(v, s), name=f"clipped_{i}")
            out.append(
                IndexedSlices(clipped, t.indices, t.dense_shape) if _is_slices(t) else clipped
            )
    return out, gn


def clip_by_average_norm(t: Any, clip_norm: Any, name: str | None = None) -> Tensor:
    """``t * clip_norm / max(l2norm(t) / size(t), clip_norm)`` (TF1's ``clip_by_average_norm``)."""
    from ..graph import name_scope
    from .array import cast, size

    x = convert_to_tensor(t)
    with name_scope(name or "clip_by_average_norm"):
        c = (
            convert_to_tensor(clip_norm, dtype=x.dtype)
            if isinstance(clip_norm, Tensor)
            else _const(clip_norm, x)
        )
        n = cast(size(x), x.dtype)
        avg = divide(sqrt(reduce_sum(multiply(x, x))), n)
        return divide(multiply(x, c), maximum(avg, c))
