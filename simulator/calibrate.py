"""Calibration: measure this machine so that the simulator predicts what the real executor does.

Two products, both written by ``hetbed calibrate``:

* a catalog device file ``this_machine.toml``: float32 GEMM FLOP/s, streaming memory bandwidth
  and the executor's per-op dispatch cost, measured here (the roofline's three numbers);
* a profile table (``profile.json``): the measured time of every op of the given graphs, keyed by
  op type, dtype, input shapes and attrs, for ``devices.costmodel.Profiled``.
"""

from __future__ import annotations

import datetime
import os
import statistics
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from hetbed.devices.costmodel import DevicePerf, Profiled, Roofline, profile_key
from hetbed.devices.errors import UnavailableError
from hetbed.devices.fileio import atomic_write
from hetbed.devices.simulated import value_shape
from hetbed.runtime import dtypes
from hetbed.runtime.graph import Graph
from hetbed.runtime.ops.array import constant, placeholder
from hetbed.runtime.session import Session
from hetbed.runtime.timeline import TracingObserver
from hetbed.runtime.variables import global_variables_initializer


def best_of(fn: Callable[[], Any], repeat: int = 5, number: int = 5) -> float:
    """Best mean seconds per call over ``repeat`` rounds of ``number`` calls (after a warm-up)."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t) / number)
    return best


#: a measurement is flagged noisy when its spread, (90th - 10th percentile) / median over its
#: repeats, exceeds this, or when other processes kept more than NOISY_LOAD_CORES cores busy
#: while it ran
NOISY_SPREAD = 0.10
NOISY_LOAD_CORES = 0.25


def _cpu_busy_s() -> float | None:
    """Seconds of non-idle CPU time of the whole machine so far (all cores), from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class LoadMeter:
    """How many cores other processes kept busy between ``start()`` and ``stop()``: the
    machine's busy CPU time minus this process's, over the wall time (None where the machine
    does not say, e.g. without /proc)."""

    def start(self) -> LoadMeter:
        self.t, self.busy, self.own = time.perf_counter(), _cpu_busy_s(), time.process_time()
        return self

    def stop(self) -> float | None:
        busy = _cpu_busy_s()
        wall = time.perf_counter() - self.t
        if busy is None or self.busy is None or wall <= 0:
            return None
        other = (busy - self.busy) - (time.process_time() - self.own)
        return max(other / wall, 0.0)


@dataclass
class Measurement:
    """One calibration measurement repeated: every value, and the other processes' load."""

    name: str
    unit: str
    values: list[float]
    load_cores: float | None = None
    shown: tuple[float, str] | None = None  # (scale, unit) to show the values in

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def spread(self) -> float:
        m = self.median
        if not m or len(self.values) < 2:
            return 0.0
        lo, hi = np.percentile(self.values, [10, 90])
        return float(hi - lo) / m

    @property
    def noisy(self) -> bool:
        busy = self.load_cores is not None and self.load_cores > NOISY_LOAD_CORES
        return self.spread > NOISY_SPREAD or busy

    def describe(self, scale: float | None = None, unit: str | None = None) -> str:
        """``median [min, max] unit, load x cores`` with a NOISY flag and why, in the unit it
        is ``shown`` in unless given."""
        if scale is None:
            scale, unit = self.shown or (1.0, self.unit)
        u = unit or self.unit
        text = (
            f"{self.median * scale:.4g} [{min(self.values) * scale:.4g}, "
            f"{max(self.values) * scale:.4g}] {u} over {len(self.values)}"
        )
        if self.load_cores is not None:
            text += f", other load {self.load_cores:.2f} cores"
        if self.noisy:
            why = []
            if self.spread > NOISY_SPREAD:
                why.append(f"spread {self.spread:.0%} > {NOISY_SPREAD:.0%}")
            if self.load_cores is not None and self.load_cores > NOISY_LOAD_CORES:
                why.append(f"other processes used {self.load_cores:.2f} cores")
            text += f"  NOISY ({'; '.join(why)}: rerun on a quiet machine)"
        return text

    def row(self, scale: float | None = None) -> dict[str, Any]:
        """median, min, max (in the unit it is ``shown`` in unless ``scale`` is given),
        repeats, other_load_cores, noisy."""
        if scale is None:
            scale = self.shown[0] if self.shown else 1.0
        return {
            "median": self.median * scale,
            "min": min(self.values) * scale,
            "max": max(self.values) * scale,
            "repeats": len(self.values),
            "other_load_cores": self.load_cores,
            "noisy": self.noisy,
        }


def repeated(
    name: str,
    unit: str,
    fn: Callable[[], float],
    repeats: int,
    shown: tuple[float, str] | None = None,
) -> Measurement:
    """``fn()`` ``repeats`` times, with the load other processes put on the machine meanwhile."""
    meter = LoadMeter().start()
    values = [fn() for _ in range(max(repeats, 1))]
    return Measurement(name, unit, values, meter.stop(), shown)


def gemm_flops(n: int = 1024) -> float:
    """float32 GEMM FLOP/s of numpy here (an n x n x n product)."""
    a = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
    return 2.0 * n**3 / best_of(lambda: a @ a)


def stream_bandwidth(n: int = 1 << 23) -> float:
    """Bytes/s of an out-of-place float32 add over arrays much larger than the caches."""
    a = np.ones(n, np.float32)
    b = np.ones(n, np.float32)
    out = np.empty_like(a)
    return 3.0 * 4 * n / best_of(lambda: np.add(a, b, out=out))


def dispatch_overhead(n_ops: int = 1000) -> float:
    """Seconds the executor adds per op beyond the kernel itself (a chain of tiny adds)."""
    g = Graph()
    with g.as_default():
        x = placeholder(dtypes.float32, [4])
        one = constant(np.ones(4, np.float32))
        y = x
        for _ in range(n_ops):
            y = y + one
        sess = Session(graph=g)
        xv = np.zeros(4, np.float32)
        total = best_of(lambda: sess.run(y, {x: xv}), repeat=5, number=10)
        a, o = np.zeros(4, np.float32), np.ones(4, np.float32)
        kernel = best_of(lambda: [np.add(a, o) for _ in range(n_ops)], repeat=5, number=10)
    return max(total - kernel, 0.0) / n_ops


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


def loopback_link(big: int = 32 << 20, pings: int = 200) -> tuple[float, float]:
    """(bytes/s, one-way latency s) of TCP over 127.0.0.1 between this process and another
    (a child echoing each message with one byte): the latency is half the median round trip of
    a 1-byte message, the rate that of ``big`` bytes sent as one message (less a round trip)."""
    import socket
    import struct
    import subprocess
    import sys

    from hetbed.runtime.distributed.datachannel import recv_exact

    peer = subprocess.Popen([sys.executable, "-c", _ECHO], stdout=subprocess.PIPE, text=True)
    try:
        line = peer.stdout.readline()
        if not line.strip().isdigit():
            raise RuntimeError(f"the loopback peer process did not start (it printed {line!r})")
        port = int(line)
        cli = socket.create_connection(("127.0.0.1", port), timeout=30)
        cli.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with cli:
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
    "1 scalar read": (1, 0, False),
    "4 scalars read": (4, 0, False),
    "1 scalar sent": (1, 0, True),
    "4 scalars sent": (4, 0, True),
    "1 scalar read and sent back": (1, 0, "both"),
    "4 scalars read and sent back": (4, 0, "both"),
    "1 MiB read": (0, 1 << 20, False),
    "8 MiB read": (0, 8 << 20, False),
}


def _message_graph(
    hb: Any, scalars: int = 0, nbytes: int = 0, send: Any = False
) -> tuple[Any, Any, Any]:
    """A graph whose worker task reads ``scalars`` float32 scalars, or one tensor of ``nbytes``,
    from the PS task (``send``: computes them and the PS adds them into its variables; "both":
    computes them from what it read, the pattern of a training step), or (neither) adds one to
    a variable of its own: (graph, fetch, init)."""
    g = Graph()
    tag = f"{scalars}_{nbytes}_{send}"
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
    ``perf`` with ``message_s``, ``step_s``, ``message_latency_s`` and ``message_s_per_byte``
    set, the steps measured (median seconds) and the same steps simulated with the fit.

    The fit uses the simulator's own model of a distributed step (``SimSession``: RunGraph and
    RecvTensor calls, both tasks on one machine of this host's cores, joined by the measured
    loopback link). CPU time first: the simulator counts the message ends each step that moves
    no bulk bytes handles (both tasks), and ``message_s`` and ``step_s`` (the client's, once a
    step) are the least-squares fit of the CPU time both processes spent per step (user and
    system, measured) to those counts. Then ``message_latency_s`` (no CPU) minimizes the RMS
    relative error of the simulated against the measured wall time of those steps (a
    golden-section search). Each end's ``message_s_per_byte`` is half of what the 8 MiB step
    takes longer than the 1 MiB step per added byte, less the link's time for it (at least 0).
    Runs no training step.
    """
    import hetbed as hb

    got, cpu = _measure_message_steps(hb, steps)
    small = [n for n, (_, nbytes, _) in MESSAGE_STEPS.items() if not nbytes]
    link = (link_bytes_per_s, link_latency_s)
    unit = 1e-6
    counted = replace(
        perf, message_s=unit, message_latency_s=0.0, step_s=0.0, message_s_per_byte=0.0
    )
    ends = np.array([_message_ends(hb, counted, link, *MESSAGE_STEPS[n]) / unit for n in small])
    a = np.stack([ends, np.ones(len(small))], axis=1)
    (m, st), *_ = np.linalg.lstsq(a, np.array([cpu[n] for n in small]), rcond=None)
    m, st = max(float(m), 0.0), max(float(st), 0.0)
    want = np.array([got[n] for n in small])

    def wall_error(lat: float) -> float:
        p = replace(perf, message_s=m, message_latency_s=lat, step_s=st, message_s_per_byte=0.0)
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
    n1, n8 = MESSAGE_STEPS["1 MiB read"][1], MESSAGE_STEPS["8 MiB read"][1]
    per_byte = (got["8 MiB read"] - got["1 MiB read"]) / (n8 - n1)
    byte_s = max((per_byte - 1.0 / link_bytes_per_s) / 2, 0.0)
    fitted = replace(perf, message_s=m, message_latency_s=lat, step_s=st, message_s_per_byte=byte_s)
    sim = {n: _simulated_message_step(hb, fitted, link, *MESSAGE_STEPS[n]) for n in got}
    return fitted, got, sim


def _message_ends(hb: Any, perf: DevicePerf, link: tuple, *step: Any) -> float:
    """CPU seconds the tasks of a simulated ``_message_graph`` step spend on messages."""
    rec = _simulated_message_step(hb, perf, link, *step, record=True)
    return float(rec.ops[rec.ops.type.isin(["RunGraph", "RecvTensor"])].duration_s.sum())


def _measure_message_steps(hb: Any, steps: int) -> tuple[dict[str, float], dict[str, float]]:
    """Median seconds of each of ``MESSAGE_STEPS`` run by a client here on a worker task here
    and a PS task in a child process, and the CPU seconds (user and system) both processes
    spent per step."""
    import socket
    import subprocess
    import sys

    def free_port() -> int:
        with socket.socket() as sk:
            sk.bind(("127.0.0.1", 0))
            return sk.getsockname()[1]

    spec = {"ps": [f"127.0.0.1:{free_port()}"], "worker": [f"127.0.0.1:{free_port()}"]}
    peer = subprocess.Popen([sys.executable, "-c", _PS_TASK.format(spec=spec)])
    server = None
    got: dict[str, float] = {}
    cpu: dict[str, float] = {}
    try:
        server = hb.train.Server(hb.train.ClusterSpec(spec), "worker", 0)
        deadline = time.monotonic() + 60
        for name, (k, n, send) in MESSAGE_STEPS.items():
            g, fetch, init = _message_graph(hb, k, n, send)
            while True:  # the PS process needs a moment to start serving
                try:
                    sess = hb.Session(server.target, graph=g, connect_timeout_s=1.0)
                    break
                except UnavailableError:  # not up yet
                    if time.monotonic() > deadline or peer.poll() is not None:
                        raise RuntimeError(
                            "the PS task process of the message calibration did not start"
                        ) from None
                    time.sleep(0.2)
            try:
                sess.run(init)
                for _ in range(10):
                    sess.run(fetch)
                ts = []
                used = _cpu_s(peer.pid)
                for _ in range(steps):
                    t = time.perf_counter()
                    sess.run(fetch)
                    ts.append(time.perf_counter() - t)
                got[name] = statistics.median(ts)
                cpu[name] = (_cpu_s(peer.pid) - used) / steps
            finally:
                sess.close()
    finally:
        peer.kill()
        peer.wait(timeout=30)
        if server is not None:
            server.stop()
    return got, cpu


def _cpu_s(child: int) -> float:
    """CPU seconds (user and system) this process and process ``child`` have used so far."""
    t = os.times()
    own = t.user + t.system
    try:
        with open(f"/proc/{child}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return own + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):  # no /proc: this process only
        return own


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


_COST_FIELDS = ("message_s", "message_latency_s", "step_s", "message_s_per_byte")


def measure(repeats: int = 5) -> tuple[DevicePerf, list[Measurement]]:
    """This machine's roofline numbers, each the median of ``repeats`` measurements, and the
    measurements (min/median/max and the other processes' load while each ran)."""
    ms = [
        repeated("float32 GEMM 1024^3", "FLOP/s", gemm_flops, repeats, (1e-9, "GFLOP/s")),
        repeated(
            "memory bandwidth (float32 add)", "bytes/s", stream_bandwidth, repeats, (1e-9, "GB/s")
        ),
        repeated("executor dispatch per op", "s", dispatch_overhead, repeats, (1e6, "us/op")),
    ]
    flops, bw, dispatch = (m.median for m in ms)
    perf = DevicePerf(
        "this_machine",
        {"float32": flops, "float64": flops / 2},
        memory_bandwidth=bw,
        memory_bytes=float(_host_memory()),
        launch_overhead_s=dispatch,
        cores=host_cores(),
    )
    return perf, ms


def measure_machine(repeats: int = 3) -> DevicePerf:
    """This machine's roofline numbers, measured now (medians of ``repeats``)."""
    return measure(repeats)[0]


def _host_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


class _ShapeTracer(TracingObserver):
    """Records each op's wall time together with its input shapes."""

    def __init__(self, prepared: Any, feeds: dict):
        super().__init__()
        self.slot_shape: dict[int, tuple] = {
            s: value_shape(feeds[t]) for t, s in prepared.feed_slots.items()
        }
        self.samples: list[tuple[str, float]] = []
        self.work: dict[str, tuple[float, float]] = {}

    def node_finished(self, node: Any, result: Any, released: Any = ()) -> None:
        super().node_finished(node, result)
        outs = result if node.n_out > 1 else (result,)
        for s, v in zip(node.outs, outs or ()):
            if s is not None:
                self.slot_shape[s] = value_shape(v)
        ins = [self.slot_shape.get(s, ()) for s in node.ins]
        row = self.rows[-1]
        key = profile_key(node.op, ins)
        self.samples.append((key, row["duration_s"]))
        if key not in self.work:
            outs_shapes = [value_shape(v) for v in (outs or ())]
            try:
                c = node.op.op_def.cost_fn(node.op, ins, outs_shapes)
                self.work[key] = (float(c.flops), float(c.bytes_read + c.bytes_written))
            except (TypeError, ValueError, IndexError) as e:  # a rule that cannot price them
                # the entry keeps its measured time but is never scaled to other shapes
                warnings.warn(
                    f"profile: the cost rule of {node.op.type} {node.op.name!r} cannot price "
                    f"input shapes {ins} ({type(e).__name__}: {e}); this entry will not be "
                    "scaled to shapes the profile did not measure",
                    stacklevel=2,
                )


def profile_ops(
    sess: Any,
    fetches: Any,
    feed_dict: dict,
    repeats: int = 10,
    timed_between: int = 0,
    work: dict[str, tuple[float, float]] | None = None,
) -> tuple[dict[str, float], list[float]]:
    """Median measured seconds per profile key over ``repeats`` traced steps of ``fetches``.

    With ``timed_between > 0``, that many untraced steps are timed between traced ones, so that
    the measured step times and the op profile see the same machine state; their wall times are
    returned as the second element. ``work``, if given, receives each key's FLOPs and bytes
    (for ``Profiled`` to scale the entries to shapes it did not measure).
    """
    sess.run(fetches, feed_dict)  # warm up caches and kernels
    samples: dict[str, list[float]] = {}
    step_times: list[float] = []
    for _ in range(repeats):
        for _ in range(timed_between):
            t = time.perf_counter()
            sess.run(fetches, feed_dict)
            step_times.append(time.perf_counter() - t)
        tracer = sess.run_observed(fetches, feed_dict, _ShapeTracer)
        for key, d in tracer.samples:
            samples.setdefault(key, []).append(d)
        if work is not None:
            work.update(tracer.work)
    return {k: statistics.median(v) for k, v in samples.items()}, step_times


def calibrate_models(
    builders: dict[str, Callable],
    repeats: int = 10,
    work: dict[str, tuple[float, float]] | None = None,
) -> dict[str, float]:
    """One profile table over the training steps of ``builders`` (name -> build fn); ``work``
    receives each entry's FLOPs and bytes."""
    table: dict[str, float] = {}
    for build in builders.values():
        g = Graph()
        with g.as_default():
            train, feed = build()
            sess = Session(graph=g)
            sess.run(global_variables_initializer())
            table.update(profile_ops(sess, train, feed, repeats, work=work)[0])
            sess.close()
    return table


def host_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def write_link_toml(bandwidth: float, latency: float, path: str) -> None:
    """A catalog link file ``loopback`` for the measured loopback TCP rate and latency."""
    when = datetime.date.today().isoformat()
    src = f"measured by hetbed calibrate on {when}"
    text = "\n".join(
        [
            "# This machine's loopback TCP, as measured by `hetbed calibrate`.",
            'name = "Loopback TCP (measured)"',
            'kind = "loopback"',
            f'bandwidth_bytes_per_s = {{ value = {bandwidth!r}, source = "{src}", note = "one '
            'TCP stream, 32 MiB as one message, less a round trip" }',
            f'latency_s = {{ value = {latency!r}, source = "{src}", note = "half the median round '
            'trip of a 1-byte message" }',
            "",
        ]
    )
    atomic_write(path, text)


def write_machine_toml(perf: DevicePerf, path: str) -> None:
    """A catalog device file for ``perf`` (every number sourced as measured, with the date)."""
    when = datetime.date.today().isoformat()
    src = f"measured by hetbed calibrate on {when}"

    def num(v: float, note: str) -> str:
        return f'{{ value = {v!r}, source = "{src}", note = "{note}" }}'

    text = "\n".join(
        [
            "# This machine, as measured by `hetbed calibrate`.",
            'name = "this machine (measured)"',
            'kind = "cpu"',
            f"memory_bandwidth_bytes_per_s = {num(perf.memory_bandwidth, 'out-of-place float32 add, 3 x 32 MiB')}",
            f"memory_bytes = {num(int(perf.memory_bytes), 'physical memory')}",
            f"kernel_launch_overhead_s = {num(perf.launch_overhead_s, 'executor dispatch per op')}",
            f"cores = {num(host_cores(), 'cores this process may run on')}",
            f"message_overhead_s = {num(max(perf.message_s, 1e-9), 'fitted to steps reading 0, 1 and 4 scalars across two processes (message_costs)')}",
            f"message_overhead_s_per_byte = {num(max(perf.message_s_per_byte, 1e-15), 'fitted to steps reading 1 and 8 MiB across two processes, less the loopback rate (message_costs)')}",
            f"step_overhead_s = {num(max(perf.step_s, 1e-9), 'fitted with message_overhead_s and message_latency_s to steps reading 0, 1 and 4 scalars across two processes (message_costs)')}",
            f"message_latency_s = {num(max(perf.message_latency_s, 1e-9), 'fitted with message_overhead_s and step_overhead_s (message_costs)')}",
            "",
            "[peak_flops]",
            f"float32 = {num(perf.peak_flops['float32'], 'numpy float32 GEMM 1024^3')}",
            f"float64 = {num(perf.peak_flops['float64'], 'half the float32 rate (estimate)')}",
            "",
        ]
    )
    atomic_write(path, text)


def calibrate(
    out_dir: str,
    builders: dict[str, Callable],
    repeats: int = 10,
    progress: Callable[[str], None] = print,
) -> tuple[DevicePerf, Profiled, list[Measurement]]:
    """Measure this machine (each number ``repeats`` times) and profile the training steps of
    ``builders`` (name -> function adding a step to the default graph and returning
    (train_op, feed_dict)); write ``this_machine.toml`` and ``profile.json`` into ``out_dir``.
    Returns the roofline numbers (medians), the profile and the measurements."""
    os.makedirs(out_dir, exist_ok=True)
    progress(f"measuring GEMM rate, memory bandwidth and per-op dispatch cost ({repeats} x) ...")
    perf, ms = measure(repeats)
    for m in ms:
        progress(f"  {m.name}: {m.describe()}")
    progress("measuring loopback TCP (rate and latency) ...")
    links = [loopback_link() for _ in range(max(min(repeats, 5), 1))]
    rate = Measurement("loopback TCP rate", "bytes/s", [r for r, _ in links], None, (1e-9, "GB/s"))
    lat = Measurement("loopback TCP latency", "s", [t for _, t in links], None, (1e6, "us"))
    write_link_toml(rate.median, lat.median, os.path.join(out_dir, "loopback.toml"))
    for m in (rate, lat):
        progress(f"  {m.name}: {m.describe()}")
    progress("measuring the runtime's CPU time per message and per byte (two processes) ...")
    fits = [message_costs(rate.median, lat.median, perf) for _ in range(max(min(repeats, 3), 1))]
    costs = [
        Measurement(name, "s", [getattr(f[0], attr) for f in fits], None, shown)
        for name, attr, shown in (
            ("message CPU time per end", "message_s", (1e6, "us")),
            ("message latency of the runtime", "message_latency_s", (1e6, "us")),
            ("distributed Session.run CPU time per step", "step_s", (1e6, "us")),
            ("message CPU time per byte per end", "message_s_per_byte", (1e9, "ns/byte")),
        )
    ]
    for m in costs:
        progress(f"  {m.name}: {m.describe()}")
    measured, simulated = fits[-1][1], fits[-1][2]
    for name in measured:
        progress(
            f"    check, {name} step: measured {measured[name] * 1e6:.0f} us, simulated with the "
            f"fit {simulated[name] * 1e6:.0f} us ({simulated[name] / measured[name] - 1:+.0%})"
        )
    perf = replace(perf, **{a: c.median for a, c in zip(_COST_FIELDS, costs)})
    write_machine_toml(perf, os.path.join(out_dir, "this_machine.toml"))
    ms += [rate, lat, *costs]
    progress(f"profiling the ops of {', '.join(builders)} ...")
    work: dict[str, tuple[float, float]] = {}
    table = calibrate_models(builders, repeats, work)
    prof = Profiled(
        table, Roofline(), overhead_s=perf.launch_overhead_s, device="this_machine", work=work
    )
    prof.save(os.path.join(out_dir, "profile.json"))
    progress(f"  {len(table)} op entries -> {os.path.join(out_dir, 'profile.json')}")
    noisy = [m.name for m in ms if m.noisy]
    if noisy:
        progress(
            f"NOISY: {', '.join(noisy)}: other work disturbed the measurement; rerun when the machine is quiet"
        )
    return perf, prof, ms


def load_builders(specs: Iterable[str]) -> dict[str, Callable]:
    """Training-step builders named ``module:function`` or ``path/to/file.py:function``: each
    function adds a training step to the default graph and returns ``(train_op, feed_dict)``.
    Raises ValueError naming the spec when it cannot be found or is not callable."""
    import importlib
    import importlib.util

    out: dict[str, Callable] = {}
    for spec in specs:
        where, sep, name = spec.rpartition(":")
        if not sep or not where or not name:
            raise ValueError(f"--model {spec!r}: expected module:function or file.py:function")
        try:
            if where.endswith(".py"):
                if not os.path.isfile(where):
                    raise ValueError(f"--model {spec!r}: no file {where}")
                loader = importlib.util.spec_from_file_location(f"_hetbed_model_{len(out)}", where)
                mod = importlib.util.module_from_spec(loader)
                loader.loader.exec_module(mod)
            else:
                mod = importlib.import_module(where)
        except ImportError as e:
            raise ValueError(f"--model {spec!r}: cannot import {where} ({e})") from None
        fn = getattr(mod, name, None)
        if not callable(fn):
            raise ValueError(f"--model {spec!r}: {where} has no function {name!r}")
        out[name] = fn
    return out


def predict_step(
    build: Callable, perf: DevicePerf, cost_model: Any, nic: Any = "loopback"
) -> float:
    """Simulated step time of ``build``'s training step on one device of ``perf`` (a one-task
    cluster: ``nic``, default the catalog's ``loopback`` link, carries nothing unless the
    graph names other tasks)."""
    from .cluster import Cluster
    from .session import SimSession

    c = Cluster(cost_model=cost_model)
    c.add_task("localhost", 0, cpu=perf, nic=nic)
    g = Graph()
    with g.as_default():
        train, feed = build()
        sess = SimSession(c, graph=g)
        sess.run(global_variables_initializer())
        sess.run(train, feed)
        return sess.last_record.step_time_s


def profile_and_measure(
    build: Callable,
    rounds: int = 15,
    steps_per_round: int = 4,
    work: dict[str, tuple[float, float]] | None = None,
) -> tuple[dict[str, float], Measurement]:
    """Profile table of ``build``'s step and its measured step time, interleaved: the
    Measurement holds the median of each round's timed steps (its ``median`` is the step time,
    its spread the rounds' spread) and the other processes' load; ``work`` receives each
    entry's FLOPs and bytes."""
    g = Graph()
    with g.as_default():
        train, feed = build()
        sess = Session(graph=g)
        sess.run(global_variables_initializer())
        meter = LoadMeter().start()
        table, times = profile_ops(sess, train, feed, rounds, steps_per_round, work)
        load = meter.stop()
        sess.close()
    k = max(steps_per_round, 1)
    rounds_ = [statistics.median(times[i : i + k]) for i in range(0, len(times), k)]
    return table, Measurement("step time", "s", rounds_, load)


def measure_step(build: Callable, steps: int = 40) -> float:
    """Median wall time of one training step of ``build`` on the real executor (the statistic
    the profile table uses too)."""
    g = Graph()
    with g.as_default():
        train, feed = build()
        sess = Session(graph=g)
        sess.run(global_variables_initializer())
        for _ in range(3):
            sess.run(train, feed)
        times = []
        for _ in range(steps):
            t = time.perf_counter()
            sess.run(train, feed)
            times.append(time.perf_counter() - t)
        return statistics.median(times)


__all__: Iterable[str] = [
    "calibrate",
    "load_builders",
    "loopback_link",
    "message_costs",
    "Measurement",
    "measure",
    "measure_machine",
    "profile_ops",
    "predict_step",
    "measure_step",
]
