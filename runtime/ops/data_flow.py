"""Data-flow resources shared across steps: a FIFO queue and a conditional gradient accumulator.

Both are stateful resource ops, like ``VariableV2``: the op's value is a handle to an object kept
in ``ctx.resources`` (per device, per session; in a server, shared by every master that runs
graphs there), keyed by ``shared_name`` or the op's name. Ops taking the handle are colocated with
it (the handle ops are ``is_ref``), so they run where the resource lives.

Waiting is done without a thread: ``QueueDequeue`` and ``AccumulatorTakeGradient`` are async
kernels that register their ``done`` callback and return; the enqueue or the gradient that makes
them ready completes them from the thread of the step that supplied it.

Differences from TensorFlow 1.x:

* queues (FIFOQueue, RandomShuffleQueue) are TF1's, with their waiting enqueues and dequeues;
  a seeded RandomShuffleQueue is deterministic but does not reproduce TensorFlow's order;
* accumulators take dense gradients (``SyncReplicasOptimizer`` densifies IndexedSlices) and only
  the ``MEAN`` reduction; ``AccumulatorNumDropped`` (how many stale gradients were dropped) and
  ``AccumulatorCancelTakes`` (fail the waiting takes, used to stop the chief's sync loop) are
  hetbed additions;
* a step that times out or fails while waiting withdraws its request (the element or average
  goes to the next waiter);
* in a shape-only simulation (no values), the accumulators still run, keeping only counts and
  shapes: synchronous training completes step after step, but every gradient is taken as
  current (its local step has no value to compare).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from hetbed.devices.simulated import SimValue

from .. import dtypes as _dt
from ..errors import (
    AbortedError,
    CancelledError,
    InvalidArgumentError,
    OutOfRangeError,
)
from ..graph import Operation, Tensor, TensorShape
from ..registry import Cost, apply, convert_to_tensor, defop


def _no_cost(op, ins, outs):
    return Cost()


# Queue elements may be shape-only values (a simulation without values, SimValue): they are
# kept, sliced and stacked by shape.
def _shape(v: Any) -> tuple:
    return v.shape if isinstance(v, SimValue) else tuple(np.shape(v))


def _copy(v: Any) -> Any:
    return v if isinstance(v, SimValue) else np.array(v, copy=True)


def _row(v: Any, i: int) -> Any:
    return SimValue(v.shape[1:], v.dtype) if isinstance(v, SimValue) else np.array(v[i], copy=True)


def _stack(parts: list) -> Any:
    if parts and isinstance(parts[0], SimValue):
        return SimValue((len(parts), *parts[0].shape), parts[0].dtype)
    return np.stack(parts)


def _handle(ctx: Any, make: Callable) -> Any:
    """The resource behind a resource op: created on first run, then cached in ``ctx.state``."""
    r = ctx.state
    if r is None:
        key = ctx.attrs.get("shared_name") or ctx.op.name
        r = ctx.resources.get(key)
        if r is None:
            r = ctx.resources[key] = make(key)
        elif not r.matches(ctx.attrs):
            raise InvalidArgumentError(
                f"{ctx.op.type} {ctx.op.name!r}: shared resource {key!r} exists with "
                f"{r.describe()}; this op asks for {make(key).describe()}"
            )
        ctx.state = r
    return r


#: the accumulators the global-step, count and cancel ops take (sparse_accumulator.py: the other)
ACCUMULATORS = ("ConditionalAccumulator", "SparseConditionalAccumulator")


def _check_handle(op: Any, want: str | tuple) -> None:
    h = op.inputs[0]
    wants = (want,) if isinstance(want, str) else want
    if h.op.type not in wants:
        raise InvalidArgumentError(
            f"{op.type}: input 0 must be a {' or '.join(wants)} handle, got {h.name} ({h.op.type})"
        )


def _scalar_input(op: Any, i: int, what: str, integer: bool = True) -> None:
    t = op.inputs[i]
    if t.shape.ndims not in (None, 0):
        raise InvalidArgumentError(f"{op.type}: {what} must be a scalar, got shape {t.shape}")
    if integer and not t.dtype.is_integer:
        raise InvalidArgumentError(f"{op.type}: {what} must be int32/int64, got {t.dtype.name}")


# ==== Queues ======================================================================================


class _Queue:
    """A queue of elements (tuples of component arrays), the dequeues waiting for elements and the
    enqueues waiting for room, both served in arrival order. ``shuffle`` = (min_after_dequeue,
    rng) makes it a RandomShuffleQueue: a dequeue takes a uniformly random element and waits
    while taking would leave fewer than ``min_after_dequeue`` (until the queue is closed)."""

    def __init__(self, name: str, attrs: dict, rng: Any = None, pad: bool = False):
        self.name = name
        self.pad = pad  # PaddingFIFOQueue: a batch pads each component to its largest element
        self.dtypes: tuple = attrs["component_types"]
        self.shapes: tuple = attrs["shapes"]
        cap = attrs["capacity"]
        self.capacity = None if cap < 0 else cap
        self.min_after = attrs.get("min_after_dequeue", 0)
        self.rng = rng
        self.items: list | collections.deque = [] if rng is not None else collections.deque()
        self.getters: collections.deque = collections.deque()  # [n, up_to, done]
        self.putters: collections.deque = collections.deque()  # [elements left, done]
        self.lock = threading.Lock()
        self.closed = False

    @property
    def dtype(self) -> _dt.DType:
        return self.dtypes[0]

    def matches(self, attrs: dict) -> bool:
        cap = attrs["capacity"]
        return (
            self.dtypes == attrs["component_types"]
            and self.shapes == attrs["shapes"]
            and (self.capacity or -1) == (cap if cap > 0 else -1)
        )

    def describe(self) -> str:
        types = ", ".join(d.name for d in self.dtypes)
        return f"component types [{types}], shapes {list(self.shapes)}, capacity {self.capacity}"

    # ---- enqueue ------------------------------------------------------------------------------

    def mismatch(self, element: tuple, op_name: str) -> InvalidArgumentError | None:
        """The error for an element whose components do not fit the queue's shapes, or None."""
        for i, (v, sh) in enumerate(zip(element, self.shapes)):
            if sh is not None and not sh.is_compatible_with(_shape(v)):
                return InvalidArgumentError(
                    f"{op_name}: component {i} of shape {list(_shape(v))} does not match "
                    f"queue {self.name} element shape {sh}"
                )
        return None

    def put(self, elements: list, done: Callable, step: Any = None) -> None:
        """Append ``elements`` in order; ``done()`` once all are in (waiting for room while the
        queue is full). A closed queue refuses them with CancelledError."""
        entry = [collections.deque(elements), done]
        with self.lock:
            if self.closed:
                err: BaseException | None = CancelledError(
                    f"queue {self.name} is closed; cannot enqueue"
                )
                served: list = []
            else:
                err = None
                self.putters.append(entry)
                served = self._serve()
                waiting = bool(entry[0]) and _holds(self.putters, entry)
        if err is not None:
            done(None, err)
            return
        for fn, args in served:
            fn(*args)
        if waiting and step is not None:
            step.on_cancel(lambda e: self._withdraw(self.putters, entry, e))

    # ---- dequeue ------------------------------------------------------------------------------

    def get(self, n: int | None, up_to: bool, done: Callable, step: Any = None) -> None:
        """One element (``n`` None) or a batch of ``n`` stacked along a new first dimension
        (``up_to``: fewer when the queue is closed); ``done`` gets the components."""
        entry = [n, up_to, done]
        with self.lock:
            self.getters.append(entry)
            served = self._serve()
            waiting = _holds(self.getters, entry)
        for fn, args in served:
            fn(*args)
        if waiting and step is not None:
            step.on_cancel(lambda e: self._withdraw(self.getters, entry, e))

    def _withdraw(self, waiters: collections.deque, entry: list, err: BaseException) -> None:
        """A waiting step was aborted: forget its request (it gets the error, not elements)."""
        with self.lock:
            if not _drop(waiters, entry):
                return  # already served
            served = self._serve()  # a withdrawn dequeue may unblock the next one
        entry[-1](None, err)
        for fn, args in served:
            fn(*args)

    def _take(self) -> tuple:
        items = self.items
        if self.rng is None:
            return items.popleft()
        i = int(self.rng.integers(len(items)))
        items[i], items[-1] = items[-1], items[i]
        return items.pop()

    def _serve(self) -> list:
        """Under the lock: move waiting elements in while there is room, then hand elements to
        the waiting dequeues in order. Returns the callbacks to run outside the lock."""
        out: list = []
        while True:
            moved = False
            while self.putters:
                entry = self.putters[0]
                left = entry[0]
                while left and (self.capacity is None or len(self.items) < self.capacity):
                    self.items.append(left.popleft())
                    moved = True
                if left:
                    break
                self.putters.popleft()
                out.append((entry[1], (None,)))
            if not self.getters:
                return out
            n, up_to, done = self.getters[0]
            want = 1 if n is None else n
            have = len(self.items)
            keep = 0 if self.closed else self.min_after
            if have - keep >= want and have >= want:
                k = want
            elif self.closed and up_to and have > 0:
                k = have
            elif self.closed:
                self.getters.popleft()
                left = "empty" if not have else f"holds {have} elements, {want} requested"
                err = OutOfRangeError(f"queue {self.name} is closed and {left}")
                out.append((done, (None, err)))
                continue
            else:
                if not moved:
                    return out
                continue
            self.getters.popleft()
            taken = [self._take() for _ in range(k)]
            if n is None:
                comps = taken[0]
            else:
                comps = tuple(
                    _padded_stack([e[c] for e in taken])
                    if self.pad
                    else _stack([e[c] for e in taken])
                    for c in range(len(self.dtypes))
                )
            out.append((done, (comps[0] if len(comps) == 1 else comps,)))

    def close(self, cancel_pending: bool) -> None:
        """No more elements: dequeues get what is left, then OutOfRangeError; enqueues fail
        with CancelledError, and so do waiting ones with ``cancel_pending`` (else they still
        go in as room appears)."""
        with self.lock:
            self.closed = True
            cancelled = []
            if cancel_pending:
                cancelled, self.putters = list(self.putters), collections.deque()
            served = self._serve()
        for entry in cancelled:
            entry[1](None, CancelledError(f"enqueue into {self.name} cancelled: queue closed"))
        for fn, args in served:
            fn(*args)

    def size(self) -> int:
        with self.lock:
            return len(self.items)


def _padded_stack(values: list) -> np.ndarray:
    """Elements of one rank stacked along a new first dimension, each zero-padded at the end of
    every dimension to the largest element's size there (PaddingFIFOQueue's batches)."""
    top = tuple(max(v.shape[d] for v in values) for d in range(values[0].ndim))
    out = np.zeros((len(values), *top), dtype=values[0].dtype)
    if out.dtype.kind == "O":
        out[...] = b""  # strings pad with b"", as in TF
    for i, v in enumerate(values):
        out[(i, *(slice(0, n) for n in v.shape))] = v
    return out


_QUEUE_TYPES = ("FIFOQueue", "RandomShuffleQueue", "PaddingFIFOQueue")


def _queue_handle_shape(op):
    return [(TensorShape([]), op.attrs["component_types"][0])]


FIFOQueueOp = defop("FIFOQueue", stateful=True, is_ref=True, differentiable=False)
FIFOQueueOp.shape(_queue_handle_shape)
FIFOQueueOp.cost(_no_cost)


@FIFOQueueOp.kernel("cpu")
def _fifo_queue(ctx):
    return _handle(ctx, lambda key: _Queue(key, ctx.attrs))


PaddingFIFOQueueOp = defop("PaddingFIFOQueue", stateful=True, is_ref=True, differentiable=False)
PaddingFIFOQueueOp.shape(_queue_handle_shape)
PaddingFIFOQueueOp.cost(_no_cost)


@PaddingFIFOQueueOp.kernel("cpu")
def _padding_fifo_queue(ctx):
    return _handle(ctx, lambda key: _Queue(key, ctx.attrs, pad=True))


RandomShuffleQueueOp = defop("RandomShuffleQueue", stateful=True, is_ref=True, differentiable=False)
RandomShuffleQueueOp.shape(_queue_handle_shape)
RandomShuffleQueueOp.cost(_no_cost)


@RandomShuffleQueueOp.kernel("cpu")
def _random_shuffle_queue(ctx):
    seed = ctx.attrs.get("seed")
    rng = np.random.default_rng(seed) if seed is not None else ctx.rng
    return _handle(ctx, lambda key: _Queue(key, ctx.attrs, rng))


def handle_source(t: Any) -> Any:
    """The tensor behind ``t`` where a cond or a loop took a resource handle in (Switch,
    Enter, Identity): TF1 programs enqueue inside a ``tf.cond`` branch (baselines' K-FAC)."""
    while t.op.type in ("Switch", "RefSwitch", "Enter", "RefEnter", "Identity") and t.op.inputs:
        t = t.op.inputs[0]
    return t


def _queue_of(op: Any) -> Any:
    h = handle_source(op.inputs[0])
    if h.op.type not in _QUEUE_TYPES:
        raise InvalidArgumentError(
            f"{op.type}: input 0 must be a queue handle, got {h.name} ({h.op.type})"
        )
    return h.op


def _check_components(op: Any, q: Any, values: list, many: bool) -> None:
    types, shapes = q.attrs["component_types"], q.attrs["shapes"]
    if len(values) != len(types):
        raise InvalidArgumentError(
            f"{op.type} {op.name}: queue {q.name} has {len(types)} components, got {len(values)}"
        )
    for i, (v, d, s) in enumerate(zip(values, types, shapes)):
        if v.dtype != d:
            raise InvalidArgumentError(
                f"{op.type} {op.name}: component {i} of queue {q.name} is {d.name}, "
                f"got {v.dtype.name}"
            )
        shape = v.shape
        if many:
            if shape.ndims == 0:
                raise InvalidArgumentError(
                    f"{op.type} {op.name}: component {i} needs a leading batch dimension"
                )
            shape = TensorShape(shape.dims[1:]) if shape.dims is not None else TensorShape(None)
        if s is not None and not s.is_compatible_with(shape):
            raise InvalidArgumentError(
                f"{op.type} {op.name}: component {i} of shape {shape} does not match queue "
                f"{q.name} element shape {s}"
            )


def _enqueue_shape(many: bool):
    def shape(op):
        q = _queue_of(op)
        _check_components(op, q, list(op.inputs[1:]), many)
        return []

    return shape


QueueEnqueue = defop("QueueEnqueue", stateful=True, differentiable=False)
QueueEnqueue.shape(_enqueue_shape(False))
QueueEnqueue.cost(_no_cost)


@QueueEnqueue.kernel("cpu", is_async=True)
def _enqueue(ctx, step, inputs, done):
    q, *comps = inputs
    element = tuple(_copy(c) for c in comps)
    err = q.mismatch(element, f"QueueEnqueue {ctx.op.name!r}")
    if err is not None:
        done(None, err)
        return
    q.put([element], done, step)


QueueEnqueueMany = defop("QueueEnqueueMany", stateful=True, differentiable=False)
QueueEnqueueMany.shape(_enqueue_shape(True))
QueueEnqueueMany.cost(_no_cost)


@QueueEnqueueMany.kernel("cpu", is_async=True)
def _enqueue_many(ctx, step, inputs, done):
    q, *comps = inputs
    comps = [c if isinstance(c, SimValue) else np.asarray(c) for c in comps]
    if any(not c.shape for c in comps):
        done(
            None,
            InvalidArgumentError(
                f"QueueEnqueueMany {ctx.op.name}: components must have a batch dimension, got "
                f"shapes {[list(c.shape) for c in comps]}"
            ),
        )
        return
    sizes = {c.shape[0] for c in comps}
    if len(sizes) != 1:
        done(
            None,
            InvalidArgumentError(
                f"QueueEnqueueMany {ctx.op.name}: components have different batch sizes "
                f"{[c.shape[0] for c in comps]}"
            ),
        )
        return
    (k,) = sizes
    elements = [tuple(_row(c, i) for c in comps) for i in range(k)]
    # one element tells: they all share the shapes of the components past the first dimension
    err = q.mismatch(elements[0], f"QueueEnqueueMany {ctx.op.name!r}") if elements else None
    if err is not None:
        done(None, err)
        return
    q.put(elements, done, step)


def _dequeue_outputs(op, batch: Any):
    q = _queue_of(op)
    out = []
    for d, s in zip(q.attrs["component_types"], q.attrs["shapes"]):
        if batch is False:
            out.append((s if s is not None else TensorShape(None), d))
        else:
            if s is None:
                raise InvalidArgumentError(
                    f"{op.type} {op.name}: queue {q.name} needs fully defined component shapes "
                    "to dequeue a batch (give shapes= when creating it)"
                )
            out.append((TensorShape([batch, *s.dims]), d))
    return out


QueueDequeue = defop("QueueDequeue", stateful=True, differentiable=False)
QueueDequeue.shape(lambda op: _dequeue_outputs(op, False))
QueueDequeue.cost(_no_cost)


@QueueDequeue.kernel("cpu", is_async=True)
def _dequeue(ctx, step, inputs, done):
    inputs[0].get(None, False, done, step)


def _batch_dequeue_shape(up_to: bool):
    def shape(op):
        _scalar_input(op, 1, "n")
        n = op.inputs[1]
        k = None
        if not up_to and n.op.type == "Const":
            k = int(n.op.attrs["value"])
        return _dequeue_outputs(op, k)

    return shape


def _batch_dequeue(up_to: bool):
    def kernel(ctx, step, inputs, done):
        q, n = inputs
        n = int(n)
        if n < 0:
            done(None, InvalidArgumentError(f"{ctx.op.name}: n must be >= 0, got {n}"))
            return
        q.get(n, up_to, done, step)

    return kernel


QueueDequeueMany = defop("QueueDequeueMany", stateful=True, differentiable=False)
QueueDequeueMany.shape(_batch_dequeue_shape(False))
QueueDequeueMany.kernel("cpu", is_async=True)(_batch_dequeue(False))
QueueDequeueMany.cost(_no_cost)
QueueDequeueUpTo = defop("QueueDequeueUpTo", stateful=True, differentiable=False)
QueueDequeueUpTo.shape(_batch_dequeue_shape(True))
QueueDequeueUpTo.kernel("cpu", is_async=True)(_batch_dequeue(True))
QueueDequeueUpTo.cost(_no_cost)

QueueClose = defop("QueueClose", stateful=True, differentiable=False)


@QueueClose.shape
def _queue_close_shape(op):
    _queue_of(op)
    return []


@QueueClose.kernel("cpu")
def _queue_close(ctx, q):
    q.close(bool(ctx.attrs.get("cancel_pending_enqueues")))


QueueClose.cost(_no_cost)


def _queue_scalar_op(op_type: str, dtype: _dt.DType, fn: Callable) -> None:
    d = defop(op_type, stateful=True, differentiable=False)

    @d.shape
    def _shape(op):
        _queue_of(op)
        return [(TensorShape([]), dtype)]

    @d.kernel("cpu")
    def _value(ctx, q):
        return np.array(fn(q), dtype=dtype.np)

    d.cost(_no_cost)


_queue_scalar_op("QueueSize", _dt.int32, lambda q: q.size())
_queue_scalar_op("QueueIsClosed", _dt.bool_, lambda q: q.closed)


class QueueBase:
    """What FIFOQueue and RandomShuffleQueue share (TF1's ``tf.QueueBase``): enqueue,
    enqueue_many, dequeue, dequeue_many, dequeue_up_to, close, is_closed and size ops.

    Every waiting op (a dequeue on an empty queue, an enqueue on a full one) completes later
    without holding a thread; a step that is aborted meanwhile withdraws its request.
    """

    _op_type = ""

    def __init__(self, capacity, dtypes, shapes, names, shared_name, name, extra=None):
        if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)):
            raise InvalidArgumentError(f"{type(self).__name__}: capacity must be an int")
        if capacity == 0 or capacity < -1:
            raise InvalidArgumentError(
                f"{type(self).__name__}: capacity must be > 0 (or -1, unbounded), got {capacity}"
            )
        if not isinstance(dtypes, (list, tuple)):
            dtypes = [dtypes]
        self.dtypes = [_dt.as_dtype(d) for d in dtypes]
        if not self.dtypes:
            raise InvalidArgumentError(f"{type(self).__name__}: dtypes must not be empty")
        if shapes is None:
            self.shapes = [None] * len(self.dtypes)
        else:
            if len(self.dtypes) == 1 and (
                not isinstance(shapes, (list, tuple))
                or not shapes
                or not (shapes[0] is None or isinstance(shapes[0], (list, tuple, TensorShape)))
            ):
                shapes = [shapes]  # one component's shape, given bare
            if len(shapes) != len(self.dtypes):
                raise InvalidArgumentError(
                    f"{type(self).__name__}: {len(shapes)} shapes for {len(self.dtypes)} dtypes"
                )
            self.shapes = [None if s is None else TensorShape(s) for s in shapes]
        if names is not None:
            names = [names] if isinstance(names, str) else list(names)
            if len(names) != len(self.dtypes):
                raise InvalidArgumentError(
                    f"{type(self).__name__}: {len(names)} names for {len(self.dtypes)} dtypes"
                )
        self.names = names
        attrs = {
            "component_types": tuple(self.dtypes),
            "shapes": tuple(self.shapes),
            "capacity": int(capacity),
            "shared_name": shared_name or "",
            **(extra or {}),
        }
        self.queue_ref = apply(self._op_type, [], attrs, name)
        self.name = self.queue_ref.op.name

    @classmethod
    def from_queue_ref(cls, ref: Tensor) -> QueueBase:
        """The queue whose op made ``ref`` (a queue already in a graph, e.g. one imported from
        a meta graph): its component dtypes and shapes from the op's attrs, no names."""
        attrs = ref.op.attrs
        q = cls.__new__(cls)
        q.dtypes = [_dt.as_dtype(d) for d in attrs["component_types"]]
        shapes = list(attrs.get("shapes") or ())
        q.shapes = [None if s is None else TensorShape(s) for s in shapes] or [None] * len(q.dtypes)
        q.names = None
        q.queue_ref = ref
        q.name = ref.op.name
        return q

    @property
    def dtype(self) -> _dt.DType:
        return self.dtypes[0]

    @property
    def shape(self) -> Any:
        return self.shapes[0]

    def _components(self, vals: Any, what: str) -> list[Tensor]:
        if self.names is not None:
            if not isinstance(vals, dict) or set(vals) != set(self.names):
                raise InvalidArgumentError(
                    f"{what} into {self.name}: give a dict with keys {self.names}"
                )
            vals = [vals[k] for k in self.names]
        elif isinstance(vals, dict):
            raise InvalidArgumentError(f"{what} into {self.name}: the queue has no names")
        elif not isinstance(vals, (list, tuple)):
            vals = [vals]
        if len(vals) != len(self.dtypes):
            raise InvalidArgumentError(
                f"{what} into {self.name}: {len(vals)} values for {len(self.dtypes)} components"
            )
        g = self.queue_ref.graph
        return [convert_to_tensor(v, dtype=d, graph=g) for v, d in zip(vals, self.dtypes)]

    def _out(self, t: Any) -> Any:
        comps = [t] if isinstance(t, Tensor) else list(t)
        if self.names is not None:
            return dict(zip(self.names, comps))
        return comps[0] if len(comps) == 1 else comps

    def _apply(self, op_type: str, inputs: list, attrs: dict, name: str) -> Any:
        g = self.queue_ref.graph
        with g.colocate_with(self.queue_ref.op):
            return apply(op_type, [self.queue_ref, *inputs], attrs, name)

    def enqueue(self, vals: Any, name: str | None = None) -> Operation:
        """Append one element (waits while the queue is full)."""
        g = self.queue_ref.graph
        with g.colocate_with(self.queue_ref.op):
            comps = self._components(vals, "enqueue")
        return self._apply("QueueEnqueue", comps, {}, name or f"{self.name}_enqueue")

    def enqueue_many(self, vals: Any, name: str | None = None) -> Operation:
        """Append the elements of ``vals``, split along their first dimension."""
        g = self.queue_ref.graph
        with g.colocate_with(self.queue_ref.op):
            comps = self._components(vals, "enqueue_many")
        return self._apply("QueueEnqueueMany", comps, {}, name or f"{self.name}_EnqueueMany")

    def dequeue(self, name: str | None = None) -> Any:
        """One element; the op waits (asynchronously) while the queue is empty."""
        return self._out(self._apply("QueueDequeue", [], {}, name or f"{self.name}_Dequeue"))

    def _n(self, n: Any) -> Tensor:
        g = self.queue_ref.graph
        if isinstance(n, (int, np.integer)):
            n = np.int32(n)
        return convert_to_tensor(n, graph=g)

    def dequeue_many(self, n: Any, name: str | None = None) -> Any:
        """``n`` elements stacked along a new first dimension; OutOfRangeError when the queue is
        closed with fewer left."""
        return self._out(
            self._apply("QueueDequeueMany", [self._n(n)], {}, name or f"{self.name}_DequeueMany")
        )

    def dequeue_up_to(self, n: Any, name: str | None = None) -> Any:
        """As ``dequeue_many``, but a closed queue gives what it has left (at least one)."""
        return self._out(
            self._apply("QueueDequeueUpTo", [self._n(n)], {}, name or f"{self.name}_DequeueUpTo")
        )

    def size(self, name: str | None = None) -> Tensor:
        """The number of elements now in the queue (int32)."""
        return self._apply("QueueSize", [], {}, name or f"{self.name}_Size")

    def is_closed(self, name: str | None = None) -> Tensor:
        """Whether the queue is closed (bool)."""
        return self._apply("QueueIsClosed", [], {}, name or f"{self.name}_IsClosed")

    def close(self, cancel_pending_enqueues: bool = False, name: str | None = None) -> Operation:
        """Close the queue: the elements in it can still be dequeued, then dequeues fail with
        OutOfRangeError; enqueues fail with CancelledError, and so do those waiting for room
        when ``cancel_pending_enqueues``."""
        attrs = {"cancel_pending_enqueues": bool(cancel_pending_enqueues)}
        return self._apply("QueueClose", [], attrs, name or f"{self.name}_Close")


class FIFOQueue(QueueBase):
    """``tf.FIFOQueue``: elements leave in the order they came. ``capacity`` -1 is unbounded."""

    _op_type = "FIFOQueue"

    def __init__(
        self,
        capacity: int,
        dtypes: Any,
        shapes: Any = None,
        names: Any = None,
        shared_name: str | None = None,
        name: str = "fifo_queue",
    ):
        super().__init__(capacity, dtypes, shapes, names, shared_name, name)


class PaddingFIFOQueue(QueueBase):
    """``tf.PaddingFIFOQueue``: a FIFOQueue whose components may have dimensions of unknown
    size (``None`` in ``shapes``, which are required: the rank of each component is fixed); a
    batch (``dequeue_many``, ``dequeue_up_to``) zero-pads each component of each element at
    the end of every dimension to the largest element of the batch there."""

    _op_type = "PaddingFIFOQueue"

    def __init__(
        self,
        capacity: int,
        dtypes: Any,
        shapes: Any,
        names: Any = None,
        shared_name: str | None = None,
        name: str = "padding_fifo_queue",
    ):
        super().__init__(capacity, dtypes, shapes, names, shared_name, name)
        for i, sh in enumerate(self.shapes):
            if sh is None or sh.ndims is None:
                raise InvalidArgumentError(
                    f"PaddingFIFOQueue: component {i} needs a shape of known rank (None for a "
                    f"dimension of unknown size), got {sh}"
                )


class RandomShuffleQueue(QueueBase):
    """``tf.RandomShuffleQueue``: a dequeue takes a random element, and waits while taking would
    leave fewer than ``min_after_dequeue`` (unless the queue is closed). ``seed`` fixes the
    order (hetbed's generator: not TensorFlow's order for the same seed)."""

    _op_type = "RandomShuffleQueue"

    def __init__(
        self,
        capacity: int,
        min_after_dequeue: int,
        dtypes: Any,
        shapes: Any = None,
        names: Any = None,
        seed: int | None = None,
        shared_name: str | None = None,
        name: str = "random_shuffle_queue",
    ):
        if min_after_dequeue < 0 or (capacity > 0 and min_after_dequeue >= capacity):
            raise InvalidArgumentError(
                f"RandomShuffleQueue: min_after_dequeue must be in [0, capacity), got "
                f"{min_after_dequeue} with capacity {capacity}"
            )
        extra = {"min_after_dequeue": int(min_after_dequeue)}
        if seed is not None:
            extra["seed"] = int(seed)
        super().__init__(capacity, dtypes, shapes, names, shared_name, name, extra)


# ==== ConditionalAccumulator ======================================================================


class _Accumulator:
    """Sum of the gradients of the current global step, and the takers waiting for enough."""

    def __init__(self, name: str, dtype: _dt.DType, shape: TensorShape):
        self.name = name
        self.dtype = dtype
        self.shape = shape
        self.global_step = 0
        self.count = 0
        self.dropped = 0
        self.sum: Any = None
        self.takers: collections.deque = collections.deque()  # (num_required, done)
        self.lock = threading.Lock()

    def matches(self, attrs: dict) -> bool:
        return self.dtype == attrs["dtype"] and self.shape == attrs["shape"]

    def describe(self) -> str:
        return f"dtype {self.dtype.name}, shape {self.shape}"

    def apply(self, local_step: int, grad: Any, op_name: str) -> bool:
        """Add ``grad`` unless it is stale (``local_step`` behind the global step): whether it
        was added."""
        if not self.shape.is_compatible_with(tuple(grad.shape)):
            raise InvalidArgumentError(
                f"{op_name}: gradient of shape {tuple(grad.shape)} does not match accumulator "
                f"{self.name} shape {self.shape}"
            )
        with self.lock:
            if local_step < self.global_step:
                self.dropped += 1  # stale: computed before the last take
                return False
            if self.sum is None or isinstance(grad, SimValue) or isinstance(self.sum, SimValue):
                # (a shape-only simulation's placeholder: only the count and shape matter)
                self.sum = grad.astype(self.dtype.np, copy=True)  # never alias the input
            elif self.sum.shape != grad.shape:
                raise InvalidArgumentError(
                    f"{op_name}: gradient of shape {tuple(grad.shape)} differs from the "
                    f"{tuple(self.sum.shape)} already accumulated in {self.name}"
                )
            else:
                self.sum += grad
            self.count += 1
            served = self._serve()
        for done, avg in served:
            done(avg)
        return True

    def take(self, num_required: int, done: Callable, step: Any = None) -> None:
        entry = (num_required, done)
        with self.lock:
            self.takers.append(entry)
            served = self._serve()
        for d, avg in served:
            d(avg)
        if step is not None and not any(d is done for d, _ in served):
            step.on_cancel(lambda err: self._withdraw(entry, err))

    def _withdraw(self, entry: tuple, err: BaseException) -> None:
        """A waiting take's step was aborted: forget it (it gets the error, not an average)."""
        with self.lock:
            if not _drop(self.takers, entry):
                return  # already served
        entry[1](None, err)

    def _serve(self) -> list:
        """Under the lock: complete the first taker if enough gradients have arrived."""
        if not self.takers or self.count < self.takers[0][0] or self.count == 0:
            return []
        _, done = self.takers.popleft()
        if isinstance(self.sum, SimValue):
            avg = self.sum
        elif self.sum.dtype.kind in "fc":  # the sum is the accumulator's own copy: divided in
            self.sum /= self.count  # place and handed out
            avg = self.sum
        else:
            avg = (self.sum / self.count).astype(self.dtype.np, copy=False)
        self.sum, self.count = None, 0
        self.global_step += 1
        return [(done, avg)]


ConditionalAccumulatorOp = defop(
    "ConditionalAccumulator", stateful=True, is_ref=True, differentiable=False
)


@ConditionalAccumulatorOp.shape
def _accum_shape(op):
    return [(TensorShape([]), op.attrs["dtype"])]


@ConditionalAccumulatorOp.kernel("cpu", "gpu")
def _conditional_accumulator(ctx):
    return _handle(ctx, lambda key: _Accumulator(key, ctx.attrs["dtype"], ctx.attrs["shape"]))


ConditionalAccumulatorOp.cost(_no_cost)

AccumulatorApplyGradient = defop("AccumulatorApplyGradient", stateful=True, differentiable=False)


@AccumulatorApplyGradient.shape
def _apply_grad_shape(op):
    _check_handle(op, "ConditionalAccumulator")
    _scalar_input(op, 1, "local_step")
    acc, g = op.inputs[0], op.inputs[2]
    if g.dtype != acc.dtype:
        raise InvalidArgumentError(
            f"AccumulatorApplyGradient: accumulator {acc.op.name} holds {acc.dtype.name}, "
            f"got a {g.dtype.name} gradient"
        )
    if not acc.op.attrs["shape"].is_compatible_with(g.shape):
        raise InvalidArgumentError(
            f"AccumulatorApplyGradient: gradient shape {g.shape} does not match accumulator "
            f"{acc.op.name} shape {acc.op.attrs['shape']}"
        )
    return []


@AccumulatorApplyGradient.kernel("cpu", "gpu")
def _apply_grad(ctx, acc, local_step, grad):
    if isinstance(local_step, SimValue):  # shape-only: no step to compare, so it is current
        local_step = acc.global_step
    if not acc.apply(int(local_step), grad, ctx.op.name):
        ctx.idle = True  # (dropped as stale: no add)


@AccumulatorApplyGradient.cost
def _apply_grad_cost(op, ins, outs):
    from ..registry import nbytes, numel

    b = nbytes(ins[2], op.inputs[2].dtype)
    return Cost(float(numel(ins[2])), 2.0 * b, float(b))


AccumulatorTakeGradient = defop("AccumulatorTakeGradient", stateful=True, differentiable=False)


@AccumulatorTakeGradient.shape
def _take_grad_shape(op):
    _check_handle(op, "ConditionalAccumulator")
    _scalar_input(op, 1, "num_required")
    acc = op.inputs[0]
    return [(acc.op.attrs["shape"], acc.dtype)]


@AccumulatorTakeGradient.kernel("cpu", "gpu", is_async=True)
def _take_grad(ctx, step, inputs, done):
    acc, n = inputs
    if int(n) < 1:
        done(None, InvalidArgumentError(f"{ctx.op.name}: num_required must be >= 1, got {int(n)}"))
        return
    acc.take(int(n), done, step)


@AccumulatorTakeGradient.cost
def _take_grad_cost(op, ins, outs):
    from ..registry import nbytes, numel

    b = nbytes(outs[0], op.outputs[0].dtype)
    return Cost(float(numel(outs[0])), float(b), float(b))


AccumulatorSetGlobalStep = defop("AccumulatorSetGlobalStep", stateful=True, differentiable=False)


@AccumulatorSetGlobalStep.shape
def _set_step_shape(op):
    _check_handle(op, ACCUMULATORS)
    _scalar_input(op, 1, "new_global_step")
    return []


@AccumulatorSetGlobalStep.kernel("cpu", "gpu")
def _set_global_step(ctx, acc, step):
    if isinstance(step, SimValue):
        return  # shape-only: the step has no value (every gradient is taken as current)
    with acc.lock:
        acc.global_step = int(step)  # TF sets it even when it goes backwards (with a warning)


AccumulatorSetGlobalStep.cost(_no_cost)


def _counter_op(op_type: str, field: str) -> None:
    d = defop(op_type, stateful=True, differentiable=False)

    @d.shape
    def _shape(op):
        _check_handle(op, ACCUMULATORS)
        return [(TensorShape([]), _dt.int32)]

    @d.kernel("cpu", "gpu")
    def _count(ctx, acc):
        with acc.lock:
            return np.array(getattr(acc, field), dtype=np.int32)

    d.cost(_no_cost)


AccumulatorCancelTakes = defop("AccumulatorCancelTakes", stateful=True, differentiable=False)


@AccumulatorCancelTakes.shape
def _cancel_shape(op):
    _check_handle(op, ACCUMULATORS)
    return []


@AccumulatorCancelTakes.kernel("cpu", "gpu")
def _cancel_takes(ctx, acc):
    with acc.lock:
        takers, acc.takers = list(acc.takers), collections.deque()
    for _, done in takers:
        done(None, AbortedError(f"take from accumulator {acc.name} cancelled by {ctx.op.name}"))


AccumulatorCancelTakes.cost(_no_cost)


_counter_op("AccumulatorNumAccumulated", "count")
_counter_op("AccumulatorNumDropped", "dropped")


class ConditionalAccumulator:
    """``hb.ConditionalAccumulator``: averages gradients that are not stale.

    ``apply_grad(grad, local_step)`` adds ``grad`` unless ``local_step`` is behind the
    accumulator's global step (then it is dropped and counted); ``take_grad(n)`` waits for ``n``
    gradients, returns their average, clears the sum and advances the global step.
    """

    #: the op that creates the accumulator (SparseConditionalAccumulator: its own)
    _handle_op = "ConditionalAccumulator"

    def __init__(
        self,
        dtype: Any,
        shape: Any = None,
        shared_name: str | None = None,
        name: str = "conditional_accumulator",
        reduction_type: str = "MEAN",
    ):
        kind = type(self).__name__
        if reduction_type != "MEAN":
            raise InvalidArgumentError(
                f"{kind}: only reduction_type='MEAN' is supported, got {reduction_type!r}"
            )
        self.dtype = _dt.as_dtype(dtype)
        if not self.dtype.is_floating:
            raise InvalidArgumentError(f"{kind}: dtype must be a float type, got {self.dtype.name}")
        self.shape = TensorShape(shape) if shape is not None else TensorShape(None)
        attrs = {"dtype": self.dtype, "shape": self.shape, "shared_name": shared_name or ""}
        self.accumulator_ref = apply(self._handle_op, [], attrs, name)
        self.name = self.accumulator_ref.op.name

    def _op(self, op_type: str, extra: list, name: str) -> Any:
        return apply(op_type, [self.accumulator_ref, *extra], {}, name)

    def apply_grad(self, grad: Any, local_step: Any = 0, name: str | None = None) -> Operation:
        """Add ``grad`` (dropped if ``local_step`` < the accumulator's global step)."""
        g = self.accumulator_ref.graph
        with g.colocate_with(self.accumulator_ref.op):
            step = _as_int64(local_step, g)
        return self._op(
            "AccumulatorApplyGradient", [step, grad], name or "AccumulatorApplyGradient"
        )

    def take_grad(self, num_required: Any, name: str | None = None) -> Tensor:
        """The average of at least ``num_required`` gradients (waits for them asynchronously)."""
        g = self.accumulator_ref.graph
        with g.colocate_with(self.accumulator_ref.op):
            if isinstance(num_required, (int, np.integer)):
                num_required = np.int32(num_required)
            n = convert_to_tensor(num_required, graph=g)
            return self._op("AccumulatorTakeGradient", [n], name or "AccumulatorTakeGradient")

    def set_global_step(self, new_global_step: Any, name: str | None = None) -> Operation:
        """Set the accumulator's global step (the staleness threshold)."""
        g = self.accumulator_ref.graph
        with g.colocate_with(self.accumulator_ref.op):
            step = _as_int64(new_global_step, g)
        return self._op("AccumulatorSetGlobalStep", [step], name or "AccumulatorSetGlobalStep")

    def num_accumulated(self, name: str | None = None) -> Tensor:
        """How many gradients the current sum holds (int32)."""
        return self._op("AccumulatorNumAccumulated", [], name or "AccumulatorNumAccumulated")

    def cancel_takes(self, name: str | None = None) -> Operation:
        """Fail the takes now waiting with AbortedError (a hetbed addition, for shutdown)."""
        return self._op("AccumulatorCancelTakes", [], name or "AccumulatorCancelTakes")

    def num_dropped(self, name: str | None = None) -> Tensor:
        """How many stale gradients were dropped so far (int32; a hetbed addition)."""
        return self._op("AccumulatorNumDropped", [], name or "AccumulatorNumDropped")


def _as_int64(x: Any, g: Any) -> Tensor:
    if isinstance(x, (int, np.integer)):
        return convert_to_tensor(np.int64(x), graph=g)
    t = convert_to_tensor(x, graph=g)
    if t.dtype != _dt.int64:
        from .array import cast

        t = cast(t, _dt.int64)
    return t


def _holds(waiters: Any, entry: Any) -> bool:
    """Whether ``entry`` itself waits in ``waiters`` (by identity: entries hold arrays, which
    ``in`` would compare element by element)."""
    return any(e is entry for e in waiters)


def _drop(waiters: Any, entry: Any) -> bool:
    """Remove ``entry`` itself from ``waiters``; False when it is not there (served)."""
    for i, e in enumerate(waiters):
        if e is entry:
            del waiters[i]
            return True
    return False
