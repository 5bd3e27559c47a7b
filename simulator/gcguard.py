"""Fewer garbage collections while a simulation runs.

A simulated step allocates many short-lived tuples and callbacks but builds no reference cycles
that matter before it ends; CPython's default threshold (a young collection every 700 net
allocations) then spends a large share of the time scanning. ``relaxed_gc`` raises the
threshold of the youngest generation for the duration of a ``with`` block (process-wide, as
every GC setting is) and restores the previous one afterwards.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

GC_THRESHOLD = 100_000  # allocations between young collections while simulating


@contextmanager
def relaxed_gc(threshold: int = GC_THRESHOLD) -> Iterator[None]:
    old = gc.get_threshold()
    if 0 < old[0] < threshold:
        gc.set_threshold(threshold, *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)
