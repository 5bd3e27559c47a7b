"""Neural-network ops: activations, softmax and losses, bias_add, conv2d, pooling, batch norm.

One block per op (definition, shape rule, kernel, gradient, cost), then the public TF1-named
functions. The kernels below are written once for numpy and cupy (``ctx.xp``): convolutions use
im2col (a strided window view, one copy) and one GEMM; pooling loops over the kh*kw window
positions, each step a vectorized operation on the whole batch. On CPU, float32 and float64
convolutions, max pooling, batch norm, ReLU and bias add run the compiled kernels of ``nn_cpu``
instead (blocked im2col-to-GEMM, one-pass loops): ``_cpu_fast`` picks them.
Images are NHWC; filters are (kh, kw, in_channels, out_channels), as in TensorFlow.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError, UnimplementedError
from ..graph import Tensor, TensorShape
from ..registry import (
    Cost,
    apply,
    convert_to_tensor,
    defop,
    elementwise_cost,
    nbytes,
    numel,
    same_dtype,
    unchanged_shape,
)
from .random import static_shape_value

F = _dt.FLOATS


def _zero(x: Any) -> Any:
    return x.dtype.type(0)


_nn_cpu: Any = None  # the nn_cpu module once imported


def _cpu_fast(*arrays: Any) -> Any:
    """The compiled CPU kernels (``nn_cpu``) when they apply to these arrays, else None.

    Imported on first use: numba's import would otherwise add to every ``import hetbed``."""
    global _nn_cpu
    for a in arrays:
        if type(a) is not np.ndarray:
            return None
    if _nn_cpu is None:
        from . import nn_cpu

        _nn_cpu = nn_cpu
    return _nn_cpu if _nn_cpu.supports(*arrays) else None


def _rw_cost(op, ins, outs, flops: float) -> Cost:
    r = sum(nbytes(s, t.dtype) for s, t in zip(ins, op.inputs))
    w = sum(nbytes(s, t.dtype) for s, t in zip(outs, op.outputs))
    return Cost(float(flops), float(r), float(w))


def _grad_shape(op):
    """Shape rule of ``XGrad(g, y)`` ops: the gradient has the shape and dtype of ``g``."""
    return [(op.inputs[0].shape.merge_with(op.inputs[1].shape), same_dtype(op))]


# ================================================================================================
# Activations
# ================================================================================================

# ---- Relu --------------------------------------------------------------------------------------

Relu = defop("Relu", shape=unchanged_shape, cost=elementwise_cost(1))


@Relu.kernel("cpu", "gpu", dtypes=_dt.NUMERIC)
def _relu(ctx, x):
    fast = _cpu_fast(x)
    if fast is not None:
        return fast.relu(x)
    return ctx.xp.maximum(x, _zero(x))


ReluGrad = defop("ReluGrad", shape=_grad_shape, cost=elementwise_cost(2))


@ReluGrad.kernel("cpu", "gpu", dtypes=_dt.NUMERIC)
def _relu_grad_kernel(ctx, g, y):
    fast = _cpu_fast(g, y)
    if fast is not None and g.shape == y.shape:
        return fast.relu_grad(g, y)
    return g * (y > 0)


Relu.gradient(lambda op, g: [apply("ReluGrad", [g, op.outputs[0]], name="ReluGrad")])
ReluGrad.gradient(lambda op, gg: [apply("ReluGrad", [gg, op.inputs[1]], name="ReluGrad"), None])

# ---- Relu6 -------------------------------------------------------------------------------------

Relu6 = defop("Relu6", shape=unchanged_shape, cost=elementwise_cost(2))


@Relu6.kernel("cpu", "gpu", dtypes=_dt.NUMERIC)
def _relu6(ctx, x):
    return ctx.xp.clip(x, _zero(x), x.dtype.type(6))


Relu6Grad = defop("Relu6Grad", shape=_grad_shape, cost=elementwise_cost(3))


@Relu6Grad.kernel("cpu", "gpu", dtypes=_dt.NUMERIC)
def _relu6_grad_kernel(ctx, g, x):
    return g * ((x > 0) & (x < 6))


Relu6.gradient(lambda op, g: [apply("Relu6Grad", [g, op.inputs[0]], name="Relu6Grad")])
Relu6Grad.gradient(lambda op, gg: [apply("Relu6Grad", [gg, op.inputs[1]], name="Relu6Grad"), None])

# ---- LeakyRelu ---------------------------------------------------------------------------------

LeakyRelu = defop("LeakyRelu", shape=unchanged_shape, cost=elementwise_cost(2))


@LeakyRelu.kernel("cpu", "gpu", dtypes=F)
def _leaky_relu(ctx, x):
    a = x.dtype.type(ctx.attrs["alpha"])
    return ctx.xp.where(x > 0, x, x * a)


LeakyReluGrad = defop("LeakyReluGrad", shape=_grad_shape, cost=elementwise_cost(2))


@LeakyReluGrad.kernel("cpu", "gpu", dtypes=F)
def _leaky_relu_grad_kernel(ctx, g, x):
    return ctx.xp.where(x > 0, g, g * g.dtype.type(ctx.attrs["alpha"]))


LeakyRelu.gradient(
    lambda op, g: [apply("LeakyReluGrad", [g, op.inputs[0]], dict(op.attrs), name="LeakyReluGrad")]
)
LeakyReluGrad.gradient(
    lambda op, gg: [
        apply("LeakyReluGrad", [gg, op.inputs[1]], dict(op.attrs), name="LeakyReluGrad"),
        None,
    ]
)

# ---- Elu ---------------------------------------------------------------------------------------

Elu = defop("Elu", shape=unchanged_shape, cost=elementwise_cost(12))


@Elu.kernel("cpu", "gpu", dtypes=F)
def _elu(ctx, x):
    xp = ctx.xp
    return xp.where(x > 0, x, xp.expm1(xp.minimum(x, _zero(x))))


EluGrad = defop("EluGrad", shape=_grad_shape, cost=elementwise_cost(3))


@EluGrad.kernel("cpu", "gpu", dtypes=F)
def _elu_grad_kernel(ctx, g, y):
    return ctx.xp.where(y > 0, g, g * (y + y.dtype.type(1)))


Elu.gradient(lambda op, g: [apply("EluGrad", [g, op.outputs[0]], name="EluGrad")])

# ---- Sigmoid -----------------------------------------------------------------------------------


def _no_complex_second_order(op: Any) -> None:
    if op.inputs[0].dtype.is_complex:
        raise NotImplementedError(
            f"{op.type}: second derivatives of complex tanh/sigmoid are not implemented ({op.name})"
        )


Sigmoid = defop("Sigmoid", shape=unchanged_shape, cost=elementwise_cost(12))


@Sigmoid.kernel("cpu", "gpu", dtypes=_dt.FLOAT_COMPLEX)
def _sigmoid(ctx, x):
    return _sigmoid_np(ctx.xp, x)


def _sigmoid_np(xp: Any, x: Any) -> Any:
    """1 / (1 + exp(-x)); exp overflows to inf only where the result underflows to 0 anyway."""
    with np.errstate(over="ignore"):
        e = xp.exp(-x)
    one = x.dtype.type(1)
    if not e.ndim:  # a 0-d input gives a numpy scalar, which has no buffer to write into
        return one / (one + e)
    e += one
    return xp.reciprocal(e, out=e)


SigmoidGrad = defop("SigmoidGrad", shape=_grad_shape, cost=elementwise_cost(3))


@SigmoidGrad.kernel("cpu", "gpu", dtypes=_dt.FLOAT_COMPLEX)
def _sigmoid_grad_kernel(ctx, y, g):
    d = y * (y.dtype.type(1) - y)
    return g * (ctx.xp.conj(d) if d.dtype.kind == "c" else d)  # TF's: the conjugate


Sigmoid.gradient(lambda op, g: [apply("SigmoidGrad", [op.outputs[0], g], name="SigmoidGrad")])


@SigmoidGrad.gradient
def _sigmoid_grad_grad(op, gg):
    from .math import multiply, subtract

    y, g = op.inputs
    _no_complex_second_order(op)
    one = convert_to_tensor(1, dtype=y.dtype)
    two = convert_to_tensor(2, dtype=y.dtype)
    gy = multiply(multiply(gg, g), subtract(one, multiply(two, y)))
    return [gy, apply("SigmoidGrad", [y, gg], name="SigmoidGrad")]


# ---- Tanh --------------------------------------------------------------------------------------

Tanh = defop("Tanh", shape=unchanged_shape, cost=elementwise_cost(12))


@Tanh.kernel("cpu", "gpu", dtypes=_dt.FLOAT_COMPLEX)
def _tanh(ctx, x):
    return ctx.xp.tanh(x)


TanhGrad = defop("TanhGrad", shape=_grad_shape, cost=elementwise_cost(3))


@TanhGrad.kernel("cpu", "gpu", dtypes=_dt.FLOAT_COMPLEX)
def _tanh_grad_kernel(ctx, y, g):
    d = y.dtype.type(1) - y * y
    return g * (ctx.xp.conj(d) if d.dtype.kind == "c" else d)  # TF's: the conjugate


Tanh.gradient(lambda op, g: [apply("TanhGrad", [op.outputs[0], g], name="TanhGrad")])


@TanhGrad.gradient
def _tanh_grad_grad(op, gg):
    from .math import multiply

    y, g = op.inputs
    _no_complex_second_order(op)
    gy = multiply(multiply(gg, g), multiply(convert_to_tensor(-2, dtype=y.dtype), y))
    return [gy, apply("TanhGrad", [y, gg], name="TanhGrad")]


# ---- Softplus ----------------------------------------------------------------------------------

Softplus = defop("Softplus", shape=unchanged_shape, cost=elementwise_cost(15))


@Softplus.kernel("cpu", "gpu", dtypes=F)
def _softplus(ctx, x):
    xp = ctx.xp
    r = xp.log1p(xp.exp(-xp.abs(x)))  # log(1 + e^x) = max(x, 0) + log1p(e^-|x|), never overflows
    r += xp.maximum(x, _zero(x))
    return r


SoftplusGrad = defop("SoftplusGrad", shape=_grad_shape, cost=elementwise_cost(13))


@SoftplusGrad.kernel("cpu", "gpu", dtypes=F)
def _softplus_grad_kernel(ctx, g, x):
    return g * _sigmoid_np(ctx.xp, x)


Softplus.gradient(lambda op, g: [apply("SoftplusGrad", [g, op.inputs[0]], name="SoftplusGrad")])


def _unary_fn(op_type: str, doc: str):
    def fn(features: Any, name: str | None = None) -> Tensor:
        return apply(op_type, [features], name=name or op_type)

    fn.__name__ = op_type.lower()
    fn.__doc__ = doc
    return fn


relu = _unary_fn("Relu", "max(features, 0), elementwise.")
relu6 = _unary_fn("Relu6", "min(max(features, 0), 6), elementwise.")
elu = _unary_fn("Elu", "features where > 0, else exp(features) - 1.")
softplus = _unary_fn("Softplus", "log(1 + exp(features)), computed without overflow.")


def sigmoid(x: Any, name: str | None = None) -> Tensor:
    """1 / (1 + exp(-x)), elementwise."""
    return apply("Sigmoid", [x], name=name or "Sigmoid")


def tanh(x: Any, name: str | None = None) -> Tensor:
    """Hyperbolic tangent, elementwise."""
    return apply("Tanh", [x], name=name or "Tanh")


def leaky_relu(features: Any, alpha: float = 0.2, name: str | None = None) -> Tensor:
    """features where > 0, else alpha * features."""
    return apply("LeakyRelu", [features], {"alpha": float(alpha)}, name or "LeakyRelu")


# ================================================================================================
# Softmax, log-softmax and cross-entropy losses
# ================================================================================================


def _check_axis(op_name: str, axis: int, ndims: int | None) -> None:
    if ndims is not None and not -ndims <= axis < ndims:
        raise InvalidArgumentError(f"{op_name}: axis {axis} out of range for rank {ndims}")


def _softmax_shape(op):
    x = op.inputs[0]
    _check_axis(op.type, op.attrs["axis"], x.shape.ndims)
    return [(x.shape, x.dtype)]


def _log_softmax_np(xp: Any, x: Any, axis: int) -> Any:
    r = x - x.max(axis=axis, keepdims=True)
    lse = xp.log(xp.exp(r).sum(axis=axis, keepdims=True))
    r -= lse
    return r


Softmax = defop("Softmax", shape=_softmax_shape, cost=elementwise_cost(15))


@Softmax.kernel("cpu", "gpu", dtypes=F)
def _softmax(ctx, x):
    axis = ctx.attrs["axis"]
    e = x - x.max(axis=axis, keepdims=True)
    ctx.xp.exp(e, out=e)
    e /= e.sum(axis=axis, keepdims=True)
    return e


SoftmaxGrad = defop("SoftmaxGrad", shape=_grad_shape, cost=elementwise_cost(4))


@SoftmaxGrad.kernel("cpu", "gpu", dtypes=F)
def _softmax_grad_kernel(ctx, g, y):
    gy = g * y
    s = gy.sum(axis=ctx.attrs["axis"], keepdims=True)
    gy -= y * s
    return gy


Softmax.gradient(
    lambda op, g: [apply("SoftmaxGrad", [g, op.outputs[0]], dict(op.attrs), "SoftmaxGrad")]
)

LogSoftmax = defop("LogSoftmax", shape=_softmax_shape, cost=elementwise_cost(15))


@LogSoftmax.kernel("cpu", "gpu", dtypes=F)
def _log_softmax(ctx, x):
    return _log_softmax_np(ctx.xp, x, ctx.attrs["axis"])


LogSoftmaxGrad = defop("LogSoftmaxGrad", shape=_grad_shape, cost=elementwise_cost(13))


@LogSoftmaxGrad.kernel("cpu", "gpu", dtypes=F)
def _log_softmax_grad_kernel(ctx, g, y):
    return g - ctx.xp.exp(y) * g.sum(axis=ctx.attrs["axis"], keepdims=True)


LogSoftmax.gradient(
    lambda op, g: [apply("LogSoftmaxGrad", [g, op.outputs[0]], dict(op.attrs), "LogSoftmaxGrad")]
)


def softmax(
    logits: Any, axis: int | None = None, name: str | None = None, dim: int | None = None
) -> Tensor:
    """exp(logits) / sum(exp(logits)) along ``axis`` (default: the last), computed stably."""
    axis = -1 if axis is None and dim is None else int(axis if axis is not None else dim)
    return apply("Softmax", [logits], {"axis": axis}, name or "Softmax")


def log_softmax(
    logits: Any, axis: int | None = None, name: str | None = None, dim: int | None = None
) -> Tensor:
    """logits - log(sum(exp(logits))) along ``axis`` (default: the last), computed stably."""
    axis = -1 if axis is None and dim is None else int(axis if axis is not None else dim)
    return apply("LogSoftmax", [logits], {"axis": axis}, name or "LogSoftmax")


# ---- SoftmaxCrossEntropyWithLogits: outputs (loss, backprop = d loss / d logits) ---------------

SoftmaxCrossEntropyWithLogits = defop("SoftmaxCrossEntropyWithLogits")


@SoftmaxCrossEntropyWithLogits.shape
def _sce_shape(op):
    logits, labels = op.inputs
    dt = same_dtype(op)
    axis = op.attrs["axis"]
    if not logits.shape.is_compatible_with(labels.shape):
        raise InvalidArgumentError(
            f"softmax_cross_entropy_with_logits: logits and labels must have the same shape, "
            f"got logits {logits.shape} and labels {labels.shape}"
        )
    s = logits.shape.merge_with(labels.shape)
    if s.ndims is None:
        return [(TensorShape(None), dt), (s, dt)]
    _check_axis(op.type, axis, s.ndims)
    a = axis % s.ndims
    return [(TensorShape(d for i, d in enumerate(s.dims) if i != a), dt), (s, dt)]


@SoftmaxCrossEntropyWithLogits.kernel("cpu", "gpu", dtypes=F)
def _sce(ctx, logits, labels):
    xp, axis = ctx.xp, ctx.attrs["axis"]
    logp = _log_softmax_np(xp, logits, axis)
    loss = -(labels * logp).sum(axis=axis)
    backprop = xp.exp(logp, out=logp)
    # softmax - labels, as TF's kernel: d loss / d logits where each row of labels sums to 1
    # (the exact one is softmax * sum(labels) - labels; TF1 programs with multi-hot labels,
    # GraphSAGE's, train with TF's, so hetbed's equals it)
    backprop -= labels
    return loss.astype(logits.dtype, copy=False), backprop


@SoftmaxCrossEntropyWithLogits.gradient
def _sce_grad(op, g, _g_backprop):
    from .math import multiply, negative, reshape_keep

    logits = op.inputs[0]
    axis = op.attrs["axis"]
    if logits.shape.ndims is not None:
        axis %= logits.shape.ndims
    gk = reshape_keep(g, logits, (axis,))
    d_logits = multiply(gk, op.outputs[1])
    d_labels = multiply(negative(gk), log_softmax(logits, axis=axis))
    return [d_logits, d_labels]


@SoftmaxCrossEntropyWithLogits.cost
def _sce_cost(op, ins, outs):
    return _rw_cost(op, ins, outs, 20 * numel(ins[0]))


def softmax_cross_entropy_with_logits_v2(
    _sentinel: Any = None,
    labels: Any = None,
    logits: Any = None,
    axis: int | None = None,
    name: str | None = None,
    dim: int | None = None,
) -> Tensor:
    """Per-example -sum(labels * log_softmax(logits)) along ``axis`` (default: last).

    Gradients flow into both logits and labels. Call with named arguments only.
    Raises InvalidArgumentError when labels and logits differ in shape.
    """
    _named_only("softmax_cross_entropy_with_logits_v2", _sentinel, labels, logits)
    logits = convert_to_tensor(logits)
    labels = _labels_as(labels, logits, any_dtype=True)
    axis = -1 if axis is None and dim is None else int(axis if axis is not None else dim)
    if logits.shape.ndims is None and axis >= 0:
        raise InvalidArgumentError(
            f"softmax_cross_entropy_with_logits: logits {logits.name} have an unknown rank, so "
            f"axis must count from the end (e.g. -1), got {axis}"
        )
    lr, yr = logits.shape.ndims, labels.shape.ndims
    if lr is not None and yr is not None:
        if lr != yr or not logits.shape.is_compatible_with(labels.shape):
            return _xent_flat(labels, logits, axis, name)
    loss, _ = apply(
        "SoftmaxCrossEntropyWithLogits",
        [logits, labels],
        {"axis": axis},
        name or "SoftmaxCrossEntropyWithLogits",
    )
    return loss


def _xent_flat(labels: Tensor, logits: Tensor, axis: int, name: str | None) -> Tensor:
    """TF1's route for labels whose shape differs from the logits': move ``axis`` last (ranks
    must then agree), flatten both to matrices [rows, classes], broadcast them (rows and classes
    equal or 1), and reshape the loss to the logits' shape without the class dimension."""
    from .array import reshape, shape
    from .manip import transpose
    from .shape_ops import broadcast_to

    ls, ys = logits.shape, labels.shape
    lr, yr = ls.ndims, ys.ndims

    def bad(why: str, given: tuple = (logits.shape, labels.shape)) -> InvalidArgumentError:
        return InvalidArgumentError(
            f"softmax_cross_entropy_with_logits: {why}: logits {given[0]} and labels {given[1]}"
        )

    if lr == 0 or yr == 0:
        raise bad("logits and labels must have at least one dimension")
    if not -lr <= axis < lr:
        raise bad(f"axis {axis} is out of range")
    a = axis % lr
    if a != lr - 1:
        if lr != yr:
            raise bad(f"with axis={axis} (not the last) they must have the same rank")
        perm = [i for i in range(lr) if i != a] + [a]
        logits, labels = transpose(logits, perm), transpose(labels, perm)
        ls, ys = logits.shape, labels.shape

    def rows_cols(s: TensorShape) -> tuple:
        outer = s.dims[:-1]
        rows = None if None in outer else int(np.prod(outer, dtype=np.int64))
        return rows, s.dims[-1]

    (lrows, lc), (yrows, yc) = rows_cols(ls), rows_cols(ys)
    if lrows is not None and yrows is not None and yrows not in (1, lrows):
        raise bad(
            f"labels have {yrows} rows of classes where logits have {lrows} (a label shape "
            "must flatten to as many rows as the logits, or one)"
        )
    if lc is not None and yc is not None and lc != yc and 1 not in (lc, yc):
        raise bad(f"{lc} classes in logits but {yc} in labels")
    logits2 = reshape(logits, [-1, lc if lc is not None else shape(logits)[-1]])
    labels2 = reshape(labels, [-1, yc if yc is not None else shape(labels)[-1]])
    l2, y2 = logits2.shape, labels2.shape
    if l2.is_fully_defined() and y2.is_fully_defined():
        target = [max(l2.dims[0], y2.dims[0]), max(l2.dims[1], y2.dims[1])]
        if l2.as_list() != target:
            logits2 = broadcast_to(logits2, target)
        if y2.as_list() != target:
            labels2 = broadcast_to(labels2, target)
    else:
        from .shape_ops import broadcast_dynamic_shape

        target = broadcast_dynamic_shape(shape(logits2), shape(labels2))
        logits2, labels2 = broadcast_to(logits2, target), broadcast_to(labels2, target)
    loss, _ = apply(
        "SoftmaxCrossEntropyWithLogits",
        [logits2, labels2],
        {"axis": -1},
        name or "SoftmaxCrossEntropyWithLogits",
    )
    outer = ls.dims[:-1]
    return reshape(loss, list(outer) if None not in outer else shape(logits)[:-1])


def softmax_cross_entropy_with_logits(
    _sentinel: Any = None,
    labels: Any = None,
    logits: Any = None,
    dim: int = -1,
    name: str | None = None,
    axis: int | None = None,
) -> Tensor:
    """Like ``softmax_cross_entropy_with_logits_v2`` but, as in TF1, no gradient reaches labels."""
    from .array import stop_gradient

    _named_only("softmax_cross_entropy_with_logits", _sentinel, labels, logits)
    logits = convert_to_tensor(logits)
    labels = stop_gradient(_labels_as(labels, logits, any_dtype=True))
    return softmax_cross_entropy_with_logits_v2(
        labels=labels, logits=logits, axis=dim if axis is None else axis, name=name
    )


def _labels_as(labels: Any, logits: Tensor, any_dtype: bool = False) -> Tensor:
    """Labels in the logits' dtype: a tensor of another float dtype is cast, as TF1 does
    (float64 labels from a numpy pipeline beside float32 logits); with ``any_dtype`` (softmax
    cross-entropy, whose TF helper casts its labels to the logits' dtype) integer labels too
    (PetarV-/GAT feeds int32 one-hot labels)."""
    if any_dtype and not isinstance(labels, Tensor):
        labels = convert_to_tensor(labels)
    if (
        isinstance(labels, Tensor)
        and labels.dtype != logits.dtype
        and (labels.dtype.is_floating or (any_dtype and labels.dtype.is_integer))
    ):
        from .array import cast

        return cast(labels, logits.dtype)
    return convert_to_tensor(labels, dtype=logits.dtype)


def _named_only(fn: str, sentinel: Any, labels: Any, logits: Any) -> None:
    if sentinel is not None:
        raise ValueError(f"{fn}: call with named arguments only (labels=..., logits=...)")
    if labels is None or logits is None:
        raise ValueError(f"{fn}: both labels= and logits= are required")


# ---- SparseSoftmaxCrossEntropyWithLogits --------------------------------------------------------

SparseSoftmaxCrossEntropyWithLogits = defop("SparseSoftmaxCrossEntropyWithLogits")


@SparseSoftmaxCrossEntropyWithLogits.shape
def _ssce_shape(op):
    logits, labels = op.inputs
    if not labels.dtype.is_integer:
        raise InvalidArgumentError(
            f"sparse_softmax_cross_entropy_with_logits: labels must be int32 or int64, "
            f"got {labels.dtype.name}"
        )
    if not logits.dtype.is_floating:
        raise InvalidArgumentError(
            f"sparse_softmax_cross_entropy_with_logits: logits must be float, "
            f"got {logits.dtype.name}"
        )
    ls = logits.shape
    if ls.ndims == 0:
        raise InvalidArgumentError("sparse_softmax_cross_entropy_with_logits: logits is a scalar")
    batch = ls[:-1] if ls.ndims is not None else TensorShape(None)
    if not batch.is_compatible_with(labels.shape):
        raise InvalidArgumentError(
            f"sparse_softmax_cross_entropy_with_logits: labels shape {labels.shape} must equal "
            f"logits shape {ls} without its last dimension"
        )
    return [(batch.merge_with(labels.shape), logits.dtype), (ls, logits.dtype)]


@SparseSoftmaxCrossEntropyWithLogits.kernel("cpu", "gpu")
def _ssce(ctx, logits, labels):
    xp = ctx.xp
    n_classes = logits.shape[-1]
    if labels.size:
        if xp is np:
            lo, hi = int(labels.min()), int(labels.max())
        else:  # one copy to the host (a wait for the device) for both
            lo, hi = (int(v) for v in xp.stack([labels.min(), labels.max()]).get())
        if lo < 0 or hi >= n_classes:
            bad = lo if lo < 0 else hi
            raise InvalidArgumentError(
                f"sparse_softmax_cross_entropy_with_logits: received a label value of {bad} "
                f"which is outside the valid range of [0, {n_classes})"
            )
    logp = _log_softmax_np(xp, logits, -1)
    idx = labels[..., None].astype(np.intp)
    loss = -xp.take_along_axis(logp, idx, axis=-1)[..., 0]
    backprop = xp.exp(logp, out=logp)
    flat = backprop.reshape(-1, n_classes)
    flat[xp.arange(flat.shape[0]), labels.reshape(-1)] -= logits.dtype.type(1)
    return loss, backprop


@SparseSoftmaxCrossEntropyWithLogits.gradient
def _ssce_grad(op, g, _g_backprop):
    from .math import multiply, reshape_keep

    logits = op.inputs[0]
    gk = reshape_keep(g, logits, (logits.shape.ndims - 1,))
    return [multiply(gk, op.outputs[1]), None]


SparseSoftmaxCrossEntropyWithLogits.cost(_sce_cost)


def sparse_softmax_cross_entropy_with_logits(
    _sentinel: Any = None, labels: Any = None, logits: Any = None, name: str | None = None
) -> Tensor:
    """Per-example -log_softmax(logits)[label], labels being class indices (int32/int64).

    Labels have the shape of logits without its last dimension; a label outside
    [0, num_classes) raises InvalidArgumentError when the op runs.
    """
    _named_only("sparse_softmax_cross_entropy_with_logits", _sentinel, labels, logits)
    logits = convert_to_tensor(logits)
    if logits.shape.ndims is None:
        raise InvalidArgumentError(
            f"sparse_softmax_cross_entropy_with_logits: logits {logits.name} must have a known rank"
        )
    labels = convert_to_tensor(labels)
    loss, _ = apply(
        "SparseSoftmaxCrossEntropyWithLogits",
        [logits, labels],
        name=name or "SparseSoftmaxCrossEntropyWithLogits",
    )
    return loss


# ---- SigmoidCrossEntropyWithLogits --------------------------------------------------------------

SigmoidCrossEntropyWithLogits = defop("SigmoidCrossEntropyWithLogits", cost=elementwise_cost(20))


@SigmoidCrossEntropyWithLogits.shape
def _sigce_shape(op):
    logits, labels = op.inputs
    dt = same_dtype(op)
    if not logits.shape.is_compatible_with(labels.shape):
        raise InvalidArgumentError(
            f"sigmoid_cross_entropy_with_logits: logits and labels must have the same shape, "
            f"got logits {logits.shape} and labels {labels.shape}"
        )
    return [(logits.shape.merge_with(labels.shape), dt)]


@SigmoidCrossEntropyWithLogits.kernel("cpu", "gpu", dtypes=F)
def _sigce(ctx, x, z):
    xp = ctx.xp
    r = xp.log1p(xp.exp(-xp.abs(x)))  # max(x, 0) - x z + log(1 + e^-|x|): stable for any x
    r += xp.maximum(x, _zero(x))
    r -= x * z
    return r


@SigmoidCrossEntropyWithLogits.gradient
def _sigce_grad(op, g):
    from .math import multiply, negative, subtract

    x, z = op.inputs
    return [multiply(g, subtract(sigmoid(x), z)), multiply(negative(g), x)]


def sigmoid_cross_entropy_with_logits(
    _sentinel: Any = None, labels: Any = None, logits: Any = None, name: str | None = None
) -> Tensor:
    """Elementwise -z log(sigmoid(x)) - (1 - z) log(1 - sigmoid(x)) for labels z, logits x."""
    _named_only("sigmoid_cross_entropy_with_logits", _sentinel, labels, logits)
    logits = convert_to_tensor(logits)
    labels = _labels_as(labels, logits)
    return apply(
        "SigmoidCrossEntropyWithLogits",
        [logits, labels],
        name=name or "SigmoidCrossEntropyWithLogits",
    )


# ---- L2Loss ------------------------------------------------------------------------------------

L2Loss = defop("L2Loss", cost=elementwise_cost(2))


@L2Loss.shape
def _l2_loss_shape(op):
    return [(TensorShape([]), op.inputs[0].dtype)]


@L2Loss.kernel("cpu", "gpu", dtypes=F)
def _l2_loss(ctx, x):
    flat = x.reshape(-1)
    return ctx.xp.asarray(flat @ flat * x.dtype.type(0.5), dtype=x.dtype)


@L2Loss.gradient
def _l2_loss_grad(op, g):
    from .math import multiply

    return [multiply(g, op.inputs[0])]


@L2Loss.cost
def _l2_loss_cost(op, ins, outs):
    return _rw_cost(op, ins, outs, 2 * numel(ins[0]))


def l2_loss(t: Any, name: str | None = None) -> Tensor:
    """sum(t ** 2) / 2, a scalar."""
    return apply("L2Loss", [t], name=name or "L2Loss")


# ================================================================================================
# BiasAdd, xw_plus_b, in_top_k, l2_normalize, moments
# ================================================================================================

BiasAdd = defop("BiasAdd", cost=elementwise_cost(1))


@BiasAdd.shape
def _bias_add_shape(op):
    v, b = op.inputs
    dt = same_dtype(op)
    if b.shape.ndims not in (None, 1):
        raise InvalidArgumentError(f"BiasAdd: bias must be 1-D, got shape {b.shape}")
    if v.shape.ndims is not None and v.shape.ndims < 2:
        raise InvalidArgumentError(f"BiasAdd: value must be at least 2-D, got shape {v.shape}")
    c = v.shape[-1] if v.shape.ndims else None
    if c is not None and b.shape.ndims == 1 and b.shape[0] is not None and b.shape[0] != c:
        raise InvalidArgumentError(
            f"BiasAdd: bias of shape {b.shape} does not match the last dimension of value {v.shape}"
        )
    if v.shape.ndims is None:
        return [(v.shape, dt)]
    return [(TensorShape(list(v.shape.dims[:-1]) + [c if c is not None else b.shape[0]]), dt)]


@BiasAdd.kernel("cpu", "gpu", dtypes=_dt.NUMERIC)
def _bias_add(ctx, v, b):
    fast = _cpu_fast(v, b)
    if fast is not None and v.size and v.ndim >= 1 and b.shape == v.shape[-1:]:
        return fast.bias_add(v, b)
    return v + b


BiasAddGrad = defop("BiasAddGrad")


@BiasAddGrad.shape
def _bias_add_grad_shape(op):
    g = op.inputs[0]
    c = g.shape[-1] if g.shape.ndims else None
    return [(TensorShape([c]), g.dtype)]


@BiasAddGrad.kernel("cpu", "gpu", dtypes=_dt.NUMERIC)
def _bias_add_grad_kernel(ctx, g):
    fast = _cpu_fast(g)
    if fast is not None and g.size:
        return fast.bias_add_grad(g)
    return g.reshape(-1, g.shape[-1]).sum(axis=0, dtype=g.dtype)


@BiasAddGrad.cost
def _bias_add_grad_cost(op, ins, outs):
    return _rw_cost(op, ins, outs, numel(ins[0]))


@BiasAdd.gradient
def _bias_add_grad(op, g):
    return [g, apply("BiasAddGrad", [g], name="BiasAddGrad")]


@BiasAddGrad.gradient
def _bias_add_grad_grad(op, gg):
    from .math import broadcast_like

    return [broadcast_like(gg, op.inputs[0])]


def bias_add(
    value: Any, bias: Any, data_format: str | None = None, name: str | None = None
) -> Tensor:
    """value + bias, the 1-D bias added along the last dimension of value."""
    if data_format in ("NCHW", "NC..."):  # the bias along dimension 1
        from .array import reshape
        from .math import add

        value = convert_to_tensor(value)
        bias = convert_to_tensor(bias, dtype=value.dtype)
        rank = value.shape.ndims
        if rank is None or rank < 2:
            raise InvalidArgumentError(
                f"bias_add: NCHW needs an input of known rank >= 2, got {value.shape}"
            )
        c, n = value.shape.dims[1], bias.shape.dims[0] if bias.shape.ndims == 1 else None
        if bias.shape.ndims != 1 or (c is not None and n is not None and c != n):
            raise InvalidArgumentError(
                f"bias_add: the bias {bias.shape} must be a vector of the input's {c} channels "
                f"(dimension 1 of {value.shape} in NCHW)"
            )
        return add(value, reshape(bias, [-1] + [1] * (rank - 2)), name=name or "BiasAdd")
    if data_format not in (None, "NHWC", "N...C"):
        raise UnimplementedError(
            f"bias_add: data_format {data_format!r} is not supported (NHWC or NCHW)"
        )
    value = convert_to_tensor(value)
    bias = convert_to_tensor(bias, dtype=value.dtype)
    return apply("BiasAdd", [value, bias], name=name or "BiasAdd")


def xw_plus_b(x: Any, weights: Any, biases: Any, name: str | None = None) -> Tensor:
    """matmul(x, weights) + biases."""
    from .math import matmul

    return bias_add(matmul(x, weights), biases, name=name or "xw_plus_b")


# ---- InTopK ------------------------------------------------------------------------------------

InTopK = defop("InTopK", differentiable=False)


@InTopK.shape
def _in_top_k_shape(op):
    p, t = op.inputs
    if p.shape.ndims not in (None, 2):
        raise InvalidArgumentError(f"in_top_k: predictions must be 2-D, got shape {p.shape}")
    if t.shape.ndims not in (None, 1):
        raise InvalidArgumentError(f"in_top_k: targets must be 1-D, got shape {t.shape}")
    if not t.dtype.is_integer:
        raise InvalidArgumentError(f"in_top_k: targets must be int, got {t.dtype.name}")
    n = p.shape[0] if p.shape.ndims else None
    if not TensorShape([n]).is_compatible_with(t.shape):
        raise InvalidArgumentError(
            f"in_top_k: predictions {p.shape} and targets {t.shape} differ in batch size"
        )
    return [(TensorShape([n]).merge_with(t.shape), _dt.bool_)]


@InTopK.kernel("cpu", "gpu")
def _in_top_k(ctx, p, t):
    xp = ctx.xp
    n, c = p.shape
    valid = (t >= 0) & (t < c)
    tv = xp.take_along_axis(p, xp.clip(t, 0, max(c - 1, 0)).astype(np.intp)[:, None], axis=1)
    ahead = (p > tv).sum(axis=1)  # classes strictly better than the target (ties count as in)
    return valid & (ahead < ctx.attrs["k"]) & xp.isfinite(tv[:, 0])


@InTopK.cost
def _in_top_k_cost(op, ins, outs):
    return _rw_cost(op, ins, outs, numel(ins[0]))


def in_top_k(predictions: Any, targets: Any, k: int, name: str | None = None) -> Tensor:
    """Whether each target class is among the ``k`` largest predictions of its row (bool, [N]).

    Ties count in the target's favour, as in TensorFlow; out-of-range targets and non-finite
    predictions give False.
    """
    return apply("InTopK", [predictions, targets], {"k": int(k)}, name or "in_top_k")


def l2_normalize(
    x: Any,
    axis: Any = None,
    epsilon: float = 1e-12,
    name: str | None = None,
    dim: Any = None,
) -> Tensor:
    """x / sqrt(max(sum(x ** 2, axis), epsilon)); ``axis`` None normalizes over all elements."""
    from .math import maximum, multiply, reduce_sum, rsqrt, square

    x = convert_to_tensor(x)
    axis = axis if axis is not None else dim
    sq = reduce_sum(square(x), axis=axis, keepdims=True)
    inv = rsqrt(maximum(sq, convert_to_tensor(epsilon, dtype=x.dtype)))
    return multiply(x, inv, name=name or "l2_normalize")


def moments(
    x: Any,
    axes: Any,
    shift: Any = None,
    name: str | None = None,
    keep_dims: bool | None = None,
    keepdims: bool | None = None,
) -> tuple[Tensor, Tensor]:
    """(mean, variance) of ``x`` over ``axes`` (the population variance, as TF computes it)."""
    from .array import stop_gradient
    from .math import reduce_mean, squared_difference

    keep = bool(keepdims if keepdims is not None else (keep_dims or False))
    x = convert_to_tensor(x)
    mean_k = reduce_mean(x, axis=axes, keepdims=True, name="mean")
    var = reduce_mean(
        squared_difference(x, stop_gradient(mean_k)),
        axis=axes,
        keepdims=keep,
        name=name or "variance",
    )
    if keep:
        return mean_k, var
    axes_list = [int(axes)] if np.isscalar(axes) else [int(a) for a in axes]
    if axes_list and x.shape.ndims is not None:
        from .manip import squeeze

        return squeeze(mean_k, axis=axes_list, name="mean"), var
    return reduce_mean(x, axis=axes, keepdims=False, name="mean"), var


def batch_normalization(
    x: Any,
    mean: Any,
    variance: Any,
    offset: Any,
    scale: Any,
    variance_epsilon: float,
    name: str | None = None,
) -> Tensor:
    """scale * (x - mean) / sqrt(variance + epsilon) + offset; offset and scale may be None."""
    from .math import add, multiply, rsqrt, subtract

    x = convert_to_tensor(x)
    inv = rsqrt(add(variance, convert_to_tensor(variance_epsilon, dtype=x.dtype)))
    if scale is not None:
        inv = multiply(inv, scale)
    shift = multiply(mean, inv)
    shift = subtract(offset, shift) if offset is not None else multiply(shift, -1.0)
    return add(multiply(x, inv), shift, name=name or "batchnorm")


# ================================================================================================
# Convolution and pooling geometry (NHWC)
# ================================================================================================

_PADDINGS = ("SAME", "VALID")


def _check_padding(fn: str, padding: Any) -> str:
    if padding not in _PADDINGS:
        raise InvalidArgumentError(f"{fn}: padding must be 'SAME' or 'VALID', got {padding!r}")
    return padding


def _check_format(fn: str, data_format: Any) -> None:
    if data_format not in (None, "NHWC"):
        raise UnimplementedError(
            f"{fn}: data_format {data_format!r} is not supported; hetbed images are NHWC "
            "(NHWC, or NCHW for conv2d, pools, bias_add and fused_batch_norm)"
        )


def _nchw(data_format: Any) -> bool:
    return data_format == "NCHW"


def _nhwc_window(v: Any) -> Any:
    """A [1, 1, h, w] (NCHW order) window given as a list of 4: in NHWC order."""
    if v is None or np.isscalar(v) or len(v) != 4:
        return v
    return [v[0], v[2], v[3], v[1]]


def _to_nhwc(x: Any, op: str = "NCHW") -> Tensor:
    """An NCHW input in NHWC order; ``op`` names the caller in the error for an input of
    another rank."""
    from .manip import transpose

    x = convert_to_tensor(x)
    if x.shape.ndims is not None and x.shape.ndims != 4:
        raise InvalidArgumentError(
            f"{op}: input must be 4-D in NCHW, got {x.name} with shape {x.shape}"
        )
    return transpose(x, [0, 2, 3, 1])


def _to_nchw(y: Tensor) -> Tensor:
    from .manip import transpose

    return transpose(y, [0, 3, 1, 2])


def _window4(fn: str, what: str, v: Any) -> tuple[int, int, int, int]:
    """Normalize strides/ksize/dilations to (1, h, w, 1) from an int, [h, w] or [1, h, w, 1]."""
    if v is None:
        raise InvalidArgumentError(f"{fn}: {what} is required")
    vals = [int(v)] * 2 if np.isscalar(v) else [int(a) for a in v]
    if len(vals) == 1:
        vals = vals * 2
    if len(vals) == 2:
        vals = [1, *vals, 1]
    if len(vals) != 4 or vals[0] != 1 or vals[3] != 1:
        raise InvalidArgumentError(
            f"{fn}: {what} must be [1, h, w, 1] (no striding over batch or channels), got {v}"
        )
    if vals[1] < 1 or vals[2] < 1:
        raise InvalidArgumentError(f"{fn}: {what} must be positive, got {v}")
    return tuple(vals)  # type: ignore[return-value]


def _geometry(fn: str, size: int, k: int, s: int, padding: str) -> tuple[int, int, int]:
    """(output size, padding before, padding after) along one spatial axis, TF's rule."""
    if padding == "VALID":
        out = (size - k) // s + 1 if size >= k else 0
        if out <= 0:
            raise InvalidArgumentError(
                f"{fn}: window {k} is larger than the input size {size} with VALID padding"
            )
        return out, 0, 0
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    return out, total // 2, total - total // 2


def _static_out(fn: str, size: int | None, k: int | None, s: int, padding: str) -> int | None:
    if size is None or (k is None and padding == "VALID"):
        return None
    if padding == "SAME":
        return -(-size // s)
    return _geometry(fn, size, k, s, padding)[0]


def _pad_hw(xp: Any, x: Any, ph: tuple, pw: tuple, value: Any = 0) -> Any:
    """NHWC ``x`` with ``ph`` rows above and below and ``pw`` columns left and right of
    ``value``: what ``xp.pad`` gives, written as one copy of ``x`` and a fill of each border
    (xp.pad's own bookkeeping costs several times that on a GPU, where each is one kernel)."""
    (t, b), (lft, r) = ph, pw
    if not (t or b or lft or r):
        return x
    n, h, w, c = x.shape
    out = xp.empty((n, h + t + b, w + lft + r, c), dtype=x.dtype)
    if t:
        out[:, :t] = value
    if b:
        out[:, t + h :] = value
    if lft:
        out[:, t : t + h, :lft] = value
    if r:
        out[:, t : t + h, lft + w :] = value
    out[:, t : t + h, lft : lft + w] = x
    return out


def _window(a: Any, i: int, j: int, sh: int, sw: int, ho: int, wo: int) -> Any:
    """The (N, Ho, Wo, C) strided slice of padded ``a`` seen by window position (i, j)."""
    return a[:, i : i + (ho - 1) * sh + 1 : sh, j : j + (wo - 1) * sw + 1 : sw]


def _im2col(xp: Any, x: Any, kh: int, kw: int, sh: int, sw: int, ho: int, wo: int) -> Any:
    """Patches of padded NHWC ``x`` as a (N*Ho*Wo, kh*kw*C) matrix, columns in (kh, kw, C) order:
    one strided (N, Ho, Wo, kh, kw, C) view of ``x`` and one copy (one kernel on a GPU)."""
    n, c = x.shape[0], x.shape[3]
    if kh == 1 and kw == 1:
        return x[:, : (ho - 1) * sh + 1 : sh, : (wo - 1) * sw + 1 : sw].reshape(n * ho * wo, c)
    s0, s1, s2, s3 = x.strides
    v = xp.lib.stride_tricks.as_strided(
        x, (n, ho, wo, kh, kw, c), (s0, s1 * sh, s2 * sw, s1, s2, s3)
    )
    return v.reshape(n * ho * wo, kh * kw * c)


def _conv_dims(op_name: str, attrs: dict, x_shape: tuple, f_shape: tuple) -> tuple:
    n, h, w, c = x_shape
    kh, kw, ci, co = f_shape
    if c != ci:
        raise InvalidArgumentError(
            f"{op_name}: input depth {c} (input shape {tuple(x_shape)}) does not match filter "
            f"in_channels {ci} (filter shape {tuple(f_shape)})"
        )
    _, sh, sw, _ = attrs["strides"]
    ho, pt, pb = _geometry(op_name, h, kh, sh, attrs["padding"])
    wo, pl, pr = _geometry(op_name, w, kw, sw, attrs["padding"])
    return n, h, w, c, kh, kw, co, sh, sw, ho, wo, (pt, pb), (pl, pr)


def _conv_flops(n, ho, wo, co, kh, kw, ci) -> float:
    return 2.0 * n * ho * wo * co * kh * kw * ci


def _shape_tensor(t: Tensor) -> Tensor:
    """A 1-D int32 tensor holding ``t``'s shape: a constant when static, else a Shape op."""
    from .array import constant, shape

    if t.shape.is_fully_defined():
        return constant(np.array(t.shape.as_list(), dtype=np.int32), name="shape")
    return shape(t)


def _sizes(v: Any) -> tuple:
    return tuple(int(d) for d in (v.tolist() if hasattr(v, "tolist") else v))


def _shape_input(ctx: Any, i: int, v: Any) -> tuple:
    """The values of shape input ``i`` (``v``). A host value (fed, or from a host op) is read;
    a device array is not when the graph knows its value (a constant shape): reading it would
    wait for every kernel queued on the GPU, as TensorFlow avoids by keeping shapes in host
    memory."""
    if isinstance(v, (np.ndarray, list, tuple)):
        return _sizes(v)
    known = ctx.state
    if known is None:
        xs = static_shape_value(ctx.op.inputs[i])
        known = ctx.state = tuple(xs.as_list()) if xs.is_fully_defined() else ()
    return known if known else _sizes(v)


# ---- Conv2D ------------------------------------------------------------------------------------

Conv2D = defop("Conv2D")


def _check_rank4(op_name: str, what: str, t: Tensor) -> None:
    if t.shape.ndims is not None and t.shape.ndims != 4:
        raise InvalidArgumentError(
            f"{op_name}: {what} must be 4-D, got {t.name} with shape {t.shape}"
        )


def _conv_out_shape(op_name: str, attrs: dict, xs: TensorShape, fs: TensorShape) -> TensorShape:
    if xs.ndims is None:
        return TensorShape([None, None, None, fs[3] if fs.ndims else None])
    n, h, w, c = xs.dims
    kh, kw, ci, co = fs.dims if fs.ndims is not None else (None,) * 4
    if c is not None and ci is not None and c != ci:
        raise InvalidArgumentError(
            f"{op_name}: input depth {c} (input shape {xs}) does not match filter "
            f"in_channels {ci} (filter shape {fs})"
        )
    _, sh, sw, _ = attrs["strides"]
    pad = attrs["padding"]
    return TensorShape(
        [n, _static_out(op_name, h, kh, sh, pad), _static_out(op_name, w, kw, sw, pad), co]
    )


@Conv2D.shape
def _conv2d_shape(op):
    x, f = op.inputs
    dt = same_dtype(op)
    _check_rank4("Conv2D", "input", x)
    _check_rank4("Conv2D", "filter", f)
    return [(_conv_out_shape("Conv2D", op.attrs, x.shape, f.shape), dt)]


def _half(xp: Any, *arrays: Any) -> bool:
    """Whether a CPU kernel gets float16 arrays: it then computes in float32 and rounds its
    result once (numpy has no fast float16 product: a float16 GEMM ran several hundred times
    slower; oneDNN's float16 convolutions and products accumulate in float32 too)."""
    return xp is np and arrays[0].dtype == np.float16


@Conv2D.kernel("cpu", "gpu", dtypes=F)
def _conv2d(ctx, x, f):
    xp = ctx.xp
    if _half(xp, x, f):
        return _conv2d(ctx, x.astype(np.float32), f.astype(np.float32)).astype(np.float16)
    n, h, w, c, kh, kw, co, sh, sw, ho, wo, ph, pw = _conv_dims(
        "Conv2D", ctx.attrs, x.shape, f.shape
    )
    fast = _cpu_fast(x, f)
    if fast is not None:
        return fast.conv2d(x, f, sh, sw, ho, wo, ph, pw)
    cols = _im2col(xp, _pad_hw(xp, x, ph, pw), kh, kw, sh, sw, ho, wo)
    return (cols @ f.reshape(kh * kw * c, co)).reshape(n, ho, wo, co)


def conv2d_check(ctx, x, f) -> None:
    """The checks Conv2D's kernel makes of its inputs (its errors name the op)."""
    _conv_dims("Conv2D", ctx.attrs, x.shape, f.shape)


def conv2d_bias(ctx, x, f, b, relu: bool) -> Any:
    """Conv2D (``ctx``: its context) fused with the BiasAdd (and Relu) that follow it
    (runtime/fusion.py): the final array from the compiled CPU kernels, which add the bias and
    apply the ReLU to each block of the output while it is in cache; or ``Unfused(conv)`` where
    they do not apply (another dtype, a bias that does not match), for the BiasAdd and Relu to
    finish as themselves."""
    from ..fusion import Unfused

    n, h, w, c, kh, kw, co, sh, sw, ho, wo, ph, pw = _conv_dims(
        "Conv2D", ctx.attrs, x.shape, f.shape
    )
    fast = _cpu_fast(x, f, b)
    if fast is None or b.shape != (co,):
        return Unfused(_conv2d(ctx, x, f))
    return fast.conv2d(x, f, sh, sw, ho, wo, ph, pw, np.ascontiguousarray(b), relu)


def bias_relu_in_place(y, b, relu: bool) -> bool:
    """``y += b`` (then the ReLU when ``relu``) in place on a MatMul's product ``y`` (rows, C)
    that nothing else reads (runtime/fusion.py); False, leaving ``y`` as it was, where the
    compiled kernels do not apply."""
    fast = _cpu_fast(y, b)
    if fast is None or y.ndim != 2 or b.shape != y.shape[1:] or not y.flags.c_contiguous:
        return False
    fast.bias_relu(y, np.ascontiguousarray(b), relu)
    return True


@Conv2D.gradient
def _conv2d_grad(op, g):
    x, f = op.inputs
    attrs = dict(op.attrs)
    dx = apply("Conv2DBackpropInput", [_shape_tensor(x), f, g], attrs, "Conv2DBackpropInput")
    df = apply("Conv2DBackpropFilter", [x, _shape_tensor(f), g], attrs, "Conv2DBackpropFilter")
    return [dx, df]


@Conv2D.cost
def _conv2d_cost(op, ins, outs):
    (n, ho, wo, co), (kh, kw, ci, _) = outs[0], ins[1]
    return _rw_cost(op, ins, outs, _conv_flops(n, ho, wo, co, kh, kw, ci))


# ---- Conv2DBackpropInput(input_sizes, filter, out_backprop) -> d input --------------------------

Conv2DBackpropInput = defop("Conv2DBackpropInput")


@Conv2DBackpropInput.shape
def _conv_bi_shape(op):
    sizes, f, dy = op.inputs
    if f.dtype != dy.dtype:
        raise InvalidArgumentError(
            f"Conv2DBackpropInput: filter is {f.dtype.name} but out_backprop is {dy.dtype.name}"
        )
    _check_rank4("Conv2DBackpropInput", "filter", f)
    _check_rank4("Conv2DBackpropInput", "out_backprop", dy)
    xs = static_shape_value(sizes)
    if xs.ndims not in (None, 4):
        raise InvalidArgumentError(f"Conv2DBackpropInput: input_sizes must have 4 values, got {xs}")
    if xs.ndims is None:
        xs = TensorShape([None] * 4)
    want = _conv_out_shape("Conv2DBackpropInput", op.attrs, xs, f.shape)
    if not want.is_compatible_with(dy.shape):
        raise InvalidArgumentError(
            f"Conv2DBackpropInput: out_backprop shape {dy.shape} does not match the conv2d "
            f"output shape {want} for input {xs} and filter {f.shape}"
        )
    return [(xs, dy.dtype)]


@Conv2DBackpropInput.kernel("cpu", "gpu")
def _conv2d_backprop_input(ctx, sizes, f, dy):
    xp = ctx.xp
    if _half(xp, f, dy):
        single = _conv2d_backprop_input(ctx, sizes, f.astype(np.float32), dy.astype(np.float32))
        return single.astype(np.float16)
    n, h, w, c, kh, kw, co, sh, sw, ho, wo, ph, pw = _conv_dims(
        "Conv2DBackpropInput", ctx.attrs, _shape_input(ctx, 0, sizes), f.shape
    )
    if dy.shape != (n, ho, wo, co):
        raise InvalidArgumentError(
            f"Conv2DBackpropInput: out_backprop shape {dy.shape} does not match the conv2d "
            f"output shape {(n, ho, wo, co)}"
        )
    fast = _cpu_fast(f, dy)
    if fast is not None:
        return fast.conv2d_backprop_input((n, h, w, c), f, dy, sh, sw, ph, pw)
    dy2 = dy.reshape(n * ho * wo, co)
    if kh == kw == sh == sw == 1:
        return (dy2 @ f.reshape(c, co).T).reshape(n, h, w, c)
    hp, wp = h + ph[0] + ph[1], w + pw[0] + pw[1]
    if sh == sw == 1:
        # The padded input's gradient is a stride-1 correlation of out_backprop, padded by
        # kh-1 (kw-1) before and what the padded input has beyond it after, with the filter
        # flipped in space: one im2col and one GEMM.
        e = _pad_hw(xp, dy, (kh - 1, hp - ho), (kw - 1, wp - wo))
        cols = _im2col(xp, e, kh, kw, 1, 1, hp, wp)
        flipped = f[::-1, ::-1].transpose(0, 1, 3, 2).reshape(kh * kw * co, c)
        dxp = (cols @ flipped).reshape(n, hp, wp, c)
        if (hp, wp) == (h, w):
            return dxp
        return xp.ascontiguousarray(dxp[:, ph[0] : ph[0] + h, pw[0] : pw[0] + w])
    # Strided: one GEMM per window position, added into the strided cells it touched: faster than one
    # big GEMM followed by a col2im that reads its result with large strides.
    dxp = xp.zeros((n, h + ph[0] + ph[1], w + pw[0] + pw[1], c), dtype=dy.dtype)
    for i in range(kh):
        for j in range(kw):
            win = _window(dxp, i, j, sh, sw, ho, wo)
            win += (dy2 @ f[i, j].T).reshape(n, ho, wo, c)
    if dxp.shape[1:3] == (h, w):
        return dxp
    return xp.ascontiguousarray(dxp[:, ph[0] : ph[0] + h, pw[0] : pw[0] + w])


@Conv2DBackpropInput.cost
def _conv_bi_cost(op, ins, outs):
    (n, _, _, ci), (kh, kw, _, co), (_, ho, wo, _) = outs[0], ins[1], ins[2]
    return _rw_cost(op, ins, outs, _conv_flops(n, ho, wo, co, kh, kw, ci))


# ---- Conv2DBackpropFilter(input, filter_sizes, out_backprop) -> d filter ------------------------

Conv2DBackpropFilter = defop("Conv2DBackpropFilter")


@Conv2DBackpropFilter.shape
def _conv_bf_shape(op):
    x, sizes, dy = op.inputs
    if x.dtype != dy.dtype:
        raise InvalidArgumentError(
            f"Conv2DBackpropFilter: input is {x.dtype.name} but out_backprop is {dy.dtype.name}"
        )
    _check_rank4("Conv2DBackpropFilter", "input", x)
    _check_rank4("Conv2DBackpropFilter", "out_backprop", dy)
    fs = static_shape_value(sizes)
    if fs.ndims not in (None, 4):
        raise InvalidArgumentError(
            f"Conv2DBackpropFilter: filter_sizes must have 4 values, got {fs}"
        )
    if fs.ndims is None:
        fs = TensorShape([None] * 4)
    want = _conv_out_shape("Conv2DBackpropFilter", op.attrs, x.shape, fs)
    if not want.is_compatible_with(dy.shape):
        raise InvalidArgumentError(
            f"Conv2DBackpropFilter: out_backprop shape {dy.shape} does not match the conv2d "
            f"output shape {want} for input {x.shape} and filter {fs}"
        )
    return [(fs, dy.dtype)]


@Conv2DBackpropFilter.kernel("cpu", "gpu", dtypes=F)
def _conv2d_backprop_filter(ctx, x, sizes, dy):
    xp = ctx.xp
    if _half(xp, x, dy):
        single = _conv2d_backprop_filter(ctx, x.astype(np.float32), sizes, dy.astype(np.float32))
        return single.astype(np.float16)
    n, h, w, c, kh, kw, co, sh, sw, ho, wo, ph, pw = _conv_dims(
        "Conv2DBackpropFilter", ctx.attrs, x.shape, _shape_input(ctx, 1, sizes)
    )
    if dy.shape != (n, ho, wo, co):
        raise InvalidArgumentError(
            f"Conv2DBackpropFilter: out_backprop shape {dy.shape} does not match the conv2d "
            f"output shape {(n, ho, wo, co)}"
        )
    fast = _cpu_fast(x, dy)
    if fast is not None:
        return fast.conv2d_backprop_filter(x, dy, kh, kw, sh, sw, ph, pw)
    cols = _im2col(xp, _pad_hw(xp, x, ph, pw), kh, kw, sh, sw, ho, wo)
    return (cols.T @ dy.reshape(n * ho * wo, co)).reshape(kh, kw, c, co)


def conv2d_backprop_pair(ctx, is_filter: bool, x, f, dy, sizes) -> tuple | None:
    """(filter gradient, input gradient) of one convolution from one pass over the output
    gradient ``dy`` (runtime/fusion.py's pairs; ``ops.winograd.conv2d_backprop_both``), for the
    head ``ctx`` (the filter gradient's when ``is_filter``, whose ``sizes`` is the filter's
    shape; else the input gradient's, ``sizes`` the input's shape): the head's own checks
    first, so that its errors name it; None where the shared pass does not apply (the head
    then runs its own kernel, the other op its own)."""
    if is_filter:
        dims = _conv_dims("Conv2DBackpropFilter", ctx.attrs, x.shape, _shape_input(ctx, 1, sizes))
    else:
        dims = _conv_dims("Conv2DBackpropInput", ctx.attrs, _shape_input(ctx, 0, sizes), f.shape)
    n, h, w, c, kh, kw, co, sh, sw, ho, wo, ph, pw = dims
    if dy.shape != (n, ho, wo, co):
        name = "Conv2DBackpropFilter" if is_filter else "Conv2DBackpropInput"
        raise InvalidArgumentError(
            f"{name}: out_backprop shape {dy.shape} does not match the conv2d output shape "
            f"{(n, ho, wo, co)}"
        )
    if tuple(f.shape) != (kh, kw, c, co) or tuple(x.shape) != (n, h, w, c):
        return None
    fast = _cpu_fast(x, f, dy)
    if fast is None:
        return None
    return fast.conv2d_backprop_pair(x, f, dy, sh, sw, ph, pw)


@Conv2DBackpropFilter.cost
def _conv_bf_cost(op, ins, outs):
    (kh, kw, ci, co), (n, ho, wo, _) = outs[0], ins[2]
    return _rw_cost(op, ins, outs, _conv_flops(n, ho, wo, co, kh, kw, ci))


def _conv_attrs(fn: str, strides: Any, padding: Any, data_format: Any, dilations: Any) -> dict:
    _check_format(fn, data_format)
    if dilations is not None and _window4(fn, "dilations", dilations) != (1, 1, 1, 1):
        raise UnimplementedError(f"{fn}: dilations other than 1 are not supported, got {dilations}")
    return {
        "strides": _window4(fn, "strides", strides),
        "padding": _check_padding(fn, padding),
        "data_format": "NHWC",
    }


def conv2d(
    input: Any,
    filter: Any = None,
    strides: Any = None,
    padding: Any = None,
    use_cudnn_on_gpu: bool = True,
    data_format: str = "NHWC",
    dilations: Any = None,
    name: str | None = None,
    filters: Any = None,
) -> Tensor:
    """2-D convolution (cross-correlation, as in TF) of NHWC ``input`` with a
    (kh, kw, in_channels, out_channels) ``filter``.

    ``strides`` is [1, sh, sw, 1] (or [sh, sw], or an int); ``padding`` "SAME" or "VALID" with
    TensorFlow's rule (the extra padding row/column goes at the bottom/right). Raises
    InvalidArgumentError on a bad padding string or when input depth and filter in_channels differ;
    UnimplementedError for NCHW. ``dilations`` [1, rh, rw, 1] convolve with a dilated filter.
    """
    filter = filters if filter is None else filter
    if _nchw(data_format):  # TF's NCHW: the NHWC convolution between transposes
        y = conv2d(
            _to_nhwc(input, "Conv2D"),
            filter,
            _nhwc_window(strides),
            padding,
            use_cudnn_on_gpu,
            "NHWC",
            _nhwc_window(dilations),
            name,
        )
        return _to_nchw(y)
    if dilations is not None and _window4("conv2d", "dilations", dilations) != (1, 1, 1, 1):
        from .nn_extra import dilated_conv2d  # WP3: dilations by a dilated filter

        _check_format("conv2d", data_format)
        return dilated_conv2d(input, filter, strides, padding, dilations, name=name)
    attrs = _conv_attrs("conv2d", strides, padding, data_format, dilations)
    x = convert_to_tensor(input)
    f = convert_to_tensor(filter, dtype=x.dtype)
    return apply("Conv2D", [x, f], attrs, name or "Conv2D")


def conv2d_backprop_input(
    input_sizes: Any,
    filter: Any = None,
    out_backprop: Any = None,
    strides: Any = None,
    padding: Any = None,
    use_cudnn_on_gpu: bool = True,
    data_format: str = "NHWC",
    dilations: Any = None,
    name: str | None = None,
    filters: Any = None,
) -> Tensor:
    """The gradient of conv2d with respect to its input, of shape ``input_sizes`` (4 ints)."""
    from .array import constant

    filter = filters if filter is None else filter
    attrs = _conv_attrs("conv2d_backprop_input", strides, padding, data_format, dilations)
    if not isinstance(input_sizes, Tensor):
        input_sizes = constant(np.asarray(input_sizes, dtype=np.int32), name="input_sizes")
    return apply(
        "Conv2DBackpropInput",
        [input_sizes, filter, out_backprop],
        attrs,
        name or "Conv2DBackpropInput",
    )


def conv2d_backprop_filter(
    input: Any,
    filter_sizes: Any,
    out_backprop: Any,
    strides: Any,
    padding: Any,
    use_cudnn_on_gpu: bool = True,
    data_format: str = "NHWC",
    dilations: Any = None,
    name: str | None = None,
) -> Tensor:
    """The gradient of conv2d with respect to its filter, of shape ``filter_sizes`` (4 ints)."""
    from .array import constant

    attrs = _conv_attrs("conv2d_backprop_filter", strides, padding, data_format, dilations)
    if not isinstance(filter_sizes, Tensor):
        filter_sizes = constant(np.asarray(filter_sizes, dtype=np.int32), name="filter_sizes")
    return apply(
        "Conv2DBackpropFilter",
        [input, filter_sizes, out_backprop],
        attrs,
        name or "Conv2DBackpropFilter",
    )


# ---- MaxPool, AvgPool and their gradients ------------------------------------------------------


def _pool_dims(op_name: str, attrs: dict, x_shape: tuple) -> tuple:
    n, h, w, c = x_shape
    _, kh, kw, _ = attrs["ksize"]
    _, sh, sw, _ = attrs["strides"]
    ho, pt, pb = _geometry(op_name, h, kh, sh, attrs["padding"])
    wo, pl, pr = _geometry(op_name, w, kw, sw, attrs["padding"])
    return n, h, w, c, kh, kw, sh, sw, ho, wo, (pt, pb), (pl, pr)


def _tiles(h: int, w: int, kh: int, kw: int, sh: int, sw: int, ho: int, wo: int) -> bool:
    """Whether the pooling windows tile the input exactly (no overlap, no padding, no rest)."""
    return kh == sh and kw == sw and ho * kh == h and wo * kw == w


def _pool_out_shape(op_name: str, attrs: dict, xs: TensorShape) -> TensorShape:
    if xs.ndims is None:
        return TensorShape([None] * 4)
    n, h, w, c = xs.dims
    _, kh, kw, _ = attrs["ksize"]
    _, sh, sw, _ = attrs["strides"]
    pad = attrs["padding"]
    return TensorShape(
        [n, _static_out(op_name, h, kh, sh, pad), _static_out(op_name, w, kw, sw, pad), c]
    )


def _pool_shape(op):
    x = op.inputs[0]
    _check_rank4(op.type, "input", x)
    return [(_pool_out_shape(op.type, op.attrs, x.shape), x.dtype)]


def _lowest(dtype: np.dtype) -> Any:
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def _pool_cost(per_window: float):
    def cost(op, ins, outs):
        _, kh, kw, _ = op.attrs["ksize"]
        return _rw_cost(op, ins, outs, per_window * kh * kw * numel(outs[0]))

    return cost


MaxPool = defop("MaxPool", shape=_pool_shape, cost=_pool_cost(1))


@MaxPool.kernel("cpu", "gpu", dtypes=_dt.NUMERIC)
def _max_pool(ctx, x):
    xp = ctx.xp
    n, h, w, c, kh, kw, sh, sw, ho, wo, ph, pw = _pool_dims("MaxPool", ctx.attrs, x.shape)
    fast = _cpu_fast(x)
    if fast is not None:
        return fast.max_pool(x, kh, kw, sh, sw, ho, wo, ph, pw)
    if _tiles(h, w, kh, kw, sh, sw, ho, wo):  # one reduction instead of kh*kw passes
        return x.reshape(n, ho, kh, wo, kw, c).max(axis=(2, 4))
    xpad = _pad_hw(xp, x, ph, pw, _lowest(x.dtype))
    out = None
    for i in range(kh):
        for j in range(kw):
            win = _window(xpad, i, j, sh, sw, ho, wo)
            out = win.copy() if out is None else xp.maximum(out, win, out=out)
    return out


MaxPoolGrad = defop("MaxPoolGrad", cost=_pool_cost(4))


@MaxPoolGrad.shape
def _max_pool_grad_shape(op):
    x, y, g = op.inputs
    want = _pool_out_shape("MaxPoolGrad", op.attrs, x.shape)
    if not want.is_compatible_with(g.shape) or not want.is_compatible_with(y.shape):
        raise InvalidArgumentError(
            f"MaxPoolGrad: output {y.shape} and gradient {g.shape} must match the pooled shape "
            f"{want} of input {x.shape}"
        )
    return [(x.shape, x.dtype)]


def max_pool_grad_relu(ctx, x, y, g) -> Any:
    """MaxPoolGrad fused with the ReluGrad after it, where the pooled input ``x`` is the ReLU's
    output (runtime/fusion.py): one pass writing ``dx * (x > 0)``; ``Unfused(dx)`` where the
    compiled kernels do not apply."""
    from ..fusion import Unfused

    n, h, w, c, kh, kw, sh, sw, ho, wo, ph, pw = _pool_dims("MaxPoolGrad", ctx.attrs, x.shape)
    fast = _cpu_fast(x, y, g)
    if fast is None:
        return Unfused(_max_pool_grad_kernel(ctx, x, y, g))
    return fast.max_pool_grad(x, y, g, kh, kw, sh, sw, ph, pw, relu=True)


@MaxPoolGrad.kernel("cpu", "gpu", dtypes=_dt.NUMERIC)
def _max_pool_grad_kernel(ctx, x, y, g):
    """Each window's gradient goes to its maximum; on ties, to the first in row-major order."""
    xp = ctx.xp
    n, h, w, c, kh, kw, sh, sw, ho, wo, ph, pw = _pool_dims("MaxPoolGrad", ctx.attrs, x.shape)
    fast = _cpu_fast(x, y, g)
    if fast is not None:
        return fast.max_pool_grad(x, y, g, kh, kw, sh, sw, ph, pw)
    if xp is not np and g.dtype == x.dtype:
        from . import nn_gpu

        if nn_gpu.supports(xp):  # one fused kernel instead of a dozen small ones
            return nn_gpu.max_pool_grad(xp, x, y, g, (n, h, w, c, kh, kw, sh, sw, ho, wo, ph, pw))
    if _tiles(h, w, kh, kw, sh, sw, ho, wo):
        # windows tile the input: each as a row of kh*kw values, the gradient to its first max
        k = kh * kw
        win = x.reshape(n, ho, kh, wo, kw, c).transpose(0, 1, 3, 5, 2, 4).reshape(n, ho, wo, c, k)
        hit = win == y[..., None]
        sel = (xp.arange(k) == hit.argmax(axis=-1)[..., None]) & hit  # none where no max (NaN)
        d = xp.where(sel, g[..., None], xp.zeros((), dtype=g.dtype))
        return d.reshape(n, ho, wo, c, kh, kw).transpose(0, 1, 4, 2, 5, 3).reshape(n, h, w, c)
    xpad = _pad_hw(xp, x, ph, pw, _lowest(x.dtype))
    dxp = xp.zeros(xpad.shape, dtype=g.dtype)
    open_ = xp.ones(y.shape, dtype=bool)  # windows whose maximum is not yet found
    hit = xp.empty(y.shape, dtype=bool)
    routed = xp.empty(y.shape, dtype=g.dtype)
    for i in range(kh):
        for j in range(kw):
            xp.equal(_window(xpad, i, j, sh, sw, ho, wo), y, out=hit)
            hit &= open_
            open_ ^= hit
            xp.multiply(g, hit, out=routed)
            win = _window(dxp, i, j, sh, sw, ho, wo)
            win += routed
    if dxp.shape[1:3] == (h, w):
        return dxp
    return xp.ascontiguousarray(dxp[:, ph[0] : ph[0] + h, pw[0] : pw[0] + w])


@MaxPool.gradient
def _max_pool_grad(op, g):
    return [apply("MaxPoolGrad", [op.inputs[0], op.outputs[0], g], dict(op.attrs), "MaxPoolGrad")]


AvgPool = defop("AvgPool", shape=_pool_shape, cost=_pool_cost(1))


def _avg_counts(xp: Any, dtype: Any, h, w, kh, kw, sh, sw, ho, wo, ph, pw) -> Any:
    """How many real (unpadded) inputs each output window covers, shaped (Ho, Wo, 1)."""

    def along(size, k, s, out, before):
        start = np.arange(out) * s - before
        return np.minimum(start + k, size) - np.maximum(start, 0)

    counts = along(h, kh, sh, ho, ph[0])[:, None] * along(w, kw, sw, wo, pw[0])[None, :]
    return xp.asarray(counts[:, :, None].astype(dtype))


@AvgPool.kernel("cpu", "gpu", dtypes=F)
def _avg_pool(ctx, x):
    xp = ctx.xp
    n, h, w, c, kh, kw, sh, sw, ho, wo, ph, pw = _pool_dims("AvgPool", ctx.attrs, x.shape)
    xpad = _pad_hw(xp, x, ph, pw)
    out = None
    for i in range(kh):
        for j in range(kw):
            win = _window(xpad, i, j, sh, sw, ho, wo)
            out = win.copy() if out is None else xp.add(out, win, out=out)
    out /= _avg_counts(xp, x.dtype, h, w, kh, kw, sh, sw, ho, wo, ph, pw)
    return out


AvgPoolGrad = defop("AvgPoolGrad", cost=_pool_cost(1))


@AvgPoolGrad.shape
def _avg_pool_grad_shape(op):
    sizes, g = op.inputs
    xs = static_shape_value(sizes)
    if xs.ndims not in (None, 4):
        raise InvalidArgumentError(f"AvgPoolGrad: orig_input_shape must have 4 values, got {xs}")
    want = _pool_out_shape("AvgPoolGrad", op.attrs, xs)
    if not want.is_compatible_with(g.shape):
        raise InvalidArgumentError(
            f"AvgPoolGrad: gradient {g.shape} does not match the pooled shape {want} of {xs}"
        )
    return [(xs if xs.ndims is not None else TensorShape([None] * 4), g.dtype)]


@AvgPoolGrad.kernel("cpu", "gpu")
def _avg_pool_grad_kernel(ctx, sizes, g):
    xp = ctx.xp
    n, h, w, c, kh, kw, sh, sw, ho, wo, ph, pw = _pool_dims(
        "AvgPoolGrad", ctx.attrs, _shape_input(ctx, 0, sizes)
    )
    gs = g / _avg_counts(xp, g.dtype, h, w, kh, kw, sh, sw, ho, wo, ph, pw)
    dxp = xp.zeros((n, h + ph[0] + ph[1], w + pw[0] + pw[1], c), dtype=g.dtype)
    for i in range(kh):
        for j in range(kw):
            _window(dxp, i, j, sh, sw, ho, wo)[...] += gs
    if dxp.shape[1:3] == (h, w):
        return dxp
    return xp.ascontiguousarray(dxp[:, ph[0] : ph[0] + h, pw[0] : pw[0] + w])


@AvgPool.gradient
def _avg_pool_grad(op, g):
    sizes = _shape_tensor(op.inputs[0])
    return [apply("AvgPoolGrad", [sizes, g], dict(op.attrs), "AvgPoolGrad")]


@AvgPoolGrad.gradient
def _avg_pool_grad_grad(op, gg):
    return [None, apply("AvgPool", [gg], dict(op.attrs), "AvgPool")]


def _pool_attrs(fn: str, ksize: Any, strides: Any, padding: Any, data_format: Any) -> dict:
    _check_format(fn, data_format)
    return {
        "ksize": _window4(fn, "ksize", ksize),
        "strides": _window4(fn, "strides", strides),
        "padding": _check_padding(fn, padding),
        "data_format": "NHWC",
    }


def max_pool(
    value: Any,
    ksize: Any,
    strides: Any,
    padding: Any,
    data_format: str = "NHWC",
    name: str | None = None,
    input: Any = None,
) -> Tensor:
    """Maximum over (kh, kw) windows of NHWC ``value``; ``ksize``/``strides`` as [1, h, w, 1].

    SAME padding never wins the maximum (it is -inf); the gradient goes to the first maximum.
    """
    value = input if value is None else value
    if _nchw(data_format):
        y = max_pool(
            _to_nhwc(value, "MaxPool"),
            _nhwc_window(ksize),
            _nhwc_window(strides),
            padding,
            "NHWC",
            name,
        )
        return _to_nchw(y)
    attrs = _pool_attrs("max_pool", ksize, strides, padding, data_format)
    return apply("MaxPool", [value], attrs, name or "MaxPool")


def avg_pool(
    value: Any,
    ksize: Any,
    strides: Any,
    padding: Any,
    data_format: str = "NHWC",
    name: str | None = None,
    input: Any = None,
) -> Tensor:
    """Mean over (kh, kw) windows of NHWC ``value``; with SAME padding, padded cells are left
    out of each mean (TensorFlow's rule)."""
    value = input if value is None else value
    if _nchw(data_format):
        y = avg_pool(
            _to_nhwc(value, "AvgPool"),
            _nhwc_window(ksize),
            _nhwc_window(strides),
            padding,
            "NHWC",
            name,
        )
        return _to_nchw(y)
    attrs = _pool_attrs("avg_pool", ksize, strides, padding, data_format)
    return apply("AvgPool", [value], attrs, name or "AvgPool")


# ================================================================================================
# FusedBatchNorm: outputs (y, batch_mean, batch_var), channels last
# ================================================================================================

FusedBatchNorm = defop("FusedBatchNorm")


def _channel_vec_check(op_name: str, what: str, t: Tensor, c: int | None) -> None:
    if t.shape.ndims not in (None, 1):
        raise InvalidArgumentError(f"{op_name}: {what} must be 1-D, got shape {t.shape}")
    if c is not None and t.shape.ndims == 1 and t.shape[0] not in (None, c):
        raise InvalidArgumentError(f"{op_name}: {what} has shape {t.shape} but x has {c} channels")


@FusedBatchNorm.shape
def _fbn_shape(op):
    x = op.inputs[0]
    if not x.dtype.is_floating:
        raise InvalidArgumentError(f"FusedBatchNorm: x must be float, got {x.dtype.name}")
    if x.shape.ndims is not None and x.shape.ndims < 2:
        raise InvalidArgumentError(f"FusedBatchNorm: x must be at least 2-D, got {x.shape}")
    c = x.shape[-1] if x.shape.ndims else None
    names = ["scale", "offset", "mean", "variance"]
    for what, t in zip(names, op.inputs[1:]):
        _channel_vec_check("FusedBatchNorm", what, t, c)
    sdt = op.inputs[1].dtype
    for what, t in zip(names[1:], op.inputs[2:]):
        if t.dtype != sdt:
            raise InvalidArgumentError(
                f"FusedBatchNorm: {what} is {t.dtype.name} but scale is {sdt.name}"
            )
    if not op.attrs["is_training"] and len(op.inputs) != 5:
        raise InvalidArgumentError("FusedBatchNorm: inference needs mean and variance")
    cs = TensorShape([c])
    return [(x.shape, x.dtype), (cs, sdt), (cs, sdt)]


@FusedBatchNorm.kernel("cpu", "gpu", dtypes=F)
def _fused_batch_norm(ctx, x, scale, offset, *stats):
    xp = ctx.xp
    eps = ctx.attrs["epsilon"]
    fast = _cpu_fast(x, scale, offset, *stats)
    if fast is not None and x.size:
        mean, var = stats if stats else (None, None)
        return fast.fused_batch_norm(x, scale, offset, mean, var, eps, ctx.attrs["is_training"])
    c = x.shape[-1]
    x2 = x.reshape(-1, c)
    if ctx.attrs["is_training"]:
        m = x2.shape[0]
        mean = x2.mean(axis=0)
        xc = x2 - mean
        var = xp.einsum("ij,ij->j", xc, xc) / max(m, 1)
        var_out = var * (m / (m - 1)) if m > 1 else var  # Bessel-corrected, as TF outputs it
    else:
        mean, var = stats
        xc = x2 - mean.astype(x.dtype, copy=False)
        var_out = var
    k = (scale / xp.sqrt(var + eps)).astype(x.dtype, copy=False)
    xc *= k
    xc += offset.astype(x.dtype, copy=False)
    sdt = scale.dtype
    return (
        xc.reshape(x.shape),
        xp.asarray(mean).astype(sdt, copy=False),
        xp.asarray(var_out).astype(sdt, copy=False),
    )


@FusedBatchNorm.cost
def _fbn_cost(op, ins, outs):
    return _rw_cost(op, ins, outs, (8 if op.attrs["is_training"] else 2) * numel(ins[0]))


FusedBatchNormGrad = defop("FusedBatchNormGrad")


@FusedBatchNormGrad.shape
def _fbn_grad_shape(op):
    dy, x, scale = op.inputs[:3]
    cs = TensorShape([x.shape[-1] if x.shape.ndims else None])
    outs = [(x.shape, x.dtype), (cs, scale.dtype), (cs, scale.dtype)]
    if not op.attrs["is_training"]:
        outs += [(cs, scale.dtype), (cs, scale.dtype)]
    return outs


@FusedBatchNormGrad.kernel("cpu", "gpu", dtypes=F)
def _fused_batch_norm_grad(ctx, dy, x, scale, mean, var, g_mean, g_var):
    """Inputs: dy, x, scale, the mean and variance the forward pass used (in training, its
    batch_mean and Bessel-corrected batch_var outputs), and the gradients of those two outputs."""
    xp = ctx.xp
    eps = ctx.attrs["epsilon"]
    training = ctx.attrs["is_training"]
    fast = _cpu_fast(dy, x, scale, mean, var, g_mean, g_var)
    if fast is not None and x.size:
        return fast.fused_batch_norm_grad(dy, x, scale, mean, var, g_mean, g_var, eps, training)
    c = x.shape[-1]
    x2, dy2 = x.reshape(-1, c), dy.reshape(-1, c)
    m = x2.shape[0]
    if training and m > 1:
        var = var * ((m - 1) / m)  # back to the population variance used for y
    inv = 1.0 / xp.sqrt(var + eps)
    xc = x2 - mean.astype(x.dtype, copy=False)
    d_offset = dy2.sum(axis=0)
    d_scale = xp.einsum("ij,ij->j", dy2, xc) * inv  # sum(dy * xhat)
    sdt = scale.dtype
    if training:
        # dx = scale * inv / m * (m dy - sum(dy) - xhat sum(dy xhat))
        dx = dy2 * (scale * inv).astype(x.dtype, copy=False)
        dx -= ((scale * inv * d_offset) / m).astype(x.dtype, copy=False)
        dx -= xc * ((scale * inv * inv * d_scale) / m).astype(x.dtype, copy=False)
        if xp.any(g_mean != 0) or xp.any(g_var != 0):  # batch_mean / batch_var feed a loss too
            dx += (g_mean / m).astype(x.dtype, copy=False)
            dx += xc * (2.0 * g_var / max(m - 1, 1)).astype(x.dtype, copy=False)
        return (
            dx.reshape(x.shape),
            d_scale.astype(sdt, copy=False),
            d_offset.astype(sdt, copy=False),
        )
    dx = dy2 * (scale * inv).astype(x.dtype, copy=False)
    d_mean = -scale * inv * d_offset + g_mean
    d_var = -0.5 * scale * inv * inv * d_scale + g_var
    return (
        dx.reshape(x.shape),
        d_scale.astype(sdt, copy=False),
        d_offset.astype(sdt, copy=False),
        d_mean.astype(sdt, copy=False),
        d_var.astype(sdt, copy=False),
    )


@FusedBatchNormGrad.cost
def _fbn_grad_cost(op, ins, outs):
    return _rw_cost(op, ins, outs, 10 * numel(ins[1]))


@FusedBatchNormGrad.gradient
def _fbn_grad_grad(op, *grads):
    """The gradient of the batch norm's gradient (a gradient penalty through a batch norm:
    WGAN-GP, DRAGAN): the kernel's formula written with ordinary ops, differentiated."""
    from ..gradients import gradients
    from .array import identity

    # partial derivatives: each input through a fresh identity, so that none of them is an
    # ancestor of another here (the batch mean and variance are functions of x upstream; their
    # paths back to x are the outer pass's to walk)
    ins = [identity(t) for t in op.inputs]
    outs = _fbn_grad_composite(op, ins)
    pairs = [(o, g) for o, g in zip(outs, grads) if g is not None]
    if not pairs:
        return [None] * len(ins)
    return gradients([o for o, _ in pairs], ins, grad_ys=[g for _, g in pairs])


def _fbn_grad_composite(op, ins: list) -> list:
    """FusedBatchNormGrad's outputs as a function of ``ins`` (its inputs), in ordinary ops (the
    kernel's arithmetic, ``_fused_batch_norm_grad``)."""
    from .array import cast, reshape, shape
    from .math import maximum, reduce_sum, rsqrt, where

    dy, x, scale, mean, var, g_mean, g_var = ins
    eps, training = op.attrs["epsilon"], op.attrs["is_training"]
    c = x.shape[-1] if x.shape.ndims and x.shape[-1] is not None else shape(x)[-1]
    x2, dy2 = reshape(x, [-1, c]), reshape(dy, [-1, c])
    m = cast(shape(x2)[0], scale.dtype)
    if training:  # the Bessel-corrected batch_var back to the population variance
        var = var * where(m > 1.0, (m - 1.0) / maximum(m, 1.0), m * 0.0 + 1.0)
    inv = rsqrt(var + eps)
    xc = x2 - cast(mean, x.dtype)
    d_offset = reduce_sum(dy2, axis=0)
    d_scale = reduce_sum(dy2 * xc, axis=0) * inv
    k = scale * inv
    if training:
        dx = (
            dy2 * cast(k, x.dtype)
            - cast(k * d_offset / m, x.dtype)
            - xc * cast(k * inv * d_scale / m, x.dtype)
            + cast(g_mean / m, x.dtype)
            + xc * cast(2.0 * g_var / maximum(m - 1.0, 1.0), x.dtype)
        )
        return [reshape(dx, shape(x)), d_scale, d_offset]
    dx = dy2 * cast(k, x.dtype)
    return [
        reshape(dx, shape(x)),
        d_scale,
        d_offset,
        -k * d_offset + g_mean,
        -0.5 * k * inv * d_scale + g_var,
    ]


@FusedBatchNorm.gradient
def _fbn_grad(op, dy, g_mean, g_var):
    x, scale = op.inputs[0], op.inputs[1]
    training = op.attrs["is_training"]
    if training:
        mean, var = op.outputs[1], op.outputs[2]
    else:
        mean, var = op.inputs[3], op.inputs[4]
    grads = apply(
        "FusedBatchNormGrad",
        [dy, x, scale, mean, var, g_mean, g_var],
        dict(op.attrs),
        "FusedBatchNormGrad",
    )
    return list(grads)  # training: 3 inputs and grads; inference: 5 of each


def fused_batch_norm(
    x: Any,
    scale: Any,
    offset: Any = None,
    mean: Any = None,
    variance: Any = None,
    epsilon: float = 0.001,
    data_format: str = "NHWC",
    is_training: bool = True,
    name: str | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """Batch normalization over all axes but the last (channels): returns (y, mean, variance).

    In training, y uses the batch's mean and population variance, and the returned variance is
    Bessel-corrected (n / (n - 1)), as TensorFlow returns it for moving averages. In inference
    (``is_training=False``) ``mean`` and ``variance`` are required and are returned unchanged.
    ``offset`` None means zeros. Raises UnimplementedError for NCHW.
    """
    from .array import constant

    if _nchw(data_format):
        y, m, v = fused_batch_norm(
            _to_nhwc(x, "FusedBatchNorm"),
            scale,
            offset,
            mean,
            variance,
            epsilon,
            "NHWC",
            is_training,
            name,
        )
        return _to_nchw(y), m, v
    _check_format("fused_batch_norm", data_format)
    x = convert_to_tensor(x)
    scale = convert_to_tensor(scale)
    if offset is None:
        c = scale.shape[0] if scale.shape.ndims == 1 else None
        if c is None:
            raise InvalidArgumentError(
                "fused_batch_norm: offset=None needs a scale of static shape"
            )
        offset = constant(np.zeros(c, dtype=scale.dtype.np), name="offset")
    inputs = [x, scale, convert_to_tensor(offset, dtype=scale.dtype)]
    if is_training:
        if mean is not None or variance is not None:
            raise InvalidArgumentError(
                "fused_batch_norm: mean and variance must be None when is_training=True"
            )
    else:
        if mean is None or variance is None:
            raise InvalidArgumentError(
                "fused_batch_norm: mean and variance are required when is_training=False"
            )
        inputs += [convert_to_tensor(mean, dtype=scale.dtype)]
        inputs += [convert_to_tensor(variance, dtype=scale.dtype)]
    attrs = {"epsilon": float(epsilon), "is_training": bool(is_training), "data_format": "NHWC"}
    y, m, v = apply("FusedBatchNorm", inputs, attrs, name or "FusedBatchNorm")
    return y, m, v


# ================================================================================================
# Composites: dropout, embedding_lookup
# ================================================================================================


def dropout(
    x: Any,
    keep_prob: Any = None,
    noise_shape: Any = None,
    seed: int | None = None,
    name: str | None = None,
    rate: Any = None,
) -> Tensor:
    """Keep each element with probability ``keep_prob`` (scaled by 1 / keep_prob), else zero it.

    ``keep_prob`` (or ``rate = 1 - keep_prob``) may be a Python number in (0, 1] or a tensor
    (e.g. a placeholder fed 1.0 for evaluation). ``noise_shape`` broadcasts one keep/drop
    decision across dimensions of size 1. Raises ValueError for a number outside (0, 1].
    """
    from .array import cast
    from .array import shape as shape_op
    from .math import divide, greater_equal, multiply, subtract
    from .random import random_uniform

    if (keep_prob is None) == (rate is None):
        raise ValueError("dropout: pass exactly one of keep_prob and rate")
    x = convert_to_tensor(x)
    if not x.dtype.is_floating:
        raise ValueError(f"dropout: x must be a float tensor, got {x.dtype.name}")
    if keep_prob is None:
        if isinstance(rate, Tensor):
            from .math import subtract

            keep_prob = subtract(convert_to_tensor(1.0, dtype=x.dtype), rate)
        else:
            keep_prob = 1.0 - float(rate)
    if not isinstance(keep_prob, Tensor):
        kp = float(keep_prob)
        if not 0.0 < kp <= 1.0:
            raise ValueError(f"dropout: keep_prob must be in (0, 1], got {kp}")
        if kp == 1.0:
            return x
        keep_prob = convert_to_tensor(kp, dtype=x.dtype)
    else:
        keep_prob = convert_to_tensor(keep_prob, dtype=x.dtype)
    if noise_shape is None:
        noise_shape = x.shape.as_list() if x.shape.is_fully_defined() else shape_op(x)
    u = random_uniform(noise_shape, seed=seed, dtype=x.dtype)
    # 1 with probability keep_prob, else 0: u >= 1 - keep_prob, as TF's (floor(keep_prob + u)
    # rounds to 2 in float32 for u within 2^-24 of 1 when keep_prob is 1: a doubled element)
    mask = cast(greater_equal(u, subtract(1.0, keep_prob)), x.dtype)
    out = multiply(divide(x, keep_prob), mask, name=name or "dropout")
    # keep_prob is a scalar (TF requires it), so the result has x's shape even when keep_prob's
    # static shape is unknown (a placeholder without a shape): say so, as TF does.
    if keep_prob.shape.ndims not in (None, 0):
        raise ValueError(f"dropout: keep_prob must be a scalar, got shape {keep_prob.shape}")
    out.set_shape(x.shape)
    return out


def embedding_lookup(
    params: Any,
    ids: Any,
    partition_strategy: str = "mod",
    name: str | None = None,
    validate_indices: bool = True,
    max_norm: float | None = None,
) -> Tensor:
    """Rows ``params[ids]``; the result has shape ids.shape + row shape (TF1's lookup).

    ``params`` is a tensor, a Variable, a ``PartitionedVariable`` (cut along axis 0) or a list of
    shards (tensors or Variables with the same row shape). With n > 1 shards, id ``i`` lives in
    shard ``i % n`` at row ``i // n`` (``partition_strategy="mod"``) or, with ``"div"``, the ids
    are cut into contiguous ranges, the first ``rows % n`` one id longer: either way the shards
    must hold the rows a ``fixed_size_partitioner`` gives them (a PartitionedVariable from
    ``get_variable`` does). ``"div"`` matches ``pv.as_tensor()[ids]``; ``"mod"`` interleaves. The
    ids are split by shard (DynamicPartition), each shard gathers its rows on its own device
    (the gather is colocated with the shard, so only the rows travel) and the rows are put back
    in the ids' order (DynamicStitch). The gradient of each shard is an IndexedSlices of the rows
    it served (a sparse update on the PS). A single Variable's gather is colocated with it, too.

    Raises ValueError for an unknown strategy, an empty list, shards whose dtypes, row shapes or
    row counts do not fit, or a PartitionedVariable cut along another axis; UnimplementedError for
    ``max_norm``. Ids outside [0, rows) fail when the step runs. ``validate_indices`` is ignored.
    """
    import contextlib

    from ..graph import get_default_graph
    from ..partitioned import PartitionedVariable
    from ..variables import Variable
    from .manip import gather

    if partition_strategy not in ("mod", "div"):
        raise ValueError(
            f"embedding_lookup: partition_strategy must be 'mod' or 'div', got "
            f"{partition_strategy!r}"
        )
    if max_norm is not None:
        raise UnimplementedError("embedding_lookup: max_norm is not supported")
    if isinstance(params, PartitionedVariable):
        if params.partition_axis != 0:
            raise ValueError(
                f"embedding_lookup: {params.name} is partitioned along axis "
                f"{params.partition_axis}; a lookup needs shards along axis 0"
            )
        params = list(params)
    elif isinstance(params, (list, tuple)):
        params = list(params)
        if not params:
            raise ValueError("embedding_lookup: params is an empty list")
    else:
        params = [params]
    g = get_default_graph()
    if len(params) == 1:
        p = params[0]
        where = g.colocate_with(p) if isinstance(p, Variable) else contextlib.nullcontext()
        with where:
            return gather(p, ids, name=name or "embedding_lookup")
    with g.name_scope(name or "embedding_lookup"):
        return _sharded_lookup(
            [convert_to_tensor(p) for p in params], params, ids, partition_strategy
        )


def _shard_layout(reads: list[Tensor], strategy: str) -> tuple[int | None, list]:
    """(total rows or None when some are unknown, the row shape), validating the shards."""
    dtype = reads[0].dtype
    rest: TensorShape | None = None
    rows: list[int | None] = []
    for t in reads:
        if t.dtype != dtype:
            raise ValueError(
                f"embedding_lookup: shard {t.name} is {t.dtype.name}, shard {reads[0].name} is "
                f"{dtype.name}"
            )
        if t.shape.ndims is None or t.shape.ndims < 1:
            raise ValueError(f"embedding_lookup: shard {t.name} needs a known rank >= 1: {t.shape}")
        r = t.shape[1:]
        if rest is not None and not rest.is_compatible_with(r):
            raise ValueError(
                f"embedding_lookup: shards have different row shapes: {reads[0].name} "
                f"{reads[0].shape} and {t.name} {t.shape}"
            )
        rest = r if rest is None else rest.merge_with(r)
        rows.append(t.shape[0])
    if rest is None or not rest.is_fully_defined():
        raise ValueError(f"embedding_lookup: the shards' row shape must be known, got {rest}")
    if any(r is None for r in rows):
        if strategy == "div":
            raise ValueError(
                f"embedding_lookup: 'div' needs each shard's row count, got {[t.shape for t in reads]}"
            )
        return None, rest.as_list()
    total, n = sum(rows), len(rows)  # type: ignore[arg-type]
    base, extra = divmod(total, n)
    expected = [base + (1 if i < extra else 0) for i in range(n)]
    if rows != expected:
        raise ValueError(
            f"embedding_lookup: shards of {rows} rows do not hold {total} ids as "
            f"partition_strategy={strategy!r} expects ({expected}: the first {extra} shards one "
            "row longer, as a fixed_size_partitioner cuts them)"
        )
    return total, rest.as_list()


def _sharded_lookup(reads: list[Tensor], params: list, ids: Any, strategy: str) -> Tensor:
    from ..graph import get_default_graph
    from .array import cast, reshape, reshape_like
    from .dynamic import dynamic_partition, dynamic_stitch, range_like
    from .manip import gather, zeros
    from .math import floordiv, floormod, less, maximum, subtract, where, zeros_like

    n = len(reads)
    total, rest = _shard_layout(reads, strategy)
    ids = convert_to_tensor(ids)
    if not ids.dtype.is_integer:
        raise ValueError(
            f"embedding_lookup: ids {ids.name} must be int32 or int64, got {ids.dtype.name}"
        )
    flat = reshape(ids, [-1])
    if strategy == "mod":
        shard, row = floormod(flat, n), floordiv(flat, n)
    else:
        base, extra = divmod(int(total), n)  # type: ignore[arg-type]
        shifted = subtract(flat, extra)
        shard = maximum(floordiv(flat, base + 1), floordiv(shifted, base))
        row = where(less(shard, extra), floormod(flat, base + 1), floormod(shifted, base))
    shard = cast(shard, _dt.int32)
    rows_by_shard = dynamic_partition(row, shard, n)
    positions = dynamic_partition(range_like(flat), shard, n)
    g = get_default_graph()
    gathered = []
    for p, r in zip(params, rows_by_shard):
        with g.colocate_with(p):  # the gather runs where the shard lives: only rows travel
            gathered.append(gather(p, r))
    out = dynamic_stitch(positions, gathered)
    dims = ids.shape.dims
    if dims is not None and sum(d is None for d in dims) <= 1:
        return reshape(out, [-1 if d is None else d for d in dims] + rest)
    # ids with several unknown dimensions: reshape to the run-time shape of a zeros tensor of
    # shape ids.shape + rest (its branch has no gradient)
    like = gather(zeros([1, *rest], dtype=out.dtype), zeros_like(ids))
    return reshape_like(out, like)


__all__ = [
    "avg_pool",
    "batch_normalization",
    "bias_add",
    "conv2d",
    "conv2d_backprop_filter",
    "conv2d_backprop_input",
    "dropout",
    "elu",
    "embedding_lookup",
    "fused_batch_norm",
    "in_top_k",
    "l2_loss",
    "l2_normalize",
    "leaky_relu",
    "log_softmax",
    "max_pool",
    "moments",
    "relu",
    "relu6",
    "sigmoid",
    "sigmoid_cross_entropy_with_logits",
    "softmax",
    "softmax_cross_entropy_with_logits",
    "softmax_cross_entropy_with_logits_v2",
    "softplus",
    "sparse_softmax_cross_entropy_with_logits",
    "tanh",
    "xw_plus_b",
]
