"""TF1's training helpers of tf.contrib: ``contrib.layers.optimize_loss`` (exported by
contrib_layers.py) and ``contrib.seq2seq.sequence_loss``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hetbed as _hb

_OPTIMIZERS = {
    "SGD": "GradientDescentOptimizer",
    "Adam": "AdamOptimizer",
    "Adagrad": "AdagradOptimizer",
    "Momentum": "MomentumOptimizer",
    "RMSProp": "RMSPropOptimizer",
    "Ftrl": "FtrlOptimizer",
}


def optimize_loss(
    loss: Any,
    global_step: Any,
    learning_rate: Any,
    optimizer: Any,
    gradient_noise_scale: Any = None,
    gradient_multipliers: dict | None = None,
    clip_gradients: Any = None,
    learning_rate_decay_fn: Callable | None = None,
    update_ops: list | None = None,
    variables: list | None = None,
    name: str | None = None,
    summaries: Any = None,
    colocate_gradients_with_ops: bool = False,
    increment_global_step: bool = True,
) -> Any:
    """contrib.layers.optimize_loss: the training op for ``loss`` with ``optimizer`` (a name:
    SGD, Adam, Adagrad, Momentum (0.9), RMSProp, Ftrl; a class taking the learning rate; or an
    instance), ``clip_gradients`` (a float: global-norm clipping), ``gradient_multipliers``,
    ``learning_rate_decay_fn(lr, global_step)``, the UPDATE_OPS run first; returns the loss,
    evaluated after the update."""
    if gradient_noise_scale is not None:
        raise ValueError("optimize_loss: gradient_noise_scale is not supported")
    with _hb.variable_scope(name or "OptimizeLoss"):
        lr = (
            _hb.convert_to_tensor(learning_rate)
            if hasattr(_hb, "convert_to_tensor")
            else learning_rate
        )
        if learning_rate_decay_fn is not None:
            lr = learning_rate_decay_fn(lr, global_step)
        if isinstance(optimizer, str):
            if optimizer not in _OPTIMIZERS:
                raise ValueError(
                    f"optimize_loss: unknown optimizer {optimizer!r} (one of {sorted(_OPTIMIZERS)})"
                )
            cls = getattr(_hb.train, _OPTIMIZERS[optimizer])
            opt = cls(lr, 0.9) if optimizer == "Momentum" else cls(lr)
        elif isinstance(optimizer, type):
            opt = optimizer(lr)
        else:
            opt = optimizer
        ups = update_ops if update_ops is not None else _hb.get_collection(_hb.GraphKeys.UPDATE_OPS)
        with _hb.control_dependencies(list(ups)):
            loss = _hb.identity(loss)
        pairs = opt.compute_gradients(loss, var_list=variables)
        if gradient_multipliers:
            pairs = [
                (
                    g * gradient_multipliers[v]
                    if g is not None and v in gradient_multipliers
                    else g,
                    v,
                )
                for g, v in pairs
            ]
        if clip_gradients is not None:
            if callable(clip_gradients):
                pairs = clip_gradients(pairs)
            else:
                grads, vs = zip(*pairs)
                clipped, _ = _hb.clip_by_global_norm(list(grads), float(clip_gradients))
                pairs = list(zip(clipped, vs))
        step = opt.apply_gradients(
            pairs, global_step=global_step if increment_global_step else None
        )
        with _hb.control_dependencies([step]):
            return _hb.identity(loss, name="train")


# ---- contrib.seq2seq.sequence_loss -----------------------------------------------------------


def sequence_loss(
    logits: Any,
    targets: Any,
    weights: Any,
    average_across_timesteps: bool = True,
    average_across_batch: bool = True,
    softmax_loss_function: Callable | None = None,
    name: str | None = None,
) -> Any:
    """contrib.seq2seq.sequence_loss: the weighted softmax cross entropy of ``logits``
    [batch, time, classes] against ``targets`` [batch, time], averaged over the weights of the
    time steps and/or the batch (a scalar, [batch], [time] or [batch, time])."""
    lg = logits if isinstance(logits, _hb.Tensor) else _hb.constant(logits)
    if lg.shape.ndims not in (None, 3):
        raise ValueError(f"sequence_loss: logits must be [batch, time, classes], got {lg.shape}")
    with _hb.name_scope(name or "sequence_loss"):
        n_classes = lg.shape.dims[-1] if lg.shape.ndims else None
        flat_logits = _hb.reshape(
            lg, [-1, n_classes if n_classes is not None else _hb.shape(lg)[2]]
        )
        flat_targets = _hb.reshape(targets, [-1])
        if softmax_loss_function is None:
            crossent = _hb.nn.sparse_softmax_cross_entropy_with_logits(
                labels=flat_targets, logits=flat_logits
            )
        else:
            crossent = softmax_loss_function(labels=flat_targets, logits=flat_logits)
        w = (
            _hb.cast(weights, crossent.dtype)
            if isinstance(weights, _hb.Tensor)
            else _hb.constant(weights, dtype=crossent.dtype)
        )
        crossent = crossent * _hb.reshape(w, [-1])
        if average_across_timesteps and average_across_batch:
            return _hb.reduce_sum(crossent) / (_hb.reduce_sum(w) + 1e-12)
        per = _hb.reshape(crossent, _hb.shape(targets))
        if average_across_timesteps:
            return _hb.reduce_sum(per, 1) / (_hb.reduce_sum(w, 1) + 1e-12)
        if average_across_batch:
            return _hb.reduce_sum(per, 0) / (_hb.reduce_sum(w, 0) + 1e-12)
        return per


# ---- contrib.training.multiply_gradients ---------------------------------------------------------


def multiply_gradients(grads_and_vars: list, gradient_multipliers: dict) -> list:
    """TF1's ``contrib.training.multiply_gradients``: each gradient whose variable (or the
    variable's op name) is a key of ``gradient_multipliers`` scaled by its multiplier (a
    number or a tensor); IndexedSlices keep their indices; a multiplier for a None gradient is
    an error, as TF's."""
    from hetbed.runtime.gradients import IndexedSlices

    if not isinstance(grads_and_vars, list):
        raise ValueError(f"`grads_and_vars` must be a list, got {type(grads_and_vars).__name__}")
    if not gradient_multipliers:
        raise ValueError("`gradient_multipliers` is empty.")
    out = []
    for grad, var in grads_and_vars:
        key = var if var in gradient_multipliers else var.op.name
        if grad is None and key in gradient_multipliers:
            raise ValueError(f"Requested multiple of `None` gradient (variable {var.op.name}).")
        if grad is not None and key in gradient_multipliers:
            m = _hb.convert_to_tensor(gradient_multipliers[key], dtype=grad.dtype)
            if isinstance(grad, IndexedSlices):
                grad = IndexedSlices(grad.values * m, grad.indices, grad.dense_shape)
            else:
                grad = grad * m
        out.append((grad, var))
    return out
