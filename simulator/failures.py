"""Failures of workers and PS tasks for the step-level drivers (``simulator/training.py``).

A ``Failure`` kills one task at ``at_s``; it comes back ``restart_delay_s`` later. What is lost:

- a **PS** failure stalls every worker (the parameters are unreachable) and, with
  ``rollback`` (the default for a PS), restores the last checkpoint when the PS restarts: every
  step since that checkpoint is redone (TensorFlow's recovery: the chief restores all variables);
- a **worker** failure in a PS driver loses only that worker's gradient in flight; the others go
  on (with backup workers the step may not even notice), and the worker rejoins reading the
  current parameters. ``rollback=True`` turns it into a job restart from the last checkpoint;
- in ``AllReduceRing`` (no PS) any worker failure stalls the collective and, by default, the
  job restarts from the last checkpoint (Horovod-style).

Drivers checkpoint every ``checkpoint_every`` steps (global steps; a checkpoint at step 0 always
exists) and report each failure's ``steps_lost`` (steps redone) in ``TrainingResult.failures``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["FAILURE_COLUMNS", "Failure", "poisson_failures"]

FAILURE_COLUMNS = (
    "kind",
    "index",
    "at_s",
    "restart_s",
    "step_at_failure",
    "restored_step",
    "steps_lost",
)


@dataclass(frozen=True)
class Failure:
    """Task ``kind`` ("worker" or "ps") number ``index`` dies at ``at_s`` and restarts
    ``restart_delay_s`` later; ``rollback`` None means the driver's default (see the module).

    Raises ValueError for an unknown kind, a negative index, or a time or delay that is not
    finite and >= 0.
    """

    kind: str
    index: int
    at_s: float
    restart_delay_s: float
    rollback: bool | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("worker", "ps"):
            raise ValueError(f"Failure kind must be 'worker' or 'ps', got {self.kind!r}")
        if int(self.index) != self.index or self.index < 0:
            raise ValueError(f"Failure index must be an integer >= 0, got {self.index!r}")
        for name in ("at_s", "restart_delay_s"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValueError(f"Failure {name} must be finite and >= 0 seconds, got {v!r}")


def poisson_failures(
    rng: np.random.Generator,
    horizon_s: float,
    mtbf_s: float,
    restart_delay_s: float,
    n_workers: int,
    n_ps: int = 0,
) -> list[Failure]:
    """Independent failures of every task, each a Poisson process with mean time between
    failures ``mtbf_s`` per task, up to ``horizon_s``; sorted by time.

    Raises ValueError for a horizon, MTBF or delay that is not positive (MTBF) or negative.
    """
    if not (math.isfinite(mtbf_s) and mtbf_s > 0):
        raise ValueError(f"mtbf_s must be finite and > 0, got {mtbf_s!r}")
    if not (math.isfinite(horizon_s) and horizon_s >= 0):
        raise ValueError(f"horizon_s must be finite and >= 0, got {horizon_s!r}")
    out = []
    for kind, n in (("worker", n_workers), ("ps", n_ps)):
        for i in range(n):
            t = rng.exponential(mtbf_s)
            while t < horizon_s:
                out.append(Failure(kind, i, float(t), restart_delay_s))
                t += restart_delay_s + rng.exponential(mtbf_s)
    out.sort(key=lambda f: (f.at_s, f.kind, f.index))
    return out
