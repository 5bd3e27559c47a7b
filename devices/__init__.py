"""Devices: the interface the executor runs nodes through, and the real CPU/GPU devices."""

from __future__ import annotations

from typing import Any

from .base import Device
from .cpu import CPUDevice

__all__ = ["Device", "CPUDevice", "local_devices"]

LOCAL = "/job:localhost/replica:0/task:0"


#: device types a ConfigProto's device_count may name (TF's XLA and TPU types count nothing here)
_DEVICE_COUNT_TYPES = ("CPU", "GPU", "XLA_CPU", "XLA_GPU", "TPU")
#: the most virtual CPU devices one process makes (each runs its heavy nodes on a thread)
MAX_VIRTUAL_CPUS = 1024


def local_devices(config: Any = None, task: str = LOCAL) -> list[Device]:
    """The devices of this process for a session ``config`` (a ConfigProto or None).

    ``device_count={"CPU": n}`` gives virtual CPU devices cpu:0..n-1 (each with its own thread
    pool when n > 1 or inter-op threads are asked for); ``device_count={"GPU": k}`` caps the GPUs
    used (all visible by default, none without cupy and CUDA); ``virtual_devices`` adds CPU devices
    with arbitrary full names (e.g. a ps and a worker task in one process).
    """
    counts = dict(getattr(config, "device_count", {}) or {})
    counts = {k.upper(): int(v) for k, v in counts.items()}
    for k in counts:
        if k not in _DEVICE_COUNT_TYPES:
            import difflib

            near = difflib.get_close_matches(k, ("CPU", "GPU"), n=1, cutoff=0.3)
            raise ValueError(
                f"device_count: unknown device type {k!r}"
                + (f" (did you mean {near[0]}?)" if near else "")
                + "; hetbed counts CPU and GPU"
            )
    n_cpu = counts.get("CPU", 1)
    if not 1 <= n_cpu <= MAX_VIRTUAL_CPUS:
        raise ValueError(
            f"device_count CPU must be in [1, {MAX_VIRTUAL_CPUS}] (each a device with its own "
            f"thread), got {n_cpu}"
        )
    threads = int(getattr(config, "inter_op_parallelism_threads", 0) or 0)
    if n_cpu > 1 and threads == 0:
        threads = 1  # virtual devices run their heavy nodes concurrently, one thread each
    devs: list[Device] = [
        CPUDevice(f"{task}/device:cpu:{i}", threads=threads) for i in range(n_cpu)
    ]
    from .gpu import gpu_devices

    devs += gpu_devices(task, counts.get("GPU"), threads)
    seen = {d.name for d in devs}
    from .naming import DeviceSpec

    for name in getattr(config, "virtual_devices", None) or []:
        full = DeviceSpec.from_string(name)
        if full.device_type not in (None, "cpu"):
            raise ValueError(f"virtual device {name!r}: only CPU virtual devices exist")
        spec = DeviceSpec(
            job=full.job or "localhost",
            replica=full.replica if full.replica is not None else 0,
            task=full.task if full.task is not None else 0,
            device_type="cpu",
            device_index=full.device_index or 0,
        ).to_string()
        if spec in seen:
            raise ValueError(f"virtual device {name!r} duplicates {spec}")
        seen.add(spec)
        devs.append(CPUDevice(spec, threads=max(threads, 1)))
    return devs
