"""The executor: runs a prepared (pruned, placed, possibly partitioned) graph for one step.

State is split as in TensorFlow's common runtime:

* ``PreparedGraph`` is built once per (graph version, fetches, feeds, targets): the nodes in
  topological order, where each input comes from (a slot index), how many predecessors each
  node waits for, which slots die after each node, and the kernel bound to each node
  (runtime/prepare.py: ``prune``, ``build_prepared``; this module re-exports them).
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

from .errors import (
    AbortedError,
    DeadlineExceededError,
    FailedPreconditionError,
    OpError,
)
from .frame_step import LoopOpFailed
from .node_errors import annotate as _annotate
from .node_errors import wrap as _wrap
from .ops import intraop
from .prepare import (
    KernelContext,
    Node,
    PreparedGraph,
    build_prepared,
    kernel_dtype,
    op_seed_sequence,
    prune,
)
from .registry import DEAD

__all__ = [
    "KernelContext",
    "Node",
    "PreparedGraph",
    "StepObserver",
    "WallClock",
    "build_prepared",
    "kernel_dtype",
    "new_step_id",
    "op_seed_sequence",
    "prune",
    "run_clocked",
    "run_step",
    "run_straight_line",
]


_step_ids = itertools.count(1)
_INF = math.inf


def new_step_id() -> int:
    return next(_step_ids)


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
    observer); the clocked schedule (``run_clocked``) otherwise. A step with kernels that split
    their GEMMs over the intra-op threads runs with numpy's BLAS held at one thread.
    """
    if plan.splits_gemms and intraop.wanted():
        intraop.hold_one_blas_thread()
        try:
            _run_schedule(plan, vals, step, clock, observer, timeout_s)
        finally:
            intraop.release_blas()
    else:
        _run_schedule(plan, vals, step, clock, observer, timeout_s)
    for sync in plan.stream_syncs:  # the kernels a GPU was left running (sync_on_finish)
        sync()


def _run_schedule(plan, vals, step, clock, observer, timeout_s) -> None:
    if plan.straight_line and clock is None and observer is None:
        run_straight_line(plan, vals, step)
    else:
        run_clocked(plan, vals, step, clock, observer, timeout_s)


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
    schedule on it (an asynchronous node starts, the clock steps, the step ends). A clock with
    ``bind(timers, completions)`` runs several steps at once (a simulated cluster's concurrent
    clients, ``simulator/concurrent.py``): it is shown this step's heap of timed ends and its
    completions, and is advanced at every timed end (another step may read it meanwhile).

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
    # asynchronous node with work after its wait -> (its inputs, the step's time it started)
    charged: dict[int, tuple] = {}
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
    # a clock shared by several steps at once (a simulated cluster's concurrent clients) watches
    # each step's timed ends and completions, and has the clock kept at the step's time
    bind = getattr(clock, "bind", None)
    eager = bind is not None
    if eager:
        bind(timers, completions)
    on_start = on_finish = on_done = None
    observed = observer is not None  # nodes on a stream then complete when their kernels have
    if observed:
        on_finish = observer.node_finished
        on_done = getattr(observer, "node_done", None)  # (observers need not subclass it)
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
                    if node.charge is not None:
                        charged[node.index] = (inputs, now)
                    done = _completer(put, node) if on_done is None else _noted(put, node, on_done)
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
                ins = charged.pop(node.index, None)
                if err is not None:
                    raise err
                if ins is not None:  # its work once unblocked, on its device's clock
                    end = node.charge(node, ins[0], r, now, now > ins[1])
                    if end > now:
                        push(timers, (end, seq, node, r, dead))
                        seq += 1
                        outstanding += 1
                        continue
            elif timers and timers[0][0] < peek():
                end, _seq, node, r, dead = pop(timers)  # nothing on the clock is earlier
                outstanding -= 1
                if not wall:
                    now = tnow = end
                    if eager and clock.now != now:
                        advance(now)
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
    if not wall and clock.now < now:  # (a shared clock may have moved past a failed step)
        advance(now)
    if observer is not None:
        observer.step_finished(plan, failure)
    if failure is not None:
        if isinstance(failure, OpError):
            raise _annotate(failure, failed, vals) from None
        raise _wrap(failure, failed, vals, failed_ins) from failure


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

    #: an observer that defines ``node_done(node)`` hears, from whichever thread completes it,
    #: when an asynchronous or handed-off node's kernel calls its ``done`` (``node_finished``
    #: comes later, once the schedule takes the completion: after the nodes ready before it)
    node_done: Callable[[Node], None] | None = None


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


def _noted(put: Callable, node: Node, on_done: Callable[[Node], None]) -> Callable:
    """``_completer``'s callback that first tells the observer (``StepObserver.node_done``)."""

    def done(result: Any = None, error: BaseException | None = None) -> None:
        on_done(node)
        put((node, result, error))

    return done
