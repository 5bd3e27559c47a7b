"""What this machine's runtime pays beyond its messages' ends: the hand-off of a blocked op from
one thread to another (``wake_cost``) and the software cost of more busy processes than cores
(``message_contention``: clients stepping against one PS process at once; ``switch_share_fit``
reads ``DevicePerf.switch_share`` from it). ``messages.py`` holds the messages' own costs."""

from __future__ import annotations

import statistics
import time

import numpy as np

from hetbed.devices.costmodel import oversubscription
from hetbed.runtime.graph import Graph

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

#: a client of ``message_contention``, run as its own process: a worker task whose step reads a
#: scalar of its own from the PS task and adds it back there; it reports "ready" once warm, then
#: per "run SECONDS" line on stdin runs steps for that long and prints [steps, wall s, CPU s]
_CONTENTION_CLIENT = """
import json, os, sys, time
import numpy as np
import hetbed as hb
from hetbed.devices.errors import UnavailableError
spec, i = {spec!r}, {i}
server = hb.train.Server(hb.train.ClusterSpec(spec), "worker", i)
g = hb.Graph()
with g.as_default():
    with hb.device("/job:ps/task:0"):
        v = hb.Variable(np.zeros(1, np.float32), name="contention_%d" % i)
    with hb.device("/job:worker/task:%d" % i):
        sent = v * 2.0
    with hb.device("/job:ps/task:0"):
        step = hb.assign_add(v, sent)
    init = hb.variables_initializer([v])
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
    clients: tuple[int, ...] = CONTENTION_CLIENTS, seconds: float = 1.5, repeats: int = 3
) -> dict[int, list[float]]:
    """CPU seconds (all processes, user and system) per step when ``n`` worker processes at once
    run small remote steps against one PS process, for each ``n`` in ``clients``: {n: one value
    per repetition}. Each step reads a scalar from the PS and adds it back there (two RPCs and a
    RunGraph call per side); the processes are started once, and each measurement runs the
    first ``n`` of them for ``seconds``. Runs no training step."""
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
                    [sys.executable, "-c", _CONTENTION_CLIENT.format(spec=spec, i=i)],
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


def switch_share_fit(cpu_per_step: dict[int, float], cores: int) -> float:
    """``DevicePerf.switch_share`` from ``message_contention``'s medians: the least-squares
    ``a`` (at least 0) of cpu(n) / cpu(fewest) = (1 + a x(n)) / (1 + a x(fewest)), with x(n)
    = ``oversubscription(n + 1, cores)`` (n clients and the PS), over the other client counts;
    linear in ``a`` as r(n) - 1 = a (x(n) - r(n) x(fewest)), which is exact also where the
    fewest clients already outnumber the cores. 0 without a count that oversubscribes more
    than the fewest."""
    base_n = min(cpu_per_step)
    base = cpu_per_step[base_n]
    xb = oversubscription(base_n + 1, cores)
    num = den = 0.0
    for n, cpu in cpu_per_step.items():
        if n == base_n or base <= 0:
            continue
        xn = oversubscription(n + 1, cores)
        if xn <= xb:
            continue
        r = cpu / base
        x = xn - r * xb
        num += x * (r - 1.0)
        den += x * x
    return max(0.0, num / den) if den else 0.0
