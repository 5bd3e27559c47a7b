"""A SimSession's memory stays bounded over many steps: it keeps the RunRecords of the last
``keep_records`` steps, every step's time, and streams each record to ``on_record``; the
network's flow list holds only the current step's flows."""

from __future__ import annotations

import numpy as np
import pytest

import hetbed as hb
from hetbed.devices.costmodel import DevicePerf
from hetbed.simulator import Cluster, SimSession, sim_value

PERF = DevicePerf("toy", {"float32": 1e12}, memory_bandwidth=100e9, memory_bytes=1e9)
NIC = (1e9, 50e-6)
N = 250_000  # 1 MB of float32 from the PS to each of two workers


def _session(**kw):
    c = Cluster()
    c.add_task("ps", 0, cpu=PERF, nic=NIC)
    for i in range(2):
        c.add_task("worker", i, cpu=PERF, nic=NIC)
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, [N])
        with hb.device("/job:ps/task:0/device:cpu:0"):
            a = hb.identity(x)
        outs = []
        for i in range(2):
            with hb.device(f"/job:worker/task:{i}/device:cpu:0"):
                outs.append(hb.reduce_sum(a * 2.0))
    return c, SimSession(c, graph=g, **kw), outs, x


def test_records_window_step_times_and_streaming():
    seen = []
    c, s, outs, x = _session(keep_records=5, on_record=seen.append)
    steps = 40
    for _ in range(steps):
        s.run(outs, {x: sim_value([N])})
    assert len(s.records) == 5 and s.records[-1] is s.last_record
    assert len(seen) == steps and seen[-5:] == list(s.records)
    assert len(s.step_times) == steps
    assert s.step_times[-5:] == [r.step_time_s for r in s.records]
    # each kept record has its own two flows; the network keeps the last step's only
    assert all(len(r.flows) == 2 and (r.flows.bytes == 4 * N).all() for r in s.records)
    assert len(c.network.records) == 2
    # every step transfers 1 MB to two workers sharing the PS's NIC: same time each step
    assert np.allclose(s.step_times[2:], s.step_times[2], rtol=1e-9)


def test_unbounded_keeps_everything():
    c, s, outs, x = _session(keep_records=None)
    for _ in range(12):
        s.run(outs, {x: sim_value([N])})
    assert len(s.records) == 12 and len(c.network.records) == 24
    assert len(c.network.flow_frame()) == 24


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "10"])
def test_keep_records_is_checked(bad):
    with pytest.raises(ValueError, match="keep_records must be an int >= 1 or None"):
        _session(keep_records=bad)
