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


@njit(cache=True, nogil=True)
def _forward(x, f2, m, sh, sw, dh, dw, pt, pl, y):  # pragma: no cover - compiled
    """``y`` [.., c * m] of ``x`` [.., c] and the filter ``f2`` [kh, kw, c * m]."""
    nb, h, w, c = x.shape
    kh, kw, cm = f2.shape
    ho, wo = y.shape[1], y.shape[2]
    for b in range(nb):
        for oy in range(ho):
            for ox in range(wo):
                out = y[b, oy, ox]
                for k in range(cm):
                    out[k] = 0
                for i in range(kh):
                    yy = oy * sh - pt + i * dh
                    if yy < 0 or yy >= h:
                        continue
                    for j in range(kw):
                        xx = ox * sw - pl + j * dw
                        if xx < 0 or xx >= w:
                            continue
                        src = x[b, yy, xx]
                        fij = f2[i, j]
                        if m == 1:
                            for k in range(c):
                                out[k] += src[k] * fij[k]
                        else:
                            for k in range(cm):
                                out[k] += src[k // m] * fij[k]


@njit(cache=True, nogil=True)
def _backprop_input(g, f2, m, sh, sw, dh, dw, pt, pl, dx):  # pragma: no cover - compiled
    nb, h, w, c = dx.shape
    kh, kw, cm = f2.shape
    ho, wo = g.shape[1], g.shape[2]
    for b in range(nb):
        dxb = dx[b]
        for yy in range(h):
            for xx in range(w):
                cell = dxb[yy, xx]
                for ch in range(c):
                    cell[ch] = 0
        for oy in range(ho):
            for ox in range(wo):
                gg = g[b, oy, ox]
                for i in range(kh):
                    yy = oy * sh - pt + i * dh
                    if yy < 0 or yy >= h:
                        continue
                    for j in range(kw):
                        xx = ox * sw - pl + j * dw
                        if xx < 0 or xx >= w:
                            continue
                        cell = dxb[yy, xx]
                        fij = f2[i, j]
                        if m == 1:
                            for k in range(c):
                                cell[k] += gg[k] * fij[k]
                        else:
                            for k in range(cm):
                                cell[k // m] += gg[k] * fij[k]


@njit(cache=True, nogil=True)
def _backprop_filter(x, g, m, sh, sw, dh, dw, pt, pl, df2):  # pragma: no cover - compiled
    """``df2`` [kh, kw, c * m] for the channels of ``x`` [.., c] and ``g`` [.., c * m]."""
    nb, h, w, c = x.shape
    kh, kw, cm = df2.shape
    ho, wo = g.shape[1], g.shape[2]
    df2[:] = 0
    for b in range(nb):
        for oy in range(ho):
            for ox in range(wo):
                gg = g[b, oy, ox]
                for i in range(kh):
                    yy = oy * sh - pt + i * dh
                    if yy < 0 or yy >= h:
                        continue
                    for j in range(kw):
                        xx = ox * sw - pl + j * dw
                        if xx < 0 or xx >= w:
                            continue
                        src = x[b, yy, xx]
                        dij = df2[i, j]
                        if m == 1:
                            for k in range(c):
                                dij[k] += src[k] * gg[k]
                        else:
                            for k in range(cm):
                                dij[k] += src[k // m] * gg[k]


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
