"""Closed-loop fidelity on this machine: real `hetbed cluster` runs against both simulators.

For each model of the grid (``scenarios/models/grid.py``: one scalar per PS task, one dense
variable of 1, 10 and 100 MB, a sparse embedding) and each worker count, it runs hetbed's real distributed runtime
(one PS, W workers, processes on loopback): synchronous (SyncReplicasOptimizer), synchronous
with one backup worker (W + 1 tasks, W gradients a step) and asynchronous. It takes the time per
global step of each repetition (synchronous: the chief's median step after the first fifth of
its steps; asynchronous: the chief's view of the global step's progress after the first fifth)
over a run long enough for its steady state (``MEASURE_STEPS``: 200 steps of the models whose
step takes a few ms, 40 of the 100 MB one; the grid took 434-588 s with 300 on this VM; the 40 steps every run took before left the
asynchronous rows 10-60% above their steady state, the other workers' first steps (their numba
compiles) falling among the chief's steps; ``--steps`` sets one count for all) and
predicts the same run with the step-level driver (SyncPS or AsyncPS on one replica's profile)
and the op-level simulator: the very program the real run runs, each worker a client of its
own graph and (synchronous) the chief's queue runner one more, stepping at once
(``grid.op_level_clients``: the chief's median step of 12, after the first two; with the backup
worker, with real values so that late gradients are dropped as stale; asynchronous: the time
per global step over the chief's steps after its first two),
on the catalog's ``this_machine`` CPU for every task and its ``loopback`` link. Nothing
is fitted to these runs: the catalog entries hold defaults, or what `hetbed calibrate` measured
(point ``HETBED_CATALOG_PATH`` at its output), and no step of the grid is among its
measurements. Where that output holds calibrate's op profile (``profile.json``: each op's
measured time in local training steps of other models, mlp, cnn, embedding and lstm), it prices
the ops (the ops it did not see scale from their family's or fall back to the roofline), since a
small op's time on this machine is its Python call, which the roofline does not see; without it
the roofline does. ``--cpu`` prints the measured CPU of every process per global step (user
and system) against what the op-level prediction of the same program books in its steady state
(``op_level_cpu``: every op, message, hand-off and wake-up of every task, and the loopback
copies), by kind and by job, with each job's context switches per step (a diagnostic without a
target; ``--rows scalar:1x8,scalar:4x4`` picks its rows: model, PS tasks x workers).

Targets (issue 13): median |error| <= 10%, worst <= 25%, and each model's scaling right (the
predicted W=max / W=1 step-time ratio within 25% of the measured one), judged for each simulator.
The issue's baseline (measured before these mechanisms, 1 PS) is printed beside, and so is the
measurements' own spread over their repetitions ((max - min) / median, median and worst over the
rows): the floor under any error on this machine. The repetitions are passes over the whole grid
(each run's minutes apart), so that a slow minute falls on one repetition of a run.

This VM's speed drifts by 20-40% within minutes, and the measurements move with it. So between
every two runs (and before the first) a ``messages.MessageProbe`` measures how the machine runs:
calibrate's message micro-steps of about a millisecond or less (100 steps each, half a second;
the probe's PS task process and sessions stay open, idle while the runs run), measured then over
their time simulated with the catalog. Each run's factor is the mean of the probes either side
of it; the table prints each row's factor (the median over its repetitions) and its
measurements steadied (each repetition's time times the grid's mean factor over its own: the
run at the machine's mean speed over the grid), with both simulators' errors against those, and
the correlation, within rows, of the repetitions' times with their factors (how well the probes
follow the runs: 0.67 and 0.37 in the first two grids). The targets judge the measurements as
taken; the steadied errors are printed beside them as a diagnostic. Only the probes' moves
within the grid are used: their level against the calibration did not follow the grid's (two
calibrations half an hour apart put the probes at 1.14x and 0.87x on average over grids whose
measurements and predictions differed by under 5%: the calibrations split their costs
differently, message ends 84 against 99 us, wake-ups 60 against 26 us). The probe runs no
training step and nothing of the grid: it is calibrate's own micro-benchmark, run again, as a
reference benchmark is run beside the runs on a machine whose speed moves.

One PS task with 1, 2 and 4 workers (and 8 for the scalar and 1 MB models: nine processes on
this machine's cores), a scalar on each of two PS tasks (1, 2, 4 workers) and of four (4
workers); the sparse model (``grid.SPARSE``: each
worker looks up 32 rows of a 25.6 MB embedding, and only those rows travel, accumulated on the
PS by a SparseConditionalAccumulator) synchronous and asynchronous. ``--quick``: synchronous only, one PS, W = 1, 2, the two smaller models, one repetition.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import statistics
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))
from common import verdict  # noqa: E402

from hetbed.devices.catalog import load_device, load_link  # noqa: E402
from hetbed.devices.profiled import Profiled  # noqa: E402
from hetbed.runtime.distributed.launcher import CONFIG_ENV, launch  # noqa: E402
from hetbed.scenarios.models import grid  # noqa: E402
from hetbed.simulator.messages import MessageProbe  # noqa: E402

HOST, LINK = "this_machine", "loopback"


def _op_costs() -> tuple[object, str]:
    """The op cost model of the predictions: the op profile ``hetbed calibrate`` wrote beside
    the catalog entries it measured (``profile.json`` in a ``HETBED_CATALOG_PATH`` directory:
    each op's measured time in the local training steps of other models, none of the grid's),
    else the roofline; and a line saying which."""
    for d in filter(None, os.environ.get("HETBED_CATALOG_PATH", "").split(os.pathsep)):
        path = os.path.join(d, "profile.json")
        if os.path.exists(path):
            return Profiled.load(path), f"ops priced by the calibrated op profile {path}"
    return None, "ops priced by the roofline (no calibrated op profile: run hetbed calibrate)"


OP_COSTS, OP_COSTS_NOTE = _op_costs()
MACHINE = "this machine"  # every task of a run shares this machine's cores, as for real
CORES = load_device(HOST).cores or 1
#: the issue's baseline: measured ms per global step by worker count (1 PS), when it was filed
BASELINE = {
    ("sync", "scalar"): {1: 3.1, 2: 7.1, 4: 11.8},
    ("sync", "dense_10mb"): {1: 21.7, 2: 36.4, 4: 78.2},
    ("async", "dense_10mb"): {1: 20.7, 2: 19.9, 4: 21.5},
}


def _run(model: str, workers: int, steps: int, mode: str, n_ps: int = 1, out: Any = None) -> list:
    """The chief's step lines of one real run, each [seconds, global step, time]; ``out``
    (optional) receives every output line as it comes (``write``)."""
    out = out if out is not None else io.StringIO()
    tasks = workers + (1 if mode == "backup" else 0)
    with tempfile.TemporaryDirectory() as barrier:
        cmd = [sys.executable, "-m", "hetbed.scenarios.models.grid", model, str(steps), barrier]
        if isinstance(out, _CpuTap):  # (its tasks are the processes naming this directory)
            out.barrier = barrier
        rc = launch([*cmd, mode], n_ps, tasks, stdout=out, stderr=out, deadline_s=600, grace_s=2)
    rows = [
        [float(v) for v in line.split()[2:]]
        for line in out.getvalue().splitlines()
        if line.startswith("[worker:0] step ")
    ]
    if rc != 0 or len(rows) <= 6:
        tail = "\n".join(out.getvalue().splitlines()[-10:])
        raise RuntimeError(f"{model}, {mode}, {workers} workers failed (exit {rc}):\n{tail}")
    return rows


#: steps of each real run by model: a few hundred of the small models (under 1-20 ms a step:
#: a second or two), fewer of the larger ones, whose steps are long enough already
MEASURE_STEPS = {
    "scalar": 200,
    "sparse": 200,
    "dense_1mb": 150,
    "dense_10mb": 50,
    "dense_100mb": 40,
}


def measure(model: str, workers: int, steps: int, mode: str, n_ps: int = 1) -> float:
    """Seconds per global step of one real run of ``steps`` steps, after the first fifth of
    them (see the module docstring)."""
    rows = _run(model, workers, steps, mode, n_ps)
    rows = rows[max(5, len(rows) // 5) :]
    if mode == "async":
        (_, g0, t0), (_, g1, t1) = rows[0], rows[-1]
        return (t1 - t0) / max(g1 - g0, 1)
    return statistics.median(r[0] for r in rows)


def _task_role(pid: int) -> str:
    """A task process's "job:index" from its ``HETBED_CONFIG`` (the launcher's; "?" if gone)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read().split(b"\0")
    except OSError:
        return "?"
    for kv in env:
        if kv.startswith(CONFIG_ENV.encode() + b"="):
            task = json.loads(kv.split(b"=", 1)[1])["task"]
            return f"{task['type']}:{task['index']}"
    return "?"


def _task_cpu(barrier: str) -> dict[int, tuple[float, float]]:
    """(user, system) CPU seconds so far of each live process of the run whose command line
    names ``barrier`` (its tasks), by process id, from /proc."""
    out = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if barrier.encode() not in f.read():
                    continue
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        tick = os.sysconf("SC_CLK_TCK")
        out[int(pid)] = (int(fields[11]) / tick, int(fields[12]) / tick)
    return out


def _switches(pid: int) -> tuple[int, int]:
    """(voluntary, involuntary) context switches so far of every thread of process ``pid``
    (/proc; (0, 0) where it cannot say): a voluntary one is a thread that blocked (waiting for
    a message, a lock), an involuntary one a thread the scheduler took its core from."""
    vol = inv = 0
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0, 0
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches"):
                        vol += int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches"):
                        inv += int(line.split()[1])
        except (OSError, ValueError):  # (a thread that ended meanwhile)
            continue
    return vol, inv


def _thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds (user and system) so far of process ``pid``'s threads, summed by their OS
    name (runtime/threadname.py: "hetbed-data", "hetbed-recv", ...; the main thread and any
    unnamed one: the process's name); {} where /proc cannot say."""
    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # (a thread that ended meanwhile)
            continue
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


class _CpuTap(io.StringIO):
    """Output of a run that reads its tasks' CPU from /proc when the chief reports step ``a``
    and step ``b``."""

    def __init__(self, a: int, b: int):
        super().__init__()
        self.a, self.b, self.seen, self.marks, self.barrier = a, b, 0, {}, ""
        self.roles: dict[int, str] = {}  # each process's task, read at step ``a``
        self.switches: dict[int, dict[int, tuple[int, int]]] = {}  # ``_switches`` at a and b
        self.threads: dict[int, dict[int, dict[str, float]]] = {}  # ``_thread_cpu`` at a and b

    def write(self, text: str) -> int:
        if text.startswith("[worker:0] step "):
            self.seen += 1
            if self.barrier and self.seen in (self.a, self.b):  # ("" would name every process)
                self.marks[self.seen] = _task_cpu(self.barrier)
                self.switches[self.seen] = {p: _switches(p) for p in self.marks[self.seen]}
                self.threads[self.seen] = {p: _thread_cpu(p) for p in self.marks[self.seen]}
                if self.seen == self.a:
                    self.roles = {p: _task_role(p) for p in self.marks[self.a]}
        return super().write(text)


def cpu_per_step(
    model: str, workers: int, mode: str, short: int, long: int, n_ps: int = 1, threads: Any = None
) -> tuple[dict[str, tuple[float, float]], dict[str, tuple[float, float]], float]:
    """(user, system) CPU seconds per global step in the steady state, by task ("ps:0",
    "worker:1", ...): each task's CPU time read from /proc when the chief reports its step
    ``short`` and its step ``long``, the difference over the global steps between (the chief's
    steps synchronous; every worker's asynchronous); with each task's (voluntary, involuntary)
    context switches per global step the same way (``_switches``) and the step: the chief's
    median step over those steps (seconds; asynchronous: seconds per global step). ``threads`` (a dict, optional) receives
    each task's CPU seconds per step by thread name (``_thread_cpu``). (Counting the job's processes once they
    have exited, by getrusage, missed the PS tasks, which the launcher stops: a dense 100 MB
    step read 111 ms that way against 180 ms from /proc.)"""
    tap = _CpuTap(short, long)
    # (the run's length is in global steps: asynchronous, the chief makes about 1 / W of them)
    _run(model, workers, (long + 3) * (2 * workers if mode == "async" else 1), mode, n_ps, tap)
    before, after = tap.marks[short], tap.marks[long]
    out: dict[str, tuple[float, float]] = {}
    switches: dict[str, tuple[float, float]] = {}
    lines = [ln for ln in tap.getvalue().splitlines() if ln.startswith("[worker:0] step ")]
    n = float(lines[long - 1].split()[3]) - float(lines[short - 1].split()[3])  # global steps
    for p in after:
        if p in before:
            role = tap.roles.get(p, "?")
            u, s_ = out.get(role, (0.0, 0.0))
            out[role] = (
                u + (after[p][0] - before[p][0]) / n,
                s_ + (after[p][1] - before[p][1]) / n,
            )
            (v0, i0), (v1, i1) = tap.switches[short][p], tap.switches[long][p]
            v, i = switches.get(role, (0.0, 0.0))
            switches[role] = (v + (v1 - v0) / n, i + (i1 - i0) / n)
            if threads is not None:
                t0, t1 = tap.threads[short][p], tap.threads[long][p]
                mine = threads.setdefault(role, {})
                for name, sec in t1.items():
                    mine[name] = mine.get(name, 0.0) + (sec - t0.get(name, 0.0)) / n
    if mode == "async":  # seconds per global step, as ``measure`` has it
        return (
            out,
            switches,
            (float(lines[long - 1].split()[4]) - float(lines[short - 1].split()[4])) / n,
        )
    return out, switches, statistics.median(float(ln.split()[2]) for ln in lines[short:long])


def _by_job(per_task: dict[str, float]) -> dict[str, float]:
    """Seconds by job ("ps", "worker"), summed over its tasks."""
    out: dict[str, float] = {}
    for task, v in per_task.items():
        job = task.split(":")[0]
        out[job] = out.get(job, 0.0) + v
    return out


#: the rows of ``--cpu`` by default: (mode, model, PS tasks, workers)
CPU_ROWS = tuple(
    ("sync", m, 1, w) for m in ("scalar", "sparse", "dense_1mb", "dense_10mb") for w in (1, 2)
)
#: the modes ``--cpu`` runs (``op_level_cpu`` books these two)
CPU_MODES = ("sync", "async")

#: what ``op_level_cpu`` sums apart; every other record is a kernel
CPU_KINDS = ("RecvTensor", "RunGraph", "Session.run", "Handoff", "Wake")


def op_level_cpu(
    model: str, workers: int, n_ps: int = 1, a: int = 6, b: int = 18, mode: str = "sync"
) -> tuple[dict[str, dict[str, float]], float, float]:
    """What the op-level prediction of the real program (``grid.op_level_clients``, ``mode``
    "sync" or "async", every task on this machine) books per global step in its steady state:
    ({task: {kind: CPU seconds}}, the machine's loopback copies), each the difference between
    runs of ``a`` and ``b`` chief steps over the global steps between them (the first steps
    from idle cancel): ``b - a`` synchronous, every worker's steps asynchronous (each worker
    client's ``Session.run`` records); and the longer run's step: its median chief step after
    the first two ("sync"), or its seconds per global step ("async")."""

    def run(steps: int) -> tuple[dict[str, dict[str, float]], float, list[float], int]:
        out: list = []
        times = grid.op_level_clients(
            model, workers, n_ps, LINK, HOST, HOST, MACHINE, OP_COSTS, steps=steps,
            mode=mode, cluster_out=out,
        )  # fmt: skip
        c = out[0]
        per: dict[str, dict[str, float]] = {}
        copies = 0.0
        clients = 0  # the workers' client steps (and the chief's initializing run)
        for t in c.tasks:
            cpu = c.task_cpu(t)
            kinds = per.setdefault(grid.short_task(cpu.name), {})
            for what, begin, end in cpu.records:
                kind = what.type if what.type in CPU_KINDS else "kernels"
                kinds[kind] = kinds.get(kind, 0.0) + (end - begin)
                clients += what.type == "Session.run"
            if cpu.host_cores is not None:
                copies = cpu.host_cores.copied_s  # (one machine: the same cores for every task)
        return per, copies, times, clients

    (pa, ca, _, ga), (pb, cb, times, gb) = run(a), run(b)
    n = gb - ga if mode == "async" else b - a
    per = {
        task: {k: (v - pa.get(task, {}).get(k, 0.0)) / n for k, v in kinds.items()}
        for task, kinds in pb.items()
    }
    return per, (cb - ca) / n, times[0] if mode == "async" else statistics.median(times[2:])


def cpu_table(rows: tuple = CPU_ROWS, short: int = 50, long: int = 300) -> None:
    """Where the error is: measured CPU per global step (user and system) against what the
    op-level prediction of the same program books in its steady state (``op_level_cpu``: every
    op, message, hand-off and wake-up, all tasks, and the loopback copies), beside the step
    times, by job, with each job's context switches per step, for each (mode, model, PS tasks,
    workers) of ``rows`` ("sync" or "async"; per global step both, the asynchronous step times
    per global step as the grid's). A diagnostic (no target): when the CPU agrees and the
    step time does not, the error is in what overlaps, not in what is charged; when the jobs'
    totals agree and their parts do not, in which end of a message pays."""
    title = "cluster_fidelity --cpu: CPU per global step, all processes (ms)"
    print(f"\n{title}\n{'-' * len(title)}")
    print(
        f"{'mode':6s} {'model':12s} {'PS':>2s} {'W':>2s} {'measured CPU':>13s} {'op-level CPU':>13s} "
        f"{'err':>6s} {'measured step':>14s} {'op-level step':>14s}   op-level CPU by kind; "
        "by job: measured (user + system) / op-level (its copies apart); context switches a "
        "step by job (voluntary / involuntary)"
    )
    for mode, model, n_ps, w in rows:
        by_thread: dict[str, dict[str, float]] = {}
        per_task, switches, wall = cpu_per_step(model, w, mode, short, long, n_ps, by_thread)
        cpu = sum(u + s_ for u, s_ in per_task.values())
        booked_task, copies, sim_step = op_level_cpu(model, w, n_ps, mode=mode)
        by: dict[str, float] = {}
        for kinds in booked_task.values():
            for k, v in kinds.items():
                by[k] = by.get(k, 0.0) + v
        by["copies"] = copies
        booked = sum(by.values())
        parts = ", ".join(f"{k} {v * 1e3:.3f}" for k, v in by.items())
        sim_job = _by_job({t: sum(kinds.values()) for t, kinds in booked_task.items()})
        user = _by_job({t: u for t, (u, _) in per_task.items()})
        system = _by_job({t: s_ for t, (_, s_) in per_task.items()})
        jobs = ", ".join(
            f"{j} {user[j] * 1e3:.3f} + {system[j] * 1e3:.3f} / {sim_job.get(j, 0.0) * 1e3:.3f}"
            for j in sorted(user)
        )
        vol = _by_job({t: v for t, (v, _) in switches.items()})
        inv = _by_job({t: i for t, (_, i) in switches.items()})
        sw = ", ".join(f"{j} {vol[j]:.1f} / {inv[j]:.1f}" for j in sorted(vol))
        print(
            f"{mode:6s} {model:12s} {n_ps:2d} {w:2d} {cpu * 1e3:13.3f} {booked * 1e3:13.3f} "
            f"{(booked - cpu) / cpu:+6.0%} {wall * 1e3:14.3f} {sim_step * 1e3:14.3f}"
            f"   {parts}; {jobs}; {sw}",
            flush=True,
        )
        for task in sorted(by_thread):
            mine = sorted(by_thread[task].items(), key=lambda kv: -kv[1])
            print(
                f"{'':25s}{task} by thread: "
                + ", ".join(f"{name} {v * 1e3:.3f}" for name, v in mine if v > 0),
                flush=True,
            )
    print(
        f"(measured CPU and context switches: each task's, from /proc at the chief's step "
        f"{short} and {long}, over the global steps between; measured step: the chief's median "
        f"over those steps (async: seconds per global step); op-level: the program's steady "
        f"state, its CPU the difference between runs of 6 and 18 chief steps over the global "
        f"steps between, its step the median of the longer run's after the first two (async: "
        f"seconds per global step); {OP_COSTS_NOTE})"
    )


def _cpu_rows(text: str) -> tuple:
    """``--cpu``'s rows from "[MODE:]MODEL:PSxW,..." (e.g. "scalar:1x8,async:scalar:1x4"; the
    mode "sync" where none is given)."""
    rows = []
    for item in filter(None, text.split(",")):
        parts = item.split(":")
        mode = parts.pop(0) if len(parts) == 3 else "sync"
        try:
            model, size = parts
            n_ps, w = (int(v) for v in size.lower().split("x"))
        except ValueError:
            raise SystemExit(
                f"--rows: {item!r} is not [MODE:]MODEL:PSxW (e.g. scalar:4x4, async:scalar:1x4)"
            ) from None
        known = sorted({*grid.MODELS, *grid.SPARSE})
        if mode not in CPU_MODES or model not in known or n_ps < 1 or w < 1:
            raise SystemExit(
                f"--rows: {item!r}: the mode must be one of {list(CPU_MODES)}, the model one of "
                f"{known}, the PS tasks and workers at least 1"
            )
        rows.append((mode, model, n_ps, w))
    return tuple(rows)


def trace_table(mode: str, model: str, workers: int, n_ps: int = 1) -> None:
    """Where a step's time goes, op by op: the real run's chief traces its steps from the half
    of the run on (``RunOptions(trace_level=FULL_TRACE)`` on its distributed session: every
    op of its partitions on every task, ``grid.TRACE_ENV``); each op's median duration, start
    and end (from its step's first op: ``grid.step_timings``) is printed beside the op-level
    simulator's for the same op of the same task in the chief's steps (after its first two),
    in the order the real step starts them. The gaps between an op's start in one column and
    the other show which edge of the step (a read, a gradient, the token) takes longer where.
    A Send or Recv has no simulated twin (the simulators book its work as the RecvTensor
    call's), and a real Recv's time is mostly its wait; the tracer's own cost (a few us an op)
    is in the real columns. A diagnostic: no target."""
    out = io.StringIO()
    os.environ[grid.TRACE_ENV] = "1"
    try:
        _run(model, workers, MEASURE_STEPS[model], mode, n_ps, out=out)
    finally:
        del os.environ[grid.TRACE_ENV]
    real = {}
    stepped: list[float] = []
    for line in out.getvalue().splitlines():
        parts = line.split(" ")
        if len(parts) == 8 and parts[:2] == ["[worker:0]", "trace"]:
            real[(parts[2], parts[3], parts[4])] = tuple(float(x) for x in parts[5:])
        elif len(parts) == 5 and parts[:2] == ["[worker:0]", "step"]:
            stepped.append(float(parts[2]))
    chief: list = []
    grid.op_level_prediction(
        mode, model, workers, n_ps, LINK, HOST, HOST, MACHINE, OP_COSTS, sessions_out=chief
    )
    steps = grid.training_steps(chief[0])[2:]  # (after its first two)
    sim = grid.step_timings(steps)
    title = f"cluster_fidelity --trace: {mode} {model} W={workers} {n_ps} PS, median us per op"
    print(f"\n{title}\n{'-' * len(title)}")
    print(
        f"{'task':10s} {'op type':26s} {'real':>7s} {'op-level':>8s} {'real start-end':>15s} "
        f"{'op-level start-end':>19s}   op"
    )
    total = {"real": 0.0, "sim": 0.0}
    for key in sorted(real, key=lambda k: real[k][1]):
        task, kind, name = key
        r, s_ = real[key], sim.get(key)
        if s_ is not None and kind not in ("_Send", "_Recv"):
            total["real"] += r[0]
            total["sim"] += s_[0]
        span = f"{r[1] * 1e6:7.0f}-{r[2] * 1e6:<7.0f}"
        if s_ is None:
            s_txt = f"{'-':>8s} {'-':>19s}"
        else:
            s_txt = f"{s_[0] * 1e6:8.1f} {s_[1] * 1e6:11.0f}-{s_[2] * 1e6:<7.0f}"
        print(
            f"{task:10s} {kind:26s} {r[0] * 1e6:7.1f} {s_txt[:8]} {span:>15s} {s_txt[9:]}   {name}"
        )
    print(
        f"(the ops with both, less Send and Recv: real {total['real'] * 1e6:.0f} us, op-level "
        f"{total['sim'] * 1e6:.0f} us a step; starts and ends in us from the step's first op; "
        f"{OP_COSTS_NOTE})"
    )
    # the step as its client times it, against its ops' span: what lies outside the ops (the
    # client's call and its RunGraph calls before the first op, the replies after the last)
    half = len(stepped) // 2
    if half and real and sim:
        untraced, traced = statistics.median(stepped[:half]), statistics.median(stepped[half:])
        recs = grid.training_records(chief[0])[2:]  # (after its first two, as ``steps``)
        sim_step = statistics.median(r.step_time_s for r in recs)
        span_r = max(v[2] for v in real.values())
        span_s = max(v[2] for v in sim.values())
        print(
            f"(a step as the chief's client times it: real {untraced * 1e6:.0f} us untraced, "
            f"{traced * 1e6:.0f} traced, its ops spanning {span_r * 1e6:.0f}; op-level "
            f"{sim_step * 1e6:.0f} us, its ops spanning {span_s * 1e6:.0f})"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="W = 1, 2; two models; 1 repetition")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of each real run")
    ap.add_argument(
        "--steps", type=int, default=None, help="steps of each real run (default: MEASURE_STEPS)"
    )
    ap.add_argument(
        "--cpu",
        action="store_true",
        help="only the diagnostic: measured CPU per step against the op-level simulator's",
    )
    ap.add_argument(
        "--rows",
        default="",
        help="with --cpu: its rows, [MODE:]MODEL:PSxW,... (e.g. scalar:1x8,async:scalar:1x4; "
        "MODE sync (default) or async)",
    )
    ap.add_argument(
        "--trace",
        nargs=3,
        metavar=("MODE", "MODEL", "W"),
        help="only the diagnostic: one real run's ops traced, against the op-level simulator's",
    )
    args = ap.parse_args()
    if args.trace:
        mode, model, w = args.trace
        trace_table(mode, model, int(w))
        return
    if args.cpu:
        cpu_table(_cpu_rows(args.rows) if args.rows else CPU_ROWS)
        return
    reps = 1 if args.quick else args.reps
    t0 = time.perf_counter()
    link = load_link(LINK)
    perf, nic = load_device(HOST), (link.bandwidth_bytes_per_s, link.latency_s)
    rows = []
    for mode, model, w, n_ps in grid.runs(args.quick):
        step = grid.step_level_step(
            model, w, n_ps, LINK, HOST, HOST, mode=mode, machine_cores=CORES, cost_model=OP_COSTS
        )
        op = grid.op_level_prediction(mode, model, w, n_ps, LINK, HOST, HOST, MACHINE, OP_COSTS)
        name = model if n_ps == 1 else f"{model} {n_ps}PS"
        rows.append((mode, name, w, [], step, op, []))
    # the repetitions pass over the whole grid in turn, so that each run's are minutes apart and
    # a slow minute of this VM falls on one of a run's repetitions, not on all of them; the
    # probe measures the machine against its calibration between every two runs
    with MessageProbe() as probe:
        probe.drift(perf, nic, PROBE_STEPS // 3)  # (a first probe runs slower: not kept)
        probes = [probe.drift(perf, nic, PROBE_STEPS)]
        for rep in range(reps):
            for (mode, model, w, n_ps), (_, name, _, real, step, op, drifts) in zip(
                grid.runs(args.quick), rows
            ):
                real.append(measure(model, w, args.steps or MEASURE_STEPS[model], mode, n_ps))
                probes.append(probe.drift(perf, nic, PROBE_STEPS))
                drifts.append((probes[-2] + probes[-1]) / 2)  # (the probes either side of it)
                print(
                    f"  pass {rep + 1}/{reps} {mode:6s} {name:12s} W={w}: measured "
                    f"{real[-1] * 1e3:8.2f} ms (machine at {drifts[-1]:.2f}x), step-level "
                    f"{step * 1e3:8.3f}, op-level {op * 1e3:8.3f}",
                    flush=True,
                )
    title = "cluster_fidelity: real hetbed cluster vs the simulators, ms per global step"
    print(f"\n{title}\n{'-' * len(title)}")
    print(
        f"{'mode':6s} {'model':12s} {'W':>2s} {'measured [min, max]':>24s} {'step-level':>11s} "
        f"{'err':>7s} {'op-level':>10s} {'err':>7s} {'baseline':>9s} {'machine':>8s} "
        f"{'steadied':>9s} {'err':>5s} {'err':>5s}"
    )
    steadied = _steadier(rows)
    for row in rows:
        mode, model, w, real, step, op, factors = row
        m, n = statistics.median(real), statistics.median(steadied(row))
        op_txt = f"{'-':>10s} {'-':>7s}"
        op_steady = f"{'-':>5s}"
        if op is not None:
            op_txt = f"{op * 1e3:10.3f} {(op - m) / m:+7.0%}"
            op_steady = f"{(op - n) / n:+5.0%}"
        base = BASELINE.get((mode, model), {}).get(w)
        base_txt = f"{base:9.1f}" if base else f"{'-':>9s}"
        spread = f"{m * 1e3:.2f} [{min(real) * 1e3:.2f}, {max(real) * 1e3:.2f}]"
        print(
            f"{mode:6s} {model:12s} {w:2d} {spread:>24s} {step * 1e3:11.3f} {(step - m) / m:+7.0%} "
            f"{op_txt} {base_txt} {statistics.median(factors):7.2f}x {n * 1e3:9.2f} "
            f"{(step - n) / n:+5.0%} {op_steady}"
        )
    print(
        f"(medians over {reps} repetition(s) of {args.steps or 'MEASURE_STEPS'} steps; "
        f"predictions on the catalog's "
        f"{HOST} and {LINK}, {OP_COSTS_NOTE}; baseline: the issue's measured ms, 1 PS; "
        f"{time.perf_counter() - t0:.0f} s)"
    )
    print(
        f"(machine: the row's median over its repetitions of the probes either side of each run: "
        f"calibrate's message micro-steps measured then over their time simulated with the "
        f"catalog ({probes[0]:.2f}x before the grid, {probes[-1]:.2f}x after it, "
        f"{min(probes):.2f}-{max(probes):.2f}x between); steadied: the median over the "
        f"repetitions of each measured time times the grid's mean factor over its own, the run "
        f"at the machine's mean speed over the grid, and the simulators' errors against it)"
    )
    if reps > 1:  # what the measurements themselves move by: the floor under any error
        for what, of in (("", lambda r: r[3]), (" steadied", steadied)):
            spread = sorted((max(of(r)) - min(of(r))) / statistics.median(of(r)) for r in rows)
            print(
                f"(the{what} measurements' own spread over their {reps} repetitions, "
                f"(max - min) / median: median {statistics.median(spread):.0%}, worst "
                f"{spread[-1]:.0%} of the rows)"
            )
        print(
            f"(how the probes follow the runs: the correlation, within each row, of a "
            f"repetition's log time with its log factor: {_tracking(rows):.2f})"
        )
    _targets(rows, lambda r: r[3])
    for sim, (med, worst, shape) in _errors(rows, steadied).items():
        scaling = f"{shape:.0%}" if shape is not None else "-"
        print(
            f"(diagnostic, not a target: {sim} against the steadied measurements: median "
            f"|error| {med:.0%}, worst {worst:.0%}, scaling worst {scaling})"
        )


#: steps of each micro-step a probe of the machine's speed runs (half a second here)
PROBE_STEPS = 100


def _steadier(rows: list) -> Any:
    """The function giving a grid row's measured times at the machine's mean speed over the
    grid: each time over its run's factor (``row[6]``), times the geometric mean of every run's
    factor. A probe's level against the calibration moves with the calibration's own split of
    its costs (two calibrations half an hour apart put the same grid at 1.14x and 0.87x on average,
    their message costs 84 and 99 us, their wake-ups 60 and 26 us), so only its moves within
    the grid are taken."""
    logs = [math.log(d) for r in rows for d in r[6]]
    mean = math.exp(sum(logs) / len(logs))
    return lambda row: [t * mean / d for t, d in zip(row[3], row[6])]


def _tracking(rows: list) -> float:
    """The correlation, within each row, of its repetitions' log times with their log factors
    (0 where nothing varies)."""
    xs, ys = [], []
    for r in rows:
        lt, lf = [math.log(t) for t in r[3]], [math.log(d) for d in r[6]]
        xs += [x - sum(lf) / len(lf) for x in lf]
        ys += [y - sum(lt) / len(lt) for y in lt]
    sxx, syy = sum(x * x for x in xs), sum(y * y for y in ys)
    return sum(x * y for x, y in zip(xs, ys)) / math.sqrt(sxx * syy) if sxx and syy else 0.0


def _errors(rows: list, measured: Any) -> dict[str, tuple[float, float, float | None]]:
    """Per simulator: (median |error|, worst |error|, worst scaling error or None where no model
    has two worker counts) against ``measured(row)`` (each row's measured times, one per
    repetition: their median is compared)."""
    out = {}
    for sim, k in (("step-level", 4), ("op-level", 5)):
        errs = []
        for r in rows:
            if r[k] is not None:
                m = statistics.median(measured(r))
                errs.append(abs((r[k] - m) / m))
        shapes = []
        for key in {(r[0], r[1]) for r in rows}:
            mine = [r for r in rows if (r[0], r[1]) == key and r[k] is not None]
            if len(mine) < 2:
                continue
            lo, hi = mine[0], mine[-1]
            ratio = statistics.median(measured(hi)) / statistics.median(measured(lo))
            shapes.append(abs(hi[k] / lo[k] / ratio - 1))
        out[sim] = (statistics.median(errs), max(errs), max(shapes) if shapes else None)
    return out


def _targets(rows: list, measured: Any) -> None:
    """The target lines of both simulators against ``measured(row)`` (``_errors``)."""
    for sim, (med, worst, shape) in _errors(rows, measured).items():
        print(
            f"target: {sim} median |error| <= 10%: {med:.0%}, {verdict([med], lambda v: v <= 0.10)}"
        )
        ok = verdict([worst], lambda v: v <= 0.25)
        print(f"target: {sim} worst |error| <= 25%: {worst:.0%}, {ok}")
        line = f"target: {sim} scaling (W=max / W=1) within 25% for every model: "
        if shape is None:  # (a grid without a model at two worker counts)
            print(line + "NOT measured")
            continue
        print(line + f"worst {shape:.0%}, {verdict([shape], lambda v: v <= 0.25)}")


if __name__ == "__main__":
    main()
