"""``keras.callbacks``: Callback, History, EarlyStopping, ModelCheckpoint (weights only),
LambdaCallback, LearningRateScheduler, TerminateOnNaN."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import hetbed as hb

from . import backend as K


class Callback:
    """Hooks ``fit`` calls: on_{train,epoch,batch}_{begin,end}(…, logs)."""

    def __init__(self) -> None:
        self.model: Any = None
        self.params: dict = {}

    def set_model(self, model: Any) -> None:
        self.model = model

    def set_params(self, params: dict) -> None:
        self.params = params

    def on_train_begin(self, logs: dict | None = None) -> None: ...
    def on_train_end(self, logs: dict | None = None) -> None: ...
    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None: ...
    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None: ...
    def on_batch_begin(self, batch: int, logs: dict | None = None) -> None: ...
    def on_batch_end(self, batch: int, logs: dict | None = None) -> None: ...
    def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None: ...
    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None: ...


class CallbackList:
    def __init__(self, callbacks: Sequence[Callback], model: Any):
        self.callbacks = list(callbacks)
        for cb in self.callbacks:
            cb.set_model(model)

    def set_params(self, params: dict) -> None:
        for cb in self.callbacks:
            cb.set_params(params)

    def call(self, hook: str, *args: Any) -> None:
        if hook in ("on_train_begin", "on_train_end"):
            args = (args[0] if args else {},)
        elif len(args) == 1:
            args = (args[0], {})
        for cb in self.callbacks:
            getattr(cb, hook)(*args)
            if hook.startswith("on_batch_"):
                getattr(cb, hook.replace("on_batch_", "on_train_batch_"))(*args)


class History(Callback):
    """``history``: metric name -> list of per-epoch values; ``epoch``: the epochs run."""

    def on_train_begin(self, logs: dict | None = None) -> None:
        self.epoch: list[int] = []
        self.history: dict[str, list] = {}

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self.epoch.append(epoch)
        for k, v in (logs or {}).items():
            self.history.setdefault(k, []).append(v)


def _improved(monitor: str, mode: str) -> tuple[Callable[[float, float], bool], float]:
    """The comparison "a is better than b" for ``mode`` and the worst value, where ``best``
    starts (+inf for min, -inf for max): NaN is never better, so it never becomes the best."""
    if mode == "auto":
        mode = "max" if "acc" in monitor or monitor.endswith("auc") else "min"
    if mode not in ("min", "max"):
        raise ValueError(f"mode must be 'auto', 'min' or 'max', got {mode!r}")
    if mode == "min":
        return (lambda a, b: bool(a < b)), np.inf
    return (lambda a, b: bool(a > b)), -np.inf


class EarlyStopping(Callback):
    """Stop when ``monitor`` has not improved by ``min_delta`` for ``patience`` epochs (TF 2's
    rules: ``best`` starts at the worst value, the first epoch never stops, a ``baseline`` must be
    beaten to reset the wait, and ``restore_best_weights`` restores at the end of training)."""

    def __init__(
        self,
        monitor: str = "val_loss",
        min_delta: float = 0.0,
        patience: int = 0,
        verbose: int = 0,
        mode: str = "auto",
        baseline: float | None = None,
        restore_best_weights: bool = False,
        start_from_epoch: int = 0,
    ):
        super().__init__()
        self.monitor, self.patience, self.verbose = monitor, patience, verbose
        self.better, self._worst = _improved(monitor, mode)
        self.min_delta = abs(min_delta) if self.better(1, 0) else -abs(min_delta)
        self.baseline, self.restore_best_weights = baseline, restore_best_weights
        self.start_from_epoch = start_from_epoch

    def _is_improvement(self, value: float, reference: float) -> bool:
        return self.better(value - self.min_delta, reference)

    def on_train_begin(self, logs: dict | None = None) -> None:
        self.wait, self.stopped_epoch, self.best_weights, self.best_epoch = 0, 0, None, 0
        self.best = self._worst

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        value = (logs or {}).get(self.monitor)
        if value is None:
            print(
                f"EarlyStopping: metric {self.monitor!r} is not available; have {list(logs or {})}"
            )
            return
        if epoch < self.start_from_epoch:
            return
        if self.restore_best_weights and self.best_weights is None:
            self.best_weights, self.best_epoch = self.model.get_weights(), epoch
        self.wait += 1
        if self._is_improvement(value, self.best):
            self.best, self.best_epoch = value, epoch
            if self.restore_best_weights:
                self.best_weights = self.model.get_weights()
            if self.baseline is None or self._is_improvement(value, self.baseline):
                self.wait = 0
            return
        if self.wait >= self.patience and epoch > 0:
            self.stopped_epoch = epoch
            self.model.stop_training = True

    def on_train_end(self, logs: dict | None = None) -> None:
        if self.stopped_epoch and self.verbose:
            print(f"Epoch {self.stopped_epoch + 1}: early stopping")
        if self.restore_best_weights and self.best_weights is not None:
            if self.verbose:
                print(
                    f"Restoring model weights from the end of the best epoch: {self.best_epoch + 1}."
                )
            self.model.set_weights(self.best_weights)


class ModelCheckpoint(Callback):
    """Save the weights after each epoch (or only the best by ``monitor``) to ``filepath``,
    which may hold ``{epoch:02d}`` and log names (``{val_loss:.2f}``). Weights only: hetbed
    cannot save whole models. ``best`` starts at +inf (mode min) or -inf (max), so a NaN is
    never saved as the best."""

    def __init__(
        self,
        filepath: str,
        monitor: str = "val_loss",
        verbose: int = 0,
        save_best_only: bool = False,
        save_weights_only: bool = False,
        mode: str = "auto",
        period: int = 1,
        save_freq: Any = "epoch",
        initial_value_threshold: float | None = None,
    ):
        super().__init__()
        self.filepath, self.monitor, self.verbose = filepath, monitor, verbose
        self.save_best_only, self.period = save_best_only, period
        self.save_weights_only = save_weights_only
        self.better, worst = _improved(monitor, mode)
        self.best: float = worst if initial_value_threshold is None else initial_value_threshold

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        logs = logs or {}
        if (epoch + 1) % self.period:
            return
        path = self.filepath.format(epoch=epoch + 1, **logs)
        if self.save_best_only:
            value = logs.get(self.monitor)
            if value is None or not self.better(value, self.best):
                return
            self.best = value
        if self.verbose:
            print(f"\nEpoch {epoch + 1:05d}: saving model to {path}")
        self.model.save_weights(path)


class LambdaCallback(Callback):
    """A callback from functions: on_epoch_begin(epoch, logs), on_epoch_end, on_batch_begin(batch,
    logs), on_batch_end, on_train_begin(logs), on_train_end."""

    def __init__(self, **hooks: Callable):
        super().__init__()
        for name, fn in hooks.items():
            if fn is not None:
                setattr(self, name, fn)


class LearningRateScheduler(Callback):
    """Set the optimizer's ``lr`` to ``schedule(epoch)`` (or ``schedule(epoch, lr)``) at the
    start of each epoch."""

    def __init__(self, schedule: Callable, verbose: int = 0):
        super().__init__()
        self.schedule, self.verbose = schedule, verbose

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        lr_var = self.model.optimizer.lr
        try:
            lr = self.schedule(epoch, float(K.get_value(lr_var)))
        except TypeError:
            lr = self.schedule(epoch)
        if isinstance(lr, (hb.Tensor, hb.Variable)):
            if not lr.dtype.base_dtype.is_floating:
                raise ValueError(f"The dtype of `lr` Tensor should be float. Got: {lr.dtype}")
            lr = K.get_value(lr)
        elif not isinstance(lr, (float, np.floating)):
            raise ValueError(f'The output of the "schedule" function should be float. Got: {lr}')
        K.set_value(lr_var, lr)


class TerminateOnNaN(Callback):
    def on_batch_end(self, batch: int, logs: dict | None = None) -> None:
        loss = (logs or {}).get("loss")
        if loss is not None and not np.isfinite(loss):
            print(f"Batch {batch}: invalid loss, terminating training")
            self.model.stop_training = True
