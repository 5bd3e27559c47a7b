"""TF1's ``tf.TensorArray``, held as a value: its *flow* is one dense tensor of the elements
stacked along a new first dimension (``[size, *element_shape]``), and every write makes a new
flow (``TensorArrayWrite``, a copy with one row replaced). So a TensorArray passes through
``while_loop`` as a loop variable like any tensor, reads are gathers, ``stack`` is the flow
itself, and gradients come from the ops' own (a write's gradient splits the incoming one between
the earlier flow and the written row).

Elements may differ in shape (``infer_shape=False``, or static shapes not fully known): the flow
is then a ``RaggedFlow``, one array per element, and its static shape is unknown. ``read``,
``write``, ``concat`` (elements of different first dimensions), ``split`` (unequal lengths) and
``unstack`` take it, with gradients; ``stack`` and ``gather`` raise InvalidArgumentError naming
the array, two indices and their shapes when the elements differ, as TensorFlow does.

A size given as a tensor (known when the graph runs) makes an array that grows as elements are
written. Differences from TensorFlow: ``concat`` returns no lengths (neither does TF's Python
API); ``clear_after_read`` and ``colocate_with_first_write_call`` are accepted and not used
(reading an element twice is allowed); writing the element after the last one (a loop writing
0, 1, 2, ... into an array of dynamic size) appends it in place in amortized O(element) time,
while any other write costs a copy of the whole array (a loop writing into an array of fixed
size costs O(n^2) copies; a ragged array copies its list of elements); an element never written
reads as zeros where the element shape is fully known, else reading it is an error.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import dtypes as _dt
from .errors import InvalidArgumentError
from .graph import Tensor, TensorShape, get_default_graph
from .ops.loop import append_row
from .registry import Cost, apply, apply_op, convert_to_tensor, defop, nbytes

__all__ = ["TensorArray"]

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
    from .ops.manip import gather

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


class TensorArray:
    """TF1's ``tf.TensorArray`` (see the module docstring): ``write``, ``read``, ``stack``,
    ``unstack``, ``gather``, ``scatter``, ``concat``, ``size``, ``identity``, ``close``."""

    def __init__(
        self,
        dtype: Any,
        size: Any = None,
        dynamic_size: bool | None = None,
        clear_after_read: bool | None = None,
        tensor_array_name: str | None = None,
        handle: Any = None,
        flow: Any = None,
        infer_shape: bool = True,
        element_shape: Any = None,
        colocate_with_first_write_call: bool = True,
        name: str | None = None,
    ):
        self.dtype = _dt.as_dtype(dtype)
        self._dynamic_size = bool(dynamic_size)
        self._infer_shape = bool(infer_shape)
        self._element_shape = TensorShape(element_shape) if element_shape is not None else None
        self._size_tensor = None
        if isinstance(size, Tensor):
            if size.op.type == "Const":
                size = int(size.op.attrs["value"])
            else:  # known when the graph runs: the array grows as elements are written
                self._size_tensor, size = size, None
                self._dynamic_size = True
        if size is None and not self._dynamic_size:
            raise InvalidArgumentError("TensorArray: give a size, or dynamic_size=True")
        self._size = int(size) if size is not None else 0
        self.name = name or tensor_array_name or "TensorArray"
        if flow is None:
            g = get_default_graph()
            with g.name_scope(self.name):
                elem = self._element_shape
                if elem is not None and elem.is_fully_defined():
                    shape = [self._size, *elem.as_list()]
                else:
                    shape = [0]  # the element shape comes with the first write
                from .ops.array import constant

                flow = constant(np.zeros(shape, self.dtype.np), name="flow")
        self.flow = convert_to_tensor(flow)

    def _with(self, flow: Tensor, element_shape: Any = None) -> TensorArray:
        ta = TensorArray.__new__(TensorArray)
        ta.dtype, ta._dynamic_size = self.dtype, self._dynamic_size
        ta._infer_shape = self._infer_shape
        ta._element_shape = element_shape if element_shape is not None else self._element_shape
        ta._size, ta.name, ta.flow = self._size, self.name, flow
        ta._size_tensor = self._size_tensor
        return ta

    @property
    def element_shape(self) -> TensorShape:
        return self._element_shape if self._element_shape is not None else TensorShape(None)

    @property
    def handle(self) -> Tensor:
        return self.flow

    def identity(self) -> TensorArray:
        return self._with(self.flow)

    def close(self, name: str | None = None) -> Any:
        from .ops.control import no_op

        return no_op(name=name or "TensorArrayClose")

    def _attrs(self, **kw: Any) -> dict:
        return {"array": self.name, "element_shape": self._element_shape, **kw}

    def write(self, index: Any, value: Any, name: str | None = None) -> TensorArray:
        """A new TensorArray with ``value`` at ``index`` (use the returned array)."""
        v = convert_to_tensor(value, dtype=self.dtype)
        i = convert_to_tensor(index)
        elem = self._element_shape
        if elem is not None and v.shape.ndims is not None:
            if not elem.is_compatible_with(v.shape):
                raise InvalidArgumentError(
                    f"TensorArray {self.name}: element of shape {v.shape} does not match the "
                    f"shape {elem} of its elements"
                )
            if self._infer_shape:
                elem = elem.merge_with(v.shape) if hasattr(elem, "merge_with") else v.shape
        elif v.shape.ndims is not None and self._infer_shape:
            elem = v.shape
        attrs = self._attrs(
            size=None if self._dynamic_size else self._size,
            dynamic_size=self._dynamic_size,
            ragged=not self._infer_shape,
        )
        out = apply_op("TensorArrayWrite", [self.flow, i, v], attrs, name or "TensorArrayWrite")
        return self._with(out.outputs[0], elem)

    def read(self, index: Any, name: str | None = None) -> Tensor:
        from .ops.manip import gather

        if self.flow.shape.ndims is None:  # elements may differ in shape
            return apply("TensorArrayRead", [self.flow, index], self._attrs(), name or "read")
        out = gather(self.flow, index, name=name or "TensorArrayRead")
        if self._element_shape is not None and out.shape.ndims is None:
            out.set_shape(self._element_shape)
        return out

    def stack(self, name: str | None = None) -> Tensor:
        """The elements stacked along a new first dimension (all of one shape)."""
        from .ops.array import identity

        if self.flow.shape.ndims is None:
            attrs = self._attrs(all=True, size=None if self._dynamic_size else self._size)
            return apply("TensorArrayGather", [self.flow, np.int32(0)], attrs, name or "stack")
        out = identity(self.flow, name=name or "TensorArrayStack")
        if self._element_shape is not None and out.shape.ndims is None:
            out.set_shape(TensorShape([None, *self._element_shape.as_list()]))
        return out

    def gather(self, indices: Any, element_shape: Any = None, name: str | None = None) -> Tensor:
        """The elements at ``indices`` stacked (all of one shape)."""
        from .ops.manip import gather

        if self.flow.shape.ndims is None:
            attrs = self._attrs(all=False)
            return apply("TensorArrayGather", [self.flow, indices], attrs, name or "gather")
        return gather(self.flow, indices, name=name or "TensorArrayGather")

    def unstack(self, value: Any, name: str | None = None) -> TensorArray:
        """A TensorArray whose elements are the slices of ``value`` along its first dimension."""
        v = convert_to_tensor(value, dtype=self.dtype)
        if v.shape.ndims == 0:
            raise InvalidArgumentError("TensorArray.unstack: the value needs a first dimension")
        elem = self._element_shape
        if self._infer_shape and v.shape.ndims is not None:
            elem = TensorShape(v.shape.dims[1:])
        return self._with(v, elem)

    def scatter(self, indices: Any, value: Any, name: str | None = None) -> TensorArray:
        """A TensorArray with the rows of ``value`` at ``indices`` (a static list of ints)."""
        idx = indices
        if isinstance(idx, Tensor):
            if idx.op.type != "Const":
                raise InvalidArgumentError("TensorArray.scatter: indices must be known when built")
            idx = idx.op.attrs["value"]
        v = convert_to_tensor(value, dtype=self.dtype)
        ta = self
        for k, i in enumerate(np.asarray(idx).ravel().tolist()):
            ta = ta.write(int(i), v[k])
        return ta

    def concat(self, name: str | None = None) -> Tensor:
        """The elements joined along their first dimension (which may differ between them)."""
        return apply("TensorArrayConcat", [self.flow], self._attrs(), name or "TensorArrayConcat")

    def split(self, value: Any, lengths: Any, name: str | None = None) -> TensorArray:
        """A TensorArray whose elements are consecutive pieces of ``value`` along its first
        dimension, of the given ``lengths`` (a vector)."""
        v = convert_to_tensor(value, dtype=self.dtype)
        ls = convert_to_tensor(lengths)
        if ls.dtype.name not in ("int32", "int64"):
            raise InvalidArgumentError(f"TensorArray {self.name}: split lengths must be integers")
        attrs = self._attrs(size=None if self._dynamic_size else self._size)
        flow = apply("TensorArraySplit", [v, ls], attrs, name or "TensorArraySplit")
        elem = self._element_shape
        if self._infer_shape and ls.op.type == "Const" and v.shape.ndims:
            n = np.asarray(ls.op.attrs["value"]).ravel()
            if len(n) and (n == n[0]).all():
                got = TensorShape([int(n[0]), *v.shape.dims[1:]])
                elem = got if elem is None else elem.merge_with(got)
        return self._with(flow, elem)

    def size(self, name: str | None = None) -> Tensor:
        from .ops.array import shape

        if not self._dynamic_size:
            return convert_to_tensor(np.int32(self._size))
        if self._size_tensor is not None:
            return self._size_tensor
        if self.flow.shape.ndims is None:
            return apply("TensorArraySize", [self.flow], {}, name or "TensorArraySize")
        return shape(self.flow, name=name or "TensorArraySize")[0]
