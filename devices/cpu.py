"""CPU device on numpy. Several may share one process (virtual CPU devices ``cpu:0..N-1``)."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from .base import Device

# A node is handed to the pool only if its work dwarfs a thread hand-off (about 100-200 us here).
HEAVY_FLOPS = 20e6


class CPUDevice(Device):
    """Runs numpy kernels inline; with ``threads > 0`` expensive nodes go to its own pool."""

    device_type = "cpu"
    xp = np

    def __init__(self, name: str, threads: int = 0, memory_limit_bytes: int | None = None):
        super().__init__(name, memory_limit_bytes or _host_memory())
        self.threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self.synchronous = True

    @property
    def memory_in_use_bytes(self) -> int:  # type: ignore[override]
        """Bytes of the state this device holds (its variables' buffers)."""
        total = 0
        for h in (self.resources or {}).values():
            v = getattr(h, "value", None)
            total += getattr(v, "nbytes", 0) if v is not None else 0
        return total

    @memory_in_use_bytes.setter
    def memory_in_use_bytes(self, v: int) -> None:
        pass

    def is_heavy(self, node: Any) -> bool:
        if self.threads <= 0:
            return False
        return _static_flops(node.op) >= HEAVY_FLOPS

    def run(self, node: Any, inputs: list, done: Callable, step: Any = None) -> None:
        if not node.heavy:
            return super().run(node, inputs, done, step)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix=self.name)
        self._pool.submit(Device.run, self, node, inputs, done, step)

    def to_device(self, value: Any) -> Any:
        get = getattr(value, "get", None)  # a cupy array arriving from a GPU
        return get() if get is not None and not isinstance(value, np.ndarray) else value

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


def _static_flops(op: Any) -> float:
    """FLOPs from the op's cost rule, with unknown dimensions taken as 32."""
    try:
        ins = [tuple(32 if d is None else d for d in t.shape.dims) for t in op.inputs]
        outs = [tuple(32 if d is None else d for d in t.shape.dims) for t in op.outputs]
        return float(op.op_def.cost_fn(op, ins, outs).flops)
    except Exception:  # noqa: BLE001 - unknown ranks or odd ops are simply not heavy
        return 0.0


def _host_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30
