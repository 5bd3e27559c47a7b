"""What a step-level training simulation returns: ``TrainingResult`` (tidy DataFrames of steps,
gradients and failures), its column names, and ``normalized_speedup``."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["GRADIENT_COLUMNS", "STEP_COLUMNS", "TrainingResult", "normalized_speedup"]

STEP_COLUMNS = (
    "step",
    "start_s",
    "end_s",
    "step_time_s",
    "contributors",
    "dropped",
    "examples",
    "lost",
)
GRADIENT_COLUMNS = (
    "worker",
    "read_step",
    "step",
    "apply_step",
    "staleness",
    "apply_s",
    "accepted",
    "pull_start_s",
    "pull_end_s",
    "compute_end_s",
    "push_end_s",
)


# ---- results --------------------------------------------------------------------------------


@dataclass
class TrainingResult:
    """What a driver's run did, as tidy DataFrames (times in simulated seconds).

    - ``steps``: one row per completed step (``STEP_COLUMNS``); ``lost`` marks steps undone by
      a rollback to a checkpoint (they were redone later under the same step number).
      ``contributors``: gradients each shard aggregated into the step (N in synchronous
      training, 1 in asynchronous training, where a step is one applied gradient);
      ``dropped``: gradients computed for the step (or, with stale tokens, for an older one)
      that some shard rejected as late.
    - ``gradients``: one row per gradient that reached the PS (``GRADIENT_COLUMNS``): the
      worker, the global step it read, the step it was computed for, the global step at which
      it was applied (NaN if dropped), the staleness (apply_step - read_step), when it was
      applied (async) or arrived (sync), and whether it was accepted; and its worker's phases in
      simulated seconds: the pull of the parameters (``pull_start_s`` to ``pull_end_s``), the
      compute (to ``compute_end_s``) and the push of the gradient (to ``push_end_s``), one
      after the other (a worker does not overlap transfers with compute in this model).
    - ``failures``: one row per failure (``FAILURE_COLUMNS``), ``steps_lost`` = steps redone.
    - ``curve``: (hybrid mode) time_s, step, loss, accuracy; else None.
    """

    steps: pd.DataFrame
    gradients: pd.DataFrame
    failures: pd.DataFrame
    config: dict[str, Any]
    sim_time_s: float
    events: int  # SimPy events the run processed
    wall_s: float
    curve: pd.DataFrame | None = None

    @property
    def completed(self) -> pd.DataFrame:
        """Steps that count (not undone by a rollback)."""
        return self.steps[~self.steps.lost]

    def throughput(self) -> float:
        """Examples per simulated second over the whole run (lost steps and downtime included)."""
        return float(self.completed.examples.sum()) / self.sim_time_s if self.sim_time_s else 0.0

    def step_time(self, percentile: float = 50.0) -> float:
        """A percentile of the completed steps' step_time_s (50 = the median)."""
        t = self.completed.step_time_s.to_numpy()
        return float(np.percentile(t, percentile)) if t.size else math.nan

    def mean_step_time(self) -> float:
        """Simulated time per completed step, end of run / steps (includes every stall)."""
        n = len(self.completed)
        return self.sim_time_s / n if n else math.nan

    @property
    def steps_lost(self) -> int:
        """Steps redone after rollbacks to checkpoints."""
        return int(self.failures.steps_lost.sum()) if len(self.failures) else 0

    @property
    def mean_staleness(self) -> float:
        """Mean staleness of the applied gradients (0 in synchronous training)."""
        g = self.gradients
        g = g[g.accepted]
        return float(g.staleness.mean()) if len(g) else math.nan

    def events_per_s(self) -> float:
        """Simulated events per wall-clock second of ``run``."""
        return self.events / self.wall_s if self.wall_s > 0 else math.inf


def normalized_speedup(
    base: TrainingResult | float, backup: TrainingResult | float, n_workers: int, n_backup: int
) -> float:
    """t(0) / t(b) x N / (N + b): the speedup from ``n_backup`` backup workers per machine used.

    ``base`` and ``backup`` are results (their ``mean_step_time``) or step times in seconds of
    runs with the same N = ``n_workers`` and b = 0 and ``n_backup`` backup workers.
    """
    t0 = base.mean_step_time() if isinstance(base, TrainingResult) else float(base)
    tb = backup.mean_step_time() if isinstance(backup, TrainingResult) else float(backup)
    return t0 / tb * n_workers / (n_workers + n_backup)


class _GradLog:
    """Per-gradient rows kept as columns of plain numbers (no per-row objects to allocate)."""

    def __init__(self) -> None:
        self.worker: list[int] = []
        self.read: list[int] = []
        self.step: list[int] = []
        self.applied: list[int] = []  # -1: dropped
        self.time: list[float] = []
        self.accepted: list[bool] = []
        self.phases: list[float] = []  # four a row, flat (no tuple kept per row)

    def add(
        self,
        worker: int,
        read: int,
        step: int,
        applied: int,
        t: float,
        ok: bool,
        phases: tuple[float, float, float, float] = (math.nan,) * 4,
    ) -> None:
        self.phases += phases
        self.worker.append(worker)
        self.read.append(read)
        self.step.append(step)
        self.applied.append(applied)
        self.time.append(t)
        self.accepted.append(ok)

    def frame(self) -> pd.DataFrame:
        import pandas as pd

        applied = np.array(self.applied, dtype=float)
        applied[applied < 0] = np.nan
        read = np.array(self.read, dtype=np.int64)
        return pd.DataFrame(
            {
                "worker": np.array(self.worker, dtype=np.int64),
                "read_step": read,
                "step": np.array(self.step, dtype=np.int64),
                "apply_step": applied,
                "staleness": applied - read,
                "apply_s": np.array(self.time, dtype=float),
                "accepted": np.array(self.accepted, dtype=bool),
                **dict(zip(GRADIENT_COLUMNS[-4:], np.array(self.phases, float).reshape(-1, 4).T)),
            },
            columns=list(GRADIENT_COLUMNS),
        )
