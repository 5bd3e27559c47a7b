"""TF1 programs written as TF1 tutorials write them run unchanged on ``hetbed.compat.v1``."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from sklearn.datasets import load_digits

import hetbed
import hetbed.compat.v1 as tf


@pytest.fixture(scope="module")
def digits():
    """load_digits scaled to [0, 1], split 75/25 by a fixed permutation."""
    d = load_digits()
    X = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    perm = np.random.default_rng(0).permutation(len(X))
    n_train = int(0.75 * len(X))
    tr, te = perm[:n_train], perm[n_train:]
    return X[tr], y[tr], X[te], y[te]


def test_tf1_mlp_trains_on_digits(digits):
    """An MLP with tf.layers, tf.get_variable, tf.losses and Adam reaches >= 97% test accuracy."""
    X_train, y_train, X_test, y_test = digits
    tf.disable_v2_behavior()
    tf.reset_default_graph()
    tf.set_random_seed(1234)

    x = tf.placeholder(tf.float32, [None, 64], name="x")
    y = tf.placeholder(tf.int64, [None], name="y")
    training = tf.placeholder_with_default(False, [], name="training")

    with tf.variable_scope("mlp"):
        hidden = tf.layers.dense(x, 128, activation=tf.nn.relu, name="hidden")
        hidden = tf.layers.dropout(hidden, rate=0.1, training=training)
        with tf.variable_scope("softmax"):
            w = tf.get_variable("w", [128, 10], initializer=tf.glorot_uniform_initializer())
            b = tf.get_variable("b", [10], initializer=tf.zeros_initializer())
        logits = tf.matmul(hidden, w) + b

    loss = tf.losses.sparse_softmax_cross_entropy(labels=y, logits=logits)
    global_step = tf.train.get_or_create_global_step()
    train_op = tf.train.AdamOptimizer(learning_rate=0.01).minimize(loss, global_step=global_step)
    correct = tf.equal(tf.argmax(logits, 1), y)
    accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))

    assert [v.name for v in tf.trainable_variables()] == [
        "mlp/hidden/kernel:0",
        "mlp/hidden/bias:0",
        "mlp/softmax/w:0",
        "mlp/softmax/b:0",
    ]
    batch_size, epochs = 64, 15
    rng = np.random.default_rng(0)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first_loss = sess.run(loss, {x: X_train, y: y_train})
        for _ in range(epochs):
            order = rng.permutation(len(X_train))
            for i in range(0, len(order), batch_size):
                idx = order[i : i + batch_size]
                sess.run(train_op, {x: X_train[idx], y: y_train[idx], training: True})
        steps = sess.run(global_step)
        final_loss = sess.run(loss, {x: X_train, y: y_train})
        test_acc = sess.run(accuracy, {x: X_test, y: y_test})
    assert steps == epochs * -(-len(X_train) // batch_size)
    assert first_loss == pytest.approx(np.log(10), rel=0.25) and final_loss < 0.05
    assert test_acc >= 0.97, f"test accuracy {test_acc:.4f}"


def test_tf1_cnn_with_batch_norm_on_digits(digits):
    """conv2d + batch_normalization (UPDATE_OPS as a control dependency) + pooling learns digits."""
    X_train, y_train, X_test, y_test = digits
    graph = tf.Graph()
    with graph.as_default():
        tf.set_random_seed(7)
        images = tf.placeholder(tf.float32, [None, 8, 8, 1])
        labels = tf.placeholder(tf.int64, [None])
        is_training = tf.placeholder(tf.bool, [])
        net = tf.layers.conv2d(images, 16, 3, padding="same", use_bias=False)
        net = tf.nn.relu(tf.layers.batch_normalization(net, momentum=0.9, training=is_training))
        net = tf.layers.max_pooling2d(net, 2, 2)
        net = tf.layers.flatten(net)
        logits = tf.layers.dense(net, 10)
        onehot = tf.one_hot(labels, 10)
        loss = tf.losses.softmax_cross_entropy(onehot_labels=onehot, logits=logits)
        update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
        with tf.control_dependencies(update_ops):
            train_op = tf.train.AdamOptimizer(0.01).minimize(loss)
        accuracy = tf.reduce_mean(tf.to_float(tf.equal(tf.argmax(logits, 1), labels)))
        moving_mean = [v for v in tf.global_variables() if "moving_mean" in v.name][0]
        imgs_train = X_train.reshape(-1, 8, 8, 1)
        rng = np.random.default_rng(1)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for _ in range(6):
                order = rng.permutation(len(X_train))
                for i in range(0, len(order), 64):
                    idx = order[i : i + 64]
                    feed = {images: imgs_train[idx], labels: y_train[idx], is_training: True}
                    sess.run(train_op, feed)
            acc = sess.run(
                accuracy, {images: X_test.reshape(-1, 8, 8, 1), labels: y_test, is_training: False}
            )
            assert np.abs(sess.run(moving_mean)).max() > 0.01  # the updates ran with train_op
    assert acc >= 0.95, f"test accuracy {acc:.4f}"


def test_namespace_has_tf1_layout():
    """tf.* names resolve to hetbed's objects, in TF1's places; TF2 switches are no-ops."""
    assert tf.placeholder is hetbed.placeholder and tf.Session is hetbed.Session
    assert tf.layers is hetbed.layers and tf.losses is hetbed.losses and tf.nn is hetbed.nn
    assert tf.train is hetbed.train and tf.initializers is hetbed.initializers
    assert tf.errors is hetbed.errors and tf.GraphKeys is hetbed.GraphKeys
    assert tf.bool is hetbed.bool_ and tf.float32 is hetbed.float32
    for name in (
        "Variable",
        "get_variable",
        "variable_scope",
        "get_variable_scope",
        "AUTO_REUSE",
        "global_variables_initializer",
        "reset_default_graph",
        "set_random_seed",
        "random_normal",
        "truncated_normal",
        "zeros_initializer",
        "glorot_uniform_initializer",
        "truncated_normal_initializer",
        "ConfigProto",
        "InteractiveSession",
        "control_dependencies",
        "name_scope",
        "device",
        "gradients",
    ):
        assert getattr(tf, name) is getattr(hetbed, name), name
    assert tf.random.set_random_seed is hetbed.set_random_seed
    assert tf.random.normal is hetbed.random_normal and tf.math.reduce_sum is hetbed.reduce_sum
    assert tf.dtypes.bool is hetbed.bool_
    assert not hasattr(tf, "runtime") and not tf.executing_eagerly()
    assert tf.disable_v2_behavior() is None and tf.disable_eager_execution() is None
    with pytest.raises(NotImplementedError, match="no eager execution"):
        tf.enable_eager_execution()


def test_logging_levels(caplog):
    """tf.logging maps onto Python logging with TF1's level names."""
    tf.logging.set_verbosity(tf.logging.INFO)
    assert tf.logging.get_verbosity() == logging.INFO
    with caplog.at_level(logging.INFO, logger="hetbed"):
        tf.logging.info("step %d", 3)
    assert "step 3" in caplog.text


def test_node_def_int_names_and_labels_of_another_float_type():
    """What TF1 programs read and pass: ``op.node_def.op`` in device functions, ``tf.NodeDef``,
    ``tf.uint8``/``tf.int16``, float64 labels beside float32 logits (cast)."""
    import numpy as np

    import hetbed.compat.v1 as tf

    ps_ops = ("Variable", "VariableV2")

    def assign(op):
        node_def = op if isinstance(op, tf.NodeDef) else op.node_def
        return "/cpu:0" if node_def.op in ps_ops else "/cpu:1"

    with tf.Graph().as_default():
        with tf.device(assign):
            w = tf.Variable(2.0, name="w")
            y = tf.multiply(w, 3.0, name="y")
        assert w.op.device.endswith("cpu:0") and y.op.device.endswith("cpu:1")
        nd = y.op.node_def
        assert (nd.name, nd.op) == ("y", "Mul") and nd.input[0] == "w/read"
        assert tf.as_dtype("uint8") == tf.uint8 != tf.int32 and tf.int16.size == 2
        logits = tf.placeholder(tf.float32, [None, 3])
        labels = tf.placeholder(tf.float64, [None, 3])
        loss = tf.nn.softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits)
        assert loss.dtype == tf.float32
        with tf.Session(config=tf.ConfigProto(device_count={"CPU": 2})) as s:
            s.run(tf.global_variables_initializer())
            lv = np.array([[0.0, 1.0, 0.0]])
            xv = np.array([[1.0, 2.0, 0.5]], np.float32)
            got = s.run(loss, {logits: xv, labels: lv})
    want = -np.log(np.exp(2.0) / np.exp(xv.astype(np.float64)).sum())
    np.testing.assert_allclose(got, [want], rtol=1e-6)


def test_second_triage_round_gaps():
    """What a second round of public TF1 programs needed: ``from tensorflow.python.framework
    import ops`` (ops.reset_default_graph), lists of tensors packed as TF1 does, dropout with a
    bool placeholder of unknown rank keeping its shape, tf.cross, contrib.seq2seq.sequence_loss."""
    import numpy as np

    import hetbed.compat.v1 as tf
    from hetbed.compat.v1.python.framework import ops

    ops.reset_default_graph()
    rng = np.random.default_rng(2)
    lv = rng.standard_normal((2, 3, 4)).astype(np.float32)
    tv = np.array([[1, 0, 3], [2, 2, 1]], np.int32)
    wv = np.array([[1, 1, 0], [1, 0.5, 1]], np.float32)
    a, b = rng.standard_normal((5, 3)), rng.standard_normal((5, 3))
    x = tf.placeholder(tf.float32, [None, 4, 4, 3])
    keep = tf.placeholder(tf.bool)
    assert tf.layers.dropout(x, 0.3, training=keep).shape.as_list() == [None, 4, 4, 3]
    s1, s2 = tf.constant(1.0), tf.constant(2.0)
    packed = tf.stop_gradient([[s1, 3.0], [s2, 4.0]])
    loss = tf.contrib.seq2seq.sequence_loss(tf.constant(lv), tf.constant(tv), tf.constant(wv))
    per_row = tf.contrib.seq2seq.sequence_loss(
        tf.constant(lv), tf.constant(tv), tf.constant(wv), average_across_batch=False
    )
    with tf.Session() as s:
        got = s.run([packed, tf.cross(a, b), tf.linalg.cross(a, b), loss, per_row])
    assert tf.get_default_graph() is ops.get_default_graph()
    np.testing.assert_array_equal(got[0], [[1, 3], [2, 4]])
    np.testing.assert_allclose(got[1], np.cross(a, b), rtol=1e-10)
    np.testing.assert_allclose(got[2], np.cross(a, b), rtol=1e-10)
    logp = lv - np.log(np.exp(lv).sum(-1, keepdims=True))
    ce = -np.take_along_axis(logp, tv[..., None], -1)[..., 0]
    np.testing.assert_allclose(got[3], (ce * wv).sum() / wv.sum(), rtol=1e-5)
    np.testing.assert_allclose(got[4], (ce * wv).sum(1) / wv.sum(1), rtol=1e-5)
