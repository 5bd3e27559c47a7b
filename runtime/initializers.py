"""Initializers (``hb.zeros_initializer()``, ``hb.glorot_uniform_initializer()``, ...), as in TF1.

An initializer is a callable ``init(shape, dtype=None, partition_info=None) -> Tensor`` that adds
the ops computing an initial value to the default graph; ``dtype=None`` means the initializer's own
dtype. Random initializers build random ops carrying the initializer's ``seed`` (combined with the
graph seed like every random op), so a seeded graph gives the same initial values every run.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import dtypes as _dt
from .graph import Tensor, as_shape


def _shape_list(shape: Any) -> list[int]:
    s = as_shape(shape)
    if not s.is_fully_defined():
        raise ValueError(f"an initializer needs a fully defined shape, got {s}")
    return [int(d) for d in s.dims]  # type: ignore[union-attr]


class Initializer:
    """Base class: subclasses implement ``__call__`` and ``get_config``."""

    dtype: _dt.DType = _dt.float32

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} needs a __call__")

    def get_config(self) -> dict:
        return {}

    @classmethod
    def from_config(cls, config: dict) -> Initializer:
        return cls(**config)

    def _dtype(self, dtype: Any) -> _dt.DType:
        return _dt.as_dtype(dtype) if dtype is not None else self.dtype

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"


class Zeros(Initializer):
    """All zeros."""

    def __init__(self, dtype: Any = _dt.float32):
        self.dtype = _dt.as_dtype(dtype)

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Tensor:
        from .ops.manip import zeros

        return zeros(_shape_list(shape), dtype=self._dtype(dtype))

    def get_config(self) -> dict:
        return {"dtype": self.dtype.name}


class Ones(Initializer):
    """All ones."""

    def __init__(self, dtype: Any = _dt.float32):
        self.dtype = _dt.as_dtype(dtype)

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Tensor:
        from .ops.manip import ones

        return ones(_shape_list(shape), dtype=self._dtype(dtype))

    def get_config(self) -> dict:
        return {"dtype": self.dtype.name}


class Constant(Initializer):
    """A scalar filled everywhere, or a value (list/array) whose size matches the shape.

    For a shard of a partitioned variable (``partition_info`` given), a value of the full
    variable's size is reshaped to the full shape and the shard's slice taken (TF1 raises there);
    a value of the shard's own size fills each shard as it would an unpartitioned variable.
    """

    def __init__(self, value: Any = 0, dtype: Any = _dt.float32, verify_shape: bool = False):
        if isinstance(value, Tensor):
            raise TypeError("constant_initializer takes a Python or numpy value, not a tensor")
        self.value = value
        self.dtype = _dt.as_dtype(dtype)
        self.verify_shape = verify_shape

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Tensor:
        dims = _shape_list(shape)
        dt = self._dtype(dtype)
        arr = np.asarray(self.value, dtype=dt.np)
        if arr.size == 1 and not self.verify_shape:
            from .ops.manip import fill

            return fill(dims, arr.reshape(()))
        full = getattr(partition_info, "full_shape", None)
        if full is not None and arr.size != int(np.prod(dims)) and arr.size == int(np.prod(full)):
            offset = partition_info.var_offset
            arr = arr.reshape(full)[tuple(slice(o, o + d) for o, d in zip(offset, dims))]
        if self.verify_shape and list(arr.shape) != dims:
            raise ValueError(f"constant_initializer: value has shape {arr.shape}, expected {dims}")
        if arr.size != int(np.prod(dims)):
            raise ValueError(
                f"constant_initializer: value has {arr.size} elements, shape {dims} needs "
                f"{int(np.prod(dims))}"
            )
        from .ops.array import constant

        return constant(arr.reshape(dims), dtype=dt)

    def get_config(self) -> dict:
        value = self.value.tolist() if isinstance(self.value, np.ndarray) else self.value
        return {"value": value, "dtype": self.dtype.name, "verify_shape": self.verify_shape}


class RandomNormal(Initializer):
    """Samples of N(mean, stddev²)."""

    def __init__(
        self,
        mean: float = 0.0,
        stddev: float = 1.0,
        seed: int | None = None,
        dtype: Any = _dt.float32,
    ):
        self.mean, self.stddev, self.seed = mean, stddev, seed
        self.dtype = _dt.as_dtype(dtype)

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Tensor:
        from .ops.random import random_normal

        return random_normal(
            _shape_list(shape), self.mean, self.stddev, dtype=self._dtype(dtype), seed=self.seed
        )

    def get_config(self) -> dict:
        return {
            "mean": self.mean,
            "stddev": self.stddev,
            "seed": self.seed,
            "dtype": self.dtype.name,
        }


class TruncatedNormal(RandomNormal):
    """Samples of N(mean, stddev²) redrawn until within two standard deviations of the mean."""

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Tensor:
        from .ops.random import truncated_normal

        return truncated_normal(
            _shape_list(shape), self.mean, self.stddev, dtype=self._dtype(dtype), seed=self.seed
        )


class RandomUniform(Initializer):
    """Samples of U[minval, maxval) (``maxval=None`` means 1 for floats)."""

    def __init__(
        self,
        minval: float = 0.0,
        maxval: float | None = None,
        seed: int | None = None,
        dtype: Any = _dt.float32,
    ):
        self.minval, self.maxval, self.seed = minval, maxval, seed
        self.dtype = _dt.as_dtype(dtype)

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Tensor:
        from .ops.random import random_uniform

        return random_uniform(
            _shape_list(shape), self.minval, self.maxval, dtype=self._dtype(dtype), seed=self.seed
        )

    def get_config(self) -> dict:
        return {
            "minval": self.minval,
            "maxval": self.maxval,
            "seed": self.seed,
            "dtype": self.dtype.name,
        }


def compute_fans(shape: Any) -> tuple[int, int]:
    """TF1's (fan_in, fan_out): a kernel ``[..., in, out]`` counts its receptive field in both."""
    dims = _shape_list(shape)
    if len(dims) < 1:
        return 1, 1
    if len(dims) == 1:
        return dims[0], dims[0]
    if len(dims) == 2:
        return dims[0], dims[1]
    receptive = int(np.prod(dims[:-2]))
    return dims[-2] * receptive, dims[-1] * receptive


# stddev of a unit normal truncated to [-2, 2], used to keep the variance at ``scale / n``
_TRUNCATED_STDDEV = 0.87962566103423978


class VarianceScaling(Initializer):
    """Samples with variance ``scale / n``, n = fan_in, fan_out or their mean (``mode``).

    For a shard of a partitioned variable (``partition_info`` given) the fans are those of the
    full shape, so every shard has the unpartitioned variable's scale (TF1).

    ``distribution`` is "truncated_normal" (alias "normal", as in TF1), "untruncated_normal" or
    "uniform" (limit ``sqrt(3 * scale / n)``). Raises ValueError for any other mode, distribution
    or a non-positive scale.
    """

    def __init__(
        self,
        scale: float = 1.0,
        mode: str = "fan_in",
        distribution: str = "truncated_normal",
        seed: int | None = None,
        dtype: Any = _dt.float32,
    ):
        if scale <= 0.0:
            raise ValueError(f"variance_scaling: scale must be positive, got {scale}")
        if mode not in ("fan_in", "fan_out", "fan_avg"):
            raise ValueError(f"variance_scaling: mode must be fan_in, fan_out or fan_avg: {mode!r}")
        distribution = distribution.lower()
        if distribution not in ("normal", "uniform", "truncated_normal", "untruncated_normal"):
            raise ValueError(
                "variance_scaling: distribution must be truncated_normal, untruncated_normal or "
                f"uniform, got {distribution!r}"
            )
        self.scale, self.mode, self.distribution, self.seed = scale, mode, distribution, seed
        self.dtype = _dt.as_dtype(dtype)

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Tensor:
        from .ops.random import random_normal, random_uniform, truncated_normal

        dims = _shape_list(shape)
        dt = self._dtype(dtype)
        if not dt.is_floating:
            raise TypeError(f"variance_scaling needs a floating dtype, got {dt.name}")
        # a shard of a partitioned variable scales by the whole variable's fans, as in TF1
        full = getattr(partition_info, "full_shape", None)
        fan_in, fan_out = compute_fans(dims if full is None else full)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[self.mode]
        variance = self.scale / max(1.0, n)
        if self.distribution in ("normal", "truncated_normal"):
            std = math.sqrt(variance) / _TRUNCATED_STDDEV
            return truncated_normal(dims, 0.0, std, dtype=dt, seed=self.seed)
        if self.distribution == "untruncated_normal":
            return random_normal(dims, 0.0, math.sqrt(variance), dtype=dt, seed=self.seed)
        limit = math.sqrt(3.0 * variance)
        return random_uniform(dims, -limit, limit, dtype=dt, seed=self.seed)

    def get_config(self) -> dict:
        return {
            "scale": self.scale,
            "mode": self.mode,
            "distribution": self.distribution,
            "seed": self.seed,
            "dtype": self.dtype.name,
        }


class GlorotUniform(VarianceScaling):
    """Xavier uniform: U[-limit, limit], limit = sqrt(6 / (fan_in + fan_out))."""

    def __init__(self, seed: int | None = None, dtype: Any = _dt.float32):
        super().__init__(1.0, "fan_avg", "uniform", seed, dtype)

    def get_config(self) -> dict:
        return {"seed": self.seed, "dtype": self.dtype.name}


class GlorotNormal(VarianceScaling):
    """Xavier normal: truncated normal with stddev sqrt(2 / (fan_in + fan_out))."""

    def __init__(self, seed: int | None = None, dtype: Any = _dt.float32):
        super().__init__(1.0, "fan_avg", "truncated_normal", seed, dtype)

    def get_config(self) -> dict:
        return {"seed": self.seed, "dtype": self.dtype.name}


def he_normal(seed: int | None = None) -> VarianceScaling:
    """He et al.: truncated normal with stddev sqrt(2 / fan_in)."""
    return VarianceScaling(2.0, "fan_in", "truncated_normal", seed)


def he_uniform(seed: int | None = None) -> VarianceScaling:
    """He et al.: U[-limit, limit], limit = sqrt(6 / fan_in)."""
    return VarianceScaling(2.0, "fan_in", "uniform", seed)


def lecun_normal(seed: int | None = None) -> VarianceScaling:
    """LeCun: truncated normal with stddev sqrt(1 / fan_in)."""
    return VarianceScaling(1.0, "fan_in", "truncated_normal", seed)


def lecun_uniform(seed: int | None = None) -> VarianceScaling:
    """LeCun: U[-limit, limit], limit = sqrt(3 / fan_in)."""
    return VarianceScaling(1.0, "fan_in", "uniform", seed)


class Orthogonal(Initializer):
    """A (semi-)orthogonal matrix times ``gain``, as TF1's: the shape flattened to rows =
    product of all but the last dimension and cols = the last; the Q of the QR decomposition
    of a standard normal (max x min) matrix, its columns' signs made those of R's diagonal
    (a uniform draw over orthogonal matrices), transposed when rows < cols."""

    def __init__(self, gain: float = 1.0, seed: int | None = None, dtype: Any = _dt.float32):
        self.gain, self.seed = float(gain), seed
        self.dtype = _dt.as_dtype(dtype)

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Tensor:
        from .ops.array import reshape
        from .ops.linalg import matrix_diag_part, qr
        from .ops.manip import transpose
        from .ops.math import multiply, sign
        from .ops.random import random_normal

        dims = _shape_list(shape)
        if len(dims) < 2:
            raise ValueError(
                f"orthogonal_initializer needs a shape of rank 2 or more, got {as_shape(shape)}"
            )
        rows = int(np.prod(dims[:-1]))
        cols = dims[-1]
        dt = self._dtype(dtype)
        a = random_normal([max(rows, cols), min(rows, cols)], dtype=dt, seed=self.seed)
        q, r = qr(a)
        q = multiply(q, sign(matrix_diag_part(r)))
        if rows < cols:
            q = transpose(q)
        return multiply(self.gain, reshape(q, dims))

    def get_config(self) -> dict:
        return {"gain": self.gain, "seed": self.seed, "dtype": self.dtype.name}


class Identity(Initializer):
    """``gain`` times the identity matrix (2-D shapes only), as TF1's."""

    def __init__(self, gain: float = 1.0, dtype: Any = _dt.float32):
        self.gain = float(gain)
        self.dtype = _dt.as_dtype(dtype)

    def __call__(self, shape: Any, dtype: Any = None, partition_info: Any = None) -> Tensor:
        from .ops.array import constant

        dims = _shape_list(shape)
        if len(dims) != 2:
            raise ValueError(f"identity_initializer needs a 2-D shape, got {as_shape(shape)}")
        dt = self._dtype(dtype)
        return constant(self.gain * np.eye(dims[0], dims[1]), dtype=dt)

    def get_config(self) -> dict:
        return {"gain": self.gain, "dtype": self.dtype.name}


# TF1's public names (the classes themselves: ``hb.zeros_initializer()`` makes one)
zeros_initializer = Zeros
ones_initializer = Ones
constant_initializer = Constant
random_normal_initializer = RandomNormal
truncated_normal_initializer = TruncatedNormal
random_uniform_initializer = RandomUniform
variance_scaling_initializer = VarianceScaling
glorot_uniform_initializer = GlorotUniform
glorot_normal_initializer = GlorotNormal
xavier_initializer = GlorotUniform
orthogonal_initializer = Orthogonal
identity_initializer = Identity

_BY_NAME = {
    "zeros": Zeros,
    "ones": Ones,
    "constant": Constant,
    "random_normal": RandomNormal,
    "truncated_normal": TruncatedNormal,
    "random_uniform": RandomUniform,
    "variance_scaling": VarianceScaling,
    "glorot_uniform": GlorotUniform,
    "glorot_normal": GlorotNormal,
    "he_normal": he_normal,
    "he_uniform": he_uniform,
    "lecun_normal": lecun_normal,
    "lecun_uniform": lecun_uniform,
    "orthogonal": Orthogonal,
    "identity": Identity,
}


def get(identifier: Any) -> Any:
    """An initializer from an initializer, a callable, None, or a name such as "glorot_uniform".

    Raises ValueError for an unknown name, listing the known ones.
    """
    if identifier is None or callable(identifier):
        return identifier
    if isinstance(identifier, str):
        try:
            return _BY_NAME[identifier.lower()]()
        except KeyError:
            raise ValueError(
                f"unknown initializer {identifier!r}; known: {', '.join(sorted(_BY_NAME))}"
            ) from None
    raise TypeError(f"cannot interpret {identifier!r} as an initializer")
