"""GPU device on cupy (CUDA). Present only when cupy imports and sees a CUDA device.

Kernels written against ``ctx.xp`` run here unchanged (cupy mirrors numpy); kernels registered
for "cpu" only fall back to a CPU device under soft placement, with Send/Recv copying the tensor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .base import Device


def cupy_or_none() -> Any:
    """The cupy module when it imports and a CUDA device is visible, else None."""
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return None
        return cupy
    except Exception:  # noqa: BLE001 - no cupy, no driver, no device: no GPU here
        return None


def gpu_devices(task: str, limit: int | None = None, threads: int = 0) -> list[Device]:
    cp = cupy_or_none()
    if cp is None or limit == 0:
        return []
    n = cp.cuda.runtime.getDeviceCount()
    if limit is not None:
        n = min(n, limit)
    return [GPUDevice(f"{task}/device:gpu:{i}", i, cp) for i in range(n)]


class GPUDevice(Device):
    """One CUDA device. Kernels are enqueued on the device's current stream by cupy calls."""

    device_type = "gpu"
    synchronous = False  # inputs fed from the host are moved here in ``run``

    def __init__(self, name: str, index: int, cupy: Any):
        self.index = index
        self.cp = cupy
        self.xp = cupy
        with cupy.cuda.Device(index):
            free, total = cupy.cuda.runtime.memGetInfo()
        super().__init__(name, int(total))

    @property
    def memory_in_use_bytes(self) -> int:  # type: ignore[override]
        return int(self.cp.get_default_memory_pool().used_bytes())

    @memory_in_use_bytes.setter
    def memory_in_use_bytes(self, v: int) -> None:
        pass

    def run(self, node: Any, inputs: list, done: Callable, step: Any = None) -> None:
        try:
            with self.cp.cuda.Device(self.index):
                ins = [self.to_device(x) if isinstance(x, np.ndarray) else x for x in inputs]
                r = node.fn(node.ctx, *ins)
        except Exception as e:  # noqa: BLE001 - handed to the executor, which names the node
            done(None, e)
            return
        done(r)

    def to_device(self, value: Any) -> Any:
        with self.cp.cuda.Device(self.index):
            return self.cp.asarray(value)

    def to_host(self, value: Any) -> Any:
        get = getattr(value, "get", None)
        return get() if get is not None else value

    def perf(self) -> tuple[float, float, float]:
        return (50e12, 2e12, 5e-6)

    def link(self, other: Device) -> tuple[float, float]:
        return (20e9, 10e-6)

    def describe(self) -> dict:
        d = super().describe()
        props = self.cp.cuda.runtime.getDeviceProperties(self.index)
        d["model"] = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        return d
