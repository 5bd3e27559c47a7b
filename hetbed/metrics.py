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
    "auc",
    "false_negatives",
    "false_positives",
    "mean",
    "mean_absolute_error",
    "mean_iou",
    "mean_squared_error",
    "precision",
    "recall",
    "root_mean_squared_error",
    "true_positives",
]

METRIC_VARIABLES = GraphKeys.METRIC_VARIABLES


def _local(name: str, shape: tuple = (), dtype: Any = np.float32) -> Variable:
    g = get_default_graph()
    with g.control_dependencies(None):
        return Variable(
            constant(np.zeros(shape, dtype)),
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


def _squeezed(labels: Any, predictions: Any, weights: Any = None) -> tuple:
    """TF's ``_remove_squeezable_dimensions``: labels and predictions whose ranks differ by one
    lose the other's last dimension of size 1 ([N, 1] against [N]); weights one rank above the
    predictions lose their last dimension, one below gain one."""
    from hetbed.runtime.ops.manip import expand_dims, squeeze

    p = convert_to_tensor(predictions)
    lab = None if labels is None else convert_to_tensor(labels)
    if lab is not None and p.shape.ndims is not None and lab.shape.ndims is not None:
        gap = p.shape.ndims - lab.shape.ndims
        if gap == 1 and p.shape.as_list()[-1] == 1:
            p = squeeze(p, [-1])
        elif gap == -1 and lab.shape.as_list()[-1] == 1:
            lab = squeeze(lab, [-1])
    if weights is None:
        return lab, p, None
    w = convert_to_tensor(weights)
    if w.shape.ndims not in (None, 0) and p.shape.ndims is not None:
        gap = w.shape.ndims - p.shape.ndims
        if gap == 1:
            w = squeeze(w, [-1])
        elif gap == -1:
            w = expand_dims(w, -1)
    return lab, p, w


def _weighted(values: Tensor, weights: Any) -> tuple[Tensor, Tensor]:
    """(sum of values * weights, sum of weights broadcast to values)."""
    if weights is None:
        ones = zeros_like(values) + 1.0
        return reduce_sum(values), reduce_sum(ones)
    w = _broadcast_weights(values, weights)
    return reduce_sum(multiply(values, w)), reduce_sum(w)


def _broadcast_weights(values: Tensor, weights: Any) -> Tensor:
    """``weights`` as TF's metrics take them: one rank above the values, their last dimension
    dropped, one below, one added; then broadcast to the values' shape (a weight shape that
    does not broadcast is refused)."""
    _, values, w = _squeezed(None, values, weights)
    w = cast(w, _dt.float32)
    if w.shape.ndims is not None and values.shape.ndims is not None:
        if w.shape.ndims > values.shape.ndims or any(
            a is not None and b is not None and a != b and a != 1
            for a, b in zip(reversed(w.shape.as_list()), reversed(values.shape.as_list()))
        ):
            raise ValueError(
                f"weights of shape {w.shape} cannot be broadcast to the values' {values.shape}"
            )
    return multiply(zeros_like(values) + 1.0, w)


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
    ``labels`` over every batch seen (predictions of another dtype are cast to the labels',
    as TF casts them: int class ids against float labels 0.7 never match)."""
    g = get_default_graph()
    with g.name_scope(name or "accuracy"):
        lab, p, weights = _squeezed(labels, predictions, weights)
        if lab.dtype != p.dtype:
            p = cast(p, lab.dtype)
        value, update = _mean(cast(equal(p, lab), _dt.float32), weights)
    _collect(metrics_collections, updates_collections, value, update)
    return value, update


def _count(
    name: str, pick: Any, labels: Any, predictions: Any, weights: Any
) -> tuple[Tensor, Tensor]:
    g = get_default_graph()
    with g.name_scope(name):
        labels, predictions, weights = _squeezed(labels, predictions, weights)
        lab = cast(labels, _dt.bool_)
        pred = cast(predictions, _dt.bool_)
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
    labels, predictions, weights = _squeezed(labels, predictions, weights)
    p = cast(predictions, _dt.float32)
    lab = cast(labels, _dt.float32)
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
    labels, predictions, weights = _squeezed(labels, predictions, weights)
    p = cast(predictions, _dt.float32)
    lab = cast(labels, _dt.float32)
    return mean(
        squared_difference(p, lab), weights, metrics_collections, updates_collections,
        name or "mean_squared_error",
    )  # fmt: skip


def root_mean_squared_error(
    labels: Any,
    predictions: Any,
    weights: Any = None,
    metrics_collections: Any = None,
    updates_collections: Any = None,
    name: str | None = None,
) -> tuple[Tensor, Tensor]:
    """TF1's: the square root of ``mean_squared_error``'s value and update."""
    from hetbed.runtime.ops.math import sqrt

    with get_default_graph().name_scope(name or "root_mean_squared_error"):
        mse, update = mean_squared_error(labels, predictions, weights)
        value, update = sqrt(mse), sqrt(update)
    _collect(metrics_collections, updates_collections, value, update)
    return value, update


def mean_iou(
    labels: Any,
    predictions: Any,
    num_classes: int,
    weights: Any = None,
    metrics_collections: Any = None,
    updates_collections: Any = None,
    name: str | None = None,
) -> tuple[Tensor, Tensor]:
    """TF1's: the mean over classes of intersection over union, TP / (TP + FP + FN), from a
    streaming ``[num_classes, num_classes]`` confusion matrix (local variable
    ``total_confusion_matrix``, float64); classes never seen in labels or predictions are left
    out of the mean. ``update_op`` returns the updated confusion matrix, as TF's."""
    import hetbed.compat.v1 as _tf

    with get_default_graph().name_scope(name or "mean_iou"):
        total = _local("total_confusion_matrix", (int(num_classes), int(num_classes)), np.float64)
        lab = _tf.reshape(cast(convert_to_tensor(labels), _dt.int64), [-1])
        pred = _tf.reshape(cast(convert_to_tensor(predictions), _dt.int64), [-1])
        w = None if weights is None else _tf.reshape(convert_to_tensor(weights), [-1])
        cm = _tf.confusion_matrix(lab, pred, int(num_classes), _dt.float64, weights=w)
        update = assign_add(total, cm)
        m = total.value()
        rows = cast(reduce_sum(m, 0), _dt.float32)
        cols = cast(reduce_sum(m, 1), _dt.float32)
        diag = cast(_tf.diag_part(m), _dt.float32)
        den = rows + cols - diag
        valid = reduce_sum(cast(greater(den, 0.0), _dt.float32))
        iou = truediv(diag, where(greater(den, 0.0), den, zeros_like(den) + 1.0))
        value = where(
            greater(valid, 0.0), reduce_sum(iou) / where(greater(valid, 0.0), valid, 1.0), 0.0
        )
    _collect(metrics_collections, updates_collections, value, update)
    return value, update


def _in_unit_range(predictions: Any) -> Tensor:
    """Predictions as float32, with TF's check that each is in [0, 1] (a NaN is not) when the
    step runs."""
    import hetbed.compat.v1 as _tf

    p = cast(convert_to_tensor(predictions), _dt.float32)
    ok = _tf.logical_and(_tf.reduce_all(p >= 0.0), _tf.reduce_all(p <= 1.0))
    check = _tf.Assert(ok, ["predictions must be in [0, 1]"], name="assert_in_unit_range")
    with get_default_graph().control_dependencies([check]):
        return _tf.identity(p)


def auc(
    labels: Any,
    predictions: Any,
    weights: Any = None,
    num_thresholds: int = 200,
    metrics_collections: Any = None,
    updates_collections: Any = None,
    curve: str = "ROC",
    name: str | None = None,
    summation_method: str = "trapezoidal",
    thresholds: Any = None,
) -> tuple[Tensor, Tensor]:
    """TF1's: the area under the ROC (or precision-recall, ``curve="PR"``) curve by a Riemann
    sum over ``num_thresholds`` thresholds evenly spaced in [0, 1] (or the given
    ``thresholds``), from streaming true/false positive/negative counts at each threshold
    (local variables); ``summation_method`` "trapezoidal", "minoring" or "majoring".
    Predictions are probabilities in [0, 1]; labels are taken as booleans."""
    import hetbed.compat.v1 as _tf

    if curve not in ("ROC", "PR"):
        raise ValueError(f"auc: curve must be 'ROC' or 'PR', got {curve!r}")
    if summation_method not in ("trapezoidal", "minoring", "majoring"):
        raise ValueError(
            "auc: summation_method must be 'trapezoidal', 'minoring' or 'majoring', got "
            f"{summation_method!r} ('careful_interpolation' is not supported)"
        )
    if thresholds is not None:
        inner = sorted(float(t) for t in thresholds)
    else:
        if int(num_thresholds) < 2:
            raise ValueError(f"auc: num_thresholds must be > 1, got {num_thresholds}")
        n = int(num_thresholds)
        inner = [(i + 1) * 1.0 / (n - 1) for i in range(n - 2)]
    eps = 1e-7
    cuts = np.asarray([0.0 - eps, *inner, 1.0 + eps], np.float32)
    t = len(cuts)
    with get_default_graph().name_scope(name or "auc"):
        p = _tf.reshape(_in_unit_range(predictions), [-1, 1])
        lab = _tf.reshape(cast(convert_to_tensor(labels), _dt.bool_), [-1, 1])
        pos = greater(p, constant(cuts.reshape(1, t)))  # [N, T]
        lab = logical_and(lab, constant(np.ones((1, t), bool)))  # (broadcast to [N, T])
        w = (
            None
            if weights is None
            else _tf.reshape(cast(convert_to_tensor(weights), _dt.float32), [-1, 1])
        )
        counts, updates = {}, {}
        for key, hit in (
            ("tp", logical_and(lab, pos)),
            ("fn", logical_and(lab, logical_not(pos))),
            ("tn", logical_and(logical_not(lab), logical_not(pos))),
            ("fp", logical_and(logical_not(lab), pos)),
        ):
            var = _local({"tp": "true_positives", "fn": "false_negatives",
                          "tn": "true_negatives", "fp": "false_positives"}[key], (t,))  # fmt: skip
            x = cast(hit, _dt.float32)
            if w is not None:
                x = multiply(x, w)
            counts[key], updates[key] = var.value(), assign_add(var, reduce_sum(x, 0))

        def area(c: dict, label: str) -> Tensor:
            e = 1.0e-6
            rec = truediv(c["tp"] + e, c["tp"] + c["fn"] + e)
            if curve == "ROC":
                x, y = truediv(c["fp"], c["fp"] + c["tn"] + e), rec
            else:
                x, y = rec, truediv(c["tp"] + e, c["tp"] + c["fp"] + e)
            dx = x[: t - 1] - x[1:]
            if summation_method == "trapezoidal":
                h = (y[: t - 1] + y[1:]) / 2.0
            elif summation_method == "minoring":
                h = _tf.minimum(y[: t - 1], y[1:])
            else:
                h = _tf.maximum(y[: t - 1], y[1:])
            return reduce_sum(multiply(dx, h), name=label)

        value, update = area(counts, "value"), area(updates, "update_op")
    _collect(metrics_collections, updates_collections, value, update)
    return value, update


# ranking metrics (metrics_at_k.py), imported last: that module builds on the helpers above
from .metrics_at_k import *  # noqa: E402, F403
from .metrics_at_k import __all__ as _at_k_all  # noqa: E402

__all__ += _at_k_all

# more of tf.metrics (metrics_extra.py), on the same helpers
from .metrics_extra import *  # noqa: E402, F403
from .metrics_extra import __all__ as _extra_all  # noqa: E402

__all__ += _extra_all
