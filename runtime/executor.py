"""The executor: runs a prepared (pruned, placed, possibly partitioned) graph for one step.

State is split as in TensorFlow's common runtime:

* ``PreparedGraph`` is built once per (graph version, fetches, feeds, targets): the nodes in
  topological order, where each input comes from (a slot index), how many predecessors each
  node waits for, which slots die after each node, and the kernel bound to each node.
* ``StepState`` (a list of slot values plus pending counts) is made anew for each step, so several
  threads may run steps of one PreparedGraph at once.

Two schedules run the same PreparedGraph; ``run_step`` picks one (every session and the
distributed worker call it):

* straight-line (``run_straight_line``), the degenerate case: when every node runs inline on a
  synchronous device and nothing watches the step, the nodes run in topological order on the
  calling thread with no queue at all (what makes a tiny op cost about 0.5 us);
* clocked (``run_clocked``), everything else: ready nodes run inline, or are handed to their
  device (``device.run(node, inputs, done)``: thread pools, GPUs, remote tasks) or to an
  asynchronous kernel (Send/Recv, queues), or started on a timed device (a simulated one:
  ``device.start(node, inputs, now)`` says at once when the node ends). The step waits on a
  clock (``hetbed.devices.clock.Clock``): ``WallClock`` for real steps, whose completions come
  from other threads; a SimPy-backed ``SimClock`` for simulated ones, whose events are network
  flows and deliveries. Observers (StepObserver) hear node starts and finishes and the step's
  end: tracing, and the simulated devices' memory accounting (``devices/memory.py``), hang off
  them, not off branches of the loop.
"""

from __future__ import annotations

import heapq
import itertools
import math
import queue
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import dtypes as _dt
from .errors import (
    AbortedError,
    DeadlineExceededError,
    FailedPreconditionError,
    InvalidArgumentError,
    OpError,
)
from .frame_step import LoopOpFailed
from .frames import analyze as analyze_frames
from .graph import Operation, Tensor
from .node_errors import annotate as _annotate
from .node_errors import wrap as _wrap
from .registry import DEAD, Kernel


class KernelContext:
    """Per (session, node) state that a kernel sees: the op, its attrs, device and resources.

    Built once when a node is first prepared in a session and kept for later steps, like
    TensorFlow's OpKernel objects; ``state`` is free for the kernel's own use (e.g. an RNG).
    """

    __slots__ = ("op", "attrs", "device", "xp", "resources", "state", "session", "_rng")

    def __init__(self, op: Operation, device: Any, resources: dict, session: Any):
        self.op = op
        self.attrs = op.attrs
        self.device = device
        self.xp = device.xp
        self.resources = resources
        self.state: Any = None
        self.session = session
        self._rng: np.random.Generator | None = None

    @property
    def rng(self) -> np.random.Generator:
        """This op's generator, seeded from (graph seed, op seed) like TF1's random ops."""
        if self._rng is None:
            self._rng = np.random.default_rng(op_seed_sequence(self.op))
        return self._rng


def op_seed_sequence(op: Operation) -> Any:
    gseed = op.graph.seed
    oseed = op.attrs.get("seed")
    if gseed is None and oseed is None:
        return None  # nondeterministic, like TF with no seeds set
    if gseed is None:
        gseed = 87654321
    if oseed is None:
        oseed = op._id
    return [int(gseed) & 0xFFFFFFFF, int(oseed) & 0xFFFFFFFF]


class Node:
    """One node of a PreparedGraph with everything the hot loop needs, resolved once."""

    __slots__ = (
        "index",
        "op",
        "device",
        "kernel",
        "fn",
        "ctx",
        "ins",
        "outs",
        "n_out",
        "free_after",
        "consumers",
        "n_preds",
        "heavy",
        "is_async",
        "timed",
        "input_tensors",
        "memo",
        "dead_rule",
        "ctrl_preds",
        "on_stream",
        "frame_keyed",
    )

    def __init__(self, index: int, op: Operation, device: Any, kernel: Kernel, ctx: KernelContext):
        self.index = index
        self.op = op
        self.device = device
        self.kernel = kernel
        self.fn = kernel.fn
        self.ctx = ctx
        self.ins: list[int] = []
        self.outs: list[int | None] = []
        self.n_out = len(op.outputs)
        self.free_after: list[int] = []
        self.consumers: list[int] = []
        self.n_preds = 0
        self.heavy = False
        self.is_async = kernel.is_async
        # A timed device (a simulated one) starts a node and says when it ends: ``device.start(
        # node, inputs) -> (end_time, result)``; the executor keeps the pending ends in a heap.
        self.timed = bool(getattr(device, "timed", False)) and not kernel.is_async
        # A device whose kernels run inline on a stream (a GPU) completes them in stream order;
        # an observed step hands its nodes to ``device.run`` instead, which waits for the kernels.
        self.on_stream = bool(getattr(device, "kernels_on_stream", False)) and not kernel.is_async
        if self.on_stream:
            self.fn = device.bind_kernel(kernel.fn)
        self.input_tensors: list[Tensor] = list(op.inputs)
        self.memo: Any = None  # free for the device's per-node cache (simulated devices' plans)
        #: in a graph with conditionals: 1 dead when any input is, 2 (Merge) when all are, 0
        #: never (Send/Recv carry deadness); ``ctrl_preds``: its control predecessors' indices
        self.dead_rule = 1
        self.ctrl_preds: list[int] = []
        #: a Send/Recv inside a loop whose peer is in another process: its rendezvous key names
        #: the iteration (runtime/frames.py)
        self.frame_keyed = False

    def __repr__(self) -> str:
        return f"<Node {self.op.name} on {getattr(self.device, 'name', self.device)}>"


class PreparedGraph:
    """The once-per-signature part of running a graph: see the module docstring."""

    def __init__(
        self,
        nodes: list[Node],
        n_slots: int,
        feed_slots: dict[Tensor, int],
        fetch_slots: list[int | None],
        straight_line: bool,
    ):
        self.nodes = nodes
        self.n_slots = n_slots
        self.feed_slots = feed_slots
        self.fetch_slots = fetch_slots
        self.straight_line = straight_line
        #: waits for the streams of the devices whose kernels run on one (GPUs), at step end
        self.stream_syncs = [
            d.synchronize for d in {id(n.device): n.device for n in nodes if n.on_stream}.values()
        ]
        #: the graph has conditionals (Switch): dead tensors propagate (ops/cond.py)
        self.has_cond = False
        #: the frames of its while loops (runtime/frames.py), or None
        self.frames: Any = None
        #: nodes the schedule runs beyond ``nodes`` (the copies of loops whose iterations run in
        #: parallel), with the indices after theirs
        self.extra_nodes: list[Node] = []
        #: the extension point of other layers: data they keep per prepared graph, by owner
        #: (the simulator keeps its memory charges and step programs under "sim")
        self.extensions: dict[str, Any] = {}
        self.roots = [n.index for n in nodes if n.n_preds == 0]
        self.initial_pending = [n.n_preds for n in nodes]
        # Reference counts for the event-driven path: consumers that still need each slot.
        refs = [0] * n_slots
        for n in nodes:
            for s in n.ins:
                refs[s] += 1
        for s in fetch_slots:
            if s is not None:
                refs[s] += 1 << 30  # fetched slots are never freed
        self.initial_refs = refs


_step_ids = itertools.count(1)
_INF = math.inf


def new_step_id() -> int:
    return next(_step_ids)


def prune(fetch_ops: Sequence[Operation], fed: set[Tensor]) -> list[Operation]:
    """The ops needed to compute ``fetch_ops``, in a deterministic topological order.

    A fed tensor cuts the graph: its producer is needed only for its other outputs or when it is a
    target itself. Raises InvalidArgumentError when the needed ops contain a cycle.
    """
    needed: dict[Operation, None] = {}
    stack = list(fetch_ops)
    while stack:
        op = stack.pop()
        if op in needed:
            continue
        needed[op] = None
        nxt = op.attrs.get("next_iteration")  # a loop's Merge needs its back edge (ops/loop.py)
        if nxt:
            stack.append(op.graph.get_operation_by_name(nxt))
        gang = op.attrs.get("group_key") if op.op_def is not None and op.op_def.gang else None
        if gang is not None:  # collective peers run together or not at all
            stack.extend(op.graph.get_collection("collective:" + gang))
        for t in op.inputs:
            if t not in fed:
                stack.append(t.op)
        stack.extend(op.control_inputs)
    # Kahn's algorithm; ties broken by creation order so runs are reproducible.
    preds: dict[Operation, int] = {}
    succs: dict[Operation, list[Operation]] = {op: [] for op in needed}
    for op in needed:
        deps = {t.op for t in op.inputs if t not in fed}
        deps.update(op.control_inputs)
        preds[op] = len(deps)
        for d in deps:
            succs[d].append(op)
    heap = [(op._id, op) for op, n in preds.items() if n == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        _, op = heapq.heappop(heap)
        order.append(op)
        for s in succs[op]:
            preds[s] -= 1
            if preds[s] == 0:
                heapq.heappush(heap, (s._id, s))
    if len(order) != len(needed):
        stuck = sorted((op for op, n in preds.items() if n > 0), key=lambda o: o._id)
        names = ", ".join(op.name for op in stuck[:8])
        raise InvalidArgumentError(f"the graph has a cycle through: {names}")
    return order


def kernel_dtype(op: Operation) -> Any:
    """The dtype a kernel is chosen by: the first input's, else the first output's; ``string``
    when any input or output is a string (string tensors stay on the CPU)."""
    if any(t.dtype.is_string for t in op.inputs) or any(t.dtype.is_string for t in op.outputs):
        return _dt.string
    if op.inputs:
        return op.inputs[0].dtype
    if op.outputs:
        return op.outputs[0].dtype
    return None


def build_prepared(
    order: list[Operation],
    fetches: Sequence[Tensor | Operation],
    fed: Sequence[Tensor],
    device_of: Callable[[Operation], Any],
    context_of: Callable[[Operation, Any], KernelContext],
    input_map: dict | None = None,
    control_map: dict | None = None,
    inline_async: bool = False,
) -> PreparedGraph:
    """Bind kernels and slots for ``order`` (from ``prune`` or ``partition``).

    ``input_map[(op, i)]`` and ``control_map[(op, c)]`` rewire inputs that a partition replaced
    by Recv ops. ``inline_async`` says that async kernels (Send/Recv on a local rendezvous)
    complete inline when run in ``order``, so the straight-line schedule may be used.
    """
    input_map = input_map or {}
    control_map = control_map or {}

    def inputs_of(op: Operation) -> list[Tensor]:
        return [input_map.get((op, i), t) for i, t in enumerate(op.inputs)]

    def controls_of(op: Operation) -> list[Operation]:
        return [control_map.get((op, c), c) for c in op.control_inputs]

    slot_of: dict[Tensor, int] = {}
    feed_slots: dict[Tensor, int] = {}
    for t in fed:
        if t not in feed_slots:
            feed_slots[t] = slot_of[t] = len(slot_of)
    needed_tensors: set[Tensor] = set()
    for op in order:
        needed_tensors.update(inputs_of(op))
    for f in fetches:
        if isinstance(f, Tensor):
            needed_tensors.add(f)
    nodes: list[Node] = []
    node_of: dict[Operation, Node] = {}
    for op in order:
        dev = device_of(op)
        op_def = op.op_def
        kernel = op_def.find_kernel(dev.kernel_type, kernel_dtype(op), op.name)
        node = Node(len(nodes), op, dev, kernel, context_of(op, dev))
        node.input_tensors = inputs_of(op)
        for t in op.outputs:
            if t in needed_tensors and t not in slot_of:
                slot_of[t] = len(slot_of)
            node.outs.append(
                slot_of.get(t) if t in needed_tensors and t not in feed_slots else None
            )
        nodes.append(node)
        node_of[op] = node
    # Inputs, predecessor counts and consumer lists.
    for node in nodes:
        preds: set[int] = set()
        for t in inputs_of(node.op):
            node.ins.append(slot_of[t])
            if t not in feed_slots:
                preds.add(node_of[t.op].index)
        for c in controls_of(node.op):
            preds.add(node_of[c].index)
            node.ctrl_preds.append(node_of[c].index)
        node.n_preds = len(preds)
        for p in preds:
            nodes[p].consumers.append(node.index)
    fetch_slots = [slot_of.get(f) if isinstance(f, Tensor) else None for f in fetches]
    slot_tensor: list[Tensor | None] = [None] * len(slot_of)
    for t, i in slot_of.items():
        slot_tensor[i] = t
    # Last use of each slot in topological order: free it after that node (straight-line path).
    keep = {s for s in fetch_slots if s is not None}
    last_use: dict[int, int] = {}
    for node in nodes:
        for s in node.ins:
            last_use[s] = node.index
    for s, i in last_use.items():
        if s not in keep:
            nodes[i].free_after.append(s)
    for node in nodes:
        node.heavy = bool(getattr(node.device, "is_heavy", None)) and node.device.is_heavy(node)
    straight = all(
        getattr(n.device, "synchronous", False)
        and not n.heavy
        and (not n.is_async or (inline_async and n.kernel.inline_in_order))
        for n in nodes
    )
    # dead values come from a Switch here, or through a _Recv whose _Send runs elsewhere (the
    # partition of another task may hold a cond's Switch)
    sent = {n.op.attrs["key"] for n in nodes if n.op.type == "_Send"}
    has_cond = any(
        n.op.type in ("Switch", "Merge") or (n.op.type == "_Recv" and n.op.attrs["key"] not in sent)
        for n in nodes
    )
    if has_cond:
        straight = False  # dead tensors propagate in the clocked schedule only
        for n in nodes:
            n.dead_rule = _DEAD_RULES.get(n.op.type, 1)
    prep = PreparedGraph(nodes, len(slot_of), feed_slots, fetch_slots, straight)
    prep.has_cond = has_cond
    prep.frames = analyze_frames(nodes, len(slot_of)) if has_cond else None
    slot_node = [None if t is None or t in feed_slots else node_of[t.op] for t in slot_tensor]
    if prep.frames is not None:
        # (a loop's _Recv may have gained a control input: counts and roots follow)
        prep.initial_pending = [n.n_preds for n in nodes]
        prep.roots = [n.index for n in nodes if n.n_preds == 0]
        for fr in prep.frames.frames:
            for s in fr.pinned:
                prep.initial_refs[s] += 1 << 30  # captured by a loop: kept while it runs
        clones = prep.frames.clones
        if clones:  # parallel loops' copies of their nodes and slots (runtime/frames.py)
            prep.extra_nodes = clones
            prep.n_slots += len(prep.frames.clone_slots)
            prep.initial_pending += [k.n_preds for k in clones]
            refs = prep.initial_refs
            refs += [0] * len(prep.frames.clone_slots)
            for k in clones:
                for s in k.ins:
                    if s >= len(slot_of):
                        refs[s] += 1
            slot_tensor += [slot_tensor[s] for s in prep.frames.clone_slots]
            slot_node += [slot_node[s] for s in prep.frames.clone_slots]
            for k in clones:
                for s in k.outs:
                    if s is not None and s >= len(slot_of):
                        slot_node[s] = k
    prep.slot_tensor = slot_tensor
    prep.slot_node = slot_node
    return prep


def run_straight_line(plan: PreparedGraph, vals: list, step: Any) -> None:
    """Run every node inline, in topological order, on the calling thread."""
    node = None
    try:
        for node in plan.nodes:
            ins = node.ins
            if node.is_async:
                r = _run_inline_async(node, [vals[i] for i in ins], step)
            elif len(ins) == 1:
                r = node.fn(node.ctx, vals[ins[0]])
            elif len(ins) == 2:
                r = node.fn(node.ctx, vals[ins[0]], vals[ins[1]])
            else:
                r = node.fn(node.ctx, *[vals[i] for i in ins])
            n_out = node.n_out
            if n_out == 1:
                s = node.outs[0]
                if s is not None:
                    vals[s] = r
            elif n_out:
                for s, v in zip(node.outs, r):
                    if s is not None:
                        vals[s] = v
            for s in node.free_after:
                vals[s] = None
    except OpError as e:
        raise _annotate(e, node, vals) from None
    except Exception as e:
        raise _wrap(e, node, vals) from e


def _run_inline_async(node: Node, inputs: list, step: Any) -> Any:
    box: list = []
    node.fn(node.ctx, step, inputs, lambda r=None, error=None: box.append((r, error)))
    if not box:
        raise FailedPreconditionError(
            f"{node.op.type} {node.op.name!r} did not complete inline (its peer has not run yet)"
        )
    r, err = box[0]
    if err is not None:
        raise err
    return r


def run_step(
    plan: PreparedGraph,
    vals: list,
    step: Any,
    clock: Any = None,
    observer: Any = None,
    timeout_s: float | None = None,
) -> None:
    """Run one step of ``plan``: the one function every session and worker picks a schedule by.

    The straight-line schedule when every node runs inline and nothing watches (no clock, no
    observer); the clocked schedule (``run_clocked``) otherwise.
    """
    if plan.straight_line and clock is None and observer is None:
        run_straight_line(plan, vals, step)
    else:
        run_clocked(plan, vals, step, clock, observer, timeout_s)
    for sync in plan.stream_syncs:  # the kernels a GPU was left running (sync_on_finish)
        sync()


class WallClock:
    """The clock of a real step: completions of nodes handed to other threads (thread pools,
    remote tasks, GPUs) arrive in ``inbox`` from any thread; ``step`` waits for the next one
    (at most ``timeout_s``, then DeadlineExceededError naming ``waiting_for()``)."""

    __slots__ = ("inbox", "sink", "timeout_s", "waiting_for")

    def __init__(self, sink: Callable, timeout_s: float | None, waiting_for: Callable):
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()
        self.sink = sink
        self.timeout_s = timeout_s
        self.waiting_for = waiting_for

    @property
    def now(self) -> float:
        return time.perf_counter()

    def peek(self) -> float:
        return -_INF if not self.inbox.empty() else _INF

    def step(self) -> None:
        try:
            self.sink(self.inbox.get(timeout=self.timeout_s))
        except queue.Empty:
            names = ", ".join(self.waiting_for()[:8])
            raise DeadlineExceededError(
                f"step timed out after {self.timeout_s} s waiting for: {names or 'nothing'}"
            ) from None

    def advance(self, t: float) -> None:
        """Real time advances by itself."""


def run_clocked(
    plan: PreparedGraph,
    vals: list,
    step: Any,
    clock: Any = None,
    observer: Any = None,
    timeout_s: float | None = None,
) -> None:
    """The clocked schedule: hand ready nodes to their devices, continue on completions.

    A node runs inline when its device is synchronous and it is cheap; an asynchronous kernel
    (Send/Recv, queues, collectives) or a node for a thread pool or another device completes
    later through its ``done`` callback; a timed device (a simulated one) says at once when the
    node ends, ``device.start(node, inputs, now) -> (end, result)``, and the step keeps those ends
    in a heap. ``clock`` follows the clock protocol (``hetbed.devices.clock.Clock``: ``now``,
    ``peek``, ``step``, ``advance``); None means a ``WallClock``, a real step whose completions
    come from other threads. The next completion is an asynchronous node that has completed,
    else the earliest timed end when nothing on the clock is earlier (the step's time moves to
    it without a clock event), else whatever the clock's next event brings (a SimPy event: a
    network flow, a Send/Recv delivery; or, on the wall clock, the next completion from another
    thread). The clock is advanced to the step's time only before something else may read or
    schedule on it (an asynchronous node starts, the clock steps, the step ends).

    ``observer`` (see StepObserver) hears when nodes start and finish, which slots die with them
    (memory accounting, tracing) and when the step ends; an exception it raises fails the node
    it concerns. With ``timeout_s`` a real step that waits that long for any completion fails
    with DeadlineExceededError naming the nodes still outstanding.

    On a failure the step is aborted (pending receives fail); a real step still collects what
    other threads owe it before raising, a simulated one raises at once.
    """
    nodes = plan.nodes
    pending = plan.initial_pending[:]
    refs = plan.initial_refs[:]
    ready = plan.roots[::-1]
    timers: list = []  # (end time, seq, node, result, slots whose last consumer is the node)
    completions: deque = deque()  # (node, result, error) of asynchronous nodes, in order
    waiting: dict[int, tuple] = {}  # asynchronous or handed-off node -> its released slots
    wall = clock is None
    if wall:
        clock = WallClock(
            completions.append, timeout_s, lambda: [nodes[i].op.name for i in sorted(waiting)]
        )
        put = clock.inbox.put
        now = tnow = None  # timed devices on a wall clock read their own clocks
    else:
        put = completions.append
        now = tnow = clock.now  # the step's time; the clock catches up before others read it
    peek, advance = clock.peek, clock.advance
    on_start = on_finish = None
    observed = observer is not None  # nodes on a stream then complete when their kernels have
    if observed:
        on_finish = observer.node_finished
        if getattr(type(observer), "node_started", None) is not StepObserver.node_started:
            on_start = observer.node_started
    push, pop = heapq.heappush, heapq.heappop
    seq = 0
    outstanding = 0
    failure: BaseException | None = None
    failed = node = failed_ins = None
    has_cond = plan.has_cond
    dead_nodes: set[int] = set()  # nodes found dead (conditionals only)
    store = _store
    if plan.frames is not None:  # while loops: frames carry values between iterations
        frames = plan.frames.step(
            plan, vals, pending, refs, ready, dead_nodes, _store, fast=observer is None
        )
        store = frames.store
        if plan.extra_nodes or frames.runners:  # loops' copies, simple loops' fast paths
            nodes = nodes + plan.extra_nodes + frames.runners
    while True:
        while ready and failure is None:
            node = nodes[ready.pop()]
            ins = node.ins
            dead = ()
            if len(ins) == 1:
                s = ins[0]
                inputs = [vals[s]]
                left = refs[s] - 1
                refs[s] = left
                if not left:
                    dead = (s,)
                    vals[s] = None
            else:
                inputs = [vals[s] for s in ins]
                for s in ins:
                    left = refs[s] - 1
                    refs[s] = left
                    if not left:
                        dead = (*dead, s)
                        vals[s] = None
            if has_cond and node.dead_rule and _is_dead(node, inputs, dead_nodes):
                # a dead node (an untaken branch of a cond) does not run: its outputs are dead
                dead_nodes.add(node.index)
                r = DEAD if node.n_out == 1 else ((DEAD,) * node.n_out if node.n_out else None)
                if on_finish is not None:
                    on_finish(node, r, dead)
                store(node, r, vals, pending, ready)
                continue
            try:
                if on_start is not None:
                    on_start(node)
                if node.timed:
                    end, r = node.device.start(node, inputs, tnow)
                    push(timers, (end, seq, node, r, dead))
                    seq += 1
                    outstanding += 1
                    continue
                if (
                    node.is_async
                    or node.heavy
                    or not node.device.synchronous
                    or (node.on_stream and observed)
                ):
                    if not wall and clock.now != now:
                        advance(now)
                    waiting[node.index] = dead
                    outstanding += 1
                    done = _completer(put, node)
                    try:
                        if node.is_async:
                            if node.frame_keyed:
                                node.fn(node.ctx, frames.keyed(node, step), inputs, done)
                            else:
                                node.fn(node.ctx, step, inputs, done)
                        else:
                            node.device.run(node, inputs, done, step)
                    except Exception as e:  # noqa: BLE001 - becomes the node's completion
                        # it raised instead of completing (a Send into an aborted rendezvous):
                        # no completion would come, and a real step would wait for it forever
                        done(None, e)
                    continue
                r = node.fn(node.ctx, *inputs)
                if on_finish is not None:
                    on_finish(node, r, dead)
            except Exception as e:  # noqa: BLE001 - reported below with the node
                failure, failed, failed_ins = e, node, inputs
                if type(e) is LoopOpFailed:  # an op of a loop's fast path
                    failure, failed, failed_ins = e.error, e.node, e.inputs
                _abort(step, failure)
                break
            store(node, r, vals, pending, ready)
        if not outstanding or (failure is not None and not wall):
            break
        # The next completion.
        try:
            if completions:
                node, r, err = completions.popleft()
                outstanding -= 1
                dead = waiting.pop(node.index)
                if err is not None:
                    raise err
            elif timers and timers[0][0] < peek():
                end, _seq, node, r, dead = pop(timers)  # nothing on the clock is earlier
                outstanding -= 1
                if not wall:
                    now = tnow = end
            elif wall or peek() != _INF:
                node = None
                if not wall and clock.now != now:
                    advance(now)
                clock.step()
                if not wall:
                    now = tnow = clock.now
                continue
            else:
                node = None
                names = ", ".join(nodes[i].op.name for i in list(waiting)[:8])
                raise FailedPreconditionError(
                    "simulated step is stuck: nothing is scheduled and nodes are still waiting "
                    f"(a Recv without its Send, or a collective missing a participant): {names}"
                )
            if failure is not None:
                continue  # collecting what other threads owe the step
            if on_finish is not None:
                on_finish(node, r, dead)
        except Exception as e:  # noqa: BLE001 - reported below with the node
            if failure is None:
                failure, failed = e, node
                _abort(step, e)
            if isinstance(e, DeadlineExceededError) or not wall:
                break
            continue
        store(node, r, vals, pending, ready)
    if not wall and clock.now != now:
        advance(now)
    if observer is not None:
        observer.step_finished(plan, failure)
    if failure is not None:
        if isinstance(failure, OpError):
            raise _annotate(failure, failed, vals) from None
        raise _wrap(failure, failed, vals, failed_ins) from failure


#: how deadness reaches an op (ops/cond.py): Merge is dead only when every input is; Send and
#: Recv carry a dead value to the other device instead of being dead themselves
_DEAD_RULES = {"Merge": 2, "_Send": 0, "_Recv": 0}


def _is_dead(node: Node, inputs: list, dead_nodes: set) -> bool:
    if node.dead_rule == 2:
        return all(v is DEAD for v in inputs)
    for v in inputs:
        if v is DEAD:
            return True
    for p in node.ctrl_preds:
        if p in dead_nodes:
            return True
    return False


def _store(node: Node, r: Any, vals: list, pending: list, ready: list) -> None:
    """Keep a finished node's outputs and make its consumers ready."""
    n_out = node.n_out
    if n_out == 1:
        s = node.outs[0]
        if s is not None:
            vals[s] = r
    elif n_out:
        for s, v in zip(node.outs, r):
            if s is not None:
                vals[s] = v
    for c in node.consumers:
        left = pending[c] - 1
        pending[c] = left
        if not left:
            ready.append(c)


class StepObserver:
    """Hooks the event-driven schedule calls; subclass and override what you need."""

    def node_started(self, node: Node) -> None:
        """``node`` is about to run (inline) or has been handed to its device."""

    def node_finished(self, node: Node, result: Any, released: Sequence[int] = ()) -> None:
        """``node`` produced ``result`` (one value, a tuple, or None). ``released``: the slots
        whose last consumer was ``node``; their buffers die now (an input stays allocated until
        the op reading it has finished)."""

    def step_finished(self, prepared: PreparedGraph, error: BaseException | None) -> None:
        """The step is over: every node finished (``error`` None) or it failed with ``error``."""


def _abort(step: Any, err: BaseException) -> None:
    """Fail the step's pending receives and waiters so that nothing waits for a peer that will
    not come (a Recv without its Send, a dequeue on an empty queue)."""
    error = AbortedError(f"step aborted: another node failed: {err}")
    cancel = getattr(step, "cancel", None)
    if cancel is not None:
        cancel(error)
        return
    rv = getattr(step, "rendezvous", None)
    if rv is not None:
        rv.abort(error)


def _completer(put: Callable, node: Node) -> Callable:
    """The ``done`` callback of an asynchronous node: ``put((node, result, error))``."""

    def done(result: Any = None, error: BaseException | None = None) -> None:
        put((node, result, error))

    return done
