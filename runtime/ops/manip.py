"""Array manipulation ops: transposes, joins and splits, slicing, gathers and scatters, fills,
tiling, padding and reversal.

Static arguments (axes, permutations, sizes, paddings) are attrs: Python ints, or constant tensors
whose value is read at graph-construction time. Layout-only ops (transpose, slices, splits) return
views of their input and say so with ``aliases_input``; kernels never write into an input.

The public ``slice_`` and ``range_`` are exported by hetbed as ``slice`` and ``range`` (TF's names);
they keep a trailing underscore here so that this module can still use the builtins.
"""

from __future__ import annotations

import math as _math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError, ResourceExhaustedError, UnimplementedError
from ..gradients import IndexedSlices
from ..graph import Tensor, TensorShape, get_default_graph
from ..registry import (
    Cost,
    apply,
    apply_op,
    convert_to_tensor,
    default_cost,
    defop,
    nbytes,
    numel,
    same_dtype,
    unchanged_shape,
)

# ---- shared helpers ------------------------------------------------------------------------------


def _is_tensor_like(v: Any) -> bool:
    return isinstance(v, Tensor) or hasattr(v, "_as_graph_element")


def _static(fn: str, what: str, value: Any) -> np.ndarray:
    """The value of a static argument: Python/numpy data, or the value of a constant tensor."""
    if isinstance(value, TensorShape):
        if not value.is_fully_defined():
            raise InvalidArgumentError(f"{fn}: {what} must be fully defined, got {value}")
        value = value.as_list()
    if _is_tensor_like(value):
        t = convert_to_tensor(value)
        if t.op.type != "Const":
            raise TypeError(
                f"{fn}: {what} must be static in hetbed (ints or a constant tensor); "
                f"{t.name} ({t.op.type}) is only known at run time"
            )
        value = t.op.attrs["value"]
    arr = np.asarray(value)
    if arr.size and arr.dtype.kind not in "iu":
        raise TypeError(f"{fn}: {what} must be integers, got {value!r}")
    return arr.astype(np.int64)


def _ints(fn: str, what: str, value: Any) -> tuple:
    arr = _static(fn, what, value)
    if arr.ndim > 1:
        raise InvalidArgumentError(f"{fn}: {what} must be a list of ints, got shape {arr.shape}")
    return tuple(int(v) for v in arr.reshape(-1))


def _int(fn: str, what: str, value: Any) -> int:
    arr = _static(fn, what, value)
    if arr.ndim != 0:
        raise InvalidArgumentError(f"{fn}: {what} must be a single int, got {value!r}")
    return int(arr)


def _norm_axis(fn: str, axis: int, ndims: int | None, shape: Any = None) -> int:
    """``axis`` in [0, ndims) (negative counts from the end); kept as is when the rank is unknown."""
    if ndims is None:
        return axis
    if not -ndims <= axis < ndims:
        of = f" of shape {shape}" if shape is not None else ""
        raise InvalidArgumentError(
            f"{fn}: axis {axis} is out of range for a tensor of rank {ndims}{of} "
            f"(expected {-ndims} <= axis < {ndims})"
        )
    return axis % ndims


def _convert_all(values: Sequence[Any]) -> list[Tensor]:
    """Convert a list, giving Python numbers the dtype of the first tensor among them."""
    dtype = next((convert_to_tensor(v).dtype for v in values if _is_tensor_like(v)), None)
    out = []
    for v in values:
        if _is_tensor_like(v) or dtype is None:
            out.append(convert_to_tensor(v))
        elif _holds_tensor(v):  # a nested list holding tensors: packed, as TF packs it
            t = convert_to_tensor(v)
            if t.dtype != dtype:
                from .array import cast

                t = cast(t, dtype)
            out.append(t)
        else:
            arr = np.asarray(v)
            if arr.dtype.kind == "f" and dtype.is_integer:
                raise InvalidArgumentError(
                    f"cannot use float value {v!r} with {dtype.name} tensors"
                )
            out.append(convert_to_tensor(arr.astype(dtype.np)))
    return out


def outputs(values: Any) -> Any:
    """A kernel's result for a number of outputs set by its attrs: the executor takes one
    output as the value itself, several as a tuple (an Unpack of one slice returns the slice)."""
    values = tuple(values)
    return values[0] if len(values) == 1 else values


def _arr(xp: Any, r: Any) -> Any:
    """numpy returns scalars for some 0-d results; kernels always return arrays."""
    if isinstance(r, xp.ndarray):
        return r
    if isinstance(r, bytes):  # an element of a string tensor
        return np.array(r, dtype=object)
    return xp.asarray(r)


def _add_at(xp: Any, out: Any, idx: Any, vals: Any) -> None:
    """``out[idx] += vals`` with repeated indices summed."""
    if xp is np:
        np.add.at(out, idx, vals)
    else:
        import cupyx

        cupyx.scatter_add(out, idx, vals)


def _check_indices(xp: Any, where: str, idx: Any, n: int) -> None:
    """Raise naming the first index outside [0, n)."""
    if idx.size == 0:
        return
    bad = (idx < 0) | (idx >= n)
    if bool(bad.any()):
        pos = np.unravel_index(int(xp.argmax(bad.reshape(-1))), idx.shape)
        raise InvalidArgumentError(
            f"{where}: indices[{','.join(str(int(p)) for p in pos)}] = {int(idx[pos])} "
            f"is not in [0, {n})"
        )


def _view_cost(op, ins, outs):
    return Cost()


def _copy_out_cost(op, ins, outs):
    """Reads what it writes (slices, gathers): bytes of the outputs each way, plus indices."""
    w = sum(nbytes(s, t.dtype) for s, t in zip(outs, op.outputs))
    extra = sum(nbytes(s, t.dtype) for s, t in zip(ins[1:], op.inputs[1:]) if t.dtype.is_integer)
    return Cost(0.0, float(w + extra), float(w))


def _scatter_cost(op, ins, outs):
    """Zero-fill the output, then add each value into it: one add per value element."""
    vals = nbytes(ins[0], op.inputs[0].dtype)
    idx = nbytes(ins[1], op.inputs[1].dtype)
    out = nbytes(outs[0], op.outputs[0].dtype)
    return Cost(float(numel(ins[0])), float(vals + idx + out), float(out))


def _write_only_cost(op, ins, outs):
    return Cost(0.0, 0.0, float(nbytes(outs[0], op.outputs[0].dtype)))


# ---- Transpose -----------------------------------------------------------------------------------

Transpose = defop("Transpose", cost=default_cost)


@Transpose.shape
def _transpose_shape(op):
    x, perm = op.inputs[0], op.attrs["perm"]
    if perm is None:
        return [(TensorShape(None if x.shape.dims is None else x.shape.dims[::-1]), x.dtype)]
    if sorted(perm) != list(range(len(perm))):
        raise InvalidArgumentError(f"Transpose: perm {list(perm)} is not a permutation")
    if x.shape.ndims is not None and len(perm) != x.shape.ndims:
        raise InvalidArgumentError(
            f"Transpose: perm {list(perm)} has {len(perm)} entries for a tensor of rank "
            f"{x.shape.ndims} (shape {x.shape})"
        )
    dims = [None] * len(perm) if x.shape.dims is None else [x.shape.dims[p] for p in perm]
    return [(TensorShape(dims), x.dtype)]


@Transpose.kernel("cpu", "gpu", aliases_input=True)
def _transpose(ctx, x):
    return ctx.xp.transpose(x, ctx.attrs["perm"])


@Transpose.gradient
def _transpose_grad(op, g):
    perm = op.attrs["perm"]
    inv = None if perm is None else tuple(int(i) for i in np.argsort(perm))
    return [apply("Transpose", [g], {"perm": inv}, name="transpose")]


def transpose(a: Any, perm: Any = None, name: str = "transpose", conjugate: bool = False) -> Tensor:
    """Permute the dimensions of ``a``: output dim i is input dim ``perm[i]`` (default: reversed)."""
    x = convert_to_tensor(a)
    if perm is None:
        p = None if x.shape.ndims is None else tuple(reversed(range(x.shape.ndims)))
    else:
        p = _ints("transpose", "perm", perm)
    return apply("Transpose", [x], {"perm": p}, name)


# ---- ExpandDims, Squeeze -------------------------------------------------------------------------

ExpandDims = defop("ExpandDims", cost=_view_cost)


@ExpandDims.shape
def _expand_dims_shape(op):
    x, axis = op.inputs[0], op.attrs["axis"]
    if x.shape.dims is None:
        return [(TensorShape(None), x.dtype)]
    dims = list(x.shape.dims)
    dims.insert(axis, 1)
    return [(TensorShape(dims), x.dtype)]


@ExpandDims.kernel("cpu", "gpu", aliases_input=True)
def _expand_dims(ctx, x):
    return ctx.xp.expand_dims(x, ctx.attrs["axis"])


def _reshape_back_grad(op, g):
    from .array import reshape_like

    return [reshape_like(g, op.inputs[0])]


ExpandDims.gradient(_reshape_back_grad)


def expand_dims(input: Any, axis: Any = None, name: str | None = None, dim: Any = None) -> Tensor:
    """Insert a dimension of size 1 at ``axis`` (negative: counted from the end of the result)."""
    if axis is None:
        axis = dim
    if axis is None:
        raise InvalidArgumentError("expand_dims: axis is required")
    x = convert_to_tensor(input)
    if isinstance(axis, (list, tuple, np.ndarray)) and np.size(axis) == 1:
        axis = np.asarray(axis).reshape(-1)[0]  # TF takes a one-element axis list ([-1])
    a = _int("expand_dims", "axis", axis)
    r = x.shape.ndims
    if r is not None:
        a = _norm_axis("ExpandDims", a, r + 1, x.shape)
    elif a < 0:
        raise InvalidArgumentError("expand_dims: a negative axis needs a known rank")
    return apply("ExpandDims", [x], {"axis": a}, name or "ExpandDims")


Squeeze = defop("Squeeze", cost=_view_cost)


@Squeeze.shape
def _squeeze_shape(op):
    x, axes = op.inputs[0], op.attrs["axis"]
    if x.shape.dims is None:
        return [(TensorShape(None), x.dtype)]
    dims = x.shape.dims
    if axes is None:
        if any(d is None for d in dims):
            return [(TensorShape(None), x.dtype)]
        return [(TensorShape([d for d in dims if d != 1]), x.dtype)]
    for a in axes:
        if dims[a] is not None and dims[a] != 1:
            raise InvalidArgumentError(
                f"Squeeze: cannot squeeze axis {a} of shape {x.shape}: its size is {dims[a]}, not 1"
            )
    return [(TensorShape([d for i, d in enumerate(dims) if i not in axes]), x.dtype)]


@Squeeze.kernel("cpu", "gpu", aliases_input=True)
def _squeeze(ctx, x):
    axes = ctx.attrs["axis"]
    if axes is not None:
        for a in axes:
            if x.shape[a] != 1:
                raise InvalidArgumentError(
                    f"Squeeze: cannot squeeze axis {a} of shape {x.shape}: its size is not 1"
                )
    return ctx.xp.squeeze(x, axis=axes)


Squeeze.gradient(_reshape_back_grad)


def squeeze(
    input: Any, axis: Any = None, name: str | None = None, squeeze_dims: Any = None
) -> Tensor:
    """Remove dimensions of size 1: those in ``axis``, or all of them when ``axis`` is None."""
    if axis is None:
        axis = squeeze_dims
    x = convert_to_tensor(input)
    axes = None
    if axis is not None:
        a = _static("squeeze", "axis", axis)
        r = x.shape.ndims
        if r is None:
            raise InvalidArgumentError("squeeze: squeezing given axes needs a known rank")
        axes = tuple(sorted({_norm_axis("Squeeze", int(v), r, x.shape) for v in a.reshape(-1)}))
        axes = axes or None  # TF: an empty list squeezes every size-1 dimension
    return apply("Squeeze", [x], {"axis": axes}, name or "Squeeze")


# ---- ConcatV2 and its gradient helper ------------------------------------------------------------

ConcatV2 = defop("ConcatV2", cost=default_cost)


@ConcatV2.shape
def _concat_shape(op):
    dt = same_dtype(op)
    axis = op.attrs["axis"]
    known = [t for t in op.inputs if t.shape.ndims is not None]
    if not known:
        return [(TensorShape(None), dt)]
    first = known[0]
    r = first.shape.ndims
    if r == 0:
        raise InvalidArgumentError("ConcatV2: cannot concatenate scalars (use hb.stack)")
    for t in known[1:]:
        if t.shape.ndims != r:
            raise InvalidArgumentError(
                f"ConcatV2: inputs must have the same rank: {first.name} has shape {first.shape} "
                f"and {t.name} has shape {t.shape}"
            )
    axis = _norm_axis("ConcatV2", axis, r)
    dims: list = list(first.shape.dims)
    for t in known[1:]:
        for i, d in enumerate(t.shape.dims):
            if i == axis:
                continue
            if dims[i] is not None and d is not None and dims[i] != d:
                raise InvalidArgumentError(
                    f"ConcatV2: dimension {i} differs: {first.name} has shape {first.shape} and "
                    f"{t.name} has shape {t.shape}; only axis {axis} may differ"
                )
            if dims[i] is None:
                dims[i] = d
    sizes = [t.shape.dims[axis] if t.shape.dims is not None else None for t in op.inputs]
    dims[axis] = None if any(s is None for s in sizes) else sum(sizes)
    return [(TensorShape(dims), dt)]


@ConcatV2.kernel("cpu", "gpu")
def _concat(ctx, *xs):
    return ctx.xp.concatenate(xs, axis=ctx.attrs["axis"])


@ConcatV2.gradient
def _concat_grad(op, g):
    axis = op.attrs["axis"]
    sizes = [t.shape[axis] if t.shape.dims is not None else None for t in op.inputs]
    if axis >= 0 and all(s is not None for s in sizes):
        parts = split(g, list(sizes), axis=axis, name="split")
    else:
        parts = apply_op("SplitLike", [g, *op.inputs], {"axis": axis}, name="SplitLike").outputs
    return list(parts)


SplitLike = defop("SplitLike", cost=default_cost)


@SplitLike.shape
def _split_like_shape(op):
    g = op.inputs[0]
    return [(t.shape, g.dtype) for t in op.inputs[1:]]


@SplitLike.kernel("cpu", "gpu", aliases_input=True)
def _split_like(ctx, g, *likes):
    axis = ctx.attrs["axis"]
    cuts = np.cumsum([t.shape[axis] for t in likes])[:-1]
    return outputs(ctx.xp.split(g, [int(c) for c in cuts], axis=axis))


@SplitLike.gradient
def _split_like_grad(op, *gs):
    return [concat(list(gs), op.attrs["axis"]), *([None] * (len(op.inputs) - 1))]


def concat(values: Sequence[Any], axis: Any, name: str = "concat") -> Tensor:
    """Join tensors along ``axis``; all other dimensions must agree."""
    if _is_tensor_like(values):
        raise TypeError("concat: values must be a list of tensors")
    xs = _convert_all(list(values))
    if not xs:
        raise InvalidArgumentError("concat: needs at least one tensor")
    a = _int("concat", "axis", axis)
    first = next((t for t in xs if t.shape.ndims is not None), None)
    if first is not None:
        if first.shape.ndims == 0:
            raise InvalidArgumentError(
                f"concat: cannot concatenate scalars such as {first.name} (use hb.stack)"
            )
        a = _norm_axis("concat", a, first.shape.ndims, first.shape)
    if len(xs) == 1:
        from .array import identity

        return identity(xs[0], name=name)
    return apply("ConcatV2", xs, {"axis": a}, name)


# ---- SplitV --------------------------------------------------------------------------------------

SplitV = defop("SplitV", cost=default_cost)


@SplitV.shape
def _split_shape(op):
    x = op.inputs[0]
    axis, num, sizes = op.attrs["axis"], op.attrs["num_split"], op.attrs["size_splits"]
    if x.shape.dims is None:
        return [(TensorShape(None), x.dtype)] * num
    d = x.shape.dims[axis]
    if sizes is None:
        if d is not None and d % num:
            raise InvalidArgumentError(
                f"SplitV: dimension {axis} of shape {x.shape} (size {d}) does not split into "
                f"{num} equal parts"
            )
        out = [None if d is None else d // num] * num
    else:
        out = list(sizes)
        if any(s < -1 for s in sizes) or sizes.count(-1) > 1:
            raise InvalidArgumentError(
                f"SplitV: size_splits {list(sizes)} may hold sizes >= 0 and at most one -1"
            )
        rest = sum(s for s in sizes if s != -1)
        if -1 in sizes:
            if d is not None and rest > d:
                raise InvalidArgumentError(
                    f"SplitV: size_splits {list(sizes)} exceed dimension {axis} of shape {x.shape}"
                )
            out[sizes.index(-1)] = None if d is None else d - rest
        elif d is not None and rest != d:
            raise InvalidArgumentError(
                f"SplitV: size_splits {list(sizes)} sum to {rest}, but dimension {axis} of "
                f"shape {x.shape} has size {d}"
            )
    dims = list(x.shape.dims)
    return [(TensorShape(dims[:axis] + [s] + dims[axis + 1 :]), x.dtype) for s in out]


@SplitV.kernel("cpu", "gpu", aliases_input=True)
def _split(ctx, x):
    axis, num, sizes = ctx.attrs["axis"], ctx.attrs["num_split"], ctx.attrs["size_splits"]
    d = x.shape[axis]
    if sizes is None:
        if d % num:
            raise InvalidArgumentError(
                f"SplitV: dimension {axis} of shape {x.shape} does not split into {num} equal parts"
            )
        sizes = [d // num] * num
    elif -1 in sizes:
        sizes = list(sizes)
        sizes[sizes.index(-1)] = d - (sum(sizes) + 1)
    if min(sizes) < 0 or sum(sizes) != d:
        raise InvalidArgumentError(
            f"SplitV: sizes {list(ctx.attrs['size_splits'])} do not fit dimension {axis} "
            f"of shape {x.shape}"
        )
    cuts = np.cumsum(sizes)[:-1]
    return outputs(ctx.xp.split(x, [int(c) for c in cuts], axis=axis))


@SplitV.gradient
def _split_grad(op, *gs):
    return [concat(list(gs), op.attrs["axis"])]


def split(
    value: Any,
    num_or_size_splits: Any,
    axis: Any = 0,
    num: int | None = None,
    name: str = "split",
) -> list[Tensor]:
    """Split ``value`` along ``axis`` into N equal parts (an int) or parts of the given sizes."""
    x = convert_to_tensor(value)
    a = _int("split", "axis", axis)
    if x.shape.ndims is None:
        if a < 0:
            raise InvalidArgumentError("split: a negative axis needs a known rank")
    else:
        a = _norm_axis("split", a, x.shape.ndims, x.shape)
    s = _static("split", "num_or_size_splits", num_or_size_splits)
    if s.ndim == 0:
        n, sizes = int(s), None
        if n < 1:
            raise InvalidArgumentError(f"split: num_or_size_splits must be >= 1, got {n}")
    else:
        sizes = tuple(int(v) for v in s.reshape(-1))
        n = len(sizes)
        if n == 0:
            raise InvalidArgumentError("split: size_splits is empty")
    op = apply_op("SplitV", [x], {"axis": a, "num_split": n, "size_splits": sizes}, name)
    return list(op.outputs)


# ---- Pack (stack), Unpack (unstack) ---------------------------------------------------------------

Pack = defop("Pack", cost=default_cost)


@Pack.shape
def _pack_shape(op):
    dt = same_dtype(op)
    s = TensorShape(None)
    for t in op.inputs:
        if not s.is_compatible_with(t.shape):
            raise InvalidArgumentError(
                f"Pack: all inputs must have the same shape, but {op.inputs[0].name} has shape "
                f"{op.inputs[0].shape} and {t.name} has shape {t.shape}"
            )
        s = s.merge_with(t.shape)
    if s.dims is None:
        return [(TensorShape(None), dt)]
    dims = list(s.dims)
    dims.insert(op.attrs["axis"], len(op.inputs))
    return [(TensorShape(dims), dt)]


@Pack.kernel("cpu", "gpu")
def _pack(ctx, *xs):
    return ctx.xp.stack(xs, axis=ctx.attrs["axis"])


@Pack.gradient
def _pack_grad(op, g):
    return unstack(g, num=len(op.inputs), axis=op.attrs["axis"])


def stack(values: Sequence[Any], axis: int = 0, name: str = "stack") -> Tensor:
    """Join same-shaped tensors along a new dimension at ``axis``."""
    if _is_tensor_like(values):
        raise TypeError("stack: values must be a list of tensors")
    xs = _convert_all(list(values))
    if not xs:
        raise InvalidArgumentError("stack: needs at least one tensor")
    a = _int("stack", "axis", axis)
    r = next((t.shape.ndims for t in xs if t.shape.ndims is not None), None)
    if r is not None:
        a = _norm_axis("stack", a, r + 1)
    elif a < 0:
        raise InvalidArgumentError("stack: a negative axis needs a known rank")
    return apply("Pack", xs, {"axis": a}, name)


Unpack = defop("Unpack", cost=default_cost)


@Unpack.shape
def _unpack_shape(op):
    x, num, axis = op.inputs[0], op.attrs["num"], op.attrs["axis"]
    if x.shape.dims is None:
        return [(TensorShape(None), x.dtype)] * num
    dims = list(x.shape.dims)
    if dims[axis] is not None and dims[axis] != num:
        raise InvalidArgumentError(
            f"Unpack: num {num} does not match dimension {axis} of shape {x.shape}"
        )
    del dims[axis]
    return [(TensorShape(dims), x.dtype)] * num


@Unpack.kernel("cpu", "gpu", aliases_input=True)
def _unpack(ctx, x):
    num, axis = ctx.attrs["num"], ctx.attrs["axis"]
    if x.shape[axis] != num:
        raise InvalidArgumentError(
            f"Unpack: expected {num} slices along axis {axis}, got shape {x.shape}"
        )
    m = ctx.xp.moveaxis(x, axis, 0)
    return outputs([_arr(ctx.xp, m[i]) for i in range(num)])


@Unpack.gradient
def _unpack_grad(op, *gs):
    return [stack(list(gs), axis=op.attrs["axis"])]


def unstack(value: Any, num: int | None = None, axis: int = 0, name: str = "unstack") -> list:
    """Split ``value`` along ``axis`` into its ``num`` slices (the dimension must be known)."""
    x = convert_to_tensor(value)
    if x.shape.ndims is None:
        raise InvalidArgumentError(f"unstack: the rank of {x.name} must be known")
    a = _norm_axis("unstack", _int("unstack", "axis", axis), x.shape.ndims, x.shape)
    if num is None:
        num = x.shape.dims[a]
        if num is None:
            raise InvalidArgumentError(
                f"unstack: cannot infer num from shape {x.shape} along axis {a}; pass num"
            )
    op = apply_op("Unpack", [x], {"num": int(num), "axis": a}, name)
    return list(op.outputs)


# ---- Slice ---------------------------------------------------------------------------------------

Slice = defop("Slice", cost=_copy_out_cost)


@Slice.shape
def _slice_shape(op):
    x, begin, size = op.inputs[0], op.attrs["begin"], op.attrs["size"]
    if len(begin) != len(size):
        raise InvalidArgumentError(
            f"Slice: begin {list(begin)} and size {list(size)} differ in length"
        )
    if x.shape.dims is None:
        return [(TensorShape([None if s == -1 else s for s in size]), x.dtype)]
    if len(begin) != x.shape.ndims:
        raise InvalidArgumentError(
            f"Slice: begin {list(begin)} has {len(begin)} entries for shape {x.shape}"
        )
    out = []
    for i, (b, s, d) in enumerate(zip(begin, size, x.shape.dims)):
        if b < 0 or s < -1:
            raise InvalidArgumentError(
                f"Slice: begin {list(begin)} must be >= 0 and size {list(size)} >= -1"
            )
        if d is not None and (b > d or (s != -1 and b + s > d)):
            raise InvalidArgumentError(
                f"Slice: begin {b} + size {s} exceeds dimension {i} of shape {x.shape}"
            )
        out.append(s if s != -1 else (None if d is None else d - b))
    return [(TensorShape(out), x.dtype)]


def _slice_index(begin: tuple, size: tuple, shape: tuple, where: str) -> tuple:
    for i, (b, s, d) in enumerate(zip(begin, size, shape)):
        if b > d or (s != -1 and b + s > d):
            raise InvalidArgumentError(
                f"{where}: begin {b} + size {s} exceeds dimension {i} of shape {shape}"
            )
    return tuple(slice(b, None if s == -1 else b + s) for b, s in zip(begin, size))


@Slice.kernel("cpu", "gpu", aliases_input=True)
def _slice(ctx, x):
    return x[_slice_index(ctx.attrs["begin"], ctx.attrs["size"], x.shape, "Slice")]


@Slice.gradient
def _slice_grad(op, g):
    return [apply("SliceGrad", [g, op.inputs[0]], dict(op.attrs), name="SliceGrad")]


SliceGrad = defop("SliceGrad", cost=_write_only_cost)


@SliceGrad.shape
def _slice_grad_shape(op):
    return [(op.inputs[1].shape, op.inputs[0].dtype)]


@SliceGrad.kernel("cpu", "gpu")
def _slice_grad_kernel(ctx, g, x):
    out = ctx.xp.zeros(x.shape, dtype=g.dtype)
    out[_slice_index(ctx.attrs["begin"], ctx.attrs["size"], x.shape, "SliceGrad")] = g
    return out


@SliceGrad.gradient
def _slice_grad_grad(op, gg):
    return [apply("Slice", [gg], dict(op.attrs), name="Slice"), None]


def slice_(input_: Any, begin: Any, size: Any, name: str | None = None) -> Tensor:
    """``input_[begin[i] : begin[i] + size[i]]`` in every dimension; size -1 runs to the end.
    ``begin`` and ``size`` may be known only when the step runs (tensors, or lists mixing ints
    and integer scalars). Exported as ``hb.slice``.
    """
    from .array import is_run_time_shape, shape_tensor

    if is_run_time_shape(begin) or is_run_time_shape(size):
        b, sz = shape_tensor("slice", begin), shape_tensor("slice", size)
        return apply("DynamicSlice", [input_, b, sz], name=name or "Slice")
    b = _ints("slice", "begin", begin)
    s = _ints("slice", "size", size)
    return apply("Slice", [input_], {"begin": b, "size": s}, name or "Slice")


def _run_time_ints(v: Any) -> tuple:
    return tuple(int(d) for d in (v.tolist() if hasattr(v, "tolist") else v))


DynamicSlice = defop("DynamicSlice", cost=_copy_out_cost)


@DynamicSlice.shape
def _dynamic_slice_shape(op):
    from .array import static_dims

    x, begin, size = op.inputs
    b, sz = static_dims(begin).dims, static_dims(size).dims
    if sz is None:
        n = x.shape.ndims
        return [(TensorShape(None if n is None else [None] * n), x.dtype)]
    out = []
    for i, s in enumerate(sz):
        d = x.shape.dims[i] if x.shape.dims is not None and i < len(x.shape.dims) else None
        bi = b[i] if b is not None and i < len(b) else None
        if s is not None and s >= 0:
            out.append(s)
        elif s is None:
            out.append(None)
        else:  # -1: to the end
            out.append(None if d is None or bi is None else d - bi)
    return [(TensorShape(out), x.dtype)]


def _dynamic_slice_index(ctx, x, begin, size) -> tuple:
    b, sz = _run_time_ints(begin), _run_time_ints(size)
    where = f"Slice {ctx.op.name!r}"
    if len(b) != x.ndim or len(sz) != x.ndim:
        raise InvalidArgumentError(
            f"{where}: begin {list(b)} and size {list(sz)} need {x.ndim} entries for shape "
            f"{tuple(x.shape)}"
        )
    if any(v < 0 for v in b) or any(v < -1 for v in sz):
        raise InvalidArgumentError(
            f"{where}: begin {list(b)} must be >= 0 and size {list(sz)} >= -1"
        )
    return _slice_index(b, sz, x.shape, where)


@DynamicSlice.kernel("cpu", "gpu", aliases_input=True)
def _dynamic_slice(ctx, x, begin, size):
    return x[_dynamic_slice_index(ctx, x, begin, size)]


@DynamicSlice.gradient
def _dynamic_slice_grad(op, g):
    x, begin, size = op.inputs
    return [apply("DynamicSliceGrad", [g, x, begin, size], name="SliceGrad"), None, None]


DynamicSliceGrad = defop("DynamicSliceGrad", cost=_write_only_cost, differentiable=False)


@DynamicSliceGrad.shape
def _dynamic_slice_grad_shape(op):
    return [(op.inputs[1].shape, op.inputs[0].dtype)]


@DynamicSliceGrad.kernel("cpu", "gpu")
def _dynamic_slice_grad_kernel(ctx, g, x, begin, size):
    out = ctx.xp.zeros(x.shape, dtype=g.dtype)
    out[_dynamic_slice_index(ctx, x, begin, size)] = g
    return out


# ---- StridedSlice (Tensor.__getitem__) -----------------------------------------------------------

_SS_MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


def _decode_index(at: dict) -> tuple:
    """TF's (begin, end, strides, masks) encoding as a numpy basic index."""
    idx: list = []
    for i, (b, e, s) in enumerate(zip(at["begin"], at["end"], at["strides"])):
        bit = 1 << i
        if at["ellipsis_mask"] & bit:
            idx.append(Ellipsis)
        elif at["new_axis_mask"] & bit:
            idx.append(None)
        elif at["shrink_axis_mask"] & bit:
            idx.append(b)
        else:
            idx.append(
                slice(None if at["begin_mask"] & bit else b, None if at["end_mask"] & bit else e, s)
            )
    return tuple(idx)


#: a slice whose bounds are known only when the step runs (its dimension's size is unknown)
_UNKNOWN = slice(0, 0, 0)


def _index_shape(where: str, idx: tuple, shape: TensorShape) -> TensorShape:
    """The static shape of ``x[idx]`` for a basic index; raises on indices out of bounds."""
    if shape.dims is None:
        return TensorShape(None)
    dims = shape.dims
    consumed = sum(1 for k in idx if k is not None and k is not Ellipsis)
    if consumed > len(dims):
        raise InvalidArgumentError(
            f"{where}: {consumed} indices for a tensor of rank {len(dims)} (shape {shape})"
        )
    if not any(k is Ellipsis for k in idx):
        idx = (*idx, Ellipsis)
    out: list = []
    axis = 0
    for k in idx:
        if k is None:
            out.append(1)
        elif k is Ellipsis:
            n = len(dims) - consumed
            out.extend(dims[axis : axis + n])
            axis += n
        elif isinstance(k, slice):
            d = dims[axis]
            out.append(None if d is None or k is _UNKNOWN else len(range(*k.indices(d))))
            axis += 1
        else:
            d = dims[axis]
            if d is not None and not -d <= k < d:
                raise InvalidArgumentError(
                    f"{where}: index {k} is out of bounds for axis {axis} with size {d} "
                    f"(shape {shape})"
                )
            axis += 1
    return TensorShape(out)


StridedSlice = defop("StridedSlice", cost=_copy_out_cost)


@StridedSlice.shape
def _strided_slice_shape(op):
    at = op.attrs
    n = len(at["begin"])
    if len(at["end"]) != n or len(at["strides"]) != n:
        raise InvalidArgumentError(
            f"StridedSlice: begin, end and strides differ in length: "
            f"{list(at['begin'])}, {list(at['end'])}, {list(at['strides'])}"
        )
    if bin(at["ellipsis_mask"]).count("1") > 1:
        raise InvalidArgumentError("StridedSlice: at most one ellipsis is allowed")
    for i, s in enumerate(at["strides"]):
        if s == 0 and not (at["ellipsis_mask"] | at["new_axis_mask"]) & (1 << i):
            raise InvalidArgumentError(f"StridedSlice: stride {i} is zero")
    x = op.inputs[0]
    return [(_index_shape("StridedSlice", _decode_index(at), x.shape), x.dtype)]


def _cached_index(ctx) -> tuple:
    if ctx.state is None:
        ctx.state = _decode_index(ctx.attrs)
    return ctx.state


@StridedSlice.kernel("cpu", "gpu", aliases_input=True)
def _strided_slice(ctx, x):
    return _arr(ctx.xp, x[_cached_index(ctx)])


@StridedSlice.gradient
def _strided_slice_grad(op, g):
    return [apply("StridedSliceGrad", [g, op.inputs[0]], dict(op.attrs), name="StridedSliceGrad")]


StridedSliceGrad = defop("StridedSliceGrad", cost=_write_only_cost)


@StridedSliceGrad.shape
def _ss_grad_shape(op):
    return [(op.inputs[1].shape, op.inputs[0].dtype)]


@StridedSliceGrad.kernel("cpu", "gpu")
def _ss_grad(ctx, g, x):
    out = ctx.xp.zeros(x.shape, dtype=g.dtype)
    out[_cached_index(ctx)] = g
    return out


@StridedSliceGrad.gradient
def _ss_grad_grad(op, gg):
    return [apply("StridedSlice", [gg], dict(op.attrs), name="StridedSlice"), None]


def _is_int(k: Any) -> bool:
    return isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))


def _encode_key(key: Any) -> dict:
    """A static ``__getitem__`` key as StridedSlice attrs (TF's begin/end/strides and masks)."""
    items = key if isinstance(key, tuple) else (key,)
    begin, end, strides = [], [], []
    masks = dict.fromkeys(_SS_MASKS, 0)
    for i, k in enumerate(items):
        bit = 1 << i
        if k is Ellipsis:
            if masks["ellipsis_mask"]:
                raise InvalidArgumentError("an index can only have a single ellipsis ('...')")
            masks["ellipsis_mask"] |= bit
            b, e, s = 0, 0, 1
        elif k is None:
            masks["new_axis_mask"] |= bit
            b, e, s = 0, 0, 1
        elif isinstance(k, slice):
            for part in (k.start, k.stop, k.step):
                if part is not None and not _is_int(part):
                    raise TypeError(
                        f"slice bounds must be static ints in hetbed, got {part!r} in {k}"
                    )
            s = 1 if k.step is None else int(k.step)
            if s == 0:
                raise InvalidArgumentError(f"slice step cannot be zero: {k}")
            b = 0 if k.start is None else int(k.start)
            e = 0 if k.stop is None else int(k.stop)
            if k.start is None:
                masks["begin_mask"] |= bit
            if k.stop is None:
                masks["end_mask"] |= bit
        elif _is_int(k):
            b, e, s = int(k), int(k) + 1, 1
            masks["shrink_axis_mask"] |= bit
        else:
            what = k.name if isinstance(k, Tensor) else repr(k)
            raise TypeError(
                f"unsupported index {what}: hetbed tensors take static ints, slices, ..., and "
                "None (use hb.gather for indices computed at run time)"
            )
        begin.append(b)
        end.append(e)
        strides.append(s)
    return {"begin": tuple(begin), "end": tuple(end), "strides": tuple(strides), **masks}


def strided_slice_from_key(x: Tensor, key: Any, name: str | None = None) -> Tensor:
    """``x[key]`` for a numpy basic index (ints, slices with steps, ``...``, None); an int or a
    slice bound may be an integer scalar tensor (``x[:, t]``, ``x[:n]``), known when the step
    runs (DynamicStridedSlice)."""
    items = key if isinstance(key, tuple) else (key,)
    if any(_has_tensor(k) for k in items):
        return _dynamic_strided_slice(x, items, name)
    return apply("StridedSlice", [x], _encode_key(key), name or "strided_slice")


def _has_tensor_entries(v: Any) -> bool:
    """Whether a begin/end/strides argument holds a tensor (or is one)."""
    if isinstance(v, Tensor):
        return True
    return isinstance(v, (list, tuple)) and any(isinstance(x, Tensor) for x in v)


def _entries(v: Any) -> list:
    """A begin/end/strides argument as a list of ints and integer scalar tensors (a vector
    tensor of known length is unstacked)."""
    if isinstance(v, Tensor):
        n = v.shape.dims[0] if v.shape.ndims == 1 else None
        if n is None:
            raise ValueError(
                f"strided_slice: a begin/end/strides tensor needs a known length, got {v.name} "
                f"of shape {v.shape}"
            )
        return [v[k] for k in range(n)]
    return [x if isinstance(x, Tensor) else int(x) for x in v]


def _has_tensor(k: Any) -> bool:
    if isinstance(k, slice):
        return any(isinstance(p, Tensor) for p in (k.start, k.stop, k.step))
    return isinstance(k, Tensor)


def _dynamic_strided_slice(x: Tensor, items: tuple, name: str | None) -> Tensor:
    """``x[items]`` with tensors among the bounds: the static encoding (its masks) with
    begin/end/strides taken from run-time vectors. ``key`` (an attr) describes each item for
    the static shape: ("i", int), ("t",) a tensor index, ("s", start, stop, step) with "?" for
    a tensor part and None for an absent one, ("e",) for ..., ("n",) for None."""
    from .array import shape_tensor
    from .math import add

    static: list = []
    key: list = []
    parts: dict = {"begin": [], "end": [], "strides": []}
    for k in items:
        if isinstance(k, Tensor):
            if k.shape.ndims not in (None, 0) or not k.dtype.is_integer:
                raise TypeError(
                    f"an index tensor must be an integer scalar, got {k.name} ({k.dtype.name}, "
                    f"shape {k.shape}); use hb.gather for a vector of indices"
                )
            static.append(0)
            key.append(("t",))
            parts["begin"].append(k)
            parts["end"].append(add(k, convert_to_tensor(np.int32(1), dtype=k.dtype)))
            parts["strides"].append(1)
            continue
        if isinstance(k, slice):
            bounds = (k.start, k.stop, k.step)
            static.append(slice(*(None if p is None else 1 for p in bounds)))
            key.append(("s", *("?" if isinstance(p, Tensor) else p for p in bounds)))
            for p, field, default in zip(bounds, ("begin", "end", "strides"), (0, 0, 1)):
                parts[field].append(default if p is None else p)
            continue
        static.append(k)
        key.append(("e",) if k is Ellipsis else ("n",) if k is None else ("i", int(k)))
        enc = _encode_key((k,))
        for field in ("begin", "end", "strides"):
            parts[field].append(enc[field][0])
    attrs = {m: v for m, v in _encode_key(tuple(static)).items() if m in _SS_MASKS}
    attrs["key"] = tuple(key)
    ins = [x, *(shape_tensor("strided_slice", parts[f]) for f in ("begin", "end", "strides"))]
    return apply("DynamicStridedSlice", ins, attrs, name or "strided_slice")


def _run_time_index(ctx, begin, end, strides) -> tuple:
    at = dict(ctx.attrs)
    at.update(begin=_run_time_ints(begin), end=_run_time_ints(end), strides=_run_time_ints(strides))
    if any(s == 0 for s in at["strides"]):
        raise InvalidArgumentError(f"StridedSlice {ctx.op.name!r}: a slice step is zero")
    return _decode_index(at)


DynamicStridedSlice = defop("DynamicStridedSlice", cost=_copy_out_cost)


@DynamicStridedSlice.shape
def _dynamic_strided_slice_shape(op):
    idx: list = []
    for item in op.attrs["key"]:
        kind = item[0]
        if kind == "e":
            idx.append(Ellipsis)
        elif kind == "n":
            idx.append(None)
        elif kind == "i":
            idx.append(item[1])
        elif kind == "t":
            idx.append(0)  # one dimension less, whatever the index
        elif "?" in item[1:]:
            idx.append(_UNKNOWN)
        else:
            idx.append(slice(*item[1:]))
    x = op.inputs[0]
    shape = x.shape
    if shape.dims is not None:  # (a tensor index is not checked against the static size)
        shape = TensorShape(
            [
                None if it[0] == "t" else d
                for it, d in zip(_axes_of(op.attrs["key"], shape.ndims), shape.dims)
            ]
        )
    return [(_index_shape("StridedSlice", tuple(idx), shape), x.dtype)]


def _axes_of(key: tuple, ndims: int) -> list:
    """The key's item that consumes each axis of a tensor of rank ``ndims`` (("e",) for the
    axes an ellipsis or nothing covers)."""
    consumed = [it for it in key if it[0] not in ("e", "n")]
    out: list = []
    for it in key:
        if it[0] == "n":
            continue
        if it[0] == "e":
            out.extend([("e",)] * (ndims - len(consumed)))
        else:
            out.append(it)
    out.extend([("e",)] * (ndims - len(out)))
    return out[:ndims]


@DynamicStridedSlice.kernel("cpu", "gpu", aliases_input=True)
def _dynamic_strided_slice_kernel(ctx, x, begin, end, strides):
    idx = _run_time_index(ctx, begin, end, strides)
    _index_shape(f"StridedSlice {ctx.op.name!r}", idx, TensorShape(list(x.shape)))
    return _arr(ctx.xp, x[idx])


@DynamicStridedSlice.gradient
def _dynamic_strided_slice_grad(op, g):
    ins = list(op.inputs)
    grad = apply("DynamicStridedSliceGrad", [g, *ins], dict(op.attrs), name="StridedSliceGrad")
    return [grad, None, None, None]


DynamicStridedSliceGrad = defop(
    "DynamicStridedSliceGrad", cost=_write_only_cost, differentiable=False
)


@DynamicStridedSliceGrad.shape
def _dynamic_ss_grad_shape(op):
    return [(op.inputs[1].shape, op.inputs[0].dtype)]


@DynamicStridedSliceGrad.kernel("cpu", "gpu")
def _dynamic_ss_grad(ctx, g, x, begin, end, strides):
    out = ctx.xp.zeros(x.shape, dtype=g.dtype)
    out[_run_time_index(ctx, begin, end, strides)] = g
    return out


def strided_slice(
    input_: Any,
    begin: Any,
    end: Any,
    strides: Any = None,
    begin_mask: int = 0,
    end_mask: int = 0,
    ellipsis_mask: int = 0,
    new_axis_mask: int = 0,
    shrink_axis_mask: int = 0,
    var: Any = None,
    name: str | None = None,
) -> Tensor:
    """TF's strided slice (see ``Tensor.__getitem__``): begin/end/strides and masks; an entry of
    begin, end or strides may be an integer scalar tensor (``[0, i * num_steps]``), or each a
    vector tensor of known length, known when the step runs."""
    if any(_has_tensor_entries(v) for v in (begin, end, strides)) and not (
        ellipsis_mask or new_axis_mask
    ):
        n = len(_entries(begin))
        b, e = _entries(begin), _entries(end)
        st = [1] * n if strides is None else _entries(strides)
        if not len(e) == len(st) == n:
            raise ValueError(
                f"strided_slice: begin, end and strides must have one length, got {n}, "
                f"{len(e)} and {len(st)}"
            )
        key = []
        for k in range(n):
            if shrink_axis_mask >> k & 1:
                key.append(b[k])
                continue
            key.append(
                slice(
                    None if begin_mask >> k & 1 else b[k],
                    None if end_mask >> k & 1 else e[k],
                    None if isinstance(st[k], int) and st[k] == 1 else st[k],
                )
            )
        return strided_slice_from_key(convert_to_tensor(input_), tuple(key), name)
    b = _ints("strided_slice", "begin", begin)
    e = _ints("strided_slice", "end", end)
    s = (1,) * len(b) if strides is None else _ints("strided_slice", "strides", strides)
    attrs = {"begin": b, "end": e, "strides": s}
    for k, v in zip(
        _SS_MASKS, (begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask)
    ):
        attrs[k] = int(v)
    return apply("StridedSlice", [input_], attrs, name or "strided_slice")


# ---- GatherV2 and the sparse-gradient ops ----------------------------------------------------------


def _check_int_dtype(where: str, t: Tensor, what: str = "indices") -> None:
    if t.dtype not in _dt.INTS:
        raise InvalidArgumentError(f"{where}: {what} must be int32 or int64, got {t.dtype.name}")


GatherV2 = defop("GatherV2", cost=_copy_out_cost)


@GatherV2.shape
def _gather_shape(op):
    params, indices = op.inputs
    _check_int_dtype("GatherV2", indices)
    axis = op.attrs["axis"]
    if params.shape.ndims == 0:
        raise InvalidArgumentError("GatherV2: params must be at least rank 1, got a scalar")
    if params.shape.dims is None or indices.shape.dims is None:
        return [(TensorShape(None), params.dtype)]
    p = list(params.shape.dims)
    return [(TensorShape(p[:axis] + list(indices.shape.dims) + p[axis + 1 :]), params.dtype)]


@GatherV2.kernel("cpu", "gpu")
def _gather(ctx, params, indices):
    axis = ctx.attrs["axis"]
    xp = ctx.xp
    _check_indices(xp, f"GatherV2 {ctx.op.name!r}", indices, params.shape[axis])
    if xp is np and not params.flags.c_contiguous:
        # np.take copies a strided array whole first (a time step of a transposed sequence:
        # 130 us for 3 MB); indexing reads only the rows taken. A copy either way.
        if indices.ndim:
            return params[(slice(None),) * axis + (indices,)]  # (a copy: fancy indexing)
        return _arr(xp, params[(slice(None),) * axis + (int(indices),)].copy())
    return _arr(xp, xp.take(params, indices, axis=axis))


@GatherV2.gradient
def _gather_grad(op, g):
    from .array import reshape

    params, indices = op.inputs
    axis = op.attrs["axis"]
    rest = params.shape[1:]
    if axis == 0 and indices.shape.ndims == 1:
        return [IndexedSlices(g, indices, params), None]
    if axis == 0 and indices.shape.ndims is not None and rest.is_fully_defined():
        values = reshape(g, [-1, *rest.as_list()])
        return [IndexedSlices(values, reshape(indices, [-1]), params), None]
    return [apply("GatherGrad", [g, indices, params], {"axis": axis}, name="GatherGrad"), None]


GatherGrad = defop("GatherGrad", cost=_scatter_cost)


@GatherGrad.shape
def _gather_grad_shape(op):
    return [(op.inputs[2].shape, op.inputs[0].dtype)]


@GatherGrad.kernel("cpu", "gpu")
def _gather_grad_kernel(ctx, g, indices, params):
    xp, axis = ctx.xp, ctx.attrs["axis"] % params.ndim
    out = xp.zeros(params.shape, dtype=g.dtype)
    k = indices.ndim
    gm = xp.moveaxis(g, list(range(axis, axis + k)), list(range(k)))
    _add_at(xp, xp.moveaxis(out, axis, 0), indices, gm)
    return out


@GatherGrad.gradient
def _gather_grad_grad(op, gg):
    return [gather(gg, op.inputs[1], axis=op.attrs["axis"]), None, None]


def gather(
    params: Any,
    indices: Any,
    validate_indices: Any = None,
    name: str | None = None,
    axis: Any = None,
    batch_dims: int = 0,
) -> Tensor:
    """Slices of ``params`` along ``axis`` at ``indices``; out-of-range indices raise at run time.

    The gradient w.r.t. ``params`` along axis 0 is an IndexedSlices (rows ``indices``).
    """
    if batch_dims:
        raise UnimplementedError("gather: batch_dims is not supported in hetbed")
    p = convert_to_tensor(params)
    idx = convert_to_tensor(indices)
    a = 0 if axis is None else _int("gather", "axis", axis)
    if p.shape.ndims is not None:
        a = _norm_axis("GatherV2", a, p.shape.ndims, p.shape)
    elif a < 0:
        raise InvalidArgumentError("gather: a negative axis needs a known rank")
    return apply("GatherV2", [p, idx], {"axis": a}, name or "GatherV2")


IndexedSlicesToDense = defop("IndexedSlicesToDense", cost=_scatter_cost)


@IndexedSlicesToDense.shape
def _is_to_dense_shape(op):
    values, indices, like = op.inputs
    _check_int_dtype("IndexedSlicesToDense", indices)
    return [(like.shape, values.dtype)]


@IndexedSlicesToDense.kernel("cpu", "gpu")
def _is_to_dense(ctx, values, indices, like):
    xp = ctx.xp
    out = xp.zeros(like.shape, dtype=values.dtype)
    _check_indices(xp, f"IndexedSlicesToDense {ctx.op.name!r}", indices, like.shape[0])
    _add_at(xp, out, indices, values)
    return out


@IndexedSlicesToDense.gradient
def _is_to_dense_grad(op, g):
    return [gather(g, op.inputs[1]), None, None]


def indexed_slices_to_dense(slices: IndexedSlices, name: str | None = None) -> Tensor:
    """The dense tensor of an IndexedSlices: rows ``indices`` hold ``values``, repeats summed."""
    if not isinstance(slices.dense_shape, Tensor):
        raise InvalidArgumentError(
            f"indexed_slices_to_dense: {slices!r} has no dense_shape tensor to take the shape from"
        )
    return apply(
        "IndexedSlicesToDense",
        [slices.values, slices.indices, slices.dense_shape],
        name=name or "IndexedSlicesToDense",
    )


# ---- UnsortedSegmentSum --------------------------------------------------------------------------

UnsortedSegmentSum = defop("UnsortedSegmentSum", cost=_scatter_cost)


def _const_int(t: Tensor) -> int | None:
    value = getattr(t, "value", None)  # a concrete run-time value (simulation's shape inference)
    if value is not None:
        return int(value)
    if t.op.type == "Const":
        return int(t.op.attrs["value"])
    return None


@UnsortedSegmentSum.shape
def _uss_shape(op):
    data, ids, num = op.inputs
    _check_int_dtype("UnsortedSegmentSum", ids, "segment_ids")
    _check_int_dtype("UnsortedSegmentSum", num, "num_segments")
    if num.shape.ndims not in (None, 0):
        raise InvalidArgumentError(
            f"UnsortedSegmentSum: num_segments must be a scalar, got {num.shape}"
        )
    n = _const_int(num)
    if n is not None and n < 0:
        raise InvalidArgumentError(f"UnsortedSegmentSum: num_segments must be >= 0, got {n}")
    if data.shape.dims is None or ids.shape.dims is None:
        return [(TensorShape(None), data.dtype)]
    k = ids.shape.ndims
    if not TensorShape(data.shape.dims[:k]).is_compatible_with(ids.shape):
        raise InvalidArgumentError(
            f"UnsortedSegmentSum: segment_ids shape {ids.shape} must be a prefix of data shape "
            f"{data.shape}"
        )
    return [(TensorShape([n, *data.shape.dims[k:]]), data.dtype)]


@UnsortedSegmentSum.kernel("cpu", "gpu")
def _uss(ctx, data, ids, num):
    xp = ctx.xp
    n = int(num)
    k = ids.ndim
    if data.shape[:k] != ids.shape:
        raise InvalidArgumentError(
            f"UnsortedSegmentSum: segment_ids shape {ids.shape} is not a prefix of data shape "
            f"{data.shape}"
        )
    out = xp.zeros((n, *data.shape[k:]), dtype=data.dtype)
    if ids.size and int(ids.max()) >= n:
        raise InvalidArgumentError(
            f"UnsortedSegmentSum {ctx.op.name!r}: segment id {int(ids.max())} is not in "
            f"[0, {n}) (num_segments = {n})"
        )
    if ids.size and int(ids.min()) < 0:  # negative ids are dropped, as in TF
        keep = ids >= 0
        ids, data = ids[keep], data[keep]
    _add_at(xp, out, ids, data)
    return out


@UnsortedSegmentSum.gradient
def _uss_grad(op, g):
    return [apply("GatherDropNegatives", [g, op.inputs[1]], name="GatherDropNegatives"), None, None]


GatherDropNegatives = defop("GatherDropNegatives", cost=_copy_out_cost)


@GatherDropNegatives.shape
def _gdn_shape(op):
    params, ids = op.inputs
    if params.shape.dims is None or ids.shape.dims is None:
        return [(TensorShape(None), params.dtype)]
    return [(TensorShape([*ids.shape.dims, *params.shape.dims[1:]]), params.dtype)]


@GatherDropNegatives.kernel("cpu", "gpu")
def _gdn(ctx, params, ids):
    xp = ctx.xp
    r = xp.take(params, xp.maximum(ids, 0), axis=0)
    if ids.size and int(ids.min()) < 0:
        r[ids < 0] = 0
    return r


@GatherDropNegatives.gradient
def _gdn_grad(op, gg):
    from .array import shape

    params, ids = op.inputs
    n = params.shape[0]
    num = shape(params)[0] if n is None else n
    return [unsorted_segment_sum(gg, ids, num), None]


def unsorted_segment_sum(
    data: Any, segment_ids: Any, num_segments: Any, name: str | None = None
) -> Tensor:
    """``out[i] = sum of data[j...] where segment_ids[j...] == i``; negative ids are dropped."""
    d = convert_to_tensor(data)
    ids = convert_to_tensor(segment_ids)
    if _is_tensor_like(num_segments):
        num = convert_to_tensor(num_segments)
    else:
        num = convert_to_tensor(
            np.int32(_int("unsorted_segment_sum", "num_segments", num_segments))
        )
    return apply("UnsortedSegmentSum", [d, ids, num], name=name or "UnsortedSegmentSum")


# ---- OneHot --------------------------------------------------------------------------------------

OneHot = defop("OneHot", differentiable=False, cost=_write_only_cost)


@OneHot.shape
def _one_hot_shape(op):
    idx = op.inputs[0]
    _check_int_dtype("OneHot", idx)
    at = op.attrs
    if at["depth"] < 0:
        raise InvalidArgumentError(f"OneHot: depth must be >= 0, got {at['depth']}")
    if idx.shape.dims is None:
        return [(TensorShape(None), at["dtype"])]
    dims = list(idx.shape.dims)
    r = len(dims)
    axis = at["axis"]
    if not -1 <= axis <= r:
        raise InvalidArgumentError(
            f"OneHot: axis {axis} is out of range for indices of shape {idx.shape} "
            f"(expected -1 <= axis <= {r})"
        )
    dims.insert(r if axis == -1 else axis, at["depth"])
    return [(TensorShape(dims), at["dtype"])]


@OneHot.kernel("cpu", "gpu")
def _one_hot(ctx, idx):
    xp, at = ctx.xp, ctx.attrs
    dt = at["dtype"].np
    hot = idx[..., None] == xp.arange(at["depth"], dtype=idx.dtype)
    r = xp.where(hot, dt.type(at["on_value"]), dt.type(at["off_value"])).astype(dt, copy=False)
    axis = at["axis"]
    if axis != -1 and axis != idx.ndim:
        r = xp.moveaxis(r, -1, axis)
    return r


def one_hot(
    indices: Any,
    depth: Any,
    on_value: Any = None,
    off_value: Any = None,
    axis: Any = None,
    dtype: Any = None,
    name: str | None = None,
) -> Tensor:
    """A new axis of size ``depth``: ``on_value`` where it equals the index, ``off_value`` elsewhere.

    Indices outside [0, depth) give rows of ``off_value``.
    """
    if _is_tensor_like(on_value) or _is_tensor_like(off_value):
        raise TypeError("one_hot: on_value and off_value must be static numbers in hetbed")
    if dtype is None:
        given = on_value if on_value is not None else off_value
        if given is None or isinstance(given, float):
            dtype = _dt.float32
        elif isinstance(given, (bool, int)):
            dtype = _dt.bool_ if isinstance(given, bool) else _dt.int32
        else:
            dtype = np.asarray(given).dtype
    dtype = _dt.as_dtype(dtype)
    on = 1 if on_value is None else on_value
    off = 0 if off_value is None else off_value
    on, off = (v.item() if isinstance(v, np.generic) else v for v in (on, off))
    if isinstance(depth, Tensor) and depth.op.type != "Const":  # known when the step runs
        return _one_hot_run_time_depth(indices, depth, on, off, axis, dtype, name)
    attrs = {
        "depth": _int("one_hot", "depth", depth),
        "on_value": on,
        "off_value": off,
        "axis": -1 if axis is None else _int("one_hot", "axis", axis),
        "dtype": dtype,
    }
    return apply("OneHot", [indices], attrs, name or "one_hot")


def _one_hot_run_time_depth(indices, depth, on, off, axis, dtype, name) -> Tensor:
    """``one_hot`` with ``depth`` a scalar tensor: ``indices`` compared with ``range(depth)``
    along a new last axis (then moved to ``axis``)."""
    from .array import cast, constant, shape
    from .math import equal, where

    if depth.shape.ndims not in (None, 0) or not depth.dtype.is_integer:
        raise InvalidArgumentError(
            f"one_hot: depth must be an integer scalar, got {depth.name} ({depth.dtype.name}, "
            f"shape {depth.shape})"
        )
    g = get_default_graph()
    with g.name_scope(name or "one_hot"):
        idx = convert_to_tensor(indices)
        positions = range_(0, cast(depth, idx.dtype) if depth.dtype != idx.dtype else depth)
        hit = equal(expand_dims(idx, -1), positions)
        shape_on = constant(np.array(on, dtype=dtype.np))
        out = where(
            hit,
            fill(shape(hit), shape_on),
            fill(shape(hit), constant(np.array(off, dtype=dtype.np))),
        )
        if axis is not None and axis != -1:
            rank = out.shape.ndims
            if rank is None:
                raise InvalidArgumentError("one_hot: an axis other than -1 needs a known rank")
            a = _int("one_hot", "axis", axis) % rank
            perm = list(range(rank - 1))
            perm.insert(a, rank - 1)
            out = transpose(out, perm)
        return out


# ---- Fill, zeros, ones, Range --------------------------------------------------------------------

Fill = defop("Fill", cost=_write_only_cost)


@Fill.shape
def _fill_shape(op):
    v = op.inputs[0]
    if v.shape.ndims not in (None, 0):
        raise InvalidArgumentError(f"Fill: value must be a scalar, got shape {v.shape}")
    return [(TensorShape(op.attrs["shape"]), v.dtype)]


@Fill.kernel("cpu", "gpu")
def _fill(ctx, v):
    shape = ctx.attrs["shape"]
    nbytes = _math.prod(shape) * v.dtype.itemsize
    if nbytes > _memory_bytes():
        raise ResourceExhaustedError(
            f"{ctx.op.name} (Fill): a {v.dtype} tensor of shape {list(shape)} needs {nbytes} "
            f"bytes, more than this machine's {_memory_bytes()} bytes of memory"
        )
    return ctx.xp.full(shape, v, dtype=v.dtype)


def _memory_bytes() -> int:
    """Physical memory of this machine (no limit where the platform does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 62


@Fill.gradient
def _fill_grad(op, g):
    from .math import reduce_sum

    return [reduce_sum(g)]


def _dims(fn: str, dims: Any) -> tuple:
    d = _ints(fn, "shape", dims)
    if any(v < 0 for v in d):
        raise InvalidArgumentError(f"{fn}: shape {list(d)} must be non-negative and fully known")
    return d


def fill(dims: Any, value: Any, name: str | None = None) -> Tensor:
    """A tensor of shape ``dims`` whose every element is the scalar ``value``; ``dims`` may be
    known only when the step runs (a shape tensor, or ints mixed with integer scalars)."""
    from .array import is_run_time_shape, shape_tensor

    if is_run_time_shape(dims):
        return apply("DynamicFill", [shape_tensor("fill", dims), value], name=name or "Fill")
    return apply("Fill", [value], {"shape": _dims("fill", dims)}, name or "Fill")


def _filled(fn: str, shape: Any, dtype: Any, value: int, name: str | None) -> Tensor:
    from .array import constant, is_run_time_shape, reshape, shape_tensor

    dt = _dt.as_dtype(dtype)
    dynamic = is_run_time_shape(shape)
    dims = None if dynamic else _dims(fn, shape)
    g = get_default_graph()
    with g.name_scope(name or fn) as scope:
        v = constant(np.array(value, dtype=dt.np), name="value")
        if dynamic:
            if isinstance(shape, Tensor) and shape.shape.ndims == 0 and shape.dtype.is_integer:
                shape = reshape(shape, [1])  # TF1's zeros/ones read a scalar shape as [n]
            return apply("DynamicFill", [shape_tensor(fn, shape), v], name=scope)
        return apply("Fill", [v], {"shape": dims}, scope)


DynamicFill = defop("DynamicFill", cost=_write_only_cost)


@DynamicFill.shape
def _dynamic_fill_shape(op):
    from .array import static_dims

    dims, v = op.inputs
    if v.shape.ndims not in (None, 0):
        raise InvalidArgumentError(f"Fill {op.name!r}: value must be a scalar, got shape {v.shape}")
    return [(static_dims(dims), v.dtype)]


@DynamicFill.kernel("cpu", "gpu")
def _dynamic_fill(ctx, dims, v):
    shape = tuple(int(d) for d in (dims.tolist() if hasattr(dims, "tolist") else dims))
    if any(d < 0 for d in shape):
        raise InvalidArgumentError(f"Fill {ctx.op.name!r}: shape {list(shape)} has a negative size")
    nbytes = _math.prod(shape) * v.dtype.itemsize
    if nbytes > _memory_bytes():
        raise ResourceExhaustedError(
            f"{ctx.op.name} (Fill): a {v.dtype} tensor of shape {list(shape)} needs {nbytes} "
            f"bytes, more than this machine's {_memory_bytes()} bytes of memory"
        )
    return ctx.xp.full(shape, v, dtype=v.dtype)


@DynamicFill.gradient
def _dynamic_fill_grad(op, g):
    from .math import reduce_sum

    return [None, reduce_sum(g)]


def zeros(shape: Any, dtype: Any = _dt.float32, name: str | None = None) -> Tensor:
    """A tensor of static ``shape`` filled with zeros."""
    return _filled("zeros", shape, dtype, 0, name)


def ones(shape: Any, dtype: Any = _dt.float32, name: str | None = None) -> Tensor:
    """A tensor of static ``shape`` filled with ones."""
    return _filled("ones", shape, dtype, 1, name)


Range = defop("Range", differentiable=False, cost=_write_only_cost)


@Range.shape
def _range_shape(op):
    return [(TensorShape([op.attrs["size"]]), op.attrs["dtype"])]


@Range.kernel("cpu", "gpu")
def _range(ctx):
    at = ctx.attrs
    dt = at["dtype"].np
    if at["dtype"].is_integer:
        return ctx.xp.arange(at["start"], at["limit"], at["delta"], dtype=dt)
    return ctx.xp.arange(at["size"], dtype=dt) * dt.type(at["delta"]) + dt.type(at["start"])


DynamicRange = defop("DynamicRange", differentiable=False, cost=_write_only_cost)


@DynamicRange.shape
def _dynamic_range_shape(op):
    for t, what in zip(op.inputs, ("start", "limit", "delta")):
        if t.shape.ndims not in (None, 0):
            raise InvalidArgumentError(
                f"range {op.name!r}: {what} must be a scalar, got shape {t.shape} ({t.name})"
            )
    return [(TensorShape([None]), op.attrs["dtype"])]


@DynamicRange.kernel("cpu", "gpu")
def _dynamic_range(ctx, start, limit, delta):
    dt = ctx.attrs["dtype"]
    a, b, d = (v.item() for v in (start, limit, delta))  # to the host (a GPU's too)
    if d == 0:
        raise InvalidArgumentError(f"range {ctx.op.name!r}: delta must not be zero")
    if (d > 0 and a > b) or (d < 0 and a < b):
        raise InvalidArgumentError(
            f"range {ctx.op.name!r}: start {a} cannot reach limit {b} with delta {d}"
        )
    if dt.is_integer:
        return ctx.xp.arange(int(a), int(b), int(d), dtype=dt.np)
    n = int(_math.ceil(abs((b - a) / d)))
    return ctx.xp.arange(n, dtype=dt.np) * dt.np.type(d) + dt.np.type(a)


def range_(
    start: Any, limit: Any = None, delta: Any = 1, dtype: Any = None, name: str = "range"
) -> Tensor:
    """``[start, start + delta, ...]`` up to but excluding ``limit``. With static numbers the
    size is known when the graph is built; any of them may be a scalar tensor known only when
    the graph runs (``range_(tf.shape(x)[0])``), and then the size is known at run time.

    ``range_(n)`` counts from 0. Exported as ``hb.range``.
    """
    if limit is None:
        start, limit = 0, start
    args = (("start", start), ("limit", limit), ("delta", delta))
    if any(_is_tensor_like(v) and convert_to_tensor(v).op.type != "Const" for _, v in args):
        return _dynamic_range(args, dtype, name)
    vals = []
    for _what, v in args:
        if _is_tensor_like(v):
            v = convert_to_tensor(v).op.attrs["value"]
        vals.append(np.asarray(v).item())
    start, limit, delta = vals
    if dtype is None:
        dtype = _dt.float32 if any(isinstance(v, float) for v in vals) else _dt.int32
    dtype = _dt.as_dtype(dtype)
    if delta == 0:
        raise InvalidArgumentError("range: delta must not be zero")
    if (delta > 0 and start > limit) or (delta < 0 and start < limit):
        raise InvalidArgumentError(
            f"range: start {start} cannot reach limit {limit} with delta {delta}"
        )
    size = int(_math.ceil(abs((limit - start) / delta)))
    if dtype.is_integer:
        start, limit, delta = int(start), int(limit), int(delta)
        size = len(range(start, limit, delta))
    attrs = {"start": start, "limit": limit, "delta": delta, "dtype": dtype, "size": size}
    return apply("Range", [], attrs, name)


def _dynamic_range(args: tuple, dtype: Any, name: str) -> Tensor:
    """``range`` whose start, limit or delta is known only when the graph runs."""
    from .array import cast

    tensors = [convert_to_tensor(v) if _is_tensor_like(v) else None for _, v in args]
    if dtype is None:  # TF's rule: the highest of int32 < int64 < float32 < float64
        order = [_dt.int32, _dt.int64, _dt.float32, _dt.float64]
        kinds = [
            t.dtype if t is not None else (_dt.float32 if isinstance(v, float) else _dt.int32)
            for t, (_, v) in zip(tensors, args)
        ]
        dtype = max(kinds, key=lambda k: order.index(k) if k in order else 0)
    dtype = _dt.as_dtype(dtype)
    ins = []
    for t, (_what, v) in zip(tensors, args):
        if t is None:
            t = convert_to_tensor(np.asarray(v, dtype=dtype.np))
        elif t.dtype != dtype:
            t = cast(t, dtype)
        ins.append(t)
    return apply("DynamicRange", ins, {"dtype": dtype}, name)


# ---- Tile ----------------------------------------------------------------------------------------

Tile = defop("Tile", cost=default_cost)


@Tile.shape
def _tile_shape(op):
    x, mult = op.inputs[0], op.attrs["multiples"]
    if any(m < 0 for m in mult):
        raise InvalidArgumentError(f"Tile: multiples {list(mult)} must be >= 0")
    if x.shape.dims is None:
        return [(TensorShape([None] * len(mult)), x.dtype)]
    if len(mult) != x.shape.ndims:
        raise InvalidArgumentError(
            f"Tile: multiples {list(mult)} has {len(mult)} entries for shape {x.shape}"
        )
    dims = [None if d is None else d * m for d, m in zip(x.shape.dims, mult)]
    return [(TensorShape(dims), x.dtype)]


@Tile.kernel("cpu", "gpu")
def _tile(ctx, x):
    return ctx.xp.tile(x, ctx.attrs["multiples"])


@Tile.gradient
def _tile_grad(op, g):
    return [apply("TileGrad", [g, op.inputs[0]], dict(op.attrs), name="TileGrad")]


TileGrad = defop("TileGrad")


@TileGrad.shape
def _tile_grad_shape(op):
    return [(op.inputs[1].shape, op.inputs[0].dtype)]


@TileGrad.kernel("cpu", "gpu")
def _tile_grad_kernel(ctx, g, x):
    mult = ctx.attrs["multiples"]
    split_shape = [v for m, d in zip(mult, x.shape) for v in (m, d)]
    r = g.reshape(split_shape).sum(axis=tuple(range(0, 2 * len(mult), 2)))
    return r.astype(g.dtype, copy=False)


@TileGrad.gradient
def _tile_grad_grad(op, gg):
    return [apply("Tile", [gg], dict(op.attrs), name="Tile"), None]


@TileGrad.cost
def _tile_grad_cost(op, ins, outs):
    base = default_cost(op, ins[:1], outs)
    return Cost(float(numel(ins[0])), base.bytes_read, base.bytes_written)


def tile(input: Any, multiples: Any, name: str | None = None) -> Tensor:
    """Repeat ``input`` ``multiples[i]`` times along dimension i (``multiples`` may be known
    only when the step runs: ``[tf.shape(x)[0], 1]``)."""
    from .array import is_run_time_shape, shape_tensor

    if is_run_time_shape(multiples):
        m = shape_tensor("tile", multiples)
        return apply("DynamicTile", [input, m], name=name or "Tile")
    return apply(
        "Tile", [input], {"multiples": _ints("tile", "multiples", multiples)}, name or "Tile"
    )


DynamicTile = defop("DynamicTile", cost=default_cost)


@DynamicTile.shape
def _dynamic_tile_shape(op):
    from .array import static_dims

    x, m = op.inputs
    mult = static_dims(m).dims
    n = x.shape.ndims if mult is None else len(mult)
    if n is None:
        return [(TensorShape(None), x.dtype)]
    if x.shape.dims is not None and len(x.shape.dims) != n:
        raise InvalidArgumentError(
            f"Tile {op.name!r}: multiples has {n} entries for shape {x.shape}"
        )
    xd = x.shape.dims or [None] * n
    md = mult or [None] * n
    return [
        (TensorShape([None if a is None or b is None else a * b for a, b in zip(xd, md)]), x.dtype)
    ]


def _run_time_multiples(ctx, x, m) -> tuple:
    mult = _run_time_ints(m)
    if len(mult) != x.ndim or any(v < 0 for v in mult):
        raise InvalidArgumentError(
            f"Tile {ctx.op.name!r}: multiples {list(mult)} must be {x.ndim} sizes >= 0 for "
            f"shape {tuple(x.shape)}"
        )
    return mult


@DynamicTile.kernel("cpu", "gpu")
def _dynamic_tile(ctx, x, m):
    return ctx.xp.tile(x, _run_time_multiples(ctx, x, m))


@DynamicTile.gradient
def _dynamic_tile_grad(op, g):
    x, m = op.inputs
    return [apply("DynamicTileGrad", [g, x, m], name="TileGrad"), None]


DynamicTileGrad = defop("DynamicTileGrad", differentiable=False)
DynamicTileGrad.cost(_tile_grad_cost)


@DynamicTileGrad.shape
def _dynamic_tile_grad_shape(op):
    return [(op.inputs[1].shape, op.inputs[0].dtype)]


@DynamicTileGrad.kernel("cpu", "gpu")
def _dynamic_tile_grad_kernel(ctx, g, x, m):
    mult = _run_time_multiples(ctx, x, m)
    split_shape = [v for k, d in zip(mult, x.shape) for v in (k, d)]
    r = g.reshape(split_shape).sum(axis=tuple(range(0, 2 * len(mult), 2)))
    return r.astype(g.dtype, copy=False)


# ---- Pad, MirrorPad ------------------------------------------------------------------------------


def _pad_shape_rule(op):
    x, pads = op.inputs[0], op.attrs["paddings"]
    if any(a < 0 or b < 0 for a, b in pads):
        raise InvalidArgumentError(f"{op.type}: paddings {_pad_list(pads)} must be >= 0")
    if x.shape.dims is None:
        return [(TensorShape([None] * len(pads)), x.dtype)]
    if len(pads) != x.shape.ndims:
        raise InvalidArgumentError(
            f"{op.type}: paddings {_pad_list(pads)} has {len(pads)} rows for shape {x.shape}"
        )
    mode = op.attrs.get("mode")
    for i, ((a, b), d) in enumerate(zip(pads, x.shape.dims)):
        limit = None if d is None else (d - 1 if mode == "REFLECT" else d)
        if mode is not None and limit is not None and max(a, b) > limit:
            raise InvalidArgumentError(
                f"MirrorPad: paddings {[a, b]} for dimension {i} of shape {x.shape} must be at "
                f"most {limit} in {mode} mode"
            )
    dims = [None if d is None else d + a + b for (a, b), d in zip(pads, x.shape.dims)]
    return [(TensorShape(dims), x.dtype)]


def _pad_list(pads: tuple) -> list:
    return [list(p) for p in pads]


Pad = defop("Pad", shape=_pad_shape_rule, cost=default_cost)


@Pad.kernel("cpu", "gpu")
def _pad(ctx, x):
    cv = ctx.attrs["constant_values"]
    return ctx.xp.pad(x, ctx.attrs["paddings"], mode="constant", constant_values=cv)


@Pad.gradient
def _pad_grad(op, g):
    """The gradient is the centre of ``g``: a strided slice [before : -after] in each dim."""
    pads = op.attrs["paddings"]
    key = tuple(slice(a, -b if b else None) for a, b in pads)
    return [strided_slice_from_key(g, key, name="pad_grad")]


MirrorPad = defop("MirrorPad", shape=_pad_shape_rule, cost=default_cost)


@MirrorPad.kernel("cpu", "gpu")
def _mirror_pad(ctx, x):
    return ctx.xp.pad(x, ctx.attrs["paddings"], mode=ctx.attrs["mode"].lower())


@MirrorPad.gradient
def _mirror_pad_grad(op, g):
    return [apply("MirrorPadGrad", [g], dict(op.attrs), name="MirrorPadGrad")]


MirrorPadGrad = defop("MirrorPadGrad")


@MirrorPadGrad.shape
def _mirror_pad_grad_shape(op):
    g, pads = op.inputs[0], op.attrs["paddings"]
    if g.shape.dims is None:
        return [(TensorShape([None] * len(pads)), g.dtype)]
    dims = [None if d is None else d - a - b for (a, b), d in zip(pads, g.shape.dims)]
    return [(TensorShape(dims), g.dtype)]


@MirrorPadGrad.kernel("cpu", "gpu")
def _mirror_pad_grad_kernel(ctx, g):
    """Fold the mirrored borders of ``g`` back onto the positions they were copied from."""
    xp = ctx.xp
    off = 1 if ctx.attrs["mode"] == "REFLECT" else 0
    r = g
    for axis, (a, b) in enumerate(ctx.attrs["paddings"]):
        if a == 0 and b == 0:
            continue
        m = xp.moveaxis(r, axis, 0)
        n = m.shape[0] - a - b
        c = m[a : a + n].copy()
        if a:
            c[off : off + a] += m[:a][::-1]
        if b:
            c[n - off - b : n - off] += m[a + n :][::-1]
        r = xp.moveaxis(c, 0, axis)
    return r if r is not g else g.copy()


@MirrorPadGrad.gradient
def _mirror_pad_grad_grad(op, gg):
    return [apply("MirrorPad", [gg], dict(op.attrs), name="MirrorPad")]


@MirrorPadGrad.cost
def _mirror_pad_grad_cost(op, ins, outs):
    base = default_cost(op, ins, outs)
    return Cost(float(numel(ins[0]) - numel(outs[0])), base.bytes_read, base.bytes_written)


def pad(
    tensor: Any,
    paddings: Any,
    mode: str = "CONSTANT",
    name: str | None = None,
    constant_values: Any = 0,
) -> Tensor:
    """Pad dimension i with ``paddings[i] = [before, after]`` entries.

    ``mode`` is CONSTANT (``constant_values``), REFLECT (mirror without the edge) or SYMMETRIC
    (mirror with the edge).
    """
    x = convert_to_tensor(tensor)
    try:
        p = _static("pad", "paddings", paddings)
    except TypeError:
        if not _holds_tensor(paddings):
            raise
        return _pad_dynamic(x, paddings, mode, name, constant_values)  # known at run time
    if p.size == 0:
        p = p.reshape(0, 2)
    if p.ndim != 2 or p.shape[1] != 2:
        raise InvalidArgumentError(f"pad: paddings must have shape [rank, 2], got {p.tolist()}")
    pads = tuple((int(a), int(b)) for a, b in p)
    m = str(mode).upper()
    if m == "CONSTANT":
        if _is_tensor_like(constant_values):
            raise TypeError("pad: constant_values must be a static number in hetbed")
        cv = np.asarray(constant_values)
        if cv.dtype.kind == "f" and x.dtype.is_integer and cv != np.round(cv):
            raise InvalidArgumentError(
                f"pad: constant_values {constant_values!r} does not fit {x.dtype.name}"
            )
        attrs = {"paddings": pads, "constant_values": cv.astype(x.dtype.np).item()}
        return apply("Pad", [x], attrs, name or "Pad")
    if m not in ("REFLECT", "SYMMETRIC"):
        raise InvalidArgumentError(
            f"pad: mode must be CONSTANT, REFLECT or SYMMETRIC, got {mode!r}"
        )
    return apply("MirrorPad", [x], {"paddings": pads, "mode": m}, name or "MirrorPad")


def _holds_tensor(v: Any) -> bool:
    """Whether ``v`` is a tensor or a (nested) list holding one."""
    if _is_tensor_like(v):
        return True
    return isinstance(v, (list, tuple)) and any(_holds_tensor(u) for u in v)


PadDynamic = defop("PadDynamic", cost=default_cost)


@PadDynamic.shape
def _pad_dynamic_shape(op):
    x = op.inputs[0]
    rank = x.shape.ndims
    return [(TensorShape(None if rank is None else [None] * rank), x.dtype)]


def _check_paddings(op_name: str, x: Any, p: Any) -> np.ndarray:
    p = np.asarray(p).astype(np.int64)
    if p.shape != (x.ndim, 2):
        raise InvalidArgumentError(
            f"{op_name}: paddings must have shape [{x.ndim}, 2] for an input of shape "
            f"{list(x.shape)}, got {p.tolist()}"
        )
    if (p < 0).any():
        raise InvalidArgumentError(f"{op_name}: paddings {p.tolist()} must be >= 0")
    return p


@PadDynamic.kernel("cpu", "gpu")
def _pad_dynamic_kernel(ctx, x, paddings):
    p = _check_paddings(f"Pad {ctx.op.name!r}", x, paddings)
    pads = tuple((int(a), int(b)) for a, b in p)
    return ctx.xp.pad(x, pads, mode="constant", constant_values=ctx.attrs["constant_values"])


@PadDynamic.gradient
def _pad_dynamic_grad(op, g):
    """The centre of ``g``: a slice from the ``before`` paddings, of the input's size."""
    from .array import shape as _shape

    x, paddings = op.inputs
    begin = strided_slice_from_key(_as_int64(paddings), (slice(None), 0), name="pad_begin")
    return [slice_(g, begin, _shape(x, out_type=begin.dtype), name="pad_grad"), None]


def _as_int64(t: Tensor) -> Tensor:
    from .array import cast

    return t if t.dtype == _dt.int64 else cast(t, _dt.int64)


def _pad_dynamic(x: Tensor, paddings: Any, mode: str, name: Any, constant_values: Any) -> Tensor:
    """``pad`` with paddings known only when the step runs (CONSTANT mode)."""
    if str(mode).upper() != "CONSTANT":
        raise TypeError(
            f"pad: {mode} mode needs static paddings in hetbed (ints or a constant tensor)"
        )
    if _is_tensor_like(constant_values):
        raise TypeError("pad: constant_values must be a static number in hetbed")
    p = convert_to_tensor(paddings)
    if not p.dtype.is_integer:
        raise TypeError(f"pad: paddings must be integers, got {p.dtype.name}")
    if p.shape.ndims is not None and x.shape.ndims is not None:
        if (
            p.shape.as_list()[-1:] != [2]
            or p.shape.ndims != 2
            or p.shape[0] not in (None, x.shape.ndims)
        ):
            raise InvalidArgumentError(
                f"pad: paddings must have shape [{x.shape.ndims}, 2], got {p.shape}"
            )
    cv = np.asarray(constant_values).astype(x.dtype.np).item()
    return apply("PadDynamic", [x, p], {"constant_values": cv}, name or "Pad")


# ---- ReverseV2 -----------------------------------------------------------------------------------

ReverseV2 = defop("ReverseV2", shape=unchanged_shape, cost=default_cost)


@ReverseV2.kernel("cpu", "gpu", aliases_input=True)
def _reverse(ctx, x):
    axes = ctx.attrs["axis"]
    return ctx.xp.flip(x, axis=axes) if axes else x


@ReverseV2.gradient
def _reverse_grad(op, g):
    return [apply("ReverseV2", [g], dict(op.attrs), name="ReverseV2")]


def reverse(tensor: Any, axis: Any, name: str | None = None) -> Tensor:
    """Reverse the order of entries along each dimension in ``axis``."""
    x = convert_to_tensor(tensor)
    a = _ints("reverse", "axis", axis)
    r = x.shape.ndims
    if r is None:
        if any(v < 0 for v in a):
            raise InvalidArgumentError("reverse: a negative axis needs a known rank")
        axes = a
    else:
        axes = tuple(_norm_axis("ReverseV2", v, r, x.shape) for v in a)
    if len(set(axes)) != len(axes):
        raise InvalidArgumentError(f"reverse: axis {list(a)} names a dimension twice")
    return apply("ReverseV2", [x], {"axis": tuple(sorted(axes))}, name or "ReverseV2")


# ---- ReverseSequence -----------------------------------------------------------------------------

ReverseSequence = defop("ReverseSequence", cost=default_cost)


@ReverseSequence.shape
def _reverse_sequence_shape(op):
    x, lengths = op.inputs
    _check_int_dtype(f"ReverseSequence {op.name!r}", lengths, "seq_lengths")
    seq, batch = op.attrs["seq_axis"], op.attrs["batch_axis"]
    where = f"ReverseSequence {op.name!r}"
    if lengths.shape.ndims not in (None, 1):
        raise InvalidArgumentError(
            f"{where}: seq_lengths must be a vector [batch], got shape {lengths.shape}"
        )
    r = x.shape.ndims
    if r is not None:
        for what, a in (("seq_axis", seq), ("batch_axis", batch)):
            if not 0 <= a < r:
                raise InvalidArgumentError(
                    f"{where}: {what} {a} is out of range for input shape {x.shape}"
                )
        n, m = x.shape.dims[batch], lengths.shape.dims[0] if lengths.shape.ndims else None
        if n is not None and m is not None and n != m:
            raise InvalidArgumentError(
                f"{where}: seq_lengths has {m} entries but the input's batch_axis {batch} has "
                f"{n} (shape {x.shape})"
            )
    return [(x.shape, x.dtype)]


@ReverseSequence.kernel("cpu", "gpu")
def _reverse_sequence(ctx, x, lengths):
    xp = ctx.xp
    seq, batch = ctx.attrs["seq_axis"], ctx.attrs["batch_axis"]
    n, t = x.shape[batch], x.shape[seq]
    if lengths.shape != (n,):
        raise InvalidArgumentError(
            f"ReverseSequence {ctx.op.name!r}: seq_lengths has shape {tuple(lengths.shape)}, "
            f"expected ({n},) for input shape {tuple(x.shape)} (batch_axis {batch})"
        )
    lens = lengths.astype(np.int64)
    if n and (int(lens.min()) < 0 or int(lens.max()) > t):
        raise InvalidArgumentError(
            f"ReverseSequence {ctx.op.name!r}: seq_lengths must lie in [0, {t}] (the input's "
            f"seq_axis {seq} has {t} entries), got {lens.tolist()}"
        )
    y = xp.moveaxis(x, (batch, seq), (0, 1))
    steps = xp.arange(t)[None, :]
    idx = xp.where(steps < lens[:, None], lens[:, None] - 1 - steps, steps)
    out = y[xp.arange(n)[:, None], idx]
    return xp.ascontiguousarray(xp.moveaxis(out, (0, 1), (batch, seq)))


@ReverseSequence.gradient
def _reverse_sequence_grad(op, g):
    return [apply("ReverseSequence", [g, op.inputs[1]], dict(op.attrs)), None]


def reverse_sequence(
    input: Any,  # noqa: A002 - TF's name
    seq_lengths: Any,
    seq_axis: int | None = None,
    batch_axis: int | None = None,
    name: str | None = None,
    seq_dim: int | None = None,
    batch_dim: int | None = None,
) -> Tensor:
    """TF's ``tf.reverse_sequence``: row ``i`` along ``batch_axis`` has its first
    ``seq_lengths[i]`` entries along ``seq_axis`` reversed, the rest kept in place (what a
    backward RNN reads). ``seq_dim``/``batch_dim`` are TF1's older names."""
    if seq_axis is None:
        seq_axis = seq_dim
    if batch_axis is None:
        batch_axis = 0 if batch_dim is None else batch_dim
    if seq_axis is None:
        raise InvalidArgumentError("reverse_sequence: give seq_axis (the time dimension)")
    x = convert_to_tensor(input)
    lengths = convert_to_tensor(seq_lengths)
    r = x.shape.ndims
    s, b = int(seq_axis), int(batch_axis)
    if r is not None:
        s, b = (
            _norm_axis("ReverseSequence", s, r, x.shape),
            _norm_axis("ReverseSequence", b, r, x.shape),
        )
    elif s < 0 or b < 0:
        raise InvalidArgumentError("reverse_sequence: a negative axis needs a known rank")
    if s == b:
        raise InvalidArgumentError(
            f"reverse_sequence: seq_axis and batch_axis must differ, both are {s}"
        )
    return apply(
        "ReverseSequence",
        [x, lengths],
        {"seq_axis": s, "batch_axis": b},
        name or "ReverseSequence",
    )


__all__ = [
    "concat",
    "expand_dims",
    "fill",
    "gather",
    "indexed_slices_to_dense",
    "one_hot",
    "ones",
    "pad",
    "range_",
    "reverse",
    "reverse_sequence",
    "slice_",
    "split",
    "squeeze",
    "stack",
    "strided_slice",
    "strided_slice_from_key",
    "tile",
    "transpose",
    "unsorted_segment_sum",
    "unstack",
    "zeros",
]
