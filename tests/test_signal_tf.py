"""Complex math, the FFTs and tf.signal against TensorFlow 2.21 (graph mode): the same graph
built with hetbed and with TF, every value and gradient compared. Skipped without TF."""

from __future__ import annotations

import os

import numpy as np
import pytest

import hetbed.compat.v1 as hb

tf = pytest.importorskip("tensorflow")
T = tf.compat.v1


def _c(rng, *shape):
    return (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(np.complex64)


def _compare(build, rtol=1e-4):
    """build(t, math, signal, rng) -> ({key: tensor}, feeds); every key TF computes (TF may
    refuse a gradient: build skips the keys in ``skip``) must equal hetbed's."""
    with tf.Graph().as_default():
        fetches, feeds = build(T, tf.math, tf.signal, np.random.default_rng(5))
        with T.Session() as s:
            want = s.run(fetches, feeds)
    with hb.Graph().as_default():
        fetches, feeds = build(hb, hb.math, hb.signal, np.random.default_rng(5))
        with hb.Session() as s:
            got = s.run(fetches, feeds)
    assert sorted(got) == sorted(want)
    for k, w in want.items():
        g = got[k]
        assert g.dtype == w.dtype and g.shape == w.shape, (k, g.dtype, w.dtype, g.shape, w.shape)
        scale = max(1.0, float(np.max(np.abs(w)))) if w.size else 1.0
        np.testing.assert_allclose(g, w, rtol=0, atol=rtol * scale, err_msg=k)


def test_complex_math_and_gradients_as_tensorflow():
    def build(t, m, s, rng):
        xv, wv = _c(rng, 3, 4), _c(rng, 4, 2)
        rv = rng.normal(size=(3, 4)).astype(np.float32)
        x = t.placeholder(t.complex64, [3, 4])
        w = t.placeholder(t.complex64, [4, 2])
        r = t.placeholder(t.float32, [3, 4])
        z = t.complex(r, r * r)
        y = t.matmul(x * z + m.exp(x) / (z + 2.0) - t.sqrt(x) + t.square(x) * m.log(x), w)
        loss = (
            t.reduce_sum(t.abs(y))
            + t.reduce_sum(m.real(y) * m.imag(y))
            + t.reduce_mean(m.angle(y))
            + t.reduce_sum(t.cast(m.conj(x) * m.reciprocal(x + 1.0), t.float32))
            + t.reduce_sum(m.abs(m.rsqrt(z + 3.0)))
            + t.reduce_sum(t.abs(t.matmul(x, x, adjoint_b=True)))
            + t.reduce_sum(m.real(t.pow(x, 2.0 + 1j) * t.reduce_prod(x, 0)))
            + t.reduce_sum(t.abs(t.tanh(x) + t.sigmoid(x * 0.5) + t.sin(x) * t.cos(x)))
            + t.reduce_sum(m.imag(m.expm1(x * 0.3) + t.cumsum(x, 1, reverse=True)))
            + t.reduce_sum(t.abs(t.einsum("ij,kj->ik", x, x * (2 - 1j))))
        )
        gx, gw, gr = t.gradients(loss, [x, w, r])
        (gy,) = t.gradients(y, [x], grad_ys=[t.ones_like(y) * (1 + 2j)])
        out = {"y": y, "loss": loss, "gx": gx, "gw": gw, "gr": gr, "gy": gy}
        return out, {x: xv, w: wv, r: rv}

    _compare(build)


# TF 2.21 has no gradient for the 3-D real transforms and refuses rfft's where fft_length cuts
NO_TF_GRAD = {"rfft1[6]", "rfft2[5, 7]", "rfft3[4, 6, 8]", "irfft1[4]", "irfft3[4, 6, 8]"}


def test_ffts_and_their_gradients_as_tensorflow():
    def build(t, m, s, rng):
        cv = _c(rng, 2, 4, 6, 5)
        rv = rng.normal(size=(2, 4, 6, 8)).astype(np.float32)
        wc = _c(rng, 2, 4, 6, 5)
        c = t.placeholder(t.complex64, cv.shape)
        r = t.placeholder(t.float32, rv.shape)
        out = {}
        for f in (s.fft, s.ifft, s.fft2d, s.ifft2d, s.fft3d, s.ifft3d):
            k = f.__name__.strip("_")
            y = out[k] = f(c)
            loss = t.reduce_sum(m.real(y * wc)) + t.reduce_sum(t.abs(y))
            out[k + "g"] = t.gradients(loss, c)[0]
        real = ((s.rfft, [8]), (s.rfft2d, [6, 8]), (s.rfft, [6]), (s.rfft, [11]))
        real += ((s.rfft2d, [5, 7]), (s.rfft3d, [4, 6, 8]))
        for f, n in real:
            y = f(r, n)
            w = t.constant(_c(rng, *y.shape.as_list()))
            k = f"rfft{len(n)}{n}"
            out[k] = y
            if k not in NO_TF_GRAD:
                out[k + "g"] = t.gradients(t.reduce_sum(m.real(y * w)), r)[0]
        inverse = ((s.irfft, [8]), (s.irfft, [9]), (s.irfft2d, [6, 8]), (s.irfft2d, [6, 9]))
        inverse += ((s.irfft, [4]), (s.irfft3d, [4, 6, 8]))
        for f, n in inverse:
            y = f(c, n)
            w = t.constant(rng.normal(size=y.shape.as_list()).astype(np.float32))
            k = f"irfft{len(n)}{n}"
            out[k] = y
            if k not in NO_TF_GRAD:
                out[k + "g"] = t.gradients(t.reduce_sum(y * w), c)[0]
        return out, {c: cv, r: rv}

    _compare(build)


def test_signal_functions_and_their_gradients_as_tensorflow():
    def build(t, m, s, rng):
        sv = rng.normal(size=(2, 3, 50)).astype(np.float32)
        lm = rng.normal(size=(2, 7, 13)).astype(np.float32)
        x = t.placeholder(t.float32, sv.shape)
        lg = t.placeholder(t.float32, lm.shape)
        wr = np.random.default_rng(9)
        o = {}

        def grad(k, y, v):
            w = t.constant(wr.normal(size=y.shape.as_list()).astype(np.float32))
            o[k] = y
            o[k + "g"] = t.gradients(t.reduce_sum(y * w), v)[0]

        f1 = s.frame(x, 8, 3)
        grad("frame", f1, x)
        grad("frame_pad", s.frame(x, 8, 3, pad_end=True, pad_value=2.0), x)
        o["frame_ax1"] = s.frame(x, 4, 5, axis=1, pad_end=True)
        o["frame_short"] = s.frame(x, 60, 5)
        grad("ola", s.overlap_and_add(f1, 3), x)
        o["ola2"] = s.overlap_and_add(t.reshape(x, [2, 5, 10, 3]), 2)
        for n in (1, 2, 7, 8):
            for p in (True, False):
                o[f"hann{n}{p}"] = s.hann_window(n, periodic=p)
                o[f"hamm{n}{p}"] = s.hamming_window(n, periodic=p, dtype=t.float64)
        st = o["stft"] = s.stft(x, 16, 4)
        o["stftg"] = t.gradients(t.reduce_sum(t.abs(st)), x)[0]
        st2 = o["stft2"] = s.stft(x, 12, 5, fft_length=20, pad_end=True, window_fn=s.hamming_window)
        grad("istft", s.inverse_stft(st, 16, 4, window_fn=s.inverse_stft_window_fn(4)), x)
        o["istft2"] = s.inverse_stft(st2, 12, 5, fft_length=20)
        o["istft3"] = s.inverse_stft(st, 20, 4, fft_length=16)
        o["isw"] = s.inverse_stft_window_fn(3)(10, t.float32)
        o["mel"] = s.linear_to_mel_weight_matrix()
        o["mel2"] = s.linear_to_mel_weight_matrix(10, 33, 16000, 20.0, 7000.0, dtype=t.float64)
        grad("mfcc", s.mfccs_from_log_mel_spectrograms(lg), lg)
        for typ in (1, 2, 3, 4):
            for norm in (None, "ortho") if typ != 1 else (None,):
                grad(f"dct{typ}{norm}", s.dct(lg, type=typ, norm=norm), lg)
                o[f"idct{typ}{norm}"] = s.idct(lg, type=typ, norm=norm)
                o[f"dct{typ}{norm}n9"] = s.dct(lg, type=typ, n=9, norm=norm)
                if typ != 1:
                    o[f"dct{typ}{norm}n16"] = s.dct(lg, type=typ, n=16, norm=norm)
        return o, {x: sv, lg: lm}

    _compare(build)


def test_complex_variables_of_a_tensorflow_checkpoint_restore(tmp_path):
    c64 = np.array([1 + 2j, -3.5j], np.complex64)
    c128 = np.array([[0.25 - 1j]])
    with tf.Graph().as_default():
        T.Variable(c64, name="c64")
        T.Variable(c128, name="c128")
        with T.Session() as s:
            s.run(T.global_variables_initializer())
            path = T.train.Saver().save(s, os.path.join(str(tmp_path), "ck"))
    with hb.Graph().as_default():
        a = hb.Variable(np.zeros(2, np.complex64), name="c64")
        b = hb.Variable(np.zeros((1, 1), np.complex128), name="c128")
        with hb.Session() as s:
            hb.train.Saver().restore(s, path)
            got_a, got_b = s.run([a, b])
    assert got_a.dtype == np.complex64 and got_a.tolist() == c64.tolist()
    assert got_b.dtype == np.complex128 and got_b.tolist() == c128.tolist()
