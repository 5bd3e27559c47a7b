"""Messages between tasks cost CPU time at both ends, and tasks of one machine share its cores:
closed forms on the op-level simulator, the shared-core booking itself, and the step-level
drivers' machine sharing."""

from dataclasses import replace

import numpy as np
import pytest
from simsteps import read_step

import hetbed as hb
from hetbed.devices.catalog import load_device
from hetbed.devices.costmodel import DevicePerf, Roofline, oversubscription, perf_from_spec
from hetbed.devices.simulated import HostCores
from hetbed.simulator import Cluster, SimSession, sim_value
from hetbed.simulator.training import AsyncPS, ReplicaProfile, SyncPS

# round numbers: 1 TFLOP/s, 100 GB/s, 1 us per kernel, one core; messages free unless set
HOST = DevicePerf(
    "host", {"float32": 1e12}, memory_bandwidth=100e9, memory_bytes=1e9, launch_overhead_s=1e-6
)
HOST = replace(HOST, cores=1)
NIC = (1e9, 50e-6)


class _Clock:
    now = 0.0


def test_cores_are_booked_in_the_first_gap_that_fits():
    """Single-core work fills the earliest gap where a core is free; work on every core waits
    until all are free for its whole length; bookings that ended before the clock are
    forgotten."""
    clock = _Clock()
    h = HostCores(2, clock)
    assert h.reserve(0.0, 10.0) == 10.0  # [0, 10]
    assert h.reserve(20.0, 5.0) == 25.0  # [20, 25] (booked ahead)
    assert h.reserve(0.0, 3.0) == 3.0  # the other core, before the booking ahead: [0, 3]
    assert h.reserve(0.0, 4.0) == 7.0  # again: [3, 7]
    assert h.reserve(0.0, 8.0, 2) == 18.0  # both free from 10 for 8: [10, 18]
    assert h.reserve(0.0, 3.0, 2) == 28.0  # [18, 20] is too short before [20, 25]
    clock.now = 30.0
    h.reserve(30.0, 1.0, 2)
    for k in range(40):  # bookings ahead are kept, those before the clock dropped ...
        h.reserve(100.0 + k, 0.5)
    assert len(h.busy) == 41 and all(b >= 30.0 for b, _, _ in h.busy)
    clock.now = 200.0
    h.reserve(200.0, 1.0)  # ... until the clock passes them (dropped once there are many)
    assert h.busy == [[200.0, 201.0, 1]]
    with pytest.raises(ValueError, match="cores >= 1"):
        HostCores(0)


def _earliest_fit(bookings, now, seconds, most):
    """By brute force: the first start >= ``now`` (``now`` or a booking's end) at which at most
    ``most`` cores are busy at every instant of [start, start + seconds)."""
    for t in sorted({now, *(e for _, e, _ in bookings if e > now)}):
        points = [t, *(b for b, _, _ in bookings if t < b < t + seconds)]
        if all(sum(w for b, e, w in bookings if b <= x < e) <= most for x in points):
            return t
    raise AssertionError("unreachable: after the last end every core is free")


@pytest.mark.parametrize("cores", [1, 2, 4])
def test_a_booking_goes_where_a_brute_force_search_puts_it(cores):
    """Random work booked ahead and behind (widths 1 and all cores, lengths over three orders of
    magnitude, back-to-back runs, the clock moving on): every start ``book`` and
    ``first_free`` return is the one a search of every candidate start finds over every booking
    made so far (those that ended before the clock cannot matter: no request starts earlier)."""
    rng = np.random.default_rng(cores)
    clock = _Clock()
    h = HostCores(cores, clock)
    made = []
    for k in range(300):
        if k % 25 == 24:
            clock.now += float(rng.uniform(0.0, 4.0))
        now = clock.now + float(rng.choice([0.0, rng.uniform(0.0, 6.0)]))
        seconds = float(rng.choice([0.01, 0.1, 0.5, 1.0, rng.uniform(0.001, 3.0)]))
        width = cores if rng.random() < 0.2 else 1
        if rng.random() < 0.3:
            assert h.first_free(now, seconds) == _earliest_fit(made, now, seconds, cores - 1)
            continue
        want = _earliest_fit(made, now, seconds, cores - width)
        assert h.book(now, seconds, width) == want, (k, now, seconds, width)
        made.append((want, want + seconds, width))
        if rng.random() < 0.3:  # the next request back to back with this one
            nxt = want + seconds
            want = _earliest_fit(made, nxt, seconds, cores - width)
            assert h.book(nxt, seconds, width) == want
            made.append((want, want + seconds, width))
    assert len(h.busy) < len(made)  # (ended ones forgotten, back-to-back ones joined)


def test_work_that_is_ready_runs_while_a_core_is_free():
    """The cores are alike and a process migrates between them: a booking needs at most
    ``cores - width`` of them busy at every instant it covers, not one core free throughout.
    Two cores, one booked ahead over [3, 10), the other busy over [0, 2): 6 s asked at 0 start
    at 0 (one core is free at every instant of [0, 6); a core of its own would have waited
    until 2); 1 s more waits until 2 (both busy over [0, 2)); work on both cores until 10; a
    core is next free at 6."""
    h = HostCores(2)
    assert h.book(3.0, 7.0) == 3.0
    assert h.book(0.0, 2.0) == 0.0
    assert h.book(0.0, 6.0) == 0.0
    assert h.book(0.0, 1.0) == 2.0
    assert h.book(0.0, 1.0, 2) == 10.0
    assert h.first_free(0.0, 0.5) == 6.0  # (two busy over [0, 2), [2, 3) and [3, 6))


def _read_step(perf, nbytes, machine=None):
    """One step in which a worker task reads ``nbytes`` from a PS task (its client: the worker),
    the second of the session (the first also plans)."""
    return read_step(perf, nbytes, NIC, machine, steps=2)[1]


def test_a_tensor_between_tasks_costs_its_bytes_at_both_ends():
    """Per-byte CPU time is spent once by the sender (before the bytes leave) and once by the
    receiver (after they arrive), both on the step's critical path: the step takes exactly
    2 x bytes x per-byte longer; a local session (one task) has no messages at all."""
    nbytes = 4 << 20
    base = _read_step(HOST, nbytes).step_time_s
    costly = _read_step(replace(HOST, message_s_per_byte=1e-9), nbytes).step_time_s
    assert costly - base == pytest.approx(2 * nbytes * 1e-9, rel=1e-9)
    flows = _read_step(replace(HOST, message_s_per_byte=1e-9), nbytes).flows
    assert flows.end_s[0] - flows.start_s[0] == pytest.approx(NIC[1] + nbytes / NIC[0])


def test_message_costs_follow_the_calls_of_a_distributed_step():
    """With only a fixed cost m per message end, the step of one tensor read from the PS is the
    chain of its calls: the client sends RunGraph to the PS (m), which receives it (m) after the
    latency L and sends the tensor's RecvTensor reply (2m: the request was handled too); it
    crosses (L + bytes / bandwidth) and the worker takes it (2m); then the PS's RunGraph reply
    (m there, L, m here) and the client's own call (its request overlaps the PS's work) end the
    step. Identity kernels take no time."""
    m, nbytes = 100e-6, 4000
    rec = _read_step(replace(HOST, message_s=m), nbytes)
    lat, wire = NIC[1], nbytes / NIC[0]
    ps_sent = m + lat + m + 2 * m  # request sent, crossed, received; the tensor's reply sent
    # then the worker handles, one after another: the tensor (2m), its own RunGraph call's
    # reply (sent and received: 2m) and the PS's reply (m; it arrived meanwhile)
    assert rec.step_time_s == pytest.approx(ps_sent + lat + wire + 5 * m, rel=1e-9)
    kinds = rec.ops.type.value_counts()
    assert kinds["RunGraph"] == 8  # 2 calls x (request, reply) x 2 ends
    assert kinds["RecvTensor"] == 2  # one call, charged at each end


def _two_matmuls(machines, cores, model=None):
    """A step where a PS task and a worker task each run a 2 ms kernel (a 2 GFLOP MatMul at
    1 TFLOP/s) on ``machines`` of ``cores`` each: (step seconds, the cluster)."""
    perf = replace(HOST, cores=cores)
    c = Cluster(cost_model=model)
    c.add_task("ps", 0, cpu=perf, nic=NIC, machine=machines[0])
    c.add_task("worker", 0, cpu=perf, nic=NIC, machine=machines[1])
    with hb.Graph().as_default():
        outs = []
        for job in ("ps", "worker"):
            with hb.device(f"/job:{job}/task:0/device:cpu:0"):
                x = hb.placeholder(hb.float32, [1000, 1000])
                outs.append(hb.matmul(x, x))
        s = SimSession(c, client="/job:worker/replica:0/task:0")
        feeds = {o.op.inputs[0]: sim_value([1000, 1000]) for o in outs}
        s.run([hb.group(*[o.op for o in outs])], feeds)
    return s.last_record.step_time_s, c


def test_tasks_of_one_machine_share_its_cores():
    """Two tasks each run a 1 ms kernel in the same step: on machines of their own they overlap;
    on one single-core machine they take turns (one kernel more); on one machine of two cores
    each kernel still wants both cores, so they take turns too."""

    def step(machines, cores):
        return _two_matmuls(machines, cores)[0]

    alone = step(("a", "b"), 1)  # the two kernels overlap (the PS's starts a latency later)
    for cores in (1, 2):
        # one kernel more on the step's path, give or take the latency of the PS's start
        # (kernels take the cores in the order they are dispatched)
        extra = step(("m", "m"), cores) - alone
        assert 2.001e-3 - 1e-9 <= extra <= 2.001e-3 + NIC[1] + 1e-9
    with pytest.raises(ValueError, match="must name the same cpu"):
        c = Cluster()
        c.add_task("ps", 0, cpu="this_machine", machine="m")
        c.add_task("worker", 0, cpu="i7_5930k", machine="m")


def test_step_level_workers_on_one_machine_take_turns_computing():
    """SyncPS with ``machine_cores``: every task on one machine whose cores each worker's
    compute (priced at the whole machine's rate) takes in turn: W workers, W x compute."""
    prof = ReplicaProfile(0.01, dense={"w": (4, 0)})
    for w in (1, 2, 4):
        apart = SyncPS(prof, w, nic=(1e12, 0.0)).run(6).step_time()
        shared = SyncPS(prof, w, nic=(1e12, 0.0), machine_cores=2).run(6).step_time()
        assert apart == pytest.approx(0.01, rel=1e-6)
        assert shared == pytest.approx(0.01 * w, rel=1e-6)
    with pytest.raises(ValueError, match="machine_cores"):
        SyncPS(prof, 1, machine_cores=0)


def test_step_level_messages_cost_the_ps_per_worker():
    """With message costs, the PS handles every worker's calls one after another: the step
    grows with the workers even when the network and the compute cost nothing."""
    prof = ReplicaProfile(
        1e-6, dense={"w": (4, 0)}, worker_message_s=0.0, ps_message_s=1e-4
    )  # the PS spends 100 us per message end
    steps = [SyncPS(prof, w, nic=(1e12, 0.0)).run(6).step_time() for w in (1, 2, 4, 8)]
    # per worker and step: RunGraph request + reply (2 x 100 us), a read and a gradient (2 x 2 x
    # 100 us): 600 us of the PS's time
    assert np.diff(steps) == pytest.approx([600e-6, 1200e-6, 2400e-6], rel=0.02)


def test_bytes_between_tasks_of_one_machine_take_one_of_its_cores():
    """Loopback TCP is a copy by the machine's kernel: a tensor between two tasks of one
    single-core machine cannot cross while a 2 ms kernel holds the core, so the worker gets it
    only after the kernel, N / bandwidth later; between machines it crosses meanwhile."""

    def got(machines):
        c = Cluster()
        c.add_task("ps", 0, cpu=HOST, nic=NIC, machine=machines[0])
        c.add_task("worker", 0, cpu=HOST, nic=NIC, machine=machines[1])
        n = 250_000  # 1 MB: 1 ms at 1 GB/s
        with hb.Graph().as_default():
            with hb.device("/job:ps/task:0/device:cpu:0"):
                a = hb.identity(hb.placeholder(hb.float32, [n]))
                y = hb.placeholder(hb.float32, [1000, 1000])
                busy = hb.matmul(y, y)  # 2 ms on the PS's core, dispatched with the send
            with hb.device("/job:worker/task:0/device:cpu:0"):
                b = hb.identity(a)
            s = SimSession(c)
            feeds = {a.op.inputs[0]: sim_value([n]), y: sim_value([1000, 1000])}
            s.run([b, busy.op], feeds)
        ops = s.last_record.ops
        recv = ops[(ops.op == "Identity_1")].end_s.iloc[0]
        kernel_end = ops[ops.op == "MatMul"].end_s.iloc[0]
        return recv, kernel_end

    apart, _ = got(("a", "b"))
    shared, kernel_end = got(("m", "m"))
    assert apart < kernel_end  # crossed while the PS computed
    assert shared == pytest.approx(kernel_end + 4 * 250_000 / NIC[0], rel=1e-6)


def _read_step_with_queue_runner(perf):
    """``_read_step``'s graph with the worker running a second session (a queue runner's) that
    calls only the PS task."""
    c = Cluster()
    c.add_task("ps", 0, cpu=perf, nic=NIC)
    c.add_task("worker", 0, cpu=perf, nic=NIC)
    w, ps = "/job:worker/replica:0/task:0", "/job:ps/replica:0/task:0"
    with hb.Graph().as_default():
        with hb.device("/job:ps/task:0/device:cpu:0"):
            a = hb.identity(hb.constant(np.zeros(1000, np.float32)))  # (nothing fed)
        with hb.device("/job:worker/task:0/device:cpu:0"):
            b = hb.identity(a)
        s = SimSession(c, client=[w, (w, [ps])])
        for _ in range(2):
            s.run(b)
    return s.last_record


def test_a_second_session_in_a_process_calls_only_its_tasks():
    """A client entry (task, [tasks]) is one more session in that task's process (the chief's
    queue runner of SyncReplicasOptimizer), which calls first. With Session.run's own work
    S = 10 ms per session and free messages, the worker's one core does the second session's
    work [0, S] and sends its call (its reply is back once the PS is done and 2L have passed),
    then the first session's [S, 2S]: its calls, and the worker's request for the tensor, leave
    at 2S; the tensor is back at 2S + 2L + bytes / bandwidth, the end of the step. Alone, the
    step ends at S + 2L + bytes / bandwidth. Three calls, each a request and a reply at two
    ends."""
    S, lat, wire = 10e-3, NIC[1], 4000 / NIC[0]
    rec = _read_step_with_queue_runner(replace(HOST, step_s=S))
    assert rec.step_time_s == pytest.approx(2 * S + 2 * lat + wire, rel=1e-9)
    alone = _read_step(replace(HOST, step_s=S), 4000).step_time_s
    assert alone == pytest.approx(S + 2 * lat + wire, rel=1e-9)
    rec = _read_step_with_queue_runner(replace(HOST, message_s=1e-6))
    assert rec.ops.type.value_counts()["RunGraph"] == 12
    c = Cluster()
    c.add_task("worker", 0, cpu=HOST, nic=NIC)
    c.add_task("ps", 0, cpu=HOST, nic=NIC)
    w = "/job:worker/replica:0/task:0"
    with pytest.raises(ValueError, match="calls '/job:ps/task:9'"):
        SimSession(c, client=[w, (w, ["/job:ps/task:9"])])
    with pytest.raises(ValueError, match=r"\(task, \[tasks it calls\]\)"):
        SimSession(c, client=[(w, "/job:ps/replica:0/task:0")])


def test_the_chiefs_queue_runner_runs_a_step_per_global_step():
    """SyncPS with TF's SyncReplicasOptimizer: the chief (worker 0) also runs its queue
    runner's step once per global step, so with Session.run's own work S = 10 ms dominating,
    the chief spends 2S of its process's time per global step (its own step and the queue
    runner's) whatever the number of workers; without it, S. Asynchronous training has no queue
    runner."""
    S = 10e-3
    prof = ReplicaProfile(
        1e-6, dense={"w": (4, 0)}, worker_message_s=1e-6, ps_message_s=1e-6, worker_step_s=S
    )
    for w in (1, 2, 4):
        tf = SyncPS(prof, w, nic=(1e12, 0.0), sync_replicas=True).run(8).step_time()
        plain = SyncPS(prof, w, nic=(1e12, 0.0), sync_replicas=False).run(8).step_time()
        assert tf == pytest.approx(2 * S, rel=0.01)
        assert plain == pytest.approx(S, rel=0.01)


def test_a_distributed_steps_ops_run_at_the_clocked_dispatch_cost():
    """Each task's partition of a distributed step runs on the executor's clocked schedule:
    in a cluster of two tasks a worker's chain of N tiny adds costs N x the catalog's clocked
    dispatch cost; alone (a local session) N x the straight-line one. Without a clocked
    number both are the straight-line one."""
    n = 20

    def chain_step(perf, tasks):
        c = Cluster()
        c.add_task("worker", 0, cpu=perf, nic=NIC)
        if tasks == 2:
            c.add_task("ps", 0, cpu=perf, nic=NIC)
        with hb.Graph().as_default():
            with hb.device("/job:worker/task:0/device:cpu:0"):
                x = hb.placeholder(hb.float32, [4])
                y = x
                for _ in range(n):
                    y = y + 1.0
            s = SimSession(c)
            for _ in range(2):
                s.run(y, {x: sim_value([4])})
        return s.last_record.step_time_s

    clocked = replace(HOST, clocked_launch_overhead_s=5e-6)  # straight-line: 1 us
    assert chain_step(clocked, 1) == pytest.approx(n * 1e-6, rel=0.02)
    assert chain_step(clocked, 2) == pytest.approx(n * 5e-6, rel=0.02)
    assert chain_step(HOST, 2) == pytest.approx(n * 1e-6, rel=0.02)
    assert HOST.clocked() is HOST and clocked.clocked().launch_overhead_s == 5e-6


def test_control_messages_have_a_cost_of_their_own():
    """A RunGraph call's request and reply cost ``control_message_s`` per end, a RecvTensor
    call's ``message_s``: the chain of ``test_message_costs_follow_the_calls_of_a_distributed_
    step`` with c for its 6 control ends on the path and m for its 4 tensor ends; in the
    step-level driver, 4 control ends and 4 others a worker step on the PS's side."""
    m, c, nbytes = 100e-6, 30e-6, 4000
    rec = _read_step(replace(HOST, message_s=m, control_message_s=c), nbytes)
    lat, wire = NIC[1], nbytes / NIC[0]
    ps_sent = c + lat + c + 2 * m  # request sent, crossed, received; the tensor's reply sent
    # the worker: the tensor (2m), its own call's reply (2c), the PS's reply (c)
    assert rec.step_time_s == pytest.approx(ps_sent + lat + wire + 2 * m + 3 * c, rel=1e-9)
    prof = ReplicaProfile(1e-6, dense={"w": (4, 0)}, ps_message_s=m, ps_control_message_s=c)
    steps = [SyncPS(prof, w, nic=(1e12, 0.0)).run(6).step_time() for w in (1, 2, 4)]
    # per worker on the PS: RunGraph request and reply (2c), a read and a gradient (4m)
    assert np.diff(steps) == pytest.approx([2 * c + 4 * m, 2 * (2 * c + 4 * m)], rel=0.02)
    with pytest.raises(ValueError, match="ps_control_message_s"):
        ReplicaProfile(1.0, ps_control_message_s=-1.0)


def test_a_call_to_the_clients_own_task_has_a_control_cost_of_its_own():
    """A RunGraph call from a client to its own task (both ends in one process) costs
    ``own_control_message_s`` per end; one to another task ``control_message_s``: in
    ``test_control_messages_have_a_cost_of_their_own``'s chain the worker's own call's reply
    (2 ends on the path) moves with the first only, the PS's call with the second. Unset, the
    own call costs what the others do. The step-level driver books the worker's own call at it
    too: a synchronous step (its request's two ends, then its reply's) grows by 4 x the
    difference."""
    m, c, o, nbytes = 100e-6, 30e-6, 10e-6, 4000
    rec = _read_step(
        replace(HOST, message_s=m, control_message_s=c, own_control_message_s=o), nbytes
    )
    lat, wire = NIC[1], nbytes / NIC[0]
    ps_sent = c + lat + c + 2 * m
    assert rec.step_time_s == pytest.approx(ps_sent + lat + wire + 2 * m + 2 * o + c, rel=1e-9)
    plain = _read_step(replace(HOST, message_s=m, control_message_s=c), nbytes)
    assert plain.step_time_s == pytest.approx(ps_sent + lat + wire + 2 * m + 3 * c, rel=1e-9)
    assert replace(HOST, control_message_s=c).own_control_s == c
    assert replace(HOST, message_s=m).own_control_s == m

    def step(own: float | None) -> float:
        prof = ReplicaProfile(2e-4, dense={"w": (4, 0)}, worker_message_s=40e-6,
                              worker_control_message_s=c, worker_own_control_message_s=own)  # fmt: skip
        return SyncPS(prof, 1, nic=(1e12, 0.0)).run(6).step_time()

    assert step(c) == step(None)
    assert step(c) - step(o) == pytest.approx(4 * (c - o), rel=1e-6)
    with pytest.raises(ValueError, match="worker_own_control_message_s"):
        ReplicaProfile(1.0, worker_own_control_message_s=-1.0)


def test_an_oversubscribed_host_pays_more_per_message():
    """DevicePerf.shared_host: with more processes than cores each per-event software cost
    (messages, a step's own, dispatch) is multiplied by 1 + share x (tasks - cores) / cores (the
    other processes that run on a core between two turns of one: it grows without bound, where
    the share of wake-ups finding a cold core would saturate); a core each, or no share,
    changes nothing; bytes and FLOPs are not scaled. A Cluster machine and the step-level
    profile of a shared machine both apply it."""
    perf = replace(
        HOST,
        cores=2,
        message_s=10e-6,
        control_message_s=4e-6,
        step_s=50e-6,
        message_s_per_byte=1e-9,
        clocked_launch_overhead_s=3e-6,
        switch_share=0.3,
        wake_s=20e-6,
    )
    five = perf.shared_host(5)
    k = 1 + 0.3 * (5 - 2) / 2
    nine = perf.shared_host(9).message_s / perf.message_s - 1
    assert nine == pytest.approx(0.3 * 3.5)  # seven others between two turns on two cores
    assert oversubscription(9, 2) == 3.5 and oversubscription(2, 2) == oversubscription(1, 4) == 0
    assert (five.message_s, five.control_message_s, five.step_s, five.wake_s) == pytest.approx(
        (10e-6 * k, 4e-6 * k, 50e-6 * k, 20e-6 * k)
    )
    assert (five.launch_overhead_s, five.clocked_launch_overhead_s) == pytest.approx(
        (1e-6 * k, 3e-6 * k)
    )
    assert five.message_s_per_byte == 1e-9 and five.peak_flops == perf.peak_flops
    assert perf.shared_host(2) == perf and replace(perf, switch_share=0.0).shared_host(5) == (
        replace(perf, switch_share=0.0)
    )
    c = Cluster()
    for i in range(4):
        c.add_task("worker", i, cpu=perf, nic=NIC, machine="m")
    c.add_task("ps", 0, cpu=perf, nic=NIC, machine="m")
    c.add_task("ps", 1, cpu=perf, nic=NIC)  # a machine of its own
    got = sorted(c.task_cpu(t).perf_spec.message_s for t in c.tasks)
    assert got == pytest.approx([10e-6] + [10e-6 * k] * 5)


def test_the_switch_share_is_fitted_through_the_simulated_contention_runs():
    """switch_share_fit picks the share whose simulated CPU per step, as a ratio to one
    client's, is nearest the measured: exact between the table's shares where the simulated
    ratios are affine in the share (the parabola through the best three is then the error
    itself), the first share for a flat or falling measurement, the last for one steeper than
    the table; a table without a measured client count is refused."""
    from hetbed.simulator.contention import SHARE_GRID, switch_share_fit

    def ratios(a):  # about what simulate_contention gives on the calibrated entry of this
        # machine: +9%, +18%, +18% without a share (the hand-offs), growing 0.54, 1.76 and
        # 4.14 per unit of share
        return {1: 1.0, 2: 1.09 + 0.54 * a, 4: 1.18 + 1.76 * a, 8: 1.18 + 4.14 * a}

    table = {a: {n: 700e-6 * r for n, r in ratios(a).items()} for a in SHARE_GRID}
    for a in (0.0, 0.031, 0.13, 0.37):
        measured = {n: 1.2e-3 * r for n, r in ratios(a).items()}
        assert switch_share_fit(measured, table) == pytest.approx(a, abs=1e-9)
    assert switch_share_fit({1: 1e-3, 2: 0.9e-3, 4: 0.8e-3, 8: 0.8e-3}, table) == 0.0
    assert switch_share_fit({1: 1e-3, 2: 2e-3, 4: 4e-3, 8: 9e-3}, table) == max(SHARE_GRID)
    # the fit through the simulation leaves less to the share than the closed form did: on the
    # shape calibrate measured here (+2%, +12%, +39% with 2, 4, 8 clients) the closed form
    # gave 0.09-0.12, at which the simulation books +14-16%, +35-40% and +60-70%
    assert 0.03 < switch_share_fit({1: 1.0, 2: 1.02, 4: 1.12, 8: 1.39}, table) < 0.04
    with pytest.raises(ValueError, match="no simulation of \\[16\\] clients"):
        switch_share_fit({1: 1.0, 16: 2.0}, table)
    with pytest.raises(ValueError, match="two client counts"):
        switch_share_fit({1: 1.0}, table)


def test_the_contention_runs_are_simulated_with_the_share_and_the_hand_offs():
    """simulate_contention books the contention runs as the simulators book such a machine:
    one client on two cores (two processes, no oversubscription) costs the same at any share,
    what one step of it books alone; four clients (five processes on two cores) cost more with
    a share, by about its factor 1 + share x 1.5 on every software cost, and more than one
    client even without one (their messages' hand-offs at the PS)."""
    from hetbed.simulator.contention import contention_graph, simulate_contention

    perf = replace(
        HOST, cores=2, message_s=20e-6, control_message_s=15e-6, own_control_message_s=10e-6,
        step_s=5e-6, wake_s=8e-6,
    )  # fmt: skip
    ps_part: dict = {}
    flat = simulate_contention(perf, NIC, (1, 4), steps=6, warm=2, ps_out=ps_part)
    assert 0 < ps_part[1] < flat[1] and 0 < ps_part[4] < flat[4]
    shared = simulate_contention(replace(perf, switch_share=0.3), NIC, (1, 4), steps=6, warm=2)
    assert shared[1] == pytest.approx(flat[1], rel=1e-12)
    assert flat[4] > 1.05 * flat[1]
    assert shared[4] / flat[4] == pytest.approx(1 + 0.3 * 1.5, rel=0.05)
    # one client's step, alone: the same ops and messages
    c = Cluster()
    c.add_task("ps", 0, cpu=perf, nic=NIC, machine="m")
    c.add_task("worker", 0, cpu=perf, nic=NIC, machine="m")
    g, step, init = contention_graph(0)
    sess = SimSession(c, graph=g, client="/job:worker/replica:0/task:0", replay_steps=False)
    sess.run(init)
    for _ in range(2):
        sess.run(step)
    cores = c.task_cpu(c.tasks[0]).host_cores
    copied = cores.copied_s
    sess.run(step)  # (its ops and messages, and the loopback copies of its bytes)
    ops = sess.records[-1].ops
    booked = float(ops.duration_s.sum()) + cores.copied_s - copied
    assert cores.copied_s > copied
    assert booked == pytest.approx(flat[1], rel=1e-9)
    on_ps = float(ops[ops.device.str.contains("/job:ps/")].duration_s.sum())
    assert on_ps == pytest.approx(ps_part[1], rel=1e-9)  # (the PS's part, the copies apart)


def _box(tmp_path, monkeypatch, *fields):
    """A cpu "box" in a catalog of its own (1e11 FLOP/s, 10 GB/s, 1 us dispatch) with the
    extra ``fields`` (TOML lines)."""
    monkeypatch.setenv("HETBED_CATALOG_PATH", str(tmp_path))
    (tmp_path / "box.toml").write_text(
        'name = "box"\nkind = "cpu"\n'
        'memory_bandwidth_bytes_per_s = { value = 1e10, source = "test" }\n'
        'memory_bytes = { value = 1000000000, source = "test" }\n'
        'kernel_launch_overhead_s = { value = 1e-6, source = "test" }\n'
        + "".join(f"{f}\n" for f in fields)
        + '\n[peak_flops]\nfloat32 = { value = 1e11, source = "test" }\n'
    )


def test_the_switch_share_field_loads_and_is_bounded(tmp_path, monkeypatch):
    from hetbed.devices.catalog import CatalogError, load_device
    from hetbed.devices.costmodel import perf_from_spec

    def write(value):
        _box(tmp_path, monkeypatch, f'switch_cpu_share = {{ value = {value}, source = "test" }}')

    write(0.35)
    assert perf_from_spec(load_device("box")).switch_share == 0.35
    write(5)
    with pytest.raises(CatalogError, match="switch_cpu_share"):
        load_device("box")
    _box(tmp_path, monkeypatch, 'switch_byte_cpu_share = { value = 0.15, source = "test" }')
    assert perf_from_spec(load_device("box")).switch_byte_share == 0.15
    _box(tmp_path, monkeypatch, 'switch_byte_cpu_share = { value = 4.5, source = "test" }')
    with pytest.raises(CatalogError, match="switch_byte_cpu_share"):
        load_device("box")


def _box_profiles(tmp_path, monkeypatch, tasks, *fields):
    """The step-level profiles of a one-matmul replica on a 2-core "box" (``_box`` with
    ``fields``): (alone on its machine, one of ``tasks`` sharing it)."""
    from hetbed.simulator.profiling import profile_from_graph

    _box(tmp_path, monkeypatch, 'cores = { value = 2, source = "test" }', *fields)
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [8, 4])
        w = hb.Variable(np.ones((4, 2), np.float32))
        train = hb.train.GradientDescentOptimizer(0.1).minimize(hb.reduce_sum(hb.matmul(x, w)))
        alone = profile_from_graph(train, {x: (8, 4)}, worker="box", ps="box")
        shared = profile_from_graph(train, {x: (8, 4)}, worker="box", ps="box", cache_share=tasks)
    return alone, shared


def test_the_step_level_profile_of_a_shared_machine_pays_the_same(tmp_path, monkeypatch):
    """profile_from_graph(cache_share=tasks) prices the replica's messages as the op-level
    Cluster machine does: the PS's and the worker's message costs times the same factor."""
    alone, shared = _box_profiles(
        tmp_path,
        monkeypatch,
        6,
        'message_overhead_s = { value = 2e-5, source = "test" }',
        'switch_cpu_share = { value = 0.5, source = "test" }',
    )
    k = 1 + 0.5 * (6 - 2) / 2
    assert (alone.worker_message_s, alone.ps_message_s) == pytest.approx((2e-5, 2e-5))
    assert (shared.worker_message_s, shared.ps_message_s) == pytest.approx((2e-5 * k, 2e-5 * k))


def test_step_level_ps_shards_of_one_machine_each_take_its_cores():
    """Two PS tasks alike (one group) on one machine: each shard's message handling takes the
    machine's cores, so on one core the step takes both shards' time in turn, on two cores
    (or on machines of their own) one shard's. Per worker step each shard spends 600 us (a
    RunGraph request and reply, a read and a gradient: 6 ends of 100 us)."""
    prof = ReplicaProfile(
        1e-6, dense={"a": (4, 0), "b": (4, 1)}, worker_message_s=0.0, ps_message_s=1e-4
    )
    for w in (1, 2):
        apart = SyncPS(prof, w, n_ps=2, nic=(1e12, 0.0)).run(6).step_time()
        one = SyncPS(prof, w, n_ps=2, nic=(1e12, 0.0), machine_cores=1).run(6).step_time()
        two = SyncPS(prof, w, n_ps=2, nic=(1e12, 0.0), machine_cores=2).run(6).step_time()
        assert apart == pytest.approx(600e-6 * w, rel=0.01)
        assert one == pytest.approx(1200e-6 * w, rel=0.01)
        assert two == pytest.approx(600e-6 * w, rel=0.01)


def test_only_the_global_steps_ps_task_serves_the_tokens():
    """With TF's SyncReplicasOptimizer each PS task of a worker step receives the worker's
    RunGraph call, its read (2 ends of 100 us), its local step (2 ends) and its gradient (2
    ends), and the queue runner's call and its reply (a global step); the global step's task
    alone serves each worker its token (2 ends). With two PS tasks the token queue and the
    global step's increment also wait for the other task: it sends the global step's task a
    control message (a RecvTensor call, 2 ends at each) after each worker's gradient and after
    the update. Per step, the second task: W x 1000 + 400 us, the first: W x 1200 + 400; on one
    core they take turns (their sum); on machines of their own the first is the longest, and
    with one worker it also waits for the second's first control message: the second's read
    leaves after its RunGraph call (300 us), the local step and the gradient follow (200 each)
    and its message takes 200 to send: 900 us into the step, where the first, which takes the
    queue runner's call first (100), has its gradient in at 800."""
    prof = ReplicaProfile(
        1e-6, dense={"a": (4, 0), "b": (4, 1)}, worker_message_s=0.0, ps_message_s=1e-4
    )
    for w in (1, 2):
        kw = {"n_ps": 2, "nic": (1e12, 0.0), "sync_replicas": True}
        one = SyncPS(prof, w, machine_cores=1, **kw).run(8).step_time()
        apart = SyncPS(prof, w, **kw).run(8).step_time()
        second, first = w * 1000e-6 + 400e-6, w * 1200e-6 + 400e-6
        assert one == pytest.approx(first + second, rel=0.01)
        assert apart == pytest.approx(first + (100e-6 if w == 1 else 0.0), rel=0.01)


class _Cores(Roofline):
    """The roofline's times, and a fixed number of cores every kernel keeps busy (a measured
    profile's ``threads``)."""

    def __init__(self, cores):
        super().__init__()
        self.cores = cores

    def cores_used(self, op, ins):
        return self.cores


def test_single_threaded_kernels_of_two_tasks_of_one_machine_run_side_by_side():
    """Two tasks of one two-core machine each run a 2 ms kernel: measured single-threaded
    (cores_used 1) they run side by side, as numpy's elementwise kernels of two processes do;
    measured on both cores they take turns (one kernel more), as the rule without a
    measurement has it. A device records the seconds its host ran narrow (``narrow_s``)."""

    def step(model):
        t, c = _two_matmuls(("m", "m"), 2, model)
        return t, sum(c.task_cpu(task).narrow_s for task in c.tasks)

    (one, narrow1), (both, narrow2), (rule, _) = step(_Cores(1)), step(_Cores(2)), step(None)
    assert both - one == pytest.approx(2.001e-3, abs=NIC[1] + 1e-9)
    assert rule == pytest.approx(both, rel=1e-9)
    assert narrow1 == pytest.approx(2 * 2.001e-3, rel=1e-6) and narrow2 == 0.0


def test_step_level_single_threaded_compute_shares_the_machine():
    """SyncPS with ``machine_cores``: a replica whose compute is all single-threaded
    (``compute_serial_s`` = ``compute_s``) runs its workers side by side on two cores (two
    workers: one compute's time), all-cores compute takes turns (two), half and half in
    between; a serial part larger than the compute is refused."""
    dense = {"w": (4, 0)}
    times = {}
    for serial in (0.0, 0.005, 0.01):
        prof = ReplicaProfile(0.01, dense=dense, compute_serial_s=serial)
        times[serial] = SyncPS(prof, 2, nic=(1e12, 0.0), machine_cores=2).run(6).step_time()
    assert times[0.0] == pytest.approx(0.02, rel=1e-6)
    assert times[0.01] == pytest.approx(0.01, rel=1e-6)
    assert times[0.0] > times[0.005] > times[0.01]
    with pytest.raises(ValueError, match="compute_serial_s"):
        ReplicaProfile(0.01, dense=dense, compute_serial_s=0.02)


def test_the_step_level_profile_measures_the_single_threaded_share(tmp_path, monkeypatch):
    """profile_from_graph: ``compute_serial_s`` is the simulated worker's time in kernels on one
    of its host's cores: all of it when the profile measured every kernel single-threaded,
    none of the big kernels' time when it measured them on both cores."""
    from hetbed.simulator.profiling import profile_from_graph

    _box(tmp_path, monkeypatch, 'cores = { value = 2, source = "test" }')
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [256, 512])
        w = hb.Variable(np.ones((512, 512), np.float32))
        train = hb.train.GradientDescentOptimizer(0.1).minimize(hb.reduce_sum(hb.matmul(x, w)))
        one = profile_from_graph(
            train, {x: (256, 512)}, worker="box", ps="box", cost_model=_Cores(1)
        )
        two = profile_from_graph(
            train, {x: (256, 512)}, worker="box", ps="box", cost_model=_Cores(2)
        )
    assert one.compute_s == pytest.approx(two.compute_s)
    assert one.compute_serial_s == pytest.approx(one.compute_s, rel=1e-9)
    assert two.compute_serial_s == 0.0


def test_a_synchronous_step_takes_the_average_before_it_applies():
    """SyncPS: once the last gradient is in, each shard takes the averaged gradient out of its
    accumulator (``take_s``) and then applies it: the step grows by the take; asynchronous
    training has no accumulator. profile_from_graph prices the accumulator's add and take as
    the op-level simulation prices those ops (here the roofline: the add is its closed form)."""
    from hetbed.simulator.profiling import accumulate_s, profile_from_graph
    from hetbed.simulator.training import AsyncPS

    base = ReplicaProfile(0.01, dense={"w": (4, 0)}, apply_s=0.001)
    took = ReplicaProfile(0.01, dense={"w": (4, 0)}, apply_s=0.001, take_s=0.002)
    for w in (1, 3):
        a = SyncPS(base, w, nic=(1e12, 0.0)).run(6).step_time()
        b = SyncPS(took, w, nic=(1e12, 0.0)).run(6).step_time()
        assert b - a == pytest.approx(0.002, rel=1e-6)
    assert AsyncPS(took, 2, nic=(1e12, 0.0)).run(12).sim_time_s == pytest.approx(
        AsyncPS(base, 2, nic=(1e12, 0.0)).run(12).sim_time_s
    )
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [8, 1000])
        w = hb.Variable(np.ones((1000, 100), np.float32))
        train = hb.train.GradientDescentOptimizer(0.1).minimize(hb.reduce_sum(hb.matmul(x, w)))
        prof = profile_from_graph(train, {x: (8, 1000)}, worker="k40", ps="xeon_e5_2630v3_ps")
    name = prof.variables[0]
    ps = perf_from_spec(load_device("xeon_e5_2630v3_ps"))
    assert prof.aggregate_s_of(name) == pytest.approx(accumulate_s(1e5, 4e5, ps), rel=1e-9)
    assert prof.take_s_of(name) > 0


def test_a_sparse_gradient_is_accumulated_as_the_op_level_prices_it():
    """For an embedding's IndexedSlices gradient, profile_from_graph prices the
    SparseConditionalAccumulator's add and take (SyncReplicasOptimizer's ops for it) as the
    op-level simulation of the grid's sparse model prices the same ops at the same shapes (a
    measured table: the add 68 us, the take 26 us), not as a dense add of the rows' bytes."""
    from hetbed.devices.profiled import Profiled, profile_key
    from hetbed.scenarios.models import grid
    from hetbed.simulator.profiling import profile_from_graph

    rows, dim, look = grid.SPARSE["sparse"]
    priced = {"SparseAccumulatorApplyGradient": 68e-6, "SparseAccumulatorTakeGradient": 26e-6}
    seen: dict[str, list] = {}

    class Probe(Profiled):  # records the keys the op-level simulation asks for
        def duration(self, op, ins, outs, perf):
            if op.type in priced:
                seen.setdefault(op.type, []).append(profile_key(op, ins))
            return super().duration(op, ins, outs, perf)

    def op_level(model: Profiled):
        return grid.op_level_record("sparse", 1, 1, (1e9, 0.0), "k40", "xeon_e5_2630v3_ps",
                                    None, model)  # fmt: skip

    op_level(Probe({}))  # (the keys of the ops at the grid's shapes)
    table = {seen[t][0]: s for t, s in priced.items()}
    rec = op_level(Profiled(table))
    there = {t: float(rec.ops[rec.ops.type == t].duration_s.iloc[0]) for t in priced}
    assert there == pytest.approx(priced)
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [look, dim])
        with hb.variable_scope("model"):
            loss = grid.loss("sparse", x, 1)
        train = hb.train.GradientDescentOptimizer(0.1).minimize(loss)
        prof = profile_from_graph(train, {x: (look, dim)}, worker="k40",
                                  ps="xeon_e5_2630v3_ps", cost_model=Profiled(table))  # fmt: skip
    name = prof.variables[0]
    assert prof.aggregate_s_of(name) == pytest.approx(68e-6, rel=1e-9)
    assert prof.take_s_of(name) == pytest.approx(26e-6, rel=1e-9)


def test_a_handler_serves_messages_in_time_order():
    """The step-level drivers book a task's messages ahead of the clock: one booked later for
    an earlier time goes in a free gap before the ones booked ahead (a handler serves messages
    as they arrive), and on a shared machine it waits for a core as well."""
    from hetbed.devices.simulated import HostCores
    from hetbed.simulator.hostcpu import _handle

    lane = HostCores(1)
    assert _handle(lane, None, 10.0, 1.0) == 11.0
    assert _handle(lane, None, 0.0, 1.0) == 1.0  # (in the gap, not after 11)
    assert _handle(lane, None, 0.5, 1.0) == 2.0  # (behind the one at 0, still before 10)
    assert _handle(lane, None, 9.5, 1.0) == 12.0  # (no gap of 1 s before 10: after 11)
    cores = HostCores(1)
    cores.book(2.5, 1.0)  # another task's kernel on the machine's one core
    lane = HostCores(1)
    assert _handle(lane, cores, 2.0, 1.0) == 4.5  # both free from 3.5
    assert cores.first_free(0.0, 2.0) == 0.0 and lane.first_free(3.0, 1.0) == 4.5


def test_with_a_backup_worker_every_worker_step_costs_the_ps_its_messages():
    """TF's token queue with one backup worker: each of the W + 1 workers' steps costs the PS
    task its RunGraph call and reply (100 us each), its read, local step and gradient (2 ends
    of 100 us each) and its token (2 ends), whether the worker took a token already queued or
    waited for the update's; the queue runner's call and reply once a global step. Nothing
    else costs time: the PS task is busy throughout, (W + 1) x 1,000 + 200 us a global step."""
    prof = ReplicaProfile(1e-6, dense={"a": (4, 0)}, worker_message_s=0.0, ps_message_s=1e-4)
    for w in (1, 2, 3):
        drv = SyncPS(prof, w, 1, n_ps=1, nic=(1e12, 0.0), fast_worker_can_contribute_twice=True,
                     sync_replicas=True)  # fmt: skip
        assert drv.run(30).step_time() == pytest.approx((w + 1) * 1000e-6 + 200e-6, rel=1e-6)


def test_message_drift_is_the_micro_steps_measured_over_simulated(monkeypatch):
    """``message_drift``: the median over calibrate's message micro-steps of measured now over
    simulated with the catalog's numbers (cluster_fidelity probes it between its runs):
    1.5 when every step runs 1.5 times its simulated time, whatever the steps' own times."""
    from hetbed.simulator import messages as M

    perf = replace(HOST, message_s=40e-6, control_message_s=30e-6)
    sim = {n: M._simulated_message_step(hb, perf, NIC, *s) for n, s in M.MESSAGE_STEPS.items()}
    assert len(set(sim.values())) > 3 and all(v > 0 for v in sim.values())
    monkeypatch.setattr(
        M, "_measure_message_steps", lambda hb_, steps: ({n: 1.5 * v for n, v in sim.items()}, {})
    )
    assert M.message_drift(perf, NIC) == pytest.approx(1.5)
    # a catalog whose messages cost twice as much simulates slower steps: the drift is lower
    slower = replace(perf, message_s=80e-6, control_message_s=60e-6)
    assert M.message_drift(slower, NIC) < 1.5


def test_a_message_probe_measures_again_and_again_with_its_sessions_open(monkeypatch):
    """``MessageProbe`` (cluster_fidelity probes the machine between every two runs): its PS
    task's process and its sessions stay open across measurements, each measurement times every
    micro-step it was given (real steps of a client here and a PS task in a child process), and
    its drift is the median of measured over simulated, the simulated times computed once for a
    catalog entry; closing it ends the PS task's process."""
    from hetbed.simulator import messages as M

    names = ["own task only", "1 scalar read"]
    with pytest.raises(ValueError, match="unknown micro-steps"):
        M.MessageProbe(["1 scalar read", "no such step"])
    with pytest.raises(ValueError, match="no micro-step named"):
        M.MessageProbe([])
    with M.MessageProbe(names) as probe:
        peer = probe.peer
        sessions = dict(probe.sessions)
        got, cpu = probe.measure(6)
        assert set(got) == set(names) and all(0 < v < 1.0 for v in got.values())
        assert cpu["1 scalar read"] > 0  # (both processes' CPU time)
        assert probe.sessions == sessions and peer.poll() is None  # still open
        perf = replace(HOST, message_s=40e-6, control_message_s=30e-6)
        sim = {n: M._simulated_message_step(hb, perf, NIC, *M.MESSAGE_STEPS[n]) for n in names}
        timed = [{names[0]: 2.0 * sim[names[0]], names[1]: 3.0 * sim[names[1]]}]
        monkeypatch.setattr(probe, "measure", lambda steps: (timed[0], {}))
        assert probe.drift(perf, NIC) == pytest.approx(2.5)
        calls = []
        real = M._simulated_message_step
        monkeypatch.setattr(M, "_simulated_message_step", lambda *a: calls.append(a) or real(*a))
        timed[0] = {n: 4.0 * v for n, v in sim.items()}
        assert probe.drift(perf, NIC) == pytest.approx(4.0)
        assert calls == []  # the same catalog entry: simulated once
        slower = replace(perf, message_s=80e-6)
        assert probe.drift(slower, NIC) < 4.0 and len(calls) == len(names)
    assert peer.poll() is not None and probe.sessions == {}


def test_message_costs_recover_the_costs_that_made_the_steps(monkeypatch):
    """Closed loop: micro-steps measured as a catalog with known costs simulates them (wall
    times; CPU as its message ends count) are fitted back to those costs (a client's own work
    per step folded into its call to its own task), the per-byte cost from the slope of the 1,
    8 and 64 MiB reads less the link's time for a byte."""
    from hetbed.simulator import messages as M

    true = replace(HOST, message_s=40e-6, control_message_s=30e-6, own_control_message_s=12e-6,
                   step_s=5e-6, message_latency_s=20e-6, message_s_per_byte=1e-10)  # fmt: skip
    got = {n: M._simulated_message_step(hb, true, NIC, *s) for n, s in M.MESSAGE_STEPS.items()}
    cpu = {n: M._message_ends(hb, true, NIC, *s) + true.step_s
           for n, s in M.MESSAGE_STEPS.items() if not s[1]}  # fmt: skip
    monkeypatch.setattr(M, "_measure_message_steps", lambda hb_, steps: (got, cpu))
    fitted, measured, sim = M.message_costs(*NIC, replace(HOST, message_s=1e-3))
    assert measured is got
    assert fitted.message_s == pytest.approx(40e-6, rel=1e-3)
    assert fitted.control_message_s == pytest.approx(30e-6, rel=1e-3)
    # every micro-step makes one call to its own task: the client's own work per step is counted
    # in that call's four ends
    assert fitted.step_s == 0.0
    assert fitted.own_control_message_s == pytest.approx(12e-6 + 5e-6 / 4, rel=1e-3)
    assert fitted.message_s_per_byte == pytest.approx(1e-10, rel=0.05)
    for n in M.BYTE_STEPS:
        assert sim[n] == pytest.approx(got[n], rel=0.05)


def test_the_micro_steps_separate_control_messages_of_the_own_task_from_the_others():
    """Calibrate's micro-steps count the ends of the control messages (RunGraph) of the
    client's call to its own task, of its calls to the other task, and of the other messages
    (RecvTensor) in the simulator's own model of each step: the own task alone 4, 0 and 0;
    both tasks with nothing between them 4, 4 and 0 (what tells the two control costs apart);
    one scalar read 4, 4 and 4."""
    from hetbed.simulator import messages as M

    free = replace(perf_from_spec(load_device("this_machine")), message_latency_s=0.0,
                   step_s=0.0, message_s_per_byte=0.0)  # fmt: skip
    link = (3e9, 2e-5)

    def ends(name):
        out = []
        for own, control, other in ((1e-6, 0.0, 0.0), (0.0, 1e-6, 0.0), (0.0, 0.0, 1e-6)):
            p = replace(free, message_s=other, control_message_s=control,
                        own_control_message_s=own)  # fmt: skip
            out.append(round(M._message_ends(hb, p, link, *M.MESSAGE_STEPS[name]) / 1e-6, 6))
        return out

    assert ends("own task only") == [4.0, 0.0, 0.0]
    assert ends("both tasks, nothing between them") == [4.0, 4.0, 0.0]
    assert ends("1 scalar read") == [4.0, 4.0, 4.0]


def test_a_childs_cpu_time_is_read_finer_than_a_clock_tick():
    """The CPU the message micro-steps cost is read to the nanosecond (the child's threads'
    run time from /proc/PID/task/*/schedstat), not in 10 ms clock ticks, which over 150 steps
    of a fraction of a millisecond are a sizeable part of what is measured: a child that burns
    15 ms of CPU reads 15 ms (ticks would read 10 or 20)."""
    import os
    import subprocess
    import sys

    from hetbed.simulator.messages import _cpu_pair

    if not os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/schedstat"):
        pytest.skip("no /proc/PID/task/*/schedstat here")
    burn = (
        "import sys, time\n"
        "for line in sys.stdin:\n"
        "    t = time.process_time()\n"
        "    while time.process_time() - t < 0.015:\n"
        "        pass\n"
        "    print('done', flush=True)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", burn], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "done"  # (warm: the interpreter started)
        before = _cpu_pair(child.pid)[1]
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "done"
        used = _cpu_pair(child.pid)[1] - before
        assert 0.0148 <= used <= 0.0185, used
    finally:
        child.kill()
        child.wait(timeout=30)


def test_the_micro_steps_take_turns_in_rounds():
    """_measure_message_steps runs each micro-step's steps in rounds over all of them, so that a
    drift of the machine's speed falls on every micro-step alike (measured here: the fit then
    simulates the micro-steps' wall times within a median 4-5% of the measured, against 10-13%
    when each ran its steps at once, three repetitions each)."""
    from hetbed.simulator.messages import _turns

    turns = _turns(["a", "b", "c"], 11, 5)
    assert [n for n, _ in turns] == ["a", "b", "c"] * 5
    for name in "abc":
        counts = [k for n, k in turns if n == name]
        assert sum(counts) == 11 and max(counts) - min(counts) <= 1
    assert _turns(["a", "b"], 2, 5) == [("a", 1), ("b", 1), ("a", 1), ("b", 1)]
    assert _turns(["a"], 7, 1) == [("a", 7)]


def test_the_step_level_sync_step_pays_the_ps_thread_wake_ups():
    """SyncPS with TF's SyncReplicasOptimizer (message costs on): the queue runner's take of
    each variable waits for the last gradient and the worker's token dequeue for the update's
    enqueue, each woken on the PS at ``ps_wake_s`` (as the op-level simulator books a blocked
    take or dequeue): one worker's step is (variables + 1) x ps_wake_s longer; without the
    token queue nothing is woken."""

    def step(variables: int, wake: float, sync_replicas: bool) -> float:
        prof = ReplicaProfile(1e-3, dense={f"w{k}": (4, 0) for k in range(variables)},
                              ps_message_s=20e-6, worker_message_s=20e-6,
                              ps_control_message_s=10e-6, take_s=5e-6, apply_s=5e-6,
                              ps_wake_s=wake)  # fmt: skip
        return (
            SyncPS(prof, 1, n_ps=1, nic="eth_10g", sync_replicas=sync_replicas).run(10).step_time()
        )

    for variables in (1, 3):
        gained = step(variables, 50e-6, True) - step(variables, 0.0, True)
        assert gained == pytest.approx((variables + 1) * 50e-6, rel=1e-6)
        assert step(variables, 50e-6, False) == step(variables, 0.0, False)
    with pytest.raises(ValueError, match="ps_wake_s"):
        ReplicaProfile(1.0, ps_wake_s=-1.0)


def test_the_step_level_handler_hands_the_interpreter_between_clients():
    """``hostcpu._handle`` with ``_handoff``: a message of one client's step (its owner) that
    finds the handler busy with another client's starts ``handoff`` after it frees; one of
    the same client, one finding it free, and one with no owner (a wake-up, itself a
    hand-off, recorded nowhere) pay nothing; k messages of one booking pay k."""
    from hetbed.simulator.hostcpu import _handle, _handoff

    lane, owners, h = HostCores(1), {}, 30e-6
    assert _handle(lane, None, 0.0, 1e-4, _handoff(owners, lane, "a", h)) == pytest.approx(1e-4)
    assert _handle(lane, None, 0.5e-4, 1e-4, _handoff(owners, lane, "b", h)) == pytest.approx(
        2e-4 + h
    )
    assert _handle(lane, None, 1e-4, 1e-4, _handoff(owners, lane, "b", h)) == pytest.approx(
        3e-4 + h
    )
    assert _handoff(owners, lane, None, h) == 0.0 and owners[lane] == "b"
    assert _handle(lane, None, 1e-3, 1e-4, _handoff(owners, lane, "a", h)) == pytest.approx(1.1e-3)
    assert _handle(lane, None, 1e-3, 1e-4, _handoff(owners, lane, 0, 2 * h)) == pytest.approx(
        1.2e-3 + 2 * h
    )


def test_step_level_workers_stepping_at_once_pay_hand_offs_on_the_ps():
    """AsyncPS with message costs on one machine: one worker's messages never find the PS
    busy with another client's, so its steps are what they were without hand-offs; two
    workers' interleave on the PS's handler, and their steps take longer, by less than every
    PS message of a step paying one."""

    def step(workers: int, wake: float) -> float:
        prof = ReplicaProfile(2e-4, dense={"w": (4, 0)}, ps_message_s=40e-6,
                              worker_message_s=40e-6, ps_control_message_s=30e-6,
                              worker_control_message_s=30e-6, apply_s=5e-6, ps_wake_s=wake,
                              worker_wake_s=wake)  # fmt: skip
        r = AsyncPS(prof, workers, n_ps=1, nic="eth_10g", machine_cores=2).run(200)
        return r.sim_time_s / 200  # (per global step)

    assert step(1, 40e-6) == step(1, 0.0)
    for workers in (2, 3):
        base, handed = step(workers, 0.0), step(workers, 40e-6)
        assert base * 1.05 < handed < base + 5 * 40e-6, workers
    with pytest.raises(ValueError, match="worker_wake_s"):
        ReplicaProfile(1.0, worker_wake_s=-1.0)


def test_step_level_fed_values_travel_with_the_workers_own_request():
    """``ReplicaProfile.feed_bytes`` (``profile_from_graph``: what the step is fed): the
    worker's RunGraph request to its own task carries them, each end paying
    ``worker_message_s_per_byte`` and the loopback carrying them, as the op-level SimSession
    books them: n bytes more make a step about n x (2 x per byte + 1 / rate) longer (here
    within 3%: the request's two ends no longer booked at once let the pull's reply in
    between), with SyncPS and AsyncPS alike; without message costs nothing changes."""
    n, rate, per_byte = 8 << 20, 2e9, 1e-10

    def step(fed: float, driver: type, msg: bool = True) -> float:
        costs = dict(ps_message_s=40e-6, worker_message_s=40e-6, ps_control_message_s=30e-6,
                     worker_control_message_s=30e-6, worker_message_s_per_byte=per_byte,
                     ps_message_s_per_byte=per_byte) if msg else {}  # fmt: skip
        prof = ReplicaProfile(2e-4, dense={"w": (4, 0)}, apply_s=5e-6, feed_bytes=fed, **costs)
        r = driver(prof, 1, n_ps=1, nic=(rate, 5e-6), machine_cores=4).run(20)
        return r.sim_time_s / 20

    for driver in (SyncPS, AsyncPS):
        grown = step(n, driver) - step(0, driver)
        assert grown == pytest.approx(n * (2 * per_byte + 1 / rate), rel=0.03), driver
        assert step(n, driver, False) == step(0, driver, False)
    from hetbed.simulator.profiling import profile_from_graph

    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [None, 256])
        w = hb.Variable(np.ones((256, 4), np.float32))
        train = hb.train.GradientDescentOptimizer(0.1).minimize(hb.reduce_sum(hb.matmul(x, w)))
        prof = profile_from_graph(
            train, {x: sim_value([64, 256])}, worker="xeon_e5_2680v3_2s", ps="xeon_e5_2630v3_ps"
        )
    assert prof.feed_bytes == 64 * 256 * 4
    with pytest.raises(ValueError, match="feed_bytes"):
        ReplicaProfile(1.0, feed_bytes=-1.0)


def test_step_level_fetched_values_return_in_the_workers_own_reply():
    """``ReplicaProfile.fetch_bytes`` (``profile_from_graph(fetches=...)``: what the step
    fetches from the worker's own task): that task's RunGraph reply carries them back, each
    end paying ``worker_message_s_per_byte`` and the loopback carrying them, as the op-level
    SimSession's ``_reply_out`` / ``_reply_in`` book them: n bytes more make a step n x (2 x
    per byte + 1 / rate) longer (within 3%; the op-level step grows by the same closed form:
    test_a_value_fetched_from_the_clients_own_task_streams_only_over_a_loopback_link), with SyncPS (with and without TF's
    SyncReplicasOptimizer, whose own reply follows the token) and AsyncPS, op by op and with
    the overlapped drivers; without a loopback (machines of their own) or without message
    costs nothing changes."""
    n, rate, per_byte = 8 << 20, 2e9, 1e-10

    def step(fetched: float, driver: type, msg: bool = True, cores=4, own=None, **kw) -> float:
        costs = dict(ps_message_s=40e-6, worker_message_s=40e-6, ps_control_message_s=30e-6,
                     worker_control_message_s=30e-6, worker_message_s_per_byte=per_byte,
                     ps_message_s_per_byte=per_byte,
                     worker_own_control_message_s=own) if msg else {}  # fmt: skip
        dense = {"w": (4096, 0), "v": (4096, 0)}
        prof = ReplicaProfile(2e-4, dense=dense, apply_s=5e-6, fetch_bytes=fetched, **costs)
        runs = [
            driver(prof, 1, n_ps=1, nic=(rate, 5e-6), machine_cores=cores, **kw).run(steps)
            for steps in (20, 40)
        ]  # (steady steps: a run ends with its last update, before that step's replies)
        return (runs[1].sim_time_s - runs[0].sim_time_s) / 20

    for driver, kw in (
        (SyncPS, {}),
        (SyncPS, {"sync_replicas": True}),
        (SyncPS, {"sync_replicas": True, "own": 0.0}),  # (a free own call: still after the token)
        (SyncPS, {"sync_replicas": True, "bucket_bytes": 4096}),
        (SyncPS, {"bucket_bytes": 4096}),
        (AsyncPS, {}),
        (AsyncPS, {"bucket_bytes": 4096}),
    ):
        grown = step(n, driver, **kw) - step(0, driver, **kw)
        assert grown == pytest.approx(n * (2 * per_byte + 1 / rate), rel=0.03), (driver, kw)
        assert step(n, driver, False, **kw) == step(0, driver, False, **kw)
        assert step(n, driver, cores=None, **kw) == step(0, driver, cores=None, **kw)
    from hetbed.simulator.profiling import profile_from_graph

    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [None, 256])
        w = hb.Variable(np.ones((256, 4), np.float32))
        y = hb.matmul(x, w)
        loss = hb.reduce_sum(y)
        train = hb.train.GradientDescentOptimizer(0.1).minimize(loss)
        kw = dict(worker="xeon_e5_2680v3_2s", ps="xeon_e5_2630v3_ps")
        feed = {x: sim_value([64, 256])}
        prof = profile_from_graph(train, feed, fetches=[loss, y, y.op], **kw)
        assert prof.fetch_bytes == 4 + 64 * 4 * 4
        assert profile_from_graph(train, feed, **kw).fetch_bytes == 0
        assert profile_from_graph(train, feed, fetches=y.name, **kw).fetch_bytes == 64 * 4 * 4
        for held in (w, w.read_value(), w.value(), hb.train.get_or_create_global_step()):
            with pytest.raises(ValueError, match="keeps on its PS tasks"):
                profile_from_graph(train, feed, fetches=[held], **kw)
        # a fed value fetched back is free; the train op (and its updates) are left out, so
        # the profiled compute is the same
        again = profile_from_graph(train, feed, fetches=[x, train, loss], **kw)
        assert again.fetch_bytes == 4
        assert again.compute_s == prof.compute_s
        with pytest.raises(ValueError, match="fetches: 'nope:0' is not of the graph"):
            profile_from_graph(train, feed, fetches=["nope:0"], **kw)
    with pytest.raises(ValueError, match="fetch_bytes"):
        ReplicaProfile(1.0, fetch_bytes=-1.0)


def _fetch_step(perf, n, value, machines=("a", "b"), concurrent=False, own=False):
    """Step time of a client on the worker task fetching (``value``) or only running (not)
    an identity of ``n`` float32 computed on the PS task (``own``: on the worker's own task),
    the second step of its session; ``concurrent``: through ``run_clients``."""
    from hetbed.simulator import run_clients

    c = Cluster()
    c.add_task("ps", 0, cpu=perf, nic=NIC, machine=machines[0])
    c.add_task("worker", 0, cpu=perf, nic=NIC, machine=machines[1])
    where = "/job:worker/task:0/device:cpu:0" if own else "/job:ps/task:0/device:cpu:0"
    with hb.Graph().as_default():
        with hb.device(where):
            out = hb.identity(hb.constant(np.zeros(n, np.float32)))
        with hb.device("/job:worker/task:0/device:cpu:0"):
            other = hb.identity(hb.constant(np.zeros(1, np.float32)))
        fetch = [out if value else out.op, other]
        s = SimSession(c, client="/job:worker/replica:0/task:0")
    if concurrent:
        run_clients(c, [lambda: [s.run(fetch) for _ in range(2)]])
    else:
        for _ in range(2):
            s.run(fetch)
    return s.last_record.step_time_s


@pytest.mark.parametrize("concurrent", [False, True])
def test_a_fetched_tensor_travels_back_with_its_tasks_reply(concurrent):
    """The values a client fetches from another task come back with that task's RunGraph reply,
    as the runtime streams them after it: the task spends their bytes' CPU before they leave,
    they cross the link, and the client spends it again once they are in; the reply ends the
    step, so fetching N bytes instead of running the same op takes N x (per-byte x 2 +
    1 / bandwidth) longer (alone, and as one of run_clients' clients)."""
    n, per_byte = 250_000, 2e-9
    nbytes = 4 * n
    perf = replace(HOST, message_s_per_byte=per_byte)
    ran = _fetch_step(perf, n, False, concurrent=concurrent)
    fetched = _fetch_step(perf, n, True, concurrent=concurrent)
    assert fetched - ran == pytest.approx(nbytes * (2 * per_byte + 1 / NIC[0]), rel=1e-9)
    free = replace(HOST, message_s_per_byte=0.0)
    gap = _fetch_step(free, n, True, concurrent=concurrent) - _fetch_step(
        free, n, False, concurrent=concurrent
    )
    assert gap == pytest.approx(nbytes / NIC[0], rel=1e-9)


def test_a_value_fetched_from_the_clients_own_task_streams_only_over_a_loopback_link():
    """The client's own task streams its fetched values to itself over TCP where its NIC is a
    loopback link (a bare link on a machine named: its rate), as fed values; without one they
    are handed over in the process: no per-byte cost, no stream."""
    perf, n = replace(HOST, message_s_per_byte=2e-9), 250_000
    alone = (None, None)
    assert _fetch_step(perf, n, True, alone, own=True) == pytest.approx(
        _fetch_step(perf, n, False, alone, own=True), rel=1e-12
    )
    gap = _fetch_step(perf, n, True, own=True) - _fetch_step(perf, n, False, own=True)
    assert gap == pytest.approx(4 * n * (2 * 2e-9 + 1 / NIC[0]), rel=1e-9)


def test_a_fetched_tensor_between_tasks_of_one_machine_takes_its_cores():
    """Between tasks of one machine the fetched bytes are copied at both ends while they cross
    (``copy_shares``; a bare link: one core for the sender): on one core, the copy holds it for
    N / bandwidth, so a kernel the client's task runs meanwhile starts only after it."""
    n = 250_000
    perf = replace(HOST, message_s_per_byte=0.0)
    shared_core = replace(perf, cores=1)
    gap = _fetch_step(shared_core, n, True, machines=("m", "m")) - _fetch_step(
        shared_core, n, False, machines=("m", "m")
    )
    assert gap == pytest.approx(4 * n / NIC[0], rel=1e-9)


def test_an_oversubscribed_host_pays_more_for_a_messages_bytes():
    """DevicePerf.shared_host: with more processes than cores, the CPU of a message's bytes is
    multiplied by ``byte_factor`` = 1 + byte share x (tasks - cores) / cores, apart from the
    per-event share: the per-byte cost, and on a Cluster machine the loopback copies of its
    tasks (their ``copy_shares``); a core each or no share changes nothing."""
    perf = replace(HOST, cores=2, message_s=10e-6, message_s_per_byte=1e-9, switch_byte_share=0.2)
    kb = 1 + 0.2 * 1.5
    five = perf.shared_host(5)
    assert perf.byte_factor(5) == pytest.approx(kb) and perf.byte_factor(2) == 1.0
    assert five.message_s_per_byte == pytest.approx(1e-9 * kb)
    assert five.message_s == 10e-6  # (no per-event share)
    assert perf.shared_host(2) == perf
    assert replace(perf, switch_byte_share=0.0).byte_factor(9) == 1.0
    c = Cluster()
    for i in range(4):
        c.add_task("worker", i, cpu=perf, nic=NIC, machine="m")
    c.add_task("ps", 0, cpu=perf, nic=NIC, machine="m")
    c.add_task("ps", 1, cpu=perf, nic=NIC)  # a machine of its own
    shares = sorted(c.task_cpu(t).copy_shares for t in c.tasks)  # (a bare link: 1 core, 0)
    assert [a for a, _ in shares] == pytest.approx([1.0] + [kb] * 5)
    assert [b for _, b in shares] == [0.0] * 6


def test_the_contention_runs_that_move_bytes_pay_the_byte_share():
    """simulate_contention of steps moving 1 MiB each way: the byte share leaves one client on
    two cores as it was; with four clients (five processes on two cores) it multiplies the CPU
    of the bytes, the per-byte cost and the copies, by 1 + share x 1.5 (the per-event costs
    stay: the rest of the step's CPU is the same)."""
    from hetbed.simulator.contention import BYTE_ELEMENTS, simulate_contention

    perf = replace(HOST, cores=2, message_s=20e-6, message_s_per_byte=0.5e-9, wake_s=8e-6)
    run = {
        a: simulate_contention(
            replace(perf, switch_byte_share=a), NIC, (1, 4), steps=6, warm=2,
            elements=BYTE_ELEMENTS,
        )
        for a in (0.0, 0.4)
    }  # fmt: skip
    assert run[0.4][1] == pytest.approx(run[0.0][1], rel=1e-12)
    # the bytes' CPU per step: three 1 MiB transfers (read, sent back, the sum fetched), each
    # costing each end its per-byte CPU and the sender a core for the stream (a bare link)
    nbytes = 4 * BYTE_ELEMENTS
    byte_cpu = 3 * nbytes * (2 * 0.5e-9 + 1 / NIC[0])
    extra = run[0.4][4] - run[0.0][4]
    assert extra == pytest.approx(0.4 * 1.5 * byte_cpu, rel=0.02)


def test_the_step_level_profile_of_a_shared_machine_pays_the_byte_share(tmp_path, monkeypatch):
    """profile_from_graph(cache_share=tasks) scales the per-byte message costs and records the
    factor of the loopback copies (``copy_cpu_factor``), which a step-level driver of one
    machine applies to its link's copy shares, as the op-level Cluster machine does."""
    from hetbed.devices.catalog import LinkSpec

    alone, shared = _box_profiles(
        tmp_path,
        monkeypatch,
        5,
        'message_overhead_s_per_byte = { value = 1e-9, source = "test" }',
        'switch_byte_cpu_share = { value = 0.2, source = "test" }',
    )
    kb = 1 + 0.2 * 1.5
    assert alone.copy_cpu_factor == 1.0 and shared.copy_cpu_factor == pytest.approx(kb)
    assert shared.worker_message_s_per_byte == pytest.approx(1e-9 * kb)
    assert shared.ps_message_s_per_byte == pytest.approx(1e-9 * kb)
    lo = LinkSpec("lo", "lo", "loopback", 4e9, 1e-5, sender_cpu_share=0.8, receiver_cpu_share=0.5)
    one_machine = SyncPS(shared, 4, nic=lo, machine_cores=2)
    assert one_machine.copy_shares == pytest.approx((0.8 * kb, 0.5 * kb))
    assert SyncPS(shared, 4, nic=lo).copy_shares == (0.8, 0.5)  # (machines of their own)
