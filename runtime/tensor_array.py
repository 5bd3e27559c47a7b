"""TF1's ``tf.TensorArray``, held as a value: its *flow* is one dense tensor of the elements
stacked along a new first dimension (``[size, *element_shape]``), and every write makes a new
flow (``TensorArrayWrite``, a copy with one row replaced). So a TensorArray passes through
``while_loop`` as a loop variable like any tensor, reads are gathers, ``stack`` is the flow
itself, and gradients come from the ops' own (a write's gradient splits the incoming one between
the earlier flow and the written row).

A size given as a tensor (known when the graph runs) makes an array that grows as elements are
written. Differences from TensorFlow: elements must all have one shape (``concat``/``split`` of ragged
elements are not supported); ``clear_after_read`` and ``colocate_with_first_write_call`` are
accepted and not used (reading an element twice is allowed); writing the element after the last
one (a loop writing 0, 1, 2, ... into an array of dynamic size) appends it in place in amortized
O(element) time, while any other write costs a copy of the whole array (a loop writing into an
array of fixed size costs O(n^2) copies); an element never written reads as zeros.
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
    if value.shape.ndims is None:
        return [(TensorShape(None), flow.dtype)]
    return [(TensorShape([n, *value.shape.as_list()]), flow.dtype)]


@TensorArrayWrite.kernel("cpu", "gpu")
def _write(ctx, flow, index, value):
    xp = ctx.xp
    i = int(index)
    value = xp.asarray(value)
    n = flow.shape[0] if flow.ndim == value.ndim + 1 else int(ctx.attrs.get("size") or 0)
    if i < 0 or (i >= n and not ctx.attrs.get("dynamic_size")):
        raise InvalidArgumentError(
            f"{ctx.op.name}: index {i} is out of range for a TensorArray of size {n}"
        )
    size = max(n, i + 1)
    if flow.ndim == value.ndim + 1 and flow.shape[1:] != value.shape:
        raise InvalidArgumentError(
            f"{ctx.op.name}: element of shape {tuple(value.shape)} into an array of elements of "
            f"shape {tuple(flow.shape[1:])}"
        )
    if i == n and value.dtype == flow.dtype:  # the next element: appended in place (ops/loop.py)
        return append_row(xp, flow if n else None, value)
    out = xp.zeros((size, *value.shape), dtype=value.dtype)
    if flow.ndim == value.ndim + 1 and flow.shape[0]:
        out[: flow.shape[0]] = flow
    out[i] = value
    return out


@TensorArrayWrite.cost
def _write_cost(op, ins, outs):
    b = float(nbytes(outs[0], op.outputs[0].dtype))
    return Cost(0.0, b, b)


@TensorArrayWrite.gradient
def _write_grad(op, g):
    from .ops.manip import gather

    flow, index, value = op.inputs
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
        self._infer_shape = infer_shape
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
        ta.dtype, ta._dynamic_size, ta._infer_shape = self.dtype, self._dynamic_size, True
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
            elem = elem.merge_with(v.shape) if hasattr(elem, "merge_with") else v.shape
        elif v.shape.ndims is not None:
            elem = v.shape
        attrs = {
            "size": None if self._dynamic_size else self._size,
            "dynamic_size": self._dynamic_size,
            "element_shape": self._element_shape,
        }
        out = apply_op("TensorArrayWrite", [self.flow, i, v], attrs, name or "TensorArrayWrite")
        return self._with(out.outputs[0], elem)

    def read(self, index: Any, name: str | None = None) -> Tensor:
        from .ops.manip import gather

        out = gather(self.flow, index, name=name or "TensorArrayRead")
        if self._element_shape is not None and out.shape.ndims is None:
            out.set_shape(self._element_shape)
        return out

    def stack(self, name: str | None = None) -> Tensor:
        """The elements stacked along a new first dimension."""
        from .ops.array import identity

        out = identity(self.flow, name=name or "TensorArrayStack")
        if self._element_shape is not None and out.shape.ndims is None:
            out.set_shape(TensorShape([None, *self._element_shape.as_list()]))
        return out

    def gather(self, indices: Any, element_shape: Any = None, name: str | None = None) -> Tensor:
        from .ops.manip import gather

        return gather(self.flow, indices, name=name or "TensorArrayGather")

    def unstack(self, value: Any, name: str | None = None) -> TensorArray:
        """A TensorArray whose elements are the slices of ``value`` along its first dimension."""
        v = convert_to_tensor(value, dtype=self.dtype)
        if v.shape.ndims == 0:
            raise InvalidArgumentError("TensorArray.unstack: the value needs a first dimension")
        elem = TensorShape(v.shape.dims[1:]) if v.shape.ndims is not None else None
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
        """The elements joined along their first dimension (equal element shapes)."""
        from .ops.manip import concat, unstack

        elem = self._element_shape
        if elem is None or elem.ndims is None or not self._size or self._dynamic_size:
            raise InvalidArgumentError(
                "TensorArray.concat: needs a static size and a known element shape in hetbed"
            )
        return concat(unstack(self.flow, num=self._size), 0, name=name or "TensorArrayConcat")

    def size(self, name: str | None = None) -> Tensor:
        from .ops.array import shape

        if not self._dynamic_size:
            return convert_to_tensor(np.int32(self._size))
        if self._size_tensor is not None:
            return self._size_tensor
        return shape(self.flow, name=name or "TensorArraySize")[0]
