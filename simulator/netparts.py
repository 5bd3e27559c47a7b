"""The pieces of the network model (``network.py``): units of capacity and their books, lanes,
flows, bundles, and progressive filling.

A *unit* of capacity is a ``Link`` (the exact solver; also every sender's link in the classes
solver), a ``LinkGroup`` or a ``_Class`` of senders (the classes solver). Each keeps *books*
(``_Books``): the lanes transferring over it with their weights, and the bytes it has carried.
A *lane* (``_Lane``) is a set of flows (``_Flow``) sharing one rate per flow and one virtual
clock of bytes sent; ``_max_min_rates`` gives lanes their max-min fair rates over their units.
See ``network.py`` for how the ``Network`` moves flows through them.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import Any

# A flow with less than this fraction of its bytes left is complete (floating-point residue);
# instants within 4 units in the last place of max(now, 1) are one instant (see network.py).
_REL_EPS = 1e-12
_INF = math.inf


def _leave_at(books: _Books, lanes: dict, lane: _Lane, dw: int, served: float, now: float) -> None:
    """``books._join(lane, -dw, now)`` for a lane on ``books`` whose clock reads ``served``."""
    e = lanes[lane]
    books._bytes += e[0] * (served - e[1])
    e[1] = served
    e[0] -= dw
    if not e[0]:
        del lanes[lane]
    n = books._n = books._n - dw
    if not n:
        books._busy_s += now - books._busy_from


class _Books:
    """What crosses a link, and what it has carried: the lanes transferring over it, each with
    its weight (flows per link) and the lane's clock when last settled. A Link keeps its own; the
    links of a group solved on classes carry the same and share their group's."""

    __slots__ = ("_lanes", "_n", "_bytes", "_busy_s", "_busy_from")

    def __init__(self, now: float = 0.0):
        self._lanes: dict[_Lane, list] = {}  # lane -> [weight, its clock when last settled]
        self._n = 0  # flows transferring over a link (the sum of the weights)
        self._bytes = 0.0  # carried, up to the lanes' settled marks
        self._busy_s = 0.0  # time with at least one flow transferring, up to ``_busy_from``
        self._busy_from = now

    def _carried(self, now: float) -> float:
        b = self._bytes
        for lane, (w, mark) in self._lanes.items():
            b += w * (lane.served + lane.rate * (now - lane.t) - mark)
        return b

    def _busy(self, now: float) -> float:
        return self._busy_s + (now - self._busy_from if self._n else 0.0)

    def _join(self, lane: _Lane, dw: int, now: float) -> None:
        """``dw`` more (or fewer) flows of ``lane`` per link from ``now``."""
        e = self._lanes.get(lane)
        served = lane.served + lane.rate * (now - lane.t)
        if e is None:
            self._lanes[lane] = [dw, served]
        else:
            self._bytes += e[0] * (served - e[1])
            e[1] = served
            e[0] += dw
            if not e[0]:
                del self._lanes[lane]
        if not self._n:
            self._busy_from = now
        self._n += dw
        if not self._n:
            self._busy_s += now - self._busy_from


class Link(_Books):
    """One direction of a physical link (a full-duplex cable is two Links).

    Create Links with ``Network.add_link`` so that the network accounts for them.
    Raises ValueError for a bandwidth that is not finite and positive or a negative latency.
    """

    __slots__ = ("name", "bandwidth_bytes_per_s", "latency_s", "cap", "_index", "_group")
    __slots__ += ("_books", "_cls", "_flights", "_sent")

    def __init__(self, name: str, bandwidth_bytes_per_s: float, latency_s: float = 0.0):
        bw, lat = float(bandwidth_bytes_per_s), float(latency_s)
        if not (math.isfinite(bw) and bw > 0):
            raise ValueError(f"link {name!r}: bandwidth must be finite and > 0 bytes/s, got {bw!r}")
        if not (math.isfinite(lat) and lat >= 0):
            raise ValueError(f"link {name!r}: latency must be finite and >= 0 s, got {lat!r}")
        super().__init__()
        self.name = str(name)
        self.bandwidth_bytes_per_s = bw
        self.latency_s = lat
        self.cap = bw  # as a unit of the exact solver
        self._index = -1  # creation order in its network: deterministic tie-breaking
        self._group: LinkGroup | None = None
        self._books: _Books = self  # (its group's, in a group solved on classes)
        self._cls: _Class | None = None  # classes solver, as a sender: its current class
        self._flights: dict[LinkGroup, _Flow] = {}  # and its bundles transferring
        #: the groups it has sent bundles to (validated), each True while one is in flight
        #: (``Network.bundle``: leaving or transferring; flagged on a classes network only)
        self._sent: dict[LinkGroup, bool] = {}

    @property
    def active_flows(self) -> int:
        """How many flows are transferring over this link now (not counting their latency)."""
        return self._books._n

    def __repr__(self) -> str:
        return (
            f"Link({self.name!r}, bandwidth_bytes_per_s={self.bandwidth_bytes_per_s!r}, "
            f"latency_s={self.latency_s!r})"
        )


class LinkGroup(_Books):
    """Equal links that bundles address as a whole (``Network.link_group``): the PS shards of
    one group, say. In the classes solver it is one unit of capacity (per link: ``cap``), and
    its links, which carry the same flows, share its books."""

    __slots__ = ("name", "links", "cap", "latency_s", "_index", "m")

    def __init__(self, name: str, links: list[Link], index: int, now: float):
        super().__init__(now)
        self.name = name
        self.links = links
        self.cap = links[0].bandwidth_bytes_per_s
        self.latency_s = links[0].latency_s
        self._index = index
        self.m = len(links)  # (a bundle's flows per sender)


class _Class:
    """Senders (their links) with equal bandwidth and the same groups in flight: one unit."""

    __slots__ = ("key", "cap", "n", "lanes", "_index", "_lanes")

    def __init__(self, key: tuple, cap: float, index: int):
        self.key = key
        self.cap = cap
        self.n = 0
        self.lanes: dict[LinkGroup, _Lane] = {}
        self._index = index
        self._lanes: dict[_Lane, None] = {}


class _Lane:
    __slots__ = ("seq", "rate", "served", "t", "heap", "uses", "version", "armed")

    def __init__(self, seq: int, now: float):
        self.seq = seq
        self.rate = 0.0
        self.served = 0.0  # bytes each flow of the lane has sent, up to time ``t``
        self.t = now
        self.heap: list[tuple[float, int, int, _Flow]] = []  # (target, flow seq, version, flow)
        self.uses: list[tuple[Any, int]] = []  # (unit, flows of this lane per link of the unit)
        self.version = 0  # bumped at each new rate or head: stale finish entries are ignored
        self.armed = False  # whether its current finish is in the network's heap

    def advance(self, now: float) -> None:
        if now != self.t:
            self.served += self.rate * (now - self.t)
            self.t = now

    def set_rate(self, rate: float, now: float, finish: list) -> None:
        self.advance(now)
        self.rate = rate
        if self.heap:
            self.push_finish(finish)

    def push_finish(self, finish: list) -> None:
        """Its next finish (its first flow's) into the network's heap ``finish``."""
        heap = self.heap
        while heap and heap[0][2] != heap[0][3].version:
            heapq.heappop(heap)
        self.version += 1
        self.armed = bool(heap)
        if heap:
            at = self.t + (heap[0][0] - self.served) / self.rate
            heapq.heappush(finish, (at, self.seq, self.version, self))


class _Flow:
    __slots__ = ("seq", "path", "size", "target", "lane", "version", "done", "record", "sender")
    __slots__ += ("group",)

    def __init__(self, seq: int, path: tuple, size: float, done: Callable, record: dict | None):
        self.seq = seq
        self.path = path  # exact: its links; classes: (sender link,)
        self.size = size
        self.target = 0.0  # its lane's clock value at which it is complete
        self.lane: _Lane | None = None
        self.version = 0  # bumped when it changes lanes; -1 once finished or cancelled
        self.done = done  # called with the record at the last byte
        self.record = record
        self.sender: Link | None = None  # classes: the sender's link
        self.group: LinkGroup | None = None


class Bundle:
    """What ``Network.bundle`` returns: a handle to cancel it (``Network.cancel``)."""

    __slots__ = ("flows", "left", "done", "cancelled")

    def __init__(self, done: Callable[[], None] | None):
        self.flows: list[_Flow] = []
        self.left = 0
        self.done = done
        self.cancelled = False

    def _one_done(self, _record: Any) -> None:
        self.left -= 1
        if not self.left and not self.cancelled:
            self.flows = []
            if self.done is not None:
                self.done()


def _size(nbytes: Any, src: Any, dst: Any) -> float:
    size = float(nbytes)
    if not (math.isfinite(size) and size >= 0):
        src = getattr(src, "name", src)
        dst = getattr(dst, "name", dst)
        raise ValueError(f"flow {src!r}->{dst!r}: bytes must be finite and >= 0, got {nbytes!r}")
    return size


def _path_name(links: dict[str, Link], path: tuple, src: Any, dst: Any) -> str:
    """The name of a path of ``links`` (a network's, by name); raises ValueError for a link of
    another network or a path that crosses a link twice."""
    for link in path:
        if not isinstance(link, Link) or links.get(link.name) is not link:
            raise ValueError(
                f"flow {src!r}->{dst!r}: {link!r} is not a link of this network "
                "(create links with Network.add_link)"
            )
    if len({id(link) for link in path}) != len(path):
        names = [link.name for link in path]
        raise ValueError(f"flow {src!r}->{dst!r}: path crosses a link twice: {names}")
    return ">".join(link.name for link in path)


def _check_group(name: str, links: list[Link], classes: bool) -> None:
    """Raises ValueError if ``links`` (of the network) cannot make a new link group ``name``:
    a link in another group; for the classes solver, unequal links or one that carried flows."""
    for link in links:
        if link._group is not None:
            raise ValueError(f"link {link.name!r} is already in group {link._group.name!r}")
    if classes and len({(x.bandwidth_bytes_per_s, x.latency_s) for x in links}) != 1:
        raise ValueError(
            f"link group {name!r}: its links need equal bandwidth and latency for the "
            "classes solver"
        )
    for link in links if classes else ():
        if link._lanes or link._bytes:
            raise ValueError(f"link {link.name!r} has carried flows: group it first")


def _component(seeds: list) -> tuple[list, list[_Lane]]:
    """The units and lanes connected to ``seeds`` through shared units, in discovery order.
    (``Network._recompute`` handles the common case itself: one lane alone on its units.)"""
    seen = dict.fromkeys(seeds)
    units = list(seen)
    lanes: dict[_Lane, None] = {}
    i = 0
    while i < len(units):
        for lane in units[i]._lanes:
            if lane not in lanes:
                lanes[lane] = None
                for other, _w in lane.uses:
                    if other not in seen:
                        seen[other] = None
                        units.append(other)
        i += 1
    return units, [lane for lane in lanes if lane.heap]


def _max_min_rates(units: list, lanes: list[_Lane]) -> dict[_Lane, float]:
    """Max-min fair rates per flow of ``lanes`` (every lane on ``units`` is among them) by
    progressive filling: repeatedly take the unit whose remaining capacity divided by its
    unfrozen flows is smallest, freeze its lanes at that share, and take the share off the other
    units they cross (``weight`` times: a lane's flows per link of the unit)."""
    if all(len(u._lanes) <= 1 for u in units):  # disjoint lanes: each gets its narrowest unit
        out = {}
        for lane in lanes:
            best = _INF
            for u, w in lane.uses:
                share = u.cap / w
                if share < best:
                    best = share
            out[lane] = best
        return out
    cap: dict[Any, float] = {}
    count: dict[Any, int] = {}
    for lane in lanes:
        for u, w in lane.uses:
            if u in count:
                count[u] += w
            else:
                count[u] = w
                cap[u] = u.cap
    heap = [(cap[u] / n, u._index, u) for u, n in count.items()]
    heapq.heapify(heap)
    rates: dict[_Lane, float] = {}
    todo = len(lanes)
    while heap and len(rates) < todo:
        share, _, unit = heapq.heappop(heap)
        n = count[unit]
        if n == 0 or share != max(cap[unit], 0.0) / n:
            continue  # stale: the unit's share changed and a newer entry was pushed
        for lane in unit._lanes:
            if lane in rates or not lane.heap:
                continue
            rates[lane] = share
            for other, w in lane.uses:
                if other is not unit:
                    m = count[other] - w
                    count[other] = m
                    cap[other] -= w * share
                    if m:
                        heapq.heappush(heap, (max(cap[other], 0.0) / m, other._index, other))
        count[unit] = 0
    return rates
