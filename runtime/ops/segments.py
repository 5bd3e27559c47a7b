"""Segment reductions, sets and other ops whose output size depends on the data (TF1 semantics):
segment_{sum,mean,max,min,prod}, unsorted_segment_{max,min,mean,prod}, unique(_with_counts),
setdiff1d, invert_permutation, where(condition), boolean_mask, bincount,
histogram_fixed_width and searchsorted.

Data-dependent sizes are unknown static dims; each such op has ``expected_shapes`` for the
shape-only simulator (an upper bound: every element kept / distinct).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import Tensor, TensorShape
from ..registry import apply, apply_op, convert_to_tensor, default_cost, defop, numel
from .manip import _add_at, _scatter_cost, gather, unsorted_segment_sum
from .scatter import _check_int, apply_at, const_value

# ---- segment reductions --------------------------------------------------------------------------


def _lowest(dt: np.dtype) -> Any:
    return np.iinfo(dt).min if dt.kind in "iu" else -np.finfo(dt).max


def _highest(dt: np.dtype) -> Any:
    return np.iinfo(dt).max if dt.kind in "iu" else np.finfo(dt).max


def _reduce(xp: Any, kind: str, data: Any, ids: Any, n: int, empty_zero: bool) -> Any:
    """Segment ``kind`` of rows ``data`` (2-d or more) by 1-d ``ids`` in [0, n)."""
    rest = data.shape[1:]
    dt = data.dtype
    if kind == "sum":
        out = xp.zeros((n, *rest), dtype=dt)
        _add_at(xp, out, ids, data)
        return out
    init = {"max": _lowest(dt), "min": _highest(dt), "prod": 1}[kind]
    out = xp.full((n, *rest), init, dtype=dt)
    apply_at(xp, {"prod": "mul"}.get(kind, kind), out, ids, data)
    if empty_zero and kind in ("max", "min") and n:
        count = xp.bincount(ids, minlength=n)
        out[count == 0] = 0
    return out


def _segment_op(kind: str, op_name: str, differentiable: bool):
    d = defop(op_name, cost=_scatter_cost, differentiable=differentiable)

    @d.shape
    def _shape(op):
        data, ids = op.inputs
        _check_int(op_name, ids, "segment_ids")
        if ids.shape.ndims not in (None, 1):
            raise InvalidArgumentError(f"{op_name}: segment_ids must be 1-d, got {ids.shape}")
        if data.shape.ndims == 0:
            raise InvalidArgumentError(f"{op_name}: data must have rank >= 1, got a scalar")
        if data.shape.dims is None:
            return [(TensorShape(None), data.dtype)]
        if not TensorShape(data.shape.dims[:1]).is_compatible_with(ids.shape):
            raise InvalidArgumentError(
                f"{op_name}: segment_ids shape {ids.shape} must be data.shape[:1] of {data.shape}"
            )
        return [(TensorShape([None, *data.shape.dims[1:]]), data.dtype)]

    d.expected_shapes = lambda op, ins: [tuple(ins[0])]

    @d.kernel("cpu", "gpu")
    def _kernel(ctx, data, ids):
        xp = ctx.xp
        where = f"{op_name} {ctx.op.name!r}"
        if ids.ndim != 1 or data.ndim < 1 or ids.shape[0] != data.shape[0]:
            raise InvalidArgumentError(
                f"{where}: segment_ids shape {ids.shape} must be data.shape[:1] of {data.shape}"
            )
        if ids.size == 0:
            return xp.zeros((0, *data.shape[1:]), dtype=data.dtype)
        if int(ids[0]) < 0:
            raise InvalidArgumentError(f"{where}: segment id {int(ids[0])} is negative")
        if ids.size > 1 and bool((ids[1:] < ids[:-1]).any()):
            i = int(xp.argmax(ids[1:] < ids[:-1])) + 1
            raise InvalidArgumentError(
                f"{where}: segment_ids must be sorted, but segment_ids[{i}] = {int(ids[i])} < "
                f"segment_ids[{i - 1}] = {int(ids[i - 1])}"
            )
        return _reduce(xp, kind, data, ids, int(ids[-1]) + 1, empty_zero=True)

    return d


def _unsorted_op(kind: str, op_name: str, differentiable: bool):
    d = defop(op_name, cost=_scatter_cost, differentiable=differentiable)

    @d.shape
    def _shape(op):
        data, ids, num = op.inputs
        _check_int(op_name, ids, "segment_ids")
        _check_int(op_name, num, "num_segments")
        v = const_value(num)
        n = None if v is None else int(v)
        if n is not None and n < 0:
            raise InvalidArgumentError(f"{op_name}: num_segments must be >= 0, got {n}")
        if data.shape.dims is None or ids.shape.dims is None:
            return [(TensorShape(None), data.dtype)]
        k = ids.shape.ndims
        if not TensorShape(data.shape.dims[:k]).is_compatible_with(ids.shape):
            raise InvalidArgumentError(
                f"{op_name}: segment_ids shape {ids.shape} must be a prefix of data shape "
                f"{data.shape}"
            )
        return [(TensorShape([n, *data.shape.dims[k:]]), data.dtype)]

    @d.kernel("cpu", "gpu")
    def _kernel(ctx, data, ids, num):
        xp = ctx.xp
        n, k = int(num), ids.ndim
        if data.shape[:k] != ids.shape:
            raise InvalidArgumentError(
                f"{op_name} {ctx.op.name!r}: segment_ids shape {ids.shape} is not a prefix of "
                f"data shape {data.shape}"
            )
        ids = ids.reshape(-1)
        data = data.reshape((ids.size, *data.shape[k:]))
        if ids.size and int(ids.max()) >= n:
            raise InvalidArgumentError(
                f"{op_name} {ctx.op.name!r}: segment id {int(ids.max())} is not in [0, {n})"
            )
        if ids.size and int(ids.min()) < 0:  # negative ids are dropped, as in TF
            keep = ids >= 0
            ids, data = ids[keep], data[keep]
        return _reduce(xp, kind, data, ids, n, empty_zero=False)

    return d


SegmentSum = _segment_op("sum", "SegmentSum", True)
SegmentMax = _segment_op("max", "SegmentMax", True)
SegmentMin = _segment_op("min", "SegmentMin", True)
SegmentProd = _segment_op("prod", "SegmentProd", False)
UnsortedSegmentMax = _unsorted_op("max", "UnsortedSegmentMax", True)
UnsortedSegmentMin = _unsorted_op("min", "UnsortedSegmentMin", True)
UnsortedSegmentProd = _unsorted_op("prod", "UnsortedSegmentProd", False)


@SegmentSum.gradient
def _segment_sum_grad(op, g):
    return [gather(g, op.inputs[1]), None]


def _minmax_grad(op, g):
    """The gradient goes to the elements equal to their segment's result, split among ties."""
    from .array import cast
    from .math import divide, equal, maximum, multiply

    data, ids = op.inputs[0], op.inputs[1]
    if len(op.inputs) == 3:
        num = op.inputs[2]

        def pick(x):
            return apply("GatherDropNegatives", [x, ids], name="GatherDropNegatives")

        def total(x):
            return unsorted_segment_sum(x, ids, num)
    else:

        def pick(x):
            return gather(x, ids)

        def total(x):
            return segment_sum(x, ids)

    sel = cast(equal(data, pick(op.outputs[0])), data.dtype)
    ties = maximum(total(sel), 1)
    return [multiply(sel, pick(divide(g, ties))), None] + [None] * (len(op.inputs) - 2)


for _d in (SegmentMax, SegmentMin, UnsortedSegmentMax, UnsortedSegmentMin):
    _d.gradient(_minmax_grad)


def _seg_args(fn: str, data: Any, segment_ids: Any) -> tuple[Tensor, Tensor]:
    return convert_to_tensor(data), convert_to_tensor(segment_ids)


def _num(fn: str, num_segments: Any, ids: Tensor) -> Tensor:
    if isinstance(num_segments, Tensor) or hasattr(num_segments, "_as_graph_element"):
        return convert_to_tensor(num_segments)
    return convert_to_tensor(np.asarray(int(num_segments), dtype=ids.dtype.np))


def segment_sum(data: Any, segment_ids: Any, name: str | None = None) -> Tensor:
    """Sums of the rows of ``data`` by sorted 1-d ``segment_ids`` (``max(ids) + 1`` rows)."""
    return apply("SegmentSum", [data, segment_ids], name=name or "SegmentSum")


def segment_max(data: Any, segment_ids: Any, name: str | None = None) -> Tensor:
    """Maxima by sorted ``segment_ids``; an empty segment gives 0."""
    return apply("SegmentMax", [data, segment_ids], name=name or "SegmentMax")


def segment_min(data: Any, segment_ids: Any, name: str | None = None) -> Tensor:
    """Minima by sorted ``segment_ids``; an empty segment gives 0."""
    return apply("SegmentMin", [data, segment_ids], name=name or "SegmentMin")


def segment_prod(data: Any, segment_ids: Any, name: str | None = None) -> Tensor:
    """Products by sorted ``segment_ids``; an empty segment gives 1 (no gradient)."""
    return apply("SegmentProd", [data, segment_ids], name=name or "SegmentProd")


def _counts_like(data: Tensor, ids: Tensor, total: Any) -> Tensor:
    """Per-segment row counts shaped to broadcast against the segment results of ``data``."""
    from .array import cast, reshape
    from .math import maximum, ones_like

    if data.shape.ndims is None or ids.shape.ndims is None:
        raise InvalidArgumentError("segment mean: data and segment_ids need a known rank")
    c = maximum(total(cast(ones_like(ids), data.dtype)), 1)
    extra = data.shape.ndims - ids.shape.ndims
    return reshape(c, [-1] + [1] * extra) if extra else c


def segment_mean(data: Any, segment_ids: Any, name: str | None = None) -> Tensor:
    """Means by sorted ``segment_ids``; an empty segment gives 0."""
    from ..graph import name_scope
    from .math import divide

    d, ids = _seg_args("segment_mean", data, segment_ids)
    with name_scope(name or "SegmentMean"):
        return divide(segment_sum(d, ids), _counts_like(d, ids, lambda x: segment_sum(x, ids)))


def unsorted_segment_max(data: Any, segment_ids: Any, num_segments: Any, name=None) -> Tensor:
    """Maxima by ``segment_ids`` (negative ids dropped); an empty segment gives the lowest value
    of the dtype."""
    d, ids = _seg_args("unsorted_segment_max", data, segment_ids)
    num = _num("unsorted_segment_max", num_segments, ids)
    return apply("UnsortedSegmentMax", [d, ids, num], name=name or "UnsortedSegmentMax")


def unsorted_segment_min(data: Any, segment_ids: Any, num_segments: Any, name=None) -> Tensor:
    """Minima by ``segment_ids``; an empty segment gives the highest value of the dtype."""
    d, ids = _seg_args("unsorted_segment_min", data, segment_ids)
    num = _num("unsorted_segment_min", num_segments, ids)
    return apply("UnsortedSegmentMin", [d, ids, num], name=name or "UnsortedSegmentMin")


def unsorted_segment_prod(data: Any, segment_ids: Any, num_segments: Any, name=None) -> Tensor:
    """Products by ``segment_ids``; an empty segment gives 1 (no gradient)."""
    d, ids = _seg_args("unsorted_segment_prod", data, segment_ids)
    num = _num("unsorted_segment_prod", num_segments, ids)
    return apply("UnsortedSegmentProd", [d, ids, num], name=name or "UnsortedSegmentProd")


def unsorted_segment_mean(data: Any, segment_ids: Any, num_segments: Any, name=None) -> Tensor:
    """Means by ``segment_ids``; an empty segment gives 0."""
    from ..graph import name_scope
    from .math import divide

    d, ids = _seg_args("unsorted_segment_mean", data, segment_ids)
    num = _num("unsorted_segment_mean", num_segments, ids)
    with name_scope(name or "UnsortedSegmentMean"):
        s = unsorted_segment_sum(d, ids, num)
        return divide(s, _counts_like(d, ids, lambda x: unsorted_segment_sum(x, ids, num)))


# ---- Unique, UniqueWithCounts, ListDiff, InvertPermutation ---------------------------------------


def _unique_op(op_name: str, counts: bool):
    d = defop(op_name, cost=default_cost, differentiable=False)

    @d.shape
    def _shape(op):
        x = op.inputs[0]
        if x.shape.ndims not in (None, 1):
            raise InvalidArgumentError(f"{op_name}: x must be 1-d, got shape {x.shape}")
        out_idx = op.attrs["out_idx"]
        specs = [(TensorShape([None]), x.dtype), (x.shape, out_idx)]
        return specs + ([(TensorShape([None]), out_idx)] if counts else [])

    d.expected_shapes = lambda op, ins: [tuple(ins[0])] * (3 if counts else 2)

    @d.kernel("cpu", "gpu")
    def _kernel(ctx, x):
        xp = ctx.xp
        if x.ndim != 1:
            raise InvalidArgumentError(
                f"{op_name} {ctx.op.name!r}: x must be 1-d, got shape {x.shape}"
            )
        it = ctx.attrs["out_idx"].np
        u, first, inv, cnt = xp.unique(
            x, return_index=True, return_inverse=True, return_counts=True
        )
        order = xp.argsort(first)  # TF lists the values in order of first appearance
        rank = xp.empty_like(order)
        rank[order] = xp.arange(order.size)
        outs = (u[order], rank[inv.reshape(-1)].astype(it))
        return outs + ((cnt[order].astype(it),) if counts else ())

    return d


Unique = _unique_op("Unique", False)
UniqueWithCounts = _unique_op("UniqueWithCounts", True)


class UniqueOutput(NamedTuple):
    """What ``unique`` returns, as TF's ``Unique`` named tuple."""

    y: Any
    idx: Any


class UniqueWithCountsOutput(NamedTuple):
    """What ``unique_with_counts`` returns, as TF's ``UniqueWithCounts`` named tuple."""

    y: Any
    idx: Any
    count: Any


def unique(x: Any, out_idx: Any = _dt.int32, name: str | None = None) -> UniqueOutput:
    """``(y, idx)``: the distinct values of 1-d ``x`` in order of first appearance, and for each
    element of ``x`` the position of its value in ``y``."""
    op = apply_op("Unique", [x], {"out_idx": _dt.as_dtype(out_idx)}, name or "Unique")
    return UniqueOutput(*op.outputs)


def unique_with_counts(
    x: Any, out_idx: Any = _dt.int32, name: str | None = None
) -> UniqueWithCountsOutput:
    """``(y, idx, count)``: as ``unique``, and how often each value of ``y`` occurs."""
    op = apply_op(
        "UniqueWithCounts", [x], {"out_idx": _dt.as_dtype(out_idx)}, name or "UniqueWithCounts"
    )
    return UniqueWithCountsOutput(*op.outputs)


ListDiff = defop("ListDiff", cost=default_cost, differentiable=False)


@ListDiff.shape
def _list_diff_shape(op):
    x, y = op.inputs
    for t, what in ((x, "x"), (y, "y")):
        if t.shape.ndims not in (None, 1):
            raise InvalidArgumentError(f"ListDiff: {what} must be 1-d, got shape {t.shape}")
    if x.dtype != y.dtype:
        raise InvalidArgumentError(f"ListDiff: x is {x.dtype.name} but y is {y.dtype.name}")
    return [(TensorShape([None]), x.dtype), (TensorShape([None]), op.attrs["out_idx"])]


ListDiff.expected_shapes = lambda op, ins: [tuple(ins[0])] * 2


@ListDiff.kernel("cpu", "gpu")
def _list_diff(ctx, x, y):
    xp = ctx.xp
    keep = xp.nonzero(~xp.isin(x, y))[0]
    return x[keep], keep.astype(ctx.attrs["out_idx"].np)


def setdiff1d(x: Any, y: Any, index_dtype: Any = _dt.int32, name: str | None = None):
    """``(out, idx)``: the elements of 1-d ``x`` not in ``y``, in order, and their positions."""
    op = apply_op("ListDiff", [x, y], {"out_idx": _dt.as_dtype(index_dtype)}, name or "ListDiff")
    return tuple(op.outputs)


InvertPermutation = defop("InvertPermutation", cost=default_cost, differentiable=False)


@InvertPermutation.shape
def _invert_perm_shape(op):
    x = op.inputs[0]
    _check_int("InvertPermutation", x, "x")
    if x.shape.ndims not in (None, 1):
        raise InvalidArgumentError(f"InvertPermutation: x must be 1-d, got shape {x.shape}")
    return [(x.shape, x.dtype)]


@InvertPermutation.kernel("cpu", "gpu")
def _invert_perm(ctx, x):
    xp = ctx.xp
    n = x.shape[0]
    out = xp.full(n, -1, dtype=x.dtype)
    if n:
        bad = (x < 0) | (x >= n)
        if bool(bad.any()):
            i = int(xp.argmax(bad))
            raise InvalidArgumentError(
                f"InvertPermutation {ctx.op.name!r}: x[{i}] = {int(x[i])} is not in [0, {n})"
            )
        out[x] = xp.arange(n, dtype=x.dtype)
        if bool((out < 0).any()):
            raise InvalidArgumentError(
                f"InvertPermutation {ctx.op.name!r}: x is not a permutation (a value repeats)"
            )
    return out


def invert_permutation(x: Any, name: str | None = None) -> Tensor:
    """``y`` with ``y[x[i]] = i`` for a permutation ``x`` of 0..n-1."""
    return apply("InvertPermutation", [x], name=name or "InvertPermutation")


# ---- Where(condition), BooleanMask ---------------------------------------------------------------

Where = defop("Where", cost=default_cost, differentiable=False)


@Where.shape
def _where_shape(op):
    c = op.inputs[0]
    return [(TensorShape([None, c.shape.ndims]), _dt.int64)]


Where.expected_shapes = lambda op, ins: [(numel(ins[0]), len(ins[0]))]


@Where.kernel("cpu", "gpu")
def _where(ctx, c):
    xp = ctx.xp
    if c.ndim == 0:
        return xp.zeros((int(bool(c)), 0), dtype=np.int64)
    return xp.argwhere(c.astype(bool) if c.dtype != bool else c).astype(np.int64)


def where_indices(condition: Any, name: str | None = None) -> Tensor:
    """The int64 coordinates ``[n, rank]`` of the true (non-zero) elements, in row-major order."""
    return apply("Where", [condition], name=name or "Where")


BooleanMask = defop("BooleanMask", cost=default_cost)


def _mask_axis(op) -> tuple[int, int]:
    return op.attrs["axis"], op.inputs[1].shape.ndims


@BooleanMask.shape
def _boolean_mask_shape(op):
    t, m = op.inputs
    if m.dtype != _dt.bool_:
        raise InvalidArgumentError(f"BooleanMask: mask must be bool, got {m.dtype.name}")
    axis, k = _mask_axis(op)
    if k == 0:
        raise InvalidArgumentError("BooleanMask: mask must have rank >= 1, got a scalar")
    if t.shape.dims is None:
        return [(TensorShape(None), t.dtype)]
    if axis + k > t.shape.ndims or not t.shape[axis : axis + k].is_compatible_with(m.shape):
        raise InvalidArgumentError(
            f"BooleanMask: mask shape {m.shape} must match tensor shape {t.shape} at axis {axis}"
        )
    return [(TensorShape([*t.shape.dims[:axis], None, *t.shape.dims[axis + k :]]), t.dtype)]


def _expected_mask(op, ins):
    t, m = ins
    axis, k = op.attrs["axis"], len(m)
    return [(*t[:axis], numel(m), *t[axis + k :])]


BooleanMask.expected_shapes = _expected_mask


@BooleanMask.kernel("cpu", "gpu")
def _boolean_mask(ctx, t, m):
    axis = ctx.attrs["axis"]
    if t.shape[axis : axis + m.ndim] != m.shape:
        raise InvalidArgumentError(
            f"BooleanMask {ctx.op.name!r}: mask shape {m.shape} does not match tensor shape "
            f"{t.shape} at axis {axis}"
        )
    return t[(slice(None),) * axis + (m,)]


@BooleanMask.gradient
def _boolean_mask_grad(op, g):
    t, m = op.inputs
    return [apply("BooleanMaskGrad", [g, m, t], op.attrs, name="BooleanMaskGrad"), None]


BooleanMaskGrad = defop("BooleanMaskGrad", cost=default_cost)


@BooleanMaskGrad.shape
def _bmg_shape(op):
    return [(op.inputs[2].shape, op.inputs[0].dtype)]


@BooleanMaskGrad.kernel("cpu", "gpu")
def _bmg(ctx, g, m, t):
    out = ctx.xp.zeros(t.shape, dtype=g.dtype)
    out[(slice(None),) * ctx.attrs["axis"] + (m,)] = g
    return out


@BooleanMaskGrad.gradient
def _bmg_grad(op, gg):
    return [apply("BooleanMask", [gg, op.inputs[1]], op.attrs, name="BooleanMask"), None, None]


def boolean_mask(tensor: Any, mask: Any, name: str = "boolean_mask", axis: Any = None) -> Tensor:
    """The slices of ``tensor`` where the bool ``mask`` is true; ``mask`` covers dimensions
    ``axis .. axis + rank(mask) - 1``, which become one dimension of unknown size."""
    t = convert_to_tensor(tensor)
    m = convert_to_tensor(mask)
    if m.shape.ndims is None:
        raise InvalidArgumentError("boolean_mask: mask needs a known rank")
    a = 0 if axis is None else int(axis)
    if a < 0:
        if t.shape.ndims is None:
            raise InvalidArgumentError("boolean_mask: a negative axis needs a known rank")
        a += t.shape.ndims
    return apply("BooleanMask", [t, m], {"axis": a}, name or "BooleanMask")


# ---- Bincount, HistogramFixedWidth, SearchSorted -------------------------------------------------

Bincount = defop("Bincount", cost=default_cost, differentiable=False)


@Bincount.shape
def _bincount_shape(op):
    arr = op.inputs[0]
    if arr.dtype != _dt.int32:
        raise InvalidArgumentError(f"Bincount: arr must be int32, got {arr.dtype.name}")
    if len(op.inputs) == 2 and op.inputs[1].shape.is_compatible_with(arr.shape) is False:
        raise InvalidArgumentError(
            f"Bincount: weights shape {op.inputs[1].shape} must match arr shape {arr.shape}"
        )
    lo, hi = op.attrs["minlength"], op.attrs["maxlength"]
    n = lo if lo is not None and lo == hi else None
    return [(TensorShape([n]), op.attrs["dtype"])]


def _expected_bincount(op, ins):
    lo, hi = op.attrs["minlength"], op.attrs["maxlength"]
    n = max(lo or 0, numel(ins[0]))
    return [(n if hi is None else min(n, hi),)]


Bincount.expected_shapes = _expected_bincount


@Bincount.kernel("cpu", "gpu")
def _bincount(ctx, arr, weights=None):
    xp = ctx.xp
    lo, hi = ctx.attrs["minlength"], ctx.attrs["maxlength"]
    a = arr.reshape(-1)
    if a.size and int(a.min()) < 0:
        raise InvalidArgumentError(
            f"Bincount {ctx.op.name!r}: arr has a negative value {int(a.min())}"
        )
    w = None if weights is None else weights.reshape(-1)
    if w is not None and w.size != a.size:
        raise InvalidArgumentError(
            f"Bincount {ctx.op.name!r}: weights shape {weights.shape} != arr shape {arr.shape}"
        )
    n = int(a.max()) + 1 if a.size else 0
    n = max(n, lo or 0)
    if hi is not None:
        n = min(n, hi)
        keep = a < hi
        a = a[keep]
        w = None if w is None else w[keep]
    dt = ctx.attrs["dtype"].np
    if a.size == 0:
        return xp.zeros(n, dtype=dt)
    return xp.bincount(a, weights=w, minlength=n).astype(dt)


def bincount(
    arr: Any,
    weights: Any = None,
    minlength: Any = None,
    maxlength: Any = None,
    dtype: Any = _dt.int32,
    name: str | None = None,
) -> Tensor:
    """Counts of each value 0..max(arr) of int32 ``arr`` (summed ``weights`` where given: the
    result then has their dtype); at least ``minlength`` and at most ``maxlength`` entries."""
    ins = [arr]
    if weights is not None:
        w = convert_to_tensor(weights)
        ins.append(w)
        dtype = w.dtype
    attrs = {
        "minlength": None if minlength is None else int(minlength),
        "maxlength": None if maxlength is None else int(maxlength),
        "dtype": _dt.as_dtype(dtype),
    }
    return apply("Bincount", ins, attrs, name or "Bincount")


HistogramFixedWidth = defop("HistogramFixedWidth", cost=default_cost, differentiable=False)


@HistogramFixedWidth.shape
def _hist_shape(op):
    v, r = op.inputs
    if r.dtype != v.dtype or not r.shape.is_compatible_with([2]):
        raise InvalidArgumentError(
            f"HistogramFixedWidth: value_range must be a [2] {v.dtype.name} tensor, got "
            f"{r.shape} {r.dtype.name}"
        )
    return [(TensorShape([op.attrs["nbins"]]), op.attrs["dtype"])]


@HistogramFixedWidth.kernel("cpu", "gpu")
def _hist(ctx, v, r):
    xp = ctx.xp
    n = ctx.attrs["nbins"]
    lo, hi = float(r[0]), float(r[1])
    if not hi > lo:
        raise InvalidArgumentError(
            f"HistogramFixedWidth {ctx.op.name!r}: value_range [{lo}, {hi}] is empty"
        )
    b = xp.floor((v.reshape(-1).astype(np.float64) - lo) / (hi - lo) * n)
    b = xp.clip(b, 0, n - 1).astype(np.int64)
    return xp.bincount(b, minlength=n).astype(ctx.attrs["dtype"].np)


def histogram_fixed_width(
    values: Any, value_range: Any, nbins: int = 100, dtype: Any = _dt.int32, name=None
) -> Tensor:
    """Counts of ``values`` in ``nbins`` equal bins over ``value_range``; values below the range
    count in the first bin, values above it in the last."""
    v = convert_to_tensor(values)
    r = value_range
    if not isinstance(r, Tensor):
        r = convert_to_tensor(np.asarray(r, dtype=v.dtype.np))
    if int(nbins) < 1:
        raise InvalidArgumentError(f"histogram_fixed_width: nbins must be >= 1, got {nbins}")
    attrs = {"nbins": int(nbins), "dtype": _dt.as_dtype(dtype)}
    return apply("HistogramFixedWidth", [v, r], attrs, name or "HistogramFixedWidth")


SearchSorted = defop("SearchSorted", cost=default_cost, differentiable=False)


@SearchSorted.shape
def _searchsorted_shape(op):
    s, v = op.inputs
    if s.dtype != v.dtype:
        raise InvalidArgumentError(
            f"SearchSorted: sorted_sequence is {s.dtype.name} but values is {v.dtype.name}"
        )
    if s.shape.ndims == 0 or v.shape.ndims == 0:
        raise InvalidArgumentError("SearchSorted: inputs must have rank >= 1")
    if s.shape.dims is not None and v.shape.dims is not None:
        if not s.shape[:-1].is_compatible_with(v.shape[:-1]):
            raise InvalidArgumentError(
                f"SearchSorted: leading dimensions differ: {s.shape} and {v.shape}"
            )
    return [(v.shape, op.attrs["out_type"])]


@SearchSorted.kernel("cpu", "gpu")
def _searchsorted(ctx, s, v):
    xp = ctx.xp
    if s.shape[:-1] != v.shape[:-1]:
        raise InvalidArgumentError(
            f"SearchSorted {ctx.op.name!r}: leading dimensions differ: {s.shape} and {v.shape}"
        )
    side = ctx.attrs["side"]
    s2 = s.reshape(-1, s.shape[-1])
    v2 = v.reshape(-1, v.shape[-1])
    out = xp.empty(v2.shape, dtype=ctx.attrs["out_type"].np)
    for i in range(s2.shape[0]):
        out[i] = xp.searchsorted(s2[i], v2[i], side=side)
    return out.reshape(v.shape)


def searchsorted(
    sorted_sequence: Any,
    values: Any,
    side: str = "left",
    out_type: Any = _dt.int32,
    name: str | None = None,
) -> Tensor:
    """Insertion points of ``values`` into the rows of ``sorted_sequence`` (last dimension)."""
    if side not in ("left", "right"):
        raise InvalidArgumentError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    attrs = {"side": side, "out_type": _dt.as_dtype(out_type)}
    return apply("SearchSorted", [sorted_sequence, values], attrs, name or "SearchSorted")
