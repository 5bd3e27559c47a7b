"""tf.data: datasets, iterators and OutOfRangeError, in TF1 tutorial style, checked with numpy."""

from __future__ import annotations

import numpy as np
import pytest

import hetbed.compat.v1 as tf

Dataset = tf.data.Dataset


def _drain(sess, t):
    out = []
    while True:
        try:
            out.append(sess.run(t))
        except tf.errors.OutOfRangeError:
            return out


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()


def test_input_pipeline_trains_linear_regression():
    # the TF1 tutorial: slices -> shuffle -> repeat -> batch -> one-shot iterator -> model
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(64, 3)).astype(np.float32)
    w_true = np.array([[1.5], [-2.0], [0.5]], np.float32)
    ys = xs @ w_true + 0.25
    ds = Dataset.from_tensor_slices((xs, ys)).shuffle(64, seed=3).repeat(40).batch(16)
    x, y = ds.make_one_shot_iterator().get_next()
    assert x.shape.as_list() == [None, 3] and y.shape.as_list() == [None, 1]
    w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
    b = tf.get_variable("b", [], initializer=tf.zeros_initializer())
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
    train = tf.train.GradientDescentOptimizer(0.2).minimize(loss)
    steps = 0
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        try:
            while True:
                sess.run(train)
                steps += 1
        except tf.errors.OutOfRangeError:
            pass
        wv, bv = sess.run([w, b])
    assert steps == 40 * 64 // 16
    np.testing.assert_allclose(wv, w_true, atol=1e-3)
    np.testing.assert_allclose(bv, 0.25, atol=1e-3)


def test_monitored_session_stops_at_the_end_of_the_data():
    x = Dataset.range(10).batch(4).make_one_shot_iterator().get_next()
    total = tf.get_variable("total", [], tf.int64, initializer=tf.zeros_initializer())
    add = tf.assign_add(total, tf.reduce_sum(x))
    seen = []
    with tf.train.MonitoredTrainingSession() as sess:
        while not sess.should_stop():  # the iterator's end stops the loop (as in TF, the
            seen.append(int(sess.run(add)))  # OutOfRangeError ends the `with` quietly)
    assert seen == [6, 28, 45]
    assert sess.should_stop()


def test_map_filter_batch_values_and_static_shapes():
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    lab = np.arange(6, dtype=np.int64)
    ds = (
        Dataset.from_tensor_slices({"x": x, "label": lab})
        .map(lambda d: {"x": d["x"] * 2.0 + 1.0, "label": d["label"] % 3})
        .filter(lambda d: tf.not_equal(d["label"], 1))
        .batch(3, drop_remainder=True)
    )
    assert ds.output_types == {"label": tf.int64, "x": tf.float32}
    el = tf.data.make_one_shot_iterator(ds).get_next()
    assert el["x"].shape.as_list() == [3, 2] and el["label"].shape.as_list() == [3]
    with tf.Session() as sess:
        got = _drain(sess, el)
    keep = lab % 3 != 1
    assert len(got) == 1  # 4 elements pass the filter; the remainder of 1 is dropped
    np.testing.assert_array_equal(got[0]["x"], (x * 2 + 1)[keep][:3])
    np.testing.assert_array_equal(got[0]["label"], (lab % 3)[keep][:3])


def test_sources_and_simple_transformations():
    cases = {
        "range": (Dataset.range(2, 11, 3), [2, 5, 8]),
        "take_skip": (Dataset.range(10).skip(3).take(4), [3, 4, 5, 6]),
        "repeat": (Dataset.range(3).repeat(2), [0, 1, 2, 0, 1, 2]),
        "take_all": (Dataset.range(3).take(-1), [0, 1, 2]),
        "prefetch_cache": (Dataset.range(4).map(lambda v: v * v).cache().prefetch(2), [0, 1, 4, 9]),
        "from_tensors": (Dataset.from_tensors(np.int64(7)).repeat(3), [7, 7, 7]),
        "generator": (Dataset.from_generator(lambda: iter(range(4)), tf.int64, []), [0, 1, 2, 3]),
    }
    for name, (ds, want) in cases.items():
        t = ds.make_one_shot_iterator().get_next()
        with tf.Session() as sess:
            assert [int(v) for v in _drain(sess, t)] == want, name
    z = Dataset.zip((Dataset.range(5), Dataset.range(10, 13).map(lambda v: tf.cast(v, tf.float32))))
    a, b = z.make_one_shot_iterator().get_next()
    assert b.dtype == tf.float32
    with tf.Session() as sess:
        assert [(int(p), float(q)) for p, q in _drain(sess, (a, b))] == [(0, 10), (1, 11), (2, 12)]


def test_padded_batch():
    seqs = [[1], [2, 2, 2], [3, 3], [4]]
    ds = Dataset.from_generator(lambda: iter(seqs), tf.int32, [None]).padded_batch(
        3, padded_shapes=[None], padding_values=-1
    )
    t = ds.make_one_shot_iterator().get_next()
    assert t.shape.as_list() == [None, None]
    with tf.Session() as sess:
        got = _drain(sess, t)
    np.testing.assert_array_equal(got[0], [[1, -1, -1], [2, 2, 2], [3, 3, -1]])
    np.testing.assert_array_equal(got[1], [[4]])
    fixed = Dataset.from_generator(lambda: iter(seqs), tf.int32, [None]).padded_batch(2, [4])
    t2 = fixed.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(t2), [[1, 0, 0, 0], [2, 2, 2, 0]])
    with pytest.raises(ValueError, match="use padded_batch"):
        next(Dataset.from_generator(lambda: iter(seqs), tf.int32).batch(2)._elements())


def test_shuffle_permutes_each_pass_and_is_seeded():
    def orders(seed, buf):
        ds = Dataset.range(20).shuffle(buf, seed=seed).repeat(3)
        t = ds.make_one_shot_iterator().get_next()
        with tf.Session() as sess:
            v = [int(x) for x in _drain(sess, t)]
        return [v[i : i + 20] for i in (0, 20, 40)]

    a, b = orders(5, 8), orders(5, 8)
    assert a == b  # same seed, same orders
    for p in a:
        assert sorted(p) == list(range(20))
    assert a[0] != a[1]  # reshuffled each pass
    assert a[0] != list(range(20))
    assert orders(5, 1)[0] == list(range(20))  # a buffer of one keeps the order
    # a buffer of b elements can only move an element earlier by at most b - 1 places
    assert all(p.index(i) >= i - 7 for p in a for i in range(20))


def test_initializable_iterator_restarts_and_sessions_are_independent():
    it = Dataset.range(3).make_initializable_iterator()
    n = it.get_next()
    with tf.Session() as s1, tf.Session() as s2:
        with pytest.raises(tf.errors.FailedPreconditionError, match="not been initialized"):
            s1.run(n)
        s1.run(it.initializer)
        s2.run(it.initializer)
        assert int(s1.run(n)) == 0 and int(s1.run(n)) == 1
        assert int(s2.run(n)) == 0
        s1.run(it.initializer)
        assert [int(v) for v in _drain(s1, n)] == [0, 1, 2]
        with pytest.raises(tf.errors.OutOfRangeError, match="End of sequence"):
            s1.run(n)
    with pytest.raises(ValueError, match="one-shot"):
        _ = Dataset.range(2).make_one_shot_iterator().initializer


def test_bad_input_errors():
    with pytest.raises(ValueError, match=r"first dimensions differ: \[3\], \[4\]"):
        Dataset.from_tensor_slices((np.zeros(3), np.zeros(4)))
    with tf.Session() as sess:  # a graph tensor is read when a one-shot iterator starts
        got = sess.run(
            Dataset.from_tensor_slices(tf.zeros([3])).make_one_shot_iterator().get_next()
        )
        assert got == 0.0
    with pytest.raises(TypeError, match="one bool scalar"):
        Dataset.range(3).filter(lambda v: v * 2)
    with pytest.raises(ValueError, match="batch_size must be positive"):
        Dataset.range(3).batch(0)
    t = Dataset.from_generator(lambda: iter([[1, 2]]), tf.int32, [3]).make_one_shot_iterator()
    with tf.Session() as sess, pytest.raises(tf.errors.InvalidArgumentError, match="shape"):
        sess.run(t.get_next())
