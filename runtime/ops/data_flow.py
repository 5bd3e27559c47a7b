"""Data-flow resources shared across steps: a FIFO queue and a conditional gradient accumulator.

Both are stateful resource ops, like ``VariableV2``: the op's value is a handle to an object kept
in ``ctx.resources`` (per device, per session; in a server, shared by every master that runs
graphs there), keyed by ``shared_name`` or the op's name. Ops taking the handle are colocated with
it (the handle ops are ``is_ref``), so they run where the resource lives.

Waiting is done without a thread: ``QueueDequeue`` and ``AccumulatorTakeGradient`` are async
kernels that register their ``done`` callback and return; the enqueue or the gradient that makes
them ready completes them from the thread of the step that supplied it.

Differences from TensorFlow 1.x:

* queues hold one component (one dtype, one shape) and are unbounded (``capacity=-1``); there is
  no ``close``;
* accumulators take dense gradients (``SyncReplicasOptimizer`` densifies IndexedSlices) and only
  the ``MEAN`` reduction; ``AccumulatorNumDropped`` (how many stale gradients were dropped) and
  ``AccumulatorCancelTakes`` (fail the waiting takes, used to stop the chief's sync loop) are
  hetbed additions;
* a step that times out or fails while waiting leaves its waiter registered (the executor has no
  cancellation hook yet): the next element or average goes to that dead step.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import (
    AbortedError,
    FailedPreconditionError,
    InvalidArgumentError,
    OutOfRangeError,
)
from ..graph import Operation, Tensor, TensorShape
from ..registry import Cost, apply, convert_to_tensor, defop


def _no_cost(op, ins, outs):
    return Cost()


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
                f"{r.describe()}; this op asks for dtype {ctx.attrs['dtype'].name}, "
                f"shape {ctx.attrs['shape']}"
            )
        ctx.state = r
    return r


def _check_handle(op: Any, want: str) -> None:
    h = op.inputs[0]
    if h.op.type != want:
        raise InvalidArgumentError(
            f"{op.type}: input 0 must be a {want} handle, got {h.name} ({h.op.type})"
        )


def _scalar_input(op: Any, i: int, what: str, integer: bool = True) -> None:
    t = op.inputs[i]
    if t.shape.ndims not in (None, 0):
        raise InvalidArgumentError(f"{op.type}: {what} must be a scalar, got shape {t.shape}")
    if integer and not t.dtype.is_integer:
        raise InvalidArgumentError(f"{op.type}: {what} must be int32/int64, got {t.dtype.name}")


# ==== FIFOQueue ===================================================================================


class _Queue:
    """Elements in arrival order and the dequeuers waiting for one (both FIFO)."""

    def __init__(self, name: str, dtype: _dt.DType, shape: TensorShape):
        self.name = name
        self.dtype = dtype
        self.shape = shape
        self.items: collections.deque = collections.deque()
        self.waiters: collections.deque = collections.deque()
        self.lock = threading.Lock()
        self.closed = False

    def matches(self, attrs: dict) -> bool:
        return self.dtype == attrs["dtype"] and self.shape == attrs["shape"]

    def describe(self) -> str:
        return f"dtype {self.dtype.name}, shape {self.shape}"

    def _drained(self) -> OutOfRangeError:
        return OutOfRangeError(f"queue {self.name} is closed and empty")

    def close(self) -> None:
        """No more elements: waiting dequeues (the queue is empty) and later ones on an empty
        queue fail with OutOfRangeError; enqueues fail with FailedPreconditionError."""
        with self.lock:
            self.closed = True
            waiting, self.waiters = list(self.waiters), collections.deque()
        for done in waiting:
            done(None, self._drained())

    def enqueue_many(self, values: Any) -> None:
        with self.lock:
            if self.closed:
                raise FailedPreconditionError(f"queue {self.name} is closed; cannot enqueue")
            self.items.extend(np.array(v, copy=True) for v in values)
            served = []
            while self.items and self.waiters:
                served.append((self.waiters.popleft(), self.items.popleft()))
        for done, v in served:  # outside the lock: done wakes another step
            done(v)

    def dequeue(self, done: Callable, step: Any = None) -> None:
        with self.lock:
            if not self.items and self.closed:
                err: BaseException | None = self._drained()
            elif not self.items:
                self.waiters.append(done)
                if step is not None:
                    step.on_cancel(lambda err: self._withdraw(done, err))
                return
            else:
                err, v = None, self.items.popleft()
        if err is not None:
            done(None, err)
        else:
            done(v)

    def _withdraw(self, done: Callable, err: BaseException) -> None:
        """A waiting dequeue's step was aborted: forget it (it gets the error, not an element)."""
        with self.lock:
            try:
                self.waiters.remove(done)
            except ValueError:
                return  # already served
        done(None, err)


FIFOQueueOp = defop("FIFOQueue", stateful=True, is_ref=True, differentiable=False)


@FIFOQueueOp.shape
def _queue_shape(op):
    return [(TensorShape([]), op.attrs["dtype"])]


@FIFOQueueOp.kernel("cpu")
def _fifo_queue(ctx):
    return _handle(ctx, lambda key: _Queue(key, ctx.attrs["dtype"], ctx.attrs["shape"]))


FIFOQueueOp.cost(_no_cost)

QueueEnqueueMany = defop("QueueEnqueueMany", stateful=True, differentiable=False)


@QueueEnqueueMany.shape
def _enqueue_many_shape(op):
    _check_handle(op, "FIFOQueue")
    q, v = op.inputs
    if v.dtype != q.dtype:
        raise InvalidArgumentError(
            f"QueueEnqueueMany: queue {q.op.name} holds {q.dtype.name}, got {v.dtype.name}"
        )
    if v.shape.ndims == 0:
        raise InvalidArgumentError("QueueEnqueueMany: components need a leading batch dimension")
    elem = q.op.attrs["shape"]
    if v.shape.dims is not None and not elem.is_compatible_with(TensorShape(v.shape.dims[1:])):
        raise InvalidArgumentError(
            f"QueueEnqueueMany: elements of shape {TensorShape(v.shape.dims[1:])} do not match "
            f"queue {q.op.name} element shape {elem}"
        )
    return []


@QueueEnqueueMany.kernel("cpu")
def _enqueue_many(ctx, q, values):
    q.enqueue_many(values)


QueueEnqueueMany.cost(_no_cost)

QueueDequeue = defop("QueueDequeue", stateful=True, differentiable=False)


@QueueDequeue.shape
def _dequeue_shape(op):
    _check_handle(op, "FIFOQueue")
    q = op.inputs[0]
    return [(q.op.attrs["shape"], q.dtype)]


@QueueDequeue.kernel("cpu", is_async=True)
def _dequeue(ctx, step, inputs, done):
    inputs[0].dequeue(done, step)


QueueDequeue.cost(_no_cost)

QueueClose = defop("QueueClose", stateful=True, differentiable=False)


@QueueClose.shape
def _queue_close_shape(op):
    _check_handle(op, "FIFOQueue")
    return []


@QueueClose.kernel("cpu")
def _queue_close(ctx, q):
    q.close()


QueueClose.cost(_no_cost)

QueueSize = defop("QueueSize", stateful=True, differentiable=False)


@QueueSize.shape
def _queue_size_shape(op):
    _check_handle(op, "FIFOQueue")
    return [(TensorShape([]), _dt.int32)]


@QueueSize.kernel("cpu")
def _queue_size(ctx, q):
    with q.lock:
        return np.array(len(q.items), dtype=np.int32)


QueueSize.cost(_no_cost)


class FIFOQueue:
    """``hb.FIFOQueue`` in TF1's shape for one component: enqueue, dequeue and size ops.

    ``dequeue`` completes when an element is available, without holding a thread meanwhile.
    """

    def __init__(
        self,
        capacity: int,
        dtypes: Any,
        shapes: Any = None,
        names: Any = None,
        shared_name: str | None = None,
        name: str = "fifo_queue",
    ):
        if capacity != -1:
            raise InvalidArgumentError(
                f"FIFOQueue: only unbounded queues (capacity=-1) are supported, got {capacity}"
            )
        if names is not None:
            raise InvalidArgumentError("FIFOQueue: named components are not supported")
        if isinstance(dtypes, (list, tuple)):
            if len(dtypes) != 1:
                raise InvalidArgumentError(
                    f"FIFOQueue: one component supported, got dtypes {list(dtypes)}"
                )
            dtypes = dtypes[0]
        if shapes is not None and isinstance(shapes, (list, tuple)) and len(shapes) == 1:
            if shapes[0] is None or isinstance(shapes[0], (list, tuple, TensorShape)):
                shapes = shapes[0]
        self.dtype = _dt.as_dtype(dtypes)
        self.shape = TensorShape(shapes if shapes is not None else [])
        if not self.shape.is_fully_defined():
            raise InvalidArgumentError(f"FIFOQueue: element shape {self.shape} must be known")
        attrs = {"dtype": self.dtype, "shape": self.shape, "shared_name": shared_name or ""}
        self.queue_ref = apply("FIFOQueue", [], attrs, name)
        self.name = self.queue_ref.op.name

    def enqueue_many(self, vals: Any, name: str | None = None) -> Operation:
        """Append the elements of ``vals`` (split along its first dimension)."""
        g = self.queue_ref.graph
        with g.colocate_with(self.queue_ref.op):
            v = convert_to_tensor(vals, dtype=self.dtype, graph=g)
            return apply("QueueEnqueueMany", [self.queue_ref, v], {}, name or "EnqueueMany")

    def enqueue(self, vals: Any, name: str | None = None) -> Operation:
        """Append one element."""
        from .manip import expand_dims

        g = self.queue_ref.graph
        with g.colocate_with(self.queue_ref.op):
            v = convert_to_tensor(vals, dtype=self.dtype, graph=g)
            return self.enqueue_many(expand_dims(v, 0), name=name or "Enqueue")

    def dequeue(self, name: str | None = None) -> Tensor:
        """The oldest element; the op waits (asynchronously) while the queue is empty."""
        return apply("QueueDequeue", [self.queue_ref], {}, name or "Dequeue")

    def size(self, name: str | None = None) -> Tensor:
        """The number of elements now in the queue (int32)."""
        return apply("QueueSize", [self.queue_ref], {}, name or "Size")

    def close(self, cancel_pending_enqueues: bool = False, name: str | None = None) -> Operation:
        """Close the queue: the elements in it can still be dequeued, then dequeues fail with
        OutOfRangeError (TF's semantics); enqueues fail. ``cancel_pending_enqueues`` is
        accepted for TF's signature (enqueues never wait here: the queue is unbounded)."""
        g = self.queue_ref.graph
        with g.colocate_with(self.queue_ref.op):
            return apply("QueueClose", [self.queue_ref], {}, name or "Close")


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

    def apply(self, local_step: int, grad: Any, op_name: str) -> None:
        if not self.shape.is_compatible_with(tuple(grad.shape)):
            raise InvalidArgumentError(
                f"{op_name}: gradient of shape {tuple(grad.shape)} does not match accumulator "
                f"{self.name} shape {self.shape}"
            )
        with self.lock:
            if local_step < self.global_step:
                self.dropped += 1  # stale: computed before the last take
                return
            if self.sum is None:
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
            try:
                self.takers.remove(entry)
            except ValueError:
                return  # already served
        entry[1](None, err)

    def _serve(self) -> list:
        """Under the lock: complete the first taker if enough gradients have arrived."""
        if not self.takers or self.count < self.takers[0][0] or self.count == 0:
            return []
        _, done = self.takers.popleft()
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
    acc.apply(int(local_step), grad, ctx.op.name)


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
    _check_handle(op, "ConditionalAccumulator")
    _scalar_input(op, 1, "new_global_step")
    return []


@AccumulatorSetGlobalStep.kernel("cpu", "gpu")
def _set_global_step(ctx, acc, step):
    with acc.lock:
        acc.global_step = int(step)  # TF sets it even when it goes backwards (with a warning)


AccumulatorSetGlobalStep.cost(_no_cost)


def _counter_op(op_type: str, field: str) -> None:
    d = defop(op_type, stateful=True, differentiable=False)

    @d.shape
    def _shape(op):
        _check_handle(op, "ConditionalAccumulator")
        return [(TensorShape([]), _dt.int32)]

    @d.kernel("cpu", "gpu")
    def _count(ctx, acc):
        with acc.lock:
            return np.array(getattr(acc, field), dtype=np.int32)

    d.cost(_no_cost)


AccumulatorCancelTakes = defop("AccumulatorCancelTakes", stateful=True, differentiable=False)


@AccumulatorCancelTakes.shape
def _cancel_shape(op):
    _check_handle(op, "ConditionalAccumulator")
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

    def __init__(
        self,
        dtype: Any,
        shape: Any = None,
        shared_name: str | None = None,
        name: str = "conditional_accumulator",
        reduction_type: str = "MEAN",
    ):
        if reduction_type != "MEAN":
            raise InvalidArgumentError(
                f"ConditionalAccumulator: only reduction_type='MEAN' is supported, "
                f"got {reduction_type!r}"
            )
        self.dtype = _dt.as_dtype(dtype)
        if not self.dtype.is_floating:
            raise InvalidArgumentError(
                f"ConditionalAccumulator: dtype must be a float type, got {self.dtype.name}"
            )
        self.shape = TensorShape(shape) if shape is not None else TensorShape(None)
        attrs = {"dtype": self.dtype, "shape": self.shape, "shared_name": shared_name or ""}
        self.accumulator_ref = apply("ConditionalAccumulator", [], attrs, name)
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
