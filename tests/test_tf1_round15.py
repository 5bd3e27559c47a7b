"""Round fifteen: gaps found running tensorflow/models research/slim's train_image_classifier.py
and eval_image_classifier.py (deployment/model_deploy.py, cifar10 TFRecords, cifarnet) on hetbed.
Values are checked against numpy; the comments give what TensorFlow 2.15 (tf.compat.v1) gives."""

import time

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


def test_softmax_cross_entropy_casts_integer_labels():
    # PetarV-/GAT feeds int32 one-hot labels to tf.nn.softmax_cross_entropy_with_logits; TF's
    # helper casts the labels to the logits' dtype.
    logits = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]], np.float32)
    onehot = np.array([[0, 1, 0], [1, 0, 0]], np.int32)
    with tf.Graph().as_default():
        lab = tf.placeholder(tf.int32, [2, 3])
        a = tf.nn.softmax_cross_entropy_with_logits(logits=logits, labels=lab)
        b = tf.nn.softmax_cross_entropy_with_logits_v2(logits=logits, labels=onehot)
        with tf.Session() as s:
            va, vb = s.run([a, b], {lab: onehot})
    want = _softmax_xent(logits, onehot.astype(np.float32))
    np.testing.assert_allclose(va, want, rtol=1e-6)
    np.testing.assert_allclose(vb, want, rtol=1e-6)


# a 3x3 adjacency in column-major order, as GAT's preprocess_adj_bias gives it
_IDX = np.array([[0, 0], [1, 0], [0, 1], [2, 1], [1, 2], [2, 2]], np.int64)
_VALS = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], np.float32)


def _row_softmax_sorted(idx, vals):
    """TF's SparseSoftmax kernel: the values of the row-major sorted entries, in that order."""
    order = np.lexsort(idx.T[::-1])
    si, sv = idx[order], vals[order]
    out = np.empty_like(sv)
    for r in np.unique(si[:, 0]):
        m = si[:, 0] == r
        e = np.exp(sv[m] - sv[m].max())
        out[m] = e / e.sum()
    return out


def test_sparse_placeholder_without_shape_times_dense():
    # GAT's sparse head: adj_mat * f_1 with adj_mat = tf.sparse_placeholder(tf.float32) (rank
    # unknown when the graph is built) and f_1 dense [N, 1]; TF broadcasts at run time.
    f1 = np.array([[10.0], [20.0], [30.0]], np.float32)
    f2 = np.array([[1.0, 2.0, 3.0]], np.float32)
    with tf.Graph().as_default():
        adj = tf.sparse_placeholder(tf.float32)
        a = adj * tf.constant(f1)
        b = adj * tf.constant(f2)
        with tf.Session() as s:
            va, vb = s.run([a, b], {adj: (_IDX, _VALS, np.array([3, 3], np.int64))})
    np.testing.assert_array_equal(va.indices, _IDX)
    np.testing.assert_allclose(va.values, _VALS * f1[_IDX[:, 0], 0])
    np.testing.assert_allclose(vb.values, _VALS * f2[0, _IDX[:, 1]])


def test_sparse_add_and_softmax_of_unsorted_entries_as_tf():
    # GAT's sparse attention: tf.sparse_add of two SparseTensors with the same column-major
    # indices, then tf.sparse_softmax. TF's SparseAdd merges in one pass and so keeps that
    # order (indices and sums below, as TF 2.15 gives); TF's SparseSoftmax sorts a copy and
    # writes the row softmaxes in row-major order against the indices as given
    # (TF: [0.1192, 0.8808, 0.0474, 0.9526, 0.1192, 0.8808] for _VALS); its gradient sums
    # g * y over each row by index. GAT's 4 Adam steps on Cora then equal TF's (test loss
    # 1.9436166 both).
    with tf.Graph().as_default():
        sp = tf.SparseTensor(_IDX, tf.constant(_VALS), [3, 3])
        summed = tf.sparse_add(sp, sp)
        soft = tf.sparse_softmax(sp)
        g = tf.constant(np.arange(1.0, 7.0, dtype=np.float32))
        loss = tf.reduce_sum(soft.values * g)
        (grad,) = tf.gradients(loss, [sp.values])
        with tf.Session() as s:
            vs, vsoft, vg = s.run([summed, soft.values, grad])
    np.testing.assert_array_equal(vs.indices, _IDX)
    np.testing.assert_allclose(vs.values, 2 * _VALS)
    y = _row_softmax_sorted(_IDX, _VALS)
    np.testing.assert_allclose(vsoft, y, rtol=1e-6)
    np.testing.assert_allclose(y, [0.1192, 0.8808, 0.0474, 0.9526, 0.1192, 0.8808], atol=1e-4)
    gv = np.arange(1.0, 7.0)
    row_dot = {r: sum(gv[k] * y[k] for k in range(6) if _IDX[k, 0] == r) for r in range(3)}
    want = [(gv[k] - row_dot[_IDX[k, 0]]) * y[k] for k in range(6)]
    np.testing.assert_allclose(vg, want, rtol=1e-5)


def test_input_producers_and_batchers_write_tf1_fill_summaries():
    # train_image_classifier's event file lacked TF1's queue-fill summaries of tf.train.batch
    # and the input producers; TF 2.15 gives exactly these tags (a full queue reads 1.0; the
    # shuffle batchers count what is above min_after_dequeue).
    with tf.Graph().as_default():
        tf.train.string_input_producer(["a", "b"], capacity=8)
        tf.train.range_input_producer(5, capacity=6)
        (x,) = tf.train.slice_input_producer(
            [tf.constant(np.arange(10.0))], capacity=7, shuffle=False
        )
        tf.train.batch([x], 2, capacity=9)
        tf.train.shuffle_batch([x], 2, capacity=12, min_after_dequeue=4, seed=1)
        tf.train.batch_join([[x], [x]], 2, capacity=5)
        tf.train.shuffle_batch_join([[x], [x]], 2, capacity=10, min_after_dequeue=3)
        tags = sorted(s.op.name for s in tf.get_collection(tf.GraphKeys.SUMMARIES))
        merged = tf.summary.merge_all()
        with tf.Session() as s:
            empty = tf.Summary()
            empty.ParseFromString(s.run(merged))
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(s, coord=coord)
            full = tf.Summary()
            deadline = time.monotonic() + 10.0
            while time.monotonic() < deadline:  # the runner threads fill the queues
                full.ParseFromString(s.run(merged))
                if all(v.simple_value == 1.0 for v in full.value):
                    break
                time.sleep(0.01)
            coord.request_stop()
            coord.join(threads, stop_grace_period_secs=2)
    assert tags == [
        "batch/fraction_of_9_full",
        "batch_join/fraction_of_5_full",
        "input_producer/fraction_of_8_full",
        "input_producer_1/fraction_of_6_full",
        "input_producer_2/input_producer/fraction_of_7_full",
        "shuffle_batch/fraction_over_4_of_8_full",
        "shuffle_batch_join/fraction_over_3_of_7_full",
    ]
    assert [v.simple_value for v in empty.value] == [0.0] * 7
    assert [v.simple_value for v in full.value] == [1.0] * 7


def test_supervisor_saves_a_checkpoint_at_once(tmp_path):
    # slim.learning.train (train_image_classifier) under TF leaves model.ckpt-0 beside the last
    # checkpoint: TF1's checkpoint thread (a LooperThread) saves as it starts, then every
    # save_model_secs.
    logdir = str(tmp_path / "train")
    with tf.Graph().as_default():
        step = tf.train.get_or_create_global_step()
        tf.Variable(3.0, name="v")
        inc = tf.assign_add(step, 1)
        sv = tf.train.Supervisor(logdir=logdir, save_model_secs=600, save_summaries_secs=0)
        with sv.managed_session() as s:
            deadline = time.monotonic() + 10.0
            while tf.train.latest_checkpoint(logdir) is None and time.monotonic() < deadline:
                time.sleep(0.01)
            s.run(inc)
            s.run(inc)
        state = tf.train.get_checkpoint_state(logdir)
        names = [p.split("/")[-1] for p in state.all_model_checkpoint_paths]
        assert names == ["model.ckpt-0", "model.ckpt-2"]
        reader = tf.train.NewCheckpointReader(logdir + "/model.ckpt-0")
        assert reader.get_tensor("v") == 3.0 and reader.get_tensor("global_step") == 0
