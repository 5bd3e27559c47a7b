"""The global step (an int64 variable counting applied updates) and learning-rate schedules."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..graph import Graph, GraphKeys, Tensor, get_default_graph
from ..ops import math as _math
from ..ops.array import cast, constant
from ..ops.math import ceil, equal, exp, floor, less_equal, minimum, where
from ..ops.math_extra import cos as _cos
from ..registry import convert_to_tensor
from ..variables import Variable

GLOBAL_STEP_NAME = "global_step"


# ---- global step -----------------------------------------------------------------------------


def get_global_step(graph: Graph | None = None) -> Variable | Tensor | None:
    """The graph's global step: the variable in the GLOBAL_STEP collection, else the tensor named
    ``global_step:0``, else None. Raises TypeError when it is not an integer scalar and
    ValueError when the collection holds several."""
    graph = graph or get_default_graph()
    items = graph.get_collection(GraphKeys.GLOBAL_STEP)
    if len(items) > 1:
        names = ", ".join(getattr(x, "name", repr(x)) for x in items)
        raise ValueError(f"the GLOBAL_STEP collection holds {len(items)} items ({names}); keep one")
    if items:
        gs = items[0]
    else:
        try:
            gs = graph.get_tensor_by_name(GLOBAL_STEP_NAME + ":0")
        except KeyError:
            return None
        for v in graph.get_collection(GraphKeys.GLOBAL_VARIABLES):  # the Variable, when it is one
            if getattr(v, "op", None) is gs.op:
                gs = v
                break
    assert_global_step(gs)
    return gs


def assert_global_step(global_step_tensor: Any) -> None:
    """Raise TypeError unless ``global_step_tensor`` is an integer scalar variable or tensor."""
    if not isinstance(global_step_tensor, (Variable, Tensor)):
        raise TypeError(f"global step must be a Variable or Tensor, got {global_step_tensor!r}")
    if not global_step_tensor.dtype.is_integer:
        raise TypeError(
            f"global step {global_step_tensor.name} must be an integer, "
            f"got {global_step_tensor.dtype.name}"
        )
    shape = global_step_tensor.shape
    if shape.ndims not in (None, 0):
        raise TypeError(f"global step {global_step_tensor.name} must be a scalar, got {shape}")


def create_global_step(graph: Graph | None = None) -> Variable:
    """Create the int64 scalar ``global_step`` variable (non-trainable, starting at 0).

    Raises ValueError when the graph already has one.
    """
    graph = graph or get_default_graph()
    if get_global_step(graph) is not None:
        raise ValueError('"global_step" already exists in this graph')
    with graph.as_default(), graph.name_scope(None), graph.control_dependencies(None):
        return Variable(
            constant(np.int64(0)),
            trainable=False,
            name=GLOBAL_STEP_NAME,
            collections=[GraphKeys.GLOBAL_VARIABLES, GraphKeys.GLOBAL_STEP],
        )


def get_or_create_global_step(graph: Graph | None = None) -> Variable | Tensor:
    graph = graph or get_default_graph()
    gs = get_global_step(graph)
    return gs if gs is not None else create_global_step(graph)


def global_step(sess: Any, global_step_tensor: Any) -> int:
    """The current value of the global step in ``sess``, as a Python int."""
    v = sess.run(global_step_tensor)
    read = getattr(v, "read", None)  # a raw variable reference gives its storage handle
    if read is not None:
        v = read()
    return int(v)


# ---- learning-rate schedules (TF1's tf.train.*_decay) ------------------------------------------


def _float(x: Any, dtype: _dt.DType, name: str) -> Tensor:
    if isinstance(x, (Tensor, Variable)):
        return cast(convert_to_tensor(x), dtype)
    return constant(np.asarray(x, dtype.np), name=name)


def _lr(learning_rate: Any) -> Tensor:
    if isinstance(learning_rate, (Tensor, Variable)):
        return convert_to_tensor(learning_rate)
    if isinstance(learning_rate, int):
        learning_rate = float(learning_rate)
    return constant(learning_rate, name="learning_rate")


def _need_step(global_step: Any, fn: str) -> None:
    if global_step is None:
        raise ValueError(f"{fn} needs a global_step (e.g. hb.train.get_or_create_global_step())")


def exponential_decay(
    learning_rate: Any,
    global_step: Any,
    decay_steps: Any,
    decay_rate: Any,
    staircase: bool = False,
    name: str | None = None,
) -> Tensor:
    """learning_rate * decay_rate ^ (global_step / decay_steps), the exponent floored if
    ``staircase``."""
    _need_step(global_step, "exponential_decay")
    with get_default_graph().name_scope(name or "ExponentialDecay") as scope:
        lr = _lr(learning_rate)
        p = _float(global_step, lr.dtype, "global_step") / _float(
            decay_steps, lr.dtype, "decay_steps"
        )
        if staircase:
            p = floor(p)
        # (the result is the op named as the scope, as TF's: "ExponentialDecay:0")
        return _math.multiply(lr, _float(decay_rate, lr.dtype, "decay_rate") ** p, name=scope)


def inverse_time_decay(
    learning_rate: Any,
    global_step: Any,
    decay_steps: Any,
    decay_rate: Any,
    staircase: bool = False,
    name: str | None = None,
) -> Tensor:
    """learning_rate / (1 + decay_rate * global_step / decay_steps)."""
    _need_step(global_step, "inverse_time_decay")
    with get_default_graph().name_scope(name or "InverseTimeDecay") as scope:
        lr = _lr(learning_rate)
        p = _float(global_step, lr.dtype, "global_step") / _float(
            decay_steps, lr.dtype, "decay_steps"
        )
        if staircase:
            p = floor(p)
        return _math.divide(lr, 1.0 + _float(decay_rate, lr.dtype, "decay_rate") * p, name=scope)


def natural_exp_decay(
    learning_rate: Any,
    global_step: Any,
    decay_steps: Any,
    decay_rate: Any,
    staircase: bool = False,
    name: str | None = None,
) -> Tensor:
    """learning_rate * exp(-decay_rate * global_step / decay_steps)."""
    _need_step(global_step, "natural_exp_decay")
    with get_default_graph().name_scope(name or "NaturalExpDecay") as scope:
        lr = _lr(learning_rate)
        p = _float(global_step, lr.dtype, "global_step") / _float(
            decay_steps, lr.dtype, "decay_steps"
        )
        if staircase:
            p = floor(p)
        return _math.multiply(lr, exp(-_float(decay_rate, lr.dtype, "decay_rate") * p), name=scope)


def polynomial_decay(
    learning_rate: Any,
    global_step: Any,
    decay_steps: Any,
    end_learning_rate: Any = 0.0001,
    power: Any = 1.0,
    cycle: bool = False,
    name: str | None = None,
) -> Tensor:
    """(learning_rate - end) * (1 - step / decay_steps) ^ power + end, with step capped at
    decay_steps, or, with ``cycle``, decay_steps stretched to the next multiple above step."""
    _need_step(global_step, "polynomial_decay")
    with get_default_graph().name_scope(name or "PolynomialDecay") as scope:
        lr = _lr(learning_rate)
        dt = lr.dtype
        step = _float(global_step, dt, "global_step")
        steps = _float(decay_steps, dt, "decay_steps")
        if cycle:
            mult = where(equal(step, 0.0), constant(np.asarray(1.0, dt.np)), ceil(step / steps))
            steps = steps * mult
        else:
            step = minimum(step, steps)
        end = _float(end_learning_rate, dt, "end_learning_rate")
        frac = 1.0 - step / steps
        return _math.add((lr - end) * (frac ** _float(power, dt, "power")), end, name=scope)


def piecewise_constant(x: Any, boundaries: list, values: list, name: str | None = None) -> Tensor:
    """values[0] for x <= boundaries[0], values[i] for boundaries[i-1] < x <= boundaries[i],
    values[-1] beyond the last boundary. Raises ValueError unless len(values) ==
    len(boundaries) + 1."""
    if len(values) != len(boundaries) + 1:
        raise ValueError(
            f"piecewise_constant: {len(values)} values for {len(boundaries)} boundaries; "
            "need exactly one more value than boundaries"
        )
    with get_default_graph().name_scope(name or "PiecewiseConstant"):
        x = convert_to_tensor(x)
        vals = [v if isinstance(v, Tensor) else None for v in values]
        first = next((v for v in vals if v is not None), None)
        vdt = first.dtype if first is not None else _dt.as_dtype(np.asarray(values[0]).dtype)
        if vdt == _dt.float64 and first is None and not isinstance(values[0], np.ndarray):
            vdt = _dt.float32  # Python floats are float32, as in TF
        vals = [_float(v, vdt, "value") for v in values]
        result = vals[-1]
        for b, v in zip(reversed(boundaries), reversed(vals[:-1])):
            result = where(less_equal(x, _float(b, x.dtype, "boundary")), v, result)
        return result


def cosine_decay(
    learning_rate: Any,
    global_step: Any,
    decay_steps: Any,
    alpha: Any = 0.0,
    name: str | None = None,
) -> Tensor:
    """TF1's: learning_rate * ((1 - alpha) * 0.5 * (1 + cos(pi * step / decay_steps)) + alpha),
    the step capped at decay_steps (Loshchilov and Hutter, SGDR, without restarts)."""
    _need_step(global_step, "cosine_decay")
    with get_default_graph().name_scope(name or "CosineDecay") as scope:
        lr = _lr(learning_rate)
        dt = lr.dtype
        steps = _float(decay_steps, dt, "decay_steps")
        step = minimum(_float(global_step, dt, "global_step"), steps)
        cosine = 0.5 * (1.0 + _cos(np.pi * step / steps))
        a = _float(alpha, dt, "alpha")
        return _math.multiply(lr, (1.0 - a) * cosine + a, name=scope)


def cosine_decay_restarts(
    learning_rate: Any,
    global_step: Any,
    first_decay_steps: Any,
    t_mul: float = 2.0,
    m_mul: float = 1.0,
    alpha: Any = 0.0,
    name: str | None = None,
) -> Tensor:
    """TF1's SGDR schedule: cosine decay over periods of ``first_decay_steps``, each ``t_mul``
    times longer than the last, restarting at ``m_mul`` times the last period's peak."""
    _need_step(global_step, "cosine_decay_restarts")
    with get_default_graph().name_scope(name or "SGDRDecay") as scope:
        lr = _lr(learning_rate)
        dt = lr.dtype
        frac = _float(global_step, dt, "global_step") / _float(first_decay_steps, dt, "steps")
        if t_mul == 1.0:
            i = floor(frac)
            frac = frac - i
        else:
            i = floor(_math.log(1.0 - frac * (1.0 - t_mul)) / float(np.log(t_mul)))
            done = (1.0 - _math.pow(constant(np.asarray(t_mul, dt.np)), i)) / (1.0 - t_mul)
            frac = (frac - done) / _math.pow(constant(np.asarray(t_mul, dt.np)), i)
        m = _math.pow(constant(np.asarray(m_mul, dt.np)), i)
        cosine = 0.5 * m * (1.0 + _cos(np.pi * frac))
        a = _float(alpha, dt, "alpha")
        return _math.multiply(lr, (1.0 - a) * cosine + a, name=scope)


__all__ = [
    "cosine_decay",
    "cosine_decay_restarts",
    "get_global_step",
    "create_global_step",
    "get_or_create_global_step",
    "global_step",
    "assert_global_step",
    "exponential_decay",
    "inverse_time_decay",
    "natural_exp_decay",
    "polynomial_decay",
    "piecewise_constant",
]
