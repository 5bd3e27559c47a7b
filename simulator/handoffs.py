"""Clients of one process stepping at once, measured and simulated: ``hetbed calibrate``'s check
of the interpreter hand-off (``SimulatedDevice.occupy``), which no fit of its sees.

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

from .messages import _PS_TASK, MESSAGE_STEPS, _message_graph

#: the micro-step the clients run (a training step's pattern: read, compute, send back)
STEP = "1 scalar read and sent back"
#: client threads of the check, and its rounds over them
CLIENTS, ROUNDS = (1, 2, 3), 3


def measure_clients(clients: tuple[int, ...] = CLIENTS, steps: int = 150) -> dict[int, float]:
    """Seconds per step of ``STEP`` with k client threads of this process at once (each its
    own session, ``steps`` steps each), a worker task here and a PS task in a child process:
    k -> the median over ``ROUNDS`` rounds (each over every k in turn) of wall / (k x steps)."""
    import socket
    import subprocess
    import sys

    import hetbed as hb
    from hetbed.devices.errors import UnavailableError

    def free_port() -> int:
        with socket.socket() as sk:
            sk.bind(("127.0.0.1", 0))
            return sk.getsockname()[1]

    spec = {"ps": [f"127.0.0.1:{free_port()}"], "worker": [f"127.0.0.1:{free_port()}"]}
    peer = subprocess.Popen([sys.executable, "-c", _PS_TASK.format(spec=spec)])
    server = None
    sessions: list[tuple[Any, Any]] = []
    try:
        server = hb.train.Server(hb.train.ClusterSpec(spec), "worker", 0)
        deadline = time.monotonic() + 60
        for _ in range(max(clients)):
            g, fetch, init = _message_graph(hb, *MESSAGE_STEPS[STEP])
            while True:  # the PS process needs a moment to start serving
                try:
                    sess = hb.Session(server.target, graph=g, connect_timeout_s=1.0)
                    break
                except UnavailableError:
                    if time.monotonic() > deadline or peer.poll() is not None:
                        raise RuntimeError(
                            "the PS task process of the hand-off check did not start"
                        ) from None
                    time.sleep(0.2)
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
