"""Shape and layout ops of TF1: roll, broadcast_to, broadcast_static_shape /
broadcast_dynamic_shape, shape_n, sequence_mask, meshgrid, space_to_depth and depth_to_space
(NHWC), space_to_batch(_nd) and batch_to_space(_nd)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import Tensor, TensorShape, name_scope
from ..registry import apply, broadcast_shapes, convert_to_tensor, default_cost, defop
from .manip import _ints, _norm_axis
from .scatter import const_value

# ---- Roll ----------------------------------------------------------------------------------------

Roll = defop("Roll", cost=default_cost)


@Roll.shape
def _roll_shape(op):
    x = op.inputs[0]
    if x.shape.ndims is not None:
        for a in op.attrs["axis"]:
            _norm_axis("Roll", a, x.shape.ndims, x.shape)
    return [(x.shape, x.dtype)]


@Roll.kernel("cpu", "gpu")
def _roll(ctx, x):
    return ctx.xp.roll(x, ctx.attrs["shift"], ctx.attrs["axis"])


@Roll.gradient
def _roll_grad(op, g):
    attrs = {"shift": tuple(-s for s in op.attrs["shift"]), "axis": op.attrs["axis"]}
    return [apply("Roll", [g], attrs, name="Roll")]


def roll(input: Any, shift: Any, axis: Any, name: str | None = None) -> Tensor:
    """Elements shifted by ``shift`` along ``axis`` (ints or lists), wrapping around; shifts
    and axes are static in hetbed."""
    s = _ints("roll", "shift", shift)
    a = _ints("roll", "axis", axis)
    if len(s) != len(a):
        raise InvalidArgumentError(f"roll: shift {s} and axis {a} differ in length")
    return apply("Roll", [input], {"shift": s, "axis": a}, name or "Roll")


# ---- BroadcastTo, BroadcastArgs ------------------------------------------------------------------

BroadcastTo = defop("BroadcastTo", cost=default_cost)


@BroadcastTo.shape
def _broadcast_to_shape(op):
    x, shp = op.inputs
    if shp.dtype not in _dt.INTS:
        raise InvalidArgumentError(f"BroadcastTo: shape must be int32/int64, got {shp.dtype.name}")
    v = const_value(shp)
    if v is not None:
        target = TensorShape([int(d) for d in v.reshape(-1)])
        try:
            got = broadcast_shapes("BroadcastTo", x.shape, target)
        except InvalidArgumentError:
            got = None
        if got is None or (
            x.shape.ndims is not None
            and (x.shape.ndims > target.ndims or not got.is_compatible_with(target))
        ):
            raise InvalidArgumentError(f"BroadcastTo: cannot broadcast {x.shape} to {target}")
        return [(target, x.dtype)]
    n = shp.shape.dims[0] if shp.shape.dims is not None else None
    return [(TensorShape(None if n is None else [None] * n), x.dtype)]


@BroadcastTo.kernel("cpu", "gpu")
def _broadcast_to(ctx, x, shp):
    target = tuple(int(d) for d in shp.tolist())
    try:
        return ctx.xp.broadcast_to(x, target).copy()
    except ValueError:
        raise InvalidArgumentError(
            f"BroadcastTo {ctx.op.name!r}: cannot broadcast shape {x.shape} to {target}"
        ) from None


@BroadcastTo.gradient
def _broadcast_to_grad(op, g):
    from .math import _unbroadcast

    return [_unbroadcast(g, op.inputs[0]), None]


def broadcast_to(input: Any, shape: Any, name: str | None = None) -> Tensor:
    """``input`` broadcast (numpy rules) to ``shape`` (a list or an int tensor)."""
    if isinstance(shape, TensorShape):
        shape = shape.as_list()
    if not isinstance(shape, Tensor) and not hasattr(shape, "_as_graph_element"):
        shape = np.asarray(shape, dtype=np.int32)
    return apply("BroadcastTo", [input, shape], name=name or "BroadcastTo")


BroadcastArgs = defop("BroadcastArgs", cost=default_cost, differentiable=False)


@BroadcastArgs.shape
def _broadcast_args_shape(op):
    a, b = op.inputs
    if a.dtype != b.dtype or a.dtype not in _dt.INTS:
        raise InvalidArgumentError(
            f"BroadcastArgs: shapes must be int32/int64 of one dtype, got {a.dtype.name} and "
            f"{b.dtype.name}"
        )
    na = a.shape.dims[0] if a.shape.dims else None
    nb = b.shape.dims[0] if b.shape.dims else None
    return [(TensorShape([None if na is None or nb is None else max(na, nb)]), a.dtype)]


@BroadcastArgs.kernel("cpu", "gpu")
def _broadcast_args(ctx, a, b):
    sa, sb = tuple(int(d) for d in a.tolist()), tuple(int(d) for d in b.tolist())
    try:
        out = np.broadcast_shapes(sa, sb)
    except ValueError:
        raise InvalidArgumentError(
            f"BroadcastArgs {ctx.op.name!r}: shapes {sa} and {sb} are incompatible"
        ) from None
    return ctx.xp.asarray(np.asarray(out, dtype=a.dtype))


def broadcast_dynamic_shape(shape_x: Any, shape_y: Any) -> Tensor:
    """The broadcast of two shape vectors (int tensors), computed when the graph runs."""
    x = convert_to_tensor(shape_x)
    y = (
        shape_y
        if isinstance(shape_y, Tensor)
        else convert_to_tensor(np.asarray(shape_y, x.dtype.np))
    )
    return apply("BroadcastArgs", [x, y], name="BroadcastArgs")


def broadcast_static_shape(shape_x: Any, shape_y: Any) -> TensorShape:
    """The broadcast of two static shapes; ValueError when they are incompatible, as in TF."""
    try:
        return broadcast_shapes(
            "broadcast_static_shape", TensorShape(shape_x), TensorShape(shape_y)
        )
    except InvalidArgumentError as e:
        raise ValueError(e.message) from None


def shape_n(input: Any, out_type: Any = _dt.int32, name: str | None = None) -> list[Tensor]:
    """The shapes of a list of tensors."""
    from .array import shape

    with name_scope(name or "ShapeN"):
        return [shape(x, out_type=out_type) for x in input]


# ---- sequence_mask, meshgrid ---------------------------------------------------------------------


def sequence_mask(
    lengths: Any, maxlen: Any = None, dtype: Any = _dt.bool_, name: str | None = None
) -> Tensor:
    """``mask[..., j] = j < lengths[...]`` for j < ``maxlen`` (default ``max(lengths)``)."""
    from .array import cast, reshape
    from .manip import expand_dims, range_
    from .math import less, reduce_max

    with name_scope(name or "SequenceMask"):
        n = convert_to_tensor(lengths)
        if maxlen is None:
            maxlen = reduce_max(n)
        m = convert_to_tensor(maxlen) if isinstance(maxlen, Tensor) else int(maxlen)
        if isinstance(m, Tensor) and m.dtype != n.dtype:
            m = cast(m, n.dtype)
        r = range_(0, m, 1, dtype=n.dtype) if isinstance(m, Tensor) else None
        if r is None:
            r = convert_to_tensor(np.arange(m, dtype=n.dtype.np))
        if isinstance(m, Tensor) and r.shape.ndims is None:
            r = reshape(r, [-1])
        mask = less(r, expand_dims(n, -1))
        dt = _dt.as_dtype(dtype)
        return mask if dt == _dt.bool_ else cast(mask, dt)


def meshgrid(*args: Any, **kwargs: Any) -> list[Tensor]:
    """Coordinate grids of 1-d tensors; ``indexing="xy"`` (default) swaps the first two
    output dimensions, ``"ij"`` keeps the argument order."""
    from .array import reshape, size
    from .manip import stack

    indexing = kwargs.pop("indexing", "xy")
    name = kwargs.pop("name", "meshgrid")
    if kwargs:
        raise TypeError(f"meshgrid: unexpected arguments {sorted(kwargs)}")
    if indexing not in ("xy", "ij"):
        raise InvalidArgumentError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    with name_scope(name):
        xs = [convert_to_tensor(a) for a in args]
        n = len(xs)
        if n == 0:
            return []
        swap = indexing == "xy" and n > 1
        order = list(range(n))
        if swap:
            order[0], order[1] = 1, 0
        statics = [x.shape.num_elements() for x in xs]
        if all(v is not None for v in statics):
            full = [statics[i] for i in order]
        else:
            sizes = [size(x) for x in xs]
            full = stack([sizes[i] for i in order])
        outs = []
        for i, x in enumerate(xs):
            pos = order.index(i)
            shp = [1] * n
            shp[pos] = -1
            outs.append(broadcast_to(reshape(x, shp), full))
        return outs


# ---- SpaceToDepth, DepthToSpace (NHWC) ------------------------------------------------------------


def _s2d(xp: Any, x: Any, b: int) -> Any:
    n, h, w, c = x.shape
    y = x.reshape(n, h // b, b, w // b, b, c).transpose(0, 1, 3, 2, 4, 5)
    return y.reshape(n, h // b, w // b, b * b * c)


def _d2s(xp: Any, x: Any, b: int) -> Any:
    n, h, w, c = x.shape
    y = x.reshape(n, h, w, b, b, c // (b * b)).transpose(0, 1, 3, 2, 4, 5)
    return y.reshape(n, h * b, w * b, c // (b * b))


def _layout_op(op_name: str, to_depth: bool):
    d = defop(op_name, cost=default_cost)

    @d.shape
    def _shape(op):
        x = op.inputs[0]
        b = op.attrs["block_size"]
        if x.shape.ndims not in (None, 4):
            raise InvalidArgumentError(f"{op_name}: input must be 4-d NHWC, got {x.shape}")
        if x.shape.dims is None:
            return [(TensorShape([None] * 4), x.dtype)]
        n, h, w, c = x.shape.dims
        if to_depth:
            for what, v in (("height", h), ("width", w)):
                if v is not None and v % b:
                    raise InvalidArgumentError(
                        f"{op_name}: {what} {v} is not divisible by block_size {b} ({x.shape})"
                    )
            dims = [n, None if h is None else h // b, None if w is None else w // b]
            dims.append(None if c is None else c * b * b)
        else:
            if c is not None and c % (b * b):
                raise InvalidArgumentError(
                    f"{op_name}: depth {c} is not divisible by block_size^2 = {b * b} ({x.shape})"
                )
            dims = [n, None if h is None else h * b, None if w is None else w * b]
            dims.append(None if c is None else c // (b * b))
        return [(TensorShape(dims), x.dtype)]

    @d.kernel("cpu", "gpu")
    def _kernel(ctx, x):
        b = ctx.attrs["block_size"]
        n, h, w, c = x.shape
        if (to_depth and (h % b or w % b)) or (not to_depth and c % (b * b)):
            raise InvalidArgumentError(
                f"{op_name} {ctx.op.name!r}: shape {x.shape} does not fit block_size {b}"
            )
        y = _s2d(ctx.xp, x, b) if to_depth else _d2s(ctx.xp, x, b)
        return ctx.xp.ascontiguousarray(y)

    @d.gradient
    def _grad(op, g):
        other = "DepthToSpace" if to_depth else "SpaceToDepth"
        return [apply(other, [g], op.attrs, name=other)]

    return d


SpaceToDepth = _layout_op("SpaceToDepth", True)
DepthToSpace = _layout_op("DepthToSpace", False)


def _block(fn: str, block_size: Any, data_format: str) -> dict:
    if data_format != "NHWC":
        raise InvalidArgumentError(f"{fn}: only data_format='NHWC' is supported, got {data_format}")
    if int(block_size) < 2:
        raise InvalidArgumentError(f"{fn}: block_size must be >= 2, got {block_size}")
    return {"block_size": int(block_size)}


def space_to_depth(input: Any, block_size: int, name=None, data_format: str = "NHWC") -> Tensor:
    """Moves ``block_size`` x ``block_size`` blocks of height and width into depth (NHWC)."""
    attrs = _block("space_to_depth", block_size, data_format)
    return apply("SpaceToDepth", [input], attrs, name or "SpaceToDepth")


def depth_to_space(input: Any, block_size: int, name=None, data_format: str = "NHWC") -> Tensor:
    """The inverse of space_to_depth: depth moves into blocks of height and width (NHWC)."""
    attrs = _block("depth_to_space", block_size, data_format)
    return apply("DepthToSpace", [input], attrs, name or "DepthToSpace")


# ---- SpaceToBatchND, BatchToSpaceND --------------------------------------------------------------


def _s2b(xp: Any, x: Any, block: tuple, pads: tuple) -> Any:
    m = len(block)
    x = xp.pad(x, [(0, 0), *pads, *[(0, 0)] * (x.ndim - 1 - m)])
    b, sp, rest = x.shape[0], x.shape[1 : m + 1], x.shape[m + 1 :]
    split = [b]
    for s, k in zip(sp, block):
        split += [s // k, k]
    y = x.reshape(*split, *rest)
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)]
    perm += list(range(1 + 2 * m, y.ndim))
    y = y.transpose(perm)
    return y.reshape(b * int(np.prod(block)), *[s // k for s, k in zip(sp, block)], *rest)


def _b2s(xp: Any, x: Any, block: tuple, crops: tuple) -> Any:
    m = len(block)
    n = int(np.prod(block))
    b, sp, rest = x.shape[0] // n, x.shape[1 : m + 1], x.shape[m + 1 :]
    y = x.reshape(*block, b, *sp, *rest)
    perm = [m]
    for i in range(m):
        perm += [m + 1 + i, i]
    perm += list(range(2 * m + 1, y.ndim))
    y = y.transpose(perm).reshape(b, *[s * k for s, k in zip(sp, block)], *rest)
    idx = (slice(None),) + tuple(slice(c0, s * k - c1) for (c0, c1), s, k in zip(crops, sp, block))
    return xp.ascontiguousarray(y[idx])


def _space_batch_op(op_name: str, to_batch: bool):
    d = defop(op_name, cost=default_cost)

    def _check(where: str, shape: tuple, block: tuple, pads: tuple) -> None:
        m = len(block)
        if len(shape) < m + 1:
            raise InvalidArgumentError(
                f"{where}: input of rank {len(shape)} needs rank >= {m + 1} for block_shape {block}"
            )
        if to_batch:
            for i, (s, k, (p0, p1)) in enumerate(zip(shape[1:], block, pads)):
                if s is not None and (s + p0 + p1) % k:
                    raise InvalidArgumentError(
                        f"{where}: padded dimension {i + 1} ({s} + {p0} + {p1}) is not divisible "
                        f"by block size {k}"
                    )
        else:
            n = int(np.prod(block))
            if shape[0] is not None and shape[0] % n:
                raise InvalidArgumentError(
                    f"{where}: batch {shape[0]} is not divisible by prod(block_shape) = {n}"
                )
            for i, (s, k, (c0, c1)) in enumerate(zip(shape[1:], block, pads)):
                if s is not None and c0 + c1 > s * k:
                    raise InvalidArgumentError(
                        f"{where}: crops {c0} + {c1} exceed dimension {i + 1} ({s * k})"
                    )

    @d.shape
    def _shape(op):
        x = op.inputs[0]
        block, pads = op.attrs["block_shape"], op.attrs["pads"]
        if x.shape.dims is None:
            return [(TensorShape(None), x.dtype)]
        dims = list(x.shape.dims)
        _check(op_name, tuple(dims), block, pads)
        m, n = len(block), int(np.prod(block))
        out = [None if dims[0] is None else (dims[0] * n if to_batch else dims[0] // n)]
        for s, k, (p0, p1) in zip(dims[1 : m + 1], block, pads):
            out.append(None if s is None else ((s + p0 + p1) // k if to_batch else s * k - p0 - p1))
        return [(TensorShape(out + dims[m + 1 :]), x.dtype)]

    @d.kernel("cpu", "gpu")
    def _kernel(ctx, x):
        block, pads = ctx.attrs["block_shape"], ctx.attrs["pads"]
        _check(f"{op_name} {ctx.op.name!r}", x.shape, block, pads)
        if to_batch:
            return ctx.xp.ascontiguousarray(_s2b(ctx.xp, x, block, pads))
        return _b2s(ctx.xp, x, block, pads)

    @d.gradient
    def _grad(op, g):
        other = "BatchToSpaceND" if to_batch else "SpaceToBatchND"
        return [apply(other, [g], op.attrs, name=other)]

    return d


SpaceToBatchND = _space_batch_op("SpaceToBatchND", True)
BatchToSpaceND = _space_batch_op("BatchToSpaceND", False)


def _block_attrs(fn: str, block_shape: Any, pads: Any, what: str) -> dict:
    block = _ints(fn, "block_shape", block_shape)
    if not block or any(k < 1 for k in block):
        raise InvalidArgumentError(f"{fn}: block_shape must be ints >= 1, got {block}")
    flat = _ints(fn, what, np.reshape(np.asarray(_static_pairs(fn, pads, what)), -1))
    if len(flat) != 2 * len(block) or any(p < 0 for p in flat):
        raise InvalidArgumentError(
            f"{fn}: {what} must be {len(block)} pairs of ints >= 0, got {list(flat)}"
        )
    return {"block_shape": block, "pads": tuple(zip(flat[::2], flat[1::2]))}


def _static_pairs(fn: str, pads: Any, what: str) -> np.ndarray:
    from .manip import _static

    return _static(fn, what, pads)


def space_to_batch_nd(input: Any, block_shape: Any, paddings: Any, name=None) -> Tensor:
    """Pads the spatial dimensions 1..M by ``paddings`` and moves blocks of ``block_shape`` into
    the batch dimension (static block_shape and paddings)."""
    attrs = _block_attrs("space_to_batch_nd", block_shape, paddings, "paddings")
    return apply("SpaceToBatchND", [input], attrs, name or "SpaceToBatchND")


def batch_to_space_nd(input: Any, block_shape: Any, crops: Any, name=None) -> Tensor:
    """The inverse of space_to_batch_nd: batch blocks back into space, then ``crops``."""
    attrs = _block_attrs("batch_to_space_nd", block_shape, crops, "crops")
    return apply("BatchToSpaceND", [input], attrs, name or "BatchToSpaceND")


def space_to_batch(input: Any, paddings: Any, block_size: int, name=None) -> Tensor:
    """TF1's 4-d ``space_to_batch``: space_to_batch_nd with a square block."""
    b = int(block_size)
    return space_to_batch_nd(input, [b, b], paddings, name=name)


def batch_to_space(input: Any, crops: Any, block_size: int, name=None) -> Tensor:
    """TF1's 4-d ``batch_to_space``: batch_to_space_nd with a square block."""
    b = int(block_size)
    return batch_to_space_nd(input, [b, b], crops, name=name)
