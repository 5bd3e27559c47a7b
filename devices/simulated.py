"""A simulated device: runs the same nodes as a real one, on a SimPy clock.

``run(node, inputs, done)`` queues the node on the device's stream (one kernel at a time per
stream), asks the cost model how long it takes, and completes it that much simulated time later.
In hybrid mode the node's real kernel also runs (numpy), so the step yields correct numbers as
well as simulated times; otherwise outputs are ``SimValue`` placeholders that carry only shape and
dtype. The device takes a SimPy environment as its clock and knows nothing of clusters or links.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .base import Device
from .costmodel import CostModel, DevicePerf, Roofline, roofline_seconds
from .errors import ResourceExhaustedError, UnimplementedError

_SIGS: dict = {}  # (shape, dtype[, small int bytes]) -> a small int naming that signature


def _intern(key: tuple) -> int:
    sig = _SIGS.get(key)
    if sig is None:
        sig = _SIGS[key] = len(_SIGS)
    return sig


class SimValue:
    """A tensor value known only by shape and dtype (pure simulation)."""

    __slots__ = ("shape", "dtype", "size", "nbytes", "sig")

    def __init__(self, shape: tuple, dtype: Any):
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        n = 1
        for d in self.shape:
            n *= d
        self.size = n
        self.nbytes = n * self.dtype.itemsize
        #: an int naming (shape, dtype): what a simulated device keys its per-node plans by
        self.sig = _intern((self.shape, self.dtype.str))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def astype(self, dtype: Any, copy: bool = True) -> SimValue:
        return SimValue(self.shape, dtype)

    def __repr__(self) -> str:
        return f"SimValue(shape={self.shape}, dtype={self.dtype})"


_SMALL = 256  # bytes: integer tensors this small are computed for real (shape arithmetic)


def _static_shapes(op: Any, in_shapes: list, inputs: Any, values: Any) -> list[tuple]:
    """Output shapes from the graph's static shapes (unknown dimensions as 1); a simulator
    passes a better ``infer_shapes`` (concrete shape inference) to the device."""
    return [tuple(1 if d is None else d for d in (t.shape.dims or ())) for t in op.outputs]


def _signature(v: Any) -> int:
    """The int naming what a device's plan for a node depends on in input ``v``: its shape and
    dtype, and its values when it is a small integer tensor (shape arithmetic)."""
    cls = v.__class__
    if cls is SimValue:
        return v.sig
    if cls is np.ndarray:
        dt = v.dtype
        key = (
            (v.shape, dt, v.tobytes()) if dt.kind in "iu" and v.nbytes <= _SMALL else (v.shape, dt)
        )
    else:
        key = (value_shape(v), cls.__name__, str(getattr(v, "dtype", None)))
    return _intern(key)


def _small_int(v: Any) -> Any:
    """``v`` when it is a small real integer or bool array (shape arithmetic, conditions)."""
    if isinstance(v, np.ndarray) and v.dtype.kind in "iub" and v.nbytes <= _SMALL:
        return v
    if isinstance(v, np.generic) and v.dtype.kind in "iub":  # a numpy scalar (a loop counter)
        return np.asarray(v)
    return None


#: ops a shape-only simulation still runs for real: their kernels keep only synchronization
#: state (how many gradients an accumulator holds, which step it is on; a queue's elements,
#: placeholders or values) and accept placeholders, so that synchronous training
#: (SyncReplicasOptimizer's accumulators and token queue) runs shape-only; their cost is still
#: the cost model's
_SYNC_STATE_OPS = frozenset(
    (
        "ConditionalAccumulator",
        "AccumulatorApplyGradient",
        "SparseConditionalAccumulator",
        "SparseAccumulatorApplyGradient",
        "AccumulatorSetGlobalStep",
        "AccumulatorNumAccumulated",
        "AccumulatorCancelTakes",
        "FIFOQueue",
        "PaddingFIFOQueue",
        "RandomShuffleQueue",
        "QueueSize",
    )
)

#: asynchronous kernels with work of their own once unblocked, which ``charge`` books
WORK_AFTER_WAIT = frozenset(("AccumulatorTakeGradient", "SparseAccumulatorTakeGradient"))
#: asynchronous kernels that wait on state another step changes (a queue's elements, an
#: accumulator's gradients): one that blocked is woken by that step's thread, and its own thread
#: pays the hand-off (``DevicePerf.wake_s``) before its successors run (``charge``)
WAKE_AFTER_WAIT = frozenset(
    (
        "AccumulatorTakeGradient",
        "SparseAccumulatorTakeGradient",
        "QueueDequeue",
        "QueueDequeueMany",
        "QueueDequeueUpTo",
    )
)

#: ops that route values (conditionals, loops, a loop gradient's stacks): they take no time and
#: always run for real, passing shape-only placeholders through as they are
_CONTROL_OPS = frozenset(
    (
        "Switch",
        "Merge",
        "Enter",
        "Exit",
        "NextIteration",
        "LoopCond",
        "LoopResult",
        "StackV2",
        "StackPush",
        "StackPop",
        "StackSize",
    )
)


def _alike_key(node: Any) -> tuple | None:
    """What a node's plan depends on besides its inputs' signature, as a key: its op's
    definition, type and attrs and the static shapes and dtypes of its input and output
    tensors; None where a plan must be its own: control-flow ops, an op with an attr that is
    no key (an array), or with an output of a shape the graph does not know in full (shape
    inference may then read the graph around it). A Const's value is no part of it: the node
    computes its value for real, and its plan holds only its time."""
    op = node.op
    if op.type in _CONTROL_OPS:
        return None
    outs = []
    for t in op.outputs:
        dims = t.shape.dims
        if dims is None or None in dims:
            return None
        outs.append((t.dtype.name, dims))  # (names: a DType hashes and compares in Python)
    attrs = op.attrs
    if op.type == "Const":  # (computed for real: its plan does not depend on its value)
        attrs = {k: v for k, v in attrs.items() if k != "value"}
    if attrs:
        a = tuple(sorted(attrs.items()))
        try:
            hash(a)
        except TypeError:
            return None
    else:
        a = ()
    ins = tuple([(t.dtype.name, t.shape.dims) for t in node.input_tensors])
    return (op.op_def, op.type, a, ins, tuple(outs))


def _metadata_op(node: Any, inputs: list) -> bool:
    """Ops a shape-only simulation still computes: shapes of values, and arithmetic on small
    real integer tensors (so that shapes computed in the graph stay exact)."""
    op = node.op
    if op.type in ("Shape", "Size", "Rank"):
        return True
    if op.op_def.stateful or not inputs:
        return op.type == "Const"
    return all(_small_int(v) is not None for v in inputs)


def value_shape(v: Any) -> tuple:
    s = getattr(v, "shape", None)
    if s is None:
        if hasattr(v, "value"):  # a VarHandle: its buffer
            inner = v.value
            return (
                tuple(getattr(inner, "shape", ()))
                if inner is not None
                else tuple(d or 1 for d in (v.shape.dims or ()))
            )
        return ()
    return tuple(s)


def value_nbytes(v: Any) -> int:
    n = getattr(v, "nbytes", None)
    return int(n) if n is not None else 0


#: a kernel no longer than this many dispatch costs runs on one core (at least half of its time
#: is its dispatch, not parallel work); ``default_cores``
ONE_CORE_DISPATCHES = 2.0


def measured_cores(
    cost_model: Any, op: Any, in_shapes: Sequence[tuple], cores: int, seconds: float | None = None
) -> int | None:
    """The cores of a host of ``cores`` a kernel of ``op`` keeps busy as ``cost_model`` measured
    it (its ``cores_used``, rounded, within 1 .. ``cores``); else, for a kernel of ``seconds``
    shorter than the model's ``short_kernel_s`` (a measured profile: the kernels it saw that
    short ran on the calling thread), one; None where it says nothing."""
    measured = getattr(cost_model, "cores_used", None)  # (a duck-typed model may lack it)
    used = measured(op, in_shapes) if measured is not None else None
    if used is None:
        short = getattr(cost_model, "short_kernel_s", None)
        if short is not None and seconds is not None and seconds < short:
            return 1
        return None
    return max(1, min(int(cores), round(used)))


def default_cores(seconds: float, one_core_s: float, cores: int) -> int:
    """The cores of a host of ``cores`` an unmeasured kernel of ``seconds`` keeps busy: one when
    it is mostly its dispatch (``seconds <= one_core_s``, ``ONE_CORE_DISPATCHES`` dispatch
    costs), all of them otherwise."""
    return 1 if seconds <= one_core_s else int(cores)


def book_copy(cores: Any, now: float, seconds: float, shares: tuple[float, float]) -> float:
    """A stream of ``seconds`` between two tasks of one machine, which its kernel copies at
    both ends: the sender's and the receiver's CPU ``shares`` of a core for that long, each
    booked on one of the machine's ``cores`` (HostCores) from ``now``; returns when the
    later ends."""
    send, recv = shares
    cores.copied_s += seconds * (send + recv)
    end = cores.reserve(now, seconds * send, 1)
    if recv > 0.0:
        end = max(end, cores.reserve(now, seconds * recv, 1))
    return end


class SoftwareWork:
    """What a device's record names for CPU work that is not a kernel (handling a message):
    ``name`` and ``type`` as an operation's (RunRecord.ops shows them)."""

    __slots__ = ("name", "type")

    def __init__(self, name: str, type: str):
        self.name = name
        self.type = type


#: what a device's record names for a blocked kernel's thread being woken (``charge``)
_WAKE_WORK = SoftwareWork("thread wake-up", "Wake")
#: ... and for a runtime thread handed the interpreter after waiting for another (``occupy``)
_HANDOFF_WORK = SoftwareWork("interpreter hand-off", "Handoff")


class HostCores:
    """The cores of one simulated host, shared by the tasks that run on it.

    ``reserve(now, seconds, width)`` books ``width`` cores (1 for single-threaded work such as
    handling a message; all of them for a CPU kernel, which the roofline prices at the whole
    host's peak) for ``seconds`` at the earliest time at or after ``now`` when that many are
    free for that long, and returns the end. The cores are alike and a process may run on
    any of them from one moment to the next (the OS migrates it), so a booking needs only that
    no more than ``cores - width`` are busy at any time it covers, not one core free
    throughout. Work may be booked ahead of the clock (a message that will arrive later), so
    a booking fills the first gap long enough, before or between bookings made earlier. Tasks
    of one host therefore share its cores: their kernels do not overlap each other's or any
    message handling, and work that is ready runs while a core is free. ``clock`` (with
    ``now``) lets it forget bookings that ended in the past. Raises ValueError for fewer than
    one core.
    """

    __slots__ = ("cores", "busy", "all_free", "clock", "copied_s", "_longest", "_hints", "_forgot")

    def __init__(self, cores: int, clock: Any = None):
        if isinstance(cores, bool) or int(cores) != cores or cores < 1:
            raise ValueError(f"a host needs an integer number of cores >= 1, got {cores!r}")
        self.cores = int(cores)
        self.busy: list[list[float]] = []  # [start, end, cores] of each booking, by start
        self.all_free = 0.0  # the end of the last booking
        self.clock = clock
        self.copied_s = 0.0  # CPU seconds of the streams' copies booked (``book_copy``)
        self._longest = 0.0  # the longest booking's length (back-to-back ones are joined
        # only up to it): none that starts earlier than ``t - _longest`` covers ``t``
        # what earlier searches found, by the number of cores they allowed busy: {seconds:
        # (now, start)}: no start in [now, start) was free for ``seconds`` then, nor can be
        # later (bookings are only ever added; forgetting drops only ones that ended before
        # the clock). A search for as long or longer from as late or later begins there.
        self._hints: dict[int, dict[float, tuple[float, float]]] = {}
        self._forgot = -math.inf  # the clock's time at the last ``_forget``

    def clear(self, all_free: float) -> None:
        """Forget every booking; the cores are busy (with work no longer itemized) until
        ``all_free``."""
        self.busy.clear()
        self._hints.clear()
        self._longest = 0.0
        self.all_free = all_free

    def reserve(self, now: float, seconds: float, width: int = 1) -> float:
        """Book ``seconds`` on ``width`` cores from the first time >= ``now`` they are all free
        for that long; returns the end."""
        return self.book(now, seconds, width) + seconds

    def book(self, now: float, seconds: float, width: int = 1) -> float:
        """``reserve``, returning the start."""
        if seconds <= 0.0:
            return now
        width = min(width, self.cores)
        busy = self.busy
        if now >= self.all_free:  # nothing booked from now on: the common case
            start = now
            if seconds > self._longest:
                self._longest = seconds
            last = busy[-1] if busy else None
            if (  # back to back: one booking, as long as it is no longer than the longest
                last is not None
                and last[1] == now
                and last[2] == width
                and now + seconds - last[0] <= self._longest
            ):
                last[1] = now + seconds
            else:
                busy.append([now, now + seconds, width])
        else:
            self._forget()
            start = self._first(now, seconds, self.cores - width)
            entry = [start, start + seconds, width]
            if not busy or start >= busy[-1][0]:
                busy.append(entry)
            else:
                bisect.insort(busy, entry)
        end = start + seconds
        if end - start > self._longest:
            self._longest = end - start
        if end <= self._forgot:  # (a booking already past: the next ``_forget`` drops it)
            self._forgot = -math.inf
        if end > self.all_free:
            self.all_free = end
        if len(busy) > 32:
            self._forget()
        return start

    def first_free(self, now: float, seconds: float) -> float:
        """The first time >= ``now`` one core is free for ``seconds`` (nothing is booked)."""
        if now >= self.all_free:
            return now
        self._forget()
        return self._first(now, seconds, self.cores - 1)

    def _first(self, now: float, seconds: float, most: int) -> float:
        """The first start >= ``now`` with at most ``most`` cores busy for ``seconds`` after it:
        ``now`` or the end of a booking (where the count can fall). One sweep over the
        bookings' starts and ends from where an earlier search shows none can be earlier."""
        t = now
        hints = self._hints.setdefault(most, {})
        clock = self.clock
        if clock is None or now >= clock.now:
            for s0, (n0, t0) in hints.items():
                if t0 > t and s0 <= seconds and n0 <= now:
                    t = t0
        busy = self.busy
        # bookings that may cover ``t`` or start after it
        lo = bisect.bisect_left(busy, [t - self._longest])
        cur = 0  # cores busy at ``t``
        ev = []  # (time, change in busy cores) after ``t``
        for b, e, w in busy[lo:]:
            if e <= t:
                continue
            if b <= t:
                cur += w
            else:
                ev.append((b, w))
            ev.append((e, -w))
        ev.sort()
        start = t if cur <= most else None  # where the current run at or under ``most`` began
        i, n = 0, len(ev)
        while i < n:
            x = ev[i][0]
            if start is not None and x >= start + seconds:
                break
            while i < n and ev[i][0] == x:
                cur += ev[i][1]
                i += 1
            if cur > most:
                start = None
            elif start is None:
                start = x
        assert start is not None  # (every booking ends: the count falls to 0 <= most)
        if clock is None or now >= clock.now:
            if len(hints) >= 16 and seconds not in hints:
                hints.clear()
            hints[seconds] = (now, start)
        return start

    def _forget(self) -> None:
        if self.clock is None:
            return
        past = self.clock.now
        if past == self._forgot:  # (nothing booked since has ended by then: see ``book``)
            return
        self._forgot = past
        busy = self.busy
        i = bisect.bisect_left(busy, [past])  # (those starting later have not ended)
        keep = [x for x in busy[:i] if x[1] > past]
        if len(keep) != i:
            busy[:i] = keep


class SimulatedDevice(Device):
    """A device of a simulated cluster (``kind`` "cpu", "gpu" or "tpu")."""

    synchronous = False
    timed = True  # the executor calls ``start`` and keeps the end times (see executor.py)
    xp = np

    def __init__(
        self,
        name: str,
        perf: DevicePerf,
        env: Any,
        kind: str = "gpu",
        cost_model: CostModel | None = None,
        hybrid: bool = False,
        memory_bytes: float | None = None,
        infer_shapes: Callable | None = None,
    ):
        super().__init__(name, int(memory_bytes or perf.memory_bytes))
        self.device_type = kind
        self.kernel_type = "cpu" if kind == "cpu" else "gpu"  # which kernels it can run
        self.perf_spec = perf
        self.env = env
        self._cost_model = cost_model or Roofline()
        self._hybrid = hybrid
        self.busy_until = 0.0
        self.busy_s = 0.0
        #: seconds of kernels booked on fewer than all of the host's cores (single-threaded)
        self.narrow_s = 0.0
        self.records: list[tuple] = []  # (operation, start_s, end_s)
        self.peak_bytes = 0
        self.persistent_bytes = 0
        self.infer_shapes = infer_shapes or _static_shapes
        self._planned: list = []  # nodes holding plans of this device (see ``start``)
        self._alike: dict = {}  # plans by (``_alike_key``, input signature): ``_plan_alike``
        self.plan_generation = 0  # how many times its plans were forgotten (a new cost model)
        #: the cores of the host a cpu device computes on (None: its own stream only); a cluster
        #: gives the tasks of one host the same object, so that they share the cores
        self.host_cores: HostCores | None = None
        self.handler_free = 0.0  # when this task's message handler is next free (``occupy``)
        self.handler_owner: Any = None  # whose step's work it took last (``occupy``)
        #: (as a sender, as a receiver) CPU seconds per second of a loopback stream between
        #: tasks of one machine (``book_copy``); a Cluster sets them from the task's link
        self.copy_shares = (1.0, 0.0)
        self.loop_rate = 0.0  # bytes/s its runtime sends itself (SimSession's fed values)
        if kind == "cpu":
            self.host_cores = HostCores(perf.cores or 1, env)
        #: kernels up to this long run on one of the host's cores (``default_cores``)
        self._one_core_s = ONE_CORE_DISPATCHES * perf.launch_overhead_s

    # ---- the Device interface ----------------------------------------------------------
    #: the asynchronous op types whose nodes the executor hands to ``charge`` once unblocked
    work_after_wait = WORK_AFTER_WAIT | WAKE_AFTER_WAIT

    def start(self, node: Any, inputs: list, now: float | None = None) -> tuple[float, Any]:
        """Queue ``node`` on this device's stream at time ``now`` (the clock's time when not
        given); returns (simulated end time, result). The executor completes the node when its
        step's time reaches the end time."""
        if len(inputs) == 1:  # the key is an int for one input, a tuple of ints otherwise
            v = inputs[0]
            key = v.sig if v.__class__ is SimValue else _signature(v)
        else:
            key = tuple(map(_signature, inputs))
        plans = node.memo  # this node's plans by input signature (a node runs on one device)
        if plans is None:
            plans = node.memo = {}
            self._planned.append(node)
        plan = plans.get(key)
        if plan is None:
            plan = plans[key] = self._plan_alike(node, inputs, key)
        dur, placeholders, compute, width = plan
        if not compute:
            return self._book(node, dur, self.env.now if now is None else now, width), placeholders
        ctx = node.ctx
        result = node.fn(ctx, *inputs)
        if ctx.idle:  # the kernel found nothing to do (a stale gradient dropped): its dispatch
            ctx.idle = False
            dur, width = min(dur, self.perf_spec.launch_overhead_s), None
        return self._book(node, dur, self.env.now if now is None else now, width), result

    def charge(
        self, node: Any, inputs: list, result: Any, now: float, waited: bool = False
    ) -> float:
        """Book the work an asynchronous kernel of ``work_after_wait`` does once it is unblocked
        from ``now``; returns when it ends. A kernel of ``WAKE_AFTER_WAIT`` that ``waited`` (it
        blocked: another step's thread woke it) first pays the hand-off of one thread to
        another, ``wake_s`` of one core; then an accumulator's take (``WORK_AFTER_WAIT``)
        averages the gradients it summed, priced by the cost model like any op (its outputs'
        shapes are those of ``result``, what it hands out). A dequeue hands out an element
        without touching its bytes; Send and Recv cost nothing here (their costs are the
        messages')."""
        wake = self.perf_spec.wake_s
        if waited and wake > 0.0 and node.op.type in WAKE_AFTER_WAIT:
            now = self.occupy(now, wake, _WAKE_WORK)
        if node.op.type not in WORK_AFTER_WAIT:
            return now
        plans = node.memo
        if plans is None:
            plans = node.memo = {}
            self._planned.append(node)
        outs = list(result) if isinstance(result, tuple) else [result]
        key = ("after wait", *map(_signature, inputs), *map(_signature, outs))
        plan = plans.get(key)
        if plan is None:
            in_shapes = [value_shape(v) for v in inputs]
            out_shapes = [value_shape(v) for v in outs]
            dur = self.cost_model.duration(node.op, in_shapes, out_shapes, self.perf_spec)
            width = self._width(node.op, in_shapes, dur)
            plan = plans[key] = (dur, None, False, width)
        return self._book(node, plan[0], now, plan[3])

    def _width(self, op: Any, in_shapes: Sequence[tuple], seconds: float) -> int | None:
        """The host cores a kernel of ``seconds`` keeps busy, where the cost model says
        (``measured_cores``; None: the rule in ``_book``)."""
        if self.host_cores is None:
            return None
        return measured_cores(self._cost_model, op, in_shapes, self.host_cores.cores, seconds)

    def _book(self, node: Any, dur: float, now: float, width: int | None = None) -> float:
        """Queue ``dur`` seconds of ``node`` on this device's stream from ``now``: its end.
        On a host's cores it takes ``width`` of them (None: one for a kernel that is mostly
        its dispatch, all for any other)."""
        begin = now if now > self.busy_until else self.busy_until
        hc = self.host_cores
        if hc is None or dur <= 0.0:
            end = begin + dur
        else:  # on the host's cores, around the work booked there (other tasks, messages)
            if width is None:
                width = default_cores(dur, self._one_core_s, hc.cores)
            if width < hc.cores:
                self.narrow_s += dur
            begin = hc.book(begin, dur, width)
            end = begin + dur
        self.busy_until = end
        self.busy_s += dur
        self.records.append((node.op, begin, end))
        return end

    def occupy(self, now: float, seconds: float, what: SoftwareWork, owner: Any = None) -> float:
        """Spend ``seconds`` of single-threaded CPU time (``what``: handling a message) on this
        device's host from ``now`` on; returns when it ends. A task handles its messages one at
        a time (one runtime thread, as a Python process under its interpreter lock), each on
        whichever of its host's cores frees first, behind the work already queued there. Work
        of one client's steps (``owner``: its session) that finds another client's running
        waits for the interpreter, and its thread is then handed it: the hand-off of one thread
        to another (``wake_s`` of one core, as a blocked kernel's wake-up; recorded as
        "Handoff") comes first. A step's own messages follow each other without one (measured:
        steps of one client fit without it, and a second client thread of the worker's
        process adds no throughput; ``simulator/handoffs.py``). On a device without host cores
        (an accelerator) it queues on the device's own stream."""
        hc = self.host_cores
        if hc is None:
            begin = now if now > self.busy_until else self.busy_until
            end = self.busy_until = begin + seconds
        else:
            if self.handler_free > now:
                now = self.handler_free
                wake = self.perf_spec.wake_s
                if wake > 0.0 and owner is not None and owner is not self.handler_owner:
                    begin = hc.book(now, wake, 1)
                    now = begin + wake
                    self.busy_s += wake
                    self.records.append((_HANDOFF_WORK, begin, now))
            begin = hc.book(now, seconds, 1)
            end = self.handler_free = begin + seconds
            if owner is not None:
                self.handler_owner = owner
        self.busy_s += seconds
        self.records.append((what, begin, end))
        return end

    def reduction_s(self, nbytes: float, dtype: Any) -> float:
        """Seconds to add a received chunk of ``nbytes`` (of ``dtype``) into a local one: the
        arithmetic of one reduce round of a collective (one add per element, two buffers read,
        one written), at the roofline, with no launch cost (a collective's rounds run inside one
        kernel, on a stream of their own beside the compute stream)."""
        dt = np.dtype(dtype)
        return roofline_seconds(nbytes / dt.itemsize, 3.0 * nbytes, self.perf_spec, dt.name)

    @property
    def cost_model(self) -> CostModel:
        return self._cost_model

    @cost_model.setter
    def cost_model(self, model: CostModel) -> None:
        self._cost_model = model
        self._forget_plans()

    @property
    def hybrid(self) -> bool:
        """Whether nodes also compute their real values (numpy), not only shapes and times."""
        return self._hybrid

    @hybrid.setter
    def hybrid(self, on: bool) -> None:
        self._hybrid = bool(on)
        self._forget_plans()

    def _forget_plans(self) -> None:
        for node in self._planned:
            node.memo = None
        self._planned = []
        self._alike = {}
        self.plan_generation += 1

    def run(self, node: Any, inputs: list, done: Callable, step: Any = None) -> None:
        """The generic Device interface: ``start`` plus a SimPy timeout that calls ``done``."""
        try:
            end, result = self.start(node, inputs)
        except Exception as e:  # noqa: BLE001 - handed to the executor, which names the node
            done(None, e)
            return
        self.env.timeout(end - self.env.now).callbacks.append(lambda _e: done(result))

    def _plan_alike(self, node: Any, inputs: list, key: Any) -> tuple:
        """``_plan_node``'s plan, shared by the nodes alike (``_alike_key``) with the same
        input signature ``key``: a graph repeats a few kinds of op many times, and planning is
        most of the first step of a new graph."""
        kind = _alike_key(node)
        if kind is None:
            return self._plan_node(node, inputs)
        k = (kind, key)
        plan = self._alike.get(k)
        if plan is None:
            plan = self._alike[k] = self._plan_node(node, inputs)
        return plan

    def _plan_node(self, node: Any, inputs: list) -> tuple:
        """(duration, placeholder result, whether to run the real kernel) for these inputs."""
        kind = node.op.type
        if kind in _CONTROL_OPS:  # conditionals and loops: free, and they must see the values
            if kind == "Switch" and inputs[1].__class__ is SimValue:
                raise UnimplementedError(
                    f"a shape-only simulation cannot decide the conditional {node.op.name!r}: "
                    "its predicate has no value; feed it a real bool, or simulate with "
                    "Cluster(hybrid=True)"
                )
            return 0.0, None, True, None
        in_shapes = tuple([value_shape(v) for v in inputs])
        small = [_small_int(v) for v in inputs]
        out_shapes = self.infer_shapes(node.op, list(in_shapes), node.input_tensors, small)
        dur = self.cost_model.duration(node.op, list(in_shapes), out_shapes, self.perf_spec)
        compute = self.hybrid or kind in _SYNC_STATE_OPS or _metadata_op(node, inputs)
        placeholders = None if compute else self._placeholders(node, out_shapes)
        return dur, placeholders, compute, self._width(node.op, in_shapes, dur)

    def _placeholders(self, node: Any, out_shapes: list[tuple]) -> Any:
        outs = [SimValue(s, t.dtype.np) for s, t in zip(out_shapes, node.op.outputs)]
        if node.n_out == 1:
            return outs[0]
        return tuple(outs) if outs else None

    def perf(self) -> tuple[float, float, float]:
        p = self.perf_spec
        return (p.peak("float32", True), p.memory_bandwidth, p.launch_overhead_s)

    # ---- memory ------------------------------------------------------------------------
    def alloc(self, nbytes: int, op: Any) -> None:
        """Account ``nbytes`` of a new tensor; raises ResourceExhaustedError past capacity."""
        total = self.memory_in_use_bytes + nbytes + self.persistent_bytes
        limit = self.memory_limit_bytes
        if limit and total > limit:
            raise ResourceExhaustedError(
                f"simulated out of memory on {self.name}: op {op.name!r} ({op.type}) "
                f"allocates {nbytes:,} bytes with "
                f"{self.memory_in_use_bytes + self.persistent_bytes:,} of {limit:,} bytes in use"
            )
        if total > self.peak_bytes:
            self.peak_bytes = total
        self.memory_in_use_bytes += nbytes

    def free(self, nbytes: int) -> None:
        left = self.memory_in_use_bytes - nbytes
        self.memory_in_use_bytes = left if left > 0 else 0

    def reset_stats(self) -> None:
        self.busy_s = 0.0
        self.records = []
        self.peak_bytes = self.persistent_bytes + self.memory_in_use_bytes
