"""Compiled CPU kernels for depthwise convolution (depthwise.py), float32/float64 NHWC: one pass
over the output, each cell's window read straight from the input (no padded copy, no patch
matrix, no temporaries). Unit-stride columns with one filter per channel (the common case) run
each tap as one long vectorized loop over an output row; the rest loop over columns with the
channels innermost. The forward and input-gradient kernels split the batch over the intra-op
threads. The filter gradient splits the batch too where rows are long (its chunks' partial sums
added in batch order, so a given thread count always gives the same bits), else the channels
(each thread owns its part of the filter)."""

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


# Unit-stride columns, one filter per channel (MobileNet's every stride-1 layer): each tap is one
# long loop over a whole output row's (column, channel) cells against the input row shifted by
# the tap, with the filter tiled along the row (``ft`` [kh, kw, wo * c]). The loops run over
# slices from 0, so numba knows their indices are not negative and vectorizes them (indexing a
# row at ``t + shift`` kept a wraparound check per element and ran 7x slower).


@njit(cache=True, nogil=True, fastmath=True)
def _forward_rows(x3, ft, c, sh, dh, dw, pt, pl, y3):  # pragma: no cover - compiled
    nb, h, wc = x3.shape
    kh, kw, woc = ft.shape
    ho = y3.shape[1]
    w, wo = wc // c, woc // c
    for b in range(nb):
        for oy in range(ho):
            row = y3[b, oy]
            for t in range(woc):
                row[t] = 0.0
            for i in range(kh):
                yy = oy * sh - pt + i * dh
                if yy < 0 or yy >= h:
                    continue
                src = x3[b, yy]
                for j in range(kw):
                    off = j * dw - pl
                    lo, hi = max(0, -off), min(wo, w - off)
                    if hi <= lo:
                        continue
                    r = row[lo * c : hi * c]
                    sr = src[(lo + off) * c : (hi + off) * c]
                    fr = ft[i, j, lo * c : hi * c]
                    for t in range(r.shape[0]):
                        r[t] += sr[t] * fr[t]


@njit(cache=True, nogil=True, fastmath=True)
def _backprop_input_rows(g3, ft, c, sh, dh, dw, pt, pl, dx3):  # pragma: no cover - compiled
    nb, h, wc = dx3.shape
    kh, kw, woc = ft.shape
    ho = g3.shape[1]
    w, wo = wc // c, woc // c
    for b in range(nb):
        for yy in range(h):
            d = dx3[b, yy]
            for t in range(wc):
                d[t] = 0.0
        for oy in range(ho):
            grow = g3[b, oy]
            for i in range(kh):
                yy = oy * sh - pt + i * dh
                if yy < 0 or yy >= h:
                    continue
                dst = dx3[b, yy]
                for j in range(kw):
                    off = j * dw - pl
                    lo, hi = max(0, -off), min(wo, w - off)
                    if hi <= lo:
                        continue
                    dr = dst[(lo + off) * c : (hi + off) * c]
                    gr = grow[lo * c : hi * c]
                    fr = ft[i, j, lo * c : hi * c]
                    for t in range(dr.shape[0]):
                        dr[t] += gr[t] * fr[t]


@njit(cache=True, nogil=True, fastmath=True)
def _backprop_filter_rows(x3, g3, c, sh, dh, dw, pt, pl, acc):  # pragma: no cover - compiled
    """``acc`` [kh, kw, wo * c]: each tap's products summed over rows; its columns sum to the
    filter gradient (done by the caller)."""
    nb, h, wc = x3.shape
    kh, kw, woc = acc.shape
    ho = g3.shape[1]
    w, wo = wc // c, woc // c
    acc[:] = 0.0
    for b in range(nb):
        for oy in range(ho):
            grow = g3[b, oy]
            for i in range(kh):
                yy = oy * sh - pt + i * dh
                if yy < 0 or yy >= h:
                    continue
                src = x3[b, yy]
                for j in range(kw):
                    off = j * dw - pl
                    lo, hi = max(0, -off), min(wo, w - off)
                    if hi <= lo:
                        continue
                    a = acc[i, j, lo * c : hi * c]
                    sr = src[(lo + off) * c : (hi + off) * c]
                    gr = grow[lo * c : hi * c]
                    for t in range(a.shape[0]):
                        a[t] += sr[t] * gr[t]


def _tiled(f, wo: int):
    kh, kw, c, _ = f.shape
    return np.ascontiguousarray(np.tile(f.reshape(kh, kw, c), (1, 1, wo)))


def forward(x, f, sh, sw, dh, dw, ho, wo, pt, pl):
    x = np.ascontiguousarray(x)
    kh, kw, c, m = f.shape
    n = x.shape[0]
    y = np.empty((n, ho, wo, c * m), x.dtype)
    per = ho * wo * c * m * kh * kw
    if sw == 1 and m == 1:
        x3, y3, ft = x.reshape(n, x.shape[1], -1), y.reshape(n, ho, -1), _tiled(f, wo)
        intraop.chunks(
            n, per, lambda i, j: _forward_rows(x3[i:j], ft, c, sh, dh, dw, pt, pl, y3[i:j])
        )
        return y
    f2 = np.ascontiguousarray(f).reshape(kh, kw, c * m)
    intraop.chunks(n, per, lambda i, j: _forward(x[i:j], f2, m, sh, sw, dh, dw, pt, pl, y[i:j]))
    return y


def backprop_input(shape, f, g, sh, sw, dh, dw, pt, pl):
    g = np.ascontiguousarray(g)
    kh, kw, c, m = f.shape
    dx = np.empty(shape, g.dtype)
    per = g[0].size * kh * kw
    if sw == 1 and m == 1:
        n, h, w, _ = shape
        ho, wo = g.shape[1], g.shape[2]
        g3, dx3, ft = g.reshape(n, ho, -1), dx.reshape(n, h, -1), _tiled(f, wo)
        intraop.chunks(
            n,
            per,
            lambda i, j: _backprop_input_rows(g3[i:j], ft, c, sh, dh, dw, pt, pl, dx3[i:j]),
        )
        return dx
    f2 = np.ascontiguousarray(f).reshape(kh, kw, c * m)
    intraop.chunks(
        shape[0],
        per,
        lambda i, j: _backprop_input(g[i:j], f2, m, sh, sw, dh, dw, pt, pl, dx[i:j]),
    )
    return dx


def backprop_filter(x, g, fshape, sh, sw, dh, dw, pt, pl):
    x, g = np.ascontiguousarray(x), np.ascontiguousarray(g)
    kh, kw, c, m = fshape
    if sw == 1 and m == 1:
        n, ho, wo = g.shape[:3]
        x3, g3 = x.reshape(n, x.shape[1], -1), g.reshape(n, ho, -1)
        parts: list = []

        def rows(i: int, j: int) -> None:
            acc = np.empty((kh, kw, wo * c), x.dtype)
            _backprop_filter_rows(x3[i:j], g3[i:j], c, sh, dh, dw, pt, pl, acc)
            parts.append((i, acc.reshape(kh, kw, wo, c).sum(axis=2)))

        intraop.chunks(n, g[0].size * kh * kw, rows)
        # the chunks' sums added in batch order: the same split (thread count) gives the same bits
        total = sum(p for _, p in sorted(parts, key=lambda ip: ip[0]))
        return total.reshape(kh, kw, c, 1).astype(x.dtype, copy=False)
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
