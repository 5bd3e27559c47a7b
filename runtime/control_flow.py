"""``cond`` (TF1's ``tf.cond``, ``tf.case``) built from Switch and Merge (ops/cond.py).

``cond(pred, true_fn, false_fn)`` calls each function once, building its ops in a *branch
context*: a tensor from outside the branch enters it through ``Switch(t, pred)`` (so it is dead
when the branch does not run), and an op with no input from inside the branch gets a control
input on the branch's pivot (so it is dead too). The branches' results are joined by Merge ops,
which carry the predicate for their gradient: the gradient of a cond is a cond over the
gradients, routed by the same predicate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .errors import InvalidArgumentError
from .graph import Operation, Tensor, get_default_graph
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
        if got is None:
            local = self.graph._local
            local.cond = self.outer  # the Switch belongs to the enclosing context
            try:
                sw = apply_op("Switch", [t, self.pred], name="Switch")
            finally:
                local.cond = self
            got = self._entered[t] = sw.outputs[self.index]
        return got

    def added(self, op: Operation) -> None:
        if not op.inputs and not any(c in self.ops for c in op.control_inputs):
            op._add_control_input(self.pivot.op)
        ctx = self
        while ctx is not None:
            ctx.ops.add(op)
            ctx = ctx.outer


def _flatten(x: Any) -> list:
    if isinstance(x, (list, tuple)):
        return [leaf for item in x for leaf in _flatten(item)]
    if isinstance(x, dict):
        return [leaf for k in sorted(x) for leaf in _flatten(x[k])]
    return [x]


def _pack(structure: Any, flat: list) -> Any:
    it = iter(flat)

    def build(x: Any) -> Any:
        if isinstance(x, (list, tuple)):
            items = [build(i) for i in x]
            return type(x)(*items) if hasattr(x, "_fields") else type(x)(items)
        if isinstance(x, dict):
            return {k: build(x[k]) for k in sorted(x)}
        return next(it)

    return build(structure)


def _structure(x: Any) -> Any:
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_structure(i) for i in x])
    if isinstance(x, dict):
        return ("dict", sorted(x), [_structure(x[k]) for k in sorted(x)])
    return None


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
    ``default`` (else the last pair's function), as nested conds."""
    if exclusive:
        raise InvalidArgumentError("case(exclusive=True) is not supported yet; use exclusive=False")
    pairs = list(pred_fn_pairs.items() if isinstance(pred_fn_pairs, dict) else pred_fn_pairs)
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


def _leading(elems: Any, what: str) -> tuple[list, int, bool]:
    """(flat tensors, their common static leading size, whether ``elems`` was a structure)."""
    structured = isinstance(elems, (list, tuple, dict))
    flat = [convert_to_tensor(e) for e in _flatten(elems)]
    sizes = {t.shape.dims[0] if t.shape.ndims else None for t in flat}
    if len(sizes) != 1 or None in sizes:
        names = ", ".join(f"{t.name} {t.shape}" for t in flat)
        raise InvalidArgumentError(
            f"{what}: the elements' first dimension must be one size known when the graph is "
            f"built (hetbed unrolls it: it has no while_loop yet); got {names}"
        )
    return flat, int(sizes.pop()), structured


def _stacked(seq: list) -> Any:
    """Structures of tensors, one per slice, as one structure of stacked tensors."""
    from .ops.manip import stack

    leaves = [_flatten(r) for r in seq]
    stacked = [stack([leaf[k] for leaf in leaves]) for k in range(len(leaves[0]))]
    return _pack(seq[0], stacked) if isinstance(seq[0], (list, tuple, dict)) else stacked[0]


def _slices(elems: Any, flat: list, i: int, structured: bool) -> Any:
    items = [t[i] for t in flat]
    return _pack(elems, items) if structured else items[0]


def map_fn(
    fn: Callable,
    elems: Any,
    dtype: Any = None,
    parallel_iterations: Any = None,
    back_prop: bool = True,
    swap_memory: bool = False,
    infer_shape: bool = True,
    name: str | None = None,
) -> Any:
    """TF1's ``tf.map_fn`` for elements whose first dimension is known when the graph is built:
    ``fn`` applied to each slice along it (a structure of tensors in, a structure out), the
    results stacked. Unrolled: one copy of ``fn``'s ops per slice."""

    g = get_default_graph()
    with g.name_scope(name or "map"):
        flat, n, structured = _leading(elems, "map_fn")
        if n == 0:
            raise InvalidArgumentError("map_fn: no elements (a first dimension of 0)")
        return _stacked([fn(_slices(elems, flat, i, structured)) for i in range(n)])


def scan(
    fn: Callable,
    elems: Any,
    initializer: Any = None,
    parallel_iterations: Any = None,
    back_prop: bool = True,
    swap_memory: bool = False,
    infer_shape: bool = True,
    reverse: bool = False,
    name: str | None = None,
) -> Any:
    """TF1's ``tf.scan`` for a first dimension known when the graph is built: ``acc = fn(acc,
    x)`` over the slices (from the last with ``reverse``), the accumulators stacked; without
    ``initializer`` the first slice is the first accumulator. Unrolled."""
    g = get_default_graph()
    with g.name_scope(name or "scan"):
        flat, n, structured = _leading(elems, "scan")
        order = list(range(n))[::-1] if reverse else list(range(n))
        if initializer is None:
            if not order:
                raise InvalidArgumentError("scan: no elements and no initializer")
            acc = _slices(elems, flat, order[0], structured)
            results = {order[0]: acc}
            order = order[1:]
        else:
            acc, results = initializer, {}
        for i in order:
            acc = fn(acc, _slices(elems, flat, i, structured))
            results[i] = acc
        return _stacked([results[i] for i in sorted(results)])


def foldl(fn: Callable, elems: Any, initializer: Any = None, name: str | None = None, **kw: Any):
    """TF1's ``tf.foldl`` (first dimension known when the graph is built; unrolled)."""
    return _fold(fn, elems, initializer, False, name or "foldl")


def foldr(fn: Callable, elems: Any, initializer: Any = None, name: str | None = None, **kw: Any):
    """TF1's ``tf.foldr``: ``foldl`` from the last slice."""
    return _fold(fn, elems, initializer, True, name or "foldr")


def _fold(fn: Callable, elems: Any, initializer: Any, reverse: bool, name: str) -> Any:
    g = get_default_graph()
    with g.name_scope(name):
        flat, n, structured = _leading(elems, name)
        order = list(range(n))[::-1] if reverse else list(range(n))
        if initializer is None:
            if not order:
                raise InvalidArgumentError(f"{name}: no elements and no initializer")
            acc, order = _slices(elems, flat, order[0], structured), order[1:]
        else:
            acc = initializer
        for i in order:
            acc = fn(acc, _slices(elems, flat, i, structured))
        return acc
