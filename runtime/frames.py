"""Execution frames of while loops (the paper's section 3.4), for the executor's clocked schedule.

A loop's ops form a *frame*; its ``Enter`` nodes run in the enclosing frame and its ``Exit`` nodes
in the loop's. ``analyze`` finds each node's frame when a graph is prepared; ``Frames.step``
gives one step's state, whose ``store`` the schedule calls as each node finishes, in place of its
plain store:

* a node's outputs reach its consumers as usual, except a ``NextIteration``'s (kept until the
  iteration ends, then fed to its Merge) and an ``Exit``'s (kept until the loop ends, then
  handed to the enclosing frame);
* every node of a frame runs once per iteration, live or dead (the untaken side of each
  Switch). When all have, the iteration is over: if the NextIterations carried live values, the
  frame's pending counts, reference counts and dead marks are reset and its Merges start the
  next iteration with those values; if they were dead (the condition was false), the loop is
  over: its Exits deliver, and the frame is reset for the next time it is entered (an inner
  loop runs once per iteration of its outer loop).

Iterations run in parallel where dependencies allow, up to the loop's ``parallel_iterations``
(TensorFlow's meaning), when that can change anything: in a loop with no inner loop and with an
op that does not run inline (a simulated device's, a Send/Recv, a thread pool's), for example
the layers of an RNN placed on two devices, whose iterations then overlap as a pipeline. Such a
*parallel* frame has ``parallel_iterations`` copies of its nodes and slots (``_Copy``; copy 0 is
the graph's own nodes, the others clones made when the graph is prepared, with node and slot
indices after the graph's): iteration ``k`` runs on copy ``k mod parallel_iterations``. A
NextIteration's live value starts the next iteration at once (its Merge, and the nodes with no
input from the iteration), so iteration ``k + 1`` runs beside ``k`` as far as its inputs allow;
a copy is reused when its iteration has run every node, until then the values for it wait. A
tensor captured from outside (a constant Enter) that arrives after an iteration has started is
handed to that iteration's nodes then. The loop ends when an iteration's NextIterations were
dead and no iteration runs any more; the Exits then deliver their live values. A Send/Recv pair
inside gets one rendezvous key per copy (the key's ``frame:iter`` field), so iterations in flight
never meet each other's tensors. Other loops (all ops inline, or an inner loop inside) run their
iterations one after the other, ops within an iteration in parallel, which gives the same
values: there, running iterations side by side could not change when anything ends.

A Send or Recv inside a loop whose peer runs in another process (a loop spanning tasks; the
partitioner gave this process a control loop driven by the loop's predicate,
runtime/partition.py ``_control_loops``) sends and receives under a key naming the iteration of
every loop around it (``_StepFrames.tag``), so both processes' iterations meet one to one however
far one runs ahead.

A *simple* loop (no inner loop or cond; every op runs inline on its device: CPU kernels, or GPU
kernels enqueued on their stream; its Switches all take the loop's predicate) runs its second and
later iterations on a fast path when nothing observes the step (no tracing, no simulated
memory accounting): one pseudo-node per loop (``_LoopRunner``) that the schedule runs inline,
looping over the frame's ops in one fixed topological order. Each iteration runs the same ops as
on the general path: the ops that do not depend on the predicate, then (while it holds) the body;
an iteration where it is false ends the loop, its Exits delivering as usual. Nothing is counted
or reset per op, which makes an iteration several times cheaper (bench/control_flow.py).

This module finds the frames when a graph is prepared (``analyze``: each node's frame and role,
a parallel frame's copies, a simple loop's fast plan); runtime/frame_step.py runs them in a step
(``Frames``, ``_StepFrames``, the fast path's ``_LoopRunner``).
"""

from __future__ import annotations

import copy
from typing import Any

from .errors import InvalidArgumentError, UnimplementedError
from .frame_step import _ENTER, _EXIT, _MERGE, _NEXT, _NORMAL, Frames


class _Frame:
    __slots__ = ("id", "name", "parent", "nodes", "merges", "exits", "reset_pending")
    __slots__ += ("restart", "slots", "pinned", "fast", "parallel", "copies", "enter_of")

    def __init__(self, fid: int, name: str, parent: int):
        self.id = fid
        self.name = name
        self.parent = parent
        self.nodes: list[int] = []  # nodes that run in this frame, once per iteration
        self.merges: list[int] = []  # loop Merges (fed by their NextIteration)
        self.exits: list[int] = []
        self.reset_pending: dict[int, int] = {}  # node -> predecessors run in each iteration
        self.restart: list[int] = []  # non-Merge nodes with none: ready at each new iteration
        self.slots: list[int] = []  # slots written in the frame (their counts reset)
        self.pinned: list[int] = []  # slots of captured tensors (constant Enters): kept
        self.fast: _FastPlan | None = None  # a simple loop's fast path (see the module doc)
        self.parallel = 1  # iterations that may run at once (the loop's parallel_iterations)
        self.copies: list[_Copy] = []  # a parallel frame's copies (copy 0: the graph's nodes)
        #: a parallel frame's constant Enters -> (per copy) their consumers in it
        self.enter_of: dict[int, list[int]] = {}


class _Copy:
    """One copy of a parallel frame's nodes: where each of the frame's nodes is in it (``at``),
    and what is reset when an iteration starts on it."""

    __slots__ = ("at", "nodes", "entry", "reset_pending", "restart", "slots", "waits")

    def __init__(self) -> None:
        self.at: dict[int, int] = {}  # the frame's node (copy 0 index) -> its index here
        self.nodes: list[int] = []
        self.entry: dict[int, int] = {}  # loop Merge (copy 0 index) -> the slot it reads here
        self.reset_pending: dict[int, int] = {}  # node -> predecessors inside the iteration
        self.restart: list[int] = []  # nodes with none of those
        self.slots: list[int] = []  # slots written here (their counts reset)
        #: node -> the constant Enters it waits for (they run once, outside the loop)
        self.waits: dict[int, list[int]] = {}


def analyze(nodes: list, n_slots: int = 0) -> Frames | None:
    """The frames of ``nodes`` (in topological order), or None when there is no loop;
    ``n_slots``: the graph's slots (a parallel frame's copies take the indices after them)."""
    if not any(n.op.type == "Enter" for n in nodes):
        return None
    index_of = {n.op.name: n.index for n in nodes}
    frames = [_Frame(0, "", -1)]
    by_name: dict[str, int] = {}
    frame_of = [0] * len(nodes)
    out_frame = [0] * len(nodes)
    role = [_NORMAL] * len(nodes)
    merge_of: dict[int, int] = {}
    producer: dict[int, int] = {}
    for n in nodes:
        for s in n.outs:
            if s is not None:
                producer[s] = n.index
    # A _Recv runs in the frame of its _Send (the paper's loops across devices): each iteration
    # sends, and receives, once. Visit every _Recv after its _Send.
    send_of = {n.op.attrs["key"]: n.index for n in nodes if n.op.type == "_Send"}
    sender = {
        n.index: send_of[n.op.attrs["key"]]
        for n in nodes
        if n.op.type == "_Recv" and n.op.attrs["key"] in send_of
    }
    for n in _with_recvs_after_sends(nodes, producer, sender):
        t = n.op.type
        data_preds = [producer[s] for s in n.ins if s in producer]
        if n.index in sender:
            data_preds.append(sender[n.index])
        f = None
        for p in data_preds:
            fp = out_frame[p]
            if f is None:
                f = fp
            elif f != fp:
                raise InvalidArgumentError(
                    f"{n.op.name} ({t}) takes tensors of two loop frames "
                    f"({frames[f].name or 'outside'} and {frames[fp].name or 'outside'})"
                )
        if f is None:  # control inputs only: the innermost of their frames
            for p in n.ctrl_preds:
                fp = out_frame[p]
                if f is None or _depth(frames, fp) > _depth(frames, f):
                    f = fp
        f = 0 if f is None else f
        frame_of[n.index] = f
        if t == "Enter":
            role[n.index] = _ENTER
            name = n.op.attrs["frame_name"]
            child = by_name.get(name)
            if child is None:
                child = by_name[name] = len(frames)
                frames.append(_Frame(child, name, f))
            out_frame[n.index] = child
            if n.op.attrs.get("is_constant"):
                frames[child].pinned.extend(s for s in n.outs if s is not None)
            frames[f].nodes.append(n.index)  # it runs (once per iteration) in the outer frame
            frames[f].slots.extend(s for s in n.outs if s is not None)
            continue
        frames[f].nodes.append(n.index)
        if t == "Exit":
            role[n.index] = _EXIT
            frames[f].exits.append(n.index)
            out_frame[n.index] = frames[f].parent
        else:
            out_frame[n.index] = f
            frames[f].slots.extend(s for s in n.outs if s is not None)
            if t == "NextIteration":
                role[n.index] = _NEXT
                merge_of[n.index] = index_of[n.op.attrs["merge"]]
            elif t == "Merge" and n.op.attrs.get("loop_frame"):
                role[n.index] = _MERGE
                frames[f].merges.append(n.index)
    recv_of = {v: k for k, v in sender.items()}
    for fr in frames[1:]:
        for i in fr.nodes:
            n = nodes[i]
            t = n.op.type
            if (t == "_Send" and i not in recv_of) or (t == "_Recv" and i not in sender):
                # its peer runs in another process, which counts the loop's iterations too
                # (partition.py gives it a control loop): the key names the iteration
                if not fr.merges:
                    raise UnimplementedError(
                        f"while_loop {fr.name!r}: {n.op.name} crosses to another process inside "
                        "the loop, and this process has no control loop for it"
                    )
                n.frame_keyed = True
            if t == "_Recv" and fr.merges and not n.ins and not n.ctrl_preds:
                # armed in every iteration (and at each entry into the loop), not once per step
                # as a root: by the Merge of the loop's first variable (its pivot; a counter in
                # most loops), which starts an iteration before the others can
                pivot = [m for m in fr.merges if nodes[m].op.attrs.get("pivot")]
                _add_control_edge(nodes, (pivot or fr.merges)[0], i)
            if role[i] == _MERGE:
                continue
            preds = {producer[s] for s in n.ins if s in producer} | set(n.ctrl_preds)
            k = sum(1 for p in preds if out_frame[p] == fr.id and role[p] != _ENTER)
            fr.reset_pending[i] = k
            if k == 0:
                fr.restart.append(i)
        missing = [
            nodes[i].op.name
            for i in fr.merges
            if nodes[i].op.attrs.get("next_iteration") not in index_of
        ]
        if missing:
            raise InvalidArgumentError(f"while_loop {fr.name!r}: {missing[0]} has no NextIteration")
    for fr in frames[1:]:
        fr.fast = _fast_plan(fr, frames, nodes, role, producer, merge_of)
    parallel = [
        fr
        for fr in frames[1:]
        if _parallel_iterations(fr, nodes) > 1
        and not any(f.parent == fr.id for f in frames)
        and not all(_inline(nodes[i]) for i in fr.nodes)
    ]
    if not parallel:
        return Frames(frames, role, frame_of, merge_of)
    clones: list = []
    origins: list[int] = []
    clone_slots: list[int] = []
    for fr in parallel:
        fr.fast = None
        fr.parallel = _parallel_iterations(fr, nodes)
        _copy_frame(fr, nodes, role, producer, n_slots, clones, origins, clone_slots)
    for k, i in zip(clones, origins):
        role.append(role[i])
        frame_of.append(frame_of[i])
        if role[i] == _NEXT:
            merge_of[k.index] = merge_of[i]
    return Frames(frames, role, frame_of, merge_of, clones, clone_slots)


def _inline(n: Any) -> bool:
    return not (n.is_async or n.heavy or n.timed or not getattr(n.device, "synchronous", False))


def _parallel_iterations(fr: _Frame, nodes: list) -> int:
    """The loop's ``parallel_iterations`` (on its loop variables' Enters; 1 if not given)."""
    p = 1
    for m in fr.merges:
        e = nodes[m].input_tensors[0].op
        if e.type == "Enter":
            p = max(p, int(e.attrs.get("parallel_iterations", 1)))
    return p


def _copy_frame(
    fr: _Frame,
    nodes: list,
    role: list,
    producer: dict,
    n_slots: int,
    clones: list,
    origins: list,
    slots: list,
) -> None:
    """Make the copies of parallel frame ``fr`` (see the module docstring). New nodes get the
    indices after the graph's and the clones made so far (``origins``: the node each copies);
    new slots after ``n_slots`` and the slots made so far (``slots``: the slot each copies)."""
    members = fr.nodes
    member_set = set(members)
    enters = {
        p: [c for c in nodes[p].consumers if c in member_set]
        for i in members
        for p in ({producer[s] for s in nodes[i].ins if s in producer} | set(nodes[i].ctrl_preds))
        if role[p] == _ENTER
    }
    fr.enter_of = {e: cs for e, cs in enters.items() if nodes[e].op.attrs.get("is_constant")}
    base = _Copy()
    base.at = {i: i for i in members}
    base.nodes = list(members)
    base.entry = {m: nodes[m].ins[0] for m in fr.merges}
    base.reset_pending = dict(fr.reset_pending)
    base.restart = list(fr.restart)
    base.slots = list(fr.slots)
    fr.copies = [base]
    waits: dict[int, list[int]] = {}
    for e, cs in fr.enter_of.items():
        for c in cs:
            waits.setdefault(c, []).append(e)
    base.waits = waits
    n_graph = len(nodes)
    for c in range(1, fr.parallel):
        cp = _Copy()
        cp.at = {i: n_graph + len(clones) + k for k, i in enumerate(members)}
        slot_at: dict[int, int] = {}
        for i in members:
            for s in nodes[i].outs:
                if s is not None and role[i] != _EXIT:  # an Exit's slot is the outer frame's
                    slot_at[s] = n_slots + len(slots)
                    slots.append(s)
        for m in fr.merges:
            cp.entry[m] = n_slots + len(slots)
            slots.append(nodes[m].ins[0])
        for i in members:
            n = nodes[i]
            k = copy.copy(n)
            k.index = cp.at[i]
            k.ins = [slot_at.get(s, s) for s in n.ins]
            if role[i] == _MERGE:
                k.ins[0] = cp.entry[i]
            k.outs = [None if s is None else slot_at.get(s, s) for s in n.outs]
            k.consumers = [cp.at[j] for j in n.consumers if j in cp.at]
            k.ctrl_preds = [cp.at.get(p, p) for p in n.ctrl_preds]
            k.free_after = []
            k.memo = None
            if n.op.type in ("_Send", "_Recv"):  # one rendezvous key per copy
                k.ctx = copy.copy(n.ctx)
                key = n.ctx.attrs["key"]
                k.ctx.attrs = {**n.ctx.attrs, "key": f"{key.rsplit(';', 1)[0]};{fr.id}:{c}"}
            clones.append(k)
            origins.append(i)
        cp.nodes = [cp.at[i] for i in members]
        cp.reset_pending = {cp.at[i]: v for i, v in fr.reset_pending.items()}
        cp.restart = [cp.at[i] for i in fr.restart]
        cp.slots = list(slot_at.values()) + list(cp.entry.values())
        cp.waits = {cp.at[i]: es for i, es in waits.items()}
        fr.copies.append(cp)


class _FastPlan:
    """A simple loop's iteration as one fixed sequence (see the module docstring)."""

    __slots__ = ("order", "conds", "merge_in", "next_src", "exit_src", "index")

    def __init__(self, order, conds, merge_in, next_src, exit_src):
        #: (node, is_body, is_loop_switch) in topological order; with ``conds`` (conds inside the
        #: loop): (node, dead_rule, control predecessors), dead values propagating as on the
        #: general path (``executor._is_dead``)
        self.order = order
        self.conds = conds
        self.merge_in = merge_in  # (Merge index, the slot it reads) per loop variable
        self.next_src = next_src  # (Merge index, the slot its NextIteration forwards)
        self.exit_src = exit_src  # (Exit node, the slot it forwards)
        self.index = -1  # the runner's node index (set by Frames)


def _fast_plan(fr: _Frame, frames: list, nodes: list, role: list, producer: dict, merge_of):
    """The fast path of a loop frame, or None when it does not qualify."""
    if any(f.parent == fr.id for f in frames):
        return None  # an inner loop
    members = set(fr.nodes)
    loop_switches: set[int] = set()
    switch_false: set[int] = set()
    conds = False
    for i in fr.nodes:
        n = nodes[i]
        if (
            n.is_async
            or n.heavy
            or n.timed
            or not getattr(n.device, "synchronous", False)
            or role[i] == _ENTER
        ):
            return None
        if n.op.type == "Switch":
            p = producer.get(n.ins[1])
            if p is not None and p in members and nodes[p].op.type == "LoopCond":
                loop_switches.add(i)
                if n.outs[0] is not None:
                    switch_false.add(n.outs[0])
            else:
                conds = True  # a cond inside the loop
    exit_src = []
    for i in fr.exits:
        if nodes[i].ins[0] not in switch_false:
            return None
        exit_src.append((nodes[i], nodes[i].ins[0]))
    body: set[int] = set()
    order = []
    for i in fr.nodes:  # topological
        n = nodes[i]
        if role[i] == _EXIT:
            continue
        if any(s in switch_false for s in n.ins):
            return None  # only Exits take a loop Switch's untaken side
        preds = {producer[s] for s in n.ins if s in producer} | set(n.ctrl_preds)
        is_body = any(p in loop_switches or p in body for p in preds)
        if is_body:
            body.add(i)
        if role[i] == _NEXT:
            if not is_body:
                return None
            continue  # its value is read from its input's slot at the iteration's end
        if conds:
            ctrl = tuple(p for p in n.ctrl_preds if p in members)
            order.append((n, n.dead_rule, ctrl))
        else:
            order.append((n, is_body, i in loop_switches))
    merge_in = [(m, nodes[m].ins[0]) for m in fr.merges]
    next_src = [(merge_of[i], nodes[i].ins[0]) for i in fr.nodes if role[i] == _NEXT]
    return _FastPlan(order, conds, merge_in, next_src, exit_src)


def _with_recvs_after_sends(nodes: list, producer: dict, sender: dict) -> list:
    """``nodes`` in a topological order that also puts each _Recv after its _Send."""
    if not sender:
        return nodes
    succ: list[list[int]] = [[] for _ in nodes]
    indeg = [0] * len(nodes)
    for n in nodes:
        preds = {producer[s] for s in n.ins if s in producer} | set(n.ctrl_preds)
        if n.index in sender:
            preds.add(sender[n.index])
        for p in preds:
            succ[p].append(n.index)
        indeg[n.index] = len(preds)
    out = []
    todo = [n.index for n in nodes if not indeg[n.index]][::-1]
    while todo:
        i = todo.pop()
        out.append(nodes[i])
        for c in succ[i]:
            indeg[c] -= 1
            if not indeg[c]:
                todo.append(c)
    if len(out) != len(nodes):
        raise InvalidArgumentError("a _Recv is needed before its own _Send runs (a cycle)")
    return out


def _add_control_edge(nodes: list, src: int, dst: int) -> None:
    """Make ``nodes[dst]`` wait for ``nodes[src]`` (the prepared graph's counts follow)."""
    nodes[src].consumers.append(dst)
    nodes[dst].ctrl_preds.append(src)
    nodes[dst].n_preds += 1


def _depth(frames: list[_Frame], f: int) -> int:
    d = 0
    while f > 0:
        f = frames[f].parent
        d += 1
    return d
