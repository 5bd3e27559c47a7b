"""tf.data as TF1 programs use it beyond numpy sources: datasets reading placeholders fed when an
initializable iterator starts, reinitializable iterators (from_structure), flat_map and
interleave over datasets made per element, unbatch, list_files; values against Python."""

import os

import numpy as np
import pytest

import hetbed.compat.v1 as tf

X = np.arange(24, dtype=np.float32).reshape(12, 2)
Y = np.arange(12, dtype=np.int64)


def _drain(sess, t, feed=None):
    out = []
    while True:
        try:
            out.append(sess.run(t, feed))
        except tf.errors.OutOfRangeError:
            return out


def test_placeholders_fed_when_the_iterator_starts():
    with tf.Graph().as_default():
        xp = tf.placeholder(tf.float32, [None, 2])
        yp = tf.placeholder(tf.int64, [None])
        ds = tf.data.Dataset.from_tensor_slices((xp, yp)).map(lambda x, y: (x * 2.0, y)).batch(5)
        assert ds.output_shapes[0].as_list() == [None, 2]
        it = ds.make_initializable_iterator()
        nxt = it.get_next()
        with tf.Session() as s:
            s.run(it.initializer, {xp: X, yp: Y})
            got = _drain(s, nxt)
            s.run(it.initializer, {xp: X[:3], yp: Y[:3]})  # started anew on other data
            again = _drain(s, nxt)
            with pytest.raises(tf.errors.InvalidArgumentError, match="must feed"):
                s.run(it.initializer)
            with pytest.raises(ValueError, match="Cannot capture a placeholder"):
                ds.make_one_shot_iterator()  # it starts itself: as TF, nothing to feed then
    np.testing.assert_array_equal(np.concatenate([b[0] for b in got]), X * 2)
    np.testing.assert_array_equal(np.concatenate([b[1] for b in got]), Y)
    assert [len(b[1]) for b in got] == [5, 5, 2] and len(again) == 1
    np.testing.assert_array_equal(again[0][0], X[:3] * 2)


def test_a_reinitializable_iterator_switches_datasets():
    with tf.Graph().as_default():
        train = tf.data.Dataset.from_tensor_slices((X, Y)).batch(4)
        val = tf.data.Dataset.from_tensor_slices((X[:2] + 100, Y[:2])).batch(4)
        it = tf.data.Iterator.from_structure(train.output_types, train.output_shapes)
        to_train, to_val = it.make_initializer(train), it.make_initializer(val)
        x, y = it.get_next()
        with tf.Session() as s:
            s.run(to_train)
            first = s.run(x)
            s.run(to_val)
            v = _drain(s, x)
            s.run(to_train)
            again = s.run(x)
        with pytest.raises(TypeError, match="differ"):
            it.make_initializer(tf.data.Dataset.range(3))
    np.testing.assert_array_equal(first, X[:4])
    np.testing.assert_array_equal(again, X[:4])
    assert len(v) == 1
    np.testing.assert_array_equal(v[0], X[:2] + 100)


def test_flat_map_interleave_unbatch_and_list_files(tmp_path):
    for i in range(3):
        (tmp_path / f"part{i}.csv").write_text("".join(f"{i},{j}\n" for j in range(4)))
    (tmp_path / "other.txt").write_text("x\n")
    pattern = str(tmp_path / "part*.csv")
    with tf.Graph().as_default():
        rows = tf.data.Dataset.from_tensor_slices(X[:3])
        # graph ops on the element inside the function: run per element
        fm = rows.flat_map(lambda r: tf.data.Dataset.from_tensor_slices(tf.reshape(r * 10.0, [-1])))
        ilv = tf.data.Dataset.range(3).interleave(
            lambda i: tf.data.Dataset.from_tensor_slices(tf.fill([3], i * 10)), 2, 2
        )
        ilv2 = tf.data.Dataset.range(4).interleave(
            lambda i: tf.data.Dataset.from_tensor_slices(tf.range(i + 1) + 10 * i), 3, 1
        )
        lines = tf.data.Dataset.list_files(pattern, shuffle=False).flat_map(
            lambda f: tf.data.TextLineDataset(f)
        )
        ub = tf.data.Dataset.from_tensor_slices(X.reshape(3, 4, 2)).apply(
            tf.data.experimental.unbatch()
        )
        names = tf.data.Dataset.list_files(pattern, seed=3)
        with tf.Session() as s:
            got_fm = _drain(s, fm.make_one_shot_iterator().get_next())
            got_ilv = _drain(s, ilv.make_one_shot_iterator().get_next())
            got_ilv2 = _drain(s, ilv2.make_one_shot_iterator().get_next())
            got_lines = _drain(s, lines.make_one_shot_iterator().get_next())
            got_ub = _drain(s, ub.make_one_shot_iterator().get_next())
            it = names.make_initializable_iterator()
            s.run(it.initializer)
            order = _drain(s, it.get_next())
        nothing = tf.data.Dataset.list_files(str(tmp_path / "*.none"))
        with tf.Session() as s, pytest.raises(tf.errors.InvalidArgumentError, match="no files"):
            s.run(nothing.make_one_shot_iterator().get_next())
    assert got_fm == list((X[:3] * 10).ravel())
    # TensorFlow's orders (checked with TF 2.21): an exhausted slot takes the next input's
    # dataset, which starts on the slot's next turn
    assert got_ilv == [0, 0, 10, 10, 0, 10, 20, 20, 20]
    assert got_ilv2 == [0, 10, 20, 11, 21, 30, 22, 31, 32, 33]
    assert got_lines == [f"{i},{j}".encode() for i in range(3) for j in range(4)]
    np.testing.assert_array_equal(np.stack(got_ub), X)
    assert sorted(order) == sorted(os.fsencode(str(tmp_path / f"part{i}.csv")) for i in range(3))
