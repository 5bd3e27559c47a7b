"""Simulator speed, end to end: simulating 100 steps of a 1,000-op graph on 1 and on 64 simulated
devices in a fresh process (graph building, placement, partitioning, the first steps and any
compilation included), in simulated events per wall second, against the bare SimPy event rate of
one process doing as many timeouts (the floor), measured in the same run.

Events are counted honestly: an op completion that takes simulated time (zero-time ops such as
Const, Identity and shape metadata do not count) and a flow's first and last byte, for every
step, replayed or not (a steady-state step, the same as the last two, is replayed from the last
one's outcome: simulator/steady.py; the table says how many were). Each rate is measured with a
warm on-disk compile cache and with a cold one (a fresh ``NUMBA_CACHE_DIR``: the simulator
compiles nothing, so the two differ only by noise; the column stays to show it), and for the
first, never-seen step alone. ``--no-replay`` simulates every step in full.

Targets (issue 12): end to end >= 1.0x the bare one-process SimPy rate with a warm cache and
>= 0.3x with a cold one; a first, never-seen step >= 0.3x.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import simpy

STEPS = 100


def bare_simpy(n: int) -> float:
    """Events/s of one SimPy process doing ``n`` timeouts."""
    env = simpy.Environment()

    def proc():
        for k in range(n):
            yield env.timeout(1e-6 * (1 + k % 7))

    env.process(proc())
    t = time.perf_counter()
    env.run()
    return n / (time.perf_counter() - t)


def child(n_devices: int, n_ops: int, steps: int, replay: bool = True) -> dict:
    """Runs in the fresh process: build, simulate ``steps`` steps, count events."""
    t0 = time.perf_counter()
    import hetbed as hb
    from hetbed.devices.costmodel import DevicePerf
    from hetbed.simulator import Cluster, SimSession, sim_value

    t_import = time.perf_counter() - t0
    perf = DevicePerf("toy", {"float32": 1e12}, memory_bandwidth=1e11, launch_overhead_s=5e-6)
    t0 = time.perf_counter()
    c = Cluster()
    per_task = 8
    for t in range((n_devices + per_task - 1) // per_task):
        c.add_task("worker", t, cpu=None, gpu=(perf, per_task), nic=(1.25e9, 25e-6))
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
        sess = SimSession(c, graph=g, replay_steps=replay)
    feed = {x: sim_value([64])}
    build_s = time.perf_counter() - t0
    first_wall = None
    for _ in range(steps):
        t1 = time.perf_counter()
        sess.run(out, feed)
        if first_wall is None:
            first_wall = time.perf_counter() - t1  # placement, partitioning, plans included
    wall = time.perf_counter() - t0
    events = [  # counted after the clock stopped, from each step's public record
        int((r.ops.duration_s > 0).sum()) + 2 * len(r.flows) for r in list(sess.records)[-steps:]
    ]
    return {
        "events": sum(events),
        "first_events": events[0],
        "wall": wall,
        "first_wall": first_wall,
        "import_s": t_import,
        "build_s": build_s,
        "ops": len(sess.records[-1].ops),
        "replayed": sess.steady.replayed if sess.steady is not None else 0,
    }


def run_child(n_devices: int, cache_dir: str | None, replay: bool = True) -> dict:
    env = dict(os.environ)
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = cache_dir
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(n_devices)] + ([] if replay else ["--no-replay"]),
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(replay: bool = True) -> None:
    rows = []
    for n_dev in (1, 64):
        # the floor is measured between the runs, as often, and its best kept as theirs is:
        # best against best, under the same drift of this VM's speed
        floors, warms = [], []
        run_child(n_dev, None, replay)  # make sure the default (warm) cache holds the kernel
        for _ in range(2):
            floors.append(bare_simpy(99_900))
            warms.append(run_child(n_dev, None, replay))
        warm = min(warms, key=lambda r: r["wall"])
        floors.append(bare_simpy(99_900))
        with tempfile.TemporaryDirectory() as cold_dir:
            cold = run_child(n_dev, cold_dir, replay)
        floors.append(bare_simpy(99_900))
        floor = max(floors)
        rows.append((n_dev, warm, cold, floor))
    print(f"\nsim_speed: {STEPS} steps of a 1,000-op graph, end to end in a fresh process")
    print(
        f"{'devices':>8s} {'events':>8s} {'ops/step':>9s} {'SimPy 1 proc ev/s':>18s} "
        f"{'warm ev/s':>10s} {'x floor':>8s} {'cold ev/s':>10s} {'x floor':>8s} "
        f"{'1st step ev/s':>14s} {'x floor':>8s} {'warm wall s':>12s} {'cold wall s':>12s} "
        f"{'replayed':>9s}"
    )
    worst = {"warm": 9e9, "cold": 9e9, "first": 9e9}
    for n_dev, warm, cold, floor in rows:
        w = warm["events"] / warm["wall"]
        c = cold["events"] / cold["wall"]
        f = warm["first_events"] / warm["first_wall"]
        worst["warm"] = min(worst["warm"], w / floor)
        worst["cold"] = min(worst["cold"], c / floor)
        worst["first"] = min(worst["first"], f / floor)
        print(
            f"{n_dev:8d} {warm['events']:8d} {warm['ops']:9d} {floor:18.0f} {w:10.0f} "
            f"{w / floor:8.2f} {c:10.0f} {c / floor:8.2f} {f:14.0f} {f / floor:8.2f} "
            f"{warm['wall']:12.2f} {cold['wall']:12.2f} {warm['replayed']:5d}/{STEPS}"
        )
    print(
        "(events: op completions that take simulated time + 2 per flow; walls from graph building "
        "to the last step, import excluded; replayed: steady-state steps replayed from the last "
        "one's outcome, not simulated again)"
    )
    for key, what, goal in (
        ("warm", "end to end, warm compile cache", 1.0),
        ("cold", "end to end, cold compile cache", 0.3),
        ("first", "a first, never-seen step", 0.3),
    ):
        v = worst[key]
        print(
            f"target: {what} >= {goal}x the bare SimPy rate: {v:.2f}x, "
            f"{'met' if v >= goal else 'NOT met'}"
        )


if __name__ == "__main__":
    replay = "--no-replay" not in sys.argv
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(child(int(sys.argv[2]), 1000, STEPS, replay)))
    else:
        main(replay)
