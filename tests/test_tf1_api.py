"""TF1's API surface where hetbed's differed (an audit of hetbed.compat.v1 against TensorFlow
2.21's compat.v1, signature by signature): positional orders, keyword names, return structures,
constructors of the error classes, and names TF1 programs use that were missing. Values against
numpy and closed forms (each was also checked against TensorFlow when written)."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

import hetbed.compat.v1 as tf


@pytest.fixture(autouse=True)
def _fresh_graph():
    with tf.Graph().as_default():
        yield


def _run(fetches, feed=None):
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        return s.run(fetches, feed)


def test_error_classes_are_made_as_tf1_programs_make_them():
    """TF's (node_def, op, message) and keywords, hetbed's (message, op); the error codes."""
    e = tf.errors.OutOfRangeError(None, None, "input done")
    assert str(e) == e.message == "input done" and e.op is None and e.node_def is None
    assert e.error_code == tf.errors.OUT_OF_RANGE == 11
    e = tf.errors.NotFoundError(node_def=None, op=None, message="no file")
    assert e.message == "no file" and e.error_code == tf.errors.NOT_FOUND
    assert tf.errors.InvalidArgumentError("bad", "op").op == "op"  # hetbed's own form
    assert tf.errors.OpError(None, None, "m", tf.errors.ABORTED).error_code == 10
    assert tf.errors.UnknownError(None, None, "u").error_code == tf.errors.UNKNOWN == 2
    assert issubclass(tf.errors.PermissionDeniedError, tf.errors.OpError)
    with pytest.raises(TypeError, match="unexpected argument 'detail'"):
        tf.errors.AbortedError(None, None, "m", detail=1)
    with pytest.raises(tf.errors.OutOfRangeError):
        raise tf.errors.OutOfRangeError(None, None, "stop")


def test_positional_orders_are_tf1s():
    x = tf.constant(np.arange(24, dtype=np.float32).reshape(2, 4, 3))
    conv = tf.layers.Conv1D(4, 3, 1, "same", "channels_last", 1)  # padding 4th, as TF's
    assert conv(x).shape.as_list() == [2, 4, 4] and conv.padding.lower() == "same"
    am = tf.arg_max(tf.constant([[1.0, 3.0, 2.0]]), 1, tf.int32)  # output_type 3rd
    assert am.dtype == tf.int32 and _run(am).tolist() == [1]
    total = tf.foldl(lambda a, b: a + b, tf.constant([1, 2, 3]), 10, 4)  # parallel_iterations
    v = tf.get_local_variable("lv", [2], tf.float32, tf.ones_initializer())  # initializer 4th
    assert v in tf.local_variables() and v not in tf.trainable_variables()
    c = tf.convert_to_tensor(3, None, None, tf.float32)  # preferred_dtype 4th
    s = tf.convert_to_tensor("a", preferred_dtype=tf.float32)  # (does not fit: its own)
    assert c.dtype == tf.float32 and s.dtype == tf.string
    with tf.Session() as sess:
        sess.run(v.initializer)
        assert sess.run(total) == 16 and sess.run(v).tolist() == [1.0, 1.0]


def test_keyword_names_are_tf1s(tmp_path):
    x = tf.constant([1.0, 2.0])
    with tf.device(device_name_or_function="/cpu:0"):
        z = tf.zeros_like(tensor=x)
        o = tf.ones_like(tensor=x, optimize=False)
    w = tf.Variable(1.0)
    flag = tf.is_variable_initialized(variable=w)
    n = tf.string_to_number(input=tf.constant(["2.5"]))
    tf.add_to_collection("mine", x)
    assert tf.get_collection(key="mine") == [x] and tf.get_collection_ref(key="mine") == [x]
    with tf.Session() as s:
        assert s.run(z).tolist() == [0, 0] and s.run(o).tolist() == [1, 1]
        assert not s.run(flag) and s.run(n).tolist() == [2.5]
        s.run(w.initializer)
        path = tf.train.Saver().save(s, str(tmp_path / "m"))
    tf.train.update_checkpoint_state(save_dir=str(tmp_path), model_checkpoint_path=path)
    assert tf.train.latest_checkpoint(str(tmp_path)) == path
    reader = tf.train.NewCheckpointReader(filepattern=path)
    assert reader.get_tensor(w.op.name) == 1.0


def test_supervisor_stop_takes_threads_and_leaves_the_session_open():
    w = tf.Variable(2.0)
    sv = tf.train.Supervisor(logdir=None)
    sess = sv.prepare_or_wait_for_session("")
    sv.stop([], close_summary_writer=True, ignore_live_threads=False)
    assert sv.should_stop() and sess.run(w) == 2.0  # (TF's stop closes no session)
    sess.close()


def test_unique_gives_named_tuples_and_shapes_have_tf1s_methods():
    u = tf.unique(tf.constant([4, 1, 4, 2]))
    uc = tf.unique_with_counts(tf.constant([4, 1, 4]))
    y, idx, count = _run([u.y, u.idx, uc.count])
    assert y.tolist() == [4, 1, 2] and idx.tolist() == [0, 1, 0, 2] and count.tolist() == [2, 1]
    s = tf.TensorShape([None, 3])
    assert s.with_rank(2).as_list() == [None, 3] and s.concatenate([4]).as_list() == [None, 3, 4]
    s.assert_has_rank(2)
    s.assert_is_compatible_with([5, 3])
    assert s.with_rank_at_least(1) is s and s.with_rank_at_most(2) is s
    for bad in (lambda: s.with_rank(3), s.assert_is_fully_defined, lambda: s.assert_has_rank(1)):
        with pytest.raises(ValueError, match=r"\(\?, 3\)"):
            bad()
    c = tf.constant(1.0)
    assert c.op.values() == (c,)
    acc, update = tf.metrics.accuracy([1, 0], [1, 1])
    assert len(tf.get_collection(tf.GraphKeys.METRIC_VARIABLES)) == 2
    assert tf.GraphKeys.VARIABLES == tf.GraphKeys.GLOBAL_VARIABLES


def test_tf1_aliases_and_small_functions():
    x = tf.constant([1.0, 2.0, 0.0])
    y = tf.constant([0.0, 4.0, 0.0])
    q = tf.div_no_nan(x, y)
    (gx,) = tf.gradients(tf.reduce_sum(q), [x])
    ls = tf.log_sigmoid(tf.constant([-30.0, 0.0, 30.0]))
    labels, preds = [0, 1, 2, 2, 1], [0, 2, 2, 1, 1]
    cm = tf.confusion_matrix(labels, preds)
    cmw = tf.confusion_matrix([0, 1], [1, 1], num_classes=3, weights=[2, 3])
    got = _run([q, gx, ls, cm, cmw, tf.to_double(x)])
    assert got[0].tolist() == [0.0, 0.5, 0.0] and got[1].tolist() == [0.0, 0.25, 0.0]
    np.testing.assert_allclose(got[2], -np.logaddexp(0.0, -np.array([-30.0, 0.0, 30.0])))
    want = np.zeros((3, 3), np.int32)
    np.add.at(want, (labels, preds), 1)
    assert got[3].tolist() == want.tolist()
    assert got[4].tolist() == [[0, 2, 0], [0, 3, 0], [0, 0, 0]] and got[5].dtype == np.float64
    assert tf.double == tf.float64 and tf.half == tf.float16 and tf.is_tensor(x)
    assert not tf.is_tensor(np.ones(2)) and tf.no_regularizer(x) is None
    assert tf.all_variables is tf.global_variables and tf.math.divide_no_nan is tf.div_no_nan
    summary = tf.Summary(value=[tf.Summary.Value(tag="acc", simple_value=0.5)])
    assert summary.value[0].simple_value == 0.5


def test_orthogonal_and_identity_initializers():
    """Q's columns (rows, when wider than tall) are orthonormal times the gain; the same seed
    draws the same matrix; identity is the gain times I."""
    tall = tf.get_variable("tall", [6, 4], initializer=tf.orthogonal_initializer(gain=2.0, seed=3))
    wide = tf.get_variable("wide", [2, 3, 8], initializer=tf.initializers.orthogonal(seed=3))
    again = tf.get_variable("again", [6, 4], initializer=tf.orthogonal_initializer(2.0, seed=3))
    eye = tf.get_variable("eye", [3, 4], initializer=tf.initializers.identity(gain=0.5))
    t, w, a, e = _run([tall, wide, again, eye])
    np.testing.assert_allclose(t.T @ t, 4.0 * np.eye(4), atol=1e-5)
    w2 = w.reshape(6, 8)
    np.testing.assert_allclose(w2 @ w2.T, np.eye(6), atol=1e-5)
    np.testing.assert_array_equal(t, a)
    np.testing.assert_array_equal(e, 0.5 * np.eye(3, 4))
    with pytest.raises(ValueError, match="rank 2 or more"):
        tf.orthogonal_initializer()([5])


def test_cosine_decay_schedules_follow_their_formulas():
    gs = tf.placeholder(tf.int64, [])
    a = tf.train.cosine_decay(0.1, gs, 100, alpha=0.1)
    b = tf.train.cosine_decay_restarts(0.1, gs, 10, 2.0, 0.5)
    with tf.Session() as s:
        for k in (0, 25, 100, 150):
            want = 0.1 * (0.9 * 0.5 * (1 + math.cos(math.pi * min(k, 100) / 100)) + 0.1)
            assert float(s.run(a, {gs: k})) == pytest.approx(want, rel=1e-6)
        # periods 10, 20, 40 from steps 0, 10, 30; each restart at half the last peak
        for k, i, start, length in ((5, 0, 0, 10), (20, 1, 10, 20), (40, 2, 30, 40)):
            want = 0.1 * 0.5**i * 0.5 * (1 + math.cos(math.pi * (k - start) / length))
            assert float(s.run(b, {gs: k})) == pytest.approx(want, rel=1e-5)


def test_monitored_session_restores_a_file_or_a_folder_and_saves_nothing(tmp_path):
    w = tf.Variable(3.0, name="w")
    with tf.Session() as s:
        s.run(w.initializer)
        s.run(tf.assign_add(w, 1.0))
        path = tf.train.Saver().save(s, str(tmp_path / "model.ckpt"), global_step=7)
    before = sorted(os.listdir(tmp_path))
    for make in (
        lambda: tf.train.MonitoredSession(
            session_creator=tf.train.ChiefSessionCreator(checkpoint_filename_with_path=path)
        ),
        lambda: tf.train.SingularMonitoredSession(checkpoint_dir=str(tmp_path)),
    ):
        with tf.Graph().as_default():
            v = tf.Variable(0.0, name="w")
            with make() as sess:
                assert sess.run(v) == 4.0
            assert tf.global_variables() == [v]  # (no global step created)
    assert sorted(os.listdir(tmp_path)) == before
    with tf.Graph().as_default():
        v = tf.Variable(5.0)
        with tf.train.MonitoredSession() as sess:
            assert sess.run(v) == 5.0
        with pytest.raises(TypeError, match="ChiefSessionCreator"):
            tf.train.MonitoredSession(session_creator="chief")


# ---- round eight of TF1 programs by others (each value as TensorFlow 2.21 gives it) -----------


def test_dropout_keeps_every_element_whole_at_keep_prob_one():
    """A fed keep_prob of 1.0 changes nothing (the mask was floor(keep_prob + u), which rounds
    to 2 in float32 for u within 2^-24 of 1); at 0.5 about half survive, doubled."""
    kp = tf.placeholder(tf.float32, [])
    d = tf.nn.dropout(tf.ones([1 << 20]), keep_prob=kp)
    with tf.Session() as s:
        assert np.unique(s.run(d, {kp: 1.0})).tolist() == [1.0]
        half = s.run(d, {kp: 0.5})
    assert set(np.unique(half).tolist()) == {0.0, 2.0} and abs(half.mean() - 1.0) < 0.01


def test_an_integer_variable_without_a_gradient_is_no_optimizer_error():
    """jakeret/tf_unet: a trainable int32 global step beside the weights (TF checks the dtype
    of the variables that get a gradient only)."""
    w = tf.Variable(1.0, name="w")
    step = tf.Variable(0, name="global_step")
    train = tf.train.MomentumOptimizer(0.1, 0.2).minimize(tf.square(w - 3.0), global_step=step)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        s.run(train)
        assert s.run(w) == pytest.approx(1.4) and s.run(step) == 1


def test_regression_losses_are_float32_as_tf1s():
    x = tf.placeholder(tf.float64, [None, 2])
    y = tf.placeholder(tf.float64, [None, 2])
    feed = {x: [[1.0, 2.0]], y: [[0.5, 4.0]]}
    for f, want in (
        (tf.losses.mean_squared_error, (0.25 + 4.0) / 2),
        (tf.losses.absolute_difference, (0.5 + 2.0) / 2),
        (tf.losses.huber_loss, (0.125 + 1.5) / 2),
    ):
        loss = f(y, x)
        total = loss + tf.nn.l2_loss(tf.ones([2]))  # (a float32 regularizer adds to it)
        assert loss.dtype == tf.float32
        assert _run(loss, feed) == pytest.approx(want) and _run(total, feed) > want


def test_top_k_takes_k_as_a_tensor():
    """GraphSAGE's ranks: top_k of the negated top_k indices, k = tf.shape(x)[1]."""
    x = tf.placeholder(tf.float32, [None, None])
    k = tf.shape(x)[1]
    _, idx = tf.nn.top_k(x, k=k)
    _, ranks = tf.nn.top_k(-idx, k=k)
    vals, _ = tf.nn.top_k(x, k=tf.constant(2))  # (a constant k: a static shape)
    feed = {x: [[0.1, 0.9, 0.5], [3.0, 2.0, 1.0]]}
    i, r, v = _run([idx, ranks, vals], feed)
    assert i.tolist() == [[1, 2, 0], [0, 1, 2]] and r.tolist() == [[2, 0, 1], [0, 1, 2]]
    np.testing.assert_allclose(v, [[0.9, 0.5], [3.0, 2.0]])
    assert vals.shape.as_list() == [None, 2]


def test_contrib_batch_norm_of_a_matrix_moves_toward_the_unbiased_variance():
    """TF1's contrib batch_norm runs a 2-D input through the fused kernel as [N, 1, 1, C]:
    with decay 0 the moving variance is the batch's n / (n - 1) variance (unfused: biased)."""
    x = tf.placeholder(tf.float32, [4, 1])
    tf.contrib.layers.batch_norm(x, is_training=True, decay=0.0, scope="f")
    tf.contrib.layers.batch_norm(x, is_training=True, decay=0.0, fused=False, scope="u")
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        s.run(tf.get_collection(tf.GraphKeys.UPDATE_OPS), {x: [[0.0], [1.0], [2.0], [3.0]]})
        got = {v.op.name: float(s.run(v)[0]) for v in tf.global_variables() if "variance" in v.name}
    assert got == pytest.approx({"f/moving_variance": 5.0 / 3.0, "u/moving_variance": 1.25})


def test_tf1_module_paths_programs_import():
    import hetbed.compat.v1.python.framework.tensor_shape as tensor_shape
    from hetbed.compat.v1.contrib.tensorboard.plugins import projector
    from hetbed.compat.v1.python.framework import tensor_util
    from hetbed.compat.v1.python.layers import utils
    from hetbed.compat.v1.python.ops import tensor_array_ops

    assert tf.compat.v1 is tf and tf.compat.v1.Session is tf.Session
    assert hasattr(projector, "visualize_embeddings")
    assert tensor_shape.TensorShape([None, 2]).as_list() == [None, 2]
    assert tensor_shape.scalar().ndims == 0 and tensor_shape.unknown_shape().ndims is None
    assert tensor_util.constant_value(tf.constant(0.9)) == pytest.approx(0.9)
    assert tensor_util.constant_value(tf.placeholder(tf.float32)) is None
    training = tf.placeholder_with_default(True, [])
    y = utils.smart_cond(training, lambda: tf.constant(1.0), lambda: tf.constant(2.0))
    assert utils.smart_cond(False, lambda: 1, lambda: 2) == 2
    ta = tensor_array_ops.TensorArray(dtype=tf.float32, size=2).write(0, 1.0).write(1, 2.0)
    with tf.Session() as s:
        assert s.run(y) == 1.0 and s.run(y, {training: False}) == 2.0
        assert s.run(ta.stack()).tolist() == [1.0, 2.0]


def test_flags_iterate_and_index_as_absl_s():
    """DCGAN-tensorflow: {k: FLAGS[k].value for k in FLAGS}."""
    flags = tf.app.flags.FlagValues()
    tf.app.flags.DEFINE_integer("epochs_t", 25, "epochs", flag_values=flags)
    tf.app.flags.DEFINE_string("name_t", "x", "name", flag_values=flags)
    flags(["prog", "--epochs_t", "3"])
    assert {k: flags[k].value for k in flags} == {"epochs_t": 3, "name_t": "x"}
    assert len(flags) == 2 and "name_t" in flags and flags["name_t"].default == "x"
    with pytest.raises(KeyError, match="unknown flag --nope"):
        flags["nope"]


def test_supervisor_runs_the_summaries_at_once_and_writes_run_metadata(tmp_path):
    """TF1's summary thread takes a queue element for a summary that dequeues (the loop's first
    dequeue is then the second element) and writes it to logdir; add_run_metadata writes a
    traced step's node stats."""
    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
    from tensorboard.compat.proto import config_pb2, event_pb2

    q = tf.FIFOQueue(10, tf.float32, shapes=[])
    enq = q.enqueue_many([[1.0, 2.0, 3.0]])
    x = q.dequeue()
    tf.summary.scalar("x", x)
    tf.train.get_or_create_global_step()
    sv = tf.train.Supervisor(logdir=str(tmp_path), save_model_secs=0)
    with sv.managed_session() as s:
        s.run(enq)
        sv.coord.wait_for_stop(1.0)
        first = s.run(x)
        md = tf.RunMetadata()
        s.run(x, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE), run_metadata=md)
        sv.summary_writer.add_run_metadata(md, "step0")
    assert first == 2.0
    events = [
        event_pb2.Event.FromString(raw)
        for f in os.listdir(tmp_path)
        if "tfevents" in f
        for raw in RawEventFileLoader(str(tmp_path / f)).Load()
    ]
    values = [(v.tag, v.simple_value) for e in events for v in e.summary.value]
    assert values == [("x", 1.0)]
    (tagged,) = [e.tagged_run_metadata for e in events if e.HasField("tagged_run_metadata")]
    rm = config_pb2.RunMetadata.FromString(tagged.run_metadata)
    nodes = {n.node_name for d in rm.step_stats.dev_stats for n in d.node_stats}
    assert tagged.tag == "step0" and x.op.name in nodes


def test_streaming_auc_rmse_and_mean_iou():
    """Two batches streamed: AUC (ROC trapezoidal, PR with 50 thresholds, weighted minoring)
    equal to TensorFlow 2.21's values on the same data (0.810516, 0.912592, 0.821587) and the ROC
    near scikit-learn's exact one; RMSE and mean IoU against numpy."""
    from sklearn.metrics import roc_auc_score

    rng = np.random.RandomState(0)
    lab = (rng.rand(50) > 0.4).astype(np.int64)
    pred = np.clip(lab * 0.3 + rng.rand(50) * 0.7, 0, 1).astype(np.float32)
    w = rng.rand(50).astype(np.float32)
    L = tf.placeholder(tf.int64, [None])
    P = tf.placeholder(tf.float32, [None])
    W = tf.placeholder(tf.float32, [None])
    roc = tf.metrics.auc(L, P)
    pr = tf.metrics.auc(L, P, curve="PR", num_thresholds=50, name="pr")
    mino = tf.metrics.auc(L, P, weights=W, summation_method="minoring", name="mi")
    rmse = tf.metrics.root_mean_squared_error(tf.cast(L, tf.float32), P)
    cl, cp = tf.placeholder(tf.int64, [None]), tf.placeholder(tf.int64, [None])
    iou = tf.metrics.mean_iou(cl, cp, 4)
    labels, preds = [0, 1, 2, 2, 1], [0, 2, 2, 1, 1]
    with tf.Session() as s:
        s.run(tf.local_variables_initializer())
        for half in (slice(0, 25), slice(25, 50)):
            s.run([roc[1], pr[1], mino[1], rmse[1]], {L: lab[half], P: pred[half], W: w[half]})
        cm = s.run(iou[1], {cl: labels, cp: preds})
        got = s.run([roc[0], pr[0], mino[0], rmse[0], iou[0]])
    np.testing.assert_allclose(got[:3], [0.810516, 0.912592, 0.821587], rtol=2e-6)
    assert got[0] == pytest.approx(roc_auc_score(lab, pred), abs=0.01)
    assert got[3] == pytest.approx(np.sqrt(np.mean((lab - pred) ** 2)), rel=1e-6)
    want_cm = np.zeros((4, 4))
    np.add.at(want_cm, (labels, preds), 1.0)
    np.testing.assert_array_equal(cm, want_cm)
    inter = np.diag(want_cm)
    union = want_cm.sum(0) + want_cm.sum(1) - inter
    assert got[4] == pytest.approx(np.mean(inter[union > 0] / union[union > 0]))  # (class 3 unseen)
    assert len(tf.get_collection(tf.GraphKeys.METRIC_VARIABLES)) == 4 * 3 + 2 + 1
    with pytest.raises(ValueError, match="curve must be 'ROC' or 'PR'"):
        tf.metrics.auc(L, P, curve="XY")


def test_dataset_concatenate_and_shard():
    a = tf.data.Dataset.from_tensor_slices(np.arange(5, dtype=np.int64))
    b = tf.data.Dataset.range(10, 13)
    both = a.concatenate(b)
    it = both.shard(2, 1).make_one_shot_iterator().get_next()
    rows = tf.data.Dataset.from_tensor_slices(np.zeros((2, 3), np.float32)).concatenate(
        tf.data.Dataset.from_tensor_slices(np.zeros((1, 4), np.float32))
    )
    got = []
    with tf.Session() as s:
        while True:
            try:
                got.append(int(s.run(it)))
            except tf.errors.OutOfRangeError:
                break
    assert got == [1, 3, 10, 12]  # (0, 1, 2, 3, 4, 10, 11, 12: every second from the second)
    assert rows.output_shapes.as_list() == [None]
    with pytest.raises(TypeError, match="elements differ"):
        a.concatenate(tf.data.Dataset.from_tensor_slices(np.zeros(2, np.float32)))
    with pytest.raises(tf.errors.InvalidArgumentError, match="0 <= index < num_shards"):
        a.shard(2, 2)


def test_graph_defs_for_tensorboard_and_write_graph(tmp_path):
    """Graph.as_graph_def / Session.graph_def give TensorFlow's GraphDef proto (names, types,
    inputs, devices); write_graph writes it as text or binary; FileWriter takes it as TF1's
    FileWriter(logdir, sess.graph_def) does."""
    from google.protobuf import text_format
    from tensorboard.compat.proto import graph_pb2

    x = tf.constant(1.0, name="x")
    with tf.control_dependencies([x]):
        tf.add(x, 2.0, name="y")
    with tf.Session() as s:
        gd = s.graph_def
        text = tf.train.write_graph(gd, str(tmp_path), "g.pbtxt")
        binary = tf.train.write_graph(s.graph, str(tmp_path), "g.pb", as_text=False)
        tf.summary.FileWriter(str(tmp_path / "ev"), s.graph_def).close()
    nodes = {n.name: n for n in gd.node}
    assert nodes["y"].op == "AddV2" or nodes["y"].op == "Add"
    assert list(nodes["y"].input)[0] == "x" and "^x" in nodes["y"].input
    back = text_format.Parse(open(text).read(), graph_pb2.GraphDef())
    assert back == gd and graph_pb2.GraphDef.FromString(open(binary, "rb").read()) == gd
    assert any("tfevents" in f for f in os.listdir(tmp_path / "ev"))


def test_fixed_unigram_candidate_sampler(tmp_path):
    """P(c) ∝ count(c)^0.75: expected counts k p (TensorFlow gives 2.9289322 and 1.0355339 here);
    10,000 draws land near p and never on a class of count 0; a vocab file's last field is
    the count, after the reserved ids."""
    labels = tf.constant([[0], [1], [2]], tf.int64)
    w = np.array([4.0, 1.0, 1.0, 0.0]) ** 0.75
    p = w / w.sum()
    s, t, e = tf.nn.fixed_unigram_candidate_sampler(
        labels, 1, 5, False, 4, distortion=0.75, unigrams=[4.0, 1.0, 1.0, 0.0]
    )
    many, _, _ = tf.nn.fixed_unigram_candidate_sampler(
        labels, 1, 10000, False, 4, distortion=0.75, unigrams=[4.0, 1.0, 1.0, 0.0], seed=1
    )
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("the,10\nof,0\nand,30\n")
    uniq, _, ue = tf.nn.fixed_unigram_candidate_sampler(
        labels, 1, 2, True, 4, vocab_file=str(vocab), num_reserved_ids=1, seed=2
    )
    a, b, c, m, u, uc = _run([s, t, e, many, uniq, ue])
    np.testing.assert_allclose(b.ravel(), 5 * p[[0, 1, 2]], rtol=1e-6)
    np.testing.assert_allclose(c, 5 * p[a], rtol=1e-6)
    assert b.ravel()[0] == pytest.approx(2.9289322, rel=1e-6)
    np.testing.assert_allclose(np.bincount(m, minlength=4) / m.size, p, atol=0.02)
    assert sorted(u.tolist()) == [1, 3]  # (the two ids of nonzero count: 10 and 30)
    pu = {1: 0.25, 3: 0.75}
    for cls, got in zip(u.tolist(), uc.tolist()):  # k p when the first k draws were distinct,
        assert got == pytest.approx(2 * pu[cls]) or 0 < got <= 1  # else 1 - (1 - p)^tries
    with pytest.raises(tf.errors.InvalidArgumentError, match="make 3 classes; range_max is 4"):
        tf.nn.fixed_unigram_candidate_sampler(labels, 1, 2, False, 4, unigrams=[1, 2, 3])


def test_hsv_conversions_hue_and_saturation():
    """Against Python's colorsys pixel by pixel; red turned a third of the circle is green;
    saturation 0 leaves the value (max channel) gray; uint8 images round trip through float.
    (TensorFlow 2.21 gives the same to 4e-7 on these images.)"""
    import colorsys

    rng = np.random.RandomState(0)
    img = rng.rand(4, 5, 3).astype(np.float32)
    img[0, 0], img[0, 1], img[0, 2] = [0.5, 0.5, 0.5], [0, 0, 0], [1, 0, 0]
    x = tf.constant(img)
    hsv, back, green, gray, hue_u8 = _run(
        [
            tf.image.rgb_to_hsv(x),
            tf.image.hsv_to_rgb(tf.image.rgb_to_hsv(x)),
            tf.image.adjust_hue(tf.constant([[[1.0, 0.0, 0.0]]]), 1.0 / 3.0),
            tf.image.adjust_saturation(x, 0.0),
            tf.image.random_hue(tf.constant(np.full((2, 2, 3), 128, np.uint8)), 0.2, seed=1),
        ]
    )
    want = np.array([colorsys.rgb_to_hsv(*p) for p in img.reshape(-1, 3)]).reshape(img.shape)
    np.testing.assert_allclose(hsv, want, atol=1e-6)
    np.testing.assert_allclose(back, img, atol=1e-6)
    np.testing.assert_allclose(green.ravel(), [0.0, 1.0, 0.0], atol=1e-6)
    np.testing.assert_allclose(gray, np.repeat(img.max(-1, keepdims=True), 3, -1), atol=1e-6)
    assert hue_u8.dtype == np.uint8 and (hue_u8 == 128).all()  # (gray has no hue to turn)
    with pytest.raises(ValueError, match="max_delta must be in"):
        tf.image.random_hue(x, 0.7)


def test_make_callable_export_meta_graph_and_checkpoints_iterator(tmp_path):
    a = tf.placeholder(tf.float32, [])
    b = tf.placeholder(tf.float32, [])
    w = tf.Variable(2.0, name="w")
    with tf.Session() as s:
        s.run(w.initializer)
        f = s.make_callable([a * b + w, w], [a, b])
        assert f(3.0, 4.0) == [14.0, 2.0]
        with pytest.raises(TypeError, match="takes 2 feed values"):
            f(1.0)
        saver = tf.train.Saver()
        doc = saver.export_meta_graph(str(tmp_path / "g.meta"))
        assert os.path.getsize(tmp_path / "g.meta") > 0 and "w" in str(doc)
        seen = []
        it = tf.train.checkpoints_iterator(str(tmp_path), timeout=0.3)
        saver.save(s, str(tmp_path / "m"), global_step=1)
        seen.append(next(it))
        saver.save(s, str(tmp_path / "m"), global_step=2)
        seen += list(it)  # (the second, then nothing new within 0.3 s: the end)
    assert [os.path.basename(p) for p in seen] == ["m-1", "m-2"]


def test_feedable_iterator_switches_between_datasets_by_handle():
    """TF1's train/validation switch: a one-shot training iterator and an initializable
    validation one, read through from_string_handle by the handle fed (same sequence as
    TensorFlow 2.21: 0 2 4 | 0 -1 -2 | end | 6 | 0)."""
    train = tf.data.Dataset.range(100).map(lambda x: x * 2).repeat()
    val = tf.data.Dataset.range(3).map(lambda x: -x)
    handle = tf.placeholder(tf.string, shape=[])
    it = tf.data.Iterator.from_string_handle(
        handle, tf.data.get_output_types(train), tf.data.get_output_shapes(train)
    )
    nxt = it.get_next()
    train_it = train.make_one_shot_iterator()
    val_it = val.make_initializable_iterator()
    with tf.Session() as s:
        th, vh = s.run([train_it.string_handle(), val_it.string_handle()])
        with pytest.raises(tf.errors.FailedPreconditionError, match="not been initialized"):
            s.run(nxt, {handle: vh})
        assert [int(s.run(nxt, {handle: th})) for _ in range(3)] == [0, 2, 4]
        s.run(val_it.initializer)
        assert [int(s.run(nxt, {handle: vh})) for _ in range(3)] == [0, -1, -2]
        with pytest.raises(tf.errors.OutOfRangeError):
            s.run(nxt, {handle: vh})
        assert int(s.run(nxt, {handle: th})) == 6
        with pytest.raises(tf.errors.InvalidArgumentError, match="not an iterator handle"):
            s.run(nxt, {handle: b"nonsense"})


def test_init_from_checkpoint_maps_tensors_and_scopes(tmp_path):
    """A scope to a scope, a tensor to a Variable or to a variable's name (the values
    TensorFlow 2.21 gives on the same script); what the checkpoint or the graph lacks, and a
    shape that differs, are refused."""
    with tf.Graph().as_default():
        with tf.variable_scope("old"):
            tf.get_variable("a", initializer=np.float32([1.0, 2.0]))
            tf.get_variable("b", initializer=np.float32(3.0))
        tf.get_variable("c", initializer=np.float32(4.0))
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            path = tf.train.Saver().save(s, str(tmp_path / "m"))
    with tf.variable_scope("new"):
        a = tf.get_variable("a", [2])
        b = tf.get_variable("b", [])
    x = tf.get_variable("x", [])
    y = tf.get_variable("y", [])
    tf.train.init_from_checkpoint(str(tmp_path), {"old/": "new/", "c": x})
    tf.train.init_from_checkpoint(path, {"old/b": "y"})
    got = _run([a, b, x, y])
    assert got[0].tolist() == [1.0, 2.0] and got[1:] == [3.0, 4.0, 3.0]
    for bad, msg in (
        ({"nope": "x"}, "tensor 'nope' is not in"),
        ({"c": "new/zz"}, "no variable of the graph"),
        ({"old/a": "x"}, r"has shape \(\), the checkpoint's 'old/a' \[2\]"),
    ):
        with pytest.raises(ValueError, match=msg):
            tf.train.init_from_checkpoint(path, bad)
