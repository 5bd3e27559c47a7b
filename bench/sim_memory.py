"""Resident memory of a long op-level simulation: a SimSession runs 10,000 shape-only training
steps of ResNet-50 (batch 32, one V100 worker, variables on one PS task, 10 GbE) and prints the
process's resident set every 1,000 steps.

Target (issue 15): memory flat over 10,000 steps: the growth over the last 5,000 steps at most
1 MB per 1,000 steps (the session keeps the RunRecords of the last 100 steps, every step's time
and the current step's flows). Beside it, the same session keeping every record
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


def session(keep):
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
        sess = SimSession(c, graph=g, keep_records=keep)
    feed = {t: sim_value(m.input_shapes[name], t.dtype.np) for name, t in m.inputs.items()}
    return sess, m.train_op, feed


def main() -> None:
    t0 = time.perf_counter()
    sess, train, feed = session(100)
    marks = []
    for i in range(1, STEPS + 1):
        sess.run(train, feed)
        if i % EVERY == 0:
            marks.append((i, rss_mb()))
            print(f"  step {i:6d}: {marks[-1][1]:8.1f} MB resident", flush=True)
    bounded_s = time.perf_counter() - t0
    del sess
    ub, train, feed = session(None)
    start = rss_mb()
    for _ in range(EVERY):
        ub.run(train, feed)
    unbounded = (rss_mb() - start) / EVERY * 1000
    late = (marks[-1][1] - marks[len(marks) // 2 - 1][1]) / (STEPS / 2) * 1000
    early = (marks[len(marks) // 2 - 1][1] - marks[0][1]) / (STEPS / 2 - EVERY) * 1000
    title = "sim_memory: resident growth of a SimSession, MB per 1,000 steps (ResNet-50, b32)"
    print(f"\n{title}\n{'-' * len(title)}")
    print(f"{'keep_records=100, steps 1k-5k':34s} {early:10.2f}")
    print(f"{'keep_records=100, steps 5k-10k':34s} {late:10.2f}")
    print(f"{'keep_records=None, steps 0-1k':34s} {unbounded:10.2f}")
    print(f"(10,000 bounded steps took {bounded_s:.0f} s)")
    print(
        f"target: growth over the last 5,000 steps <= {TARGET_MB:g} MB per 1,000 steps: "
        f"{late:.2f}, {verdict([late], lambda v: v <= TARGET_MB)}"
    )


if __name__ == "__main__":
    main()
