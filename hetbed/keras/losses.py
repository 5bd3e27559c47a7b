"""``keras.losses``: per-sample losses ``fn(y_true, y_pred)`` (the mean over the last axis where
Keras takes it) and their class forms, which weight and reduce them (the batch mean by
default)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hetbed as hb

from . import backend as K


def _pair(y_true: Any, y_pred: Any) -> tuple[Any, Any]:
    y_pred = hb.convert_to_tensor(y_pred)
    return hb.cast(y_true, y_pred.dtype), y_pred


def mean_squared_error(y_true: Any, y_pred: Any) -> Any:
    t, p = _pair(y_true, y_pred)
    return hb.reduce_mean(hb.squared_difference(p, t), axis=-1)


def mean_absolute_error(y_true: Any, y_pred: Any) -> Any:
    t, p = _pair(y_true, y_pred)
    return hb.reduce_mean(hb.abs(p - t), axis=-1)


def mean_absolute_percentage_error(y_true: Any, y_pred: Any) -> Any:
    t, p = _pair(y_true, y_pred)
    diff = hb.abs((t - p) / hb.maximum(hb.abs(t), K.epsilon()))
    return 100.0 * hb.reduce_mean(diff, axis=-1)


def categorical_crossentropy(
    y_true: Any, y_pred: Any, from_logits: bool = False, label_smoothing: float = 0.0
) -> Any:
    t, p = _pair(y_true, y_pred)
    if label_smoothing:
        n = hb.cast(hb.shape(t)[-1], t.dtype)
        t = t * (1.0 - label_smoothing) + label_smoothing / n
    return K.categorical_crossentropy(t, p, from_logits=from_logits)


def sparse_categorical_crossentropy(y_true: Any, y_pred: Any, from_logits: bool = False) -> Any:
    return K.sparse_categorical_crossentropy(y_true, y_pred, from_logits=from_logits)


def binary_crossentropy(
    y_true: Any, y_pred: Any, from_logits: bool = False, label_smoothing: float = 0.0
) -> Any:
    t, p = _pair(y_true, y_pred)
    if label_smoothing:
        t = t * (1.0 - label_smoothing) + 0.5 * label_smoothing
    return hb.reduce_mean(K.binary_crossentropy(t, p, from_logits=from_logits), axis=-1)


def hinge(y_true: Any, y_pred: Any) -> Any:
    t, p = _pair(y_true, y_pred)
    return hb.reduce_mean(hb.maximum(1.0 - t * p, 0.0), axis=-1)


mse = MSE = mean_squared_error
mae = MAE = mean_absolute_error
mape = MAPE = mean_absolute_percentage_error


_REDUCTIONS = ("auto", "none", "sum", "sum_over_batch_size")


class Loss:
    """A loss object: ``loss(y_true, y_pred, sample_weight)`` weights the per-sample losses
    (``call``) and reduces them as ``reduction`` says: "auto" and "sum_over_batch_size" divide
    the weighted sum by the number of losses, "sum" does not, "none" keeps them. ``compile``
    takes the per-sample losses and weights them by ``fit``'s sample_weight the same way."""

    fn: Callable = staticmethod(mean_squared_error)

    def __init__(self, reduction: str = "auto", name: str | None = None, **kwargs: Any):
        if reduction not in _REDUCTIONS:
            raise ValueError(f"Invalid Reduction Key: {reduction}. Expected keys are {_REDUCTIONS}")
        self.reduction = reduction
        self.name = name or _snake(type(self).__name__)
        self.kwargs = kwargs

    def call(self, y_true: Any, y_pred: Any) -> Any:
        return type(self).fn(y_true, y_pred, **self.kwargs)

    def __call__(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> Any:
        per_sample = self.call(y_true, y_pred)
        if sample_weight is not None:
            w = hb.cast(sample_weight, per_sample.dtype)
            rank = per_sample.shape.ndims
            if w.shape.ndims == 1 and rank is not None and rank > 1:
                w = hb.reshape(w, [-1] + [1] * (rank - 1))
            per_sample = per_sample * w
        if self.reduction == "none":
            return per_sample
        if self.reduction == "sum":
            return hb.reduce_sum(per_sample)
        return hb.reduce_mean(per_sample)


def _snake(name: str) -> str:
    from hetbed.runtime.layers import _snake as snake

    return snake(name)


# the arguments that are not the function's: Keras's defaults, which are all hetbed takes
_FIXED = {"axis": -1, "ignore_class": None}


def _loss_class(name: str, fn: Callable, params: tuple = ()) -> type:
    """A Loss class over ``fn``, its positional arguments in Keras's order: ``params`` (the
    function's own keywords, and ``axis``/``ignore_class`` where Keras has them), then
    ``reduction`` and ``name``."""
    order = (*params, "reduction", "name")

    def __init__(self, *args: Any, **kw: Any):
        if len(args) > len(order):
            raise TypeError(f"{name} takes at most {len(order)} arguments ({', '.join(order)})")
        for key, value in zip(order, args):
            if key in kw:
                raise TypeError(f"{name} got multiple values for argument {key!r}")
            kw[key] = value
        for key, default in _FIXED.items():
            if key in kw and kw.pop(key) != default:
                raise NotImplementedError(f"{name}: hetbed supports only {key}={default!r}")
        reduction, lname = kw.pop("reduction", "auto"), kw.pop("name", None)
        Loss.__init__(self, reduction, lname or fn.__name__, **kw)

    return type(name, (Loss,), {"fn": staticmethod(fn), "__init__": __init__})


MeanSquaredError = _loss_class("MeanSquaredError", mean_squared_error)
MeanAbsoluteError = _loss_class("MeanAbsoluteError", mean_absolute_error)
CategoricalCrossentropy = _loss_class(
    "CategoricalCrossentropy", categorical_crossentropy, ("from_logits", "label_smoothing", "axis")
)
SparseCategoricalCrossentropy = _loss_class(
    "SparseCategoricalCrossentropy",
    sparse_categorical_crossentropy,
    ("from_logits", "ignore_class"),
)
BinaryCrossentropy = _loss_class(
    "BinaryCrossentropy", binary_crossentropy, ("from_logits", "label_smoothing", "axis")
)
Hinge = _loss_class("Hinge", hinge)

_BY_NAME: dict[str, Callable] = {
    "mean_squared_error": mean_squared_error,
    "mse": mean_squared_error,
    "mean_absolute_error": mean_absolute_error,
    "mae": mean_absolute_error,
    "mean_absolute_percentage_error": mean_absolute_percentage_error,
    "mape": mean_absolute_percentage_error,
    "categorical_crossentropy": categorical_crossentropy,
    "sparse_categorical_crossentropy": sparse_categorical_crossentropy,
    "binary_crossentropy": binary_crossentropy,
    "hinge": hinge,
}


def get(identifier: Any) -> Callable:
    """A loss function from a name ("mse"), a function or a Loss object."""
    if callable(identifier):
        return identifier
    if isinstance(identifier, str) and identifier in _BY_NAME:
        return _BY_NAME[identifier]
    raise ValueError(f"unknown loss {identifier!r}; known: {', '.join(sorted(_BY_NAME))}")


def name_of(loss: Any) -> str:
    if isinstance(loss, Loss):
        return loss.name
    return getattr(loss, "__name__", type(loss).__name__)


def is_categorical_crossentropy(loss: Any) -> bool:
    if isinstance(loss, Loss):
        return isinstance(loss, CategoricalCrossentropy)
    return loss is categorical_crossentropy


def expects_output_shape(loss: Any) -> bool:
    """Whether Keras checks that targets for ``loss`` have the output's shape (its key losses:
    mean squared error, binary and categorical crossentropy)."""
    if isinstance(loss, Loss):
        return isinstance(loss, (MeanSquaredError, BinaryCrossentropy, CategoricalCrossentropy))
    return any(
        loss is f for f in (mean_squared_error, binary_crossentropy, categorical_crossentropy)
    )
