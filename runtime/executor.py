"""The executor: runs a prepared (pruned, placed, possibly partitioned) graph for one step.

State is split as in TensorFlow's common runtime:

* ``PreparedGraph`` is built once per (graph version, fetches, feeds, targets): the nodes in
  topological order, where each input comes from (a slot index), how many predecessors each
  node waits for, which slots die after each node, and the kernel bound to each node.
* ``StepState`` (a list of slot values plus pending counts) is made anew for each step, so several
  threads may run steps of one PreparedGraph at once.

Three schedules run the same PreparedGraph:

* straight-line: when every node runs inline on a synchronous device, the nodes run in
  topological order on the calling thread, with no queue at all (the common CPU case);
* event-driven: ready nodes are handed to their device with ``device.run(node, inputs, done)``;
  a device may complete them later, from another thread (thread pools) or from a simulated
  clock. Completions come back through a queue owned by the step; ``wait`` says how to block for
  the next one (a real queue wait, or pumping a discrete-event clock). Timed devices (simulated
  ones) take a short road: ``device.start(node, inputs)`` returns the node's end time and result
  at once and the step keeps those ends in a heap;
* timed (``run_timed``): the event-driven schedule for a step whose nodes all run on timed
  devices or are asynchronous (a simulated step), with the wait inlined (the heap merged with
  the discrete-event clock's own events: network flows, Send/Recv deliveries) and memory
  accounting through the buffer lifetimes in the same loop.
"""

from __future__ import annotations

import heapq
import itertools
import math
import queue
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .errors import (
    AbortedError,
    DeadlineExceededError,
    FailedPreconditionError,
    InvalidArgumentError,
    OpError,
    ResourceExhaustedError,
    UnimplementedError,
)
from .graph import Operation, Tensor
from .registry import Kernel


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
        self.input_tensors: list[Tensor] = list(op.inputs)
        self.memo: Any = None  # free for the device's per-node cache (simulated devices' plans)

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
    """The dtype a kernel is chosen by: the first input's, else the first output's."""
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
    prep = PreparedGraph(nodes, len(slot_of), feed_slots, fetch_slots, straight)
    prep.slot_tensor = slot_tensor
    prep.slot_node = [None if t is None or t in feed_slots else node_of[t.op] for t in slot_tensor]
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


def run_event_driven(
    plan: PreparedGraph,
    vals: list,
    step: Any,
    wait: Callable | None,
    timeout_s: float | None = None,
    observer: Any = None,
) -> None:
    """Hand ready nodes to their devices; collect completions until every node has finished.

    With ``timeout_s``, a step that waits that long for any completion fails with
    DeadlineExceededError naming the nodes still outstanding (instead of hanging).
    ``observer`` (see StepObserver) hears when nodes start and finish and which buffers die with
    them: tracing and memory accounting hang off it; an exception it raises fails the node it
    concerns.
    """
    nodes = plan.nodes
    timers: list = []  # (end time, seq, node, result) of nodes running on timed devices
    seq = 0
    pending = list(plan.initial_pending)
    refs = list(plan.initial_refs)
    ready = list(reversed(plan.roots))
    completions: queue.SimpleQueue = queue.SimpleQueue()
    outstanding = 0
    failure: BaseException | None = None
    failed_node = None
    started: set[int] = set()
    on_start = None
    if observer is not None and type(observer).node_started is not StepObserver.node_started:
        on_start = observer.node_started
    if wait is None:

        def wait(q: queue.SimpleQueue, timers: list) -> tuple:
            if timers and q.empty():  # timed devices without a clock: complete in time order
                _end, _seq, node, r = heapq.heappop(timers)
                return node, r, None
            try:
                return q.get(timeout=timeout_s)
            except queue.Empty:
                names = ", ".join(nodes[i].op.name for i in sorted(started)[:8])
                err = DeadlineExceededError(
                    f"step timed out after {timeout_s} s waiting for: {names or 'nothing'}"
                )
                _abort(step, err)
                raise err from None

    released: dict[int, list[int]] = {}  # node -> slots it was the last consumer of

    def store(node: Node, r: Any) -> None:
        if observer is not None:
            observer.node_finished(node, r, released.pop(node.index, ()) if released else ())
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
            pending[c] -= 1
            if pending[c] == 0:
                ready.append(c)

    while True:
        while ready and failure is None:
            node = nodes[ready.pop()]
            inputs = [vals[i] for i in node.ins]
            for s in node.ins:
                refs[s] -= 1
                if refs[s] == 0:
                    if observer is not None:
                        released.setdefault(node.index, []).append(s)
                    vals[s] = None
            if on_start is not None:
                on_start(node)
            if node.timed:
                try:
                    end, r = node.device.start(node, inputs)
                except Exception as e:  # noqa: BLE001 - reported below with the node
                    failure, failed_node = e, node
                    _abort(step, e)
                    break
                outstanding += 1
                heapq.heappush(timers, (end, seq, node, r))
                seq += 1
            elif node.is_async:
                outstanding += 1
                started.add(node.index)
                node.fn(node.ctx, step, inputs, _completer(completions.put, node))
            elif node.heavy or not node.device.synchronous:
                outstanding += 1
                started.add(node.index)
                node.device.run(node, inputs, _completer(completions.put, node), step)
            else:
                try:
                    r = node.fn(node.ctx, *inputs)
                    store(node, r)
                except Exception as e:  # noqa: BLE001 - reported below with the node
                    failure, failed_node = e, node
                    _abort(step, e)
                    break
        if outstanding == 0:
            break
        node, r, err = wait(completions, timers)
        outstanding -= 1
        started.discard(node.index)
        if err is not None:
            if failure is None:
                failure, failed_node = err, node
                _abort(step, err)
            continue
        if failure is None:
            try:
                store(node, r)
            except Exception as e:  # noqa: BLE001 - an observer refusing a result (e.g. OOM)
                failure, failed_node = e, node
                _abort(step, e)
    if failure is not None:
        if isinstance(failure, OpError):
            raise _annotate(failure, failed_node, vals) from None
        raise _wrap(failure, failed_node, vals) from failure


def run_timed(
    plan: PreparedGraph,
    vals: list,
    step: Any,
    clock: Any,
    charges: Sequence[int] | None = None,
    trace: list | None = None,
) -> None:
    """The event-driven schedule specialised for a step whose nodes all run on timed devices or
    are asynchronous (Send/Recv through the step's rendezvous): a simulated step.

    Same semantics as ``run_event_driven`` (ready nodes in the same order, inputs released at the
    same points), with the wait inlined: ``clock`` follows the clock protocol
    (``hetbed.devices.clock.Clock``: ``now``, ``peek``, ``step``, ``advance``). A timed node's
    completion is taken from the step's heap when nothing on the clock is earlier (the step's
    time moves to its end without a clock event); otherwise the clock steps (network flows,
    Send/Recv deliveries), which may complete asynchronous nodes. The clock is advanced to the
    step's time only before something else may read or schedule on it (an asynchronous node
    starts, the clock steps, the step ends): devices are told the time by ``start(node,
    inputs, now)``.

    ``charges`` turns on memory accounting through the buffer lifetimes: when node ``i`` with
    ``charges[i] == ALLOCATES`` finishes, the bytes of its new outputs are allocated on its device
    (``device.alloc(nbytes, op)``, which may raise the device's out-of-memory error); the outputs
    of a node with ``VIEWS`` share its input 0's buffer. A buffer is freed on its producer's device
    (``device.free(nbytes)``) when the last consumer of the last slot holding it has finished;
    what is still charged when the step ends (fetched values, or everything after a failure) is
    freed then.

    ``trace``, when given, receives ``(node, inputs, result)`` for each timed node as it starts
    and ``(node, None, result)`` for each asynchronous node as it completes (what a simulator
    needs to replay the step's timing without its values).
    """
    nodes = plan.nodes
    pending = plan.initial_pending[:]
    refs = plan.initial_refs[:]
    ready = plan.roots[::-1]
    timers: list = []  # (end time, seq, node, result, slots whose last consumer is the node)
    completions: list = []  # (node, result, error) of asynchronous nodes, in completion order
    waiting: dict[int, tuple] = {}  # asynchronous node started -> its released slots
    peek, advance = clock.peek, clock.advance
    now = clock.now  # the step's time; the clock catches up before anything else reads it
    push, pop = heapq.heappush, heapq.heappop
    charged = owner = shares = None
    if charges is not None:
        charged = [0] * plan.n_slots  # bytes charged for the buffer each slot owns
        owner = list(range(plan.n_slots))  # the slot whose buffer a slot uses (views: another)
        shares = [0] * plan.n_slots  # live slots sharing a buffer, beyond the first
    slot_node = plan.slot_node
    seq = 0
    outstanding = 0
    node = None
    try:
        while True:
            while ready:
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
                if node.timed:
                    end, r = node.device.start(node, inputs, now)
                    if trace is not None:
                        trace.append((node, inputs, r))
                    push(timers, (end, seq, node, r, dead))
                    seq += 1
                else:
                    if clock.now != now:
                        advance(now)
                    waiting[node.index] = dead
                    node.fn(node.ctx, step, inputs, _completer(completions.append, node))
                outstanding += 1
            if not outstanding:
                break
            # The next completion in simulated time.
            if completions:
                node, r, err = completions.pop(0)
                dead = waiting.pop(node.index)
                if err is not None:
                    raise err
                if trace is not None:
                    trace.append((node, None, r))
            elif timers and timers[0][0] < peek():
                now, _seq, node, r, dead = pop(timers)  # nothing on the clock is earlier
            elif peek() != _INF:
                node = None
                if clock.now != now:
                    advance(now)
                clock.step()
                now = clock.now
                continue
            else:
                node = None
                names = ", ".join(nodes[i].op.name for i in list(waiting)[:8])
                raise FailedPreconditionError(
                    "simulated step is stuck: nothing is scheduled and nodes are still waiting "
                    f"(a Recv without its Send, or a collective missing a participant): {names}"
                )
            outstanding -= 1
            n_out = node.n_out
            if n_out == 1:
                s = node.outs[0]
                if s is not None:
                    vals[s] = r
            elif n_out:
                for s, v in zip(node.outs, r):
                    if s is not None:
                        vals[s] = v
            if charged is not None:
                how = charges[node.index]
                if how == ALLOCATES:
                    if n_out == 1:
                        if s is not None:
                            n = getattr(r, "nbytes", 0)
                            if n:
                                node.device.alloc(n, node.op)  # may raise the simulated OOM
                                charged[s] = n
                    else:
                        _charge_outputs(node, r, charged)
                elif how == VIEWS:  # the outputs share input 0's buffer and keep it alive
                    b = owner[node.ins[0]]
                    for s in node.outs:
                        if s is not None:
                            owner[s] = b
                            shares[b] += 1
                for s in dead:
                    b = owner[s]
                    if shares[b]:
                        shares[b] -= 1  # another slot still holds the buffer
                    else:
                        n = charged[b]
                        if n:
                            charged[b] = 0
                            slot_node[b].device.free(n)
            for c in node.consumers:
                left = pending[c] - 1
                pending[c] = left
                if not left:
                    ready.append(c)
        if clock.now != now:
            advance(now)
    except Exception as e:
        if clock.now != now:
            advance(now)
        _abort(step, e)
        if charged is not None:
            _free(charged, slot_node, range(len(charged)))
        if isinstance(e, OpError):
            raise _annotate(e, node, vals) from None
        raise _wrap(e, node, vals) from e
    if charged is not None:  # what is left is fetched: it goes to the client, the step ends
        _free(charged, slot_node, {owner[s] for s in plan.fetch_slots if s is not None})


#: ``charges`` values of ``run_timed``: a node's outputs are new buffers, or views of input 0
ALLOCATES, VIEWS = 1, 2


def _charge_outputs(node: Node, r: Any, charged: list) -> None:
    """Allocate the new buffers of a multi-output node on its device (all or none)."""
    sizes = [(s, getattr(v, "nbytes", 0)) for s, v in zip(node.outs, r) if s is not None]
    total = sum(n for _s, n in sizes)
    if total:
        node.device.alloc(total, node.op)  # may raise the simulated OOM
        for s, n in sizes:
            charged[s] = n


def _free(charged: list, slot_node: list, slots: Any) -> None:
    """Free the buffers of ``slots`` still charged to their devices (the step is over)."""
    for s in slots:
        if charged[s]:
            slot_node[s].device.free(charged[s])
            charged[s] = 0


class StepObserver:
    """Hooks the event-driven schedule calls; subclass and override what you need."""

    def node_started(self, node: Node) -> None:
        """``node`` is about to run (inline) or has been handed to its device."""

    def node_finished(self, node: Node, result: Any, released: Sequence[int] = ()) -> None:
        """``node`` produced ``result`` (one value, a tuple, or None). ``released``: the slots
        whose last consumer was ``node``; their buffers die now (an input stays allocated until
        the op reading it has finished)."""


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


def _annotate(e: OpError, node: Node | None, vals: list) -> OpError:
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


def _wrap(e: Exception, node: Node | None, vals: list) -> OpError:
    cls = next((v for k, v in _WRAP.items() if isinstance(e, k)), FailedPreconditionError)
    if node is None:
        return cls(str(e))
    shapes = ", ".join(
        str(getattr(vals[s], "shape", type(vals[s]).__name__)) if vals[s] is not None else "?"
        for s in node.ins
    )
    msg = (
        f"{type(e).__name__} in {node.op.type} {node.op.name!r} on "
        f"{getattr(node.device, 'name', '?')}: {e}\n  in {node.op.describe()}\n"
        f"  runtime input shapes: [{shapes}]"
    )
    return cls(msg, node.op)
