"""3-D convolution and pooling over NDHWC volumes (TF1's ``tf.nn.conv3d``, ``max_pool3d``,
``avg_pool3d``), composed from the 2-D ops: each tap of the window along depth is a 2-D
convolution (or pool) of the depth slices it meets, run on the slices stacked into the batch,
and the taps are summed (or maxed, or averaged). Depth padding follows TF's SAME rule (the extra
slice after); a max pool's padding never wins and an average pool divides by the slices inside
the volume, as TF's kernels do. Gradients are those of the ops composed. The depth of the input
and of the window must be known when the graph is built.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError, UnimplementedError
from ..graph import Tensor, TensorShape, name_scope
from ..registry import convert_to_tensor
from . import array as _array
from . import manip as _manip
from . import math as _math
from . import nn as _nn


def _five(fn: str, what: str, value: Any, default: int = 1) -> tuple[int, int, int]:
    """(depth, height, width) of a [1, d, h, w, 1] list (or an int, or a triple)."""
    if value is None:
        return (default,) * 3
    v = [int(x) for x in ([value] * 3 if isinstance(value, int) else value)]
    if len(v) == 5 and v[0] == 1 and v[4] == 1:
        v = v[1:4]
    if len(v) != 3:
        raise InvalidArgumentError(
            f"{fn}: {what} must be [1, d, h, w, 1] (no batch or channel stride), got {value!r}"
        )
    if min(v) <= 0:
        raise InvalidArgumentError(f"{fn}: {what} must be positive, got {value!r}")
    return v[0], v[1], v[2]


def _check(fn: str, x: Tensor, padding: str, data_format: str) -> int:
    if data_format not in ("NDHWC", None):
        raise UnimplementedError(f"{fn}: data_format {data_format!r} (hetbed has NDHWC)")
    if padding not in ("SAME", "VALID"):
        raise InvalidArgumentError(f"{fn}: padding must be 'SAME' or 'VALID', got {padding!r}")
    if x.shape.ndims is not None and x.shape.ndims != 5:
        raise InvalidArgumentError(f"{fn}: input must be NDHWC (rank 5), got {x.shape}")
    depth = x.shape.as_list()[1] if x.shape.ndims == 5 else None
    if depth is None:
        raise UnimplementedError(
            f"{fn}: hetbed needs the input's depth known when the graph is built, got {x.shape}"
        )
    return depth


def _depth_plan(fn: str, n: int, k: int, s: int, d: int, padding: str):
    """(pad before, pad after, output depth) along depth, TF's rule."""
    span = (k - 1) * d + 1
    if padding == "SAME":
        out = -(-n // s)
        total = max((out - 1) * s + span - n, 0)
        return total // 2, total - total // 2, out
    out = (n - span) // s + 1
    if out <= 0:
        raise InvalidArgumentError(
            f"{fn}: a window of depth {span} does not fit in an input of depth {n} (VALID)"
        )
    return 0, 0, out


def _taps(x: Tensor, k: int, s: int, d: int, out: int) -> list[Tensor]:
    """For each tap of the depth window, the slices it meets, as a batch of NHWC images."""
    shape = _array.shape(x)
    flat = _manip.stack([-1, shape[2], shape[3], shape[4]])
    taps = []
    for i in range(k):
        part = x[:, i * d : i * d + s * (out - 1) + 1 : s]
        taps.append(_array.reshape(part, flat))
    return taps


def _unflatten(y: Tensor, batch: Tensor, out: int, like: Tensor) -> Tensor:
    shape = _array.shape(y)
    z = _array.reshape(y, _manip.stack([batch, out, shape[1], shape[2], shape[3]]))
    n = like.shape.as_list()[0] if like.shape.ndims == 5 else None
    dims = y.shape.as_list() if y.shape.ndims == 4 else [None] * 4
    z.set_shape(TensorShape([n, out, dims[1], dims[2], dims[3]]))
    return z


def _pad_depth(x: Tensor, before: int, after: int, value: float = 0.0) -> Tensor:
    if not before and not after:
        return x
    return _manip.pad(x, [[0, 0], [before, after], [0, 0], [0, 0], [0, 0]], constant_values=value)


def conv3d(
    input: Any,
    filter: Any = None,
    strides: Any = None,
    padding: str | None = None,
    data_format: str = "NDHWC",
    dilations: Any = None,
    name: str | None = None,
    filters: Any = None,
) -> Tensor:
    """3-D convolution (cross-correlation) of an NDHWC ``input`` with a ``[kd, kh, kw, in,
    out]`` ``filter``; ``strides`` and ``dilations`` [1, d, h, w, 1]."""
    fn = "conv3d"
    filter = filters if filter is None else filter
    x = convert_to_tensor(input)
    f = convert_to_tensor(filter, dtype=x.dtype)
    depth = _check(fn, x, padding, data_format)
    if f.shape.ndims != 5 or f.shape.as_list()[0] is None:
        raise InvalidArgumentError(
            f"{fn}: filter must be [kd, kh, kw, in, out] with kd known, got {f.shape}"
        )
    fk = f.shape.as_list()
    cin = x.shape.as_list()[4]
    if cin is not None and fk[3] is not None and cin != fk[3]:
        raise InvalidArgumentError(
            f"{fn}: input depth {cin} (channels) does not match the filter's {fk[3]}"
        )
    sd, sh, sw = _five(fn, "strides", strides)
    dd, dh, dw = _five(fn, "dilations", dilations)
    kd = fk[0]
    if kd <= 0:
        raise InvalidArgumentError(f"{fn}: the filter's depth must be positive, got {f.shape}")
    before, after, out = _depth_plan(fn, depth, kd, sd, dd, padding)
    with name_scope(name or "Conv3D"):
        batch = _array.shape(x)[0]
        xp = _pad_depth(x, before, after)
        kw = {"dilations": [1, dh, dw, 1]} if (dh, dw) != (1, 1) else {}
        ys = [
            _nn.conv2d(t, f[i], strides=[1, sh, sw, 1], padding=padding, **kw)
            for i, t in enumerate(_taps(xp, kd, sd, dd, out))
        ]
        y = ys[0] if len(ys) == 1 else _math.add_n(ys)
        return _unflatten(y, batch, out, x)


def _pool3d(fn, pool2d, combine, input, ksize, strides, padding, data_format, name):
    x = convert_to_tensor(input)
    depth = _check(fn, x, padding, data_format)
    kd, kh, kw = _five(fn, "ksize", ksize)
    sd, sh, sw = _five(fn, "strides", strides)
    before, after, out = _depth_plan(fn, depth, kd, sd, 1, padding)
    with name_scope(name or fn):
        batch = _array.shape(x)[0]
        fill = -np.inf if combine == "max" else 0.0
        xp = _pad_depth(x, before, after, fill)
        ys = [
            pool2d(t, ksize=[1, kh, kw, 1], strides=[1, sh, sw, 1], padding=padding)
            for t in _taps(xp, kd, sd, 1, out)
        ]
        y = ys[0]
        for t in ys[1:]:
            y = _math.maximum(y, t) if combine == "max" else y + t
        z = _unflatten(y, batch, out, x)
        if combine == "avg":
            # the depth slices of each window inside the volume (SAME pads count for nothing)
            starts = np.arange(out) * sd - before
            inside = np.minimum(starts + kd, depth) - np.maximum(starts, 0)
            z = z / _array.constant(inside.reshape(1, out, 1, 1, 1).astype(x.dtype.np))
        return z


def max_pool3d(
    input: Any,
    ksize: Any,
    strides: Any,
    padding: str,
    data_format: str = "NDHWC",
    name: str | None = None,
) -> Tensor:
    """The max over ``ksize`` [1, d, h, w, 1] windows of an NDHWC volume moved by ``strides``."""
    x = convert_to_tensor(input)
    if not x.dtype.is_floating:
        raise TypeError(f"max_pool3d: input must be floating point, got {x.dtype.name}")
    return _pool3d("max_pool3d", _nn.max_pool, "max", x, ksize, strides, padding, data_format, name)


def avg_pool3d(
    input: Any,
    ksize: Any,
    strides: Any,
    padding: str,
    data_format: str = "NDHWC",
    name: str | None = None,
) -> Tensor:
    """The mean over ``ksize`` [1, d, h, w, 1] windows of an NDHWC volume moved by
    ``strides``; SAME windows average what lies inside the volume."""
    x = convert_to_tensor(input)
    if x.dtype not in (_dt.float16, _dt.float32, _dt.float64):
        raise TypeError(f"avg_pool3d: input must be floating point, got {x.dtype.name}")
    return _pool3d("avg_pool3d", _nn.avg_pool, "avg", x, ksize, strides, padding, data_format, name)


__all__ = ["avg_pool3d", "conv3d", "max_pool3d"]


def conv3d_transpose(
    value: Any,
    filter: Any = None,
    output_shape: Any = None,
    strides: Any = None,
    padding: str = "SAME",
    data_format: str = "NDHWC",
    name: str | None = None,
    filters: Any = None,
    dilations: Any = None,
) -> Tensor:
    """The transpose of ``conv3d`` (its gradient with respect to the input): ``value``
    [batch, d, h, w, out] to ``output_shape`` [batch, D, H, W, in] with a ``[kd, kh, kw, in,
    out]`` ``filter``. Built as exactly that gradient of the composed ``conv3d`` (so its own
    gradients are those ops' second derivatives); the depth, height, width and channels of
    ``output_shape`` must be known when the graph is built (the batch may come at run time)."""
    from ..gradients import gradients
    from .array import shape_tensor, static_dims

    fn = "conv3d_transpose"
    filter = filters if filter is None else filter
    v = convert_to_tensor(value)
    f = convert_to_tensor(filter, dtype=v.dtype)
    if output_shape is None:
        raise InvalidArgumentError(f"{fn}: output_shape is required")
    if f.shape.ndims not in (None, 5):
        raise InvalidArgumentError(f"{fn}: filter must be [kd, kh, kw, in, out], got {f.shape}")
    with name_scope(name or "conv3d_transpose"):
        shape_t = shape_tensor(fn, output_shape)
        dims = static_dims(shape_t)
        if dims.ndims != 5 or None in dims.as_list()[1:]:
            raise UnimplementedError(
                f"{fn}: hetbed needs output_shape's depth, height, width and channels known "
                f"when the graph is built, got {dims}"
            )
        fk = f.shape.as_list() if f.shape.ndims == 5 else [None] * 5
        if fk[3] is not None and fk[3] != dims.as_list()[4]:
            raise InvalidArgumentError(
                f"{fn}: output_shape's channels {dims.as_list()[4]} do not match the filter's "
                f"input channels {fk[3]} (filter {f.shape})"
            )
        x = _manip.zeros(shape_t, dtype=v.dtype)
        x.set_shape(dims)
        y = conv3d(x, f, strides, padding, data_format, dilations)
        if v.shape.ndims is not None and not y.shape.is_compatible_with(v.shape):
            raise InvalidArgumentError(
                f"{fn}: value has shape {v.shape}, but conv3d of output_shape {dims} with this "
                f"filter, strides and padding gives {y.shape}"
            )
        (out,) = gradients(y, x, grad_ys=v)
        out.set_shape(dims)
        return out
