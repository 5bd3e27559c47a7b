"""Array ops: constants, placeholders, identity, reshapes and other layout changes."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import Tensor, TensorShape, UnknownDimension, as_shape
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


def _python_default(arr: np.ndarray) -> np.ndarray:
    """A Python value's array in TF's default dtypes: floats float32, ints int32 (int64 when a
    value does not fit)."""
    if arr.dtype == np.float64:
        return arr.astype(np.float32)
    if arr.dtype == np.int64 and (
        arr.size == 0 or (_INT32.min <= arr.min() and arr.max() <= _INT32.max)
    ):
        return arr.astype(np.int32)
    return arr


def value_dtype(value: Any) -> _dt.DType:
    """The dtype ``constant(value)`` gives (a tensor's own dtype for a tensor), as TF's
    ``convert_to_tensor(value).dtype``."""
    if isinstance(value, Tensor):
        return value.dtype
    if _is_text(value):
        return _dt.string
    arr = np.asarray(value)
    if not isinstance(value, (np.ndarray, np.generic)):
        arr = _python_default(arr)
    return _dt.as_dtype(arr.dtype)


def constant(value: Any, dtype: Any = None, shape: Any = None, name: str = "Const") -> Tensor:
    """A tensor with a fixed value; ``shape`` broadcasts a scalar or reshapes a same-size value.

    Without ``dtype``, Python floats become float32 and Python ints int32 (int64 when a value
    does not fit), as in TF; numpy values keep their dtype. Raises TypeError for a Python float
    value with an integer ``dtype`` (numpy arrays are cast, as TF does).
    """
    if isinstance(value, Tensor):
        raise TypeError(f"constant() takes a value, not the tensor {value.name}")
    if isinstance(value, UnknownDimension) or (
        isinstance(value, (list, tuple)) and any(isinstance(v, UnknownDimension) for v in value)
    ):
        raise ValueError("Cannot convert an unknown Dimension to a Tensor: ?")
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
        # (an empty list is float64 to numpy but holds no float: any dtype takes it, as TF's)
        if from_python and arr.dtype.kind == "f" and not want.is_differentiable and arr.size:
            raise TypeError(f"constant {name}: expected {want.name}, got float value {value!r}")
        if arr.dtype.kind == "c" and not want.is_complex and arr.size:
            raise TypeError(f"constant {name}: expected {want.name}, got complex value {value!r}")
        arr = arr.astype(want.np, copy=False)
    elif from_python:
        arr = _python_default(arr)
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
    """Reshape to ``shape``: a list of ints with at most one -1, or, as in TF1, a 1-D integer
    tensor or a list mixing ints and integer scalar tensors (``[tf.shape(x)[0], -1]``), known
    when the step runs (DynamicReshape)."""
    if isinstance(shape, TensorShape):
        shape = shape.as_list()
    if isinstance(shape, Tensor) or (
        isinstance(shape, (list, tuple)) and any(isinstance(d, Tensor) for d in shape)
    ):
        return _dynamic_reshape(tensor, shape, name)
    shape = [int(d) for d in shape]
    return apply("Reshape", [tensor], {"shape": tuple(shape)}, name or "Reshape")


DynamicReshape = defop("DynamicReshape")


def _shape_dims(t: Any) -> list | None:
    """What is known of the value of the 1-D integer tensor ``t`` (its run-time value in a
    simulated step, else from its ops): a list of ints and Nones, or None."""
    val = getattr(t, "value", None)
    if val is not None:
        return [int(d) for d in np.asarray(val).reshape(-1).tolist()]
    op = t.op
    if op.type == "Const":
        return [int(d) for d in np.asarray(op.attrs["value"]).reshape(-1).tolist()]
    if op.type in ("Identity", "Enter"):  # (a constant made outside a loop enters it)
        return _shape_dims(op.inputs[0])
    if op.type == "Shape":
        dims = op.inputs[0].shape.dims
        return None if dims is None else list(dims)
    if op.type == "Pack" and op.attrs.get("axis", 0) == 0:
        return [_scalar_dim(e) for e in op.inputs]
    return None


def _scalar_dim(e: Any) -> Any:
    """An integer scalar tensor's value if known, ``(tensor, k)`` for ``tf.shape(tensor)[k]``
    of an unknown dimension, else None."""
    op = e.op
    if op.type == "Const":
        return int(np.asarray(op.attrs["value"]).reshape(-1)[0])
    if op.type in ("Cast", "Identity", "Enter"):
        return _scalar_dim(op.inputs[0])
    a = op.attrs
    if (
        op.type == "StridedSlice"
        and op.inputs[0].op.type == "Shape"
        and a.get("shrink_axis_mask") == 1
        and len(a.get("begin", ())) == 1
        and not a.get("begin_mask")
    ):
        src = op.inputs[0].op.inputs[0]
        k = a["begin"][0]
        if src.shape.ndims is not None and -src.shape.ndims <= k < src.shape.ndims:
            d = src.shape.dims[k]
            return d if d is not None else (src, k % src.shape.ndims)
    return None


@DynamicReshape.shape
def _dynamic_reshape_shape(op):
    x, s = op.inputs
    if not s.dtype.is_integer or s.shape.ndims not in (None, 1):
        raise InvalidArgumentError(
            f"Reshape {op.name!r}: the shape must be a 1-D integer tensor, got {s.dtype.name} "
            f"of shape {s.shape}"
        )
    dims = _shape_dims(s)
    if dims is None:
        n = s.shape.dims[0] if s.shape.ndims == 1 else None
        return [(TensorShape(None if n is None else [None] * n), x.dtype)]
    if dims.count(-1) > 1 or any(isinstance(d, int) and d < -1 for d in dims):
        raise InvalidArgumentError(
            f"Reshape {op.name!r}: shape must be sizes >= 0 with at most one -1, got {dims}"
        )
    if -1 in dims:
        # the known part of x's size over the known part of the others', when the unknown
        # factors are the same on both sides (tf.shape(x)[0] against x's unknown first dim)
        i = dims.index(-1)
        xd = x.shape.dims
        dims[i] = None
        if xd is not None:
            x_unknown = sorted(k for k, d in enumerate(xd) if d is None)
            mine = [d for d in dims if isinstance(d, tuple)]
            if None not in dims[:i] + dims[i + 1 :] or mine:
                same = all(t[0] is x for t in mine) and sorted(t[1] for t in mine) == x_unknown
                if same and None not in [d for j, d in enumerate(dims) if j != i]:
                    known = int(np.prod([d for d in xd if d is not None]))
                    other = int(
                        np.prod([d for j, d in enumerate(dims) if j != i and isinstance(d, int)])
                    )
                    if other > 0 and known % other == 0:
                        dims[i] = known // other
    dims = [None if isinstance(d, tuple) else d for d in dims]
    n = x.shape.num_elements()
    if n is not None and None not in dims and int(np.prod(dims)) != n:
        raise InvalidArgumentError(
            f"Reshape {op.name!r}: cannot reshape a tensor of {n} elements (shape {x.shape}) "
            f"to {dims}"
        )
    return [(TensorShape(dims), x.dtype)]


@DynamicReshape.kernel("cpu", "gpu", aliases_input=True)
def _dynamic_reshape(ctx, x, shape):
    dims = [int(d) for d in (shape.tolist() if hasattr(shape, "tolist") else list(shape))]
    if not isinstance(dims, list):
        dims = [dims]
    size = int(np.prod(x.shape))
    known = [d for d in dims if d != -1]
    if dims.count(-1) > 1 or any(d < -1 for d in dims):
        raise InvalidArgumentError(
            f"Reshape {ctx.op.name!r}: shape must be sizes >= 0 with at most one -1, got {dims}"
        )
    k = int(np.prod(known))
    if (-1 in dims and (k == 0 or size % k)) or (-1 not in dims and k != size):
        raise InvalidArgumentError(
            f"Reshape {ctx.op.name!r}: cannot reshape a tensor of {size} elements (shape "
            f"{tuple(x.shape)}) to {dims}"
        )
    return x.reshape(dims)


@DynamicReshape.gradient
def _dynamic_reshape_grad(op, g):
    return [reshape_like(g, op.inputs[0]), None]


DynamicReshape.cost(lambda op, ins, outs: Cost())


def _dynamic_reshape(tensor: Any, shape: Any, name: str | None) -> Tensor:
    return apply("DynamicReshape", [tensor, shape_tensor("reshape", shape)], name=name or "Reshape")


def is_run_time_shape(shape: Any) -> bool:
    """A shape argument known only when the step runs: a non-constant tensor, or a list with
    a tensor in it."""
    if isinstance(shape, Tensor):
        return shape.op.type != "Const"
    return isinstance(shape, (list, tuple)) and any(isinstance(d, Tensor) for d in shape)


def shape_tensor(fn: str, shape: Any) -> Tensor:
    """A shape argument as a 1-D int32 tensor: a tensor as it is (checked), a list mixing ints
    and integer scalar tensors stacked (TF1's ``[tf.shape(x)[0], 128]``)."""
    from .manip import stack

    if isinstance(shape, Tensor):
        if not shape.dtype.is_integer or shape.shape.ndims not in (None, 1):
            raise InvalidArgumentError(
                f"{fn}: a shape tensor must be a 1-D integer vector, got {shape.name} "
                f"({shape.dtype.name}, shape {shape.shape})"
            )
        return cast(shape, _dt.int32) if shape.dtype != _dt.int32 else shape
    parts = []
    for d in shape:
        if isinstance(d, Tensor):
            if d.shape.ndims not in (None, 0) or not d.dtype.is_integer:
                raise InvalidArgumentError(
                    f"{fn}: each tensor in a shape list must be an integer scalar, got "
                    f"{d.name} ({d.dtype.name}, shape {d.shape})"
                )
            parts.append(cast(d, _dt.int32) if d.dtype != _dt.int32 else d)
        else:
            parts.append(constant(np.int32(int(d))))
    return stack(parts, name=f"{fn}_shape")


def static_dims(t: Tensor) -> TensorShape:
    """What is known when the graph is built of the value of the 1-D integer shape tensor
    ``t`` (its run-time value in a simulated step), as a TensorShape."""
    dims = _shape_dims(t)
    if dims is None:
        n = t.shape.dims[0] if t.shape.ndims == 1 else None
        return TensorShape(None if n is None else [None] * n)
    return TensorShape([d if isinstance(d, int) and d >= 0 else None for d in dims])


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
    x = ctx.xp.asarray(x)
    dst = ctx.attrs["DstT"]
    if x.dtype.kind == "c" and not dst.is_complex:  # TF's: the real part
        x = x.real
    return x.astype(dst.np, copy=False)


@Cast.gradient
def _cast_grad(op, g):
    """As TF's: between float and complex dtypes the gradient is cast back (complex to real
    keeps the real part); to or from other dtypes there is none."""
    src = op.inputs[0].dtype
    if not src.is_differentiable or not op.attrs["DstT"].is_differentiable:
        return [None]
    return [cast(g, src)]


def cast(x: Any, dtype: Any, name: str | None = None) -> Tensor:
    """``x`` as ``dtype``; a SparseTensor (or its fetched value) keeps its indices and shape and
    casts its values, as TF's."""
    from .sparse import SparseTensor, SparseTensorValue

    if isinstance(x, (SparseTensor, SparseTensorValue)):
        sp = SparseTensor(*x) if isinstance(x, SparseTensorValue) else x
        return SparseTensor(sp.indices, cast(sp.values, dtype, name), sp.dense_shape)
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
