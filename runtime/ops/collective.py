"""Collective all-reduce across devices: one op per participant, meeting in the step.

Each participant's op runs on its own device and contributes its tensor; when the last one
arrives, the group computes the sum (or mean) once and every participant completes with the
result on its own device. On GPUs with NCCL available (cupy.cuda.nccl), the reduction is one
NCCL all-reduce over the participants' buffers; elsewhere it is a host-side sum. When each
participant completes is the step's rendezvous' answer (``Rendezvous.all_reduce``): at once in
process, after a ring of network flows on a simulated cluster (simulator/session.py).
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from ..graph import Tensor
from ..registry import Cost, apply, defop, nbytes, numel, same_dtype

AllReduce = defop("CollectiveAllReduce", stateful=True, differentiable=False, gang=True)


@AllReduce.shape
def _all_reduce_shape(op):
    return [(op.inputs[0].shape, op.inputs[0].dtype)]


@AllReduce.cost
def _all_reduce_cost(op, ins, outs):
    n = op.attrs["group_size"]
    b = nbytes(ins[0], op.inputs[0].dtype)
    # ring all-reduce: each participant sends and receives 2 (n-1)/n of the buffer
    return Cost(float(numel(ins[0])), 2.0 * (n - 1) / n * b, 2.0 * (n - 1) / n * b)


class _Group:
    __slots__ = ("size", "members", "lock")

    def __init__(self, size: int):
        self.size = size
        self.members: dict[int, tuple] = {}
        self.lock = threading.Lock()


@AllReduce.kernel("cpu", "gpu", is_async=True)
def _all_reduce(ctx, step, inputs, done):
    at = ctx.attrs
    groups = step.shared("collectives", dict)
    with step.lock:
        grp = groups.get(at["group_key"])
        if grp is None:
            grp = groups[at["group_key"]] = _Group(at["group_size"])
    with grp.lock:
        if at["rank"] in grp.members:
            raise InvalidArgumentError(f"all-reduce {at['group_key']}: rank {at['rank']} twice")
        grp.members[at["rank"]] = (inputs[0], ctx.device, done)
        if len(grp.members) < grp.size:
            return
        members = [grp.members[r] for r in range(grp.size)]
    try:
        results = _reduce(members, at["reduction"])
    except Exception as e:  # noqa: BLE001 - every participant fails with the same error
        for _, _, d in members:
            d(None, e)
        return
    # the rendezvous says when each participant holds its result: at once in process, after
    # the ring's flows on a simulated network
    rv = getattr(step, "rendezvous", None)
    dones = [lambda d=d, r=r: d(r) for (_, _, d), r in zip(members, results)]
    if rv is None:
        for f in dones:
            f()
        return
    v = members[0][0]
    rv.all_reduce(
        at["group_key"],
        [dev for _, dev, _ in members],
        float(getattr(v, "nbytes", 0)),
        getattr(v, "dtype", np.float32),
        dones,
    )


def _reduce(members: list[tuple], reduction: str) -> list:
    devices = [dev for _, dev, _ in members]
    real_gpus = all(d.device_type == "gpu" and hasattr(d, "cp") for d in devices)
    if real_gpus and len({d.name for d in devices}) == len(devices):
        out = _nccl_all_reduce(members, reduction)
        if out is not None:
            return out
    if not all(
        hasattr(v, "__array__") or hasattr(v, "__cuda_array_interface__") for v, _, _ in members
    ):
        return [v for v, _, _ in members]  # shape-only values of a pure simulation
    total = None
    for v, dev, _ in members:
        h = dev.to_host(v)
        total = np.array(h, copy=True) if total is None else np.add(total, h, out=total)
    if reduction == "mean":
        total = total / len(members)
        total = total.astype(members[0][0].dtype, copy=False)
    return [dev.to_device(total) for _, dev, _ in members]


_comms: dict[tuple, tuple[Any, Any, threading.Lock]] = {}
_comms_lock = threading.Lock()


def _communicators(nccl: Any, ids: tuple) -> tuple[Any, threading.Lock]:
    """The cached communicators over GPUs ``ids`` and the lock that serialises their use."""
    with _comms_lock:
        entry = _comms.get(ids)
        if entry is None or entry[0] is not nccl:  # (a reloaded cupy has new communicators)
            comms = nccl.NcclCommunicator.initAll(list(ids))
            entry = _comms[ids] = (nccl, comms, threading.Lock())
        return entry[1], entry[2]


def _nccl_all_reduce(members: list[tuple], reduction: str) -> list | None:
    try:
        import cupy
        from cupy.cuda import nccl
    except Exception:  # noqa: BLE001 - no NCCL: host-side sum
        return None
    dtype = members[0][0].dtype
    nccl_types = {
        np.dtype(np.float32): nccl.NCCL_FLOAT32,
        np.dtype(np.float64): nccl.NCCL_FLOAT64,
        np.dtype(np.float16): nccl.NCCL_FLOAT16,
        np.dtype(np.int32): nccl.NCCL_INT32,
        np.dtype(np.int64): nccl.NCCL_INT64,
    }
    if np.dtype(dtype) not in nccl_types:
        return None
    comms, lock = _communicators(nccl, tuple(d.index for _, d, _ in members))
    outs = []
    # One group at a time per communicator set: concurrent steps (or sessions) must not
    # interleave their groupStart/groupEnd across ranks, which hangs NCCL.
    with lock:
        nccl.groupStart()
        try:
            for (v, dev, _), comm in zip(members, comms):
                with cupy.cuda.Device(dev.index), dev.stream:
                    src = cupy.ascontiguousarray(v)
                    dst = cupy.empty_like(src)
                    comm.allReduce(
                        src.data.ptr,
                        dst.data.ptr,
                        src.size,
                        nccl_types[np.dtype(dtype)],
                        nccl.NCCL_SUM,
                        dev.stream.ptr,
                    )
                    outs.append(dst)
        finally:
            nccl.groupEnd()
    if reduction == "mean":
        n = len(members)
        scaled = []
        for o, (_, dev, _) in zip(outs, members):
            with cupy.cuda.Device(dev.index), dev.stream:  # each mean on its own GPU
                scaled.append(_divide(cupy, o, n))
        outs = scaled
    return outs


def _divide(xp: Any, x: Any, n: int) -> Any:
    """x / n in x's dtype (integer sums divide with truncation, as the host path's cast does)."""
    if np.dtype(x.dtype).kind in "iu":
        return (x / n).astype(x.dtype, copy=False)
    return x / x.dtype.type(n)


_group_ids = itertools.count(1)


def all_reduce(tensors: list[Any], reduction: str = "sum", name: str | None = None) -> list[Tensor]:
    """Sum (or mean) of ``tensors`` across devices: one output per input, on the input's device.

    Raises InvalidArgumentError when shapes or dtypes differ or ``reduction`` is unknown.
    """
    if reduction not in ("sum", "mean"):
        raise InvalidArgumentError(
            f"all_reduce: reduction must be 'sum' or 'mean', got {reduction!r}"
        )
    from ..registry import convert_to_tensor

    ts = [convert_to_tensor(t) for t in tensors]
    if not ts:
        raise InvalidArgumentError("all_reduce needs at least one tensor")

    class _V:
        type = "CollectiveAllReduce"
        inputs = ts

    same_dtype(_V)
    for t in ts[1:]:
        if not t.shape.is_compatible_with(ts[0].shape):
            raise InvalidArgumentError(f"all_reduce: shapes differ: {ts[0].shape} vs {t.shape}")
    key = f"allreduce_{next(_group_ids)}"
    g = ts[0].graph
    outs = []
    for rank, t in enumerate(ts):
        with g.colocate_with(t.op):
            out = apply(
                "CollectiveAllReduce",
                [t],
                {"group_key": key, "group_size": len(ts), "rank": rank, "reduction": reduction},
                name or "AllReduce",
            )
            g.add_to_collection("collective:" + key, out.op)
            outs.append(out)
    return outs


def bucketed_all_reduce(
    tower_grads: list[list[Any]],
    bucket_bytes: float = 25 * 2**20,
    reduction: str = "mean",
) -> list[list[Tensor]]:
    """``all_reduce`` of each gradient across towers, the gradients packed into buckets as
    PyTorch DDP does: ``tower_grads[t][k]`` is tower t's gradient k (the same shapes in every
    tower); gradients join buckets in reverse order (the order a backward pass yields a model's
    gradients) and a bucket closes once it holds ``bucket_bytes`` or more. A bucket of several
    gradients is one all-reduce of each tower's flattened, concatenated gradients, split and
    reshaped back after (copies on each tower's device, as DDP's bucket buffers); a bucket of
    one is that gradient's all-reduce. Returns the results as ``[tower][gradient]``.

    Raises InvalidArgumentError for towers of different lengths, a gradient without a static
    shape, or ``bucket_bytes`` <= 0.
    """
    from .array import reshape
    from .manip import concat, split

    if not bucket_bytes > 0:
        raise InvalidArgumentError(
            f"bucketed_all_reduce: bucket_bytes must be > 0, got {bucket_bytes}"
        )
    if len({len(tg) for tg in tower_grads}) != 1:
        raise InvalidArgumentError(
            f"bucketed_all_reduce: towers have {[len(tg) for tg in tower_grads]} gradients"
        )
    n_grads = len(tower_grads[0])
    shapes = []
    for k in range(n_grads):
        t = tower_grads[0][k]
        if not t.shape.is_fully_defined():
            raise InvalidArgumentError(
                f"bucketed_all_reduce: gradient {t.name} has no static shape ({t.shape})"
            )
        shapes.append(tuple(t.shape.as_list()))
    buckets: list[list[int]] = [[]]
    size = 0
    for k in reversed(range(n_grads)):
        buckets[-1].append(k)
        size += int(np.prod(shapes[k], dtype=np.int64)) * tower_grads[0][k].dtype.size
        if size >= bucket_bytes and k:
            buckets.append([])
            size = 0
    out: list[list[Any]] = [[None] * n_grads for _ in tower_grads]
    for ks in buckets:
        if len(ks) == 1:
            for t, r in enumerate(all_reduce([tg[ks[0]] for tg in tower_grads], reduction)):
                out[t][ks[0]] = r
            continue
        sizes = [int(np.prod(shapes[k], dtype=np.int64)) for k in ks]
        flat = []
        for tg in tower_grads:
            g = tg[ks[0]].graph
            with g.colocate_with(tg[ks[0]].op):
                flat.append(concat([reshape(tg[k], [-1]) for k in ks], 0))
        for t, r in enumerate(all_reduce(flat, reduction)):
            with r.graph.colocate_with(r.op):
                for k, part in zip(ks, split(r, sizes)):
                    out[t][k] = reshape(part, list(shapes[k]))
    return out
