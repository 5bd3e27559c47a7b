"""Switch and Merge, the two primitives of ``tf.cond`` (the paper's conditional, section 3.4).

``Switch(data, pred)`` forwards ``data`` to output 1 when ``pred`` is true, to output 0 when it
is false; the other output is *dead* (``registry.DEAD``). An op with a dead input (data or
control) is dead itself and does not run; ``Merge`` forwards its first live input (and its
index) and is dead only when all its inputs are. So an untaken branch costs nothing, and its
deadness ends at the Merge that joins the branches. The executor implements the propagation
(``run_clocked``); a dead tensor cannot be fetched.
"""

from __future__ import annotations

import numpy as np

from ..errors import InvalidArgumentError
from ..graph import TensorShape
from ..registry import DEAD, Cost, apply_op, defop

Switch = defop("Switch", differentiable=True)


@Switch.shape
def _switch_shape(op):
    data, pred = op.inputs
    if pred.shape.ndims not in (None, 0):
        raise InvalidArgumentError(f"Switch: pred must be a scalar, got shape {pred.shape}")
    if pred.dtype.name != "bool":
        raise InvalidArgumentError(f"Switch: pred must be bool, got {pred.dtype.name}")
    return [(data.shape, data.dtype), (data.shape, data.dtype)]


@Switch.kernel("cpu", "gpu")
def _switch(ctx, data, pred):
    if pred is DEAD:  # (the executor does not run an op with a dead input; kept for clarity)
        return DEAD, DEAD
    taken = bool(pred.item() if hasattr(pred, "item") else pred)
    return (DEAD, data) if taken else (data, DEAD)


@Switch.cost
def _switch_cost(op, ins, outs):
    return Cost()


@Switch.gradient
def _switch_grad(op, g_false, g_true):
    # the gradient flows back from whichever branch ran: Merge picks the live one
    merged = apply_op("Merge", [g_false, g_true], name="cond_grad/Merge")
    return [merged.outputs[0], None]


Merge = defop("Merge", differentiable=True)


def _common_shape(shapes: list) -> TensorShape:
    out = shapes[0]
    for s in shapes[1:]:
        if out.ndims is None or s.ndims is None or out.ndims != s.ndims:
            return TensorShape(None)
        out = TensorShape(
            [a if a == b else None for a, b in zip(out.as_list(), s.as_list(), strict=True)]
        )
    return out


@Merge.shape
def _merge_shape(op):
    from .. import dtypes

    if not op.inputs:
        raise InvalidArgumentError("Merge needs at least one input")
    dts = {t.dtype for t in op.inputs}
    if len(dts) != 1:
        names = ", ".join(sorted(d.name for d in dts))
        raise InvalidArgumentError(f"Merge: inputs must have one dtype, got {names}")
    inv = op.attrs.get("shape_invariant")  # a loop's Merge: the shape every iteration has
    shape = inv if inv is not None else _common_shape([t.shape for t in op.inputs])
    return [
        (shape, op.inputs[0].dtype),
        (TensorShape([]), dtypes.int32),
    ]


def _read_only_index(i: int) -> np.ndarray:
    a = np.array(i, dtype=np.int32)
    a.setflags(write=False)
    return a


_INDEX = tuple(_read_only_index(i) for i in range(4))  # made once: a loop's Merge runs often


@Merge.kernel("cpu", "gpu")
def _merge(ctx, *inputs):
    for i, v in enumerate(inputs):
        if v is not DEAD:
            if ctx.xp is np and i < len(_INDEX):
                return v, _INDEX[i]
            return v, ctx.xp.asarray(i, dtype=np.int32)
    return DEAD, DEAD


@Merge.cost
def _merge_cost(op, ins, outs):
    return Cost()


@Merge.gradient
def _merge_grad(op, g, g_index):
    name = op.attrs.get("cond_pred")
    pred = op.graph.get_tensor_by_name(name) if name else None
    if pred is None:
        # a Merge built by hand (control_flow_ops.merge): the gradient goes to the input that
        # was forwarded, by its index, as TF routes it
        from .array import constant
        from .math import equal

        outs = []
        for i in range(len(op.inputs)):
            hit = equal(op.outputs[1], constant(np.int32(i)))
            outs.append(apply_op("Switch", [g, hit], name="merge_grad/Switch").outputs[1])
        return outs
    # route the gradient into the branch that ran (inputs are (false value, true value))
    sw = apply_op("Switch", [g, pred], name="cond_grad/Switch")
    return [sw.outputs[0], sw.outputs[1]]


def switch(data, pred, dtype=None, name=None):
    """TF1's ``control_flow_ops.switch``: ``(output_false, output_true)``: ``data`` on the side
    ``pred`` picks; the other side is dead, and so is every op downstream of it until a
    ``merge``."""
    from ..registry import convert_to_tensor

    x = convert_to_tensor(data, dtype=dtype)
    p = convert_to_tensor(pred)
    op = apply_op("Switch", [x, p], name=name or "Switch")
    return op.outputs[0], op.outputs[1]


def merge(inputs, name=None):
    """TF1's ``control_flow_ops.merge``: ``(output, value_index)``: the first of ``inputs`` that
    is alive (the one branch of a ``switch`` that ran) and its index."""
    from ..registry import convert_to_tensor

    ins = [convert_to_tensor(t) for t in inputs]
    op = apply_op("Merge", ins, name=name or "Merge")
    return op.outputs[0], op.outputs[1]
