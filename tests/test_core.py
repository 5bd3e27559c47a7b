"""Graph building, sessions and the executor: values against numpy."""

import numpy as np
import pytest

import hetbed as hb


def test_feed_fetch_matches_numpy():
    """A small graph fed from a placeholder computes what numpy computes."""
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, [None, 3], name="x")
        w = hb.constant(np.arange(6, dtype=np.float32).reshape(3, 2))
        y = hb.reduce_sum(hb.matmul(x, w) * 2.0 + 1.0, axis=1)
        xv = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
        with hb.Session() as s:
            got = s.run(y, {x: xv})
    np.testing.assert_allclose(got, ((xv @ w_np()) * 2 + 1).sum(1), rtol=1e-6)


def w_np():
    return np.arange(6, dtype=np.float32).reshape(3, 2)


def test_nested_fetches_keep_structure():
    """Lists, tuples and dicts of fetches come back in the same structure."""
    with hb.Graph().as_default():
        a = hb.constant(1.0)
        b = hb.constant([2, 3])
        with hb.Session() as s:
            out = s.run({"a": a, "pair": (a, [b, a])})
    assert out["a"] == 1.0
    assert isinstance(out["pair"], tuple)
    np.testing.assert_array_equal(out["pair"][1][0], [2, 3])


def test_variable_update_and_uninitialized_error():
    """Reading an uninitialized variable names it; after init, assign_add accumulates."""
    with hb.Graph().as_default():
        v = hb.Variable(hb.zeros_like(hb.constant([0.0, 0.0])), name="acc")
        inc = hb.assign_add(v, [1.0, 2.0])
        with hb.Session() as s:
            with pytest.raises(hb.errors.FailedPreconditionError, match="acc"):
                s.run(v)
            s.run(hb.global_variables_initializer())
            s.run(inc)
            first = s.run(v)
            s.run(inc)
            np.testing.assert_array_equal(s.run(v), [2.0, 4.0])
            np.testing.assert_array_equal(first, [1.0, 2.0])  # fetched values are copies


def test_missing_placeholder_names_it():
    """Running without feeding a needed placeholder is a clear error; the session stays usable."""
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [2], name="needed")
        y = x * 2.0
        with hb.Session() as s:
            with pytest.raises(hb.errors.InvalidArgumentError, match="needed"):
                s.run(y)
            np.testing.assert_array_equal(s.run(y, {x: [1, 2]}), [2, 4])
