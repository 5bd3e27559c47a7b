"""More of TF1's ``tf.nn``, composed from existing ops (their gradients come for free):
conv1d, dilated (atrous) and depthwise/separable convolutions, nn.convolution and nn.pool,
local response normalization, selu, softsign, crelu and weighted_cross_entropy_with_logits.

MaxPoolWithArgmax is an op of its own (with MaxPoolGradWithArgmax for its gradient).
Depthwise convolution is a conv2d with a block-diagonal filter (each input channel feeds only
its own ``channel_multiplier`` outputs); dilation inserts zeros into the filter.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError, UnimplementedError
from ..graph import Tensor, name_scope
from ..registry import apply, convert_to_tensor, defop
from . import array as _array
from . import manip as _manip
from . import math as _math
from . import nn as _nn

# ---- dilation ---------------------------------------------------------------------------------


def _static_filter_shape(fn: str, f: Tensor) -> list[int]:
    dims = f.shape.as_list() if f.shape.ndims is not None else None
    if dims is None or len(dims) != 4 or any(d is None for d in dims):
        raise InvalidArgumentError(
            f"{fn}: the filter needs a fully known 4-D shape, got {f.name} with shape {f.shape}"
        )
    return dims


def _rates(fn: str, dilations: Any) -> tuple[int, int]:
    if dilations is None:
        return 1, 1
    _, rh, rw, _ = _nn._window4(fn, "dilations", dilations)
    return rh, rw


def _dilate_axis(f: Tensor, axis: int, rate: int, dims: list[int]) -> Tensor:
    """Insert ``rate - 1`` zeros between the taps of ``f`` along spatial ``axis`` (0 or 1)."""
    k = dims[axis]
    e = _manip.expand_dims(f, axis + 1)  # (.., k, 1, ..)
    pads = [[0, 0]] * 5
    pads[axis + 1] = [0, rate - 1]
    e = _manip.pad(e, pads)
    shape = list(dims)
    shape[axis] = k * rate
    e = _array.reshape(e, shape)
    size = list(dims)
    size[axis] = (k - 1) * rate + 1
    dims[axis] = size[axis]
    return _manip.slice_(e, [0, 0, 0, 0], size)


def dilate_filter(fn: str, filter: Any, dilations: Any) -> Tensor:
    """``filter`` (kh, kw, in, out) with its taps spread ``dilations`` apart (zeros between)."""
    f = convert_to_tensor(filter)
    rh, rw = _rates(fn, dilations)
    if (rh, rw) == (1, 1):
        return f
    dims = _static_filter_shape(fn, f)
    with name_scope("dilate_filter"):
        if rh > 1:
            f = _dilate_axis(f, 0, rh, dims)
        if rw > 1:
            f = _dilate_axis(f, 1, rw, dims)
    return f


def dilated_conv2d(
    input: Any, filter: Any, strides: Any, padding: Any, dilations: Any, name: str | None = None
) -> Tensor:
    """conv2d with ``dilations`` [1, rh, rw, 1]: a conv2d with the dilated filter (TF's SAME
    padding uses the dilated window size, so the result is the same)."""
    x = convert_to_tensor(input)
    with name_scope(name or "dilated_conv2d"):
        f = dilate_filter("conv2d", convert_to_tensor(filter, dtype=x.dtype), dilations)
        return _nn.conv2d(x, f, strides=strides, padding=padding)


def atrous_conv2d(
    value: Any, filters: Any, rate: int, padding: Any, name: str | None = None
) -> Tensor:
    """TF1's ``tf.nn.atrous_conv2d``: stride-1 conv2d with the filter dilated by ``rate``."""
    if int(rate) < 1:
        raise InvalidArgumentError(f"atrous_conv2d: rate must be >= 1, got {rate}")
    return _nn.conv2d(
        value,
        filters,
        strides=[1, 1, 1, 1],
        padding=padding,
        dilations=[1, rate, rate, 1],
        name=name,
    )


# ---- conv1d and nn.convolution ----------------------------------------------------------------


def _one(fn: str, what: str, v: Any) -> int:
    if v is None:
        return 1
    vals = [int(v)] if np.isscalar(v) else [int(a) for a in v]
    if len(vals) == 3:
        if vals[0] != 1 or vals[2] != 1:
            raise InvalidArgumentError(f"{fn}: {what} must be [1, w, 1], got {v}")
        vals = [vals[1]]
    if len(vals) != 1 or vals[0] < 1:
        raise InvalidArgumentError(f"{fn}: {what} must be a positive int, got {v}")
    return vals[0]


def conv1d(
    value: Any = None,
    filters: Any = None,
    stride: Any = None,
    padding: Any = None,
    use_cudnn_on_gpu: Any = None,
    data_format: Any = None,
    name: str | None = None,
    input: Any = None,
    dilations: Any = None,
) -> Tensor:
    """1-D convolution of NWC ``value`` with a (k, in, out) filter: conv2d over an inserted
    height axis of size 1, as TF does."""
    value = input if value is None else value
    if data_format not in (None, "NWC", "NHWC"):
        raise UnimplementedError(
            f"conv1d: data_format {data_format!r} is not supported; hetbed sequences are NWC"
        )
    s = _one("conv1d", "stride", stride)
    d = _one("conv1d", "dilations", dilations)
    with name_scope(name or "conv1d"):
        x = _manip.expand_dims(value, 1)
        f = _manip.expand_dims(convert_to_tensor(filters, dtype=x.dtype), 0)
        y = _nn.conv2d(x, f, strides=[1, 1, s, 1], padding=padding, dilations=[1, 1, d, 1])
        return _manip.squeeze(y, [1])


def convolution(
    input: Any,
    filter: Any = None,
    padding: Any = None,
    strides: Any = None,
    dilation_rate: Any = None,
    name: str | None = None,
    data_format: Any = None,
    filters: Any = None,
    dilations: Any = None,
) -> Tensor:
    """TF1's ``tf.nn.convolution`` for 1-D (NWC) and 2-D (NHWC) inputs."""
    filter = filters if filter is None else filter
    dilation_rate = dilations if dilation_rate is None else dilation_rate
    x = convert_to_tensor(input)
    rank = x.shape.ndims
    if rank == 3:
        return conv1d(
            x,
            filter,
            stride=strides,
            padding=padding,
            data_format=data_format,
            dilations=dilation_rate,
            name=name or "convolution",
        )
    if rank == 4:
        _nn._check_format("convolution", data_format)
        return _nn.conv2d(
            x,
            filter,
            strides=[1, 1] if strides is None else strides,
            padding=padding,
            dilations=dilation_rate,
            name=name or "convolution",
        )
    raise UnimplementedError(
        f"convolution: only 1-D and 2-D convolutions are supported, got input {x.name} "
        f"of shape {x.shape}"
    )


# ---- pooling ----------------------------------------------------------------------------------


def pool(
    input: Any,
    window_shape: Any,
    pooling_type: str,
    padding: str,
    dilation_rate: Any = None,
    strides: Any = None,
    name: str | None = None,
    data_format: Any = None,
    dilations: Any = None,
) -> Tensor:
    """TF1's ``tf.nn.pool``: "MAX" or "AVG" pooling over 1-D (NWC) or 2-D (NHWC) windows."""
    dilation_rate = dilations if dilation_rate is None else dilation_rate
    if pooling_type not in ("MAX", "AVG"):
        raise InvalidArgumentError(
            f"pool: pooling_type must be 'MAX' or 'AVG', got {pooling_type!r}"
        )
    window = [int(w) for w in np.atleast_1d(window_shape)]
    n = len(window)
    strides = [1] * n if strides is None else [int(s) for s in np.atleast_1d(strides)]
    rate = [1] * n if dilation_rate is None else [int(r) for r in np.atleast_1d(dilation_rate)]
    if any(r != 1 for r in rate):
        raise UnimplementedError(f"pool: dilation_rate other than 1 is not supported, got {rate}")
    if n not in (1, 2) or len(strides) != n:
        raise UnimplementedError(
            f"pool: only 1-D and 2-D pooling are supported (window {window}, strides {strides})"
        )
    if data_format not in (None, "NWC", "NHWC"):
        raise UnimplementedError(f"pool: data_format {data_format!r} is not supported (NHWC only)")
    fn = _nn.max_pool if pooling_type == "MAX" else _nn.avg_pool
    with name_scope(name or "pool"):
        x = convert_to_tensor(input)
        if n == 1:
            y = fn(
                _manip.expand_dims(x, 1),
                ksize=[1, 1, window[0], 1],
                strides=[1, 1, strides[0], 1],
                padding=padding,
            )
            return _manip.squeeze(y, [1])
        return fn(x, ksize=[1, *window, 1], strides=[1, *strides, 1], padding=padding)


def _pool1d(
    kind: str,
    value: Any,
    ksize: Any,
    strides: Any,
    padding: str,
    data_format: Any,
    name: str | None,
) -> Tensor:
    if data_format not in (None, "NWC", "NHWC"):
        raise UnimplementedError(f"{kind}: data_format {data_format!r} is not supported (NWC)")
    return pool(
        value,
        [_one(kind, "ksize", ksize)],
        "MAX" if kind == "max_pool1d" else "AVG",
        padding,
        strides=[_one(kind, "strides", strides)],
        name=name or kind,
    )


def max_pool1d(input, ksize, strides, padding, data_format="NWC", name=None) -> Tensor:
    """Max pooling over NWC ``input``."""
    return _pool1d("max_pool1d", input, ksize, strides, padding, data_format, name)


def avg_pool1d(input, ksize, strides, padding, data_format="NWC", name=None) -> Tensor:
    """Average pooling over NWC ``input``."""
    return _pool1d("avg_pool1d", input, ksize, strides, padding, data_format, name)


# ---- depthwise and separable convolutions -----------------------------------------------------


def depthwise_conv2d_native(
    input: Any,
    filter: Any,
    strides: Any,
    padding: Any,
    data_format: Any = None,
    dilations: Any = None,
    name: str | None = None,
) -> Tensor:
    """Depthwise 2-D convolution: input channel c convolved with ``filter[:, :, c, m]`` gives
    output channel ``c * channel_multiplier + m`` (NHWC)."""
    _nn._check_format("depthwise_conv2d_native", data_format)
    x = convert_to_tensor(input)
    f = convert_to_tensor(filter, dtype=x.dtype)
    dims = _static_filter_shape("depthwise_conv2d", f)
    if x.shape.ndims is not None and x.shape.ndims != 4:
        raise InvalidArgumentError(
            f"depthwise_conv2d: input must be 4-D NHWC, got {x.name} with shape {x.shape}"
        )
    c = x.shape.as_list()[3] if x.shape.ndims else None
    if c is not None and c != dims[2]:
        raise InvalidArgumentError(
            f"depthwise_conv2d: input depth {c} (input shape {x.shape}) does not match filter "
            f"in_channels {dims[2]} (filter shape {f.shape})"
        )
    from .depthwise import depthwise

    fn = "depthwise_conv2d"
    dil = (1, 1, 1, 1) if dilations is None else _nn._window4(fn, "dilations", dilations)
    return depthwise(
        x,
        f,
        _nn._window4(fn, "strides", strides),
        _nn._check_padding(fn, padding),
        dil,
        name or "depthwise",
    )


def depthwise_conv2d(
    input: Any,
    filter: Any,
    strides: Any,
    padding: Any,
    rate: Any = None,
    name: str | None = None,
    data_format: Any = None,
    dilations: Any = None,
) -> Tensor:
    """TF1's ``tf.nn.depthwise_conv2d`` (``rate`` = [rh, rw] dilation)."""
    rate = dilations if rate is None else rate
    dil = None if rate is None else [1, *[int(r) for r in np.broadcast_to(rate, (2,))], 1]
    return depthwise_conv2d_native(
        input,
        filter,
        strides,
        padding,
        data_format=data_format,
        dilations=dil,
        name=name or "depthwise",
    )


def separable_conv2d(
    input: Any,
    depthwise_filter: Any,
    pointwise_filter: Any,
    strides: Any,
    padding: Any,
    rate: Any = None,
    name: str | None = None,
    data_format: Any = None,
    dilations: Any = None,
) -> Tensor:
    """A depthwise convolution followed by a 1x1 ``pointwise_filter`` (1, 1, C*M, out)."""
    with name_scope(name or "separable_conv2d"):
        y = depthwise_conv2d(
            input,
            depthwise_filter,
            strides,
            padding,
            rate=rate,
            data_format=data_format,
            dilations=dilations,
        )
        return _nn.conv2d(y, pointwise_filter, strides=[1, 1, 1, 1], padding="VALID")


# ---- normalization and activations ------------------------------------------------------------


def local_response_normalization(
    input: Any,
    depth_radius: int = 5,
    bias: float = 1.0,
    alpha: float = 1.0,
    beta: float = 0.5,
    name: str | None = None,
) -> Tensor:
    """``input / (bias + alpha * sum of squares over channels d-r..d+r) ** beta`` (NHWC)."""
    x = convert_to_tensor(input)
    if x.shape.ndims is not None and x.shape.ndims != 4:
        raise InvalidArgumentError(f"lrn: input must be 4-D, got {x.name} with shape {x.shape}")
    c = x.shape.as_list()[3] if x.shape.ndims else None
    if c is None:
        raise InvalidArgumentError(f"lrn: the channel dimension of {x.name} must be known")
    r = int(depth_radius)
    if r < 0:
        raise InvalidArgumentError(f"lrn: depth_radius must be >= 0, got {depth_radius}")
    with name_scope(name or "LRN"):
        # sum over the window as one matmul with a band matrix (C, C)
        band = (np.abs(np.arange(c)[:, None] - np.arange(c)[None, :]) <= r).astype(x.dtype.np)
        sq = _array.reshape(_math.square(x), [-1, c])
        win = _math.matmul(sq, _array.constant(band, name="band"))
        win = _array.reshape_like(win, x)
        scale = _math.pow(bias + alpha * win, -float(beta))
        return x * scale


lrn = local_response_normalization

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(features: Any, name: str | None = None) -> Tensor:
    """``scale * (x if x > 0 else alpha * (exp(x) - 1))`` with the self-normalizing constants."""
    with name_scope(name or "Selu"):
        x = convert_to_tensor(features)
        r = _nn.relu(x)
        return _SELU_SCALE * (r + _SELU_ALPHA * (_nn.elu(x) - r))


def softsign(features: Any, name: str | None = None) -> Tensor:
    """``x / (1 + |x|)``."""
    with name_scope(name or "Softsign"):
        x = convert_to_tensor(features)
        return x / (1.0 + _math.abs(x))


def crelu(features: Any, name: str | None = None, axis: int = -1) -> Tensor:
    """``concat([relu(x), relu(-x)], axis)``."""
    with name_scope(name or "CRelu"):
        x = convert_to_tensor(features)
        return _manip.concat([_nn.relu(x), _nn.relu(-x)], axis)


def weighted_cross_entropy_with_logits(
    labels: Any = None,
    logits: Any = None,
    pos_weight: Any = None,
    name: str | None = None,
    targets: Any = None,
) -> Tensor:
    """Sigmoid cross-entropy with positives weighted by ``pos_weight``, computed stably as
    ``(1 - z) * x + (1 + (q - 1) * z) * (log1p(exp(-|x|)) + max(-x, 0))``."""
    labels = targets if labels is None else labels
    if labels is None or logits is None or pos_weight is None:
        raise InvalidArgumentError(
            "weighted_cross_entropy_with_logits: labels, logits and pos_weight are required"
        )
    with name_scope(name or "logistic_loss"):
        x = convert_to_tensor(logits)
        z = convert_to_tensor(labels, dtype=x.dtype)
        if not x.shape.is_compatible_with(z.shape):
            raise InvalidArgumentError(
                f"weighted_cross_entropy_with_logits: logits {x.shape} and labels {z.shape} "
                "must have the same shape"
            )
        q = convert_to_tensor(pos_weight, dtype=x.dtype)
        lw = 1.0 + (q - 1.0) * z
        soft = _math.log1p(_math.exp(-_math.abs(x))) + _nn.relu(-x)
        return (1.0 - z) * x + lw * soft


# ---- MaxPoolWithArgmax ------------------------------------------------------------------------

MaxPoolWithArgmax = defop("MaxPoolWithArgmax", cost=_nn._pool_cost(2))


@MaxPoolWithArgmax.shape
def _mpa_shape(op):
    x = op.inputs[0]
    _nn._check_rank4("MaxPoolWithArgmax", "input", x)
    s = _nn._pool_out_shape("MaxPoolWithArgmax", op.attrs, x.shape)
    return [(s, x.dtype), (s, _dt.as_dtype(op.attrs["Targmax"]))]


@MaxPoolWithArgmax.kernel("cpu", "gpu", dtypes=_dt.NUMERIC)
def _max_pool_with_argmax(ctx, x):
    """The first maximum of each window (row-major) and its flat index ``(y * W + x) * C + c``
    (plus ``b * H * W * C`` when include_batch_in_index); padding never wins."""
    xp = ctx.xp
    n, h, w, c, kh, kw, sh, sw, ho, wo, ph, pw = _nn._pool_dims(
        "MaxPoolWithArgmax", ctx.attrs, x.shape
    )
    xpad = _nn._pad_hw(xp, x, ph, pw, _nn._lowest(x.dtype))
    rows = np.arange(ho) * sh - ph[0]
    cols = np.arange(wo) * sw - pw[0]
    best = arg = have = None
    for i in range(kh):
        for j in range(kw):
            r, q = rows + i, cols + j
            valid = ((r >= 0) & (r < h))[:, None, None] & ((q >= 0) & (q < w))[None, :, None]
            idx = (r[:, None, None] * w + q[None, :, None]) * c + np.arange(c)[None, None, :]
            valid_d, idx_d = xp.asarray(valid), xp.asarray(idx.astype(np.int64))
            win = _nn._window(xpad, i, j, sh, sw, ho, wo)
            if best is None:
                best = win.copy()
                arg = xp.broadcast_to(idx_d, best.shape).copy()
                have = xp.broadcast_to(valid_d, best.shape).copy()
                continue
            upd = valid_d & ((win > best) | ~have)
            best = xp.where(upd, win, best)
            arg = xp.where(upd, idx_d, arg)
            have = have | upd
    if ctx.attrs["include_batch_in_index"]:
        arg = arg + xp.asarray((np.arange(n) * (h * w * c)).reshape(n, 1, 1, 1))
    return best, arg.astype(np.dtype(_dt.as_dtype(ctx.attrs["Targmax"]).np), copy=False)


MaxPoolGradWithArgmax = defop("MaxPoolGradWithArgmax", cost=_nn._pool_cost(1))


@MaxPoolGradWithArgmax.shape
def _mpga_shape(op):
    x, g, _ = op.inputs
    return [(x.shape, g.dtype)]


@MaxPoolGradWithArgmax.kernel("cpu", "gpu", dtypes=_dt.NUMERIC)
def _max_pool_grad_with_argmax(ctx, x, g, argmax):
    """Each output gradient added at its argmax position."""
    from .manip import _add_at

    xp = ctx.xp
    n = x.shape[0]
    per = x.size // n if n else 0
    idx = argmax.astype(np.int64)
    if not ctx.attrs["include_batch_in_index"]:
        idx = idx + xp.asarray((np.arange(n, dtype=np.int64) * per).reshape(n, 1, 1, 1))
    out = xp.zeros(x.size, dtype=g.dtype)
    _add_at(xp, out, idx.reshape(-1), g.reshape(-1))
    return out.reshape(x.shape)


@MaxPoolWithArgmax.gradient
def _max_pool_with_argmax_grad(op, g, _g_argmax):
    return [
        apply(
            "MaxPoolGradWithArgmax",
            [op.inputs[0], g, op.outputs[1]],
            dict(op.attrs),
            "MaxPoolGradWithArgmax",
        )
    ]


def max_pool_with_argmax(
    input: Any,
    ksize: Any,
    strides: Any,
    padding: str,
    data_format: str = "NHWC",
    Targmax: Any = None,
    name: str | None = None,
    output_dtype: Any = None,
    include_batch_in_index: bool = False,
) -> tuple[Tensor, Tensor]:
    """Max pooling that also returns where each maximum was, as a flat index (int64)."""
    attrs = _nn._pool_attrs("max_pool_with_argmax", ksize, strides, padding, data_format)
    dt = output_dtype if Targmax is None else Targmax
    dt = _dt.int64 if dt is None else _dt.as_dtype(dt)
    if dt not in (_dt.int32, _dt.int64):
        raise InvalidArgumentError(
            f"max_pool_with_argmax: Targmax must be int32 or int64, got {dt}"
        )
    attrs["Targmax"] = dt.name
    attrs["include_batch_in_index"] = bool(include_batch_in_index)
    out, argmax = apply("MaxPoolWithArgmax", [input], attrs, name or "MaxPoolWithArgmax")
    return out, argmax


# ---- small aliases and compositions of TF1's tf.nn -------------------------------------------


def max_pool2d(input, ksize, strides, padding, data_format="NHWC", name=None) -> Tensor:
    """TF1's ``tf.nn.max_pool2d`` (= max_pool)."""
    return _nn.max_pool(input, ksize, strides, padding, data_format=data_format, name=name)


def avg_pool2d(value, ksize, strides, padding, data_format="NHWC", name=None, input=None):
    """TF1's ``tf.nn.avg_pool2d`` (= avg_pool)."""
    return _nn.avg_pool(value, ksize, strides, padding, data_format=data_format, name=name,
                        input=input)  # fmt: skip


def swish(features: Any, beta: float = 1.0) -> Tensor:
    """``x * sigmoid(beta * x)``."""
    with name_scope("swish"):
        x = convert_to_tensor(features)
        return x * _nn.sigmoid(beta * x)


def relu_layer(x: Any, weights: Any, biases: Any, name: str | None = None) -> Tensor:
    """``relu(matmul(x, weights) + biases)``."""
    with name_scope(name or "relu_layer"):
        return _nn.relu(_nn.bias_add(_math.matmul(x, weights), biases))


def zero_fraction(value: Any, name: str | None = None) -> Tensor:
    """The fraction of zeros in ``value`` (float32)."""
    with name_scope(name or "zero_fraction"):
        x = convert_to_tensor(value)
        zero = _math.equal(x, _array.constant(0, dtype=x.dtype))
        return _math.reduce_mean(_array.cast(zero, _dt.float32))


__all__ = [
    "atrous_conv2d",
    "avg_pool1d",
    "avg_pool2d",
    "conv1d",
    "convolution",
    "crelu",
    "depthwise_conv2d",
    "depthwise_conv2d_native",
    "dilate_filter",
    "dilated_conv2d",
    "local_response_normalization",
    "lrn",
    "max_pool1d",
    "max_pool2d",
    "max_pool_with_argmax",
    "pool",
    "relu_layer",
    "selu",
    "separable_conv2d",
    "softsign",
    "swish",
    "weighted_cross_entropy_with_logits",
    "zero_fraction",
]


# ---- moments from sums, and batch norm with global statistics ----------------------------------


def sufficient_statistics(
    x: Any, axes: Any, shift: Any = None, keep_dims: bool = False, name: str | None = None,
    keepdims: Any = None,
) -> tuple:  # fmt: skip
    """TF1's ``nn.sufficient_statistics``: ``(count, sum(x - shift), sum((x - shift)^2),
    shift)`` over ``axes`` (the count is x's dtype, the number of elements summed)."""
    from .array import cast, shape
    from .math import multiply, reduce_prod, reduce_sum, subtract

    kd = keep_dims if keepdims is None else keepdims
    v = convert_to_tensor(x)
    ax = [int(a) for a in (axes if isinstance(axes, (list, tuple)) else [axes])]
    with name_scope(name or "sufficient_statistics"):
        counts = cast(reduce_prod(_gather_dims(shape(v), ax, v)), v.dtype)
        y = v if shift is None else subtract(v, convert_to_tensor(shift, dtype=v.dtype))
        m_ss = reduce_sum(y, ax, keepdims=kd)
        v_ss = reduce_sum(multiply(y, y), ax, keepdims=kd)
    return counts, m_ss, v_ss, (None if shift is None else convert_to_tensor(shift, dtype=v.dtype))


def _gather_dims(shape_t: Any, axes: list, v: Any) -> Any:
    from .manip import gather

    rank = v.shape.ndims
    idx = [a % rank if rank is not None else a for a in axes]
    return gather(shape_t, idx)


def normalize_moments(counts: Any, mean_ss: Any, variance_ss: Any, shift: Any, name=None) -> tuple:
    """TF1's ``nn.normalize_moments``: (mean, variance) from ``sufficient_statistics``."""
    from .math import add, divide, square, subtract

    with name_scope(name or "normalize"):
        shifted = divide(mean_ss, counts)
        variance = subtract(divide(variance_ss, counts), square(shifted))
        mean = shifted if shift is None else add(shifted, shift)
    return mean, variance


def batch_norm_with_global_normalization(
    t: Any = None, m: Any = None, v: Any = None, beta: Any = None, gamma: Any = None,
    variance_epsilon: float = 0.0, scale_after_normalization: bool = True, name=None,
    input: Any = None, mean: Any = None, variance: Any = None,  # noqa: A002 - TF's names
) -> Tensor:  # fmt: skip
    """TF1's deprecated ``nn.batch_norm_with_global_normalization``: ``(t - m) / sqrt(v + eps)``
    times ``gamma`` (with ``scale_after_normalization``) plus ``beta``."""
    from .math import add, multiply, rsqrt, subtract

    t = t if t is not None else input
    m = m if m is not None else mean
    v = v if v is not None else variance
    x = convert_to_tensor(t)
    with name_scope(name or "batchnorm"):
        inv = rsqrt(add(convert_to_tensor(v, dtype=x.dtype), variance_epsilon))
        if scale_after_normalization:
            inv = multiply(inv, convert_to_tensor(gamma, dtype=x.dtype))
        return add(multiply(subtract(x, convert_to_tensor(m, dtype=x.dtype)), inv), beta)
