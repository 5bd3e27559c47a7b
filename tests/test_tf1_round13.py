"""Gaps found running TF1 programs by others (round thirteen: research/deeplab, WGAN-GP,
google-research/bert, DQN), each checked against the value TensorFlow gives."""

import numpy as np
import pytest

import hetbed.compat.v1 as tf


def test_expand_dims_list_axis_group_nested_and_multi_flags():
    with tf.Graph().as_default():
        x = tf.ones([2, 3])
        assert tf.expand_dims(x, axis=[-1]).shape.as_list() == [2, 3, 1]  # bert's modeling.py
        a, b = tf.assign(tf.Variable(0), 1), tf.assign(tf.Variable(0), 2)
        g = tf.group(a, [b])  # bert's optimization.py
        assert {i.name for i in g.control_inputs} == {a.op.name, b.op.name}
    f = tf.app.flags
    f.DEFINE_multi_float("r13_rates", [0.5], "")
    f.DEFINE_multi_integer("r13_atrous", None, "")
    rest = f.FLAGS(["prog", "--r13_atrous=6", "--r13_atrous", "12", "left"])
    assert rest == ["prog", "left"] and f.FLAGS.r13_atrous == [6, 12] and f.FLAGS.r13_rates == [0.5]


def test_multiply_gradients_scales_by_variable_or_name():
    with tf.Graph().as_default():
        w = tf.Variable([1.0, 2.0], name="w")
        e = tf.Variable(tf.ones([4, 2]), name="e")
        loss = tf.reduce_sum(w * w) + tf.reduce_sum(tf.gather(e, [0, 2]))
        gv = tf.train.GradientDescentOptimizer(1.0).compute_gradients(loss)
        out = tf.contrib.training.multiply_gradients(gv, {w: 10.0, "e": 0.5})
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            gw = s.run(out[0][0])
            ge = s.run(tf.convert_to_tensor(out[1][0]))
        with pytest.raises(ValueError, match="empty"):
            tf.contrib.training.multiply_gradients(gv, {})
    np.testing.assert_allclose(gw, [20.0, 40.0])
    np.testing.assert_allclose(ge, [[0.5, 0.5], [0, 0], [0.5, 0.5], [0, 0]])


def test_slot_names_follow_the_variable_scope_and_layer_norm_makes_beta_first():
    """Names TF 2.21 gives: train/net/w/RMSProp(_1); LayerNorm/beta before LayerNorm/gamma."""
    with tf.Graph().as_default():
        with tf.variable_scope("net"):
            w = tf.get_variable("w", [2])
        with tf.variable_scope("train"):
            tf.train.RMSPropOptimizer(0.1).minimize(tf.reduce_sum(w * w))
        tf.contrib.layers.layer_norm(tf.ones([2, 3]))
        names = [v.op.name for v in tf.global_variables()]
    assert names == [
        "net/w",
        "train/net/w/RMSProp",
        "train/net/w/RMSProp_1",
        "LayerNorm/beta",
        "LayerNorm/gamma",
    ]


def test_nchw_equals_nhwc_between_transposes():
    rng = np.random.RandomState(0)
    x = rng.randn(2, 3, 8, 8).astype(np.float32)
    f = rng.randn(3, 3, 3, 4).astype(np.float32)
    b = rng.randn(4).astype(np.float32)
    t = lambda a: np.transpose(a, [0, 2, 3, 1])  # noqa: E731
    with tf.Graph().as_default(), tf.Session() as s:
        c = tf.nn.bias_add(
            tf.nn.conv2d(x, f, [1, 1, 2, 2], "SAME", data_format="NCHW"), b, data_format="NCHW"
        )
        c_ref = tf.nn.bias_add(tf.nn.conv2d(t(x), f, [1, 2, 2, 1], "SAME"), b)
        p = tf.nn.max_pool(c, [1, 1, 2, 2], [1, 1, 1, 1], "VALID", data_format="NCHW")
        p_ref = tf.nn.max_pool(c_ref, [1, 2, 2, 1], [1, 1, 1, 1], "VALID")
        n, _, _ = tf.nn.fused_batch_norm(c, tf.ones([4]), tf.zeros([4]), data_format="NCHW")
        n_ref, _, _ = tf.nn.fused_batch_norm(c_ref, tf.ones([4]), tf.zeros([4]))
        d = tf.nn.conv2d_transpose(
            c, tf.ones([3, 3, 2, 4]), [2, 2, 8, 8], [1, 1, 2, 2], "SAME", data_format="NCHW"
        )
        d_ref = tf.nn.conv2d_transpose(
            c_ref, tf.ones([3, 3, 2, 4]), [2, 8, 8, 2], [1, 2, 2, 1], "SAME"
        )
        got = s.run([c, p, n, d])
        want = s.run([c_ref, p_ref, n_ref, d_ref])
    for g, w in zip(got, want):
        np.testing.assert_allclose(t(g), w, rtol=1e-5, atol=1e-5)


def test_nchw_values_and_gradients_equal_tensorflows():
    tf_real = pytest.importorskip("tensorflow")
    rng = np.random.RandomState(0)
    x0 = rng.randn(2, 3, 8, 8).astype(np.float32)
    f0 = rng.randn(3, 3, 3, 4).astype(np.float32)
    b0 = rng.randn(4).astype(np.float32)
    got = []
    for lib in (tf_real.compat.v1, tf):
        with lib.Graph().as_default():
            x, f, b = lib.Variable(x0), lib.Variable(f0), lib.Variable(b0)
            y = lib.nn.bias_add(
                lib.nn.conv2d(x, f, [1, 1, 2, 2], "SAME", data_format="NCHW"), b, data_format="NCHW"
            )
            y, _, _ = lib.nn.fused_batch_norm(y, lib.ones([4]), lib.zeros([4]), data_format="NCHW")
            p = lib.nn.avg_pool(y, [1, 1, 2, 2], [1, 1, 2, 2], "SAME", data_format="NCHW")
            loss = lib.reduce_sum(p * p)
            with lib.Session() as s:
                s.run(lib.global_variables_initializer())
                got.append(s.run([p, *lib.gradients(loss, [x, f, b])]))
    for a, c in zip(*got):
        np.testing.assert_allclose(c, a, rtol=1e-4, atol=1e-4)
