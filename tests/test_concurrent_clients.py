"""Several clients stepping at once on one simulated cluster (``hetbed.simulator.run_clients``):
each is a SimSession of its own graph; they take turns in simulated-time order and meet only
through the tasks' shared resources."""

from __future__ import annotations

import statistics

import numpy as np
import pytest

import hetbed as hb
from hetbed.runtime.errors import FailedPreconditionError
from hetbed.simulator import Cluster, SimSession, run_clients

PS, WORKER = "xeon_e5_2630v3_ps", "xeon_e5_2680v3_2s"


def _cluster(n_ps: int = 1, workers: int = 2, hybrid: bool = False) -> Cluster:
    c = Cluster(hybrid=hybrid)  # (hybrid: real values, which queues need)
    for k in range(n_ps):
        c.add_task("ps", k, cpu=PS, nic="eth_10g")
    for i in range(workers):
        c.add_task("worker", i, cpu=WORKER, nic="eth_10g")
    return c


def _task(job: str, k: int) -> str:
    return f"/job:{job}/replica:0/task:{k}"


def _reader(i: int, ps: int = 0, name: str = "v", n: int = 1 << 18):
    """Worker ``i`` reads a float32 variable of ``n`` elements from PS task ``ps``."""
    g = hb.Graph()
    with g.as_default():
        with hb.device(_task("ps", ps)):
            v = hb.get_variable(name, [n], initializer=hb.zeros_initializer())
        with hb.device(_task("worker", i)):
            y = hb.reduce_sum(v * 2.0)
        init = hb.global_variables_initializer()
    return g, y, init


def test_one_client_steps_as_a_plain_session():
    times = []
    for concurrent in (False, True):
        c = _cluster()
        g, y, init = _reader(0)
        s = SimSession(c, graph=g, client=_task("worker", 0), shared_resources=concurrent)
        s.run(init)
        if concurrent:
            run_clients(c, [lambda s=s, y=y: [s.run(y) for _ in range(4)]])
        else:
            for _ in range(4):
                s.run(y)
        times.append(s.step_times[1:])
    assert times[0] == times[1]  # exactly: the same schedule, the same order


def test_clients_on_separate_tasks_do_not_slow_each_other():
    """Two clients, each reading from a PS task of its own over NICs of their own: each steps
    as it would alone; sharing one PS task's NIC, they take longer."""
    alone = _cluster(1, 1)
    g, y, init = _reader(0)
    s = SimSession(alone, graph=g, client=_task("worker", 0))
    s.run(init)
    for _ in range(4):
        s.run(y)
    solo = s.step_times[-1]

    for n_ps, slower in ((2, False), (1, True)):
        c = _cluster(n_ps, 2)
        sessions = []
        for i in range(2):
            g, y, init = _reader(i, ps=i % n_ps, name=f"v{i}")
            sess = SimSession(c, graph=g, client=_task("worker", i), shared_resources=True)
            sess.run(init)
            sessions.append((sess, y))
        run_clients(c, [lambda s=s, y=y: [s.run(y) for _ in range(6)] for s, y in sessions])
        for sess, _ in sessions:
            steady = statistics.median(sess.step_times[-4:])
            if slower:
                assert steady > 1.15 * solo
            else:
                assert steady == pytest.approx(solo, rel=1e-9)


def test_a_consumer_steps_at_its_producers_pace():
    """A client on worker 1 dequeues what a client on worker 0 enqueues into a queue on the PS
    task, one element a step: the consumer's steady step time is the (slower) producer's, and
    its k-th dequeue returns after the producer's k-th enqueue began."""
    c = _cluster(1, 2, hybrid=True)
    prod, cons = hb.Graph(), hb.Graph()
    with prod.as_default():
        with hb.device(_task("ps", 0)):
            q = hb.FIFOQueue(-1, hb.float32, shapes=[[1 << 16]], shared_name="q")
        with hb.device(_task("worker", 0)):
            x = hb.constant(np.ones(1 << 16, np.float32))
            for _ in range(6):  # work before each element: the producer is the slower
                x = hb.tanh(x * 1.0001)
        put = q.enqueue([x])
    with cons.as_default():
        with hb.device(_task("ps", 0)):
            q2 = hb.FIFOQueue(-1, hb.float32, shapes=[[1 << 16]], shared_name="q")
        with hb.device(_task("worker", 1)):
            got = hb.reduce_sum(q2.dequeue())
    sp = SimSession(c, graph=prod, client=_task("worker", 0), shared_resources=True)
    sc = SimSession(c, graph=cons, client=_task("worker", 1), shared_resources=True)
    n = 8
    run_clients(
        c, [lambda: [sc.run(got) for _ in range(n)], lambda: [sp.run(put) for _ in range(n)]]
    )
    assert len(sc.step_times) == len(sp.step_times) == n
    assert statistics.median(sc.step_times[2:]) == pytest.approx(
        statistics.median(sp.step_times[2:]), rel=0.02
    )
    ends_c = [r.start_s + r.step_time_s for r in sc.records]
    assert all(e > r.start_s for e, r in zip(ends_c, sp.records))


def test_stuck_clients_fail_with_a_clear_error():
    c = _cluster(1, 1, hybrid=True)
    g = hb.Graph()
    with g.as_default():
        with hb.device(_task("ps", 0)):
            q = hb.FIFOQueue(-1, hb.float32, shapes=[[]], shared_name="empty")
        with hb.device(_task("worker", 0)):
            y = q.dequeue() * 2.0
    s = SimSession(c, graph=g, client=_task("worker", 0), shared_resources=True)
    with pytest.raises(FailedPreconditionError, match="stuck"):
        run_clients(c, [lambda: s.run(y)], ["the consumer"])
    assert c.conductor is None  # the cluster may run clients again


def test_a_failing_program_is_reported_and_the_others_finish():
    c = _cluster(2, 2)
    g, y, init = _reader(1, ps=1, name="w")
    s = SimSession(c, graph=g, client=_task("worker", 1), shared_resources=True)
    s.run(init)

    def bad() -> None:
        raise RuntimeError("the program's own bug")

    with pytest.raises(RuntimeError, match="own bug"):
        run_clients(c, [bad, lambda: [s.run(y) for _ in range(3)]])
    assert len(s.step_times) == 4  # the other client ran its steps


def test_run_clients_rejects_bad_calls():
    c = _cluster()
    with pytest.raises(ValueError, match="no programs"):
        run_clients(c, [])
    with pytest.raises(ValueError, match="names"):
        run_clients(c, [lambda: None], ["a", "b"])


def test_shared_resources_are_the_clusters():
    """Sessions with shared_resources see one variable (a real cluster's servers keep it);
    without, each session has its own."""
    c = _cluster(1, 1, hybrid=True)
    g, y, init = _reader(0, n=4)
    with g.as_default():
        v = [x for x in hb.global_variables() if x.op.name == "v"][0]
        bump = hb.assign_add(v, np.ones(4, np.float32))
    a = SimSession(c, graph=g, client=_task("worker", 0), shared_resources=True)
    b = SimSession(c, graph=g, client=_task("worker", 0), shared_resources=True)
    a.run(init)
    a.run(bump)
    assert b.run(y) == pytest.approx(8.0)  # 2 x sum(ones(4)): b reads a's variable
    lone = SimSession(c, graph=g, client=_task("worker", 0))
    with pytest.raises(Exception, match="uninitialized|not initialized|Uninitialized"):
        lone.run(y)


def test_queues_run_in_a_shape_only_simulation():
    """A FIFO queue keeps placeholders when the simulation has no values: a batch enqueued
    whole comes out row by row and stacks back, by shape."""
    from hetbed.devices.simulated import SimValue
    from hetbed.simulator import sim_value

    c = _cluster(1, 1)
    g = hb.Graph()
    with g.as_default():
        with hb.device(_task("ps", 0)):
            q = hb.FIFOQueue(-1, hb.float32, shapes=[[3]], shared_name="rows")
        with hb.device(_task("worker", 0)):
            x = hb.placeholder(hb.float32, [4, 3])
        put = q.enqueue_many([x])
        one = q.dequeue()
        two = q.dequeue_many(2)
    s = SimSession(c, graph=g, client=_task("worker", 0))
    s.run(put, {x: sim_value([4, 3])})
    a, b = s.run(one), s.run(two)
    assert isinstance(a, SimValue) and a.shape == (3,)
    assert isinstance(b, SimValue) and b.shape == (2, 3)


def test_concurrent_runs_are_deterministic():
    """The clients take turns in simulated-time order whatever the threads' timing: the same
    program gives the same step times, to the last bit."""
    from hetbed.scenarios.models import grid

    runs = [grid.op_level_clients("sparse", 3, 2, "eth_10g", WORKER, PS, steps=5) for _ in range(2)]
    assert runs[0] == runs[1]


def test_a_task_replies_as_soon_as_its_part_of_a_step_is_done():
    """Client A reads a scalar from the PS task, then computes for a while on its own task;
    client B, once a step of its own is done, reads 16 MB from the same PS task, whose handler
    sends the bytes while A computes. A's RunGraph reply leaves the PS task as soon as A's
    read is done there, before B's request arrives (the handler takes messages as they arrive),
    so A steps exactly as it does alone; a reply booked once A's whole step was done would
    have queued behind B's read."""

    def a_graph():
        g = hb.Graph()
        with g.as_default():
            with hb.device(_task("ps", 0)):
                v = hb.get_variable("a", [], initializer=hb.zeros_initializer())
            with hb.device(_task("worker", 0)):
                x = hb.constant(np.ones((768, 768), np.float32))
                y = hb.reduce_sum(hb.matmul(x * v, x))
            init = hb.global_variables_initializer()
        return g, y, init

    def a_alone() -> float:
        c = _cluster(1, 2)
        g, y, init = a_graph()
        s = SimSession(c, graph=g, client=_task("worker", 0), shared_resources=True)
        s.run(init)
        run_clients(c, [lambda: s.run(y)])
        return s.step_times[-1]

    c = _cluster(1, 2)
    g, y, init = a_graph()
    a = SimSession(c, graph=g, client=_task("worker", 0), shared_resources=True)
    a.run(init)
    gb, yb, initb = _reader(1, name="b", n=1 << 22)
    with gb.as_default(), hb.device(_task("worker", 1)):
        first = hb.constant(1.0) * 2.0  # (a step on B's own task only)
    b = SimSession(c, graph=gb, client=_task("worker", 1), shared_resources=True)
    b.run(initb)
    run_clients(c, [lambda: a.run(y), lambda: [b.run(first), b.run(yb)]])
    alone = a_alone()
    assert alone > 5e-4  # (A computes long enough for B's read to start meanwhile)
    assert b.records[-1].start_s < a.records[-1].start_s + alone  # (it does)
    assert a.step_times[-1] == pytest.approx(alone, rel=1e-12)


def _wake_run(wake_s: float, wait: bool) -> dict[str, float]:
    """A taker client dequeues from a queue a feeder client fills: when each client's step
    ends. ``wait``: the dequeue starts at once and waits for the element the feeder enqueues
    after a matmul; else the feeder enqueues at once and the taker, after a matmul of its own,
    finds the element there."""
    from hetbed.devices.costmodel import DevicePerf

    perf = DevicePerf("host", {"float32": 1e12}, memory_bandwidth=100e9, memory_bytes=1e9,
                      launch_overhead_s=1e-6, cores=1, wake_s=wake_s)  # fmt: skip
    c = Cluster(hybrid=True)
    c.add_task("worker", 0, cpu=perf, nic="eth_10g")
    g = hb.Graph()
    with g.as_default(), hb.device(_task("worker", 0)):
        q = hb.FIFOQueue(2, [hb.float32], shapes=[[1]], shared_name="q")
        x = hb.constant(np.ones((256, 256), np.float32))
        with hb.control_dependencies([hb.matmul(x, x)] if wait else []):
            enq = q.enqueue([hb.constant(np.ones(1, np.float32))])
        with hb.control_dependencies([] if wait else [hb.matmul(x, x)]):
            deq = q.dequeue()
    taker, feeder = (SimSession(c, graph=g, client=_task("worker", 0), shared_resources=True)
                     for _ in range(2))  # fmt: skip
    ends: dict[str, float] = {}

    def take() -> None:
        taker.run(deq)
        ends["taker"] = c.env.now

    def feed() -> None:
        feeder.run(enq)
        ends["feeder"] = c.env.now

    run_clients(c, [take, feed])
    return ends


def test_a_blocked_dequeue_pays_its_threads_wake_up():
    """A dequeue that waited for another client's enqueue is woken by that step's thread: its
    own step goes on ``wake_s`` later (its task's CPU, DevicePerf.wake_s); the feeder's step
    is not delayed; a dequeue that finds its element waits for no one and pays nothing."""
    base, woken = _wake_run(0.0, True), _wake_run(40e-6, True)
    assert base["taker"] == pytest.approx(base["feeder"], abs=1e-9)  # (woken at the enqueue)
    assert woken["taker"] - base["taker"] == pytest.approx(40e-6, rel=1e-9)
    assert woken["feeder"] == base["feeder"]
    found, found_woken = _wake_run(0.0, False), _wake_run(40e-6, False)
    assert found["taker"] > found["feeder"]  # (the element was there before the dequeue)
    assert found_woken == found


def test_a_message_finding_its_task_busy_with_another_client_is_handed_the_interpreter():
    """``SimulatedDevice.occupy``: work of one client (its session, the owner) that finds the
    task's handler busy with another's starts ``wake_s`` after it frees (the hand-off, booked
    on a core and recorded as "Handoff"); work of the same client, work finding the handler
    free, work with no owner and a blocked op's wake-up (itself a hand-off) pay nothing."""
    from hetbed.devices.costmodel import DevicePerf
    from hetbed.devices.simulated import _WAKE_WORK, SoftwareWork

    perf = DevicePerf("host", {"float32": 1e12}, memory_bandwidth=100e9, memory_bytes=1e9,
                      launch_overhead_s=1e-6, cores=2, wake_s=30e-6)  # fmt: skip
    c = Cluster()
    c.add_task("worker", 0, cpu=perf, nic="eth_10g")
    d = c.task_cpu(_task("worker", 0))
    msg = SoftwareWork("m", "RecvTensor")
    a, b = object(), object()
    assert d.occupy(0.0, 1e-4, msg, a) == pytest.approx(1e-4)
    assert d.occupy(0.5e-4, 1e-4, msg, a) == pytest.approx(2e-4)  # same client: in turn
    assert d.occupy(1e-4, 1e-4, msg, b) == pytest.approx(3e-4 + 30e-6)  # another's: handed
    assert d.occupy(1e-3, 1e-4, msg, a) == pytest.approx(1.1e-3)  # free: no wait, no hand-off
    assert d.occupy(1.05e-3, 1e-4, msg) == pytest.approx(1.2e-3)  # no owner: none
    assert d.occupy(1.1e-3, 1e-5, _WAKE_WORK, None) == pytest.approx(1.21e-3)
    handed = [(begin, end) for w, begin, end in d.records if getattr(w, "type", "") == "Handoff"]
    assert handed == [(pytest.approx(2e-4), pytest.approx(2e-4 + 30e-6))]


def test_concurrent_clients_of_one_process_pay_hand_offs_a_lone_client_does_not():
    """hetbed calibrate's check (simulator/handoffs.py) simulated: one client of the worker
    task stepping alone books no hand-off, and its step is what it was without them; two at
    once interleave their messages on the tasks' handlers and pay for it: without hand-offs a
    second client thread would add half again the throughput, with them it adds little (as
    measured here: 839 us a step with one client thread, 793 with two)."""
    from dataclasses import replace

    from hetbed.devices.catalog import load_device, load_link
    from hetbed.devices.costmodel import perf_from_spec
    from hetbed.simulator.handoffs import simulate_clients

    perf, lo = perf_from_spec(load_device("this_machine")), load_link("loopback")
    link = (lo.bandwidth_bytes_per_s, lo.latency_s)
    with_h = simulate_clients(replace(perf, wake_s=40e-6), link, (1, 2), steps=12)
    without = simulate_clients(replace(perf, wake_s=0.0), link, (1, 2), steps=12)
    assert with_h[1] == pytest.approx(without[1], rel=1e-12)
    assert without[2] < 0.7 * without[1]
    assert 0.8 * with_h[1] < with_h[2] < with_h[1]


def test_a_value_fed_to_a_task_travels_with_its_run_graph_request():
    """A RunGraph request carries the values fed to its task, streamed after it as the runtime
    does (its own task's too, over TCP): each end pays ``message_s_per_byte`` for them and the
    link carries them, so a step fed n bytes more takes n x (2 x per byte + 1 / rate) more
    (the own task over its loopback link; a remote task over the route's slowest link)."""
    from hetbed.devices.costmodel import DevicePerf

    perf = DevicePerf("host", {"float32": 1e12}, memory_bandwidth=100e9, memory_bytes=1e10,
                      launch_overhead_s=1e-6, cores=4, message_s=20e-6,
                      control_message_s=10e-6, message_s_per_byte=1e-10)  # fmt: skip
    rate = 2e9

    def step(n: int, where: str) -> float:
        c = Cluster()
        for job in ("ps", "worker"):
            c.add_task(job, 0, cpu=perf, nic=(rate, 5e-6), machine="m")
        g = hb.Graph()
        with g.as_default(), hb.device(_task(where, 0)):
            x = hb.placeholder(hb.float32, [None])
            y = hb.shape(x)
        with SimSession(c, graph=g, client=_task("worker", 0)) as s:
            for _ in range(2):  # (the first step also plans)
                s.run(y, {x: np.ones(n // 4, np.float32)})
            return s.last_record.step_time_s

    n = 8 << 20
    for where in ("worker", "ps"):
        grown = step(n + 4, where) - step(4, where)
        assert grown == pytest.approx(n * (2 * 1e-10 + 1 / rate), rel=1e-6), where
