"""How this process's C allocator treats the buffers kernels free (Linux with glibc only).

A training step allocates and frees the same large buffers every step (a weight gradient per time
step of an unrolled RNN: 35 arrays of 2 MB). glibc hands each buffer above its mmap threshold
(128 KiB at first) straight to the kernel and back, and trims the heap's freed top, so the next
step touches fresh pages again: one page fault per 4 KiB, which costs more than the matmul that
fills the buffer (an LSTM step: 138 ms with glibc's defaults, 73 ms keeping freed memory;
bench/control_flow.py). Like TensorFlow's and PyTorch's caching allocators, hetbed keeps freed
memory in the process: ``keep_freed_memory()`` raises the mmap threshold and the trim threshold
(``mallopt``), once, when the first session or server starts. The process then keeps its peak
memory until it exits. ``HETBED_MALLOC=system`` leaves glibc's defaults."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import threading

_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
_MMAP_THRESHOLD = 32 << 20  # glibc's largest (64-bit): buffers above it still come from mmap
_TRIM_THRESHOLD = 1 << 30  # freed memory kept at the heap's top before it is given back
_TOP_PAD = 16 << 20

_lock = threading.Lock()
_done: bool | None = None  # None: not tried; True: set; False: not possible or declined


def keep_freed_memory() -> bool:
    """Tune glibc's malloc to keep freed buffers (see the module docstring); True when it is
    set. Does nothing (False) off Linux, without glibc, or with ``HETBED_MALLOC=system``."""
    global _done
    with _lock:
        if _done is None:
            _done = _tune()
        return _done


def _tune() -> bool:
    choice = os.environ.get("HETBED_MALLOC", "keep").strip().lower()
    if choice not in ("keep", "system"):
        raise ValueError(f"HETBED_MALLOC={choice!r}: use 'keep' (default) or 'system'")
    if choice == "system" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(
        mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)
        and mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)
        and mallopt(_M_TOP_PAD, _TOP_PAD)
    )
