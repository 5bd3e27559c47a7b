"""Round fifteen: gaps found running tensorflow/models research/slim's train_image_classifier.py
and eval_image_classifier.py (deployment/model_deploy.py, cifar10 TFRecords, cifarnet) on hetbed.
Values are checked against numpy; the comments give what TensorFlow 2.15 (tf.compat.v1) gives."""

import numpy as np

import hetbed.compat.v1 as tf
import hetbed.compat.v1.contrib.slim as slim


def _softmax_xent(logits, onehot):
    z = logits - logits.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    return -(onehot * logp).sum(1)


def test_reentered_variable_scope_opens_relative_name_scope():
    # model_deploy.create_clones builds each clone under name_scope('clone_i') inside
    # variable_scope(tf.get_variable_scope(), reuse=...): TF keeps the ops in 'clone_i/' (the
    # root scope opens no name scope) and a re-entered scope object opens '<last part>_N/' under
    # the current name scope. TF gives exactly the names below.
    with tf.Graph().as_default():
        root = tf.get_variable_scope()
        with tf.variable_scope("a") as a:
            c0 = tf.constant(0, name="c")
        with tf.variable_scope(a):
            c1 = tf.constant(0, name="c")
            v1 = tf.get_variable("w", [1])
        with tf.name_scope("x"):
            with tf.variable_scope(a):
                c2 = tf.constant(0, name="c")
            with tf.variable_scope(root):
                c3 = tf.constant(0, name="c")
            with tf.variable_scope(root, reuse=True) as r:
                c4 = tf.constant(0, name="c")
                assert r.reuse
        with tf.variable_scope(root):
            c5 = tf.constant(0, name="c")
        with tf.variable_scope("b"):
            with tf.variable_scope(root):
                c6 = tf.constant(0, name="c")
                v = tf.get_variable("v", [1])
            with tf.variable_scope(a) as a2:
                c7 = tf.constant(0, name="c")
                assert a2.original_name_scope == "a/"
        names = [c.op.name for c in (c0, c1, c2, c3, c4, c5, c6, c7)]
        assert names == ["a/c", "a_1/c", "x/a/c", "x/c", "x/c_1", "c", "b/c", "b/a/c"]
        assert v.op.name == "v" and v1.op.name == "a/w"


def test_loss_value_named_in_its_own_scope():
    # train_image_classifier summarises 'losses/%s' % loss.op.name; TF names the reduced loss
    # '<loss scope>/value' (compute_weighted_loss re-enters the loss's scope).
    logits = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]], np.float32)
    onehot = np.array([[0, 1, 0], [1, 0, 0]], np.float32)
    with tf.Graph().as_default():
        l1 = tf.losses.softmax_cross_entropy(onehot, logits)
        l2 = tf.losses.mean_squared_error(onehot, logits, weights=0.4)
        with tf.Session() as s:
            v1, v2 = s.run([l1, l2])
    assert l1.op.name == "softmax_cross_entropy_loss/value"
    assert l2.op.name == "mean_squared_error/value"
    np.testing.assert_allclose(v1, _softmax_xent(logits, onehot).mean(), rtol=1e-6)
    np.testing.assert_allclose(v2, 0.4 * ((logits - onehot) ** 2).mean(), rtol=1e-6)


def test_model_variable_arg_scope_device_and_clone_losses():
    # create_clones wraps the clones in arg_scope([slim.model_variable, slim.variable],
    # device=config.variables_device()): TF's layers make their variables through
    # model_variable, so they land on that device; each clone's loss is found by
    # get_collection(LOSSES, 'clone_i/'). With 2 clones model_deploy's total loss is
    # mean of the clone losses + the regularization loss (TF: 6.37767 vs hetbed 6.37765 on
    # cifarnet, RMSProp weights within 7e-6 after 4 steps).
    rng = np.random.RandomState(0)
    x = rng.randn(4, 3).astype(np.float32)
    onehot = np.eye(2, dtype=np.float32)[[0, 1, 1, 0]]
    with tf.Graph().as_default():
        with slim.arg_scope([slim.model_variable, slim.variable], device="/device:CPU:0"):
            scopes = []
            for i in range(2):
                with tf.name_scope(f"clone_{i}") as sc:
                    with tf.variable_scope(tf.get_variable_scope(), reuse=True if i else None):
                        logits = slim.fully_connected(
                            x[2 * i : 2 * i + 2],
                            2,
                            activation_fn=None,
                            weights_regularizer=slim.l2_regularizer(0.5),
                            scope="fc",
                        )
                        slim.losses.softmax_cross_entropy(logits, onehot[2 * i : 2 * i + 2])
                    scopes.append(sc)
            plain = slim.variable("plain", [1], initializer=tf.zeros_initializer())
        w = [v for v in tf.global_variables() if v.op.name == "fc/weights"][0]
        assert "CPU:0" in w.device.upper() and "CPU:0" in plain.device.upper()
        assert scopes == ["clone_0/", "clone_1/"]
        per_clone = [tf.get_collection(tf.GraphKeys.LOSSES, sc) for sc in scopes]
        assert [len(p) for p in per_clone] == [1, 1]
        assert per_clone[0][0].op.name == "clone_0/softmax_cross_entropy_loss/value"
        reg = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
        assert len(reg) == 1  # the second clone reuses the weights
        total = tf.add_n([per_clone[0][0] / 2.0, per_clone[1][0] / 2.0] + reg)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            W, b, t = s.run([w, "fc/biases:0", total])
    want = np.concatenate(
        [_softmax_xent(x[2 * i : 2 * i + 2] @ W + b, onehot[2 * i : 2 * i + 2]) for i in (0, 1)]
    )
    np.testing.assert_allclose(t, want.mean() + 0.5 * 0.5 * (W**2).sum(), rtol=1e-5)
