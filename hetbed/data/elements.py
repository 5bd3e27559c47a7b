"""Elements of ``hb.data`` datasets: an element is an array or a nest (tuples, dicts; a list is
one array, as in tf.data) of arrays; a dataset's source values are numpy arrays or graph tensors
it *captures*, bound to their values when its iterator starts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from hetbed.runtime import dtypes as _dt
from hetbed.runtime.errors import FailedPreconditionError
from hetbed.runtime.graph import Tensor, TensorShape


def _flatten(s: Any) -> list:
    if isinstance(s, dict):
        return [x for k in sorted(s) for x in _flatten(s[k])]
    if isinstance(s, tuple):  # as in tf.data, a list is one array, not a nest
        return [x for v in s for x in _flatten(v)]
    return [s]


def _pack(template: Any, flat: list) -> Any:
    it = iter(flat)

    def go(t: Any) -> Any:
        if isinstance(t, dict):
            return {k: go(t[k]) for k in sorted(t)}
        if isinstance(t, tuple):
            return tuple(go(v) for v in t)
        return next(it)

    return go(template)


def _map_nest(fn: Callable, s: Any) -> Any:
    return _pack(s, [fn(x) for x in _flatten(s)])


def _to_array(x: Any, where: str, capture: bool = False) -> Any:
    if capture and hasattr(x, "_as_graph_element") and not isinstance(x, Tensor):
        x = x._as_graph_element()  # a variable: its value, read as the dataset starts
    if isinstance(x, Tensor):
        if capture:
            return x  # read when an initializable iterator is initialized (see Iterator)
        raise TypeError(
            f"Dataset.{where}: got the graph tensor {x.name}; hetbed datasets take numpy values "
            "here (feed tensors through a placeholder instead)"
        )
    a = np.asarray(x)
    if a.dtype.kind in "SUO":  # strings: object arrays of bytes (str is utf-8), as tf.string
        return _dt.to_string_array(a, f"Dataset.{where}")
    if not isinstance(x, (np.ndarray, np.generic)):  # Python numbers: TF's float32 and int32
        if a.dtype == np.float64:
            a = a.astype(np.float32)
        elif a.dtype == np.int64:
            a = a.astype(np.int32)
    _dt.as_dtype(a.dtype)  # raises for types hetbed lacks
    return a


def _bound(arrs: list, env: dict) -> list:
    """``arrs`` with each captured graph tensor replaced by its value in ``env``."""
    out = []
    for a in arrs:
        if isinstance(a, Tensor):
            if a not in env:
                raise FailedPreconditionError(
                    f"the dataset reads the graph tensor {a.name}, which has no value here: use "
                    "make_initializable_iterator and feed it when running the initializer"
                )
            v = env[a]
            out.append(v if isinstance(v, np.ndarray) else np.asarray(v))
        else:
            out.append(a)
    return out


def _ndim(a: Any) -> int | None:
    return a.shape.ndims if isinstance(a, Tensor) else a.ndim


def _shape_of(a: Any) -> list | None:
    if isinstance(a, Tensor):
        return a.shape.as_list() if a.shape.ndims is not None else None
    return list(a.shape)


def _flatten_shapes(s: Any) -> list:
    """Flatten a nest of shapes, where a shape is a list of ints/None or a TensorShape."""
    if isinstance(s, (TensorShape, Tensor)) or s is None:
        return [s]
    if isinstance(s, dict):
        return [x for k in sorted(s) for x in _flatten_shapes(s[k])]
    if isinstance(s, (tuple, list)) and all(
        d is None or isinstance(d, (int, np.integer)) for d in s
    ):
        return [list(s)]
    return [x for v in s for x in _flatten_shapes(v)]
