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


def _run_queue(fetch_fns, files):
    out = []
    with tf.Session() as s:
        s.run(tf.local_variables_initializer())
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(s, coord)
        try:
            for fn in fetch_fns:
                out.append(s.run(fn))
        finally:
            coord.request_stop()
            coord.join(threads)
    return out


def test_tfrecord_reader_keys_offsets_and_read_up_to_per_file(tmp_path):
    # im2txt's prefetch_input_data: tf.TFRecordReader().read(filename_queue). TF 2.21 gives
    # keys b"<file>:<byte offset of the record>" and a read_up_to that hands out at most the
    # rest of one file per call (here: 1 record, then 2, then 1).
    files = []
    for k in range(2):
        fn = str(tmp_path / f"d{k}.tfrecord")
        with tf.python_io.TFRecordWriter(fn) as w:
            for i in range(3):
                w.write(b"r%d-%d" % (k, i) * (i + 1))
        files.append(fn)
    with tf.Graph().as_default():
        q = tf.train.string_input_producer(files, shuffle=False, num_epochs=1)
        r = tf.TFRecordReader()
        key, val = r.read(q)
        ks, vs = r.read_up_to(q, 2)
        out = _run_queue([[key, val], [key, val], [ks, vs], [ks, vs], [ks, vs]], files)
    f0, f1 = (f.encode() for f in files)
    # offsets: a record of n bytes takes 16 + n
    assert out[0] == [f0 + b":0", b"r0-0"]
    assert out[1] == [f0 + b":20", b"r0-1r0-1"]
    assert [list(a) for a in out[2]] == [[f0 + b":44"], [b"r0-2" * 3]]
    assert [list(a) for a in out[3]] == [[f1 + b":0", f1 + b":20"], [b"r1-0", b"r1-1" * 2]]
    assert [list(a) for a in out[4]] == [[f1 + b":44"], [b"r1-2" * 3]]


def test_tfrecord_reader_corrupt_file_names_file_and_offset(tmp_path):
    fn = tmp_path / "bad.tfrecord"
    with tf.python_io.TFRecordWriter(str(fn)) as w:
        w.write(b"hello")
    data = bytearray(fn.read_bytes())
    data[14] ^= 0xFF  # a byte of the record's data
    fn.write_bytes(bytes(data))
    with tf.Graph().as_default():
        q = tf.train.string_input_producer([str(fn)], shuffle=False, num_epochs=1)
        _, val = tf.TFRecordReader().read(q)
        try:
            _run_queue([val], [str(fn)])
        except tf.errors.DataLossError as e:
            assert "bad.tfrecord" in str(e) and "offset 0" in str(e)
        else:
            raise AssertionError("a corrupted record read without error")


def test_summarize_activation_tags_and_fractions():
    # im2txt's image_embedding: tf.contrib.layers.summaries.summarize_activation(v) for each
    # end point. TF1: a histogram '<op>/activation', after Relu/Relu6/Softplus the fraction of
    # negative inputs '<op>/zeros', after Relu6 the fraction above 6 '<op>/sixes'.
    with tf.Graph().as_default():
        x = tf.constant([[-1.0, 2.0, 7.0, -3.0]])
        tf.contrib.layers.summaries.summarize_activation(tf.nn.relu6(x))
        tf.contrib.layers.summarize_activation(tf.nn.relu(x, name="r"))
        tf.contrib.layers.summarize_tensor(tf.constant(2.5), "c")
        with tf.Session() as s:
            out = _summary(s.run(tf.summary.merge_all()))
    vals = {v.tag: v for v in out.value}
    assert sorted(vals) == [
        "Relu6/activation",
        "Relu6/sixes",
        "Relu6/zeros",
        "c",
        "r/activation",
        "r/zeros",
    ]
    assert vals["Relu6/zeros"].simple_value == 0.5 and vals["Relu6/sixes"].simple_value == 0.25
    assert vals["r/zeros"].simple_value == 0.5 and vals["c"].simple_value == 2.5
    assert vals["Relu6/activation"].histo.num == 4 and vals["Relu6/activation"].histo.max == 6.0


def test_slim_learning_train_runs_to_number_of_steps(tmp_path):
    # im2txt's train.py: tf.contrib.slim.learning.train(train_op, train_dir,
    # number_of_steps=..., init_fn=..., saver=...). Loss (w-3)^2 from w=0 under SGD(0.1):
    # each step returns the loss before its update, 9 * 0.64^(k-1); the last is step 5's.
    slim = tf.contrib.slim
    called = []
    with tf.Graph().as_default():
        w = tf.Variable(0.0, name="w")
        loss = tf.square(w - 3.0)
        train_op = slim.learning.create_train_op(loss, tf.train.GradientDescentOptimizer(0.1))
        last = slim.learning.train(
            train_op,
            str(tmp_path),
            number_of_steps=5,
            init_fn=lambda sess: called.append(sess.run(w)),
            save_summaries_secs=0,
        )
    np.testing.assert_allclose(last, 9 * 0.64**4, rtol=1e-5)
    assert called == [0.0]
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-5")
    with tf.Graph().as_default():  # a second call resumes from the checkpoint: no init_fn
        w = tf.Variable(0.0, name="w")
        train_op = slim.learning.create_train_op(
            tf.square(w - 3.0), tf.train.GradientDescentOptimizer(0.1)
        )
        last = slim.learning.train(train_op, str(tmp_path), number_of_steps=7)
    np.testing.assert_allclose(last, 9 * 0.64**6, rtol=1e-5)


def test_set_verbosity_prints_info_lines_on_stderr(capsys):
    # im2txt's train.py sets tf.logging.set_verbosity(tf.logging.INFO) and expects slim's
    # 'global step N: loss = ...' lines; TF1's logger has its own stderr handler.
    import logging

    level = tf.logging.get_verbosity()
    root = logging.getLogger()
    saved, root.handlers = root.handlers, []  # (pytest's own; TF adds none beside a root one)
    try:
        tf.logging.set_verbosity(tf.logging.INFO)
        tf.logging.info("step %d", 3)
        tf.logging.debug("hidden")
        err = capsys.readouterr().err
    finally:
        root.handlers = saved
        tf.logging.set_verbosity(level)
        hb_logger = logging.getLogger("hetbed")
        for h in [h for h in hb_logger.handlers if type(h).__name__ == "_StderrHandler"]:
            hb_logger.removeHandler(h)
    assert "INFO:hetbed:step 3" in err and "hidden" not in err


def test_testcase_subclass_without_super_setup_has_a_session():
    # tensorflow-wavenet's tests override setUp without calling TestCase.setUp and use
    # self.test_session(); TF sets the cached session up in __init__.
    class T(tf.test.TestCase):
        def setUp(self):
            self.x = 2.0

        def runTest(self):
            with self.test_session() as s:
                self.assertAllClose(s.run(tf.constant(self.x) * 3), 6.0)

    result = T().run()
    assert result.wasSuccessful(), result.errors + result.failures


def test_update_of_an_update_output_chains_on_the_variable():
    # baselines' K-FAC: tf.assign_add(tf.assign(v, v * decay), (1 - decay) * new), also inside
    # a tf.cond branch. TF1's update ops output the variable's ref: the second update runs
    # after the first, on the same variable.
    with tf.Graph().as_default():
        v = tf.Variable(2.0)
        c = tf.assign_sub(tf.assign_add(tf.assign(v, v * 3.0), 1.0), 0.5)
        w = tf.Variable([1.0, 2.0])
        p = tf.placeholder(tf.bool)
        d = tf.cond(p, lambda: tf.assign_add(tf.assign(w, w * 0.5), [1.0, 1.0]), lambda: w + 0.0)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            assert s.run(c) == 6.5 and s.run(v) == 6.5
            np.testing.assert_allclose(s.run(d, {p: True}), [1.5, 2.0])
            np.testing.assert_allclose(s.run(d, {p: False}), [1.5, 2.0])
            np.testing.assert_allclose(s.run(w), [1.5, 2.0])


def test_enqueue_inside_a_cond_branch():
    # baselines' K-FAC enqueues its eigen decompositions inside a tf.cond branch: the queue's
    # handle enters the branch through a Switch, as TF1's ref does
    with tf.Graph().as_default():
        q = tf.FIFOQueue(3, [tf.float32], shapes=[()])
        p = tf.placeholder(tf.bool)
        e = tf.cond(p, lambda: tf.group(q.enqueue([1.5])), tf.no_op)
        with tf.Session() as s:
            for flag in (True, False, True):
                s.run(e, {p: flag})
            assert s.run(q.size()) == 2 and s.run(q.dequeue()) == 1.5


def test_optimizer_slots_made_in_a_cond_branch_initialize_outside_it():
    # baselines' K-FAC applies a MomentumOptimizer inside tf.cond(sgd_step > cold_iter, ...).
    # TF1 makes the slots under init_scope: their initializers do not wait on the branch's
    # predicate (which reads a variable not yet initialized when all initialize together).
    with tf.Graph().as_default():
        step = tf.Variable(0, name="step")
        w = tf.Variable([1.0, 2.0], name="w")

        def branch():
            opt = tf.train.MomentumOptimizer(0.1, 0.9)
            return opt.apply_gradients([(tf.ones([2]), w)])

        c = tf.cond(tf.greater(step, -1), branch, tf.no_op)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(c)
            s.run(c)  # momentum: 1, then 0.9 * 1 + 1
            np.testing.assert_allclose(s.run(w), [1.0 - 0.1 - 0.19, 2.0 - 0.1 - 0.19], rtol=1e-6)


def test_broadcast_gradient_is_reshape_of_sum_as_tf():
    # baselines' ACKTR (K-FAC) finds a bias's output gradient by walking TF's graph: the
    # bias's gradient op is Reshape(Sum(grad, axes), shape), the Sum's first input the gradient
    # of the add's output (the same tensor the weight's MatMul gradient takes).
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 4])
        w = tf.Variable(np.arange(12, dtype=np.float32).reshape(4, 3) / 10)
        b = tf.Variable(np.ones(3, np.float32))
        c = tf.Variable(np.ones((2, 1), np.float32))
        y = tf.matmul(x, w) + b
        loss = tf.reduce_sum(tf.square(y)) + tf.reduce_sum(c * tf.ones([2, 5]))
        gw, gb, gc = tf.gradients(loss, [w, b, c], name="gradientsSampled")
        assert gb.op.type == "Reshape" and gb.op.inputs[0].op.type == "Sum"
        g_out = gb.op.inputs[0].op.inputs[0]
        assert "gradientsSampled" in g_out.name and g_out is gw.op.inputs[1]
        xv = np.random.default_rng(1).normal(size=(5, 4)).astype(np.float32)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            vw, vb, vc = s.run([gw, gb, gc], {x: xv})
    yv = xv @ (np.arange(12, dtype=np.float32).reshape(4, 3) / 10) + 1
    np.testing.assert_allclose(vb, (2 * yv).sum(0), rtol=1e-5)
    np.testing.assert_allclose(vw, xv.T @ (2 * yv), rtol=1e-5)
    np.testing.assert_allclose(vc, np.full((2, 1), 5.0))
