"""tf.Assert and TF1's assert_* helpers, and tf.case(exclusive=True): a false condition fails
the step with InvalidArgumentError printing the message and the values; a true one lets the step
run; the same programs behave alike under TensorFlow."""

from __future__ import annotations

import numpy as np
import pytest

import hetbed as hb
import hetbed.compat.v1 as hbtf


def _run(fetch, feed=None):
    with hb.Session() as s:
        return s.run(fetch, feed)


def test_assert_passes_or_fails_with_the_message_and_the_values():
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [None])
        check = hb.Assert(hb.reduce_all(x > 0), ["x must be positive:", x], summarize=2)
        with hb.control_dependencies([check]):
            y = hb.identity(x * 2)
        np.testing.assert_array_equal(_run(y, {x: [1.0, 2.0]}), [2.0, 4.0])
        with pytest.raises(hb.errors.InvalidArgumentError) as e:
            _run(y, {x: [1.0, -2.0, 3.0]})
        assert "assertion failed: [x must be positive:] [1.0 -2.0...]" in str(e.value)
        with pytest.raises(
            hb.errors.InvalidArgumentError,
            match="the condition must be a scalar bool, got bool of shape \\(\\?,\\)",
        ):
            hb.Assert(x > 0, ["vector condition"])


@pytest.mark.parametrize(
    "fn, x, y, holds",
    [
        ("assert_equal", [1, 2], [1, 2], True),
        ("assert_equal", [1, 2], [1, 3], False),
        ("assert_none_equal", [1, 2], [3, 4], True),
        ("assert_none_equal", [1, 2], [3, 2], False),
        ("assert_less", [1, 2], [2, 3], True),
        ("assert_less", [1, 3], [2, 3], False),
        ("assert_less_equal", [1, 3], [2, 3], True),
        ("assert_greater", [2, 3], [1, 2], True),
        ("assert_greater", [2, 2], [1, 2], False),
        ("assert_greater_equal", [2, 2], [1, 2], True),
        ("assert_greater_equal", [0, 2], [1, 2], False),
    ],
)
def test_comparison_asserts(fn, x, y, holds):
    with hb.Graph().as_default():
        xv, yv = hb.constant(np.array(x, np.float32)), hb.constant(np.array(y, np.float32))
        op = getattr(hb, fn)(xv, yv, message="checked")
        if holds:
            assert _run(op) is None
        else:
            with pytest.raises(hb.errors.InvalidArgumentError, match=r"\[checked\] \[Condition x"):
                _run(op)


@pytest.mark.parametrize(
    "fn, good, bad",
    [
        ("assert_positive", [1, 2], [0, 2]),
        ("assert_negative", [-1, -2], [0, -2]),
        ("assert_non_negative", [0, 2], [-1, 2]),
        ("assert_non_positive", [0, -2], [1, -2]),
    ],
)
def test_sign_asserts(fn, good, bad):
    with hb.Graph().as_default():
        x = hb.placeholder(hb.int32, [2])
        op = getattr(hb, fn)(x)
        assert _run(op, {x: good}) is None
        with pytest.raises(hb.errors.InvalidArgumentError, match="assertion failed"):
            _run(op, {x: bad})


def test_exclusive_case_fails_when_two_predicates_hold():
    """exclusive=True: the one true predicate's function, the default when none holds, and an
    error naming the predicates and their values when two hold."""
    with hb.Graph().as_default():
        a = hb.placeholder(hb.int32, [])
        pairs = [(a > 0, lambda: hb.constant(1)), (a > 5, lambda: hb.constant(2))]
        r = hb.case(pairs, default=lambda: hb.constant(0), exclusive=True)
        assert [_run(r, {a: v}) for v in (3, -1)] == [1, 0]
        with pytest.raises(hb.errors.InvalidArgumentError) as e:
            _run(r, {a: 7})
        assert "More than one condition evaluated as True but exclusive=True" in str(e.value)
        assert "[True True]" in str(e.value)


def test_same_as_tensorflow():
    """The same TF1 program (an assert guarding a computation, an exclusive case) passes and
    fails on the same inputs under TensorFlow and hetbed, with the same values."""
    tf1 = pytest.importorskip("tensorflow.compat.v1")

    def program(tf, xv, av):
        g = tf.Graph()
        with g.as_default():
            x = tf.placeholder(tf.float32, [None])
            a = tf.placeholder(tf.int32, [])
            check = tf.assert_non_negative(x, message="negative input")
            with tf.control_dependencies([check]):
                y = tf.identity(tf.sqrt(x))
            r = tf.case(
                [(a > 0, lambda: tf.constant(1)), (a > 5, lambda: tf.constant(2))],
                default=lambda: tf.constant(0),
                exclusive=True,
            )
            with tf.Session(graph=g) as s:
                out = []
                for fetch, feed in ((y, {x: xv}), (r, {a: av})):
                    try:
                        out.append(s.run(fetch, feed))
                    except tf.errors.InvalidArgumentError:
                        out.append("InvalidArgumentError")
                return out

    for xv, av in (([1.0, 4.0], 3), ([1.0, -4.0], 7), ([0.0], -2)):
        want, got = program(tf1, xv, av), program(hbtf, xv, av)
        for w, h in zip(want, got):
            if isinstance(w, str):
                assert h == w
            else:
                np.testing.assert_allclose(h, w)
