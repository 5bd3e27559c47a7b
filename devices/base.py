"""The Device interface: what the executor asks of anything that runs nodes.

A device runs a prepared node on its inputs and reports completion through ``done``; a real device
does it now (inline or on its thread pool), a simulated device after a simulated duration. A new
device is one small subclass: fill in ``run`` (or only ``synchronous = True`` and inherit the inline
``run``), and the executor needs nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


class Device:
    """A named place that runs kernels. ``name`` is ``/job:J/replica:R/task:T/device:TYPE:N``."""

    #: the device's type as named in device strings ("cpu", "gpu", "tpu")
    device_type: str = ""
    #: True when ``run`` always completes before it returns (allows the straight-line schedule)
    synchronous: bool = True
    #: the array module kernels use on this device (numpy, cupy)
    xp: Any = np

    def __init__(self, name: str, memory_limit_bytes: int | None = None):
        self.name = name
        self.memory_limit_bytes = memory_limit_bytes
        self.memory_in_use_bytes = 0
        #: the session's per-device resources (variables), set when a session uses the device
        self.resources: dict | None = None

    @property
    def kernel_type(self) -> str:
        """Kernels are looked up by this type (a simulated TPU may run the "gpu" kernels)."""
        return self.__dict__.get("kernel_type", self.device_type)

    @kernel_type.setter
    def kernel_type(self, value: str) -> None:
        self.__dict__["kernel_type"] = value

    def run(self, node: Any, inputs: list, done: Callable, step: Any = None) -> None:
        """Run ``node`` on ``inputs``; call ``done(result)`` or ``done(None, error)`` exactly once."""
        try:
            r = node.fn(node.ctx, *inputs)
        except Exception as e:  # noqa: BLE001 - handed to the executor, which names the node
            done(None, e)
            return
        done(r)

    def is_heavy(self, node: Any) -> bool:
        """Whether the node is worth handing to another thread (only devices with pools say yes)."""
        return False

    def perf(self) -> tuple[float, float, float]:
        """(peak FLOP/s, memory bytes/s, per-kernel launch seconds) for cost-aware placement."""
        return (50e9, 10e9, 1e-6)

    def link(self, other: Device) -> tuple[float, float]:
        """(bytes/s, latency s) of a transfer from ``other`` to this device."""
        return (10e9, 20e-6)

    # Host <-> device copies; identity on host-memory devices.
    def to_device(self, value: Any) -> Any:
        return value

    def to_host(self, value: Any) -> Any:
        return value

    def close(self) -> None:
        """Release threads and memory; the device must not be used afterwards."""

    def describe(self) -> dict:
        return {
            "name": self.name,
            "device_type": self.device_type,
            "memory_limit_bytes": self.memory_limit_bytes,
        }

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"
