"""cupyx (fake): scatter_add, errstate."""

from __future__ import annotations

from cupy._core import _unwrap, ndarray


def scatter_add(a: ndarray, slices, value) -> None:
    import numpy as np

    target = _unwrap(a, "cupyx.scatter_add")
    idx = _unwrap(slices, "cupyx.scatter_add", allow_host=True)
    if isinstance(slices, tuple):
        idx = tuple(_unwrap(s, "cupyx.scatter_add", allow_host=True) for s in slices)
    v = _unwrap(value, "cupyx.scatter_add")
    np.add.at(target, idx, v)


def errstate(linalg: str | None = None):
    """cupyx.errstate (fake): numpy's solvers under the stand-in raise LinAlgError whatever it
    says, as real cupy's do under ``errstate(linalg="raise")``."""
    import contextlib

    return contextlib.nullcontext()
