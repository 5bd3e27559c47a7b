"""Graph building's fast paths give what the general paths give: a Python number beside a
tensor becomes its Const directly (registry._operand_constant), and static broadcasting returns
an operand's shape where it is the result (registry.broadcast_shapes)."""

import itertools

import numpy as np
import pytest

import hetbed as hb
from hetbed.runtime.errors import InvalidArgumentError
from hetbed.runtime.graph import TensorShape
from hetbed.runtime.registry import broadcast_shapes


@pytest.mark.parametrize(
    "dtype,number",
    [
        (hb.float32, 2.5),
        (hb.float16, 0.1),
        (hb.float64, 1e300),
        (hb.int32, 7),
        (hb.int64, 2**40),
        (hb.int8, -3),
        (hb.uint8, 200),
        (hb.float32, True),
        (hb.int32, False),
    ],  # fmt: skip
)
def test_a_number_beside_a_tensor_is_the_constant_the_general_path_builds(dtype, number):
    g = hb.Graph()
    with g.as_default(), hb.device("/cpu:0"):
        x = hb.placeholder(dtype, [3], name="x")
        first = hb.no_op(name="first")
        with g.name_scope("s"), g.control_dependencies([first]):
            right, left = x * number, number + x
        general = hb.constant(np.asarray(number).astype(dtype.np), name="Const")
    # named as TF1 names an operator's constant: "mul/y", reflected "add/x"
    for out, want_name in ((right, "s/mul/y"), (left, "s/add/x")):
        const = next(t for t in out.op.inputs if t.op.type == "Const").op
        assert const.graph is g and const.device == general.op.device != ""
        assert const.name == want_name and const.control_inputs == [first]
        v = const.attrs["value"]
        assert v.dtype == general.op.attrs["value"].dtype == dtype.np and v.shape == ()
        assert v == general.op.attrs["value"] and const.attrs["dtype"] is dtype
        assert const.outputs[0].dtype is dtype and const.outputs[0].shape.dims == ()
    with hb.Session(graph=g) as sess:
        feed = np.array([1, 2, 3]).astype(dtype.np)
        got_r, got_l = sess.run([right, left], {x: feed})
    want = np.asarray(number).astype(dtype.np)
    np.testing.assert_array_equal(got_r, feed * want)
    np.testing.assert_array_equal(got_l, want + feed)
    assert got_r.dtype == dtype.np


def test_the_number_fast_path_keeps_the_general_paths_errors_and_arrays():
    g = hb.Graph()
    with g.as_default():
        i = hb.placeholder(hb.int32, [2])
        with pytest.raises(InvalidArgumentError, match="float value 1.5 with an int32"):
            i * 1.5
        f = hb.placeholder(hb.float32, [2])
        pair = f + np.array([1.0, 2.0])  # an array: the general path, cast to the tensor's dtype
        assert pair.op.inputs[1].dtype is hb.float32 and pair.shape.dims == (2,)


def _numpy_rule(a, b):
    """Broadcast known dims with numpy; None (unknown) where either side is unknown and the
    other is not 1."""
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x is None or y is None:
            out.append(y if x == 1 else x if y == 1 else (x if y is None else y))
        else:
            out.append(np.broadcast_shapes((x,), (y,))[0])
    return tuple(out)


def test_broadcast_shapes_agrees_with_numpy_and_shares_an_operand_only_when_equal():
    dims = [(), (1,), (3,), (None,), (2, 3), (2, 1), (1, 3), (None, 3), (4, 2, 3), (4, 1, 1)]
    for a, b in itertools.product(dims, repeat=2):
        sa, sb = TensorShape(a), TensorShape(b)
        try:
            want = _numpy_rule(a, b)
        except ValueError:
            with pytest.raises(InvalidArgumentError, match="cannot be broadcast"):
                broadcast_shapes("Add", sa, sb)
            continue
        got = broadcast_shapes("Add", sa, sb)
        assert got.dims == want, (a, b)
        if got is sa or got is sb:  # an operand returned: it must be the result exactly
            assert (got.dims == a) if got is sa else (got.dims == b)
    unknown = TensorShape(None)
    assert broadcast_shapes("Add", unknown, TensorShape((2,))).dims is None
    assert broadcast_shapes("Add", TensorShape(()), unknown).dims is None
