"""Step programs: the timed schedule of a shape-only simulated step, without the values.

In a shape-only simulation (no device in hybrid mode) every value of a step is a placeholder
fixed by the shapes and dtypes of the feeds: the same feeds give the same placeholders, the same
kernel durations, the same transfer sizes, step after step. What changes from step to step is
the timing: when each device is free, which flows share a link. A ``StepProgram`` is what one
step of a prepared graph resolved for one signature of feeds (recorded while the executor's timed
schedule ran it): each node's device and duration, the bytes of each output, each Send's flow
(its links, latency and size) and the Recv it feeds. Running the program replays the executor's
timed schedule on that data -- the same ready order, the same device queues, the same clock
event order and the same fluid max-min network arithmetic as the executor's clocked schedule (``run_clocked``) with the
simulated devices and ``Network`` -- without computing values. Its results (every op's start
and end, every flow's record, link bytes and busy time, memory peaks, the clock) are the ones the
full schedule gives, to the last bit; tests compare the two on graphs with contention.

A program runs only when nothing else is on the clock (no flow in flight, no other SimPy event
but stale network timers) and its feeds' signatures and the devices' plans are those it was
recorded with; otherwise, or when the step would fail (simulated out of memory, a stuck step), it
returns None and changes nothing, and the session runs the full schedule, which raises the
usual errors.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetbed.devices import simulated
from hetbed.devices.memory import ALLOCATES
from hetbed.devices.simulated import SimValue, plan_key

from .network import Network

TIMED, SEND, RECV = 0, 1, 2  # node kinds of a program


class StepProgram:
    """The resolved data of one simulated step (see the module docstring); ``run`` replays it.

    Built by ``build`` from the trace the executor's clocked schedule (``run_clocked``) recorded; None when the step cannot be
    replayed without values (an asynchronous node other than Send/Recv, a hybrid device, a
    fetched value that is not a placeholder or an array).
    """

    __slots__ = ("generation", "devices", "dev", "ops", "links", "flows", "arrays")
    __slots__ += ("fetched", "network", "env", "steps")

    @classmethod
    def build(cls, prep: Any, trace: list, sent: dict, session: Any, fetched: list) -> Any:
        """A program from a recorded step, or None when the step is not replayable."""
        nodes = prep.nodes
        n = len(nodes)
        seen: dict[int, tuple] = {}
        for node, inputs, r in trace:
            seen[node.index] = (inputs, r)
        if len(seen) != n:
            return None
        for v in fetched:
            if not (v is None or v.__class__ is SimValue or v.__class__ is np.ndarray):
                return None
        self = cls()
        self.generation = simulated.generation()
        self.steps = 1  # steps of its signature so far (see SimSession.replay_after)
        self.fetched = [v.copy() if v.__class__ is np.ndarray else v for v in fetched]
        network: Network = session.cluster.network
        self.network = network
        self.env = session.cluster.env
        devices: dict[Any, int] = {}
        kind, dev, dur, ops, how = [], [], [], [], list(prep.extensions["sim"].charges)
        allocs: list = []
        sends: dict[str, int] = {}
        recvs: dict[str, int] = {}
        for i, nd in enumerate(nodes):
            d = nd.device
            if not isinstance(d, simulated.SimulatedDevice) or d.hybrid:
                return None
            dev.append(devices.setdefault(d, len(devices)))
            ops.append(nd.op)
            inputs, r = seen[i]
            if nd.timed:
                plan = nd.memo.get(plan_key(inputs)) if nd.memo is not None else None
                if plan is None:
                    return None
                kind.append(TIMED)
                dur.append(plan[0])
            elif nd.op.type == "_Send":
                kind.append(SEND)
                dur.append(0.0)
                sends[nd.ctx.attrs["key"]] = i
            elif nd.op.type == "_Recv":
                kind.append(RECV)
                dur.append(0.0)
                recvs[nd.ctx.attrs["key"]] = i
            else:
                return None  # queues, collectives: their values are needed
            allocs.append(_sizes(nd, r) if how[i] == ALLOCATES else ())
        if set(sends) != set(recvs) or set(sends) != set(sent):
            return None
        self.devices, self.dev, self.ops = list(devices), dev, ops
        slot_dev = [-1] * prep.n_slots
        for i, nd in enumerate(nodes):
            for s in nd.outs:
                if s is not None:
                    slot_dev[s] = dev[i]
        # Flows, over links numbered in the network's creation order (the max-min filling
        # breaks ties by it).
        parsed = session._parsed_keys
        used: dict[Any, None] = {}
        for key in sends:
            for link in parsed[key][0]:
                used[link] = None
        self.links = sorted(used, key=lambda link: link._index)
        link_id = {link: k for k, link in enumerate(self.links)}
        flow_of = [-1] * n
        paths, sizes, recv_of, latencies, self.flows = [], [], [], [], []
        crossing = [0] * len(self.links)
        for key, i in sends.items():
            path, src, dst, tag = parsed[key]
            latency = 0.0
            for link in path:  # summed in path order, as Network.transfer does
                latency += link.latency_s
                crossing[link_id[link]] += 1
            nbytes = sent[key]
            joined = network._checked_paths.get(path) or ">".join(link.name for link in path)
            flow_of[i] = flow_of[recvs[key]] = len(self.flows)
            paths.append([link_id[link] for link in path])
            sizes.append(float(nbytes))
            recv_of.append(recvs[key])
            latencies.append(latency)
            self.flows.append((src, dst, tag, nbytes, joined))
        i64, f64 = np.int64, np.float64
        self.arrays = (
            (
                np.array(kind, i64),
                np.array(dev, i64),
                np.array(dur, f64),
                *_csr([nd.ins for nd in nodes]),
                *_csr([nd.consumers for nd in nodes]),
                np.array(how, i64),
                *_csr([[s for s, _n in a] for a in allocs]),
                np.array([nb for a in allocs for _s, nb in a], i64),
                *_csr([[s for s in nd.outs if s is not None] for nd in nodes]),
                np.array(slot_dev, i64),
                np.array(flow_of, i64),
                np.array(prep.initial_pending, i64),
                np.array(prep.initial_refs, i64),
                np.array(prep.roots, i64),
                np.array([s for s in prep.fetch_slots if s is not None], i64),
            ),
            (
                *_csr(paths),
                np.array(sizes, f64),
                np.array(recv_of, i64),
                np.array(latencies, f64),
            ),
            (
                np.array([link.bandwidth_bytes_per_s for link in self.links], f64),
                max(crossing, default=1) or 1,
            ),
        )
        return self

    def run(self) -> list | None:
        """Replay the step; returns the fetched values, or None (nothing changed) when the
        program does not apply now or the step would fail."""
        if self.generation != simulated.generation():
            return None
        env, network = self.env, self.network
        if not network.quiescent(env):
            return None
        from . import replay  # numba: imported (and compiled, or loaded from its cache) on use

        devs, links = self.devices, self.links
        mem = (
            np.array([d.busy_until for d in devs], np.float64),
            np.array([d.busy_s for d in devs], np.float64),
            np.array([d.memory_in_use_bytes for d in devs], np.int64),
            np.array([d.peak_bytes for d in devs], np.int64),
            np.array([d.memory_limit_bytes or 0 for d in devs], np.int64),
            np.array([d.persistent_bytes for d in devs], np.int64),
        )
        lk = (
            self.arrays[2][0],
            np.array([link._load for link in links], np.float64),
            np.array([link._since for link in links], np.float64),
            np.array([link._bytes for link in links], np.float64),
            np.array([link._busy_s for link in links], np.float64),
            self.arrays[2][1],
        )
        ist = np.zeros(replay.N_IST, np.int64)
        ist[replay.SEQ] = network._seq
        ist[replay.TV] = network._timer_version
        n, nfl = len(self.ops), len(self.flows)
        out = (
            np.zeros(n),
            np.zeros(n),
            np.empty(n, np.int64),
            np.zeros(nfl),
            np.zeros(nfl),
            np.zeros(nfl),
            np.empty(nfl, np.int64),
        )
        ok, now, norder = replay.replay(env.now, self.arrays[0], self.arrays[1], lk, mem, ist, out)
        if not ok:
            return None
        # Commit: devices, links, the network, the clock.
        busy, busy_s, in_use, peak = (a.tolist() for a in mem[:4])
        for d, dev in enumerate(devs):
            dev.busy_until = busy[d]
            dev.busy_s = busy_s[d]
            dev.memory_in_use_bytes = in_use[d]
            dev.peak_bytes = peak[d]
        begin, end, order = out[0].tolist(), out[1].tolist(), out[2][:norder].tolist()
        ops, recs = self.ops, [dev.records for dev in devs]
        dev_of = self.dev
        for i in order:
            recs[dev_of[i]].append((ops[i], begin[i], end[i]))
        load, since, carried, busy_l = (a.tolist() for a in lk[1:5])
        for k, link in enumerate(links):
            link._load = load[k]
            link._since = since[k]
            link._bytes = carried[k]
            link._busy_s = busy_l[k]
        network._seq = int(ist[replay.SEQ])
        network.recomputations += int(ist[replay.RECOMP])
        network._timer_version = int(ist[replay.TV])
        network._timer_at = None
        network._finish = []
        start, first, last = out[3].tolist(), out[4].tolist(), out[5].tolist()
        flows, records = self.flows, network.records
        for f in out[6][: int(ist[replay.NFIN])].tolist():
            src, dst, tag, nbytes, joined = flows[f]
            records.append(
                {
                    "src": src,
                    "dst": dst,
                    "tag": tag,
                    "bytes": nbytes,
                    "start_s": start[f],
                    "first_byte_s": first[f],
                    "end_s": last[f],
                    "path": joined,
                }
            )
        env.advance(now)  # through this network's stale timers, if any (they do nothing)
        return [v.copy() if v.__class__ is np.ndarray else v for v in self.fetched]


def _csr(lists: list) -> tuple[np.ndarray, np.ndarray]:
    """(pointers, indices) of a list of int lists."""
    ptr = np.zeros(len(lists) + 1, np.int64)
    np.cumsum([len(x) for x in lists], out=ptr[1:])
    flat = [v for x in lists for v in x]
    return ptr, np.array(flat, np.int64)


def _sizes(node: Any, r: Any) -> tuple:
    """((slot, bytes), ...) of the new buffers a node's completion allocates."""
    if node.n_out == 1:
        s = node.outs[0]
        return ((s, getattr(r, "nbytes", 0) or 0),) if s is not None else ()
    if not node.n_out:
        return ()
    return tuple((s, getattr(v, "nbytes", 0) or 0) for s, v in zip(node.outs, r) if s is not None)
