"""Keras's convolution and pooling layers (``tf.layers``' with Keras's defaults: glorot_uniform
kernels, zero biases, pool strides = pool size), global pooling, ZeroPadding2D and UpSampling2D;
all channels_last."""

from __future__ import annotations

from typing import Any

import hetbed as hb
from hetbed.runtime import layers as _rl
from hetbed.runtime import layers_extra as _rx
from hetbed.runtime.graph import Tensor

from .core_layers import keras_args
from .engine import Layer


def _fmt(data_format: str | None) -> str:
    return data_format or "channels_last"


def _conv_class(base: type, name: str, strides: Any, dilation: Any) -> type:
    def __init__(
        self,
        filters: int,
        kernel_size: Any,
        strides: Any = strides,
        padding: str = "valid",
        data_format: str | None = None,
        dilation_rate: Any = dilation,
        activation: Any = None,
        use_bias: bool = True,
        kernel_initializer: Any = "glorot_uniform",
        bias_initializer: Any = "zeros",
        **kw: Any,
    ):
        kw.pop("output_padding", None)
        base.__init__(
            self,
            filters,
            kernel_size,
            strides,
            padding,
            _fmt(data_format),
            dilation_rate,
            **keras_args(
                activation=activation,
                use_bias=use_bias,
                kernel_initializer=kernel_initializer,
                bias_initializer=bias_initializer,
                **kw,
            ),
        )

    doc = f"Keras's {name} (``tf.layers.{name}`` with Keras's defaults and names)."
    return type(name, (base, Layer), {"__init__": __init__, "__doc__": doc})


Conv1D = _conv_class(_rx.Conv1D, "Conv1D", 1, 1)
Conv2D = _conv_class(_rl.Conv2D, "Conv2D", (1, 1), (1, 1))
Conv2DTranspose = _conv_class(_rl.Conv2DTranspose, "Conv2DTranspose", (1, 1), (1, 1))


def _pool_class(base: type, name: str, default: Any) -> type:
    def __init__(
        self,
        pool_size: Any = default,
        strides: Any = None,
        padding: str = "valid",
        data_format: str | None = None,
        **kw: Any,
    ):
        base.__init__(
            self,
            pool_size,
            pool_size if strides is None else strides,
            padding,
            _fmt(data_format),
            **kw,
        )

    doc = f"Keras's {name}: strides default to the pool size."
    return type(name, (base, Layer), {"__init__": __init__, "__doc__": doc})


MaxPooling1D = _pool_class(_rx.MaxPooling1D, "MaxPooling1D", 2)
AveragePooling1D = _pool_class(_rx.AveragePooling1D, "AveragePooling1D", 2)
MaxPooling2D = _pool_class(_rl.MaxPooling2D, "MaxPooling2D", (2, 2))
AveragePooling2D = _pool_class(_rl.AveragePooling2D, "AveragePooling2D", (2, 2))
MaxPool1D, AvgPool1D, MaxPool2D, AvgPool2D = (
    MaxPooling1D,
    AveragePooling1D,
    MaxPooling2D,
    AveragePooling2D,
)


class _GlobalPooling(Layer):
    _axes: tuple = (1, 2)
    _reduce = staticmethod(hb.reduce_mean)

    def __init__(self, data_format: str | None = None, **kw: Any):
        super().__init__(**kw)
        _rl._check_channels_last(_fmt(data_format), type(self).__name__)

    def call(self, inputs: Tensor) -> Tensor:
        want = len(self._axes) + 2
        if inputs.shape.ndims not in (None, want):
            raise ValueError(
                f"layer {self.name!r} ({type(self).__name__}) takes inputs of rank {want}, got "
                f"{inputs.name} of shape {inputs.shape}"
            )
        return type(self)._reduce(inputs, axis=list(self._axes))


class GlobalAveragePooling2D(_GlobalPooling):
    """The mean over height and width: ``[b, h, w, c]`` -> ``[b, c]``."""


class GlobalMaxPooling2D(_GlobalPooling):
    """The max over height and width."""

    _reduce = staticmethod(hb.reduce_max)


class GlobalAveragePooling1D(_GlobalPooling):
    """The mean over steps: ``[b, t, c]`` -> ``[b, c]``."""

    _axes = (1,)


class GlobalMaxPooling1D(_GlobalPooling):
    _axes = (1,)
    _reduce = staticmethod(hb.reduce_max)


GlobalAvgPool2D, GlobalMaxPool2D = GlobalAveragePooling2D, GlobalMaxPooling2D
GlobalAvgPool1D, GlobalMaxPool1D = GlobalAveragePooling1D, GlobalMaxPooling1D


def _two_pairs(padding: Any) -> tuple[tuple[int, int], tuple[int, int]]:
    if isinstance(padding, int):
        return (padding, padding), (padding, padding)
    a, b = padding
    if isinstance(a, int) and isinstance(b, int):
        return (a, a), (b, b)
    return tuple(a), tuple(b)  # type: ignore[return-value]


class ZeroPadding2D(Layer):
    """Zeros added around height and width: ``padding`` an int, ``(h, w)`` or
    ``((top, bottom), (left, right))``."""

    def __init__(self, padding: Any = (1, 1), data_format: str | None = None, **kw: Any):
        super().__init__(**kw)
        _rl._check_channels_last(_fmt(data_format), "ZeroPadding2D")
        self.padding = _two_pairs(padding)

    def call(self, inputs: Tensor) -> Tensor:
        return hb.pad(inputs, [[0, 0], list(self.padding[0]), list(self.padding[1]), [0, 0]])


class UpSampling2D(Layer):
    """Each row and column repeated ``size`` times (nearest neighbour)."""

    def __init__(
        self,
        size: Any = (2, 2),
        data_format: str | None = None,
        interpolation: str = "nearest",
        **kw: Any,
    ):
        super().__init__(**kw)
        _rl._check_channels_last(_fmt(data_format), "UpSampling2D")
        if interpolation != "nearest":
            raise NotImplementedError(f"UpSampling2D: interpolation {interpolation!r}")
        self.size = _rl._pair(size, "size")

    def call(self, inputs: Tensor) -> Tensor:
        sh, sw = self.size
        _, h, w, c = inputs.shape.as_list()
        if h is None or w is None or c is None:
            raise ValueError(f"layer {self.name!r}: UpSampling2D needs known h, w, c")
        x = hb.reshape(inputs, [-1, h, 1, w, 1, c])
        x = hb.tile(x, [1, 1, sh, 1, sw, 1])
        return hb.reshape(x, [-1, h * sh, w * sw, c])
