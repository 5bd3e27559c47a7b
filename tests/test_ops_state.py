"""State ops (runtime/ops/state.py: variables, assign*, scatter_*) and the basic array ops
(runtime/ops/array.py: constant, placeholder, identity, reshape, shape, cast): values against
numpy, copy and aliasing rules, error messages and gradients."""

import numpy as np
import pytest
from opcheck import check_forward, check_gradient

import hetbed as hb
from hetbed.runtime.registry import get_op_def

RNG = np.random.default_rng(0)


def _session_with(*values, dtype=None):
    """A graph with one variable per value, a session that initialized them, and the variables."""
    g = hb.Graph()
    with g.as_default():
        ws = [hb.Variable(np.asarray(v), dtype=dtype) for v in values]
    s = hb.Session(graph=g)
    s.run([w.initializer for w in ws])
    return g, s, ws


# ---- variables: assign and friends ------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_assign_add_sub_values(dtype):
    """assign / assign_add / assign_sub set, add and subtract like numpy, in sequence."""
    a0 = RNG.integers(-5, 5, (2, 3)).astype(dtype)
    d = RNG.integers(-5, 5, (2, 3)).astype(dtype)
    g, s, (w,) = _session_with(a0)
    with g.as_default(), s:
        add, sub, put = hb.assign_add(w, d), hb.assign_sub(w, 2 * d), hb.assign(w, d * 3)
        np.testing.assert_array_equal(s.run(add), a0 + d)
        np.testing.assert_array_equal(s.run(sub), a0 - d)
        np.testing.assert_array_equal(s.run(w), a0 - d)
        np.testing.assert_array_equal(s.run(put), d * 3)
        np.testing.assert_array_equal(s.run(w), d * 3)
        assert s.run(w).dtype == dtype


def test_assign_python_values_take_variable_dtype():
    """Python values assigned to a variable take its dtype; a float into an int variable errors."""
    g, s, (w, k) = _session_with(np.zeros(3), np.zeros(3, np.int32))
    with g.as_default(), s:
        s.run(
            [
                hb.assign(w, [1, 2, 3]),
                w.assign_add([0.5, 0.5, 0.5]),
                hb.assign(k, [4, 5, 6]),
                k.assign_sub([1, 1, 1]),
            ]
        )
        np.testing.assert_array_equal(s.run(w), [1.5, 2.5, 3.5])
        np.testing.assert_array_equal(s.run(k), [3, 4, 5])
        assert s.run(w).dtype == np.float64
        with pytest.raises(TypeError, match=r"expected int32, got float value \[2.5"):
            hb.assign_add(k, [2.5, 1, 1])
        with pytest.raises(
            hb.errors.InvalidArgumentError, match=r"value shape \(\) does not match"
        ):
            hb.assign_add(w, 1.0)  # no broadcasting into a variable


def test_scalar_variable_updates_in_place():
    """A scalar variable assigned from another op's output still updates with assign_add."""
    g, s, (w,) = _session_with(np.float32(0.0))
    with g.as_default(), s:
        s.run(hb.assign(w, w + 1.0))
        s.run(hb.assign_add(w, 1.0))
        s.run(hb.assign_sub(w, 0.5))
        assert s.run(w) == np.float32(1.5)
        assert isinstance(s.run(w), np.ndarray | np.float32)


def test_assign_errors():
    """assign rejects a value of another shape or dtype, naming the variable and both."""
    g, s, (w,) = _session_with(np.zeros((2, 3), np.float32))
    with g.as_default(), s:
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"\(3, 2\).*Variable.*\(2, 3\)"):
            hb.assign(w, np.zeros((3, 2), np.float32))
        with pytest.raises(hb.errors.InvalidArgumentError, match="float32"):
            hb.assign(w, hb.zeros([2, 3], hb.float64))
        with pytest.raises(TypeError, match="expected a variable"):
            hb.assign(hb.zeros([2, 3]), hb.zeros([2, 3]))


def test_assign_without_shape_validation_changes_shape():
    """assign(validate_shape=False) rebinds the variable to a value of another shape."""
    g = hb.Graph()
    with g.as_default():
        w = hb.Variable(np.zeros(2), validate_shape=False)
        assert w.shape.ndims is None
        bigger = hb.assign(w, np.arange(6.0).reshape(2, 3), validate_shape=False)
        v = hb.Variable(np.zeros(2))
        other = hb.assign(v, np.ones(5), validate_shape=False)
        assert other.shape.as_list() == [5]
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            np.testing.assert_array_equal(s.run(w), np.zeros(2))
            s.run(bigger)
            np.testing.assert_array_equal(s.run(w), np.arange(6.0).reshape(2, 3))
            np.testing.assert_array_equal(
                s.run(hb.assign_add(w, hb.ones([2, 3], hb.float64))),
                np.arange(1.0, 7.0).reshape(2, 3),
            )
            s.run(other)
            assert s.run(v).shape == (5,)


def test_uninitialized_variable():
    """Reading a variable before its initializer ran fails, naming it and the way out;
    is_variable_initialized is False before and True after; report_uninitialized_variables
    names those still to initialize, as TF1's (a string tensor; none for an empty list)."""
    g = hb.Graph()
    with g.as_default():
        w = hb.Variable(np.ones(3), name="weights")
        u = hb.Variable(np.ones(2), name="other")
        flag = hb.is_variable_initialized(w)
        report = hb.report_uninitialized_variables()
        with hb.Session() as s:
            assert s.run(flag) == np.False_
            assert s.run(flag).dtype == np.bool_
            with pytest.raises(
                hb.errors.FailedPreconditionError, match="uninitialized.*weights.*initializer"
            ):
                s.run(w)
            with pytest.raises(hb.errors.FailedPreconditionError, match="weights"):
                s.run(hb.assign_add(w, [1.0, 1.0, 1.0]))
            s.run(w.initializer)
            assert bool(s.run(flag))
            assert s.run(report).tolist() == [b"other"]  # (TF1's: the names still to do)
            s.run(u.initializer)
            assert s.run(report).tolist() == []
            assert s.run(hb.report_uninitialized_variables([])).shape == (0,)
            np.testing.assert_array_equal(s.run(w), np.ones(3))


# ---- copies and aliasing --------------------------------------------------------------------------


def test_fetched_values_are_copies():
    """A fetched variable value (also through view ops) is not changed by a later in-place update."""
    g, s, (w,) = _session_with(np.arange(6.0).reshape(2, 3))
    with g.as_default(), s:
        views = [
            w,
            w.value(),
            w.read_value(),
            hb.identity(w),
            hb.reshape(w, [-1]),
            hb.stop_gradient(w),
            hb.placeholder_with_default(w, [2, 3]),
        ]
        from hetbed.runtime.ops.math import broadcast_like

        views.append(broadcast_like(w, hb.zeros([2, 2, 3], hb.float64)))
        inc = hb.assign_add(w, hb.ones([2, 3], hb.float64))
        got = s.run(views)
        incd = s.run(inc)
        s.run([inc, hb.scatter_add(w, [0], [[5.0, 5.0, 5.0]])])
        want = np.arange(6.0).reshape(2, 3)
        for v in got:
            np.testing.assert_array_equal(v.reshape(-1)[:6], want.reshape(-1))
        np.testing.assert_array_equal(incd, want + 1)


def test_assigned_array_is_not_aliased():
    """A fed array assigned to a variable is copied: later in-place updates leave it intact."""
    g = hb.Graph()
    with g.as_default():
        w = hb.Variable(np.zeros(3))
        p = hb.placeholder(hb.float64, [3])
        put = hb.assign(w, p)
        inc = hb.assign_add(w, [1.0, 1.0, 1.0])
        scat = hb.scatter_add(w, [1], [10.0])
        with hb.Session() as s:
            arr = np.arange(3.0)
            s.run(put, {p: arr})
            s.run([inc, scat])
            np.testing.assert_array_equal(arr, [0.0, 1.0, 2.0])
            np.testing.assert_array_equal(s.run(w), [1.0, 12.0, 3.0])
            w.load(arr, s)
            s.run(inc)
            np.testing.assert_array_equal(arr, [0.0, 1.0, 2.0])


def test_constant_is_not_changed_by_updates():
    """A variable initialized from a constant owns its buffer: updates leave the constant alone."""
    g = hb.Graph()
    with g.as_default():
        c = hb.constant([1.0, 2.0])
        w = hb.Variable(c)
        inc = hb.assign_add(w, [1.0, 1.0])
        with hb.Session() as s:
            s.run(w.initializer)
            s.run(inc)
            np.testing.assert_array_equal(s.run(c), [1.0, 2.0])
            np.testing.assert_array_equal(s.run(w), [2.0, 3.0])


# ---- scatter ops ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_scatter_ops_with_duplicates(dtype):
    """scatter_add/sub accumulate every duplicate index (np.add.at); scatter_update overwrites."""
    a0 = RNG.integers(-5, 5, (5, 3)).astype(dtype)
    idx = np.array([0, 3, 0, 4, 0], np.int32)
    upd = RNG.integers(-5, 5, (5, 3)).astype(dtype)
    g, s, (w,) = _session_with(a0)
    with g.as_default(), s:
        want = a0.copy()
        np.add.at(want, idx, upd)
        np.testing.assert_array_equal(s.run(hb.scatter_add(w, idx, upd)), want)
        np.subtract.at(want, idx[1:], upd[1:])
        np.testing.assert_array_equal(s.run(hb.scatter_sub(w, idx[1:], upd[1:])), want)
        want[[2, 1]] = upd[:2]
        np.testing.assert_array_equal(s.run(hb.scatter_update(w, [2, 1], upd[:2])), want)
        np.testing.assert_array_equal(s.run(w), want)


def test_scatter_index_shapes():
    """Indices of rank 0 and 2 scatter rows with updates of shape indices.shape + row shape."""
    g, s, (w,) = _session_with(np.zeros((4, 2)))
    with g.as_default(), s:
        s.run(hb.scatter_add(w, 1, [1.0, 2.0]))
        s.run(hb.scatter_add(w, np.array([[3, 1], [3, 3]], np.int64), np.ones((2, 2, 2))))
        s.run(hb.scatter_update(w, np.zeros((0,), np.int32), np.zeros((0, 2))))
        np.testing.assert_array_equal(s.run(w), [[0, 0], [2, 3], [0, 0], [3, 3]])


def test_scatter_python_updates_take_variable_dtype():
    """Python updates take the variable's dtype (float64 here), as in TF."""
    g, s, (w,) = _session_with(np.zeros(3))
    with g.as_default(), s:
        np.testing.assert_array_equal(s.run(hb.scatter_add(w, [2, 2], [0.5, 0.25])), [0, 0, 0.75])


def test_scatter_out_of_range():
    """An out-of-range index fails at run time naming the index, the variable and its rows."""
    g, s, (w,) = _session_with(np.zeros((4, 2)))
    with g.as_default(), s:
        with pytest.raises(
            hb.errors.InvalidArgumentError, match=r"index 7 out of range.*with 4 rows"
        ):
            s.run(hb.scatter_add(w, [1, 7], np.ones((2, 2))))
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"index -1 out of range.*4 rows"):
            s.run(hb.scatter_update(w, [-1], np.ones((1, 2))))
        with pytest.raises(hb.errors.InvalidArgumentError, match="index 4"):
            s.run(hb.scatter_sub(w, [4], np.ones((1, 2))))
        np.testing.assert_array_equal(s.run(w), np.zeros((4, 2)))  # nothing half-applied


def test_scatter_static_errors():
    """Scatter rejects float indices, mis-shaped updates, another dtype and scalar variables."""
    g, s, (w, c) = _session_with(np.zeros((4, 2), np.float32), np.float32(1.0))
    with g.as_default(), s:
        with pytest.raises(hb.errors.InvalidArgumentError, match="is a scalar"):
            hb.scatter_update(c, 0, 2.0)
        with pytest.raises(hb.errors.InvalidArgumentError, match="indices must be int"):
            hb.scatter_add(w, hb.constant([1.0]), np.ones((1, 2), np.float32))
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"indices.shape \+ ref.shape"):
            hb.scatter_add(w, [1, 2], np.ones((2, 3), np.float32))
        with pytest.raises(hb.errors.InvalidArgumentError, match="float64 != float32"):
            hb.scatter_add(w, [1], hb.ones([1, 2], hb.float64))


def test_variable_gradient_and_costs():
    """Gradients flow into a variable's read; update ops have memory-traffic costs."""
    g, s, (w,) = _session_with(np.array([1.0, -2.0, 3.0]))
    with g.as_default(), s:
        (dw,) = hb.gradients(hb.reduce_sum(w * w), [w])
        np.testing.assert_array_equal(s.run(dw), [2.0, -4.0, 6.0])
        put, inc = hb.assign(w, [0.0, 0.0, 0.0]), hb.assign_add(w, [1.0, 1.0, 1.0])
        sc = hb.scatter_add(w, [0, 1], [1.0, 1.0])
    c = get_op_def("Assign").cost_fn(put.op, [(3,), (3,)], [(3,)])
    assert (c.flops, c.bytes_read, c.bytes_written) == (0, 24, 24)
    c = get_op_def("AssignAdd").cost_fn(inc.op, [(3,), (3,)], [(3,)])
    assert (c.flops, c.bytes_read, c.bytes_written) == (3, 48, 24)
    c = get_op_def("ScatterAdd").cost_fn(sc.op, [(3,), (2,), (2,)], [(3,)])
    assert (c.flops, c.bytes_read, c.bytes_written) == (2, 32, 16)


# ---- constant -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value,dtype",
    [
        (1.5, hb.float32),  # Python float -> float32
        ([1, 2], hb.int32),  # Python int -> int32
        (2**40, hb.int64),  # too big for int32 -> int64
        ([1, 2.5], hb.float32),
        (True, hb.bool_),
        (np.float64(1.5), hb.float64),  # numpy keeps its dtype
        (np.array([1.0, 2.0]), hb.float64),
        (np.int64(3), hb.int64),
        (np.array([1, 2], np.uint8), hb.uint8),  # numpy keeps its dtype
        (np.array([1, 2], np.uint32), hb.int64),  # values kept in a dtype hetbed has
        (np.zeros((2, 0), np.float16), hb.float16),
    ],
    ids=str,
)
def test_constant_dtype_inference(value, dtype):
    """constant infers TF's dtype; the value it yields has exactly that dtype."""
    with hb.Graph().as_default():
        c = hb.constant(value)
        assert c.dtype == dtype
        with hb.Session() as s:
            v = s.run(c)
    assert np.asarray(v).dtype == dtype.np
    np.testing.assert_array_equal(v, np.asarray(value).astype(dtype.np))


def test_constant_with_dtype_and_shape():
    """An explicit dtype casts numpy values; shape broadcasts a scalar or reshapes same-size values."""
    with hb.Graph().as_default():
        cs = [
            hb.constant(np.array([1.7, -1.7]), dtype=hb.int32),
            hb.constant(3, dtype=hb.float64, shape=[2, 2]),
            hb.constant([1, 2, 3, 4, 5, 6], shape=(2, 3)),
            hb.constant(7.0, shape=[0, 3]),
            hb.constant([], dtype=hb.float32, shape=[0]),
        ]
        with hb.Session() as s:
            vs = s.run(cs)
    np.testing.assert_array_equal(vs[0], np.array([1, -1], np.int32))
    assert vs[1].dtype == np.float64 and vs[1].tolist() == [[3, 3], [3, 3]]
    np.testing.assert_array_equal(vs[2], np.arange(1, 7).reshape(2, 3))
    assert vs[3].shape == (0, 3) and vs[3].dtype == np.float32
    assert vs[4].shape == (0,)
    assert [c.shape.as_list() for c in cs] == [[2], [2, 2], [2, 3], [0, 3], [0]]


def test_constant_errors():
    """constant rejects tensors, unsupported dtypes, floats for int dtypes and bad shapes."""
    with hb.Graph().as_default():
        with pytest.raises(TypeError, match="not the tensor"):
            hb.constant(hb.constant(1.0))
        with pytest.raises(TypeError, match="unsupported dtype"):
            hb.constant(np.array(["2020-01-01"], "datetime64[D]"))
        with pytest.raises(TypeError, match="expected int32, got complex value"):
            hb.constant([1 + 2j, 3j], dtype=hb.int32)  # complex constants are complex64/128
        with pytest.raises(TypeError, match=r"expected int32, got float value \[1.5, 2\]"):
            hb.constant([1.5, 2], dtype=hb.int32)
        with pytest.raises(hb.errors.InvalidArgumentError, match="3 elements does not fit shape"):
            hb.constant([1, 2, 3], shape=[2, 2])


def test_constant_owns_its_value():
    """Changing the source array after building leaves the constant unchanged."""
    src = np.arange(3.0)
    with hb.Graph().as_default():
        c = hb.constant(src)
        src[0] = 99.0
        with hb.Session() as s:
            np.testing.assert_array_equal(s.run(c), [0.0, 1.0, 2.0])


# ---- placeholders, identity, stop_gradient --------------------------------------------------------


def test_placeholder_feeding():
    """A placeholder must be fed a value of its dtype and shape; the error names it."""
    with hb.Graph().as_default():
        p = hb.placeholder(hb.int32, [None, 2], name="ids")
        q = hb.placeholder(hb.float32)
        assert q.shape.ndims is None
        y = p * 2
        with hb.Session() as s:
            np.testing.assert_array_equal(s.run(y, {p: [[1, 2]]}), [[2, 4]])
            with pytest.raises(
                hb.errors.InvalidArgumentError, match="must feed a value for placeholder 'ids'"
            ):
                s.run(y)
            with pytest.raises(hb.errors.InvalidArgumentError, match="not whole numbers for ids"):
                s.run(y, {p: [[1.5, 2.0]]})
            with pytest.raises(hb.errors.InvalidArgumentError, match=r"shape \(3,\)"):
                s.run(y, {p: [1, 2, 3]})
            assert s.run(q, {q: np.ones((2, 1, 3))}).shape == (2, 1, 3)


def test_placeholder_with_default():
    """placeholder_with_default yields its default unless fed, keeps the looser static shape,
    passes gradients, and rejects a default that does not fit the shape."""
    with hb.Graph().as_default():
        d = hb.constant([[1.0, 2.0]])
        p = hb.placeholder_with_default(d, [None, 2])
        assert p.shape.as_list() == [None, 2]
        (gd,) = hb.gradients(hb.reduce_sum(3.0 * p), [d])
        with hb.Session() as s:
            np.testing.assert_array_equal(s.run(p), [[1.0, 2.0]])
            np.testing.assert_array_equal(
                s.run(p, {p: np.zeros((3, 2), np.float32)}), np.zeros((3, 2))
            )
            np.testing.assert_array_equal(s.run(gd), [[3.0, 3.0]])
        with pytest.raises(
            hb.errors.InvalidArgumentError, match=r"\(1, 2\) does not fit shape \(3,\)"
        ):
            hb.placeholder_with_default(d, [3])


def test_identity_and_stop_gradient():
    """identity passes values and gradients; stop_gradient passes values and blocks gradients."""
    x = RNG.standard_normal((2, 3))
    check_forward(lambda t: (hb.identity(t), hb.stop_gradient(t)), [x], lambda a: (a, a))
    check_gradient(lambda t: hb.identity(t) * t, [x])
    with hb.Graph().as_default():
        t = hb.placeholder(hb.float64, [2, 3])
        assert hb.gradients(hb.reduce_sum(hb.stop_gradient(t) * 2.0), [t]) == [None]
        (g,) = hb.gradients(hb.reduce_sum(hb.stop_gradient(t) * t), [t])
        with hb.Session() as s:
            np.testing.assert_array_equal(s.run(g, {t: x}), x)


# ---- reshape, shape, size, rank --------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape,new",
    [((2, 3, 4), [-1]), ((2, 3, 4), [4, -1]), ((2, 3, 4), [6, 4]), ((0, 3), [-1, 3]), ((), [1, 1])],
    ids=str,
)
def test_reshape_values_and_gradient(shape, new):
    """reshape (with at most one -1) equals numpy's; its gradient reshapes back."""
    x = RNG.standard_normal(shape)
    check_forward(lambda t: hb.reshape(t, new), [x], lambda a: a.reshape(new))
    if x.size:
        check_gradient(lambda t: hb.reshape(t, new), [x])


def test_reshape_static_shapes_and_errors():
    """-1 is inferred statically when the size is known and left unknown otherwise; bad shapes fail."""
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [None, 3])
        assert hb.reshape(x, [-1]).shape.as_list() == [None]
        assert hb.reshape(hb.zeros([2, 6]), hb.TensorShape([3, -1])).shape.as_list() == [3, 4]
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"cannot reshape.*12 elements"):
            hb.reshape(hb.zeros([2, 6]), [5, -1])
        with pytest.raises(hb.errors.InvalidArgumentError, match="12 elements.*to \\[5, 2\\]"):
            hb.reshape(hb.zeros([2, 6]), [5, 2])
        with pytest.raises(hb.errors.InvalidArgumentError, match="at most one -1"):
            hb.reshape(hb.zeros([2, 6]), [-1, -1])
        with pytest.raises(hb.errors.InvalidArgumentError, match="sizes >= 0"):
            hb.reshape(hb.zeros([2, 6]), [-2, -6])
        with pytest.raises(hb.errors.InvalidArgumentError, match="12 elements.*to \\[5, 2\\]"):
            hb.reshape(hb.zeros([2, 6]), hb.constant([5, 2]))  # a shape tensor known at build
        assert hb.reshape(x, hb.constant([3, -1])).shape.as_list() == [3, None]
        with hb.Session() as s:
            y = s.run(hb.reshape(x, [-1]), {x: np.ones((4, 3), np.float32)})
            assert y.shape == (12,)


def test_reshape_like():
    """reshape_like takes the run-time shape of its second input."""
    from hetbed.runtime.ops.array import reshape_like

    x, like = RNG.standard_normal((6,)), RNG.standard_normal((2, 3))
    check_forward(reshape_like, [x, like], lambda a, b: a.reshape(b.shape))
    check_gradient(reshape_like, [x, like], wrt=[0])


def test_shape_size_rank():
    """shape/size/rank give int32 (or out_type) values, also for unknown static shapes."""
    x = np.zeros((2, 0, 3), np.float32)
    check_forward(hb.shape, [x], lambda a: np.array([2, 0, 3], np.int32))
    check_forward(lambda t: hb.shape(t, out_type=hb.int64), [x], lambda a: np.array([2, 0, 3]))
    check_forward(hb.size, [x], lambda a: np.int32(0))
    check_forward(lambda t: hb.size(t, out_type=hb.int64), [np.ones((2, 3))], lambda a: np.int64(6))
    check_forward(hb.rank, [x], lambda a: np.int32(3))
    check_forward(hb.shape, [np.float64(1.0)], lambda a: np.zeros(0, np.int32))
    with hb.Graph().as_default():
        p = hb.placeholder(hb.float32, [None, 4])
        u = hb.placeholder(hb.float32, None)
        assert hb.shape(p).shape.as_list() == [2]
        assert hb.shape(u).shape.as_list() == [None]
        outs = [hb.shape(p), hb.size(p), hb.rank(p), hb.rank(u), hb.size(u)]
        assert all(t.dtype == hb.int32 for t in outs)
        with hb.Session() as s:
            got = s.run(outs, {p: np.ones((5, 4)), u: np.ones((2, 3, 1, 1))})
    np.testing.assert_array_equal(got[0], [5, 4])
    assert [int(v) for v in got[1:]] == [20, 2, 4, 6]


# ---- cast ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "src,dst",
    [
        (np.float32, np.int32),
        (np.float64, np.int64),
        (np.int32, np.float32),
        (np.int64, np.float64),
        (np.float32, np.float64),
        (np.bool_, np.float32),
        (np.float32, np.bool_),
        (np.int32, np.bool_),
        (np.float64, np.float16),
    ],
    ids=str,
)
def test_cast_values(src, dst):
    """cast converts like numpy's astype: floats truncate toward zero, nonzero is True."""
    x = np.array([-2.7, -0.5, 0.0, 0.5, 1.0, 3.9]).astype(src)
    check_forward(lambda t: hb.cast(t, dst), [x], lambda a: a.astype(dst))


def test_cast_shortcuts_and_gradient():
    """Casting to the same dtype returns the tensor; float casts pass gradients, int casts do not."""
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float64, [3])
        assert hb.cast(x, hb.float64) is x
        assert hb.to_float(x).dtype == hb.float32
        assert hb.to_int32(x).dtype == hb.int32 and hb.to_int64(x).dtype == hb.int64
        assert hb.gradients(hb.reduce_sum(hb.cast(hb.cast(x, hb.int32), hb.float64)), [x]) == [None]
        y = hb.cast(x, hb.float32) * hb.constant([1.0, 2.0, 3.0])
        (g,) = hb.gradients(hb.reduce_sum(y), [x])
        assert g.dtype == hb.float64
        with hb.Session() as s:
            np.testing.assert_array_equal(s.run(g, {x: np.zeros(3)}), [1.0, 2.0, 3.0])
