"""tf.contrib.opt (hetbed/compat/v1/contrib_opt.py) against numpy written from the update rules:
decoupled weight decay before the base update (dense and on a sparse gradient's rows), Nadam
dense and sparse, LazyAdam's row-only sparse update."""

from __future__ import annotations

import numpy as np
import pytest

import hetbed.compat.v1 as tf

W0 = np.array([[1.0, -2.0], [0.5, 3.0], [-1.5, 0.25]], np.float32)
G = [np.array([[0.1, -0.2], [0.3, 0.0], [-0.5, 0.4]], np.float32) * (k + 1) for k in range(3)]


def _run(make_opt, sparse=False, rows=(0, 2), decay_list=None):
    with tf.Graph().as_default():
        w = tf.get_variable("w", initializer=W0.copy())
        other = tf.get_variable("other", initializer=np.ones(2, np.float32))
        g = tf.placeholder(tf.float32, [3, 2])
        opt = make_opt()
        if sparse:
            idx = np.array(rows, np.int64)
            grad = tf.IndexedSlices(tf.gather(g, idx), tf.constant(idx), tf.constant([3, 2]))
        else:
            grad = g
        pairs = [(grad, w), (tf.ones([2]), other)]
        kw = {"decay_var_list": decay_list(w, other)} if decay_list else {}
        step = opt.apply_gradients(pairs, **kw)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            for gv in G:
                s.run(step, {g: gv})
            return s.run(w), s.run(other)


def _adam_np(
    w, sparse_rows=None, wd=0.0, lr=0.01, b1=0.9, b2=0.999, eps=1e-8, nadam=False, lazy=False
):
    w, m, v = w.astype(np.float64), np.zeros_like(w, np.float64), np.zeros_like(w, np.float64)
    for t, g in enumerate(G, start=1):
        rows = np.arange(3) if sparse_rows is None else np.array(sparse_rows)
        w[rows] -= wd * w[rows]
        lr_t = lr * np.sqrt(1 - b2**t) / (1 - b1**t)
        if lazy:
            m[rows] = b1 * m[rows] + (1 - b1) * g[rows]
            v[rows] = b2 * v[rows] + (1 - b2) * g[rows] ** 2
            w[rows] -= lr_t * m[rows] / (np.sqrt(v[rows]) + eps)
            continue
        gd = np.zeros_like(w)
        gd[rows] = g[rows]
        m = b1 * m + (1 - b1) * gd
        v = b2 * v + (1 - b2) * gd**2
        if nadam:
            step = lr_t * (b1 * m + (1 - b1) * gd) / (np.sqrt(v) + eps)
        else:
            step = lr_t * m / (np.sqrt(v) + eps)
        if sparse_rows is not None and nadam:
            w[rows] -= step[rows]
        else:
            w -= step
    return w


def test_adamw_decays_before_adams_update():
    got, other = _run(lambda: tf.contrib.opt.AdamWOptimizer(0.01, learning_rate=0.01))
    np.testing.assert_allclose(got, _adam_np(W0, wd=0.01), rtol=1e-5)
    o, m, v = 1.0, 0.0, 0.0  # the other variable (gradient 1) decays too
    for t in range(1, 4):
        o -= 0.01 * o
        m, v = 0.9 * m + 0.1, 0.999 * v + 0.001
        o -= 0.01 * np.sqrt(1 - 0.999**t) / (1 - 0.9**t) * m / (np.sqrt(v) + 1e-8)
    np.testing.assert_allclose(other, [o, o], rtol=1e-6)
    got, _ = _run(lambda: tf.contrib.opt.AdamWOptimizer(0.01, learning_rate=0.01), sparse=True)
    # sparse: the rows decay, and Adam's TF1 sparse rule moves every row
    w = W0.astype(np.float64).copy()
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t, g in enumerate(G, start=1):
        w[[0, 2]] -= 0.01 * w[[0, 2]]
        gd = np.zeros_like(w)
        gd[[0, 2]] = g[[0, 2]]
        m, v = 0.9 * m + 0.1 * gd, 0.999 * v + 0.001 * gd**2
        w -= 0.01 * np.sqrt(1 - 0.999**t) / (1 - 0.9**t) * m / (np.sqrt(v) + 1e-8)
    np.testing.assert_allclose(got, w, rtol=1e-5)


def test_decay_var_list_and_the_momentum_and_extended_forms():
    only_w = lambda w, other: [w]  # noqa: E731
    _, other = _run(lambda: tf.contrib.opt.MomentumWOptimizer(0.1, 0.05, 0.9), decay_list=only_w)
    # other is not decayed: plain momentum on a gradient of ones
    acc, o = 0.0, 1.0
    for _ in range(3):
        acc = 0.9 * acc + 1.0
        o -= 0.05 * acc
    np.testing.assert_allclose(other, [o, o], rtol=1e-6)
    sgdw = tf.contrib.opt.extend_with_decoupled_weight_decay(tf.train.GradientDescentOptimizer)
    got, _ = _run(lambda: sgdw(0.1, 0.5))
    w = W0.astype(np.float64).copy()
    for g in G:
        w -= 0.1 * w
        w -= 0.5 * g
    np.testing.assert_allclose(got, w, rtol=1e-6)
    with pytest.raises(TypeError, match="Optimizer class"):
        tf.contrib.opt.extend_with_decoupled_weight_decay(object)


def test_nadam_and_lazy_adam():
    got, _ = _run(lambda: tf.contrib.opt.NadamOptimizer(0.01))
    np.testing.assert_allclose(got, _adam_np(W0, nadam=True), rtol=1e-5)
    got, _ = _run(lambda: tf.contrib.opt.NadamOptimizer(0.01), sparse=True)
    np.testing.assert_allclose(got, _adam_np(W0, sparse_rows=[0, 2], nadam=True), rtol=1e-5)
    assert np.array_equal(got[1], W0[1])  # a row without gradient stays
    got, _ = _run(lambda: tf.contrib.opt.LazyAdamOptimizer(0.01), sparse=True)
    np.testing.assert_allclose(got, _adam_np(W0, sparse_rows=[0, 2], lazy=True), rtol=1e-5)


def test_repeated_rows_of_a_sparse_gradient_are_summed_first():
    # gather(v, [0, 0, 1]) on a two-row variable: every row has a gradient, so the sparse update
    # equals the dense one (TF1 sums repeated rows before a sparse update)
    def final(make, sparse):
        with tf.Graph().as_default():
            v = tf.get_variable("v", initializer=np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
            rows = (
                tf.gather(v, [0, 0, 1]) if sparse else tf.gather(tf.convert_to_tensor(v), [0, 0, 1])
            )
            loss = tf.reduce_sum(rows * rows)
            step = make().minimize(loss)
            with tf.Session() as s:
                s.run(tf.global_variables_initializer())
                for _ in range(3):
                    s.run(step)
                return s.run(v)

    for make in (
        lambda: tf.contrib.opt.AdamWOptimizer(0.1, learning_rate=0.1),
        lambda: tf.contrib.opt.MomentumWOptimizer(0.1, 0.1, 0.9),
        lambda: tf.contrib.opt.NadamOptimizer(0.1),
    ):
        np.testing.assert_allclose(final(make, True), final(make, False), rtol=1e-6)


def test_each_apply_gradients_call_says_which_variables_decay():
    with tf.Graph().as_default():
        a = tf.get_variable("a", initializer=np.float32(1.0))
        b = tf.get_variable("b", initializer=np.float32(1.0))
        sgdw = tf.contrib.opt.extend_with_decoupled_weight_decay(tf.train.GradientDescentOptimizer)
        opt = sgdw(0.5, 0.0)  # no gradient step: only the decay moves them
        only_a = opt.minimize(a + b, decay_var_list=[a])
        both = opt.apply_gradients([(tf.constant(1.0), a), (tf.constant(1.0), b)])
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(only_a)
            assert s.run([a, b]) == [0.5, 1.0]
            s.run(both)  # a later call without a list decays every variable
            assert s.run([a, b]) == [0.25, 0.5]
