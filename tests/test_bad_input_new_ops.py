"""Bad input to this round's ops gets an error that names the op and the problem, and edge cases
TF accepts work (a hostile review's findings): non-finite boxes, fed inputs of the wrong rank,
empty batches, zero-length sequences, bad strides, a gradient function of the wrong shape."""

import numpy as np
import pytest

import hetbed.compat.v1 as tf


def _run(t, feed=None):
    with tf.Session() as s:
        return s.run(t, feed)


def test_box_ops_refuse_non_finite_boxes_and_wrong_ranks():
    img = np.zeros((1, 4, 4, 1), np.float32)
    with tf.Graph().as_default():
        for bad in (np.nan, np.inf):
            with pytest.raises(tf.errors.InvalidArgumentError, match="not finite"):
                _run(tf.image.crop_and_resize(img, [[0, 0, bad, 1]], [0], [2, 2]))
        # TF draws what it can and returns: a box without finite corners outlines nothing
        drawn = _run(tf.image.draw_bounding_boxes(np.zeros((1, 4, 4, 3), np.float32),
                                                  [[[0, 0, np.nan, 1]]]))  # fmt: skip
        assert drawn.sum() == 0
        p = tf.placeholder(tf.float32)
        with pytest.raises(tf.errors.InvalidArgumentError, match="image must be 4-D"):
            _run(tf.image.crop_and_resize(p, [[0, 0, 1, 1]], [0], [2, 2]), {p: img[0]})
        m = tf.placeholder(tf.int32)
        with pytest.raises(tf.errors.InvalidArgumentError, match="must be a scalar"):
            _run(tf.image.non_max_suppression([[0, 0, 1, 1]], [1.0], m), {m: [1, 2]})
        q = tf.placeholder(tf.float32, [1, 4, 4, None])
        with pytest.raises(tf.errors.InvalidArgumentError, match="depth must be 1, 3 or 4"):
            _run(tf.image.draw_bounding_boxes(q, [[[0, 0, 1, 1]]]), {q: np.zeros((1, 4, 4, 2))})


def test_depthwise_on_empty_batches_and_fed_wrong_ranks():
    f = np.ones((2, 2, 2, 1), np.float32)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32)
        y = tf.nn.depthwise_conv2d_native(x, f, [1, 1, 1, 1], "SAME")
        assert _run(y, {x: np.zeros((0, 4, 4, 2), np.float32)}).shape == (0, 4, 4, 2)
        assert _run(y, {x: np.zeros((1, 0, 4, 2), np.float32)}).shape == (1, 0, 4, 2)
        with pytest.raises(tf.errors.InvalidArgumentError, match="must be 4-D NHWC"):
            _run(y, {x: np.zeros((4, 4, 2), np.float32)})


def test_ctc_conv3d_crf_and_gradient_edge_cases():
    with tf.Graph().as_default():
        empty = tf.SparseTensor(np.zeros((0, 2), np.int64), np.zeros(0, np.int32), [1, 1])
        x = np.zeros((3, 1, 4), np.float32)
        assert _run(tf.nn.ctc_loss(empty, x, [0])).tolist() == [0.0]  # no frames, no labels
        with pytest.raises(tf.errors.InvalidArgumentError, match="at least one class"):
            _run(tf.nn.ctc_loss(empty, np.zeros((3, 1, 0), np.float32), [3]))
        v = np.zeros((1, 4, 4, 4, 1), np.float32)
        for kw, what in (({"strides": [1, 0, 1, 1, 1]}, "strides"),
                         ({"dilations": [1, 0, 1, 1, 1]}, "dilations")):  # fmt: skip
            with pytest.raises(tf.errors.InvalidArgumentError, match=f"{what} must be positive"):
                tf.nn.conv3d(v, np.ones((2, 2, 2, 1, 1), np.float32), padding="SAME",
                             **({"strides": [1, 1, 1, 1, 1]} | kw))  # fmt: skip
        with pytest.raises(tf.errors.InvalidArgumentError, match="ksize must be positive"):
            tf.nn.max_pool3d(v, [1, 0, 2, 2, 1], [1, 1, 1, 1, 1], "VALID")
        crf = tf.contrib.crf
        ll, _ = crf.crf_log_likelihood(
            np.ones((2, 3, 4), np.float32), np.zeros((2, 3), np.int32), [0, 3],
            tf.constant(np.zeros((4, 4), np.float32)),
        )  # fmt: skip
        got = _run(ll)
        assert got[0] == 0.0 and got[1] == pytest.approx(-3 * np.log(4), rel=1e-6)

        @tf.custom_gradient
        def wrong(a):
            return a * 2.0, lambda dy: tf.ones([5])

        c = tf.constant([1.0, 2.0])
        with pytest.raises(ValueError, match="Incompatible shapes"):
            tf.gradients(tf.reduce_sum(wrong(c)), [c])


def test_sets_data_and_sampling_arguments_checked(tmp_path):
    with tf.Graph().as_default():
        sp = tf.SparseTensor([[5, 0]], np.array([1], np.int64), [2, 3])
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"index \[5, 0\] outside"):
            _run(tf.sets.set_size(sp))
        assert _run(tf.sets.set_size(np.zeros((2, 0), np.int64))).tolist() == [0, 0]
        with pytest.raises(TypeError, match="record_bytes must be an int"):
            tf.data.FixedLengthRecordDataset([str(tmp_path / "x")], 2.5)
        with pytest.raises(TypeError, match="start must be an int"):
            tf.data.Dataset.range(2).enumerate(1.5)
        it = tf.data.experimental.Counter(2**31 - 2, 1, tf.int32).take(3)
        nxt = it.make_one_shot_iterator().get_next()
        with tf.Session() as s:
            assert [int(s.run(nxt)) for _ in range(3)] == [2**31 - 2, 2**31 - 1, -(2**31)]
        missing = tf.data.FixedLengthRecordDataset([str(tmp_path / "nope.bin")], 4)
        with pytest.raises(tf.errors.NotFoundError, match="no file"):
            _run(missing.make_one_shot_iterator().get_next())
        with pytest.raises(tf.errors.InvalidArgumentError, match="aspect_ratio_range"):
            tf.image.sample_distorted_bounding_box([8, 8, 3], [[[0, 0, 1, 1]]],
                                                   aspect_ratio_range=[1e-50, 1e-50])  # fmt: skip
        b, z, _ = _run(tf.image.sample_distorted_bounding_box(
            np.array([200, 200, 3], np.uint8), [[[0, 0, 1, 1]]], seed=1))  # fmt: skip
        assert b.dtype == np.uint8 and z[2] == 255  # -1 wraps, as TF's


def test_crops_and_pads_take_tensor_sizes():
    img = np.arange(16, dtype=np.float32).reshape(4, 4, 1)
    with tf.Graph().as_default():
        two, one, six = tf.constant(2), tf.constant(1), tf.constant(6)
        crop = tf.image.crop_to_bounding_box(img, 1, one, two, 2)
        pad = tf.image.pad_to_bounding_box(img, one, 1, six, 6)
        both = tf.image.resize_image_with_crop_or_pad(img, two, 6)
        c, p, b = _run([crop, pad, both])
    np.testing.assert_array_equal(c, img[1:3, 1:3])
    want = np.zeros((6, 6, 1), np.float32)
    want[1:5, 1:5] = img
    np.testing.assert_array_equal(p, want)
    assert b.shape == (2, 6, 1)
    np.testing.assert_array_equal(b[:, 1:5], img[1:3])
