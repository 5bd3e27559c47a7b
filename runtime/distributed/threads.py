"""Threads and cancellation for ``WorkerClient``'s calls: a pool of daemon threads reused across
transfers, and the handle that cancels one transfer in flight."""

from __future__ import annotations

import queue
import socket
import threading
from collections.abc import Callable
from typing import Any

from ..threadname import name_this_thread
from .datachannel import _shutdown


class _Threads:
    """Daemon threads reused across transfers. A new one starts whenever none is idle: there is
    no cap, since a pending Recv may wait for a Send that depends on another pending Recv. Idle
    threads exit after a minute; daemon threads never hold up interpreter exit."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting for work and not yet claimed by a submit

    def submit(self, fn: Callable[[], None]) -> None:
        with self._lock:
            spawn = self._idle == 0
            if not spawn:
                self._idle -= 1
        self._queue.put(fn)
        if spawn:
            threading.Thread(target=self._loop, name="hetbed-recv", daemon=True).start()

    def _loop(self) -> None:
        name_this_thread("hetbed-recv")
        while True:
            try:
                fn = self._queue.get(timeout=60.0)
            except queue.Empty:
                with self._lock:
                    if self._idle > 0:  # nobody claimed this thread: leave
                        self._idle -= 1
                        return
                continue  # claimed: the work is on its way
            try:
                fn()
            except BaseException:  # noqa: BLE001, S110 - fn reports its own errors
                pass
            with self._lock:
                self._idle += 1


_THREADS = _Threads()


class _Transfer:
    """Cancellation of one RecvTensor in flight: cancels the gRPC call or shuts the socket."""

    __slots__ = ("cancelled", "_lock", "_handle")

    def __init__(self) -> None:
        self.cancelled = False
        self._lock = threading.Lock()
        self._handle: Any = None

    def attach(self, handle: Any) -> None:
        """Track ``handle`` (a gRPC call/future or a socket); cancel it now if already cancelled."""
        with self._lock:
            self._handle = handle
            if not self.cancelled:
                return
        self._stop(handle)

    def cancel(self) -> None:
        with self._lock:
            if self.cancelled:
                return
            self.cancelled = True
            handle = self._handle
        self._stop(handle)

    @staticmethod
    def _stop(handle: Any) -> None:
        if isinstance(handle, socket.socket):
            _shutdown(handle)
        elif handle is not None:
            handle.cancel()
