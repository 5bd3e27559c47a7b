"""Cost of partitioning: the MLP step on 1 device vs split across 2 virtual CPU devices (same
cores), and one in-process Send/Recv of 1 KB, 1 MB and 64 MB.

Target (issue): a local Send/Recv hands the array over without a copy, in under 20 us.
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import best_of  # noqa: E402
from mlp_step import hetbed_step_fn  # noqa: E402

import hetbed as hb  # noqa: E402


def mlp_step(split: bool):
    """The mlp_step benchmark's step, its layers alternating over cpu:0 and cpu:1 if ``split``."""
    return hetbed_step_fn(
        layer_device=lambda i: f"/cpu:{i % 2 if split else 0}",
        config=hb.ConfigProto(device_count={"CPU": 2}),
    )


def transfer_us(nbytes: int) -> tuple[float, bool]:
    """Per-transfer cost: (two-device step - one-device step) for an identity chain."""
    arr = np.zeros(nbytes // 4, np.float32)
    times = []
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
            times.append(best_of(lambda s=sess, b=b, x=x: s.run(b, {x: arr}), repeat=7, number=200))
            if split:
                same = np.shares_memory(sess.run(b, {x: arr}), arr)
    return (times[1] - times[0]) * 1e6, bool(same)


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
    print("\nin-process Send/Recv (step time difference, 2 devices vs 1)")
    print(f"{'size':>10s} {'us/transfer':>14s} {'zero-copy':>10s} {'target <20us':>13s}")
    for label, n in (("1 KB", 1 << 10), ("1 MB", 1 << 20), ("64 MB", 64 << 20)):
        us, zero = transfer_us(n)
        print(
            f"{label:>10s} {us:14.1f} {str(zero):>10s} {'met' if us < 20 and zero else 'NOT met':>13s}"
        )


if __name__ == "__main__":
    main()
