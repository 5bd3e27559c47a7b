"""WP4 differential tests: the same TF1 programs (optimizers, metrics, debugging ops, py_func)
under TensorFlow and under hetbed. Skipped when TensorFlow is not installed."""

from __future__ import annotations

import numpy as np
import pytest

import hetbed.compat.v1 as hbtf

tf1 = pytest.importorskip("tensorflow.compat.v1")

W0 = np.array([[0.5, -1.0], [2.0, 0.1], [-0.3, 0.7]], np.float32)
X = np.array([[1.0, 2.0], [-1.0, 0.5], [0.3, -2.0]], np.float32)


def _train(tf, make_opt):
    w = tf.Variable(W0, name="w")
    e = tf.Variable(W0, name="e")
    idx = tf.constant([2, 0, 2])
    loss = tf.reduce_sum(w * w * X) + tf.reduce_sum(tf.square(tf.gather(e, idx)))
    step = make_opt(tf).minimize(loss)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        for _ in range(4):
            s.run(step)
        return s.run([w, e])


OPTIMIZERS = {
    "adadelta": lambda tf: tf.train.AdadeltaOptimizer(0.5, rho=0.9, epsilon=1e-6),
    "ftrl": lambda tf: tf.train.FtrlOptimizer(
        0.1,
        initial_accumulator_value=0.2,
        l1_regularization_strength=0.01,
        l2_regularization_strength=0.02,
    ),
    "ftrl_shrinkage": lambda tf: tf.train.FtrlOptimizer(
        0.1, learning_rate_power=-0.7, l2_shrinkage_regularization_strength=0.05
    ),
    "proximal_gd": lambda tf: tf.train.ProximalGradientDescentOptimizer(
        0.1, l1_regularization_strength=0.05, l2_regularization_strength=0.1
    ),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizers_match_tensorflow_dense_and_sparse(name):
    got = []
    for tf in (tf1, hbtf):
        with tf.Graph().as_default():
            got.append(_train(tf, OPTIMIZERS[name]))
    for a, b in zip(*got):
        np.testing.assert_allclose(b, a, rtol=2e-5, atol=1e-6)


def _metrics(tf):
    lab = tf.placeholder(tf.int64, [None])
    pred = tf.placeholder(tf.int64, [None])
    val = tf.placeholder(tf.float32, [None])
    wt = tf.placeholder(tf.float32, [None])
    pairs = [
        tf.metrics.accuracy(lab, pred),
        tf.metrics.accuracy(lab, pred, weights=wt),
        tf.metrics.mean(val, weights=wt),
        tf.metrics.precision(lab, pred),
        tf.metrics.recall(lab, pred),
        tf.metrics.mean_absolute_error(lab, pred),
        tf.metrics.false_negatives(lab, pred),
    ]
    batches = [
        ([1, 0, 1, 1], [1, 1, 0, 1], [1.0, 2.0, 3.0, 4.0], [1.0, 0.0, 2.0, 0.5]),
        ([0, 0, 1], [0, 1, 1], [5.0, -7.0, 9.0], [1.0, 1.0, 0.5]),
    ]
    out = []
    with tf.Session() as s:
        s.run(tf.local_variables_initializer())
        for b in batches:
            ups = s.run([u for _, u in pairs], dict(zip([lab, pred, val, wt], b)))
            out.append(ups)
        out.append(s.run([v for v, _ in pairs]))
    return out


def test_metrics_match_tensorflow():
    got = []
    for tf in (tf1, hbtf):
        with tf.Graph().as_default():
            got.append(_metrics(tf))
    np.testing.assert_allclose(np.asarray(got[1], float), np.asarray(got[0], float), rtol=1e-6)


def test_check_numerics_and_py_func_match_tensorflow():
    got = []
    for tf in (tf1, hbtf):
        with tf.Graph().as_default():
            x = tf.placeholder(tf.float32, [3])
            y = tf.check_numerics(tf.sqrt(x), "sqrt")
            (dx,) = tf.gradients(tf.reduce_sum(y), [x])
            pf = tf.py_func(lambda a: (a * 3).astype(np.float32), [y], tf.float32)
            with tf.Session() as s:
                got.append(s.run([y, dx, pf], {x: [1.0, 4.0, 9.0]}))
                with pytest.raises(tf.errors.InvalidArgumentError, match="sqrt : Tensor had NaN"):
                    s.run(y, {x: [1.0, -4.0, 9.0]})
    for a, b in zip(*got):
        np.testing.assert_allclose(b, a, rtol=1e-6)
