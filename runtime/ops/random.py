"""Random ops: normal, uniform and truncated normal samples from a per-op seeded generator.

Each op draws from ``ctx.rng``, a numpy Generator seeded from the graph seed
(``hb.set_random_seed``) and the op's ``seed`` attr, as TF1 does: the same two seeds give the
same sequence in every session, successive runs of one op give new values, and two ops with no
op seed under one graph seed get different streams. Samples are drawn in float32 directly when
that is the requested dtype (no float64 detour). Samples are drawn on the host; a GPU device
receives them through ``device.to_device``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import Tensor, TensorShape
from ..registry import Cost, apply, convert_to_tensor, defop, nbytes, numel

# ---- shapes: a static list of ints, or a 1-D int tensor (e.g. hb.shape(x)) -------------------


def static_shape_value(t: Tensor) -> TensorShape:
    """What is statically known about the value of a 1-D int shape tensor ``t``.

    A stand-in input with a known run-time ``value`` (concrete shape inference in simulation)
    gives that value.
    """
    from .array import static_dims

    return static_dims(t)


def _shape_arg(fn_name: str, shape: Any) -> tuple[list, dict]:
    """Split a ``shape`` argument into (inputs, attrs) for a random op."""
    if isinstance(shape, (list, tuple)) and any(isinstance(d, Tensor) for d in shape):
        from .array import shape_tensor

        shape = shape_tensor(fn_name, shape)
    if isinstance(shape, Tensor):
        if not shape.dtype.is_integer or shape.shape.ndims not in (None, 1):
            raise InvalidArgumentError(
                f"{fn_name}: a shape tensor must be a 1-D int vector, got {shape.name} "
                f"{shape.shape} {shape.dtype.name}"
            )
        return [shape], {"shape": None}
    if isinstance(shape, TensorShape):
        if not shape.is_fully_defined():
            raise InvalidArgumentError(
                f"{fn_name}: shape {shape} is not fully defined; pass hb.shape(x) instead"
            )
        shape = shape.as_list()
    dims = [int(shape)] if np.isscalar(shape) else [int(d) for d in shape]
    if any(d < 0 for d in dims):
        raise InvalidArgumentError(f"{fn_name}: shape {dims} has a negative dimension")
    return [], {"shape": tuple(dims)}


def _random_shape(op):
    shape = op.attrs["shape"]
    if shape is None:
        shape = static_shape_value(op.inputs[0])
    return [(TensorShape(shape), op.attrs["dtype"])]


def _out_shape(ctx, inputs) -> tuple:
    shape = ctx.attrs["shape"]
    if shape is None:
        shape = tuple(int(d) for d in inputs[0])
    return shape


def _random_cost(flops_per_element: float):
    def cost(op, ins, outs):
        return Cost(
            flops_per_element * numel(outs[0]), 0.0, float(nbytes(outs[0], op.outputs[0].dtype))
        )

    return cost


def _standard_normal(rng: np.random.Generator, shape: tuple, dtype: np.dtype) -> np.ndarray:
    if dtype in (np.float32, np.float64):
        return rng.standard_normal(shape, dtype=dtype)
    return rng.standard_normal(shape, dtype=np.float32).astype(dtype)


def _scale_shift(z: np.ndarray, scale: float, shift: float) -> np.ndarray:
    """``z * scale + shift`` in place (``z`` is a fresh sample)."""
    if scale != 1.0:
        z *= z.dtype.type(scale)
    if shift != 0.0:
        z += z.dtype.type(shift)
    return z


def _check_float(fn_name: str, dtype: _dt.DType) -> None:
    if not dtype.is_floating:
        raise InvalidArgumentError(f"{fn_name}: dtype must be a float type, got {dtype.name}")


# ---- RandomStandardNormal ---------------------------------------------------------------------

RandomNormal = defop(
    "RandomNormal", shape=_random_shape, cost=_random_cost(20), stateful=True, differentiable=False
)


@RandomNormal.kernel("cpu", "gpu")
def _random_normal(ctx, *inputs):
    at = ctx.attrs
    z = _standard_normal(ctx.rng, _out_shape(ctx, inputs), at["dtype"].np)
    return ctx.device.to_device(_scale_shift(z, at["stddev"], at["mean"]))


def random_normal(
    shape: Any,
    mean: Any = 0.0,
    stddev: Any = 1.0,
    dtype: Any = _dt.float32,
    seed: int | None = None,
    name: str | None = None,
) -> Tensor:
    """Samples from N(mean, stddev^2) of the given shape (a list of ints or a 1-D int tensor).

    ``mean`` and ``stddev`` may be tensors; then the op draws N(0, 1) and scales it in the graph.
    """
    dtype = _dt.as_dtype(dtype)
    _check_float("random_normal", dtype)
    ins, attrs = _shape_arg("random_normal", shape)
    dynamic = isinstance(mean, Tensor) or isinstance(stddev, Tensor)
    attrs.update(
        dtype=dtype,
        seed=seed,
        mean=0.0 if dynamic else float(mean),
        stddev=1.0 if dynamic else float(stddev),
    )
    z = apply("RandomNormal", ins, attrs, name or "random_normal")
    return _apply_dynamic(z, mean, stddev) if dynamic else z


def _apply_dynamic(z: Tensor, shift: Any, scale: Any) -> Tensor:
    from .math import add, multiply

    return add(
        multiply(z, convert_to_tensor(scale, dtype=z.dtype)),
        convert_to_tensor(shift, dtype=z.dtype),
    )


# ---- TruncatedNormal --------------------------------------------------------------------------

TruncatedNormal = defop(
    "TruncatedNormal",
    shape=_random_shape,
    cost=_random_cost(25),
    stateful=True,
    differentiable=False,
)


@TruncatedNormal.kernel("cpu", "gpu")
def _truncated_normal(ctx, *inputs):
    at = ctx.attrs
    rng = ctx.rng
    dtype = at["dtype"].np
    z = _standard_normal(rng, _out_shape(ctx, inputs), dtype)
    flat = z.reshape(-1)
    bad = np.flatnonzero(np.abs(flat) > 2.0)
    while bad.size:  # about 4.6% of draws per round
        flat[bad] = _standard_normal(rng, (bad.size,), dtype)
        bad = bad[np.abs(flat[bad]) > 2.0]
    return ctx.device.to_device(_scale_shift(z, at["stddev"], at["mean"]))


def truncated_normal(
    shape: Any,
    mean: Any = 0.0,
    stddev: Any = 1.0,
    dtype: Any = _dt.float32,
    seed: int | None = None,
    name: str | None = None,
) -> Tensor:
    """Samples from N(mean, stddev^2) with values beyond 2 stddev from the mean redrawn."""
    dtype = _dt.as_dtype(dtype)
    _check_float("truncated_normal", dtype)
    ins, attrs = _shape_arg("truncated_normal", shape)
    dynamic = isinstance(mean, Tensor) or isinstance(stddev, Tensor)
    attrs.update(
        dtype=dtype,
        seed=seed,
        mean=0.0 if dynamic else float(mean),
        stddev=1.0 if dynamic else float(stddev),
    )
    z = apply("TruncatedNormal", ins, attrs, name or "truncated_normal")
    return _apply_dynamic(z, mean, stddev) if dynamic else z


# ---- RandomUniform ----------------------------------------------------------------------------

RandomUniform = defop(
    "RandomUniform", shape=_random_shape, cost=_random_cost(4), stateful=True, differentiable=False
)


@RandomUniform.kernel("cpu", "gpu")
def _random_uniform(ctx, *inputs):
    at = ctx.attrs
    shape = _out_shape(ctx, inputs)
    dtype = at["dtype"]
    lo, hi = at["minval"], at["maxval"]
    if dtype.is_integer:
        return ctx.device.to_device(ctx.rng.integers(lo, hi, size=shape, dtype=dtype.np))
    npdt = dtype.np
    u = ctx.rng.random(shape, dtype=npdt if npdt in (np.float32, np.float64) else np.float32)
    if u.dtype != npdt:
        u = u.astype(npdt)
    if lo != 0.0 or hi != 1.0:
        u = _scale_shift(u, hi - lo, lo)
        # Rounding of u * (hi - lo) + lo may land on hi; keep the interval half-open.
        np.minimum(u, np.nextafter(npdt.type(hi), npdt.type(lo)), out=u)
    return ctx.device.to_device(u)


def random_uniform(
    shape: Any,
    minval: Any = 0,
    maxval: Any = None,
    dtype: Any = _dt.float32,
    seed: int | None = None,
    name: str | None = None,
) -> Tensor:
    """Samples uniform in [minval, maxval); ``maxval`` defaults to 1 for floats.

    Integer dtypes need an explicit ``maxval``. For floats, ``minval``/``maxval`` may be tensors
    (the op then draws in [0, 1) and scales in the graph). Raises InvalidArgumentError when
    ``minval >= maxval``.
    """
    dtype = _dt.as_dtype(dtype)
    if dtype.is_bool:
        raise InvalidArgumentError("random_uniform: dtype bool is not supported")
    ins, attrs = _shape_arg("random_uniform", shape)
    if dtype.is_integer:
        if maxval is None:
            raise InvalidArgumentError(
                f"random_uniform: maxval must be given for integer dtype {dtype.name}"
            )
        if isinstance(minval, Tensor) or isinstance(maxval, Tensor):
            raise TypeError("random_uniform: integer bounds must be Python ints in hetbed")
        lo, hi = int(minval), int(maxval)
        if lo >= hi:
            raise InvalidArgumentError(f"random_uniform: need minval < maxval, got {lo} >= {hi}")
        attrs.update(dtype=dtype, seed=seed, minval=lo, maxval=hi)
        return apply("RandomUniform", ins, attrs, name or "random_uniform")
    if maxval is None:
        maxval = 1.0
    dynamic = isinstance(minval, Tensor) or isinstance(maxval, Tensor)
    if dynamic:
        attrs.update(dtype=dtype, seed=seed, minval=0.0, maxval=1.0)
        u = apply("RandomUniform", ins, attrs, name or "random_uniform")
        from .math import subtract

        lo_t = convert_to_tensor(minval, dtype=dtype)
        return _apply_dynamic(u, lo_t, subtract(convert_to_tensor(maxval, dtype=dtype), lo_t))
    lo, hi = float(minval), float(maxval)
    if lo >= hi:
        raise InvalidArgumentError(f"random_uniform: need minval < maxval, got {lo} >= {hi}")
    attrs.update(dtype=dtype, seed=seed, minval=lo, maxval=hi)
    return apply("RandomUniform", ins, attrs, name or "random_uniform")


RandomShuffle = defop(
    "RandomShuffle",
    shape=lambda op: [(op.inputs[0].shape, op.inputs[0].dtype)],
    cost=lambda op, ins, outs: Cost(0.0, *(2 * [float(nbytes(ins[0], op.inputs[0].dtype))])),
    stateful=True,
    differentiable=False,
)


@RandomShuffle.kernel("cpu")
def _random_shuffle(ctx, value):
    value = np.asarray(value)
    if value.ndim == 0:
        return value.copy()
    return value[ctx.rng.permutation(value.shape[0])]


def random_shuffle(value: Any, seed: int | None = None, name: str | None = None) -> Tensor:
    """``value`` with its first dimension in a random order (a new order each run)."""
    v = convert_to_tensor(value)
    return apply("RandomShuffle", [v], {"seed": seed}, name or "random_shuffle")


# ---- Multinomial (tf.multinomial, tf.random.categorical) --------------------------------------

Multinomial = defop("Multinomial", stateful=True, differentiable=False, cost=_random_cost(10))


@Multinomial.shape
def _multinomial_shape(op):
    logits = op.inputs[0]
    if logits.shape.ndims not in (None, 2) or not logits.dtype.is_floating:
        raise InvalidArgumentError(
            f"multinomial {op.name!r}: logits must be a float [batch, classes] matrix, got "
            f"{logits.dtype.name} of shape {logits.shape}"
        )
    batch = logits.shape.dims[0] if logits.shape.ndims == 2 else None
    return [(TensorShape([batch, op.attrs["num_samples"]]), op.attrs["dtype"])]


@Multinomial.kernel("cpu")
def _multinomial(ctx, logits):
    n = ctx.attrs["num_samples"]
    x = np.asarray(logits, dtype=np.float64)
    if x.shape[1] == 0:
        raise InvalidArgumentError(f"multinomial {ctx.op.name!r}: logits have no classes")
    p = np.exp(x - x.max(axis=1, keepdims=True))  # the row's softmax, up to its sum
    cdf = np.cumsum(p, axis=1)
    u = ctx.rng.random((x.shape[0], n)) * cdf[:, -1:]
    out = np.empty((x.shape[0], n), dtype=ctx.attrs["dtype"].np)
    for i in range(x.shape[0]):
        out[i] = np.minimum(np.searchsorted(cdf[i], u[i], side="right"), x.shape[1] - 1)
    return out


def multinomial(
    logits: Any,
    num_samples: int,
    seed: int | None = None,
    name: str | None = None,
    output_dtype: Any = _dt.int64,
) -> Tensor:
    """``num_samples`` class indices per row of ``logits`` ([batch, classes], unnormalized
    log-probabilities), drawn from its softmax (TF1's ``tf.multinomial``)."""
    attrs = {"num_samples": int(num_samples), "seed": seed, "dtype": _dt.as_dtype(output_dtype)}
    return apply("Multinomial", [convert_to_tensor(logits)], attrs, name or "multinomial")


def categorical(
    logits: Any, num_samples: int, dtype: Any = None, seed: int | None = None, name=None
) -> Tensor:
    """TF's ``tf.random.categorical``: ``multinomial`` with ``dtype`` (int64 by default)."""
    return multinomial(logits, num_samples, seed, name, dtype or _dt.int64)


__all__ = [
    "categorical",
    "multinomial",
    "random_normal",
    "random_shuffle",
    "random_uniform",
    "truncated_normal",
    "static_shape_value",
]
