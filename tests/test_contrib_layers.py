"""tf.contrib.layers / slim / framework (hetbed/compat/v1/contrib_layers.py): values against
numpy, contrib's variable names and defaults, regularizers, batch norm updates, arg_scope."""

import numpy as np
import pytest

import hetbed.compat.v1 as tf

layers = tf.contrib.layers
RNG = np.random.default_rng(7)


def _conv_same(x, w, stride=1):
    """NHWC cross-correlation with TF's SAME padding (odd kernels), numpy loops."""
    n, h, wd, c = x.shape
    kh, kw, _, o = w.shape
    ho, wo = -(-h // stride), -(-wd // stride)
    ph = max((ho - 1) * stride + kh - h, 0)
    pw = max((wo - 1) * stride + kw - wd, 0)
    xp = np.pad(x, [(0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)])
    out = np.zeros((n, ho, wo, o))
    for i in range(ho):
        for j in range(wo):
            patch = xp[:, i * stride : i * stride + kh, j * stride : j * stride + kw, :]
            out[:, i, j, :] = np.tensordot(patch, w, axes=([1, 2, 3], [0, 1, 2]))
    return out


def test_fully_connected_conv_and_pools_against_numpy():
    xv = RNG.standard_normal((2, 6, 6, 3)).astype(np.float32)
    sv = RNG.standard_normal((2, 4, 5)).astype(np.float32)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 6, 6, 3])
        seq = tf.placeholder(tf.float32, [None, 4, 5])
        c = layers.conv2d(x, 4, [3, 3], biases_initializer=tf.constant_initializer(0.1))
        c2 = layers.conv2d(c, 2, 3, stride=2, activation_fn=None, scope="down")
        mp = layers.max_pool2d(c, [2, 2])
        ap = layers.avg_pool2d(c, 3, stride=1, padding="SAME")
        f = layers.fully_connected(layers.flatten(mp), 3)
        s3 = layers.fully_connected(seq, 2, activation_fn=tf.tanh)
        names = sorted(v.op.name for v in tf.global_variables())
        assert names == [
            "Conv/biases", "Conv/weights", "down/biases", "down/weights",
            "fully_connected/biases", "fully_connected/weights",
            "fully_connected_1/biases", "fully_connected_1/weights",
        ]  # fmt: skip
        assert set(tf.get_collection("weights")) == {
            v for v in tf.global_variables() if v.op.name.endswith("weights")
        }
        assert s3.shape.as_list() == [None, 4, 2] and mp.shape.as_list() == [None, 3, 3, 4]
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            got = s.run([c, c2, mp, ap, f, s3], {x: xv, seq: sv})
            var = {v.op.name: s.run(v) for v in tf.global_variables()}
    want_c = np.maximum(_conv_same(xv, var["Conv/weights"]) + 0.1, 0)
    np.testing.assert_allclose(got[0], want_c, rtol=1e-4, atol=1e-5)
    want_c2 = _conv_same(want_c, var["down/weights"], stride=2) + var["down/biases"]
    np.testing.assert_allclose(got[1], want_c2, rtol=1e-4, atol=1e-5)
    want_mp = want_c[:, :6, :6].reshape(2, 3, 2, 3, 2, 4).max(axis=(2, 4))
    np.testing.assert_allclose(got[2], want_mp, rtol=1e-5, atol=1e-6)
    padded = np.pad(want_c, [(0, 0), (1, 1), (1, 1), (0, 0)])
    counts = np.pad(np.ones((6, 6)), 1)
    sums = sum(padded[:, i : i + 6, j : j + 6] for i in range(3) for j in range(3))
    cnt = sum(counts[i : i + 6, j : j + 6] for i in range(3) for j in range(3))
    np.testing.assert_allclose(got[3], sums / cnt[None, :, :, None], rtol=1e-4, atol=1e-5)
    flat = want_mp.reshape(2, -1)
    want_f = np.maximum(flat @ var["fully_connected/weights"] + var["fully_connected/biases"], 0)
    np.testing.assert_allclose(got[4], want_f, rtol=1e-4, atol=1e-5)
    want_s = np.tanh(sv @ var["fully_connected_1/weights"] + var["fully_connected_1/biases"])
    np.testing.assert_allclose(got[5], want_s, rtol=1e-5, atol=1e-6)


def test_regularizers_initializers_and_arg_scope():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 20])
        with tf.contrib.framework.arg_scope(
            [layers.fully_connected], weights_regularizer=layers.l2_regularizer(0.5)
        ):
            with tf.contrib.framework.arg_scope([layers.fully_connected], activation_fn=None) as sc:
                h = layers.fully_connected(x, 30)
            with tf.contrib.framework.arg_scope(sc):
                h2 = layers.fully_connected(h, 3, weights_regularizer=layers.l1_regularizer(0.25))
        h3 = layers.fully_connected(h2, 2)  # outside: contrib's defaults again (ReLU)
        reg = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
        total = tf.losses.get_regularization_loss()
        extra = layers.apply_regularization(layers.l1_l2_regularizer(1.0, 2.0))
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            w1, w2, w3 = (s.run(v) for v in tf.get_collection("weights"))
            got_reg, got_total, got_extra = s.run([reg, total, extra])
            out, pre = s.run([h3, h2], {x: RNG.standard_normal((4, 20)).astype(np.float32)})
    assert len(got_reg) == 2
    assert got_reg[0] == pytest.approx(0.5 * (w1**2).sum() / 2, rel=1e-5)
    assert got_reg[1] == pytest.approx(0.25 * np.abs(w2).sum(), rel=1e-5)
    assert got_total == pytest.approx(sum(got_reg), rel=1e-5)
    ws = [w1, w2, w3]
    want_extra = sum(np.abs(w).sum() + 2.0 * (w**2).sum() / 2 for w in ws)
    assert got_extra == pytest.approx(want_extra, rel=1e-5)
    assert (out >= 0).all() and (pre < 0).any()  # ReLU on h3 only; h2 kept activation_fn=None
    limit = np.sqrt(6.0 / (20 + 30))  # xavier (Glorot) uniform
    assert np.abs(w1).max() <= limit and np.std(w1) == pytest.approx(limit / np.sqrt(3), rel=0.1)
    with pytest.raises(ValueError, match="add_arg_scope"):
        with tf.contrib.framework.arg_scope([tf.nn.relu], x=1):
            pass
    with pytest.raises(ValueError, match=">= 0"):
        layers.l2_regularizer(-1.0)


def test_batch_norm_layer_norm_dropout_and_scopes():
    xv = (RNG.standard_normal((16, 3)) * [1.0, 2.0, 3.0] + [1.0, -2.0, 0.5]).astype(np.float32)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 3])
        train = tf.placeholder(tf.bool, [])
        bn = layers.batch_norm(x, decay=0.9, is_training=True, updates_collections=None)
        bn2 = layers.batch_norm(x, scale=True, is_training=train, scope="bn2")
        ln = layers.layer_norm(x)
        dr = layers.dropout(x, keep_prob=0.5, is_training=train)
        names = sorted(v.op.name for v in tf.global_variables())
        assert names == [
            "BatchNorm/beta", "BatchNorm/moving_mean", "BatchNorm/moving_variance",
            "LayerNorm/beta", "LayerNorm/gamma",
            "bn2/beta", "bn2/gamma", "bn2/moving_mean", "bn2/moving_variance",
        ]  # fmt: skip
        assert len(tf.get_collection(tf.GraphKeys.UPDATE_OPS)) == 2  # bn2's only
        rep = layers.repeat(x, 2, layers.fully_connected, 3, scope="fc")
        assert {v.op.name for v in tf.global_variables()} >= {"fc/fc_1/weights", "fc/fc_2/weights"}
        mm = [v for v in tf.global_variables() if v.op.name == "BatchNorm/moving_mean"][0]
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            got_bn, got_ln, d_train = s.run([bn, ln, dr], {x: xv, train: True})
            got_mm = s.run(mm)
            d_eval, bn2_eval, _ = s.run([dr, bn2, rep], {x: xv, train: False})
    m, v = xv.mean(0), xv.var(0)
    np.testing.assert_allclose(got_bn, (xv - m) / np.sqrt(v + 1e-3), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got_mm, 0.1 * m, rtol=1e-5, atol=1e-6)  # applied with the output
    np.testing.assert_allclose(bn2_eval, xv / np.sqrt(1 + 1e-3), rtol=1e-5)  # moving stats 0, 1
    mu, var = xv.mean(1, keepdims=True), xv.var(1, keepdims=True)
    np.testing.assert_allclose(got_ln, (xv - mu) / np.sqrt(var + 1e-12), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(d_eval, xv)
    kept = d_train != 0
    np.testing.assert_allclose(d_train[kept], xv[kept] * 2, rtol=1e-6)
    assert 0 < kept.mean() < 1


def test_optimize_loss_and_small_tf1_helpers():
    """contrib.layers.optimize_loss trains (SGD step by hand, gradients clipped by global norm,
    the global step counted); clip_by_average_norm, nn.sufficient_statistics/normalize_moments
    and nn.batch_norm_with_global_normalization against numpy."""
    xv = np.array([[1.0, 2.0, 2.0], [0.0, -1.0, 4.0]], np.float32)
    with tf.Graph().as_default():
        w = tf.Variable(np.ones(3, np.float32))
        gs = tf.train.get_or_create_global_step()
        loss = tf.reduce_sum(tf.constant(xv) * w)
        train = layers.optimize_loss(loss, gs, 0.1, "SGD", clip_gradients=1.0)
        x = tf.constant(xv)
        avg = tf.clip_by_average_norm(x, 0.1)
        c, m_ss, v_ss, _ = tf.nn.sufficient_statistics(x, [0])
        mean, var = tf.nn.normalize_moments(c, m_ss, v_ss, None)
        bn = tf.nn.batch_norm_with_global_normalization(
            x, mean, var, tf.ones([3]), 2 * tf.ones([3]), 1e-3, True
        )
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            first = s.run(train)
            got_w, got_gs = s.run([w, gs])
            got = s.run([avg, c, mean, var, bn])
    g = xv.sum(0)
    np.testing.assert_allclose(got_w, 1 - 0.1 * g / np.linalg.norm(g), rtol=1e-5)
    assert got_gs == 1 and first == pytest.approx(float(xv.sum()), rel=1e-6)
    norm = np.sqrt((xv**2).sum()) / xv.size
    np.testing.assert_allclose(got[0], xv * 0.1 / max(norm, 0.1), rtol=1e-5)
    assert got[1] == 2.0
    np.testing.assert_allclose(got[2], xv.mean(0), rtol=1e-6)
    np.testing.assert_allclose(got[3], xv.var(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        got[4], (xv - xv.mean(0)) / np.sqrt(xv.var(0) + 1e-3) * 2 + 1, rtol=1e-4
    )
