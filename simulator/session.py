"""``SimSession``: run the very same graph, placed and partitioned as for real, on a simulated
cluster. Only the devices (simulated ones on a SimPy clock), the rendezvous (Send/Recv become
network flows) and the executor's wait (advance the clock) differ from ``hb.Session``.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from hetbed.devices.memory import BufferAccounting, charges_of
from hetbed.devices.simulated import (
    SimulatedDevice,
    SimValue,
    SoftwareWork,
    book_copy,
    value_nbytes,
)
from hetbed.runtime.errors import FailedPreconditionError
from hetbed.runtime.executor import run_step
from hetbed.runtime.session import BaseSession, ConfigProto

from .gcguard import relaxed_gc
from .records import RunRecord
from .rendezvous import SimRendezvous, _task
from .steady import StepReplay


class SimSession(BaseSession):
    """A Session whose devices are the simulated devices of ``cluster``.

    ``run`` returns the fetched values (real numbers in hybrid mode, ``SimValue`` shape-only
    placeholders otherwise) and leaves the step's ``RunRecord`` in ``last_record``. Feeds may be
    real arrays or ``SimValue``s (only their shapes matter without hybrid mode). ``precision``
    ("float32", "tf32", "mixed_float16", "mixed_bfloat16"; see devices/costmodel.py) sets the
    precision the cluster's devices price float32 models in (``Cluster.set_precision``).

    On a cluster of several tasks a step is what the distributed runtime does: ``client`` names
    the task whose process runs the session (default: the first ``/job:worker`` task, else the
    first task), or a list of tasks for between-graph replication written as one graph (each
    client calls its own task and every other task of the step). An entry ``(task, [tasks])``
    is one more session in ``task``'s process that calls only the tasks listed (those of them
    in the step), as the chief's queue runner of a SyncReplicasOptimizer calls the PS tasks
    holding its accumulators; it makes its calls first (a queue runner calls again as soon as
    its last step is done, before its process's next step). Each call is a RunGraph
    request and reply, and each tensor crossing tasks a RecvTensor request and reply: messages
    that cost CPU time at both ends (the catalog's ``message_overhead_s`` and
    ``message_overhead_s_per_byte`` of each task's cpu, queued on its host's cores) besides the
    network's latency and bytes. A cluster of one task is a local session: no messages.

    Memory stays bounded over any number of steps: ``records`` keeps the RunRecords of the last
    ``keep_records`` steps (default 100; None keeps all), ``step_times`` the simulated time of
    every step (8 bytes each), and ``on_record(record)``, when given, receives every step's
    RunRecord as it is made (to stream them to disk or an aggregator). With a bound, the
    cluster network's own flow list (``network.records``, ``flow_frame()``) is trimmed to the
    current step's flows after each step; each kept RunRecord holds its own.

    ``replay_steps`` (default True): a shape-only step the same as the last two, starting with
    the cluster idle, is replayed from the last one's outcome instead of simulated again
    (simulator/steady.py: every record, device clock and link total as the simulation leaves
    them, to within rounding; ``steady.replayed`` counts them); False simulates every step.

    ``shared_resources``: the session's variables, queues and accumulators live in the
    cluster's tasks, shared with every other such session of the cluster (as a real cluster's
    servers keep them for every client), not in the session. Between-graph replication op by
    op: one such session per client (each its own graph), run at once by
    ``hetbed.simulator.run_clients`` (simulator/concurrent.py); a session run there keeps, in
    its RunRecords, its own ops and no flows or device rows.
    """

    def __init__(
        self,
        cluster: Any,
        graph: Any = None,
        config: ConfigProto | None = None,
        keep_records: int | None = 100,
        on_record: Callable[[RunRecord], Any] | None = None,
        precision: str | None = None,
        client: str | list[str] | None = None,
        shared_resources: bool = False,
        replay_steps: bool = True,
    ):
        if keep_records is not None and (
            isinstance(keep_records, bool) or not isinstance(keep_records, int) or keep_records < 1
        ):
            raise ValueError(
                f"SimSession: keep_records must be an int >= 1 or None, got {keep_records!r}"
            )
        self.cluster = cluster
        if precision is not None:  # (the cluster's devices: see Cluster.set_precision)
            cluster.set_precision(precision)
        super().__init__("", graph, config)
        self.last_record: RunRecord | None = None
        self.keep_records = keep_records
        self.on_record = on_record
        #: the RunRecords of the last ``keep_records`` steps, oldest first
        self.records: deque[RunRecord] = deque(maxlen=keep_records)
        #: the simulated time of every step run, in order
        self.step_times: list[float] = []
        self._charged_vars: set[str] = set()
        if shared_resources:  # the tasks' resources: the cluster's, for every shared session
            if not hasattr(cluster, "shared_resources"):
                cluster.shared_resources = ({}, set())
            self._resources, self._charged_vars = cluster.shared_resources
        self._parsed_keys: dict[str, tuple] = {}  # rendezvous key -> route and names
        self.clients = self._clients(client)
        self._called: dict[tuple[str, str], float] = {}  # see SimRendezvous.called
        self._waits: dict[object, float] = {}  # messages ``_later`` holds: when each arrives
        #: steady-state steps (simulator/steady.py): None simulates every step in full
        self.steady = StepReplay(cluster) if replay_steps else None

    def _clients(self, client: Any) -> list[tuple[str, tuple[str, ...] | None]]:
        """The sessions running this session's steps (see ``run``), each (its task, the tasks
        it alone calls, or None: every task of the step); [] when the cluster has one task (a
        local session: no RPCs)."""
        tasks = list(getattr(self.cluster, "tasks", []))
        if client is None:
            if len(tasks) <= 1:
                return []
            client = next((t for t in tasks if t.startswith("/job:worker/")), tasks[0])
        chosen = [client] if isinstance(client, (str, tuple)) else list(client)
        out: list[tuple[str, tuple[str, ...] | None]] = []
        for c in chosen:
            calls = None
            if isinstance(c, tuple):
                if len(c) != 2 or isinstance(c[1], str):
                    raise ValueError(
                        f"SimSession: a client entry must be a task or (task, [tasks it calls]), "
                        f"got {c!r}"
                    )
                c, calls = c[0], tuple(c[1])
                for t in calls:
                    if t not in tasks:
                        raise ValueError(
                            f"SimSession: client {c!r} calls {t!r}, which is not a task of the "
                            f"cluster {tasks}"
                        )
            if c not in tasks:
                raise ValueError(f"SimSession: client {c!r} is not a task of the cluster {tasks}")
            out.append((c, calls))
        return out

    def _make_devices(self) -> list:
        devs = list(self.cluster.devices())
        if not devs:
            raise ValueError("the simulated cluster has no devices")
        self._sim_devices = [d for d in devs if isinstance(d, SimulatedDevice)]
        return devs

    def _process_of(self) -> Any:
        # the simulated tasks are processes: a loop spanning them gets control loops fed its
        # predicate every iteration, messages included, as on a real cluster
        return lambda d: _task(d.name)

    def _rendezvous(self) -> Any:
        cpu_of = getattr(self.cluster, "task_cpu", None)
        self._rdv = SimRendezvous(
            self.cluster.network,
            self.cluster.route,
            self._parsed_keys,
            cpu_of,
            self._called,
            getattr(self.cluster, "collective", "ring"),
        )
        self._rdv.owner = self
        return self._rdv

    def _execute(self, plan: Any, vals: list, step: Any, observer: Any, options: Any) -> list:
        """Every node runs on a simulated device's clock or is asynchronous (Send/Recv, queues):
        the executor's clocked schedule, with memory accounting through the buffer lifetimes.
        A wall-clock tracer is not used: a traced step's stats are its simulated ops and flows
        (see ``run``)."""
        prep = plan.prepared
        conductor = self._conductor()
        replay = self.steady if conductor is None else None
        if replay is not None:
            out = replay.begin(plan, vals)
            if out is not None:  # the same step as the last two: replayed
                return out
        observer = BufferAccounting(prep, prep.extensions["sim"])
        fed = {
            t: sum(value_nbytes(vals[s]) for s in slots)
            for t, slots in prep.extensions["fed_to"].items()
        }
        calls = self._run_graph_requests(prep.extensions["tasks"], gate=conductor is None, fed=fed)
        clock = self.cluster.env
        if conductor is not None:  # one of several clients: its step starts once its calls
            clock = conductor.clock()  # have arrived (its own task's last), on its own clock
            self._settle(conductor)
            conductor.sleep_until(max(self._called.values(), default=clock.now))
            self._own_ops = {n.op for n in prep.nodes}  # (what its records keep)
        fetched_from = prep.extensions["fetched_from"]

        def fetched(cpu: Any) -> int:  # (read once the step has ended)
            slots = fetched_from.get(_task(cpu.name), ())
            return sum(value_nbytes(vals[s]) for s in slots)

        replies = None
        if (
            conductor is not None
            and prep.frames is None
            and len({c[1] for c in calls}) == len(calls)
        ):
            # each task replies as its part of the step ends, not once the whole step has
            replies = observer = _Replying(
                observer, self, calls, prep.nodes, prep.extensions["fetched_outs"]
            )
        run_step(prep, vals, step, clock, observer)
        if calls:
            self._run_graph_replies(calls, conductor, replies, fetched)
        out = [vals[s] if s is not None else None for s in prep.fetch_slots]
        if replay is not None:
            replay.end(out)
        return out

    def _conductor(self) -> Any:
        """The conductor running this thread as one of the cluster's clients (``run_clients``),
        else None."""
        c = getattr(self.cluster, "conductor", None)
        return c if c is not None and c.client() is not None else None

    def _run_graph_requests(
        self, tasks: list[str], gate: bool = True, fed: dict[str, int] | None = None
    ) -> list[tuple]:
        """The step's RunGraph calls, as in the real runtime: each client spends its host's
        ``step_s`` (the catalog's ``step_overhead_s``: Session.run's own work), then calls
        RunGraph on every task of the step that is not a client, then on its own task; a
        request is a message,
        sent by the client's CPU and received by the task's (``DevicePerf.control_s`` each, or
        ``own_control_s`` for a call to the client's own task, both ends in its process:
        ``_control``; handled in time order on their hosts' cores) after the route's latency,
        and the task's devices start the step only then (``gate``; a concurrent client's step waits for its
        calls instead, ``_execute``). A request carries the values fed to its task (``fed``:
        task -> bytes), as the runtime streams them after it (``_stream``). Returns the
        calls for ``_run_graph_replies``."""
        clients = self.clients
        if not clients:
            return []
        cluster, now = self.cluster, self.cluster.env.now
        work = SoftwareWork("RunGraph", "RunGraph")
        self._called.clear()
        callers = {c for c, _ in clients}
        calls: list[tuple] = []
        started: set[str] = set()  # tasks whose devices a call has started
        # any second session of a process (a queue runner's) first: in a steady state it calls
        # again as soon as its last step is done (an update), before the process's own next step
        for phase in ([e for e in clients if e[1]], [e for e in clients if e[1] is None]):
            heap: list[tuple] = []
            for c, only in phase:
                master = cluster.task_cpu(c)
                if only is None:
                    targets = [t for t in tasks if t not in callers] + ([c] if c in tasks else [])
                else:
                    targets = [t for t in tasks if t in only]
                targets = [(t, cluster.task_cpu(t)) for t in targets]
                targets = [(t, cpu) for t, cpu in targets if cpu is not None]
                if master is not None and targets:  # (after the client's own work for a step)
                    work_c = SoftwareWork(c, "Session.run")
                    begin = master.occupy(now, master.perf_spec.step_s, work_c, self)
                    heapq.heappush(heap, (begin, len(heap), "send", master, targets))
            self._calls(heap, work, calls, started if gate else None, not gate, fed or {})
        return calls

    def _calls(
        self,
        heap: list[tuple],
        work: Any,
        calls: list[tuple],
        started: set,
        defer: bool = False,
        fed: dict[str, int] | None = None,
    ) -> None:
        """The RunGraph requests of ``heap``'s clients, in time order (``_run_graph_requests``);
        appends each call to ``calls``, and each task whose devices it starts to ``started``.
        ``defer`` (a concurrent client): each task handles the request when it arrives
        (``_later``), in turn with what the other clients' steps bring it meanwhile."""
        seq = len(heap)
        while heap:
            t, _, kind, master, x = heapq.heappop(heap)
            seq += 1
            if kind == "send":  # the client sends its next request
                (task, cpu), rest = x[0], x[1:]
                nbytes = fed.get(task, 0) if fed else 0
                if master is cpu and not getattr(cpu, "loop_rate", 0.0):
                    nbytes = 0  # (its own runtime's stream to itself unknown: handed over)
                end_s = _control(master, cpu, master) + nbytes * master.perf_spec.message_s_per_byte
                sent = master.occupy(t, end_s, work, self)
                lat = self._latency(master, cpu)
                if nbytes:
                    sent = self._stream(master, cpu, sent, nbytes)
                heapq.heappush(heap, (sent + lat, seq, "recv", master, (task, cpu, lat, nbytes)))
                if rest:
                    heapq.heappush(heap, (sent, seq + 0.5, "send", master, rest))
            else:  # the task receives it: its devices may start (on the first client's call)
                task, cpu, lat, nbytes = x
                devices = self.cluster.task_devices(task)
                calls.append((master, cpu, lat, devices))
                if defer:
                    arrived = partial(self._call_arrived, master, task, cpu, work, -1.0, nbytes)
                    self._later(t, arrived)
                    continue
                got = self._call_arrived(master, task, cpu, work, t, nbytes)
                if started is not None and task not in started:
                    started.add(task)
                    for d in devices:
                        if d.busy_until < got:
                            d.busy_until = got

    def _call_arrived(
        self, master: Any, task: str, cpu: Any, work: Any, t: float = -1.0, nbytes: int = 0
    ) -> float:
        """Task ``task`` handles ``master``'s RunGraph request, arrived at ``t`` (default:
        now), and the ``nbytes`` fed to it; returns when it has."""
        perf = cpu.perf_spec
        at = self.cluster.env.now if t < 0 else t
        end_s = _control(master, cpu, cpu) + nbytes * perf.message_s_per_byte
        got = cpu.occupy(at, end_s, work, self)
        key = (task, _task(master.name))  # (a process's first call counts)
        if got < self._called.get(key, math.inf):
            self._called[key] = got
        return got

    def _later(self, t: float, fn: Callable[[], Any]) -> None:
        """Call ``fn()`` when the clock reads ``t`` (now if it has): a concurrent client's
        message is handled when it arrives, so that a task's handler takes the messages of all
        the clients' steps in the order they arrive (one booked ahead would hold back any that
        arrived before it). ``_settle`` waits for them."""
        env = self.cluster.env
        if t <= env.now:
            fn()
            return
        token = object()
        self._waits[token] = t

        def fire(_event: Any) -> None:
            del self._waits[token]
            fn()

        env.timeout(t - env.now).callbacks.append(fire)

    def _settle(self, conductor: Any) -> None:
        """The calling client sleeps until every message ``_later`` holds has been handled."""
        env = self.cluster.env
        while self._waits:
            t = min(self._waits.values())
            if t <= env.now:  # (due now, not run yet: let the clock take it first)
                t = math.nextafter(env.now, math.inf)
            conductor.sleep_until(t)

    def _run_graph_replies(
        self,
        calls: list[tuple],
        conductor: Any = None,
        replies: _Replying | None = None,
        fetched: Callable[[Any], int] | None = None,
    ) -> None:
        """Each RunGraph's reply leaves its task when the task's last work of the step ends and
        reaches its client after the latency (handled in time order); the step ends with the
        last reply received. A reply carries the values the client fetches from that task
        (``fetched``: the task's cpu -> bytes), as the runtime streams them after it: priced
        as a request's fed values are, the other way (``_reply_out``, ``_reply_in``). (A
        concurrent client's: its own work, its graph's ops since its step began and its own
        messages, each sent as that task's part ends (``replies``, booked then: a reply booked
        once the whole step is done would queue behind messages its task handled meanwhile);
        it then sleeps until its last reply is in.)"""
        env = self.cluster.env
        heap, done_of = [], {}
        end = env.now
        for k, (master, cpu, lat, devices) in enumerate(calls):
            if replies is not None and cpu in replies.done:
                continue
            done = done_of.get(cpu)  # (a task called by several clients: once)
            if done is None:
                if conductor is None:
                    done = max(max((r[2] for r in d.records), default=0.0) for d in devices)
                else:
                    done = self._own_done(devices)
                done_of[cpu] = done
            nbytes = fetched(cpu) if fetched is not None else 0
            heap.append((done, k, True, master, cpu, lat, nbytes))
        heapq.heapify(heap)
        seq = len(heap)
        while heap:
            t, _, sending, master, cpu, lat, nbytes = heapq.heappop(heap)
            seq += 1
            if sending:
                sent, nbytes = self._reply_out(master, cpu, t, nbytes)
                heapq.heappush(heap, (sent + _reply_latency(master, cpu, lat), seq, False,
                                      master, cpu, lat, nbytes))  # fmt: skip
            else:
                end = max(end, self._reply_in(master, cpu, t, nbytes))
        if conductor is not None:
            if replies is not None:
                self._settle(conductor)
                end = max([end, *replies.received])
            conductor.sleep_until(end)
        elif end > env.now:
            env.advance(end)

    def _own_done(self, devices: list) -> float:
        """When this session's step's last work on ``devices`` (one task's) ends: its step's
        ops since it began and its rendezvous's messages there (concurrent clients)."""
        own, marks = self._own_ops, self._marks
        ends = self._rdv.ends if self._rdv is not None else {}
        done = 0.0
        for d in devices:
            for r in d.records[marks.get(d, 0) :]:
                if r[2] > done and r[0] in own:
                    done = r[2]
            done = max(done, ends.get(d, 0.0))
        return done

    def _stream(self, sender: Any, receiver: Any, sent: float, nbytes: int) -> float:
        """When the last of ``nbytes`` that ``sender`` streams after a RunGraph message sent
        at ``sent`` (a request's fed values, a reply's fetched ones) have left for
        ``receiver``'s task: the route's slowest link carries them (to its own task too, where
        its NIC is a loopback link, ``loop_rate``: hetbed's runtime streams them to itself over
        TCP; without one they are handed over in the process, free, as TensorFlow's local
        worker takes them), and between tasks of one machine its cores copy them at both ends
        meanwhile (``copy_shares``, as a RecvTensor's bytes)."""
        route = self.cluster.route(sender.name, receiver.name)
        rate = min((link.bandwidth_bytes_per_s for link in route), default=0.0)
        if not rate and sender is receiver:
            rate = getattr(sender, "loop_rate", 0.0)
        if not rate:
            return sent
        seconds = nbytes / rate
        hc = sender.host_cores
        if hc is not None and hc is receiver.host_cores:
            book_copy(hc, sent, seconds, (sender.copy_shares[0], receiver.copy_shares[1]))
        return sent + seconds

    def _reply_out(self, master: Any, cpu: Any, t: float, nbytes: int) -> tuple[float, int]:
        """Task ``cpu`` sends its RunGraph reply to ``master`` from ``t`` on, with ``nbytes``
        of fetched values (each byte ``message_s_per_byte`` at this end, then ``_stream``; none
        to its own client's task without a loopback link, as for fed values): (when the reply
        and its bytes have left, the bytes priced)."""
        if master is cpu and not getattr(cpu, "loop_rate", 0.0):
            nbytes = 0
        end_s = _control(master, cpu, cpu) + nbytes * cpu.perf_spec.message_s_per_byte
        sent = cpu.occupy(t, end_s, _REPLY, self)
        if nbytes:
            sent = self._stream(cpu, master, sent, nbytes)
        return sent, nbytes

    def _reply_in(self, master: Any, cpu: Any, t: float, nbytes: int) -> float:
        """``master`` handles task ``cpu``'s reply, arrived at ``t`` with ``nbytes`` of fetched
        values (``_reply_out``'s count); returns when it has."""
        end_s = _control(master, cpu, master) + nbytes * master.perf_spec.message_s_per_byte
        return master.occupy(t, end_s, _REPLY, self)

    def _latency(self, master: Any, cpu: Any) -> float:
        """A request's delay from ``master``'s host to ``cpu``'s: the route's links and, in
        another process, the receiving runtime's hand-over."""
        lat = sum(link.latency_s for link in self.cluster.route(master.name, cpu.name))
        if cpu is not master:
            lat += cpu.perf_spec.message_latency_s
        return lat

    def _build_plan(self, elements: list, fed: list) -> Any:
        plan = super()._build_plan(elements, fed)
        plan.prepared.straight_line = False  # every node goes through the simulated clock
        # Memory accounting (devices/memory.py): whether each node's outputs are new buffers or
        # views sharing their input's buffer; variables are charged once, apart.
        charges = charges_of(plan.prepared.nodes + plan.prepared.extra_nodes)
        for n in plan.prepared.nodes:
            if not (n.timed or n.is_async):
                raise FailedPreconditionError(f"{n!r} is not on a simulated device's clock")
            if n.op.type == "VariableV2" and n.op.name not in self._charged_vars:
                self._charged_vars.add(n.op.name)  # variables live on their devices for the run
                shape = n.op.outputs[0].shape
                if shape.is_fully_defined():
                    n.device.persistent_bytes += shape.num_elements() * n.op.outputs[0].dtype.size
        plan.prepared.extensions["sim"] = charges  # (read by ``_execute``)
        tasks: dict[str, None] = {}
        fed_to: dict[str, set[int]] = {}  # task -> the feed slots its part of the step takes
        slots = plan.prepared.feed_slots
        for n in plan.prepared.nodes:
            if n.device is not None:
                task = _task(n.device.name)
                tasks.setdefault(task)
                for t in n.op.inputs:
                    if t in slots:
                        fed_to.setdefault(task, set()).add(slots[t])
        produced = {}  # slot -> (its node, output position)
        for n in plan.prepared.nodes:
            if n.device is not None:
                for i, s in enumerate(n.outs):
                    if s is not None:
                        produced[s] = (n, i)
        fetched_from: dict[str, list[int]] = {}  # task -> the fetched slots its reply carries
        fetched_outs: dict[int, list[int]] = {}  # node index -> its fetched output positions
        for s in plan.prepared.fetch_slots:
            if s is not None and s in produced:
                n, i = produced[s]
                fetched_from.setdefault(_task(n.device.name), []).append(s)
                fetched_outs.setdefault(n.index, []).append(i)
        plan.prepared.extensions["tasks"] = list(tasks)
        plan.prepared.extensions["fed_to"] = {t: sorted(v) for t, v in fed_to.items()}
        plan.prepared.extensions["fetched_from"] = fetched_from
        plan.prepared.extensions["fetched_outs"] = fetched_outs
        return plan

    def _record_concurrent(self, devices: list, span: float, start: float) -> None:
        """A concurrent client's RunRecord: its step's own ops since it began (the devices and
        links are shared with the other clients: no rows for them)."""
        marks, own = self._marks, self._own_ops
        ops = [(d.name, [r for r in d.records[marks[d] :] if r[0] in own]) for d in devices]
        self.last_record = RunRecord(span, ops, [], [], [], start)
        self._keep(span)

    def _keep(self, span: float) -> None:
        self.records.append(self.last_record)
        self.step_times.append(span)
        if self.on_record is not None:
            self.on_record(self.last_record)

    def _resolve_feeds(self, feed_dict: dict) -> dict:
        shaped = {k: v for k, v in feed_dict.items() if isinstance(v, SimValue)}
        rest = super()._resolve_feeds({k: v for k, v in feed_dict.items() if k not in shaped})
        for k, v in shaped.items():
            el = self.graph.as_graph_element(k)
            if not el.shape.is_compatible_with(v.shape):
                from hetbed.runtime.errors import InvalidArgumentError

                raise InvalidArgumentError(
                    f"cannot feed shape {v.shape} for tensor {el.name!r}, which has shape {el.shape}"
                )
            rest[el] = v
        return rest

    def _to_host(self, v: Any) -> Any:
        return v if isinstance(v, SimValue) else super()._to_host(v)

    def run(
        self,
        fetches: Any,
        feed_dict: dict | None = None,
        options: Any = None,
        run_metadata: Any = None,
    ) -> Any:
        env = self.cluster.env
        devices = [d for d in self._devices if isinstance(d, SimulatedDevice)]
        concurrent = self._conductor() is not None
        for d in devices:
            if not concurrent:  # (a concurrent client leaves the others' records alone)
                d.reset_stats()
            d.busy_until = max(d.busy_until, env.now)
        if concurrent:  # (where this step's records begin on the shared devices)
            self._marks = {d: len(d.records) for d in devices}
        self._rdv = None  # (this step's, once made)
        network = self.cluster.network
        n_flows = len(network.records)
        start = env.now
        before = network.carried_bytes()
        with relaxed_gc():
            out = super().run(fetches, feed_dict, options, run_metadata)
        end = env.now
        span = end - start
        if concurrent:
            self._record_concurrent(devices, span, start)
            return out
        link_rows = []
        for name, carried in network.carried_bytes().items():
            moved = carried - before.get(name, 0.0)
            if moved > 0:
                bw = network.links[name].bandwidth_bytes_per_s
                link_rows.append((name, bw, moved, moved / (bw * span) if span > 0 else 0.0))
        dev_rows = [
            (
                d.name,
                d.device_type,
                d.busy_s,
                d.busy_s / span if span > 0 else 0.0,
                int(d.peak_bytes),
                int(d.memory_limit_bytes or 0),
            )
            for d in devices
        ]
        self.last_record = RunRecord(
            span,
            [(d.name, d.records) for d in devices],
            network.records[n_flows:],
            dev_rows,
            link_rows,
            start,
        )
        self._keep(span)
        if self.keep_records is not None and n_flows:
            del network.records[:n_flows]  # older steps' flows: their records hold their own
        if run_metadata is not None and getattr(options, "trace_level", 0) > 0:
            # A traced simulated step: its simulated ops and flows (not the host's wall clock).
            run_metadata.step_stats = self.last_record.ops
            run_metadata.flow_stats = self.last_record.flows
        return out


def sim_value(shape: Any, dtype: Any = np.float32) -> SimValue:
    """A shape-only feed value for pure simulation: ``sess.run(y, {x: sim_value([256, 784])})``.

    ``dtype`` is a numpy dtype or a hetbed one (``hb.string``: an object array's)."""
    from hetbed.runtime.dtypes import DType, as_dtype

    if isinstance(dtype, (DType, str)):
        dtype = as_dtype(dtype).np
    return SimValue(tuple(shape), dtype)


_REPLY = SoftwareWork("RunGraph reply", "RunGraph")


def _control(master: Any, cpu: Any, end: Any) -> float:
    """CPU seconds at ``end`` (one of the two) of a RunGraph request or reply between
    ``master`` (the client's cpu device) and ``cpu`` (the task's), priced by its perf:
    ``own_control_s`` when they are one task (the call stays in the client's process), else
    ``control_s``."""
    perf = end.perf_spec
    return perf.own_control_s if master is cpu else perf.control_s


def _reply_latency(master: Any, cpu: Any, lat: float) -> float:
    """A reply's delay from task ``cpu`` to its client ``master`` (``lat``: the request's):
    the route's links and, in another process, the client's runtime hand-over."""
    if cpu is master:
        return lat
    return lat + master.perf_spec.message_latency_s - cpu.perf_spec.message_latency_s


class _Replying:
    """A concurrent client's step observer (``SimSession._execute``): the step's buffer
    accounting (``inner``), and each called task's RunGraph reply, sent as the task's last
    node of the step finishes (at the end of its own work there: ``_own_done``) and handled
    by the client when it arrives (``SimSession._later``); ``done`` holds the replied tasks'
    cpus, ``received`` when the client has handled each reply."""

    def __init__(
        self,
        inner: Any,
        session: Any,
        calls: list[tuple],
        nodes: list,
        fetched_outs: dict[int, list[int]] | None = None,
    ):
        self.inner = inner
        self.session = session
        #: node index -> its outputs the client fetches; cpu -> their bytes so far (a task's
        #: reply leaves as its last node finishes, before the executor stores its outputs)
        self.fetched_outs = fetched_outs or {}
        self.fetched: dict[Any, int] = {}
        self.done: set[Any] = set()
        self.received: list[float] = []
        of_device = {}
        for call in calls:
            for d in call[3]:
                of_device[d] = call
        self.call_of = {}  # node index -> its task's call
        self.left: dict[Any, int] = {}  # cpu -> the task's nodes not finished yet
        for n in nodes:
            call = of_device.get(n.device)
            if call is not None:
                self.call_of[n.index] = call
                self.left[call[1]] = self.left.get(call[1], 0) + 1

    def node_started(self, node: Any) -> None:
        self.inner.node_started(node)

    def node_finished(self, node: Any, r: Any, released: Any = ()) -> None:
        self.inner.node_finished(node, r, released)
        call = self.call_of.get(node.index)
        if call is None:
            return
        cpu = call[1]
        for i in self.fetched_outs.get(node.index, ()):
            v = r if node.n_out == 1 else r[i]
            self.fetched[cpu] = self.fetched.get(cpu, 0) + value_nbytes(v)
        left = self.left[cpu] - 1
        self.left[cpu] = left
        if not left:
            self.done.add(cpu)
            self.session._later(self.session._own_done(call[3]), partial(self._send, call))

    def _send(self, call: tuple) -> None:
        master, cpu, lat, _devices = call
        session = self.session
        nbytes = self.fetched.get(cpu, 0)
        sent, nbytes = session._reply_out(master, cpu, session.cluster.env.now, nbytes)
        arrive = partial(self._receive, master, cpu, nbytes)
        session._later(sent + _reply_latency(master, cpu, lat), arrive)

    def _receive(self, master: Any, cpu: Any, nbytes: int = 0) -> None:
        now = self.session.cluster.env.now
        self.received.append(self.session._reply_in(master, cpu, now, nbytes))

    def step_finished(self, plan: Any, failure: Any) -> None:
        self.inner.step_finished(plan, failure)
