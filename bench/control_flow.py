"""Control flow: an LSTM language-model training step through dynamic_rnn (2 layers of 256,
35 steps, batch 20, vocabulary 1,000, SGD) on hetbed and on TensorFlow's compat.v1 Session
running the same program (intra_op_parallelism_threads=2, inter_op=1), medians of interleaved
rounds; and the while_loop rows of the issue.

Targets (issue 14): the LSTM step within 1.5x of TF1's; a while_loop of 1,000 and 10,000 tiny
iterations within 3x of TF1's time per iteration. hetbed runs dynamic_rnn unrolled (its time
dimension is known when the graph is built); it has no while_loop yet, so those rows print NOT
measured. TF1's tf.nn.rnn_cell needs tf-keras under Keras 3 (pip install tf-keras; this bench
sets TF_USE_LEGACY_KERAS=1 before importing TensorFlow).
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
    for n in (1_000, 10_000):
        print(
            f"target: while_loop of {n:,} iterations <= 3x TF1 per iteration: NOT measured "
            "(hetbed has no while_loop yet)"
        )


if __name__ == "__main__":
    main()
