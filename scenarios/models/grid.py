"""The models of the cluster-fidelity grid, each written once for the three ways hetbed runs it:

* for real, as a program of ``hetbed cluster`` tasks (``python -m hetbed.scenarios.models.grid
  MODEL STEPS BARRIER_DIR [MODE]``): between-graph replication, variables placed on the PS
  tasks by ``replica_device_setter``; synchronous (``SyncReplicasOptimizer``, with or without
  one backup worker) or asynchronous; the chief prints each step's wall time;
* step-level: one replica's profile (``profile_from_graph``) driven by ``SyncPS`` or
  ``AsyncPS``;
* op-level: the replicated synchronous graph simulated op by op (each worker's gradient goes into
  a ConditionalAccumulator on its variable's PS task as it arrives, with the worker's local step;
  the PS takes the average and applies it; each worker then takes a token from the PS into its
  local step: the tensors SyncReplicasOptimizer moves across sessions, written in one graph).

``MODELS`` maps a name to (elements per variable, variables per PS task): 0 elements is a
scalar; a dense model has one variable, on the first PS task.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import time

import numpy as np

import hetbed as hb
from hetbed.simulator import Cluster, SimSession
from hetbed.simulator.profiling import profile_from_graph
from hetbed.simulator.training import AsyncPS, SyncPS

MODELS = {
    "scalar": (0, 1),  # one scalar on each PS task
    "dense_1mb": (1 << 18, 0),  # one float32 variable of 1 MB
    "dense_10mb": (10 << 18, 0),
    "dense_100mb": (100 << 18, 0),
}
#: models beside the grid (tests): a chain of ``layers`` square float32 layers of ``width``
#: units on a batch of ``batch``, one variable per layer, placed round-robin on the PS tasks;
#: its forward pass reads the variables in order and its backward pass yields their gradients
#: in reverse, which is what the step-level drivers' overlap models
CHAINS = {"chain_4x4mb": (4, 1024, 32)}
#: a sparse model: an embedding of ``rows`` x ``dim`` float32 (25.6 MB) on the first PS task, of
#: which each step looks up ``lookups`` rows (each worker its own, fixed): the worker reads and
#: the PS accumulates only those rows (IndexedSlices, a SparseConditionalAccumulator)
SPARSE = {"sparse": (100_000, 64, 32)}
LEARNING_RATE = 0.01


def n_variables(model: str, n_ps: int) -> int:
    if model in CHAINS:
        return CHAINS[model][0]
    if model in SPARSE:
        return 1
    elements, per_ps = MODELS[model]
    return per_ps * n_ps if per_ps else 1


def _input_shape(model: str) -> list[int]:
    if model in CHAINS:
        return [CHAINS[model][2], CHAINS[model][1]]
    if model in SPARSE:
        return [SPARSE[model][2], SPARSE[model][1]]
    elements = MODELS[model][0]
    return [1024] if elements == 0 else [elements]


def _input(model: str) -> object:
    """One replica's input, a constant as the real program's (``main``): no value is fed, so
    no step carries one to its task."""
    return hb.constant(np.ones(_input_shape(model), np.float32))


def loss(model: str, x: object, n_ps: int, device: object = None, ids_seed: int = 0) -> object:
    """One replica's loss; its variables ``v0``, ``v1``, ... (under the caller's scope) each on
    ``device(k)`` when given."""
    if model in CHAINS:
        layers, width, _ = CHAINS[model]
        h = x
        for k in range(layers):
            with hb.device(device(k)) if device else contextlib.nullcontext():
                w = hb.get_variable(f"v{k}", [width, width], initializer=hb.zeros_initializer())
            h = hb.tanh(hb.matmul(h, w))
        return hb.reduce_mean(h)
    if model in SPARSE:
        rows, dim, lookups = SPARSE[model]
        with hb.device(device(0)) if device else contextlib.nullcontext():
            emb = hb.get_variable("v0", [rows, dim], initializer=hb.zeros_initializer())
        ids = np.random.default_rng(ids_seed).choice(rows, lookups, replace=False)
        return hb.reduce_sum(hb.nn.embedding_lookup(emb, np.sort(ids).astype(np.int64)) * x)
    elements = MODELS[model][0]
    total = None
    for k in range(n_variables(model, n_ps)):
        shape = [] if elements == 0 else [elements]
        with hb.device(device(k)) if device else contextlib.nullcontext():
            v = hb.get_variable(f"v{k}", shape, initializer=hb.zeros_initializer())
        term = hb.reduce_mean(hb.square(v * x - 1.0)) if elements == 0 else hb.reduce_sum(v * x)
        total = term if total is None else total + term
    return total


def _cluster(workers: int, n_ps: int, nic: object, worker: object, ps: object,
             machine: str | None, cost_model: object, hybrid: bool = False) -> Cluster:  # fmt: skip
    """The grid's cluster: ``n_ps`` PS tasks and ``workers`` worker tasks of those cpus and
    NICs (every one on ``machine``, sharing its cores, when given)."""
    c = Cluster(cost_model=cost_model, hybrid=hybrid)
    for k in range(n_ps):
        c.add_task("ps", k, cpu=ps, nic=nic, machine=machine)
    for i in range(workers):
        c.add_task("worker", i, cpu=worker, nic=nic, machine=machine)
    return c


def op_level_step(
    model: str,
    workers: int,
    n_ps: int,
    nic: object,
    worker: object,
    ps: object,
    machine: str | None = None,
    cost_model: object = None,
) -> float:
    """Simulated time of one synchronous step of the replicated graph, op by op (shape-only).
    Each worker task is a client of its own (between-graph replication), and the chief's
    queue runner (SyncReplicasOptimizer's) one more, calling the PS tasks; ``machine`` puts every
    task on that one machine, sharing its cores (how ``hetbed cluster`` runs them here)."""
    return op_level_record(model, workers, n_ps, nic, worker, ps, machine, cost_model).step_time_s


def op_level_record(
    model: str,
    workers: int,
    n_ps: int,
    nic: object,
    worker: object,
    ps: object,
    machine: str | None = None,
    cost_model: object = None,
) -> object:
    """``op_level_step``'s RunRecord: the step's time, and every op and message with its
    device and simulated duration (``ops``); ``cost_model`` prices the ops (default: the
    roofline)."""
    c = _cluster(workers, n_ps, nic, worker, ps, machine, cost_model)
    nv = n_variables(model, n_ps)

    def on_ps(k: int) -> str:
        return f"/job:ps/task:{k % n_ps}/device:cpu:0"

    with hb.Graph().as_default():
        grads, local = [], []
        with hb.device(on_ps(0)):
            global_step = hb.Variable(np.int64(0), name="global_step", trainable=False)
        for t in range(workers):
            with hb.device(f"/job:worker/task:{t}/device:cpu:0"):
                x = _input(model)
                with hb.variable_scope("model", reuse=t > 0):
                    replica_loss = loss(model, x, n_ps, on_ps, ids_seed=t)
                variables = hb.trainable_variables()
                grads.append(hb.gradients(replica_loss, variables))
                local.append(hb.Variable(np.int64(0), name=f"local_step{t}", trainable=False))
        targets, pushes, on_first = [], [[] for _ in range(workers)], []
        for k in range(nv):
            with hb.device(on_ps(k)):
                sparse = isinstance(grads[0][k], hb.IndexedSlices)
                make = hb.SparseConditionalAccumulator if sparse else hb.ConditionalAccumulator
                acc = make(hb.float32, variables[k].shape, shared_name=f"a{k}")
                for t, g in enumerate(grads):  # each gradient goes with its worker's local step
                    if sparse:
                        push = acc.apply_indexed_slices_grad(g[k], local_step=local[t].value())
                    else:
                        push = acc.apply_grad(g[k], local_step=local[t].value())
                    pushes[t].append(push)
                    targets.append(push)
                opt = hb.train.GradientDescentOptimizer(LEARNING_RATE)
                if sparse:
                    avg = acc.take_indexed_slices_grad(workers, dense=variables[k])
                else:
                    avg = acc.take_grad(workers)
                targets.append(opt.apply_gradients([(avg, variables[k])]))
                if k % n_ps == 0:  # (the global step's task: its tokens wait for its update)
                    on_first.append(targets[-1])
        for t in range(workers):  # the token each worker takes once the update is done
            with hb.device(on_ps(0)), hb.control_dependencies(on_first):
                token = hb.identity(global_step.value())
            with hb.device(f"/job:worker/task:{t}/device:cpu:0"):
                targets.append(hb.assign(local[t], token))
        workers_ = [t for t in c.tasks if t.startswith("/job:worker/")]
        ps_tasks = [t for t in c.tasks if t.startswith("/job:ps/")]
        # and the chief's queue runner, a session of its own calling the PS tasks every step
        sess = SimSession(c, client=[*workers_, (workers_[0], ps_tasks)])
        sess.run(hb.global_variables_initializer())
        sess.run(targets)  # targets: no op gathers them on one task
        return sess.last_record


def op_level_clients(
    model: str,
    workers: int,
    n_ps: int,
    nic: object,
    worker: object,
    ps: object,
    machine: str | None = None,
    cost_model: object = None,
    steps: int = 10,
    init_tokens: int = 0,
    hybrid: bool = False,
    aggregate: int | None = None,
    mode: str = "sync",
    cluster_out: list | None = None,
    sessions_out: list | None = None,
) -> list[float]:
    """The chief's step times of the real program (``main``'s graph: variables placed by
    ``replica_device_setter``, ``SyncReplicasOptimizer``), simulated op by op with every
    client stepping on its own (``run_clients``): each worker a session of its own graph,
    the chief's queue runner one more (on the chief's task, calling the PS tasks), all sharing
    the tasks' variables, accumulators and token queue. Shape-only (``hybrid``: with real
    values, the accumulators then drop stale gradients as TensorFlow's do). ``init_tokens`` the chief
    queues before the first step (TensorFlow's hook queues ``workers``: every worker then
    starts its second step before the first update; 0: each waits for it, as SyncPS without a
    token queue does). ``aggregate``: gradients a step takes (default ``workers``; one less:
    a backup worker, as ``main``'s "backup" mode). The chief runs ``steps`` steps, the other
    workers until it is done; then it releases tokens for them and cancels the queue runner's
    takes, as TensorFlow's hook does. The first of the chief's steps starts from idle, the rest
    are the steady state; ``machine`` puts every task on that one machine, sharing its cores.

    ``mode="async"``: plain SGD, each worker updating the variables on its own (no queue
    runner); returns instead the seconds per global step over the chief's steps after its
    first two (every worker's steps that ended meanwhile count), as the real run's chief sees
    the global step advance. ``cluster_out``: the simulated Cluster is appended to it (its
    devices' ``records``: every op and message each task ran); ``sessions_out``: the chief's
    SimSession (its ``records``: each of its steps' own ops and messages, every task's)."""
    from hetbed.simulator import run_clients

    if mode not in ("sync", "async"):
        raise ValueError(f"op_level_clients: mode must be 'sync' or 'async', got {mode!r}")
    sync = mode == "sync"
    c = _cluster(workers, n_ps, nic, worker, ps, machine, cost_model, hybrid)
    if cluster_out is not None:
        cluster_out.append(c)
    spec = {"ps": [f"ps{k}:0" for k in range(n_ps)], "worker": [f"w{i}:0" for i in range(workers)]}
    tasks = [t for t in c.tasks if t.startswith("/job:worker/")]
    ps_tasks = [t for t in c.tasks if t.startswith("/job:ps/")]
    clients, names, chief, sessions = [], [], {}, []
    for i in range(workers):
        g = hb.Graph()
        with g.as_default():
            setter = hb.train.replica_device_setter(
                cluster=spec, worker_device=f"/job:worker/task:{i}"
            )
            with hb.device(setter):
                step = hb.train.get_or_create_global_step()
                x = _input(model)
                with hb.variable_scope("model"):
                    replica_loss = loss(model, x, n_ps, ids_seed=i)
                opt = hb.train.GradientDescentOptimizer(LEARNING_RATE)
                if sync:
                    opt = hb.train.SyncReplicasOptimizer(
                        opt, workers if aggregate is None else aggregate, total_num_replicas=workers
                    )
                train = opt.minimize(replica_loss, global_step=step)
            sess = SimSession(c, graph=g, client=tasks[i], shared_resources=True)
            sessions.append(sess)
            if i == 0:  # the chief initializes the variables, the accumulators, the tokens
                sess.run(hb.global_variables_initializer())
                end = []
                if sync:
                    sess.run(opt.chief_init_op)
                    if init_tokens:
                        sess.run(opt.get_init_tokens_op(init_tokens))
                    # (what the chief's hook runs at the end: tokens for the workers still
                    # waiting, and the queue runner's takes cancelled)
                    end = [opt._release_tokens_op(), opt._cancel_sync_op]
                chief = {"sess": sess, "graph": g}
                if sessions_out is not None:
                    sessions_out.append(sess)
                chief["sync"] = opt.chief_sync_op if sync else None
            elif sync:
                sess.run(opt.local_step_init_op)

        def work(sess=sess, train=train, i=i, end=end if i == 0 else None) -> None:
            if i:  # the other workers step until the chief is done
                while not done:
                    sess.run(train)
                return
            for _ in range(steps):
                sess.run(train)
            done.append(True)
            if end:  # tokens for the workers still waiting, then the queue runner stopped:
                sess.run(end[0])  # its take cancelled, again until it has seen that the
                while len(done) < 2:  # chief is done (a take it issued meanwhile waits on)
                    sess.run(end[1])

        clients.append(work)
        names.append(f"worker {i}")
    done: list[bool] = []
    first = len(chief["sess"].step_times)  # (its runs so far: the initialization)
    if not sync:
        run_clients(c, clients, names)
        recs = chief["sess"].records
        t0 = recs[first + 2].start_s
        t1 = recs[first + steps - 1].start_s + recs[first + steps - 1].step_time_s
        n = sum(
            1
            for s_ in sessions
            for r in list(s_.records)[first if s_ is chief["sess"] else 0 :]
            if t0 < r.start_s + r.step_time_s <= t1
        )
        return [(t1 - t0) / n]
    qr = SimSession(c, graph=chief["graph"], client=(tasks[0], ps_tasks), shared_resources=True)

    def queue_runner() -> None:
        while not done:  # one update a global step, until the chief is done
            try:
                qr.run(chief["sync"])
            except (hb.errors.AbortedError, hb.errors.CancelledError):
                break
        done.append(True)  # (the chief stops cancelling)

    run_clients(c, [queue_runner, *clients], ["queue runner", *names])
    return list(chief["sess"].step_times[first : first + steps])


def runs(quick: bool = False) -> list[tuple[str, str, int, int]]:
    """(mode, model, workers, PS tasks) of every run of the cluster-fidelity grid
    (``bench/cluster_fidelity.py``); ``quick``: four small synchronous ones. In "backup" mode
    ``workers`` is how many gradients a step takes, of ``workers`` + 1 tasks."""
    if quick:
        return [("sync", m, w, 1) for m in ("scalar", "dense_1mb") for w in (1, 2)]
    out = [("sync", m, w, 1) for m in MODELS for w in (1, 2, 4)]
    out = [r for r in out if not (r[1] == "dense_100mb" and r[2] > 2)]
    out += [("sync", m, 8, 1) for m in ("scalar", "dense_1mb")]  # 9 processes on the cores
    out += [("sync", "scalar", w, 2) for w in (1, 2, 4)]  # a scalar on each of 2 PS tasks
    out += [("sync", "scalar", 4, 4)]  # 4 PS tasks
    out += [("backup", m, w, 1) for m in ("scalar", "dense_10mb") for w in (1, 3)]
    out += [("async", m, w, 1) for m in ("scalar", "dense_10mb", "sparse") for w in (1, 2, 4)]
    out += [("sync", "sparse", w, 1) for w in (1, 2, 4)]  # 32 rows of a 25.6 MB embedding
    return out


def op_level_prediction(
    mode: str,
    model: str,
    workers: int,
    n_ps: int,
    nic: object,
    worker: object,
    ps: object,
    machine: str | None = None,
    cost_model: object = None,
    cluster_out: list | None = None,
    sessions_out: list | None = None,
) -> float:
    """Seconds per global step of a grid run (``runs``' mode, model, workers, PS tasks) by the
    op-level simulation (``op_level_clients``): the chief's median step of 12 after the first
    two ("sync"; "backup": ``workers`` gradients of ``workers`` + 1 tasks, TensorFlow's init
    tokens, real values so that late gradients are dropped as stale), or the time per global
    step ("async")."""
    if mode not in MODES:
        raise ValueError(f"op_level_prediction: mode must be one of {MODES}, got {mode!r}")
    kw = {"aggregate": workers, "init_tokens": workers, "hybrid": True} if mode == "backup" else {}
    steps = op_level_clients(
        model, workers + (mode == "backup"), n_ps, nic, worker, ps, machine, cost_model,
        steps=12, mode="async" if mode == "async" else "sync", cluster_out=cluster_out,
        sessions_out=sessions_out, **kw,
    )  # fmt: skip
    return steps[0] if mode == "async" else statistics.median(steps[2:])


def step_level_step(
    model: str,
    workers: int,
    n_ps: int,
    nic: object,
    worker: object,
    ps: object,
    steps: int = 8,
    mode: str = "sync",
    machine_cores: int | None = None,
    bucket_bytes: float | None = None,
    cost_model: object = None,
    first: bool = False,
    every_step: bool = False,
) -> float | list[float]:
    """Seconds per global step of the step-level driver on one replica's profile: SyncPS's
    median step ("sync"; "backup": ``workers`` gradients of ``workers`` + 1 tasks, TF's token
    queue), or AsyncPS's simulated time over its global steps ("async"). ``first`` (sync):
    instead, the first step from idle as its clients see it, what ``op_level_step`` simulates:
    from the start until the last worker's first call has returned (its replies and token
    handled: when it starts its second step). ``machine_cores``: every task on one machine of
    that many cores; ``cost_model`` prices the profile's ops (default: the roofline).
    ``every_step`` (sync, backup): every step's time instead of their median."""
    if first and mode != "sync":
        raise ValueError(f"first: a synchronous run's first step only, not mode {mode!r}")
    with hb.Graph().as_default():
        x = _input(model)
        with hb.variable_scope("model"):
            replica_loss = loss(model, x, n_ps)
        train = hb.train.GradientDescentOptimizer(LEARNING_RATE).minimize(replica_loss)
        prof = profile_from_graph(
            train,
            {},
            worker=worker,
            ps=ps,
            ps_tasks=n_ps,
            cost_model=cost_model,
            # every task on one machine: the workers (and the backup worker), the PS tasks
            cache_share=workers + (mode == "backup") + n_ps if machine_cores else 1,
        )
    if mode == "async":
        r = AsyncPS(
            prof,
            workers,
            n_ps=n_ps,
            nic=nic,
            machine_cores=machine_cores,
            bucket_bytes=bucket_bytes,
        )
        r = r.run(steps * workers)
        return r.sim_time_s / (steps * workers)
    backup = 1 if mode == "backup" else 0
    drv = SyncPS(
        prof,
        workers,
        backup,
        n_ps=n_ps,
        nic=nic,
        fast_worker_can_contribute_twice=bool(backup),
        sync_replicas=True,  # what the real program and the op-level graph do
        machine_cores=machine_cores,
        bucket_bytes=bucket_bytes,
    )
    if first:
        grads = drv.run(2).gradients.sort_values(["worker", "pull_start_s"])
        return float(grads.groupby("worker").pull_start_s.nth(1).max())
    result = drv.run(steps)
    return [float(t) for t in result.steps.step_time_s] if every_step else result.step_time()


MODES = ("sync", "async", "backup")
#: the environment variable that has the chief trace its steps (``main``)
TRACE_ENV = "HETBED_GRID_TRACE"


#: what a step's timeline is measured from (``step_timings``): its first op that is neither a
#: transfer's end (a real step's Send and Recv nodes) nor a message (a simulated step's records)
NOT_OPS = frozenset({"_Send", "_Recv", "RecvTensor", "RunGraph", "Session.run", "Handoff", "Wake"})


def step_timings(
    steps: list[list[tuple[str, str, str, float, float]]],
) -> dict[tuple[str, str, str], tuple[float, float, float]]:
    """(task, op type, op name) -> medians over ``steps`` of (seconds, start, end), its start and
    end counted from its step's first op (``NOT_OPS`` aside); each step a list of rows (device
    or task, type, name, start s, end s), an op that ran twice in a step counted once (its
    first run). A real traced step and a simulated one line up this way: their clocks differ."""
    import statistics
    from collections import defaultdict

    by: dict[tuple[str, str, str], list[tuple[float, float, float]]] = defaultdict(list)
    for rows in steps:
        starts = [r[3] for r in rows if r[1] not in NOT_OPS]
        if not starts:
            continue
        t0, seen = min(starts), set()
        for device, kind, name, start, end in sorted(rows, key=lambda r: r[3]):
            key = (short_task(device), kind, name)
            if key not in seen:
                seen.add(key)
                by[key].append((end - start, start - t0, end - t0))
    return {k: tuple(statistics.median(x) for x in zip(*v)) for k, v in by.items()}


def training_records(session: object) -> list:
    """The RunRecords of the training steps a simulated session (``sessions_out``) ran: its runs
    of the most common kind, by the ops they ran (a chief's initialization, and its end, tokens
    released and takes cancelled, run other ops)."""
    import statistics

    recs = list(session.records)
    kinds = [frozenset(zip(r.ops.type, r.ops.op)) for r in recs]
    train = statistics.mode(kinds)
    return [r for r, k in zip(recs, kinds) if k == train]


def training_steps(session: object) -> list[list[tuple[str, str, str, float, float]]]:
    """The rows (device, type, name, start s, end s) of each training step a simulated session
    (``sessions_out``) ran (``training_records``), ``step_timings``' input."""
    return [
        list(zip(r.ops.device, r.ops.type, r.ops.op, r.ops.start_s, r.ops.end_s))
        for r in training_records(session)
    ]


def short_task(device: str) -> str:
    """``/job:ps/replica:0/task:0/device:cpu:0`` -> ``ps:0``."""
    parts = dict(p.split(":", 1) for p in device.strip("/").split("/") if ":" in p)
    return f"{parts.get('job', '?')}:{parts.get('task', '?')}"


def main(argv: list[str]) -> int:
    """A task of ``hetbed cluster``: ``MODEL STEPS BARRIER_DIR [MODE]``. MODE "sync" (default):
    SyncReplicasOptimizer aggregating every worker's gradient; "backup": aggregating all but one
    (one backup worker); "async": plain SGD, each worker on its own. The chief prints ``step
    SECONDS GLOBAL_STEP TIME`` after each of its steps. Every worker starts stepping only once
    all have a session (each leaves a file in BARRIER_DIR): otherwise the chief, which may
    contribute every gradient of a step (TF's token queue), could run alone before the others
    join."""

    model, steps, barrier = argv[0], int(argv[1]), argv[2]
    mode = argv[3] if len(argv) > 3 else "sync"
    if mode not in MODES:
        raise SystemExit(f"mode must be one of {MODES}, got {mode!r}")
    cluster, job, index = hb.train.cluster_from_env()
    server = hb.train.Server(cluster, job, index)
    if job == "ps":
        server.join()
        return 0
    n_ps = cluster.num_tasks("ps")
    n_workers = cluster.num_tasks("worker")
    setter = hb.train.replica_device_setter(
        cluster=cluster, worker_device=f"/job:worker/task:{index}"
    )
    g = hb.Graph()
    with g.as_default():
        with hb.device(setter):
            step = hb.train.get_or_create_global_step()
            x = hb.constant(np.ones(_input_shape(model), np.float32))
            with hb.variable_scope("model"):
                replica_loss = loss(model, x, n_ps, ids_seed=index)
            opt = hb.train.GradientDescentOptimizer(LEARNING_RATE)
            hooks = [hb.train.StopAtStepHook(last_step=steps)]
            if mode != "async":
                aggregate = n_workers - (1 if mode == "backup" else 0)
                opt = hb.train.SyncReplicasOptimizer(opt, aggregate, total_num_replicas=n_workers)
                hooks.append(opt.make_session_run_hook(is_chief=index == 0))
            train = opt.minimize(replica_loss, global_step=step)
        with hb.train.MonitoredTrainingSession(
            master=server.target, is_chief=index == 0, hooks=hooks
        ) as sess:
            open(os.path.join(barrier, f"worker{index}"), "w").close()
            while len(os.listdir(barrier)) < n_workers:
                time.sleep(0.01)
            # (with TRACE_ENV, the chief traces its steps from the half of the run on and prints
            # each op's medians at the end, as "trace TASK TYPE NAME SECONDS START END", its
            # start and end from the step's first op: step_timings)
            traced: list | None = [] if index == 0 and os.environ.get(TRACE_ENV) else None
            # (asynchronous, the chief takes about 1/W of the global steps)
            trace_from = steps // (2 * n_workers if mode == "async" else 2)
            k = 0
            while not sess.should_stop():
                kw = {}
                if traced is not None and k >= trace_from:
                    kw = {"options": hb.RunOptions(trace_level=hb.RunOptions.FULL_TRACE)}
                    kw["run_metadata"] = hb.RunMetadata()
                t = time.perf_counter()
                _, now = sess.run([train, step], **kw)
                k += 1
                if index == 0:
                    end = time.perf_counter()
                    print(f"step {end - t:.6f} {int(now)} {end:.6f}", flush=True)
                if kw:
                    ops = kw["run_metadata"].step_stats
                    traced.append(list(zip(ops.device, ops.type, ops.op, ops.start_s, ops.end_s)))
            for (task, kind, name), (sec, start, end) in sorted(step_timings(traced or []).items()):
                print(f"trace {task} {kind} {name} {sec:.9f} {start:.9f} {end:.9f}", flush=True)
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
