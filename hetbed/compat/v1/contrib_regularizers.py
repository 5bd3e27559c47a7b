"""TF1's ``tf.contrib.layers`` initializers (``xavier_initializer``,
``variance_scaling_initializer``) and regularizers (``l1_regularizer``, ``l2_regularizer``, their
sums, ``apply_regularization``); contrib_layers.py, whose layers use them, exports them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import hetbed as _hb
from hetbed.runtime import initializers as _init


def xavier_initializer(uniform: bool = True, seed: int | None = None, dtype: Any = _hb.float32):
    """Glorot: variance 2 / (fan_in + fan_out), uniform or truncated normal."""
    return _init.VarianceScaling(
        1.0, "fan_avg", "uniform" if uniform else "truncated_normal", seed=seed, dtype=dtype
    )


xavier_initializer_conv2d = xavier_initializer


def variance_scaling_initializer(
    factor: float = 2.0,
    mode: str = "FAN_IN",
    uniform: bool = False,
    seed: int | None = None,
    dtype: Any = _hb.float32,
):
    """Variance ``factor / n`` (n: fan in, fan out or their mean by ``mode``), uniform or
    truncated normal (the default, He et al.'s initializer for ReLU layers)."""
    modes = {"FAN_IN": "fan_in", "FAN_OUT": "fan_out", "FAN_AVG": "fan_avg"}
    if mode not in modes:
        raise TypeError(
            f"variance_scaling_initializer: unknown mode {mode!r} (FAN_IN, FAN_OUT, FAN_AVG)"
        )
    dist = "uniform" if uniform else "truncated_normal"
    return _init.VarianceScaling(factor, modes[mode], dist, seed=seed, dtype=dtype)


def _check_scale(what: str, scale: float) -> bool:
    """False for a zero scale (no regularizer), True for a positive one."""
    if isinstance(scale, (int, float)) and not isinstance(scale, bool):
        if scale < 0.0:
            raise ValueError(f"{what}: the scale must be >= 0, got {scale}")
        return scale > 0.0
    raise ValueError(f"{what}: the scale must be a number, got {scale!r}")


def l1_regularizer(scale: float, scope: str | None = None) -> Callable | None:
    """``weights -> scale * sum(|weights|)`` (None for a zero scale)."""
    if not _check_scale("l1_regularizer", scale):
        return lambda _w: None

    def l1(weights: Any) -> Any:
        with _hb.name_scope(scope or "l1_regularizer"):
            return _hb.multiply(_hb.reduce_sum(_hb.abs(weights)), _cast(scale, weights))

    return l1


def l2_regularizer(scale: float, scope: str | None = None) -> Callable | None:
    """``weights -> scale * sum(weights ** 2) / 2`` (``nn.l2_loss``; None for a zero scale)."""
    if not _check_scale("l2_regularizer", scale):
        return lambda _w: None

    def l2(weights: Any) -> Any:
        with _hb.name_scope(scope or "l2_regularizer"):
            return _hb.multiply(_hb.nn.l2_loss(weights), _cast(scale, weights))

    return l2


def l1_l2_regularizer(scale_l1: float = 1.0, scale_l2: float = 1.0, scope: str | None = None):
    """The sum of ``l1_regularizer(scale_l1)`` and ``l2_regularizer(scale_l2)``."""
    return sum_regularizer([l1_regularizer(scale_l1), l2_regularizer(scale_l2)], scope)


def sum_regularizer(regularizer_list: Sequence[Callable], scope: str | None = None) -> Callable:
    """The sum of the regularizers' penalties (those returning None are left out)."""
    regs = [r for r in regularizer_list if r is not None]

    def total(weights: Any) -> Any:
        parts = [p for p in (r(weights) for r in regs) if p is not None]
        if not parts:
            return None
        with _hb.name_scope(scope or "sum_regularizer"):
            return parts[0] if len(parts) == 1 else _hb.add_n(parts)

    return total


def apply_regularization(regularizer: Callable, weights_list: Sequence | None = None) -> Any:
    """The sum of ``regularizer(w)`` over ``weights_list`` (default: the WEIGHTS collection,
    which ``fully_connected`` and ``conv2d`` fill); the sum is added to the
    REGULARIZATION_LOSSES collection. Raises ValueError when there are no weights."""
    weights = list(weights_list) if weights_list is not None else _hb.get_collection("weights")
    if not weights:
        raise ValueError("apply_regularization: no weights to regularize")
    penalties = [p for p in (regularizer(w) for w in weights) if p is not None]
    if not penalties:
        return _hb.constant(0.0)
    with _hb.name_scope("get_regularization_penalty"):
        total = penalties[0] if len(penalties) == 1 else _hb.add_n(penalties)
    _hb.add_to_collection(_hb.GraphKeys.REGULARIZATION_LOSSES, total)
    return total


def _cast(scale: float, like: Any) -> Any:
    return _hb.constant(
        scale, dtype=like.dtype.base_dtype if hasattr(like.dtype, "base_dtype") else like.dtype
    )
