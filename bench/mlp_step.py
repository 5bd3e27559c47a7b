"""One SGD training step of an MLP 784-1024-1024-10, batch 256, float32.

Prints hetbed's time per step, the same step hand-written in numpy, the FLOP-rate floor
(step FLOPs / this machine's measured float32 GEMM rate) and, when installed (pip install
.[peers]), PyTorch eager and TensorFlow (tf.function and a compat.v1 Session).
Target (issue): hetbed within 1.10x of the hand-written numpy step.
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import best_of, optional, table  # noqa: E402

import hetbed as hb  # noqa: E402

B, SIZES, LR = 256, (784, 1024, 1024, 10), 0.01


def data(seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((B, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], B).astype(np.int32)
    ws = [
        (rng.standard_normal((a, b)) * np.sqrt(2.0 / a)).astype(np.float32)
        for a, b in zip(SIZES[:-1], SIZES[1:])
    ]
    bs = [np.zeros(b, np.float32) for b in SIZES[1:]]
    return x, y, ws, bs


def step_flops() -> float:
    fwd = sum(2.0 * B * a * b for a, b in zip(SIZES[:-1], SIZES[1:]))
    return 3 * fwd - 2.0 * B * SIZES[0] * SIZES[1]  # no input gradient for the first layer


def gemm_rate() -> float:
    a = np.random.default_rng(1).standard_normal((1024, 1024)).astype(np.float32)
    t = best_of(lambda: a @ a, repeat=5, number=5)
    return 2.0 * 1024**3 / t


def numpy_step_fn():
    x, y, ws, bs = data()
    rows = np.arange(B)

    def step():
        h1 = x @ ws[0]
        h1 += bs[0]
        np.maximum(h1, 0, out=h1)
        h2 = h1 @ ws[1]
        h2 += bs[1]
        np.maximum(h2, 0, out=h2)
        p = h2 @ ws[2]
        p += bs[2]
        p -= p.max(axis=1, keepdims=True)
        np.exp(p, out=p)
        p /= p.sum(axis=1, keepdims=True)
        p[rows, y] -= 1.0
        p *= 1.0 / B
        gw3, gb3 = h2.T @ p, p.sum(0)
        d2 = p @ ws[2].T
        d2 *= h2 > 0
        gw2, gb2 = h1.T @ d2, d2.sum(0)
        d1 = d2 @ ws[1].T
        d1 *= h1 > 0
        gw1, gb1 = x.T @ d1, d1.sum(0)
        for w, g in zip(ws + bs, (gw1, gw2, gw3, gb1, gb2, gb3)):
            w -= LR * g

    return step


def hetbed_step_fn(threads: int = 0, layer_device=None, config=None):
    """The hetbed step; ``layer_device(i)`` may place layer i (partition_overhead splits it).
    Returns (step function, session)."""
    x_np, y_np, ws, bs = data()
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, [None, SIZES[0]])
        y = hb.placeholder(hb.int32, [None])
        h = x
        for i, (w0, b0) in enumerate(zip(ws, bs)):
            with hb.device(layer_device(i) if layer_device else None):
                w = hb.Variable(w0, name=f"w{i}")
                b = hb.Variable(b0, name=f"b{i}")
                h = hb.nn.bias_add(hb.matmul(h, w), b)
                if i < len(ws) - 1:
                    h = hb.nn.relu(h)
        loss = hb.reduce_mean(hb.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h))
        train = hb.train.GradientDescentOptimizer(LR).minimize(loss)
        cfg = config or hb.ConfigProto(inter_op_parallelism_threads=threads)
        sess = hb.Session(graph=g, config=cfg)
        sess.run(hb.global_variables_initializer())
    feed = {x: x_np, y: y_np}
    return (lambda: sess.run(train, feed)), sess


def torch_step_fn():
    torch = optional("torch")
    if torch is None:
        return None
    torch.set_num_threads(2)
    x, y, ws, bs = data()
    xt, yt = torch.from_numpy(x), torch.from_numpy(y).long()
    params = [torch.tensor(a, requires_grad=True) for a in ws + bs]
    opt = torch.optim.SGD(params, lr=LR)

    def step():
        h = xt
        for i in range(3):
            h = h @ params[i] + params[3 + i]
            if i < 2:
                h = torch.relu(h)
        loss = torch.nn.functional.cross_entropy(h, yt)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return step


def tf_step_fns():
    tf = optional("tensorflow")
    if tf is None:
        return {}
    x, y, ws, bs = data()
    out = {}
    vs = [tf.Variable(a) for a in ws + bs]
    opt = tf.keras.optimizers.SGD(LR)

    @tf.function
    def step2(xb, yb):
        with tf.GradientTape() as tape:
            h = xb
            for i in range(3):
                h = tf.matmul(h, vs[i]) + vs[3 + i]
                if i < 2:
                    h = tf.nn.relu(h)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(yb, h))
        opt.apply_gradients(zip(tape.gradient(loss, vs), vs))

    out["TF2 tf.function"] = lambda: step2(x, y)
    v1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        xp = v1.placeholder(tf.float32, [None, SIZES[0]])
        yp = v1.placeholder(tf.int32, [None])
        h = xp
        for i, (w0, b0) in enumerate(zip(ws, bs)):
            h = tf.nn.bias_add(tf.matmul(h, v1.Variable(w0)), v1.Variable(b0))
            if i < 2:
                h = tf.nn.relu(h)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=yp, logits=h))
        train = v1.train.GradientDescentOptimizer(LR).minimize(loss)
        sess = v1.Session(graph=g)
        sess.run(v1.global_variables_initializer())
    out["TF1 Session"] = lambda: sess.run(train, {xp: x, yp: y})
    return out


def main() -> None:
    rows = [
        ("hetbed", best_of(hetbed_step_fn()[0], repeat=5, number=10) * 1e3),
        ("hetbed, 2 inter-op threads", best_of(hetbed_step_fn(2)[0], repeat=5, number=10) * 1e3),
        ("numpy by hand", best_of(numpy_step_fn(), repeat=5, number=10) * 1e3),
        ("FLOP floor", step_flops() / gemm_rate() * 1e3),
    ]
    t = torch_step_fn()
    if t is not None:
        rows.append(("PyTorch eager", best_of(t, repeat=5, number=10) * 1e3))
    for name, fn in tf_step_fns().items():
        rows.append((name, best_of(fn, repeat=5, number=10) * 1e3))
    print(
        table(
            "mlp_step: 784-1024-1024-10, batch 256, SGD",
            rows,
            "ms/step",
            "numpy by hand",
            "FLOP floor",
        )
    )
    ratio = rows[0][1] / rows[2][1]
    print(f"target hetbed <= 1.10x numpy: {ratio:.2f}x, {'met' if ratio <= 1.10 else 'NOT met'}")


if __name__ == "__main__":
    main()
