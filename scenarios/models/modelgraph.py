"""What every zoo builder returns (``ModelGraph``), the training step around a loss, and
``count_flops``: forward FLOPs from the ops' own cost rules on concrete shapes.

A builder adds to the default graph, in the caller's device scope (so that a
``replica_device_setter`` places the variables), the forward pass, its gradients and the
optimizer's updates; the simulator then reads per-replica compute from the op cost rules and
the bytes of every variable from ``ModelGraph.variables``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import hetbed as hb
from hetbed.runtime.graph import Graph, Operation, Tensor
from hetbed.runtime.shapes import output_shapes


@dataclass
class ModelGraph:
    """One model's training step in a graph.

    ``variables`` are the model's own variables (trainable ones and state such as batch-norm
    moving averages), without optimizer slots or the global step; ``params`` counts the elements
    of the trainable ones. ``flops_per_example`` is the forward pass (through the loss) divided by
    the batch size. ``input_high`` gives, for integer inputs, the exclusive upper bound of valid
    values (class or vocabulary size), so that ``random_feed`` can make a valid batch.
    """

    name: str
    inputs: dict[str, Tensor]
    train_op: Operation
    loss: Tensor
    variables: list
    params: int
    flops_per_example: float | None
    input_shapes: dict[str, tuple]
    logits: Tensor | None = None
    input_high: dict[str, int] = field(default_factory=dict)

    @property
    def trainable_variables(self) -> list:
        return [v for v in self.variables if v.trainable]

    @property
    def variable_bytes(self) -> int:
        """Bytes of all model variables (what parameter servers hold, slots excluded)."""
        return sum(_num_elements(v) * v.dtype.size for v in self.variables)

    def random_feed(self, seed: int = 0) -> dict:
        """A valid batch of random inputs: ``{placeholder: numpy array}``."""
        rng = np.random.default_rng(seed)
        feed = {}
        for name, ph in self.inputs.items():
            shape = self.input_shapes[name]
            if ph.dtype.is_integer:
                feed[ph] = rng.integers(0, self.input_high.get(name, 2), shape).astype(ph.dtype.np)
            else:
                feed[ph] = rng.standard_normal(shape).astype(ph.dtype.np)
        return feed


def _num_elements(v: Any) -> int:
    return int(np.prod(v.shape.as_list(), dtype=np.int64))


# ---- optimizers and the training step ----------------------------------------------------------

_DEFAULT_LR = {"sgd": 0.01, "momentum": 0.01, "adam": 0.001, "rmsprop": 0.001}


def make_optimizer(optimizer: Any = "sgd", learning_rate: float | None = None) -> Any:
    """An optimizer from its name ("sgd", "momentum" (0.9), "adam", "rmsprop") or as given.

    Raises ValueError for an unknown name.
    """
    if isinstance(optimizer, hb.train.Optimizer):
        return optimizer
    if optimizer not in _DEFAULT_LR:
        raise ValueError(
            f"unknown optimizer {optimizer!r}; use one of {sorted(_DEFAULT_LR)} "
            "or pass an hb.train.Optimizer"
        )
    lr = _DEFAULT_LR[optimizer] if learning_rate is None else float(learning_rate)
    if optimizer == "sgd":
        return hb.train.GradientDescentOptimizer(lr)
    if optimizer == "momentum":
        return hb.train.MomentumOptimizer(lr, 0.9)
    if optimizer == "adam":
        return hb.train.AdamOptimizer(lr)
    return hb.train.RMSPropOptimizer(lr, decay=0.9, momentum=0.9, epsilon=1.0)


class Recorder:
    """Notes the variables and update ops a forward pass adds to the default graph."""

    def __enter__(self) -> Recorder:
        g = hb.get_default_graph()
        self._graph = g
        self._vars0 = len(g.get_collection(hb.GraphKeys.GLOBAL_VARIABLES))
        self._upd0 = len(g.get_collection(hb.GraphKeys.UPDATE_OPS))
        return self

    def __exit__(self, *exc: Any) -> None:
        g = self._graph
        self.variables = list(g.get_collection(hb.GraphKeys.GLOBAL_VARIABLES)[self._vars0 :])
        self.update_ops = list(g.get_collection(hb.GraphKeys.UPDATE_OPS)[self._upd0 :])


def training_step(
    name: str,
    recorder: Recorder,
    inputs: dict[str, Tensor],
    loss: Tensor,
    *,
    optimizer: Any = "sgd",
    learning_rate: float | None = None,
    global_step: bool = True,
    logits: Tensor | None = None,
    input_high: dict[str, int] | None = None,
    flops: bool = True,
) -> ModelGraph:
    """Add gradients and updates for ``loss`` (plus the forward pass's update ops, e.g. batch-norm
    moving averages) and describe the result as a ModelGraph."""
    opt = make_optimizer(optimizer, learning_rate)
    gs = hb.train.get_or_create_global_step() if global_step else None
    trainable = [v for v in recorder.variables if v.trainable]
    train = opt.minimize(loss, global_step=gs, var_list=trainable)
    if recorder.update_ops:
        train = hb.group(train, *recorder.update_ops, name="train_op")
    input_shapes = {k: tuple(t.shape.as_list()) for k, t in inputs.items()}
    batch = next(iter(input_shapes.values()))[0]
    fpe = count_flops([loss], input_shapes) / batch if flops else None
    return ModelGraph(
        name=name,
        inputs=dict(inputs),
        train_op=train,
        loss=loss,
        variables=recorder.variables,
        params=sum(_num_elements(v) for v in trainable),
        flops_per_example=fpe,
        input_shapes=input_shapes,
        logits=logits,
        input_high=dict(input_high or {}),
    )


def classification_step(
    name: str,
    recorder: Recorder,
    images: Tensor,
    labels: Tensor,
    logits: Tensor,
    num_classes: int,
    aux_logits: Tensor | None = None,
    aux_weight: float = 0.4,
    **kw: Any,
) -> ModelGraph:
    """Mean softmax cross entropy of ``logits`` (plus ``aux_weight`` times that of an auxiliary
    head), then ``training_step``."""
    loss = hb.reduce_mean(
        hb.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits), name="loss"
    )
    if aux_logits is not None:
        aux = hb.reduce_mean(
            hb.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=aux_logits)
        )
        loss = hb.add(loss, aux * aux_weight, name="total_loss")
    return training_step(
        name,
        recorder,
        {"images": images, "labels": labels},
        loss,
        logits=logits,
        input_high={"labels": num_classes},
        **kw,
    )


# ---- counting FLOPs ------------------------------------------------------------------------------


def _ancestors(targets: Iterable[Any]) -> list[Operation]:
    seen: set[Operation] = set()
    stack = []
    for t in targets:
        el = t._as_graph_element() if hasattr(t, "_as_graph_element") else t
        stack.append(el if isinstance(el, Operation) else el.op)
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        stack.extend(t.op for t in op.inputs)
    return sorted(seen, key=lambda o: o._id)  # creation order is a topological order


def _given_shapes(ops: list[Operation], input_shapes: dict | None) -> dict:
    """Map tensors to the concrete shapes given by tensor, tensor name or op name."""
    out: dict = {}
    if not input_shapes:
        return out
    by_name = {}
    for op in ops:
        for t in op.outputs:
            by_name[t.name] = t
        if len(op.outputs) == 1:
            by_name.setdefault(op.name, op.outputs[0])
    for k, shape in input_shapes.items():
        t = k if isinstance(k, Tensor) else by_name.get(k)
        if t is not None:
            out[t] = tuple(int(d) for d in shape)
    return out


def count_flops(
    graph_or_ops: Graph | Iterable[Any],
    input_shapes: dict | None = None,
    op_types: Iterable[str] | None = None,
) -> float:
    """Sum of the op cost rules' FLOPs over a subgraph, on concrete shapes.

    ``graph_or_ops`` is a Graph (all its ops) or tensors / ops / variables whose ancestors (data
    inputs, transitively) are counted: pass ``[logits]`` or ``[loss]`` for a forward pass.
    ``input_shapes`` maps placeholders (tensor, tensor name or op name) to concrete shapes
    including the batch; other shapes follow from each op's shape rule
    (``hetbed.runtime.shapes.output_shapes``), unknown dimensions left over count as 1.
    ``op_types`` restricts the sum to ops of those types (e.g. ``{"Conv2D", "MatMul"}``).
    """
    types = None if op_types is None else set(op_types)
    if isinstance(graph_or_ops, Graph):
        ops = sorted(graph_or_ops.get_operations(), key=lambda o: o._id)
    else:
        ops = _ancestors(graph_or_ops)
    shapes = _given_shapes(ops, input_shapes)
    values: dict[Tensor, np.ndarray] = {}
    total = 0.0
    for op in ops:
        in_shapes = [shapes.get(t) or _static(t) for t in op.inputs]
        outs = output_shapes(op, in_shapes, values=[values.get(t) for t in op.inputs])
        for t, s in zip(op.outputs, outs):
            shapes.setdefault(t, s)
        _track_values(op, in_shapes, values)
        if types is None or op.type in types:
            cost = op.op_def.cost_fn(op, in_shapes, [shapes[t] for t in op.outputs])
            total += float(cost.flops)
    return total


def _static(t: Tensor) -> tuple:
    dims = t.shape.dims
    return () if dims is None else tuple(1 if d is None else int(d) for d in dims)


def _track_values(op: Operation, in_shapes: list, values: dict) -> None:
    """Small integer values that shape rules may need (constants, Shape of a tensor)."""
    if op.type == "Const":
        v = op.attrs.get("value")
        if isinstance(v, np.ndarray) and v.dtype.kind in "iu" and v.size <= 64:
            values[op.outputs[0]] = v
    elif op.type == "Shape" and in_shapes:
        values[op.outputs[0]] = np.asarray(in_shapes[0], dtype=op.outputs[0].dtype.np)


Builder = Callable[..., ModelGraph]
