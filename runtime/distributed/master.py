"""The master: ``hb.Session("grpc://host:port")`` places, partitions and runs steps on a cluster.

On construction it asks the target task for the cluster spec (GetStatus) and every task for its
devices. A step is planned once per (fetches, feeds): prune, place over all devices of all tasks
with the ordinary placer, partition with Send/Recv pairs, and register with each task one graph
holding its devices' subgraphs (``task_spec``). Running a step calls RunGraph on every task at
once with one step id; tasks exchange cross-task tensors themselves (RecvTensor), and the master
only feeds and collects fetches. When a task fails, the master aborts the step everywhere
(CleanupStep) and raises the first error that is not a consequence of the abort.
"""

from __future__ import annotations

import os
import queue
import secrets
import selectors
import socket
import time
from typing import Any

import numpy as np

from ... import devices as _devices
from ..errors import AbortedError, InvalidArgumentError, OpError
from ..graph import Graph, Operation, Tensor
from ..partition import Partitions, partition
from ..serialize import FORMAT, VERSION, _node_to_dict, encode_value
from ..session import ConfigProto, Session, pruned_order
from .cluster import ClusterSpec
from .server import TOKEN_ENV
from .wire import OutTensor, out_tensor, streamable, tensor_from_wire, tensor_to_wire
from .worker import task_of

GRPC_PREFIX = "grpc://"


class RemoteDevice(_devices.Device):
    """A device of another task, as the master's placer sees it (it never runs kernels here)."""

    def __init__(self, desc: dict):
        super().__init__(str(desc["name"]), desc.get("memory_limit_bytes"))
        self.device_type = str(desc.get("device_type") or "cpu")


class _TaskPart:
    __slots__ = ("task", "client", "handle", "feeds", "n_fetches", "n_recvs")

    def __init__(
        self, task: str, client: Any, handle: str, feeds: list, n_fetches: int, n_recvs: int = 0
    ):
        self.task = task
        self.client = client
        self.handle = handle
        self.feeds = feeds  # [(master tensor, name in the task's graph)]
        self.n_fetches = n_fetches
        self.n_recvs = n_recvs  # Recvs of tensors from other tasks: the step waits for them


class _DistPlan:
    __slots__ = ("prepared", "fed", "fetch_copy", "fetch_is_op", "multi_device", "parts", "source")

    def __init__(self, fed: list, fetch_is_op: list, parts: list, source: list):
        self.prepared = None
        self.fed = fed
        self.fetch_copy = [False] * len(fetch_is_op)
        self.fetch_is_op = fetch_is_op
        self.multi_device = len(parts) > 1
        self.parts = parts
        #: per fetch: None (an op), ("feed", tensor) or ("task", part index, fetch index)
        self.source = source


class DistributedSession(Session):
    """A Session whose devices are the tasks of a gRPC cluster; see the module docstring.

    ``token`` (default: the HETBED_CLUSTER_TOKEN environment variable) is sent with every call.
    With ``config.device_filters`` (TF1's ``["/job:ps", "/job:worker/task:1"]``) it contacts and
    places on only the tasks they match, and its own task: a worker then does not depend on the
    other workers being up. Raises UnauthenticatedError when the cluster rejects the token,
    UnavailableError when a task cannot be reached within ``connect_timeout_s``.
    """

    def __init__(
        self,
        target: str = "",
        graph: Graph | None = None,
        config: ConfigProto | None = None,
        token: str | None = None,
        connect_timeout_s: float = 30.0,
    ):
        if not isinstance(target, str) or not target.startswith(GRPC_PREFIX):
            raise InvalidArgumentError(f"target {target!r}: expected 'grpc://host:port'")
        self.target = target
        self._token = token if token is not None else os.environ.get(TOKEN_ENV) or None
        address = target[len(GRPC_PREFIX) :]
        from .client import WorkerClient

        main = WorkerClient(address, target, self._token)
        self._clients: dict[str, Any] = {}
        try:
            status = main.call("GetStatus", {}, timeout=connect_timeout_s)
            self.cluster = ClusterSpec(status.get("cluster") or {})
            self._task = str(status["task"])
            self._task_devices: dict[str, list[dict]] = {self._task: list(status["devices"])}
            main.task = self._task
            self._clients[self._task] = main
            filters = _task_filters(getattr(config, "device_filters", None))
            for job, idx, addr in self.cluster.tasks():
                task = f"/job:{job}/replica:0/task:{idx}"
                if task in self._clients or not _matches(filters, job, idx):
                    continue
                client = WorkerClient(addr, task, self._token)
                self._clients[task] = client
                st = client.call("GetStatus", {}, timeout=connect_timeout_s)
                self._task_devices[task] = list(st["devices"])
        except BaseException:
            for c in self._clients.values():
                c.close()
            main.close()
            raise
        self._handles: list[tuple[Any, str]] = []
        super().__init__("", graph, config)
        self._default_device = next(d for d in self._devices if task_of(d.name) == self._task)

    # ---- devices -------------------------------------------------------------------------
    def _make_devices(self) -> list:
        return [RemoteDevice(d) for descs in self._task_devices.values() for d in descs]

    # ---- planning ------------------------------------------------------------------------
    def placement(self, fetches: Any = None) -> Any:
        """Not available yet for a distributed session (the plan lives on the tasks)."""
        from ..errors import UnimplementedError

        raise UnimplementedError(
            "placement() is not available on a distributed session yet; build the same graph in "
            "a local Session with ConfigProto(virtual_devices=[...]) to inspect its placement"
        )

    def _build_plan(self, elements: list, fed: list[Tensor]) -> _DistPlan:
        fed_set = set(fed)
        order = pruned_order(elements, fed)
        placed = self._place(order)
        parts = partition(
            order,
            placed.__getitem__,
            compress=self._compress_rule(),
            process_of=lambda d: task_of(d.name),
        )
        tasks: dict[str, None] = {}
        for op in parts.order:
            tasks.setdefault(task_of(parts.device_of[op].name), None)
        source: list[Any] = [None] * len(elements)
        plan_parts: list[_TaskPart] = []
        for task in tasks:
            fetch_names: list[str] = []
            for i, e in enumerate(elements):
                if isinstance(e, Tensor) and e in fed_set:
                    source[i] = ("feed", e)
                elif isinstance(e, Tensor) and task_of(parts.device_of[e.op].name) == task:
                    source[i] = ("task", len(plan_parts), len(fetch_names))
                    fetch_names.append(e.name)
            spec, feeds = task_spec(task, parts, fed_set, fetch_names, self.graph.seed)
            # the task refuses (AbortedError) if it restarted since this session saw it
            spec["incarnation"] = next(
                (d.get("incarnation") for d in self._task_devices[task]), None
            )
            client = self._clients[task]
            handle = client.call("RegisterGraph", {"graph": spec})["handle"]
            self._handles.append((client, handle))
            plan_parts.append(
                _TaskPart(task, client, handle, feeds, len(fetch_names), len(spec["recvs"]))
            )
        for i, e in enumerate(elements):
            if isinstance(e, Tensor) and e in fed_set:
                source[i] = ("feed", e)
        return _DistPlan(fed, [isinstance(e, Operation) for e in elements], plan_parts, source)

    # ---- running -------------------------------------------------------------------------
    def _run_plan(self, plan: Any, feeds: dict, observer: Any = None, options: Any = None) -> list:
        from ..timeline import TracingObserver

        tracing = observer is not None and type(observer) is TracingObserver
        if observer is not None and not tracing:
            raise InvalidArgumentError(
                "a remote step takes no step observer (profiling, calibration): run those on a "
                "local session; RunOptions(trace_level=FULL_TRACE) does trace a remote step"
            )
        self._last_plan = plan
        ms = getattr(options, "timeout_in_ms", 0) or self.config.operation_timeout_in_ms
        timeout_s = ms / 1000.0 if ms > 0 else 0.0
        step_id = secrets.randbits(62) + 1  # unique across the masters sharing a task
        timeout = timeout_s + 10.0 if ms > 0 else None
        results: list[Any] = [None] * len(plan.parts)
        errors: list[BaseException] = []
        for k, reply, error in _run_parts(plan.parts, feeds, step_id, timeout_s, timeout, tracing):
            if error is not None:
                if not errors:
                    self._abort_step(plan, step_id, error)
                errors.append(error)
            else:
                results[k] = reply
        if errors:
            primary = next((e for e in errors if not isinstance(e, AbortedError)), errors[0])
            raise primary
        if tracing:  # each task's rows, on this session's clock, in the order they started
            for k, part in enumerate(plan.parts):
                trace = results[k].get("trace")
                if trace is not None:
                    try:
                        observer.add_remote(trace, f"RunGraph reply of {part.task}")
                    except ValueError as e:
                        raise InvalidArgumentError(str(e)) from None
            observer.rows.sort(key=lambda r: r["start_s"])
        fetched = []
        for k, part in enumerate(plan.parts):
            got = results[k].get("fetches")
            if not isinstance(got, list) or len(got) != part.n_fetches:
                raise InvalidArgumentError(f"RunGraph on {part.task}: bad fetches in the reply")
            fetched.append(  # (arrays the data channel streamed after the reply are read)
                [
                    v
                    if isinstance(v, (np.ndarray, np.generic))
                    else tensor_from_wire(v, f"fetch from {part.task}")
                    for v in got
                ]
            )
        out = []
        for src in plan.source:
            if src is None:
                out.append(None)
            elif src[0] == "feed":
                out.append(feeds[src[1]])
            else:
                out.append(fetched[src[1]][src[2]])
        return out

    def _abort_step(self, plan: _DistPlan, step_id: int, error: BaseException) -> None:
        req = {"step_id": step_id, "reason": f"another task failed: {error}"}
        for part in plan.parts:
            part.client.call_async("CleanupStep", req, 10.0, lambda *a: None)

    # ---- lifecycle -----------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        for client, handle in self._handles:
            try:
                client.call("DeregisterGraph", {"handle": handle}, timeout=5.0)
            except Exception:  # noqa: BLE001 - the task may be gone; nothing to release then
                pass
        self._handles.clear()
        super().close()
        for c in self._clients.values():
            c.close()


def _run_parts(
    parts: list,
    feeds: dict,
    step_id: int,
    timeout_s: float,
    timeout: float | None,
    trace: bool = False,
) -> Any:
    """Call RunGraph on every task of ``parts``; yield (index, reply, None) or (index, None,
    error) for each as it completes, in the order they do. ``trace``: each task traces its
    nodes and sends the rows with its reply (``TracingObserver.wire_rows``).

    A task with a data channel is sent its request from this thread and its reply is read here
    too (a selector waits for the first of several): no thread hand-off each way, which costs
    more than the round trip itself. Others are called asynchronously over gRPC; their callbacks
    wake the selector through a socket pair."""
    direct: dict[int, Any] = {}
    replies: queue.SimpleQueue = queue.SimpleQueue()
    n_async = 0
    wake: list = []  # [reader, writer] of a socket pair once a call went asynchronously
    # the tasks that wait for tensors of others first: theirs is the longer path
    for k in sorted(range(len(parts)), key=lambda i: -parts[i].n_recvs):
        part = parts[k]
        req = {
            "handle": part.handle,
            "step_id": step_id,
            "timeout_s": timeout_s,
            "feeds": {name: _feed(feeds[t], name) for t, name in part.feeds},
        }
        if trace:
            req["trace"] = True
        try:
            call = part.client.start_call("RunGraph", req, timeout)
        except OpError as e:
            yield k, None, e
            continue
        if call is not None:
            direct[k] = call
            continue
        req["feeds"] = {  # over gRPC: every feed in the message
            name: tensor_to_wire(v.array, name) if isinstance(v, OutTensor) else v
            for name, v in req["feeds"].items()
        }
        if not wake and len(parts) > 1:
            wake.extend(socket.socketpair())

        def done(reply: Any = None, error: BaseException | None = None, k: int = k) -> None:
            replies.put((k, reply, error))
            if wake:
                try:
                    wake[1].send(b"\0")
                except OSError:
                    pass  # the step ended meanwhile

        n_async += 1
        part.client.call_async("RunGraph", req, timeout, done)
    try:
        if not direct:
            for _ in range(n_async):
                yield replies.get()
            return
        if len(direct) == 1 and not n_async:
            k, call = direct.popitem()
            yield _finished(k, call)
            return
        # poll(2): registering is bookkeeping here, where epoll would make a system call each
        with getattr(selectors, "PollSelector", selectors.DefaultSelector)() as sel:
            for k, call in direct.items():
                sel.register(call, selectors.EVENT_READ, k)
            if wake:
                sel.register(wake[0], selectors.EVENT_READ, None)
            while direct or n_async:
                deadline = min((c.deadline for c in direct.values() if c.deadline), default=None)
                wait = None if deadline is None else max(deadline - time.monotonic(), 0.0)
                events = sel.select(wait) if direct else [(None, 0)]
                if not events:  # past the deadline: each pending call reports it
                    events = [(sel.get_key(c), 0) for c in direct.values()]
                for key, _ in events:
                    if key is not None and key.data is not None:
                        call = direct.pop(key.data)
                        sel.unregister(call)
                        yield _finished(key.data, call)
                        continue
                    if key is not None:
                        key.fileobj.recv(64)
                    while n_async:
                        try:
                            item = replies.get(block=not direct)
                        except queue.Empty:
                            break
                        n_async -= 1
                        yield item
    finally:
        for call in direct.values():  # the consumer stopped early: drop the connections
            call.cancel()
        for s in wake:
            s.close()


def _feed(value: Any, name: str) -> Any:
    """A fed value for a RunGraph request: its wire form, or for a numeric array over
    ``INLINE_BYTES`` an OutTensor of it (not copied: the caller's array is read while the step
    is sent), which the data channel streams after the request."""
    if streamable(value):
        return out_tensor(value, name, copy=False)
    return tensor_to_wire(value, name)


def _finished(k: int, call: Any) -> tuple[int, Any, BaseException | None]:
    try:
        return k, call.finish(), None
    except OpError as e:
        return k, None, e


def _task_filters(filters: Any) -> list[tuple[str, int | None]]:
    """ConfigProto.device_filters (``"/job:ps"``, ``"/job:worker/task:1"``) as (job, task)."""
    from ...devices.naming import DeviceSpec

    out = []
    for f in filters or []:
        try:
            spec = DeviceSpec.from_string(str(f))
        except (ValueError, TypeError) as e:
            raise InvalidArgumentError(
                f"ConfigProto.device_filters: bad filter {f!r}: {e}"
            ) from None
        if spec.job is None:
            raise InvalidArgumentError(
                f"ConfigProto.device_filters: filter {f!r} names no job (e.g. '/job:ps')"
            )
        out.append((spec.job, spec.task))
    return out


def _matches(filters: list[tuple[str, int | None]], job: str, index: int) -> bool:
    """True without filters, or when a filter names ``job`` (and ``index``, if it gives one)."""
    return not filters or any(j == job and t in (None, index) for j, t in filters)


def task_spec(
    task: str, parts: Partitions, fed: set[Tensor], fetch_names: list[str], seed: Any
) -> tuple[dict, list[tuple[Tensor, str]]]:
    """The RegisterGraph message for ``task``: its ops of ``parts`` as a graph document.

    Each Recv of the task stands in the document as a Placeholder (a NoOp for a control edge)
    that its consumers read; the task rebuilds the Send/Recv ops and rewires the consumers, as
    ``partition`` did here. Fed tensors whose producer is not in the task become Placeholders too.
    Returns the spec and the task's feeds as (master tensor, name in the task's graph).
    """
    transfers = {op for pair in parts.transfers for op in pair}
    task_ops = [op for op in parts.order if task_of(parts.device_of[op].name) == task]
    user = [op for op in task_ops if op not in transfers]
    user_set = set(user)
    taken = {op.name for op in user}
    counter = [0]

    def fresh(kind: str) -> str:
        while True:
            counter[0] += 1
            name = f".hb_{kind}/{counter[0]}"
            if name not in taken:
                taken.add(name)
                return name

    standins: list[dict] = []

    def placeholder(t: Tensor, kind: str) -> str:
        name = fresh(kind)
        attrs = {"dtype": t.dtype, "shape": t.shape}
        standins.append(_stub(name, "Placeholder", attrs, [t]))
        return name

    order_name: dict[Operation, str] = {}
    recv_standin: dict[Operation, str] = {}
    recvs, sends = [], []
    for op in task_ops:
        if op.type == "_Recv" and op in transfers:
            if op.attrs["tensor_name"].startswith("^"):
                name = fresh("ctl")
                standins.append(_stub(name, "NoOp", {}, []))
            else:
                name = placeholder(op.outputs[0], "recv")
            recv_standin[op] = name
            order_name[op] = f"#r{len(recvs)}"
            recvs.append(
                {
                    "name": op.name,
                    "standin": name,
                    "attrs": _attrs(op),
                    # a Recv inside a loop: armed by the loop's Merge (partition._control_loops)
                    "control": op.control_inputs[0].name if op.control_inputs else None,
                }
            )
    feeds: dict[Tensor, str] = {}

    def ref(t: Tensor) -> str:
        if t in fed:
            if t not in feeds:
                feeds[t] = t.name if t.op in user_set else placeholder(t, "feed") + ":0"
            return feeds[t]
        return t.name

    nodes = []
    for op in user:
        d = _node_to_dict(op, binary=True)
        d["inputs"] = [
            recv_standin[parts.input_map[(op, i)].op] + ":0"
            if (op, i) in parts.input_map
            else ref(t)
            for i, t in enumerate(op.inputs)
        ]
        d["control_inputs"] = [
            "^"
            + (recv_standin[parts.control_map[(op, c)]] if (op, c) in parts.control_map else c.name)
            for c in op.control_inputs
        ]
        nodes.append(d)
    for op in task_ops:
        if op.type == "_Send" and op in transfers:
            order_name[op] = f"#s{len(sends)}"
            sends.append(
                {
                    "name": op.name,
                    "input": ref(op.inputs[0]) if op.inputs else None,
                    "control": op.control_inputs[0].name if op.control_inputs else None,
                    "attrs": _attrs(op),
                }
            )
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "seed": None if seed is None else int(seed),
        "nodes": standins + nodes,
        "collections": {},
    }
    spec = {
        "graph": doc,
        "devices": {op.name: parts.device_of[op].name for op in user},
        "op_ids": {op.name: op._id for op in user},
        "recvs": recvs,
        "sends": sends,
        "order": [order_name.get(op, op.name) for op in task_ops],
        "feeds": list(feeds.values()),
        "fetches": fetch_names,
    }
    return spec, list(feeds.items())


def _attrs(op: Operation) -> dict:
    return {k: encode_value(v, True, f"attr {k!r} of {op.name}") for k, v in op.attrs.items()}


def _stub(name: str, op_type: str, attrs: dict, outputs: list[Tensor]) -> dict:
    return {
        "name": name,
        "op": op_type,
        "inputs": [],
        "control_inputs": [],
        "device": "",
        "colocation_groups": [],
        "attrs": {k: encode_value(v, True) for k, v in attrs.items()},
        "outputs": [
            {"dtype": t.dtype.name, "shape": None if t.shape.dims is None else list(t.shape.dims)}
            for t in outputs
        ],
    }
