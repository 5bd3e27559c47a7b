"""The rest of ``tf.contrib.slim`` that tensorflow/models' research/slim nets and training
scripts use beside the layers of contrib_layers.py: ``softmax``, ``separable_conv2d`` (with
``num_outputs=None``, the depthwise part alone, as MobileNet builds it), ``conv2d_transpose``,
the variable helpers (``get_model_variables``, ``get_variables_to_restore``, ...),
``assign_from_checkpoint_fn`` and ``learning.create_train_op``/``train``, with slim's variable names
and defaults."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hetbed as _hb

from .contrib_layers import (
    _finish,
    _nhwc,
    _pair,
    _var_collections,
    _variable,
    add_arg_scope,
    xavier_initializer,
)


def _weights(name, shape, dtype, initializer, regularizer, trainable, collections):
    """A layer's weight variable (slim's ``weights`` collection and the model variables)."""
    return _variable(
        name,
        shape,
        dtype,
        initializer or xavier_initializer(),
        regularizer,
        trainable,
        ["weights", *_var_collections(collections, "weights")],
    )


def _nhwc_input(inputs: Any, fn: str) -> Any:
    """``inputs`` as a tensor, NHWC with its channels known."""
    x = inputs if isinstance(inputs, _hb.Tensor) else _hb.constant(inputs)
    if x.shape.ndims != 4 or x.shape.dims[-1] is None:
        raise ValueError(f"{fn}: inputs must be NHWC with known channels, got shape {x.shape}")
    return x


def _bias(out, num_outputs, dtype, biases_initializer, regularizer, trainable, collections):
    b = _variable(
        "biases",
        [int(num_outputs)],
        dtype,
        _hb.zeros_initializer() if biases_initializer == "zeros" else biases_initializer,
        regularizer,
        trainable,
        ["biases", *_var_collections(collections, "biases")],
    )
    return _hb.nn.bias_add(out, b)


@add_arg_scope
def softmax(logits: Any, scope: Any = None) -> Any:
    """Softmax over the last dimension of ``logits`` of any rank."""
    with _hb.name_scope(scope or "softmax"):
        return _hb.nn.softmax(logits)


@add_arg_scope
def separable_conv2d(
    inputs: Any,
    num_outputs: int | None,
    kernel_size: Any,
    depth_multiplier: int = 1,
    stride: Any = 1,
    padding: str = "SAME",
    data_format: Any = None,
    rate: Any = 1,
    activation_fn: Callable | None = _hb.nn.relu,
    normalizer_fn: Callable | None = None,
    normalizer_params: dict | None = None,
    weights_initializer: Any = None,
    pointwise_initializer: Any = None,
    weights_regularizer: Callable | None = None,
    biases_initializer: Any = "zeros",
    biases_regularizer: Callable | None = None,
    reuse: Any = None,
    variables_collections: Any = None,
    outputs_collections: Any = None,
    trainable: bool = True,
    scope: Any = None,
) -> Any:
    """A depthwise convolution (``<scope>/depthwise_weights`` [kh, kw, in, depth_multiplier])
    then, unless ``num_outputs`` is None, a 1x1 one (``<scope>/pointwise_weights``)."""
    _nhwc(data_format, "separable_conv2d")
    x = _nhwc_input(inputs, "separable_conv2d")
    cin = x.shape.dims[-1]
    kh, kw = _pair(kernel_size, "separable_conv2d: kernel_size")
    sh, sw = _pair(stride, "separable_conv2d: stride")
    rh, rw = _pair(rate, "separable_conv2d: rate")
    init = weights_initializer or xavier_initializer()
    with _hb.variable_scope(scope, default_name="SeparableConv2d", reuse=reuse):
        dw = _weights(
            "depthwise_weights",
            [kh, kw, cin, int(depth_multiplier)],
            x.dtype,
            init,
            weights_regularizer,
            trainable,
            variables_collections,
        )
        rates = None if (rh, rw) == (1, 1) else [rh, rw]
        if num_outputs is None:
            out = _hb.nn.depthwise_conv2d(x, dw, [1, sh, sw, 1], padding.upper(), rate=rates)
            n_out = cin * int(depth_multiplier)
        else:
            pw = _weights(
                "pointwise_weights",
                [1, 1, cin * int(depth_multiplier), int(num_outputs)],
                x.dtype,
                pointwise_initializer or init,
                weights_regularizer,
                trainable,
                variables_collections,
            )
            out = _hb.nn.separable_conv2d(x, dw, pw, [1, sh, sw, 1], padding.upper(), rate=rates)
            n_out = int(num_outputs)
        if normalizer_fn is None and biases_initializer is not None:
            out = _bias(
                out, n_out, x.dtype, biases_initializer, biases_regularizer, trainable,
                variables_collections,
            )  # fmt: skip
        return _finish(out, normalizer_fn, normalizer_params, activation_fn, outputs_collections)


@add_arg_scope
def conv2d_in_plane(
    inputs: Any,
    kernel_size: Any,
    stride: Any = 1,
    padding: str = "SAME",
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
    """One [kh, kw] filter (``<scope>/weights`` [kh, kw, 1, 1]) applied to every channel of NHWC
    ``inputs`` on its own (a depthwise convolution with the filter shared)."""
    x = _nhwc_input(inputs, "conv2d_in_plane")
    cin = x.shape.dims[-1]
    kh, kw = _pair(kernel_size, "conv2d_in_plane: kernel_size")
    sh, sw = _pair(stride, "conv2d_in_plane: stride")
    with _hb.variable_scope(scope, default_name="ConvInPlane", reuse=reuse):
        w = _weights(
            "weights",
            [kh, kw, 1, 1],
            x.dtype,
            weights_initializer,
            weights_regularizer,
            trainable,
            variables_collections,
        )
        tiled = _hb.tile(w, [1, 1, cin, 1])
        out = _hb.nn.depthwise_conv2d(x, tiled, [1, sh, sw, 1], padding.upper())
        if normalizer_fn is None and biases_initializer is not None:
            out = _bias(
                out, cin, x.dtype, biases_initializer, biases_regularizer, trainable,
                variables_collections,
            )  # fmt: skip
        return _finish(out, normalizer_fn, normalizer_params, activation_fn, outputs_collections)


@add_arg_scope
def conv2d_transpose(
    inputs: Any,
    num_outputs: int,
    kernel_size: Any,
    stride: Any = 1,
    padding: str = "SAME",
    data_format: Any = None,
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
    """The transpose of a 2-D convolution; variables ``<scope>/weights`` ([kh, kw, out, in])
    and ``<scope>/biases``; the output is ``stride`` times larger (VALID: plus
    ``max(kernel - stride, 0)``)."""
    _nhwc(data_format, "conv2d_transpose")
    x = _nhwc_input(inputs, "conv2d_transpose")
    kh, kw = _pair(kernel_size, "conv2d_transpose: kernel_size")
    sh, sw = _pair(stride, "conv2d_transpose: stride")
    pad = padding.upper()
    with _hb.variable_scope(scope, default_name="Conv2d_transpose", reuse=reuse):
        w = _weights(
            "weights",
            [kh, kw, int(num_outputs), x.shape.dims[-1]],
            x.dtype,
            weights_initializer,
            weights_regularizer,
            trainable,
            variables_collections,
        )
        shape = _hb.shape(x)

        def size(n: Any, k: int, s: int) -> Any:
            return n * s if pad == "SAME" else n * s + max(k - s, 0)

        out_shape = _hb.stack(
            [shape[0], size(shape[1], kh, sh), size(shape[2], kw, sw), int(num_outputs)]
        )
        out = _hb.nn.conv2d_transpose(x, w, out_shape, [1, sh, sw, 1], pad)
        h, wd = x.shape.dims[1], x.shape.dims[2]
        out.set_shape(
            [
                x.shape.dims[0],
                None if h is None else size(h, kh, sh),
                None if wd is None else size(wd, kw, sw),
                int(num_outputs),
            ]
        )
        if normalizer_fn is None and biases_initializer is not None:
            out = _bias(
                out, num_outputs, x.dtype, biases_initializer, biases_regularizer, trainable,
                variables_collections,
            )  # fmt: skip
        return _finish(out, normalizer_fn, normalizer_params, activation_fn, outputs_collections)


# ---- variables ------------------------------------------------------------------------------


def get_variables(
    scope: Any = None, suffix: str | None = None, collection: str = "variables"
) -> list:
    """The variables of ``collection`` under ``scope`` (a name or a VariableScope) whose names
    end with ``suffix``."""
    if scope is not None and not isinstance(scope, str):
        scope = scope.name
    found = _hb.get_collection(collection, scope)
    if suffix is not None:
        found = [v for v in found if v.op.name.endswith(suffix)]
    return found


def get_model_variables(scope: Any = None, suffix: str | None = None) -> list:
    """The model variables (the layers' weights, biases and batch-norm statistics)."""
    return get_variables(scope, suffix, "model_variables")


def get_trainable_variables(scope: Any = None, suffix: str | None = None) -> list:
    return get_variables(scope, suffix, _hb.GraphKeys.TRAINABLE_VARIABLES)


def get_variables_by_name(given_name: str, scope: Any = None) -> list:
    """The variables whose last name part is ``given_name``."""
    return [v for v in get_variables(scope) if v.op.name.split("/")[-1] == given_name]


def get_variables_to_restore(include: Any = None, exclude: Any = None) -> list:
    """The global variables under the scopes of ``include`` (all by default) and none of
    ``exclude`` (fine-tuning a net without its logits, say)."""
    if include is None:
        found = get_variables()
    else:
        found = [v for scope in include for v in get_variables(scope)]
    if exclude:
        found = [v for v in found if not any(v.op.name.startswith(e) for e in exclude)]
    return found


@add_arg_scope
def variable(
    name: str,
    shape: Any = None,
    dtype: Any = None,
    initializer: Any = None,
    regularizer: Any = None,
    trainable: bool = True,
    collections: Any = None,
    caching_device: Any = None,
    device: Any = None,
    partitioner: Any = None,
    custom_getter: Any = None,
    use_resource: Any = None,
) -> Any:
    """``get_variable`` also added to ``collections`` (global variables always), made under
    ``device`` (a name or a function of the op) where given."""
    import contextlib

    with _hb.device(device) if device is not None else contextlib.nullcontext():
        v = _hb.get_variable(
            name,
            shape,
            dtype=dtype or _hb.float32,
            initializer=initializer,
            regularizer=regularizer,
            trainable=trainable,
        )
    for c in collections or ():
        if v not in _hb.get_collection(c):
            _hb.add_to_collection(c, v)
    return v


@add_arg_scope
def model_variable(name: str, shape: Any = None, dtype: Any = None, **kwargs: Any) -> Any:
    """``variable`` in the model variables; like slim's, it passes ``device`` on explicitly, so
    ``variable``'s own arg_scope device does not apply to it."""
    collections = list(kwargs.pop("collections", None) or []) + ["model_variables"]
    kwargs.setdefault("device", None)
    return variable(name, shape, dtype, collections=collections, **kwargs)


def assign_from_checkpoint_fn(
    model_path: str,
    var_list: Any,
    ignore_missing_vars: bool = False,
    reshape_variables: bool = False,
) -> Callable:
    """``fn(session)`` restoring ``var_list`` (a list or a {checkpoint name: variable} dict)
    from ``model_path``; with ``ignore_missing_vars`` the variables the checkpoint lacks are
    left out (with a warning), as slim's."""
    import logging

    from hetbed.runtime.train.checkpoint import CheckpointReader

    if reshape_variables:
        raise ValueError("assign_from_checkpoint_fn: reshape_variables is not supported")
    items = dict(var_list) if isinstance(var_list, dict) else {v.op.name: v for v in var_list}
    if ignore_missing_vars:
        reader = CheckpointReader(model_path)
        missing = [k for k in items if not reader.has_tensor(k)]
        for k in missing:
            logging.getLogger("hetbed").warning(
                "Variable %s missing in checkpoint %s", k, model_path
            )
            del items[k]
    if not items:
        logging.getLogger("hetbed").warning("No Variables to restore")
        return lambda session: None
    saver = _hb.train.Saver(items, reshape=reshape_variables)
    return lambda session: saver.restore(session, model_path)


# ---- training -------------------------------------------------------------------------------


_USE_GLOBAL_STEP = object()


def create_train_op(
    total_loss: Any,
    optimizer: Any,
    global_step: Any = _USE_GLOBAL_STEP,
    update_ops: Any = None,
    variables_to_train: Any = None,
    clip_gradient_norm: float = 0,
    summarize_gradients: bool = False,
    gate_gradients: int = 1,
    aggregation_method: Any = None,
    colocate_gradients_with_ops: bool = False,
    gradient_multipliers: Any = None,
    check_numerics: bool = True,
) -> Any:
    """slim's ``learning.create_train_op``: a tensor that, when run, runs ``update_ops`` (by
    default the graph's UPDATE_OPS: batch-norm statistics), applies ``optimizer``'s update of
    ``variables_to_train`` (all trainable ones), with gradients scaled by
    ``gradient_multipliers`` and clipped to ``clip_gradient_norm``, and returns the loss."""
    if global_step is _USE_GLOBAL_STEP:
        global_step = _hb.train.get_or_create_global_step()
    if update_ops is None:
        update_ops = _hb.get_collection(_hb.GraphKeys.UPDATE_OPS)
    with _hb.control_dependencies(list(update_ops)):
        total_loss = _hb.identity(total_loss, name="total_loss_with_updates")
    if variables_to_train is None:
        variables_to_train = _hb.trainable_variables()
    grads = optimizer.compute_gradients(
        total_loss,
        variables_to_train,
        gate_gradients=gate_gradients,
        aggregation_method=aggregation_method,
        colocate_gradients_with_ops=colocate_gradients_with_ops,
    )
    if gradient_multipliers:
        keyed = {
            (k if isinstance(k, str) else k.op.name): m for k, m in gradient_multipliers.items()
        }
        grads = [
            (g * keyed[v.op.name] if g is not None and v.op.name in keyed else g, v)
            for g, v in grads
        ]
    if clip_gradient_norm > 0:
        gs, vs = zip(*grads)
        clipped, _ = _hb.clip_by_global_norm(list(gs), clip_gradient_norm)
        grads = list(zip(clipped, vs))
    if summarize_gradients:
        for g, v in grads:
            if g is not None:
                _hb.summary.histogram(v.op.name + "/gradient", g)
    apply_op = optimizer.apply_gradients(grads, global_step=global_step)
    with _hb.control_dependencies([apply_op]):
        loss = total_loss
        if check_numerics:
            loss = _hb.check_numerics(loss, "LossTensor is inf or nan")
        return _hb.identity(loss, name="train_op")


def train_step(sess: Any, train_op: Any, global_step: Any, train_step_kwargs: dict) -> tuple:
    """slim's ``learning.train_step``: run ``train_op`` and the global step once; log when
    ``train_step_kwargs['should_log']`` holds; (the loss, whether ``should_stop`` holds)."""
    import logging
    import time

    start = time.time()
    total_loss, np_global_step = sess.run([train_op, global_step])
    elapsed = time.time() - start
    if "should_log" in train_step_kwargs and sess.run(train_step_kwargs["should_log"]):
        logging.getLogger("hetbed").info(
            "global step %d: loss = %.4f (%.3f sec/step)", np_global_step, total_loss, elapsed
        )
    should_stop = False
    if "should_stop" in train_step_kwargs:
        should_stop = bool(sess.run(train_step_kwargs["should_stop"]))
    return total_loss, should_stop


_USE_DEFAULT = 0


def train(
    train_op: Any,
    logdir: Any,
    train_step_fn: Callable = train_step,
    train_step_kwargs: Any = _USE_DEFAULT,
    log_every_n_steps: int = 1,
    graph: Any = None,
    master: str = "",
    is_chief: bool = True,
    global_step: Any = None,
    number_of_steps: int | None = None,
    init_op: Any = _USE_DEFAULT,
    init_feed_dict: Any = None,
    local_init_op: Any = _USE_DEFAULT,
    init_fn: Any = None,
    ready_op: Any = _USE_DEFAULT,
    summary_op: Any = _USE_DEFAULT,
    save_summaries_secs: float = 600,
    summary_writer: Any = _USE_DEFAULT,
    startup_delay_steps: int = 0,
    saver: Any = None,
    save_interval_secs: float = 600,
    sync_optimizer: Any = None,
    session_config: Any = None,
    session_wrapper: Any = None,
    trace_every_n_steps: Any = None,
    ignore_live_threads: bool = False,
) -> Any:
    """slim's ``learning.train``: a ``Supervisor`` session over ``logdir`` (restored from its
    latest checkpoint, else initialized and ``init_fn`` called), the queue runners and the
    chief's summary and checkpoint threads started, then ``train_step_fn`` until the global
    step reaches ``number_of_steps`` (or an input queue runs out), a last checkpoint saved;
    returns the last loss. ``sync_optimizer`` and tracing are not supported."""
    if train_op is None:
        raise ValueError("slim.learning.train: train_op is None")
    if logdir is None and (summary_op != _USE_DEFAULT or saver is not None):
        raise ValueError("slim.learning.train: a summary_op or a saver needs a logdir")
    if sync_optimizer is not None or trace_every_n_steps is not None:
        raise NotImplementedError(
            "slim.learning.train: sync_optimizer and trace_every_n_steps are not supported"
        )
    graph = graph if graph is not None else _hb.get_default_graph()
    with graph.as_default():
        if global_step is None:
            global_step = _hb.train.get_or_create_global_step()
        saver = saver or _hb.train.Saver()
        with _hb.name_scope("init_ops"):
            if init_op == _USE_DEFAULT:
                init_op = _hb.global_variables_initializer()
            if local_init_op == _USE_DEFAULT:
                local_init_op = _hb.group(
                    _hb.local_variables_initializer(), _hb.tables_initializer()
                )
        if summary_op == _USE_DEFAULT:
            summary_op = _hb.summary.merge_all()
        if train_step_kwargs == _USE_DEFAULT:
            with _hb.name_scope("train_step"):
                train_step_kwargs = {}
                if number_of_steps:
                    stop = _hb.greater_equal(global_step, number_of_steps)
                else:
                    stop = _hb.constant(False)
                train_step_kwargs["should_stop"] = stop
                if log_every_n_steps > 0:
                    train_step_kwargs["should_log"] = _hb.equal(
                        _hb.mod(global_step, log_every_n_steps), 0
                    )
    sv = _hb.train.Supervisor(
        graph=graph,
        is_chief=is_chief,
        logdir=logdir,
        init_op=init_op,
        init_feed_dict=init_feed_dict,
        local_init_op=local_init_op,
        summary_op=summary_op,
        summary_writer=summary_writer,
        global_step=global_step,
        saver=saver,
        save_summaries_secs=save_summaries_secs,
        save_model_secs=save_interval_secs,
        init_fn=init_fn,
    )
    total_loss = None
    with sv.managed_session(master, start_standard_services=False, config=session_config) as sess:
        if session_wrapper is not None:
            sess = session_wrapper(sess)
        if is_chief and logdir:
            sv.start_standard_services(sess)
        threads = sv.start_queue_runners(sess)
        try:
            while not sv.should_stop():
                total_loss, should_stop = train_step_fn(
                    sess, train_op, global_step, train_step_kwargs
                )
                if should_stop:
                    sv.request_stop()
                    break
        except _hb.errors.OutOfRangeError:
            pass
        if logdir and sv.is_chief:
            sv.saver.save(sess, sv.save_path, global_step=sv.global_step)
            sv.stop(threads, close_summary_writer=True, ignore_live_threads=ignore_live_threads)
    return total_loss


__all__ = [
    "assign_from_checkpoint_fn",
    "train",
    "train_step",
    "conv2d_in_plane",
    "conv2d_transpose",
    "create_train_op",
    "get_model_variables",
    "get_trainable_variables",
    "get_variables",
    "get_variables_by_name",
    "get_variables_to_restore",
    "model_variable",
    "separable_conv2d",
    "softmax",
    "variable",
]
