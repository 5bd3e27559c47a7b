"""Running the loop frames of a prepared graph in a step (runtime/frames.py has the design).

``Frames`` is what ``frames.analyze`` finds in a graph and what a step reads of it (each node's
role, frame and copy); ``Frames.step`` gives one step's state (``_StepFrames``), whose ``store``
the executor's clocked schedule calls as each node finishes: it carries values between
iterations, runs a parallel frame's copies, keys a Send/Recv by its iteration, and runs a simple
loop's fast path (``_LoopRunner``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .registry import DEAD

if TYPE_CHECKING:
    from .frames import _Frame

_NORMAL, _ENTER, _EXIT, _NEXT, _MERGE, _RUNNER = range(6)


class Frames:
    """The frames of a prepared graph (see the module docstring)."""

    def __init__(
        self,
        frames: list[_Frame],
        role: list[int],
        frame_of: list[int],
        merge_of,
        clones: list | None = None,
        clone_slots: list[int] | None = None,
    ):
        self.frames = frames
        self.role = role  # per node: _NORMAL, _ENTER, _EXIT, _NEXT or _MERGE (+ runners)
        self.frame_of = frame_of  # per node: the frame it runs in (0: the step's)
        self.merge_of = merge_of  # per NextIteration node: its Merge's index (copy 0's)
        #: parallel frames' copies of their nodes (indices after the graph's), and per slot they
        #: add, the graph's slot it copies
        self.clones: list = clones or []
        self.clone_slots: list[int] = clone_slots or []
        self.copy_of = [0] * len(role)  # per node: its copy of a parallel frame (0: the graph's)
        self.origin = list(range(len(role)))  # per node: the graph's node it copies
        for fr in frames:
            for c, cp in enumerate(fr.copies[1:], 1):
                for i, k in cp.at.items():
                    self.copy_of[k] = c
                    self.origin[k] = i
        #: frames with a fast path; their runners take the node indices after the graph's
        self.fast_frames = [fr.id for fr in frames if fr.fast is not None]
        n = len(role)
        for k, fid in enumerate(self.fast_frames):
            frames[fid].fast.index = n + k
            role.append(_RUNNER)
            frame_of.append(fid)
            self.copy_of.append(0)
            self.origin.append(n + k)

    def step(
        self, plan, vals, pending, refs, ready, dead_nodes, plain_store, fast: bool = False
    ) -> _StepFrames:
        """One step's state; ``plain_store`` is the schedule's own store of a node's outputs;
        ``fast``: simple loops may take the fast path (nothing observes the step's nodes)."""
        return _StepFrames(self, plan, vals, pending, refs, ready, dead_nodes, plain_store, fast)


class _State:
    __slots__ = ("count", "nexts", "exit_vals", "running", "children", "held", "iteration")

    def __init__(self) -> None:
        self.count = 0  # nodes of the current iteration that have finished
        self.nexts: dict[int, Any] = {}  # Merge -> value for the next iteration
        self.exit_vals: dict[int, Any] = {}  # Exit node -> its value this iteration
        self.running = False
        self.children = 0  # inner loops running
        self.held = False  # the iteration is over but an inner loop still runs
        self.iteration = 0


class _ParState:
    """One step's state of a parallel frame's iterations."""

    __slots__ = ("on", "counts", "waiting", "ended", "exits", "arrived")

    def __init__(self, copies: int) -> None:
        self.on = [0] + [-1] * (copies - 1)  # per copy: the iteration it runs, or -1
        self.counts = [0] * copies  # per copy: its nodes finished in that iteration
        self.waiting: dict[int, dict[int, Any]] = {}  # iteration -> Merge -> value, copy busy
        self.ended = False  # an iteration's NextIterations were dead: no later one starts
        self.exits: dict[int, Any] = {}  # Exit (copy 0 index) -> its live value
        self.arrived: set[int] = set()  # the frame's constant Enters that have run


class _StepFrames:
    """One step's frame states; ``store(node, r, vals, pending, ready)`` replaces the plain
    store of a finished node's outputs."""

    def __init__(
        self, frames: Frames, plan, vals, pending, refs, ready, dead_nodes, plain_store, fast
    ):
        self.plain = plain_store
        self.f = frames
        self._role, self._frame_of, self._merge_of = frames.role, frames.frame_of, frames.merge_of
        self._sizes = [len(fr.nodes) for fr in frames.frames]
        self.plan = plan
        self.vals, self.pending, self.refs = vals, pending, refs
        self.ready, self.dead_nodes = ready, dead_nodes
        self.states = [_State() for _ in frames.frames]
        self._copy_of, self._origin = frames.copy_of, frames.origin
        #: per frame: its _ParState when it is parallel, else None
        self.par = [_ParState(fr.parallel) if fr.copies else None for fr in frames.frames]
        self._par_enter = {e: fr.id for fr in frames.frames for e in fr.enter_of}
        #: per-step pseudo-nodes running simple loops (their indices follow the graph's nodes)
        self.runners = [_LoopRunner(self, fid) for fid in frames.fast_frames] if fast else []

    def store(self, node: Any, r: Any, vals: list, pending: list, ready: list) -> None:
        i = node.index
        role = self._role[i]
        fid = self._frame_of[i]
        if self.par[fid] is not None:
            self._store_parallel(node, r, role, fid)
            return
        if role == _NEXT:
            self.states[fid].nexts[self._merge_of[i]] = r
        elif role == _EXIT:
            self.states[fid].exit_vals[i] = r
        elif role == _RUNNER:  # a simple loop ran to its end on the fast path
            self._loop_over(fid, r)
            return
        else:
            # (the schedule's plain store, inlined: the hot path of a loop's every node)
            if node.n_out == 1:
                s = node.outs[0]
                if s is not None:
                    vals[s] = r
            elif node.n_out:
                for s, v in zip(node.outs, r):
                    if s is not None:
                        vals[s] = v
            for c in node.consumers:
                left = pending[c] - 1
                pending[c] = left
                if not left:
                    ready.append(c)
            if role == _ENTER and i in self._par_enter:
                self._invariant_arrived(i)
            if role == _MERGE and not self.states[fid].running:
                self.states[fid].running = True
                parent = self.f.frames[fid].parent
                if parent > 0:
                    self.states[parent].children += 1
        if fid:
            st = self.states[fid]
            st.count += 1
            if st.count == self._sizes[fid]:
                self._iteration_over(fid)

    # ---- Send/Recv to another process inside a loop ------------------------------------------

    def keyed(self, node: Any, step: Any) -> _KeyedStep:
        """``step`` as ``node`` (a Send/Recv whose peer is in another process) sees it: its
        rendezvous keys name the iterations of the loops around the node."""
        return _KeyedStep(step, self.tag(node.index))

    def tag(self, i: int) -> str:
        """The ``frame:iteration`` field of a rendezvous key for node ``i``: every loop around
        it, outermost first (``outer:2,inner:0``)."""
        frames = self.f.frames
        fid = self._frame_of[i]
        ps = self.par[fid]
        it = ps.on[self._copy_of[i]] if ps is not None else self.states[fid].iteration
        parts = [f"{frames[fid].name}:{it}"]
        fid = frames[fid].parent
        while fid > 0:
            parts.append(f"{frames[fid].name}:{self.states[fid].iteration}")
            fid = frames[fid].parent
        return ",".join(reversed(parts))

    # ---- parallel frames (see the module docstring) -------------------------------------------

    def _store_parallel(self, node: Any, r: Any, role: int, fid: int) -> None:
        i = node.index
        ps = self.par[fid]
        c = self._copy_of[i]
        if role == _NEXT:
            if r is DEAD:
                ps.ended = True  # the condition was false: this iteration is the last
            else:
                self._next_value(fid, ps, c, self._merge_of[i], r)
        elif role == _EXIT:
            if r is not DEAD:
                ps.exits[self._origin[i]] = r
        else:
            self.plain(node, r, self.vals, self.pending, self.ready)
            if role == _MERGE:
                st = self.states[fid]
                if not st.running:
                    st.running = True
                    parent = self.f.frames[fid].parent
                    if parent > 0:
                        self.states[parent].children += 1
        ps.counts[c] += 1
        if ps.counts[c] == self._sizes[fid]:
            self._copy_done(fid, ps, c)

    def _next_value(self, fid: int, ps: _ParState, c: int, merge: int, r: Any) -> None:
        """A live NextIteration value of copy ``c``'s iteration: it starts the next one."""
        it = ps.on[c] + 1
        fr = self.f.frames[fid]
        to = it % fr.parallel
        if ps.on[to] != it:
            if ps.on[to] != -1:  # the copy still runs an earlier iteration: the value waits
                ps.waiting.setdefault(it, {})[merge] = r
                return
            self._start(fr, ps, to, it)
        cp = fr.copies[to]
        self.vals[cp.entry[merge]] = r
        self.ready.append(cp.at[merge])

    def _start(self, fr: _Frame, ps: _ParState, c: int, it: int) -> None:
        """Iteration ``it`` starts on copy ``c``: its counts are reset, and the nodes that
        wait for nothing of it are ready."""
        cp = fr.copies[c]
        pending, refs, ready = self.pending, self.refs, self.ready
        arrived = ps.arrived
        for i, k in cp.reset_pending.items():
            w = cp.waits.get(i)
            if w is not None:
                k += sum(1 for e in w if e not in arrived)
            pending[i] = k
        init_refs = self.plan.initial_refs
        for s in cp.slots:
            refs[s] = init_refs[s]
        if self.dead_nodes:
            self.dead_nodes.difference_update(cp.nodes)
        for i in cp.restart:
            if not pending[i]:
                ready.append(i)
        ps.on[c] = it
        ps.counts[c] = 0

    def _invariant_arrived(self, enter: int) -> None:
        """A constant Enter of a parallel frame has run: the iterations already started on
        other copies than the graph's own get its value now (copy 0's nodes count it)."""
        fid = self._par_enter[enter]
        fr = self.f.frames[fid]
        ps = self.par[fid]
        ps.arrived.add(enter)
        pending, ready = self.pending, self.ready
        for c in range(1, fr.parallel):
            if ps.on[c] == -1:
                continue
            at = fr.copies[c].at
            for j in fr.enter_of[enter]:
                k = at[j]
                left = pending[k] - 1
                pending[k] = left
                if not left:
                    ready.append(k)

    def _copy_done(self, fid: int, ps: _ParState, c: int) -> None:
        """Copy ``c``'s iteration has run every node: the copy is free for a later one."""
        fr = self.f.frames[fid]
        nxt = ps.on[c] + fr.parallel
        ps.on[c] = -1
        held = ps.waiting.pop(nxt, None)
        if held is not None:
            self._start(fr, ps, c, nxt)
            cp = fr.copies[c]
            for m, v in held.items():
                self.vals[cp.entry[m]] = v
                self.ready.append(cp.at[m])
            return
        if ps.ended and not ps.waiting and all(x == -1 for x in ps.on):
            self._parallel_over(fid, ps)

    def _parallel_over(self, fid: int, ps: _ParState) -> None:
        fr = self.f.frames[fid]
        exits = ps.exits
        self.par[fid] = _ParState(fr.parallel)
        vals, refs, init_refs = self.vals, self.refs, self.plan.initial_refs
        for cp in fr.copies[1:]:
            for s in cp.slots:
                vals[s] = None
                refs[s] = init_refs[s]
            if self.dead_nodes:
                self.dead_nodes.difference_update(cp.nodes)
        self._loop_over(fid, exits)

    def _iteration_over(self, fid: int) -> None:
        st = self.states[fid]
        if st.children:
            st.held = True  # an inner loop still runs: wait for it
            return
        st.held = False
        st.count = 0
        fr = self.f.frames[fid]
        nexts = st.nexts
        st.nexts = {}
        if nexts and all(v is not DEAD for v in nexts.values()):
            st.iteration += 1
            if self.runners and fr.fast is not None:  # the other iterations on the fast path
                st.nexts = nexts
                st.exit_vals = {}
                self.ready.append(fr.fast.index)
                return
            self._reset(fr, full=False)
            vals, ready = self.vals, self.ready
            nodes = self.plan.nodes
            for m, v in nexts.items():
                vals[nodes[m].ins[0]] = v  # the Merge reads its Enter's slot
                ready.append(m)
            ready.extend(fr.restart)
            st.exit_vals = {}
            return
        # the loop is over: the Exits deliver to the enclosing frame, and the frame is reset
        exit_vals = st.exit_vals
        st.exit_vals = {}
        self._loop_over(fid, exit_vals)

    def _loop_over(self, fid: int, exit_vals: dict) -> None:
        st = self.states[fid]
        fr = self.f.frames[fid]
        st.running = False
        st.iteration = 0
        self._reset(fr, full=True)
        nodes = self.plan.nodes
        vals = self.vals
        for s in fr.slots:  # what the last iteration left (the general path frees it on the way)
            vals[s] = None
        for s in fr.pinned:
            vals[s] = None
        for m in fr.merges:
            self.vals[nodes[m].ins[0]] = None
        for e in fr.exits:
            self.store_parent(nodes[e], exit_vals.get(e, DEAD))
        parent = fr.parent
        if parent > 0:
            pst = self.states[parent]
            pst.children -= 1
            if pst.held and not pst.children:
                self._iteration_over(parent)

    def store_parent(self, exit_node: Any, r: Any) -> None:
        self.plain(exit_node, r, self.vals, self.pending, self.ready)

    def _reset(self, fr: _Frame, full: bool) -> None:
        pending, refs = self.pending, self.refs
        if self.dead_nodes:
            self.dead_nodes.difference_update(fr.nodes)
        if full:
            init = self.plan.initial_pending
            for i in fr.nodes:
                pending[i] = init[i]
        else:
            for i, k in fr.reset_pending.items():
                pending[i] = k
        init_refs = self.plan.initial_refs
        for s in fr.slots:
            refs[s] = init_refs[s]


class _KeyedStep:
    """A step whose rendezvous keys carry a loop iteration (``_StepFrames.keyed``)."""

    __slots__ = ("_step", "rendezvous")

    def __init__(self, step: Any, tag: str):
        self._step = step
        self.rendezvous = _KeyedRendezvous(step.rendezvous, tag)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._step, name)


class _KeyedRendezvous:
    __slots__ = ("inner", "tag")

    def __init__(self, inner: Any, tag: str):
        self.inner = inner
        self.tag = tag

    def _key(self, key: str) -> str:
        return f"{key.rsplit(';', 1)[0]};{self.tag}"

    def send(self, key: str, value: Any) -> None:
        self.inner.send(self._key(key), value)

    def recv(self, key: str, done: Any) -> None:
        self.inner.recv(self._key(key), done)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class _LoopRunner:
    """The node a step's schedule runs for a simple loop's fast path: ``fn(ctx)`` runs the
    loop's remaining iterations and returns its Exits' values; the schedule's store then ends
    the loop (``_StepFrames.store``). It has what the schedule reads of a node."""

    __slots__ = ("index", "ctx", "frames", "fid", "plan", "device", "op")
    ins: tuple = ()
    n_out = 0
    dead_rule = 0
    timed = is_async = heavy = on_stream = False

    def __init__(self, step_frames: _StepFrames, fid: int):
        self.frames = step_frames
        self.fid = fid
        self.plan = step_frames.f.frames[fid].fast
        self.index = self.plan.index
        self.ctx = None
        first = self.plan.order[0][0] if self.plan.order else None
        self.device = first.device if first is not None else None
        self.op = first.op if first is not None else None

    def fn(self, _ctx: Any) -> dict:
        plan = self.plan
        sf = self.frames
        st = sf.states[self.fid]
        vals = sf.vals
        nexts = st.nexts
        st.nexts = {}
        run = _iterate_with_conds if plan.conds else _iterate
        while True:
            for m, s in plan.merge_in:
                vals[s] = nexts[m]
            ended = run(plan.order, vals)
            nexts = {m: vals[s] for m, s in plan.next_src}
            if ended or any(v is DEAD for v in nexts.values()):
                break  # the condition was false: the loop is over
            st.iteration += 1
        return {e.index: vals[s] for e, s in plan.exit_src}


def _iterate(order: list, vals: list) -> bool:
    """One iteration of a loop without conds; True when its condition was false."""
    live = True
    node = None
    try:
        for node, body, switch in order:
            if body and not live:
                continue
            ins = node.ins
            if len(ins) == 1:
                r = node.fn(node.ctx, vals[ins[0]])
            elif len(ins) == 2:
                r = node.fn(node.ctx, vals[ins[0]], vals[ins[1]])
            else:
                r = node.fn(node.ctx, *[vals[s] for s in ins])
            if node.n_out == 1:
                s = node.outs[0]
                if s is not None:
                    vals[s] = r
            elif node.n_out:
                for s, v in zip(node.outs, r):
                    if s is not None:
                        vals[s] = v
            if switch:
                live = r[1] is not DEAD
    except Exception as e:  # noqa: BLE001 - the schedule reports it with the op that failed
        raise LoopOpFailed(e, node, [vals[s] for s in node.ins]) from e
    return not live


def _iterate_with_conds(order: list, vals: list) -> bool:
    """One iteration of a loop with conds inside: dead values propagate (an op with a dead input
    or a dead control predecessor is dead; a Merge when all its inputs are). Returns None; the
    caller sees the end of the loop in its NextIterations' dead values."""
    dead: set[int] = set()
    node = None
    try:
        for node, rule, ctrl in order:
            ins = [vals[s] for s in node.ins]
            if rule == 2:
                is_dead = all(v is DEAD for v in ins)
            elif rule:
                is_dead = any(v is DEAD for v in ins) or any(p in dead for p in ctrl)
            else:
                is_dead = False
            if is_dead:
                dead.add(node.index)
                n_out = node.n_out
                r = DEAD if n_out == 1 else ((DEAD,) * n_out if n_out else None)
            else:
                r = node.fn(node.ctx, *ins)
            if node.n_out == 1:
                s = node.outs[0]
                if s is not None:
                    vals[s] = r
            elif node.n_out:
                for s, v in zip(node.outs, r):
                    if s is not None:
                        vals[s] = v
    except Exception as e:  # noqa: BLE001 - the schedule reports it with the op that failed
        raise LoopOpFailed(e, node, [vals[s] for s in node.ins]) from e
    return False


class LoopOpFailed(Exception):
    """An op of a loop's fast path failed: the schedule reports ``error`` as ``node``'s."""

    def __init__(self, error: BaseException, node: Any, inputs: list):
        super().__init__(str(error))
        self.error, self.node, self.inputs = error, node, inputs
