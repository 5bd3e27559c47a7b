"""Hybrid (convergence-aware) mode: simulated time, real gradients.

A ``HybridLearner`` rides along a step-level driver (``SyncPS``, ``AsyncPS``, ``AllReduceRing``
from ``simulator/training.py``, passed as ``learner=``). Each simulated worker computes a real
gradient, with the user's ``grad_fn``, on the parameter version it actually read when its pull
began; the PS applies, with the user's ``apply_fn``, what the driver accepts: in synchronous
training the mean of the gradients each shard aggregated (backup workers' late gradients are
dropped), in asynchronous training every gradient on its arrival, however stale. So staleness and
dropped gradients change the model that is learned, and the learner records (simulated time,
step, training loss, accuracy from ``eval_fn``): time-to-accuracy curves, not only throughput.

The simulator does not know the model: ``grad_fn(params, batch_index) -> (loss, grads)`` and
``apply_fn(params, grads) -> new params`` are plain functions over lists of numpy arrays (build
them from a hetbed graph, or anything else). ``batch_index`` counts computed gradients (0, 1, ...)
in simulated order; map it to a mini-batch. ``apply_fn`` must return new arrays and leave
``params`` untouched, because workers may still be computing on that version.
Numerics are applied at the instant a gradient is applied at every shard (the few milliseconds by
which shards' applies differ are not modelled), and a pull reads one consistent version. A
failure that rolls back to a checkpoint restores the parameters saved at that checkpoint.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .training import Learner

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["CURVE_COLUMNS", "HybridLearner", "time_to_accuracy"]

CURVE_COLUMNS = ("time_s", "step", "loss", "accuracy")

GradFn = Callable[[list[np.ndarray], int], tuple[float, list[np.ndarray]]]
ApplyFn = Callable[[list[np.ndarray], list[np.ndarray]], list[np.ndarray]]


class HybridLearner(Learner):
    """Real parameters and gradients for a simulated run (see the module docstring).

    ``params``: initial parameter arrays; ``eval_fn(params) -> accuracy`` (optional) is called
    at step 0 and every ``eval_every`` applied steps; ``shard_of[j]`` is the PS shard holding
    ``params[j]`` (default: all on shard 0) so that a synchronous step averages each parameter
    over the gradients its own shard accepted.

    Raises ValueError for eval_every < 1 or a shard_of of the wrong length.
    """

    def __init__(
        self,
        grad_fn: GradFn,
        apply_fn: ApplyFn,
        params: Sequence[np.ndarray],
        eval_fn: Callable[[list[np.ndarray]], float] | None = None,
        eval_every: int = 10,
        shard_of: Sequence[int] | None = None,
    ):
        if int(eval_every) != eval_every or eval_every < 1:
            raise ValueError(
                f"HybridLearner: eval_every must be an integer >= 1, got {eval_every!r}"
            )
        self.params = [np.asarray(p) for p in params]
        if shard_of is not None and len(shard_of) != len(self.params):
            raise ValueError(
                f"HybridLearner: shard_of has {len(shard_of)} entries for {len(self.params)} params"
            )
        self.grad_fn = grad_fn
        self.apply_fn = apply_fn
        self.eval_fn = eval_fn
        self.eval_every = int(eval_every)
        self.shard_of = list(shard_of) if shard_of is not None else [0] * len(self.params)
        self.batches = 0  # gradients computed so far (the next batch_index)
        self.applied = 0  # parameter updates so far
        self._losses: list[float] = []
        self.rows: list[tuple[float, int, float, float]] = []
        self._saved: tuple[int, list[np.ndarray], int] = (0, self.params, 0)
        self._record(0.0)

    # ---- the driver's hooks -------------------------------------------------------------------

    def read(self, worker: int, step: int, now: float) -> list[np.ndarray]:
        return self.params

    def gradient(self, worker: int, params: Any, now: float) -> tuple[float, list[np.ndarray]]:
        loss, grads = self.grad_fn(params, self.batches)
        self.batches += 1
        grads = list(grads)
        if len(grads) != len(self.params):
            raise ValueError(
                f"grad_fn returned {len(grads)} gradients for {len(self.params)} parameters"
            )
        return float(loss), grads

    def apply_sync(self, accepted: Sequence[list[Any]], step: int, now: float) -> None:
        mean = []
        for j in range(len(self.params)):
            got = accepted[self.shard_of[j]] if len(accepted) > 1 else accepted[0]
            if not got:
                raise RuntimeError(f"synchronous step {step}: no gradient for parameter {j}")
            mean.append(sum(g[1][j] for g in got) / len(got))
        seen = {id(g): g for shard in accepted for g in shard}
        self._losses.extend(g[0] for g in seen.values())
        self._update(mean, now)

    def apply_async(self, gradient: Any, step: int, now: float) -> None:
        loss, grads = gradient
        self._losses.append(loss)
        self._update(grads, now)

    def checkpoint(self, step: int) -> None:
        self._saved = (step, self.params, self.applied)

    def restore(self, step: int) -> None:
        saved_step, params, applied = self._saved
        if saved_step != step:
            raise RuntimeError(f"restore({step}): the last checkpoint is of step {saved_step}")
        self.params, self.applied = params, applied

    def _update(self, grads: list[np.ndarray], now: float) -> None:
        self.params = list(self.apply_fn(self.params, grads))
        self.applied += 1
        if self.applied % self.eval_every == 0:
            self._record(now)

    def _record(self, now: float) -> None:
        loss = float(np.mean(self._losses)) if self._losses else math.nan
        self._losses = []
        acc = float(self.eval_fn(self.params)) if self.eval_fn is not None else math.nan
        self.rows.append((now, self.applied, loss, acc))

    def result(self) -> pd.DataFrame:
        """One row per record: simulated time, steps applied, mean training loss of the
        gradients applied since the previous record, and ``eval_fn``'s accuracy."""
        import pandas as pd

        return pd.DataFrame(self.rows, columns=list(CURVE_COLUMNS))

    curve = result


def time_to_accuracy(curve: pd.DataFrame, target: float) -> float:
    """The first simulated time at which ``curve``'s accuracy reaches ``target`` (NaN if never)."""
    hit = curve[curve.accuracy >= target]
    return float(hit.time_s.iloc[0]) if len(hit) else math.nan
