"""TF1's ``tf.contrib.image`` warps, built of ordinary ops (so their gradients are those ops'):

* ``interpolate_bilinear(grid, query_points, indexing="ij")``: ``grid`` [B, H, W, C] read at
  fractional points [B, N, 2]; each coordinate's floor clipped to [0, size - 2] and its fraction
  to [0, 1], so a point outside the grid takes the nearest edge's values (H and W >= 2).
* ``dense_image_warp(image, flow)``: ``out[b, y, x] = image[b, y - flow[b, y, x, 0],
  x - flow[b, y, x, 1]]`` by bilinear interpolation.
* ``interpolate_spline(train_points, train_values, query_points, order,
  regularization_weight=0)``: the polyharmonic spline through the training points (kernel
  ``phi(r) = r`` for order 1, ``r^2 log r`` for 2, ``r^4 log r`` for 4, ``r^k log r`` for other
  even k and ``r^k`` for odd k, of the distance r; plus an affine term), solved per batch from
  TF's block system ``[[A + w I, B], [B^T, 0]] [w; v] = [f; 0]``.
* ``sparse_image_warp(image, source_control_point_locations, dest_control_point_locations,
  interpolation_order=2, regularization_weight=0, num_boundary_points=0)``: the flow at the
  destination control points (dest - source) spread over the image by ``interpolate_spline``
  (with ``num_boundary_points`` zero-flow points per edge when > 0), then
  ``dense_image_warp``; returns the warped image and the dense flow.
"""

from __future__ import annotations

from typing import Any

import hetbed as _hb

__all__ = ["dense_image_warp", "interpolate_bilinear", "interpolate_spline", "sparse_image_warp"]

_EPSILON = 1e-10  # (TF's floor under r in phi)


def _dims(x: Any, n: int, what: str) -> list:
    """The first ``n`` dimensions of ``x``: static where known, else read when the step runs."""
    if x.shape.ndims is not None and x.shape.ndims != n:
        raise ValueError(f"{what} must be {n}-dimensional, got shape {x.shape}")
    dyn = _hb.shape(x)
    static = x.shape.as_list() if x.shape.ndims is not None else [None] * n
    return [s if s is not None else dyn[i] for i, s in enumerate(static)]


def interpolate_bilinear(
    grid: Any, query_points: Any, name: str = "interpolate_bilinear", indexing: str = "ij"
) -> Any:
    """``grid`` [B, H, W, C] at the points ``query_points`` [B, N, 2] (row, column for
    ``indexing="ij"``; x, y for ``"xy"``): [B, N, C]."""
    if indexing not in ("ij", "xy"):
        raise ValueError(f"interpolate_bilinear: indexing must be 'ij' or 'xy', got {indexing!r}")
    with _hb.name_scope(name):
        grid = _hb.convert_to_tensor(grid)
        query_points = _hb.convert_to_tensor(query_points)
        b, h, w, c = _dims(grid, 4, "interpolate_bilinear: grid")
        qb, n, two = _dims(query_points, 3, "interpolate_bilinear: query_points")
        for size, axis in ((h, "height"), (w, "width")):
            if isinstance(size, int) and size < 2:
                raise ValueError(
                    f"interpolate_bilinear: the grid's {axis} must be at least 2, got {size}"
                )
        if isinstance(two, int) and two != 2:
            raise ValueError(
                f"interpolate_bilinear: query_points' last dimension must be 2, got {two}"
            )
        qtype, gtype = query_points.dtype, grid.dtype
        coords = _hb.unstack(query_points, axis=2, num=2)
        floors, ceils, alphas = [], [], []
        for i, dim in enumerate([0, 1] if indexing == "ij" else [1, 0]):
            q = coords[dim]
            size = (h, w)[i]
            top = _hb.cast(size - 2, qtype)
            fl = _hb.minimum(_hb.maximum(_hb.constant(0.0, qtype), _hb.floor(q)), top)
            ifl = _hb.cast(fl, _hb.int32)
            floors.append(ifl)
            ceils.append(ifl + 1)
            a = _hb.cast(q - fl, gtype)
            a = _hb.minimum(_hb.maximum(_hb.constant(0.0, gtype), a), _hb.constant(1.0, gtype))
            alphas.append(_hb.expand_dims(a, 2))
        flat = _hb.reshape(grid, [b * h * w, c])
        offsets = _hb.reshape(_hb.range(b) * h * w, [b, 1])

        def at(y: Any, x: Any) -> Any:
            return _hb.reshape(_hb.gather(flat, offsets + y * w + x), [qb, n, c])

        tl, tr = at(floors[0], floors[1]), at(floors[0], ceils[1])
        bl, br = at(ceils[0], floors[1]), at(ceils[0], ceils[1])
        top_row = alphas[1] * (tr - tl) + tl
        bottom_row = alphas[1] * (br - bl) + bl
        return alphas[0] * (bottom_row - top_row) + top_row


def dense_image_warp(image: Any, flow: Any, name: str = "dense_image_warp") -> Any:
    """``image`` [B, H, W, C] warped by the per-pixel offsets ``flow`` [B, H, W, 2]: each
    output pixel reads the image at (y - flow_y, x - flow_x), bilinearly, the edge beyond it."""
    with _hb.name_scope(name):
        image = _hb.convert_to_tensor(image)
        flow = _hb.convert_to_tensor(flow)
        b, h, w, c = _dims(image, 4, "dense_image_warp: image")
        _dims(flow, 4, "dense_image_warp: flow")
        gx, gy = _hb.meshgrid(_hb.range(w), _hb.range(h))
        grid = _hb.expand_dims(_hb.cast(_hb.stack([gy, gx], axis=2), flow.dtype), 0)
        queries = _hb.reshape(grid - flow, [b, h * w, 2])
        out = interpolate_bilinear(image, queries)
        return _hb.reshape(out, [b, h, w, c])


def _phi(r: Any, order: int) -> Any:
    """The spline's kernel of the squared distance ``r`` (TF's forms, r floored at 1e-10)."""
    with _hb.name_scope("phi"):
        if order == 1:
            return _hb.sqrt(_hb.maximum(r, _EPSILON))
        if order == 2:
            return 0.5 * r * _hb.log(_hb.maximum(r, _EPSILON))
        if order == 4:
            return 0.5 * _hb.square(r) * _hb.log(_hb.maximum(r, _EPSILON))
        r = _hb.maximum(r, _EPSILON)
        if order % 2 == 0:
            return 0.5 * _hb.pow(r, 0.5 * order) * _hb.log(r)
        return _hb.pow(r, 0.5 * order)


def _squared_distances(x: Any, y: Any) -> Any:
    """[B, N, M]: |x_i - y_j|^2 as TF expands it (x^2 - 2 x.y + y^2)."""
    xx = _hb.expand_dims(_hb.reduce_sum(_hb.square(x), 2), 2)
    yy = _hb.expand_dims(_hb.reduce_sum(_hb.square(y), 2), 1)
    return xx - 2 * _hb.matmul(x, y, transpose_b=True) + yy


def interpolate_spline(
    train_points: Any,
    train_values: Any,
    query_points: Any,
    order: int,
    regularization_weight: float = 0.0,
    name: str = "interpolate_spline",
) -> Any:
    """The polyharmonic spline of ``order`` through ``train_points`` [B, N, D] with values
    ``train_values`` [B, N, K], read at ``query_points`` [B, M, D]: [B, M, K]. D and K must be
    known when the graph is built."""
    if isinstance(order, bool) or int(order) != order or order < 1:
        raise ValueError(f"interpolate_spline: order must be an integer >= 1, got {order!r}")
    with _hb.name_scope(name):
        c = _hb.convert_to_tensor(train_points)
        f = _hb.convert_to_tensor(train_values)
        q = _hb.convert_to_tensor(query_points)
        b, n, d = _dims(c, 3, "interpolate_spline: train_points")
        k = _dims(f, 3, "interpolate_spline: train_values")[2]
        if not isinstance(d, int) or not isinstance(k, int):
            raise ValueError(
                "interpolate_spline: the points' dimension (D) and the values' (K) must be "
                f"known when the graph is built, got train_points {c.shape} and train_values "
                f"{f.shape}"
            )
        with _hb.name_scope("solve"):
            a = _phi(_squared_distances(c, c), order)  # [B, N, N]
            if regularization_weight > 0:
                a = a + regularization_weight * _hb.expand_dims(_hb.eye(n, dtype=c.dtype), 0)
            bm = _hb.concat([c, _hb.ones_like(c[..., :1])], 2)  # [B, N, D + 1]
            left = _hb.concat([a, _hb.transpose(bm, [0, 2, 1])], 1)
            right = _hb.concat([bm, _hb.zeros([b, d + 1, d + 1], c.dtype)], 1)
            lhs = _hb.concat([left, right], 2)  # [B, N + D + 1, N + D + 1]
            rhs = _hb.concat([f, _hb.zeros([b, d + 1, k], c.dtype)], 1)
            wv = _hb.matrix_solve(lhs, rhs)
            w, v = wv[:, :n, :], wv[:, n:, :]
        with _hb.name_scope("predict"):
            rbf = _hb.matmul(_phi(_squared_distances(q, c), order), w)
            affine = _hb.matmul(_hb.concat([q, _hb.ones_like(q[..., :1])], 2), v)
            return rbf + affine


def _boundary_points(h: Any, w: Any, per_edge: int) -> Any:
    """[P, 2] points along the image's edges, ``per_edge + 2`` to an edge, corners once."""
    hf, wf = _hb.cast(h, _hb.float32), _hb.cast(w, _hb.float32)
    ys = _hb.linspace(0.0, hf - 1, per_edge + 2)
    xs = _hb.linspace(0.0, wf - 1, per_edge + 2)
    yy, xx = _hb.meshgrid(ys, xs, indexing="ij")
    edge = _hb.logical_or(
        _hb.logical_or(_hb.equal(xx, 0), _hb.equal(xx, wf - 1)),
        _hb.logical_or(_hb.equal(yy, 0), _hb.equal(yy, hf - 1)),
    )
    return _hb.stack([_hb.boolean_mask(yy, edge), _hb.boolean_mask(xx, edge)], axis=-1)


def _tiled(x: Any, b: Any) -> Any:
    """``x`` repeated along a new first axis of ``b`` entries."""
    reps = _hb.concat([_hb.reshape(b, [1]), _hb.ones([_hb.rank(x)], _hb.int32)], 0)
    return _hb.tile(_hb.expand_dims(x, 0), reps)


def sparse_image_warp(
    image: Any,
    source_control_point_locations: Any,
    dest_control_point_locations: Any,
    interpolation_order: int = 2,
    regularization_weight: float = 0.0,
    num_boundary_points: int = 0,
    name: str = "sparse_image_warp",
) -> tuple:
    """``image`` [B, H, W, C] warped so that each source control point [B, N, 2] (row, column)
    moves to its destination: ``(warped image, dense flow [B, H, W, 2])``."""
    with _hb.name_scope(name):
        image = _hb.convert_to_tensor(image)
        src = _hb.convert_to_tensor(source_control_point_locations)
        dst = _hb.convert_to_tensor(dest_control_point_locations)
        b, h, w, _c = _dims(image, 4, "sparse_image_warp: image")
        flows = dst - src
        ys, xs = _hb.meshgrid(
            _hb.linspace(0.0, h - 1, h), _hb.linspace(0.0, w - 1, w), indexing="ij"
        )
        pixels = _hb.reshape(_hb.stack((ys, xs), -1), [h * w, 2])
        pixels = _hb.cast(_tiled(pixels, b), image.dtype)
        if num_boundary_points > 0:
            edge = _hb.cast(_tiled(_boundary_points(h, w, num_boundary_points - 1), b), dst.dtype)
            dst = _hb.concat([dst, edge], 1)
            flows = _hb.concat([flows, _hb.zeros_like(edge)], 1)
        flat = interpolate_spline(dst, flows, pixels, interpolation_order, regularization_weight)
        dense = _hb.reshape(flat, [b, h, w, 2])
        return dense_image_warp(image, dense), dense
