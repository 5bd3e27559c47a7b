"""A simulated step the message and memory tests share: a worker task reads a tensor from a PS
task."""

from __future__ import annotations

import numpy as np

import hetbed as hb
from hetbed.simulator import Cluster, SimSession


def read_step(perf, nbytes, nic, machine=None, steps=1):
    """(cluster, last record) of ``steps`` steps in which the worker task reads ``nbytes`` from
    the PS task (both on ``perf``, joined by ``nic``; on one ``machine`` when given)."""
    c = Cluster()
    c.add_task("ps", 0, cpu=perf, nic=nic, machine=machine)
    c.add_task("worker", 0, cpu=perf, nic=nic, machine=machine)
    n = nbytes // 4
    with hb.Graph().as_default():
        with hb.device("/job:ps/task:0/device:cpu:0"):  # (a constant: a value fed to the PS
            a = hb.identity(hb.constant(np.zeros(n, np.float32)))  # would travel there first)
        with hb.device("/job:worker/task:0/device:cpu:0"):
            b = hb.identity(a)
        s = SimSession(c)
        for _ in range(steps):
            s.run(b.op)  # (run, not fetched: a fetched value would travel back to the client)
    return c, s.last_record
