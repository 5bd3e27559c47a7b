"""``keras.backend`` in TF1's graph mode: the session Keras runs in, the learning phase, unique
layer names per graph, and the tensor functions Keras code calls (``K.placeholder``,
``K.variable``, ``K.eval``, ``K.function``, the cross-entropies the losses use)."""

from __future__ import annotations

import weakref
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import hetbed as hb
from hetbed.runtime.graph import Graph, Tensor


class _GraphState:
    """What Keras keeps per graph: name counters, the learning phase, the layer-call history of
    tensors, the session made for the graph and the variables it has initialized."""

    def __init__(self) -> None:
        self.uids: dict[str, int] = defaultdict(int)
        self.learning_phase: Tensor | None = None
        self.phase_value: int | None = None
        self.history: dict[Tensor, tuple] = {}
        self.session: Any = None
        self.initialized: set[str] = set()


_STATES: weakref.WeakKeyDictionary[Graph, _GraphState] = weakref.WeakKeyDictionary()
_USER_SESSION: list[Any] = [None]
_CONFIG = {"floatx": "float32", "epsilon": 1e-7, "image_data_format": "channels_last"}


def _state(graph: Graph | None = None) -> _GraphState:
    g = graph or hb.get_default_graph()
    st = _STATES.get(g)
    if st is None:
        st = _STATES[g] = _GraphState()
    return st


# ---- names ------------------------------------------------------------------------------------


def get_uid(prefix: str = "") -> int:
    """1, 2, 3, ... for successive calls with ``prefix`` in the default graph."""
    st = _state()
    st.uids[prefix] += 1
    return st.uids[prefix]


def reset_uids() -> None:
    _state().uids.clear()


def unique_object_name(prefix: str, zero_based: bool = True) -> str:
    """``prefix``, ``prefix_1``, ... (zero_based) or ``prefix_1``, ``prefix_2``, ... per graph."""
    n = get_uid(prefix)
    if zero_based:
        return prefix if n == 1 else f"{prefix}_{n - 1}"
    return f"{prefix}_{n}"


# ---- configuration ------------------------------------------------------------------------------


def floatx() -> str:
    return _CONFIG["floatx"]  # type: ignore[return-value]


def set_floatx(value: str) -> None:
    if value not in ("float16", "float32", "float64"):
        raise ValueError(f"set_floatx: unknown float type {value!r}; use float16/32/64")
    _CONFIG["floatx"] = value


def epsilon() -> float:
    return _CONFIG["epsilon"]  # type: ignore[return-value]


def set_epsilon(value: float) -> None:
    _CONFIG["epsilon"] = float(value)


def image_data_format() -> str:
    return _CONFIG["image_data_format"]  # type: ignore[return-value]


def set_image_data_format(data_format: str) -> None:
    if data_format != "channels_last":
        raise ValueError(f"hetbed's Keras layers take channels_last only, got {data_format!r}")
    _CONFIG["image_data_format"] = data_format


def backend() -> str:
    return "tensorflow"


# ---- learning phase ---------------------------------------------------------------------------


def learning_phase() -> Any:
    """The value set by ``set_learning_phase`` (0 or 1), else the graph's bool placeholder
    ``keras_learning_phase`` (False unless fed; ``fit`` feeds True)."""
    st = _state()
    if st.phase_value is not None:
        return st.phase_value
    if st.learning_phase is None:
        g = hb.get_default_graph()
        with g.name_scope(None):
            st.learning_phase = hb.placeholder_with_default(
                False, shape=(), name="keras_learning_phase"
            )
    return st.learning_phase


def set_learning_phase(value: int) -> None:
    """Fix the learning phase of layers built from now on: 0 = test, 1 = train."""
    if value not in (0, 1):
        raise ValueError(f"set_learning_phase: expected 0 or 1, got {value!r}")
    _state().phase_value = int(value)


def _phase_feed(training: bool) -> dict:
    st = _state()
    return {} if st.learning_phase is None else {st.learning_phase: training}


# ---- session ---------------------------------------------------------------------------------


def set_session(session: Any) -> None:
    """Make Keras run in ``session`` (the "Keras as an interface to TensorFlow" pattern)."""
    _USER_SESSION[0] = session


def get_session() -> Any:
    """The session Keras runs in: the default session (``with sess.as_default()``), else the one
    given to ``set_session``, else one made for the default graph. Variables not yet initialized
    are initialized first, as Keras does."""
    g = hb.get_default_graph()
    sess = hb.get_default_session()
    if sess is None or sess.graph is not g:
        sess = _USER_SESSION[0]
    if sess is None or sess.graph is not g:
        st = _state(g)
        if st.session is None:
            st.session = hb.Session(graph=g)
        sess = st.session
    _initialize_variables(sess)
    return sess


def _initialize_variables(sess: Any) -> None:
    st = _state(sess.graph)
    new = [v for v in sess.graph.get_collection("variables") if v.name not in st.initialized]
    if not new:
        return
    with sess.graph.as_default():
        flags = sess.run([hb.is_variable_initialized(v) for v in new])
        todo = [v for v, ok in zip(new, flags) if not ok]
        if todo:
            sess.run(hb.variables_initializer(todo))
    st.initialized.update(v.name for v in new)


def clear_session() -> None:
    """Forget Keras's state: a new default graph, fresh name counters, no session."""
    hb.reset_default_graph()
    _USER_SESSION[0] = None


# ---- tensors and variables --------------------------------------------------------------------


def _dtype(dtype: Any) -> Any:
    return hb.as_dtype(dtype or floatx())


def placeholder(
    shape: Any = None, ndim: int | None = None, dtype: Any = None, sparse: bool = False, name=None
) -> Tensor:
    if sparse:
        raise NotImplementedError("keras.backend.placeholder: sparse placeholders")
    if shape is None and ndim is not None:
        shape = (None,) * ndim
    return hb.placeholder(_dtype(dtype), shape=shape, name=name)


def variable(value: Any, dtype: Any = None, name: str | None = None, constraint=None) -> Any:
    v = hb.Variable(np.asarray(value, dtype=_dtype(dtype).as_numpy_dtype), name=name)
    return v


def constant(value: Any, dtype: Any = None, shape: Any = None, name: str | None = None) -> Tensor:
    return hb.constant(value, dtype=_dtype(dtype), shape=shape, name=name)


def eval(x: Any) -> np.ndarray:  # noqa: A001 - Keras's name
    return get_session().run(x)


def get_value(x: Any) -> Any:
    return get_session().run(x)


def batch_get_value(xs: Sequence) -> list:
    return get_session().run(list(xs)) if xs else []


def set_value(x: Any, value: Any) -> None:
    """Assign ``value`` to the variable ``x`` (shapes must agree)."""
    x.load(np.asarray(value, dtype=x.dtype.as_numpy_dtype), get_session())


def batch_set_value(tuples: Sequence) -> None:
    for x, value in tuples:
        set_value(x, value)


def int_shape(x: Any) -> tuple | None:
    s = hb.convert_to_tensor(x).shape if not hasattr(x, "shape") else x.shape
    dims = hb.TensorShape(s).as_list() if hb.TensorShape(s).ndims is not None else None
    return None if dims is None else tuple(dims)


def ndim(x: Any) -> int | None:
    return hb.TensorShape(x.shape).ndims


def count_params(x: Any) -> int:
    return int(np.prod(x.shape.as_list()))


def is_keras_tensor(x: Any) -> bool:
    return isinstance(x, Tensor) and x in _state(x.graph).history


def function(inputs: Sequence, outputs: Any, updates: Sequence | None = None, **kw: Any) -> Any:
    """A callable running ``outputs`` (and ``updates``) for a list of input values."""
    inputs = list(inputs)
    single = not isinstance(outputs, (list, tuple))
    fetches = [outputs] if single else list(outputs)
    ups = list(updates or [])

    def run(values: Sequence) -> Any:
        feed = dict(zip(inputs, values))
        out = get_session().run(fetches + ups, feed)[: len(fetches)]
        return out[0] if single else out

    return run


def name_scope(name: str) -> Any:
    return hb.name_scope(name)


# ---- math the losses and user code call ----------------------------------------------------------


def _axis_mean(fn: Callable) -> Callable:
    def reduce(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
        return fn(x, axis=axis, keepdims=keepdims)

    return reduce


sum = _axis_mean(hb.reduce_sum)  # noqa: A001
mean = _axis_mean(hb.reduce_mean)
max = _axis_mean(hb.reduce_max)  # noqa: A001
min = _axis_mean(hb.reduce_min)  # noqa: A001
prod = _axis_mean(hb.reduce_prod)
square, sqrt, exp, log, abs = hb.square, hb.sqrt, hb.exp, hb.log, hb.abs  # noqa: A001
cast, reshape, transpose, stop_gradient = hb.cast, hb.reshape, hb.transpose, hb.stop_gradient
expand_dims, squeeze, stack, shape = hb.expand_dims, hb.squeeze, hb.stack, hb.shape
zeros_like, ones_like, equal, maximum, minimum = (
    hb.zeros_like,
    hb.ones_like,
    hb.equal,
    hb.maximum,
    hb.minimum,
)
gradients, sigmoid, tanh = hb.gradients, hb.sigmoid, hb.tanh


def dot(x: Any, y: Any) -> Tensor:
    return hb.matmul(x, y)


def argmax(x: Any, axis: int = -1) -> Tensor:
    return hb.argmax(x, axis=axis)


def clip(x: Any, min_value: Any, max_value: Any) -> Tensor:
    return hb.minimum(hb.maximum(x, min_value), max_value)


def concatenate(tensors: Sequence, axis: int = -1) -> Tensor:
    return hb.concat(list(tensors), axis)


def zeros(shape: Any, dtype: Any = None, name: str | None = None) -> Any:
    return variable(np.zeros(shape), dtype, name)


def ones(shape: Any, dtype: Any = None, name: str | None = None) -> Any:
    return variable(np.ones(shape), dtype, name)


def relu(x: Any, alpha: float = 0.0, max_value: Any = None, threshold: float = 0.0) -> Tensor:
    y = hb.nn.relu(x)
    if alpha:
        y = y - alpha * hb.nn.relu(-x)
    return y if max_value is None else hb.minimum(y, max_value)


def softmax(x: Any, axis: int = -1) -> Tensor:
    return hb.nn.softmax(x, axis=axis)


def hard_sigmoid(x: Any) -> Tensor:
    """clip(0.2 x + 0.5, 0, 1), Keras's."""
    return clip(0.2 * hb.convert_to_tensor(x) + 0.5, 0.0, 1.0)


def _logits_of(output: Tensor, op_type: str) -> Tensor | None:
    """The logits under ``output`` when it is the output of a ``op_type`` op (Keras then uses
    them, the stable form, as TF's legacy Keras does in graph mode)."""
    if isinstance(output, Tensor) and output.op.type == op_type:
        return output.op.inputs[0]
    return None


def categorical_crossentropy(
    target: Any, output: Any, from_logits: bool = False, axis: int = -1
) -> Tensor:
    """-sum(target * log(p)) over ``axis``; p the output rescaled to sum 1 and clipped to
    [eps, 1 - eps], or softmax(output) with ``from_logits`` (or when output is a Softmax)."""
    output = hb.convert_to_tensor(output)
    target = hb.cast(target, output.dtype)
    logits = output if from_logits else _logits_of(output, "Softmax")
    if logits is not None:
        return hb.nn.softmax_cross_entropy_with_logits_v2(labels=target, logits=logits, axis=axis)
    p = output / hb.reduce_sum(output, axis, keepdims=True)
    p = clip(p, epsilon(), 1.0 - epsilon())
    return -hb.reduce_sum(target * hb.log(p), axis)


def sparse_categorical_crossentropy(
    target: Any, output: Any, from_logits: bool = False, axis: int = -1
) -> Tensor:
    """The categorical cross-entropy of integer class ids ``target`` ([batch] or [batch, 1])."""
    output = hb.convert_to_tensor(output)
    logits = output if from_logits else _logits_of(output, "Softmax")
    if logits is None:
        logits = hb.log(clip(output, epsilon(), 1.0 - epsilon()))
    rank = logits.shape.ndims
    labels = hb.cast(hb.reshape(target, [-1]), hb.int64)
    flat = hb.reshape(logits, [-1, logits.shape[-1]]) if rank != 2 else logits
    loss = hb.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=flat)
    if rank is not None and rank > 2:
        return hb.reshape(loss, hb.shape(logits)[:-1])
    return loss


def binary_crossentropy(target: Any, output: Any, from_logits: bool = False) -> Tensor:
    """Elementwise -(t log p + (1 - t) log(1 - p)), p clipped to [eps, 1 - eps]; from logits
    (or a Sigmoid's input) the stable sigmoid cross-entropy."""
    output = hb.convert_to_tensor(output)
    target = hb.cast(target, output.dtype)
    logits = output if from_logits else _logits_of(output, "Sigmoid")
    if logits is not None:
        return hb.nn.sigmoid_cross_entropy_with_logits(labels=target, logits=logits)
    eps = epsilon()
    p = clip(output, eps, 1.0 - eps)
    return -(target * hb.log(p + eps) + (1.0 - target) * hb.log(1.0 - p + eps))


def random_normal(shape: Any, mean: float = 0.0, stddev: float = 1.0, dtype=None, seed=None):
    return hb.random_normal(shape, mean, stddev, dtype=_dtype(dtype), seed=seed)


def random_uniform(shape: Any, minval: float = 0.0, maxval: float = 1.0, dtype=None, seed=None):
    return hb.random_uniform(shape, minval, maxval, dtype=_dtype(dtype), seed=seed)
