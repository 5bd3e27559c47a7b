"""cupy.cuda.nccl (fake): communicators whose all-reduce checks what real NCCL requires.

* each rank's call is made with its own device current and its buffers on that device;
* within ``groupStart``/``groupEnd`` (per thread, as NCCL's group depth) every rank of a clique
  must be called before ``groupEnd``; outside a group a call on a clique of more than one rank
  would block forever in one thread, so it raises;
* a communicator used by two threads at once (interleaved groups) raises: on a GPU that hangs.
"""

from __future__ import annotations

import itertools
import threading
import time

import numpy as np

from .._core import STATE, _check_use, array_at, current_device_id, stream_at

NCCL_FLOAT16, NCCL_FLOAT32, NCCL_FLOAT64 = 6, 7, 8
NCCL_INT32, NCCL_INT64 = 2, 4
NCCL_SUM, NCCL_PROD, NCCL_MAX, NCCL_MIN = 0, 1, 2, 3
_DTYPES = {
    NCCL_FLOAT16: np.float16,
    NCCL_FLOAT32: np.float32,
    NCCL_FLOAT64: np.float64,
    NCCL_INT32: np.int32,
    NCCL_INT64: np.int64,
}
_OPS = {NCCL_SUM: np.add, NCCL_PROD: np.multiply, NCCL_MAX: np.maximum, NCCL_MIN: np.minimum}

_local = threading.local()
_cliques = itertools.count(1)
#: seconds each all-reduce call holds its communicator (widens real races so tests see them)
CALL_SECONDS = 0.002


class NcclError(RuntimeError):
    pass


def get_version() -> int:
    return 21800


def get_unique_id() -> tuple:
    return (next(_cliques),)


def groupStart() -> None:  # noqa: N802 - NCCL's name
    _local.depth = getattr(_local, "depth", 0) + 1
    if _local.depth == 1:
        _local.pending = []


def groupEnd() -> None:  # noqa: N802
    depth = getattr(_local, "depth", 0)
    if depth < 1:
        raise NcclError("ncclInvalidUsage: groupEnd without groupStart")
    _local.depth = depth - 1
    if _local.depth == 0:
        pending, _local.pending = _local.pending, []
        _complete(pending)


class NcclCommunicator:
    def __init__(self, ndev: int, commId: tuple, rank: int):  # noqa: N803
        self.ndev = ndev
        self.clique = commId
        self.rank_ = rank
        self.device_id = current_device_id()
        self.owner: int | None = None
        self.lock = threading.Lock()

    @classmethod
    def initAll(cls, devices: list[int]) -> list[NcclCommunicator]:  # noqa: N802
        from .._core import Device

        clique = get_unique_id()
        comms = []
        for r, d in enumerate(devices):
            with Device(d):
                comms.append(cls(len(devices), clique, r))
        return comms

    def device_id_(self) -> int:
        return self.device_id

    def rank_id(self) -> int:
        return self.rank_

    def size(self) -> int:
        return self.ndev

    def destroy(self) -> None:
        pass

    def allReduce(self, sendbuf, recvbuf, count, datatype, op, stream):  # noqa: N802
        me = threading.get_ident()
        with self.lock:
            if self.owner is not None and self.owner != me:
                raise NcclError(
                    f"communicator rank {self.rank_} used by two threads at once (interleaved "
                    "groupStart/groupEnd across concurrent calls: hangs on a GPU)"
                )
            self.owner = me
        time.sleep(CALL_SECONDS)
        cur = current_device_id()
        if cur != self.device_id:
            raise NcclError(
                f"ncclInvalidArgument: rank {self.rank_} of a communicator on device "
                f"{self.device_id} called with device {cur} current"
            )
        src, dst = array_at(sendbuf), array_at(recvbuf)
        for what, buf in (("sendbuf", src), ("recvbuf", dst)):
            if buf._dev != self.device_id:
                raise NcclError(
                    f"ncclInvalidArgument: {what} of rank {self.rank_} is on device {buf._dev}, "
                    f"the communicator on {self.device_id}"
                )
            if buf.size != count or buf.dtype != np.dtype(_DTYPES[datatype]):
                raise NcclError(f"ncclInvalidArgument: {what} is not {count} x {datatype}")
        s = stream_at(stream)
        if s.device_id != self.device_id:
            raise NcclError(
                f"ncclInvalidArgument: stream of device {s.device_id} for rank {self.rank_}"
            )
        _check_use(src, s, f"nccl allReduce rank {self.rank_}", same_device=False)
        dst._stream, dst._seq = s, s._enqueue()
        call = (self, src, dst, op)
        if getattr(_local, "depth", 0) > 0:
            _local.pending.append(call)
        else:
            _complete([call])

    def allReduce_(self, *a):  # pragma: no cover - alias some cupy versions expose
        return self.allReduce(*a)


def _complete(calls: list) -> None:
    try:
        by: dict = {}
        for c in calls:
            by.setdefault(c[0].clique, []).append(c)
        for clique, cs in by.items():
            ranks = sorted(c[0].rank_ for c in cs)
            n = cs[0][0].ndev
            if ranks != list(range(n)):
                raise NcclError(
                    f"all-reduce on clique {clique}: ranks {ranks} of {n} called; the others "
                    "never will in this thread (hangs on a GPU)"
                )
            f = _OPS[cs[0][3]]
            total = cs[0][1]._a.copy()
            for c in cs[1:]:
                f(total, c[1]._a.reshape(total.shape), out=total)
            for c in cs:
                c[2]._a[...] = total.reshape(c[2].shape)
    finally:
        for c in calls:
            with c[0].lock:
                c[0].owner = None


del STATE
