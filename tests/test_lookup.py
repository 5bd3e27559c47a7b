"""Lookup tables (runtime/ops/lookup.py): TF1's contrib.lookup / tf.lookup against Python
dicts: tensors and vocabulary files, defaults, inverse tables, size, tables_initializer."""

import numpy as np
import pytest

import hetbed.compat.v1 as tf


def test_tables_from_tensors_and_files(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("the\ncat\nsat\n")
    with tf.Graph().as_default():
        words = tf.placeholder(tf.string, [None])
        by_tensor = tf.contrib.lookup.index_table_from_tensor(tf.constant(["a", "b", "c"]))
        by_file = tf.contrib.lookup.index_table_from_file(str(vocab), default_value=7)
        back = tf.contrib.lookup.index_to_string_table_from_file(str(vocab))
        pairs = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant([3, 5], tf.int64), [0.5, 1.5]), -1.0
        )
        ids = by_file.lookup(words)
        got_t = by_tensor.lookup(tf.constant([["b", "z"], ["a", "c"]]))
        names = back.lookup(tf.constant([2, 0, 9], tf.int64))
        vals = pairs.lookup(tf.constant([5, 4], tf.int64))
        with tf.Session() as s:
            with pytest.raises(tf.errors.FailedPreconditionError, match="not initialized"):
                s.run(ids, {words: ["cat"]})
            s.run(tf.tables_initializer())
            got = s.run([ids, got_t, names, vals, by_file.size()], {words: ["sat", "dog", "the"]})
    assert got[0].dtype == np.int64 and got[0].tolist() == [2, 7, 0]
    assert got[1].tolist() == [[1, -1], [0, 2]]
    assert got[2].tolist() == [b"sat", b"the", b"UNK"]
    assert got[3].tolist() == [1.5, -1.0] and got[4] == 3


def test_table_errors_name_the_table(tmp_path):
    with tf.Graph().as_default():
        dup = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(["x", "x"]), tf.constant([1, 2], tf.int64)
            ),
            0,
        )
        with (
            tf.Session() as s,
            pytest.raises(tf.errors.InvalidArgumentError, match="different values"),
        ):
            s.run(dup.init)
        with pytest.raises(tf.errors.NotFoundError, match="no vocabulary file"):
            tf.contrib.lookup.index_table_from_file(str(tmp_path / "none.txt"))
        with pytest.raises(tf.errors.InvalidArgumentError, match="num_oov_buckets"):
            tf.contrib.lookup.index_table_from_tensor(tf.constant(["a"]), num_oov_buckets=-1)
