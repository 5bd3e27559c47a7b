"""More SparseTensor ops, with TF's rules (sparse.py has the core ones):

* ``sparse_fill_empty_rows``: each empty row gets one entry ``default_value`` at column 0;
  entries in row-major order; also the indicator of the rows that were empty. Gradient: the
  values' through the entries' new places, the default's the sum over the filled places.
* ``sparse_reduce_max``: the maximum of the entries present along ``axis`` (a dense tensor; a
  cell with no entry is 0, as TF's kernel leaves it).
* ``sparse_softmax``: a softmax over the entries of each innermost row (rows in canonical order,
  as TF requires); differentiable.
* ``sparse_maximum`` / ``sparse_minimum``: elementwise over the union of two SparseTensors'
  entries (an absent entry counts as 0).
* ``sparse_slice`` (differentiable in its values), ``sparse_split``, ``sparse.expand_dims``,
  ``sparse_to_indicator``, ``sparse_merge`` and ``sparse_mask`` (of IndexedSlices).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import TensorShape, get_default_graph
from ..registry import apply, convert_to_tensor, defop
from .sparse import SparseTensor, _as_sparse, _fix_shape, _rank

SparseFillEmptyRows = defop("SparseFillEmptyRows")
SparseFillEmptyRowsGrad = defop("SparseFillEmptyRowsGrad", differentiable=False)
SparseReduceMax = defop("SparseReduceMax", differentiable=False)
SparseSoftmax = defop("SparseSoftmax")
SparseSparseCwise = defop("SparseSparseCwise", differentiable=False)
SparseSlice = defop("SparseSlice")
SparseSliceGrad = defop("SparseSliceGrad", differentiable=False)


def _parts(where: str, idx: Any, vals: Any, shape: Any) -> tuple:
    idx = np.asarray(idx, np.int64).reshape(-1, np.asarray(shape).size)
    vals, shape = np.asarray(vals), np.asarray(shape, np.int64)
    if len(idx) != len(vals):
        raise InvalidArgumentError(f"{where}: {len(idx)} indices for {len(vals)} values")
    if len(idx) and ((idx < 0).any() or (idx >= shape).any()):
        bad = idx[((idx < 0) | (idx >= shape)).any(axis=1)][0].tolist()
        raise InvalidArgumentError(
            f"{where}: index {bad} is outside the dense shape {shape.tolist()}"
        )
    return idx, vals, shape


def _sparse_outputs(op, n_extra: list | None = None) -> list:
    rank = op.inputs[0].shape.dims[1] if op.inputs[0].shape.ndims == 2 else None
    out = [
        (TensorShape([None, rank]), _dt.int64),
        (TensorShape([None]), op.inputs[1].dtype),
        (TensorShape([rank]), _dt.int64),
    ]
    return out + (n_extra or [])


# ---- sparse_fill_empty_rows ---------------------------------------------------------------------


@SparseFillEmptyRows.shape
def _fill_shape(op):
    return _sparse_outputs(op) + [
        (TensorShape([None]), _dt.bool_),
        (TensorShape([None]), _dt.int64),
    ]


@SparseFillEmptyRows.kernel("cpu")
def _fill(ctx, idx, vals, shape, default):
    where = f"SparseFillEmptyRows {ctx.op.name!r}"
    idx, vals, shape = _parts(where, idx, vals, shape)
    if len(shape) < 1:
        raise InvalidArgumentError(f"{where}: the dense shape must have rank >= 1")
    rows = int(shape[0])
    counts = np.bincount(idx[:, 0], minlength=rows) if len(idx) else np.zeros(rows, np.int64)
    empty = counts == 0
    if rows == 0 and len(idx):
        raise InvalidArgumentError(f"{where}: a dense shape with 0 rows cannot hold entries")
    # existing entries keep their order within a row; rows in order
    order = np.argsort(idx[:, 0], kind="stable") if len(idx) else np.zeros(0, np.int64)
    new_rows = np.nonzero(empty)[0]
    filled = np.zeros((len(new_rows), len(shape)), np.int64)
    filled[:, 0] = new_rows
    all_idx = np.concatenate([idx[order], filled])
    all_vals = np.concatenate([vals[order], np.full(len(new_rows), default, vals.dtype)])
    by_row = np.argsort(all_idx[:, 0], kind="stable")
    out_idx, out_vals = all_idx[by_row], all_vals[by_row]
    position = np.empty(len(by_row), np.int64)
    position[by_row] = np.arange(len(by_row))
    reverse = np.empty(len(idx), np.int64)
    reverse[order] = position[: len(idx)]
    return out_idx, out_vals, shape, empty, reverse


@SparseFillEmptyRows.gradient
def _fill_grad(op, g_idx, g_vals, g_shape, g_empty, g_rev):
    d_vals, d_default = apply(
        "SparseFillEmptyRowsGrad", [op.outputs[4], g_vals], {}, "SparseFillEmptyRowsGrad"
    )
    return [None, d_vals, None, d_default]


@SparseFillEmptyRowsGrad.shape
def _fill_grad_shape(op):
    return [(op.inputs[0].shape, op.inputs[1].dtype), (TensorShape([]), op.inputs[1].dtype)]


@SparseFillEmptyRowsGrad.kernel("cpu")
def _fill_grad_kernel(ctx, reverse, g):
    reverse, g = np.asarray(reverse), np.asarray(g)
    d_vals = g[reverse]
    rest = np.ones(len(g), bool)
    rest[reverse] = False
    return d_vals, np.asarray(g[rest].sum(), g.dtype)


def sparse_fill_empty_rows(sp_input: Any, default_value: Any, name: Any = None) -> tuple:
    """``(SparseTensor with every empty row filled, empty_row_indicator)``."""
    sp = _as_sparse(sp_input, "sparse_fill_empty_rows")
    d = convert_to_tensor(default_value, dtype=sp.values.dtype)
    if d.shape.ndims not in (None, 0):
        raise InvalidArgumentError(
            f"sparse_fill_empty_rows: default_value must be a scalar, got {d.shape}"
        )
    idx, vals, shape, empty, _ = apply(
        "SparseFillEmptyRows",
        [sp.indices, sp.values, sp.dense_shape, d],
        {},
        name or "SparseFillEmptyRows",
    )
    return SparseTensor(idx, vals, sp.dense_shape), empty


# ---- sparse_reduce_max --------------------------------------------------------------------------


@SparseReduceMax.shape
def _reduce_max_shape(op):
    return [(TensorShape(op.attrs["out_dims"]), op.inputs[1].dtype)]


@SparseReduceMax.kernel("cpu")
def _reduce_max(ctx, idx, vals, shape):
    where = f"SparseReduceMax {ctx.op.name!r}"
    idx, vals, shape = _parts(where, idx, vals, shape)
    axes = ctx.attrs["axes"]
    rank = len(shape)
    axes = list(range(rank)) if axes is None else [a + rank if a < 0 else a for a in axes]
    kept = [d for d in range(rank) if d not in axes]
    low = np.finfo(vals.dtype).min if vals.dtype.kind == "f" else np.iinfo(vals.dtype).min
    out = np.full([int(shape[d]) for d in kept], low, vals.dtype)
    if len(idx) and kept:
        at = tuple(idx[:, d] for d in kept)
        np.maximum.at(out, at, vals)
        seen = np.zeros(out.shape, bool)
        seen[at] = True
        out[~seen] = 0  # a cell without entries is 0, as TF's kernel leaves it
    elif len(idx):
        out = np.asarray(vals.max(), vals.dtype)
    else:  # no entries: zeros of the kept dimensions
        out = np.zeros(out.shape, vals.dtype)
    if ctx.attrs["keepdims"]:
        out = out.reshape([1 if d in axes else int(shape[d]) for d in range(rank)])
    return out


def sparse_reduce_max(
    sp_input: Any,
    axis: Any = None,
    keepdims: Any = None,
    reduction_axes: Any = None,
    keep_dims: Any = None,
    name: Any = None,
) -> Any:
    """The maximum of the entries present over ``axis`` (all by default): a dense tensor."""
    sp = _as_sparse(sp_input, "sparse_reduce_max")
    axis = reduction_axes if axis is None else axis
    keep = bool(keepdims if keepdims is not None else keep_dims)
    rank = _rank(sp, "sparse_reduce_max")
    axes = None if axis is None else ([int(axis)] if np.ndim(axis) == 0 else [int(a) for a in axis])
    norm = list(range(rank)) if axes is None else [a + rank if a < 0 else a for a in axes]
    if any(not 0 <= a < rank for a in norm):
        raise InvalidArgumentError(
            f"sparse_reduce_max: axis {axis} is out of range for rank {rank}"
        )
    dims = sp.shape.dims or [None] * rank
    out_dims = (
        [1 if d in norm else dims[d] for d in range(rank)]
        if keep
        else [dims[d] for d in range(rank) if d not in norm]
    )
    attrs = {"axes": axes, "keepdims": keep, "out_dims": out_dims}
    return apply(
        "SparseReduceMax", [sp.indices, sp.values, sp.dense_shape], attrs, name or "SparseReduceMax"
    )


# ---- sparse_softmax -----------------------------------------------------------------------------


def _groups(idx: np.ndarray) -> np.ndarray:
    """Each entry's group id: entries sharing all but the last index, in order of appearance."""
    if not len(idx):
        return np.zeros(0, np.int64)
    lead = idx[:, :-1]
    change = np.ones(len(idx), bool)
    change[1:] = (lead[1:] != lead[:-1]).any(axis=1)
    return np.cumsum(change) - 1


@SparseSoftmax.shape
def _softmax_shape(op):
    return [(op.inputs[1].shape, op.inputs[1].dtype)]


@SparseSoftmax.kernel("cpu")
def _softmax(ctx, idx, vals, shape):
    idx, vals, shape = _parts(f"SparseSoftmax {ctx.op.name!r}", idx, vals, shape)
    if len(shape) < 2:
        raise InvalidArgumentError(f"SparseSoftmax {ctx.op.name!r}: the input must have rank >= 2")
    # as TF's kernel: the entries are put in row-major order (a copy), each row's softmax taken,
    # and the values written in that order, the op's indices left as given (the same thing for
    # indices in canonical order; PetarV-/GAT feeds its adjacency column-major)
    order = np.lexsort(idx.T[::-1])
    idx, vals = idx[order], vals[order]
    grp = _groups(idx)
    n = int(grp.max()) + 1 if len(grp) else 0
    top = np.full(n, -np.inf, vals.dtype)
    np.maximum.at(top, grp, vals)
    e = np.exp(vals - top[grp])
    total = np.zeros(n, vals.dtype)
    np.add.at(total, grp, e)
    return (e / total[grp]).astype(vals.dtype)


@SparseSoftmax.gradient
def _softmax_grad(op, g):
    from .manip import gather, unsorted_segment_sum

    y = op.outputs[0]
    grp = apply("SparseGroups", [op.inputs[0]], {}, "SparseGroups")
    n = apply("SparseGroupCount", [grp], {}, "SparseGroupCount")
    dot = unsorted_segment_sum(g * y, grp, n)
    return [None, (g - gather(dot, grp)) * y, None]


SparseGroups = defop("SparseGroups", differentiable=False)
SparseGroupCount = defop("SparseGroupCount", differentiable=False)


@SparseGroups.shape
def _groups_shape(op):
    return [
        (TensorShape([op.inputs[0].shape.dims[0] if op.inputs[0].shape.ndims else None]), _dt.int64)
    ]


@SparseGroups.kernel("cpu")
def _groups_kernel(ctx, idx):
    """Each entry's row (all but the last index), numbered in row-major order whatever the
    entries' order: TF's gradient sums g * y over each row by index (sparse_reduce_sum)."""
    idx = np.asarray(idx, np.int64)
    if not len(idx) or idx.shape[1] < 2:
        return _groups(idx)
    _, inv = np.unique(idx[:, :-1], axis=0, return_inverse=True)
    return inv.reshape(-1).astype(np.int64)


@SparseGroupCount.shape
def _group_count_shape(op):
    return [(TensorShape([]), _dt.int64)]


@SparseGroupCount.kernel("cpu")
def _group_count(ctx, grp):
    return np.asarray(int(grp.max()) + 1 if len(grp) else 0, np.int64)


def sparse_softmax(sp_input: Any, name: Any = None) -> SparseTensor:
    """A softmax over the entries of each innermost row (the same indices)."""
    sp = _as_sparse(sp_input, "sparse_softmax")
    vals = apply(
        "SparseSoftmax", [sp.indices, sp.values, sp.dense_shape], {}, name or "SparseSoftmax"
    )
    return SparseTensor(sp.indices, vals, sp.dense_shape)


# ---- sparse_maximum / sparse_minimum ------------------------------------------------------------


@SparseSparseCwise.shape
def _cwise_shape(op):
    return _sparse_outputs(op)


@SparseSparseCwise.kernel("cpu")
def _cwise(ctx, ai, av, ash, bi, bv, bsh):
    where = f"SparseSparse{ctx.attrs['kind'].title()} {ctx.op.name!r}"
    ai, av, ash = _parts(where, ai, av, ash)
    bi, bv, bsh = _parts(where, bi, bv, bsh)
    if ash.tolist() != bsh.tolist():
        raise InvalidArgumentError(
            f"{where}: operands' shapes do not match: {ash.tolist()} vs {bsh.tolist()}"
        )
    keys: dict = {}
    for i, k in enumerate(map(tuple, ai.tolist())):
        keys[k] = [av[i], 0]
    for i, k in enumerate(map(tuple, bi.tolist())):
        keys.setdefault(k, [0, 0])[1] = bv[i]
    order = sorted(keys)
    fn = np.maximum if ctx.attrs["kind"] == "maximum" else np.minimum
    vals = np.array([fn(*keys[k]) for k in order], av.dtype)
    idx = np.array(order, np.int64).reshape(-1, len(ash))
    return idx, vals, ash


def _sparse_cwise(kind: str, sp_a: Any, sp_b: Any, name: Any) -> SparseTensor:
    a, b = _as_sparse(sp_a, f"sparse_{kind}", "sp_a"), _as_sparse(sp_b, f"sparse_{kind}", "sp_b")
    if a.values.dtype != b.values.dtype:
        raise TypeError(
            f"sparse_{kind}: the operands' dtypes differ: {a.values.dtype.name} and {b.values.dtype.name}"
        )
    idx, vals, shape = apply(
        "SparseSparseCwise",
        [a.indices, a.values, a.dense_shape, b.indices, b.values, b.dense_shape],
        {"kind": kind},
        name or f"SparseSparse{kind.title()}",
    )
    return SparseTensor(idx, vals, a.dense_shape)


def sparse_maximum(sp_a: Any, sp_b: Any, name: Any = None) -> SparseTensor:
    """The elementwise maximum over the union of the two operands' entries."""
    return _sparse_cwise("maximum", sp_a, sp_b, name)


def sparse_minimum(sp_a: Any, sp_b: Any, name: Any = None) -> SparseTensor:
    """The elementwise minimum over the union of the two operands' entries."""
    return _sparse_cwise("minimum", sp_a, sp_b, name)


# ---- sparse_slice, sparse_split -----------------------------------------------------------------


@SparseSlice.shape
def _slice_shape(op):
    return _sparse_outputs(op) + [(TensorShape([None]), _dt.int64)]


@SparseSlice.kernel("cpu")
def _slice(ctx, idx, vals, shape, start, size):
    where = f"SparseSlice {ctx.op.name!r}"
    idx, vals, shape = _parts(where, idx, vals, shape)
    start, size = np.asarray(start, np.int64).reshape(-1), np.asarray(size, np.int64).reshape(-1)
    if len(start) != len(shape) or len(size) != len(shape):
        raise InvalidArgumentError(
            f"{where}: start and size must have {len(shape)} entries, got {start.tolist()} and {size.tolist()}"
        )
    if (start < 0).any() or (size < 0).any():
        raise InvalidArgumentError(
            f"{where}: start {start.tolist()} and size {size.tolist()} must be >= 0"
        )
    end = np.minimum(start + size, shape)
    keep = ((idx >= start) & (idx < end)).all(axis=1) if len(idx) else np.zeros(0, bool)
    out_shape = np.maximum(end - start, 0)
    kept = np.nonzero(keep)[0]
    return idx[kept] - start, vals[kept], out_shape, kept.astype(np.int64)


@SparseSlice.gradient
def _slice_grad(op, g_idx, g_vals, g_shape, g_kept):
    d = apply("SparseSliceGrad", [g_vals, op.outputs[3], op.inputs[1]], {}, "SparseSliceGrad")
    return [None, d, None, None, None]


@SparseSliceGrad.shape
def _slice_grad_shape(op):
    return [(op.inputs[2].shape, op.inputs[0].dtype)]


@SparseSliceGrad.kernel("cpu")
def _slice_grad_kernel(ctx, g, kept, vals):
    out = np.zeros(np.asarray(vals).shape, np.asarray(g).dtype)
    out[np.asarray(kept)] = g
    return out


def sparse_slice(sp_input: Any, start: Any, size: Any, name: Any = None) -> SparseTensor:
    """The entries with ``start <= index < start + size`` in every dimension, indices shifted
    by ``start``; the dense shape cut at the input's."""
    sp = _as_sparse(sp_input, "sparse_slice")
    s0 = convert_to_tensor(start, _dt.int64)
    s1 = convert_to_tensor(size, _dt.int64)
    idx, vals, shape, _ = apply(
        "SparseSlice", [sp.indices, sp.values, sp.dense_shape, s0, s1], {}, name or "SparseSlice"
    )
    return SparseTensor(idx, vals, shape)


def sparse_split(
    keyword_required: Any = None,
    sp_input: Any = None,
    num_split: Any = None,
    axis: Any = None,
    name: Any = None,
    split_dim: Any = None,
) -> list:
    """``num_split`` SparseTensors along ``axis``: the first ``size % num_split`` one wider."""
    from .array import cast
    from .manip import stack

    if keyword_required is not None:
        raise ValueError("sparse_split: use keyword arguments (sp_input=, num_split=, axis=)")
    axis = split_dim if axis is None else axis
    if sp_input is None or num_split is None or axis is None:
        raise ValueError("sparse_split: sp_input, num_split and axis are required")
    sp = _as_sparse(sp_input, "sparse_split")
    rank = _rank(sp, "sparse_split")
    axis = int(axis) + rank if int(axis) < 0 else int(axis)
    if not 0 <= axis < rank:
        raise InvalidArgumentError(f"sparse_split: axis {axis} is out of range for rank {rank}")
    k = int(num_split)
    if k < 1:
        raise InvalidArgumentError(f"sparse_split: num_split must be >= 1, got {num_split}")
    g = get_default_graph()
    with g.name_scope(name or "SparseSplit"):
        from .control import Assert
        from .math import less_equal

        n = sp.dense_shape[axis]
        check = Assert(  # TF's kernel refuses more pieces than the dimension has entries
            less_equal(convert_to_tensor(np.int64(k)), n),
            [f"sparse_split: num_split {k} is more than dimension {axis}'s size", n],
            name="CheckNumSplit",
        )
        with g.control_dependencies([check]):
            n = n + 0
        base, extra = n // k, n % k
        out = []
        for i in range(k):
            width = base + cast(i < extra, _dt.int64)
            begin = base * i + _min_i(extra, i)
            start = stack(
                [begin if d == axis else convert_to_tensor(np.int64(0)) for d in range(rank)]
            )
            size = stack([width if d == axis else sp.dense_shape[d] for d in range(rank)])
            out.append(sparse_slice(sp, start, size))
        return out


def _min_i(t: Any, i: int) -> Any:
    from .math import minimum

    return minimum(t, convert_to_tensor(np.int64(i)))


# ---- compositions -------------------------------------------------------------------------------


def sparse_expand_dims(sp_input: Any, axis: Any = None, name: Any = None) -> SparseTensor:
    """``sp_input`` with a dimension of size 1 inserted at ``axis``."""
    from .manip import concat, zeros

    sp = _as_sparse(sp_input, "sparse.expand_dims")
    rank = _rank(sp, "sparse.expand_dims")
    a = -1 if axis is None else int(axis)
    a = a + rank + 1 if a < 0 else a
    if not 0 <= a <= rank:
        raise InvalidArgumentError(
            f"sparse.expand_dims: axis {axis} is out of range for rank {rank}"
        )
    with get_default_graph().name_scope(name or "expand_dims"):
        from .array import shape as shape_of
        from .manip import stack

        n = shape_of(sp.indices, out_type=_dt.int64)[0]
        col = zeros(stack([n, convert_to_tensor(np.int64(1))]), _dt.int64)
        idx = concat([sp.indices[:, :a], col, sp.indices[:, a:]], 1)
        shape = concat(
            [sp.dense_shape[:a], convert_to_tensor(np.array([1], np.int64)), sp.dense_shape[a:]], 0
        )
    dims = sp.shape.dims
    out = SparseTensor(idx, sp.values, shape)
    if dims is not None:
        _fix_shape(out.dense_shape, TensorShape([rank + 1]))
    return out


def sparse_merge(
    sp_ids: Any, sp_values: Any, vocab_size: Any, name: Any = None, already_sorted: bool = False
) -> SparseTensor:
    """A SparseTensor whose last index is the id from ``sp_ids`` and whose values are
    ``sp_values``' (``[..., vocab_size]``), in row-major order unless ``already_sorted``."""
    from .array import cast
    from .manip import concat, expand_dims
    from .sparse import sparse_reorder

    ids = _as_sparse(sp_ids, "sparse_merge", "sp_ids")
    values = _as_sparse(sp_values, "sparse_merge", "sp_values")
    if not ids.values.dtype.is_integer:
        raise TypeError(f"sparse_merge: sp_ids must hold integer ids, got {ids.values.dtype.name}")
    with get_default_graph().name_scope(name or "SparseMerge"):
        idx = concat([ids.indices[:, :-1], expand_dims(cast(ids.values, _dt.int64), 1)], 1)
        shape = concat(
            [ids.dense_shape[:-1], expand_dims(convert_to_tensor(vocab_size, _dt.int64), 0)], 0
        )
        out = SparseTensor(idx, values.values, shape)
        return out if already_sorted else sparse_reorder(out)


def sparse_to_indicator(sp_input: Any, vocab_size: Any, name: Any = None) -> Any:
    """A dense bool ``[..., vocab_size]``: True at every id a row of ``sp_input`` holds."""
    from .math import ones_like
    from .sparse import sparse_tensor_to_dense

    sp = _as_sparse(sp_input, "sparse_to_indicator")
    with get_default_graph().name_scope(name or "SparseToIndicator"):
        merged = sparse_merge(
            sp,
            SparseTensor(sp.indices, ones_like(sp.values, dtype=_dt.bool_), sp.dense_shape),
            vocab_size,
        )
        return sparse_tensor_to_dense(merged, default_value=False, validate_indices=False)


def sparse_mask(a: Any, mask_indices: Any, name: Any = None) -> Any:
    """The IndexedSlices ``a`` without the slices whose index is in ``mask_indices``."""
    from ..gradients import IndexedSlices
    from .manip import gather
    from .segments import setdiff1d

    if not isinstance(a, IndexedSlices):
        raise TypeError(f"sparse_mask: a must be IndexedSlices, got {type(a).__name__}")
    with get_default_graph().name_scope(name or "sparse_mask"):
        _, keep = setdiff1d(a.indices, convert_to_tensor(mask_indices, a.indices.dtype))
        return IndexedSlices(gather(a.values, keep), gather(a.indices, keep), a.dense_shape)


__all__ = [
    "sparse_expand_dims",
    "sparse_fill_empty_rows",
    "sparse_mask",
    "sparse_maximum",
    "sparse_merge",
    "sparse_minimum",
    "sparse_reduce_max",
    "sparse_slice",
    "sparse_softmax",
    "sparse_split",
    "sparse_to_indicator",
]
