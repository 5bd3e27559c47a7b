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

import numpy as np

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
    #: control loops' ops not yet placed in ``order`` (``_control_loops``)
    extra_ops: list[Operation] = field(default_factory=list)

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
    process_of: Callable[[Any], str] | None = None,
) -> Partitions:
    """Split ``order`` (a topologically sorted op list) by device; see the module docstring.

    ``compress(tensor, src_device, dst_device)`` may ask for lossy float32->float16 transfer of an
    edge (the cast happens inside Send and is undone inside Recv). ``process_of(device)`` names
    the process (task) a device belongs to, when the partitions run in several: a while loop
    whose ops span processes then gets a control loop in each process other than its own
    (``_control_loops``).
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
    if process_of is not None and any(op.type == "Enter" for op in order):
        _control_loops(order, out, process_of, incarnation_of, send_seq)
    return out


# ---- while loops whose ops span processes ---------------------------------------------------


def _op_frames(order: list[Operation]) -> tuple[dict, dict, dict]:
    """Each op's loop frame (by frame name, "" outside every loop), the frame its outputs are in
    (an Enter's: its loop's; an Exit's: the enclosing one), and each frame's parent; the rules
    of runtime/frames.py ``analyze``, on the graph before partitioning."""
    frame: dict[Operation, str] = {}
    out_frame: dict[Operation, str] = {}
    parent: dict[str, str] = {}
    for op in order:
        f = None
        for t in op.inputs:
            fp = out_frame.get(t.op)
            if fp is not None and f is None:
                f = fp
        if f is None:
            for c in op.control_inputs:
                fc = out_frame.get(c)
                if fc is not None and (f is None or _depth(parent, fc) > _depth(parent, f)):
                    f = fc
        f = f or ""
        frame[op] = f
        if op.type == "Enter":
            child = op.attrs["frame_name"]
            parent.setdefault(child, f)
            out_frame[op] = child
        elif op.type == "Exit":
            out_frame[op] = parent.get(f, "")
        else:
            out_frame[op] = f
    return frame, out_frame, parent


def _depth(parent: dict, f: str) -> int:
    d = 0
    while f:
        f = parent.get(f, "")
        d += 1
    return d


def _control_loops(
    order: list[Operation],
    out: Partitions,
    process_of: Callable[[Any], str],
    incarnation_of: Callable[[Any], int],
    seq: int,
) -> None:
    """Give every process that runs ops of a while loop, other than the loop's own (the one
    running its LoopCond), a *control loop* that iterates with it, as TensorFlow's partitioner
    does: Enter -> Merge -> Switch on the loop's predicate (sent from the loop's process every
    iteration) -> Identity (the pivot) -> NextIteration back to the Merge, and Exit. Each Recv of
    a tensor of the loop in that process is armed by the control loop's Merge in every iteration
    (so it runs once per iteration, keyed by the iteration, runtime/frames.py); a Recv in the
    loop's own process by the loop's pivot Merge. Nested loops nest their control loops."""
    frame, out_frame, parent = _op_frames(order)
    placed = out.device_of
    home: dict[str, Operation] = {}  # frame -> its LoopCond
    pivot_merge: dict[str, Operation] = {}
    width: dict[str, int] = {}
    for op in order:
        f = frame[op]
        if op.type == "LoopCond":
            home[f] = op
        elif (
            op.type == "Merge"
            and op.attrs.get("loop_frame")
            and (op.attrs.get("pivot") or f not in pivot_merge)
        ):
            pivot_merge[f] = op
        elif op.type == "Enter" and not op.attrs.get("is_constant"):
            f2 = op.attrs["frame_name"]
            width[f2] = max(width.get(f2, 1), int(op.attrs.get("parallel_iterations", 1)))
    needs: dict[tuple[str, str], Any] = {}  # (frame, process) -> a device there
    for op in order:
        f = frame[op]
        if f and f in home:
            p = process_of(placed[op])
            if p != process_of(placed[home[f]]):
                needs.setdefault((f, p), placed[op])
    for send, _recv in out.transfers:  # (a Send of a tensor of the loop sends every iteration)
        src = send.inputs[0].op if send.inputs else send.control_inputs[0]
        f = out_frame.get(src, "")
        if f and f in home:
            p = process_of(placed[send])
            if p != process_of(placed[home[f]]):
                needs.setdefault((f, p), placed[send])
    made: dict[tuple[str, str], tuple[Operation, Operation]] = {}  # -> (Merge, pivot)
    g = order[0].graph

    def control_loop(f: str, p: str, dev: Any) -> tuple[Operation, Operation]:
        nonlocal seq
        got = made.get((f, p))
        if got is not None:
            return got
        up = parent.get(f, "")
        tag = f".hb_loop/{f}/{_short(dev)}"
        seq += 1
        if up:
            src = control_loop(up, p, dev)[1].outputs[0]
        else:
            const = _free(g, f"{tag}/Const", "Const", [], {"value": _ZERO}, dev, seq, [_SCALAR])
            src = const.outputs[0]
        enter = _free(
            g,
            f"{tag}/Enter",
            "Enter",
            [src],
            {"frame_name": f, "is_constant": False, "parallel_iterations": width.get(f, 1)},
            dev,
            seq,
            [_SCALAR],
        )
        merge = _free(
            g,
            f"{tag}/Merge",
            "Merge",
            [enter.outputs[0]],
            {"loop_frame": f, "pivot": True, "next_iteration": f"{tag}/NextIteration"},
            dev,
            seq,
            [_SCALAR, _SCALAR],
        )
        cond = home[f]
        cdev = placed[cond]
        seq += 1
        rk = rendezvous_key(cdev.name, incarnation_of(cdev), dev.name, cond.outputs[0].name)
        send, recv = _pair(g, cond.outputs[0], cdev, dev, rk, seq, False)
        recv.control_inputs = [merge]
        for op, d in ((send, cdev), (recv, dev)):
            out.device_of[op] = d
        out.transfers.append((send, recv))
        switch = _free(
            g,
            f"{tag}/Switch",
            "Switch",
            [merge.outputs[0], cond.outputs[0]],
            {},
            dev,
            seq,
            [_SCALAR, _SCALAR],
        )
        out.input_map[(switch, 1)] = recv.outputs[0]
        pivot = _free(g, f"{tag}/Identity", "Identity", [switch.outputs[1]], {}, dev, seq)
        pivot.outputs = [Tensor(pivot, 0, _dt.int32, TensorShape([]))]
        nxt = _free(
            g,
            f"{tag}/NextIteration",
            "NextIteration",
            [pivot.outputs[0]],
            {"merge": merge.name, "frame_name": f},
            dev,
            seq,
            [_SCALAR],
        )
        ext = _free(g, f"{tag}/Exit", "Exit", [switch.outputs[0]], {}, dev, seq, [_SCALAR])
        new = [enter, merge, switch, pivot, nxt, ext]
        if not up:
            new.insert(0, const)
        for op in new:
            out.device_of[op] = dev
        out.extra_ops += [*new, send, recv]
        made[(f, p)] = (merge, pivot)
        return merge, pivot

    for (f, p), dev in needs.items():
        control_loop(f, p, dev)
    # arm the Recvs of a loop's tensors in every iteration
    for send, recv in out.transfers:
        src = send.inputs[0].op if send.inputs else send.control_inputs[0]
        f = out_frame.get(src, "")
        if not f or f not in home or recv.control_inputs:
            continue
        p = process_of(placed[recv])
        if p == process_of(placed[send]):
            continue  # one process: runtime/frames.py arms it
        if p == process_of(placed[home[f]]):
            recv.control_inputs = [pivot_merge[f]]
        else:
            recv.control_inputs = [made[(f, p)][0]]
    _reorder(out)


_ZERO = np.zeros((), np.int32)
_SCALAR = (_dt.int32, TensorShape([]))


def _free(
    graph: Any,
    name: str,
    op_type: str,
    inputs: list[Tensor],
    attrs: dict,
    device: Any,
    seq: int,
    outputs: list[tuple] = (),
) -> Operation:
    op = _free_op(graph, name, op_type, inputs, attrs, device, seq)
    op.outputs = [Tensor(op, i, dt, shape) for i, (dt, shape) in enumerate(outputs)]
    return op


def _reorder(out: Partitions) -> None:
    """Put the control loops' ops into ``out.order`` and the subgraphs, in a topological order
    that also puts each Send before its Recv."""
    ops = out.order + out.extra_ops
    recv_send = {r: s for s, r in out.transfers}
    preds: dict[Operation, list[Operation]] = {}
    for op in ops:
        ps = []
        for i, t in enumerate(op.inputs):
            ps.append(out.input_map.get((op, i), t).op)
        for c in op.control_inputs:
            ps.append(out.control_map.get((op, c), c))
        if op in recv_send:
            ps.append(recv_send[op])
        preds[op] = ps
    seen: set[Operation] = set()
    done: list[Operation] = []
    for root in ops:
        if root in seen:
            continue
        stack = [(root, iter(preds[root]))]
        seen.add(root)
        while stack:
            op, it = stack[-1]
            for p in it:
                if p in preds and p not in seen:
                    seen.add(p)
                    stack.append((p, iter(preds[p])))
                    break
            else:
                stack.pop()
                done.append(op)
    out.order = done
    out.extra_ops = []
    for name in out.subgraphs:
        out.subgraphs[name] = []
    for op in done:
        out.subgraphs.setdefault(out.device_of[op].name, []).append(op)


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
