"""TF1's bounding-box image ops: crop_and_resize, non_max_suppression, draw_bounding_boxes and
sample_distorted_bounding_box (Inception's preprocessing crop).

Boxes are ``[y_min, x_min, y_max, x_max]`` in coordinates normalized to [0, 1], as in TF. Each op
is one kernel that follows TensorFlow's CPU kernel rule for rule (the sampling positions of
CropAndResize, the tie order and IoU of NonMaxSuppressionV3, the pixel rectangles and retry loop
of SampleDistortedBoundingBoxV2, the default colour table of DrawBoundingBoxesV2), so values
match TensorFlow's wherever no random numbers are drawn. CropAndResize has TF's gradients with
respect to the image and to the boxes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import Tensor, TensorShape
from ..registry import apply, convert_to_tensor, defop
from . import array as _array
from . import manip as _manip

_FLOATS = (_dt.float16, _dt.float32, _dt.float64)


_cpu = None


def _compiled():
    """image_boxes_cpu (numba), imported on first use (numba's import is not free)."""
    global _cpu
    if _cpu is None:
        from . import image_boxes_cpu

        _cpu = image_boxes_cpu
    return _cpu


def _rank_check(op: Any, t: Tensor, rank: int, what: str) -> None:
    if t.shape.ndims is not None and t.shape.ndims != rank:
        raise InvalidArgumentError(
            f"{op.type} {op.name!r}: {what} must be rank {rank}, got {t.name} of shape {t.shape}"
        )


# ---- CropAndResize ---------------------------------------------------------------------------

CropAndResize = defop("CropAndResize")
CropAndResizeGradImage = defop("CropAndResizeGradImage", differentiable=False)
CropAndResizeGradBoxes = defop("CropAndResizeGradBoxes", differentiable=False)


@CropAndResize.shape
def _crop_and_resize_shape(op):
    image, boxes, box_ind = op.inputs
    _rank_check(op, image, 4, "image")
    _rank_check(op, boxes, 2, "boxes")
    _rank_check(op, box_ind, 1, "box_ind")
    if boxes.shape.ndims == 2 and boxes.shape.as_list()[1] not in (None, 4):
        raise InvalidArgumentError(
            f"CropAndResize {op.name!r}: boxes must be [num_boxes, 4], got {boxes.shape}"
        )
    n = boxes.shape.as_list()[0] if boxes.shape.ndims == 2 else None
    c = image.shape.as_list()[3] if image.shape.ndims == 4 else None
    ch, cw = op.attrs["crop_size"]
    return [(TensorShape([n, ch, cw, c]), _dt.float32)]


def _axis_samples(lo, hi, n_in: int, n_out: int):
    """TF's sampling positions along one axis: ``[boxes, n_out]`` float32 source coordinates
    and whether each lies inside the image."""
    lo = lo.astype(np.float32)[:, None]
    hi = hi.astype(np.float32)[:, None]
    if n_out > 1:
        scale = (hi - lo) * np.float32(n_in - 1) / np.float32(n_out - 1)
        pos = lo * np.float32(n_in - 1) + np.arange(n_out, dtype=np.float32)[None, :] * scale
    else:
        pos = (0.5 * (lo.astype(np.float64) + hi) * (n_in - 1)).astype(np.float32)
    inside = (pos >= 0) & (pos <= n_in - 1)
    return pos, inside


def _taps(pos, n_in: int):
    low = np.floor(pos)
    lo = np.clip(low, 0, n_in - 1).astype(np.int64)
    hi = np.clip(np.ceil(pos), 0, n_in - 1).astype(np.int64)
    return lo, hi, (pos - low).astype(np.float32)


def _check_box_ind(ctx, box_ind, batch: int, n: int) -> np.ndarray:
    bi = np.asarray(box_ind).astype(np.int64)
    if bi.shape != (n,):
        raise InvalidArgumentError(
            f"{ctx.op.type} {ctx.op.name!r}: box_ind has shape {bi.shape}, expected ({n},)"
        )
    if n and (bi.min() < 0 or bi.max() >= batch):
        raise InvalidArgumentError(
            f"{ctx.op.type} {ctx.op.name!r}: box_ind has values outside [0, {batch}): "
            f"{bi[(bi < 0) | (bi >= batch)][:5].tolist()}"
        )
    return bi


def _check_boxes(ctx, boxes) -> np.ndarray:
    b = np.asarray(boxes)
    if b.ndim != 2 or b.shape[1] != 4:
        raise InvalidArgumentError(
            f"{ctx.op.type} {ctx.op.name!r}: boxes must be [num_boxes, 4], got {b.shape}"
        )
    if not np.isfinite(b).all():
        raise InvalidArgumentError(
            f"{ctx.op.type} {ctx.op.name!r}: boxes contains at least one element that is not "
            f"finite (row {int(np.flatnonzero(~np.isfinite(b).all(axis=1))[0])})"
        )
    return b


def _scalar(ctx, v, what: str) -> Any:
    a = np.asarray(v)
    if a.ndim != 0:
        raise InvalidArgumentError(
            f"{ctx.op.type} {ctx.op.name!r}: {what} must be a scalar, got shape {a.shape}"
        )
    return a.item()


def _check_image(ctx, image, what: str = "image") -> np.ndarray:
    x = np.asarray(image)
    if x.ndim != 4:
        raise InvalidArgumentError(
            f"{ctx.op.type} {ctx.op.name!r}: {what} must be 4-D [batch, height, width, depth], "
            f"got shape {x.shape}"
        )
    return x


@CropAndResize.kernel(
    "cpu", dtypes=(_dt.uint8, _dt.int8, _dt.int16, _dt.int32, _dt.int64, *_FLOATS)
)
def _crop_and_resize(ctx, image, boxes, box_ind):
    image = _check_image(ctx, image)
    boxes = _check_boxes(ctx, boxes)
    nb, h, w, c = image.shape
    if h == 0 or w == 0:
        raise InvalidArgumentError(f"CropAndResize {ctx.op.name!r}: an empty image {image.shape}")
    bi = _check_box_ind(ctx, box_ind, nb, boxes.shape[0])
    ch, cw = ctx.attrs["crop_size"]
    ys, y_in = _axis_samples(boxes[:, 0], boxes[:, 2], h, ch)
    xs, x_in = _axis_samples(boxes[:, 1], boxes[:, 3], w, cw)
    b = bi[:, None, None]
    if ctx.attrs["method"] == "bilinear":
        fast = _compiled()
        out = np.empty((boxes.shape[0], ch, cw, c), np.float32)
        fast.crop_bilinear(
            np.ascontiguousarray(image, np.float32), np.ascontiguousarray(boxes, np.float32),
            bi, ch, cw, np.float32(ctx.attrs["extrapolation_value"]), out,
        )  # fmt: skip
        return out
    if ctx.attrs["method"] == "nearest":
        ry = np.clip(np.floor(ys + np.float32(0.5)), 0, h - 1).astype(np.int64)
        rx = np.clip(np.floor(xs + np.float32(0.5)), 0, w - 1).astype(np.int64)
        out = image[b, ry[:, :, None], rx[:, None, :]].astype(np.float32)
    else:
        ty, by, yl = _taps(ys, h)
        tx, bx, xl = _taps(xs, w)
        ty, by, tx, bx = ty[:, :, None], by[:, :, None], tx[:, None, :], bx[:, None, :]
        xl4 = xl[:, None, :, None]
        tl = image[b, ty, tx].astype(np.float32)
        tr = image[b, ty, bx].astype(np.float32)
        bl = image[b, by, tx].astype(np.float32)
        br = image[b, by, bx].astype(np.float32)
        top = tl + (tr - tl) * xl4
        bottom = bl + (br - bl) * xl4
        out = top + (bottom - top) * yl[:, :, None, None]
    inside = (y_in[:, :, None] & x_in[:, None, :])[..., None]
    return np.where(inside, out, np.float32(ctx.attrs["extrapolation_value"])).astype(np.float32)


@CropAndResize.gradient
def _crop_and_resize_grad(op, grad):
    image, boxes, box_ind = op.inputs
    attrs = {k: op.attrs[k] for k in ("method", "crop_size")}
    g_image = None
    if image.dtype.is_floating:
        g_image = apply(
            "CropAndResizeGradImage",
            [grad, boxes, box_ind, _array.shape(image)],
            attrs | {"T": image.dtype},
            "CropAndResizeGradImage",
        )
    g_boxes = None
    if op.attrs["method"] == "bilinear":
        g_boxes = apply(
            "CropAndResizeGradBoxes", [grad, image, boxes, box_ind], attrs, "CropAndResizeGradBoxes"
        )
    return [g_image, g_boxes, None]


@CropAndResizeGradImage.shape
def _grad_image_shape(op):
    from .random import static_shape_value

    return [(static_shape_value(op.inputs[3]), op.attrs["T"])]


@CropAndResizeGradImage.kernel("cpu")
def _crop_and_resize_grad_image(ctx, grads, boxes, box_ind, image_size):
    grads = np.asarray(grads, dtype=np.float32)
    boxes = _check_boxes(ctx, boxes)
    nb, h, w, c = (int(v) for v in np.asarray(image_size))
    bi = _check_box_ind(ctx, box_ind, nb, boxes.shape[0])
    ch, cw = ctx.attrs["crop_size"]
    out = np.zeros((nb, h, w, c), np.float32)
    if ctx.attrs["method"] == "bilinear":
        _compiled().crop_bilinear_grad(
            np.ascontiguousarray(grads), np.ascontiguousarray(boxes, np.float32), bi, h, w, out
        )
        return out.astype(ctx.attrs["T"].np)
    ys, y_in = _axis_samples(boxes[:, 0], boxes[:, 2], h, ch)
    xs, x_in = _axis_samples(boxes[:, 1], boxes[:, 3], w, cw)
    mask = (y_in[:, :, None] & x_in[:, None, :])[..., None]
    g = np.where(mask, grads, np.float32(0))
    b = bi[:, None, None]
    if ctx.attrs["method"] == "nearest":
        ry = np.clip(np.floor(ys + np.float32(0.5)), 0, h - 1).astype(np.int64)
        rx = np.clip(np.floor(xs + np.float32(0.5)), 0, w - 1).astype(np.int64)
        np.add.at(out, (b, ry[:, :, None], rx[:, None, :]), g)
    else:
        ty, by, yl = _taps(ys, h)
        tx, bx, xl = _taps(xs, w)
        ty, by, tx, bx = ty[:, :, None], by[:, :, None], tx[:, None, :], bx[:, None, :]
        xl4 = xl[:, None, :, None]
        dtop = g * (1 - yl[:, :, None, None])
        dbottom = g * yl[:, :, None, None]
        np.add.at(out, (b, ty, tx), dtop * (1 - xl4))
        np.add.at(out, (b, ty, bx), dtop * xl4)
        np.add.at(out, (b, by, tx), dbottom * (1 - xl4))
        np.add.at(out, (b, by, bx), dbottom * xl4)
    return out.astype(ctx.attrs["T"].np)


@CropAndResizeGradBoxes.shape
def _grad_boxes_shape(op):
    return [(op.inputs[2].shape, _dt.float32)]


@CropAndResizeGradBoxes.kernel("cpu")
def _crop_and_resize_grad_boxes(ctx, grads, image, boxes, box_ind):
    """TF's CropAndResizeGradBoxes: each sample's derivative by its source coordinate (the
    bilinear interpolant's slope), times d(coordinate)/d(box corner)."""
    grads = np.asarray(grads, dtype=np.float32)
    image = _check_image(ctx, image)
    boxes = _check_boxes(ctx, boxes)
    nb, h, w, c = image.shape
    bi = _check_box_ind(ctx, box_ind, nb, boxes.shape[0])
    ch, cw = ctx.attrs["crop_size"]
    ys, y_in = _axis_samples(boxes[:, 0], boxes[:, 2], h, ch)
    xs, x_in = _axis_samples(boxes[:, 1], boxes[:, 3], w, cw)
    ty, by, yl = _taps(ys, h)
    tx, bx, xl = _taps(xs, w)
    b = bi[:, None, None]
    ty3, by3, tx3, bx3 = ty[:, :, None], by[:, :, None], tx[:, None, :], bx[:, None, :]
    tl = image[b, ty3, tx3].astype(np.float32)
    tr = image[b, ty3, bx3].astype(np.float32)
    bl = image[b, by3, tx3].astype(np.float32)
    br = image[b, by3, bx3].astype(np.float32)
    xl4, yl4 = xl[:, None, :, None], yl[:, :, None, None]
    d_y = (1 - xl4) * (bl - tl) + xl4 * (br - tr)
    d_x = (1 - yl4) * (tr - tl) + yl4 * (br - bl)
    mask = (y_in[:, :, None] & x_in[:, None, :])[..., None]
    gy = np.where(mask, grads * d_y, 0).sum(axis=(2, 3))  # [boxes, ch]
    gx = np.where(mask, grads * d_x, 0).sum(axis=(1, 3))  # [boxes, cw]
    out = np.zeros((boxes.shape[0], 4), np.float32)
    if ch > 1:
        f = np.arange(ch, dtype=np.float32) / np.float32(ch - 1)
        out[:, 0] = (gy * (1 - f)).sum(axis=1) * (h - 1)
        out[:, 2] = (gy * f).sum(axis=1) * (h - 1)
    else:
        out[:, 0] = out[:, 2] = gy.sum(axis=1) * 0.5 * (h - 1)
    if cw > 1:
        f = np.arange(cw, dtype=np.float32) / np.float32(cw - 1)
        out[:, 1] = (gx * (1 - f)).sum(axis=1) * (w - 1)
        out[:, 3] = (gx * f).sum(axis=1) * (w - 1)
    else:
        out[:, 1] = out[:, 3] = gx.sum(axis=1) * 0.5 * (w - 1)
    return out


def crop_and_resize(
    image: Any,
    boxes: Any,
    box_ind: Any = None,
    crop_size: Any = None,
    method: str = "bilinear",
    extrapolation_value: float = 0.0,
    name: str | None = None,
    box_indices: Any = None,
) -> Tensor:
    """TF1's ``tf.image.crop_and_resize``: for each box, the region of ``image[box_ind]`` it
    covers, sampled on a ``crop_size`` grid (bilinear or nearest); samples outside the image get
    ``extrapolation_value``. float32 out, ``[num_boxes, crop_height, crop_width, depth]``."""
    if box_ind is None:
        box_ind = box_indices
    if box_ind is None or crop_size is None:
        raise TypeError("crop_and_resize: box_ind and crop_size are required")
    if method not in ("bilinear", "nearest"):
        raise InvalidArgumentError(
            f"crop_and_resize: method must be 'bilinear' or 'nearest', got {method!r}"
        )
    size = _manip._ints("crop_and_resize", "crop_size", crop_size)
    if len(size) != 2 or min(size) <= 0:
        raise InvalidArgumentError(
            f"crop_and_resize: crop_size must be two positive ints, got {list(size)}"
        )
    ins = [
        convert_to_tensor(image),
        convert_to_tensor(boxes, dtype=_dt.float32),
        convert_to_tensor(box_ind, dtype=_dt.int32),
    ]
    attrs = {"crop_size": size, "method": method, "extrapolation_value": float(extrapolation_value)}
    return apply("CropAndResize", ins, attrs, name or "CropAndResize")


# ---- NonMaxSuppression -----------------------------------------------------------------------

NonMaxSuppression = defop("NonMaxSuppressionV3", differentiable=False)


@NonMaxSuppression.shape
def _nms_shape(op):
    boxes, scores = op.inputs[:2]
    _rank_check(op, boxes, 2, "boxes")
    _rank_check(op, scores, 1, "scores")
    for t, what in ((op.inputs[2], "max_output_size"), (op.inputs[3], "iou_threshold")):
        _rank_check(op, t, 0, what)
    n = op.attrs.get("max_output_static")
    if boxes.shape.ndims == 2 and boxes.shape.as_list()[0] is not None and n is not None:
        n = min(n, boxes.shape.as_list()[0])
    outs = [(TensorShape([n if n is not None and op.attrs["pad_to_max"] else None]), _dt.int32)]
    if op.attrs["with_scores"]:
        outs.append((outs[0][0], scores.dtype))
    if op.attrs["pad_to_max"]:
        outs.append((TensorShape([]), _dt.int32))
    return outs


@NonMaxSuppression.kernel("cpu")
def _nms(ctx, boxes, scores, max_output_size, iou_threshold, score_threshold):
    boxes = np.asarray(boxes)
    scores = np.asarray(scores)
    name = f"{ctx.op.type} {ctx.op.name!r}"
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise InvalidArgumentError(f"{name}: boxes must be [num_boxes, 4], got {boxes.shape}")
    if scores.shape != (boxes.shape[0],):
        raise InvalidArgumentError(
            f"{name}: scores has shape {scores.shape}; boxes has {boxes.shape[0]} boxes"
        )
    k = int(_scalar(ctx, max_output_size, "max_output_size"))
    if k < 0:
        raise InvalidArgumentError(f"{name}: max_output_size must be non-negative, got {k}")
    iou_t = float(_scalar(ctx, iou_threshold, "iou_threshold"))
    if not 0 <= iou_t <= 1:
        raise InvalidArgumentError(f"{name}: iou_threshold must be in [0, 1], got {iou_t}")
    keep = np.flatnonzero(scores > _scalar(ctx, score_threshold, "score_threshold"))
    # highest score first; equal scores by box index, as TF's priority queue pops them
    order = keep[np.lexsort((keep, -scores[keep].astype(np.float64)))]
    chosen = _compiled().nms(
        np.ascontiguousarray(boxes, np.float32), order.astype(np.int64), k, np.float32(iou_t)
    )
    idx = np.asarray(chosen, np.int32)
    outs = [idx]
    if ctx.attrs["with_scores"]:
        outs.append(scores[idx])
    if ctx.attrs["pad_to_max"]:
        pad = k - len(idx)
        outs = [np.concatenate([o, np.zeros(pad, o.dtype)]) for o in outs]
        outs.append(np.int32(len(idx)))
    return tuple(outs) if len(outs) > 1 else outs[0]


def _nms_apply(boxes, scores, max_output_size, iou_threshold, score_threshold, attrs, name):
    max_static = None
    if not isinstance(max_output_size, Tensor):
        max_static = int(max_output_size)
    ins = [
        convert_to_tensor(boxes, dtype=_dt.float32),
        convert_to_tensor(scores, dtype=_dt.float32),
        convert_to_tensor(max_output_size, dtype=_dt.int32),
        convert_to_tensor(iou_threshold, dtype=_dt.float32),
        convert_to_tensor(score_threshold, dtype=_dt.float32),
    ]
    attrs = {"with_scores": False, "pad_to_max": False, "max_output_static": max_static} | attrs
    return apply("NonMaxSuppressionV3", ins, attrs, name)


def non_max_suppression(
    boxes: Any,
    scores: Any,
    max_output_size: Any,
    iou_threshold: Any = 0.5,
    score_threshold: Any = float("-inf"),
    name: str | None = None,
) -> Tensor:
    """TF1's ``tf.image.non_max_suppression``: indices (int32) of at most ``max_output_size``
    boxes, greedily by descending score, dropping a box whose IoU with one already chosen is
    ``iou_threshold`` or more, and boxes whose score is not above ``score_threshold``."""
    return _nms_apply(
        boxes,
        scores,
        max_output_size,
        iou_threshold,
        score_threshold,
        {},
        name or "non_max_suppression",
    )


def non_max_suppression_with_scores(
    boxes: Any,
    scores: Any,
    max_output_size: Any,
    iou_threshold: Any = 0.5,
    score_threshold: Any = float("-inf"),
    soft_nms_sigma: float = 0.0,
    name: str | None = None,
) -> tuple[Tensor, Tensor]:
    """``non_max_suppression`` and the chosen boxes' scores (hard suppression only)."""
    if float(soft_nms_sigma) != 0.0:
        raise InvalidArgumentError(
            "non_max_suppression_with_scores: soft-NMS (soft_nms_sigma != 0) is not supported"
        )
    out = _nms_apply(
        boxes,
        scores,
        max_output_size,
        iou_threshold,
        score_threshold,
        {"with_scores": True},
        name or "non_max_suppression_with_scores",
    )
    return out[0], out[1]


def non_max_suppression_padded(
    boxes: Any,
    scores: Any,
    max_output_size: Any,
    iou_threshold: Any = 0.5,
    score_threshold: Any = float("-inf"),
    pad_to_max_output_size: bool = False,
    name: str | None = None,
    sorted_input: bool = False,
    canonicalized_coordinates: bool = False,
    tile_size: int = 512,
) -> tuple[Tensor, Tensor]:
    """``(selected_indices, valid_outputs)``; the indices padded with zeros to
    ``max_output_size`` when ``pad_to_max_output_size``."""
    out = _nms_apply(
        boxes,
        scores,
        max_output_size,
        iou_threshold,
        score_threshold,
        {"pad_to_max": True},
        name or "non_max_suppression_padded",
    )
    idx, valid = out[0], out[1]
    if not pad_to_max_output_size:
        idx = idx[:valid]
    return idx, valid


# ---- DrawBoundingBoxes -----------------------------------------------------------------------

DrawBoundingBoxes = defop("DrawBoundingBoxesV2", differentiable=False)

# TF's default colours, cycled over a batch's boxes
_COLORS = np.array(
    [
        [1, 1, 0, 1],
        [0, 0, 1, 1],
        [1, 0, 0, 1],
        [0, 1, 0, 1],
        [0.5, 0, 0.5, 1],
        [0.5, 0.5, 0, 1],
        [0.5, 0, 0, 1],
        [0, 0, 0.5, 1],
        [0, 1, 1, 1],
        [1, 0, 1, 1],
    ],
    np.float32,
)


@DrawBoundingBoxes.shape
def _draw_shape(op):
    images, boxes = op.inputs[:2]
    _rank_check(op, images, 4, "images")
    _rank_check(op, boxes, 3, "boxes")
    if images.shape.ndims == 4 and images.shape.as_list()[3] not in (None, 1, 3, 4):
        raise InvalidArgumentError(
            f"DrawBoundingBoxesV2 {op.name!r}: channel depth must be 1, 3 or 4, got {images.shape}"
        )
    return [(images.shape, images.dtype)]


@DrawBoundingBoxes.kernel("cpu", dtypes=(_dt.float16, _dt.float32))
def _draw(ctx, images, boxes, colors):
    canvas = np.array(_check_image(ctx, images, "images"), copy=True)
    boxes = np.asarray(boxes)
    nb, h, w, depth = canvas.shape
    if depth not in (1, 3, 4):
        raise InvalidArgumentError(
            f"DrawBoundingBoxesV2 {ctx.op.name!r}: channel depth must be 1, 3 or 4, got {depth}"
        )
    if boxes.ndim != 3 or boxes.shape[0] != nb or boxes.shape[2] != 4:
        raise InvalidArgumentError(
            f"DrawBoundingBoxesV2 {ctx.op.name!r}: boxes must be [{nb}, num_boxes, 4], "
            f"got {boxes.shape}"
        )
    table = np.asarray(colors, np.float32)
    if table.size == 0:
        table = _COLORS
    if table.ndim != 2 or table.shape[1] < depth:
        raise InvalidArgumentError(
            f"DrawBoundingBoxesV2 {ctx.op.name!r}: colors must be [num_colors, >= {depth}], "
            f"got {table.shape}"
        )
    for b in range(nb):
        for k in range(boxes.shape[1]):
            if not np.isfinite(boxes[b, k]).all():
                continue  # a box without finite corners outlines nothing
            color = table[k % len(table), :depth].astype(canvas.dtype)
            # float -> int64 truncates toward zero, as TF's static_cast does
            r0, c0, r1, c1 = (
                int(np.float32(boxes[b, k, i]) * np.float32(n - 1))
                for i, n in ((0, h), (1, w), (2, h), (3, w))
            )
            if r0 > r1 or c0 > c1 or r0 >= h or r1 < 0 or c0 >= w or c1 < 0:
                continue
            rs, re = max(r0, 0), min(r1, h - 1)
            cs, ce = max(c0, 0), min(c1, w - 1)
            if r0 >= 0:
                canvas[b, r0, cs : ce + 1] = color
            if r1 < h:
                canvas[b, r1, cs : ce + 1] = color
            if c0 >= 0:
                canvas[b, rs : re + 1, c0] = color
            if c1 < w:
                canvas[b, rs : re + 1, c1] = color
    return canvas


def draw_bounding_boxes(
    images: Any, boxes: Any, name: str | None = None, colors: Any = None
) -> Tensor:
    """TF1's ``tf.image.draw_bounding_boxes``: a one-pixel outline of each box (``boxes`` is
    ``[batch, num_boxes, 4]``) on a copy of the float images, in ``colors`` (rows of RGBA) or
    TF's default colours, cycled."""
    imgs = convert_to_tensor(images)
    if imgs.dtype not in (_dt.float16, _dt.float32):
        raise TypeError(
            f"draw_bounding_boxes: images must be float16 or float32, got {imgs.dtype.name}"
        )
    table = np.zeros((0, 4), np.float32) if colors is None else colors
    ins = [imgs, convert_to_tensor(boxes, dtype=_dt.float32), convert_to_tensor(table, _dt.float32)]
    return apply("DrawBoundingBoxesV2", ins, {}, name or "draw_bounding_boxes")


# ---- SampleDistortedBoundingBox --------------------------------------------------------------

SampleDistortedBoundingBox = defop(
    "SampleDistortedBoundingBoxV2", stateful=True, differentiable=False
)
_SIZE_DTYPES = (_dt.uint8, _dt.int8, _dt.int16, _dt.int32, _dt.int64)


@SampleDistortedBoundingBox.shape
def _sdbb_shape(op):
    size, boxes = op.inputs[:2]
    if size.shape.ndims is not None and size.shape.as_list() not in ([3], [None]):
        raise InvalidArgumentError(
            f"SampleDistortedBoundingBoxV2 {op.name!r}: image_size must be [height, width, "
            f"channels], got shape {size.shape}"
        )
    if size.dtype not in _SIZE_DTYPES:
        raise TypeError(
            f"SampleDistortedBoundingBoxV2 {op.name!r}: image_size must be an integer tensor, "
            f"got {size.dtype.name}"
        )
    if boxes.shape.ndims is not None and boxes.shape.as_list()[-1] not in (None, 4):
        raise InvalidArgumentError(
            f"SampleDistortedBoundingBoxV2 {op.name!r}: bounding_boxes must end in 4 "
            f"coordinates, got {boxes.shape}"
        )
    return [
        (TensorShape([3]), size.dtype),
        (TensorShape([3]), size.dtype),
        (TensorShape([1, 1, 4]), _dt.float32),
    ]


def _area(r) -> int:
    x0, y0, x1, y1 = r
    return max(x1 - x0, 0) * max(y1 - y0, 0)


def _random_crop_rect(rng, width, height, min_area, max_area, aspect):
    """TF's GenerateRandomCrop: a height between the areas' bounds at this aspect ratio, nudged
    by one row to land inside them; None where none fits."""
    lrint = lambda v: int(np.rint(np.float32(v)))  # noqa: E731  (C's lrintf)
    lo_h = lrint(math.sqrt(min_area / aspect))
    hi_h = lrint(math.sqrt(max_area / aspect))
    if lrint(hi_h * aspect) > width:
        hi_h = int((width + 0.5 - 1e-7) / aspect)
    hi_h = min(hi_h, height)
    hgt = min(lo_h, hi_h)
    if hgt < hi_h:
        hgt += int(rng.integers(0, hi_h - hgt + 1))
    wid = lrint(hgt * aspect)
    area = wid * hgt
    if area < min_area:
        hgt += 1
        wid = lrint(hgt * aspect)
        area = wid * hgt
    if area > max_area:
        hgt -= 1
        wid = lrint(hgt * aspect)
        area = wid * hgt
    if area < min_area or area > max_area or wid > width or hgt > height or wid <= 0 or hgt <= 0:
        return None
    y = int(rng.integers(0, height - hgt)) if hgt < height else 0
    x = int(rng.integers(0, width - wid)) if wid < width else 0
    return (x, y, x + wid, y + hgt)


@SampleDistortedBoundingBox.kernel("cpu")
def _sdbb(ctx, image_size, bounding_boxes, min_object_covered):
    at = ctx.attrs
    name = f"SampleDistortedBoundingBoxV2 {ctx.op.name!r}"
    size = np.asarray(image_size)
    if size.shape != (3,):
        raise InvalidArgumentError(f"{name}: image_size must have 3 elements, got {size.shape}")
    height, width = int(size[0]), int(size[1])
    if height <= 0 or width <= 0:
        raise InvalidArgumentError(f"{name}: image height and width must be positive: {size}")
    boxes = np.asarray(bounding_boxes, np.float32).reshape(-1, 4)
    covered = float(_scalar(ctx, min_object_covered, "min_object_covered"))
    if not covered >= 0:  # (NaN too)
        raise InvalidArgumentError(f"{name}: min_object_covered must be >= 0, got {covered}")
    if not ((boxes >= 0) & (boxes <= 1)).all():
        bad = boxes[~((boxes >= 0) & (boxes <= 1))][0]
        raise InvalidArgumentError(
            f"{name}: all bounding box coordinates must be in [0.0, 1.0], got {bad}"
        )
    rects = [
        (int(b[1] * width), int(b[0] * height), int(b[3] * width), int(b[2] * height))
        for b in boxes
    ]
    if not rects:
        if not at["use_image_if_no_bounding_boxes"]:
            raise InvalidArgumentError(
                f"{name}: no bounding boxes given; set use_image_if_no_bounding_boxes=True to "
                "sample from the whole image"
            )
        rects = [(0, 0, width, height)]
    lo_r, hi_r = at["aspect_ratio_range"]
    lo_a, hi_a = at["area_range"]
    min_area, max_area = lo_a * width * height, hi_a * width * height
    rng = ctx.rng
    crop = None
    for _ in range(at["max_attempts"]):
        aspect = float(np.float32(rng.random()) * np.float32(hi_r - lo_r) + np.float32(lo_r))
        r = _random_crop_rect(rng, width, height, min_area, max_area, aspect)
        if r is None or _area(r) < 1:
            continue
        ok = False
        for bx in rects:
            obj = _area(bx)
            if obj < 1:
                continue
            inter = (max(r[0], bx[0]), max(r[1], bx[1]), min(r[2], bx[2]), min(r[3], bx[3]))
            if _area(inter) / obj >= covered:
                ok = True
                break
        if ok:
            crop = r
            break
    if crop is None:
        crop = (0, 0, width, height)
    x0, y0, x1, y1 = crop
    dt = at["dtype"].np
    begin = np.array([y0, x0, 0], np.int64).astype(dt)
    extent = np.array([y1 - y0, x1 - x0, -1], np.int64).astype(dt)  # -1 wraps in uint8, as TF's
    box = np.array([[[y0 / height, x0 / width, y1 / height, x1 / width]]], np.float32)
    return begin, extent, box


def sample_distorted_bounding_box(
    image_size: Any,
    bounding_boxes: Any,
    seed: Any = None,
    seed2: Any = None,
    min_object_covered: Any = 0.1,
    aspect_ratio_range: Any = None,
    area_range: Any = None,
    max_attempts: int | None = None,
    use_image_if_no_bounding_boxes: bool | None = None,
    name: str | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """TF1's ``tf.image.sample_distorted_bounding_box``: a random crop of an image of
    ``image_size`` ([height, width, channels]) with an aspect ratio in ``aspect_ratio_range``
    and an area (a fraction of the image's) in ``area_range`` that covers at least
    ``min_object_covered`` of one of ``bounding_boxes``; up to ``max_attempts`` tries, else the
    whole image. Returns ``(begin, size, bboxes)`` for ``tf.slice`` and
    ``draw_bounding_boxes``. The crop is drawn from hetbed's generator, so its values differ
    from TensorFlow's under the same seeds; the rule that accepts a crop is TF's."""
    ratio = [0.75, 1.33] if aspect_ratio_range is None else [float(v) for v in aspect_ratio_range]
    area = [0.05, 1.0] if area_range is None else [float(v) for v in area_range]
    fn = "sample_distorted_bounding_box"
    with np.errstate(over="ignore"):
        as_f32 = np.asarray(ratio, np.float64).astype(np.float32)
    if (
        len(ratio) != 2
        or not 0 < ratio[0] <= ratio[1]
        or not np.isfinite(as_f32).all()
        or as_f32[0] <= 0
    ):
        raise InvalidArgumentError(
            f"{fn}: aspect_ratio_range must be finite float32 numbers 0 < lo <= hi, got {ratio}"
        )
    if len(area) != 2 or not 0 < area[0] <= area[1] <= 1:
        raise InvalidArgumentError(f"{fn}: area_range must be 0 < lo <= hi <= 1, got {area}")
    attempts = 100 if max_attempts is None else int(max_attempts)
    if attempts <= 0:
        raise InvalidArgumentError(f"{fn}: max_attempts must be positive, got {attempts}")
    size = convert_to_tensor(image_size)
    if seed is not None and seed2:
        seed = (int(seed) * 0x9E3779B1 + int(seed2)) & 0xFFFFFFFF
    attrs = {
        "seed": seed,
        "dtype": size.dtype,
        "aspect_ratio_range": tuple(ratio),
        "area_range": tuple(area),
        "max_attempts": attempts,
        "use_image_if_no_bounding_boxes": bool(use_image_if_no_bounding_boxes),
    }
    ins = [
        size,
        convert_to_tensor(bounding_boxes, dtype=_dt.float32),
        convert_to_tensor(min_object_covered, dtype=_dt.float32),
    ]
    begin, extent, box = apply("SampleDistortedBoundingBoxV2", ins, attrs, name or fn)
    return begin, extent, box


__all__ = [
    "crop_and_resize",
    "draw_bounding_boxes",
    "non_max_suppression",
    "non_max_suppression_padded",
    "non_max_suppression_with_scores",
    "sample_distorted_bounding_box",
]
