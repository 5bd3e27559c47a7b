"""Concrete shapes: run an op's shape rule on the actual input shapes of one step.

A graph built with unknown dimensions (batch None) has partial static shapes; a simulated step
without real values still needs every tensor's concrete shape for its cost and its bytes on the
wire. ``output_shapes(op, in_shapes)`` gives them, falling back to the static shape (unknown
dimensions as 1) where a rule cannot tell (a data-dependent size).
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from .graph import TensorShape
from .registry import _ShapeView


class _ShapedInput:
    """Stands in for an input Tensor: the real op/name/dtype, a concrete shape."""

    __slots__ = ("op", "value_index", "dtype", "shape", "name", "graph", "value")

    def __init__(self, t: Any, shape: tuple, value: Any = None):
        self.value = value
        self.op = t.op
        self.value_index = t.value_index
        self.dtype = t.dtype
        self.shape = TensorShape(shape)
        self.name = t.name
        self.graph = t.graph

    def get_shape(self) -> TensorShape:
        return self.shape


_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def output_shapes(
    op: Any, in_shapes: list[tuple], inputs: list | None = None, values: list | None = None
) -> list[tuple]:
    """Concrete output shapes of ``op`` for ``in_shapes``; ``inputs`` are the tensors feeding it
    (defaults to ``op.inputs``; partitions may rewire inputs to Recv outputs); ``values`` may give
    the run-time value of small integer inputs (shape vectors), None elsewhere."""
    if values is None or not any(v is not None for v in values):
        static = _static_when_same(op, in_shapes, inputs)
        if static is not None:
            return static
    per_op = _cache.get(op)
    if per_op is None:
        per_op = _cache[op] = {}
    vals = values or [None] * len(in_shapes)
    key = (
        tuple(in_shapes),
        tuple(None if v is None else tuple(np.asarray(v).reshape(-1).tolist()) for v in vals),
    )
    hit = per_op.get(key)
    if hit is not None:
        return hit
    statics = [t.shape for t in op.outputs]
    out: list[tuple] = []
    if op.op_def is not None and op.op_def.shape_fn is not None and op.inputs:
        ins = inputs if inputs is not None else op.inputs
        view = _ShapeView(
            op.name,
            op.type,
            [_ShapedInput(t, s, v) for t, s, v in zip(ins, in_shapes, vals)],
            op.attrs,
            op.graph,
        )
        try:
            specs = op.op_def.shape_fn(view)
            statics = [
                TensorShape(sh) if not isinstance(sh, TensorShape) else sh for sh, _ in specs
            ]
        except Exception:  # noqa: BLE001 - fall back to the static shapes
            pass
    expected = getattr(op.op_def, "expected_shapes", None)
    if expected is not None and any(s.dims is None or None in s.dims for s in statics):
        out = [tuple(s) for s in expected(op, list(in_shapes))]  # data-dependent sizes
    else:
        for s in statics:
            if s.dims is None:
                out.append(())
            else:
                out.append(tuple(1 if d is None else int(d) for d in s.dims))
    if len(per_op) > 64:
        per_op.clear()
    per_op[key] = out
    return out


def _static_when_same(op: Any, in_shapes: list[tuple], inputs: list | None) -> list[tuple] | None:
    """The graph's static output shapes of ``op`` when they are fully defined and its inputs
    have exactly their static shapes: its shape rule, given the same input shapes and no
    input values, gives them again (the graph ran it at build time). None otherwise."""
    outs = []
    for t in op.outputs:
        dims = t.shape.dims
        if dims is None or None in dims:
            return None
        outs.append(tuple(dims))
    ins = inputs if inputs is not None else op.inputs
    if len(ins) != len(in_shapes):
        return None
    for t, s in zip(ins, in_shapes):
        dims = t.shape.dims
        if dims is None or tuple(dims) != tuple(s):
            return None
    return outs
