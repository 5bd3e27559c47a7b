"""TF1's ``tf.contrib.metrics`` (also ``slim.metrics``): the ``streaming_*`` metrics, which are
``tf.metrics``' with TF1 contrib's argument order (``predictions`` before ``labels``), and the
helpers that gather several metrics' value and update ops (``aggregate_metrics``,
``aggregate_metric_map``), as slim's evaluation scripts use them. Each is computed by the
``tf.metrics`` function it names (hetbed/metrics.py, metrics_extra.py, metrics_at_k.py).
"""

from __future__ import annotations

from typing import Any

import hetbed as _hb
from hetbed import metrics as _m
from hetbed.runtime import dtypes as _dt
from hetbed.runtime.graph import get_default_graph
from hetbed.runtime.ops.array import cast
from hetbed.runtime.registry import convert_to_tensor


def _swapped(fn: Any, name: str) -> Any:
    """``fn(labels, predictions, *rest)`` as ``streaming(predictions, labels, *rest)``."""

    def streaming(predictions: Any, labels: Any, *args: Any, **kwargs: Any) -> Any:
        return fn(labels, predictions, *args, **kwargs)

    streaming.__name__ = streaming.__qualname__ = name
    streaming.__doc__ = f"TF1's ``tf.contrib.metrics.{name}``: ``tf.metrics.{fn.__name__}``."
    return streaming


_PAIRS = {
    "streaming_accuracy": _m.accuracy,
    "streaming_precision": _m.precision,
    "streaming_recall": _m.recall,
    "streaming_true_positives": _m.true_positives,
    "streaming_false_positives": _m.false_positives,
    "streaming_true_negatives": _m.true_negatives,
    "streaming_false_negatives": _m.false_negatives,
    "streaming_auc": _m.auc,
    "streaming_precision_at_thresholds": _m.precision_at_thresholds,
    "streaming_recall_at_thresholds": _m.recall_at_thresholds,
    "streaming_true_positives_at_thresholds": _m.true_positives_at_thresholds,
    "streaming_false_positives_at_thresholds": _m.false_positives_at_thresholds,
    "streaming_true_negatives_at_thresholds": _m.true_negatives_at_thresholds,
    "streaming_false_negatives_at_thresholds": _m.false_negatives_at_thresholds,
    "streaming_sensitivity_at_specificity": _m.sensitivity_at_specificity,
    "streaming_specificity_at_sensitivity": _m.specificity_at_sensitivity,
    "streaming_mean_absolute_error": _m.mean_absolute_error,
    "streaming_mean_squared_error": _m.mean_squared_error,
    "streaming_root_mean_squared_error": _m.root_mean_squared_error,
    "streaming_mean_relative_error": _m.mean_relative_error,
    "streaming_mean_cosine_distance": _m.mean_cosine_distance,
    "streaming_mean_iou": _m.mean_iou,
    "streaming_sparse_recall_at_k": _m.recall_at_k,
    "streaming_sparse_precision_at_k": _m.precision_at_k,
    "streaming_sparse_average_precision_at_k": _m.average_precision_at_k,
}
globals().update({name: _swapped(fn, name) for name, fn in _PAIRS.items()})

streaming_mean = _m.mean
streaming_mean_tensor = _m.mean_tensor
streaming_percentage_less = _m.percentage_below


def streaming_sparse_precision_at_top_k(
    top_k_predictions: Any,
    labels: Any,
    class_id: Any = None,
    weights: Any = None,
    metrics_collections: Any = None,
    updates_collections: Any = None,
    name: str | None = None,
) -> tuple:
    """TF1 contrib's: ``tf.metrics.precision_at_top_k`` (its third argument is ``class_id``)."""
    return _m.precision_at_top_k(
        labels,
        top_k_predictions,
        class_id=class_id,
        weights=weights,
        metrics_collections=metrics_collections,
        updates_collections=updates_collections,
        name=name,
    )


def streaming_recall_at_k(
    predictions: Any,
    labels: Any,
    k: int,
    weights: Any = None,
    metrics_collections: Any = None,
    updates_collections: Any = None,
    name: str | None = None,
) -> tuple:
    """TF1's: the fraction of examples whose label is among the ``k`` highest
    ``predictions`` (``in_top_k``), streamed as a mean."""
    hits = cast(
        _hb.nn.in_top_k(convert_to_tensor(predictions), convert_to_tensor(labels), k),
        _dt.float32,
    )  # (TF1 computes it outside the metric's scope, ``recall_at_<k>``)
    return _m.mean(
        hits, weights, metrics_collections, updates_collections, name or f"recall_at_{k}"
    )


def accuracy(predictions: Any, labels: Any, weights: Any = None, name: str | None = None) -> Any:
    """TF1's ``tf.contrib.metrics.accuracy``: this batch's (weighted) accuracy, a tensor (not
    streamed)."""
    import hetbed.compat.v1 as _tf
    from hetbed.metrics import _squeezed

    with get_default_graph().name_scope(name or "accuracy"):
        lab, p, weights = _squeezed(labels, predictions, weights)
        if p.dtype != lab.dtype:
            p = cast(p, lab.dtype)
        right = cast(_tf.equal(p, lab), _dt.float32)
        if weights is None:
            return _tf.reduce_mean(right)
        w = cast(convert_to_tensor(weights), _dt.float32) + _tf.zeros_like(right)
        return _tf.reduce_sum(right * w) / _tf.reduce_sum(w)


def aggregate_metrics(*value_update_tuples: Any) -> tuple[list, list]:
    """``(values, updates)`` of several ``(value, update_op)`` pairs."""
    if not value_update_tuples:
        raise ValueError("aggregate_metrics: expected at least one (value, update_op) pair")
    values, updates = zip(*value_update_tuples)
    return list(values), list(updates)


def aggregate_metric_map(names_to_tuples: dict) -> tuple[dict, dict]:
    """``({name: value}, {name: update_op})`` of a dict of ``(value, update_op)`` pairs."""
    values = {k: v for k, (v, _) in names_to_tuples.items()}
    updates = {k: u for k, (_, u) in names_to_tuples.items()}
    return values, updates


__all__ = [
    *_PAIRS,
    "accuracy",
    "streaming_sparse_precision_at_top_k",
    "aggregate_metric_map",
    "aggregate_metrics",
    "streaming_mean",
    "streaming_mean_tensor",
    "streaming_percentage_less",
    "streaming_recall_at_k",
]
