"""The clock protocol the executor waits on (no imports from the runtime: devices use it too).

A timed schedule needs four things of a clock, and nothing else:

* ``now``: the current time (seconds);
* ``peek()``: the time of the next event scheduled on the clock (``math.inf`` when none);
* ``step()``: process that next event (its callbacks may complete asynchronous nodes);
* ``advance(t)``: move the time forward to ``t`` when nothing is scheduled before ``t`` (the
  executor calls it when a timed node's completion is the next thing that happens).

A SimPy environment offers the first three through its public API; ``simulator/clock.py``'s
``SimClock`` adds ``advance`` (through ``schedule`` and ``step``, public too). Simulated devices
take such a clock; they know nothing of clusters, links or the executor.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """What the executor's timed schedule and the simulated devices ask of a clock."""

    @property
    def now(self) -> float: ...

    def peek(self) -> float: ...

    def step(self) -> None: ...

    def advance(self, t: float) -> None: ...
