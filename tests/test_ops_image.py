"""tf.image (runtime/ops/image.py): values against numpy references written here, the bilinear
resize gradient against finite differences, random ops by their invariants, errors."""

import numpy as np
import pytest
from opcheck import check_forward, check_gradient, run

import hetbed as hb
import hetbed.compat.v1 as tf

RNG = np.random.default_rng(7)


def _img(*shape):
    return RNG.standard_normal(shape)


# ---- flips, transposes, rotations ------------------------------------------------------------


@pytest.mark.parametrize("batched", [False, True])
def test_flips_transpose_and_rot90(batched):
    x = _img(2, 3, 4, 2) if batched else _img(3, 4, 2)
    hw = (1, 2) if batched else (0, 1)
    cases = {
        tf.image.flip_left_right: lambda a: np.flip(a, hw[1]),
        tf.image.flip_up_down: lambda a: np.flip(a, hw[0]),
        tf.image.transpose_image: lambda a: np.swapaxes(a, *hw),
    }
    for k in range(4):
        cases[lambda a, k=k: tf.image.rot90(a, k)] = lambda a, k=k: np.rot90(a, k, axes=hw)
    for fn, ref in cases.items():
        check_forward(fn, [x], ref)
    check_gradient(lambda a: tf.image.rot90(a, 3), [x[..., :1]])


def test_random_flips_pick_each_image_independently():
    x = _img(16, 2, 3, 1)
    lr, ud = run(
        lambda a: [
            tf.image.random_flip_left_right(a, seed=1),
            tf.image.random_flip_up_down(a, seed=2),
        ],
        [x],
    )
    for got, axis in ((lr, 2), (ud, 1)):
        same = [np.array_equal(g, xi) for g, xi in zip(got, x)]
        flipped = [np.array_equal(g, np.flip(xi, axis - 1)) for g, xi in zip(got, x)]
        assert all(s or f for s, f in zip(same, flipped))
        assert any(same) and any(flipped)  # 16 coins: both outcomes (fixed seed)
    g = hb.Graph()
    with g.as_default():
        ph = hb.placeholder(hb.float64, [None, 2, 3, 1])  # batch size known only at run time
        with hb.Session() as s:
            got = s.run(tf.image.random_flip_left_right(ph, seed=4), {ph: x})
    flipped = [np.array_equal(gi, np.flip(xi, 1)) for gi, xi in zip(got, x)]
    assert any(flipped) and not all(flipped)
    one = run(lambda a: tf.image.random_flip_left_right(a), [x[0]])
    assert np.array_equal(one, x[0]) or np.array_equal(one, np.flip(x[0], 1))


# ---- cropping and padding ---------------------------------------------------------------------


def test_crop_and_pad_to_bounding_box():
    x = _img(2, 5, 6, 3)
    check_forward(
        lambda a: tf.image.crop_to_bounding_box(a, 1, 2, 3, 4), [x], lambda a: a[:, 1:4, 2:6]
    )

    def pad_ref(a):
        out = np.zeros((2, 8, 9, 3))
        out[:, 2:7, 1:7] = a
        return out

    check_forward(lambda a: tf.image.pad_to_bounding_box(a, 2, 1, 8, 9), [x], pad_ref)
    check_forward(
        lambda a: tf.image.pad_to_bounding_box(a, 2, 1, 8, 9), [x[0]], lambda a: pad_ref(a)[0]
    )
    with pytest.raises(hb.errors.InvalidArgumentError, match="crop_to_bounding_box: box"):
        tf.image.crop_to_bounding_box(hb.zeros([5, 6, 3]), 3, 0, 3, 6)
    with pytest.raises(hb.errors.InvalidArgumentError, match="does not fit"):
        tf.image.pad_to_bounding_box(hb.zeros([5, 6, 3]), 1, 0, 5, 6)
    with pytest.raises(hb.errors.InvalidArgumentError, match="3-D .* or 4-D"):
        tf.image.flip_left_right(hb.zeros([5, 6]))


def test_resize_image_with_crop_or_pad_and_central_crop():
    x = _img(6, 5, 1)

    def ref(a, th, tw):
        h, w = a.shape[:2]
        oh, ow = max((h - th) // 2, 0), max((w - tw) // 2, 0)
        a = a[oh : oh + min(h, th), ow : ow + min(w, tw)]
        out = np.zeros((th, tw, a.shape[2]))
        ph, pw = max((th - h) // 2, 0), max((tw - w) // 2, 0)
        out[ph : ph + a.shape[0], pw : pw + a.shape[1]] = a
        return out

    for th, tw in ((3, 8), (9, 2), (6, 5)):
        check_forward(
            lambda a, th=th, tw=tw: tf.image.resize_image_with_crop_or_pad(a, th, tw),
            [x],
            lambda a, th=th, tw=tw: ref(a, th, tw),
        )
    for frac, (h0, h1, w0, w1) in ((0.5, (1, 5, 1, 4)), (0.34, (1, 5, 1, 4)), (0.8, (0, 6, 0, 5))):
        # TF: start = int((size - size * frac) / 2), the box keeps size - 2 * start
        got = run(lambda a, f=frac: tf.image.central_crop(a, f), [x])
        np.testing.assert_array_equal(got, x[h0:h1, w0:w1])
    with pytest.raises(hb.errors.InvalidArgumentError, match="central_fraction"):
        tf.image.central_crop(hb.zeros([4, 4, 1]), 0.0)


def test_random_crop_is_a_window_and_moves():
    x = np.arange(5 * 6 * 2, dtype=np.float32).reshape(5, 6, 2)
    g = hb.Graph()
    with g.as_default():
        ph = hb.placeholder(hb.float32, x.shape)
        c1 = tf.random_crop(ph, [3, 4, 2], seed=3)
        c2 = tf.image.random_crop(ph, [5, 1, 1])
        seen = set()
        with hb.Session() as s:
            for _ in range(12):
                a, b = s.run([c1, c2], {ph: x})
                i, j = int(a[0, 0, 0] // 12), int(a[0, 0, 0] % 12 // 2)
                np.testing.assert_array_equal(a, x[i : i + 3, j : j + 4])
                k, m = int(b[0, 0, 0] % 12 // 2), int(b[0, 0, 0] % 2)
                np.testing.assert_array_equal(b, x[:, k : k + 1, m : m + 1])
                seen.add((i, j))
    assert len(seen) > 2
    with pytest.raises(hb.errors.InvalidArgumentError, match="does not fit"):
        tf.random_crop(hb.zeros([2, 3]), [3, 3])


# ---- resizing ---------------------------------------------------------------------------------


def _src(n_in, n_out, align, half):
    sc = (n_in - 1) / (n_out - 1) if align and n_out > 1 else n_in / n_out
    return [(d + 0.5) * sc - 0.5 if half else d * sc for d in range(n_out)]


def bilinear_ref(x, oh, ow, align=False, half=False):
    """TF's ResizeBilinear by loops: interpolate between floor(src) and floor(src) + 1."""
    n, h, w, c = x.shape
    out = np.zeros((n, oh, ow, c))
    for i, sy in enumerate(_src(h, oh, align, half)):
        y0 = int(np.floor(sy))
        fy = sy - y0
        ya, yb = min(max(y0, 0), h - 1), min(max(y0 + 1, 0), h - 1)
        for j, sx in enumerate(_src(w, ow, align, half)):
            x0 = int(np.floor(sx))
            fx = sx - x0
            xa, xb = min(max(x0, 0), w - 1), min(max(x0 + 1, 0), w - 1)
            top = x[:, ya, xa] + (x[:, ya, xb] - x[:, ya, xa]) * fx
            bot = x[:, yb, xa] + (x[:, yb, xb] - x[:, yb, xa]) * fx
            out[:, i, j] = top + (bot - top) * fy
    return out


def nearest_ref(x, oh, ow, align=False):
    n, h, w, c = x.shape
    rnd = np.round if align else np.floor
    rows = [min(int(rnd(v)), h - 1) for v in _src(h, oh, align, False)]
    cols = [min(int(rnd(v)), w - 1) for v in _src(w, ow, align, False)]
    return x[:, rows][:, :, cols]


@pytest.mark.parametrize("size,align,half", [((5, 7), False, False), ((2, 3), True, False),
                                             ((5, 2), False, True)])  # fmt: skip
def test_resize_bilinear_values_and_gradient(size, align, half):
    x = _img(2, 3, 4, 2)

    def build(a):
        return tf.image.resize_bilinear(a, size, align_corners=align, half_pixel_centers=half)

    check_forward(build, [x], lambda a: bilinear_ref(a, *size, align, half))
    check_gradient(build, [x[:1, :, :, :1]])


def test_resize_nearest_and_resize_images():
    x = _img(1, 3, 5, 2)
    for align in (False, True):
        check_forward(
            lambda a, al=align: tf.image.resize_nearest_neighbor(a, [4, 3], align_corners=al),
            [x],
            lambda a, al=align: nearest_ref(a, 4, 3, al),
        )
    m = tf.image.ResizeMethod
    got = run(lambda a: tf.image.resize_images(a, [4, 3], m.NEAREST_NEIGHBOR), [x[0]])
    np.testing.assert_array_equal(got, nearest_ref(x, 4, 3)[0])
    ints = RNG.integers(0, 255, (3, 4, 1)).astype(np.int32)
    got = run(lambda a: tf.image.resize_images(a, (6, 2)), [ints])
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, bilinear_ref(ints[None].astype(float), 6, 2)[0], rtol=1e-6)
    with pytest.raises(hb.errors.UnimplementedError, match="bicubic"):
        tf.image.resize_images(hb.zeros([2, 2, 1]), [3, 3], method=m.BICUBIC)
    with pytest.raises(hb.errors.InvalidArgumentError, match="two positive ints"):
        tf.image.resize_bilinear(hb.zeros([1, 2, 2, 1]), [3])


# ---- dtypes and photometric ops ---------------------------------------------------------------


IMAX = 2**31 - 1  # hetbed has no uint8: integer images are int32 (or int64), 0..max


def test_convert_image_dtype():
    i32 = np.array([[[0], [1 << 20], [1 << 30], [IMAX]]], dtype=np.int32)
    f = run(lambda a: tf.image.convert_image_dtype(a, hb.float64), [i32])
    np.testing.assert_allclose(f, i32 / IMAX, rtol=1e-12)
    back = run(lambda a: tf.image.convert_image_dtype(a, hb.int32), [f])
    np.testing.assert_array_equal(back, i32)  # x * (max + 0.5), truncated
    hi = np.array([[[-0.5], [0.5], [1.5]]])
    sat = run(lambda a: tf.image.convert_image_dtype(a, hb.int32, saturate=True), [hi])
    np.testing.assert_array_equal(sat[..., 0], [[-(IMAX // 2), IMAX // 2, IMAX]])
    i64 = run(lambda a: tf.image.convert_image_dtype(a, hb.int64), [i32])
    np.testing.assert_array_equal(i64, i32.astype(np.int64) << 32)
    down = run(lambda a: tf.image.convert_image_dtype(a, hb.int32), [i64])
    np.testing.assert_array_equal(down, i32)
    same = run(lambda a: tf.image.convert_image_dtype(a, hb.float64), [hi])
    np.testing.assert_array_equal(same, hi)
    f32 = run(lambda a: tf.image.convert_image_dtype(a, hb.float32), [hi])
    assert f32.dtype == np.float32


def test_brightness_contrast_and_standardization():
    x = RNG.uniform(size=(2, 3, 4, 2))
    check_forward(lambda a: tf.image.adjust_brightness(a, 0.25), [x], lambda a: a + 0.25)

    def contrast_ref(a, f):
        m = a.mean(axis=(-3, -2), keepdims=True)
        return (a - m) * f + m

    check_forward(lambda a: tf.image.adjust_contrast(a, 1.7), [x], lambda a: contrast_ref(a, 1.7))
    check_gradient(lambda a: tf.image.adjust_contrast(a, 0.5), [x[:1, :2, :2, :1]])
    i32 = np.array([[[0], [1 << 29], [IMAX - 5]]], dtype=np.int32)
    got = run(lambda a: tf.image.adjust_brightness(a, 0.25), [i32])
    assert got.dtype == np.int32  # computed in float32, converted back saturating
    np.testing.assert_allclose(got[0, :2, 0], [IMAX / 4, (1 << 29) + IMAX / 4], rtol=1e-6)
    assert got[0, 2, 0] > IMAX - 1000

    def std_ref(a):
        m = a.mean(axis=(-3, -2, -1), keepdims=True)
        s = a.std(axis=(-3, -2, -1), keepdims=True)
        return (a - m) / np.maximum(s, 1 / np.sqrt(a[0].size))

    check_forward(tf.image.per_image_standardization, [x], std_ref)
    flat = np.full((2, 2, 1), 3.0)
    check_forward(tf.image.per_image_standardization, [flat], lambda a: np.zeros_like(a))
    small = np.array([[[10], [200], [250]]], dtype=np.int32)
    got = run(tf.image.per_image_standardization, [small])
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, std_ref(small.astype(np.float64)[None])[0], rtol=1e-5)


def test_random_brightness_and_contrast_ranges():
    x = RNG.uniform(size=(2, 2, 1))
    d = run(lambda a: tf.image.random_brightness(a, 0.3, seed=1) - a, [x])
    assert np.allclose(d, d.flat[0]) and -0.3 <= d.flat[0] < 0.3
    got = run(lambda a: tf.image.random_contrast(a, 0.2, 0.5, seed=1), [x])
    factor = (got - x.mean()) / (x - x.mean())
    assert np.allclose(factor, factor.flat[0]) and 0.2 <= factor.flat[0] < 0.5
    with pytest.raises(ValueError, match="max_delta"):
        tf.image.random_brightness(hb.zeros([2, 2, 1]), -1.0)
    with pytest.raises(ValueError, match="upper"):
        tf.image.random_contrast(hb.zeros([2, 2, 1]), 0.5, 0.5)


def test_adjust_gamma_total_variation_and_aliases():
    x = RNG.uniform(0.1, 1.0, size=(2, 3, 4, 2))
    check_forward(lambda a: tf.image.adjust_gamma(a, 2.2, 0.5), [x], lambda a: 0.5 * a**2.2)
    check_gradient(lambda a: tf.image.adjust_gamma(a, 1.5), [x[:1, :2, :2, :1]])

    def tv(a):
        ax = (-3, -2, -1)
        dy = np.abs(np.diff(a, axis=-3)).sum(axis=ax)
        return dy + np.abs(np.diff(a, axis=-2)).sum(axis=ax)

    check_forward(tf.image.total_variation, [x], tv)
    check_forward(tf.image.total_variation, [x[0]], tv)
    check_forward(tf.image.transpose, [x], lambda a: np.swapaxes(a, 1, 2))
    got = run(lambda a: tf.image.resize(a, [5, 6]), [x])
    np.testing.assert_allclose(got, bilinear_ref(x, 5, 6))
    with pytest.raises(ValueError, match="gamma"):
        tf.image.adjust_gamma(hb.zeros([2, 2, 1]), -1.0)


def test_grayscale_conversions():
    rgb = RNG.uniform(size=(2, 2, 3))
    w = np.array([0.2989, 0.5870, 0.1140])
    check_forward(tf.image.rgb_to_grayscale, [rgb], lambda a: (a @ w)[..., None])
    g = rgb[..., :1]
    check_forward(tf.image.grayscale_to_rgb, [g], lambda a: np.repeat(a, 3, -1))
    i32 = np.array([[[IMAX, 0, 0], [0, IMAX, 0]]], dtype=np.int32)
    got = run(tf.image.rgb_to_grayscale, [i32])
    assert got.dtype == np.int32
    np.testing.assert_allclose(got[..., 0], [[0.2989 * IMAX, 0.587 * IMAX]], rtol=1e-6)
    with pytest.raises(hb.errors.InvalidArgumentError, match="last axis must be 1"):
        tf.image.grayscale_to_rgb(hb.zeros([2, 2, 3]))


def test_resizing_images_whose_size_is_known_only_at_run_time():
    """A decoded file's height and width are unknown until the graph runs: the taps are computed
    then (ResizeTaps), giving the static-size values; the gradient flows through them."""
    x = RNG.standard_normal((2, 5, 7, 3))
    for align, half in ((False, False), (True, False), (False, True)):

        def dyn(a, align=align, half=half):
            a = hb.placeholder_with_default(a, [None, None, None, 3])
            return tf.image.resize_bilinear(a, [4, 9], align_corners=align, half_pixel_centers=half)

        got = run(dyn, [x])
        np.testing.assert_allclose(got, bilinear_ref(x, 4, 9, align, half), rtol=1e-6, atol=1e-9)
    near = run(
        lambda a: tf.image.resize_nearest_neighbor(
            hb.placeholder_with_default(a, [None, None, None, 3]), [3, 10]
        ),
        [x],
    )
    np.testing.assert_allclose(near, nearest_ref(x, 3, 10))
    with hb.Graph().as_default():
        a = hb.placeholder(hb.float64, [None, None, 3])
        y = tf.image.resize_images(a, [4, 6])
        assert y.shape.as_list() == [4, 6, 3]
        (g,) = hb.gradients(hb.reduce_sum(y * y), [a])
        with hb.Session() as s:
            gv, yv = s.run([g, y], {a: x[0]})
    # d/dx sum(y^2) = 2 R^T R x for the (linear) resize R: check against central differences
    eps, k = 1e-6, (2, 3, 1)
    xp, xm = x[0].copy(), x[0].copy()
    xp[k] += eps
    xm[k] -= eps

    def f(v):
        return np.sum(bilinear_ref(v[None], 4, 6)[0] ** 2)

    assert gv[k] == pytest.approx((f(xp) - f(xm)) / (2 * eps), rel=1e-5)
    np.testing.assert_allclose(yv, bilinear_ref(x[:1], 4, 6)[0], rtol=1e-9)


def _area_ref(x, oh, ow):
    """TF's ResizeArea by loops: each output cell averages the input cells it covers, each by
    its overlap (no align_corners)."""
    n, h, w, c = x.shape
    sy, sx = h / oh, w / ow
    out = np.zeros((n, oh, ow, c))
    for o in range(oh):
        for p in range(ow):
            acc = 0.0
            for i in range(int(np.floor(o * sy)), int(np.ceil((o + 1) * sy))):
                wy = min(i + 1, (o + 1) * sy) - max(i, o * sy)
                for j in range(int(np.floor(p * sx)), int(np.ceil((p + 1) * sx))):
                    wx = min(j + 1, (p + 1) * sx) - max(j, p * sx)
                    acc = acc + wy * wx * x[:, min(i, h - 1), min(j, w - 1)]
            out[:, o, p] = acc / (sy * sx)
    return out


def test_area_resize_and_crops_at_run_time_offsets():
    """resize_area (resize_images' AREA): block means for an exact factor, the overlap-weighted
    average otherwise, also at sizes known only at run time; a crop at tensor offsets (a random
    crop's), with a failed check naming the box when it does not fit."""
    x = RNG.standard_normal((2, 6, 8, 3))
    got = run(lambda a: tf.image.resize_area(a, [3, 4]), [x])
    np.testing.assert_allclose(got, x.reshape(2, 3, 2, 4, 2, 3).mean(axis=(2, 4)), rtol=1e-5)
    for size in ((4, 5), (9, 11)):
        got = run(
            lambda a, s=size: tf.image.resize_images(a, s, method=tf.image.ResizeMethod.AREA), [x]
        )
        np.testing.assert_allclose(got, _area_ref(x, *size), rtol=1e-5, atol=1e-6)
        dyn = run(
            lambda a, s=size: tf.image.resize_area(
                hb.placeholder_with_default(a, [None, None, None, 3]), s
            ),
            [x],
        )
        np.testing.assert_allclose(dyn, _area_ref(x, *size), rtol=1e-5, atol=1e-6)
    img = np.arange(5 * 6, dtype=np.float32).reshape(5, 6, 1)
    with hb.Graph().as_default():
        off = hb.placeholder(hb.int32, [2])
        crop = tf.image.crop_to_bounding_box(img, off[0], off[1], 2, 3)
        assert crop.shape.as_list() == [2, 3, 1]
        with hb.Session() as s:
            np.testing.assert_array_equal(s.run(crop, {off: [1, 2]})[..., 0], img[1:3, 2:5, 0])
            with pytest.raises(hb.errors.InvalidArgumentError, match="box is not inside"):
                s.run(crop, {off: [4, 2]})


def test_area_resize_as_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    x = RNG.standard_normal((2, 7, 9, 3)).astype(np.float32)
    for size, align in (((3, 4), False), ((10, 13), False), ((14, 18), False), ((10, 13), True)):
        g = tf1.Graph()
        with g.as_default():
            with tf1.Session(graph=g) as s:
                theirs = s.run(tf1.image.resize_area(x, size, align_corners=align))
        ours = run(lambda a, s=size, al=align: tf.image.resize_area(a, s, align_corners=al), [x])
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
