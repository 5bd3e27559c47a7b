"""``tensorflow.python.framework.tensor_util``: ``constant_value`` (a tensor's value when it is
known without running the graph)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._forward import forward


def constant_value(tensor: Any, partial: bool = False) -> np.ndarray | None:
    """The value of ``tensor`` when it is a constant (or a variable-free chain hetbed folds
    when building: a Const), else None; numpy values pass through, as TF1's."""
    from hetbed.runtime.graph import Tensor
    from hetbed.runtime.ops.scatter import const_value

    if isinstance(tensor, np.ndarray) or np.isscalar(tensor):
        return np.asarray(tensor)
    if not isinstance(tensor, Tensor):
        raise TypeError(f"constant_value: expected a Tensor, got {type(tensor).__name__}")
    if tensor.op.type == "Shape" and tensor.op.inputs[0].shape.is_fully_defined():
        return np.asarray(tensor.op.inputs[0].shape.as_list(), tensor.dtype.np)
    return const_value(tensor)


__getattr__ = forward(__name__, {"constant_value": constant_value})
