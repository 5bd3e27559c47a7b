"""use_locking: updates built with it hold the variable's lock, and every copy that leaves a step
(a fetch, a cross-task transfer) is taken under it, so readers see each locked update whole."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import hetbed as hb
from hetbed.runtime.distributed.cluster import ClusterSpec
from hetbed.runtime.distributed.launcher import free_ports

N = 1 << 20  # large enough that numpy updates it without holding the GIL throughout
UPDATES = 150


def _race(update, read) -> tuple[int, int]:
    """Run ``update`` UPDATES times on one thread while reading on this one; (reads, torn)."""
    done = threading.Event()
    errors: list = []

    def updater():
        try:
            for _ in range(UPDATES):
                update()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            done.set()

    t = threading.Thread(target=updater)
    t.start()
    reads = torn = 0
    while not done.is_set():
        got = read()
        reads += 1
        torn += int(got.min() != got.max())  # every update adds 1 to every element
    t.join()
    assert not errors, errors
    return reads, torn


@pytest.mark.parametrize("op", ["assign_add", "assign_sub", "scatter_add", "optimizer"])
def test_locked_updates_are_never_seen_half_done_by_fetches(op):
    with hb.Graph().as_default():
        v = hb.Variable(np.zeros(N, np.float32), name="v")
        if op == "assign_add":
            upd = hb.assign_add(v, np.ones(N, np.float32), use_locking=True)
        elif op == "assign_sub":
            upd = hb.assign_sub(v, -np.ones(N, np.float32), use_locking=True)
        elif op == "scatter_add":
            upd = hb.scatter_add(v, np.arange(N), np.ones(N, np.float32), use_locking=True)
        else:  # descending on loss = -sum(v) with rate 1: v += 1
            opt = hb.train.GradientDescentOptimizer(1.0, use_locking=True)
            upd = opt.minimize(-hb.reduce_sum(v))
        read = v.read_value() if hasattr(v, "read_value") else hb.identity(v)
        with hb.Session() as s:
            s.run(v.initializer)
            reads, torn = _race(lambda: s.run(upd), lambda: s.run(read))
            final = s.run(v)
    assert torn == 0, f"{torn} of {reads} fetches saw a half-done update"
    np.testing.assert_array_equal(final, np.full(N, UPDATES, np.float32))


def test_locked_updates_are_never_seen_half_done_across_tasks():
    ps_port, wk_port = free_ports(2)
    spec = ClusterSpec({"ps": [f"127.0.0.1:{ps_port}"], "worker": [f"127.0.0.1:{wk_port}"]})
    servers = [hb.train.Server(spec, "ps", 0), hb.train.Server(spec, "worker", 0)]
    try:
        with hb.Graph().as_default():
            with hb.device("/job:ps/task:0"):
                v = hb.Variable(hb.zeros([N]), name="v")
                upd = hb.assign_add(v, hb.ones([N]), use_locking=True)
            with hb.device("/job:worker/task:0"):
                copied = hb.identity(v) * 1.0  # crosses tasks: the PS's Send snapshot
            with hb.Session(servers[1].target) as s:
                s.run(v.initializer)
                reads, torn = _race(lambda: s.run(upd.op), lambda: s.run(copied))
    finally:
        for x in servers:
            x.stop()
    assert torn == 0, f"{torn} of {reads} transfers saw a half-done update"
