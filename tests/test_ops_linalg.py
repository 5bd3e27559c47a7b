"""WP1 ops (runtime/ops/math_extra.py, runtime/ops/linalg.py): values against numpy/scipy and
closed forms, gradients against finite differences, errors naming the op, cost rules."""

import numpy as np
import pytest
import scipy.special as sp
from opcheck import check_forward, check_gradient, run

import hetbed as hb
import hetbed.compat.v1 as tf
from hetbed.runtime.registry import Cost, get_op_def

RNG = np.random.default_rng(7)


def _u(shape, low=-1.0, high=1.0, dtype=np.float64):
    return RNG.uniform(low, high, size=shape).astype(dtype)


def _spd(n, batch=()):
    a = RNG.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


# ---- elementwise --------------------------------------------------------------------------

UNARY = {  # name: (hb fn, reference, input range)
    "sin": (hb.sin, np.sin, (-3, 3)),
    "cos": (hb.cos, np.cos, (-3, 3)),
    "tan": (hb.tan, np.tan, (-1.2, 1.2)),
    "asin": (hb.asin, np.arcsin, (-0.9, 0.9)),
    "acos": (hb.acos, np.arccos, (-0.9, 0.9)),
    "atan": (hb.atan, np.arctan, (-3, 3)),
    "sinh": (hb.sinh, np.sinh, (-2, 2)),
    "cosh": (hb.cosh, np.cosh, (-2, 2)),
    "expm1": (hb.expm1, np.expm1, (-2, 2)),
    "erf": (hb.erf, sp.erf, (-2, 2)),
    "erfc": (hb.erfc, sp.erfc, (-2, 2)),
    "lgamma": (hb.lgamma, sp.gammaln, (0.2, 5)),
    "digamma": (hb.digamma, sp.digamma, (0.3, 5)),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_values_float32_and_gradients(name):
    fn, ref, (lo, hi) = UNARY[name]
    x32 = _u((2, 3), lo, hi, np.float32)
    check_forward(fn, [x32], lambda x: ref(x).astype(np.float32), rtol=2e-5, atol=1e-6)
    check_gradient(fn, [_u((2, 2), lo, hi)], rtol=1e-4, atol=1e-6)


def test_special_values_and_tf_math_names():
    x = np.array([0.0, -0.0, 1e-20, 30.0, -30.0], np.float64)
    got = run(lambda t: [hb.erf(t), hb.erfc(t), hb.expm1(t)], [x])
    np.testing.assert_allclose(got[0], [0, 0, 1.1283791670955126e-20, 1, -1], rtol=1e-12)
    np.testing.assert_allclose(got[1], sp.erfc(x), rtol=1e-12)
    assert got[2][2] == 1e-20  # expm1 keeps tiny values exact
    assert tf.math.lgamma is hb.lgamma and tf.math.mod is hb.floormod and tf.mod is hb.floormod
    for n in ("sin", "atan2", "is_nan", "cumsum", "reduce_logsumexp", "top_k", "reduce_std"):
        assert callable(getattr(tf.math, n)), n


def test_special_functions_without_scipy(monkeypatch):
    x = np.array([-2.5, -0.5, 0.3, 1.0, 4.5, 12.0])
    want = [sp.erf(x), sp.erfc(x), sp.gammaln(x), sp.digamma(x), sp.polygamma(1, x[2:])]
    monkeypatch.setitem(__import__("sys").modules, "scipy.special", None)  # import fails
    with hb.Graph().as_default(), hb.device("/cpu:0"):  # the CPU kernels' fallbacks
        t = hb.constant(x)
        fns = [hb.erf, hb.erfc, hb.lgamma, hb.digamma]
        (tri,) = hb.gradients(hb.reduce_sum(hb.digamma(t[2:])), [t])
        with hb.Session() as s:
            got = s.run([f(t) for f in fns] + [tri])
    for a, b in zip(got[:4], want[:4]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got[4][2:], want[4], rtol=1e-10)


def test_mod_is_floormod_with_tf_gradient():
    x, y = np.array([[5.3, -5.3], [2.2, -0.7]]), np.array([2.0, 1.5])
    check_forward(hb.mod, [x, y], np.mod)
    check_gradient(hb.mod, [x, y])


def test_is_nan_is_inf_is_finite():
    x = np.array([1.0, np.nan, np.inf, -np.inf, 0.0], np.float32)
    got = run(lambda t: [hb.is_nan(t), hb.is_inf(t), hb.is_finite(t)], [x])
    np.testing.assert_array_equal(got[0], np.isnan(x))
    np.testing.assert_array_equal(got[1], np.isinf(x))
    np.testing.assert_array_equal(got[2], np.isfinite(x))
    assert got[0].dtype == np.bool_
    with pytest.raises(hb.errors.InvalidArgumentError, match="IsNan: x must be float, got int32"):
        hb.is_nan(hb.constant([1, 2]))


def test_atan2_quadrants_broadcast_and_gradient():
    y = np.array([[1.0, -1.0], [1.0, -1.0]])
    x = np.array([1.0, -1.0])
    check_forward(hb.atan2, [y, x], np.arctan2)
    check_gradient(hb.atan2, [_u((2, 3)) + 2, _u((3,)) - 2])


# ---- cumulative ops -----------------------------------------------------------------------


def _np_cum(fn, x, axis, exclusive, reverse):
    if reverse:
        x = np.flip(x, axis)
    r = fn(x, axis=axis)
    if exclusive:
        ident = np.zeros_like if fn is np.cumsum else np.ones_like
        first = ident(np.take(r, [0], axis=axis))
        r = np.concatenate([first, np.take(r, range(x.shape[axis] - 1), axis=axis)], axis=axis)
    return np.flip(r, axis) if reverse else r


@pytest.mark.parametrize("exclusive,reverse", [(False, False), (True, False), (True, True)])
def test_cumsum_cumprod_values_and_gradients(exclusive, reverse):
    x = _u((2, 3), 0.5, 2.0)
    for hb_fn, np_fn, axis in ((hb.cumsum, np.cumsum, 1), (hb.cumprod, np.cumprod, 0)):

        def build(t, f=hb_fn, a=axis):
            return f(t, axis=a, exclusive=exclusive, reverse=reverse)

        check_forward(build, [x], lambda v, f=np_fn, a=axis: _np_cum(f, v, a, exclusive, reverse))
        check_gradient(build, [x])
    xi = np.array([[1, 2, 3]], np.int32)
    check_forward(
        lambda t: hb.cumsum(t, axis=-1, reverse=True),
        [xi],
        lambda v: np.array([[6, 5, 3]], np.int32),
    )
    with pytest.raises(hb.errors.InvalidArgumentError, match="Cumsum: axis 2 out of range"):
        hb.cumsum(hb.placeholder(hb.float32, [2, 3]), axis=2)


# ---- top_k, sort, argsort -----------------------------------------------------------------


def test_top_k_values_indices_ties_and_gradient():
    x = np.array([[1.0, 3.0, 3.0, 2.0], [0.0, -1.0, 5.0, 5.0]], np.float32)
    v, i = run(lambda t: list(tf.nn.top_k(t, k=3)), [x])
    np.testing.assert_array_equal(v, [[3, 3, 2], [5, 5, 0]])
    np.testing.assert_array_equal(i, [[1, 2, 3], [2, 3, 0]])  # ties: lower index first
    assert i.dtype == np.int32
    check_gradient(lambda t: hb.nn.top_k(t, 2)[0], [_u((2, 4))])
    with pytest.raises(hb.errors.InvalidArgumentError, match="k = 5 is larger"):
        hb.nn.top_k(hb.placeholder(hb.float32, [2, 4]), 5)
    g = hb.Graph()
    with g.as_default():
        p = hb.placeholder(hb.float32, [2, None])
        top = hb.nn.top_k(p, 3)[0]
        with hb.Session(graph=g) as s:
            with pytest.raises(hb.errors.InvalidArgumentError, match="TopKV2 'TopKV2'.*k = 3"):
                s.run(top, {p: np.ones((2, 2), np.float32)})


def test_sort_and_argsort_directions_and_axes():
    x = RNG.permutation(12).reshape(3, 4).astype(np.float64)
    check_forward(hb.sort, [x], lambda v: np.sort(v, -1))
    check_forward(
        lambda t: hb.sort(t, axis=0, direction="DESCENDING"), [x], lambda v: -np.sort(-v, 0)
    )
    check_forward(lambda t: hb.argsort(t, axis=0), [x], lambda v: np.argsort(v, 0).astype("i4"))
    xi = np.array([3, 1, 2], np.int32)
    check_forward(
        lambda t: hb.argsort(t, direction="DESCENDING"),
        [xi],
        lambda v: np.array([0, 2, 1], np.int32),
    )
    check_gradient(lambda t: hb.sort(t, axis=0), [x[:2, :3] / 7])
    with pytest.raises(hb.errors.InvalidArgumentError, match="direction"):
        hb.sort(hb.constant([1.0]), direction="UP")


# ---- reductions ---------------------------------------------------------------------------


def test_reduce_logsumexp_is_stable_and_differentiable():
    x = np.array([[1000.0, 1000.0, -np.inf], [-1000.0, -1001.0, -1002.0]])
    want = sp.logsumexp(x, axis=1)
    check_forward(lambda t: hb.reduce_logsumexp(t, axis=1), [x], lambda v: want, rtol=1e-12)
    check_forward(
        lambda t: hb.reduce_logsumexp(t, axis=[0, 1], keepdims=True),
        [x[:, :2].astype(np.float32)],
        lambda v: sp.logsumexp(v, keepdims=True).astype(np.float32),
    )
    allneg = np.full((2,), -np.inf)
    assert run(hb.reduce_logsumexp, [allneg]) == -np.inf
    check_gradient(lambda t: hb.reduce_logsumexp(t, axis=0), [_u((3, 2))])


def test_count_nonzero_accumulate_n_std_variance():
    x = np.array([[0.0, 1.5, 0.0], [2.0, -1.0, 0.0]])
    check_forward(hb.count_nonzero, [x], lambda v: np.int64(3))
    check_forward(
        lambda t: hb.count_nonzero(t, axis=0, keepdims=True, dtype=hb.int32),
        [x],
        lambda v: np.array([[1, 2, 0]], np.int32),
    )
    check_forward(lambda a, b: hb.accumulate_n([a, b, a]), [x, x + 1], lambda a, b: 2 * a + b)
    check_forward(lambda t: tf.math.reduce_variance(t, axis=1), [x], lambda v: np.var(v, 1))
    check_forward(lambda t: tf.math.reduce_std(t), [x], lambda v: np.std(v))
    check_gradient(lambda t: tf.math.reduce_std(t, axis=0), [_u((3, 2))])


# ---- norms and clipping -------------------------------------------------------------------


def test_norm_orders():
    x = _u((3, 4))
    check_forward(hb.norm, [x], lambda v: np.linalg.norm(v))
    check_forward(lambda t: hb.norm(t, ord=1, axis=1), [x], lambda v: np.abs(v).sum(1))
    check_forward(lambda t: tf.linalg.norm(t, ord=np.inf, axis=0), [x], lambda v: abs(v).max(0))
    check_forward(
        lambda t: hb.norm(t, ord="fro", axis=[0, 1], keepdims=True),
        [x],
        lambda v: np.linalg.norm(v).reshape(1, 1),
    )
    with pytest.raises(hb.errors.InvalidArgumentError, match="ord"):
        hb.norm(hb.constant(x), ord=3)


def test_clip_by_norm_scales_only_large_tensors():
    x = np.array([[3.0, 4.0], [0.3, 0.4]])
    check_forward(lambda t: hb.clip_by_norm(t, 1.0), [x], lambda v: v / np.linalg.norm(v))
    check_forward(lambda t: hb.clip_by_norm(t, 100.0), [x], lambda v: v)
    rows = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1.0)
    check_forward(lambda t: hb.clip_by_norm(t, 1.0, axes=[1]), [x], lambda v: rows)
    check_forward(lambda t: hb.clip_by_norm(t, 1.0), [np.zeros((2,))], lambda v: v)
    check_gradient(lambda t: hb.clip_by_norm(t, 0.5), [x[:1] + 0.1])


def test_global_norm_and_clip_by_global_norm_with_none_and_indexed_slices():
    a, b = np.array([3.0, 0.0]), np.array([[4.0]])
    g = hb.Graph()
    with g.as_default():
        pa, pb = hb.placeholder(hb.float64, [2]), hb.placeholder(hb.float64, [1, 1])
        sl = hb.IndexedSlices(pb[0], hb.constant([1]), hb.constant([3, 1]))
        clipped, norm = hb.clip_by_global_norm([pa, None, sl], 2.5)
        assert clipped[1] is None and isinstance(clipped[2], hb.IndexedSlices)
        gn = hb.global_norm([pa, pb, None])
        same, _ = tf.clip_by_global_norm([pa], 10.0)
        inf = hb.clip_by_global_norm([pa], 1.0, use_norm=hb.constant(np.inf, hb.float64))[0]
        with hb.Session(graph=g) as s:
            c0, c2, n, n2, s0, i0 = s.run(
                [clipped[0], clipped[2].values, norm, gn, same[0], inf[0]], {pa: a, pb: b}
            )
    assert n == 5.0 and n2 == 5.0
    np.testing.assert_allclose(c0, a / 2)
    np.testing.assert_allclose(c2, [2.0])
    np.testing.assert_allclose(s0, a)
    assert np.isnan(i0).all()


# ---- diagonals, bands and helpers ---------------------------------------------------------


def _np_set_diag(a, d):
    out = a.copy()
    out[range(len(d)), range(len(d))] = d
    return out


def test_eye_diag_trace_transpose_linspace():
    np.testing.assert_array_equal(
        run(lambda: hb.eye(2, 3, batch_shape=[2]), []), [np.eye(2, 3)] * 2
    )
    assert run(lambda: tf.eye(2, dtype=tf.int32), []).dtype == np.int32
    v = _u((3,))
    check_forward(hb.diag, [v], np.diag)
    check_forward(hb.diag_part, [np.diag(v)], lambda m: v)
    m = _u((2, 3, 4))
    check_forward(hb.trace, [m], lambda t: np.trace(t, axis1=-2, axis2=-1))
    check_forward(hb.matrix_transpose, [m], lambda t: np.swapaxes(t, -1, -2))
    check_forward(hb.matrix_diag, [m[0]], lambda t: np.stack([np.diag(r) for r in t]))
    check_forward(
        lambda a, d: hb.matrix_set_diag(a, d),
        [m[0], v],
        _np_set_diag,
    )
    check_gradient(hb.matrix_diag_part, [m[0]])
    check_gradient(lambda a, d: hb.matrix_set_diag(a, d), [m[0], v])
    check_gradient(hb.matrix_diag, [v])
    np.testing.assert_allclose(run(lambda: tf.lin_space(0.0, 1.0, 5), []), np.linspace(0, 1, 5))
    assert run(lambda: hb.linspace(0.0, 1.0, 3), []).dtype == np.float32
    got = run(lambda n: hb.linspace(hb.constant(1.0), 2.0, n), [np.int32(3)])
    np.testing.assert_allclose(got, [1.0, 1.5, 2.0])


def test_matrix_band_part_values_and_gradient():
    x = _u((2, 3, 4))
    for lo, up in ((0, -1), (-1, 0), (1, 1), (0, 0)):
        want = np.stack(
            [np.triu(np.tril(a, up if up >= 0 else 9), -lo if lo >= 0 else -9) for a in x]
        )
        check_forward(
            lambda t, lo=lo, up=up: hb.matrix_band_part(t, lo, up), [x], lambda t, w=want: w
        )
    check_gradient(lambda t: tf.linalg.band_part(t, 1, 0), [x[0]])


# ---- einsum and tensordot -----------------------------------------------------------------

EINSUM = [  # (equation, operand shapes) with gradients
    ("ij,jk->ik", [(2, 3), (3, 2)]),
    ("ij->j", [(2, 3)]),
    ("ij,j->", [(2, 3), (3,)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
    ("i,j", [(2,), (3,)]),  # implicit output: outer product
]


@pytest.mark.parametrize("eq,shapes", EINSUM)
def test_einsum_values_and_gradients(eq, shapes):
    xs = [_u(s) for s in shapes]
    check_forward(lambda *t: hb.einsum(eq, *t), xs, lambda *v: np.einsum(eq, *v))
    check_gradient(lambda *t: hb.einsum(eq, *t), xs)


def test_einsum_forward_only_forms_and_errors():
    m = _u((3, 3))
    check_forward(lambda t: hb.einsum("ii->i", t), [m], lambda v: np.diag(v).copy())
    check_forward(lambda t: hb.einsum("...j->...", t), [m], lambda v: v.sum(-1))
    g = hb.Graph()
    with g.as_default():
        t = hb.placeholder(hb.float64, [3, 3])
        with pytest.raises(hb.errors.InvalidArgumentError, match="repeats an index"):
            hb.gradients(hb.reduce_sum(hb.einsum("ii->i", t)), [t])
        with pytest.raises(hb.errors.InvalidArgumentError, match="index 'j' is 3"):
            hb.einsum("ij,jk->ik", t, hb.placeholder(hb.float64, [2, 2]))
        with pytest.raises(hb.errors.InvalidArgumentError, match="names 2 operands"):
            hb.einsum("ij,jk->ik", t)


def test_tensordot_int_and_pair_axes():
    a, b = _u((2, 3, 2)), _u((3, 2, 2))
    check_forward(
        lambda x, y: hb.tensordot(x, y, [[1, 0], [0, 2]]),
        [a, b],
        lambda x, y: np.tensordot(x, y, [[1, 0], [0, 2]]),
    )
    c = _u((3, 2))
    check_forward(lambda x, y: tf.tensordot(x, y, 2), [a, c], lambda x, y: np.tensordot(x, y, 2))
    check_gradient(lambda x, y: hb.tensordot(x, y, 1), [a[:, :2, :], c[:2]])


# ---- linear algebra -----------------------------------------------------------------------


def test_inverse_determinant_values_and_gradients():
    a = _spd(3, (2,)) + _u((2, 3, 3))
    check_forward(hb.matrix_inverse, [a], np.linalg.inv, rtol=1e-10, atol=1e-12)
    check_forward(
        lambda t: tf.linalg.inv(t, adjoint=True), [a], lambda v: np.linalg.inv(np.swapaxes(v, 1, 2))
    )
    check_forward(hb.matrix_determinant, [a.astype(np.float32)], np.linalg.det, rtol=1e-5)
    b = a[0, :2, :2]
    check_gradient(hb.matrix_inverse, [b])
    check_gradient(lambda t: hb.matrix_inverse(t, adjoint=True), [b])
    check_gradient(hb.matrix_determinant, [a[:, :2, :2]], rtol=1e-4)


def test_solves_values_and_gradients():
    a, rhs = _spd(3) + _u((3, 3)), _u((3, 2))
    check_forward(hb.matrix_solve, [a, rhs], np.linalg.solve, rtol=1e-10, atol=1e-12)
    check_forward(
        lambda x, y: hb.matrix_solve(x, y, adjoint=True),
        [a, rhs],
        lambda x, y: np.linalg.solve(x.T, y),
    )
    check_forward(hb.matrix_triangular_solve, [a, rhs], lambda x, y: np.linalg.solve(np.tril(x), y))
    check_forward(
        lambda x, y: tf.linalg.triangular_solve(x, y, lower=False, adjoint=True),
        [a, rhs],
        lambda x, y: np.linalg.solve(np.triu(x).T, y),
    )
    a2, r2 = a[:2, :2], rhs[:2]
    check_gradient(hb.matrix_solve, [a2, r2])
    check_gradient(lambda x, y: hb.matrix_solve(x, y, adjoint=True), [a2, r2])
    check_gradient(lambda x, y: hb.matrix_triangular_solve(x, y, lower=False), [a2, r2])


def test_cholesky_values_and_gradient():
    a = _spd(3, (2,))
    check_forward(hb.cholesky, [a], np.linalg.cholesky, rtol=1e-10, atol=1e-12)
    sym = _spd(3)
    check_gradient(lambda t: hb.cholesky(0.5 * (t + hb.matrix_transpose(t))), [sym])
    with pytest.raises(hb.errors.InvalidArgumentError, match="Cholesky 'Cholesky'.*positive"):
        run(hb.cholesky, [-np.eye(2)])


def test_qr_svd_eigh_reconstruct():
    a = _u((2, 4, 3))
    q, r = run(lambda t: list(hb.qr(t)), [a])
    assert q.shape == (2, 4, 3) and r.shape == (2, 3, 3)
    np.testing.assert_allclose(q @ r, a, atol=1e-12)
    np.testing.assert_allclose(np.tril(r, -1), 0, atol=1e-12)
    s, u, v = run(lambda t: list(tf.svd(t)), [a])
    np.testing.assert_allclose((u * s[:, None, :]) @ np.swapaxes(v, 1, 2), a, atol=1e-12)
    assert v.shape == (2, 3, 3)
    s_only = run(lambda t: tf.linalg.svd(t, compute_uv=False), [a.astype(np.float32)])
    np.testing.assert_allclose(s_only, s, rtol=1e-5)
    qf, _ = run(lambda t: list(hb.qr(t, full_matrices=True)), [a[0]])
    assert qf.shape == (4, 4)
    sym = _spd(3)
    e, w = run(lambda t: list(tf.linalg.eigh(t)), [sym])
    np.testing.assert_allclose(e, np.linalg.eigvalsh(sym), rtol=1e-12)
    np.testing.assert_allclose(sym @ w, w * e, atol=1e-10)
    np.testing.assert_allclose(run(hb.self_adjoint_eigvals, [sym]), e, rtol=1e-12)


def test_linalg_errors_name_the_op_and_shape():
    g = hb.Graph()
    with g.as_default():
        with pytest.raises(hb.errors.InvalidArgumentError, match="MatrixInverse.*square.*3, 2"):
            hb.matrix_inverse(hb.placeholder(hb.float32, [3, 2]))
        with pytest.raises(hb.errors.InvalidArgumentError, match="must be float"):
            hb.matrix_determinant(hb.placeholder(hb.int32, [2, 2]))
        with pytest.raises(hb.errors.InvalidArgumentError, match="differ in rows"):
            hb.matrix_solve(hb.placeholder(hb.float32, [3, 3]), hb.placeholder(hb.float32, [2, 1]))
    with pytest.raises(hb.errors.InvalidArgumentError, match="MatrixInverse 'MatrixInverse'"):
        run(hb.matrix_inverse, [np.zeros((2, 2))])


def test_costs_count_cubic_flops():
    g = hb.Graph()
    with g.as_default():
        inv = hb.matrix_inverse(hb.placeholder(hb.float32, [4, 8, 8]))
        sol = hb.matrix_solve(
            hb.placeholder(hb.float32, [8, 8]), hb.placeholder(hb.float32, [8, 2])
        )
    c = get_op_def("MatrixInverse").cost_fn(inv.op, [(4, 8, 8)], [(4, 8, 8)])
    assert isinstance(c, Cost) and c.flops == 2 * 4 * 8**3 and c.bytes_read == 4 * 64 * 4
    c = get_op_def("MatrixSolve").cost_fn(sol.op, [(8, 8), (8, 2)], [(8, 2)])
    assert c.flops == pytest.approx(2 / 3 * 8**3 + 2 * 64 * 2)


def test_shape_only_simulation_times_inverse_by_its_flops():
    from hetbed.devices.costmodel import DevicePerf
    from hetbed.simulator import Cluster, SimSession, sim_value

    perf = DevicePerf("toy", {"float32": 1e12}, memory_bandwidth=100e9, memory_bytes=1e9)
    c = Cluster()
    c.add_task("worker", 0, cpu=perf, gpu=(perf, 1), nic=(1e9, 50e-6))
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [4, 256, 256])
        with hb.device("/job:worker/task:0/device:gpu:0"):
            y = hb.matrix_inverse(x)
            z = hb.einsum("bij,bjk->bik", y, hb.cumsum(x, axis=1))
            v, _ = hb.nn.top_k(hb.reshape(z, [4, -1]), 3)
            (gx,) = hb.gradients(hb.reduce_sum(v) + hb.reduce_sum(hb.cholesky(x)), [x])
        s = SimSession(c)
        out = s.run([v, gx], {x: sim_value([4, 256, 256])})
    assert out[0].shape == (4, 3) and out[1].shape == (4, 256, 256)
    ops = s.last_record.ops
    inv = ops[ops.type == "MatrixInverse"]
    assert len(inv) == 1 and inv.duration_s.iloc[0] >= 2 * 4 * 256**3 / 1e12
