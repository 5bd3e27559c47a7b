"""TF1's ranking metrics: ``tf.metrics.precision_at_k``, ``recall_at_k``, their ``_at_top_k``
forms (given the top-k class ids) and ``average_precision_at_k``, streaming over local float64
variables as TF's are.

Each row of ``predictions`` ([D1, ... DN, num_classes] scores, or [D1, ... DN, k] class ids for
the ``_at_top_k`` forms) is compared with the set of its labels ([D1, ... DN, num_labels] or
[D1, ... DN] int ids, or a SparseTensor). As in TF, a row's labels are a set (repeats count
once), a dense row's every entry is a label (so an out-of-range id such as -1 padding is a label
that is never retrieved: a false negative for recall), and with ``class_id`` only that class
counts. precision = TP / (TP + FP) and recall = TP / (TP + FN) are NaN before anything is
counted, as TF's are; the mean average precision is 0 then. A row's average precision divides
by min(k, its number of labels): a sparse row's distinct labels, a dense row's non-negative
entries (TF's rule; labels >= num_classes count as -1 there), so a dense row with none is NaN.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetbed.runtime import dtypes as _dt
from hetbed.runtime.errors import InvalidArgumentError
from hetbed.runtime.graph import Tensor, TensorShape, get_default_graph
from hetbed.runtime.registry import apply, convert_to_tensor, defop

from .metrics import _collect, _local

TopKSetCounts = defop("TopKSetCounts", differentiable=False)


@TopKSetCounts.shape
def _counts_shape(op):
    rows = op.inputs[1].shape.as_list()[0] if op.inputs[1].shape.ndims == 2 else None
    return [(TensorShape([rows]), _dt.float64)] * 4


@TopKSetCounts.kernel("cpu")
def _counts(ctx, labels, valid, top):
    """Per row: TP = |T & S|, FP = |T - S|, FN = |S - T| and the average precision of the
    ranked ids T against the label set S."""
    labels, valid, top = np.asarray(labels), np.asarray(valid, bool), np.asarray(top)
    if labels.shape[0] != top.shape[0]:
        raise InvalidArgumentError(
            f"TopKSetCounts {ctx.op.name!r}: {labels.shape[0]} rows of labels but "
            f"{top.shape[0]} rows of predictions"
        )
    cid = ctx.attrs["class_id"]
    k = top.shape[1]
    rows = top.shape[0]
    tp, fp, fn, ap = (np.zeros(rows) for _ in range(4))
    for r in range(rows):
        s = set(labels[r][valid[r]].tolist())
        ranked = top[r].tolist()
        if cid is not None:
            s &= {cid}
            ranked_set = {cid} & set(ranked)
        else:
            ranked_set = set(ranked)
        tp[r] = len(ranked_set & s)
        fp[r] = len(ranked_set - s)
        fn[r] = len(s - ranked_set)
        if ctx.attrs["average_precision"]:
            rel = np.array([t in s for t in ranked], np.float64)
            prec = np.cumsum(rel) / np.arange(1, k + 1)
            row = labels[r][valid[r]]
            n_rel = min(len(set(row.tolist())) if ctx.attrs["sparse"] else int((row >= 0).sum()), k)
            with np.errstate(divide="ignore", invalid="ignore"):
                ap[r] = np.sum(prec * rel) / np.float64(n_rel)
    return tp, fp, fn, ap


def _rows(fn: str, labels: Any, top: Tensor, n_classes: Any) -> tuple:
    """(labels [R, L] int64, valid [R, L] bool, top [R, k] int64, leading shape tensor)."""
    import hetbed.compat.v1 as _tf
    from hetbed.runtime.ops.sparse import SparseTensor

    top = _tf.cast(top, _dt.int64)
    lead = _tf.shape(top)[:-1]
    k = top.shape.as_list()[-1] if top.shape.ndims else None
    if k is None:
        raise InvalidArgumentError(f"{fn}: the number of predicted ids k must be static")
    if isinstance(labels, SparseTensor) or (
        hasattr(labels, "indices") and hasattr(labels, "dense_shape")
    ):
        sp = SparseTensor(labels.indices, labels.values, labels.dense_shape)
        values = _tf.cast(sp.values, _dt.int64)
        if n_classes is not None:
            values = _tf.where(values >= n_classes, -_tf.ones_like(values), values)
        dense = _tf.sparse_tensor_to_dense(SparseTensor(sp.indices, values, sp.dense_shape), -1)
        valid = _tf.sparse_tensor_to_dense(
            SparseTensor(sp.indices, _tf.ones_like(values, _dt.bool_), sp.dense_shape), False
        )
        sparse = True
    else:
        dense = _tf.cast(convert_to_tensor(labels), _dt.int64)
        if dense.shape.ndims is not None and dense.shape.ndims == top.shape.ndims - 1:
            dense = _tf.expand_dims(dense, -1)
        if n_classes is not None:
            dense = _tf.where(dense >= n_classes, -_tf.ones_like(dense), dense)
        valid = _tf.ones_like(dense, _dt.bool_)
        sparse = False
    flat = [_tf.reshape(dense, [-1, _tf.shape(dense)[-1]])]
    flat.append(_tf.reshape(valid, [-1, _tf.shape(valid)[-1]]))
    flat.append(_tf.reshape(top, [-1, k]))
    return (*flat, lead, sparse)


def _per_row(fn, labels, top, class_id, weights, n_classes=None, average=False):
    import hetbed.compat.v1 as _tf

    lab, valid, top2, lead, sparse = _rows(fn, labels, top, n_classes)
    attrs = {"class_id": None if class_id is None else int(class_id)}
    attrs |= {"average_precision": bool(average), "sparse": sparse}
    tp, fp, fneg, ap = apply("TopKSetCounts", [lab, valid, top2], attrs, "counts")
    if weights is None:
        return tp, fp, fneg, ap, None
    w = _tf.cast(convert_to_tensor(weights), _dt.float64)
    w = _tf.reshape(w + _tf.zeros(lead, _dt.float64), [-1])  # broadcast to the rows
    return tp * w, fp * w, fneg * w, ap * w, w


def _top_k_ids(predictions: Any, k: int) -> Tensor:
    import hetbed.compat.v1 as _tf

    if int(k) < 1:
        raise ValueError(f"invalid k={k}")
    _, idx = _tf.nn.top_k(convert_to_tensor(predictions), int(k))
    return idx


def _at_top_k(kind, labels, top, k, class_id, weights, mcol, ucol, name, n_classes=None):
    import hetbed.compat.v1 as _tf

    other = "false_positive" if kind == "precision" else "false_negative"
    with get_default_graph().name_scope(name or f"{kind}_at_top_k"):
        tp, fp, fneg, _, _ = _per_row(f"{kind}_at_k", labels, top, class_id, weights)
        miss = fp if kind == "precision" else fneg
        tp_var, miss_var = _local("true_positive", (), np.float64), _local(other, (), np.float64)
        tp_up = _tf.assign_add(tp_var, _tf.reduce_sum(tp), name="true_positive_update")
        miss_up = _tf.assign_add(miss_var, _tf.reduce_sum(miss), name=f"{other}_update")
        t, m = tp_var.value(), miss_var.value()
        value = _tf.truediv(t, t + m, name="value")
        update = _tf.truediv(tp_up, tp_up + miss_up, name="update")
    _collect(mcol, ucol, value, update)
    return value, update


def precision_at_top_k(
    labels: Any,
    predictions_idx: Any,
    k: int | None = None,
    class_id: int | None = None,
    weights: Any = None,
    metrics_collections: Any = None,
    updates_collections: Any = None,
    name: str | None = None,
) -> tuple[Tensor, Tensor]:
    """TF1's: precision of the given top-k class ids ``predictions_idx`` against the labels."""
    return _at_top_k(
        "precision", labels, predictions_idx, k, class_id, weights, metrics_collections,
        updates_collections, name,
    )  # fmt: skip


def recall_at_top_k(
    labels: Any,
    predictions_idx: Any,
    k: int | None = None,
    class_id: int | None = None,
    weights: Any = None,
    metrics_collections: Any = None,
    updates_collections: Any = None,
    name: str | None = None,
) -> tuple[Tensor, Tensor]:
    """TF1's: recall of the labels by the given top-k class ids ``predictions_idx``."""
    return _at_top_k(
        "recall", labels, predictions_idx, k, class_id, weights, metrics_collections,
        updates_collections, name,
    )  # fmt: skip


def precision_at_k(
    labels: Any,
    predictions: Any,
    k: int,
    class_id: int | None = None,
    weights: Any = None,
    metrics_collections: Any = None,
    updates_collections: Any = None,
    name: str | None = None,
) -> tuple[Tensor, Tensor]:
    """TF1's ``tf.metrics.precision_at_k``: of the k highest-scored classes of each row, the
    fraction that are among its labels, over every batch seen (float64)."""
    with get_default_graph().name_scope(name or f"precision_at_{k}"):
        return precision_at_top_k(
            labels, _top_k_ids(predictions, k), k, class_id, weights, metrics_collections,
            updates_collections, "precision_at_top_k",
        )  # fmt: skip


def recall_at_k(
    labels: Any,
    predictions: Any,
    k: int,
    class_id: int | None = None,
    weights: Any = None,
    metrics_collections: Any = None,
    updates_collections: Any = None,
    name: str | None = None,
) -> tuple[Tensor, Tensor]:
    """TF1's ``tf.metrics.recall_at_k``: of each row's labels, the fraction among its k
    highest-scored classes, over every batch seen (float64)."""
    with get_default_graph().name_scope(name or f"recall_at_{k}"):
        return recall_at_top_k(
            labels, _top_k_ids(predictions, k), k, class_id, weights, metrics_collections,
            updates_collections, "recall_at_top_k",
        )  # fmt: skip


def average_precision_at_k(
    labels: Any,
    predictions: Any,
    k: int,
    weights: Any = None,
    metrics_collections: Any = None,
    updates_collections: Any = None,
    name: str | None = None,
) -> tuple[Tensor, Tensor]:
    """TF1's ``tf.metrics.average_precision_at_k``: the mean over rows (weighted) of each row's
    average precision of its k highest-scored classes: the sum of precision@i at each rank i
    that retrieves a label, over min(k, number of labels). Labels >= num_classes are ignored."""
    import hetbed.compat.v1 as _tf

    with get_default_graph().name_scope(name or f"average_precision_at_{k}"):
        pred = convert_to_tensor(predictions)
        n_classes = _tf.cast(_tf.shape(pred)[-1], _dt.int64)
        top = _top_k_ids(pred, k)
        _, _, _, ap, w = _per_row(
            "average_precision_at_k", labels, top, None, weights, n_classes, average=True
        )
        total, most = _local("total", (), np.float64), _local("max", (), np.float64)
        batch_max = _tf.cast(_tf.size(ap), _dt.float64) if w is None else _tf.reduce_sum(w)
        total_up = _tf.assign_add(total, _tf.reduce_sum(ap), name="total_update")
        max_up = _tf.assign_add(most, batch_max, name="max_update")

        def safe(a: Tensor, b: Tensor, nm: str) -> Tensor:
            ok = _tf.greater(b, 0.0)
            return _tf.where(
                ok, _tf.truediv(a, _tf.where(ok, b, _tf.ones_like(b))), 0.0 * a, name=nm
            )

        value = safe(total.value(), most.value(), "value")
        update = safe(total_up, max_up, "update")
    _collect(metrics_collections, updates_collections, value, update)
    return value, update


sparse_precision_at_k = precision_at_k
sparse_average_precision_at_k = average_precision_at_k

__all__ = [
    "average_precision_at_k",
    "precision_at_k",
    "precision_at_top_k",
    "recall_at_k",
    "recall_at_top_k",
    "sparse_average_precision_at_k",
    "sparse_precision_at_k",
]
