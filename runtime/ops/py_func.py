"""PyFunc: an op that calls a Python function on numpy arrays (TF1's ``tf.py_func`` and
``tf.numpy_function``).

The function stays in this process, held per graph under a token (the op's only reference to
it), so the op runs on a CPU of the process that built the graph. A graph sent to a task of the
distributed runtime, or read back from a file, has the token but not the function: the op fails
there with InvalidArgumentError. A shape-only simulation cannot call it either: it needs every
output's shape declared (``set_shape``) and fails with InvalidArgumentError otherwise. No
gradient, as in TF.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError, OpError
from ..graph import TensorShape, get_default_graph
from ..registry import Cost, apply_op, convert_to_tensor, defop

_FUNCS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # graph -> {token: fn}
_LOCK = threading.Lock()
_COUNTER = itertools.count()

PyFunc = defop("PyFunc", stateful=True, differentiable=False)


@PyFunc.shape
def _py_func_shape(op):
    return [(TensorShape(None), dt) for dt in op.attrs["Tout"]]


@PyFunc.cost
def _py_func_cost(op, ins, outs):
    return Cost()


def _expected_shapes(op, in_shapes):
    declared = [t.shape for t in op.outputs]
    if all(s.is_fully_defined() for s in declared):
        return [tuple(s.as_list()) for s in declared]
    raise InvalidArgumentError(
        f"PyFunc {op.name!r}: a shape-only simulation cannot call a Python function and its "
        f"output shapes are unknown; declare them with set_shape() on its outputs"
    )


PyFunc.expected_shapes = _expected_shapes


@PyFunc.kernel("cpu")
def _py_func(ctx, *args):
    op = ctx.op
    fn = _FUNCS.get(op.graph, {}).get(op.attrs["token"])
    if fn is None:
        raise InvalidArgumentError(
            f"PyFunc {op.name!r}: its Python function is not in this process (a py_func runs "
            f"only in the process that built the graph, not in a remote task of the distributed "
            f"runtime or in a graph read back from a file)"
        )
    try:
        result = fn(*[np.asarray(a) for a in args])
    except OpError:
        raise
    except Exception as e:  # noqa: BLE001 - any failure of user code
        raise InvalidArgumentError(f"PyFunc {op.name!r}: {type(e).__name__}: {e}") from e
    touts = op.attrs["Tout"]
    if op.attrs["single"]:
        results = [result]
    elif result is None:
        results = []
    else:
        results = list(result) if isinstance(result, (list, tuple)) else [result]
    if len(results) != len(touts):
        raise InvalidArgumentError(
            f"PyFunc {op.name!r}: the function returned {len(results)} values, Tout lists "
            f"{len(touts)}"
        )
    outs = []
    for i, (r, dt, t) in enumerate(zip(results, touts, op.outputs)):
        a = np.asarray(r)
        if a.dtype != dt.np and not (a.dtype.kind in "SUO" and dt.np.kind in "SUO"):
            raise InvalidArgumentError(
                f"PyFunc {op.name!r}: output {i} is {a.dtype}, Tout says {dt.name}"
            )
        if not t.shape.is_compatible_with(a.shape):
            raise InvalidArgumentError(
                f"PyFunc {op.name!r}: output {i} has shape {a.shape}, declared {t.shape}"
            )
        outs.append(a)
    if not outs:
        return None
    return tuple(outs) if len(outs) != 1 else outs[0]


def py_func(
    func: Callable,
    inp: Any,
    Tout: Any,  # noqa: N803 - TF's name
    stateful: bool = True,
    name: str | None = None,
) -> Any:
    """TF1's ``tf.py_func``: an op (CPU only) that calls ``func`` with its inputs as numpy
    arrays. ``Tout`` is a dtype (one output, returned as a tensor) or a list of dtypes (a list of
    tensors); the outputs have unknown shapes. An exception raised by ``func`` fails the step
    with InvalidArgumentError naming the op and the exception."""
    single = not isinstance(Tout, (list, tuple))
    touts = tuple(_dt.as_dtype(d) for d in ([Tout] if single else Tout))
    inputs = [convert_to_tensor(x) for x in (inp if isinstance(inp, (list, tuple)) else [inp])]
    g = inputs[0].graph if inputs else get_default_graph()
    token = f"pyfunc_{next(_COUNTER)}"
    with _LOCK:
        _FUNCS.setdefault(g, {})[token] = func
    op = apply_op(
        "PyFunc",
        inputs,
        {"token": token, "Tout": touts, "single": single, "stateful": bool(stateful)},
        name=name or "PyFunc",
        graph=g,
    )
    if single:
        return op.outputs[0]
    return list(op.outputs)


def numpy_function(
    func: Callable,
    inp: Any,
    Tout: Any,  # noqa: N803 - TF's name
    name: str | None = None,
    stateful: bool = True,
) -> Any:
    """TF's ``tf.numpy_function``: ``py_func`` under its newer name."""
    return py_func(func, inp, Tout, stateful=stateful, name=name)


class _EagerLike(np.ndarray):
    """An input of ``py_function``'s function: a numpy array that also answers TF2's eager
    tensor API the function may use (``.numpy()``)."""

    def numpy(self) -> np.ndarray:
        return np.asarray(self)


def py_function(func: Callable, inp: Any, Tout: Any, name: str | None = None) -> Any:  # noqa: N803
    """TF's ``tf.py_function``: ``py_func`` whose function gets its inputs as arrays with a
    ``.numpy()`` method (the eager tensors TF passes) and may return such values."""

    def call(*arrays: Any) -> Any:
        out = func(*[np.asarray(a).view(_EagerLike) for a in arrays])
        if isinstance(out, (list, tuple)):
            return [o.numpy() if hasattr(o, "numpy") else o for o in out]
        return out.numpy() if hasattr(out, "numpy") else out

    return py_func(call, inp, Tout, stateful=True, name=name or "EagerPyFunc")
