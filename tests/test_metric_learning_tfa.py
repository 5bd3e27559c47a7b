"""tf.contrib.losses.metric_learning (hetbed/compat/v1/contrib_metric_learning.py): values
against numpy written from the losses' definitions (brute force over triplets and pairs) and
gradients against finite differences of those; values and gradients against TensorFlow
Addons' ports of the same losses (TF 2.15) on random cases with tied distances, one label for
all and a label for each."""

from __future__ import annotations

import numpy as np
import pytest

import hetbed.compat.v1 as tf

ml = tf.contrib.losses.metric_learning
RNG = np.random.default_rng(0)


def _case(kind: str, n: int = 8, d: int = 4, seed: int = 0):
    rng = np.random.default_rng(seed)
    emb = rng.normal(size=(n, d)).astype(np.float32)
    labels = rng.integers(0, 3, n).astype(np.int32)
    if kind == "ties":  # repeated rows: zero and tied distances
        emb[3] = emb[1]
        emb[5] = emb[1]
        emb[6] = -emb[2]
        emb[7] = emb[2]
        labels[5] = labels[1] + 1
    elif kind == "same":
        labels[:] = 2
    elif kind == "distinct":
        labels = np.arange(n, dtype=np.int32)
    return labels, emb


def _run(fn, labels, *embs):
    """The loss and its gradients for each embedding argument, in hetbed."""
    with tf.Graph().as_default():
        ph = [tf.constant(e) for e in embs]
        loss = fn(tf.constant(labels), *ph)
        grads = tf.gradients(loss, ph)
        with tf.Session() as s:
            return s.run([loss, grads])


# ---- numpy definitions -------------------------------------------------------------------------


def _pdist(x, squared):
    d2 = ((x[:, None] - x[None]) ** 2).sum(-1)
    return d2 if squared else np.sqrt(d2)


def _triplet_np(labels, x, margin=1.0):
    d = _pdist(x.astype(np.float64), True)
    n = len(labels)
    total, count = 0.0, 0
    for a in range(n):
        neg = [j for j in range(n) if labels[j] != labels[a]]
        for p in range(n):
            if p == a or labels[p] != labels[a]:
                continue
            count += 1
            farther = [d[a, j] for j in neg if d[a, j] > d[a, p]]
            if farther:
                dn = min(farther)
            elif neg:
                dn = max(d[a, j] for j in neg)
            else:
                dn = d[a].min()  # no negative at all: the masked max of nothing, TF's row min
            total += max(margin + d[a, p] - dn, 0.0)
    return total / count


def _lifted_np(labels, x, margin=1.0):
    d = _pdist(x.astype(np.float64), False)
    n = len(labels)
    total, count = 0.0, 0
    for i in range(n):
        for j in range(i + 1, n):
            if labels[i] != labels[j]:
                continue
            count += 1
            terms = [margin - d[i, k] for k in range(n) if labels[k] != labels[i]]
            terms += [margin - d[j, k] for k in range(n) if labels[k] != labels[j]]
            j_ij = np.log(np.sum(np.exp(terms))) + d[i, j]
            total += max(j_ij, 0.0) ** 2
    return total / (2 * count)


def _xent_rows(sim, target):
    target = target / target.sum(1, keepdims=True)
    logp = sim - sim.max(1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(1, keepdims=True))
    return -(target * logp).sum(1).mean()


def _npairs_np(labels, a, p, reg=0.002):
    a, p = a.astype(np.float64), p.astype(np.float64)
    l2 = 0.25 * reg * ((a**2).sum(1).mean() + (p**2).sum(1).mean())
    return l2 + _xent_rows(a @ p.T, (labels[:, None] == labels[None]).astype(float))


def _numgrad(f, x, eps=1e-4):
    g = np.zeros(x.shape)
    x = x.astype(np.float64)
    for idx in np.ndindex(*x.shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += eps
        xm[idx] -= eps
        g[idx] = (f(xp) - f(xm)) / (2 * eps)
    return g


# ---- against numpy (always run) ------------------------------------------------------------------


def test_pairwise_distance_zero_diagonal_and_repeats():
    _, x = _case("ties")
    with tf.Graph().as_default(), tf.Session() as s:
        d, d2 = s.run([ml.pairwise_distance(x), ml.pairwise_distance(x, squared=True)])
    np.testing.assert_allclose(d2, _pdist(x.astype(np.float64), True), atol=1e-5)
    np.testing.assert_allclose(d, _pdist(x.astype(np.float64), False), atol=2e-3)
    assert (np.diag(d) == 0).all() and d[1, 3] == 0 and d[1, 5] == 0


@pytest.mark.parametrize("kind", ["random", "ties", "same"])
def test_triplet_semihard_value_and_gradient(kind):
    labels, x = _case(kind)
    loss, (g,) = _run(ml.triplet_semihard_loss, labels, x)
    np.testing.assert_allclose(loss, _triplet_np(labels, x), rtol=1e-5, atol=1e-5)
    if kind == "random":  # away from ties the loss is smooth
        num = _numgrad(lambda v: _triplet_np(labels, v), x)
        np.testing.assert_allclose(g, num, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("kind", ["random", "ties", "same"])
def test_lifted_struct_value_and_gradient(kind):
    labels, x = _case(kind)
    loss, (g,) = _run(ml.lifted_struct_loss, labels, x)
    if kind == "same":  # no negatives: log(0) = -inf, times the zero diagonal mask: nan, as TF
        assert np.isnan(loss)
        return
    np.testing.assert_allclose(loss, _lifted_np(labels, x), rtol=1e-5, atol=1e-5)
    if kind == "random":
        num = _numgrad(lambda v: _lifted_np(labels, v), x)
        np.testing.assert_allclose(g, num, rtol=1e-3, atol=1e-4)


def test_npairs_value_and_gradients():
    labels, a = _case("random", n=6, seed=1)
    _, p = _case("random", n=6, seed=2)
    loss, (ga, gp) = _run(ml.npairs_loss, labels, a, p)
    np.testing.assert_allclose(loss, _npairs_np(labels, a, p), rtol=1e-5)
    np.testing.assert_allclose(ga, _numgrad(lambda v: _npairs_np(labels, v, p), a), atol=1e-4)
    np.testing.assert_allclose(gp, _numgrad(lambda v: _npairs_np(labels, a, v), p), atol=1e-4)


def test_npairs_multilabel_is_intersection_counts():
    multi = [[0, 2], [1], [2, 3], [0, 1, 2]]
    ind = np.zeros((4, 5), np.float32)
    for i, ls in enumerate(multi):
        ind[i, ls] = 1
    _, a = _case("random", n=4, seed=3)
    _, p = _case("random", n=4, seed=4)
    with tf.Graph().as_default(), tf.Session() as s:
        sp = [
            tf.SparseTensor([[0, c] for c in ls], np.ones(len(ls), np.float32), [1, 5])
            for ls in multi
        ]
        got = s.run(ml.npairs_loss_multilabel(sp, a, p, reg_lambda=0.01))
        with pytest.raises(TypeError, match="list of SparseTensors"):
            ml.npairs_loss_multilabel([ind[0]], a, p)
    l2 = 0.25 * 0.01 * ((a.astype(float) ** 2).sum(1).mean() + (p.astype(float) ** 2).sum(1).mean())
    want = l2 + _xent_rows(a.astype(float) @ p.T.astype(float), ind @ ind.T)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_contrastive_loss():
    _, a = _case("random", n=6, seed=5)
    _, p = _case("random", n=6, seed=6)
    y = np.array([1, 0, 1, 0, 0, 1], np.int32)
    p[1] = a[1] + 0.1  # a negative pair inside the margin
    loss, (ga, _) = _run(ml.contrastive_loss, y, a, p)
    d = np.linalg.norm(a.astype(float) - p, axis=1)
    want = np.mean(y * d**2 + (1 - y) * np.maximum(1.0 - d, 0) ** 2)
    np.testing.assert_allclose(loss, want, rtol=1e-5)
    assert ga.shape == a.shape


def test_shape_errors_name_the_argument():
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="triplet_semihard_loss: labels must be 1-D"):
            ml.triplet_semihard_loss(np.zeros((2, 2), np.int32), np.zeros((2, 3), np.float32))
        with pytest.raises(ValueError, match="lifted_struct_loss: embeddings must be 2-D"):
            ml.lifted_struct_loss(np.zeros(2, np.int32), np.zeros(3, np.float32))


# ---- against TensorFlow Addons (TF 2.15) ---------------------------------------------------------


def _tfa_run(fn, labels, *embs):
    tf2 = pytest.importorskip("tensorflow")
    with tf2.Graph().as_default():
        ph = [tf2.constant(e) for e in embs]
        loss = fn(tf2.constant(labels), *ph)
        grads = tf2.gradients(loss, ph)
        with tf2.compat.v1.Session() as s:
            return s.run([loss, grads])


@pytest.mark.parametrize("kind", ["random", "ties", "same", "distinct"])
@pytest.mark.parametrize("loss", ["triplet_semihard", "lifted_struct"])
def test_against_tensorflow_addons(kind, loss):
    tfa_losses = pytest.importorskip("tensorflow_addons.losses")
    labels, x = _case(kind, n=9, d=3, seed=7)
    if loss == "triplet_semihard":  # contrib's is tfa's with squared distances
        theirs = _tfa_run(
            lambda y, e: tfa_losses.triplet_semihard_loss(y, e, distance_metric="squared-L2"),
            labels,
            x,
        )
        ours = _run(ml.triplet_semihard_loss, labels, x)
    else:
        theirs = _tfa_run(tfa_losses.lifted_struct_loss, labels, x)
        ours = _run(ml.lifted_struct_loss, labels, x)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5, atol=1e-6, equal_nan=True)
    np.testing.assert_allclose(ours[1][0], theirs[1][0], rtol=1e-4, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("kind", ["random", "ties", "same", "distinct"])
def test_npairs_against_tensorflow_addons(kind):
    tfa_losses = pytest.importorskip("tensorflow_addons.losses")
    tf2 = pytest.importorskip("tensorflow")
    labels, a = _case(kind, n=8, d=3, seed=8)
    _, p = _case("random", n=8, d=3, seed=9)
    if kind == "ties":
        p[2] = p[4]

    def theirs_fn(y, ea, ep):
        l2 = (
            0.25
            * 0.002
            * (
                tf2.reduce_mean(tf2.reduce_sum(ea**2, 1))
                + tf2.reduce_mean(tf2.reduce_sum(ep**2, 1))
            )
        )
        return l2 + tfa_losses.npairs_loss(y, tf2.matmul(ea, ep, transpose_b=True))

    theirs = _tfa_run(theirs_fn, labels, a, p)
    ours = _run(ml.npairs_loss, labels, a, p)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5)
    for g_h, g_t in zip(ours[1], theirs[1], strict=True):
        np.testing.assert_allclose(g_h, g_t, rtol=1e-4, atol=1e-6)

    # multilabel: tfa takes the dense indicator matrix
    ind = (np.random.default_rng(10).random((8, 4)) < 0.5).astype(np.float32)
    ind[:, 0] = 1  # every row has a label
    theirs_m = _tfa_run(
        lambda y, ea, ep: (
            0.25
            * 0.002
            * (
                tf2.reduce_mean(tf2.reduce_sum(ea**2, 1))
                + tf2.reduce_mean(tf2.reduce_sum(ep**2, 1))
            )
            + tfa_losses.npairs_multilabel_loss(y, tf2.matmul(ea, ep, transpose_b=True))
        ),
        ind,
        a,
        p,
    )
    with tf.Graph().as_default():
        ea, ep = tf.constant(a), tf.constant(p)
        sp = [
            tf.SparseTensor(np.argwhere(r != 0), r[r != 0], [ind.shape[1]]) for r in ind
        ]  # 1-D SparseTensors, one per pair
        loss = ml.npairs_loss_multilabel(sp, ea, ep)
        with tf.Session() as s:
            ours_m = s.run([loss, tf.gradients(loss, [ea, ep])])
    np.testing.assert_allclose(ours_m[0], theirs_m[0], rtol=1e-5)
    for g_h, g_t in zip(ours_m[1], theirs_m[1], strict=True):
        np.testing.assert_allclose(g_h, g_t, rtol=1e-4, atol=1e-6)


def test_contrastive_against_tensorflow_addons():
    tfa_losses = pytest.importorskip("tensorflow_addons.losses")
    tf2 = pytest.importorskip("tensorflow")
    _, a = _case("random", n=7, d=3, seed=11)
    _, p = _case("random", n=7, d=3, seed=12)
    p[0] = a[0] + 0.05
    p[1] = a[1] + 0.2
    y = np.array([1, 0, 0, 1, 0, 1, 0], np.int32)
    theirs = _tfa_run(
        lambda yy, ea, ep: tf2.reduce_mean(
            tfa_losses.contrastive_loss(yy, tf2.norm(ea - ep, axis=1), margin=1.5)
        ),
        y,
        a,
        p,
    )
    ours = _run(lambda yy, ea, ep: ml.contrastive_loss(yy, ea, ep, margin=1.5), y, a, p)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5)
    for g_h, g_t in zip(ours[1], theirs[1], strict=True):
        np.testing.assert_allclose(g_h, g_t, rtol=1e-4, atol=1e-6)


# ---- cluster_loss --------------------------------------------------------------------------------


def test_cluster_loss_separated_clusters_is_zero_and_choices_are_medoids():
    rng = np.random.default_rng(3)
    centers = np.array([[0, 0], [10, 0], [0, 10]], np.float32)
    labels = np.repeat([0, 1, 2], 4).astype(np.int32)
    x = (centers[labels] + rng.normal(0, 0.3, (12, 2))).astype(np.float32)
    from hetbed.compat.v1.contrib_metric_learning import cluster_choices_np

    chosen, score, gt = cluster_choices_np(_pdist(x, False), labels, 1.0, True, "nmi")
    assert score == pytest.approx(1.0)
    assert sorted(chosen) == sorted(gt)
    for c, g in zip(np.unique(labels), gt, strict=True):
        members = np.flatnonzero(labels == c)
        sums = _pdist(x, False)[np.ix_(members, members)].sum(0)
        assert g == members[np.argmin(sums)]
    with tf.Graph().as_default(), tf.Session() as s:
        loss = ml.cluster_loss(labels[:, None], x, margin_multiplier=1.0)
        assert s.run(loss) == pytest.approx(0.0, abs=1e-4)


@pytest.mark.parametrize("margin_type", ["nmi", "ari", "const"])
def test_cluster_loss_value_and_gradient(margin_type):
    rng = np.random.default_rng(4)
    x = rng.normal(size=(9, 3)).astype(np.float32)
    labels = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2], np.int32)
    from hetbed.compat.v1.contrib_metric_learning import cluster_choices_np

    d = _pdist(x, False)
    chosen, score, gt = cluster_choices_np(d, labels, 2.0, True, margin_type)

    def loss_np(v):  # the choices held fixed: TF's loss is smooth in the distances then
        dd = _pdist(v, False)
        pred = -dd[chosen].min(0).sum()
        same = labels[:, None] == labels[None]
        gt_score = -(same * dd).sum(0)[gt].sum()
        return max(pred + 2.0 * (1 - score) - gt_score, 0.0)

    loss, (g,) = _run(
        lambda y, e: ml.cluster_loss(y, e, margin_multiplier=2.0, margin_type=margin_type),
        labels,
        x,
    )
    np.testing.assert_allclose(loss, loss_np(x), rtol=1e-4)
    np.testing.assert_allclose(g, _numgrad(loss_np, x), rtol=1e-3, atol=1e-3)
    with tf.Graph().as_default(), pytest.raises(ValueError, match="margin_type"):
        ml.cluster_loss(labels, x, 1.0, margin_type="f1")
