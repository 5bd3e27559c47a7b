"""Random ops (runtime/ops/random.py): seeding semantics, sample statistics, shapes and errors."""

import numpy as np
import pytest

import hetbed as hb


def _sample(build, seed=None, runs=1):
    """Build ``build()`` in a fresh graph (graph seed ``seed``) and run it ``runs`` times."""
    g = hb.Graph()
    with g.as_default():
        hb.set_random_seed(seed)
        t = build()
        with hb.Session(graph=g) as s:
            return [s.run(t) for _ in range(runs)]


def test_same_seeds_same_sequence_across_sessions():
    """Graph seed + op seed fix the sequence: two sessions (and two graphs) see the same draws."""
    build = lambda: hb.random_normal([50], seed=7)  # noqa: E731
    a = _sample(build, seed=3, runs=3)
    b = _sample(build, seed=3, runs=3)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    g = hb.Graph()
    with g.as_default():
        hb.set_random_seed(3)
        t = hb.random_normal([50], seed=7)
        with hb.Session() as s1, hb.Session() as s2:
            np.testing.assert_array_equal(s1.run(t), s2.run(t))


def test_successive_runs_differ():
    """One op run twice in one session gives new values each time."""
    a, b = _sample(lambda: hb.random_uniform([100], seed=1), seed=5, runs=2)
    assert not np.array_equal(a, b)


def test_ops_without_op_seed_differ():
    """Under one graph seed, two ops with no op seed draw different streams (but repeatably)."""

    def build():
        return [hb.random_normal([20]), hb.random_normal([20])]

    ((a, b),) = _sample(build, seed=11)
    ((c, d),) = _sample(build, seed=11)
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    np.testing.assert_array_equal(b, d)


def test_different_op_seeds_differ():
    """Changing the op seed changes the sequence."""
    (a,) = _sample(lambda: hb.random_normal([20], seed=1), seed=0)
    (b,) = _sample(lambda: hb.random_normal([20], seed=2), seed=0)
    assert not np.array_equal(a, b)


def test_normal_statistics():
    """100k float32 normal samples have the requested mean and stddev."""
    (x,) = _sample(lambda: hb.random_normal([100_000], mean=2.0, stddev=3.0, seed=1), seed=0)
    assert x.dtype == np.float32 and x.shape == (100_000,)
    assert abs(x.mean() - 2.0) < 0.05
    assert abs(x.std() - 3.0) < 0.05


def test_truncated_normal_bounds_and_statistics():
    """Truncated normal never strays beyond 2 stddev; its std is 0.8796 * stddev."""
    (x,) = _sample(lambda: hb.truncated_normal([100_000], mean=-1.0, stddev=0.5, seed=2), seed=0)
    assert x.dtype == np.float32
    assert np.all(np.abs(x + 1.0) <= 2 * 0.5 + 1e-6)
    assert abs(x.mean() + 1.0) < 0.01
    assert abs(x.std() - 0.87962566 * 0.5) < 0.01


def test_uniform_float_range_and_statistics():
    """Float uniform samples lie in [minval, maxval) with mean (min + max) / 2 and var w^2/12."""
    (x,) = _sample(lambda: hb.random_uniform([100_000], -2.0, 6.0, seed=3), seed=0)
    assert x.dtype == np.float32
    assert x.min() >= -2.0 and x.max() < 6.0
    assert abs(x.mean() - 2.0) < 0.05
    assert abs(x.var() - 64 / 12) < 0.1
    (u,) = _sample(lambda: hb.random_uniform([1000], dtype=hb.float64, seed=3), seed=0)
    assert u.dtype == np.float64 and 0.0 <= u.min() and u.max() < 1.0


def test_uniform_int_range_covers_all_values():
    """Integer uniform samples lie in [minval, maxval) and take every value there."""
    (x,) = _sample(lambda: hb.random_uniform([10_000], 3, 9, dtype=hb.int64, seed=4), seed=0)
    assert x.dtype == np.int64
    assert set(np.unique(x)) == set(range(3, 9))


def test_uniform_int_needs_maxval():
    """An integer uniform without maxval is an error naming the dtype."""
    with hb.Graph().as_default():
        with pytest.raises(hb.errors.InvalidArgumentError, match="maxval.*int32"):
            hb.random_uniform([3], dtype=hb.int32)


def test_bad_arguments():
    """minval >= maxval, an int dtype for normal and a negative dimension are rejected."""
    with hb.Graph().as_default():
        with pytest.raises(hb.errors.InvalidArgumentError, match="minval < maxval"):
            hb.random_uniform([3], 2.0, 1.0)
        with pytest.raises(hb.errors.InvalidArgumentError, match="float type.*int32"):
            hb.random_normal([3], dtype=hb.int32)
        with pytest.raises(hb.errors.InvalidArgumentError, match="negative"):
            hb.truncated_normal([3, -1])


def test_static_and_dynamic_shapes():
    """A list shape is static; a shape tensor (hb.shape(x)) gives its static part and runs."""
    g = hb.Graph()
    with g.as_default():
        a = hb.random_normal([2, 3])
        assert a.shape.as_list() == [2, 3] and a.dtype == hb.float32
        x = hb.placeholder(hb.float32, [None, 4])
        b = hb.random_uniform(hb.shape(x), seed=1)
        assert b.shape.as_list() == [None, 4]
        c = hb.truncated_normal(hb.constant([5, 2]), dtype=hb.float64)
        assert c.shape.as_list() == [5, 2] and c.dtype == hb.float64
        with hb.Session() as s:
            bv, cv = s.run([b, c], {x: np.zeros((7, 4), np.float32)})
    assert bv.shape == (7, 4) and cv.shape == (5, 2) and cv.dtype == np.float64


def test_tensor_mean_and_bounds():
    """mean/stddev and minval/maxval may be tensors; the samples then follow them."""
    g = hb.Graph()
    with g.as_default():
        hb.set_random_seed(0)
        m = hb.placeholder(hb.float32, [])
        n = hb.random_normal([50_000], mean=m, stddev=hb.constant(0.5), seed=1)
        u = hb.random_uniform([50_000], minval=m, maxval=hb.constant(10.0), seed=2)
        with hb.Session() as s:
            nv, uv = s.run([n, u], {m: 4.0})
    assert abs(nv.mean() - 4.0) < 0.02 and abs(nv.std() - 0.5) < 0.02
    assert uv.min() >= 4.0 and uv.max() < 10.0 and abs(uv.mean() - 7.0) < 0.05


def test_random_ops_are_not_differentiated():
    """A random op on the path only blocks gradients through itself: d(x * noise)/dx = noise."""
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, [4])
        noise = hb.random_normal([4], seed=1)
        y = hb.reduce_sum(x * noise)
        (gx,) = hb.gradients(y, [x])
        with hb.Session() as s:
            nv, gv = s.run([noise, gx], {x: np.ones(4, np.float32)})
    np.testing.assert_array_equal(nv, gv)


def test_cost_counts_output_bytes():
    """The cost rule charges the samples written and some FLOPs per sample."""
    with hb.Graph().as_default():
        t = hb.random_normal([10, 10])
        c = t.op.op_def.cost_fn(t.op, [], [(10, 10)])
    assert c.bytes_written == 400 and c.flops > 0
