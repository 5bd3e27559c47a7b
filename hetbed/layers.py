"""``hb.layers`` (TF1's ``tf.layers``): layer classes and their functional forms."""

from hetbed.runtime.layers import (
    AveragePooling2D,
    BatchNormalization,
    Conv2D,
    Conv2DTranspose,
    Dense,
    Dropout,
    Flatten,
    Layer,
    MaxPooling2D,
    average_pooling2d,
    batch_normalization,
    conv2d,
    conv2d_transpose,
    dense,
    dropout,
    flatten,
    max_pooling2d,
)

AvgPool2D = AveragePooling2D
MaxPool2D = MaxPooling2D
Convolution2D = Conv2D
Convolution2DTranspose = Conv2DTranspose

__all__ = [
    "AvgPool2D",
    "AveragePooling2D",
    "BatchNormalization",
    "Conv2D",
    "Convolution2D",
    "Conv2DTranspose",
    "Convolution2DTranspose",
    "Dense",
    "Dropout",
    "Flatten",
    "Layer",
    "MaxPool2D",
    "MaxPooling2D",
    "average_pooling2d",
    "batch_normalization",
    "conv2d",
    "conv2d_transpose",
    "dense",
    "dropout",
    "flatten",
    "max_pooling2d",
]

# ---- WP3: 1-D convolution and pooling, separable convolution ----
from hetbed.runtime.layers_extra import (  # noqa: E402
    AveragePooling1D,
    Conv1D,
    MaxPooling1D,
    SeparableConv2D,
    average_pooling1d,
    conv1d,
    max_pooling1d,
    separable_conv2d,
)

AvgPool1D = AveragePooling1D
MaxPool1D = MaxPooling1D
Convolution1D = Conv1D
SeparableConvolution2D = SeparableConv2D

__all__ += [
    "AvgPool1D",
    "AveragePooling1D",
    "Conv1D",
    "Convolution1D",
    "MaxPool1D",
    "MaxPooling1D",
    "SeparableConv2D",
    "SeparableConvolution2D",
    "average_pooling1d",
    "conv1d",
    "max_pooling1d",
    "separable_conv2d",
]

# ---- 3-D convolution and pooling (runtime/layers_3d.py) ----
from hetbed.runtime.layers_3d import (  # noqa: E402
    AveragePooling3D,
    Conv3D,
    Conv3DTranspose,
    MaxPooling3D,
    average_pooling3d,
    conv3d,
    conv3d_transpose,
    max_pooling3d,
)

AvgPool3D = AveragePooling3D
MaxPool3D = MaxPooling3D
Convolution3D = Conv3D
Convolution3DTranspose = Conv3DTranspose
__all__ += [
    "Conv3DTranspose",
    "Convolution3DTranspose",
    "conv3d_transpose",
    "AvgPool3D",
    "AveragePooling3D",
    "Conv3D",
    "Convolution3D",
    "MaxPool3D",
    "MaxPooling3D",
    "average_pooling3d",
    "conv3d",
    "max_pooling3d",
]
