"""Intra-op threads (runtime/ops/intraop.py): split GEMMs and Winograd blocks against numpy and
against themselves in turn, the same bits whichever thread runs which block, and numpy's BLAS
held at one thread during a step that splits and given its count back after."""

from __future__ import annotations

import numpy as np
import pytest

import hetbed as hb
from hetbed.runtime.ops import intraop, winograd

RNG = np.random.default_rng(17)

needs_blas = pytest.mark.skipif(
    not intraop.numpy_blas(), reason="no single BLAS library whose threads can be set"
)


@pytest.fixture
def small_splits(monkeypatch):
    """Three threads, and GEMMs split from a few thousand multiply-adds on."""
    monkeypatch.setattr(intraop, "THREADS", 3)
    monkeypatch.setattr(intraop, "_MATMUL_SPLIT_MACS", 1 << 10)
    monkeypatch.setattr(intraop, "_MIN_BLOCK_ROWS", 2)


MATMULS = [  # a's shape, b's shape, transposes
    ((40, 33), (33, 7), ""),  # split by rows
    ((6, 50), (50, 90), ""),  # by columns
    ((90, 20), (31, 20), "b"),  # b transposed (a view)
    ((20, 70), (20, 13), "a"),  # a transposed
    ((5, 12, 9), (5, 9, 11), ""),  # a stack
    ((4, 1, 12, 9), (3, 9, 10), ""),  # stacks broadcast against each other
    ((7, 12, 9), (9, 10), ""),  # a stack times one matrix
]


@needs_blas
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
@pytest.mark.parametrize("case", MATMULS, ids=[str(i) for i in range(len(MATMULS))])
def test_split_matmul_equals_numpy(case, dtype, small_splits):
    sa, sb, tr = case
    a = RNG.standard_normal(sa).astype(dtype)
    b = RNG.standard_normal(sb).astype(dtype)
    if "a" in tr:
        a = a.T
    if "b" in tr:
        b = b.T
    got = intraop.matmul(a, b)
    want = np.matmul(a.astype(np.complex128), b.astype(np.complex128))
    assert got.dtype == dtype and got.shape == want.shape
    tol = 1e-5 if np.dtype(dtype).itemsize <= 8 and dtype != np.float64 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())
    for _ in range(3):  # each block is one GEMM on one thread: the same bits every time
        np.testing.assert_array_equal(intraop.matmul(a, b), got)


def test_small_and_integer_matmuls_go_straight_to_numpy(monkeypatch):
    monkeypatch.setattr(intraop, "THREADS", 3)
    calls = []
    monkeypatch.setattr(intraop, "run_blocks", lambda *a: calls.append(a))
    a, b = RNG.integers(-5, 5, (300, 300)), RNG.integers(-5, 5, (300, 300))
    np.testing.assert_array_equal(intraop.matmul(a, b), a @ b)
    x = RNG.standard_normal((8, 8)).astype(np.float32)
    np.testing.assert_array_equal(intraop.matmul(x, x), x @ x)
    assert calls == []


@needs_blas
@pytest.mark.parametrize(
    "case",
    [
        (3, 14, 14, 16, 24, 5, ((2, 2), (2, 2))),
        (2, 13, 11, 9, 12, 3, ((1, 1), (1, 1))),
    ],
)
def test_winograd_blocks_on_threads_equal_blocks_in_turn(case, monkeypatch):
    """Winograd's three ops with tiny blocks on three threads (and the filter gradient's partial
    sums held in chunks of several blocks) equal one thread's results within rounding, and give
    the same bits on every run."""
    n, h, w, c, co, r, (ph, pw) = case
    x = RNG.standard_normal((n, h, w, c)).astype(np.float32)
    f = (RNG.standard_normal((r, r, c, co)) / np.sqrt(r * r * c)).astype(np.float32)
    ho, wo = h + sum(ph) - r + 1, w + sum(pw) - r + 1
    dy = RNG.standard_normal((n, ho, wo, co)).astype(np.float32)

    def run():
        return (
            winograd.conv2d(x, f, ho, wo, ph, pw),
            winograd.conv2d_backprop_input(x.shape, f, dy, ph, pw),
            winograd.conv2d_backprop_filter(x, dy, r, ph, pw),
        )

    monkeypatch.setattr(intraop, "THREADS", 1)
    in_turn = run()
    monkeypatch.setattr(intraop, "THREADS", 3)
    monkeypatch.setattr(winograd, "_THREAD_BLOCK_ELEMS", 64 * (c + co) * 5)  # 5 tiles a block
    monkeypatch.setattr(winograd, "_PARTS_ELEMS", 64 * c * co * 3)  # at most 3 partial sums
    step, nblocks, threads = winograd._blocks(n * -(-ho // 4) * -(-wo // 4), 64 * (c + co))
    assert step == 5 and nblocks > 3 and threads == 3
    threaded = run()
    for a, b in zip(threaded, in_turn):
        scale = np.abs(b).max()
        np.testing.assert_allclose(a, b, rtol=0, atol=3e-5 * scale)  # as in test_winograd
    for _ in range(2):
        for a, b in zip(run(), threaded):
            np.testing.assert_array_equal(a, b)


@needs_blas
def test_a_step_that_splits_holds_blas_at_one_thread_and_gives_it_back(monkeypatch):
    """During a step with a MatMul numpy's BLAS runs on one thread (a py_func inside the step
    reads it); a step of elementwise ops leaves it alone; the count comes back after both, also
    when the step fails."""
    monkeypatch.setattr(intraop, "THREADS", None)
    blas = intraop.numpy_blas()
    before = blas.get_num_threads()
    if before < 2 or intraop.cpus() < 2:
        pytest.skip("BLAS or this process has a single thread")
    seen = []

    def probe(v):
        seen.append(blas.get_num_threads())
        return v

    a = RNG.standard_normal((64, 64)).astype(np.float32)
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [64, 64])
        mm = hb.py_func(probe, [hb.matmul(x, x)], hb.float32)
        ew = hb.py_func(probe, [x * 2.0], hb.float32)
        bad = hb.matmul(hb.py_func(lambda v: v[:, :3], [x], hb.float32), x)
        with hb.Session() as s:
            np.testing.assert_allclose(s.run(mm, {x: a}), a @ a, rtol=1e-4, atol=1e-4)
            s.run(ew, {x: a})
            with pytest.raises(hb.errors.InvalidArgumentError):
                s.run(bad, {x: a})
    assert seen == [1, before]
    assert blas.get_num_threads() == before


def test_splitting_plans_are_marked():
    """A CPU step with a convolution is marked as splitting its GEMMs; one of elementwise ops
    is not."""
    with hb.Graph().as_default() as g:
        x = hb.placeholder(hb.float32, [4, 8, 8, 3])
        y = hb.nn.conv2d(x, hb.ones([3, 3, 3, 4]), 1, "SAME")
        z = x * 2.0
        with hb.Session(graph=g) as s:
            assert s._plan([y], [x]).prepared.splits_gemms
            assert not s._plan([z], [x]).prepared.splits_gemms


@pytest.mark.parametrize(
    "env,want",
    [
        ({}, None),
        ({"HETBED_INTRA_OP_THREADS": "auto"}, None),
        ({"HETBED_INTRA_OP_THREADS": "3"}, 3),
        ({"HETBED_INTRA_OP_THREADS": "0"}, 1),
        ({"HETBED_CONV_THREADS": "1"}, 1),  # the older name
        ({"HETBED_INTRA_OP_THREADS": "2", "HETBED_CONV_THREADS": "1"}, 2),
    ],
)
def test_thread_count_from_the_environment(env, want, monkeypatch):
    monkeypatch.delenv("HETBED_INTRA_OP_THREADS", raising=False)
    monkeypatch.delenv("HETBED_CONV_THREADS", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert intraop._threads_from_env() == want


def test_a_bad_thread_count_warns_and_takes_auto(monkeypatch):
    monkeypatch.setenv("HETBED_INTRA_OP_THREADS", "many")
    with pytest.warns(UserWarning, match="HETBED_INTRA_OP_THREADS='many'"):
        assert intraop._threads_from_env() is None


@needs_blas
def test_elementwise_and_pooling_loops_split_by_rows_give_the_same_bits(monkeypatch):
    """ReLU, its gradient, bias add, max pooling and its gradient (windows that tile the input
    and overlapping SAME ones) split over three threads equal the loops run whole, bit for bit."""
    from hetbed.runtime.ops import nn_cpu

    x = RNG.standard_normal((5, 9, 8, 6)).astype(np.float32)
    x[0, 0, 0, 0] = np.nan
    g = RNG.standard_normal((5, 9, 8, 6)).astype(np.float32)
    b = RNG.standard_normal(6).astype(np.float32)

    def run():
        out = [nn_cpu.relu(x), nn_cpu.relu_grad(g, x), nn_cpu.bias_add(x, b)]
        for k, s, ho, wo, pads in (
            (2, 2, 4, 4, ((0, 0), (0, 0))),  # tiles (VALID, a row left over)
            (3, 2, 5, 4, ((1, 1), (0, 1))),  # overlapping, padded
        ):
            y = nn_cpu.max_pool(x, k, k, s, s, ho, wo, *pads)
            gy = RNG.standard_normal(y.shape).astype(np.float32)
            out += [y, nn_cpu.max_pool_grad(x, y, gy, k, k, s, s, *pads)]
        return out

    state = RNG.bit_generator.state
    whole = run()
    monkeypatch.setattr(intraop, "THREADS", 3)
    monkeypatch.setattr(intraop, "_SPLIT_ELEMS", 1)
    calls = []
    real = intraop.run_blocks
    monkeypatch.setattr(intraop, "run_blocks", lambda *a: calls.append(a[0]) or real(*a))
    RNG.bit_generator.state = state
    split = run()
    assert len(calls) == len(whole) and all(n == 3 for n in calls)
    for a, b_ in zip(split, whole):
        np.testing.assert_array_equal(a, b_)


@needs_blas
@pytest.mark.parametrize(
    "make",
    [
        lambda: hb.train.GradientDescentOptimizer(0.1),
        lambda: hb.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True),
        lambda: hb.train.AdamOptimizer(0.01),
        lambda: hb.train.RMSPropOptimizer(0.01, momentum=0.5),
    ],
    ids=["sgd", "nesterov", "adam", "rmsprop"],
)
def test_dense_updates_split_by_blocks_over_threads_give_the_same_bits(make, monkeypatch):
    """A dense optimizer update in blocks of 7 elements on three threads equals the same update
    block after block on one, bit for bit, over three steps (slots included)."""
    from hetbed.runtime.train import training_ops

    monkeypatch.setattr(training_ops, "BLOCK", 7)
    x0 = RNG.standard_normal(50).astype(np.float32)
    gs = [RNG.standard_normal(50).astype(np.float32) for _ in range(3)]

    def run(threads):
        monkeypatch.setattr(intraop, "THREADS", threads)
        with hb.Graph().as_default():
            v = hb.Variable(x0)
            g = hb.placeholder(hb.float32, [50])
            train = make().apply_gradients([(g, v)])
            with hb.Session() as s:
                s.run(hb.global_variables_initializer())
                for gv in gs:
                    s.run(train, {g: gv})
                return s.run(v)

    calls = []
    real = intraop.run_blocks
    monkeypatch.setattr(intraop, "run_blocks", lambda n, t, *a: calls.append(t) or real(n, t, *a))
    one = run(1)
    three = run(3)
    assert 3 in calls and not np.array_equal(one, x0)
    np.testing.assert_array_equal(three, one)


@needs_blas
def test_the_blas_count_comes_back_whichever_thread_releases_it_last():
    """A step on one thread holds BLAS at one thread, a step on another joins and releases
    last while the first thread still lives (a server's handlers): the count comes back
    (threadpoolctl's own setter obeys only the first thread that used it)."""
    import threading

    get = intraop._blas_threads()[0]
    before = get()
    if before < 2:
        pytest.skip("BLAS has a single thread")
    held, go, done = threading.Event(), threading.Event(), threading.Event()

    def first():
        intraop.hold_one_blas_thread()
        held.set()
        go.wait(10)
        intraop.release_blas()
        done.wait(10)  # alive until the end

    t = threading.Thread(target=first)
    t.start()
    try:
        held.wait(10)
        assert get() == 1
        intraop.hold_one_blas_thread()
        go.set()
        while intraop._blas_users > 1:
            pass
        assert get() == 1  # still held by this thread
        intraop.release_blas()
        assert get() == before
    finally:
        go.set()
        done.set()
        t.join(10)
