"""``hb.metrics`` (TF1's ``tf.metrics``): streaming metrics over local variables.

Each metric returns ``(value, update_op)``: ``update_op`` adds a batch to the metric's local
variables (in ``local_variables`` and ``metric_variables``; start them with
``local_variables_initializer()``) and returns the updated value; ``value`` reads the current
value without changing it. A metric with nothing counted yet is 0, as in TF.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetbed.runtime import dtypes as _dt
from hetbed.runtime.graph import GraphKeys, Tensor, add_to_collection, get_default_graph
from hetbed.runtime.ops.array import cast, constant
from hetbed.runtime.ops.math import (
    abs,
    equal,
    greater,
    logical_and,
    logical_not,
    multiply,
    reduce_sum,
    squared_difference,
    truediv,
    where,
    zeros_like,
)
from hetbed.runtime.ops.state import assign_add
from hetbed.runtime.registry import convert_to_tensor
from hetbed.runtime.variables import Variable

__all__ = [
    "accuracy",
    "false_negatives",
    "false_positives",
    "mean",
    "mean_absolute_error",
    "mean_squared_error",
    "precision",
    "recall",
    "true_positives",
]

METRIC_VARIABLES = GraphKeys.METRIC_VARIABLES


def _local(name: str) -> Variable:
    g = get_default_graph()
    with g.control_dependencies(None):
        return Variable(
            constant(np.float32(0.0)),
            trainable=False,
            collections=[GraphKeys.LOCAL_VARIABLES, METRIC_VARIABLES],
            name=name,
        )


def _safe_div(num: Tensor, den: Tensor, name: str) -> Tensor:
    zero = zeros_like(num)
    positive = greater(den, zero)
    return where(positive, truediv(num, where(positive, den, zero + 1.0)), zero, name=name)


def _collect(metrics_collections: Any, updates_collections: Any, value: Any, update: Any) -> None:
    for key in metrics_collections or ():
        add_to_collection(key, value)
    for key in updates_collections or ():
        add_to_collection(key, update)


def _weighted(values: Tensor, weights: Any) -> tuple[Tensor, Tensor]:
    """(sum of values * weights, sum of weights broadcast to values)."""
    if weights is None:
        ones = zeros_like(values) + 1.0
        return reduce_sum(values), reduce_sum(ones)
    w = cast(convert_to_tensor(weights), _dt.float32)
    w = multiply(zeros_like(values) + 1.0, w)  # broadcast to the values' shape
    return reduce_sum(multiply(values, w)), reduce_sum(w)


def _mean(v: Tensor, weights: Any) -> tuple[Tensor, Tensor]:
    total, count = _local("total"), _local("count")
    batch_sum, batch_count = _weighted(v, weights)
    update_total = assign_add(total, batch_sum)
    update_count = assign_add(count, batch_count)
    value = _safe_div(total.value(), count.value(), "value")
    return value, _safe_div(update_total, update_count, "update_op")


def mean(
    values: Any,
    weights: Any = None,
    metrics_collections: Any = None,
    updates_collections: Any = None,
    name: str | None = None,
) -> tuple[Tensor, Tensor]:
    """TF1's ``tf.metrics.mean``: the (weighted) mean of every value seen, from local variables
    ``total`` and ``count``."""
    with get_default_graph().name_scope(name or "mean"):
        value, update = _mean(cast(convert_to_tensor(values), _dt.float32), weights)
    _collect(metrics_collections, updates_collections, value, update)
    return value, update


def accuracy(
    labels: Any,
    predictions: Any,
    weights: Any = None,
    metrics_collections: Any = None,
    updates_collections: Any = None,
    name: str | None = None,
) -> tuple[Tensor, Tensor]:
    """TF1's ``tf.metrics.accuracy``: the (weighted) fraction of ``predictions`` equal to
    ``labels`` over every batch seen."""
    g = get_default_graph()
    with g.name_scope(name or "accuracy"):
        p = convert_to_tensor(predictions)
        lab = convert_to_tensor(labels)
        if lab.dtype != p.dtype:
            lab = cast(lab, p.dtype)
        value, update = _mean(cast(equal(p, lab), _dt.float32), weights)
    _collect(metrics_collections, updates_collections, value, update)
    return value, update


def _count(
    name: str, pick: Any, labels: Any, predictions: Any, weights: Any
) -> tuple[Tensor, Tensor]:
    g = get_default_graph()
    with g.name_scope(name):
        lab = cast(convert_to_tensor(labels), _dt.bool_)
        pred = cast(convert_to_tensor(predictions), _dt.bool_)
        hits = cast(pick(lab, pred), _dt.float32)
        batch, _ = _weighted(hits, weights)
        var = _local("count")
        return var.value(), assign_add(var, batch, name="update_op")


def _tp(lab, pred):
    return logical_and(lab, pred)


def _fp(lab, pred):
    return logical_and(logical_not(lab), pred)


def _fn(lab, pred):
    return logical_and(lab, logical_not(pred))


def _counter(kind: str, pick: Any) -> Any:
    def metric(
        labels: Any,
        predictions: Any,
        weights: Any = None,
        metrics_collections: Any = None,
        updates_collections: Any = None,
        name: str | None = None,
    ) -> tuple[Tensor, Tensor]:
        value, update = _count(name or kind, pick, labels, predictions, weights)
        _collect(metrics_collections, updates_collections, value, update)
        return value, update

    metric.__name__ = kind
    metric.__doc__ = (
        f"TF1's ``tf.metrics.{kind}``: the (weighted) count, labels and predictions as bool."
    )
    return metric


true_positives = _counter("true_positives", _tp)
false_positives = _counter("false_positives", _fp)
false_negatives = _counter("false_negatives", _fn)


def _ratio(
    kind: str,
    other_name: str,
    other: Any,
    labels,
    predictions,
    weights,
    metrics_collections,
    updates_collections,
    name,
) -> tuple[Tensor, Tensor]:
    g = get_default_graph()
    with g.name_scope(name or kind):
        tp, tp_up = _count("true_positives", _tp, labels, predictions, weights)
        ot, ot_up = _count(other_name, other, labels, predictions, weights)
        value = _safe_div(tp, tp + ot, "value")
        update = _safe_div(tp_up, tp_up + ot_up, "update_op")
    _collect(metrics_collections, updates_collections, value, update)
    return value, update


def precision(
    labels: Any,
    predictions: Any,
    weights: Any = None,
    metrics_collections: Any = None,
    updates_collections: Any = None,
    name: str | None = None,
) -> tuple[Tensor, Tensor]:
    """TF1's ``tf.metrics.precision``: true_positives / (true_positives + false_positives)."""
    return _ratio(
        "precision", "false_positives", _fp, labels, predictions, weights, metrics_collections,
        updates_collections, name,
    )  # fmt: skip


def recall(
    labels: Any,
    predictions: Any,
    weights: Any = None,
    metrics_collections: Any = None,
    updates_collections: Any = None,
    name: str | None = None,
) -> tuple[Tensor, Tensor]:
    """TF1's ``tf.metrics.recall``: true_positives / (true_positives + false_negatives)."""
    return _ratio(
        "recall", "false_negatives", _fn, labels, predictions, weights, metrics_collections,
        updates_collections, name,
    )  # fmt: skip


def mean_absolute_error(
    labels: Any,
    predictions: Any,
    weights: Any = None,
    metrics_collections: Any = None,
    updates_collections: Any = None,
    name: str | None = None,
) -> tuple[Tensor, Tensor]:
    """TF1's ``tf.metrics.mean_absolute_error``: the mean of |predictions - labels|."""
    p = cast(convert_to_tensor(predictions), _dt.float32)
    lab = cast(convert_to_tensor(labels), _dt.float32)
    return mean(
        abs(p - lab), weights, metrics_collections, updates_collections,
        name or "mean_absolute_error",
    )  # fmt: skip


def mean_squared_error(
    labels: Any,
    predictions: Any,
    weights: Any = None,
    metrics_collections: Any = None,
    updates_collections: Any = None,
    name: str | None = None,
) -> tuple[Tensor, Tensor]:
    """TF1's ``tf.metrics.mean_squared_error``: the mean of (predictions - labels)^2."""
    p = cast(convert_to_tensor(predictions), _dt.float32)
    lab = cast(convert_to_tensor(labels), _dt.float32)
    return mean(
        squared_difference(p, lab), weights, metrics_collections, updates_collections,
        name or "mean_squared_error",
    )  # fmt: skip
