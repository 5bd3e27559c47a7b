"""Resident memory of a long op-level simulation: a SimSession runs 10,000 shape-only training
steps of ResNet-50 (batch 32, one V100 worker, variables on one PS task, 10 GbE) and prints the
process's resident set every 1,000 steps.

Target (issue 15): memory flat over 10,000 steps: the growth over the last 5,000 steps at most
1 MB per 1,000 steps (the session keeps the RunRecords of the last 100 steps, every step's time
and the current step's flows), judged on the default session (steady-state steps replayed from
the last one's outcome: simulator/steady.py) and on one simulating every step in full
(``replay_steps=False``). Beside them, the same session keeping every record
(``keep_records=None``, the behaviour before the bound) for 1,000 steps, for scale.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from common import verdict  # noqa: E402

import hetbed as hb  # noqa: E402
from hetbed.scenarios.models.zoo import build  # noqa: E402
from hetbed.simulator import Cluster, SimSession, sim_value  # noqa: E402

STEPS = 10_000
EVERY = 1_000
TARGET_MB = 1.0


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def session(keep, replay=True):
    c = Cluster()
    c.add_task("ps", 0, cpu="xeon_e5_2630v3_ps", nic="eth_10g")
    c.add_task("worker", 0, gpu=("v100_sxm2", 1), cpu="xeon_e5_2680v3_2s", nic="eth_10g")
    g = hb.Graph()
    with g.as_default():
        setter = hb.train.replica_device_setter(
            ps_tasks=1, worker_device="/job:worker/task:0/device:gpu:0"
        )
        with hb.device(setter):
            m = build("resnet50", 32)
        sess = SimSession(c, graph=g, keep_records=keep, replay_steps=replay)
    feed = {t: sim_value(m.input_shapes[name], t.dtype.np) for name, t in m.inputs.items()}
    return sess, m.train_op, feed


def bounded(replay: bool) -> tuple[float, float, float]:
    """(MB per 1,000 steps over steps 1k-5k, over 5k-10k, seconds) of a bounded session."""
    t0 = time.perf_counter()
    sess, train, feed = session(100, replay)
    marks = []
    for i in range(1, STEPS + 1):
        sess.run(train, feed)
        if i % EVERY == 0:
            marks.append((i, rss_mb()))
            print(f"  step {i:6d}: {marks[-1][1]:8.1f} MB resident", flush=True)
    late = (marks[-1][1] - marks[len(marks) // 2 - 1][1]) / (STEPS / 2) * 1000
    early = (marks[len(marks) // 2 - 1][1] - marks[0][1]) / (STEPS / 2 - EVERY) * 1000
    return early, late, time.perf_counter() - t0


def main() -> None:
    runs = {replay: bounded(replay) for replay in (True, False)}
    ub, train, feed = session(None)
    start = rss_mb()
    for _ in range(EVERY):
        ub.run(train, feed)
    unbounded = (rss_mb() - start) / EVERY * 1000
    title = "sim_memory: resident growth of a SimSession, MB per 1,000 steps (ResNet-50, b32)"
    print(f"\n{title}\n{'-' * len(title)}")
    for replay, (early, late, secs) in runs.items():
        how = "steady steps replayed" if replay else "every step simulated"
        print(f"{'keep_records=100, steps 1k-5k, ' + how:56s} {early:10.2f}")
        print(f"{'keep_records=100, steps 5k-10k, ' + how:56s} {late:10.2f}  ({secs:.0f} s)")
    print(f"{'keep_records=None, steps 0-1k, steady steps replayed':56s} {unbounded:10.2f}")
    late = [r[1] for r in runs.values()]
    print(
        f"target: growth over the last 5,000 steps <= {TARGET_MB:g} MB per 1,000 steps: "
        f"{max(late):.2f}, {verdict(late, lambda v: v <= TARGET_MB)}"
    )


if __name__ == "__main__":
    main()
