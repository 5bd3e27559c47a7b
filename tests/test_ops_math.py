"""Math ops (runtime/ops/math.py): values against numpy, gradients against finite differences,
dtype and shape rules, operator overloads and cost rules."""

import numpy as np
import pytest
from opcheck import check_forward, check_gradient

import hetbed as hb
from hetbed.runtime.registry import apply

RNG = np.random.default_rng(0)
FLOATS = [np.float32, np.float64]
NUMERIC = [np.float32, np.float64, np.int32]


def _x(shape, dtype=np.float64, low=-3.0, high=3.0):
    """Random values; integers in [low, high], floats uniform in [low, high)."""
    if np.dtype(dtype).kind in "iu":
        return RNG.integers(int(low), int(high) + 1, size=shape).astype(dtype)
    return RNG.uniform(low, high, size=shape).astype(dtype)


def _away_from_zero(shape, dtype=np.float64):
    """Values with |x| in [0.5, 2], random signs (for Abs, Sign, Reciprocal, divisors)."""
    mag = RNG.uniform(0.5, 2.0, size=shape)
    return (mag * RNG.choice([-1.0, 1.0], size=shape)).astype(dtype)


def _distinct(shape, dtype=np.float64):
    """Values without ties (for Max/Min and Maximum/Minimum gradients)."""
    n = int(np.prod(shape))
    return (RNG.permutation(n) * 0.37 - n * 0.15).reshape(shape).astype(dtype)


# ---- binary elementwise ops: every broadcasting pattern ---------------------------------------

BROADCASTS = [
    ((3, 4), (3, 4)),  # same shape
    ((3, 4), ()),  # scalar right
    ((), (3, 4)),  # scalar left
    ((3, 4), (4,)),  # row
    ((3, 1), (3, 4)),  # column
    ((3, 1), (1, 4)),  # outer
    ((2, 3, 4), (3, 1)),  # higher rank with a column
    ((1, 3, 1), (2, 1, 4)),  # both stretched
    ((0, 4), (4,)),  # empty
    ((0,), (1,)),  # empty against a stretched dim
]

BINARY = {
    "add": (hb.add, np.add, NUMERIC),
    "subtract": (hb.subtract, np.subtract, NUMERIC),
    "multiply": (hb.multiply, np.multiply, NUMERIC),
    "maximum": (hb.maximum, np.maximum, NUMERIC),
    "minimum": (hb.minimum, np.minimum, NUMERIC),
    "squared_difference": (hb.squared_difference, lambda x, y: (x - y) ** 2, NUMERIC),
}


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("shapes", BROADCASTS, ids=str)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_broadcasting(name, shapes, dtype):
    """Binary elementwise ops equal numpy under every broadcasting pattern, keeping the dtype."""
    fn, ref, dtypes = BINARY[name]
    x, y = _x(shapes[0], dtype), _x(shapes[1], dtype)
    check_forward(fn, [x, y], lambda a, b: ref(a, b).astype(dtype))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shapes", BROADCASTS, ids=str)
def test_divide_and_pow_broadcasting(shapes, dtype):
    """RealDiv and Pow (positive base) equal numpy under broadcasting."""
    x = _x(shapes[0], dtype, 0.5, 2.0)
    y = _away_from_zero(shapes[1], dtype)
    check_forward(hb.divide, [x, y], np.true_divide, rtol=1e-5)
    check_forward(hb.pow, [x, y], np.power, rtol=1e-5)


@pytest.mark.parametrize("dtype", NUMERIC)
def test_floordiv_floormod(dtype):
    """FloorDiv and FloorMod round toward -inf; the remainder takes the divisor's sign."""
    x = _x((3, 4), dtype, -9, 9)
    y = np.array([-4, -1, 2, 3], dtype)  # non-zero divisors of both signs
    check_forward(hb.floordiv, [x, y], np.floor_divide)
    check_forward(hb.floormod, [x, y], np.mod)
    check_forward(lambda a, b: a // b, [x, y], np.floor_divide)
    check_forward(lambda a, b: a % b, [x, y], np.mod)


def test_floordiv_negative_ints():
    """-7 // 2 is -4 and -7 % 2 is 1 (floor semantics, as in Python and TF)."""
    x, y = np.array([-7, 7, -7, 7], np.int32), np.array([2, 2, -2, -2], np.int32)
    check_forward(hb.floordiv, [x, y], lambda a, b: np.array([-4, 3, 3, -4], np.int32))
    check_forward(hb.floormod, [x, y], lambda a, b: np.array([1, 1, -1, -1], np.int32))


def test_pow_int():
    """Pow of int32 with non-negative exponents stays int32."""
    x, y = _x((3, 4), np.int32, -3, 3), _x((4,), np.int32, 0, 3)
    check_forward(hb.pow, [x, y], np.power)


def test_binary_broadcast_error():
    """Shapes that cannot broadcast are rejected when the op is built, naming both shapes."""
    with hb.Graph().as_default():
        with pytest.raises(
            hb.errors.InvalidArgumentError, match=r"\(3, 4\) and \(3,\) cannot be broadcast"
        ):
            hb.add(hb.zeros([3, 4]), hb.zeros([3]))


def test_binary_unknown_dims():
    """Broadcasting static shapes keeps unknown dims unknown and takes known ones from 1s."""
    with hb.Graph().as_default():
        a = hb.placeholder(hb.float32, [None, 1, 4])
        b = hb.placeholder(hb.float32, [3, None])
        assert (a + b).shape.as_list() == [None, 3, 4]
        assert (a + hb.placeholder(hb.float32, None)).shape.ndims is None


# ---- dtype rules --------------------------------------------------------------------------------


def test_python_scalar_takes_tensor_dtype():
    """A Python scalar beside a tensor takes the tensor's dtype: int32 * 2 stays int32."""
    x = np.array([1, -2, 3], np.int32)
    check_forward(lambda t: t * 2, [x], lambda a: a * np.int32(2))
    check_forward(lambda t: 2 - t, [x], lambda a: np.int32(2) - a)
    check_forward(lambda t: t + 1.5, [x.astype(np.float64)], lambda a: a + 1.5)
    check_forward(lambda t: 2.0**t, [x.astype(np.float32)], lambda a: np.float32(2.0) ** a)


def test_float_scalar_with_int_tensor_is_an_error():
    """2.5 beside an int32 tensor is rejected, not truncated."""
    with hb.Graph().as_default():
        x = hb.placeholder(hb.int32, [3])
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"float value 2\.5.*int32"):
            x * 2.5
        with pytest.raises(hb.errors.InvalidArgumentError, match="float value"):
            2.5 + x


def test_mixed_dtypes_are_an_error():
    """Binary ops need one dtype: int32 + float32 names both dtypes."""
    with hb.Graph().as_default():
        a, b = hb.placeholder(hb.int32, [2]), hb.placeholder(hb.float32, [2])
        with pytest.raises(hb.errors.InvalidArgumentError, match="int32.*float32"):
            hb.add(a, b)
        with pytest.raises(hb.errors.InvalidArgumentError, match="same dtype"):
            hb.divide(a, b)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_int_division_is_true_division(dtype):
    """int / int divides as float64 (TF's truediv), for / and hb.divide alike."""
    x, y = np.array([7, -7, 1], dtype), np.array([2, 2, 3], dtype)
    check_forward(lambda a, b: a / b, [x, y], lambda a, b: a / b)
    check_forward(hb.truediv, [x, y], lambda a, b: (a / b).astype(np.float64))
    check_forward(lambda a: 1 / a, [y], lambda b: 1.0 / b)


def test_div_has_python2_semantics():
    """hb.div floors for integers and divides exactly for floats (TF1's tf.div)."""
    x, y = np.array([7, -7], np.int32), np.array([2, 2], np.int32)
    check_forward(hb.div, [x, y], lambda a, b: np.array([3, -4], np.int32))
    check_forward(hb.div, [x.astype(np.float32), y.astype(np.float32)], np.true_divide)


@pytest.mark.parametrize("dtype", NUMERIC + [np.bool_])
def test_comparisons_give_bool(dtype):
    """Less ... NotEqual broadcast and return bool for every dtype."""
    x = _x((3, 4), np.int32, 0, 2).astype(dtype)
    y = _x((4,), np.int32, 0, 2).astype(dtype)
    for fn, ref in [
        (hb.less, np.less),
        (hb.less_equal, np.less_equal),
        (hb.greater, np.greater),
        (hb.greater_equal, np.greater_equal),
        (hb.equal, np.equal),
        (hb.not_equal, np.not_equal),
    ]:
        check_forward(fn, [x, y], ref)


def test_logical_ops():
    """LogicalAnd/Or/Not equal numpy with broadcasting and need bool inputs."""
    x = RNG.integers(0, 2, (3, 4)).astype(bool)
    y = RNG.integers(0, 2, (4,)).astype(bool)
    check_forward(hb.logical_and, [x, y], np.logical_and)
    check_forward(hb.logical_or, [x, y], np.logical_or)
    check_forward(hb.logical_not, [x], np.logical_not)
    check_forward(lambda a, b: (a & b, a | b, ~a), [x, y], lambda a, b: (a & b, a | b, ~a))
    with pytest.raises(hb.errors.UnimplementedError, match="LogicalAnd"):
        check_forward(hb.logical_and, [x.astype(np.int32)] * 2, np.logical_and)


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize(
    "shapes", [((3, 4), (3, 4), (3, 4)), ((4,), (3, 1), ()), ((3, 1), (), (4,))], ids=str
)
def test_where_broadcasts(shapes, dtype):
    """hb.where picks x where the condition holds, broadcasting all three operands."""
    c = RNG.integers(0, 2, shapes[0]).astype(bool)
    x, y = _x(shapes[1], dtype), _x(shapes[2], dtype)
    check_forward(hb.where, [c, x, y], np.where)


def test_where_needs_bool_condition():
    """A non-bool condition and x/y of different dtypes are rejected with the dtypes named."""
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [3])
        with pytest.raises(hb.errors.InvalidArgumentError, match="condition must be bool.*int32"):
            hb.where(hb.constant([1, 0, 1]), x, x)
        with pytest.raises(hb.errors.InvalidArgumentError, match="not supported"):
            hb.where(hb.constant([True, False, True]), x)
        with pytest.raises(hb.errors.InvalidArgumentError, match="float32 vs float64"):
            hb.where(hb.constant([True, False, True]), x, hb.placeholder(hb.float64, [3]))


# ---- unary ops ------------------------------------------------------------------------------------

UNARY = {
    "negative": (hb.negative, np.negative, NUMERIC, _x),
    "abs": (hb.abs, np.abs, NUMERIC, _x),
    "sign": (hb.sign, np.sign, NUMERIC, _x),
    "square": (hb.square, np.square, NUMERIC, _x),
    "exp": (hb.exp, np.exp, FLOATS, _x),
    "log": (hb.log, np.log, FLOATS, lambda s, d: _x(s, d, 0.1, 3.0)),
    "log1p": (hb.log1p, np.log1p, FLOATS, lambda s, d: _x(s, d, -0.9, 3.0)),
    "sqrt": (hb.sqrt, np.sqrt, FLOATS, lambda s, d: _x(s, d, 0.1, 3.0)),
    "rsqrt": (hb.rsqrt, lambda a: 1 / np.sqrt(a), FLOATS, lambda s, d: _x(s, d, 0.1, 3.0)),
    "reciprocal": (hb.reciprocal, np.reciprocal, FLOATS, _away_from_zero),
    "floor": (hb.floor, np.floor, FLOATS, _x),
    "ceil": (hb.ceil, np.ceil, FLOATS, _x),
    "round": (hb.round, np.round, FLOATS, _x),
}


@pytest.mark.parametrize("shape", [(3, 4), (), (0, 2)], ids=str)
@pytest.mark.parametrize(
    "name,dtype", [(n, d) for n, (_, _, dts, _) in UNARY.items() for d in dts], ids=str
)
def test_unary(name, dtype, shape):
    """Unary ops equal numpy for each dtype they take, on matrices, scalars and empty arrays."""
    fn, ref, _, gen = UNARY[name]
    x = gen(shape, dtype)
    check_forward(fn, [x], lambda a: ref(a).astype(dtype), rtol=2e-6)


def test_round_half_to_even():
    """Round sends halves to the even neighbour (banker's rounding, as TF does)."""
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.4999], np.float32)
    check_forward(hb.round, [x], lambda a: np.array([-2, -2, -0, 0, 2, 2, 0], np.float32))


def test_unary_operators():
    """-x and abs(x) on tensors build Neg and Abs."""
    x = _x((2, 3), np.int32)
    check_forward(lambda t: (-t, abs(t)), [x], lambda a: (-a, np.abs(a)))


def test_float_only_unary_rejects_ints():
    """Exp has no int32 kernel; the error names the op, the dtype and what is registered."""
    with pytest.raises(hb.errors.UnimplementedError, match=r"Exp.*int32.*float32"):
        check_forward(hb.exp, [np.array([1, 2], np.int32)], np.exp)


# ---- AddN -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 5])
@pytest.mark.parametrize("dtype", NUMERIC)
def test_add_n(n, dtype):
    """add_n sums any number of same-shaped tensors."""
    xs = [_x((2, 3), dtype) for _ in range(n)]
    check_forward(lambda *ts: hb.add_n(list(ts)), xs, lambda *a: np.sum(a, axis=0).astype(dtype))


def test_add_n_errors():
    """add_n needs inputs of one shape and at least one input."""
    with hb.Graph().as_default():
        with pytest.raises(hb.errors.InvalidArgumentError, match="at least one"):
            hb.add_n([])
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"\(2, 3\) and \(3, 2\)"):
            hb.add_n([hb.zeros([2, 3]), hb.zeros([3, 2])])


# ---- MatMul and BatchMatMul -------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_matmul_transposes(ta, tb, dtype):
    """MatMul with transpose flags equals numpy's product of the transposed operands."""
    a = _x((4, 3) if ta else (3, 4), dtype)
    b = _x((5, 4) if tb else (4, 5), dtype)

    def ref(a, b):
        return (a.T if ta else a) @ (b.T if tb else b)

    check_forward(lambda x, y: hb.matmul(x, y, transpose_a=ta, transpose_b=tb), [a, b], ref, 1e-5)
    check_forward(lambda x, y: hb.matmul(x, y, adjoint_a=ta, adjoint_b=tb), [a, b], ref, 1e-5)


@pytest.mark.parametrize(
    "sa,sb",
    [
        ((2, 3, 4), (2, 4, 5)),  # same batch
        ((2, 3, 4), (4, 5)),  # matrix right
        ((3, 4), (2, 4, 5)),  # matrix left
        ((2, 1, 3, 4), (5, 4, 6)),  # broadcast batch dims of both
        ((1, 3, 4), (2, 4, 5)),  # stretched batch dim
        ((0, 3, 4), (4, 5)),  # empty batch
        ((2, 3, 0), (2, 0, 5)),  # empty contraction: zeros
    ],
    ids=str,
)
@pytest.mark.parametrize("adj", [(False, False), (True, False), (False, True), (True, True)])
def test_batch_matmul_broadcasting(sa, sb, adj):
    """Batched matmul broadcasts leading dims like numpy.matmul, with adjoint flags."""
    ax, ay = adj

    def sw(s, t):
        return s[:-2] + (s[-1], s[-2]) if t else s

    a, b = _x(sw(sa, ax), np.float64), _x(sw(sb, ay), np.float64)

    def ref(a, b):
        return np.matmul(np.swapaxes(a, -1, -2) if ax else a, np.swapaxes(b, -1, -2) if ay else b)

    check_forward(lambda x, y: hb.matmul(x, y, adjoint_a=ax, adjoint_b=ay), [a, b], ref)


def test_batch_matmul_float32_int32():
    """BatchMatMul keeps float32 and int32 dtypes."""
    for dtype in (np.float32, np.int32):
        a, b = _x((2, 3, 4), dtype), _x((2, 4, 2), dtype)
        check_forward(hb.matmul, [a, b], np.matmul, rtol=1e-5)
        check_forward(lambda x, y: x @ y, [a, b], np.matmul, rtol=1e-5)


def test_matmul_operator_and_empty():
    """a @ b builds MatMul; an empty inner dimension gives zeros; rmatmul takes a Python list."""
    a, b = _x((3, 0)), _x((0, 4))
    check_forward(lambda x, y: x @ y, [a, b], lambda x, y: np.zeros((3, 4)))
    check_forward(
        lambda y: [[1.0, 2.0, 3.0]] @ y,
        [_x((3, 2), np.float32)],
        lambda y: np.float32([[1, 2, 3]]) @ y,
    )


def test_matmul_shape_errors():
    """Mismatched inner dims and wrong ranks are rejected with the shapes named."""
    with hb.Graph().as_default():
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"inner dimensions.*4 vs 5"):
            hb.matmul(hb.zeros([3, 4]), hb.zeros([5, 2]))
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"inner dimensions.*\(T\)"):
            hb.matmul(hb.zeros([3, 4]), hb.zeros([3, 4]), transpose_b=True, transpose_a=True)
        with pytest.raises(hb.errors.InvalidArgumentError, match="rank >= 2"):
            hb.matmul(hb.zeros([3]), hb.zeros([3, 4]))
        with pytest.raises(hb.errors.InvalidArgumentError, match="cannot be broadcast"):
            hb.matmul(hb.zeros([2, 3, 4]), hb.zeros([3, 4, 5]))
        with pytest.raises(hb.errors.InvalidArgumentError, match="same dtype"):
            hb.matmul(hb.zeros([3, 4]), hb.zeros([4, 5], dtype=hb.float64))


def test_matmul_static_shapes():
    """Static output shapes: transposes swap dims, unknown dims stay unknown, batch dims merge."""
    with hb.Graph().as_default():
        a = hb.placeholder(hb.float32, [None, 4])
        b = hb.placeholder(hb.float32, [5, 4])
        assert hb.matmul(a, b, transpose_b=True).shape.as_list() == [None, 5]
        c = hb.placeholder(hb.float32, [2, 1, 3, 4])
        d = hb.placeholder(hb.float32, [7, 5, 4])
        assert hb.matmul(c, d, adjoint_b=True).shape.as_list() == [2, 7, 3, 5]
        assert hb.matmul(c, hb.placeholder(hb.float32, None)).shape.ndims is None


# ---- reductions -------------------------------------------------------------------------------------

REDUCTIONS = {
    "sum": (hb.reduce_sum, np.sum),
    "mean": (hb.reduce_mean, np.mean),
    "max": (hb.reduce_max, np.max),
    "min": (hb.reduce_min, np.min),
    "prod": (hb.reduce_prod, np.prod),
}
AXES = [None, 0, -1, 1, [0, 2], (-1, -3), [], [2, 0, 1]]


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reductions(name, axis, keepdims, dtype):
    """Sum/Mean/Max/Min/Prod equal numpy for every axis form, with and without keepdims;
    the mean of ints truncates toward zero, as TF's integer division does."""
    fn, ref = REDUCTIONS[name]
    np_axis = tuple(axis) if isinstance(axis, list) else axis
    x = _x((2, 3, 4), dtype, -2, 2)

    def want(a):
        r = ref(a, axis=np_axis, keepdims=keepdims)
        return np.asarray(np.trunc(r) if dtype == np.int32 else r).astype(dtype)

    check_forward(lambda t: fn(t, axis=axis, keepdims=keepdims), [x], want, rtol=1e-5)


def test_reduction_tf1_aliases():
    """keep_dims and reduction_indices are TF1's names for keepdims and axis."""
    x = _x((2, 3))
    check_forward(
        lambda t: hb.reduce_sum(t, reduction_indices=[1], keep_dims=True),
        [x],
        lambda a: a.sum(axis=1, keepdims=True),
    )
    check_forward(lambda t: hb.reduce_mean(t, reduction_indices=0), [x], lambda a: a.mean(0))
    check_forward(lambda t: hb.reduce_max(t, np.array(1)), [x], lambda a: a.max(1))


@pytest.mark.parametrize("axis", [None, 0, -1])
def test_bool_reductions(axis):
    """reduce_all / reduce_any follow numpy, and need bool input."""
    x = RNG.integers(0, 2, (3, 4)).astype(bool)
    x[0] = True
    check_forward(lambda t: hb.reduce_all(t, axis), [x], lambda a: np.all(a, axis))
    check_forward(
        lambda t: hb.reduce_any(t, axis, keepdims=True),
        [x],
        lambda a: np.any(a, axis, keepdims=True),
    )
    with pytest.raises(hb.errors.UnimplementedError, match="All"):
        check_forward(hb.reduce_all, [x.astype(np.float32)], np.all)


def test_empty_reductions():
    """Reducing nothing gives the identity: sum 0, prod 1, max -inf, min +inf, mean NaN."""
    x = np.zeros((0, 3), np.float32)
    check_forward(lambda t: hb.reduce_sum(t, 0), [x], lambda a: np.zeros(3, np.float32))
    check_forward(lambda t: hb.reduce_prod(t, 0), [x], lambda a: np.ones(3, np.float32))
    check_forward(lambda t: hb.reduce_max(t, 0), [x], lambda a: np.full(3, -np.inf, np.float32))
    check_forward(lambda t: hb.reduce_min(t), [x], lambda a: np.float32(np.inf))
    check_forward(lambda t: hb.reduce_mean(t, 0), [x], lambda a: np.full(3, np.nan, np.float32))
    check_forward(lambda t: hb.reduce_max(t, 1), [x], lambda a: np.zeros(0, np.float32))
    xi = np.zeros((2, 0), np.int32)
    lo, hi = np.iinfo(np.int32).min, np.iinfo(np.int32).max
    check_forward(lambda t: hb.reduce_max(t, 1), [xi], lambda a: np.full(2, lo, np.int32))
    check_forward(lambda t: hb.reduce_min(t, -1), [xi], lambda a: np.full(2, hi, np.int32))


def test_reduction_errors_and_shapes():
    """Axes out of range are rejected; unknown dims stay unknown; unknown rank stays unknown."""
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [None, 3, 4])
        with pytest.raises(hb.errors.InvalidArgumentError, match="axis 3 out of range for rank 3"):
            hb.reduce_sum(x, 3)
        with pytest.raises(hb.errors.InvalidArgumentError, match="axis -4"):
            hb.reduce_sum(x, [0, -4])
        assert hb.reduce_sum(x, 1).shape.as_list() == [None, 4]
        assert hb.reduce_max(x, -1, keepdims=True).shape.as_list() == [None, 3, 1]
        u = hb.placeholder(hb.float32, None)
        assert hb.reduce_sum(u, 0).shape.ndims is None
        assert hb.reduce_sum(u).shape.ndims is None
        with pytest.raises(
            hb.errors.InvalidArgumentError, match="negative axis needs a known rank"
        ):
            hb.reduce_sum(u, -1)
        with pytest.raises(TypeError, match="static"):
            hb.reduce_sum(x, hb.constant(0))


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("dtype", NUMERIC)
def test_argmax_argmin(dtype, axis):
    """ArgMax/ArgMin equal numpy's (first occurrence), default int64, output_type honoured."""
    x = _x((3, 4, 2), dtype, -9, 9)
    check_forward(lambda t: hb.argmax(t, axis), [x], lambda a: np.argmax(a, axis))
    check_forward(
        lambda t: hb.argmin(t, axis, output_type=hb.int32),
        [x],
        lambda a: np.argmin(a, axis).astype(np.int32),
    )
    check_forward(lambda t: hb.argmax(t, dimension=2), [x], lambda a: np.argmax(a, 2))
    check_forward(lambda t: hb.argmin(t), [x], lambda a: np.argmin(a, 0))


def test_zeros_like_ones_like():
    """zeros_like/ones_like keep the shape and take the input's dtype unless one is given."""
    x = _x((2, 0, 3), np.int32)
    y = _x((2, 3), np.float64)
    check_forward(hb.zeros_like, [x], np.zeros_like)
    check_forward(hb.ones_like, [y], np.ones_like)
    check_forward(lambda t: hb.ones_like(t, dtype=hb.bool_), [y], lambda a: np.ones(a.shape, bool))
    check_forward(
        lambda t: hb.zeros_like(t, dtype="float32"), [x], lambda a: np.zeros(a.shape, np.float32)
    )


# ---- operators and indexing -------------------------------------------------------------------------


def test_tensor_operators():
    """Tensor operators (+ - * / // % ** @, comparisons, reflected forms) build the math ops."""
    x = _x((3, 3), np.float64, 0.5, 2.0)
    y = _away_from_zero((3,), np.float64)

    def build(a, b):
        return [
            a + b,
            a - b,
            a * b,
            a / b,
            a // b,
            a % b,
            a**b,
            a @ a,
            1 + a,
            1 - a,
            2 * a,
            1 / a,
            7 // a,
            7 % a,
            2**b,
            a < b,
            a <= b,
            a > b,
            a >= b,
            0.5 < a,
        ]

    def ref(a, b):
        return [
            a + b,
            a - b,
            a * b,
            a / b,
            a // b,
            a % b,
            a**b,
            a @ a,
            1 + a,
            1 - a,
            2 * a,
            1 / a,
            7 // a,
            7 % a,
            2**b,
            a < b,
            a <= b,
            a > b,
            a >= b,
            0.5 < a,
        ]

    check_forward(build, [x, y], ref)


def test_getitem():
    """t[...] slices like numpy (via strided_slice)."""
    x = _x((3, 4, 5))
    check_forward(lambda t: t[1:, ::-2, -1], [x], lambda a: a[1:, ::-2, -1])
    check_forward(lambda t: t[..., None, 0], [x], lambda a: a[..., None, 0])


def test_operator_on_variable():
    """Variables take the same operators as tensors (reading their value)."""
    with hb.Graph().as_default():
        w = hb.Variable(np.arange(6.0).reshape(2, 3))
        out = [w + 1, 2 * w, -w, w[1], w @ hb.ones([3, 1], hb.float64), w > 2.0]
        with hb.Session() as s:
            s.run(w.initializer)
            got = s.run(out)
    a = np.arange(6.0).reshape(2, 3)
    for g, r in zip(got, [a + 1, 2 * a, -a, a[1], a @ np.ones((3, 1)), a > 2]):
        np.testing.assert_array_equal(g, r)


# ---- helper ops used by gradients -----------------------------------------------------------------


def test_sum_to_and_broadcast_like():
    """SumTo sums the broadcast axes back to a shape; BroadcastLike broadcasts to a shape."""
    g, like = _x((2, 3, 4)), _x((3, 1))
    check_forward(
        lambda a, b: apply("SumTo", [a, b]), [g, like], lambda a, b: a.sum(0).sum(1, keepdims=True)
    )
    gi = _x((2, 3), np.int32)
    check_forward(
        lambda a, b: apply("SumTo", [a, b]), [gi, _x((3,))], lambda a, b: a.sum(0).astype(np.int32)
    )
    check_forward(
        lambda a, b: apply("BroadcastLike", [a, b]),
        [like, g],
        lambda a, b: np.broadcast_to(a, (2, 3, 4)),
    )
    check_gradient(lambda a, b: apply("SumTo", [a, b]), [g, like], wrt=[0])
    check_gradient(lambda a, b: apply("BroadcastLike", [a, b]), [like, g], wrt=[0])


def test_keepdims_and_scale_by_count():
    """KeepDims restores reduced axes as 1s; ScaleByCount divides by the reduced element count."""
    g, x = _x((2, 4)), _x((2, 3, 4))
    check_forward(
        lambda a, b: apply("KeepDims", [a, b], {"axis": (1,)}), [g, x], lambda a, b: a[:, None, :]
    )
    check_forward(
        lambda a, b: apply("ScaleByCount", [a, b], {"axis": (0, 1)}), [x, x], lambda a, b: a / 6
    )
    check_forward(
        lambda a, b: apply("ScaleByCount", [a, b], {"axis": None}), [x, x], lambda a, b: a / 24
    )
    check_gradient(lambda a, b: apply("KeepDims", [a, b], {"axis": (1,)}), [g, x], wrt=[0])
    check_gradient(lambda a, b: apply("ScaleByCount", [a, b], {"axis": (2,)}), [x, x], wrt=[0])


# ---- gradients --------------------------------------------------------------------------------------

GRAD_BROADCASTS = [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((2, 3, 4), (3, 1)), ((), (3,)), ((4,), ())]


@pytest.mark.parametrize("shapes", GRAD_BROADCASTS, ids=str)
@pytest.mark.parametrize(
    "name",
    ["add", "subtract", "multiply", "divide", "pow", "maximum", "minimum", "squared_difference"],
)
def test_binary_gradients(name, shapes):
    """Binary op gradients, through broadcasting of either operand, match finite differences."""
    sa, sb = shapes
    if name in ("maximum", "minimum"):
        both = _distinct((int(np.prod(sa)) + int(np.prod(sb)),))
        x, y = both[: int(np.prod(sa))].reshape(sa), both[int(np.prod(sa)) :].reshape(sb)
    elif name in ("divide", "pow"):
        x, y = _x(sa, np.float64, 0.5, 2.0), _away_from_zero(sb)
    else:
        x, y = _x(sa), _x(sb)
    check_gradient(getattr(hb, name), [x, y])


def test_where_gradient():
    """Select routes the gradient to x where the condition holds and to y elsewhere."""
    c = np.array([[True, False, True, False]])
    check_gradient(lambda x, y: hb.where(hb.constant(c), x, y), [_x((3, 4)), _x((3, 1))])
    check_gradient(lambda x, y: hb.where(hb.constant(c[0, :1]), x, y), [_x(()), _x((2, 4))])


@pytest.mark.parametrize(
    "name",
    ["negative", "abs", "sign", "square", "exp", "log", "log1p", "sqrt", "rsqrt", "reciprocal"],
)
def test_unary_gradients(name):
    """Unary op gradients match finite differences (inputs away from 0 where needed)."""
    fn, _, _, gen = UNARY[name]
    x = _away_from_zero((2, 3)) if gen is _x else gen((2, 3), np.float64)
    check_gradient(fn, [x])


def test_rounding_ops_have_no_gradient():
    """Floor, Ceil, Round, FloorDiv, comparisons and ArgMax give no gradient (None); FloorMod
    has TF's (test_ops_linalg.py)."""
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float64, [3])
        for y in (hb.floor(x), hb.ceil(x), hb.round(x), hb.floordiv(x, 2.0)):
            assert hb.gradients(hb.reduce_sum(y), x) == [None]
        z = hb.cast(hb.argmax(x), hb.float64) + hb.cast(x > 0.0, hb.float64)
        assert hb.gradients(z, x) == [None]


def test_ties_gradient_rules():
    """Maximum gives a tie to x; reduce_max splits the gradient evenly among tied maxima."""
    with hb.Graph().as_default():
        x = hb.constant([1.0, 2.0, 2.0], hb.float64)
        y = hb.constant([1.0, 1.0, 3.0], hb.float64)
        gx, gy = hb.gradients(hb.reduce_sum(hb.maximum(x, y)), [x, y])
        (gm,) = hb.gradients(hb.reduce_max(x), [x])
        with hb.Session() as s:
            vx, vy, vm = s.run([gx, gy, gm])
    np.testing.assert_array_equal(vx, [1, 1, 0])
    np.testing.assert_array_equal(vy, [0, 0, 1])
    np.testing.assert_array_equal(vm, [0, 0.5, 0.5])


def test_pow_gradient_nonpositive_base():
    """d(x**y)/dy is 0 where x <= 0 (log taken of a safe value), d/dx stays y*x**(y-1)."""
    with hb.Graph().as_default():
        x = hb.constant([0.0, -2.0, 3.0], hb.float64)
        y = hb.constant([2.0, 2.0, 2.0], hb.float64)
        gx, gy = hb.gradients(hb.reduce_sum(hb.pow(x, y)), [x, y])
        with hb.Session() as s:
            vx, vy = s.run([gx, gy])
    np.testing.assert_allclose(vx, [0.0, -4.0, 6.0])
    np.testing.assert_allclose(vy, [0.0, 0.0, 9.0 * np.log(3.0)])


def test_add_n_gradient():
    """AddN passes the gradient to every input, including repeated ones."""
    a, b = _x((2, 3)), _x((2, 3))
    check_gradient(lambda x, y: hb.add_n([x, y, x]), [a, b])


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_matmul_gradient(ta, tb):
    """MatMul gradients for each transpose combination match finite differences."""
    a = _x((4, 3) if ta else (3, 4))
    b = _x((2, 4) if tb else (4, 2))
    check_gradient(lambda x, y: hb.matmul(x, y, transpose_a=ta, transpose_b=tb), [a, b])


@pytest.mark.parametrize(
    "sa,sb",
    [((2, 3, 4), (2, 4, 2)), ((2, 1, 3, 4), (3, 4, 2)), ((3, 4), (2, 4, 2)), ((2, 3, 4), (4, 2))],
    ids=str,
)
@pytest.mark.parametrize("adj", [(False, False), (True, False), (False, True), (True, True)])
def test_batch_matmul_gradient(sa, sb, adj):
    """BatchMatMul gradients, with adjoints and broadcast batch dims, match finite differences."""
    ax, ay = adj

    def sw(s, t):
        return s[:-2] + (s[-1], s[-2]) if t else s

    a, b = _x(sw(sa, ax)), _x(sw(sb, ay))
    check_gradient(lambda x, y: hb.matmul(x, y, adjoint_a=ax, adjoint_b=ay), [a, b])


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [None, 0, -1, [0, 2], []], ids=str)
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reduction_gradients(name, axis, keepdims):
    """Sum/Mean/Max/Min/Prod gradients match finite differences (no ties for Max/Min)."""
    fn = REDUCTIONS[name][0]
    x = _distinct((2, 3, 2)) if name in ("max", "min") else _x((2, 3, 2), np.float64, 0.5, 1.5)
    check_gradient(lambda t: fn(t, axis=axis, keepdims=keepdims), [x])


def test_prod_gradient_with_zeros():
    """reduce_prod's gradient is exact where inputs are zero (one zero, and two in a row)."""
    x = np.array([[0.0, 2.0, 3.0], [1.5, 0.0, 0.0], [1.0, -2.0, 0.5]])
    check_gradient(lambda t: hb.reduce_prod(t, axis=1), [x])
    check_gradient(lambda t: hb.reduce_prod(t, axis=0, keepdims=True), [x])
    check_gradient(lambda t: hb.reduce_prod(t), [x[:, :2]])


def test_reduction_gradient_unknown_shape():
    """Reduction gradients work when the input's static shape is unknown."""
    x = _x((3, 4))

    def build(t):
        u = hb.placeholder_with_default(t, [None, None])
        return hb.reduce_mean(u, 1) + hb.reduce_sum(u, 1) + hb.reduce_max(u, 1)

    g = hb.Graph()
    with g.as_default():
        t = hb.placeholder(hb.float64, [3, 4])
        (dx,) = hb.gradients(hb.reduce_sum(build(t)), [t])
        with hb.Session() as s:
            got = s.run(dx, {t: x})
    want = np.full((3, 4), 1 / 4 + 1.0) + (x == x.max(1, keepdims=True))
    np.testing.assert_allclose(got, want)


# ---- cost rules ----------------------------------------------------------------------------------


def _cost(build, *shapes, dtype=hb.float32):
    """The cost of the last op ``build`` makes on placeholders of ``shapes``, at those shapes."""
    with hb.Graph().as_default():
        phs = [hb.placeholder(dtype, s) for s in shapes]
        out = build(*phs)
        op = out.op
        outs = [tuple(t.shape.as_list()) for t in op.outputs]
        return op.op_def.cost_fn(op, [tuple(t.shape.as_list()) for t in op.inputs], outs)


def test_matmul_cost():
    """MatMul costs 2*m*n*k flops and reads both operands, writes the product."""
    c = _cost(hb.matmul, (3, 4), (4, 5))
    assert c.flops == 2 * 3 * 5 * 4
    assert (c.bytes_read, c.bytes_written) == (4 * (12 + 20), 4 * 15)
    c = _cost(lambda a, b: hb.matmul(a, b, transpose_a=True, transpose_b=True), (7, 3), (5, 7))
    assert c.flops == 2 * 3 * 5 * 7
    c = _cost(hb.matmul, (3, 4), (4, 5), dtype=hb.float64)
    assert c.bytes_written == 8 * 15


def test_batch_matmul_cost():
    """BatchMatMul costs 2*batch*m*n*k flops, over the broadcast batch."""
    c = _cost(hb.matmul, (2, 1, 3, 4), (5, 4, 6))
    assert c.flops == 2 * (2 * 5) * 3 * 6 * 4
    assert (c.bytes_read, c.bytes_written) == (4 * (24 + 120), 4 * 2 * 5 * 3 * 6)
    c = _cost(lambda a, b: hb.matmul(a, b, adjoint_a=True), (2, 4, 3), (4, 6))
    assert c.flops == 2 * 2 * 3 * 6 * 4


def test_elementwise_and_reduction_costs():
    """Elementwise ops cost n flops per output element (more for transcendental ones);
    reductions n per input element; AddN k-1 per element."""
    c = _cost(hb.add, (3, 4), (4,))
    assert (c.flops, c.bytes_read, c.bytes_written) == (12, 4 * 16, 4 * 12)
    assert _cost(hb.greater, (3, 4), (3, 4)).bytes_written == 12  # bool output
    assert _cost(hb.negative, (5, 2)).flops == 10
    assert _cost(hb.exp, (5, 2)).flops >= 10
    c = _cost(lambda t: hb.reduce_sum(t, 0), (3, 4))
    assert (c.flops, c.bytes_read, c.bytes_written) == (12, 48, 16)
    assert _cost(lambda t: hb.reduce_max(t), (3, 4)).flops == 12
    assert _cost(lambda a, b, c: hb.add_n([a, b, c]), (2, 3), (2, 3), (2, 3)).flops == 12
    c = _cost(lambda t: hb.argmax(t, 1), (3, 4))
    assert (c.flops, c.bytes_written) == (12, 8 * 3)
