"""Differential tests of the WP3 tf.nn and tf.image additions: the same TF1 program run under
TensorFlow and under hetbed, values compared. Skipped when TensorFlow is not installed."""

from __future__ import annotations

import numpy as np
import pytest

import hetbed.compat.v1 as hbtf

tf1 = pytest.importorskip("tensorflow.compat.v1")

RNG = np.random.default_rng(11)


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


def assert_same(a, b, rtol=1e-5, atol=1e-5):
    if isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y, rtol, atol)
        return
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(b, a, rtol=rtol, atol=atol)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def test_resize_bilinear_and_nearest_match_tf():
    """TF1 ResizeBilinear (align_corners False/True, half_pixel_centers False), its gradient,
    and nearest-neighbor resizing."""
    x = _f32(2, 5, 4, 3)

    def prog(tf):
        p = tf.placeholder(tf.float32, x.shape)
        outs = []
        for size, align in (((7, 9), False), ((3, 2), False), ((8, 6), True), ((1, 1), True)):
            outs.append(tf.image.resize_bilinear(p, size, align_corners=align))
            outs.append(tf.image.resize_nearest_neighbor(p, size, align_corners=align))
        y = tf.image.resize_bilinear(p, (7, 3))
        outs.append(tf.gradients(tf.reduce_sum(y * y), p)[0])
        outs.append(tf.image.resize_images(p[0], (6, 6)))
        return outs, {p: x}

    a, b = both(prog)
    assert_same(a, b)


def test_image_crops_pads_and_photometric_match_tf():
    img = RNG.uniform(size=(7, 6, 3)).astype(np.float32)

    def prog(tf):
        p = tf.placeholder(tf.float32, img.shape)
        outs = [
            tf.image.central_crop(p, 0.5),
            tf.image.central_crop(p, 0.33),
            tf.image.resize_image_with_crop_or_pad(p, 4, 9),
            tf.image.resize_image_with_crop_or_pad(p, 10, 3),
            tf.image.pad_to_bounding_box(p, 1, 2, 9, 9),
            tf.image.crop_to_bounding_box(p, 2, 1, 3, 4),
            tf.image.per_image_standardization(p),
            tf.image.adjust_contrast(p, 1.5),
            tf.image.adjust_brightness(p, -0.2),
            tf.image.rgb_to_grayscale(p),
            tf.image.grayscale_to_rgb(p[:, :, :1]),
            tf.image.rot90(p, 3),
            tf.image.transpose_image(p),
            tf.image.flip_up_down(p),
            tf.image.adjust_gamma(p, 2.0, 0.5),
            tf.image.total_variation(p),
            tf.image.total_variation(tf.stack([p, p * 2.0])),
            tf.image.transpose(p),
            tf.image.resize(p, [3, 11]),
            tf.image.convert_image_dtype(p, tf.int32, saturate=True),
        ]
        return outs, {p: img}

    a, b = both(prog)
    assert_same(a[:-1], b[:-1])
    np.testing.assert_allclose(b[-1], a[-1], rtol=1e-6)  # float32 -> int32 rounding


def test_convolutions_lrn_and_activations_match_tf():
    x, x1 = _f32(2, 7, 6, 3), _f32(2, 9, 3)
    f, f1, dw, pw = _f32(3, 3, 3, 4), _f32(3, 3, 2), _f32(3, 3, 3, 2), _f32(1, 1, 6, 4)

    def prog(tf):
        p, p1 = tf.placeholder(tf.float32, x.shape), tf.placeholder(tf.float32, x1.shape)
        conv1 = tf.nn.conv1d(p1, f1, 2, "SAME")
        outs = [
            conv1,
            tf.nn.conv1d(p1, f1, 1, "VALID"),
            tf.nn.atrous_conv2d(p, f, 2, "SAME"),
            tf.nn.conv2d(p, f, [1, 1, 1, 1], "VALID", dilations=[1, 2, 1, 1]),
            tf.nn.depthwise_conv2d(p, dw, [1, 2, 2, 1], "SAME"),
            tf.nn.depthwise_conv2d(p, dw, [1, 1, 1, 1], "VALID", rate=[2, 2]),
            tf.nn.separable_conv2d(p, dw, pw, [1, 1, 1, 1], "SAME"),
            tf.nn.convolution(p, f, "SAME", strides=[2, 2]),
            tf.nn.pool(p1, [3], "MAX", "SAME", strides=[2]),
            *tf.nn.max_pool_with_argmax(p, [1, 3, 3, 1], [1, 2, 2, 1], "SAME"),
            *tf.nn.max_pool_with_argmax(
                p, [1, 2, 2, 1], [1, 2, 2, 1], "VALID", include_batch_in_index=True
            ),
            tf.nn.pool(p, [2, 2], "AVG", "VALID", strides=[1, 2]),
            tf.nn.lrn(p, depth_radius=1, bias=2.0, alpha=0.5, beta=0.75),
            tf.nn.selu(p),
            tf.nn.softsign(p),
            tf.nn.swish(p),
            tf.nn.zero_fraction(tf.nn.relu(p)),
            tf.nn.max_pool2d(p, 2, 2, "SAME"),
            tf.nn.avg_pool2d(p, [1, 2, 3, 1], [1, 1, 2, 1], "VALID"),
            tf.nn.crelu(p),
            tf.nn.weighted_cross_entropy_with_logits(
                labels=tf.sigmoid(p), logits=2.0 * p, pos_weight=3.0
            ),
        ]
        lrn = tf.nn.lrn(p, 2, 1.0, 0.3, 0.5)
        dep = tf.nn.depthwise_conv2d(p, dw, [1, 1, 1, 1], "SAME", rate=[2, 2])
        mp = tf.nn.max_pool_with_argmax(p, [1, 2, 2, 1], [1, 1, 1, 1], "SAME")[0]
        loss = tf.reduce_sum(lrn * lrn) + tf.reduce_sum(dep * dep) + tf.reduce_sum(mp * mp)
        outs += tf.gradients(loss, [p])
        outs += tf.gradients(tf.reduce_sum(conv1 * conv1), [p1])
        return outs, {p: x, p1: x1}

    a, b = both(prog)
    assert_same(a, b, rtol=1e-4, atol=1e-4)


def test_1d_and_separable_layers_match_tf():
    """The layers make TF's variables (names and shapes); with the same values, the same output."""
    x = _f32(2, 8, 3)
    x2 = _f32(1, 6, 6, 2)
    vals: dict = {}
    out = []
    for tf in (tf1, hbtf):
        g = tf.Graph()
        with g.as_default():
            p, p2 = tf.placeholder(tf.float32, x.shape), tf.placeholder(tf.float32, x2.shape)
            y = tf.layers.conv1d(p, 4, 3, padding="same", name="c1", dilation_rate=2)
            y = tf.layers.max_pooling1d(y, 2, 2)
            y = tf.layers.average_pooling1d(y, 2, 1, padding="same")
            z = tf.layers.separable_conv2d(p2, 3, 3, depth_multiplier=2, name="sep")
            assigns = []
            for v in tf.global_variables():
                shape = tuple(v.shape.as_list())
                val = vals.setdefault(v.name, RNG.standard_normal(shape).astype(np.float32))
                assigns.append(tf.assign(v, val))
            with tf.Session(graph=g) as s:
                s.run(assigns)
                out.append(s.run([y, z], {p: x, p2: x2}))
    assert sorted(vals) == [
        "c1/bias:0",
        "c1/kernel:0",
        "sep/bias:0",
        "sep/depthwise_kernel:0",
        "sep/pointwise_kernel:0",
    ]
    assert_same(out[0], out[1], rtol=1e-4, atol=1e-4)
