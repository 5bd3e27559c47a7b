"""The worker service as raw-bytes gRPC methods under ``rpc.SERVICE`` (see ``rpc.py``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import grpc

from .rpc import (
    SERVICE,
    TOKEN_KEY,
    CallAuthenticator,
    _recv_chunk_bytes,
    body_matches,
    status_code,
)
from .wire import (
    INLINE_BYTES,
    WireError,
    field,
    message_limit,
    out_tensor,
    pack,
    streamable,
    tensor_to_wire,
    unpack,
)


def _auth_error(name: str, why: str) -> str:
    # says nothing about the task to a caller that has not authenticated
    return f"{name} call with {why} (metadata {TOKEN_KEY!r})"


def _auth_value(metadata: Any) -> Any:
    return dict(metadata or ()).get(TOKEN_KEY)


class TokenInterceptor(grpc.ServerInterceptor):
    """Checks a call's authenticator (``rpc.CallAuthenticator``) before any of its body is read.

    gRPC calls the interceptor with the method name and metadata only; a call that fails is
    answered UNAUTHENTICATED by a request-streaming handler that never pulls the request (so a
    large unauthenticated message is never buffered, deserialized or size-checked). The body
    is checked against the authenticator's digest by the method's handler."""

    def __init__(self, auth: CallAuthenticator):
        self._auth = auth

    def intercept_service(self, continuation: Callable, handler_call_details: Any) -> Any:
        name = str(handler_call_details.method).rsplit("/", 1)[-1][:64]
        digest, why = self._auth.check(name, _auth_value(handler_call_details.invocation_metadata))
        if digest is not None:
            return continuation(handler_call_details)
        message = _auth_error(name, why)

        def deny(request_iterator: Any, context: grpc.ServicerContext) -> Any:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

        return grpc.stream_unary_rpc_method_handler(deny)


def run_graph_request(
    worker: Any,
    req: dict,
    watch: Callable[[Callable[[], None]], Any],
    streams: list | None = None,
) -> dict:
    """Serve one RunGraph request ``req`` on ``worker``, over either transport; the reply map.

    ``watch(call_ended)`` asks the transport to call ``call_ended`` when the master's call ends
    (it died, or gave up) before the reply: the step is then aborted here, so that nothing keeps
    waiting in it (a dequeue taking a token later). With ``streams`` (the data channel, when
    the request asks for it with ``stream_fetches``), a fetched array of more than
    ``INLINE_BYTES`` is not packed into the reply: its entry is ``{"stream": header}`` and its
    OutTensor is appended to ``streams``, for the transport to send the bytes after the reply,
    in order, without a copy."""
    from .worker import decode_feeds

    handle = field(req, "handle", str, "RunGraph")
    step_id = field(req, "step_id", int, "RunGraph")
    timeout = req.get("timeout_s", 0.0)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout < 0:
        raise WireError(f"RunGraph: field 'timeout_s' must be a number >= 0, got {timeout!r}")
    feeds = decode_feeds(req.get("feeds", {}), "RunGraph")
    finished = threading.Event()

    def call_ended() -> None:
        if not finished.is_set():
            worker.cleanup_step(
                step_id, "the master's RunGraph call ended before the step finished"
            )

    tracer = None
    if req.get("trace") is True:  # RunOptions.trace_level: the master asks for this task's rows
        from ..timeline import TracingObserver

        tracer = TracingObserver()
    watch(call_ended)
    try:
        values = worker.run_graph(handle, step_id, feeds, float(timeout), tracer)
    finally:
        finished.set()
    traced = {} if tracer is None else {"trace": tracer.wire_rows()}
    if streams is None or not req.get("stream_fetches"):
        return {
            "fetches": [tensor_to_wire(v, f"fetch {i}") for i, v in enumerate(values)],
            **traced,
        }
    fetches = []
    for i, v in enumerate(values):
        if streamable(v):
            # (a fetched value is private to the reply: run_graph snapshots variable buffers)
            out = out_tensor(v, f"fetch {i}", copy=False)
            streams.append(out)
            fetches.append({"stream": out.header})
        else:
            fetches.append(tensor_to_wire(v, f"fetch {i}"))
    return {"fetches": fetches, **traced}


def service_handler(
    worker: Any,
    auth: CallAuthenticator | None,
    max_message_bytes: int | None = None,
    data_port: int | None = None,
) -> grpc.GenericRpcHandler:
    """The generic handler serving ``worker`` (a ``Worker``) under ``SERVICE``; ``data_port``
    (the TCP data channel's port, if any) is advertised in GetStatus replies. With ``auth``
    (the server's ``TokenInterceptor`` checked the call first) each request body must be the
    one its authenticator vouches for."""

    def status(req: dict) -> dict:
        return {
            "task": worker.task,
            "devices": worker.list_devices(),
            "cluster": worker.cluster.as_dict(),
            "protocol": "grpc+tcp" if data_port else "grpc",
            "data_port": data_port,
        }

    def register(req: dict) -> dict:
        spec = field(req, "graph", dict, "RegisterGraph")
        try:
            return {"handle": worker.register_graph(spec)}
        except (KeyError, AttributeError, TypeError, IndexError, RecursionError) as e:
            # a request the checks above let through: malformed, not an internal error
            raise WireError(f"RegisterGraph: malformed request ({type(e).__name__}: {e})") from None

    def deregister(req: dict) -> dict:
        worker.deregister_graph(field(req, "handle", str, "DeregisterGraph"))
        return {}

    def run(req: dict, context: grpc.ServicerContext) -> dict:
        return run_graph_request(worker, req, context.add_callback)

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
    max_message_bytes = message_limit(max_message_bytes)
    chunk = _recv_chunk_bytes(max_message_bytes)

    def check_body(name: str, context: grpc.ServicerContext, body: bytes) -> None:
        if auth is None:
            return
        value = _auth_value(context.invocation_metadata())
        parts = value.split(".") if isinstance(value, str) else []
        if len(parts) != 4 or not body_matches(parts[2], body):
            context.abort(
                grpc.StatusCode.UNAUTHENTICATED,
                _auth_error(name, "a body its authenticator does not vouch for"),
            )

    def wrap(name: str, fn: Callable) -> Callable:
        takes_context = fn is run

        def behavior(request: bytes, context: grpc.ServicerContext) -> bytes:
            check_body(name, context, request)
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
        check_body("RecvTensor", context, request)
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
