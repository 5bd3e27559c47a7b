"""TFRecord files and tf.train.Example (runtime/ops/records.py): writing and reading records,
parsing Examples into dense and sparse tensors, and errors naming the file, offset, record and
feature; with TensorFlow installed, files written by each are read by the other."""

import numpy as np
import pytest

import hetbed.compat.v1 as tf


def _example(i: int) -> bytes:
    return tf.train.Example(
        features=tf.train.Features(
            feature={
                "x": tf.train.Feature(float_list=tf.train.FloatList(value=[i, i + 0.5])),
                "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
                "tags": tf.train.Feature(
                    bytes_list=tf.train.BytesList(value=[b"t%d" % j for j in range(i)])
                ),
            }
        )
    ).SerializeToString()


def _write(path, n=5) -> list:
    recs = [_example(i) for i in range(n)]
    with tf.python_io.TFRecordWriter(str(path)) as w:
        for r in recs:
            w.write(r)
    return recs


def test_records_round_trip_and_parse(tmp_path):
    path = tmp_path / "d.tfrecord"
    recs = _write(path)
    assert list(tf.python_io.tf_record_iterator(str(path))) == recs
    spec = {
        "x": tf.FixedLenFeature([2], tf.float32),
        "y": tf.FixedLenFeature([], tf.int64),
        "z": tf.FixedLenFeature([], tf.int64, default_value=-1),
        "tags": tf.VarLenFeature(tf.string),
    }
    with tf.Graph().as_default():
        ds = tf.data.TFRecordDataset(str(path)).map(
            lambda r: (lambda f: (f["x"], f["y"], f["z"]))(tf.parse_single_example(r, spec))
        )
        one = ds.batch(5).make_one_shot_iterator().get_next()
        serialized = tf.placeholder(tf.string, [None])
        batch = tf.parse_example(serialized, spec)
        assert batch["x"].shape.as_list() == [None, 2]
        with tf.Session() as s:
            x, y, z = s.run(one)
            b = s.run(batch, {serialized: recs})
    np.testing.assert_allclose(x, [[i, i + 0.5] for i in range(5)])
    assert y.tolist() == list(range(5)) and z.tolist() == [-1] * 5
    tags = b["tags"]
    assert tags.dense_shape.tolist() == [5, 4]
    assert tags.indices.tolist() == [[i, j] for i in range(5) for j in range(i)]
    assert tags.values.tolist() == [b"t%d" % j for i in range(5) for j in range(i)]


def test_bad_records_and_features_are_named(tmp_path):
    path = tmp_path / "d.tfrecord"
    _write(path, 2)
    data = bytearray(path.read_bytes())
    data[20] ^= 0xFF  # inside the first record's data
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(bytes(data))
    with pytest.raises(tf.errors.DataLossError, match="corrupted record data at offset 0"):
        list(tf.python_io.tf_record_iterator(str(bad)))
    short = tmp_path / "short.tfrecord"
    short.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(tf.errors.DataLossError, match="truncated record"):
        list(tf.python_io.tf_record_iterator(str(short)))
    with tf.Graph().as_default():
        rec = tf.placeholder(tf.string, [])
        missing = tf.parse_single_example(rec, {"w": tf.FixedLenFeature([], tf.int64)})
        kind = tf.parse_single_example(rec, {"y": tf.FixedLenFeature([], tf.float32)})
        size = tf.parse_single_example(rec, {"x": tf.FixedLenFeature([3], tf.float32)})
        with tf.Session() as s:
            for t, msg in (
                (missing["w"], "no feature 'w'"),
                (kind["y"], "'y' is a int64_list"),
                (size["x"], "'x' of record 0 has 2 values"),
            ):
                with pytest.raises(tf.errors.InvalidArgumentError, match=msg):
                    s.run(t, {rec: _example(1)})
            with pytest.raises(tf.errors.InvalidArgumentError, match="not a tf.train.Example"):
                s.run(missing["w"], {rec: b"\xff\xff"})


def test_tensorflow_reads_our_records_and_we_read_its(tmp_path):
    tf2 = pytest.importorskip("tensorflow")
    ours = tmp_path / "ours.tfrecord"
    recs = _write(ours)
    # (TensorFlow's own record reader, which works whether or not an earlier test turned
    # TensorFlow's eager execution off)
    got = list(tf2.compat.v1.io.tf_record_iterator(str(ours)))
    assert got == recs
    theirs = tmp_path / "theirs.tfrecord"
    with tf2.io.TFRecordWriter(str(theirs)) as w:
        w.write(
            tf2.train.Example(
                features=tf2.train.Features(
                    feature={"a": tf2.train.Feature(int64_list=tf2.train.Int64List(value=[7, 8]))}
                )
            ).SerializeToString()
        )
    (rec,) = list(tf.python_io.tf_record_iterator(str(theirs)))
    assert list(tf.train.Example.FromString(rec).features.feature["a"].int64_list.value) == [7, 8]
