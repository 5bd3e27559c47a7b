"""What the nets share: the layer functions they are built from (the ones ``arg_scope`` knows),
TF's initializers under short names, an Inception-style module built from a table of branches,
and the kernel shrinking of the Inception heads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hetbed as _hb

from .. import contrib_layers as _cl
from .. import contrib_slim as _cs
from .. import contrib_utils as _cu

conv2d = _cl.conv2d
fully_connected = _cl.fully_connected
max_pool2d = _cl.max_pool2d
avg_pool2d = _cl.avg_pool2d
dropout = _cl.dropout
batch_norm = _cl.batch_norm
arg_scope = _cl.arg_scope
add_arg_scope = _cl.add_arg_scope
l2_regularizer = _cl.l2_regularizer
variance_scaling_initializer = _cl.variance_scaling_initializer
repeat = _cl.repeat
separable_conv2d = _cs.separable_conv2d
softmax = _cs.softmax
collect_named_outputs = _cu.collect_named_outputs
convert_collection_to_dict = _cu.convert_collection_to_dict
last_dimension = _cu.last_dimension


def trunc_normal(stddev: float) -> Any:
    """TF's ``truncated_normal_initializer(0.0, stddev)``."""
    return _hb.truncated_normal_initializer(0.0, stddev)


def constant(value: float) -> Any:
    return _hb.constant_initializer(value)


def zeros() -> Any:
    return _hb.zeros_initializer()


# ---- Inception modules as tables ------------------------------------------------------------

Layer = Callable[[Any], Any]


def conv(depth: int, kernel: Any, name: str, **kw: Any) -> Layer:
    """A conv2d step of a branch: ``depth`` outputs, ``kernel``, variables under ``name``."""
    return lambda x: conv2d(x, depth, kernel, scope=name, **kw)


def max_pool(kernel: Any, name: str, **kw: Any) -> Layer:
    return lambda x: max_pool2d(x, kernel, scope=name, **kw)


def avg_pool(kernel: Any, name: str, **kw: Any) -> Layer:
    return lambda x: avg_pool2d(x, kernel, scope=name, **kw)


def fork(*steps: Layer) -> Layer:
    """Every step applied to the same input, the outputs concatenated along the channels
    (Inception v3's parallel 1x3 and 3x1 convolutions)."""
    return lambda x: _hb.concat([s(x) for s in steps], 3)


def mixed(net: Any, name: str, branches: list[list[Layer]]) -> Any:
    """An Inception module: scope ``name``, one scope ``Branch_<i>`` per list of steps, their
    outputs concatenated along the channels in branch order."""
    with _hb.variable_scope(name):
        outputs = []
        for i, steps in enumerate(branches):
            with _hb.variable_scope(f"Branch_{i}"):
                x = net
                for step in steps:
                    x = step(x)
                outputs.append(x)
        return _hb.concat(outputs, 3)


def reduced_kernel(net: Any, kernel: list[int]) -> list[int]:
    """``kernel`` shrunk to the spatial size of ``net`` where that is known and smaller."""
    dims = net.shape.as_list()
    if dims[1] is None or dims[2] is None:
        return list(kernel)
    return [min(dims[1], kernel[0]), min(dims[2], kernel[1])]


def batch_norm_params(
    decay: float, epsilon: float, updates_collections: Any, moving_collection: str, **extra: Any
) -> dict:
    """The batch-norm arguments of the Inception arg scopes: the moving statistics also in
    ``moving_collection``."""
    return {
        "decay": decay,
        "epsilon": epsilon,
        "updates_collections": updates_collections,
        "variables_collections": {
            "beta": None,
            "gamma": None,
            "moving_mean": [moving_collection],
            "moving_variance": [moving_collection],
        },
        **extra,
    }


def end_points_name(scope: Any, original: bool = True) -> str:
    """The collection a net gathers its end points in: its scope's name (the original name
    scope for most nets, as TF's) with ``_end_points``."""
    return (scope.original_name_scope if original else scope.name) + "_end_points"
