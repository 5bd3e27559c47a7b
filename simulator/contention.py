"""What this machine's runtime pays beyond its messages' ends: the hand-off of a blocked op from
one thread to another (``wake_cost``) and the software cost of more busy processes than cores
(``message_contention``: clients stepping against one PS process at once; ``switch_share_fit``
reads ``DevicePerf.switch_share`` from it). ``messages.py`` holds the messages' own costs."""

from __future__ import annotations

import statistics
import time
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np

from hetbed.devices.costmodel import DevicePerf
from hetbed.runtime.graph import Graph

from .handoffs import _steps
from .messages import _PS_TASK, _cpu_pair, free_port

# ---- a blocked op woken by another thread ---------------------------------------------------

#: rounds of each turn of ``wake_cost`` and its turns of each kind
WAKE_ROUNDS, WAKE_TURNS = 300, 5


def wake_cost(rounds: int = WAKE_ROUNDS, turns: int = WAKE_TURNS) -> float:
    """Seconds one thread hand-off of a blocked op takes in this runtime, measured in this
    process (``DevicePerf.wake_s``, which the simulators book as one core's CPU time: the
    interpreter runs one of the two threads at a time). Two client threads of one local
    session ping-pong an element through two queues (each round, A enqueues into ``q1`` and
    dequeues from ``q2``, B dequeues from ``q1`` and enqueues into ``q2``: the same four steps
    as two rounds of one thread alone, but each dequeue waits until the other thread's enqueue
    wakes it, and its thread runs again only once handed back the interpreter), against one
    thread enqueueing into and dequeueing from a queue of its own (nothing blocks), in
    ``turns`` alternating turns of ``rounds`` rounds: (ping-pong round - 2 x lone round) / 2,
    from the medians (at least 0). Runs no training step."""
    import threading

    import hetbed as hb

    g = Graph()
    with g.as_default():
        qs = {n: hb.FIFOQueue(4, [hb.float32], shapes=[[1]], name=n) for n in ("q1", "q2", "q")}
        one = hb.constant(np.ones(1, np.float32))
        enq = {n: q.enqueue([one]) for n, q in qs.items()}
        deq = {n: q.dequeue() for n, q in qs.items()}
    sess = hb.Session(graph=g)
    run = sess.run

    def alone(n: int) -> None:
        for _ in range(n):
            run(enq["q"])
            run(deq["q"])

    def ping(n: int) -> None:
        for _ in range(n):
            run(enq["q1"])
            run(deq["q2"])

    def pong(n: int) -> None:
        for _ in range(n):
            run(deq["q1"])
            run(enq["q2"])

    def both(n: int) -> None:
        other = threading.Thread(target=pong, args=(n,), daemon=True)
        other.start()
        ping(n)
        other.join()

    lone, paired = [], []
    try:
        alone(20)
        both(20)  # (warm: every op planned once)
        for _ in range(turns):
            for f, out in ((alone, lone), (both, paired)):
                t = time.perf_counter()
                f(rounds)
                out.append((time.perf_counter() - t) / rounds)
    finally:
        sess.close()
    return max(0.0, (statistics.median(paired) - 2.0 * statistics.median(lone)) / 2.0)


# ---- processes sharing the cores: the software cost of oversubscription -----------------------


#: float32 elements of the contention steps that move bytes (1 MiB: ``BYTE_ELEMENTS``)
BYTE_ELEMENTS = 1 << 18


def contention_graph(i: int, elements: int = 1) -> tuple[Graph, Any, Any]:
    """(graph, step, initializer) of contention client ``i``: worker task ``i``'s step reads a
    variable of its own of ``elements`` float32 (a scalar by default) from the PS task and adds
    it back there, fetching the sum (``message_contention``'s client processes and
    ``simulate_contention``'s clients alike)."""
    import hetbed as hb

    g = Graph()
    with g.as_default():
        with hb.device("/job:ps/task:0"):
            v = hb.Variable(np.zeros(elements, np.float32), name=f"contention_{i}")
        with hb.device(f"/job:worker/task:{i}"):
            sent = v * 2.0
        with hb.device("/job:ps/task:0"):
            step = hb.assign_add(v, sent)
        init = hb.variables_initializer([v])
    return g, step, init


#: a client of ``message_contention``, run as its own process: a worker task running
#: ``contention_graph``'s step; it reports "ready" once warm, then per "run SECONDS" line on
#: stdin runs steps for that long and prints [steps, wall s, CPU s]
_CONTENTION_CLIENT = """
import json, os, sys, time
import hetbed as hb
from hetbed.devices.errors import UnavailableError
from hetbed.simulator.contention import contention_graph
spec, i, elements = {spec!r}, {i}, {elements}
server = hb.train.Server(hb.train.ClusterSpec(spec), "worker", i)
g, step, init = contention_graph(i, elements)
deadline = time.monotonic() + 120
while True:
    try:
        sess = hb.Session(server.target, graph=g, connect_timeout_s=1.0)
        break
    except UnavailableError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.2)
sess.run(init)
for _ in range(20):
    sess.run(step)
print("ready", flush=True)
for line in sys.stdin:
    if not line.startswith("run"):
        break
    seconds = float(line.split()[1])
    c0, t0, n = os.times(), time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        sess.run(step)
        n += 1
    c1 = os.times()
    print(json.dumps([n, time.perf_counter() - t0, c1.user - c0.user + c1.system - c0.system]),
          flush=True)
sess.close()
server.stop()
"""

CONTENTION_CLIENTS = (1, 2, 4, 8)


def message_contention(
    clients: tuple[int, ...] = CONTENTION_CLIENTS,
    seconds: float = 1.5,
    repeats: int = 3,
    elements: int = 1,
    ps_out: dict[int, list[float]] | None = None,
) -> dict[int, list[float]]:
    """CPU seconds (all processes, user and system) per step when ``n`` worker processes at once
    run small remote steps against one PS process, for each ``n`` in ``clients``: {n: one value
    per repetition}. Each step reads a variable of ``elements`` float32 (a scalar by default)
    from the PS and adds it back there (two RPCs and a RunGraph call per side,
    ``contention_graph``); the processes are started once, and each measurement runs the first
    ``n`` of them for ``seconds``. ``ps_out`` (a dict) receives the PS process's part, the same
    way. Runs no training step."""
    import subprocess
    import sys

    most = max(clients)
    spec = {
        "ps": [f"127.0.0.1:{free_port()}"],
        "worker": [f"127.0.0.1:{free_port()}" for _ in range(most)],
    }
    ps = subprocess.Popen([sys.executable, "-c", _PS_TASK.format(spec=spec)])
    procs = []
    out: dict[int, list[float]] = {n: [] for n in clients}
    try:
        for i in range(most):
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-c",
                        _CONTENTION_CLIENT.format(spec=spec, i=i, elements=int(elements)),
                    ],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
            )
        for i, p in enumerate(procs):
            line = p.stdout.readline()
            if line.strip() != "ready":
                raise RuntimeError(
                    f"client {i} of the contention calibration did not start (it printed {line!r})"
                )
        import json

        for _ in range(repeats):
            for n in clients:
                before = _cpu_pair(ps.pid)[1]
                for p in procs[:n]:
                    p.stdin.write(f"run {seconds}\n")
                    p.stdin.flush()
                rows = [json.loads(p.stdout.readline()) for p in procs[:n]]
                ps_cpu = _cpu_pair(ps.pid)[1] - before
                steps = sum(r[0] for r in rows)
                out[n].append((ps_cpu + sum(r[2] for r in rows)) / max(steps, 1))
                if ps_out is not None:
                    ps_out.setdefault(n, []).append(ps_cpu / max(steps, 1))
    finally:
        for p in procs:
            if p.poll() is None and p.stdin is not None:
                try:
                    p.stdin.write("quit\n")
                    p.stdin.close()
                except OSError:
                    pass
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=30)
        ps.kill()
        ps.wait(timeout=30)
    return out


#: the switch shares ``contention_table`` simulates (``switch_share_fit`` picks among them and
#: refines between neighbours)
SHARE_GRID = tuple(round(0.02 * i, 2) for i in range(26))


def simulate_contention(
    perf: DevicePerf,
    link: tuple[float, float],
    clients: tuple[int, ...] = CONTENTION_CLIENTS,
    steps: int = 20,
    warm: int = 3,
    elements: int = 1,
    ps_out: dict[int, float] | None = None,
) -> dict[int, float]:
    """``message_contention`` simulated op by op: for each ``n`` in ``clients``, one PS task and
    ``n`` worker tasks on one machine of ``perf`` (its ``cores``, every task sharing them),
    joined by ``link`` (bytes/s, latency s, or a catalog link: its copy shares), each worker a
    client running the same step as ``_CONTENTION_CLIENT`` (read a variable of ``elements`` of
    its own from the PS, add it back there) at once (``run_clients``): n -> simulated CPU
    seconds of all tasks (messages, hand-offs, kernels and the loopback copies of the bytes)
    per step, over ``steps`` steps of each client after ``warm`` of their own. Simulated with
    ``perf.switch_share``, ``perf.switch_byte_share`` and the hand-offs of messages that find
    their task busy with another client's (``SimulatedDevice.occupy``): what the simulators
    book for such a machine. ``ps_out`` (a dict) receives the PS task's part per step (its
    cpu device's messages, hand-offs and kernels; the copies, booked on the machine's cores
    for both ends, apart)."""
    from hetbed.simulator import Cluster, SimSession, run_clients

    out = {}
    for n in clients:
        c = Cluster()
        c.add_task("ps", 0, cpu=perf, nic=link, machine="this machine")
        for i in range(n):
            c.add_task("worker", i, cpu=perf, nic=link, machine="this machine")
        runs = []
        for i in range(n):
            g, step, init = contention_graph(i, elements)
            sess = SimSession(
                c, graph=g, client=f"/job:worker/replica:0/task:{i}", shared_resources=True
            )
            sess.run(init)
            runs.append((sess, step))

        run_clients(c, [partial(_steps, s, f, warm) for s, f in runs])
        devices = c.devices()
        before = [len(d.records) for d in devices]
        cores = c.task_cpu(c.tasks[0]).host_cores
        copied = cores.copied_s
        run_clients(c, [partial(_steps, s, f, steps) for s, f in runs])
        cpu = sum(r[2] - r[1] for d, b in zip(devices, before) for r in d.records[b:])
        out[n] = (cpu + cores.copied_s - copied) / (n * steps)
        if ps_out is not None:
            ps = c.task_cpu("/job:ps/replica:0/task:0")
            ps_out[n] = sum(r[2] - r[1] for r in ps.records[before[devices.index(ps)] :]) / (
                n * steps
            )
    return out


def contention_table(
    perf: DevicePerf,
    link: Any,
    shares: tuple[float, ...] = SHARE_GRID,
    clients: tuple[int, ...] = CONTENTION_CLIENTS,
    steps: int = 20,
    elements: int = 1,
    field: str = "switch_share",
) -> dict[float, dict[int, float]]:
    """``simulate_contention`` (of steps of ``elements``) at each value of ``shares`` of the
    perf's ``field`` (``switch_share``, or ``switch_byte_share`` for the steps that move
    bytes): share -> (n -> simulated CPU seconds per step), what ``switch_share_fit`` fits the
    measurements to."""
    return {
        a: simulate_contention(replace(perf, **{field: a}), link, clients, steps, elements=elements)
        for a in shares
    }


def _ratio_error(cpu_per_step: dict[int, float], simulated: dict[int, float]) -> float:
    """Sum of squared differences between measured and simulated CPU per step, each as a ratio
    to its own fewest clients' (the client counts both have)."""
    base = min(cpu_per_step)
    return sum(
        (cpu_per_step[n] / cpu_per_step[base] - simulated[n] / simulated[base]) ** 2
        for n in cpu_per_step
        if n != base
    )


def switch_share_fit(cpu_per_step: dict[int, float], table: dict[float, dict[int, float]]) -> float:
    """``DevicePerf.switch_share`` from ``message_contention``'s CPU per step (n clients -> s):
    the share whose simulation of the same runs (``table``, from ``contention_table``) gives
    the CPU per step, as a ratio to the fewest clients', nearest the measured in least squares;
    the best share of the table, refined by the parabola through it and its two neighbours
    (within them). The simulation books what the simulators add as clients grow besides the
    switch share (the hand-offs of messages that find their task busy with another client's),
    so the share is fitted to what is left, not to the whole growth: a share fitted to the
    growth alone by the closed form 1 + share x ``oversubscription`` was 0.117-0.125 on this
    machine, and the simulators then booked 1.69x the one-client CPU for 8 clients against
    1.42x measured (and 1.40x for 4 against 1.01x). Raises ValueError for a table that lacks
    a measured client count, or for fewer than two client counts."""
    if len(cpu_per_step) < 2:
        raise ValueError(
            f"switch_share_fit: need two client counts or more, got {sorted(cpu_per_step)}"
        )
    shares = sorted(table)
    for a in shares:
        missing = set(cpu_per_step) - set(table[a])
        if missing:
            raise ValueError(
                f"switch_share_fit: the table's share {a} has no simulation of {sorted(missing)} clients"
            )
    errs = [_ratio_error(cpu_per_step, table[a]) for a in shares]
    k = min(range(len(shares)), key=errs.__getitem__)
    if k == 0 or k == len(shares) - 1:
        return shares[k]
    (x0, x1, x2), (y0, y1, y2) = shares[k - 1 : k + 2], errs[k - 1 : k + 2]
    den = (x0 - x1) * (x0 - x2) * (x1 - x2)
    curve = (x2 * (y1 - y0) + x1 * (y0 - y2) + x0 * (y2 - y1)) / den
    slope = (x2 * x2 * (y0 - y1) + x1 * x1 * (y2 - y0) + x0 * x0 * (y1 - y2)) / den
    if curve <= 0:
        return shares[k]
    return min(max(-slope / (2 * curve), x0), x2)
