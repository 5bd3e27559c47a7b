"""A Recv from a peer task that is down fails within PEER_WAIT_S with UnavailableError naming the
task, instead of waiting out its deadline; a peer restarted at the same address is reached again."""

from __future__ import annotations

import time

import numpy as np
import pytest

import hetbed as hb
from hetbed.runtime.distributed import client as rpc_client
from hetbed.runtime.distributed.cluster import ClusterSpec
from hetbed.runtime.distributed.launcher import free_ports
from hetbed.runtime.errors import UnavailableError

PS = "/job:ps/replica:0/task:0"
WK = "/job:worker/replica:0/task:0"
WAIT = 1.0


def _key(name: str) -> str:
    return f"{PS}/device:cpu:0;1;{WK}/device:cpu:0;{name};0:0"


@pytest.fixture
def short_wait(monkeypatch):
    monkeypatch.setattr(rpc_client, "PEER_WAIT_S", WAIT)


@pytest.fixture
def cluster():
    made: list = []
    ps_port, wk_port = free_ports(2)
    spec = ClusterSpec({"ps": [f"127.0.0.1:{ps_port}"], "worker": [f"127.0.0.1:{wk_port}"]})

    def start(job: str, protocol: str):
        s = hb.train.Server(spec, job, 0, protocol=protocol)
        made.append(s)
        return s

    yield start
    for s in made:
        s.stop(grace=0)


def _send_and_fetch(ps, client, step: int, value):
    ps.worker.steps.get(step).send(_key("t"), value)
    return client.recv_tensor(step, _key("t"), 60.0)


@pytest.mark.parametrize("protocol", ["grpc+tcp", "grpc"])
def test_recv_from_a_stopped_task_fails_fast_naming_it(cluster, short_wait, protocol):
    ps, wk = cluster("ps", protocol), cluster("worker", protocol)
    client = wk._peer(PS)
    v = np.arange(10, dtype=np.float32)
    np.testing.assert_array_equal(_send_and_fetch(ps, client, 1, v), v)
    ps.stop(grace=0)
    t0 = time.monotonic()
    with pytest.raises(UnavailableError) as e:
        client.recv_tensor(2, _key("t"), 60.0)  # its deadline is a minute away
    assert time.monotonic() - t0 < 10 * WAIT
    assert PS in str(e.value) and "t" in str(e.value)


def test_recv_from_a_task_that_never_started_fails_fast(short_wait):
    (port,) = free_ports(1)
    client = rpc_client.WorkerClient(f"127.0.0.1:{port}", PS)
    try:
        t0 = time.monotonic()
        with pytest.raises(UnavailableError, match=f"{PS}.*did not answer for {WAIT:g} s"):
            client.recv_tensor(1, _key("t"), 60.0)
        assert time.monotonic() - t0 < 10 * WAIT
    finally:
        client.close()


@pytest.mark.parametrize("protocol", ["grpc+tcp", "grpc"])
def test_a_task_restarted_at_the_same_address_is_reached_again(cluster, protocol):
    ps, wk = cluster("ps", protocol), cluster("worker", protocol)
    client = wk._peer(PS)
    v = np.ones((4, 4), np.float32)
    np.testing.assert_array_equal(_send_and_fetch(ps, client, 1, v), v)
    ps.stop(grace=0)
    ps2 = cluster("ps", protocol)  # same address, new data port
    np.testing.assert_array_equal(_send_and_fetch(ps2, client, 2, v * 3), v * 3)


def test_a_task_dying_during_the_handshake_reads_as_unavailable():
    """A data channel that hangs up after the challenge means a wrong token only when the task's
    gRPC service refuses the token too; a task that is gone reads as UnavailableError."""
    import socket
    import threading

    from hetbed.runtime.distributed import datachannel

    lsn = socket.create_server(("127.0.0.1", 0))
    data_port = lsn.getsockname()[1]

    def dying_server():
        conn, _ = lsn.accept()
        conn.sendall(datachannel.MAGIC + bytes(datachannel.NONCE_BYTES))
        datachannel.recv_exact(conn, len(datachannel.MAGIC) + 32)
        conn.close()  # gone before naming itself

    t = threading.Thread(target=dying_server, daemon=True)
    t.start()
    (grpc_port,) = free_ports(1)  # nothing listens there: the task's gRPC service is gone too
    client = rpc_client.WorkerClient(f"127.0.0.1:{grpc_port}", PS)
    client._data_port = data_port
    try:
        with pytest.raises(UnavailableError, match="hung up during the handshake"):
            client.recv_tensor(1, _key("t"), 20.0)
    finally:
        client.close()
        lsn.close()
        t.join(5)
