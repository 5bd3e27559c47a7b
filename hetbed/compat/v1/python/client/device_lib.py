"""``tensorflow.python.client.device_lib``: what TF1 programs ask to count their GPUs."""

from __future__ import annotations

from typing import Any


class DeviceAttributes:
    """One device as ``list_local_devices`` describes it (TF's ``DeviceAttributes`` fields)."""

    def __init__(self, name: str, device_type: str, memory_limit: int, description: str = ""):
        self.name = name
        self.device_type = device_type
        self.memory_limit = memory_limit
        self.physical_device_desc = description

    def __repr__(self) -> str:
        return (
            f'name: "{self.name}"\ndevice_type: "{self.device_type}"\n'
            f"memory_limit: {self.memory_limit}\n"
        )


def list_local_devices(session_config: Any = None) -> list[DeviceAttributes]:
    """The devices a Session would have in this process, named as TF names them
    (``/device:CPU:0``, ``/device:GPU:0``) with ``device_type`` ``"CPU"`` or ``"GPU"``."""
    import hetbed as hb

    out = []
    for d in hb.list_devices(session_config):
        kind, _, index = str(d.name).rsplit("/device:", 1)[-1].rpartition(":")
        kind = kind.upper()
        limit = int(getattr(d, "memory_limit_bytes", 0) or 0)
        out.append(DeviceAttributes(f"/device:{kind}:{index}", kind, limit, str(d.name)))
    return out
