"""The variable store of a graph: every variable ``get_variable`` made, by full name (the shards
of partitioned variables as ``<name>/part_<i>``), created or reused under TF1's rules (``reuse``
``None``/``False``, ``True``, ``AUTO_REUSE``), with its initial value from an initializer or a
constant. variable_scope.py keeps one store per graph and decides the names and the reuse."""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from . import dtypes as _dt
from . import initializers as _init
from .graph import GraphKeys, Tensor, TensorShape, as_shape, get_default_graph
from .partitioned import (
    PartitionedVariable,
    PartitionInfo,
    SaveSliceInfo,
    call_partitioner,
    iter_slices,
    slice_dim_and_count,
)
from .variables import Variable


class _ReuseMode(enum.Enum):
    AUTO_REUSE = 1


AUTO_REUSE = _ReuseMode.AUTO_REUSE


class _VariableStore:
    """All variables made by ``get_variable`` in one graph, by full name (shards of partitioned
    variables included, as ``<name>/part_<i>``), and the partitioned variables by name."""

    def __init__(self) -> None:
        self.vars: dict[str, Variable] = {}
        self.partitioned: dict[str, PartitionedVariable] = {}

    def get_variable(
        self,
        name: str,
        shape: Any = None,
        dtype: Any = _dt.float32,
        initializer: Any = None,
        regularizer: Callable | None = None,
        reuse: Any = None,
        trainable: bool | None = None,
        collections: Iterable[str] | None = None,
        validate_shape: bool = True,
        constraint: Callable | None = None,
        partitioner: Any = None,
        partition_info: Any = None,
        **unused: Any,
    ) -> Variable | PartitionedVariable:
        dtype = _dt.as_dtype(dtype if dtype is not None else _dt.float32)
        shape = as_shape(shape) if shape is not None else None
        kw = dict(
            initializer=initializer,
            regularizer=regularizer,
            reuse=reuse,
            trainable=trainable,
            collections=collections,
            validate_shape=validate_shape,
            constraint=constraint,
        )
        reusing = reuse is True or reuse is AUTO_REUSE
        if partitioner is not None and not _is_scalar(shape, initializer):
            return self._get_partitioned(name, shape, dtype, partitioner, **kw)
        if partitioner is None and reusing and name in self.partitioned:
            return self._get_partitioned(name, shape, dtype, None, **kw)
        if f"{name}/part_0" in self.vars and name not in self.vars:
            raise ValueError(
                f"No partitioner was provided, but a partitioned version of the variable was "
                f"found: {name}/part_0. Perhaps a variable of the same name was already created "
                "with partitioning?"
            )
        return self._get_single(name, shape, dtype, partition_info=partition_info, **kw)

    def _get_single(
        self,
        name: str,
        shape: TensorShape | None,
        dtype: _dt.DType,
        initializer: Any = None,
        regularizer: Callable | None = None,
        reuse: Any = None,
        trainable: bool | None = None,
        collections: Iterable[str] | None = None,
        validate_shape: bool = True,
        constraint: Callable | None = None,
        partition_info: Any = None,
    ) -> Variable:
        if name in self.vars:
            if reuse is not True and reuse is not AUTO_REUSE:
                raise ValueError(
                    f"Variable {name} already exists, disallowed. Did you mean to set "
                    "reuse=True or reuse=hb.AUTO_REUSE in VarScope?"
                )
            v = self.vars[name]
            if shape is not None and not shape.is_compatible_with(v.shape):
                raise ValueError(
                    f"Trying to share variable {name}, but specified shape {shape} and found "
                    f"shape {v.shape}."
                )
            if dtype != v.dtype:
                raise ValueError(
                    f"Trying to share variable {name}, but specified dtype {dtype.name} and "
                    f"found dtype {v.dtype.name}."
                )
            return v
        if reuse is True:
            raise ValueError(
                f"Variable {name} does not exist, or was not created with get_variable(). "
                "Did you mean to set reuse=hb.AUTO_REUSE in VarScope?"
            )
        g = get_default_graph()
        if name in g._by_name:
            raise ValueError(
                f"get_variable {name!r}: the graph already has an op named {name!r} (made "
                "outside get_variable); pick another name or scope"
            )
        init_value = _initial_value(name, shape, dtype, initializer, validate_shape, partition_info)
        v = Variable(
            initial_value=init_value,
            trainable=True if trainable is None else trainable,
            collections=collections,
            validate_shape=validate_shape,
            name=name + "/",  # absolute: not prefixed by the current name scope
            dtype=dtype,
            constraint=constraint,
        )
        self.vars[name] = v
        if regularizer is not None:
            with g.name_scope(name + "/Regularizer/"):
                loss = regularizer(v)
            if loss is not None:
                g.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)
        return v

    def _get_partitioned(
        self,
        name: str,
        shape: TensorShape | None,
        dtype: _dt.DType,
        partitioner: Any,
        initializer: Any = None,
        reuse: Any = None,
        **kw: Any,
    ) -> PartitionedVariable:
        """TF1's ``_get_partitioned_variable``: shards ``name/part_i`` made (or found) through
        ``_get_single``, each initialized with its ``PartitionInfo``."""
        if name in self.vars:
            raise ValueError(
                f"A partitioner was provided, but an unpartitioned version of the variable was "
                f"found: {name}. Perhaps a variable of the same name was already created without "
                "partitioning?"
            )
        shape, initializer = _partitioned_shape(name, shape, dtype, initializer)
        existing = self.partitioned.get(name)
        if existing is not None:
            if reuse is not True and reuse is not AUTO_REUSE:
                raise ValueError(
                    f"Partitioned variable with name {name} already exists. Did you mean to set "
                    "reuse=True or reuse=hb.AUTO_REUSE in VarScope?"
                )
            if not shape.is_compatible_with(existing.shape):
                raise ValueError(
                    f"Trying to reuse partitioned variable {name}, but specified shape {shape} "
                    f"and found shape {existing.shape}."
                )
            if dtype != existing.dtype:
                raise ValueError(
                    f"Trying to reuse partitioned variable {name}, but specified dtype "
                    f"{dtype.name} and found dtype {existing.dtype.name}."
                )
            if partitioner is not None:
                parts = call_partitioner(partitioner, name, existing.shape, dtype)
                if parts != existing._get_partitions():
                    raise ValueError(
                        f"Trying to reuse partitioned variable {name}, but specified partitions "
                        f"{parts} and found partitions {existing._get_partitions()}."
                    )
            return existing
        if reuse is True:
            raise ValueError(
                f"PartitionedVariable {name} does not exist, or was not created with "
                "get_variable(). Did you mean to set reuse=False or reuse=hb.AUTO_REUSE in "
                "VarScope?"
            )
        parts = call_partitioner(partitioner, name, shape, dtype)
        axis, n = slice_dim_and_count(parts)
        if f"{name}/part_0" in self.vars:
            if f"{name}/part_{n - 1}" not in self.vars or f"{name}/part_{n}" in self.vars:
                raise ValueError(
                    f"Partitioner returned a different partitioning than what was already "
                    f"found: it returned {n} shards for {name}, but the existing shards "
                    f"{name}/part_* are not {n}"
                )
        g = get_default_graph()
        full = shape.as_list()
        shards = []
        for i, (offset, shard_shape) in enumerate(iter_slices(full, n, axis)):
            info = PartitionInfo(full, offset)
            shard = f"{name}/part_{i}"
            init, init_shape = initializer, as_shape(shard_shape)
            if isinstance(initializer, Tensor):
                with g.name_scope(shard + "/PartitionedInitializer/"), g.control_dependencies(None):
                    init = _slice(initializer, offset, shard_shape)
                init_shape = None
            elif isinstance(initializer, np.ndarray):
                init, init_shape = initializer[info.slices(shard_shape)], None
            v = self._get_single(
                shard, init_shape, dtype, init, reuse=reuse, partition_info=info, **kw
            )
            v._save_slice_info = SaveSliceInfo(name, full, offset, shard_shape)
            shards.append(v)
        pv = PartitionedVariable(name, shape, dtype, shards, parts)
        self.partitioned[name] = pv
        return pv


def _is_scalar(shape: TensorShape | None, initializer: Any) -> bool:
    """Scalars are never partitioned (TF1), whether the shape is given or the value's."""
    if shape is not None:
        return shape.ndims == 0
    if isinstance(initializer, Tensor):
        return initializer.shape.ndims == 0
    if initializer is not None and not callable(initializer) and not isinstance(initializer, str):
        return np.ndim(initializer) == 0
    return False


def _partitioned_shape(
    name: str, shape: TensorShape | None, dtype: _dt.DType, initializer: Any
) -> tuple[TensorShape, Any]:
    """The full shape of a partitioned variable (from ``shape`` or a constant initial value) and
    the initializer with a constant made a numpy array of ``dtype``."""
    if isinstance(initializer, Tensor) or (
        initializer is not None and not callable(initializer) and not _initializer_name(initializer)
    ):
        if isinstance(initializer, Tensor):
            if initializer.dtype != dtype:
                raise ValueError(
                    f"get_variable {name!r}: initializer is {initializer.dtype.name}, but the "
                    f"variable's dtype is {dtype.name}"
                )
            value_shape = initializer.shape
        else:
            initializer = np.asarray(initializer, dtype=dtype.np)
            value_shape = as_shape(initializer.shape)
        if shape is not None and not shape.is_compatible_with(value_shape):
            raise ValueError(
                f"get_variable {name!r}: shape {shape} and the initial value's shape "
                f"{value_shape} differ"
            )
        shape = value_shape if shape is None else shape.merge_with(value_shape)
    if shape is None:
        shape = TensorShape(None)
    return shape, initializer


def _slice(value: Tensor, begin: list[int], size: list[int]) -> Tensor:
    from .ops.manip import slice_

    return slice_(value, begin, size)


def _initializer_name(x: Any) -> bool:
    """Whether ``x`` names an initializer ("glorot_uniform", "zeros"): hetbed takes those; any
    other string is a value, as TF1 takes it (a string variable)."""
    return isinstance(x, str) and x.lower() in _init._BY_NAME


def constant_initial_dtype(name: str, dtype: Any, initializer: Any) -> _dt.DType | None:
    """TF1's rule for a variable made from a value (a tensor, array, list or Python scalar):
    its dtype is the value's (Python ints int32, floats float32, numpy's own), and an explicit
    ``dtype`` must equal it. Returns ``dtype`` unchanged (None when not given) for an
    initializer that is not a value."""
    if initializer is None or _initializer_name(initializer):
        return dtype
    if isinstance(initializer, (Tensor, Variable)):
        init_dtype = initializer.dtype
    elif callable(initializer):
        return dtype
    else:
        from .ops.array import value_dtype

        try:
            init_dtype = value_dtype(initializer)
        except (TypeError, ValueError) as e:
            raise TypeError(
                f"get_variable {name!r}: initializer {initializer!r} is neither an initializer "
                f"nor a value: {e}"
            ) from None
    if dtype is not None and _dt.as_dtype(dtype) != init_dtype:
        raise ValueError(
            f"get_variable {name!r}: initializer type '{init_dtype.name}' and explicit dtype "
            f"'{_dt.as_dtype(dtype).name}' don't match"
        )
    return init_dtype


def _initial_value(
    name: str,
    shape: Any,
    dtype: _dt.DType,
    initializer: Any,
    validate: bool,
    partition_info: Any = None,
):
    """A callable giving the initial value (built in the variable's Initializer scope).

    A shard's ``partition_info`` reaches initializers that accept a ``partition_info`` argument
    (all of hetbed's, and TF1-style ones); other callables get ``(shape, dtype=...)`` only.
    """
    if isinstance(initializer, Tensor) or (
        initializer is not None and not callable(initializer) and not _initializer_name(initializer)
    ):
        if shape is not None:
            raise ValueError(
                f"get_variable {name!r}: if initializer is a constant, do not specify shape "
                f"(got shape {shape})"
            )
        if isinstance(initializer, Tensor):
            if initializer.dtype != dtype:
                raise ValueError(
                    f"get_variable {name!r}: initializer is {initializer.dtype.name}, but the "
                    f"variable's dtype is {dtype.name}"
                )
            return initializer
        return np.asarray(initializer, dtype=dtype.np)
    init = _init.get(initializer)
    if init is None:
        if dtype.is_floating:
            init = _init.GlorotUniform()
        elif dtype.is_integer or dtype.is_bool:
            init = _init.Zeros()
        else:  # pragma: no cover - every hetbed dtype is one of the above
            raise ValueError(f"an initializer for variable {name} of {dtype.name} is required")
    if shape is None or (validate and not shape.is_fully_defined()):
        raise ValueError(
            f"Shape of a new variable ({name}) must be fully defined, but instead was {shape}."
        )
    if partition_info is not None and _takes_partition_info(init):
        return lambda: init(shape, dtype=dtype, partition_info=partition_info)
    return lambda: init(shape, dtype=dtype)


def _takes_partition_info(fn: Any) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
        return False
    return any(p.name == "partition_info" or p.kind is p.VAR_KEYWORD for p in params)
