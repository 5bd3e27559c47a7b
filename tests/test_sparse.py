"""SparseTensor ops (runtime/ops/sparse.py): values against numpy's dense arithmetic, gradients
against closed forms, orders and static shapes as TF1 gives them, bad input named."""

from __future__ import annotations

import numpy as np
import pytest

import hetbed.compat.v1 as tf

IDX = np.array([[2, 1], [0, 3], [1, 0], [0, 1], [2, 3], [0, 3]], np.int64)  # (0, 3) twice
VAL = np.array([1.5, -2.0, 3.0, 4.0, 0.5, 0.25], np.float32)


def _dense(idx, val, shape):
    out = np.zeros(shape, val.dtype)
    np.add.at(out, tuple(np.asarray(idx).T), val)
    return out


def _run(fetches, feed=None):
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        return s.run(fetches, feed)


def _row_major(idx):
    lin = [tuple(r) for r in np.asarray(idx).tolist()]
    return lin == sorted(lin)


@pytest.mark.parametrize("adj_a", [False, True])
@pytest.mark.parametrize("adj_b", [False, True])
def test_a_sparse_dense_product_and_its_gradients(adj_a, adj_b):
    """Repeated indices add up; d values[e] = sum_j G[row_e, j] B[col_e, j] and dB = A^T G, in
    the adjoints' terms."""
    rng = np.random.default_rng(1)
    a = _dense(IDX, VAL, (3, 4))
    op_a = a.T if adj_a else a
    b = rng.standard_normal((op_a.shape[1], 2)).astype(np.float32)
    stored_b = b.T.copy() if adj_b else b
    with tf.Graph().as_default():
        vals = tf.Variable(VAL)
        bv = tf.Variable(stored_b)
        sp = tf.SparseTensor(IDX, vals, [3, 4])
        y = tf.sparse_tensor_dense_matmul(sp, bv, adjoint_a=adj_a, adjoint_b=adj_b)
        assert y.shape.as_list() == [op_a.shape[0], 2]
        w = rng.standard_normal((op_a.shape[0], 2)).astype(np.float32)
        gv, gb = tf.gradients(tf.reduce_sum(y * w), [vals, bv])
        got, got_gv, got_gb = _run([y, gv, gb])
    np.testing.assert_allclose(got, op_a @ b, rtol=1e-5, atol=1e-6)
    rows, cols = (IDX[:, 1], IDX[:, 0]) if adj_a else (IDX[:, 0], IDX[:, 1])
    np.testing.assert_allclose(got_gv, (w[rows] * b[cols]).sum(1), rtol=1e-5, atol=1e-6)
    want_gb = op_a.T @ w
    np.testing.assert_allclose(got_gb, want_gb.T if adj_b else want_gb, rtol=1e-5, atol=1e-6)


def test_a_gcn_layer_trains_as_its_dense_twin():
    """A graph-convolution step (tkipf/gcn's layer: dropout by sparse_retain, A X W with a
    sparse A) gives the dense product's loss and gradients, and its loss falls."""
    rng = np.random.default_rng(2)
    n, f, h = 6, 5, 3
    adj = (rng.random((n, n)) < 0.4).astype(np.float32) + np.eye(n, dtype=np.float32)
    idx = np.argwhere(adj).astype(np.int64)
    x = rng.standard_normal((n, f)).astype(np.float32)
    y = rng.standard_normal((n, h)).astype(np.float32)
    w0 = rng.standard_normal((f, h)).astype(np.float32)
    with tf.Graph().as_default():
        a = tf.sparse_placeholder(tf.float32)
        keep = tf.sparse_retain(a, tf.cast(tf.ones([tf.size(a.values)]), tf.bool)) * 1.0
        w = tf.Variable(w0)
        out = tf.sparse_tensor_dense_matmul(keep, tf.matmul(tf.constant(x), w))
        loss = tf.reduce_mean((out - y) ** 2)
        (g,) = tf.gradients(loss, [w])
        train = tf.train.GradientDescentOptimizer(0.05).minimize(loss)
        feed = {a: tf.SparseTensorValue(idx, adj[tuple(idx.T)], np.array([n, n], np.int64))}
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            l0, g0 = s.run([loss, g], feed)
            for _ in range(20):
                s.run(train, feed)
            l1 = s.run(loss, feed)
    err = adj @ x @ w0 - y
    np.testing.assert_allclose(l0, (err**2).mean(), rtol=1e-5)
    np.testing.assert_allclose(g0, (adj @ x).T @ (2 * err / err.size), rtol=1e-4, atol=1e-6)
    assert l1 < 0.8 * l0


def test_the_threshold_drops_only_sums_of_an_entry_of_each():
    """As TF's kernel (TensorFlow 2.21 gives the same): (0, 0) is in a alone and kept below the
    threshold; (1, 1) sums 0.2 - 0.1 = 0.1 < 0.5 and goes; (2, 2) sums 0.5 + 0.5 and stays."""
    with tf.Graph().as_default():
        a = tf.SparseTensor([[0, 0], [1, 1], [2, 2]], [0.3, 0.2, 0.5], [3, 3])
        b = tf.SparseTensor([[1, 1], [2, 2]], [-0.1, 0.5], [3, 3])
        (i, v), (j, w) = _run(
            [
                [tf.sparse_add(a, b, thresh=0.5).indices, tf.sparse_add(a, b, 0.5).values],
                [tf.sparse.add(a, b, threshold=0.0).indices, tf.sparse.add(a, b).values],
            ]
        )
    assert i.tolist() == [[0, 0], [2, 2]] and v.tolist() == pytest.approx([0.3, 1.0])
    assert j.tolist() == [[0, 0], [1, 1], [2, 2]] and w.tolist() == pytest.approx([0.3, 0.1, 1.0])


def test_the_sum_of_two_sparse_tensors_merges_as_tf_and_routes_its_gradient():
    # TF's SparseAdd merges the two lists in one pass as if each were sorted, so entries out
    # of order keep their order and (0, 3), repeated in a, stays repeated; the values and
    # gradients below are TensorFlow 2.15's (round fifteen; the sum used to be sorted)
    with tf.Graph().as_default():
        va = tf.Variable(VAL)
        vb = tf.Variable([1.0, 1.0, -0.5, 2.0])
        a = tf.SparseTensor(IDX, va, [3, 4])  # unsorted, (0, 3) repeated
        b = tf.SparseTensor([[0, 1], [1, 1], [2, 3], [2, 1]], vb, [3, 4])
        s = tf.sparse_add(a, b)
        st = tf.sparse_add(a, b, thresh=0.6)
        weights = tf.range(1.0, tf.cast(tf.size(s.values), tf.float32) + 1.0)
        ga, gb = tf.gradients(tf.reduce_sum(s.values * weights), [va, vb])
        (si, sv, ss), (ti, tv), ga, gb = _run([s, [st.indices, st.values], ga, gb])
    want = _dense(IDX, VAL, (3, 4)) + _dense(
        np.array([[0, 1], [1, 1], [2, 3], [2, 1]]), np.array([1, 1, -0.5, 2], np.float32), (3, 4)
    )
    np.testing.assert_allclose(_dense(si, sv, ss), want)
    assert list(ss) == [3, 4]
    assert si.tolist() == [[0, 1], [1, 1], [2, 1], [0, 3], [1, 0], [0, 1], [2, 3], [0, 3], [2, 1]]
    np.testing.assert_allclose(sv, [1.0, 1.0, 1.5, -2.0, 3.0, 4.0, 0.0, 0.25, 2.0])
    # the threshold drops sums (of an entry of each) under 0.6: (2, 3) sums to 0.5 - 0.5 = 0
    assert ti.tolist() == [[0, 1], [1, 1], [2, 1], [0, 3], [1, 0], [0, 1], [0, 3], [2, 1]]
    np.testing.assert_allclose(tv, [1.0, 1.0, 1.5, -2.0, 3.0, 4.0, 0.25, 2.0])
    # each input entry receives the weight of the sum's entry it made
    np.testing.assert_allclose(ga, [3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
    np.testing.assert_allclose(gb, [1.0, 2.0, 7.0, 9.0])


def test_a_sparse_plus_a_dense_tensor_is_dense():
    d = np.arange(12, dtype=np.float32).reshape(3, 4)
    with tf.Graph().as_default():
        got = _run(tf.sparse_add(tf.constant(d), tf.SparseTensor(IDX, VAL, [3, 4])))
    np.testing.assert_allclose(got, d + _dense(IDX, VAL, (3, 4)))


def test_reductions_and_their_static_shapes():
    a = _dense(IDX, VAL, (3, 4))
    with tf.Graph().as_default():
        v = tf.Variable(VAL)
        sp = tf.SparseTensor(IDX, v, [3, 4])
        r0, r1k, rneg = (
            tf.sparse_reduce_sum(sp, 0),
            tf.sparse_reduce_sum(sp, 1, keepdims=True),
            tf.sparse_reduce_sum(sp, -1),
        )
        assert str(sp.shape) == "(3, 4)" and str(r0.shape) == "(4,)" and str(r1k.shape) == "(3, 1)"
        (g,) = tf.gradients(tf.reduce_sum(tf.sparse_reduce_sum(sp, 1) ** 2), v)
        got = _run([tf.sparse_reduce_sum(sp), r0, r1k, rneg, g])
    np.testing.assert_allclose(got[0], a.sum(), rtol=1e-6)
    np.testing.assert_allclose(got[1], a.sum(0))
    np.testing.assert_allclose(got[2], a.sum(1, keepdims=True))
    np.testing.assert_allclose(got[3], a.sum(1))
    np.testing.assert_allclose(got[4], 2 * a.sum(1)[IDX[:, 0]])


def test_reorder_transpose_reshape_and_concat_keep_the_dense_tensor():
    idx, val = IDX[:5], VAL[:5]  # no repeats: orders are then unique
    a = _dense(idx, val, (3, 4))
    b_idx, b_val = np.array([[0, 1], [1, 1], [2, 3]]), np.array([1.0, 1.0, -0.5], np.float32)
    b = _dense(b_idx, b_val, (3, 4))
    with tf.Graph().as_default():
        sp = tf.SparseTensor(idx, val, [3, 4])
        ro = tf.sparse_reorder(sp)
        tr = tf.sparse_transpose(sp)
        rs = tf.sparse_reshape(sp, [2, -1])
        cat = tf.sparse_concat(1, [sp, tf.SparseTensor(b_idx, b_val, [3, 4])])
        wide = tf.sparse_concat(
            0,
            [tf.SparseTensor(b_idx, b_val, [3, 4]), tf.SparseTensor([[0, 5]], [7.0], [1, 6])],
            expand_nonconcat_dim=True,
        )
        assert str(tr.shape) == "(4, 3)" and str(rs.shape) == "(2, 6)"
        got = _run([ro, tr, rs, cat, wide])
    for (i, v, s), want, ordered in zip(
        got,
        [a, a.T, a.reshape(2, 6), np.concatenate([a, b], 1)],
        [True, True, False, True],  # a reshape keeps its input's order, as TF's
    ):
        assert _row_major(i) or not ordered
        np.testing.assert_allclose(_dense(i, v, tuple(s)), want)
    i, v, s = got[4]
    want = np.zeros((4, 6), np.float32)
    want[:3, :4] = b
    want[3, 5] = 7.0
    assert list(s) == [4, 6] and _row_major(i)
    np.testing.assert_allclose(_dense(i, v, (4, 6)), want)


def test_retain_and_products_with_a_dense_operand():
    a = _dense(IDX, VAL, (3, 4))
    keep = np.array([True, False, True, True, False, True])
    row = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    col = np.array([[1.0], [2.0], [3.0]], np.float32)
    with tf.Graph().as_default():
        sp = tf.SparseTensor(IDX, VAL, [3, 4])
        rt = tf.sparse_retain(sp, keep)
        got = _run(
            [
                rt,
                (sp * 2.0).values,
                (sp * row).values,
                (sp * col).values,
                (sp / row).values,
                (sp * tf.constant(a + 1.0)).values,
            ]
        )
        for expr in (lambda: 2 * sp, lambda: sp + sp, lambda: sp * sp):
            with pytest.raises(TypeError):
                expr()
    np.testing.assert_array_equal(got[0].indices, IDX[keep])
    np.testing.assert_allclose(got[0].values, VAL[keep])
    np.testing.assert_allclose(got[1], VAL * 2)
    np.testing.assert_allclose(got[2], VAL * row[IDX[:, 1]])
    np.testing.assert_allclose(got[3], VAL * col[IDX[:, 0], 0])
    np.testing.assert_allclose(got[4], VAL / row[IDX[:, 1]])
    np.testing.assert_allclose(got[5], VAL * (a + 1.0)[tuple(IDX.T)])


def test_sparse_to_dense_in_tf1s_three_forms_with_its_gradient():
    with tf.Graph().as_default():
        v = tf.Variable([1.0, 2.0, 3.0])
        d = tf.sparse_to_dense([[0], [2], [4]], [6], v)
        (g,) = tf.gradients(tf.reduce_sum(d * tf.range(6.0)), v)
        got = _run(
            [
                tf.sparse_to_dense(3, [5], 2.0),
                tf.sparse_to_dense([0, 2, 4], [6], [1.0, 2.0, 3.0], default_value=-1.0),
                tf.sparse_to_dense([[0, 1], [1, 2]], [2, 3], 5),
                g,
            ]
        )
        with pytest.raises(tf.errors.InvalidArgumentError, match="is out of order"):
            _run(tf.sparse_to_dense([2, 0], [4], 1.0))
        with pytest.raises(tf.errors.InvalidArgumentError, match="is repeated"):
            _run(tf.sparse_to_dense([1, 1], [4], 1.0))
        np.testing.assert_allclose(
            _run(tf.sparse_to_dense([2, 0], [4], 1.0, validate_indices=False)), [1, 0, 1, 0]
        )
    np.testing.assert_allclose(got[0], [0, 0, 0, 2, 0])
    np.testing.assert_allclose(got[1], [1, -1, 2, -1, 3, -1])
    np.testing.assert_array_equal(got[2], [[0, 5, 0], [0, 0, 5]])
    np.testing.assert_allclose(got[3], [0.0, 2.0, 4.0])


def test_from_dense_and_segment_sums_of_gathered_rows():
    rng = np.random.default_rng(3)
    data = rng.standard_normal((5, 3)).astype(np.float32)
    ind, seg = np.array([0, 2, 4, 1]), np.array([0, 0, 2, 2])
    with tf.Graph().as_default():
        fd = tf.sparse.from_dense(tf.constant([[0, 1, 0], [2, 0, 3]]))
        got = _run(
            [
                fd,
                tf.sparse_segment_sum(data, ind, seg),
                tf.sparse_segment_mean(data, ind, seg),
                tf.sparse_segment_sqrt_n(data, ind, seg),
                tf.sparse_segment_sum(data, ind, seg, num_segments=4),
            ]
        )
    np.testing.assert_array_equal(got[0].indices, [[0, 1], [1, 0], [1, 2]])
    np.testing.assert_array_equal(got[0].values, [1, 2, 3])
    total = np.zeros((3, 3), np.float32)
    np.add.at(total, seg, data[ind])
    np.testing.assert_allclose(got[1], total, rtol=1e-6)
    np.testing.assert_allclose(got[2], total / np.array([[2], [1], [2]]), rtol=1e-6)
    np.testing.assert_allclose(got[3], total / np.sqrt([[2], [1], [2]]), rtol=1e-6)
    np.testing.assert_allclose(got[4][:3], total, rtol=1e-6)
    assert not got[4][3].any()


@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrtn"])
@pytest.mark.parametrize("weighted", [False, True])
def test_embedding_lookup_sparse(combiner, weighted):
    """One embedding per row of id lists; a row without ids gives zeros (the result has
    max(row) + 1 rows, as in TF1)."""
    rng = np.random.default_rng(4)
    table = rng.standard_normal((6, 3)).astype(np.float32)
    idx = np.array([[0, 0], [0, 1], [2, 0], [2, 1], [2, 2]], np.int64)
    ids = np.array([3, 1, 3, 5, 0], np.int64)
    w = np.array([1.0, 2.0, 0.5, 1.0, 3.0], np.float32) if weighted else np.ones(5, np.float32)
    with tf.Graph().as_default():
        params = tf.Variable(table)
        sp_w = tf.SparseTensor(idx, w, [3, 3]) if weighted else None
        e = tf.nn.embedding_lookup_sparse(
            params, tf.SparseTensor(idx, ids, [3, 3]), sp_w, combiner=combiner
        )
        (g,) = tf.gradients(tf.reduce_sum(e), params)
        got, got_g = _run([e, tf.convert_to_tensor(g)])
    want = np.zeros((3, 3), np.float32)
    grad = np.zeros_like(table)
    for r in (0, 2):
        at = idx[:, 0] == r
        denom = {"sum": 1.0, "mean": w[at].sum(), "sqrtn": np.sqrt((w[at] ** 2).sum())}[combiner]
        want[r] = (table[ids[at]] * w[at, None]).sum(0) / denom
        np.add.at(grad, ids[at], np.repeat((w[at] / denom)[:, None], 3, 1))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_g, grad, rtol=1e-5, atol=1e-6)


def test_sparse_placeholders_with_a_shape():
    with tf.Graph().as_default():
        known = tf.sparse_placeholder(tf.float32, shape=[3, 4])
        from_tensor = tf.sparse_placeholder(tf.float32, shape=tf.constant([3, 4], tf.int64))
        unknown = tf.sparse_placeholder(tf.float32)
        assert str(known.shape) == "(3, 4)" and str(from_tensor.shape) == "(3, 4)"
        assert str(unknown.shape) == "<unknown>"
        two = (IDX[[3, 1]], VAL[[3, 1]])
        with tf.Session() as s:
            # the shape is the dense shape's default, which a feed may still replace
            a = s.run(
                tf.sparse_tensor_to_dense(known), {known.indices: two[0], known.values: two[1]}
            )
            b = s.run(
                tf.sparse_tensor_to_dense(from_tensor), {from_tensor: two + (np.array([2, 5]),)}
            )
    np.testing.assert_allclose(a, _dense(*two, (3, 4)))
    np.testing.assert_allclose(b, _dense(*two, (2, 5)))


def test_bad_sparse_input_is_named():
    with tf.Graph().as_default():
        sp = tf.SparseTensor([[0, 7]], [1.0], [3, 4])
        with pytest.raises(tf.errors.InvalidArgumentError, match="inner dimensions differ: 4"):
            tf.sparse_tensor_dense_matmul(sp, tf.ones([3, 2]))
        with pytest.raises(tf.errors.InvalidArgumentError, match="'mm'.*outside dense_shape"):
            _run(tf.sparse_tensor_dense_matmul(sp, tf.ones([4, 2]), name="mm"))
        with pytest.raises(tf.errors.InvalidArgumentError, match="dense shapes differ"):
            _run(
                tf.sparse_add(
                    tf.SparseTensor([[0, 0]], [1.0], [3, 4]),
                    tf.SparseTensor([[0, 0]], [1.0], [4, 3]),
                ).values
            )
        with pytest.raises(TypeError, match="to_retain must be bool"):
            tf.sparse_retain(sp, [1])
        with pytest.raises(TypeError, match="must be a SparseTensor"):
            tf.sparse_reduce_sum(tf.ones([2]))


def test_the_same_results_as_tensorflow():
    """The ops above, built alike in TensorFlow's compat.v1, give the same values."""
    tfr = pytest.importorskip("tensorflow.compat.v1")
    tfr.disable_eager_execution()  # (disable_v2_behavior would change later tests' TF)
    rng = np.random.default_rng(5)
    b = rng.standard_normal((4, 2)).astype(np.float32)
    d = rng.standard_normal((3, 4)).astype(np.float32)
    idx, val = IDX[:5], VAL[:5]

    def build(m):
        sp = m.SparseTensor(idx, m.constant(val), [3, 4])
        ro = m.sparse_reorder(sp)
        other = m.SparseTensor([[0, 1], [1, 1], [2, 3]], m.constant([1.0, 1.0, -0.5]), [3, 4])
        s = m.sparse_add(ro, other)
        t = m.sparse_transpose(sp)
        r = m.sparse_reshape(ro, [2, -1])
        c = m.sparse_concat(1, [ro, other])
        return [
            m.sparse_tensor_dense_matmul(sp, b),
            ro.indices,
            ro.values,
            s.indices,
            s.values,
            m.sparse_reduce_sum(sp, 0),
            t.indices,
            t.values,
            r.indices,
            c.indices,
            c.values,
            (sp * d).values,
            m.sparse_add(m.constant(d), sp),
            m.nn.embedding_lookup_sparse(
                m.constant(d.T.copy()),
                m.SparseTensor([[0, 0], [0, 1], [2, 0]], m.constant([3, 1, 3], m.int64), [3, 2]),
                None,
            ),
        ]

    with tf.Graph().as_default():
        ours = _run(build(tf))
    with tfr.Graph().as_default(), tfr.Session() as s:
        theirs = s.run(build(tfr))
    for k, (a, t) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(a, t, rtol=1e-6, atol=1e-6, err_msg=f"fetch {k}")
