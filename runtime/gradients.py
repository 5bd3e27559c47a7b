"""Reverse-mode autodiff on the graph: ``hb.gradients(ys, xs, grad_ys)`` adds gradient ops."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

from .errors import InvalidArgumentError
from .graph import Operation, Tensor, TensorShape
from .registry import convert_to_tensor


class IndexedSlices:
    """A sparse gradient: rows ``indices`` of a tensor of ``dense_shape`` hold ``values``.

    Produced by the gradient of gather/embedding lookups and consumed as such by optimizers
    (scatter updates), so a large embedding's gradient never becomes dense.
    """

    def __init__(self, values: Tensor, indices: Tensor, dense_shape: Any = None):
        self.values = values
        self.indices = indices
        self.dense_shape = dense_shape  # a Tensor of the dense tensor (for its run-time shape)

    @property
    def dtype(self):
        return self.values.dtype

    @property
    def graph(self):
        return self.values.graph

    @property
    def name(self) -> str:
        return self.values.name

    @property
    def op(self) -> Operation:
        return self.values.op

    @property
    def shape(self) -> TensorShape:
        return self.dense_shape.shape if isinstance(self.dense_shape, Tensor) else TensorShape(None)

    def __repr__(self) -> str:
        return f"<hb.IndexedSlices values={self.values.name} indices={self.indices.name}>"


class IndexedSlicesValue:
    """The fetched value of an IndexedSlices: numpy ``values``, ``indices`` and ``dense_shape``."""

    def __init__(self, values: Any, indices: Any, dense_shape: Any):
        self.values = values
        self.indices = indices
        self.dense_shape = dense_shape

    def to_dense(self) -> Any:
        import numpy as np

        out = np.zeros(self.dense_shape, dtype=self.values.dtype)
        np.add.at(out, self.indices, self.values)
        return out

    def __repr__(self) -> str:
        return f"IndexedSlicesValue(values={self.values!r}, indices={self.indices!r})"


def to_dense(g: Tensor | IndexedSlices | None) -> Tensor | None:
    """A dense tensor for a gradient that may be sparse."""
    if isinstance(g, IndexedSlices):
        from .ops.manip import indexed_slices_to_dense

        return indexed_slices_to_dense(g)
    return g


def aggregate(grads: list) -> Tensor | IndexedSlices | None:
    """Sum gradient contributions: sparse ones stay sparse when all are sparse."""
    grads = [g for g in grads if g is not None]
    if not grads:
        return None
    if len(grads) == 1:
        return grads[0]
    if all(isinstance(g, IndexedSlices) for g in grads):
        from .ops.manip import concat

        return IndexedSlices(
            concat([g.values for g in grads], 0),
            concat([g.indices for g in grads], 0),
            grads[0].dense_shape,
        )
    from .ops.math import add_n

    return add_n([to_dense(g) for g in grads])


def _as_tensor(x: Any) -> Tensor:
    ref = getattr(x, "_ref", None)  # a Variable: differentiate w.r.t. its storage
    if ref is not None:
        return ref
    return convert_to_tensor(x)


def gradients(
    ys: Any,
    xs: Any,
    grad_ys: Any = None,
    name: str = "gradients",
    colocate_gradients_with_ops: bool = False,
    gate_gradients: bool = False,
    aggregation_method: Any = None,
    stop_gradients: Any = None,
    unconnected_gradients: str = "none",
) -> list:
    """d(sum of ys)/d(x) for each x in ``xs``, as tensors (or IndexedSlices) added to the graph.

    Returns None for an x that no y depends on (or zeros with ``unconnected_gradients="zero"``).
    ``gate_gradients`` (what an optimizer's default GATE_OP asks): each op's gradients to its
    inputs become available together (``_gated``). Raises LookupError naming the op when a
    differentiable path crosses an op with no gradient.
    """
    ys_list = [_as_tensor(y) for y in (ys if isinstance(ys, (list, tuple)) else [ys])]
    xs_list = [_as_tensor(x) for x in (xs if isinstance(xs, (list, tuple)) else [xs])]
    if grad_ys is None:
        gys: list = [None] * len(ys_list)
    else:
        gys = list(grad_ys) if isinstance(grad_ys, (list, tuple)) else [grad_ys]
        if len(gys) != len(ys_list):
            raise InvalidArgumentError(f"gradients: {len(ys_list)} ys but {len(gys)} grad_ys")
    stops = {_as_tensor(s) for s in (stop_gradients or [])}
    g = ys_list[0].graph
    for t in ys_list + xs_list:
        if t.graph is not g:
            raise ValueError(f"gradients: {t.name} is from another graph than {ys_list[0].name}")

    # Ops on a path from some x to some y.
    back: set[Operation] = set()
    stack = [y.op for y in ys_list]
    while stack:
        op = stack.pop()
        if op in back:
            continue
        back.add(op)
        stack.extend(t.op for t in op.inputs if t not in stops)
    fwd: set[Operation] = set()
    stack = [c for x in xs_list for c in x.consumers()]
    while stack:
        op = stack.pop()
        if op in fwd or op not in back:
            continue
        fwd.add(op)
        for t in op.outputs:
            stack.extend(t.consumers())
    between = fwd & back
    # the tensors whose gradients are wanted: the xs and the outputs of ops between them and ys
    needed = set(xs_list) | {t for op in between for t in op.outputs}
    alias_memo: dict = {}

    grads: dict[Tensor, list] = {}
    with g.as_default(), g.name_scope(name), g.control_dependencies(None):
        for y, gy in zip(ys_list, gys):
            if gy is None:
                if not y.dtype.is_differentiable:
                    raise InvalidArgumentError(
                        f"gradients: {y.name} has dtype {y.dtype.name}; only float and complex ys "
                        "can be differentiated"
                    )
                from .ops.math import ones_like

                gy = ones_like(y, name="grad_ys")
            else:
                gy = convert_to_tensor(gy, dtype=y.dtype)
            grads.setdefault(y, []).append(gy)

        pending: dict[Operation, int] = dict.fromkeys(between, 0)
        for op in between:
            for t in op.inputs:
                if t.op in pending and t not in stops:
                    pending[t.op] += 1
        ready = deque(sorted((op for op, n in pending.items() if n == 0), key=lambda o: -o._id))
        while ready:
            op = ready.popleft()
            out_grads = [aggregate(grads.get(t, [])) for t in op.outputs]
            if any(og is not None for og in out_grads):
                in_grads = _op_grads(g, op, out_grads, colocate_gradients_with_ops)
                if gate_gradients:
                    in_grads = _gated(g, op, in_grads, stops, needed, alias_memo)
                for t, ig in zip(op.inputs, in_grads):
                    if ig is not None and t not in stops and t.dtype.is_differentiable:
                        grads.setdefault(t, []).append(ig)
            for t in op.inputs:
                if t.op in pending and t not in stops:
                    pending[t.op] -= 1
                    if pending[t.op] == 0:
                        ready.append(t.op)

        out = []
        for x in xs_list:
            r = aggregate(grads.get(x, []))
            if r is None and unconnected_gradients == "zero":
                from .ops.math import zeros_like

                r = zeros_like(x)
            out.append(r)
    return out


def _gated(g: Any, op: Operation, in_grads: Sequence, stops: set, needed: set, memo: dict) -> list:
    """TF's ``gate_gradients`` (GATE_OP): the gradients ``op`` passes to its inputs, each made
    available only once all of them are computed (TF's ``tuple``: identities after one group).
    Without it, a variable's update may run as soon as its own gradient is ready, before a
    gradient of the same op that reads the variable (MatMul's gradient to its other input reads
    the weights): variables are read without a copy and updated in place, so that gradient
    would see the new weights. Only the gradients that are wanted (``needed``: toward an x) are
    gated: TF gates every input's, so it also computes, each step, the gradients of inputs no x
    depends on (a first layer's gradient to its input images), which no update reads. And
    only the ops that read a variable's buffer (an input that may alias one,
    ``_may_alias_variable``) are gated: another op's gradients read nothing an update
    changes (TF gates every op with two or more input gradients, an Add's too). One gradient,
    or none, needs no gate."""
    kept = [
        k for k, (t, ig) in enumerate(zip(op.inputs, in_grads))
        if ig is not None and t not in stops and t.dtype.is_differentiable and t in needed
    ]  # fmt: skip
    if len(kept) < 2 or not any(_may_alias_variable(t, memo) for t in op.inputs):
        return list(in_grads)
    from .ops.array import identity
    from .ops.control import group

    parts: list[Tensor] = []
    for k in kept:
        ig = in_grads[k]
        parts += [ig.values, ig.indices] if isinstance(ig, IndexedSlices) else [ig]
    out = list(in_grads)
    with g.name_scope(op.name + "_grad/tuple"):
        gate = group(*parts)

        def after(t: Tensor) -> Tensor:
            with g.colocate_with(t.op), g.control_dependencies([gate]):
                return identity(t, name="control_dependency")

        for k in kept:
            ig = in_grads[k]
            if isinstance(ig, IndexedSlices):
                out[k] = IndexedSlices(after(ig.values), after(ig.indices), ig.dense_shape)
            else:
                out[k] = after(ig)
    return out


def _may_alias_variable(t: Tensor, memo: dict) -> bool:
    """Whether ``t`` may share a variable's buffer: a variable's reference, or the output of a
    view kernel (a read, an identity, a reshape, a slice: ``Kernel.aliases_input``) of such a
    tensor."""
    got = memo.get(t)
    if got is None:
        memo[t] = False  # (a loop's back edge)
        op_def = t.op.op_def
        if op_def.is_ref:
            got = True
        elif any(k.aliases_input for ks in op_def.kernels.values() for k in ks):
            got = any(_may_alias_variable(i, memo) for i in t.op.inputs)
        else:
            got = False
        memo[t] = got
    return got


def _op_grads(g: Any, op: Operation, out_grads: list, colocate: bool) -> Sequence:
    from .custom_gradient import gradient_for

    op_def = op.op_def
    custom = gradient_for(op)  # the program's own (RegisterGradient, custom_gradient), if any
    if custom is False:  # NotDifferentiable
        return [None] * len(op.inputs)
    grad_fn = custom if custom is not None else op_def.grad_fn
    if grad_fn is None:
        if not op_def.differentiable:
            return [None] * len(op.inputs)
        raise LookupError(
            f"no gradient defined for op {op.name!r} (type {op.type}); it lies on the path "
            "from xs to ys: wrap its input in hb.stop_gradient or register a gradient"
        )
    if not op_def.passes_sparse:
        out_grads = [to_dense(og) for og in out_grads]
    if len(out_grads) > 1 and any(og is None for og in out_grads):
        from .ops.math import zeros_like

        out_grads = [zeros_like(t) if og is None else og for t, og in zip(op.outputs, out_grads)]
    import contextlib

    coloc = g.colocate_with(op) if colocate else contextlib.nullcontext()
    with g.name_scope(op.name + "_grad"), coloc:
        res = grad_fn(op, *out_grads)
    res = list(res) if custom is None or isinstance(res, (list, tuple)) else [res]
    if len(res) != len(op.inputs):
        raise RuntimeError(
            f"gradient of {op.name!r} ({op.type}) returned {len(res)} values for "
            f"{len(op.inputs)} inputs"
        )
    if custom is not None:
        res = [None if r is None else _as_grad(r) for r in res]
        for x, r in zip(op.inputs, res):
            if isinstance(r, Tensor) and not r.shape.is_compatible_with(x.shape):
                raise ValueError(
                    f"Incompatible shapes between op input and calculated input gradient: the "
                    f"gradient registered for {op.name!r} ({op.type}) gives {r.shape} for its "
                    f"input {x.name} of shape {x.shape}"
                )
    return res


def _as_grad(r: Any) -> Any:
    """A registered gradient's value as a tensor (IndexedSlices kept)."""
    from .registry import convert_to_tensor

    if isinstance(r, (Tensor, IndexedSlices)):
        return r
    return convert_to_tensor(r)
