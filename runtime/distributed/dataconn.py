"""The data-channel connections of a ``WorkerClient`` (client.py), a mixin: an idle pooled
connection still open, else a new one to the task's data port (found by asking the task), the
handshake that proves the cluster's token, and why a task that hung up during it did so. It
uses the client's ``address``, ``task``, ``_token``, ``_lock``, ``_idle``, ``_closed``,
``_data_port``, ``_calls``, ``_auth`` and ``_discover``."""

from __future__ import annotations

import socket
import time

import grpc

from .. import errors as E
from ..errors import UnauthenticatedError, UnavailableError
from .cluster import split_address
from .datachannel import (
    _MAX_IDLE,
    HANDSHAKE_TIMEOUT_S,
    MAGIC,
    NONCE_BYTES,
    _idle_ok,
    _mac,
    recv_exact,
)
from .threads import _Transfer
from .wire import pack


class DataConnections:
    """Pooled, authenticated connections to one task's data channel (see the module)."""

    def _idle_conn(self) -> socket.socket | None:
        """An idle data connection still open, or None."""
        while True:
            with self._lock:
                sock = self._idle.pop() if self._idle else None
            if sock is None or _idle_ok(sock):
                return sock
            sock.close()  # closed by the task (it stopped or restarted)

    def _data_conn(self, key: str, deadline: float, xfer: _Transfer) -> socket.socket | None:
        """A connection to the task's data port: an idle one still open, else a new one; None
        when the task (restarted) has no data channel."""
        sock = self._idle_conn()
        if sock is not None:
            return sock
        port = self._discover(key, deadline, xfer)
        try:
            return self._connect(port, deadline, xfer) if port else None
        except ConnectionRefusedError:
            if xfer.cancelled:
                raise
        with self._lock:  # the task may have restarted on another port: ask it again
            if self._data_port == port:
                self._data_port = None
        port = self._discover(key, deadline, xfer)
        return self._connect(port, deadline, xfer) if port else None

    def _connect(self, port: int, deadline: float, xfer: _Transfer) -> socket.socket:
        host, _ = split_address(self.address)
        left = max(deadline - time.monotonic(), 0.001)
        sock = socket.create_connection((host, port), timeout=min(left, HANDSHAKE_TIMEOUT_S))
        xfer.attach(sock)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            deadline = min(deadline, time.monotonic() + HANDSHAKE_TIMEOUT_S)
            hello = recv_exact(sock, len(MAGIC) + NONCE_BYTES, deadline)
            if hello[: len(MAGIC)] != MAGIC:
                raise E.DataLossError(
                    f"{host}:{port} (data channel of {self.task}) is not a hetbed data channel"
                )
            sock.sendall(MAGIC + _mac(self._token, bytes(hello[len(MAGIC) :]), self.task))
            try:
                (n,) = recv_exact(sock, 1, deadline)
            except EOFError:
                raise self._hung_up(host, port) from None
            task = bytes(recv_exact(sock, n, deadline)).decode(errors="replace")
            if task != self.task and self.task.startswith("/job:"):
                # the port now belongs to another task (this one restarted elsewhere): ask again
                raise ConnectionRefusedError(f"data port {port} now serves {task}")
        except BaseException:
            sock.close()
            raise
        return sock

    def _hung_up(self, host: str, port: int) -> E.OpError:
        """Why the data channel hung up after the challenge: the task refuses the token (its gRPC
        service says so too), or it is going away (it does not answer)."""
        try:
            body = pack({})
            self._calls["GetStatus"](body, timeout=2.0, metadata=self._auth("GetStatus", body))
            code = grpc.StatusCode.OK
        except grpc.RpcError as e:
            code = e.code()
        if code == grpc.StatusCode.UNAUTHENTICATED:
            return UnauthenticatedError(
                f"RecvTensor from {self.task}: its data channel ({host}:{port}) hung up after "
                "the challenge: no or a wrong cluster token; pass the cluster's token "
                "(hb.Session(target, token=...) or the HETBED_CLUSTER_TOKEN environment variable)"
            )
        err = UnavailableError(
            f"RecvTensor from {self.task}: its data channel ({host}:{port}) hung up during the "
            f"handshake and the task {'answers' if code == grpc.StatusCode.OK else 'does not answer'}"
            f" over gRPC ({code.name}): it is stopping, restarting or over its connection cap"
        )
        err.grpc_code = grpc.StatusCode.UNAVAILABLE
        return err

    def _pool(self, sock: socket.socket) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < _MAX_IDLE:
                self._idle.append(sock)
                return
        sock.close()
