"""Optimizers in TF1's shape: ``opt.minimize(loss, global_step)`` adds one fused update op per
variable (see ``training_ops``) and returns one train op.

Slots (Adam's ``m``/``v``, accumulators) are non-trainable variables named like TensorFlow's
(``w/Adam``, ``w/Adam_1``, ``w/Momentum``), colocated with their variable and listed in the global
variables, so ``hb.global_variables_initializer()`` and ``hb.train.Saver`` cover them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..gradients import IndexedSlices, gradients
from ..graph import Graph, GraphKeys, Operation, Tensor, get_default_graph
from ..ops import state
from ..ops.array import cast, constant, identity
from ..ops.control import group
from ..ops.math import multiply, ones_like, zeros_like
from ..partitioned import expand_partitioned
from ..registry import convert_to_tensor
from ..variables import Variable, outside_control_flow
from . import training_ops as ops

# Slots of variables up to this many elements start from a constant; larger ones from
# zeros_like/ones_like of the variable's initial value, so no large constant enters the graph.
_SMALL_SLOT = 4096


class Optimizer:
    """Base class: computes gradients, creates slots, and applies one update op per variable.

    Subclasses define ``_hyper_values`` (name -> float, tensor or callable), ``_create_slots``,
    ``_apply_dense`` and ``_apply_sparse``, and may override ``_finish``.
    """

    GATE_NONE = 0
    GATE_OP = 1
    GATE_GRAPH = 2

    def __init__(self, use_locking: bool, name: str):
        if not name:
            raise ValueError("an optimizer needs a name (used for its slots and ops)")
        self._use_locking = use_locking
        self._name = name
        self._hyper_values: dict[str, Any] = {}
        self._hyper_cache: dict[tuple[str, _dt.DType], Tensor] = {}
        self._slots: dict[str, dict[Operation, Variable]] = {}
        self._non_slots: dict[tuple[str, Graph], Variable] = {}

    def get_name(self) -> str:
        return self._name

    # ---- the public API -------------------------------------------------------------------
    def minimize(
        self,
        loss: Any,
        global_step: Any = None,
        var_list: Iterable[Variable] | None = None,
        gate_gradients: int = GATE_OP,
        aggregation_method: Any = None,
        colocate_gradients_with_ops: bool = False,
        name: str | None = None,
        grad_loss: Any = None,
    ) -> Operation:
        """Add ops that compute the gradients of ``loss`` and apply them; return the train op.

        Raises ValueError when no variable in ``var_list`` receives a gradient.
        """
        grads_and_vars = self.compute_gradients(
            loss,
            var_list=var_list,
            gate_gradients=gate_gradients,
            aggregation_method=aggregation_method,
            colocate_gradients_with_ops=colocate_gradients_with_ops,
            grad_loss=grad_loss,
        )
        if all(g is None for g, _ in grads_and_vars):
            names = ", ".join(v.op.name for _, v in grads_and_vars)
            raise ValueError(
                f"no gradients for any variable: loss {_name_of(loss)} does not depend on "
                f"{names} through differentiable ops"
            )
        return self.apply_gradients(grads_and_vars, global_step=global_step, name=name)

    def compute_gradients(
        self,
        loss: Any,
        var_list: Iterable[Variable] | None = None,
        gate_gradients: int = GATE_OP,
        aggregation_method: Any = None,
        colocate_gradients_with_ops: bool = False,
        grad_loss: Any = None,
    ) -> list[tuple[Any, Variable]]:
        """[(gradient, variable)] for ``var_list`` (default: the trainable variables).

        A gradient is a Tensor, an IndexedSlices (sparse rows, e.g. from an embedding lookup) or
        None where ``loss`` does not depend on the variable. Raises ValueError for an empty
        ``var_list`` or a non-float loss or variable.
        """
        if gate_gradients not in (self.GATE_NONE, self.GATE_OP, self.GATE_GRAPH):
            raise ValueError(
                f"gate_gradients must be GATE_NONE, GATE_OP or GATE_GRAPH, got {gate_gradients!r}"
            )
        if callable(loss) and not isinstance(loss, (Tensor, Variable)):
            loss = loss()
        loss = convert_to_tensor(loss)
        _check_float(loss.dtype, f"loss {loss.name}")
        if var_list is None:
            var_list = loss.graph.get_collection(GraphKeys.TRAINABLE_VARIABLES)
        var_list = expand_partitioned(var_list)
        if not var_list:
            raise ValueError(
                "no variables to optimize: var_list is empty and no trainable variables"
            )
        for v in var_list:
            _check_var(v)
        grads = gradients(
            loss,
            var_list,
            grad_ys=None if grad_loss is None else [grad_loss],
            gate_gradients=gate_gradients == self.GATE_OP,
            aggregation_method=aggregation_method,
            colocate_gradients_with_ops=colocate_gradients_with_ops,
        )
        for g, v in zip(grads, var_list):  # (as TF1: only a variable with a gradient)
            if g is not None:
                _check_float(v.dtype, f"variable {v.op.name}")
        if gate_gradients == self.GATE_GRAPH:
            grads = _gate(loss.graph, grads)
        return list(zip(grads, var_list))

    def apply_gradients(
        self, grads_and_vars: Iterable, global_step: Any = None, name: str | None = None
    ) -> Operation:
        """One op that applies every (gradient, variable) update, then increments global_step.

        Pairs whose gradient is None are skipped. Returns the global step's AssignAdd when
        ``global_step`` is given (it runs after all updates), else a group of the updates; the op
        is named ``name`` or the optimizer's name. Raises ValueError when no gradient is given.
        """
        pairs = []
        for pair in grads_and_vars:
            try:
                g, v = pair
            except (TypeError, ValueError):
                raise TypeError(
                    f"grads_and_vars must hold (gradient, variable) pairs, got {pair!r}"
                ) from None
            _check_var(v)
            if g is not None and not isinstance(g, IndexedSlices):
                g = convert_to_tensor(g)
            if g is not None and g.dtype != v.dtype:
                raise ValueError(
                    f"gradient {g.name} is {g.dtype.name} but variable {v.op.name} is {v.dtype.name}"
                )
            pairs.append((g, v))
        if not pairs:
            raise ValueError("apply_gradients: no (gradient, variable) pairs given")
        var_list = [v for g, v in pairs if g is not None]
        seen: set[int] = set()
        for v in var_list:
            if id(v) in seen:
                raise ValueError(
                    f"variable {v.op.name} appears twice in grads_and_vars; sum its gradients first"
                )
            seen.add(id(v))
        if not var_list:
            names = ", ".join(v.op.name for _, v in pairs)
            raise ValueError(f"no gradients provided for any variable: {names}")
        graph = var_list[0].graph
        with graph.as_default():
            with graph.control_dependencies(None):
                self._create_slots(var_list)
            with graph.name_scope(name or self._name) as scope:
                self._hyper_cache = {}
                self._prepare()
                for dt in dict.fromkeys(v.dtype for v in var_list):
                    for key in self._hyper_values:
                        self._hyper(key, dt)
                update_ops = []
                for g, v in pairs:
                    if g is None:
                        continue
                    with graph.name_scope("update_" + v.op.name), _on(graph, v.op):
                        if isinstance(g, IndexedSlices):
                            update_ops.append(self._apply_sparse(g, v))
                        else:
                            update_ops.append(self._apply_dense(g, v))
                if global_step is None:
                    train_op = self._finish(update_ops, scope)
                else:
                    finish = self._finish(update_ops, "update")
                    gs = state._ref_of(global_step)
                    with graph.control_dependencies([finish]), _on(graph, gs.op):
                        train_op = state.assign_add(gs, 1, name=scope).op
        ref = graph.get_collection_ref(GraphKeys.TRAIN_OP)
        if train_op not in ref:
            ref.append(train_op)
        return train_op

    def get_slot(self, var: Variable, name: str) -> Variable | None:
        """The slot ``name`` (e.g. "m") made for ``var``, or None."""
        return self._slots.get(name, {}).get(var.op)

    def get_slot_names(self) -> list[str]:
        return sorted(self._slots)

    def variables(self) -> list[Variable]:
        """Slots and other state (e.g. Adam's beta powers) in the default graph, by name."""
        g = get_default_graph()
        out = [v for (_, vg), v in self._non_slots.items() if vg is g]
        for slots in self._slots.values():
            out.extend(s for s in slots.values() if s.graph is g)
        return sorted(out, key=lambda v: v.name)

    # ---- hooks for subclasses ------------------------------------------------------------
    # (TF1's: a custom optimizer written against tf.train.Optimizer overrides these)
    def _create_slots(self, var_list: list[Variable]) -> None:
        pass

    def _prepare(self) -> None:
        """Called once per ``apply_gradients``, in its name scope, before the updates (a
        subclass makes its hyper-parameter tensors here)."""

    def _apply_dense(self, grad: Tensor, var: Variable) -> Any:
        raise NotImplementedError(f"{type(self).__name__} needs _apply_dense")

    def _apply_sparse(self, grad: IndexedSlices, var: Variable) -> Any:
        raise NotImplementedError(f"{type(self).__name__} needs _apply_sparse")

    def _finish(self, update_ops: list, name_scope: str) -> Operation:
        return group(*update_ops, name=name_scope)

    # ---- helpers for subclasses ------------------------------------------------------------
    def _hyper(self, key: str, dtype: _dt.DType) -> Tensor:
        """Hyper-parameter ``key`` as a scalar tensor of ``dtype`` (made once per apply)."""
        t = self._hyper_cache.get((key, dtype))
        if t is None:
            value = self._hyper_values[key]
            if callable(value) and not isinstance(value, (Tensor, Variable)):
                value = value()
            if isinstance(value, (Tensor, Variable)):
                t = cast(convert_to_tensor(value), dtype)
            else:
                t = constant(np.asarray(value, dtype.np), name=key)
            self._hyper_cache[(key, dtype)] = t
        return t

    def _make_slot(
        self, var: Variable, fill: Any, slot_name: str, op_name: str | None = None
    ) -> Variable:
        """The slot ``slot_name`` of ``var`` (created once): a variable named ``var/<op_name>``
        (the optimizer's name by default; under the current variable scope's name, as TF's), filled with ``fill`` (a number) or initialized to it
        (a tensor or array of ``var``'s shape)."""
        slots = self._slots.setdefault(slot_name, {})
        s = slots.get(var.op)
        if s is None:
            from ..variable_scope import get_variable_scope

            g = var.graph
            # as TF's slot creator: under the variable scope the optimizer is applied in
            scope = get_variable_scope().name
            prefix = f"{scope}/" if scope else ""
            # as TF's apply_gradients (init_scope): outside any cond or loop being built, so
            # that the slot's initializer does not wait on a branch (baselines' K-FAC applies
            # its optimizer inside a tf.cond)
            with g.name_scope(None), g.control_dependencies(None), _on(g, var.op), \
                    outside_control_flow(g):  # fmt: skip
                if not isinstance(fill, (Tensor, Variable)) and np.ndim(fill) == 0:
                    init: Any = _filled_like(var, float(fill))
                else:
                    init = cast(convert_to_tensor(fill), var.dtype)
                s = Variable(
                    init,
                    trainable=False,
                    name=_free_name(g, f"{prefix}{var.op.name}/{op_name or self._name}"),
                    validate_shape=var.shape.is_fully_defined(),
                )
            slots[var.op] = s
        return s

    def _zeros_slot(self, var: Variable, slot_name: str, op_name: str | None = None) -> Variable:
        """The slot ``slot_name`` of ``var``, zeros like it (TF1's; ``op_name``, the name its
        variable is made under, is the optimizer's, as TF's callers pass it)."""
        return self._make_slot(var, 0.0, slot_name, op_name)

    def _get_or_make_slot(
        self, var: Variable, val: Any, slot_name: str, op_name: str | None = None
    ) -> Variable:
        """TF1's: the slot ``slot_name`` of ``var``, made once with initial value ``val`` (a
        tensor or array of ``var``'s shape)."""
        return self._make_slot(var, val, slot_name, op_name)

    def _get_or_make_slot_with_initializer(
        self, var: Variable, initializer: Any, shape: Any, dtype: Any, slot_name: str,
        op_name: str | None = None,
    ) -> Variable:  # fmt: skip
        """TF1's: the slot ``slot_name`` of ``var``, made once by ``initializer`` (an
        initializer object or a function of (shape, dtype))."""
        made = self._slot_dict(slot_name).get(var.op)
        if made is not None:
            return made
        with var.graph.control_dependencies(None), _on(var.graph, var.op), \
                outside_control_flow(var.graph):  # fmt: skip
            value = initializer(shape, dtype=_dt.as_dtype(dtype))
        return self._make_slot(var, value, slot_name, op_name)

    def _slot_dict(self, slot_name: str) -> dict:
        """TF1's: the slots named ``slot_name``, by their variable's op."""
        return self._slots.setdefault(slot_name, {})

    def _create_non_slot_variable(self, initial_value: Any, name: str, colocate_with: Variable
                                  ) -> Variable:  # fmt: skip
        """TF1's: a per-graph optimizer variable (``_non_slot``)."""
        return self._non_slot(name, initial_value, colocate_with)

    def _get_non_slot_variable(self, name: str, graph: Graph | None = None) -> Variable | None:
        """TF1's: the per-graph variable ``name`` (None if not made)."""
        return self._non_slots.get((name, graph if graph is not None else get_default_graph()))

    @staticmethod
    def _call_if_callable(param: Any) -> Any:
        """TF1's: ``param()`` if it is callable (a learning rate given as a function)."""
        return param() if callable(param) else param

    def _non_slot(self, name: str, initial: Any, colocate: Variable) -> Variable:
        """A per-graph optimizer variable (e.g. Adam's beta1_power), created once."""
        key = (name, colocate.graph)
        v = self._non_slots.get(key)
        if v is None:
            g = colocate.graph
            with g.control_dependencies(None), _on(g, colocate.op):
                if isinstance(initial, (Tensor, Variable)):
                    init: Any = cast(convert_to_tensor(initial), colocate.dtype)
                else:
                    init = constant(np.asarray(initial, colocate.dtype.np))
                v = Variable(init, trainable=False, name=name)
            self._non_slots[key] = v
        return v

    def _get_non_slot(self, name: str, graph: Graph) -> Variable:
        return self._non_slots[(name, graph)]

    def _read(self, v: Variable, dtype: _dt.DType) -> Tensor:
        return cast(v.value(), dtype)

    def __repr__(self) -> str:
        return f"<hb.train.{type(self).__name__} '{self._name}'>"


# ---- module helpers -----------------------------------------------------------------------------


@contextlib.contextmanager
def _on(graph: Graph, op: Operation) -> Iterator[None]:
    """Build on the device of ``op``: ignore enclosing device scopes, colocate with ``op``."""
    with graph.device(None), graph.colocate_with(op):
        yield


def _name_of(x: Any) -> str:
    return getattr(x, "name", repr(x))


def _check_var(v: Any) -> None:
    if not isinstance(v, Variable):
        raise TypeError(f"optimizers update hb.Variable objects; got {v!r}")


def _check_float(dtype: _dt.DType, what: str) -> None:
    if not dtype.is_floating:
        raise ValueError(f"{what} has dtype {dtype.name}; optimizers need float16/32/64")


def _free_name(graph: Graph, base: str) -> str:
    """``base``, or ``base_1``, ``base_2``, ... : the first name not yet used (TF's slot names)."""
    name, i = base, 0
    while graph.unique_name(name, mark_as_used=False) != name:
        i += 1
        name = f"{base}_{i}"
    return name


def _filled_like(var: Variable, fill: float) -> Any:
    """An initial value of ``var``'s shape and dtype holding ``fill`` everywhere."""
    n = var.shape.num_elements()
    if n is not None and n <= _SMALL_SLOT:
        return constant(fill, dtype=var.dtype, shape=var.shape.as_list())
    base = var.initial_value
    if fill == 0:
        return zeros_like(base, dtype=var.dtype)
    ones = ones_like(base, dtype=var.dtype)
    return ones if fill == 1 else multiply(ones, constant(np.asarray(fill, var.dtype.np)))


def _gate(graph: Graph, grads: list) -> list:
    """GATE_GRAPH: every gradient becomes available only once all of them are computed."""
    parts: list = []
    for g in grads:
        if isinstance(g, IndexedSlices):
            parts += [g.values, g.indices]
        elif g is not None:
            parts.append(g)
    if not parts:
        return grads
    with graph.name_scope("gate_gradients"):
        gate = group(*parts)
        with graph.control_dependencies([gate]):
            out: list = []
            for g in grads:
                if isinstance(g, IndexedSlices):
                    out.append(
                        IndexedSlices(identity(g.values), identity(g.indices), g.dense_shape)
                    )
                else:
                    out.append(None if g is None else identity(g))
    return out


def _sparse_parts(grad: IndexedSlices) -> tuple[Tensor, Tensor]:
    return convert_to_tensor(grad.values), convert_to_tensor(grad.indices)


# ---- the optimizers -----------------------------------------------------------------------------


class GradientDescentOptimizer(Optimizer):
    """var -= learning_rate * grad."""

    def __init__(
        self, learning_rate: Any, use_locking: bool = False, name: str = "GradientDescent"
    ):
        super().__init__(use_locking, name)
        self._hyper_values = {"learning_rate": learning_rate}

    def _apply_dense(self, grad, var):
        lr = self._hyper("learning_rate", var.dtype)
        return ops.apply_gradient_descent(var, lr, grad, use_locking=self._use_locking).op

    def _apply_sparse(self, grad, var):
        lr = self._hyper("learning_rate", var.dtype)
        values, indices = _sparse_parts(grad)
        return ops.sparse_apply_gradient_descent(
            var, lr, values, indices, use_locking=self._use_locking
        ).op


class MomentumOptimizer(Optimizer):
    """accum = momentum * accum + grad; var -= lr * accum (Nesterov: lr * (grad + momentum * accum))."""

    def __init__(
        self,
        learning_rate: Any,
        momentum: Any,
        use_locking: bool = False,
        name: str = "Momentum",
        use_nesterov: bool = False,
    ):
        super().__init__(use_locking, name)
        self._hyper_values = {"learning_rate": learning_rate, "momentum": momentum}
        self._use_nesterov = use_nesterov

    def _create_slots(self, var_list):
        for v in var_list:
            self._zeros_slot(v, "momentum")

    def _args(self, var):
        return (
            self.get_slot(var, "momentum"),
            self._hyper("learning_rate", var.dtype),
            self._hyper("momentum", var.dtype),
        )

    def _apply_dense(self, grad, var):
        accum, lr, mom = self._args(var)
        return ops.apply_momentum(
            var, accum, lr, grad, mom, self._use_locking, self._use_nesterov
        ).op

    def _apply_sparse(self, grad, var):
        accum, lr, mom = self._args(var)
        values, indices = _sparse_parts(grad)
        return ops.sparse_apply_momentum(
            var, accum, lr, values, indices, mom, self._use_locking, self._use_nesterov
        ).op


class AdagradOptimizer(Optimizer):
    """accum += grad^2; var -= lr * grad / sqrt(accum)."""

    def __init__(
        self,
        learning_rate: Any,
        initial_accumulator_value: float = 0.1,
        use_locking: bool = False,
        name: str = "Adagrad",
    ):
        if initial_accumulator_value <= 0.0:
            raise ValueError(
                f"initial_accumulator_value must be positive, got {initial_accumulator_value}"
            )
        super().__init__(use_locking, name)
        self._hyper_values = {"learning_rate": learning_rate}
        self._initial_accumulator_value = initial_accumulator_value

    def _create_slots(self, var_list):
        for v in var_list:
            self._make_slot(v, self._initial_accumulator_value, "accumulator")

    def _apply_dense(self, grad, var):
        accum = self.get_slot(var, "accumulator")
        lr = self._hyper("learning_rate", var.dtype)
        return ops.apply_adagrad(var, accum, lr, grad, self._use_locking).op

    def _apply_sparse(self, grad, var):
        accum = self.get_slot(var, "accumulator")
        lr = self._hyper("learning_rate", var.dtype)
        values, indices = _sparse_parts(grad)
        return ops.sparse_apply_adagrad(var, accum, lr, values, indices, self._use_locking).op


class AdamOptimizer(Optimizer):
    """TF1's Adam: lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t); m, v moments; var -= lr_t *
    m / (sqrt(v) + epsilon). ``beta1_power``/``beta2_power`` are variables updated after each step.

    With an IndexedSlices gradient, m and v decay on every row and the gradient's rows are added,
    and every row of var moves (TF1's semantics; see ``training_ops.SparseApplyAdam``).
    ``LazyAdamOptimizer`` updates only the gradient's rows.
    """

    _lazy = False

    def __init__(
        self,
        learning_rate: Any = 0.001,
        beta1: Any = 0.9,
        beta2: Any = 0.999,
        epsilon: Any = 1e-8,
        use_locking: bool = False,
        name: str = "Adam",
    ):
        super().__init__(use_locking, name)
        self._hyper_values = {
            "learning_rate": learning_rate,
            "beta1": beta1,
            "beta2": beta2,
            "epsilon": epsilon,
        }

    def _create_slots(self, var_list):
        first = min(var_list, key=lambda v: v.name)
        self._non_slot("beta1_power", self._hyper_values["beta1"], first)
        self._non_slot("beta2_power", self._hyper_values["beta2"], first)
        for v in var_list:
            self._zeros_slot(v, "m")
            self._zeros_slot(v, "v")

    def _get_beta_accumulators(self) -> tuple[Variable, Variable]:
        g = get_default_graph()
        return self._get_non_slot("beta1_power", g), self._get_non_slot("beta2_power", g)

    def _args(self, var):
        dt = var.dtype
        b1p, b2p = self._get_beta_accumulators()
        return [
            self.get_slot(var, "m"),
            self.get_slot(var, "v"),
            self._read(b1p, dt),
            self._read(b2p, dt),
            self._hyper("learning_rate", dt),
            self._hyper("beta1", dt),
            self._hyper("beta2", dt),
            self._hyper("epsilon", dt),
        ]

    def _apply_dense(self, grad, var):
        return ops.apply_adam(var, *self._args(var), grad, use_locking=self._use_locking).op

    def _apply_sparse(self, grad, var):
        values, indices = _sparse_parts(grad)
        return ops.sparse_apply_adam(
            var, *self._args(var), values, indices, use_locking=self._use_locking, lazy=self._lazy
        ).op

    def _finish(self, update_ops, name_scope):
        b1p, b2p = self._get_beta_accumulators()
        g = b1p.graph
        with g.control_dependencies(update_ops), _on(g, b1p.op):
            u1 = state.assign(
                b1p, b1p.value() * self._hyper("beta1", b1p.dtype), name="update_beta1"
            )
            u2 = state.assign(
                b2p, b2p.value() * self._hyper("beta2", b2p.dtype), name="update_beta2"
            )
        return group(*update_ops, u1, u2, name=name_scope)


class LazyAdamOptimizer(AdamOptimizer):
    """Adam whose sparse updates touch only the gradient's rows of m, v and var
    (tf.contrib.opt.LazyAdamOptimizer); dense gradients are handled as by AdamOptimizer."""

    _lazy = True


class RMSPropOptimizer(Optimizer):
    """TF1's RMSProp: ms = decay * ms + (1 - decay) * grad^2; mom = momentum * mom + lr * grad /
    sqrt(ms + epsilon); var -= mom. ``centered`` subtracts the squared mean gradient from ms.
    The ``rms`` slot starts at ones, as in TF1."""

    def __init__(
        self,
        learning_rate: Any,
        decay: Any = 0.9,
        momentum: Any = 0.0,
        epsilon: Any = 1e-10,
        use_locking: bool = False,
        centered: bool = False,
        name: str = "RMSProp",
    ):
        super().__init__(use_locking, name)
        self._hyper_values = {
            "learning_rate": learning_rate,
            "decay": decay,
            "momentum": momentum,
            "epsilon": epsilon,
        }
        self._centered = centered

    def _create_slots(self, var_list):
        for v in var_list:
            self._make_slot(v, 1.0, "rms")
            if self._centered:
                self._zeros_slot(v, "mg")
            self._zeros_slot(v, "momentum")

    def _refs(self, var):
        refs = [self.get_slot(var, "rms"), self.get_slot(var, "momentum")]
        if self._centered:
            refs.insert(0, self.get_slot(var, "mg"))
        return refs

    def _hypers(self, var):
        return [
            self._hyper(k, var.dtype) for k in ("learning_rate", "decay", "momentum", "epsilon")
        ]

    def _apply_dense(self, grad, var):
        build = ops.apply_centered_rms_prop if self._centered else ops.apply_rms_prop
        return build(
            var, *self._refs(var), *self._hypers(var), grad, use_locking=self._use_locking
        ).op

    def _apply_sparse(self, grad, var):
        values, indices = _sparse_parts(grad)
        build = ops.sparse_apply_centered_rms_prop if self._centered else ops.sparse_apply_rms_prop
        return build(
            var,
            *self._refs(var),
            *self._hypers(var),
            values,
            indices,
            use_locking=self._use_locking,
        ).op


__all__ = [
    "Optimizer",
    "GradientDescentOptimizer",
    "MomentumOptimizer",
    "AdagradOptimizer",
    "AdamOptimizer",
    "LazyAdamOptimizer",
    "RMSPropOptimizer",
]
