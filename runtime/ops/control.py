"""Control ops: no_op, group, tuple (ordering without data), and Assert with TF1's assert_*
helpers (a step fails with InvalidArgumentError when a checked condition is false)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
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
    raise TypeError(f"cannot group {x!r}")


def _flat_inputs(xs: Any) -> list:
    """TF flattens group's inputs: ``group(a, [b, c])`` groups a, b and c (None is skipped)."""
    out: list = []
    for x in xs:
        if isinstance(x, (list, tuple)):
            out.extend(_flat_inputs(x))
        elif x is not None:
            out.append(x)
    return out


def group(*inputs: Any, name: str | None = None) -> Operation:
    """An op that finishes when all ``inputs`` have run (a NoOp with control inputs).

    As TF's: inputs on one device give one NoOp on that device; inputs on several devices give
    a NoOp per device (on it, after its inputs) and the returned NoOp after those, in the
    current device scope. A step then sends one control message per device to the returned op,
    not one per input (an optimizer's updates on a PS task, grouped on a worker: one message).
    """
    ops = [_as_op(x) for x in _flat_inputs(inputs)]
    g = ops[0].graph if ops else get_default_graph()
    name = name or "group_deps"
    by_device: dict[str, list[Operation]] = {}
    for op in ops:
        by_device.setdefault(op.device, []).append(op)
    with g.as_default():
        if len(by_device) == 1:
            ((dev, deps),) = by_device.items()
            return _no_op_after(g, dev, deps, name)
        per_device = [_no_op_after(g, d, by_device[d], "NoOp") for d in sorted(by_device)]
        with g.control_dependencies(per_device):
            return no_op(name=name)


def _no_op_after(g: Any, dev: str, deps: list[Operation], name: str) -> Operation:
    """A NoOp named ``name`` on ``dev`` (an empty device: the current scope's) after ``deps``."""
    with g.control_dependencies(deps):
        if not dev:
            return no_op(name=name)
        with g.device(dev):
            return no_op(name=name)


def tuple_(tensors: list, name: str | None = None, control_inputs: list | None = None) -> list:
    """Identities of ``tensors`` that are available only after all of them are computed."""
    from .array import identity

    ts = [t for t in tensors if t is not None]
    g = get_default_graph()
    with g.name_scope(name or "tuple"):
        gate = group(*(ts + list(control_inputs or [])))
        with g.control_dependencies([gate]):
            return [identity(t) if t is not None else None for t in tensors]


# ---- Assert ------------------------------------------------------------------------------------

AssertOp = defop("Assert", stateful=True, differentiable=False)


def require_bool_scalar(t: Tensor, what: str) -> None:
    """InvalidArgumentError naming ``what`` unless ``t`` is a bool scalar (or of unknown rank)."""
    if t.dtype.name != "bool" or t.shape.ndims not in (None, 0):
        raise InvalidArgumentError(
            f"{what} must be a scalar bool, got {t.dtype.name} of shape {t.shape} ({t.name})"
        )


@AssertOp.shape
def _assert_shape(op):
    require_bool_scalar(op.inputs[0], f"Assert {op.name!r}: the condition")
    return []


@AssertOp.kernel("cpu")
def _assert(ctx, cond, *data):
    if bool(np.asarray(cond)):
        return None
    n = ctx.attrs["summarize"]
    parts = []
    for kind, v in ctx.attrs["template"]:
        if kind == "s":
            parts.append(f"[{v}]")
        else:
            a = np.asarray(data[v])
            flat = a.reshape(-1)
            shown = " ".join(str(x) for x in flat[:n])
            more = "..." if flat.size > n else ""
            parts.append(f"[{shown}{more}]" if a.ndim else f"[{a.item()}]")
    raise InvalidArgumentError(f"assertion failed: {' '.join(parts)}")


@AssertOp.cost
def _assert_cost(op, ins, outs):
    return Cost()


def Assert(  # noqa: N802 - TF's name
    condition: Any, data: Any, summarize: int | None = None, name: str | None = None
) -> Operation:
    """TF's ``tf.Assert``: an op that fails the step with InvalidArgumentError ("assertion
    failed: [...] [...]") when ``condition`` (a bool scalar) is false, printing ``data``: Python
    strings as they are, tensors by their first ``summarize`` (default 3) values. Run it by
    fetching it or through a control dependency."""
    from ..registry import convert_to_tensor

    items = list(data) if isinstance(data, (list, tuple)) else [data]
    tensors, template = [], []
    for item in items:
        if isinstance(item, (str, bytes)):
            template.append(("s", item.decode() if isinstance(item, bytes) else item))
        else:
            template.append(("t", len(tensors)))
            tensors.append(convert_to_tensor(item))
    return apply_op(
        "Assert",
        [convert_to_tensor(condition), *tensors],
        {"summarize": 3 if summarize is None else int(summarize), "template": tuple(template)},
        name=name or "Assert",
    )


def _compare_assert(
    compare: Any, symbol: str, x: Any, y: Any, data: Any, summarize: Any, message: Any, name: str
) -> Operation:
    from ..registry import convert_to_tensor
    from .math import reduce_all

    g = get_default_graph()
    with g.name_scope(name):
        x = convert_to_tensor(x)
        y = convert_to_tensor(y, dtype=x.dtype)
        if data is None:
            data = [
                f"Condition x {symbol} y did not hold element-wise:",
                f"x ({x.name}) = ",
                x,
                f"y ({y.name}) = ",
                y,
            ]
        if message is not None:
            data = [message, *data]
        return Assert(reduce_all(compare(x, y)), data, summarize)


def _comparisons() -> dict:
    from .math import equal, greater, greater_equal, less, less_equal, not_equal

    return {
        "assert_equal": (equal, "=="),
        "assert_none_equal": (not_equal, "!="),
        "assert_less": (less, "<"),
        "assert_less_equal": (less_equal, "<="),
        "assert_greater": (greater, ">"),
        "assert_greater_equal": (greater_equal, ">="),
    }


def _make_binary(fn_name: str) -> Any:
    def assert_fn(x, y, data=None, summarize=None, message=None, name=None):
        compare, symbol = _comparisons()[fn_name]
        return _compare_assert(compare, symbol, x, y, data, summarize, message, name or fn_name)

    assert_fn.__name__ = fn_name
    assert_fn.__doc__ = f"TF1's ``tf.{fn_name}``: Assert that the comparison holds element-wise."
    return assert_fn


def _make_unary(fn_name: str, binary: str, zero_side: str) -> Any:
    def assert_fn(x, data=None, summarize=None, message=None, name=None):
        from ..registry import convert_to_tensor

        x = convert_to_tensor(x)
        zero = np.zeros((), x.dtype.np)
        compare, symbol = _comparisons()[binary]
        return _compare_assert(compare, symbol, x, zero, data, summarize, message, name or fn_name)

    assert_fn.__name__ = fn_name
    assert_fn.__doc__ = f"TF1's ``tf.{fn_name}``: Assert that every element is {zero_side}."
    return assert_fn


assert_equal = _make_binary("assert_equal")
assert_none_equal = _make_binary("assert_none_equal")
assert_less = _make_binary("assert_less")
assert_less_equal = _make_binary("assert_less_equal")
assert_greater = _make_binary("assert_greater")
assert_greater_equal = _make_binary("assert_greater_equal")
assert_positive = _make_unary("assert_positive", "assert_greater", "> 0")
assert_negative = _make_unary("assert_negative", "assert_less", "< 0")
assert_non_negative = _make_unary("assert_non_negative", "assert_greater_equal", ">= 0")
assert_non_positive = _make_unary("assert_non_positive", "assert_less_equal", "<= 0")
