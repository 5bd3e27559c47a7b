"""This machine measured: repeated measurements with their spread and the load other processes
put on the machine meanwhile (``Measurement``, ``LoadMeter``), and the roofline's numbers (float32
GEMM FLOP/s, streaming memory bandwidth, the executor's per-op dispatch cost) as a ``DevicePerf``
(``measure``). ``hetbed calibrate`` (calibrate.py) writes them into a catalog device file."""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from hetbed.devices.costmodel import DevicePerf
from hetbed.runtime import dtypes
from hetbed.runtime.graph import Graph
from hetbed.runtime.ops.array import constant, placeholder
from hetbed.runtime.ops.data_flow import FIFOQueue
from hetbed.runtime.session import Session


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
    """Bytes/s of an out-of-place float32 add of two ``n``-element arrays into a third (its
    working set: 12 n bytes)."""
    a = np.ones(n, np.float32)
    b = np.ones(n, np.float32)
    out = np.empty_like(a)
    return 3.0 * 4 * n / best_of(lambda: np.add(a, b, out=out))


def last_level_cache() -> int | None:
    """Bytes of this machine's largest CPU cache (Linux's sysfs, else sysconf); None unknown."""
    best = 0
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in os.listdir(base):
            try:
                with open(os.path.join(base, entry, "size")) as f:
                    text = f.read().strip().upper()
            except OSError:
                continue
            mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            digits = text.rstrip("KMG")
            if digits.isdigit():
                best = max(best, int(digits) * mult)
    except OSError:
        pass
    if not best:
        try:
            best = int(os.sysconf("SC_LEVEL3_CACHE_SIZE") or os.sysconf("SC_LEVEL2_CACHE_SIZE"))
        except (ValueError, OSError, AttributeError):
            best = 0
    return best if best > 0 else None


def cache_bandwidth(cache: int) -> float:
    """Bytes/s of ``stream_bandwidth`` over a working set of a quarter of the cache."""
    return stream_bandwidth(max(cache // 48, 1 << 12))


def memory_bandwidth(cache: int | None) -> float:
    """Bytes/s of memory: ``stream_bandwidth`` over a working set of 8 x ``cache`` (at least
    96 MiB), none of which a sweep finds in the cache (``costmodel.cache_hit``): the rate as it
    is."""
    if not cache:
        return stream_bandwidth()
    return stream_bandwidth(max(8 * cache, 96 << 20) // 12)


#: glibc's largest mmap threshold on a 64-bit build (mallopt(3), DEFAULT_MMAP_THRESHOLD_MAX:
#: 4 MiB x sizeof(long)): its threshold rises to the size of the largest block freed up to this,
#: so that a steady-state program reuses blocks below it and gets new pages for every one above
GLIBC_MMAP_THRESHOLD_MAX = 32 << 20


def fresh_memory_cost(nbytes: int = 4 * GLIBC_MMAP_THRESHOLD_MAX) -> float | None:
    """Seconds per byte of a new array over the allocator's threshold beyond a reused one: an
    out-of-place float32 add of ``nbytes`` into the new output a kernel allocates less the same
    add into a buffer allocated once (the pages' faults and zeroing). None where the C library
    is not glibc. (A ufunc writing its output, as the runtime's kernels do: a copy into a new
    ``np.empty`` costs a quarter of that here, 14-24 against 70-100 ps a byte, and priced a
    64 MiB multiply 30% under its measured 11.5 ms.)"""
    if platform.libc_ver()[0] != "glibc":
        return None
    n = nbytes // 4
    src = np.ones(n, np.float32)
    buf = np.empty_like(src)
    fresh = best_of(lambda: np.add(src, src), repeat=3, number=2)
    reused = best_of(lambda: np.add(src, src, out=buf), repeat=3, number=2)
    return max(fresh - reused, 0.0) / nbytes


def dispatch_overhead(n_ops: int = 1000, clocked: bool = False) -> float:
    """Seconds the executor adds per op beyond the kernel itself (a chain of tiny adds).

    ``clocked``: on the executor's clocked schedule, which every partition of a distributed
    step runs (its Send/Recv are asynchronous kernels): the chain starts from a queue's
    dequeue, an asynchronous kernel too, whose own cost is spread over the ``n_ops`` adds."""
    g = Graph()
    with g.as_default():
        x = placeholder(dtypes.float32, [4])
        one = constant(np.ones(4, np.float32))
        y = x
        if clocked:
            q = FIFOQueue(2, [dtypes.float32], shapes=[[4]])
            put, y = q.enqueue([x]), q.dequeue()
        for _ in range(n_ops):
            y = y + one
        sess = Session(graph=g)
        xv = np.zeros(4, np.float32)
        if clocked:
            total = best_of(lambda: (sess.run(put, {x: xv}), sess.run(y)), repeat=5, number=10)
        else:
            total = best_of(lambda: sess.run(y, {x: xv}), repeat=5, number=10)
        a, o = np.zeros(4, np.float32), np.ones(4, np.float32)
        kernel = best_of(lambda: [np.add(a, o) for _ in range(n_ops)], repeat=5, number=10)
    # (no less than the clock's resolution: where the executor costs about what calling the
    # kernels directly does, noise can make the difference 0 or less, and a catalog entry's
    # dispatch cost must be positive)
    return max(total - kernel, time.get_clock_info("perf_counter").resolution) / n_ops


def measure(repeats: int = 5) -> tuple[DevicePerf, list[Measurement]]:
    """This machine's roofline numbers, each the median of ``repeats`` measurements, and the
    measurements (min/median/max and the other processes' load while each ran)."""
    cache = last_level_cache()
    ms = [
        repeated("float32 GEMM 1024^3", "FLOP/s", gemm_flops, repeats, (1e-9, "GFLOP/s")),
        repeated(
            "memory bandwidth (float32 add)",
            "bytes/s",
            lambda: memory_bandwidth(cache),
            repeats,
            (1e-9, "GB/s"),
        ),
        repeated(
            "cache bandwidth (float32 add, a quarter of the cache)",
            "bytes/s",
            lambda: cache_bandwidth(cache) if cache else 0.0,
            repeats,
            (1e-9, "GB/s"),
        ),
        repeated(
            "new pages of an array over 32 MiB",
            "s/byte",
            lambda: fresh_memory_cost() or 0.0,
            repeats,
            (1e12, "ps/byte"),
        ),
        repeated("executor dispatch per op", "s", dispatch_overhead, repeats, (1e6, "us/op")),
        repeated(
            "executor dispatch per op, clocked schedule",
            "s",
            lambda: dispatch_overhead(clocked=True),
            repeats,
            (1e6, "us/op"),
        ),
    ]
    flops, bw, cache_bw, fresh, dispatch, clocked = (m.median for m in ms)
    if not cache:
        ms = [m for m in ms if not m.name.startswith("cache bandwidth")]
    glibc = platform.libc_ver()[0] == "glibc"
    if not glibc:
        ms = [m for m in ms if not m.name.startswith("new pages")]
    perf = DevicePerf(
        "this_machine",
        {"float32": flops, "float64": flops / 2},
        memory_bandwidth=bw,
        cache_bytes=float(cache) if cache else None,
        cache_bandwidth=cache_bw if cache else None,
        fresh_threshold_bytes=float(GLIBC_MMAP_THRESHOLD_MAX) if glibc else None,
        fresh_s_per_byte=fresh if glibc else 0.0,
        memory_bytes=float(_host_memory()),
        launch_overhead_s=dispatch,
        clocked_launch_overhead_s=clocked,
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


def host_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
