"""TF1 gaps found running tensorflow/models' research/slim and Hvass-Labs' tutorials unchanged:
slim's end points, layers and helpers, tf.rint, control_flow_ops.switch/merge, image ops on
images whose size is known only when the graph runs, resizing to a computed size, operator op
names, import_meta_graph's import_scope. Values against numpy, against the same ops on static
shapes, and against TensorFlow where installed."""

import numpy as np
import pytest

import hetbed.compat.v1 as tf

RNG = np.random.default_rng(21)
slim = tf.contrib.slim


def test_slim_end_points_collect_under_their_scope_names():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 8, 8, 3])
        with tf.variable_scope("net") as sc:
            end_points_collection = sc.original_name_scope + "_end_points"
            with slim.arg_scope(
                [slim.conv2d, slim.max_pool2d, slim.fully_connected],
                outputs_collections=end_points_collection,
            ):
                net = slim.conv2d(x, 4, [3, 3], scope="conv1")
                net = slim.max_pool2d(net, [2, 2], scope="pool1")
                net = slim.flatten(net, outputs_collections=end_points_collection)
                net = slim.fully_connected(net, 5, activation_fn=None, scope="logits")
            end_points = slim.utils.convert_collection_to_dict(end_points_collection)
        assert list(end_points) == ["net/conv1", "net/pool1", "net/Flatten", "net/logits"]
        assert end_points["net/logits"] is net
        assert tf.get_collection("n") == []  # a name is one collection, not its letters
        assert slim.utils.last_dimension(net.get_shape(), min_rank=2) == 5
        prob = slim.softmax(tf.constant([[1.0, 2.0, 3.0]]))
        with tf.Session() as s:
            e = np.exp([1.0, 2.0, 3.0])
            np.testing.assert_allclose(s.run(prob)[0], e / e.sum(), rtol=1e-6)


def test_slim_separable_and_transposed_convolutions():
    x = RNG.standard_normal((2, 6, 6, 3)).astype(np.float32)
    with tf.Graph().as_default():
        xt = tf.constant(x)
        a = slim.separable_conv2d(xt, 5, [3, 3], depth_multiplier=2, scope="sep")
        b = slim.separable_conv2d(xt, None, [3, 3], stride=2, activation_fn=None, scope="dw")
        c = slim.conv2d_transpose(xt, 4, [3, 3], stride=2, scope="up")
        d = slim.conv2d_transpose(xt, 4, [3, 3], stride=2, padding="VALID", scope="up_valid")
        shapes = {v.op.name: v.shape.as_list() for v in slim.get_model_variables()}
        assert shapes == {
            "sep/depthwise_weights": [3, 3, 3, 2],
            "sep/pointwise_weights": [1, 1, 6, 5],
            "sep/biases": [5],
            "dw/depthwise_weights": [3, 3, 3, 1],
            "dw/biases": [3],
            "up/weights": [3, 3, 4, 3],
            "up/biases": [4],
            "up_valid/weights": [3, 3, 4, 3],
            "up_valid/biases": [4],
        }
        assert b.shape.as_list() == [2, 3, 3, 3] and c.shape.as_list() == [2, 12, 12, 4]
        assert d.shape.as_list() == [2, 13, 13, 4]
        dw = tf.get_default_graph().get_tensor_by_name("sep/depthwise_weights:0")
        pw = tf.get_default_graph().get_tensor_by_name("sep/pointwise_weights:0")
        want = tf.nn.relu(tf.nn.separable_conv2d(xt, dw, pw, [1, 1, 1, 1], "SAME"))
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            got, ref = s.run([a, want])
        np.testing.assert_allclose(got, ref, rtol=1e-6)


def test_slim_create_train_op_and_restore_helpers(tmp_path):
    with tf.Graph().as_default():
        x = tf.constant([[1.0, 2.0]])
        w = slim.model_variable("w", initializer=tf.constant([[0.5], [-1.0]]))
        b = slim.variable("head/b", initializer=tf.constant([0.0]))
        counter = tf.Variable(0.0, trainable=False)
        tf.add_to_collection(tf.GraphKeys.UPDATE_OPS, tf.assign_add(counter, 1.0))
        loss = tf.reduce_sum(tf.square(tf.matmul(x, w) + b))
        train = slim.learning.create_train_op(loss, tf.train.GradientDescentOptimizer(0.1))
        assert [v.op.name for v in slim.get_variables_to_restore(exclude=["head"])] == [
            "w",
            "Variable",
            "global_step",
        ]
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            l0 = s.run(train)
            assert l0 == pytest.approx(2.25)  # (0.5 - 2)^2, the loss before the update
            # d/dw = 2 (xw + b) x = -3 * [1, 2]; w -= 0.1 * that
            np.testing.assert_allclose(s.run(w), [[0.8], [-0.4]], rtol=1e-6)
            assert s.run(counter) == 1.0 and s.run(tf.train.get_global_step()) == 1
            tf.train.Saver([w]).save(s, str(tmp_path / "ckpt"))
            s.run(tf.assign(w, [[9.0], [9.0]]))
            init = slim.assign_from_checkpoint_fn(
                str(tmp_path / "ckpt"), [w, b], ignore_missing_vars=True
            )
            init(s)
            np.testing.assert_allclose(s.run(w), [[0.8], [-0.4]], rtol=1e-6)


def test_rint_and_switch_merge():
    with tf.Graph().as_default():
        r = tf.rint([-1.5, -0.5, 0.5, 1.5, 2.5, 2.6])
        x = tf.constant([1.0, 2.0, 3.0])
        sel = tf.placeholder(tf.int32, [])
        from hetbed.compat.v1.python.ops import control_flow_ops as cf

        out = cf.merge(
            [cf.switch(x, tf.equal(sel, case))[1] * float(case + 1) for case in range(4)]
        )[0]
        (g,) = tf.gradients(tf.reduce_sum(out), [x])
        with tf.Session() as s:
            assert s.run(r).tolist() == [-2.0, -0.0, 0.0, 2.0, 2.0, 3.0]
            for case in range(4):
                v, gv = s.run([out, g], {sel: case})
                assert v.tolist() == [float(case + 1) * k for k in (1, 2, 3)]
                assert gv.tolist() == [float(case + 1)] * 3


def test_image_ops_on_sizes_known_only_at_run_time():
    img = RNG.standard_normal((7, 6, 3)).astype(np.float32)
    cases = {
        "central": lambda t: tf.image.central_crop(t, 0.5),
        "crop_or_pad": lambda t: tf.image.resize_image_with_crop_or_pad(t, 4, 9),
        "crop": lambda t: tf.image.crop_to_bounding_box(t, 1, 2, 3, 3),
        "pad": lambda t: tf.image.pad_to_bounding_box(t, 2, 1, 10, 8),
        "bilinear": lambda t: tf.image.resize_bilinear(tf.expand_dims(t, 0), [5, 11]),
        "nearest": lambda t: tf.image.resize_nearest_neighbor(tf.expand_dims(t, 0), [3, 4]),
        "area": lambda t: tf.image.resize_area(tf.expand_dims(t, 0), [3, 4]),
    }
    with tf.Graph().as_default():
        dyn = tf.placeholder(tf.float32, [None, None, 3])
        static = tf.constant(img)
        hs = tf.placeholder(tf.int32, [])
        outs = {k: (f(dyn), f(static)) for k, f in cases.items()}
        computed = tf.image.resize_images(tf.expand_dims(dyn, 0), tf.stack([hs, hs + 6]))
        rc = tf.random_crop(dyn, [2, 5, 3])
        with tf.Session() as s:
            for k, (a, b) in outs.items():
                got, want = s.run([a, b], {dyn: img})
                np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=k)
            np.testing.assert_allclose(
                s.run(computed, {dyn: img, hs: 5}), s.run(outs["bilinear"][1]), rtol=1e-6
            )
            crop = s.run(rc, {dyn: img})
            assert crop.shape == (2, 5, 3)
            hits = [
                (i, j)
                for i in range(6)
                for j in range(2)
                if np.array_equal(img[i : i + 2, j : j + 5], crop)
            ]
            assert len(hits) == 1
            with pytest.raises(tf.errors.InvalidArgumentError, match="value.shape >= size"):
                s.run(rc, {dyn: img[:1]})
            with pytest.raises(tf.errors.InvalidArgumentError, match="does not fit"):
                s.run(outs["pad"][0], {dyn: np.zeros((9, 9, 3), np.float32)})


def test_operators_name_their_ops_as_tf1_does():
    with tf.Graph().as_default():
        a = tf.placeholder(tf.float32, name="a")
        b = tf.placeholder(tf.float32, name="b")
        names = [t.op.name for t in (a + b, a * b, a - b, a / b, 2.0 - a, a**2, a // b, a % b)]
        assert names == ["add", "mul", "sub", "truediv", "sub_1", "pow", "floordiv", "mod"]
        assert tf.add(a, b).op.name == "Add_1"  # names are unique regardless of case, as TF's
        y = a * 3.0
        assert y.op.inputs[1].op.name == "mul_1/y"


def test_import_meta_graph_under_a_scope_restores_by_the_saved_names(tmp_path):
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 2], name="x")
        w = tf.Variable([[1.0], [2.0]], name="w")
        tf.add_to_collection("outs", tf.matmul(x, w, name="y"))
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(w.assign_add([[1.0], [1.0]]))
            tf.train.Saver().save(s, str(tmp_path / "m"))
    with tf.Graph().as_default():
        saver = tf.train.import_meta_graph(str(tmp_path / "m.meta"), import_scope="net")
        assert [v.op.name for v in tf.global_variables()] == ["net/w"]
        assert [t.name for t in tf.get_collection("outs")] == ["net/y:0"]
        with tf.Session() as s:
            saver.restore(s, str(tmp_path / "m"))
            assert s.run("net/y:0", {"net/x:0": [[1.0, 1.0]]}).tolist() == [[5.0]]


def test_dynamic_image_ops_match_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    img = RNG.standard_normal((9, 7, 3)).astype(np.float32)

    def run(t):
        g = t.Graph()
        with g.as_default():
            p = t.placeholder(t.float32, [None, None, 3])
            h = t.shape(p)[0]
            outs = [
                t.image.central_crop(p, 0.6),
                t.image.resize_image_with_crop_or_pad(p, 5, 10),
                t.image.resize_bilinear(t.expand_dims(p, 0), [h * 2, 4]),
                t.image.resize_nearest_neighbor(t.expand_dims(p, 0), t.stack([h - 2, 11])),
                t.rint(p * 3.0),
            ]
            with t.Session(graph=g) as s:
                return s.run(outs, {p: img})

    for a, b in zip(run(tf), run(tf1)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_supervisor_loop_and_queue_runners(tmp_path):
    import time

    with tf.Graph().as_default():
        q = tf.FIFOQueue(10, tf.float32)
        qr = tf.train.QueueRunner(q, [q.enqueue(1.0)])
        take = q.dequeue()
        tf.Variable(0.0)
        ticks = []
        sv = tf.train.Supervisor(logdir=str(tmp_path), save_model_secs=0, summary_op=None)
        with sv.managed_session(start_standard_services=False) as sess:
            threads = sv.start_queue_runners(sess, [qr])
            looper = sv.loop(0.01, lambda: ticks.append(time.monotonic()))
            assert looper in sv._threads and len(threads) == 2  # enqueue, close on stop
            assert sess.run(take) == 1.0
            deadline = time.monotonic() + 5
            while len(ticks) < 3 and time.monotonic() < deadline:
                time.sleep(0.01)
        assert len(ticks) >= 3 and not looper.is_alive()
        with pytest.raises(ValueError, match="target or override"):
            tf.train.LooperThread(tf.train.Coordinator(), 1.0)


def test_nest_flattens_packs_and_maps_as_tf():
    import collections

    pair = collections.namedtuple("P", "a b")
    s = {"z": [1, (2, 3)], "a": pair(4, [5])}
    assert tf.nest.flatten(s) == [4, 5, 1, 2, 3]  # dicts by sorted key
    packed = tf.nest.pack_sequence_as(s, list(range(10, 15)))
    assert list(packed) == ["z", "a"] and packed == {"z": [12, (13, 14)], "a": pair(10, [11])}
    assert tf.nest.map_structure(lambda x, y: x + y, s, s) == {"z": [2, (4, 6)], "a": pair(8, [10])}
    with pytest.raises(TypeError, match="same sequence type"):
        tf.nest.assert_same_structure([1, 2], (1, 2))
    tf.nest.assert_same_structure([1, 2], (1, 2), check_types=False)
    with pytest.raises(ValueError, match="same nested structure"):
        tf.nest.assert_same_structure([1, [2]], [1, 2])
    with pytest.raises(ValueError, match="Structure had 2 elements"):
        tf.nest.pack_sequence_as([1, 2], [1])
    assert tf.contrib.framework.nest.flatten([1, [2]]) == [1, 2]


def test_cast_of_a_sparse_tensor_casts_its_values():
    with tf.Graph().as_default(), tf.Session() as s:
        sp = tf.SparseTensor([[0, 0], [1, 2]], np.array([1, 2], np.int64), [2, 3])
        c = tf.cast(sp, tf.float32)
        assert isinstance(c, tf.SparseTensor) and c.values.dtype == tf.float32
        v = s.run(c)
        assert v.values.tolist() == [1.0, 2.0] and v.indices.tolist() == [[0, 0], [1, 2]]


def test_slim_conv2d_in_plane_shares_one_filter_across_channels():
    x = RNG.standard_normal((1, 5, 4, 3)).astype(np.float32)
    with tf.Graph().as_default(), tf.Session() as s:
        y = slim.conv2d_in_plane(
            tf.constant(x), [3, 3], activation_fn=None, biases_initializer=None,
            weights_initializer=tf.constant_initializer(1.0),
        )  # fmt: skip
        s.run(tf.global_variables_initializer())
        got = s.run(y)
        assert [v.shape.as_list() for v in slim.get_model_variables()] == [[3, 3, 1, 1]]
    p = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    want = sum(p[:, i : i + 5, j : j + 4] for i in range(3) for j in range(3))
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_round_ten_gaps_scalar_constant_names_lists_of_tensors_bytes_paths(tmp_path):
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None], name="x")
        with tf.variable_scope("NN"):
            a = tf.divide(x, 2)
            b = tf.greater(x, 0.5, name="predictions")
            c = tf.maximum(x, 0.0)
            d = tf.pow(x, 2)
        names = [[i.op.name for i in t.op.inputs] for t in (a, b, c, d)]
        assert names == [["x", "NN/truediv/y"], ["x", "NN/predictions/y"],
                         ["x", "NN/Maximum/y"], ["x", "NN/Pow/y"]]  # fmt: skip
        assert [t.op.name for t in (a, b, c, d)] == [
            "NN/truediv", "NN/predictions", "NN/Maximum", "NN/Pow",
        ]  # fmt: skip
        base = tf.constant(1.5)
        parts = [tf.constant(0.25), tf.constant(0.5)]
        with tf.Session() as s:
            assert s.run(base + parts).tolist() == [1.75, 2.0]
            assert s.run(tf.add(parts, base)).tolist() == [1.75, 2.0]
            b2 = tf.saved_model.builder.SavedModelBuilder(str(tmp_path / "m").encode())
            b2.add_meta_graph_and_variables(s, ["serve"])
            assert b2.save() == str(tmp_path / "m" / "saved_model.pb").encode()
    assert tf.saved_model.loader.maybe_saved_model_directory(str(tmp_path / "m").encode())
