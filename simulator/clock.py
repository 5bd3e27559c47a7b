"""``SimClock``: the SimPy environment every simulated run uses, through SimPy's public API only.

It is a ``simpy.Environment`` (processes, timeouts, events work as usual) that also
* counts the events it has scheduled and processed (public overrides of ``schedule`` and
  ``step``), so that benchmarks and results report event counts and the simulator can tell
  whether anything it did not schedule itself is still pending;
* implements the executor's clock protocol (``hetbed.devices.clock.Clock``): ``now``, ``peek``,
  ``step`` and ``advance(t)``, which moves the time to exactly ``t`` with one event.
"""

from __future__ import annotations

import math

import simpy
from simpy.core import EmptySchedule
from simpy.events import NORMAL

__all__ = ["SimClock", "as_clock", "run_until"]


class SimClock(simpy.Environment):
    """A SimPy environment that counts its events and can ``advance`` (see the module docstring)."""

    def __init__(self, initial_time: float = 0.0):
        super().__init__(initial_time)
        self.scheduled = 0  # events scheduled so far
        self.processed = 0  # events processed so far

    def schedule(self, event: simpy.Event, priority: int = NORMAL, delay: float = 0) -> None:
        self.scheduled += 1
        super().schedule(event, priority, delay)

    def step(self) -> None:
        self.processed += 1
        try:
            super().step()
        except EmptySchedule:
            self.processed -= 1
            raise

    @property
    def pending(self) -> int:
        """Events scheduled and not yet processed."""
        return self.scheduled - self.processed

    def advance(self, t: float) -> None:
        """Move the time forward to exactly ``t``, processing what is scheduled before it.

        The executor calls it when the next thing to happen is a timed node's completion at ``t``
        (nothing else is scheduled earlier): one event. Raises ValueError for a time in the past.
        """
        now = self.now
        if t == now:
            return
        if not t > now:
            raise ValueError(f"cannot advance the clock from {now!r} back to {t!r}")
        d = t - now  # SimPy schedules at now + delay: make that sum land on t exactly
        while now + d < t:
            d = math.nextafter(d, math.inf)
        while now + d > t:
            d = math.nextafter(d, -math.inf)
        ev = self.timeout(d)
        while ev.callbacks is not None:  # not processed yet
            self.step()


def as_clock(env: simpy.Environment) -> simpy.Environment:
    """``env`` if it can ``advance``; raises TypeError naming the problem otherwise."""
    if not hasattr(env, "advance"):
        raise TypeError(
            f"a simulated cluster needs a hetbed.simulator.SimClock as its environment, got "
            f"{type(env).__name__} (SimClock is a simpy.Environment that can advance its time)"
        )
    return env


def run_until(env: simpy.Environment, event: simpy.Event) -> int:
    """Process ``env``'s events until ``event`` has been processed; returns how many it processed
    (``env.run(until=event)`` with a count, by ``step`` as SimPy's own loop does). Raises
    simpy.core.EmptySchedule when nothing is left to do before that."""
    step = env.step
    n = 0
    while event.callbacks is not None:  # not processed yet
        step()
        n += 1
    return n
