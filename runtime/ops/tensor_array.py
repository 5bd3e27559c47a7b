"""The ops of ``TensorArray`` (runtime/tensor_array.py): writes, reads, gathers, concat, split
and size over a *flow* that is one dense tensor of the elements stacked along a new first
dimension, or a ``RaggedFlow`` (one array per element) when the elements differ in shape, each
op with its shape, kernel, cost and gradient. runtime/tensor_array.py imports this module, which
registers them."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import TensorShape
from ..registry import Cost, apply, defop, nbytes
from .loop import append_row

TensorArrayWrite = defop("TensorArrayWrite", differentiable=True)


@TensorArrayWrite.shape
def _write_shape(op):
    flow, index, value = op.inputs
    if index.shape.ndims not in (None, 0) or not index.dtype.is_integer:
        raise InvalidArgumentError(
            f"TensorArray write: the index must be an integer scalar, got {index.dtype.name} "
            f"of shape {index.shape}"
        )
    if value.dtype != flow.dtype:
        raise InvalidArgumentError(
            f"TensorArray write: the array holds {flow.dtype.name}, got {value.dtype.name}"
        )
    elem = op.attrs.get("element_shape")
    if elem is not None and not elem.is_compatible_with(value.shape):
        raise InvalidArgumentError(
            f"TensorArray write: element of shape {value.shape} into an array of elements "
            f"of shape {elem}"
        )
    n = op.attrs.get("size")
    initial = flow.op.type == "Const" and flow.shape.dims == (0,)  # no element written yet
    if (
        op.attrs.get("ragged")
        or flow.shape.ndims is None
        or not value.shape.is_fully_defined()
        or not (initial or flow.shape.dims[1:] == value.shape.dims)
    ):
        return [(TensorShape(None), flow.dtype)]  # elements may differ in shape
    return [(TensorShape([n, *value.shape.as_list()]), flow.dtype)]


@TensorArrayWrite.kernel("cpu", "gpu")
def _write(ctx, flow, index, value):
    xp = ctx.xp
    i = int(index)
    value = xp.asarray(value)
    if isinstance(flow, RaggedFlow) or ctx.attrs.get("ragged"):
        return _write_ragged(ctx, flow, i, value)
    size = ctx.attrs.get("size")  # None: the array grows
    if i < 0 or (size is not None and i >= size):
        raise InvalidArgumentError(
            f"{ctx.op.name}: index {i} is out of range for a TensorArray of size {size}"
        )
    n = flow.shape[0]  # the elements so far (none: any element shape)
    if n and (flow.ndim != value.ndim + 1 or flow.shape[1:] != value.shape):
        elem = ctx.attrs.get("element_shape")
        if elem is None or not elem.is_fully_defined():  # elements of different shapes
            return _write_ragged(ctx, flow, i, value)
        raise InvalidArgumentError(
            f"{ctx.op.name}: element of shape {tuple(value.shape)} into an array of elements of "
            f"shape {tuple(flow.shape[1:])}"
        )
    if i == n and size is None and value.dtype == flow.dtype:  # appended in place (ops/loop.py)
        return append_row(xp, flow if n else None, value)
    out = xp.zeros((max(n, i + 1, size or 0), *value.shape), dtype=value.dtype)
    if n:
        out[:n] = flow
    out[i] = value
    return out


def _write_ragged(ctx, flow, i, value):
    rows = _rows(flow)
    size = ctx.attrs.get("size")
    if size is not None:
        rows += [None] * (size - len(rows))
    if i < 0 or (size is not None and i >= size):
        raise InvalidArgumentError(
            f"{ctx.op.name}: index {i} is out of range for a TensorArray of size {len(rows)}"
        )
    rows += [None] * (i + 1 - len(rows))
    rows[i] = value
    return RaggedFlow(rows)


@TensorArrayWrite.cost
def _write_cost(op, ins, outs):
    b = float(nbytes(outs[0], op.outputs[0].dtype))
    return Cost(0.0, b, b)


@TensorArrayWrite.gradient
def _write_grad(op, g):
    from .manip import gather

    flow, index, value = op.inputs
    if op.attrs.get("ragged") or op.outputs[0].shape.ndims is None:  # elements may differ
        d_value = apply("TensorArrayRowGrad", [g, index, value], {}, "row_grad")
        if flow.op.type == "Const":
            return [None, None, d_value]
        return [apply("TensorArrayFlowGrad", [g, index, flow], {}, "flow_grad"), None, d_value]
    d_value = gather(g, index)
    d_flow = apply("TensorArrayClearRow", [g, index], {}, "clear_row")
    return [d_flow if flow.shape.ndims == g.shape.ndims else None, None, d_value]


TensorArrayClearRow = defop("TensorArrayClearRow", differentiable=False)


@TensorArrayClearRow.shape
def _clear_shape(op):
    g = op.inputs[0]
    return [(g.shape, g.dtype)]


@TensorArrayClearRow.kernel("cpu", "gpu")
def _clear_row(ctx, g, index):
    out = ctx.xp.array(g, copy=True)
    i = int(index)
    if 0 <= i < out.shape[0]:
        out[i] = 0
    return out


TensorArrayClearRow.cost(
    lambda op, ins, outs: Cost(0.0, *(2 * [float(nbytes(ins[0], op.inputs[0].dtype))]))
)


# ---- elements of different shapes ---------------------------------------------------------------


class RaggedFlow:
    """The flow of a TensorArray whose elements may differ in shape: one array per element, None
    for an element never written (a zero, in a gradient). Immutable: a write makes a new one."""

    __slots__ = ("items",)
    __array_ufunc__ = None  # ``dense + ragged`` comes here, not to numpy

    def __init__(self, items: Any):
        self.items = tuple(items)

    def __len__(self) -> int:
        return len(self.items)

    def __repr__(self) -> str:
        shapes = [None if a is None else tuple(a.shape) for a in self.items]
        return f"RaggedFlow({shapes})"

    def __add__(self, other: Any) -> RaggedFlow:
        rows = _rows(other)
        if len(rows) != len(self.items):
            if not len(rows):
                return self
            raise InvalidArgumentError(
                f"TensorArray gradients of {len(self.items)} and {len(rows)} elements"
            )
        return RaggedFlow(
            b if a is None else a if b is None else a + b for a, b in zip(self.items, rows)
        )

    __radd__ = __add__

    def copy(self) -> RaggedFlow:
        return self

    def ragged_zeros(self) -> RaggedFlow:
        return RaggedFlow([None] * len(self.items))


def _rows(flow: Any) -> list:
    """The elements of a flow, dense or ragged."""
    if isinstance(flow, RaggedFlow):
        return list(flow.items)
    if flow.ndim == 1 and flow.shape[0] == 0:  # an array with no element written yet
        return []
    return list(flow)


def _host(x: Any) -> np.ndarray:
    get = getattr(x, "get", None)  # a cupy array
    return np.asarray(get() if callable(get) else x)


def _shape_str(a: Any) -> str:
    return str(list(a.shape))


def _fill(ctx, rows: list, what: str, written: Any = None) -> list:
    """``rows`` with elements never written as zeros of the element shape: the array's, merged
    with those of the ``written`` elements (all of them by default), as TensorFlow does."""
    if all(r is not None for r in rows):
        return rows
    elem = ctx.attrs.get("element_shape") or TensorShape(None)
    for r in rows if written is None else written:
        if r is not None and elem.is_compatible_with(r.shape):
            elem = elem.merge_with(r.shape)
        elif r is not None:
            elem = TensorShape(None)
            break
    if not elem.is_fully_defined():
        k = rows.index(None)
        raise InvalidArgumentError(
            f"{ctx.op.name}: TensorArray {ctx.attrs.get('array')!r}: {what} element {k}, which "
            "was never written, and no one element shape is known for it"
        )
    dt = _dt.as_dtype(ctx.op.inputs[0].dtype).np
    return [ctx.xp.zeros(elem.as_list(), dt) if r is None else r for r in rows]


def _same_shapes(ctx, rows: list, indices: list) -> None:
    """TF's rule for stack and gather: every element has one shape."""
    for k in range(1, len(rows)):
        if rows[k].shape != rows[0].shape:
            raise InvalidArgumentError(
                f"{ctx.op.name}: TensorArray {ctx.attrs.get('array')!r} has elements of different "
                f"shapes and cannot stack them: element {indices[0]} has shape "
                f"{_shape_str(rows[0])}, element {indices[k]} has shape {_shape_str(rows[k])}"
            )


def _index(ctx, i: Any, n: int) -> int:
    i = int(i)
    if not 0 <= i < n:
        raise InvalidArgumentError(
            f"{ctx.op.name}: index {i} is out of range for TensorArray {ctx.attrs.get('array')!r} "
            f"of {n} elements"
        )
    return i


def _unknown(op):
    return [(TensorShape(None), op.inputs[0].dtype)]


def _like(k: int):
    """The shape rule of a gradient laid out as input ``k``."""

    def shape(op):
        return [(op.inputs[k].shape, op.inputs[k].dtype)]

    return shape


TensorArrayRead = defop("TensorArrayRead")


@TensorArrayRead.shape
def _read_shape(op):
    elem = op.attrs.get("element_shape")
    return [(elem if elem is not None else TensorShape(None), op.inputs[0].dtype)]


@TensorArrayRead.kernel("cpu", "gpu", aliases_input=True)
def _read(ctx, flow, index):
    if not isinstance(flow, RaggedFlow):
        return flow[_index(ctx, index, flow.shape[0])]
    rows = flow.items
    i = _index(ctx, index, len(rows))
    return ctx.xp.array(
        _fill(ctx, [rows[i]], "reads", rows)[0], copy=True
    )  # not the written buffer


@TensorArrayRead.gradient
def _read_grad(op, g):
    flow, index = op.inputs
    return [apply("TensorArrayReadGrad", [flow, index, g], {}, "read_grad"), None]


TensorArrayReadGrad = defop("TensorArrayReadGrad", differentiable=False, shape=_like(0))


@TensorArrayReadGrad.kernel("cpu", "gpu")
def _read_grad_kernel(ctx, flow, index, g):
    i = int(index)
    if isinstance(flow, RaggedFlow):
        items = [None] * len(flow)
        items[i] = g
        return RaggedFlow(items)
    out = ctx.xp.zeros(flow.shape, flow.dtype)
    out[i] = g
    return out


TensorArrayGather = defop("TensorArrayGather")


@TensorArrayGather.shape
def _gather_shape(op):
    elem = op.attrs.get("element_shape")
    if elem is None or elem.ndims is None:
        return [(TensorShape(None), op.inputs[0].dtype)]
    indices = op.inputs[1].shape
    n = op.attrs.get("size") if op.attrs.get("all") else indices[0] if indices.ndims == 1 else None
    return [(TensorShape([n, *elem.dims]), op.inputs[0].dtype)]


@TensorArrayGather.kernel("cpu", "gpu", aliases_input=True)
def _gather(ctx, flow, indices):
    xp = ctx.xp
    n = len(flow) if isinstance(flow, RaggedFlow) else flow.shape[0]
    idx = list(range(n)) if ctx.attrs.get("all") else [int(i) for i in _host(indices).ravel()]
    if not isinstance(flow, RaggedFlow):
        if ctx.attrs.get("all"):
            return flow
        return flow[xp.asarray([_index(ctx, i, n) for i in idx], dtype=np.int64)]
    rows = _fill(ctx, [flow.items[_index(ctx, i, n)] for i in idx], "stacks", flow.items)
    if not rows:
        elem = ctx.attrs.get("element_shape")
        if elem is None or not elem.is_fully_defined():
            raise InvalidArgumentError(
                f"{ctx.op.name}: TensorArray {ctx.attrs.get('array')!r}: cannot stack no elements "
                "of an unknown shape"
            )
        return xp.zeros((0, *elem.as_list()), _dt.as_dtype(ctx.op.inputs[0].dtype).np)
    _same_shapes(ctx, rows, idx)
    return xp.stack(rows)


@TensorArrayGather.gradient
def _gather_grad(op, g):
    flow, indices = op.inputs
    return [apply("TensorArrayGatherGrad", [flow, indices, g], dict(op.attrs), "gather_grad"), None]


TensorArrayGatherGrad = defop("TensorArrayGatherGrad", differentiable=False, shape=_like(0))


@TensorArrayGatherGrad.kernel("cpu", "gpu")
def _gather_grad_kernel(ctx, flow, indices, g):
    ragged = isinstance(flow, RaggedFlow)
    n = len(flow) if ragged else flow.shape[0]
    if ctx.attrs.get("all"):
        return RaggedFlow(list(g)) if ragged else g
    idx = [int(i) for i in _host(indices).ravel()]
    if not ragged:
        out = ctx.xp.zeros(flow.shape, flow.dtype)
        for k, i in enumerate(idx):
            out[i] += g[k]
        return out
    items: list = [None] * n
    for k, i in enumerate(idx):
        items[i] = g[k] if items[i] is None else items[i] + g[k]
    return RaggedFlow(items)


TensorArrayConcat = defop("TensorArrayConcat")


@TensorArrayConcat.shape
def _concat_shape(op):
    elem = op.attrs.get("element_shape")
    if elem is None or elem.ndims is None:
        return [(TensorShape(None), op.inputs[0].dtype)]
    if elem.ndims == 0:
        raise InvalidArgumentError(
            f"TensorArray {op.attrs.get('array')}: concat needs elements of rank 1 or more, "
            f"its elements have shape {elem}"
        )
    return [(TensorShape([None, *elem.dims[1:]]), op.inputs[0].dtype)]


@TensorArrayConcat.kernel("cpu", "gpu", aliases_input=True)
def _concat(ctx, flow):
    xp = ctx.xp
    rows = _fill(ctx, _rows(flow), "concatenates")
    name = f"{ctx.op.name}: TensorArray {ctx.attrs.get('array')!r}"
    if not rows:
        elem = ctx.attrs.get("element_shape")
        if elem is None or elem.ndims is None or not TensorShape(elem.dims[1:]).is_fully_defined():
            raise InvalidArgumentError(f"{name}: cannot concatenate no elements of unknown shape")
        return xp.zeros((0, *elem.as_list()[1:]), _dt.as_dtype(ctx.op.inputs[0].dtype).np)
    for k, r in enumerate(rows):
        if r.ndim == 0:
            raise InvalidArgumentError(
                f"{name}: concat needs elements of rank 1 or more, element {k} is a scalar"
            )
        if r.shape[1:] != rows[0].shape[1:]:
            raise InvalidArgumentError(
                f"{name}: elements to concatenate differ in more than their first dimension: "
                f"element 0 has shape {_shape_str(rows[0])}, element {k} has shape "
                f"{_shape_str(r)}"
            )
    if not isinstance(flow, RaggedFlow):
        return flow.reshape((-1, *flow.shape[2:]))
    return xp.concatenate(rows, axis=0)


@TensorArrayConcat.gradient
def _concat_grad(op, g):
    return [apply("TensorArrayConcatGrad", [op.inputs[0], g], {}, "concat_grad")]


TensorArrayConcatGrad = defop("TensorArrayConcatGrad", differentiable=False, shape=_like(0))


@TensorArrayConcatGrad.kernel("cpu", "gpu", aliases_input=True)
def _concat_grad_kernel(ctx, flow, g):
    if not isinstance(flow, RaggedFlow):
        return g.reshape(flow.shape)
    items, at = [], 0
    for r in flow.items:
        if r is None:
            items.append(None)
            continue
        items.append(g[at : at + r.shape[0]])
        at += r.shape[0]
    return RaggedFlow(items)


TensorArraySplit = defop("TensorArraySplit", shape=_unknown)


@TensorArraySplit.kernel("cpu", "gpu")
def _split(ctx, value, lengths):
    name = f"{ctx.op.name}: TensorArray {ctx.attrs.get('array')!r}"
    ls = [int(n) for n in _host(lengths).ravel()]
    if lengths.ndim != 1:
        raise InvalidArgumentError(f"{name}: split lengths must be a vector")
    if value.ndim == 0:
        raise InvalidArgumentError(f"{name}: split needs a value of rank 1 or more")
    if any(n < 0 for n in ls) or sum(ls) != value.shape[0]:
        raise InvalidArgumentError(
            f"{name}: split lengths {ls} (sum {sum(ls)}) do not cover the value's first "
            f"dimension {value.shape[0]}"
        )
    size = ctx.attrs.get("size") or 0  # more pieces than that make a longer array (as in TF)
    starts = np.cumsum([0, *ls])
    items = [value[starts[k] : starts[k + 1]] for k in range(len(ls))]
    items += [None] * (size - len(ls))
    return RaggedFlow(items)


@TensorArraySplit.gradient
def _split_grad(op, g):
    value, lengths = op.inputs
    return [apply("TensorArraySplitGrad", [g, value], {}, "split_grad"), None]


TensorArraySplitGrad = defop("TensorArraySplitGrad", differentiable=False, shape=_like(1))


@TensorArraySplitGrad.kernel("cpu", "gpu")
def _split_grad_kernel(ctx, g, value):
    rows = _rows(g)
    out = ctx.xp.zeros(value.shape, value.dtype)
    at = 0
    for r in rows:
        if r is None:
            break  # the elements written by the split come first and none of them is None
        out[at : at + r.shape[0]] += r
        at += r.shape[0]
    return out


TensorArraySize = defop("TensorArraySize", differentiable=False)


@TensorArraySize.shape
def _size_shape(op):
    return [(TensorShape([]), _dt.int32)]


@TensorArraySize.kernel("cpu", "gpu")
def _size(ctx, flow):
    n = len(flow) if isinstance(flow, RaggedFlow) else flow.shape[0]
    return ctx.xp.asarray(np.int32(n))


TensorArrayRowGrad = defop("TensorArrayRowGrad", differentiable=False, shape=_like(2))


@TensorArrayRowGrad.kernel("cpu", "gpu", aliases_input=True)
def _row_grad(ctx, g, index, value):
    """The gradient of a written element: its row of the array's gradient."""
    i = int(index)
    if isinstance(g, RaggedFlow):
        r = g.items[i] if i < len(g) else None
        return ctx.xp.zeros(value.shape, value.dtype) if r is None else r
    if g.ndim == value.ndim + 1 and i < g.shape[0]:
        return g[i]
    return ctx.xp.zeros(value.shape, value.dtype)


TensorArrayFlowGrad = defop("TensorArrayFlowGrad", differentiable=False, shape=_like(2))


@TensorArrayFlowGrad.kernel("cpu", "gpu")
def _flow_grad(ctx, g, index, flow):
    """The gradient of the array a write wrote into: the written one's, element ``index``
    cleared, laid out as that array (dense or ragged, and of its size)."""
    i = int(index)
    rows = _rows(g)
    if isinstance(flow, RaggedFlow):
        n = len(flow)
        items = [rows[k] if k < len(rows) and k != i else None for k in range(n)]
        return RaggedFlow(items)
    if flow.ndim == 1 and flow.shape[0] == 0:
        return flow
    n = flow.shape[0]
    if not isinstance(g, RaggedFlow) and g.shape[1:] == flow.shape[1:] and g.shape[0] >= n:
        out = ctx.xp.array(g[:n], copy=True)
        if i < n:
            out[i] = 0
        return out
    out = ctx.xp.zeros(flow.shape, flow.dtype)
    for k in range(min(flow.shape[0], len(rows))):
        if k != i and rows[k] is not None and rows[k].shape == flow.shape[1:]:
            out[k] = rows[k]
    return out
