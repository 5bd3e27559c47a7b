"""contrib.layers' instance_norm, group_norm, maxout and bias_add (hetbed/compat/v1/contrib_norm.py)
against numpy written from their definitions; TF1's scopes and variable names."""

from __future__ import annotations

import numpy as np
import pytest

import hetbed.compat.v1 as tf

RNG = np.random.RandomState(0)
X = RNG.randn(2, 5, 6, 8).astype(np.float32)


def _init_run(outs):
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        return s.run(outs)


def test_instance_norm_normalizes_each_example_and_channel():
    with tf.Graph().as_default():
        init = {
            "gamma": tf.constant_initializer(np.arange(1, 9) / 4),
            "beta": tf.constant_initializer(0.5),
        }
        y = tf.contrib.layers.instance_norm(X, param_initializers=init, activation_fn=tf.nn.relu)
        nchw = tf.contrib.layers.instance_norm(
            X.transpose(0, 3, 1, 2), data_format="NCHW", scope="c"
        )
        names = sorted(v.op.name for v in tf.global_variables())
        got, got_c = _init_run([y, nchw])
    assert names == ["InstanceNorm/beta", "InstanceNorm/gamma", "c/beta", "c/gamma"]
    m, v = X.mean((1, 2), keepdims=True), X.var((1, 2), keepdims=True)
    want = np.maximum((X - m) / np.sqrt(v + 1e-6) * (np.arange(1, 9) / 4) + 0.5, 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(
        got_c, ((X - m) / np.sqrt(v + 1e-6)).transpose(0, 3, 1, 2), atol=1e-5
    )
    with tf.Graph().as_default(), pytest.raises(ValueError, match="rank >= 3"):
        tf.contrib.layers.instance_norm(np.zeros([2, 3], np.float32))


def test_group_norm_normalizes_groups_of_channels():
    with tf.Graph().as_default():
        y = tf.contrib.layers.group_norm(X, groups=4, scale=False)
        big = tf.contrib.slim.group_norm(X, groups=8, scope="g8")  # a group per channel
        with pytest.raises(ValueError, match="invalid groups 32 for 8 channels"):
            tf.contrib.layers.group_norm(X, groups=32)  # (TF-Slim refuses it too)
        ph = tf.placeholder(tf.float32, [None, None, 6, 8])
        dyn = tf.contrib.layers.group_norm(ph, groups=2, scope="dyn")
        names = sorted(v.op.name for v in tf.global_variables())
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            got, got_big, got_dyn = s.run([y, big, dyn], {ph: X})
    assert names == ["GroupNorm/beta", "dyn/beta", "dyn/gamma", "g8/beta", "g8/gamma"]

    def ref(groups):
        g = X.reshape(2, 5, 6, groups, 8 // groups)
        m, v = g.mean((1, 2, 4), keepdims=True), g.var((1, 2, 4), keepdims=True)
        return ((g - m) / np.sqrt(v + 1e-6)).reshape(X.shape)

    np.testing.assert_allclose(got, ref(4), atol=1e-5)
    np.testing.assert_allclose(got_big, ref(8), atol=1e-5)
    np.testing.assert_allclose(got_dyn, ref(2), atol=1e-5)
    with tf.Graph().as_default(), pytest.raises(ValueError, match="evenly"):
        tf.contrib.layers.group_norm(np.zeros([2, 3, 3, 6], np.float32), groups=4)


def test_maxout_and_bias_add():
    with tf.Graph().as_default():
        m = tf.contrib.layers.maxout(X, 2)
        m1 = tf.contrib.layers.maxout(X, 5, axis=1)
        with pytest.raises(ValueError, match="not a multiple"):
            tf.contrib.layers.maxout(X, 3, axis=1)
        b = tf.contrib.layers.bias_add(X, initializer=tf.constant_initializer(2.0))
        bn = tf.contrib.layers.bias_add(X.transpose(0, 3, 1, 2), data_format="NCHW", scope="nchw")
        names = sorted(v.op.name for v in tf.global_variables())
        got_m, got_m1, got_b, got_bn = _init_run([m, m1, b, bn])
    assert names == ["BiasAdd/biases", "nchw/biases"]
    np.testing.assert_array_equal(got_m, X.reshape(2, 5, 6, 2, 4).max(-1))
    np.testing.assert_array_equal(got_m1, X)  # 5 groups of 1 row: each its own maximum
    np.testing.assert_array_equal(got_b, X + 2.0)
    np.testing.assert_array_equal(got_bn, X.transpose(0, 3, 1, 2))


def test_the_same_as_tf_slims_layers():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    pytest.importorskip("tf_slim")
    init = {"gamma": np.arange(1, 9, dtype=np.float32) / 4, "beta": np.full(8, 0.5, np.float32)}

    from tf_slim.layers import layers as slim_layers
    from tf_slim.layers import normalization as slim_norm

    def build(t, norm, layers):
        pi = {k: t.constant_initializer(v) for k, v in init.items()}
        a = norm.instance_norm(X, param_initializers=pi)
        b = norm.group_norm(X, groups=4, param_initializers=pi, scope="g")
        c = norm.group_norm(X, groups=2, reduction_axes=(-2,), scope="g2")
        d = layers.maxout(X, 4)
        return [a, b, c, d]

    with tf1.Graph().as_default():
        outs = build(tf1, slim_norm, slim_layers)
        names = sorted(v.op.name for v in tf1.global_variables())
        with tf1.Session() as s:
            s.run(tf1.global_variables_initializer())
            want = s.run(outs)
    with tf.Graph().as_default():
        outs = build(tf, tf.contrib.layers, tf.contrib.layers)
        assert sorted(v.op.name for v in tf.global_variables()) == names
        got = _init_run(outs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
