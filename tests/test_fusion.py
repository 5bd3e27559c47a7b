"""Convolutions and MatMuls fused with the BiasAdd and Relu after them (runtime/fusion.py):
the same bits as the ops run one by one, only where nothing else can see the intermediate
values, and errors that still name the op that failed."""

from __future__ import annotations

import numpy as np
import pytest

import hetbed as hb
from hetbed.runtime import fusion
from hetbed.runtime.prepare import prune

OFF = hb.ConfigProto(
    graph_options=hb.GraphOptions(
        rewrite_options=hb.RewriterConfig(remapping=hb.RewriterConfig.OFF)
    )
)


def _chains(sess: hb.Session) -> set[str]:
    """Names of the ops whose nodes run fused in the session's prepared steps."""
    names = set()
    for plan in sess._plans.values():
        for node in plan.prepared.nodes:
            fn = node.fn
            if getattr(fn, "__qualname__", "").startswith(
                ("head_fn", "member_fn", "max_pool_grad_relu")
            ):
                names.add(node.op.name)
    return names


def _net(x_np, w_np, b_np, kind: str, relu: bool, dtype=np.float32):
    """(output, graph's fetches) of head -> BiasAdd [-> Relu] on constants fed as placeholders."""
    x = hb.placeholder(dtype, x_np.shape, name="x")
    w = hb.Variable(w_np.astype(dtype), name="w")
    b = hb.Variable(b_np.astype(dtype), name="b")
    if kind == "conv":
        h = hb.nn.conv2d(x, w, strides=[1, 1, 1, 1], padding="SAME", name="head")
    else:
        h = hb.matmul(x, w, name="head")
    y = hb.nn.bias_add(h, b, name="bias")
    if relu:
        y = hb.nn.relu(y, name="act")
    return x, h, y


CASES = [
    ("conv", (4, 9, 9, 8), (3, 3, 8, 16)),  # Winograd F(6x6, 3x3)
    ("conv", (2, 12, 12, 1), (5, 5, 1, 8)),  # patch GEMMs (one input channel)
    ("conv", (3, 7, 7, 16), (1, 1, 16, 8)),  # 1x1: one GEMM
    ("matmul", (33, 70), (70, 24)),
]


@pytest.mark.parametrize("relu", [True, False])
@pytest.mark.parametrize("kind,xs,ws", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_equals_separate_ops(kind, xs, ws, relu, dtype):
    rng = np.random.default_rng(3)
    x_np = rng.standard_normal(xs).astype(dtype)
    x_np.flat[::17] = np.nan  # NaN goes through the ReLU as NaN
    w_np = rng.standard_normal(ws)
    b_np = rng.standard_normal(ws[-1])
    out = {}
    for name, config in (("fused", None), ("plain", OFF)):
        g = hb.Graph()
        with g.as_default():
            x, _h, y = _net(x_np, w_np, b_np, kind, relu, dtype)
            with hb.Session(graph=g, config=config) as sess:
                sess.run(hb.global_variables_initializer())
                out[name] = sess.run(y, {x: x_np})
                fused = _chains(sess)
        expect = {"head", "bias"} | ({"act"} if relu else set())
        assert fused == (expect if name == "fused" else set())
    np.testing.assert_array_equal(out["fused"], out["plain"])  # bit for bit, NaNs in place
    # and against numpy
    if kind == "matmul":
        ref = x_np.astype(np.float64) @ w_np + b_np
        if relu:
            ref = np.where(np.isnan(ref) | (ref > 0), ref, 0)
        tol = 1e-4 if dtype == np.float32 else 1e-10
        np.testing.assert_allclose(out["fused"], ref, rtol=tol, atol=tol)


def test_training_is_bit_identical_and_gradients_flow():
    """A small CNN trained three steps with and without fusion: the same losses and weights."""
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((8, 12, 12, 3)).astype(np.float32)
    y_np = rng.integers(0, 4, 8).astype(np.int32)
    w1 = (rng.standard_normal((3, 3, 3, 8)) * 0.3).astype(np.float32)
    w2 = (rng.standard_normal((12 * 12 * 8, 4)) * 0.05).astype(np.float32)
    result = {}
    for name, config in (("fused", None), ("plain", OFF)):
        g = hb.Graph()
        with g.as_default():
            x = hb.placeholder(hb.float32, [None, 12, 12, 3])
            y = hb.placeholder(hb.int32, [None])
            v1, b1 = hb.Variable(w1), hb.Variable(np.full(8, 0.1, np.float32))
            v2, b2 = hb.Variable(w2), hb.Variable(np.zeros(4, np.float32))
            h = hb.nn.relu(hb.nn.bias_add(hb.nn.conv2d(x, v1, [1, 1, 1, 1], "SAME"), b1))
            logits = hb.nn.bias_add(hb.matmul(hb.reshape(h, [-1, 12 * 12 * 8]), v2), b2)
            loss = hb.reduce_mean(
                hb.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
            )
            train = hb.train.GradientDescentOptimizer(0.1).minimize(loss)
            with hb.Session(graph=g, config=config) as sess:
                sess.run(hb.global_variables_initializer())
                losses = [sess.run([loss, train], {x: x_np, y: y_np})[0] for _ in range(3)]
                result[name] = (losses, sess.run([v1, b1, v2, b2]))
                if name == "fused":
                    assert len(_chains(sess)) == 5  # conv, its bias add and relu; matmul, bias
    assert result["fused"][0] == result["plain"][0]
    assert result["fused"][0][2] < result["fused"][0][0]  # it learns
    for a, b in zip(result["fused"][1], result["plain"][1]):
        np.testing.assert_array_equal(a, b)


class _Cpu:
    kernel_type = "cpu"
    xp = np


def _plan(fetches, fed=(), device=None):
    order = prune([f.op if isinstance(f, hb.Tensor) else f for f in fetches], set(fed))
    dev = device or _Cpu()
    names = {}
    for op, chain in fusion.plan(
        order, fetches, list(fed), lambda op: dev, lambda op: list(op.inputs)
    ).items():
        names[op.name] = chain.head.name
    return names


def test_plan_fuses_only_what_nothing_else_sees():
    x_np = np.ones((2, 6, 6, 4), np.float32)
    with hb.Graph().as_default():
        x, h, y = _net(x_np, np.ones((3, 3, 4, 4)), np.ones(4), "conv", relu=True)
        assert _plan([y], [x]) == {"head": "head", "bias": "head", "act": "head"}
        # the head's output fetched: nothing fused; the BiasAdd's fetched: no Relu in the chain
        assert _plan([y, h], [x]) == {}
        assert _plan([y, y.op.inputs[0]], [x]) == {"head": "head", "bias": "head"}
        # a second consumer of the head's output
        z = h * 2.0
        assert _plan([y, z], [x]) == {}
        # a simulated (timed) device or a GPU: never
        sim = type("Sim", (), {"kernel_type": "cpu", "xp": np, "timed": True})()
        assert _plan([y], [x], sim) == {}
        gpu = type("Gpu", (), {"kernel_type": "gpu", "xp": np})()
        assert _plan([y], [x], gpu) == {}
    for bias_first in (True, False):
        with hb.Graph().as_default() as g:
            # a bias computed after the head in the step's order fuses too: the BiasAdd runs
            # the fused kernel once it has the bias (the head only hands its inputs on)
            x = hb.placeholder(hb.float32, [2, 3], name="x")
            w = hb.constant(np.arange(9, dtype=np.float32).reshape(3, 3))
            if bias_first:
                b = hb.reduce_sum(x, axis=0, name="bias_value")
            h = hb.matmul(x, w, name="head")
            if not bias_first:
                b = hb.reduce_sum(x, axis=0, name="bias_value")
            y = hb.nn.relu(hb.nn.bias_add(h, b, name="bias"), name="act")
            assert _plan([y], [x]) == {"head": "head", "bias": "head", "act": "head"}
            xv = np.array([[1, -2, 3], [-4, 5, -6]], np.float32)
            with hb.Session(graph=g) as sess:
                got = sess.run(y, {x: xv})
            np.testing.assert_array_equal(got, np.maximum(xv @ w_value() + xv.sum(0), 0))


def w_value():
    return np.arange(9, dtype=np.float32).reshape(3, 3)


def test_bias_that_does_not_match_fails_at_the_bias_add_and_loses_nothing():
    """A bias of the wrong length (shape unknown to the graph) reaches the fused head at run
    time: the head hands its plain product on and the BiasAdd raises its own error."""
    with hb.Graph().as_default() as g:
        x = hb.placeholder(hb.float32, [4, 3])
        b = hb.placeholder(hb.float32, [None])
        w = hb.Variable(np.ones((3, 5), np.float32))
        y = hb.nn.relu(hb.nn.bias_add(hb.matmul(x, w, name="head"), b, name="the_bias"))
        with hb.Session(graph=g) as sess:
            sess.run(hb.global_variables_initializer())
            ok = sess.run(y, {x: np.ones((4, 3), np.float32), b: np.arange(5, dtype=np.float32)})
            np.testing.assert_array_equal(ok, np.tile(3 + np.arange(5, dtype=np.float32), (4, 1)))
            assert {"head", "the_bias"} <= _chains(sess)
            with pytest.raises(hb.errors.InvalidArgumentError, match="the_bias"):
                sess.run(y, {x: np.ones((4, 3), np.float32), b: np.ones(7, np.float32)})
            np.testing.assert_array_equal(sess.run(w), np.ones((3, 5), np.float32))


def test_switches_turn_it_off(monkeypatch):
    assert fusion.enabled(None)
    assert not fusion.enabled(OFF)
    cfg = hb.ConfigProto()  # as a TF1 program sets it, field by field
    assert fusion.enabled(cfg)
    cfg.graph_options.rewrite_options.remapping = hb.RewriterConfig.OFF
    with hb.Graph().as_default() as g:
        x, _h, y = _net(np.ones((2, 3), np.float32), np.ones((3, 4)), np.ones(4), "matmul", True)
        with hb.Session(graph=g, config=cfg) as sess:
            sess.run(hb.global_variables_initializer())
            np.testing.assert_array_equal(sess.run(y, {x: np.ones((2, 3), np.float32)}), 4.0)
            assert not _chains(sess)
    monkeypatch.setenv("HETBED_FUSION", "0")
    assert not fusion.enabled(None)


def test_large_bias_gradient_and_sgd_update_match_numpy():
    """The bias gradient of a large tensor sums in fixed parts (the same bits on 1 or 2
    threads, numpy's sum within rounding); SGD's one-pass update equals numpy's two passes."""
    from hetbed.runtime.ops import intraop, nn_cpu

    rng = np.random.default_rng(5)
    g = rng.standard_normal((64, 28, 28, 32)).astype(np.float32)
    ref = g.reshape(-1, 32).astype(np.float64).sum(axis=0)
    got = nn_cpu.bias_add_grad(g)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-3)
    saved = intraop.THREADS
    try:
        intraop.THREADS = 1
        one = nn_cpu.bias_add_grad(g)
    finally:
        intraop.THREADS = saved
    np.testing.assert_array_equal(one, got)
    small = g[:2, :3]
    np.testing.assert_array_equal(
        nn_cpu.bias_add_grad(small), small.reshape(-1, 32).sum(axis=0)
    )  # small: numpy's order exactly
    var = rng.standard_normal(300_000).astype(np.float32)
    grad = rng.standard_normal(300_000).astype(np.float32)
    lr = np.float32(0.037)
    expect = var - grad * lr
    with hb.Graph().as_default(), hb.Session() as sess:
        v = hb.Variable(var)
        step = hb.train.GradientDescentOptimizer(lr).apply_gradients([(hb.constant(grad), v)])
        sess.run(hb.global_variables_initializer())
        sess.run(step)
        np.testing.assert_array_equal(sess.run(v), expect)


@pytest.mark.parametrize("window,stride", [(2, 2), (3, 2)])  # tiles; overlapping windows
def test_max_pool_grad_fused_with_relu_grad(window, stride):
    """relu -> max_pool's backward pass: MaxPoolGrad and ReluGrad fused give the same bits as
    run one by one (NaN and ties included)."""
    rng = np.random.default_rng(11)
    x_np = rng.standard_normal((3, 8, 8, 5)).astype(np.float32)
    x_np[0, :2, :2, 0] = 0.5  # a tie inside one window
    x_np[1, 3, 3, 1] = np.nan
    side = (8 - window) // stride + 1
    w_np = rng.standard_normal((3, side, side, 5)).astype(np.float32)
    out = {}
    for name, config in (("fused", None), ("plain", OFF)):
        g = hb.Graph()
        with g.as_default():
            x = hb.placeholder(hb.float32, x_np.shape)
            r = hb.nn.relu(x)
            p = hb.nn.max_pool(r, [1, window, window, 1], [1, stride, stride, 1], "VALID")
            (dx,) = hb.gradients(hb.reduce_sum(p * hb.constant(w_np)), [x])
            with hb.Session(graph=g, config=config) as sess:
                out[name] = sess.run(dx, {x: x_np})
                types = {n for n in _chains(sess)}
        if name == "fused":
            assert any("MaxPoolGrad" in t for t in types) and any("Relu_grad" in t for t in types)
        else:
            assert not types
    np.testing.assert_array_equal(out["fused"], out["plain"])
    assert np.count_nonzero(out["fused"]) > 0


@pytest.mark.parametrize("r,pad,side", [(5, "SAME", 12), (3, "SAME", 12), (3, "VALID", 14)])
def test_a_convolutions_two_gradients_from_one_pass(monkeypatch, r, pad, side):
    """Conv2DBackpropFilter and Conv2DBackpropInput of one output gradient run as a pair (the
    first computes both, sharing the output gradient's Winograd transform; the input gradient by
    the adjoint of the forward algorithm): both equal the patch-GEMM gradients within Winograd's
    rounding, and the second op takes the head's result (nothing left pending)."""
    from hetbed.runtime.ops import winograd

    calls = []
    both = winograd.conv2d_backprop_both
    monkeypatch.setattr(winograd, "conv2d_backprop_both", lambda *a: calls.append(1) or both(*a))
    rng = np.random.default_rng(21)
    x_np = rng.standard_normal((3, side, side, 8)).astype(np.float32)
    f_np = (rng.standard_normal((r, r, 8, 12)) * 0.2).astype(np.float32)
    out = {}
    for name, mode, config in (("pair", "1", None), ("gemm", "0", OFF)):
        monkeypatch.setenv("HETBED_WINOGRAD", mode)
        g = hb.Graph()
        with g.as_default():
            x = hb.placeholder(hb.float32, x_np.shape)
            f = hb.Variable(f_np)
            y = hb.nn.conv2d(x, f, [1, 1, 1, 1], pad)
            w = hb.constant(rng.standard_normal(y.shape.as_list()).astype(np.float32))
            dx, df = hb.gradients(hb.reduce_sum(y * w), [x, f])
            with hb.Session(graph=g, config=config) as sess:
                sess.run(hb.global_variables_initializer())
                out[name] = sess.run([dx, df], {x: x_np})
                fused = _chains(sess)
                chain = next(
                    (n.fn for p in sess._plans.values() for n in p.prepared.nodes
                     if "pair" in getattr(n.fn, "__qualname__", "")),
                    None,
                )  # fmt: skip
        if name == "pair":
            assert any("BackpropFilter" in n for n in fused) and any(
                "BackpropInput" in n for n in fused
            )
            assert chain is not None and calls == [1]  # one shared pass for both
        rng = np.random.default_rng(21)  # the same w for the second graph
        rng.standard_normal(x_np.shape), rng.standard_normal(f_np.shape)
    for got, ref in zip(out["pair"], out["gemm"]):
        scale = np.abs(ref).max()
        np.testing.assert_allclose(got, ref, rtol=0, atol=2e-5 * scale)
    assert winograd.mode() == "off"  # (the last setting; the pair ran with Winograd on)


def test_pairs_need_one_output_gradient_and_the_same_geometry():
    """A convolution's two gradients pair up (one head for both); two gradient ops of one
    output gradient whose padding differs do not."""
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [2, 8, 8, 8], name="x")
        f = hb.Variable(np.ones((3, 3, 8, 8), np.float32))
        y = hb.nn.conv2d(x, f, [1, 1, 1, 1], "SAME", name="conv")
        dx, df = hb.gradients(hb.reduce_sum(y), [x, f])
        names = _plan([dx, df], [x])
        pair = {n: h for n, h in names.items() if "Backprop" in n}
        assert len(pair) == 2 and len(set(pair.values())) == 1  # one head for both
        dy = hb.placeholder(hb.float32, [2, 8, 8, 8], name="dy")
        other = hb.nn.conv2d_backprop_input([2, 10, 10, 8], f, dy, [1, 1, 1, 1], "VALID")
        lone = hb.nn.conv2d_backprop_filter(x, [3, 3, 8, 8], dy, [1, 1, 1, 1], "SAME")
        names = _plan([other, lone], [x, dy])
        assert not names  # padding differs: each runs on its own


def test_a_small_sgd_update_needs_no_compiled_kernel():
    """A small variable's SGD update runs as numpy's two passes, with the same rounding, so a
    process training only small variables never imports numba (0.35-0.7 s, paid inside the
    first step); a large one's runs the compiled pass (the test above)."""
    import subprocess
    import sys

    program = r"""
import sys
import numpy as np
import hetbed as hb
var = np.arange(1, 101, dtype=np.float32) / 7
grad = np.linspace(-1, 1, 100).astype(np.float32)
lr = np.float32(0.3)
with hb.Graph().as_default():
    v = hb.Variable(var)
    step = hb.train.GradientDescentOptimizer(lr).apply_gradients([(hb.constant(grad), v)])
    with hb.Session() as sess:
        sess.run(hb.global_variables_initializer())
        sess.run(step)
        got = sess.run(v)
print(int("numba" in sys.modules), int(np.array_equal(got, var - grad * lr)))
"""
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "1"]
