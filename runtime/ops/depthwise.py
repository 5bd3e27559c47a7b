"""Depthwise 2-D convolution as its own kernels (TF's ``DepthwiseConv2dNative`` and its two
backprops): output channel ``c * M + m`` is input channel ``c`` correlated with
``filter[:, :, c, m]``. Each kernel does the ``2 * N * Ho * Wo * C * M * kh * kw`` flops the op
needs, not the ``C`` times more of a full convolution with a block-diagonal filter: on the CPU
compiled loops (depthwise_cpu.py), elsewhere (cupy, float16) a loop over the filter's taps of
one broadcast multiply-add over the whole batch. Strides, dilations and TF's SAME/VALID
padding."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import TensorShape
from ..registry import Cost, apply, defop, nbytes

_FLOAT = (_dt.float16, _dt.float32, _dt.float64)


def _axis(n: int, k: int, s: int, d: int, padding: str, what: str) -> tuple[int, int, int]:
    """(output size, padding before, padding after) along one axis, TF's rule."""
    span = (k - 1) * d + 1
    if padding == "SAME":
        out = -(-n // s)
        total = max((out - 1) * s + span - n, 0)
        return out, total // 2, total - total // 2
    out = (n - span) // s + 1
    if out <= 0:
        raise InvalidArgumentError(
            f"DepthwiseConv2dNative: a filter spanning {span} does not fit in an input {what} "
            f"of {n} (VALID)"
        )
    return out, 0, 0


def _plan(attrs: dict, xshape: tuple, fshape: tuple) -> tuple:
    if len(xshape) != 4 or len(fshape) != 4:
        raise InvalidArgumentError(
            f"DepthwiseConv2dNative: input must be 4-D NHWC and filter [kh, kw, C, M], got "
            f"shapes {list(xshape)} and {list(fshape)}"
        )
    n, h, w, c = xshape
    kh, kw, fc, m = fshape
    if c != fc:
        raise InvalidArgumentError(
            f"DepthwiseConv2dNative: input depth {c} does not match the filter's in_channels "
            f"{fc} (filter shape {list(fshape)})"
        )
    _, sh, sw, _ = attrs["strides"]
    _, dh, dw, _ = attrs["dilations"]
    ho, pt, pb = _axis(h, kh, sh, dh, attrs["padding"], "height")
    wo, pl, pr = _axis(w, kw, sw, dw, attrs["padding"], "width")
    return n, h, w, c, kh, kw, m, sh, sw, dh, dw, ho, wo, (pt, pb), (pl, pr)


def _taps(kh, kw, sh, sw, dh, dw, ho, wo):
    """For each tap (i, j), the rows and columns of the padded input it meets."""
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dh, i * dh + sh * (ho - 1) + 1, sh)
            cols = slice(j * dw, j * dw + sw * (wo - 1) + 1, sw)
            yield i, j, rows, cols


_cpu = None


def _fast(*arrays: Any) -> Any:
    """The compiled CPU kernels (depthwise_cpu.py) where they apply (numpy float32/float64),
    else None (cupy arrays, float16: the broadcast loop below). Imported on first use."""
    global _cpu
    if any(type(a) is not np.ndarray for a in arrays):
        return None
    if _cpu is None:
        from . import depthwise_cpu

        _cpu = depthwise_cpu
    return _cpu if _cpu.supports(*arrays) else None


def _pad(xp: Any, x: Any, ph: tuple, pw: tuple) -> Any:
    if not any(ph) and not any(pw):
        return x
    return xp.pad(x, ((0, 0), ph, pw, (0, 0)))


def _out_shape(op, xs: TensorShape, fs: TensorShape) -> TensorShape:
    if xs.ndims != 4 or fs.ndims != 4 or None in fs.as_list():
        m = fs.as_list()[3] if fs.ndims == 4 else None
        c = xs.as_list()[3] if xs.ndims == 4 else None
        return TensorShape([None, None, None, None if c is None or m is None else c * m])
    n, h, w, c = xs.as_list()
    kh, kw, fc, m = fs.as_list()
    if c is not None and c != fc:
        raise InvalidArgumentError(
            f"DepthwiseConv2dNative {op.name!r}: input depth {c} (input shape {xs}) does not "
            f"match filter in_channels {fc} (filter shape {fs})"
        )
    _, sh, sw, _ = op.attrs["strides"]
    _, dh, dw, _ = op.attrs["dilations"]
    ho = None if h is None else _axis(h, kh, sh, dh, op.attrs["padding"], "height")[0]
    wo = None if w is None else _axis(w, kw, sw, dw, op.attrs["padding"], "width")[0]
    return TensorShape([n, ho, wo, fc * m])


def _flops(x_shape, f_shape, out_shape) -> float:
    n, ho, wo, _ = out_shape
    kh, kw, c, m = f_shape
    return 2.0 * n * ho * wo * c * m * kh * kw


# ---- forward ----------------------------------------------------------------------------------

DepthwiseConv2dNative = defop("DepthwiseConv2dNative")
DepthwiseBackpropInput = defop("DepthwiseConv2dNativeBackpropInput", differentiable=False)
DepthwiseBackpropFilter = defop("DepthwiseConv2dNativeBackpropFilter", differentiable=False)


@DepthwiseConv2dNative.shape
def _dw_shape(op):
    x, f = op.inputs
    return [(_out_shape(op, x.shape, f.shape), x.dtype)]


@DepthwiseConv2dNative.kernel("cpu", "gpu", dtypes=_FLOAT)
def _dw(ctx, x, f):
    xp = ctx.xp
    n, h, w, c, kh, kw, m, sh, sw, dh, dw, ho, wo, ph, pw = _plan(ctx.attrs, x.shape, f.shape)
    if min(n, ho, wo, c * m) == 0:
        return xp.zeros((n, ho, wo, c * m), x.dtype)
    fast = _fast(x, f)
    if fast is not None:
        return fast.forward(x, f, sh, sw, dh, dw, ho, wo, ph[0], pw[0])
    acc = np.float32 if x.dtype == np.float16 else x.dtype  # float16 accumulates in float32
    xpad = _pad(xp, x, ph, pw).astype(acc, copy=False)
    f = f.astype(acc, copy=False)
    out = xp.zeros((n, ho, wo, c, m), acc)
    for i, j, rows, cols in _taps(kh, kw, sh, sw, dh, dw, ho, wo):
        out += xpad[:, rows, cols, :, None] * f[i, j]
    return out.reshape(n, ho, wo, c * m).astype(x.dtype, copy=False)


@DepthwiseConv2dNative.cost
def _dw_cost(op, ins, outs):
    r = sum(nbytes(s, t.dtype) for s, t in zip(ins, op.inputs))
    wr = nbytes(outs[0], op.outputs[0].dtype)
    return Cost(_flops(ins[0], ins[1], outs[0]), float(r), float(wr))


@DepthwiseConv2dNative.gradient
def _dw_grad(op, g):
    from .nn import _shape_tensor

    x, f = op.inputs
    attrs = dict(op.attrs)
    dx = apply(
        "DepthwiseConv2dNativeBackpropInput",
        [_shape_tensor(x), f, g],
        attrs,
        "DepthwiseBackpropInput",
    )
    df = apply(
        "DepthwiseConv2dNativeBackpropFilter",
        [x, _shape_tensor(f), g],
        attrs,
        "DepthwiseBackpropFilter",
    )
    return [dx, df]


# ---- backprops ------------------------------------------------------------------------------


@DepthwiseBackpropInput.shape
def _dwbi_shape(op):
    from .random import static_shape_value

    return [(static_shape_value(op.inputs[0]), op.inputs[1].dtype)]


@DepthwiseBackpropInput.kernel("cpu", "gpu")
def _dw_backprop_input(ctx, input_sizes, f, g):
    xp = ctx.xp
    shape = tuple(int(v) for v in np.asarray(input_sizes).ravel())
    n, h, w, c, kh, kw, m, sh, sw, dh, dw, ho, wo, ph, pw = _plan(ctx.attrs, shape, f.shape)
    if min(n, h, w, c) == 0 or min(ho, wo) == 0:
        return xp.zeros(shape, g.dtype)
    fast = _fast(f, g)
    if fast is not None:
        return fast.backprop_input(shape, f, g, sh, sw, dh, dw, ph[0], pw[0])
    acc = np.float32 if g.dtype == np.float16 else g.dtype
    g5 = g.astype(acc, copy=False).reshape(n, ho, wo, c, m)
    f = f.astype(acc, copy=False)
    dpad = xp.zeros((n, h + sum(ph), w + sum(pw), c), acc)
    for i, j, rows, cols in _taps(kh, kw, sh, sw, dh, dw, ho, wo):
        dpad[:, rows, cols, :] += (g5 * f[i, j]).sum(axis=-1)
    dx = dpad[:, ph[0] : ph[0] + h, pw[0] : pw[0] + w, :]
    return xp.ascontiguousarray(dx).astype(g.dtype, copy=False)


@DepthwiseBackpropInput.cost
def _dwbi_cost(op, ins, outs):
    return Cost(_flops(outs[0], ins[1], ins[2]), float(nbytes(ins[2], op.inputs[2].dtype)),
                float(nbytes(outs[0], op.outputs[0].dtype)))  # fmt: skip


@DepthwiseBackpropFilter.shape
def _dwbf_shape(op):
    from .random import static_shape_value

    return [(static_shape_value(op.inputs[1]), op.inputs[0].dtype)]


@DepthwiseBackpropFilter.kernel("cpu", "gpu")
def _dw_backprop_filter(ctx, x, filter_sizes, g):
    xp = ctx.xp
    fshape = tuple(int(v) for v in np.asarray(filter_sizes).ravel())
    n, h, w, c, kh, kw, m, sh, sw, dh, dw, ho, wo, ph, pw = _plan(ctx.attrs, x.shape, fshape)
    if min(n, ho, wo) == 0:
        return xp.zeros(fshape, x.dtype)
    fast = _fast(x, g)
    if fast is not None:
        return fast.backprop_filter(x, g, fshape, sh, sw, dh, dw, ph[0], pw[0])
    acc = np.float32 if x.dtype == np.float16 else x.dtype
    xpad = _pad(xp, x, ph, pw).astype(acc, copy=False)
    g5 = g.astype(acc, copy=False).reshape(n, ho, wo, c, m)
    df = xp.zeros((kh, kw, c, m), acc)
    for i, j, rows, cols in _taps(kh, kw, sh, sw, dh, dw, ho, wo):
        df[i, j] = xp.einsum("nhwc,nhwcm->cm", xpad[:, rows, cols, :], g5)
    return df.astype(x.dtype, copy=False)


@DepthwiseBackpropFilter.cost
def _dwbf_cost(op, ins, outs):
    return Cost(_flops(ins[0], outs[0], ins[2]), float(nbytes(ins[0], op.inputs[0].dtype)
                + nbytes(ins[2], op.inputs[2].dtype)), float(nbytes(outs[0], op.outputs[0].dtype)))  # fmt: skip


def depthwise(x: Any, f: Any, strides: tuple, padding: str, dilations: tuple, name: str) -> Any:
    """The DepthwiseConv2dNative op of NHWC ``x`` and ``f`` [kh, kw, C, M]."""
    attrs = {"strides": strides, "padding": padding, "dilations": dilations}
    return apply("DepthwiseConv2dNative", [x, f], attrs, name)
