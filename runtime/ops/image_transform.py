"""Projective image transforms (TF1's ``tf.contrib.image``: ``transform``, ``rotate``,
``translate`` and the transform algebra) and ``bipartite_match``.

A transform is 8 numbers ``[a0, a1, a2, b0, b1, b2, c0, c1]`` mapping an output pixel
``(x, y)`` (column, row) to the input point ``((a0 x + a1 y + a2) / k, (b0 x + b1 y + b2) / k)``
with ``k = c0 x + c1 y + 1``, in float32 as TF's kernel computes it. ``NEAREST`` reads the input
at the rounded point (halves away from zero), ``BILINEAR`` blends its four neighbours; any read
outside the image (and ``k == 0``) gives 0. The gradient with respect to the images is the
transform of the gradient by the inverse transforms, as TF defines it.

``bipartite_match`` is the greedy matching of object detection: the smallest remaining distance
among the first ``num_valid_rows`` rows is matched first, until ``top_k`` pairs (all possible
when negative); equal distances are taken in row-major order (TF's sort leaves their order to
the C++ library).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import TensorShape, name_scope
from ..registry import apply, convert_to_tensor, defop

ImageProjectiveTransformV2 = defop("ImageProjectiveTransformV2")
BipartiteMatch = defop("BipartiteMatch", differentiable=False)

_INTERPOLATIONS = ("NEAREST", "BILINEAR")


@ImageProjectiveTransformV2.shape
def _transform_shape(op):
    images = op.inputs[0]
    dims = images.shape.dims if images.shape.ndims == 4 else [None] * 4
    out = op.attrs.get("out_hw") or (None, None)
    return [(TensorShape([dims[0], out[0], out[1], dims[3]]), images.dtype)]


def _round_half_away(v: np.ndarray) -> np.ndarray:
    return np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))


def transform_np(
    images: np.ndarray, transforms: np.ndarray, out_hw: tuple, interp: str, where: str
):
    """The kernel on numpy arrays: ``images`` [N, H, W, C], ``transforms`` [N or 1, 8]."""
    images = np.asarray(images)
    t = np.asarray(transforms, np.float32)
    if images.ndim != 4:
        raise InvalidArgumentError(f"{where}: images must be [batch, height, width, channels]")
    n, h, w, c = images.shape
    if t.ndim != 2 or t.shape[1] != 8 or t.shape[0] not in (1, n):
        raise InvalidArgumentError(
            f"{where}: transforms must be [1, 8] or [{n}, 8] for {n} images, got {list(t.shape)}"
        )
    oh, ow = out_hw
    if oh < 0 or ow < 0:
        raise InvalidArgumentError(f"{where}: output_shape must be non-negative, got {[oh, ow]}")
    t = np.broadcast_to(t, (n, 8))[:, :, None, None]
    ys, xs = np.meshgrid(
        np.arange(oh, dtype=np.float32), np.arange(ow, dtype=np.float32), indexing="ij"
    )
    k = t[:, 6] * xs + t[:, 7] * ys + np.float32(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        in_x = (t[:, 0] * xs + t[:, 1] * ys + t[:, 2]) / k
        in_y = (t[:, 3] * xs + t[:, 4] * ys + t[:, 5]) / k
    valid = k != 0
    bi = np.arange(n)[:, None, None]

    def read(yy: np.ndarray, xx: np.ndarray) -> np.ndarray:
        ok = valid & (yy >= 0) & (yy < h) & (xx >= 0) & (xx < w)
        yi = np.where(ok, yy, 0).astype(np.int64)
        xi = np.where(ok, xx, 0).astype(np.int64)
        vals = images[bi, yi, xi].astype(np.float32 if images.dtype != np.float64 else np.float64)
        return np.where(ok[..., None], vals, 0)

    if interp == "NEAREST":
        with np.errstate(invalid="ignore"):
            out = read(_round_half_away(in_y), _round_half_away(in_x))
    else:
        with np.errstate(invalid="ignore"):
            y0, x0 = np.floor(in_y), np.floor(in_x)
        y1, x1 = y0 + 1, x0 + 1
        wx0, wx1 = (x1 - in_x)[..., None], (in_x - x0)[..., None]
        top = wx0 * read(y0, x0) + wx1 * read(y0, x1)
        bottom = wx0 * read(y1, x0) + wx1 * read(y1, x1)
        out = (y1 - in_y)[..., None] * top + (in_y - y0)[..., None] * bottom
        out = np.where(valid[..., None], out, 0)
    if np.issubdtype(images.dtype, np.integer):
        out = np.trunc(np.nan_to_num(out))
    return np.asarray(out, dtype=images.dtype).reshape(n, oh, ow, c)


@ImageProjectiveTransformV2.kernel("cpu")
def _transform_kernel(ctx, images, transforms, output_shape):
    hw = tuple(int(v) for v in np.asarray(output_shape).reshape(-1))
    if len(hw) != 2:
        raise InvalidArgumentError(
            f"ImageProjectiveTransformV2 {ctx.op.name!r}: output_shape must have 2 elements"
        )
    return transform_np(
        images,
        transforms,
        hw,
        ctx.attrs["interpolation"],
        f"ImageProjectiveTransformV2 {ctx.op.name!r}",
    )


@ImageProjectiveTransformV2.gradient
def _transform_grad(op, grad):
    from .array import shape as _shape
    from .manip import strided_slice_from_key

    images, transforms, _ = op.inputs
    inverse = matrices_to_flat_transforms(_matrix_inverse(flat_transforms_to_matrices(transforms)))
    hw = strided_slice_from_key(_shape(images), slice(1, 3))
    attrs = {"interpolation": op.attrs["interpolation"], "out_hw": None}
    return [
        apply("ImageProjectiveTransformV2", [grad, inverse, hw], attrs, "transform_grad"),
        None,
        None,
    ]


def _matrix_inverse(m: Any) -> Any:
    from .linalg import matrix_inverse

    return matrix_inverse(m)


def _as_batch(images: Any, fn: str) -> tuple:
    x = convert_to_tensor(images, name="images")
    r = x.shape.ndims
    if r is None:
        raise ValueError(f"{fn}: images must have a known rank (2, 3 or 4)")
    from .manip import expand_dims

    if r == 2:
        return expand_dims(expand_dims(x, 0), -1), r
    if r == 3:
        return expand_dims(x, 0), r
    if r == 4:
        return x, r
    raise ValueError(f"{fn}: images must have rank 2, 3 or 4, got {x.shape}")


def _from_batch(y: Any, rank: int) -> Any:
    from .manip import squeeze

    if rank == 2:
        return squeeze(y, [0, 3])
    if rank == 3:
        return squeeze(y, [0])
    return y


def transform(
    images: Any,
    transforms: Any,
    interpolation: str = "NEAREST",
    output_shape: Any = None,
    name: Any = None,
):
    """``images`` (HW, HWC or NHWC) resampled through ``transforms`` ([8] or [N, 8])."""
    interp = str(interpolation).upper()
    if interp not in _INTERPOLATIONS:
        raise ValueError(
            f"transform: interpolation must be NEAREST or BILINEAR, got {interpolation!r}"
        )
    with name_scope(name or "transform"):
        x, rank = _as_batch(images, "transform")
        if not (x.dtype.is_integer or x.dtype.is_floating):
            raise TypeError(f"transform: invalid image dtype {x.dtype.name}")
        t = convert_to_tensor(transforms, _dt.float32, name="transforms")
        if t.shape.ndims == 1:
            from .manip import expand_dims

            t = expand_dims(t, 0)
        elif t.shape.ndims not in (2, None):
            raise TypeError("Transforms should have rank 1 or 2.")
        from .array import shape as _shape
        from .manip import strided_slice_from_key

        if output_shape is None:
            hw = strided_slice_from_key(_shape(x), slice(1, 3))
            known = x.shape.dims[1:3] if x.shape.ndims == 4 else [None, None]
        else:
            hw = convert_to_tensor(output_shape, _dt.int32, name="output_shape")
            known = [None, None]
            if hw.op.type == "Const":
                known = [int(v) for v in np.asarray(hw.op.attrs["value"]).reshape(-1)]
        attrs = {"interpolation": interp, "out_hw": tuple(known)}
        out = apply("ImageProjectiveTransformV2", [x, t, hw], attrs, "ImageProjectiveTransformV2")
        return _from_batch(out, rank)


def angles_to_projective_transforms(
    angles: Any, image_height: Any, image_width: Any, name: Any = None
):
    """Transforms rotating images counterclockwise by ``angles`` (radians) about their centre."""
    from .manip import concat, expand_dims, zeros
    from .math_extra import cos, sin

    with name_scope(name or "angles_to_projective_transforms"):
        a = convert_to_tensor(angles, _dt.float32)
        if a.shape.ndims == 0:
            a = expand_dims(a, 0)
        elif a.shape.ndims != 1:
            raise TypeError("Angles should have rank 0 or 1.")
        h = convert_to_tensor(image_height, _dt.float32)
        w = convert_to_tensor(image_width, _dt.float32)
        c, s = cos(a), sin(a)
        x_off = ((w - 1) - (c * (w - 1) - s * (h - 1))) / 2.0
        y_off = ((h - 1) - (s * (w - 1) + c * (h - 1))) / 2.0
        from .array import shape as _shape
        from .manip import stack

        n = _shape(a)[0]
        cols = [c, -s, x_off, s, c, y_off]
        return concat([expand_dims(v, 1) for v in cols] + [zeros(stack([n, 2]), _dt.float32)], 1)


def translations_to_projective_transforms(translations: Any, name: Any = None):
    """Transforms shifting images by ``translations`` ``[dx, dy]`` (or [N, 2])."""
    from .manip import concat, expand_dims
    from .math import ones_like, zeros_like

    with name_scope(name or "translations_to_projective_transforms"):
        t = convert_to_tensor(translations, _dt.float32)
        if t.shape.ndims == 1:
            t = expand_dims(t, 0)
        elif t.shape.ndims != 2:
            raise TypeError("Translations should have rank 1 or 2.")
        dx, dy = t[:, 0:1], t[:, 1:2]
        one, zero = ones_like(dx), zeros_like(dx)
        return concat([one, zero, -dx, zero, one, -dy, zero, zero], 1)


def rotate(images: Any, angles: Any, interpolation: str = "NEAREST", name: Any = None):
    """``images`` rotated counterclockwise by ``angles`` radians (one per image, or one)."""
    from .array import cast
    from .array import shape as _shape

    with name_scope(name or "rotate"):
        x, rank = _as_batch(images, "rotate")
        s = cast(_shape(x), _dt.float32)
        t = angles_to_projective_transforms(angles, s[1], s[2])
        return _from_batch(transform(x, t, interpolation=interpolation), rank)


def translate(images: Any, translations: Any, interpolation: str = "NEAREST", name: Any = None):
    """``images`` shifted by ``translations`` ``[dx, dy]`` pixels."""
    with name_scope(name or "translate"):
        return transform(images, translations_to_projective_transforms(translations), interpolation)


def flat_transforms_to_matrices(transforms: Any) -> Any:
    """[N, 8] transforms as [N, 3, 3] matrices."""
    from .array import reshape
    from .array import shape as _shape
    from .manip import concat, ones, stack

    t = convert_to_tensor(transforms, _dt.float32)
    if t.shape.ndims == 1:
        from .manip import expand_dims

        t = expand_dims(t, 0)
    n = _shape(t)[0]
    return reshape(concat([t, ones(stack([n, 1]), _dt.float32)], 1), [-1, 3, 3])


def matrices_to_flat_transforms(matrices: Any) -> Any:
    """[N, 3, 3] matrices (normalised so the last entry is 1) as [N, 8] transforms."""
    from .array import reshape

    m = convert_to_tensor(matrices, _dt.float32)
    m = m / m[:, 2:3, 2:3]
    return reshape(m, [-1, 9])[:, :8]


def compose_transforms(*transforms: Any) -> Any:
    """One transform equal to applying the last of ``transforms`` first (matrix products)."""
    from .math import matmul

    if not transforms:
        raise ValueError("compose_transforms: needs at least one transform")
    m = flat_transforms_to_matrices(transforms[0])
    for t in transforms[1:]:
        m = matmul(m, flat_transforms_to_matrices(t))
    return matrices_to_flat_transforms(m)


@BipartiteMatch.shape
def _bipartite_shape(op):
    d = op.inputs[0]
    dims = d.shape.dims if d.shape.ndims == 2 else [None, None]
    return [(TensorShape([dims[0]]), _dt.int32), (TensorShape([dims[1]]), _dt.int32)]


@BipartiteMatch.kernel("cpu")
def _bipartite_kernel(ctx, distances, num_valid_rows):
    d = np.asarray(distances)
    where = f"BipartiteMatch {ctx.op.name!r}"
    if d.ndim != 2:
        raise InvalidArgumentError(f"{where}: distance_mat must be 2-D, got shape {list(d.shape)}")
    rows, cols = d.shape
    valid = int(np.asarray(num_valid_rows))
    valid = rows if valid < 0 else min(valid, rows)
    top_k = ctx.attrs["top_k"]
    limit = min(valid, cols) if top_k < 0 else min(top_k, valid, cols)
    row_match = np.full(rows, -1, np.int32)
    col_match = np.full(cols, -1, np.int32)
    order = np.argsort(d[:valid].reshape(-1), kind="stable")
    done = 0
    for flat in order:
        if done >= limit:
            break
        r, c = divmod(int(flat), cols)
        if row_match[r] < 0 and col_match[c] < 0:
            row_match[r], col_match[c] = c, r
            done += 1
    return row_match, col_match


def bipartite_match(distance_mat: Any, num_valid_rows: Any, top_k: int = -1, name: Any = None):
    """Greedy bipartite matching: ``(row_to_col_match_indices, col_to_row_match_indices)``,
    -1 where unmatched."""
    d = convert_to_tensor(distance_mat, _dt.float32, name="distance_mat")
    v = convert_to_tensor(num_valid_rows, _dt.float32, name="num_valid_rows")
    return apply("BipartiteMatch", [d, v], {"top_k": int(top_k)}, name or "BipartiteMatch")


__all__ = [
    "angles_to_projective_transforms",
    "bipartite_match",
    "compose_transforms",
    "flat_transforms_to_matrices",
    "matrices_to_flat_transforms",
    "rotate",
    "transform",
    "translate",
    "translations_to_projective_transforms",
]
