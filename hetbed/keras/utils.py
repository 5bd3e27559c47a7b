"""``keras.utils``: to_categorical, normalize, pad_sequences, get_file (no network)."""

from __future__ import annotations

from typing import Any

import numpy as np


def to_categorical(y: Any, num_classes: int | None = None, dtype: str = "float32") -> np.ndarray:
    """One-hot rows for integer class ids ``y`` (a trailing axis of 1 is dropped first)."""
    y = np.asarray(y, dtype="int64")
    shape = y.shape
    if shape and shape[-1] == 1 and len(shape) > 1:
        shape = shape[:-1]
    y = y.ravel()
    n = int(num_classes if num_classes is not None else y.max() + 1)
    if y.size and (y.min() < 0 or y.max() >= n):
        raise ValueError(f"to_categorical: class ids must be in [0, {n}), got {y.min()}..{y.max()}")
    out = np.zeros((y.size, n), dtype=dtype)
    out[np.arange(y.size), y] = 1
    return out.reshape(*shape, n)


def normalize(x: Any, axis: int = -1, order: int = 2) -> np.ndarray:
    x = np.asarray(x)
    norm = np.atleast_1d(np.linalg.norm(x, order, axis))
    norm[norm == 0] = 1
    return x / np.expand_dims(norm, axis)


def get_file(fname: str, origin: str = "", **kwargs: Any) -> str:
    from .datasets import cached_file

    return cached_file(fname, origin)


def pad_sequences(*args: Any, **kwargs: Any) -> np.ndarray:
    """``keras.preprocessing.sequence.pad_sequences`` (TF 2's ``keras.utils.pad_sequences``)."""
    from .preprocessing.sequence import pad_sequences as pad

    return pad(*args, **kwargs)
