"""tf.distributions (hetbed/distributions.py): densities, moments, entropies and KL divergences
against closed forms written here, samples by their moments, reparameterized gradients by
finite differences, and every value against TensorFlow where installed."""

import math

import numpy as np
import pytest
from opcheck import check_gradient

import hetbed.compat.v1 as tf

D = tf.distributions


def _run(ts):
    with tf.Session() as s:
        return s.run(ts)


def test_normal_and_its_kl_by_closed_forms():
    with tf.Graph().as_default():
        n = D.Normal([0.0, 1.0], [1.0, 2.0])
        m = D.Normal(0.5, [2.0, 0.5])
        lp, cdf, ent, kl = _run(
            [n.log_prob([[0.5, -1.0]]), n.cdf([[0.0, 1.0]]), n.entropy(), D.kl_divergence(n, m)]
        )
    np.testing.assert_allclose(lp[0, 0], -0.125 - 0.5 * math.log(2 * math.pi), rtol=1e-6)
    np.testing.assert_allclose(lp[0, 1], -0.5 - math.log(2.0) - 0.5 * math.log(2 * math.pi))
    np.testing.assert_allclose(cdf, [[0.5, 0.5]], rtol=1e-6)
    np.testing.assert_allclose(ent, 0.5 * np.log(2 * np.pi * np.e) + np.log([1.0, 2.0]))
    s1, s2, m1, m2 = np.array([1.0, 2.0]), np.array([2.0, 0.5]), np.array([0.0, 1.0]), 0.5
    want = np.log(s2 / s1) + (s1**2 + (m1 - m2) ** 2) / (2 * s2**2) - 0.5
    np.testing.assert_allclose(kl, want, rtol=1e-5)


def test_discrete_families_by_closed_forms():
    with tf.Graph().as_default():
        b = D.Bernoulli(probs=[0.25, 0.8])
        c = D.Categorical(probs=[[0.2, 0.3, 0.5]])
        q = D.Categorical(logits=np.log([[0.5, 0.25, 0.25]]).astype(np.float32))
        vals = _run([b.log_prob([1, 0]), b.entropy(), b.mode(), c.log_prob([2]), c.entropy(),
                     D.kl_divergence(c, q), c.mode()])  # fmt: skip
    lp, ent, mode, clp, cent, kl, cmode = vals
    np.testing.assert_allclose(lp, np.log([0.25, 0.2]), rtol=1e-5)
    p = np.array([0.25, 0.8])
    np.testing.assert_allclose(ent, -(p * np.log(p) + (1 - p) * np.log(1 - p)), rtol=1e-5)
    assert mode.tolist() == [0, 1] and cmode.tolist() == [2]
    pc = np.array([0.2, 0.3, 0.5])
    np.testing.assert_allclose(clp, np.log([0.5]), rtol=1e-5)
    np.testing.assert_allclose(cent, [-(pc * np.log(pc)).sum()], rtol=1e-5)
    np.testing.assert_allclose(kl, [(pc * np.log(pc / [0.5, 0.25, 0.25])).sum()], rtol=1e-5)


def test_samples_have_the_distributions_moments_and_shapes():
    with tf.Graph().as_default():
        tf.set_random_seed(1)
        n = D.Normal([0.0, 3.0], [1.0, 0.5])
        c = D.Categorical(probs=[0.1, 0.6, 0.3])
        e = D.Exponential(2.0)
        u = D.Uniform(-1.0, 3.0)
        lap = D.Laplace(1.0, 2.0)
        sn, sc, se, su, sl = (d.sample(s) for d, s in ((n, [5000, 2]), (c, 5000), (e, 5000),
                                                         (u, 5000), (lap, 5000)))  # fmt: skip
        assert sn.shape.as_list() == [5000, 2, 2] and sc.shape.as_list() == [5000]
        vn, vc, ve, vu, vl = _run([sn, sc, se, su, sl])
    np.testing.assert_allclose(vn.reshape(-1, 2).mean(0), [0.0, 3.0], atol=0.04)
    np.testing.assert_allclose(vn.reshape(-1, 2).std(0), [1.0, 0.5], rtol=0.04)
    np.testing.assert_allclose(np.bincount(vc, minlength=3) / 5000, [0.1, 0.6, 0.3], atol=0.03)
    assert abs(ve.mean() - 0.5) < 0.03 and ve.min() >= 0
    assert -1 <= vu.min() and vu.max() < 3 and abs(vu.mean() - 1.0) < 0.06
    assert abs(np.median(vl) - 1.0) < 0.12 and abs(vl.std() - 2 * math.sqrt(2)) < 0.2


def test_log_prob_and_reparameterized_sample_gradients():
    x = np.array([0.3, -1.2])
    check_gradient(lambda loc, sc: D.Normal(loc, sc).log_prob(x), [np.array([0.1, 0.5]),
                                                                   np.array([1.5, 0.7])])  # fmt: skip
    with tf.Graph().as_default():
        loc = tf.constant(2.0)
        scale = tf.constant(3.0)
        s = D.Normal(loc, scale).sample(200, seed=5)
        gl, gs = tf.gradients(tf.reduce_sum(s), [loc, scale])
        z = (s - loc) / scale
        got_l, got_s, zsum = _run([gl, gs, tf.reduce_sum(z)])
    assert got_l == pytest.approx(200.0) and got_s == pytest.approx(zsum, rel=1e-5)
    with pytest.raises(NotImplementedError, match="No KL"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Bernoulli(probs=0.5))
    with pytest.raises(ValueError, match="exactly one of logits and probs"):
        D.Bernoulli()


def test_distributions_match_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")

    def run(t):
        d = t.distributions
        g = t.Graph()
        with g.as_default():
            n, n2 = d.Normal([0.0, 1.0, -2.0], [1.0, 0.5, 2.0]), d.Normal(1.0, [2.0, 1.0, 0.3])
            x = t.constant([[0.3, 1.2, -1.0], [2.0, 0.0, 0.5]])
            b, b2 = d.Bernoulli(logits=[-1.0, 0.0, 2.0]), d.Bernoulli(probs=[0.3, 0.6, 0.9])
            c = d.Categorical(logits=[[0.1, 2.0, -1.0], [1.0, 1.0, 1.0]])
            c2 = d.Categorical(probs=[[0.2, 0.5, 0.3], [0.1, 0.1, 0.8]])
            u, e = d.Uniform([0.0, 1.0], [2.0, 4.0]), d.Exponential([0.5, 2.0])
            lap = d.Laplace([0.0, 1.0], [1.0, 3.0])
            outs = [n.log_prob(x), n.cdf(x), n.entropy(), n.stddev(), d.kl_divergence(n, n2),
                    b.log_prob([[1, 0, 1], [0, 0, 1]]), b.entropy(), b.variance(),
                    d.kl_divergence(b, b2), c.log_prob([[0, 1], [2, 2]]), c.entropy(),
                    d.kl_divergence(c, c2), u.cdf([[1.0, 2.0], [3.0, 0.5]]), u.entropy(),
                    u.variance(), e.log_prob([[1.0, 2.0]]), e.cdf([[1.0, 2.0]]), e.entropy(),
                    lap.log_prob([[0.5, -1.0]]), lap.cdf([[0.5, -1.0]]), lap.entropy()]  # fmt: skip
            with t.Session(graph=g) as s:
                return s.run(outs)

    for a, b in zip(run(tf), run(tf1)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
