"""Transport: what the gRPC worker service, its client and the TCP data channel share (service
name, token metadata key, status-code mapping, channel options). Translation only.

The transport is split by concern: ``grpc_server.py`` serves the worker service as raw-bytes gRPC
methods, ``datachannel.py`` is the optional raw TCP data channel for tensors (its server and
framing), ``client.py`` holds ``WorkerClient`` (calls one task; fetches tensors over either;
``threads.py`` its thread pool and cancellation handles).

Methods are ``/hetbed.WorkerService/<Name>`` with identity (de)serializers: requests and replies are
msgpack maps (``wire.py``), so no protoc step is needed. The cluster token never crosses the
wire: with one configured, every call carries metadata ``hetbed-auth`` = ``ts.nonce.digest.mac``:
the client's time in ms, 8 random bytes, the SHA-256 of the request body, and HMAC-SHA256(token,
``hetbed-grpc-v1`` | method | the task's name | ts | nonce | digest) (``call_auth``; a first
GetStatus, before the caller knows whom it reached, names no task). A server with
a token checks it from an interceptor that sees only the metadata (no byte of an
unauthenticated request is read; UNAUTHENTICATED otherwise): the MAC, a time within
``AUTH_WINDOW_S`` of its own, a nonce it has not seen in that window; its handler then checks the
body against the digest. So whoever listens at a task's address (a process that took a dead
task's port) learns no token, and a captured call cannot be sent to another task, with another
body, or twice to the same server process (a task restarted within the window forgets the
nonces it saw: a call captured before could be sent to it once more, unchanged). Malformed requests get INVALID_ARGUMENT, requests over the
message-size limit RESOURCE_EXHAUSTED (gRPC enforces it), and the server keeps serving.

Tensors between tasks (RecvTensor) are streamed, by one of two protocols chosen by the sending
task's server (``Server(protocol=...)``; its GetStatus reply advertises ``data_port``):

- ``"grpc"``: a unary-stream call. The first message is the msgpack header ``{dtype, shape,
  nbytes, scalar}`` (holding the bytes too, as ``data``, up to ``INLINE_BYTES``), then raw-byte
  chunks of ``CHUNK_BYTES``, written straight into a preallocated array on the receiver.
- ``"grpc+tcp"`` (the default; like TensorFlow's ``grpc+verbs``, gRPC stays the control plane):
  tensors move over a plain TCP connection to the sending task's data port, on the host its gRPC
  server binds. A connection starts with a challenge: the server sends ``HBD1`` + a 32-byte
  nonce and nothing else; the client answers ``HBD1`` + HMAC-SHA256(token, ``hetbed-data-v1`` |
  nonce | the task it means to reach) (32 zero bytes without a token; naming the task, an
  answer relayed to another task is refused there), checked in constant time when the server has a token;
  only then does the server send its task name (1 length byte + UTF-8; a client expecting
  another task hangs up). A client that fails the challenge, or does not answer it within
  ``HANDSHAKE_TIMEOUT_S`` in total, is hung up on without a word, and a server keeps at most
  ``MAX_CONNECTIONS`` connections. Then requests and replies alternate: a frame is a 4-byte
  big-endian length + a msgpack map (at most ``MAX_FRAME_BYTES``); a request ``{step_id, key,
  timeout_s}`` is answered by ``{ok: true, dtype, shape, nbytes, scalar}`` followed by exactly
  ``nbytes`` raw bytes (``recv_into`` a preallocated array), or by ``{ok: false, code, message}``
  with a gRPC status name. Connections are reused; a broken one is dropped. The per-step control
  calls travel there too: a request ``{method: "RunGraph" | "CleanupStep", ...}`` (the gRPC
  request's fields; at most the message limit) is answered by one frame ``{ok: true, ...reply}``
  or the error frame; the server watches the connection while the step runs (from 20 ms into
  it) and aborts the step when the master hangs up. A client that cannot connect to the data port uses gRPC instead.

Either way a tensor is at most ``max_tensor_bytes`` (default ``MAX_TENSOR_BYTES``, checked from
the header before anything is allocated: ResourceExhaustedError), a malformed or truncated stream
raises DataLossError naming the key and the task, a lost connection UnavailableError, and no wait
is longer than the Recv's timeout.
"""

from __future__ import annotations

import hashlib
import heapq
import hmac
import secrets
import threading
import time
from typing import Any

import grpc

from .. import errors as E
from ..errors import UnauthenticatedError, UnavailableError
from ..serialize import GraphFormatError
from .wire import CHUNK_BYTES, WireError

SERVICE = "hetbed.WorkerService"
TOKEN_KEY = "hetbed-auth"
#: seconds a call's authenticator stays valid (both ways: clocks of different hosts may differ;
#: a call that waits for its task to come up is sent when the task is up, within the window)
AUTH_WINDOW_S = 600.0
_AUTH_CONTEXT = b"hetbed-grpc-v1"


def _auth_mac(token: bytes, method: str, task: str, ts: str, nonce: str, digest: str) -> str:
    msg = b"\0".join([_AUTH_CONTEXT, method.encode(), task.encode(), ts.encode(),
                      nonce.encode(), digest.encode()])  # fmt: skip
    return hmac.new(token, msg, hashlib.sha256).hexdigest()


def call_auth(token: bytes, method: str, task: str, body: bytes) -> str:
    """The ``hetbed-auth`` metadata value of one call of ``method`` (the short name) to
    ``task`` (``/job:ps/replica:0/task:0``; "" while the caller does not know it yet: then
    only GetStatus is accepted), with request ``body``."""
    ts = str(time.time_ns() // 1_000_000)
    nonce = secrets.token_hex(8)
    digest = hashlib.sha256(body).hexdigest()
    return ".".join([ts, nonce, digest, _auth_mac(token, method, task, ts, nonce, digest)])


class CallAuthenticator:
    """Checks ``hetbed-auth`` values for the server of ``task`` (``check``). A value is good
    for one call: its nonce is remembered until its timestamp leaves the window (so the cache
    holds the authenticated calls of at most ``2 * AUTH_WINDOW_S``, pruned oldest first)."""

    def __init__(self, token: bytes, task: str):
        self._token, self.task = token, task
        self._seen: dict[str, float] = {}
        self._expiry: list[tuple[float, str]] = []  # a heap of (when a nonce may go, nonce)
        self._lock = threading.Lock()

    def check(self, method: str, value: Any) -> tuple[str | None, str]:
        """(the body digest the call vouches for, "") or (None, why it is refused)."""
        if isinstance(value, bytes):
            value = value.decode("ascii", "replace")
        parts = value.split(".") if isinstance(value, str) and len(value) < 256 else []
        if len(parts) != 4:
            return None, "no cluster token" if not value else "a malformed authenticator"
        ts, nonce, digest, mac = parts
        names = [self.task] + ([""] if method == "GetStatus" else [])
        if not any(
            hmac.compare_digest(
                mac.encode(), _auth_mac(self._token, method, t, ts, nonce, digest).encode()
            )  # fmt: skip
            for t in names
        ):
            return None, "a wrong cluster token (or a call meant for another task)"
        now = time.time()
        try:
            stamp = int(ts) / 1000.0
        except ValueError:
            return None, "a malformed authenticator"
        if abs(now - stamp) > AUTH_WINDOW_S:
            return None, (
                f"an authenticator {now - stamp:.0f} s off this task's clock (the clocks of "
                f"the hosts differ by more than {AUTH_WINDOW_S:g} s, or a call was replayed)"
            )
        with self._lock:
            while self._expiry and self._expiry[0][0] < now:
                self._seen.pop(heapq.heappop(self._expiry)[1], None)
            if nonce in self._seen:
                return None, "an authenticator used before (a replayed call)"
            self._seen[nonce] = stamp
            heapq.heappush(self._expiry, (stamp + AUTH_WINDOW_S, nonce))
        return digest, ""


def body_matches(digest: str | None, body: bytes) -> bool:
    """Whether ``body`` is the request an authenticated call vouched for."""
    return digest is None or hmac.compare_digest(hashlib.sha256(body).hexdigest(), digest)


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
    (E.OutOfRangeError, grpc.StatusCode.OUT_OF_RANGE),
    (E.CancelledError, grpc.StatusCode.CANCELLED),
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
    grpc.StatusCode.OUT_OF_RANGE: E.OutOfRangeError,
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
        # a channel to a task that died reconnects within 2 s once the task is back (gRPC's
        # default backoff grows to 2 minutes), so that a restarted task is reached again soon
        ("grpc.initial_reconnect_backoff_ms", 250),
        ("grpc.max_reconnect_backoff_ms", 2000),
    ]


def _recv_chunk_bytes(max_message_bytes: int) -> int:
    return max(1, min(CHUNK_BYTES, max_message_bytes - 1024))
