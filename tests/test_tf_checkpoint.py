"""Checkpoints TensorFlow wrote, read by hetbed (runtime/train/tf_bundle.py)."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

import hetbed.compat.v1 as tf

FIXTURE = os.path.join(os.path.dirname(__file__), "data", "tf_checkpoint")
WANT = {  # what tests/data/tf_checkpoint/README.md says TensorFlow saved
    "dense/kernel": np.arange(6, dtype=np.float32).reshape(2, 3),
    "b64": np.array([1.5, -2.0]),
    "step": np.array([7, 8, 9], np.int64),
    "img": np.array([[1, 255], [0, 3]], np.uint8),
    "half": np.array([0.5, 2.0], np.float16),
    "flags": np.array([True, False]),
    "small": np.array([-3, 4], np.int8),
    "scalar": np.float32(3.25),
    "words": np.array([b"ab", b"", b"xyz"], dtype=object),
}


def test_every_tensor_of_a_tensorflow_checkpoint_reads_back(tmp_path):
    d = shutil.copytree(FIXTURE, tmp_path / "ck")
    prefix = tf.train.latest_checkpoint(str(d))  # TF's text-format `checkpoint` index
    assert prefix == os.path.join(str(d), "model.ckpt-10")
    assert tf.train.checkpoint_exists(prefix)
    reader = tf.train.load_checkpoint(str(d))
    assert sorted(reader.get_variable_to_shape_map()) == sorted(WANT)
    for name, want in WANT.items():
        got = reader.get_tensor(name)
        assert got.dtype == want.dtype and got.shape == np.shape(want), name
        np.testing.assert_array_equal(got, want, err_msg=name)
    assert dict(tf.train.list_variables(str(d)))["dense/kernel"] == [2, 3]


def test_saver_restores_variables_from_a_tensorflow_checkpoint(tmp_path):
    d = shutil.copytree(FIXTURE, tmp_path / "ck")
    with tf.Graph().as_default():
        k = tf.get_variable("dense/kernel", [2, 3])
        s8 = tf.Variable(np.zeros(2, np.int8), name="small")
        saver = tf.train.Saver([k, s8])
        with tf.Session() as s:
            saver.restore(s, tf.train.latest_checkpoint(str(d)))
            kv, sv = s.run([k, s8])
            np.testing.assert_array_equal(kv, WANT["dense/kernel"])
            np.testing.assert_array_equal(sv, WANT["small"])
            other = tf.Variable(np.zeros(3, np.float32), name="missing")
            with pytest.raises(tf.errors.NotFoundError, match="'missing' not found"):
                tf.train.Saver([other]).restore(s, os.path.join(str(d), "model.ckpt-10"))
            bad = tf.Variable(np.zeros(3, np.float32), name="step")
            with pytest.raises(tf.errors.InvalidArgumentError, match="int64"):
                tf.train.Saver([bad]).restore(s, os.path.join(str(d), "model.ckpt-10"))


def test_damaged_tensorflow_checkpoints_are_named(tmp_path):
    d = shutil.copytree(FIXTURE, tmp_path / "ck")
    prefix = os.path.join(str(d), "model.ckpt-10")
    index = open(prefix + ".index", "rb").read()
    open(prefix + ".index", "wb").write(index[:-9] + b"\x00" * 9)
    with pytest.raises(tf.errors.DataLossError, match=r"\.index: it does not end with the table"):
        tf.train.load_checkpoint(prefix)
    open(prefix + ".index", "wb").write(index[:20])
    with pytest.raises(tf.errors.DataLossError, match="less than a table footer"):
        tf.train.load_checkpoint(prefix)
    open(prefix + ".index", "wb").write(index)
    data = prefix + ".data-00000-of-00001"
    blob = open(data, "rb").read()
    open(data, "wb").write(blob[:40])
    with pytest.raises(tf.errors.DataLossError, match="runs past the end of its data file"):
        tf.train.load_checkpoint(prefix)
    os.remove(data)
    with pytest.raises(tf.errors.NotFoundError, match="data-00000-of-00001"):
        tf.train.load_checkpoint(prefix)


def test_a_model_trained_by_tensorflow_predicts_the_same_in_hetbed(tmp_path):
    """TensorFlow trains a small classifier and saves it; the same program on hetbed restores
    the checkpoint and gives TensorFlow's predictions."""
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    rng = np.random.default_rng(0)
    xv = rng.standard_normal((16, 4)).astype(np.float32)
    yv = (xv.sum(1) > 0).astype(np.int64)

    def model(t):
        x = t.placeholder(t.float32, [None, 4])
        y = t.placeholder(t.int64, [None])
        h = t.layers.dense(x, 8, activation=t.nn.relu)
        logits = t.layers.dense(h, 2)
        loss = t.reduce_mean(t.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        train = t.train.AdamOptimizer(0.05).minimize(loss)
        return x, y, t.nn.softmax(logits), train

    prefix = str(tmp_path / "tf" / "model")
    os.makedirs(os.path.dirname(prefix))
    g = tf1.Graph()
    with g.as_default():
        x, y, prob, train = model(tf1)
        with tf1.Session(graph=g) as s:
            s.run(tf1.global_variables_initializer())
            for _ in range(20):
                s.run(train, {x: xv, y: yv})
            theirs = s.run(prob, {x: xv})
            tf1.train.Saver().save(s, prefix)
    with tf.Graph().as_default():
        x, y, prob, train = model(tf)
        with tf.Session() as s:
            tf.train.Saver().restore(s, prefix)  # weights and Adam's slots
            ours = s.run(prob, {x: xv})
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


SLICED = os.path.join(os.path.dirname(__file__), "data", "tf_checkpoint_sliced")
EMB = np.arange(600, dtype=np.float32).reshape(200, 3) / 4  # tf_checkpoint_sliced/README.md
WIDE = np.arange(260, dtype=np.int64).reshape(2, 130) * 3 - 100


def test_partitioned_variables_tensorflow_saved_in_slices_read_whole(tmp_path):
    d = shutil.copytree(SLICED, tmp_path / "ck")
    assert tf.train.list_variables(str(d)) == [
        ("emb", [200, 3]),
        ("scope/wide", [2, 130]),
        ("step", []),
    ]
    reader = tf.train.load_checkpoint(str(d))
    np.testing.assert_array_equal(reader.get_tensor("emb"), EMB)
    np.testing.assert_array_equal(reader.get_tensor("scope/wide"), WIDE)
    assert reader.get_tensor("scope/wide").dtype == np.int64 and reader.get_tensor("step") == 10


@pytest.mark.parametrize("parts", [3, 4, None])
def test_saver_restores_partitioned_variables_from_tensorflow_slices(tmp_path, parts):
    # the same cut as TensorFlow's, another one, and no partitioner: each shard takes its part
    d = shutil.copytree(SLICED, tmp_path / "ck")
    with tf.Graph().as_default():
        kw = {"partitioner": tf.fixed_size_partitioner(parts)} if parts else {}
        emb = tf.get_variable("emb", shape=[200, 3], **kw)
        with tf.variable_scope("scope"):
            cut = {"partitioner": lambda shape, dtype: [1, parts]} if parts else {}
            wide = tf.get_variable("wide", [2, 130], tf.int64, tf.zeros_initializer(), **cut)
        step = tf.get_variable("step", shape=[], dtype=tf.int64)
        with tf.Session() as s:
            tf.train.Saver().restore(s, tf.train.latest_checkpoint(str(d)))
            e, w = s.run([emb.as_tensor(), wide.as_tensor()] if parts else [emb, wide])
            np.testing.assert_array_equal(e, EMB)
            np.testing.assert_array_equal(w, WIDE)
            assert s.run(step) == 10
            if parts:
                first = {3: 67, 4: 50}[parts]  # the second shard's first row
                second = s.run(list(emb)[1])
                np.testing.assert_array_equal(second, EMB[first : first + len(second)])


def test_a_damaged_slice_is_named(tmp_path):
    d = shutil.copytree(SLICED, tmp_path / "ck")
    data = os.path.join(str(d), "model.ckpt-10.data-00000-of-00001")
    blob = bytearray(open(data, "rb").read())
    at = blob.find(np.float32(EMB[70, 1]).tobytes())  # inside the slice of rows 67..133
    blob[at] ^= 0x40
    open(data, "wb").write(bytes(blob))
    with pytest.raises(tf.errors.DataLossError, match=r"slice 67,67:0,3 of tensor 'emb'.*crc32c"):
        tf.train.load_checkpoint(str(d))
    with tf.Graph().as_default():
        v = tf.get_variable("emb", [200, 3], initializer=tf.ones_initializer())
        with tf.Session() as s:
            s.run(v.initializer)
            with pytest.raises(tf.errors.DataLossError):
                tf.train.Saver([v]).restore(s, os.path.join(str(d), "model.ckpt-10"))
            np.testing.assert_array_equal(s.run(v), np.ones((200, 3)))  # left as it was


def test_slices_must_tile_the_tensor_exactly_once():
    from hetbed.runtime.train import tf_bundle

    ok = [((0, 0), (2, 3)), ((2, 0), (2, 3))]
    tf_bundle._check_tiling("w", (4, 3), ok)
    for parts, what in (
        ([((0, 0), (3, 3)), ((2, 0), (2, 3))], "runs outside|overlapping"),
        ([((0, 0), (2, 3)), ((1, 0), (2, 3)), ((3, 0), (0, 3))], "overlapping"),  # TF refuses too
        ([((0, 0), (2, 3))], "hold 6 elements, its shape \\[4, 3\\] 12"),
        ([((0, 0), (2, 3)), ((2, 0), (2, 3))] + [((0, 0), (1 << 40, 3))], "runs outside"),
    ):
        with pytest.raises(tf_bundle._Bad, match=what):
            tf_bundle._check_tiling("w", (4, 3), parts)


@pytest.mark.parametrize("fixture", [FIXTURE, SLICED])
def test_every_one_byte_damage_to_an_index_is_a_data_loss_error(tmp_path, fixture):
    """Each byte of the .index set to 0, 0xFF or flipped in its top bit: reading every tensor
    either works or raises DataLossError/NotFoundError (a field of the wrong protobuf wire
    type raised TypeError), and recovery then falls back to an older checkpoint."""
    from hetbed.runtime.errors import DataLossError, NotFoundError

    d = shutil.copytree(fixture, tmp_path / "ck")
    prefix = os.path.join(str(d), "model.ckpt-10")
    good = open(prefix + ".index", "rb").read()
    for i in range(len(good)):
        for v in {0, 0xFF, good[i] ^ 0x80}:
            with open(prefix + ".index", "wb") as f:
                f.write(good[:i] + bytes([v]) + good[i + 1 :])
            try:
                r = tf.train.load_checkpoint(prefix)
                for n in r.get_variable_to_shape_map():
                    np.asarray(r.get_tensor(n))
            except (DataLossError, NotFoundError):
                pass
