"""cupy.cuda.runtime (fake)."""

from __future__ import annotations

from .._core import STATE, current_device_id


class CUDARuntimeError(RuntimeError):
    pass


def getDeviceCount() -> int:  # noqa: N802 - cupy's name
    if STATE.n < 1:
        raise CUDARuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")
    return STATE.n


def getDevice() -> int:  # noqa: N802
    return current_device_id()


def memGetInfo() -> tuple[int, int]:  # noqa: N802
    """(free, total) bytes of the current device."""
    return STATE.memory - STATE.used[current_device_id()], STATE.memory


def getDeviceProperties(device: int) -> dict:  # noqa: N802
    if not 0 <= device < STATE.n:
        raise CUDARuntimeError(f"cudaErrorInvalidDevice: invalid device ordinal {device}")
    return {
        "name": STATE.name.encode(),
        "totalGlobalMem": STATE.memory,
        "multiProcessorCount": 80,
        "major": 7,
        "minor": 0,
    }


def deviceSynchronize() -> None:  # noqa: N802
    from .._core import Device

    Device(current_device_id()).synchronize()


def runtimeGetVersion() -> int:  # noqa: N802
    return 12000
