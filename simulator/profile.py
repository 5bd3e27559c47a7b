"""What one worker replica does per step, as the step-level drivers need it.

``ReplicaProfile`` holds the numbers (compute time, variables' bytes and PS shards, PS apply
costs) and the buckets a step's pulls and pushes overlap its compute in; ``profile_from_graph``
(``simulator/profiling.py``) measures them on a hetbed graph with the op-level simulator. The
drivers live in ``simulator/training.py``, which re-exports both names.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DEFAULT_BUCKET_BYTES",
    "ReplicaProfile",
    "forward_buckets",
    "gradient_buckets",
]

# ---- what one replica does per step ----------------------------------------------------------

#: the share of a step's compute that is the backward pass, where gradients are not measured
#: (a backward pass costs about twice the forward: two products per layer against one)
BACKWARD_FRACTION = 2.0 / 3.0


@dataclass
class ReplicaProfile:
    """One worker replica's step, as the step-level drivers need it.

    - ``compute_s``: seconds of forward + backward on one worker device (before stragglers);
    - ``compute_serial_s``: the part of ``compute_s`` spent in kernels that keep one core of a
      CPU host busy (numpy's elementwise kernels, measured by ``hetbed calibrate``): on a
      machine the tasks share (``machine_cores``) it takes one core, the rest all of them;
    - ``dense``: ``{variable: (bytes, ps index)}``, pulled and pushed whole every step;
    - ``sparse``: ``{variable: (bytes per row, rows touched per step, ps index)}``: only the
      touched rows are pulled (a gather on the PS) and pushed (IndexedSlices);
    - ``apply_s``: PS seconds to apply one gradient to a variable, per variable or one number
      for every variable (a PS shard applies its variables one after another);
    - ``aggregate_s``: PS seconds to add one worker's gradient of a variable into its
      accumulator (synchronous training: TF's ConditionalAccumulator.apply_grad), per variable
      or one number; the shard's CPU does these one after another as the gradients arrive;
    - ``take_s``: PS seconds, once a synchronous step, to take a variable's averaged gradient out
      of its accumulator (TF's take_grad), per variable or one number; it runs before the
      apply;
    - ``examples_per_step``: examples in one replica's mini-batch;
    - ``resident_bytes``: PS memory per variable including optimizer slots (default: dense
      bytes; a sparse variable's touched rows), checked against ``ps_capacity_bytes``;
    - ``worker_memory_bytes``: peak memory of one step on the worker device, checked against
      ``worker_capacity_bytes``; None where unknown;
    - ``worker_message_s``, ``worker_message_s_per_byte``, ``ps_message_s``,
      ``ps_message_s_per_byte``: CPU seconds the worker's and the PS's host spends at its end of
      one message between tasks, fixed and per payload byte (the catalog's
      ``message_overhead_s`` and ``message_overhead_s_per_byte`` of their CPUs; 0: free);
      ``worker_control_message_s``, ``ps_control_message_s``: the same for a RunGraph call's
      request or reply (the catalog's ``control_message_overhead_s``; None: as any message);
      ``worker_own_control_message_s``: the worker's for a call of its own task (its client in
      its process: ``own_control_message_overhead_s``; None: as its other RunGraph calls);
      ``worker_step_s``: the worker's Session.run work per step besides its messages (the
      catalog's ``step_overhead_s``); ``worker_message_latency_s``, ``ps_message_latency_s``:
      the delay each host's runtime adds to a message it receives (``message_latency_s``);
      ``ps_wake_s``: CPU seconds a PS task spends handing a blocked op back to its step's
      thread (the catalog's ``wake_overhead_s``): TF's SyncReplicasOptimizer's queue runner
      takes each variable's gradient once the last one is in, and a worker waiting for its
      token is woken by the update's enqueue (each a thread hand-off on the PS, as the
      op-level simulator books a blocked take or dequeue); ``worker_wake_s``: the same on a
      worker's host. Each is also what a message of one client's step pays when it finds its
      task's handler busy with another client's (handed the interpreter once it is free);
      ``copy_cpu_factor``: what the loopback copies of the machine's tasks take of its cores
      is multiplied by (the catalog's ``switch_byte_cpu_share`` on a host of more processes
      than cores: ``DevicePerf.byte_factor``; 1 on machines of their own);
      ``feed_bytes``: the values a worker step is fed (its Session.run's feeds), which its
      RunGraph request to its own task carries over a loopback NIC (each end's
      ``worker_message_s_per_byte``, and the loopback carrying them, as the op-level
      ``SimSession`` books them; another NIC: handed over in the process, free);
      ``fetch_bytes``: the values a worker step fetches from its own task (its Session.run's
      fetches besides the train op: a loss, predictions), which that task's RunGraph reply
      carries back the same way; the step ends once they are in;
      ``ps_cores``: cores of a PS host (its message handling and its kernels share them);
      ``update_inputs``: tensors besides the gradients that the update ops on a PS task take
      from the worker every step (a learning rate, an optimizer's constants: the step's graph
      has them on the worker, as ``replica_device_setter`` places them), each a message to
      every PS task holding variables (drivers without TF's SyncReplicasOptimizer, whose
      update runs in its own step on the PS);
    - ``grad_ready``: ``{variable: fraction of compute_s}`` at which its gradient is ready in the
      backward pass (all-reduce buckets start on it); a variable not listed is ready by the
      default model of ``ready_fraction_of``;
    - ``worker_apply_s``: seconds to apply one gradient to a variable on the worker's own
      device (what an all-reduce job does), per variable or one number; None: not measured.

    Raises ValueError for a negative or non-finite time, byte count, row count or PS index.
    """

    compute_s: float
    dense: dict[str, tuple[int, int]] = field(default_factory=dict)
    sparse: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    apply_s: dict[str, float] | float = 0.0
    examples_per_step: int = 1
    resident_bytes: dict[str, float] = field(default_factory=dict)
    worker_memory_bytes: float | None = None
    worker_capacity_bytes: float | None = None
    ps_capacity_bytes: float | None = None
    aggregate_s: dict[str, float] | float = 0.0
    worker_message_s: float = 0.0
    worker_message_s_per_byte: float = 0.0
    worker_control_message_s: float | None = None
    ps_control_message_s: float | None = None
    worker_own_control_message_s: float | None = None
    worker_step_s: float = 0.0
    worker_message_latency_s: float = 0.0
    ps_message_latency_s: float = 0.0
    ps_wake_s: float = 0.0
    worker_wake_s: float = 0.0
    feed_bytes: float = 0.0
    fetch_bytes: float = 0.0
    copy_cpu_factor: float = 1.0
    ps_message_s: float = 0.0
    ps_message_s_per_byte: float = 0.0
    ps_cores: int = 1
    update_inputs: int = 0
    grad_ready: dict[str, float] = field(default_factory=dict)
    worker_apply_s: dict[str, float] | float | None = None
    compute_serial_s: float = 0.0
    take_s: dict[str, float] | float = 0.0
    #: the cores of its PS host each variable's kernels keep busy (its update, its accumulator's
    #: add and take), where a measured profile says so or the kernel is mostly its dispatch (1:
    #: ``devices.simulated.measured_cores`` / ``default_cores``, the op-level simulator's rule);
    #: a variable not named keeps all of them busy, and so does the step-level driver book a
    #: kernel of more than one core
    apply_cores: dict[str, int] = field(default_factory=dict)
    aggregate_cores: dict[str, int] = field(default_factory=dict)
    take_cores: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _nonneg("compute_s", self.compute_s)
        _nonneg("compute_serial_s", self.compute_serial_s)
        if self.compute_serial_s > self.compute_s:
            raise ValueError(
                f"compute_serial_s ({self.compute_serial_s!r}) is a part of compute_s "
                f"({self.compute_s!r}) and cannot exceed it"
            )
        for what in (
            "worker_message_s",
            "worker_message_s_per_byte",
            "worker_step_s",
            "worker_message_latency_s",
            "ps_message_latency_s",
            "ps_wake_s",
            "worker_wake_s",
            "feed_bytes",
            "fetch_bytes",
            "copy_cpu_factor",
        ):
            _nonneg(what, getattr(self, what))
        for what in ("ps_message_s", "ps_message_s_per_byte"):
            _nonneg(what, getattr(self, what))
        for what in (
            "worker_control_message_s",
            "ps_control_message_s",
            "worker_own_control_message_s",
        ):
            if getattr(self, what) is not None:
                _nonneg(what, getattr(self, what))
        if (
            isinstance(self.update_inputs, bool)
            or int(self.update_inputs) != self.update_inputs
            or self.update_inputs < 0
        ):
            raise ValueError(f"update_inputs must be an integer >= 0, got {self.update_inputs!r}")
        if (
            isinstance(self.ps_cores, bool)
            or int(self.ps_cores) != self.ps_cores
            or self.ps_cores < 1
        ):
            raise ValueError(f"ps_cores must be an integer >= 1, got {self.ps_cores!r}")
        if int(self.examples_per_step) != self.examples_per_step or self.examples_per_step < 1:
            raise ValueError(
                f"examples_per_step must be an integer >= 1, got {self.examples_per_step!r}"
            )
        for name, (nbytes, ps) in self.dense.items():
            _nonneg(f"dense variable {name!r} bytes", nbytes)
            _index(f"dense variable {name!r} ps index", ps)
        for name, (row_bytes, rows, ps) in self.sparse.items():
            if name in self.dense:
                raise ValueError(f"variable {name!r} is both dense and sparse")
            _nonneg(f"sparse variable {name!r} bytes per row", row_bytes)
            _nonneg(f"sparse variable {name!r} rows per step", rows)
            _index(f"sparse variable {name!r} ps index", ps)
        for name, f in self.grad_ready.items():
            if name not in self.dense and name not in self.sparse:
                raise ValueError(f"grad_ready names {name!r}, which is not a profile variable")
            if not 0.0 <= f <= 1.0:
                raise ValueError(f"grad_ready[{name!r}] must be in [0, 1], got {f!r}")
        for what in ("apply_cores", "aggregate_cores", "take_cores"):
            for name, c in getattr(self, what).items():
                if name not in self.dense and name not in self.sparse:
                    raise ValueError(f"{what} names {name!r}, which is not a profile variable")
                if isinstance(c, bool) or int(c) != c or c < 1:
                    raise ValueError(f"{what}[{name!r}] must be an integer >= 1, got {c!r}")
        for what in ("apply_s", "aggregate_s", "worker_apply_s"):
            per = getattr(self, what)
            if per is None:
                continue
            if isinstance(per, Mapping):
                for name, s in per.items():
                    if name not in self.dense and name not in self.sparse:
                        raise ValueError(f"{what} names {name!r}, which is not a profile variable")
                    _nonneg(f"{what}[{name!r}]", s)
            else:
                _nonneg(what, per)

    # ---- derived per-shard numbers --------------------------------------------------------

    @property
    def variables(self) -> list[str]:
        return list(self.dense) + list(self.sparse)

    @property
    def ps_tasks_needed(self) -> int:
        """1 + the highest PS index any variable is on (0 without variables)."""
        shards = [ps for _, ps in self.dense.values()] + [ps for *_, ps in self.sparse.values()]
        return max(shards) + 1 if shards else 0

    def ps_of(self, name: str) -> int:
        return self.dense[name][1] if name in self.dense else self.sparse[name][2]

    def step_bytes_of(self, name: str) -> float:
        """Bytes of ``name`` pulled (and pushed) per step."""
        if name in self.dense:
            return float(self.dense[name][0])
        row_bytes, rows, _ = self.sparse[name]
        return float(row_bytes * rows)

    def apply_s_of(self, name: str) -> float:
        if isinstance(self.apply_s, Mapping):
            return float(self.apply_s.get(name, 0.0))
        return float(self.apply_s)

    def worker_apply_s_of(self, name: str) -> float:
        """Seconds to apply ``name``'s gradient on the worker's device (``apply_s_of``, the PS's
        price, when the profile has no ``worker_apply_s``)."""
        per = self.worker_apply_s
        if per is None:
            return self.apply_s_of(name)
        if isinstance(per, Mapping):
            return float(per.get(name, 0.0))
        return float(per)

    def ready_fractions(self) -> dict[str, float]:
        """``{variable: fraction of compute_s}`` after which its gradient is ready: measured
        (``grad_ready``), else a model: the backward pass is the last ``BACKWARD_FRACTION`` of
        the compute and yields the gradients in reverse variable order, each after a share of it
        proportional to the bytes of the gradients before it and its own (so the first
        variable's gradient is the last, at the end of the compute)."""
        names = self.variables
        sizes = [self.step_bytes_of(v) for v in names]
        total = sum(sizes)
        out: dict[str, float] = {}
        done = 0.0
        for k in range(len(names) - 1, -1, -1):
            done += sizes[k]
            share = done / total if total > 0 else (len(names) - k) / len(names)
            model = 1.0 - BACKWARD_FRACTION + BACKWARD_FRACTION * share if k else 1.0
            out[names[k]] = float(self.grad_ready.get(names[k], model))
        return out

    def aggregate_s_of(self, name: str) -> float:
        if isinstance(self.aggregate_s, Mapping):
            return float(self.aggregate_s.get(name, 0.0))
        return float(self.aggregate_s)

    def take_s_of(self, name: str) -> float:
        if isinstance(self.take_s, Mapping):
            return float(self.take_s.get(name, 0.0))
        return float(self.take_s)

    @property
    def step_bytes(self) -> float:
        """Bytes of all variables pulled (and pushed) per step by one worker."""
        return sum(self.step_bytes_of(v) for v in self.variables)

    def shard_table(self, n_ps: int) -> pd.DataFrame:
        """One row per PS shard: variables, step_bytes, apply_s, aggregate_s, take_s,
        resident_bytes, and of apply_s, aggregate_s and take_s the seconds of kernels that keep
        one core busy (``apply_serial_s`` ...; the rest keep all of the host's)."""
        import pandas as pd

        rows = [
            {
                "ps": k,
                "variables": 0,
                "step_bytes": 0.0,
                "apply_s": 0.0,
                "aggregate_s": 0.0,
                "take_s": 0.0,
                "resident_bytes": 0.0,
                "apply_serial_s": 0.0,
                "aggregate_serial_s": 0.0,
                "take_serial_s": 0.0,
            }
            for k in range(n_ps)
        ]
        r_of = {"apply": self.apply_s_of, "aggregate": self.aggregate_s_of, "take": self.take_s_of}
        for name in self.variables:
            k = self.ps_of(name)
            if k >= n_ps:
                raise ValueError(
                    f"variable {name!r} is on PS {k} but there are only {n_ps} PS tasks; "
                    f"use n_ps >= {self.ps_tasks_needed} or re-place with profile.placed(n_ps)"
                )
            r = rows[k]
            r["variables"] += 1
            r["step_bytes"] += self.step_bytes_of(name)
            r["apply_s"] += self.apply_s_of(name)
            r["aggregate_s"] += self.aggregate_s_of(name)
            r["take_s"] += self.take_s_of(name)
            for what, cores in (
                ("apply", self.apply_cores),
                ("aggregate", self.aggregate_cores),
                ("take", self.take_cores),
            ):
                if cores.get(name) == 1:
                    r[f"{what}_serial_s"] += r_of[what](name)
            r["resident_bytes"] += self.resident_bytes.get(name, self.step_bytes_of(name))
        return pd.DataFrame(rows)

    def placed(self, ps_tasks: int, strategy: str = "round_robin") -> ReplicaProfile:
        """The same profile with its variables re-placed on ``ps_tasks`` PS tasks by
        ``runtime/device_setter``'s strategies ("round_robin" in variable order, or "greedy":
        each to the least-loaded task by resident bytes).

        Raises ValueError for ps_tasks < 1 or an unknown strategy.
        """
        from hetbed.runtime.device_setter import GreedyLoadBalancingStrategy, RoundRobinStrategy

        if int(ps_tasks) != ps_tasks or ps_tasks < 1:
            raise ValueError(
                f"a PS placement needs ps_tasks >= 1, got {ps_tasks!r} (strategy {strategy!r})"
            )
        if strategy in ("round_robin", "round-robin"):
            choose: Any = RoundRobinStrategy(int(ps_tasks))
        elif strategy == "greedy":
            choose = GreedyLoadBalancingStrategy(
                int(ps_tasks),
                load_fn=lambda name: self.resident_bytes.get(name, self.step_bytes_of(name)),
            )
        else:
            raise ValueError(f"unknown PS strategy {strategy!r}; use 'round_robin' or 'greedy'")
        dense = {n: (b, choose(n)) for n, (b, _) in self.dense.items()}
        sparse = {n: (rb, r, choose(n)) for n, (rb, r, _) in self.sparse.items()}
        return replace(self, dense=dense, sparse=sparse)

    @classmethod
    def balanced(
        cls,
        n_params: int,
        n_ps: int,
        compute_s: float,
        bytes_per_param: int = 4,
        apply_s_per_param: float = 0.0,
        examples_per_step: int = 1,
    ) -> ReplicaProfile:
        """A model of ``n_params`` parameters split as evenly as possible into one variable per PS
        (e.g. Inception-v3: 23.8M float32 over 17 PS); apply cost proportional to parameters."""
        if int(n_ps) != n_ps or n_ps < 1:
            raise ValueError(f"balanced profile needs n_ps >= 1, got {n_ps!r}")
        base, extra = divmod(int(n_params), int(n_ps))
        sizes = [base + (k < extra) for k in range(n_ps)]
        dense = {f"shard{k}": (sizes[k] * bytes_per_param, k) for k in range(n_ps)}
        apply = {f"shard{k}": sizes[k] * apply_s_per_param for k in range(n_ps)}
        return cls(compute_s, dense, apply_s=apply, examples_per_step=examples_per_step)


#: PyTorch DistributedDataParallel's default bucket_cap_mb (25 MiB)
DEFAULT_BUCKET_BYTES = 25 * 2**20


def gradient_buckets(profile: ReplicaProfile, bucket_bytes: float) -> list[tuple[float, float]]:
    """The all-reduce buckets of ``profile``'s gradients: ``[(bytes, ready fraction)]`` in the
    order they are reduced. Gradients join buckets in the order they become ready (``profile.
    ready_fractions()``; ties in reverse variable order, as a backward pass yields them); a
    bucket closes once it holds ``bucket_bytes`` or more (PyTorch DDP's rule), and is ready when
    its last gradient is. One bucket holding everything is ``(step_bytes, 1.0)``."""
    ready = profile.ready_fractions()
    names = profile.variables
    order = sorted(range(len(names)), key=lambda k: (ready[names[k]], -k))
    out: list[tuple[float, float]] = []
    size = at = 0.0
    for k in order:
        size += profile.step_bytes_of(names[k])
        at = max(at, ready[names[k]])
        if size >= bucket_bytes:
            out.append((size, at))
            size = at = 0.0
    if size > 0.0 or not out:
        out.append((size, at))
    if len(out) == 1:  # everything in one: the step's bytes, after the whole compute
        return [(profile.step_bytes, 1.0)]
    return out


def forward_buckets(profile: ReplicaProfile, bucket_bytes: float) -> list[tuple[float, float]]:
    """The pull buckets of ``profile``'s variables: ``[(needed at, share)]`` in the order the
    forward pass reads them (variable order). A bucket closes once it holds ``bucket_bytes`` or
    more; ``share`` is its part of the step's bytes; it is needed once the forward pass (the
    first ``1 - BACKWARD_FRACTION`` of the compute) has done the share of its work that the bytes
    before it are of all bytes (the mirror of ``ready_fractions``'s model). One bucket holding
    everything is ``(0.0, 1.0)``."""
    names = profile.variables
    sizes = [profile.step_bytes_of(v) for v in names]
    total = sum(sizes)
    out: list[tuple[float, float]] = []
    size = before = 0.0
    for s in sizes:
        if size == 0.0:
            start = before
        size += s
        before += s
        if size >= bucket_bytes:
            out.append(((1.0 - BACKWARD_FRACTION) * start / total, size / total))
            size = 0.0
    if size > 0.0:
        out.append(((1.0 - BACKWARD_FRACTION) * start / total, size / total))
    if len(out) <= 1:
        return [(0.0, 1.0)]
    return out


def _nonneg(what: str, v: Any) -> None:
    if (
        isinstance(v, bool)
        or not isinstance(v, (int, float, np.number))
        or not (math.isfinite(v) and v >= 0)
    ):
        raise ValueError(f"{what} must be a finite number >= 0, got {v!r}")


def _index(what: str, v: Any) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
        raise ValueError(f"{what} must be an integer >= 0, got {v!r}")
