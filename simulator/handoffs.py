"""Two of ``hetbed calibrate``'s checks, measured and simulated, which no fit of its sees:
clients of one process stepping at once (the interpreter hand-off, ``SimulatedDevice.occupy``),
and values fed to a step (they travel with its RunGraph request, ``SimSession``).

The runtime handles each message on a thread of its own, and a process runs one thread at a
time (its interpreter lock): a second client thread in the worker's process adds no throughput
to the first when their messages queue behind each other, each then handed the interpreter
(measured here: "1 scalar read and sent back" took 839 us a step with one client thread, 793
with two, 857 with three; the simulator without hand-offs gave 926, 595 and 591).
"""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

from .messages import MESSAGE_STEPS, _message_graph, free_port, peer_session, start_ps_peer

#: the micro-step the clients run (a training step's pattern: read, compute, send back)
STEP = "1 scalar read and sent back"
#: client threads of the check, and its rounds over them
CLIENTS, ROUNDS = (1, 2, 3), 3


def measure_clients(clients: tuple[int, ...] = CLIENTS, steps: int = 150) -> dict[int, float]:
    """Seconds per step of ``STEP`` with k client threads of this process at once (each its
    own session, ``steps`` steps each), a worker task here and a PS task in a child process:
    k -> the median over ``ROUNDS`` rounds (each over every k in turn) of wall / (k x steps)."""
    import hetbed as hb

    spec, peer = start_ps_peer()
    server = None
    sessions: list[tuple[Any, Any]] = []
    try:
        server = hb.train.Server(hb.train.ClusterSpec(spec), "worker", 0)
        deadline = time.monotonic() + 60
        for _ in range(max(clients)):
            g, fetch, init = _message_graph(hb, *MESSAGE_STEPS[STEP])
            sess = peer_session(hb, server, g, peer, deadline, "the hand-off check")
            sessions.append((sess, fetch))
            sess.run(init)
            for _ in range(10):
                sess.run(fetch)
        per: dict[int, list[float]] = {k: [] for k in clients}
        for _ in range(ROUNDS):
            for k in clients:
                threads = [
                    threading.Thread(target=_steps, args=(s, f, steps), daemon=True)
                    for s, f in sessions[:k]
                ]
                t = time.perf_counter()
                for th in threads:
                    th.start()
                for th in threads:
                    th.join()
                per[k].append((time.perf_counter() - t) / (k * steps))
    finally:
        for sess, _ in sessions:
            sess.close()
        peer.kill()
        peer.wait(timeout=30)
        if server is not None:
            server.stop()
    return {k: statistics.median(v) for k, v in per.items()}


def _steps(sess: Any, fetch: Any, n: int) -> None:
    for _ in range(n):
        sess.run(fetch)


def simulate_clients(
    perf: Any, link: tuple, clients: tuple[int, ...] = CLIENTS, steps: int = 20
) -> dict[int, float]:
    """``measure_clients`` simulated: both tasks on one machine of ``perf`` joined by ``link``
    (bytes/s, latency s), k clients of the worker task stepping at once (``run_clients``):
    k -> simulated seconds per step, after each client's first step."""
    import hetbed as hb
    from hetbed.simulator import Cluster, SimSession, run_clients

    out = {}
    for k in clients:
        c = Cluster()
        for job in ("ps", "worker"):
            c.add_task(job, 0, cpu=perf, nic=link, machine="this machine")
        programs = []
        for _ in range(k):
            g, fetch, init = _message_graph(hb, *MESSAGE_STEPS[STEP])
            sess = SimSession(
                c, graph=g, client="/job:worker/replica:0/task:0", shared_resources=True
            )
            sess.run(init)
            sess.run(fetch)  # (the first step also plans)
            programs.append(lambda s=sess, f=fetch: _steps(s, f, steps))
        t0 = c.env.now
        run_clients(c, programs)
        out[k] = (c.env.now - t0) / (k * steps)
    return out


# ---- values fed to a step: they travel with its RunGraph request -------------------------------

#: bytes fed to the steps of ``measure_fed``: a small feed, and a large one
FED = (4 << 10, 8 << 20)


def measure_fed(sizes: tuple[int, ...] = FED, steps: int = 40) -> dict[int, float]:
    """Seconds per step of a worker task's client stepping on its own task (a server here, the
    default protocol) with n bytes fed each step to a ``shape`` op: n -> the median over
    ``ROUNDS`` rounds (each over every size in turn) of the steps' median. The fed values
    travel over the runtime's data channel to the task, a TCP connection even to itself."""
    import numpy as np

    import hetbed as hb

    spec = {"worker": [f"127.0.0.1:{free_port()}"]}
    server = hb.train.Server(hb.train.ClusterSpec(spec), "worker", 0)
    runs = []
    try:
        for n in sizes:
            g = hb.Graph()
            with g.as_default(), hb.device("/job:worker/task:0"):
                x = hb.placeholder(hb.float32, [None])
                y = hb.shape(x)
            sess = hb.Session(server.target, graph=g)
            feed = {x: np.ones(n // 4, np.float32)}
            for _ in range(5):
                sess.run(y, feed)
            runs.append((n, sess, y, feed))
        per: dict[int, list[float]] = {n: [] for n in sizes}
        for _ in range(ROUNDS):
            for n, sess, y, feed in runs:
                ts = []
                for _ in range(steps):
                    t = time.perf_counter()
                    sess.run(y, feed)
                    ts.append(time.perf_counter() - t)
                per[n].append(statistics.median(ts))
    finally:
        for _, sess, _, _ in runs:
            sess.close()
        server.stop()
    return {n: statistics.median(v) for n, v in per.items()}


def simulate_fed(perf: Any, link: tuple, sizes: tuple[int, ...] = FED) -> dict[int, float]:
    """``measure_fed`` simulated: the worker task on one machine of ``perf`` with a PS task
    (idle: two tasks, so that the client calls its task as the runtime does), joined by
    ``link`` (bytes/s, latency s): n -> the simulated step."""
    import numpy as np

    import hetbed as hb
    from hetbed.simulator import Cluster, SimSession

    out = {}
    for n in sizes:
        c = Cluster()
        for job in ("ps", "worker"):
            c.add_task(job, 0, cpu=perf, nic=link, machine="this machine")
        g = hb.Graph()
        with g.as_default(), hb.device("/job:worker/task:0"):
            x = hb.placeholder(hb.float32, [None])
            y = hb.shape(x)
        with SimSession(c, graph=g, client="/job:worker/replica:0/task:0") as sess:
            for _ in range(2):  # (the first step also plans)
                sess.run(y, {x: np.ones(n // 4, np.float32)})
            out[n] = sess.last_record.step_time_s
    return out
