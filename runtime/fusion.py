"""Fusing an op with the elementwise ops after it, on the CPU.

TensorFlow's graph optimizer (grappler's remapper) rewrites Conv2D -> BiasAdd [-> Relu] and
MatMul -> BiasAdd [-> Relu] into one fused kernel on the CPU: the bias and the activation are
applied to each block of the product while it is still in cache, instead of two more passes over
the whole tensor, each allocating its own output. hetbed does the same when it prepares a step
(runtime/prepare.py), without changing the graph, and fuses two more that every CNN's backward
pass has: MaxPoolGrad -> ReluGrad, where the pooled input is the ReLU's output (one pass writes
the window gradients already masked by the ReLU), and a convolution's two gradients of one
output gradient (a "pair": Winograd's algorithm transforms the output gradient's tiles once for
both, ``ops.winograd.conv2d_backprop_both``):

- a Conv2D head checks its inputs and hands them on; the BiasAdd after it runs the fused
  kernel (``ops.nn.conv2d_bias``) once it has the bias, so the convolution never waits for a
  bias computed later or by another task; a MatMul computes its product and the BiasAdd adds
  the bias and the ReLU to it in place (``ops.nn.bias_relu_in_place``); a MaxPoolGrad head
  runs ``ops.nn.max_pool_grad_relu``; a pair's head (the earlier of the two in the step's
  order) takes the other's operand as one more input and computes both gradients;
- the other nodes of a chain stay in the plan and pass the fused result on, so that
  everything else (the gradients reading the Relu's output, traces, errors) sees the nodes it
  expects. In a trace the fused convolution's time shows on its BiasAdd (as TF shows it on the
  fused node), the others' on their head; the rest take next to none. A pair's second node
  waits for the head's output and takes the result left for its output gradient.

A chain is fused only where nothing else can see the intermediate values: each value inside the
chain feeds the next op alone (else the chain stops before it), is neither fetched nor fed, all
ops run on one real CPU device (never on a simulated one, whose nodes are priced one by one),
and the graph has no control flow; a pair only where the other's operand is ready before its
head in the step's order (on a distributed worker a filter received from a PS task may come
later: the head would have to wait for it, and another task might compute it from what this one
sends). Where a fused kernel does not apply at run time (another dtype, a bias whose length does
not match), the nodes run their own kernels (values handed on wrapped in ``Unfused``), so their
errors name them.

``ConfigProto(graph_options=GraphOptions(rewrite_options=RewriterConfig(remapping=OFF)))`` (TF1's
switch for this rewrite) or ``HETBED_FUSION=0`` turns it off; ``hetbed calibrate`` profiles
with it off, since the simulator prices each op of the graph on its own.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .graph import Operation, Tensor

_HEADS = ("Conv2D", "MatMul")
_DTYPES = ("float32", "float64")  # the compiled CPU kernels' dtypes
_TAILS = frozenset({"BiasAdd", "ReluGrad", "Conv2DBackpropFilter"})  # where chains are found
_CONTROL_FLOW = frozenset({"Switch", "Merge", "Enter", "Exit", "NextIteration", "LoopCond"})


class Unfused:
    """A head's plain result where its fused kernel did not apply: the BiasAdd and Relu nodes
    after it then run their own kernels on it."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value


def enabled(config: Any = None) -> bool:
    """Whether steps fuse: not when ``HETBED_FUSION`` is 0 / false / off, nor when ``config``
    (a ConfigProto) turns TF's remapping optimizer off (``RewriterConfig.OFF``)."""
    if os.environ.get("HETBED_FUSION", "").strip().lower() in ("0", "false", "no", "off"):
        return False
    graph_options = getattr(config, "graph_options", None)
    rewrite = getattr(graph_options, "rewrite_options", None)
    return getattr(rewrite, "remapping", 0) != 2  # RewriterConfig.OFF


class Chain:
    """One fused chain: ``head`` -> ``members`` (the ops after it, in order); ``extra``: the
    tensor the head takes as one more input (a Conv2D's or MatMul's bias; a convolution
    gradient pair's other operand), else None. A ``pair`` (a convolution's two gradients from
    one output gradient) has its second op in ``members``, which waits for the head's output and
    takes its result from ``pending`` (by the output gradient's identity)."""

    __slots__ = ("head", "members", "extra", "pair", "pending")

    def __init__(
        self,
        head: Operation,
        members: list[Operation],
        extra: Tensor | None,
        pair: bool = False,
    ):
        self.head, self.members, self.extra, self.pair = head, members, extra, pair
        self.pending: dict[int, tuple] = {}


def _plain_cpu(dev: Any) -> bool:
    return (
        getattr(dev, "kernel_type", None) == "cpu"
        and getattr(dev, "xp", None) is np
        and not getattr(dev, "timed", False)
        and not getattr(dev, "kernels_on_stream", False)
    )


def plan(
    order: Sequence[Operation],
    fetches: Sequence[Any],
    fed: Sequence[Tensor],
    device_of: Callable[[Operation], Any],
    inputs_of: Callable[[Operation], list[Tensor]],
) -> dict[Operation, Chain]:
    """The chains to fuse among ``order`` (see the module docstring), by each member op."""
    tails = [op for op in order if op.type in _TAILS]
    if not tails or any(op.type in _CONTROL_FLOW for op in order):
        return {}
    if not any(_plain_cpu(device_of(op)) for op in tails):  # (a simulated cluster: none)
        return {}
    pos = {op: i for i, op in enumerate(order)}
    uses: dict[Tensor, list[Operation]] = {}
    for op in order:
        for t in inputs_of(op):
            uses.setdefault(t, []).append(op)
    fed_set = set(fed)
    private = fed_set | {f for f in fetches if isinstance(f, Tensor)}

    def only_consumer(t: Tensor) -> Operation | None:
        users = uses.get(t, ())
        return users[0] if len(users) == 1 and t not in private else None

    def fusable(head: Operation, value: Tensor, op: Operation) -> bool:
        """``value`` (``head``'s output) may flow straight into ``op`` inside a fused kernel."""
        dev = device_of(op)
        return (
            head in pos
            and head not in chains
            and only_consumer(value) is op
            and value.dtype.name in _DTYPES
            and device_of(head) is dev
            and _plain_cpu(dev)
        )

    chains: dict[Operation, Chain] = {}
    for op in tails:
        ins = inputs_of(op)
        if op.type == "BiasAdd" and len(ins) == 2:
            if op.attrs.get("data_format", "NHWC") not in ("NHWC", "N...C"):
                continue
            value, bias = ins
            head = value.op
            if head.type not in _HEADS or not fusable(head, value, op):
                continue
            members = [op]
            relu = only_consumer(op.outputs[0])
            if relu is not None and relu.type == "Relu" and device_of(relu) is device_of(op):
                members.append(relu)
            chain = Chain(head, members, None)  # (the BiasAdd runs the fused kernel)
        elif op.type == "ReluGrad" and len(ins) == 2:
            dx, y = ins
            head = dx.op
            if (
                head.type != "MaxPoolGrad"
                or not fusable(head, dx, op)
                or inputs_of(head)[0] is not y  # the pooled input is the ReLU's output
            ):
                continue
            chain = Chain(head, [op], None)
        else:
            continue
        for member in (chain.head, *chain.members):
            chains[member] = chain
    _pair_gradients(order, pos, chains, fed_set, device_of, inputs_of)
    return chains


def _shape_of(sizes: Tensor, t: Tensor, inputs_of: Callable) -> bool:
    """Whether the shape tensor ``sizes`` is ``t``'s shape: a Shape op of ``t``, or a value
    known when the graph is built that equals ``t``'s fully known shape."""
    if sizes.op.type == "Shape" and inputs_of(sizes.op)[:1] == [t]:
        return True
    from .ops.random import static_shape_value

    known = static_shape_value(sizes)
    return (
        t.shape.is_fully_defined()
        and known.is_fully_defined()
        and known.as_list() == t.shape.as_list()
    )


def _pair_gradients(
    order: Sequence[Operation],
    pos: dict,
    chains: dict,
    fed: set,
    device_of: Callable,
    inputs_of: Callable,
) -> None:
    """Pairs of Conv2DBackpropFilter and Conv2DBackpropInput of one output gradient (a
    convolution's two gradients), on one real CPU device, float32, same strides and padding:
    the earlier one in ``order`` computes both (``ops.nn.conv2d_backprop_pair``), taking the
    other's operand as its extra input (the filter, or the convolution's input)."""
    inputs_by_dy: dict[Tensor, list[Operation]] = {}
    for op in order:
        if op.type == "Conv2DBackpropInput" and op not in chains:
            inputs_by_dy.setdefault(inputs_of(op)[2], []).append(op)
    if not inputs_by_dy:
        return
    for bf in order:
        if bf.type != "Conv2DBackpropFilter" or bf in chains:
            continue
        x, fsizes, dy = inputs_of(bf)
        dev = device_of(bf)
        if dy.dtype.name != "float32" or not _plain_cpu(dev):
            continue
        for bi in inputs_by_dy.get(dy, ()):
            sizes, f, _ = inputs_of(bi)
            if (
                bi in chains
                or device_of(bi) is not dev
                or any(bi.attrs.get(k) != bf.attrs.get(k) for k in ("strides", "padding"))
                or not _shape_of(sizes, x, inputs_of)
                or not _shape_of(fsizes, f, inputs_of)
            ):
                continue
            head, other, extra = (bf, bi, f) if pos[bf] < pos[bi] else (bi, bf, x)
            if extra not in fed and pos.get(extra.op, len(order)) >= pos[head]:
                continue
            chain = Chain(head, [other], extra, pair=True)
            chains[head] = chains[other] = chain
            break


_PENDING_MAX = 8  # results a pair keeps for its second op (more: a step failed between them)


class Deferred:
    """A convolution's inputs, handed on by its node to the BiasAdd after it, which runs the
    fused kernel once it has the bias too (so the convolution never waits for the bias, which
    may be computed later, or by another task)."""

    __slots__ = ("ctx", "x", "f")

    def __init__(self, ctx: Any, x: Any, f: Any):
        self.ctx, self.x, self.f = ctx, x, f


def head_fn(chain: Chain, kernel: Callable) -> Callable:
    """The function the head runs (``kernel``: its own). A Conv2D checks its inputs (its errors
    name it) and hands them on (``Deferred``); a MatMul computes its product as always (the
    BiasAdd then adds the bias and the ReLU in place); MaxPoolGrad runs fused with the ReluGrad;
    a pair's head computes both gradients (or, where that does not apply, its own)."""
    from .ops import nn

    kind = chain.head.type
    if chain.pair:
        is_filter = kind == "Conv2DBackpropFilter"
        pending = chain.pending

        def pair(ctx: Any, a: Any, b: Any, dy: Any, extra: Any) -> Any:
            x, f = (a, extra) if is_filter else (extra, b)
            both = nn.conv2d_backprop_pair(ctx, is_filter, x, f, dy, b if is_filter else a)
            if both is None:
                return kernel(ctx, a, b, dy)
            df, dx = both
            if len(pending) >= _PENDING_MAX:
                pending.pop(next(iter(pending)))
            pending[id(dy)] = (dy, dx if is_filter else df)
            return df if is_filter else dx

        return pair
    if kind == "MaxPoolGrad":
        return nn.max_pool_grad_relu
    if kind == "Conv2D":

        def defer(ctx: Any, x: Any, f: Any) -> Any:
            nn.conv2d_check(ctx, x, f)
            return Deferred(ctx, x, f)

        return defer

    def product(ctx: Any, a: Any, w: Any) -> Any:  # (MatMul: named, so traces of plans show it)
        return kernel(ctx, a, w)

    return product


def member_fn(chain: Chain, op: Operation, kernel: Callable) -> Callable:
    """The function of ``op``, a node after the head. The BiasAdd runs the fused kernel: the
    convolution with its bias (and ReLU) from the head's ``Deferred`` inputs, or the bias (and
    ReLU) in place on the MatMul's product; where the compiled kernels do not apply, its own
    ``kernel`` on the plain value, handed on ``Unfused`` when a ReLU follows. The ReLU passes a
    fused result on, or runs its own kernel on an Unfused value. A pair's second op takes the
    result the head left for its output gradient, or runs its own kernel."""
    from .ops import nn

    if chain.pair:
        pending = chain.pending

        def second(ctx: Any, a: Any, b: Any, dy: Any, _head_out: Any) -> Any:
            got = pending.pop(id(dy), None)
            if got is not None and got[0] is dy:
                return got[1]
            return kernel(ctx, a, b, dy)

        return second
    relu = len(chain.members) > 1
    if op is chain.members[0] and chain.head.type in _HEADS:  # the BiasAdd

        def bias_add(ctx: Any, v: Any, b: Any) -> Any:
            if type(v) is Deferred:
                r = nn.conv2d_bias(v.ctx, v.x, v.f, b, relu)
                if type(r) is not Unfused:
                    return r
                v = r.value
            elif nn.bias_relu_in_place(v, b, relu):
                return v
            r = kernel(ctx, v, b)
            return Unfused(r) if relu else r

        return bias_add
    wrap = op is not chain.members[-1]

    def fn(ctx: Any, v: Any, *rest: Any) -> Any:
        if type(v) is Unfused:
            r = kernel(ctx, v.value, *rest)
            return Unfused(r) if wrap else r
        return v

    return fn
