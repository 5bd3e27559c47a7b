"""The network model: links with bandwidth and latency, flows sharing them max-min fairly.

This is the fluid model of flow-level simulators, and the simulator's only one: op-level
Send/Recv flows (``SimRendezvous``) and the step-level drivers' pulls and pushes (``fluid.py``)
both run on a ``Network``. A flow over a path of links first waits the path's latency (the sum of
its links' latencies: propagation, which shares no bandwidth), then sends its bytes at a rate set
by max-min fairness among all flows transferring at that moment (progressive filling over the
links each flow crosses). Rates change only when flows start or end; at each such instant the
rates of the flows connected to the change through shared links are recomputed, once per instant
however many flows arrive or leave together. Flows elsewhere keep their rates.

Bookkeeping, written once for both solvers (its pieces are in ``netparts.py``, the classes
solver's moves of senders in ``netclasses.py``). Flows move in *lanes*: the flows of a lane
share one rate per flow, and a lane keeps a virtual clock of the bytes each of its flows has
sent (``served``, advanced lazily: ``served + rate x (now - t)``), so a flow is done when the
clock reaches its ``target``, and a rate change costs O(lanes), not O(flows). Finishing times
of lanes sit in one heap (stale entries are recognised by a version); arrivals after their
latency sit in another; the network keeps a single timer on the clock for the earlier of the
two. A link counts the bytes it carries from the virtual clocks of the lanes crossing it
(``weight x (served - served when last settled)``), so rate changes never touch links.

Solvers (``Network(env, solver=...)``), both progressive filling on *units* of capacity:

- ``"exact"`` (default): each flow is its own lane, each link its own unit. Any paths.
- ``"classes"``: the same max-min rates on symmetry classes, for *bundles*: a bundle sends the
  same bytes from one host's link to every link of a ``LinkGroup`` (the PS shards of a group:
  equal links), ``Network.bundle``. Senders whose links have equal bandwidths and the same set of
  groups in flight get the same rates (the allocation depends only on which flows cross which
  links), so a class of n senders and a group of m links are one unit each, and the flows of a
  class to a group are one lane (weight m on each sender's link, n on each of the group's). A
  rate change costs O(classes x groups). Exact for that topology (tests compare the solvers);
  a ``classes`` network carries bundles only, and a sender has at most one bundle per group in
  flight. ``bundle`` on an ``exact`` network sends one flow per link of the group.

Cost of the exact solver: O(flows x links-per-flow x log) in the affected component per instant.
Units: bytes, seconds, bytes per second. Every finished flow appends a flat record (see
``FLOW_COLUMNS``) to ``Network.records`` (``keep_records=False`` keeps none); ``flow_frame()`` and
``link_frame()`` return them as pandas DataFrames.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Sequence
from operator import attrgetter
from typing import Any

import simpy

from .netclasses import _reclass
from .netparts import (
    _INF,
    _REL_EPS,
    Bundle,
    Link,
    LinkGroup,
    _check_group,
    _Class,
    _component,
    _Flow,
    _Lane,
    _leave_at,
    _max_min_rates,
    _path_name,
    _size,
)
from .netresults import FLOW_COLUMNS, LINK_COLUMNS, FlowLog, NetworkResults

__all__ = ["FLOW_COLUMNS", "LINK_COLUMNS", "Link", "LinkGroup", "Network"]

SOLVERS = ("exact", "classes")

_seq_of = attrgetter("seq")


class Network(NetworkResults):
    """A set of Links and the flows crossing them, on the clock of a SimPy environment."""

    def __init__(self, env: simpy.Environment, solver: str = "exact", keep_records: bool = True):
        if solver not in SOLVERS:
            raise ValueError(f"network solver must be one of {SOLVERS}, got {solver!r}")
        self.env = env
        self.solver = solver
        self.keep_records = bool(keep_records)
        self.links: dict[str, Link] = {}
        self.groups: dict[str, LinkGroup] = {}
        self.records = FlowLog()  # finished flows' records (a list, replayed steps' kept whole)
        self._checked_paths: dict[tuple, str] = {}  # validated paths -> their names
        self.recomputations = 0  # rate recomputations so far (for benchmarks)
        self._seq = 0
        self._units = 0  # index of the next unit (tie-breaking among equal shares)
        self._active = 0
        self._dirty: dict[Any, None] = {}  # units whose flows changed since the last rates
        self._recompute_pending = False
        self._finish: list[tuple[float, int, int, _Lane]] = []  # (at, lane seq, version, lane)
        self._finish_max = 64  # its size that triggers dropping stale entries
        # (arrival after latency, seq of the first, flows): flows queued one after another for
        # the same instant (a step's pulls) share an entry, the last one queued (``_tail``), and
        # arrive in order (entries by (time, seq), then in it), as with an entry each
        self._pending: list[tuple[float, int, list[_Flow]]] = []
        self._tail: tuple[float, int, list[_Flow]] | None = None
        self._done: list[_Flow] = []  # finished at this instant, to report
        self._timer_ev: simpy.Event | None = None  # the network's one live timer
        self._timer_at: float | None = None
        self._timer_cb = self._on_timer  # (bound once)
        self._classes: dict[tuple, _Class] = {}

    # ---- building -------------------------------------------------------------------------

    def add_link(self, name: str, bandwidth: float, latency: float = 0.0) -> Link:
        """Create a Link in this network (bytes/s, seconds); raises ValueError on a duplicate name."""
        if name in self.links:
            raise ValueError(f"link {name!r} already exists in this network")
        link = Link(name, bandwidth, latency)
        link._index = self._units
        self._units += 1
        link._busy_from = self.env.now
        self.links[link.name] = link
        return link

    def link_group(self, name: str, links: Sequence[Link]) -> LinkGroup:
        """Declare ``links`` (in no other group; for the classes solver, of equal bandwidth and
        latency) as a group that bundles address. Raises ValueError naming the problem."""
        links = list(links)
        if name in self.groups:
            raise ValueError(f"link group {name!r} already exists in this network")
        if not links:
            raise ValueError(f"link group {name!r} has no links")
        for link in links:
            self._check_path((link,), name, name)
        _check_group(name, links, self.solver == "classes")
        group = self.groups[name] = LinkGroup(name, links, self._units, self.env.now)
        self._units += 1
        for link in links:
            link._group = group
            if self.solver == "classes":
                link._books = group
        return group

    @property
    def active_flows(self) -> int:
        """Flows transferring now (past their latency, not yet finished)."""
        return self._active

    def books(self) -> dict[Any, tuple[float, float]]:
        """What each link has carried so far, by its books (a link's own, or its group's when
        solved on classes): books -> (bytes, busy seconds). ``add_to_books`` adds to them."""
        now = self.env.now
        out: dict[Any, tuple[float, float]] = {}
        for link in self.links.values():
            b = link._books
            if b not in out:
                out[b] = (b._carried(now), b._busy(now))
        return out

    def add_to_books(self, deltas: dict[Any, tuple[float, float]]) -> None:
        """Add (bytes, busy seconds) to books of ``books()`` while no flow crosses them: what
        a replayed step carried (simulator/steady.py)."""
        for b, (nbytes, busy) in deltas.items():
            if b._n:
                raise RuntimeError("add_to_books: flows are crossing the link")
            b._bytes += nbytes
            b._busy_s += busy

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
        another network, or a path that crosses a link twice; RuntimeError on a ``classes``
        network (it carries bundles only).
        """
        if self.solver != "exact":
            raise RuntimeError("a Network with solver='classes' carries bundles only (bundle())")
        path = tuple(path)  # (a tuple is taken as it is)
        size = _size(nbytes, src, dst)
        joined = self._checked_paths.get(path)
        if joined is None:
            joined = self._check_path(path, src, dst)
        event = self.env.event() if on_done is None else None
        done = event.succeed if on_done is None else on_done
        flow = self._new_flow(path, size, done, src, dst, tag, nbytes, joined)
        latency = 0.0
        for link in path:
            latency += link.latency_s
        self._launch(flow, latency)
        return event

    def bundle(
        self,
        sender: Link,
        group: LinkGroup,
        nbytes: float,
        on_done: Callable[[], None] | None = None,
        inbound: bool = False,
        tag: Any = None,
        delay: float = 0.0,
        ended: Callable[[Any], None] | None = None,
    ) -> Bundle:
        """Send ``nbytes`` between ``sender`` and every link of ``group``: out over ``sender``
        and in over each group link, or, with ``inbound``, out over each group link and in over
        ``sender`` (a worker's pull from the shards of a PS group). ``on_done()`` is called when
        every part has arrived. The bundle leaves ``delay`` seconds from now (a worker's push
        issued as its compute starts, to leave when the compute ends; ``cancel`` withdraws it
        meanwhile); its first bytes arrive the path's latency after that. ``ended`` (the
        ``classes`` solver, no records kept): called with None in place of ``on_done()``, by the
        bundle's one flow itself (a call fewer). Returns a Bundle (for
        ``cancel``). Raises ValueError for a negative or non-finite delay, a link or group of
        another network, RuntimeError for a second bundle of ``sender`` to ``group`` in flight
        on a ``classes`` network."""
        size = float(nbytes)
        if not (size >= 0 and size < _INF):
            size = _size(nbytes, sender, group)  # (raises)
        if delay:
            delay = float(delay)
            if not (0.0 < delay < _INF):
                raise ValueError(
                    f"bundle {sender.name!r}->{group.name!r}: delay must be finite and >= 0 s, "
                    f"got {delay!r}"
                )
        sent = sender._sent
        in_flight = sent.get(group)
        if in_flight is None:  # validated once
            if self.groups.get(group.name) is not group:
                raise ValueError(f"{group.name!r} is not a link group of this network")
            if (sender,) not in self._checked_paths:
                self._check_path((sender,), sender.name, group.name)
            in_flight = sent[group] = False
        b = Bundle(on_done)
        if self.solver == "exact":
            b.left = len(group.links)
            for link in group.links:
                path = (link, sender) if inbound else (sender, link)
                src, dst = (link.name, sender.name) if inbound else (sender.name, link.name)
                joined = self._checked_paths.get(path) or self._check_path(path, src, dst)
                f = self._new_flow(path, size, b._one_done, src, dst, tag, nbytes, joined)
                b.flows.append(f)
                self._launch(f, sender.latency_s + link.latency_s, delay)
            return b
        if in_flight:
            raise RuntimeError(f"{sender.name!r} already has a bundle to {group.name!r} in flight")
        sent[group] = True
        b.left = 1
        if self.keep_records:
            src, dst = (group.name, sender.name) if inbound else (sender.name, group.name)
            f = self._new_flow(
                (sender,), size, b._one_done, src, dst, tag, nbytes * len(group.links)
            )
        else:
            f = _Flow(self._seq, (sender,), size, b._one_done if ended is None else ended, None)
            self._seq += 1
        f.sender = sender
        f.group = group
        b.flows.append(f)
        latency = sender.latency_s + group.latency_s
        if latency > 0 or delay:  # (_launch and _enqueue, inlined)
            at = (self.env.now + delay if delay else self.env.now) + latency
            tail = self._tail
            if tail is not None and tail[0] == at:
                tail[2].append(f)
            else:
                self._tail = tail = (at, f.seq, [f])
                heapq.heappush(self._pending, tail)
            if self._timer_at is None or at < self._timer_at:
                self._set_timer(at)
        else:
            self._launch(f, latency)
        return b

    def cancel(self, bundle: Bundle) -> None:
        """Abandon a bundle (its sender or a receiver died): it never completes, and its flows
        leave their links now."""
        if bundle.cancelled:
            return
        bundle.cancelled = True
        now = self.env.now
        for f in bundle.flows:
            if f.version < 0:
                continue
            if f.lane is not None:
                self._leave(f, now)
            if f.sender is not None:
                f.sender._sent[f.group] = False
            f.version = -1
        bundle.flows = []
        if self._dirty:
            self._settle_instant(now)

    def _new_flow(self, path, size, done, src, dst, tag, nbytes, joined="") -> _Flow:
        record = None
        if self.keep_records:
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
        flow = _Flow(self._seq, path, size, done, record)
        self._seq += 1
        return flow

    def _launch(self, flow: _Flow, latency: float, delay: float = 0.0) -> None:
        """The flow leaves ``delay`` seconds from now; its first byte arrives ``latency`` later
        (at once when both are 0)."""
        if latency > 0 or delay:
            self._enqueue(flow, (self.env.now + delay if delay else self.env.now) + latency)
            return
        now = self.env.now
        if self._arrive(flow, now):
            self._report(now)
        elif self._dirty:
            self._request_recompute()

    def _enqueue(self, flow: _Flow, at: float) -> None:
        """The flow's first byte arrives at ``at`` (see ``_pending``: the same order)."""
        tail = self._tail
        if tail is not None and tail[0] == at:
            tail[2].append(flow)
        else:
            self._tail = tail = (at, flow.seq, [flow])
            heapq.heappush(self._pending, tail)
        if self._timer_at is None or at < self._timer_at:
            self._set_timer(at)

    def _check_path(self, path: tuple, src: Any, dst: Any) -> str:
        """Validate a path once (links of this network, none twice); returns its name."""
        joined = self._checked_paths[path] = _path_name(self.links, path, src, dst)
        return joined

    def _arrive(self, flow: _Flow, now: float) -> bool:
        """The flow's first byte: it joins its links. True if it finished at once (no bytes)."""
        if flow.record is not None:
            flow.record["first_byte_s"] = now
        if flow.size == 0 or not flow.path:
            flow.version = -1
            self._done.append(flow)
            if flow.sender is not None:
                flow.sender._sent[flow.group] = False
            return True
        self._active += 1
        if flow.group is not None:
            flow.sender._flights[flow.group] = flow
            _reclass(self, (flow.sender,), now)
            return False
        lane = _Lane(flow.seq, now)
        flow.lane = lane
        flow.target = flow.size
        lane.heap.append((flow.size, flow.seq, 0, flow))
        path = flow.path
        alone = True
        uses = lane.uses
        for link in path:  # (link._join(lane, 1, now) for a new lane: its clock reads 0)
            n = link._n
            if n:
                alone = False
            else:
                link._busy_from = now
            link._lanes[lane] = [1, 0.0]
            link._n = n + 1
            uses.append((link, 1))
        if alone:
            # every link idle: the flow is alone in its component and gets its narrowest link
            # (what a recomputation at this instant would give it); a flow arriving later at the
            # same instant on these links makes them dirty and re-rates both
            rate = _INF
            for link in path:
                if link.cap < rate:
                    rate = link.cap
            lane.set_rate(rate, now, self._finish)
            self._arm()
        else:
            for link in path:
                self._dirty[link] = None
        return False

    def _leave(self, flow: _Flow, now: float) -> None:
        """The flow leaves its links (finished or cancelled); its units become dirty."""
        self._active -= 1
        lane = flow.lane
        flow.lane = None
        if flow.group is not None:
            flow.sender._sent[flow.group] = False
            del flow.sender._flights[flow.group]
            _reclass(self, (flow.sender,), now)
            return
        lane.version += 1  # its finish entry is stale
        served = lane.served + lane.rate * (now - lane.t)  # (link._join(lane, -1, now), inlined)
        dirty = self._dirty
        for link in flow.path:
            _leave_at(link, link._lanes, lane, 1, served, now)
            dirty[link] = None

    def _request_recompute(self) -> None:
        # A zero delay timeout runs after every event already queued for this instant, so that
        # flows arriving together share one recomputation; no time passes in between.
        if not self._recompute_pending:
            self._recompute_pending = True
            self.env.timeout(0).callbacks.append(self._on_recompute)

    def _on_recompute(self, _event: Any = None) -> None:
        self._recompute_pending = False
        self._settle_instant(self.env.now)

    # ---- the instant's work: finishes, arrivals, rates, reports -----------------------------

    def _on_timer(self, event: Any) -> None:
        if event is not self._timer_ev:
            return  # stale: an earlier timer was set after this one
        self._timer_ev = None
        self._timer_at = None
        now = self.env.now
        limit = now + 4.0 * math.ulp(now if now > 1.0 else 1.0)  # (instants this close are one)
        heap = self._finish
        while heap and heap[0][0] <= limit:
            _, _, v, lane = heapq.heappop(heap)
            if v == lane.version:
                self._finish_due(lane, now)
        pending = self._pending
        alone: list[Link] = []  # senders arriving with nothing else in flight, to one group
        while pending and pending[0][0] <= limit:
            entry = heapq.heappop(pending)
            if entry is self._tail:
                self._tail = None
            for f in entry[2]:
                if f.version < 0:
                    continue  # cancelled
                sender = f.sender
                if sender is None or f.record is not None or not f.size:
                    if alone:
                        _reclass(self, alone, now)
                        alone = []
                    self._arrive(f, now)
                    continue
                self._active += 1  # (_arrive, inlined for a bundle's flow with bytes, no record)
                flights = sender._flights
                if flights or sender._cls is not None:
                    if alone:
                        _reclass(self, alone, now)
                        alone = []
                    flights[f.group] = f
                    _reclass(self, (sender,), now)
                    continue
                flights[f.group] = f
                if alone and (sender.cap != alone[0].cap or f.group not in alone[0]._flights):
                    _reclass(self, alone, now)
                    alone = []
                alone.append(sender)  # (joins with the others: the same class, one after another)
        if alone:
            _reclass(self, alone, now)
        dirty = self._dirty  # (_settle_instant, inlined)
        while dirty:
            self._recompute(now)
        self._arm()
        if self._done:
            self._report(now)

    def _finish_due(self, lane: _Lane, now: float) -> None:
        """Finish the flows of ``lane`` whose bytes are all sent at ``now``."""
        lane.advance(now)
        heap = lane.heap
        served = lane.served
        tol = lane.rate * (4.0 * math.ulp(now if now > 1.0 else 1.0))  # (one instant)
        # Many due at once (a step's pulls, which joined in order): the heap is sorted (the pop
        # order) and walked, and what was walked is cut off at the end (a sorted list is a heap),
        # instead of a pop per flow. Entries are unique: (target, flow seq, version).
        walk = False
        if len(heap) > 8:
            target, _, v, f = heap[-1]
            if v == f.version and target - served <= tol + f.size * _REL_EPS + 8 * math.ulp(target):
                heap.sort()
                walk = True
        i = 0
        reclassed = False
        emptied: list[Link] = []  # senders with nothing left in flight
        while i < len(heap):
            target, _, v, f = heap[i]
            if v == f.version and target - served > tol + f.size * _REL_EPS + 8 * math.ulp(target):
                break
            if walk:
                i += 1
            else:
                heapq.heappop(heap)
            if v != f.version:
                continue  # stale
            if f.group is not None:  # (_leave, inlined for a bundle)
                self._active -= 1
                f.lane = None
                sender = f.sender
                sender._sent[f.group] = False
                flights = sender._flights
                del flights[f.group]
                if flights:
                    if emptied:
                        _reclass(self, emptied, now)
                        emptied = []
                    _reclass(self, (sender,), now)
                else:  # (leaves the lane's class with the others: one after another)
                    emptied.append(sender)
                reclassed = True
            else:
                self._leave(f, now)
            f.version = -1
            self._done.append(f)
        if emptied:
            _reclass(self, emptied, now)
        if walk:
            del heap[:i]
        if heap and lane.rate > 0:
            if reclassed:
                # its class is dirty, and the recomputation that follows at this instant gives
                # the lane its next finish entry (or the class is gone, and its heap is stale)
                lane.version += 1
                lane.armed = False
            else:
                lane.push_finish(self._finish)

    def _settle_instant(self, now: float) -> None:
        """Recompute the rates of what changed at ``now``, arm the timer, report finished flows."""
        while self._dirty:
            self._recompute(now)
        self._arm()
        self._report(now)

    def _report(self, now: float) -> None:
        done = self._done
        if not done:
            return
        self._done = []
        if len(done) > 1:
            done.sort(key=_seq_of)
        for f in done:
            rec = f.record
            if rec is not None:
                rec["end_s"] = now
                self.records.append(rec)
            f.done(rec)  # an event's succeed, or the caller's on_done, at once

    def _recompute(self, now: float) -> None:
        self.recomputations += 1
        dirty = self._dirty
        seeds = list(dirty)
        lanes = None
        if len(seeds) == 1:  # (_component's common case, inlined: one lane alone on its units)
            seed_lanes = seeds[0]._lanes
            if len(seed_lanes) == 1:
                (lane,) = seed_lanes
                for u, _w in lane.uses:
                    if len(u._lanes) != 1:
                        break
                else:
                    units = ()
                    lanes = [lane] if lane.heap else []
        if lanes is None:
            units, lanes = _component(seeds)
        dirty.clear()
        due = False
        tol = 4.0 * math.ulp(now if now > 1.0 else 1.0)  # (instants this close are one)
        for lane in lanes:  # flows due now (their timer has not fired yet) finish first
            rate = lane.rate
            if now != lane.t:  # (lane.advance, inlined)
                lane.served += rate * (now - lane.t)
                lane.t = now
            if rate > 0:  # (the lanes have flows)
                target, _, v, f = lane.heap[0]
                if v != f.version or target - lane.served <= rate * tol + (
                    f.size * _REL_EPS + 8 * math.ulp(target)
                ):
                    self._finish_due(lane, now)
                    due = True
        if due and dirty:
            for u in seeds:  # the finished flows changed the component: the caller recomputes
                dirty[u] = None
            return
        if len(lanes) == 1:  # alone on its units: its narrowest unit
            (lane,) = lanes
            rate = _INF
            for u, w in lane.uses:
                share = u.cap / w
                if share < rate:
                    rate = share
            if rate != lane.rate:
                if not rate > 0:
                    raise RuntimeError(f"a flow got a rate of {rate!r} bytes/s")
                lane.rate = rate  # (set_rate: the lane is advanced above)
                heap = lane.heap
                if heap:  # (push_finish, inlined)
                    while heap and heap[0][2] != heap[0][3].version:
                        heapq.heappop(heap)
                    lane.version += 1
                    lane.armed = bool(heap)
                    if heap:
                        at = lane.t + (heap[0][0] - lane.served) / rate
                        heapq.heappush(self._finish, (at, lane.seq, lane.version, lane))
            elif not lane.armed and lane.rate > 0:  # same rate, new flows: a new finish entry
                lane.push_finish(self._finish)
        elif lanes:
            rates = _max_min_rates(units, lanes)
            for lane in lanes:
                rate = rates.get(lane)
                if rate is not None and rate != lane.rate:
                    if not rate > 0:
                        raise RuntimeError(f"a flow got a rate of {rate!r} bytes/s")
                    lane.set_rate(rate, now, self._finish)
                elif not lane.armed and lane.rate > 0:  # same rate, new flows: a new entry
                    lane.push_finish(self._finish)
        heap = self._finish
        if len(heap) > self._finish_max:  # drop stale entries (twice the live ones after that)
            heap[:] = [e for e in heap if e[2] == e[3].version]
            heapq.heapify(heap)
            self._finish_max = 2 * len(heap) + 2 * self._active + 64

    def _arm(self) -> None:
        heap, pending = self._finish, self._pending
        while heap and heap[0][2] != heap[0][3].version:
            heapq.heappop(heap)  # a rate changed since, or the lane emptied
        while pending:
            flows = pending[0][2]
            if flows[0].version >= 0 or any(f.version >= 0 for f in flows):
                break
            if heapq.heappop(pending) is self._tail:  # every flow of it cancelled
                self._tail = None
        at = heap[0][0] if heap else _INF
        if pending and pending[0][0] < at:
            at = pending[0][0]
        if at != self._timer_at:
            if at == _INF:
                if self._timer_at is not None:
                    self._timer_at = self._timer_ev = None
            else:  # (_set_timer, inlined)
                self._timer_at = at
                now = self.env.now
                ev = self._timer_ev = self.env.timeout(at - now if at > now else 0.0)
                ev.callbacks.append(self._timer_cb)

    def _set_timer(self, at: float) -> None:
        if at == _INF:
            self._timer_at = self._timer_ev = None
            return
        self._timer_at = at
        env = self.env
        now = env.now
        ev = self._timer_ev = env.timeout(at - now if at > now else 0.0)
        ev.callbacks.append(self._timer_cb)  # (a timer set after it makes it stale)
