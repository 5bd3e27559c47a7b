"""RunGraph and CleanupStep over the TCP data channel (``grpc+tcp``): the same results and errors
as over gRPC, a master that hangs up aborts its step, and a data port that refuses falls back to
gRPC."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import hetbed as hb
from hetbed.runtime.distributed.client import WorkerClient
from hetbed.runtime.distributed.cluster import ClusterSpec
from hetbed.runtime.distributed.launcher import free_ports

PS = "/job:ps/replica:0/task:0"


@pytest.fixture
def cluster():
    made: list = []

    def make(protocol: str):
        ps_port, wk_port = free_ports(2)
        spec = ClusterSpec({"ps": [f"127.0.0.1:{ps_port}"], "worker": [f"127.0.0.1:{wk_port}"]})
        ps = hb.train.Server(spec, "ps", 0, protocol=protocol)
        wk = hb.train.Server(spec, "worker", 0, protocol=protocol)
        made.extend([ps, wk])
        return ps, wk

    yield make
    for s in made:
        s.stop(grace=0)


@pytest.fixture
def grpc_calls(monkeypatch):
    """Names of the asynchronous calls that went over gRPC."""
    seen: list[str] = []
    real = WorkerClient._call_grpc_async

    def spy(self, name, *a, **kw):
        seen.append(name)
        return real(self, name, *a, **kw)

    monkeypatch.setattr(WorkerClient, "_call_grpc_async", spy)
    return seen


def _model():
    with hb.device("/job:ps/task:0"):
        w = hb.Variable(np.arange(6, dtype=np.float32).reshape(2, 3), name="w")
    with hb.device("/job:worker/task:0"):
        x = hb.placeholder(hb.float32, [None, 2])
        y = hb.matmul(x, w)
        step = hb.assign_add(w, hb.ones_like(w))
    return w, x, y, step


@pytest.mark.parametrize("protocol", ["grpc+tcp", "grpc"])
def test_steps_over_either_transport_compute_the_same(cluster, grpc_calls, protocol):
    ps, wk = cluster(protocol)
    with hb.Graph().as_default() as g:
        w, x, y, step = _model()
        with hb.Session(wk.target, graph=g) as sess:
            sess.run(w.initializer)
            xv = np.array([[1.0, 2.0], [3.0, -1.0]], np.float32)
            for k in range(3):
                want = xv @ (np.arange(6, dtype=np.float32).reshape(2, 3) + k)
                np.testing.assert_allclose(sess.run(y, {x: xv}), want, rtol=1e-6)
                sess.run(step)
    runs = grpc_calls.count("RunGraph")
    if protocol == "grpc+tcp":
        assert runs == 0, grpc_calls  # every RunGraph took the data channel
    else:
        assert runs >= 6  # no data channel: gRPC it is


def test_error_reply_names_the_task_and_the_connection_stays_usable(cluster):
    ps, wk = cluster("grpc+tcp")
    client = WorkerClient(ps.cluster.task_address("ps", 0), PS)
    try:
        client.call("GetStatus", {}, timeout=5)
        assert client._data_port == ps._data.port
        got: list = []
        done = threading.Event()

        def cb(reply=None, error=None):
            got.append((reply, error))
            done.set()

        req = {"handle": "no-such-graph", "step_id": 5, "timeout_s": 0.0, "feeds": {}}
        client.call_async("RunGraph", req, 10.0, cb)
        assert done.wait(10)
        reply, err = got[0]
        assert reply is None and isinstance(err, hb.errors.NotFoundError)
        assert PS in str(err) and "no-such-graph" in str(err)
        assert len(client._idle) == 1  # the connection went back to the pool
        done.clear()
        client.call_async("CleanupStep", {"step_id": 5, "reason": "test"}, 10.0, cb)
        assert done.wait(10) and got[1] == ({}, None)
    finally:
        client.close()


def test_master_hanging_up_aborts_the_step(cluster, grpc_calls):
    """A RunGraph whose master gives up (its data connection closes) is aborted on the task: a
    dequeue left waiting in it does not take an element enqueued later."""
    ps, wk = cluster("grpc+tcp")
    with hb.Graph().as_default() as g:
        with hb.device("/job:ps/task:0"):
            q = hb.FIFOQueue(-1, hb.float32, shapes=[[]])
            enq = q.enqueue(hb.placeholder_with_default(7.0, []))
            deq = q.dequeue()
        with hb.Session(wk.target, graph=g) as sess:
            sess.run(enq)
            assert sess.run(deq) == 7.0  # registers the dequeue's graph on the PS
            part = next(p for p in sess._last_plan.parts if "ps" in p.task)
            req = {"handle": part.handle, "step_id": 424242, "timeout_s": 0.0, "feeds": {}}
            got: list = []
            done = threading.Event()

            def cb(reply=None, error=None):
                got.append(error)
                done.set()

            part.client.call_async("RunGraph", req, 0.5, cb)  # times out, closes its connection
            assert done.wait(10)
            assert isinstance(got[0], hb.errors.DeadlineExceededError), got
            deadline = time.monotonic() + 10
            while 424242 not in ps.worker.steps._aborted and time.monotonic() < deadline:
                time.sleep(0.02)
            assert "master's RunGraph call ended" in ps.worker.steps._aborted[424242]
            sess.run(enq)
            opts = hb.RunOptions(timeout_in_ms=3000)
            assert sess.run(deq, options=opts) == 7.0  # not taken by the abandoned step
    assert "RunGraph" not in grpc_calls


def test_refused_data_port_falls_back_to_grpc(cluster, grpc_calls):
    ps, wk = cluster("grpc+tcp")
    with hb.Graph().as_default() as g:
        with hb.device("/job:ps/task:0"):
            v = hb.Variable(np.float32(3.0), name="v")
            double = v * 2.0
        with hb.Session(wk.target, graph=g) as sess:
            sess.run(v.initializer)
            assert sess.run(double) == 6.0
            assert "RunGraph" not in grpc_calls
            ps._data.stop()  # the data port now refuses connections (and its connections close)
            assert sess.run(double) == 6.0
    assert "RunGraph" in grpc_calls


def test_steps_reuse_their_data_connections_also_from_several_threads(
    cluster, grpc_calls, monkeypatch
):
    """The master sends RunGraph and reads its reply on the stepping thread: a finished call's
    connection goes back to the pool whole (one-task and two-task steps alike), so steps make no
    new connections, and steps run at once from several threads never share one."""
    ps, wk = cluster("grpc+tcp")
    connects: list[int] = []
    real = WorkerClient._connect

    def counting(self, *a, **kw):
        connects.append(1)
        return real(self, *a, **kw)

    monkeypatch.setattr(WorkerClient, "_connect", counting)
    with hb.Graph().as_default() as g:
        with hb.device("/job:ps/task:0"):
            v = hb.Variable(np.zeros(4, np.float32), name="v")
            bump = hb.assign_add(v, np.ones(4, np.float32))  # a step on the PS only
        with hb.device("/job:worker/task:0"):
            read = hb.reduce_sum(hb.identity(v))  # a step on both tasks
        with hb.Session(wk.target, graph=g) as sess:
            sess.run(v.initializer)
            sess.run([bump.op]), sess.run(read)
            before = len(connects)
            for k in range(5):
                sess.run(bump.op)
                assert sess.run(read) == 4.0 * (k + 2)
            assert len(connects) == before  # every step on pooled connections
            errors: list = []

            def steps(fetch):
                try:
                    for _ in range(40):
                        sess.run(fetch)
                except Exception as e:  # noqa: BLE001 - reported below
                    errors.append(e)

            threads = [threading.Thread(target=steps, args=(f,)) for f in (bump.op, read)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert not errors, errors
            assert sess.run(read) == 4.0 * (6 + 40)
    assert "RunGraph" not in grpc_calls
