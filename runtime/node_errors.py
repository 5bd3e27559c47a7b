"""How the executor reports a node's failure: an OpError naming the op, its device and the
shapes it ran on (``wrap`` turns Python exceptions from kernels into the matching OpError)."""

from __future__ import annotations

from typing import Any

from .errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    OpError,
    ResourceExhaustedError,
    UnimplementedError,
)


def annotate(e: OpError, node: Any, vals: list) -> OpError:
    """``e`` (raised by ``node``) naming the op, once."""
    if node is not None and e.op is None:
        e.op = node.op
        e.message = f"{e.message}\n  in {node.op.describe()}"
        e.args = (e.message,)
    return e


_WRAP = {
    ValueError: InvalidArgumentError,
    TypeError: InvalidArgumentError,
    IndexError: InvalidArgumentError,
    FloatingPointError: InvalidArgumentError,
    MemoryError: ResourceExhaustedError,
    NotImplementedError: UnimplementedError,
}


def wrap(e: Exception, node: Any, vals: list, inputs: list | None = None) -> OpError:
    """``e`` from ``node`` as an OpError naming the op, its device and its inputs' shapes
    (``inputs``: the values it ran on, when the schedule had already released their slots)."""
    cls = next((v for k, v in _WRAP.items() if isinstance(e, k)), FailedPreconditionError)
    if node is None:
        return cls(str(e))
    if inputs is None or len(inputs) != len(node.ins):
        inputs = [vals[s] for s in node.ins]
    shapes = ", ".join(
        str(getattr(v, "shape", type(v).__name__)) if v is not None else "?" for v in inputs
    )
    msg = (
        f"{type(e).__name__} in {node.op.type} {node.op.name!r} on "
        f"{getattr(node.device, 'name', '?')}: {e}\n  in {node.op.describe()}\n"
        f"  runtime input shapes: [{shapes}]"
    )
    return cls(msg, node.op)
