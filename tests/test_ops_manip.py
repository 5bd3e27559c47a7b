"""Array manipulation ops (runtime/ops/manip.py): values against numpy, gradients against finite
differences, shape rules, sparse gather gradients and error messages."""

import numpy as np
import pytest
from opcheck import check_forward, check_gradient

import hetbed as hb
from hetbed.runtime.registry import get_op_def

RNG = np.random.default_rng(0)


def _x(shape, dtype=np.float64):
    if np.dtype(dtype).kind in "iu":
        return RNG.integers(-5, 6, size=shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def _unknown(t, shape):
    """``t`` with a less known static shape (as a tensor whose size comes at run time)."""
    return hb.placeholder_with_default(t, shape)


def _unknown_cols(t):
    """``t`` (rank 2) with its column count unknown statically, differentiably."""
    n = t.shape.as_list()[1]
    return hb.gather(t, _unknown(hb.constant(np.arange(n, dtype=np.int32)), [None]), axis=1)


# ---- forward values ------------------------------------------------------------------------------

FORWARD = {
    "transpose_default": (lambda x: hb.transpose(x), lambda x: x.T),
    "transpose_perm": (lambda x: hb.transpose(x, [1, 2, 0]), lambda x: x.transpose(1, 2, 0)),
    "expand_dims": (lambda x: hb.expand_dims(x, -1), lambda x: x[..., None]),
    "expand_dims_1": (lambda x: hb.expand_dims(x, 1), lambda x: x[:, None]),
    "squeeze_axis": (
        lambda x: hb.squeeze(hb.expand_dims(x, 1), [1]),
        lambda x: x,
    ),
    "concat": (lambda x: hb.concat([x, x[:, :1]], 1), lambda x: np.concatenate([x, x[:, :1]], 1)),
    "concat_neg": (lambda x: hb.concat([x, 2 * x], -3), lambda x: np.concatenate([x, 2 * x], 0)),
    "split_even": (lambda x: hb.split(x, 2, axis=0), lambda x: np.split(x, 2, axis=0)),
    "split_sizes": (
        lambda x: hb.split(x, [1, -1], axis=-1),
        lambda x: np.split(x, [1], axis=-1),
    ),
    "stack": (lambda x: hb.stack([x, x + x], axis=1), lambda x: np.stack([x, x + x], 1)),
    "stack_neg": (lambda x: hb.stack([x, x], axis=-1), lambda x: np.stack([x, x], -1)),
    "unstack": (lambda x: hb.unstack(x, axis=1), lambda x: list(np.moveaxis(x, 1, 0))),
    "slice": (lambda x: hb.slice(x, [0, 1, 1], [1, -1, 2]), lambda x: x[0:1, 1:, 1:3]),
    "getitem": (lambda x: x[1, ::-1, None, 1:], lambda x: x[1, ::-1, None, 1:]),
    "getitem_ellipsis": (lambda x: x[..., -1], lambda x: x[..., -1]),
    "getitem_steps": (lambda x: x[::-1, 2:0:-2, ::3], lambda x: x[::-1, 2:0:-2, ::3]),
    "getitem_scalar": (lambda x: x[1, 2, 3], lambda x: x[1, 2, 3]),
    "gather": (lambda x: hb.gather(x, [1, 0, 1]), lambda x: x[[1, 0, 1]]),
    "gather_axis": (
        lambda x: hb.gather(x, [[3, 0], [1, 1]], axis=2),
        lambda x: np.take(x, [[3, 0], [1, 1]], axis=2),
    ),
    "tile": (lambda x: hb.tile(x, [1, 2, 3]), lambda x: np.tile(x, [1, 2, 3])),
    "pad": (
        lambda x: hb.pad(x, [[1, 0], [0, 2], [1, 1]], constant_values=3),
        lambda x: np.pad(x, [[1, 0], [0, 2], [1, 1]], constant_values=3),
    ),
    "pad_reflect": (
        lambda x: hb.pad(x, [[1, 1], [2, 1], [0, 3]], "REFLECT"),
        lambda x: np.pad(x, [[1, 1], [2, 1], [0, 3]], "reflect"),
    ),
    "pad_symmetric": (
        lambda x: hb.pad(x, [[2, 2], [3, 0], [1, 4]], "symmetric"),
        lambda x: np.pad(x, [[2, 2], [3, 0], [1, 4]], "symmetric"),
    ),
    "reverse": (lambda x: hb.reverse(x, [0, -1]), lambda x: x[::-1, :, ::-1]),
    "segment_sum": (
        lambda x: hb.unsorted_segment_sum(x, [2, 2], 4),
        lambda x: np.stack([0 * x[0], 0 * x[0], x[0] + x[1], 0 * x[0]]),
    ),
}


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("case", sorted(FORWARD))
def test_forward_matches_numpy(case, dtype):
    """Each op on a (2, 3, 4) tensor gives numpy's value, dtype and shape."""
    build, ref = FORWARD[case]
    check_forward(build, [_x((2, 3, 4), dtype)], ref)


def test_forward_int64_and_bool_layout_ops():
    """Layout ops keep int64 and bool dtypes."""
    x = _x((3, 4), np.int64)
    check_forward(lambda t: hb.concat([t, t], 0), [x], lambda v: np.concatenate([v, v]))
    b = x > 0
    check_forward(lambda t: hb.transpose(t[:, 1:]), [b], lambda v: v[:, 1:].T)


def test_one_hot_values_axis_and_out_of_range():
    """one_hot puts on_value at each index along ``axis``; indices outside [0, depth) give off."""
    idx = np.array([[0, 2], [3, -1]], dtype=np.int32)

    def ref(i, axis):
        r = np.where(i[..., None] == np.arange(3), 5.0, -1.0).astype(np.float64)
        return np.moveaxis(r, -1, axis)

    for axis in (-1, 0, 1):
        check_forward(
            lambda t, a=axis: hb.one_hot(t, 3, 5.0, -1.0, axis=a, dtype=hb.float64),
            [idx],
            lambda i, a=axis: ref(i, a),
        )
    check_forward(lambda t: hb.one_hot(t, 4), [idx[0]], lambda i: np.eye(4, dtype=np.float32)[i])
    check_forward(
        lambda t: hb.one_hot(t, 3, on_value=7, off_value=0),
        [idx[0].astype(np.int64)],
        lambda i: 7 * np.eye(3, dtype=np.int32)[i],
    )


def test_fill_zeros_ones_range():
    """fill/zeros/ones give a constant of the static shape; range matches numpy.arange."""
    with hb.Graph().as_default() as g:
        ts = [
            hb.fill([2, 3], 1.5),
            hb.zeros([2, 2]),
            hb.ones([3], dtype=hb.int64),
            hb.zeros([0, 4], hb.int32),
            hb.range(5),
            hb.range(2, 11, 3),
            hb.range(5, 0, -2),
            hb.range(0.0, 1.0, 0.3),
            hb.range(1, 2.2, 0.5, dtype=hb.float64),
        ]
        with hb.Session() as s:
            vals = s.run(ts)
        assert [op.type for op in g.get_operations()].count("Fill") == 4
    want = [
        np.full((2, 3), 1.5, np.float32),
        np.zeros((2, 2), np.float32),
        np.ones(3, np.int64),
        np.zeros((0, 4), np.int32),
        np.arange(5, dtype=np.int32),
        np.arange(2, 11, 3, dtype=np.int32),
        np.arange(5, 0, -2, dtype=np.int32),
        np.arange(0.0, 1.0, 0.3, dtype=np.float32),
        np.arange(1, 2.2, 0.5),
    ]
    for t, v, w in zip(ts, vals, want):
        assert v.dtype == w.dtype and tuple(t.shape.as_list()) == w.shape == v.shape, t.name
        np.testing.assert_allclose(v, w, rtol=1e-6)


def test_range_over_numbers_known_only_when_the_graph_runs():
    """range with a start, limit or delta from the graph (tf.range(tf.shape(x)[0])) matches
    numpy.arange: its length is known at run time, its dtype from its operands; a delta of
    zero or a limit it cannot reach fails the step naming the op."""
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [None, 3])
        n = hb.shape(x)[0]
        d = hb.placeholder(hb.int64, [])
        ts = [
            hb.range(n),
            hb.range(1, n, 2),
            hb.range(n, -3, -2),
            hb.range(0, n * 3, d),
            hb.range(hb.cast(n, hb.float32), 0.0, -0.75),
            hb.range(0.5, hb.cast(n, hb.float64)),
        ]
        assert [t.shape.as_list() for t in ts] == [[None]] * 6
        bad = hb.range(n, 0, name="down")
        with hb.Session() as s:
            vals = s.run(ts, {x: np.zeros((5, 3), np.float32), d: 4})
            with pytest.raises(hb.errors.InvalidArgumentError, match="'down'.* cannot reach"):
                s.run(bad, {x: np.zeros((2, 3), np.float32)})
            with pytest.raises(hb.errors.InvalidArgumentError, match="delta must not be zero"):
                s.run(ts[3], {x: np.zeros((2, 3), np.float32), d: 0})
    want = [
        np.arange(5, dtype=np.int32),
        np.arange(1, 5, 2, dtype=np.int32),
        np.arange(5, -3, -2, dtype=np.int32),
        np.arange(0, 15, 4, dtype=np.int64),
        np.arange(5.0, 0.0, -0.75, dtype=np.float32),
        np.arange(0.5, 5.0, dtype=np.float64),
    ]
    for v, w in zip(vals, want):
        assert v.dtype == w.dtype
        np.testing.assert_allclose(v, w, rtol=1e-6)


def test_split_by_ints_returns_a_list_and_names():
    """split with num=1 still returns a list; zeros is a single named Fill op."""
    with hb.Graph().as_default():
        x = hb.constant([1.0, 2.0])
        parts = hb.split(x, 1)
        assert isinstance(parts, list) and len(parts) == 1
        z = hb.zeros([2], name="zz")
        assert z.op.name == "zz" and z.op.type == "Fill"


def test_unsorted_segment_sum_drops_negative_ids():
    """Rows whose segment id is negative are dropped; repeated ids are summed."""
    data = _x((5, 2), np.float32)
    ids = np.array([0, -1, 2, 0, -1], dtype=np.int32)

    def ref(d, i):
        out = np.zeros((3, 2), np.float32)
        for r, s in zip(d, i):
            if s >= 0:
                out[s] += r
        return out

    check_forward(lambda d, i: hb.unsorted_segment_sum(d, i, 3), [data, ids], ref)


def test_views_do_not_leak_writes_into_constants():
    """Values fetched from view ops (slices, transposes) are copies: writing them changes nothing."""
    with hb.Graph().as_default():
        c = hb.constant(np.arange(6.0).reshape(2, 3))
        ys = [c[0], hb.transpose(c), hb.split(c, 3, axis=1)[0], hb.reverse(c, [1])]
        with hb.Session() as s:
            first = s.run(ys)
            for v in first:
                v[...] = -1.0
            again = s.run(ys)
    np.testing.assert_array_equal(again[0], [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(again[1], np.arange(6.0).reshape(2, 3).T)


def test_getitem_on_variable():
    """Indexing a Variable reads it and slices the value."""
    with hb.Graph().as_default():
        v = hb.Variable(np.arange(12.0).reshape(3, 4))
        y = v[1:, ::2]
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            np.testing.assert_array_equal(s.run(y), np.arange(12.0).reshape(3, 4)[1:, ::2])


# ---- static shape rules --------------------------------------------------------------------------


def test_shape_rules_with_unknown_dims():
    """Shape rules keep what is known and leave unknown dims (and ranks) unknown."""
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [None, 3])
        u = hb.placeholder(hb.float32)
        assert hb.concat([x, x], 0).shape.as_list() == [None, 3]
        assert hb.concat([x, x], 1).shape.as_list() == [None, 6]
        assert hb.concat([x, u], 1).shape.as_list() == [None, None]
        assert hb.transpose(x).shape.as_list() == [3, None]
        assert hb.transpose(u).shape.dims is None
        assert hb.stack([x, x], 1).shape.as_list() == [None, 2, 3]
        assert [t.shape.as_list() for t in hb.split(x, [1, -1], 1)] == [[None, 1], [None, 2]]
        assert hb.split(x, 2, 0)[0].shape.as_list() == [None, 3]
        assert hb.slice(x, [1, 1], [-1, 2]).shape.as_list() == [None, 2]
        assert x[1:, ::2].shape.as_list() == [None, 2]
        assert x[..., None, 0].shape.as_list() == [None, 1]
        assert u[0].shape.dims is None
        assert hb.gather(x, [[0, 1]]).shape.as_list() == [1, 2, 3]
        assert hb.gather(x, [0, 1], axis=1).shape.as_list() == [None, 2]
        assert hb.tile(x, [2, 2]).shape.as_list() == [None, 6]
        assert hb.pad(x, [[1, 1], [0, 2]]).shape.as_list() == [None, 5]
        assert hb.squeeze(hb.expand_dims(x, 0)).shape.dims is None
        assert hb.squeeze(hb.expand_dims(x, 0), 0).shape.as_list() == [None, 3]
        assert hb.one_hot(hb.placeholder(hb.int32, [None]), 4, axis=0).shape.as_list() == [4, None]
        ids = hb.placeholder(hb.int32, [None])
        assert hb.unsorted_segment_sum(x, ids, 7).shape.as_list() == [7, 3]


def test_concat_with_unknown_rank_runs():
    """concat of tensors of unknown rank works at run time, negative axis included."""
    a, b = _x((2, 3)), _x((2, 1))
    check_forward(
        lambda p, q: hb.reshape(hb.concat([_unknown(p, None), _unknown(q, None)], -1), [2, 4]),
        [a, b],
        lambda p, q: np.concatenate([p, q], -1),
    )


# ---- gradients -----------------------------------------------------------------------------------

GRADS = {
    "transpose": (lambda x: hb.transpose(x, [2, 0, 1]), [(2, 3, 4)]),
    "transpose_default": (lambda x: hb.transpose(x), [(2, 3, 4)]),
    "expand_dims": (lambda x: hb.expand_dims(x, 1) * 2.0, [(2, 3)]),
    "squeeze": (lambda x: hb.squeeze(x, [1]), [(2, 1, 3)]),
    "squeeze_all": (lambda x: hb.squeeze(x), [(1, 3, 1)]),
    "concat": (lambda x, y: hb.concat([x, y, x], 1), [(2, 3), (2, 1)]),
    "concat_unknown": (
        lambda x, y: hb.reshape(hb.concat([_unknown_cols(x), _unknown_cols(y)], 1), [2, 4]),
        [(2, 3), (2, 1)],
    ),
    "split": (lambda x: hb.concat(hb.split(x, [1, -1], axis=1)[::-1], 1), [(2, 3)]),
    "split_one_used": (lambda x: hb.split(x, 3, axis=1)[1], [(2, 3)]),
    "stack": (lambda x, y: hb.stack([x, y], axis=1), [(2, 3), (2, 3)]),
    "unstack": (lambda x: hb.unstack(x, axis=1)[0] * hb.unstack(x, axis=1)[2], [(2, 3)]),
    "slice": (lambda x: hb.slice(x, [1, 0], [1, -1]), [(3, 4)]),
    "getitem": (lambda x: x[::-1, None, 1:3], [(3, 4)]),
    "getitem_neg_step": (lambda x: x[..., 3:0:-2] + x[0, ::-2], [(2, 4)]),
    "getitem_scalar": (lambda x: x[1, 2] * x, [(3, 4)]),
    "gather_axis0": (lambda x: hb.gather(x, [2, 0, 2]), [(3, 2)]),
    "gather_2d_indices": (lambda x: hb.gather(x, [[1, 1], [0, 2]]), [(3, 2)]),
    "gather_axis1": (lambda x: hb.gather(x, [[1, 1], [0, 2]], axis=1), [(2, 3)]),
    "gather_repeats": (lambda x: hb.gather(x, [0, 0, 1]) * 1.5, [(2, 3)]),
    "segment_sum": (
        lambda x: hb.unsorted_segment_sum(x, [0, -1, 2, 0], 3),
        [(4, 2)],
    ),
    "fill": (lambda v: hb.fill([2, 3], v), [()]),
    "tile": (lambda x: hb.tile(x, [2, 3]), [(2, 2)]),
    "pad": (lambda x: hb.pad(x, [[1, 0], [2, 1]]), [(2, 3)]),
    "pad_reflect": (lambda x: hb.pad(x, [[2, 1], [1, 2]], "REFLECT"), [(3, 4)]),
    "pad_symmetric": (lambda x: hb.pad(x, [[3, 1], [0, 2]], "SYMMETRIC"), [(3, 2)]),
    "reverse": (lambda x: hb.reverse(x, [1]), [(2, 3)]),
}


@pytest.mark.parametrize("case", sorted(GRADS))
def test_gradient_matches_finite_differences(case):
    """hb.gradients of each op equals central finite differences (float64)."""
    build, shapes = GRADS[case]
    check_gradient(build, [_x(s) for s in shapes])


SECOND_ORDER = {
    "slice": lambda x: hb.slice(x, [1, 0], [1, -1]),
    "strided": lambda x: x[::-1, 1:3],
    "tile": lambda x: hb.tile(x, [2, 1]),
    "mirror_pad": lambda x: hb.pad(x, [[1, 1], [1, 0]], "REFLECT"),
    "gather_axis1": lambda x: hb.gather(x, [2, 2, 0], axis=1),
    "segment_sum": lambda x: hb.unsorted_segment_sum(x, [1, -1, 1], 2),
    "concat": lambda x: hb.concat([x, x[:, :1]], 1),
}


@pytest.mark.parametrize("case", sorted(SECOND_ORDER))
def test_gradient_of_gradient_ops(case):
    """The gradient ops are differentiable too: d/dv of grad(sum(f(x) * v)) by finite differences."""
    f = SECOND_ORDER[case]

    def grad_x(x, v):
        g = hb.gradients(hb.reduce_sum(f(x) * v), x)[0]
        return hb.indexed_slices_to_dense(g) if isinstance(g, hb.IndexedSlices) else g

    x = _x((3, 3))
    with hb.Graph().as_default():
        out_shape = f(hb.constant(x)).shape.as_list()
    check_gradient(grad_x, [x, _x(out_shape)], wrt=[1])


def test_gather_gradient_stays_sparse():
    """The gradient of gather (axis 0) w.r.t. params is an IndexedSlices of the gathered rows."""
    p = _x((4, 3))
    with hb.Graph().as_default():
        params = hb.placeholder(hb.float64, [4, 3])
        loss = hb.reduce_sum(hb.gather(params, [3, 1, 3]) * 2.0)
        (g,) = hb.gradients(loss, [params])
        assert isinstance(g, hb.IndexedSlices)
        with hb.Session() as s:
            v = s.run(g, {params: p})
    assert isinstance(v, hb.IndexedSlicesValue)
    np.testing.assert_array_equal(v.indices, [3, 1, 3])
    np.testing.assert_array_equal(v.values, np.full((3, 3), 2.0))
    np.testing.assert_array_equal(v.dense_shape, [4, 3])


def test_gather_gradients_of_a_variable_aggregate_sparsely():
    """Two gathers of one variable give one IndexedSlices whose dense form is numpy's gradient."""
    w0 = _x((5, 2))
    with hb.Graph().as_default():
        w = hb.Variable(w0)
        a = hb.gather(w, [0, 4, 0])
        b = hb.gather(w, [[4, 2]])
        loss = hb.reduce_sum(a * a) + 3.0 * hb.reduce_sum(b)
        (g,) = hb.gradients(loss, [w])
        assert isinstance(g, hb.IndexedSlices)
        dense = hb.indexed_slices_to_dense(g)
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            gv, dv = s.run([g, dense])
    want = np.zeros_like(w0)
    for i in (0, 4, 0):
        want[i] += 2 * w0[i]
    for i in (4, 2):
        want[i] += 3.0
    np.testing.assert_allclose(gv.to_dense(), want)
    np.testing.assert_allclose(dv, want)


def test_indexed_slices_to_dense_sums_duplicates():
    """IndexedSlicesToDense adds the values of repeated indices."""
    with hb.Graph().as_default():
        like = hb.zeros([3, 2])
        vals = hb.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
        idx = hb.constant([2, 0, 2])
        d = hb.indexed_slices_to_dense(hb.IndexedSlices(vals, idx, like))
        with hb.Session() as s:
            np.testing.assert_array_equal(s.run(d), [[3, 4], [0, 0], [6, 8]])


# ---- errors --------------------------------------------------------------------------------------


def test_bad_axis_errors_name_axis_and_rank():
    """An axis out of range is rejected at graph construction, naming the axis and the rank."""
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [2, 3])
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"axis 2 .* rank 2"):
            hb.concat([x, x], 2)
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"axis -3 .* rank 2"):
            hb.gather(x, [0], axis=-3)
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"axis 3 .* rank 3"):
            hb.stack([x, x], 3)
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"axis 5 .* rank 2"):
            hb.split(x, 2, axis=5)
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"axis 2 .* rank 2"):
            hb.reverse(x, [2])
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"size is 3, not 1"):
            hb.squeeze(x, [1])
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"not a permutation"):
            hb.transpose(x, [0, 0])
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"expected -3 <= axis < 3"):
            hb.expand_dims(x, 3)


def test_concat_shape_mismatch_names_both_shapes():
    """Concatenating tensors that differ off the axis names both shapes and the dimension."""
    with hb.Graph().as_default():
        a = hb.placeholder(hb.float32, [2, 3], name="a")
        b = hb.placeholder(hb.float32, [4, 2], name="b")
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"dimension 1 differs.*\(2, 3\)"):
            hb.concat([a, b], 0)
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"same rank"):
            hb.concat([a, hb.placeholder(hb.float32, [2])], 0)
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"same dtype"):
            hb.concat([a, hb.placeholder(hb.int32, [2, 3])], 0)
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"same shape"):
            hb.stack([a, b])


def test_gather_out_of_range_index_is_named_at_run_time():
    """A gather index outside [0, n) raises naming its position, its value and the range."""
    with hb.Graph().as_default():
        p = hb.constant(np.arange(10.0).reshape(5, 2))
        idx = hb.placeholder(hb.int32, [2, 2])
        y = hb.gather(p, idx, name="lookup")
        with hb.Session() as s:
            with pytest.raises(
                hb.errors.InvalidArgumentError,
                match=r"lookup.*indices\[1,0\] = 7 is not in \[0, 5\)",
            ):
                s.run(y, {idx: [[0, 1], [7, 2]]})
            with pytest.raises(hb.errors.InvalidArgumentError, match=r"indices\[0,1\] = -1"):
                s.run(y, {idx: [[0, -1], [1, 2]]})
            np.testing.assert_array_equal(s.run(y, {idx: [[4, 0], [1, 1]]})[0], [[8, 9], [0, 1]])


def test_other_run_time_and_build_time_errors():
    """Bad splits, indices, segment ids, paddings and keys raise clear errors."""
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [None, 3])
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"does not split into 2"):
            hb.split(x, 2, axis=1)
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"sum to 4"):
            hb.split(x, [1, 3], axis=1)
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"index 3 is out of bounds"):
            _ = x[:, 3]
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"exceeds dimension 1"):
            hb.slice(x, [0, 2], [-1, 2])
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"REFLECT"):
            hb.pad(x, [[0, 0], [3, 0]], "REFLECT")
        with pytest.raises(TypeError, match=r"static"):
            _ = x[hb.constant(0) + 1]
        with pytest.raises(TypeError, match=r"static"):
            hb.tile(x, hb.shape(x))
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"start 5 cannot reach limit 1"):
            hb.range(5, 1)
        parts = hb.split(x, 3, axis=0)
        seg = hb.unsorted_segment_sum(x, hb.constant([0, 4]), 3)
        with hb.Session() as s:
            with pytest.raises(hb.errors.InvalidArgumentError, match=r"does not split into 3"):
                s.run(parts, {x: np.zeros((4, 3))})
            with pytest.raises(hb.errors.InvalidArgumentError, match=r"segment id 4 is not in"):
                s.run(seg, {x: np.zeros((2, 3))})


# ---- costs ---------------------------------------------------------------------------------------


def _cost(t, in_shapes):
    return get_op_def(t.op.type).cost_fn(t.op, in_shapes, [tuple(t.shape.as_list())])


def test_costs_count_moved_bytes_and_adds():
    """Gathers read only the rows they take; scatters count one add per value element."""
    with hb.Graph().as_default():
        p = hb.placeholder(hb.float32, [1000, 8])
        idx = hb.placeholder(hb.int32, [10])
        c = _cost(hb.gather(p, idx), [(1000, 8), (10,)])
        assert (c.flops, c.bytes_read, c.bytes_written) == (0.0, 10 * 8 * 4 + 10 * 4, 10 * 8 * 4)
        c = _cost(
            hb.unsorted_segment_sum(p, hb.placeholder(hb.int32, [1000]), 5),
            [(1000, 8), (1000,), ()],
        )
        assert c.flops == 8000.0 and c.bytes_written == 5 * 8 * 4
        c = _cost(hb.expand_dims(p, 0), [(1000, 8)])
        assert c.bytes_read == c.bytes_written == 0
        c = _cost(hb.zeros([4, 5]), [()])
        assert (c.bytes_read, c.bytes_written) == (0.0, 80.0)


def test_gather_from_a_strided_array_is_a_copy_of_the_rows():
    """A transposed (strided) array gathered along each axis with a scalar and a vector index:
    numpy's values, and the result does not alias its input."""
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = x.transpose(1, 0, 2)  # (3, 2, 4)
    for axis in (0, 1, 2):
        for idx in (np.int32(1), np.array([1, 0, 1], np.int32)):
            check_forward(
                lambda a, axis=axis, idx=idx: hb.gather(hb.transpose(a, [1, 0, 2]), idx, axis=axis),
                [x],
                lambda a, axis=axis, idx=idx: np.take(t, idx, axis=axis),
            )
    with hb.Graph().as_default():
        v = hb.Variable(x)
        row = hb.gather(hb.transpose(v, [1, 0, 2]), 1)
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            got = s.run(row)
            got[...] = -1  # a caller's value of its own: nothing else changes
            np.testing.assert_array_equal(s.run(row), t[1])
