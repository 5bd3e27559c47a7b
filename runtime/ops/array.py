"""Array ops: constants, placeholders, identity, reshapes and other layout changes."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import Tensor, TensorShape, as_shape
from ..registry import Cost, apply, apply_op, convert_to_tensor, defop, unchanged_shape

# ---- Const ------------------------------------------------------------------------------

Const = defop("Const", differentiable=False)


@Const.shape
def _const_shape(op):
    v = op.attrs["value"]
    return [(TensorShape(v.shape), _dt.as_dtype(v.dtype))]


@Const.kernel("cpu", "gpu")
def _const(ctx):
    if ctx.state is None:
        v = ctx.attrs["value"]
        ctx.state = ctx.device.to_device(v)
        if ctx.xp is np:
            ctx.state.setflags(write=False)  # shared across steps: nobody may write into it
    return ctx.state


@Const.cost
def _const_cost(op, ins, outs):
    return Cost(0.0, 0.0, 0.0)


_INT32 = np.iinfo(np.int32)


def constant(value: Any, dtype: Any = None, shape: Any = None, name: str = "Const") -> Tensor:
    """A tensor with a fixed value; ``shape`` broadcasts a scalar or reshapes a same-size value.

    Without ``dtype``, Python floats become float32 and Python ints int32 (int64 when a value
    does not fit), as in TF; numpy values keep their dtype. Raises TypeError for a Python float
    value with an integer ``dtype`` (numpy arrays are cast, as TF does).
    """
    if isinstance(value, Tensor):
        raise TypeError(f"constant() takes a value, not the tensor {value.name}")
    from_python = not isinstance(value, (np.ndarray, np.generic))
    want = _dt.as_dtype(dtype) if dtype is not None else None
    if want is _dt.string or (want is None and _is_text(value)):
        arr = _dt.to_string_array(value, f"constant {name}")
        if shape is not None:
            shape = tuple(as_shape(shape).as_list())
            if arr.size == 1:
                arr = np.broadcast_to(arr.reshape(()), shape)
            elif arr.size == int(np.prod(shape)):
                arr = arr.reshape(shape)
            else:
                raise InvalidArgumentError(
                    f"constant {name}: value of {arr.size} elements does not fit shape {shape}"
                )
        arr = np.array(arr, dtype=object, copy=True)
        return apply("Const", [], {"value": arr, "dtype": _dt.string}, name)
    arr = np.asarray(value)
    if want is not None:
        if from_python and arr.dtype.kind == "f" and not want.is_floating:
            raise TypeError(f"constant {name}: expected {want.name}, got float value {value!r}")
        arr = arr.astype(want.np, copy=False)
    elif from_python:
        if arr.dtype == np.float64:
            arr = arr.astype(np.float32)  # Python floats default to float32, as in TF
        elif arr.dtype == np.int64 and (
            arr.size == 0 or (_INT32.min <= arr.min() and arr.max() <= _INT32.max)
        ):
            arr = arr.astype(np.int32)
    try:
        arr = arr.astype(_dt.as_dtype(arr.dtype).np, copy=False)  # e.g. uint8 -> int32
    except TypeError as e:
        raise TypeError(f"constant {name}: {e}") from None
    if shape is not None:
        shape = tuple(as_shape(shape).as_list())
        if arr.size == 1:
            arr = np.broadcast_to(arr.reshape(()), shape)
        elif arr.size == int(np.prod(shape)):
            arr = arr.reshape(shape)
        else:
            raise InvalidArgumentError(
                f"constant {name}: value of {arr.size} elements does not fit shape {shape}"
            )
    arr = np.array(arr, copy=True)
    return apply("Const", [], {"value": arr, "dtype": _dt.as_dtype(arr.dtype)}, name)


def _is_text(value: Any) -> bool:
    """Whether a constant's value holds bytes or str (a string tensor)."""
    if isinstance(value, (bytes, str, np.bytes_, np.str_)):
        return True
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "SUO"
    if isinstance(value, (list, tuple)):
        while isinstance(value, (list, tuple)) and value:
            value = value[0]
        return isinstance(value, (bytes, str, np.bytes_, np.str_))
    return False


# ---- Placeholder ------------------------------------------------------------------------

Placeholder = defop("Placeholder", differentiable=False)


@Placeholder.shape
def _placeholder_shape(op):
    return [(op.attrs["shape"], op.attrs["dtype"])]


@Placeholder.kernel("cpu", "gpu")
def _placeholder(ctx):
    raise InvalidArgumentError(
        f"you must feed a value for placeholder {ctx.op.name!r} "
        f"(dtype {ctx.attrs['dtype'].name}, shape {ctx.attrs['shape']})"
    )


def placeholder(dtype: Any, shape: Any = None, name: str | None = None) -> Tensor:
    """A tensor whose value must be fed at run time (``feed_dict``)."""
    return apply(
        "Placeholder",
        [],
        {"dtype": _dt.as_dtype(dtype), "shape": as_shape(shape)},
        name or "Placeholder",
    )


PlaceholderWithDefault = defop("PlaceholderWithDefault", shape=unchanged_shape)


@PlaceholderWithDefault.shape
def _pwd_shape(op):
    return [(op.attrs["shape"], op.inputs[0].dtype)]


@PlaceholderWithDefault.kernel("cpu", "gpu", aliases_input=True)
def _pwd(ctx, x):
    return x


PlaceholderWithDefault.gradient(lambda op, g: [g])


def placeholder_with_default(input: Any, shape: Any, name: str | None = None) -> Tensor:
    x = convert_to_tensor(input)
    shape = as_shape(shape)
    if not shape.is_compatible_with(x.shape):
        raise InvalidArgumentError(f"default value of shape {x.shape} does not fit shape {shape}")
    return apply("PlaceholderWithDefault", [x], {"shape": shape}, name or "PlaceholderWithDefault")


# ---- Identity, StopGradient -------------------------------------------------------------

Identity = defop("Identity", shape=unchanged_shape, passes_sparse=True)


@Identity.kernel("cpu", "gpu", aliases_input=True)
def _identity(ctx, x):
    return x


@Identity.gradient
def _identity_grad(op, g):
    return [g]


@Identity.cost
def _identity_cost(op, ins, outs):
    return Cost()


def identity(input: Any, name: str | None = None) -> Tensor:
    return apply("Identity", [input], name=name or "Identity")


StopGradient = defop("StopGradient", shape=unchanged_shape, differentiable=False)
StopGradient.kernel("cpu", "gpu", aliases_input=True)(_identity)
StopGradient.cost(_identity_cost)


def stop_gradient(input: Any, name: str | None = None) -> Tensor:
    return apply("StopGradient", [input], name=name or "StopGradient")


# ---- Reshape ----------------------------------------------------------------------------

Reshape = defop("Reshape")


@Reshape.shape
def _reshape_shape(op):
    x = op.inputs[0]
    shape = list(op.attrs["shape"])
    if shape.count(-1) > 1 or any(d < -1 for d in shape):
        raise InvalidArgumentError(
            f"Reshape: shape must be sizes >= 0 with at most one -1, got {shape}"
        )
    n = x.shape.num_elements()
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1]))
        if n is not None:
            if known == 0 or n % known:
                raise InvalidArgumentError(
                    f"Reshape: cannot reshape {x.shape} ({n} elements) to {shape}"
                )
            shape[shape.index(-1)] = n // known
        else:
            shape[shape.index(-1)] = None
    elif n is not None and int(np.prod(shape)) != n:
        raise InvalidArgumentError(
            f"Reshape: cannot reshape a tensor of {n} elements (shape {x.shape}) to {shape}"
        )
    return [(TensorShape(shape), x.dtype)]


@Reshape.kernel("cpu", "gpu", aliases_input=True)
def _reshape(ctx, x):
    return x.reshape(ctx.attrs["shape"])


@Reshape.gradient
def _reshape_grad(op, g):
    return [reshape_like(g, op.inputs[0])]


@Reshape.cost
def _reshape_cost(op, ins, outs):
    return Cost()


def reshape(tensor: Any, shape: Any, name: str | None = None) -> Tensor:
    """Reshape to ``shape`` (a list of ints with at most one -1)."""
    if isinstance(shape, Tensor):
        raise TypeError("reshape: shape must be a static list of ints in hetbed, not a tensor")
    shape = [int(d) for d in (shape.as_list() if isinstance(shape, TensorShape) else shape)]
    return apply("Reshape", [tensor], {"shape": tuple(shape)}, name or "Reshape")


ReshapeLike = defop("ReshapeLike")


@ReshapeLike.shape
def _reshape_like_shape(op):
    return [(op.inputs[1].shape, op.inputs[0].dtype)]


@ReshapeLike.kernel("cpu", "gpu", aliases_input=True)
def _reshape_like(ctx, x, like):
    return x.reshape(like.shape)


@ReshapeLike.gradient
def _reshape_like_grad(op, g):
    return [reshape_like(g, op.inputs[0]), None]


ReshapeLike.cost(_reshape_cost)


def reshape_like(x: Any, like: Any, name: str | None = None) -> Tensor:
    """Reshape ``x`` to the run-time shape of ``like`` (used by gradients of unknown shapes)."""
    return apply("ReshapeLike", [x, like], name=name or "ReshapeLike")


# ---- Shape, Size, Rank ------------------------------------------------------------------

Shape = defop("Shape", differentiable=False)


@Shape.shape
def _shape_shape(op):
    return [(TensorShape([op.inputs[0].shape.ndims]), op.attrs.get("out_type", _dt.int32))]


@Shape.kernel("cpu", "gpu")
def _shape(ctx, x):
    return np.array(x.shape, dtype=ctx.attrs["out_type"].np)


Shape.cost(_reshape_cost)


def shape(input: Any, name: str | None = None, out_type: Any = _dt.int32) -> Tensor:
    return apply("Shape", [input], {"out_type": _dt.as_dtype(out_type)}, name or "Shape")


def size(input: Any, name: str | None = None, out_type: Any = _dt.int32) -> Tensor:
    """The number of elements of ``input`` (``out_type``), computed at run time when not static."""
    from .math import reduce_prod

    return reduce_prod(shape(input, out_type=out_type), name=name or "Size")


def rank(input: Any, name: str | None = None) -> Tensor:
    """The number of dimensions of ``input`` (int32): a constant when the rank is static."""
    x = convert_to_tensor(input)
    if x.shape.ndims is None:
        from .math import reduce_prod

        return reduce_prod(shape(shape(x)), name=name or "Rank")
    return constant(x.shape.ndims, dtype=_dt.int32, name=name or "Rank")


# ---- Cast -------------------------------------------------------------------------------

Cast = defop("Cast")


@Cast.shape
def _cast_shape(op):
    src, dst = op.inputs[0].dtype, op.attrs["DstT"]
    if src.is_string != dst.is_string:  # as in TF: string_to_number / as_string convert
        raise TypeError(
            f"cannot cast {src.name} to {dst.name}; use "
            f"{'string_to_number' if src.is_string else 'as_string'}"
        )
    return [(op.inputs[0].shape, dst)]


@Cast.kernel("cpu", "gpu")
def _cast(ctx, x):
    return ctx.xp.asarray(x).astype(ctx.attrs["DstT"].np, copy=False)


@Cast.gradient
def _cast_grad(op, g):
    src = op.inputs[0].dtype
    if not src.is_floating or not op.attrs["DstT"].is_floating:
        return [None]
    return [cast(g, src)]


def cast(x: Any, dtype: Any, name: str | None = None) -> Tensor:
    x = convert_to_tensor(x)
    dtype = _dt.as_dtype(dtype)
    if x.dtype == dtype:
        return x
    return apply("Cast", [x], {"DstT": dtype}, name or "Cast")


def to_float(x: Any, name: str = "ToFloat") -> Tensor:
    return cast(x, _dt.float32, name)


def to_int32(x: Any, name: str = "ToInt32") -> Tensor:
    return cast(x, _dt.int32, name)


def to_int64(x: Any, name: str = "ToInt64") -> Tensor:
    return cast(x, _dt.int64, name)


__all__ = [
    "constant",
    "placeholder",
    "placeholder_with_default",
    "identity",
    "stop_gradient",
    "reshape",
    "reshape_like",
    "shape",
    "size",
    "rank",
    "cast",
    "to_float",
    "to_int32",
    "to_int64",
    "apply_op",
]
