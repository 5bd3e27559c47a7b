"""The SparseTensor ops of sparse_extra.py against numpy and hand-worked values, and (when
TensorFlow is installed) against TensorFlow's own ops on the same inputs, gradients included."""

import numpy as np
import pytest

import hetbed.compat.v1 as tf

IDX = np.array([[0, 1], [0, 3], [2, 0], [2, 2], [4, 1]], np.int64)
VALS = np.array([1.5, -2.0, 3.0, 0.5, -1.0], np.float32)
SHAPE = np.array([6, 4], np.int64)
IDX2 = np.array([[0, 1], [1, 1], [2, 2], [5, 3]], np.int64)
VALS2 = np.array([0.5, 4.0, 1.0, -3.0], np.float32)


def _build(lib):
    """The same ops on the same inputs in ``lib`` (hetbed's or TF's compat.v1)."""
    v = lib.Variable(VALS)
    d = lib.Variable(7.0)
    sp = lib.SparseTensor(IDX, v, SHAPE)
    sp2 = lib.SparseTensor(IDX2, VALS2, SHAPE)
    filled, empty = lib.sparse_fill_empty_rows(sp, d)
    sm = lib.sparse_softmax(sp)
    mx, mn = lib.sparse_maximum(sp, sp2), lib.sparse_minimum(sp, sp2)
    sl = lib.sparse_slice(sp, [1, 1], [4, 2])
    parts = lib.sparse_split(sp_input=sp, num_split=4, axis=0)
    ids = lib.SparseTensor(IDX, np.array([3, 0, 2, 2, 1], np.int64), SHAPE)
    merged = lib.sparse_merge(ids, sp, 5)
    ed = lib.sparse.expand_dims(sp, 1)
    out = [
        filled.indices,
        filled.values,
        empty,
        lib.sparse_reduce_max(sp),
        lib.sparse_reduce_max(sp, axis=1),
        lib.sparse_reduce_max(sp, axis=0, keepdims=True),
        sm.values,
        mx.indices,
        mx.values,
        mn.indices,
        mn.values,
        sl.indices,
        sl.values,
        sl.dense_shape,
        ed.indices,
        ed.dense_shape,
        lib.sparse_to_indicator(ids, 5),
        merged.indices,
        merged.values,
        merged.dense_shape,
    ]
    for p in parts:
        out += [p.indices, p.values, p.dense_shape]
    out += lib.gradients(lib.reduce_sum(sm.values * np.arange(5, dtype=np.float32)), v)
    out += lib.gradients(lib.reduce_sum(sl.values * np.array([2.0, 3.0], np.float32)), v)
    out += lib.gradients(lib.reduce_sum(filled.values * lib.range(1.0, 9.0)), [v, d])
    return out


def _run(lib):
    with lib.Graph().as_default():
        fetches = _build(lib)
        with lib.Session() as s:
            s.run(lib.global_variables_initializer())
            return s.run(fetches)


def test_values_by_hand_and_numpy():
    r = _run(tf)
    # rows 1, 3 and 5 were empty: one entry each at column 0, value 7
    assert r[0].tolist() == [[0, 1], [0, 3], [1, 0], [2, 0], [2, 2], [3, 0], [4, 1], [5, 0]]
    assert r[1].tolist() == [1.5, -2.0, 7.0, 3.0, 0.5, 7.0, -1.0, 7.0]
    assert r[2].tolist() == [False, True, False, True, False, True]
    assert r[3] == 3.0 and r[4].tolist() == [1.5, 0, 3.0, 0, -1.0, 0]  # an empty row's max is 0
    assert r[5].tolist() == [[3.0, 1.5, 0.5, -2.0]]
    soft = lambda x: np.exp(x - x.max()) / np.exp(x - x.max()).sum()  # noqa: E731
    np.testing.assert_allclose(
        r[6], np.concatenate([soft(VALS[:2]), soft(VALS[2:4]), [1.0]]), rtol=1e-6
    )
    assert r[7].tolist() == [[0, 1], [0, 3], [1, 1], [2, 0], [2, 2], [4, 1], [5, 3]]
    assert r[8].tolist() == [1.5, 0.0, 4.0, 3.0, 1.0, 0.0, 0.0]  # absent entries count as 0
    assert r[10].tolist() == [0.5, -2.0, 0.0, 0.0, 0.5, -1.0, -3.0]
    assert (
        r[11].tolist() == [[1, 1], [3, 0]]
        and r[12].tolist() == [0.5, -1.0]
        and r[13].tolist() == [4, 2]
    )
    assert r[14].tolist() == [[i, 0, j] for i, j in IDX.tolist()] and r[15].tolist() == [6, 1, 4]
    want_ind = np.zeros((6, 5), bool)
    want_ind[IDX[:, 0], [3, 0, 2, 2, 1]] = True
    np.testing.assert_array_equal(r[16], want_ind)
    assert r[17].tolist() == [[0, 0], [0, 3], [2, 2], [2, 2], [4, 1]] and r[19].tolist() == [6, 5]
    assert [p.tolist() for p in r[22::3][:4]] == [[2, 4], [2, 4], [1, 4], [1, 4]]  # 6 rows in 4
    g_soft, g_slice, g_fill, g_default = r[-4:]
    y = r[6]
    w = np.arange(5, dtype=np.float32)
    want = np.zeros(5, np.float32)
    for grp in ([0, 1], [2, 3], [4]):
        want[grp] = (w[grp] - (w[grp] * y[grp]).sum()) * y[grp]
    np.testing.assert_allclose(g_soft, want, rtol=1e-5, atol=1e-6)
    assert g_slice.tolist() == [0, 0, 0, 2.0, 3.0]  # (2, 2) and (4, 1) are in the slice
    assert g_fill.tolist() == [1, 2, 4, 5, 7] and g_default == 3 + 6 + 8


def test_errors_name_the_problem():
    with tf.Graph().as_default(), tf.Session() as s:
        sp = tf.SparseTensor(IDX, VALS, SHAPE)
        with pytest.raises(tf.errors.InvalidArgumentError, match="start .* must be >= 0"):
            s.run(tf.sparse_slice(sp, [-1, 0], [2, 2]).values)
        with pytest.raises(tf.errors.InvalidArgumentError, match="shapes do not match"):
            s.run(tf.sparse_maximum(sp, tf.SparseTensor(IDX, VALS, [6, 5])).values)
        with pytest.raises(tf.errors.InvalidArgumentError, match="out of range"):
            tf.sparse_reduce_max(sp, axis=2)
        with pytest.raises(tf.errors.InvalidArgumentError, match="num_split"):
            tf.sparse_split(sp_input=sp, num_split=0, axis=0)


def test_same_as_tensorflow():
    tf_real = pytest.importorskip("tensorflow")
    want = _run(tf_real.compat.v1)
    got = _run(tf)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(
            np.asarray(g, float), np.asarray(w, float), rtol=1e-5, atol=1e-6, err_msg=str(i)
        )
