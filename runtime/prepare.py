"""Preparing a graph for the executor: what is built once per (graph version, fetches, feeds,
targets) and reused by every step (runtime/executor.py runs it).

``prune`` keeps the ops a step needs, in a deterministic topological order; ``build_prepared``
binds them into a ``PreparedGraph``: the nodes (``Node``) in that order, where each input comes
from (a slot index), how many predecessors each node waits for, which slots die after each node,
the kernel bound to each node with its per-session ``KernelContext``, and the frames of its while
loops (runtime/frames.py).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import dtypes as _dt
from . import fusion
from .errors import InvalidArgumentError
from .frames import analyze as analyze_frames
from .graph import Operation, Tensor
from .ops import intraop
from .registry import Kernel


class KernelContext:
    """Per (session, node) state that a kernel sees: the op, its attrs, device and resources.

    Built once when a node is first prepared in a session and kept for later steps, like
    TensorFlow's OpKernel objects; ``state`` is free for the kernel's own use (e.g. an RNG).
    """

    __slots__ = ("op", "attrs", "device", "xp", "resources", "state", "session", "_rng")
    __slots__ += ("idle",)

    def __init__(self, op: Operation, device: Any, resources: dict, session: Any):
        self.op = op
        self.attrs = op.attrs
        self.device = device
        self.xp = device.xp
        self.resources = resources
        self.state: Any = None
        self.session = session
        self._rng: np.random.Generator | None = None
        #: set by a kernel that found nothing to do this time (an accumulator dropping a stale
        #: gradient): a simulated device then books only the op's dispatch, not its bytes
        self.idle = False

    @property
    def rng(self) -> np.random.Generator:
        """This op's generator, seeded from (graph seed, op seed) like TF1's random ops."""
        if self._rng is None:
            self._rng = np.random.default_rng(op_seed_sequence(self.op))
        return self._rng


def op_seed_sequence(op: Operation) -> Any:
    gseed = op.graph.seed
    oseed = op.attrs.get("seed")
    if gseed is None and oseed is None:
        return None  # nondeterministic, like TF with no seeds set
    if gseed is None:
        gseed = 87654321
    if oseed is None:
        oseed = op._id
    return [int(gseed) & 0xFFFFFFFF, int(oseed) & 0xFFFFFFFF]


class Node:
    """One node of a PreparedGraph with everything the hot loop needs, resolved once."""

    __slots__ = (
        "index",
        "op",
        "device",
        "kernel",
        "fn",
        "ctx",
        "ins",
        "outs",
        "n_out",
        "free_after",
        "consumers",
        "n_preds",
        "heavy",
        "is_async",
        "timed",
        "input_tensors",
        "memo",
        "dead_rule",
        "ctrl_preds",
        "on_stream",
        "frame_keyed",
        "charge",
    )

    def __init__(
        self,
        index: int,
        op: Operation,
        device: Any,
        kernel: Kernel,
        ctx: KernelContext,
        input_tensors: list[Tensor] | None = None,
    ):
        self.index = index
        self.op = op
        self.device = device
        self.kernel = kernel
        self.fn = kernel.fn
        self.ctx = ctx
        self.ins: list[int] = []
        self.outs: list[int | None] = []
        self.n_out = len(op.outputs)
        self.free_after: list[int] = []
        self.consumers: list[int] = []
        self.n_preds = 0
        self.heavy = False
        self.is_async = kernel.is_async
        # A timed device (a simulated one) starts a node and says when it ends: ``device.start(
        # node, inputs) -> (end_time, result)``; the executor keeps the pending ends in a heap.
        self.timed = bool(getattr(device, "timed", False)) and not kernel.is_async
        # An asynchronous kernel on a timed device may still have work to do once it is
        # unblocked (an accumulator's take averages the gradients; a dequeue that waited has
        # its thread woken; the device names such op types in ``work_after_wait``):
        # ``device.charge(node, inputs, result, now, waited) -> end`` books it (``waited``: the
        # step's time moved on between the node's start and its completion: it blocked), and
        # the node completes at that end.
        self.charge = (
            device.charge
            if kernel.is_async and op.type in getattr(device, "work_after_wait", ())
            else None
        )
        # A device whose kernels run inline on a stream (a GPU) completes them in stream order;
        # an observed step hands its nodes to ``device.run`` instead, which waits for the kernels.
        self.on_stream = bool(getattr(device, "kernels_on_stream", False)) and not kernel.is_async
        if self.on_stream:
            self.fn = device.bind_kernel(kernel.fn)
        self.input_tensors: list[Tensor] = (
            list(op.inputs) if input_tensors is None else input_tensors
        )
        self.memo: Any = None  # free for the device's per-node cache (simulated devices' plans)
        #: in a graph with conditionals: 1 dead when any input is, 2 (Merge) when all are, 0
        #: never (Send/Recv carry deadness); ``ctrl_preds``: its control predecessors' indices
        self.dead_rule = 1
        self.ctrl_preds: list[int] = []
        #: a Send/Recv inside a loop whose peer is in another process: its rendezvous key names
        #: the iteration (runtime/frames.py)
        self.frame_keyed = False

    def __repr__(self) -> str:
        return f"<Node {self.op.name} on {getattr(self.device, 'name', self.device)}>"


class PreparedGraph:
    """The once-per-signature part of running a graph: see the module docstring."""

    def __init__(
        self,
        nodes: list[Node],
        n_slots: int,
        feed_slots: dict[Tensor, int],
        fetch_slots: list[int | None],
        straight_line: bool,
    ):
        self.nodes = nodes
        self.n_slots = n_slots
        self.feed_slots = feed_slots
        self.fetch_slots = fetch_slots
        self.straight_line = straight_line
        #: waits for the streams of the devices whose kernels run on one (GPUs), at step end
        self.stream_syncs = [
            d.synchronize for d in {id(n.device): n.device for n in nodes if n.on_stream}.values()
        ]
        #: a CPU kernel of the step splits its GEMMs over the intra-op threads (ops/intraop.py)
        self.splits_gemms = any(n.op.type in intraop.SPLIT_OPS and not n.on_stream for n in nodes)
        #: the graph has conditionals (Switch): dead tensors propagate (ops/cond.py)
        self.has_cond = False
        #: the frames of its while loops (runtime/frames.py), or None
        self.frames: Any = None
        #: nodes the schedule runs beyond ``nodes`` (the copies of loops whose iterations run in
        #: parallel), with the indices after theirs
        self.extra_nodes: list[Node] = []
        #: the extension point of other layers: data they keep per prepared graph, by owner
        #: (the simulator keeps its memory charges and step programs under "sim")
        self.extensions: dict[str, Any] = {}
        self.roots = [n.index for n in nodes if n.n_preds == 0]
        self.initial_pending = [n.n_preds for n in nodes]
        # Reference counts for the event-driven path: consumers that still need each slot.
        refs = [0] * n_slots
        for n in nodes:
            for s in n.ins:
                refs[s] += 1
        for s in fetch_slots:
            if s is not None:
                refs[s] += 1 << 30  # fetched slots are never freed
        self.initial_refs = refs


def _op_id(op: Operation) -> int:
    return op._id


def prune(fetch_ops: Sequence[Operation], fed: set[Tensor]) -> list[Operation]:
    """The ops needed to compute ``fetch_ops``, in a deterministic topological order.

    A fed tensor cuts the graph: its producer is needed only for its other outputs or when it is a
    target itself. Raises InvalidArgumentError when the needed ops contain a cycle.
    """
    needed: dict[Operation, None] = {}
    stack = list(fetch_ops)
    while stack:
        op = stack.pop()
        if op in needed:
            continue
        needed[op] = None
        nxt = op.attrs.get("next_iteration")  # a loop's Merge needs its back edge (ops/loop.py)
        if nxt:
            stack.append(op.graph.get_operation_by_name(nxt))
        gang = op.attrs.get("group_key") if op.op_def is not None and op.op_def.gang else None
        if gang is not None:  # collective peers run together or not at all
            stack.extend(op.graph.get_collection("collective:" + gang))
        for t in op.inputs:
            if t not in fed:
                stack.append(t.op)
        stack.extend(op.control_inputs)
    # Kahn's algorithm; ties broken by creation order so runs are reproducible. An op is
    # created after its inputs, so where every needed op depends only on older ones (no back
    # edge of a loop, no control input added later) that order is creation order itself.
    by_id = sorted(needed, key=_op_id)
    for op in by_id:
        i = op._id
        for t in op.inputs:
            if t.op._id >= i and t not in fed:
                break
        else:
            if all(c._id < i for c in op.control_inputs):
                continue
        break
    else:
        return by_id
    preds: dict[Operation, int] = {}
    succs: dict[Operation, list[Operation]] = {op: [] for op in needed}
    for op in needed:
        deps = {t.op for t in op.inputs if t not in fed}
        deps.update(op.control_inputs)
        preds[op] = len(deps)
        for d in deps:
            succs[d].append(op)
    heap = [(op._id, op) for op, n in preds.items() if n == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        _, op = heapq.heappop(heap)
        order.append(op)
        for s in succs[op]:
            preds[s] -= 1
            if preds[s] == 0:
                heapq.heappush(heap, (s._id, s))
    if len(order) != len(needed):
        stuck = sorted((op for op, n in preds.items() if n > 0), key=lambda o: o._id)
        names = ", ".join(op.name for op in stuck[:8])
        raise InvalidArgumentError(f"the graph has a cycle through: {names}")
    return order


def kernel_dtype(op: Operation) -> Any:
    """The dtype a kernel is chosen by: the first input's, else the first output's; ``string``
    when any input or output is a string (string tensors stay on the CPU)."""
    for t in op.inputs:
        if t.dtype.is_string:
            return _dt.string
    for t in op.outputs:
        if t.dtype.is_string:
            return _dt.string
    if op.inputs:
        return op.inputs[0].dtype
    if op.outputs:
        return op.outputs[0].dtype
    return None


def build_prepared(
    order: list[Operation],
    fetches: Sequence[Tensor | Operation],
    fed: Sequence[Tensor],
    device_of: Callable[[Operation], Any],
    context_of: Callable[[Operation, Any], KernelContext],
    input_map: dict | None = None,
    control_map: dict | None = None,
    inline_async: bool = False,
    fuse: bool | None = None,
) -> PreparedGraph:
    """Bind kernels and slots for ``order`` (from ``prune`` or ``partition``).

    ``input_map[(op, i)]`` and ``control_map[(op, c)]`` rewire inputs that a partition replaced
    by Recv ops. ``inline_async`` says that async kernels (Send/Recv on a local rendezvous)
    complete inline when run in ``order``, so the straight-line schedule may be used. ``fuse``:
    whether convolutions and MatMuls run fused with the BiasAdd and Relu after them on real CPU
    devices (runtime/fusion.py; None: unless HETBED_FUSION turns it off).
    """
    input_map = input_map or {}
    control_map = control_map or {}

    rewired = {op for op, _ in input_map}  # (ops with an input a partition replaced)
    rewired_controls = {op for op, _ in control_map}

    def plain_inputs(op: Operation) -> list[Tensor]:
        if op not in rewired:
            return list(op.inputs)
        return [input_map.get((op, i), t) for i, t in enumerate(op.inputs)]

    chains = (
        fusion.plan(order, fetches, fed, device_of, plain_inputs)
        if (fusion.enabled() if fuse is None else fuse)
        else {}
    )

    def inputs_of(op: Operation) -> list[Tensor]:
        ins = plain_inputs(op)
        chain = chains.get(op)
        if chain is not None:
            if chain.head is op and chain.extra is not None:
                ins.append(chain.extra)  # a bias the head adds itself, a pair's other operand
            elif chain.pair:
                ins.append(chain.head.outputs[0])  # a pair's second op waits for the head
        return ins

    def controls_of(op: Operation) -> list[Operation]:
        if op not in rewired_controls:
            return op.control_inputs
        return [control_map.get((op, c), c) for c in op.control_inputs]

    slot_of: dict[Tensor, int] = {}
    feed_slots: dict[Tensor, int] = {}
    for t in fed:
        if t not in feed_slots:
            feed_slots[t] = slot_of[t] = len(slot_of)
    needed_tensors: set[Tensor] = set()
    ins_of = {op: inputs_of(op) for op in order}
    for ins in ins_of.values():
        needed_tensors.update(ins)
    for f in fetches:
        if isinstance(f, Tensor):
            needed_tensors.add(f)
    nodes: list[Node] = []
    node_of: dict[Operation, Node] = {}
    for op in order:
        dev = device_of(op)
        op_def = op.op_def
        kernel = op_def.find_kernel(dev.kernel_type, kernel_dtype(op), op.name)
        node = Node(len(nodes), op, dev, kernel, context_of(op, dev), ins_of[op])
        chain = chains.get(op)
        if chain is not None:
            node.fn = (
                fusion.head_fn(chain, kernel.fn)
                if op is chain.head
                else fusion.member_fn(chain, op, kernel.fn)
            )
        for t in op.outputs:
            if t in needed_tensors and t not in slot_of:
                slot_of[t] = len(slot_of)
            node.outs.append(
                slot_of.get(t) if t in needed_tensors and t not in feed_slots else None
            )
        nodes.append(node)
        node_of[op] = node
    # Inputs, predecessor counts and consumer lists.
    for node in nodes:
        preds: set[int] = set()
        for t in node.input_tensors:
            node.ins.append(slot_of[t])
            if t not in feed_slots:
                preds.add(node_of[t.op].index)
        for c in controls_of(node.op):
            preds.add(node_of[c].index)
            node.ctrl_preds.append(node_of[c].index)
        node.n_preds = len(preds)
        for p in preds:
            nodes[p].consumers.append(node.index)
    fetch_slots = [slot_of.get(f) if isinstance(f, Tensor) else None for f in fetches]
    slot_tensor: list[Tensor | None] = [None] * len(slot_of)
    for t, i in slot_of.items():
        slot_tensor[i] = t
    # Last use of each slot in topological order: free it after that node (straight-line path).
    keep = {s for s in fetch_slots if s is not None}
    last_use: dict[int, int] = {}
    for node in nodes:
        for s in node.ins:
            last_use[s] = node.index
    for s, i in last_use.items():
        if s not in keep:
            nodes[i].free_after.append(s)
    for node in nodes:
        node.heavy = bool(getattr(node.device, "is_heavy", None)) and node.device.is_heavy(node)
    straight = all(
        getattr(n.device, "synchronous", False)
        and not n.heavy
        and (not n.is_async or (inline_async and n.kernel.inline_in_order))
        for n in nodes
    )
    # dead values come from a Switch here, or through a _Recv whose _Send runs elsewhere (the
    # partition of another task may hold a cond's Switch)
    sent = {n.op.attrs["key"] for n in nodes if n.op.type == "_Send"}
    has_cond = any(
        n.op.type in ("Switch", "Merge") or (n.op.type == "_Recv" and n.op.attrs["key"] not in sent)
        for n in nodes
    )
    if has_cond:
        straight = False  # dead tensors propagate in the clocked schedule only
        for n in nodes:
            n.dead_rule = _DEAD_RULES.get(n.op.type, 1)
    prep = PreparedGraph(nodes, len(slot_of), feed_slots, fetch_slots, straight)
    prep.has_cond = has_cond
    prep.frames = analyze_frames(nodes, len(slot_of)) if has_cond else None
    slot_node = [None if t is None or t in feed_slots else node_of[t.op] for t in slot_tensor]
    if prep.frames is not None:
        # (a loop's _Recv may have gained a control input: counts and roots follow)
        prep.initial_pending = [n.n_preds for n in nodes]
        prep.roots = [n.index for n in nodes if n.n_preds == 0]
        for fr in prep.frames.frames:
            for s in fr.pinned:
                prep.initial_refs[s] += 1 << 30  # captured by a loop: kept while it runs
        clones = prep.frames.clones
        if clones:  # parallel loops' copies of their nodes and slots (runtime/frames.py)
            prep.extra_nodes = clones
            prep.n_slots += len(prep.frames.clone_slots)
            prep.initial_pending += [k.n_preds for k in clones]
            refs = prep.initial_refs
            refs += [0] * len(prep.frames.clone_slots)
            for k in clones:
                for s in k.ins:
                    if s >= len(slot_of):
                        refs[s] += 1
            slot_tensor += [slot_tensor[s] for s in prep.frames.clone_slots]
            slot_node += [slot_node[s] for s in prep.frames.clone_slots]
            for k in clones:
                for s in k.outs:
                    if s is not None and s >= len(slot_of):
                        slot_node[s] = k
    prep.slot_tensor = slot_tensor
    prep.slot_node = slot_node
    return prep


#: how deadness reaches an op (ops/cond.py): Merge is dead only when every input is; Send and
#: Recv carry a dead value to the other device instead of being dead themselves
_DEAD_RULES = {"Merge": 2, "_Send": 0, "_Recv": 0}
