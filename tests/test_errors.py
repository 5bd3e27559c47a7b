"""Bad input: clear errors that name the op, shapes and dtypes, and leave the session usable."""

import numpy as np
import pytest

import hetbed as hb


def test_shape_mismatch_at_build_time_names_op_and_shapes():
    """A matmul of incompatible shapes fails when built, naming both inputs and shapes."""
    with hb.Graph().as_default():
        a = hb.placeholder(hb.float32, [2, 3], name="a")
        b = hb.placeholder(hb.float32, [4, 5], name="b")
        with pytest.raises(
            hb.errors.InvalidArgumentError, match=r"(?s)MatMul.*a:0.*\(2, 3\).*b:0.*\(4, 5\)"
        ):
            hb.matmul(a, b)
        n_ops = len(hb.get_default_graph().get_operations())
        assert n_ops == 2  # nothing half-built was added


def test_dtype_mismatch_at_build_time():
    """Adding float32 to int32 is refused at build time, naming both dtypes."""
    with hb.Graph().as_default():
        a = hb.constant([1.0, 2.0], name="f")
        b = hb.constant([1, 2], name="i")
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"float32.*int32"):
            hb.add(a, b)


def test_feeding_wrong_shape_to_non_placeholder():
    """Any tensor may be fed, but only with a value of a compatible shape."""
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [None, 2])
        h = hb.matmul(x, hb.constant(np.ones((2, 3), np.float32)), name="h")
        y = hb.reduce_sum(h)
        with hb.Session() as s:
            assert s.run(y, {h: np.ones((4, 3))}) == 12.0  # feeding an intermediate works
            with pytest.raises(
                hb.errors.InvalidArgumentError, match=r"shape \(4, 2\).*h:0.*\(\?, 3\)"
            ):
                s.run(y, {h: np.ones((4, 2))})
            assert s.run(y, {x: np.ones((1, 2))}) == 6.0


def test_fetching_a_tensor_of_another_graph():
    """Fetching a tensor that belongs to another graph names it."""
    g1, g2 = hb.Graph(), hb.Graph()
    with g1.as_default():
        a = hb.constant(1.0, name="elsewhere")
    with g2.as_default():
        b = hb.constant(2.0)
        with hb.Session() as s:
            with pytest.raises(ValueError, match="elsewhere.*another graph"):
                s.run(a)
            assert s.run(b) == 2.0


def test_uninitialized_variable_names_it_and_session_survives():
    """Reading an uninitialized variable is a FailedPreconditionError naming it."""
    with hb.Graph().as_default():
        v = hb.Variable(hb.zeros([3]), name="weights")
        y = v * 2.0
        with hb.Session() as s:
            with pytest.raises(
                hb.errors.FailedPreconditionError, match="uninitialized value weights"
            ):
                s.run(y)
            s.run(hb.global_variables_initializer())
            np.testing.assert_array_equal(s.run(y), [0, 0, 0])


def test_no_kernel_for_dtype_names_op_and_dtype():
    """An op with no kernel for its dtype fails with the op, the dtype and what is registered."""
    with hb.Graph().as_default():
        x = hb.placeholder(hb.int32, [2], name="ints")
        y = hb.exp(x, name="exp_of_ints")
        with hb.Session() as s:
            with pytest.raises(
                hb.errors.UnimplementedError, match=r"Exp on cpu \(int32\).*exp_of_ints.*float"
            ):
                s.run(y, {x: [1, 2]})
            assert s.run(hb.constant(1.0) + 1.0) == 2.0


def test_feeding_float_into_int_placeholder():
    """Float values fed to an int placeholder convert when they are whole numbers (labels built
    with np.ones), and are refused instead of silently truncated otherwise."""
    with hb.Graph().as_default():
        x = hb.placeholder(hb.int32, [2], name="labels")
        with hb.Session() as s:
            got = s.run(x * 2, {x: np.array([1.0, -3.0])})
            assert got.dtype == np.int32 and got.tolist() == [2, -6]
            for bad in ([1.5, 2.0], [np.nan, 1.0]):
                with pytest.raises(
                    hb.errors.InvalidArgumentError, match="whole numbers for labels:0"
                ):
                    s.run(x * 2, {x: bad})


def test_failed_step_leaves_variables_unchanged():
    """A step that fails before its updates run leaves the variables as they were."""
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [None, None])
        v = hb.Variable(hb.ones([2]), name="v")
        bad = hb.matmul(x, x)  # fails at run time for a non-square x
        with hb.control_dependencies([bad]):
            upd = hb.assign_add(v, [1.0, 1.0])
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            with pytest.raises(hb.errors.InvalidArgumentError):
                s.run(upd, {x: np.ones((2, 3))})
            np.testing.assert_array_equal(s.run(v), [1.0, 1.0])
