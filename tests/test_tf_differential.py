"""Differential tests: small TF1 programs run under TensorFlow and under hetbed, compared.

Each program is written once against a ``tf`` module in the style of TF1 tutorials (placeholders,
feed_dict, name scopes) and run twice: with ``tensorflow.compat.v1`` and with
``hetbed.compat.v1``. Skipped when TensorFlow is not installed (``pip install .[peers]``).
"""

from __future__ import annotations

import numpy as np
import pytest

import hetbed.compat.v1 as hbtf

tf1 = pytest.importorskip("tensorflow.compat.v1")


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
        for x, y in zip(a, b):
            assert_same(x, y, rtol, atol)
        return
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(b, a, rtol=rtol, atol=atol)


RNG = np.random.default_rng(0)


def softmax_regression(tf, xv, yv):
    x = tf.placeholder("float", [None, 6])
    y_ = tf.placeholder("float", [None, 3])
    keep = tf.placeholder("float")
    with tf.name_scope("model"):
        w = tf.Variable(tf.constant(RNG_W, dtype="float"))
        b = tf.Variable(tf.zeros([3]))
        h = tf.nn.dropout(x, keep)
        logits = tf.matmul(h, w) + b
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y_, logits=logits))
    gw, gb = tf.gradients(loss, [w, b])
    acc = tf.reduce_mean(tf.cast(tf.equal(tf.arg_max(logits, 1), tf.arg_max(y_, 1)), "float"))
    assert h.shape.as_list() == [None, 6]
    return [loss, gw, gb, acc], {x: xv, y_: yv, keep: 1.0}


RNG_W = RNG.standard_normal((6, 3)).astype(np.float32)


def test_softmax_regression_tutorial():
    xv = RNG.standard_normal((8, 6)).astype(np.float32)
    yv = np.eye(3, dtype=np.float32)[RNG.integers(0, 3, 8)]
    a, b = both(softmax_regression, xv, yv)
    assert_same(a, b)


def conv_transpose(tf, xv, fv, padding):
    x = tf.placeholder(tf.float64, [None, *xv.shape[1:]])
    f = tf.Variable(fv)
    n = tf.shape(x)[0]
    oh = xv.shape[1] * 2 if padding == "SAME" else (xv.shape[1] - 1) * 2 + fv.shape[0]
    ow = xv.shape[2] * 2 if padding == "SAME" else (xv.shape[2] - 1) * 2 + fv.shape[1]
    y = tf.nn.conv2d_transpose(x, f, tf.stack([n, oh, ow, fv.shape[2]]), [1, 2, 2, 1], padding)
    loss = tf.reduce_sum(tf.square(y))
    gx, gf = tf.gradients(loss, [x, f])
    # second order: the gradient of a gradient goes through Conv2DBackpropFilter's rule
    (ggx,) = tf.gradients(tf.reduce_sum(gf * gf), [x])
    return [y, gx, gf, ggx], {x: xv}


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_conv2d_transpose_values_and_gradients(padding):
    xv = RNG.standard_normal((2, 3, 4, 3))
    fv = RNG.standard_normal((3, 3, 2, 3))
    a, b = both(conv_transpose, xv, fv, padding)
    assert_same(a, b, rtol=1e-9, atol=1e-9)


def layers_conv_transpose(tf, xv):
    x = tf.placeholder(tf.float32, [None, 4, 4, 2])
    y = tf.layers.conv2d_transpose(
        x, 3, 3, strides=2, padding="valid", kernel_initializer=tf.ones_initializer()
    )
    return [y], {x: xv}


def test_layers_conv2d_transpose_shapes_and_values():
    try:
        tf1.layers.conv2d_transpose  # noqa: B018 - gone from TF builds with Keras 3
    except AttributeError:
        pytest.skip("this TensorFlow has no tf.compat.v1.layers (Keras 3)")
    xv = RNG.standard_normal((2, 4, 4, 2)).astype(np.float32)
    a, b = both(layers_conv_transpose, xv)
    assert_same(a, b)


def nce(tf, w, bias, x, labels, sampled, true_exp, samp_exp):
    sv = (
        tf.constant(sampled, tf.int64),
        tf.constant(true_exp, tf.float32),
        tf.constant(samp_exp, tf.float32),
    )
    wt, bt = tf.Variable(w), tf.Variable(bias)
    loss = tf.nn.nce_loss(wt, bt, labels, x, len(sampled), w.shape[0], sampled_values=sv)
    gw, gb = tf.gradients(tf.reduce_sum(loss), [wt, bt])
    return [loss, tf.convert_to_tensor(gw), tf.convert_to_tensor(gb)], {}


def test_nce_loss_and_gradients():
    w = RNG.standard_normal((30, 4)).astype(np.float32)
    bias = RNG.standard_normal(30).astype(np.float32)
    x = RNG.standard_normal((5, 4)).astype(np.float32)
    labels = RNG.integers(0, 30, (5, 1)).astype(np.int64)
    sampled = np.array([2, 5, 11, 19], np.int64)
    a, b = both(
        nce,
        w,
        bias,
        x,
        labels,
        sampled,
        RNG.uniform(0.1, 0.9, (5, 1)).astype(np.float32),
        RNG.uniform(0.1, 0.9, 4).astype(np.float32),
    )
    assert_same(a, b, rtol=1e-4, atol=1e-5)


def test_dtype_name_table():
    names = {}
    for tf in (tf1, hbtf):
        names[tf] = [
            tf.as_dtype(n).name for n in ("float", "double", "half", "int32", "int64", "bool")
        ]
    assert names[tf1] == names[hbtf]


def test_range_over_a_size_known_at_run_time():
    """tf.range over sizes taken from the fed tensors: values and dtypes as TensorFlow's."""

    def program(tf):
        x = tf.placeholder(tf.float32, [None, 2])
        k = tf.placeholder(tf.int64, [])
        n = tf.shape(x)[0]
        fetches = [
            tf.range(n),
            tf.range(n, 0, -2),
            tf.range(1, n * 4, k),
            tf.range(tf.cast(n, tf.float32), 0.0, -1.5),
        ]
        return fetches, {x: np.zeros((7, 2), np.float32), k: 3}

    want, got = both(program)
    assert_same(want, got)
    assert [a.dtype for a in want] == [b.dtype for b in got]
