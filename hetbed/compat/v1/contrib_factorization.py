"""TF1's ``tf.contrib.factorization.KMeans``: the graph for k-means clustering, as TF 1.15's
``clustering_ops.KMeans`` builds it.

``KMeans(inputs, num_clusters, initial_clusters, distance_metric, use_mini_batch,
mini_batch_steps_per_iteration, random_seed, kmeans_plus_plus_num_retries)`` and its
``training_graph()``, which returns TF 1.15's six-tuple ``(all_scores, cluster_idx, scores,
cluster_centers_initialized, init_op, training_op)`` (the first three are tuples with one entry
per input tensor, as TF's). The variables are TF's: ``clusters`` (shape unknown until the
init op fills it), ``initialized``, the per-cluster counts of the mini-batch rule and, with
``mini_batch_steps_per_iteration > 1``, ``clusters_updated`` and ``update_in_steps``.

- Scores: squared euclidean distances, or for ``'cosine'`` the cosine distance ``1 - x.c`` of
  l2-normalized rows (``all_scores``) and half the squared distance between the normalized
  vectors (``scores``), from the ``NearestNeighbors`` kernel (runtime/ops/clustering.py).
- Full batch: each step sets each center to the mean of the rows assigned to it
  (``sum / (count + 1e-6)``; l2-normalized for cosine).
- Mini batch: each step moves each center hit by ``k`` rows with old count ``n`` by
  ``(sum(rows) - k * center) / (n + k)`` and adds ``k`` to its count (counts start at 1);
  with ``mini_batch_steps_per_iteration > 1`` the updates go to a second copy that is copied
  back, and the counts reset, every that many steps.
- Initial clusters: a tensor or array, a function ``f(inputs, k)``, ``'random'`` (rows drawn
  uniformly with replacement; the whole batch when it has no more rows than clusters) or
  ``'kmeans_plus_plus'`` or ``'kmc2'`` (TF's k-MC2 chains; both with hetbed's generator: the
  rows chosen differ from TF's).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import hetbed as _hb
from hetbed.runtime import dtypes as _dt
from hetbed.runtime.ops.clustering import kmeans_plus_plus_initialization, nearest_neighbors

SQUARED_EUCLIDEAN_DISTANCE = "squared_euclidean"
COSINE_DISTANCE = "cosine"
RANDOM_INIT = "random"
KMEANS_PLUS_PLUS_INIT = "kmeans_plus_plus"
KMC2_INIT = "kmc2"
#: the name of the variable holding the cluster centers
CLUSTERS_VAR_NAME = "clusters"


def _l2n(x: Any) -> Any:
    return _hb.nn.l2_normalize(x, axis=1)


class KMeans:
    """Creates the graph for k-means clustering (TF 1.15's ``tf.contrib.factorization.KMeans``;
    see the module docstring)."""

    def __init__(
        self,
        inputs: Any,
        num_clusters: Any,
        initial_clusters: Any = RANDOM_INIT,
        distance_metric: str = SQUARED_EUCLIDEAN_DISTANCE,
        use_mini_batch: bool = False,
        mini_batch_steps_per_iteration: int = 1,
        random_seed: int = 0,
        kmeans_plus_plus_num_retries: int = 2,
        kmc2_chain_length: int = 200,
    ):
        if isinstance(initial_clusters, str):
            if initial_clusters not in (RANDOM_INIT, KMEANS_PLUS_PLUS_INIT, KMC2_INIT):
                raise ValueError(f"Unsupported initialization algorithm '{initial_clusters}'")
        if distance_metric not in (SQUARED_EUCLIDEAN_DISTANCE, COSINE_DISTANCE):
            raise ValueError(f"Unsupported distance metric '{distance_metric}'")
        self._inputs = list(inputs) if isinstance(inputs, list) else [inputs]
        self._inputs = [_hb.convert_to_tensor(x) for x in self._inputs]
        for x in self._inputs:
            if x.dtype != _dt.float32:
                raise TypeError(
                    f"KMeans: inputs must be float32 (TF's NearestNeighbors kernel), got "
                    f"{x.name} {x.dtype.name}"
                )
            if x.shape.ndims not in (None, 2):
                raise ValueError(
                    f"KMeans: inputs must be matrices [num_points, dims], got {x.name} "
                    f"shape {x.shape}"
                )
        self._num_clusters = num_clusters
        self._initial_clusters = initial_clusters
        self._distance_metric = distance_metric
        self._use_mini_batch = bool(use_mini_batch)
        self._mini_batch_steps_per_iteration = int(mini_batch_steps_per_iteration)
        self._random_seed = random_seed
        self._kmeans_plus_plus_num_retries = kmeans_plus_plus_num_retries
        self._kmc2_chain_length = kmc2_chain_length

    # ---- distances and assignments ----------------------------------------------------------

    @classmethod
    def _distance_graph(cls, inputs: list, clusters: Any, distance_metric: str) -> list:
        if distance_metric == SQUARED_EUCLIDEAN_DISTANCE:
            return [
                _hb.reduce_sum(_hb.square(x), 1, keepdims=True)
                - 2 * _hb.matmul(x, clusters, transpose_b=True)
                + _hb.transpose(_hb.reduce_sum(_hb.square(clusters), 1, keepdims=True))
                for x in inputs
            ]
        return [1 - _hb.matmul(x, clusters, transpose_b=True) for x in inputs]

    def _clusters_l2_normalized(self) -> bool:
        """Whether the centers are kept normalized (cosine, unless plain mini-batch)."""
        return self._distance_metric == COSINE_DISTANCE and (
            not self._use_mini_batch or self._mini_batch_steps_per_iteration > 1
        )

    def _infer_graph(self, inputs: list, clusters: Any) -> Any:
        scores = self._distance_graph(inputs, clusters, self._distance_metric)
        if self._distance_metric == COSINE_DISTANCE and not self._clusters_l2_normalized():
            clusters = _l2n(clusters)
        output = []
        for inp, score in zip(inputs, scores, strict=True):
            indices, distances = nearest_neighbors(inp, clusters, 1)
            if self._distance_metric == COSINE_DISTANCE:
                distances = distances * 0.5
            output.append((score, _hb.squeeze(distances, [-1]), _hb.squeeze(indices, [-1])))
        return zip(*output, strict=True)

    # ---- variables ------------------------------------------------------------------------------

    def _create_variables(self, num_clusters: Any) -> tuple:
        init_value = _hb.constant([], dtype=_dt.float32)
        centers = _hb.Variable(init_value, name=CLUSTERS_VAR_NAME, validate_shape=False)
        initialized = _hb.Variable(False, dtype=_dt.bool_, name="initialized")
        if self._use_mini_batch and self._mini_batch_steps_per_iteration > 1:
            updated = _hb.Variable(init_value, name="clusters_updated", validate_shape=False)
            update_in_steps = _hb.Variable(
                np.int64(self._mini_batch_steps_per_iteration),
                dtype=_dt.int64,
                name="update_in_steps",
            )
            counts = _hb.Variable(_hb.zeros([num_clusters], dtype=_dt.int64))
        else:
            updated = centers
            update_in_steps = None
            counts = (
                _hb.Variable(_hb.ones([num_clusters], dtype=_dt.int64))
                if self._use_mini_batch
                else None
            )
        return centers, initialized, counts, updated, update_in_steps

    # ---- the training graph ---------------------------------------------------------------------

    def training_graph(self) -> tuple:
        """``(all_scores, cluster_idx, scores, cluster_centers_initialized, init_op,
        training_op)``: TF 1.15's tuple. Run ``init_op`` (feeding the inputs) until
        ``cluster_centers_initialized`` is true, then ``training_op`` per step."""
        if isinstance(self._initial_clusters, str) or callable(self._initial_clusters):
            initial_clusters = self._initial_clusters
            num_clusters = _hb.convert_to_tensor(self._num_clusters)
        else:
            initial_clusters = _hb.convert_to_tensor(self._initial_clusters)
            if initial_clusters.dtype != _dt.float32:
                initial_clusters = _hb.cast(initial_clusters, _dt.float32)
            num_clusters = _hb.shape(initial_clusters)[0]
        if not num_clusters.dtype.is_integer:
            raise TypeError(f"KMeans: num_clusters must be an integer, got {self._num_clusters!r}")
        inputs = self._inputs
        centers_var, initialized, total_counts, centers_updated, update_in_steps = (
            self._create_variables(num_clusters)
        )
        init_op = _InitializeClustersOpFactory(
            self._inputs,
            num_clusters,
            initial_clusters,
            self._distance_metric,
            self._random_seed,
            self._kmeans_plus_plus_num_retries,
            self._kmc2_chain_length,
            centers_var,
            centers_updated,
            initialized,
        ).op()
        centers: Any = centers_var
        if self._distance_metric == COSINE_DISTANCE:
            inputs = [_l2n(x) for x in inputs]
            if not self._clusters_l2_normalized():
                centers = _l2n(centers)
        all_scores, scores, cluster_idx = self._infer_graph(inputs, centers)
        if self._use_mini_batch:
            sync = self._mini_batch_sync_updates_op(
                update_in_steps, centers_var, centers_updated, total_counts
            )
            with _hb.control_dependencies([sync]):
                training_op = self._mini_batch_training_op(
                    inputs, cluster_idx, centers_updated, total_counts
                )
        else:
            training_op = self._full_batch_training_op(
                inputs, num_clusters, cluster_idx, centers_var
            )
        return all_scores, cluster_idx, scores, initialized, init_op, training_op

    def _mini_batch_sync_updates_op(
        self, update_in_steps: Any, centers_var: Any, centers_updated: Any, total_counts: Any
    ) -> Any:
        if not (self._use_mini_batch and self._mini_batch_steps_per_iteration > 1):
            return _hb.no_op()

        def sync() -> Any:
            reset = _hb.assign(update_in_steps, self._mini_batch_steps_per_iteration - 1)
            with _hb.control_dependencies([reset]):
                new = centers_updated
                if self._distance_metric == COSINE_DISTANCE:
                    new = _l2n(centers_updated)
                else:
                    new = _hb.identity(centers_updated)
                copied = _hb.assign(centers_var, new, validate_shape=False)
            with _hb.control_dependencies([copied]):
                zeroed = _hb.assign(total_counts, _hb.zeros_like(total_counts))
            with _hb.control_dependencies([zeroed]):
                return _hb.identity(update_in_steps)

        return _hb.cond(
            update_in_steps <= 0, sync, lambda: _hb.assign_sub(update_in_steps, np.int64(1))
        )

    def _mini_batch_training_op(
        self, inputs: list, cluster_idx_list: Any, cluster_centers: Any, total_counts: Any
    ) -> Any:
        update_ops = []
        for inp, cluster_idx in zip(inputs, cluster_idx_list, strict=True):
            cluster_idx = _hb.reshape(cluster_idx, [-1])
            unique_ids, unique_idx = _hb.unique(cluster_idx)
            num_unique = _hb.size(unique_ids)
            # fresh reads: they follow this step's sync (the control dependencies around)
            old_centers = _hb.gather(cluster_centers.read_value(), unique_ids)
            count_updates = _hb.unsorted_segment_sum(
                _hb.ones_like(unique_idx, dtype=_dt.int64), unique_idx, num_unique
            )
            # TF's graph reads the counts with no order against their update; its executor
            # runs the update first (always on one thread, mostly on several), so the rate is
            # 1 / (n + 2k) for a center with count n hit by k rows: hetbed does the same
            update_counts = _hb.scatter_add(total_counts, unique_ids, count_updates)
            with _hb.control_dependencies([update_counts]):
                old_counts = _hb.gather(total_counts.read_value(), unique_ids)
            sums = _hb.unsorted_segment_sum(inp, unique_idx, num_unique)
            bshape = _hb.concat(
                [
                    _hb.reshape(num_unique, [1]),
                    _hb.ones(_hb.reshape(_hb.rank(inp) - 1, [1]), dtype=_dt.int32),
                ],
                0,
            )
            updates = sums - _hb.cast(_hb.reshape(count_updates, bshape), inp.dtype) * old_centers
            rate = _hb.reciprocal(_hb.cast(old_counts + count_updates, inp.dtype))
            updates = updates * _hb.reshape(rate, bshape)
            update_centers = _hb.scatter_add(cluster_centers, unique_ids, updates)
            update_ops.extend([update_counts, update_centers])
        return _hb.group(*update_ops)

    def _full_batch_training_op(
        self, inputs: list, num_clusters: Any, cluster_idx_list: Any, cluster_centers: Any
    ) -> Any:
        sums, counts = [], []
        epsilon = _hb.constant(1e-6, dtype=inputs[0].dtype)
        for inp, cluster_idx in zip(inputs, cluster_idx_list, strict=True):
            sums.append(_hb.unsorted_segment_sum(inp, cluster_idx, num_clusters))
            ones = _hb.reshape(_hb.ones(_hb.reshape(_hb.shape(inp)[0], [-1])), [-1, 1])
            counts.append(_hb.unsorted_segment_sum(ones, cluster_idx, num_clusters))
        new_centers = _hb.add_n(sums) / (_hb.cast(_hb.add_n(counts), sums[0].dtype) + epsilon)
        if self._clusters_l2_normalized():
            new_centers = _l2n(new_centers)
        return _hb.assign(cluster_centers, new_centers, validate_shape=False)


class _InitializeClustersOpFactory:
    """The op that chooses the initial centers (TF's algorithm): with ``r`` centers still to
    choose, ``r == 0`` asserts ``initialized``; otherwise it picks up to ``r`` new centers,
    l2-normalizes them for cosine, appends them to ``clusters`` (and ``clusters_updated``) and
    sets ``initialized`` once all are chosen."""

    def __init__(
        self,
        inputs: list,
        num_clusters: Any,
        initial_clusters: Any,
        distance_metric: str,
        random_seed: Any,
        kmeans_plus_plus_num_retries: int,
        kmc2_chain_length: int,
        cluster_centers: Any,
        cluster_centers_updated: Any,
        cluster_centers_initialized: Any,
    ):
        self._inputs = inputs
        self._num_clusters = num_clusters
        self._initial_clusters = initial_clusters
        self._distance_metric = distance_metric
        self._random_seed = random_seed
        self._kmeans_plus_plus_num_retries = kmeans_plus_plus_num_retries
        self._kmc2_chain_length = int(kmc2_chain_length)
        self._cluster_centers = cluster_centers
        self._cluster_centers_updated = cluster_centers_updated
        self._cluster_centers_initialized = cluster_centers_initialized
        self._num_selected = _hb.shape(cluster_centers)[0]
        self._num_remaining = num_clusters - self._num_selected
        self._num_data = _hb.add_n([_hb.shape(i)[0] for i in inputs])

    def _all_inputs(self) -> Any:
        return self._inputs[0] if len(self._inputs) == 1 else _hb.concat(self._inputs, 0)

    def _random(self) -> Any:
        u = _hb.random_uniform(
            _hb.reshape(self._num_remaining, [-1]), dtype=_dt.float64, seed=self._random_seed
        )
        n = _hb.cast(self._num_data, _dt.float64)
        indices = _hb.minimum(
            _hb.cast(_hb.floor(u * n), _dt.int64), _hb.cast(self._num_data, _dt.int64) - 1
        )
        return _hb.gather(self._all_inputs(), indices)

    def _kmeans_plus_plus(self) -> Any:
        inp = self._inputs[0]
        if self._distance_metric == COSINE_DISTANCE:
            inp = _l2n(inp)
        return kmeans_plus_plus_initialization(
            inp,
            _hb.cast(self._num_remaining, _dt.int64),
            int(self._random_seed or 0),
            int(self._kmeans_plus_plus_num_retries),
        )

    def _greedy_batch_sampler(self, sampler: Any) -> Any:
        return _hb.cond(self._num_data <= self._num_remaining, lambda: self._all_inputs(), sampler)

    def _single_batch_sampler(self, sampler: Any) -> Any:
        with _hb.control_dependencies(
            [_hb.assert_greater_equal(self._num_data, self._num_remaining)]
        ):
            return sampler()

    def _choose_initial_centers(self) -> Any:
        if isinstance(self._initial_clusters, str):
            if self._initial_clusters == RANDOM_INIT:
                return self._greedy_batch_sampler(self._random)
            return self._single_batch_sampler(self._kmeans_plus_plus)
        if callable(self._initial_clusters):
            return _hb.convert_to_tensor(self._initial_clusters(self._inputs, self._num_remaining))
        check = _hb.assert_equal(
            self._num_remaining,
            _hb.shape(self._initial_clusters)[0],
            message="KMeans: the initial clusters must number num_clusters minus those chosen",
        )
        with _hb.control_dependencies([check]):
            return _hb.identity(self._initial_clusters)

    def _add_new_centers(self) -> Any:
        new_centers = self._choose_initial_centers()
        if self._distance_metric == COSINE_DISTANCE:
            new_centers = _l2n(new_centers)
        all_centers = _hb.cond(
            _hb.equal(self._num_selected, 0),
            lambda: _hb.identity(new_centers),
            lambda: _hb.concat([self._cluster_centers, new_centers], 0),
        )
        a = _hb.assign(self._cluster_centers, all_centers, validate_shape=False)
        if self._cluster_centers_updated is not self._cluster_centers:
            a = _hb.assign(self._cluster_centers_updated, a, validate_shape=False)
        return self._num_clusters - _hb.shape(a)[0]

    def _kmc2_centers(self) -> Any:
        """TF's k-MC2 loop (one kernel, runtime/ops/clustering.py): one center from the first
        point when there is none yet, else a chain per ``kmc2_chain_length`` rows of the first
        input; returns the number still to choose."""
        from hetbed.runtime.registry import apply

        all_centers = apply(
            "KmeansKmc2Centers",
            [
                self._inputs[0],
                self._cluster_centers,
                _hb.cast(self._num_remaining, _dt.int64),
                _hb.constant(self._kmc2_chain_length, _dt.int64),
                _hb.constant(int(self._random_seed or 0), _dt.int64),
                _hb.constant(self._distance_metric == COSINE_DISTANCE),
            ],
            {},
            "KmeansKmc2Centers",
        )
        a = _hb.assign(self._cluster_centers, all_centers, validate_shape=False)
        if self._cluster_centers_updated is not self._cluster_centers:
            a = _hb.assign(self._cluster_centers_updated, a, validate_shape=False)
        return self._num_clusters - _hb.shape(a)[0]

    def _initialize(self) -> Any:
        with _hb.control_dependencies([_hb.assert_positive(self._num_remaining)]):
            if self._initial_clusters == KMC2_INIT:
                remaining = self._kmc2_centers()
            else:
                remaining = self._add_new_centers()
            return _hb.cond(
                _hb.equal(remaining, 0),
                lambda: _hb.assign(self._cluster_centers_initialized, True),
                lambda: _hb.identity(self._cluster_centers_initialized),
            )

    def op(self) -> Any:
        """The initialization op (a bool tensor: whether the centers are all chosen)."""
        return _hb.cond(
            _hb.equal(self._num_remaining, 0),
            lambda: _check_initialized(self._cluster_centers_initialized),
            self._initialize,
        )


def _check_initialized(initialized: Any) -> Any:
    check = _hb.assert_equal(
        initialized, True, message="KMeans: all clusters are chosen but not marked initialized"
    )
    with _hb.control_dependencies([check]):
        return _hb.identity(initialized)


# ---- Gaussian mixtures: gmm() and GmmAlgorithm (TF 1.15's gmm_ops) ------------------------------

FULL_COVARIANCE = "full"
DIAG_COVARIANCE = "diag"
_MEPS = float(np.finfo(float).eps)


def _covariance(x: Any, diag: bool) -> Any:
    n = _hb.cast(_hb.shape(x)[0], _dt.float32)
    x = x - _hb.reduce_mean(x, 0, keepdims=True)
    if diag:
        return _hb.reduce_sum(_hb.square(x), 0, keepdims=True) / (n - 1)
    return _hb.matmul(x, x, transpose_a=True) / (n - 1)


class GmmAlgorithm:
    """TF 1.15's EM for a Gaussian mixture (``contrib.factorization.GmmAlgorithm``): variables
    ``clusters`` (means ``[k, 1, d]``), ``clusters_covs`` (``[k, d, d]``, or ``[k, d]`` for
    ``'diag'``), ``alphas`` (weights, ``1/k``) and ``initialized``. The init op sets the means
    (``initial_means``, or ``k`` rows drawn uniformly from the data) and every covariance to the
    first shard's sample covariance + 1e-3 I. A training step is one EM iteration: responsibilities
    ``w`` from the current parameters, then (as ``params`` names: ``w``eights, ``m``eans,
    ``c``ovariances) ``alpha = sum(w) / n``, ``mean = w^T x / sum(w)``, ``cov = w-weighted second
    moment - mean mean^T + 1e-3 I`` (the new means'), as TF's."""

    CLUSTERS_WEIGHT = "alphas"
    CLUSTERS_VARIABLE = "clusters"
    CLUSTERS_COVS_VARIABLE = "clusters_covs"

    def __init__(
        self,
        data: list,
        num_classes: int,
        initial_means: Any = None,
        params: str = "wmc",
        covariance_type: str = FULL_COVARIANCE,
        random_seed: int = 0,
    ):
        if covariance_type not in (DIAG_COVARIANCE, FULL_COVARIANCE):
            raise ValueError(f"GmmAlgorithm: invalid covariance type {covariance_type!r}")
        data = [_hb.convert_to_tensor(d) for d in data]
        d = data[0].shape[1] if data[0].shape.ndims == 2 else None
        if d is None:
            raise ValueError(
                f"GmmAlgorithm: the data's dimension must be known when the graph is built, got "
                f"{data[0].name} of shape {data[0].shape}"
            )
        self._params, self._seed, self._cov_type = params, random_seed, covariance_type
        self._k, self._d = int(num_classes), int(d)
        self._min_var = _hb.constant(np.eye(self._d, dtype=np.float32) * 1e-3)
        init_value = _hb.constant([], dtype=_dt.float32)
        self._means = _hb.Variable(init_value, name=self.CLUSTERS_VARIABLE, validate_shape=False)
        self._covs = _hb.Variable(
            init_value, name=self.CLUSTERS_COVS_VARIABLE, validate_shape=False
        )
        self._alpha = _hb.Variable(
            np.full(self._k, 1.0 / self._k, np.float32), name=self.CLUSTERS_WEIGHT
        )
        self._initialized = _hb.Variable(False, dtype=_dt.bool_, name="initialized")
        self._initialize_variables(data, initial_means)
        self._probs, self._prior, self._w, self._points_in_k = [], [], [], []
        self._w_mul_x, self._w_mul_x2 = [], []
        for shard in data:
            self._define_shard(shard)
        self._define_maximization(len(data))
        self._log_likelihood = _hb.reduce_logsumexp(
            _hb.stack([_hb.reduce_logsumexp(p) for p in self._prior])
        )
        scores = [p + _hb.log(w) for p, w in zip(self._prior, self._w, strict=True)]
        self._scores = _hb.squeeze(
            _hb.reduce_logsumexp(_hb.stack(scores), axis=2, keepdims=True), axis=0
        )

    def _initialize_variables(self, data: list, initial_means: Any) -> None:
        if initial_means is not None:
            means = _hb.expand_dims(_hb.cast(initial_means, _dt.float32), 1)
        else:
            n = _hb.add_n([_hb.shape(x)[0] for x in data])
            check = _hb.assert_less_equal(
                self._k, n, message="GmmAlgorithm: more clusters than data points"
            )
            with _hb.control_dependencies([check]):
                u = _hb.random_uniform([self._k], dtype=_dt.float64, seed=self._seed)
            idx = _hb.cast(_hb.floor(u * _hb.cast(n, _dt.float64)), _dt.int64)
            rows = data[0] if len(data) == 1 else _hb.concat(data, 0)
            means = _hb.expand_dims(_hb.gather(rows, idx), 1)
        if self._cov_type == FULL_COVARIANCE:
            cov = _covariance(data[0], False) + self._min_var
            covs = _hb.tile(_hb.expand_dims(cov, 0), [self._k, 1, 1])
        else:
            cov = _covariance(data[0], True) + self._min_var
            covs = _hb.tile(_hb.expand_dims(_hb.diag_part(cov), 0), [self._k, 1])
        with _hb.control_dependencies([means, covs]):
            initialized = _hb.identity(self._initialized)

        def init(var: Any, value: Any) -> Any:
            def do() -> Any:
                with _hb.control_dependencies([_hb.assign(var, value, validate_shape=False)]):
                    return _hb.identity(_hb.assign(self._initialized, True))

            return _hb.cond(initialized, lambda: _hb.identity(initialized), do)

        self._init_ops = [init(self._means, means), init(self._covs, covs)]

    def _define_shard(self, shard: Any) -> None:
        x = _hb.expand_dims(shard, 0)  # [1, n, d]
        d = float(self._d)
        k, dd = self._k, self._d
        means = _hb.reshape(self._means, [k, 1, dd])  # (the variables' shapes are not static)
        if self._cov_type == FULL_COVARIANCE:
            covs = _hb.reshape(self._covs, [k, dd, dd])
            diff = x - means  # [k, n, d]
            chol = _hb.cholesky(covs + self._min_var)
            log_det = 2.0 * _hb.reduce_sum(_hb.log(_hb.matrix_diag_part(chol)), 1)
            sol = _hb.matrix_triangular_solve(chol, _hb.transpose(diff, [0, 2, 1]), lower=True)
            diag_m = _hb.transpose(_hb.reduce_sum(_hb.square(sol), 1))  # [n, k]
            probs = -0.5 * (diag_m + d * np.log(2 * np.pi) + log_det)
        else:
            covs = _hb.reshape(self._covs, [k, dd])
            det = _hb.reduce_sum(_hb.log(covs + 1e-3), 1, keepdims=True)  # [k, 1]
            x2 = _hb.squared_difference(x, means)  # [k, n, d]
            inv = _hb.expand_dims(1.0 / (covs + 1e-3), 2)  # [k, d, 1]
            x2_cov = _hb.transpose(_hb.squeeze(_hb.matmul(x2, inv), [2]))  # [n, k]
            probs = -0.5 * (d * np.log(2.0 * np.pi) + _hb.transpose(det) + x2_cov)
        probs = probs + _hb.log(self._alpha)
        prior = _hb.reduce_logsumexp(probs, axis=1, keepdims=True)  # [n, 1]
        w = _hb.exp(probs - prior)  # [n, k]
        self._probs.append(probs)
        self._prior.append(prior)
        self._w.append(w)
        self._points_in_k.append(_hb.reduce_sum(w, 0, keepdims=True))
        self._w_mul_x.append(_hb.expand_dims(_hb.matmul(w, shard, transpose_a=True), 1))
        # sum_i w_ik x_i^T x_i: [k, d, d]
        xw = _hb.expand_dims(_hb.transpose(w), 2) * x  # [k, n, d]
        self._w_mul_x2.append(_hb.matmul(xw, _hb.tile(x, [self._k, 1, 1]), transpose_a=True))

    def _define_maximization(self, num_batches: int) -> None:
        with _hb.control_dependencies(self._w):
            points_in_k = _hb.squeeze(_hb.add_n(self._points_in_k), axis=[0])
            if "w" in self._params:
                final = points_in_k / num_batches
                total = _hb.reduce_sum(final)
                alpha_op: Any = _hb.assign(self._alpha, final / (total + _MEPS))
            else:
                alpha_op = _hb.no_op()
            self._train_ops = [alpha_op]
            pk = _hb.reshape(points_in_k, [self._k, 1, 1])
            if "m" in self._params:
                means_op: Any = _hb.assign(
                    self._means,
                    _hb.add_n(self._w_mul_x) / (pk + _MEPS),
                    validate_shape=False,
                )
            else:
                means_op = _hb.no_op()
            with _hb.control_dependencies([means_op]):
                b = _hb.add_n(self._w_mul_x2) / (pk + _MEPS)
                # a fresh read, after the means' update (the variable's own read may be older)
                means = _hb.reshape(self._means.read_value(), [self._k, 1, self._d])
                new = b - _hb.matmul(means, means, transpose_a=True) + self._min_var
                if self._cov_type == DIAG_COVARIANCE:
                    new = _hb.matrix_diag_part(new)
                if "c" in self._params:
                    with _hb.control_dependencies([means_op, new]):
                        self._train_ops.append(_hb.assign(self._covs, new, validate_shape=False))

    def init_ops(self) -> Any:
        """The initialization op (means and covariances, once)."""
        return _hb.group(*self._init_ops)

    def training_ops(self) -> Any:
        """One EM iteration."""
        return _hb.group(*self._train_ops)

    def is_initialized(self) -> Any:
        return self._initialized

    def alphas(self) -> Any:
        return self._alpha

    def clusters(self) -> Any:
        """The means, ``[num_classes, 1, dims]``."""
        return self._means

    def covariances(self) -> Any:
        return self._covs

    def assignments(self) -> list:
        """Per shard, each example's most responsible component."""
        return [_hb.argmax(w, 1) for w in self._w]

    def scores(self) -> Any:
        """Each example's log likelihood ``[n, 1]`` (TF's formula)."""
        return self._scores

    def log_likelihood_op(self) -> Any:
        """TF's "log likelihood": logsumexp over the examples of their log likelihoods."""
        return self._log_likelihood


def gmm(
    inp: Any,
    initial_clusters: Any,
    num_clusters: int,
    random_seed: int,
    covariance_type: str = FULL_COVARIANCE,
    params: str = "wmc",
) -> tuple:
    """TF 1.15's ``contrib.factorization.gmm``: ``(loss, scores, [assignments], training_op,
    init_op, is_initialized)`` for a Gaussian mixture fitted by EM (see ``GmmAlgorithm``).
    ``initial_clusters`` is ``'random'`` or the initial means (an array or a tensor; TF 1.15
    drew random means when given a tensor, hetbed uses it)."""
    if isinstance(initial_clusters, str):
        if initial_clusters != "random":
            raise ValueError(
                f"gmm: initial_clusters must be 'random' or means, got {initial_clusters!r}"
            )
        initial_means = None
    else:
        initial_means = _hb.convert_to_tensor(initial_clusters, dtype=_dt.float32)
    inp = inp if isinstance(inp, list) else [inp]
    tool = GmmAlgorithm(inp, num_clusters, initial_means, params, covariance_type, random_seed)
    return (
        tool.log_likelihood_op(),
        tool.scores(),
        [tool.assignments()],
        tool.training_ops(),
        tool.init_ops(),
        tool.is_initialized(),
    )


__all__ = [
    "KMeans",
    "SQUARED_EUCLIDEAN_DISTANCE",
    "COSINE_DISTANCE",
    "RANDOM_INIT",
    "KMEANS_PLUS_PLUS_INIT",
    "KMC2_INIT",
    "CLUSTERS_VAR_NAME",
    "GmmAlgorithm",
    "gmm",
    "FULL_COVARIANCE",
    "DIAG_COVARIANCE",
]
