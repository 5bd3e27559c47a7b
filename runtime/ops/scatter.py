"""N-d gathers and scatters (TF1 semantics): gather_nd, scatter_nd, tensor_scatter_nd_*, and the
in-place variable updates scatter_nd_* and scatter_{mul,div,max,min}.

An index tuple ``indices[..., :K]`` addresses a slice ``params[i0, ..., iK-1]``; repeated indices
sum in scatter_nd and tensor_scatter_nd_add; an index outside the shape raises
InvalidArgumentError naming the op and the index.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError, UnimplementedError
from ..graph import Tensor, TensorShape
from ..registry import Cost, apply, convert_to_tensor, defop, nbytes, numel
from .manip import _add_at, _copy_out_cost

# ---- shared helpers ------------------------------------------------------------------------------


def const_value(t: Tensor) -> np.ndarray | None:
    """The value of ``t`` when known before running (a Const, or a simulation's value)."""
    v = getattr(t, "value", None)
    if v is not None:
        return np.asarray(v)
    if t.op.type == "Const":
        return np.asarray(t.op.attrs["value"])
    return None


def _check_int(where: str, t: Tensor, what: str = "indices") -> None:
    if t.dtype not in _dt.INTS:
        raise InvalidArgumentError(f"{where}: {what} must be int32 or int64, got {t.dtype.name}")


def _flat_rows(xp: Any, where: str, idx: Any, shape: tuple) -> Any:
    """Row numbers into ``shape[:K]`` flattened, for ``idx`` of shape [..., K]; raises naming the
    first index tuple outside ``shape``."""
    k = idx.shape[-1]
    flat = idx.reshape(-1, k)
    rows = xp.zeros(flat.shape[0], dtype=np.int64)
    if flat.shape[0] == 0:
        return rows
    bad = xp.zeros(flat.shape[0], dtype=bool)
    for j in range(k):
        col = flat[:, j].astype(np.int64)
        bad |= (col < 0) | (col >= shape[j])
        rows = rows * shape[j] + col
    if bool(bad.any()):
        i = int(xp.argmax(bad))
        pos = np.unravel_index(i, idx.shape[:-1])
        raise InvalidArgumentError(
            f"{where}: indices[{','.join(str(int(p)) for p in pos)}] = "
            f"{[int(v) for v in flat[i].tolist()]} does not index into shape {tuple(shape)}"
        )
    return rows


def apply_at(xp: Any, kind: str, out: Any, rows: Any, vals: Any) -> None:
    """``out[rows] = kind(out[rows], vals)`` in place, every repeated row applied in turn."""
    if rows.size == 0:
        return
    if kind == "add":
        _add_at(xp, out, rows, vals)
        return
    if kind == "sub":
        _add_at(xp, out, rows, -vals)
        return
    if kind == "update":
        out[rows] = vals
        return
    order = xp.argsort(rows)
    s = rows[order]
    occ = xp.empty_like(rows)
    occ[order] = xp.arange(rows.size) - xp.searchsorted(s, s, side="left")
    for r in range(int(occ.max()) + 1):  # one round per repeat: each row once per round
        sel = occ == r
        rr = rows[sel]
        out[rr] = _combine(xp, kind, out[rr], vals[sel])


def _combine(xp: Any, kind: str, a: Any, b: Any) -> Any:
    if kind == "max":
        return xp.maximum(a, b)
    if kind == "min":
        return xp.minimum(a, b)
    if kind == "mul":
        return a * b
    if kind == "div":
        if a.dtype.kind in "iu":
            return xp.trunc(a / b).astype(a.dtype)  # C++ integer division, as TF
        return a / b
    raise ValueError(kind)


def _nd_shapes(where: str, idx: TensorShape, upd: TensorShape, shape: TensorShape) -> None:
    """updates.shape must be indices.shape[:-1] + shape[K:]."""
    if idx.dims is None or upd.dims is None or shape.dims is None or idx.dims[-1] is None:
        return
    k = idx.dims[-1]
    if k > len(shape.dims):
        raise InvalidArgumentError(
            f"{where}: indices.shape[-1] = {k} is more than the rank of shape {shape}"
        )
    want = TensorShape([*idx.dims[:-1], *shape.dims[k:]])
    if not want.is_compatible_with(upd):
        raise InvalidArgumentError(
            f"{where}: updates shape {upd} must be indices.shape[:-1] + shape[{k}:] = {want}"
        )


def _rank_ge1(where: str, idx: Tensor) -> None:
    if idx.shape.ndims == 0:
        raise InvalidArgumentError(f"{where}: indices must have rank >= 1, got a scalar")


# ---- GatherNd ------------------------------------------------------------------------------------

GatherNd = defop("GatherNd", cost=_copy_out_cost)


@GatherNd.shape
def _gather_nd_shape(op):
    params, idx = op.inputs
    _check_int("GatherNd", idx)
    _rank_ge1("GatherNd", idx)
    if params.shape.dims is None or idx.shape.dims is None or idx.shape.dims[-1] is None:
        return [(TensorShape(None), params.dtype)]
    k = idx.shape.dims[-1]
    if k > params.shape.ndims:
        raise InvalidArgumentError(
            f"GatherNd: indices.shape[-1] = {k} is more than the rank of params {params.shape}"
        )
    return [(TensorShape([*idx.shape.dims[:-1], *params.shape.dims[k:]]), params.dtype)]


@GatherNd.kernel("cpu", "gpu")
def _gather_nd(ctx, params, idx):
    xp = ctx.xp
    k = idx.shape[-1]
    if k > params.ndim:
        raise InvalidArgumentError(
            f"GatherNd {ctx.op.name!r}: indices.shape[-1] = {k} > rank of params {params.shape}"
        )
    rows = _flat_rows(xp, f"GatherNd {ctx.op.name!r}", idx, params.shape)
    rest = params.shape[k:]
    flat = params.reshape((int(np.prod(params.shape[:k], dtype=np.int64)), *rest))
    return xp.take(flat, rows, axis=0).reshape((*idx.shape[:-1], *rest))


@GatherNd.gradient
def _gather_nd_grad(op, g):
    from .array import shape

    params, idx = op.inputs
    if params.shape.is_fully_defined():
        return [scatter_nd(idx, g, params.shape.as_list()), None]
    return [scatter_nd(idx, g, shape(params, out_type=idx.dtype)), None]


def gather_nd(params: Any, indices: Any, name: str | None = None, batch_dims: int = 0) -> Tensor:
    """Slices ``params[indices[..., 0], ..., indices[..., K-1]]``: shape
    ``indices.shape[:-1] + params.shape[K:]``; the gradient scatters into zeros."""
    if batch_dims:
        raise UnimplementedError("gather_nd: batch_dims is not supported in hetbed")
    return apply("GatherNd", [params, indices], name=name or "GatherNd")


# ---- ScatterNd -----------------------------------------------------------------------------------

ScatterNd = defop("ScatterNd")


@ScatterNd.shape
def _scatter_nd_shape(op):
    idx, upd, shp = op.inputs
    _check_int("ScatterNd", idx)
    _check_int("ScatterNd", shp, "shape")
    _rank_ge1("ScatterNd", idx)
    v = const_value(shp)
    if v is not None:
        out = TensorShape([int(d) for d in v.reshape(-1)])
    elif shp.shape.dims is not None and shp.shape.dims[0] is not None:
        out = TensorShape([None] * shp.shape.dims[0])
    else:
        out = TensorShape(None)
    _nd_shapes("ScatterNd", idx.shape, upd.shape, out)
    return [(out, upd.dtype)]


@ScatterNd.kernel("cpu", "gpu")
def _scatter_nd(ctx, idx, upd, shp):
    xp = ctx.xp
    shape = tuple(int(d) for d in shp.tolist())
    k = idx.shape[-1]
    want = (*idx.shape[:-1], *shape[k:])
    if k > len(shape) or upd.shape != want:
        raise InvalidArgumentError(
            f"ScatterNd {ctx.op.name!r}: updates shape {upd.shape} must be indices.shape[:-1] + "
            f"shape[{k}:] = {want} (indices {idx.shape}, shape {shape})"
        )
    out = xp.zeros(shape, dtype=upd.dtype)
    rows = _flat_rows(xp, f"ScatterNd {ctx.op.name!r}", idx, shape)
    flat = out.reshape((-1, *shape[k:]))
    _add_at(xp, flat, rows, upd.reshape((-1, *shape[k:])))
    return out


@ScatterNd.cost
def _scatter_nd_cost(op, ins, outs):
    """Zero-fill the output, then add each update into it."""
    upd = nbytes(ins[1], op.inputs[1].dtype)
    idx = nbytes(ins[0], op.inputs[0].dtype)
    out = nbytes(outs[0], op.outputs[0].dtype)
    return Cost(float(numel(ins[1])), float(upd + idx + out), float(out))


@ScatterNd.gradient
def _scatter_nd_grad(op, g):
    return [None, gather_nd(g, op.inputs[0]), None]


def scatter_nd(indices: Any, updates: Any, shape: Any, name: str | None = None) -> Tensor:
    """Zeros of ``shape`` with ``updates`` added at ``indices`` (repeated indices sum)."""
    idx = convert_to_tensor(indices)
    if isinstance(shape, TensorShape):
        shape = shape.as_list()
    if not isinstance(shape, Tensor) and not hasattr(shape, "_as_graph_element"):
        shape = np.asarray(shape, dtype=idx.dtype.np)
    return apply("ScatterNd", [idx, updates, shape], name=name or "ScatterNd")


# ---- TensorScatterUpdate / Add / Sub -------------------------------------------------------------


def _tensor_scatter(kind: str, op_name: str):
    d = defop(op_name, cost=_copy_out_cost)

    @d.shape
    def _shape(op):
        t, idx, upd = op.inputs
        _check_int(op_name, idx)
        _rank_ge1(op_name, idx)
        if upd.dtype != t.dtype:
            raise InvalidArgumentError(
                f"{op_name}: updates dtype {upd.dtype.name} != tensor dtype {t.dtype.name}"
            )
        _nd_shapes(op_name, idx.shape, upd.shape, t.shape)
        return [(t.shape, t.dtype)]

    @d.kernel("cpu", "gpu")
    def _kernel(ctx, t, idx, upd):
        k = idx.shape[-1]
        want = (*idx.shape[:-1], *t.shape[k:])
        if k > t.ndim or upd.shape != want:
            raise InvalidArgumentError(
                f"{op_name} {ctx.op.name!r}: updates shape {upd.shape} must be "
                f"indices.shape[:-1] + tensor.shape[{k}:] = {want}"
            )
        rows = _flat_rows(ctx.xp, f"{op_name} {ctx.op.name!r}", idx, t.shape)
        out = t.copy()
        flat = out.reshape((-1, *t.shape[k:]))
        apply_at(ctx.xp, kind, flat, rows, upd.reshape((-1, *t.shape[k:])))
        return out

    @d.gradient
    def _grad(op, g):
        from .math import negative, zeros_like

        t, idx, upd = op.inputs
        gu = gather_nd(g, idx)
        if kind == "update":
            return [apply(op_name, [g, idx, zeros_like(upd)], name=op_name), None, gu]
        return [g, None, negative(gu) if kind == "sub" else gu]

    return d


TensorScatterUpdate = _tensor_scatter("update", "TensorScatterUpdate")
TensorScatterAdd = _tensor_scatter("add", "TensorScatterAdd")
TensorScatterSub = _tensor_scatter("sub", "TensorScatterSub")


def tensor_scatter_nd_update(tensor: Any, indices: Any, updates: Any, name: str | None = None):
    """A copy of ``tensor`` with the slices at ``indices`` replaced by ``updates``."""
    t = convert_to_tensor(tensor)
    u = updates if isinstance(updates, Tensor) else convert_to_tensor(updates, dtype=t.dtype)
    return apply("TensorScatterUpdate", [t, indices, u], name=name or "TensorScatterUpdate")


def tensor_scatter_nd_add(tensor: Any, indices: Any, updates: Any, name: str | None = None):
    """A copy of ``tensor`` with ``updates`` added at ``indices`` (repeated indices sum)."""
    t = convert_to_tensor(tensor)
    u = updates if isinstance(updates, Tensor) else convert_to_tensor(updates, dtype=t.dtype)
    return apply("TensorScatterAdd", [t, indices, u], name=name or "TensorScatterAdd")


def tensor_scatter_nd_sub(tensor: Any, indices: Any, updates: Any, name: str | None = None):
    """A copy of ``tensor`` with ``updates`` subtracted at ``indices``."""
    t = convert_to_tensor(tensor)
    u = updates if isinstance(updates, Tensor) else convert_to_tensor(updates, dtype=t.dtype)
    return apply("TensorScatterSub", [t, indices, u], name=name or "TensorScatterSub")


# ---- variable updates: ScatterNd{Update,Add,Sub}, Scatter{Mul,Div,Max,Min} -----------------------


def _var_update_cost(op, ins, outs):
    b = nbytes(ins[2], op.inputs[2].dtype)
    return Cost(float(numel(ins[2])), 2.0 * b, float(b))


def _var_nd_shape(op):
    ref, idx, upd = op.inputs
    _check_int(op.type, idx)
    _rank_ge1(op.type, idx)
    if upd.dtype != ref.dtype:
        raise InvalidArgumentError(f"{op.type}: updates dtype {upd.dtype.name} != {ref.dtype.name}")
    _nd_shapes(op.type, idx.shape, upd.shape, ref.shape)
    return [(ref.shape, ref.dtype)]


def _var_nd(kind: str, op_name: str):
    from .state import _locking

    d = defop(op_name, shape=_var_nd_shape, stateful=True, differentiable=False)

    @d.kernel("cpu", "gpu")
    def _kernel(ctx, h, idx, upd):
        with _locking(ctx, h):
            v = h.writable()
            k = idx.shape[-1]
            want = (*idx.shape[:-1], *v.shape[k:])
            if k > v.ndim or upd.shape != want:
                raise InvalidArgumentError(
                    f"{op_name} {ctx.op.name!r}: updates shape {upd.shape} must be "
                    f"indices.shape[:-1] + ref.shape[{k}:] = {want}"
                )
            rows = _flat_rows(ctx.xp, f"{op_name} {ctx.op.name!r} ({h.name})", idx, v.shape)
            flat = v.reshape((-1, *v.shape[k:]))  # a view: v is C-contiguous
            apply_at(ctx.xp, kind, flat, rows, upd.reshape((-1, *v.shape[k:])))
        return v

    d.cost(_var_update_cost)
    return d


ScatterNdUpdate = _var_nd("update", "ScatterNdUpdate")
ScatterNdAdd = _var_nd("add", "ScatterNdAdd")
ScatterNdSub = _var_nd("sub", "ScatterNdSub")


def _var_rows(kind: str, op_name: str):
    from .state import _check_rows, _locking, _scatter_shape

    d = defop(op_name, shape=_scatter_shape, stateful=True, differentiable=False)

    @d.kernel("cpu", "gpu")
    def _kernel(ctx, h, idx, upd):
        with _locking(ctx, h):
            v = _check_rows(h, idx, ctx.op.name)
            rows = idx.reshape(-1)
            apply_at(ctx.xp, kind, v, rows, upd.reshape((rows.size, *v.shape[1:])))
        return v

    d.cost(_var_update_cost)
    return d


ScatterMul = _var_rows("mul", "ScatterMul")
ScatterDiv = _var_rows("div", "ScatterDiv")
ScatterMax = _var_rows("max", "ScatterMax")
ScatterMin = _var_rows("min", "ScatterMin")


def _var_scatter(op_type: str, ref: Any, indices: Any, updates: Any, use_locking: bool, name):
    from .state import _scatter

    return _scatter(op_type, ref, indices, updates, use_locking, name)


def scatter_nd_update(ref: Any, indices: Any, updates: Any, use_locking: bool = True, name=None):
    """``ref[indices] = updates`` in place for N-d ``indices``; returns the variable's value."""
    return _var_scatter("ScatterNdUpdate", ref, indices, updates, use_locking, name)


def scatter_nd_add(ref: Any, indices: Any, updates: Any, use_locking: bool = False, name=None):
    """``ref[indices] += updates`` in place for N-d ``indices`` (repeats all add)."""
    return _var_scatter("ScatterNdAdd", ref, indices, updates, use_locking, name)


def scatter_nd_sub(ref: Any, indices: Any, updates: Any, use_locking: bool = False, name=None):
    """``ref[indices] -= updates`` in place for N-d ``indices`` (repeats all subtract)."""
    return _var_scatter("ScatterNdSub", ref, indices, updates, use_locking, name)


def scatter_mul(ref: Any, indices: Any, updates: Any, use_locking: bool = False, name=None):
    """``ref[indices] *= updates`` in place (repeats all multiply)."""
    return _var_scatter("ScatterMul", ref, indices, updates, use_locking, name)


def scatter_div(ref: Any, indices: Any, updates: Any, use_locking: bool = False, name=None):
    """``ref[indices] /= updates`` in place (repeats all divide)."""
    return _var_scatter("ScatterDiv", ref, indices, updates, use_locking, name)


def scatter_max(ref: Any, indices: Any, updates: Any, use_locking: bool = False, name=None):
    """``ref[indices] = maximum(ref[indices], updates)`` in place."""
    return _var_scatter("ScatterMax", ref, indices, updates, use_locking, name)


def scatter_min(ref: Any, indices: Any, updates: Any, use_locking: bool = False, name=None):
    """``ref[indices] = minimum(ref[indices], updates)`` in place."""
    return _var_scatter("ScatterMin", ref, indices, updates, use_locking, name)
