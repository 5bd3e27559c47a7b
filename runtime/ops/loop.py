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

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import TensorShape
from ..registry import Cost, defop
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
