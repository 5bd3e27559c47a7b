"""Compiled CPU kernels for depthwise convolution (depthwise.py), float32/float64 NHWC: one pass
over the output, each cell's window read straight from the input (no padded copy, no patch
matrix, no temporaries), channels innermost. The forward and input-gradient kernels split the
batch over the intra-op threads; the filter gradient splits the channels (each thread owns its
part of the filter), so no result depends on the split."""

from __future__ import annotations

import numpy as np
from numba import njit

from . import intraop

_FAST = (np.dtype(np.float32), np.dtype(np.float64))


def supports(*arrays) -> bool:
    dt = arrays[0].dtype
    return dt in _FAST and all(type(a) is np.ndarray and a.dtype == dt for a in arrays)


@njit(cache=True, nogil=True, inline="always")
def _span(o_count, stride, offset, size):  # pragma: no cover - compiled
    """The outputs o in [lo, hi) whose source o * stride + offset lies in [0, size)."""
    lo = 0
    if offset < 0:
        lo = (-offset + stride - 1) // stride
    hi = o_count
    if (o_count - 1) * stride + offset >= size:
        hi = (size - 1 - offset) // stride + 1 if size - 1 - offset >= 0 else 0
    return lo, max(hi, lo)


@njit(cache=True, nogil=True, fastmath=True)
def _forward(x, f2, m, sh, sw, dh, dw, pt, pl, y):  # pragma: no cover - compiled
    """``y`` [.., c * m] of ``x`` [.., c] and the filter ``f2`` [kh, kw, c * m]: per output
    row, tap by tap, a long loop over the row's (column, channel) cells."""
    nb, h, w, c = x.shape
    kh, kw, cm = f2.shape
    ho, wo = y.shape[1], y.shape[2]
    for b in range(nb):
        for oy in range(ho):
            row = y[b, oy]
            row[:] = 0
            for i in range(kh):
                yy = oy * sh - pt + i * dh
                if yy < 0 or yy >= h:
                    continue
                src = x[b, yy]
                for j in range(kw):
                    off = j * dw - pl
                    lo, hi = _span(wo, sw, off, w)
                    fij = f2[i, j]
                    for ox in range(lo, hi):
                        xs = src[ox * sw + off]
                        out = row[ox]
                        if m == 1:
                            for k in range(c):
                                out[k] += xs[k] * fij[k]
                        else:
                            for k in range(cm):
                                out[k] += xs[k // m] * fij[k]


@njit(cache=True, nogil=True, fastmath=True)
def _backprop_input(g, f2, m, sh, sw, dh, dw, pt, pl, dx):  # pragma: no cover - compiled
    nb, h, w, c = dx.shape
    kh, kw, cm = f2.shape
    ho, wo = g.shape[1], g.shape[2]
    for b in range(nb):
        dx[b] = 0
        for oy in range(ho):
            grow = g[b, oy]
            for i in range(kh):
                yy = oy * sh - pt + i * dh
                if yy < 0 or yy >= h:
                    continue
                dst = dx[b, yy]
                for j in range(kw):
                    off = j * dw - pl
                    lo, hi = _span(wo, sw, off, w)
                    fij = f2[i, j]
                    for ox in range(lo, hi):
                        cell = dst[ox * sw + off]
                        gg = grow[ox]
                        if m == 1:
                            for k in range(c):
                                cell[k] += gg[k] * fij[k]
                        else:
                            for k in range(cm):
                                cell[k // m] += gg[k] * fij[k]


@njit(cache=True, nogil=True, fastmath=True)
def _backprop_filter(x, g, m, sh, sw, dh, dw, pt, pl, df2):  # pragma: no cover - compiled
    """``df2`` [kh, kw, c * m] for the channels of ``x`` [.., c] and ``g`` [.., c * m]."""
    nb, h, w, c = x.shape
    kh, kw, cm = df2.shape
    ho, wo = g.shape[1], g.shape[2]
    df2[:] = 0
    for b in range(nb):
        for oy in range(ho):
            grow = g[b, oy]
            for i in range(kh):
                yy = oy * sh - pt + i * dh
                if yy < 0 or yy >= h:
                    continue
                src = x[b, yy]
                for j in range(kw):
                    off = j * dw - pl
                    lo, hi = _span(wo, sw, off, w)
                    dij = df2[i, j]
                    for ox in range(lo, hi):
                        xs = src[ox * sw + off]
                        gg = grow[ox]
                        if m == 1:
                            for k in range(c):
                                dij[k] += xs[k] * gg[k]
                        else:
                            for k in range(cm):
                                dij[k] += xs[k // m] * gg[k]


def forward(x, f, sh, sw, dh, dw, ho, wo, pt, pl):
    x = np.ascontiguousarray(x)
    kh, kw, c, m = f.shape
    f2 = np.ascontiguousarray(f).reshape(kh, kw, c * m)
    n = x.shape[0]
    y = np.empty((n, ho, wo, c * m), x.dtype)
    per = ho * wo * c * m * kh * kw
    intraop.chunks(n, per, lambda i, j: _forward(x[i:j], f2, m, sh, sw, dh, dw, pt, pl, y[i:j]))
    return y


def backprop_input(shape, f, g, sh, sw, dh, dw, pt, pl):
    g = np.ascontiguousarray(g)
    kh, kw, c, m = f.shape
    f2 = np.ascontiguousarray(f).reshape(kh, kw, c * m)
    dx = np.empty(shape, g.dtype)
    per = g[0].size * kh * kw
    intraop.chunks(
        shape[0],
        per,
        lambda i, j: _backprop_input(g[i:j], f2, m, sh, sw, dh, dw, pt, pl, dx[i:j]),
    )
    return dx


def backprop_filter(x, g, fshape, sh, sw, dh, dw, pt, pl):
    x, g = np.ascontiguousarray(x), np.ascontiguousarray(g)
    kh, kw, c, m = fshape
    df = np.empty(fshape, x.dtype)
    g5 = g.reshape(*g.shape[:3], c, m)

    def part(c0: int, c1: int) -> None:
        gpart = np.ascontiguousarray(g5[..., c0:c1, :]).reshape(*g.shape[:3], (c1 - c0) * m)
        xpart = x if (c0, c1) == (0, c) else np.ascontiguousarray(x[..., c0:c1])
        out = np.empty((kh, kw, (c1 - c0) * m), x.dtype)
        _backprop_filter(xpart, gpart, m, sh, sw, dh, dw, pt, pl, out)
        df[:, :, c0:c1, :] = out.reshape(kh, kw, c1 - c0, m)

    intraop.chunks(c, g.size * kh * kw // max(c, 1), part)
    return df
