"""The runtime's threads carry OS names (runtime/threadname.py), so that ``top -H``, py-spy and
/proc tell a task's message handlers, RecvTensor callers and queue runners apart."""

from __future__ import annotations

import os
import sys
import threading

import numpy as np
import pytest

import hetbed as hb
from hetbed.runtime.threadname import MAX_NAME_BYTES, name_this_thread

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="thread names are read from /proc"
)


def _names() -> dict[int, str]:
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                out[int(tid)] = f.read().strip()
        except OSError:  # (a thread that ended meanwhile)
            continue
    return out


def test_a_thread_names_itself_and_no_other():
    got = {}

    def run(name):
        name_this_thread(name)
        got[name] = _names()[threading.get_native_id()]

    before = _names()[threading.get_native_id()]
    for name in ("hetbed-test", "hetbed-a-much-longer-name", "hetbed-é"):
        t = threading.Thread(target=run, args=(name,))
        t.start()
        t.join()
    assert got["hetbed-test"] == "hetbed-test"
    assert got["hetbed-a-much-longer-name"] == "hetbed-a-much-longer-name"[:MAX_NAME_BYTES]
    assert got["hetbed-é"] == "hetbed-?"  # (ASCII only)
    assert _names()[threading.get_native_id()] == before  # the caller's own is untouched


def test_a_clusters_threads_are_named_by_what_they_do():
    """A step of a worker's session that reads a PS task's variable (both servers in this
    process): its RunGraph calls are served by gRPC or data-channel handlers and the read goes
    through a RecvTensor caller, each named; the listener too."""
    from hetbed.simulator.messages import free_port

    spec = hb.train.ClusterSpec(
        {"ps": [f"127.0.0.1:{free_port()}"], "worker": [f"127.0.0.1:{free_port()}"]}
    )
    servers = [hb.train.Server(spec, job, 0) for job in ("ps", "worker")]
    try:
        with hb.Graph().as_default():
            with hb.device("/job:ps/task:0"):
                v = hb.Variable(np.float32(1.0))
            with hb.device("/job:worker/task:0"):
                out = v * 3.0
            with hb.Session(servers[1].target) as sess:
                sess.run(v.initializer)
                assert sess.run(out) == pytest.approx(3.0)
        names = set(_names().values())
        assert {"hetbed-recv", "hetbed-accept"} <= names, names
        assert names & {"hetbed-data", "hetbed-rpc"}, names
    finally:
        for s in servers:
            s.stop()
