"""Rendezvous: where a Send and its Recv meet, by key. One per step, so steps never mix."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from .errors import AbortedError


class Rendezvous:
    """The interface: ``send(key, value)`` and ``recv(key, done)``; ``done(value)`` or
    ``done(None, error)`` is called exactly once, possibly before ``recv`` returns."""

    def send(self, key: str, value: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} needs a send()")

    def recv(self, key: str, done: Callable) -> None:
        raise NotImplementedError(f"{type(self).__name__} needs a recv()")

    def abort(self, error: BaseException) -> None:
        """Fail every pending and future recv with ``error``."""

    def all_reduce(
        self,
        group: str,
        devices: Sequence[Any],
        nbytes: float,
        dtype: Any,
        dones: Sequence[Callable[[], None]],
    ) -> None:
        """Carry the traffic of the all-reduce ``group``: ``nbytes`` per participant of
        ``dtype`` among ``devices`` (rank order); call ``dones[rank]()`` once that participant
        holds the result. The values are the collective kernel's business; a rendezvous only
        says when. Here (in-process and real devices: the kernel has already reduced) at once;
        a simulated rendezvous sends the ring's chunks over its network."""
        for done in dones:
            done()


class LocalRendezvous(Rendezvous):
    """In-process hand-off: the value object itself is passed (no copy, no serialization)."""

    __slots__ = ("_values", "_waiters", "_lock", "_error")

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}
        self._waiters: dict[str, Callable] = {}
        self._lock = threading.Lock()
        self._error: BaseException | None = None

    def send(self, key: str, value: Any) -> None:
        with self._lock:
            if self._error is not None:
                raise self._error
            waiter = self._waiters.pop(key, None)
            if waiter is None:
                if key in self._values:
                    raise AbortedError(f"duplicate send for rendezvous key {key!r}")
                self._values[key] = value
                return
        waiter(value)

    def recv(self, key: str, done: Callable) -> None:
        with self._lock:
            if self._error is not None:
                err = self._error
            else:
                err = None
                if key in self._values:
                    value = self._values.pop(key)
                else:
                    if key in self._waiters:
                        raise AbortedError(f"duplicate recv for rendezvous key {key!r}")
                    self._waiters[key] = done
                    return
        if err is not None:
            done(None, err)
        else:
            done(value)

    def abort(self, error: BaseException) -> None:
        with self._lock:
            self._error = error
            waiters, self._waiters = self._waiters, {}
        for w in waiters.values():
            w(None, error)

    def pending(self) -> tuple[list[str], list[str]]:
        """Keys sent but not received, and keys awaited but not sent (for diagnostics)."""
        with self._lock:
            return list(self._values), list(self._waiters)
