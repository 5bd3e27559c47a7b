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
        self.rows: np.ndarray | None = None  # sorted unique row indices
        self.hits: np.ndarray | None = None  # gradients that held each row

    def describe(self) -> str:
        return f"sparse, dtype {self.dtype.name}, shape {self.shape}"

    def apply_rows(self, local_step: int, indices: Any, values: Any, op_name: str) -> None:
        shape = self.shape
        if isinstance(indices, SimValue) or isinstance(values, SimValue):
            with self.lock:
                if local_step < self.global_step:
                    self.dropped += 1
                    return
                self.sum = (indices, values)
                self.count += 1
                served = self._serve()
            for done, avg in served:
                done(avg)
            return
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
        uniq, inv = np.unique(indices, return_inverse=True)
        summed = np.zeros((uniq.size, *values.shape[1:]), dtype=self.dtype.np)
        np.add.at(summed, inv, values.astype(self.dtype.np, copy=False))
        with self.lock:
            if local_step < self.global_step:
                self.dropped += 1  # stale: computed before the last take
                return
            if self.rows is None or isinstance(self.sum, tuple):
                self.rows, self.sum, self.hits = uniq, summed, np.ones(uniq.size, np.int64)
            else:
                if summed.shape[1:] != self.sum.shape[1:]:
                    raise InvalidArgumentError(
                        f"{op_name}: rows of shape {summed.shape[1:]} differ from the "
                        f"{self.sum.shape[1:]} already accumulated in {self.name}"
                    )
                both, where = np.unique(np.concatenate([self.rows, uniq]), return_inverse=True)
                total = np.zeros((both.size, *summed.shape[1:]), dtype=self.dtype.np)
                np.add.at(total, where, np.concatenate([self.sum, summed]))
                hits = np.zeros(both.size, np.int64)
                np.add.at(hits, where, np.concatenate([self.hits, np.ones(uniq.size, np.int64)]))
                self.rows, self.sum, self.hits = both, total, hits
            self.count += 1
            served = self._serve()
        for done, avg in served:
            done(avg)

    def _serve(self) -> list:
        if not self.takers or self.count < self.takers[0][0] or self.count == 0:
            return []
        _, done = self.takers.popleft()
        if isinstance(self.sum, tuple):  # shape-only: the last gradient's placeholders
            idx, vals = self.sum
            out = (idx, vals, SimValue((max(self.shape.ndims or 1, 1),), np.int64))
        else:
            scale = self.hits.reshape((-1,) + (1,) * (self.sum.ndim - 1)).astype(self.dtype.np)
            dense = [d if d is not None else -1 for d in (self.shape.dims or [])]
            out = (self.rows, (self.sum / scale).astype(self.dtype.np, copy=False))
            out = (*out, np.array(dense, np.int64))
        self.sum, self.rows, self.hits, self.count = None, None, None, 0
        self.global_step += 1
        return [(done, out)]


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
    acc.apply_rows(int(local_step), indices, values, ctx.op.name)


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
