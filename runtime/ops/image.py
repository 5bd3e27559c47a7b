"""TF1's ``tf.image``, composed from existing ops (as most of it is in TensorFlow too).

Images are [H, W, C] or batches [N, H, W, C]. Resizing gathers the source rows and columns with
indices computed from the static sizes and interpolates, so it needs the input's height and
width known when the graph is built; so do cropping and padding. Bilinear resizing follows TF1
(``align_corners`` and ``half_pixel_centers``, both False by default) and has a gradient.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError, UnimplementedError
from ..graph import Tensor, TensorShape, name_scope
from ..registry import apply, convert_to_tensor, defop
from . import array as _array
from . import manip as _manip
from . import math as _math
from . import random as _random

# ---- helpers ----------------------------------------------------------------------------------


def _image(fn: str, image: Any) -> tuple[Tensor, int]:
    """``image`` as a tensor and its rank (3 or 4)."""
    x = convert_to_tensor(image)
    r = x.shape.ndims
    if r not in (3, 4):
        raise InvalidArgumentError(
            f"{fn}: image must be 3-D [H, W, C] or 4-D [N, H, W, C], got {x.name} with shape "
            f"{x.shape}"
        )
    return x, r


def _hw(fn: str, x: Tensor) -> tuple[int, int]:
    h, w = x.shape.as_list()[-3:-1]
    if h is None or w is None:
        raise UnimplementedError(
            f"{fn}: hetbed needs the image height and width known when the graph is built, "
            f"got {x.name} with shape {x.shape}"
        )
    return h, w


def _int_or_tensor(v: Any) -> Any:
    """A size or offset: a Python int, or an int32 scalar tensor (known when the step runs)."""
    if isinstance(v, Tensor) or hasattr(v, "_as_graph_element"):
        return _array.cast(convert_to_tensor(v), _dt.int32)
    return int(v)


def _hw_known(x: Tensor) -> bool:
    return x.shape.ndims is not None and None not in x.shape.as_list()[-3:-1]


def _pad_dynamic(x: Tensor, top: Any, left: Any, th: int, tw: int) -> Tensor:
    """A 4-D ``x`` zero-padded to ``th`` x ``tw`` with it at (``top``, ``left``), any of its
    sizes and the offsets known only when the step runs: zeros of run-time shapes concatenated
    around it (differentiable, as TF's pad)."""
    shape = _array.shape(x)
    n, h, w, c = shape[0], shape[1], shape[2], shape[3]

    def zeros(rows: Any, cols: Any) -> Tensor:
        return _manip.zeros(_manip.stack([n, rows, cols, c]), dtype=x.dtype)

    rows = _manip.concat([zeros(top, w), x, zeros(th - h - top, w)], 1)
    out = _manip.concat([zeros(th, left), rows, zeros(th, tw - w - left)], 2)
    dims = x.shape.as_list() if x.shape.ndims == 4 else [None] * 4
    out.set_shape(TensorShape([dims[0], _static_or_none(th), _static_or_none(tw), dims[3]]))
    return out


def _hw_set(y: Tensor, h: int, w: int) -> Tensor:
    """``y`` with its (known) output height and width in its static shape."""
    dims = y.shape.as_list() if y.shape.ndims is not None else [None] * 4
    y.set_shape(TensorShape([dims[0], h, w, dims[3]]))
    return y


def _batched(fn: str, image: Any, body) -> Tensor:
    """Run ``body`` on a 4-D version of ``image`` and give back the input's rank."""
    x, r = _image(fn, image)
    if r == 4:
        return body(x)
    return _manip.squeeze(body(_manip.expand_dims(x, 0)), [0])


def _is_float(dt: _dt.DType) -> bool:
    return np.dtype(dt.np).kind == "f"


# ---- flips, transposes, rotations ------------------------------------------------------------


def flip_left_right(image: Any) -> Tensor:
    """Reverse the width axis."""
    x, r = _image("flip_left_right", image)
    return _manip.reverse(x, [r - 2], name="flip_left_right")


def flip_up_down(image: Any) -> Tensor:
    """Reverse the height axis."""
    x, r = _image("flip_up_down", image)
    return _manip.reverse(x, [r - 3], name="flip_up_down")


def _random_flip(fn: str, image: Any, axis_from_end: int, seed: Any) -> Tensor:
    x, r = _image(fn, image)
    with name_scope(fn):
        flipped = _manip.reverse(x, [r - axis_from_end])
        n = [] if r == 3 else _batch_size(x)
        coin = _math.less(_random.random_uniform(n, seed=seed), 0.5)
        if r == 4:
            coin = _array.reshape(coin, [-1, 1, 1, 1])
        return _math.where(coin, flipped, x)


def _batch_size(x: Tensor) -> Any:
    """[N] for a batch: a list when N is static, else a slice of the run-time shape."""
    n = x.shape.as_list()[0]
    if n is None:
        return _manip.slice_(_array.shape(x), [0], [1])
    return [n]


def random_flip_left_right(image: Any, seed: Any = None) -> Tensor:
    """Flip left-right with probability 1/2 (each image of a batch on its own coin)."""
    return _random_flip("random_flip_left_right", image, 2, seed)


def random_flip_up_down(image: Any, seed: Any = None) -> Tensor:
    """Flip up-down with probability 1/2 (each image of a batch on its own coin)."""
    return _random_flip("random_flip_up_down", image, 3, seed)


def transpose_image(image: Any, name: str | None = None) -> Tensor:
    """Swap height and width (also ``tf.image.transpose``)."""
    x, r = _image("transpose_image", image)
    perm = [1, 0, 2] if r == 3 else [0, 2, 1, 3]
    return _manip.transpose(x, perm, name=name or "transpose_image")


transpose = transpose_image


def rot90(image: Any, k: int = 1, name: str | None = None) -> Tensor:
    """Rotate counter-clockwise by ``k`` quarter turns (``k`` a Python int)."""
    if isinstance(k, Tensor):
        raise UnimplementedError("rot90: k must be a Python int in hetbed")
    x, r = _image("rot90", image)
    k = int(k) % 4
    with name_scope(name or "rot90"):
        if k == 0:
            return _array.identity(x)
        if k == 2:
            return _manip.reverse(x, [r - 3, r - 2])
        if k == 1:
            return transpose_image(flip_left_right(x))
        return flip_left_right(transpose_image(x))


# ---- cropping and padding ---------------------------------------------------------------------


def _gather_range(x: Tensor, start: Any, size: int, axis: int) -> Tensor:
    """``x`` restricted to indices start .. start+size-1 along ``axis`` (``start`` a tensor)."""
    idx = start + _array.constant(np.arange(size, dtype=np.int32), name="offsets")
    return _manip.gather(x, idx, axis=axis)


def random_crop(value: Any, size: Any, seed: Any = None, name: str | None = None) -> Tensor:
    """A random ``size`` slice of ``value`` (same rank), each offset uniform over the valid ones."""
    x = convert_to_tensor(value)
    shape = x.shape.as_list() if x.shape.ndims is not None else None
    size = [int(s) for s in np.asarray(size).ravel()]
    if shape is None or len(shape) != len(size):
        raise InvalidArgumentError(f"random_crop: size {size} must match the rank of {x.shape}")
    if any(d is None for d in shape):
        return _random_crop_dynamic(x, size, seed, name)
    if any(s > d or s < 0 for s, d in zip(size, shape)):
        raise InvalidArgumentError(f"random_crop: size {size} does not fit in shape {shape}")
    limit = np.array([d - s + 1 for d, s in zip(shape, size)], dtype=np.float32)
    with name_scope(name or "random_crop"):
        u = _random.random_uniform([len(size)], seed=seed)
        offset = _array.cast(_math.floor(u * _array.constant(limit)), _dt.int32)
        offset = _math.minimum(offset, _array.constant((limit - 1).astype(np.int32)))
        out = x
        for a, (d, s) in enumerate(zip(shape, size)):
            if s != d:
                out = _gather_range(out, offset[a], s, a)
        return out


def _random_crop_dynamic(x: Tensor, size: list, seed: Any, name: Any) -> Tensor:
    """``random_crop`` of a tensor whose shape is known only when the step runs: the offsets
    drawn against the run-time shape, which must be at least ``size`` (checked then)."""
    from ..graph import control_dependencies
    from .control import Assert as assert_op

    with name_scope(name or "random_crop"):
        shape = _array.shape(x)
        want = _array.constant(np.asarray(size, np.int32))
        check = assert_op(
            _math.reduce_all(_math.greater_equal(shape, want)),
            ["random_crop: need value.shape >= size, got", shape, want],
            name="random_crop_check",
        )
        with control_dependencies([check]):
            limit = shape - want + 1
        u = _random.random_uniform([len(size)], seed=seed)
        offset = _array.cast(_math.floor(u * _array.cast(limit, _dt.float32)), _dt.int32)
        offset = _math.minimum(offset, limit - 1)
        out = _manip.slice_(x, offset, want)
        out.set_shape(TensorShape(size))
        return out


def crop_to_bounding_box(
    image: Any, offset_height: int, offset_width: int, target_height: int, target_width: int
) -> Tensor:
    """The [offset_height : offset_height + target_height, offset_width : ...] window. The
    offsets may be integer scalar tensors (a random crop's), checked when the step runs."""
    if any(isinstance(v, Tensor) for v in (offset_height, offset_width, target_height,
                                           target_width)) or not _hw_known(convert_to_tensor(image)):  # fmt: skip
        th, tw = _int_or_tensor(target_height), _int_or_tensor(target_width)
        if any(isinstance(v, int) and v <= 0 for v in (th, tw)):
            raise InvalidArgumentError(f"crop_to_bounding_box: bad target {th}x{tw}")

        def dyn(x):
            from .control import Assert as assert_op

            oh_t = _array.cast(convert_to_tensor(offset_height), _dt.int32)
            ow_t = _array.cast(convert_to_tensor(offset_width), _dt.int32)
            shape = _array.shape(x)
            ok = _math.logical_and(
                _math.logical_and(_math.greater_equal(oh_t, 0), _math.greater_equal(ow_t, 0)),
                _math.logical_and(
                    _math.less_equal(oh_t + th, shape[1]), _math.less_equal(ow_t + tw, shape[2])
                ),
            )
            check = assert_op(
                ok,
                ["crop_to_bounding_box: the box is not inside the image:", oh_t, ow_t, shape],
                name="crop_to_bounding_box_check",
            )
            from ..graph import control_dependencies

            with control_dependencies([check]):
                out = _manip.strided_slice_from_key(
                    x, (slice(None), slice(oh_t, oh_t + th), slice(ow_t, ow_t + tw), slice(None))
                )
            return _hw_set(out, _static_or_none(th), _static_or_none(tw))

        return _batched("crop_to_bounding_box", image, dyn)
    oh, ow, th, tw = (int(v) for v in (offset_height, offset_width, target_height, target_width))

    def body(x):
        h, w = _hw("crop_to_bounding_box", x)
        if oh < 0 or ow < 0 or th <= 0 or tw <= 0 or oh + th > h or ow + tw > w:
            raise InvalidArgumentError(
                f"crop_to_bounding_box: box ({oh}, {ow}, {th}, {tw}) is not inside the "
                f"{h}x{w} image {x.name}"
            )
        return _manip.slice_(x, [0, oh, ow, 0], [-1, th, tw, -1], name="crop_to_bounding_box")

    return _batched("crop_to_bounding_box", image, body)


def pad_to_bounding_box(
    image: Any, offset_height: int, offset_width: int, target_height: int, target_width: int
) -> Tensor:
    """Zero-pad to target_height x target_width with the image at (offset_height, offset_width)
    (any of them may be an integer scalar tensor)."""
    args = (offset_height, offset_width, target_height, target_width)
    oh, ow, th, tw = (_int_or_tensor(v) for v in args)
    dynamic = any(isinstance(v, Tensor) for v in (oh, ow, th, tw))

    def body(x):
        if dynamic or not _hw_known(x):
            from ..graph import control_dependencies
            from .control import Assert as assert_op

            shape = _array.shape(x)
            fits = _math.logical_and(
                _math.less_equal(shape[1] + oh, th), _math.less_equal(shape[2] + ow, tw)
            )
            check = assert_op(
                _math.logical_and(
                    fits, _math.logical_and(_math.greater_equal(oh, 0), _math.greater_equal(ow, 0))
                ),
                ["pad_to_bounding_box: the image does not fit in the target:", shape, [th, tw]],
                name="pad_to_bounding_box_check",
            )
            with control_dependencies([check]):
                return _pad_dynamic(_array.identity(x), oh, ow, th, tw)
        h, w = _hw("pad_to_bounding_box", x)
        if oh < 0 or ow < 0 or oh + h > th or ow + w > tw:
            raise InvalidArgumentError(
                f"pad_to_bounding_box: the {h}x{w} image {x.name} at ({oh}, {ow}) does not fit "
                f"in {th}x{tw}"
            )
        pads = [[0, 0], [oh, th - h - oh], [ow, tw - w - ow], [0, 0]]
        return _manip.pad(x, pads, name="pad_to_bounding_box")

    return _batched("pad_to_bounding_box", image, body)


def resize_image_with_crop_or_pad(image: Any, target_height: int, target_width: int) -> Tensor:
    """Center-crop and/or zero-pad to target_height x target_width (ints, or integer scalar
    tensors)."""
    th, tw = _int_or_tensor(target_height), _int_or_tensor(target_width)
    if any(isinstance(v, int) and v <= 0 for v in (th, tw)):
        raise InvalidArgumentError(f"resize_image_with_crop_or_pad: bad target {th}x{tw}")
    dynamic = isinstance(th, Tensor) or isinstance(tw, Tensor)

    def body(x):
        if dynamic or not _hw_known(x):
            shape = _array.shape(x)
            h, w = shape[1], shape[2]
            ch, cw = _math.minimum(h, th), _math.minimum(w, tw)
            top, left = _math.maximum((h - th) // 2, 0), _math.maximum((w - tw) // 2, 0)
            x = _manip.slice_(x, _manip.stack([0, top, left, 0]), _manip.stack([-1, ch, cw, -1]))
            pt, pl = _math.maximum((th - h) // 2, 0), _math.maximum((tw - w) // 2, 0)
            return _pad_dynamic(x, pt, pl, th, tw)
        h, w = _hw("resize_image_with_crop_or_pad", x)
        ch, cw = min(h, th), min(w, tw)
        x = crop_to_bounding_box(x, max((h - th) // 2, 0), max((w - tw) // 2, 0), ch, cw)
        return pad_to_bounding_box(x, max((th - h) // 2, 0), max((tw - w) // 2, 0), th, tw)

    return _batched("resize_image_with_crop_or_pad", image, body)


resize_with_crop_or_pad = resize_image_with_crop_or_pad


def central_crop(image: Any, central_fraction: float) -> Tensor:
    """The central ``central_fraction`` of the height and width (TF's rounding of the box)."""
    frac = float(central_fraction)
    if not 0.0 < frac <= 1.0:
        raise InvalidArgumentError(f"central_crop: central_fraction must be in (0, 1], got {frac}")
    if frac == 1.0:
        return convert_to_tensor(image)

    def body(x):
        if not _hw_known(x):
            shape = _array.shape(x)
            h, w = shape[1], shape[2]
            hd, wd = _array.cast(h, _dt.float64), _array.cast(w, _dt.float64)
            sh = _array.cast((hd - hd * frac) / 2, _dt.int32)
            sw = _array.cast((wd - wd * frac) / 2, _dt.int32)
            return _manip.slice_(
                x, _manip.stack([0, sh, sw, 0]), _manip.stack([-1, h - 2 * sh, w - 2 * sw, -1])
            )
        h, w = _hw("central_crop", x)
        sh = int((h - h * frac) / 2)
        sw = int((w - w * frac) / 2)
        return crop_to_bounding_box(x, sh, sw, h - 2 * sh, w - 2 * sw)

    return _batched("central_crop", image, body)


# ---- resizing ---------------------------------------------------------------------------------


class ResizeMethod:
    BILINEAR = 0
    NEAREST_NEIGHBOR = 1
    BICUBIC = 2
    AREA = 3


def _scale(n_in: int, n_out: int, align_corners: bool) -> float:
    if align_corners and n_out > 1:
        return (n_in - 1) / (n_out - 1)
    return n_in / n_out


def _size(fn: str, size: Any) -> tuple[Any, Any]:
    """(height, width) of a resize: ints, or int32 scalar tensors where the size is computed
    in the graph (a 1-D tensor of two, or a list holding tensors)."""
    if isinstance(size, Tensor):
        if size.shape.ndims not in (None, 1) or size.shape.as_list() not in (None, [2], [None]):
            raise InvalidArgumentError(f"{fn}: size must be a 1-D tensor of 2, got {size.shape}")
        if size.op.type == "Const":
            return _size(fn, size.op.attrs["value"])
        size = _array.cast(size, _dt.int32)
        if size.shape.as_list() != [2]:  # its length known only when the step runs
            from ..graph import control_dependencies
            from .control import assert_equal

            n = _array.shape(size)[0]
            check = assert_equal(n, 2, message=f"{fn}: shape_t must have two elements")
            with control_dependencies([check]):
                size = _array.identity(size)
        return size[0], size[1]
    if isinstance(size, (list, tuple)) and any(isinstance(v, Tensor) for v in size):
        if len(size) != 2:
            raise InvalidArgumentError(f"{fn}: size must be (height, width), got {size}")
        return tuple(_array.cast(v, _dt.int32) if isinstance(v, Tensor) else int(v) for v in size)  # type: ignore[return-value]
    s = [int(v) for v in np.asarray(size).ravel()]
    if len(s) != 2 or s[0] <= 0 or s[1] <= 0:
        raise InvalidArgumentError(f"{fn}: size must be two positive ints, got {size}")
    return s[0], s[1]


def _static_or_none(n: Any) -> int | None:
    return None if isinstance(n, Tensor) else n


def _nearest_index(n_in, n_out, align_corners, half_pixel) -> np.ndarray:
    sc = _scale(n_in, n_out, align_corners)
    d = np.arange(n_out, dtype=np.float64)
    if half_pixel:
        src = np.floor((d + 0.5) * sc)
    elif align_corners:
        src = np.round(d * sc)
    else:
        src = np.floor(d * sc)
    return np.clip(src, 0, n_in - 1).astype(np.int32)


def _linear_taps(n_in, n_out, align_corners, half_pixel):
    """(low index, high index, fraction) per output position, TF's ResizeBilinear rule."""
    sc = _scale(n_in, n_out, align_corners)
    d = np.arange(n_out, dtype=np.float64)
    src = (d + 0.5) * sc - 0.5 if half_pixel else d * sc
    low = np.floor(src)
    frac = src - low
    lo = np.clip(low, 0, n_in - 1).astype(np.int32)
    hi = np.clip(low + 1, 0, n_in - 1).astype(np.int32)
    return lo, hi, frac


# Where an image's height or width is known only when the graph runs (a decoded file), the
# resize ops read it then: ResizeTaps computes the same taps from the input's size.
ResizeTaps = defop("ResizeTaps", differentiable=False)


@ResizeTaps.shape
def _taps_shape(op):
    n = op.attrs["n_out"]  # None: the output size is the second input, known at run time
    if op.attrs["nearest"]:
        return [(TensorShape([n]), _dt.int32)]
    return [
        (TensorShape([n]), _dt.int32),
        (TensorShape([n]), _dt.int32),
        (TensorShape([n]), op.attrs["dtype"]),
    ]


@ResizeTaps.kernel("cpu", "gpu")
def _taps(ctx, n_in, n_out=None):
    at = dict(ctx.attrs)
    if n_out is not None:
        at["n_out"] = int(n_out)
        if at["n_out"] <= 0:
            raise InvalidArgumentError(
                f"ResizeTaps {ctx.op.name!r}: the output size must be positive, got {at['n_out']}"
            )
    n = int(n_in)
    if n <= 0:
        raise InvalidArgumentError(
            f"ResizeTaps {ctx.op.name!r}: an image of size {n} along an axis"
        )
    xp = ctx.xp
    if at["nearest"]:
        return xp.asarray(_nearest_index(n, at["n_out"], at["align_corners"], at["half_pixel"]))
    lo, hi, frac = _linear_taps(n, at["n_out"], at["align_corners"], at["half_pixel"])
    return xp.asarray(lo), xp.asarray(hi), xp.asarray(frac.astype(at["dtype"].np))


def _axis_taps(x: Tensor, axis: int, n_out: int, nearest: bool, align, half, dt=None):
    """The taps along ``axis``: constants when its size is static, else a ResizeTaps op."""
    n_in = x.shape.as_list()[axis]
    if n_in is not None and not isinstance(n_out, Tensor):
        if nearest:
            return _array.constant(_nearest_index(n_in, n_out, align, half))
        lo, hi, frac = _linear_taps(n_in, n_out, align, half)
        return _array.constant(lo), _array.constant(hi), _array.constant(frac.astype(dt.np))
    size = _array.shape(x)[axis]
    dynamic = isinstance(n_out, Tensor)
    attrs = {"n_out": None if dynamic else n_out, "nearest": nearest, "align_corners": bool(align)}
    attrs |= {"half_pixel": bool(half), "dtype": dt or _dt.float32}
    ins = [size, n_out] if dynamic else [size]
    outs = apply("ResizeTaps", ins, attrs, "ResizeTaps")
    return outs if nearest else tuple(outs)


def _area_weights(n_in: int, n_out: int, align_corners: bool) -> np.ndarray:
    """``[n_out, n_in]``: the share of input cell i in output cell o, as TF's ResizeArea
    averages (the cells an output cell covers, each by its overlap, clamped at the border)."""
    sc = _scale(n_in, n_out, align_corners)
    w = np.zeros((n_out, n_in), np.float64)
    for o in range(n_out):
        lo, hi = o * sc, (o + 1) * sc
        for i in range(int(np.floor(lo)), int(np.ceil(hi))):
            if i < lo:
                part = sc if i + 1 > hi else i + 1 - lo
            else:
                part = hi - i if i + 1 > hi else 1.0
            w[o, min(max(i, 0), n_in - 1)] += part / sc
    return w


AreaWeights = defop("AreaWeights", differentiable=False)


@AreaWeights.shape
def _area_weights_shape(op):
    return [(TensorShape([op.attrs["n_out"], None]), _dt.float32)]


@AreaWeights.kernel("cpu", "gpu")
def _area_weights_kernel(ctx, n_in, n_out=None):
    n = int(n_in)
    if n <= 0:
        raise InvalidArgumentError(f"AreaWeights {ctx.op.name!r}: an image of size {n}")
    m = ctx.attrs["n_out"] if n_out is None else int(n_out)
    if m <= 0:
        raise InvalidArgumentError(f"AreaWeights {ctx.op.name!r}: an output size of {m}")
    w = _area_weights(n, m, ctx.attrs["align_corners"])
    return ctx.xp.asarray(w.astype(np.float32))


def resize_area(
    images: Any, size: Any, align_corners: bool = False, name: str | None = None
) -> Tensor:
    """TF's area resize to ``size`` = (height, width): each output pixel the average of the input
    pixels its area covers, weighted by their overlap; float32 out (as TF). Differentiable (TF's
    has no gradient)."""
    oh, ow = _size("resize_area", size)

    def body(x):
        with name_scope(name or "ResizeArea"):
            if x.dtype != _dt.float32:
                x = _array.cast(x, _dt.float32)
            ws = []
            for axis, n_out in ((1, oh), (2, ow)):
                n_in = x.shape.as_list()[axis]
                if n_in is not None and not isinstance(n_out, Tensor):
                    w = _array.constant(
                        _area_weights(n_in, n_out, align_corners).astype(np.float32)
                    )
                else:
                    dynamic = isinstance(n_out, Tensor)
                    attrs = {"n_out": _static_or_none(n_out)}
                    attrs["align_corners"] = bool(align_corners)
                    ins = [_array.shape(x)[axis]] + ([n_out] if dynamic else [])
                    w = apply("AreaWeights", ins, attrs, "AreaWeights")
                ws.append(w)
            from .linalg import einsum

            y = einsum("oh,bhwc->bowc", ws[0], x)
            return _hw_set(einsum("pw,bowc->bopc", ws[1], y), *map(_static_or_none, (oh, ow)))

    return _batched("resize_area", images, body)


def resize_nearest_neighbor(
    images: Any,
    size: Any,
    align_corners: bool = False,
    name: str | None = None,
    half_pixel_centers: bool = False,
) -> Tensor:
    """Nearest-neighbor resize to ``size`` = (height, width); keeps the dtype."""
    oh, ow = _size("resize_nearest_neighbor", size)

    def body(x):
        with name_scope(name or "ResizeNearestNeighbor"):
            rows = _axis_taps(x, 1, oh, True, align_corners, half_pixel_centers)
            cols = _axis_taps(x, 2, ow, True, align_corners, half_pixel_centers)
            y = _manip.gather(x, rows, axis=1)
            return _hw_set(_manip.gather(y, cols, axis=2), *map(_static_or_none, (oh, ow)))

    return _batched("resize_nearest_neighbor", images, body)


def resize_bilinear(
    images: Any,
    size: Any,
    align_corners: bool = False,
    name: str | None = None,
    half_pixel_centers: bool = False,
) -> Tensor:
    """Bilinear resize to ``size`` = (height, width). Integer images give float32 (as TF);
    float images keep their dtype (TF gives float32 for all)."""
    oh, ow = _size("resize_bilinear", size)
    if align_corners and half_pixel_centers:
        raise InvalidArgumentError(
            "resize_bilinear: align_corners and half_pixel_centers cannot both be True"
        )

    def body(x):
        with name_scope(name or "ResizeBilinear"):
            if not _is_float(x.dtype):
                x = _array.cast(x, _dt.float32)
            y = x
            for axis, n_out in ((1, oh), (2, ow)):
                lo, hi, frac = _axis_taps(
                    y, axis, n_out, False, align_corners, half_pixel_centers, x.dtype
                )
                a = _manip.gather(y, lo, axis=axis)
                b = _manip.gather(y, hi, axis=axis)
                shape = [1, 1, 1, 1]
                shape[axis] = -1 if isinstance(n_out, Tensor) else n_out
                y = a + (b - a) * _array.reshape(frac, shape)
            return _hw_set(y, *map(_static_or_none, (oh, ow)))

    return _batched("resize_bilinear", images, body)


def resize_images(
    images: Any,
    size: Any,
    method: int = ResizeMethod.BILINEAR,
    align_corners: bool = False,
    preserve_aspect_ratio: bool = False,
    name: str | None = None,
) -> Tensor:
    """TF1's ``tf.image.resize_images`` (BILINEAR, NEAREST_NEIGHBOR or AREA)."""
    if preserve_aspect_ratio:
        raise UnimplementedError("resize_images: preserve_aspect_ratio is not supported")
    if method == ResizeMethod.BILINEAR:
        return resize_bilinear(images, size, align_corners, name=name)
    if method == ResizeMethod.NEAREST_NEIGHBOR:
        return resize_nearest_neighbor(images, size, align_corners, name=name)
    if method == ResizeMethod.AREA:
        return resize_area(images, size, align_corners, name=name)
    raise UnimplementedError(f"resize_images: method {method} (bicubic) is not supported")


resize = resize_images  # TF1's tf.image.resize is resize_images


# ---- dtype conversion and photometric adjustments --------------------------------------------


def convert_image_dtype(
    image: Any, dtype: Any, saturate: bool = False, name: str | None = None
) -> Tensor:
    """Convert between image dtypes, rescaling: floats are in [0, 1), integers span 0..max."""
    x = convert_to_tensor(image)
    out = _dt.as_dtype(dtype)
    src = x.dtype
    if src == out:
        return _array.identity(x, name=name or "convert_image")
    sf, of = _is_float(src), _is_float(out)
    with name_scope(name or "convert_image"):
        if sf and of:
            return _array.cast(x, out)
        if not sf and not of:
            imax, omax = np.iinfo(src.np).max, np.iinfo(out.np).max
            if imax > omax:
                scale = (int(imax) + 1) // (int(omax) + 1)
                return _array.cast(_math.floordiv(x, _array.constant(scale, dtype=src)), out)
            scale = (int(omax) + 1) // (int(imax) + 1)
            return _array.cast(x, out) * _array.constant(scale, dtype=out)
        if not sf and of:
            return _array.cast(x, out) * (1.0 / float(np.iinfo(src.np).max))
        info = np.iinfo(out.np)
        scaled = x * (float(info.max) + 0.5)
        if saturate:  # bounds representable in the float type, so the cast cannot overflow
            hi = np.array(info.max, dtype=src.np)
            if float(hi) > info.max:
                hi = np.nextafter(hi, hi.dtype.type(0))
            lo = _array.constant(np.array(info.min, dtype=src.np))
            scaled = _math.minimum(_math.maximum(scaled, lo), _array.constant(hi))
        return _array.cast(scaled, out)


def _in_float(fn: str, image: Any, body) -> Tensor:
    """Apply ``body`` in float (int images converted to float32 and back, saturating)."""
    x = convert_to_tensor(image)
    with name_scope(fn):
        if _is_float(x.dtype):
            return body(x)
        y = body(convert_image_dtype(x, _dt.float32))
        return convert_image_dtype(y, x.dtype, saturate=True)


def adjust_brightness(image: Any, delta: Any) -> Tensor:
    """``image + delta`` (in float for integer images)."""
    return _in_float("adjust_brightness", image, lambda x: x + _math_cast(delta, x))


def _math_cast(v: Any, like: Tensor) -> Tensor:
    return _array.cast(convert_to_tensor(v), like.dtype)


def adjust_contrast(images: Any, contrast_factor: Any) -> Tensor:
    """``(x - mean) * contrast_factor + mean``, the mean per image and channel."""
    _image("adjust_contrast", images)

    def body(x):
        mean = _math.reduce_mean(x, axis=[-3, -2], keepdims=True)
        return (x - mean) * _math_cast(contrast_factor, x) + mean

    return _in_float("adjust_contrast", images, body)


def random_brightness(image: Any, max_delta: float, seed: Any = None) -> Tensor:
    """adjust_brightness by a delta uniform in [-max_delta, max_delta)."""
    if max_delta < 0:
        raise ValueError("random_brightness: max_delta must be non-negative")
    delta = _random.random_uniform([], -float(max_delta), float(max_delta), seed=seed)
    return adjust_brightness(image, delta)


def random_contrast(image: Any, lower: float, upper: float, seed: Any = None) -> Tensor:
    """adjust_contrast by a factor uniform in [lower, upper)."""
    if upper <= lower:
        raise ValueError("random_contrast: upper must be > lower")
    if lower < 0:
        raise ValueError("random_contrast: lower must be non-negative")
    factor = _random.random_uniform([], float(lower), float(upper), seed=seed)
    return adjust_contrast(image, factor)


def per_image_standardization(image: Any) -> Tensor:
    """``(x - mean) / max(stddev, 1/sqrt(num_elements))`` per image (integer images -> float32)."""
    x, r = _image("per_image_standardization", image)
    dims = x.shape.as_list()[-3:]
    if any(d is None for d in dims):
        raise UnimplementedError(
            f"per_image_standardization: needs a known image shape, got {x.shape}"
        )
    n = int(np.prod(dims))
    with name_scope("per_image_standardization"):
        if not _is_float(x.dtype):
            x = _array.cast(x, _dt.float32)
        axes = [-3, -2, -1]
        mean = _math.reduce_mean(x, axis=axes, keepdims=True)
        var = _math.reduce_mean(_math.square(x - mean), axis=axes, keepdims=True)
        std = _math.maximum(_math.sqrt(var), 1.0 / np.sqrt(n))
        return (x - mean) / std


_GRAY = np.array([0.2989, 0.5870, 0.1140])


def rgb_to_grayscale(images: Any, name: str | None = None) -> Tensor:
    """Luma ``0.2989 R + 0.5870 G + 0.1140 B``, keeping a last axis of size 1."""
    x = convert_to_tensor(images)
    if x.shape.ndims is not None and x.shape.as_list()[-1] not in (None, 3):
        raise InvalidArgumentError(f"rgb_to_grayscale: last axis must be 3, got {x.shape}")

    def body(f):
        w = _array.constant(_GRAY.astype(f.dtype.np), name="rgb_weights")
        return _math.reduce_sum(f * w, axis=-1, keepdims=True)

    return _in_float(name or "rgb_to_grayscale", x, body)


def grayscale_to_rgb(images: Any, name: str | None = None) -> Tensor:
    """Repeat a last axis of size 1 three times."""
    x = convert_to_tensor(images)
    if x.shape.ndims is None or x.shape.as_list()[-1] not in (None, 1):
        raise InvalidArgumentError(f"grayscale_to_rgb: last axis must be 1, got {x.shape}")
    return _manip.concat([x, x, x], -1, name=name or "grayscale_to_rgb")


# ---- HSV: TF's RGBToHSV / HSVToRGB kernels, hue and saturation ---------------------------------

RGBToHSV = defop("RGBToHSV", differentiable=False)
HSVToRGB = defop("HSVToRGB", differentiable=False)


def _hsv_shape(op):
    x = op.inputs[0]
    if x.shape.ndims is not None and x.shape.as_list()[-1] not in (None, 3):
        raise InvalidArgumentError(f"{op.type} {op.name!r}: last axis must be 3, got {x.shape}")
    return [(x.shape, x.dtype)]


RGBToHSV.shape(_hsv_shape)
HSVToRGB.shape(_hsv_shape)


@RGBToHSV.kernel("cpu", "gpu", dtypes=(_dt.float16, _dt.float32, _dt.float64))
def _rgb_to_hsv(ctx, rgb):
    """TF's kernel: V = max, S = range / V (0 where V is 0), H from the channel that is the
    max, in [0, 1) (0 where the range is 0)."""
    xp = ctx.xp
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    v = xp.maximum(xp.maximum(r, g), b)
    rng_ = v - xp.minimum(xp.minimum(r, g), b)
    s = xp.where(v > 0, rng_ / xp.where(v > 0, v, 1), 0)
    safe = xp.where(rng_ > 0, rng_, 1)
    h = xp.where(
        r == v, (g - b) / safe, xp.where(g == v, 2.0 + (b - r) / safe, 4.0 + (r - g) / safe)
    )
    h = h / 6.0
    h = xp.where(h < 0, h + 1.0, h)
    h = xp.where(rng_ > 0, h, 0)
    return xp.stack([h, s, v], axis=-1).astype(rgb.dtype, copy=False)


@HSVToRGB.kernel("cpu", "gpu", dtypes=(_dt.float16, _dt.float32, _dt.float64))
def _hsv_to_rgb(ctx, hsv):
    """TF's kernel: six sectors of the hue circle, chroma = V S."""
    xp = ctx.xp
    h, s, v = hsv[..., 0], hsv[..., 1], hsv[..., 2]
    c = s * v
    m = v - c
    dh = h * 6.0
    x = c * (1 - xp.abs(xp.fmod(dh, 2.0) - 1))
    zero = xp.zeros_like(c)
    sector = xp.floor(dh).astype(np.int64) % 6
    rs = xp.choose(sector, [c, x, zero, zero, x, c])
    gs = xp.choose(sector, [x, c, c, x, zero, zero])
    bs = xp.choose(sector, [zero, zero, x, c, c, x])
    return xp.stack([rs + m, gs + m, bs + m], axis=-1).astype(hsv.dtype, copy=False)


def rgb_to_hsv(images: Any, name: str | None = None) -> Tensor:
    """RGB in [0, 1] to hue, saturation and value in [0, 1] (TF1's; float images)."""
    return apply("RGBToHSV", [convert_to_tensor(images)], {}, name or "RGBToHSV")


def hsv_to_rgb(images: Any, name: str | None = None) -> Tensor:
    """Hue, saturation and value in [0, 1] back to RGB (TF1's; float images)."""
    return apply("HSVToRGB", [convert_to_tensor(images)], {}, name or "HSVToRGB")


def adjust_hue(image: Any, delta: Any, name: str | None = None) -> Tensor:
    """The hue turned by ``delta`` in [-1, 1] (a fraction of the circle), as TF1's: through
    HSV in float, integer images converted and back."""
    if not isinstance(delta, Tensor) and not -1.0 <= float(delta) <= 1.0:
        raise ValueError(f"adjust_hue: delta must be in [-1, 1], got {delta}")

    def body(x):
        hsv = rgb_to_hsv(x)
        lead = [0] * (x.shape.ndims - 1)
        rest = [-1] * (x.shape.ndims - 1)
        h = _manip.slice_(hsv, lead + [0], rest + [1])
        sv = _manip.slice_(hsv, lead + [1], rest + [2])
        h = _math.floormod(h + _math_cast(delta, h), _math_cast(1.0, h))
        return hsv_to_rgb(_manip.concat([h, sv], -1))

    return _in_float(name or "adjust_hue", image, body)


def adjust_saturation(image: Any, saturation_factor: Any, name: str | None = None) -> Tensor:
    """The saturation times ``saturation_factor``, clipped to [0, 1], as TF1's (through HSV)."""

    def body(x):
        hsv = rgb_to_hsv(x)
        lead = [0] * (x.shape.ndims - 1)
        rest = [-1] * (x.shape.ndims - 1)
        h = _manip.slice_(hsv, lead + [0], rest + [1])
        s = _manip.slice_(hsv, lead + [1], rest + [1])
        v = _manip.slice_(hsv, lead + [2], rest + [1])
        s = _math.minimum(_math.maximum(s * _math_cast(saturation_factor, s), 0.0), 1.0)
        return hsv_to_rgb(_manip.concat([h, s, v], -1))

    return _in_float(name or "adjust_saturation", image, body)


def random_hue(image: Any, max_delta: float, seed: Any = None) -> Tensor:
    """adjust_hue by a delta uniform in [-max_delta, max_delta] (max_delta in [0, 0.5])."""
    if not 0.0 <= float(max_delta) <= 0.5:
        raise ValueError(f"random_hue: max_delta must be in [0, 0.5], got {max_delta}")
    delta = _random.random_uniform([], -float(max_delta), float(max_delta), seed=seed)
    return adjust_hue(image, delta)


def random_saturation(image: Any, lower: float, upper: float, seed: Any = None) -> Tensor:
    """adjust_saturation by a factor uniform in [lower, upper)."""
    if upper <= lower:
        raise ValueError("random_saturation: upper must be > lower")
    if lower < 0:
        raise ValueError("random_saturation: lower must be non-negative")
    factor = _random.random_uniform([], float(lower), float(upper), seed=seed)
    return adjust_saturation(image, factor)


def adjust_gamma(image: Any, gamma: float = 1, gain: float = 1) -> Tensor:
    """``gain * image ** gamma`` (in float for integer images); gamma must be non-negative."""
    if not isinstance(gamma, Tensor) and gamma < 0:
        raise ValueError("adjust_gamma: gamma must be non-negative")
    return _in_float(
        "adjust_gamma", image, lambda x: _math_cast(gain, x) * _math.pow(x, _math_cast(gamma, x))
    )


def total_variation(images: Any, name: str | None = None) -> Tensor:
    """Sum of absolute differences of neighboring pixels, per image (a scalar for one image)."""
    x, r = _image("total_variation", images)
    with name_scope(name or "total_variation"):
        a = list(range(r - 3, r))
        h, w = _hw("total_variation", x)
        lead = [0] * (r - 3)
        rest = [-1] * (r - 3)
        dy = _manip.slice_(x, lead + [1, 0, 0], rest + [-1, -1, -1]) - _manip.slice_(
            x, lead + [0, 0, 0], rest + [h - 1, -1, -1]
        )
        dx = _manip.slice_(x, lead + [0, 1, 0], rest + [-1, -1, -1]) - _manip.slice_(
            x, lead + [0, 0, 0], rest + [-1, w - 1, -1]
        )
        return _math.reduce_sum(_math.abs(dy), axis=a) + _math.reduce_sum(_math.abs(dx), axis=a)


__all__ = [
    "adjust_brightness",
    "adjust_contrast",
    "adjust_gamma",
    "adjust_hue",
    "adjust_saturation",
    "central_crop",
    "convert_image_dtype",
    "crop_to_bounding_box",
    "flip_left_right",
    "flip_up_down",
    "grayscale_to_rgb",
    "hsv_to_rgb",
    "pad_to_bounding_box",
    "per_image_standardization",
    "random_brightness",
    "random_contrast",
    "random_crop",
    "random_flip_left_right",
    "random_flip_up_down",
    "random_hue",
    "random_saturation",
    "resize",
    "resize_area",
    "resize_bilinear",
    "resize_image_with_crop_or_pad",
    "resize_images",
    "resize_nearest_neighbor",
    "resize_with_crop_or_pad",
    "ResizeMethod",
    "rgb_to_grayscale",
    "rgb_to_hsv",
    "rot90",
    "total_variation",
    "transpose",
    "transpose_image",
]
