"""The loop primitives of the paper (section 3.4), with Switch and Merge (ops/cond.py): Enter,
Exit, NextIteration and LoopCond, the stacks a loop's gradient reads its forward values from, and
``LoopResult``, the op ``while_loop`` returns its outputs through.

* ``Enter(x)`` makes ``x`` visible in a loop's frame (``frame_name``): once for a loop variable
  (the first iteration's value of its Merge), or in every iteration for a tensor captured from
  outside (``is_constant``).
* A loop variable's ``Merge`` takes its Enter's value in the first iteration and its
  ``NextIteration``'s in later ones. The back edge is not a data edge of the graph (which stays
  acyclic): the Merge names its NextIteration (attr ``next_iteration``) and the executor carries
  the value (runtime/frames.py).
* ``LoopCond(p)`` is the loop's predicate; ``Switch(v, p)`` sends ``v`` into the body while it is
  true, else to ``Exit``, which hands it back to the enclosing frame when the loop ends.
* ``LoopResult(exits, initial values, captured tensors)`` forwards the exits. Its gradient is the
  loop's (control_flow.py ``_loop_grad``): a backward loop over the saved iterations.
* ``StackV2`` makes a stack for one step; ``StackPush``/``StackPop``/``StackSize`` use it.
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import TensorShape
from ..registry import Cost, apply_op, defop, nbytes
from .control import require_bool_scalar


def _no_cost(op, ins, outs):
    return Cost()


def _identity_op(name: str, **kw) -> None:
    d = defop(name, differentiable=False, **kw)

    @d.shape
    def _shape(op):
        x = op.inputs[0]
        return [(x.shape, x.dtype)]

    @d.kernel("cpu", "gpu")
    def _forward(ctx, x):
        return x

    d.cost(_no_cost)


_identity_op("Enter")
_identity_op("Exit")
_identity_op("NextIteration")

LoopCond = defop("LoopCond", differentiable=False, cost=_no_cost)


@LoopCond.shape
def _loop_cond_shape(op):
    require_bool_scalar(op.inputs[0], "while_loop: the condition")
    return [(TensorShape([]), op.inputs[0].dtype)]


@LoopCond.kernel("cpu", "gpu")
def _loop_cond(ctx, p):
    return p


LoopResult = defop("LoopResult", differentiable=True, cost=_no_cost)


@LoopResult.shape
def _loop_result_shape(op):
    n = op.attrs["n"]
    return [(t.shape, t.dtype) for t in op.inputs[:n]]


@LoopResult.kernel("cpu", "gpu")
def _loop_result(ctx, *inputs):
    n = ctx.attrs["n"]
    return inputs[0] if n == 1 else tuple(inputs[:n])


@LoopResult.gradient
def _loop_result_grad(op, *grads):
    from ..control_flow import _loop_grad

    return _loop_grad(op, list(grads))


# ---- stacks ------------------------------------------------------------------------------------


class _Stack:
    """One step's stack: the forward loop pushes, the backward loop pops (last in, first out)."""

    def __init__(self, name: str):
        self.name = name
        self.items: list = []
        self.lock = threading.Lock()


StackV2 = defop("StackV2", stateful=True, differentiable=False, cost=_no_cost)


@StackV2.shape
def _stack_shape(op):
    return [(TensorShape([]), _dt.int32)]  # a handle (the dtype is nominal)


@StackV2.kernel("cpu", "gpu")
def _stack(ctx, *ignored):
    return _Stack(ctx.op.name)  # a new stack in every step


StackPush = defop("StackPush", stateful=True, differentiable=False, cost=_no_cost)


@StackPush.shape
def _push_shape(op):
    x = op.inputs[1]
    return [(x.shape, x.dtype)]


@StackPush.kernel("cpu", "gpu")
def _push(ctx, stack, x):
    with stack.lock:
        stack.items.append(x)
    return x


StackPop = defop("StackPop", stateful=True, differentiable=False, cost=_no_cost)


@StackPop.shape
def _pop_shape(op):
    return [(op.attrs["shape"], op.attrs["elem_type"])]


@StackPop.kernel("cpu", "gpu")
def _pop(ctx, stack, *after):
    with stack.lock:
        if not stack.items:
            raise InvalidArgumentError(f"StackPop {ctx.op.name}: stack {stack.name} is empty")
        return stack.items.pop()


StackSize = defop("StackSize", stateful=True, differentiable=False, cost=_no_cost)


@StackSize.shape
def _size_shape(op):
    return [(TensorShape([]), _dt.int32)]


@StackSize.kernel("cpu", "gpu")
def _size(ctx, stack, *after):
    with stack.lock:
        return np.array(len(stack.items), dtype=np.int32)


# ---- rows appended in a loop (map_fn, scan and dynamic_rnn over sizes known at run time) --------

AppendRow = defop("AppendRow", differentiable=True)


@AppendRow.shape
def _append_row_shape(op):
    acc, row, first = op.inputs
    require_bool_scalar(first, "AppendRow: first")
    if acc.dtype != row.dtype:
        raise InvalidArgumentError(
            f"AppendRow {op.name!r}: rows of {row.dtype.name} onto {acc.dtype.name}"
        )
    if row.shape.ndims is None:
        return [(TensorShape(None), row.dtype)]
    return [(TensorShape([None, *row.shape.as_list()]), row.dtype)]


def _expected_append_shapes(op, in_shapes):
    """Shape-only simulation: the first row replaces the placeholder (of a lower rank)."""
    acc, row = tuple(in_shapes[0]), tuple(in_shapes[1])
    n = acc[0] if len(acc) == len(row) + 1 and acc[1:] == row else 0
    return [(n + 1, *row)]


AppendRow.expected_shapes = _expected_append_shapes
AppendRow.cost(lambda op, ins, outs: Cost(0.0, *(2 * [float(nbytes(ins[1], op.inputs[1].dtype))])))

#: id(buffer) -> rows of it handed out so far, for the buffers AppendRow grows (see _append_row)
_HANDED: dict[int, int] = {}
_handed_lock = threading.Lock()


@AppendRow.kernel("cpu", "gpu")
def _append_row(ctx, acc, row, first):
    xp = ctx.xp
    row = xp.asarray(row)
    if bool(first):
        return append_row(xp, None, row)
    if acc.ndim != row.ndim + 1 or tuple(acc.shape[1:]) != tuple(row.shape):
        raise InvalidArgumentError(
            f"AppendRow {ctx.op.name!r}: a row of shape {tuple(row.shape)} onto rows of "
            f"shape {tuple(acc.shape[1:])}"
        )
    return append_row(xp, acc, row)


def append_row(xp, acc, row):
    """``acc`` (rows of ``row``'s shape, or None for none) with ``row`` appended, in amortized
    O(row) time: rows go into a buffer with spare capacity, and the result is a view of its
    first n + 1 rows. A view handed out earlier never sees a later row (it ends before it), so
    the value semantics of tensors hold; a second append onto the same ``acc`` finds the
    buffer's next row taken and copies instead. (On a GPU: a copy per row.)"""
    n = 0 if acc is None else acc.shape[0]
    if xp is not np:
        out = xp.empty((n + 1, *row.shape), dtype=row.dtype)
        if n:
            out[:n] = acc
        out[n] = row
        return out
    if n:
        base = acc.base
        if base is not None and base.dtype == acc.dtype and base.shape[0] > n:
            with _handed_lock:
                grow = (
                    _HANDED.get(id(base)) == n
                    and base.shape[1:] == acc.shape[1:]
                    and acc.ctypes.data == base.ctypes.data
                    and acc.strides == base.strides
                )
                if grow:
                    _HANDED[id(base)] = n + 1
            if grow:
                base[n] = row
                return base[: n + 1]
    base = np.empty((max(2 * (n + 1), 8), *row.shape), dtype=row.dtype)
    if n:
        base[:n] = acc
    base[n] = row
    with _handed_lock:
        _HANDED[id(base)] = n + 1
    weakref.finalize(base, _HANDED.pop, id(base), None)
    return base[: n + 1]


@AppendRow.gradient
def _append_row_grad(op, g):
    acc, row, first = op.inputs
    d_acc, d_row = apply_op("AppendRowGrad", [g, acc, first], name="AppendRowGrad").outputs
    return [d_acc, d_row, None]


AppendRowGrad = defop("AppendRowGrad", differentiable=False)


@AppendRowGrad.shape
def _append_row_grad_shape(op):
    g, acc, _ = op.inputs
    row = TensorShape(None) if g.shape.ndims is None else TensorShape(g.shape.dims[1:])
    return [(acc.shape, g.dtype), (row, g.dtype)]


def _expected_append_grad_shapes(op, in_shapes):
    g, acc = tuple(in_shapes[0]), tuple(in_shapes[1])
    return [acc, g[1:]]


AppendRowGrad.expected_shapes = _expected_append_grad_shapes
AppendRowGrad.cost(_no_cost)


@AppendRowGrad.kernel("cpu", "gpu")
def _append_row_grad_kernel(ctx, g, acc, first):
    """(gradient of ``acc``, of the row): views of the incoming gradient, no copies."""
    if bool(first):
        return ctx.xp.zeros(acc.shape, dtype=g.dtype), g[0]
    return g[:-1], g[-1]
