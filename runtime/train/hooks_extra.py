"""More of TF1's session-run hooks: LoggingTensorHook, NanTensorHook, FeedFnHook, and the
SecondOrStepTimer they use."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..graph import Tensor, get_default_graph
from .monitored import SessionRunArgs, SessionRunHook

_log = logging.getLogger("hetbed")


class NanLossDuringTrainingError(RuntimeError):
    """Raised by NanTensorHook when the loss is NaN."""

    def __str__(self) -> str:
        return "NaN loss during training."


class SecondOrStepTimer:
    """TF1's timer: triggers on the first step, then every ``every_steps`` steps or after
    ``every_secs`` seconds (exactly one of them)."""

    def __init__(self, every_secs: float | None = None, every_steps: int | None = None):
        if (every_secs is None) == (every_steps is None):
            raise ValueError("exactly one of every_secs and every_steps must be provided")
        if every_steps is not None and int(every_steps) <= 0:
            raise ValueError(f"every_steps must be positive, got {every_steps}")
        if every_secs is not None and float(every_secs) <= 0:
            raise ValueError(f"every_secs must be positive, got {every_secs}")
        self._every_secs = every_secs
        self._every_steps = every_steps
        self.reset()

    def reset(self) -> None:
        self._last_time: float | None = None
        self._last_step: int | None = None

    def should_trigger_for_step(self, step: int) -> bool:
        if self._last_step is None:
            return True
        if self._last_step == step:
            return False
        if self._every_secs is not None:
            return time.time() >= self._last_time + self._every_secs
        return step >= self._last_step + self._every_steps

    def update_last_triggered_step(self, step: int) -> tuple[float | None, int | None]:
        now = time.time()
        if self._last_time is None:
            elapsed, steps = None, None
        else:
            elapsed, steps = now - self._last_time, step - self._last_step
        self._last_time, self._last_step = now, step
        return elapsed, steps

    def last_triggered_step(self) -> int | None:
        return self._last_step


def _as_tensor(graph: Any, t: Any) -> Tensor:
    if isinstance(t, str):
        return graph.as_graph_element(t)
    return t


class LoggingTensorHook(SessionRunHook):
    """Logs the values of ``tensors`` (a dict tag -> tensor or name, or a list) through the
    ``hetbed`` logger at INFO, every ``every_n_iter`` steps or ``every_n_secs`` seconds, and/or
    at the end (``at_end``). ``formatter(dict tag -> value) -> str`` replaces the default
    "tag = value, ..." line."""

    def __init__(
        self,
        tensors: Any,
        every_n_iter: int | None = None,
        every_n_secs: float | None = None,
        at_end: bool = False,
        formatter: Callable | None = None,
    ):
        only_log_at_end = at_end and every_n_iter is None and every_n_secs is None
        if not only_log_at_end and (every_n_iter is None) == (every_n_secs is None):
            raise ValueError(
                "either at_end and/or exactly one of every_n_iter and every_n_secs must be provided"
            )
        if every_n_iter is not None and every_n_iter <= 0:
            raise ValueError(f"invalid every_n_iter={every_n_iter}")
        if not isinstance(tensors, dict):
            self._tag_order = [t if isinstance(t, str) else t.name for t in tensors]
            tensors = {tag: t for tag, t in zip(self._tag_order, tensors)}
        else:
            self._tag_order = sorted(tensors)
        self._tensors = tensors
        self._formatter = formatter
        self._log_at_end = at_end
        self._timer = None if only_log_at_end else SecondOrStepTimer(every_n_secs, every_n_iter)
        self._iter = 0
        self._should_trigger = False

    def begin(self) -> None:
        if self._timer is not None:
            self._timer.reset()
        self._iter = 0
        g = get_default_graph()
        self._current = {tag: _as_tensor(g, t) for tag, t in self._tensors.items()}

    def before_run(self, run_context):
        self._should_trigger = self._timer is not None and self._timer.should_trigger_for_step(
            self._iter
        )
        if self._should_trigger:
            return SessionRunArgs(self._current)
        return None

    def _log(self, values: dict, elapsed: float | None = None) -> None:
        if self._formatter is not None:
            _log.info(self._formatter(values))
            return
        parts = []
        for tag in self._tag_order:
            v = values[tag]
            shown = np.array2string(np.asarray(v)) if np.ndim(v) else str(np.asarray(v).item())
            parts.append(f"{tag} = {shown}")
        line = ", ".join(parts)
        if elapsed is not None:
            line += f" ({elapsed:.3f} sec)"
        _log.info(line)

    def after_run(self, run_context, run_values):
        if self._should_trigger:
            elapsed, _ = self._timer.update_last_triggered_step(self._iter)
            self._log(run_values.results, elapsed)
        self._iter += 1

    def end(self, session):
        if self._log_at_end:
            self._log(session.run(self._current))


class NanTensorHook(SessionRunHook):
    """Fails training (NanLossDuringTrainingError) when ``loss_tensor`` is NaN, or, with
    ``fail_on_nan_loss=False``, logs a warning and asks the session to stop."""

    def __init__(self, loss_tensor: Any, fail_on_nan_loss: bool = True):
        self._loss = loss_tensor
        self._fail = fail_on_nan_loss

    def before_run(self, run_context):
        return SessionRunArgs(self._loss)

    def after_run(self, run_context, run_values):
        if np.isnan(run_values.results).any():
            if self._fail:
                _log.error("Model diverged with loss = NaN.")
                raise NanLossDuringTrainingError
            _log.warning("Model diverged with loss = NaN.")
            run_context.request_stop()


class FeedFnHook(SessionRunHook):
    """Adds ``feed_fn()`` (a feed dict) to every step."""

    def __init__(self, feed_fn: Callable[[], dict]):
        self.feed_fn = feed_fn

    def before_run(self, run_context):
        return SessionRunArgs(fetches=[], feed_dict=self.feed_fn())
