"""Placement: choose a device for every op from its requested device and colocation groups."""

from __future__ import annotations

from typing import Any

from .device_spec import DeviceSpec
from .errors import InvalidArgumentError


def place_op(op: Any, devices: list, default: Any, soft: bool = True) -> Any:
    """The device of ``devices`` that runs ``op``.

    An op colocated with another (``hb.colocate_with``, or a variable's assign/read ops) goes where
    that op goes. A requested device (``hb.device`` scopes) must match an existing device; with soft
    placement an op whose requested device type has no kernel falls back to a device that has one.
    Raises InvalidArgumentError naming the op, the requested device and the devices available.
    """
    target = op
    for group in op.colocation_groups:
        try:
            target = op.graph.get_operation_by_name(group)
        except KeyError:
            continue
        break
    req = target.device or op.device
    if not req:
        dev = default
    else:
        spec = DeviceSpec.from_string(req)
        matching = [d for d in devices if spec.matches(DeviceSpec.from_string(d.name))]
        if not matching:
            partial = DeviceSpec(device_type=spec.device_type, device_index=spec.device_index)
            matching = [d for d in devices if partial.matches(DeviceSpec.from_string(d.name))]
            if not matching and soft:
                matching = [default]
        if not matching:
            raise InvalidArgumentError(
                f"cannot place op {op.name!r}: requested device {req!r} does not exist; "
                f"this session has {', '.join(_short(d.name) for d in devices)}"
            )
        dev = matching[0]
    from .executor import kernel_dtype

    dt = kernel_dtype(op)
    if op.op_def is not None and not op.op_def.has_kernel(dev.device_type, dt):
        fallback = [d for d in devices if op.op_def.has_kernel(d.device_type, dt)]
        if soft and fallback:
            return fallback[0]
    return dev


def _short(name: str) -> str:
    return name.split("/device:")[-1] if "/device:" in name else name
