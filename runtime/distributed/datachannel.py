"""The TCP data channel (``grpc+tcp``; protocol in ``rpc.py``): the sending side's server, the
framing and the challenge shared with the client."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import selectors
import socket
import struct
import threading
import time
from typing import Any

from .. import errors as E
from ..threadname import name_this_thread
from .rpc import status_code
from .wire import (
    INLINE_BYTES,
    MAX_TENSOR_BYTES,
    InTensor,
    OutTensor,
    WireError,
    field,
    message_limit,
    pack,
    unpack,
)

MAGIC = b"HBD1"
NONCE_BYTES = 32
#: max size of one msgpack frame (request or reply header) on the data channel
MAX_FRAME_BYTES = 64 << 10
#: seconds a new data connection has, in total, to complete the challenge
HANDSHAKE_TIMEOUT_S = 10.0
#: open connections a data server keeps (authenticated or not); more are closed at once
MAX_CONNECTIONS = 256
_LEN = struct.Struct(">I")
_MAC_CONTEXT = b"hetbed-data-v1"
#: idle data connections kept per peer
_MAX_IDLE = 8


def _mac(token: bytes | None, nonce: bytes, task: str) -> bytes:
    """The client's answer to a data-channel challenge: it names the task the client means to
    reach, so that an answer passed on to another task (a relay through a process at a dead
    task's address) is refused there."""
    if token is None:
        return bytes(32)
    return hmac.new(
        token, b"\0".join([_MAC_CONTEXT, nonce, task.encode()]), hashlib.sha256
    ).digest()


def recv_exact(sock: socket.socket, n: int, deadline: float | None = None) -> bytearray:
    """Exactly ``n`` bytes; EOFError when the peer closes first, TimeoutError when they have not
    all arrived by ``deadline`` (time.monotonic; the bound is on the total, not per read)."""
    buf = bytearray(n)
    _recv_loop(sock, memoryview(buf), deadline)
    return buf


def _recv_loop(sock: socket.socket, view: memoryview, deadline: float | None) -> None:
    """Fill ``view`` by plain reads, each under a Python timeout of what is left until
    ``deadline`` (see ``recv_exact``)."""
    n, got = len(view), 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{got} of {n} bytes arrived before the deadline")
            sock.settimeout(left)
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise EOFError(f"connection closed after {got} of {n} bytes")
        got += k


#: frames and payloads from this size on move with one blocking system call (below)
_BULK_BYTES = 64 << 10
_TIMEVAL = struct.Struct("@ll")
_NO_TIMEVAL = _TIMEVAL.pack(0, 0)


def _timeval(seconds: float) -> bytes:
    s = max(seconds, 0.001)
    return _TIMEVAL.pack(int(s), int((s % 1.0) * 1e6))


def recv_into_all(sock: socket.socket, view: memoryview, deadline: float | None) -> None:
    """Fill ``view`` from ``sock`` by blocking MSG_WAITALL reads, bounded by ``deadline``
    (time.monotonic; None: no bound) through SO_RCVTIMEO: the kernel copies the bytes as they
    arrive, where a socket with a Python timeout polls, wakes this thread and takes the GIL back
    once per segment (a small ``view`` is read the plain way). TimeoutError (how many bytes came)
    past the deadline, EOFError when the peer closes first. The socket may be left without a
    Python timeout: set one before its next use."""
    n, got = len(view), 0
    if n < _BULK_BYTES:  # small: most likely there already; no socket options to set
        _recv_loop(sock, view, deadline)
        return
    sock.settimeout(None)
    try:
        while got < n:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{got} of {n} bytes arrived before the deadline")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _timeval(left))
            try:
                k = sock.recv_into(view[got:], n - got, socket.MSG_WAITALL)
            except BlockingIOError:  # SO_RCVTIMEO passed without a byte: the loop decides
                continue
            if k == 0:
                raise EOFError(f"connection closed after {got} of {n} bytes")
            got += k
    finally:
        if deadline is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _NO_TIMEVAL)


def send_all(sock: socket.socket, parts: list, timeout: float) -> None:
    """Send the bytes-likes ``parts`` in order within ``timeout`` seconds in total: gathered
    writes (sendmsg) on a blocking socket, bounded by SO_SNDTIMEO, so that a large payload goes
    in one system call instead of a poll and a send per socket buffer's worth. TimeoutError when
    the reader has not taken it all in time. Leaves the socket blocking, without a timeout."""
    views = [memoryview(p).cast("B") for p in parts if len(p)]
    deadline = time.monotonic() + timeout
    sock.settimeout(None)
    try:
        while views:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"the reader took too long ({timeout:.0f} s)")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, _timeval(left))
            try:
                k = sock.sendmsg(views)
            except BlockingIOError:  # SO_SNDTIMEO passed without a byte taken
                continue
            while views and k >= len(views[0]):
                k -= len(views[0])
                views.pop(0)
            if k:
                views[0] = views[0][k:]
    finally:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, _NO_TIMEVAL)


def read_stream(
    sock: socket.socket,
    header: Any,
    where: str,
    max_bytes: int,
    deadline: float | None,
    per_byte_s: float = 0.0,
) -> Any:
    """The array whose ``header`` a RunGraph message carried as ``{"stream": header}``, its bytes
    read from ``sock`` (they follow the message) by ``deadline`` plus ``per_byte_s`` a byte:
    WireError for a malformed header and ResourceExhaustedError over ``max_bytes``, both before
    reading a byte of it."""
    incoming = InTensor(header, where, max_bytes)
    if deadline is not None:
        deadline += incoming.nbytes * per_byte_s
    recv_into_all(sock, incoming.view, deadline)
    incoming.filled = incoming.nbytes
    return incoming.value()


def _frame(msg: dict) -> bytes:
    data = pack(msg)
    return _LEN.pack(len(data)) + data


def _recv_frame(sock: socket.socket, what: str, limit: int = MAX_FRAME_BYTES) -> dict:
    """One frame within the socket's timeout (a large one: within that time in total)."""
    (n,) = _LEN.unpack(recv_exact(sock, 4))
    if n > limit:
        raise E.ResourceExhaustedError(
            f"{what}: a frame of {n} bytes is over the {limit}-byte limit"
        )
    if n < _BULK_BYTES:
        return unpack(recv_exact(sock, n), what)
    t = sock.gettimeout()
    buf = bytearray(n)
    recv_into_all(sock, memoryview(buf), None if t is None else time.monotonic() + t)
    return unpack(buf, what)


class _HangupWatch:
    """Calls back when a connection whose RunGraph is running becomes readable: a client sends
    nothing while it waits for a reply, so that means it hung up (its master died or gave up).
    One thread per data server, started on first use.

    A connection is watched (registered with epoll) only once its step has run for
    ``DELAY_S``: most steps end sooner, and registering then unregistering (two system calls,
    each giving up the GIL and waiting to take it back) would cost a short step more than the
    watch is worth. A hang-up is still noticed within about a second."""

    DELAY_S = 0.02

    def __init__(self, name: str) -> None:
        self._sel = selectors.DefaultSelector()
        self._lock = threading.Lock()
        self._name = name
        self._thread: threading.Thread | None = None
        self._closed = False
        self._pending: dict[socket.socket, tuple[float, Any]] = {}  # conn -> (watch from, cb)
        self._watched: set[socket.socket] = set()

    def add(self, conn: socket.socket, on_hangup: Any) -> None:
        with self._lock:
            if self._closed:
                return
            self._pending[conn] = (time.monotonic() + self.DELAY_S, on_hangup)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()

    def remove(self, conn: socket.socket) -> None:
        with self._lock:
            if self._pending.pop(conn, None) is not None or conn not in self._watched:
                return
            self._watched.discard(conn)
            try:
                self._sel.unregister(conn)
            except (KeyError, ValueError, OSError):
                pass  # closed meanwhile

    def close(self) -> None:
        with self._lock:
            self._closed = True

    def _loop(self) -> None:
        name_this_thread("hetbed-watch")
        while not self._closed:
            now = time.monotonic()
            with self._lock:
                for conn, (start, cb) in list(self._pending.items()):
                    if start <= now:
                        del self._pending[conn]
                        try:
                            self._sel.register(conn, selectors.EVENT_READ, cb)
                            self._watched.add(conn)
                        except (KeyError, ValueError, OSError):
                            pass  # closed meanwhile
                first = min((t for t, _ in self._pending.values()), default=now + 1.0)
            try:
                # the timeout bounds how late a step's connection is watched and lets the thread
                # notice close()
                events = self._sel.select(timeout=min(max(first - now, 0.001), 1.0))
            except (OSError, ValueError):
                time.sleep(0.05)  # a socket closed under the selector: try again
                continue
            for key, _ in events:
                self.remove(key.fileobj)  # type: ignore[arg-type]
                try:
                    key.data()
                except Exception:  # noqa: BLE001, S110 - aborting a step must not end the loop
                    pass


class DataServer:
    """The sending side of the TCP data channel of one task (see the module docstring): a
    listening socket on ``host`` (a free port) and a thread per connection."""

    def __init__(
        self,
        worker: Any,
        host: str,
        token: str | None,
        max_message_bytes: int | None = None,
        avoid: frozenset[int] = frozenset(),
        max_tensor_bytes: int = MAX_TENSOR_BYTES,
    ):
        self._worker = worker
        self._token = token.encode() if token else None
        self._max_bytes = message_limit(max_message_bytes)
        self._max_tensor_bytes = int(max_tensor_bytes)  # one streamed feed
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        # a free port, but none of ``avoid`` (the cluster's own ports: a task that has not
        # started yet must still find its address free)
        for _ in range(64):
            self._sock = socket.create_server((host, 0), family=family, backlog=128)
            self.port: int = self._sock.getsockname()[1]
            if self.port not in avoid:
                break
            self._sock.close()
        else:
            raise OSError(f"data channel: no free port on {host} outside the cluster's ports")
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._watch = _HangupWatch(f"hetbed-data-watch-{self.port}")

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
        self._watch.close()
        _shutdown(self._sock)
        self._sock.close()
        for c in conns:
            _shutdown(c)

    def _accept(self) -> None:
        name_this_thread("hetbed-accept")
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            with self._lock:
                if self._closed:
                    conn.close()
                    return
                if len(self._conns) >= MAX_CONNECTIONS:
                    conn.close()  # over the cap: closed before anything is read or said
                    continue
                self._conns.add(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        name_this_thread("hetbed-data")
        task = self._worker.task
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            # Nothing but the nonce before the client proves it holds the token: a client that
            # fails the challenge, or does not answer it within HANDSHAKE_TIMEOUT_S in total, is
            # hung up on without a word (not even the task's name).
            deadline = time.monotonic() + HANDSHAKE_TIMEOUT_S
            conn.settimeout(HANDSHAKE_TIMEOUT_S)
            nonce = secrets.token_bytes(NONCE_BYTES)
            conn.sendall(MAGIC + nonce)
            hello = recv_exact(conn, len(MAGIC) + 32, deadline)
            if hello[: len(MAGIC)] != MAGIC:
                return
            if self._token is not None and not hmac.compare_digest(
                bytes(hello[len(MAGIC) :]), _mac(self._token, nonce, task)
            ):
                return
            name = task.encode()[:255]
            conn.sendall(bytes([len(name)]) + name)
            while True:
                conn.settimeout(None)  # an idle connection waits for its next request
                try:
                    (n,) = _LEN.unpack(recv_exact(conn, 4))
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
            # the client has authenticated: a RunGraph may carry feeds up to the message limit
            limit = max(MAX_FRAME_BYTES, self._max_bytes)
            if n > limit:
                raise E.ResourceExhaustedError(
                    f"data channel: a request of {n} bytes is over the {limit}-byte limit (raise "
                    "it with HETBED_MAX_MESSAGE_BYTES or max_message_bytes= of hb.train.Server)"
                )
            if n < _BULK_BYTES:
                req = unpack(recv_exact(conn, n), "data channel request")
            else:  # a RunGraph with large feeds: 10 s plus 10 MB/s
                buf = bytearray(n)
                deadline = time.monotonic() + HANDSHAKE_TIMEOUT_S + n / 10e6
                recv_into_all(conn, memoryview(buf), deadline)
                req = unpack(buf, "data channel request")
            method = req.get("method", "RecvTensor")
            if method == "RunGraph":
                self._read_feeds(conn, req)
            if method in ("RunGraph", "CleanupStep"):
                return self._answer_control(conn, method, req)
            if method != "RecvTensor":
                raise WireError(f"data channel: unknown method {method!r:.40}")
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
            _hang_up(conn, _error_frame(e, closing=True))
            return False
        try:
            out: OutTensor = self._worker.recv_tensor(step_id, key, min(float(timeout), 3600.0))
        except BaseException as e:  # noqa: BLE001 - the connection stays usable
            conn.sendall(_error_frame(e))
            return True
        try:
            head = _frame({"ok": True, **out.header})
            # a stalled reader must not hold this thread forever: 60 s plus 10 MB/s
            if out.nbytes <= INLINE_BYTES:
                conn.settimeout(60.0)
                conn.sendall(head + out.payload)
            else:
                send_all(conn, [head, out.payload], 60.0 + out.nbytes / 10e6)
        finally:
            out.release()
        return True

    def _read_feeds(self, conn: socket.socket, req: dict) -> None:
        """Replace each ``{"stream": header}`` feed of a RunGraph request by its array, read from
        ``conn`` in order (the client sends large feeds after the request: ``WorkerClient``);
        each within 10 s plus 10 MB/s. Raises WireError or ResourceExhaustedError (over
        ``max_tensor_bytes``) before reading a byte of a bad one."""
        feeds = req.get("feeds")
        if not isinstance(feeds, dict):
            return
        for name, v in feeds.items():
            if isinstance(v, dict) and "stream" in v:
                feeds[name] = read_stream(
                    conn,
                    v["stream"],
                    f"RunGraph feed {name!r}",
                    self._max_tensor_bytes,
                    time.monotonic() + HANDSHAKE_TIMEOUT_S,
                    1 / 10e6,
                )

    def _answer_control(self, conn: socket.socket, method: str, req: dict) -> bool:
        """RunGraph and CleanupStep, served as over gRPC (``grpc_server``); the connection stays
        usable after an error reply."""
        from .grpc_server import run_graph_request

        watched = False
        streams: list[OutTensor] = []  # large fetches: their bytes follow the reply

        def watch(call_ended: Any) -> None:
            nonlocal watched
            self._watch.add(conn, call_ended)
            watched = True

        try:
            try:
                if method == "RunGraph":
                    try:
                        reply = run_graph_request(self._worker, req, watch, streams)
                    finally:
                        if watched:
                            self._watch.remove(conn)
                else:
                    step_id = field(req, "step_id", int, "CleanupStep")
                    reason = req.get("reason", "the master cleaned up the step")
                    self._worker.cleanup_step(step_id, str(reason))
                    reply = {}
                data = _frame({"ok": True, **reply})
            except BaseException as e:  # noqa: BLE001 - every failure becomes a status
                for out in streams:
                    out.release()
                streams = []
                data = _error_frame(e)
            n = len(data) + sum(out.nbytes for out in streams)
            if n < _BULK_BYTES:
                conn.settimeout(60.0)
                conn.sendall(data)
            else:  # one gathered write of the reply and the fetched arrays' own buffers
                send_all(conn, [data, *(out.payload for out in streams)], 60.0 + n / 10e6)
        finally:
            for out in streams:
                out.release()
        return True


def _error_frame(e: BaseException, closing: bool = False) -> bytes:
    """The reply saying why a request failed; ``closing``: the task hangs up after it (the
    request was malformed or over a limit, and its bytes still coming are not read), so that
    the client closes the connection instead of pooling it: a later call sent on it before the
    hang-up arrives would be lost with it."""
    reply = {"ok": False, "code": status_code(e).name, "message": f"{type(e).__name__}: {e}"}
    if closing:
        reply["closing"] = True
    return _frame(reply)


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
