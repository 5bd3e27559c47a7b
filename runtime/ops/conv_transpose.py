"""Transposed convolution and the second-order rules of convolution.

``conv2d_transpose`` is TF1's ``tf.nn.conv2d_transpose``: the gradient of a convolution with
respect to its input, used forward (the op is ``Conv2DBackpropInput``). Differentiating it needs
the gradients of the two backprop ops, registered here:

* ``Conv2DBackpropInput(sizes, f, dy)`` is linear in ``f`` and ``dy``: d/df is
  ``Conv2DBackpropFilter(g, shape(f), dy)`` and d/d(dy) is ``Conv2D(g, f)``;
* ``Conv2DBackpropFilter(x, sizes, dy)`` is linear in ``x`` and ``dy``: d/dx is
  ``Conv2DBackpropInput(shape(x), g, dy)`` and d/d(dy) is ``Conv2D(x, g)``;

with the forward op's strides and padding. The sizes inputs get no gradient.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from ..graph import Tensor
from ..registry import apply, convert_to_tensor
from .nn import Conv2DBackpropFilter, Conv2DBackpropInput, _conv_attrs, _shape_tensor


@Conv2DBackpropInput.gradient
def _conv_bi_grad(op, g):
    _, f, dy = op.inputs
    attrs = dict(op.attrs)
    df = apply("Conv2DBackpropFilter", [g, _shape_tensor(f), dy], attrs, "Conv2DBackpropFilter")
    ddy = apply("Conv2D", [g, f], attrs, "Conv2D")
    return [None, df, ddy]


@Conv2DBackpropFilter.gradient
def _conv_bf_grad(op, g):
    x, _, dy = op.inputs
    attrs = dict(op.attrs)
    dx = apply("Conv2DBackpropInput", [_shape_tensor(x), g, dy], attrs, "Conv2DBackpropInput")
    ddy = apply("Conv2D", [x, g], attrs, "Conv2D")
    return [dx, None, ddy]


def conv2d_transpose(
    value: Any = None,
    filter: Any = None,
    output_shape: Any = None,
    strides: Any = None,
    padding: str = "SAME",
    data_format: str = "NHWC",
    name: str | None = None,
    input: Any = None,
    filters: Any = None,
    dilations: Any = None,
) -> Tensor:
    """The transpose of ``conv2d``: maps NHWC ``value`` ``[n, h, w, in]`` to ``output_shape``
    ``[n, oh, ow, out]`` with a ``[kh, kw, out, in]`` filter, so that ``conv2d`` of the output with
    the same filter, strides and padding has ``value``'s shape.

    ``output_shape`` is 4 ints or a 1-D int32 tensor (a dynamic batch size, say). Raises
    InvalidArgumentError when ``output_shape`` does not have 4 values or the channels of
    ``value``, ``filter`` and ``output_shape`` disagree.
    """
    from .array import constant

    value = input if value is None else value
    filter = filters if filter is None else filter
    if value is None or filter is None or output_shape is None:
        raise ValueError("conv2d_transpose: value, filter and output_shape are required")
    if data_format == "NCHW":  # TF's NCHW: the NHWC transpose between transposes
        from .manip import gather
        from .nn import _nhwc_window, _to_nchw, _to_nhwc

        shape = output_shape
        if isinstance(shape, (list, tuple)):
            if len(shape) != 4:
                raise InvalidArgumentError(
                    f"conv2d_transpose: output_shape must have 4 values, got {list(shape)}"
                )
            shape = [shape[0], shape[2], shape[3], shape[1]]
        else:
            shape = convert_to_tensor(shape)
            if shape.shape.ndims is not None and shape.shape.as_list() not in ([4], [None]):
                raise InvalidArgumentError(
                    f"conv2d_transpose: output_shape must have 4 values, got {shape.name} of "
                    f"shape {shape.shape}"
                )
            shape = gather(shape, [0, 2, 3, 1])
        y = conv2d_transpose(
            _to_nhwc(value, "Conv2DBackpropInput"),
            filter,
            shape,
            _nhwc_window(strides),
            padding,
            "NHWC",
            name,
            dilations=_nhwc_window(dilations),
        )
        return _to_nchw(y)
    attrs = _conv_attrs("conv2d_transpose", strides, padding, data_format, dilations)
    value = convert_to_tensor(value)
    filter = convert_to_tensor(filter, dtype=value.dtype)
    if not isinstance(output_shape, Tensor):
        shp = np.asarray(output_shape)
        if shp.shape != (4,):
            raise InvalidArgumentError(
                f"conv2d_transpose: output_shape must have 4 values, got {output_shape!r}"
            )
        output_shape = constant(shp.astype(np.int32), name="output_shape")
    elif output_shape.dtype.name != "int32":
        from .array import cast

        output_shape = cast(output_shape, "int32")
    fs, vs = filter.shape, value.shape
    if fs.ndims == 4 and vs.ndims == 4 and None not in (fs[3], vs[3]) and fs[3] != vs[3]:
        raise InvalidArgumentError(
            f"conv2d_transpose: value {value.name} has {vs[3]} channels but filter "
            f"{filter.name} expects {fs[3]} (its last dimension)"
        )
    return apply(
        "Conv2DBackpropInput",
        [output_shape, filter, value],
        attrs,
        name or "conv2d_transpose",
    )


__all__ = ["conv2d_transpose"]
