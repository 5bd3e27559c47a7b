"""tf.contrib.factorization.KMeans (hetbed/compat/v1/contrib_factorization.py) and the
NearestNeighbors / KmeansPlusPlusInitialization kernels (runtime/ops/clustering.py): against
numpy written from TF 1.15's update rules, and against TensorFlow's own clustering_ops (the
same KMeans class TF 1.15's contrib had) step by step."""

from __future__ import annotations

import numpy as np
import pytest

import hetbed.compat.v1 as tf
from hetbed.compat.v1.contrib.factorization import KMeans
from hetbed.runtime.ops.clustering import nearest_neighbors, nearest_neighbors_np

RNG = np.random.default_rng(0)
X = RNG.normal(size=(40, 3)).astype(np.float32)
X[5] = X[7]  # a repeated row
INIT = X[:4].copy()


def _l2n(a):
    return a / np.linalg.norm(a, axis=1, keepdims=True)


def _train(kmeans_cls, tfm, mb, metric, spi, steps=4, config=None):
    """Per step: (all_scores, scores, cluster_idx) before the step, the centers after it."""
    out = []
    with tfm.Graph().as_default():
        x = tfm.placeholder(tfm.float32, [None, 3])
        km = kmeans_cls(
            x,
            4,
            initial_clusters=INIT,
            distance_metric=metric,
            use_mini_batch=mb,
            mini_batch_steps_per_iteration=spi,
        )
        all_s, idx, sc, ini, init_op, train_op = km.training_graph()
        (centers,) = [v for v in tfm.global_variables() if v.name == "clusters:0"]
        with tfm.Session(config=config) as s:
            s.run(tfm.global_variables_initializer())
            s.run(init_op, {x: X})
            assert s.run(ini)
            for i in range(steps):
                b = X[10 * i : 10 * i + 10] if mb else X
                a, d, ix = s.run([all_s[0], sc[0], idx[0]], {x: b})
                s.run(train_op, {x: b})
                out.append((a, d, ix, s.run(centers)))
    return out


def test_nearest_neighbors_kernel_ties_and_k():
    p = np.array([[0, 0], [1, 1], [2, 0]], np.float32)
    c = np.array([[1, 0], [0, 1], [3, 3], [1, 0]], np.float32)
    idx, d = nearest_neighbors_np(p, c, 1, "t")
    np.testing.assert_array_equal(idx[:, 0], [0, 0, 0])  # ties: the first center
    np.testing.assert_allclose(d[:, 0], [1, 1, 1])
    idx, d = nearest_neighbors_np(p, c, 9, "t")  # k is capped at the number of centers
    assert idx.shape == (3, 4)
    np.testing.assert_array_equal(idx[0], [0, 1, 3, 2])
    np.testing.assert_allclose(d[0], [1, 1, 1, 18])
    with tf.Graph().as_default():
        i, _ = nearest_neighbors(p, c[:, :1], 1)
        with tf.Session() as s, pytest.raises(tf.errors.InvalidArgumentError, match="2 vs 1"):
            s.run(i)


@pytest.mark.parametrize("metric", ["squared_euclidean", "cosine"])
def test_full_batch_steps_are_lloyd_means(metric):
    steps = _train(KMeans, tf, False, metric, 1, steps=3)
    c = INIT.astype(np.float64)
    xs = X.astype(np.float64)
    if metric == "cosine":
        xs, c = _l2n(xs), _l2n(c)
    for a, d, ix, after in steps:
        if metric == "cosine":
            all_ref = 1 - xs @ c.T
            d_ref = 0.5 * ((xs[:, None] - c[None]) ** 2).sum(-1)
        else:
            all_ref = d_ref = ((xs[:, None] - c[None]) ** 2).sum(-1)
        np.testing.assert_allclose(a, all_ref, atol=2e-5)
        np.testing.assert_array_equal(ix, d_ref.argmin(1))
        np.testing.assert_allclose(d, d_ref.min(1), atol=2e-5)
        sums = np.stack([xs[ix == j].sum(0) for j in range(4)])
        counts = np.bincount(ix, minlength=4)[:, None]
        c = sums / (counts + 1e-6)
        if metric == "cosine":
            c = _l2n(c)
        np.testing.assert_allclose(after, c, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("metric", ["squared_euclidean", "cosine"])
def test_mini_batch_rule(metric):
    """Each center hit by k rows, count n before the step: c += (sum - k c) / (n + 2k), TF's
    executor order (the counts are added before they are read); counts start at 1."""
    steps = _train(KMeans, tf, True, metric, 1)
    c = INIT.astype(np.float64)
    if metric == "cosine":
        c = _l2n(c)  # the initial centers are stored normalized
    n = np.ones(4)
    for i, (_, _, ix, after) in enumerate(steps):
        b = X[10 * i : 10 * i + 10].astype(np.float64)
        if metric == "cosine":
            b = _l2n(b)
            ref_idx = (b @ _l2n(c).T).argmax(1)
        else:
            ref_idx = ((b[:, None] - c[None]) ** 2).sum(-1).argmin(1)
        np.testing.assert_array_equal(ix, ref_idx)
        for j in np.unique(ix):
            k = (ix == j).sum()
            c[j] += (b[ix == j].sum(0) - k * c[j]) / (n[j] + 2 * k)
            n[j] += k
        np.testing.assert_allclose(after, c, rtol=1e-5, atol=1e-6)


def test_mini_batch_steps_per_iteration_syncs_every_n_steps():
    steps = _train(KMeans, tf, True, "squared_euclidean", 3, steps=4)
    # the assigning copy stays at the initial centers for the first iteration (3 steps), then
    # the updated copy is copied into it at the start of the 4th step
    for _, _, _, after in steps[:3]:
        np.testing.assert_array_equal(after, INIT)
    assert not np.allclose(steps[3][3], INIT)
    # the first three steps' assignments all use INIT
    for i, (_, _, ix, _) in enumerate(steps[:3]):
        b = X[10 * i : 10 * i + 10]
        np.testing.assert_array_equal(ix, ((b[:, None] - INIT[None]) ** 2).sum(-1).argmin(1))


def test_training_graph_tuple_variables_and_init():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 3])
        g = KMeans([x, x[:7]], 5, use_mini_batch=True, mini_batch_steps_per_iteration=2)
        out = g.training_graph()
        assert len(out) == 6  # TF 1.15's tuple
        all_s, idx, sc, ini, init_op, train_op = out
        assert len(all_s) == len(idx) == len(sc) == 2
        names = [v.op.name for v in tf.global_variables()]
        assert names == [
            "clusters",
            "initialized",
            "clusters_updated",
            "update_in_steps",
            "Variable",
        ]
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(init_op, {x: X[:2]})  # 2 + 2 rows <= 5 clusters: all taken
            assert not s.run(ini)
            assert s.run(tf.shape(tf.global_variables()[0])).tolist() == [4, 3]
            s.run(init_op, {x: X[:2]})  # one more, drawn from the 4 rows
            assert s.run(ini)
            assert s.run(tf.shape(tf.global_variables()[0])).tolist() == [5, 3]
            s.run(init_op, {x: X[:2]})  # nothing left: checks the flag, which is set


@pytest.mark.parametrize("how", ["random", "kmeans_plus_plus", "fn"])
def test_initial_clusters_are_rows_of_the_input(how):
    ic = (lambda inputs, k: inputs[0][:k]) if how == "fn" else how
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 3])
        out = KMeans(x, 6, initial_clusters=ic, distance_metric="cosine").training_graph()
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(out[4], {x: X})
            assert s.run(out[3])
            c = s.run(tf.global_variables()[0])
    xn = _l2n(X)
    dist = np.abs(c[:, None] - xn[None]).max(-1).min(1)
    np.testing.assert_allclose(dist, 0, atol=1e-6)  # each center a normalized row
    if how == "kmeans_plus_plus":
        assert len({tuple(r) for r in c.round(5)}) == 6  # distinct rows


def test_kmeans_plus_plus_needs_enough_rows_and_errors():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 3])
        out = KMeans(x, 5, initial_clusters="kmeans_plus_plus").training_graph()
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            with pytest.raises(tf.errors.InvalidArgumentError, match="x >= y"):
                s.run(out[4], {x: X[:2]})
        with pytest.raises(ValueError, match="distance metric 'l1'"):
            KMeans(x, 3, distance_metric="l1")
        with pytest.raises(TypeError, match="float32"):
            KMeans(tf.placeholder(tf.float64, [None, 3]), 3)


def test_aymericdamien_kmeans_flow_trains():
    """The graph of TensorFlow-Examples' kmeans.py (cosine, mini-batch, random init) on
    separable synthetic data: the average distance falls and clusters map to labels."""
    rng = np.random.default_rng(1)
    protos = (rng.random((4, 20)) < 0.3).astype(np.float32)
    y = rng.integers(0, 4, 400)
    data = np.clip(protos[y] + rng.normal(0, 0.2, (400, 20)), 0, 1).astype(np.float32)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, shape=[None, 20])
        kmeans = KMeans(inputs=x, num_clusters=8, distance_metric="cosine", use_mini_batch=True)
        training_graph = kmeans.training_graph()
        (all_scores, cluster_idx, scores, initialized, init_op, train_op) = training_graph
        cluster_idx = cluster_idx[0]
        avg_distance = tf.reduce_mean(scores)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer(), feed_dict={x: data})
            s.run(init_op, feed_dict={x: data})
            ds = []
            for _ in range(8):
                _, d, idx = s.run([train_op, avg_distance, cluster_idx], feed_dict={x: data})
                ds.append(d)
    assert ds[-1] < ds[0]
    counts = np.zeros((8, 4))
    np.add.at(counts, idx, np.eye(4)[y])
    assert counts.max(1).sum() / 400 > 0.95


@pytest.mark.parametrize(
    "mb,metric,spi",
    [
        (False, "squared_euclidean", 1),
        (False, "cosine", 1),
        (True, "squared_euclidean", 1),
        (True, "cosine", 1),
        (True, "squared_euclidean", 3),
        (True, "cosine", 3),
    ],
)
def test_against_tensorflow_clustering_ops(mb, metric, spi):
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    clustering_ops = pytest.importorskip("tensorflow.python.ops.clustering_ops")
    # one executor thread: TF's order between reading and adding the counts is then fixed
    # its own one-thread pools: the process-wide pool an earlier TensorFlow session made
    # (another test's) would otherwise ignore these sizes, and TF's order of the counts' read
    # and update would vary
    cfg = tf1.ConfigProto(
        inter_op_parallelism_threads=1,
        intra_op_parallelism_threads=1,
        use_per_session_threads=True,
    )
    theirs = _train(clustering_ops.KMeans, tf1, mb, metric, spi, config=cfg)
    ours = _train(KMeans, tf, mb, metric, spi)
    for step_t, step_h in zip(theirs, ours, strict=True):
        a_t, d_t, i_t, c_t = step_t
        a_h, d_h, i_h, c_h = step_h
        np.testing.assert_allclose(a_h, a_t, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(d_h, d_t, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(i_h, i_t)
        np.testing.assert_allclose(c_h, c_t, rtol=1e-5, atol=1e-6)


def _estimator_run(est_cls, tfm, model_dir, mb):
    pts = PTS
    est = est_cls(
        num_clusters=3,
        model_dir=model_dir,
        initial_clusters=pts[:3],
        use_mini_batch=mb,
    )
    out = []
    for _ in range(3):
        est.train(lambda: (tfm.constant(pts), None), steps=1)
        out.append(est.cluster_centers())
    score = est.score(lambda: (tfm.constant(pts), None))

    def once():  # predict reads its input to the end
        return tfm.train.limit_epochs(tfm.constant(pts), num_epochs=1)

    idx = np.array(list(est.predict_cluster_index(once)))
    dist = np.array(list(est.transform(once)))
    return out, score, idx, dist


RNG_EST = np.random.default_rng(3)
PTS = RNG_EST.normal(size=(30, 2)).astype(np.float32)


@pytest.mark.parametrize("mb", [False, True])
def test_kmeans_estimator_steps_are_the_graph_steps(tmp_path, mb):
    centers, score, idx, dist = _estimator_run(
        tf.estimator.experimental.KMeans, tf, str(tmp_path), mb
    )
    graph_steps = []
    with tf.Graph().as_default():
        out = KMeans(tf.constant(PTS), 3, initial_clusters=PTS[:3], use_mini_batch=mb)
        all_s, ix, sc, _, init_op, train_op = out.training_graph()
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(init_op)
            for _ in range(3):
                s.run(train_op)
                graph_steps.append(s.run(tf.global_variables()[0]))
            want_score, want_idx, want_all = s.run([tf.reduce_sum(sc), ix[0], all_s[0]])
    for c, g in zip(centers, graph_steps, strict=True):
        np.testing.assert_allclose(c, g, rtol=1e-6)
    np.testing.assert_allclose(score, want_score, rtol=1e-5)
    np.testing.assert_array_equal(idx, want_idx)
    np.testing.assert_allclose(dist, np.sqrt(np.maximum(want_all, 0)), rtol=1e-5, atol=1e-6)
    assert tf.contrib.factorization.KMeansClustering is tf.estimator.experimental.KMeans


@pytest.mark.parametrize("mb", [False, True])
def test_kmeans_estimator_against_tensorflow(tmp_path, mb):
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    pytest.importorskip("tensorflow_estimator")  # (TF 2.16+ has no estimator)
    theirs = _estimator_run(tf1.estimator.experimental.KMeans, tf1, str(tmp_path / "tf"), mb)
    ours = _estimator_run(tf.estimator.experimental.KMeans, tf, str(tmp_path / "hb"), mb)
    for c_h, c_t in zip(ours[0], theirs[0], strict=True):
        np.testing.assert_allclose(c_h, c_t, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-5)
    np.testing.assert_array_equal(ours[2], theirs[2])
    np.testing.assert_allclose(ours[3], theirs[3], rtol=1e-5)


def test_kmeans_estimator_relative_tolerance_stops(tmp_path):
    est = tf.contrib.factorization.KMeansClustering(
        num_clusters=3, relative_tolerance=1e-4, random_seed=1, model_dir=str(tmp_path)
    )
    est.train(lambda: (tf.constant(PTS), None), steps=200)
    assert est.get_variable_value("global_step") < 200
    with pytest.raises(ValueError, match="distance metric 'l1'"):
        tf.estimator.experimental.KMeans(3, distance_metric="l1")


# ---- gmm (TF 1.15's gmm_ops) against numpy EM ----------------------------------------------------


def _em_np(x, means, covs, alpha, diag, params="wmc"):
    """One EM step of TF 1.15's gmm_ops in float64: responsibilities, then the updates."""
    x = x.astype(np.float64)
    n, d = x.shape
    k = len(alpha)
    min_var = np.eye(d) * 1e-3
    logp = np.zeros((n, k))
    for j in range(k):
        diff = x - means[j]
        if diag:
            var = covs[j] + 1e-3
            logp[:, j] = -0.5 * (d * np.log(2 * np.pi) + np.log(var).sum() + (diff**2 / var).sum(1))
        else:
            c = covs[j] + min_var
            sol = np.linalg.solve(np.linalg.cholesky(c), diff.T)
            logdet = np.linalg.slogdet(c)[1]
            logp[:, j] = -0.5 * ((sol**2).sum(0) + d * np.log(2 * np.pi) + logdet)
    logp += np.log(alpha)
    prior = np.logaddexp.reduce(logp, axis=1, keepdims=True)
    w = np.exp(logp - prior)
    pk = w.sum(0)
    eps = np.finfo(float).eps
    new_alpha = pk / (pk.sum() + eps) if "w" in params else alpha
    new_means = (w.T @ x) / (pk[:, None] + eps) if "m" in params else means
    new_covs = covs
    if "c" in params:
        new_covs = []
        for j in range(k):
            b = (x * w[:, j : j + 1]).T @ x / (pk[j] + eps)
            cov = b - np.outer(new_means[j], new_means[j]) + min_var
            new_covs.append(np.diag(cov) if diag else cov)
        new_covs = np.array(new_covs)
    return w.argmax(1), np.logaddexp.reduce(prior[:, 0]), new_alpha, new_means, new_covs


@pytest.mark.parametrize("cov_type,params", [("full", "wmc"), ("diag", "wmc"), ("full", "mc")])
def test_gmm_em_steps_against_numpy(cov_type, params):
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.normal(0, 1, (20, 3)), rng.normal(4, 0.7, (20, 3))]).astype(np.float32)
    init = x[[0, 25]]
    fact = tf.contrib.factorization
    with tf.Graph().as_default():
        xp = tf.placeholder(tf.float32, [None, 3])
        loss, scores, assign, train, init_op, ini = fact.gmm(
            xp, init, 2, 0, covariance_type=cov_type, params=params
        )
        means_v, covs_v, alpha_v, _ = tf.global_variables()
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(init_op, {xp: x})
            assert s.run(ini)
            m, c, a = s.run([means_v, covs_v, alpha_v])
            xc = x.astype(np.float64) - x.mean(0)
            cov0 = xc.T @ xc / (len(x) - 1) + np.eye(3) * 1e-3
            np.testing.assert_allclose(m[:, 0], init)
            np.testing.assert_allclose(
                c[0], np.diag(cov0) if cov_type == "diag" else cov0, rtol=1e-5
            )
            for _ in range(3):
                want = _em_np(
                    x,
                    m[:, 0].astype(np.float64),
                    c.astype(np.float64),
                    a,
                    cov_type == "diag",
                    params,
                )
                got_assign, got_loss = s.run([assign[0][0], loss], {xp: x})
                s.run(train, {xp: x})
                m, c, a = s.run([means_v, covs_v, alpha_v])
                np.testing.assert_array_equal(got_assign, want[0])
                np.testing.assert_allclose(got_loss, want[1], rtol=1e-4)
                np.testing.assert_allclose(a, want[2], rtol=1e-4, atol=1e-6)
                np.testing.assert_allclose(m[:, 0], want[3], rtol=1e-4, atol=1e-5)
                np.testing.assert_allclose(c, want[4], rtol=1e-3, atol=1e-4)
    assert scores.shape.as_list() == [None, 1]


@pytest.mark.parametrize("metric", ["squared_euclidean", "cosine"])
def test_kmc2_initialization_follows_tf_steps(metric):
    """TF's k-MC2 init: the first run takes the first row; the next ones add a chain's pick per
    kmc2_chain_length rows (at most the centers still missing)."""
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 3])
        out = KMeans(
            x, 4, initial_clusters="kmc2", kmc2_chain_length=10, distance_metric=metric
        ).training_graph()
        centers = tf.global_variables()[0]
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(out[4], {x: X})
            first = s.run(centers)
            assert not s.run(out[3])
            s.run(out[4], {x: X})
            assert s.run(out[3])
            c = s.run(centers)
    rows = _l2n(X) if metric == "cosine" else X
    np.testing.assert_allclose(first, rows[:1], rtol=1e-6)
    assert c.shape == (4, 3)
    for i, ci in enumerate(c[1:]):  # chain i picks a row of rows 10 i .. 10 i + 9
        assert np.abs(rows[10 * i : 10 * i + 10] - ci).max(1).min() < 1e-6


def test_kmc2_chain_kernel_moves_to_larger_distances():
    from hetbed.runtime.ops.clustering import kmc2_chain_np

    assert kmc2_chain_np(np.array([0.0, 0.0, 5.0, 0.0], np.float32), 3, "t") == 2
    assert kmc2_chain_np(np.array([1.0], np.float32), 3, "t") == 0
    with pytest.raises(tf.errors.InvalidArgumentError, match="vector"):
        kmc2_chain_np(np.zeros((2, 2), np.float32), 3, "t")


def test_gmm_estimator_steps_are_the_graph_steps(tmp_path):
    rng = np.random.default_rng(6)
    x = np.concatenate([rng.normal(0, 1, (15, 2)), rng.normal(5, 0.5, (15, 2))]).astype(np.float32)
    init = x[[0, 20]]
    est = tf.contrib.factorization.GMM(2, model_dir=str(tmp_path), initial_clusters=init)
    est.fit(input_fn=lambda: (tf.constant(x), None), steps=3)
    with tf.Graph().as_default():
        loss, scores, assign, train, init_op, _ = tf.contrib.factorization.gmm(
            tf.constant(x), init, 2, 0
        )
        m, c, a = tf.global_variables()[:3]
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(init_op)
            for _ in range(3):
                s.run(train)
            want_m, want_c, want_a, want_scores, want_assign = s.run(
                [m, c, a, scores, assign[0][0]]
            )
    np.testing.assert_allclose(est.clusters(), want_m[:, 0], rtol=1e-6)
    np.testing.assert_allclose(est.covariances(), want_c, rtol=1e-6)
    np.testing.assert_allclose(est.weights(), want_a, rtol=1e-6)
    np.testing.assert_allclose(
        est.score(input_fn=lambda: (tf.constant(x), None), steps=1), want_scores.sum(), rtol=1e-5
    )
    once = lambda: tf.train.limit_epochs(tf.constant(x), num_epochs=1)  # noqa: E731
    np.testing.assert_array_equal(list(est.predict_assignments(input_fn=once)), want_assign)
    with pytest.raises(ValueError, match="input_fn"):
        est.fit(x=x, steps=1)
