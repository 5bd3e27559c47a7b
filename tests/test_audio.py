"""Audio ops (runtime/ops/audio.py): WAV files, audio_spectrogram and mfcc against numpy written
from their definitions and, with TensorFlow installed, against TF 2.21's kernels."""

from __future__ import annotations

import numpy as np
import pytest

import hetbed.compat.v1 as tf
from hetbed.compat.v1.contrib.framework.python.ops import audio_ops

X = np.array(
    [[0.0, 0.5], [-1.0, 1.0], [0.25, -0.3], [2.0, -2.0], [1 / 32768, 0.49999 / 32767]], np.float32
)
# what TF 2.21's encode_wav writes for X at 16 kHz: the canonical 44-byte header, then the PCM
TF_HEADER = (
    "524946463800000057415645666d74201000000001000200803e000000fa0000040010006461746114000000"
)
TF_PCM = [0, 16384, -32768, 32767, 8192, -9830, 32767, -32768, 1, 1]


def _run(x):
    with tf.Session() as s:
        return s.run(x)


def test_wav_files_as_tensorflow_writes_and_reads_them():
    with tf.Graph().as_default():
        wav = _run(tf.audio.encode_wav(X, 16000))
        assert wav[:44].hex() == TF_HEADER
        assert np.frombuffer(wav[44:], "<i2").tolist() == TF_PCM
        audio, rate = _run(tf.audio.decode_wav(wav))
        assert rate == 16000 and audio.dtype == np.float32
        np.testing.assert_array_equal(audio.ravel(), np.array(TF_PCM) / 32768.0)
        three, _ = _run(audio_ops.decode_wav(wav, desired_channels=3))
        np.testing.assert_array_equal(three[:, 2], three[:, 1])  # extra channels repeat the last
        one, _ = _run(audio_ops.decode_wav(wav, desired_channels=1, desired_samples=7))
        assert one.shape == (7, 1) and one[5:].tolist() == [[0.0], [0.0]]
        # a chunk before fmt and an odd-sized one are skipped
        body = wav[12:]
        extra = (
            wav[:4] + wav[4:8] + b"WAVE" + b"LIST" + (3).to_bytes(4, "little") + b"abc\x00" + body
        )
        again, _ = _run(tf.audio.decode_wav(extra))
        np.testing.assert_array_equal(again, audio)
        for bad, what in (
            (b"", "too short"),
            (b"RIFX" + wav[4:], "header mismatch"),
            (wav[:50], "too short"),
        ):
            with pytest.raises(tf.errors.InvalidArgumentError, match=what):
                _run(tf.audio.decode_wav(bad))
        eight_bit = bytearray(wav)
        eight_bit[34:36] = (8).to_bytes(2, "little")
        with pytest.raises(tf.errors.InvalidArgumentError, match="16-bit"):
            _run(tf.audio.decode_wav(bytes(eight_bit)))


def _spectrogram_np(x, ws, st, squared):
    fft = 1 << int(np.ceil(np.log2(ws)))
    win = [0.5 - 0.5 * np.cos(2 * np.pi * i / ws) for i in range(ws)]
    out = []
    for c in range(x.shape[1]):
        frames = []
        for f in range(0, x.shape[0] - ws + 1, st):
            z = np.fft.fft(np.concatenate([x[f : f + ws, c] * win, np.zeros(fft - ws)]))[
                : fft // 2 + 1
            ]
            frames.append(np.abs(z) ** 2 if squared else np.abs(z))
        out.append(frames)
    return np.array(out)


def _mfcc_np(spec, rate, upper, lower, bands, coeffs):
    """TF's filterbank walked bin by bin, as its kernel does."""

    def mel(f):
        return 1127.0 * np.log(1 + f / 700.0)

    n = spec.shape[-1]
    lo, hi = mel(lower), mel(upper)
    centers = [lo + (hi - lo) / (bands + 1) * (i + 1) for i in range(bands + 1)]
    hz = 0.5 * rate / (n - 1)
    start, end = int(1.5 + lower / hz), int(upper / hz)
    out = np.zeros(spec.shape[:-1] + (coeffs,))
    for idx in np.ndindex(spec.shape[:-1]):
        energy, channel = np.zeros(bands), 0
        for i in range(start, end + 1):
            m = mel(i * hz)
            while channel < bands and centers[channel] < m:
                channel += 1
            band = channel - 1
            w = (
                (centers[band + 1] - m) / (centers[band + 1] - centers[band])
                if band >= 0
                else (centers[0] - m) / (centers[0] - lo)
            )
            v = np.sqrt(spec[idx][i])
            if band >= 0:
                energy[band] += v * w
            if band + 1 < bands:
                energy[band + 1] += v - v * w
        logs = np.log(np.maximum(energy, 1e-12))
        for k in range(coeffs):
            out[idx][k] = sum(
                np.sqrt(2 / bands) * np.cos(np.pi / bands * k * (j + 0.5)) * logs[j]
                for j in range(bands)
            )
    return out


def test_spectrogram_and_mfcc_equal_their_definitions():
    rng = np.random.RandomState(0)
    x = (rng.randn(700, 2) * 0.3).astype(np.float32)
    t = np.arange(512) / 16000.0
    tone = np.sin(2 * np.pi * 1000.0 * t)[:, None].astype(np.float32)  # 1 kHz: bin 32 of 512
    with tf.Graph().as_default():
        for ws, st, sq in ((256, 128, True), (200, 90, False), (30, 7, True)):
            got = _run(audio_ops.audio_spectrogram(x, ws, st, magnitude_squared=sq))
            np.testing.assert_allclose(
                got, _spectrogram_np(x.astype(np.float64), ws, st, sq), rtol=2e-5, atol=1e-6
            )
        peak = _run(audio_ops.audio_spectrogram(tone, 512, 512, magnitude_squared=True))
        assert peak.shape == (1, 1, 257) and int(np.argmax(peak[0, 0])) == 32
        spec = _run(audio_ops.audio_spectrogram(x, 480, 110, magnitude_squared=True))
        for args in ((16000, 4000, 20, 40, 13), (8000, 3000, 300, 20, 10)):
            got = _run(audio_ops.mfcc(spec, args[0], *args[1:]))
            np.testing.assert_allclose(
                got, _mfcc_np(spec.astype(np.float64), *args), rtol=1e-4, atol=1e-4
            )
        with pytest.raises(tf.errors.InvalidArgumentError, match="lower_frequency_limit"):
            audio_ops.mfcc(spec, 16000, upper_frequency_limit=10, lower_frequency_limit=20)


def test_the_same_values_as_tensorflows_kernels():
    tf2 = pytest.importorskip("tensorflow")
    rng = np.random.RandomState(1)
    x = (rng.randn(1000, 2) * 0.3).astype(np.float32)
    with tf.Graph().as_default():
        wav = _run(tf.audio.encode_wav(x, 22050))
        assert wav == tf2.audio.encode_wav(x, 22050).numpy()
        for ws, st, sq in (
            (256, 128, True),
            (200, 100, False),
            (480, 160, True),
            (1000, 1, True),
            (30, 7, False),
        ):
            got = _run(audio_ops.audio_spectrogram(x, ws, st, magnitude_squared=sq))
            want = tf2.raw_ops.AudioSpectrogram(
                input=x, window_size=ws, stride=st, magnitude_squared=sq
            ).numpy()
            np.testing.assert_allclose(got, want, rtol=3e-7, atol=0)
        spec = tf2.raw_ops.AudioSpectrogram(
            input=x, window_size=480, stride=160, magnitude_squared=True
        ).numpy()
        for sr, up, lo, fb, dc in (
            (16000, 4000, 20, 40, 13),
            (16000, 7600, 80, 30, 20),
            (8000, 3000, 300, 20, 10),
        ):
            got = _run(audio_ops.mfcc(spec, sr, up, lo, fb, dc))
            want = tf2.raw_ops.Mfcc(spectrogram=spec, sample_rate=sr, upper_frequency_limit=up,
                                    lower_frequency_limit=lo, filterbank_channel_count=fb,
                                    dct_coefficient_count=dc).numpy()  # fmt: skip
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
