"""Steady-state steps: a simulated step that is the same as the one before it is not simulated
again, its outcome is.

A training loop runs one step many times. In a shape-only simulation (no hybrid values) such a
step is a pure function of what it runs (the plan, the shapes fed), of how the cluster prices it
(each device's cost model and plans, each link's rate and latency) and of the state the cluster
is in when it starts. When every device, host and link is idle at its start and nothing else is
scheduled on the clock, that state is the same for every step but for the clock's reading: the
step's timeline is the previous one's, shifted in time.

``StepReplay`` (one per ``SimSession``) keeps the outcome of the last step simulated in full
that could be replayed: each device's records, busy time, memory peak and the clock readings it
left (busy until, message handler free, host cores free), each link's bytes and busy time, the
network's flow records, and the fetched values. A later step with the same key that starts idle
is replayed: the clock advances by the step's span, the devices, hosts, links and flow records
are left as the simulation would have left them, shifted by the time between the two starts,
and the fetched values are returned. Nothing is computed twice: the replay applies what the one
schedule (``runtime/executor.run_step``) and the one network model produced.

Guards, each of which sends a step through the full simulation:
* a plan whose outcome may depend on state the replay does not carry: control flow (loops,
  conditionals), queues and accumulators (their contents change from step to step), collectives,
  any asynchronous kernel other than Send/Recv, and devices computing real values (hybrid);
* a step that does not start idle (a device, host or link still busy, or anything scheduled on
  the clock: other processes, failures), or whose template did not end idle (work booked past
  its end, memory not given back);
* a key that differs: another plan, other feed shapes or dtypes (or values, for small integer
  arrays: the devices' plan signature),
  a device with another perf object, whose plans were forgotten since (a new cost model or
  precision, hybrid switched) or with other memory (capacity, variables, tensors held), a link
  whose rate or latency changed. A perf changed in place is not seen (a device's kernel plans
  do not see it either: give the device a new perf, or a new cost model);
* a template is used only once a second full step with its key gave the same outcome (times
  within 1e-9 of the span): a state dependence the guards above missed shows up there.

Times of a replayed step are the template's plus the shift: equal to a full simulation's to
within rounding (a full step adds its durations to another clock reading). The clock processes
one event for a replayed step (``SimClock.advance``), and the network's own counters
(``recomputations``) do not move.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from hetbed.devices.simulated import (
    _CONTROL_OPS,
    _SYNC_STATE_OPS,
    WAKE_AFTER_WAIT,
    WORK_AFTER_WAIT,
    SimulatedDevice,
    SimValue,
    _signature,
)

#: op types whose outcome depends on state kept from one step to the next
_STATEFUL = _CONTROL_OPS | _SYNC_STATE_OPS | WAKE_AFTER_WAIT | WORK_AFTER_WAIT
#: the asynchronous kernels a replayable step may hold (its transfers)
_TRANSFERS = frozenset(("_Send", "_Recv"))
#: the flow records' fields that are clock readings
_FLOW_TIMES = ("start_s", "first_byte_s", "end_s")
#: how close two full steps' times must be (a fraction of the span) to count as the same step
_SAME = 1e-9


def replayable_plan(prep: Any) -> bool:
    """Whether a step of ``prep`` (a PreparedGraph) can be replayed (see the module docstring):
    no control flow, no kernel whose outcome depends on state kept between steps, no
    asynchronous kernel but Send/Recv, every node on a simulated device (shape-only: the key
    checks that, ``StepReplay._key``)."""
    if prep.frames is not None:
        return False
    for n in list(prep.nodes) + list(getattr(prep, "extra_nodes", ())):
        t = n.op.type
        if t in _STATEFUL:
            return False
        if n.is_async:
            if t not in _TRANSFERS:
                return False
        elif not isinstance(n.device, SimulatedDevice):
            return False
    return True


def _feed_key(v: Any) -> Any:
    """What of a fed value a step's outcome depends on in shape-only mode: its shape and dtype,
    and its values when it is a small integer array (the devices' plan signature: shape
    arithmetic); None for a value of another kind (no replay)."""
    cls = v.__class__
    if cls is SimValue:
        return v.sig
    if cls is np.ndarray:
        return _signature(v)
    if isinstance(v, np.generic):
        return (v.dtype.str, v.item())
    return None


class _Template:
    """One full step's outcome (see the module docstring)."""

    __slots__ = ("key", "span", "outputs", "devices", "hosts", "links", "flows", "same")

    def __init__(self, key, span, outputs, devices, hosts, links, flows):
        self.key = key
        self.span = span
        self.outputs = outputs
        #: (device, records, busy_s, narrow_s added, peak_bytes, busy_until, handler_free,
        #: handler_owner), every time from the step's start (the clock readings None where the
        #: step left them alone)
        self.devices = devices
        self.hosts = hosts  # (HostCores, all_free from the start) of each host the step booked
        self.links = links  # network books -> (bytes, busy seconds) the step added
        self.flows = flows  # the network's flow records of the step (times from its start)
        self.same = False  # a second full step gave the same outcome

    def matches(self, other: _Template) -> bool:
        """Whether ``other`` (a later full step with the same key) had the same outcome."""
        tol = _SAME * max(self.span, other.span)
        if abs(self.span - other.span) > tol or len(self.devices) != len(other.devices):
            return False
        for a, b in zip(self.devices, other.devices):
            if a[0] is not b[0] or len(a[1]) != len(b[1]) or a[4] != b[4]:
                return False
            for (op0, b0, e0), (op1, b1, e1) in zip(a[1], b[1]):
                if abs(b0 - b1) > tol or abs(e0 - e1) > tol:
                    return False
                if op0 is not op1 and (op0.name != op1.name or op0.type != op1.type):
                    return False  # (messages are SoftwareWork made for each step)
        if len(self.flows) != len(other.flows) or self.links.keys() != other.links.keys():
            return False
        for f0, f1 in zip(self.flows, other.flows):
            if f0.keys() != f1.keys():
                return False
            for k, v0 in f0.items():
                v1 = f1[k]
                if k in _FLOW_TIMES:
                    if abs(v0 - v1) > tol:
                        return False
                elif v0 != v1:
                    return False
        for k, (b0, t0) in self.links.items():
            b1, t1 = other.links[k]
            if not math.isclose(b0, b1, rel_tol=1e-9, abs_tol=1e-6) or abs(t0 - t1) > tol:
                return False
        return True


class ShiftedRecords(Sequence):
    """A replayed step's records of one device: the template's ``(op, start, end)`` rows with
    ``at`` added to their times, made as they are read (a step's records are usually read
    once, if at all, as its RunRecord's frame). ``append`` makes them a list first."""

    __slots__ = ("_rows", "_at", "_list")

    def __init__(self, rows: list, at: float):
        self._rows, self._at, self._list = rows, at, None

    def _made(self) -> list:
        if self._list is None:
            at = self._at
            self._list = [(op, at + b, at + e) for op, b, e in self._rows]
        return self._list

    def __len__(self) -> int:
        return len(self._rows if self._list is None else self._list)

    def __getitem__(self, i: Any) -> Any:
        return self._made()[i]

    def __iter__(self) -> Iterator[tuple]:
        if self._list is not None:
            return iter(self._list)
        at = self._at
        return ((op, at + b, at + e) for op, b, e in self._rows)

    def append(self, row: tuple) -> None:
        self._made().append(row)


class StepReplay:
    """A SimSession's steady-state steps (see the module docstring). ``begin`` before a step's
    schedule runs replays it when it can (returns the fetched values) or notes where it starts;
    ``end`` after a full step keeps its outcome. ``replayed`` counts the steps replayed."""

    def __init__(self, cluster: Any):
        self.cluster = cluster
        self.template: _Template | None = None
        self.replayed = 0
        self._pending: tuple | None = None

    def _devices(self) -> list:
        return [d for d in self.cluster.devices() if isinstance(d, SimulatedDevice)]

    def _key(self, plan: Any, vals: list, devices: list) -> tuple | None:
        prep = plan.prepared
        ok = prep.extensions.get("replayable")
        if ok is None:
            ok = prep.extensions["replayable"] = replayable_plan(prep)
        if not ok:
            return None
        feeds = []
        for s in prep.feed_slots.values():
            k = _feed_key(vals[s])
            if k is None:
                return None
            feeds.append(k)
        state = []
        for d in devices:
            if d.hybrid:
                return None
            state.append((
                id(d.perf_spec),
                d.plan_generation,
                d.memory_limit_bytes,
                d.persistent_bytes,
                d.memory_in_use_bytes,
            ))  # fmt: skip
        links = self.cluster.network.links.values()
        return (
            id(plan),
            tuple(feeds),
            tuple(state),
            tuple((lk.bandwidth_bytes_per_s, lk.latency_s) for lk in links),
        )

    def _idle(self, devices: list) -> bool:
        """Whether nothing is under way: every device, message handler and host idle from now,
        no flow on the network and nothing scheduled on the clock."""
        env = self.cluster.env
        now = env.now
        if env.peek() != math.inf or self.cluster.network.active_flows:
            return False
        for d in devices:
            if d.busy_until > now or d.handler_free > now:
                return False
            hc = d.host_cores
            if hc is not None and hc.all_free > now:
                return False
        return True

    def begin(self, plan: Any, vals: list) -> list | None:
        """Before a step: its fetched values if it was replayed, else None (simulate it)."""
        self._pending = None
        devices = self._devices()
        key = self._key(plan, vals, devices)
        if key is None or not self._idle(devices):
            return None
        t = self.template
        if t is not None and t.same and t.key == key:
            return self._replay(t)
        network = self.cluster.network
        narrow = [d.narrow_s for d in devices]
        memory = [d.memory_in_use_bytes for d in devices]
        clocks = [(d.busy_until, d.handler_free) for d in devices]
        self._pending = (key, self.cluster.env.now, devices, narrow, memory, clocks,
                         len(network.records), network.books())  # fmt: skip
        return None

    def end(self, outputs: list) -> None:
        """After a full step that ``begin`` noted: keep its outcome (or drop the template when
        it did not end idle)."""
        p, self._pending = self._pending, None
        if p is None:
            return
        key, start, devices, narrow, memory, clocks, n_flows, books = p
        env, network = self.cluster.env, self.cluster.network
        end = env.now
        rows, hosts = [], {}
        for d, nw, mem, (bu, hf) in zip(devices, narrow, memory, clocks):
            hc = d.host_cores
            if d.busy_until > end or d.handler_free > end or d.memory_in_use_bytes != mem:
                self.template = None
                return
            if hc is not None:
                if hc.all_free > end:
                    self.template = None
                    return
                if hc.all_free > start:
                    hosts[id(hc)] = (hc, hc.all_free - start)
            rows.append((
                d,
                [(op, b - start, e - start) for op, b, e in d.records],
                d.busy_s,
                d.narrow_s - nw,
                d.peak_bytes,
                d.busy_until - start if d.busy_until != bu else None,
                d.handler_free - start if d.handler_free != hf else None,
                d.handler_owner,
            ))  # fmt: skip
        if env.peek() != math.inf or network.active_flows:
            self.template = None
            return
        after = network.books()
        links = {}
        for k, (b, busy) in after.items():
            b0, busy0 = books.get(k, (0.0, 0.0))
            if b != b0 or busy != busy0:
                links[k] = (b - b0, busy - busy0)
        flows = []
        for r in network.records[n_flows:]:
            r = dict(r)
            for k in _FLOW_TIMES:
                r[k] -= start
            flows.append(r)
        outputs = [v.copy() if isinstance(v, np.ndarray) else v for v in outputs]  # (the
        # caller's may be changed in place)
        new = _Template(key, end - start, outputs, rows, list(hosts.values()), links,
                        flows)  # fmt: skip
        old = self.template
        new.same = old is not None and old.key == key and old.matches(new)
        self.template = new

    def _replay(self, t: _Template) -> list:
        """Leave the cluster as a full simulation of ``t``'s step from now would (every time
        now + its offset in ``t``: none past the step's end, now + its span)."""
        env, network = self.cluster.env, self.cluster.network
        now = env.now
        for d, records, busy_s, narrow, peak, bu, hf, owner in t.devices:
            d.records = ShiftedRecords(records, now)
            d.busy_s = busy_s
            d.narrow_s += narrow
            d.peak_bytes = peak
            if bu is not None:
                d.busy_until = now + bu
            if hf is not None:
                d.handler_free = now + hf
            d.handler_owner = owner
        for hc, free in t.hosts:
            hc.clear(now + free)  # (every booking the step made ended by its end: see ``end``)
        network.add_to_books(t.links)
        if network.keep_records:
            network.records.add_shifted(t.flows, now)
        env.advance(now + t.span)
        self.replayed += 1
        return [v.copy() if isinstance(v, np.ndarray) else v for v in t.outputs]
