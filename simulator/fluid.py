"""Worker <-> PS-shard pulls and pushes through one non-blocking switch, for the step-level drivers.

``PSNetwork`` puts every worker and PS task on a ``SwitchFabric`` of the one network model
(``network.py``): a flow from host a to host b crosses ``a:nic:up`` and ``b:nic:down``, first
waits the two half latencies, then sends its bytes at its max-min fair rate. A pull or push
sends the same bytes to every shard of each PS group it names (a ``Network.bundle`` per group),
which is what lets the network solve it on symmetry classes:

- ``mode="fast"``: the network's ``classes`` solver. Shards are given in *groups* of
  interchangeable shards (same NIC, and every transfer sends the same bytes to each shard of a
  group); workers with the same NIC and the same groups in flight form a class, so a rate change
  costs O(classes x groups), not O(flows). Fit for hundreds of workers.
- ``mode="exact"``: the network's ``exact`` solver, one flow per (worker, shard). Shards of a
  group may then differ.

Both are the same bookkeeping (flows, latencies, per-link accounting) and the same progressive
filling; tests compare them. Incast emerges: n workers pushing to one shard share its downlink,
each at W/n. Directions are independent (full-duplex links): pulls use PS up and worker down
links, pushes worker up and PS down links. ``PSNetwork.network.link_frame()`` gives each link's
bytes and busy time. The ring all-reduce of ``AllReduceRing`` is the closed recurrence
``ring_allreduce_time`` (every link carries one flow at a time, so no sharing is solved); its
``network="exact"`` mode sends the chunks as flows of this network instead. Units: bytes, seconds,
bytes per second.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np
import simpy

from .network import Network
from .topology import Nic, SwitchFabric

__all__ = ["PSNetwork", "Transfer", "ring_allreduce_time"]

OnPart = Callable[[int, float], None]


class Transfer:
    """One worker's pull or push: one part per PS group. ``event`` succeeds when every part has
    arrived, or, where the transfer was made with ``on_done`` (``event`` None), ``on_done()`` is
    called then, at once; ``on_part(group, now)`` is called as each part arrives."""

    __slots__ = ("event", "left", "on_part", "on_done", "env", "worker", "flows", "cancelled",
                 "direction", "group")  # fmt: skip

    def __init__(
        self,
        env: simpy.Environment,
        worker: int,
        on_part: OnPart | None,
        direction: Any,
        on_done: Callable[[], None] | None = None,
    ):
        self.env = env
        self.event = env.event() if on_done is None else None
        self.on_done = on_done
        self.direction = direction
        self.worker = worker
        self.on_part = on_part
        self.left = 0
        self.flows: list[Any] = []  # the network's bundles, one per part
        self.cancelled = False

    @property
    def finished(self) -> bool:
        """Every part has arrived (the event, if any, has been triggered)."""
        return self.event.triggered if self.event is not None else self.left == 0

    def _part_done(self, group: int) -> None:
        if self.cancelled:
            return
        self.left -= 1
        if self.on_part is not None:
            self.on_part(group, self.env.now)
        if self.left == 0:
            self.flows = []  # no reference cycles left for the garbage collector
            if self.event is not None:  # (_finish, inlined)
                self.event.succeed()
            elif not self.cancelled:
                self.on_done()

    def _only_done(self, _record: Any = None) -> None:
        """The one part of a one-part transfer has arrived (``_part_done``, for ``group``; the
        bundle's flow calls it with its record, None: ``Network.bundle``'s ``ended``)."""
        if self.cancelled:
            return
        self.left = 0
        if self.on_part is not None:
            self.on_part(self.group, self.env.now)
        self.flows = []
        if self.event is not None:
            self.event.succeed()
        elif not self.cancelled:  # (on_part may have cancelled it: as ``_part_done``)
            self.on_done()

    def _finish(self) -> None:
        if self.event is not None:
            self.event.succeed()
        elif not self.cancelled:
            self.on_done()


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
        solver = "classes" if mode == "fast" else "exact"
        # (fast runs are long: per-flow records only in exact mode; links count bytes in both)
        self.network = Network(env, solver, keep_records=mode == "exact")
        hosts = {f"ps{k}": n for k, n in enumerate(ps_nics)}
        hosts.update({f"w{i}": n for i, n in enumerate(worker_nics)})
        self.fabric = fabric = SwitchFabric(self.network, hosts)
        net = self.network
        self._pull_groups = [
            net.link_group(f"g{g}:up", [fabric.uplink[f"ps{k}"] for k in ks])
            for g, ks in enumerate(groups)
        ]
        self._push_groups = [
            net.link_group(f"g{g}:down", [fabric.downlink[f"ps{k}"] for k in ks])
            for g, ks in enumerate(groups)
        ]
        self._worker_down = [fabric.downlink[f"w{i}"] for i in range(len(self.worker_nics))]
        self._worker_up = [fabric.uplink[f"w{i}"] for i in range(len(self.worker_nics))]
        # per direction (pull?): the workers' links, the groups, the flows' tag
        self._ways = {
            True: (self._worker_down, self._pull_groups, "pull"),
            False: (self._worker_up, self._push_groups, "push"),
        }

    def pull(
        self,
        worker: int,
        parts: Sequence[tuple[int, float]],
        on_part: OnPart | None = None,
        on_done: Callable[[], None] | None = None,
    ) -> Transfer:
        """Worker ``worker`` reads ``bytes`` from each shard of each (group, bytes) part. With
        ``on_done``, the transfer has no event: ``on_done()`` is called when the last part has
        arrived (a SimPy event fewer per transfer)."""
        return self._start(True, worker, parts, on_part, 0.0, on_done)

    def push(
        self,
        worker: int,
        parts: Sequence[tuple[int, float]],
        on_part: OnPart | None = None,
        delay: float = 0.0,
        on_done: Callable[[], None] | None = None,
    ) -> Transfer:
        """Worker ``worker`` sends ``bytes`` to each shard of each (group, bytes) part, leaving
        ``delay`` seconds from now (``Network.bundle``); ``on_done`` as ``pull``'s."""
        return self._start(False, worker, parts, on_part, delay, on_done)

    def cancel(self, transfer: Transfer) -> None:
        """Abandon a transfer (its worker or PS died): it never completes, and its flows leave
        the links now."""
        if not (transfer.finished or transfer.cancelled):
            transfer.cancelled = True
            for bundle in transfer.flows:
                self.network.cancel(bundle)
            transfer.flows = []

    def _start(
        self,
        pull: bool,
        worker: int,
        parts: Any,
        on_part: Any,
        delay: float = 0.0,
        on_done: Callable[[], None] | None = None,
    ) -> Transfer:
        links, groups, tag = self._ways[pull]
        if not 0 <= worker < len(links):
            raise ValueError(f"unknown worker {worker}; this network has {len(self.worker_nics)}")
        tr = Transfer(self.env, worker, on_part, pull, on_done)
        if not parts:  # (nothing to send: done when it would have left)
            if delay or on_done is not None:
                self.env.timeout(delay).callbacks.append(lambda _e: tr.cancelled or tr._finish())
            else:
                tr.event.succeed()
            return tr
        tr.left = len(parts)
        link = links[worker]
        bundle, flows = self.network.bundle, tr.flows
        if len(parts) == 1:  # (one group: its bundle ends the transfer, no partial)
            ((g, size),) = parts
            tr.group = g
            done = tr._only_done
            flows.append(bundle(link, groups[g], size, done, pull, tag, delay, done))
            return tr
        part_done = tr._part_done
        for g, size in parts:
            flows.append(bundle(link, groups[g], size, partial(part_done, g), pull, tag, delay))
        return tr

    def send(self, src_worker: int, dst_worker: int, nbytes: float) -> simpy.Event:
        """A worker-to-worker flow (exact mode only; the fast ring uses ``ring_allreduce_time``)."""
        if self.mode != "exact":
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
