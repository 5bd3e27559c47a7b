"""TF1's k-means Estimator: ``tf.estimator.experimental.KMeans`` (also
``tf.contrib.factorization.KMeansClustering``), an ``Estimator`` whose ``model_fn`` builds
``contrib.factorization.KMeans``'s training graph.

The loss is the sum of the batch's distances to their nearest centers; a training hook runs
the init op (feeding the first batch) until the centers are chosen; each ``train`` step runs
one k-means step and adds 1 to the global step; ``relative_tolerance`` stops training when the
loss changes by less than that fraction (``|l - l'| / (1 + |l'|)``). ``predict`` yields
``cluster_index`` and ``all_distances``; ``predict_cluster_index``, ``transform`` (euclidean
distances: the square roots of the squared ones), ``score`` (the summed distance over one
batch) and ``cluster_centers`` (the ``clusters`` variable) are TF's. Features are a tensor, or a
dict: through ``feature_columns`` when given, else its tensors concatenated in key order.

Also TF1's ``tf.contrib.factorization.GMM``: the Gaussian mixture Estimator over
``contrib.factorization.gmm`` (one EM iteration per step), in contrib.learn's form: ``fit(
input_fn, steps, max_steps)``, ``predict_assignments``, ``score`` (the total log likelihood of
the evaluated examples), ``weights``, ``clusters`` (``[k, d]``), ``covariances``; ``evaluate``
gives ``scores`` (that total) and ``loss`` (the sum of the batches' gmm losses).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

import hetbed as _hb
from hetbed.estimator import Estimator, EstimatorSpec


class _LossRelativeChangeHook(_hb.train.SessionRunHook):
    """Stops training when the loss changes by less than ``tolerance`` relative to 1 + the
    last loss."""

    def __init__(self, loss_tensor: Any, tolerance: float):
        self._loss_tensor = loss_tensor
        self._tolerance = tolerance
        self._prev_loss: float | None = None

    def before_run(self, run_context: Any) -> Any:
        return _hb.train.SessionRunArgs(self._loss_tensor)

    def after_run(self, run_context: Any, run_values: Any) -> None:
        loss = float(run_values.results)
        if self._prev_loss:
            change = abs(loss - self._prev_loss) / (1 + abs(self._prev_loss))
            if change < self._tolerance:
                run_context.request_stop()
        self._prev_loss = loss


class _InitializeClustersHook(_hb.train.SessionRunHook):
    """Runs ``init_op`` after the session starts until ``initialized`` is true."""

    def __init__(self, init_op: Any, is_initialized_var: Any, max_runs: int = 10000):
        self._init_op = init_op
        self._is_initialized_var = is_initialized_var
        self._max_runs = max_runs

    def after_create_session(self, session: Any, coord: Any) -> None:
        for _ in range(self._max_runs):
            if session.run(self._is_initialized_var):
                return
            session.run(self._init_op)
        raise RuntimeError(
            f"KMeans: the cluster centers are still not all chosen after {self._max_runs} runs "
            "of the init op (batches with too few rows?)"
        )


def _parse_features(features: Any, feature_columns: Any) -> Any:
    if not isinstance(features, dict):
        return features
    if feature_columns:
        return _hb.feature_column.input_layer(features, feature_columns)
    return _hb.concat([features[k] for k in sorted(features)], axis=1)


class KMeansClustering(Estimator):
    """An Estimator for k-means clustering (see the module docstring)."""

    SQUARED_EUCLIDEAN_DISTANCE = "squared_euclidean"
    COSINE_DISTANCE = "cosine"
    RANDOM_INIT = "random"
    KMEANS_PLUS_PLUS_INIT = "kmeans_plus_plus"
    SCORE = "score"
    CLUSTER_INDEX = "cluster_index"
    ALL_DISTANCES = "all_distances"
    CLUSTER_CENTERS_VAR_NAME = "clusters"

    def __init__(
        self,
        num_clusters: Any,
        model_dir: str | None = None,
        initial_clusters: Any = RANDOM_INIT,
        distance_metric: str = SQUARED_EUCLIDEAN_DISTANCE,
        seed: Any = None,
        use_mini_batch: bool = True,
        mini_batch_steps_per_iteration: int = 1,
        kmeans_plus_plus_num_retries: int = 2,
        relative_tolerance: float | None = None,
        config: Any = None,
        feature_columns: Any = None,
        random_seed: Any = None,
    ):
        if isinstance(initial_clusters, str) and initial_clusters not in (
            self.RANDOM_INIT,
            self.KMEANS_PLUS_PLUS_INIT,
        ):
            raise ValueError(f"Unsupported initialization algorithm '{initial_clusters}'")
        if distance_metric not in (self.SQUARED_EUCLIDEAN_DISTANCE, self.COSINE_DISTANCE):
            raise ValueError(f"Unsupported distance metric '{distance_metric}'")
        self._distance_metric = distance_metric
        seed = random_seed if seed is None else seed  # (contrib's name for it)
        kw = {
            "num_clusters": num_clusters,
            "initial_clusters": initial_clusters,
            "distance_metric": distance_metric,
            "use_mini_batch": use_mini_batch,
            "mini_batch_steps_per_iteration": mini_batch_steps_per_iteration,
            "random_seed": 0 if seed is None else seed,
            "kmeans_plus_plus_num_retries": kmeans_plus_plus_num_retries,
        }

        def model_fn(features: Any, mode: str) -> EstimatorSpec:
            from hetbed.compat.v1.contrib_factorization import KMeans

            points = _parse_features(features, feature_columns)
            all_distances, predictions, losses, is_initialized, init_op, training_op = KMeans(
                inputs=points, **kw
            ).training_graph()
            loss = _hb.reduce_sum(losses)
            _hb.summary.scalar("loss/raw", loss)
            incr_step = _hb.assign_add(_hb.train.get_global_step(), 1)
            with _hb.control_dependencies([training_op, incr_step]):
                train_op = _hb.identity(loss)
            hooks: list = [_InitializeClustersHook(init_op, is_initialized)]
            if relative_tolerance is not None:
                hooks.append(_LossRelativeChangeHook(loss, relative_tolerance))
            return EstimatorSpec(
                mode=mode,
                predictions={
                    self.ALL_DISTANCES: all_distances[0],
                    self.CLUSTER_INDEX: predictions[0],
                },
                loss=loss,
                train_op=train_op,
                eval_metric_ops={self.SCORE: _hb.metrics.mean(loss)},
                training_hooks=hooks,
            )

        super().__init__(model_fn=model_fn, model_dir=model_dir, config=config)

    def _predict_one_key(self, input_fn: Any, predict_key: str) -> Iterator:
        for result in self.predict(input_fn=input_fn, predict_keys=[predict_key]):
            yield result[predict_key]

    def predict_cluster_index(self, input_fn: Any) -> Iterator:
        """The index of each input point's nearest center."""
        yield from self._predict_one_key(input_fn, self.CLUSTER_INDEX)

    def score(self, input_fn: Any) -> float:
        """The summed distance of one batch of ``input_fn``'s points to their nearest
        centers."""
        return self.evaluate(input_fn=input_fn, steps=1)[self.SCORE]

    def transform(self, input_fn: Any) -> Iterator:
        """Each point's distances to every center (euclidean, not squared, for that metric)."""
        for d in self._predict_one_key(input_fn, self.ALL_DISTANCES):
            yield np.sqrt(d) if self._distance_metric == self.SQUARED_EUCLIDEAN_DISTANCE else d

    def cluster_centers(self) -> np.ndarray:
        """The trained centers (the ``clusters`` variable of the latest checkpoint)."""
        return self.get_variable_value(self.CLUSTER_CENTERS_VAR_NAME)


def _streaming_sum(x: Any, name: str) -> tuple:
    """``(total, update)``: the sum of ``x`` over the evaluated batches."""
    with _hb.variable_scope(None, default_name=name):
        total = _hb.Variable(
            0.0,
            trainable=False,
            collections=[_hb.GraphKeys.LOCAL_VARIABLES, _hb.GraphKeys.METRIC_VARIABLES],
            name="total",
        )
    return _hb.identity(total), _hb.assign_add(total, _hb.reduce_sum(x))


class GMM(Estimator):
    """An Estimator for Gaussian mixture clustering (see the module docstring)."""

    SCORES = "scores"
    LOG_LIKELIHOOD = "loss"
    ASSIGNMENTS = "assignments"

    def __init__(
        self,
        num_clusters: int,
        model_dir: str | None = None,
        random_seed: int = 0,
        params: str = "wmc",
        initial_clusters: Any = "random",
        covariance_type: str = "full",
        config: Any = None,
    ):
        if covariance_type not in ("full", "diag"):
            raise ValueError(
                f"GMM: covariance_type must be 'full' or 'diag', got {covariance_type!r}"
            )
        self._num_clusters = int(num_clusters)

        def model_fn(features: Any, mode: str) -> EstimatorSpec:
            from hetbed.compat.v1.contrib_factorization import gmm

            points = _parse_features(features, None)
            loss, scores, assignments, training_op, init_op, is_initialized = gmm(
                points, initial_clusters, num_clusters, random_seed, covariance_type, params
            )
            incr_step = _hb.assign_add(_hb.train.get_global_step(), 1)
            with _hb.control_dependencies([training_op, incr_step]):
                train_op = _hb.identity(loss)
            return EstimatorSpec(
                mode=mode,
                predictions={self.ASSIGNMENTS: assignments[0][0]},
                loss=loss,
                train_op=train_op,
                eval_metric_ops={
                    self.SCORES: _streaming_sum(scores, "scores"),
                    self.LOG_LIKELIHOOD: _streaming_sum(loss, "log_likelihood"),
                },
                training_hooks=[_InitializeClustersHook(init_op, is_initialized)],
            )

        super().__init__(model_fn=model_fn, model_dir=model_dir, config=config)

    def fit(
        self,
        x: Any = None,
        y: Any = None,
        input_fn: Any = None,
        steps: int | None = None,
        batch_size: Any = None,
        monitors: Any = None,
        max_steps: int | None = None,
    ) -> GMM:
        """contrib.learn's ``fit``: train on ``input_fn`` (``x``/``y`` arrays, removed in TF1's
        own deprecation, are not taken)."""
        if x is not None or y is not None or batch_size is not None:
            raise ValueError(
                "GMM.fit: give input_fn (x, y and batch_size are contrib.learn's deprecated "
                "SKCompat arguments, not supported)"
            )
        if input_fn is None:
            raise ValueError("GMM.fit: input_fn is required")
        return self.train(input_fn, hooks=monitors, steps=steps, max_steps=max_steps)

    def predict_assignments(
        self, input_fn: Any = None, batch_size: Any = None, outputs: Any = None
    ) -> Iterator:
        """Each input example's most responsible component."""
        for result in self.predict(input_fn=input_fn, predict_keys=[self.ASSIGNMENTS]):
            yield result[self.ASSIGNMENTS]

    def score(self, input_fn: Any = None, batch_size: Any = None, steps: Any = None) -> float:
        """The total log likelihood of the examples ``input_fn`` gives (``steps`` batches)."""
        return float(np.sum(self.evaluate(input_fn=input_fn, steps=steps)[self.SCORES]))

    def weights(self) -> np.ndarray:
        """The mixture weights (``alphas``)."""
        return self.get_variable_value("alphas")

    def clusters(self) -> np.ndarray:
        """The means, ``[num_clusters, dims]``."""
        return np.squeeze(self.get_variable_value("clusters"), 1)

    def covariances(self) -> np.ndarray:
        """The covariances (``[k, d, d]``, or ``[k, d]`` for ``'diag'``)."""
        return self.get_variable_value("clusters_covs")


__all__ = ["KMeansClustering", "GMM"]
