"""TF1's ``tf.contrib.opt``: ``LazyAdamOptimizer`` (runtime/train/optimizers.py), decoupled
weight decay (``AdamWOptimizer``, ``MomentumWOptimizer``, ``extend_with_decoupled_weight_decay``:
Loshchilov & Hutter's rule as TF1 contrib applies it, ``var -= weight_decay * var`` before the
base optimizer's update, on the gradient's rows for a sparse gradient; ``weight_decay`` is not
scaled by the learning rate) and ``NadamOptimizer`` (Adam with Nesterov momentum, Dozat 2016:
``var -= lr_t * (beta1 * m + (1 - beta1) * g) / (sqrt(v) + epsilon)``).
"""

from __future__ import annotations

from typing import Any

from hetbed.runtime.graph import get_default_graph
from hetbed.runtime.ops import state
from hetbed.runtime.ops.control import group
from hetbed.runtime.ops.manip import gather
from hetbed.runtime.ops.math import sqrt
from hetbed.runtime.train.optimizers import (
    AdamOptimizer,
    LazyAdamOptimizer,
    MomentumOptimizer,
    Optimizer,
    _sparse_parts,
)


def _summed_rows(grad: Any) -> tuple:
    """A sparse gradient's values with repeated rows summed, and its distinct rows (TF1's
    ``_deduplicate_indexed_slices``, done before any sparse update here)."""
    from hetbed.runtime.ops.array import shape as shape_of
    from hetbed.runtime.ops.manip import unsorted_segment_sum
    from hetbed.runtime.ops.segments import unique

    values, indices = _sparse_parts(grad)
    rows, at = unique(indices)
    return unsorted_segment_sum(values, at, shape_of(rows)[0]), rows


class DecoupledWeightDecayExtension:
    """Mixed in before an optimizer class: each update first shrinks the variable by
    ``weight_decay * var`` (only the gradient's rows for a sparse gradient), then applies the
    optimizer's own update to the shrunk variable."""

    def __init__(self, weight_decay: Any, **kwargs: Any):
        self._decay_value = weight_decay
        self._decay_var_list: set | None = None
        super().__init__(**kwargs)

    def minimize(
        self,
        loss: Any,
        global_step: Any = None,
        var_list: Any = None,
        gate_gradients: int = 1,
        aggregation_method: Any = None,
        colocate_gradients_with_ops: bool = False,
        name: str | None = None,
        grad_loss: Any = None,
        decay_var_list: Any = None,
    ):
        """``Optimizer.minimize``; ``decay_var_list`` (default: every variable updated) says
        which variables decay."""
        pairs = self.compute_gradients(
            loss, var_list, gate_gradients, aggregation_method, colocate_gradients_with_ops,
            grad_loss,
        )  # fmt: skip
        return self.apply_gradients(pairs, global_step, name, decay_var_list=decay_var_list)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None, decay_var_list=None):
        """``Optimizer.apply_gradients``; each call says which variables decay
        (``decay_var_list``; default: all)."""
        self._decay_var_list = {v.op for v in decay_var_list} if decay_var_list else None
        return super().apply_gradients(grads_and_vars, global_step, name)

    def _decays(self, var: Any) -> bool:
        return self._decay_var_list is None or var.op in self._decay_var_list

    def _decay_value_of(self, var: Any) -> Any:
        wd = self._decay_value
        if callable(wd) and not hasattr(wd, "dtype"):
            wd = wd()
        from hetbed.runtime.ops.array import cast
        from hetbed.runtime.registry import convert_to_tensor

        return cast(convert_to_tensor(wd), var.dtype)

    def _apply_dense(self, grad, var):
        if not self._decays(var):
            return super()._apply_dense(grad, var)
        g = get_default_graph()
        decay = state.assign_sub(
            var, self._decay_value_of(var) * var.value(), use_locking=self._use_locking
        )
        with g.control_dependencies([decay]):
            return super()._apply_dense(grad, var)

    def _apply_sparse(self, grad, var):
        if not self._decays(var):
            return super()._apply_sparse(grad, var)
        g = get_default_graph()
        _, indices = _summed_rows(grad)  # (a repeated row decays once)
        rows = gather(var.value(), indices)
        decay = state.scatter_sub(
            var, indices, self._decay_value_of(var) * rows, use_locking=self._use_locking
        )
        with g.control_dependencies([decay]):
            return super()._apply_sparse(grad, var)


def extend_with_decoupled_weight_decay(base_optimizer: type) -> type:
    """A subclass of ``base_optimizer`` whose constructor takes ``weight_decay`` first."""
    if not (isinstance(base_optimizer, type) and issubclass(base_optimizer, Optimizer)):
        raise TypeError(
            f"extend_with_decoupled_weight_decay: expected an Optimizer class, got {base_optimizer!r}"
        )

    class OptimizerWithDecoupledWeightDecay(DecoupledWeightDecayExtension, base_optimizer):
        def __init__(self, weight_decay: Any, *args: Any, **kwargs: Any):
            names = list(_init_params(base_optimizer))
            kwargs.update(zip(names, args))
            super().__init__(weight_decay, **kwargs)

    OptimizerWithDecoupledWeightDecay.__name__ = (
        f"{base_optimizer.__name__}WithDecoupledWeightDecay"
    )
    return OptimizerWithDecoupledWeightDecay


def _init_params(cls: type) -> list:
    import inspect

    return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]


class AdamWOptimizer(DecoupledWeightDecayExtension, AdamOptimizer):
    """Adam with decoupled weight decay (TF1 contrib's ``AdamWOptimizer``)."""

    def __init__(
        self,
        weight_decay: Any,
        learning_rate: Any = 0.001,
        beta1: Any = 0.9,
        beta2: Any = 0.999,
        epsilon: Any = 1e-8,
        use_locking: bool = False,
        name: str = "AdamW",
    ):
        super().__init__(
            weight_decay,
            learning_rate=learning_rate,
            beta1=beta1,
            beta2=beta2,
            epsilon=epsilon,
            use_locking=use_locking,
            name=name,
        )


class MomentumWOptimizer(DecoupledWeightDecayExtension, MomentumOptimizer):
    """Momentum with decoupled weight decay (TF1 contrib's ``MomentumWOptimizer``)."""

    def __init__(
        self,
        weight_decay: Any,
        learning_rate: Any,
        momentum: Any,
        use_locking: bool = False,
        name: str = "MomentumW",
        use_nesterov: bool = False,
    ):
        super().__init__(
            weight_decay,
            learning_rate=learning_rate,
            momentum=momentum,
            use_locking=use_locking,
            name=name,
            use_nesterov=use_nesterov,
        )


class NadamOptimizer(AdamOptimizer):
    """Adam with Nesterov momentum (TF1 contrib's ``NadamOptimizer``); the moments and powers
    as Adam's. A sparse gradient: m and v decay on every row and take the gradient's rows, and
    only the gradient's rows of var move, as TF's."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 use_locking=False, name="Nadam"):  # fmt: skip
        super().__init__(learning_rate, beta1, beta2, epsilon, use_locking, name)

    def _step(self, var: Any) -> tuple:
        m, v, b1p, b2p, lr, b1, b2, eps = self._args(var)
        return m, v, lr * sqrt(1.0 - b2p) / (1.0 - b1p), b1, b2, eps

    def _apply_dense(self, grad, var):
        m, v, lr_t, b1, b2, eps = self._step(var)
        lock = self._use_locking
        m_t = state.assign(m, b1 * m.value() + (1.0 - b1) * grad, use_locking=lock)
        v_t = state.assign(v, b2 * v.value() + (1.0 - b2) * grad * grad, use_locking=lock)
        update = lr_t * (b1 * m_t + (1.0 - b1) * grad) / (sqrt(v_t) + eps)
        return group(state.assign_sub(var, update, use_locking=lock), m_t, v_t)

    def _apply_sparse(self, grad, var):
        values, indices = _summed_rows(grad)
        m, v, lr_t, b1, b2, eps = self._step(var)
        lock = self._use_locking
        m_scaled = values * (1.0 - b1)
        m_t = state.assign(m, m.value() * b1, use_locking=lock)
        g = get_default_graph()
        with g.control_dependencies([m_t]):
            m_t = state.scatter_add(m, indices, m_scaled, use_locking=lock)
            m_bar = m_scaled + b1 * gather(m_t, indices)
        v_t = state.assign(v, v.value() * b2, use_locking=lock)
        with g.control_dependencies([v_t]):
            v_t = state.scatter_add(v, indices, values * values * (1.0 - b2), use_locking=lock)
        v_rows = gather(v_t, indices)
        step = lr_t * m_bar / (sqrt(v_rows) + eps)
        return group(state.scatter_sub(var, indices, step, use_locking=lock), m_t, v_t)


__all__ = [
    "AdamWOptimizer",
    "DecoupledWeightDecayExtension",
    "LazyAdamOptimizer",
    "MomentumWOptimizer",
    "NadamOptimizer",
    "extend_with_decoupled_weight_decay",
]
