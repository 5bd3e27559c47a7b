"""More of TF1's ``tf.metrics``: counts at thresholds and the curves read off them
(``precision_at_thresholds``, ``recall_at_thresholds``, ``sensitivity_at_specificity``,
``specificity_at_sensitivity``), ``true_negatives``, ``mean_tensor``, ``mean_relative_error``,
``mean_cosine_distance``, ``mean_per_class_accuracy`` and ``percentage_below``, each as TF's
metrics_impl computes it (its epsilons, its choice of threshold, its local variable names),
over local variables as the rest of hetbed/metrics.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetbed.runtime import dtypes as _dt
from hetbed.runtime.graph import Tensor, get_default_graph
from hetbed.runtime.ops.array import cast, constant
from hetbed.runtime.ops.math import (
    abs,
    equal,
    greater,
    logical_and,
    logical_not,
    multiply,
    reduce_sum,
    truediv,
    where,
    zeros_like,
)
from hetbed.runtime.ops.state import assign_add
from hetbed.runtime.registry import convert_to_tensor

from .metrics import (
    _broadcast_weights,
    _collect,
    _count,
    _in_unit_range,
    _local,
    _mean,
    _safe_div,
    _squeezed,
    mean,
)

__all__ = [
    "false_negatives_at_thresholds",
    "false_positives_at_thresholds",
    "mean_cosine_distance",
    "mean_per_class_accuracy",
    "mean_relative_error",
    "mean_tensor",
    "percentage_below",
    "precision_at_thresholds",
    "recall_at_thresholds",
    "sensitivity_at_specificity",
    "specificity_at_sensitivity",
    "true_negatives",
    "true_negatives_at_thresholds",
    "true_positives_at_thresholds",
]

_EPSILON = 1e-7  # TF's (metrics_impl's kepsilon)
_NAMES = {
    "tp": "true_positives",
    "fn": "false_negatives",
    "tn": "true_negatives",
    "fp": "false_positives",
}


def true_negatives(
    labels: Any,
    predictions: Any,
    weights: Any = None,
    metrics_collections: Any = None,
    updates_collections: Any = None,
    name: str | None = None,
) -> tuple[Tensor, Tensor]:
    """TF1's ``tf.metrics.true_negatives``: the (weighted) count of false labels predicted
    false (labels and predictions as bool)."""
    value, update = _count(
        name or "true_negatives",
        lambda lab, pred: logical_and(logical_not(lab), logical_not(pred)),
        labels,
        predictions,
        weights,
    )
    _collect(metrics_collections, updates_collections, value, update)
    return value, update


def _at_thresholds(
    labels: Any, predictions: Any, thresholds: Any, weights: Any, kinds: tuple
) -> tuple[dict, dict]:
    """Streaming counts at each threshold (a prediction above it is positive): local
    variables ``true_positives`` etc. of shape [thresholds]; (values, updates) by kind."""
    import hetbed.compat.v1 as _tf

    cuts = np.asarray([float(t) for t in thresholds], np.float32)
    if cuts.ndim != 1 or not len(cuts):
        raise ValueError(f"thresholds must be a non-empty list of numbers, got {thresholds!r}")
    n = len(cuts)
    labels, predictions, weights = _squeezed(labels, predictions, weights)
    checked = _in_unit_range(predictions)
    p = _tf.reshape(checked, [-1, 1])
    lab = _tf.reshape(cast(labels, _dt.bool_), [-1, 1])
    pos = greater(p, constant(cuts.reshape(1, n)))  # [examples, thresholds]
    lab = logical_and(lab, constant(np.ones((1, n), bool)))  # (broadcast)
    w = None
    if weights is not None:  # broadcast to the predictions, then one per example
        w = _tf.reshape(_broadcast_weights(checked, weights), [-1, 1])
        w = multiply(w, constant(np.ones((1, n), np.float32)))
    hits = {
        "tp": lambda: logical_and(lab, pos),
        "fn": lambda: logical_and(lab, logical_not(pos)),
        "tn": lambda: logical_and(logical_not(lab), logical_not(pos)),
        "fp": lambda: logical_and(logical_not(lab), pos),
    }
    values, updates = {}, {}
    for kind in kinds:
        var = _local(_NAMES[kind], (n,))
        x = cast(hits[kind](), _dt.float32)
        if w is not None:
            x = multiply(x, w)
        values[kind], updates[kind] = var.value(), assign_add(var, reduce_sum(x, 0))
    return values, updates


def _counts_at(kind: str) -> Any:
    full = _NAMES[kind] + "_at_thresholds"

    def metric(
        labels: Any,
        predictions: Any,
        thresholds: Any,
        weights: Any = None,
        metrics_collections: Any = None,
        updates_collections: Any = None,
        name: str | None = None,
    ) -> tuple[Tensor, Tensor]:
        with get_default_graph().name_scope(name or _NAMES[kind]):
            values, updates = _at_thresholds(labels, predictions, thresholds, weights, (kind,))
        _collect(metrics_collections, updates_collections, values[kind], updates[kind])
        return values[kind], updates[kind]

    metric.__name__ = full
    metric.__doc__ = (
        f"TF1's ``tf.metrics.{full}``: the (weighted) count of {_NAMES[kind].replace('_', ' ')} "
        "at each threshold (a prediction above it is positive), a vector."
    )
    return metric


true_positives_at_thresholds = _counts_at("tp")
false_positives_at_thresholds = _counts_at("fp")
true_negatives_at_thresholds = _counts_at("tn")
false_negatives_at_thresholds = _counts_at("fn")


def _rate_at_thresholds(kind: str, other: str) -> Any:
    full = {"fp": "precision", "fn": "recall"}[other] + "_at_thresholds"

    def metric(
        labels: Any,
        predictions: Any,
        thresholds: Any,
        weights: Any = None,
        metrics_collections: Any = None,
        updates_collections: Any = None,
        name: str | None = None,
    ) -> tuple[Tensor, Tensor]:
        with get_default_graph().name_scope(name or full):
            v, u = _at_thresholds(labels, predictions, thresholds, weights, ("tp", other))
            value = truediv(v["tp"], _EPSILON + v["tp"] + v[other], name="value")
            update = truediv(u["tp"], _EPSILON + u["tp"] + u[other], name="update_op")
        _collect(metrics_collections, updates_collections, value, update)
        return value, update

    metric.__name__ = full
    metric.__doc__ = f"TF1's ``tf.metrics.{full}``: tp / (tp + {other} + 1e-7) at each threshold."
    return metric


precision_at_thresholds = _rate_at_thresholds("tp", "fp")
recall_at_thresholds = _rate_at_thresholds("tp", "fn")


def _even_thresholds(num_thresholds: int) -> list:
    if int(num_thresholds) < 2:
        raise ValueError(f"num_thresholds must be > 1, got {num_thresholds}")
    n = int(num_thresholds)
    inner = [(i + 1) * 1.0 / (n - 1) for i in range(n - 2)]
    return [0.0 - _EPSILON, *inner, 1.0 + _EPSILON]


def _at_closest(
    rate: Tensor, target: float, num: Tensor, den_other: Tensor, name: str, last: bool
) -> Tensor:
    """TF's rule: the first (``last``: the last) threshold whose ``rate`` is closest to
    ``target``; there ``num / (num + den_other + 1e-7)``."""
    import hetbed.compat.v1 as _tf

    gap = abs(rate - float(target))
    if last:
        at_min = cast(equal(gap, _tf.reduce_min(gap)), _dt.int64)
        i = cast(_tf.argmax(_tf.cumsum(at_min), 0), _dt.int32)
    else:
        i = cast(_tf.argmin(gap, 0), _dt.int32)
    return truediv(
        _tf.gather(num, i), _tf.gather(num, i) + _tf.gather(den_other, i) + _EPSILON, name=name
    )


def sensitivity_at_specificity(
    labels: Any,
    predictions: Any,
    specificity: float,
    weights: Any = None,
    num_thresholds: int = 200,
    metrics_collections: Any = None,
    updates_collections: Any = None,
    name: str | None = None,
) -> tuple[Tensor, Tensor]:
    """TF1's: the sensitivity (recall) at the (first) threshold whose specificity is closest
    to ``specificity``, over ``num_thresholds`` thresholds evenly spaced in [0, 1]."""
    if not 0.0 <= float(specificity) <= 1.0:
        raise ValueError(
            f"sensitivity_at_specificity: specificity must be in [0, 1], got {specificity}"
        )
    with get_default_graph().name_scope(name or "sensitivity_at_specificity"):
        kinds = ("tp", "fn", "tn", "fp")
        v, u = _at_thresholds(labels, predictions, _even_thresholds(num_thresholds), weights, kinds)

        def at(c: dict, label: str) -> Tensor:
            spec = truediv(c["tn"], c["tn"] + c["fp"] + _EPSILON)
            return _at_closest(spec, specificity, c["tp"], c["fn"], label, last=False)

        value, update = at(v, "value"), at(u, "update_op")
    _collect(metrics_collections, updates_collections, value, update)
    return value, update


def specificity_at_sensitivity(
    labels: Any,
    predictions: Any,
    sensitivity: float,
    weights: Any = None,
    num_thresholds: int = 200,
    metrics_collections: Any = None,
    updates_collections: Any = None,
    name: str | None = None,
) -> tuple[Tensor, Tensor]:
    """TF1's: the specificity at the (last) threshold whose sensitivity is closest to
    ``sensitivity``, over ``num_thresholds`` thresholds evenly spaced in [0, 1]."""
    if not 0.0 <= float(sensitivity) <= 1.0:
        raise ValueError(
            f"specificity_at_sensitivity: sensitivity must be in [0, 1], got {sensitivity}"
        )
    with get_default_graph().name_scope(name or "specificity_at_sensitivity"):
        kinds = ("tp", "fn", "tn", "fp")
        v, u = _at_thresholds(labels, predictions, _even_thresholds(num_thresholds), weights, kinds)

        def at(c: dict, label: str) -> Tensor:
            sens = truediv(c["tp"], c["tp"] + c["fn"] + _EPSILON)
            return _at_closest(sens, sensitivity, c["tn"], c["fp"], label, last=True)

        value, update = at(v, "value"), at(u, "update_op")
    _collect(metrics_collections, updates_collections, value, update)
    return value, update


def mean_tensor(
    values: Any,
    weights: Any = None,
    metrics_collections: Any = None,
    updates_collections: Any = None,
    name: str | None = None,
) -> tuple[Tensor, Tensor]:
    """TF1's: the element-wise (weighted) mean of ``values`` over the batches seen, a tensor
    of their shape (local variables ``total_tensor`` and ``count_tensor``)."""
    v = cast(convert_to_tensor(values), _dt.float32)
    if not v.shape.is_fully_defined():
        raise ValueError(f"mean_tensor: values need a fully defined shape, got {v.shape}")
    shape = tuple(v.shape.as_list())
    with get_default_graph().name_scope(name or "mean"):
        total, count = _local("total_tensor", shape), _local("count_tensor", shape)
        ones = zeros_like(v) + 1.0
        if weights is not None:
            w = _broadcast_weights(v, weights)
            v, ones = multiply(v, w), multiply(ones, w)
        up_total, up_count = assign_add(total, v), assign_add(count, ones)
        value = _safe_div(total.value(), count.value(), "value")
        update = _safe_div(up_total, up_count, "update_op")
    _collect(metrics_collections, updates_collections, value, update)
    return value, update


def mean_relative_error(
    labels: Any,
    predictions: Any,
    normalizer: Any,
    weights: Any = None,
    metrics_collections: Any = None,
    updates_collections: Any = None,
    name: str | None = None,
) -> tuple[Tensor, Tensor]:
    """TF1's: the mean of |predictions - labels| / normalizer (0 where the normalizer is 0)."""
    labels, predictions, weights = _squeezed(labels, predictions, weights)
    _, p, norm = _squeezed(None, predictions, normalizer)
    norm, p = _squeezed(norm, p)[:2]
    if not p.shape.is_compatible_with(norm.shape):
        raise ValueError(
            f"mean_relative_error: normalizer of shape {norm.shape} does not match the "
            f"predictions' {p.shape}"
        )
    p = cast(p, _dt.float32)
    lab = cast(labels, _dt.float32)
    norm = cast(norm, _dt.float32)
    zero = zeros_like(lab)
    norm_b = norm + zero  # (the same shape)
    safe = where(equal(norm_b, 0.0), zero + 1.0, norm_b)
    rel = where(equal(norm_b, 0.0), zero, truediv(abs(lab - p), safe))
    return mean(
        rel, weights, metrics_collections, updates_collections, name or "mean_relative_error"
    )


def mean_cosine_distance(
    labels: Any,
    predictions: Any,
    dim: int,
    weights: Any = None,
    metrics_collections: Any = None,
    updates_collections: Any = None,
    name: str | None = None,
) -> tuple[Tensor, Tensor]:
    """TF1's: 1 - the mean of the dot products of ``predictions`` and ``labels`` along
    ``dim`` (both assumed unit-normalized, as TF assumes)."""
    with get_default_graph().name_scope(name or "mean_cosine_distance"):
        labels, predictions, weights = _squeezed(labels, predictions, weights)
        p = cast(predictions, _dt.float32)
        lab = cast(labels, _dt.float32)
        dots = reduce_sum(multiply(p, lab), axis=[dim], keepdims=True)
        m, up = _mean(dots, weights)
        value, update = 1.0 - m, 1.0 - up
    _collect(metrics_collections, updates_collections, value, update)
    return value, update


def mean_per_class_accuracy(
    labels: Any,
    predictions: Any,
    num_classes: int,
    weights: Any = None,
    metrics_collections: Any = None,
    updates_collections: Any = None,
    name: str | None = None,
) -> tuple[Tensor, Tensor]:
    """TF1's: the mean over ``num_classes`` classes of each class's accuracy (correct /
    examples of that class; a class not seen counts 0), from local variables ``count`` and
    ``total`` of shape [num_classes]. ``update_op`` returns the per-class accuracies."""
    import hetbed.compat.v1 as _tf

    n = int(num_classes)
    with get_default_graph().name_scope(name or "mean_accuracy"):
        lab = _tf.reshape(cast(convert_to_tensor(labels), _dt.int64), [-1])
        pred = _tf.reshape(cast(convert_to_tensor(predictions), _dt.int64), [-1])
        ones = cast(zeros_like(lab), _dt.float32) + 1.0
        right = cast(equal(pred, lab), _dt.float32)
        if weights is not None:
            w = _tf.reshape(cast(convert_to_tensor(weights), _dt.float32), [-1])
            ones, right = multiply(ones, w), multiply(right, w)
        count, total = _local("count", (n,)), _local("total", (n,))
        up_total = _tf.scatter_add(total, lab, ones)
        up_count = _tf.scatter_add(count, lab, right)
        per_class = _safe_div(count.value(), total.value(), None)
        value = _tf.reduce_mean(per_class, name="mean_accuracy")
        update = _safe_div(up_count, up_total, "update_op")
    _collect(metrics_collections, updates_collections, value, update)
    return value, update


def percentage_below(
    values: Any,
    threshold: float,
    weights: Any = None,
    metrics_collections: Any = None,
    updates_collections: Any = None,
    name: str | None = None,
) -> tuple[Tensor, Tensor]:
    """TF1's: the (weighted) fraction of ``values`` below ``threshold``."""
    import hetbed.compat.v1 as _tf

    below = cast(
        _tf.less(cast(convert_to_tensor(values), _dt.float32), float(threshold)), _dt.float32
    )
    return mean(
        below,
        weights,
        metrics_collections,
        updates_collections,
        name or "percentage_below_threshold",
    )
