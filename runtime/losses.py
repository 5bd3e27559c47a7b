"""``hb.losses``: TF1's weighted losses, reduced and added to the LOSSES collection.

Every loss computes per-element losses, multiplies them by ``weights`` (a scalar or a tensor that
broadcasts to the losses) and reduces them by ``reduction``; the default SUM_BY_NONZERO_WEIGHTS
divides the weighted sum by the number of non-zero weights (the mean when ``weights=1``).
"""

from __future__ import annotations

import numbers
from typing import Any

from . import dtypes as _dt
from .graph import GraphKeys, Tensor, add_to_collection, get_collection, name_scope
from .ops import array as _array
from .ops import math as _math
from .registry import convert_to_tensor


class Reduction:
    """How ``compute_weighted_loss`` reduces the weighted per-element losses."""

    NONE = "none"
    SUM = "weighted_sum"
    SUM_OVER_BATCH_SIZE = "weighted_sum_over_batch_size"
    MEAN = "weighted_mean"
    SUM_BY_NONZERO_WEIGHTS = "weighted_sum_by_nonzero_weights"
    SUM_OVER_NONZERO_WEIGHTS = SUM_BY_NONZERO_WEIGHTS

    @classmethod
    def all(cls) -> tuple[str, ...]:
        return (
            cls.NONE,
            cls.SUM,
            cls.MEAN,
            cls.SUM_OVER_BATCH_SIZE,
            cls.SUM_OVER_NONZERO_WEIGHTS,
            cls.SUM_BY_NONZERO_WEIGHTS,
        )

    @classmethod
    def validate(cls, key: str) -> None:
        if key not in cls.all():
            raise ValueError(f"invalid reduction {key!r}; choose one of {', '.join(cls.all())}")


def _safe_div(num: Tensor, den: Tensor) -> Tensor:
    """num / den, and 0 where den is 0 (TF1's div_no_nan)."""
    pos = _math.greater(den, 0.0)
    safe = _math.where(pos, den, _math.ones_like(den))
    return _math.where(pos, _math.divide(num, safe), _math.zeros_like(num))


def compute_weighted_loss(
    losses: Any,
    weights: Any = 1.0,
    scope: str | None = None,
    loss_collection: str | None = GraphKeys.LOSSES,
    reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS,
) -> Tensor:
    """Weight ``losses``, reduce them, add the result to ``loss_collection`` and return it.

    Raises ValueError for an unknown ``reduction``.
    """
    Reduction.validate(reduction)
    with name_scope(scope, "weighted_loss"):
        losses = convert_to_tensor(losses)
        dtype = losses.dtype
        if dtype != _dt.float32 and dtype != _dt.float64:
            losses = _array.cast(losses, _dt.float32)
        if isinstance(weights, numbers.Number):
            loss = _reduce_scalar_weight(losses, float(weights), reduction)
        else:
            w = _array.cast(convert_to_tensor(weights), losses.dtype)
            loss = _reduce_tensor_weights(losses, w, reduction)
        if loss_collection:
            add_to_collection(loss_collection, loss)
        return loss


def _reduce_scalar_weight(losses: Tensor, w: float, reduction: str) -> Tensor:
    """The common case of a Python weight, with as few ops as possible."""
    if reduction == Reduction.NONE:
        return losses if w == 1.0 else _math.multiply(losses, w)
    if reduction == Reduction.SUM:
        total = _math.reduce_sum(losses)
        return total if w == 1.0 else _math.multiply(total, w)
    if w == 0.0 and reduction != Reduction.SUM_OVER_BATCH_SIZE:
        return _math.multiply(_math.reduce_sum(losses), 0.0, name="value")
    mean = _math.reduce_mean(losses, name="value" if w == 1.0 else None)
    if reduction == Reduction.MEAN or w == 1.0:
        return mean
    return _math.multiply(mean, w, name="value")


def _reduce_tensor_weights(losses: Tensor, w: Tensor, reduction: str) -> Tensor:
    weighted = _math.multiply(losses, w)
    if reduction == Reduction.NONE:
        return weighted
    total = _math.reduce_sum(weighted)
    if reduction == Reduction.SUM:
        return total
    if reduction == Reduction.SUM_OVER_BATCH_SIZE:
        n = _array.cast(_array.size(weighted), losses.dtype)
        return _safe_div(total, n)
    broadcast_w = _math.multiply(w, _math.ones_like(losses))
    if reduction == Reduction.MEAN:
        return _safe_div(total, _math.reduce_sum(broadcast_w))
    nonzero = _array.cast(_math.not_equal(broadcast_w, 0.0), losses.dtype)
    return _safe_div(total, _math.reduce_sum(nonzero, name="num_present"))


def _as_float32(predictions: Any, labels: Any) -> tuple[Tensor, Tensor]:
    """Both as float32, as TF1's regression losses take them (float64 data gives a float32
    loss, which adds to float32 regularizers)."""
    p = _array.cast(convert_to_tensor(predictions), _dt.float32)
    return p, _array.cast(convert_to_tensor(labels), _dt.float32)


def absolute_difference(
    labels: Any,
    predictions: Any,
    weights: Any = 1.0,
    scope: str | None = None,
    loss_collection: str | None = GraphKeys.LOSSES,
    reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS,
) -> Tensor:
    """|predictions - labels|, weighted and reduced."""
    with name_scope(scope, "absolute_difference") as sc:
        predictions, labels = _as_float32(predictions, labels)
        losses = _math.abs(_math.subtract(predictions, labels))
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def mean_squared_error(
    labels: Any,
    predictions: Any,
    weights: Any = 1.0,
    scope: str | None = None,
    loss_collection: str | None = GraphKeys.LOSSES,
    reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS,
) -> Tensor:
    """(predictions - labels)², weighted and reduced."""
    with name_scope(scope, "mean_squared_error") as sc:
        predictions, labels = _as_float32(predictions, labels)
        losses = _math.squared_difference(predictions, labels)
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def huber_loss(
    labels: Any,
    predictions: Any,
    weights: Any = 1.0,
    delta: float = 1.0,
    scope: str | None = None,
    loss_collection: str | None = GraphKeys.LOSSES,
    reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS,
) -> Tensor:
    """0.5 e² where |e| <= delta, delta (|e| - delta/2) beyond; e = predictions - labels."""
    with name_scope(scope, "huber_loss") as sc:
        predictions, labels = _as_float32(predictions, labels)
        err = _math.abs(_math.subtract(predictions, labels))
        quad = _math.minimum(err, delta)
        lin = _math.subtract(err, quad)
        losses = _math.add(_math.multiply(_math.square(quad), 0.5), _math.multiply(lin, delta))
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def log_loss(
    labels: Any,
    predictions: Any,
    weights: Any = 1.0,
    epsilon: float = 1e-7,
    scope: str | None = None,
    loss_collection: str | None = GraphKeys.LOSSES,
    reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS,
) -> Tensor:
    """-(y log(p + eps) + (1 - y) log(1 - p + eps)) for probabilities p."""
    with name_scope(scope, "log_loss") as sc:
        p, y = _as_float32(predictions, labels)
        pos = _math.multiply(y, _math.log(_math.add(p, epsilon)))
        neg = _math.multiply(
            _math.subtract(1.0, y), _math.log(_math.add(_math.subtract(1.0, p), epsilon))
        )
        losses = _math.negative(_math.add(pos, neg))
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def hinge_loss(
    labels: Any,
    logits: Any,
    weights: Any = 1.0,
    scope: str | None = None,
    loss_collection: str | None = GraphKeys.LOSSES,
    reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS,
) -> Tensor:
    """max(0, 1 - (2y - 1) logits) for labels y in {0, 1}."""
    with name_scope(scope, "hinge_loss") as sc:
        logits, y = _as_float32(logits, labels)
        signs = _math.subtract(_math.multiply(y, 2.0), 1.0)
        losses = _math.maximum(_math.subtract(1.0, _math.multiply(signs, logits)), 0.0)
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def cosine_distance(
    labels: Any,
    predictions: Any,
    axis: int | None = None,
    weights: Any = 1.0,
    scope: str | None = None,
    loss_collection: str | None = GraphKeys.LOSSES,
    reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS,
    dim: int | None = None,
) -> Tensor:
    """1 - sum(labels * predictions, axis) for unit-normalized inputs."""
    axis = axis if axis is not None else dim
    if axis is None:
        raise ValueError("cosine_distance: you must specify axis")
    with name_scope(scope, "cosine_distance_loss") as sc:
        p, y = _as_float32(predictions, labels)
        dot = _math.reduce_sum(_math.multiply(y, p), axis=axis, keepdims=True)
        losses = _math.subtract(1.0, dot)
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def sigmoid_cross_entropy(
    multi_class_labels: Any,
    logits: Any,
    weights: Any = 1.0,
    label_smoothing: float = 0.0,
    scope: str | None = None,
    loss_collection: str | None = GraphKeys.LOSSES,
    reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS,
) -> Tensor:
    """Sigmoid cross-entropy of independent binary labels; smoothing pulls them toward 1/2."""
    from .ops import nn

    with name_scope(scope, "sigmoid_cross_entropy_loss") as sc:
        logits = convert_to_tensor(logits)
        y = _array.cast(convert_to_tensor(multi_class_labels), logits.dtype)
        if label_smoothing > 0:
            y = _math.add(_math.multiply(y, 1.0 - label_smoothing), 0.5 * label_smoothing)
        losses = nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logits, name="xentropy")
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def softmax_cross_entropy(
    onehot_labels: Any,
    logits: Any,
    weights: Any = 1.0,
    label_smoothing: float = 0.0,
    scope: str | None = None,
    loss_collection: str | None = GraphKeys.LOSSES,
    reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS,
) -> Tensor:
    """Softmax cross-entropy against one-hot (or probability) labels ``[batch, classes]``.

    ``weights`` is a scalar or a ``[batch]`` tensor; smoothing mixes the labels with uniform.
    """
    from .ops import nn

    with name_scope(scope, "softmax_cross_entropy_loss") as sc:
        logits = convert_to_tensor(logits)
        y = _array.cast(convert_to_tensor(onehot_labels), logits.dtype)
        if label_smoothing > 0:
            k = logits.shape[-1] if logits.shape.ndims else None
            if k is None:
                raise ValueError("softmax_cross_entropy: label_smoothing needs a known class count")
            y = _math.add(_math.multiply(y, 1.0 - label_smoothing), label_smoothing / k)
        y = _array.stop_gradient(y)
        fn = getattr(nn, "softmax_cross_entropy_with_logits_v2", None)
        if fn is None:
            fn = nn.softmax_cross_entropy_with_logits
        losses = fn(labels=y, logits=logits, name="xentropy")
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


def sparse_softmax_cross_entropy(
    labels: Any,
    logits: Any,
    weights: Any = 1.0,
    scope: str | None = None,
    loss_collection: str | None = GraphKeys.LOSSES,
    reduction: str = Reduction.SUM_BY_NONZERO_WEIGHTS,
) -> Tensor:
    """Softmax cross-entropy against integer class ids ``labels`` of shape ``[batch]``."""
    from .ops import nn

    with name_scope(scope, "sparse_softmax_cross_entropy_loss") as sc:
        losses = nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits, name="xentropy"
        )
        return compute_weighted_loss(losses, weights, sc, loss_collection, reduction)


# ---- collections --------------------------------------------------------------------------------


def add_loss(loss: Any, loss_collection: str | None = GraphKeys.LOSSES) -> None:
    """Add an externally computed loss to ``loss_collection``."""
    if loss_collection:
        add_to_collection(loss_collection, loss)


def get_losses(scope: str | None = None, loss_collection: str = GraphKeys.LOSSES) -> list:
    return get_collection(loss_collection, scope)


def get_regularization_losses(scope: str | None = None) -> list:
    return get_collection(GraphKeys.REGULARIZATION_LOSSES, scope)


def get_regularization_loss(
    scope: str | None = None, name: str = "total_regularization_loss"
) -> Tensor:
    """The sum of the regularization losses (a constant 0.0 when there are none)."""
    losses = get_regularization_losses(scope)
    if not losses:
        return _array.constant(0.0, name=name)
    return _math.add_n(losses, name=name)


def get_total_loss(
    add_regularization_losses: bool = True, name: str = "total_loss", scope: str | None = None
) -> Tensor:
    """The sum of the LOSSES collection (and the regularization losses).

    Raises ValueError when there is nothing to add.
    """
    losses = get_losses(scope)
    if add_regularization_losses:
        losses = losses + get_regularization_losses(scope)
    if not losses:
        raise ValueError(
            "get_total_loss: no losses found (use hb.losses.* or hb.losses.add_loss first)"
        )
    return _math.add_n(losses, name=name)
