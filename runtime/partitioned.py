"""Partitioned (sharded) variables, as TF1 makes them: one large variable kept as N shards.

``hb.get_variable(name, shape, partitioner=hb.fixed_size_partitioner(4))`` returns a
``PartitionedVariable``: shard Variables ``<name>/part_0`` ... ``<name>/part_3`` cut along one axis
(the first ``size % n`` shards one slice larger, as TF1 cuts them). Each shard is an ordinary
Variable, so ``replica_device_setter`` spreads the shards over the PS tasks (round robin or greedy
by bytes), the shards are in GLOBAL/TRAINABLE_VARIABLES as separate variables (optimizers and Saver
see N variables), and ``hb.nn.embedding_lookup(pv, ids)`` gathers each shard's rows where the
shard lives, giving each shard a sparse (IndexedSlices) gradient.

A partitioner is a callable ``partitioner(shape=TensorShape, dtype=DType) -> list of ints`` (one
count per dimension, at most one above 1). ``fixed_size_partitioner``,
``variable_axis_size_partitioner`` and ``min_max_variable_partitioner`` follow TF1's formulas.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from . import dtypes as _dt
from .graph import Tensor, TensorShape, as_shape

Partitioner = Callable[..., Sequence[int]]


# ---- partitioners -----------------------------------------------------------------------------


def _check_axis(fn: str, axis: int, shape: TensorShape) -> int:
    if shape.ndims is None or not 0 <= axis < shape.ndims:
        raise ValueError(f"{fn}: cannot partition along axis {axis} of a variable of shape {shape}")
    return axis


def _element_size(dtype: Any, bytes_per_string_element: int) -> int:
    dt = _dt.as_dtype(dtype)
    return bytes_per_string_element if dt.name == "string" else dt.size


def fixed_size_partitioner(num_shards: int, axis: int = 0) -> Partitioner:
    """A partitioner cutting ``axis`` into ``min(num_shards, shape[axis])`` shards."""
    if int(num_shards) < 1:
        raise ValueError(f"fixed_size_partitioner: num_shards must be >= 1, got {num_shards}")

    def _partitioner(shape: Any, **unused: Any) -> list[int]:
        shape = as_shape(shape)
        _check_axis("fixed_size_partitioner", axis, shape)
        parts = [1] * shape.ndims  # type: ignore[operator]
        parts[axis] = min(int(num_shards), int(shape[axis]))
        return parts

    return _partitioner


def variable_axis_size_partitioner(
    max_shard_bytes: int,
    axis: int = 0,
    bytes_per_string_element: int = 16,
    max_shards: int | None = None,
) -> Partitioner:
    """A partitioner keeping each shard under ``max_shard_bytes`` by cutting ``axis`` only.

    Shards = ``ceil(shape[axis] / max(1, floor(max_shard_bytes / bytes_per_slice)))``, where a
    slice is one index of ``axis``; capped at ``max_shards``. When one slice is already larger than
    ``max_shard_bytes`` every slice becomes a shard. Raises ValueError for non-positive sizes.
    """
    if max_shard_bytes < 1 or bytes_per_string_element < 1:
        raise ValueError(
            "variable_axis_size_partitioner: max_shard_bytes and bytes_per_string_element must be "
            f"positive, got {max_shard_bytes} and {bytes_per_string_element}"
        )
    if max_shards is not None and max_shards < 1:
        raise ValueError(
            f"variable_axis_size_partitioner: max_shards must be positive, got {max_shards}"
        )

    def _partitioner(shape: Any, dtype: Any, **unused: Any) -> list[int]:
        shape = as_shape(shape)
        if not shape.is_fully_defined():
            raise ValueError(f"variable_axis_size_partitioner: shape {shape} is not fully defined")
        _check_axis("variable_axis_size_partitioner", axis, shape)
        rows = int(shape[axis])
        bytes_per_slice = (
            shape.num_elements()
            / rows
            * _element_size(  # type: ignore[operator]
                dtype, bytes_per_string_element
            )
        )
        slices_per_shard = max(1, math.floor(max_shard_bytes / bytes_per_slice))
        shards = int(math.ceil(rows / slices_per_shard))
        if max_shards:
            shards = min(int(max_shards), shards)
        parts = [1] * shape.ndims  # type: ignore[operator]
        parts[axis] = shards
        return parts

    return _partitioner


def min_max_variable_partitioner(
    max_partitions: int = 1,
    axis: int = 0,
    min_slice_size: int = 256 << 10,
    bytes_per_string_element: int = 16,
) -> Partitioner:
    """A partitioner giving each shard at least ``min_slice_size`` bytes, at most
    ``max_partitions`` shards: ``max(1, min(shape[axis], max_partitions, ceil(bytes /
    min_slice_size)))`` along ``axis``."""

    def _partitioner(shape: Any, dtype: Any, **unused: Any) -> list[int]:
        shape = as_shape(shape)
        if not shape.is_fully_defined():
            raise ValueError(f"min_max_variable_partitioner: shape {shape} is not fully defined")
        _check_axis("min_max_variable_partitioner", axis, shape)
        total = shape.num_elements() * _element_size(dtype, bytes_per_string_element)  # type: ignore[operator]
        parts = [1] * shape.ndims  # type: ignore[operator]
        parts[axis] = max(
            1, min(int(shape[axis]), int(max_partitions), int(math.ceil(total / min_slice_size)))
        )
        return parts

    return _partitioner


# ---- slicing ----------------------------------------------------------------------------------


def call_partitioner(partitioner: Partitioner, name: str, shape: TensorShape, dtype: Any) -> list:
    """The partitioner's per-dimension counts for ``shape``, validated.

    Raises ValueError (naming the variable) when the shape is not fully defined or scalar, or the
    result is not one positive int per dimension with at most one above 1 and none above the
    dimension's size.
    """
    if not shape.is_fully_defined():
        raise ValueError(
            f"Shape of a new partitioned variable ({name}) must be fully defined, but instead "
            f"was {shape}."
        )
    if shape.ndims < 1:  # type: ignore[operator]
        raise ValueError(f"A partitioned variable ({name}) must have rank at least 1: {shape}")
    parts = partitioner(shape=shape, dtype=_dt.as_dtype(dtype))
    if not isinstance(parts, Sequence) or isinstance(parts, str):
        raise ValueError(f"partitioner for {name} must return a sequence, got {parts!r}")
    parts = [int(p) for p in parts]
    if len(parts) != shape.ndims:
        raise ValueError(
            f"partitioner for {name} returned {parts}, which does not match the variable's rank "
            f"(shape {shape})"
        )
    for d, (n, size) in enumerate(zip(parts, shape.dims)):  # type: ignore[arg-type]
        if n < 1 or n > size:
            raise ValueError(
                f"partitioner for {name} asks for {n} slices of dimension {d} (size {size}), "
                f"shape {shape}: need 1 <= slices <= size"
            )
    if sum(n > 1 for n in parts) > 1:
        raise ValueError(
            f"partitioner for {name} returned {parts}: a variable can only be sliced along one "
            "dimension"
        )
    return parts


def slice_dim_and_count(partitions: Sequence[int]) -> tuple[int, int]:
    """(the sliced dimension, the number of shards); (0, 1) when nothing is sliced."""
    for d, n in enumerate(partitions):
        if n > 1:
            return d, int(n)
    return 0, 1


def iter_slices(
    full_shape: Sequence[int], num_slices: int, slice_dim: int
) -> Iterator[tuple[list[int], list[int]]]:
    """(offset, shape) of each shard: the first ``size % num_slices`` shards one slice larger."""
    full = [int(d) for d in full_shape]
    base, extra = divmod(full[slice_dim], num_slices)
    offset = [0] * len(full)
    for i in range(num_slices):
        shape = list(full)
        shape[slice_dim] = base + (1 if i < extra else 0)
        yield list(offset), shape
        offset[slice_dim] += shape[slice_dim]


class PartitionInfo:
    """Where a shard sits in the full variable; passed to initializers as ``partition_info``.

    ``full_shape`` is the whole variable's shape, ``var_offset`` the shard's first index in each
    dimension (TF1's ``_PartitionInfo``).
    """

    def __init__(self, full_shape: Sequence[int], var_offset: Sequence[int]):
        full, off = [int(d) for d in full_shape], [int(o) for o in var_offset]
        if len(full) != len(off):
            raise ValueError(
                f"PartitionInfo: full_shape {full} and var_offset {off} differ in length"
            )
        if any(o < 0 or (o >= d and d > 0) for o, d in zip(off, full)):
            raise ValueError(f"PartitionInfo: var_offset {off} is outside full_shape {full}")
        self._full_shape, self._var_offset = full, off

    @property
    def full_shape(self) -> list[int]:
        return list(self._full_shape)

    @property
    def var_offset(self) -> list[int]:
        return list(self._var_offset)

    def single_slice_dim(self, shape: Sequence[int]) -> int | None:
        """The one dimension in which a shard of ``shape`` is smaller than the full variable."""
        dims = [d for d, (s, f) in enumerate(zip(shape, self._full_shape)) if int(s) != f]
        if len(dims) > 1:
            raise ValueError(f"shard shape {list(shape)} differs from {self._full_shape} twice")
        return dims[0] if dims else None

    def single_offset(self, shape: Sequence[int]) -> int:
        """The shard's offset in its sliced dimension (0 when it is not sliced)."""
        d = self.single_slice_dim(shape)
        return 0 if d is None else self._var_offset[d]

    def slices(self, shape: Sequence[int]) -> tuple[slice, ...]:
        """Python slices selecting a shard of ``shape`` from an array of the full shape."""
        return tuple(slice(o, o + int(s)) for o, s in zip(self._var_offset, shape))

    def __repr__(self) -> str:
        return f"PartitionInfo(full_shape={self._full_shape}, var_offset={self._var_offset})"


class SaveSliceInfo:
    """What part of the full variable ``full_name`` a shard holds (TF1's Variable.SaveSliceInfo).

    hetbed's Saver saves each shard under its own name (``<name>/part_i``); this record lets a
    reader reassemble the full tensor.
    """

    def __init__(
        self, full_name: str, full_shape: Sequence[int], var_offset: Sequence[int], var_shape
    ):
        self.full_name = full_name
        self.full_shape = [int(d) for d in full_shape]
        self.var_offset = [int(o) for o in var_offset]
        self.var_shape = [int(d) for d in var_shape]

    @property
    def spec(self) -> str:
        """TF1's slice spec string, e.g. ``"10 3 4,3:0,3"``."""
        full = " ".join(str(d) for d in self.full_shape)
        sl = ":".join(f"{o},{s}" for o, s in zip(self.var_offset, self.var_shape))
        return f"{full} {sl}"


# ---- PartitionedVariable ----------------------------------------------------------------------


class PartitionedVariable:
    """A variable kept as shards along one axis; made by ``get_variable`` with a partitioner.

    Iterating (and ``len``) gives the shard Variables in order. Used where a tensor is expected it
    reads as the concatenation of its shards along the partition axis (``as_tensor()``), so
    ``hb.matmul(x, pv)`` works (the whole variable then travels to the op; use
    ``hb.nn.embedding_lookup(pv, ids)`` to move only the rows needed).

    Differences from TF1: fetching ``sess.run(pv)`` works (TF1 refuses) and, like every use as a
    tensor, adds a concat op; build ``t = pv.as_tensor()`` once when fetching repeatedly or when the
    graph will be finalized.
    """

    def __init__(
        self,
        name: str,
        shape: Any,
        dtype: Any,
        variable_list: Sequence[Any],
        partitions: Sequence[int],
    ):
        from .variables import Variable

        shape = as_shape(shape)
        dtype = _dt.as_dtype(dtype)
        shards = list(variable_list)
        if not shards:
            raise ValueError(f"PartitionedVariable {name}: variable_list is empty")
        if not all(isinstance(v, Variable) for v in shards):
            raise TypeError(f"PartitionedVariable {name}: variable_list must hold hb.Variables")
        parts = [int(p) for p in partitions]
        if not shape.is_fully_defined() or len(parts) != shape.ndims:
            raise ValueError(
                f"PartitionedVariable {name}: partitions {parts} do not fit shape {shape}"
            )
        if math.prod(parts) != len(shards):
            raise ValueError(
                f"PartitionedVariable {name}: partitions {parts} make {math.prod(parts)} shards, "
                f"got {len(shards)} variables"
            )
        for v in shards:
            if v.dtype != dtype:
                raise ValueError(
                    f"PartitionedVariable {name}: shard {v.op.name} is {v.dtype.name}, "
                    f"expected {dtype.name}"
                )
        self._name, self._shape, self._dtype = name, shape, dtype
        self._variable_list, self._partitions = shards, parts
        axis = self._partition_axes()[0]
        expected = [s for _, s in iter_slices(shape.as_list(), len(shards), axis)]
        got = [v.shape.as_list() if v.shape.ndims is not None else None for v in shards]
        if got != expected:
            raise ValueError(
                f"PartitionedVariable {name}: shard shapes {got} do not cut {shape} into "
                f"{len(shards)} along axis {axis} (expected {expected})"
            )

    # ---- the TF1 surface ---------------------------------------------------------------------
    def __iter__(self) -> Iterator[Any]:
        return iter(self._variable_list)

    def __len__(self) -> int:
        return len(self._variable_list)

    @property
    def name(self) -> str:
        return self._name

    @property
    def dtype(self) -> _dt.DType:
        return self._dtype

    @property
    def shape(self) -> TensorShape:
        return self._shape

    def get_shape(self) -> TensorShape:
        return self._shape

    @property
    def graph(self) -> Any:
        return self._variable_list[0].graph

    def get_variable_list(self) -> list[Any]:
        """The shard Variables, in order."""
        return list(self._variable_list)

    _get_variable_list = get_variable_list

    def _get_partitions(self) -> list[int]:
        return list(self._partitions)

    def _partition_axes(self) -> list[int]:
        axes = [d for d, n in enumerate(self._partitions) if n > 1]
        return axes or [0]

    @property
    def partition_axis(self) -> int:
        """The dimension the shards are cut along (0 when there is a single shard)."""
        return self._partition_axes()[0]

    def as_tensor(self) -> Tensor:
        """The full value: the shards' reads concatenated along the partition axis.

        Each call adds a concat op (outside any control-dependency scope, in the current device
        scope), as TF1 does; with a single shard it is that shard's read, with no new op.
        """
        if len(self._variable_list) == 1:
            return self._variable_list[0].value()
        from .ops.manip import concat

        g = self.graph
        with g.control_dependencies(None), g.name_scope(self._name + "/ConcatPartitions/"):
            return concat([v.value() for v in self._variable_list], self.partition_axis)

    def _as_graph_element(self) -> Tensor:
        return self.as_tensor()

    def value(self) -> Tensor:
        return self.as_tensor()

    def read_value(self) -> Tensor:
        return self.as_tensor()

    def _apply(self, fn_name: str, value: Any, name: str | None) -> list:
        from .ops.manip import split
        from .registry import convert_to_tensor

        value = convert_to_tensor(value, dtype=self._dtype)
        if not value.shape.is_compatible_with(self._shape):
            raise ValueError(
                f"PartitionedVariable {self._name}.{fn_name}: value {value.name} has shape "
                f"{value.shape}, the variable {self._shape}"
            )
        axis = self.partition_axis
        sizes = [int(v.shape[axis]) for v in self._variable_list]
        pieces = split(value, sizes, axis) if len(sizes) > 1 else [value]
        return [getattr(v, fn_name)(p, name=name) for v, p in zip(self._variable_list, pieces)]

    def assign(
        self, value: Any, use_locking: bool = False, name: str | None = None, read_value=True
    ) -> list:
        """Assign the pieces of ``value`` (the full shape) to the shards: one op per shard."""
        return self._apply("assign", value, name)

    def assign_add(
        self, value: Any, use_locking: bool = False, name: str | None = None, read_value=True
    ) -> list:
        return self._apply("assign_add", value, name)

    def assign_sub(
        self, value: Any, use_locking: bool = False, name: str | None = None, read_value=True
    ) -> list:
        return self._apply("assign_sub", value, name)

    def eval(self, session: Any = None) -> Any:
        return self.as_tensor().eval(session=session)

    def __repr__(self) -> str:
        return (
            f"<hb.PartitionedVariable '{self._name}' shape={self._shape} "
            f"dtype={self._dtype.name} partitions={self._partitions}>"
        )

    __hash__ = object.__hash__  # identity, as a C slot

    def __eq__(self, other: object) -> bool:
        return self is other


__all__ = [
    "PartitionInfo",
    "PartitionedVariable",
    "fixed_size_partitioner",
    "min_max_variable_partitioner",
    "variable_axis_size_partitioner",
]


def expand_partitioned(var_list: Any) -> list:
    """``var_list`` with every PartitionedVariable replaced by its shards (TF1 accepts
    partitioned variables wherever a list of variables is expected)."""
    out: list = []
    for v in var_list:
        if isinstance(v, PartitionedVariable):
            out.extend(v)
        else:
            out.append(v)
    return out
