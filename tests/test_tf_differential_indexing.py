"""Differential tests of the indexing, scatter, segment, set and shape ops: small TF1 programs run
under ``tensorflow.compat.v1`` and ``hetbed.compat.v1`` and compared (values and gradients).
Skipped when TensorFlow is not installed."""

from __future__ import annotations

import numpy as np
import pytest
from test_tf_differential import assert_same, both

import hetbed.compat.v1 as hbtf

tf1 = pytest.importorskip("tensorflow.compat.v1")

RNG = np.random.default_rng(11)


def gathers_and_scatters(tf, pv, uv):
    p = tf.placeholder(tf.float32, [4, 3])
    u = tf.placeholder(tf.float32, [3, 3])
    idx = tf.constant([[2], [0], [2]])
    g = tf.gather_nd(p, [[0, 1], [3, 2], [0, 1]])
    s = tf.scatter_nd(idx, u, [4, 3])
    t_up = tf.tensor_scatter_nd_update(p, [[1], [3]], u[:2])
    t_add = tf.tensor_scatter_nd_add(p, idx, u)
    loss = tf.reduce_sum(g * g) + tf.reduce_sum(s * p) + tf.reduce_sum(t_up * t_add)
    gp, gu = tf.gradients(loss, [p, u])
    return [g, s, t_up, t_add, gp, gu], {p: pv, u: uv}


def test_gathers_and_scatters():
    a, b = both(gathers_and_scatters, RNG.standard_normal((4, 3)), RNG.standard_normal((3, 3)))
    assert_same(a, b)


def segments(tf, dv):
    d = tf.placeholder(tf.float32, [6, 2])
    ids = tf.constant([0, 0, 1, 3, 3, 3])
    uids = tf.constant([2, -1, 0, 2, 4, 0])
    outs = [
        tf.segment_sum(d, ids),
        tf.segment_mean(d, ids),
        tf.segment_max(d, ids),
        tf.segment_min(d, ids),
        tf.segment_prod(d, ids),
        tf.unsorted_segment_sum(d, uids, 5),
        tf.unsorted_segment_mean(d, uids, 5),
        tf.unsorted_segment_prod(d, uids, 5),
        tf.math.unsorted_segment_max(d, uids, 5),
        tf.math.unsorted_segment_min(d, uids, 5),
    ]
    keep = tf.constant([1.0, 0.0, 1.0, 0.0, 1.0])[:, None]  # segments 1 and 3 are empty
    loss = tf.add_n([tf.reduce_sum(tf.square(o)) for o in outs[:4]])
    loss += tf.reduce_sum(tf.square(outs[8] * keep) + tf.square(outs[9] * keep) + outs[6])
    return outs + tf.gradients(loss, [d]), {d: dv}


def test_segments():
    a, b = both(segments, RNG.standard_normal((6, 2)))
    assert_same(a, b)


def sets_and_masks(tf, xv, mv):
    x = tf.placeholder(tf.float32, [3, 4])
    m = tf.placeholder(tf.bool, [3, 4])
    masked = tf.boolean_mask(x, m)
    rows = tf.boolean_mask(x, [True, False, True])
    cols = tf.boolean_mask(x, [False, True, True, False], axis=1)
    y, idx = tf.unique(tf.constant([5, 3, 5, 1, 3, 9]))
    y2, idx2, cnt = tf.unique_with_counts(tf.constant([2.0, 2.0, -1.0]), out_idx=tf.int64)
    diff, didx = tf.setdiff1d(tf.constant([4, 1, 7, 1, 9]), tf.constant([1, 9]))
    loss = tf.reduce_sum(masked * masked) + tf.reduce_sum(rows) + tf.reduce_sum(cols * cols)
    fetches = [masked, rows, cols, tf.where(m), y, idx, y2, idx2, cnt, diff, didx]
    fetches += [tf.invert_permutation([2, 0, 3, 1])] + tf.gradients(loss, [x])
    return fetches, {x: xv, m: mv}


def test_sets_and_masks():
    a, b = both(sets_and_masks, RNG.standard_normal((3, 4)), RNG.random((3, 4)) > 0.5)
    assert_same(a, b)


def shapes_and_counts(tf, xv, nv):
    x = tf.placeholder(tf.float32, [2, 4, 4, 2])
    n = tf.placeholder(tf.int32, [3])
    s2d = tf.space_to_depth(x, 2)
    d2s = tf.depth_to_space(s2d * 2.0, 2)
    r = tf.roll(x, shift=[1, -1], axis=[1, 2])
    s2b = tf.space_to_batch_nd(x, [2, 3], [[1, 1], [0, 2]])
    b2s = tf.batch_to_space_nd(s2b * 3.0, [3, 2], [[0, 1], [1, 0]])
    sb = tf.space_to_batch(x, [[0, 2], [2, 0]], 2)
    bt = tf.broadcast_to(tf.constant([[1.0], [2.0]]), [3, 2, 4])
    mx, my = tf.meshgrid(tf.range(3), tf.range(2))
    ix, iy = tf.meshgrid([1.0, 2.0], [3.0, 4.0, 5.0], indexing="ij")
    loss = tf.reduce_sum(s2d * s2d) + tf.reduce_sum(r * tf.range(2.0))
    loss += tf.reduce_sum(b2s * b2s) + tf.reduce_sum(tf.batch_to_space(sb, [[0, 1], [1, 1]], 2))
    fetches = [
        s2d,
        d2s,
        s2b,
        b2s,
        sb,
        r,
        bt,
        mx,
        my,
        ix,
        iy,
        tf.sequence_mask(n),
        tf.sequence_mask(n, 5, dtype=tf.float32),
        tf.bincount(n, minlength=6),
        tf.histogram_fixed_width(tf.reshape(x, [-1]), [-1.0, 1.0], nbins=5),
        tf.searchsorted([[0.0, 1.0, 2.0], [1.0, 1.0, 3.0]], [[1.0, 2.5], [1.0, 0.0]]),
        tf.searchsorted([0.0, 1.0, 2.0], [1.0, 2.0], side="right"),
        tf.broadcast_dynamic_shape(tf.shape(x), [4, 1]),
        tf.shape_n([x, tf.zeros([3])]),
    ] + tf.gradients(loss, [x])
    return fetches, {x: xv, n: nv}


def test_shapes_and_counts():
    a, b = both(shapes_and_counts, RNG.standard_normal((2, 4, 4, 2)), np.array([2, 0, 4], np.int32))
    assert_same(a, b)


def variable_scatters(tf):
    v = tf.Variable(tf.reshape(tf.range(1.0, 13.0), [4, 3]))
    ops = [
        tf.scatter_nd_update(v, [[0, 0], [3, 2]], [10.0, 20.0]),
        tf.scatter_nd_add(v, [[1], [1]], tf.ones([2, 3])),
        tf.scatter_mul(v, [2, 2], tf.fill([2, 3], 2.0)),
        tf.scatter_div(v, [0], tf.fill([1, 3], 4.0)),
        tf.scatter_max(v, [3], [[5.0, 50.0, 5.0]]),
        tf.scatter_min(v, [1], [[0.0, 100.0, 3.0]]),
    ]
    return ops


def test_variable_scatters_in_sequence():
    out = []
    for tf in (tf1, hbtf):
        g = tf.Graph()
        with g.as_default():
            ops = variable_scatters(tf)
            with tf.Session(graph=g) as s:
                s.run(tf.global_variables_initializer())
                out.append([s.run(op).copy() for op in ops])
    assert_same(out[0], out[1])


def idioms(tf, xv, yv):
    """Common TF1 patterns: picking each row's label logit, masking a loss, summing duplicates."""
    logits = tf.placeholder(tf.float32, [None, 4])
    labels = tf.placeholder(tf.int32, [None])
    w = tf.Variable(tf.ones([4]))
    z = logits * w
    picked = tf.gather_nd(z, tf.stack([tf.range(tf.shape(z)[0]), labels], axis=1))
    mask = labels > 0
    loss = tf.reduce_mean(tf.boolean_mask(tf.square(picked), mask))
    hits = tf.where(tf.equal(labels, 2))
    y, idx = tf.unique(labels)
    sums = tf.unsorted_segment_sum(picked, idx, tf.shape(y)[0])
    grad = tf.gradients(loss, [w, logits])
    return [picked, loss, hits, y, idx, sums] + grad, {logits: xv, labels: yv}


def test_idioms():
    a, b = both(idioms, RNG.standard_normal((5, 4)), np.array([2, 0, 3, 2, 1], np.int32))
    assert_same(a, b)
