"""Placement: choose a device for every op of a step.

Rules, in order (as in TensorFlow's placer):

1. Colocation groups: ops joined by ``hb.colocate_with`` and every op that takes a variable's
   reference (assign, optimizer updates, reads) form one group with the variable; a group runs on
   one device. Members' device requests are merged field by field; two members asking for
   different values of a field is an error naming both ops and devices.
2. A group's requested (possibly partial) device spec selects the devices that match it; none
   matching is an error, unless soft placement relaxes the request as TF's placer does: the job,
   replica and task kept, any device of that task (the requested type first: a missing
   ``gpu:3`` becomes the task's ``gpu:0``, a missing GPU its CPU). A request no device of any
   kind matches (a task or job the session lacks) falls back to the default device, with a
   warning naming the op and the request.
3. Devices without a kernel for every member (by op, device type and dtype) are dropped; with soft
   placement a group with no such device falls back to any device that has the kernels.
4. Unconstrained groups go to the default device, or are spread by the cost-aware placer.

``place`` returns {op: device} and never modifies the graph.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from ..devices.naming import DeviceSpec
from .errors import InvalidArgumentError

_log = logging.getLogger("hetbed")


class _Groups:
    """Union-find over ops."""

    def __init__(self) -> None:
        self.parent: dict[Any, Any] = {}

    def find(self, x: Any) -> Any:
        p = self.parent.setdefault(x, x)
        while p is not self.parent.setdefault(p, p):
            self.parent[x] = p = self.parent[p]
        return p

    def union(self, a: Any, b: Any) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra is not rb:
            if ra._id > rb._id:
                ra, rb = rb, ra
            self.parent[rb] = ra


def colocation_groups(
    ops: Iterable[Any], universe: Iterable[Any] | None = None
) -> dict[Any, list[Any]]:
    """Root op -> members, joining explicit colocation and variable-reference consumers.

    With ``universe`` (the whole graph's ops), groups are formed over it, as TensorFlow's placer
    does, and only those holding an op of ``ops`` are returned, with all their members: a step
    that reads a variable alone then already sees the ops that will join it in later steps (the
    queue SyncReplicasOptimizer colocates with the global step), so the first placement, which
    pins the variable, suits them too."""
    ops = list(ops)
    if universe is not None:
        groups = colocation_groups(universe)
        wanted = {id(op) for op in ops}
        out = {}
        covered: set[int] = set()
        for r, m in groups.items():
            if len(m) == 1:  # (most groups)
                i = id(m[0])
                if i in wanted:
                    out[r] = m
                    covered.add(i)
                continue
            ids = [id(x) for x in m]
            if not wanted.isdisjoint(ids):
                out[r] = m
                covered.update(ids)
        for op in ops:  # ops outside the universe (none in practice) keep their own group
            if id(op) not in covered:
                out[op] = [op]
        return out
    uf = _Groups()
    parent = uf.parent
    for op in ops:
        if op not in parent:
            parent[op] = op
        for name in op.colocation_groups:
            try:
                other = op.graph.get_operation_by_name(name)
            except KeyError:
                continue
            uf.union(op, other)
        for t in op.inputs:
            p = t.op
            d = p.op_def
            if d is not None and d.is_ref:
                uf.union(op, p)
    groups: dict[Any, list[Any]] = {}
    for op, p in parent.items():  # (finds below change values only: no key is added)
        if p is op and op not in groups:
            groups[op] = [op]
        else:
            groups.setdefault(uf.find(op), []).append(op)
    return groups


_FIELDS = ("job", "replica", "task", "device_type", "device_index")
_ANY = DeviceSpec()  # no request


def _merge_requests(members: list[Any], soft: bool) -> tuple[DeviceSpec, Any]:
    """Merge members' requests; the variable's (ref op's) request comes first and, with soft
    placement, wins a conflict; without soft placement a conflict is an error."""
    if len(members) == 1:  # (most groups: one op, its own request)
        op = members[0]
        if not op.device:
            return _ANY, {}
        req = DeviceSpec.from_string(op.device)
        return req, {f: op for f in _FIELDS if getattr(req, f) is not None}
    fields: dict[str, Any] = {}  # the merged request, built once at the end
    first_for: dict[str, Any] = {}
    ranked = sorted(members, key=lambda o: (not (o.op_def is not None and o.op_def.is_ref), o._id))
    for op in ranked:
        if not op.device:
            continue
        req = DeviceSpec.from_string(op.device)
        for f in _FIELDS:
            v = getattr(req, f)
            if v is None:
                continue
            cur = fields.get(f)
            if cur is not None and cur != v:
                if soft:
                    continue
                other = first_for[f]
                raise InvalidArgumentError(
                    f"cannot colocate op {op.name!r} (device {op.device!r}) with op "
                    f"{other.name!r} (device {other.device!r}): they conflict on {f} "
                    f"({cur!r} vs {v!r}); colocated ops (hb.colocate_with, ops using a variable) "
                    "must run on one device"
                )
            first_for.setdefault(f, op)
            fields[f] = v
    return DeviceSpec(**fields), first_for


def _soft_candidates(spec: DeviceSpec, devices: list[Any]) -> list[Any]:
    """TF's soft placement of a request no device matches: the devices of its job, replica and
    task, those of the requested type first."""
    task_only = DeviceSpec(job=spec.job, replica=spec.replica, task=spec.task)
    same_task = [d for d in devices if task_only.matches(DeviceSpec.from_string(d.name))]
    want = (spec.device_type or "").upper()
    first = [d for d in same_task if DeviceSpec.from_string(d.name).device_type.upper() == want]
    return first + [d for d in same_task if d not in first]


def place(
    ops: list[Any],
    devices: list[Any],
    default: Any,
    soft: bool = True,
    pinned: dict[str, Any] | None = None,
    spread: Any = None,
) -> dict[Any, Any]:
    """{op: device} for ``ops`` (see the module docstring).

    ``pinned`` maps op names to devices chosen earlier (stateful ops must stay put across steps);
    ``spread(groups) -> {root: device}`` may choose devices for unconstrained groups.
    """
    from .executor import kernel_dtype

    pinned = pinned or {}
    by_name = {d.name: d for d in devices}
    out: dict[Any, Any] = {}
    free_groups = []
    cands_of: dict[DeviceSpec, list] = {}  # a request -> the devices it matches
    in_step = {id(op) for op in ops}
    universe = ops[0].graph.get_operations() if ops else None
    # a lone op's device depends only on its request, its kernels and its dtype: ops alike
    # (most of a graph) take the first one's choice (device, whether it was free to spread)
    alike: dict[tuple, tuple[Any, bool]] = {}
    for root, group in colocation_groups(ops, universe).items():
        key = None
        if len(group) == 1 and group[0].name not in pinned:
            op = group[0]
            key = (op.device, op.op_def, kernel_dtype(op))
            hit = alike.get(key)
            if hit is not None:
                if hit[1]:
                    free_groups.append((root, group))
                out[op] = hit[0]
                continue
        members = [m for m in group if id(m) in in_step]
        spec, _ = _merge_requests(members, soft)
        pin = next((pinned[m.name] for m in group if m.name in pinned), None)
        need = [(m, kernel_dtype(m)) for m in members if m.op_def is not None]
        # members of later steps: their kernels count too, unless no device has them all
        more = [(m, kernel_dtype(m)) for m in group if id(m) not in in_step and m.op_def]
        if more and any(
            all(m.op_def.has_kernel(d.kernel_type, dt) for m, dt in need + more) for d in devices
        ):
            need = need + more

        def has_kernels(d: Any, need=need) -> bool:
            return all(m.op_def.has_kernel(d.kernel_type, dt) for m, dt in need)

        free = False
        if pin is not None and pin.name in by_name:
            chosen = pin
        elif spec == _ANY:
            if has_kernels(default):
                free_groups.append((root, members))
                chosen, free = default, True
            else:
                chosen = _with_kernels(devices, has_kernels, members, "", soft, default)
        else:
            cands = cands_of.get(spec)  # (most groups ask for one of a few devices)
            if cands is None:
                cands = [d for d in devices if spec.matches(DeviceSpec.from_string(d.name))]
                if not cands and soft:
                    cands = _soft_candidates(spec, devices)
                    if not cands:
                        cands = [default] + [d for d in devices if d is not default]
                        op = next((m for m in members if m.device), members[0])
                        _log.warning(
                            "soft placement: op %r asks for %s, which matches no device of this "
                            "session (%s); placed on %s",
                            op.name,
                            op.device,
                            ", ".join(d.name for d in devices),
                            default.name,
                        )
                cands_of[spec] = cands
            if not cands:
                op = next(m for m in members if m.device)
                raise InvalidArgumentError(
                    f"cannot place op {op.name!r}: requested device {op.device!r} matches no "
                    f"device; this session has {', '.join(short_name(d.name) for d in devices)}"
                )
            chosen = next((d for d in cands if has_kernels(d)), None)
            if chosen is None:
                chosen = _with_kernels(devices, has_kernels, members, spec, soft, default)
        for m in members:
            out[m] = chosen
        if key is not None:
            alike[key] = (chosen, free)
    if spread is not None and free_groups and len(devices) > 1:
        choice = spread(free_groups)
        for root, members in free_groups:
            d = choice.get(root)
            if d is not None:
                for m in members:
                    out[m] = d
    return out


def _with_kernels(devices, has_kernels, members, spec, soft, default):
    from .executor import kernel_dtype

    ok = [d for d in devices if has_kernels(d)]
    if soft and ok:
        return default if default in ok else ok[0]
    if not ok:  # no device at all can run it: say which kernel is missing
        for m in members:
            for d in devices:
                m.op_def.find_kernel(d.kernel_type, kernel_dtype(m), m.name)
    bad = next(
        (
            m
            for m in members
            for d in [default]
            if not m.op_def.has_kernel(d.kernel_type, kernel_dtype(m))
        ),
        members[0],
    )
    dt = kernel_dtype(bad)
    types = sorted(bad.op_def.kernels)
    raise InvalidArgumentError(
        f"cannot place op {bad.name!r} ({bad.type}, {dt.name if dt else '?'}) on "
        f"{spec or 'any device'}: no kernel there and soft placement is off; "
        f"kernels registered for: {', '.join(types) or 'none'}; devices: "
        f"{', '.join(short_name(d.name) for d in devices)}"
    )


def short_name(name: str) -> str:
    return name.split("/device:")[-1] if "/device:" in name else name


def cost_aware_spread(
    order: list[Any], devices: list[Any], fixed: dict[Any, Any], shape_of: Any = None
) -> Any:
    """A ``spread`` for ``place``: earliest-finish-time list scheduling of unconstrained groups.

    Ops are visited in topological order; a group goes to the device where its first op would
    finish earliest, counting the device's queue, the op's roofline duration on that device
    (``device.perf()``: peak FLOP/s, memory bytes/s, launch overhead) and the transfer of every
    input that lives elsewhere (``device.link()``: bytes/s and latency). This is beyond what
    TensorFlow shipped; the simulator uses it for what-if placement studies.
    """
    from .registry import numel

    def dims(t: Any) -> tuple:
        if shape_of is not None:
            s = shape_of(t)
            if s is not None:
                return tuple(1 if d is None else d for d in s)
        sd = t.shape.dims
        return tuple(1 if d is None else d for d in sd) if sd is not None else ()

    def duration(op: Any, dev: Any) -> float:
        try:
            c = op.op_def.cost_fn(op, [dims(t) for t in op.inputs], [dims(t) for t in op.outputs])
        except Exception:  # noqa: BLE001 - an op without a usable cost rule costs its launch
            c = None
        peak, bw, launch = dev.perf()
        if c is None:
            return launch
        return max(c.flops / peak, (c.bytes_read + c.bytes_written) / bw) + launch

    def spread(free_groups: list) -> dict:
        root_of = {m: root for root, members in free_groups for m in members}
        choice: dict[Any, Any] = {}
        ready_at = dict.fromkeys(devices, 0.0)
        done_at: dict[Any, float] = {}
        where: dict[Any, Any] = dict(fixed)
        for op in order:
            root = root_of.get(op)
            cands = (
                [choice[root]] if root in choice else devices if root is not None else [where[op]]
            )
            best = None
            for dev in cands:
                start = ready_at[dev]
                for t in op.inputs:
                    src = where.get(t.op)
                    arrive = done_at.get(t.op, 0.0)
                    if src is not None and src is not dev:
                        bw, lat = dev.link(src)
                        arrive += lat + numel(dims(t)) * t.dtype.size / bw
                    start = max(start, arrive)
                end = start + duration(op, dev)
                if best is None or end < best[0] - 1e-12:
                    best = (end, dev)
            end, dev = best
            if root is not None:
                choice.setdefault(root, dev)
            where[op] = dev
            done_at[op] = end
            ready_at[dev] = end
        return choice

    return spread
