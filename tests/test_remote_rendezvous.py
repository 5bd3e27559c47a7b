"""RemoteRendezvous (runtime/distributed/worker.py): an abort that lands while a Recv's remote
call is being started still cancels that call, and the Recv reports the abort."""

from __future__ import annotations

import threading

from hetbed.runtime.distributed.worker import RemoteRendezvous
from hetbed.runtime.errors import AbortedError

KEY = "/job:ps/replica:0/task:0/device:cpu:0;1;/job:worker/replica:0/task:0/device:cpu:0;x:0;0:0"


class _Peer:
    """A peer whose recv_tensor_async lets ``during`` run before it returns (the race window)."""

    def __init__(self, during):
        self.during = during
        self.cancelled = threading.Event()
        self.callback = None

    def recv_tensor_async(self, step_id, key, timeout_s, callback):
        self.callback = callback
        self.during()

        def cancel():
            self.cancelled.set()
            callback(None, AbortedError("cancelled"))

        return cancel


def test_abort_while_the_remote_call_starts_cancels_it():
    box = {}
    peer = _Peer(lambda: box["rv"].abort(AbortedError("step aborted: ps0 failed")))
    rv = box["rv"] = RemoteRendezvous(7, "/job:worker/replica:0/task:0", lambda t: peer, 300.0)
    got = []
    rv.recv(KEY, lambda value=None, error=None: got.append((value, error)))
    assert peer.cancelled.is_set()
    assert len(got) == 1 and got[0][0] is None and isinstance(got[0][1], AbortedError)
    assert rv.idle()


def test_a_recv_that_arrived_during_the_call_is_not_cancelled():
    box = {}
    peer = _Peer(lambda: box["peer"].callback(41.5))
    box["peer"] = peer
    rv = RemoteRendezvous(7, "/job:worker/replica:0/task:0", lambda t: peer, 300.0)
    got = []
    rv.recv(KEY, lambda value=None, error=None: got.append((value, error)))
    rv.abort(AbortedError("later"))
    assert got == [(41.5, None)]
    assert not peer.cancelled.is_set()


def test_abort_after_the_call_started_cancels_it():
    peer = _Peer(lambda: None)
    rv = RemoteRendezvous(7, "/job:worker/replica:0/task:0", lambda t: peer, 300.0)
    got = []
    rv.recv(KEY, lambda value=None, error=None: got.append((value, error)))
    assert not got
    rv.abort(AbortedError("step aborted"))
    assert peer.cancelled.is_set() and isinstance(got[0][1], AbortedError)
