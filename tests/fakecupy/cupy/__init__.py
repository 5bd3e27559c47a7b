"""Fake cupy (test-only): numpy underneath, cupy's strictness on top. See ``_core``."""

from __future__ import annotations

import types as _types
from typing import Any as _Any

import numpy as _np

from . import cuda  # noqa: F401
from ._core import (  # noqa: F401
    STATE,
    array,
    asarray,
    ascontiguousarray,
    asnumpy,
    get_array_module,
    get_default_memory_pool,
    get_default_pinned_memory_pool,
    ndarray,
)
from ._core import _function as _fn
from ._core import reset as _reset  # noqa: F401

__version__ = "0.0-fake"
is_fake = True

_PASS = {
    "newaxis",
    "pi",
    "e",
    "inf",
    "nan",
    "dtype",
    "bool_",
    "generic",
    "number",
    "integer",
    "floating",
    "signedinteger",
    "unsignedinteger",
    "complexfloating",
    "iinfo",
    "finfo",
    "result_type",
    "promote_types",
    "can_cast",
    "issubdtype",
    "ndim",
    "isscalar",
}


lib = _types.SimpleNamespace(
    stride_tricks=_types.SimpleNamespace(
        sliding_window_view=_fn("lib.stride_tricks.sliding_window_view"),
        as_strided=_fn("lib.stride_tricks.as_strided"),
    )
)


def __getattr__(name: str) -> _Any:
    v = getattr(_np, name, None)
    if v is None or name.startswith("_"):
        raise AttributeError(f"module 'cupy' (fake) has no attribute {name!r}")
    if name in _PASS or isinstance(v, type) or not callable(v):
        return v
    f = _fn(name)
    globals()[name] = f
    return f


# cupy.linalg (WP1): numpy.linalg on the stand-in's buffers
linalg = _types.SimpleNamespace(
    LinAlgError=_np.linalg.LinAlgError,
    **{
        n: _fn(f"linalg.{n}")
        for n in "inv det cholesky solve qr svd eigh eigvalsh norm slogdet".split()
    },
)
