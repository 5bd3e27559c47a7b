"""SparseConditionalAccumulator (TF's element-wise MEAN of IndexedSlices gradients) and
SyncReplicasOptimizer on an embedding: only rows are accumulated, and k synchronous steps equal
k SGD steps on the replicas' row-averaged gradient (numpy)."""

import numpy as np
import pytest
from test_sync_replicas import in_thread, join, start

import hetbed as hb
from hetbed.runtime.errors import InvalidArgumentError


def test_take_averages_each_row_over_the_gradients_that_held_it():
    with hb.Graph().as_default():
        acc = hb.SparseConditionalAccumulator(hb.float64, shape=[6, 2], shared_name="emb")
        idx = hb.placeholder(hb.int64, [None])
        vals = hb.placeholder(hb.float64, [None, 2])
        step = hb.placeholder(hb.int64, [])
        apply = acc.apply_grad(idx, vals, local_step=step)
        take = acc.take_grad(2)
        counts = [acc.num_accumulated(), acc.num_dropped()]
        with hb.Session() as sess:
            sess.run(acc.set_global_step(3))
            sess.run(apply, {idx: [0], vals: [[9.0, 9.0]], step: 2})  # stale: dropped
            # rows 4 and 1 (row 4 twice in one gradient: added, counted once)
            sess.run(apply, {idx: [4, 1, 4], vals: [[1, 2], [3, 4], [5, 6]], step: 3})
            sess.run(apply, {idx: [1, 5], vals: [[10, 20], [7, 8]], step: 3})
            assert sess.run(counts) == [2, 1]
            rows, values, shape = sess.run(take)
            np.testing.assert_array_equal(rows, [1, 4, 5])
            np.testing.assert_allclose(values, [[6.5, 12.0], [6.0, 8.0], [7.0, 8.0]])
            np.testing.assert_array_equal(shape, [6, 2])
            assert sess.run(counts) == [0, 1]
            sess.run(apply, {idx: [2], vals: [[1.0, 1.0]], step: 3})  # behind the new step 4
            assert sess.run(counts) == [0, 2]


def test_many_overlapping_gradients_average_as_a_row_by_row_loop():
    """Eight gradients of 40 random rows each (repeats within a gradient, overlaps across them,
    one already sorted and unique), taken twice in a row: each row's values summed over its
    occurrences, divided by the gradients that held it, as a plain loop computes it."""
    rng = np.random.default_rng(7)
    with hb.Graph().as_default():
        acc = hb.SparseConditionalAccumulator(hb.float64, shape=[50, 3])
        idx = hb.placeholder(hb.int64, [None])
        vals = hb.placeholder(hb.float64, [None, 3])
        step = hb.placeholder(hb.int64, [])
        apply = acc.apply_grad(idx, vals, local_step=step)
        take = acc.take_grad(8)
        with hb.Session() as sess:
            for k in range(2):  # (the take advances the global step: the gradients follow)
                grads = [(rng.integers(0, 50, 40), rng.standard_normal((40, 3))) for _ in range(7)]
                grads.append((np.arange(0, 50, 2), rng.standard_normal((25, 3))))
                total, held = {}, {}
                for rows, values in grads:
                    for r in set(rows.tolist()):
                        held[r] = held.get(r, 0) + 1
                    for r, v in zip(rows.tolist(), values):
                        total[r] = total.get(r, 0.0) + v
                    sess.run(apply, {idx: rows, vals: values, step: k})
                rows, values, _ = sess.run(take)
                np.testing.assert_array_equal(rows, sorted(total))
                want = np.array([total[r] / held[r] for r in sorted(total)])
                np.testing.assert_allclose(values, want, rtol=1e-12)


def test_bad_rows_fail_naming_the_accumulator():
    with hb.Graph().as_default():
        acc = hb.SparseConditionalAccumulator(hb.float32, shape=[4, 3], name="emb_acc")
        with pytest.raises(InvalidArgumentError, match="do not fit rows of accumulator emb_acc"):
            acc.apply_grad([0], np.zeros((1, 2), np.float32))
        with pytest.raises(InvalidArgumentError, match="grad_shape"):
            acc.apply_grad([0], np.zeros((1, 3), np.float32), grad_shape=[5, 3])
        apply = acc.apply_grad([7], np.ones((1, 3), np.float32))
        with hb.Session() as sess, pytest.raises(InvalidArgumentError, match="row index 7"):
            sess.run(apply)


def test_sync_replicas_on_an_embedding_averages_rows_as_tensorflow():
    """Two replicas each look up other rows of a 10 x 3 embedding: the synchronous step applies
    each touched row's average over the replicas that touched it; untouched rows stay."""
    rng = np.random.default_rng(3)
    table = rng.normal(size=(10, 3))
    ids = [np.array([1, 4, 4]), np.array([4, 7])]
    targets = [rng.normal(size=(3, 3)), rng.normal(size=(2, 3))]
    lr, k = 0.5, 3
    with hb.Graph().as_default():
        emb = hb.Variable(table, name="emb")
        gs = hb.train.get_or_create_global_step()
        opts, trains = [], []
        for i, t in zip(ids, targets):
            loss = hb.reduce_sum(hb.square(hb.gather(emb, i) - t))
            opt = hb.train.SyncReplicasOptimizer(hb.train.GradientDescentOptimizer(lr), 2)
            trains.append(opt.minimize(loss, global_step=gs))
            opts.append(opt)
        acc = opts[0]._accumulators[0]
        assert isinstance(acc, hb.SparseConditionalAccumulator)
        sess = start(opts)
        chief = in_thread(lambda: [sess.run(opts[0].chief_sync_op) for _ in range(k)])
        workers = [in_thread(lambda t=t: [sess.run(t) for _ in range(k)]) for t in trains]
        join(chief, *workers)
        ref = table.copy()
        for _ in range(k):
            rows: dict[int, list] = {}
            for i, t in zip(ids, targets):
                g = np.zeros_like(ref)
                np.add.at(g, i, 2 * (ref[i] - t))
                for r in set(i.tolist()):
                    rows.setdefault(r, []).append(g[r])
            for r, gs_ in rows.items():
                ref[r] -= lr * np.mean(gs_, axis=0)
        np.testing.assert_allclose(sess.run(emb), ref, rtol=1e-12)
        assert int(sess.run(gs)) == k
        sess.close()


def test_the_average_is_tensorflows():
    """The same applies and take on TensorFlow's SparseConditionalAccumulator (skips without
    TensorFlow)."""
    tf = pytest.importorskip("tensorflow.compat.v1")
    tf.disable_eager_execution()
    # (each gradient's rows sorted and unique: TF's merge assumes it; with rows out of order or
    # repeated its result keeps several entries per row, where hetbed adds them)
    grads = [([1, 4], [[1, 2], [3, 4]]), ([1, 5], [[10, 20], [7, 8]]), ([0, 4], [[2, 2], [5, 6]])]
    want = []
    with tf.Graph().as_default():
        acc = tf.SparseConditionalAccumulator(tf.float64, shape=[6, 2])
        ops = [acc.apply_grad(np.array(i, np.int64), np.array(v, np.float64)) for i, v in grads]
        take = acc.take_grad(3)
        with tf.Session() as sess:
            for op in ops:
                sess.run(op)
            want = sess.run(take)
    with hb.Graph().as_default():
        acc = hb.SparseConditionalAccumulator(hb.float64, shape=[6, 2])
        ops = [acc.apply_grad(np.array(i, np.int64), np.array(v, np.float64)) for i, v in grads]
        take = acc.take_grad(3)
        with hb.Session() as sess:
            for op in ops:
                sess.run(op)
            got = sess.run(take)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w)
