"""Compiled CPU conv/pool kernels (runtime/ops/nn_cpu.py) against direct-loop references:
forward, input and filter gradients, for SAME/VALID, strides 1-3 (unequal too), odd sizes, 1x1
filters, float32 and float64, blocks that split images and leave a remainder, patch matrices
built either way round."""

import numpy as np
import pytest
from opcheck import check_gradient

import hetbed as hb
from hetbed.runtime.ops import intraop, nn, nn_cpu

RNG = np.random.default_rng(7)


def _geom(size, k, s, padding):
    """(output size, padding before, padding after), TF's rule."""
    if padding == "VALID":
        return (size - k) // s + 1, 0, 0
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    return out, total // 2, total - total // 2


def naive_conv(x, f, sh, sw, padding):
    """out[n, i, j, o] = sum over (a, b, c) of x[n, i*sh + a - pt, j*sw + b - pl, c] f[a, b, c, o]."""
    n, h, w, c = x.shape
    kh, kw, _, co = f.shape
    ho, pt, _ = _geom(h, kh, sh, padding)
    wo, pl, _ = _geom(w, kw, sw, padding)
    out = np.zeros((n, ho, wo, co))
    for i in range(ho):
        for j in range(wo):
            for a in range(kh):
                for b in range(kw):
                    r, q = i * sh + a - pt, j * sw + b - pl
                    if 0 <= r < h and 0 <= q < w:
                        out[:, i, j] += x[:, r, q].astype(np.float64) @ f[a, b]
    return out


def naive_adjoints(x, f, dy, sh, sw, padding):
    """(dx, df) of sum(dy * conv(x, f)), by the same loops run backwards."""
    n, h, w, c = x.shape
    kh, kw, _, co = f.shape
    _, ho, wo, _ = dy.shape
    _, pt, _ = _geom(h, kh, sh, padding)
    _, pl, _ = _geom(w, kw, sw, padding)
    dx, df = np.zeros(x.shape), np.zeros(f.shape)
    for i in range(ho):
        for j in range(wo):
            for a in range(kh):
                for b in range(kw):
                    r, q = i * sh + a - pt, j * sw + b - pl
                    if 0 <= r < h and 0 <= q < w:
                        dx[:, r, q] += dy[:, i, j].astype(np.float64) @ f[a, b].T
                        df[a, b] += x[:, r, q].astype(np.float64).T @ dy[:, i, j]
    return dx, df


CASES = [
    # (N, H, W, C, kh, kw, Co, sh, sw, padding)
    (2, 7, 6, 3, 3, 3, 4, 1, 1, "SAME"),
    (2, 7, 6, 3, 3, 3, 4, 1, 1, "VALID"),
    (2, 9, 7, 2, 5, 5, 3, 1, 1, "SAME"),
    (2, 7, 6, 3, 3, 2, 4, 2, 2, "SAME"),
    (3, 7, 8, 2, 3, 2, 4, 2, 3, "VALID"),
    (1, 8, 8, 2, 4, 4, 3, 2, 1, "SAME"),
    (3, 5, 5, 4, 1, 1, 2, 1, 1, "SAME"),
    (1, 5, 7, 3, 1, 1, 2, 2, 3, "VALID"),
    (2, 4, 9, 1, 2, 5, 2, 3, 3, "SAME"),
    (1, 3, 3, 2, 3, 3, 5, 1, 1, "VALID"),  # one output pixel
    # short window rows (kw * C < Wo): the transposed patch matrix
    (2, 6, 11, 1, 3, 3, 4, 1, 1, "SAME"),
    (2, 7, 13, 2, 3, 2, 3, 2, 2, "VALID"),
    (1, 5, 17, 1, 5, 5, 2, 1, 3, "SAME"),
]


def _pads(case):
    n, h, w, c, kh, kw, co, sh, sw, pad = case
    ho, pt, pb = _geom(h, kh, sh, pad)
    wo, pl, pr = _geom(w, kw, sw, pad)
    return ho, wo, (pt, pb), (pl, pr)


@pytest.fixture(
    params=[(None, None), (7, 1), (7, 3), (1 << 10, 3)],
    ids=["one-block", "7-element-blocks", "7-element-blocks-3-threads", "1k-blocks-3-threads"],
)
def block(request, monkeypatch):
    """Default blocking, or blocks of a few rows (every block boundary and a short last block)
    run in turn or on 3 threads; 1k-element blocks let the input gradient take whole images per
    block on threads."""
    elems, threads = request.param
    if elems is not None:
        monkeypatch.setattr(nn_cpu, "_BLOCK_ELEMS", elems)
        monkeypatch.setattr(nn_cpu, "_TBLOCK_ELEMS", elems)
    monkeypatch.setattr(intraop, "THREADS", threads)
    return request.param


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES)
def test_conv_kernels_match_direct_loops(case, dtype, block):
    """conv2d, its input gradient and its filter gradient equal direct loops."""
    n, h, w, c, kh, kw, co, sh, sw, pad = case
    ho, wo, ph, pw = _pads(case)
    x = RNG.standard_normal((n, h, w, c)).astype(dtype)
    f = RNG.standard_normal((kh, kw, c, co)).astype(dtype)
    dy = RNG.standard_normal((n, ho, wo, co)).astype(dtype)
    tol = {"rtol": 1e-4, "atol": 1e-4} if dtype == np.float32 else {"rtol": 1e-10, "atol": 1e-10}
    y = nn_cpu.conv2d(x, f, sh, sw, ho, wo, ph, pw)
    assert y.dtype == dtype and y.shape == (n, ho, wo, co)
    np.testing.assert_allclose(y, naive_conv(x, f, sh, sw, pad), **tol)
    dx_want, df_want = naive_adjoints(x, f, dy, sh, sw, pad)
    dx = nn_cpu.conv2d_backprop_input(x.shape, f, dy, sh, sw, ph, pw)
    df = nn_cpu.conv2d_backprop_filter(x, dy, kh, kw, sh, sw, ph, pw)
    assert dx.dtype == df.dtype == dtype
    np.testing.assert_allclose(dx, dx_want, **tol)
    np.testing.assert_allclose(df, df_want, **tol)


def _blas_threads():
    blas = intraop.numpy_blas()
    return blas.get_num_threads() if blas else None


def test_threaded_blocks_restore_blas_threads_and_equal_blocks_in_turn(monkeypatch):
    """Blocks on threads give the blocks-in-turn results, and the same bits every time whichever
    thread takes which block (each block one GEMM on one thread, filter-gradient partials summed
    in block order), also with convolutions running on two threads at once; numpy's BLAS gets
    its thread count back, also after an error in a block."""
    import threading

    monkeypatch.setattr(nn_cpu, "_BLOCK_ELEMS", 1 << 11)
    x = RNG.standard_normal((6, 9, 8, 3)).astype(np.float32)
    f = RNG.standard_normal((3, 3, 3, 5)).astype(np.float32)
    dy = RNG.standard_normal((6, 9, 8, 5)).astype(np.float32)
    pads = ((1, 1), (1, 1))

    def run():
        return (
            nn_cpu.conv2d(x, f, 1, 1, 9, 8, *pads),
            nn_cpu.conv2d_backprop_filter(x, dy, 3, 3, 1, 1, *pads),
            nn_cpu.conv2d_backprop_input(x.shape, f, dy, 1, 1, *pads),
        )

    before = _blas_threads()
    monkeypatch.setattr(intraop, "THREADS", 1)
    in_turn = run()
    monkeypatch.setattr(intraop, "THREADS", 3)
    want = run()
    for a, b in zip(want, in_turn):  # blocks per thread are smaller: other partial sums
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    got = [None, None]

    def side(i):
        got[i] = run()

    ts = [threading.Thread(target=side, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for res in got:
        for a, b in zip(res, want):
            np.testing.assert_array_equal(a, b)
    assert _blas_threads() == before
    calls = []

    def failing(*args):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("block 3")
        return im2col(*args)

    im2col = nn_cpu._im2col
    monkeypatch.setattr(nn_cpu, "_im2col", failing)
    with pytest.raises(RuntimeError, match="block 3"):
        nn_cpu.conv2d_backprop_filter(x, dy, 3, 3, 1, 1, *pads)
    assert _blas_threads() == before


def test_conv_kernels_take_strided_inputs():
    """Non-contiguous inputs (a transposed view) give the same results as contiguous copies."""
    x = RNG.standard_normal((2, 6, 7, 3)).astype(np.float32).transpose(0, 2, 1, 3)
    f = RNG.standard_normal((3, 3, 4, 3)).astype(np.float32).transpose(0, 1, 3, 2)
    ho, wo, ph, pw = 4, 3, (1, 1), (1, 1)
    dy = RNG.standard_normal((2, wo, ho, 4)).astype(np.float32).transpose(0, 2, 1, 3)
    xc, fc, dyc = (np.ascontiguousarray(a) for a in (x, f, dy))
    for fn, args, argsc in [
        (nn_cpu.conv2d, (x, f, 2, 2, ho, wo, ph, pw), (xc, fc, 2, 2, ho, wo, ph, pw)),
        (
            nn_cpu.conv2d_backprop_filter,
            (x, dy, 3, 3, 2, 2, ph, pw),
            (xc, dyc, 3, 3, 2, 2, ph, pw),
        ),
        (
            nn_cpu.conv2d_backprop_input,
            (x.shape, f, dy, 2, 2, ph, pw),
            (x.shape, fc, dyc, 2, 2, ph, pw),
        ),
    ]:
        np.testing.assert_array_equal(fn(*args), fn(*argsc))


def naive_max_pool(x, kh, kw, sh, sw, padding):
    """(y, dx for g) of max pooling by loops: each window's gradient to its first maximum."""
    n, h, w, c = x.shape
    ho, pt, _ = _geom(h, kh, sh, padding)
    wo, pl, _ = _geom(w, kw, sw, padding)
    y = np.full((n, ho, wo, c), -np.inf, x.dtype)
    first = {}
    for b in range(n):
        for i in range(ho):
            for j in range(wo):
                for ch in range(c):
                    for a in range(kh):
                        for q in range(kw):
                            r, s = i * sh + a - pt, j * sw + q - pl
                            if (
                                0 <= r < h
                                and 0 <= s < w
                                and (x[b, r, s, ch] > y[b, i, j, ch] or np.isnan(x[b, r, s, ch]))
                            ):
                                if not np.isnan(y[b, i, j, ch]):
                                    y[b, i, j, ch] = x[b, r, s, ch]
                                    first[b, i, j, ch] = (r, s)
    return y, first


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "kh,kw,sh,sw,pad",
    [
        (2, 2, 2, 2, "SAME"),
        (2, 2, 2, 2, "VALID"),
        (3, 3, 2, 2, "SAME"),
        (3, 2, 1, 2, "VALID"),
        (3, 3, 1, 1, "SAME"),
        (1, 1, 2, 2, "VALID"),
        (4, 3, 3, 2, "SAME"),
        # windows that tile the input (stride = window, no padding): the tiled kernels
        (3, 3, 3, 3, "VALID"),  # a row left over
        (1, 2, 1, 2, "SAME"),
        (2, 3, 2, 3, "VALID"),
    ],
)
def test_max_pool_kernels_match_loops(kh, kw, sh, sw, pad, dtype):
    """max_pool and max_pool_grad equal loops, with ties (rounded values) and overlapping windows."""
    x = np.round(RNG.standard_normal((2, 7, 6, 3)) * 2).astype(dtype)  # many ties
    y_want, first = naive_max_pool(x, kh, kw, sh, sw, pad)
    ho, pt, pb = _geom(7, kh, sh, pad)
    wo, pl, pr = _geom(6, kw, sw, pad)
    y = nn_cpu.max_pool(x, kh, kw, sh, sw, ho, wo, (pt, pb), (pl, pr))
    np.testing.assert_array_equal(y, y_want)
    g = RNG.standard_normal(y.shape).astype(dtype)
    dx_want = np.zeros(x.shape)
    for (b, i, j, ch), (r, s) in first.items():
        dx_want[b, r, s, ch] += g[b, i, j, ch]
    dx = nn_cpu.max_pool_grad(x, y, g, kh, kw, sh, sw, (pt, pb), (pl, pr))
    np.testing.assert_allclose(dx, dx_want, rtol=1e-6, atol=1e-6)


def test_max_pool_propagates_nan():
    """A NaN in a window makes its maximum NaN, wherever it sits in the window."""
    x = np.zeros((1, 4, 4, 2), np.float32)
    x[0, 1, 1, 0] = np.nan  # second cell of window (0, 0) of channel 0
    x[0, 2, 2, 1] = np.nan  # first cell of window (1, 1) of channel 1
    x[0, 3, 3, 1] = 5.0
    y = nn_cpu.max_pool(x, 2, 2, 2, 2, 2, 2, (0, 0), (0, 0))
    assert np.isnan(y[0, 0, 0, 0]) and np.isnan(y[0, 1, 1, 1])
    assert y[0, 1, 1, 0] == 0 and y[0, 0, 0, 1] == 0


def test_fast_path_only_for_numpy_float32_float64():
    """supports() admits float32/float64 numpy arrays of one dtype; others use the numpy kernels."""
    a32, a64 = np.zeros((1, 2, 2, 1), np.float32), np.zeros((1, 2, 2, 1))
    assert nn._cpu_fast(a32, a32) is nn_cpu and nn._cpu_fast(a64) is nn_cpu
    assert nn._cpu_fast(a32, a64) is None
    assert nn._cpu_fast(a32.astype(np.float16)) is None
    assert nn._cpu_fast(a32.astype(np.int32)) is None


def test_float16_conv_and_pool_still_run():
    """float16 graphs take the general kernels and agree with float64 loops."""
    x = RNG.standard_normal((1, 5, 5, 2)).astype(np.float16)
    f = RNG.standard_normal((3, 3, 2, 2)).astype(np.float16)
    with hb.Graph().as_default(), hb.Session() as s:
        y = hb.nn.max_pool(hb.nn.conv2d(x, f, 1, "SAME"), [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
        got = s.run(y)
    conv = naive_conv(x.astype(np.float64), f.astype(np.float64), 1, 1, "SAME")
    want, _ = naive_max_pool(conv, 2, 2, 2, 2, "SAME")
    assert got.dtype == np.float16
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)


def test_lenet_gradients_through_the_graph_match_loops():
    """A float32 conv -> relu -> max-pool graph's weight and input gradients (the compiled
    kernels inside Session.run) equal the loop references."""
    x = RNG.standard_normal((3, 9, 9, 2)).astype(np.float32)
    f = RNG.standard_normal((5, 5, 2, 4)).astype(np.float32)
    w = RNG.standard_normal((3, 5, 5, 4)).astype(np.float32)
    with hb.Graph().as_default(), hb.Session() as s:
        xt, ft = hb.constant(x), hb.constant(f)
        c = hb.nn.conv2d(xt, ft, [1, 1, 1, 1], "SAME")
        p = hb.nn.max_pool(hb.nn.relu(c), [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
        loss = hb.reduce_sum(p * hb.constant(w))
        gx, gf = s.run(hb.gradients(loss, [xt, ft]))
    conv = naive_conv(x, f, 1, 1, "SAME")
    relu = np.maximum(conv, 0)
    _, first = naive_max_pool(relu, 2, 2, 2, 2, "SAME")
    dr = np.zeros(relu.shape)
    for (b, i, j, ch), (r, q) in first.items():
        dr[b, r, q, ch] += w[b, i, j, ch]
    dc = dr * (conv > 0)
    dx, df = naive_adjoints(x, f, dc, 1, 1, "SAME")
    np.testing.assert_allclose(gx, dx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gf, df, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_elementwise_kernels_match_numpy(dtype):
    """relu, relu_grad, bias_add and bias_add_grad equal numpy's expressions, NaN and inf included,
    on 0-d, 2-D, 4-D and non-contiguous arrays."""
    x = RNG.standard_normal((3, 4, 5, 6)).astype(dtype)
    x[0, 0, 0, :3] = [np.nan, np.inf, -np.inf]
    g = RNG.standard_normal(x.shape).astype(dtype)
    g[1, 1, 1, :2] = [np.nan, np.inf]
    y = np.maximum(x, 0)
    b = RNG.standard_normal(6).astype(dtype)
    for a, gg in [
        (x, g),
        (x[:, ::2], g[:, ::2]),
        (x[0, 0], g[0, 0]),
        (x[0, 0, 0, 4], g[0, 0, 0, 4]),
    ]:
        np.testing.assert_array_equal(nn_cpu.relu(a), np.maximum(a, 0))
        yy = np.maximum(a, 0)
        with np.errstate(invalid="ignore"):
            np.testing.assert_array_equal(nn_cpu.relu_grad(gg, yy), gg * (yy > 0))
        assert nn_cpu.relu(a).shape == np.shape(a)
    for a in (x, x[:, ::2], x[0, 0], g):
        np.testing.assert_array_equal(nn_cpu.bias_add(a, b), a + b)
        np.testing.assert_array_equal(
            nn_cpu.bias_add_grad(a), a.reshape(-1, 6).sum(axis=0, dtype=dtype)
        )
    assert nn_cpu.relu_grad(g, y).dtype == dtype


def test_bias_add_and_relu_gradients_through_the_graph():
    """A float32 dense layer's bias and input gradients through relu equal numpy's."""
    x = RNG.standard_normal((5, 3)).astype(np.float32)
    b = RNG.standard_normal(3).astype(np.float32)
    w = RNG.standard_normal((5, 3)).astype(np.float32)
    with hb.Graph().as_default(), hb.Session() as s:
        xt, bt = hb.constant(x), hb.constant(b)
        loss = hb.reduce_sum(hb.nn.relu(hb.nn.bias_add(xt, bt)) * hb.constant(w))
        gx, gb = s.run(hb.gradients(loss, [xt, bt]))
    dz = w * (x + b > 0)
    np.testing.assert_allclose(gx, dz, rtol=1e-6)
    np.testing.assert_allclose(gb, dz.sum(axis=0), rtol=1e-5)


def _bn_ref(x, scale, offset, eps):
    """Batch norm in float64 by numpy: (y, mean, Bessel-corrected variance)."""
    x2 = x.reshape(-1, x.shape[-1]).astype(np.float64)
    m, v = x2.mean(axis=0), x2.var(axis=0)
    y = (x2 - m) / np.sqrt(v + eps) * scale + offset
    return y.reshape(x.shape), m, v * len(x2) / (len(x2) - 1)


def test_fused_batch_norm_float32_matches_float64_reference():
    """float32 training batch norm on a large, far-from-zero batch (the two-pass float64
    moments avoid cancellation) equals a float64 reference; gradients equal the float64 kernel's,
    batch-stat gradients (g_mean, g_var) included."""
    x = (RNG.standard_normal((16, 9, 9, 5)) * 0.5 + 300.0).astype(np.float32)
    scale, offset = (
        RNG.standard_normal(5).astype(np.float32),
        RNG.standard_normal(5).astype(np.float32),
    )
    y, m, v = nn_cpu.fused_batch_norm(x, scale, offset, None, None, 1e-3, True)
    y_ref, m_ref, v_ref = _bn_ref(x, scale, offset, 1e-3)
    np.testing.assert_allclose(y, y_ref, rtol=1e-3, atol=2e-3)
    np.testing.assert_allclose(m, m_ref, rtol=1e-6)
    np.testing.assert_allclose(v, v_ref, rtol=1e-4)
    assert y.dtype == m.dtype == v.dtype == np.float32
    dy = RNG.standard_normal(x.shape).astype(np.float32)
    gm, gv = RNG.standard_normal(5).astype(np.float32), RNG.standard_normal(5).astype(np.float32)
    for training, mean, var in [(True, m, v), (False, m_ref.astype(np.float32), v)]:
        got = nn_cpu.fused_batch_norm_grad(dy, x, scale, mean, var, gm, gv, 1e-3, training)
        args64 = [a.astype(np.float64) for a in (dy, x, scale, mean, var, gm, gv)]
        want = nn_cpu.fused_batch_norm_grad(*args64, 1e-3, training)
        assert len(got) == (3 if training else 5)
        for a, b in zip(got, want):
            assert a.dtype == np.float32
            np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-3 * np.abs(b).max())


@pytest.mark.parametrize(
    "build",
    [
        lambda a: hb.nn.max_pool(a, [1, 2, 3, 1], [1, 2, 3, 1], "VALID"),  # tiles, rows left over
        lambda a: hb.nn.max_pool(a, [1, 3, 3, 1], [1, 2, 2, 1], "SAME"),  # overlapping, padded
        lambda a: hb.nn.conv2d(a, np.linspace(-1, 1, 3 * 2 * 3 * 2).reshape(3, 2, 3, 2), 2, "SAME"),
        lambda a: hb.nn.conv2d(
            a, np.linspace(-1, 1, 2 * 2 * 3 * 4).reshape(2, 2, 3, 4), 1, "VALID"
        ),
    ],
    ids=["max-pool-tiles", "max-pool-overlap", "conv-stride2-same", "conv-valid"],
)
def test_float64_kernels_match_finite_differences(build):
    """Gradients through the compiled float64 kernels equal central finite differences (odd
    sizes, tiled and overlapping pooling windows, strided and VALID convolutions)."""
    x = RNG.standard_normal((3, 5, 7, 3))
    check_gradient(build, [x])
