"""Complex dtypes, the FFTs and tf.signal (runtime/ops/complex_ops.py, spectral.py,
signal_ops.py) against numpy, closed forms and finite differences; no TensorFlow needed
(tests/test_signal_tf.py compares with TF 2.21)."""

from __future__ import annotations

import numpy as np
import pytest

import hetbed.compat.v1 as tf

RNG = np.random.default_rng(0)


def _c(*shape, dtype=np.complex128):
    return (RNG.normal(size=shape) + 1j * RNG.normal(size=shape)).astype(dtype)


def _run(fetches, feed=None):
    with tf.Session() as s:
        return s.run(fetches, feed)


def _numeric_grad(f, z, eps=1e-6):
    """TF's convention for a real loss of complex z: dL/dRe(z) + i dL/dIm(z) (real z: dL/dz)."""
    z = np.asarray(z)
    out = np.zeros(z.shape, dtype=z.dtype)
    flat, res = z.reshape(-1), out.reshape(-1)
    for i in range(flat.size):
        for step, unit in ((eps, 1.0), (1j * eps, 1j)) if z.dtype.kind == "c" else ((eps, 1.0),):
            zp, zm = flat.copy(), flat.copy()
            zp[i] += step
            zm[i] -= step
            d = (f(zp.reshape(z.shape)) - f(zm.reshape(z.shape))) / (2 * eps)
            res[i] += unit * d
    return out


def _check_grad(build, z, atol=1e-6):
    """build(t) -> real scalar loss of the placeholder t; the gradient hetbed computes equals
    the finite-difference one."""
    with tf.Graph().as_default():
        x = tf.placeholder(tf.as_dtype(z.dtype), z.shape)
        loss = build(x)
        (g,) = tf.gradients(loss, [x])
        with tf.Session() as s:
            got = s.run(g, {x: z})
            f = lambda v: float(s.run(loss, {x: v}))  # noqa: E731
            want = _numeric_grad(f, z)
    np.testing.assert_allclose(got, want, atol=atol, rtol=1e-5)


# ---- dtypes ---------------------------------------------------------------------------------


def test_complex_dtypes_convert_and_name_their_parts():
    assert tf.complex64.is_complex and not tf.complex64.is_floating and tf.complex64.is_numeric
    assert tf.as_dtype(np.complex64) is tf.complex64 and tf.as_dtype("complex128") is tf.complex128
    assert tf.as_dtype(complex) is tf.complex128 and tf.dtypes.complex64 is tf.complex64
    assert tf.complex64.real_dtype is tf.float32 and tf.complex128.real_dtype is tf.float64
    assert tf.float32.real_dtype is tf.float32 and not tf.float32.is_complex
    assert tf.complex64.size == 8 and tf.complex128.size == 16
    assert tf.complex64.as_numpy_dtype is np.complex64
    with tf.Graph().as_default():
        k = tf.constant([1 + 2j, 3j])
        assert k.dtype is tf.complex128
        k64 = tf.constant([1.5, 2], dtype=tf.complex64)  # real numbers make complex constants
        with pytest.raises(TypeError, match="complex value"):
            tf.constant(1 + 2j, dtype=tf.float32)
        p = tf.placeholder(tf.complex64, [2])
        f = tf.placeholder(tf.float32, [2])
        out = _run(
            [k, k64, p * 2, tf.cast(p, tf.float32), tf.cast(f, tf.complex64)],
            {p: [1 + 1j, -2j], f: [0.5, 1.0]},
        )
        assert out[1].dtype == np.complex64 and out[1].tolist() == [1.5, 2]
        np.testing.assert_array_equal(out[2], np.array([2 + 2j, -4j], np.complex64))
        np.testing.assert_array_equal(out[3], [1.0, 0.0])  # TF's cast: the real part
        assert out[4].dtype == np.complex64 and out[4].tolist() == [0.5, 1.0]
        with pytest.raises(tf.errors.InvalidArgumentError, match="nonzero imaginary"):
            _run(f, {f: [1j, 0]})
        with pytest.raises(tf.errors.UnimplementedError, match="no kernel for Less.*complex64"):
            _run(tf.less(p, p), {p: [1, 2]})  # complex numbers have no order


def test_complex_variables_save_and_restore(tmp_path):
    with tf.Graph().as_default():
        v = tf.Variable(np.array([1 + 2j, -3j], np.complex64), name="v")
        w = tf.Variable(np.array([[0.5 - 1j]]), name="w")
        up = tf.assign_add(v, tf.constant([1j, 1j], tf.complex64))
        saver = tf.train.Saver()
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(up)
            path = saver.save(s, str(tmp_path / "ck"))
        with tf.Session() as s:
            saver.restore(s, path)
            got_v, got_w = s.run([v, w])
    assert got_v.dtype == np.complex64 and got_v.tolist() == [1 + 3j, -2j]
    assert got_w.dtype == np.complex128 and got_w.tolist() == [[0.5 - 1j]]
    assert tf.train.load_checkpoint(path).get_tensor("v").dtype == np.complex64


# ---- complex math -----------------------------------------------------------------------------


def test_complex_elementwise_math_equals_numpy():
    a, b = _c(3, 4, dtype=np.complex64), _c(3, 4, dtype=np.complex64)
    re, im = RNG.normal(size=(3, 1)).astype(np.float32), RNG.normal(size=(4,)).astype(np.float32)
    with tf.Graph().as_default():
        x, y = tf.constant(a), tf.constant(b)
        z = tf.complex(re, im)  # broadcasts
        fetches = {
            "add": x + y, "sub": x - y, "mul": x * y, "div": x / y, "neg": -x,
            "exp": tf.exp(x), "log": tf.log(x), "sqrt": tf.sqrt(x), "square": tf.square(x),
            "rsqrt": tf.rsqrt(x), "recip": tf.reciprocal(x), "pow": tf.pow(x, y),
            "sum": tf.reduce_sum(x, 1), "mean": tf.reduce_mean(x), "prod": tf.reduce_prod(x, 0),
            "matmul": tf.matmul(x, y, transpose_b=True), "adj": tf.matmul(x, y, adjoint_b=True),
            "t": tf.transpose(x), "cat": tf.concat([x, y], 0), "r": tf.reshape(x, [-1]),
            "z": z, "real": tf.real(x), "imag": tf.math.imag(x), "conj": tf.conj(x),
            "angle": tf.angle(x), "abs": tf.abs(x), "eq": tf.equal(x, x), "sign": tf.sign(x),
            "addn": tf.add_n([x, y, x]), "zl": tf.zeros_like(x),
        }  # fmt: skip
        got = _run(fetches)
    want = {
        "add": a + b, "sub": a - b, "mul": a * b, "div": a / b, "neg": -a, "exp": np.exp(a),
        "log": np.log(a), "sqrt": np.sqrt(a), "square": a * a, "rsqrt": 1 / np.sqrt(a),
        "recip": 1 / a, "pow": a**b, "sum": a.sum(1), "mean": a.mean(), "prod": a.prod(0),
        "matmul": a @ b.T, "adj": a @ b.conj().T, "t": a.T, "cat": np.concatenate([a, b]),
        "r": a.ravel(), "z": re + 1j * im, "real": a.real, "imag": a.imag, "conj": a.conj(),
        "angle": np.angle(a), "abs": np.abs(a), "eq": np.ones((3, 4), bool),
        "sign": a / np.abs(a), "addn": a + b + a, "zl": np.zeros_like(a),
    }  # fmt: skip
    for k, w in want.items():
        g = got[k]
        kind = np.asarray(w).dtype.kind
        want_dt = np.float32 if kind == "f" else np.complex64 if kind == "c" else np.bool_
        assert g.dtype == want_dt, (k, g.dtype)
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5, err_msg=k)
    with tf.Graph().as_default():
        with pytest.raises(TypeError, match="float32 or float64"):
            tf.complex(tf.constant([1], tf.int32), tf.constant([1], tf.int32))
        with pytest.raises(TypeError, match="float32 and float64"):
            tf.complex(tf.constant([1.0]), tf.constant([1.0], tf.float64))
        # real inputs: TF's identities
        r = tf.constant([-2.0, 3.0])
        assert tf.real(r) is r and tf.conj(r) is r
        np.testing.assert_allclose(_run([tf.imag(r), tf.angle(r)]), [[0, 0], [np.pi, 0]])


@pytest.mark.parametrize(
    "name,build",
    [
        ("abs", lambda x: tf.reduce_sum(tf.abs(x))),
        ("real_imag", lambda x: tf.reduce_sum(tf.real(x) * tf.imag(x) ** 2)),
        ("angle", lambda x: tf.reduce_sum(tf.angle(x) * tf.real(x))),
        ("conj_mul", lambda x: tf.reduce_sum(tf.real(tf.conj(x) * x * x * (1 + 2j)))),
        ("div_exp_log", lambda x: tf.reduce_sum(tf.imag(tf.exp(x) / (x + 3.0) + tf.log(x)))),
        ("sqrt_square", lambda x: tf.reduce_sum(tf.real(tf.sqrt(x) + tf.square(x) * 1j))),
        ("rsqrt_recip", lambda x: tf.reduce_sum(tf.abs(tf.rsqrt(x) - tf.reciprocal(x)))),
        ("pow_prod", lambda x: tf.reduce_sum(tf.real(tf.pow(x, 2.5 + 0.5j) + tf.reduce_prod(x)))),
        ("mean_cast", lambda x: tf.cast(tf.reduce_mean(x * x), tf.float64) * 3),
        ("matmul", lambda x: tf.reduce_sum(tf.abs(tf.matmul(x, x, adjoint_a=True)))),
        ("batch_matmul", lambda x: tf.reduce_sum(tf.imag(tf.matmul(x[None], x[None] * 1j)))),
        ("complex", lambda x: tf.reduce_sum(tf.abs(tf.complex(tf.real(x), 2 * tf.imag(x))))),
        ("tanh_sigmoid", lambda x: tf.reduce_sum(tf.real(tf.tanh(x) * 1j + tf.sigmoid(x)))),
        ("sin_cos_expm1", lambda x: tf.reduce_sum(tf.abs(tf.sin(x) + tf.cos(x) * tf.expm1(x)))),
        ("cumsum", lambda x: tf.reduce_sum(tf.imag(tf.cumsum(x * x, 1, exclusive=True)))),
        ("einsum", lambda x: tf.reduce_sum(tf.abs(tf.einsum("ij,jk->ik", x, x * 1j)))),
        ("tensordot", lambda x: tf.reduce_sum(tf.real(tf.tensordot(x, tf.sin(x), [[0], [1]])))),
    ],
)
def test_complex_gradients_equal_finite_differences(name, build):
    _check_grad(build, _c(3, 3))


def test_complex_gradients_through_a_while_loop():
    wv = _c(2)

    def build(x):
        w = tf.constant(wv)
        body = lambda i, v: (i + 1, v * w + tf.sin(v))  # noqa: E731
        _, y = tf.while_loop(lambda i, v: i < 3, body, [0, x])
        return tf.reduce_sum(tf.abs(y))

    _check_grad(build, _c(2) * 0.3)


def test_gradient_of_abs_at_zero_is_zero():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.complex64, [2])
        (g,) = tf.gradients(tf.reduce_sum(tf.abs(x)), [x])
        np.testing.assert_allclose(_run(g, {x: [0, 3 + 4j]}), [0, 0.6 + 0.8j], rtol=1e-6)


# ---- FFTs -------------------------------------------------------------------------------------


def test_ffts_equal_numpy():
    z = _c(2, 3, 4, 5, dtype=np.complex64)
    r = RNG.normal(size=(2, 3, 6, 8)).astype(np.float32)
    with tf.Graph().as_default():
        got = _run(
            [
                tf.fft(z), tf.ifft(z), tf.fft2d(z), tf.signal.ifft2d(z), tf.spectral.fft3d(z),
                tf.ifft3d(z), tf.signal.rfft(r), tf.signal.rfft(r, [5]), tf.signal.rfft(r, [11]),
                tf.signal.rfft2d(r), tf.spectral.rfft2d(r, [4, 10]), tf.signal.rfft3d(r),
                tf.signal.irfft(z), tf.signal.irfft(z, [9]), tf.signal.irfft2d(z, [3, 6]),
                tf.signal.irfft3d(z, [2, 3, 8]), tf.signal.fft(tf.cast(z, tf.complex128)),
            ]
        )  # fmt: skip
    a3 = (-3, -2, -1)
    want = [
        np.fft.fft(z), np.fft.ifft(z), np.fft.fft2(z), np.fft.ifft2(z), np.fft.fftn(z, axes=a3),
        np.fft.ifftn(z, axes=a3), np.fft.rfft(r), np.fft.rfft(r, 5), np.fft.rfft(r, 11),
        np.fft.rfft2(r), np.fft.rfft2(r, [4, 10]), np.fft.rfftn(r, axes=a3),
        np.fft.irfft(z, 8), np.fft.irfft(z, 9), np.fft.irfft2(z, [3, 6]),
        np.fft.irfftn(z, [2, 3, 8], axes=a3), np.fft.fft(z.astype(np.complex128)),
    ]  # fmt: skip
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, i
        assert g.dtype == (np.complex128 if i == 16 else np.complex64 if w.dtype.kind == "c" else np.float32), i  # fmt: skip
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=2e-5, err_msg=str(i))
    with tf.Graph().as_default():
        with pytest.raises(TypeError, match="fft: input must be complex64"):
            tf.fft(r)
        with pytest.raises(tf.errors.InvalidArgumentError, match="rank of at least 2"):
            tf.fft2d(z[0, 0, 0])
        with pytest.raises(tf.errors.InvalidArgumentError, match="fft_length must hold 2"):
            tf.signal.rfft2d(r, [4])
        p = tf.placeholder(tf.float32, [None, None])
        with pytest.raises(tf.errors.InvalidArgumentError, match="must be known"):
            tf.signal.rfft(p)
        assert tf.signal.rfft(p, [8]).shape.as_list() == [None, 5]


W = _c(3, 20)


def _w(n):
    return tf.constant(W[:, :n])  # complex weights, [3, n]: broadcast over the leading dims


@pytest.mark.parametrize(
    "name,build,shape,real",
    [
        ("fft", lambda x: tf.real(tf.fft(x) * _w(6)), (2, 3, 6), False),
        ("ifft", lambda x: tf.imag(tf.ifft(x) * _w(6)), (2, 3, 6), False),
        ("fft2d", lambda x: tf.abs(tf.fft2d(x) + _w(4)), (3, 4), False),
        ("ifft3d", lambda x: tf.real(tf.ifft3d(x) * _w(3)), (2, 3, 3), False),
        ("rfft", lambda x: tf.real(tf.signal.rfft(x) * _w(4)), (3, 6), True),
        ("rfft_pad", lambda x: tf.real(tf.signal.rfft(x, [9]) * _w(5)), (3, 6), True),
        ("rfft_cut", lambda x: tf.imag(tf.signal.rfft(x, [4]) * _w(3)), (3, 6), True),
        ("rfft2d", lambda x: tf.abs(tf.signal.rfft2d(x) + _w(3)), (3, 4), True),
        ("rfft3d", lambda x: tf.real(tf.signal.rfft3d(x) * _w(2)), (2, 3, 3), True),
        ("irfft", lambda x: tf.signal.irfft(x) * tf.real(_w(10)), (3, 6), False),
        ("irfft_odd", lambda x: tf.signal.irfft(x, [11]) ** 2, (3, 6), False),
        ("irfft2d", lambda x: tf.sin(tf.signal.irfft2d(x, [3, 7])), (3, 4), False),
    ],
)
def test_fft_gradients_equal_finite_differences(name, build, shape, real):
    z = RNG.normal(size=shape) if real else _c(*shape)
    if name.startswith("irfft"):  # irfft reads no imaginary part at frequency 0 (nor at n / 2)
        z[..., 0] = z[..., 0].real
    _check_grad(lambda x: tf.reduce_sum(build(x)), z)


# ---- tf.signal --------------------------------------------------------------------------------


def test_frame_and_overlap_and_add_equal_loops():
    x = RNG.normal(size=(2, 23)).astype(np.float32)
    with tf.Graph().as_default():
        f, fp, oa = _run(
            [
                tf.signal.frame(x, 5, 3),
                tf.signal.frame(x, 5, 3, pad_end=True, pad_value=-1.0),
                tf.contrib.signal.overlap_and_add(tf.signal.frame(x, 5, 3), 3),
            ]
        )
    assert f.shape == (2, 7, 5) and fp.shape == (2, 8, 5)
    for i in range(7):
        np.testing.assert_array_equal(f[:, i], x[:, 3 * i : 3 * i + 5])
    np.testing.assert_array_equal(fp[:, 7], np.concatenate([x[:, 21:], -np.ones((2, 3))], 1))
    want = np.zeros((2, 23), np.float32)
    for i in range(7):
        want[:, 3 * i : 3 * i + 5] += f[:, i]
    np.testing.assert_allclose(oa, want, rtol=1e-6)
    _check_grad(lambda s: tf.reduce_sum(tf.signal.frame(s, 4, 2) ** 2), RNG.normal(size=(9,)))
    _check_grad(
        lambda s: tf.reduce_sum(tf.sin(tf.signal.overlap_and_add(s, 2))), RNG.normal(size=(3, 4))
    )


def test_windows_stft_and_its_inverse():
    n = np.arange(8)
    with tf.Graph().as_default():
        hann, hamm, hann_sym = _run(
            [
                tf.signal.hann_window(8),
                tf.signal.hamming_window(8, dtype=tf.float64),
                tf.signal.hann_window(8, periodic=False),
            ]
        )
    np.testing.assert_allclose(hann, 0.5 - 0.5 * np.cos(2 * np.pi * n / 8), atol=1e-6)
    np.testing.assert_allclose(hamm, 0.54 - 0.46 * np.cos(2 * np.pi * n / 8), atol=1e-12)
    np.testing.assert_allclose(hann_sym, np.hanning(8), atol=1e-6)
    x = RNG.normal(size=(2, 64))
    with tf.Graph().as_default():
        s = tf.signal.stft(x, 16, 4)
        back = tf.signal.inverse_stft(s, 16, 4, window_fn=tf.signal.inverse_stft_window_fn(4))
        got, rec = _run([s, back])
    win = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(16) / 16)
    want = np.stack([np.fft.rfft(x[:, 4 * i : 4 * i + 16] * win) for i in range(13)], 1)
    np.testing.assert_allclose(got, want, atol=1e-10)
    np.testing.assert_allclose(rec[:, 12:-12], x[:, 12:-12], atol=1e-10)  # fully overlapped


def test_mel_matrix_mfccs_and_dcts():
    with tf.Graph().as_default():
        mel = _run(tf.signal.linear_to_mel_weight_matrix(10, 65, 16000, 100.0, 6000.0))
    assert mel.shape == (65, 10) and mel.dtype == np.float32
    assert np.all(mel[0] == 0) and np.all(mel >= 0) and np.all(mel <= 1)
    assert np.all(mel.max(0) > 0.5)  # every band has a bin near its centre
    with pytest.raises(ValueError, match="Nyquist"):
        tf.signal.linear_to_mel_weight_matrix(10, 65, 8000, 100.0, 6000.0)
    x = RNG.normal(size=(3, 7))
    k, j = np.arange(7)[:, None], np.arange(7)[None, :]
    d2 = 2 * np.cos(np.pi * k * (2 * j + 1) / 14)  # scipy's DCT-II
    d3 = np.where(j == 0, 1.0, 2 * np.cos(np.pi * j * (2 * k + 1) / 14))
    d4 = 2 * np.cos(np.pi * (2 * j + 1) * (2 * k + 1) / 28)
    d1 = np.where(j == 0, 1.0, np.where(j == 6, (-1.0) ** k, 2 * np.cos(np.pi * k * j / 6)))
    with tf.Graph().as_default():
        got = _run(
            [
                tf.signal.dct(x), tf.signal.dct(x, 3), tf.signal.dct(x, 4), tf.signal.dct(x, 1),
                tf.signal.idct(tf.signal.dct(x, norm="ortho"), norm="ortho"),
                tf.signal.mfccs_from_log_mel_spectrograms(x), tf.spectral.dct(x, n=4),
            ]
        )  # fmt: skip
    for g, m in zip(got[:4], (d2, d3, d4, d1)):
        np.testing.assert_allclose(g, x @ m.T, atol=1e-10)
    np.testing.assert_allclose(got[4], x, atol=1e-10)
    np.testing.assert_allclose(got[5], x @ d2.T / np.sqrt(14), atol=1e-10)
    k4, j4 = np.arange(4)[:, None], np.arange(4)[None, :]
    np.testing.assert_allclose(got[6], x[:, :4] @ (2 * np.cos(np.pi * k4 * (2 * j4 + 1) / 8)).T)
    with pytest.raises(ValueError, match="type-I"):
        tf.signal.dct(x, 1, norm="ortho")
    _check_grad(lambda v: tf.reduce_sum(tf.signal.dct(v, norm="ortho") ** 2 * np.arange(7)), x)


# ---- the simulator ----------------------------------------------------------------------------


def test_shape_only_simulation_prices_complex_ops_and_ffts():
    from hetbed.devices.costmodel import DevicePerf
    from hetbed.simulator import Cluster, SimSession, sim_value

    perf = DevicePerf(
        "toy", {"float32": 1e9, "float64": 5e8}, memory_bandwidth=1e15, memory_bytes=1e9,
        launch_overhead_s=0.0,
    )  # fmt: skip
    c = Cluster()
    c.add_task("worker", 0, cpu=perf, gpu=(perf, 1), nic=(1e9, 50e-6))
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [8, 4096])
        with tf.device("/job:worker/task:0/device:gpu:0"):
            z = tf.complex(x, x)
            zz = z * z
            xx = x * x
            st = tf.signal.stft(x, 256, 128)
            loss = (
                tf.reduce_sum(tf.abs(zz))
                + tf.reduce_sum(tf.real(tf.fft(zz)))
                + tf.reduce_sum(tf.signal.mfccs_from_log_mel_spectrograms(tf.log(tf.abs(st) + 1.0)))
                + tf.reduce_sum(xx)
            )
            (g,) = tf.gradients(loss, [x])
        s = SimSession(c)
        out = s.run([g, st], {x: sim_value([8, 4096])})
    assert out[0].shape == (8, 4096) and out[1].shape == (8, 31, 129)
    ops = s.last_record.ops
    by = {(r.type, r.op): r.duration_s for r in ops.itertuples()}
    cmul = by[("Mul", zz.op.name)]
    rmul = by[("Mul", xx.op.name)]
    assert cmul == pytest.approx(6 * rmul, rel=0.05)  # four products and two sums
    fft = by[("FFT", [o for o in ops.op if o.endswith("FFT")][0])]
    assert fft == pytest.approx(5 * 8 * 4096 * 12 / 1e9, rel=0.05)
