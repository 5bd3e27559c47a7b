"""``Learner``: the hooks a step-level driver calls so that real numbers ride along simulated
time (hybrid, convergence-aware runs; see hybrid.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


__all__ = ["Learner"]

# ---- hooks for hybrid (real-gradient) runs -------------------------------------------------------


class Learner:
    """Hooks a driver calls so that real numbers can ride along simulated time (see hybrid.py).

    ``read`` when a worker starts pulling (returns the parameter version it gets),
    ``gradient`` when its compute ends (returns its gradient, opaque to the driver),
    ``apply_sync`` at a synchronous step's end with the accepted gradients of each PS shard
    (a list per shard; one list means every shard), ``apply_async`` when a gradient has been
    applied at every shard, ``checkpoint(step)`` when the driver checkpoints (step 0 included)
    and ``restore(step)`` when a failure rolls back to that checkpoint. The defaults do nothing
    (pure simulation).
    """

    def read(self, worker: int, step: int, now: float) -> Any:
        return None

    def gradient(self, worker: int, params: Any, now: float) -> Any:
        return None

    def apply_sync(self, accepted: Sequence[list[Any]], step: int, now: float) -> None:
        pass

    def apply_async(self, gradient: Any, step: int, now: float) -> None:
        pass

    def checkpoint(self, step: int) -> None:
        pass

    def restore(self, step: int) -> None:
        pass

    def result(self) -> pd.DataFrame | None:
        return None
