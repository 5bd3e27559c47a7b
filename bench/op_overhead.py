"""Per-op overhead: a chain of 1,000 tiny adds fed from a placeholder (nothing constant-folds).

Target (issue): at most 3 us/op; goal: TF1's C++ executor, about 0.9 us/op on this machine.
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import best_of, optional, table  # noqa: E402

import hetbed as hb  # noqa: E402

N = 1000


def hetbed_us() -> float:
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, [4])
        one = hb.constant(np.ones(4, np.float32))
        y = x
        for _ in range(N):
            y = hb.add(y, one)
        sess = hb.Session(graph=g)
        xv = np.zeros(4, np.float32)
        return best_of(lambda: sess.run(y, {x: xv}), repeat=5, number=20) / N * 1e6


def numpy_us() -> float:
    a = np.zeros(4, np.float32)
    o = np.ones(4, np.float32)

    def chain():
        y = a
        for _ in range(N):
            y = np.add(y, o)
        return y

    return best_of(chain, repeat=5, number=20) / N * 1e6


def tf1_us() -> float | None:
    tf = optional("tensorflow")
    if tf is None:
        return None
    v1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [4])
        one = tf.constant(np.ones(4, np.float32))
        y = x
        for _ in range(N):
            y = tf.add(y, one)
        sess = v1.Session(graph=g)
        xv = np.zeros(4, np.float32)
        return best_of(lambda: sess.run(y, {x: xv}), repeat=5, number=20) / N * 1e6


def torch_us() -> float | None:
    torch = optional("torch")
    if torch is None:
        return None
    torch.set_num_threads(2)
    a = torch.zeros(4)
    o = torch.ones(4)

    def chain():
        y = a
        for _ in range(N):
            y = torch.add(y, o)
        return y

    return best_of(chain, repeat=5, number=20) / N * 1e6


def main() -> None:
    rows = [("hetbed Session", hetbed_us()), ("numpy call (floor)", numpy_us())]
    for name, fn in (("TF1 Session", tf1_us), ("PyTorch eager", torch_us)):
        v = fn()
        if v is not None:
            rows.append((name, v))
    print(table("op_overhead: 1,000 chained adds", rows, "us/op", "numpy call (floor)"))
    print(f"target <= 3.0 us/op: {'met' if rows[0][1] <= 3.0 else 'NOT met'}")


if __name__ == "__main__":
    main()
