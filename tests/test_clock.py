"""The clock protocol and SimClock: SimPy through its public API only."""

from __future__ import annotations

import pathlib
import random
import re

import pytest
import simpy
from simpy.core import EmptySchedule

from hetbed.devices.clock import Clock
from hetbed.simulator.clock import SimClock, as_clock, run_until

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_simclock_is_a_clock_and_counts_its_events():
    env = SimClock()
    assert isinstance(env, Clock) and isinstance(env, simpy.Environment)
    seen = []

    def proc():
        for d in (1.0, 2.0, 0.5):
            yield env.timeout(d)
            seen.append(env.now)

    env.process(proc())
    assert env.pending == 1  # the process's initialize event
    env.run()
    assert seen == [1.0, 3.0, 3.5]
    # initialize + 3 timeouts + the process's own end event
    assert env.scheduled == env.processed == 5 and env.pending == 0
    with pytest.raises(EmptySchedule):
        env.step()
    assert env.processed == 5  # a step on an empty schedule processed nothing


def test_advance_lands_exactly_and_processes_what_comes_first():
    rng = random.Random(7)
    env = SimClock()
    for _ in range(300):
        t = env.now + rng.choice([1e-9, 1e-3, 1.0, 1e3]) * rng.random()
        env.advance(t)
        assert env.now == t  # bit for bit, as SimPy's now + delay could miss it
    fired = []
    env.timeout(5.0).callbacks.append(lambda _e: fired.append(env.now))
    t = env.now + 10.0
    env.advance(t)
    assert fired == [t - 10.0 + 5.0] and env.now == t
    with pytest.raises(ValueError, match="back to"):
        env.advance(t - 1.0)
    env.advance(t)  # no-op
    assert env.now == t


def test_run_until_counts_processed_events_and_reports_a_stuck_run():
    env = SimClock()
    done = env.event()

    def proc():
        yield env.timeout(1.0)
        yield env.timeout(1.0)
        done.succeed()

    env.process(proc())
    n = run_until(env, done)
    assert done.processed and env.now == 2.0
    assert n == env.processed  # initialize, 2 timeouts, done
    never = env.event()
    with pytest.raises(EmptySchedule):
        run_until(env, never)


def test_a_cluster_needs_a_clock_that_advances():
    from hetbed.simulator import Cluster

    with pytest.raises(TypeError, match="SimClock"):
        Cluster(env=simpy.Environment())
    env = SimClock()
    assert Cluster(env=env).env is env
    assert as_clock(env) is env


def test_no_private_simpy_state_in_product_code():
    """Nothing outside tests reads or writes SimPy's private attributes (``_now``, ``_queue``,
    ``_eid``, ``_active_proc``) of an environment."""
    pattern = re.compile(r"(?<!self)\.(_now|_eid|_active_proc)\b|\b(env|clock)\._queue\b")
    offenders = []
    for sub in ("devices", "runtime", "simulator", "scenarios", "reports", "hetbed", "bench"):
        for path in (ROOT / sub).rglob("*.py"):
            for i, line in enumerate(path.read_text().splitlines(), 1):
                if pattern.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not offenders, "\n".join(offenders)
