"""tf.data.experimental (hetbed/data/experimental.py), Dataset.enumerate and
FixedLengthRecordDataset: values against Python's, the fused transformations against their parts,
the mixes by their rules, errors that name the file and lengths."""

import collections

import numpy as np
import pytest

import hetbed.compat.v1 as tf


def _values(ds, feed=None):
    with tf.Graph().as_default():
        it = ds().make_initializable_iterator()
        nxt = it.get_next()
        out = []
        with tf.Session() as s:
            s.run(it.initializer, feed)
            while True:
                try:
                    out.append(s.run(nxt))
                except tf.errors.OutOfRangeError:
                    return out


def test_enumerate_pairs_each_element_with_its_position():
    def ds():
        d = tf.data.Dataset.from_tensor_slices((np.arange(4.0), np.arange(10, 14))).enumerate(5)
        assert d.output_types == (tf.int64, (tf.float64, tf.int64))
        assert d.output_shapes[0].as_list() == []
        return d

    got = _values(ds)
    assert [(int(i), float(a), int(b)) for i, (a, b) in got] == [
        (5 + k, float(k), 10 + k) for k in range(4)
    ]
    same = _values(lambda: tf.data.Dataset.range(3).apply(tf.data.experimental.enumerate_dataset()))
    assert [(int(i), int(v)) for i, v in same] == [(0, 0), (1, 1), (2, 2)]


def test_fused_transformations_give_their_parts_elements():
    def f(x):
        return x * 3 + 1

    fused = _values(
        lambda: tf.data.Dataset.range(10).apply(tf.data.experimental.map_and_batch(f, 4))
    )
    parts = _values(lambda: tf.data.Dataset.range(10).map(f).batch(4))
    assert (
        [v.tolist() for v in fused]
        == [v.tolist() for v in parts]
        == [
            [1, 4, 7, 10],
            [13, 16, 19, 22],
            [25, 28],
        ]
    )
    dropped = _values(
        lambda: tf.data.Dataset.range(10).apply(
            tf.contrib.data.map_and_batch(f, 4, drop_remainder=True)
        )
    )
    assert len(dropped) == 2

    epochs = _values(
        lambda: tf.data.Dataset.range(6).apply(tf.data.experimental.shuffle_and_repeat(6, 3, 1))
    )
    got = [int(v) for v in epochs]
    assert len(got) == 18 and all(sorted(got[k : k + 6]) == list(range(6)) for k in (0, 6, 12))
    assert got[:6] != got[6:12] or got[6:12] != got[12:]  # a new order per pass

    def inner(x):
        return tf.data.Dataset.from_tensors(x).repeat(2)

    inter = _values(
        lambda: tf.data.Dataset.range(3).apply(tf.data.experimental.parallel_interleave(inner, 2))
    )
    assert (
        [int(v) for v in inter]
        == [int(v) for v in _values(lambda: tf.data.Dataset.range(3).interleave(inner, 2))]
        == [0, 1, 0, 1, 2, 2]
    )


def test_choose_from_datasets_follows_the_choices_and_skips_ended_datasets():
    def ds():
        a = tf.data.Dataset.from_tensor_slices(np.array([0, 1, 2], np.int64))
        b = tf.data.Dataset.from_tensor_slices(np.array([10, 11], np.int64))
        choice = tf.data.Dataset.from_tensor_slices(np.array([1, 0, 1, 1, 0, 0, 0], np.int64))
        return tf.data.experimental.choose_from_datasets([a, b], choice)

    assert [int(v) for v in _values(ds)] == [10, 0, 11, 1, 2]

    def stopping():
        a = tf.data.Dataset.range(2)
        choice = tf.data.Dataset.from_tensor_slices(np.array([0, 0, 0, 0], np.int64))
        return tf.data.experimental.choose_from_datasets([a], choice, stop_on_empty_dataset=True)

    assert [int(v) for v in _values(stopping)] == [0, 1]

    def bad():
        a = tf.data.Dataset.range(3)
        return tf.data.experimental.choose_from_datasets([a], tf.data.Dataset.range(2, 3))

    with pytest.raises(tf.errors.InvalidArgumentError, match="selector index 2 out of range"):
        _values(bad)
    with pytest.raises(TypeError, match="elements are"):
        tf.data.experimental.choose_from_datasets(
            [tf.data.Dataset.range(2), tf.data.Dataset.from_tensors(1.0)],
            tf.data.Dataset.range(1),
        )


def test_sample_from_datasets_draws_by_weight_until_all_end():
    def ds(seed=4, weights=(0.8, 0.2)):
        a = tf.data.Dataset.from_tensors(np.int64(0)).repeat(400)
        b = tf.data.Dataset.from_tensors(np.int64(1)).repeat(400)
        return tf.data.experimental.sample_from_datasets([a, b], list(weights), seed=seed)

    got = [int(v) for v in _values(ds)]
    assert collections.Counter(got) == {0: 400, 1: 400}  # every element, once
    first = got[:400]
    # while both last, the draws follow the weights: about 80% from the first
    assert 0.72 < first.count(0) / 400 < 0.88
    assert got == [int(v) for v in _values(ds)]  # the seed repeats the order
    only = [int(v) for v in _values(lambda: ds(weights=(1.0, 0.0)))]
    assert only == [0] * 400
    with pytest.raises(ValueError, match="weights must be 2 non-negative"):
        ds(weights=(-1, 2))


def test_counter_counts_without_end():
    got = _values(lambda: tf.data.experimental.Counter(3, 2).take(4))
    assert [int(v) for v in got] == [3, 5, 7, 9]


def test_fixed_length_records_skip_the_header_and_footer(tmp_path):
    recs = [bytes([k] * 5) for k in range(4)]
    a = tmp_path / "a.bin"
    a.write_bytes(b"HDR" + b"".join(recs) + b"FT")
    b = tmp_path / "b.bin"
    b.write_bytes(b"hdr" + recs[0] + b"ft")

    def ds(names):
        d = tf.data.FixedLengthRecordDataset(names, 5, header_bytes=3, footer_bytes=2)
        return d.map(lambda r: tf.decode_raw(r, tf.uint8))

    got = _values(lambda: ds([str(a), str(b)]))
    assert [v.tolist() for v in got] == [[k] * 5 for k in (0, 1, 2, 3, 0)]

    with tf.Graph().as_default():
        names = tf.placeholder(tf.string, [None])
        it = ds(names).make_initializable_iterator()
        nxt = it.get_next()
        with tf.Session() as s:
            s.run(it.initializer, {names: [str(b)]})
            assert s.run(nxt).tolist() == [0] * 5
            with pytest.raises(tf.errors.OutOfRangeError):
                s.run(nxt)

    c = tmp_path / "c.bin"
    c.write_bytes(b"HDR" + recs[0] + b"xy" + b"FT")
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"c\.bin.*body length 7 bytes"):
        _values(lambda: ds([str(c)]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="record_bytes must be positive"):
        tf.data.FixedLengthRecordDataset([str(a)], 0)


def test_window_then_flat_map_batches_each_window():
    r = lambda: tf.data.Dataset.range(7)  # noqa: E731
    got = _values(lambda: r().window(3, 2).flat_map(lambda w: w.batch(3)))
    assert [v.tolist() for v in got] == [[0, 1, 2], [2, 3, 4], [4, 5, 6], [6]]
    got = _values(lambda: r().window(3, 1, 2, drop_remainder=True).flat_map(lambda w: w.batch(3)))
    assert [v.tolist() for v in got] == [[0, 2, 4], [1, 3, 5], [2, 4, 6]]
    got = _values(lambda: r().window(2, 4).flat_map(lambda w: w.batch(2)))  # shift > size
    assert [v.tolist() for v in got] == [[0, 1], [4, 5]]

    def pairs():
        z = tf.data.Dataset.zip((tf.data.Dataset.range(5), tf.data.Dataset.range(10, 15)))
        return z.window(2).flat_map(lambda x, y: tf.data.Dataset.zip((x.batch(2), y.batch(2))))

    got = _values(pairs)
    assert [(a.tolist(), b.tolist()) for a, b in got] == [
        ([0, 1], [10, 11]),
        ([2, 3], [12, 13]),
        ([4], [14]),
    ]
    with pytest.raises(tf.errors.InvalidArgumentError, match="must be positive"):
        tf.data.Dataset.range(3).window(0)
    with pytest.raises(NotImplementedError, match="read them with flat_map"):
        tf.data.Dataset.range(3).window(2).map(lambda w: w)


def test_scan_carries_a_state_through_the_elements():
    def ds():
        return tf.data.Dataset.range(6).apply(
            tf.data.experimental.scan(np.int64(0), lambda st, x: (st + x, st * 10 + x))
        )

    # states 0, 0, 1, 3, 6, 10 before each element
    assert [int(v) for v in _values(ds)] == [0, 1, 12, 33, 64, 105]

    def nested():
        return tf.data.Dataset.range(4).apply(
            tf.data.experimental.scan(
                (np.int64(1), np.float32(0.5)),
                lambda st, x: ((st[0] * 2, st[1] + 1.0), (x + st[0], st[1])),
            )
        )

    got = [(int(a), float(b)) for a, b in _values(nested)]
    assert got == [(1, 0.5), (3, 1.5), (6, 2.5), (11, 3.5)]
    with pytest.raises(TypeError, match="new state's dtypes"):
        tf.data.Dataset.range(2).apply(
            tf.data.experimental.scan(np.int64(0), lambda st, x: (tf.cast(st, tf.float32), x))
        )


def test_reduce_folds_the_dataset_each_time_it_runs():
    with tf.Graph().as_default():
        count = tf.data.Dataset.range(10).reduce(np.int64(0), lambda s, _: s + 1)
        pair = (
            tf.data.Dataset.range(5)
            .map(lambda x: tf.cast(x, tf.float32))
            .reduce((np.float32(0), np.float32(1)), lambda st, x: (st[0] + x, st[1] * (x + 1)))
        )
        empty = tf.data.Dataset.range(0).reduce(np.int64(7), lambda s, x: s + x)
        ph = tf.placeholder(tf.int64, [None])
        fed = tf.data.Dataset.from_tensor_slices(ph).reduce(np.int64(0), lambda s, x: s + x)
        assert count.dtype == tf.int64 and count.shape.as_list() == []
        with tf.Session() as s:
            assert s.run(count) == 10 and s.run(count) == 10  # each run reads it again
            assert s.run(pair) == (10.0, 120.0)  # 0+1+2+3+4, 1*2*3*4*5
            assert s.run(empty) == 7
            assert s.run(fed, {ph: [1, 2, 3]}) == 6 and s.run(fed, {ph: [10]}) == 10


def test_a_dataset_made_under_control_dependencies_runs_them_when_its_iterator_starts():
    """TF's MakeIterator depends on the ops a dataset (or one it derives from) was made under:
    each initialization runs the assign once; a dataset made outside the block does not, nor
    does a control input inside a dataset function (dropped there, as TF drops it)."""
    with tf.Graph().as_default():
        v = tf.Variable(0.0)
        inc = tf.assign_add(v, 1.0)
        with tf.control_dependencies([inc]):
            base = tf.data.Dataset.range(3)
        mapped = base.map(lambda x: tf.cast(x, tf.float32)).batch(2)
        zipped = tf.data.Dataset.zip((mapped, tf.data.Dataset.range(5)))
        plain = tf.data.Dataset.range(2)
        it, it_zip, it_plain = (
            tf.data.make_initializable_iterator(d) for d in (mapped, zipped, plain)
        )
        nxt = it.get_next()
        with tf.Session() as s:
            s.run(v.initializer)
            s.run(it_plain.initializer)
            assert s.run(v) == 0.0
            for want in (1.0, 2.0):
                s.run(it.initializer)
                np.testing.assert_array_equal(s.run(nxt), [0.0, 1.0])
                assert s.run(v) == want
            s.run(it_zip.initializer)
            assert s.run(v) == 3.0
