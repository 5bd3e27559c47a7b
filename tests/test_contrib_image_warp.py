"""tf.contrib.image's warps (dense_image_warp, interpolate_spline, sparse_image_warp): against
numpy and closed forms; against TensorFlow Addons (the same functions, moved there from
contrib) where it is installed."""

import numpy as np
import pytest

import hetbed.compat.v1 as tf

RNG = np.random.default_rng(7)


def _bilinear_np(img: np.ndarray, y: float, x: float) -> np.ndarray:
    """One point of TF's bilinear read: floors clipped to [0, size - 2], fractions to [0, 1]."""
    h, w = img.shape[:2]
    fy, fx = min(max(0.0, np.floor(y)), h - 2), min(max(0.0, np.floor(x)), w - 2)
    ay, ax = min(max(0.0, y - fy), 1.0), min(max(0.0, x - fx), 1.0)
    iy, ix = int(fy), int(fx)
    top = img[iy, ix] + ax * (img[iy, ix + 1] - img[iy, ix])
    bottom = img[iy + 1, ix] + ax * (img[iy + 1, ix + 1] - img[iy + 1, ix])
    return top + ay * (bottom - top)


def test_dense_image_warp_reads_each_pixel_back_along_its_flow_and_clamps_at_the_edges():
    img = RNG.standard_normal((2, 5, 6, 3))
    flow = RNG.standard_normal((2, 5, 6, 2)) * 2.5  # many points beyond the edges
    with tf.Graph().as_default():
        out = tf.contrib.image.dense_image_warp(tf.constant(img), tf.constant(flow))
        shifted = tf.contrib.image.dense_image_warp(
            tf.constant(img), tf.ones([2, 5, 6, 2], tf.float64)
        )
        with tf.Session() as s:
            got, sh = s.run([out, shifted])
    want = np.array(
        [
            [
                [_bilinear_np(img[b], y - flow[b, y, x, 0], x - flow[b, y, x, 1]) for x in range(6)]
                for y in range(5)
            ]
            for b in range(2)
        ]
    )
    np.testing.assert_allclose(got, want, atol=1e-12)
    np.testing.assert_allclose(sh[:, 1:, 1:], img[:, :-1, :-1])  # a whole-pixel shift
    np.testing.assert_allclose(sh[:, 0, 0], img[:, 0, 0])  # beyond the corner: the corner


def test_dense_image_warp_gradients_equal_central_differences():
    img = RNG.standard_normal((1, 4, 4, 2))
    flow = RNG.uniform(-0.9, 0.9, (1, 4, 4, 2)) + 0.05  # away from integer kinks
    with tf.Graph().as_default():
        i, f = tf.placeholder(tf.float64, img.shape), tf.placeholder(tf.float64, flow.shape)
        loss = tf.reduce_sum(tf.square(tf.contrib.image.dense_image_warp(i, f)))
        gi, gf = tf.gradients(loss, [i, f])
        with tf.Session() as s:
            value = lambda a, b: s.run(loss, {i: a, f: b})  # noqa: E731
            agi, agf = s.run([gi, gf], {i: img, f: flow})
            eps = 1e-6
            for idx in [(0, 1, 2, 0), (0, 3, 0, 1), (0, 0, 0, 0)]:
                d = np.zeros_like(flow)
                d[idx] = eps
                num = (value(img, flow + d) - value(img, flow - d)) / (2 * eps)
                assert agf[idx] == pytest.approx(num, rel=1e-5, abs=1e-7)
                d = np.zeros_like(img)
                d[idx] = eps
                num = (value(img + d, flow) - value(img - d, flow)) / (2 * eps)
                assert agi[idx] == pytest.approx(num, rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_interpolate_spline_passes_through_its_points_and_keeps_affine_functions(order):
    """Unregularized, the spline takes the training values at the training points, and an
    affine function of the points is reproduced everywhere (its affine term)."""
    pts = RNG.uniform(0, 5, (2, 7, 2))
    vals = RNG.standard_normal((2, 7, 3))
    q = RNG.uniform(-1, 6, (2, 9, 2))
    m, c = RNG.standard_normal((2, 3)), RNG.standard_normal(3)
    with tf.Graph().as_default():
        at_train = tf.contrib.image.interpolate_spline(pts, vals, pts, order)
        affine = tf.contrib.image.interpolate_spline(pts, pts @ m + c, q, order)
        with tf.Session() as s:
            got, aff = s.run([at_train, affine])
    np.testing.assert_allclose(got, vals, atol=1e-6)
    np.testing.assert_allclose(aff, q @ m + c, atol=1e-6)


def test_sparse_image_warp_moves_the_control_points_and_pins_the_boundary():
    img = RNG.standard_normal((1, 9, 9, 1))
    src = np.array([[[4.0, 4.0]]])
    dst = np.array([[[4.0, 5.0]]])
    with tf.Graph().as_default():
        warped, flow = tf.contrib.image.sparse_image_warp(img, src, dst, num_boundary_points=2)
        three = np.array([[[1.0, 1.0], [6.0, 2.0], [3.0, 7.0]]])  # one flow for all: a shift
        one, one_flow = tf.contrib.image.sparse_image_warp(img, three, three + [0.0, 1.0])
        alone = tf.contrib.image.sparse_image_warp(img, src, dst)[1]  # 1 point: singular, as TF
        with tf.Session() as s:
            w, f, w1, f1 = s.run([warped, flow, one, one_flow])
            with pytest.raises(tf.errors.InvalidArgumentError, match="singular"):
                s.run(alone)
    np.testing.assert_allclose(f[0, 4, 5], [0.0, 1.0], atol=1e-6)  # dst reads from src
    np.testing.assert_allclose(w[0, 4, 5], img[0, 4, 4], atol=1e-6)
    for y, x in [(0, 0), (0, 8), (8, 0), (8, 8), (0, 4), (4, 8)]:  # the zero-flow edge points
        np.testing.assert_allclose(f[0, y, x], 0.0, atol=1e-6)
    np.testing.assert_allclose(f1, np.broadcast_to([0.0, 1.0], f1.shape), atol=1e-6)
    np.testing.assert_allclose(w1[0, :, 1:], img[0, :, :-1], atol=1e-6)


def test_warps_name_bad_shapes_and_arguments():
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="dense_image_warp: image must be 4-dimensional"):
            tf.contrib.image.dense_image_warp(tf.zeros([4, 4, 1]), tf.zeros([4, 4, 2]))
        with pytest.raises(ValueError, match="height must be at least 2, got 1"):
            tf.contrib.image.dense_image_warp(tf.zeros([1, 1, 4, 1]), tf.zeros([1, 1, 4, 2]))
        with pytest.raises(ValueError, match="order must be an integer >= 1, got 0"):
            tf.contrib.image.interpolate_spline(
                tf.zeros([1, 3, 2]), tf.zeros([1, 3, 1]), tf.zeros([1, 2, 2]), 0
            )
        with pytest.raises(ValueError, match="must be known when the graph is built"):
            tf.contrib.image.interpolate_spline(
                tf.placeholder(tf.float32, [1, 3, None]),
                tf.zeros([1, 3, 1]),
                tf.zeros([1, 2, 2]),
                2,
            )


def test_warps_equal_tensorflow_addons():
    tf_ = pytest.importorskip("tensorflow")
    tfa = pytest.importorskip("tensorflow_addons")
    img = RNG.standard_normal((2, 7, 9, 3)).astype(np.float32)
    flow = (RNG.standard_normal((2, 7, 9, 2)) * 3).astype(np.float32)
    tp = RNG.uniform(0, 6, (2, 5, 2)).astype(np.float32)
    tv = RNG.standard_normal((2, 5, 2)).astype(np.float32)
    qp = RNG.uniform(-1, 8, (2, 11, 2)).astype(np.float32)
    src = np.array([[[2.0, 2.0], [4.0, 6.0], [5.0, 3.0]]] * 2, np.float32)
    dst = src + np.array([[[0.7, -0.5], [-1.0, 0.8], [0.3, 0.2]]] * 2, np.float32)

    def build(t, warp, spline, sparse):
        with t.Graph().as_default():
            v1 = t.compat.v1 if t is tf_ else t
            i, f = v1.placeholder(t.float32, img.shape), v1.placeholder(t.float32, flow.shape)
            w = warp(i, f)
            res = {"warp": w, "grads": t.gradients(t.reduce_sum(w * w), [i, f])}
            for order in (1, 2, 3):
                s = spline(
                    t.constant(tp), t.constant(tv), t.constant(qp), order, 0.01 * (order == 2)
                )
                res[f"spline{order}"] = s
            for nb in (0, 3):
                res[f"sparse{nb}"] = sparse(
                    t.constant(img), t.constant(src), t.constant(dst), 2, 0.0, nb
                )
            with v1.Session() as sess:
                return sess.run(res, {i: img, f: flow})

    ours = build(tf, tf.contrib.image.dense_image_warp, tf.contrib.image.interpolate_spline,
                 tf.contrib.image.sparse_image_warp)  # fmt: skip
    theirs = build(tf_, tfa.image.dense_image_warp, tfa.image.interpolate_spline,
                   tfa.image.sparse_image_warp)  # fmt: skip
    assert sorted(ours) == sorted(theirs)
    for k in ours:
        parts = zip(*(v if isinstance(v, (list, tuple)) else [v] for v in (ours[k], theirs[k])))
        for a, b in parts:
            np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5, err_msg=k)
