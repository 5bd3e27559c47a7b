"""``keras.datasets``: ``load_data`` reads the file Keras would have downloaded from Keras's
cache (``~/.keras/datasets``, or ``$KERAS_HOME/datasets``); hetbed never downloads, so without
that file it raises, saying how to pass arrays instead."""

from __future__ import annotations

import gzip
import os
import types
from typing import Any

import numpy as np


def _cache_dir() -> str:
    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    return os.path.join(home, "datasets")


def cached_file(fname: str, origin: str = "") -> str:
    path = os.path.join(_cache_dir(), fname)
    if not os.path.exists(path):
        raise OSError(
            f"keras: {path} is not in Keras's cache and hetbed does not download (no network); "
            f"put the file there{f' (from {origin})' if origin else ''}, or build numpy arrays "
            "yourself and pass them to model.fit(x, y)"
        )
    return path


def _npz_loader(name: str, fname: str) -> Any:
    def load_data(path: str = fname) -> tuple:
        with np.load(cached_file(path), allow_pickle=False) as f:
            return (f["x_train"], f["y_train"]), (f["x_test"], f["y_test"])

    load_data.__doc__ = f"{name}: ((x_train, y_train), (x_test, y_test)) from the cached {fname}."
    return types.SimpleNamespace(load_data=load_data)


def _idx(path: str, offset: int, shape: tuple) -> np.ndarray:
    with gzip.open(path, "rb") as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset).reshape(shape)


def _fashion_load_data() -> tuple:
    """Fashion-MNIST from the four gzip files in the cache's ``fashion-mnist`` folder."""
    base = os.path.join("fashion-mnist", "")
    files = [
        "train-labels-idx1-ubyte.gz",
        "train-images-idx3-ubyte.gz",
        "t10k-labels-idx1-ubyte.gz",
        "t10k-images-idx3-ubyte.gz",
    ]
    paths = [cached_file(base + f) for f in files]
    y_train = _idx(paths[0], 8, (-1,))
    x_train = _idx(paths[1], 16, (len(y_train), 28, 28))
    y_test = _idx(paths[2], 8, (-1,))
    x_test = _idx(paths[3], 16, (len(y_test), 28, 28))
    return (x_train, y_train), (x_test, y_test)


mnist = _npz_loader("mnist", "mnist.npz")
boston_housing = _npz_loader("boston_housing", "boston_housing.npz")
fashion_mnist = types.SimpleNamespace(load_data=_fashion_load_data)


def _missing(name: str) -> Any:
    def load_data(*args: Any, **kwargs: Any) -> Any:
        raise OSError(
            f"keras.datasets.{name}: hetbed does not download (no network) and cannot read this "
            "data set's cache; build numpy arrays yourself and pass them to model.fit(x, y)"
        )

    return types.SimpleNamespace(load_data=load_data)


cifar10, cifar100, imdb, reuters = (_missing(n) for n in ("cifar10", "cifar100", "imdb", "reuters"))
