"""``keras.optimizers`` with Keras's defaults and update rules, as ``tf.train`` optimizers (so a
program may also call ``minimize``). SGD and Adam are ``tf.train``'s Momentum/GradientDescent
and Adam kernels (the same math; Keras's Adam epsilon is 1e-7); RMSprop and Adagrad follow
Keras: accumulators start at zeros / ``initial_accumulator_value`` and epsilon is added outside
the square root. ``lr`` is a variable (``K.set_value(opt.lr, 0.01)`` changes it)."""

from __future__ import annotations

from typing import Any

import hetbed as hb
from hetbed.runtime.ops import state as _state
from hetbed.runtime.train import optimizers as _t


class _Keras:
    """Keras's arguments over a ``tf.train`` optimizer: ``learning_rate`` (or ``lr``), gradient
    clipping by ``clipnorm`` / ``clipvalue``, and the ``lr`` variable."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        from .saving import record_init

        record_init(cls)  # (a saved model writes its optimizer as it was made)

    def _keras_init(self, learning_rate: float, kwargs: dict) -> None:
        lr = kwargs.pop("lr", None)
        self._lr_value = float(learning_rate if lr is None else lr)
        self._lr_var: Any = None
        self.clipnorm = kwargs.pop("clipnorm", None)
        self.clipvalue = kwargs.pop("clipvalue", None)
        if kwargs.pop("decay", 0.0):
            raise NotImplementedError(
                f"keras.optimizers.{type(self).__name__}: decay is not supported; use a "
                "LearningRateScheduler-style callback that sets K.set_value(opt.lr, ...)"
            )
        kwargs.pop("name", None)
        if kwargs:
            raise TypeError(f"keras.optimizers.{type(self).__name__}: unknown arguments {kwargs}")
        self._hyper_values["learning_rate"] = lambda: self.lr

    @property
    def lr(self) -> Any:
        if self._lr_var is None or self._lr_var.graph is not hb.get_default_graph():
            with hb.get_default_graph().name_scope(None), hb.name_scope(self._name):
                self._lr_var = hb.Variable(self._lr_value, name="lr", trainable=False)
        return self._lr_var

    learning_rate = lr

    def compute_gradients(self, loss: Any, var_list: Any = None, **kw: Any) -> list:
        pairs = super().compute_gradients(loss, var_list, **kw)  # type: ignore[misc]
        if self.clipnorm is None and self.clipvalue is None:
            return pairs
        out = []
        for g, v in pairs:
            if g is not None:
                g = hb.convert_to_tensor(g)
                if self.clipnorm is not None:
                    g = hb.clip_by_norm(g, self.clipnorm)
                if self.clipvalue is not None:
                    g = hb.minimum(hb.maximum(g, -self.clipvalue), self.clipvalue)
            out.append((g, v))
        return out

    def get_config(self) -> dict:
        return {"learning_rate": self._lr_value}


class SGD(_Keras, _t.MomentumOptimizer):
    """var -= lr * grad; with ``momentum``: v = momentum * v - lr * grad, var += v
    (``nesterov``: var += momentum * v - lr * grad)."""

    def __init__(
        self, learning_rate: float = 0.01, momentum: float = 0.0, nesterov: bool = False, **kw: Any
    ):
        _t.MomentumOptimizer.__init__(self, 0.01, momentum, name="SGD", use_nesterov=nesterov)
        self.momentum, self.nesterov = float(momentum), nesterov
        self._keras_init(learning_rate, kw)

    def _create_slots(self, var_list):
        if self.momentum:
            super()._create_slots(var_list)

    def _apply_dense(self, grad, var):
        if self.momentum:
            return super()._apply_dense(grad, var)
        lr = self._hyper("learning_rate", var.dtype)
        return _t.ops.apply_gradient_descent(var, lr, grad, self._use_locking).op

    def _apply_sparse(self, grad, var):
        if self.momentum:
            return super()._apply_sparse(grad, var)
        return self._apply_dense(hb.convert_to_tensor(grad), var)


class Adam(_Keras, _t.AdamOptimizer):
    """Adam (Kingma & Ba) with Keras's defaults: lr 0.001, beta_1 0.9, beta_2 0.999,
    epsilon 1e-7."""

    def __init__(
        self,
        learning_rate: float = 0.001,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-7,
        amsgrad: bool = False,
        **kw: Any,
    ):
        if amsgrad:
            raise NotImplementedError("keras.optimizers.Adam: amsgrad is not supported")
        _t.AdamOptimizer.__init__(self, 0.001, beta_1, beta_2, epsilon, name="Adam")
        self._keras_init(learning_rate, kw)


class _Composed(_Keras, _t.Optimizer):
    """An optimizer whose dense update is composed of ops (sparse gradients made dense)."""

    def _apply_sparse(self, grad, var):
        return self._apply_dense(hb.convert_to_tensor(grad), var)


class RMSprop(_Composed):
    """ms = rho * ms + (1 - rho) * grad^2 (ms starts at 0); var -= lr * grad / (sqrt(ms) + eps);
    ``centered`` subtracts mg^2 (mg the mean gradient); ``momentum`` keeps a velocity."""

    def __init__(
        self,
        learning_rate: float = 0.001,
        rho: float = 0.9,
        momentum: float = 0.0,
        epsilon: float = 1e-7,
        centered: bool = False,
        **kw: Any,
    ):
        _t.Optimizer.__init__(self, False, "RMSprop")
        self._hyper_values = {"rho": rho, "momentum": momentum, "epsilon": epsilon}
        self.rho, self.momentum, self.centered = float(rho), float(momentum), centered
        self._keras_init(learning_rate, kw)

    def _create_slots(self, var_list):
        for v in var_list:
            self._zeros_slot(v, "rms")
            if self.centered:
                self._zeros_slot(v, "mg")
            if self.momentum:
                self._zeros_slot(v, "momentum")

    def _apply_dense(self, grad, var):
        dt = var.dtype
        lr, rho = self._hyper("learning_rate", dt), self._hyper("rho", dt)
        eps = self._hyper("epsilon", dt)
        ms = self.get_slot(var, "rms")
        ms_t = _state.assign(ms, rho * ms.value() + (1.0 - rho) * hb.square(grad))
        denom = ms_t
        updates = [ms_t]
        if self.centered:
            mg = self.get_slot(var, "mg")
            mg_t = _state.assign(mg, rho * mg.value() + (1.0 - rho) * grad)
            denom = ms_t - hb.square(mg_t)
            updates.append(mg_t)
        if self.momentum:  # Keras's kernel form: epsilon inside the square root
            mom = self.get_slot(var, "momentum")
            step = self._hyper("momentum", dt) * mom.value() + lr * grad / hb.sqrt(denom + eps)
            mom_t = _state.assign(mom, step)
            updates.append(_state.assign_sub(var, mom_t))
        else:
            updates.append(_state.assign_sub(var, lr * grad / (hb.sqrt(denom) + eps)))
        return hb.group(*updates)


class Adagrad(_Composed):
    """accum += grad^2 (from ``initial_accumulator_value``); var -= lr * grad / (sqrt(accum)
    + eps)."""

    def __init__(
        self,
        learning_rate: float = 0.001,
        initial_accumulator_value: float = 0.1,
        epsilon: float = 1e-7,
        **kw: Any,
    ):
        _t.Optimizer.__init__(self, False, "Adagrad")
        self._hyper_values = {"epsilon": epsilon}
        self._initial = float(initial_accumulator_value)
        self._keras_init(learning_rate, kw)

    def _create_slots(self, var_list):
        for v in var_list:
            self._make_slot(v, self._initial, "accumulator")

    def _apply_dense(self, grad, var):
        dt = var.dtype
        acc = self.get_slot(var, "accumulator")
        acc_t = _state.assign_add(acc, hb.square(grad))
        step = (
            self._hyper("learning_rate", dt) * grad / (hb.sqrt(acc_t) + self._hyper("epsilon", dt))
        )
        return _state.assign_sub(var, step).op


class TFOptimizer:
    """What Keras calls a ``tf.train`` optimizer given to ``compile`` (used as it is)."""

    def __init__(self, optimizer: Any):
        self.optimizer = optimizer


_BY_NAME = {"sgd": SGD, "adam": Adam, "rmsprop": RMSprop, "adagrad": Adagrad}


def get(identifier: Any) -> Any:
    """An optimizer from a name ("adam", with Keras's defaults) or an optimizer object (a Keras
    or a ``tf.train`` one, used as given)."""
    if isinstance(identifier, TFOptimizer):
        return identifier.optimizer
    if isinstance(identifier, _t.Optimizer):
        return identifier
    if isinstance(identifier, str) and identifier.lower() in _BY_NAME:
        return _BY_NAME[identifier.lower()]()
    raise ValueError(
        f"unknown optimizer {identifier!r}; known: {', '.join(_BY_NAME)} or an optimizer object"
    )
