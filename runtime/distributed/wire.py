"""Messages between master and workers: msgpack dicts; tensors as dtype + shape + raw bytes.

No pickle: a message is plain data (str-keyed maps, lists, strings, numbers, bytes), and a tensor
in a message (RunGraph feeds and fetches) is ``{"dtype": "<f4", "shape": [2, 3], "data":
<little-endian bytes>, "scalar": false}``. Every decoder validates what it reads and raises
``WireError`` (a ValueError) naming the field. A string tensor (an object array of bytes) has
dtype ``"string"`` and data the uint64 length of each element then the elements' bytes.

Tensors between tasks (RecvTensor) are streamed instead: a header ``{"dtype", "shape", "nbytes",
"scalar"}`` then the raw bytes; a dead tensor (the untaken branch of a cond) is a header with
``"dead": true`` and no bytes. The sender keeps an ``OutTensor`` (the bytes are a memoryview of
the array, or of a snapshot when the value could change while being sent); the receiver checks the
header against its size limit, preallocates the array and writes the bytes straight into it
(``InTensor``), and raises DataLossError when the stream is short or long.
"""

from __future__ import annotations

import collections
import math
import os
import re
import sys
import threading
from typing import Any

import msgpack
import numpy as np

from .. import dtypes as _dt
from ..errors import DataLossError, ResourceExhaustedError
from ..registry import DEAD

#: default max size of one gRPC message each way (bytes): a request, a RunGraph feed or fetch
#: (sent whole), one message of a RecvTensor stream. Tensors between tasks travel in chunks, so
#: this bounds only what one task sends to a master in one piece (a 100 MB model's variables
#: fit); the HETBED_MAX_MESSAGE_BYTES environment variable or ``max_message_bytes=`` raise it.
MAX_MESSAGE_BYTES = 256 << 20
MAX_MESSAGE_ENV = "HETBED_MAX_MESSAGE_BYTES"


def message_limit(value: int | None = None) -> int:
    """``value``, else $HETBED_MAX_MESSAGE_BYTES, else ``MAX_MESSAGE_BYTES``."""
    if value is not None:
        return int(value)
    env = os.environ.get(MAX_MESSAGE_ENV)
    if not env:
        return MAX_MESSAGE_BYTES
    try:
        n = int(env)
    except ValueError:
        n = 0
    if n < 4096:
        raise ValueError(f"{MAX_MESSAGE_ENV}={env!r}: expected a whole number of bytes >= 4096")
    return n


#: default max size of one tensor received by RecvTensor (streamed in chunks, either protocol)
MAX_TENSOR_BYTES = 1 << 34
#: bytes per message of a RecvTensor stream over gRPC (measured best on loopback: 1 MiB)
CHUNK_BYTES = 1 << 20
#: a tensor up to this size travels inside the RecvTensor header message
INLINE_BYTES = 64 << 10

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


# ---- string tensors ------------------------------------------------------------------------
#: the dtype field of a string tensor: its data is the little-endian uint64 length of every
#: element (in C order), then the elements' bytes, concatenated
STRING_DTYPE = "string"


def pack_strings(arr: np.ndarray, where: str) -> bytes:
    """The wire bytes of an object array of bytes (see STRING_DTYPE); TypeError otherwise."""
    return _dt.pack_strings(arr, where)


def unpack_strings(data: Any, shape: list, where: str) -> np.ndarray:
    """The object array of bytes that ``pack_strings`` packed; WireError when inconsistent."""
    try:
        return _dt.unpack_strings(data, shape)
    except ValueError as e:
        raise WireError(f"{where}: {e}") from None


def _check_shape(shape: Any, where: str) -> list:
    if (
        not isinstance(shape, list)
        or len(shape) > 32
        or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)
    ):
        raise WireError(f"{where}: shape must be a list of at most 32 ints >= 0, got {shape!r:.60}")
    return shape


def _host_array(value: Any, where: str) -> tuple[Any, Any, Any, bool]:
    """(value on the host, as an array, its little-endian dtype, whether it came from a device);
    raises TypeError for values that cannot cross tasks."""
    get = getattr(value, "get", None)
    from_device = get is not None and not isinstance(value, (np.ndarray, np.generic, dict))
    if from_device:
        value = get()  # a cupy array: brought to the host, a fresh array already
    if not isinstance(value, (np.ndarray, np.generic, int, float, bool, complex)):
        raise TypeError(
            f"{where}: a {type(value).__name__} cannot cross tasks; only numpy values can "
            "(variable references stay on the task that owns the variable)"
        )
    arr = np.asarray(value)
    if arr.dtype.kind == "O":
        return value, arr, None, from_device  # a string tensor: see pack_strings
    if arr.dtype.kind not in "biufcSU":
        raise TypeError(f"{where}: numpy dtype {arr.dtype} cannot cross tasks")
    le = arr.dtype.newbyteorder("<") if arr.dtype.byteorder != "|" else arr.dtype
    return value, arr, le, from_device


def tensor_to_wire(value: Any, where: str = "tensor") -> dict:
    """The wire form of a numpy value (array or scalar); raises TypeError for anything else."""
    value, arr, le, _ = _host_array(value, where)
    if le is None:
        return {
            "dtype": STRING_DTYPE,
            "shape": list(arr.shape),
            "data": pack_strings(arr, where),
            "scalar": False,
        }
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
    if dt == STRING_DTYPE:
        data = obj.get("data")
        if not isinstance(data, bytes):
            raise WireError(f"{where}: data must be bytes, got {type(data).__name__}")
        return unpack_strings(data, _check_shape(obj.get("shape"), where), where)
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


# ---- streamed tensors (RecvTensor) ---------------------------------------------------------


class OutTensor:
    """A tensor ready to stream: its ``header`` (dtype, shape, nbytes, scalar) and ``payload``,
    a flat byte memoryview of a C-contiguous little-endian array (no copy of it is made to send).
    ``release()`` once it is sent returns a snapshot buffer to the pool for the next Send.
    """

    __slots__ = ("header", "payload", "array", "_pooled", "borrowing", "__weakref__")

    def __init__(self, header: dict, array: np.ndarray, pooled: np.ndarray | None = None):
        self.header = header
        self.array = array
        self.payload = memoryview(array.reshape(-1).view(np.uint8))
        self._pooled = pooled
        #: whether ``array`` is a variable's buffer lent to it (``VarHandle.lend``) until sent
        self.borrowing = False

    @property
    def nbytes(self) -> int:
        return self.header["nbytes"]

    def release(self) -> None:
        """The payload was sent (or will never be): recycle a pooled snapshot buffer, end the
        loan of a variable's buffer. The OutTensor must not be used afterwards."""
        self.borrowing = False
        buf, self._pooled = self._pooled, None
        if buf is not None:
            self.payload.release()
            self.array = None  # type: ignore[assignment]
            SNAPSHOTS.give(buf)


class _BufferPool:
    """Reusable byte buffers for Send snapshots of large tensors, by exact size (a variable is
    sent with the same size every step). A fresh buffer costs page faults that, on some virtual
    machines, cost more than the copy itself; a recycled one is already mapped. At most
    ``max_bytes`` are kept idle, the most recently returned first."""

    def __init__(self, max_bytes: int, min_bytes: int):
        self.max_bytes = max_bytes
        self.min_bytes = min_bytes
        self._lock = threading.Lock()
        self._free: collections.OrderedDict[int, np.ndarray] = collections.OrderedDict()
        self._idle = 0

    def take(self, nbytes: int) -> np.ndarray:
        if nbytes >= self.min_bytes:
            with self._lock:
                buf = self._free.pop(nbytes, None)
                if buf is not None:
                    self._idle -= nbytes
                    return buf
        return np.empty(nbytes, np.uint8)

    def give(self, buf: np.ndarray) -> None:
        n = buf.nbytes
        if n < self.min_bytes or n > self.max_bytes:
            return
        with self._lock:
            if n in self._free:  # one idle buffer per size
                return
            self._free[n] = buf
            self._idle += n
            while self._idle > self.max_bytes:
                _, old = self._free.popitem(last=False)
                self._idle -= old.nbytes


#: snapshot buffers of tensors of at least 1 MiB, at most 512 MiB of them kept idle
SNAPSHOTS = _BufferPool(512 << 20, 1 << 20)


def streamable(value: Any) -> bool:
    """Whether a fed or fetched ``value`` goes after its RunGraph message as a stream on the data
    channel (a numeric numpy array over ``INLINE_BYTES``) rather than inside it."""
    return (
        isinstance(value, np.ndarray)
        and value.nbytes > INLINE_BYTES
        and value.dtype.kind in "biufc"
    )


def out_tensor(
    value: Any, where: str = "tensor", copy: bool = True, lender: Any = None
) -> OutTensor:
    """``value`` (a numpy array or scalar, or a device array) as an OutTensor.

    With ``copy`` the payload is a private snapshot; without, it aliases ``value`` when that is
    already a C-contiguous little-endian array (pass ``copy=False`` only for a value nothing else
    can write to while it is being sent). With ``lender`` (the VarHandle whose buffer ``value``
    is or views), a value that would be copied as a snapshot is lent instead when it can be sent
    as it is (``VarHandle.lend``: an update meanwhile writes to a copy): no copy at all, and the
    receiver still sees the value as of this call. Raises TypeError for values that cannot cross
    tasks.

    (Copying a large snapshot in pieces while the first ones are already being sent was tried:
    on a 2-core machine it was slower, the transfer itself keeping both cores busy.)
    """
    if value is DEAD:  # an untaken branch of a cond: the receiver's side is dead too
        return OutTensor({**_DEAD_HEADER}, _NO_BYTES)
    value, arr, le, from_device = _host_array(value, where)
    if le is None:  # a string tensor: packed (a fresh buffer, so no snapshot is needed)
        packed = np.frombuffer(pack_strings(arr, where), dtype=np.uint8)
        header = {"dtype": STRING_DTYPE, "shape": list(arr.shape), "nbytes": packed.size}
        return OutTensor({**header, "scalar": False}, packed)
    if from_device:
        copy = False
    header = {
        "dtype": le.str,
        "shape": list(arr.shape),
        "nbytes": int(arr.nbytes),
        "scalar": isinstance(value, np.generic),
    }
    if arr.dtype == le and arr.flags.c_contiguous:
        if not (copy and isinstance(value, np.ndarray)):
            return OutTensor(
                header, arr
            )  # a fresh array (np.asarray of a scalar) or one nobody writes
        if lender is not None:
            out = OutTensor(header, arr)
            out.borrowing = True
            lender.lend(out)
            return out
    if arr.nbytes == 0:
        return OutTensor(header, np.empty(arr.shape, le))
    pooled = SNAPSHOTS.take(arr.nbytes)  # a snapshot, also the conversion to contiguous LE
    snap = pooled.view(le).reshape(arr.shape)
    np.copyto(snap, arr, casting="equiv")
    return OutTensor(header, snap, pooled)


class _RecvPool:
    """Receive buffers of large tensors, reused once nothing refers to them any more.

    A received tensor is a fresh array: for a large one the kernel maps and zeroes new pages as
    the bytes arrive (and unmaps them when it is freed), which costs a good part of a copy. The
    pool keeps the buffers it handed out; the array a receiver builds on one (and every view of
    that, however derived) holds a reference to it, so a buffer whose only references are the
    pool's is garbage to everyone else and is handed out again instead of a fresh one. Buffers of
    at least ``min_bytes``, at most ``max_bytes`` of them in all (in use or not); past that the
    pool forgets its buffers in use (they are freed as usual), then its oldest idle ones.
    """

    def __init__(self, max_bytes: int, min_bytes: int):
        self.max_bytes = max_bytes
        self.min_bytes = min_bytes
        self._lock = threading.Lock()
        self._bufs: list[np.ndarray] = []  # oldest first
        self._bytes = 0

    def take(self, nbytes: int) -> np.ndarray:
        """A flat uint8 buffer of ``nbytes`` that nothing else refers to."""
        if nbytes < self.min_bytes or nbytes > self.max_bytes:
            return np.empty(nbytes, np.uint8)
        with self._lock:
            bufs = self._bufs
            for i in range(len(bufs)):
                if bufs[i].nbytes == nbytes and _unreferenced(bufs, i):
                    buf = bufs.pop(i)
                    bufs.append(buf)  # the most recently used last
                    return buf
            if self._bytes + nbytes > self.max_bytes:
                self._make_room(nbytes)
            buf = np.empty(nbytes, np.uint8)
            self._bufs.append(buf)
            self._bytes += nbytes
            return buf

    def _make_room(self, nbytes: int) -> None:
        bufs = self._bufs
        keep = [bufs[i] for i in range(len(bufs)) if _unreferenced(bufs, i)]  # idle, oldest first
        while keep and sum(b.nbytes for b in keep) + nbytes > self.max_bytes:
            keep.pop(0)
        self._bufs = keep
        self._bytes = sum(b.nbytes for b in keep)


def _unreferenced(bufs: list, i: int) -> bool:
    """Whether ``bufs[i]`` has no reference but the list's."""
    return sys.getrefcount(bufs[i]) <= _LIST_REFS


def _list_refs() -> int:
    """The reference count ``_unreferenced`` sees for an object only a list holds (the list's
    and the call's own)."""
    probe = [np.empty(1)]
    return sys.getrefcount(probe[0])


_LIST_REFS = _list_refs()
#: receive buffers of tensors of at least 1 MiB, at most 512 MiB of them
RECEIVED = _RecvPool(512 << 20, 1 << 20)


#: the header of a dead tensor (ops/cond.py): no bytes follow
_DEAD_HEADER = {"dtype": "|b1", "shape": [0], "nbytes": 0, "scalar": False, "dead": True}
_NO_BYTES = np.zeros(0, np.bool_)


def _check_header(obj: Any, where: str) -> tuple[np.dtype, list, int]:
    if not isinstance(obj, dict):
        raise WireError(f"{where}: a tensor header is a map, got {type(obj).__name__}")
    dt = obj.get("dtype")
    if dt == STRING_DTYPE:  # its size is in the header: lengths, then bytes
        shape = _check_shape(obj.get("shape"), where)
        n = obj.get("nbytes")
        if not isinstance(n, int) or isinstance(n, bool) or n < 8 * math.prod(shape):
            raise WireError(f"{where}: a string tensor of shape {shape} cannot be {n!r:.30} bytes")
        return None, shape, n
    if not isinstance(dt, str) or not _DTYPE_RE.match(dt):
        raise WireError(f"{where}: unsupported dtype {dt!r:.60}")
    shape = _check_shape(obj.get("shape"), where)
    try:
        dtype = np.dtype(dt)
    except TypeError:
        raise WireError(f"{where}: unsupported dtype {dt!r}") from None
    return dtype, shape, math.prod(shape) * dtype.itemsize


class InTensor:
    """The receiving end of a streamed tensor: a preallocated array that chunks are written into.

    ``InTensor(header, where, max_bytes)`` validates the header (WireError when malformed,
    ResourceExhaustedError when over ``max_bytes``); ``view`` is the flat byte memoryview to
    fill (``recv_into`` it, or ``write`` chunks in order); ``value()`` checks every byte arrived
    (DataLossError otherwise) and returns the numpy value.
    """

    __slots__ = ("where", "nbytes", "filled", "view", "_array", "_scalar", "_dead", "_shape")

    def __init__(self, header: Any, where: str, max_bytes: int):
        self.where = where
        dtype, shape, n = _check_header(header, where)
        dts = dtype.str if dtype is not None else STRING_DTYPE
        dead = header.get("dead", False)
        if not isinstance(dead, bool) or (dead and n):
            raise WireError(f"{where}: 'dead' must be a bool, on an empty tensor, got {dead!r:.30}")
        self._dead = dead
        nbytes = header.get("nbytes")
        if nbytes != n or isinstance(nbytes, bool):
            raise WireError(
                f"{where}: header says {nbytes!r:.30} bytes but shape {shape} of {dts} holds {n}"
            )
        if n > max_bytes:
            raise ResourceExhaustedError(
                f"{where}: a tensor of {n} bytes (shape {shape}, {dts}) is over the "
                f"{max_bytes}-byte limit for one tensor"
            )
        self.nbytes = n
        self.filled = 0
        self._shape = shape if dtype is None else None  # a string tensor: unpacked at the end
        if dtype is None:  # a string tensor: unpacked into a fresh array at the end
            self._array = np.empty(n, np.uint8)
        else:
            self._array = RECEIVED.take(n).view(dtype).reshape(shape)
        self.view = memoryview(self._array.reshape(-1).view(np.uint8))
        self._scalar = bool(header.get("scalar")) and not shape

    def write(self, chunk: Any) -> None:
        """Append ``chunk`` (bytes-like); DataLossError when it runs past the header's size."""
        n = len(chunk)
        end = self.filled + n
        if end > self.nbytes:
            raise DataLossError(
                f"{self.where}: stream carries more than the {self.nbytes} bytes its header "
                f"announced ({end} so far)"
            )
        self.view[self.filled : end] = chunk
        self.filled = end

    def value(self) -> Any:
        if self.filled != self.nbytes:
            raise DataLossError(
                f"{self.where}: stream truncated after {self.filled} of {self.nbytes} bytes"
            )
        if self._dead:
            return DEAD
        arr = self._array
        if self._shape is not None:
            try:
                return unpack_strings(arr, self._shape, self.where)
            except WireError as e:
                raise DataLossError(str(e)) from None
        if not arr.dtype.isnative:
            arr = arr.astype(arr.dtype.newbyteorder("="))
        return arr[()] if self._scalar else arr
