"""Worker <-> PS-shard transfers on one non-blocking switch, fast enough for hundreds of workers.

The topology is ``SwitchFabric``'s: every host has an up and a down NIC link, and a flow from host
a to host b crosses exactly ``a:nic:up`` and ``b:nic:down``; it first waits the two half
latencies, then sends its bytes at its max-min fair rate. ``PSNetwork`` offers two models of it:

- ``mode="exact"``: the reference. One ``Network`` flow per (worker, shard) over a real
  ``SwitchFabric`` (hosts ``ps0..psK``, ``w0..wN``); rates recomputed by ``network.py``.
- ``mode="fast"``: the same fluid max-min model, computed on symmetry classes. Shards are given
  in *groups* of interchangeable shards (same NIC, and every transfer sends the same bytes to each
  shard of a group), so a worker's flows to one group stay identical and are kept as one
  aggregate flow of multiplicity m (it puts m flows on the worker's link and one on each shard's).
  Workers with the same NIC and the same set of groups in flight get the same max-min rates (the
  allocation depends only on which flows cross which links, not on bytes left), so progressive
  filling runs over *classes* of workers x groups, not over flows. Within a (class, group) lane
  every flow moves at one rate: a lane keeps a virtual clock of bytes served per flow, and a
  flow finishes when the clock reaches its target (processor sharing with virtual time), so an
  arrival or departure costs O(groups x classes + log flows), not O(flows).

  The fast model is exact for this topology (tests compare it with ``mode="exact"``); it is
  restricted to flows between workers and PS groups (each transfer names whole groups) and a
  worker may have one transfer per direction in flight. Latencies are folded into one engine
  timer, so a batch of pulls started together costs a handful of events. Incast emerges: n
  workers pushing to one shard share its downlink, each at W/n.

Directions are independent (full-duplex links): pulls use PS up and worker down links, pushes
worker up and PS down links. Units: bytes, seconds, bytes per second.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import simpy

from .network import Network
from .topology import Nic, SwitchFabric

__all__ = ["PSNetwork", "Transfer", "ring_allreduce_time"]

_REL_EPS = 1e-12  # a flow with less than this fraction of its bytes left is complete
_INF = math.inf

OnPart = Callable[[int, float], None]


def _time_tol(t: float) -> float:
    return 4.0 * math.ulp(max(abs(t), 1.0))


class Transfer:
    """One worker's pull or push: one part per PS group. ``event`` succeeds when every part has
    arrived; ``on_part(group, now)`` is called as each part arrives."""

    __slots__ = ("event", "left", "on_part", "worker", "flows", "cancelled", "direction")

    def __init__(self, event: simpy.Event, worker: int, on_part: OnPart | None, direction: Any):
        self.event = event
        self.direction = direction
        self.worker = worker
        self.on_part = on_part
        self.left = 0
        self.flows: list[Any] = []
        self.cancelled = False

    def _part_done(self, group: int, now: float) -> None:
        if self.cancelled:
            return
        self.left -= 1
        if self.on_part is not None:
            self.on_part(group, now)
        if self.left == 0:
            self.flows = []  # no reference cycles left for the garbage collector
            self.event.succeed()


# ---- the fast model --------------------------------------------------------------------------


class _Flow:
    __slots__ = ("seq", "transfer", "worker", "group", "size", "target", "version", "lane")

    def __init__(self, seq: int, transfer: Transfer, worker: int, group: int, size: float):
        self.seq = seq
        self.transfer = transfer
        self.worker = worker
        self.group = group
        self.size = size
        self.target = 0.0  # lane clock value at which the flow is complete
        self.version = 0  # bumped when the flow moves lanes; -1 once done or cancelled
        self.lane: _Lane | None = None


class _Lane:
    """Flows of one worker class to one group: all move at ``rate`` bytes/s per shard flow."""

    __slots__ = ("group", "served", "rate", "heap", "frozen")

    def __init__(self, group: int):
        self.group = group
        self.served = 0.0  # bytes sent per flow since the lane was created
        self.rate = 0.0
        self.heap: list[tuple[float, int, int, _Flow]] = []  # (target, seq, version, flow)
        self.frozen = False


class _Class:
    """Workers with the same NIC bandwidth and the same set of groups in flight."""

    __slots__ = ("key", "cap", "n", "lanes")

    def __init__(self, key: tuple, cap: float, groups: Sequence[int]):
        self.key = key
        self.cap = cap
        self.n = 0
        self.lanes = {g: _Lane(g) for g in groups}


class _FastDirection:
    """Max-min fluid flows from/to workers' NIC links to/from PS groups' NIC links."""

    def __init__(self, env, worker_cap, worker_lat, group_cap, group_mult, group_lat):
        self.env = env
        self.worker_cap = list(worker_cap)
        self.worker_lat = list(worker_lat)
        self.group_cap = list(group_cap)
        self.group_mult = list(group_mult)
        self.group_lat = list(group_lat)
        n = len(self.worker_cap)
        self.active: list[dict[int, _Flow]] = [{} for _ in range(n)]  # worker -> group -> flow
        self.inflight = [0] * n  # parts pending or active per worker
        self.cls_of: list[_Class | None] = [None] * n
        self.classes: dict[tuple, _Class] = {}
        self.pending: list[tuple[float, int, int, _Flow]] = []  # (start of transfer, seq, ver, f)
        self.t = env.now  # time the lanes' clocks refer to
        self.seq = 0
        self.timer_at: float | None = None
        self.timer_version = 0

    def transfer(self, tr: Transfer, parts: Sequence[tuple[int, float]]) -> None:
        w = tr.worker
        if self.inflight[w]:
            raise RuntimeError(f"worker {w} already has a transfer in flight in this direction")
        now = self.env.now
        first = _INF
        for g, size in parts:
            f = _Flow(self.seq, tr, w, g, float(size))
            self.seq += 1
            tr.flows.append(f)
            at = now + self.worker_lat[w] + self.group_lat[g]
            heapq.heappush(self.pending, (at, f.seq, 0, f))
            first = min(first, at)
        tr.left = len(parts)
        self.inflight[w] = len(parts)
        if self.timer_at is None or first < self.timer_at:
            self._set_timer(first)  # an earlier timer stays armed and re-arms when it fires

    def cancel(self, tr: Transfer) -> None:
        tr.cancelled = True
        w = tr.worker
        self._advance()
        moved = False
        for f in tr.flows:
            if f.version < 0:
                continue
            if self.active[w].get(f.group) is f:
                del self.active[w][f.group]
                moved = True
            f.version = -1
        tr.flows = []
        self.inflight[w] = 0
        if moved:
            self._reclass(w)
            self._rates()
        self._arm()

    # ---- the engine ----------------------------------------------------------------------

    def _advance(self) -> None:
        now = self.env.now
        dt = now - self.t
        if dt > 0:
            for c in self.classes.values():
                for lane in c.lanes.values():
                    lane.served += lane.rate * dt
        self.t = now

    def _on_timer(self, version: int) -> None:
        if version != self.timer_version:
            return
        self.timer_at = None
        self._advance()
        now = self.env.now
        tol = _time_tol(now)
        done: list[_Flow] = []
        changed: dict[int, None] = {}
        for c in self.classes.values():
            for lane in c.lanes.values():
                heap = lane.heap
                rate_tol = lane.rate * tol
                while heap:
                    target, _, ver, f = heap[0]
                    if ver != f.version:
                        heapq.heappop(heap)
                        continue
                    left = target - lane.served
                    if left > rate_tol + f.size * _REL_EPS + 8 * math.ulp(target):
                        break
                    heapq.heappop(heap)
                    f.version = -1
                    done.append(f)
                    del self.active[f.worker][f.group]
                    changed[f.worker] = None
        pending = self.pending
        limit = now + tol
        while pending and pending[0][0] <= limit:
            _, _, _, f = heapq.heappop(pending)
            if f.version < 0:
                continue  # cancelled
            if f.size == 0:
                f.version = -1
                done.append(f)
                continue
            self.active[f.worker][f.group] = f
            changed[f.worker] = None
        for w in changed:
            self._reclass(w)
        if changed:
            self._rates()
        self._arm()
        if done:
            done.sort(key=lambda f: f.seq)
            for f in done:
                self.inflight[f.worker] -= 1
                f.transfer._part_done(f.group, now)

    def _reclass(self, w: int) -> None:
        """Move worker ``w`` to the class of its current set of groups, carrying bytes left."""
        old = self.cls_of[w]
        flows = self.active[w]
        groups = tuple(sorted(flows))
        key = (self.worker_cap[w], groups)
        if old is not None and old.key == key:
            return
        new = None
        if groups:
            new = self.classes.get(key)
            if new is None:
                new = self.classes[key] = _Class(key, self.worker_cap[w], groups)
            for g, f in flows.items():
                lane = new.lanes[g]
                if f.lane is not None:
                    left = f.target - f.lane.served
                else:
                    left = f.size
                f.version += 1
                f.lane = lane
                f.target = lane.served + left
                heapq.heappush(lane.heap, (f.target, f.seq, f.version, f))
                if len(lane.heap) > 2 * new.n + 64:
                    lane.heap[:] = [e for e in lane.heap if e[2] == e[3].version]
                    heapq.heapify(lane.heap)
            new.n += 1
        if old is not None:
            old.n -= 1
            if old.n == 0:
                del self.classes[old.key]
        self.cls_of[w] = new

    def _rates(self) -> None:
        """Max-min fair rate per shard flow of every lane, by progressive filling over classes."""
        classes = list(self.classes.values())
        if not classes:
            return
        mult, gcap = self.group_mult, self.group_cap
        if len(classes) == 1 and len(classes[0].lanes) == 1:
            c = classes[0]
            ((g, lane),) = c.lanes.items()
            lane.rate = min(c.cap / mult[g], gcap[g] / c.n)
            return
        rem_c = [c.cap for c in classes]
        w_c = [sum(mult[g] for g in c.lanes) for c in classes]
        rem_g: dict[int, float] = {}
        w_g: dict[int, int] = {}
        members: dict[int, list[int]] = {}
        for i, c in enumerate(classes):
            for g, lane in c.lanes.items():
                lane.frozen = False
                if g not in rem_g:
                    rem_g[g] = gcap[g]
                    w_g[g] = 0
                    members[g] = []
                w_g[g] += c.n
                members[g].append(i)
        level = 0.0
        while True:
            best, is_class, key = _INF, False, -1
            for i in range(len(classes)):
                if w_c[i]:
                    x = rem_c[i] / w_c[i]
                    if x < best:
                        best, is_class, key = x, True, i
            for g, wg in w_g.items():
                if wg:
                    x = rem_g[g] / wg
                    if x < best:
                        best, is_class, key = x, False, g
            if key < 0:
                return
            level = max(level, best)  # levels only rise (guards against rounding)
            if is_class:
                c = classes[key]
                todo = [(key, g, lane) for g, lane in c.lanes.items() if not lane.frozen]
            else:
                todo = [
                    (i, key, classes[i].lanes[key])
                    for i in members[key]
                    if not classes[i].lanes[key].frozen
                ]
            for i, g, lane in todo:
                lane.frozen = True
                lane.rate = level
                n = classes[i].n
                rem_c[i] -= mult[g] * level
                w_c[i] -= mult[g]
                rem_g[g] -= n * level
                w_g[g] -= n

    def _arm(self) -> None:
        nxt = _INF
        t = self.t
        for c in self.classes.values():
            for lane in c.lanes.values():
                heap = lane.heap
                while heap and heap[0][2] != heap[0][3].version:
                    heapq.heappop(heap)
                if heap:
                    x = t + (heap[0][0] - lane.served) / lane.rate
                    if x < nxt:
                        nxt = x
        pending = self.pending
        while pending and pending[0][3].version < 0:
            heapq.heappop(pending)
        if pending and pending[0][0] < nxt:
            nxt = pending[0][0]
        if nxt != self.timer_at:
            self._set_timer(nxt)

    def _set_timer(self, at: float) -> None:
        self.timer_version += 1
        if at == _INF:
            self.timer_at = None
            return
        self.timer_at = at
        version = self.timer_version
        now = self.env.now
        self.env.timeout(at - now if at > now else 0.0).callbacks.append(
            lambda _e: self._on_timer(version)
        )


class _OneQueue:
    """The fast model's common case: one group of shards and equal worker NICs. All flows in
    flight share one rate, min(worker NIC / m, shard NIC / flows): a single processor-sharing
    queue with a virtual clock (the same numbers as ``_FastDirection``, with less bookkeeping)."""

    def __init__(self, env, worker_cap, worker_lat, group_cap, group_mult, group_lat):
        self.env = env
        self.worker_share = worker_cap / group_mult  # a worker's NIC split over the m shards
        self.group_cap = group_cap
        self.latency = [lat + group_lat for lat in worker_lat]
        self.inflight = [0] * len(worker_lat)
        self.pending: list[tuple[float, int, _Flow]] = []
        self.heap: list[tuple[float, int, _Flow]] = []  # (target, seq, flow)
        self.n = 0  # flows transferring
        self.served = 0.0
        self.rate = 0.0
        self.t = env.now
        self.seq = 0
        self.timer_at: float | None = None
        self.timer_version = 0

    def transfer(self, tr: Transfer, parts: Sequence[tuple[int, float]]) -> None:
        w = tr.worker
        if self.inflight[w]:
            raise RuntimeError(f"worker {w} already has a transfer in flight in this direction")
        ((g, size),) = parts
        f = _Flow(self.seq, tr, w, g, float(size))
        self.seq += 1
        tr.flows.append(f)
        tr.left = 1
        self.inflight[w] = 1
        at = self.env.now + self.latency[w]
        heapq.heappush(self.pending, (at, f.seq, f))
        if self.timer_at is None or at < self.timer_at:
            self._set_timer(at)

    def cancel(self, tr: Transfer) -> None:
        tr.cancelled = True
        self._advance()
        for f in tr.flows:
            if f.version == 1:  # transferring
                self.n -= 1
            f.version = -1
        tr.flows = []
        self.inflight[tr.worker] = 0
        self._set_rate()
        self._arm()

    def _advance(self) -> None:
        now = self.env.now
        if now > self.t:
            self.served += self.rate * (now - self.t)
            self.t = now

    def _set_rate(self) -> None:
        n = self.n
        self.rate = min(self.worker_share, self.group_cap / n) if n else 0.0
        if not n:
            self.served = 0.0  # restart the virtual clock when idle (keeps it small)
            self.heap.clear()

    def _on_timer(self, version: int) -> None:
        if version != self.timer_version:
            return
        self.timer_at = None
        self._advance()
        now = self.env.now
        done = []
        heap, served = self.heap, self.served
        tol = _time_tol(now)
        eps = self.rate * tol
        while heap:
            target, _, f = heap[0]
            if f.version != 1:
                heapq.heappop(heap)
                continue
            if target - served > eps + f.size * _REL_EPS + 8 * math.ulp(target):
                break
            heapq.heappop(heap)
            f.version = -1
            self.n -= 1
            done.append(f)
        pending = self.pending
        limit = now + tol
        if pending and pending[0][0] <= limit:
            if not self.n:
                self.served = served = 0.0
            while pending and pending[0][0] <= limit:
                f = heapq.heappop(pending)[2]
                if f.version < 0:
                    continue
                if f.size == 0:
                    f.version = -1
                    done.append(f)
                    continue
                f.version = 1
                f.target = served + f.size
                heapq.heappush(heap, (f.target, f.seq, f))
                self.n += 1
        self._set_rate()
        self._arm()
        if len(done) > 1:
            done.sort(key=lambda f: f.seq)
        for f in done:
            self.inflight[f.worker] = 0
            f.transfer._part_done(f.group, now)

    def _arm(self) -> None:
        heap, pending = self.heap, self.pending
        while heap and heap[0][2].version != 1:
            heapq.heappop(heap)
        nxt = self.t + (heap[0][0] - self.served) / self.rate if heap else _INF
        while pending and pending[0][2].version < 0:
            heapq.heappop(pending)
        if pending and pending[0][0] < nxt:
            nxt = pending[0][0]
        if nxt != self.timer_at:
            self._set_timer(nxt)

    _set_timer = _FastDirection._set_timer


# ---- the reference model ---------------------------------------------------------------------


class _ExactDirection:
    """One ``Network`` flow per (worker, shard) over a ``SwitchFabric``."""

    def __init__(self, net: Network, fabric: SwitchFabric, groups: list[list[int]], pull: bool):
        self.net, self.fabric, self.groups, self.pull = net, fabric, groups, pull

    def transfer(self, tr: Transfer, parts: Sequence[tuple[int, float]]) -> None:
        w = f"w{tr.worker}"
        tr.left = len(parts)
        for g, size in parts:
            shards = self.groups[g]
            left = [len(shards)]

            def one_done(_ev: Any, g: int = g, left: list = left) -> None:
                left[0] -= 1
                if left[0] == 0:
                    tr._part_done(g, self.net.env.now)

            for k in shards:
                src, dst = (f"ps{k}", w) if self.pull else (w, f"ps{k}")
                tag = "pull" if self.pull else "push"
                ev = self.net.transfer(self.fabric.route(src, dst), size, src, dst, tag)
                ev.callbacks.append(one_done)

    def cancel(self, tr: Transfer) -> None:
        tr.cancelled = True  # flows already sent keep their bandwidth; arrivals are ignored


# ---- the facade ------------------------------------------------------------------------------


class PSNetwork:
    """Pulls and pushes between ``len(worker_nics)`` workers and PS shards grouped by ``groups``.

    ``groups`` lists the shard indices of each group; in fast mode the shards of a group must
    have equal NICs and every part sent to a group carries the same bytes to each of its shards
    (the caller groups shards with equal bytes). Raises ValueError for an unknown mode, a shard
    in no group or in two, or unequal NICs within a group in fast mode.
    """

    def __init__(
        self,
        env: simpy.Environment,
        worker_nics: Sequence[Nic],
        ps_nics: Sequence[Nic],
        groups: Sequence[Sequence[int]],
        mode: str = "fast",
    ):
        if mode not in ("fast", "exact"):
            raise ValueError(f"network mode must be 'fast' or 'exact', got {mode!r}")
        groups = [list(g) for g in groups]
        flat = sorted(k for g in groups for k in g)
        if flat != list(range(len(ps_nics))) or any(not g for g in groups):
            raise ValueError(
                f"groups {groups} must partition the shards 0..{len(ps_nics) - 1} without empties"
            )
        self.env = env
        self.mode = mode
        self.groups = groups
        self.worker_nics = list(worker_nics)
        self.ps_nics = list(ps_nics)
        if mode == "fast":
            for g in groups:
                if len({ps_nics[k] for k in g}) != 1:
                    raise ValueError(f"fast mode: shards {g} of one group need equal NICs")
            wbw = [n.bandwidth_bytes_per_s for n in worker_nics]
            wlat = [n.latency_s / 2 for n in worker_nics]
            gbw = [ps_nics[g[0]].bandwidth_bytes_per_s for g in groups]
            glat = [ps_nics[g[0]].latency_s / 2 for g in groups]
            mult = [len(g) for g in groups]
            if len(groups) == 1 and len(set(wbw)) == 1:
                args = (env, wbw[0], wlat, gbw[0], mult[0], glat[0])
                self._pull: Any = _OneQueue(*args)
                self._push: Any = _OneQueue(*args)
            else:
                self._pull = _FastDirection(env, wbw, wlat, gbw, mult, glat)
                self._push = _FastDirection(env, wbw, wlat, gbw, mult, glat)
            self.network = None
            self.fabric = None
        else:
            self.network = Network(env)
            hosts = {f"ps{k}": n for k, n in enumerate(ps_nics)}
            hosts.update({f"w{i}": n for i, n in enumerate(worker_nics)})
            self.fabric = SwitchFabric(self.network, hosts)
            self._pull = _ExactDirection(self.network, self.fabric, groups, pull=True)
            self._push = _ExactDirection(self.network, self.fabric, groups, pull=False)

    def pull(
        self, worker: int, parts: Sequence[tuple[int, float]], on_part: OnPart | None = None
    ) -> Transfer:
        """Worker ``worker`` reads ``bytes`` from each shard of each (group, bytes) part."""
        return self._start(self._pull, worker, parts, on_part)

    def push(
        self, worker: int, parts: Sequence[tuple[int, float]], on_part: OnPart | None = None
    ) -> Transfer:
        """Worker ``worker`` sends ``bytes`` to each shard of each (group, bytes) part."""
        return self._start(self._push, worker, parts, on_part)

    def cancel(self, transfer: Transfer) -> None:
        """Abandon a transfer (its worker or PS died): it never completes; in fast mode its flows
        leave the links now, in exact mode they run on but their arrival is ignored."""
        if not (transfer.event.triggered or transfer.cancelled):
            transfer.direction.cancel(transfer)

    def _start(self, direction: Any, worker: int, parts: Any, on_part: Any) -> Transfer:
        if not 0 <= worker < len(self.worker_nics):
            raise ValueError(f"unknown worker {worker}; this network has {len(self.worker_nics)}")
        tr = Transfer(self.env.event(), worker, on_part, direction)
        if not parts:
            tr.event.succeed()
            return tr
        direction.transfer(tr, parts)
        return tr

    def send(self, src_worker: int, dst_worker: int, nbytes: float) -> simpy.Event:
        """A worker-to-worker flow (exact mode only; the fast ring uses ``ring_allreduce_time``)."""
        if self.network is None:
            raise RuntimeError("PSNetwork.send needs mode='exact'")
        route = self.fabric.route(f"w{src_worker}", f"w{dst_worker}")
        return self.network.transfer(route, nbytes, f"w{src_worker}", f"w{dst_worker}", "ring")


def ring_allreduce_time(nbytes: float, nics: Sequence[Nic]) -> float:
    """Seconds for a ring all-reduce of ``nbytes`` per worker among workers with ``nics``, all
    starting together: 2(N-1) rounds; in each, worker i sends a chunk of nbytes/N to worker i+1.

    Worker i sends round r once it has received round r-1 from worker i-1 and finished sending
    round r-1; every link carries one flow at a time, so each send takes the flow's latency
    (half of each NIC's) plus chunk / min(up_i, down_{i+1}). Equal NICs (W, L) give
    2(N-1)(L + nbytes/(N W)).
    """
    n = len(nics)
    if n <= 1:
        return 0.0
    bw = np.array([x.bandwidth_bytes_per_s for x in nics])
    half = np.array([x.latency_s / 2 for x in nics])
    nxt = np.roll(np.arange(n), -1)
    d = half + half[nxt] + (nbytes / n) / np.minimum(bw, bw[nxt])  # send i -> i+1
    start = np.zeros(n)
    for r in range(2 * (n - 1)):
        arrive = start + d  # round r from i lands at i+1
        got = np.roll(arrive, 1)  # worker i has round r from i-1
        if r == 2 * (n - 1) - 1:
            return float(got.max())
        start = np.maximum(got, arrive)
    return 0.0  # pragma: no cover
