"""The OS names of the runtime's own threads.

CPython leaves every thread it starts with its process's name, so ``top -H``, ``ps -L``, py-spy
and /proc/PID/task/TID/comm show a task's message handlers, RecvTensor callers, queue runners and
checkpoint saver alike. Each of the runtime's threads names itself as it starts
(``name_this_thread``), so that their CPU can be told apart (``bench/cluster_fidelity.py --cpu``
sums each process's by name):

=================  ==========================================================================
hetbed-rpc         a gRPC server's handler (``distributed/server.py``)
hetbed-data        a data-channel connection's handler: RunGraph, RecvTensor served
hetbed-accept      the data channel's listener
hetbed-watch       the data channel's hang-up watch
hetbed-recv        a RecvTensor or RunGraph call to another task (``distributed/threads.py``)
hetbed-intraop     a worker of a kernel split into blocks (``ops/intraop.py``)
hetbed-queue       a QueueRunner's enqueue loop
hetbed-syncrep     SyncReplicasOptimizer's chief queue runner
hetbed-ckpt        the Supervisor's checkpoint saver
=================  ==========================================================================
"""

from __future__ import annotations

import threading

#: Linux keeps a thread's name in 15 bytes and a terminating zero
MAX_NAME_BYTES = 15


def name_this_thread(name: str) -> None:
    """Give the calling thread the OS name ``name`` (ASCII, cut to ``MAX_NAME_BYTES``), where
    the kernel lets a process name its threads through /proc (Linux); elsewhere nothing. The
    thread's Python name is left as it is."""
    text = name.encode("ascii", "replace")[:MAX_NAME_BYTES]
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/comm", "wb") as f:
            f.write(text)
    except OSError:  # (no /proc, or not writable here: the name is a convenience)
        pass
