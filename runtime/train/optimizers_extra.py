"""TF1's Adadelta, FTRL and proximal gradient descent optimizers, composed from ordinary ops
(read the variable and its slots, compute the new values, assign them).

A sparse gradient (IndexedSlices) updates only its rows, as TF's sparse kernels do: repeated
indices are summed first, the rule runs on the gathered rows and the results are scattered back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ops import state
from ..ops.array import shape
from ..ops.control import group
from ..ops.manip import gather, unsorted_segment_sum
from ..ops.math import (
    abs,
    greater,
    maximum,
    pow,
    rsqrt,
    sign,
    sqrt,
    square,
    where,
    zeros_like,
)
from .optimizers import Optimizer, _sparse_parts

Rule = Callable[[Any, list, Any], tuple[Any, list]]


class _ComposedOptimizer(Optimizer):
    """An optimizer given by ``_rule(var, slots, grad) -> (new_var, new_slots)`` on tensors."""

    _slot_names: tuple[str, ...] = ()

    def _rule(self, var: Any, slots: list, grad: Any, dtype: Any) -> tuple[Any, list]:
        raise NotImplementedError

    def _slots_of(self, var: Any) -> list:
        return [self.get_slot(var, n) for n in self._slot_names]

    def _apply_dense(self, grad, var):
        slots = self._slots_of(var)
        new_var, new_slots = self._rule(var.value(), [s.value() for s in slots], grad, var.dtype)
        ups = [state.assign(s, v, use_locking=self._use_locking) for s, v in zip(slots, new_slots)]
        ups.append(state.assign(var, new_var, use_locking=self._use_locking))
        return group(*ups)

    def _apply_sparse(self, grad, var):
        values, indices = _sparse_parts(grad)
        summed = unsorted_segment_sum(values, indices, shape(var)[0])  # repeated rows add up
        g_rows = gather(summed, indices)
        slots = self._slots_of(var)
        new_var, new_slots = self._rule(
            gather(var.value(), indices), [gather(s.value(), indices) for s in slots], g_rows,
            var.dtype,
        )  # fmt: skip
        ups = [
            state.scatter_update(s, indices, v, use_locking=self._use_locking)
            for s, v in zip(slots, new_slots)
        ]
        ups.append(state.scatter_update(var, indices, new_var, use_locking=self._use_locking))
        return group(*ups)


class AdadeltaOptimizer(_ComposedOptimizer):
    """accum = rho*accum + (1-rho)*g^2; update = sqrt(accum_update + eps) / sqrt(accum + eps) * g;
    accum_update = rho*accum_update + (1-rho)*update^2; var -= lr * update."""

    _slot_names = ("accum", "accum_update")

    def __init__(
        self,
        learning_rate: Any = 0.001,
        rho: Any = 0.95,
        epsilon: Any = 1e-8,
        use_locking: bool = False,
        name: str = "Adadelta",
    ):
        super().__init__(use_locking, name)
        self._hyper_values = {"learning_rate": learning_rate, "rho": rho, "epsilon": epsilon}

    def _create_slots(self, var_list):
        for v in var_list:
            self._zeros_slot(v, "accum")
            self._zeros_slot(v, "accum_update")

    def _rule(self, var, slots, g, dtype):
        lr, rho, eps = (self._hyper(k, dtype) for k in ("learning_rate", "rho", "epsilon"))
        accum, accum_update = slots
        accum = rho * accum + (1.0 - rho) * square(g)
        update = sqrt(accum_update + eps) * rsqrt(accum + eps) * g
        accum_update = rho * accum_update + (1.0 - rho) * square(update)
        return var - lr * update, [accum, accum_update]


class FtrlOptimizer(_ComposedOptimizer):
    """FTRL-Proximal (McMahan et al. 2013) as TF1's ApplyFtrlV2: per-coordinate accumulators
    ``accum`` (sum of g^2) and ``linear``; L1, L2 and L2-shrinkage regularization."""

    _slot_names = ("accum", "linear")

    def __init__(
        self,
        learning_rate: Any,
        learning_rate_power: float = -0.5,
        initial_accumulator_value: float = 0.1,
        l1_regularization_strength: float = 0.0,
        l2_regularization_strength: float = 0.0,
        use_locking: bool = False,
        name: str = "Ftrl",
        accum_name: str | None = None,
        linear_name: str | None = None,
        l2_shrinkage_regularization_strength: float = 0.0,
    ):
        if initial_accumulator_value < 0.0:
            raise ValueError(
                f"initial_accumulator_value {initial_accumulator_value} needs to be >= 0.0"
            )
        if learning_rate_power > 0.0:
            raise ValueError(f"learning_rate_power {learning_rate_power} needs to be <= 0.0")
        for what, v in (
            ("l1_regularization_strength", l1_regularization_strength),
            ("l2_regularization_strength", l2_regularization_strength),
            ("l2_shrinkage_regularization_strength", l2_shrinkage_regularization_strength),
        ):
            if v < 0.0:
                raise ValueError(f"{what} {v} needs to be >= 0.0")
        super().__init__(use_locking, name)
        self._hyper_values = {
            "learning_rate": learning_rate,
            "lr_power": learning_rate_power,
            "l1": l1_regularization_strength,
            "l2": l2_regularization_strength,
            "l2_shrinkage": l2_shrinkage_regularization_strength,
        }
        self._initial_accumulator_value = initial_accumulator_value

    def _create_slots(self, var_list):
        for v in var_list:
            self._make_slot(v, self._initial_accumulator_value, "accum")
            self._zeros_slot(v, "linear")

    def _rule(self, var, slots, g, dtype):
        lr, p, l1, l2, shrink = (
            self._hyper(k, dtype) for k in ("learning_rate", "lr_power", "l1", "l2", "l2_shrinkage")
        )
        accum, linear = slots
        g_shrunk = g + 2.0 * shrink * var
        new_accum = accum + square(g)
        sigma = (pow(new_accum, -p) - pow(accum, -p)) / lr
        linear = linear + g_shrunk - sigma * var
        quadratic = pow(new_accum, -p) / lr + 2.0 * l2
        new_var = where(
            greater(abs(linear), l1), (sign(linear) * l1 - linear) / quadratic, zeros_like(var)
        )
        return new_var, [new_accum, linear]


class ProximalGradientDescentOptimizer(_ComposedOptimizer):
    """prox = var - lr*g; var = sign(prox) * max(|prox| - lr*l1, 0) / (1 + lr*l2)."""

    def __init__(
        self,
        learning_rate: Any,
        l1_regularization_strength: float = 0.0,
        l2_regularization_strength: float = 0.0,
        use_locking: bool = False,
        name: str = "ProximalGradientDescent",
    ):
        super().__init__(use_locking, name)
        self._hyper_values = {
            "learning_rate": learning_rate,
            "l1": l1_regularization_strength,
            "l2": l2_regularization_strength,
        }

    def _rule(self, var, slots, g, dtype):
        lr, l1, l2 = (self._hyper(k, dtype) for k in ("learning_rate", "l1", "l2"))
        prox = var - lr * g
        shrunk = maximum(abs(prox) - lr * l1, zeros_like(prox))
        return sign(prox) * shrunk / (1.0 + lr * l2), []
