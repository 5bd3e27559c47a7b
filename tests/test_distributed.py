"""The gRPC distributed runtime: servers, the master session, cross-task Send/Recv, safety."""

from __future__ import annotations

import socket
import time

import grpc
import msgpack
import numpy as np
import pytest

import hetbed as hb
from hetbed.runtime import executor as hb_executor
from hetbed.runtime.distributed import DistributedSession, UnauthenticatedError
from hetbed.runtime.distributed.cluster import ClusterSpec
from hetbed.runtime.errors import FailedPreconditionError, ResourceExhaustedError

PS_CPU = "/job:ps/replica:0/task:0/device:cpu:0"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def make_cluster():
    """Start in-process servers for a cluster; stop them all at the end of the test."""
    servers: list = []

    def make(ps: int = 1, workers: int = 1, **kw):
        spec = ClusterSpec(
            {
                "ps": [f"127.0.0.1:{_free_port()}" for _ in range(ps)],
                "worker": [f"127.0.0.1:{_free_port()}" for _ in range(workers)],
            }
        )
        out = {}
        for job in ("ps", "worker"):
            for i in range(spec.num_tasks(job)):
                s = hb.train.Server(spec, job, i, **kw)
                servers.append(s)
                out[(job, i)] = s
        return spec, out

    yield make
    for s in servers:
        s.stop(grace=0)


def _raw_call(target: str, method: str, payload: bytes, metadata=(), max_bytes: int = 64 << 20):
    address = target[len("grpc://") :]
    opts = [("grpc.max_send_message_length", max_bytes)]
    with grpc.insecure_channel(address, options=opts) as ch:
        call = ch.unary_unary(
            f"/hetbed.WorkerService/{method}", request_serializer=None, response_deserializer=None
        )
        return call(payload, metadata=metadata, timeout=10)


def test_cluster_spec_accessors():
    """ClusterSpec gives jobs, task counts and addresses, and rejects malformed specs."""
    c = hb.train.ClusterSpec({"ps": ["h:1"], "worker": {0: "h:2", 2: "h:3"}})
    assert c.jobs == ["ps", "worker"]
    assert c.num_tasks("worker") == 2
    assert c.task_address("worker", 2) == "h:3"
    assert c.job_tasks("worker") == ["h:2", None, "h:3"]
    assert c.as_dict() == {"ps": ["h:1"], "worker": {0: "h:2", 2: "h:3"}}
    assert hb.train.ClusterSpec(c) == c
    with pytest.raises(ValueError, match="no job 'chief'"):
        c.task_address("chief", 0)
    with pytest.raises(ValueError, match="bad address 'nohost'"):
        hb.train.ClusterSpec({"ps": ["nohost"]})


def test_server_refuses_non_loopback_without_bind_all():
    """A server will not listen on a non-loopback host unless bind_all/bind_host says so."""
    with pytest.raises(ValueError, match="refusing to listen on non-loopback"):
        hb.train.Server({"worker": ["10.1.2.3:2222"]}, "worker", 0)
    for kw in ({"bind_all": True}, {"bind_host": "10.1.2.3"}):  # ... nor without a token there
        with pytest.raises(ValueError, match="refusing to serve on .* without a cluster token"):
            hb.train.Server({"worker": ["10.1.2.3:2222"]}, "worker", 0, start=False, **kw)


def test_session_target_dispatch_and_devices(make_cluster):
    """hb.Session("grpc://...") is a DistributedSession listing every task's devices."""
    _, s = make_cluster(1, 1)
    assert s[("ps", 0)].target.startswith("grpc://127.0.0.1:")
    with hb.Session(s[("worker", 0)].target, graph=hb.Graph()) as sess:
        assert isinstance(sess, DistributedSession)
        names = [d.name for d in sess.list_devices()]
    assert PS_CPU in names and "/job:worker/replica:0/task:0/device:cpu:0" in names


def _model(dist: bool):
    """Variables on the PS, compute on the worker (or both local); random init seeded."""
    g = hb.Graph()
    g.seed = 7
    ps = "/job:ps/task:0" if dist else None
    wk = "/job:worker/task:0" if dist else None
    with g.as_default():
        with hb.device(ps):
            w = hb.Variable(hb.random_normal([3, 4]), name="w")
            b = hb.Variable(np.arange(4, dtype=np.float32), name="b")
        with hb.device(wk):
            x = hb.placeholder(hb.float32, [None, 3], name="x")
            h = hb.nn.relu(hb.matmul(x, w) + b)
            y = hb.reduce_sum(h * h, axis=1)
            with hb.control_dependencies([h]):
                marker = hb.identity(y, name="marker")
        with hb.device(ps), hb.control_dependencies([marker]):  # a cross-task control edge
            z = y[0] * 2.0 + hb.reduce_sum(w)  # back to the PS
        init = hb.global_variables_initializer()
    return g, init, (h, y, marker, z, w)


def test_remote_values_match_local_session(make_cluster):
    """A graph split between /job:ps and /job:worker computes what a local session does."""
    _, s = make_cluster(1, 1)
    xv = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    g, init, fetches = _model(dist=True)
    with hb.Session(s[("worker", 0)].target, graph=g) as sess:
        sess.run(init)
        got = sess.run(fetches, {"x:0": xv})
        np.testing.assert_array_equal(sess.run("x:0", {"x:0": xv}), xv)  # a fed fetch
    g2, init2, fetches2 = _model(dist=False)
    with hb.Session(graph=g2) as sess:
        sess.run(init2)
        want = sess.run(fetches2, {"x:0": xv})
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_failed_task_aborts_the_step_and_session_recovers(make_cluster):
    """A step failing on the PS (uninitialized variable) raises there; the next step works."""
    _, s = make_cluster(1, 1)
    g, init, (h, y, *_) = _model(dist=True)
    xv = np.ones((2, 3), np.float32)
    with hb.Session(s[("worker", 0)].target, graph=g) as sess:
        with pytest.raises(FailedPreconditionError, match="w"):
            sess.run(y, {"x:0": xv})
        sess.run(init)
        assert sess.run(y, {"x:0": xv}).shape == (2,)
    assert len(s[("ps", 0)].worker.steps) == 0 and len(s[("worker", 0)].worker.steps) == 0


def _regression(cluster=None, task: int = 0, lr: float = 0.1):
    g = hb.Graph()
    setter = (
        hb.train.replica_device_setter(cluster=cluster, worker_device=f"/job:worker/task:{task}")
        if cluster is not None
        else None
    )
    with g.as_default(), hb.device(setter):
        x = hb.placeholder(hb.float32, [None, 4], name="x")
        t = hb.placeholder(hb.float32, [None, 1], name="t")
        w = hb.Variable(np.zeros((4, 1), np.float32), name="w")
        b = hb.Variable(np.zeros((1,), np.float32), name="b")
        loss = hb.reduce_mean(hb.square(hb.matmul(x, w) + b - t))
        train = hb.train.GradientDescentOptimizer(lr).minimize(loss)
        init = hb.global_variables_initializer()
    return g, x, t, w, b, loss, train, init


def test_training_on_ps_matches_local_run(make_cluster):
    """Linear regression with 1 PS + 1 worker lowers the loss; the PS holds the local run's values."""
    spec, s = make_cluster(1, 1)
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((64, 4)).astype(np.float32)
    ts = (xs @ np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32) + 0.25).astype(np.float32)
    results = []
    for target, cluster in ((s[("worker", 0)].target, spec), ("", None)):
        g, x, t, w, b, loss, train, init = _regression(cluster)
        with hb.Session(target, graph=g) as sess:
            sess.run(init)
            losses = [sess.run([loss, train], {x: xs, t: ts})[0] for _ in range(40)]
            results.append((losses, sess.run([w, b])))
    (dl, (dw, db)), (ll, (lw, lb)) = results
    assert dl[-1] < 0.1 * dl[0]
    np.testing.assert_allclose(dl, ll, rtol=1e-5)
    np.testing.assert_allclose(dw, lw, rtol=1e-5)
    np.testing.assert_allclose(db, lb, rtol=1e-5)
    ps_vars = s[("ps", 0)].worker.resources[PS_CPU]
    assert {"w", "b"} <= set(ps_vars)
    np.testing.assert_allclose(ps_vars["w"].read(), lw, rtol=1e-5)


def test_between_graph_workers_share_ps_variables(make_cluster):
    """Two workers' own graphs with the same variable names see each other's PS updates."""
    spec, s = make_cluster(1, 2)
    sessions, graphs = [], []
    for i in range(2):
        g = hb.Graph()
        setter = hb.train.replica_device_setter(cluster=spec, worker_device=f"/job:worker/task:{i}")
        with g.as_default(), hb.device(setter):
            v = hb.Variable(np.zeros(3, np.float32), name="shared")
            step = hb.assign_add(v, hb.ones([3]) * float(i + 1))
            init = hb.global_variables_initializer()
        graphs.append((v, step, init))
        sessions.append(hb.Session(s[("worker", i)].target, graph=g))
    try:
        (v0, step0, init0), (v1, step1, _) = graphs
        sessions[0].run(init0)
        sessions[0].run(step0)
        np.testing.assert_array_equal(sessions[1].run(v1), [1, 1, 1])
        sessions[1].run(step1)
        np.testing.assert_array_equal(sessions[0].run(v0), [3, 3, 3])
    finally:
        for sess in sessions:
            sess.close()


def test_a_request_the_task_hangs_up_on_loses_no_later_call(make_cluster, monkeypatch):
    """A request over a limit is answered and the connection closed (its bytes still coming are
    not read); the reply says so, and the client closes that connection instead of pooling it.
    Here the task's hang-up is held back (as when its thread waits for the interpreter): the
    next steps, sent at once, go on new connections and succeed, and so does the refused feed's
    retry within the limit."""
    import threading

    from hetbed.runtime.distributed import datachannel

    hang_up = datachannel._hang_up
    held = threading.Event()

    def slow_hang_up(conn, last):
        conn.sendall(last)  # (the reply first, the close a moment later)
        held.wait(0.5)
        hang_up(conn, b"")

    monkeypatch.setattr(datachannel, "_hang_up", slow_hang_up)
    # (a refused feed small enough for the socket's buffers: the client has sent all of it and
    # read the reply before the task hangs up)
    _, s = make_cluster(1, 1, max_tensor_bytes=256 << 10)
    g, init, (h, y, *_) = _model(dist=True)
    with hb.Session(s[("worker", 0)].target, graph=g) as sess:
        sess.run(init)
        for _ in range(3):
            with pytest.raises(ResourceExhaustedError, match="over the 262144-byte limit"):
                sess.run(y, {"x:0": np.ones((25_000, 3), np.float32)})  # 300 kB
            assert sess.run(y, {"x:0": np.ones((4, 3), np.float32)}).shape == (4,)
            assert sess.run(y, {"x:0": np.ones((20_000, 3), np.float32)}).shape == (20_000,)
    held.set()


def test_token_is_required_and_checked(make_cluster):
    """With a cluster token, a missing or wrong token is UNAUTHENTICATED, the right one works."""
    _, s = make_cluster(1, 1, token="s3cret")
    target = s[("worker", 0)].target
    with pytest.raises(UnauthenticatedError, match="no cluster token.*HETBED_CLUSTER_TOKEN"):
        hb.Session(target, graph=hb.Graph())
    with pytest.raises(UnauthenticatedError, match="wrong cluster token"):
        hb.Session(target, graph=hb.Graph(), token="guess")
    with pytest.raises(grpc.RpcError) as e:
        _raw_call(target, "GetStatus", msgpack.packb({}))
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    g, init, (h, y, *_) = _model(dist=True)
    with hb.Session(target, graph=g, token="s3cret") as sess:  # peers pass the token too
        sess.run(init)
        assert sess.run(y, {"x:0": np.ones((1, 3), np.float32)}).shape == (1,)


def test_malformed_and_oversized_requests_are_rejected(make_cluster):
    """Bad messages get INVALID_ARGUMENT/NOT_FOUND, oversized RESOURCE_EXHAUSTED; serving goes on."""
    _, s = make_cluster(1, 1, max_message_bytes=1 << 20, max_tensor_bytes=2 << 20)
    target = s[("ps", 0)].target
    bad = [
        ("RunGraph", b"\xc1not msgpack", grpc.StatusCode.INVALID_ARGUMENT),
        ("RunGraph", msgpack.packb([1, 2]), grpc.StatusCode.INVALID_ARGUMENT),
        ("RunGraph", msgpack.packb({"handle": 3, "step_id": 1}), grpc.StatusCode.INVALID_ARGUMENT),
        ("RunGraph", msgpack.packb({"handle": "g99", "step_id": 1}), grpc.StatusCode.NOT_FOUND),
        (
            "RegisterGraph",
            msgpack.packb({"graph": {"graph": {"format": "x"}}}),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
        (
            "RecvTensor",
            msgpack.packb({"step_id": 1, "key": "a;b"}),
            grpc.StatusCode.INVALID_ARGUMENT,
        ),
        ("RunGraph", b"\x00" * (2 << 20), grpc.StatusCode.RESOURCE_EXHAUSTED),
    ]
    for method, payload, code in bad:
        with pytest.raises(grpc.RpcError) as e:
            _raw_call(target, method, payload)
        assert e.value.code() == code, (method, e.value.details())
    status = msgpack.unpackb(_raw_call(target, "GetStatus", msgpack.packb({})))
    assert status["task"] == "/job:ps/replica:0/task:0"
    g, init, (h, y, *_) = _model(dist=True)
    with hb.Session(s[("worker", 0)].target, graph=g) as sess:
        sess.run(init)  # the server still serves real steps
        with pytest.raises(ResourceExhaustedError, match="over the 2097152-byte limit"):
            sess.run(y, {"x:0": np.ones((200_000, 3), np.float32)})  # 2.4 MB over the 2 MB cap
        # a large feed streams after the request: held to max_tensor_bytes, not the message cap
        assert sess.run(y, {"x:0": np.ones((120_000, 3), np.float32)}).shape == (120_000,)
        assert sess.run(y, {"x:0": np.ones((2, 3), np.float32)}).shape == (2,)


def test_large_tensor_crosses_tasks(make_cluster):
    """A 64 MB tensor goes master -> PS -> worker -> master intact."""
    _, s = make_cluster(1, 1)
    n = 16 << 20  # 16M float32 = 64 MB
    g = hb.Graph()
    with g.as_default():
        with hb.device("/job:ps/task:0"):
            x = hb.placeholder(hb.float32, [n], name="x")
            y = x * 2.0
        with hb.device("/job:worker/task:0"):
            z = y + 1.0
            total = hb.reduce_sum(z[:1000])
    xv = np.arange(n, dtype=np.float32) % 1000.0
    with hb.Session(s[("worker", 0)].target, graph=g) as sess:
        zv, tv = sess.run([z, total], {x: xv})
    assert zv.shape == (n,) and zv.dtype == np.float32
    np.testing.assert_array_equal(zv, xv * 2.0 + 1.0)
    assert tv == pytest.approx(float(np.sum(xv[:1000] * 2.0 + 1.0)))


def test_local_server_join_and_stop():
    """create_local_server picks a free port, serves a session, and join() returns after stop()."""
    import threading

    server = hb.train.Server.create_local_server()
    try:
        assert not server.target.endswith(":0")
        g = hb.Graph()
        with g.as_default():
            c = hb.constant([1.0, 2.0]) * 3.0
        with hb.Session(server.target, graph=g) as sess:
            np.testing.assert_array_equal(sess.run(c), [3.0, 6.0])
        threading.Timer(0.05, server.stop).start()
        server.join(timeout=5)
    finally:
        server.stop()
    assert server._stopped.is_set()


def test_placement_on_a_distributed_session_is_a_clear_error():
    """placement() on a grpc session says it is not available instead of crashing."""
    cluster = hb.train.ClusterSpec({"worker": [f"127.0.0.1:{_free_port()}"]})
    server = hb.train.Server(cluster, "worker", 0)
    try:
        with hb.Graph().as_default():
            y = hb.constant(1.0) + 1.0
            with hb.Session(server.target) as s:
                assert s.run(y) == 2.0
                with pytest.raises(hb.errors.UnimplementedError, match="virtual_devices"):
                    s.placement()
    finally:
        server.stop()


def test_fetching_a_variable_reference_gives_its_value(make_cluster):
    """Fetching a variable's own tensor ("global_step:0") returns a snapshot of its value, locally
    and from a PS task, as TF does; get_global_step finds such a variable by name."""
    spec, s = make_cluster(1, 1)
    for target in ("", s[("worker", 0)].target):
        with hb.Graph().as_default() as g:
            with hb.device(hb.train.replica_device_setter(cluster=spec if target else None)):
                gs = hb.Variable(0, name="global_step", trainable=False, dtype=hb.int64)
                bump = hb.assign_add(gs, 1)
            assert hb.train.get_global_step() is gs
            with hb.Session(target, graph=g) as sess:
                sess.run(gs.initializer)
                sess.run(bump)
                before = sess.run("global_step:0")
                sess.run(bump)
                assert type(before) is np.int64 and before == 1  # a numpy scalar, as TF's
                assert sess.run("global_step:0") == 2


def test_step_is_aborted_when_the_masters_call_ends(make_cluster):
    """When the master's RunGraph call ends early (it died or gave up), the task aborts the step:
    a dequeue left waiting in it does not take an element enqueued later."""
    spec, s = make_cluster(1, 1)
    with hb.Graph().as_default() as g:
        with hb.device("/job:ps/task:0"):
            q = hb.FIFOQueue(-1, hb.float32, shapes=[[]])
            enq = q.enqueue(hb.placeholder_with_default(7.0, []))
            deq = q.dequeue()
        with hb.Session(s[("worker", 0)].target, graph=g) as sess:
            sess.run(enq)
            assert sess.run(deq) == 7.0  # registers the dequeue's graph on the PS
            part = next(p for p in sess._last_plan.parts if "ps" in p.task)
            req = {"handle": part.handle, "step_id": 424242, "timeout_s": 0.0, "feeds": {}}
            with pytest.raises(hb.errors.DeadlineExceededError):
                part.client.call("RunGraph", req, timeout=0.5)  # the call ends; the step waits
            time.sleep(0.2)
            sess.run(enq)
            opts = hb.RunOptions(timeout_in_ms=3000)
            assert sess.run(deq, options=opts) == 7.0  # not taken by the abandoned step


def test_a_cnn_trained_through_a_ps_matches_the_local_unfused_run(make_cluster):
    """Conv -> bias -> ReLU -> pool -> dense with its variables on a PS task: the worker's
    partition fuses the convolution with the bias it receives from the PS (the BiasAdd runs the
    fused kernel once the bias is in) and MaxPoolGrad with ReluGrad, and trains to the values of
    a local session that fuses nothing."""
    spec, s = make_cluster(1, 1)
    rng = np.random.default_rng(2)
    xs = rng.standard_normal((4, 8, 8, 8)).astype(np.float32)
    ys = rng.integers(0, 3, 4).astype(np.int32)
    f0 = (rng.standard_normal((3, 3, 8, 8)) * 0.3).astype(np.float32)
    w0 = (rng.standard_normal((4 * 4 * 8, 3)) * 0.1).astype(np.float32)
    off = hb.ConfigProto(
        graph_options=hb.GraphOptions(rewrite_options=hb.RewriterConfig(remapping=2))
    )
    results = []
    for target, config in ((s[("worker", 0)].target, None), ("", off)):
        g = hb.Graph()
        with g.as_default():
            with hb.device("/job:ps/task:0" if target else "/cpu:0"):
                f = hb.Variable(f0, name="f")
                b = hb.Variable(np.full(8, 0.05, np.float32), name="b")
                w = hb.Variable(w0, name="w")
            with hb.device("/job:worker/task:0" if target else "/cpu:0"):
                x = hb.placeholder(hb.float32, xs.shape)
                y = hb.placeholder(hb.int32, [4])
                h = hb.nn.relu(hb.nn.bias_add(hb.nn.conv2d(x, f, [1, 1, 1, 1], "SAME"), b))
                h = hb.nn.max_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
                logits = hb.matmul(hb.reshape(h, [4, -1]), w)
                loss = hb.reduce_mean(
                    hb.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
                )
                train = hb.train.GradientDescentOptimizer(0.005).minimize(loss)
            init = hb.global_variables_initializer()
        with hb.Session(target, graph=g, config=config) as sess:
            sess.run(init)
            losses = [sess.run([loss, train], {x: xs, y: ys})[0] for _ in range(4)]
            results.append((losses, sess.run([f, b, w])))
            if target:  # what the worker's partitions run fused
                fused = {
                    n.op.type
                    for reg in s[("worker", 0)].worker._graphs.values()
                    for n in reg.prepared.nodes
                    if getattr(n.fn, "__qualname__", "").startswith(
                        ("head_fn", "member_fn", "max_pool")
                    )
                }
    (dl, dv), (ll, lv) = results
    assert dl[-1] < dl[0]
    np.testing.assert_allclose(dl, ll, rtol=1e-4)
    for a, c in zip(dv, lv):
        np.testing.assert_allclose(a, c, rtol=1e-4, atol=1e-5)
    assert fused == {"Conv2D", "BiasAdd", "Relu", "MaxPoolGrad", "ReluGrad"}


@pytest.mark.parametrize("protocol", ["grpc+tcp", "grpc"])
def test_a_remote_step_is_traced(make_cluster, protocol):
    """RunOptions(trace_level=FULL_TRACE) on a distributed session fills RunMetadata.step_stats
    with every task's nodes, each on its task's device and on the session's clock: the PS's Send
    of the variable starts before the worker's Recv of it ends, and every row lies within the
    step as the client timed it."""
    spec, servers = make_cluster(ps=1, workers=1, protocol=protocol)
    with hb.Graph().as_default():
        with hb.device("/job:ps/task:0"):
            v = hb.Variable(np.arange(1000, dtype=np.float32), name="v")
        with hb.device("/job:worker/task:0"):
            y = hb.reduce_sum(v * 2.0)
        with hb.Session(servers[("worker", 0)].target) as s:
            s.run(v.initializer)
            meta = hb.RunMetadata()
            opts = hb.RunOptions(trace_level=hb.RunOptions.FULL_TRACE)
            t0 = time.time()
            got = s.run(y, options=opts, run_metadata=meta)
            wall = time.time() - t0
            assert s.run(y) == got  # untraced steps of the same plan still run
    assert got == 2 * np.arange(1000).sum()
    ops = meta.step_stats
    tasks = {d.split("/device")[0] for d in ops.device}
    # (once, in a fresh clone's full run, only the PS's rows came back: say what did)
    assert tasks == {"/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0"}, ops[
        ["op", "type", "device"]
    ].to_string()
    send = ops[(ops.type == "_Send") & ops.device.str.startswith("/job:ps")]
    recv = ops[(ops.type == "_Recv") & ops.device.str.startswith("/job:worker")]
    assert len(send) == len(recv) == 1
    assert send.start_s.iloc[0] < recv.end_s.iloc[0]
    assert "Sum" in set(ops.type) and (ops.duration_s >= 0).all()
    # (the session's clock starts before the request leaves; 50 ms of slack for the clocks'
    # reads in two threads)
    assert ops.start_s.min() >= -0.05 and ops.end_s.max() <= wall + 0.05
    assert list(ops.start_s) == sorted(ops.start_s)


def test_a_remote_step_takes_no_other_observer(make_cluster):
    """Profiling observers run on local sessions; a remote one says so instead of ignoring it."""
    spec, servers = make_cluster(ps=1, workers=1)
    with hb.Graph().as_default():
        with hb.device("/job:ps/task:0"):
            y = hb.constant(1.0) + 1.0
        with hb.Session(servers[("worker", 0)].target) as s:
            with pytest.raises(hb.errors.InvalidArgumentError, match="no step observer"):
                s.run_observed(y, None, lambda plan, feeds: hb_executor.StepObserver())
