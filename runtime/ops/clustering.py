"""The k-means ops of TF's ``gen_clustering_ops`` (what ``tf.contrib.factorization.KMeans``
builds on): ``NearestNeighbors`` and ``KmeansPlusPlusInitialization``.

``NearestNeighbors(points, centers, k)`` gives, for each row of ``points``, the ``k`` nearest
rows of ``centers`` (``min(k, num_centers)`` of them) and their squared euclidean distances,
computed as TF's kernel does in float32: ``2 * (|x|^2 / 2 + (|c|^2 / 2 - x.c))``, nearest first,
the lower center index first among equal distances.

``KmeansPlusPlusInitialization(points, num_to_sample, seed, num_retries_per_sample)`` samples
``num_to_sample`` distinct rows of ``points``: the first uniformly, each next one with
probability proportional to its squared distance to the nearest row chosen so far, keeping the
best (lowest total distance) of ``1 + num_retries_per_sample`` draws (a negative count means
``2 + floor(log(num_to_sample))``). The draws come from a numpy generator seeded with ``seed``,
so one seed gives the same rows at every run, as TF's kernel does (TF's Philox stream itself is
not reproduced: the rows chosen differ from TensorFlow's).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import TensorShape
from ..registry import apply, convert_to_tensor, defop

NearestNeighbors = defop("NearestNeighbors", differentiable=False)


@NearestNeighbors.shape
def _nearest_neighbors_shape(op):
    points, centers, k = op.inputs
    for t, what in ((points, "points"), (centers, "centers")):
        if t.shape.ndims not in (None, 2):
            raise InvalidArgumentError(
                f"NearestNeighbors {op.name!r}: input {what} should be a matrix, got shape "
                f"{t.shape}"
            )
    n = points.shape[0] if points.shape.ndims == 2 else None
    shape = TensorShape([n, None])
    return [(shape, _dt.int64), (shape, _dt.float32)]


def nearest_neighbors_np(points: Any, centers: Any, k: int, where: str) -> tuple:
    """The kernel on numpy arrays (``where`` names the op in errors)."""
    points = np.asarray(points, np.float32)
    centers = np.asarray(centers, np.float32)
    if points.ndim != 2:
        raise InvalidArgumentError(f"{where}: input points should be a matrix.")
    if centers.ndim != 2:
        raise InvalidArgumentError(f"{where}: input centers should be a matrix.")
    if points.shape[0] == 0:
        raise InvalidArgumentError(f"{where}: expected points.rows() > 0.")
    if points.shape[1] != centers.shape[1]:
        raise InvalidArgumentError(
            f"{where}: expected point_dimensions == center_dimensions: {points.shape[1]} vs "
            f"{centers.shape[1]}."
        )
    if k < 0:
        raise InvalidArgumentError(f"{where}: expected k >= 0.")
    k = min(k, centers.shape[0])
    n = points.shape[0]
    if k == 0:
        return np.zeros((n, 0), np.int64), np.zeros((n, 0), np.float32)
    half = np.float32(0.5)
    points_half = half * np.einsum("ij,ij->i", points, points, dtype=np.float32)
    centers_half = half * np.einsum("ij,ij->i", centers, centers, dtype=np.float32)
    partial = centers_half[None, :] - points @ centers.T  # [n, m] float32
    if k == 1:
        idx = np.argmin(partial, axis=1)[:, None]  # the first of equal minima, as Eigen's
    else:
        idx = np.argsort(partial, axis=1, kind="stable")[:, :k]
    best = np.take_along_axis(partial, idx, axis=1)
    dist = np.float32(2.0) * (points_half[:, None] + best)
    return idx.astype(np.int64), dist.astype(np.float32)


@NearestNeighbors.kernel("cpu")
def _nearest_neighbors(ctx, points, centers, k):
    return nearest_neighbors_np(points, centers, int(k), f"NearestNeighbors {ctx.op.name!r}")


def nearest_neighbors(points: Any, centers: Any, k: Any, name: Any = None) -> tuple:
    """``(nearest_center_indices, nearest_center_distances)``, each ``[num_points, min(k,
    num_centers)]``: the ``k`` nearest centers of each point and its squared distances to
    them."""
    p = convert_to_tensor(points, _dt.float32)
    c = convert_to_tensor(centers, _dt.float32)
    kk = convert_to_tensor(k, _dt.int64)
    for t, what in ((p, "points"), (c, "centers")):
        if t.dtype != _dt.float32:
            raise TypeError(f"nearest_neighbors: {what} must be float32, got {t.dtype.name}")
    idx, dist = apply("NearestNeighbors", [p, c, kk], {}, name or "NearestNeighbors")
    return idx, dist


KmeansPlusPlusInitialization = defop("KmeansPlusPlusInitialization", differentiable=False)


@KmeansPlusPlusInitialization.shape
def _kmpp_shape(op):
    points = op.inputs[0]
    if points.shape.ndims not in (None, 2):
        raise InvalidArgumentError(
            f"KmeansPlusPlusInitialization {op.name!r}: input points should be a matrix, got "
            f"shape {points.shape}"
        )
    d = points.shape[1] if points.shape.ndims == 2 else None
    return [(TensorShape([None, d]), _dt.float32)]


def kmeans_plus_plus_np(points: Any, num_to_sample: int, seed: int, retries: int, where: str):
    """The kernel on numpy arrays: the sampled rows ``[num_to_sample, dims]``."""
    points = np.asarray(points, np.float32)
    if points.ndim != 2:
        raise InvalidArgumentError(f"{where}: input points should be a matrix.")
    n = points.shape[0]
    if n <= 0:
        raise InvalidArgumentError(f"{where}: expected points.rows() > 0.")
    if num_to_sample <= 0:
        raise InvalidArgumentError(f"{where}: expected num_to_sample > 0.")
    if num_to_sample > n:
        raise InvalidArgumentError(
            f"{where}: expected num_to_sample <= points.rows(). {num_to_sample} vs {n}."
        )
    if retries < 0:
        retries = 2 + int(np.log(num_to_sample))
    rng = np.random.default_rng(int(seed) & 0xFFFFFFFFFFFFFFFF)
    half = np.float32(0.5) * np.einsum("ij,ij->i", points, points, dtype=np.float32)
    min_d = np.full(n, np.inf, np.float32)
    chosen: list[int] = []
    taken = np.zeros(n, bool)

    def half_sq_to(i: int) -> np.ndarray:
        return (half - points @ points[i]) + half[i]

    def draw(cumsum: np.ndarray | None) -> int:
        while True:
            if cumsum is None or not cumsum[-1] > 0:
                i = int(rng.integers(n))
            else:
                u = np.float32(rng.random(dtype=np.float32)) * cumsum[-1]
                i = min(int(np.searchsorted(cumsum, u, side="right")), n - 1)
            if not taken[i]:
                return i

    for s in range(num_to_sample):
        cumsum = np.cumsum(min_d, dtype=np.float32) if s > 0 else None
        best_i, best_pot, best_d = 0, np.inf, min_d
        for _ in range(1 + retries):
            i = draw(cumsum)
            new_d = np.minimum(min_d, half_sq_to(i))
            pot = float(new_d.sum(dtype=np.float32))
            if pot < best_pot:
                best_i, best_pot, best_d = i, pot, new_d
            if retries == 0:
                break
        min_d = best_d
        taken[best_i] = True
        chosen.append(best_i)
    return points[chosen].copy()


@KmeansPlusPlusInitialization.kernel("cpu")
def _kmpp(ctx, points, num_to_sample, seed, retries):
    return kmeans_plus_plus_np(
        points,
        int(num_to_sample),
        int(seed),
        int(retries),
        f"KmeansPlusPlusInitialization {ctx.op.name!r}",
    )


def kmeans_plus_plus_initialization(
    points: Any, num_to_sample: Any, seed: Any, num_retries_per_sample: Any, name: Any = None
) -> Any:
    """``num_to_sample`` rows of ``points`` chosen by k-means++ (see the module docstring)."""
    ins = [
        convert_to_tensor(points, _dt.float32),
        convert_to_tensor(num_to_sample, _dt.int64),
        convert_to_tensor(seed, _dt.int64),
        convert_to_tensor(num_retries_per_sample, _dt.int64),
    ]
    return apply("KmeansPlusPlusInitialization", ins, {}, name or "KmeansPlusPlusInitialization")


KMC2ChainInitialization = defop("KMC2ChainInitialization", differentiable=False)


@KMC2ChainInitialization.shape
def _kmc2_shape(op):
    return [(TensorShape([]), _dt.int64)]


def kmc2_chain_np(distances: Any, seed: int, where: str) -> int:
    """One k-MC2 Markov chain over ``distances`` (TF's kernel): start at 0 and move to
    candidate ``i`` when ``d[i] > u * d[current]``, ``u`` uniform in [0, 1); the last state."""
    d = np.asarray(distances, np.float32)
    if d.ndim != 1:
        raise InvalidArgumentError(f"{where}: input distances should be a vector.")
    if d.size == 0:
        raise InvalidArgumentError(f"{where}: expected distances_tensor.size() > 0.")
    rng = np.random.default_rng(int(seed) & 0xFFFFFFFFFFFFFFFF)
    u = rng.random(d.size, dtype=np.float32)
    sel = 0
    for i in range(1, d.size):
        if d[i] > u[i] * d[sel]:
            sel = i
    return sel


@KMC2ChainInitialization.kernel("cpu")
def _kmc2(ctx, distances, seed):
    return np.int64(kmc2_chain_np(distances, int(seed), f"KMC2ChainInitialization {ctx.op.name!r}"))


def kmc2_chain_initialization(distances: Any, seed: Any, name: Any = None) -> Any:
    """The index of the new center one k-MC2 chain over ``distances`` picks (hetbed's
    generator: not TF's Philox stream)."""
    ins = [convert_to_tensor(distances, _dt.float32), convert_to_tensor(seed, _dt.int64)]
    return apply("KMC2ChainInitialization", ins, {}, name or "KMC2ChainInitialization")


KmeansKmc2Centers = defop("KmeansKmc2Centers", differentiable=False)


@KmeansKmc2Centers.shape
def _kmc2_centers_shape(op):
    points = op.inputs[0]
    d = points.shape[1] if points.shape.ndims == 2 else None
    return [(TensorShape([None, d]), _dt.float32)]


@KmeansKmc2Centers.kernel("cpu")
def _kmc2_centers(ctx, points, centers, num_remaining, chain_length, seed, normalize):
    """TF's k-MC2 loop of ``contrib.factorization.KMeans``' init op in one kernel: with no
    center yet, the first point (once, whatever the count asked); else for each of ``max(min(
    remaining, rows // chain_length), 1)`` subsets of ``chain_length`` rows, one chain over the
    subset's squared distances to the centers so far, its pick appended (l2-normalized with
    ``normalize``, as TF's cosine path). Returns all the centers."""
    where = f"KmeansKmc2Centers {ctx.op.name!r}"
    pts = np.asarray(points, np.float32)
    cs = np.asarray(centers, np.float32).reshape(-1, pts.shape[1]) if np.size(centers) else None
    if pts.ndim != 2 or pts.shape[0] == 0:
        raise InvalidArgumentError(f"{where}: points must be a non-empty matrix")

    def new(row: np.ndarray) -> np.ndarray:
        if not bool(normalize):
            return row.copy()
        norm = np.sqrt(np.maximum(np.sum(row * row, axis=1, keepdims=True), 1e-12))
        return (row / norm).astype(np.float32)

    if cs is None or cs.shape[0] == 0:
        return new(pts[:1])
    length = int(chain_length)
    n_sample = max(min(int(num_remaining), int(pts.shape[0] / length)), 1)
    for i in range(n_sample):
        subset = pts[i * length : (i + 1) * length]
        if subset.shape[0] == 0:
            raise InvalidArgumentError(f"{where}: subset {i} of the batch is empty")
        _, dist = nearest_neighbors_np(subset, cs, 1, where)
        idx = kmc2_chain_np(dist[:, 0], int(seed), where)
        cs = np.concatenate([cs, new(subset[idx : idx + 1])], 0)
    return cs


__all__ = ["nearest_neighbors", "kmeans_plus_plus_initialization", "kmc2_chain_initialization"]
