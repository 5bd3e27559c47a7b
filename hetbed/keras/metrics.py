"""``keras.metrics``: per-sample metric functions ``fn(y_true, y_pred)``; ``fit`` and
``evaluate`` report their sample-weighted mean over an epoch, as Keras's stateful means do.
``get_for_loss`` resolves "accuracy"/"acc" by the loss, as ``compile`` does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hetbed as hb

from . import losses as _losses


def binary_accuracy(y_true: Any, y_pred: Any, threshold: float = 0.5) -> Any:
    y_pred = hb.convert_to_tensor(y_pred)
    hit = hb.equal(hb.cast(y_true, y_pred.dtype), hb.cast(y_pred > threshold, y_pred.dtype))
    return hb.reduce_mean(hb.cast(hit, y_pred.dtype), axis=-1)


def categorical_accuracy(y_true: Any, y_pred: Any) -> Any:
    y_pred = hb.convert_to_tensor(y_pred)
    hit = hb.equal(hb.argmax(y_true, axis=-1), hb.argmax(y_pred, axis=-1))
    return hb.cast(hit, y_pred.dtype)


def sparse_categorical_accuracy(y_true: Any, y_pred: Any) -> Any:
    y_pred = hb.convert_to_tensor(y_pred)
    labels = hb.cast(hb.reshape(y_true, [-1]), hb.int64)
    flat = hb.reshape(y_pred, [-1, y_pred.shape[-1]]) if y_pred.shape.ndims != 2 else y_pred
    return hb.cast(hb.equal(labels, hb.argmax(flat, axis=-1)), y_pred.dtype)


def top_k_categorical_accuracy(y_true: Any, y_pred: Any, k: int = 5) -> Any:
    y_pred = hb.convert_to_tensor(y_pred)
    hit = hb.nn.in_top_k(y_pred, hb.cast(hb.argmax(y_true, axis=-1), hb.int32), k)
    return hb.cast(hit, y_pred.dtype)


def sparse_top_k_categorical_accuracy(y_true: Any, y_pred: Any, k: int = 5) -> Any:
    y_pred = hb.convert_to_tensor(y_pred)
    hit = hb.nn.in_top_k(y_pred, hb.cast(hb.reshape(y_true, [-1]), hb.int32), k)
    return hb.cast(hit, y_pred.dtype)


mean_squared_error = mse = _losses.mean_squared_error
mean_absolute_error = mae = _losses.mean_absolute_error
mean_absolute_percentage_error = mape = _losses.mean_absolute_percentage_error
categorical_crossentropy = _losses.categorical_crossentropy
sparse_categorical_crossentropy = _losses.sparse_categorical_crossentropy
binary_crossentropy = _losses.binary_crossentropy

_BY_NAME: dict[str, Callable] = {
    f.__name__: f
    for f in (
        binary_accuracy,
        categorical_accuracy,
        sparse_categorical_accuracy,
        top_k_categorical_accuracy,
        sparse_top_k_categorical_accuracy,
    )
} | dict(_losses._BY_NAME)


def get(identifier: Any) -> Callable:
    if callable(identifier):
        return identifier
    if isinstance(identifier, str) and identifier in _BY_NAME:
        return _BY_NAME[identifier]
    raise ValueError(f"unknown metric {identifier!r}; known: accuracy, acc, {sorted(_BY_NAME)}")


def get_for_loss(identifier: Any, loss: Any, output_shape: Any) -> Callable:
    """The metric for ``identifier``; "accuracy"/"acc" is binary, categorical or sparse
    categorical accuracy according to the loss (and a one-unit output), as Keras picks it."""
    if identifier not in ("accuracy", "acc"):
        return get(identifier)
    fn = getattr(loss, "fn", loss)
    if fn is _losses.sparse_categorical_crossentropy:
        return sparse_categorical_accuracy
    if fn is _losses.binary_crossentropy or (output_shape and output_shape[-1] == 1):
        return binary_accuracy
    return categorical_accuracy
