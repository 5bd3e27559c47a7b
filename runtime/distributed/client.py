"""``WorkerClient``: calls one task's worker service over gRPC and fetches its tensors over the
TCP data channel or a gRPC stream (``rpc.py`` describes both); its data-channel connections
are dataconn.py's ``DataConnections``."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import grpc

from .. import errors as E
from ..errors import InternalError, UnauthenticatedError, UnavailableError
from .cluster import split_address
from .datachannel import (
    HANDSHAKE_TIMEOUT_S,
    _frame,
    _recv_frame,
    read_stream,
    recv_into_all,
    send_all,
)
from .dataconn import DataConnections
from .rpc import _FROM_CODE, SERVICE, TOKEN_KEY, call_auth, channel_options
from .threads import _THREADS, _Transfer
from .wire import (
    MAX_MESSAGE_ENV,
    MAX_TENSOR_BYTES,
    InTensor,
    OutTensor,
    WireError,
    message_limit,
    pack,
    unpack,
)


class PendingCall:
    """A control call sent over a data connection whose reply has not been read yet
    (``WorkerClient.start_call``): ``fileno()`` to wait for it with a selector, ``finish()`` for
    the reply map (raises the call's OpError), ``cancel()`` to drop it."""

    __slots__ = ("client", "name", "sock", "deadline", "xfer", "released")

    def __init__(
        self, client: WorkerClient, name: str, sock: socket.socket, deadline: float | None, xfer
    ):
        self.client = client
        self.name = name
        self.sock = sock
        self.deadline = deadline  # time.monotonic() by which the reply must have come
        self.xfer = xfer
        self.released = False  # the connection went back to the pool: no longer this call's

    def fileno(self) -> int:
        return self.sock.fileno()

    def finish(self) -> dict:
        return self.client._finish_tcp(self)

    def release(self) -> None:
        """The reply was read: the connection goes back to the client's pool."""
        self.released = True
        self.xfer.attach(None)
        self.client._pool(self.sock)

    def drop(self) -> None:
        """The reply was read and the task hangs up after it (``datachannel._error_frame``'s
        ``closing``): the connection is closed, not pooled."""
        self.released = True
        self.xfer.attach(None)
        self.sock.close()

    def cancel(self) -> None:
        """Drop the call if it is still in flight: its connection is closed (the task aborts the
        step it runs). A no-op once its reply was read."""
        if self.released:
            return
        self.xfer.cancel()
        self.sock.close()


class WorkerClient(DataConnections):
    """Calls one task's worker service; raises hetbed errors (OpError subclasses) on failure."""

    def __init__(
        self,
        address: str,
        task: str = "",
        token: str | None = None,
        max_message_bytes: int | None = None,
        max_tensor_bytes: int = MAX_TENSOR_BYTES,
    ):
        self.address = address
        self.task = task or address
        self.max_tensor_bytes = int(max_tensor_bytes)
        self._token = token.encode() if token else None
        self.max_message_bytes = message_limit(max_message_bytes)
        self._channel = grpc.insecure_channel(
            address, options=channel_options(self.max_message_bytes)
        )
        self._calls = {
            name: self._channel.unary_unary(
                f"/{SERVICE}/{name}", request_serializer=None, response_deserializer=None
            )
            for name in ("GetStatus", "RegisterGraph", "DeregisterGraph", "RunGraph", "CleanupStep")
        }
        self._stream = self._channel.unary_stream(
            f"/{SERVICE}/RecvTensor", request_serializer=None, response_deserializer=None
        )
        self._lock = threading.Lock()
        self._data_port: int | None = None  # None: not asked yet; 0: the task has no data channel
        self._idle: list[socket.socket] = []
        self._closed = False

    def _auth(self, name: str, body: bytes) -> tuple:
        """The call's metadata: its authenticator (rpc.call_auth) when there is a token; the
        token itself is never sent."""
        if self._token is None:
            return ()
        task = self.task if self.task.startswith("/job:") else ""  # ("": not known yet)
        return ((TOKEN_KEY, call_auth(self._token, name, task, body)),)

    def call(self, name: str, req: dict, timeout: float | None = None) -> dict:
        body = pack(req)
        try:
            reply = self._calls[name](body, timeout=timeout, metadata=self._auth(name, body))
        except grpc.RpcError as e:
            raise self.error(name, e) from None
        out = unpack(reply, f"{name} reply")
        if name == "GetStatus":
            port = out.get("data_port") or 0
            if isinstance(port, int) and not isinstance(port, bool) and 0 <= port < 65536:
                with self._lock:
                    self._data_port = port
        return out

    def call_async(
        self,
        name: str,
        req: dict,
        timeout: float | None,
        callback: Callable,
        wait_for_ready: bool | None = None,
    ) -> Callable[[], None]:
        """Start ``name``; ``callback(reply_dict)`` or ``callback(None, error)`` once. Returns a
        function that cancels the call.

        RunGraph and CleanupStep travel over the task's data channel when it has one (a round
        trip there costs a fraction of a gRPC call's), else, or when it cannot be reached, over
        gRPC."""
        if name in _CONTROL and self._data_port and not wait_for_ready:
            xfer = _Transfer()
            _THREADS.submit(lambda: self._call_tcp(name, req, timeout, callback, xfer))
            return xfer.cancel
        return self._call_grpc_async(name, req, timeout, callback, wait_for_ready)

    def _call_grpc_async(
        self,
        name: str,
        req: dict,
        timeout: float | None,
        callback: Callable,
        wait_for_ready: bool | None = None,
    ) -> Callable[[], None]:
        body = pack(req)
        fut = self._calls[name].future(
            body, timeout=timeout, metadata=self._auth(name, body), wait_for_ready=wait_for_ready
        )

        def finished(f: Any) -> None:
            try:
                reply = unpack(f.result(), f"{name} reply")
            except grpc.RpcError as e:
                callback(None, self.error(name, e))
            except grpc.FutureCancelledError:
                callback(None, E.AbortedError(f"{name} to {self.task} was cancelled"))
            except Exception as e:  # noqa: BLE001 - a malformed reply
                callback(None, e)
            else:
                callback(reply)

        fut.add_done_callback(finished)
        return fut.cancel

    def start_call(self, name: str, req: dict, timeout: float | None) -> PendingCall | None:
        """Send the control call ``name`` (RunGraph, CleanupStep) over the task's data channel on
        this thread, without waiting for its reply: ``PendingCall.finish()`` reads it. None when
        the task has no data channel or it cannot be reached (use ``call_async``, which goes over
        gRPC then). Raises the call's OpError when it fails before anything is sent (the task
        refuses the token, the request is over the message limit)."""
        if name not in _CONTROL or not self._data_port:
            return None
        if name == "RunGraph":  # large fetches may come as streams after the reply
            req = {**req, "stream_fetches": True}
        return self._send_tcp(name, req, timeout, _Transfer())

    def _call_tcp(
        self, name: str, req: dict, timeout: float | None, callback: Callable, xfer: _Transfer
    ) -> None:
        """``name`` over the data channel (on a pooled thread); falls back to gRPC when no
        connection can be made before anything is sent."""
        start = time.monotonic()
        try:
            pending = self._send_tcp(name, req, timeout, xfer)
            if pending is not None:
                reply = pending.finish()
        except E.OpError as e:
            callback(None, e)
            return
        if pending is None:
            left = None if timeout is None else max(timeout - (time.monotonic() - start), 0.001)
            self._call_grpc_async(name, req, left, callback)
            return
        callback(reply)

    def _send_tcp(
        self, name: str, req: dict, timeout: float | None, xfer: _Transfer
    ) -> PendingCall | None:
        """The request of ``name`` sent over a data connection; None when no connection can be
        made (nothing was sent: the caller may use gRPC)."""
        start = time.monotonic()
        sock = self._control_conn(xfer)  # raises when the task refuses the token
        if sock is None:
            if xfer.cancelled:
                raise E.AbortedError(f"{name} to {self.task} was cancelled")
            return None
        xfer.attach(sock)
        deadline = None if timeout is None else start + timeout
        streams = []  # large feeds: their bytes follow the request
        feeds = req.get("feeds")
        if isinstance(feeds, dict) and any(isinstance(v, OutTensor) for v in feeds.values()):
            feeds = dict(feeds)
            for k, v in feeds.items():
                if isinstance(v, OutTensor):
                    feeds[k] = {"stream": v.header}
                    streams.append(v.payload)
            req = {**req, "feeds": feeds}
        try:
            data = _frame({"method": name, **req})
            if len(data) > self.max_message_bytes:
                sock.settimeout(0.0)
                xfer.attach(None)  # back to the pool: a later cancel must not reach it
                self._pool(sock)
                # gRPC's own words, so that the error reads the same whichever way the call goes
                why = f"Sent message larger than max ({len(data)} vs. {self.max_message_bytes})"
                code = grpc.StatusCode.RESOURCE_EXHAUSTED
                raise self._coded_error(name, code, why, self.address)
            sock.settimeout(None if deadline is None else max(deadline - time.monotonic(), 0.001))
            try:
                if streams:
                    left = 3600.0 if deadline is None else max(deadline - time.monotonic(), 0.001)
                    send_all(sock, [data, *streams], left)
                else:
                    sock.sendall(data)
            except (BrokenPipeError, ConnectionResetError):
                # the task refused the request part way (over its limit) and hung up after
                # saying why: read that reply rather than report a lost connection
                deadline = time.monotonic() + 2.0
        except E.OpError:
            raise
        except BaseException as e:  # noqa: BLE001 - the call was in flight: no retry
            sock.close()
            raise self._control_error(name, e, xfer) from None
        return PendingCall(self, name, sock, deadline, xfer)

    def _finish_tcp(self, call: PendingCall) -> dict:
        """The reply of a control call sent by ``_send_tcp``; raises its OpError."""
        name, sock = call.name, call.sock
        try:
            if call.deadline is not None:
                sock.settimeout(max(call.deadline - time.monotonic(), 0.001))
            else:
                sock.settimeout(None)
            reply = _recv_frame(sock, f"{name} reply", max(self.max_message_bytes, 1 << 16))
        except BaseException as e:  # noqa: BLE001 - the call was in flight: no retry
            sock.close()
            raise self._control_error(name, e, call.xfer) from None
        if reply.get("ok") is not True:
            code = reply.get("code")
            if not isinstance(code, str) or code not in grpc.StatusCode.__members__:
                sock.close()
                raise E.DataLossError(f"{name} reply of {self.task}: malformed {reply!r:.200}")
            if reply.get("closing") is True:  # the task hangs up after saying why
                call.drop()
            else:
                call.release()
            details = str(reply.get("message", ""))[:4000]
            raise self._coded_error(name, grpc.StatusCode[code], details, self.address)
        try:
            self._read_streams(sock, reply, name, call.deadline)
        except BaseException as e:  # noqa: BLE001 - mid-reply: the connection is out of step
            sock.close()
            if isinstance(e, WireError):
                e = E.DataLossError(f"{name} reply of {self.task}: malformed stream: {e}")
            raise self._control_error(name, e, call.xfer) from None
        call.release()
        del reply["ok"]
        return reply

    def _read_streams(
        self, sock: socket.socket, reply: dict, name: str, deadline: float | None
    ) -> None:
        """Replace each ``{"stream": header}`` fetch of a RunGraph reply by its array, read from
        ``sock`` in order (the bytes follow the reply: ``grpc_server.run_graph_request``)."""
        fetches = reply.get("fetches")
        if not isinstance(fetches, list):
            return
        for i, f in enumerate(fetches):
            if isinstance(f, dict) and "stream" in f:
                where = f"{name} fetch {i}"
                fetches[i] = read_stream(sock, f["stream"], where, self.max_tensor_bytes, deadline)

    def _control_error(self, name: str, e: BaseException, xfer: _Transfer) -> E.OpError:
        """A control call's failure on the data channel, as gRPC would have reported it."""
        if xfer.cancelled:
            return E.AbortedError(f"{name} to {self.task} was cancelled")
        if isinstance(e, E.OpError):
            return e
        if isinstance(e, (TimeoutError, socket.timeout)):
            code, why = grpc.StatusCode.DEADLINE_EXCEEDED, "deadline exceeded"
        else:
            code, why = grpc.StatusCode.UNAVAILABLE, f"connection lost ({type(e).__name__}: {e})"
        return self._coded_error(name, code, why, self.address)

    def _control_conn(self, xfer: _Transfer) -> socket.socket | None:
        """A data connection for a control call: an idle one, else a new one; None when the
        data port cannot be reached (the task is down or restarted elsewhere: the port is
        forgotten until the next GetStatus says it again)."""
        sock = self._idle_conn()
        if sock is not None:
            return sock
        port = self._data_port
        if not port:
            return None
        try:
            return self._connect(port, time.monotonic() + HANDSHAKE_TIMEOUT_S, xfer)
        except (OSError, EOFError):
            with self._lock:
                if self._data_port == port:
                    self._data_port = None
            return None

    def error(self, name: str, e: grpc.RpcError) -> E.OpError:
        code = e.code() if hasattr(e, "code") else grpc.StatusCode.UNKNOWN
        details = e.details() if hasattr(e, "details") else str(e)
        return self._coded_error(name, code, details, self.address)

    def _coded_error(self, name: str, code: grpc.StatusCode, details: str, where: str) -> E.OpError:
        cls = _FROM_CODE.get(code, InternalError)
        msg = f"{name} on {self.task} ({where}) failed with {code.name}: {details}"
        if cls is UnauthenticatedError and "clock" not in details:  # (not a clock's fault)
            msg += (
                "; pass the cluster's token (hb.Session(target, token=...) or the "
                "HETBED_CLUSTER_TOKEN environment variable)"
            )
        elif code == grpc.StatusCode.RESOURCE_EXHAUSTED and "message larger than max" in details:
            msg += (
                f"; one gRPC message is limited to {self.max_message_bytes} bytes (this side; "
                f"the server has its own): raise it with {MAX_MESSAGE_ENV}=<bytes> in the "
                "environment of every task and of the master, or max_message_bytes= of "
                "hb.train.Server"
            )
        elif cls is UnavailableError:
            msg += "; is the server for this task running?"
        err = cls(msg)
        err.grpc_code = code
        return err

    # ---- RecvTensor --------------------------------------------------------------------------
    def recv_tensor_async(
        self, step_id: int, key: str, timeout_s: float, callback: Callable
    ) -> Callable[[], None]:
        """Fetch the tensor the task sent under ``key`` in ``step_id`` (on a pooled thread);
        ``callback(value)`` or ``callback(None, error)`` once. Returns a function that cancels."""
        xfer = _Transfer()
        # the request goes out from this thread on an idle connection (nothing to set up): the
        # pooled thread that reads the reply wakes while the task answers, not before it asks
        early = self._send_early(step_id, key, timeout_s, xfer)

        def run() -> None:
            try:
                if early is not None:
                    value = self._recv_tcp(*early, xfer)
                else:
                    value = self.recv_tensor(step_id, key, timeout_s, xfer)
            except BaseException as e:  # noqa: BLE001 - reported through the callback
                err = e
                if xfer.cancelled:
                    err = E.AbortedError(f"RecvTensor {key!r} from {self.task} was cancelled")
                callback(None, err)
                return
            callback(value)

        _THREADS.submit(run)
        return xfer.cancel

    def recv_tensor(
        self, step_id: int, key: str, timeout_s: float, xfer: _Transfer | None = None
    ) -> Any:
        """The tensor the task sent under ``key`` in ``step_id``, over the data channel when the
        task advertises one, else as a gRPC stream. Blocks at most about ``timeout_s``."""
        xfer = xfer or _Transfer()
        deadline = time.monotonic() + timeout_s
        req = {"step_id": step_id, "key": key}
        port = self._discover(key, deadline, xfer)
        if port:
            value = self._recv_tcp(req, deadline, None, xfer)
            if value is not _NO_DATA_CHANNEL:
                return value
        return self._recv_grpc(req, deadline, xfer)

    def _where(self, key: str) -> str:
        return f"RecvTensor {key!r} from {self.task}"

    def _discover(self, key: str, deadline: float, xfer: _Transfer) -> int:
        """The task's data port (0: none), from its GetStatus reply (asked once). Waits for a
        task that is not up (starting, restarting) at most PEER_WAIT_S, then raises
        UnavailableError naming it; a task that answers is waited for until ``deadline``."""
        port = self._data_port
        if port is not None:
            return port
        left = max(deadline - time.monotonic(), 0.001)
        body = pack({})
        fut = self._calls["GetStatus"].future(
            body,
            timeout=min(left, PEER_WAIT_S),
            metadata=self._auth("GetStatus", body),
            wait_for_ready=True,
        )
        xfer.attach(fut)
        try:
            reply = unpack(fut.result(), "GetStatus reply")
        except grpc.RpcError as e:  # named for the Recv that waited, not for GetStatus
            if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED and left > PEER_WAIT_S:
                raise self._peer_down(key) from None
            raise self.error(f"RecvTensor {key!r} (GetStatus for the data port)", e) from None
        port = reply.get("data_port") or 0
        if not isinstance(port, int) or not 0 <= port < 65536:
            raise E.DataLossError(f"GetStatus reply of {self.task}: bad data_port {port!r:.30}")
        self._data_port = port
        return port

    def _peer_down(self, key: str) -> E.OpError:
        err = UnavailableError(
            f"{self._where(key)} ({self.address}): the task did not answer for {PEER_WAIT_S:g} s "
            "(its port refuses connections or does not accept them); is it running?"
        )
        err.grpc_code = grpc.StatusCode.UNAVAILABLE
        return err

    # -- over gRPC ----------------------------------------------------------------------------
    def _recv_grpc(self, req: dict, deadline: float, xfer: _Transfer) -> Any:
        try:
            return self._recv_stream(req, deadline, xfer, ready=False)
        except _NotReady:
            pass
        # The channel is not connected (the task is down, starting or restarting, or this
        # channel backs off from a dead incarnation): wait for it at most PEER_WAIT_S.
        left = deadline - time.monotonic()
        try:
            grpc.channel_ready_future(self._channel).result(timeout=max(min(left, PEER_WAIT_S), 0))
        except grpc.FutureTimeoutError:
            if left > PEER_WAIT_S and not xfer.cancelled:
                raise self._peer_down(req["key"]) from None
        return self._recv_stream(req, deadline, xfer, ready=True)

    def _recv_stream(self, req: dict, deadline: float, xfer: _Transfer, ready: bool) -> Any:
        """One RecvTensor stream; raises _NotReady when, without ``ready`` (gRPC's
        wait_for_ready), the channel fails it before any message arrived."""
        where = self._where(req["key"])
        body = pack(req)
        call = self._stream(
            body,
            timeout=max(deadline - time.monotonic(), 0.001),
            metadata=self._auth("RecvTensor", body),
            wait_for_ready=ready,
        )
        xfer.attach(call)
        first = None
        try:
            chunks = iter(call)
            first = next(chunks, None)
            if first is None:
                raise E.DataLossError(f"{where}: the stream ended without a header")
            try:
                header = unpack(first, f"{where} header")
                incoming = InTensor(header, where, self.max_tensor_bytes)
                data = header.get("data")
                if data is not None:
                    if not isinstance(data, bytes):
                        raise WireError(f"{where}: inline data must be bytes")
                    incoming.write(data)
            except WireError as e:
                raise E.DataLossError(f"malformed stream: {e}") from None
            for chunk in chunks:
                incoming.write(chunk)
            return incoming.value()
        except grpc.RpcError as e:
            if (
                not ready
                and first is None
                and e.code() == grpc.StatusCode.UNAVAILABLE
                and not xfer.cancelled
            ):
                raise _NotReady from None
            raise self.error(f"RecvTensor {req['key']!r}", e) from None
        finally:
            call.cancel()  # a no-op once the stream ended; stops it after a local error

    # -- over the data channel ------------------------------------------------------------------
    def _send_early(
        self, step_id: int, key: str, timeout_s: float, xfer: _Transfer
    ) -> tuple[dict, float, socket.socket | BaseException] | None:
        """The RecvTensor request sent on an idle data connection, if there is one: (request,
        deadline, the connection or the error sending failed with); None when nothing was sent."""
        if not self._data_port:
            return None
        sock = self._idle_conn()
        if sock is None:
            return None
        deadline = time.monotonic() + timeout_s
        req = {"step_id": step_id, "key": key}
        xfer.attach(sock)
        try:
            self._send_request(sock, req, deadline)
        except BaseException as e:  # noqa: BLE001 - reported by the thread reading the reply
            sock.close()
            return req, deadline, e
        return req, deadline, sock

    @staticmethod
    def _send_request(sock: socket.socket, req: dict, deadline: float) -> None:
        req["timeout_s"] = max(deadline - time.monotonic(), 0.0)
        sock.settimeout(req["timeout_s"] + 2.0)  # the task answers first when it times out
        sock.sendall(_frame(req))

    def _recv_tcp(
        self,
        req: dict,
        deadline: float,
        sent: socket.socket | BaseException | None = None,
        xfer: _Transfer | None = None,
    ) -> Any:
        """The tensor of ``req`` over the data channel; ``sent``: the connection its request
        went out on already (``_send_early``), or the error that sending it failed with."""
        xfer = xfer or _Transfer()
        where = self._where(req["key"])
        if isinstance(sent, BaseException):
            raise self._tcp_error(where, sent)
        sock = sent
        if sock is None:
            try:
                sock = self._data_conn(req["key"], deadline, xfer)
            except BaseException as e:  # noqa: BLE001
                raise self._tcp_error(where, e) from None
            if sock is None:
                return _NO_DATA_CHANNEL  # the task came back without one
            xfer.attach(sock)
        try:
            if sent is None:
                self._send_request(sock, req, deadline)
            header = _recv_frame(sock, f"{where} header")
        except BaseException as e:  # noqa: BLE001 - the call was in flight: no retry
            sock.close()
            raise self._tcp_error(where, e) from None
        if header.get("ok") is not True:
            xfer.attach(None)  # the connection goes back to the pool: out of the cancel's reach
            raise self._reply_error(sock, header, req["key"])
        try:
            return self._read_payload(sock, header, where, deadline, xfer)
        except BaseException as e:  # noqa: BLE001
            sock.close()
            raise self._tcp_error(where, e) from None

    def _reply_error(self, sock: socket.socket, header: dict, key: str) -> BaseException:
        code = header.get("code")
        if not isinstance(code, str) or code not in grpc.StatusCode.__members__:
            sock.close()
            return E.DataLossError(f"{self._where(key)}: malformed reply {header!r:.200}")
        if header.get("closing") is True:  # the task hangs up after saying why
            sock.close()
        else:
            self._pool(sock)  # the connection is still in step
        details = str(header.get("message", ""))[:4000]
        code_ = grpc.StatusCode[code]
        return self._coded_error(f"RecvTensor {key!r}", code_, details, self._data_where())

    def _read_payload(
        self, sock: socket.socket, header: dict, where: str, deadline: float, xfer: _Transfer
    ) -> Any:
        try:
            incoming = InTensor(header, where, self.max_tensor_bytes)
        except WireError as e:
            raise E.DataLossError(f"malformed stream: {e}") from None
        try:
            recv_into_all(sock, incoming.view, deadline)
        except TimeoutError as e:
            raise E.DeadlineExceededError(f"{where} ({self._data_where()}): {e}") from None
        got = incoming.nbytes
        incoming.filled = got
        value = incoming.value()
        xfer.attach(None)  # the connection goes back to the pool: out of the cancel's reach
        self._pool(sock)
        return value

    def _data_where(self) -> str:
        host, _ = split_address(self.address)
        return f"{host}:{self._data_port}, data channel"

    def _tcp_error(self, where: str, e: BaseException) -> BaseException:
        """``e`` from the data channel as a hetbed error naming the key and the task."""
        if isinstance(e, E.OpError):
            return e
        if isinstance(e, (TimeoutError, socket.timeout)):
            err: E.OpError = E.DeadlineExceededError(f"{where} ({self._data_where()}): timed out")
        elif isinstance(e, WireError):
            err = E.DataLossError(f"malformed stream: {e}")
        elif isinstance(e, (OSError, EOFError)):
            err = UnavailableError(
                f"{where} ({self._data_where()}): connection lost ({e}); is the server for this "
                "task running?"
            )
            err.grpc_code = grpc.StatusCode.UNAVAILABLE
        else:
            return e
        return err

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for s in idle:
            s.close()
        self._channel.close()


_NO_DATA_CHANNEL = object()
#: seconds a Recv waits for a peer task that does not answer at all (its port refuses or does
#: not accept connections: it died, or has not started) before failing with UnavailableError
#: naming it; a peer that answers is waited for until the Recv's own deadline
PEER_WAIT_S = 10.0


class _NotReady(Exception):
    """A RecvTensor stream failed before its first message because the channel is not ready."""


#: calls that travel over the data channel when the task has one
_CONTROL = frozenset({"RunGraph", "CleanupStep"})
