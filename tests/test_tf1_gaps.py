"""TF1 API gaps that stopped tutorial programs: dtype names, dropout shapes, unknown-rank logits,
tf.gfile, arg_max/arg_min, tf.compat text helpers, numpy global steps, nce_loss and transposed
convolutions (values against numpy, gradients against finite differences)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from opcheck import check_gradient

import hetbed.compat.v1 as tf


@pytest.fixture(autouse=True)
def _fresh_graph():
    with tf.Graph().as_default():
        yield


# ---- dtype names --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, want",
    [
        ("float", tf.float32),
        ("double", tf.float64),
        ("half", tf.float16),
        ("int", tf.int32),
        ("float32", tf.float32),
        ("int64", tf.int64),
        ("bool", tf.bool),
    ],
)
def test_tf_dtype_names(name, want):
    assert tf.as_dtype(name) is want
    assert tf.placeholder(name, [2]).dtype is want
    assert tf.cast(tf.constant([1, 2]), name).dtype is want


def test_float_placeholder_mixes_with_float32_variables():
    # the tutorial idiom that failed with "Mul: inputs must have the same dtype"
    x = tf.placeholder("float", [None, 3])
    w = tf.Variable(tf.ones([3, 2]))
    y = tf.matmul(x, w) * tf.cast(tf.constant(2), "float")
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        np.testing.assert_allclose(s.run(y, {x: np.ones((1, 3))}), [[6.0, 6.0]])


@pytest.mark.parametrize("bad", ["bfloat16", "qint8", "floaty"])
def test_unsupported_dtype_names_are_named(bad):
    with pytest.raises(TypeError, match=bad):
        tf.as_dtype(bad)


# ---- dropout and unknown-rank logits --------------------------------------------------------


def test_dropout_with_placeholder_keep_prob_keeps_static_shape():
    x = tf.placeholder(tf.float32, [None, 10])
    keep = tf.placeholder(tf.float32)  # no shape, as in the tutorials
    d = tf.nn.dropout(x, keep)
    assert d.shape.as_list() == [None, 10]
    logits = tf.layers.dense(d, 4)  # needs the known last dimension
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        v = s.run(d, {x: np.ones((3, 10), np.float32), keep: 0.5})
    assert set(np.unique(v)) <= {0.0, 2.0}
    assert logits.shape.as_list() == [None, 4]


def test_dropout_rejects_non_scalar_keep_prob():
    with pytest.raises(ValueError, match="scalar"):
        tf.nn.dropout(tf.ones([2, 3]), tf.placeholder(tf.float32, [3]))


def test_softmax_cross_entropy_accepts_unknown_rank_logits():
    logits = tf.placeholder(tf.float32)
    labels = tf.placeholder(tf.float32)
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    (g,) = tf.gradients(loss, [logits])
    rng = np.random.default_rng(1)
    lv = rng.standard_normal((4, 5)).astype(np.float32)
    yv = np.eye(5, dtype=np.float32)[[0, 3, 2, 4]]
    with tf.Session() as s:
        got, grad = s.run([loss, g], {logits: lv, labels: yv})
    p = np.exp(lv - lv.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    np.testing.assert_allclose(got, -np.mean(np.log((p * yv).sum(1))), rtol=1e-5)
    np.testing.assert_allclose(grad, (p - yv) / 4, atol=1e-6)


def test_unknown_rank_logits_with_axis_from_the_start_is_a_clear_error():
    with pytest.raises(tf.errors.InvalidArgumentError, match="unknown rank"):
        tf.nn.softmax_cross_entropy_with_logits_v2(
            labels=tf.placeholder(tf.float32), logits=tf.placeholder(tf.float32), axis=1
        )


# ---- tf.gfile, arg_max/arg_min, tf.compat ---------------------------------------------------


def test_gfile_round_trip(tmp_path):
    d = str(tmp_path / "a" / "b")
    tf.gfile.MakeDirs(d)
    tf.gfile.MakeDirs(d)  # exists: nothing happens
    assert tf.gfile.IsDirectory(d) and tf.gfile.Exists(d)
    p = os.path.join(d, "x.txt")
    with tf.gfile.GFile(p, "w") as f:
        f.write("one\ntwo\n")
    with tf.gfile.GFile(p, "r") as f:
        assert f.read() == "one\ntwo\n"
    with tf.gfile.Open(p, "rb") as f:
        assert f.read() == b"one\ntwo\n"
    with tf.gfile.GFile(p) as f:
        assert list(f) == ["one\n", "two\n"]
    assert tf.gfile.Stat(p).length == 8
    assert tf.gfile.Glob(os.path.join(d, "*.txt")) == [p]
    assert tf.gfile.ListDirectory(d) == ["x.txt"]
    tf.gfile.Copy(p, p + ".bak")
    with pytest.raises(tf.errors.AlreadyExistsError, match="overwrite"):
        tf.gfile.Copy(p, p + ".bak")
    tf.gfile.Rename(p + ".bak", p, overwrite=True)
    walked = list(tf.gfile.Walk(str(tmp_path)))
    assert walked[0][0] == str(tmp_path) and walked[-1][2] == ["x.txt"]
    tf.gfile.Remove(p)
    assert not tf.gfile.Exists(p)
    with pytest.raises(tf.errors.NotFoundError, match="x.txt"):
        tf.gfile.GFile(p, "r")
    with pytest.raises(tf.errors.NotFoundError):
        tf.gfile.Remove(p)
    with pytest.raises(tf.errors.AlreadyExistsError):
        tf.gfile.MkDir(d)
    tf.gfile.DeleteRecursively(str(tmp_path / "a"))
    assert not tf.gfile.Exists(d)
    assert tf.io.gfile is tf.gfile


def test_arg_max_arg_min():
    v = np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 9.0]], np.float32)
    x = tf.constant(v)
    with tf.Session() as s:
        a, b, c = s.run([tf.arg_max(x, 1), tf.arg_min(x, 0), tf.arg_max(x, np.int64(1))])
    np.testing.assert_array_equal(a, v.argmax(1))
    np.testing.assert_array_equal(b, v.argmin(0))
    np.testing.assert_array_equal(c, v.argmax(1))
    assert a.dtype == np.int64


def test_compat_text_helpers():
    assert tf.compat.as_str(b"caf\xc3\xa9") == "café"
    assert tf.compat.as_text("x") == "x"
    assert tf.compat.as_bytes("café") == b"caf\xc3\xa9"
    assert tf.compat.as_str_any(3) == "3"
    with pytest.raises(TypeError, match="string"):
        tf.compat.as_bytes(3)


@pytest.mark.parametrize("kind", ["numpy_int", "fetched_array", "python_int"])
def test_saver_save_takes_numeric_global_steps(tmp_path, kind):
    step = tf.train.get_or_create_global_step()
    inc = tf.assign_add(step, 420)
    v = tf.Variable(3.0, name="v")
    saver = tf.train.Saver()
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        s.run(inc)
        fetched = s.run(step)  # a 0-d numpy array, as in TF
        gs = {"numpy_int": np.int64(420), "fetched_array": fetched, "python_int": 420}[kind]
        path = saver.save(s, str(tmp_path / "model"), global_step=gs)
        assert path.endswith("model-420")
        s.run(tf.assign(v, 5.0))
        saver.restore(s, path)
        assert s.run(v) == 3.0
        with pytest.raises(TypeError, match="global_step"):
            saver.save(s, str(tmp_path / "model"), global_step=4.5)


# ---- nce_loss -------------------------------------------------------------------------------


def test_nce_loss_matches_numpy():
    rng = np.random.default_rng(3)
    n, dim, classes, k = 4, 5, 20, 6
    w = rng.standard_normal((classes, dim))
    b = rng.standard_normal(classes)
    x = rng.standard_normal((n, dim))
    labels = rng.integers(0, classes, (n, 1))
    sampled = np.array([1, 4, 7, 9, 12, 17])
    true_exp = rng.uniform(0.1, 0.9, (n, 1))
    samp_exp = rng.uniform(0.1, 0.9, k)
    sv = (tf.constant(sampled, tf.int64), tf.constant(true_exp), tf.constant(samp_exp))
    loss = tf.nn.nce_loss(
        tf.constant(w),
        tf.constant(b),
        tf.constant(labels),
        tf.constant(x),
        k,
        classes,
        sampled_values=sv,
    )
    with tf.Session() as s:
        got = s.run(loss)
    true_logit = (x * w[labels[:, 0]]).sum(1, keepdims=True) + b[labels] - np.log(true_exp)
    samp_logit = x @ w[sampled].T + b[sampled] - np.log(samp_exp)

    def xent(z, t):  # sigmoid cross entropy, stable
        return np.maximum(z, 0) - z * t + np.log1p(np.exp(-np.abs(z)))

    want = xent(true_logit, 1.0).sum(1) + xent(samp_logit, 0.0).sum(1)
    assert got.shape == (n,)
    np.testing.assert_allclose(got, want, rtol=1e-10)


def test_nce_loss_trains_embeddings():
    # word2vec's shape: the loss falls when its gradient (sparse rows) is applied
    rng = np.random.default_rng(0)
    vocab, dim = 50, 8
    emb = tf.Variable(tf.random_uniform([vocab, dim], -1.0, 1.0, seed=1))
    nce_w = tf.Variable(tf.truncated_normal([vocab, dim], stddev=0.3, seed=2))
    nce_b = tf.Variable(tf.zeros([vocab]))
    inputs = tf.placeholder(tf.int32, [16])
    labels = tf.placeholder(tf.int32, [16, 1])
    embed = tf.nn.embedding_lookup(emb, inputs)
    loss = tf.reduce_mean(tf.nn.nce_loss(nce_w, nce_b, labels, embed, 5, vocab, seed=7))
    train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    xs = rng.integers(0, vocab, 16)
    feed = {inputs: xs, labels: ((xs + 1) % vocab)[:, None]}
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        first = np.mean([s.run(loss, feed) for _ in range(5)])
        for _ in range(100):
            s.run(train, feed)
        last = np.mean([s.run(loss, feed) for _ in range(5)])
    assert last < 0.5 * first


# ---- transposed convolution -----------------------------------------------------------------


@pytest.mark.parametrize("padding, strides", [("SAME", 2), ("VALID", 2), ("SAME", 1)])
def test_conv2d_transpose_is_the_adjoint_of_conv2d(padding, strides):
    rng = np.random.default_rng(4)
    f = rng.standard_normal((3, 3, 2, 3))
    y = rng.standard_normal((2, 9, 7, 2))  # the transpose's output
    conv = tf.nn.conv2d(tf.constant(y), tf.constant(f), [1, strides, strides, 1], padding)
    x = rng.standard_normal(conv.shape.as_list())
    t = tf.nn.conv2d_transpose(
        tf.constant(x), tf.constant(f), y.shape, [1, strides, strides, 1], padding
    )
    assert t.shape.as_list() == list(y.shape)
    with tf.Session() as s:
        cv, tv = s.run([conv, t])
    # <conv(y), x> == <y, conv_transpose(x)>
    np.testing.assert_allclose(np.sum(cv * x), np.sum(y * tv), rtol=1e-10)


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_conv2d_transpose_gradients(padding):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 4, 3))
    f = rng.standard_normal((3, 2, 2, 3))
    # SAME: ceil(out / 2) == in; VALID: out == (in - 1) * 2 + kernel
    out = (2, 6, 7, 2) if padding == "SAME" else (2, (3 - 1) * 2 + 3, (4 - 1) * 2 + 2, 2)

    def build(xt, ft):
        return tf.nn.conv2d_transpose(xt, ft, out, [1, 2, 2, 1], padding)

    check_gradient(build, [x, f])


def test_conv2d_backprop_filter_gradient():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 5, 5, 2))
    dy = rng.standard_normal((2, 3, 3, 3))

    def build(xt, dyt):
        return tf.nn.conv2d_backprop_filter(xt, [3, 3, 2, 3], dyt, [1, 2, 2, 1], "SAME")

    check_gradient(build, [x, dy])


def test_conv2d_transpose_with_dynamic_batch():
    x = tf.placeholder(tf.float32, [None, 4, 4, 3])
    f = tf.constant(np.ones((2, 2, 5, 3), np.float32))
    out_shape = tf.stack([tf.shape(x)[0], 8, 8, 5])
    y = tf.nn.conv2d_transpose(x, f, out_shape, [1, 2, 2, 1], "SAME")
    with tf.Session() as s:
        v = s.run(y, {x: np.ones((3, 4, 4, 3), np.float32)})
    # a 2x2 kernel with stride 2 tiles the output exactly: each cell gets one input's 3 channels
    np.testing.assert_allclose(v, np.full((3, 8, 8, 5), 3.0))


def test_conv2d_transpose_rejects_mismatched_channels():
    with pytest.raises(tf.errors.InvalidArgumentError, match="channels"):
        tf.nn.conv2d_transpose(tf.ones([1, 4, 4, 3]), tf.ones([2, 2, 5, 4]), [1, 8, 8, 5], 2)


@pytest.mark.parametrize("padding, side", [("same", 8), ("valid", 9)])
def test_layers_conv2d_transpose(padding, side):
    x = tf.placeholder(tf.float32, [None, 4, 4, 3])
    y = tf.layers.conv2d_transpose(x, 6, 3, strides=2, padding=padding, name="up")
    assert y.shape.as_list() == [None, side, side, 6]
    kernel = [v for v in tf.trainable_variables() if v.name.startswith("up/kernel")][0]
    assert kernel.shape.as_list() == [3, 3, 6, 3]
    loss = tf.reduce_mean(tf.square(y))
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    feed = {x: np.random.default_rng(0).standard_normal((2, 4, 4, 3)).astype(np.float32)}
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        before = s.run(loss, feed)
        for _ in range(5):
            s.run(train, feed)
        assert s.run(loss, feed) < before


def test_convert_to_tensor_densifies_indexed_slices():
    params = tf.Variable(np.arange(12.0).reshape(4, 3))
    rows = tf.gather(params, [2, 0, 2])
    (g,) = tf.gradients(tf.reduce_sum(rows), [params])
    assert isinstance(g, tf.IndexedSlices)
    dense = tf.convert_to_tensor(g)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(s.run(dense), [[1, 1, 1], [0, 0, 0], [2, 2, 2], [0, 0, 0]])


def test_numpy_arrays_on_the_left_of_tensor_operators_and_structured_feeds():
    """What MorvanZhou's tutorials needed: ``y_numpy - tensor`` is one Sub op (numpy defers to
    the tensor, as to TF's), and an LSTMStateTuple of tensors fed with a state of the same
    structure (the RNN regression idiom of carrying the final state into the next run)."""
    import hetbed.compat.v1 as tf

    with tf.Graph().as_default():
        a = tf.placeholder(tf.float32, [3])
        y = np.array([1.0, 2.0, 4.0], np.float32)
        d = y - a
        assert isinstance(d, tf.Tensor) and d.op.type == "Sub"
        mse = tf.reduce_mean(tf.square(y - a))
        cell = tf.nn.rnn_cell.LSTMCell(4)
        x = tf.placeholder(tf.float32, [1, 3, 2])
        init = cell.zero_state(1, tf.float32)
        out, state = tf.nn.dynamic_rnn(cell, x, initial_state=init)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            av = np.array([0.5, 2.0, 1.0], np.float32)
            assert s.run(mse, {a: av}) == pytest.approx(np.mean((y - av) ** 2))
            xv = np.ones((1, 3, 2), np.float32)
            s1 = s.run(state, {x: xv})
            o2 = s.run(out, {x: xv, init: s1})  # the second run starts from the first's state
            o_zero = s.run(out, {x: xv})
            fed_zero = s.run(
                out, {x: xv, init: (np.zeros((1, 4), np.float32), np.zeros((1, 4), np.float32))}
            )
            np.testing.assert_allclose(fed_zero, o_zero, rtol=1e-6)
            assert np.abs(o2 - o_zero).max() > 1e-3
            with pytest.raises(TypeError, match="same structure"):
                s.run(out, {x: xv, init: s1.c})


def test_where_v1_picks_rows_and_version_names():
    """What the tensorflow-without-a-phd tutorials needed: ``tf.__version__`` (the TF1 API
    followed), and TF1's ``tf.where`` with a condition of rank 1 picking whole rows of higher-rank
    x and y (``where_v2`` broadcasts instead); values and gradient against numpy."""
    import hetbed.compat.v1 as tf

    assert tf.__version__ == tf.VERSION == tf.version.VERSION and tf.__version__.startswith("1.")
    rng = np.random.default_rng(5)
    xv = rng.standard_normal((3, 2, 2)).astype(np.float32)
    yv = rng.standard_normal((3, 2, 2)).astype(np.float32)
    cv = np.array([True, False, True])
    with tf.Graph().as_default():
        c = tf.placeholder(tf.bool, [3])
        x = tf.placeholder(tf.float32, [3, 2, 2])
        y = tf.placeholder(tf.float32, [3, 2, 2])
        r = tf.where(c, x, y)
        gx, gy = tf.gradients(tf.reduce_sum(r * r), [x, y])
        v2 = tf.where_v2(tf.constant([True, False]), tf.ones([3, 2]), tf.zeros([3, 2]))
        last = tf.where(tf.constant([True, False]), x, y)  # no row count: it broadcasts
        with tf.Session() as s:
            got, gxv, gyv, v2v, lastv = s.run([r, gx, gy, v2, last], {c: cv, x: xv, y: yv})
    np.testing.assert_array_equal(lastv, np.where([True, False], xv, yv))
    want = np.where(cv[:, None, None], xv, yv)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(gxv, np.where(cv[:, None, None], 2 * xv, 0), rtol=1e-6)
    np.testing.assert_allclose(gyv, np.where(cv[:, None, None], 0, 2 * yv), rtol=1e-6)
    np.testing.assert_array_equal(v2v, [[1, 0]] * 3)


def test_shape_dimensions_have_value_and_summary_names_are_cleaned():
    """What TensorFlow's CIFAR-10 tutorial needed: ``x.get_shape()[1].value`` (TF1's Dimension:
    here an int with ``value``; unknown dimensions are None) and summary names with characters an
    op name cannot have (``loss (raw)``), cleaned as TF1 cleans them."""
    import hetbed.compat.v1 as tf

    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 7])
        d = x.get_shape()[1]
        assert d.value == 7 and d == 7 and d * 2 == 14 and x.shape[0].value is None
        assert tf.compat.dimension_value(d) == 7 and tf.compat.dimension_value(None) is None
        assert isinstance(d, tf.Dimension) and [int(v) for v in x.shape[1:]] == [7]
        s1 = tf.summary.scalar("conv1/weight_loss (raw)", tf.reduce_sum(x))
        s2 = tf.summary.scalar("a:b", tf.constant(2.0))
        assert s1.op.name == "conv1/weight_loss__raw_" and s2.op.name == "a_b"
        merged = tf.summary.merge_all()
        with tf.Session() as s:
            blob = s.run(merged, {x: np.ones((2, 7), np.float32)})
    from tensorboard.compat.proto.summary_pb2 import Summary

    got = {v.tag: v.simple_value for v in Summary.FromString(blob).value}
    assert got == {"conv1/weight_loss__raw_": 14.0, "a_b": 2.0}


def test_ptb_producer_idioms_run_time_limits_and_slice_bounds():
    """What TensorFlow's PTB reader needs: ``range_input_producer`` of a limit known only at run
    time, and ``strided_slice`` with tensors among begin/end (its batches, against numpy, across
    an epoch boundary); the gradient of such a slice scatters back."""
    import hetbed.compat.v1 as tf

    raw = np.arange(50, dtype=np.int32)
    bs, ns = 3, 2
    with tf.Graph().as_default():
        data = tf.reshape(tf.constant(raw)[: bs * (50 // bs)], [bs, -1])
        epoch = (tf.shape(data)[1] - 1) // ns
        i = tf.train.range_input_producer(epoch, shuffle=False).dequeue()
        x = tf.strided_slice(data, [0, i * ns], [bs, (i + 1) * ns])
        w = tf.placeholder(tf.float32, [4, 5])
        k = tf.placeholder(tf.int32, [])
        part = tf.strided_slice(w, [1, k], [3, k + 2])
        (gw,) = tf.gradients(tf.reduce_sum(part * 3.0), [w])
        with tf.Session() as s:
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(s, coord=coord)
            got = [s.run(x) for _ in range(9)]
            coord.request_stop()
            coord.join(threads)
            wv = np.arange(20, dtype=np.float32).reshape(4, 5)
            pv, gv = s.run([part, gw], {w: wv, k: 2})
    full = raw[: bs * (50 // bs)].reshape(bs, -1)
    n_epoch = (full.shape[1] - 1) // ns
    for step, gx in enumerate(got):
        j = step % n_epoch
        np.testing.assert_array_equal(gx, full[:, j * ns : (j + 1) * ns])
    np.testing.assert_array_equal(pv, wv[1:3, 2:4])
    want = np.zeros_like(wv)
    want[1:3, 2:4] = 3.0
    np.testing.assert_array_equal(gv, want)


def test_device_lib_lists_the_local_devices():
    """``from tensorflow.python.client import device_lib`` (how TF1 programs count their GPUs)."""
    import hetbed.compat.v1 as tf
    from hetbed.compat.v1.python.client import device_lib

    devs = device_lib.list_local_devices(tf.ConfigProto(device_count={"CPU": 2}))
    assert [(d.name, d.device_type) for d in devs] == [
        ("/device:CPU:0", "CPU"),
        ("/device:CPU:1", "CPU"),
    ]
    assert not [d for d in device_lib.list_local_devices() if d.device_type == "GPU"]
    assert tf.python.client.device_lib is device_lib


def test_contrib_losses_take_logits_first():
    """``tf.contrib.losses`` (also ``slim.losses``): the same losses as ``tf.losses`` with
    contrib's argument order (logits or predictions first), added to the LOSSES collection."""
    import hetbed.compat.v1 as tf

    rng = np.random.default_rng(1)
    logits_v = rng.standard_normal((4, 3)).astype(np.float32)
    labels_v = np.eye(3, dtype=np.float32)[[0, 2, 1, 0]]
    with tf.Graph().as_default():
        logits = tf.constant(logits_v)
        labels = tf.constant(labels_v)
        a = tf.contrib.slim.losses.softmax_cross_entropy(logits, labels)
        b = tf.losses.softmax_cross_entropy(labels, logits)
        c = tf.contrib.losses.sparse_softmax_cross_entropy(logits, tf.constant([0, 2, 1, 0]))
        d = tf.contrib.losses.mean_squared_error(logits, labels)
        e = tf.contrib.losses.get_total_loss(add_regularization_losses=False)
        with tf.Session() as s:
            av, bv, cv, dv, ev = s.run([a, b, c, d, e])
    z = logits_v - logits_v.max(1, keepdims=True)
    xent = -(labels_v * (z - np.log(np.exp(z).sum(1, keepdims=True)))).sum(1).mean()
    assert av == pytest.approx(xent, rel=1e-5) and bv == pytest.approx(av, rel=1e-6)
    assert cv == pytest.approx(xent, rel=1e-5)
    assert dv == pytest.approx(np.mean((logits_v - labels_v) ** 2), rel=1e-5)
    assert ev == pytest.approx(av + bv + cv + dv, rel=1e-5)


def test_gpt2_idioms_hparams_newaxis_and_static_shapes_in_loops():
    """What openai/gpt-2's model and sampler needed: ``tf.contrib.training.HParams``,
    ``tf.newaxis``, and the static shape of a reshape inside a while loop whose shape list mixes
    run-time sizes and ints (the ints are constants that entered the loop: still known)."""
    import hetbed.compat.v1 as tf

    hp = tf.contrib.training.HParams(n_vocab=0, n_ctx=1024, lr=0.1, name="x", flag=False)
    hp.override_from_dict({"n_vocab": 50})
    hp.parse("lr=0.5,flag=true,name=y")
    assert hp.values() == {"n_vocab": 50, "n_ctx": 1024, "lr": 0.5, "name": "y", "flag": True}
    assert "n_ctx" in hp and '"lr": 0.5' in hp.to_json(sort_keys=True)
    with pytest.raises(ValueError, match="unknown hyperparameter"):
        hp.set_hparam("nope", 1)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, None, 2, 8])
        assert x[:, -1, tf.newaxis].shape.as_list() == [None, 1, 2, 8]

        def body(i, acc):
            d = tf.shape(acc)
            merged = tf.reshape(tf.concat([acc, acc], axis=0), [d[0] * 2, d[1], 2 * 8])
            assert merged.shape.as_list() == [None, None, 16]
            return i + 1, tf.reshape(merged[: d[0]], [d[0], d[1], 2, 8])

        _, y = tf.while_loop(
            lambda i, a: i < 3,
            body,
            [0, x],
            shape_invariants=[tf.TensorShape([]), tf.TensorShape([None, None, 2, 8])],
        )
        with tf.Session() as s:
            xv = np.arange(2 * 3 * 16, dtype=np.float32).reshape(2, 3, 2, 8)
            np.testing.assert_array_equal(s.run(y, {x: xv}), xv)


def test_timeline_writes_a_traced_steps_chrome_trace():
    """``from tensorflow.python.client import timeline``: a FULL_TRACE step's step_stats as a
    Chrome trace, one process per device and one complete event per op."""
    import json

    import hetbed.compat.v1 as tf
    from hetbed.compat.v1.python.client import timeline

    with tf.Graph().as_default():
        x = tf.constant(np.ones((64, 64), np.float32))
        y = tf.reduce_sum(tf.matmul(x, x), name="total")
        meta = tf.RunMetadata()
        with tf.Session() as s:
            got = s.run(
                y, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE), run_metadata=meta
            )
    assert got == 64 * 64 * 64
    trace = json.loads(timeline.Timeline(meta.step_stats).generate_chrome_trace_format())
    ops = {e["name"]: e for e in trace["traceEvents"] if e["ph"] == "X"}
    assert {"MatMul", "total"} <= set(ops)
    assert ops["total"]["ts"] >= ops["MatMul"]["ts"] + ops["MatMul"]["dur"] - 1e-3
    procs = [e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"]
    assert procs and all("cpu" in p.lower() for p in procs)
    assert tf.python.client.timeline is timeline
    with pytest.raises(TypeError, match="RunMetadata.step_stats"):
        timeline.Timeline(None)


def test_a_variable_fetched_with_its_update_is_read_as_the_step_ends():
    """run([update, v]) gives v after the update, as TF1 fetches a variable's reference (200 of
    200 runs on TensorFlow 2.21's compat.v1: BEGAN's `k` printed after `update_k`); a fetched
    value is the caller's copy; uninitialized, the error names the variable. (A read op in the
    same run, v.value() or identity(v), is ordered by nothing: it may read either value.)"""
    k = tf.Variable(0.0, name="k")
    update = k.assign(tf.clip_by_value(k + 0.5, 0.0, 1.0))
    w = tf.Variable(np.zeros(3, np.float32), name="w")
    with tf.Session() as s:
        with pytest.raises(tf.errors.FailedPreconditionError, match="uninitialized value k"):
            s.run(k)
        s.run(tf.global_variables_initializer())
        assert s.run([update, k])[1] == 0.5
        assert s.run([update, {"k": k}])[1]["k"] == 1.0
        assert s.run([update, k.value()])[1] == 1.0  # (1.0 before this update: clipped at 1)
        got = s.run(w)
        s.run(w.assign_add(np.ones(3, np.float32)))
        assert got.tolist() == [0.0, 0.0, 0.0]  # a fetched value is the caller's copy
