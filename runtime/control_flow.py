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

import numpy as np

from . import dtypes as _dt
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


def _leading(elems: Any, what: str) -> tuple[list, int, bool]:
    """(flat tensors, their common static leading size, whether ``elems`` was a structure)."""
    structured = isinstance(elems, (list, tuple, dict))
    flat = [convert_to_tensor(e) for e in _flatten(elems)]
    if any(t.shape.ndims == 0 for t in flat):
        names = ", ".join(f"{t.name} {t.shape}" for t in flat)
        raise InvalidArgumentError(f"{what}: the elements need a first dimension; got {names}")
    sizes = {t.shape.dims[0] if t.shape.ndims else None for t in flat}
    if len(sizes) != 1 or None in sizes:
        return flat, None, structured  # known when the graph runs: a while_loop goes over it
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
        if n is None:
            return _map_loop(fn, elems, flat, structured, dtype, parallel_iterations)
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
        if n is None:
            return _scan_loop(
                fn, elems, flat, structured, initializer, reverse, parallel_iterations
            )
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
        if n is None:
            return _fold_loop(fn, elems, flat, structured, initializer, reverse)
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


# ---- while_loop ----------------------------------------------------------------------------------


class _Loop:
    """The context of a while loop while its condition and body are built: a tensor from
    outside enters through a constant ``Enter`` (visible in every iteration), and an op with no
    input from inside gets a control input on the pivot (so that it runs in every iteration,
    and is dead once the loop is done)."""

    def __init__(self, graph: Any, frame: str, outer: Any):
        self.graph = graph
        self.frame = frame
        self.outer = outer
        self.ops: set[Operation] = set()
        self._entered: dict[Tensor, Tensor] = {}
        self.pivot: Tensor | None = None

    def enter(self, t: Tensor) -> Tensor:
        if t.op in self.ops:
            return t
        got = self._entered.get(t)
        if got is None:  # the Enter runs in the enclosing frame
            attrs = {"frame_name": self.frame, "is_constant": True}
            e = _in_outer(self, lambda: apply_op("Enter", [t], attrs))
            self.ops.add(e)
            got = self._entered[t] = e.outputs[0]
        return got

    def added(self, op: Operation) -> None:
        if op.type == "Const" and not op.control_inputs:
            # a constant is made once, outside, and enters the loop as a loop invariant
            if self.outer is not None:
                self.outer.added(op)
            return
        internal = any(
            t.op in self.ops and not (t.op.type == "Enter" and t.op.attrs.get("is_constant"))
            for t in op.inputs
        ) or any(c in self.ops for c in op.control_inputs)
        if self.pivot is not None and not internal:
            # it depends on loop invariants only: it runs (or is dead) with each iteration
            op._add_control_input(self.pivot.op)
        ctx = self
        while ctx is not None:
            ctx.ops.add(op)
            ctx = ctx.outer


class _LoopInfo:
    """What a while loop's gradient needs of its forward loop (kept with the graph)."""

    def __init__(self, **kw: Any):
        self.__dict__.update(kw)
        self.stacks: list | None = None  # the per-iteration values saved for the gradient


_LOOPS: dict[tuple[int, str], _LoopInfo] = {}


def while_loop(
    cond: Callable,
    body: Callable,
    loop_vars: Any,
    shape_invariants: Any = None,
    parallel_iterations: int = 10,
    back_prop: bool = True,
    swap_memory: bool = False,
    name: str | None = None,
    maximum_iterations: Any = None,
    return_same_structure: bool = False,
) -> Any:
    """TF1's ``tf.while_loop``: ``while cond(*vars): vars = body(*vars)``, decided at run time,
    as the paper builds it (Enter, Merge, Switch, LoopCond, NextIteration, Exit; one frame per
    loop, runtime/frames.py). ``loop_vars`` is a (nested) structure of tensors; ``body`` returns
    the same structure. A variable whose shape changes between iterations needs a
    ``shape_invariants`` entry that allows it. ``maximum_iterations`` stops the loop after that
    many iterations. Differentiable (``back_prop``): the gradient is a backward loop over the
    saved iterations. Up to ``parallel_iterations`` iterations run at once where dependencies
    allow (runtime/frames.py says when that can matter); ``swap_memory`` is accepted."""
    if not callable(cond) or not callable(body):
        raise TypeError("while_loop: cond and body must be callables")
    if (
        isinstance(parallel_iterations, bool)
        or not isinstance(parallel_iterations, (int, np.integer))
        or parallel_iterations < 1
    ):
        raise ValueError(
            f"while_loop: parallel_iterations must be a positive integer, got {parallel_iterations!r}"
        )
    if isinstance(loop_vars, (list, tuple)) and not loop_vars:
        raise InvalidArgumentError("while_loop: no loop variables")
    g = get_default_graph()
    local = g._local
    outer = getattr(local, "cond", None)
    with g.name_scope(name or "while") as scope:
        from .graph import TensorShape
        from .tensor_array import TensorArray

        leaves = _flatten(loop_vars)
        arrays = {k: v for k, v in enumerate(leaves) if isinstance(v, TensorArray)}
        flat_init = [v.flow if k in arrays else convert_to_tensor(v) for k, v in enumerate(leaves)]
        invariants = _invariants(loop_vars, shape_invariants, flat_init)
        for k in arrays:  # a TensorArray's flow grows and gets its element shape as it goes
            invariants[k] = TensorShape(None)
        counted = maximum_iterations is not None
        if counted:
            from .ops.array import cast

            limit = convert_to_tensor(maximum_iterations)
            if limit.dtype.name != "int32":
                limit = cast(limit, "int32")
            flat_init = [convert_to_tensor(np.int32(0)), *flat_init]
            invariants = [None, *invariants]
        frame = scope.rstrip("/")
        ctx = _Loop(g, frame, outer)
        enters = [
            apply_op(
                "Enter",
                [v],
                {
                    "frame_name": frame,
                    "is_constant": False,
                    "parallel_iterations": int(parallel_iterations),
                },
                name="Enter",
            )
            for v in flat_init
        ]
        ctx.ops.update(enters)
        local.cond = ctx
        try:
            merges = [
                apply_op(
                    "Merge",
                    [e.outputs[0]],
                    {"loop_frame": frame, "shape_invariant": inv, "pivot": k == 0},
                    name="Merge",
                )
                for k, (e, inv) in enumerate(zip(enters, invariants))
            ]
            cur = [m.outputs[0] for m in merges]
            ctx.pivot = cur[0]
            user = cur[1:] if counted else cur
            p = cond(*_as_args(loop_vars, _as_arrays(user, arrays)))
            p = convert_to_tensor(p)
            if counted:
                from .ops.math import less, logical_and

                p = logical_and(less(cur[0], ctx.enter(limit)), p)
            lc = apply_op("LoopCond", [p], name="LoopCond").outputs[0]
            switches = [apply_op("Switch", [m, lc], name="Switch") for m in cur]
            from .ops.array import identity

            # the first variable's value inside the body is also the pivot (an op that is dead
            # once the loop is over); the others are their Switch's outputs as they are
            inside = [identity(switches[0].outputs[1], name="Identity")]
            inside += [sw.outputs[1] for sw in switches[1:]]
            ctx.pivot = inside[0]
            exits = [
                apply_op("Exit", [sw.outputs[0]], {"frame_name": frame}, name="Exit")
                for sw in switches
            ]
            user_in = inside[1:] if counted else inside
            res = body(*_as_args(loop_vars, _as_arrays(user_in, arrays)))
            if not isinstance(res, (list, tuple)) or (
                not isinstance(loop_vars, (list, tuple)) and not isinstance(res, dict)
            ):
                res = [res] if not isinstance(loop_vars, (list, tuple)) else res
            flat_res = [
                ctx.enter(r.flow if isinstance(r, TensorArray) else convert_to_tensor(r))
                for r in _flatten(res)
            ]
            for k, r in enumerate(_flatten(res)):  # the element shape the body's writes found
                if k in arrays and isinstance(r, TensorArray) and r._infer_shape:
                    arrays[k] = arrays[k]._with(arrays[k].flow, r._element_shape)
            if counted:
                from .ops.math import add

                flat_res = [add(inside[0], ctx.enter(convert_to_tensor(np.int32(1)))), *flat_res]
            if len(flat_res) != len(flat_init):
                raise InvalidArgumentError(
                    f"while_loop: body returned {len(flat_res) - counted} values for "
                    f"{len(flat_init) - counted} loop variables"
                )
            for k, (r, v, inv) in enumerate(zip(flat_res, flat_init, invariants)):
                if r.dtype != v.dtype:
                    raise InvalidArgumentError(
                        f"while_loop: loop variable {k - counted} enters as {v.dtype.name} and "
                        f"the body returns {r.dtype.name} ({r.name})"
                    )
                want = inv if inv is not None else v.shape
                if not want.is_compatible_with(r.shape) or (
                    inv is None
                    and r.shape.ndims is not None
                    and r.shape != v.shape
                    and not _more_general(v.shape, r.shape)
                ):
                    raise InvalidArgumentError(
                        f"while_loop: loop variable {k - counted} ({v.name}) has shape "
                        f"{v.shape} before the loop and {r.shape} after one iteration; to "
                        "let the shape vary across iterations, pass shape_invariants"
                    )
            nexts = []
            for m, r in zip(merges, flat_res):
                n = apply_op(
                    "NextIteration",
                    [r],
                    {"merge": m.name, "frame_name": frame},
                    name="NextIteration",
                )
                m.attrs["next_iteration"] = n.name
                nexts.append(n)
        finally:
            local.cond = outer
        outs = [e.outputs[0] for e in exits]
        captured = list(ctx._entered)
        if back_prop and any(t.dtype.is_floating for t in flat_init):
            lr = apply_op(
                "LoopResult",
                [*outs, *flat_init, *captured],
                {"n": len(outs), "loop": frame},
                name="LoopResult",
            )
            outs = list(lr.outputs)
            _LOOPS[(id(g), frame)] = _LoopInfo(
                graph=g,
                ctx=ctx,
                frame=frame,
                body=body,
                cond=cond,
                loop_vars=loop_vars,
                counted=counted,
                inside=inside,
                nexts=nexts,
                init=flat_init,
                captured=captured,
                arrays=arrays,
                exits=[e.outputs[0] for e in exits],
                parallel=int(parallel_iterations),
            )
    user_outs = _as_arrays(outs[1:] if counted else outs, arrays)
    if isinstance(loop_vars, (list, tuple, dict)):
        packed = _pack(loop_vars, user_outs)
        if not return_same_structure and isinstance(packed, (list, tuple)) and len(packed) == 1:
            return packed[0]
        return packed
    return user_outs[0]


def _as_arrays(flat: list, arrays: dict) -> list:
    """``flat`` with the flows of TensorArray loop variables wrapped back into TensorArrays."""
    if not arrays:
        return flat
    return [arrays[k]._with(t) if k in arrays else t for k, t in enumerate(flat)]


def _as_args(loop_vars: Any, flat: list) -> list:
    """The arguments cond and body are called with: one per element of a list or tuple of
    loop variables (each packed as given), else the one structure."""
    packed = _pack(loop_vars, flat)
    if isinstance(loop_vars, (list, tuple)) and not hasattr(loop_vars, "_fields"):
        return list(packed)
    return [packed]


def _more_general(a: Any, b: Any) -> bool:
    return a.is_compatible_with(b)


def _invariants(loop_vars: Any, shape_invariants: Any, flat: list) -> list:
    from .graph import TensorShape

    if shape_invariants is None:
        return [None] * len(flat)
    inv = (
        _flatten(shape_invariants)
        if isinstance(shape_invariants, (list, tuple, dict))
        else [shape_invariants]
    )
    # a TensorShape given as a list of dims flattens into ints: take them per loop variable
    if isinstance(shape_invariants, (list, tuple)) and len(shape_invariants) == len(flat):
        inv = list(shape_invariants)
    if len(inv) != len(flat):
        raise InvalidArgumentError(
            f"while_loop: {len(inv)} shape invariants for {len(flat)} loop variables"
        )
    out = []
    for s, v in zip(inv, flat):
        s = TensorShape(s) if s is not None else None
        if s is not None and not s.is_compatible_with(v.shape):
            raise InvalidArgumentError(
                f"while_loop: the shape invariant {s} does not allow {v.name}'s shape {v.shape}"
            )
        out.append(s)
    return out


def _loop_grad(op: Operation, grads: list) -> list:
    """The gradient of a while loop (the LoopResult ``op``): a backward loop that runs once per
    forward iteration, last first. The forward loop saves its variables' values at the start of
    each iteration on stacks (added to it here, the first time); each backward iteration pops
    them, rebuilds the body from them and backpropagates ``grads`` through it, summing the
    gradients of the tensors the body captured. Returns the gradients of LoopResult's inputs:
    none for the exits (the gradient goes around them), then the initial values', then the
    captured tensors'."""
    from .gradients import gradients, to_dense
    from .ops.math import add_n, greater, zeros_like

    g = op.graph
    info = _LOOPS.get((id(g), op.attrs["loop"]))
    if info is None:
        raise LookupError(f"no gradient for {op.name}: its loop was built in another process")
    n = op.attrs["n"]
    local = g._local
    here = getattr(local, "cond", None)
    if info.stacks is None:
        _save_iterations(g, info)
    counted = info.counted
    flat_init = info.init
    floats = [k for k, v in enumerate(flat_init) if v.dtype.is_floating]
    from .ops.array import identity

    # the backward loop starts once the forward loop is over (every iteration saved): its
    # initial values wait for the forward loop's exits
    with g.control_dependencies([e.op for e in info.exits]):
        gys = [
            identity(grads[k]) if grads[k] is not None else zeros_like(info.exits[k])
            for k in floats
        ]
        caps = [c for c in info.captured if c.dtype.is_floating]
        accs = [zeros_like(c) for c in caps]
    handles = info.stacks

    def b_cond(*state):
        size = apply_op("StackSize", [handles[0], state[0]], name="StackSize").outputs[0]
        return greater(size, convert_to_tensor(np.int32(0)))

    def b_body(*state):
        dys, acc = list(state[: len(floats)]), list(state[len(floats) :])
        ctx = local.cond
        popped = [
            apply_op(
                "StackPop",
                [h, state[0]],
                {"elem_type": v.dtype, "shape": v.shape},  # the shape inside the loop
                name="StackPop",
            ).outputs[0]
            for h, v in zip(handles, info.inside)
        ]
        user = popped[1:] if counted else popped
        res = info.body(*_as_args(info.loop_vars, _as_arrays(user, info.arrays)))
        if not isinstance(res, (list, tuple)) or (
            not isinstance(info.loop_vars, (list, tuple)) and not isinstance(res, dict)
        ):
            res = [res] if not isinstance(info.loop_vars, (list, tuple)) else res
        from .tensor_array import TensorArray

        flat_res = [
            r.flow if isinstance(r, TensorArray) else convert_to_tensor(r) for r in _flatten(res)
        ]
        if counted:
            flat_res = [None, *flat_res]
        ys = [flat_res[k] for k in floats]
        xs = [popped[k] for k in floats] + [ctx.enter(c) for c in caps]
        dx = [to_dense(d) for d in gradients(ys, xs, grad_ys=dys, unconnected_gradients="zero")]
        new_dys = dx[: len(floats)]
        # AddN (``+``): also sums the gradients of a captured TensorArray of ragged elements
        new_acc = [add_n([a, d]) for a, d in zip(acc, dx[len(floats) :])]
        from .ops.array import identity

        with g.control_dependencies([p.op for p in popped]):  # every stack pops each time
            return [identity(t) for t in (*new_dys, *new_acc)]

    local.cond = here
    out = while_loop(
        b_cond,
        b_body,
        [*gys, *accs],
        back_prop=False,
        parallel_iterations=info.parallel,
        name=op.name + "_backward",
        return_same_structure=True,
    )
    out = list(out)
    d_init = [None] * len(flat_init)
    for k, d in zip(floats, out[: len(floats)]):
        d_init[k] = d
    d_caps = dict(zip(caps, out[len(floats) :]))
    return [None] * n + d_init + [d_caps.get(c) for c in info.captured]


def _save_iterations(g: Any, info: _LoopInfo) -> None:
    """Add to the forward loop a stack per loop variable (made anew each step) and a push of
    the variable's value at the start of every iteration."""
    local = g._local
    saved = getattr(local, "cond", None)
    ctx = info.ctx
    handles_outer = []
    local.cond = ctx.outer
    try:
        with g.name_scope(info.frame + "_stacks"), g.control_dependencies(None):
            for _ in info.init:
                handles_outer.append(apply_op("StackV2", [], name="Stack").outputs[0])
    finally:
        local.cond = ctx
    pushes = []
    try:
        with g.name_scope(info.frame + "/save"), g.control_dependencies(None):
            for h, x in zip(handles_outer, info.inside):
                pushes.append(apply_op("StackPush", [ctx.enter(h), x], name="StackPush"))
    finally:
        local.cond = saved
    for nxt in info.nexts:
        for p in pushes:
            nxt._add_control_input(p)  # the pushes run in every iteration before the next
    info.stacks = handles_outer


# ---- map_fn, scan and folds over a first dimension known only when the graph runs ------------


def _slice_at(elems: Any, flat: list, i: Tensor, structured: bool) -> Any:
    from .ops.manip import gather

    items = [gather(t, i) for t in flat]
    return _pack(elems, items) if structured else items[0]


def _position(i: Tensor, n: Tensor, reverse: bool) -> Tensor:
    from .ops.math import subtract

    return subtract(subtract(n, i), convert_to_tensor(np.int32(1))) if reverse else i


def _appended(acc: Tensor, v: Tensor, first: Tensor, front: bool) -> Tensor:
    """``acc`` with ``v`` added as a new row at its end (its front with ``front``), or ``v`` alone
    as the first row when ``first``."""
    from .ops.manip import concat, expand_dims

    if not front:  # amortized O(row) per append (ops/loop.py AppendRow)
        return apply_op("AppendRow", [acc, v, first], name="AppendRow").outputs[0]
    row = expand_dims(v, 0)
    return cond(first, lambda: row, lambda: concat([row, acc], 0))


def _rows_shape(flat_out: list, shapes: list) -> list:
    """Give stacked results their static shape when each row's is known."""
    from .graph import TensorShape
    from .ops.array import reshape

    out = []
    for t, s in zip(flat_out, shapes):
        if s is not None and s.is_fully_defined():
            t = reshape(t, [-1, *s.as_list()])
        elif s is not None and s.ndims is not None:
            t.set_shape(TensorShape([None, *s.as_list()]))
        out.append(t)
    return out


def _map_loop(
    fn: Callable, elems: Any, flat: list, structured: bool, dtype: Any, parallel: Any = None
) -> Any:
    """map_fn with a while_loop: one iteration per slice, the results stacked as they come."""
    from . import dtypes as _dt
    from .graph import TensorShape
    from .ops.array import shape
    from .ops.manip import zeros
    from .ops.math import equal, less

    out_structure = dtype if dtype is not None else elems
    out_dtypes = [
        _dt.as_dtype(d) for d in (_flatten(dtype) if dtype is not None else [t.dtype for t in flat])
    ]
    n = shape(flat[0])[0]
    seen: dict[str, Any] = {}

    def body(i, *accs):
        r = fn(_slice_at(elems, flat, i, structured))
        fr = [convert_to_tensor(v) for v in _flatten(r)]
        if len(fr) != len(accs):
            raise InvalidArgumentError(
                f"map_fn: fn returned {len(fr)} tensors; give dtype= for a result that is not "
                f"shaped like elems ({len(accs)} tensors)"
            )
        seen["structure"], seen["shapes"] = r, [v.shape for v in fr]
        first = equal(i, convert_to_tensor(np.int32(0)))
        return (i + 1, *[_appended(a, v, first, False) for a, v in zip(accs, fr)])

    init = [zeros([0], d) for d in out_dtypes]
    res = while_loop(
        lambda i, *a: less(i, n),
        body,
        [convert_to_tensor(np.int32(0)), *init],
        shape_invariants=[TensorShape([]), *[TensorShape(None)] * len(init)],
        parallel_iterations=10 if parallel is None else parallel,
        return_same_structure=True,
    )
    outs = _rows_shape(list(res[1:]), seen.get("shapes", [None] * len(init)))
    if isinstance(out_structure, (list, tuple, dict)):
        return _pack(out_structure, outs)
    return outs[0]


def _scan_loop(fn, elems, flat, structured, initializer, reverse, parallel=None) -> Any:
    """scan with a while_loop (see ``_map_loop``); ``reverse`` goes from the last slice."""
    from .graph import TensorShape
    from .ops.array import shape
    from .ops.manip import zeros
    from .ops.math import equal, less

    n = shape(flat[0])[0]
    one = convert_to_tensor(np.int32(1))
    if initializer is None:
        acc0 = _slice_at(
            elems, flat, _position(convert_to_tensor(np.int32(0)), n, reverse), structured
        )
        start = one
    else:
        acc0, start = initializer, convert_to_tensor(np.int32(0))
    acc_flat = [convert_to_tensor(a) for a in _flatten(acc0)]
    k = len(acc_flat)
    seen: dict[str, Any] = {"shapes": [a.shape for a in acc_flat]}

    def body(i, *state):
        acc = _pack(acc0, list(state[:k])) if isinstance(acc0, (list, tuple, dict)) else state[0]
        new = fn(acc, _slice_at(elems, flat, _position(i, n, reverse), structured))
        fr = [convert_to_tensor(v) for v in _flatten(new)]
        if len(fr) != k:
            raise InvalidArgumentError(f"scan: fn returned {len(fr)} tensors for {k}")
        seen["shapes"] = [v.shape for v in fr]
        first = equal(i, convert_to_tensor(np.int32(0)))
        outs = [_appended(o, v, first, reverse) for o, v in zip(state[k:], fr)]
        return (i + 1, *fr, *outs)

    if initializer is None:  # the first slice is the first result
        from .ops.manip import expand_dims

        outs0 = [expand_dims(a, 0) for a in acc_flat]
    else:
        outs0 = [zeros([0], a.dtype) for a in acc_flat]
    res = while_loop(
        lambda i, *s: less(i, n),
        body,
        [start, *acc_flat, *outs0],
        shape_invariants=[TensorShape([]), *[a.shape for a in acc_flat]] + [TensorShape(None)] * k,
        parallel_iterations=10 if parallel is None else parallel,
        return_same_structure=True,
    )
    outs = _rows_shape(list(res[1 + k :]), seen["shapes"])
    return _pack(acc0, outs) if isinstance(acc0, (list, tuple, dict)) else outs[0]


def _fold_loop(fn, elems, flat, structured, initializer, reverse) -> Any:
    """foldl/foldr with a while_loop."""
    from .ops.array import shape
    from .ops.math import less

    n = shape(flat[0])[0]
    if initializer is None:
        acc0 = _slice_at(
            elems, flat, _position(convert_to_tensor(np.int32(0)), n, reverse), structured
        )
        start = convert_to_tensor(np.int32(1))
    else:
        acc0, start = initializer, convert_to_tensor(np.int32(0))
    acc_flat = [convert_to_tensor(a) for a in _flatten(acc0)]
    k = len(acc_flat)

    def body(i, *state):
        acc = _pack(acc0, list(state)) if isinstance(acc0, (list, tuple, dict)) else state[0]
        new = fn(acc, _slice_at(elems, flat, _position(i, n, reverse), structured))
        fr = [convert_to_tensor(v) for v in _flatten(new)]
        if len(fr) != k:
            raise InvalidArgumentError(f"fold: fn returned {len(fr)} tensors for {k}")
        return (i + 1, *fr)

    res = while_loop(lambda i, *s: less(i, n), body, [start, *acc_flat], return_same_structure=True)
    out = list(res[1:])
    return _pack(acc0, out) if isinstance(acc0, (list, tuple, dict)) else out[0]
