"""Transport: the worker service as raw-bytes gRPC methods and its client, plus the optional TCP
data channel for tensors. Translation only.

Methods are ``/hetbed.WorkerService/<Name>`` with identity (de)serializers: requests and replies are
msgpack maps (``wire.py``), so no protoc step is needed. Every call carries the cluster token in
metadata ``hetbed-token`` when one is configured; a server with a token answers UNAUTHENTICATED to
any call without the same token. Malformed requests get INVALID_ARGUMENT, requests over the
message-size limit RESOURCE_EXHAUSTED (gRPC enforces it), and the server keeps serving.

Tensors between tasks (RecvTensor) are streamed, by one of two protocols chosen by the sending
task's server (``Server(protocol=...)``; its GetStatus reply advertises ``data_port``):

- ``"grpc"``: a unary-stream call. The first message is the msgpack header ``{dtype, shape,
  nbytes, scalar}`` (holding the bytes too, as ``data``, up to ``INLINE_BYTES``), then raw-byte
  chunks of ``CHUNK_BYTES``, written straight into a preallocated array on the receiver.
- ``"grpc+tcp"`` (the default; like TensorFlow's ``grpc+verbs``, gRPC stays the control plane):
  tensors move over a plain TCP connection to the sending task's data port, on the host its gRPC
  server binds. A connection starts with a challenge: the server sends ``HBD1`` + a 32-byte nonce + its
  task name (1 length byte + UTF-8; a client expecting another task hangs up), the client answers ``HBD1`` + HMAC-SHA256(token, ``hetbed-data-v1`` + nonce) (32 zero bytes
  without a token), checked in constant time when the server has a token. Then requests and
  replies alternate: a frame is a 4-byte big-endian length + a msgpack map (at most
  ``MAX_FRAME_BYTES``); a request ``{step_id, key, timeout_s}`` is answered by ``{ok: true,
  dtype, shape, nbytes, scalar}`` followed by exactly ``nbytes`` raw bytes (``recv_into`` a
  preallocated array), or by ``{ok: false, code, message}`` with a gRPC status name. Connections
  are reused; a broken one is dropped.

Either way a tensor is at most ``max_tensor_bytes`` (default ``MAX_TENSOR_BYTES``, checked from
the header before anything is allocated: ResourceExhaustedError), a malformed or truncated stream
raises DataLossError naming the key and the task, a lost connection UnavailableError, and no wait
is longer than the Recv's timeout.
"""

from __future__ import annotations

import hashlib
import hmac
import queue
import secrets
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

import grpc

from .. import errors as E
from ..errors import InternalError, UnauthenticatedError, UnavailableError
from ..serialize import GraphFormatError
from .cluster import split_address
from .wire import (
    CHUNK_BYTES,
    INLINE_BYTES,
    MAX_MESSAGE_BYTES,
    MAX_TENSOR_BYTES,
    InTensor,
    OutTensor,
    WireError,
    field,
    pack,
    tensor_to_wire,
    unpack,
)

SERVICE = "hetbed.WorkerService"
TOKEN_KEY = "hetbed-token"
#: the protocols of ``Server(protocol=...)``
PROTOCOLS = ("grpc", "grpc+tcp")

_TO_CODE: list[tuple[type, grpc.StatusCode]] = [
    (UnauthenticatedError, grpc.StatusCode.UNAUTHENTICATED),
    (UnavailableError, grpc.StatusCode.UNAVAILABLE),
    (E.InvalidArgumentError, grpc.StatusCode.INVALID_ARGUMENT),
    (E.NotFoundError, grpc.StatusCode.NOT_FOUND),
    (E.FailedPreconditionError, grpc.StatusCode.FAILED_PRECONDITION),
    (E.UnimplementedError, grpc.StatusCode.UNIMPLEMENTED),
    (E.DataLossError, grpc.StatusCode.DATA_LOSS),
    (E.ResourceExhaustedError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (E.DeadlineExceededError, grpc.StatusCode.DEADLINE_EXCEEDED),
    (E.AbortedError, grpc.StatusCode.ABORTED),
    (WireError, grpc.StatusCode.INVALID_ARGUMENT),
    (GraphFormatError, grpc.StatusCode.INVALID_ARGUMENT),
]
_FROM_CODE: dict[grpc.StatusCode, type] = {
    grpc.StatusCode.UNAUTHENTICATED: UnauthenticatedError,
    grpc.StatusCode.PERMISSION_DENIED: UnauthenticatedError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.INVALID_ARGUMENT: E.InvalidArgumentError,
    grpc.StatusCode.NOT_FOUND: E.NotFoundError,
    grpc.StatusCode.FAILED_PRECONDITION: E.FailedPreconditionError,
    grpc.StatusCode.UNIMPLEMENTED: E.UnimplementedError,
    grpc.StatusCode.DATA_LOSS: E.DataLossError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: E.ResourceExhaustedError,
    grpc.StatusCode.DEADLINE_EXCEEDED: E.DeadlineExceededError,
    grpc.StatusCode.ABORTED: E.AbortedError,
    grpc.StatusCode.CANCELLED: E.AbortedError,
}


def status_code(e: BaseException) -> grpc.StatusCode:
    for cls, code in _TO_CODE:
        if isinstance(e, cls):
            return code
    if isinstance(e, (ValueError, TypeError)):
        return grpc.StatusCode.INVALID_ARGUMENT
    return grpc.StatusCode.INTERNAL


def channel_options(max_message_bytes: int) -> list[tuple[str, int]]:
    """Options of every hetbed channel and server: explicit message-size limits both ways, and
    HTTP/2 settings measured to help large RecvTensor streams on loopback (big frames and an
    initial flow-control window that does not wait for BDP probing)."""
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.http2.max_frame_size", (1 << 24) - 1),
        ("grpc.http2.lookahead_bytes", 16 << 20),
    ]


def _recv_chunk_bytes(max_message_bytes: int) -> int:
    return max(1, min(CHUNK_BYTES, max_message_bytes - 1024))


# ---- server side ------------------------------------------------------------------------------


def _token_error(worker: Any, name: str, got: Any) -> str:
    why = "no cluster token" if not got else "a wrong cluster token"
    return f"{worker.task}: {name} call with {why} (metadata {TOKEN_KEY!r})"


def service_handler(
    worker: Any,
    token: str | None,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
    data_port: int | None = None,
) -> grpc.GenericRpcHandler:
    """The generic handler serving ``worker`` (a ``Worker``) under ``SERVICE``; ``data_port``
    (the TCP data channel's port, if any) is advertised in GetStatus replies."""

    def status(req: dict) -> dict:
        return {
            "task": worker.task,
            "devices": worker.list_devices(),
            "cluster": worker.cluster.as_dict(),
            "protocol": "grpc+tcp" if data_port else "grpc",
            "data_port": data_port,
        }

    def register(req: dict) -> dict:
        return {"handle": worker.register_graph(field(req, "graph", dict, "RegisterGraph"))}

    def deregister(req: dict) -> dict:
        worker.deregister_graph(field(req, "handle", str, "DeregisterGraph"))
        return {}

    def run(req: dict, context: grpc.ServicerContext) -> dict:
        from .worker import decode_feeds

        handle = field(req, "handle", str, "RunGraph")
        step_id = field(req, "step_id", int, "RunGraph")
        timeout = req.get("timeout_s", 0.0)
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout < 0:
            raise WireError(f"RunGraph: field 'timeout_s' must be a number >= 0, got {timeout!r}")
        feeds = decode_feeds(req.get("feeds", {}), "RunGraph")
        finished = threading.Event()

        def call_ended() -> None:
            # The master's call ended (it died, or gave up) while the step still runs here:
            # abort the step so that nothing keeps waiting in it (a dequeue taking a token later).
            if not finished.is_set():
                worker.cleanup_step(
                    step_id, "the master's RunGraph call ended before the step finished"
                )

        context.add_callback(call_ended)
        try:
            values = worker.run_graph(handle, step_id, feeds, float(timeout))
        finally:
            finished.set()
        return {"fetches": [tensor_to_wire(v, f"fetch {i}") for i, v in enumerate(values)]}

    def cleanup(req: dict) -> dict:
        step_id = field(req, "step_id", int, "CleanupStep")
        reason = req.get("reason", "the master cleaned up the step")
        worker.cleanup_step(step_id, str(reason))
        return {}

    methods = {
        "GetStatus": status,
        "RegisterGraph": register,
        "DeregisterGraph": deregister,
        "RunGraph": run,
        "CleanupStep": cleanup,
    }
    expected = token.encode() if token else None
    chunk = _recv_chunk_bytes(max_message_bytes)

    def check_token(name: str, context: grpc.ServicerContext) -> None:
        if expected is not None:
            got = dict(context.invocation_metadata()).get(TOKEN_KEY)
            got_b = got.encode() if isinstance(got, str) else (got or b"")
            if not hmac.compare_digest(got_b, expected):
                context.abort(grpc.StatusCode.UNAUTHENTICATED, _token_error(worker, name, got))

    def wrap(name: str, fn: Callable) -> Callable:
        takes_context = fn is run

        def behavior(request: bytes, context: grpc.ServicerContext) -> bytes:
            check_token(name, context)
            try:
                req = unpack(request, name)
                return pack(fn(req, context) if takes_context else fn(req))
            except BaseException as e:  # noqa: BLE001 - every failure becomes a status
                context.abort(status_code(e), f"{type(e).__name__}: {e}")

        return grpc.unary_unary_rpc_method_handler(
            behavior, request_deserializer=None, response_serializer=None
        )

    def recv_tensor(request: bytes, context: grpc.ServicerContext) -> Any:
        """RecvTensor: the header message, then the payload in chunks (module docstring)."""
        check_token("RecvTensor", context)
        try:
            req = unpack(request, "RecvTensor")
            step_id = field(req, "step_id", int, "RecvTensor")
            key = field(req, "key", str, "RecvTensor")
            left = context.time_remaining()
            timeout = min(left, 3600.0) if left is not None else 3600.0
            out = worker.recv_tensor(step_id, key, timeout)
        except BaseException as e:  # noqa: BLE001 - every failure becomes a status
            context.abort(status_code(e), f"{type(e).__name__}: {e}")
        payload, n = out.payload, out.nbytes
        try:
            if n <= INLINE_BYTES and n + 1024 <= max_message_bytes:
                yield pack({**out.header, "data": payload.tobytes()})
                return
            yield pack(out.header)
            for off in range(0, n, chunk):
                yield payload[off : off + chunk].tobytes()  # gRPC Python sends only bytes
        finally:
            out.release()

    handlers = {name: wrap(name, fn) for name, fn in methods.items()}
    handlers["RecvTensor"] = grpc.unary_stream_rpc_method_handler(
        recv_tensor, request_deserializer=None, response_serializer=None
    )
    return grpc.method_handlers_generic_handler(SERVICE, handlers)


# ---- the TCP data channel ---------------------------------------------------------------------

MAGIC = b"HBD1"
NONCE_BYTES = 32
#: max size of one msgpack frame (request or reply header) on the data channel
MAX_FRAME_BYTES = 64 << 10
#: seconds a new data connection has to complete the challenge
HANDSHAKE_TIMEOUT_S = 10.0
_LEN = struct.Struct(">I")
_MAC_CONTEXT = b"hetbed-data-v1"
#: idle data connections kept per peer
_MAX_IDLE = 8


def _mac(token: bytes | None, nonce: bytes) -> bytes:
    if token is None:
        return bytes(32)
    return hmac.new(token, _MAC_CONTEXT + nonce, hashlib.sha256).digest()


def _recv_exact(sock: socket.socket, n: int) -> bytearray:
    """Exactly ``n`` bytes; EOFError when the peer closes first."""
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise EOFError(f"connection closed after {got} of {n} bytes")
        got += k
    return buf


def _frame(msg: dict) -> bytes:
    data = pack(msg)
    return _LEN.pack(len(data)) + data


def _recv_frame(sock: socket.socket, what: str) -> dict:
    (n,) = _LEN.unpack(_recv_exact(sock, 4))
    if n > MAX_FRAME_BYTES:
        raise E.ResourceExhaustedError(
            f"{what}: a frame of {n} bytes is over the {MAX_FRAME_BYTES}-byte limit"
        )
    return unpack(bytes(_recv_exact(sock, n)), what)


class DataServer:
    """The sending side of the TCP data channel of one task (see the module docstring): a
    listening socket on ``host`` (a free port) and a thread per connection."""

    def __init__(self, worker: Any, host: str, token: str | None):
        self._worker = worker
        self._token = token.encode() if token else None
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.create_server((host, 0), family=family, backlog=128)
        self.port: int = self._sock.getsockname()[1]
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._accept, name=f"hetbed-data-{self.port}", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        with self._lock:
            self._closed = True
            conns, self._conns = list(self._conns), set()
        _shutdown(self._sock)
        self._sock.close()
        for c in conns:
            _shutdown(c)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            with self._lock:
                if self._closed:
                    conn.close()
                    return
                self._conns.add(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        task = self._worker.task
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.settimeout(HANDSHAKE_TIMEOUT_S)
            nonce = secrets.token_bytes(NONCE_BYTES)
            name = task.encode()[:255]
            conn.sendall(MAGIC + nonce + bytes([len(name)]) + name)
            hello = _recv_exact(conn, len(MAGIC) + 32)
            if hello[: len(MAGIC)] != MAGIC:
                msg = f"{task}: not a hetbed data channel client (bad greeting)"
                _hang_up(conn, _frame({"ok": False, "code": "INVALID_ARGUMENT", "message": msg}))
                return
            if self._token is not None and not hmac.compare_digest(
                bytes(hello[len(MAGIC) :]), _mac(self._token, nonce)
            ):
                msg = (
                    f"{task}: RecvTensor on the data channel with no or a wrong cluster token "
                    "(HMAC of the challenge does not match)"
                )
                _hang_up(conn, _frame({"ok": False, "code": "UNAUTHENTICATED", "message": msg}))
                return
            while True:
                conn.settimeout(None)  # an idle connection waits for its next request
                try:
                    (n,) = _LEN.unpack(_recv_exact(conn, 4))
                except EOFError:
                    return  # the client closed an idle connection
                conn.settimeout(HANDSHAKE_TIMEOUT_S)
                if not self._answer(conn, n):
                    return
        except (OSError, EOFError):
            return  # the client went away, or the server is stopping
        finally:
            with self._lock:
                self._conns.discard(conn)
            conn.close()

    def _answer(self, conn: socket.socket, n: int) -> bool:
        """Read one request of ``n`` bytes and answer it; False to close the connection."""
        try:
            if n > MAX_FRAME_BYTES:
                raise E.ResourceExhaustedError(
                    f"RecvTensor: a request of {n} bytes is over the {MAX_FRAME_BYTES}-byte "
                    "frame limit of the data channel"
                )
            req = unpack(bytes(_recv_exact(conn, n)), "RecvTensor")
            step_id = field(req, "step_id", int, "RecvTensor")
            key = field(req, "key", str, "RecvTensor")
            timeout = req.get("timeout_s")
            if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout < 0:
                raise WireError(
                    f"RecvTensor: field 'timeout_s' must be a number >= 0, got {timeout!r:.30}"
                )
        except (OSError, EOFError):
            raise
        except BaseException as e:  # noqa: BLE001 - malformed: say why, then hang up
            _hang_up(conn, _error_frame(e))
            return False
        try:
            out: OutTensor = self._worker.recv_tensor(step_id, key, min(float(timeout), 3600.0))
        except BaseException as e:  # noqa: BLE001 - the connection stays usable
            conn.sendall(_error_frame(e))
            return True
        try:
            head = _frame({"ok": True, **out.header})
            # a stalled reader must not hold this thread forever: 60 s plus 10 MB/s
            conn.settimeout(60.0 + out.nbytes / 10e6)
            if out.nbytes <= INLINE_BYTES:
                conn.sendall(head + out.payload)
            else:
                conn.sendall(head)
                conn.sendall(out.payload)
        finally:
            out.release()
        return True


def _error_frame(e: BaseException) -> bytes:
    return _frame({"ok": False, "code": status_code(e).name, "message": f"{type(e).__name__}: {e}"})


def _hang_up(conn: socket.socket, last: bytes) -> None:
    """Send ``last``, then close without a reset: unread input would make the kernel reset the
    connection and the peer could lose ``last``. Reads (and drops) at most 1 MiB, for 1 s."""
    conn.sendall(last)
    conn.shutdown(socket.SHUT_WR)
    conn.settimeout(1.0)
    dropped = 0
    while dropped < (1 << 20):
        k = len(conn.recv(1 << 16))
        if not k:
            return
        dropped += k


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


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


# ---- client side ------------------------------------------------------------------------------


class WorkerClient:
    """Calls one task's worker service; raises hetbed errors (OpError subclasses) on failure."""

    def __init__(
        self,
        address: str,
        task: str = "",
        token: str | None = None,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        max_tensor_bytes: int = MAX_TENSOR_BYTES,
    ):
        self.address = address
        self.task = task or address
        self.max_tensor_bytes = int(max_tensor_bytes)
        self._token = token.encode() if token else None
        self._metadata = ((TOKEN_KEY, token),) if token else ()
        self._channel = grpc.insecure_channel(address, options=channel_options(max_message_bytes))
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

    def call(self, name: str, req: dict, timeout: float | None = None) -> dict:
        try:
            reply = self._calls[name](pack(req), timeout=timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            raise self.error(name, e) from None
        return unpack(reply, f"{name} reply")

    def call_async(
        self,
        name: str,
        req: dict,
        timeout: float | None,
        callback: Callable,
        wait_for_ready: bool | None = None,
    ) -> Callable[[], None]:
        """Start ``name``; ``callback(reply_dict)`` or ``callback(None, error)`` once. Returns a
        function that cancels the call."""
        fut = self._calls[name].future(
            pack(req), timeout=timeout, metadata=self._metadata, wait_for_ready=wait_for_ready
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

    def error(self, name: str, e: grpc.RpcError) -> E.OpError:
        code = e.code() if hasattr(e, "code") else grpc.StatusCode.UNKNOWN
        details = e.details() if hasattr(e, "details") else str(e)
        return self._coded_error(name, code, details, self.address)

    def _coded_error(self, name: str, code: grpc.StatusCode, details: str, where: str) -> E.OpError:
        cls = _FROM_CODE.get(code, InternalError)
        msg = f"{name} on {self.task} ({where}) failed with {code.name}: {details}"
        if cls is UnauthenticatedError:
            msg += (
                "; pass the cluster's token (hb.Session(target, token=...) or the "
                "HETBED_CLUSTER_TOKEN environment variable)"
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

        def run() -> None:
            try:
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
            value = self._recv_tcp(req, deadline, xfer)
            if value is not _NO_DATA_CHANNEL:
                return value
        return self._recv_grpc(req, deadline, xfer)

    def _where(self, key: str) -> str:
        return f"RecvTensor {key!r} from {self.task}"

    def _discover(self, key: str, deadline: float, xfer: _Transfer) -> int:
        """The task's data port (0: none), from its GetStatus reply (asked once). Waits for a
        task that is not up yet, as gRPC's wait_for_ready, until ``deadline``."""
        port = self._data_port
        if port is not None:
            return port
        fut = self._calls["GetStatus"].future(
            pack({}),
            timeout=max(deadline - time.monotonic(), 0.001),
            metadata=self._metadata,
            wait_for_ready=True,
        )
        xfer.attach(fut)
        try:
            reply = unpack(fut.result(), "GetStatus reply")
        except grpc.RpcError as e:  # named for the Recv that waited, not for GetStatus
            raise self.error(f"RecvTensor {key!r} (GetStatus for the data port)", e) from None
        port = reply.get("data_port") or 0
        if not isinstance(port, int) or not 0 <= port < 65536:
            raise E.DataLossError(f"GetStatus reply of {self.task}: bad data_port {port!r:.30}")
        self._data_port = port
        return port

    # -- over gRPC ----------------------------------------------------------------------------
    def _recv_grpc(self, req: dict, deadline: float, xfer: _Transfer) -> Any:
        where = self._where(req["key"])
        # wait_for_ready: a peer task restarted at the same address is served as soon as it is
        # up, instead of failing fast while this channel backs off from the dead incarnation
        call = self._stream(
            pack(req),
            timeout=max(deadline - time.monotonic(), 0.001),
            metadata=self._metadata,
            wait_for_ready=True,
        )
        xfer.attach(call)
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
            raise self.error(f"RecvTensor {req['key']!r}", e) from None
        finally:
            call.cancel()  # a no-op once the stream ended; stops it after a local error

    # -- over the data channel ------------------------------------------------------------------
    def _recv_tcp(self, req: dict, deadline: float, xfer: _Transfer) -> Any:
        where = self._where(req["key"])
        try:
            sock = self._data_conn(req["key"], deadline, xfer)
        except BaseException as e:  # noqa: BLE001
            raise self._tcp_error(where, e) from None
        if sock is None:
            return _NO_DATA_CHANNEL  # the task came back without one
        xfer.attach(sock)
        try:
            req["timeout_s"] = max(deadline - time.monotonic(), 0.0)
            sock.settimeout(req["timeout_s"] + 2.0)  # the task answers first when it times out
            sock.sendall(_frame(req))
            header = _recv_frame(sock, f"{where} header")
        except BaseException as e:  # noqa: BLE001 - the call was in flight: no retry
            sock.close()
            raise self._tcp_error(where, e) from None
        if header.get("ok") is not True:
            raise self._reply_error(sock, header, req["key"])
        try:
            return self._read_payload(sock, header, where, deadline)
        except BaseException as e:  # noqa: BLE001
            sock.close()
            raise self._tcp_error(where, e) from None

    def _reply_error(self, sock: socket.socket, header: dict, key: str) -> BaseException:
        code = header.get("code")
        if not isinstance(code, str) or code not in grpc.StatusCode.__members__:
            sock.close()
            return E.DataLossError(f"{self._where(key)}: malformed reply {header!r:.200}")
        self._pool(sock)  # the connection is still in step
        details = str(header.get("message", ""))[:4000]
        code_ = grpc.StatusCode[code]
        return self._coded_error(f"RecvTensor {key!r}", code_, details, self._data_where())

    def _read_payload(self, sock: socket.socket, header: dict, where: str, deadline: float) -> Any:
        try:
            incoming = InTensor(header, where, self.max_tensor_bytes)
        except WireError as e:
            raise E.DataLossError(f"malformed stream: {e}") from None
        view, n, got = incoming.view, incoming.nbytes, 0
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise E.DeadlineExceededError(
                    f"{where} ({self._data_where()}): {got} of {n} bytes arrived before the "
                    "deadline"
                )
            sock.settimeout(left)
            k = sock.recv_into(view[got:], n - got)
            if k == 0:
                raise EOFError(f"connection closed after {got} of {n} bytes")
            got += k
        incoming.filled = got
        value = incoming.value()
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

    def _data_conn(self, key: str, deadline: float, xfer: _Transfer) -> socket.socket | None:
        """A connection to the task's data port: an idle one still open, else a new one; None
        when the task (restarted) has no data channel."""
        while True:
            with self._lock:
                sock = self._idle.pop() if self._idle else None
            if sock is None:
                break
            if _idle_ok(sock):
                return sock
            sock.close()  # closed by the task (it stopped or restarted)
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
            hello = _recv_exact(sock, len(MAGIC) + NONCE_BYTES + 1)
            if hello[: len(MAGIC)] != MAGIC:
                raise E.DataLossError(
                    f"{host}:{port} (data channel of {self.task}) is not a hetbed data channel"
                )
            task = bytes(_recv_exact(sock, hello[-1])).decode(errors="replace")
            if task != self.task and self.task.startswith("/job:"):
                # the port now belongs to another task (this one restarted elsewhere): ask again
                raise ConnectionRefusedError(f"data port {port} now serves {task}")
            sock.sendall(MAGIC + _mac(self._token, bytes(hello[len(MAGIC) : -1])))
        except BaseException:
            sock.close()
            raise
        return sock

    def _pool(self, sock: socket.socket) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < _MAX_IDLE:
                self._idle.append(sock)
                return
        sock.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for s in idle:
            s.close()
        self._channel.close()


_NO_DATA_CHANNEL = object()


def _idle_ok(sock: socket.socket) -> bool:
    """An idle data connection has nothing to read: not closed, reset, or sent garbage."""
    try:
        sock.settimeout(0.0)
        sock.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return True
    except OSError:
        return False
    return False
