"""The two simulators agree: for the models of the cluster-fidelity grid
(``scenarios/models/grid.py``: one scalar per PS task on 1, 2 or 4 PS tasks, one dense variable
of 1, 10 and 100 MB, 32 rows of an embedding: only the rows travel, accumulated by a
SparseConditionalAccumulator), 1 to 8 workers and no stragglers, the step-level SyncPS driver
(a profile of one replica) and an op-level simulation of the real program give median step
times within 5% of each other, except in the few cases TOLERANCE names.

The op-level simulation is ``grid.op_level_clients``: the very program ``hetbed cluster`` runs
(variables placed by ``replica_device_setter``, ``SyncReplicasOptimizer``), each worker a client
of its own graph and the chief's queue runner one more, stepping at once on one simulated
cluster (``run_clients``): its steady state, every message and op of the program included.

The workers are CPU hosts, as in the grid (`hetbed cluster` on one machine): with a GPU behind
the NIC the two differ by design, the op-level flow crossing NIC and PCIe at once where the
step-level driver adds the profile's host-to-GPU copy after the network transfer (gRPC's store
and forward).

``grid.op_level_step`` (one step from idle of a hand-written replicated graph, every client
starting at once) is compared with the step-level driver's own first step from idle, as its
clients see it (``grid.step_level_step(first=True)``: until the last worker's first call has
returned), with one PS task (FIRST_TOLERANCE).
"""

from __future__ import annotations

import statistics

import pytest

from hetbed.scenarios.models import grid

PS, WORKER = "xeon_e5_2630v3_ps", "xeon_e5_2680v3_2s"
CASES = [
    ("scalar", 1),
    ("scalar", 2),
    ("scalar", 4),
    ("dense_1mb", 1),
    ("dense_10mb", 1),
    ("dense_100mb", 1),
    ("sparse", 1),
]

#: how far apart the medians may be: 5%, except with several PS tasks, where the step-level
#: driver's shards of a group are alike and get their part of a step at once, and the program
#: sends a worker's gradients to the tasks one after another (the global step's task, which
#: waits for every other task's control messages, gets its gradient last and the others'
#: messages early: 4 PS tasks, one worker +6.0%, two +8.4%), and where the global step's task
#: is the bottleneck of eight workers (2 PS tasks: -7.5%; its handler idles 8% of the
#: program's step waiting on the other task and 2% of the driver's)
TOLERANCE = {
    ("scalar", 2): 0.08,
    ("scalar", 4): 0.09,
}
#: the step-level driver's first step against the hand-written graph's one step (one PS task)
FIRST_TOLERANCE = 0.05


@pytest.mark.parametrize("model, n_ps", CASES)
@pytest.mark.parametrize("nic", ["eth_10g", "eth_100g"])
def test_step_level_and_op_level_agree(model, n_ps, nic):
    rel = TOLERANCE.get((model, n_ps), 0.05)
    for workers in (1, 2, 4, 8):
        steps = grid.op_level_clients(model, workers, n_ps, nic, WORKER, PS, steps=8)
        a = statistics.median(steps[1:])  # (the first from idle)
        b = grid.step_level_step(model, workers, n_ps, nic, WORKER, PS)
        assert b == pytest.approx(a, rel=rel), (model, n_ps, nic, workers, a, b)
        if n_ps == 1:
            one = grid.op_level_step(model, workers, n_ps, nic, WORKER, PS)
            first = grid.step_level_step(model, workers, n_ps, nic, WORKER, PS, first=True)
            assert first == pytest.approx(one, rel=FIRST_TOLERANCE), ("first", model, workers)


def test_the_op_level_program_is_the_clusters():
    """``op_level_clients`` runs the program ``hetbed cluster`` runs: every worker takes one
    token a step: its steps settle into a steady state (lock-step, no init tokens). With a
    backup worker (one gradient fewer a step, TF's init tokens) the real values run (hybrid:
    the late gradient is dropped as stale) and the run ends as TF's does (the chief releases
    the waiting workers' tokens and cancels the queue runner's takes)."""
    steps = grid.op_level_clients("scalar", 2, 1, "eth_10g", WORKER, PS, steps=6)
    assert len(steps) == 6 and all(t > 0 for t in steps)
    assert max(steps[1:]) == pytest.approx(min(steps[1:]), rel=1e-6)  # a steady state
    backup = grid.op_level_clients(
        "scalar", 3, 1, "eth_10g", WORKER, PS, steps=6, aggregate=2, init_tokens=2, hybrid=True
    )
    assert len(backup) == 6 and all(t > 0 for t in backup)


def test_the_op_level_programs_ops_by_task():
    """``sessions_out`` hands back the chief's simulated session: its steps' records give each
    op's median duration, start and end by task (``step_timings``), what ``cluster_fidelity
    --trace`` sets beside a real run's traced ops; the worker computes the loss, then the PS
    task applies its gradient."""
    chief: list = []
    grid.op_level_clients("scalar", 1, 1, "eth_10g", WORKER, PS, steps=4, sessions_out=chief)
    steps = grid.training_steps(chief[0])
    assert len(steps) == 4
    t = grid.step_timings(steps[1:])
    square = t[("worker:0", "Square", "model/Square")]
    apply = t[("ps:0", "AccumulatorApplyGradient", "sync_replicas/AccumulatorApplyGradient")]
    assert square[0] > 0 and square[2] == pytest.approx(square[1] + square[0])
    assert apply[1] > square[2]  # (the gradient goes to the PS once computed)
    # the medians of each op's first run in each step, from that step's first op (a
    # message is not an op: the first step starts at its Add, its message before), on task 3
    # of job ps
    rows = [[("/job:ps/replica:0/task:3/device:cpu:0", "RunGraph", "RunGraph", 0.0, 1.0),
             ("/job:ps/task:3", "Add", "a", 2.0, 3.0), ("/job:ps/task:3", "Add", "a", 5.0, 9.0)],
            [("/job:ps/task:3", "Add", "a", 10.0, 14.0)],
            [("/job:ps/task:3", "Mul", "m", 20.0, 21.0), ("/job:ps/task:3", "Add", "a", 23.0, 31.0)]]  # fmt: skip
    assert grid.step_timings(rows) == {("ps:3", "Add", "a"): (4.0, 0.0, 4.0),
                                       ("ps:3", "Mul", "m"): (1.0, 0.0, 1.0),
                                       ("ps:3", "RunGraph", "RunGraph"): (1.0, -2.0, -1.0)}  # fmt: skip


def test_first_step_is_the_first_calls_return():
    """``first=True`` is when the last worker starts its second step: after its first step's
    replies, later than the first step's update and than any step's median."""
    first = grid.step_level_step("scalar", 4, 1, "eth_10g", WORKER, PS, first=True)
    steady = grid.step_level_step("scalar", 4, 1, "eth_10g", WORKER, PS)
    assert first > steady > 0
    with pytest.raises(ValueError, match="first"):
        grid.step_level_step("scalar", 4, 1, "eth_10g", WORKER, PS, mode="async", first=True)


@pytest.mark.parametrize("model, rel", [("scalar", 0.12), ("dense_10mb", 0.05), ("sparse", 0.12)])
def test_async_step_level_and_op_level_agree(model, rel):
    """AsyncPS against the real program's asynchronous mode (plain SGD, each worker on its
    own), time per global step: within 5% where bandwidth matters; where messages bound the
    step, 12%: the workers settle at different offsets and the PS task's handler takes their
    messages in another order (two workers: the program's 20 us apart, a gradient handled
    before the other worker's reply, the driver's 61 us apart, after it: -11%; four: +10%)."""
    for workers in (1, 2, 4):
        a = grid.op_level_clients(model, workers, 1, "eth_10g", WORKER, PS, steps=12, mode="async")
        b = grid.step_level_step(model, workers, 1, "eth_10g", WORKER, PS, mode="async")
        assert b == pytest.approx(a[0], rel=rel), (model, workers, a[0], b)


#: one backup worker: (model, workers whose gradients a step takes, how far apart): 5%,
#: except the scalar model with one worker and a backup, whose program settles after a few
#: steps into its two workers taking turns (655 us a global step) where the driver keeps one
#: worker's pace (715 us, a synchronous step of one worker): +9%
BACKUP_CASES = [("dense_10mb", 1, 0.05), ("dense_10mb", 3, 0.05), ("scalar", 1, 0.10),
                ("scalar", 3, 0.05)]  # fmt: skip


@pytest.mark.parametrize("model, workers, rel", BACKUP_CASES)
def test_backup_worker_step_level_and_op_level_agree(model, workers, rel):
    """SyncPS with one backup worker (W of W + 1 gradients a step, TF's token queue) against
    the program with real values (a late gradient dropped as stale), time per global step over
    24 steps after the first two (BACKUP_CASES says how close). Every worker pulls and pushes every step and, once
    it has its token (one already queued or one the update releases), waits for its RunGraph
    replies, the global step's task's among them, behind what that task's handler is doing. With
    one worker and a backup of 10 MB the workers drift apart and back in step, a cycle of about
    fifteen steps (one worker keeps taking the token left over from the last update and its
    gradients are dropped), which both simulations run step for step."""
    steps = grid.op_level_clients(
        model, workers + 1, 1, "eth_10g", WORKER, PS, steps=24, aggregate=workers,
        init_tokens=workers, hybrid=True,
    )  # fmt: skip
    b = grid.step_level_step(
        model, workers, 1, "eth_10g", WORKER, PS, steps=24, mode="backup", every_step=True
    )
    a = statistics.fmean(steps[2:])
    assert statistics.fmean(b[2:]) == pytest.approx(a, rel=rel), (model, workers, a, b)


#: the grid's runs on this machine (``bench/cluster_fidelity.py``'s configuration) where the two
#: simulators may differ by more than 5%. Both book the same CPU work a step (within 1-2% in
#: each of these runs, counted over the machine's cores: ``HostCores``); they pack it
#: differently, the share of the cores left idle:
#: - one worker, a scalar on each of two PS tasks: the program 20%, the driver 29% (+11%);
#:   several PS tasks, as on hosts of their own above: the program sends a worker's gradients
#:   to the tasks one after another;
#: - one backup worker of 10 MB: the program 13%, the driver 2% (-12%);
#: - four asynchronous workers of the sparse model (5 processes on 2 cores): the program's
#:   per-op work fills the cores (0.4% idle), the driver's whole-message steps leave 4.5%
#:   (+6.7%);
#: - four workers of 10 MB: the program 10%, the driver 15% (+5.2%).
#: Two asynchronous scalar workers (three processes on the two cores) have two ways of packing
#: a step, and each simulator takes one or the other by the per-event software cost
#: (``switch_cpu_share``): across 0.06-0.2, 0.56-0.57 ms up to 0.1 and 0.59-0.61 from 0.12 op
#: by op, the driver 0.60-0.64 throughout; at the shipped 0.1 (the median of five calibrations
#: here) +8.1%. (One scalar worker and its backup did the same, +10.5%, until the PS's thread
#: wake-ups, ``wake_overhead_s``: now +2.1%.) Two asynchronous sparse workers have the same two
#: packings op by op: 0.538-0.545 ms a global step with a share of 0 to 0.03, 0.570-0.582 from
#: 0.05 to 0.1, the driver 0.60-0.63 throughout: +10.2% at the shipped 0.02 (the share fitted
#: through the simulation of the contention runs, ``switch_share_fit``), +7.6% at 0.1.
#: The blocked takes and token dequeues each simulator wakes on the PS (``wake_overhead_s``,
#: 40 us shipped): two 1 MB workers take 5.50, 5.89, 5.75 and 6.00 ms op by op at 0, 40, 80 and
#: 160 us of it (a flip of its packing at 40; the driver 5.37, 5.49, 5.62, 5.87: -6.7% at 40,
#: -2.3% at 80); three scalar workers and a backup gain 5.5 wake-ups a step op by op, 3.5 in
#: the driver (-2.5% without them, -6.5% at 40 us).
#: The interpreter hand-offs between clients (a message of one client's step finding its task's
#: handler busy with another's: ``wake_overhead_s`` each) fall where each simulator interleaves
#: the clients' messages: the program at each message (two 1 MB workers: each of the five PS
#: messages of a worker's step, 9.7 hand-offs a global step), the driver at each booking of a
#: worker step's messages (4.2); per global step, op by op / driver: 2 PS tasks and 4 workers
#: 47 / 33 (-0.8% without them, -9.3% with), a backup scalar worker 9.1 / 6.1 (+2.1%, -6.8%),
#: three and a backup 22 / 19 (-6.5%, -10.2%), four asynchronous scalar workers 3.9 / 4.4
#: (+4.5%, +9.0%), asynchronous sparse workers 0.6 / 2.6 with two (+3.0%, +7.6%) and 2.2 / 4.4
#: with four (+5.7%, +14.4%). (Two asynchronous scalar workers came within 5% with them.)
ONE_MACHINE_TOLERANCE = {
    ("sync", "scalar", 1, 2): 0.12,
    ("sync", "dense_1mb", 2, 1): 0.08,
    ("sync", "scalar", 4, 2): 0.10,
    ("backup", "dense_10mb", 1, 1): 0.135,
    ("backup", "scalar", 1, 1): 0.08,
    ("backup", "scalar", 3, 1): 0.11,
    ("async", "scalar", 4, 1): 0.10,
    ("async", "sparse", 2, 1): 0.14,
    ("async", "sparse", 4, 1): 0.15,
}


@pytest.mark.parametrize("mode", ["sync", "backup", "async"])
def test_on_one_machine_step_level_and_op_level_agree(mode, monkeypatch):
    """The grid as ``bench/cluster_fidelity.py`` predicts it (``grid.runs``): every task on
    this machine's catalog entry (its shipped defaults), sharing its cores, over the loopback
    link; each run's step-level and op-level predictions within 5% (ONE_MACHINE_TOLERANCE names
    the exceptions and why). A backup run has one task more than the gradients it takes, and
    both simulators price it so (the step-level profile had counted one task fewer sharing the
    machine: its messages were not slowed by the oversubscribed cores, -10% on one scalar).
    The machine's cores are alike and a process runs on whichever is free (``HostCores``):
    when each booking held one core throughout, the driver's messages booked ahead of the clock
    left short gaps that ready work could not use (four asynchronous workers of a scalar +13%,
    of the sparse model +13%, four workers of 1 MB -6%; now +4.4%, +6.7%, -1.5%)."""
    from hetbed.devices.catalog import load_device

    monkeypatch.delenv("HETBED_CATALOG_PATH", raising=False)
    host, link, machine = "this_machine", "loopback", "this machine"
    cores = load_device(host).cores
    assert cores == 2  # (the shipped defaults this test's tolerances were measured on)
    rows = [r for r in grid.runs() if r[0] == mode]
    assert len(rows) >= 4
    for run in rows:
        _, model, w, n_ps = run
        op = grid.op_level_prediction(mode, model, w, n_ps, link, host, host, machine)
        step = grid.step_level_step(
            model, w, n_ps, link, host, host, mode=mode, machine_cores=cores
        )
        rel = ONE_MACHINE_TOLERANCE.get(run, 0.05)
        assert step == pytest.approx(op, rel=rel), (run, op, step)
