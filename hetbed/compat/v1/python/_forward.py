"""Modules of TensorFlow's private ``tensorflow.python`` whose names are TF1's public ones:
each name a program takes from them (``state_ops.assign``, ``math_ops.reduce_sum``) is
``tf.<name>`` of ``hetbed.compat.v1``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def forward(module: str, extra: dict[str, Any] | None = None) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) that gives ``extra[name]``, else ``tf.<name>``, and
    otherwise an AttributeError naming what is missing."""

    def __getattr__(name: str) -> Any:
        if extra and name in extra:
            return extra[name]
        if name.startswith("__"):
            raise AttributeError(name)
        import hetbed.compat.v1 as tf

        try:
            return getattr(tf, name)
        except AttributeError:
            raise AttributeError(
                f"{module}.{name}: hetbed.compat.v1 has no {name!r} (this module gives TF1's "
                "public names only)"
            ) from None

    return __getattr__
