"""A strict, numpy-backed stand-in for cupy (test-only; see tests/fakecupy/README.md).

Arrays live on a device (the current one when made), count their bytes in that device's pool,
and are produced on a stream. Everything cupy refuses is refused here, and more:

* implicit conversion to numpy (``np.asarray(x)``, ``x.__array__()``) raises TypeError, as cupy;
* ``float(x)``/``int(x)``/``bool(x)`` on arrays of more than one element raise, as numpy/cupy;
* a numpy ndarray operand in an array operation raises TypeError, as cupy ("Unsupported type");
* an operation on an array of another device than the current one raises ValueError, as cupy
  without peer access ("Array device must be same as the current device");
* any numpy function (not ufunc) called on a device array raises TypeError (stricter than cupy,
  which dispatches those it implements): kernels must call ``ctx.xp``;
* an array used on a stream other than the one that produced it, before that stream was
  synchronised or an event after it waited on, raises RuntimeError (a race on a real GPU).
"""

from __future__ import annotations

import itertools
import os
import threading
import weakref
from typing import Any

import numpy as np

# ---------------------------------------------------------------------------------------------
# devices, pools, streams


class _State:
    def __init__(self) -> None:
        self.reset(int(os.environ.get("HETBED_FAKECUPY_GPUS", "2")))

    def reset(self, n: int, memory: int = 16 << 30, name: str = "Tesla V100-SXM2-16GB") -> None:
        self.n = n
        self.memory = memory
        self.name = name
        self.used = [0] * max(n, 1)
        self.tracked: dict[int, tuple[int, int]] = {}
        self.by_ptr: dict[int, Any] = {}
        self.lock = threading.Lock()


STATE = _State()


def reset(n: int = 2, memory: int = 16 << 30, name: str = "Tesla V100-SXM2-16GB") -> None:
    """Start over with ``n`` stand-in GPUs (live arrays keep their devices but stop counting)."""
    STATE.reset(n, memory, name)
    _null_streams.clear()
    _local.__dict__.clear()


_local = threading.local()
_ptrs = itertools.count(0x7F0000000000, 0x100000)


def current_device_id() -> int:
    return getattr(_local, "device", 0)


def _round(n: int) -> int:
    return (n + 511) // 512 * 512  # cupy's pool rounds allocations up to 512 bytes


def _root(a: np.ndarray) -> np.ndarray:
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _track(a: np.ndarray, dev: int) -> None:
    r = _root(a)
    key = id(r)
    with STATE.lock:
        if key in STATE.tracked:
            return
        size = _round(r.nbytes)
        STATE.tracked[key] = (size, dev)
        STATE.used[dev] += size
    weakref.finalize(r, _release, key)


def _release(key: int) -> None:
    with STATE.lock:
        size, dev = STATE.tracked.pop(key, (0, 0))
        STATE.used[dev] -= size


class Stream:
    """A CUDA stream. ``with s:`` makes it current on this thread for the current device."""

    def __init__(self, null: bool = False, non_blocking: bool = False, ptr: int | None = None):
        self.null = null
        self.non_blocking = non_blocking
        self.device_id = current_device_id()
        self.ptr = 0 if null else next(_ptrs)
        self.seq = 0  # operations enqueued
        self.synced = 0  # operations known complete

    def __enter__(self) -> Stream:
        stack = _stack()
        stack.append(_current_stream_obj())
        _set_stream(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _set_stream(_stack().pop())

    def use(self) -> Stream:
        _set_stream(self)
        return self

    def synchronize(self) -> None:
        self.synced = self.seq

    def record(self, event: Event | None = None) -> Event:
        event = event or Event()
        event.record(self)
        return event

    def wait_event(self, event: Event) -> None:
        if event.stream is not None and event.stream is not self:
            waited = getattr(self, "_waited", {})
            waited[id(event.stream)] = max(waited.get(id(event.stream), 0), event.seq)
            self._waited = waited

    def done_(self) -> bool:
        return True

    @property
    def done(self) -> bool:
        return True

    def _enqueue(self) -> int:
        self.seq += 1
        return self.seq

    def __repr__(self) -> str:
        return f"<fake Stream {self.ptr:#x} device={self.device_id}>"


_null_streams: dict[int, Stream] = {}


def _null(dev: int) -> Stream:
    s = _null_streams.get(dev)
    if s is None:
        s = _null_streams[dev] = Stream(null=True)
        s.device_id = dev
    return s


def _stack() -> list:
    st = getattr(_local, "streams", None)
    if st is None:
        st = _local.streams = []
    return st


def _current_stream_obj() -> Stream:
    per = getattr(_local, "current", {})
    return per.get(current_device_id()) or _null(current_device_id())


def _set_stream(s: Stream) -> None:
    per = getattr(_local, "current", None)
    if per is None:
        per = _local.current = {}
    per[s.device_id] = s


class Event:
    def __init__(self, block: bool = False, disable_timing: bool = False, interprocess=False):
        self.stream: Stream | None = None
        self.seq = 0
        self.t = 0.0

    def record(self, stream: Stream | None = None) -> None:
        import time

        self.stream = stream or _current_stream_obj()
        self.seq = self.stream.seq
        self.t = time.perf_counter()

    def synchronize(self) -> None:
        if self.stream is not None:
            self.stream.synced = max(self.stream.synced, self.seq)

    @property
    def done(self) -> bool:
        return True


def get_elapsed_time(start: Event, end: Event) -> float:
    return (end.t - start.t) * 1e3


def _complete(arr: ndarray, use: Stream) -> bool:
    s = arr._stream
    if s is None or s is use or arr._seq <= s.synced:
        return True
    if getattr(use, "_waited", {}).get(id(s), 0) >= arr._seq:
        return True
    # the legacy null stream orders itself with every blocking stream of its device
    if (s.null and not use.non_blocking) or (use.null and not s.non_blocking):
        return s.device_id == use.device_id
    return False


class Device:
    """``with Device(i):`` makes GPU i current on this thread."""

    def __init__(self, device: int | None = None):
        self.id = current_device_id() if device is None else int(device)
        if not 0 <= self.id < STATE.n:
            from .cuda.runtime import CUDARuntimeError

            raise CUDARuntimeError(f"cudaErrorInvalidDevice: invalid device ordinal {self.id}")
        self._prev: list[int] = []

    def __enter__(self) -> Device:
        self._prev.append(current_device_id())
        _local.device = self.id
        return self

    def __exit__(self, *exc: Any) -> None:
        _local.device = self._prev.pop()

    def use(self) -> None:
        _local.device = self.id

    def synchronize(self) -> None:
        for s in list(_all_streams(self.id)):
            s.synced = s.seq

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self) -> int:
        return self.id

    def __repr__(self) -> str:
        return f"<CUDA Device {self.id}>"


_streams = weakref.WeakSet()


def _all_streams(dev: int) -> list[Stream]:
    return [s for s in list(_streams) if s.device_id == dev] + [_null(dev)]


_orig_init = Stream.__init__


def _stream_init(self: Stream, *a: Any, **k: Any) -> None:
    _orig_init(self, *a, **k)
    _streams.add(self)
    if not self.null:
        _by_ptr[self.ptr] = weakref.ref(self)


_by_ptr: dict[int, Any] = {}


def stream_at(ptr: int) -> Stream:
    """The stream with handle ``ptr`` (0: the current device's legacy default stream)."""
    if ptr == 0:
        return _null(current_device_id())
    ref = _by_ptr.get(ptr)
    s = ref() if ref is not None else None
    if s is None:
        raise ValueError(f"no live stream at {ptr:#x}")
    return s


Stream.__init__ = _stream_init  # type: ignore[method-assign]


class MemoryPointer:
    def __init__(self, arr: ndarray):
        self.device_id = arr._dev
        self.ptr = _ptr_of(arr)

    @property
    def device(self) -> Device:
        return Device(self.device_id)


def _ptr_of(arr: ndarray) -> int:
    """A unique fake address for the array's buffer, resolvable by NCCL's stand-in."""
    p = getattr(arr, "_ptr", None)
    if p is None:
        p = arr._ptr = next(_ptrs)
        STATE.by_ptr[p] = weakref.ref(arr)
    return p


def array_at(ptr: int) -> ndarray:
    ref = STATE.by_ptr.get(ptr)
    a = ref() if ref is not None else None
    if a is None:
        raise ValueError(f"no live device buffer at {ptr:#x}")
    return a


class MemoryPool:
    """cupy's default pool; ``used_bytes`` is the current device's, as in cupy."""

    def used_bytes(self) -> int:
        return STATE.used[current_device_id()]

    def total_bytes(self) -> int:
        return self.used_bytes()

    def free_bytes(self) -> int:
        return 0

    def free_all_blocks(self, stream: Any = None) -> None:
        pass

    def set_limit(self, size: int = 0, fraction: float | None = None) -> None:
        pass

    def get_limit(self) -> int:
        return STATE.memory


_pool = MemoryPool()


def get_default_memory_pool() -> MemoryPool:
    return _pool


class PinnedMemoryPool:
    def free_all_blocks(self) -> None:
        pass


def get_default_pinned_memory_pool() -> PinnedMemoryPool:
    return PinnedMemoryPool()


# ---------------------------------------------------------------------------------------------
# arrays


class ndarray:  # noqa: N801 - cupy's name
    """A device array: a numpy buffer that numpy cannot see."""

    __slots__ = ("_a", "_dev", "_stream", "_seq", "_ptr", "__weakref__")
    __array_priority__ = 100

    def __init__(self, shape: Any, dtype: Any = float, memptr: Any = None, strides: Any = None):
        _init(self, np.empty(shape, dtype=dtype), current_device_id())

    # -- strictness ----------------------------------------------------------------------------
    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError(
            "Implicit conversion to a NumPy array is not allowed. "
            "Please use `.get()` to construct a NumPy array explicitly."
        )

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kw: Any) -> Any:
        # cupy runs numpy ufuncs on its arrays (np.float32(1) - x, np.exp(x)); numpy array
        # operands are refused there as in every cupy operation
        if method != "__call__":
            raise TypeError(f"numpy ufunc method {ufunc.__name__}.{method} on a device array")
        return _call(ufunc.__name__, *inputs, **kw)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if func.__name__ in ("shape", "ndim", "size") and not kwargs and len(args) == 1:
            return getattr(self, func.__name__)  # metadata, no data: cupy answers these too
        raise TypeError(
            f"numpy function {func.__name__} called on a device array (fake cupy is stricter "
            "than cupy here: kernels must call ctx.xp)"
        )

    def _scalar(self, cast: Any) -> Any:
        if self.size != 1:
            raise TypeError(
                f"only length-1 arrays can be converted to Python scalars ({self.shape})"
            )
        return cast(self.get().reshape(()))

    def __float__(self) -> float:
        return self._scalar(float)

    def __int__(self) -> int:
        return self._scalar(int)

    def __complex__(self) -> complex:
        return self._scalar(complex)

    def __index__(self) -> int:
        if self.ndim != 0 or self.dtype.kind not in "iu":
            raise TypeError("only integer scalar arrays can be converted to a scalar index")
        return int(self.get())

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ValueError("The truth value of an array with more than one element is ambiguous.")
        return bool(self.get().reshape(()))

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"fake_cupy.array({self._a!r}, device={self._dev})"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        raise TypeError("fake cupy arrays do not pickle (hetbed must not pickle)")

    # -- host transfers --------------------------------------------------------------------------
    def get(self, stream: Any = None, order: str = "C", out: Any = None, blocking: bool = True):
        # cupy switches to the array's device itself; the read is on that device's current stream
        if stream is None:
            per = getattr(_local, "current", {})
            stream = per.get(self._dev) or _null(self._dev)
        _check_use(self, stream, "get", same_device=False)
        r = np.array(self._a, copy=True, order=order)
        if out is not None:
            out[...] = r
            return out
        return r

    def set(self, arr: np.ndarray, stream: Any = None) -> None:
        self._a[...] = arr

    def tolist(self) -> list:
        return self.get().tolist()

    def item(self, *a: Any) -> Any:
        return self.get().item(*a)

    # -- attributes ------------------------------------------------------------------------------
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    itemsize = property(lambda self: self._a.itemsize)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: self._a.flags)
    base = property(lambda self: None)
    device = property(lambda self: Device(self._dev))
    data = property(lambda self: MemoryPointer(self))
    T = property(lambda self: _call("transpose", self))
    real = property(lambda self: _call("real", self))
    imag = property(lambda self: _call("imag", self))

    @shape.setter  # type: ignore[no-redef]
    def shape(self, v: Any) -> None:
        self._a.shape = v

    @property
    def __cuda_array_interface__(self) -> dict:
        return {
            "shape": self.shape,
            "typestr": self.dtype.str,
            "data": (_ptr_of(self), False),
            "version": 3,
        }

    def __getitem__(self, idx: Any) -> Any:
        _check_use(self, _current_stream_obj(), "getitem")
        r = self._a[_index(idx)]
        if isinstance(r, np.ndarray) and _root(r) is _root(self._a):
            out = ndarray.__new__(ndarray)  # a view: same buffer, same device, same producer
            out._a, out._dev, out._ptr = r, self._dev, None
            out._stream, out._seq = self._stream, self._seq
            return out
        return _wrap(r if isinstance(r, np.ndarray) else np.asarray(r), current_device_id())

    def __setitem__(self, idx: Any, value: Any) -> None:
        dev = current_device_id()
        _check_use(self, _current_stream_obj(), "setitem")
        if isinstance(value, ndarray):
            _check_use(value, _current_stream_obj(), "setitem")
            value = value._a
        self._a[_index(idx)] = value
        self._seq = _current_stream_obj()._enqueue()
        self._stream = _current_stream_obj()
        del dev

    def __deepcopy__(self, memo: Any) -> ndarray:
        return self.copy()

    def __copy__(self) -> ndarray:
        return self.copy()

    def copy(self, order: str = "C") -> ndarray:
        """A copy on the *current* device (cupy's documented behaviour)."""
        _check_use(self, _current_stream_obj(), "copy", same_device=False)
        out = ndarray.__new__(ndarray)
        _init(out, np.array(self._a, order=order, copy=True), current_device_id())
        return out


def _init(arr: ndarray, a: np.ndarray, dev: int) -> None:
    arr._a = a
    arr._dev = dev
    arr._ptr = None
    s = _current_stream_obj()
    arr._stream = s
    arr._seq = s._enqueue()
    _track(a, dev)


def _wrap(a: Any, dev: int) -> Any:
    if isinstance(a, np.ndarray):
        out = ndarray.__new__(ndarray)
        _init(out, a, dev)
        return out
    if isinstance(a, np.generic):  # reductions give 0-d device arrays in cupy
        out = ndarray.__new__(ndarray)
        _init(out, np.asarray(a), dev)
        return out
    if isinstance(a, tuple):
        return tuple(_wrap(x, dev) for x in a)
    if isinstance(a, list):
        return [_wrap(x, dev) for x in a]
    return a


def _check_use(arr: ndarray, stream: Stream, what: str, same_device: bool = True) -> None:
    dev = current_device_id()
    if same_device and arr._dev != dev:
        raise ValueError(
            f"Array device must be same as the current device: array device = {arr._dev} "
            f"while current = {dev} (in {what})"
        )
    if not _complete(arr, stream):
        raise RuntimeError(
            f"stream race: {what} reads an array produced on {arr._stream} before that stream "
            f"was synchronised or waited on (using {stream})"
        )


def _unwrap(x: Any, what: str, allow_host: bool = False) -> Any:
    if isinstance(x, ndarray):
        _check_use(x, _current_stream_obj(), what)
        return x._a
    if isinstance(x, np.ndarray) and not allow_host:
        raise TypeError(f"Unsupported type {type(x)} (a numpy array passed to cupy.{what})")
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrap(v, what, allow_host) for v in x)
    return x


def _index(idx: Any) -> Any:
    """Indices may be device arrays (same device) or host ints/slices/lists/numpy arrays."""
    if isinstance(idx, tuple):
        return tuple(_index(i) for i in idx)
    if isinstance(idx, ndarray):
        return _unwrap(idx, "indexing")
    return idx


def _call(name: str, *args: Any, **kw: Any) -> Any:
    dev = current_device_id()
    a = _unwrap(args, name)
    k = {key: _unwrap(v, name) for key, v in kw.items() if key != "out"}
    if name in ("real", "imag"):
        return _wrap(np.asarray(getattr(a[0], name)), dev)
    fn: Any = np
    for part in name.split("."):
        fn = getattr(fn, part)
    out = kw.get("out")
    if out is not None:
        if not isinstance(out, ndarray):
            raise TypeError(f"cupy.{name}: out must be a cupy array, got {type(out).__name__}")
        _check_use(out, _current_stream_obj(), name)
        k["out"] = out._a
        fn(*a, **k)
        out._seq = _current_stream_obj()._enqueue()
        out._stream = _current_stream_obj()
        return out
    return _wrap(fn(*a, **k), dev)


def _method(name: str):
    def m(self: ndarray, *args: Any, **kw: Any) -> Any:
        dev = current_device_id()
        _check_use(self, _current_stream_obj(), f"ndarray.{name}")
        a = _unwrap(args, f"ndarray.{name}")
        k = {key: _unwrap(v, f"ndarray.{name}") for key, v in kw.items()}
        r = getattr(self._a, name)(*a, **k)
        if r is None:  # in-place (fill, sort, ...)
            self._seq = _current_stream_obj()._enqueue()
            self._stream = _current_stream_obj()
            return None
        if isinstance(r, np.ndarray) and _root(r) is _root(self._a):
            out = ndarray.__new__(ndarray)  # a view: same buffer, same device
            out._a, out._dev, out._ptr = r, self._dev, None
            out._stream, out._seq = self._stream, self._seq
            return out
        return _wrap(r if isinstance(r, np.ndarray) else np.asarray(r), dev)

    m.__name__ = name
    return m


for _n in (
    "astype reshape transpose sum mean max min argmax argmin prod std var all any cumsum "
    "cumprod ravel flatten squeeze fill view clip dot take repeat swapaxes conj nonzero "
    "argsort sort round diagonal trace"
).split():
    setattr(ndarray, _n, _method(_n))


def _binary(name: str, reflected: bool = False):
    def op(self: ndarray, other: Any) -> Any:
        if isinstance(other, np.ndarray):
            raise TypeError(f"Unsupported type {type(other)} (numpy array operand of {name})")
        if not isinstance(other, (ndarray, int, float, complex, bool, np.generic)):
            return NotImplemented
        return _call(name, other, self) if reflected else _call(name, self, other)

    return op


_BINARY = {
    "add": "add",
    "sub": "subtract",
    "mul": "multiply",
    "truediv": "true_divide",
    "floordiv": "floor_divide",
    "mod": "remainder",
    "pow": "power",
    "matmul": "matmul",
    "and": "bitwise_and",
    "or": "bitwise_or",
    "xor": "bitwise_xor",
    "lshift": "left_shift",
    "rshift": "right_shift",
}
for _k, _f in _BINARY.items():
    setattr(ndarray, f"__{_k}__", _binary(_f))
    setattr(ndarray, f"__r{_k}__", _binary(_f, reflected=True))

    def _inplace(self: ndarray, other: Any, _f: str = _f) -> ndarray:
        if isinstance(other, np.ndarray):
            raise TypeError(f"Unsupported type {type(other)} (numpy array operand of {_f})")
        return _call(_f, self, other, out=self)

    setattr(ndarray, f"__i{_k}__", _inplace)
for _k, _f in {
    "lt": "less",
    "le": "less_equal",
    "gt": "greater",
    "ge": "greater_equal",
    "eq": "equal",
    "ne": "not_equal",
}.items():
    setattr(ndarray, f"__{_k}__", _binary(_f))
ndarray.__hash__ = None  # type: ignore[assignment]
for _k, _f in {"neg": "negative", "pos": "positive", "abs": "absolute", "invert": "invert"}.items():
    setattr(ndarray, f"__{_k}__", lambda self, _f=_f: _call(_f, self))


# ---------------------------------------------------------------------------------------------
# module-level functions


def asarray(a: Any, dtype: Any = None, order: Any = None) -> ndarray:
    """Host data is copied to the current device; a device array is returned as it is (cupy does
    not move it between devices: use ``copy()`` under the target device)."""
    if isinstance(a, ndarray):
        if dtype is None or np.dtype(dtype) == a.dtype:
            return a
        return a.astype(dtype)
    if isinstance(a, (list, tuple)) and any(isinstance(v, ndarray) for v in a):
        return _call("stack", list(a)).astype(dtype) if dtype is not None else _call("stack", a)
    return _wrap(np.array(a, dtype=dtype, order=order or "K", copy=True), current_device_id())


def array(a: Any, dtype: Any = None, copy: bool = True, order: str = "K", ndmin: int = 0):
    if isinstance(a, ndarray):
        r = a.copy() if copy else a
        return r.astype(dtype) if dtype is not None else r
    return _wrap(np.array(a, dtype=dtype, order=order, ndmin=ndmin), current_device_id())


def asnumpy(a: Any, stream: Any = None, order: str = "C", out: Any = None) -> np.ndarray:
    if isinstance(a, ndarray):
        return a.get(stream=stream, order=order, out=out)
    return np.asarray(a, order=order)


def ascontiguousarray(a: Any, dtype: Any = None) -> ndarray:
    if not isinstance(a, ndarray):
        raise TypeError(f"Unsupported type {type(a)} (cupy.ascontiguousarray needs a cupy array)")
    return _call("ascontiguousarray", a, dtype=dtype)


def get_array_module(*args: Any) -> Any:
    import cupy

    return cupy if any(isinstance(a, ndarray) for a in args) else np


def _function(name: str):
    def f(*args: Any, **kw: Any) -> Any:
        return _call(name, *args, **kw)

    f.__name__ = name
    return f
