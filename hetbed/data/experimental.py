"""``hb.data.experimental`` (TF1's ``tf.data.experimental``, and ``tf.contrib.data``'s names):
the transformations TF1 programs apply with ``dataset.apply(...)``, and datasets that mix
others.

The fused transformations (``map_and_batch``, ``shuffle_and_repeat``, ``parallel_interleave``)
give the same elements as their parts in sequence; hetbed makes elements when asked, so their
parallelism and buffer arguments change nothing. ``prefetch_to_device`` and ``copy_to_device``
leave the dataset as it is: elements reach a device through the iterator's ``get_next``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from hetbed.runtime import dtypes as _dt
from hetbed.runtime.errors import InvalidArgumentError

from .dataset import Dataset, common_shapes
from .windows import get_single_element, group_by_window, scan

#: TF's "choose for me" for buffer sizes and parallelism (hetbed makes elements when asked)
AUTOTUNE = -1

Transformation = Callable[[Dataset], Dataset]


def unbatch() -> Transformation:
    """For ``dataset.apply``: each element split along its first dimension."""
    return lambda ds: ds.unbatch()


def map_and_batch(
    map_func: Callable,
    batch_size: int,
    num_parallel_batches: Any = None,
    drop_remainder: bool = False,
    num_parallel_calls: Any = None,
) -> Transformation:
    """``map(map_func)`` then ``batch(batch_size, drop_remainder)``."""
    return lambda ds: ds.map(map_func).batch(batch_size, drop_remainder)


def shuffle_and_repeat(buffer_size: int, count: int | None = None, seed: int | None = None):
    """``shuffle(buffer_size, seed)`` then ``repeat(count)``: a new order every pass."""
    return lambda ds: ds.shuffle(buffer_size, seed).repeat(count)


def parallel_interleave(
    map_func: Callable,
    cycle_length: int,
    block_length: int = 1,
    sloppy: bool = False,
    buffer_output_elements: Any = None,
    prefetch_input_elements: Any = None,
) -> Transformation:
    """``interleave(map_func, cycle_length, block_length)`` (in order, even when ``sloppy``)."""
    return lambda ds: ds.interleave(map_func, cycle_length, block_length)


def enumerate_dataset(start: int = 0) -> Transformation:
    """``dataset.enumerate(start)``: ``(index, element)`` pairs."""
    return lambda ds: ds.enumerate(start)


def prefetch_to_device(device: str, buffer_size: Any = None) -> Transformation:
    """The same dataset (the iterator's ``get_next`` places the elements)."""
    return lambda ds: ds


def copy_to_device(target_device: str, source_device: str = "/cpu:0") -> Transformation:
    """The same dataset (the iterator's ``get_next`` places the elements)."""
    return lambda ds: ds


def Counter(start: int = 0, step: int = 1, dtype: Any = _dt.int64) -> Dataset:  # noqa: N802
    """``start``, ``start + step``, ... without end, as scalars of ``dtype``."""
    dt = _dt.as_dtype(dtype)
    if dt.is_integer and not all(isinstance(v, (int, np.integer)) for v in (start, step)):
        raise TypeError(
            f"Counter: an integer counter needs int start and step, got {start!r}, {step!r}"
        )

    def make(env: dict) -> Any:
        v = np.asarray(start).astype(dt.np)
        inc = np.asarray(step).astype(dt.np)
        while True:
            yield [v]
            with np.errstate(over="ignore"):
                v = (v + inc).astype(dt.np)  # integers wrap at their width, as TF's

    return Dataset(None, [dt], [[]], make)


def _same_elements(fn: str, datasets: list) -> list:
    if not datasets:
        raise ValueError(f"{fn}: no datasets given")
    for d in datasets:
        if not isinstance(d, Dataset):
            raise TypeError(f"{fn}: expected datasets, got {type(d).__name__}")
    first = datasets[0]
    shapes = first._shapes
    for k, d in enumerate(datasets[1:], 1):
        if d._types != first._types:
            raise TypeError(
                f"{fn}: dataset {k}'s elements are {[t.name for t in d._types]}, dataset 0's "
                f"{[t.name for t in first._types]}"
            )
        shapes = common_shapes(shapes, d._shapes)
    return shapes


def _mix(
    fn: str, datasets: list, picks: Callable, captures: list, stop: bool, controls: tuple = ()
) -> Dataset:
    """Elements taken from ``datasets`` in the order ``picks(env, live)`` gives (an iterator of
    indices; ``live`` marks the datasets not yet exhausted); an exhausted one is skipped, and
    the mix ends when all are (or, with ``stop``, at the first pick of an exhausted one)."""
    shapes = _same_elements(fn, datasets)
    first = datasets[0]

    def make(env: dict) -> Any:
        its = [d._elements(env) for d in datasets]
        live = [True] * len(its)
        for k in picks(env, live):
            if not 0 <= k < len(its):
                raise InvalidArgumentError(
                    f"{fn}: selector index {k} out of range for {len(its)} datasets"
                )
            if not live[k]:
                continue
            el = next(its[k], None)
            if el is None:
                live[k] = False
                if stop or not any(live):
                    return
                continue
            yield el

    caps = [c for d in datasets for c in d._captures] + captures
    ctrl = [c for d in datasets for c in d._controls] + list(controls)
    return Dataset(first._structure, first._types, shapes, make, caps, ctrl)


def choose_from_datasets(
    datasets: Any, choice_dataset: Dataset, stop_on_empty_dataset: bool = False
) -> Dataset:
    """The next element of ``datasets[i]`` for each ``i`` that ``choice_dataset`` (int64
    scalars) gives; a dataset that has ended is skipped (ends the mix with
    ``stop_on_empty_dataset``)."""
    dss = list(datasets) if isinstance(datasets, (list, tuple)) else [datasets]
    if not isinstance(choice_dataset, Dataset) or choice_dataset._types != [_dt.int64]:
        raise TypeError("choose_from_datasets: choice_dataset must be a dataset of int64 scalars")

    def picks(env: dict, live: list) -> Any:
        return (int(np.asarray(el[0])) for el in choice_dataset._elements(env))

    caps = choice_dataset._captures
    return _mix(
        "choose_from_datasets", dss, picks, caps, stop_on_empty_dataset, choice_dataset._controls
    )


def sample_from_datasets(
    datasets: Any,
    weights: Any = None,
    seed: int | None = None,
    stop_on_empty_dataset: bool = False,
) -> Dataset:
    """Elements of ``datasets`` in a random order: each drawn from dataset ``i`` with
    probability ``weights[i]`` (uniform by default) among those not yet exhausted; ends when all
    are (with ``stop_on_empty_dataset``, when the first is drawn after its end). A ``seed`` makes
    the order of every pass the same."""
    dss = list(datasets) if isinstance(datasets, (list, tuple)) else [datasets]
    if weights is not None and (
        hasattr(weights, "_as_graph_element") or type(weights).__name__ == "Tensor"
    ):
        raise TypeError("sample_from_datasets: weights must be numbers in hetbed, not a tensor")
    w = np.ones(len(dss)) if weights is None else np.asarray(weights, np.float64).ravel()
    if w.shape != (len(dss),) or (w < 0).any() or not np.isfinite(w).all() or w.sum() <= 0:
        raise ValueError(
            f"sample_from_datasets: weights must be {len(dss)} non-negative numbers, not all 0; "
            f"got {weights!r}"
        )

    def picks(env: dict, live: list) -> Any:
        rng = np.random.default_rng(seed)
        while True:
            p = w * np.asarray(live, np.float64) if not stop_on_empty_dataset else w
            if p.sum() <= 0:
                return
            yield int(rng.choice(len(p), p=p / p.sum()))

    return _mix("sample_from_datasets", dss, picks, [], stop_on_empty_dataset)


__all__ = [
    "AUTOTUNE",
    "Counter",
    "choose_from_datasets",
    "copy_to_device",
    "enumerate_dataset",
    "get_single_element",
    "group_by_window",
    "map_and_batch",
    "parallel_interleave",
    "prefetch_to_device",
    "sample_from_datasets",
    "scan",
    "shuffle_and_repeat",
    "unbatch",
]
