"""Flow-level network model: links with bandwidth and latency, flows sharing them max-min fairly.

This is the fluid model of flow-level simulators. A flow over a path of links first waits the
path's latency (the sum of its links' latencies: propagation, which shares no bandwidth), then
sends its bytes at a rate set by max-min fairness among all flows transferring at that moment
(progressive filling over the links each flow crosses). Rates change only when a flow starts or
ends; at each such instant the remaining bytes of the affected flows are advanced at their old
rates and the rates of the flows that share a link, directly or through other flows, with the
changed ones (their connected component) are recomputed. Flows elsewhere keep their rates.

Cost: one recomputation per instant at which flows start or end (arrivals at the same instant are
batched), O(flows x links-per-flow x log) in the affected component, and a single pending
"next completion" timer per network; stale timers are recognised by a version counter and ignored.

Units: bytes, seconds, bytes per second. Every finished flow appends a flat record (see
``FLOW_COLUMNS``) to ``Network.records``; ``flow_frame()`` and ``link_frame()`` return them as
pandas DataFrames.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable
from typing import Any

import pandas as pd
import simpy

__all__ = ["FLOW_COLUMNS", "LINK_COLUMNS", "Link", "Network"]

FLOW_COLUMNS = ("src", "dst", "tag", "bytes", "start_s", "first_byte_s", "end_s", "path")
LINK_COLUMNS = ("link", "bandwidth_bytes_per_s", "latency_s", "bytes", "busy_s", "utilization")

# A flow with less than this fraction of its bytes left is complete (floating-point residue).
_REL_EPS = 1e-12


def _time_tol(t: float) -> float:
    """Slack for comparing instants: a few units in the last place of ``t``."""
    return 4.0 * math.ulp(max(abs(t), 1.0))


class Link:
    """One direction of a physical link (a full-duplex cable is two Links).

    Create Links with ``Network.add_link`` so that the network accounts for them.
    Raises ValueError for a bandwidth that is not finite and positive or a negative latency.
    """

    __slots__ = ("name", "bandwidth_bytes_per_s", "latency_s", "_index", "_flows", "_load")
    __slots__ += ("_since", "_bytes", "_busy_s")

    def __init__(self, name: str, bandwidth_bytes_per_s: float, latency_s: float = 0.0):
        bw, lat = float(bandwidth_bytes_per_s), float(latency_s)
        if not (math.isfinite(bw) and bw > 0):
            raise ValueError(f"link {name!r}: bandwidth must be finite and > 0 bytes/s, got {bw!r}")
        if not (math.isfinite(lat) and lat >= 0):
            raise ValueError(f"link {name!r}: latency must be finite and >= 0 s, got {lat!r}")
        self.name = str(name)
        self.bandwidth_bytes_per_s = bw
        self.latency_s = lat
        self._index = -1  # creation order in its network: deterministic tie-breaking
        self._flows: dict[_Flow, None] = {}  # flows transferring now, in arrival order
        self._load = 0.0  # sum of their rates, valid since ``_since``
        self._since = 0.0
        self._bytes = 0.0  # carried up to ``_since``
        self._busy_s = 0.0  # time with at least one flow transferring, up to ``_since``

    @property
    def active_flows(self) -> int:
        """How many flows are transferring over this link now (not counting their latency)."""
        return len(self._flows)

    def _settle(self, now: float) -> None:
        """Account the bytes and busy time carried at the current load up to ``now``."""
        dt = now - self._since
        if self._load > 0 and dt > 0:
            self._bytes += self._load * dt
            self._busy_s += dt
        self._since = now

    def __repr__(self) -> str:
        return (
            f"Link({self.name!r}, bandwidth_bytes_per_s={self.bandwidth_bytes_per_s!r}, "
            f"latency_s={self.latency_s!r})"
        )


class _Flow:
    __slots__ = ("seq", "path", "size", "remaining", "rate", "t0", "finish_s", "version")
    __slots__ += ("done", "record")

    def __init__(self, seq: int, path: tuple[Link, ...], size: float, done: Callable, record: dict):
        self.seq = seq
        self.path = path
        self.size = size
        self.remaining = size  # bytes left at time ``t0``
        self.rate = 0.0
        self.t0 = 0.0
        self.finish_s = math.inf
        self.version = 0  # bumped at each new rate; -1 once finished
        self.done = done  # called with the record at the last byte
        self.record = record


class Network:
    """A set of Links and the flows crossing them, on the clock of a SimPy environment."""

    def __init__(self, env: simpy.Environment):
        self.env = env
        self.links: dict[str, Link] = {}
        self.records: list[dict[str, Any]] = []
        self._checked_paths: dict[tuple, str] = {}  # validated paths -> their names
        self.recomputations = 0  # rate recomputations so far (for benchmarks)
        self._seq = 0
        self._active = 0
        self._dirty: dict[Link, None] = {}  # links whose flow set changed since the last rates
        self._recompute_pending = False
        self._finish: list[tuple[float, int, int, _Flow]] = []  # (finish_s, seq, version, flow)
        self._timer_version = 0
        self._timer_at: float | None = None

    # ---- building -------------------------------------------------------------------------

    def add_link(self, name: str, bandwidth: float, latency: float = 0.0) -> Link:
        """Create a Link in this network (bytes/s, seconds); raises ValueError on a duplicate name."""
        if name in self.links:
            raise ValueError(f"link {name!r} already exists in this network")
        link = Link(name, bandwidth, latency)
        link._index = len(self.links)
        link._since = self.env.now
        self.links[link.name] = link
        return link

    @property
    def active_flows(self) -> int:
        """Flows transferring now (past their latency, not yet finished)."""
        return self._active

    # ---- flows ----------------------------------------------------------------------------

    def transfer(
        self,
        path: Iterable[Link],
        nbytes: float,
        src: str = "",
        dst: str = "",
        tag: Any = None,
        on_done: Callable[[dict], None] | None = None,
    ) -> simpy.Event | None:
        """Send ``nbytes`` over ``path``; the event succeeds, with the flow's record, at the last byte.

        With ``on_done``, no event is made: ``on_done(record)`` is called at the last byte instead
        (and ``None`` is returned), which saves a SimPy event per flow.

        An empty path is a hand-off in place: it completes at once. A zero-byte flow completes
        after the path's latency. Raises ValueError for a negative or non-finite size, a link of
        another network, or a path that crosses a link twice.
        """
        path = tuple(path)  # (a tuple is taken as it is)
        size = float(nbytes)
        if not (math.isfinite(size) and size >= 0):
            raise ValueError(
                f"flow {src!r}->{dst!r}: bytes must be finite and >= 0, got {nbytes!r}"
            )
        joined = self._checked_paths.get(path)
        if joined is None:
            joined = self._check_path(path, src, dst)
        now = self.env.now
        record = {
            "src": src,
            "dst": dst,
            "tag": tag,
            "bytes": nbytes,
            "start_s": now,
            "first_byte_s": math.nan,
            "end_s": math.nan,
            "path": joined,
        }
        event = self.env.event() if on_done is None else None
        flow = _Flow(self._seq, path, size, event.succeed if on_done is None else on_done, record)
        self._seq += 1
        latency = 0.0
        for link in path:
            latency += link.latency_s
        if latency > 0:
            self.env.timeout(latency).callbacks.append(lambda _ev: self._arrive(flow))
        else:
            self._arrive(flow)
        return event

    def _check_path(self, path: tuple, src: str, dst: str) -> str:
        """Validate a path once (links of this network, none twice); returns its name."""
        for link in path:
            if not isinstance(link, Link) or self.links.get(link.name) is not link:
                raise ValueError(
                    f"flow {src!r}->{dst!r}: {link!r} is not a link of this network "
                    "(create links with Network.add_link)"
                )
        if len({id(link) for link in path}) != len(path):
            names = [link.name for link in path]
            raise ValueError(f"flow {src!r}->{dst!r}: path crosses a link twice: {names}")
        joined = self._checked_paths[path] = ">".join(link.name for link in path)
        return joined

    def _arrive(self, flow: _Flow) -> None:
        now = self.env.now
        flow.record["first_byte_s"] = now
        if flow.size == 0 or not flow.path:
            self._finish_flow(flow, now)
            return
        flow.t0 = now
        self._active += 1
        path = flow.path
        for link in path:
            if link._flows:
                break
        else:  # every link idle: the flow is alone in its component and gets the narrowest link
            self._start_alone(flow, now)
            return
        for link in path:
            link._flows[flow] = None
            self._dirty[link] = None
        self._request_recompute()

    def _start_alone(self, flow: _Flow, now: float) -> None:
        """Rate a flow that arrives on idle links at once: what the max-min recomputation at
        this instant would give it (its narrowest link). A flow arriving later at the same
        instant on one of these links makes the links dirty and the usual recomputation re-rates
        both; no time has passed, so nothing is lost."""
        rate = math.inf
        for link in flow.path:
            link._settle(now)  # a flow may have finished here at this instant
            link._flows[flow] = None
            if link.bandwidth_bytes_per_s < rate:
                rate = link.bandwidth_bytes_per_s
        for link in flow.path:
            link._load = rate
        flow.rate = rate
        flow.version += 1
        flow.finish_s = now + flow.remaining / rate
        heapq.heappush(self._finish, (flow.finish_s, flow.seq, flow.version, flow))
        self._arm_timer()

    def _finish_flow(self, flow: _Flow, now: float) -> None:
        """Take ``flow`` off its links (their rates are recomputed at this instant) and report it."""
        if flow.path and flow in flow.path[0]._flows:  # it was transferring (not zero bytes)
            self._active -= 1
            for link in flow.path:
                del link._flows[flow]
                self._dirty[link] = None
        flow.version = -1
        flow.record["end_s"] = now
        self.records.append(flow.record)
        flow.done(flow.record)  # an event's succeed, or the caller's on_done, at once

    def _request_recompute(self) -> None:
        # A zero delay timeout runs after every event already queued for this instant, so that
        # flows arriving together share one recomputation; no time passes in between.
        if not self._recompute_pending:
            self._recompute_pending = True
            self.env.timeout(0).callbacks.append(self._recompute)

    # ---- rates ----------------------------------------------------------------------------

    def _recompute(self, _event: Any = None) -> None:
        self._recompute_pending = False
        self.recomputations += 1
        now = self.env.now
        tol = _time_tol(now)
        links, flows = self._component(list(self._dirty))
        self._dirty.clear()
        for link in links:  # account for the old rates up to now
            link._settle(now)
            link._load = 0.0
        live = []
        for f in flows:  # advance remaining bytes at the old rates
            f.remaining -= f.rate * (now - f.t0)
            f.t0 = now
            if f.remaining <= f.size * _REL_EPS or f.finish_s <= now + tol:
                self._finish_flow(f, now)
            else:
                live.append(f)
        self._dirty.clear()  # finishing here touched only links of this component
        rates = _max_min_rates(links, live)
        heap = self._finish
        for f in live:
            rate = rates[f]
            if rate != f.rate:  # an unchanged rate keeps its finish time and heap entry
                if not rate > 0:
                    raise RuntimeError(f"flow {f.record['path']!r} got a rate of {rate!r} bytes/s")
                f.rate = rate
                f.version += 1
                f.finish_s = now + f.remaining / rate
                heapq.heappush(heap, (f.finish_s, f.seq, f.version, f))
            for link in f.path:
                link._load += rate
        if len(heap) > 2 * self._active + 64:  # drop stale entries (one live entry per flow)
            heap[:] = [e for e in heap if e[2] == e[3].version]
            heapq.heapify(heap)
        self._arm_timer()

    @staticmethod
    def _component(seeds: list[Link]) -> tuple[list[Link], list[_Flow]]:
        """The links and flows connected to ``seeds`` through shared links, in discovery order."""
        seen = dict.fromkeys(seeds)
        links = list(seen)
        flows: dict[_Flow, None] = {}
        i = 0
        while i < len(links):
            for f in links[i]._flows:
                if f not in flows:
                    flows[f] = None
                    for other in f.path:
                        if other not in seen:
                            seen[other] = None
                            links.append(other)
            i += 1
        return links, list(flows)

    def _arm_timer(self) -> None:
        heap = self._finish
        while heap and heap[0][2] != heap[0][3].version:
            heapq.heappop(heap)  # a rate changed since, or the flow finished
        at = heap[0][0] if heap else None
        if at == self._timer_at:
            return
        self._timer_version += 1
        self._timer_at = at
        if at is not None:
            delay = max(0.0, at - self.env.now)
            self.env.timeout(delay).callbacks.append(_Timer(self, self._timer_version))

    def _on_timer(self, version: int) -> None:
        if version != self._timer_version:
            return  # stale: rates changed after this timer was set
        self._timer_at = None
        now = self.env.now
        limit = now + _time_tol(now)
        heap = self._finish
        done = []
        while heap and heap[0][0] <= limit:
            _, _, v, f = heapq.heappop(heap)
            if v == f.version:
                done.append(f)
        for f in done:
            self._finish_flow(f, now)
        if not done:
            self._arm_timer()
            return
        dirty = self._dirty
        for link in dirty:
            if link._flows:  # flows left on a changed link: re-rate its component
                self._request_recompute()
                return
        for link in dirty:  # the finished flows had their links to themselves: close the books
            link._settle(now)
            link._load = 0.0
        dirty.clear()
        self._arm_timer()

    # ---- results --------------------------------------------------------------------------

    def flow_frame(self) -> pd.DataFrame:
        """One row per finished flow: src, dst, tag, bytes, start_s (request), first_byte_s
        (after the path latency), end_s (last byte), path (link names joined by '>')."""
        return pd.DataFrame(self.records, columns=list(FLOW_COLUMNS))

    def carried_bytes(self) -> dict[str, float]:
        """Bytes each link has carried so far (cheaper than ``link_frame`` for per-step diffs)."""
        now = self.env.now
        return {
            name: link._bytes + link._load * (now - link._since)
            for name, link in self.links.items()
        }

    def link_frame(self, horizon_s: float | None = None) -> pd.DataFrame:
        """One row per link: bytes carried and busy time so far, and utilization.

        ``busy_s`` is the time during which at least one flow was transferring over the link;
        ``utilization`` is bytes / (bandwidth x horizon), the horizon defaulting to the current
        simulated time (NaN while it is 0).
        """
        now = self.env.now
        horizon = now if horizon_s is None else float(horizon_s)
        carried_bytes = self.carried_bytes()
        rows = []
        for link in self.links.values():
            dt = now - link._since
            carried = carried_bytes[link.name]
            busy = link._busy_s + (dt if link._load > 0 else 0.0)
            capacity = link.bandwidth_bytes_per_s * horizon
            rows.append(
                {
                    "link": link.name,
                    "bandwidth_bytes_per_s": link.bandwidth_bytes_per_s,
                    "latency_s": link.latency_s,
                    "bytes": carried,
                    "busy_s": busy,
                    "utilization": carried / capacity if capacity > 0 else math.nan,
                }
            )
        return pd.DataFrame(rows, columns=list(LINK_COLUMNS))


class _Timer:
    """The callback of a network's next-completion timer; stale once the version moved on."""

    __slots__ = ("network", "version")

    def __init__(self, network: Network, version: int):
        self.network = network
        self.version = version

    def __call__(self, _event: Any) -> None:
        self.network._on_timer(self.version)


def _max_min_rates(links: list[Link], flows: list[_Flow]) -> dict[_Flow, float]:
    """Max-min fair rates of ``flows`` (every flow on ``links`` is among them) by progressive filling.

    Repeatedly take the link whose remaining capacity divided by its unfrozen flows is smallest,
    freeze its flows at that share, and take the share off the other links they cross.
    """
    if all(len(link._flows) <= 1 for link in links):  # disjoint flows: each gets its narrowest link
        return {f: min(link.bandwidth_bytes_per_s for link in f.path) for f in flows}
    cap: dict[Link, float] = {}
    count: dict[Link, int] = {}
    heap: list[tuple[float, int, Link]] = []
    for link in links:
        n = len(link._flows)
        if n:
            cap[link] = link.bandwidth_bytes_per_s
            count[link] = n
            heap.append((link.bandwidth_bytes_per_s / n, link._index, link))
    heapq.heapify(heap)
    rates: dict[_Flow, float] = {}
    todo = len(flows)
    while heap and len(rates) < todo:
        share, _, link = heapq.heappop(heap)
        n = count[link]
        if n == 0 or share != max(cap[link], 0.0) / n:
            continue  # stale: the link's share changed and a newer entry was pushed
        for f in link._flows:
            if f in rates:
                continue
            rates[f] = share
            for other in f.path:
                if other is not link:
                    m = count[other] - 1
                    count[other] = m
                    cap[other] -= share
                    if m:
                        heapq.heappush(heap, (max(cap[other], 0.0) / m, other._index, other))
        count[link] = 0
    return rates
