"""More of TF1's ``tf.layers``: Conv1D, MaxPooling1D, AveragePooling1D, SeparableConv2D and
their functional forms (channels_last only)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import initializers as _init
from .conv_layers import Conv2D
from .graph import Tensor, TensorShape
from .layers import Layer, _activity, _bias_add, _check_channels_last, _padding, _pair
from .variables import Variable


def _single(value: Any, what: str) -> int:
    if isinstance(value, int):
        return value
    t = tuple(int(v) for v in value)
    if len(t) != 1:
        raise ValueError(f"{what} must be an int or a 1-tuple, got {value!r}")
    return t[0]


class Conv1D(Conv2D):
    """1-D convolution over NWC inputs with a ``[k, in, filters]`` kernel (Conv2D's
    arguments, each size an int or a 1-tuple)."""

    _layout = "NWC"
    _sizes = staticmethod(_single)

    def __init__(
        self,
        filters: int,
        kernel_size: Any,
        strides: Any = 1,
        padding: str = "valid",
        data_format: str = "channels_last",
        dilation_rate: Any = 1,
        *args: Any,
        **kw: Any,
    ):  # (TF1's order: Conv2D's after dilation_rate)
        super().__init__(
            filters, kernel_size, strides, padding, data_format, dilation_rate, *args, **kw
        )

    def _kernel_dims(self) -> list:
        return [self.kernel_size]

    def _convolve(self, inputs: Tensor) -> Tensor:
        from .ops.nn_extra import conv1d as _conv1d

        return _conv1d(
            inputs,
            self.kernel,
            stride=self.strides,
            padding=self.padding,
            dilations=self.dilation_rate,
        )


def conv1d(
    inputs: Any,
    filters: int,
    kernel_size: Any,
    strides: Any = 1,
    padding: str = "valid",
    data_format: str = "channels_last",
    dilation_rate: Any = 1,
    activation: Any = None,
    use_bias: bool = True,
    kernel_initializer: Any = None,
    bias_initializer: Any = None,
    kernel_regularizer: Any = None,
    bias_regularizer: Any = None,
    activity_regularizer: Any = None,
    kernel_constraint: Any = None,
    bias_constraint: Any = None,
    trainable: bool = True,
    name: str | None = None,
    reuse: Any = None,
) -> Tensor:
    """A 1-D convolution layer (variables ``<name>/kernel`` and ``<name>/bias``)."""
    return Conv1D(
        filters,
        kernel_size,
        strides=strides,
        padding=padding,
        data_format=data_format,
        dilation_rate=dilation_rate,
        activation=activation,
        use_bias=use_bias,
        kernel_initializer=kernel_initializer,
        bias_initializer=bias_initializer,
        kernel_regularizer=kernel_regularizer,
        bias_regularizer=bias_regularizer,
        activity_regularizer=activity_regularizer,
        kernel_constraint=kernel_constraint,
        bias_constraint=bias_constraint,
        trainable=trainable,
        name=name,
        _reuse=reuse,
    )(inputs)


class _Pooling1D(Layer):
    _type = "MAX"

    def __init__(
        self,
        pool_size: Any,
        strides: Any,
        padding: str = "valid",
        data_format: str = "channels_last",
        name: str | None = None,
        **kwargs: Any,
    ):
        super().__init__(name=name, **kwargs)
        _check_channels_last(data_format, type(self).__name__)
        self.pool_size = _single(pool_size, "pool_size")
        self.strides = _single(strides, "strides")
        self.padding = _padding(padding)

    def call(self, inputs: Tensor) -> Tensor:
        from .ops.nn_extra import pool

        return pool(inputs, [self.pool_size], self._type, self.padding, strides=[self.strides])


class MaxPooling1D(_Pooling1D):
    """Max over ``pool_size`` windows moved by ``strides`` (NWC)."""

    _type = "MAX"


class AveragePooling1D(_Pooling1D):
    """Mean over ``pool_size`` windows moved by ``strides`` (NWC)."""

    _type = "AVG"


def max_pooling1d(
    inputs: Any,
    pool_size: Any,
    strides: Any,
    padding: str = "valid",
    data_format: str = "channels_last",
    name: str | None = None,
) -> Tensor:
    return MaxPooling1D(pool_size, strides, padding, data_format, name=name)(inputs)


def average_pooling1d(
    inputs: Any,
    pool_size: Any,
    strides: Any,
    padding: str = "valid",
    data_format: str = "channels_last",
    name: str | None = None,
) -> Tensor:
    return AveragePooling1D(pool_size, strides, padding, data_format, name=name)(inputs)


class SeparableConv2D(Layer):
    """Depthwise then 1x1 pointwise convolution (variables ``depthwise_kernel``,
    ``pointwise_kernel`` and ``bias``), NHWC."""

    def __init__(
        self,
        filters: int,
        kernel_size: Any,
        strides: Any = (1, 1),
        padding: str = "valid",
        data_format: str = "channels_last",
        dilation_rate: Any = (1, 1),
        depth_multiplier: int = 1,
        activation: Callable | None = None,
        use_bias: bool = True,
        depthwise_initializer: Any = None,
        pointwise_initializer: Any = None,
        bias_initializer: Any = None,
        depthwise_regularizer: Callable | None = None,
        pointwise_regularizer: Callable | None = None,
        bias_regularizer: Callable | None = None,
        activity_regularizer: Callable | None = None,
        depthwise_constraint: Callable | None = None,
        pointwise_constraint: Callable | None = None,
        bias_constraint: Callable | None = None,
        trainable: bool = True,
        name: str | None = None,
        **kwargs: Any,
    ):
        super().__init__(trainable=trainable, name=name, **kwargs)
        _check_channels_last(data_format, "SeparableConv2D")
        self.filters = int(filters)
        self.kernel_size = _pair(kernel_size, "kernel_size")
        self.strides = _pair(strides, "strides")
        self.padding = _padding(padding)
        self.dilation_rate = _pair(dilation_rate, "dilation_rate")
        self.depth_multiplier = int(depth_multiplier)
        self.activation = activation
        self.use_bias = use_bias
        self.depthwise_initializer = depthwise_initializer
        self.pointwise_initializer = pointwise_initializer
        self.bias_initializer = bias_initializer if bias_initializer is not None else _init.Zeros()
        self.depthwise_regularizer = depthwise_regularizer
        self.pointwise_regularizer = pointwise_regularizer
        self.bias_regularizer = bias_regularizer
        self.activity_regularizer = activity_regularizer
        self.depthwise_constraint = depthwise_constraint
        self.pointwise_constraint = pointwise_constraint
        self.bias_constraint = bias_constraint
        self.depthwise_kernel: Variable | None = None
        self.pointwise_kernel: Variable | None = None
        self.bias: Variable | None = None

    def build(self, input_shape: TensorShape) -> None:
        if input_shape.ndims != 4 or input_shape[-1] is None:
            raise ValueError(
                f"SeparableConv2D needs NHWC inputs with a known channel dimension, "
                f"got {input_shape}"
            )
        c = input_shape[-1]
        self.depthwise_kernel = self.add_weight(
            "depthwise_kernel",
            [*self.kernel_size, c, self.depth_multiplier],
            initializer=self.depthwise_initializer,
            regularizer=self.depthwise_regularizer,
            constraint=self.depthwise_constraint,
        )
        self.pointwise_kernel = self.add_weight(
            "pointwise_kernel",
            [1, 1, c * self.depth_multiplier, self.filters],
            initializer=self.pointwise_initializer,
            regularizer=self.pointwise_regularizer,
            constraint=self.pointwise_constraint,
        )
        if self.use_bias:
            self.bias = self.add_weight(
                "bias",
                [self.filters],
                initializer=self.bias_initializer,
                regularizer=self.bias_regularizer,
                constraint=self.bias_constraint,
            )

    def call(self, inputs: Tensor) -> Tensor:
        from .ops.nn_extra import separable_conv2d as _sep

        out = _sep(
            inputs,
            self.depthwise_kernel,
            self.pointwise_kernel,
            strides=[1, *self.strides, 1],
            padding=self.padding,
            rate=self.dilation_rate,
        )
        if self.use_bias:
            out = _bias_add(out, self.bias)
        if self.activation is not None:
            out = self.activation(out)
        _activity(self, self.activity_regularizer, out)
        return out


def separable_conv2d(
    inputs: Any,
    filters: int,
    kernel_size: Any,
    strides: Any = (1, 1),
    padding: str = "valid",
    data_format: str = "channels_last",
    dilation_rate: Any = (1, 1),
    depth_multiplier: int = 1,
    activation: Any = None,
    use_bias: bool = True,
    depthwise_initializer: Any = None,
    pointwise_initializer: Any = None,
    bias_initializer: Any = None,
    depthwise_regularizer: Any = None,
    pointwise_regularizer: Any = None,
    bias_regularizer: Any = None,
    activity_regularizer: Any = None,
    depthwise_constraint: Any = None,
    pointwise_constraint: Any = None,
    bias_constraint: Any = None,
    trainable: bool = True,
    name: str | None = None,
    reuse: Any = None,
) -> Tensor:
    """A separable 2-D convolution layer."""
    return SeparableConv2D(
        filters,
        kernel_size,
        strides=strides,
        padding=padding,
        data_format=data_format,
        dilation_rate=dilation_rate,
        depth_multiplier=depth_multiplier,
        activation=activation,
        use_bias=use_bias,
        depthwise_initializer=depthwise_initializer,
        pointwise_initializer=pointwise_initializer,
        bias_initializer=bias_initializer,
        depthwise_regularizer=depthwise_regularizer,
        pointwise_regularizer=pointwise_regularizer,
        bias_regularizer=bias_regularizer,
        activity_regularizer=activity_regularizer,
        depthwise_constraint=depthwise_constraint,
        pointwise_constraint=pointwise_constraint,
        bias_constraint=bias_constraint,
        trainable=trainable,
        name=name,
        _reuse=reuse,
    )(inputs)
