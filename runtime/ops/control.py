"""Control ops: no_op, group, tuple (ordering without data)."""

from __future__ import annotations

from typing import Any

from ..graph import Operation, Tensor, get_default_graph
from ..registry import Cost, apply_op, defop

NoOp = defop("NoOp", differentiable=False)


@NoOp.shape
def _noop_shape(op):
    return []


@NoOp.kernel("cpu", "gpu")
def _noop(ctx):
    return None


@NoOp.cost
def _noop_cost(op, ins, outs):
    return Cost()


def no_op(name: str | None = None) -> Operation:
    return apply_op("NoOp", [], name=name or "NoOp")


def _as_op(x: Any) -> Operation:
    if isinstance(x, Operation):
        return x
    if isinstance(x, Tensor):
        return x.op
    el = getattr(x, "_as_graph_element", None)
    if el is not None:
        return el().op
    if isinstance(x, (list, tuple)):
        raise TypeError("group() takes ops as separate arguments: use group(*ops)")
    raise TypeError(f"cannot group {x!r}")


def group(*inputs: Any, name: str | None = None) -> Operation:
    """An op that finishes when all ``inputs`` have run (a NoOp with control inputs)."""
    ops = [_as_op(x) for x in inputs]
    g = ops[0].graph if ops else get_default_graph()
    with g.as_default(), g.control_dependencies(ops):
        return no_op(name=name or "group_deps")


def tuple_(tensors: list, name: str | None = None, control_inputs: list | None = None) -> list:
    """Identities of ``tensors`` that are available only after all of them are computed."""
    from .array import identity

    ts = [t for t in tensors if t is not None]
    g = get_default_graph()
    with g.name_scope(name or "tuple"):
        gate = group(*(ts + list(control_inputs or [])))
        with g.control_dependencies([gate]):
            return [identity(t) if t is not None else None for t in tensors]
