"""``tensorflow.python.framework.tensor_shape``: ``TensorShape``, ``Dimension`` and TF1's
helpers that make shapes."""

from __future__ import annotations

from typing import Any

from hetbed.runtime.graph import Dimension, TensorShape, as_shape, dimension_value

from .._forward import forward


def unknown_shape(rank: int | None = None, **_: Any) -> TensorShape:
    """A shape of unknown rank, or of ``rank`` unknown dimensions."""
    return TensorShape(None if rank is None else [None] * rank)


def scalar() -> TensorShape:
    return TensorShape([])


def vector(length: int | None) -> TensorShape:
    return TensorShape([length])


def matrix(rows: int | None, cols: int | None) -> TensorShape:
    return TensorShape([rows, cols])


__getattr__ = forward(
    __name__,
    {
        "TensorShape": TensorShape,
        "Dimension": Dimension,
        "as_shape": as_shape,
        "dimension_value": dimension_value,
    },
)
