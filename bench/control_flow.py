"""Control flow: an LSTM language-model training step through dynamic_rnn (2 layers of 256,
35 steps, batch 20, vocabulary 1,000, SGD) on hetbed and on TensorFlow's compat.v1 Session
running the same program (intra_op_parallelism_threads=2, inter_op=1), medians of interleaved
rounds; and the while_loop rows of the issue.

Targets (issue 14): the LSTM step within 1.5x of TF1's; a while_loop of 1,000 and 10,000 tiny
iterations (a counter and one multiply) within 3x of TF1's time per iteration; a dynamic_rnn over
a time dimension known only when the graph runs costs as much per step at 800 steps as at 100
(within 1.5x). hetbed runs
dynamic_rnn unrolled (its time dimension is known when the graph is built) and while_loop with
execution frames (runtime/frames.py), iterations one after another, the later ones of a simple
loop on the fast path;
TF1's Session runs the same loop with its default graph optimizations. TF1's tf.nn.rnn_cell
needs tf-keras under Keras 3 (pip install tf-keras; this bench sets TF_USE_LEGACY_KERAS=1 before
importing TensorFlow).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(__file__))
from common import optional, verdict  # noqa: E402

import hetbed.compat.v1 as hbtf  # noqa: E402

B, T, H, V, LAYERS, LR = 20, 35, 256, 1000, 2, 0.5
TARGET = 1.5
ROUNDS, NUMBER = 9, 3


def program(tf, threads: int | None = None):
    """(step, reset) of the LSTM LM training step written once for both APIs."""
    rng = np.random.default_rng(0)
    x_np = rng.integers(0, V, (B, T)).astype(np.int32)
    y_np = rng.integers(0, V, (B, T)).astype(np.int32)
    g = tf.Graph()
    with g.as_default():
        tf.set_random_seed(0)
        x = tf.placeholder(tf.int32, [B, T])
        y = tf.placeholder(tf.int32, [B, T])
        emb = tf.get_variable("emb", [V, H], initializer=tf.random_uniform_initializer(-0.1, 0.1))
        inputs = tf.nn.embedding_lookup(emb, x)
        cells = [tf.nn.rnn_cell.BasicLSTMCell(H) for _ in range(LAYERS)]
        out, _ = tf.nn.dynamic_rnn(tf.nn.rnn_cell.MultiRNNCell(cells), inputs, dtype=tf.float32)
        w = tf.get_variable(
            "softmax_w", [H, V], initializer=tf.random_uniform_initializer(-0.1, 0.1)
        )
        b = tf.get_variable("softmax_b", [V], initializer=tf.zeros_initializer())
        logits = tf.matmul(tf.reshape(out, [-1, H]), w) + b
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=tf.reshape(y, [-1]), logits=logits
            )
        )
        train = tf.train.GradientDescentOptimizer(LR).minimize(loss)
        init = tf.global_variables_initializer()
        kw = {}
        if threads:
            kw["config"] = tf.ConfigProto(
                intra_op_parallelism_threads=threads, inter_op_parallelism_threads=1
            )
        sess = tf.Session(graph=g, **kw)
        sess.run(init)
    feed = {x: x_np, y: y_np}
    return (lambda: sess.run(train, feed)), (lambda: sess.run(init))


def tf1():
    tf = optional("tensorflow")
    if tf is None:
        return None
    v1 = tf.compat.v1
    try:
        v1.nn.rnn_cell.BasicLSTMCell  # noqa: B018 - Keras 3 removed it
    except (AttributeError, ImportError):
        print("(TF1: tf.compat.v1.nn.rnn_cell is missing under Keras 3: pip install tf-keras)")
        return None
    v1.disable_eager_execution()
    return program(v1, threads=2)


def main() -> None:
    fns = {"hetbed": program(hbtf)}
    peer = tf1()
    if peer is not None:
        fns["TF1 Session"] = peer
    for step, reset in fns.values():  # warm-up
        step()
        reset()
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(ROUNDS):
        for name, (step, reset) in fns.items():
            reset()
            t0 = time.perf_counter()
            for _ in range(NUMBER):
                step()
            times[name].append((time.perf_counter() - t0) / NUMBER)
            time.sleep(0.2)
    ref = float(np.median(times["TF1 Session"])) if "TF1 Session" in times else None
    title = f"control_flow: LSTM LM step (dynamic_rnn, {LAYERS}x{H}, {T} steps, batch {B})"
    print(f"\n{title}\n{'-' * len(title)}")
    print(f"{'':24s} {'ms/step':>9s} {'spread (ms)':>14s} {'x TF1':>7s}")
    for name, ts in times.items():
        med = float(np.median(ts))
        rel = f"{med / ref:7.2f}" if ref else "      -"
        print(f"{name:24s} {med * 1e3:9.2f} {min(ts) * 1e3:6.2f}-{max(ts) * 1e3:<7.2f} {rel}")
    print(f"(medians of {ROUNDS} interleaved rounds of {NUMBER} steps; hetbed unrolls dynamic_rnn)")
    ratio = [float(np.median(times["hetbed"])) / ref] if ref else []
    shown = f"{ratio[0]:.2f}x" if ratio else "-"
    print(f"target: LSTM step <= {TARGET}x TF1: {shown}, {verdict(ratio, lambda r: r <= TARGET)}")
    loops(peer is not None)
    if peer is not None:
        import tensorflow as tf

        rnn_lengths(tf.compat.v1)
    else:
        rnn_lengths(None)


def loop_program(tf, n: int):
    """A while_loop of ``n`` iterations of a counter and one multiply; returns its step."""
    g = tf.Graph()
    with g.as_default():
        _, x = tf.while_loop(
            lambda i, x: i < n, lambda i, x: (i + 1, x * 1.0001), [tf.constant(0), tf.constant(1.0)]
        )
        sess = tf.Session(graph=g)
    return lambda: sess.run(x)


def loops(with_tf: bool) -> None:
    v1 = None
    if with_tf:
        import tensorflow as tf

        v1 = tf.compat.v1
    rows = []
    for n in (1_000, 10_000):
        fns = {"hetbed": loop_program(hbtf, n)}
        if v1 is not None:
            fns["TF1 Session"] = loop_program(v1, n)
        per: dict[str, list[float]] = {k: [] for k in fns}
        for f in fns.values():
            f()
        for _ in range(5):
            for name, f in fns.items():
                t0 = time.perf_counter()
                f()
                per[name].append((time.perf_counter() - t0) / n)
        rows.append((n, {k: float(np.median(v)) for k, v in per.items()}))
    print(
        f"\n{'while_loop iterations':24s} {'hetbed us/iter':>15s} {'TF1 us/iter':>12s} {'x TF1':>7s}"
    )
    for n, med in rows:
        tf_us = med.get("TF1 Session")
        rel = f"{med['hetbed'] / tf_us:7.2f}" if tf_us else "      -"
        tf_col = f"{tf_us * 1e6:12.2f}" if tf_us else f"{'-':>12s}"
        print(f"{n:<24,d} {med['hetbed'] * 1e6:15.2f} {tf_col} {rel}")
    print("(medians of 5 runs; hetbed runs the loop's later iterations on its fast path)")
    for n, med in rows:
        tf_us = med.get("TF1 Session")
        ratio = [med["hetbed"] / tf_us] if tf_us else []
        shown = f"{ratio[0]:.2f}x" if ratio else "-"
        print(
            f"target: while_loop of {n:,} iterations <= 3x TF1 per iteration: {shown}, "
            f"{verdict(ratio, lambda r: r <= 3.0)}"
        )


def rnn_program(tf, steps: int):
    """One forward+backward pass of dynamic_rnn (an LSTM of 128, batch 32) over a time dimension
    unknown when the graph is built (a while_loop), ``steps`` steps; returns its step."""
    g = tf.Graph()
    with g.as_default():
        tf.set_random_seed(0)
        x = tf.placeholder(tf.float32, [None, None, 32])
        out, _ = tf.nn.dynamic_rnn(tf.nn.rnn_cell.BasicLSTMCell(128), x, dtype=tf.float32)
        train = tf.train.GradientDescentOptimizer(0.01).minimize(tf.reduce_sum(out))
        sess = tf.Session(graph=g)
        sess.run(tf.global_variables_initializer())
    feed = {x: np.random.default_rng(0).random((32, steps, 32), dtype=np.float32)}
    return lambda: sess.run(train, feed)


def rnn_lengths(v1) -> None:
    """Per-step cost of a dynamic_rnn training step at 100 and 800 steps: flat when appending an
    output and reading an input cost the same at any length."""
    per: dict[tuple[str, int], float] = {}
    for steps in (100, 800):
        fns = {"hetbed": rnn_program(hbtf, steps)}
        if v1 is not None:
            fns["TF1 Session"] = rnn_program(v1, steps)
        ts: dict[str, list[float]] = {k: [] for k in fns}
        for f in fns.values():
            f()
        for _ in range(3):
            for name, f in fns.items():
                t0 = time.perf_counter()
                f()
                ts[name].append((time.perf_counter() - t0) / steps)
        for name, v in ts.items():
            per[(name, steps)] = float(np.median(v))
    print(
        f"\n{'dynamic_rnn steps (None)':24s} {'hetbed us/step':>15s} {'TF1 us/step':>12s} {'x TF1':>7s}"
    )
    for steps in (100, 800):
        hb_us, tf_us = per[("hetbed", steps)], per.get(("TF1 Session", steps))
        rel = f"{hb_us / tf_us:7.2f}" if tf_us else "      -"
        tf_col = f"{tf_us * 1e6:12.1f}" if tf_us else f"{'-':>12s}"
        print(f"{steps:<24,d} {hb_us * 1e6:15.1f} {tf_col} {rel}")
    print("(LSTM 128, batch 32, forward and backward; medians of 3 runs)")
    growth = per[("hetbed", 800)] / per[("hetbed", 100)]
    print(
        f"target: per-step cost at 800 steps <= 1.5x that at 100 steps: {growth:.2f}x, "
        f"{verdict([growth], lambda r: r <= 1.5)}"
    )


if __name__ == "__main__":
    main()
