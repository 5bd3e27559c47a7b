"""Differential tests of WP1's math, linear algebra and clipping: small TF1 programs run under
TensorFlow and under hetbed, compared. Skipped when TensorFlow is not installed."""

from __future__ import annotations

import numpy as np
import pytest

import hetbed.compat.v1 as hbtf

tf1 = pytest.importorskip("tensorflow.compat.v1")

RNG = np.random.default_rng(3)


def both(program, *args):
    """Run ``program(tf, *args)`` under TF1 and hetbed in fresh graphs; return both results."""
    out = []
    for tf in (tf1, hbtf):
        g = tf.Graph()
        with g.as_default():
            fetches, feed = program(tf, *args)
            with tf.Session(graph=g) as s:
                s.run(tf.global_variables_initializer())
                out.append(s.run(fetches, feed))
    return out


def assert_same(a, b, rtol=1e-5, atol=1e-6):
    if isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for i, (x, y) in enumerate(zip(a, b)):
            try:
                assert_same(x, y, rtol, atol)
            except AssertionError as e:
                raise AssertionError(f"fetch {i}: {e}") from None
        return
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    np.testing.assert_allclose(b, a, rtol=rtol, atol=atol)


def elementwise_and_scans(tf, xv):
    x = tf.placeholder(tf.float64, [3, 4])
    outs = [
        tf.sin(x),
        tf.math.cos(x),
        tf.tan(x),
        tf.asin(x / 4),
        tf.acos(x / 4),
        tf.atan(x),
        tf.atan2(x, x[:1] + 2.0),
        tf.sinh(x),
        tf.cosh(x),
        tf.erf(x),
        tf.erfc(x),
        tf.lgamma(x + 3.0),
        tf.digamma(x + 3.0),
        tf.expm1(x),
        tf.mod(x, 0.7),
        tf.cumsum(x, axis=1, exclusive=True, reverse=True),
        tf.cumprod(x, axis=0, reverse=True),
        tf.math.cumsum(x),
        tf.reduce_logsumexp(x * 300.0, axis=1),
        tf.reduce_logsumexp(x, keepdims=True),
        tf.count_nonzero(tf.floor(x)),
        tf.math.count_nonzero(tf.floor(x), axis=0, keepdims=True),
        tf.accumulate_n([x, x, tf.sin(x)]),
        tf.math.reduce_std(x, axis=0),
        tf.math.reduce_variance(x),
        tf.nn.top_k(x, k=2).values,
        tf.math.top_k(x, k=3).indices,
        tf.sort(x, axis=0, direction="DESCENDING"),
        tf.argsort(x),
        tf.is_nan(tf.log(x)),
        tf.is_inf(tf.log(tf.abs(tf.floor(x)))),
        tf.is_finite(tf.log(tf.abs(tf.floor(x)))),
    ]
    loss = tf.add_n([tf.reduce_sum(o * 0.1) for o in outs if o.dtype == tf.float64])
    loss += tf.reduce_sum(tf.nn.top_k(x, 2)[0] * tf.constant([[1.0, 2.0]], tf.float64))
    return outs + tf.gradients(loss, [x]), {x: xv}


def test_elementwise_scans_sorting_match_tensorflow():
    xv = RNG.uniform(-1.5, 1.5, (3, 4))
    a, b = both(elementwise_and_scans, xv)
    assert_same(a, b, rtol=1e-6, atol=1e-9)


def linear_algebra(tf, av, bv):
    a = tf.placeholder(tf.float64, [3, 3])
    b = tf.placeholder(tf.float64, [3, 2])
    spd = tf.matmul(a, a, transpose_b=True) + 3.0 * tf.eye(3, dtype=tf.float64)
    outs = [
        tf.matrix_inverse(a),
        tf.linalg.inv(a, adjoint=True),
        tf.matrix_determinant(a),
        tf.cholesky(spd),
        tf.matrix_solve(a, b),
        tf.linalg.solve(a, b, adjoint=True),
        tf.matrix_triangular_solve(a, b),
        tf.linalg.triangular_solve(a, b, lower=False, adjoint=True),
        tf.einsum("ij,jk->ik", a, b),
        tf.einsum("ij->j", a),
        tf.einsum("ij,ik->jk", a, a),
        tf.tensordot(a, b, 1),
        tf.tensordot(a, a, [[0, 1], [1, 0]]),
        tf.matrix_band_part(a, 1, 0),
        tf.linalg.band_part(a, -1, 0),
        tf.trace(a),
        tf.diag(b[:, 0]),
        tf.diag_part(a),
        tf.matrix_diag(tf.transpose(b)),
        tf.matrix_diag_part(a),
        tf.matrix_set_diag(a, b[:, 1]),
        tf.matrix_transpose(b),
        tf.linalg.transpose(b),
        tf.eye(2, 3, batch_shape=[2]),
        tf.lin_space(-1.0, 2.0, 7),
        tf.linspace(tf.constant(0.0, tf.float64), 1.0, 4),
        tf.norm(b),
        tf.norm(b, ord=1, axis=0),
        tf.linalg.norm(b, ord=np.inf, axis=1, keepdims=True),
        tf.linalg.eigh(spd)[0],
        tf.linalg.svd(a, compute_uv=False),
    ]
    loss = (
        tf.reduce_sum(tf.matrix_inverse(a) * 0.3)
        + tf.matrix_determinant(a)
        + tf.reduce_sum(tf.cholesky(spd))
        + tf.reduce_sum(tf.matrix_solve(a, b))
        + tf.reduce_sum(tf.matrix_triangular_solve(a, b, lower=False) * 0.2)
        + tf.reduce_sum(tf.einsum("ij,jk->ik", a, b) ** 2)
        + tf.reduce_sum(tf.tensordot(a, a, [[0], [1]]))
        + tf.trace(tf.matrix_band_part(a, 0, -1))
        + tf.norm(b)
    )
    return outs + tf.gradients(loss, [a, b]), {a: av, b: bv}


def test_linear_algebra_matches_tensorflow():
    av = RNG.standard_normal((3, 3)) + 2 * np.eye(3)
    bv = RNG.standard_normal((3, 2))
    a, b = both(linear_algebra, av, bv)
    assert_same(a, b, rtol=1e-6, atol=1e-9)


def decompositions(tf, av):
    a = tf.placeholder(tf.float64, [4, 3])
    q, r = tf.qr(a)
    s, u, v = tf.svd(a)
    sym = tf.matmul(a, a, transpose_a=True)
    e, w = tf.self_adjoint_eig(sym)
    # signs of q, u, v and w's columns are not unique: compare invariants
    return [
        tf.matmul(q, r),
        tf.abs(r),
        s,
        tf.matmul(u * s, v, transpose_b=True),
        tf.abs(u),
        tf.abs(v),
        e,
        tf.abs(w),
    ], {a: av}


def test_decompositions_match_tensorflow_up_to_signs():
    a, b = both(decompositions, RNG.standard_normal((4, 3)))
    assert_same(a, b, rtol=1e-8, atol=1e-10)


def clipped_rnn_step(tf, xv, idv):
    """The usual TF1 RNN training step: gradients clipped by their global norm, with a sparse
    (IndexedSlices) embedding gradient and an unused variable's None gradient."""
    x = tf.placeholder(tf.float32, [4, 3])
    ids = tf.placeholder(tf.int32, [4])
    emb = tf.Variable(tf.constant(np.arange(15.0).reshape(5, 3) / 10, tf.float32))
    w = tf.Variable(tf.constant(np.linspace(-1, 1, 9).reshape(3, 3), tf.float32))
    unused = tf.Variable(tf.zeros([2]))
    h = tf.tanh(tf.matmul(x + tf.nn.embedding_lookup(emb, ids), w))
    loss = tf.reduce_sum(h * h) * 10.0
    tvars = [emb, w, unused]
    grads = tf.gradients(loss, tvars)
    assert grads[2] is None
    clipped, gnorm = tf.clip_by_global_norm(grads, 1.5)
    assert clipped[2] is None
    dense = [tf.convert_to_tensor(c) for c in clipped[:2]]
    by_norm = [tf.clip_by_norm(g, 0.5) for g in grads[:2]]
    step = tf.train.GradientDescentOptimizer(0.1).apply_gradients(zip(clipped, tvars))
    with tf.control_dependencies([step]):
        after = [tf.identity(emb), tf.identity(w)]
    fetches = [gnorm, tf.global_norm(grads), *dense, *[tf.convert_to_tensor(c) for c in by_norm]]
    return fetches + after, {x: xv, ids: idv}


def test_clip_by_global_norm_training_step_matches_tensorflow():
    xv = RNG.standard_normal((4, 3)).astype(np.float32)
    a, b = both(clipped_rnn_step, xv, np.array([1, 3, 1, 4], np.int32))
    assert_same(a, b, rtol=2e-5, atol=1e-6)
