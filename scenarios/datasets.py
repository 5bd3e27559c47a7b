"""Small real data sets that need no download (scikit-learn ships them)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Split:
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray

    @property
    def num_classes(self) -> int:
        return int(max(self.y_train.max(), self.y_test.max())) + 1


def digits(seed: int = 0, test_fraction: float = 0.25, image: bool = False) -> Split:
    """scikit-learn's 8x8 handwritten digits (1,797 images), scaled to [0, 1], split by a fixed
    permutation of ``seed``. ``image=True`` gives NHWC images (N, 8, 8, 1) instead of 64 features.
    """
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int32)
    perm = np.random.default_rng(seed).permutation(len(x))
    x, y = x[perm], y[perm]
    n_test = int(round(len(x) * test_fraction))
    if image:
        x = x.reshape(-1, 8, 8, 1)
    return Split(x[n_test:], y[n_test:], x[:n_test], y[:n_test])


def batches(x: np.ndarray, y: np.ndarray, batch_size: int, rng: np.random.Generator):
    """One epoch of shuffled mini-batches (the last partial batch is dropped)."""
    idx = rng.permutation(len(x))
    for i in range(0, len(x) - batch_size + 1, batch_size):
        j = idx[i : i + batch_size]
        yield x[j], y[j]
