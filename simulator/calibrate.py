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

#: (scalar tensors read across tasks in one step, bytes of the tensor read in another step)
MESSAGE_STEPS = ((1, 16), (1 << 20, 8 << 20))


def message_costs(
    link_bytes_per_s: float, steps: int = 150
) -> tuple[float, float, dict[str, float]]:
    """CPU time per message end and per payload byte of hetbed's distributed runtime, fitted to
    steps between two processes of this machine (a PS task in a child process, a worker task
    here; the default protocol), and the steps measured (median seconds).

    The simulator's model of a tensor crossing tasks (``SimRendezvous``): a RecvTensor call, two
    messages handled one after another by each end's runtime, the payload serialized by the
    sender before it crosses the link and deserialized by the receiver after. So, reading K
    scalars from the PS in one step costs 2 x ``message_s`` more per added scalar (the ends work
    in parallel), and reading N bytes costs N x (2 x ``per_byte`` + 1 / link rate) more per
    added byte: ``message_s`` = the slope in K / 2, ``per_byte`` = (the slope in N - 1 / link
    rate) / 2 (at least 0). Runs no training step.
    """
    import socket
    import subprocess
    import sys

    import hetbed as hb

    def free_port() -> int:
        with socket.socket() as sk:
            sk.bind(("127.0.0.1", 0))
            return sk.getsockname()[1]

    spec = {"ps": [f"127.0.0.1:{free_port()}"], "worker": [f"127.0.0.1:{free_port()}"]}
    peer = subprocess.Popen([sys.executable, "-c", _PS_TASK.format(spec=spec)])
    server = None
    try:
        server = hb.train.Server(hb.train.ClusterSpec(spec), "worker", 0)
        (k_lo, k_hi), (n_lo, n_hi) = MESSAGE_STEPS
        g = Graph()
        fetch = {}
        with g.as_default():
            for k in (k_lo, k_hi):
                with hb.device("/job:ps/task:0"):
                    vs = [hb.Variable(np.zeros(1, np.float32)) for _ in range(k)]
                with hb.device("/job:worker/task:0"):
                    fetch[f"{k} scalar(s)"] = hb.add_n([v * 1.0 for v in vs])
            for n in (n_lo, n_hi):
                with hb.device("/job:ps/task:0"):
                    big = hb.Variable(np.zeros(n // 4, np.float32))
                with hb.device("/job:worker/task:0"):
                    fetch[f"{n} bytes"] = big[0] * 1.0
            init = global_variables_initializer()
        deadline = time.monotonic() + 60
        while True:  # the PS process needs a moment to start serving
            try:
                sess = hb.Session(server.target, graph=g, connect_timeout_s=1.0)
                break
            except Exception:  # noqa: BLE001 - not up yet
                if time.monotonic() > deadline or peer.poll() is not None:
                    raise RuntimeError(
                        "the PS task process of the message calibration did not start"
                    )
                time.sleep(0.2)
        try:
            sess.run(init)
            got = {}
            for name, f in fetch.items():
                for _ in range(10):
                    sess.run(f)
                ts = []
                for _ in range(steps):
                    t = time.perf_counter()
                    sess.run(f)
                    ts.append(time.perf_counter() - t)
                got[name] = statistics.median(ts)
        finally:
            sess.close()
    finally:
        peer.kill()
        peer.wait(timeout=30)
        if server is not None:
            server.stop()
    per_scalar = (got[f"{k_hi} scalar(s)"] - got[f"{k_lo} scalar(s)"]) / (k_hi - k_lo)
    per_byte = (got[f"{n_hi} bytes"] - got[f"{n_lo} bytes"]) / (n_hi - n_lo)
    message_s = max(per_scalar / 2, 0.0)
    byte_s = max((per_byte - 1.0 / link_bytes_per_s) / 2, 0.0)
    return message_s, byte_s, got


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
            f"message_overhead_s = {num(max(perf.message_s, 1e-9), 'fitted to steps reading 1 and 16 scalars across two processes (message_costs)')}",
            f"message_overhead_s_per_byte = {num(max(perf.message_s_per_byte, 1e-15), 'fitted to steps reading 1 and 8 MiB across two processes, less the loopback rate (message_costs)')}",
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
    costs = [message_costs(rate.median) for _ in range(max(min(repeats, 3), 1))]
    msg = Measurement("message CPU time per end", "s", [c[0] for c in costs], None, (1e6, "us"))
    per_byte = Measurement(
        "message CPU time per byte per end", "s", [c[1] for c in costs], None, (1e9, "ns/byte")
    )
    for m in (msg, per_byte):
        progress(f"  {m.name}: {m.describe()}")
    perf = replace(perf, message_s=msg.median, message_s_per_byte=per_byte.median)
    write_machine_toml(perf, os.path.join(out_dir, "this_machine.toml"))
    ms += [rate, lat, msg, per_byte]
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
