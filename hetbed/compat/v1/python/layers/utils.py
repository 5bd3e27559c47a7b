"""``tensorflow.python.layers.utils``: ``smart_cond`` and ``constant_value``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..framework.tensor_util import constant_value as _constant_value


def constant_value(pred: Any) -> bool | None:
    """A predicate's value when it is known while building (a Python bool or int, a constant
    or a ``placeholder_with_default``'s default is not: None)."""
    if isinstance(pred, (bool, int)):
        return bool(pred)
    v = _constant_value(pred)
    return None if v is None else bool(v)


def smart_cond(
    pred: Any, true_fn: Callable | None = None, false_fn: Callable | None = None, name: Any = None
) -> Any:
    """``true_fn()`` or ``false_fn()`` when ``pred`` is known while building, else
    ``tf.cond(pred, true_fn, false_fn)``, as TF1's."""
    known = constant_value(pred)
    if known is not None:
        return true_fn() if known else false_fn()
    import hetbed.compat.v1 as tf

    return tf.cond(pred, true_fn, false_fn, name=name)
