"""``cond`` (TF1's ``tf.cond``, ``tf.case``) built from Switch and Merge (ops/cond.py).

``cond(pred, true_fn, false_fn)`` calls each function once, building its ops in a *branch
context*: a tensor from outside the branch enters it through ``Switch(t, pred)`` (so it is dead
when the branch does not run), and an op with no input from inside the branch gets a control
input on the branch's pivot (so it is dead too). The branches' results are joined by Merge ops,
which carry the predicate for their gradient: the gradient of a cond is a cond over the
gradients, routed by the same predicate.

``while_loop`` (while_loop.py) and ``map_fn``, ``scan``, ``foldl``, ``foldr`` (functional.py) are
re-exported here; the nested structures they all take are flattened and packed by nest.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import dtypes as _dt
from .errors import InvalidArgumentError
from .graph import Operation, Tensor, get_default_graph
from .nest import _flatten, _pack, _structure
from .registry import apply_op, convert_to_tensor


class _Branch:
    """The context of one branch while its function builds it (see the module docstring)."""

    def __init__(self, graph: Any, pred: Tensor, pivot: Tensor, index: int, outer: Any):
        self.graph = graph
        self.pred = pred
        self.pivot = pivot
        self.index = index  # Switch output of this branch: 1 true, 0 false
        self.outer = outer
        self.ops: set[Operation] = set()
        self._entered: dict[Tensor, Tensor] = {}

    def enter(self, t: Tensor) -> Tensor:
        """``t`` as seen inside the branch."""
        if t.op in self.ops:
            return t
        got = self._entered.get(t)
        if got is None:  # the Switch belongs to the enclosing context
            sw = _in_outer(self, lambda: apply_op("Switch", [t, self.pred], name="Switch"))
            got = self._entered[t] = sw.outputs[self.index]
        return got

    def added(self, op: Operation) -> None:
        if not op.inputs and not any(c in self.ops for c in op.control_inputs):
            op._add_control_input(self.pivot.op)
        ctx = self
        while ctx is not None:
            ctx.ops.add(op)
            ctx = ctx.outer


def _in_outer(ctx: Any, build: Callable) -> Any:
    """``build()`` with the context enclosing ``ctx`` current (where a cond's Switch or a loop's
    Enter for a tensor from outside belongs), then ``ctx`` current again. The control
    dependencies active inside the branch or body are not the Switch's or Enter's: they would
    make the tensor dead (or late) for every use, the gradient's included."""
    local = ctx.graph._local
    local.cond = ctx.outer
    try:
        with ctx.graph.control_dependencies(None):
            return build()
    finally:
        local.cond = ctx


def _build_branch(g: Any, fn: Callable, pred: Tensor, pivot: Tensor, index: int) -> tuple:
    from .ops.array import identity

    local = g._local
    outer = getattr(local, "cond", None)
    ctx = _Branch(g, pred, pivot, index, outer)
    local.cond = ctx
    try:
        result = fn()
        flat = []
        for leaf in _flatten(result):
            if isinstance(leaf, Operation):
                # an op: the branch's result is "it ran" (the pivot, after it)
                with g.control_dependencies([leaf]):
                    flat.append(identity(pivot))
            elif leaf is None:
                raise InvalidArgumentError("cond: a branch function returned None")
            else:
                t = convert_to_tensor(leaf)
                flat.append(identity(t) if t.op not in ctx.ops else t)
    finally:
        local.cond = outer
    return result, flat


def cond(
    pred: Any,
    true_fn: Callable | None = None,
    false_fn: Callable | None = None,
    strict: bool = False,
    name: str | None = None,
    fn1: Callable | None = None,
    fn2: Callable | None = None,
) -> Any:
    """``true_fn()`` if ``pred`` else ``false_fn()``, deciding at run time; only the taken
    branch runs. Both functions must return the same structure of tensors (or ops); the result
    has that structure (a one-element list is unpacked unless ``strict``), of Merge outputs.
    ``fn1``/``fn2`` are TF1's old names for ``true_fn``/``false_fn``."""
    true_fn = true_fn or fn1
    false_fn = false_fn or fn2
    if not callable(true_fn) or not callable(false_fn):
        raise TypeError("cond: true_fn and false_fn must be callables")
    g = pred.graph if isinstance(pred, Tensor) else get_default_graph()
    with g.as_default(), g.name_scope(name or "cond"):
        pred_t = convert_to_tensor(pred)
        if pred_t.dtype.name != "bool" or pred_t.shape.ndims not in (None, 0):
            raise InvalidArgumentError(
                f"cond: pred must be a scalar bool tensor, got {pred_t.dtype.name} of shape "
                f"{pred_t.shape} ({pred_t.name})"
            )
        from .ops.array import identity

        sw = apply_op("Switch", [pred_t, pred_t], name="Switch")
        pivot_f = identity(sw.outputs[0], name="switch_f")
        pivot_t = identity(sw.outputs[1], name="switch_t")
        pred_id = identity(pred_t, name="pred_id")
        res_t, flat_t = _build_branch(g, true_fn, pred_id, pivot_t, 1)
        res_f, flat_f = _build_branch(g, false_fn, pred_id, pivot_f, 0)
        if _structure(res_t) != _structure(res_f) or len(flat_t) != len(flat_f):
            raise InvalidArgumentError(
                "cond: true_fn and false_fn must return the same structure, got "
                f"{res_t!r} and {res_f!r}"
            )
        merged = []
        for t, f in zip(flat_t, flat_f, strict=True):
            if t.dtype != f.dtype:
                raise InvalidArgumentError(
                    f"cond: the branches return {t.dtype.name} ({t.name}) and {f.dtype.name} "
                    f"({f.name}) at the same place"
                )
            m = apply_op("Merge", [f, t], {"cond_pred": pred_id.name}, name="Merge")
            merged.append(m.outputs[0])
    ops_only = [isinstance(leaf, Operation) for leaf in _flatten(res_t)]
    merged = [m.op if is_op else m for m, is_op in zip(merged, ops_only, strict=True)]
    out = _pack(res_t, merged)
    if not strict and isinstance(out, (list, tuple)) and len(out) == 1:
        return out[0]
    return out


def case(
    pred_fn_pairs: Any,
    default: Callable | None = None,
    exclusive: bool = False,
    strict: bool = False,
    name: str = "case",
) -> Any:
    """TF1's ``tf.case``: the function of the first true predicate (in order), else
    ``default`` (else the last pair's function), as nested conds. With ``exclusive=True`` every
    predicate is evaluated and the step fails (InvalidArgumentError naming the predicates and
    their values) when more than one is true."""
    pairs = list(pred_fn_pairs.items() if isinstance(pred_fn_pairs, dict) else pred_fn_pairs)
    if exclusive and len(pairs) > 1:
        return _exclusive_case(pairs, default, strict, name)
    if default is None:
        if not pairs:
            raise InvalidArgumentError("case: no predicates and no default")
        *pairs, (_, default) = pairs
    if not pairs:
        return default()
    g = get_default_graph()
    with g.name_scope(name):

        def chain(i: int) -> Any:
            if i == len(pairs):
                return default()
            p, fn = pairs[i]
            return cond(p, fn, lambda: chain(i + 1), strict=strict)

        return chain(0)


def _exclusive_case(pairs: list, default: Any, strict: bool, name: str) -> Any:
    """``case`` whose result waits for an Assert that at most one predicate is true."""
    from .ops.array import cast, identity
    from .ops.control import Assert
    from .ops.manip import stack
    from .ops.math import add_n, less_equal

    g = get_default_graph()
    with g.name_scope(f"{name}_exclusive"):
        preds = [convert_to_tensor(p) for p, _ in pairs]
        count = add_n([cast(p, _dt.int32) for p in preds])
        check = Assert(
            less_equal(count, convert_to_tensor(np.int32(1))),
            [
                "More than one condition evaluated as True but exclusive=True. Conditions: ("
                + ", ".join(p.name for p in preds)
                + "), Values:",
                stack(preds),
            ],
            summarize=len(preds),
        )
    out = case(pairs, default, False, strict, name)
    if isinstance(out, Operation):
        from .ops.control import group

        return group(out, check)
    with g.control_dependencies([check]):
        flat = [identity(t) for t in _flatten(out)]
    return _pack(out, flat) if isinstance(out, (list, tuple, dict)) else flat[0]


# while_loop and its gradient (while_loop.py) and map_fn, scan and the folds (functional.py),
# re-exported where callers import them; imported last, as while_loop.py's contexts use _in_outer.
from .functional import foldl, foldr, map_fn, scan  # noqa: E402
from .while_loop import _loop_grad, while_loop  # noqa: E402, F401  (ops/loop.py: LoopResult)

__all__ = [
    "case",
    "cond",
    "foldl",
    "foldr",
    "map_fn",
    "scan",
    "while_loop",
]
