"""Streamed RecvTensor: chunked gRPC and the TCP data channel (grpc+tcp) between real servers."""

from __future__ import annotations

import socket
import struct
import threading
import time
from concurrent import futures

import grpc
import msgpack
import numpy as np
import pytest

import hetbed as hb
from hetbed.runtime.distributed import client as rpc_client
from hetbed.runtime.distributed import datachannel, rpc, wire
from hetbed.runtime.distributed.cluster import ClusterSpec
from hetbed.runtime.errors import (
    AbortedError,
    DataLossError,
    DeadlineExceededError,
    ResourceExhaustedError,
    UnauthenticatedError,
    UnavailableError,
)

PROTOCOLS = ["grpc+tcp", "grpc"]
PS = "/job:ps/replica:0/task:0"
WK = "/job:worker/replica:0/task:0"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _key(name: str) -> str:
    return f"{PS}/device:cpu:0;1;{WK}/device:cpu:0;{name};0:0"


@pytest.fixture
def pair():
    """Start a ps + worker Server pair (protocol, token); stop them at the end."""
    made: list = []

    def make(protocol: str, token: str | None = None, **kw):
        spec = ClusterSpec(
            {"ps": [f"127.0.0.1:{_free_port()}"], "worker": [f"127.0.0.1:{_free_port()}"]}
        )
        ps = hb.train.Server(spec, "ps", 0, protocol=protocol, token=token, **kw)
        made.append(ps)
        wk = hb.train.Server(spec, "worker", 0, protocol=protocol, token=token, **kw)
        made.append(wk)
        return ps, wk

    yield make
    for s in made:
        s.stop(grace=0)


_steps = iter(range(1, 1 << 30))


def _transfer(ps, client, value, name="t", timeout=20.0):
    """Send ``value`` on the PS task and fetch it with ``client`` (as a Recv does)."""
    step = next(_steps)
    ps.worker.steps.get(step).send(_key(name), value)
    return client.recv_tensor(step, _key(name), timeout)


def _same(got, want):
    want_arr = np.asarray(want)
    assert type(got) is type(want) or (
        isinstance(got, np.ndarray) and isinstance(want, np.ndarray)
    ), (type(got), type(want))
    assert np.asarray(got).dtype == want_arr.dtype.newbyteorder("=")
    assert np.asarray(got).shape == want_arr.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_round_trip_of_dtypes_and_shapes(pair, protocol):
    """Every dtype/shape (0-d, scalar, empty, strided, big-endian, >64 MB) arrives value-equal."""
    ps, wk = pair(protocol)
    client = wk._peer(PS)
    rng = np.random.default_rng(0)
    big = rng.integers(0, 255, (64 << 20) + 5, dtype=np.uint8)
    values = [
        rng.standard_normal((2, 3)).astype(np.float32),
        np.array(3.5),  # 0-d array
        np.float32(2.25),  # numpy scalar stays a scalar
        np.int64(-7),
        np.zeros((0, 3), np.float64),  # empty
        np.zeros((4, 0, 2), np.int32),
        rng.integers(-100, 100, (5, 7)).astype(np.int8),
        rng.integers(0, 60000, 11).astype(np.uint16),
        np.arange(6, dtype=">i8").reshape(2, 3),  # big-endian: arrives native
        np.array([True, False, True]),
        (rng.standard_normal(4) + 1j).astype(np.complex64),
        np.array([b"ab", b"xyz"], dtype="S3"),
        np.array(["hé", "wörld"], dtype="U5"),
        rng.standard_normal((6, 8)).astype(np.float16).T,  # not contiguous
        np.arange(100, dtype=np.float64)[::3],  # strided
        big,
    ]
    for i, v in enumerate(values):
        _same(_transfer(ps, client, v, f"v{i}"), v)
    assert client._data_port == (ps._data.port if protocol == "grpc+tcp" else 0)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_chunk_and_inline_boundaries(pair, protocol):
    """Sizes at, one under and one over the inline limit and multiples of the chunk size."""
    ps, wk = pair(protocol)
    client = wk._peer(PS)
    rng = np.random.default_rng(1)
    c, inline = wire.CHUNK_BYTES, wire.INLINE_BYTES
    for n in (1, inline - 1, inline, inline + 1, c, 3 * c, 3 * c + 1, 2 * c - 1):
        v = rng.integers(0, 255, n, dtype=np.uint8)
        _same(_transfer(ps, client, v, f"n{n}"), v)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_steps_move_changing_variables_between_tasks(pair, protocol):
    """Steps reading PS variables (several at once, > the snapshot-pool size) see every update."""
    ps, wk = pair(protocol)
    g = hb.Graph()
    with g.as_default():
        with hb.device("/job:ps/task:0"):
            a = hb.Variable(np.zeros(600_000, np.float32), name="a")  # 2.4 MB: pooled snapshot
            b = hb.Variable(np.arange(5, dtype=np.int64), name="b")
            bump = [a.assign_add(np.ones(600_000, np.float32)), b.assign_add(np.ones(5, np.int64))]
        with hb.device("/job:worker/task:0"):
            total = hb.reduce_sum(a * 2.0) + hb.cast(hb.reduce_sum(b), hb.float32)
            both = [hb.identity(a), hb.identity(b)]
        init = hb.global_variables_initializer()
    with hb.Session(wk.target, graph=g) as sess:
        sess.run(init)
        for k in range(4):
            got_a, got_b = sess.run(both)
            np.testing.assert_array_equal(got_a, np.full(600_000, k, np.float32))
            np.testing.assert_array_equal(got_b, np.arange(5) + k)
            assert sess.run(total) == pytest.approx(2.0 * 600_000 * k + 10 + 5 * k)
            sess.run(bump)


def test_snapshot_and_alias_rules(pair):
    """A Send of a variable's buffer is a snapshot; a fresh array is streamed without a copy."""
    ps, _ = pair("grpc+tcp")
    w = ps.worker
    from hetbed.runtime.graph import TensorShape
    from hetbed.runtime.ops.state import VarHandle

    n = (1 << 18) + 3  # a size no other test pools
    h = VarHandle("v", hb.float32, TensorShape([n]))
    h.set(np.ones(n, np.float32))
    w.resources[next(iter(w.resources))]["v"] = h
    assert w.aliases_state(h.value) and w.aliases_state(h.value[10:]) and w.aliases_state(h.value.T)
    fresh = np.ones(1 << 18, np.float32)
    assert not w.aliases_state(fresh) and not w.aliases_state(np.float32(1))
    assert w.aliases_state(np.ones(4, np.float32))  # small: always copied
    snap = wire.out_tensor(h.value, "v", copy=True)
    h.value += 1.0  # an in-place update after the Send
    assert np.frombuffer(snap.payload, np.float32).max() == 1.0
    shared = wire.out_tensor(fresh, "f", copy=False)
    assert np.shares_memory(shared.array, fresh)
    buf = snap._pooled
    snap.release()
    again = wire.out_tensor(h.value, "v", copy=True)  # the released buffer is reused
    assert again._pooled is buf
    assert np.frombuffer(again.payload, np.float32).min() == 2.0


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_wrong_token_is_rejected_on_the_data_path(pair, protocol):
    """RecvTensor without the cluster token fails UNAUTHENTICATED; with it, the data flows."""
    ps, wk = pair(protocol, token="s3cret")
    addr = ps.cluster.task_address("ps", 0)
    good = wk._peer(PS)
    v = np.arange(300_000, dtype=np.float32)
    _same(_transfer(ps, good, v, "ok"), v)
    for token in (None, "guess"):
        bad = rpc_client.WorkerClient(addr, PS, token)
        if protocol == "grpc+tcp":  # skip discovery (gRPC, refused anyway): the HMAC is checked
            bad._data_port = ps._data.port
        with pytest.raises(UnauthenticatedError, match="token"):
            _transfer(ps, bad, v, f"bad{token}")
        bad.close()
    _same(_transfer(ps, good, v, "ok2"), v)  # the server still serves


class _FakeTask:
    """A gRPC server answering GetStatus (advertising ``data_port``) and RecvTensor with the
    given raw messages, and optionally a TCP data server sending ``tcp_reply`` bytes."""

    def __init__(self, messages: list[bytes], tcp_reply: bytes | None = None):
        self.tcp = None
        data_port = None
        if tcp_reply is not None:
            self.tcp = socket.create_server(("127.0.0.1", 0))
            data_port = self.tcp.getsockname()[1]
            threading.Thread(target=self._serve_tcp, args=(tcp_reply,), daemon=True).start()

        def status(req, ctx):
            return msgpack.packb({"task": PS, "data_port": data_port})

        def recv(req, ctx):
            yield from messages

        handler = grpc.method_handlers_generic_handler(
            rpc.SERVICE,
            {
                "GetStatus": grpc.unary_unary_rpc_method_handler(status),
                "RecvTensor": grpc.unary_stream_rpc_method_handler(recv),
            },
        )
        self.server = grpc.server(futures.ThreadPoolExecutor(4))
        self.server.add_generic_rpc_handlers((handler,))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.client = rpc_client.WorkerClient(
            f"127.0.0.1:{self.port}", PS, max_tensor_bytes=1 << 20
        )

    def _serve_tcp(self, reply: bytes) -> None:
        conn, _ = self.tcp.accept()
        with conn:
            conn.sendall(datachannel.MAGIC + bytes(32))
            datachannel.recv_exact(conn, 36)  # the client's greeting
            conn.sendall(bytes([len(PS)]) + PS.encode())
            (n,) = struct.unpack(">I", datachannel.recv_exact(conn, 4))
            datachannel.recv_exact(conn, n)  # the request
            conn.sendall(reply)
            conn.shutdown(socket.SHUT_WR)
            conn.settimeout(5)
            while conn.recv(1 << 16):  # until the client hangs up: no reset, nothing lost
                pass

    def close(self) -> None:
        self.client.close()
        self.server.stop(0)
        if self.tcp is not None:
            self.tcp.close()


def _header(n: int, **extra) -> dict:
    return {"dtype": "|u1", "shape": [n], "nbytes": n, "scalar": False, **extra}


def _tcp_frame(msg: dict) -> bytes:
    data = msgpack.packb(msg)
    return struct.pack(">I", len(data)) + data


@pytest.mark.parametrize(
    "messages, tcp_reply, err, match",
    [
        (
            [msgpack.packb(_header(100)), b"x" * 50],
            None,
            DataLossError,
            "truncated after 50 of 100",
        ),
        ([msgpack.packb(_header(4)), b"x" * 6], None, DataLossError, "more than the 4 bytes"),
        ([b"\xc1garbage"], None, DataLossError, "malformed"),
        ([msgpack.packb(_header(4, nbytes=5))], None, DataLossError, "header says 5 bytes"),
        ([msgpack.packb(_header(4, dtype="|O8"))], None, DataLossError, "unsupported dtype"),
        ([], None, DataLossError, "ended without a header"),
        ([msgpack.packb(_header(2 << 20))], None, ResourceExhaustedError, "over the 1048576"),
        (None, _tcp_frame({"ok": True, **_header(100)}) + b"x" * 50, UnavailableError, "50 of 100"),
        (None, _tcp_frame({"ok": True, **_header(4, shape=[-1])}), DataLossError, "shape"),
        (None, _tcp_frame({"ok": False, "code": "BOGUS"}), DataLossError, "malformed reply"),
        (None, _tcp_frame({"ok": True, **_header(2 << 20)}), ResourceExhaustedError, "limit"),
        (None, struct.pack(">I", 1 << 30), ResourceExhaustedError, "frame of 1073741824"),
    ],
)
def test_bad_streams_raise_clear_errors(messages, tcp_reply, err, match):
    """Truncated, overlong, malformed or oversized streams fail naming the key and the task."""
    fake = _FakeTask(messages or [], tcp_reply)
    try:
        with pytest.raises(err, match=match) as e:
            _ = fake.client.recv_tensor(1, _key("bad"), 5.0)
        if err is not UnavailableError:
            assert "bad" in str(e.value) and PS in str(e.value)
        else:
            assert PS in str(e.value) and "data channel" in str(e.value)
    finally:
        fake.close()


def _data_conn(port: int, greet: bool = True) -> socket.socket:
    """A connection to a data server without a token, past the challenge when ``greet``."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    hello = datachannel.recv_exact(s, 4 + 32)
    assert hello[:4] == datachannel.MAGIC
    if greet:
        s.sendall(datachannel.MAGIC + bytes(32))
        (n,) = datachannel.recv_exact(s, 1)
        assert datachannel.recv_exact(s, n).decode() == PS
    return s


def _read_frame(s: socket.socket) -> dict:
    (n,) = struct.unpack(">I", datachannel.recv_exact(s, 4))
    return msgpack.unpackb(bytes(datachannel.recv_exact(s, n)))


def test_data_server_rejects_malformed_requests_and_keeps_serving(pair):
    """Bad greetings and frames get a status frame that says the server hangs up, then the
    hang-up (a well-formed request for a bad key gets its status and the connection stays);
    real transfers go on."""
    ps, wk = pair("grpc+tcp")
    port = ps._data.port
    s = _data_conn(port, greet=False)
    s.sendall(b"GET / HTTP/1.1\r\n" + bytes(20))
    assert s.recv(100) == b""  # a bad greeting is hung up on without a word
    s.close()
    # (payload, status, whether the server hangs up after saying it)
    for payload, code, hangs_up in [
        (struct.pack(">I", 5) + b"\xc1\xc1\xc1\xc1\xc1", "INVALID_ARGUMENT", True),
        (_tcp_frame({"step_id": "x", "key": "k", "timeout_s": 1}), "INVALID_ARGUMENT", True),
        # a well-formed request for a bad key: answered, and the connection stays usable
        (_tcp_frame({"step_id": 1, "key": "a;b", "timeout_s": 1}), "INVALID_ARGUMENT", False),
        # an authenticated request may be as large as one message (RunGraph feeds), no larger
        (struct.pack(">I", 0xFFFFFFFF), "RESOURCE_EXHAUSTED", True),
        # a streamed feed with a bad header, or over max_tensor_bytes: refused before its bytes
        (
            _tcp_frame({"method": "RunGraph", "feeds": {"x": {"stream": _header(4, shape=[-1])}}}),
            "INVALID_ARGUMENT",
            True,
        ),
        (
            _tcp_frame({"method": "RunGraph", "feeds": {"x": {"stream": _header(1 << 40)}}}),
            "RESOURCE_EXHAUSTED",
            True,
        ),
    ]:
        s = _data_conn(port)
        s.sendall(payload)
        reply = _read_frame(s)
        assert reply["ok"] is False and reply["code"] == code, reply
        # a reply after which the server hangs up says so (the client then drops the
        # connection instead of pooling it), and it does
        assert reply.get("closing", False) is hangs_up, reply
        s.settimeout(5 if hangs_up else 0.3)
        if hangs_up:
            assert s.recv(1) == b""
        else:
            with pytest.raises(TimeoutError):
                s.recv(1)
        s.close()
    v = np.arange(1000, dtype=np.float64)
    _same(_transfer(ps, wk._peer(PS), v, "after"), v)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_malformed_grpc_recv_request_and_server_keeps_serving(pair, protocol):
    """A malformed RecvTensor request over gRPC gets INVALID_ARGUMENT; serving goes on."""
    ps, wk = pair(protocol)
    address = ps.cluster.task_address("ps", 0)
    with grpc.insecure_channel(address) as ch:
        call = ch.unary_stream(f"/{rpc.SERVICE}/RecvTensor")
        for bad in (
            b"\xc1",
            msgpack.packb({"step_id": 1}),
            msgpack.packb({"step_id": 1, "key": 3}),
        ):
            with pytest.raises(grpc.RpcError) as e:
                list(call(bad, timeout=5))
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    v = np.ones((3, 3), np.float32)
    _same(_transfer(ps, wk._peer(PS), v, "after"), v)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_recv_times_out_and_cancels_without_hanging(pair, protocol):
    """A tensor never sent fails DeadlineExceeded after the timeout; cancel fails it at once."""
    ps, wk = pair(protocol)
    client = wk._peer(PS)
    t0 = time.monotonic()
    with pytest.raises(DeadlineExceededError, match="never"):
        client.recv_tensor(next(_steps), _key("never"), 0.5)
    assert time.monotonic() - t0 < 3.5
    box, done = [], threading.Event()
    cancel = client.recv_tensor_async(
        next(_steps), _key("later"), 30.0, lambda v=None, e=None: (box.append(e), done.set())
    )
    time.sleep(0.2)
    t0 = time.monotonic()
    cancel()
    assert done.wait(5.0) and time.monotonic() - t0 < 2.0
    assert isinstance(box[0], AbortedError) and "cancelled" in str(box[0])


def test_restarted_task_is_found_on_its_new_data_port():
    """After the sending task restarts (new data port), pooled connections are replaced."""
    spec = ClusterSpec({"ps": [f"127.0.0.1:{_free_port()}"], "worker": ["127.0.0.1:1"]})
    ps = hb.train.Server(spec, "ps", 0)
    client = rpc_client.WorkerClient(spec.task_address("ps", 0), PS)
    try:
        v = np.arange(10.0)
        _same(_transfer(ps, client, v, "a"), v)
        old = ps._data.port
        ps.stop(grace=0)
        ps = hb.train.Server(spec, "ps", 0)
        assert ps._data.port != old
        _same(_transfer(ps, client, v, "b"), v)
        assert client._data_port == ps._data.port
    finally:
        client.close()
        ps.stop(grace=0)


def test_lost_data_connection_is_unavailable_naming_the_task(pair):
    """The sending task stopping mid-wait fails the Recv promptly (aborted or unavailable),
    naming the task."""
    ps, wk = pair("grpc+tcp")
    client = wk._peer(PS)
    _same(_transfer(ps, client, np.ones(3), "warm"), np.ones(3))
    box, done = [], threading.Event()
    client.recv_tensor_async(
        next(_steps), _key("gone"), 30.0, lambda v=None, e=None: (box.append(e), done.set())
    )
    t0 = time.monotonic()
    while not len(ps.worker.steps) and time.monotonic() - t0 < 5:
        time.sleep(0.01)  # until the request waits on the PS
    t0 = time.monotonic()
    ps.stop(grace=0)
    assert done.wait(5.0) and time.monotonic() - t0 < 3.0
    assert isinstance(box[0], (UnavailableError, AbortedError)), box[0]
    assert PS in str(box[0])


def test_unknown_protocol_is_rejected():
    """Server(protocol=...) takes 'grpc+tcp' or 'grpc' only."""
    with pytest.raises(ValueError, match="protocol 'grpc\\+verbs' is not supported"):
        hb.train.Server({"ps": ["127.0.0.1:0"]}, "ps", 0, protocol="grpc+verbs")
    s = hb.train.Server({"ps": ["127.0.0.1:0"]}, "ps", 0, start=False)
    assert s.protocol == "grpc+tcp" and s.server_def["protocol"] == "grpc+tcp"
    s.stop(grace=0)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_tensor_over_the_size_limit_is_refused_before_allocation(pair, protocol):
    """A tensor over max_tensor_bytes fails RESOURCE_EXHAUSTED naming the key; serving goes on."""
    ps, wk = pair(protocol, max_tensor_bytes=1 << 20)
    client = wk._peer(PS)
    with pytest.raises(ResourceExhaustedError, match=r"huge.*over the 1048576-byte limit"):
        _transfer(ps, client, np.zeros((2 << 20) + 1, np.uint8), "huge")
    v = np.arange(1 << 18, dtype=np.float32)  # exactly 1 MiB: allowed
    _same(_transfer(ps, client, v, "fits"), v)


def test_data_port_of_another_task_is_noticed_and_rediscovered(pair):
    """A cached data port that now serves another task is dropped and asked for again."""
    ps, wk = pair("grpc+tcp")
    client = rpc_client.WorkerClient(ps.cluster.task_address("ps", 0), PS)
    try:
        client._data_port = wk._data.port  # stale: the worker task's data channel
        v = np.arange(7, dtype=np.int32)
        _same(_transfer(ps, client, v, "moved"), v)
        assert client._data_port == ps._data.port
    finally:
        client.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_received_buffers_are_reused_only_when_nothing_refers_to_them(pair, protocol):
    """Large received tensors land in recycled buffers: one still referenced (even through a
    view or a memoryview) keeps its value while later transfers of the same size arrive; a
    dropped one is reused."""
    ps, wk = pair(protocol)
    client = wk._peer(PS)
    n = 300_000  # 1.2 MB of float32: pooled
    first = _transfer(ps, client, np.full(n, 1.0, np.float32), "r1")
    view = first[10:20]
    mem = memoryview(first)
    del first
    second = _transfer(ps, client, np.full(n, 2.0, np.float32), "r2")
    np.testing.assert_array_equal(view, np.full(10, 1.0, np.float32))
    assert np.frombuffer(mem, np.float32).min() == 1.0
    np.testing.assert_array_equal(second, np.full(n, 2.0, np.float32))
    assert not np.shares_memory(view, second)
    addr = second.__array_interface__["data"][0]
    del second
    third = _transfer(ps, client, np.full(n, 3.0, np.float32), "r3")  # reuses second's buffer
    assert third.__array_interface__["data"][0] == addr
    np.testing.assert_array_equal(third, np.full(n, 3.0, np.float32))
    np.testing.assert_array_equal(view, np.full(10, 1.0, np.float32))
    del view, mem
    # the pool stays within its bound: buffers in use are forgotten, then the oldest idle ones
    pool = wire._RecvPool(4 << 20, 1 << 20)
    held = [pool.take(1 << 20) for _ in range(4)]
    assert pool._bytes == 4 << 20
    extra = pool.take(2 << 20)  # all four in use: forgotten, not overwritten
    addr, size = extra.__array_interface__["data"][0], extra.nbytes
    del extra
    assert pool._bytes == 2 << 20 and size == 2 << 20
    held[0][:] = 7
    again = pool.take(2 << 20)  # idle now: the same buffer
    assert again.__array_interface__["data"][0] == addr and pool._bytes == 2 << 20
    assert (held[0] == 7).all()
    del again
    pool = wire._RecvPool(4 << 20, 1 << 20)
    pool.take(1 << 20), pool.take(1 << 20)  # both idle at once
    pool.take(3 << 20)  # room made by forgetting the oldest idle buffer only
    assert pool._bytes == 4 << 20 and [b.nbytes for b in pool._bufs] == [1 << 20, 3 << 20]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_large_variable_is_lent_not_copied(pair, protocol):
    """A Send of a large variable buffer streams the buffer itself (no snapshot copy); an update
    before it is sent writes to a copy, so the receiver still gets the value as of the Send; once
    sent, updates are in place again. Small values are still copied."""
    ps, wk = pair(protocol)
    w = ps.worker
    from hetbed.runtime.graph import TensorShape
    from hetbed.runtime.ops.state import VarHandle

    n = (1 << 17) + 5  # 512 KB: lent
    h = VarHandle("lent", hb.float32, TensorShape([n]))
    h.set(np.arange(n, dtype=np.float32))
    w.resources[next(iter(w.resources))]["lent"] = h
    buf = h.value
    out = wire.out_tensor(buf, "lent", copy=True, lender=h)
    assert out.borrowing and np.shares_memory(out.array, buf) and out._pooled is None
    out.release()
    assert not out.borrowing and h.writable() is buf
    step = next(_steps)
    w.steps.get(step).send(_key("lent"), buf)
    new = h.writable()  # an update while the Send is outstanding: copy on write
    assert new is h.value and new is not buf  # (so the Send lent the buffer, did not copy it)
    new += 1.0
    got = wk._peer(PS).recv_tensor(step, _key("lent"), 20.0)
    np.testing.assert_array_equal(got, np.arange(n, dtype=np.float32))
    assert h.writable() is new  # the loan ended when it was sent: in place again
    small = VarHandle("small", hb.float32, TensorShape([4]))
    small.set(np.zeros(4, np.float32))
    w.resources[next(iter(w.resources))]["small"] = small
    before = small.value
    step = next(_steps)
    w.steps.get(step).send(_key("small"), before)
    assert small.writable() is before  # copied at the Send, not lent
    before += 5.0
    np.testing.assert_array_equal(wk._peer(PS).recv_tensor(step, _key("small"), 20.0), 0.0)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_large_fetches_stream_after_the_reply(pair, protocol, monkeypatch):
    """A RunGraph reply over the data channel carries small fetches inline and large ones as
    streams after it (no copies into the reply); values, dtypes, order and scalars arrive as
    fetched, and a large fetch is not held to the RunGraph message limit. Over gRPC alone every
    fetch stays inline."""
    from hetbed.runtime.distributed import grpc_server

    streamed = []
    real = grpc_server.out_tensor

    def spy(*a, **k):
        out = real(*a, **k)
        streamed.append(out.nbytes)
        return out

    monkeypatch.setattr(grpc_server, "out_tensor", spy)
    ps, wk = pair(protocol, max_message_bytes=1 << 20)
    g = hb.Graph()
    with g.as_default():
        with hb.device("/job:ps/task:0"):
            # (made on the PS: as constants they would be over the limit in the graph itself)
            big = hb.Variable(hb.cast(hb.range(600_000), hb.float32), name="big")  # 2.4 MB
            ints = hb.Variable(
                hb.reshape(hb.range(40_000, dtype=hb.int64), [200, 200]), name="ints"
            )
            small = hb.Variable(np.float32(3.5), name="small")
            doubled = big * 2.0
        init = hb.global_variables_initializer()
    with hb.Session(wk.target, graph=g) as sess:
        sess.run(init)
        if protocol == "grpc":  # inline: over the 1 MB message limit
            with pytest.raises(ResourceExhaustedError):
                sess.run([big, small])
            return
        got = sess.run([small, big, ints, doubled, small])
    assert got[0] == np.float32(3.5) and got[4] == np.float32(3.5)
    np.testing.assert_array_equal(got[1], np.arange(600_000, dtype=np.float32))
    np.testing.assert_array_equal(got[2], np.arange(40_000).reshape(200, 200))
    assert got[2].dtype == np.int64 and got[2].shape == (200, 200)
    np.testing.assert_array_equal(got[3], 2.0 * np.arange(600_000, dtype=np.float32))
    assert sorted(streamed[-3:]) == [320_000, 2_400_000, 2_400_000]  # the small one inline
    got[1][:] = -1  # the fetched arrays are the caller's: the variable is untouched
    with hb.Session(wk.target, graph=g) as sess:
        np.testing.assert_array_equal(sess.run(big)[:3], [0, 1, 2])


@pytest.mark.parametrize(
    "tail, err, match",
    [
        (b"x" * 50, UnavailableError, "50 of 100"),  # the stream is cut short
        (None, DataLossError, "malformed stream"),  # a bad header
        (b"", ResourceExhaustedError, "over the"),  # over max_tensor_bytes
    ],
)
def test_bad_streamed_fetches_raise_clear_errors(tail, err, match):
    """A RunGraph reply whose streamed fetch is truncated, malformed or oversized fails the call
    with an error naming it, instead of returning a wrong value or waiting."""
    if tail is None:
        stream = _header(4, shape=[-1])
    elif tail:
        stream = _header(100)
    else:
        stream = _header(2 << 20)
    reply = _tcp_frame({"ok": True, "fetches": [{"stream": stream}]}) + (tail or b"")
    fake = _FakeTask([], reply)
    try:
        fake.client._data_port = fake.tcp.getsockname()[1]
        call = fake.client.start_call("RunGraph", {"handle": "g1", "step_id": 1}, 5.0)
        with pytest.raises(err, match=match) as e:
            call.finish()
        assert "RunGraph" in str(e.value), str(e.value)
    finally:
        fake.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_large_feeds_stream_after_the_request(pair, protocol):
    """Over the data channel a RunGraph request carries small feeds inline and large ones as
    streams after it: values, dtypes and order arrive as fed, and a large feed is held to
    max_tensor_bytes rather than to the message limit. Over gRPC alone feeds stay in the
    message, under its limit."""
    ps, wk = pair(protocol, max_message_bytes=1 << 20)
    g = hb.Graph()
    with g.as_default():
        with hb.device("/job:ps/task:0"):
            a = hb.placeholder(hb.float32, [None])
            b = hb.placeholder(hb.int64, [None, 3])
            c = hb.placeholder(hb.float32, [])
            out = [hb.reduce_sum(a) + c, hb.reduce_sum(b), a[-1], b[-1]]
    a_np = np.arange(400_000, dtype=np.float32)  # 1.6 MB: over the message limit
    b_np = np.arange(3 * 30_000, dtype=np.int64).reshape(-1, 3)  # 720 KB
    with hb.Session(wk.target, graph=g) as sess:
        if protocol == "grpc":
            with pytest.raises(ResourceExhaustedError):
                sess.run(out, {a: a_np, b: b_np, c: 0.5})
            return
        got = sess.run(out, {a: a_np, b: b_np, c: 0.5})
    assert got[0] == pytest.approx(float(a_np.astype(np.float64).sum()) + 0.5, rel=1e-6)
    assert got[1] == b_np.sum() and got[2] == 399_999.0
    np.testing.assert_array_equal(got[3], b_np[-1])
