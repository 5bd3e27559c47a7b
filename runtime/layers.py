"""``hb.layers``: TF1's ``tf.layers`` (Dense, Conv2D, pooling, Flatten, Dropout, BatchNormalization).

A layer makes its variables with ``get_variable`` inside a variable scope named after it
(``dense/kernel``; ``dense_1/kernel`` for the next unnamed one, as in TF1) and builds its ops in
the matching name scope. Calling a layer object again shares its variables; the functional forms
(``hb.layers.dense(x, 10)``) make a new layer per call, shared only through ``name`` + ``reuse``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from . import dtypes as _dt
from . import initializers as _init
from .graph import GraphKeys, Tensor, TensorShape, get_default_graph
from .ops import array as _array
from .ops import math as _math
from .partitioned import PartitionedVariable
from .registry import convert_to_tensor
from .variable_scope import get_variable as _get_variable
from .variable_scope import variable_scope
from .variables import Variable


def _snake(name: str) -> str:
    s = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", s).lower()


def _pair(value: Any, what: str) -> tuple[int, int]:
    if isinstance(value, int):
        return value, value
    t = tuple(int(v) for v in value)
    if len(t) != 2:
        raise ValueError(f"{what} must be an int or a pair of ints, got {value!r}")
    return t  # type: ignore[return-value]


def _padding(padding: str) -> str:
    p = padding.upper()
    if p not in ("VALID", "SAME"):
        raise ValueError(f"padding must be 'valid' or 'same', got {padding!r}")
    return p


def _check_channels_last(data_format: str, layer: str) -> None:
    if data_format not in ("channels_last", "NHWC"):
        raise ValueError(
            f"{layer}: hetbed layers take data_format='channels_last' (NHWC), got {data_format!r}"
        )


class Layer:
    """Base of all layers: scope handling, variable tracking, updates and losses.

    Subclasses implement ``build(input_shape)`` (make variables with ``add_weight``) and
    ``call(inputs, ...)``; ``__call__`` wraps both in the layer's variable and name scope.
    """

    def __init__(
        self,
        trainable: bool = True,
        name: str | None = None,
        dtype: Any = None,
        _reuse: Any = None,
        _scope: Any = None,
        **unused: Any,
    ):
        self.trainable = trainable
        self.built = False
        self._dtype = _dt.as_dtype(dtype) if dtype is not None else None
        self._base_name = name or _snake(type(self).__name__)
        self._name = self._base_name
        self._reuse = _reuse
        self._scope = _scope
        self._trainable_weights: list[Variable] = []
        self._non_trainable_weights: list[Variable] = []
        self._updates: list[Any] = []
        self._losses: list[Any] = []

    # ---- properties ------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def dtype(self) -> _dt.DType | None:
        return self._dtype

    @property
    def scope_name(self) -> str:
        if self._scope is None:
            raise ValueError(f"layer {self._name!r} has no scope until it is called")
        return self._scope.name

    @property
    def trainable_weights(self) -> list[Variable]:
        return list(self._trainable_weights) if self.trainable else []

    @property
    def non_trainable_weights(self) -> list[Variable]:
        if self.trainable:
            return list(self._non_trainable_weights)
        return self._trainable_weights + self._non_trainable_weights

    @property
    def weights(self) -> list[Variable]:
        return self.trainable_weights + self.non_trainable_weights

    variables = weights
    trainable_variables = trainable_weights
    non_trainable_variables = non_trainable_weights

    @property
    def updates(self) -> list[Any]:
        return list(self._updates)

    @property
    def losses(self) -> list[Any]:
        return list(self._losses)

    # ---- building ----------------------------------------------------------------------
    def add_weight(
        self,
        name: str,
        shape: Any,
        dtype: Any = None,
        initializer: Any = None,
        regularizer: Callable | None = None,
        trainable: bool = True,
        constraint: Callable | None = None,
    ) -> Variable:
        """Get or make the variable ``<layer scope>/name`` and track it."""
        trainable = trainable and self.trainable
        v = _get_variable(
            name,
            shape=shape,
            dtype=dtype or self._dtype or _dt.float32,
            initializer=initializer,
            regularizer=regularizer,
            trainable=trainable,
            constraint=constraint,
        )
        if v not in self._trainable_weights and v not in self._non_trainable_weights:
            (self._trainable_weights if trainable else self._non_trainable_weights).append(v)
        if regularizer is not None:
            g = get_default_graph()
            for loss in g.get_collection(GraphKeys.REGULARIZATION_LOSSES):
                prefix = v.name if isinstance(v, PartitionedVariable) else v.op.name
                name = loss.op.name
                if (
                    name.startswith(prefix + "/")
                    and "/Regularizer/" in name
                    and loss not in self._losses
                ):
                    self._losses.append(loss)
        return v

    def add_update(self, update: Any) -> None:
        self._updates.append(update)
        get_default_graph().add_to_collection(GraphKeys.UPDATE_OPS, update)

    def build(self, input_shape: TensorShape) -> None:
        self.built = True

    def call(self, inputs: Tensor, **kwargs: Any) -> Any:
        return inputs

    def _set_scope(self, scope: Any) -> None:
        if self._scope is not None:
            return
        if self._reuse:
            with variable_scope(scope if scope is not None else self._base_name) as captured:
                self._scope = captured
        else:
            with variable_scope(scope, default_name=self._base_name) as captured:
                self._scope = captured
        self._name = self._scope.name.rsplit("/", 1)[-1]

    def __call__(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        """Build on first call (in the layer's scope), then apply ``call``."""
        self._set_scope(kwargs.pop("scope", None))
        g = get_default_graph()
        reuse = True if self.built else self._reuse
        with variable_scope(self._scope, reuse=reuse, auxiliary_name_scope=False):
            with g.name_scope(self._scope.original_name_scope):
                inputs = convert_to_tensor(inputs)
                if self._dtype is None:
                    self._dtype = inputs.dtype if inputs.dtype.is_floating else _dt.float32
                if not self.built:
                    self.build(inputs.shape)
                    self.built = True
                return self.call(inputs, *args, **kwargs)

    def apply(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        return self(inputs, *args, **kwargs)

    def __repr__(self) -> str:
        return f"<hb.layers.{type(self).__name__} {self._name!r}>"


def _activity(layer: Layer, regularizer: Callable | None, outputs: Tensor) -> None:
    if regularizer is not None:
        with get_default_graph().name_scope("ActivityRegularizer"):
            loss = regularizer(outputs)
        if loss is not None:
            layer._losses.append(loss)
            get_default_graph().add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)


def _bias_add(x: Tensor, b: Any) -> Tensor:
    from .ops import nn

    fn = getattr(nn, "bias_add", None)
    return fn(x, b) if fn is not None else _math.add(x, b, name="BiasAdd")


# ---- Dense -----------------------------------------------------------------------------


class Dense(Layer):
    """``activation(inputs @ kernel + bias)``; inputs of rank > 2 apply to the last axis."""

    def __init__(
        self,
        units: int,
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
        self.units = int(units)
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

    def build(self, input_shape: TensorShape) -> None:
        if input_shape.ndims is None or input_shape.ndims < 2 or input_shape[-1] is None:
            raise ValueError(
                f"the last dimension of the inputs to Dense should be defined, got {input_shape}"
            )
        self.kernel = self.add_weight(
            "kernel",
            [input_shape[-1], self.units],
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )
        if self.use_bias:
            self.bias = self.add_weight(
                "bias",
                [self.units],
                initializer=self.bias_initializer,
                regularizer=self.bias_regularizer,
                constraint=self.bias_constraint,
            )

    def call(self, inputs: Tensor) -> Tensor:
        dims = inputs.shape.dims
        x = inputs
        if len(dims) > 2:  # type: ignore[arg-type]
            x = _array.reshape(inputs, [-1, dims[-1]])  # type: ignore[index]
        out = _math.matmul(x, self.kernel)
        if self.use_bias:
            out = _bias_add(out, self.bias)
        if len(dims) > 2:  # type: ignore[arg-type]
            if any(d is None for d in dims[1:-1]):  # type: ignore[index]
                # inner dims known only at run time (an RNN's time steps): the input's shape then
                from .ops.manip import concat

                lead = _array.shape(inputs)[:-1]
                out = _array.reshape(out, concat([lead, [self.units]], 0))
                out.set_shape(TensorShape([*dims[:-1], self.units]))  # type: ignore[index]
            else:
                out = _array.reshape(out, [-1, *dims[1:-1], self.units])  # type: ignore[index]
        if self.activation is not None:
            out = self.activation(out)
        _activity(self, self.activity_regularizer, out)
        return out


def dense(
    inputs: Any,
    units: int,
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
    """A densely connected layer (variables ``<name>/kernel`` and ``<name>/bias``)."""
    layer = Dense(
        units,
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


class Flatten(Layer):
    """Reshape ``[batch, d1, d2, ...]`` to ``[batch, d1 * d2 * ...]`` (inner dims must be known)."""

    def __init__(self, data_format: str = "channels_last", name: str | None = None, **kw: Any):
        super().__init__(name=name, **kw)
        _check_channels_last(data_format, "Flatten")

    def call(self, inputs: Tensor) -> Tensor:
        dims = inputs.shape.dims
        if dims is None or any(d is None for d in dims[1:]):
            raise ValueError(f"Flatten needs known non-batch dimensions, got {inputs.shape}")
        n = 1
        for d in dims[1:]:
            n *= d  # type: ignore[operator]
        if len(dims) == 1:
            return _array.reshape(inputs, [-1, 1])
        return _array.reshape(inputs, [-1, n])


def flatten(inputs: Any, name: str | None = None, data_format: str = "channels_last") -> Tensor:
    return Flatten(data_format=data_format, name=name)(inputs)


# ---- Dropout -----------------------------------------------------------------------------


def _is_python_bool(x: Any) -> bool:
    return isinstance(x, (bool, int)) and not isinstance(x, Tensor)


class Dropout(Layer):
    """In training, zero each element with probability ``rate`` and scale the rest by 1/(1-rate).

    ``training`` is a Python bool or a scalar bool tensor (then both paths are built and the
    value chosen when the graph runs).
    """

    def __init__(
        self,
        rate: float = 0.5,
        noise_shape: Any = None,
        seed: int | None = None,
        name: str | None = None,
        **kw: Any,
    ):
        super().__init__(name=name, **kw)
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"dropout rate must be in [0, 1), got {rate}")
        self.rate = float(rate)
        self.noise_shape = noise_shape
        self.seed = seed

    def call(self, inputs: Tensor, training: Any = False) -> Tensor:
        from .ops import nn

        if _is_python_bool(training) and not training:
            return _array.identity(inputs)
        if self.rate == 0.0:
            return _array.identity(inputs)
        dropped = nn.dropout(inputs, rate=self.rate, noise_shape=self.noise_shape, seed=self.seed)
        if _is_python_bool(training):
            return dropped
        return _math.where(convert_to_tensor(training), dropped, inputs)


def dropout(
    inputs: Any,
    rate: float = 0.5,
    noise_shape: Any = None,
    seed: int | None = None,
    training: Any = False,
    name: str | None = None,
) -> Tensor:
    """Dropout applied only when ``training`` (note: TF1's default is training=False)."""
    return Dropout(rate, noise_shape, seed, name=name)(inputs, training=training)


# ---- BatchNormalization ---------------------------------------------------------------------


class BatchNormalization(Layer):
    """Normalize over every axis but ``axis`` (batch statistics when training, moving ones else).

    In training the moving mean and variance are updated by ops put in GraphKeys.UPDATE_OPS
    (run them with the train op, as in TF1): ``moving -= (moving - batch) * (1 - momentum)``.
    As in TF1, 4-D inputs normalized over channels (the fused case) update the moving variance
    with the unbiased batch variance (Bessel's correction); other inputs with the biased one.
    """

    def __init__(
        self,
        axis: int = -1,
        momentum: float = 0.99,
        epsilon: float = 1e-3,
        center: bool = True,
        scale: bool = True,
        beta_initializer: Any = None,
        gamma_initializer: Any = None,
        moving_mean_initializer: Any = None,
        moving_variance_initializer: Any = None,
        beta_regularizer: Callable | None = None,
        gamma_regularizer: Callable | None = None,
        beta_constraint: Callable | None = None,
        gamma_constraint: Callable | None = None,
        fused: bool | None = None,
        trainable: bool = True,
        name: str | None = None,
        **kwargs: Any,
    ):
        for unsupported in ("renorm", "virtual_batch_size", "adjustment"):
            if kwargs.pop(unsupported, None):
                raise NotImplementedError(f"batch_normalization: {unsupported} is not supported")
        super().__init__(trainable=trainable, name=name, **kwargs)
        if isinstance(axis, (list, tuple)):
            if len(axis) != 1:
                raise NotImplementedError(f"batch_normalization over several axes: {axis}")
            axis = axis[0]
        self.axis = int(axis)
        self.momentum = float(momentum)
        self.epsilon = float(epsilon)
        self.center, self.scale = center, scale
        self.beta_initializer = beta_initializer or _init.Zeros()
        self.gamma_initializer = gamma_initializer or _init.Ones()
        self.moving_mean_initializer = moving_mean_initializer or _init.Zeros()
        self.moving_variance_initializer = moving_variance_initializer or _init.Ones()
        self.beta_regularizer, self.gamma_regularizer = beta_regularizer, gamma_regularizer
        self.beta_constraint, self.gamma_constraint = beta_constraint, gamma_constraint
        self.fused = fused
        self.gamma: Variable | None = None
        self.beta: Variable | None = None

    def build(self, input_shape: TensorShape) -> None:
        ndims = input_shape.ndims
        if ndims is None:
            raise ValueError("batch_normalization needs inputs of known rank")
        axis = self.axis + ndims if self.axis < 0 else self.axis
        if not 0 <= axis < ndims:
            raise ValueError(
                f"batch_normalization: axis {self.axis} is out of range for {input_shape}"
            )
        self._axis = axis
        c = input_shape[axis]
        if c is None:
            raise ValueError(f"batch_normalization: axis {self.axis} of {input_shape} is unknown")
        self._bessel = self.fused is not False and ndims == 4 and axis in (1, 3)
        if self.scale:
            self.gamma = self.add_weight(
                "gamma",
                [c],
                initializer=self.gamma_initializer,
                regularizer=self.gamma_regularizer,
                constraint=self.gamma_constraint,
            )
        if self.center:
            self.beta = self.add_weight(
                "beta",
                [c],
                initializer=self.beta_initializer,
                regularizer=self.beta_regularizer,
                constraint=self.beta_constraint,
            )
        self.moving_mean = self.add_weight(
            "moving_mean", [c], initializer=self.moving_mean_initializer, trainable=False
        )
        self.moving_variance = self.add_weight(
            "moving_variance", [c], initializer=self.moving_variance_initializer, trainable=False
        )

    def _broadcast(self, v: Any, ndims: int) -> Tensor:
        """A ``[C]`` vector shaped to broadcast against the inputs."""
        if self._axis == ndims - 1:
            return v if isinstance(v, Tensor) else convert_to_tensor(v)
        shape = [1] * ndims
        shape[self._axis] = -1
        return _array.reshape(v, shape)

    def call(self, inputs: Tensor, training: Any = False) -> Tensor:
        ndims = inputs.shape.ndims
        assert ndims is not None
        if self._bessel and self._axis == ndims - 1:
            return self._fused_call(inputs, training)
        axes = [i for i in range(ndims) if i != self._axis]
        x = inputs
        if _is_python_bool(training) and not training:
            mean, var = self.moving_mean.value(), self.moving_variance.value()
        else:
            bmean = _math.reduce_mean(x, axis=axes, name="mean")
            centered_sq = _math.squared_difference(
                x, _array.stop_gradient(self._broadcast(bmean, ndims))
            )
            bvar = _math.reduce_mean(centered_sq, axis=axes, name="variance")
            if _is_python_bool(training):
                mean, var = bmean, bvar
                decay: Any = 1.0 - self.momentum
            else:
                t = convert_to_tensor(training)
                mean = _math.where(t, bmean, self.moving_mean.value())
                var = _math.where(t, bvar, self.moving_variance.value())
                decay = self._decay(t, self.moving_mean.dtype)
            self._add_moving_updates(x, bmean, bvar, decay)
        inv = _math.rsqrt(_math.add(var, self.epsilon))
        if self.scale:
            inv = _math.multiply(inv, self.gamma)
        shift = _math.negative(_math.multiply(mean, inv))
        if self.center:
            shift = _math.add(shift, self.beta)
        out = _math.add(
            _math.multiply(x, self._broadcast(inv, ndims)), self._broadcast(shift, ndims)
        )
        return out

    def _decay(self, training: Tensor, dtype: _dt.DType) -> Tensor:
        """1 - momentum when ``training`` is true at run time, else 0 (no update)."""
        on = _array.constant(1.0 - self.momentum, dtype=dtype)
        return _math.where(training, on, _array.constant(0.0, dtype=dtype))

    def _fused_call(self, x: Tensor, training: Any) -> Tensor:
        """NHWC inputs: the FusedBatchNorm op (its batch variance is already unbiased)."""
        from .ops import nn

        c = x.shape[-1]
        gamma = self.gamma if self.scale else _array.constant(1.0, dtype=x.dtype, shape=[c])
        beta = self.beta if self.center else None

        def infer() -> Tensor:
            y, _, _ = nn.fused_batch_norm(
                x,
                gamma,
                beta,
                mean=self.moving_mean.value(),
                variance=self.moving_variance.value(),
                epsilon=self.epsilon,
                is_training=False,
            )
            return y

        if _is_python_bool(training) and not training:
            return infer()
        y, bmean, bvar = nn.fused_batch_norm(x, gamma, beta, epsilon=self.epsilon)
        if _is_python_bool(training):
            self._add_moving_updates(x, bmean, bvar, 1.0 - self.momentum, unbiased=True)
            return y
        t = convert_to_tensor(training)
        decay = self._decay(t, self.moving_mean.dtype)
        self._add_moving_updates(x, bmean, bvar, decay, unbiased=True)
        return _math.where(t, y, infer())

    def _add_moving_updates(
        self, x: Tensor, bmean: Tensor, bvar: Tensor, decay: Any, unbiased: bool = False
    ) -> None:
        from .ops import state

        if self._bessel and not unbiased:  # what TF1's fused kernel reports as the batch variance
            per_channel = x.shape.num_elements()
            c = x.shape[self._axis]
            if per_channel is not None:
                n = per_channel // c
                bvar = _math.multiply(bvar, n / max(n - 1, 1))
            else:
                n_t = _math.divide(_array.cast(_array.size(x), bvar.dtype), float(c))
                bvar = _math.multiply(bvar, _math.divide(n_t, _math.maximum(n_t - 1.0, 1.0)))
        for var, batch, nm in (
            (self.moving_mean, bmean, "AssignMovingAvg"),
            (self.moving_variance, bvar, "AssignMovingAvg_1"),
        ):
            with get_default_graph().name_scope(nm):
                delta = _math.multiply(_math.subtract(var.value(), batch), decay)
                self.add_update(state.assign_sub(var, delta))


def batch_normalization(
    inputs: Any,
    axis: int = -1,
    momentum: float = 0.99,
    epsilon: float = 1e-3,
    center: bool = True,
    scale: bool = True,
    beta_initializer: Any = None,
    gamma_initializer: Any = None,
    moving_mean_initializer: Any = None,
    moving_variance_initializer: Any = None,
    beta_regularizer: Callable | None = None,
    gamma_regularizer: Callable | None = None,
    beta_constraint: Callable | None = None,
    gamma_constraint: Callable | None = None,
    training: Any = False,
    trainable: bool = True,
    name: str | None = None,
    reuse: Any = None,
    renorm: bool = False,
    renorm_clipping: Any = None,
    renorm_momentum: float = 0.99,
    fused: bool | None = None,
    virtual_batch_size: int | None = None,
    adjustment: Any = None,
) -> Tensor:
    """Batch normalization (variables gamma, beta, moving_mean, moving_variance).

    Remember TF1's rule: run the ops in ``hb.get_collection(hb.GraphKeys.UPDATE_OPS)`` with the
    train op (e.g. ``with hb.control_dependencies(update_ops): train = opt.minimize(loss)``).
    """
    layer = BatchNormalization(
        axis=axis,
        momentum=momentum,
        epsilon=epsilon,
        center=center,
        scale=scale,
        beta_initializer=beta_initializer,
        gamma_initializer=gamma_initializer,
        moving_mean_initializer=moving_mean_initializer,
        moving_variance_initializer=moving_variance_initializer,
        beta_regularizer=beta_regularizer,
        gamma_regularizer=gamma_regularizer,
        beta_constraint=beta_constraint,
        gamma_constraint=gamma_constraint,
        fused=fused,
        trainable=trainable,
        name=name,
        _reuse=reuse,
        renorm=renorm,
        virtual_batch_size=virtual_batch_size,
        adjustment=adjustment,
    )
    return layer(inputs, training=training)


# The convolution and pooling layers live in conv_layers (imported last: they build on Layer).
from .conv_layers import (  # noqa: E402
    AveragePooling2D,
    Conv2D,
    Conv2DTranspose,
    MaxPooling2D,
    average_pooling2d,
    conv2d,
    conv2d_transpose,
    max_pooling2d,
)

__all__ = [
    "AveragePooling2D",
    "BatchNormalization",
    "Conv2D",
    "Conv2DTranspose",
    "Dense",
    "Dropout",
    "Flatten",
    "Layer",
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
