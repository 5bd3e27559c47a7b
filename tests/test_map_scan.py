"""map_fn, scan, foldl, foldr: unrolled over a first dimension known when the graph is built, a
while_loop over one known only when it runs; values against numpy, gradients, structures."""

from __future__ import annotations

import numpy as np
import pytest

import hetbed as hb

XV = np.arange(12, dtype=np.float32).reshape(4, 3) / 5.0


def _run(fetches_fn, feed=None):
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [4, 3])
        fetches = fetches_fn(x)
        with hb.Session() as s:
            return s.run(fetches, {x: XV})


def test_map_fn_values_structures_and_gradient():
    def build(x):
        sq = hb.map_fn(lambda r: hb.reduce_sum(r * r), x)
        pair = hb.map_fn(lambda p: (p[0] * 2.0, p[1] + 1.0), (x, x))
        (g,) = hb.gradients(hb.reduce_sum(sq), [x])
        return sq, pair, g

    sq, (a, b), g = _run(build)
    np.testing.assert_allclose(sq, (XV * XV).sum(1), rtol=1e-6)
    np.testing.assert_allclose(a, XV * 2)
    np.testing.assert_allclose(b, XV + 1)
    np.testing.assert_allclose(g, 2 * XV, rtol=1e-6)


def test_scan_and_folds_match_numpy():
    def build(x):
        cum = hb.scan(lambda acc, r: acc + r, x)
        rev = hb.scan(lambda acc, r: acc * 0.5 + r, x, initializer=hb.zeros([3]), reverse=True)
        fl = hb.foldl(lambda acc, r: acc * 2.0 + r, x)
        fr = hb.foldr(lambda acc, r: acc * 2.0 + r, x, initializer=hb.ones([3]))
        return cum, rev, fl, fr

    cum, rev, fl, fr = _run(build)
    np.testing.assert_allclose(cum, np.cumsum(XV, 0), rtol=1e-6)
    want_rev, acc = np.zeros_like(XV), np.zeros(3, np.float32)
    for i in range(3, -1, -1):
        acc = acc * 0.5 + XV[i]
        want_rev[i] = acc
    np.testing.assert_allclose(rev, want_rev, rtol=1e-6)
    acc = XV[0]
    for r in XV[1:]:
        acc = acc * 2 + r
    np.testing.assert_allclose(fl, acc, rtol=1e-6)
    acc = np.ones(3, np.float32)
    for r in XV[::-1]:
        acc = acc * 2 + r
    np.testing.assert_allclose(fr, acc, rtol=1e-6)


def test_unknown_first_dimension_runs_a_while_loop():
    """A first dimension known only when the graph runs (a None batch): map_fn, scan (forward and
    reverse, with and without initializer), foldl and foldr run as while loops; values, an empty
    batch and gradients against numpy."""
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [None, 3])
        m = hb.map_fn(lambda r: r * 2.0 + hb.reduce_sum(r), x)
        pair = hb.map_fn(lambda p: (p[0] * p[1], p[0] - p[1]), (x, x * 3.0))
        sc = hb.scan(lambda a, r: a + r, x)
        sc2 = hb.scan(lambda a, r: a * r, x, initializer=hb.ones([3]), reverse=True)
        fl = hb.foldl(lambda a, r: a + hb.reduce_sum(r), x, initializer=hb.constant(0.0))
        fr = hb.foldr(lambda a, r: a * 2 + r, x)
        assert m.shape.as_list() == [None, 3] and sc.shape.as_list() == [None, 3]
        loss = hb.reduce_sum(m * m) + hb.reduce_sum(sc) + fl
        (gx,) = hb.gradients(loss, [x])
        with hb.Session() as s:
            got = s.run([m, pair, sc, sc2, fl, fr, gx], {x: XV})
            empty = s.run(m, {x: np.zeros((0, 3), np.float32)})
    want_m = XV * 2 + XV.sum(1, keepdims=True)
    np.testing.assert_allclose(got[0], want_m, rtol=1e-6)
    np.testing.assert_allclose(got[1][0], XV * XV * 3, rtol=1e-6)
    np.testing.assert_allclose(got[1][1], XV - XV * 3, rtol=1e-6)
    np.testing.assert_allclose(got[2], np.cumsum(XV, 0), rtol=1e-6)
    np.testing.assert_allclose(got[3], np.cumprod(XV[::-1], 0)[::-1], rtol=1e-6)
    assert got[4] == pytest.approx(XV.sum(), rel=1e-6)
    acc = XV[-1]
    for r in XV[-2::-1]:
        acc = acc * 2 + r
    np.testing.assert_allclose(got[5], acc, rtol=1e-6)
    n = len(XV)
    want_g = 4 * want_m + 2 * want_m.sum(1, keepdims=True) + (n - np.arange(n))[:, None] + 1
    np.testing.assert_allclose(got[6], want_g, rtol=1e-5)
    assert empty.shape == (0, 3)


def test_append_row_keeps_every_value_it_handed_out():
    """AppendRow grows one buffer in place: an earlier result keeps its rows, and a second
    append onto the same value copies instead of taking the row after it."""
    from hetbed.runtime.registry import apply_op

    def append(acc, row, first):
        return apply_op("AppendRow", [acc, row, hb.constant(first)]).outputs[0]

    with hb.Graph().as_default():
        r = [hb.constant(np.full(3, k, np.float32)) for k in range(4)]
        a1 = append(hb.zeros([0]), r[0], True)
        a2 = append(a1, r[1], False)
        a3 = append(a2, r[2], False)
        b3 = append(a2, r[3], False)  # a second append onto a2
        c4 = append(a3, r[3], False)
        with hb.Session() as s:
            got = s.run([a1, a2, a3, b3, c4])
    rows = np.arange(4, dtype=np.float32)[:, None] * np.ones(3, np.float32)
    np.testing.assert_array_equal(got[0], rows[:1])
    np.testing.assert_array_equal(got[1], rows[:2])
    np.testing.assert_array_equal(got[2], rows[:3])
    np.testing.assert_array_equal(got[3], rows[[0, 1, 3]])
    np.testing.assert_array_equal(got[4], rows[[0, 1, 2, 3]])
    with hb.Graph().as_default(), pytest.raises(hb.errors.InvalidArgumentError, match="onto rows"):
        x = hb.placeholder(hb.float32, [None])
        out = append(hb.zeros([1, 2]), x, False)
        with hb.Session() as s:
            s.run(out, {x: np.zeros(3, np.float32)})
