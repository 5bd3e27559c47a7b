"""Cost of partitioning: the MLP step on 1 device vs split across 2 virtual CPU devices (same
cores), and one in-process Send/Recv of 1 KB, 1 MB and 64 MB.

Target (issue): a local Send/Recv hands the array over without a copy, in under 20 us. The cost
is a difference of two noisy step times, so it is measured REPS times and judged on all of them,
with the median and spread printed.
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import best_of, verdict  # noqa: E402
from mlp_step import hetbed_step_fn  # noqa: E402

import hetbed as hb  # noqa: E402

REPS = 5  # repetitions of each difference of two step times


def mlp_step(split: bool):
    """The mlp_step benchmark's step, its layers alternating over cpu:0 and cpu:1 if ``split``."""
    return hetbed_step_fn(
        layer_device=lambda i: f"/cpu:{i % 2 if split else 0}",
        config=hb.ConfigProto(device_count={"CPU": 2}),
    )


def transfer_us(nbytes: int, reps: int = REPS) -> tuple[list[float], bool]:
    """Per-transfer cost, ``reps`` times: (two-device step - one-device step) for an identity
    chain, both measured back to back in each repetition. Returns (differences in us, whether the
    Recv handed over the fed array itself)."""
    arr = np.zeros(nbytes // 4, np.float32)
    runs = []
    same = None
    for split in (False, True):
        g = hb.Graph()
        with g.as_default():
            x = hb.placeholder(hb.float32, [None])
            with hb.device("/cpu:0"):
                a = hb.identity(x)
            with hb.device(f"/cpu:{1 if split else 0}"):
                b = hb.identity(a)
            sess = hb.Session(graph=g, config=hb.ConfigProto(device_count={"CPU": 2}))
            runs.append(lambda s=sess, b=b, x=x: s.run(b, {x: arr}))
            if split:
                same = np.shares_memory(sess.run(b, {x: arr}), arr)
    diffs = []
    for _ in range(reps):
        one = best_of(runs[0], repeat=5, number=100)
        two = best_of(runs[1], repeat=5, number=100)
        diffs.append((two - one) * 1e6)
    return diffs, bool(same)


def main() -> None:
    one, _ = mlp_step(False)
    two, sess = mlp_step(True)
    t1 = best_of(one, repeat=5, number=10) * 1e3
    t2 = best_of(two, repeat=5, number=10) * 1e3
    n_transfers = int((sess.placement().type == "_Send").sum())
    print("\npartition_overhead: MLP step (784-1024-1024-10, batch 256)")
    print(f"{'':34s} {'ms/step':>10s} {'x 1 device':>12s}")
    print(f"{'1 device':34s} {t1:10.2f} {1.0:12.2f}")
    print(
        f"{'2 virtual devices (' + str(n_transfers) + ' transfers)':34s} {t2:10.2f} {t2 / t1:12.2f}"
    )
    print(
        f"\nin-process Send/Recv (step time difference, 2 devices vs 1; {REPS} repetitions: "
        "median and min..max; the target holds only if every repetition is under it)"
    )
    print(
        f"{'size':>10s} {'us/transfer':>12s} {'spread':>16s} {'zero-copy':>10s} {'target <20us':>13s}"
    )
    for label, n in (("1 KB", 1 << 10), ("1 MB", 1 << 20), ("64 MB", 64 << 20)):
        diffs, zero = transfer_us(n)
        word = verdict(diffs, lambda us: us < 20) if zero else "NOT met (copied)"
        spread = f"{min(diffs):.1f}..{max(diffs):.1f}"
        print(f"{label:>10s} {np.median(diffs):12.1f} {spread:>16s} {str(zero):>10s} {word:>13s}")


if __name__ == "__main__":
    main()
