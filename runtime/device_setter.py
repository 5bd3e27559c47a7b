"""``replica_device_setter``: variables to parameter-server tasks, everything else to the worker."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..devices.naming import DeviceSpec
from .registry import nbytes

STANDARD_PS_OPS = ("VariableV2", "Variable", "VarHandleOp")


class RoundRobinStrategy:
    """PS task for each variable in turn, in creation order (TensorFlow's default)."""

    def __init__(self, num_tasks: int):
        self.num_tasks = num_tasks
        self._next = 0

    def __call__(self, op: Any) -> int:
        task = self._next
        self._next = (self._next + 1) % self.num_tasks
        return task


def byte_size_load_fn(op: Any) -> float:
    """Bytes of the variable an op creates (0 when its shape is not fully known)."""
    shape = op.outputs[0].shape if op.outputs else None
    if shape is None or not shape.is_fully_defined():
        return 0.0
    return float(nbytes(shape.dims, op.outputs[0].dtype))


class GreedyLoadBalancingStrategy:
    """Each variable to the PS task with the least load so far (load = ``load_fn(op)``, bytes)."""

    def __init__(self, num_tasks: int, load_fn: Callable[[Any], float] = byte_size_load_fn):
        self.num_tasks = num_tasks
        self.load_fn = load_fn
        self.loads = [0.0] * num_tasks

    def __call__(self, op: Any) -> int:
        task = min(range(self.num_tasks), key=lambda i: (self.loads[i], i))
        self.loads[task] += self.load_fn(op)
        return task


def replica_device_setter(
    ps_tasks: int = 0,
    ps_device: str = "/job:ps",
    worker_device: str = "/job:worker",
    merge_devices: bool = True,
    cluster: Any = None,
    ps_ops: Iterable[str] | None = None,
    ps_strategy: Callable[[Any], int] | str | None = None,
    strategy: Callable[[Any], int] | str | None = None,
) -> Callable[[Any], str] | None:
    """A device function for ``hb.device(...)``: ops of ``ps_ops`` types go to a PS task chosen by
    ``ps_strategy`` (round robin by default; ``"greedy"`` balances bytes; ``strategy`` is a
    shorthand), others to ``worker_device``.

    Fields the op already asked for (through outer device scopes) are kept. Returns None when
    there are no PS tasks (as TensorFlow does), so ``hb.device(None)`` leaves placement alone.
    """
    if strategy is not None:  # shorthand for ps_strategy
        if ps_strategy is not None:
            raise ValueError("replica_device_setter: give ps_strategy or strategy, not both")
        ps_strategy = strategy
    if cluster is not None:
        jobs = cluster.as_dict() if hasattr(cluster, "as_dict") else dict(cluster)
        ps_tasks = len(jobs.get(DeviceSpec.from_string(ps_device).job or "ps", []))
    if ps_tasks < 0:
        raise ValueError(f"replica_device_setter: ps_tasks must be >= 0, got {ps_tasks}")
    if ps_tasks == 0:
        if ps_strategy is not None:
            raise ValueError("replica_device_setter: a ps_strategy needs ps_tasks > 0")
        return None
    if ps_strategy is None:
        ps_strategy = RoundRobinStrategy(ps_tasks)
    elif ps_strategy == "greedy":
        ps_strategy = GreedyLoadBalancingStrategy(ps_tasks)
    elif ps_strategy in ("round_robin", "round-robin"):
        ps_strategy = RoundRobinStrategy(ps_tasks)
    elif not callable(ps_strategy):
        raise ValueError(
            f"unknown ps_strategy {ps_strategy!r}; use 'round_robin', 'greedy' or a callable"
        )
    ps_types = set(ps_ops or STANDARD_PS_OPS)
    ps_spec = DeviceSpec.from_string(ps_device)
    worker_spec = DeviceSpec.from_string(worker_device or "")

    def choose(op: Any) -> str:
        current = DeviceSpec.from_string(op.device or "") if merge_devices else DeviceSpec()
        if op.type in ps_types:
            spec = ps_spec
            if spec.job and (not current.job or current.job == spec.job):
                spec = DeviceSpec(
                    spec.job, spec.replica, ps_strategy(op), spec.device_type, spec.device_index
                )
            return spec.merge_from(current).to_string()
        return worker_spec.merge_from(current).to_string()

    choose.strategy = ps_strategy  # type: ignore[attr-defined]
    return choose
