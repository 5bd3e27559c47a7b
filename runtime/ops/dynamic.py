"""Data-dependent partitioning ops (TF1 semantics): dynamic_partition, dynamic_stitch, and a
range the length of a tensor's first dimension. They serve partitioned embedding lookups."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import Tensor, TensorShape
from ..registry import apply, apply_op, default_cost, defop
from .array import reshape_like
from .manip import outputs

DynamicPartition = defop("DynamicPartition", cost=default_cost)


def _expected_partition_shapes(op, in_shapes):
    """Shape-only simulation: each partition gets an equal share of the rows."""
    data, parts = in_shapes[0], in_shapes[1]
    n = op.attrs["num_partitions"]
    rows = int(np.prod(parts)) if parts else 1
    share = -(-rows // n)
    return [(share,) + tuple(data[len(parts) :]) for _ in range(n)]


DynamicPartition.expected_shapes = _expected_partition_shapes


@DynamicPartition.shape
def _dynamic_partition_shape(op):
    data, parts = op.inputs
    n = op.attrs["num_partitions"]
    if parts.dtype != _dt.int32:
        raise InvalidArgumentError(
            f"DynamicPartition: partitions must be int32, got {parts.dtype.name}"
        )
    if data.shape.dims is None or parts.shape.dims is None:
        return [(TensorShape(None), data.dtype)] * n
    k = len(parts.shape.dims)
    if not data.shape[:k].is_compatible_with(parts.shape):
        raise InvalidArgumentError(
            f"DynamicPartition: data shape {data.shape} must start with partitions shape "
            f"{parts.shape}"
        )
    return [(TensorShape([None, *data.shape.dims[k:]]), data.dtype)] * n


@DynamicPartition.kernel("cpu", "gpu")
def _dynamic_partition(ctx, data, parts):
    n = ctx.attrs["num_partitions"]
    if parts.size and (int(parts.min()) < 0 or int(parts.max()) >= n):
        bad = int(parts.min()) if int(parts.min()) < 0 else int(parts.max())
        raise InvalidArgumentError(
            f"DynamicPartition {ctx.op.name!r}: partition {bad} is not in [0, {n})"
        )
    return outputs(data[parts == i] for i in range(n))


@DynamicPartition.gradient
def _dynamic_partition_grad(op, *grads):
    data, parts = op.inputs
    positions = dynamic_partition(range_like(parts), parts, len(grads))
    stitched = dynamic_stitch(positions, list(grads))
    return [reshape_like(stitched, data) if _has_rest(data) else stitched, None]


def _has_rest(data: Tensor) -> bool:
    return data.shape.ndims is None or data.shape.ndims > 1


def dynamic_partition(
    data: Any, partitions: Any, num_partitions: int, name: str | None = None
) -> list[Tensor]:
    """``num_partitions`` tensors: output i holds the slices ``data[j]`` with partitions[j] == i,
    in their order. ``partitions`` is int32 with a shape that ``data``'s shape starts with; a
    partition outside [0, num_partitions) raises InvalidArgumentError when the op runs."""
    if int(num_partitions) < 1:
        raise InvalidArgumentError(
            f"dynamic_partition: num_partitions must be >= 1, got {num_partitions}"
        )
    op = apply_op(
        "DynamicPartition",
        [data, partitions],
        {"num_partitions": int(num_partitions)},
        name or "DynamicPartition",
    )
    return list(op.outputs)


# ---- DynamicStitch(indices..., data...) ------------------------------------------------------

DynamicStitch = defop("DynamicStitch", cost=default_cost)


@DynamicStitch.shape
def _dynamic_stitch_shape(op):
    n = op.attrs["N"]
    indices, data = op.inputs[:n], op.inputs[n:]
    dtype = data[0].dtype
    rest: TensorShape | None = None
    for i, (idx, d) in enumerate(zip(indices, data)):
        if idx.dtype != _dt.int32:
            raise InvalidArgumentError(
                f"DynamicStitch: indices[{i}] must be int32, got {idx.dtype.name}"
            )
        if d.dtype != dtype:
            raise InvalidArgumentError(
                f"DynamicStitch: data[{i}] is {d.dtype.name}, data[0] is {dtype.name}"
            )
        if idx.shape.dims is None or d.shape.dims is None:
            continue
        k = len(idx.shape.dims)
        if not d.shape[:k].is_compatible_with(idx.shape):
            raise InvalidArgumentError(
                f"DynamicStitch: data[{i}] shape {d.shape} must start with indices[{i}] shape "
                f"{idx.shape}"
            )
        r = d.shape[k:]
        rest = r if rest is None else rest.merge_with(r)
    if rest is None or rest.dims is None:
        return [(TensorShape(None), dtype)]
    return [(TensorShape([None, *rest.dims]), dtype)]


@DynamicStitch.kernel("cpu", "gpu")
def _dynamic_stitch(ctx, *ins):
    xp = ctx.xp
    n = ctx.attrs["N"]
    indices, data = ins[:n], ins[n:]
    rest = data[0].shape[indices[0].ndim :]
    size = max((int(i.max()) + 1 for i in indices if i.size), default=0)
    out = xp.zeros((size, *rest), dtype=data[0].dtype)
    for idx, d in zip(indices, data):  # later inputs win on repeated indices, as in TF
        out[idx.reshape(-1)] = d.reshape((-1, *rest))
    return out


@DynamicStitch.gradient
def _dynamic_stitch_grad(op, g):
    n = op.attrs["N"]
    from .manip import gather

    return [None] * n + [gather(g, idx) for idx in op.inputs[:n]]


def dynamic_stitch(indices: list, data: list, name: str | None = None) -> Tensor:
    """Merge ``data`` into one tensor: ``out[indices[i][j]] = data[i][j]`` (first dimension
    ``max(indices) + 1``)."""
    if len(indices) != len(data) or not indices:
        raise InvalidArgumentError(
            f"dynamic_stitch: needs as many indices as data tensors (at least one), got "
            f"{len(indices)} and {len(data)}"
        )
    return apply("DynamicStitch", [*indices, *data], {"N": len(indices)}, name or "DynamicStitch")


# ---- RangeLike(x) = [0, 1, ..., size(x) - 1] -----------------------------------------------------

RangeLike = defop("RangeLike", differentiable=False, cost=default_cost)


@RangeLike.shape
def _range_like_shape(op):
    return [(TensorShape([op.inputs[0].shape.num_elements()]), _dt.int32)]


@RangeLike.kernel("cpu", "gpu")
def _range_like(ctx, x):
    return ctx.xp.arange(x.size, dtype=np.int32)


def range_like(x: Any, name: str | None = None) -> Tensor:
    """The int32 positions 0..n-1 of a tensor of n elements."""
    return apply("RangeLike", [x], name=name or "RangeLike")


# ---- sharded tables and the partitioned lookup ---------------------------------------------------
