"""Compiled CPU kernels for ``nn.py``'s ops (NHWC, float32/float64): convolution, max pooling,
and the one-pass elementwise work around them (ReLU, its gradient, bias add and its gradient).

Convolutions are im2col-to-GEMM done in blocks of output rows: each block's patch matrix is
built by a compiled loop into one reused buffer small enough to stay in cache, then multiplied
by the filter with numpy's BLAS. Blocking matters twice on a small machine: the patch matrix of a
whole batch (tens of MB) costs a trip to memory to write and another to read, and BLAS runs
these tall-and-narrow products faster on a block of ~1-2k rows than on 12k. The gradient with
respect to the input multiplies each block of the output gradient by the filter and scatters the
block back into the (padded) input gradient with the compiled inverse loop (col2im). The blocks
run on the intra-op threads (``intraop.py``), each block's patch matrix and GEMM on one thread
(BLAS on one thread meanwhile), each thread taking the next block. Max pooling
and its gradient are compiled loops over the windows that never build the padded input; windows
that tile the input (stride = window, the common 2x2/2) take loops without bounds that run over
a row of windows at a time, so their channel loops vectorize, and whose gradient writes each cell
once instead of zeroing the whole gradient and adding into it. The
elementwise kernels read each input once and write one output, where numpy's expressions build
temporaries (``g * (y > 0)`` makes a bool array, then a float product).

Each function takes the geometry ``nn.py`` has already checked: strides (sh, sw), window sizes,
and the SAME/VALID padding before/after each spatial axis. Only float32 and float64 come here
(``supports``); other dtypes use ``nn.py``'s general numpy/cupy kernels.

Numba compiles each loop on its first call with a new dtype and caches the machine code beside
this file (``cache=True``), so later processes load it instead of compiling.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from . import intraop
from .intraop import run_blocks as _run_blocks
from .intraop import threads_for as _threads

# Elements of the patch matrix built at once: 2M (8 MB of float32, 2,621 rows of a 5x5x32 filter),
# which keeps the buffer and its GEMM's operands in this machine's L3 (32 MB). Measured on the
# CNN step's 5x5x32x64 layer: blocks of 1.3k-2.6k rows are best (6.2 ms), 0.6k rows 4% slower,
# 5.2k rows 10-20% slower.
_BLOCK_ELEMS = 1 << 21

# The transposed patch matrix of a short-window layer is built in smaller blocks (~2.6k rows of a
# 5x5x1 filter). Measured on 64 28x28 images, 5x5x1x32, right after another GEMM as in a training
# step (OpenBLAS's worker threads still spinning, so a threaded GEMM costs no wake-up): forward
# 0.72 ms vs 1.14 ms with 4x smaller blocks that OpenBLAS runs on the calling thread only, filter
# gradient 0.95 ms vs 1.51 ms; no better with larger blocks.
_TBLOCK_ELEMS = 1 << 16

_FAST = (np.dtype(np.float32), np.dtype(np.float64))


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


@njit(cache=True, nogil=True, inline="always")
def _position(r, ho, wo):  # pragma: no cover - compiled
    """(image, output row, output column) of patch-matrix row ``r``."""
    n = r // (ho * wo)
    rem = r - n * ho * wo
    oy = rem // wo
    return n, oy, rem - oy * wo


@njit(cache=True, nogil=True, inline="always")
def _next_position(n, oy, ox, ho, wo):  # pragma: no cover - compiled
    """The position of the patch-matrix row after (n, oy, ox)."""
    ox += 1
    if ox == wo:
        ox = 0
        oy += 1
        if oy == ho:
            oy = 0
            n += 1
    return n, oy, ox


@njit(cache=True, nogil=True)
def _im2col(x3, c, r0, r1, kh, kw, sh, sw, ho, wo, cols):  # pragma: no cover - compiled
    """Rows r0..r1 of the patch matrix into ``cols[: r1 - r0]``, columns in (kh, kw, C) order.

    ``x3`` is the padded NHWC input seen as (N, Hp, Wp * C): the kw cells of a window's row are
    kw * C consecutive numbers there, copied as one run. The row's (image, output row, output
    column) is counted along, not divided out per row (three integer divisions cost as much as
    copying a short run: 35% faster for a 3x3x3 filter, 8% for 5x5x32)."""
    run = kw * c
    n, oy, ox = _position(r0, ho, wo)
    for r in range(r0, r1):
        y0, x0 = oy * sh, ox * sw * c
        dst = cols[r - r0]
        for i in range(kh):
            src = x3[n, y0 + i, x0 : x0 + run]
            out = dst[i * run : (i + 1) * run]
            for t in range(run):
                out[t] = src[t]
        n, oy, ox = _next_position(n, oy, ox, ho, wo)


@njit(cache=True, nogil=True)
def _im2col_t(x3, c, q0, q1, kh, kw, sh, sw, ho, wo, cols_t):  # pragma: no cover - compiled
    """The transposed patch matrix of output rows q0..q1 (q = image * Ho + row) into
    ``cols_t[:, : (q1 - q0) * wo]``: for a short window row (kw * C below Wo) its runs, one output
    row long, are longer than the patch matrix's."""
    step = sw * c
    for q in range(q0, q1):
        n = q // ho
        y0 = (q - n * ho) * sh
        base = (q - q0) * wo
        for i in range(kh):
            src = x3[n, y0 + i]
            for t in range(kw * c):  # t = j * C + ch, the column within window row i
                dst = cols_t[i * kw * c + t, base : base + wo]
                if step == 1:  # one channel, stride 1: a contiguous run (vectorized: 2x faster)
                    run = src[t : t + wo]
                    for ox in range(wo):
                        dst[ox] = run[ox]
                else:
                    for ox in range(wo):
                        dst[ox] = src[t + ox * step]


@njit(cache=True, nogil=True)
def _col2im(dcols, c, r0, r1, kh, kw, sh, sw, ho, wo, dx3):  # pragma: no cover - compiled
    """Adds rows r0..r1 of a patch-matrix gradient into the padded input gradient, seen as
    (N, Hp, Wp * C) like ``_im2col``'s input."""
    run = kw * c
    n, oy, ox = _position(r0, ho, wo)
    for r in range(r0, r1):
        y0, x0 = oy * sh, ox * sw * c
        src = dcols[r - r0]
        for i in range(kh):
            dst = dx3[n, y0 + i, x0 : x0 + run]
            part = src[i * run : (i + 1) * run]
            for t in range(run):
                dst[t] += part[t]
        n, oy, ox = _next_position(n, oy, ox, ho, wo)


@njit(cache=True, nogil=True)
def _max_pool(x, kh, kw, sh, sw, pt, pl, y):  # pragma: no cover - compiled
    """Window maxima of ``x`` into ``y``; cells outside ``x`` (padding) never take part, NaN wins."""
    nb, h, w, c = x.shape
    ho, wo = y.shape[1], y.shape[2]
    for b in range(nb):
        for oy in range(ho):
            ya, yb = max(oy * sh - pt, 0), min(oy * sh - pt + kh, h)
            for ox in range(wo):
                xa, xb = max(ox * sw - pl, 0), min(ox * sw - pl + kw, w)
                out, first = y[b, oy, ox], x[b, ya, xa]
                for ch in range(c):  # (a loop: a slice assignment checks overlap, and allocates)
                    out[ch] = first[ch]
                for yy in range(ya, yb):
                    for xx in range(xa, xb):
                        src = x[b, yy, xx]
                        for ch in range(c):
                            v = src[ch]
                            if v > out[ch] or v != v:
                                out[ch] = v


@njit(cache=True, nogil=True)
def _max_pool_grad(x, y, g, kh, kw, sh, sw, pt, pl, dx):  # pragma: no cover - compiled
    """Each window's gradient to the first cell (row-major) of ``x`` equal to its maximum."""
    nb, h, w, c = x.shape
    ho, wo = y.shape[1], y.shape[2]
    open_ = np.empty(c, dtype=np.uint8)  # 1: channels whose maximum this window has not met yet
    for b in range(nb):
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
def _max_pool_tiles(x3, c, kh, kw, y3):  # pragma: no cover - compiled
    """``_max_pool`` for windows that neither overlap nor reach padding (stride = window), on
    (N, H, W * C) and (N, Ho, Wo * C) views: no bounds to clip, each input cell read once. One
    output row at a time, window cell (i, j) of all its windows in turn, each channel loop on a
    slice and branch-free (so it vectorizes: 3x faster than window after window)."""
    wo = y3.shape[2] // c
    for b in range(x3.shape[0]):
        for oy in range(y3.shape[1]):
            dst = y3[b, oy]
            for i in range(kh):
                src = x3[b, oy * kh + i]
                for j in range(kw):
                    for ox in range(wo):
                        at = (ox * kw + j) * c
                        cell, out = src[at : at + c], dst[ox * c : (ox + 1) * c]
                        if i == 0 and j == 0:  # (a loop: a slice assignment checks overlap)
                            for ch in range(c):
                                out[ch] = cell[ch]
                        else:
                            for ch in range(c):
                                v, m = cell[ch], out[ch]
                                out[ch] = v if (v > m) | (v != v) else m  # NaN wins


@njit(cache=True, nogil=True)
def _max_pool_grad_tiles(x3, y3, g3, c, kh, kw, dx3, relu):  # pragma: no cover - compiled
    """``_max_pool_grad`` for windows that neither overlap nor reach padding, on the views of
    ``_max_pool_tiles``: each covered cell of ``dx`` is written once (its window's gradient where
    it is the window's first maximum, else 0), so ``dx`` needs no zeroing beforehand. One output
    row at a time, window cell (i, j) of all its windows in turn, branch-free per channel.
    ``relu``: the pooled input is a ReLU's output and the ReLU's gradient follows (a fused
    ReluGrad): each cell's value times (x > 0), the arithmetic of ReluGrad on ``dx``."""
    wo = y3.shape[2] // c
    taken = np.empty(wo * c, dtype=np.uint8)  # 1: the window's maximum is already routed
    for b in range(x3.shape[0]):
        for oy in range(y3.shape[1]):
            m, gr = y3[b, oy], g3[b, oy]
            taken[:] = 0
            for i in range(kh):
                src, dst = x3[b, oy * kh + i], dx3[b, oy * kh + i]
                for j in range(kw):
                    for ox in range(wo):
                        at = (ox * kw + j) * c
                        cell, out = src[at : at + c], dst[at : at + c]
                        lo, hi = ox * c, (ox + 1) * c
                        mo, go, tk = m[lo:hi], gr[lo:hi], taken[lo:hi]
                        if relu:
                            for ch in range(c):
                                v = cell[ch]
                                hit = (v == mo[ch]) & (tk[ch] == 0)
                                out[ch] = (go[ch] if hit else 0) * (1 if v > 0 else 0)
                                tk[ch] |= hit
                        else:
                            for ch in range(c):
                                hit = (cell[ch] == mo[ch]) & (tk[ch] == 0)
                                out[ch] = go[ch] if hit else 0
                                tk[ch] |= hit


# ---- convolution -----------------------------------------------------------------------------


class _Patches:
    """The patch matrix of NHWC ``x`` (rows N*Ho*Wo, columns kh*kw*C) in blocks of ``step``
    rows, each built into a cache-sized buffer by ``build(r0, r1, buf)``, which returns the block
    as a (r1 - r0, kh*kw*C) view of ``buf``. Short window rows (kw * C < Wo, a first layer on a
    1-channel image) build the buffer transposed, in blocks of whole output rows."""

    def __init__(self, x, kh, kw, sh, sw, ho, wo, ph, pw, threads_hint: int = 1):
        n, _, _, c = x.shape
        self.geom = (c, kh, kw, sh, sw, ho, wo)
        self.k, self.rows, self.dtype = kh * kw * c, n * ho * wo, x.dtype
        self.x3 = _padded3(x, ph, pw)
        self.transposed = kw * c < wo
        if self.transposed:
            self.step = max(1, _block_rows(self.k, self.rows, _TBLOCK_ELEMS) // wo) * wo
        else:
            self.step = _block_rows(self.k, self.rows, _BLOCK_ELEMS // max(threads_hint, 1))
        self.nblocks = -(-self.rows // self.step)

    def scratch(self) -> np.ndarray:
        shape = (self.k, self.step) if self.transposed else (self.step, self.k)
        return np.empty(shape, dtype=self.dtype)

    def bounds(self, i: int) -> tuple[int, int]:
        r0 = i * self.step
        return r0, min(r0 + self.step, self.rows)

    def build(self, r0: int, r1: int, buf: np.ndarray) -> np.ndarray:
        c, kh, kw, sh, sw, ho, wo = self.geom
        if self.transposed:
            _im2col_t(self.x3, c, r0 // wo, r1 // wo, kh, kw, sh, sw, ho, wo, buf)
            return buf[:, : r1 - r0].T
        _im2col(self.x3, c, r0, r1, kh, kw, sh, sw, ho, wo, buf)
        return buf[: r1 - r0]


def _patches(x, kh, kw, sh, sw, ho, wo, ph, pw) -> tuple[_Patches, int]:
    """The blocks of ``x``'s patch matrix and the threads to run them on: on the intra-op threads
    blocks half as large per thread as on one (the threads' buffers together take the same
    cache), and at least one block per thread."""
    n, _, _, c = x.shape
    want = _threads(n * ho * wo)
    p = _Patches(x, kh, kw, sh, sw, ho, wo, ph, pw, want)
    if want > 1 and not p.transposed and p.nblocks < want:
        p.step = -(-p.rows // want)
        p.nblocks = -(-p.rows // p.step)
    return p, min(want, p.nblocks)


def conv2d(
    x: np.ndarray,
    f: np.ndarray,
    sh: int,
    sw: int,
    ho: int,
    wo: int,
    ph,
    pw,
    bias: np.ndarray | None = None,
    relu: bool = False,
) -> np.ndarray:
    """Cross-correlation of NHWC ``x`` with (kh, kw, C, Co) ``f``: the (N, Ho, Wo, Co) output,
    by Winograd's algorithm where it applies and measured faster (winograd.pick), else as GEMMs
    of patch blocks. With ``bias`` (Co,) and ``relu``: a fused bias add and ReLU, applied to
    each block of the output while it is in cache (runtime/fusion.py)."""
    from . import winograd

    kh, kw, _, co = f.shape
    if winograd.applies(x, kh, kw, sh, sw, co, (ho, wo)):
        return winograd.pick(
            ("Conv2D", x.shape, f.shape, ph, pw),
            lambda: winograd.conv2d(x, f, ho, wo, ph, pw, bias, relu),
            lambda: _conv2d_gemm(x, f, sh, sw, ho, wo, ph, pw, bias, relu),
        )
    return _conv2d_gemm(x, f, sh, sw, ho, wo, ph, pw, bias, relu)


def _conv2d_gemm(
    x: np.ndarray, f: np.ndarray, sh: int, sw: int, ho: int, wo: int, ph, pw, bias, relu
) -> np.ndarray:
    n, _, _, c = x.shape
    kh, kw, _, co = f.shape
    k, rows = kh * kw * c, n * ho * wo
    f2 = np.ascontiguousarray(f).reshape(k, co)
    if kh == kw == sh == sw == 1:
        out = intraop.matmul(x.reshape(rows, c), f2)
        bias_relu(out, bias, relu)
        return out.reshape(n, ho, wo, co)
    out = np.empty((rows, co), dtype=x.dtype)
    p, threads = _patches(x, kh, kw, sh, sw, ho, wo, ph, pw)
    b = _no_bias(x.dtype) if bias is None else bias

    def work(i: int, buf: np.ndarray) -> None:
        r0, r1 = p.bounds(i)
        np.matmul(p.build(r0, r1, buf), f2, out=out[r0:r1])
        if bias is not None or relu:
            _bias_relu(out[r0:r1], b, relu)

    _run_blocks(p.nblocks, threads, p.scratch, work)
    return out.reshape(n, ho, wo, co)


# Partial filter gradients (one per block, summed in block order so that the result does not
# depend on which thread took which block) are kept while they take at most this many elements;
# a larger filter's gradient runs its blocks in turn into one sum.
_PARTS_ELEMS = 1 << 23


def conv2d_backprop_filter(
    x: np.ndarray, dy: np.ndarray, kh: int, kw: int, sh: int, sw: int, ph, pw
) -> np.ndarray:
    """The gradient of conv2d with respect to its (kh, kw, C, Co) filter (Winograd's algorithm
    where it applies and measured faster)."""
    from . import winograd

    if winograd.applies(x, kh, kw, sh, sw, dy.shape[3], dy.shape[1:3]):
        return winograd.pick(
            ("Conv2DBackpropFilter", x.shape, dy.shape, kh, ph, pw),
            lambda: winograd.conv2d_backprop_filter(x, dy, kh, ph, pw),
            lambda: _conv2d_backprop_filter_gemm(x, dy, kh, kw, sh, sw, ph, pw),
        )
    return _conv2d_backprop_filter_gemm(x, dy, kh, kw, sh, sw, ph, pw)


def _conv2d_backprop_filter_gemm(x, dy, kh: int, kw: int, sh: int, sw: int, ph, pw):
    n, _, _, c = x.shape
    _, ho, wo, co = dy.shape
    k, rows = kh * kw * c, n * ho * wo
    dy2 = np.ascontiguousarray(dy).reshape(rows, co)
    if kh == kw == sh == sw == 1:
        return intraop.matmul(x.reshape(rows, c).T, dy2).reshape(kh, kw, c, co)
    p, threads = _patches(x, kh, kw, sh, sw, ho, wo, ph, pw)
    if threads > 1 and p.nblocks * k * co > _PARTS_ELEMS:
        p, threads = _Patches(x, kh, kw, sh, sw, ho, wo, ph, pw), 1
    if threads == 1:
        df = np.zeros((k, co), dtype=x.dtype)
        part = np.empty((k, co), dtype=x.dtype)

        def add(i: int, buf: np.ndarray) -> None:
            r0, r1 = p.bounds(i)
            np.matmul(p.build(r0, r1, buf).T, dy2[r0:r1], out=part)
            np.add(df, part, out=df)

        _run_blocks(p.nblocks, 1, p.scratch, add)
        return df.reshape(kh, kw, c, co)
    parts = np.empty((p.nblocks, k, co), dtype=x.dtype)

    def work(i: int, buf: np.ndarray) -> None:
        r0, r1 = p.bounds(i)
        np.matmul(p.build(r0, r1, buf).T, dy2[r0:r1], out=parts[i])

    _run_blocks(p.nblocks, threads, p.scratch, work)
    df = parts[0]
    for part in parts[1:]:
        df += part
    return df.reshape(kh, kw, c, co)


def conv2d_backprop_pair(x, f, dy, sh: int, sw: int, ph, pw) -> tuple | None:
    """(filter gradient, input gradient) of one float32 stride-1 convolution by Winograd's
    algorithm sharing the output gradient's transform (``winograd.conv2d_backprop_both``),
    where the filter gradient may run as Winograd's (the input gradient, by the adjoint, is
    tiled the same way); chosen against the two ops run apart as
    ``winograd.pick`` chooses (HETBED_WINOGRAD); None where it does not apply."""
    from . import winograd

    kh, kw, _, co = f.shape
    # both are tiled over the output gradient, as the filter gradient alone is
    if not (x.dtype == np.float32 and winograd.applies(x, kh, kw, sh, sw, co, dy.shape[1:3])):
        return None
    return winograd.pick(
        ("Conv2DBackpropPair", x.shape, f.shape, ph, pw),
        lambda: winograd.conv2d_backprop_both(x, f, dy, ph, pw),
        lambda: (
            conv2d_backprop_filter(x, dy, kh, kw, sh, sw, ph, pw),
            conv2d_backprop_input(x.shape, f, dy, sh, sw, ph, pw),
        ),
        margin=_PAIR_MARGIN,
    )


# The shared pass is kept when it takes at most this fraction of the two ops' time apart (which
# are themselves Winograd's where that won): the same algorithm, so no margin for a different
# rounding, only for the timing's noise (measured in the CNN step: 5.5 against 6.1 ms).
_PAIR_MARGIN = 0.97


def conv2d_backprop_input(
    x_shape: tuple, f: np.ndarray, dy: np.ndarray, sh: int, sw: int, ph, pw
) -> np.ndarray:
    """The gradient of conv2d with respect to its NHWC input of shape ``x_shape`` (Winograd's
    algorithm where it applies and measured faster)."""
    from . import winograd

    if winograd.backprop_input_applies(tuple(x_shape[1:3]), f, dy, sh, sw, ph, pw):
        return winograd.pick(
            ("Conv2DBackpropInput", tuple(x_shape), f.shape, ph, pw),
            lambda: winograd.conv2d_backprop_input(x_shape, f, dy, ph, pw),
            lambda: _conv2d_backprop_input_gemm(x_shape, f, dy, sh, sw, ph, pw),
        )
    return _conv2d_backprop_input_gemm(x_shape, f, dy, sh, sw, ph, pw)


def _conv2d_backprop_input_gemm(x_shape: tuple, f, dy, sh: int, sw: int, ph, pw):
    n, h, w, c = x_shape
    kh, kw, _, co = f.shape
    _, ho, wo, _ = dy.shape
    k, rows = kh * kw * c, n * ho * wo
    f2t = np.ascontiguousarray(f).reshape(k, co).T
    dy2 = np.ascontiguousarray(dy).reshape(rows, co)
    if kh == kw == sh == sw == 1:
        return (dy2 @ f2t).reshape(n, h, w, c)
    dxp = np.zeros((n, h + ph[0] + ph[1], w + pw[0] + pw[1], c), dtype=dy.dtype)
    dx3 = dxp.reshape(n, dxp.shape[1], dxp.shape[2] * c)
    step = _block_rows(k, rows)
    threads = _threads(-(-rows // step))
    if threads > 1:
        # Blocks of whole images, which add into disjoint parts of the gradient; an image larger
        # than 4 blocks' buffer runs in turn instead.
        per_image = ho * wo
        images = (_BLOCK_ELEMS // threads) // (per_image * k)
        if images == 0 and per_image * k <= 4 * _BLOCK_ELEMS:
            images = 1
        if images:
            step = images * per_image
            threads = _threads(-(-rows // step))
        else:
            threads = 1

    def work(i: int, dcols: np.ndarray) -> None:
        r0 = i * step
        r1 = min(r0 + step, rows)
        np.matmul(dy2[r0:r1], f2t, out=dcols[: r1 - r0])
        _col2im(dcols, c, r0, r1, kh, kw, sh, sw, ho, wo, dx3)

    _run_blocks(-(-rows // step), threads, lambda: np.empty((step, k), dtype=dy.dtype), work)
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
    n, h, w, c = x.shape
    y = np.empty((n, ho, wo, c), dtype=x.dtype)
    if _tiled(x, kh, kw, sh, sw, ho, wo, ph, pw):
        x3, y3 = x.reshape(n, h, w * c), y.reshape(n, ho, wo * c)
        intraop.chunks(n, h * w * c, lambda i, j: _max_pool_tiles(x3[i:j], c, kh, kw, y3[i:j]))
    else:
        intraop.chunks(
            n, h * w * c, lambda i, j: _max_pool(x[i:j], kh, kw, sh, sw, ph[0], pw[0], y[i:j])
        )
    return y


def max_pool_grad(
    x, y, g, kh: int, kw: int, sh: int, sw: int, ph, pw, relu: bool = False
) -> np.ndarray:
    """MaxPool's input gradient: each window's ``g`` goes to its first maximal cell. With
    ``relu``, times (x > 0): the gradient of the ReLU whose output ``x`` is, fused (ReluGrad's
    arithmetic, so the same bits)."""
    x, y, g = (np.ascontiguousarray(a) for a in (x, y, g))
    n, h, w, c = x.shape
    ho, wo = y.shape[1], y.shape[2]
    if not _tiled(x, kh, kw, sh, sw, ho, wo, ph, pw):
        dx = np.zeros_like(x)
        intraop.chunks(
            n,
            h * w * c,
            lambda i, j: _max_pool_grad(
                x[i:j], y[i:j], g[i:j], kh, kw, sh, sw, ph[0], pw[0], dx[i:j]
            ),
        )
        return relu_grad(dx, x) if relu else dx
    dx = np.empty_like(x)
    dx[:, ho * kh :] = 0  # rows and columns no window covers (VALID with a remainder)
    dx[:, :, wo * kw :] = 0
    x3, dx3 = x.reshape(n, h, w * c), dx.reshape(n, h, w * c)
    y3, g3 = y.reshape(n, ho, wo * c), g.reshape(n, ho, wo * c)
    intraop.chunks(
        n,
        h * w * c,
        lambda i, j: _max_pool_grad_tiles(x3[i:j], y3[i:j], g3[i:j], c, kh, kw, dx3[i:j], relu),
    )
    return dx


# ---- elementwise: ReLU, its gradient, bias add and its gradient -------------------------------


@njit(cache=True, nogil=True)
def _relu(x, out):  # pragma: no cover - compiled
    for i in range(x.size):
        v = x[i]
        out[i] = v if (v > 0 or v != v) else 0  # NaN stays NaN, as in np.maximum


@njit(cache=True, nogil=True)
def _relu_grad(g, y, out):  # pragma: no cover - compiled
    for i in range(g.size):
        out[i] = g[i] * (1 if y[i] > 0 else 0)  # g * (y > 0): a NaN gradient stays NaN


@njit(cache=True, nogil=True)
def _bias_add(v, b, out):  # pragma: no cover - compiled
    c = b.size
    for r in range(v.shape[0]):
        src, dst = v[r], out[r]
        for k in range(c):
            dst[k] = src[k] + b[k]


@njit(cache=True, nogil=True)
def _bias_add_grad(g, out):  # pragma: no cover - compiled
    """Column sums of ``g``, row after row (the order, and so the rounding, of numpy's sum)."""
    out[:] = 0
    for r in range(g.shape[0]):
        src = g[r]
        for k in range(out.size):
            out[k] += src[k]


@njit(cache=True, nogil=True, inline="always")
def row_epilogue(row, b, relu):  # pragma: no cover - compiled
    """In place on ``row``: ``b`` (as long, or empty) added, then the ReLU when ``relu`` (NaN
    stays NaN) -- the rounding of BiasAdd and Relu run one after the other. The epilogue of
    the fused kernels (runtime/fusion.py): here and in Winograd's output transform. One pass,
    the ReLU a select (``y <= 0`` is false for NaN), so that it vectorizes: branching on the
    sign of random data cost 7x a copy's time."""
    n = row.size
    if b.size:
        if relu:
            for k in range(n):
                y = row[k] + b[k]
                row[k] = 0 if y <= 0 else y
        else:
            for k in range(n):
                row[k] = row[k] + b[k]
    elif relu:
        for k in range(n):
            y = row[k]
            row[k] = 0 if y <= 0 else y


@njit(cache=True, nogil=True)
def _bias_relu(v, b, relu):  # pragma: no cover - compiled
    """``row_epilogue`` on each row of C-contiguous ``v`` (rows, C) with ``b`` (C,) or empty,
    the rows walked as one flat array (a call per row cost more than the arithmetic)."""
    rows, c = v.shape
    if not b.size:
        row_epilogue(v.reshape(-1), b, relu)
        return
    flat = v.reshape(-1)
    for r in range(rows):
        row_epilogue(flat[r * c : (r + 1) * c], b, relu)


def _no_bias(dtype: np.dtype) -> np.ndarray:
    return np.empty(0, dtype)


def bias_relu(v: np.ndarray, bias: np.ndarray | None, relu: bool) -> None:
    """The epilogue of a fused MatMul or convolution, in place on C-contiguous ``v`` whose last
    axis has ``bias``'s length: ``v += bias`` when given, then the ReLU when ``relu``."""
    if bias is None and not relu:
        return
    v2 = v.reshape(-1, v.shape[-1])
    b = _no_bias(v.dtype) if bias is None else bias
    intraop.chunks(len(v2), v2.shape[1], lambda i, j: _bias_relu(v2[i:j], b, relu))


def relu(x: np.ndarray) -> np.ndarray:
    x = _c(x)
    out = np.empty_like(x)
    x1, o1 = x.reshape(-1), out.reshape(-1)
    intraop.chunks(x1.size, 1, lambda i, j: _relu(x1[i:j], o1[i:j]))
    return out


def relu_grad(g: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``g`` where ``y > 0``, else 0 (``g * (y > 0)``: a NaN or inf in ``g`` gives NaN there)."""
    g, y = _c(g), _c(y)
    out = np.empty_like(g)
    g1, y1, o1 = g.reshape(-1), y.reshape(-1), out.reshape(-1)
    intraop.chunks(g1.size, 1, lambda i, j: _relu_grad(g1[i:j], y1[i:j], o1[i:j]))
    return out


def bias_add(v: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``v + b`` with ``b`` (C,) added along the last axis of ``v``."""
    v, b = _c(v), _c(b)
    out = np.empty_like(v)
    v2, o2 = v.reshape(-1, b.size), out.reshape(-1, b.size)
    intraop.chunks(len(v2), b.size, lambda i, j: _bias_add(v2[i:j], b, o2[i:j]))
    return out


@njit(cache=True, nogil=True)
def _bias_add_grad4(g, out):  # pragma: no cover - compiled
    """Column sums of ``g``, four rows at a time ((r0 + r1) + (r2 + r3) added to the sum): a
    quarter of the row-after-row loop's chain of dependent additions (measured: 77 us instead of
    148 us for 50,176 rows of 32), and closer to the exact sum."""
    c = out.size
    out[:] = 0
    n = g.shape[0]
    r = 0
    while r + 4 <= n:
        a, b, e, d = g[r], g[r + 1], g[r + 2], g[r + 3]
        for k in range(c):
            out[k] += (a[k] + b[k]) + (e[k] + d[k])
        r += 4
    while r < n:
        a = g[r]
        for k in range(c):
            out[k] += a[k]
        r += 1


# Bias gradients over at least this many elements sum their rows in _GRAD_PARTS consecutive
# parts (on the intra-op threads; four rows at a time), then add the parts in order: the same
# bits on any number of threads. Smaller ones sum row after row, numpy's order.
_GRAD_SPLIT_ELEMS = 1 << 18
_GRAD_PARTS = 16


def bias_add_grad(g: np.ndarray) -> np.ndarray:
    """Sums of ``g`` over all axes but the last."""
    g = _c(g)
    c = g.shape[-1]
    out = np.empty(c, dtype=g.dtype)
    g2 = g.reshape(-1, c)
    rows = len(g2)
    if g.size < _GRAD_SPLIT_ELEMS or rows < 2 * _GRAD_PARTS:
        _bias_add_grad(g2, out)
        return out
    per = -(-rows // _GRAD_PARTS)
    parts = np.empty((-(-rows // per), c), dtype=g.dtype)

    def part(i: int, j: int) -> None:
        for k in range(i, j):
            _bias_add_grad4(g2[k * per : (k + 1) * per], parts[k])

    intraop.chunks(len(parts), per * c, part)
    _bias_add_grad(parts, out)
    return out


@njit(cache=True, nogil=True)
def _sub_scaled(var, g, lr):  # pragma: no cover - compiled
    for i in range(var.size):
        var[i] = var[i] - g[i] * lr


def sub_scaled(var: np.ndarray, g: np.ndarray, lr: Any) -> None:
    """``var -= g * lr`` in one pass over flat arrays of one dtype (``lr`` a scalar of it): the
    rounding of ``s = g * lr; var -= s``."""
    _sub_scaled(var, g, lr)


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
