"""The worker service, transport-neutral: register partition graphs, run steps, hand out tensors.

A ``Worker`` belongs to one task (``/job:ps/replica:0/task:0``) and owns that task's devices and
their resources (variables live here across steps and sessions, like TF's ResourceMgr). Each step
has a ``RemoteRendezvous`` in a per-step table: a Send stores its value there; a Recv whose source
device is on this task takes it from there, and one whose source is another task asks that task
(``peer(task).recv_tensor_async``). The gRPC layer (``rpc.py``) only translates messages into calls
of ``register_graph``, ``run_graph``, ``recv_tensor`` and ``cleanup_step``.
"""

from __future__ import annotations

import collections
import itertools
import secrets
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import executor as ex
from ..errors import (
    AbortedError,
    DeadlineExceededError,
    InvalidArgumentError,
    NotFoundError,
)
from ..graph import Operation, Tensor, TensorShape
from ..ops.state import _NO_LOCK, LOCKED_COPY_BYTES, VarHandle, owner_of
from ..partition import _free_op
from ..registry import DEAD
from ..rendezvous import LocalRendezvous, Rendezvous
from ..serialize import GraphFormatError, decode_value, graph_from_dict
from .wire import OutTensor, WireError, out_tensor, tensor_from_wire

#: how long a Recv waits for a tensor from another task when the step sets no timeout
DEFAULT_RECV_TIMEOUT_S = 300.0
#: arrays below this size are snapshot on Send without checking whether they alias a variable
_ALIAS_CHECK_BYTES = 64 << 10


def task_of(device: str) -> str:
    """``/job:ps/replica:0/task:0/device:cpu:0`` -> ``/job:ps/replica:0/task:0``."""
    return device.split("/device:")[0]


def _key_devices(key: Any) -> tuple[str, str]:
    parts = key.split(";") if isinstance(key, str) else []
    if len(parts) != 5:
        raise WireError(f"bad rendezvous key {key!r} (expected src;incarnation;dst;tensor;frame)")
    return parts[0], parts[2]


class RemoteRendezvous(Rendezvous):
    """One step's rendezvous on one task; see the module docstring.

    A value bound for another task is kept as an ``OutTensor`` (streamed from there by RecvTensor):
    when ``aliases_state(value)`` says a variable buffer could change under it, a private
    snapshot (small values) or the variable's buffer lent until it is sent (large ones: an update
    meanwhile writes to a copy), so that the receiver sees the value as of the Send; else the
    array itself, not copied.
    """

    def __init__(
        self,
        step_id: int,
        task: str,
        peer: Callable[[str], Any],
        timeout_s: float,
        aliases_state: Callable[[Any], bool] = lambda v: True,
        owner: Callable[[Any], Any] = lambda v: None,
    ):
        self.step_id = step_id
        self.task = task
        self.timeout_s = timeout_s
        self._peer = peer
        self._aliases_state = aliases_state
        self._owner = owner
        self._local = LocalRendezvous()
        self._lock = threading.Lock()
        self._remote: dict[str, Callable] = {}  # key -> cancel the remote call
        self._error: BaseException | None = None

    def send(self, key: str, value: Any) -> None:
        _, dst = _key_devices(key)
        if task_of(dst) != self.task:
            where = f"tensor of rendezvous key {key!r}"
            copy = value is not DEAD and self._aliases_state(value)
            h = None
            if copy and getattr(value, "nbytes", 0) >= LOCKED_COPY_BYTES:
                h = self._owner(value)  # a variable: copy it under its lock (use_locking)
            lender = h if h is not None and value.nbytes >= _ALIAS_CHECK_BYTES else None
            with h.lock if h is not None else _NO_LOCK:  # (or lend it: copy on write)
                value = out_tensor(value, where, copy=copy, lender=lender)
        self._local.send(key, value)

    def recv(self, key: str, done: Callable) -> None:
        src, _ = _key_devices(key)
        src_task = task_of(src)
        if src_task == self.task:
            self._local.recv(key, done)
            return
        fired = threading.Event()

        def arrived(value: Any = None, error: BaseException | None = None) -> None:
            with self._lock:
                if fired.is_set():
                    return
                fired.set()
                self._remote.pop(key, None)
            done(value, error) if error is not None else done(value)

        with self._lock:
            err = self._error
            if err is None:
                self._remote[key] = lambda: None
        if err is not None:
            done(None, err)
            return
        try:
            cancel = self._peer(src_task).recv_tensor_async(
                self.step_id, key, self.timeout_s, arrived
            )
        except Exception as e:  # noqa: BLE001 - e.g. an unknown task: fail this Recv
            arrived(None, e)
            return
        with self._lock:
            if key in self._remote:
                self._remote[key] = cancel
                return
            # an abort took the placeholder while the call was being made: cancel it here, or
            # the Recv would wait out its timeout (a dead peer is waited for until then)
            orphaned = self._error is not None and not fired.is_set()
        if orphaned:
            cancel()

    def take(self, key: str, done: Callable) -> None:
        """Hand the value sent under ``key`` (bound for another task) to ``done``."""
        self._local.recv(key, done)

    def abort(self, error: BaseException) -> None:
        with self._lock:
            if self._error is None:
                self._error = error
            remote, self._remote = self._remote, {}
        self._local.abort(error)
        for cancel in remote.values():
            cancel()

    def idle(self) -> bool:
        """No value waits to be taken, no Recv waits for a value."""
        values, waiters = self._local.pending()
        with self._lock:
            return not values and not waiters and not self._remote


class _Steps:
    """The per-step rendezvous tables of one worker, dropped when a step has nothing pending."""

    def __init__(self, make: Callable[[int, float], RemoteRendezvous]):
        self._make = make
        self._lock = threading.Lock()
        self._tables: dict[int, RemoteRendezvous] = {}
        self._running: collections.Counter = collections.Counter()
        self._aborted: collections.OrderedDict = collections.OrderedDict()

    def get(self, step_id: int, timeout_s: float = DEFAULT_RECV_TIMEOUT_S) -> RemoteRendezvous:
        with self._lock:
            err = self._aborted.get(step_id)
            if err is not None:
                raise AbortedError(f"step {step_id} was aborted: {err}")
            rv = self._tables.get(step_id)
            if rv is None:
                rv = self._tables[step_id] = self._make(step_id, timeout_s)
            return rv

    def enter(self, step_id: int, timeout_s: float) -> RemoteRendezvous:
        rv = self.get(step_id, timeout_s)
        with self._lock:
            self._running[step_id] += 1
            rv.timeout_s = timeout_s
        return rv

    def leave(self, step_id: int) -> None:
        with self._lock:
            self._running[step_id] -= 1
            if self._running[step_id] <= 0:
                del self._running[step_id]
        self.collect(step_id)

    def collect(self, step_id: int) -> None:
        with self._lock:
            rv = self._tables.get(step_id)
            if rv is not None and step_id not in self._running and rv.idle():
                del self._tables[step_id]

    def abort(self, step_id: int, error: BaseException) -> None:
        with self._lock:
            self._aborted[step_id] = str(error)
            while len(self._aborted) > 4096:
                self._aborted.popitem(last=False)
            rv = self._tables.pop(step_id, None)
        if rv is not None:
            rv.abort(AbortedError(f"step {step_id} aborted: {error}"))

    def __len__(self) -> int:
        with self._lock:
            return len(self._tables)

    def abort_all(self, error: BaseException) -> None:
        with self._lock:
            tables, self._tables = self._tables, {}
        for rv in tables.values():
            rv.abort(error)


class _Registered:
    __slots__ = ("prepared", "feeds", "fetches")

    def __init__(self, prepared: ex.PreparedGraph, feeds: list[Tensor], fetches: list[str]):
        self.prepared = prepared
        self.feeds = feeds
        self.fetches = fetches


class Worker:
    """The worker side of one task: see the module docstring.

    ``peer(task_name)`` returns a client of another task with ``recv_tensor_async(step_id, key,
    timeout_s, callback) -> cancel``; ``callback(value)`` or ``callback(None, error)``.
    """

    def __init__(self, task: str, devices: list, peer: Callable[[str], Any]):
        self.task = task
        self.devices = {d.name: d for d in devices}
        self.resources: dict[str, dict] = {name: {} for name in self.devices}
        for d in devices:
            d.resources = self.resources[d.name]
        self._peer = peer
        self._graphs: dict[str, _Registered] = {}
        self._lock = threading.Lock()
        self._handles = itertools.count(1)
        self.steps = _Steps(
            lambda s, t: RemoteRendezvous(s, task, peer, t, self.aliases_state, self.owner)
        )
        #: a new number each time the task starts (TF's device incarnation): a master that planned
        #: against an earlier incarnation learns that the task restarted (AbortedError)
        self.incarnation = secrets.randbits(62) + 1
        #: the StepInfo of every RunGraph in progress, by step id: cleanup_step and close cancel
        #: them, so that kernels waiting on a queue or an accumulator give up too
        self._live: dict[int, list] = {}

    # ---- status ------------------------------------------------------------------------------
    def list_devices(self) -> list[dict]:
        return [d.describe() | {"incarnation": self.incarnation} for d in self.devices.values()]

    def _check_incarnation(self, want: Any, what: str) -> None:
        """AbortedError when a master planned against another incarnation of this task."""
        if want is not None and want != self.incarnation:
            raise AbortedError(
                f"{what} on {self.task}: the task has restarted since the session was created "
                "(its variables and registered graphs are gone); create a new session "
                "(MonitoredTrainingSession does so itself)"
            )

    # ---- graphs ------------------------------------------------------------------------------
    def register_graph(self, spec: dict) -> str:
        """Build the partition described by ``spec`` (see ``master.task_spec``); return a handle.

        Raises WireError / GraphFormatError (malformed), InvalidArgumentError (a device of
        another task), UnimplementedError (an unknown op type).
        """
        self._check_incarnation(spec.get("incarnation"), "RegisterGraph")
        prepared, feeds, fetches = self._build(spec)
        with self._lock:
            handle = f"g{next(self._handles)}.{self.incarnation:x}"
            self._graphs[handle] = _Registered(prepared, feeds, fetches)
        return handle

    def deregister_graph(self, handle: str) -> None:
        with self._lock:
            self._graphs.pop(handle, None)

    def _build(self, spec: dict) -> tuple[ex.PreparedGraph, list[Tensor], list[str]]:
        what = "RegisterGraph"
        for key, kind in (
            ("graph", dict),
            ("devices", dict),
            ("op_ids", dict),
            ("sends", list),
            ("recvs", list),
            ("order", list),
            ("feeds", list),
            ("fetches", list),
        ):
            if not isinstance(spec.get(key), kind):
                raise WireError(f"{what}: field {key!r} must be a {kind.__name__}")
        g = graph_from_dict(spec["graph"])
        by_name: dict[str, Operation] = {op.name: op for op in g.get_operations()}
        for name, i in spec["op_ids"].items():
            if name in by_name and isinstance(i, int):
                by_name[name]._id = i  # the master's ids: ops seed their RNGs as in a local run
        device_of: dict[Operation, Any] = {}
        for name, dev in spec["devices"].items():
            if name not in by_name:
                raise WireError(f"{what}: device given for unknown node {name!r}")
            device_of[by_name[name]] = self._device(dev, name)
        transfers: dict[str, Operation] = {}
        standin: dict[Operation, Operation] = {}
        seq = 0
        for k, r in enumerate(spec["recvs"]):
            seq += 1
            attrs = self._transfer_attrs(r, f"recv {k}")
            stand = by_name.get(r.get("standin"))
            if stand is None:
                raise WireError(f"{what}: recv {k} names no stand-in node ({r.get('standin')!r})")
            dev = self._device(attrs["recv_device"], r["name"])
            op = _free_op(g, r["name"], "_Recv", [], attrs, dev, seq)
            if stand.outputs:
                out = stand.outputs[0]
                op.outputs = [Tensor(op, 0, out.dtype, out.shape)]
            else:
                op.outputs = [Tensor(op, 0, attrs["dtype"], TensorShape([0]))]
            if r.get("control") is not None:  # a Recv inside a loop: armed by its Merge
                ctl = by_name.get(r["control"])
                if ctl is None:
                    raise WireError(f"{what}: recv {k} control input {r['control']!r} is unknown")
                op.control_inputs = [ctl]
            device_of[op] = dev
            standin[stand] = op
            transfers[f"#r{k}"] = op
        for k, s in enumerate(spec["sends"]):
            seq += 1
            attrs = self._transfer_attrs(s, f"send {k}")
            dev = self._device(attrs["send_device"], s["name"])
            inputs = []
            if s.get("input") is not None:
                inputs = [self._tensor(g, s["input"], f"send {k} input")]
            op = _free_op(g, s["name"], "_Send", inputs, attrs, dev, seq)
            if s.get("control") is not None:
                ctl = by_name.get(s["control"])
                if ctl is None:
                    raise WireError(f"{what}: send {k} control input {s['control']!r} is unknown")
                op.control_inputs = [ctl]
            device_of[op] = dev
            transfers[f"#s{k}"] = op
        order: list[Operation] = []
        for name in spec["order"]:
            op = transfers.get(name) if isinstance(name, str) else None
            op = op or by_name.get(name)
            if op is None or op not in device_of:
                raise WireError(f"{what}: order names an unknown or unplaced node {name!r}")
            order.append(op)
        input_map, control_map = {}, {}
        for op in order:
            for i, t in enumerate(op.inputs):
                if t.op in standin:
                    input_map[(op, i)] = standin[t.op].outputs[0]
            for c in op.control_inputs:
                if c in standin:
                    control_map[(op, c)] = standin[c]
        feeds = [self._tensor(g, n, "feed") for n in spec["feeds"]]
        fetches = [self._tensor(g, n, "fetch") for n in spec["fetches"]]
        contexts: dict[tuple, ex.KernelContext] = {}

        def context_of(op: Operation, dev: Any) -> ex.KernelContext:
            ctx = contexts.get((op, dev.name))
            if ctx is None:
                ctx = contexts[(op, dev.name)] = ex.KernelContext(
                    op, dev, self.resources[dev.name], self
                )
            return ctx

        prepared = ex.build_prepared(
            order, fetches, feeds, device_of.__getitem__, context_of, input_map, control_map
        )
        return prepared, feeds, [t.name for t in fetches]

    def _transfer_attrs(self, t: Any, where: str) -> dict:
        if not isinstance(t, dict) or not isinstance(t.get("name"), str):
            raise WireError(f"RegisterGraph: {where} must be a map with a 'name'")
        raw = t.get("attrs")
        if not isinstance(raw, dict):
            raise WireError(f"RegisterGraph: {where} needs 'attrs'")
        attrs = {k: decode_value(v, f"{where} attr {k!r}") for k, v in raw.items()}
        for k in ("key", "send_device", "recv_device", "compress", "dtype"):
            if k not in attrs:
                raise WireError(f"RegisterGraph: {where} lacks attr {k!r}")
        _key_devices(attrs["key"])
        return attrs

    def _device(self, name: Any, node: str) -> Any:
        dev = self.devices.get(name) if isinstance(name, str) else None
        if dev is None:
            raise InvalidArgumentError(
                f"node {node!r} is placed on {name!r}, which is not a device of task {self.task} "
                f"(it has {', '.join(self.devices)})"
            )
        return dev

    @staticmethod
    def _tensor(g: Any, name: Any, where: str) -> Tensor:
        try:
            return g.get_tensor_by_name(name)
        except (KeyError, ValueError, TypeError, AttributeError):
            raise WireError(f"RegisterGraph: {where} {name!r} names no tensor") from None

    # ---- steps -------------------------------------------------------------------------------
    def run_graph(
        self,
        handle: str,
        step_id: int,
        feeds: dict[str, Any],
        timeout_s: float = 0.0,
        observer: Any = None,
    ) -> list:
        """Run one step of a registered graph; return its fetched values in order. ``observer``
        (a StepObserver: a TracingObserver when the master traces the step) hears its nodes.

        Raises AbortedError (a handle of an earlier incarnation: this task restarted since the
        graph was registered), NotFoundError (another unknown handle), InvalidArgumentError
        (missing feeds), DeadlineExceededError naming this task and the
        nodes still waiting when ``timeout_s`` passes without progress, or the OpError of the
        failing node; the step's rendezvous is aborted on failure.
        """
        reg = self._graphs.get(handle)
        if reg is None:
            _, dot, inc = handle.rpartition(".")
            if dot and inc != f"{self.incarnation:x}":
                raise AbortedError(
                    f"RunGraph on {self.task}: graph {handle!r} was registered with an earlier "
                    "incarnation of this task, which has restarted since (its variables and "
                    "graphs are gone); create a new session (MonitoredTrainingSession does so "
                    "itself)"
                )
            raise NotFoundError(f"no graph registered under handle {handle!r} on {self.task}")
        prep = reg.prepared
        vals: list = [None] * prep.n_slots
        for t in reg.feeds:
            if t.name not in feeds:
                raise InvalidArgumentError(f"RunGraph on {self.task}: no value fed for {t.name}")
            vals[prep.feed_slots[t]] = feeds[t.name]
        from ..session import StepInfo

        rv = self.steps.enter(step_id, timeout_s if timeout_s > 0 else DEFAULT_RECV_TIMEOUT_S)
        step = StepInfo(step_id, rv, self)
        with self._lock:
            self._live.setdefault(step_id, []).append(step)
        try:
            ex.run_step(prep, vals, step, None, observer, timeout_s if timeout_s > 0 else None)
        except DeadlineExceededError as e:
            self.steps.abort(step_id, e)
            if self.task in str(e):
                raise
            raise DeadlineExceededError(self._explain_wait(prep, str(e))) from None
        except BaseException as e:
            self.steps.abort(step_id, e)
            raise
        finally:
            with self._lock:
                live = self._live.get(step_id, [])
                if step in live:
                    live.remove(step)
                if not live:
                    self._live.pop(step_id, None)
            self.steps.leave(step_id)
        return [self._fetched(vals[s]) for s in prep.fetch_slots]

    def _fetched(self, v: Any) -> Any:
        """A fetched value as it leaves the step: a variable reference gives the variable's value
        (a snapshot, as in TF); a variable's buffer is copied under its lock, so that an update
        run with use_locking is seen whole."""
        if v.__class__ is VarHandle:
            return v.snapshot(v.read())
        if isinstance(v, np.ndarray) and v.nbytes >= LOCKED_COPY_BYTES:
            h = self.owner(v)
            if h is not None:
                return h.snapshot(v)
        return v

    def aliases_state(self, value: Any) -> bool:
        """Whether ``value`` could share memory with a variable buffer of this task (which
        in-place updates write to). Small arrays count as aliasing: copying them is cheaper."""
        if not isinstance(value, np.ndarray):
            return False  # numpy scalars are immutable; device arrays are copied to the host
        if value.nbytes < _ALIAS_CHECK_BYTES:
            return True
        return self.owner(value) is not None

    def owner(self, value: Any) -> VarHandle | None:
        """The variable of this task whose buffer ``value`` is or views, or None."""
        return owner_of(value, self.resources.values())

    def recv_tensor(self, step_id: int, key: str, timeout_s: float) -> OutTensor:
        """The tensor this task sent under ``key`` in ``step_id``, ready to stream; blocks until
        the Send has run, at most ``timeout_s`` (DeadlineExceededError then)."""
        src, _ = _key_devices(key)
        if task_of(src) != self.task:
            raise InvalidArgumentError(
                f"RecvTensor: key {key!r} has source {src}, which is not on task {self.task}"
            )
        rv = self.steps.get(step_id)
        box: list = []
        ready = threading.Event()

        def done(value: Any = None, error: BaseException | None = None) -> None:
            box.append((value, error))
            ready.set()

        rv.take(key, done)
        if not ready.wait(timeout_s):
            err = DeadlineExceededError(
                f"RecvTensor on {self.task}: {key!r} was not sent within {timeout_s:g} s"
            )
            self.steps.abort(step_id, err)
            raise err
        self.steps.collect(step_id)
        value, error = box[0]
        if error is not None:
            raise error
        return value

    def _explain_wait(self, prep: ex.PreparedGraph, msg: str) -> str:
        """The executor's "step timed out ... waiting for: a, b" with this task's name and, for
        each node, what it waits for (a Recv: the tensor and the device it comes from)."""
        head, sep, names = msg.partition("waiting for: ")
        if not sep:
            return f"{self.task}: {msg}"
        ops = {n.op.name: n for n in prep.nodes}
        shown = []
        for name in names.split(", "):
            node = ops.get(name)
            if node is None:
                shown.append(name)
            elif node.op.type == "_Recv":
                a = node.op.attrs
                shown.append(f"{name} (tensor {a.get('tensor_name')} from {a.get('send_device')})")
            else:
                shown.append(f"{name} ({node.op.type} on {node.device.name})")
        return f"{self.task}: {head}{sep}{', '.join(shown)}"

    def cleanup_step(self, step_id: int, reason: str = "cleanup") -> None:
        """Abort ``step_id`` here: pending Recvs fail, kernels waiting in it (a dequeue, a take)
        give up, later RecvTensors for it are refused."""
        err = AbortedError(reason)
        self.steps.abort(step_id, err)
        with self._lock:
            live = list(self._live.get(step_id, ()))
        for step in live:
            step.cancel(err)

    def close(self) -> None:
        err = AbortedError(f"task {self.task} is shutting down")
        self.steps.abort_all(err)
        with self._lock:
            live = [st for steps in self._live.values() for st in steps]
        for step in live:  # steps blocked on a queue or an accumulator end too
            step.cancel(err)
        for d in self.devices.values():
            d.close()


def decode_feeds(raw: Any, what: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise WireError(f"{what}: field 'feeds' must be a map of tensor name -> tensor")
    return {  # (arrays: feeds the data channel streamed after the request)
        str(k): v
        if isinstance(v, (np.ndarray, np.generic))
        else tensor_from_wire(v, f"{what} feed {k!r}")
        for k, v in raw.items()
    }


__all__ = ["Worker", "RemoteRendezvous", "GraphFormatError", "task_of", "decode_feeds"]
