"""TF1's queue-based input pipeline: producers that feed a queue from a tensor (optionally for a
number of epochs, shuffled) and batchers that assemble examples into batches, each backed by a
``QueueRunner`` in the graph's QUEUE_RUNNERS collection (start them with
``start_queue_runners``; ``MonitoredTrainingSession`` does it itself).

With ``num_epochs`` the producer counts epochs in a local variable (run
``local_variables_initializer()``); after the last one its enqueue fails with OutOfRangeError,
the runner closes the queue and readers get OutOfRangeError once it is drained.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import GraphKeys, Tensor, TensorShape, get_default_graph
from ..ops.array import identity
from ..ops.data_flow import FIFOQueue, PaddingFIFOQueue, RandomShuffleQueue
from ..registry import convert_to_tensor
from .queue_runner import QueueRunner, add_queue_runner

__all__ = [
    "batch",
    "batch_join",
    "input_producer",
    "limit_epochs",
    "range_input_producer",
    "shuffle_batch",
    "shuffle_batch_join",
    "slice_input_producer",
]


def limit_epochs(tensor: Any, num_epochs: int | None = None, name: str | None = None) -> Tensor:
    """``tensor``, ``num_epochs`` times; the next run raises OutOfRangeError (None: forever)."""
    tensor = convert_to_tensor(tensor)
    if num_epochs is None:
        return tensor
    if num_epochs <= 0:
        raise InvalidArgumentError(f"limit_epochs: num_epochs must be > 0, got {num_epochs}")
    from ..variables import Variable

    g = get_default_graph()
    with g.name_scope(name or "limit_epochs"):
        epochs = Variable(
            np.int64(0),
            trainable=False,
            collections=[GraphKeys.LOCAL_VARIABLES],
            name="epochs",
        )
        counter = epochs.count_up_to(num_epochs)
        with g.control_dependencies([counter]):
            return identity(tensor, name="limited")


def input_producer(
    input_tensor: Any,
    element_shape: Any = None,
    num_epochs: int | None = None,
    shuffle: bool = True,
    seed: int | None = None,
    capacity: int = 32,
    shared_name: str | None = None,
    summary_name: str | None = None,
    name: str | None = None,
    cancel_op: Any = None,
) -> FIFOQueue:
    """A queue fed with the rows of ``input_tensor`` (shuffled each epoch with ``shuffle``) by a
    queue runner, ``num_epochs`` times (None: forever)."""
    from ..ops.random import random_shuffle

    g = get_default_graph()
    with g.name_scope(name or "input_producer"):
        t = convert_to_tensor(input_tensor)
        if t.shape.ndims == 0:
            raise InvalidArgumentError("input_producer: input_tensor needs at least one dimension")
        elem = TensorShape(element_shape) if element_shape is not None else None
        if elem is None and t.shape.ndims is not None:
            elem = TensorShape(t.shape.dims[1:])
        if shuffle:
            t = random_shuffle(t, seed=seed)
        t = limit_epochs(t, num_epochs)
        q = FIFOQueue(capacity, [t.dtype], shapes=[elem], shared_name=shared_name)
        enq = q.enqueue_many([t])
        add_queue_runner(QueueRunner(q, [enq], cancel_op=cancel_op))
        if summary_name is not None:
            _fill_summary(summary_name, q, 0, capacity)
        return q


def _fill_summary(tag: str, q: Any, min_after: int, capacity: int) -> None:
    """TF1's queue-fill summary of an input producer or batcher, in the current name scope:
    ``max(0, size - min_after) / (capacity - min_after)`` (``min_after`` 0 but for a shuffle
    batch)."""
    from hetbed.summary import scalar

    from ..ops.array import cast
    from ..ops.math import maximum, multiply, subtract

    size = q.size()
    if min_after:
        size = maximum(0, subtract(size, min_after))
    scalar(tag, multiply(cast(size, _dt.float32), 1.0 / (capacity - min_after)))


def range_input_producer(
    limit: int,
    num_epochs: int | None = None,
    shuffle: bool = True,
    seed: int | None = None,
    capacity: int = 32,
    shared_name: str | None = None,
    name: str | None = None,
) -> FIFOQueue:
    """A queue of the integers 0..limit-1 (int32), per ``input_producer``; ``limit`` may be a
    scalar tensor (known when the graph runs)."""
    from ..graph import Tensor
    from ..ops.manip import range_

    g = get_default_graph()
    with g.name_scope(name or "input_producer") as scope:
        r = range_(limit if isinstance(limit, Tensor) else int(limit), dtype=_dt.int32)
        return input_producer(
            r,
            [],
            num_epochs,
            shuffle,
            seed,
            capacity,
            shared_name,
            summary_name=f"fraction_of_{capacity}_full",
            name=scope,
        )


def slice_input_producer(
    tensor_list: list,
    num_epochs: int | None = None,
    shuffle: bool = True,
    seed: int | None = None,
    capacity: int = 32,
    shared_name: str | None = None,
    name: str | None = None,
) -> list[Tensor]:
    """One slice (row) of every tensor of ``tensor_list`` at a time, the same row of each,
    cycling through the rows ``num_epochs`` times (shuffled with ``shuffle``)."""
    from ..ops.manip import gather

    g = get_default_graph()
    with g.name_scope(name or "input_producer"):
        tensors = [convert_to_tensor(t) for t in tensor_list]
        if not tensors:
            raise InvalidArgumentError("slice_input_producer: tensor_list is empty")
        n = tensors[0].shape.dims[0] if tensors[0].shape.ndims else None
        for t in tensors[1:]:
            m = t.shape.dims[0] if t.shape.ndims else None
            if n is not None and m is not None and n != m:
                raise InvalidArgumentError(
                    f"slice_input_producer: tensors have {n} and {m} rows ({t.name})"
                )
        if n is None:
            raise InvalidArgumentError(
                f"slice_input_producer: the number of rows of {tensors[0].name} must be known "
                f"when the graph is built, got shape {tensors[0].shape}"
            )
        q = range_input_producer(n, num_epochs, shuffle, seed, capacity, shared_name)
        index = q.dequeue()
        return [gather(t, index) for t in tensors]


# ---- batching --------------------------------------------------------------------------------


def _flatten(tensors: Any) -> tuple[list[Tensor], Any]:
    """The tensors of a list, tuple, dict or single tensor, and how to rebuild the structure."""
    if isinstance(tensors, Mapping):
        keys = sorted(tensors)
        return [convert_to_tensor(tensors[k]) for k in keys], ("dict", keys)
    if isinstance(tensors, (list, tuple)):
        return [convert_to_tensor(t) for t in tensors], (type(tensors).__name__, len(tensors))
    return [convert_to_tensor(tensors)], ("single", 1)


def _rebuild(flat: Any, how: Any) -> Any:
    flat = flat if isinstance(flat, list) else [flat]
    kind, info = how
    if kind == "dict":
        return dict(zip(info, flat))
    if kind == "single":
        return flat[0]
    return tuple(flat) if kind == "tuple" else list(flat)


def _shapes(
    flat: list[Tensor], shapes: Any, enqueue_many: bool, what: str, dynamic_pad: bool = False
) -> list:
    if shapes is not None:
        return [TensorShape(s) for s in shapes]
    out = []
    for t in flat:
        s = t.shape
        if enqueue_many:
            s = TensorShape(s.dims[1:]) if s.ndims else TensorShape(None)
        if dynamic_pad:
            if s.ndims is None:
                raise InvalidArgumentError(
                    f"{what}: dynamic_pad needs the rank of {t.name}; its shape is unknown, "
                    "pass shapes="
                )
        elif not s.is_fully_defined():
            raise InvalidArgumentError(
                f"{what}: the shape of {t.name} is {s}, not fully defined; pass shapes="
            )
        out.append(s)
    return out


def _batcher(
    what: str,
    lists: list,
    batch_size: int,
    num_threads: int,
    capacity: int,
    enqueue_many: bool,
    shapes: Any,
    allow_smaller_final_batch: bool,
    shared_name: str | None,
    name: str | None,
    shuffle: tuple | None = None,
    dynamic_pad: bool = False,
) -> Any:
    if batch_size <= 0 or num_threads <= 0:
        raise InvalidArgumentError(f"{what}: batch_size and num_threads must be > 0")
    g = get_default_graph()
    with g.name_scope(name or what):
        flats, how = [], None
        for tensors in lists:
            flat, h = _flatten(tensors)
            if how is not None and h != how:
                raise InvalidArgumentError(f"{what}: every tensor list needs the same structure")
            flats.append(flat)
            how = h
        dtypes = [t.dtype for t in flats[0]]
        for flat in flats[1:]:
            if [t.dtype for t in flat] != dtypes:
                raise InvalidArgumentError(f"{what}: every tensor list needs the same dtypes")
        shp = _shapes(flats[0], shapes, enqueue_many, what, dynamic_pad)
        if dynamic_pad:
            q: Any = PaddingFIFOQueue(capacity, dtypes, shapes=shp, shared_name=shared_name)
        elif shuffle is None:
            q = FIFOQueue(capacity, dtypes, shapes=shp, shared_name=shared_name)
        else:
            min_after, seed = shuffle
            q = RandomShuffleQueue(
                capacity, min_after, dtypes, shapes=shp, seed=seed, shared_name=shared_name
            )
        put = q.enqueue_many if enqueue_many else q.enqueue
        ops = [put(flat) for flat in flats]
        if len(ops) == 1:
            ops = ops * num_threads  # one op, run by num_threads threads (as TF)
        add_queue_runner(QueueRunner(q, ops))
        if shuffle is None:
            _fill_summary(f"fraction_of_{capacity}_full", q, 0, capacity)
        else:
            m = shuffle[0]
            _fill_summary(f"fraction_over_{m}_of_{capacity - m}_full", q, m, capacity)
        take = q.dequeue_up_to if allow_smaller_final_batch else q.dequeue_many
        out = take(batch_size)
        return _rebuild(out, how)


def batch(
    tensors: Any,
    batch_size: int,
    num_threads: int = 1,
    capacity: int = 32,
    enqueue_many: bool = False,
    shapes: Any = None,
    dynamic_pad: bool = False,
    allow_smaller_final_batch: bool = False,
    shared_name: str | None = None,
    name: str | None = None,
) -> Any:
    """Batches of ``batch_size`` examples of ``tensors`` (a list, tuple, dict or tensor), in the
    order ``num_threads`` runner threads enqueue them; the same structure comes back with a new
    first dimension. ``enqueue_many``: ``tensors`` hold many examples each (first dimension).
    ``allow_smaller_final_batch``: the last batch may be smaller once the input ends.
    ``dynamic_pad``: examples may differ in size along dimensions of unknown size; each batch
    is zero-padded to its largest example (a PaddingFIFOQueue)."""
    return _batcher(
        "batch",
        [tensors],
        batch_size,
        num_threads,
        capacity,
        enqueue_many,
        shapes,
        allow_smaller_final_batch,
        shared_name,
        name,
        dynamic_pad=dynamic_pad,
    )


def batch_join(
    tensors_list: list,
    batch_size: int,
    capacity: int = 32,
    enqueue_many: bool = False,
    shapes: Any = None,
    dynamic_pad: bool = False,
    allow_smaller_final_batch: bool = False,
    shared_name: str | None = None,
    name: str | None = None,
) -> Any:
    """As ``batch``, with one runner thread per tensor list of ``tensors_list``."""
    return _batcher(
        "batch_join",
        list(tensors_list),
        batch_size,
        1,
        capacity,
        enqueue_many,
        shapes,
        allow_smaller_final_batch,
        shared_name,
        name,
        dynamic_pad=dynamic_pad,
    )


def shuffle_batch(
    tensors: Any,
    batch_size: int,
    capacity: int,
    min_after_dequeue: int,
    num_threads: int = 1,
    seed: int | None = None,
    enqueue_many: bool = False,
    shapes: Any = None,
    allow_smaller_final_batch: bool = False,
    shared_name: str | None = None,
    name: str | None = None,
) -> Any:
    """As ``batch``, through a RandomShuffleQueue that keeps at least ``min_after_dequeue``
    examples to draw from (until the input ends)."""
    return _batcher(
        "shuffle_batch",
        [tensors],
        batch_size,
        num_threads,
        capacity,
        enqueue_many,
        shapes,
        allow_smaller_final_batch,
        shared_name,
        name,
        (min_after_dequeue, seed),
    )


def shuffle_batch_join(
    tensors_list: list,
    batch_size: int,
    capacity: int,
    min_after_dequeue: int,
    seed: int | None = None,
    enqueue_many: bool = False,
    shapes: Any = None,
    allow_smaller_final_batch: bool = False,
    shared_name: str | None = None,
    name: str | None = None,
) -> Any:
    """As ``shuffle_batch``, with one runner thread per tensor list of ``tensors_list``."""
    return _batcher(
        "shuffle_batch_join",
        list(tensors_list),
        batch_size,
        1,
        capacity,
        enqueue_many,
        shapes,
        allow_smaller_final_batch,
        shared_name,
        name,
        (min_after_dequeue, seed),
    )
