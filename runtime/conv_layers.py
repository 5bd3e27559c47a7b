"""Convolution and pooling layers (TF1's ``tf.layers.Conv2D``, ``Conv2DTranspose``,
``MaxPooling2D``, ``AveragePooling2D`` and their functional forms), on ``runtime.layers.Layer``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import initializers as _init
from .graph import Tensor, TensorShape
from .layers import Layer, _activity, _bias_add, _check_channels_last, _padding, _pair
from .variables import Variable

# ---- Conv2D ----------------------------------------------------------------------------


class Conv2D(Layer):
    """2-D convolution over NHWC inputs with a ``[kh, kw, in, filters]`` kernel. Subclasses of
    another rank (Conv1D) change the hooks: ``_sizes`` (parse a size argument), ``_layout``,
    ``_kernel_dims`` and ``_convolve``."""

    _layout = "NHWC"
    _sizes = staticmethod(_pair)

    def __init__(
        self,
        filters: int,
        kernel_size: Any,
        strides: Any = (1, 1),
        padding: str = "valid",
        data_format: str = "channels_last",
        dilation_rate: Any = (1, 1),
        activation: Callable | None = None,
        use_bias: bool = True,
        kernel_initializer: Any = None,
        bias_initializer: Any = None,
        kernel_regularizer: Callable | None = None,
        bias_regularizer: Callable | None = None,
        activity_regularizer: Callable | None = None,
        kernel_constraint: Callable | None = None,
        bias_constraint: Callable | None = None,
        trainable: bool = True,
        name: str | None = None,
        **kwargs: Any,
    ):
        super().__init__(trainable=trainable, name=name, **kwargs)
        _check_channels_last(data_format, type(self).__name__)
        self.filters = int(filters)
        self.kernel_size = self._sizes(kernel_size, "kernel_size")
        self.strides = self._sizes(strides, "strides")
        self.padding = _padding(padding)
        self.dilation_rate = self._sizes(dilation_rate, "dilation_rate")
        self.activation = activation
        self.use_bias = use_bias
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer if bias_initializer is not None else _init.Zeros()
        self.kernel_regularizer = kernel_regularizer
        self.bias_regularizer = bias_regularizer
        self.activity_regularizer = activity_regularizer
        self.kernel_constraint = kernel_constraint
        self.bias_constraint = bias_constraint
        self.kernel: Variable | None = None
        self.bias: Variable | None = None

    def _kernel_dims(self) -> list:
        return list(self.kernel_size)

    def build(self, input_shape: TensorShape) -> None:
        if input_shape.ndims != len(self._layout) or input_shape[-1] is None:
            raise ValueError(
                f"{type(self).__name__} needs {self._layout} inputs with a known channel "
                f"dimension, got {input_shape}"
            )
        self.kernel = self.add_weight(
            "kernel",
            [*self._kernel_dims(), input_shape[-1], self.filters],
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )
        if self.use_bias:
            self.bias = self.add_weight(
                "bias",
                [self.filters],
                initializer=self.bias_initializer,
                regularizer=self.bias_regularizer,
                constraint=self.bias_constraint,
            )

    def _convolve(self, inputs: Tensor) -> Tensor:
        from .ops import nn

        kw: dict[str, Any] = {}
        if self.dilation_rate != (1, 1):
            kw["dilations"] = [1, *self.dilation_rate, 1]
        return nn.conv2d(
            inputs,
            self.kernel,
            strides=[1, *self.strides, 1],
            padding=self.padding,
            data_format="NHWC",
            **kw,
        )

    def call(self, inputs: Tensor) -> Tensor:
        out = self._convolve(inputs)
        if self.use_bias:
            out = _bias_add(out, self.bias)
        if self.activation is not None:
            out = self.activation(out)
        _activity(self, self.activity_regularizer, out)
        return out


def conv2d(
    inputs: Any,
    filters: int,
    kernel_size: Any,
    strides: Any = (1, 1),
    padding: str = "valid",
    data_format: str = "channels_last",
    dilation_rate: Any = (1, 1),
    activation: Callable | None = None,
    use_bias: bool = True,
    kernel_initializer: Any = None,
    bias_initializer: Any = None,
    kernel_regularizer: Callable | None = None,
    bias_regularizer: Callable | None = None,
    activity_regularizer: Callable | None = None,
    kernel_constraint: Callable | None = None,
    bias_constraint: Callable | None = None,
    trainable: bool = True,
    name: str | None = None,
    reuse: Any = None,
) -> Tensor:
    """A 2-D convolution layer (variables ``<name>/kernel`` and ``<name>/bias``)."""
    layer = Conv2D(
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
    )
    return layer(inputs)


# ---- pooling and flatten -----------------------------------------------------------------


class _Pooling2D(Layer):
    _nn_fn = ""
    _sizes = staticmethod(_pair)  # parses a size argument (Pooling3D: a triple)

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
        self.pool_size = self._sizes(pool_size, "pool_size")
        self.strides = self._sizes(strides, "strides")
        self.padding = _padding(padding)

    def call(self, inputs: Tensor) -> Tensor:
        from .ops import nn

        return getattr(nn, self._nn_fn)(
            inputs,
            ksize=[1, *self.pool_size, 1],
            strides=[1, *self.strides, 1],
            padding=self.padding,
            data_format="NHWC",
        )


class MaxPooling2D(_Pooling2D):
    """Max over ``pool_size`` windows moved by ``strides`` (NHWC)."""

    _nn_fn = "max_pool"


class AveragePooling2D(_Pooling2D):
    """Mean over ``pool_size`` windows moved by ``strides`` (NHWC)."""

    _nn_fn = "avg_pool"


def max_pooling2d(
    inputs: Any,
    pool_size: Any,
    strides: Any,
    padding: str = "valid",
    data_format: str = "channels_last",
    name: str | None = None,
) -> Tensor:
    return MaxPooling2D(pool_size, strides, padding, data_format, name=name)(inputs)


def average_pooling2d(
    inputs: Any,
    pool_size: Any,
    strides: Any,
    padding: str = "valid",
    data_format: str = "channels_last",
    name: str | None = None,
) -> Tensor:
    return AveragePooling2D(pool_size, strides, padding, data_format, name=name)(inputs)


class Conv2DTranspose(Conv2D):
    """The transpose of a 2-D convolution (sometimes called deconvolution) over NHWC inputs,
    with a ``[kh, kw, filters, in]`` kernel, as TF1's ``tf.layers.Conv2DTranspose``.

    Each output side is ``in * stride`` with "same" padding and
    ``in * stride + max(kernel - stride, 0)`` with "valid" (TF's deconv_output_length).
    """

    def build(self, input_shape: TensorShape) -> None:
        build_transposed(self, input_shape, "Conv2DTranspose", "NHWC")

    def _out_len(self, n: int | None, k: int, s: int) -> int | None:
        if n is None:
            return None
        return n * s if self.padding == "SAME" else n * s + max(k - s, 0)

    def call(self, inputs: Tensor) -> Tensor:
        from .ops import array, manip
        from .ops.conv_transpose import conv2d_transpose as _conv2d_transpose

        _, h, w, _ = inputs.shape.as_list()
        oh = self._out_len(h, self.kernel_size[0], self.strides[0])
        ow = self._out_len(w, self.kernel_size[1], self.strides[1])
        if oh is None or ow is None:
            raise ValueError(
                f"Conv2DTranspose needs inputs with known height and width, got {inputs.shape}"
            )
        batch = inputs.shape[0]
        if batch is None:
            batch = manip.strided_slice(array.shape(inputs), [0], [1], shrink_axis_mask=1)
        out_shape = manip.stack([batch, oh, ow, self.filters])
        out = _conv2d_transpose(
            inputs, self.kernel, out_shape, strides=[1, *self.strides, 1], padding=self.padding
        )
        out.set_shape([inputs.shape[0], oh, ow, self.filters])
        return finish_conv(self, out)


def build_transposed(layer: Any, input_shape: TensorShape, what: str, layout: str) -> None:
    """A transposed convolution's ``[*kernel_size, filters, in]`` kernel and its bias, for
    inputs of ``layout`` (NHWC, NDHWC) with a known channel dimension."""
    if input_shape.ndims != len(layout) or input_shape[-1] is None:
        raise ValueError(
            f"{what} needs {layout} inputs with a known channel dimension, got {input_shape}"
        )
    if any(d != 1 for d in layer.dilation_rate):
        raise ValueError(f"{what}: dilation_rate other than 1 is not supported")
    layer.kernel = layer.add_weight(
        "kernel",
        [*layer.kernel_size, layer.filters, input_shape[-1]],
        initializer=layer.kernel_initializer,
        regularizer=layer.kernel_regularizer,
        constraint=layer.kernel_constraint,
    )
    if layer.use_bias:
        layer.bias = layer.add_weight(
            "bias",
            [layer.filters],
            initializer=layer.bias_initializer,
            regularizer=layer.bias_regularizer,
            constraint=layer.bias_constraint,
        )


def finish_conv(layer: Any, out: Tensor) -> Tensor:
    """A convolution layer's bias, activation and activity regularizer on ``out``."""
    if layer.use_bias:
        out = _bias_add(out, layer.bias)
    if layer.activation is not None:
        out = layer.activation(out)
    _activity(layer, layer.activity_regularizer, out)
    return out


def conv2d_transpose(
    inputs: Any,
    filters: int,
    kernel_size: Any,
    strides: Any = (1, 1),
    padding: str = "valid",
    data_format: str = "channels_last",
    activation: Callable | None = None,
    use_bias: bool = True,
    kernel_initializer: Any = None,
    bias_initializer: Any = None,
    kernel_regularizer: Callable | None = None,
    bias_regularizer: Callable | None = None,
    activity_regularizer: Callable | None = None,
    kernel_constraint: Callable | None = None,
    bias_constraint: Callable | None = None,
    trainable: bool = True,
    name: str | None = None,
    reuse: Any = None,
) -> Tensor:
    """A transposed 2-D convolution layer (variables ``<name>/kernel`` and ``<name>/bias``)."""
    layer = Conv2DTranspose(
        filters,
        kernel_size,
        strides=strides,
        padding=padding,
        data_format=data_format,
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
    )
    return layer(inputs)
