"""Simulator speed: simulated events per second of hetbed's op-level simulation vs a bare SimPy
loop doing the same number of timeouts (the floor), and the wall time to simulate one step of a
1,000-op graph on 64 simulated devices.

Target (issue): at least half the bare SimPy event rate for the same pattern.

Two rates per graph: the full timed schedule (what the first steps of a feed signature run:
values, device plans, SimPy clock) and a replayed step (later steps of the signature: the step
program, see simulator/program.py, same results). The verdict is on the replayed rate, what a
simulation of many steps runs at.
"""

from __future__ import annotations

import os
import sys
import time

import simpy

sys.path.insert(0, os.path.dirname(__file__))

import hetbed as hb  # noqa: E402
from hetbed.devices.costmodel import DevicePerf  # noqa: E402
from hetbed.simulator import Cluster, SimSession, sim_value  # noqa: E402

PERF = DevicePerf("toy", {"float32": 1e12}, memory_bandwidth=1e11, launch_overhead_s=5e-6)


def bare_simpy(n: int, processes: int = 1) -> float:
    """Events/s of ``processes`` SimPy processes doing ``n`` timeouts in all."""
    env = simpy.Environment()
    each = max(n // processes, 1)

    def proc(k: int):
        for _ in range(each):
            yield env.timeout(1e-6 * (1 + k % 7))

    for k in range(processes):
        env.process(proc(k))
    t = time.perf_counter()
    env.run()
    return each * processes / (time.perf_counter() - t)


def chain_graph(n_ops: int, n_devices: int, replay: bool = True):
    """``n_devices`` chains of ops; op k of chain d also reads op k-1 of chain d-1 (a transfer)."""
    c = Cluster()
    per_task = 8
    for t in range((n_devices + per_task - 1) // per_task):
        c.add_task("worker", t, cpu=None, gpu=(PERF, per_task), nic=(1.25e9, 25e-6))
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, [64])
        heads = []
        for d in range(n_devices):
            with hb.device(f"/job:worker/task:{d // per_task}/device:gpu:{d % per_task}"):
                heads.append(hb.identity(x))
        depth = max(n_ops // n_devices - 1, 1)
        for _ in range(depth):
            new = []
            for d in range(n_devices):
                with hb.device(f"/job:worker/task:{d // per_task}/device:gpu:{d % per_task}"):
                    new.append(heads[d] * 2.0 + heads[d - 1] if n_devices > 1 else heads[d] * 2.0)
            heads = new
        out = hb.add_n(heads) if n_devices > 1 else heads[0]
        sess = SimSession(c, graph=g, replay=replay)
    return sess, out, x


def hetbed_rate(n_ops: int, n_devices: int, replay: bool) -> tuple[float, float, int, int]:
    """(events/s, best step wall time, events per step, flows per step). A step's events are
    what happens in the simulated step, independent of how hetbed schedules it: one per
    simulated op completion and two per network flow (its first byte after the path latency,
    and its last byte) -- what a hand-written SimPy model of the step needs at least (one
    timeout per op, two per transfer)."""
    sess, out, x = chain_graph(n_ops, n_devices, replay)
    feed = {x: sim_value([64])}
    for _ in range(sess.replay_after + 1):  # prepare (placement, partition); record; compile
        sess.run(out, feed)
    assert sess.replayed_steps == (1 if replay else 0)
    record = sess.last_record
    events = len(record.ops) + 2 * len(record.flows)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        sess.run(out, feed)
        best = min(best, time.perf_counter() - t)
    return events / best, best, events, len(record.flows)


def main() -> None:
    rows = []
    for n_ops, n_dev in ((1000, 1), (1000, 64)):
        for replay in (False, True):
            rate, wall, events, flows = hetbed_rate(n_ops, n_dev, replay)
            floors = [
                max(bare_simpy(events, p) for _ in range(3))
                for p in (1, n_dev, n_ops + flows)  # one process; one per device; one per op/flow
            ]
            rows.append((n_ops, n_dev, replay, events, rate, floors, wall))
    print("\nsim_speed: simulated events per second (one step, best of 5)")
    print(
        f"{'graph':>22s} {'step':>8s} {'events':>7s} {'hetbed ev/s':>12s} {'SimPy 1 proc':>13s} "
        f"{'x floor':>8s} {'SimPy 1/dev':>12s} {'x':>6s} {'SimPy 1/op':>11s} {'x':>6s} "
        f"{'step wall ms':>13s}"
    )
    for n_ops, n_dev, replay, events, rate, (one, per_dev, per_op), wall in rows:
        print(
            f"{f'{n_ops} ops, {n_dev} devices':>22s} {'replayed' if replay else 'full':>8s} "
            f"{events:7d} {rate:12.0f} {one:13.0f} "
            f"{rate / one:8.2f} {per_dev:12.0f} {rate / per_dev:6.2f} {per_op:11.0f} "
            f"{rate / per_op:6.2f} {wall * 1e3:13.1f}"
        )
    worst = min(r[4] / r[5][0] for r in rows if r[2])
    print(
        "(events: simulated op completions + 2 per flow (first and last byte); floors: the same "
        "number of bare SimPy timeouts by one process, by one process per device, and by one "
        "process per op and flow)"
    )
    print(
        "(full: the timed schedule with values and the SimPy clock, the first steps of a feed "
        "signature; replayed: later steps, the recorded step program, identical results)"
    )
    print(
        f"target >= 0.5x the bare SimPy rate (one process, the strictest floor), replayed steps: "
        f"{worst:.2f}x, "
        f"{'met' if worst >= 0.5 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
