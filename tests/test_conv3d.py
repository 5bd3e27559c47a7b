"""3-D convolution and pooling (runtime/ops/conv3d.py, runtime/layers_3d.py): values against
numpy references written here (direct sums over windows, TF's SAME padding), gradients against
finite differences, the layers' variables, and all of it against TensorFlow where installed."""

import itertools

import numpy as np
import pytest
from opcheck import check_gradient

import hetbed.compat.v1 as tf

RNG = np.random.default_rng(3)


def _pads(n, k, s, d, padding):
    span = (k - 1) * d + 1
    if padding == "VALID":
        return 0, (n - span) // s + 1
    out = -(-n // s)
    return max((out - 1) * s + span - n, 0) // 2, out


def _conv3d_ref(x, f, strides, padding, dil=(1, 1, 1)):
    n = x.shape[0]
    pads, outs = zip(
        *(_pads(x.shape[1 + a], f.shape[a], strides[a], dil[a], padding) for a in range(3))
    )
    y = np.zeros((n, *outs, f.shape[4]))
    for o in itertools.product(*(range(k) for k in outs)):
        for t in itertools.product(*(range(k) for k in f.shape[:3])):
            src = [o[a] * strides[a] - pads[a] + t[a] * dil[a] for a in range(3)]
            if all(0 <= src[a] < x.shape[1 + a] for a in range(3)):
                y[(slice(None), *o)] += x[(slice(None), *src)] @ f[t]
    return y


def _pool3d_ref(x, k, strides, padding, how):
    pads, outs = zip(*(_pads(x.shape[1 + a], k[a], strides[a], 1, padding) for a in range(3)))
    y = np.zeros((x.shape[0], *outs, x.shape[4]))
    for o in itertools.product(*(range(m) for m in outs)):
        lo = [max(o[a] * strides[a] - pads[a], 0) for a in range(3)]
        hi = [min(o[a] * strides[a] - pads[a] + k[a], x.shape[1 + a]) for a in range(3)]
        win = x[:, lo[0] : hi[0], lo[1] : hi[1], lo[2] : hi[2]]
        y[(slice(None), *o)] = win.max(axis=(1, 2, 3)) if how == "max" else win.mean(axis=(1, 2, 3))
    return y


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("strides,dil", [((1, 1, 1), (1, 1, 1)), ((2, 1, 2), (1, 1, 1)),
                                         ((1, 1, 1), (2, 1, 2))])  # fmt: skip
def test_conv3d_matches_a_direct_sum(padding, strides, dil):
    x = RNG.standard_normal((2, 6, 5, 7, 3))
    f = RNG.standard_normal((3, 2, 3, 3, 4))
    with tf.Graph().as_default():
        y = tf.nn.conv3d(x, f, [1, *strides, 1], padding, dilations=[1, *dil, 1])
        with tf.Session() as s:
            got = s.run(y)
    want = _conv3d_ref(x, f, strides, padding, dil)
    assert y.shape.as_list() == list(want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("how", ["max", "avg"])
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_pool3d_matches_a_direct_reduction(how, padding):
    x = RNG.standard_normal((2, 7, 6, 5, 2))
    op = tf.nn.max_pool3d if how == "max" else tf.nn.avg_pool3d
    for k, st in (((3, 2, 2), (2, 2, 1)), ((2, 3, 3), (1, 1, 1))):
        with tf.Graph().as_default():
            with tf.Session() as s:
                got = s.run(op(x, [1, *k, 1], [1, *st, 1], padding))
        np.testing.assert_allclose(got, _pool3d_ref(x, k, st, padding, how), rtol=1e-12)


def test_conv3d_and_pool3d_gradients_match_finite_differences():
    x = RNG.standard_normal((1, 4, 3, 4, 2))
    f = RNG.standard_normal((2, 2, 3, 2, 2))
    check_gradient(lambda a, b: tf.nn.conv3d(a, b, [1, 2, 1, 1, 1], "SAME"), [x, f])
    check_gradient(lambda a: tf.nn.avg_pool3d(a, [1, 3, 2, 2, 1], [1, 2, 1, 2, 1], "SAME"), [x])
    check_gradient(lambda a: tf.nn.max_pool3d(a, [1, 2, 2, 2, 1], [1, 1, 1, 1, 1], "VALID"), [x])


def test_conv3d_layers_make_tf1s_variables_and_refuse_bad_input():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 8, 8, 8, 1])
        h = tf.layers.conv3d(x, 4, 3, padding="same", activation=tf.nn.relu, name="c1")
        h = tf.layers.max_pooling3d(h, 2, 2)
        h = tf.layers.average_pooling3d(h, (2, 2, 2), 2, padding="same")
        assert h.shape.as_list() == [None, 2, 2, 2, 4]
        names = sorted((v.name, v.shape.as_list()) for v in tf.trainable_variables())
        assert names == [("c1/bias:0", [4]), ("c1/kernel:0", [3, 3, 3, 1, 4])]
        with pytest.raises(tf.errors.InvalidArgumentError, match="does not fit"):
            tf.nn.conv3d(x, tf.zeros([9, 1, 1, 1, 1]), [1, 1, 1, 1, 1], "VALID")
        with pytest.raises(tf.errors.InvalidArgumentError, match="channels"):
            tf.nn.conv3d(x, tf.zeros([1, 1, 1, 2, 1]), [1, 1, 1, 1, 1], "VALID")
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"\[1, d, h, w, 1\]"):
            tf.nn.max_pool3d(x, [2, 2, 2, 2, 2], [1, 1, 1, 1, 1], "VALID")


def test_conv3d_and_pools_match_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    x = RNG.standard_normal((2, 7, 6, 5, 3)).astype(np.float32)
    f = RNG.standard_normal((3, 2, 3, 3, 4)).astype(np.float32)

    def build(t):
        xt, ft = t.constant(x), t.constant(f)
        outs = []
        for pad, st in itertools.product(("SAME", "VALID"), ([1, 1, 1, 1, 1], [1, 2, 2, 1, 1])):
            y = t.nn.conv3d(xt, ft, st, pad)
            w = t.constant(RNG.standard_normal(y.shape.as_list()).astype(np.float32))
            outs += [y, *t.gradients(t.reduce_sum(y * w), [xt, ft])]
            for pool in (t.nn.max_pool3d, t.nn.avg_pool3d):
                p = pool(xt, [1, 3, 2, 2, 1], st, pad)
                outs += [p, t.gradients(t.reduce_sum(p * p), [xt])[0]]
        return outs

    state = RNG.bit_generator.state
    g = tf1.Graph()
    with g.as_default(), tf1.Session(graph=g) as s:
        theirs = s.run(build(tf1))
    RNG.bit_generator.state = state  # the same weights on both sides
    with tf.Graph().as_default(), tf.Session() as s:
        ours = s.run(build(tf))
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
