"""Fusing a convolution or MatMul with the BiasAdd and ReLU after it, on the CPU.

TensorFlow's graph optimizer (grappler's remapper) rewrites Conv2D -> BiasAdd [-> Relu] and
MatMul -> BiasAdd [-> Relu] into one fused kernel on the CPU: the bias and the activation are
applied to each block of the product while it is still in cache, instead of two more passes over
the whole tensor, each allocating its own output. hetbed does the same when it prepares a step
(runtime/prepare.py), without changing the graph:

- the head (Conv2D or MatMul) takes the bias as one more input and runs the fused kernel
  (``ops.nn.conv2d_bias`` / ``ops.nn.matmul_bias``);
- the BiasAdd and Relu nodes stay in the plan and pass the fused result on, so that everything
  else (the gradients reading the Relu's output, traces, errors) sees the nodes it expects. In a
  trace the fused time shows on the head; the BiasAdd and Relu take next to none.

A chain is fused only where nothing else can see the intermediate values: the head's output feeds
the BiasAdd alone, the BiasAdd's output feeds the Relu alone (else the chain stops at the
BiasAdd), neither is fetched or fed, all three run on one real CPU device (never on a simulated
one, whose nodes are priced one by one), the bias is produced before the head in the step's
order, and the graph has no control flow. Where the fused kernel does not apply at run time
(another dtype, a bias whose length does not match), the head returns its plain result wrapped
in ``Unfused`` and the BiasAdd and Relu nodes run their own kernels, so their errors name them.

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
    """One fused chain: ``head`` -> ``bias_add`` [-> ``relu``], with the bias tensor the head
    takes as its extra input."""

    __slots__ = ("head", "bias_add", "relu", "bias")

    def __init__(self, head: Operation, bias_add: Operation, relu: Operation | None, bias: Tensor):
        self.head, self.bias_add, self.relu, self.bias = head, bias_add, relu, bias


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
    if any(op.type in _CONTROL_FLOW for op in order):
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

    chains: dict[Operation, Chain] = {}
    for op in order:
        if op.type != "BiasAdd" or op.attrs.get("data_format", "NHWC") not in ("NHWC", "N...C"):
            continue
        ins = inputs_of(op)
        if len(ins) != 2:
            continue
        value, bias = ins
        head = value.op
        dev = device_of(op)
        if (
            head.type not in _HEADS
            or head not in pos
            or head in chains
            or only_consumer(value) is not op
            or value.dtype.name not in _DTYPES
            or device_of(head) is not dev
            or not _plain_cpu(dev)
            or (bias not in fed_set and pos.get(bias.op, len(order)) >= pos[head])
        ):
            continue
        relu = only_consumer(op.outputs[0])
        if relu is not None and (relu.type != "Relu" or device_of(relu) is not dev):
            relu = None
        chain = Chain(head, op, relu, bias)
        for member in (head, op, relu):
            if member is not None:
                chains[member] = chain
    return chains


def head_fn(chain: Chain) -> Callable:
    """The fused kernel the head runs: (ctx, x, w, bias) -> the final array or Unfused."""
    from .ops import nn

    fused = nn.conv2d_bias if chain.head.type == "Conv2D" else nn.matmul_bias
    relu = chain.relu is not None

    def fn(ctx: Any, x: Any, w: Any, b: Any) -> Any:
        return fused(ctx, x, w, b, relu)

    return fn


def bias_add_fn(chain: Chain, kernel: Callable) -> Callable:
    """The BiasAdd node's function: the fused result passed on, or its own ``kernel`` on an
    Unfused head result (still Unfused when a Relu follows, for it to apply)."""
    wrap = chain.relu is not None

    def fn(ctx: Any, v: Any, b: Any) -> Any:
        if type(v) is Unfused:
            r = kernel(ctx, v.value, b)
            return Unfused(r) if wrap else r
        return v

    return fn


def relu_fn(kernel: Callable) -> Callable:
    """The Relu node's function: the fused result passed on, or its own ``kernel``."""

    def fn(ctx: Any, v: Any) -> Any:
        return kernel(ctx, v.value) if type(v) is Unfused else v

    return fn
