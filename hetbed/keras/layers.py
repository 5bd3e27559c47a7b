"""``keras.layers``: every Keras layer hetbed has (core_layers.py, conv.py, recurrent.py)."""

from .conv import (  # noqa: F401
    AveragePooling1D,
    AveragePooling2D,
    AvgPool1D,
    AvgPool2D,
    Conv1D,
    Conv2D,
    Conv2DTranspose,
    GlobalAveragePooling1D,
    GlobalAveragePooling2D,
    GlobalAvgPool1D,
    GlobalAvgPool2D,
    GlobalMaxPool1D,
    GlobalMaxPool2D,
    GlobalMaxPooling1D,
    GlobalMaxPooling2D,
    MaxPool1D,
    MaxPool2D,
    MaxPooling1D,
    MaxPooling2D,
    UpSampling2D,
    ZeroPadding2D,
)
from .core_layers import (  # noqa: F401
    Activation,
    Add,
    Average,
    BatchNormalization,
    Concatenate,
    Dense,
    Dropout,
    Embedding,
    Flatten,
    Lambda,
    LeakyReLU,
    Maximum,
    Minimum,
    Multiply,
    Permute,
    ReLU,
    RepeatVector,
    Reshape,
    Softmax,
    Subtract,
    add,
    average,
    concatenate,
    maximum,
    minimum,
    multiply,
    subtract,
)
from .engine import Input, InputLayer, Layer  # noqa: F401
from .recurrent import GRU, LSTM, RNN, Bidirectional, SimpleRNN, TimeDistributed  # noqa: F401

Convolution1D, Convolution2D, Convolution2DTranspose = Conv1D, Conv2D, Conv2DTranspose
Deconvolution2D = Conv2DTranspose
