"""More of TF1's ``tf.contrib.layers`` (also slim's): ``instance_norm`` and ``group_norm`` (as
TF1's normalization.py: the same scopes, variables and epsilon), ``maxout`` and ``bias_add``.

* ``instance_norm``: each example's each channel normalized over its spatial axes (moments over
  axes 1..rank-2 for NHWC, 2.. for NCHW), ``* gamma + beta`` per channel; variables
  ``InstanceNorm/beta`` and ``InstanceNorm/gamma``; epsilon 1e-6.
* ``group_norm``: the channels (``channels_axis``) cut into ``groups`` groups (at most as many
  as there are channels), each example's each group normalized over ``reduction_axes`` and the
  group's channels, ``* gamma + beta`` per channel; variables ``GroupNorm/beta`` and
  ``GroupNorm/gamma``; epsilon 1e-6.
* ``maxout``: the maximum over ``num_units`` groups of the channels along ``axis``.
* ``bias_add``: a learned bias (``BiasAdd/biases``) added along the channels.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hetbed as _hb

from .contrib_layers import _collect, _var_collections, _variable, add_arg_scope

__all__ = [
    "bias_add",
    "group_norm",
    "instance_norm",
    "maxout",
]


def _tensor(x: Any) -> Any:
    return x if isinstance(x, _hb.Tensor) else _hb.convert_to_tensor(x)


def _params(
    shape: list, dtype: Any, center: bool, scale: bool, param_initializers: Any,
    variables_collections: Any, trainable: bool,
) -> tuple:  # fmt: skip
    """beta and gamma (made in TF's order), each None when not asked for."""
    inits = dict(param_initializers or {})
    unknown = set(inits) - {"beta", "gamma"}
    if unknown:
        raise ValueError(f"param_initializers has unknown keys {sorted(unknown)} (beta, gamma)")
    beta = gamma = None
    if center:
        beta = _variable(
            "beta", shape, dtype, inits.get("beta", _hb.zeros_initializer()), None, trainable,
            _var_collections(variables_collections, "beta"),
        )  # fmt: skip
    if scale:
        gamma = _variable(
            "gamma", shape, dtype, inits.get("gamma", _hb.ones_initializer()), None, trainable,
            _var_collections(variables_collections, "gamma"),
        )  # fmt: skip
    return beta, gamma


def _normalize(x: Any, mean: Any, var: Any, beta: Any, gamma: Any, epsilon: float) -> Any:
    inv = _hb.rsqrt(var + epsilon)
    if gamma is not None:
        inv = inv * gamma
    shift = -mean * inv if beta is None else beta - mean * inv
    return x * inv + shift


@add_arg_scope
def instance_norm(
    inputs: Any,
    center: bool = True,
    scale: bool = True,
    epsilon: float = 1e-6,
    activation_fn: Callable | None = None,
    param_initializers: Any = None,
    reuse: Any = None,
    variables_collections: Any = None,
    outputs_collections: Any = None,
    trainable: bool = True,
    data_format: str = "NHWC",
    scope: Any = None,
) -> Any:
    """TF1's ``contrib.layers.instance_norm`` (see the module)."""
    x = _tensor(inputs)
    rank = x.shape.ndims
    if rank is None or rank < 3:
        raise ValueError(f"instance_norm: inputs {x.name} must have rank >= 3, got {x.shape}")
    if data_format not in ("NHWC", "NCHW"):
        raise ValueError(f"instance_norm: data_format must be NHWC or NCHW, got {data_format!r}")
    axis = 1 if data_format == "NCHW" else rank - 1
    channels = x.shape.as_list()[axis]
    if channels is None:
        raise ValueError(f"instance_norm: the channels of {x.name} ({x.shape}) must be known")
    moments_axes = list(range(2, rank)) if data_format == "NCHW" else list(range(1, rank - 1))
    with _hb.variable_scope(scope, default_name="InstanceNorm", reuse=reuse):
        beta, gamma = _params(
            [channels], x.dtype, center, scale, param_initializers, variables_collections,
            trainable,
        )  # fmt: skip
        if data_format == "NCHW":
            shape = [1, channels] + [1] * (rank - 2)
            beta = None if beta is None else _hb.reshape(beta, shape)
            gamma = None if gamma is None else _hb.reshape(gamma, shape)
        mean, var = _hb.nn.moments(x, moments_axes, keep_dims=True)
        out = _normalize(x, mean, var, beta, gamma, epsilon)
        if activation_fn is not None:
            out = activation_fn(out)
        return _collect(outputs_collections, out, _hb.get_variable_scope().name)


@add_arg_scope
def group_norm(
    inputs: Any,
    groups: int = 32,
    channels_axis: int = -1,
    reduction_axes: Any = (-3, -2),
    center: bool = True,
    scale: bool = True,
    epsilon: float = 1e-6,
    activation_fn: Callable | None = None,
    param_initializers: Any = None,
    reuse: Any = None,
    variables_collections: Any = None,
    outputs_collections: Any = None,
    trainable: bool = True,
    scope: Any = None,
    mean_close_to_zero: bool = False,
) -> Any:
    """TF1's ``contrib.layers.group_norm`` (see the module)."""
    x = _tensor(inputs)
    rank = x.shape.ndims
    if rank is None:
        raise ValueError(f"group_norm: the rank of {x.name} must be known")
    ch = channels_axis % rank
    red = sorted(a % rank for a in reduction_axes)
    if ch in red:
        raise ValueError(
            f"group_norm: channels_axis {channels_axis} is one of reduction_axes {reduction_axes}"
        )
    if 0 in red or ch == 0:
        raise ValueError("group_norm: the batch axis (0) can be neither the channels nor reduced")
    dims = x.shape.as_list()
    channels = dims[ch]
    if channels is None:
        raise ValueError(f"group_norm: the channels of {x.name} ({x.shape}) must be known")
    groups = int(groups)
    if not 0 < groups <= channels:
        raise ValueError(f"group_norm: invalid groups {groups} for {channels} channels")
    if channels % groups:
        raise ValueError(
            f"group_norm: {channels} channels do not split into {groups} groups evenly"
        )
    per = channels // groups
    # the channels axis split in two: [.., groups, per, ..]; the reduced axes shift past it
    split = [-1 if d is None else d for d in dims[:ch]] + [groups, per]
    split += [-1 if d is None else d for d in dims[ch + 1 :]]
    if split.count(-1) > 1:
        dynamic = _hb.shape(x)
        split = [dynamic[i] if s is None else s for i, s in enumerate(dims[:ch])] + [groups, per]
        split += [dynamic[ch + 1 + i] if s is None else s for i, s in enumerate(dims[ch + 1 :])]
        split = _hb.stack(split)
    moments_axes = [a if a < ch else a + 1 for a in red] + [ch + 1]
    with _hb.variable_scope(scope, default_name="GroupNorm", reuse=reuse):
        beta, gamma = _params(
            [channels], x.dtype, center, scale, param_initializers, variables_collections,
            trainable,
        )  # fmt: skip
        grouped = _hb.reshape(x, split)
        mean, var = _hb.nn.moments(grouped, moments_axes, keep_dims=True)
        pshape = [1] * (rank + 1)
        pshape[ch], pshape[ch + 1] = groups, per
        beta = None if beta is None else _hb.reshape(beta, pshape)
        gamma = None if gamma is None else _hb.reshape(gamma, pshape)
        out = _normalize(grouped, mean, var, beta, gamma, epsilon)
        out = _hb.reshape(out, _hb.shape(x))
        out.set_shape(x.shape)
        if activation_fn is not None:
            out = activation_fn(out)
        return _collect(outputs_collections, out, _hb.get_variable_scope().name)


def maxout(inputs: Any, num_units: int, axis: int = -1, outputs_collections: Any = None,
           scope: Any = None) -> Any:  # fmt: skip
    """TF1's ``contrib.layers.maxout``: the maximum over ``num_units`` groups of consecutive
    channels along ``axis``."""
    x = _tensor(inputs)
    dims = x.shape.as_list()
    a = axis % len(dims)
    channels = dims[a]
    if channels is None or channels % int(num_units):
        raise ValueError(
            f"maxout: the number of features ({channels}) is not a multiple of num_units "
            f"({num_units})"
        )
    with _hb.name_scope(scope or "MaxOut"):
        shape = [-1 if d is None else d for d in dims]
        if shape.count(-1) > 1:
            dynamic = _hb.shape(x)
            shape = [dynamic[i] if d is None else d for i, d in enumerate(dims)]
        shape[a] = int(num_units)
        shape.insert(a + 1, channels // int(num_units))
        if any(isinstance(s, _hb.Tensor) for s in shape):
            shape = _hb.stack(shape)
        out = _hb.reduce_max(_hb.reshape(x, shape), a + 1)
        return _collect(outputs_collections, out)


@add_arg_scope
def bias_add(
    inputs: Any,
    activation_fn: Callable | None = None,
    initializer: Any = None,
    regularizer: Any = None,
    reuse: Any = None,
    variables_collections: Any = None,
    outputs_collections: Any = None,
    trainable: bool = True,
    data_format: str = "NHWC",
    scope: Any = None,
) -> Any:
    """TF1's ``contrib.layers.bias_add``: a learned bias along the channels (the last axis,
    or axis 1 for NCHW)."""
    x = _tensor(inputs)
    if x.shape.ndims is None or x.shape.ndims < 2:
        raise ValueError(f"bias_add: inputs {x.name} must have rank >= 2, got {x.shape}")
    axis = 1 if data_format == "NCHW" else -1
    channels = x.shape.as_list()[axis]
    if channels is None:
        raise ValueError(f"bias_add: the channels of {x.name} ({x.shape}) must be known")
    with _hb.variable_scope(scope, default_name="BiasAdd", reuse=reuse):
        b = _variable(
            "biases", [channels], x.dtype, initializer or _hb.zeros_initializer(), regularizer,
            trainable, _var_collections(variables_collections, "biases"),
        )  # fmt: skip
        out = _hb.nn.bias_add(x, b, data_format="NCHW" if data_format == "NCHW" else None)
        if activation_fn is not None:
            out = activation_fn(out)
        return _collect(outputs_collections, out, _hb.get_variable_scope().name)
