"""Keras's core layers: ``tf.layers``' Dense, Dropout, Flatten and BatchNormalization with
Keras's defaults and names, and Activation, Reshape, Lambda, LeakyReLU, Embedding and the merge
layers (Add, Subtract, Multiply, Average, Maximum, Minimum, Concatenate)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import hetbed as hb
from hetbed.runtime import layers as _rl
from hetbed.runtime.graph import Tensor

from . import activations, initializers, regularizers
from .engine import Layer


def keras_args(**kw: Any) -> dict:
    """Keras's string arguments made objects: ``activation``, ``*_initializer``,
    ``*_regularizer``."""
    for k, v in list(kw.items()):
        if k == "activation":
            kw[k] = activations.get(v)
        elif k.endswith("_initializer"):
            kw[k] = initializers.get(v)
        elif k.endswith("_regularizer"):
            kw[k] = regularizers.get(v)
    return kw


class Dense(_rl.Dense, Layer):
    """``activation(inputs @ kernel + bias)`` (kernel glorot_uniform, bias zeros)."""

    def __init__(
        self,
        units: int,
        activation: Any = None,
        use_bias: bool = True,
        kernel_initializer: Any = "glorot_uniform",
        bias_initializer: Any = "zeros",
        **kw: Any,
    ):
        super().__init__(
            units,
            **keras_args(
                activation=activation,
                use_bias=use_bias,
                kernel_initializer=kernel_initializer,
                bias_initializer=bias_initializer,
                **kw,
            ),
        )


class Dropout(_rl.Dropout, Layer):
    """Zero each element with probability ``rate`` in training (the learning phase), scaling the
    rest by 1 / (1 - rate)."""

    def call(self, inputs: Tensor, training: Any = None) -> Tensor:
        return super().call(inputs, training=training)


class Flatten(_rl.Flatten, Layer):
    """``[batch, d1, d2, ...]`` -> ``[batch, d1 * d2 * ...]``."""

    def __init__(self, data_format: str | None = None, **kw: Any):
        super().__init__(data_format=data_format or "channels_last", **kw)

    def call(self, inputs: Tensor) -> Tensor:
        dims = inputs.shape.dims
        if dims is not None and any(d is None for d in dims[1:]):
            return hb.reshape(inputs, hb.stack([hb.shape(inputs)[0], -1]))
        return super().call(inputs)


class BatchNormalization(_rl.BatchNormalization, Layer):
    """Batch statistics in training (the learning phase), moving ones otherwise; the moving
    averages are updated by ``layer.updates`` (``fit`` runs them)."""

    def __init__(self, axis: int = -1, momentum: float = 0.99, epsilon: float = 1e-3, **kw: Any):
        super().__init__(axis, momentum, epsilon, **keras_args(**kw))

    def call(self, inputs: Tensor, training: Any = None) -> Tensor:
        return super().call(inputs, training=training)


class Activation(Layer):
    """``activation(inputs)`` for an activation given by name or as a function."""

    def __init__(self, activation: Any, **kw: Any):
        super().__init__(**kw)
        self.activation = activations.get(activation)

    def call(self, inputs: Tensor) -> Tensor:
        return self.activation(inputs) if self.activation is not None else inputs


class LeakyReLU(Layer):
    """``x`` where positive, ``alpha * x`` elsewhere."""

    def __init__(self, alpha: float = 0.3, **kw: Any):
        super().__init__(**kw)
        self.alpha = float(alpha)

    def call(self, inputs: Tensor) -> Tensor:
        return hb.maximum(inputs, self.alpha * inputs)


class ReLU(Layer):
    def __init__(self, max_value: Any = None, negative_slope: float = 0.0, **kw: Any):
        super().__init__(**kw)
        self.max_value, self.negative_slope = max_value, negative_slope

    def call(self, inputs: Tensor) -> Tensor:
        return activations.relu(inputs, self.negative_slope, self.max_value)


class Softmax(Layer):
    def __init__(self, axis: int = -1, **kw: Any):
        super().__init__(**kw)
        self.axis = axis

    def call(self, inputs: Tensor) -> Tensor:
        return hb.nn.softmax(inputs, axis=self.axis)


class Reshape(Layer):
    """Reshape each sample to ``target_shape`` (one entry may be -1)."""

    def __init__(self, target_shape: Sequence[int], **kw: Any):
        super().__init__(**kw)
        self.target_shape = tuple(int(d) for d in target_shape)

    def call(self, inputs: Tensor) -> Tensor:
        dims = inputs.shape.as_list() if inputs.shape.ndims is not None else None
        target = list(self.target_shape)
        if dims is not None and None not in dims[1:]:
            n = int(np.prod(dims[1:]))
            known = int(np.prod([d for d in target if d != -1]))
            if -1 in target:
                if n % known:
                    raise ValueError(
                        f"layer {self.name!r}: cannot reshape {tuple(dims)} to {self.target_shape}"
                    )
                target[target.index(-1)] = n // known
            elif known != n:
                raise ValueError(
                    f"layer {self.name!r}: total size of the new shape {self.target_shape} "
                    f"({known}) differs from that of the input {tuple(dims[1:])} ({n})"
                )
            return hb.reshape(inputs, [-1, *target])
        return hb.reshape(inputs, hb.concat([hb.shape(inputs)[:1], target], 0))


class Permute(Layer):
    """Permute the non-batch axes: ``dims`` counts them from 1."""

    def __init__(self, dims: Sequence[int], **kw: Any):
        super().__init__(**kw)
        self.dims = tuple(dims)

    def call(self, inputs: Tensor) -> Tensor:
        return hb.transpose(inputs, [0, *self.dims])


class RepeatVector(Layer):
    """``[batch, d]`` -> ``[batch, n, d]``."""

    def __init__(self, n: int, **kw: Any):
        super().__init__(**kw)
        self.n = int(n)

    def call(self, inputs: Tensor) -> Tensor:
        return hb.tile(hb.expand_dims(inputs, 1), [1, self.n, 1])


class Lambda(Layer):
    """A layer that applies ``function(inputs, **arguments)``."""

    def __init__(
        self,
        function: Callable,
        output_shape: Any = None,
        mask: Any = None,
        arguments: dict | None = None,
        **kw: Any,
    ):
        super().__init__(**kw)
        self.function = function
        self.arguments = dict(arguments or {})

    def call(self, inputs: Any) -> Any:
        return self.function(inputs, **self.arguments)


class Embedding(Layer):
    """Rows of an ``[input_dim, output_dim]`` matrix looked up by integer ids."""

    def __init__(
        self,
        input_dim: int,
        output_dim: int,
        embeddings_initializer: Any = "uniform",
        embeddings_regularizer: Any = None,
        activity_regularizer: Any = None,
        embeddings_constraint: Any = None,
        mask_zero: bool = False,
        input_length: int | None = None,
        **kw: Any,
    ):
        if "input_shape" not in kw:  # as TF 1.13+: a first layer implies ids of any length
            kw["input_shape"] = (input_length,) if input_length else (None,)
        kw.setdefault("dtype", "float32")
        super().__init__(**kw)
        self.input_dim, self.output_dim = int(input_dim), int(output_dim)
        self.embeddings_initializer = initializers.get(embeddings_initializer)
        self.embeddings_regularizer = regularizers.get(embeddings_regularizer)
        self.embeddings_constraint = embeddings_constraint
        self.mask_zero = mask_zero

    def build(self, input_shape: Any) -> None:
        self.embeddings = self.add_weight(
            "embeddings",
            [self.input_dim, self.output_dim],
            initializer=self.embeddings_initializer,
            regularizer=self.embeddings_regularizer,
            constraint=self.embeddings_constraint,
        )

    def call(self, inputs: Tensor) -> Tensor:
        ids = inputs if inputs.dtype in (hb.int32, hb.int64) else hb.cast(inputs, hb.int32)
        return hb.nn.embedding_lookup(self.embeddings, ids)


# ---- merge layers ---------------------------------------------------------------------------


class _Merge(Layer):
    """Combine a list of tensors of the same shape elementwise."""

    _min_inputs = 2

    def _check(self, inputs: Any) -> list:
        if not isinstance(inputs, (list, tuple)) or len(inputs) < self._min_inputs:
            raise ValueError(
                f"layer {self.name!r} ({type(self).__name__}) takes a list of at least "
                f"{self._min_inputs} tensors, got {inputs!r}"
            )
        return list(inputs)

    def call(self, inputs: Any) -> Tensor:
        xs = self._check(inputs)
        out = xs[0]
        for x in xs[1:]:
            out = self._combine(out, x)
        return self._finish(out, len(xs))

    def _combine(self, a: Tensor, b: Tensor) -> Tensor:
        raise NotImplementedError

    def _finish(self, out: Tensor, n: int) -> Tensor:
        return out


class Add(_Merge):
    def _combine(self, a, b):
        return hb.add(a, b)


class Subtract(_Merge):
    def call(self, inputs: Any) -> Tensor:
        xs = self._check(inputs)
        if len(xs) != 2:
            raise ValueError(f"layer {self.name!r} (Subtract) takes exactly 2 inputs")
        return hb.subtract(xs[0], xs[1])


class Multiply(_Merge):
    def _combine(self, a, b):
        return hb.multiply(a, b)


class Average(Add):
    def _finish(self, out, n):
        return out / float(n)


class Maximum(_Merge):
    def _combine(self, a, b):
        return hb.maximum(a, b)


class Minimum(_Merge):
    def _combine(self, a, b):
        return hb.minimum(a, b)


class Concatenate(_Merge):
    """Concatenate along ``axis`` (the last by default)."""

    _min_inputs = 1

    def __init__(self, axis: int = -1, **kw: Any):
        super().__init__(**kw)
        self.axis = axis

    def call(self, inputs: Any) -> Tensor:
        return hb.concat(self._check(inputs), self.axis)


def add(inputs: Sequence, **kw: Any) -> Tensor:
    return Add(**kw)(list(inputs))


def subtract(inputs: Sequence, **kw: Any) -> Tensor:
    return Subtract(**kw)(list(inputs))


def multiply(inputs: Sequence, **kw: Any) -> Tensor:
    return Multiply(**kw)(list(inputs))


def average(inputs: Sequence, **kw: Any) -> Tensor:
    return Average(**kw)(list(inputs))


def maximum(inputs: Sequence, **kw: Any) -> Tensor:
    return Maximum(**kw)(list(inputs))


def minimum(inputs: Sequence, **kw: Any) -> Tensor:
    return Minimum(**kw)(list(inputs))


def concatenate(inputs: Sequence, axis: int = -1, **kw: Any) -> Tensor:
    return Concatenate(axis=axis, **kw)(list(inputs))
