"""``hb.Session``: feeds, fetches, pruning, a cache of prepared graphs, and running steps."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import dtypes as _dt
from . import executor as ex
from . import fusion
from .config_protos import GPUOptions, GraphOptions
from .errors import InvalidArgumentError
from .gradients import IndexedSlices, IndexedSlicesValue
from .graph import Graph, Operation, Tensor, get_default_graph
from .host_memory import keep_freed_memory
from .ops.state import VarHandle, snapshot
from .registry import DEAD
from .variables import Variable


@dataclass
class ConfigProto:
    """Session options, named after TF1's ConfigProto fields that hetbed honours.

    ``device_count={"CPU": 4}`` gives four virtual CPU devices ``cpu:0..3`` in this process.
    ``inter_op_parallelism_threads > 0`` hands expensive nodes (large matmuls, convolutions) to a
    thread pool per device; 0 (the default) runs every node inline, which is fastest when numpy's
    BLAS already uses all cores.
    """

    device_count: dict = field(default_factory=dict)
    inter_op_parallelism_threads: int = 0
    intra_op_parallelism_threads: int = 0
    allow_soft_placement: bool = True
    log_device_placement: bool = False
    #: fail a step that waits this long for a completion (0: wait forever, like TF1's default)
    operation_timeout_in_ms: int = 0
    #: TF1's GPUOptions / GraphOptions: recorded; GraphOptions' rewrite_options.remapping = OFF
    #: turns off fused ops (runtime/fusion.py; see config_protos.py)
    gpu_options: Any = field(default_factory=GPUOptions)
    graph_options: Any = field(default_factory=GraphOptions)
    #: "default" (unconstrained ops on the first device) or "cost" (cost-aware spreading)
    placement: str = "default"
    #: extra in-process CPU devices with full names, e.g. "/job:ps/replica:0/task:0/device:cpu:0"
    virtual_devices: list = field(default_factory=list)
    #: cast float32 transfers between devices to float16 (True, or fn(tensor, src, dst) -> bool)
    compress_transfers: Any = False
    #: distributed sessions contact and place on only these tasks (``["/job:ps",
    #: "/job:worker/task:1"]``); empty: every task of the cluster
    device_filters: list = field(default_factory=list)


class StepInfo:
    """Per-step data that async kernels (Send/Recv, collectives) and devices may need."""

    __slots__ = ("step_id", "rendezvous", "session", "lock", "_shared", "_cancel")

    def __init__(self, step_id: int, rendezvous: Any, session: Any):
        self.step_id = step_id
        self.rendezvous = rendezvous
        self.session = session
        self.lock = threading.Lock()
        self._shared: dict | None = None
        self._cancel: list[Callable] | None = None

    def on_cancel(self, fn: Callable[[BaseException], None]) -> None:
        """Call ``fn(error)`` if the step is aborted (an async kernel withdrawing a waiter)."""
        with self.lock:
            if self._cancel is None:
                self._cancel = []
            self._cancel.append(fn)

    def cancel(self, error: BaseException) -> None:
        """Abort the step: fail its pending receives and run its cancel callbacks (once)."""
        if self.rendezvous is not None:
            self.rendezvous.abort(error)
        with self.lock:
            fns, self._cancel = self._cancel or [], []
        for fn in fns:
            fn(error)

    def shared(self, key: str, factory: Callable) -> Any:
        """Per-step state shared by the kernels of this step (created on first use)."""
        with self.lock:
            if self._shared is None:
                self._shared = {}
            v = self._shared.get(key)
            if v is None:
                v = self._shared[key] = factory()
            return v


class _Fetches:
    """Flattens a nested fetch structure and rebuilds it from values."""

    def __init__(self, graph: Graph, fetches: Any):
        self.graph = graph
        self.elements: list[Tensor | Operation] = []
        self.structure = self._flatten(fetches)

    def _flatten(self, f: Any) -> Any:
        if isinstance(f, dict):
            return ("dict", type(f), [(k, self._flatten(v)) for k, v in f.items()])
        if isinstance(f, tuple) and hasattr(f, "_fields"):
            cls = getattr(type(f), "_value_type", type(f))  # SparseTensor -> SparseTensorValue
            return ("namedtuple", cls, [self._flatten(v) for v in f])
        if isinstance(f, (list, tuple)):
            return ("seq", type(f), [self._flatten(v) for v in f])
        if isinstance(f, IndexedSlices):
            return (
                "sparse",
                None,
                [self._flatten(f.values), self._flatten(f.indices), self._flatten(f.dense_shape)],
            )
        if f is None:
            raise TypeError("fetch argument None is not a tensor or operation")
        ref = getattr(f, "_ref", None)
        if ref is not None and isinstance(f, Variable):
            # a variable fetched itself is read as the step ends, as TF1 fetches a variable's
            # reference: run([update, v]) gives the updated value
            el = self.graph.as_graph_element(ref)
        else:
            el = self.graph.as_graph_element(f)
        self.elements.append(el)
        return ("leaf", None, len(self.elements) - 1)

    def build(self, values: list) -> Any:
        return self._build(self.structure, values)

    def _build(self, node: Any, values: list) -> Any:
        kind, cls, payload = node
        if kind == "leaf":
            return values[payload]
        if kind == "dict":
            return cls((k, self._build(v, values)) for k, v in payload)
        if kind == "namedtuple":
            return cls(*[self._build(v, values) for v in payload])
        if kind == "sparse":
            vals, idx, dense = (self._build(v, values) for v in payload)
            return IndexedSlicesValue(vals, idx, np.array(np.shape(dense)))
        return cls(self._build(v, values) for v in payload)


class _Plan:
    __slots__ = ("prepared", "fed", "fetch_copy", "fetch_is_op", "multi_device")

    def __init__(
        self,
        prepared: ex.PreparedGraph,
        fed: list[Tensor],
        fetch_copy: list[bool],
        fetch_is_op: list[bool],
    ):
        self.prepared = prepared
        self.fed = fed
        self.fetch_copy = fetch_copy
        self.fetch_is_op = fetch_is_op
        self.multi_device = False


#: session classes by target scheme ("grpc://" -> DistributedSession), see register_session_kind
_SESSION_KINDS: dict[str, Callable[[], type]] = {}


def register_session_kind(scheme: str, load: Callable[[], type]) -> None:
    """Make ``hb.Session(target)`` with a target starting with ``scheme`` build ``load()``'s
    class (a BaseSession subclass; ``load`` is called at the first such session, so that the
    package serving it is imported only then). The runtime itself knows no session kinds."""
    if not scheme or not callable(load):
        raise ValueError(f"register_session_kind: need a scheme and a loader, got {scheme!r}")
    _SESSION_KINDS[scheme] = load


class BaseSession:
    """Runs steps of a graph on this process's devices (see ``Session``)."""

    def __init__(
        self, target: str = "", graph: Graph | None = None, config: ConfigProto | None = None
    ):
        if target:
            kinds = ", ".join(sorted(_SESSION_KINDS)) or "none"
            raise InvalidArgumentError(
                f"target {target!r}: no session kind serves this target here (registered: "
                f"{kinds}); use hb.Session() for an in-process session"
            )
        self.graph = graph or get_default_graph()
        self.config = config or ConfigProto()
        self._fuse = fusion.enabled(self.config)  # runtime/fusion.py
        keep_freed_memory()  # (runtime/host_memory.py: no page faults on each step's buffers)
        self._lock = threading.RLock()
        self._plans: dict[tuple, _Plan] = {}
        self._contexts: dict[tuple[Operation, str], ex.KernelContext] = {}
        self._resources: dict[str, dict] = {}
        self._closed = False
        self._devices = self._make_devices()
        self._default_device = self._devices[0]
        self._pinned: dict[str, Any] = {}
        self._last_plan: _Plan | None = None
        self._active: set[StepInfo] = set()  # steps in flight (cancelled by close)

    # ---- devices -------------------------------------------------------------------------
    def _make_devices(self) -> list:
        from ..devices import local_devices

        return local_devices(self.config)

    def list_devices(self) -> list:
        """The devices this session runs on (``name``, ``device_type``, ``memory_limit_bytes``)."""
        return list(self._devices)

    def _place(self, order: list[Operation]) -> dict:
        from .placement import cost_aware_spread, place

        spread = None
        if self.config.placement == "cost":
            spread = cost_aware_spread(order, self._devices, {})
        elif self.config.placement != "default":
            raise InvalidArgumentError(
                f"ConfigProto.placement must be 'default' or 'cost', got {self.config.placement!r}"
            )
        placed = place(
            order,
            self._devices,
            self._default_device,
            self.config.allow_soft_placement,
            pinned=self._pinned,
            spread=spread,
        )
        for op, d in placed.items():
            if op.op_def is not None and op.op_def.stateful:
                self._pinned.setdefault(op.name, d)
        if self.config.log_device_placement:
            for op in order:
                print(f"{op.name}: ({op.type}): {placed[op].name}")
        return placed

    def placement(self, fetches: Any = None) -> Any:
        """The plan of the last step (or of ``fetches``) as a DataFrame: op, type, device, flops, bytes.

        FLOPs and bytes come from each op's cost rule on its static shapes, with unknown
        dimensions counted as 1 (so a batch of None reads as a batch of one).
        """
        import pandas as pd

        if fetches is not None:
            fetch = _Fetches(self.graph, fetches)
            placeholders = [
                op.outputs[0] for op in self.graph.get_operations() if op.type == "Placeholder"
            ]
            plan = self._plan(fetch.elements, placeholders)
        elif self._last_plan is not None:
            plan = self._last_plan
        else:
            raise ValueError("placement(): no step has run yet; pass fetches")
        rows = []
        for node in plan.prepared.nodes:
            op = node.op
            c = _static_cost(op)
            rows.append(
                {
                    "op": op.name,
                    "type": op.type,
                    "device": node.device.name,
                    "flops": c.flops if c else float("nan"),
                    "bytes": (c.bytes_read + c.bytes_written) if c else float("nan"),
                }
            )
        return pd.DataFrame(rows, columns=["op", "type", "device", "flops", "bytes"])

    def _context_for(self, op: Operation, device: Any) -> ex.KernelContext:
        key = (op, device.name)
        ctx = self._contexts.get(key)
        if ctx is None:
            res = self._resources.setdefault(device.name, {})
            device.resources = res
            ctx = self._contexts[key] = ex.KernelContext(op, device, res, self)
        return ctx

    # ---- running -------------------------------------------------------------------------
    def make_callable(
        self, fetches: Any, feed_list: Any = None, accept_options: bool = False
    ) -> Callable:
        """TF1's: a function of the values of ``feed_list`` (in its order) that runs
        ``fetches`` (``options=``/``run_metadata=`` keywords with ``accept_options``)."""
        feeds = list(feed_list or [])

        def call(*values: Any, options: Any = None, run_metadata: Any = None) -> Any:
            if len(values) != len(feeds):
                raise TypeError(f"this callable takes {len(feeds)} feed values, got {len(values)}")
            if not accept_options and (options is not None or run_metadata is not None):
                raise TypeError("make_callable(accept_options=False): no options or run_metadata")
            return self.run(fetches, dict(zip(feeds, values)), options, run_metadata)

        return call

    @property
    def graph_def(self) -> Any:
        """The session's graph as TensorFlow's ``GraphDef`` proto (``Graph.as_graph_def``)."""
        return self.graph.as_graph_def()

    def run(
        self,
        fetches: Any,
        feed_dict: dict | None = None,
        options: Any = None,
        run_metadata: Any = None,
    ) -> Any:
        """Compute ``fetches`` (a tensor, op, name, or nested list/tuple/dict of them).

        ``feed_dict`` maps tensors (placeholders or any other tensor) to values. Returns numpy
        values in the structure of ``fetches`` (None for ops). Raises the OpError subclass that
        describes the failure, naming the op; the session stays usable afterwards.
        """
        if self._closed:
            raise RuntimeError("attempted to use a closed Session")
        fetch = _Fetches(self.graph, fetches)
        feeds = self._resolve_feeds(feed_dict or {})
        plan = self._plan(fetch.elements, list(feeds))
        tracer = None
        if options is not None and getattr(options, "trace_level", 0) > 0:
            from .timeline import TracingObserver

            tracer = TracingObserver()
        values = self._run_plan(plan, feeds, tracer, options)
        if tracer is not None and run_metadata is not None:
            run_metadata.step_stats = tracer.frame()
        out = []
        for el, v, copy, is_op in zip(fetch.elements, values, plan.fetch_copy, plan.fetch_is_op):
            if is_op:
                out.append(None)
            elif v is DEAD:
                raise InvalidArgumentError(
                    f"fetched tensor {el.name!r} was not computed: it is in the branch of a "
                    "cond that did not run; fetch the cond's result instead"
                )
            else:
                v = self._to_host(v)
                if v.__class__ is VarHandle:  # a variable's reference: its value, as in TF
                    v, copy = self._to_host(v.read()), True
                if copy and isinstance(v, np.ndarray):  # under its variable's lock, if any
                    v = snapshot(v, self._resources.values())
                if v.__class__ is np.ndarray and v.ndim == 0:
                    # as in TF: a scalar is numpy's scalar of its dtype (np.float32(3.0), not a
                    # 0-d array: hashable, like TF's), a scalar string is bytes
                    v = v.item() if v.dtype.kind == "O" else v[()]
                out.append(v)
        return fetch.build(out)

    def run_observed(self, fetches: Any, feed_dict: dict | None, make_observer: Callable) -> Any:
        """Run one step of ``fetches`` with a StepObserver (see executor.py) and return it.

        ``make_observer(prepared, feeds)`` builds the observer from the step's PreparedGraph and
        its resolved feeds (tensor -> value); it hears every node start and finish (profiling,
        calibration). The fetched values are not returned.
        """
        if self._closed:
            raise RuntimeError("attempted to use a closed Session")
        fetch = _Fetches(self.graph, fetches)
        feeds = self._resolve_feeds(feed_dict or {})
        plan = self._plan(fetch.elements, list(feeds))
        observer = make_observer(plan.prepared, feeds)
        self._run_plan(plan, feeds, observer)
        return observer

    def _to_host(self, v: Any) -> Any:
        if isinstance(v, np.ndarray) or np.isscalar(v) or v is None:
            return v
        get = getattr(v, "get", None)  # cupy arrays
        if get is None:
            return v
        sync = getattr(getattr(v, "device", None), "synchronize", None)
        if sync is not None:  # the kernels that made it may run on a non-blocking stream
            sync()
        return get()

    def _run_plan(
        self, plan: _Plan, feeds: dict, observer: Any = None, options: Any = None
    ) -> list:
        prep = plan.prepared
        vals: list = [None] * prep.n_slots
        for t, s in prep.feed_slots.items():
            vals[s] = feeds[t]
        self._last_plan = plan
        step = StepInfo(ex.new_step_id(), self._rendezvous() if plan.multi_device else None, self)
        self._active.add(step)
        try:
            return self._execute(plan, vals, step, observer, options)
        finally:
            self._active.discard(step)

    def _execute(
        self, plan: _Plan, vals: list, step: StepInfo, observer: Any, options: Any
    ) -> list:
        prep = plan.prepared
        observer = observer or self._observer(plan)
        ms = getattr(options, "timeout_in_ms", 0) or self.config.operation_timeout_in_ms
        ex.run_step(prep, vals, step, None, observer, ms / 1000.0 if ms > 0 else None)
        return [vals[s] if s is not None else None for s in prep.fetch_slots]

    def _observer(self, plan: _Plan) -> Any:
        """A StepObserver for every step (none here; simulated sessions account memory)."""
        return None

    def _rendezvous(self) -> Any:
        from .rendezvous import LocalRendezvous

        return LocalRendezvous()

    def _resolve_feeds(self, feed_dict: dict) -> dict[Tensor, Any]:
        feeds: dict[Tensor, Any] = {}
        items = list(feed_dict.items())
        while items:
            k, v = items.pop(0)
            if isinstance(k, (tuple, list)) and not hasattr(k, "_value_type"):
                # a nested structure of tensors (an RNN's LSTMStateTuple state, as TF1 allows):
                # the value has the same structure
                if not isinstance(v, (tuple, list)) or len(v) != len(k):
                    raise TypeError(
                        f"feeding a structure of {len(k)} tensors ({type(k).__name__}) needs a "
                        f"value of the same structure, got {type(v).__name__}"
                        + (f" of length {len(v)}" if isinstance(v, (tuple, list)) else "")
                    )
                items[:0] = list(zip(k, v))
                continue
            if isinstance(k, IndexedSlices):
                raise TypeError("feeding IndexedSlices is not supported; feed its parts")
            if isinstance(k, tuple) and hasattr(k, "_value_type"):  # a SparseTensor: its parts
                if not (isinstance(v, tuple) and len(v) == 3):
                    raise TypeError(
                        "feed a SparseTensor with a SparseTensorValue or an (indices, values, "
                        f"dense_shape) tuple, got {type(v).__name__}"
                    )
                for part, value in zip(k, v):
                    el = self.graph.as_graph_element(part)
                    feeds[el] = _feed_value(el, value)
                continue
            el = self.graph.as_graph_element(k)
            if isinstance(el, Operation):
                raise TypeError(f"cannot feed operation {el.name}; feed one of its output tensors")
            feeds[el] = _feed_value(el, v)
        return feeds

    def _plan(self, elements: list, fed: list[Tensor]) -> _Plan:
        key = (tuple(id(e) for e in elements), tuple(id(t) for t in fed))
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        with self._lock:
            plan = self._plans.get(key)
            if plan is None:
                plan = self._build_plan(elements, fed)
                self._plans[key] = plan
        return plan

    def _build_plan(self, elements: list, fed: list[Tensor]) -> _Plan:
        order = pruned_order(elements, fed)
        placed = self._place(order)
        devices_used = {placed[op].name for op in order}
        if len(devices_used) <= 1:
            prepared = ex.build_prepared(
                order, elements, fed, placed.__getitem__, self._context_for, fuse=self._fuse
            )
        else:
            from .partition import partition

            parts = partition(
                order,
                placed.__getitem__,
                compress=self._compress_rule(),
                process_of=self._process_of(),
            )
            prepared = ex.build_prepared(
                parts.order,
                elements,
                fed,
                parts.device_of.__getitem__,
                self._context_for,
                parts.input_map,
                parts.control_map,
                inline_async=True,
                fuse=self._fuse,
            )
        copy = [isinstance(e, Tensor) and _may_alias_state(e) for e in elements]
        plan = _Plan(prepared, fed, copy, [isinstance(e, Operation) for e in elements])
        plan.multi_device = len(devices_used) > 1
        return plan

    def _process_of(self) -> Any:
        """``device -> process`` when this session's devices stand for several processes whose
        loops need control loops (partition.py); None: one process."""
        return None

    def _compress_rule(self) -> Any:
        c = self.config.compress_transfers
        if c is True:
            return lambda t, src, dst: True
        return c or None

    def _load_variable(self, var: Any, value: Any) -> None:
        self.run(var.initializer, {var.initial_value: value})

    # ---- lifecycle -------------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        from .errors import CancelledError

        for step in list(self._active):  # steps still waiting (a dequeue, a take) fail now
            step.cancel(CancelledError("the session was closed while the step was running"))
        for d in self._devices:
            d.close()
        self._plans.clear()
        self._contexts.clear()
        self._resources.clear()

    def __enter__(self) -> BaseSession:
        self._default_cm = self.as_default()
        self._default_cm.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._default_cm.__exit__(*exc)
        self.close()

    def as_default(self):
        return _default_session(self)

    def __del__(self) -> None:
        try:
            if not self._closed:
                for d in self._devices:
                    d.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


class Session(BaseSession):
    """A TF1-style session on this process's devices: ``with hb.Session() as sess: sess.run(y)``.

    With a ``"grpc://host:port"`` target it is a ``DistributedSession`` on that cluster.
    """

    def __new__(cls, target: str = "", *args: Any, **kwargs: Any) -> Session:
        if cls is Session and isinstance(target, str) and target:
            for scheme, load in _SESSION_KINDS.items():
                if target.startswith(scheme):
                    return super().__new__(load())
        return super().__new__(cls)


class InteractiveSession(Session):
    """A Session that installs itself as the default session on construction."""

    def __init__(
        self, target: str = "", graph: Graph | None = None, config: ConfigProto | None = None
    ):
        super().__init__(target, graph, config)
        self._cm = self.as_default()
        self._cm.__enter__()

    def close(self) -> None:
        super().close()
        cm = getattr(self, "_cm", None)
        if cm is not None:
            self._cm = None
            with contextlib.suppress(Exception):
                cm.__exit__(None, None, None)


def pruned_order(elements: list, fed: list[Tensor]) -> list[Operation]:
    """The ops that fetching ``elements`` with ``fed`` fed needs, in topological order.

    Raises InvalidArgumentError naming a placeholder that is needed but not fed.
    """
    fed_set = set(fed)
    targets = [e if isinstance(e, Operation) else e.op for e in elements if e not in fed_set]
    order = ex.prune(targets, fed_set)
    for op in order:
        if op.type == "Placeholder" and all(t not in fed_set for t in op.outputs):
            raise InvalidArgumentError(
                f"you must feed a value for placeholder {op.name!r} "
                f"(dtype {op.attrs['dtype'].name}, shape {op.attrs['shape']}); "
                f"it is needed to compute {', '.join(e.name for e in elements)}"
            )
    return order


def _static_cost(op: Operation) -> Any:
    try:
        ins = [tuple(1 if d is None else d for d in t.shape.dims) for t in op.inputs]
        outs = [tuple(1 if d is None else d for d in t.shape.dims) for t in op.outputs]
        return op.op_def.cost_fn(op, ins, outs)
    except Exception:  # noqa: BLE001 - unknown rank: no estimate
        return None


def _may_alias_state(t: Tensor) -> bool:
    """Whether a fetched value could share memory with a variable or constant buffer."""
    seen = 0
    while seen < 64:
        op = t.op
        d = op.op_def
        if d.stateful or op.type in ("ReadVariable", "Const"):  # update ops are stateful
            return True
        if not any(k.aliases_input for ks in d.kernels.values() for k in ks) or not op.inputs:
            return False
        t = op.inputs[0]
        seen += 1
    return True


def _feed_value(t: Tensor, v: Any) -> Any:
    if isinstance(v, Tensor):
        raise TypeError(f"the value fed for {t.name} is a Tensor ({v.name}); feed a numpy value")
    want = t.dtype
    if want.is_string:
        try:
            arr = _dt.to_string_array(v, f"feeding {t.name}")
        except TypeError as e:
            raise InvalidArgumentError(str(e)) from None
        if not t.shape.is_compatible_with(arr.shape):
            raise InvalidArgumentError(
                f"cannot feed value of shape {arr.shape} for tensor {t.name!r}, which has shape "
                f"{t.shape}"
            )
        return arr
    arr = np.asarray(v)
    if arr.dtype != want.np:
        if arr.dtype.kind == "f" and want.is_integer:
            # TF1 truncates silently; whole numbers (labels made by np.ones/np.zeros) convert,
            # a fraction or a non-finite value is refused rather than changed
            if not np.all(np.isfinite(arr)) or np.any(arr != np.trunc(arr)):
                raise InvalidArgumentError(
                    f"cannot feed float values that are not whole numbers for {t.name}, which "
                    f"has dtype {want.name}"
                )
        if arr.dtype.kind in "OUS":
            raise InvalidArgumentError(
                f"cannot feed a {arr.dtype} value for {t.name} ({want.name})"
            )
        _check_representable(arr, want, t.name)
        if arr.dtype.kind == "c" and np.dtype(want.np).kind != "c":
            arr = arr.real  # its imaginary part is zero (checked)
        arr = arr.astype(want.np)
    if not t.shape.is_compatible_with(arr.shape):
        raise InvalidArgumentError(
            f"cannot feed value of shape {arr.shape} for tensor {t.name!r}, which has shape {t.shape}"
        )
    return arr


def _check_representable(arr: np.ndarray, want: Any, name: str) -> None:
    """Refuse a conversion that would change values silently (stricter than TF, which wraps):
    integers out of the target's range, a nonzero imaginary part dropped, a bool that is not
    0/1, finite floats overflowing to infinity. Rounding to a narrower float is allowed."""
    src, dst = arr.dtype, np.dtype(want.np)
    if arr.size == 0:
        return
    if src.kind == "c" and dst.kind != "c" and np.any(arr.imag != 0):
        raise InvalidArgumentError(
            f"cannot feed complex values with a nonzero imaginary part for {name} ({want.name})"
        )
    if dst.kind in "iu" and src.kind in "iub":
        info = np.iinfo(dst)
        lo, hi = arr.min(), arr.max()
        if lo < info.min or hi > info.max:
            raise InvalidArgumentError(
                f"values fed for {name} range over [{lo}, {hi}], outside {want.name}'s "
                f"[{info.min}, {info.max}]; they would wrap"
            )
    elif dst.kind == "b" and src.kind in "iuf" and np.any((arr != 0) & (arr != 1)):
        raise InvalidArgumentError(f"values fed for {name} (bool) must be 0 or 1")
    elif dst.kind == "f" and src.kind in "fc" and src.itemsize > dst.itemsize:
        real = arr.real if src.kind == "c" else arr
        big = np.abs(real[np.isfinite(real)])
        if big.size and big.max() > np.finfo(dst).max:
            raise InvalidArgumentError(
                f"values fed for {name} reach {big.max():g}, beyond {want.name}'s largest "
                f"finite value {np.finfo(dst).max:g}"
            )


_session_local = threading.local()


@contextlib.contextmanager
def _default_session(sess: BaseSession) -> Iterator[BaseSession]:
    stack = getattr(_session_local, "stack", None)
    if stack is None:
        stack = _session_local.stack = []
    stack.append(sess)
    try:
        with sess.graph.as_default():
            yield sess
    finally:
        stack.remove(sess)


def get_default_session() -> BaseSession | None:
    stack = getattr(_session_local, "stack", None)
    return stack[-1] if stack else None


__all__ = ["Session", "InteractiveSession", "ConfigProto", "get_default_session"]
