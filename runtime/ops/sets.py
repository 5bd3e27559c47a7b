"""TF1's set operations over the last dimension (``tf.sets``): ``set_intersection``,
``set_union``, ``set_difference`` and ``set_size``. Each row (all but the last dimension) of a
dense tensor is the set of its entries; of a SparseTensor, the set of its values in that row.
Results are SparseTensors whose rows hold their elements in ascending order, as TF's kernels
give them (``set_size`` is the number of distinct elements per row, int32)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import Tensor, TensorShape
from ..registry import apply, convert_to_tensor, defop

SetOperation = defop("DenseSetOperation", differentiable=False)
SetSize = defop("SetSize", differentiable=False)

_KINDS = ("intersection", "union", "a-b", "b-a")


def _rows(arrays: list, sparse: bool, what: str, op_name: str) -> tuple[dict, tuple]:
    """{row index tuple: set of values} and the leading shape."""
    if sparse:
        idx, vals, shape = (np.asarray(a) for a in arrays)
        shape = tuple(int(v) for v in shape)
        if len(shape) < 2:
            raise InvalidArgumentError(f"{op_name}: {what} must have rank >= 2, got {shape}")
        idx = idx.reshape(-1, idx.shape[-1] if idx.ndim == 2 else len(shape))
        if idx.shape != (len(vals), len(shape)):
            raise InvalidArgumentError(
                f"{op_name}: {what}'s indices have shape {idx.shape}; {len(vals)} values of a "
                f"rank-{len(shape)} tensor need ({len(vals)}, {len(shape)})"
            )
        if len(idx) and ((idx < 0).any() or (idx >= np.asarray(shape)).any()):
            bad = idx[((idx < 0) | (idx >= np.asarray(shape))).any(axis=1)][0].tolist()
            raise InvalidArgumentError(
                f"{op_name}: {what} has index {bad} outside its dense shape {list(shape)}"
            )
        rows: dict = {}
        for i, v in zip(idx.tolist(), vals.tolist()):
            rows.setdefault(tuple(i[:-1]), set()).add(v)
        return rows, shape[:-1]
    (x,) = arrays
    x = np.asarray(x)
    if x.ndim < 2:
        raise InvalidArgumentError(f"{op_name}: {what} must have rank >= 2, got {x.shape}")
    lead = x.shape[:-1]
    if x.shape[-1] == 0:
        return {tuple(int(v) for v in k): set() for k in np.ndindex(*lead)}, lead
    flat = x.reshape(-1, x.shape[-1])
    rows = {np.unravel_index(r, lead): set(flat[r].tolist()) for r in range(flat.shape[0])}
    return {tuple(int(v) for v in k): s for k, s in rows.items()}, lead


@SetOperation.shape
def _set_op_shape(op):
    return [
        (TensorShape([None, None]), _dt.int64),
        (TensorShape([None]), op.attrs["T"]),
        (TensorShape([None]), _dt.int64),
    ]


@SetOperation.kernel("cpu")
def _set_op(ctx, *ins):
    at = ctx.attrs
    na = 3 if at["a_sparse"] else 1
    name = f"{ctx.op.type} {ctx.op.name!r}"
    ra, la = _rows(list(ins[:na]), at["a_sparse"], "a", name)
    rb, lb = _rows(list(ins[na:]), at["b_sparse"], "b", name)
    if tuple(la) != tuple(lb):
        raise InvalidArgumentError(
            f"{name}: a and b must have the same leading dimensions, got {list(la)} and {list(lb)}"
        )
    kind = at["kind"]
    out_rows = {}
    for key in sorted(set(ra) | set(rb)):
        a, b = ra.get(key, set()), rb.get(key, set())
        got = {
            "intersection": a & b,
            "union": a | b,
            "a-b": a - b,
            "b-a": b - a,
        }[kind]
        if got:
            out_rows[key] = sorted(got)
    width = max((len(v) for v in out_rows.values()), default=0)
    idx = [(*k, j) for k, v in out_rows.items() for j in range(len(v))]
    vals = [x for v in out_rows.values() for x in v]
    rank = len(la) + 1
    dt = at["T"]
    values = np.array(vals, dtype=object if dt.is_string else dt.np)
    return (
        np.asarray(idx, np.int64).reshape(-1, rank),
        values.reshape(-1),
        np.asarray([*la, width], np.int64),
    )


@SetSize.shape
def _set_size_shape(op):
    return [(TensorShape(None), _dt.int32)]


@SetSize.kernel("cpu")
def _set_size(ctx, *ins):
    rows, lead = _rows(list(ins), ctx.attrs["sparse"], "set", f"SetSize {ctx.op.name!r}")
    out = np.zeros(lead, np.int32)
    for k, s in rows.items():
        out[k] = len(s)
    return out


def _parts(x: Any) -> tuple[list, bool, Any]:
    from .sparse import SparseTensor, SparseTensorValue

    if isinstance(x, SparseTensorValue):
        x = SparseTensor(*x)
    if isinstance(x, SparseTensor):
        vals = convert_to_tensor(x.values)
        parts = [
            convert_to_tensor(x.indices, _dt.int64),
            vals,
            convert_to_tensor(x.dense_shape, _dt.int64),
        ]
        return parts, True, vals.dtype
    t = convert_to_tensor(x)
    return [t], False, t.dtype


def _set_operation(a: Any, b: Any, kind: str, name: str) -> Any:
    from .sparse import SparseTensor

    pa, sa, dta = _parts(a)
    pb, sb, dtb = _parts(b)
    if dta != dtb:
        raise TypeError(f"{name}: a and b must have one dtype, got {dta.name} and {dtb.name}")
    if not (dta.is_integer or dta.is_string):
        raise TypeError(f"{name}: sets hold integers or strings, got {dta.name}")
    attrs = {"kind": kind, "a_sparse": sa, "b_sparse": sb, "T": dta}
    idx, vals, shape = apply("DenseSetOperation", pa + pb, attrs, name)
    return SparseTensor(idx, vals, shape)


def set_intersection(a: Any, b: Any, validate_indices: bool = True) -> Any:
    """The elements in both ``a`` and ``b``, row by row (a SparseTensor)."""
    return _set_operation(a, b, "intersection", "set_intersection")


def set_union(a: Any, b: Any, validate_indices: bool = True) -> Any:
    """The elements in ``a`` or ``b``, row by row (a SparseTensor)."""
    return _set_operation(a, b, "union", "set_union")


def set_difference(a: Any, b: Any, aminusb: bool = True, validate_indices: bool = True) -> Any:
    """The elements of ``a`` not in ``b`` (``b`` not in ``a`` when not ``aminusb``)."""
    return _set_operation(a, b, "a-b" if aminusb else "b-a", "set_difference")


def set_size(a: Any, validate_indices: bool = True) -> Tensor:
    """The number of distinct elements of each row of ``a`` (int32, the leading shape)."""
    parts, sparse, _ = _parts(a)
    out = apply("SetSize", parts, {"sparse": sparse}, "set_size")
    if not sparse and parts[0].shape.ndims is not None:
        out.set_shape(TensorShape(parts[0].shape.as_list()[:-1]))
    return out


__all__ = ["set_difference", "set_intersection", "set_size", "set_union"]
