"""``SparseConditionalAccumulator``: averages sparse gradients (IndexedSlices) that are not stale.

As TensorFlow's: ``apply_grad(indices, values, local_step)`` adds a gradient's rows unless its
local step is behind the accumulator's global step (then it is dropped and counted);
``take_grad(n)`` waits for ``n`` gradients and returns the average **per row**: each row's sum
divided by the number of gradients that held that row (TF's element-wise MEAN), as
``(indices, values, shape)`` with the indices sorted and unique; it then clears the sum and
advances the global step. Rows repeated within one gradient are added and count that gradient
once (TF's merge expects each gradient's rows sorted and unique, and otherwise returns several
entries for a row). CPU kernels only (a GPU placement falls back under soft placement). The global-step, count and cancel ops are the dense accumulator's (data_flow.py). In a
shape-only simulation the rows are not known: a take returns the last gradient's placeholders.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetbed.devices.simulated import SimValue

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import Operation, Tensor, TensorShape
from ..registry import Cost, convert_to_tensor, defop
from .data_flow import (
    ConditionalAccumulator,
    _Accumulator,
    _as_int64,
    _check_handle,
    _handle,
    _no_cost,
    _scalar_input,
)

HANDLE = "SparseConditionalAccumulator"


class _SparseAccumulator(_Accumulator):
    """The per-row sum and count of the current global step's gradients."""

    def __init__(self, name: str, dtype: _dt.DType, shape: TensorShape):
        super().__init__(name, dtype, shape)
        #: the current step's gradients, each as (sorted unique rows, their summed values); they
        #: are merged once, when taken (merging each as it came cost O(W^2) rows for W of them)
        self.chunks: list[tuple[np.ndarray, np.ndarray]] = []

    def describe(self) -> str:
        return f"sparse, dtype {self.dtype.name}, shape {self.shape}"

    def apply_rows(self, local_step: int, indices: Any, values: Any, op_name: str) -> bool:
        """Add the rows unless the gradient is stale (``local_step`` behind the global step):
        whether they were added."""
        shape = self.shape
        if isinstance(indices, SimValue) or isinstance(values, SimValue):
            with self.lock:
                if local_step < self.global_step:
                    self.dropped += 1
                    return False
                self.sum = (indices, values)
                self.count += 1
                served = self._serve()
            for done, avg in served:
                done(avg)
            return True
        indices = np.asarray(indices).astype(np.int64, copy=False).reshape(-1)
        values = np.asarray(values)
        if values.ndim < 1 or values.shape[0] != indices.shape[0]:
            raise InvalidArgumentError(
                f"{op_name}: {indices.shape[0]} indices for values of shape {values.shape}"
            )
        if shape.ndims is not None:
            want = shape.dims[1:]
            if values.ndim != shape.ndims or any(
                w is not None and w != v for w, v in zip(want, values.shape[1:])
            ):
                raise InvalidArgumentError(
                    f"{op_name}: values of shape {values.shape} do not fit rows of accumulator "
                    f"{self.name} shape {shape}"
                )
            rows = shape.dims[0]
            bad = indices[(indices < 0) | (indices >= (rows if rows is not None else 2**62))]
            if bad.size:
                raise InvalidArgumentError(
                    f"{op_name}: row index {int(bad[0])} is outside accumulator {self.name} of "
                    f"shape {shape}"
                )
        elif (indices < 0).any():
            raise InvalidArgumentError(f"{op_name}: negative row index {int(indices.min())}")
        uniq, summed = _sum_rows(indices, values.astype(self.dtype.np, copy=False))
        with self.lock:
            if local_step < self.global_step:
                self.dropped += 1  # stale: computed before the last take
                return False
            if isinstance(self.sum, tuple):  # (a shape-only placeholder before: replaced)
                self.sum, self.chunks = None, []
            if self.chunks and summed.shape[1:] != self.chunks[0][1].shape[1:]:
                raise InvalidArgumentError(
                    f"{op_name}: rows of shape {summed.shape[1:]} differ from the "
                    f"{self.chunks[0][1].shape[1:]} already accumulated in {self.name}"
                )
            self.chunks.append((uniq, summed))
            self.count += 1
            served = self._serve()
        for done, avg in served:
            done(avg)
        return True

    def _serve(self) -> list:
        if not self.takers or self.count < self.takers[0][0] or self.count == 0:
            return []
        _, done = self.takers.popleft()
        if isinstance(self.sum, tuple):  # shape-only: the last gradient's placeholders
            idx, vals = self.sum
            out = (idx, vals, SimValue((max(self.shape.ndims or 1, 1),), np.int64))
        else:
            rows, total, hits = _merge(self.chunks)
            scale = hits.reshape((-1,) + (1,) * (total.ndim - 1)).astype(self.dtype.np)
            dense = [d if d is not None else -1 for d in (self.shape.dims or [])]
            out = (rows, (total / scale).astype(self.dtype.np, copy=False))
            out = (*out, np.array(dense, np.int64))
        self.sum, self.chunks, self.count = None, [], 0
        self.global_step += 1
        return [(done, out)]


def _sum_rows(indices: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted unique indices, the values of each one's occurrences summed in their order): a
    stable sort and one reduction (as np.unique then np.add.at, without the latter's per-element
    loop); sorted unique indices are returned as they are."""
    if indices.size < 2 or bool((indices[1:] > indices[:-1]).all()):
        return indices.copy(), values.copy()  # (never alias the caller's arrays)
    order = np.argsort(indices, kind="stable")
    ordered = indices[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    return ordered[starts], np.add.reduceat(values[order], starts, axis=0)


def _merge(chunks: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, summed values, gradients holding each row) of the chunks of one step, each chunk a
    gradient's sorted unique rows and values: the rows' values summed in the gradients' order."""
    if len(chunks) == 1:
        rows, values = chunks[0]
        return rows, values, np.ones(rows.size, np.int64)
    every = np.concatenate([r for r, _ in chunks])
    order = np.argsort(every, kind="stable")
    ordered = every[order]
    first = np.concatenate(([True], ordered[1:] != ordered[:-1]))
    starts = np.flatnonzero(first)
    total = np.add.reduceat(np.concatenate([v for _, v in chunks])[order], starts, axis=0)
    return ordered[starts], total, np.diff(np.append(starts, every.size))


SparseAccumulatorOp = defop(HANDLE, stateful=True, is_ref=True, differentiable=False)


@SparseAccumulatorOp.shape
def _accum_shape(op):
    return [(TensorShape([]), op.attrs["dtype"])]


@SparseAccumulatorOp.kernel("cpu")
def _sparse_accumulator(ctx):
    return _handle(ctx, lambda key: _SparseAccumulator(key, ctx.attrs["dtype"], ctx.attrs["shape"]))


SparseAccumulatorOp.cost(_no_cost)

ApplyOp = defop("SparseAccumulatorApplyGradient", stateful=True, differentiable=False)


@ApplyOp.shape
def _apply_shape(op):
    _check_handle(op, HANDLE)
    _scalar_input(op, 1, "local_step")
    acc, idx, vals = op.inputs[0], op.inputs[2], op.inputs[3]
    if not idx.dtype.is_integer or idx.shape.ndims not in (None, 1):
        raise InvalidArgumentError(
            f"SparseAccumulatorApplyGradient {op.name}: indices must be a vector of int32/int64, "
            f"got {idx.dtype.name} of shape {idx.shape}"
        )
    if vals.dtype != acc.dtype:
        raise InvalidArgumentError(
            f"SparseAccumulatorApplyGradient {op.name}: accumulator {acc.op.name} holds "
            f"{acc.dtype.name}, got {vals.dtype.name} values"
        )
    shape = acc.op.attrs["shape"]
    if shape.ndims is not None and vals.shape.ndims is not None:
        rows = TensorShape([None, *shape.dims[1:]])
        if not rows.is_compatible_with(vals.shape):
            raise InvalidArgumentError(
                f"SparseAccumulatorApplyGradient {op.name}: values of shape {vals.shape} do not "
                f"fit rows of accumulator {acc.op.name} shape {shape}"
            )
    return []


@ApplyOp.kernel("cpu")
def _apply(ctx, acc, local_step, indices, values):
    if isinstance(local_step, SimValue):  # shape-only: no step to compare, so it is current
        local_step = acc.global_step
    if not acc.apply_rows(int(local_step), indices, values, ctx.op.name):
        ctx.idle = True  # (dropped as stale: no add)


@ApplyOp.cost
def _apply_cost(op, ins, outs):
    from ..registry import nbytes, numel

    b = nbytes(ins[3], op.inputs[3].dtype) + nbytes(ins[2], op.inputs[2].dtype)
    return Cost(float(numel(ins[3])), 2.0 * b, float(b))


TakeOp = defop("SparseAccumulatorTakeGradient", stateful=True, differentiable=False)


@TakeOp.shape
def _take_shape(op):
    _check_handle(op, HANDLE)
    _scalar_input(op, 1, "num_required")
    acc = op.inputs[0]
    shape = acc.op.attrs["shape"]
    rows = TensorShape([None, *shape.dims[1:]]) if shape.ndims is not None else TensorShape(None)
    rank = TensorShape([shape.ndims]) if shape.ndims is not None else TensorShape([None])
    return [(TensorShape([None]), _dt.int64), (rows, acc.dtype), (rank, _dt.int64)]


@TakeOp.kernel("cpu", is_async=True)
def _take(ctx, step, inputs, done):
    acc, n = inputs
    if int(n) < 1:
        done(None, InvalidArgumentError(f"{ctx.op.name}: num_required must be >= 1, got {int(n)}"))
        return
    acc.take(int(n), done, step)


@TakeOp.cost
def _take_cost(op, ins, outs):
    """The mean of the accumulated rows: each value read and written once, the indices too."""
    from ..registry import nbytes, numel

    b = nbytes(outs[0], _dt.int64) + nbytes(outs[1], op.outputs[1].dtype)
    return Cost(float(numel(outs[1])), float(b), float(b))


class SparseConditionalAccumulator(ConditionalAccumulator):
    """``hb.SparseConditionalAccumulator``: averages IndexedSlices gradients row by row (see the
    module docstring). ``shape``: the dense shape of the variable the gradients are for. The
    global step, counts and cancel are the dense accumulator's."""

    _handle_op = HANDLE

    def __init__(
        self,
        dtype: Any,
        shape: Any = None,
        shared_name: str | None = None,
        name: str = "sparse_conditional_accumulator",
        reduction_type: str = "MEAN",
    ):
        super().__init__(dtype, shape, shared_name, name, reduction_type)

    def apply_grad(
        self,
        grad_indices: Any,
        grad_values: Any,
        grad_shape: Any = None,
        local_step: Any = 0,
        name: str | None = None,
    ) -> Operation:
        """Add the rows ``grad_indices`` of ``grad_values`` (dropped if ``local_step`` is
        behind the accumulator's global step). ``grad_shape`` is checked against the
        accumulator's shape when both are known."""
        g = self.accumulator_ref.graph
        if grad_shape is not None and not isinstance(grad_shape, Tensor):
            given = TensorShape(list(np.asarray(grad_shape).reshape(-1)))
            if not self.shape.is_compatible_with(given):
                raise InvalidArgumentError(
                    f"SparseConditionalAccumulator {self.name}: grad_shape {given} does not "
                    f"match the accumulator's shape {self.shape}"
                )
        with g.colocate_with(self.accumulator_ref.op):
            step = _as_int64(local_step, g)
        idx = convert_to_tensor(grad_indices, graph=g)
        vals = convert_to_tensor(grad_values, graph=g)
        return self._op(
            "SparseAccumulatorApplyGradient",
            [step, idx, vals],
            name or "SparseAccumulatorApplyGradient",
        )

    def apply_indexed_slices_grad(
        self, grad: Any, local_step: Any = 0, name: str | None = None
    ) -> Operation:
        """Add an IndexedSlices gradient."""
        return self.apply_grad(grad.indices, grad.values, None, local_step, name)

    def take_grad(self, num_required: Any, name: str | None = None) -> tuple:
        """(indices, values, shape) of the per-row average of at least ``num_required``
        gradients (waits for them without a thread)."""
        g = self.accumulator_ref.graph
        with g.colocate_with(self.accumulator_ref.op):
            if isinstance(num_required, (int, np.integer)):
                num_required = np.int32(num_required)
            n = convert_to_tensor(num_required, graph=g)
            outs = self._op("SparseAccumulatorTakeGradient", [n], name or "SparseAccumulatorTake")
        return tuple(outs)

    def take_indexed_slices_grad(
        self, num_required: Any, name: str | None = None, dense: Any = None
    ) -> Any:
        """The per-row average as an IndexedSlices (``dense``: what its ``dense_shape`` refers
        to, e.g. the variable; by default the taken shape)."""
        from ..gradients import IndexedSlices

        indices, values, shape = self.take_grad(num_required, name)
        return IndexedSlices(values, indices, dense if dense is not None else shape)
