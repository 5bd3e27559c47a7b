"""``keras.activations``: the activations by name (``Dense(..., activation="relu")``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hetbed as hb

from . import backend as K


def linear(x: Any) -> Any:
    return x


def relu(x: Any, alpha: float = 0.0, max_value: Any = None, threshold: float = 0.0) -> Any:
    return K.relu(x, alpha, max_value, threshold)


def softmax(x: Any, axis: int = -1) -> Any:
    return hb.nn.softmax(x, axis=axis)


def elu(x: Any, alpha: float = 1.0) -> Any:
    y = hb.nn.elu(x)
    return y if alpha == 1.0 else hb.where(x > 0, y, alpha * y)


def selu(x: Any) -> Any:
    return hb.nn.selu(x)


def softplus(x: Any) -> Any:
    return hb.nn.softplus(x)


def softsign(x: Any) -> Any:
    return hb.nn.softsign(x)


def swish(x: Any) -> Any:
    return x * hb.sigmoid(x)


sigmoid, tanh, hard_sigmoid, exponential = hb.sigmoid, hb.tanh, K.hard_sigmoid, hb.exp

_BY_NAME: dict[str, Callable] = {
    f.__name__: f for f in (linear, relu, softmax, elu, selu, softplus, softsign, swish)
} | {"sigmoid": sigmoid, "tanh": tanh, "hard_sigmoid": hard_sigmoid, "exponential": exponential}


def get(identifier: Any) -> Callable | None:
    """An activation from a name, a callable or None (None stays None: no activation)."""
    if identifier is None or callable(identifier):
        return identifier
    if isinstance(identifier, str) and identifier in _BY_NAME:
        return _BY_NAME[identifier]
    raise ValueError(f"unknown activation {identifier!r}; known: {', '.join(sorted(_BY_NAME))}")


def serialize(activation: Callable) -> str:
    return getattr(activation, "__name__", str(activation))


deserialize = get
