"""No silent hang (issue 15, item 3): when the chief ends its MonitoredTrainingSession, the
SyncReplicas workers stop cleanly (the chief closes the token queue), long before any deadline."""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest

import hetbed as hb
from hetbed.runtime.ops.data_flow import FIFOQueue


def test_closed_queue_serves_what_it_holds_then_fails_out_of_range():
    with hb.Graph().as_default():
        q = FIFOQueue(-1, hb.int64, shapes=())
        put = q.enqueue_many(np.array([1, 2], np.int64))
        take, close = q.dequeue(), q.close()
        with hb.Session() as sess:
            sess.run(put)
            sess.run(close)
            assert [int(sess.run(take)) for _ in range(2)] == [1, 2]
            with pytest.raises(hb.errors.OutOfRangeError, match="closed and empty"):
                sess.run(take)
            with pytest.raises(hb.errors.CancelledError, match="is closed"):
                sess.run(put)  # (TF's error for an enqueue into a closed queue)
        got = []
        with hb.Session() as sess:  # a dequeue already waiting is failed by the close
            t = threading.Thread(target=lambda: got.append(_catch(sess, take)), daemon=True)
            t.start()
            time.sleep(0.2)
            sess.run(close)
            t.join(10)
        assert got and isinstance(got[0], hb.errors.OutOfRangeError)


def _catch(sess, t):
    try:
        return sess.run(t)
    except BaseException as e:  # noqa: BLE001
        return e


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_sync_workers_stop_cleanly_when_the_chief_ends():
    spec = hb.train.ClusterSpec(
        {
            "ps": [f"127.0.0.1:{_free_port()}"],
            "worker": [f"127.0.0.1:{_free_port()}" for _ in range(2)],
        }
    )
    servers = [
        hb.train.Server(spec, j, i) for j in ("ps", "worker") for i in range(spec.num_tasks(j))
    ]
    results: dict = {}

    def worker(i: int) -> None:
        g = hb.Graph()
        setter = hb.train.replica_device_setter(cluster=spec, worker_device=f"/job:worker/task:{i}")
        with g.as_default(), hb.device(setter):
            gs = hb.train.get_or_create_global_step()
            w = hb.Variable(np.ones((3, 1)), name="w")
            x = np.arange(12.0).reshape(4, 3) / 10
            loss = hb.reduce_mean(hb.square(hb.matmul(hb.constant(x), w)))
            opt = hb.train.SyncReplicasOptimizer(
                hb.train.GradientDescentOptimizer(0.01), 1, total_num_replicas=2
            )
            train = opt.minimize(loss, global_step=gs)
            last = 6 if i == 0 else 10**6  # the other worker would go on forever
            hooks = [opt.make_session_run_hook(i == 0), hb.train.StopAtStepHook(last_step=last)]
        steps = 0
        try:
            with (
                g.as_default(),
                hb.train.MonitoredTrainingSession(
                    servers[1 + i].target,
                    is_chief=(i == 0),
                    hooks=hooks,
                    config=hb.ConfigProto(operation_timeout_in_ms=300_000),
                ) as s,
            ):
                while not s.should_stop():
                    s.run(train)
                    steps += 1
            results[i] = ("ok", steps)
        except BaseException as e:  # noqa: BLE001
            results[i] = ("error", repr(e))

    try:
        threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(2)]
        for t in threads:
            t.start()
        t0 = time.monotonic()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads), f"still waiting: {results}"
        assert time.monotonic() - t0 < 60
        assert results[0][0] == "ok" and results[1][0] == "ok", results
    finally:
        for s in servers:
            s.stop(grace=0)
