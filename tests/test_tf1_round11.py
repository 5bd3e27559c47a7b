"""Gaps found running TF1 programs by others (round eleven: DCGAN-tensorflow, char-rnn-tensorflow,
object_detection's core, tf.keras tutorials), each checked against the value TF gives."""

import os
import sys

import numpy as np
import pytest

import hetbed.compat.v1 as tf


def test_pad_with_paddings_known_at_run_time_and_its_gradient():
    x = tf.placeholder(tf.float32, [None, 3])
    n = tf.shape(x)[0]
    as_list = tf.pad(x, [[1, 4 - n], [0, 2]], constant_values=7.0)
    as_tensor = tf.pad(x, tf.stack([tf.stack([0, 5 - n]), tf.constant([0, 0])]))
    w = tf.range(1.0, 6.0)
    loss = tf.reduce_sum(as_list * w[:, None] * w[None, :])
    (grad,) = tf.gradients(loss, x)
    with tf.Session() as s:
        a, b, g = s.run([as_list, as_tensor, grad], {x: np.ones((2, 3), np.float32)})
    want = np.full((5, 5), 7.0, np.float32)
    want[1:3, :3] = 1
    np.testing.assert_array_equal(a, want)
    np.testing.assert_array_equal(b, np.pad(np.ones((2, 3)), [[0, 3], [0, 0]]))
    np.testing.assert_array_equal(g, np.outer([2, 3], [1, 2, 3]))  # d/dx of w_i w_j at (i+1, j)
    with tf.Session() as s, pytest.raises(tf.errors.InvalidArgumentError, match=">= 0"):
        s.run(as_tensor, {x: np.ones((7, 3), np.float32)})


def test_stack_packs_a_nested_list_holding_tensors():
    x = tf.placeholder(tf.float32, [None, 4])
    n = tf.shape(x)[0]
    t = tf.stack([tf.zeros(2, dtype=tf.int32), [n, n - 1]], axis=1)
    with tf.Session() as s:
        assert s.run(t, {x: np.ones((3, 4))}).tolist() == [[0, 3], [0, 2]]


def test_ones_and_zeros_take_a_scalar_shape_tensor():
    x = tf.placeholder(tf.float32, [None, 4])
    n = tf.shape(x)[0]
    with tf.Session() as s:
        a, b = s.run([tf.ones(n, dtype=tf.bool), tf.zeros(n)], {x: np.ones((3, 4))})
    assert a.tolist() == [True] * 3 and b.tolist() == [0.0] * 3


def test_flags_dunder_flags_is_the_flag_dict():
    flags = tf.app.flags
    flags.DEFINE_integer("round11_batch", 32, "")
    flags.FLAGS(sys.argv[:1])
    d = getattr(flags.FLAGS, "__flags")
    assert d["round11_batch"].value == 32
    flags.FLAGS.round11_batch = 5  # (the dict is read without parsing the command line again)
    assert getattr(flags.FLAGS, "__flags")["round11_batch"].value == 5


def test_init_scope_and_forward_compatible():
    assert tf.compat.forward_compatible(2019, 6, 6)
    assert not tf.compat.forward_compatible(2030, 1, 1)
    with tf.compat.forward_compatibility_horizon(2031, 1, 1):
        assert tf.compat.forward_compatible(2030, 1, 1)
    with tf.Graph().as_default():
        with tf.control_dependencies([tf.no_op()]):
            with tf.init_scope():
                c = tf.constant(2.0) + 1
            d = tf.constant(1.0) + 1
        assert c.op.control_inputs == [] and len(d.op.control_inputs) == 1


def test_contrib_image_rotate_translate_compose():
    img = np.arange(12, dtype=np.float32).reshape(3, 4, 1)
    batch = np.stack([img[:3, :3], img[:3, 1:]])
    with tf.Graph().as_default(), tf.Session() as s:
        r90 = tf.contrib.image.rotate(img[:3, :3], np.pi / 2)
        rb = tf.contrib.image.rotate(batch, [np.pi, -np.pi / 2])
        shifted = tf.contrib.image.translate(img, [1.0, 0.0])
        half = tf.contrib.image.angles_to_projective_transforms(np.pi / 2, 3.0, 3.0)
        twice = tf.contrib.image.compose_transforms(half, half)
        full = tf.contrib.image.angles_to_projective_transforms(np.pi, 3.0, 3.0)
        bil = tf.contrib.image.translate(img, [0.5, 0.0], interpolation="BILINEAR")
        a, b, c, t2, t1, d = s.run([r90, rb, shifted, twice, full, bil])
        with pytest.raises(ValueError, match="interpolation"):
            tf.contrib.image.transform(img, [1, 0, 0, 0, 1, 0, 0, 0], "CUBIC")
    np.testing.assert_array_equal(a[..., 0], np.rot90(img[:3, :3, 0]))  # counterclockwise
    np.testing.assert_array_equal(b[0, ..., 0], np.rot90(batch[0, ..., 0], 2))
    np.testing.assert_array_equal(b[1, ..., 0], np.rot90(batch[1, ..., 0], -1))
    np.testing.assert_array_equal(c[:, 1:, 0], img[:, :-1, 0])
    assert (c[:, 0] == 0).all()
    np.testing.assert_allclose(t2, t1, atol=1e-5)
    np.testing.assert_allclose(d[:, 1:, 0], (img[:, 1:, 0] + img[:, :-1, 0]) / 2)
    np.testing.assert_allclose(d[:, 0, 0], img[:, 0, 0] / 2)  # half the left neighbour is fill


def test_bipartite_match_takes_the_smallest_distances_first():
    d = np.array([[0.5, 0.1, 0.9], [0.2, 0.05, 0.3], [0.4, 0.6, 0.0]], np.float32)
    with tf.Graph().as_default(), tf.Session() as s:
        from hetbed.compat.v1.contrib.image.python.ops import image_ops

        rows, cols = s.run(image_ops.bipartite_match(d, -1))
        r2, c2 = s.run(image_ops.bipartite_match(d, 2))
        r3, _ = s.run(image_ops.bipartite_match(d, -1, top_k=1))
    # 0.0 (2,2), then 0.05 (1,1), then row 0 takes the best free column: 0
    assert rows.tolist() == [0, 1, 2] and cols.tolist() == [0, 1, 2]
    assert r2.tolist() == [0, 1, -1] and c2.tolist() == [0, 1, -1]  # only rows 0 and 1 valid
    assert r3.tolist() == [-1, -1, 2]


def test_contrib_image_transform_equals_tensorflows_kernel():
    tf_ref = pytest.importorskip("tensorflow")
    if not hasattr(tf_ref, "raw_ops"):
        pytest.skip("this TensorFlow has no raw_ops")
    rng = np.random.RandomState(0)
    with tf.Graph().as_default(), tf.Session() as s:
        for i in range(12):
            n, h, w = rng.randint(1, 3), rng.randint(2, 7), rng.randint(2, 7)
            dt = [np.float32, np.uint8][i % 2]
            img = (rng.rand(n, h, w, 2) * 200).astype(dt)
            t = np.concatenate(
                [
                    rng.randn(n, 6) * [1, 0.4, 2, 0.4, 1, 2] + [1, 0, 0, 0, 1, 0],
                    rng.randn(n, 2) * 0.05,
                ],
                1,
            ).astype(np.float32)
            interp = ["NEAREST", "BILINEAR"][(i // 2) % 2]
            with tf_ref.Graph().as_default(), tf_ref.compat.v1.Session() as ref:  # any TF mode
                want = ref.run(
                    tf_ref.raw_ops.ImageProjectiveTransformV2(
                        images=img,
                        transforms=t,
                        output_shape=[h + 1, w],
                        interpolation=interp,
                        fill_mode="CONSTANT",
                    )
                )
            got = s.run(tf.contrib.image.transform(img, t, interp, output_shape=[h + 1, w]))
            np.testing.assert_allclose(got.astype(float), want.astype(float), atol=1e-3)


@pytest.mark.parametrize(
    "make, what",
    [
        (lambda: tf.distributions.Normal(0.0, -1.0, validate_args=True).log_prob(0.0), "scale"),
        (lambda: tf.distributions.Laplace(0.0, -1.0, validate_args=True).log_prob(0.0), "scale"),
        (lambda: tf.distributions.Bernoulli(probs=1.5, validate_args=True).log_prob(1), "probs"),
        (
            lambda: tf.distributions.Categorical(probs=[0.5, 0.9], validate_args=True).log_prob(0),
            "sum to 1",
        ),
        (lambda: tf.distributions.Exponential(-1.0, validate_args=True).log_prob(1.0), "rate"),
        (lambda: tf.distributions.Uniform(2.0, 1.0, validate_args=True).prob(1.5), "low"),
    ],
)
def test_distributions_validate_their_parameters_when_asked(make, what):
    with tf.Graph().as_default(), tf.Session() as s:
        with pytest.raises(tf.errors.InvalidArgumentError, match=what):
            s.run(make())


def test_valid_parameters_pass_validation_with_the_same_values():
    with tf.Graph().as_default(), tf.Session() as s:
        a, b = s.run(
            [
                tf.distributions.Normal(0.0, 2.0, validate_args=True).log_prob(0.0),
                tf.distributions.Categorical(probs=[0.25, 0.75], validate_args=True).log_prob(1),
            ]
        )
    np.testing.assert_allclose(a, -0.5 * np.log(2 * np.pi) - np.log(2.0), rtol=1e-6)
    np.testing.assert_allclose(b, np.log(0.75), rtol=1e-6)


def test_ctc_loss_refuses_a_repeated_label_index():
    logits = np.zeros((3, 1, 4), np.float32)
    with tf.Graph().as_default(), tf.Session() as s:
        labels = tf.SparseTensor([[0, 0], [0, 0]], [1, 2], [1, 2])
        with pytest.raises(
            tf.errors.InvalidArgumentError, match=r"indices\[1\] = \[0, 0\] is repeated"
        ):
            s.run(tf.nn.ctc_loss(labels, logits, [3]))


def test_resize_images_refuses_a_fed_size_of_three():
    p = tf.placeholder(tf.int32, [None])
    y = tf.image.resize_images(np.ones((4, 4, 1), np.float32), p)
    with tf.Session() as s:
        assert s.run(y, {p: [2, 3]}).shape == (2, 3, 1)
        with pytest.raises(tf.errors.InvalidArgumentError, match="two elements"):
            s.run(y, {p: [2, 3, 4]})


def test_more_string_ops_give_tensorflows_values():
    """Values recorded from TensorFlow 2.21 on the same strings."""
    data = [b"  Hello World\t\n", "Äpfel ü".encode(), b"", b"a+b/c=", b"\x00\xff\xfe binary"]
    with tf.Graph().as_default(), tf.Session() as s:
        got = s.run(
            [
                tf.strings.strip(data),
                tf.strings.upper(data),
                tf.strings.lower(data, encoding="utf-8"),
                tf.io.encode_base64(data),
                tf.io.encode_base64(data, pad=True),
                tf.io.decode_base64(tf.io.encode_base64(data)),
                tf.strings.regex_full_match(data, r"[a-z+/=]*"),
            ]
        )
        with pytest.raises(tf.errors.InvalidArgumentError, match="DecodeBase64"):
            s.run(tf.io.decode_base64([b"abc$"]))
    assert got[0].tolist() == [
        b"Hello World",
        "Äpfel ü".encode(),
        b"",
        b"a+b/c=",
        b"\x00\xff\xfe binary",
    ]
    assert got[1].tolist()[0] == b"  HELLO WORLD\t\n" and got[1].tolist()[1] == "ÄPFEL ü".encode()
    assert got[2].tolist() == [b"  hello world\t\n", "äpfel ü".encode(), b"", b"a+b/c=", b""]
    assert got[3].tolist() == [
        b"ICBIZWxsbyBXb3JsZAkK",
        b"w4RwZmVsIMO8",
        b"",
        b"YStiL2M9",
        b"AP_-IGJpbmFyeQ",
    ]
    assert got[4].tolist()[-1] == b"AP_-IGJpbmFyeQ=="
    assert got[5].tolist() == data
    assert got[6].tolist() == [False, False, True, True, False]
    with tf.Graph().as_default(), tf.Session() as s:  # over UTF-8 characters, as RE2
        assert s.run(tf.strings.regex_full_match(["é".encode(), "héllo".encode()], ".|.{5}")).all()


def test_get_single_element():
    with tf.Graph().as_default(), tf.Session() as s:
        one = tf.data.Dataset.from_tensors({"a": [1, 2], "b": 3.0}).map(
            lambda d: {"a": d["a"] * 2, "b": d["b"]}
        )
        got = s.run(tf.data.experimental.get_single_element(one))
        assert got["a"].tolist() == [2, 4] and got["b"] == 3.0
        for ds, why in (
            (tf.data.Dataset.range(0), "empty"),
            (tf.data.Dataset.range(3), "more than one"),
        ):
            with pytest.raises(tf.errors.InvalidArgumentError, match=why):
                s.run(tf.contrib.data.get_single_element(ds))


@pytest.mark.parametrize("stride, padding", [(2, "SAME"), (1, "VALID"), (2, "VALID")])
def test_conv3d_transpose_is_the_adjoint_of_conv3d(stride, padding):
    """<conv3d(x, f), y> == <x, conv3d_transpose(y, f)> for every x and y."""
    rng = np.random.RandomState(stride)
    xs = (2, 5, 6, 6, 3)
    f = rng.randn(3, 2, 3, 3, 4).astype(np.float32)
    x = rng.randn(*xs).astype(np.float32)
    with tf.Graph().as_default(), tf.Session() as s:
        y_shape = tf.nn.conv3d(x, f, [1, stride, stride, stride, 1], padding).shape.as_list()
        y = rng.randn(*y_shape).astype(np.float32)
        a = s.run(tf.reduce_sum(tf.nn.conv3d(x, f, [1, stride, stride, stride, 1], padding) * y))
        t = tf.nn.conv3d_transpose(y, f, list(xs), [1, stride, stride, stride, 1], padding)
        assert t.shape.as_list() == list(xs)
        b = s.run(tf.reduce_sum(x * t))
        layer = tf.layers.conv3d_transpose(
            tf.zeros([2, 3, 4, 4, 2]), 5, 3, strides=2, padding="same"
        )
        assert layer.shape.as_list() == [2, 6, 8, 8, 5]
        with pytest.raises(tf.errors.InvalidArgumentError, match="value has shape"):
            tf.nn.conv3d_transpose(y[:, :1], f, list(xs), [1, stride, stride, stride, 1], padding)
    np.testing.assert_allclose(a, b, rtol=1e-4)


def test_conv3d_transpose_and_its_gradients_equal_tensorflows():
    tf_real = pytest.importorskip("tensorflow")
    rng = np.random.RandomState(0)
    v = rng.randn(2, 3, 4, 4, 3).astype(np.float32)
    f = rng.randn(2, 3, 3, 5, 3).astype(np.float32)
    w = rng.randn(2, 6, 8, 8, 5).astype(np.float32)
    got = []
    for lib in (tf_real.compat.v1, tf):
        with lib.Graph().as_default():
            vv, fv = lib.Variable(v), lib.Variable(f)
            y = lib.nn.conv3d_transpose(vv, fv, [2, 6, 8, 8, 5], [1, 2, 2, 2, 1], "SAME")
            with lib.Session() as s:
                s.run(lib.global_variables_initializer())
                got.append(s.run([y, *lib.gradients(lib.reduce_sum(y * w), [vv, fv])]))
    for a, b in zip(*got):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-4)


def test_monitored_session_resumes_from_a_checkpoint_tensorflow_wrote(tmp_path):
    tf_real = pytest.importorskip("tensorflow")
    v1 = tf_real.compat.v1
    src = tmp_path / "tf"
    with v1.Graph().as_default():
        v = v1.Variable(0.0, name="v")
        gs = v1.train.get_or_create_global_step()
        with v1.Session() as s:
            s.run(v1.global_variables_initializer())
            s.run([v.assign(42.0), gs.assign(7)])
            v1.train.Saver().save(s, str(src / "model.ckpt"), global_step=7)
    with tf.Graph().as_default():
        v = tf.Variable(0.0, name="v")
        gs = tf.train.get_or_create_global_step()
        with tf.train.MonitoredTrainingSession(
            checkpoint_dir=str(src), save_checkpoint_secs=None, save_summaries_steps=None
        ) as sess:
            assert sess.run([v, gs]) == [42.0, 7]
    with v1.Graph().as_default():  # the folder's index is still TensorFlow's to read
        assert v1.train.latest_checkpoint(str(src)).endswith("model.ckpt-7")


def test_dataset_functions_capture_the_callers_tensors_and_tables(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("<unk>\nhello\nworld\n")
    with tf.Graph().as_default():
        table = tf.contrib.lookup.index_table_from_file(str(vocab), default_value=0)
        shift = tf.placeholder(tf.int32, [])
        words = tf.data.Dataset.from_tensor_slices(tf.constant(["hello world", "world foo"]))
        words = words.map(lambda s: tf.string_split([s]).values)
        ids = words.map(lambda w: tf.cast(table.lookup(w), tf.int32) + shift)
        kept = ids.filter(lambda x: tf.reduce_sum(x) > 12 + shift)
        it, it2 = ids.make_initializable_iterator(), kept.make_initializable_iterator()
        x, y = it.get_next(), it2.get_next()
        with tf.Session() as s:
            s.run(tf.tables_initializer())
            s.run([it.initializer, it2.initializer], {shift: 10})
            assert s.run(x).tolist() == [11, 12] and s.run(x).tolist() == [12, 10]
            assert s.run(y).tolist() == [11, 12]  # [12, 10] sums to 22, not above 22
            with pytest.raises(tf.errors.OutOfRangeError):
                s.run(y)
        scanned = tf.data.Dataset.range(4).apply(
            tf.data.experimental.scan(
                np.int64(0), lambda st, v: (st + v * tf.cast(shift, tf.int64), st)
            )
        )
        it3 = scanned.make_initializable_iterator()
        z = it3.get_next()
        with tf.Session() as s:
            s.run(it3.initializer, {shift: 10})
            assert [int(s.run(z)) for _ in range(4)] == [0, 0, 10, 30]


def test_dataset_counts_may_be_fed_when_the_iterator_starts():
    skip = tf.placeholder(tf.int64, [])
    size = tf.placeholder(tf.int64, [])
    ds = tf.data.Dataset.range(10).skip(skip).take(size * 2).shuffle(size, seed=1).batch(size)
    it = ds.make_initializable_iterator()
    x = it.get_next()
    assert x.shape.as_list() == [None]
    with tf.Session() as s:
        s.run(it.initializer, {skip: 2, size: 3})
        got = [s.run(x).tolist() for _ in range(2)]
        assert [len(b) for b in got] == [3, 3] and sorted(sum(got, [])) == [2, 3, 4, 5, 6, 7]
        s.run(it.initializer, {skip: 7, size: 2})
        assert sorted(s.run(x).tolist()) == [7, 8]
        s.run(it.initializer, {skip: 0, size: 0})  # a batch size of 0 fails when read
        with pytest.raises(tf.errors.InvalidArgumentError, match="batch_size must be >= 1"):
            s.run(x)


def test_group_by_window_gives_tensorflows_windows():
    """Outputs recorded from TensorFlow 2.21's group_by_window on the same pipelines."""
    gbw = tf.contrib.data.group_by_window
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(11).map(lambda x: (x, tf.fill([x % 4 + 1], x)))
        a = ds.apply(
            gbw(
                lambda x, y: x % 3,
                lambda k, w: w.padded_batch(2, padded_shapes=([], [None])),
                window_size=2,
            )
        )
        b = tf.data.Dataset.range(13).apply(
            gbw(
                lambda x: x % 4,
                lambda k, w: w.batch(5).map(lambda v: v * 100 + k),
                window_size_func=lambda k: k + 1,
            )
        )
        xa, xb = a.make_one_shot_iterator().get_next(), b.make_one_shot_iterator().get_next()
        with tf.Session() as s:
            got_a = [s.run(xa)[0].tolist() for _ in range(6)]
            got_b = [s.run(xb).tolist() for _ in range(8)]
            with pytest.raises(tf.errors.OutOfRangeError):
                s.run(xb)
        with pytest.raises(ValueError, match="either window_size or window_size_func"):
            gbw(lambda x: x, lambda k, w: w)
    assert got_a == [[0, 3], [1, 4], [2, 5], [6, 9], [7, 10], [8]]
    assert got_b == [
        [0],
        [400],
        [101, 501],
        [800],
        [202, 602, 1002],
        [1200],
        [901],
        [303, 703, 1103],
    ]


def test_sample_embedding_helper_and_nmts_names():
    emb = np.eye(4, dtype=np.float32)
    with tf.Graph().as_default():
        cell = tf.nn.rnn_cell.BasicRNNCell(4)
        outs = {}
        for kind, helper in (
            ("greedy", tf.contrib.seq2seq.GreedyEmbeddingHelper(emb, [1, 2], 0)),
            (
                "cold",
                tf.contrib.seq2seq.SampleEmbeddingHelper(
                    emb, [1, 2], 0, softmax_temperature=1e-4, seed=3
                ),
            ),
            (
                "hot",
                tf.contrib.seq2seq.SampleEmbeddingHelper(
                    emb, [1, 2], 0, softmax_temperature=5.0, seed=3
                ),
            ),
        ):
            with tf.variable_scope("d", reuse=tf.AUTO_REUSE):
                dec = tf.contrib.seq2seq.BasicDecoder(cell, helper, cell.zero_state(2, tf.float32))
                out, _, _ = tf.contrib.seq2seq.dynamic_decode(dec, maximum_iterations=5)
            outs[kind] = out.sample_id
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            got = s.run(outs)
    np.testing.assert_array_equal(got["cold"], got["greedy"])  # a cold softmax is the argmax
    assert got["hot"].min() >= 0 and got["hot"].max() < 4
    from hetbed.compat.v1.python.ops import lookup_ops

    assert lookup_ops.index_table_from_file is tf.contrib.lookup.index_table_from_file
    assert tf.contrib.learn.ModeKeys.INFER == "infer"
    with tf.container("c"):
        pass


def test_unknown_dimensions_are_tf1s_dimension_none():
    x = tf.placeholder(tf.float32, [None, 3])
    assert x.shape[0].value is None and x.shape[1].value == 3
    assert [d.value for d in x.get_shape()] == [None, 3]
    assert tf.Dimension(None).value is None and tf.Dimension(4).value == 4
    assert (x.shape[0] != 3) is None and (x.shape[0] == 3) is None  # unknown, as TF1 answers
    assert not x.shape[0] and (x.shape[0] + 1).value is None
    assert tf.TensorShape([x.shape[0], 4]).as_list() == [None, 4]
    assert tf.compat.dimension_value(x.shape[0]) is None
    with pytest.raises(TypeError):
        int(x.shape[0])
    n = x.shape[0].value or tf.shape(x)[0]  # nmt's idiom
    with tf.Session() as s:
        assert s.run(n, {x: np.zeros((5, 3))}) == 5


def test_nmts_input_pipeline_pieces(tmp_path):
    """Packed lists of the caller's tensors inside a map, tensor padding values, bytes
    written to a text GFile (tensorflow/nmt's iterator_utils and misc_utils)."""
    vocab = tmp_path / "v.txt"
    vocab.write_text("<unk>\n<s>\n</s>\na\nb\n")
    with tf.Graph().as_default():
        table = tf.contrib.lookup.index_table_from_file(str(vocab), default_value=0)
        sos = tf.cast(table.lookup(tf.constant("<s>")), tf.int32)
        eos = tf.cast(table.lookup(tf.constant("</s>")), tf.int32)
        ds = tf.data.Dataset.from_tensor_slices(tf.constant(["a b", "b", "a a b"]))
        ds = ds.map(lambda s: tf.cast(table.lookup(tf.string_split([s]).values), tf.int32))
        ds = ds.map(lambda t: (tf.concat(([sos], t), 0), tf.concat((t, [eos]), 0)))
        ds = ds.padded_batch(3, padded_shapes=([None], [None]), padding_values=(eos, eos))
        it = ds.make_initializable_iterator()
        x = it.get_next()
        with tf.Session() as s:
            s.run(tf.tables_initializer())
            s.run(it.initializer)
            tgt_in, tgt_out = s.run(x)
    assert tgt_in.tolist() == [[1, 3, 4, 2], [1, 4, 2, 2], [1, 3, 3, 4]]
    assert tgt_out.tolist() == [[3, 4, 2, 2], [4, 2, 2, 2], [3, 3, 4, 2]]
    log = tmp_path / "log"
    with tf.gfile.GFile(str(log), "a") as f:
        f.write("ä ".encode())
        f.write("b")
    assert log.read_text(encoding="utf-8") == "ä b"


def test_checkpoint_saver_hook_saves_as_the_session_starts(tmp_path):
    """TF's CheckpointSaverHook: model.ckpt-<start step> and graph.pbtxt when the session is
    made, then every save period and at the end."""
    with tf.Graph().as_default():
        gs = tf.train.get_or_create_global_step()
        inc = tf.assign_add(gs, 1)
        with tf.train.MonitoredTrainingSession(
            checkpoint_dir=str(tmp_path), save_checkpoint_steps=100
        ) as s:
            s.run(inc)
    names = sorted(os.listdir(tmp_path))
    assert {"graph.pbtxt", "model.ckpt-0", "model.ckpt-1"} <= set(names)
    assert "node" in (tmp_path / "graph.pbtxt").read_text()
