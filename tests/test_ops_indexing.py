"""Indexing, scatter, segment, set and shape ops (runtime/ops/scatter.py, segments.py,
shape_ops.py): values against numpy, gradients against finite differences, repeated and
out-of-range indices, empty inputs and the shape-only simulator's sizes."""

import numpy as np
import pytest
from opcheck import check_forward, check_gradient, run

import hetbed as hb
from hetbed.runtime.shapes import output_shapes

RNG = np.random.default_rng(3)
ERR = hb.errors.InvalidArgumentError


def _x(*shape):
    return RNG.standard_normal(shape)


def _c(v, dtype=np.int32):
    return hb.constant(np.asarray(v, dtype))


# ---- numpy references ------------------------------------------------------------------------------


def _np_scatter_nd(idx, upd, shape):
    out = np.zeros(shape, upd.dtype)
    k = idx.shape[-1]
    flat = out.reshape(-1, *shape[k:])
    rows = np.ravel_multi_index(tuple(idx.reshape(-1, k).T), shape[:k])
    np.add.at(flat, rows, upd.reshape(-1, *shape[k:]))
    return out


def _np_segment(kind, data, ids, n, empty):
    out = np.full((n, *data.shape[ids.ndim :]), empty, data.dtype)
    flat_ids = ids.reshape(-1)
    flat = data.reshape(flat_ids.size, *data.shape[ids.ndim :])
    fn = {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod, "mean": np.mean}[kind]
    for i in range(n):
        rows = flat[flat_ids == i]
        if len(rows):
            out[i] = fn(rows, axis=0)
    return out


def _np_unique(x):
    y, idx, cnt = [], [], []
    for v in x:
        if v not in y:
            y.append(v)
            cnt.append(0)
        idx.append(y.index(v))
        cnt[idx[-1]] += 1
    return np.array(y, x.dtype), np.array(idx, np.int32), np.array(cnt, np.int32)


IDX2 = np.array([[0, 1], [2, 0], [0, 1]], np.int32)  # a repeated index
IDS = np.array([0, 0, 2, 3, 3], np.int32)  # sorted, segment 1 empty
UIDS = np.array([3, -1, 0, 3, 1], np.int32)  # unsorted, one dropped, segment 2 empty


def _np_space_to_batch(x, block, pads):
    """A loop over output elements: batch ``o * B + b`` holds ``padded[b, h*k + i, ...]``."""
    x = np.pad(x, [(0, 0), *pads, *[(0, 0)] * (x.ndim - 1 - len(block))])
    bsz, sp = x.shape[0], [s // k for s, k in zip(x.shape[1 : len(block) + 1], block)]
    out = np.zeros((bsz * int(np.prod(block)), *sp, *x.shape[len(block) + 1 :]), x.dtype)
    for o, offs in enumerate(np.ndindex(*block)):
        for b in range(bsz):
            for pos in np.ndindex(*sp):
                src = tuple(p * k + i for p, k, i in zip(pos, block, offs))
                out[(o * bsz + b, *pos)] = x[(b, *src)]
    return out


FORWARD = {
    "gather_nd_elements": (
        lambda p: hb.gather_nd(p, IDX2),
        [_x(3, 2)],
        lambda p: p[IDX2[:, 0], IDX2[:, 1]],
    ),
    "gather_nd_rows": (
        lambda p: hb.gather_nd(p, np.array([[[2]], [[0]]], np.int64)),
        [_x(3, 4)],
        lambda p: p[[[2], [0]]],
    ),
    "gather_nd_empty": (
        lambda p: hb.gather_nd(p, np.zeros((0, 1), np.int32)),
        [_x(3, 4)],
        lambda p: np.zeros((0, 4)),
    ),
    "scatter_nd_sums_repeats": (
        lambda u: hb.scatter_nd(IDX2, u, [3, 2]),
        [_x(3)],
        lambda u: _np_scatter_nd(IDX2, u, (3, 2)),
    ),
    "scatter_nd_rows": (
        lambda u: hb.scatter_nd([[1], [1], [3]], u, hb.constant([4, 2])),
        [_x(3, 2)],
        lambda u: _np_scatter_nd(np.array([[1], [1], [3]]), u, (4, 2)),
    ),
    "scatter_nd_empty": (
        lambda u: hb.scatter_nd(np.zeros((0, 2), np.int64), u, [2, 3]),
        [np.zeros(0)],
        lambda u: np.zeros((2, 3)),
    ),
    "tensor_scatter_nd_add_empty": (
        lambda t: hb.tensor_scatter_nd_add(t, np.zeros((0, 1), np.int32), np.zeros((0, 2))),
        [_x(3, 2)],
        lambda t: t,
    ),
    "tensor_scatter_nd_update": (
        lambda t, u: hb.tensor_scatter_nd_update(t, [[0], [2]], u),
        [_x(3, 2), _x(2, 2)],
        lambda t, u: np.stack([u[0], t[1], u[1]]),
    ),
    "tensor_scatter_nd_add": (
        lambda t, u: hb.tensor_scatter_nd_add(t, IDX2, u),
        [_x(3, 2), _x(3)],
        lambda t, u: t + _np_scatter_nd(IDX2, u, (3, 2)),
    ),
    "tensor_scatter_sub": (
        lambda t, u: hb.tensor_scatter_sub(t, IDX2, u),
        [_x(3, 2), _x(3)],
        lambda t, u: t - _np_scatter_nd(IDX2, u, (3, 2)),
    ),
    "boolean_mask": (
        lambda t, m: hb.boolean_mask(t, m),
        [_x(4, 2), np.array([True, False, True, True])],
        lambda t, m: t[m],
    ),
    "boolean_mask_axis1_2d_mask": (
        lambda t, m: hb.boolean_mask(t, m, axis=1),
        [_x(2, 2, 3, 2), np.array([[True, False, True], [False, False, True]])],
        lambda t, m: t[:, m],
    ),
    "boolean_mask_none": (
        lambda t, m: hb.boolean_mask(t, m),
        [_x(3), np.zeros(3, bool)],
        lambda t, m: np.zeros(0),
    ),
    "where_indices": (
        lambda c: hb.where(c),
        [np.array([[True, False], [True, True], [False, False]])],
        lambda c: np.argwhere(c).astype(np.int64),
    ),
    "where_empty": (
        lambda c: hb.where(c > 9.0),
        [_x(2, 3)],
        lambda c: np.zeros((0, 2), np.int64),
    ),
    "unique": (
        lambda x: list(hb.unique(x)),
        [np.array([4, 1, 4, 7, 1, 1], np.int64)],
        lambda x: list(_np_unique(x)[:2]),
    ),
    "unique_int64_idx_and_counts": (
        lambda x: list(hb.unique_with_counts(x, out_idx=hb.int64)),
        [np.array([2.5, -1.0, 2.5, 0.0])],
        lambda x: [a if i == 0 else a.astype(np.int64) for i, a in enumerate(_np_unique(x))],
    ),
    "unique_empty": (
        lambda x: list(hb.unique(x)),
        [np.zeros(0, np.int32)],
        lambda x: [np.zeros(0, np.int32), np.zeros(0, np.int32)],
    ),
    "setdiff1d": (
        lambda x, y: list(hb.setdiff1d(x, y)),
        [np.array([1, 2, 3, 4, 5, 6], np.int32), np.array([1, 3, 5], np.int32)],
        lambda x, y: [np.array([2, 4, 6], np.int32), np.array([1, 3, 5], np.int32)],
    ),
    "invert_permutation": (
        lambda x: hb.invert_permutation(x),
        [np.array([3, 4, 0, 2, 1], np.int32)],
        lambda x: np.argsort(x).astype(np.int32),
    ),
    "segment_sum": (
        lambda d: hb.segment_sum(d, IDS),
        [_x(5, 2)],
        lambda d: _np_segment("sum", d, IDS, 4, 0),
    ),
    "segment_mean": (
        lambda d: hb.segment_mean(d, IDS),
        [_x(5, 2)],
        lambda d: _np_segment("mean", d, IDS, 4, 0),
    ),
    "segment_max": (
        lambda d: hb.segment_max(d, IDS),
        [_x(5, 2)],
        lambda d: _np_segment("max", d, IDS, 4, 0),
    ),
    "segment_min_int": (
        lambda d: hb.segment_min(d, IDS),
        [RNG.integers(-9, 9, (5,)).astype(np.int32)],
        lambda d: _np_segment("min", d, IDS, 4, 0),
    ),
    "segment_prod": (
        lambda d: hb.segment_prod(d, IDS),
        [_x(5)],
        lambda d: _np_segment("prod", d, IDS, 4, 1),
    ),
    "segment_sum_empty": (
        lambda d: hb.segment_sum(d, np.zeros(0, np.int32)),
        [np.zeros((0, 3))],
        lambda d: np.zeros((0, 3)),
    ),
    "unsorted_segment_max": (
        lambda d: hb.unsorted_segment_max(d, UIDS, 4),
        [_x(5, 2)],
        lambda d: _np_segment("max", d, UIDS, 4, -np.finfo(np.float64).max),
    ),
    "unsorted_segment_min": (
        lambda d: hb.unsorted_segment_min(d, UIDS.reshape(5, 1), 4),
        [_x(5, 1, 2)],
        lambda d: _np_segment("min", d, UIDS.reshape(5, 1), 4, np.finfo(np.float64).max),
    ),
    "unsorted_segment_max_empty": (
        lambda d: hb.unsorted_segment_max(d, np.zeros(0, np.int32), 2),
        [np.zeros((0, 2), np.int32)],
        lambda d: np.full((2, 2), np.iinfo(np.int32).min, np.int32),
    ),
    "unsorted_segment_mean": (
        lambda d: hb.unsorted_segment_mean(d, UIDS, 4),
        [_x(5, 2)],
        lambda d: _np_segment("mean", d, UIDS, 4, 0),
    ),
    "unsorted_segment_prod": (
        lambda d: hb.unsorted_segment_prod(d, UIDS, 4),
        [RNG.integers(-3, 4, (5, 2)).astype(np.int64)],
        lambda d: _np_segment("prod", d, UIDS, 4, 1),
    ),
    "sequence_mask": (
        lambda n: hb.sequence_mask(n, 4),
        [np.array([[0, 2], [4, 1]], np.int32)],
        lambda n: np.arange(4) < n[..., None],
    ),
    "sequence_mask_maxlen_from_data_float": (
        lambda n: hb.sequence_mask(n, dtype=hb.float32),
        [np.array([1, 3, 2], np.int32)],
        lambda n: (np.arange(3) < n[:, None]).astype(np.float32),
    ),
    "roll": (
        lambda x: hb.roll(x, [1, -2], [0, 1]),
        [_x(3, 4)],
        lambda x: np.roll(x, [1, -2], [0, 1]),
    ),
    "meshgrid_xy": (
        lambda a, b: hb.meshgrid(a, b),
        [_x(3), _x(2)],
        lambda a, b: np.meshgrid(a, b),
    ),
    "meshgrid_ij": (
        lambda a, b, c: hb.meshgrid(a, b, c, indexing="ij"),
        [_x(3), _x(2), _x(2)],
        lambda a, b, c: np.meshgrid(a, b, c, indexing="ij"),
    ),
    "searchsorted": (
        lambda s, v: hb.searchsorted(s, v),
        [np.array([[1.0, 3.0, 5.0], [0.0, 2.0, 2.0]]), np.array([[3.0, 6.0], [2.0, -1.0]])],
        lambda s, v: np.array([np.searchsorted(s[i], v[i]) for i in range(2)], np.int32),
    ),
    "searchsorted_right_int64": (
        lambda s, v: hb.searchsorted(s, v, side="right", out_type=hb.int64),
        [np.array([0.0, 2.0, 2.0, 7.0]), np.array([2.0, 8.0, -1.0])],
        lambda s, v: np.searchsorted(s, v, side="right"),
    ),
    "bincount": (
        lambda a: hb.bincount(a),
        [np.array([[1, 4], [1, 0]], np.int32)],
        lambda a: np.bincount(a.reshape(-1)).astype(np.int32),
    ),
    "bincount_weights_min_max": (
        lambda a, w: hb.bincount(a, weights=w, minlength=3, maxlength=5),
        [np.array([1, 7, 1, 4], np.int32), np.array([0.5, 2.0, 1.0, 3.0])],
        lambda a, w: np.array([0.0, 1.5, 0.0, 0.0, 3.0]),
    ),
    "histogram_fixed_width": (
        lambda v: hb.histogram_fixed_width(v, [0.0, 1.0], nbins=4),
        [np.array([-1.0, 0.0, 0.3, 0.5, 0.99, 1.0, 5.0])],
        lambda v: np.array([2, 1, 1, 3], np.int32),
    ),
    "broadcast_to": (
        lambda x: hb.broadcast_to(x, [2, 3, 2]),
        [_x(3, 1)],
        lambda x: np.broadcast_to(x, (2, 3, 2)),
    ),
    "broadcast_dynamic_shape": (
        lambda a, b: hb.broadcast_dynamic_shape(a, b),
        [np.array([3, 1], np.int32), np.array([2, 1, 4], np.int32)],
        lambda a, b: np.array([2, 3, 4], np.int32),
    ),
    "shape_n": (
        lambda a, b: hb.shape_n([a, b]),
        [_x(2, 3), _x(4)],
        lambda a, b: [np.array([2, 3], np.int32), np.array([4], np.int32)],
    ),
    "space_to_depth": (
        lambda x: hb.space_to_depth(x, 2),
        [_x(1, 4, 2, 3)],
        lambda x: x.reshape(1, 2, 2, 1, 2, 3).transpose(0, 1, 3, 2, 4, 5).reshape(1, 2, 1, 12),
    ),
    "space_to_batch_nd": (
        lambda x: hb.space_to_batch_nd(x, [2, 3], [[1, 1], [0, 2]]),
        [_x(2, 2, 4, 2)],
        lambda x: _np_space_to_batch(x, (2, 3), ((1, 1), (0, 2))),
    ),
    "batch_to_space_nd_inverts_and_crops": (
        lambda x: hb.batch_to_space_nd(
            hb.space_to_batch_nd(x, [2], [[1, 2]]), hb.constant([2]), [[1, 2]]
        ),
        [_x(2, 3, 2)],
        lambda x: x,
    ),
    "batch_to_space": (
        lambda x: hb.batch_to_space(x, [[0, 1], [1, 0]], 2),
        [_np_space_to_batch(np.arange(18.0).reshape(1, 3, 3, 2), (2, 2), ((0, 1), (1, 0)))],
        lambda x: np.arange(18.0).reshape(1, 3, 3, 2),
    ),
    "depth_to_space": (
        lambda x: hb.depth_to_space(x, 2),
        [_x(2, 1, 2, 8)],
        lambda x: x.reshape(2, 1, 2, 2, 2, 2).transpose(0, 1, 3, 2, 4, 5).reshape(2, 2, 4, 2),
    ),
}


@pytest.mark.parametrize("case", sorted(FORWARD))
def test_forward_against_numpy(case):
    build, inputs, ref = FORWARD[case]
    check_forward(build, inputs, ref)


# ---- gradients -------------------------------------------------------------------------------------

GRADIENTS = {
    "gather_nd": (lambda p: hb.gather_nd(p, IDX2), [_x(3, 2)]),
    "gather_nd_rows": (lambda p: hb.gather_nd(p, [[2], [2], [0]]), [_x(3, 2)]),
    "scatter_nd": (lambda u: hb.scatter_nd([[1], [1], [3]], u, [4, 2]), [_x(3, 2)]),
    "tensor_scatter_nd_update": (
        lambda t, u: hb.tensor_scatter_nd_update(t, [[0], [2]], u),
        [_x(3, 2), _x(2, 2)],
    ),
    "tensor_scatter_nd_add": (lambda t, u: hb.tensor_scatter_nd_add(t, IDX2, u), [_x(3, 2), _x(3)]),
    "boolean_mask": (
        lambda t: hb.reshape(hb.boolean_mask(t, [[True, False], [True, True]], axis=1), [3, 3, 1]),
        [_x(3, 2, 2, 1)],
    ),
    "segment_sum": (lambda d: hb.reshape(hb.segment_sum(d, IDS), [4, 2]), [_x(5, 2)]),
    "segment_mean": (lambda d: hb.reshape(hb.segment_mean(d, IDS), [4, 2]), [_x(5, 2)]),
    "segment_max": (lambda d: hb.reshape(hb.segment_max(d, IDS), [4, 2]), [_x(5, 2)]),
    "segment_min": (lambda d: hb.reshape(hb.segment_min(d, IDS), [4, 2]), [_x(5, 2)]),
    "unsorted_segment_max": (lambda d: hb.unsorted_segment_max(d, UIDS, 4) * 1.0, [_x(5, 2)]),
    "unsorted_segment_min": (
        lambda d: hb.unsorted_segment_min(d, UIDS.reshape(5, 1), 4),
        [_x(5, 1, 2)],
    ),
    "unsorted_segment_mean": (lambda d: hb.unsorted_segment_mean(d, UIDS, 4), [_x(5, 2)]),
    "roll": (lambda x: hb.roll(x, [1, 3], [0, 1]), [_x(2, 3)]),
    "broadcast_to": (lambda x: hb.broadcast_to(x, [2, 3, 2]), [_x(3, 1)]),
    "space_to_depth": (lambda x: hb.space_to_depth(x, 2), [_x(1, 2, 4, 1)]),
    "space_to_batch_nd": (
        lambda x: hb.space_to_batch_nd(x, [2, 2], [[1, 1], [0, 0]]),
        [_x(1, 2, 2, 1)],
    ),
    "batch_to_space_nd": (
        lambda x: hb.batch_to_space_nd(x, [2, 1], [[1, 0], [0, 1]]),
        [_x(4, 2, 2)],
    ),
}


@pytest.mark.parametrize("case", sorted(GRADIENTS))
def test_gradient_against_finite_differences(case):
    build, inputs = GRADIENTS[case]
    if case.startswith("unsorted_segment_m") and case != "unsorted_segment_mean":
        # empty segment 2 holds the dtype's extreme value: weigh only the others
        def build(d, _b=build):  # noqa: F811
            out = _b(d)
            keep = np.ones(out.shape.as_list(), bool)
            keep[2] = False
            return hb.where(hb.constant(keep), out, hb.zeros_like(out))

    check_gradient(build, inputs)


def test_minmax_gradient_splits_ties():
    """Tied maxima share the gradient equally, as in TF."""
    d = np.array([[1.0, 2.0], [1.0, 0.0], [3.0, 3.0]])
    got = run(lambda x: hb.gradients(hb.reduce_sum(hb.segment_max(x, [0, 0, 1])), x)[0], [d])
    np.testing.assert_allclose(got, [[0.5, 1.0], [0.5, 0.0], [1.0, 1.0]])


# ---- variables -------------------------------------------------------------------------------------


def test_variable_scatter_ops_apply_every_repeat():
    """scatter_nd_* and scatter_{mul,div,max,min} update the variable in place, each repeated
    index applied in turn."""
    a0 = np.arange(1.0, 7.0).reshape(3, 2)
    g = hb.Graph()
    with g.as_default():
        w = hb.Variable(a0)
        with hb.Session(graph=g) as s:
            s.run(w.initializer)
            want = a0.copy()
            want[0, 1] = 9.0
            want[2] = [7.0, 8.0]
            got = s.run(hb.scatter_nd_update(w, [[0, 1], [2, 0], [2, 1]], [9.0, 7.0, 8.0]))
            np.testing.assert_array_equal(got, want)
            np.add.at(want, ([1, 1], [0, 0]), [1.0, 2.0])
            np.testing.assert_array_equal(
                s.run(hb.scatter_nd_add(w, [[1, 0], [1, 0]], [1, 2.0])), want
            )
            want[0] -= [1.0, 1.0]
            np.testing.assert_array_equal(s.run(hb.scatter_nd_sub(w, [[0]], [[1.0, 1.0]])), want)
            want[1] *= [2.0, 3.0] * np.array([4.0, 5.0])
            np.testing.assert_array_equal(
                s.run(hb.scatter_mul(w, [1, 1], [[2.0, 3.0], [4.0, 5.0]])), want
            )
            want[2] /= 4.0
            np.testing.assert_array_equal(
                s.run(hb.scatter_div(w, [2, 2], np.full((2, 2), 2.0))), want
            )
            want[0] = np.maximum(want[0], [5.0, -1.0])
            want[0] = np.maximum(want[0], [0.0, 30.0])
            np.testing.assert_array_equal(
                s.run(hb.scatter_max(w, [0, 0], [[5.0, -1.0], [0.0, 30.0]])), want
            )
            want[1] = np.minimum(want[1], [-2.0, 100.0])
            np.testing.assert_array_equal(s.run(hb.scatter_min(w, [1], [[-2.0, 100.0]])), want)
            np.testing.assert_array_equal(s.run(w), want)
            with pytest.raises(ERR, match=r"ScatterNdAdd.*indices\[1\] = \[3, 0\].*\(3, 2\)"):
                s.run(hb.scatter_nd_add(w, [[0, 0], [3, 0]], [1.0, 1.0]))
            with pytest.raises(ERR, match="index 5 out of range"):
                s.run(hb.scatter_max(w, [5], [[1.0, 1.0]]))
            np.testing.assert_array_equal(s.run(w), want)  # nothing half-applied


def test_variable_methods():
    """Variable.scatter_* take an IndexedSlices; scatter_nd_* take indices and updates."""
    g = hb.Graph()
    with g.as_default():
        w = hb.Variable(np.ones((3, 2)))
        delta = hb.IndexedSlices(hb.constant(np.full((2, 2), 3.0)), hb.constant([2, 0]))
        with hb.Session(graph=g) as s:
            s.run(w.initializer)
            s.run(w.scatter_mul(delta))
            s.run(
                w.scatter_max(
                    hb.IndexedSlices(hb.constant(np.array([[5.0, 0.0]])), hb.constant([0]))
                )
            )
            s.run(w.scatter_nd_add([[1, 1]], [4.0]))
            s.run(
                w.scatter_update(
                    hb.IndexedSlices(hb.constant(np.array([[7.0, 8.0]])), hb.constant([2]))
                )
            )
            np.testing.assert_array_equal(s.run(w), [[5, 3], [1, 5], [7, 8]])


def test_integer_scatter_div_truncates():
    g = hb.Graph()
    with g.as_default():
        w = hb.Variable(np.array([7, -7, 9], np.int32))
        with hb.Session(graph=g) as s:
            s.run(w.initializer)
            np.testing.assert_array_equal(s.run(hb.scatter_div(w, [0, 1], [2, 2])), [3, -3, 9])


# ---- errors ----------------------------------------------------------------------------------------


def test_out_of_range_indices_name_the_op_and_index():
    p = _x(3, 2)
    cases = [
        (
            lambda x: hb.gather_nd(x, [[0, 1], [3, 0]], name="gnd"),
            r"GatherNd 'gnd'.*\[1\] = \[3, 0\]",
        ),
        (
            lambda x: hb.scatter_nd([[4]], np.ones(1), [4]) + 0 * x[0, 0],
            r"ScatterNd .*\[0\] = \[4\]",
        ),
        (
            lambda x: hb.tensor_scatter_nd_add(x, [[-1]], [[1.0, 1.0]]),
            r"TensorScatterAdd .*= \[-1\]",
        ),
        (lambda x: hb.segment_sum(x, [1, 0, 0]), r"SegmentSum .* must be sorted"),
        (lambda x: hb.segment_max(x, [-1, 0, 0]), r"SegmentMax .* negative"),
        (lambda x: hb.unsorted_segment_max(x, [0, 5, 1], 3), r"UnsortedSegmentMax .* id 5"),
        (lambda x: hb.invert_permutation([0, 0, 1]), "not a permutation"),
        (lambda x: hb.invert_permutation([0, 3, 1]), r"x\[1\] = 3"),
        (lambda x: hb.bincount([1, -2]), "negative value -2"),
        (
            lambda x: hb.broadcast_to(x, hb.placeholder_with_default([2, 3], [2])),
            "cannot broadcast",
        ),
    ]
    for build, pattern in cases:
        with pytest.raises(ERR, match=pattern):
            run(build, [p])


def test_static_shape_errors():
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, [3, 2])
        with pytest.raises(ERR, match=r"GatherNd: indices.shape\[-1\] = 3"):
            hb.gather_nd(x, [[0, 0, 0]])
        with pytest.raises(ERR, match="GatherNd: indices must be int32 or int64"):
            hb.gather_nd(x, [[0.0]])
        with pytest.raises(ERR, match=r"ScatterNd: updates shape \(2,\) must be"):
            hb.scatter_nd([[0], [1]], [1.0, 2.0], [3, 2])
        with pytest.raises(ERR, match=r"BooleanMask: mask shape \(2,\)"):
            hb.boolean_mask(x, [True, False])
        with pytest.raises(ERR, match="BroadcastTo: cannot broadcast"):
            hb.broadcast_to(x, [3, 3])
        with pytest.raises(ERR, match="SpaceToDepth: height 3"):
            hb.space_to_depth(hb.placeholder(hb.float32, [1, 3, 2, 1]), 2)
        with pytest.raises(ERR, match=r"SpaceToBatchND: padded dimension 1 \(2 \+ 0 \+ 1\)"):
            hb.space_to_batch_nd(x, [2], [[0, 1]])
        with pytest.raises(ERR, match="BatchToSpaceND: batch 3 is not divisible"):
            hb.batch_to_space_nd(x, [2], [[0, 0]])
        with pytest.raises(ERR, match="SegmentSum: segment_ids must be 1-d"):
            hb.segment_sum(x, [[0, 0]])
    assert hb.broadcast_static_shape(hb.TensorShape([3, 1]), hb.TensorShape([4])).as_list() == [
        3,
        4,
    ]
    with pytest.raises(ValueError, match="cannot be broadcast"):
        hb.broadcast_static_shape(hb.TensorShape([3]), hb.TensorShape([4]))


# ---- static shapes and the shape-only simulator ---------------------------------------------------


def test_data_dependent_sizes_are_unknown_and_simulated():
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, [6, 2])
        ids = hb.placeholder(hb.int32, [6])
        outs = {
            "where": hb.where(x > 0),
            "mask": hb.boolean_mask(x, x[:, 0] > 0),
            "unique": hb.unique(ids)[0],
            "segment": hb.segment_sum(x, ids),
            "unsorted": hb.unsorted_segment_max(x, ids, 4),
        }
    assert outs["where"].shape.as_list() == [None, 2]
    assert outs["mask"].shape.as_list() == [None, 2]
    assert outs["unique"].shape.as_list() == [None]
    assert outs["segment"].shape.as_list() == [None, 2]
    assert outs["unsorted"].shape.as_list() == [4, 2]
    sim = {
        k: output_shapes(t.op, [tuple(i.shape.as_list()) for i in t.op.inputs])
        for k, t in outs.items()
    }
    assert sim["where"] == [(12, 2)]
    assert sim["mask"] == [(6, 2)]
    assert sim["unique"][0] == (6,)
    assert sim["segment"] == [(6, 2)]
    assert sim["unsorted"] == [(4, 2)]


def test_where_with_x_and_y_still_selects():
    got = run(lambda c: hb.where(c, [1.0, 2.0], [3.0, 4.0]), [np.array([True, False])])
    np.testing.assert_array_equal(got, [1.0, 4.0])


def test_shape_only_simulation_runs_data_dependent_ops_and_gradients():
    """A simulated step sizes data-dependent outputs by their expected shapes and runs them."""
    from hetbed.devices.costmodel import DevicePerf
    from hetbed.simulator import Cluster, SimSession, sim_value

    toy = DevicePerf("toy", {"float32": 1e12}, memory_bandwidth=1e11, memory_bytes=1e9)
    c = Cluster()
    c.add_task("worker", 0, cpu=toy, gpu=(toy, 1), nic=(1e9, 50e-6))
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [16, 4])
        ids = hb.placeholder(hb.int32, [16])
        with hb.device("/job:worker/task:0/device:gpu:0"):
            m = hb.boolean_mask(x, x[:, 0] > 0)
            seg = hb.segment_max(x, ids)
            u, _ = hb.unique(ids)
            w = hb.where(x > 0)
            g = hb.gather_nd(x, w)
            gx = hb.gradients(hb.reduce_sum(m) + hb.reduce_sum(seg) + hb.reduce_sum(g), x)[0]
        s = SimSession(c)
        out = s.run([m, seg, u, w, g, gx], {x: sim_value([16, 4]), ids: sim_value([16], np.int32)})
    assert [o.shape for o in out] == [(16, 4), (16, 4), (16,), (64, 2), (64,), (16, 4)]
    types = set(s.last_record.ops.type)
    assert {"BooleanMaskGrad", "ScatterNd", "SegmentMax", "Unique", "Where"} <= types
