"""The distributed runtime's costs on this machine, measured between processes: loopback TCP's
rate and latency (``loopback_link``, against an echoing child process) and the CPU time and latency
of the runtime's messages (``message_costs``, fitted to steps between a PS task in a child process
and a worker task here, with the simulator's own model of a distributed step)."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from hetbed.devices.costmodel import DevicePerf
from hetbed.devices.errors import UnavailableError
from hetbed.runtime.graph import Graph
from hetbed.runtime.variables import global_variables_initializer

#: the peer of ``loopback_link``, run as its own process (python -c): it binds a port on
#: 127.0.0.1, prints it, and answers each ``[4-byte length][bytes]`` message with one byte
_ECHO = """
import socket, struct, sys
srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.bind(("127.0.0.1", 0))
srv.listen(1)
print(srv.getsockname()[1], flush=True)
conn, _ = srv.accept()
conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
buf = bytearray(1 << 20)
def read(n):
    while n:
        k = conn.recv_into(buf, min(n, len(buf)))
        if not k:
            sys.exit(0)
        n -= k
while True:
    head = bytearray()
    while len(head) < 4:
        part = conn.recv(4 - len(head))
        if not part:
            sys.exit(0)
        head += part
    read(struct.unpack("!I", bytes(head))[0])
    conn.sendall(b"k")
"""


def _connect(peer: Any) -> Any:
    """A TCP connection (no Nagle) to the ``_ECHO`` child ``peer``, once it has printed its port."""
    import socket

    line = peer.stdout.readline()
    if not line.strip().isdigit():
        raise RuntimeError(f"the loopback peer process did not start (it printed {line!r})")
    cli = socket.create_connection(("127.0.0.1", int(line)), timeout=30)
    cli.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return cli


def loopback_link(big: int = 32 << 20, pings: int = 200) -> tuple[float, float]:
    """(bytes/s, one-way latency s) of TCP over 127.0.0.1 between this process and another
    (a child echoing each message with one byte): the latency is half the median round trip of
    a 1-byte message, the rate that of ``big`` bytes sent as one message (less a round trip)."""
    import struct
    import subprocess
    import sys

    from hetbed.runtime.distributed.datachannel import recv_exact

    peer = subprocess.Popen([sys.executable, "-c", _ECHO], stdout=subprocess.PIPE, text=True)
    try:
        with _connect(peer) as cli:
            rtts = []
            one = struct.pack("!I", 1) + b"x"
            for _ in range(pings):
                t = time.perf_counter()
                cli.sendall(one)
                recv_exact(cli, 1)
                rtts.append(time.perf_counter() - t)
            rtt = statistics.median(rtts)
            payload = struct.pack("!I", big) + bytes(big)
            best = float("inf")
            for _ in range(3):
                t = time.perf_counter()
                cli.sendall(payload)
                recv_exact(cli, 1)
                best = min(best, time.perf_counter() - t)
    finally:
        peer.wait(timeout=30)
    return big / max(best - rtt, 1e-9), rtt / 2


def loopback_copy_cpu(big: int = 32 << 20, rounds: int = 64) -> tuple[float, float]:
    """(sender's, receiver's) CPU seconds per byte of one TCP stream over 127.0.0.1: this
    process sends ``rounds`` messages of ``big`` bytes to a child echoing one byte each, and the
    CPU time (user and system) each process spent over them is divided by the bytes. Loopback
    TCP is the kernel copying the bytes at both ends: what a stream takes of the machine's cores
    besides the runtime's own per-message work. (Per byte, not per second of the stream: the
    stream's rate here and the link's rate measured apart differ by the machine's noise, and a
    share of a core per second read against the other rate booked 0.30-0.44 ns a byte where
    the stream itself took 0.37-0.45.)"""
    import struct
    import subprocess
    import sys

    from hetbed.runtime.distributed.datachannel import recv_exact

    peer = subprocess.Popen([sys.executable, "-c", _ECHO], stdout=subprocess.PIPE, text=True)
    try:
        with _connect(peer) as cli:
            payload = struct.pack("!I", big) + bytes(big)
            cli.sendall(payload)  # (a first message: buffers and pages in place)
            recv_exact(cli, 1)
            own0, child0 = _cpu_pair(peer.pid)
            for _ in range(rounds):
                cli.sendall(payload)
                recv_exact(cli, 1)
            own1, child1 = _cpu_pair(peer.pid)
    finally:
        peer.wait(timeout=30)
    sent = rounds * big
    return (own1 - own0) / sent, (child1 - child0) / sent


def loopback_aggregate(big: int = 32 << 20, streams: int = 2, rounds: int = 16) -> float:
    """Bytes/s that ``streams`` concurrent TCP streams over 127.0.0.1 reach together: this
    process sends a ``big``-byte message on each from a thread of its own to a child echoing one
    byte, all streams starting each of ``rounds`` rounds together; the best round counts, as
    ``loopback_link`` keeps its best message (other work only ever slows a round). Four rounds
    were too few on this 2-core VM: six calls in a row gave 2.3-6.7 GB/s (median 3.1), sixteen
    rounds 3.4-5.1 (median 4.7), one stream 4.0-4.6; calibrate's medians of three calls read
    3.1 and 5.3 GB/s twenty minutes apart, and the simulated 100 MB two-worker step moved by
    30% with them. The machine's cores copy the streams; one stream alone is
    ``loopback_link``'s rate."""
    import socket
    import struct
    import subprocess
    import sys
    import threading

    from hetbed.runtime.distributed.datachannel import recv_exact

    peers, socks = [], []
    try:
        for _ in range(streams):
            peer = subprocess.Popen(
                [sys.executable, "-c", _ECHO], stdout=subprocess.PIPE, text=True
            )
            peers.append(peer)
            socks.append(_connect(peer))
        payload = struct.pack("!I", big) + bytes(big)
        for cli in socks:  # one message each first: buffers grown, pages touched
            cli.sendall(payload)
            recv_exact(cli, 1)
        # (a stream that fails leaves the others waiting: each wait gives up after 60 s)
        start = threading.Barrier(streams + 1, timeout=60)
        done = threading.Barrier(streams + 1, timeout=60)

        def send(cli: socket.socket) -> None:
            for _ in range(rounds):
                start.wait()
                cli.sendall(payload)
                recv_exact(cli, 1)
                done.wait()

        threads = [threading.Thread(target=send, args=(c,)) for c in socks]
        for th in threads:
            th.start()
        best = float("inf")
        for _ in range(rounds):
            start.wait()
            t = time.perf_counter()
            done.wait()
            best = min(best, time.perf_counter() - t)
        for th in threads:
            th.join()
    finally:
        for cli in socks:
            cli.close()
        for peer in peers:
            peer.wait(timeout=30)
    return streams * big / best


#: the PS task of ``message_costs``, run as its own process (python -c): a hetbed server
_PS_TASK = """
import sys
import hetbed as hb
hb.train.Server(hb.train.ClusterSpec({spec!r}), "ps", 0).join()
"""

#: the steps ``message_costs`` measures: name -> (scalars read from the PS, bytes read from it);
#: (0, 0) reads nothing remote (the client's own task only)
MESSAGE_STEPS = {
    "own task only": (0, 0, False),
    "both tasks, nothing between them": (0, 0, "apart"),
    "1 scalar read": (1, 0, False),
    "4 scalars read": (4, 0, False),
    "1 scalar sent": (1, 0, True),
    "4 scalars sent": (4, 0, True),
    "1 scalar read and sent back": (1, 0, "both"),
    "4 scalars read and sent back": (4, 0, "both"),
    "1 MiB read": (0, 1 << 20, False),
    "8 MiB read": (0, 8 << 20, False),
    "64 MiB read": (0, 64 << 20, False),
}
#: the read steps whose times, against their bytes, give the per-byte cost (``message_costs``)
BYTE_STEPS = ("1 MiB read", "8 MiB read", "64 MiB read")


def _message_graph(
    hb: Any, scalars: int = 0, nbytes: int = 0, send: Any = False
) -> tuple[Any, Any, Any]:
    """A graph whose worker task reads ``scalars`` float32 scalars, or one tensor of ``nbytes``,
    from the PS task (``send``: computes them and the PS adds them into its variables; "both":
    computes them from what it read, the pattern of a training step), or (neither) adds one to
    a variable of its own; "apart": each task adds one to a variable of its own, both fetched
    as targets, so that the step calls both tasks and no tensor crosses between them:
    (graph, fetch, init)."""
    g = Graph()
    tag = f"{scalars}_{nbytes}_{send}"
    if send == "apart":
        with g.as_default():
            ops = []
            for job in ("ps", "worker"):
                with hb.device(f"/job:{job}/task:0"):
                    v = hb.Variable(np.zeros(1, np.float32), name=f"calibrate_{tag}_{job}")
                    ops.append(hb.assign_add(v, np.ones(1, np.float32)).op)
            init = global_variables_initializer()
        return g, ops, init
    with g.as_default():
        with hb.device("/job:ps/task:0"):  # (names of their own: the PS keeps variables)
            if scalars:
                vs = [
                    hb.Variable(np.zeros(1, np.float32), name=f"calibrate_{tag}_{i}")
                    for i in range(scalars)
                ]
            elif nbytes:
                vs = [hb.Variable(np.zeros(nbytes // 4, np.float32), name=f"calibrate_{tag}")]
        with hb.device("/job:worker/task:0"):
            if send == "both":
                sent = [v * 2.0 for v in vs]
            elif send:
                sent = [hb.constant(np.ones(1, np.float32)) * 2.0 for _ in vs]
            elif scalars:
                fetch = hb.add_n([v * 1.0 for v in vs])
            elif nbytes:
                fetch = vs[0][0] * 1.0
            else:
                fetch = hb.Variable(np.zeros(1, np.float32), name=f"calibrate_{tag}") + 1.0
        if send:
            with hb.device("/job:ps/task:0"):
                fetch = hb.group(*[hb.assign_add(v, x) for v, x in zip(vs, sent)])
        init = global_variables_initializer()
    return g, fetch, init


def message_costs(
    link_bytes_per_s: float,
    link_latency_s: float,
    perf: DevicePerf,
    steps: int = 150,
) -> tuple[DevicePerf, dict[str, float], dict[str, float]]:
    """The distributed runtime's costs on this machine, fitted to steps between two processes
    (a PS task in a child process, the worker task and its client here; the default protocol):
    ``perf`` with ``message_s``, ``control_message_s``, ``own_control_message_s``,
    ``message_latency_s`` and ``message_s_per_byte`` set (``step_s`` 0), the steps measured
    (median seconds) and the same steps simulated with the fit.

    The fit uses the simulator's own model of a distributed step (``SimSession``: RunGraph and
    RecvTensor calls, both tasks on one machine of this host's cores, joined by the measured
    loopback link). CPU time first: the simulator counts the ends of control messages (RunGraph
    calls' requests and replies) of the client's call to its own task (both ends in its
    process), those of its calls to the other task, and the ends of the others (RecvTensor
    calls) that each step moving no bulk bytes handles (both tasks), and
    ``own_control_message_s``, ``control_message_s`` and ``message_s`` are the non-negative
    least-squares fit of the CPU time both processes spent per step (user and system, measured
    to the nanosecond: ``_cpu_pair``) to those counts (the own task alone has only the first,
    both tasks with nothing between them the first two). Every step makes one call to the
    client's own task, so a client's own work per step (``step_s``) is not told apart from that
    call's ends: it is counted in them (``step_s`` 0; measured by itself it came out 0-10 us).
    (One control cost for both kinds of call fitted the own task's step 25% too high in CPU
    and 47-69% in wall time: a call to another process wakes a thread there.) Then
    ``message_latency_s`` (no CPU) minimizes the RMS relative error of the simulated against
    the measured wall time of those steps (a golden-section search). Each end's
    ``message_s_per_byte`` is half of the per-byte slope of the 1, 8 and 64 MiB read steps'
    times (least squares), less the link's time for a byte (at least 0): the 64 MiB step gives the slope a lever eight times longer than the 8 MiB one
    alone, whose difference from the 1 MiB step gave 0.037 and 0.087 ns a byte per end in two
    calibrations an hour apart (and the 64 MiB step is the size whose price it sets; the
    runtime lands it in a pooled buffer, no new pages).
    Runs no training step.
    """
    import hetbed as hb

    got, cpu = _measure_message_steps(hb, steps)
    small = [n for n, (_, nbytes, _) in MESSAGE_STEPS.items() if not nbytes]
    link = (link_bytes_per_s, link_latency_s)
    unit = 1e-6
    free = replace(perf, message_latency_s=0.0, step_s=0.0, message_s_per_byte=0.0)
    cols = []
    # the own task's control ends, the other task's, then the others
    for own, control, other in ((unit, 0.0, 0.0), (0.0, unit, 0.0), (0.0, 0.0, unit)):
        counted = replace(
            free, message_s=other, control_message_s=control, own_control_message_s=own
        )
        cols.append([_message_ends(hb, counted, link, *MESSAGE_STEPS[n]) / unit for n in small])
    a = np.stack(cols, axis=1)
    mo, mc, m = _nonneg_lstsq(a, np.array([cpu[n] for n in small]))
    want = np.array([got[n] for n in small])
    costs = dict(message_s=m, control_message_s=mc, own_control_message_s=mo, step_s=0.0)

    def wall_error(lat: float) -> float:
        p = replace(perf, **costs, message_latency_s=lat, message_s_per_byte=0.0)
        sim = np.array([_simulated_message_step(hb, p, link, *MESSAGE_STEPS[n]) for n in small])
        return float(np.sqrt(np.mean((sim / want - 1) ** 2)))

    lo, hi = 0.0, 4e-4  # golden-section search of the latency
    r = (5**0.5 - 1) / 2
    x1, x2 = hi - r * (hi - lo), lo + r * (hi - lo)
    f1, f2 = wall_error(x1), wall_error(x2)
    for _ in range(12):
        if f1 <= f2:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - r * (hi - lo)
            f1 = wall_error(x1)
        else:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + r * (hi - lo)
            f2 = wall_error(x2)
    lat = x1 if f1 <= f2 else x2
    sizes = np.array([float(MESSAGE_STEPS[n][1]) for n in BYTE_STEPS])
    per_byte = float(np.polyfit(sizes, np.array([got[n] for n in BYTE_STEPS]), 1)[0])
    byte_s = max((per_byte - 1.0 / link_bytes_per_s) / 2, 0.0)
    fitted = replace(perf, **costs, message_latency_s=lat, message_s_per_byte=byte_s)
    sim = {n: _simulated_message_step(hb, fitted, link, *MESSAGE_STEPS[n]) for n in got}
    return fitted, got, sim


def message_drift(perf: DevicePerf, link: tuple, steps: int = 150) -> float:
    """How this machine runs now against a calibration of it: the median over ``MESSAGE_STEPS``
    of each micro-step's measured wall time now over its time simulated with ``perf`` and
    ``link`` (bytes/s, latency s), the catalog entries ``message_costs`` was fitted into. About
    1 right after ``hetbed calibrate`` (the fit's own residuals are those steps' errors); above
    1 when the machine has slowed down since. Runs no training step. (``MessageProbe`` keeps
    its processes and sessions open to measure it again and again.)"""
    import hetbed as hb

    got, _ = _measure_message_steps(hb, steps)
    return _drift_of(hb, got, perf, link)


def _drift_of(
    hb: Any, got: dict[str, float], perf: DevicePerf, link: tuple, sim: Any = None
) -> float:
    """The median over the micro-steps ``got`` of measured over simulated (``sim``: their
    simulated times where already known)."""
    if sim is None:
        sim = {n: _simulated_message_step(hb, perf, link, *MESSAGE_STEPS[n]) for n in got}
    return float(np.median([got[n] / sim[n] for n in got]))


#: the micro-steps ``MessageProbe`` measures by default: those of about a millisecond or less
#: here (the 4-scalar steps take 1.5-2.5 ms, the 8 and 64 MiB reads 3-26 ms: each probe would
#: take seconds where these take under half of one at 100 steps each)
PROBE_STEPS = (
    "own task only",
    "both tasks, nothing between them",
    "1 scalar read",
    "1 scalar sent",
    "1 scalar read and sent back",
    "1 MiB read",
)


class MessageProbe:
    """Calibrate's message micro-steps kept ready to measure this machine's speed again and
    again (a benchmark's measurements taken minutes apart on a machine whose speed drifts):
    the PS task's process, the worker task's server and one session per micro-step are opened
    once (``with MessageProbe() as probe``; ``close`` ends them), and ``drift`` measures the
    micro-steps now and returns their median of measured over simulated time (as
    ``message_drift``; the simulated times are computed once per catalog entry). ``names``:
    the micro-steps measured (default ``PROBE_STEPS``). Runs no training step. Raises
    ValueError for an unknown micro-step name or none, RuntimeError if the PS task's process
    does not start."""

    def __init__(self, names: Sequence[str] = PROBE_STEPS):
        import hetbed as hb

        unknown = [n for n in names if n not in MESSAGE_STEPS]
        if unknown or not names:
            what = f"unknown micro-steps {unknown}" if unknown else "no micro-step named"
            raise ValueError(f"MessageProbe: {what}; known: {list(MESSAGE_STEPS)}")
        self._hb = hb
        self._sim: tuple | None = None  # (perf, link, simulated seconds by micro-step)
        self.sessions: dict[str, tuple[Any, Any]] = {}
        self._server = None
        spec, self.peer = start_ps_peer()
        try:
            self._server = hb.train.Server(hb.train.ClusterSpec(spec), "worker", 0)
            deadline = time.monotonic() + 60
            for name in names:
                g, fetch, init = _message_graph(hb, *MESSAGE_STEPS[name])
                sess = peer_session(hb, self._server, g, self.peer, deadline, "the message probe")
                self.sessions[name] = (sess, fetch)
                sess.run(init)
                for _ in range(10):
                    sess.run(fetch)
        except BaseException:
            self.close()
            raise

    def measure(self, steps: int) -> tuple[dict[str, float], dict[str, float]]:
        """Median seconds of each micro-step over ``steps`` steps, and the CPU seconds (user and
        system) both processes spent per step, the micro-steps taking turns in
        ``MEASURE_ROUNDS`` rounds (see ``_measure_message_steps``)."""
        ts: dict[str, list[float]] = {name: [] for name in self.sessions}
        used = dict.fromkeys(self.sessions, 0.0)
        for name, count in _turns(list(self.sessions), steps, MEASURE_ROUNDS):
            sess, fetch = self.sessions[name]
            before = _cpu_s(self.peer.pid)
            for _ in range(count):
                t = time.perf_counter()
                sess.run(fetch)
                ts[name].append(time.perf_counter() - t)
            used[name] += _cpu_s(self.peer.pid) - before
        got = {name: statistics.median(v) for name, v in ts.items()}
        return got, {name: used[name] / len(ts[name]) for name in ts}

    def drift(self, perf: DevicePerf, link: tuple, steps: int = 100) -> float:
        """``message_drift`` measured now with these open sessions, over ``steps`` steps of each
        micro-step."""
        if self._sim is None or self._sim[0] is not perf or self._sim[1] != tuple(link):
            sim = {
                n: _simulated_message_step(self._hb, perf, link, *MESSAGE_STEPS[n])
                for n in self.sessions
            }
            self._sim = (perf, tuple(link), sim)
        got, _ = self.measure(steps)
        return _drift_of(self._hb, got, perf, link, self._sim[2])

    def close(self) -> None:
        for sess, _ in self.sessions.values():
            sess.close()
        self.sessions = {}
        if self.peer.poll() is None:
            self.peer.kill()
        self.peer.wait(timeout=30)
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> MessageProbe:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _nonneg_lstsq(a: np.ndarray, b: np.ndarray) -> list[float]:
    """The least-squares solution of ``a x = b`` with every ``x >= 0`` (few columns: the best
    of the unconstrained fits on each subset of them whose solution is non-negative)."""
    n = a.shape[1]
    best, out = np.inf, [0.0] * n
    for mask in range(1, 1 << n):
        cols = [j for j in range(n) if mask >> j & 1]
        x, *_ = np.linalg.lstsq(a[:, cols], b, rcond=None)
        if (x < 0).any():
            continue
        err = float(np.sum((a[:, cols] @ x - b) ** 2))
        if err < best:
            best, out = err, [0.0] * n
            for j, v in zip(cols, x):
                out[j] = float(v)
    return out


def _message_ends(hb: Any, perf: DevicePerf, link: tuple, *step: Any) -> float:
    """CPU seconds the tasks of a simulated ``_message_graph`` step spend on messages."""
    rec = _simulated_message_step(hb, perf, link, *step, record=True)
    return float(rec.ops[rec.ops.type.isin(["RunGraph", "RecvTensor"])].duration_s.sum())


#: rounds ``_measure_message_steps`` spreads each micro-step's steps over, in turn
MEASURE_ROUNDS = 5


def _measure_message_steps(hb: Any, steps: int) -> tuple[dict[str, float], dict[str, float]]:
    """Median seconds of each of ``MESSAGE_STEPS`` run by a client here on a worker task here
    and a PS task in a child process, and the CPU seconds (user and system) both processes
    spent per step. The micro-steps take turns: each runs a fifth of its steps in each of
    ``MEASURE_ROUNDS`` rounds over all of them (every session open from the start), so that a
    drift of the machine's speed over the measurement falls on every micro-step alike instead
    of on the ones measured last; the fit uses their differences."""
    with MessageProbe(list(MESSAGE_STEPS)) as probe:
        return probe.measure(steps)


def free_port() -> int:
    """A TCP port of 127.0.0.1 free now."""
    import socket

    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        return sk.getsockname()[1]


def start_ps_peer() -> tuple[dict, Any]:
    """A cluster spec of a PS task and a worker task on free local ports, and the PS task's
    server started in a child process (``_PS_TASK``; the caller kills it)."""
    import subprocess
    import sys

    spec = {"ps": [f"127.0.0.1:{free_port()}"], "worker": [f"127.0.0.1:{free_port()}"]}
    return spec, subprocess.Popen([sys.executable, "-c", _PS_TASK.format(spec=spec)])


def peer_session(hb: Any, server: Any, graph: Any, peer: Any, deadline: float, what: str) -> Any:
    """A session of ``graph`` on ``server`` once the PS task process ``peer`` serves (it needs a
    moment to start); RuntimeError naming ``what`` if it has not by ``deadline`` (monotonic)
    or has exited."""
    while True:
        try:
            return hb.Session(server.target, graph=graph, connect_timeout_s=1.0)
        except UnavailableError:  # not up yet
            if time.monotonic() > deadline or peer.poll() is not None:
                raise RuntimeError(f"the PS task process of {what} did not start") from None
            time.sleep(0.2)


def _turns(names: list[str], steps: int, rounds: int) -> list[tuple[str, int]]:
    """(name, steps) in the order ``_measure_message_steps`` runs them: ``rounds`` rounds (at
    most ``steps``), each giving every name in turn its share of ``steps``."""
    rounds = max(1, min(rounds, steps))
    return [
        (name, steps * (r + 1) // rounds - steps * r // rounds)
        for r in range(rounds)
        for name in names
    ]


def _cpu_s(child: int) -> float:
    """CPU seconds (user and system) this process and process ``child`` have used so far."""
    return sum(_cpu_pair(child))


def _cpu_pair(child: int) -> tuple[float, float]:
    """(this process's, process ``child``'s) CPU seconds (user and system) so far, to the
    nanosecond where the kernel tells (this process: ``time.process_time``; the child: the sum
    of its threads' run time, /proc/PID/task/*/schedstat), else in clock ticks (/proc/PID/stat:
    10 ms, a sixth of what 150 steps of 1 ms cost); the child's is 0 where /proc cannot say."""
    own = time.process_time()
    try:
        total = 0
        for tid in os.listdir(f"/proc/{child}/task"):
            try:
                with open(f"/proc/{child}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except FileNotFoundError:  # (a thread that ended meanwhile)
                continue
        return own, total * 1e-9
    except (OSError, ValueError, IndexError):  # no schedstat: clock ticks
        pass
    try:
        with open(f"/proc/{child}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return own, (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):  # no /proc: this process only
        return own, 0.0


def _simulated_message_step(
    hb: Any,
    perf: DevicePerf,
    link: tuple,
    scalars: int = 0,
    nbytes: int = 0,
    send: Any = False,
    record: bool = False,
) -> Any:
    """The simulated time of ``_message_graph``'s step (its RunRecord with ``record``): both
    tasks on one machine of ``perf``, joined by ``link`` (bytes/s, latency s)."""
    from hetbed.simulator import Cluster, SimSession

    c = Cluster()
    for job in ("ps", "worker"):
        c.add_task(job, 0, cpu=perf, nic=link, machine="this machine")
    g, fetch, init = _message_graph(hb, scalars, nbytes, send)
    with SimSession(c, graph=g) as sess:
        sess.run(init)
        sess.run(fetch)
        sess.run(fetch)  # (a second step: the first also plans)
        return sess.last_record if record else sess.last_record.step_time_s
