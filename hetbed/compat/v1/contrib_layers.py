"""TF1's ``tf.contrib.layers`` (and the layer functions of ``tf.contrib.slim``), the part TF1
programs use most: layers with contrib's argument names and defaults and its variable names
(``fully_connected/weights``, ``fully_connected/biases``, ``Conv/weights``, ``BatchNorm/beta``,
``LayerNorm/gamma``), regularizers, initializers and ``arg_scope``.

Defaults as in contrib: ``fully_connected`` and ``conv2d`` apply ReLU and initialize weights with
``xavier_initializer()`` (Glorot uniform) and biases with zeros; with a ``normalizer_fn`` they
make no biases; ``max_pool2d``/``avg_pool2d`` take stride 2 and VALID padding; ``batch_norm`` has
``decay=0.999``, ``scale=False``, ``epsilon=0.001`` and puts its moving-average updates in
``GraphKeys.UPDATE_OPS`` (``updates_collections=None`` applies them with the output instead).
Channels-last (NHWC) data only.

The initializers and regularizers are in contrib_regularizers.py, ``optimize_loss`` (and
contrib.seq2seq's ``sequence_loss``) in contrib_training.py; this module exports them with the
layers.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import hetbed as _hb
from hetbed.runtime import layers as _layers

from .contrib_regularizers import (
    apply_regularization,
    l1_l2_regularizer,
    l1_regularizer,
    l2_regularizer,
    sum_regularizer,
    variance_scaling_initializer,
    xavier_initializer,
    xavier_initializer_conv2d,
)
from .contrib_training import optimize_loss

__all__ = [
    "add_arg_scope",
    "apply_regularization",
    "arg_scope",
    "avg_pool2d",
    "batch_norm",
    "conv2d",
    "convolution2d",
    "dropout",
    "embed_sequence",
    "flatten",
    "fully_connected",
    "l1_l2_regularizer",
    "l1_regularizer",
    "l2_regularizer",
    "layer_norm",
    "linear",
    "max_pool2d",
    "one_hot_encoding",
    "optimize_loss",
    "repeat",
    "stack",
    "sum_regularizer",
    "variance_scaling_initializer",
    "xavier_initializer",
    "xavier_initializer_conv2d",
]

# ---- arg_scope -----------------------------------------------------------------------------

_scopes = threading.local()


def _current() -> dict:
    stack = getattr(_scopes, "stack", None)
    return stack[-1] if stack else {}


def add_arg_scope(fn: Callable) -> Callable:
    """Let ``arg_scope`` give ``fn`` default keyword arguments."""

    @functools.wraps(fn)
    def scoped(*args: Any, **kwargs: Any) -> Any:
        defaults = _current().get(scoped._arg_scope_key, {})
        return fn(*args, **{**defaults, **kwargs})

    scoped._arg_scope_key = (fn.__module__, fn.__qualname__)  # type: ignore[attr-defined]
    return scoped


@contextlib.contextmanager
def arg_scope(list_ops_or_scope: Any, **kwargs: Any) -> Iterator[dict]:
    """Default keyword arguments for the listed functions (made with ``add_arg_scope``) inside
    the block, merged with (and overriding) those of enclosing blocks; yields the scope, which a
    later ``arg_scope(scope)`` re-enters."""
    if isinstance(list_ops_or_scope, dict):
        if kwargs:
            raise ValueError("arg_scope: when re-entering a scope, give no keyword arguments")
        new = list_ops_or_scope
    else:
        ops = list_ops_or_scope
        if not isinstance(ops, (list, tuple)):
            raise TypeError(
                "arg_scope: list_ops_or_scope must be a list/tuple of functions or a scope"
            )
        new = {k: dict(v) for k, v in _current().items()}
        for op in ops:
            key = getattr(op, "_arg_scope_key", None)
            if key is None:
                raise ValueError(
                    f"arg_scope: {getattr(op, '__name__', op)!r} is not decorated with add_arg_scope"
                )
            new[key] = {**new.get(key, {}), **kwargs}
    stack = getattr(_scopes, "stack", None)
    if stack is None:
        stack = _scopes.stack = []
    stack.append(new)
    try:
        yield new
    finally:
        stack.pop()


# ---- layers --------------------------------------------------------------------------------


# arg_scope key of contrib_slim.model_variable: slim's layers make their variables through
# model_variable, so ``arg_scope([slim.model_variable], device=...)`` (model_deploy's
# create_clones) places them; _variable reads that scope's device.
MODEL_VARIABLE_KEY = ("hetbed.compat.v1.contrib_slim", "model_variable")


def _variable(name, shape, dtype, initializer, regularizer, trainable, collections):
    device = _current().get(MODEL_VARIABLE_KEY, {}).get("device")
    with _hb.device(device) if device is not None else contextlib.nullcontext():
        v = _hb.get_variable(
            name,
            shape,
            dtype=dtype,
            initializer=initializer,
            regularizer=regularizer,
            trainable=trainable,
        )
    for c in ["model_variables", *(collections or [])]:
        if v not in _hb.get_collection(c):
            _hb.add_to_collection(c, v)
    return v


def _collect(outputs_collections: Any, out: Any, alias: str | None = None) -> Any:
    """Add ``out`` to ``outputs_collections`` (a name or a list of names) under ``alias``, by
    default the current name scope (slim's end point names)."""
    from .contrib_utils import collect_named_outputs

    if alias is None:
        alias = _hb.get_default_graph().get_name_scope()
    return collect_named_outputs(outputs_collections, alias, out)


def _var_collections(variables_collections: Any, which: str) -> list:
    if isinstance(variables_collections, dict):
        return list(variables_collections.get(which) or [])
    return list(variables_collections or [])


def _finish(out, normalizer_fn, normalizer_params, activation_fn, outputs_collections):
    if normalizer_fn is not None:
        out = normalizer_fn(out, **(normalizer_params or {}))
    if activation_fn is not None:
        out = activation_fn(out)
    return _collect(outputs_collections, out, _hb.get_variable_scope().name)


@add_arg_scope
def fully_connected(
    inputs: Any,
    num_outputs: int,
    activation_fn: Callable | None = _hb.nn.relu,
    normalizer_fn: Callable | None = None,
    normalizer_params: dict | None = None,
    weights_initializer: Any = None,
    weights_regularizer: Callable | None = None,
    biases_initializer: Any = "zeros",
    biases_regularizer: Callable | None = None,
    reuse: Any = None,
    variables_collections: Any = None,
    outputs_collections: Any = None,
    trainable: bool = True,
    scope: Any = None,
) -> Any:
    """``activation_fn(inputs @ weights + biases)`` over the last dimension of ``inputs``
    (rank 2 or more); variables ``<scope>/weights`` and ``<scope>/biases``."""
    x = inputs if isinstance(inputs, _hb.Tensor) else _hb.constant(inputs)
    if x.shape.ndims is not None and x.shape.ndims < 2:
        raise ValueError(f"fully_connected: inputs must have rank >= 2, got shape {x.shape}")
    n_in = x.shape.dims[-1] if x.shape.ndims is not None else None
    if n_in is None:
        raise ValueError(f"fully_connected: the last dimension of {x.name} must be known")
    with _hb.variable_scope(scope, default_name="fully_connected", reuse=reuse):
        w = _variable(
            "weights",
            [n_in, int(num_outputs)],
            x.dtype,
            weights_initializer or xavier_initializer(),
            weights_regularizer,
            trainable,
            ["weights", *_var_collections(variables_collections, "weights")],
        )
        flat = x if x.shape.ndims == 2 else _hb.reshape(x, [-1, n_in])
        out = _hb.matmul(flat, w)
        if normalizer_fn is None and biases_initializer is not None:
            b = _variable(
                "biases",
                [int(num_outputs)],
                x.dtype,
                _hb.zeros_initializer() if biases_initializer == "zeros" else biases_initializer,
                biases_regularizer,
                trainable,
                ["biases", *_var_collections(variables_collections, "biases")],
            )
            out = _hb.nn.bias_add(out, b)
        if x.shape.ndims != 2:
            out = _hb.reshape(out, _hb.concat([_hb.shape(x)[:-1], [int(num_outputs)]], 0))
            out.set_shape(_hb.TensorShape([*x.shape.dims[:-1], int(num_outputs)]))
        return _finish(out, normalizer_fn, normalizer_params, activation_fn, outputs_collections)


def linear(inputs: Any, num_outputs: int, scope: Any = None, **kwargs: Any) -> Any:
    """``fully_connected`` without an activation."""
    return fully_connected(inputs, num_outputs, activation_fn=None, scope=scope, **kwargs)


def _pair(v: Any, what: str) -> list[int]:
    if isinstance(v, int):
        return [v, v]
    v = list(v)
    if len(v) != 2:
        raise ValueError(f"{what} must be an int or a pair of ints, got {v!r}")
    return [int(v[0]), int(v[1])]


def _nhwc(data_format: Any, what: str) -> None:
    if data_format not in (None, "NHWC"):
        raise ValueError(f"{what}: data_format {data_format!r} is not supported (NHWC only)")


@add_arg_scope
def conv2d(
    inputs: Any,
    num_outputs: int,
    kernel_size: Any,
    stride: Any = 1,
    padding: str = "SAME",
    data_format: Any = None,
    rate: Any = 1,
    activation_fn: Callable | None = _hb.nn.relu,
    normalizer_fn: Callable | None = None,
    normalizer_params: dict | None = None,
    weights_initializer: Any = None,
    weights_regularizer: Callable | None = None,
    biases_initializer: Any = "zeros",
    biases_regularizer: Callable | None = None,
    reuse: Any = None,
    variables_collections: Any = None,
    outputs_collections: Any = None,
    trainable: bool = True,
    scope: Any = None,
) -> Any:
    """A 2-D convolution of NHWC ``inputs``; variables ``<scope>/weights`` ([kh, kw, in, out])
    and ``<scope>/biases``."""
    _nhwc(data_format, "conv2d")
    x = inputs if isinstance(inputs, _hb.Tensor) else _hb.constant(inputs)
    if x.shape.ndims != 4 or x.shape.dims[-1] is None:
        raise ValueError(f"conv2d: inputs must be NHWC with known channels, got shape {x.shape}")
    kh, kw = _pair(kernel_size, "conv2d: kernel_size")
    sh, sw = _pair(stride, "conv2d: stride")
    rh, rw = _pair(rate, "conv2d: rate")
    with _hb.variable_scope(scope, default_name="Conv", reuse=reuse):
        w = _variable(
            "weights",
            [kh, kw, x.shape.dims[-1], int(num_outputs)],
            x.dtype,
            weights_initializer or xavier_initializer(),
            weights_regularizer,
            trainable,
            ["weights", *_var_collections(variables_collections, "weights")],
        )
        out = _hb.nn.conv2d(x, w, [1, sh, sw, 1], padding.upper(), dilations=[1, rh, rw, 1])
        if normalizer_fn is None and biases_initializer is not None:
            b = _variable(
                "biases",
                [int(num_outputs)],
                x.dtype,
                _hb.zeros_initializer() if biases_initializer == "zeros" else biases_initializer,
                biases_regularizer,
                trainable,
                ["biases", *_var_collections(variables_collections, "biases")],
            )
            out = _hb.nn.bias_add(out, b)
        return _finish(out, normalizer_fn, normalizer_params, activation_fn, outputs_collections)


convolution2d = conv2d


def _pool(kind, inputs, kernel_size, stride, padding, data_format, outputs_collections, scope):
    _nhwc(data_format, kind)
    kh, kw = _pair(kernel_size, f"{kind}: kernel_size")
    sh, sw = _pair(stride, f"{kind}: stride")
    fn = _hb.nn.max_pool if kind == "max_pool2d" else _hb.nn.avg_pool
    default = "MaxPool2D" if kind == "max_pool2d" else "AvgPool2D"
    with _hb.name_scope(scope or default) as sc:
        out = fn(inputs, [1, kh, kw, 1], [1, sh, sw, 1], padding.upper())
    return _collect(outputs_collections, out, sc)


@add_arg_scope
def max_pool2d(
    inputs: Any,
    kernel_size: Any,
    stride: Any = 2,
    padding: str = "VALID",
    data_format: str = "NHWC",
    outputs_collections: Any = None,
    scope: Any = None,
) -> Any:
    """Max pooling of NHWC ``inputs`` (stride 2, VALID by default)."""
    return _pool(
        "max_pool2d", inputs, kernel_size, stride, padding, data_format, outputs_collections, scope
    )


@add_arg_scope
def avg_pool2d(
    inputs: Any,
    kernel_size: Any,
    stride: Any = 2,
    padding: str = "VALID",
    data_format: str = "NHWC",
    outputs_collections: Any = None,
    scope: Any = None,
) -> Any:
    """Average pooling of NHWC ``inputs`` (stride 2, VALID by default)."""
    return _pool(
        "avg_pool2d", inputs, kernel_size, stride, padding, data_format, outputs_collections, scope
    )


@add_arg_scope
def flatten(inputs: Any, outputs_collections: Any = None, scope: Any = None) -> Any:
    """``inputs`` as [batch, everything else]."""
    with _hb.name_scope(scope or "Flatten") as sc:
        out = _layers.flatten(inputs)
    return _collect(outputs_collections, out, sc)


@add_arg_scope
def dropout(
    inputs: Any,
    keep_prob: Any = 0.5,
    noise_shape: Any = None,
    is_training: Any = True,
    outputs_collections: Any = None,
    scope: Any = None,
    seed: int | None = None,
) -> Any:
    """Dropout with ``keep_prob`` when ``is_training`` (a bool or a bool tensor), else the
    identity."""
    with _hb.name_scope(scope or "Dropout") as sc:
        if isinstance(is_training, bool):
            out = (
                _hb.nn.dropout(inputs, keep_prob, noise_shape=noise_shape, seed=seed)
                if is_training
                else _hb.identity(inputs)
            )
        else:
            out = _hb.cond(
                is_training,
                lambda: _hb.nn.dropout(inputs, keep_prob, noise_shape=noise_shape, seed=seed),
                lambda: _hb.identity(inputs),
            )
    return _collect(outputs_collections, out, sc)


@add_arg_scope
def batch_norm(
    inputs: Any,
    decay: float = 0.999,
    center: bool = True,
    scale: bool = False,
    epsilon: float = 0.001,
    activation_fn: Callable | None = None,
    param_initializers: dict | None = None,
    param_regularizers: dict | None = None,
    updates_collections: Any = _hb.GraphKeys.UPDATE_OPS,
    is_training: Any = True,
    reuse: Any = None,
    variables_collections: Any = None,
    outputs_collections: Any = None,
    trainable: bool = True,
    batch_weights: Any = None,
    fused: Any = None,
    data_format: str = "NHWC",
    zero_debias_moving_mean: bool = False,
    scope: Any = None,
    renorm: bool = False,
) -> Any:
    """Batch normalization over every axis but the last (variables ``<scope>/beta``, ``gamma``
    with ``scale``, ``moving_mean``, ``moving_variance``). Training (``is_training``: a bool or
    a bool tensor) normalizes with the batch's statistics and moves the moving ones by
    ``1 - decay`` toward them; the update ops go to ``updates_collections``, or run with the
    output when it is None. 2-D and 4-D inputs go through the fused kernel unless ``fused`` is
    False, as in TF1 (its moving variance moves toward the unbiased batch variance)."""
    _nhwc(data_format, "batch_norm")
    if batch_weights is not None or zero_debias_moving_mean or renorm:
        raise ValueError(
            "batch_norm: batch_weights, zero_debias_moving_mean and renorm are not supported"
        )
    inits = param_initializers or {}
    regs = param_regularizers or {}
    g = _hb.get_default_graph()
    updates = g.get_collection_ref(_hb.GraphKeys.UPDATE_OPS)
    before = len(updates)
    with _hb.variable_scope(scope, default_name="BatchNorm", reuse=reuse) as sc:
        layer = _layers.BatchNormalization(
            axis=-1,
            momentum=decay,
            epsilon=epsilon,
            center=center,
            scale=scale,
            beta_initializer=inits.get("beta"),
            gamma_initializer=inits.get("gamma"),
            moving_mean_initializer=inits.get("moving_mean"),
            moving_variance_initializer=inits.get("moving_variance"),
            beta_regularizer=regs.get("beta"),
            gamma_regularizer=regs.get("gamma"),
            trainable=trainable,
            fused=fused,
            _reuse=reuse,
            _scope=sc,
        )
        x = _hb.convert_to_tensor(inputs)
        channels = x.shape.dims[-1] if x.shape.ndims == 2 else None
        if fused is not False and channels is not None:
            # as TF1's: a 2-D input runs through the fused kernel as [N, 1, 1, C], so the
            # moving variance moves toward the batch's unbiased variance (n / (n - 1))
            out = _hb.reshape(
                layer(_hb.reshape(x, [-1, 1, 1, channels]), training=is_training),
                _hb.shape(x),
            )
            out.set_shape(x.shape)
        else:
            out = layer(x, training=is_training)
        for v in layer.weights:
            which = v.op.name.rsplit("/", 1)[-1]
            for c in ["model_variables", *_var_collections(variables_collections, which)]:
                if v not in _hb.get_collection(c):
                    _hb.add_to_collection(c, v)
        mine = updates[before:]
        if mine and updates_collections != _hb.GraphKeys.UPDATE_OPS:
            del updates[before:]
            if updates_collections is None:
                with _hb.control_dependencies(mine):
                    out = _hb.identity(out)
            else:
                names = (
                    [updates_collections]
                    if isinstance(updates_collections, str)
                    else list(updates_collections)
                )
                for c in names:
                    for u in mine:
                        _hb.add_to_collection(c, u)
        if activation_fn is not None:
            out = activation_fn(out)
        return _collect(outputs_collections, out, _hb.get_variable_scope().name)


@add_arg_scope
def layer_norm(
    inputs: Any,
    center: bool = True,
    scale: bool = True,
    activation_fn: Callable | None = None,
    reuse: Any = None,
    variables_collections: Any = None,
    outputs_collections: Any = None,
    trainable: bool = True,
    begin_norm_axis: int = 1,
    begin_params_axis: int = -1,
    scope: Any = None,
) -> Any:
    """Normalize each example over axes ``begin_norm_axis:`` (mean 0, variance 1, epsilon
    1e-12), then ``* gamma + beta`` over axes ``begin_params_axis:`` (variables
    ``<scope>/beta`` and ``<scope>/gamma``)."""
    x = inputs if isinstance(inputs, _hb.Tensor) else _hb.constant(inputs)
    rank = x.shape.ndims
    if rank is None:
        raise ValueError(f"layer_norm: the rank of {x.name} must be known")
    bn = begin_norm_axis % rank if begin_norm_axis < 0 else begin_norm_axis
    bp = begin_params_axis % rank if begin_params_axis < 0 else begin_params_axis
    if not 0 < bn < rank or not 0 <= bp < rank:
        raise ValueError(
            f"layer_norm: begin_norm_axis {begin_norm_axis} / begin_params_axis "
            f"{begin_params_axis} out of range for rank {rank}"
        )
    params_shape = x.shape.dims[bp:]
    if any(d is None for d in params_shape):
        raise ValueError(f"layer_norm: dims {bp}: of {x.shape} must be known")
    with _hb.variable_scope(scope, default_name="LayerNorm", reuse=reuse):
        beta = gamma = None  # made in TF's order: beta, then gamma
        if center:
            beta = _variable(
                "beta",
                params_shape,
                x.dtype,
                _hb.zeros_initializer(),
                None,
                trainable,
                _var_collections(variables_collections, "beta"),
            )
        if scale:
            gamma = _variable(
                "gamma",
                params_shape,
                x.dtype,
                _hb.ones_initializer(),
                None,
                trainable,
                _var_collections(variables_collections, "gamma"),
            )
        mean, var = _hb.nn.moments(x, list(range(bn, rank)), keep_dims=True)
        out = (x - mean) * _hb.rsqrt(var + 1e-12)
        if gamma is not None:
            out = out * gamma
        if beta is not None:
            out = out + beta
        if activation_fn is not None:
            out = activation_fn(out)
        return _collect(outputs_collections, out, _hb.get_variable_scope().name)


@add_arg_scope
def one_hot_encoding(
    labels: Any,
    num_classes: int,
    on_value: float = 1.0,
    off_value: float = 0.0,
    outputs_collections: Any = None,
    scope: Any = None,
) -> Any:
    """``labels`` as float32 one-hot rows of ``num_classes``."""
    with _hb.name_scope(scope or "OneHotEncoding") as sc:
        out = _hb.one_hot(labels, num_classes, on_value=on_value, off_value=off_value)
    return _collect(outputs_collections, out, sc)


def embed_sequence(
    ids: Any,
    vocab_size: int,
    embed_dim: int,
    unique: bool = False,
    initializer: Any = None,
    regularizer: Callable | None = None,
    trainable: bool = True,
    scope: Any = None,
    reuse: Any = None,
) -> Any:
    """The rows of an ``embeddings`` variable [vocab_size, embed_dim] for ``ids``."""
    with _hb.variable_scope(scope, default_name="EmbedSequence", reuse=reuse):
        table = _variable(
            "embeddings",
            [int(vocab_size), int(embed_dim)],
            _hb.float32,
            initializer,
            regularizer,
            trainable,
            [],
        )
        return _hb.nn.embedding_lookup(table, ids)


def repeat(inputs: Any, repetitions: int, layer: Callable, *args: Any, **kwargs: Any) -> Any:
    """``layer`` applied ``repetitions`` times in scopes ``<scope>/<scope>_1``, ``_2``, ..."""
    scope = kwargs.pop("scope", None)
    base = scope or getattr(layer, "__name__", "repeat")
    out = inputs
    with _hb.variable_scope(scope, default_name="Repeat"):
        for i in range(int(repetitions)):
            out = layer(out, *args, scope=f"{base}_{i + 1}", **kwargs)
    return out


def stack(inputs: Any, layer: Callable, stack_args: Sequence, **kwargs: Any) -> Any:
    """``layer`` applied once per entry of ``stack_args`` (a tuple of its positional
    arguments, or one argument), in scopes ``<scope>/<scope>_1``, ``_2``, ..."""
    scope = kwargs.pop("scope", None)
    base = scope or getattr(layer, "__name__", "stack")
    out = inputs
    with _hb.variable_scope(scope, default_name="Stack"):
        for i, a in enumerate(stack_args):
            args = a if isinstance(a, (list, tuple)) else (a,)
            out = layer(out, *args, scope=f"{base}_{i + 1}", **kwargs)
    return out


# ---- slim.model_analyzer --------------------------------------------------------------------


def _description(t: Any, ref: bool) -> str:
    dims = t.get_shape().dims
    shape = "x".join("?" if d is None else str(d) for d in dims) if dims is not None else "?"
    return f"({t.dtype.name}{'_ref' if ref else ''} {shape})"


def analyze_vars(variables: Any, print_info: bool = False) -> tuple[int, int]:
    """slim's ``model_analyzer.analyze_vars``: (elements, bytes) of ``variables``; with
    ``print_info`` a line per variable as slim prints it (a variable of unknown size counts 0)."""
    if print_info:
        print("---------\nVariables: name (type shape) [size]\n---------")
    total_size = total_bytes = 0
    for v in variables:
        size = v.get_shape().num_elements() or 0
        nbytes = size * v.dtype.size
        total_size += size
        total_bytes += nbytes
        if print_info:
            print(v.name, _description(v, True), f"[{size}, bytes: {nbytes}]")
    if print_info:
        print(f"Total size of variables: {total_size}")
        print(f"Total bytes of variables: {total_bytes}")
    return total_size, total_bytes


def analyze_ops(graph: Any, print_info: bool = False) -> int:
    """slim's ``model_analyzer.analyze_ops``: the elements of every op's outputs, summed (unknown
    sizes count 0); with ``print_info`` a line per op."""
    if print_info:
        print("---------\nOperations: name -> (type shapes) [size]\n---------")
    total = 0
    for op in graph.get_operations():
        size = sum((o.get_shape().num_elements() or 0) for o in op.outputs)
        if print_info:
            shapes = ", ".join(_description(o, False) for o in op.outputs)
            print(f"{op.name} -> {shapes} [{size}]" if shapes else f"{op.name} -> [{size}]")
        total += size
    if print_info:
        print(f"Total size: {total}")
    return total


# ---- tf.contrib.layers.summaries ----------------------------------------------------------------

SUMMARIES = (
    "summarize_activation",
    "summarize_activations",
    "summarize_collection",
    "summarize_tensor",
    "summarize_tensors",
)


def summarize_tensor(tensor: Any, tag: str | None = None) -> Any:
    """A scalar summary of a 0-d ``tensor``, else a histogram, tagged ``tag`` (default the
    op's name)."""
    tag = tag or tensor.op.name
    if tensor.get_shape().ndims == 0:
        return _hb.summary.scalar(tag, tensor)
    return _hb.summary.histogram(tag, tensor)


def summarize_activation(op: Any) -> Any:
    """TF1's activation summary of a layer output: a histogram tagged
    ``<op name>/activation``; after Relu, Relu6 or Softplus also the fraction of negative
    inputs (``/zeros``), after Relu6 the fraction above 6 (``/sixes``)."""
    name = op.op.name
    if op.op.type in ("Relu", "Softplus", "Relu6"):
        x = op.op.inputs[0]
        _hb.summary.scalar(
            f"{name}/zeros", _hb.reduce_mean(_hb.to_float(_hb.less(x, _hb.cast(0.0, x.dtype))))
        )
    if op.op.type == "Relu6":
        x = op.op.inputs[0]
        _hb.summary.scalar(
            f"{name}/sixes",
            _hb.reduce_mean(_hb.to_float(_hb.greater(x, _hb.cast(6.0, x.dtype)))),
        )
    return _hb.summary.histogram(f"{name}/activation", op)


def summarize_tensors(tensors: Any, summarizer: Callable = summarize_tensor) -> list:
    return [summarizer(t) for t in tensors]


def summarize_collection(
    collection: str, name_filter: str | None = None, summarizer: Callable = summarize_tensor
) -> list:
    """``summarizer`` of each tensor of ``collection`` whose name matches ``name_filter``."""
    import re

    tensors = [
        t
        for t in _hb.get_collection(collection)
        if name_filter is None or re.match(name_filter, t.op.name)
    ]
    return summarize_tensors(tensors, summarizer)


def summarize_activations(
    name_filter: str | None = None, summarizer: Callable = summarize_activation
) -> list:
    """``summarize_activation`` of the ACTIVATIONS collection."""
    return summarize_collection("activations", name_filter, summarizer)
