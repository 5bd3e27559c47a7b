"""Gradients a program defines: TF1's ``RegisterGradient`` with ``Graph.gradient_override_map``
(a gradient-reversal layer, a py_func's gradient), ``NotDifferentiable``, and
``custom_gradient`` (a function returning its value and the function of its gradient).

A registered gradient has TF's signature ``fn(op, *output_grads) -> [grad per input]``. An op
built inside ``gradient_override_map({"Identity": "ReverseGrad"})`` carries the attr
``_gradient_op_type`` = "ReverseGrad" (as in TF), and ``gradients`` calls the function
registered under that name instead of the op type's own. ``custom_gradient`` is TF's graph-mode
construction: the results and the inputs go through one ``IdentityN`` op whose gradient, registered
under a fresh name, calls the user's gradient function on the results' gradients and gives it to
the inputs (the results' own computation is not differentiated).
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Callable
from typing import Any

from .errors import InvalidArgumentError
from .graph import Operation, TensorShape, get_default_graph
from .registry import apply_op, convert_to_tensor, defop

_REGISTRY: dict[str, Callable] = {}
_NOT_DIFFERENTIABLE: set[str] = set()
_LOCK = threading.Lock()
_IDS = itertools.count(1)


class RegisterGradient:
    """Decorator: ``@RegisterGradient("Name") def grad(op, *grads)`` registers ``grad`` under
    ``Name``, for ops whose gradient ``gradient_override_map`` maps to it (or of a type of that
    name with no gradient of its own)."""

    def __init__(self, op_type: str):
        if not isinstance(op_type, str):
            raise TypeError("op_type must be a string")
        self._name = op_type

    def __call__(self, fn: Callable) -> Callable:
        from .registry import _REGISTRY as _OPS

        with _LOCK:
            own = _OPS.get(self._name)
            if self._name in _REGISTRY or (own is not None and own.grad_fn is not None):
                raise KeyError(f"Registering two gradient with name '{self._name}'!")
            _REGISTRY[self._name] = fn
        return fn


def NotDifferentiable(op_type: str) -> None:  # noqa: N802 - TF's name
    """Ops of ``op_type`` pass no gradient to their inputs (TF1's ``tf.NotDifferentiable``)."""
    if not isinstance(op_type, str):
        raise TypeError("op_type must be a string")
    _NOT_DIFFERENTIABLE.add(op_type)


no_gradient = NotDifferentiable


def gradient_for(op: Operation) -> Callable | None | bool:
    """The program's gradient of ``op``: the function its ``_gradient_op_type`` names, or one
    registered under its type; False when its type was declared not differentiable; None to use
    the op type's own."""
    name = op.attrs.get("_gradient_op_type")
    if name is not None:
        fn = _REGISTRY.get(name)
        if fn is None:
            raise LookupError(
                f"no gradient registered under {name!r} (gradient_override_map) for op "
                f"{op.name!r} ({op.type}); register it with RegisterGradient({name!r})"
            )
        return fn
    if op.type in _NOT_DIFFERENTIABLE:
        return False
    if op.op_def.grad_fn is None:
        return _REGISTRY.get(op.type)
    return None


# ---- IdentityN -------------------------------------------------------------------------------

IdentityN = defop("IdentityN")


@IdentityN.shape
def _identity_n_shape(op):
    return [(t.shape, t.dtype) for t in op.inputs]


@IdentityN.kernel("cpu", "gpu", aliases_input=True)
def _identity_n(ctx, *xs):
    return tuple(xs)


@IdentityN.gradient
def _identity_n_grad(op, *grads):
    return list(grads)


def identity_n(inputs: list, name: str | None = None) -> list:
    """Each of ``inputs``, through one op."""
    ins = [convert_to_tensor(t) for t in inputs]
    return list(apply_op("IdentityN", ins, {}, name=name or "IdentityN").outputs)


# ---- custom_gradient ------------------------------------------------------------------------


def _flat(x: Any) -> list:
    if isinstance(x, (list, tuple)):
        return [y for v in x for y in _flat(v)]
    return [x]


def _pack(template: Any, flat: list) -> Any:
    it = iter(flat)

    def go(t: Any) -> Any:
        if isinstance(t, (list, tuple)):
            return type(t)(go(v) for v in t)
        return next(it)

    return go(template)


def custom_gradient(f: Callable | None = None) -> Callable:
    """TF1's ``tf.custom_gradient``: ``f(*xs)`` returns ``(ys, grad_fn)``; the decorated
    function returns ``ys``, whose gradient with respect to ``xs`` is ``grad_fn(*dys)`` (one
    gradient per x, or a single one for a single x). Variables used inside ``f`` are not
    tracked: a ``grad_fn`` that takes ``variables`` is refused."""
    if f is None:
        return custom_gradient

    @functools.wraps(f)
    def decorated(*args: Any, **kwargs: Any) -> Any:
        if kwargs:
            raise ValueError("custom_gradient: the decorated function takes tensors, no keywords")
        xs = [convert_to_tensor(a) for a in args]
        result, grad_fn = f(*xs)
        import inspect

        if "variables" in inspect.signature(grad_fn).parameters:
            raise InvalidArgumentError(
                "custom_gradient: a grad_fn taking `variables` (variables read inside the "
                "function) is not supported in hetbed"
            )
        ys = [convert_to_tensor(y) for y in _flat(result)]
        n_ys = len(ys)
        name = f"CustomGradient-{next(_IDS)}"

        def grad(op: Operation, *dys: Any) -> list:
            got = grad_fn(*dys[:n_ys])
            flat = _flat(got) if isinstance(got, (list, tuple)) else [got]
            if len(flat) != len(xs):
                raise ValueError(
                    f"custom_gradient {f.__name__}: grad_fn returned {len(flat)} gradients for "
                    f"{len(xs)} inputs"
                )
            return [None] * n_ys + flat

        with _LOCK:
            _REGISTRY[name] = grad
        g = get_default_graph()
        with g.gradient_override_map({"IdentityN": name}):
            outs = identity_n(ys + xs)
        for o, y in zip(outs, ys):
            o.set_shape(y.shape if isinstance(y.shape, TensorShape) else TensorShape(None))
        return _pack(result, outs[:n_ys])

    return decorated


__all__ = [
    "NotDifferentiable",
    "RegisterGradient",
    "custom_gradient",
    "identity_n",
    "no_gradient",
]
