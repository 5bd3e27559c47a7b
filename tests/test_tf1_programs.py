"""What stopped real TF1 programs (tutorials and examples written by others, run with only the
import line changed): TF1's import forms of tf.contrib, a checkpoint directory made on save,
histogram buckets as TF encodes them, a float sequence_length, queue runners through a meta
graph, and scalars fetched as numpy scalars. Values against closed forms, numpy, and TF itself
where it is installed."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

import hetbed.compat.v1 as tf


@pytest.fixture(autouse=True)
def _fresh_graph():
    with tf.Graph().as_default():
        yield


def test_tf1_import_forms_of_namespaces():
    """``from tensorflow.contrib import rnn`` and ``import tensorflow.contrib.slim as slim``
    become imports of hetbed.compat.v1's namespaces, the same objects as the attributes."""
    import hetbed.compat.v1.contrib.slim as slim
    from hetbed.compat.v1.contrib import layers, rnn
    from hetbed.compat.v1.nn import rnn_cell
    from hetbed.compat.v1.train import AdamOptimizer

    assert rnn.BasicLSTMCell is tf.contrib.rnn.BasicLSTMCell
    assert layers is tf.contrib.layers and slim is tf.contrib.slim
    assert rnn_cell.GRUCell is tf.nn.rnn_cell.GRUCell
    assert AdamOptimizer is tf.train.AdamOptimizer
    with pytest.raises(ModuleNotFoundError):
        import hetbed.compat.v1.contrib.no_such_thing  # noqa: F401


def test_saver_makes_a_missing_checkpoint_directory_one_level(tmp_path):
    """As TF's V2 checkpoints: a missing directory whose parent exists is made; two missing
    levels are an error that names the path, and nothing is written."""
    v = tf.Variable(3.0, name="v")
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        path = saver.save(sess, str(tmp_path / "ckpt" / "model"), global_step=7)
        assert path == str(tmp_path / "ckpt" / "model-7")
        deep = tmp_path / "a" / "b" / "model"
        with pytest.raises(ValueError, match="parent directory"):
            saver.save(sess, str(deep))
        assert not (tmp_path / "a").exists()
        sess.run(v.assign(0.0))
        saver.restore(sess, path)
        assert sess.run(v) == 3.0


def _tf_encoded(counts: np.ndarray, limits: np.ndarray) -> tuple[list, list]:
    """TF's Histogram::EncodeToProto, written as its loop: each run of empty buckets becomes
    one bucket of count 0 whose limit is the run's last."""
    out_l, out_c, i = [], [], 0
    while i < len(counts):
        end, count = limits[i], counts[i]
        i += 1
        if count <= 0:
            while i < len(counts) and counts[i] <= 0:
                end, count = limits[i], counts[i]
                i += 1
        out_l.append(float(end))
        out_c.append(float(count))
    return out_l, out_c


def test_histogram_buckets_collapse_runs_of_empty_buckets_as_tf_does():
    from hetbed.runtime.ops.summary import default_bucket_limits, histogram_proto

    limits = default_bucket_limits()
    x = np.concatenate([np.linspace(-0.5, 0.5, 101), [7.0, 7.0, 1e6]])
    h = histogram_proto(x)
    counts = np.bincount(np.searchsorted(limits, x, side="right"), minlength=limits.size)
    want_l, want_c = _tf_encoded(counts, limits)
    assert list(h.bucket_limit) == want_l and list(h.bucket) == want_c
    assert sum(h.bucket) == x.size and h.bucket[0] == 0.0 and h.bucket_limit[-1] == limits[-1]
    # every kept bucket's lower edge is the previous limit: the empty runs hold the gaps
    assert any(c == 0.0 for c in h.bucket[1:-1])


def test_histogram_summary_against_tensorflow():
    tf_real = pytest.importorskip("tensorflow.compat.v1")
    x = np.linspace(-0.5, 0.5, 1001).astype(np.float32)
    with tf.Session() as sess:
        ours = tf_real.Summary.FromString(sess.run(tf.summary.histogram("h", tf.constant(x))))
    g = tf_real.Graph()
    with g.as_default(), tf_real.Session(graph=g) as sess:
        theirs = tf_real.Summary.FromString(sess.run(tf_real.summary.histogram("h", x)))
    a, b = ours.value[0].histo, theirs.value[0].histo
    assert list(a.bucket) == list(b.bucket)
    np.testing.assert_allclose(a.bucket_limit, b.bucket_limit, rtol=1e-12)


@pytest.mark.parametrize("time_known", [True, False])
def test_dynamic_rnn_takes_a_float_sequence_length(time_known):
    """A float sequence_length (a sum of tf.sign over one-hot inputs, as in a char-RNN
    tutorial) is cast to int32 as TF does: the outputs equal those of the int lengths, zeros
    past each row's length."""
    x = tf.placeholder(tf.float32, [None, 5 if time_known else None, 3])
    flen = tf.reduce_sum(tf.reduce_max(tf.sign(x), 2), 1)
    cell = tf.nn.rnn_cell.GRUCell(4)
    out_f, st_f = tf.nn.dynamic_rnn(cell, x, flen, dtype=tf.float32, scope="r")
    out_i, st_i = tf.nn.dynamic_rnn(cell, x, tf.cast(flen, tf.int32), dtype=tf.float32, scope="r")
    xv = np.zeros((2, 5, 3), np.float32)
    xv[0, :3] = 1.0  # row 0: length 3; row 1: length 0
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        a, b, sa, sb = sess.run([out_f, out_i, st_f, st_i], {x: xv})
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(sa, sb)
    assert np.abs(a[0, :3]).sum() > 0 and not a[0, 3:].any() and not a[1].any()
    with pytest.raises(ValueError, match="sequence_length"):
        tf.nn.dynamic_rnn(cell, x, tf.zeros([2, 2]), dtype=tf.float32, scope="r2")


def test_queue_runners_survive_a_meta_graph_round_trip():
    """An input pipeline of queue runners (range_input_producer), exported and imported as a
    meta graph (the PTB tutorial's export_ops/import_ops): its runner is in the collection again,
    on the imported ops, and start_queue_runners feeds the dequeue in order."""
    with tf.Graph().as_default():
        i = tf.train.range_input_producer(5, shuffle=False).dequeue()
        tf.add_to_collection("i", i)
        meta = tf.train.export_meta_graph()
    with tf.Graph().as_default() as g:
        tf.train.import_meta_graph(meta)
        (runner,) = tf.get_collection(tf.GraphKeys.QUEUE_RUNNERS)
        assert runner.queue.queue_ref.graph is g and runner.enqueue_ops[0].graph is g
        i = tf.get_collection("i")[0]
        with tf.Session() as sess:
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(sess, coord=coord)
            timer = threading.Timer(20, lambda: os._exit(3))  # (a hang fails loudly)
            timer.start()
            try:
                got = [int(sess.run(i)) for _ in range(7)]
            finally:
                timer.cancel()
                coord.request_stop()
                coord.join(threads)
    assert got == [0, 1, 2, 3, 4, 0, 1]


def test_a_malformed_queue_runner_item_is_named():
    from hetbed.runtime import serialize

    with tf.Graph().as_default() as g:
        tf.train.range_input_producer(3, shuffle=False)
        doc = serialize.graph_to_dict(g)
    (item,) = doc["collections"][tf.GraphKeys.QUEUE_RUNNERS]
    item["queue_runner"]["closed_exceptions"] = ["SystemExit"]
    with pytest.raises(serialize.GraphFormatError, match="closed_exceptions"):
        serialize.graph_from_dict(doc)
    item["queue_runner"]["closed_exceptions"] = ["OutOfRangeError"]
    item["queue_runner"]["queue"] = item["queue_runner"]["close_op"] + ":0"
    with pytest.raises(serialize.GraphFormatError, match="queue"):
        serialize.graph_from_dict(doc)


def test_scalars_are_fetched_as_numpy_scalars():
    """As in TF: a 0-d fetch is numpy's scalar of its dtype (hashable), a string one bytes;
    arrays stay arrays."""
    c = tf.constant(3.0)
    v = tf.Variable(2, name="v")
    s = tf.constant("ab")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got = sess.run([c, v, c * 2.0, s, tf.constant([1.0])])
    assert type(got[0]) is np.float32 and got[0] == 3.0
    assert type(got[1]) is np.int32 and {got[1]: "step"}[2] == "step"
    assert type(got[2]) is np.float32 and got[2] == 6.0
    assert got[3] == b"ab"
    assert isinstance(got[4], np.ndarray) and got[4].shape == (1,)


def test_gate_op_updates_use_the_gradients_of_the_weights_before_the_step():
    """An optimizer's default gate_gradients (GATE_OP) makes each op's input gradients
    available together, so a weight's update waits for the gradient that reads the weight
    (MatMul's gradient to its input): after one step, every variable is exactly
    V0 - lr x g(V0), the gradients computed beforehand at V0, on a deep net fed from a queue
    (the cifar10 tutorial's pipeline, which diverged without it)."""
    rs = np.random.RandomState(0)
    x0 = tf.constant(rs.randn(16).astype(np.float32))
    x, y = tf.train.batch([x0, tf.constant(3)], 8, capacity=50)
    h = x
    for n in (64, 64, 64, 10):
        w = tf.Variable(rs.randn(int(h.shape[1]), n).astype(np.float32) * 0.3)
        h = tf.matmul(h, w)
        h = tf.nn.relu(h) if n != 10 else h
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h))
    tv = tf.trainable_variables()
    grads = tf.gradients(loss, tv)
    train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    # the gate: a MatMul whose two gradients are both wanted passes them through identities
    # after one group
    names = [op.name for op in tf.get_default_graph().get_operations()]
    assert any("MatMul_1_grad/tuple/control_dependency" in n for n in names)
    assert not any("MatMul_grad/tuple" in n for n in names)  # (its input x needs no gradient)
    # (an op that reads no variable, e.g. the loss's mean, is not gated: its gradients read
    # nothing an update changes)
    assert not any("Mean_grad/tuple" in n or "Relu_grad/tuple" in n for n in names)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord=coord)
        try:
            for _ in range(4):
                v0, g0 = sess.run(tv), sess.run(grads)
                sess.run(train)
                for a, g, b in zip(v0, g0, sess.run(tv)):
                    np.testing.assert_array_equal(b, (a - np.float32(0.5) * g).astype(np.float32))
        finally:
            coord.request_stop()
            coord.join(threads)


def test_gate_none_builds_no_gates():
    w = tf.Variable(np.ones((3, 2), np.float32))
    loss = tf.reduce_sum(tf.matmul(tf.constant(np.ones((4, 3), np.float32)), w))
    before = len(tf.get_default_graph().get_operations())
    tf.train.GradientDescentOptimizer(0.1).minimize(loss, gate_gradients=0)
    names = [op.name for op in tf.get_default_graph().get_operations()[before:]]
    assert not any("/tuple/" in n for n in names)


# a custom optimizer written against TF1's private modules, as TF1-era code subclasses it (the
# shape of COCOB's, from a PTB fork): slots made from tensors, state_ops / control_flow_ops
_CUSTOM_OPT = """
from {pkg}.python.framework import constant_op, ops
from {pkg}.python.ops import control_flow_ops, state_ops
from {pkg}.python.training.optimizer import Optimizer


class Scaled(Optimizer):
    def __init__(self, lr=0.1, use_locking=False, name="Scaled"):
        super().__init__(use_locking, name)
        self._lr = lr

    def _prepare(self):
        self._lr_t = ops.convert_to_tensor(self._call_if_callable(self._lr), name="lr")

    def _create_slots(self, var_list):
        for v in var_list:
            with ops.colocate_with(v):
                one = constant_op.constant(1.0, shape=v.get_shape(), dtype=v.dtype.base_dtype)
            self._get_or_make_slot(v, one, "scale", self._name)
            self._zeros_slot(v, "steps", self._name)

    def _apply_dense(self, grad, var):
        scale, steps = self.get_slot(var, "scale"), self.get_slot(var, "steps")
        new_scale = scale * 0.5
        return control_flow_ops.group(
            state_ops.assign_sub(var, self._lr_t * new_scale * grad),
            state_ops.assign(scale, new_scale),
            state_ops.assign_add(steps, steps * 0.0 + 1.0),
        )
"""


def _custom_losses(tf_mod, pkg):
    ns: dict = {}
    exec(_CUSTOM_OPT.format(pkg=pkg), ns)  # noqa: S102 - the test's own source above
    rs = np.random.RandomState(1)
    xs, ys = rs.randn(32, 4).astype(np.float32), rs.randn(32, 1).astype(np.float32)
    w = tf_mod.Variable(rs.randn(4, 1).astype(np.float32), name="w")
    loss = tf_mod.reduce_mean(tf_mod.square(tf_mod.matmul(xs, w) - ys))
    opt = ns["Scaled"](lr=lambda: 0.5)
    train = opt.minimize(loss)
    with tf_mod.Session() as sess:
        sess.run(tf_mod.global_variables_initializer())
        out = [float(sess.run([train, loss])[1]) for _ in range(5)]
        slots = sess.run([opt.get_slot(w, "scale"), opt.get_slot(w, "steps")])
    return out, slots, opt.get_slot(w, "scale").op.name


def test_a_custom_optimizer_on_tf1s_private_modules():
    losses, (scale, steps), name = _custom_losses(tf, "hetbed.compat.v1")
    np.testing.assert_allclose(scale, 0.5**5)
    np.testing.assert_allclose(steps, 5.0)
    assert name == "w/Scaled"
    assert losses[-1] < losses[0]
    real = pytest.importorskip("tensorflow.compat.v1")
    real.disable_v2_behavior()
    with real.Graph().as_default():
        want, _, want_name = _custom_losses(real, "tensorflow")
    np.testing.assert_allclose(losses, want, rtol=1e-5)
    assert name == want_name


def test_tf1_private_module_names_resolve_or_name_what_is_missing():
    from hetbed.compat.v1.python.ops import control_flow_ops, math_ops, state_ops
    from hetbed.compat.v1.python.platform import gfile

    assert math_ops.reduce_sum is tf.reduce_sum and state_ops.assign is tf.assign
    assert gfile.Exists is tf.gfile.Exists
    with pytest.raises(AttributeError, match="math_ops.no_such_op"):
        math_ops.no_such_op  # noqa: B018
    a = tf.Variable(1.0)
    out = control_flow_ops.with_dependencies([a.assign(5.0)], tf.constant(2.0))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(out) == 2.0 and sess.run(a) == 5.0


def test_learning_rate_schedules_are_the_ops_named_as_their_scope():
    """As TF's: ``exponential_decay(...)`` is the tensor "ExponentialDecay:0" (programs fetch it
    by name), and its value is the closed form."""
    gs = tf.train.get_or_create_global_step()
    lr = tf.train.exponential_decay(0.1, gs, 10, 0.5, staircase=True)
    inv = tf.train.inverse_time_decay(0.1, gs, 10, 0.5)
    poly = tf.train.polynomial_decay(0.1, gs, 100, end_learning_rate=0.01)
    assert (lr.name, inv.name, poly.name) == (
        "ExponentialDecay:0", "InverseTimeDecay:0", "PolynomialDecay:0",
    )  # fmt: skip
    g = tf.get_default_graph()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(tf.assign(gs, 25))
        got = sess.run([g.get_tensor_by_name("ExponentialDecay:0"), inv, poly])
    np.testing.assert_allclose(got, [0.1 * 0.5**2, 0.1 / (1 + 0.5 * 2.5), 0.09 * 0.75 + 0.01],
                               rtol=1e-6)  # fmt: skip


def test_a_variables_own_output_read_as_a_value():
    """``get_tensor_by_name("hidden1/kernel:0")`` is the variable's reference; used as an
    ordinary input (an L1 penalty, a max-norm clip: handson-ml's chapter 11) it is read, and the
    optimizer's gradient counts that use too, as TF1's."""
    w0 = np.arange(6, dtype=np.float32).reshape(3, 2) - 2.5
    with tf.variable_scope("hidden1"):
        w = tf.get_variable("kernel", initializer=tf.constant(w0))
    ref = tf.get_default_graph().get_tensor_by_name("hidden1/kernel:0")
    loss = tf.reduce_sum(w * w) + tf.reduce_sum(tf.abs(ref))
    ((g, _),) = tf.train.GradientDescentOptimizer(0.1).compute_gradients(loss)
    clip = tf.assign(ref, tf.clip_by_norm(ref, clip_norm=1.0, axes=1))
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        got_loss, got_g = s.run([loss, g])
        s.run(clip)
        clipped = s.run(w)
    np.testing.assert_allclose(got_loss, (w0**2).sum() + np.abs(w0).sum())
    np.testing.assert_allclose(got_g, 2 * w0 + np.sign(w0))
    norms = np.linalg.norm(w0, axis=1, keepdims=True)
    np.testing.assert_allclose(clipped, w0 / np.maximum(norms, 1.0), rtol=1e-6)


def test_dtypes_copy_as_themselves_and_still_refuse_pickle():
    """sklearn's ``clone`` deep-copies estimator parameters, an initializer holding a dtype among
    them; a dtype is a singleton, so its copy is itself (pickling stays refused: no pickle)."""
    import copy

    init = tf.variance_scaling_initializer()
    assert copy.deepcopy(tf.float32) is tf.float32 and copy.copy(tf.int64) is tf.int64
    assert copy.deepcopy(init).dtype is init.dtype
    with pytest.raises(TypeError, match="not picklable"):
        tf.float32.__reduce_ex__(4)  # what pickling a dtype would call


def test_float16_products_compute_in_float32_rounded_once():
    """tensorflow/models' MNIST convolutional.py --use_fp16: float16 convolutions and products
    (numpy has no fast half GEMM) give the float32 result rounded to float16 once, forward and
    backward."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 9, 9, 3)).astype(np.float16)
    f = (rng.standard_normal((3, 3, 3, 4)) * 0.1).astype(np.float16)
    a = rng.standard_normal((5, 7)).astype(np.float16)
    b = rng.standard_normal((7, 3)).astype(np.float16)

    def build(dt):
        xv, fv = tf.constant(x.astype(dt)), tf.constant(f.astype(dt))
        y = tf.nn.conv2d(xv, fv, [1, 2, 2, 1], "SAME")
        dx, df = tf.gradients(tf.reduce_sum(y * y), [xv, fv])
        return [y, dx, df, tf.matmul(tf.constant(a.astype(dt)), tf.constant(b.astype(dt)))]

    half, single = build(np.float16), build(np.float32)
    with tf.Session() as s:
        got, ref = s.run(half), s.run(single)
    assert all(g.dtype == np.float16 for g in got)
    np.testing.assert_array_equal(got[0], ref[0].astype(np.float16))
    np.testing.assert_array_equal(got[3], ref[3].astype(np.float16))
    # the gradients' inputs (y * 2) are float16 values themselves: within float16 rounding
    for g, r in zip(got[1:3], ref[1:3]):
        np.testing.assert_allclose(g.astype(np.float32), r, rtol=2e-2, atol=2e-3)


def test_projection_wrappers_name_and_compute_as_tf1():
    """contrib.rnn's OutputProjectionWrapper (handson-ml's RNN time series) and
    InputProjectionWrapper: TF1's variable names, and a projection of the cell's output (input)
    by a matmul and a bias, against numpy."""
    x = np.arange(10, dtype=np.float32).reshape(2, 5, 1) / 10
    inp = tf.placeholder(tf.float32, [None, 5, 1])
    cell = tf.contrib.rnn.OutputProjectionWrapper(
        tf.nn.rnn_cell.BasicRNNCell(num_units=4, activation=tf.nn.relu), output_size=1
    )
    out, _ = tf.nn.dynamic_rnn(cell, inp, dtype=tf.float32)
    names = sorted(v.name for v in tf.global_variables())
    assert names == [
        "rnn/output_projection_wrapper/basic_rnn_cell/bias:0",
        "rnn/output_projection_wrapper/basic_rnn_cell/kernel:0",
        "rnn/output_projection_wrapper/bias:0",
        "rnn/output_projection_wrapper/kernel:0",
    ]
    with tf.variable_scope("in"):
        wrapped = tf.contrib.rnn.InputProjectionWrapper(tf.nn.rnn_cell.BasicRNNCell(3), num_proj=2)
        tf.nn.dynamic_rnn(wrapped, inp, dtype=tf.float32)
    assert "in/rnn/input_projection_wrapper/kernel:0" in [v.name for v in tf.global_variables()]
    vals = {}
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        for v in tf.global_variables():
            if v.name.startswith("rnn/"):
                vals[v.name] = np.linspace(-0.5, 0.5, v.shape.num_elements()).reshape(
                    v.shape.as_list()).astype(np.float32)  # fmt: skip
                v.load(vals[v.name], s)
        got = s.run(out, {inp: x})
    p = "rnn/output_projection_wrapper/"
    h = np.zeros((2, 4), np.float32)
    want = []
    for t in range(5):
        z = np.concatenate([x[:, t], h], 1) @ vals[p + "basic_rnn_cell/kernel:0"]
        h = np.maximum(z + vals[p + "basic_rnn_cell/bias:0"], 0)
        want.append(h @ vals[p + "kernel:0"] + vals[p + "bias:0"])
    np.testing.assert_allclose(got, np.stack(want, 1), rtol=1e-5, atol=1e-6)


def test_slim_model_analyzer_counts_and_prints_as_slim(capsys):
    import hetbed.compat.v1.contrib.slim as slim

    with tf.variable_scope("g"):
        tf.get_variable("w", [3, 4])
        tf.get_variable("b", [4], dtype=tf.float64)
    assert slim.model_analyzer.analyze_vars(tf.trainable_variables(), print_info=True) == (16, 80)
    out = capsys.readouterr().out.splitlines()
    assert out[3:] == [
        "g/w:0 (float32_ref 3x4) [12, bytes: 48]",
        "g/b:0 (float64_ref 4) [4, bytes: 32]",
        "Total size of variables: 16",
        "Total bytes of variables: 80",
    ]


@pytest.mark.parametrize("training", [True, False])
def test_a_gradient_penalty_through_a_fused_batch_norm(training):
    """WGAN-GP and DRAGAN penalize the norm of a gradient taken through a batch norm: the
    gradient of FusedBatchNormGrad, against central differences (float64)."""
    rs = np.random.RandomState(0)
    x = tf.constant(rs.randn(4, 3, 3, 2))
    w = tf.placeholder(tf.float64, [2])
    scale = tf.placeholder(tf.float64, [2])
    stats = (
        []
        if training
        else [tf.constant([0.3, -0.2], tf.float64), tf.constant([1.4, 0.6], tf.float64)]
    )
    y, _, _ = tf.nn.fused_batch_norm(
        x * w, scale, tf.zeros([2], tf.float64), *stats, is_training=training
    )
    d = tf.reduce_sum(tf.nn.leaky_relu(y, 0.2) * tf.constant(rs.randn(4, 3, 3, 2)))
    (g,) = tf.gradients(d, [x])
    penalty = tf.reduce_mean((tf.sqrt(tf.reduce_sum(g**2, axis=[1, 2, 3])) - 1.0) ** 2)
    gw, gs = tf.gradients(penalty, [w, scale])
    w0, s0 = rs.randn(2) + 1.0, np.array([1.5, 0.7])
    with tf.Session() as s:
        got = s.run([gw, gs], {w: w0, scale: s0})
        e = 1e-6
        for k, (t, base) in enumerate(((w, w0), (scale, s0))):
            other = {scale: s0} if t is w else {w: w0}
            fd = [
                (
                    s.run(penalty, {t: base + e * u, **other})
                    - s.run(penalty, {t: base - e * u, **other})
                )
                / (2 * e)
                for u in np.eye(2)
            ]
            np.testing.assert_allclose(got[k], fd, rtol=1e-5, atol=1e-7)
