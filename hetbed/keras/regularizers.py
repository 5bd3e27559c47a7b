"""``keras.regularizers``: l1, l2, l1_l2 (sum of ``l1 * |w|`` and ``l2 * w^2``)."""

from __future__ import annotations

from typing import Any

import hetbed as hb


class Regularizer:
    """A callable giving a scalar penalty for a weight tensor."""

    def __call__(self, x: Any) -> Any:
        return 0.0

    def get_config(self) -> dict:
        return {}


class L1L2(Regularizer):
    """``l1 * sum(|x|) + l2 * sum(x^2)``."""

    def __init__(self, l1: float = 0.0, l2: float = 0.0):
        self.l1, self.l2 = float(l1), float(l2)

    def __call__(self, x: Any) -> Any:
        total: Any = hb.constant(0.0, dtype=x.dtype)
        if self.l1:
            total = total + self.l1 * hb.reduce_sum(hb.abs(x))
        if self.l2:
            total = total + self.l2 * hb.reduce_sum(hb.square(x))
        return total

    def get_config(self) -> dict:
        return {"l1": self.l1, "l2": self.l2}


def l1(l: float = 0.01) -> L1L2:  # noqa: E741 - Keras's argument name
    return L1L2(l1=l)


def l2(l: float = 0.01) -> L1L2:  # noqa: E741
    return L1L2(l2=l)


def l1_l2(l1: float = 0.01, l2: float = 0.01) -> L1L2:
    return L1L2(l1=l1, l2=l2)


def get(identifier: Any) -> Any:
    if identifier is None or callable(identifier):
        return identifier
    names = {"l1": l1, "l2": l2, "l1_l2": l1_l2}
    if isinstance(identifier, str) and identifier in names:
        return names[identifier]()
    raise ValueError(f"unknown regularizer {identifier!r}; known: l1, l2, l1_l2 or a callable")
