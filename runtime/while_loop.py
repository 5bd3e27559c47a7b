"""``while_loop`` (TF1's ``tf.while_loop``) built as the paper builds it, and its gradient.

A loop is Enter, Merge, Switch, LoopCond, NextIteration and Exit ops in one frame
(runtime/frames.py runs them). While the condition and body are built, a *loop context* (``_Loop``)
makes a tensor from outside enter through a constant Enter and gives an op with no input from
inside a control input on the loop's pivot. A differentiable loop ends in a LoopResult op whose
gradient (``_loop_grad``) is a backward loop over the iterations the forward loop saved on stacks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .errors import InvalidArgumentError
from .graph import Operation, Tensor, get_default_graph
from .nest import _flatten, _pack
from .registry import apply_op, convert_to_tensor


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
            from .control_flow import _in_outer

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
        if back_prop and any(t.dtype.is_differentiable for t in flat_init):
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
    floats = [k for k, v in enumerate(flat_init) if v.dtype.is_differentiable]
    from .ops.array import identity

    # the backward loop starts once the forward loop is over (every iteration saved): its
    # initial values wait for the forward loop's exits
    with g.control_dependencies([e.op for e in info.exits]):
        gys = [
            identity(grads[k]) if grads[k] is not None else zeros_like(info.exits[k])
            for k in floats
        ]
        caps = [c for c in info.captured if c.dtype.is_differentiable]
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
