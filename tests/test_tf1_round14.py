"""TF1 gaps found in the fourteenth round of unchanged public programs (ibab's
tensorflow-wavenet, LantaoYu's SeqGAN, openai/baselines' TF1 pieces, tensorflow/models'
tutorials). Values against numpy or closed forms; no TensorFlow needed."""

import struct

import numpy as np
from tensorboard.compat.proto import summary_pb2

import hetbed.compat.v1 as tf


def _summary(b):
    s = summary_pb2.Summary()
    s.ParseFromString(bytes(b))
    return s


def test_audio_summary_is_a_16bit_wav_per_clip():
    # tensorflow-wavenet's generate.py: tf.summary.audio('generated', decode, rate). TF 2.21
    # gives these bytes exactly (samples * 32768 rounded half away from zero and clamped, the
    # header's rate rounded: 16000.7 -> 16001; tags name/audio/i, or name/audio for one clip).
    halves = [0.5, -0.5, 1.5, -2.5, 40000.0, -40000.0]
    a = np.zeros((4, 6), np.float32)
    a[0] = np.array(halves, np.float32) / 32768
    a[1:] = np.linspace(-1, 1, 18, dtype=np.float32).reshape(3, 6)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32)
        tf.summary.audio("gen", x, 16000.7)
        tf.summary.audio("st", tf.reshape(x, [4, 3, 2]), tf.constant(8000.0), max_outputs=1)
        with tf.Session() as s:
            out = _summary(s.run(tf.summary.merge_all(), {x: a}))
    assert [v.tag for v in out.value] == ["gen/audio/0", "gen/audio/1", "gen/audio/2", "st/audio"]
    v0 = out.value[0].audio
    assert (v0.num_channels, v0.length_frames, v0.content_type) == (1, 6, "audio/wav")
    assert abs(v0.sample_rate - 16000.7) < 1e-3
    w = v0.encoded_audio_string
    riff, size, wave, fmt, n16, pcm, ch, rate, brate, align, bits, data, dsize = struct.unpack(
        "<4sI4s4sIHHIIHH4sI", w[:44]
    )
    assert (riff, wave, fmt, data) == (b"RIFF", b"WAVE", b"fmt ", b"data")
    assert (size, n16, pcm, ch, rate, brate, align, bits, dsize) == (
        48,
        16,
        1,
        1,
        16001,
        32002,
        2,
        16,
        12,
    )
    assert np.frombuffer(w[44:], "<i2").tolist() == [1, -1, 2, -3, 32767, -32768]
    st = out.value[3].audio
    assert (st.num_channels, st.length_frames) == (2, 3)
    ref = np.clip(np.round(a[0] * 32768), -32768, 32767)  # no exact halves here but the first
    got = np.frombuffer(st.encoded_audio_string[44:], "<i2")
    assert got.tolist()[4:] == ref.tolist()[4:]


def test_tensor_private_fields_as_tf1():
    # openai/baselines' policies.py: `isinstance(inpt, tf.Tensor) and inpt._op.type ==
    # 'Placeholder'` (TF1's Tensor keeps its op in _op; also _value_index and _dtype)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 2], name="x")
        a, b = tf.split(tf.zeros([4, 2]), 2)
        assert x._op is x.op and x._op.type == "Placeholder"
        assert (b._value_index, b._dtype) == (1, tf.float32)
        assert b._op.type == a.op.type
