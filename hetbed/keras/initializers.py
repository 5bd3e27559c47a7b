"""``keras.initializers``: hetbed's initializers under Keras's names (``glorot_uniform``,
``he_normal``, ``orthogonal``, ...); ``get`` resolves a name, a config dict or a callable."""

from __future__ import annotations

from typing import Any

from hetbed.runtime import initializers as _i
from hetbed.runtime.initializers import (  # noqa: F401 - Keras's class names
    Constant,
    GlorotNormal,
    GlorotUniform,
    Identity,
    Initializer,
    Ones,
    Orthogonal,
    VarianceScaling,
    Zeros,
    he_normal,
    he_uniform,
    lecun_normal,
    lecun_uniform,
)


class RandomNormal(_i.RandomNormal):
    """Keras's: mean 0, stddev 0.05."""

    def __init__(self, mean: float = 0.0, stddev: float = 0.05, seed: int | None = None, **kw):
        super().__init__(mean, stddev, seed, **kw)


class TruncatedNormal(_i.TruncatedNormal):
    """Keras's: mean 0, stddev 0.05, redrawn beyond two standard deviations."""

    def __init__(self, mean: float = 0.0, stddev: float = 0.05, seed: int | None = None, **kw):
        super().__init__(mean, stddev, seed, **kw)


class RandomUniform(_i.RandomUniform):
    """Keras's: uniform on [-0.05, 0.05)."""

    def __init__(self, minval: float = -0.05, maxval: float = 0.05, seed: int | None = None, **kw):
        super().__init__(minval, maxval, seed, **kw)


zeros, ones, constant, identity, orthogonal = Zeros, Ones, Constant, Identity, Orthogonal
glorot_uniform, glorot_normal = GlorotUniform, GlorotNormal
random_normal, random_uniform, truncated_normal = RandomNormal, RandomUniform, TruncatedNormal
normal, uniform = RandomNormal, RandomUniform
_KERAS = {"random_normal": RandomNormal, "normal": RandomNormal, "uniform": RandomUniform}
_KERAS |= {"random_uniform": RandomUniform, "truncated_normal": TruncatedNormal}


def get(identifier: Any) -> Any:
    """An initializer from a name ("glorot_uniform"), ``{"class_name", "config"}``, an
    initializer or None."""
    if isinstance(identifier, dict):
        cls = globals().get(identifier.get("class_name", ""))
        if cls is None:
            raise ValueError(f"unknown initializer config {identifier!r}")
        return cls(**identifier.get("config", {}))
    if isinstance(identifier, str) and identifier.lower() in _KERAS:
        return _KERAS[identifier.lower()]()
    return _i.get(identifier)


def serialize(initializer: Any) -> dict:
    return {"class_name": type(initializer).__name__, "config": initializer.get_config()}


deserialize = get
