"""The machinery every step-level training driver shares (``_Driver``): validation, the
cluster's NICs and memory checks, stragglers, step and gradient records, and ``run`` on a
SimPy clock; failures with rollback to checkpoints are faults.py's ``WorkerFaults``, the hosts'
message handlers, PS kernels and the shared machine's cores hostcpu.py's ``HostCpus``. The
drivers themselves are in training.py and allreduce.py."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING, Any

import simpy
from simpy.core import EmptySchedule

from hetbed.devices.catalog import LinkSpec, load_device, load_link

from .clock import run_until
from .cluster import loop_copy_shares, loop_rate
from .failures import FAILURE_COLUMNS, Failure
from .faults import WorkerFaults
from .fluid import PSNetwork
from .gcguard import relaxed_gc
from .hostcpu import HostCpus
from .learner import Learner
from .overlap import OverlappedStep
from .profile import (
    ReplicaProfile,
    _nonneg,
    forward_buckets,
    gradient_buckets,
)
from .results import STEP_COLUMNS, TrainingResult, _GradLog
from .stragglers import StragglerModel, combine
from .topology import Nic

if TYPE_CHECKING:
    pass

# ---- the drivers --------------------------------------------------------------------------------


def _loop_aggregate(value: Any) -> float | None:
    """A loopback link's aggregate rate (``aggregate_bandwidth_bytes_per_s``), when ``value``
    names or is a catalog link that has one."""
    spec = load_link(value) if isinstance(value, str) else value
    return (
        getattr(spec, "aggregate_bandwidth_bytes_per_s", None)
        if isinstance(spec, LinkSpec)
        else None
    )


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


class _Grad:
    __slots__ = (
        "worker",
        "tag",
        "read",
        "value",
        "ok",
        "bad",
        "left",
        "event",
        "phases",
        "copied",
        "pending",
    )

    def __init__(self, worker: int, tag: int, read: int):
        self.worker, self.tag, self.read = worker, tag, read
        self.value: Any = None
        self.ok = 0
        self.bad = 0
        self.left = 0
        self.event: simpy.Event | None = None
        self.phases: tuple[float, float, float, float] = (math.nan,) * 4
        self.copied = 0.0  # when a machine's kernel has copied its bytes (one shared machine)
        self.pending: list[int] | None = None  # overlapped steps: buckets yet to reach each group


class _Driver(WorkerFaults, OverlappedStep, HostCpus):
    """Shared machinery: validation, the cluster, failures, step records, ``run``.

    ``bucket_bytes`` (PS drivers): the granularity at which a worker's pulls and pushes overlap
    its compute (simulator/overlap.py); None (the default): one bucket, the step pulls, computes
    and pushes in turn."""

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
        machine_cores: int | None = None,
        bucket_bytes: float | None = None,
    ):
        if not isinstance(profile, ReplicaProfile):
            raise TypeError(
                f"{self.kind}: profile must be a ReplicaProfile, got {type(profile).__name__}"
            )
        for what, v, least in (("n_workers", n_workers, 1), ("n_backup", n_backup, 0)):
            if isinstance(v, bool) or int(v) != v or v < least:
                raise ValueError(f"{self.kind}: {what} must be an integer >= {least}, got {v!r}")
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
        if bucket_bytes is not None and (
            isinstance(bucket_bytes, bool)
            or not isinstance(bucket_bytes, (int, float))
            or not bucket_bytes > 0
        ):
            raise ValueError(f"{self.kind}: bucket_bytes must be > 0 or None, got {bucket_bytes!r}")
        self.bucket_bytes = bucket_bytes
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
        self.loop_aggregate = _loop_aggregate(nics[0] if ps_nic is None else ps_nic)
        copy = loop_copy_shares(nics[0] if ps_nic is None else ps_nic)
        k = profile.copy_cpu_factor if machine_cores else 1.0  # (one machine's processes)
        self.copy_shares = (copy[0] * k, copy[1] * k)
        self.loop_rate = loop_rate(nics[0], "machine" if machine_cores else None)
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
        if machine_cores is not None and (
            isinstance(machine_cores, bool)
            or int(machine_cores) != machine_cores
            or machine_cores < 1
        ):
            raise ValueError(
                f"{self.kind}: machine_cores must be an integer >= 1 or None, got {machine_cores!r}"
            )
        self.machine_cores = None if machine_cores is None else int(machine_cores)
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

    def run(self, steps: int, on_step: Callable[[int, int], None] | None = None) -> TrainingResult:
        """Simulate until ``steps`` steps have completed (after any rollbacks); one run per driver.
        ``on_step(done, steps)`` is called as each step completes (progress; ``done`` falls
        back after a rollback).

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
        self.on_step = on_step
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
        self._start_workers()
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

    def _start_workers(self) -> None:
        """One SimPy process a worker (``WorkerFaults._worker``), or, where the driver says its
        workers may run as chains of callbacks (``_chainable``), ``_chain_step`` for each, in
        order, before anything else at time 0 (where the processes would start)."""
        env = self.env
        if self._chainable():
            self.procs = []
            # each worker's step in flight (start, tag, computing, gradient) and its callbacks
            n = self.n_tasks
            self._chain_state = [[0.0, 0, None, None] for _ in range(n)]
            self._chain_cbs = [
                (partial(self._chain_pulled, i), partial(self._chain_arrived, i),
                 partial(self._chain_done, i)) for i in range(n)
            ]  # fmt: skip
            env.timeout(0).callbacks.append(
                lambda _e: [self._chain_step(i) for i in range(self.n_tasks)]
            )
        else:
            self.procs = [env.process(self._worker(i)) for i in range(self.n_tasks)]

    def _chainable(self) -> bool:
        """Whether the workers may run as callbacks (a driver that has a ``_chain_step`` says
        when; none by default)."""
        return False

    def _plain_steps(self) -> bool:
        """Nothing can interrupt a worker (no failures) and its steps are plain: no learner,
        message costs, shared machine or overlap (what chained workers need)."""
        return not (self.msg_on or self.machine is not None or self.learner is not None
                    or self.overlap or self.failures)  # fmt: skip

    def _chain_step(self, i: int, _event: Any = None) -> None:
        raise NotImplementedError

    def _chain_pull(self, i: int, tag: int, computing: Callable[[_Grad], Callable] | None) -> None:
        """Worker ``i`` as a chain of callbacks (drivers' ``_start_workers``): it pulls; at the
        pull's end it computes for step ``tag`` (its straggler factor drawn then, as the
        process draws it) and issues its gradient's push, to leave when the compute ends.
        ``computing(g)`` readies the gradient and returns what the push's end calls; None: the
        push's end calls ``_chain_done(i)``."""
        st = self._chain_state[i]  # (one step in flight a worker: its state, no closures)
        st[0], st[1], st[2] = self.env.now, tag, computing
        self.inflight[i] = self.net.pull(i, self.parts, on_done=self._chain_cbs[i][0])

    def _chain_pulled(self, i: int) -> None:
        """Worker ``i``'s pull has ended (``_chain_pull``): it computes and issues the push."""
        st = self._chain_state[i]
        t1 = self.env.now
        tag = st[1]
        c = self._compute_s(i, tag, t1)
        g = st[3] = _Grad(i, tag, tag)
        g.phases = (st[0], t1, t1 + c, math.nan)
        cbs = self._chain_cbs[i]
        computing = st[2]
        done = cbs[2] if computing is None else computing(g)
        self.inflight[i] = self.net.push(i, self.parts, cbs[1], c, on_done=done)

    def _chain_done(self, i: int) -> None:
        """Worker ``i``'s push has ended, where its ``computing`` was None (``_chain_pull``):
        the driver's own step end."""
        raise NotImplementedError

    def _chain_arrived(self, i: int, grp: int, now: float) -> None:
        """A part of worker ``i``'s gradient (``_chain_pulled``'s) reaches group ``grp``."""
        self._arrive(self._chain_state[i][3], grp, 1.0, None, now)

    def _build(self) -> None:
        """Create the network (PS drivers) and per-run state; subclasses extend."""
        if not self.uses_ps:
            return
        t = self.shards
        key_of: dict[tuple, int] = {}
        groups: list[list[int]] = []
        # SyncReplicasOptimizer's global step task (SyncPS, with message costs) serves the
        # tokens and hears from every other shard: a group of its own, however alike it is
        p = self.profile
        token = getattr(self, "sync_replicas", False) and (
            p.ps_message_s > 0 or (p.ps_control_message_s or 0.0) > 0
        )
        for k in range(self.n_ps):
            row = t.iloc[k]
            key = (row.variables > 0, row.step_bytes, row.apply_s, row.aggregate_s, row.take_s,
                   row.apply_serial_s, row.aggregate_serial_s, row.take_serial_s,
                   token and k == 0)  # fmt: skip
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
        self.group_aggregate_s = [float(t.iloc[ks[0]].aggregate_s) for ks in groups]
        self.group_take_s = [float(t.iloc[ks[0]].take_s) for ks in groups]
        # (the parts of those that keep one core busy: kernels that are mostly their dispatch)
        self.group_apply_serial_s = [float(t.iloc[ks[0]].apply_serial_s) for ks in groups]
        self.group_aggregate_serial_s = [float(t.iloc[ks[0]].aggregate_serial_s) for ks in groups]
        self.group_take_serial_s = [float(t.iloc[ks[0]].take_serial_s) for ks in groups]
        self.n_active_groups = len(active)
        ps_nic = self.ps_nic
        if self.machine_cores is not None and self.loop_aggregate:
            # one machine on a loopback with an aggregate rate: no NICs (Cluster.route): each
            # stream at its worker's single-stream rate, a PS task's streams together at the
            # aggregate rate
            ps_nic = Nic(self.loop_aggregate, ps_nic.latency_s)
        self.net = PSNetwork(
            self.env, self.worker_nics, [ps_nic] * self.n_ps, groups, self.network_mode
        )
        self._build_messages(t)
        size = math.inf if self.bucket_bytes is None else self.bucket_bytes
        if self.machine_cores is not None:  # one machine: pull, compute, push in turn
            size = math.inf
        total = self.profile.step_bytes
        bwd = [
            (r, b / total if total > 0 else 1.0) for b, r in gradient_buckets(self.profile, size)
        ]
        self._plan_buckets(forward_buckets(self.profile, size), bwd)

    def _compute(self, i: int, step: int) -> Any:
        """Worker ``i`` computes its gradient (on the shared machine's cores with
        ``machine_cores``: its ``compute_serial_s`` share on one of them)."""
        env = self.env
        s = self._compute_s(i, step)
        hc = self.machine
        if hc is None:
            yield env.timeout(s)
            return
        now = env.now
        prof = self.profile  # its single-threaded kernels on one core, the rest on all
        serial = s * prof.compute_serial_s / prof.compute_s if prof.compute_s > 0 else 0.0
        end = hc.reserve(now, serial, 1) if serial > 0 else now
        end = hc.reserve(end, s - serial, hc.cores)
        yield env.timeout(end - now)

    def _gradient_hook(self, g: _Grad, i: int, params: Any) -> Any:
        """What an overlapped step calls when worker ``i``'s compute ends: the learner's
        gradient (hybrid runs)."""
        learner = self.learner
        if learner is None:
            return lambda: None
        return lambda: setattr(g, "value", learner.gradient(i, params, self.env.now))

    def _count_step(self) -> None:
        """One more step done: told to ``run``'s ``on_step``; the run ends at its target."""
        self.step += 1
        if self.on_step is not None:
            self.on_step(self.step, self.target)
        if self.step >= self.target and not self.done.triggered:
            self.done.succeed()

    def _open_record(self, step: int, now: float) -> None:
        rec = [step, now, math.nan, 0, 0, False]
        self.records.append(rec)
        self.rec_of[step] = rec

    def _compute_s(self, worker: int, step: int, now: float | None = None) -> float:
        f = self.factor(worker, step, self.env.now if now is None else now)
        if not 0.0 < f < math.inf:
            raise ValueError(
                f"{self.kind}: straggler factor for worker {worker} at step {step} is {f!r}; "
                "factors must be finite and > 0"
            )
        return self.profile.compute_s * f

    def _examples(self) -> int:
        return self.n_workers * self.profile.examples_per_step

    # ---- results --------------------------------------------------------------------------------

    def _result(self, wall: float) -> TrainingResult:
        import pandas as pd

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
