"""Messages between master and workers: msgpack dicts; tensors as dtype + shape + raw bytes.

No pickle: a message is plain data (str-keyed maps, lists, strings, numbers, bytes), and a tensor
is ``{"dtype": "<f4", "shape": [2, 3], "data": <little-endian bytes>, "scalar": false}``. Every
decoder validates what it reads and raises ``WireError`` (a ValueError) naming the field.
"""

from __future__ import annotations

import re
from typing import Any

import msgpack
import numpy as np

#: default max gRPC message size each way (bytes): large tensors are sent whole, not chunked
MAX_MESSAGE_BYTES = 1 << 30

_DTYPE_RE = re.compile(r"^[<|][biufcSU][1-9][0-9]*$")


class WireError(ValueError):
    """A message is not valid msgpack, or lacks a field, or a field has the wrong type."""


def pack(msg: dict) -> bytes:
    return msgpack.packb(msg, use_bin_type=True)


def unpack(data: bytes, what: str) -> dict:
    """The dict in ``data``; raises WireError naming the message ``what``."""
    try:
        msg = msgpack.unpackb(data, raw=False, strict_map_key=True)
    except Exception as e:  # noqa: BLE001 - any decoding failure is a malformed message
        raise WireError(f"{what}: malformed message ({type(e).__name__}: {e})") from None
    if not isinstance(msg, dict):
        raise WireError(f"{what}: a message is a map, got {type(msg).__name__}")
    return msg


def field(msg: dict, key: str, kind: type | tuple, what: str) -> Any:
    """``msg[key]`` checked to be of ``kind``; raises WireError naming the message and field."""
    v = msg.get(key)
    if not isinstance(v, kind) or (isinstance(v, bool) and kind is int):
        raise WireError(f"{what}: field {key!r} must be {_kind_name(kind)}, got {v!r:.60}")
    return v


def _kind_name(kind: type | tuple) -> str:
    if isinstance(kind, tuple):
        return " or ".join(k.__name__ for k in kind)
    return kind.__name__


def tensor_to_wire(value: Any, where: str = "tensor") -> dict:
    """The wire form of a numpy value (array or scalar); raises TypeError for anything else."""
    get = getattr(value, "get", None)
    if get is not None and not isinstance(value, (np.ndarray, np.generic, dict)):
        value = get()  # a cupy array: bring it to the host
    if not isinstance(value, (np.ndarray, np.generic, int, float, bool, complex)):
        raise TypeError(
            f"{where}: a {type(value).__name__} cannot cross tasks; only numpy values can "
            "(variable references stay on the task that owns the variable)"
        )
    arr = np.asarray(value)
    if arr.dtype.kind not in "biufcSU":
        raise TypeError(f"{where}: numpy dtype {arr.dtype} cannot cross tasks")
    le = arr.dtype.newbyteorder("<") if arr.dtype.byteorder != "|" else arr.dtype
    return {
        "dtype": le.str,
        "shape": list(arr.shape),
        "data": np.ascontiguousarray(arr, dtype=le).tobytes(),
        "scalar": isinstance(value, np.generic),
    }


def tensor_from_wire(obj: Any, where: str = "tensor") -> Any:
    """A fresh, writable numpy value from its wire form; raises WireError naming ``where``."""
    if not isinstance(obj, dict):
        raise WireError(f"{where}: a tensor is a map, got {type(obj).__name__}")
    dt = obj.get("dtype")
    if not isinstance(dt, str) or not _DTYPE_RE.match(dt):
        raise WireError(f"{where}: unsupported dtype {dt!r}")
    shape = obj.get("shape")
    if not isinstance(shape, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
    ):
        raise WireError(f"{where}: shape must be a list of ints >= 0, got {shape!r:.60}")
    data = obj.get("data")
    if not isinstance(data, bytes):
        raise WireError(f"{where}: data must be bytes, got {type(data).__name__}")
    dtype = np.dtype(dt)
    n = int(np.prod(shape, dtype=np.int64))
    if len(data) != n * dtype.itemsize:
        raise WireError(
            f"{where}: {len(data)} bytes do not fill shape {shape} of {dt} "
            f"({n * dtype.itemsize} bytes)"
        )
    arr = np.frombuffer(data, dtype=dtype).reshape(shape).astype(dtype.newbyteorder("="))
    return arr[()] if obj.get("scalar") and arr.ndim == 0 else arr
