"""The ``classes`` solver's moves of senders between classes (see ``network.py``): a sender's
class is the set of groups it has bundles transferring to (and its link's bandwidth); the flows
of a class to a group are one lane of it. ``_reclass`` carries each flow's bytes left over to
its new lane and keeps the books of the sender links and groups they cross."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from operator import attrgetter
from typing import TYPE_CHECKING

from .netparts import Link, _Class, _Lane, _leave_at

if TYPE_CHECKING:
    from .network import Network

_index_of = attrgetter("_index")


def _reclass(net: Network, senders: Sequence[Link], now: float) -> None:
    """Move ``senders`` to the class of their current set of groups, carrying bytes left:
    one sender, or several in the same class (or none) with the same one group in flight (a
    step's pulls arriving or finishing together: ``Network._on_timer`` and ``_finish_due``),
    whose class and groups are then settled once, as one after another would leave them."""
    first = senders[0]
    old = first._cls
    flights = first._flights
    k = len(senders)
    new = None
    if flights:
        if len(flights) == 1:
            for g in flights:
                key = (first.cap, g._index)
        else:
            key = (first.cap, tuple(sorted([g._index for g in flights])))
        if old is not None and old.key == key:
            return
        new = net._classes.get(key)
        if new is None:
            new = net._classes[key] = _Class(key, first.cap, net._units)
            net._units += 1
            for g in sorted(flights, key=_index_of):
                lane = new.lanes[g] = _Lane(net._seq, now)
                lane.uses = [(new, g.m), (g, 0)]  # (the second weight: the class's senders)
                net._seq += 1
                new._lanes[lane] = None
        n0 = new.n
        n = new.n = n0 + k
        for g in flights:
            lane = new.lanes[g]
            m = g.m
            lane.uses[1] = (g, n)
            if now != lane.t:  # (lane.advance, inlined; the joins below read its clock)
                lane.served += lane.rate * (now - lane.t)
                lane.t = now
            served = lane.served
            e = g._lanes.get(lane)  # (g._join(lane, k, now), inlined)
            if e is None:
                g._lanes[lane] = [k, served]
            else:
                g._bytes += e[0] * (served - e[1])
                e[1] = served
                e[0] += k
            if not g._n:
                g._busy_from = now
            g._n += k
            heap = lane.heap
            for sender in senders:
                s_lanes = sender._lanes  # (sender._join(lane, m, now), inlined)
                e = s_lanes.get(lane)
                if e is None:
                    s_lanes[lane] = [m, served]
                else:
                    sender._bytes += e[0] * (served - e[1])
                    e[1] = served
                    e[0] += m
                if not sender._n:
                    sender._busy_from = now
                sender._n += m
                f = sender._flights[g]
                cur = f.lane
                if cur is None:
                    left = f.size
                else:
                    left = f.target - (cur.served + cur.rate * (now - cur.t))
                v = f.version = f.version + 1
                f.lane = lane
                target = f.target = served + left
                heapq.heappush(heap, (target, f.seq, v, f))
                if heap[0][3] is f:  # it finishes first: its lane's finish entry is stale
                    lane.version += 1
                    lane.armed = False
                n0 += 1
                if len(heap) > 2 * n0 + 64:  # drop stale entries
                    heap[:] = [e for e in heap if e[2] == e[3].version]
                    heapq.heapify(heap)
        net._dirty[new] = None
    elif old is None:
        return
    if old is not None:
        n = old.n = old.n - k
        for g, lane in old.lanes.items():
            m = g.m
            served = lane.served + lane.rate * (now - lane.t)  # (not advanced: as _join)
            for sender in senders:
                _leave_at(sender, sender._lanes, lane, m, served, now)
            _leave_at(g, g._lanes, lane, k, served, now)
            lane.uses[1] = (g, n)
        if n == 0:
            del net._classes[old.key]
            net._dirty.pop(old, None)
            old._lanes.clear()
            for g, lane in old.lanes.items():
                lane.version += 1  # (its last join took it off the group)
                net._dirty[g] = None
        else:
            net._dirty[old] = None
    for sender in senders:
        sender._cls = new
