"""map_fn, scan, foldl, foldr over a first dimension known when the graph is built (unrolled):
values against numpy, gradients through them, structures, and the error for an unknown size."""

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


def test_unknown_first_dimension_is_a_clear_error():
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [None, 3])
        for f in (
            lambda: hb.map_fn(lambda r: r, x),
            lambda: hb.scan(lambda a, r: a + r, x),
            lambda: hb.foldl(lambda a, r: a + r, x),
        ):
            with pytest.raises(hb.errors.InvalidArgumentError, match="first dimension.*known"):
                f()
