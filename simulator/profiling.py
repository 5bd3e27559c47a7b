"""``profile_from_graph``: what one worker replica does per step (a ``ReplicaProfile``),
measured on a hetbed graph with the op-level simulator (``SimSession``), variables placed by
``runtime/device_setter``'s strategies, the PS's accumulator and update ops priced as the
op-level simulation prices them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from hetbed.devices.catalog import load_device
from hetbed.devices.costmodel import (
    CostModel,
    DevicePerf,
    Roofline,
    perf_from_spec,
    roofline_seconds,
)
from hetbed.devices.simulated import (
    ONE_CORE_DISPATCHES,
    default_cores,
    measured_cores,
    value_nbytes,
)

from .cluster import Cluster
from .profile import ReplicaProfile
from .session import SimSession, sim_value

__all__ = ["accumulate_s", "profile_from_graph"]


# ---- measuring a profile on a graph -----------------------------------------------------------


def profile_from_graph(
    train_op: Any,
    feeds: Mapping[Any, Any],
    worker: Any = "k40",
    ps: Any = "xeon_e5_2630v3_ps",
    ps_tasks: int = 1,
    strategy: str = "round_robin",
    variables: Iterable[Any] | None = None,
    examples_per_step: int | None = None,
    apply_s: Mapping[str, float] | float | None = None,
    cost_model: CostModel | None = None,
    aggregate_s: Mapping[str, float] | float | None = None,
    host_topology: str | None = None,
    cache_share: int = 1,
    fetches: Any = (),
) -> ReplicaProfile:
    """Measure one replica's ``ReplicaProfile`` with the op-level simulator.

    ``train_op`` is one replica's training op (``opt.minimize(loss)``) built by the caller;
    ``feeds`` maps its placeholders to shapes (or ``sim_value``s or arrays); ``worker`` and
    ``ps`` are catalog keys, HardwareSpecs or DevicePerfs. Then:

    - ``compute_s``: the simulated time of the forward + backward ops (fetching the gradients
      that the update ops consume) on a one-worker cluster whose device is ``worker``, with the
      variables local (device requests in the graph are relaxed by soft placement);
    - variables (default: the trainable ones ``train_op`` updates) are placed on ``ps_tasks`` PS tasks by
      ``runtime/device_setter``'s ``strategy`` ("round_robin" or "greedy") in creation order; a
      variable whose update op takes row indices is sparse (rows = number of indices);
    - ``apply_s``: the roofline (or ``cost_model``) time of each variable's update op on ``ps``,
      unless given; ``resident_bytes`` counts the variable and its optimizer slots;
    - ``aggregate_s``: unless given, the roofline time on ``ps`` of adding one gradient (the
      variable's bytes, or its touched rows') into an accumulator: read both, write one;
    - ``grad_ready``: when each variable's gradient was ready in that step (the end of the last
      op making an input of its update op), as a fraction of ``compute_s``;
    - ``worker_apply_s``: the roofline (or ``cost_model``) time of each update op on ``worker``
      (all-reduce jobs update on the worker; ``apply_s`` given: that number as well);
    - ``host_topology``: a catalog host topology the worker's host is built as (its GPU on the
      topology's ``gpu0``, so its transfers to and from host memory follow the topology);
    - message costs: the catalog's of the worker task's CPU (``worker`` itself when it is a
      CPU, else the host CPU a cluster gives the task) and of ``ps``; ``ps_cores``: ``ps``'s;
    - ``update_inputs``: the distinct inputs of the update ops that are neither a variable, a
      slot, a gradient, row indices nor made beside a variable (its read): a learning rate,
      an optimizer's constants, a fed hyperparameter.

    ``fetches``: what the step fetches besides ``train_op`` (a loss, predictions; a list, or
    one tensor, op or name): computed in the profiled step, their bytes are ``fetch_bytes``
    (what the worker's own task returns in its reply; a fed value fetched back is free, its
    client answering from the feed; ``train_op`` and its update ops are left out: the step runs
    them anyway). A variable (or its read), which a replicated program keeps on its PS tasks,
    raises ValueError: the step-level drivers price values fetched from the worker's own task
    only (the op-level ``SimSession`` prices any).

    ``cache_share``: how many tasks share one machine with the replica (``hetbed cluster``'s
    tasks on one host): CPU ops are priced with that share of the cache and the per-event
    software costs of an oversubscribed host (``DevicePerf.shared_host``), as the op-level
    simulator prices the tasks of one ``Cluster`` machine.

    Raises ValueError when ``ps_tasks < 1`` or a variable has no update op under ``train_op``,
    and the op-level simulator's ResourceExhaustedError when the step does not fit the worker.
    """
    from hetbed.runtime.device_setter import GreedyLoadBalancingStrategy, RoundRobinStrategy

    if int(ps_tasks) != ps_tasks or ps_tasks < 1:
        raise ValueError(f"profile_from_graph: ps_tasks must be >= 1, got {ps_tasks!r}")
    if strategy in ("round_robin", "round-robin"):
        choose: Any = RoundRobinStrategy(int(ps_tasks))
    elif strategy == "greedy":
        choose = GreedyLoadBalancingStrategy(int(ps_tasks))
    else:
        raise ValueError(f"unknown PS strategy {strategy!r}; use 'round_robin' or 'greedy'")
    op = getattr(train_op, "op", train_op)
    graph = op.graph
    updates = _update_ops(op)
    if variables is None:  # the trainable variables that train_op updates
        from hetbed.runtime.graph import GraphKeys

        trainable = {v.op for v in graph.get_collection(GraphKeys.TRAINABLE_VARIABLES)}
        var_ops = [v for v in graph.get_operations() if v in updates and v in trainable]
        if not var_ops:
            raise ValueError(f"{op.name!r} updates no trainable variable; pass variables=...")
    else:
        var_ops = [getattr(v, "op", v) for v in variables]
    for v in var_ops:
        if v not in updates:
            raise ValueError(
                f"variable {v.name!r} has no update op under {op.name!r}; "
                f"updated variables: {sorted(u.name for u in updates)}"
            )
    # (a) forward + backward on one worker device
    wspec = load_device(worker) if isinstance(worker, str) else worker
    pspec = load_device(ps) if isinstance(ps, str) else ps
    cluster = Cluster(cost_model=cost_model)
    kind = getattr(wspec, "kind", "gpu")
    if kind == "cpu":  # (a replica's step is a distributed one: its ops run clocked)
        cpu = perf_from_spec(wspec).clocked().shared_host(cache_share)
        cluster.add_task("worker", 0, cpu=cpu)
    elif kind == "tpu":
        cluster.add_task("worker", 0, tpu=(wspec, 1))
    else:
        cluster.add_task("worker", 0, gpu=(wspec, 1), host_topology=host_topology)
    fetches_extra = list(fetches) if isinstance(fetches, (list, tuple, set)) else [fetches]
    fetches, indices = [], {}
    for v in var_ops:
        u = updates[v]
        for t in u.inputs[1:]:
            if t.op.op_def is not None and t.op.op_def.is_ref:
                continue  # slots
            if t.dtype.is_integer and t.shape.ndims != 0:
                indices[v] = t
            # every other input, scalars too: a scalar variable's gradient is a scalar, and
            # fetching it is what makes the forward and backward pass run (a learning rate or
            # another constant costs nothing)
            if t not in fetches:
                fetches.append(t)
    fetches += [t for t in indices.values() if t not in fetches]
    fetched = _fetched_tensors(graph, fetches_extra, [op, *updates.values()])
    n_grads = len(fetches)
    fetches += fetched
    feed_values = {k: _as_sim_value(v) for k, v in feeds.items()}
    sess = _WorkerFirstSession(cluster, graph=graph)
    try:
        values = sess.run(fetches, feed_values)
        rec = sess.last_record
    finally:
        sess.close()
    compute_s = rec.step_time_s
    op_end = rec.ops.groupby("op").end_s.max().to_dict()
    dev = rec.devices.iloc[0]
    wcpu = cluster.task_cpu(cluster.tasks[0])
    serial_s = min(compute_s, wcpu.narrow_s) if wcpu is not None else 0.0
    wperf = wcpu.perf_spec if wcpu is not None else None
    shape_of = {t: tuple(getattr(val, "shape", ())) for t, val in zip(fetches, values)}
    # (b) placement on PS tasks (choose(v) below, in creation order) and (c) apply costs
    model = cost_model or Roofline()
    pperf = perf_from_spec(pspec).shared_host(cache_share)
    dense: dict[str, tuple[int, int]] = {}
    sparse: dict[str, tuple[int, int, int]] = {}
    apply: dict[str, float] = {}
    aggregate: dict[str, float] = {}
    take: dict[str, float] = {}
    apply_cores: dict[str, int] = {}
    aggregate_cores: dict[str, int] = {}
    take_cores: dict[str, int] = {}
    resident: dict[str, float] = {}
    worker_apply: dict[str, float] = {}
    ready: dict[str, float] = {}
    wdev_perf = perf_from_spec(wspec).shared_host(cache_share)
    for v in var_ops:
        u = updates[v]
        out = v.outputs[0]
        vshape = tuple(out.shape.dims)
        nbytes = int(np.prod(vshape, dtype=np.int64)) * out.dtype.size
        task = choose(v)
        ins = [
            shape_of.get(t) or tuple(1 if d is None else d for d in (t.shape.dims or ()))
            for t in u.inputs
        ]
        if v in indices:
            rows = int(np.prod(shape_of[indices[v]], dtype=np.int64))
            row_bytes = int(np.prod(vshape[1:], dtype=np.int64)) * out.dtype.size
            sparse[v.name] = (row_bytes, rows, task)
        else:
            dense[v.name] = (nbytes, task)
        slots = sum(1 for t in u.inputs[1:] if t.op.op_def is not None and t.op.op_def.is_ref)
        resident[v.name] = float(nbytes * (1 + slots))
        apply[v.name] = model.duration(u, ins, [vshape], pperf)
        worker_apply[v.name] = model.duration(u, ins, [vshape], wdev_perf)
        ends = [op_end.get(t.op.name, 0.0) for t in u.inputs[1:] if t in shape_of]
        if compute_s > 0 and ends:
            ready[v.name] = min(1.0, max(ends) / compute_s)
        # the accumulator's own ops, priced like any op (a profile measured them)
        if v in indices:
            acc = _sparse_accumulator_s(model, out.dtype, vshape, sparse[v.name][1], pperf)
        else:
            acc = _accumulator_s(model, out.dtype, vshape, pperf)
        aggregate[v.name], take[v.name], aggregate_cores[v.name], take_cores[v.name] = acc
        apply_cores[v.name] = _cores(model, u, ins, apply[v.name], pperf)
    if apply_s is not None:
        apply = dict(apply_s) if isinstance(apply_s, Mapping) else dict.fromkeys(apply, apply_s)
        worker_apply = dict(apply)
    if aggregate_s is not None:
        aggregate = (
            dict(aggregate_s)
            if isinstance(aggregate_s, Mapping)
            else dict.fromkeys(aggregate, aggregate_s)
        )
    if examples_per_step is None:
        shapes = [tuple(getattr(x, "shape", ())) for x in feed_values.values()]
        examples_per_step = next((s[0] for s in shapes if s), 1)
    return ReplicaProfile(
        compute_s=compute_s,
        compute_serial_s=serial_s,
        dense=dense,
        sparse=sparse,
        apply_s=apply,
        aggregate_s=aggregate,
        take_s=take,
        examples_per_step=int(examples_per_step),
        resident_bytes=resident,
        worker_memory_bytes=float(dev.memory_peak_bytes),
        worker_capacity_bytes=float(dev.memory_capacity_bytes) or None,
        ps_capacity_bytes=float(pperf.memory_bytes),
        worker_message_s=wperf.message_s if wperf is not None else 0.0,
        worker_control_message_s=wperf.control_s if wperf is not None else None,
        worker_own_control_message_s=wperf.own_control_s if wperf is not None else None,
        ps_control_message_s=pperf.control_s,
        worker_message_s_per_byte=wperf.message_s_per_byte if wperf is not None else 0.0,
        worker_step_s=wperf.step_s if wperf is not None else 0.0,
        worker_message_latency_s=wperf.message_latency_s if wperf is not None else 0.0,
        ps_message_latency_s=pperf.message_latency_s,
        ps_wake_s=pperf.wake_s,
        worker_wake_s=wperf.wake_s if wperf is not None else 0.0,
        feed_bytes=float(sum(value_nbytes(v) for v in feed_values.values())),
        fetch_bytes=float(
            sum(value_nbytes(v) for t, v in zip(fetched, values[n_grads:]) if t not in feeds)
        ),  # (a fed value fetched back: its client answers from the feed, as TensorFlow's)
        copy_cpu_factor=wperf.byte_factor(cache_share) if wperf is not None else 1.0,
        ps_message_s=pperf.message_s,
        ps_message_s_per_byte=pperf.message_s_per_byte,
        ps_cores=int(pperf.cores or 1),
        update_inputs=_update_inputs(updates[v] for v in var_ops),
        grad_ready=ready,
        worker_apply_s=worker_apply,
        apply_cores=apply_cores,
        aggregate_cores=aggregate_cores,
        take_cores=take_cores,
    )


def _accumulator_s(
    model: CostModel, dtype: Any, shape: tuple, perf: DevicePerf
) -> tuple[float, float, int, int]:
    """(seconds to add one gradient of ``shape`` into a ConditionalAccumulator, seconds to take
    the average out, the cores each keeps busy) on ``perf`` by ``model``: the ops
    SyncReplicasOptimizer runs on the PS, built in a graph of their own and priced as the
    op-level simulation prices them."""
    from hetbed.runtime.graph import Graph
    from hetbed.runtime.ops import array as A
    from hetbed.runtime.ops.data_flow import ConditionalAccumulator

    with Graph().as_default():
        acc = ConditionalAccumulator(dtype, shape=shape)
        apply = acc.apply_grad(A.placeholder(dtype, shape), local_step=np.int64(0))
        take = acc.take_grad(1).op
    add_s = model.duration(apply, [shape, (), shape], [], perf)
    take_s = model.duration(take, [shape, ()], [shape], perf)
    return (
        add_s,
        take_s,
        _cores(model, apply, [shape, (), shape], add_s, perf),
        _cores(model, take, [shape, ()], take_s, perf),
    )


def _sparse_accumulator_s(
    model: CostModel, dtype: Any, shape: tuple, rows: int, perf: DevicePerf
) -> tuple[float, float, int, int]:
    """``_accumulator_s`` for a variable of ``shape`` whose gradient is ``rows`` of its rows
    (IndexedSlices): a SparseConditionalAccumulator's add and take (SyncReplicasOptimizer's
    ops for such a gradient), priced as the op-level simulation prices them."""
    from hetbed.runtime.graph import Graph
    from hetbed.runtime.ops import array as A
    from hetbed.runtime.ops.sparse_accumulator import SparseConditionalAccumulator

    row = tuple(shape[1:])
    with Graph().as_default():
        acc = SparseConditionalAccumulator(dtype, shape=shape)
        idx, vals = A.placeholder(np.int64, (rows,)), A.placeholder(dtype, (rows, *row))
        apply = acc.apply_grad(idx, vals, local_step=np.int64(0))
        take = acc.take_grad(1)[0].op
    ins = [shape, (), (rows,), (rows, *row)]
    add_s = model.duration(apply, ins, [], perf)
    outs = [(rows,), (rows, *row), (len(shape),)]
    take_s = model.duration(take, [shape, ()], outs, perf)
    return (
        add_s,
        take_s,
        _cores(model, apply, ins, add_s, perf),
        _cores(model, take, [shape, ()], take_s, perf),
    )


def _cores(model: CostModel, op: Any, ins: list, seconds: float, perf: DevicePerf) -> int:
    """The cores of ``perf``'s host a kernel of ``op`` (``seconds`` long) keeps busy, by the
    op-level simulator's rule: as ``model`` measured it, else one for a kernel that is mostly
    its dispatch (at the clocked dispatch cost of a distributed step's task), else all."""
    cores = int(perf.cores or 1)
    measured = measured_cores(model, op, ins, cores, seconds)
    if measured is not None:
        return measured
    return default_cores(seconds, ONE_CORE_DISPATCHES * perf.clocked().launch_overhead_s, cores)


def accumulate_s(elements: float, nbytes: float, perf: DevicePerf) -> float:
    """Roofline seconds on ``perf`` to add a gradient of ``elements`` (``nbytes``) into an
    accumulator: one add per element, the accumulator and the gradient read, the accumulator
    written (the cost rule of AccumulatorApplyGradient), plus one launch."""
    return roofline_seconds(elements, 3.0 * nbytes, perf) + perf.launch_overhead_s


def _update_inputs(update_ops: Iterable[Any]) -> int:
    """How many distinct tensors besides the gradients the update ops take from the worker
    (see ``profile_from_graph``): inputs of an update op that are not its variable and slots,
    its gradient or its row indices, and not made by a variable or beside one."""
    seen: set[Any] = set()
    for u in update_ops:
        layout = getattr(u.op_def, "update_inputs", None)
        if layout is None:
            continue
        n_refs, grad, indices = layout
        for k, t in enumerate(u.inputs):
            if k < n_refs or k in (grad, indices):
                continue
            src = t.op
            if src.type == "VariableV2" or src.colocation_groups:
                continue  # on the PS: a variable's read (a beta power) or its own op
            seen.add(t)
    return len(seen)


def _fetched_tensors(graph: Any, items: Iterable[Any], skip: Iterable[Any]) -> list[Any]:
    """``profile_from_graph``'s ``fetches`` as the graph's tensors or ops, each once, less the
    ops of ``skip`` (the train op and its updates: the step runs them anyway, and the profile
    measures the compute without them). Raises ValueError naming one that a replicated program
    keeps on its PS tasks (``replica_device_setter``'s ``STANDARD_PS_OPS``: a variable, or an op
    colocated with one, its read), or that is not of ``graph``."""
    from hetbed.runtime.device_setter import STANDARD_PS_OPS
    from hetbed.runtime.placement import colocation_groups

    on_ps = set()
    for members in colocation_groups(graph.get_operations()).values():
        if any(m.type in STANDARD_PS_OPS for m in members):
            on_ps.update(members)
    skip = set(skip)
    out: list[Any] = []
    for item in items:
        try:
            t = graph.as_graph_element(item)
        except (TypeError, ValueError, KeyError) as e:
            raise ValueError(
                f"profile_from_graph: fetches: {item!r} is not of the graph: {e}"
            ) from e
        op = getattr(t, "op", t)
        if op in skip:
            continue
        if op in on_ps:
            raise ValueError(
                f"profile_from_graph: fetches: {op.name!r} is a variable or its read, which a "
                "replicated program keeps on its PS tasks; the step-level drivers price values "
                "fetched from the worker's own task only: leave it out (a global step's 8 bytes "
                "cost next to nothing) or simulate the step op by op with SimSession"
            )
        if t not in out:
            out.append(t)
    return out


def _update_ops(train_op: Any) -> dict[Any, Any]:
    """{variable op: the stateful op under ``train_op`` whose first input is its reference}."""
    seen, stack, out = set(), [train_op], {}
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        d = op.op_def
        if d is not None and d.stateful and op.inputs and not d.is_ref:
            src = op.inputs[0].op
            if src.op_def is not None and src.op_def.is_ref and src.type == "VariableV2":
                out.setdefault(src, op)
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    return out


def _as_sim_value(v: Any) -> Any:
    if hasattr(v, "shape") and hasattr(v, "dtype"):
        return v
    if isinstance(v, tuple) and len(v) == 2 and not isinstance(v[1], (int, np.integer)):
        return sim_value(v[0], v[1])
    return sim_value(v)


class _WorkerFirstSession(SimSession):
    """A SimSession whose default device is the worker's accelerator (else its CPU)."""

    def _make_devices(self) -> list:
        return sorted(super()._make_devices(), key=lambda d: d.device_type == "cpu")
