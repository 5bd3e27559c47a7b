"""Steady-state steps (simulator/steady.py): a step the same as the one before is replayed, and
every result a session, its devices and its network report then equals a full simulation's."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

import hetbed as hb
from hetbed.devices.costmodel import DevicePerf
from hetbed.simulator import Cluster, SimSession, sim_value
from hetbed.simulator.netresults import _FLOW_TIMES
from hetbed.simulator.steady import ShiftedRecords

# round numbers: 1 TFLOP/s, 100 GB/s, 1 us per kernel, 20 us per message end, two cores
HOST = DevicePerf(
    "host", {"float32": 1e12}, memory_bandwidth=100e9, memory_bytes=1e9, launch_overhead_s=1e-6
)
HOST = replace(HOST, cores=2, message_s=20e-6)
GPU = DevicePerf(
    "gpu", {"float32": 10e12}, memory_bandwidth=500e9, memory_bytes=8e9, launch_overhead_s=5e-6
)
NIC = (1e9, 50e-6)


def _training(machines=("a", "b"), gpu=True):
    """(cluster, graph, train op, feeds): a PS task holding two variables and a worker task
    training a two-layer model on them (SGD), on ``machines``."""
    c = Cluster()
    c.add_task("ps", 0, cpu=HOST, nic=NIC, machine=machines[0])
    c.add_task("worker", 0, cpu=HOST, gpu=(GPU, 1) if gpu else None, nic=NIC, machine=machines[1])
    g = hb.Graph()
    with g.as_default():
        with hb.device("/job:ps/task:0/device:cpu:0"):
            w1 = hb.Variable(hb.zeros([64, 128]), name="w1")
            w2 = hb.Variable(hb.zeros([128, 10]), name="w2")
        dev = "/job:worker/task:0/device:gpu:0" if gpu else "/job:worker/task:0/device:cpu:0"
        with hb.device(dev):
            x = hb.placeholder(hb.float32, [None, 64])
            h = hb.nn.relu(hb.matmul(x, w1))
            loss = hb.reduce_mean(hb.square(hb.matmul(h, w2)))
            train = hb.train.GradientDescentOptimizer(0.1).minimize(loss)
    return c, g, train, {x: sim_value([32, 64])}


CPU0 = "/job:worker/task:0/device:cpu:0"


def _local():
    """(cluster, graph): one worker task with a CPU, and a graph to build its step in."""
    c = Cluster()
    c.add_task("worker", 0, cpu=HOST, nic=NIC)
    return c, hb.Graph()


def _frames(rec):
    return [rec.ops, rec.flows, rec.devices, rec.links]


def _same_frames(a, b):
    for fa, fb in zip(_frames(a), _frames(b)):
        assert list(fa.columns) == list(fb.columns) and len(fa) == len(fb)
        for col in fa.columns:
            x, y = fa[col].to_numpy(), fb[col].to_numpy()
            if x.dtype.kind == "f":
                np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-15)
            else:
                assert list(x) == list(y), col


def _both(make, steps=8, between=None, **session_kw):
    """Runs ``steps`` steps of ``make()`` (cluster, graph, fetch, feeds) with and without step
    replay; checks that every result agrees; returns the replaying session."""
    out = []
    for replay in (True, False):
        c, g, fetch, feeds = make()
        with g.as_default():
            s = SimSession(c, graph=g, replay_steps=replay, **session_kw)
        for k in range(steps):
            if between is not None:
                between(k, c, s)
            s.run(fetch, feeds(k) if callable(feeds) else feeds)
        out.append((c, s))
    (c1, s1), (c0, s0) = out
    assert s0.steady is None
    np.testing.assert_allclose(s1.step_times, s0.step_times, rtol=1e-12)
    assert c1.env.now == pytest.approx(c0.env.now, rel=1e-12)
    for r1, r0 in zip(s1.records, s0.records):
        assert r1.start_s == pytest.approx(r0.start_s, rel=1e-12)
        _same_frames(r1, r0)
    f1, f0 = c1.network.flow_frame(), c0.network.flow_frame()  # (replayed flows kept whole)
    assert len(f1) == len(f0) and list(f1.tag) == list(f0.tag)
    cols = list(_FLOW_TIMES)
    np.testing.assert_allclose(f1[cols].to_numpy(float), f0[cols].to_numpy(float), rtol=1e-12)
    l1, l0 = c1.network.link_frame(), c0.network.link_frame()
    np.testing.assert_allclose(l1[["bytes", "busy_s"]], l0[["bytes", "busy_s"]], rtol=1e-9)
    for d1, d0 in zip(c1.devices(), c0.devices()):
        assert d1.busy_until == pytest.approx(d0.busy_until, rel=1e-12, abs=1e-15)
        assert d1.narrow_s == pytest.approx(d0.narrow_s, rel=1e-9, abs=1e-15)
        assert d1.peak_bytes == d0.peak_bytes
    return s1


def test_a_training_step_between_two_tasks_is_replayed_as_simulated():
    """SGD on a PS's variables from a worker's GPU, on two machines and on one machine whose
    two cores the tasks share: after two full steps every step is replayed, and every record
    (ops, flows, devices, links), the links' totals and the devices' clocks equal a full
    simulation's."""
    for machines in (("a", "b"), ("m", "m")):
        s = _both(lambda machines=machines: _training(machines), steps=8)
        assert s.steady.replayed == 6
        rec = s.last_record
        assert (rec.ops.type == "RunGraph").any()  # messages replayed with the kernels
        assert len(rec.flows) >= 4 and rec.flows.bytes.sum() > 2 * 64 * 128 * 4


def test_two_clients_of_one_graph_sharing_a_machine_replay_as_simulated():
    """Between-graph replication written as one graph: two worker clients train on one PS's
    variable, all three tasks on one machine's two cores (their RunGraph calls and RecvTensor
    messages queue on its cores)."""

    def make():
        c = Cluster()
        c.add_task("ps", 0, cpu=HOST, nic=NIC, machine="m")
        for i in range(2):
            c.add_task("worker", i, cpu=HOST, nic=NIC, machine="m")
        g, fetch, feeds = hb.Graph(), [], {}
        with g.as_default():
            with hb.device("/job:ps/task:0/device:cpu:0"):
                w = hb.Variable(hb.zeros([64, 64]), name="w")
            for i in range(2):
                with hb.device(f"/job:worker/task:{i}/device:cpu:0"):
                    x = hb.placeholder(hb.float32, [32, 64])
                    loss = hb.reduce_mean(hb.square(hb.matmul(x, w)))
                    fetch.append(hb.train.GradientDescentOptimizer(0.1).minimize(loss))
                    feeds[x] = sim_value([32, 64])
        return c, g, fetch, feeds

    clients = ["/job:worker/replica:0/task:0", "/job:worker/replica:0/task:1"]
    s = _both(make, steps=6, client=clients)
    assert s.steady.replayed == 4


def test_replayed_records_are_the_steps_own():
    """A replayed step's record starts at its own time, its flows and ops lie within it, and
    the session's step times add up to the clock."""
    c, g, train, feeds = _training()
    with g.as_default():
        s = SimSession(c, graph=g)
    for _ in range(5):
        s.run(train, feeds)
    assert s.steady.replayed == 3
    assert sum(s.step_times) == pytest.approx(c.env.now, rel=1e-12)
    starts = [r.start_s for r in s.records]
    assert starts == pytest.approx(np.cumsum([0.0, *s.step_times[:-1]]).tolist(), rel=1e-12)
    rec = s.last_record
    assert rec.ops.start_s.min() >= 0.0 and rec.ops.end_s.max() <= rec.step_time_s
    assert rec.flows.end_s.max() <= rec.step_time_s
    assert len(c.network.records) == len(rec.flows)  # older steps' flows trimmed as before


def test_a_changed_feed_shape_precision_or_link_is_simulated_in_full():
    """The key: another feed shape, a new precision (the devices forget their plans) or a
    link's new rate sends the next step through the full simulation, whose results it then
    has; alternating shapes never replay."""

    def make():
        c, g, train, _ = _training()
        x = g.get_tensor_by_name("Placeholder:0")
        return c, g, train, lambda k: {x: sim_value([32 if k % 2 else 16, 64])}

    s = _both(make, steps=6)
    assert s.steady.replayed == 0

    def between(k, c, s):
        if k == 4:
            c.set_precision("tf32")
        if k == 8:
            link = next(iter(c.network.links.values()))
            link.bandwidth_bytes_per_s /= 4

    s = _both(lambda: _training(), steps=12, between=between)
    assert s.steady.replayed == 2 + 2 + 2  # steps 2-3, 6-7, 10-11


def test_steps_with_state_or_other_events_are_simulated_in_full():
    """A queue's contents, a loop, or anything else scheduled on the clock (another process)
    can make a step differ from the last: such steps are never replayed."""

    def queue():
        c, g = _local()
        with g.as_default(), hb.device(CPU0):
            q = hb.FIFOQueue(100, [hb.float32], shapes=[[256]])
            x = hb.placeholder(hb.float32, [256])
            enq = q.enqueue([x * 2.0])
            deq = q.dequeue()
            fetch = [enq, hb.reduce_sum(deq)]
        return c, g, fetch, {x: sim_value([256])}

    assert _both(queue, steps=5).steady.replayed == 0

    def loop():
        c, g = _local()
        with g.as_default(), hb.device(CPU0):
            n = hb.placeholder(hb.int32, [])
            out = hb.while_loop(lambda i: i < n, lambda i: i + 1, [hb.constant(0)])
        return c, g, out, {n: np.int32(3)}

    assert _both(loop, steps=5).steady.replayed == 0

    def busy(k, c, s):
        if k == 3:
            c.env.timeout(1.0)  # an event of someone else's, pending from now on

    s = _both(lambda: _training(), steps=6, between=busy)
    assert s.steady.replayed == 1  # step 2 only


def test_shifted_records_read_as_a_list():
    rows = [("a", 0.0, 1.0), ("b", 1.0, 3.0)]
    r = ShiftedRecords(rows, 10.0)
    assert len(r) == 2 and list(r) == [("a", 10.0, 11.0), ("b", 11.0, 13.0)]
    assert r[1] == ("b", 11.0, 13.0) and r[-1:] == [("b", 11.0, 13.0)]
    assert max(x[2] for x in r) == 13.0
    r.append(("c", 13.0, 14.0))
    assert list(r)[-1] == ("c", 13.0, 14.0) and len(r) == 3
    assert rows == [("a", 0.0, 1.0), ("b", 1.0, 3.0)]  # the template's rows untouched
    assert isinstance(pd.DataFrame(list(r)), pd.DataFrame)


def test_a_smaller_memory_is_seen_by_the_next_step():
    """Memory is in the key: a replayed step's device made too small for it fails as a full
    simulation does, naming the device, and the session then goes on as a full simulation
    does (replaying again once the step fits)."""
    sessions = []
    for replay in (True, False):
        c, g, train, feeds = _training()
        with g.as_default():
            s = SimSession(c, graph=g, replay_steps=replay)
        for _ in range(4):
            s.run(train, feeds)
        gpu = next(d for d in c.devices() if d.device_type == "gpu")
        limit, peak = gpu.memory_limit_bytes, gpu.peak_bytes
        gpu.memory_limit_bytes = peak - 1
        with pytest.raises(hb.errors.ResourceExhaustedError, match="simulated out of memory on"):
            s.run(train, feeds)
        gpu.memory_limit_bytes = limit
        for _ in range(4):
            s.run(train, feeds)
        assert gpu.peak_bytes == peak
        sessions.append((c, s))
    (c1, s1), (c0, s0) = sessions
    assert s1.steady.replayed >= 5  # 2 before the failure, 3 or 4 after
    np.testing.assert_allclose(s1.step_times, s0.step_times, rtol=1e-12)
    assert c1.env.now == pytest.approx(c0.env.now, rel=1e-12)
    _same_frames(s1.last_record, s0.last_record)


def test_real_feeds_are_keyed_as_the_devices_key_their_plans():
    """Real float batches (their values do not matter without hybrid mode) replay like
    ``sim_value``s; a small integer feed (shape arithmetic) is keyed by its values: a new value
    gives a new shape, simulated in full, with the full simulation's times."""

    def floats():
        c, g, train, _ = _training()
        x = g.get_tensor_by_name("Placeholder:0")
        rng = np.random.default_rng(0)
        return c, g, train, lambda k: {x: rng.random((32, 64), dtype=np.float32)}

    assert _both(floats, steps=5).steady.replayed == 3

    def reshaped():
        c, g = _local()
        with g.as_default(), hb.device(CPU0):
            x = hb.placeholder(hb.float32, [65536])
            shape = hb.placeholder(hb.int32, [2])
            m = hb.reshape(x, shape)
            y = hb.matmul(m, m, transpose_b=True)  # 2 x 256^3 FLOPs, then 2 x 16 x 16 x 4096
        rows = lambda k: np.array([256, 256] if k < 4 else [16, 4096], np.int32)  # noqa: E731
        return c, g, y, lambda k: {x: sim_value([65536]), shape: rows(k)}

    s = _both(reshaped, steps=7)
    assert s.steady.replayed == 2 + 1  # steps 2-3, then 6
    assert s.step_times[6] < 0.5 * s.step_times[3]


def test_a_fetched_array_changed_in_place_does_not_change_later_steps():
    """Fetched real values (a shape computed for real) are the caller's: changing one in place
    changes neither the template nor what later replayed steps return."""
    c, g = _local()
    with g.as_default(), hb.device(CPU0):
        x = hb.placeholder(hb.float32, [8, 16])
        shape = hb.shape(hb.matmul(x, x, transpose_b=True))
        s = SimSession(c, graph=g)
    got = [s.run(shape, {x: sim_value([8, 16])}) for _ in range(5)]
    assert s.steady.replayed == 3
    for v in got:
        v[0] = -1
    assert list(s.run(shape, {x: sim_value([8, 16])})) == [8, 8]


@pytest.mark.parametrize("name", ["cnn", "lstm_lm"])
def test_a_zoo_model_on_a_ps_and_a_gpu_worker_replays_as_simulated(name):
    """A zoo model placed by ``replica_device_setter`` (variables on two PS tasks, the model on
    a catalog GPU worker, catalog CPUs and NICs): every record equals a full simulation's. The
    LSTM is unrolled (no control flow) and replays; so does the CNN."""
    from hetbed.scenarios.models.zoo import build

    def make():
        c = Cluster()
        for t in range(2):
            c.add_task("ps", t, cpu="xeon_e5_2630v3_ps", nic="eth_10g")
        c.add_task("worker", 0, gpu=("v100_sxm2", 1), cpu="xeon_e5_2680v3_2s", nic="eth_10g")
        g = hb.Graph()
        with g.as_default():
            setter = hb.train.replica_device_setter(
                ps_tasks=2, worker_device="/job:worker/task:0/device:gpu:0"
            )
            with hb.device(setter):
                m = build(name, 8)
        feeds = {t: sim_value(m.input_shapes[k], t.dtype.np) for k, t in m.inputs.items()}
        return c, g, m.train_op, feeds

    s = _both(make, steps=4)
    assert s.steady.replayed == 2
    assert len(s.last_record.flows) > 4
