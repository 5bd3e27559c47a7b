"""Partitioning: cut a placed graph into one subgraph per device, joined by Send/Recv pairs.

``partition(order, device_of)`` is a pure function of the pruned ops and a placement. Every data
edge between devices becomes one Send on the source device and one Recv on the destination, once
per (tensor, destination device) however many consumers the tensor has there; a control edge
between devices becomes a Send/Recv of an empty value. The user's graph is never modified: the
Send/Recv ops are free-standing Operations, and consumers read the Recv through ``input_map``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import dtypes as _dt
from .graph import Operation, Tensor, TensorShape
from .registry import get_op_def


@dataclass
class Partitions:
    """The result of ``partition``: per-device op lists and the rewired inputs."""

    #: device name -> ops placed there (user ops and Send/Recv), in a valid topological order
    subgraphs: dict[str, list[Operation]]
    #: (consumer op, input index) -> the Recv output that replaces the cross-device input
    input_map: dict[tuple[Operation, int], Tensor] = field(default_factory=dict)
    #: (consumer op, control input) -> the Recv op that replaces the cross-device control edge
    control_map: dict[tuple[Operation, Operation], Operation] = field(default_factory=dict)
    #: device of every op, Send/Recv included
    device_of: dict[Operation, Any] = field(default_factory=dict)
    #: the Send/Recv pairs: (send op, recv op)
    transfers: list[tuple[Operation, Operation]] = field(default_factory=list)
    #: every op of every subgraph in one order where each Send precedes its Recv, so that a
    #: single thread may run the whole step in this order
    order: list[Operation] = field(default_factory=list)

    def ops(self) -> list[Operation]:
        return [op for ops in self.subgraphs.values() for op in ops]


def rendezvous_key(src: str, incarnation: int, dst: str, tensor: str, frame: str = "0:0") -> str:
    """``src_device;src_incarnation;dst_device;tensor_name;frame:iter`` (TF's key layout)."""
    return f"{src};{incarnation:x};{dst};{tensor};{frame}"


def partition(
    order: list[Operation],
    device_of: Callable[[Operation], Any],
    incarnation_of: Callable[[Any], int] = lambda d: 1,
    compress: Callable[[Tensor, Any, Any], bool] | None = None,
) -> Partitions:
    """Split ``order`` (a topologically sorted op list) by device; see the module docstring.

    ``compress(tensor, src_device, dst_device)`` may ask for lossy float32->float16 transfer of an
    edge (the cast happens inside Send and is undone inside Recv).
    """
    placed = {op: device_of(op) for op in order}
    out = Partitions(subgraphs={}, device_of=dict(placed))
    for op in order:
        out.subgraphs.setdefault(placed[op].name, [])
    recv_of: dict[tuple[Tensor, str], Tensor] = {}
    ctrl_recv_of: dict[tuple[Operation, str], Operation] = {}
    send_seq = 0
    for op in order:
        dst = placed[op]
        # Receives this op needs are appended to its device's list before the op itself.
        for i, t in enumerate(op.inputs):
            src = placed.get(t.op)
            if src is None or src is dst:
                continue
            key = (t, dst.name)
            r = recv_of.get(key)
            if r is None:
                send_seq += 1
                z = compress is not None and t.dtype == _dt.float32 and compress(t, src, dst)
                rk = rendezvous_key(src.name, incarnation_of(src), dst.name, t.name)
                send, recv = _pair(op.graph, t, src, dst, rk, send_seq, bool(z))
                out.subgraphs[src.name].append(send)
                out.subgraphs[dst.name].append(recv)
                out.device_of[send], out.device_of[recv] = src, dst
                out.transfers.append((send, recv))
                out.order += [send, recv]
                r = recv_of[key] = recv.outputs[0]
            out.input_map[(op, i)] = r
        for c in op.control_inputs:
            src = placed.get(c)
            if src is None or src is dst:
                continue
            key2 = (c, dst.name)
            rop = ctrl_recv_of.get(key2)
            if rop is None:
                send_seq += 1
                rk = rendezvous_key(src.name, incarnation_of(src), dst.name, f"^{c.name}")
                send, recv = _control_pair(op.graph, c, src, dst, rk, send_seq)
                out.subgraphs[src.name].append(send)
                out.subgraphs[dst.name].append(recv)
                out.device_of[send], out.device_of[recv] = src, dst
                out.transfers.append((send, recv))
                out.order += [send, recv]
                rop = ctrl_recv_of[key2] = recv
            out.control_map[(op, c)] = rop
        out.subgraphs[dst.name].append(op)
        out.order.append(op)
    return out


def _short(d: Any) -> str:
    return d.name.split("/device:")[-1].replace(":", "_")


def _free_op(
    graph: Any, name: str, op_type: str, inputs: list[Tensor], attrs: dict, device: Any, seq: int
) -> Operation:
    op = Operation(graph, name, op_type, inputs, attrs)
    op.op_def = get_op_def(op_type)
    op.device = device.name
    op._id = -seq  # sorts before user ops created later; unique among transfers
    return op


def _pair(graph: Any, t: Tensor, src: Any, dst: Any, key: str, seq: int, compress: bool):
    attrs = {
        "key": key,
        "tensor_name": t.name,
        "send_device": src.name,
        "recv_device": dst.name,
        "compress": compress,
        "dtype": t.dtype,
    }
    base = f"{t.op.name}_{t.value_index}"
    send = _free_op(graph, f"_send/{base}/to_{_short(dst)}", "_Send", [t], attrs, src, seq)
    recv = _free_op(graph, f"_recv/{base}/from_{_short(src)}", "_Recv", [], dict(attrs), dst, seq)
    recv.outputs = [Tensor(recv, 0, t.dtype, t.shape)]
    return send, recv


def _control_pair(graph: Any, c: Operation, src: Any, dst: Any, key: str, seq: int):
    attrs = {
        "key": key,
        "tensor_name": "^" + c.name,
        "send_device": src.name,
        "recv_device": dst.name,
        "compress": False,
        "dtype": _dt.bool_,
    }
    send = _free_op(graph, f"_send/^{c.name}/to_{_short(dst)}", "_Send", [], attrs, src, seq)
    send.control_inputs = [c]
    recv = _free_op(
        graph, f"_recv/^{c.name}/from_{_short(src)}", "_Recv", [], dict(attrs), dst, seq
    )
    recv.outputs = [Tensor(recv, 0, _dt.bool_, TensorShape([0]))]
    return send, recv
