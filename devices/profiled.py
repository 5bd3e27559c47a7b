"""The measured cost model: ``Profiled`` looks an op up in a table of seconds measured on the
real executor (``hetbed calibrate``), scales the table's entries to shapes it did not measure,
and falls back to another model (the roofline, ``costmodel.Roofline``) for the rest.
``costmodel`` holds what every cost model shares (``DevicePerf``, ``CostModel``, the cache
rule) and re-exports this module's names, so ``hetbed.devices.costmodel.Profiled`` still works.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from .costmodel import (
    CACHE_ALL_HITS,
    MATRIX_OPS,
    MIN_THREADS_WALL_S,
    ZERO_TIME_OPS,
    CostModel,
    DevicePerf,
    Roofline,
    cache_hit,
    fresh_output_seconds,
    pricing_dtype,
    roofline_seconds,
)
from .fileio import atomic_write


def profile_key(op: Any, ins: Sequence[tuple]) -> str:
    """Table key: op type, dtype, input shapes and the attrs that change the work done."""
    dtype = (
        op.inputs[0].dtype.name if op.inputs else (op.outputs[0].dtype.name if op.outputs else "")
    )
    attrs = {
        k: v
        for k, v in sorted(op.attrs.items())
        if isinstance(v, (bool, int, str, tuple))
        and k not in ("seed", "key", "tensor_name", "group_key")
    }
    return json.dumps([op.type, dtype, [list(s) for s in ins], attrs], default=str)


class Profiled(CostModel):
    """Measured seconds per (op type, dtype, input shapes, attrs); ``fallback`` for the rest.

    ``overhead_s`` is added per op: the executor's own dispatch cost, measured by calibration.
    ``work`` (key -> [FLOPs, bytes moved], recorded with the table by ``hetbed calibrate``) lets
    it price shapes it did not measure: an op missing from the table whose family (same type,
    dtype and attrs) has measured entries takes ``a + b x w``, where ``w`` is the roofline time
    of its FLOPs and bytes on the device and ``a``, ``b`` are fitted by least squares to the
    family's measured (w, seconds) pairs (``a`` the fixed cost of a call, ``b`` the inverse of
    the fraction of the roofline achieved). The slope holds where it was measured: when every
    entry's roofline time is below the fixed cost (tiny shapes, where the slope is noise) ``b``
    is 1, and an op whose bytes outgrow the device's cache (``cache_bytes``) while every entry's
    fit in it takes ``a`` plus the slower of its own speed (``b`` times its roofline time were
    every byte a cache hit) and the roofline's time from memory: the roofline's max, where a
    slope read in the cache times the memory's time (as before) priced a 100 MB float32 sum,
    which numpy runs at its in-cache speed (about 20 GB/s here, under the memory's 28), at
    13-16 ms against 5 measured. A family measured at one size only keeps the fixed
    cost of a call that the table's tiny entries show (the median of those moving at most 4 KiB
    and 10,000 FLOPs, ``call_s``) and scales the rest with the work, unless its work is below
    that fixed cost: then what it took is its own fixed cost (``affine_fit``). Only families with no
    measured entry fall back to ``fallback``.

    ``threads`` (key -> the process's CPU seconds per wall second while the op ran, measured
    with the table) says how many of a host's cores a kernel keeps busy (``cores_used``): the
    runtime's intra-op kernels use them all, numpy's elementwise ones one, so that two tasks of
    one host run their single-threaded kernels side by side. An unmeasured entry of a measured
    family takes the family's median.

    ``cache_bytes`` is the last-level cache the table was measured with (the whole of it: one
    process; ``hetbed calibrate`` records it). The family fits relate the measured times to the
    roofline with that cache, and a task given a smaller share of it (``DevicePerf.cache_share``:
    tasks of one host) runs a measured entry whose bytes fit the whole cache but not its share
    in at least the roofline's time with the share (measured here: a 10 MB float32 multiply 0.40
    ms with the cache warm, 0.62-0.70 ms after another 64 MB went through it). Without it (older
    profiles) the fits use the task's own cache, which cancels the share out.
    """

    def __init__(
        self,
        table: dict[str, float],
        fallback: CostModel | None = None,
        overhead_s: float = 0.0,
        device: str = "",
        work: dict[str, Sequence[float]] | None = None,
        threads: dict[str, float] | None = None,
        cache_bytes: float | None = None,
    ):
        self.table = table
        self.cache_bytes = cache_bytes
        self.threads = {k: float(v) for k, v in (threads or {}).items()}
        self._family_threads: dict[str, float] = {}
        by_family: dict[str, list[float]] = {}
        for k, v in self.threads.items():
            by_family.setdefault(_family(k), []).append(v)
        for fam, vs in by_family.items():
            vs.sort()
            self._family_threads[fam] = vs[len(vs) // 2]
        self.fallback = fallback or Roofline()
        self.overhead_s = overhead_s
        self.device = device
        self.work = {k: (float(v[0]), float(v[1])) for k, v in (work or {}).items()}
        self.hits = 0
        self.misses = 0
        self.scaled = 0
        self._families: dict[str, list[tuple[tuple[float, float], float]]] = {}
        for k, t in table.items():
            if k in self.work:
                self._families.setdefault(_family(k), []).append((self.work[k], t))
        self._fits: dict[tuple, tuple[float, float] | None] = {}
        self._reaches: dict[tuple, tuple[float, float]] = {}
        tiny = sorted(t for k, t in table.items() if k in self.work and _is_tiny(*self.work[k]))
        self.call_s = tiny[len(tiny) // 2] if tiny else 0.0

    def duration(
        self, op: Any, ins: Sequence[tuple], outs: Sequence[tuple], perf: DevicePerf
    ) -> float:
        key = profile_key(op, ins)
        t = self.table.get(key)
        if t is not None:
            self.hits += 1
            return self._with_cache_share(t, key, op, perf) + self.overhead_s
        self.misses += 1
        if op.type not in ZERO_TIME_OPS and self._families:
            fam = _family(key)
            if fam in self._families:
                dtype, matrix = pricing_dtype(op), op.type in MATRIX_OPS
                fit = self._fit(fam, perf, dtype, matrix)
                if fit is not None:
                    c = op.op_def.cost_fn(op, list(ins), list(outs))
                    moved = c.bytes_read + c.bytes_written
                    w = roofline_seconds(c.flops, moved, perf, dtype, matrix)
                    a, b = fit
                    most_w, most_bytes = self._reach(fam, perf, dtype, matrix)
                    if most_w < a:
                        b = 1.0  # every entry is mostly its call's fixed cost: no slope to read
                    elif (
                        perf.cache_bytes
                        and most_bytes <= self._measured(perf).cache_bytes
                        and perf.cache_bytes < moved
                    ):
                        # measured in the cache only, the fit gives the kernel's own speed: its
                        # time with its bytes hitting the cache as the largest entry's did; out
                        # of it the memory may be slower still
                        hit = cache_hit(most_bytes, self._measured(perf).cache_bytes)
                        peak = perf.peak(dtype, matrix)
                        own = max(
                            c.flops / peak if peak > 0 else 0.0, perf.sweep_seconds(moved, hit)
                        )
                        w = max(b * own, w)
                        b = 1.0
                    self.scaled += 1
                    return a + b * w + fresh_output_seconds(op, outs, perf) + self.overhead_s
        return self.fallback.duration(op, ins, outs, perf) + self.overhead_s

    def _measured(self, perf: DevicePerf) -> DevicePerf:
        """``perf`` with the cache the table was measured with (itself when unknown)."""
        if not self.cache_bytes or not perf.cache_bytes or perf.cache_bytes == self.cache_bytes:
            return perf
        return replace(perf, cache_bytes=self.cache_bytes)

    def _with_cache_share(self, t: float, key: str, op: Any, perf: DevicePerf) -> float:
        """A measured entry's ``t`` with ``perf``'s share of the cache: ``t`` unless the share
        is smaller than the whole cache it was measured with and the entry's bytes (``work``)
        no longer all hit it (over ``CACHE_ALL_HITS`` of it); then at least the roofline's time
        with the share (the kernel's own speed, what it took from the cache, or the memory's,
        whichever is slower)."""
        whole = self._measured(perf)
        if whole is perf or key not in self.work or perf.cache_bytes >= whole.cache_bytes:
            return t
        flops, moved = self.work[key]
        if moved <= CACHE_ALL_HITS * perf.cache_bytes:
            return t
        dtype, matrix = pricing_dtype(op), op.type in MATRIX_OPS
        return max(t, roofline_seconds(flops, moved, perf, dtype, matrix))

    @property
    def short_kernel_s(self) -> float | None:
        """Kernels predicted shorter than this run on one core where nothing was measured of
        their shape or family (``devices.simulated.measured_cores``): as the measured ones that
        short did (``cores_used``), a process's numpy kernels run on the calling thread unless a
        thread pool splits them, and the pools split only work that takes longer
        (runtime/ops/intraop.py). None for a profile without threads measured (older ones)."""
        return MIN_THREADS_WALL_S if self.threads else None

    def cores_used(self, op: Any, ins: Sequence[tuple]) -> float | None:
        """The cores the measured kernel kept busy (``threads``), else its family's measured
        threads; else one for a kernel measured shorter than ``MIN_THREADS_WALL_S`` (too short
        for its threads to be measured, and run on the calling thread: a process's numpy
        kernels are, unless a thread pool splits them, which a family measured longer shows);
        None where nothing was measured (the device's rule)."""
        if not self.threads:
            return None
        key = profile_key(op, ins)
        v = self.threads.get(key)
        if v is None:
            v = self._family_threads.get(_family(key))
        if v is None:
            t = self.table.get(key)
            if t is not None and t < MIN_THREADS_WALL_S:
                return 1.0
        return v

    def _reach(self, fam: str, perf: DevicePerf, dtype: str, matrix: bool) -> tuple[float, float]:
        """(largest roofline seconds, largest bytes moved) among the family's measured entries:
        how far its fit was measured."""
        k = (fam, perf.name, perf.cache_bytes, dtype, matrix)
        if k not in self._reaches:
            pts, at = self._families[fam], self._measured(perf)
            self._reaches[k] = (
                max(roofline_seconds(f, b, at, dtype, matrix) for (f, b), _ in pts),
                max(b for (_, b), _ in pts),
            )
        return self._reaches[k]

    def _fit(
        self, fam: str, perf: DevicePerf, dtype: str, matrix: bool
    ) -> tuple[float, float] | None:
        k = (fam, perf.name, perf.cache_bytes, matrix)
        if k not in self._fits:
            at = self._measured(perf)  # (the entries ran with the whole cache)
            pts = [
                (roofline_seconds(f, b, at, dtype, matrix), t) for (f, b), t in self._families[fam]
            ]
            self._fits[k] = affine_fit(pts, self.call_s)
        return self._fits[k]

    def save(self, path: str) -> None:
        """Write the table (and the work of each entry) as JSON (atomically)."""
        doc = {
            "format": "hetbed-profile",
            "version": 3,
            "device": self.device,
            "overhead_s": self.overhead_s,
            "table": self.table,
            "work": {k: list(v) for k, v in self.work.items()},
            "threads": self.threads,
            "cache_bytes": self.cache_bytes,
        }
        atomic_write(path, json.dumps(doc, indent=0, sort_keys=True))

    @classmethod
    def load(cls, path: str, fallback: CostModel | None = None) -> Profiled:
        """Read a table written by ``save`` (version 1 has no work: no scaling to new shapes;
        versions 1 and 2 no threads: the device's rule); raises ValueError naming the file
        when malformed."""
        try:
            with open(path) as f:
                doc = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not a profile table ({e})") from None
        if doc.get("format") != "hetbed-profile" or doc.get("version") not in (1, 2, 3):
            raise ValueError(f"{path}: not a hetbed-profile version 1, 2 or 3 file")
        threads = doc.get("threads") or {}
        bad = [k for k, v in threads.items() if not isinstance(v, (int, float)) or not v >= 1.0]
        if bad:
            raise ValueError(f"{path}: threads[{bad[0]!r}] must be a number >= 1")
        return cls(
            dict(doc["table"]),
            fallback,
            float(doc.get("overhead_s", 0.0)),
            doc.get("device", ""),
            doc.get("work"),
            threads,
            doc.get("cache_bytes"),
        )


def _is_tiny(flops: float, moved: float) -> bool:
    return flops <= 1e4 and moved <= 4096


def _family(key: str) -> str:
    """A profile key without its shapes: the entries one op's measurements can price."""
    op_type, dtype, _shapes, attrs = json.loads(key)
    return json.dumps([op_type, dtype, attrs])


def affine_fit(
    points: Sequence[tuple[float, float]], call_s: float = 0.0
) -> tuple[float, float] | None:
    """(a, b) >= 0 with t ~ a + b w by least squares over (w, t) points; None without a point.
    No point of positive work (a view, whose cost moves no bytes: a broadcast measured at 11-44
    us a call here, which the roofline priced at nothing): the median t is the fixed cost, b = 1
    (the work, if any, on top). One distinct w: a = the fixed cost of a call ``call_s`` (at most t) and
    b = (t - a) / w; but where that w is below ``call_s`` (work too small to read a slope from)
    what the point took beyond its w is the op's own fixed cost: a = t - w, b = 1 (a sparse
    accumulator's apply took 68 us with 0.5 us of work, which ``call_s`` of 4 us and the work
    scaled priced at 4.6 us for half the rows)."""
    pts = [(w, t) for w, t in points if w > 0]
    if not pts:
        ts = sorted(t for _, t in points)
        return (ts[len(ts) // 2], 1.0) if ts else None
    ws = [w for w, _ in pts]
    ts = [t for _, t in pts]
    if max(ws) - min(ws) <= 1e-12 * max(ws):
        w0, t0 = sum(ws) / len(ws), sorted(ts)[len(ts) // 2]
        if w0 < call_s:
            return (max(t0 - w0, 0.0), 1.0)
        a = min(call_s, t0)
        return (a, (t0 - a) / w0)
    mw, mt = sum(ws) / len(ws), sum(ts) / len(ts)
    b = sum((w - mw) * (t - mt) for w, t in pts) / sum((w - mw) ** 2 for w in ws)
    a = mt - b * mw
    if b < 0:
        return (sorted(ts)[len(ts) // 2], 0.0)
    if a < 0:
        return (0.0, sum(w * t for w, t in pts) / sum(w * w for w in ws))
    return (a, b)
