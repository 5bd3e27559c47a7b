"""TF1's ``tf.contrib.losses.metric_learning`` (TF 1.15's ``metric_loss_ops``): losses over
embeddings and labels, built from graph ops so that their gradients are the ops' (as TF's).

- ``pairwise_distance(feature, squared=False)``: ``[n, n]`` euclidean (or squared) distances,
  negatives from rounding set to 0, exact zeros on the diagonal and where the squared distance
  is 0 (whose gradient is then 0, as TF's).
- ``triplet_semihard_loss(labels, embeddings, margin=1.0)``: over every positive pair (a, p),
  ``max(margin + d(a, p) - d(a, n), 0)`` with ``n`` the closest negative farther than ``p``,
  or the farthest negative when there is none; squared distances; mean over positive pairs.
- ``lifted_struct_loss(labels, embeddings, margin=1.0)``: the lifted structured loss (log-sum-exp
  over each pair's negatives, the Caffe layer's max shift).
- ``npairs_loss(labels, embeddings_anchor, embeddings_positive, reg_lambda=0.002,
  print_losses=False)`` and ``npairs_loss_multilabel(sparse_labels, ...)``: softmax cross
  entropy of anchor-positive similarities against the row-normalized label agreement, plus
  ``0.25 * reg_lambda`` times the mean squared norms; ``sparse_labels`` is a list of
  SparseTensors, one per pair, agreement ``sum(minimum(l_i, l_j))``.
- ``contrastive_loss(labels, embeddings_anchor, embeddings_positive, margin=1.0)``: mean of
  ``y d^2 + (1 - y) max(margin - d, 0)^2``.
- ``masked_maximum``/``masked_minimum``: row-wise max/min over the entries a mask selects.

- ``cluster_loss(labels, embeddings, margin_multiplier, enable_pam_finetuning=True,
  margin_type='nmi')``: Song et al.'s structured facility-location loss, ``max(F(pred) +
  margin (1 - score(labels, pred)) - F(labels), 0)`` with ``F`` minus the summed distance of the
  points to their medoids. The medoids (TF's greedy loss-augmented choice, then its PAM passes)
  and the clustering score (scikit-learn's ``nmi``, ``ami``, ``ari``, ``vmeasure``, or
  ``const``) are chosen by a kernel from the distances' values, as TF's ``py_func``s and loops
  choose them; the distances then enter the loss through graph ops, so its gradient is TF's
  (to the minimal entries).
"""

from __future__ import annotations

from typing import Any

import hetbed as _hb
from hetbed.runtime import dtypes as _dt
from hetbed.runtime.errors import InvalidArgumentError
from hetbed.runtime.graph import TensorShape
from hetbed.runtime.registry import apply, defop


def _f32(x: Any) -> Any:
    return _hb.cast(x, _dt.float32)


def _labels_column(labels: Any, fn: str) -> Any:
    labels = _hb.convert_to_tensor(labels)
    if labels.shape.ndims not in (None, 1):
        raise ValueError(f"{fn}: labels must be 1-D [batch_size], got shape {labels.shape}")
    return _hb.reshape(labels, [_hb.shape(labels)[0], 1])


def _matrix(x: Any, what: str, fn: str) -> Any:
    x = _hb.convert_to_tensor(x)
    if x.shape.ndims not in (None, 2):
        raise ValueError(f"{fn}: {what} must be 2-D [batch_size, dim], got shape {x.shape}")
    return x


def pairwise_distance(feature: Any, squared: bool = False) -> Any:
    """``[n, n]`` distances between the rows of ``feature`` (see the module docstring)."""
    feature = _matrix(feature, "feature", "pairwise_distance")
    sq = _hb.add(
        _hb.reduce_sum(_hb.square(feature), axis=[1], keepdims=True),
        _hb.reduce_sum(_hb.square(_hb.transpose(feature)), axis=[0], keepdims=True),
    ) - 2.0 * _hb.matmul(feature, _hb.transpose(feature))
    sq = _hb.maximum(sq, 0.0)
    error_mask = _hb.less_equal(sq, 0.0)
    if squared:
        dist = sq
    else:
        dist = _hb.sqrt(sq + _f32(error_mask) * 1e-16)
    dist = _hb.multiply(dist, _f32(_hb.logical_not(error_mask)))
    num_data = _hb.shape(feature)[0]
    offdiag = _hb.ones_like(dist) - _hb.matrix_diag(_hb.ones([num_data]))
    return _hb.multiply(dist, offdiag)


def masked_maximum(data: Any, mask: Any, dim: int = 1) -> Any:
    """The maximum along ``dim`` of the entries ``mask`` selects (dimension kept, size 1)."""
    mins = _hb.reduce_min(data, dim, keepdims=True)
    return _hb.reduce_max(_hb.multiply(data - mins, mask), dim, keepdims=True) + mins


def masked_minimum(data: Any, mask: Any, dim: int = 1) -> Any:
    """The minimum along ``dim`` of the entries ``mask`` selects (dimension kept, size 1)."""
    maxs = _hb.reduce_max(data, dim, keepdims=True)
    return _hb.reduce_min(_hb.multiply(data - maxs, mask), dim, keepdims=True) + maxs


def contrastive_loss(
    labels: Any, embeddings_anchor: Any, embeddings_positive: Any, margin: float = 1.0
) -> Any:
    """Mean over pairs of ``y d^2 + (1 - y) max(margin - d, 0)^2`` (``y`` 1 for a positive
    pair), ``d`` the euclidean distance between anchor and positive rows."""
    a = _matrix(embeddings_anchor, "embeddings_anchor", "contrastive_loss")
    p = _matrix(embeddings_positive, "embeddings_positive", "contrastive_loss")
    d = _hb.sqrt(_hb.reduce_sum(_hb.square(a - p), 1))
    y = _f32(labels)
    return _hb.reduce_mean(
        y * _hb.square(d) + (1.0 - y) * _hb.square(_hb.maximum(margin - d, 0.0)),
        name="contrastive_loss",
    )


def triplet_semihard_loss(labels: Any, embeddings: Any, margin: float = 1.0) -> Any:
    """The triplet loss with semi-hard negatives (see the module docstring)."""
    labels = _labels_column(labels, "triplet_semihard_loss")
    embeddings = _matrix(embeddings, "embeddings", "triplet_semihard_loss")
    pdist = pairwise_distance(embeddings, squared=True)
    adjacency = _hb.equal(labels, _hb.transpose(labels))
    adjacency_not = _hb.logical_not(adjacency)
    batch_size = _hb.size(labels)
    pdist_tile = _hb.tile(pdist, [batch_size, 1])
    mask = _hb.logical_and(
        _hb.tile(adjacency_not, [batch_size, 1]),
        _hb.greater(pdist_tile, _hb.reshape(_hb.transpose(pdist), [-1, 1])),
    )
    mask_final = _hb.reshape(
        _hb.greater(_hb.reduce_sum(_f32(mask), 1, keepdims=True), 0.0), [batch_size, batch_size]
    )
    mask_final = _hb.transpose(mask_final)
    adjacency_not = _f32(adjacency_not)
    mask = _f32(mask)
    negatives_outside = _hb.reshape(masked_minimum(pdist_tile, mask), [batch_size, batch_size])
    negatives_outside = _hb.transpose(negatives_outside)
    negatives_inside = _hb.tile(masked_maximum(pdist, adjacency_not), [1, batch_size])
    semi_hard = _hb.where(mask_final, negatives_outside, negatives_inside)
    loss_mat = _hb.add(margin, pdist - semi_hard)
    mask_positives = _f32(adjacency) - _hb.matrix_diag(_hb.ones([batch_size]))
    num_positives = _hb.reduce_sum(mask_positives)
    return _hb.truediv(
        _hb.reduce_sum(_hb.maximum(_hb.multiply(loss_mat, mask_positives), 0.0)),
        num_positives,
        name="triplet_semihard_loss",
    )


def lifted_struct_loss(labels: Any, embeddings: Any, margin: float = 1.0) -> Any:
    """The lifted structured loss (see the module docstring)."""
    labels = _labels_column(labels, "lifted_struct_loss")
    embeddings = _matrix(embeddings, "embeddings", "lifted_struct_loss")
    pdist = pairwise_distance(embeddings)
    adjacency = _hb.equal(labels, _hb.transpose(labels))
    adjacency_not = _hb.logical_not(adjacency)
    batch_size = _hb.size(labels)
    diff = margin - pdist
    mask = _f32(adjacency_not)
    row_min = _hb.reduce_min(diff, 1, keepdims=True)
    row_neg_max = _hb.reduce_max(_hb.multiply(diff - row_min, mask), 1, keepdims=True) + row_min
    max_elements = _hb.maximum(row_neg_max, _hb.transpose(row_neg_max))
    diff_tiled = _hb.tile(diff, [batch_size, 1])
    mask_tiled = _hb.tile(mask, [batch_size, 1])
    max_vect = _hb.reshape(_hb.transpose(max_elements), [-1, 1])
    exp_left = _hb.reshape(
        _hb.reduce_sum(_hb.multiply(_hb.exp(diff_tiled - max_vect), mask_tiled), 1, keepdims=True),
        [batch_size, batch_size],
    )
    loss_mat = max_elements + _hb.log(exp_left + _hb.transpose(exp_left))
    loss_mat += pdist
    mask_positives = _f32(adjacency) - _hb.matrix_diag(_hb.ones([batch_size]))
    num_positives = _hb.reduce_sum(mask_positives) / 2.0
    return _hb.truediv(
        0.25 * _hb.reduce_sum(_hb.square(_hb.maximum(_hb.multiply(loss_mat, mask_positives), 0.0))),
        num_positives,
        name="liftedstruct_loss",
    )


def _npairs(
    labels_remapped: Any, anchor: Any, positive: Any, reg_lambda: float, print_losses: bool
) -> Any:
    reg_anchor = _hb.reduce_mean(_hb.reduce_sum(_hb.square(anchor), 1))
    reg_positive = _hb.reduce_mean(_hb.reduce_sum(_hb.square(positive), 1))
    l2loss = _hb.multiply(0.25 * reg_lambda, reg_anchor + reg_positive, name="l2loss")
    similarity = _hb.matmul(anchor, positive, transpose_a=False, transpose_b=True)
    labels_remapped = labels_remapped / _hb.reduce_sum(labels_remapped, 1, keepdims=True)
    xent = _hb.nn.softmax_cross_entropy_with_logits(logits=similarity, labels=labels_remapped)
    xent = _hb.reduce_mean(xent, name="xentropy")
    if print_losses:
        xent = _hb.Print(xent, ["cross entropy:", xent, "l2loss:", l2loss])
    return l2loss + xent


def npairs_loss(
    labels: Any,
    embeddings_anchor: Any,
    embeddings_positive: Any,
    reg_lambda: float = 0.002,
    print_losses: bool = False,
) -> Any:
    """The npairs loss (see the module docstring); ``labels`` ``[batch_size / 2]``."""
    anchor = _matrix(embeddings_anchor, "embeddings_anchor", "npairs_loss")
    positive = _matrix(embeddings_positive, "embeddings_positive", "npairs_loss")
    labels = _labels_column(labels, "npairs_loss")
    remapped = _f32(_hb.equal(labels, _hb.transpose(labels)))
    return _npairs(remapped, anchor, positive, reg_lambda, print_losses)


def npairs_loss_multilabel(
    sparse_labels: Any,
    embeddings_anchor: Any,
    embeddings_positive: Any,
    reg_lambda: float = 0.002,
    print_losses: bool = False,
) -> Any:
    """The npairs loss with several labels per pair: ``sparse_labels`` a list of
    SparseTensors (one per pair, all of one dense shape), agreement ``sum(min(l_i, l_j))``."""
    if not isinstance(sparse_labels, (list, tuple)) or not all(
        isinstance(lab, _hb.SparseTensor) for lab in sparse_labels
    ):
        raise TypeError(f"sparse_labels must be a list of SparseTensors, but got {sparse_labels}")
    with _hb.name_scope("NpairsLossMultiLabel"):
        anchor = _matrix(embeddings_anchor, "embeddings_anchor", "npairs_loss_multilabel")
        positive = _matrix(embeddings_positive, "embeddings_positive", "npairs_loss_multilabel")
        dense = _hb.stack(
            [_hb.reshape(_f32(_hb.sparse_tensor_to_dense(lab)), [-1]) for lab in sparse_labels]
        )  # [pairs, entries]
        adjacency = _hb.reduce_sum(
            _hb.minimum(_hb.expand_dims(dense, 1), _hb.expand_dims(dense, 0)), 2
        )
        return _npairs(adjacency, anchor, positive, reg_lambda, print_losses)


# ---- cluster_loss -------------------------------------------------------------------------------

_MARGIN_TYPES = ("nmi", "ami", "ari", "vmeasure", "const")


def _clustering_score(labels: Any, pred: Any, margin_type: str) -> float:
    import numpy as np
    from sklearn import metrics

    if margin_type == "const":
        return float(np.sum(labels == pred) == labels.shape[0])
    fn = {
        "nmi": metrics.normalized_mutual_info_score,
        "ami": metrics.adjusted_mutual_info_score,
        "ari": metrics.adjusted_rand_score,
        "vmeasure": metrics.v_measure_score,
    }[margin_type]
    score = float(fn(labels, pred))
    return score if margin_type == "nmi" else max(0.0, score)


def _assign(d: Any, centroids: list) -> Any:
    """TF's get_cluster_assignment: nearest centroid (first of ties), centroids to themselves."""
    import numpy as np

    pred = np.argmin(d[centroids], axis=0)
    pred[np.asarray(centroids)] = np.arange(len(centroids))
    return pred


def cluster_choices_np(d: Any, labels: Any, margin: float, pam: bool, margin_type: str) -> tuple:
    """The medoids TF's cluster_loss picks (greedy loss-augmented, then 5 PAM passes), the
    clustering score of their assignment, and each class's medoid: ``(chosen, score, gt)``."""
    import numpy as np

    d = np.asarray(d, np.float32)
    labels = np.asarray(labels)
    n = d.shape[0]
    classes = np.unique(labels)
    k = len(classes)
    chosen: list = []
    for _ in range(k):
        cand = np.setdiff1d(np.arange(n), np.asarray(chosen, np.int64))
        if chosen:
            base = d[chosen].min(axis=0)
            fac = -np.minimum(base[None, :], d[cand]).sum(axis=1)
        else:
            fac = -d[cand].sum(axis=1)
        margins = np.array(
            [1.0 - _clustering_score(labels, _assign(d, [*chosen, c]), margin_type) for c in cand]
        )
        chosen.append(int(cand[np.argmax(fac.astype(np.float32) + margin * margins)]))
    if pam:
        for _ in range(5):
            pred = _assign(d, chosen)
            for it in range(k):
                members = np.flatnonzero(pred == it)
                fac = -d[np.ix_(members, members)].sum(axis=0)
                margins = []
                for m in members:
                    tmp = list(chosen)
                    tmp[it] = int(m)
                    margins.append(1.0 - _clustering_score(labels, _assign(d, tmp), margin_type))
                chosen[it] = int(members[np.argmax(fac + margin * np.asarray(margins))])
    score = _clustering_score(labels, _assign(d, chosen), margin_type)
    gt = []
    for c in classes:
        members = np.flatnonzero(labels == c)
        gt.append(int(members[np.argmin(d[np.ix_(members, members)].sum(axis=0))]))
    return np.asarray(chosen, np.int32), np.float32(score), np.asarray(gt, np.int32)


ClusterLossChoices = defop("ClusterLossChoices", differentiable=False)


@ClusterLossChoices.shape
def _cluster_choices_shape(op):
    return [
        (TensorShape([None]), _dt.int32),
        (TensorShape([]), _dt.float32),
        (TensorShape([None]), _dt.int32),
    ]


@ClusterLossChoices.kernel("cpu")
def _cluster_choices(ctx, d, labels):
    at = ctx.attrs
    if d.ndim != 2 or labels.ndim != 1 or labels.shape[0] != d.shape[0]:
        raise InvalidArgumentError(
            f"ClusterLossChoices {ctx.op.name!r}: distances [n, n] and labels [n] expected, got "
            f"{list(d.shape)} and {list(labels.shape)}"
        )
    return list(
        cluster_choices_np(d, labels, at["margin_multiplier"], at["pam"], at["margin_type"])
    )


def cluster_loss(
    labels: Any,
    embeddings: Any,
    margin_multiplier: float,
    enable_pam_finetuning: bool = True,
    margin_type: str = "nmi",
    print_losses: bool = False,
) -> Any:
    """The clustering loss (see the module docstring); ``labels`` ``[batch, 1]`` or
    ``[batch]``."""
    if margin_type not in _MARGIN_TYPES:
        raise ValueError(f"Unrecognized margin_type: {margin_type}")
    embeddings = _matrix(embeddings, "embeddings", "cluster_loss")
    pdist = pairwise_distance(embeddings)
    labels = _hb.reshape(_hb.convert_to_tensor(labels), [-1])
    chosen, score, gt = apply(
        "ClusterLossChoices",
        [_hb.stop_gradient(pdist), labels],
        {
            "margin_multiplier": float(margin_multiplier),
            "pam": bool(enable_pam_finetuning),
            "margin_type": margin_type,
        },
        "cluster_choices",
    )
    score_pred = -1.0 * _hb.reduce_sum(_hb.reduce_min(_hb.gather(pdist, chosen), axis=0))
    same = _f32(_hb.equal(_hb.expand_dims(labels, 1), _hb.expand_dims(labels, 0)))
    column_sums = _hb.reduce_sum(same * pdist, axis=0)  # per point, its class's distances
    score_gt = -1.0 * _hb.reduce_sum(_hb.gather(column_sums, gt))
    loss = _hb.maximum(
        score_pred + margin_multiplier * (1.0 - score) - score_gt, 0.0, name="clustering_loss"
    )
    if print_losses:
        loss = _hb.Print(loss, ["clustering_loss: ", loss])
    _hb.summary.scalar("losses/score_pred", score_pred)
    _hb.summary.scalar("losses/" + margin_type, score)
    _hb.summary.scalar("losses/score_gt", score_gt)
    return loss


__all__ = [
    "pairwise_distance",
    "contrastive_loss",
    "masked_maximum",
    "masked_minimum",
    "triplet_semihard_loss",
    "lifted_struct_loss",
    "npairs_loss",
    "npairs_loss_multilabel",
    "cluster_loss",
]
