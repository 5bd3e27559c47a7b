"""Step-level simulation of distributed training: hundreds of workers, thousands of steps.

A ``ReplicaProfile`` says what one worker replica does per step: its compute time, the bytes of
each variable it pulls and pushes and the PS shard holding it, and the PS's cost to apply a
gradient (``profile_from_graph`` measures all of it on a hetbed graph with the op-level
simulator). Drivers replay that profile on a simulated cluster, as SimPy processes on one clock:

- ``SyncPS``: synchronous data parallelism with parameter servers and optional backup workers;
- ``AsyncPS``: asynchronous data parallelism; every gradient's staleness is recorded;
- ``AllReduceRing``: synchronous ring all-reduce among workers, no PS.

Every worker and PS task is a host on one non-blocking switch (``SwitchFabric``: hosts
``ps0..psK``, ``w0..wN``); parameter pulls and gradient pushes are fluid max-min flows, one per
(worker, shard) sized by that shard's bytes, so PS incast emerges from flows sharing a PS NIC.
``network="fast"`` (default) computes the same max-min rates on symmetry classes of workers and
of identical shards (``simulator/fluid.py``, exact for this topology); ``network="exact"`` runs
``simulator/network.py`` flow by flow (the reference; slow past a few thousand flows per step).

``run(steps)`` returns a ``TrainingResult`` of tidy DataFrames. Randomness comes only from the
straggler models' explicitly seeded generators, so one seed gives one result.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import simpy
from simpy.core import EmptySchedule

from hetbed.devices.catalog import LinkSpec, load_device, load_link

from .clock import run_until
from .failures import FAILURE_COLUMNS, Failure
from .fluid import PSNetwork, Transfer, ring_allreduce_time
from .gcguard import relaxed_gc
from .profile import ReplicaProfile, _nonneg, profile_from_graph
from .stragglers import StragglerModel, combine
from .topology import Nic

__all__ = [
    "AllReduceRing",
    "AsyncPS",
    "GRADIENT_COLUMNS",
    "Learner",
    "ReplicaProfile",
    "STEP_COLUMNS",
    "SyncPS",
    "TrainingResult",
    "normalized_speedup",
    "profile_from_graph",
]

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
    events: int
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


# ---- the drivers --------------------------------------------------------------------------------


def _as_nic(value: Any, what: str) -> Nic:
    if isinstance(value, Nic):
        nic = value
    elif isinstance(value, str):
        spec = load_link(value)
        nic = Nic(spec.bandwidth_bytes_per_s, spec.latency_s)
    elif isinstance(value, LinkSpec):
        nic = Nic(value.bandwidth_bytes_per_s, value.latency_s)
    elif isinstance(value, tuple) and len(value) == 2:
        nic = Nic(float(value[0]), float(value[1]))
    else:
        raise ValueError(
            f"{what}: give a catalog link key, a Nic or (bytes/s, latency s); got {value!r}"
        )
    bw, lat = nic.bandwidth_bytes_per_s, nic.latency_s
    if not (math.isfinite(bw) and bw > 0 and math.isfinite(lat) and lat >= 0):
        raise ValueError(f"{what}: bandwidth must be > 0 and latency >= 0, got {nic!r}")
    return nic


def _capacity(spec: Any) -> float | None:
    """Memory bytes of a device given as a catalog key, HardwareSpec, DevicePerf or number."""
    if spec is None:
        return None
    if isinstance(spec, (int, float)):
        return float(spec)
    if isinstance(spec, str):
        spec = load_device(spec)
    return float(spec.memory_bytes)  # a HardwareSpec or a DevicePerf


class _GradLog:
    """Per-gradient rows kept as columns of plain numbers (no per-row objects to allocate)."""

    def __init__(self) -> None:
        self.worker: list[int] = []
        self.read: list[int] = []
        self.step: list[int] = []
        self.applied: list[int] = []  # -1: dropped
        self.time: list[float] = []
        self.accepted: list[bool] = []
        self.phases: list[tuple[float, float, float, float]] = []

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
        self.phases.append(phases)
        self.worker.append(worker)
        self.read.append(read)
        self.step.append(step)
        self.applied.append(applied)
        self.time.append(t)
        self.accepted.append(ok)

    def frame(self) -> pd.DataFrame:
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


class _Grad:
    __slots__ = ("worker", "tag", "read", "value", "ok", "bad", "left", "event", "phases")

    def __init__(self, worker: int, tag: int, read: int):
        self.worker, self.tag, self.read = worker, tag, read
        self.value: Any = None
        self.ok = 0
        self.bad = 0
        self.left = 0
        self.event: simpy.Event | None = None
        self.phases: tuple[float, float, float, float] = (math.nan,) * 4


class _Driver:
    """Shared machinery: validation, the cluster, failures, step records, ``run``."""

    uses_ps = True
    kind = "driver"

    def __init__(
        self,
        profile: ReplicaProfile,
        n_workers: int,
        n_backup: int = 0,
        n_ps: int | None = None,
        ps_strategy: str | None = None,
        nic: Any = "eth_10g",
        ps_nic: Any = None,
        straggler: StragglerModel | Iterable[StragglerModel] | None = None,
        failures: Iterable[Failure] = (),
        checkpoint_every: int | None = None,
        checkpoint_s: float = 0.0,
        network: str = "fast",
        learner: Learner | None = None,
        worker_device: Any = None,
        ps_device: Any = None,
    ):
        if not isinstance(profile, ReplicaProfile):
            raise TypeError(
                f"{self.kind}: profile must be a ReplicaProfile, got {type(profile).__name__}"
            )
        for what, v in (("n_workers", n_workers), ("n_backup", n_backup)):
            if isinstance(v, bool) or int(v) != v or v < 0:
                raise ValueError(f"{self.kind}: {what} must be an integer >= 0, got {v!r}")
        if n_workers < 1:
            raise ValueError(f"{self.kind}: n_workers must be >= 1, got {n_workers}")
        if n_backup > n_workers:
            raise ValueError(
                f"{self.kind}: n_backup={n_backup} is more than n_workers={n_workers}; backup "
                "workers are extra replicas beyond the N gradients a step aggregates"
            )
        if network not in ("fast", "exact"):
            raise ValueError(f"{self.kind}: network must be 'fast' or 'exact', got {network!r}")
        if checkpoint_every is not None and (
            int(checkpoint_every) != checkpoint_every or checkpoint_every < 1
        ):
            raise ValueError(
                f"{self.kind}: checkpoint_every must be an integer >= 1, got {checkpoint_every!r}"
            )
        _nonneg(f"{self.kind}: checkpoint_s", checkpoint_s)
        if not profile.variables:
            raise ValueError(f"{self.kind}: the profile has no variables to train")
        self.n_workers = int(n_workers)
        self.n_backup = int(n_backup)
        self.n_tasks = self.n_workers + self.n_backup
        if self.uses_ps:
            if n_ps is None:
                n_ps = profile.ps_tasks_needed
            if isinstance(n_ps, bool) or int(n_ps) != n_ps or n_ps < 1:
                raise ValueError(
                    f"{self.kind}: needs at least one PS task, got n_ps={n_ps!r}"
                    + (f" with ps_strategy={ps_strategy!r}" if ps_strategy else "")
                )
            n_ps = int(n_ps)
            if ps_strategy is not None:
                profile = profile.placed(n_ps, ps_strategy)
        else:
            if ps_strategy is not None or n_ps:
                raise ValueError(f"{self.kind} has no PS tasks; drop n_ps / ps_strategy")
            n_ps = 0
        self.profile = profile
        self.n_ps = n_ps
        nics = list(nic) if isinstance(nic, list) else [nic] * self.n_tasks
        if len(nics) != self.n_tasks:
            raise ValueError(f"{self.kind}: {len(nics)} NICs given for {self.n_tasks} workers")
        self.worker_nics = [_as_nic(x, f"{self.kind}: nic") for x in nics]
        self.ps_nic = _as_nic(nics[0] if ps_nic is None else ps_nic, f"{self.kind}: ps_nic")
        self.straggler = combine(
            *(straggler if isinstance(straggler, (list, tuple)) else [straggler])
        )
        failures = list(failures)
        for f in failures:
            if not isinstance(f, Failure):
                raise TypeError(f"{self.kind}: failures must be Failure objects, got {f!r}")
        self.failures = sorted(failures, key=lambda f: f.at_s)
        for f in self.failures:
            limit = self.n_tasks if f.kind == "worker" else self.n_ps
            if f.index >= limit:
                raise ValueError(
                    f"{self.kind}: {f.kind} {f.index} cannot fail: there are {limit} {f.kind} tasks"
                )
        self.checkpoint_every = checkpoint_every
        self.checkpoint_s = float(checkpoint_s)
        self.network_mode = network
        self.learner = learner
        self._check_memory(_capacity(worker_device), _capacity(ps_device))
        if self.uses_ps:
            self.shards = profile.shard_table(n_ps)
        self._ran = False

    def _check_memory(self, worker_cap: float | None, ps_cap: float | None) -> None:
        p = self.profile
        worker_cap = worker_cap if worker_cap is not None else p.worker_capacity_bytes
        ps_cap = ps_cap if ps_cap is not None else p.ps_capacity_bytes
        if worker_cap is not None and p.worker_memory_bytes is not None:
            if p.worker_memory_bytes > worker_cap:
                raise ValueError(
                    f"{self.kind}: one step needs {p.worker_memory_bytes:,.0f} bytes on the worker "
                    f"device, which has {worker_cap:,.0f}; use a smaller batch or a bigger device"
                )
        if ps_cap is not None and self.uses_ps:
            table = p.shard_table(self.n_ps)
            worst = table.loc[table.resident_bytes.idxmax()]
            if worst.resident_bytes > ps_cap:
                raise ValueError(
                    f"{self.kind}: PS {int(worst.ps)} holds {worst.resident_bytes:,.0f} bytes of "
                    f"variables and slots, more than its memory of {ps_cap:,.0f} bytes; "
                    "use more PS tasks (n_ps, ps_strategy='greedy') or a bigger PS"
                )

    # ---- run ----------------------------------------------------------------------------------

    def run(self, steps: int) -> TrainingResult:
        """Simulate until ``steps`` steps have completed (after any rollbacks); one run per driver.

        Raises ValueError for steps < 1, RuntimeError when called twice or when the simulation
        can make no progress. While it runs, the cyclic garbage collector's first threshold is
        raised to ``gcguard.GC_THRESHOLD`` allocations (restored afterwards): the drivers leave no
        reference cycles, and frequent collections of their many short-lived objects cost more
        than the simulation itself at 800 workers.
        """
        if isinstance(steps, bool) or int(steps) != steps or steps < 1:
            raise ValueError(f"{self.kind}.run: steps must be an integer >= 1, got {steps!r}")
        if self._ran:
            raise RuntimeError(f"{self.kind}.run: a driver runs once; build a new one")
        self._ran = True
        self.target = int(steps)
        env = self.env = simpy.Environment()
        self.done = env.event()
        self.step = 0
        self.epoch = 0
        self.ckpt_step = 0
        self.ps_down = False
        self.ps_up = env.event()
        self.down_until = [0.0] * self.n_tasks
        self.inflight: list[Any] = [None] * self.n_tasks
        self.records: list[list[Any]] = []  # [step, start, end, contributors, dropped, lost]
        self.rec_of: dict[int, list[Any]] = {}
        self.grad_log = _GradLog()
        self.failure_rows: list[dict[str, Any]] = []
        self.factor = self.straggler.factor
        self._build()
        self._open_record(0, 0.0)
        if self.learner is not None:
            self.learner.checkpoint(0)
        self.procs = [env.process(self._worker(i)) for i in range(self.n_tasks)]
        if self.failures:
            env.process(self._fail_loop())
        t0 = time.perf_counter()
        try:
            with relaxed_gc():
                self.events = run_until(env, self.done)
        except EmptySchedule:
            raise RuntimeError(
                f"{self.kind}: the simulation stopped at step {self.step} of {self.target} with "
                "nothing left to do (every worker is waiting)"
            ) from None
        wall = time.perf_counter() - t0
        return self._result(wall)

    def _build(self) -> None:
        """Create the network (PS drivers) and per-run state; subclasses extend."""
        if not self.uses_ps:
            return
        t = self.shards
        key_of: dict[tuple, int] = {}
        groups: list[list[int]] = []
        for k in range(self.n_ps):
            row = t.iloc[k]
            key = (row.variables > 0, row.step_bytes, row.apply_s)
            if key not in key_of:
                key_of[key] = len(groups)
                groups.append([])
            groups[key_of[key]].append(k)
        self.groups = groups
        self.group_of = [0] * self.n_ps
        for g, ks in enumerate(groups):
            for k in ks:
                self.group_of[k] = g
        active = [g for g, ks in enumerate(groups) if t.iloc[ks[0]].variables > 0]
        self.parts = [(g, float(t.iloc[groups[g][0]].step_bytes)) for g in active]
        self.active_groups = active
        self.group_apply_s = [float(t.iloc[ks[0]].apply_s) for ks in groups]
        self.n_active_groups = len(active)
        self.net = PSNetwork(
            self.env, self.worker_nics, [self.ps_nic] * self.n_ps, groups, self.network_mode
        )

    def _open_record(self, step: int, now: float) -> None:
        rec = [step, now, math.nan, 0, 0, False]
        self.records.append(rec)
        self.rec_of[step] = rec

    def _compute_s(self, worker: int, step: int) -> float:
        f = self.factor(worker, step, self.env.now)
        if not 0.0 < f < math.inf:
            raise ValueError(
                f"{self.kind}: straggler factor for worker {worker} at step {step} is {f!r}; "
                "factors must be finite and > 0"
            )
        return self.profile.compute_s * f

    def _examples(self) -> int:
        return self.n_workers * self.profile.examples_per_step

    # ---- the worker process and failures ----------------------------------------------------

    def _worker(self, i: int) -> Any:
        while True:
            try:
                yield from self._loop(i)
            except simpy.Interrupt:
                self._abandon(i)
            while True:  # down: wait for this worker's restart and for the PS
                try:
                    yield from self._wait_up(i)
                    break
                except simpy.Interrupt:
                    self._abandon(i)

    def _wait_up(self, i: int) -> Any:
        env = self.env
        while True:
            if env.now < self.down_until[i]:
                yield env.timeout(self.down_until[i] - env.now)
            elif self.ps_down:
                yield self.ps_up
            else:
                return

    def _loop(self, i: int) -> Any:
        raise NotImplementedError
        yield  # pragma: no cover

    def _abandon(self, i: int) -> None:
        tr = self.inflight[i]
        if isinstance(tr, Transfer):
            self.net.cancel(tr)
        self.inflight[i] = None

    def _fail_loop(self) -> Any:
        env = self.env
        for f in self.failures:
            if f.at_s > env.now:
                yield env.timeout(f.at_s - env.now)
            self._fail(f)

    def _fail(self, f: Failure) -> None:
        now = self.env.now
        rollback = f.rollback if f.rollback is not None else (f.kind == "ps" or not self.uses_ps)
        everyone = f.kind == "ps" or rollback
        row = {
            "kind": f.kind,
            "index": f.index,
            "at_s": now,
            "restart_s": now + f.restart_delay_s,
            "step_at_failure": self.step,
            "restored_step": self.step,
            "steps_lost": 0,
        }
        self.failure_rows.append(row)
        if not everyone:
            self.down_until[f.index] = max(self.down_until[f.index], now + f.restart_delay_s)
            self._interrupt(f.index)
            return
        if rollback:
            lost = self.step - self.ckpt_step
            row["restored_step"] = self.ckpt_step
            row["steps_lost"] = lost
            for rec in self.records:
                if rec[0] >= self.ckpt_step and not math.isnan(rec[2]):
                    rec[5] = True
            self._rollback(self.ckpt_step)
            if self.learner is not None:
                self.learner.restore(self.ckpt_step)
        self.epoch += 1
        self.ps_down = True
        for i in range(self.n_tasks):
            self._interrupt(i)
        self._stall()
        epoch = self.epoch
        self.env.timeout(f.restart_delay_s).callbacks.append(lambda _e: self._restart(epoch))

    def _interrupt(self, i: int) -> None:
        p = self.procs[i]
        if p.is_alive and p is not self.env.active_process:
            p.interrupt("failure")

    def _rollback(self, step: int) -> None:
        """Go back to the checkpoint at ``step`` (the unfinished step's record stays unfinished
        and is left out of the result)."""
        self.step = step
        self.rec_of = {s: r for s, r in self.rec_of.items() if s < step}

    def _stall(self) -> None:
        """Everything stops (a PS or the job failed); subclasses drop per-step state."""

    def _restart(self, epoch: int) -> None:
        if epoch != self.epoch:
            return  # another failure since: its restart will come
        now = self.env.now
        self.ps_down = False
        if self.step not in self.rec_of:  # rolled back: the step starts again now
            self._open_record(self.step, now)
        self._reopen(now)
        ev, self.ps_up = self.ps_up, self.env.event()
        ev.succeed()

    def _reopen(self, now: float) -> None:
        """After a global restart: let the workers start the current step again."""

    def _maybe_checkpoint(self) -> float:
        """Checkpoint after the step just finished if due; returns the stall it costs (a
        synchronous driver delays the next step by it; asynchronous workers keep going)."""
        if self.checkpoint_every and self.step % self.checkpoint_every == 0:
            self.ckpt_step = self.step
            if self.learner is not None:
                self.learner.checkpoint(self.step)
            return self.checkpoint_s
        return 0.0

    # ---- results --------------------------------------------------------------------------------

    def _result(self, wall: float) -> TrainingResult:
        rows = [r for r in self.records if not math.isnan(r[2])]
        steps = pd.DataFrame(
            {
                "step": pd.array([r[0] for r in rows], dtype="int64"),
                "start_s": [r[1] for r in rows],
                "end_s": [r[2] for r in rows],
                "step_time_s": [r[2] - r[1] for r in rows],
                "contributors": pd.array([r[3] for r in rows], dtype="int64"),
                "dropped": pd.array([r[4] for r in rows], dtype="int64"),
                "examples": pd.array([self._step_examples(r) for r in rows], dtype="int64"),
                "lost": pd.array([r[5] for r in rows], dtype="bool"),
            },
            columns=list(STEP_COLUMNS),
        )
        grads = self.grad_log.frame()
        fails = pd.DataFrame(self.failure_rows, columns=list(FAILURE_COLUMNS))
        events = self.events  # SimPy events processed (see clock.run_until)
        config = {
            "driver": self.kind,
            "n_workers": self.n_workers,
            "n_backup": self.n_backup,
            "n_ps": self.n_ps,
            "network": self.network_mode,
            "steps": self.target,
            "compute_s": self.profile.compute_s,
            "step_bytes": self.profile.step_bytes,
            "worker_nic_bytes_per_s": self.worker_nics[0].bandwidth_bytes_per_s,
            "ps_nic_bytes_per_s": self.ps_nic.bandwidth_bytes_per_s,
        }
        config.update(self._config())
        curve = self.learner.result() if self.learner is not None else None
        return TrainingResult(steps, grads, fails, config, self.env.now, events, wall, curve)

    def _step_examples(self, rec: list[Any]) -> int:
        return self._examples()

    def _config(self) -> dict[str, Any]:
        return {}


class SyncPS(_Driver):
    """Synchronous training with parameter servers and ``n_backup`` backup workers.

    N = ``n_workers`` gradients make a step; N + b workers compute them. Each step, every worker
    pulls the current parameters from every PS shard, computes (``compute_s`` x its straggler
    factor) and pushes its gradient to every shard. A shard aggregates the first N gradients
    computed for the current step and drops the rest (late or stale: counted in ``dropped``);
    once every shard has N, each applies (its ``apply_s``), and the step is released.

    Which worker may compute what (``fast_worker_can_contribute_twice``):

    - False (the default; the "first m of n" of Chen et al., Revisiting Distributed
      Synchronous SGD, 2016): each worker contributes at most once per step; after pushing it
      waits for the next release (a worker whose gradient came too late starts on the current
      step at once).
    - True (TensorFlow's ``SyncReplicasOptimizer``): a token queue. Every worker starts step 0
      without a token and ``init_tokens`` tokens of step 0 are queued (default N, TF's
      ``get_init_tokens_op``); each release queues N + b tokens of the new step (TF's
      ``tokens_per_step``). After pushing, a worker takes the next token in FIFO order (waiting
      if none) and computes for the step it names: a fast worker may take a spare token and
      contribute twice to one step, and a token of an older step yields a gradient that is
      dropped as stale (as in TF, so with the default init tokens each worker's second gradient
      is usually stale; ``init_tokens=0`` avoids it).

    A slow worker always finishes and pushes its gradient (it is then dropped); gradient
    accumulation on the PS is taken to overlap reception (only the final apply costs time).
    """

    kind = "SyncPS"

    def __init__(
        self,
        profile: ReplicaProfile,
        n_workers: int,
        n_backup: int = 0,
        n_ps: int | None = None,
        nic: Any = "eth_10g",
        *,
        fast_worker_can_contribute_twice: bool = False,
        init_tokens: int | None = None,
        **kw: Any,
    ):
        super().__init__(profile, n_workers, n_backup, n_ps, nic=nic, **kw)
        self.twice = bool(fast_worker_can_contribute_twice)
        if init_tokens is None:
            init_tokens = self.n_workers
        if isinstance(init_tokens, bool) or int(init_tokens) != init_tokens or init_tokens < 0:
            raise ValueError(f"SyncPS: init_tokens must be an integer >= 0, got {init_tokens!r}")
        self.init_tokens = int(init_tokens)

    def _config(self) -> dict[str, Any]:
        return {"fast_worker_can_contribute_twice": self.twice}

    def _build(self) -> None:
        super()._build()
        self.release = self.env.event()
        self.tokens: deque[int] = deque([0] * self.init_tokens) if self.twice else deque()
        self.waiters: deque[tuple[int, simpy.Event]] = deque()
        self.last_tag = [-1] * self.n_tasks
        self._reset_step()

    def _reset_step(self) -> None:
        G = len(self.groups)
        self.count = [0] * G
        self.closed = [False] * G
        self.acc: list[list[Any]] = [[] for _ in range(G)]
        self.contrib: list[set[int]] = [set() for _ in range(G)]
        self.n_applied = 0

    def _loop(self, i: int) -> Any:
        env, net, parts, learner = self.env, self.net, self.parts, self.learner
        tag = None
        while True:
            if self.twice:
                if tag is None or self.last_tag[i] < 0:
                    tag = self.step  # a (re)started worker computes for the current step
                elif self.tokens:
                    tag = self.tokens.popleft()
                else:
                    ev = env.event()
                    self.waiters.append((i, ev))
                    tag = yield ev
            else:
                while self.step <= self.last_tag[i]:
                    yield self.release
                tag = self.step
            read = self.step
            params = learner.read(i, read, env.now) if learner is not None else None
            t0 = env.now
            tr = self.inflight[i] = net.pull(i, parts)
            yield tr.event
            t1 = env.now
            yield env.timeout(self._compute_s(i, tag))
            g = _Grad(i, tag, read)
            t2 = env.now
            if learner is not None:
                g.value = learner.gradient(i, params, env.now)
            tr = self.inflight[i] = net.push(i, parts, lambda grp, now, g=g: self._arrive(g, grp))
            yield tr.event
            self.inflight[i] = None
            g.phases = (t0, t1, t2, env.now)
            self._pushed(g)
            self.last_tag[i] = tag

    def _arrive(self, g: _Grad, grp: int) -> None:
        if (
            g.tag == self.step
            and not self.closed[grp]
            and not self.ps_down
            and (self.twice or g.worker not in self.contrib[grp])
        ):
            g.ok += 1
            self.count[grp] += 1
            if not self.twice:
                self.contrib[grp].add(g.worker)
            if self.learner is not None:
                self.acc[grp].append(g.value)
            if self.count[grp] == self.n_workers:
                self.closed[grp] = True
                epoch = self.epoch
                self.env.timeout(self.group_apply_s[grp]).callbacks.append(
                    lambda _e: self._applied(epoch)
                )
        else:
            g.bad += 1

    def _pushed(self, g: _Grad) -> None:
        accepted = g.bad == 0
        if not accepted:
            rec = self.rec_of.get(g.tag)
            if rec is not None:
                rec[4] += 1
        self.grad_log.add(
            g.worker, g.read, g.tag, g.tag if accepted else -1, self.env.now, accepted, g.phases
        )

    def _applied(self, epoch: int) -> None:
        if epoch != self.epoch:
            return
        self.n_applied += 1
        if self.n_applied < self.n_active_groups:
            return
        now = self.env.now
        rec = self.rec_of[self.step]
        rec[2] = now
        rec[3] = self.n_workers
        if self.learner is not None:
            per_shard = [self.acc[self.group_of[k]] for k in range(self.n_ps)]
            self.learner.apply_sync(per_shard, self.step, now)
        self.step += 1
        self._reset_step()
        if self.step >= self.target and not self.done.triggered:
            self.done.succeed()
        stall = self._maybe_checkpoint()
        if stall > 0:
            epoch = self.epoch
            self.env.timeout(stall).callbacks.append(
                lambda _e: self._open_step() if epoch == self.epoch else None
            )
        else:
            self._open_step()

    def _open_step(self) -> None:
        now = self.env.now
        self._open_record(self.step, now)
        if self.twice:
            self.tokens.extend([self.step] * self.n_tasks)
            while self.waiters and self.tokens:
                _, ev = self.waiters.popleft()
                ev.succeed(self.tokens.popleft())
        else:
            ev, self.release = self.release, self.env.event()
            ev.succeed()

    def _abandon(self, i: int) -> None:
        super()._abandon(i)
        if any(w == i for w, _ in self.waiters):
            self.waiters = deque(x for x in self.waiters if x[0] != i)

    def _stall(self) -> None:
        self._reset_step()
        self.tokens.clear()
        self.waiters.clear()

    def _rollback(self, step: int) -> None:
        super()._rollback(step)
        self.last_tag = [-1] * self.n_tasks

    def _reopen(self, now: float) -> None:
        self._reset_step()
        self.last_tag = [-1] * self.n_tasks
        if self.twice:
            self.tokens = deque([self.step] * self.init_tokens)  # as at the start


class AsyncPS(_Driver):
    """Asynchronous training with parameter servers: each worker loops pull -> compute -> push
    -> wait until its gradient is applied, on its own. Each PS shard applies the gradients it
    receives one at a time in arrival order (``apply_s`` each); a gradient is applied once every
    shard has applied its part, and then the global step advances by one. Each gradient's
    staleness is the global step at its apply minus the global step when its worker read.
    ``n_backup`` must be 0 (backups have no meaning without synchronization).
    """

    kind = "AsyncPS"

    def __init__(
        self,
        profile: ReplicaProfile,
        n_workers: int,
        n_ps: int | None = None,
        nic: Any = "eth_10g",
        **kw: Any,
    ):
        if kw.get("n_backup"):
            raise ValueError("AsyncPS: backup workers need synchronous training (use SyncPS)")
        kw.pop("n_backup", None)
        super().__init__(profile, n_workers, 0, n_ps, nic=nic, **kw)

    def _build(self) -> None:
        super()._build()
        self.busy_until = [0.0] * len(self.groups)

    def _loop(self, i: int) -> Any:
        env, net, parts, learner = self.env, self.net, self.parts, self.learner
        while True:
            read = self.step
            params = learner.read(i, read, env.now) if learner is not None else None
            t0 = env.now
            tr = self.inflight[i] = net.pull(i, parts)
            yield tr.event
            t1 = env.now
            yield env.timeout(self._compute_s(i, read))
            g = _Grad(i, read, read)
            g.phases = (t0, t1, env.now, math.nan)
            if learner is not None:
                g.value = learner.gradient(i, params, env.now)
            g.left = len(parts)
            g.event = env.event()
            tr = self.inflight[i] = net.push(i, parts, lambda grp, now, g=g: self._arrive(g, grp))
            tr.event.callbacks.append(lambda _e, g=g: self._push_done(g))
            yield g.event
            self.inflight[i] = None

    def _arrive(self, g: _Grad, grp: int) -> None:
        now = self.env.now
        start = max(now, self.busy_until[grp])
        end = self.busy_until[grp] = start + self.group_apply_s[grp]
        if end == now:
            self._part_applied(g, self.epoch)
        else:
            epoch = self.epoch
            self.env.timeout(end - now).callbacks.append(lambda _e: self._part_applied(g, epoch))

    def _push_done(self, g: _Grad) -> None:
        g.phases = (*g.phases[:3], self.env.now)

    def _part_applied(self, g: _Grad, epoch: int) -> None:
        if epoch != self.epoch:
            return
        g.left -= 1
        if g.left:
            return
        now = self.env.now
        step = self.step
        self.grad_log.add(g.worker, g.read, g.read, step, now, True, g.phases)
        rec = self.rec_of[step]
        rec[2] = now
        rec[3] = 1
        if self.learner is not None:
            self.learner.apply_async(g.value, step, now)
        self.step += 1
        if self.step >= self.target and not self.done.triggered:
            self.done.succeed()
        self._maybe_checkpoint()
        self._open_record(self.step, now)
        g.event.succeed()

    def _step_examples(self, rec: list[Any]) -> int:
        return self.profile.examples_per_step

    def _stall(self) -> None:
        self.busy_until = [0.0] * len(self.groups)


class AllReduceRing(_Driver):
    """Synchronous data parallelism by ring all-reduce among ``n_workers`` workers, no PS.

    Each step every worker computes (``compute_s`` x its straggler factor); when the last is
    done, the ring all-reduce of the step's gradient bytes runs (2(N-1) rounds, in each of which
    every worker sends a chunk of bytes/N to its ring successor over the switch; see
    ``fluid.ring_allreduce_time``); then every worker applies the averaged gradient locally
    (``apply_s``, default the sum of the profile's apply costs) and starts the next step.
    ``network="exact"`` sends every chunk as a ``Network`` flow instead of the closed recurrence.
    Any worker failure restarts the job from the last checkpoint.
    """

    kind = "AllReduceRing"
    uses_ps = False

    def __init__(
        self,
        profile: ReplicaProfile,
        n_workers: int,
        nic: Any = "eth_10g",
        apply_s: float | None = None,
        **kw: Any,
    ):
        if kw.get("n_backup"):
            raise ValueError("AllReduceRing: backup workers are not supported (use SyncPS)")
        kw.pop("n_backup", None)
        super().__init__(profile, n_workers, 0, None, nic=nic, **kw)
        if apply_s is None:
            apply_s = sum(profile.apply_s_of(v) for v in profile.variables)
        _nonneg("AllReduceRing: apply_s", apply_s)
        self.local_apply_s = float(apply_s)

    def _build(self) -> None:
        self.release = self.env.event()
        self.ready = 0
        self.grads: list[Any] = []
        self.net = None
        if self.network_mode == "exact":
            self.net = PSNetwork(self.env, self.worker_nics, [self.ps_nic], [[0]], "exact")
        else:
            self.ring_s = ring_allreduce_time(self.profile.step_bytes, self.worker_nics)

    def _loop(self, i: int) -> Any:
        env, learner = self.env, self.learner
        while True:
            step = self.step
            params = learner.read(i, step, env.now) if learner is not None else None
            yield env.timeout(self._compute_s(i, step))
            if learner is not None:
                self.grads.append(learner.gradient(i, params, env.now))
            self.ready += 1
            wait = self.release
            if self.ready == self.n_workers:
                env.process(self._collective(self.epoch))
            yield wait

    def _collective(self, epoch: int) -> Any:
        env = self.env
        if self.net is None:
            yield env.timeout(self.ring_s)
        else:
            yield from self._exact_ring()
        yield env.timeout(self.local_apply_s)
        if epoch != self.epoch:
            return
        now = env.now
        rec = self.rec_of[self.step]
        rec[2] = now
        rec[3] = self.n_workers
        if self.learner is not None:
            self.learner.apply_sync([self.grads], self.step, now)
        self.grads = []
        self.ready = 0
        self.step += 1
        if self.step >= self.target and not self.done.triggered:
            self.done.succeed()
        stall = self._maybe_checkpoint()
        if stall:
            yield env.timeout(stall)
            if epoch != self.epoch:
                return
        self._open_record(self.step, env.now)
        ev, self.release = self.release, env.event()
        ev.succeed()

    def _exact_ring(self) -> Any:
        n = self.n_workers
        if n == 1:
            return
        chunk = self.profile.step_bytes / n
        env, net = self.env, self.net
        got = [[env.event() for _ in range(2 * (n - 1))] for _ in range(n)]

        def rank(i: int) -> Any:
            for r in range(2 * (n - 1)):
                if r:
                    yield got[i][r - 1]
                yield net.send(i, (i + 1) % n, chunk)
                got[(i + 1) % n][r].succeed()

        procs = [env.process(rank(i)) for i in range(n)]
        yield env.all_of(procs)

    def _stall(self) -> None:
        self.ready = 0
        self.grads = []

    def _reopen(self, now: float) -> None:
        ev, self.release = self.release, self.env.event()
        ev.succeed()
