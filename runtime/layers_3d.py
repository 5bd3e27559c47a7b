"""3-D convolution and pooling layers over NDHWC volumes (TF1's ``tf.layers.Conv3D``,
``MaxPooling3D``, ``AveragePooling3D`` and their functional forms), on the 2-D layers' code
with the ops of runtime/ops/conv3d.py."""

from __future__ import annotations

from typing import Any

from .conv_layers import Conv2D, _Pooling2D
from .graph import Tensor


def _triple(value: Any, what: str) -> tuple[int, int, int]:
    if isinstance(value, int):
        return value, value, value
    t = tuple(int(v) for v in value)
    if len(t) != 3:
        raise ValueError(f"{what} must be an int or a triple of ints, got {value!r}")
    return t  # type: ignore[return-value]


class Conv3D(Conv2D):
    """3-D convolution over NDHWC inputs with a ``[kd, kh, kw, in, filters]`` kernel (Conv2D's
    arguments, each size an int or a triple)."""

    _layout = "NDHWC"
    _sizes = staticmethod(_triple)

    def __init__(
        self,
        filters: int,
        kernel_size: Any,
        strides: Any = (1, 1, 1),
        padding: str = "valid",
        data_format: str = "channels_last",
        dilation_rate: Any = (1, 1, 1),
        *args: Any,
        **kw: Any,
    ):
        super().__init__(
            filters, kernel_size, strides, padding, data_format, dilation_rate, *args, **kw
        )

    def _convolve(self, inputs: Tensor) -> Tensor:
        from .ops.conv3d import conv3d as _conv3d

        return _conv3d(
            inputs,
            self.kernel,
            strides=[1, *self.strides, 1],
            padding=self.padding,
            dilations=[1, *self.dilation_rate, 1],
        )


class Conv3DTranspose(Conv3D):
    """The transpose of a 3-D convolution over NDHWC inputs with a ``[kd, kh, kw, filters,
    in]`` kernel, as TF1's ``tf.layers.Conv3DTranspose``: each output side ``in * stride``
    ("same") or ``in * stride + max(kernel - stride, 0)`` ("valid")."""

    def build(self, input_shape: Any) -> None:
        from .conv_layers import build_transposed

        build_transposed(self, input_shape, "Conv3DTranspose", "NDHWC")

    def call(self, inputs: Tensor) -> Tensor:
        from .conv_layers import finish_conv
        from .ops import array, manip
        from .ops.conv3d import conv3d_transpose as _conv3d_transpose

        sizes = inputs.shape.as_list()[1:4]
        out = [
            None if n is None else (n * s if self.padding == "SAME" else n * s + max(k - s, 0))
            for n, k, s in zip(sizes, self.kernel_size, self.strides)
        ]
        if None in out:
            raise ValueError(
                f"Conv3DTranspose needs inputs with known depth, height and width, got "
                f"{inputs.shape}"
            )
        batch = inputs.shape[0]
        if batch is None:
            batch = manip.strided_slice(array.shape(inputs), [0], [1], shrink_axis_mask=1)
        y = _conv3d_transpose(
            inputs,
            self.kernel,
            manip.stack([batch, *out, self.filters]),
            strides=[1, *self.strides, 1],
            padding=self.padding,
        )
        y.set_shape([inputs.shape[0], *out, self.filters])
        return finish_conv(self, y)


def conv3d_transpose(inputs: Any, filters: int, kernel_size: Any, *args: Any, **kw: Any) -> Tensor:
    """A 3-D transposed convolution layer (``conv3d_transpose/kernel``, ``bias``)."""
    reuse = kw.pop("reuse", None)
    return Conv3DTranspose(filters, kernel_size, *args, _reuse=reuse, **kw)(inputs)


def conv3d(inputs: Any, filters: int, kernel_size: Any, *args: Any, **kw: Any) -> Tensor:
    """A 3-D convolution layer (variables ``<name>/kernel`` and ``<name>/bias``); the other
    arguments as ``conv2d``'s, in its order."""
    reuse = kw.pop("reuse", None)
    return Conv3D(filters, kernel_size, *args, _reuse=reuse, **kw)(inputs)


class _Pooling3D(_Pooling2D):
    _sizes = staticmethod(_triple)

    def call(self, inputs: Tensor) -> Tensor:
        from .ops import conv3d as ops

        return getattr(ops, self._nn_fn)(
            inputs,
            ksize=[1, *self.pool_size, 1],
            strides=[1, *self.strides, 1],
            padding=self.padding,
        )


class MaxPooling3D(_Pooling3D):
    """Max over ``pool_size`` windows moved by ``strides`` (NDHWC)."""

    _nn_fn = "max_pool3d"


class AveragePooling3D(_Pooling3D):
    """Mean over ``pool_size`` windows moved by ``strides`` (NDHWC)."""

    _nn_fn = "avg_pool3d"


def max_pooling3d(
    inputs: Any,
    pool_size: Any,
    strides: Any,
    padding: str = "valid",
    data_format: str = "channels_last",
    name: str | None = None,
) -> Tensor:
    return MaxPooling3D(pool_size, strides, padding, data_format, name=name)(inputs)


def average_pooling3d(
    inputs: Any,
    pool_size: Any,
    strides: Any,
    padding: str = "valid",
    data_format: str = "channels_last",
    name: str | None = None,
) -> Tensor:
    return AveragePooling3D(pool_size, strides, padding, data_format, name=name)(inputs)
