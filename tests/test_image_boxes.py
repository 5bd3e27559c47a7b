"""Bounding-box image ops (runtime/ops/image_boxes.py): crop_and_resize against closed forms (a
linear ramp is interpolated exactly; the image gradient is the forward map's adjoint; the box
gradient of a ramp is known), non_max_suppression and draw_bounding_boxes on hand-made cases,
sample_distorted_bounding_box by the rule every crop must satisfy, and all of them against
TensorFlow where it is installed."""

import numpy as np
import pytest

import hetbed as hb
import hetbed.compat.v1 as tf

RNG = np.random.default_rng(11)


def _run(fetches, feed=None):
    with tf.Session() as s:
        return s.run(fetches, feed)


def _ramp(n, h, w, c, a=0.7, b=-1.3):
    """image[n, y, x, ch] = a*y + b*x + ch + 10*n: bilinear sampling of it is exact."""
    y, x = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    base = a * y + b * x
    return np.stack(
        [np.stack([base + ch + 10 * k for ch in range(c)], -1) for k in range(n)]
    ).astype(np.float32)


# ---- crop_and_resize --------------------------------------------------------------------------


def test_crop_and_resize_of_the_whole_image_is_the_image():
    img = RNG.standard_normal((2, 5, 7, 3)).astype(np.float32)
    with tf.Graph().as_default():
        out = tf.image.crop_and_resize(img, [[0, 0, 1, 1], [0, 0, 1, 1]], [1, 0], [5, 7])
        got = _run(out)
    assert out.shape.as_list() == [2, 5, 7, 3] and got.dtype == np.float32
    np.testing.assert_allclose(got, img[[1, 0]], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("crop", [(4, 6), (1, 1), (1, 5)])
def test_crop_and_resize_samples_a_ramp_exactly_and_extrapolates_outside(crop):
    h, w = 6, 9
    img = _ramp(2, h, w, 2)
    boxes = np.array([[0.1, 0.2, 0.8, 0.9], [-0.2, 0.5, 0.4, 1.3], [0.9, 0.9, 0.1, 0.3]])
    ind = np.array([0, 1, 1])
    with tf.Graph().as_default():
        got = _run(tf.image.crop_and_resize(img, boxes, ind, crop, extrapolation_value=-7.0))
    ch, cw = crop
    for n, (y1, x1, y2, x2) in enumerate(boxes):
        ys = (
            y1 * (h - 1) + np.arange(ch) * (y2 - y1) * (h - 1) / (ch - 1)
            if ch > 1
            else np.array([0.5 * (y1 + y2) * (h - 1)])
        )
        xs = (
            x1 * (w - 1) + np.arange(cw) * (x2 - x1) * (w - 1) / (cw - 1)
            if cw > 1
            else np.array([0.5 * (x1 + x2) * (w - 1)])
        )
        for i, yv in enumerate(ys):
            for j, xv in enumerate(xs):
                inside = 0 <= yv <= h - 1 and 0 <= xv <= w - 1
                for c in range(2):
                    want = 0.7 * yv - 1.3 * xv + c + 10 * ind[n] if inside else -7.0
                    assert got[n, i, j, c] == pytest.approx(want, abs=1e-4), (n, i, j, c)


def test_crop_and_resize_nearest_picks_the_rounded_pixel():
    img = RNG.standard_normal((1, 4, 5, 1)).astype(np.float32)
    with tf.Graph().as_default():
        got = _run(tf.image.crop_and_resize(img, [[0.0, 0.0, 1.0, 1.0]], [0], [3, 3], "nearest"))
    rows, cols = [0, 2, 3], [0, 2, 4]  # 0, 1.5 -> 2, 3; 0, 2, 4
    np.testing.assert_array_equal(got[0, :, :, 0], img[0][np.ix_(rows, cols)][..., 0])


def test_crop_and_resize_image_gradient_is_the_adjoint_of_the_forward_map():
    img = RNG.standard_normal((2, 6, 8, 3)).astype(np.float32)
    boxes = RNG.uniform(-0.2, 1.2, (5, 4)).astype(np.float32)
    ind = RNG.integers(0, 2, 5).astype(np.int32)
    w = RNG.standard_normal((5, 4, 3, 3)).astype(np.float32)
    for method in ("bilinear", "nearest"):
        with tf.Graph().as_default():
            x = tf.placeholder(tf.float32, img.shape)
            out = tf.image.crop_and_resize(x, boxes, ind, [4, 3], method=method)
            (gx,) = tf.gradients(tf.reduce_sum(out * w), [x])
            y, g = _run([out, gx], {x: img})
        # <A x, w> == <x, A^T w>: the forward map is linear in the image
        assert np.sum(y * w) == pytest.approx(np.sum(img * g), rel=1e-4)
        assert g.shape == img.shape


def test_crop_and_resize_box_gradient_of_a_ramp_is_its_slope():
    h, w = 7, 9
    img = _ramp(1, h, w, 1, a=0.5, b=2.0)
    boxes = np.array([[0.1, 0.2, 0.7, 0.9], [0.3, 0.1, 0.35, 0.6]], np.float32)
    ch, cw = 3, 4
    wts = RNG.standard_normal((2, ch, cw, 1)).astype(np.float32)
    with tf.Graph().as_default():
        b = tf.placeholder(tf.float32, boxes.shape)
        out = tf.image.crop_and_resize(img, b, [0, 0], [ch, cw])
        (gb,) = tf.gradients(tf.reduce_sum(out * wts), [b])
        got = _run(gb, {b: boxes})
    fy = np.arange(ch) / (ch - 1)
    fx = np.arange(cw) / (cw - 1)
    sy = wts[..., 0].sum(axis=2)  # by row
    sx = wts[..., 0].sum(axis=1)  # by column
    want = np.stack(
        [
            0.5 * (h - 1) * (sy * (1 - fy)).sum(1),
            2.0 * (w - 1) * (sx * (1 - fx)).sum(1),
            0.5 * (h - 1) * (sy * fy).sum(1),
            2.0 * (w - 1) * (sx * fx).sum(1),
        ],
        1,
    )
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_crop_and_resize_errors_name_the_problem():
    img = np.zeros((2, 4, 4, 1), np.float32)
    with tf.Graph().as_default():
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"box_ind has values outside"):
            _run(tf.image.crop_and_resize(img, [[0, 0, 1, 1]], [2], [2, 2]))
        with pytest.raises(hb.errors.InvalidArgumentError, match="boxes must be"):
            tf.image.crop_and_resize(img, [[0, 0, 1]], [0], [2, 2])
        with pytest.raises(hb.errors.InvalidArgumentError, match="crop_size"):
            tf.image.crop_and_resize(img, [[0, 0, 1, 1]], [0], [0, 2])
        with pytest.raises(hb.errors.InvalidArgumentError, match="method"):
            tf.image.crop_and_resize(img, [[0, 0, 1, 1]], [0], [2, 2], method="bicubic")


# ---- non_max_suppression -----------------------------------------------------------------------


def test_nms_keeps_the_best_box_of_each_cluster_in_score_order():
    boxes = np.array(
        [
            [0, 0, 1, 1],
            [0, 0.1, 1, 1.1],  # IoU 0.818 with box 0
            [0, -0.1, 1, 0.9],
            [0, 10, 1, 11],
            [0, 10.1, 1, 11.1],
            [0, 100, 1, 101],
        ],
        np.float32,
    )
    scores = np.array([0.9, 0.95, 0.75, 0.6, 0.5, 0.3], np.float32)
    with tf.Graph().as_default():
        sel = _run(tf.image.non_max_suppression(boxes, scores, 3, iou_threshold=0.5))
        all_ = _run(tf.image.non_max_suppression(boxes, scores, 10, iou_threshold=0.5))
        thr = _run(tf.image.non_max_suppression(boxes, scores, 10, 0.5, score_threshold=0.4))
        loose = _run(tf.image.non_max_suppression(boxes, scores, 10, iou_threshold=0.9))
        idx, sc = _run(tf.image.non_max_suppression_with_scores(boxes, scores, 10, 0.5))
    assert sel.tolist() == [1, 3, 5] and sel.dtype == np.int32
    assert all_.tolist() == [1, 3, 5]
    assert thr.tolist() == [1, 3]
    assert loose.tolist() == [1, 0, 2, 3, 4, 5]  # 0 and 2 overlap box 1 by 0.82 and 0.67
    assert idx.tolist() == [1, 3, 5] and sc.tolist() == pytest.approx([0.95, 0.6, 0.3])


def test_nms_ties_go_by_index_and_an_iou_at_the_threshold_suppresses():
    boxes = np.array([[0, 0, 2, 1], [0, 1, 2, 2], [0, 0, 1, 2]], np.float32)
    # boxes 0 and 2 overlap by 1 of 3: IoU 1/3
    with tf.Graph().as_default():
        ties = _run(tf.image.non_max_suppression(boxes, [0.5, 0.5, 0.5], 3, 1 / 3))
        past = _run(tf.image.non_max_suppression(boxes, [0.5, 0.5, 0.5], 3, 0.34))
        padded, valid = _run(
            tf.image.non_max_suppression_padded(
                boxes, [1, 2, 3], 5, 0.99, pad_to_max_output_size=True
            )
        )
    assert ties.tolist() == [0, 1]
    assert past.tolist() == [0, 1, 2]
    assert padded.tolist() == [2, 1, 0, 0, 0] and valid == 3


def test_nms_refuses_bad_arguments():
    with tf.Graph().as_default():
        with pytest.raises(hb.errors.InvalidArgumentError, match="iou_threshold must be in"):
            _run(tf.image.non_max_suppression([[0, 0, 1, 1]], [1.0], 1, 1.5))
        with pytest.raises(hb.errors.InvalidArgumentError, match="scores has shape"):
            b = tf.placeholder(tf.float32, [None, 4])
            _run(tf.image.non_max_suppression(b, [1.0, 2.0], 1), {b: np.zeros((3, 4))})


# ---- draw_bounding_boxes -----------------------------------------------------------------------


def test_draw_bounding_boxes_outlines_each_box_in_the_default_colours():
    img = np.zeros((1, 5, 6, 3), np.float32)
    boxes = np.array([[[0.25, 0.2, 0.75, 0.8], [0.0, 0.0, 1.0, 1.0]]], np.float32)
    with tf.Graph().as_default():
        got = _run(tf.image.draw_bounding_boxes(img, boxes))
    want = np.zeros_like(img)
    want[0, 0, :, :] = want[0, 4, :, :] = [0, 0, 1]  # second box: the border, colour 1
    want[0, :, 0, :] = want[0, :, 5, :] = [0, 0, 1]
    # first box: rows int(0.25*4)=1 .. int(0.75*4)=3, columns int(0.2*5)=1 .. int(0.8*5)=4
    want[0, 1, 1:5] = want[0, 3, 1:5] = [1, 1, 0]
    want[0, 1:4, 1] = want[0, 1:4, 4] = [1, 1, 0]
    np.testing.assert_array_equal(got, want)
    assert img.sum() == 0  # the input is not drawn on


# ---- sample_distorted_bounding_box -------------------------------------------------------------


def test_sample_distorted_bounding_box_crops_satisfy_the_rule():
    h, w = 60, 80
    box = np.array([[[0.2, 0.3, 0.7, 0.6]]], np.float32)
    with tf.Graph().as_default():
        tf.set_random_seed(3)
        begin, size, bb = tf.image.sample_distorted_bounding_box(
            [h, w, 3],
            box,
            min_object_covered=0.5,
            aspect_ratio_range=(0.5, 2.0),
            area_range=(0.1, 0.6),
        )
        img = tf.placeholder(tf.float32, [h, w, 3])
        crop = tf.slice(img, begin, size)
        assert begin.shape.as_list() == [3] and bb.shape.as_list() == [1, 1, 4]
        seen = set()
        with tf.Session() as s:
            for _ in range(40):
                b, z, r, c = s.run([begin, size, bb, crop], {img: np.zeros((h, w, 3))})
                y, x, hh, ww = int(b[0]), int(b[1]), int(z[0]), int(z[1])
                seen.add((y, x, hh, ww))
                assert b[2] == 0 and z[2] == -1 and c.shape == (hh, ww, 3)
                assert 0 <= y and y + hh <= h and 0 <= x and x + ww <= w
                assert 0.1 * h * w <= hh * ww <= 0.6 * h * w
                assert 0.5 - 1 / hh <= ww / hh <= 2.0 + 1 / hh
                np.testing.assert_allclose(r[0, 0], [y / h, x / w, (y + hh) / h, (x + ww) / w])
                oy = min(y + hh, 42) - max(y, 12)  # the object box in pixels: 12..42, 24..48
                ox = min(x + ww, 48) - max(x, 24)
                assert max(oy, 0) * max(ox, 0) >= 0.5 * 30 * 24
    assert len(seen) > 10  # a new crop each run


def test_sample_distorted_bounding_box_falls_back_to_the_whole_image_and_checks_inputs():
    with tf.Graph().as_default():
        # an object filling the image cannot be half covered by a crop of 5-6% of it
        out = tf.image.sample_distorted_bounding_box(
            [20, 30, 1], [[[0, 0, 1, 1]]], min_object_covered=0.5, area_range=(0.05, 0.06)
        )
        b, z, r = _run(out)
        assert b.tolist() == [0, 0, 0] and z.tolist() == [20, 30, -1]
        np.testing.assert_array_equal(r, [[[0, 0, 1, 1]]])
        none = np.zeros((1, 0, 4), np.float32)
        with pytest.raises(hb.errors.InvalidArgumentError, match="use_image_if_no_bounding"):
            _run(tf.image.sample_distorted_bounding_box([20, 30, 1], none))
        ok = tf.image.sample_distorted_bounding_box(
            [20, 30, 1], none, use_image_if_no_bounding_boxes=True, min_object_covered=0.0
        )
        assert _run(ok)[1][2] == -1
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"in \[0.0, 1.0\]"):
            _run(tf.image.sample_distorted_bounding_box([20, 30, 1], [[[0, 0, 1.5, 1]]]))
        with pytest.raises(hb.errors.InvalidArgumentError, match="area_range"):
            tf.image.sample_distorted_bounding_box([20, 30, 1], none, area_range=(0.5, 0.2))


# ---- against TensorFlow -----------------------------------------------------------------------


def test_box_ops_match_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    img = RNG.standard_normal((2, 7, 9, 3)).astype(np.float32)
    boxes = RNG.uniform(-0.3, 1.3, (6, 4)).astype(np.float32)
    ind = RNG.integers(0, 2, 6).astype(np.int32)
    wts = RNG.standard_normal((6, 5, 4, 3)).astype(np.float32)
    nms_boxes = RNG.uniform(0, 1, (40, 4)).astype(np.float32)
    nms_scores = RNG.uniform(0, 1, 40).astype(np.float32)
    canvas = RNG.uniform(0, 1, (2, 10, 12, 3)).astype(np.float32)
    draw = RNG.uniform(-0.2, 1.2, (2, 12, 4)).astype(np.float32)

    def build(t):
        x = t.constant(img)
        b = t.constant(boxes)
        outs = []
        for method in ("bilinear", "nearest"):
            y = t.image.crop_and_resize(x, b, ind, [5, 4], method=method, extrapolation_value=0.5)
            loss = t.reduce_sum(y * wts)
            outs += [y, *t.gradients(loss, [x] + ([b] if method == "bilinear" else []))]
        outs.append(t.image.non_max_suppression(nms_boxes, nms_scores, 12, 0.3, 0.2))
        outs.append(t.image.draw_bounding_boxes(canvas, draw))
        return outs

    g = tf1.Graph()
    with g.as_default(), tf1.Session(graph=g) as s:
        theirs = s.run(build(tf1))
    with tf.Graph().as_default():
        ours = _run(build(tf))
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
