"""Depthwise convolution, forward and both gradients, on MobileNet-v1 layer shapes (3x3,
channel multiplier 1, batch 16, float32, NHWC), run as a Session step that fetches the two
gradients of sum(y * y).

Prints hetbed's time per step; the floor, the bytes the three kernels must move (input, output,
output gradient and input gradient, each once) at this machine's memory copy rate measured in
the same run (numpy copying a 64 MB array); the same step with the filter expanded to a
block-diagonal conv2d filter (what hetbed ran before it had depthwise kernels: C times the
flops); and, when installed (pip install .[peers]), TensorFlow's compat.v1 Session running the
same program (intra_op_parallelism_threads=2). Each time is the median over rounds after
untimed steps. Target: hetbed within 2x of TF1 on every shape, in the same run.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import optional, verdict  # noqa: E402

# (batch, height = width, channels, stride): MobileNet-v1's depthwise layers at 224x224 input
SHAPES = [(16, 112, 32, 1), (16, 56, 128, 1), (16, 28, 256, 2), (16, 14, 512, 1)]
TARGET = 2.0
ROUNDS, NUMBER, WARM = 5, 3, 2


def _time(sess, fetches) -> float:
    for _ in range(WARM):
        sess.run(fetches)
    times = []
    for _ in range(ROUNDS):
        t = time.perf_counter()
        for _ in range(NUMBER):
            sess.run(fetches)
        times.append((time.perf_counter() - t) / NUMBER)
    return statistics.median(times)


def step(tf, x, f, stride, block_diagonal=False, config=None) -> float:
    g = tf.Graph()
    with g.as_default():
        xv, fv = tf.Variable(x), tf.Variable(f)
        if block_diagonal:
            c = x.shape[3]
            eye = tf.constant(np.eye(c, dtype=np.float32).reshape(1, 1, c, c, 1))
            full = tf.reshape(tf.expand_dims(fv, 3) * eye, [3, 3, c, c])
            y = tf.nn.conv2d(xv, full, [1, stride, stride, 1], "SAME")
        else:
            y = tf.nn.depthwise_conv2d(xv, fv, [1, stride, stride, 1], "SAME")
        grads = tf.gradients(tf.reduce_sum(y * y), [xv, fv])
        with tf.Session(graph=g, config=config) as sess:
            sess.run(tf.global_variables_initializer())
            return _time(sess, [gr.op for gr in grads])


def copy_rate() -> float:
    a = np.ones(1 << 24, np.float32)
    b = np.empty_like(a)
    times = []
    for _ in range(5):
        t = time.perf_counter()
        np.copyto(b, a)
        times.append(time.perf_counter() - t)
    return 2 * a.nbytes / min(times)  # bytes read and written


def main() -> int:
    import hetbed.compat.v1 as hb

    tf = optional("tensorflow")
    tf1 = None
    if tf is not None:
        import tensorflow.compat.v1 as tf1

        tf1.disable_eager_execution()
    rate = copy_rate()
    rng = np.random.default_rng(0)
    rows, ratios = [], []
    for n, h, c, s in SHAPES:
        x = rng.standard_normal((n, h, h, c)).astype(np.float32)
        f = rng.standard_normal((3, 3, c, 1)).astype(np.float32)
        ho = -(-h // s)
        floor = (2 * x.nbytes + 2 * n * ho * ho * c * 4) / rate
        ours = step(hb, x, f, s)
        old = step(hb, x, f, s, block_diagonal=True)
        theirs = float("nan")
        if tf1 is not None:
            cfg = tf1.ConfigProto(intra_op_parallelism_threads=2, inter_op_parallelism_threads=1)
            theirs = step(tf1, x, f, s, config=cfg)
            ratios.append(ours / theirs)
        rows.append((f"{n}x{h}x{h}x{c} /{s}", ours, floor, old, theirs))
    print("\ndepthwise_step: depthwise 3x3 forward + both gradients, ms per step")
    print(f"{'shape':22s} {'hetbed':>9s} {'floor':>8s} {'x floor':>8s} {'block-diag':>11s} "
          f"{'x hetbed':>9s} {'TF1':>8s} {'x TF1':>7s}")  # fmt: skip
    for name, ours, floor, old, theirs in rows:
        print(f"{name:22s} {ours * 1e3:9.2f} {floor * 1e3:8.2f} {ours / floor:8.1f} "
              f"{old * 1e3:11.2f} {old / ours:9.1f} {theirs * 1e3:8.2f} {ours / theirs:7.2f}")  # fmt: skip
    word = verdict(ratios, lambda r: r <= TARGET) if tf1 is not None else "NOT measured"
    worst = f"{max(ratios):.2f}x" if ratios else "TF not installed"
    print(f"target: depthwise step within {TARGET}x of TF1 on every shape: worst {worst}, {word}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
