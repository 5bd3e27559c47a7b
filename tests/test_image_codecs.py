"""Image files (runtime/ops/image_codecs.py) and the narrow integer dtypes they decode to."""

from __future__ import annotations

import io

import numpy as np
import pytest

import hetbed.compat.v1 as tf

RNG = np.random.default_rng(7)


def _run(fn, *feeds):
    with tf.Graph().as_default():
        phs = [tf.placeholder(tf.as_dtype(np.asarray(v).dtype), np.asarray(v).shape) for v in feeds]
        out = fn(*phs)
        with tf.Session() as s:
            return s.run(out, dict(zip(phs, feeds)))


def _file(img: np.ndarray, fmt: str, **kw) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format=fmt, **kw)
    return buf.getvalue()


def test_png_round_trips_and_channel_conversions():
    rgba = RNG.integers(0, 256, (5, 7, 4), dtype=np.uint8)
    gray = RNG.integers(0, 256, (5, 7, 1), dtype=np.uint8)
    for img in (rgba, rgba[..., :3], gray):
        got = _run(lambda x: tf.image.decode_png(tf.image.encode_png(x)), img)
        assert got.dtype == np.uint8
        np.testing.assert_array_equal(got, img)
    rgb = _run(lambda x: tf.image.decode_png(tf.image.encode_png(x), channels=3), rgba)
    np.testing.assert_array_equal(rgb, rgba[..., :3])  # alpha dropped
    g3 = _run(lambda x: tf.io.decode_png(tf.io.encode_png(x), channels=3), gray)
    np.testing.assert_array_equal(g3, np.repeat(gray, 3, axis=-1))
    g4 = _run(lambda x: tf.image.decode_png(tf.image.encode_png(x), channels=4), gray)
    np.testing.assert_array_equal(g4[..., 3], 255)
    wide = _run(
        lambda x: tf.image.decode_png(tf.image.encode_png(x), dtype=tf.uint16), rgba[..., :3]
    )
    np.testing.assert_array_equal(wide, rgba[..., :3].astype(np.uint16) * 257)
    # to gray: 601 luma in 15-bit fixed point, truncated (libpng's, as TF's)
    rgb = rgba[..., :3].astype(np.int64)
    luma = _run(lambda x: tf.image.decode_png(tf.image.encode_png(x), channels=1), rgba[..., :3])
    want = (rgb[..., 0] * 9797 + rgb[..., 1] * 19234 + rgb[..., 2] * 3737) >> 15
    np.testing.assert_array_equal(luma[..., 0], want)
    assert abs(float(np.mean(luma[..., 0] - rgb @ [0.299, 0.587, 0.114]))) < 1


def test_jpeg_gif_bmp_and_decode_image():
    yy, xx = np.mgrid[0:16, 0:24]
    smooth = np.stack([xx * 10, yy * 15, 255 - xx * 10], -1).astype(np.uint8)
    jpeg = _file(smooth, "JPEG", quality=95)
    got = _run(lambda c: tf.image.decode_jpeg(c), np.array(jpeg, dtype=object))
    assert got.shape == (16, 24, 3) and got.dtype == np.uint8
    err = np.abs(got.astype(int) - smooth)  # lossy (chroma subsampled), close on a smooth image
    assert err.mean() <= 4 and err.max() <= 16
    gray = _run(lambda c: tf.image.decode_jpeg(c, channels=1), np.array(jpeg, dtype=object))
    assert gray.shape == (16, 24, 1)
    bmp = _file(smooth, "BMP")
    np.testing.assert_array_equal(
        _run(lambda c: tf.image.decode_bmp(c), np.array(bmp, dtype=object)), smooth
    )
    from PIL import Image

    frames = [Image.new("RGB", (3, 2), c) for c in ((255, 0, 0), (0, 0, 255))]
    buf = io.BytesIO()
    frames[0].save(buf, format="GIF", save_all=True, append_images=frames[1:])
    gif = np.array(buf.getvalue(), dtype=object)
    got = _run(lambda c: tf.image.decode_gif(c), gif)
    assert got.shape == (2, 2, 3, 3)
    np.testing.assert_array_equal(got[0, ..., 0], 255)
    np.testing.assert_array_equal(got[1, ..., 2], 255)
    # decode_image: any format; floats scaled as convert_image_dtype
    png = np.array(_file(smooth, "PNG"), dtype=object)
    f = _run(lambda c: tf.image.decode_image(c, dtype=tf.float32), png)
    np.testing.assert_allclose(f, smooth / 255.0, rtol=1e-6)
    first = _run(lambda c: tf.image.decode_image(c, expand_animations=False), gif)
    assert first.shape == (2, 3, 3)
    assert _run(lambda c: tf.image.is_jpeg(c), np.array(jpeg, dtype=object))
    assert not _run(lambda c: tf.image.is_jpeg(c), png)


def test_bad_files_are_named():
    png = np.array(_file(np.zeros((2, 2, 3), np.uint8), "PNG"), dtype=object)
    with pytest.raises(tf.errors.InvalidArgumentError, match="DecodeJpeg.*expected a JPEG.*PNG"):
        _run(lambda c: tf.image.decode_jpeg(c), png)
    junk = np.array(b"not an image at all", dtype=object)
    with pytest.raises(tf.errors.InvalidArgumentError, match="not a JPEG, PNG, GIF or BMP"):
        _run(lambda c: tf.image.decode_image(c), junk)
    cut = np.array(_file(np.zeros((8, 8, 3), np.uint8), "PNG")[:40], dtype=object)
    with pytest.raises(tf.errors.InvalidArgumentError, match="cannot decode the PNG"):
        _run(lambda c: tf.image.decode_png(c), cut)
    with tf.Graph().as_default():
        with pytest.raises(tf.errors.InvalidArgumentError, match="must be uint8"):
            tf.image.encode_jpeg(tf.zeros([2, 2, 3]))
        with pytest.raises(ValueError, match="channels must be"):
            tf.image.decode_png(tf.constant(b""), channels=2)


def test_narrow_integers_wrap_and_convert_like_tensorflow():
    a = np.array([250, 3, 128], np.uint8)
    b = np.array([10, 5, 128], np.uint8)
    s = _run(lambda x, y: x + y, a, b)
    assert s.dtype == np.uint8
    np.testing.assert_array_equal(s, (a.astype(int) + b) % 256)
    d = _run(lambda x, y: x - y, a, b)
    np.testing.assert_array_equal(d, (a.astype(int) - b) % 256)
    i8 = _run(lambda x: tf.cast(x, tf.int8), np.array([127, 128, 255], np.int32))
    np.testing.assert_array_equal(i8, [127, -128, -1])
    f = _run(lambda x: tf.image.convert_image_dtype(x, tf.float32), a)
    np.testing.assert_allclose(f, a / 255.0, rtol=1e-6)
    back = _run(lambda x: tf.image.convert_image_dtype(x, tf.uint8), f)
    np.testing.assert_array_equal(back, a)  # x * 255.5, truncated
    wide = _run(lambda x: tf.image.convert_image_dtype(x, tf.uint16), a)
    np.testing.assert_array_equal(wide, a.astype(np.uint16) << 8)
    raw = _run(lambda x: tf.decode_raw(x, tf.uint8), np.array(b"\x01\xff", dtype=object))
    assert raw.dtype == np.uint8 and list(raw) == [1, 255]
    assert tf.as_dtype(np.uint8) == tf.uint8 != tf.int32 and tf.uint8.size == 1


def test_a_jpeg_file_read_and_decoded_in_a_dataset(tmp_path):
    """The common input pipeline: file names -> read_file -> decode_jpeg -> resize, batched."""
    imgs = [np.full((6, 8, 3), 40 * (k + 1), np.uint8) for k in range(3)]
    names = []
    for k, img in enumerate(imgs):
        p = tmp_path / f"{k}.jpg"
        p.write_bytes(_file(img, "JPEG", quality=100))
        names.append(str(p))
    with tf.Graph().as_default():
        ds = tf.data.Dataset.from_tensor_slices(names).map(
            lambda f: tf.image.convert_image_dtype(
                tf.image.decode_jpeg(tf.read_file(f), channels=3), tf.float32
            )
        )
        nxt = ds.batch(3).make_one_shot_iterator().get_next()
        with tf.Session() as s:
            got = s.run(nxt)
    assert got.shape == (3, 6, 8, 3)
    np.testing.assert_allclose(got[:, 0, 0, 0], [40 / 255, 80 / 255, 120 / 255], atol=2 / 255)


def test_same_pixels_as_tensorflow():
    """PNG exactly; JPEG (4:2:0 and 4:4:4 chroma) exactly as TF's accurate integer DCT, and
    within a few levels of its default fast one."""
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    yy, xx = np.mgrid[0:20, 0:30]
    img = np.stack([xx * 8, yy * 12, (xx * yy) % 256], -1).astype(np.uint8)
    files = {
        "png": _file(img, "PNG"),
        "jpeg": _file(img, "JPEG", quality=90),
        "jpeg444": _file(img, "JPEG", quality=90, subsampling=0),
    }
    for key, data in files.items():
        fmt = key[:4]
        for channels in (0, 1, 3):
            g = tf1.Graph()
            with g.as_default():
                kw = {"dct_method": "INTEGER_ACCURATE"} if fmt == "jpeg" else {}
                fn = getattr(tf1.image, f"decode_{fmt}")
                dec = fn(tf1.constant(data), channels=channels, **kw)
                fast = fn(tf1.constant(data), channels=channels)
                with tf1.Session(graph=g) as s:
                    theirs, theirs_fast = s.run([dec, fast])
            ours = _run(
                lambda c, f=fmt, ch=channels: getattr(tf.image, f"decode_{f}")(c, channels=ch),
                np.array(data, dtype=object),
            )
            assert ours.shape == theirs.shape, (key, channels)
            np.testing.assert_array_equal(ours, theirs, err_msg=f"{key} {channels}")
            d = np.abs(ours.astype(int) - theirs_fast)
            assert d.max() <= 8 and d.mean() <= 1.5, (key, channels)
