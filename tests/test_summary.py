"""tf.summary and FileWriter: event files read back with TensorBoard's own EventAccumulator."""

from __future__ import annotations

import io

import numpy as np
import pytest

import hetbed.compat.v1 as tf
from hetbed.runtime.errors import InvalidArgumentError
from hetbed.runtime.ops.summary import default_bucket_limits, to_uint8_images

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import (  # noqa: E402
    EventAccumulator,
)
from tensorboard.compat.proto import summary_pb2  # noqa: E402


def _read(logdir):
    ea = EventAccumulator(str(logdir), size_guidance={"tensors": 0, "images": 0, "histograms": 0})
    ea.Reload()
    return ea


def test_tutorial_program_scalars_histograms_graph(tmp_path):
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(5, 8, 3)).astype(np.float32)
    tf.reset_default_graph()
    x = tf.placeholder("float", [None, 3], name="x")
    w = tf.Variable(rng.normal(size=(3, 2)).astype(np.float32), name="w")
    with tf.name_scope("train"):
        y = tf.matmul(x, w)
        loss = tf.reduce_mean(tf.square(y))
        tf.summary.scalar("loss", loss)
        tf.summary.histogram("y", y)
    merged = tf.summary.merge_all()
    losses, ys = [], []
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        writer = tf.summary.FileWriter(str(tmp_path), sess.graph)
        wv = sess.run(w)
        for step in range(5):
            s = sess.run(merged, feed_dict={x: xs[step]})
            writer.add_summary(s, global_step=np.int64(10 * step))
            ys.append(xs[step].astype(np.float64) @ wv)
            losses.append(np.mean(ys[-1] ** 2))
        writer.flush()
        writer.close()
    ea = _read(tmp_path)
    assert ea.Tags()["scalars"] == ["train/loss"]
    got = ea.Scalars("train/loss")
    assert [e.step for e in got] == [0, 10, 20, 30, 40]
    np.testing.assert_allclose([e.value for e in got], losses, rtol=1e-5)
    limits = default_bucket_limits()
    hists = ea.Histograms("train/y")
    assert [e.step for e in hists] == [0, 10, 20, 30, 40]
    for ev, yv in zip(hists, ys):
        h = ev.histogram_value
        v = yv.ravel()
        assert h.num == v.size
        np.testing.assert_allclose([h.min, h.max], [v.min(), v.max()], rtol=1e-5)
        np.testing.assert_allclose(h.sum, v.sum(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(h.sum_squares, (v**2).sum(), rtol=1e-4)
        # each value counted in the bucket [previous limit, limit) that holds it
        assert sum(h.bucket) == v.size
        lows = [limits[np.searchsorted(limits, b) - 1] for b in h.bucket_limit]
        for lo, hi, c in zip(lows, h.bucket_limit, h.bucket):
            n = sum(1 for a in v.astype(np.float32) if lo <= a < hi)
            assert n == c
    nodes = {n.name: n for n in ea.Graph().node}
    assert nodes["train/MatMul"].op == "MatMul"
    assert list(nodes["train/MatMul"].input) == ["x", "w/read"]
    assert list(nodes["w/read"].input) == ["w"]


def test_bucket_limits_are_tensorflows():
    lim = default_bucket_limits()
    pos = lim[lim > 0][:-1]
    assert pos[0] == 1e-12
    np.testing.assert_allclose(pos[1:] / pos[:-1], 1.1)
    assert pos[-1] < 1e20 <= pos[-1] * 1.1
    np.testing.assert_array_equal(lim[lim < 0], -pos[::-1])
    assert lim[-1] == np.finfo(np.float64).max and 0.0 in lim


def test_image_and_text_summaries(tmp_path):
    from PIL import Image

    imgs = np.linspace(-1.0, 2.0, 2 * 3 * 4 * 3).reshape(2, 3, 4, 3).astype(np.float32)
    gray = np.arange(2 * 2 * 5, dtype=np.float32).reshape(2, 2, 5, 1)
    tf.reset_default_graph()
    p = tf.placeholder(tf.float32, [None, 3, 4, 3])
    a = tf.summary.image("rgb", p, max_outputs=5)
    b = tf.summary.image("gray", tf.constant(gray), max_outputs=1)
    c = tf.summary.text("notes", "step *one*")
    d = tf.summary.text("lines", tf.constant(["x", "é"]))
    m = tf.summary.merge([a, b, c, d])
    with tf.Session() as sess, tf.summary.FileWriter(str(tmp_path)) as w:
        w.add_summary(sess.run(m, {p: imgs}), 1)
    ea = _read(tmp_path)
    assert sorted(ea.Tags()["images"]) == ["gray/image", "rgb/image/0", "rgb/image/1"]
    for i in range(2):
        im = imgs[i].astype(np.float64)
        lo, hi = im.min(), im.max()
        if lo >= 0:  # image 1: the largest value maps to 255
            want = np.round(im * 255 / hi).astype(np.uint8)
        else:  # image 0: 0 maps to 127, scaled by min(127 / max, 128 / -min)
            scale = min(127 / hi, 128 / -lo)
            want = np.clip(np.round(im * scale + 127), 0, 255).astype(np.uint8)
        ev = ea.Images(f"rgb/image/{i}")[0]
        assert (ev.height, ev.width) == (3, 4)
        got = np.asarray(Image.open(io.BytesIO(ev.encoded_image_string)))
        np.testing.assert_array_equal(got, want)
    ev = ea.Images("gray/image")[0]
    got = np.asarray(Image.open(io.BytesIO(ev.encoded_image_string)))
    np.testing.assert_array_equal(got, np.round(gray[0, :, :, 0] * 255 / 9).astype(np.uint8))
    t = ea.Tensors("notes")[0].tensor_proto
    assert t.string_val == [b"step *one*"]
    t = ea.Tensors("lines")[0].tensor_proto
    assert t.string_val == [b"x", "é".encode()] and [d.size for d in t.tensor_shape.dim] == [2]


def test_uint8_conversion_rules():
    np.testing.assert_array_equal(
        to_uint8_images(np.array([0.0, 0.5, 2.0])), np.array([0, 64, 255], np.uint8)
    )
    np.testing.assert_array_equal(
        to_uint8_images(np.array([-2.0, 0.0, 1.0])), np.array([0, 127, 191], np.uint8)
    )
    np.testing.assert_array_equal(
        to_uint8_images(np.array([-3, 7, 300])), np.array([0, 7, 255], np.uint8)
    )


def test_fetched_summary_parses_and_tags_are_unique():
    tf.reset_default_graph()
    a = tf.summary.scalar("v", tf.constant(1.5))
    b = tf.summary.scalar("v", tf.constant(2.5))
    with tf.Session() as sess:
        out = sess.run(tf.summary.merge([a, b]))
    s = summary_pb2.Summary.FromString(out)
    assert [(v.tag, v.simple_value) for v in s.value] == [("v", 1.5), ("v_1", 2.5)]
    assert tf.summary.merge_all("no_such_collection") is None


def test_bad_input_errors(tmp_path):
    tf.reset_default_graph()
    with pytest.raises(InvalidArgumentError, match="ScalarSummary.*scalar.*shape"):
        tf.summary.scalar("bad", tf.zeros([2, 3]))
    with pytest.raises(InvalidArgumentError, match="ImageSummary.*channels"):
        tf.summary.image("bad", tf.zeros([1, 2, 2, 2]))
    with pytest.raises(InvalidArgumentError, match="MergeSummary.*not a summary"):
        tf.summary.merge([tf.zeros([])])
    with pytest.raises(TypeError, match="float32, not a string"):
        tf.summary.text("t", tf.zeros([]))
    p = tf.placeholder(tf.float32, None)
    h = tf.summary.histogram("h", p)
    with tf.Session() as sess, pytest.raises(InvalidArgumentError, match="NaN.*tag 'h'"):
        sess.run(h, {p: np.array([1.0, np.nan], np.float32)})
    w = tf.summary.FileWriter(str(tmp_path))
    with pytest.raises(TypeError, match="add_summary"):
        w.add_summary(np.zeros(3), 0)
    w.close()
    with pytest.raises(RuntimeError, match="closed"):
        w.add_summary(b"", 0)
    w.reopen()
    w.add_summary(summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag="z", simple_value=3)]))
    w.close()
    assert [e.value for e in _read(tmp_path).Scalars("z")] == [3.0]


def test_graph_with_summaries_round_trips_through_graph_dict():
    from hetbed.runtime.serialize import graph_from_dict, graph_to_dict

    tf.reset_default_graph()
    p = tf.placeholder(tf.float32, [], name="p")
    tf.summary.scalar("s", p * 2.0)
    tf.summary.merge_all(name="all")
    g2 = graph_from_dict(graph_to_dict(tf.get_default_graph()))
    with tf.Session(graph=g2) as sess:
        out = sess.run(g2.get_tensor_by_name("all:0"), {g2.get_tensor_by_name("p:0"): 1.25})
    assert [(v.tag, v.simple_value) for v in summary_pb2.Summary.FromString(out).value] == [
        ("s", 2.5)
    ]
