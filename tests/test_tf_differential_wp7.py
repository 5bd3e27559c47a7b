"""WP7 differential tests: edit_distance, softmax cross entropy with labels of other shapes,
string hash buckets, out-of-vocabulary buckets and SequenceExample parsing, each a small TF1
program run under TensorFlow and under hetbed and compared. Skipped without TensorFlow."""

from __future__ import annotations

import numpy as np
import pytest

import hetbed.compat.v1 as hbtf

tf1 = pytest.importorskip("tensorflow.compat.v1")


def both(program, *args):
    """Run ``program(tf, *args)`` under TF1 and hetbed in fresh graphs; return both results."""
    out = []
    for tf in (tf1, hbtf):
        g = tf.Graph()
        with g.as_default():
            fetches, feed = program(tf, *args)
            with tf.Session(graph=g) as s:
                s.run([tf.global_variables_initializer(), tf.tables_initializer()])
                out.append(s.run(fetches, feed))
    return out


def assert_same(a, b, rtol=1e-5, atol=1e-6):
    if isinstance(a, dict):
        assert sorted(a) == sorted(b)
        for k in a:
            assert_same(a[k], b[k], rtol, atol)
        return
    if isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y, rtol, atol)
        return
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    if a.dtype.kind in "OSU" or b.dtype.kind in "OSU":
        assert a.tolist() == b.tolist()
    else:
        np.testing.assert_allclose(b, a, rtol=rtol, atol=atol)


def test_edit_distance_program():
    """The cookbook's character edit distances, string and int, raw and normalized."""

    def program(tf):
        with tf.name_scope("edit"):
            hyp = tf.SparseTensor(
                [[0, 0, 0], [0, 0, 1], [0, 0, 2], [0, 0, 3], [0, 1, 0], [1, 0, 0]],
                ["b", "e", "a", "r", "x", "q"],
                [2, 2, 4],
            )
            truth = tf.SparseTensor(
                [[0, 0, 0], [0, 0, 1], [0, 0, 2], [0, 0, 3], [0, 0, 4], [1, 1, 0]],
                ["b", "e", "e", "r", "s", "q"],
                [2, 2, 5],
            )
            ints_h = tf.SparseTensor([[0, 0], [0, 1], [1, 0]], [1, 2, 3], [3, 2])
            ints_t = tf.SparseTensor([[0, 0], [1, 0], [1, 1]], [1, 3, 3], [2, 2])
            return [
                tf.edit_distance(hyp, truth, normalize=False),
                tf.edit_distance(hyp, truth),
                tf.edit_distance(ints_h, ints_t),
            ], None

    a, b = both(program)
    assert_same(a, b)


def test_softmax_xent_label_shapes_program():
    """Labels [N, 1, C] and [1, C] beside logits [N, C], and a class axis in the middle: the
    losses agree, and so do the gradients where TensorFlow can build them."""

    def program(tf):
        rng = np.random.RandomState(3)
        x = tf.placeholder(tf.float32, [4, 5], name="x")
        w = tf.Variable(rng.randn(5, 3).astype(np.float32), name="w")
        logits = tf.matmul(x, w)
        y3 = tf.constant(np.eye(3, dtype=np.float32)[[0, 2, 1, 0]].reshape(4, 1, 3))
        y1 = tf.constant(np.float32([[0.2, 0.3, 0.5]]))
        l3 = tf.nn.softmax_cross_entropy_with_logits(labels=y3, logits=logits)
        l1 = tf.nn.softmax_cross_entropy_with_logits_v2(labels=y1, logits=logits)
        r = tf.reshape(logits, [2, 3, 2])
        lr = tf.nn.softmax_cross_entropy_with_logits_v2(
            labels=tf.nn.softmax(r, axis=1), logits=r, axis=1
        )
        # not l1: TensorFlow fails to build the gradient of broadcast labels ([1, C])
        loss = tf.reduce_mean(l3) + tf.reduce_mean(lr)
        return [l3, l1, lr, tf.gradients(loss, [w])[0]], {x: rng.randn(4, 5).astype(np.float32)}

    a, b = both(program)
    assert_same(a, b, rtol=1e-5, atol=1e-5)


def test_hash_buckets_program():
    """string_to_hash_bucket_fast/_strong and the legacy one on a string batch."""
    words = ["", "a", "hello", "TensorFlow", "x" * 40, "the quick brown fox " * 5, "héllo"]

    def program(tf):
        s = tf.placeholder(tf.string, [None], name="words")
        return [
            tf.string_to_hash_bucket_fast(s, 1000),
            tf.string_to_hash_bucket_strong(s, 2**40, [7, 11]),
            tf.string_to_hash_bucket(s, 97),
            tf.strings.to_hash_bucket_fast(s, 2**62),
        ], {s: words}

    a, b = both(program)
    assert_same(a, b, rtol=0, atol=0)


def test_oov_buckets_program():
    """index_table_from_tensor with num_oov_buckets, string and int64 keys."""
    from tensorflow.python.ops import lookup_ops

    def program(tf):
        lk = lookup_ops if tf is tf1 else tf.contrib.lookup
        t = lk.index_table_from_tensor(tf.constant(["cat", "dog", "emu"]), num_oov_buckets=5)
        ti = lk.index_table_from_tensor(
            tf.constant([3, 1, 4], tf.int64), num_oov_buckets=2, dtype=tf.int64
        )
        keys = tf.constant(["dog", "gnu", "cat", "yak", "owl", "emu", "rat"])
        return [t.lookup(keys), ti.lookup(tf.constant([4, 9, 1, 2, 6], tf.int64)), t.size()], None

    a, b = both(program)
    assert_same(a, b, rtol=0, atol=0)


def test_sequence_example_written_by_tf():
    """A SequenceExample serialized by TensorFlow's protos parses alike in both."""
    ex = tf1.train.SequenceExample()
    ex.context.feature["id"].bytes_list.value.append(b"seq-7")
    ex.context.feature["len"].int64_list.value.append(3)
    for t in [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]:
        ex.feature_lists.feature_list["frames"].feature.add().float_list.value.extend(t)
    for t in [[7], [], [8, 9]]:
        ex.feature_lists.feature_list["ids"].feature.add().int64_list.value.extend(t)
    ser = ex.SerializeToString()

    def program(tf):
        s = tf.placeholder(tf.string, [], name="record")
        ctx, seq = tf.parse_single_sequence_example(
            s,
            context_features={
                "id": tf.FixedLenFeature([], tf.string),
                "len": tf.FixedLenFeature([], tf.int64),
                "w": tf.FixedLenFeature([1], tf.float32, default_value=[0.5]),
            },
            sequence_features={
                "frames": tf.FixedLenSequenceFeature([2], tf.float32),
                "ids": tf.VarLenFeature(tf.int64),
                "none": tf.FixedLenSequenceFeature([], tf.int64, allow_missing=True),
            },
        )
        ids = seq.pop("ids")
        return [ctx, seq, ids.indices, ids.values, ids.dense_shape], {s: ser}

    a, b = both(program)
    assert_same(a, b, rtol=0, atol=0)
