"""Real models for the hybrid (convergence-aware) mode: simulated time, real gradients.

Each simulated worker computes the real gradient of a small model on scikit-learn's digits at the
parameter version it read, so staleness (async) and dropped gradients (backup workers) change
what is learned, and reports get time-to-accuracy curves.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import hetbed as hb
from hetbed.simulator import ReplicaProfile
from hetbed.simulator.hybrid import HybridLearner

from . import datasets

#: name -> hidden layer sizes (empty: softmax regression)
HYBRID_MODELS = {"digits_softmax": (), "digits_mlp": (64,)}


def digits_learner(
    name: str,
    batch_size: int,
    learning_rate: float,
    eval_every: int,
    n_ps: int,
    compute_s: float,
    seed: int = 0,
) -> tuple[HybridLearner, ReplicaProfile]:
    """A HybridLearner for ``name`` and the ReplicaProfile of its parameters (round robin over
    ``n_ps`` PS shards; ``compute_s`` per step on a worker)."""
    hidden = HYBRID_MODELS[name]
    data = datasets.digits(seed=0)
    rng = np.random.default_rng(seed)
    sizes = (64, *hidden, 10)
    init = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        scale = np.sqrt(2.0 / a) if hidden else 0.0
        init += [(rng.standard_normal((a, b)) * scale).astype(np.float32), np.zeros(b, np.float32)]
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, [None, 64])
        y = hb.placeholder(hb.int32, [None])
        params = [hb.placeholder(hb.float32, p.shape) for p in init]
        h = x
        for i in range(len(sizes) - 1):
            h = hb.matmul(h, params[2 * i]) + params[2 * i + 1]
            if i < len(sizes) - 2:
                h = hb.nn.relu(h)
        loss = hb.reduce_mean(hb.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h))
        grads = hb.gradients(loss, params)
        correct = hb.reduce_mean(
            hb.cast(hb.equal(hb.cast(hb.argmax(h, 1), hb.int32), y), hb.float32)
        )
    sess = hb.Session(graph=g)
    n_batches = len(data.x_train) // batch_size
    order = np.random.default_rng(seed).permutation(len(data.x_train))

    def feed(ps: list, xs: Any, ys: Any) -> dict:
        return {x: xs, y: ys, **dict(zip(params, ps))}

    def grad_fn(ps: list, batch: int) -> tuple[float, list]:
        j = order[(batch % n_batches) * batch_size : (batch % n_batches + 1) * batch_size]
        out = sess.run([loss, *grads], feed(ps, data.x_train[j], data.y_train[j]))
        return float(out[0]), out[1:]

    def apply_fn(ps: list, gr: list) -> list:
        return [p - learning_rate * d for p, d in zip(ps, gr)]

    def eval_fn(ps: list) -> float:
        return float(sess.run(correct, feed(ps, data.x_test, data.y_test)))

    shard_of = [i % n_ps for i in range(len(init))]
    learner = HybridLearner(
        grad_fn, apply_fn, init, eval_fn, eval_every=eval_every, shard_of=shard_of
    )
    prof = ReplicaProfile(
        compute_s,
        {f"param{i}": (int(p.nbytes), shard_of[i]) for i, p in enumerate(init)},
        apply_s=1e-5,
        examples_per_step=batch_size,
    )
    return learner, prof
