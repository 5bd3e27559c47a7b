"""gRPC transport: the worker service as raw-bytes methods, and its client. Translation only.

Methods are ``/hetbed.WorkerService/<Name>`` with identity (de)serializers: requests and replies are
msgpack maps (``wire.py``), so no protoc step is needed. Every call carries the cluster token in
metadata ``hetbed-token`` when one is configured; a server with a token answers UNAUTHENTICATED to
any call without the same token. Malformed requests get INVALID_ARGUMENT, requests over the
message-size limit RESOURCE_EXHAUSTED (gRPC enforces it), and the server keeps serving.

Large tensors travel in one message: the default limit is raised to 1 GiB each way (no chunking), so
one tensor up to about 1 GiB crosses tasks; a bigger one fails with RESOURCE_EXHAUSTED.
"""

from __future__ import annotations

import hmac
import threading
from collections.abc import Callable
from typing import Any

import grpc

from .. import errors as E
from ..errors import InternalError, UnauthenticatedError, UnavailableError
from ..serialize import GraphFormatError
from .wire import (
    MAX_MESSAGE_BYTES,
    WireError,
    field,
    pack,
    tensor_from_wire,
    tensor_to_wire,
    unpack,
)

SERVICE = "hetbed.WorkerService"
TOKEN_KEY = "hetbed-token"

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
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
    ]


# ---- server side ------------------------------------------------------------------------------


def service_handler(worker: Any, token: str | None) -> grpc.GenericRpcHandler:
    """The generic handler serving ``worker`` (a ``Worker``) under ``SERVICE``."""

    def status(req: dict) -> dict:
        return {
            "task": worker.task,
            "devices": worker.list_devices(),
            "cluster": worker.cluster.as_dict(),
        }

    def register(req: dict) -> dict:
        return {"handle": worker.register_graph(field(req, "graph", dict, "RegisterGraph"))}

    def deregister(req: dict) -> dict:
        worker.deregister_graph(field(req, "handle", str, "DeregisterGraph"))
        return {}

    def run(req: dict) -> dict:
        from .worker import decode_feeds

        handle = field(req, "handle", str, "RunGraph")
        step_id = field(req, "step_id", int, "RunGraph")
        timeout = req.get("timeout_s", 0.0)
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout < 0:
            raise WireError(f"RunGraph: field 'timeout_s' must be a number >= 0, got {timeout!r}")
        feeds = decode_feeds(req.get("feeds", {}), "RunGraph")
        values = worker.run_graph(handle, step_id, feeds, float(timeout))
        return {"fetches": [tensor_to_wire(v, f"fetch {i}") for i, v in enumerate(values)]}

    def recv(req: dict, context: grpc.ServicerContext) -> dict:
        step_id = field(req, "step_id", int, "RecvTensor")
        key = field(req, "key", str, "RecvTensor")
        left = context.time_remaining()
        timeout = min(left, 3600.0) if left is not None else 3600.0
        return {"tensor": worker.recv_tensor(step_id, key, timeout)}

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
        "RecvTensor": recv,
        "CleanupStep": cleanup,
    }
    expected = token.encode() if token else None

    def wrap(name: str, fn: Callable) -> Callable:
        takes_context = name == "RecvTensor"

        def behavior(request: bytes, context: grpc.ServicerContext) -> bytes:
            if expected is not None:
                got = dict(context.invocation_metadata()).get(TOKEN_KEY)
                got_b = got.encode() if isinstance(got, str) else (got or b"")
                if not hmac.compare_digest(got_b, expected):
                    why = "no cluster token" if not got else "a wrong cluster token"
                    context.abort(
                        grpc.StatusCode.UNAUTHENTICATED,
                        f"{worker.task}: {name} call with {why} (metadata {TOKEN_KEY!r})",
                    )
            try:
                req = unpack(request, name)
                reply = fn(req, context) if takes_context else fn(req)
                return pack(reply)
            except BaseException as e:  # noqa: BLE001 - every failure becomes a status
                context.abort(status_code(e), f"{type(e).__name__}: {e}")

        return grpc.unary_unary_rpc_method_handler(
            behavior, request_deserializer=None, response_serializer=None
        )

    return grpc.method_handlers_generic_handler(
        SERVICE, {name: wrap(name, fn) for name, fn in methods.items()}
    )


# ---- client side ------------------------------------------------------------------------------


class WorkerClient:
    """Calls one task's worker service; raises hetbed errors (OpError subclasses) on failure."""

    def __init__(
        self,
        address: str,
        task: str = "",
        token: str | None = None,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ):
        self.address = address
        self.task = task or address
        self._metadata = ((TOKEN_KEY, token),) if token else ()
        self._channel = grpc.insecure_channel(address, options=channel_options(max_message_bytes))
        self._calls = {
            name: self._channel.unary_unary(
                f"/{SERVICE}/{name}", request_serializer=None, response_deserializer=None
            )
            for name in (
                "GetStatus",
                "RegisterGraph",
                "DeregisterGraph",
                "RunGraph",
                "RecvTensor",
                "CleanupStep",
            )
        }
        self._lock = threading.Lock()

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
        cls = _FROM_CODE.get(code, InternalError)
        msg = f"{name} on {self.task} ({self.address}) failed with {code.name}: {details}"
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

    def recv_tensor_async(
        self, step_id: int, key: str, timeout_s: float, callback: Callable
    ) -> Callable[[], None]:
        def got(reply: Any = None, error: BaseException | None = None) -> None:
            if error is not None:
                callback(None, error)
                return
            try:
                value = tensor_from_wire(reply.get("tensor"), f"RecvTensor {key!r}")
            except Exception as e:  # noqa: BLE001
                callback(None, e)
                return
            callback(value)

        # wait_for_ready: a peer task restarted at the same address is served as soon as it is
        # up, instead of failing fast while this channel backs off from the dead incarnation
        req = {"step_id": step_id, "key": key}
        return self.call_async("RecvTensor", req, timeout_s, got, wait_for_ready=True)

    def close(self) -> None:
        self._channel.close()
