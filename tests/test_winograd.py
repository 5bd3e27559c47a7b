"""Winograd convolutions (runtime/ops/winograd.py): the Cook-Toom transforms against the
correlation they stand for, the three ops against float64 patch GEMMs, where the algorithm
applies, and how ``pick`` chooses between it and the patch GEMMs."""

from __future__ import annotations

import time

import numpy as np
import pytest

import hetbed as hb
from hetbed.runtime.ops import nn_cpu, winograd


@pytest.mark.parametrize("m,r", [(4, 5), (6, 3), (5, 4), (3, 6)])
def test_cook_toom_transforms_compute_the_correlation(m, r):
    """A^T [(G g) * (B^T d)] == the 1-D correlation y[i] = sum_k d[i + k] g[k], in float64."""
    at, g, bt = winograd.cook_toom(m, r)
    assert at.shape == (m, 8) and g.shape == (8, r) and bt.shape == (8, 8)
    rng = np.random.default_rng(m * 10 + r)
    for _ in range(5):
        d, f = rng.standard_normal(8), rng.standard_normal(r)
        want = np.array([d[i : i + r] @ f for i in range(m)])
        np.testing.assert_allclose(at @ ((g @ f) * (bt @ d)), want, rtol=1e-12, atol=1e-12)


def _ref(fn, *args):
    """fn on float64 copies of its float arrays: the patch GEMMs (Winograd runs float32 only)."""
    return fn(*[a.astype(np.float64) if isinstance(a, np.ndarray) else a for a in args])


def _close(got, want, scale=3e-5):
    """|got - want| <= scale * max|want| everywhere (Winograd's rounding is relative to the
    output's scale, not to each element)."""
    assert got.dtype == np.float32
    err = np.abs(got.astype(np.float64) - want).max()
    assert err <= scale * np.abs(want).max(), (err, np.abs(want).max())


CASES = [  # n, h, w, c, co, r, pads (before, after) for rows and columns
    (2, 14, 14, 32, 64, 5, ((2, 2), (2, 2))),  # the CNN benchmark's second layer, smaller batch
    (3, 13, 11, 9, 12, 5, ((2, 2), (2, 2))),  # tiles that do not divide the output
    (1, 12, 12, 16, 8, 3, ((1, 1), (1, 1))),  # 3x3 SAME, 6x6 output tiles
    (2, 20, 17, 8, 9, 3, ((0, 0), (0, 0))),  # 3x3 VALID
    (2, 15, 16, 8, 16, 5, ((1, 3), (2, 2))),  # uneven padding
    (1, 12, 30, 24, 8, 5, ((0, 0), (2, 2))),  # padding on one axis only
]


@pytest.mark.parametrize("case", CASES, ids=[f"c{i}" for i in range(len(CASES))])
def test_winograd_ops_match_patch_gemms(case, monkeypatch):
    n, h, w, c, co, r, (ph, pw) = case
    monkeypatch.setenv("HETBED_WINOGRAD", "1")
    rng = np.random.default_rng(sum(case[:6]))
    x = rng.standard_normal((n, h, w, c)).astype(np.float32)
    f = (rng.standard_normal((r, r, c, co)) / np.sqrt(r * r * c)).astype(np.float32)
    ho, wo = h + sum(ph) - r + 1, w + sum(pw) - r + 1
    assert winograd.applies(x, r, r, 1, 1, co, (ho, wo))
    dy = rng.standard_normal((n, ho, wo, co)).astype(np.float32)
    _close(
        nn_cpu.conv2d(x, f, 1, 1, ho, wo, ph, pw),
        _ref(nn_cpu.conv2d, x, f, 1, 1, ho, wo, ph, pw),
    )
    _close(
        nn_cpu.conv2d_backprop_input(x.shape, f, dy, 1, 1, ph, pw),
        _ref(nn_cpu.conv2d_backprop_input, x.shape, f, dy, 1, 1, ph, pw),
    )
    _close(
        nn_cpu.conv2d_backprop_filter(x, dy, r, r, 1, 1, ph, pw),
        _ref(nn_cpu.conv2d_backprop_filter, x, dy, r, r, 1, 1, ph, pw),
    )


def test_a_graph_trains_through_winograd_layers_as_through_patch_gemms(monkeypatch):
    """The gradients of a conv -> relu -> conv graph under HETBED_WINOGRAD=1 and =0 agree."""
    rng = np.random.default_rng(3)
    xv = rng.standard_normal((2, 12, 12, 8)).astype(np.float32)
    f1 = (rng.standard_normal((3, 3, 8, 16)) * 0.2).astype(np.float32)
    f2 = (rng.standard_normal((5, 5, 16, 8)) * 0.1).astype(np.float32)
    got = {}
    for mode in ("1", "0"):
        monkeypatch.setenv("HETBED_WINOGRAD", mode)
        with hb.Graph().as_default():
            x = hb.constant(xv)
            a, b = hb.Variable(f1), hb.Variable(f2)
            y = hb.nn.conv2d(hb.nn.relu(hb.nn.conv2d(x, a, [1, 1, 1, 1], "SAME")), b, 1, "SAME")
            loss = hb.reduce_sum(y * y)
            grads = hb.gradients(loss, [a, b, x])
            with hb.Session() as s:
                s.run(hb.global_variables_initializer())
                got[mode] = s.run([loss, *grads])
    for w, g in zip(got["1"], got["0"]):
        _close(np.asarray(w, np.float32), np.asarray(g, np.float64), 1e-4)


def test_where_winograd_applies(monkeypatch):
    monkeypatch.setenv("HETBED_WINOGRAD", "auto")
    x = np.zeros((1, 28, 28, 16), np.float32)
    assert winograd.applies(x, 3, 3, 1, 1, 16, (28, 28))  # 30x30 computed for 28x28: 1.15
    assert winograd.applies(x, 5, 5, 1, 1, 16, (14, 14))  # 16x16 for 14x14: 1.31
    assert not winograd.applies(x, 3, 3, 1, 1, 16, (7, 7))  # 12x12 for 7x7: 2.9
    assert not winograd.applies(x, 3, 3, 2, 2, 16, (14, 14))  # stride 2
    assert not winograd.applies(x, 7, 7, 1, 1, 16, (22, 22))  # no tile for 7x7 filters
    assert not winograd.applies(x, 3, 5, 1, 1, 16, (26, 24))  # not square
    assert not winograd.applies(x, 3, 3, 1, 1, 4, (28, 28))  # too few output channels
    assert not winograd.applies(x[..., :4], 3, 3, 1, 1, 16, (28, 28))  # too few input channels
    assert not winograd.applies(x.astype(np.float64), 3, 3, 1, 1, 16, (28, 28))
    monkeypatch.setenv("HETBED_WINOGRAD", "0")
    assert not winograd.applies(x, 3, 3, 1, 1, 16, (28, 28))


def test_pick_keeps_the_faster_algorithm_per_key(monkeypatch):
    monkeypatch.setenv("HETBED_WINOGRAD", "auto")
    calls = {"fast": 0, "gemm": 0}

    def slow_fast():
        calls["fast"] += 1
        time.sleep(0.004)
        return "winograd"

    def gemm():
        calls["gemm"] += 1
        return "gemm"

    key = ("test", object())
    assert winograd.pick(key, slow_fast, gemm) == "gemm"
    assert calls == {"fast": 1 + winograd._TRIALS, "gemm": winograd._TRIALS}
    assert winograd.choices()[key] == "gemm"
    for _ in range(3):
        assert winograd.pick(key, slow_fast, gemm) == "gemm"
    assert calls["fast"] == 1 + winograd._TRIALS  # decided: the slower one no longer runs

    def slow_gemm():
        time.sleep(0.004)
        return "gemm"

    key2 = ("test", object())
    assert winograd.pick(key2, lambda: "winograd", slow_gemm) == "winograd"
    assert winograd.choices()[key2] == "winograd"
    monkeypatch.setenv("HETBED_WINOGRAD", "0")  # forced: no measuring, whatever was decided
    assert winograd.pick(key2, lambda: "winograd", slow_gemm) == "gemm"
    monkeypatch.setenv("HETBED_WINOGRAD", "1")
    assert winograd.pick(key, slow_fast, gemm) == "winograd"
    for k in (key, key2):
        del winograd._CHOICE[k]
