"""Authentication before any body is read, message limits with clear errors (issue 15, item 1)."""

from __future__ import annotations

import socket
import time

import grpc
import msgpack
import numpy as np
import pytest

import hetbed as hb
from hetbed.runtime.distributed import datachannel, rpc, wire
from hetbed.runtime.distributed.cluster import ClusterSpec
from hetbed.runtime.errors import ResourceExhaustedError

PS = "/job:ps/replica:0/task:0"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server():
    made = []

    def make(**kw):
        spec = ClusterSpec({"ps": [f"127.0.0.1:{_free_port()}"]})
        s = hb.train.Server(spec, "ps", 0, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.stop(grace=0)


def _raw(target: str, method: str, payload: bytes, metadata=(), stream: bool = False):
    opts = [("grpc.max_send_message_length", 64 << 20)]
    with grpc.insecure_channel(target[len("grpc://") :], options=opts) as ch:
        path = f"/hetbed.WorkerService/{method}"
        if stream:
            return list(ch.unary_stream(path)(payload, metadata=metadata, timeout=10))
        return ch.unary_unary(path)(payload, metadata=metadata, timeout=10)


def _md(token: str, method: str, task: str, body: bytes) -> tuple:
    """The metadata a WorkerClient with ``token`` sends with ``body`` to ``task``."""
    return ((rpc.TOKEN_KEY, rpc.call_auth(token.encode(), method, task, body)),)


def test_token_is_checked_before_the_body_is_read(server):
    """An unauthenticated call over the size limit is refused as UNAUTHENTICATED: the server never
    reads (nor size-checks) its body. The refusal does not name the task."""
    s = server(token="s3cret", max_message_bytes=1 << 20)
    big = b"\x00" * (4 << 20)
    for method, stream in [("RunGraph", False), ("RegisterGraph", False), ("RecvTensor", True)]:
        guesses = [(), ((rpc.TOKEN_KEY, "guess"),), _md("guess", method, PS, big)]
        guesses.append((("hetbed-token", "s3cret"),))  # the bearer token of old: not enough
        for md in guesses:
            with pytest.raises(grpc.RpcError) as e:
                _raw(s.target, method, big, md, stream)
            assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED, e.value.details()
            assert method in e.value.details() and "ps" not in e.value.details()
    body = msgpack.packb({})
    ok = msgpack.unpackb(_raw(s.target, "GetStatus", body, _md("s3cret", "GetStatus", PS, body)))
    assert ok["task"] == PS
    with pytest.raises(grpc.RpcError) as e:  # authenticated and oversized: the limit applies
        _raw(s.target, "RunGraph", big, _md("s3cret", "RunGraph", PS, big))
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_a_calls_authenticator_fits_one_call_only(server, monkeypatch):
    """A captured authenticator is good for nothing else: not twice, not for another method,
    another task (nor, but for a first GetStatus, with no task named) or another body, not
    when stale; the token is never in it."""
    s = server(token="s3cret")
    body = msgpack.packb({})
    md = _md("s3cret", "GetStatus", PS, body)
    assert "s3cret" not in md[0][1]
    assert msgpack.unpackb(_raw(s.target, "GetStatus", body, md))["task"] == PS
    unnamed = _md("s3cret", "GetStatus", "", body)  # a master's first call: whom did it reach?
    assert msgpack.unpackb(_raw(s.target, "GetStatus", body, unnamed))["task"] == PS
    other_body = msgpack.packb({"x": 1})
    cases = {
        "used before": (md, body, "GetStatus"),
        "another method": (md, body, "CleanupStep"),
        "another task": (_md("s3cret", "CleanupStep", "/job:worker/replica:0/task:0", body),
                         body, "CleanupStep"),
        "no task": (_md("s3cret", "CleanupStep", "", body), body, "CleanupStep"),
        "another body": (_md("s3cret", "GetStatus", PS, body), other_body, "GetStatus"),
    }  # fmt: skip
    for why, (meta, payload, method) in cases.items():
        with pytest.raises(grpc.RpcError) as e:
            _raw(s.target, method, payload, meta)
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED, (why, e.value.details())
    real_ns = time.time_ns
    monkeypatch.setattr(time, "time_ns", lambda: real_ns() - int(2 * rpc.AUTH_WINDOW_S * 1e9))
    stale = _md("s3cret", "GetStatus", PS, body)
    monkeypatch.setattr(time, "time_ns", real_ns)
    with pytest.raises(grpc.RpcError, match="s off this task's clock"):
        _raw(s.target, "GetStatus", body, stale)


def test_the_replay_cache_forgets_a_nonce_only_when_its_time_leaves_the_window(monkeypatch):
    """Each nonce is refused a second time while its timestamp is still acceptable, even one
    stamped ahead of this clock; the cache is pruned oldest first as time passes."""
    auth = rpc.CallAuthenticator(b"k", PS)
    now = [1_000_000.0]
    monkeypatch.setattr(time, "time", lambda: now[0])
    monkeypatch.setattr(time, "time_ns", lambda: int(now[0] * 1e9))
    values = [rpc.call_auth(b"k", "GetStatus", PS, b"") for _ in range(3)]
    now[0] += rpc.AUTH_WINDOW_S - 1  # a value stamped ahead of the server's clock:
    ahead = rpc.call_auth(b"k", "GetStatus", PS, b"")
    now[0] -= rpc.AUTH_WINDOW_S - 1
    assert all(auth.check("GetStatus", v)[0] for v in [*values, ahead])
    now[0] += rpc.AUTH_WINDOW_S + 1  # the first three are stale now, and forgotten
    assert auth.check("GetStatus", values[0])[0] is None
    assert auth.check("GetStatus", rpc.call_auth(b"k", "GetStatus", PS, b""))[0]
    assert len(auth._seen) == 2  # (the three stale nonces pruned as the new one came)
    digest, why = auth.check("GetStatus", ahead)  # still within the window: still refused
    assert digest is None and "used before" in why


def test_a_client_never_sends_the_token_to_whoever_listens(server):
    """A process listening where a task should be (one that took a dead task's port) sees
    only authenticators: neither the token nor anything it could use at another task."""
    from concurrent import futures

    from hetbed.runtime.distributed.client import WorkerClient

    seen = []

    def record(request, context):
        seen.extend(context.invocation_metadata())
        return b""

    squatter = grpc.server(futures.ThreadPoolExecutor(2))
    handler = grpc.method_handlers_generic_handler(
        "hetbed.WorkerService",
        {"GetStatus": grpc.unary_unary_rpc_method_handler(record)},
    )
    squatter.add_generic_rpc_handlers((handler,))
    port = squatter.add_insecure_port("127.0.0.1:0")
    squatter.start()
    try:
        # (a peer task's client: it knows the task it means to reach)
        client = WorkerClient(f"127.0.0.1:{port}", "/job:worker/replica:0/task:0", "s3cret")
        with pytest.raises(wire.WireError):  # (an empty reply is no GetStatus reply)
            client.call("GetStatus", {}, timeout=5)
        client.close()
    finally:
        squatter.stop(0)
    values = [str(v) for _k, v in seen]
    assert values and not any("s3cret" in v for v in values)
    auth = dict(seen)[rpc.TOKEN_KEY]
    s = server(token="s3cret")  # the real task elsewhere: the captured value is refused
    with pytest.raises(grpc.RpcError) as e:
        _raw(s.target, "GetStatus", msgpack.packb({}), ((rpc.TOKEN_KEY, auth),))
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_oversized_message_error_names_the_limit_and_how_to_raise_it(server, monkeypatch):
    s = server(max_message_bytes=1 << 20)
    monkeypatch.setenv(wire.MAX_MESSAGE_ENV, str(1 << 20))
    g = hb.Graph()
    with g.as_default(), hb.device(PS):
        x = hb.placeholder(hb.float32, [None], name="x")
        y = hb.identity(x)
        words = hb.placeholder(hb.string, [None], name="words")  # (strings are never streamed)
        n = hb.size(words)
    with hb.Session(s.target, graph=g) as sess:
        np.testing.assert_array_equal(sess.run(y, {x: np.ones(8, np.float32)}), np.ones(8))
        with pytest.raises(ResourceExhaustedError, match=r"limited to 1048576 bytes.*HETBED_MAX"):
            sess.run(n, {words: np.array([b"w" * 1000] * 1500)})  # 1.5 MB in the message
        # a large numeric feed streams after the request over the data channel: no limit hit
        assert sess.run(y, {x: np.ones(1 << 19, np.float32)}).shape == (1 << 19,)


def test_message_limit_default_env_and_bad_values(monkeypatch):
    monkeypatch.delenv(wire.MAX_MESSAGE_ENV, raising=False)
    assert wire.message_limit() == wire.MAX_MESSAGE_BYTES == 256 << 20
    assert wire.message_limit(5000) == 5000
    monkeypatch.setenv(wire.MAX_MESSAGE_ENV, "1073741824")
    assert wire.message_limit() == 1 << 30
    for bad in ("lots", "12"):
        monkeypatch.setenv(wire.MAX_MESSAGE_ENV, bad)
        with pytest.raises(ValueError, match="HETBED_MAX_MESSAGE_BYTES.*>= 4096"):
            wire.message_limit()


def _greeted(port: int) -> socket.socket:
    c = socket.create_connection(("127.0.0.1", port), timeout=5)
    hello = datachannel.recv_exact(c, 4 + 32)
    assert hello[:4] == datachannel.MAGIC
    return c


def test_data_channel_says_nothing_before_the_token_is_proven(server):
    s = server(token="s3cret")
    port = s._data.port
    for answer in (datachannel.MAGIC + bytes(32), b"GET / HTTP/1.1\r\n" + bytes(20)):
        c = _greeted(port)
        c.sendall(answer)
        assert c.recv(1000) == b""  # hung up: no task name, no error text
        c.close()
    # a right answer for another task (a relay: a process at a dead worker's address passing
    # this task's challenge to a client that meant to reach the worker) is refused too
    c = socket.create_connection(("127.0.0.1", port), timeout=5)
    nonce = bytes(datachannel.recv_exact(c, 36)[4:])
    worker = "/job:worker/replica:0/task:0"
    c.sendall(datachannel.MAGIC + datachannel._mac(b"s3cret", nonce, worker))
    assert c.recv(1000) == b""
    c.close()
    c = socket.create_connection(("127.0.0.1", port), timeout=5)
    nonce = bytes(datachannel.recv_exact(c, 36)[4:])
    c.sendall(datachannel.MAGIC + datachannel._mac(b"s3cret", nonce, PS))
    (n,) = datachannel.recv_exact(c, 1)
    assert datachannel.recv_exact(c, n).decode() == PS
    c.close()


def test_data_channel_handshake_is_bounded_in_total_time(server, monkeypatch):
    """A client trickling its answer one byte at a time is cut off after the total bound."""
    monkeypatch.setattr(datachannel, "HANDSHAKE_TIMEOUT_S", 1.0)
    s = server(token="s3cret")
    c = _greeted(s._data.port)
    t0 = time.monotonic()
    with pytest.raises(OSError):
        for _ in range(40):  # 8 s of trickle if nothing stopped it
            c.sendall(b"H")
            time.sleep(0.2)
            c.settimeout(0.0)
            try:
                if c.recv(1) == b"":
                    raise ConnectionResetError("closed")
            except BlockingIOError:
                pass
            c.settimeout(5)
    assert time.monotonic() - t0 < 3.0
    c.close()


def test_data_channel_caps_its_connections(server, monkeypatch):
    monkeypatch.setattr(datachannel, "MAX_CONNECTIONS", 3)
    s = server()
    held = [_greeted(s._data.port) for _ in range(3)]
    extra = socket.create_connection(("127.0.0.1", s._data.port), timeout=5)
    assert extra.recv(100) == b""  # over the cap: closed before a word
    extra.close()
    for c in held:
        c.close()
    deadline = time.monotonic() + 5
    while True:  # the server notices the closed ones and takes new connections again
        c = socket.create_connection(("127.0.0.1", s._data.port), timeout=5)
        if c.recv(4) == datachannel.MAGIC or time.monotonic() > deadline:
            break
        c.close()
        time.sleep(0.05)
    c.close()
    assert time.monotonic() <= deadline


def test_a_second_server_on_a_port_in_use_is_refused(server):
    s = server()
    port = int(s.target.rsplit(":", 1)[1])
    with pytest.raises(ValueError, match="the address is in use"):
        hb.train.Server(ClusterSpec({"ps": [f"127.0.0.1:{port}"]}), "ps", 0)
    # the first keeps serving
    with hb.Graph().as_default():
        with hb.device("/job:ps/task:0"):
            x = hb.constant(3.0) * 2.0
        with hb.Session(s.target) as sess:
            assert sess.run(x) == 6.0
