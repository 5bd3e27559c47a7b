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

The ops live in runtime/ops/tensor_array.py (imported here, which registers them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import dtypes as _dt
from .errors import InvalidArgumentError
from .graph import Tensor, TensorShape, get_default_graph
from .ops import tensor_array as _ops  # noqa: F401  (registers the TensorArray ops)
from .registry import apply, apply_op, convert_to_tensor

__all__ = ["TensorArray"]


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
