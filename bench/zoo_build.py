"""Graph construction time of every model in the zoo (full training graph: forward, gradients,
optimizer), built once each in its own graph, best of 3 builds.

Target: every model builds in at most 5 s on this machine (Inception-v3 is the largest graph).
The floor is the smallest model's build time; peers are not comparable (TF1 builds different
graphs), so none is measured.
"""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from common import table, verdict  # noqa: E402

import hetbed as hb  # noqa: E402
from hetbed.scenarios.models.zoo import ZOO, build  # noqa: E402

TARGET_S = 5.0


def build_seconds(name: str, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        g = hb.Graph()
        with g.as_default():
            t0 = time.perf_counter()
            build(name, 2)
            best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    rows = [(name, build_seconds(name)) for name in sorted(ZOO)]
    floor = min(rows, key=lambda r: r[1])[0]
    slowest = max(rows, key=lambda r: r[1])
    print(table("zoo: training-graph build time (best of 3)", rows, "s", floor))
    print(
        f"target: every model builds in <= {TARGET_S:.0f} s (slowest: {slowest[0]} "
        f"{slowest[1]:.2f} s): {verdict([v for _, v in rows], lambda v: v <= TARGET_S)}"
    )


if __name__ == "__main__":
    main()
