"""TF1's canned estimators (``tf.estimator.DNNClassifier``, ``LinearRegressor``, ...): an
``Estimator`` whose ``model_fn`` builds logits from feature columns and a "head" that turns them
into a loss, predictions and metrics, as TF 1.x / ``tf.compat.v1.estimator`` does.

Logits: ``dnn`` (``input_from_feature_columns/input_layer``, ``hiddenlayer_<i>`` dense layers
with ``activation_fn`` and dropout while training, then ``logits``), ``linear``
(``linear_model``), or their sum (DNNLinearCombined*, each part trained by its own optimizer).
Variable names are TF's (``dnn/hiddenlayer_0/kernel``, ``linear/linear_model/x/weights``; the
optimizers' slots are ``<var>/Adagrad`` where TF's Keras-backed DNN writes ``<var>/t_0/Adagrad``).

Heads: binary (sigmoid cross entropy), multi-class (softmax cross entropy) and regression
(squared error). The training loss is the weighted per-example loss reduced by
``loss_reduction``, by default ``SUM`` over the batch as in TF1's v1 estimators; ``evaluate``
gives TF's keys (``loss`` is the mean of the batch losses, ``average_loss`` the mean
per-example loss; binary adds ``accuracy``, ``accuracy_baseline``, ``auc``,
``auc_precision_recall``, ``label/mean``, ``prediction/mean``, ``precision``, ``recall``) and
``predict`` gives ``logits``, ``logistic`` (binary), ``probabilities``, ``class_ids``,
``classes``, ``all_class_ids``, ``all_classes`` (or ``predictions`` for a regressor).

Default optimizers are TF1's: DNN ``Adagrad`` at 0.05; Linear ``Ftrl`` at 0.2 (with
``optimizer=None``: min(0.2, 1/sqrt(number of columns))); DNNLinearCombined ``Adagrad`` at 0.001
and ``Ftrl`` at min(0.005, 1/sqrt(number of linear columns)). ``warm_start_from`` and
exporting are the Estimator's (estimator.py, estimator_export.py). Not here: ``batch_norm``,
partitioners, and TF's training summaries.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

import hetbed as hb
from hetbed.estimator import Estimator, EstimatorSpec, ModeKeys, RunConfig
from hetbed.runtime.ops import lookup as _lookup

_OPTIMIZERS = {
    "Adagrad": lambda lr: hb.train.AdagradOptimizer(lr),
    "Adam": lambda lr: hb.train.AdamOptimizer(lr),
    "Ftrl": lambda lr: hb.train.FtrlOptimizer(lr),
    "RMSProp": lambda lr: hb.train.RMSPropOptimizer(lr),
    "SGD": lambda lr: hb.train.GradientDescentOptimizer(lr),
}


def _optimizer(opt: Any, learning_rate: float, who: str) -> Any:
    """An optimizer from TF's forms: a name (at ``learning_rate``), an instance, or a
    callable returning one."""
    if isinstance(opt, str):
        if opt not in _OPTIMIZERS:
            raise ValueError(
                f"{who}: unknown optimizer {opt!r}; names are {sorted(_OPTIMIZERS)}, or give "
                "an Optimizer instance"
            )
        return _OPTIMIZERS[opt](learning_rate)
    if isinstance(opt, hb.train.Optimizer):
        return opt
    if callable(opt):
        got = opt()
        if not isinstance(got, hb.train.Optimizer):
            raise ValueError(f"{who}: the optimizer callable returned {got!r}, not an Optimizer")
        return got
    raise ValueError(f"{who}: optimizer must be a name, an Optimizer or a callable, got {opt!r}")


# ---- heads ---------------------------------------------------------------------------------


def _weights(features: dict, weight_column: Any, who: str) -> Any:
    """Per-example weights, [batch, 1] float32 (1.0 without a weight column)."""
    if weight_column is None:
        return 1.0
    key = weight_column if isinstance(weight_column, str) else weight_column.key
    if key not in features:
        raise ValueError(f"{who}: weight_column {key!r} is not in features {sorted(features)}")
    w = hb.cast(hb.convert_to_tensor(features[key]), hb.float32)
    return hb.reshape(w, [-1, 1])


def _dense_labels(labels: Any, logits: Any, dimension: int, who: str) -> Any:
    """``labels`` checked to be [D0, ..., DN, dimension] for logits [D0, ..., DN, k] (labels one
    rank short get a last axis of 1), as TF's heads check them: a last dimension known to be
    wrong is a ValueError when the graph is built, any other mismatch an InvalidArgumentError
    when the step runs (before the loss or any update)."""
    if isinstance(labels, hb.SparseTensor):
        raise ValueError(
            f"{who}: SparseTensor labels are not supported; labels must be a Tensor of shape "
            f"[D0, D1, ..., DN, {dimension}], e.g. [batch_size, {dimension}]"
        )
    lab = labels if isinstance(labels, hb.Tensor) else hb.convert_to_tensor(labels)
    rank, logits_rank = lab.shape.ndims, logits.shape.ndims
    if rank is not None and logits_rank is not None and rank == logits_rank - 1:
        lab, rank = hb.expand_dims(lab, -1), rank + 1
    err = (
        f"{who}: labels shape must be [D0, D1, ... DN, {dimension}]. Suggested Fix: check your "
        "n_classes argument to the estimator and/or the shape of your label."
    )
    if rank is not None:
        if rank < 2:
            raise ValueError(f"{err} Received labels of shape {lab.shape}.")
        last = lab.shape.as_list()[-1]
        if last is not None and last != dimension:
            raise ValueError(
                f"{who}: Mismatched label shape. Expected labels dimension={dimension}.  "
                f"Received {last}. Suggested Fix: If your classifier expects one-hot encoding "
                "label, check your n_classes argument to the estimator and/or the shape of your "
                "label. Otherwise, check the shape of your label."
            )
    with hb.name_scope("labels"):
        got = hb.shape(lab, out_type=hb.int64)
        want = hb.concat([hb.shape(logits, out_type=hb.int64)[:-1], [np.int64(dimension)]], 0)
        n = hb.minimum(hb.size(got), hb.size(want))
        same = hb.logical_and(
            hb.equal(hb.size(got), hb.size(want)),
            hb.reduce_all(hb.equal(hb.slice(got, [0], [n]), hb.slice(want, [0], [n]))),
        )
        check = hb.Assert(same, [err, "expected labels shape:", want, "labels shape:", got])
        with hb.control_dependencies([check]):
            return hb.identity(lab)


class _Head:
    """Turns logits into an EstimatorSpec for one mode."""

    logits_dimension: int

    def __init__(self, weight_column: Any, loss_reduction: str, who: str):
        hb.losses.Reduction.validate(loss_reduction)
        if loss_reduction == hb.losses.Reduction.NONE:
            raise ValueError(f"{who}: loss_reduction must not be NONE")
        self.weight_column, self.loss_reduction, self.who = weight_column, loss_reduction, who

    def spec(self, features, mode, logits, labels, train_op_fn: Callable) -> EstimatorSpec:
        preds = self._predictions(logits)
        if mode == ModeKeys.PREDICT:
            return EstimatorSpec(mode, predictions=preds)
        if labels is None:
            raise ValueError(f"{self.who}: labels are needed in mode {mode!r}")
        lab = self._labels(labels, logits)
        w = _weights(features, self.weight_column, self.who)
        unreduced = self._unreduced_loss(lab, logits)
        loss = hb.losses.compute_weighted_loss(
            unreduced, w, reduction=self.loss_reduction, loss_collection=None
        )
        if mode == ModeKeys.EVAL:
            with hb.name_scope("metrics"):
                metrics = self._metrics(lab, preds, w, unreduced)
                metrics["loss"] = hb.metrics.mean(loss, name="loss")
                metrics["average_loss"] = hb.metrics.mean(unreduced, w, name="average_loss")
            return EstimatorSpec(mode, predictions=preds, loss=loss, eval_metric_ops=metrics)
        return EstimatorSpec(mode, predictions=preds, loss=loss, train_op=train_op_fn(loss))


class _ClassifierHead(_Head):
    def __init__(self, n_classes, weight_column, label_vocabulary, loss_reduction, who):
        super().__init__(weight_column, loss_reduction, who)
        if int(n_classes) < 2:
            raise ValueError(f"{who}: n_classes must be > 1, got {n_classes}")
        self.n_classes = int(n_classes)
        if label_vocabulary is not None:
            vocab = [str(v) for v in label_vocabulary]
            if len(vocab) != self.n_classes:
                raise ValueError(
                    f"{who}: label_vocabulary has {len(vocab)} entries, n_classes is {n_classes}"
                )
            label_vocabulary = vocab
        self.vocab = label_vocabulary
        self.logits_dimension = 1 if self.n_classes == 2 else self.n_classes

    def _labels(self, labels: Any, logits: Any) -> Any:
        """Labels [batch, 1] (shape checked against the logits): class ids (int64; looked up
        in label_vocabulary when there is one), or for the binary head float32 in [0, 1] (a
        soft label is kept, as TF keeps it), checked to be in range when the step runs."""
        lab = _dense_labels(labels, logits, 1, self.who)
        binary = self.n_classes == 2
        if self.vocab is not None:
            if not lab.dtype.is_string:
                raise ValueError(f"{self.who}: with label_vocabulary, labels must be strings")
            table = _lookup.index_table_from_tensor(self.vocab, name="class_id_lookup")
            ids = table.lookup(lab)
            msg = f"{self.who}: labels must be in label_vocabulary {self.vocab}"
            with hb.control_dependencies([hb.assert_non_negative(ids, message=msg)]):
                ids = hb.identity(ids)
            return hb.cast(ids, hb.float32) if binary else ids
        if lab.dtype.is_string or not (binary or lab.dtype.is_integer):
            raise ValueError(
                f"{self.who}: labels must be integer class ids (or give label_vocabulary), got "
                f"{lab.dtype.name}"
            )
        ids = hb.cast(lab, hb.float32 if binary else hb.int64)
        top = "1" if binary else f"n_classes - 1 = {self.n_classes - 1}"
        msg = f"{self.who}: labels must be in [0, {top}]"
        checks = [
            hb.assert_non_negative(ids, message=msg),
            hb.assert_less_equal(ids, hb.cast(self.n_classes - 1, ids.dtype), message=msg),
        ]
        with hb.control_dependencies(checks):
            return hb.identity(ids)

    def _classes(self, class_ids: Any) -> Any:
        if self.vocab is None:
            return hb.as_string(class_ids)
        return hb.gather(hb.constant(self.vocab), class_ids)

    def _common(self, logits: Any, probs: Any) -> dict:
        class_ids = hb.expand_dims(hb.argmax(probs, axis=1, output_type=hb.int64), -1)
        n = self.n_classes
        all_ids = hb.tile(hb.constant(np.arange(n, dtype=np.int32).reshape(1, n)), hb.stack([hb.shape(logits)[0], 1]))  # fmt: skip
        names = self.vocab if self.vocab is not None else [str(i) for i in range(n)]
        all_classes = hb.tile(hb.constant([names]), hb.stack([hb.shape(logits)[0], 1]))
        return {
            "logits": logits,
            "probabilities": probs,
            "class_ids": class_ids,
            "classes": self._classes(class_ids),
            "all_class_ids": all_ids,
            "all_classes": all_classes,
        }


class _BinaryHead(_ClassifierHead):
    def _predictions(self, logits):
        with hb.name_scope("head/predictions"):
            logistic = hb.sigmoid(logits, name="logistic")
            probs = hb.concat([1.0 - logistic, logistic], 1, name="probabilities")
            return {**self._common(logits, probs), "logistic": logistic}

    def _unreduced_loss(self, labels, logits):
        return hb.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)

    def _metrics(self, labels, preds, w, unreduced) -> dict:
        """TF's binary metrics of the float labels: ``label/mean`` their mean, ``accuracy``
        counts class_id == label (a soft label never matches), precision, recall and the AUCs
        take a label > 0 as positive."""
        w_b = None if isinstance(w, float) else w
        label_mean = hb.metrics.mean(labels, w_b, name="label/mean")
        baseline = tuple(hb.maximum(m, 1.0 - m) for m in label_mean)
        logistic = preds["logistic"]
        return {
            "accuracy": hb.metrics.accuracy(labels, preds["class_ids"], w_b, name="accuracy"),
            "accuracy_baseline": baseline,
            "auc": hb.metrics.auc(labels, logistic, w_b, name="auc"),
            "auc_precision_recall": hb.metrics.auc(
                labels, logistic, w_b, curve="PR", name="auc_precision_recall"
            ),
            "label/mean": label_mean,
            "precision": hb.metrics.precision(labels, preds["class_ids"], w_b, name="precision"),
            "prediction/mean": hb.metrics.mean(logistic, w_b, name="prediction/mean"),
            "recall": hb.metrics.recall(labels, preds["class_ids"], w_b, name="recall"),
        }


class _MultiClassHead(_ClassifierHead):
    def _predictions(self, logits):
        with hb.name_scope("head/predictions"):
            return self._common(logits, hb.nn.softmax(logits, name="probabilities"))

    def _unreduced_loss(self, labels, logits):
        per = hb.nn.sparse_softmax_cross_entropy_with_logits(
            labels=hb.reshape(labels, [-1]), logits=logits
        )
        return hb.expand_dims(per, -1)

    def _metrics(self, labels, preds, w, unreduced) -> dict:
        w_b = None if isinstance(w, float) else w
        return {"accuracy": hb.metrics.accuracy(labels, preds["class_ids"], w_b, name="accuracy")}


class _RegressionHead(_Head):
    def __init__(self, label_dimension, weight_column, loss_reduction, who):
        super().__init__(weight_column, loss_reduction, who)
        if int(label_dimension) < 1:
            raise ValueError(f"{who}: label_dimension must be >= 1, got {label_dimension}")
        self.logits_dimension = int(label_dimension)

    def _predictions(self, logits):
        return {"predictions": logits}

    def _labels(self, labels, logits):
        lab = _dense_labels(labels, logits, self.logits_dimension, self.who)
        if lab.dtype.is_string:
            raise ValueError(f"{self.who}: labels must be numeric, got {lab.dtype.name}")
        return hb.cast(lab, hb.float32)

    def _unreduced_loss(self, labels, logits):
        return hb.square(labels - logits)

    def _metrics(self, labels, preds, w, unreduced) -> dict:
        w_b = None if isinstance(w, float) else w
        return {
            "label/mean": hb.metrics.mean(labels, w_b, name="label/mean"),
            "prediction/mean": hb.metrics.mean(preds["predictions"], w_b, name="prediction/mean"),
        }


def _classifier_head(n_classes, weight_column, label_vocabulary, loss_reduction, who):
    cls = _BinaryHead if int(n_classes) == 2 else _MultiClassHead
    return cls(n_classes, weight_column, label_vocabulary, loss_reduction, who)


# ---- logits ----------------------------------------------------------------------------------


def _dnn_logits(features, mode, units, hidden_units, columns, activation_fn, dropout) -> Any:
    with hb.variable_scope("dnn"):
        with hb.variable_scope("input_from_feature_columns"):
            net = hb.feature_column.input_layer(features, columns)
        for i, n in enumerate(hidden_units):
            net = hb.layers.dense(
                net, int(n), activation=activation_fn,
                kernel_initializer=hb.glorot_uniform_initializer(), name=f"hiddenlayer_{i}",
            )  # fmt: skip
            if dropout is not None and mode == ModeKeys.TRAIN:
                net = hb.layers.dropout(net, rate=dropout, training=True)
        return hb.layers.dense(
            net, units, kernel_initializer=hb.glorot_uniform_initializer(), name="logits"
        )


def _linear_logits(features, units, columns, sparse_combiner) -> Any:
    with hb.variable_scope("linear"):
        return hb.feature_column.linear_model(
            features, columns, units=units, sparse_combiner=sparse_combiner
        )


def _check_features(features: Any, who: str) -> dict:
    if not isinstance(features, dict):
        raise ValueError(f"{who}: features must be a dict of tensors, got {type(features)}")
    return features


def _combined_model_fn(head, dnn: dict | None, linear: dict | None, who: str) -> Callable:
    """A model_fn summing the logits of the parts given (each a dict of its settings and its
    optimizer), each part minimized by its own optimizer, then the global step + 1."""

    def model_fn(features, labels, mode, config):
        features = _check_features(features, who)
        parts = []
        if dnn is not None:
            logits = _dnn_logits(
                features, mode, head.logits_dimension, dnn["hidden_units"], dnn["columns"],
                dnn["activation_fn"], dnn["dropout"],
            )  # fmt: skip
            parts.append(("dnn", logits, dnn))
        if linear is not None:
            logits = _linear_logits(
                features, head.logits_dimension, linear["columns"], linear["sparse_combiner"]
            )
            parts.append(("linear", logits, linear))
        logits = parts[0][1] if len(parts) == 1 else parts[0][1] + parts[1][1]

        def train_op_fn(loss):
            step = hb.train.get_global_step()
            if len(parts) == 1:
                opt = _optimizer(parts[0][2]["optimizer"], parts[0][2]["lr"], who)
                return opt.minimize(loss, global_step=step)
            ops = []
            for scope, _, part in parts:
                opt = _optimizer(part["optimizer"], part["lr"], who)
                var_list = hb.get_collection(hb.GraphKeys.TRAINABLE_VARIABLES, scope=scope + "/")
                ops.append(opt.minimize(loss, var_list=var_list))
            with hb.control_dependencies([hb.group(*ops)]):
                return hb.assign_add(step, 1).op

        return head.spec(features, mode, logits, labels, train_op_fn)

    return model_fn


def _columns(who: str, columns: Any, what: str) -> list:
    cols = list(columns or [])
    if not cols:
        raise ValueError(f"{who}: {what} must be given (a non-empty list of feature columns)")
    return cols


def _dnn_part(who, hidden_units, columns, optimizer, activation_fn, dropout, lr) -> dict:
    if not hidden_units:
        raise ValueError(f"{who}: hidden_units must be given (e.g. [64, 32])")
    if dropout is not None and not 0.0 <= float(dropout) < 1.0:
        raise ValueError(f"{who}: dropout must be in [0, 1), got {dropout}")
    return {
        "hidden_units": list(hidden_units), "columns": _columns(who, columns, "feature_columns"),
        "optimizer": optimizer, "activation_fn": activation_fn, "dropout": dropout, "lr": lr,
    }  # fmt: skip


def _linear_part(who, columns, optimizer, sparse_combiner, lr) -> dict:
    cols = _columns(who, columns, "feature_columns")
    if optimizer is None:
        optimizer, lr = "Ftrl", min(0.2, 1.0 / math.sqrt(len(cols)))
    return {"columns": cols, "optimizer": optimizer, "sparse_combiner": sparse_combiner, "lr": lr}


_SUM = hb.losses.Reduction.SUM


class DNNClassifier(Estimator):
    """TF1's ``tf.estimator.DNNClassifier``: a feed-forward network on ``feature_columns``."""

    def __init__(
        self, hidden_units, feature_columns, model_dir=None, n_classes=2, weight_column=None,
        label_vocabulary=None, optimizer="Adagrad", activation_fn=hb.nn.relu, dropout=None,
        input_layer_partitioner=None, config: RunConfig | None = None, warm_start_from=None,
        loss_reduction=_SUM, batch_norm=False,
    ):  # fmt: skip
        who = type(self).__name__
        _unsupported(who, batch_norm, input_layer_partitioner)
        head = _classifier_head(n_classes, weight_column, label_vocabulary, loss_reduction, who)
        dnn = _dnn_part(who, hidden_units, feature_columns, optimizer, activation_fn, dropout, 0.05)
        super().__init__(_combined_model_fn(head, dnn, None, who), model_dir, config, None, warm_start_from)  # fmt: skip


class DNNRegressor(Estimator):
    """TF1's ``tf.estimator.DNNRegressor``: a feed-forward network on ``feature_columns``."""

    def __init__(
        self, hidden_units, feature_columns, model_dir=None, label_dimension=1,
        weight_column=None, optimizer="Adagrad", activation_fn=hb.nn.relu, dropout=None,
        input_layer_partitioner=None, config: RunConfig | None = None, warm_start_from=None,
        loss_reduction=_SUM, batch_norm=False,
    ):  # fmt: skip
        who = type(self).__name__
        _unsupported(who, batch_norm, input_layer_partitioner)
        head = _RegressionHead(label_dimension, weight_column, loss_reduction, who)
        dnn = _dnn_part(who, hidden_units, feature_columns, optimizer, activation_fn, dropout, 0.05)
        super().__init__(_combined_model_fn(head, dnn, None, who), model_dir, config, None, warm_start_from)  # fmt: skip


class LinearClassifier(Estimator):
    """TF1's ``tf.estimator.LinearClassifier``: ``linear_model`` of ``feature_columns``."""

    def __init__(
        self, feature_columns, model_dir=None, n_classes=2, weight_column=None,
        label_vocabulary=None, optimizer="Ftrl", config: RunConfig | None = None,
        partitioner=None, warm_start_from=None, loss_reduction=_SUM, sparse_combiner="sum",
    ):  # fmt: skip
        who = type(self).__name__
        _unsupported(who, False, partitioner)
        head = _classifier_head(n_classes, weight_column, label_vocabulary, loss_reduction, who)
        linear = _linear_part(who, feature_columns, optimizer, sparse_combiner, 0.2)
        super().__init__(_combined_model_fn(head, None, linear, who), model_dir, config, None, warm_start_from)  # fmt: skip


class LinearRegressor(Estimator):
    """TF1's ``tf.estimator.LinearRegressor``: ``linear_model`` of ``feature_columns``."""

    def __init__(
        self, feature_columns, model_dir=None, label_dimension=1, weight_column=None,
        optimizer="Ftrl", config: RunConfig | None = None, partitioner=None,
        warm_start_from=None, loss_reduction=_SUM, sparse_combiner="sum",
    ):  # fmt: skip
        who = type(self).__name__
        _unsupported(who, False, partitioner)
        head = _RegressionHead(label_dimension, weight_column, loss_reduction, who)
        linear = _linear_part(who, feature_columns, optimizer, sparse_combiner, 0.2)
        super().__init__(_combined_model_fn(head, None, linear, who), model_dir, config, None, warm_start_from)  # fmt: skip


def _combined_parts(who, linear_feature_columns, linear_optimizer, dnn_feature_columns,
                    dnn_optimizer, dnn_hidden_units, dnn_activation_fn, dnn_dropout,
                    linear_sparse_combiner) -> tuple:  # fmt: skip
    if not linear_feature_columns and not dnn_feature_columns:
        raise ValueError(f"{who}: give linear_feature_columns, dnn_feature_columns or both")
    dnn = linear = None
    if dnn_feature_columns:
        dnn = _dnn_part(
            who, dnn_hidden_units, dnn_feature_columns, dnn_optimizer, dnn_activation_fn,
            dnn_dropout, 0.001,
        )  # fmt: skip
    if linear_feature_columns:
        cols = list(linear_feature_columns)
        lr = min(0.005, 1.0 / math.sqrt(len(cols)))
        linear = _linear_part(who, cols, linear_optimizer, linear_sparse_combiner, lr)
    return dnn, linear


class DNNLinearCombinedClassifier(Estimator):
    """TF1's ``tf.estimator.DNNLinearCombinedClassifier`` (wide and deep): the sum of a
    linear model's and a DNN's logits."""

    def __init__(
        self, model_dir=None, linear_feature_columns=None, linear_optimizer="Ftrl",
        dnn_feature_columns=None, dnn_optimizer="Adagrad", dnn_hidden_units=None,
        dnn_activation_fn=hb.nn.relu, dnn_dropout=None, n_classes=2, weight_column=None,
        label_vocabulary=None, input_layer_partitioner=None, config: RunConfig | None = None,
        warm_start_from=None, loss_reduction=_SUM, batch_norm=False,
        linear_sparse_combiner="sum",
    ):  # fmt: skip
        who = type(self).__name__
        _unsupported(who, batch_norm, input_layer_partitioner)
        head = _classifier_head(n_classes, weight_column, label_vocabulary, loss_reduction, who)
        dnn, linear = _combined_parts(
            who, linear_feature_columns, linear_optimizer, dnn_feature_columns, dnn_optimizer,
            dnn_hidden_units, dnn_activation_fn, dnn_dropout, linear_sparse_combiner,
        )  # fmt: skip
        super().__init__(_combined_model_fn(head, dnn, linear, who), model_dir, config, None, warm_start_from)  # fmt: skip


class DNNLinearCombinedRegressor(Estimator):
    """TF1's ``tf.estimator.DNNLinearCombinedRegressor``: the sum of a linear model's and a
    DNN's outputs."""

    def __init__(
        self, model_dir=None, linear_feature_columns=None, linear_optimizer="Ftrl",
        dnn_feature_columns=None, dnn_optimizer="Adagrad", dnn_hidden_units=None,
        dnn_activation_fn=hb.nn.relu, dnn_dropout=None, label_dimension=1, weight_column=None,
        input_layer_partitioner=None, config: RunConfig | None = None, warm_start_from=None,
        loss_reduction=_SUM, batch_norm=False, linear_sparse_combiner="sum",
    ):  # fmt: skip
        who = type(self).__name__
        _unsupported(who, batch_norm, input_layer_partitioner)
        head = _RegressionHead(label_dimension, weight_column, loss_reduction, who)
        dnn, linear = _combined_parts(
            who, linear_feature_columns, linear_optimizer, dnn_feature_columns, dnn_optimizer,
            dnn_hidden_units, dnn_activation_fn, dnn_dropout, linear_sparse_combiner,
        )  # fmt: skip
        super().__init__(_combined_model_fn(head, dnn, linear, who), model_dir, config, None, warm_start_from)  # fmt: skip


def _unsupported(who: str, batch_norm: bool, partitioner: Any) -> None:
    """Refuse what hetbed's canned estimators leave out, rather than ignore it."""
    if batch_norm:
        raise ValueError(f"{who}: batch_norm=True is not supported in hetbed")
    if partitioner is not None:
        raise ValueError(f"{who}: partitioners are not supported in hetbed; give None")


__all__ = [
    "DNNClassifier",
    "DNNLinearCombinedClassifier",
    "DNNLinearCombinedRegressor",
    "DNNRegressor",
    "LinearClassifier",
    "LinearRegressor",
]
