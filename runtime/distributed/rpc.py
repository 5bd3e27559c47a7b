"""Transport: what the gRPC worker service, its client and the TCP data channel share (service
name, token metadata key, status-code mapping, channel options). Translation only.

The transport is split by concern: ``grpc_server.py`` serves the worker service as raw-bytes gRPC
methods, ``datachannel.py`` is the optional raw TCP data channel for tensors (its server and
framing), ``client.py`` holds ``WorkerClient`` (calls one task; fetches tensors over either;
``threads.py`` its thread pool and cancellation handles).

Methods are ``/hetbed.WorkerService/<Name>`` with identity (de)serializers: requests and replies are
msgpack maps (``wire.py``), so no protoc step is needed. Every call carries the cluster token in
metadata ``hetbed-token`` when one is configured; a server with a token answers UNAUTHENTICATED to
any call without the same token, from an interceptor that sees only the metadata: no byte of an
unauthenticated request is read. Malformed requests get INVALID_ARGUMENT, requests over the
message-size limit RESOURCE_EXHAUSTED (gRPC enforces it), and the server keeps serving.

Tensors between tasks (RecvTensor) are streamed, by one of two protocols chosen by the sending
task's server (``Server(protocol=...)``; its GetStatus reply advertises ``data_port``):

- ``"grpc"``: a unary-stream call. The first message is the msgpack header ``{dtype, shape,
  nbytes, scalar}`` (holding the bytes too, as ``data``, up to ``INLINE_BYTES``), then raw-byte
  chunks of ``CHUNK_BYTES``, written straight into a preallocated array on the receiver.
- ``"grpc+tcp"`` (the default; like TensorFlow's ``grpc+verbs``, gRPC stays the control plane):
  tensors move over a plain TCP connection to the sending task's data port, on the host its gRPC
  server binds. A connection starts with a challenge: the server sends ``HBD1`` + a 32-byte
  nonce and nothing else; the client answers ``HBD1`` + HMAC-SHA256(token, ``hetbed-data-v1`` +
  nonce) (32 zero bytes without a token), checked in constant time when the server has a token;
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

import grpc

from .. import errors as E
from ..errors import UnauthenticatedError, UnavailableError
from ..serialize import GraphFormatError
from .wire import CHUNK_BYTES, WireError

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
