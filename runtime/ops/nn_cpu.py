"""Compiled CPU kernels for ``nn.py``'s ops (NHWC, float32/float64): convolution, max pooling,
and the one-pass elementwise work around them (ReLU, its gradient, bias add and its gradient).

Convolutions are im2col-to-GEMM done in blocks of output rows: each block's patch matrix is
built by a compiled loop into one reused buffer small enough to stay in cache, then multiplied
by the filter with numpy's BLAS. Blocking matters twice on a small machine: the patch matrix of a
whole batch (tens of MB) costs a trip to memory to write and another to read, and BLAS runs
these tall-and-narrow products faster on a block of ~1-2k rows than on 12k. The gradient with
respect to the input multiplies each block of the output gradient by the filter and scatters the
block back into the (padded) input gradient with the compiled inverse loop (col2im). Max pooling
and its gradient are compiled loops over the windows that never build the padded input. The
elementwise kernels read each input once and write one output, where numpy's expressions build
temporaries (``g * (y > 0)`` makes a bool array, then a float product).

Each function takes the geometry ``nn.py`` has already checked: strides (sh, sw), window sizes,
and the SAME/VALID padding before/after each spatial axis. Only float32 and float64 come here
(``supports``); other dtypes use ``nn.py``'s general numpy/cupy kernels.

Numba compiles each loop on its first call with a new dtype and caches the machine code beside
this file (``cache=True``), so later processes load it instead of compiling.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from numba import njit

# Rows of the patch matrix built at once: ~2 MB of float32 for a 5x5x32 filter, which keeps the
# buffer and its GEMM's operands in this machine's cache (1-2 MB of L2 per core, 32 MB of L3).
_BLOCK_ELEMS = 1 << 21

# The transposed patch matrix of a short-window layer is built in smaller blocks: its GEMMs are then
# small enough for OpenBLAS to run them on the calling thread, saving a worker hand-off (~0.1 ms)
# per block: measured 1.6 ms vs 3.3 ms for a 5x5x1x32 layer on 64 28x28 images.
_TBLOCK_ELEMS = 1 << 14

_FAST = (np.dtype(np.float32), np.dtype(np.float64))

# The compiled loops release the GIL (nogil), so a kernel splits its loop over this many threads:
# the calling thread and _THREADS - 1 pool workers. BLAS already uses every core for the GEMMs;
# without this the loops between them (im2col, col2im, pooling, ReLU) leave all cores but one idle.
_THREADS = max(1, min(len(os.sched_getaffinity(0)), 8))

# Fewer elements than this per thread are not worth a hand-off to a pool thread (~50 us).
_GRAIN = 1 << 16

_pool: ThreadPoolExecutor | None = None


def _split(kernel, n: int, work: int, *args: Any) -> None:
    """Runs ``kernel(lo, hi, *args)`` over [0, n) in contiguous parts, one per thread, the first
    on the calling thread. ``work`` is the number of elements the whole loop touches: parts are
    never smaller than ``_GRAIN`` of them. ``kernel`` must be a nogil compiled loop whose parts
    write disjoint memory."""
    parts = max(1, min(_THREADS, n, work // _GRAIN))
    pool = _threads(parts)
    if pool is None:
        kernel(0, n, *args)
        return
    bounds = [n * i // parts for i in range(parts + 1)]
    futures = [pool.submit(kernel, bounds[i], bounds[i + 1], *args) for i in range(1, parts)]
    kernel(bounds[0], bounds[1], *args)
    for f in futures:
        f.result()


def supports(*arrays: Any) -> bool:
    """True when these kernels apply: numpy arrays of one float dtype they are compiled for."""
    dt = arrays[0].dtype
    if dt not in _FAST:
        return False
    for a in arrays:
        if not isinstance(a, np.ndarray) or a.dtype != dt:
            return False
    return True


def _c(a: np.ndarray) -> np.ndarray:
    """``a`` if C-contiguous, else a C-contiguous copy (0-d arrays stay 0-d)."""
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def _block_rows(k: int, rows: int, elems: int | None = None) -> int:
    return max(1, min(rows, (elems or _BLOCK_ELEMS) // max(k, 1)))


def _padded3(x: np.ndarray, ph: tuple, pw: tuple) -> np.ndarray:
    """NHWC ``x`` zero-padded by (before, after) rows ``ph`` and columns ``pw``, contiguous and
    seen as (N, Hp, Wp * C)."""
    n, h, w, c = x.shape
    if ph[0] or ph[1] or pw[0] or pw[1]:
        xp = np.zeros((n, h + ph[0] + ph[1], w + pw[0] + pw[1], c), dtype=x.dtype)
        xp[:, ph[0] : ph[0] + h, pw[0] : pw[0] + w] = x
    else:
        xp = np.ascontiguousarray(x)
    return xp.reshape(n, xp.shape[1], xp.shape[2] * c)


# ---- compiled loops ------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _im2col(lo, hi, unit, x3, c, r0, kh, kw, sh, sw, ho, wo, cols):  # pragma: no cover - compiled
    """Rows r0 + lo * unit .. r0 + hi * unit of the patch matrix (at most ``len(cols)`` in all)
    into the same rows of ``cols`` counted from r0, columns in (kh, kw, C) order.

    ``x3`` is the padded NHWC input seen as (N, Hp, Wp * C): the kw cells of a window's row are
    kw * C consecutive numbers there, copied as one run."""
    run = kw * c
    for q in range(lo * unit, min(hi * unit, cols.shape[0])):
        r = r0 + q
        n = r // (ho * wo)
        rem = r - n * ho * wo
        y0 = (rem // wo) * sh
        x0 = (rem % wo) * sw * c
        dst = cols[q]
        for i in range(kh):
            src = x3[n, y0 + i, x0 : x0 + run]
            out = dst[i * run : (i + 1) * run]
            for t in range(run):
                out[t] = src[t]


@njit(cache=True, nogil=True)
def _im2col_t(lo, hi, x3, c, q0, kh, kw, sh, sw, ho, wo, cols_t):  # pragma: no cover - compiled
    """The transposed patch matrix of output rows q0 + lo .. q0 + hi (q = image * Ho + row) into
    their columns of ``cols_t`` (output row q0 + k at columns k * Wo .. (k + 1) * Wo): for a short
    window row (kw * C below Wo) its runs, one output row long, are longer than the patch
    matrix's."""
    step = sw * c
    for k in range(lo, hi):
        q = q0 + k
        n = q // ho
        y0 = (q - n * ho) * sh
        base = k * wo
        for i in range(kh):
            src = x3[n, y0 + i]
            for t in range(kw * c):  # t = j * C + ch, the column within window row i
                dst = cols_t[i * kw * c + t, base : base + wo]
                for ox in range(wo):  # (a strided slice copy here is 3x slower)
                    dst[ox] = src[t + ox * step]


@njit(cache=True, nogil=True)
def _col2im(lo, hi, unit, dcols, c, r0, kh, kw, sh, sw, ho, wo, dx3):  # pragma: no cover
    """Adds rows r0 + lo * unit .. r0 + hi * unit (at most ``len(dcols)``) of a patch-matrix
    gradient, held in ``dcols`` from row r0, into the padded input gradient, seen as
    (N, Hp, Wp * C) like ``_im2col``'s input. Parts that run at once must cover different images:
    the windows of one image overlap."""
    run = kw * c
    for q in range(lo * unit, min(hi * unit, dcols.shape[0])):
        r = r0 + q
        n = r // (ho * wo)
        rem = r - n * ho * wo
        y0 = (rem // wo) * sh
        x0 = (rem % wo) * sw * c
        src = dcols[q]
        for i in range(kh):
            dst = dx3[n, y0 + i, x0 : x0 + run]
            part = src[i * run : (i + 1) * run]
            for t in range(run):
                dst[t] += part[t]


@njit(cache=True, nogil=True)
def _max_pool(b0, b1, x, kh, kw, sh, sw, pt, pl, y):  # pragma: no cover - compiled
    """Window maxima of images b0..b1 of ``x`` into ``y``; cells outside ``x`` (padding) never
    take part, NaN wins."""
    _, h, w, c = x.shape
    ho, wo = y.shape[1], y.shape[2]
    for b in range(b0, b1):
        for oy in range(ho):
            ya, yb = max(oy * sh - pt, 0), min(oy * sh - pt + kh, h)
            for ox in range(wo):
                xa, xb = max(ox * sw - pl, 0), min(ox * sw - pl + kw, w)
                out = y[b, oy, ox]
                out[:] = x[b, ya, xa]
                for yy in range(ya, yb):
                    for xx in range(xa, xb):
                        src = x[b, yy, xx]
                        for ch in range(c):
                            v, m = src[ch], out[ch]
                            out[ch] = v if (v > m or v != v) else m


@njit(cache=True, nogil=True)
def _max_pool_grad(b0, b1, x, y, g, kh, kw, sh, sw, pt, pl, dx):  # pragma: no cover - compiled
    """Adds each window's gradient to the first cell (row-major) of ``x`` equal to its maximum,
    for images b0..b1 (``dx`` zeroed there by the caller)."""
    _, h, w, c = x.shape
    ho, wo = y.shape[1], y.shape[2]
    open_ = np.empty(c, dtype=np.uint8)  # 1: channels whose maximum this window has not met yet
    for b in range(b0, b1):
        dx[b] = 0
        for oy in range(ho):
            ya, yb = max(oy * sh - pt, 0), min(oy * sh - pt + kh, h)
            for ox in range(wo):
                xa, xb = max(ox * sw - pl, 0), min(ox * sw - pl + kw, w)
                m = y[b, oy, ox]
                gr = g[b, oy, ox]
                open_[:] = 1
                for yy in range(ya, yb):
                    for xx in range(xa, xb):
                        src = x[b, yy, xx]
                        dst = dx[b, yy, xx]
                        for ch in range(c):
                            hit = open_[ch] & np.uint8(src[ch] == m[ch])
                            dst[ch] += gr[ch] if hit else 0
                            open_[ch] ^= hit


@njit(cache=True, nogil=True)
def _max_pool_tiles(b0, b1, x3, c, kh, kw, y3):  # pragma: no cover - compiled
    """``_max_pool`` for windows that neither overlap nor reach padding (stride = window), on
    (N, H, W * C) and (N, Ho, Wo * C) views: no bounds to clip, each input cell read once, and
    every channel loop on a slice (so it vectorizes)."""
    wo = y3.shape[2] // c
    for b in range(b0, b1):
        for oy in range(y3.shape[1]):
            dst = y3[b, oy]
            src = x3[b, oy * kh]
            for ox in range(wo):  # each window's first cell
                dst[ox * c : (ox + 1) * c] = src[ox * kw * c : (ox * kw + 1) * c]
            for i in range(kh):
                src = x3[b, oy * kh + i]
                for ox in range(wo):
                    out = dst[ox * c : (ox + 1) * c]
                    for j in range(kw):
                        cell = src[(ox * kw + j) * c : (ox * kw + j + 1) * c]
                        for ch in range(c):
                            v, m = cell[ch], out[ch]
                            out[ch] = v if (v > m) | (v != v) else m  # NaN wins


@njit(cache=True, nogil=True)
def _max_pool_grad_tiles(b0, b1, x3, y3, g3, c, kh, kw, dx3):  # pragma: no cover - compiled
    """``_max_pool_grad`` for windows that neither overlap nor reach padding, on the views of
    ``_max_pool_tiles``: each covered cell of ``dx`` is written once (its window's gradient where
    it is the window's first maximum, else 0), so ``dx`` needs no zeroing beforehand."""
    wo = y3.shape[2] // c
    open_ = np.empty(c, dtype=np.bool_)  # channels whose maximum this window has not met yet
    for b in range(b0, b1):
        for oy in range(y3.shape[1]):
            for ox in range(wo):
                m = y3[b, oy, ox * c : (ox + 1) * c]
                gr = g3[b, oy, ox * c : (ox + 1) * c]
                open_[:] = True
                for i in range(kh):
                    src = x3[b, oy * kh + i]
                    dst = dx3[b, oy * kh + i]
                    for j in range(kw):
                        cell = src[(ox * kw + j) * c : (ox * kw + j + 1) * c]
                        out = dst[(ox * kw + j) * c : (ox * kw + j + 1) * c]
                        for ch in range(c):
                            hit = open_[ch] and cell[ch] == m[ch]
                            out[ch] = gr[ch] if hit else 0
                            open_[ch] = open_[ch] and not hit


# ---- convolution -----------------------------------------------------------------------------


def _threads(parts: int) -> ThreadPoolExecutor | None:
    """The pool of helper threads, started on first use; None when only one part runs."""
    global _pool
    if parts <= 1:
        return None
    if _pool is None:
        _pool = ThreadPoolExecutor(_THREADS - 1, thread_name_prefix="hetbed-nn-cpu")
    return _pool


def _patch_blocks(x: np.ndarray, kh: int, kw: int, sh: int, sw: int, ho: int, wo: int, ph, pw, use):
    """Calls ``use(part, r0, r1, patches)`` for blocks of rows r0..r1 that cover the
    (N*Ho*Wo, kh*kw*C) patch matrix of NHWC ``x``; ``patches`` is a view of a reused, cache-sized
    buffer (valid until ``use`` returns) and ``part`` < ``_THREADS`` says which one.

    Long window rows: one block after another, each built by all threads, then used on the
    calling thread (``use``'s GEMM runs on all cores in BLAS). Short window rows (kw * C < Wo, a
    first layer on a 1-channel image) build the buffer transposed in small blocks whose GEMMs BLAS
    runs on the calling thread: then each thread builds and uses every ``parts``-th block itself,
    with its own buffer, and ``use`` calls with different ``part`` values run at once."""
    n, _, _, c = x.shape
    k, rows = kh * kw * c, n * ho * wo
    x3 = _padded3(x, ph, pw)
    if kw * c < wo:
        step = max(1, _block_rows(k, rows, _TBLOCK_ELEMS) // wo) * wo  # whole output rows
        starts = range(0, rows, step)
        parts = max(1, min(_THREADS, len(starts), rows * k // _GRAIN))

        def run(part: int) -> None:
            cols_t = np.empty((k, step), dtype=x.dtype)
            for r0 in starts[part::parts]:
                r1 = min(r0 + step, rows)
                q0, q1 = r0 // wo, r1 // wo
                _im2col_t(0, q1 - q0, x3, c, q0, kh, kw, sh, sw, ho, wo, cols_t)
                use(part, r0, r1, cols_t[:, : r1 - r0].T)

        pool = _threads(parts)
        futures = [pool.submit(run, p) for p in range(1, parts)] if pool else []
        run(0)
        for f in futures:
            f.result()
        return
    step = _block_rows(k, rows)
    cols = np.empty((step, k), dtype=x.dtype)
    for r0 in range(0, rows, step):
        r1 = min(r0 + step, rows)
        block = cols[: r1 - r0]
        _split(_im2col, r1 - r0, (r1 - r0) * k, 1, x3, c, r0, kh, kw, sh, sw, ho, wo, block)
        use(0, r0, r1, block)


def conv2d(x: np.ndarray, f: np.ndarray, sh: int, sw: int, ho: int, wo: int, ph, pw) -> np.ndarray:
    """Cross-correlation of NHWC ``x`` with (kh, kw, C, Co) ``f``: the (N, Ho, Wo, Co) output."""
    n, _, _, c = x.shape
    kh, kw, _, co = f.shape
    k, rows = kh * kw * c, n * ho * wo
    f2 = np.ascontiguousarray(f).reshape(k, co)
    out = np.empty((rows, co), dtype=x.dtype)
    if kh == kw == sh == sw == 1:
        np.matmul(x.reshape(rows, c), f2, out=out)
        return out.reshape(n, ho, wo, co)

    def use(part: int, r0: int, r1: int, patches: np.ndarray) -> None:
        np.matmul(patches, f2, out=out[r0:r1])

    _patch_blocks(x, kh, kw, sh, sw, ho, wo, ph, pw, use)
    return out.reshape(n, ho, wo, co)


def conv2d_backprop_filter(
    x: np.ndarray, dy: np.ndarray, kh: int, kw: int, sh: int, sw: int, ph, pw
) -> np.ndarray:
    """The gradient of conv2d with respect to its (kh, kw, C, Co) filter: the blocks' products
    summed per thread, then the threads' sums."""
    n, _, _, c = x.shape
    _, ho, wo, co = dy.shape
    k, rows = kh * kw * c, n * ho * wo
    dy2 = np.ascontiguousarray(dy).reshape(rows, co)
    if kh == kw == sh == sw == 1:
        return (x.reshape(rows, c).T @ dy2).reshape(kh, kw, c, co)
    sums = np.zeros((_THREADS, k, co), dtype=x.dtype)
    prods = np.empty((_THREADS, k, co), dtype=x.dtype)

    def use(part: int, r0: int, r1: int, patches: np.ndarray) -> None:
        np.matmul(patches.T, dy2[r0:r1], out=prods[part])
        sums[part] += prods[part]

    _patch_blocks(x, kh, kw, sh, sw, ho, wo, ph, pw, use)
    return sums.sum(axis=0).reshape(kh, kw, c, co)


def conv2d_backprop_input(
    x_shape: tuple, f: np.ndarray, dy: np.ndarray, sh: int, sw: int, ph, pw
) -> np.ndarray:
    """The gradient of conv2d with respect to its NHWC input of shape ``x_shape``."""
    n, h, w, c = x_shape
    kh, kw, _, co = f.shape
    _, ho, wo, _ = dy.shape
    k, rows = kh * kw * c, n * ho * wo
    f2t = np.ascontiguousarray(f).reshape(k, co).T
    dy2 = np.ascontiguousarray(dy).reshape(rows, co)
    if kh == kw == sh == sw == 1:
        return (dy2 @ f2t).reshape(n, h, w, c)
    dxp = np.zeros((n, h + ph[0] + ph[1], w + pw[0] + pw[1], c), dtype=dy.dtype)
    step = _block_rows(k, rows)
    unit = ho * wo  # blocks of whole images, so that threads can scatter different images
    if unit <= step:
        step -= step % unit
    else:
        unit = step
    dcols = np.empty((step, k), dtype=dy.dtype)
    dx3 = dxp.reshape(n, dxp.shape[1], dxp.shape[2] * c)
    for r0 in range(0, rows, step):
        r1 = min(r0 + step, rows)
        part = dcols[: r1 - r0]
        np.matmul(dy2[r0:r1], f2t, out=part)
        args = (unit, part, c, r0, kh, kw, sh, sw, ho, wo, dx3)
        _split(_col2im, -(-(r1 - r0) // unit), (r1 - r0) * k, *args)
    if dxp.shape[1:3] == (h, w):
        return dxp
    return np.ascontiguousarray(dxp[:, ph[0] : ph[0] + h, pw[0] : pw[0] + w])


# ---- max pooling -----------------------------------------------------------------------------


def _tiled(x: np.ndarray, kh: int, kw: int, sh: int, sw: int, ho: int, wo: int, ph, pw) -> bool:
    """Whether the windows neither overlap nor reach padding (the common 2x2, stride 2 case)."""
    _, h, w, _ = x.shape
    return kh == sh and kw == sw and ph[0] == pw[0] == 0 and ho * kh <= h and wo * kw <= w


def max_pool(x: np.ndarray, kh: int, kw: int, sh: int, sw: int, ho: int, wo: int, ph, pw):
    """(N, Ho, Wo, C) maxima over (kh, kw) windows; padding cells never win."""
    x = np.ascontiguousarray(x)
    n = x.shape[0]
    y = np.empty((n, ho, wo, x.shape[3]), dtype=x.dtype)
    if _tiled(x, kh, kw, sh, sw, ho, wo, ph, pw):
        c = x.shape[3]
        x3, y3 = x.reshape(n, x.shape[1], -1), y.reshape(n, ho, -1)
        _split(_max_pool_tiles, n, x.size, x3, c, kh, kw, y3)
    else:
        _split(_max_pool, n, x[0].size * n, x, kh, kw, sh, sw, ph[0], pw[0], y)
    return y


def max_pool_grad(x, y, g, kh: int, kw: int, sh: int, sw: int, ph, pw) -> np.ndarray:
    """MaxPool's input gradient: each window's ``g`` goes to its first maximal cell."""
    x, y, g = (np.ascontiguousarray(a) for a in (x, y, g))
    n, h, w, _ = x.shape
    ho, wo = y.shape[1], y.shape[2]
    if _tiled(x, kh, kw, sh, sw, ho, wo, ph, pw):
        dx = np.empty_like(x)
        dx[:, ho * kh :] = 0  # rows and columns no window covers (VALID with a remainder)
        dx[:, :, wo * kw :] = 0
        c = x.shape[3]
        x3, dx3 = x.reshape(n, h, w * c), dx.reshape(n, h, w * c)
        y3, g3 = y.reshape(n, ho, wo * c), g.reshape(n, ho, wo * c)
        _split(_max_pool_grad_tiles, n, x.size, x3, y3, g3, c, kh, kw, dx3)
    else:
        dx = np.empty_like(x)
        _split(_max_pool_grad, n, x.size, x, y, g, kh, kw, sh, sw, ph[0], pw[0], dx)
    return dx


# ---- elementwise: ReLU, its gradient, bias add and its gradient -------------------------------


@njit(cache=True, nogil=True)
def _relu(i0, i1, x, out):  # pragma: no cover - compiled
    # Each part is sliced first: a loop from 0 lets LLVM vectorize (a start index that might be
    # negative keeps numba's wraparound check in the loop, ~9x slower).
    x, out = x[i0:i1], out[i0:i1]
    for i in range(x.size):
        v = x[i]
        out[i] = v if (v > 0 or v != v) else 0  # NaN stays NaN, as in np.maximum


@njit(cache=True, nogil=True)
def _relu_grad(i0, i1, g, y, out):  # pragma: no cover - compiled
    g, y, out = g[i0:i1], y[i0:i1], out[i0:i1]
    for i in range(g.size):
        out[i] = g[i] * (1 if y[i] > 0 else 0)  # g * (y > 0): a NaN gradient stays NaN


@njit(cache=True, nogil=True)
def _bias_add(r0, r1, v, b, out):  # pragma: no cover - compiled
    c = b.size
    v, out = v[r0:r1], out[r0:r1]
    for r in range(v.shape[0]):
        src, dst = v[r], out[r]
        for k in range(c):
            dst[k] = src[k] + b[k]


@njit(cache=True, nogil=True)
def _bias_add_grad(p0, p1, g, out):  # pragma: no cover - compiled
    """Row p of ``out`` (parts, C): the column sums of part p of ``g``'s rows, row after row."""
    parts = out.shape[0]
    rows = g.shape[0]
    for p in range(p0, p1):
        acc = out[p]
        acc[:] = 0
        for r in range(rows * p // parts, rows * (p + 1) // parts):
            src = g[r]
            for k in range(acc.size):
                acc[k] += src[k]


def relu(x: np.ndarray) -> np.ndarray:
    x = _c(x)
    out = np.empty_like(x)
    _split(_relu, x.size, x.size, x.reshape(-1), out.reshape(-1))
    return out


def relu_grad(g: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``g`` where ``y > 0``, else 0 (``g * (y > 0)``: a NaN or inf in ``g`` gives NaN there)."""
    g, y = _c(g), _c(y)
    out = np.empty_like(g)
    _split(_relu_grad, g.size, 2 * g.size, g.reshape(-1), y.reshape(-1), out.reshape(-1))
    return out


def bias_add(v: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``v + b`` with ``b`` (C,) added along the last axis of ``v``."""
    v, b = _c(v), _c(b)
    out = np.empty_like(v)
    v2 = v.reshape(-1, b.size)
    _split(_bias_add, v2.shape[0], v.size, v2, b, out.reshape(-1, b.size))
    return out


def bias_add_grad(g: np.ndarray) -> np.ndarray:
    """Sums of ``g`` over all axes but the last: per-thread partial column sums, then their sum
    (the rows in order within each part)."""
    g = _c(g)
    g2 = g.reshape(-1, g.shape[-1])
    parts = max(1, min(_THREADS, g2.shape[0], g.size // _GRAIN))
    out = np.empty((parts, g.shape[-1]), dtype=g.dtype)
    _split(_bias_add_grad, parts, g.size, g2, out)
    return out[0] if parts == 1 else out.sum(axis=0)


# ---- batch normalization (channels last) ------------------------------------------------------


@njit(cache=True, nogil=True)
def _channel_moments(x, mean, var):  # pragma: no cover - compiled
    """Per-channel mean and population variance of (rows, C) ``x``, in float64: two passes (the
    sum, then the sum of squares about the mean), so no cancellation."""
    rows, c = x.shape
    acc = np.zeros(c, np.float64)
    for r in range(rows):
        src = x[r]
        for k in range(c):
            acc[k] += src[k]
    for k in range(c):
        mean[k] = acc[k] / max(rows, 1)
        acc[k] = 0.0
    for r in range(rows):
        src = x[r]
        for k in range(c):
            d = src[k] - mean[k]
            acc[k] += d * d
    for k in range(c):
        var[k] = acc[k] / max(rows, 1)


@njit(cache=True, nogil=True)
def _center_scale(x, mean, a, b, out):  # pragma: no cover - compiled
    """out = (x - mean) * a + b, per channel (the batch-norm output)."""
    for r in range(x.shape[0]):
        src, dst = x[r], out[r]
        for k in range(x.shape[1]):
            dst[k] = (src[k] - mean[k]) * a[k] + b[k]


@njit(cache=True, nogil=True)
def _bn_grad_sums(dy, x, mean, sum_dy, sum_dy_xc):  # pragma: no cover - compiled
    """Per-channel sums of dy and of dy * (x - mean), in float64."""
    sum_dy[:] = 0.0
    sum_dy_xc[:] = 0.0
    for r in range(x.shape[0]):
        d, src = dy[r], x[r]
        for k in range(x.shape[1]):
            sum_dy[k] += d[k]
            sum_dy_xc[k] += d[k] * (src[k] - mean[k])


@njit(cache=True, nogil=True)
def _bn_grad_dx(dy, x, mean, a, b, cc, out):  # pragma: no cover - compiled
    """out = dy * a - b + (x - mean) * cc, per channel."""
    for r in range(x.shape[0]):
        d, src, dst = dy[r], x[r], out[r]
        for k in range(x.shape[1]):
            dst[k] = d[k] * a[k] - b[k] + (src[k] - mean[k]) * cc[k]


def fused_batch_norm(x, scale, offset, mean, var, eps: float, training: bool):
    """(y, batch mean, Bessel-corrected batch variance) in training, (y, mean, var) in inference:
    FusedBatchNorm over all axes but the last. ``mean``/``var`` are used only in inference."""
    c = x.shape[-1]
    x2 = _c(x).reshape(-1, c)
    m = x2.shape[0]
    if training:
        mean64, var64 = np.empty(c), np.empty(c)
        _channel_moments(x2, mean64, var64)
        var_out = var64 * (m / (m - 1)) if m > 1 else var64
    else:
        mean64, var64 = mean.astype(np.float64), var.astype(np.float64)
        var_out = var
    a = scale / np.sqrt(var64 + eps)
    out = np.empty_like(x2)
    dt = x.dtype
    _center_scale(x2, mean64.astype(dt), a.astype(dt), offset.astype(dt), out)
    sdt = scale.dtype
    return out.reshape(x.shape), mean64.astype(sdt), np.asarray(var_out).astype(sdt)


def fused_batch_norm_grad(dy, x, scale, mean, var, g_mean, g_var, eps: float, training: bool):
    """FusedBatchNormGrad: (dx, d_scale, d_offset), plus (d_mean, d_var) in inference. ``mean``
    and ``var`` are what the forward pass used (in training its Bessel-corrected output)."""
    c = x.shape[-1]
    x2, dy2 = _c(x).reshape(-1, c), _c(dy).reshape(-1, c)
    m = x2.shape[0]
    var64 = var.astype(np.float64)
    if training and m > 1:
        var64 = var64 * ((m - 1) / m)  # back to the population variance used for y
    inv = 1.0 / np.sqrt(var64 + eps)
    mean_x = mean.astype(x.dtype)
    sum_dy, sum_dy_xc = np.empty(c), np.empty(c)
    _bn_grad_sums(dy2, x2, mean_x, sum_dy, sum_dy_xc)
    d_offset = sum_dy
    d_scale = sum_dy_xc * inv
    a = scale * inv
    if training:
        b = a * d_offset / m - g_mean / m
        cc = 2.0 * g_var / max(m - 1, 1) - a * inv * d_scale / m
    else:
        b = cc = np.zeros(c)
    dt, sdt = x.dtype, scale.dtype
    dx = np.empty_like(x2)
    _bn_grad_dx(dy2, x2, mean_x, a.astype(dt), b.astype(dt), cc.astype(dt), dx)
    outs = [dx.reshape(x.shape), d_scale.astype(sdt), d_offset.astype(sdt)]
    if not training:
        outs += [
            (-a * d_offset + g_mean).astype(sdt),
            (-0.5 * a * inv * d_scale + g_var).astype(sdt),
        ]
    return tuple(outs)
