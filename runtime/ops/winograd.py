"""Winograd minimal filtering for stride-1 float32 convolutions on the CPU (NHWC).

A stride-1 convolution with an r x r filter computes each m x m tile of its output from an
a x a tile of its (padded) input, a = m + r - 1. Winograd's algorithm F(m x m, r x r) moves both
tiles into an a x a transform domain where the convolution is an elementwise product, so that
summing over input channels becomes a^2 independent GEMMs of (tiles x C) by (C x Co):
``Y = A^T [ (G g G^T) . (B^T d B) ] A`` (Lavin and Gray, "Fast Algorithms for Convolutional Neural
Networks", CVPR 2016). Here a = 8: F(4x4, 5x5) does 64 multiplications per output tile and
channel pair where the direct form does 400, F(6x6, 3x3) 64 where it does 324.

The three ops of a convolution layer:

- forward: input tiles through B^T, filters through G, 64 GEMMs, output tiles through A^T;
- input gradient (stride 1): the forward algorithm on the output gradient, padded by r - 1 - p,
  with the filter turned 180 degrees and its channel axes swapped;
- filter gradient: each r x r gradient is the correlation of an input tile with an m x m tile of
  the output gradient, F(r x r, m x m) with the same a; the sum over tiles and images is then 64
  GEMMs of (C x tiles) by (tiles x Co) in the transform domain, and one output transform of the
  C x Co sums at the end.

Transforms run in compiled kernels over blocks of tiles, each block's GEMMs (numpy's BLAS) right
after its transform. The matrices come from the Cook-Toom construction at the points 0, +-1,
+-2, +-1/2 and infinity; in float32 the result differs from the exact sum by up to about 1e-5 of
the output's largest value (2e-5 with 512 input channels), where the patch GEMMs' own rounding
is about 5e-7 of it. Whether it is faster than the patch GEMMs of ``nn_cpu`` depends on how fast
the BLAS runs GEMMs against the compiled transforms: ``pick`` measures both on the first call of
each shape (HETBED_WINOGRAD=auto, the default), or HETBED_WINOGRAD=1 / 0 forces it on / off.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np
from numba import njit

from .intraop import run_blocks, threads_for
from .nn_cpu import row_epilogue

POINTS = (0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5)  # with infinity: eight points, 8 x 8 tiles
OUTPUT_TILE = {3: 6, 5: 4}  # filter size r -> output tile m (m + r - 1 == 8)

# Elements of one block's transformed tiles (input and output side together): 4M (16 MB of
# float32, 682 tiles of a 32 -> 64 channel layer). Measured on that layer (64 14x14 images, 5x5):
# blocks of 1M-4M elements within 5% of each other in a training step; 8M 15% slower, and smaller
# blocks make GEMMs too small for BLAS's threads.
_BLOCK_ELEMS = 1 << 22
_PARTS_ELEMS = 1 << 23  # filter-gradient partial sums kept at once (32 MB)
# Elements of one block on the intra-op threads (each thread transforms and multiplies its own):
# 512K, 85 tiles of that layer. The CNN training step with 256K / 512K / 1M / 2M: 16.1 / 15.5 /
# 16.4 / 20.7 ms with OpenBLAS's Haswell kernels, 13.6 / 12.7 / 13.2 / 15.5 ms with SkylakeX's.
_THREAD_BLOCK_ELEMS = 1 << 19
_MIN_CHANNELS = 8  # fewer input or output channels: GEMMs too thin to gain (a first layer)
_MAX_WASTE = 1.35


_MARGIN = 0.9  # Winograd is kept for a shape when it took at most this fraction of the GEMMs' time
_TRIALS = 3
_CHOICE: dict = {}  # (op, shapes...) -> whether Winograd's algorithm runs it


def mode() -> str:
    """HETBED_WINOGRAD: "off" (0, false, no), "on" (1, true, yes) or "auto" (the default)."""
    v = os.environ.get("HETBED_WINOGRAD", "auto").strip().lower()
    if v in ("0", "false", "no", "off"):
        return "off"
    return "on" if v in ("1", "true", "yes", "on") else "auto"


def pick(key: tuple, fast, gemm, margin: float | None = None) -> np.ndarray:
    """The result of ``fast()`` (Winograd's algorithm) or of ``gemm()`` (patch GEMMs) for the
    op and shapes ``key``. In "auto" mode the first call with a key runs both, in turn,
    _TRIALS times each after one untimed ``fast()`` (which compiles the transforms in a new
    environment; the first runs of either also fault in fresh pages for its buffers), and keeps for
    this process the one whose faster run took less time, Winograd's only when it took at most
    ``margin`` (default _MARGIN) of the other's: which one wins depends on how fast this
    machine's BLAS runs GEMMs (its kernels, its threads) against the compiled transforms. Both
    agree to about 1e-5 of the output's scale; a given key always runs the same one
    afterwards."""
    m = mode()
    if m != "auto":
        return fast() if m == "on" else gemm()
    choice = _CHOICE.get(key)
    if choice is not None:
        return fast() if choice else gemm()
    out = fast()
    t_fast = t_gemm = float("inf")
    for _ in range(_TRIALS):
        t = time.perf_counter()
        out = fast()
        t_fast = min(t_fast, time.perf_counter() - t)
        t = time.perf_counter()
        ref = gemm()
        t_gemm = min(t_gemm, time.perf_counter() - t)
    _CHOICE[key] = choice = t_fast <= (_MARGIN if margin is None else margin) * t_gemm
    return out if choice else ref


def choices() -> dict:
    """What pick decided so far in this process: {key: "winograd" or "gemm"}."""
    return {k: "winograd" if v else "gemm" for k, v in _CHOICE.items()}


def cook_toom(m: int, r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A^T, G, B^T) of F(m, r) in float64: for a 1-D correlation y[i] = sum_k d[i + k] g[k]
    (i < m, k < r, d of length a = m + r - 1), ``y = A^T [(G g) * (B^T d)]``. A^T and G are
    Vandermonde rows at the points (and the point at infinity); B^T is solved from the identity
    itself, which must then hold exactly."""
    a = m + r - 1
    if a - 1 > len(POINTS):
        raise ValueError(f"F({m}, {r}) needs {a - 1} finite points; {len(POINTS)} are defined")
    p = np.array(POINTS[: a - 1])
    at = np.zeros((m, a))
    g = np.zeros((a, r))
    at[:, : a - 1] = p[None, :] ** np.arange(m)[:, None]
    g[: a - 1] = p[:, None] ** np.arange(r)[None, :]
    at[m - 1, a - 1] = g[a - 1, r - 1] = 1.0
    # sum_j at[i, j] g[j, k] bt[j, t] == [t == i + k] for every i, k, t: linear in bt
    rows = np.zeros((m * r * a, a * a))
    rhs = np.zeros(m * r * a)
    q = 0
    for i in range(m):
        for k in range(r):
            for t in range(a):
                rows[q, t::a] = at[i] * g[:, k]
                rhs[q] = float(t == i + k)
                q += 1
    bt = np.linalg.lstsq(rows, rhs, rcond=None)[0].reshape(a, a)
    if not np.allclose(rows @ bt.ravel(), rhs, atol=1e-9):  # pragma: no cover - bad points
        raise ValueError(f"F({m}, {r}): no exact input transform at points {POINTS}")
    bt[np.abs(bt) < 1e-12] = 0.0
    return at, g, bt


_MATRICES: dict = {}


def _paired(w: np.ndarray, first: tuple, last: tuple) -> bool:
    """Whether transform ``w`` (8 rows) has the shape the compiled kernels assume: row 0 nonzero
    only at columns ``first``, row 7 only at ``last``, rows 2k - 1 and 2k (k = 1, 2, 3) zero in
    columns 0 and 7 where ``first`` has no 0, and equal on even columns, opposite on odd ones."""
    cols = np.arange(w.shape[1])
    if np.any(np.delete(w[0], first)) or np.any(np.delete(w[7], last)):
        return False
    sign = np.where(cols % 2 == 0, 1.0, -1.0)
    for k in (1, 3, 5):
        if not np.array_equal(w[k + 1], w[k] * sign):
            return False
        if 0 not in first and (w[k, 0] != 0 or w[k, -1] != 0):
            return False
    return True


def matrices(m: int, r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """cook_toom(m, r) as float32 arrays, computed once, checked to have the shape the compiled
    transforms rely on (an input transform as _bt8 reads it, a filter-side one as _g8)."""
    if (m, r) not in _MATRICES:
        at, g, bt = (np.ascontiguousarray(x, np.float32) for x in cook_toom(m, r))
        if m + r - 1 != 8 or not (
            _paired(bt, (0, 2, 4, 6), (1, 3, 5, 7))
            and (r % 2 == 1 or _paired(g, (0,), (r - 1,)))  # an even r: _g8's (8, r) transform
        ):  # pragma: no cover - only other POINTS would do this
            raise ValueError(f"F({m}, {r}) at points {POINTS}: not the transforms' structure")
        _MATRICES[m, r] = (at, g, bt)
    return _MATRICES[m, r]


def applies(x: np.ndarray, kh: int, kw: int, sh: int, sw: int, co: int, out_hw: tuple) -> bool:
    """Whether a convolution of NHWC ``x`` with a (kh, kw, C, co) filter and an output of
    ``out_hw`` rows and columns runs here: float32, stride 1, a square filter of a size with a
    tile, enough channels, and whole tiles that cover the output without computing more than
    _MAX_WASTE times its values (a 7 x 7 output in 6 x 6 tiles would be 2.9 times)."""
    if not (
        x.dtype == np.float32
        and kh == kw
        and kh in OUTPUT_TILE
        and sh == sw == 1
        and x.shape[3] >= _MIN_CHANNELS
        and co >= _MIN_CHANNELS
        and mode() != "off"
    ):
        return False
    m = OUTPUT_TILE[kh]
    ho, wo = out_hw
    return ho > 0 and wo > 0 and (-(-ho // m) * m) * (-(-wo // m) * m) <= _MAX_WASTE * ho * wo


# ---- compiled transforms ---------------------------------------------------------------------


@njit(cache=True, nogil=True)
def _tiles_in(src, c, w, step, th, tw, t0, t1, tmp, out):  # pragma: no cover - compiled
    """out[p * 8 + q, t - t0, :] = (w @ D @ w^T)[p, q] for each tile t in [t0, t1), D the 8 x 8
    window at rows ty * step, columns tx * step of ``src`` (N, H, W * c): rows first over a
    window row's 8 * c contiguous values into ``tmp`` (8, 8 * c), then columns over c.

    ``w`` (8, 8) is shaped as _paired checks: row 0 on the even inputs, row 7 on the odd ones,
    rows 1-6 on inputs 1-6 (44 multiply-adds a column, not 64). Each loop writes one row from
    whole rows, which LLVM vectorizes (a loop over several output rows, or over rows inside a
    loop over columns, it does not)."""
    nc = 8 * c
    a0, a2, a4, a6 = w[0, 0], w[0, 2], w[0, 4], w[0, 6]
    z1, z3, z5, z7 = w[7, 1], w[7, 3], w[7, 5], w[7, 7]
    for t in range(t0, t1):
        b = t // (th * tw)
        y = (t // tw) % th * step
        x = t % tw * step * c
        r = t - t0
        s0, s1 = src[b, y, x : x + nc], src[b, y + 1, x : x + nc]
        s2, s3 = src[b, y + 2, x : x + nc], src[b, y + 3, x : x + nc]
        s4, s5 = src[b, y + 4, x : x + nc], src[b, y + 5, x : x + nc]
        s6, s7 = src[b, y + 6, x : x + nc], src[b, y + 7, x : x + nc]
        o = tmp[0]
        for j in range(nc):
            o[j] = a0 * s0[j] + a2 * s2[j] + a4 * s4[j] + a6 * s6[j]
        o = tmp[7]
        for j in range(nc):
            o[j] = z1 * s1[j] + z3 * s3[j] + z5 * s5[j] + z7 * s7[j]
        for p in range(1, 7):
            w1, w2, w3, w4, w5, w6 = w[p, 1], w[p, 2], w[p, 3], w[p, 4], w[p, 5], w[p, 6]
            o = tmp[p]
            for j in range(nc):
                o[j] = w1 * s1[j] + w2 * s2[j] + w3 * s3[j] + w4 * s4[j] + w5 * s5[j] + w6 * s6[j]
        for p in range(8):
            row = tmp[p]
            s0, s1, s2, s3 = row[:c], row[c : 2 * c], row[2 * c : 3 * c], row[3 * c : 4 * c]
            s4, s5, s6, s7 = (
                row[4 * c : 5 * c],
                row[5 * c : 6 * c],
                row[6 * c : 7 * c],
                row[7 * c :],
            )
            o = out[p * 8, r]
            for k in range(c):
                o[k] = a0 * s0[k] + a2 * s2[k] + a4 * s4[k] + a6 * s6[k]
            o = out[p * 8 + 7, r]
            for k in range(c):
                o[k] = z1 * s1[k] + z3 * s3[k] + z5 * s5[k] + z7 * s7[k]
            for q in range(1, 7):
                w1, w2, w3, w4, w5, w6 = w[q, 1], w[q, 2], w[q, 3], w[q, 4], w[q, 5], w[q, 6]
                o = out[p * 8 + q, r]
                for k in range(c):
                    o[k] = (
                        w1 * s1[k] + w2 * s2[k] + w3 * s3[k] + w4 * s4[k] + w5 * s5[k] + w6 * s6[k]
                    )


@njit(cache=True, nogil=True)
def _tiles_in_g(src, c, w, n, th, tw, t0, t1, tmp, out):  # pragma: no cover - compiled
    """_tiles_in for a filter-side transform ``w`` (8, n) on the n x n tiles of an output
    gradient (n = m: 4 or 6, at steps of n): row 0 on input 0, row 7 on input n - 1, rows 1-6
    on all n (shaped as _paired checks)."""
    nc = n * c
    a0, z = w[0, 0], w[7, n - 1]
    for t in range(t0, t1):
        b = t // (th * tw)
        y = (t // tw) % th * n
        x = t % tw * nc
        r = t - t0
        s0, s1 = src[b, y, x : x + nc], src[b, y + 1, x : x + nc]
        s2, s3 = src[b, y + 2, x : x + nc], src[b, y + 3, x : x + nc]
        if n == 6:
            s4, s5 = src[b, y + 4, x : x + nc], src[b, y + 5, x : x + nc]
        o = tmp[0]
        for j in range(nc):
            o[j] = a0 * s0[j]
        o = tmp[7]
        last = s5 if n == 6 else s3
        for j in range(nc):
            o[j] = z * last[j]
        for p in range(1, 7):
            o = tmp[p]
            w0, w1, w2, w3 = w[p, 0], w[p, 1], w[p, 2], w[p, 3]
            if n == 6:
                w4, w5 = w[p, 4], w[p, 5]
                for j in range(nc):
                    o[j] = (
                        w0 * s0[j] + w1 * s1[j] + w2 * s2[j] + w3 * s3[j] + w4 * s4[j] + w5 * s5[j]
                    )
            else:
                for j in range(nc):
                    o[j] = w0 * s0[j] + w1 * s1[j] + w2 * s2[j] + w3 * s3[j]
        for p in range(8):
            row = tmp[p]
            s0, s1 = row[:c], row[c : 2 * c]
            s2, s3 = row[2 * c : 3 * c], row[3 * c : 4 * c]
            if n == 6:
                s4, s5 = row[4 * c : 5 * c], row[5 * c : 6 * c]
            o = out[p * 8, r]
            for k in range(c):
                o[k] = a0 * s0[k]
            o = out[p * 8 + 7, r]
            last = s5 if n == 6 else s3
            for k in range(c):
                o[k] = z * last[k]
            for q in range(1, 7):
                o = out[p * 8 + q, r]
                w0, w1, w2, w3 = w[q, 0], w[q, 1], w[q, 2], w[q, 3]
                if n == 6:
                    w4, w5 = w[q, 4], w[q, 5]
                    for k in range(c):
                        o[k] = (
                            w0 * s0[k]
                            + w1 * s1[k]
                            + w2 * s2[k]
                            + w3 * s3[k]
                            + w4 * s4[k]
                            + w5 * s5[k]
                        )
                else:
                    for k in range(c):
                        o[k] = w0 * s0[k] + w1 * s1[k] + w2 * s2[k] + w3 * s3[k]


@njit(cache=True, nogil=True, inline="always")
def _columns(src, r, p, w, tmp):  # pragma: no cover - compiled
    """tmp[p, j * c : (j + 1) * c] = sum over q of w[j, q] src[p * 8 + q, r, :] for each row j of
    ``w`` (rows, 8): the first pass of an output-side transform (``_tiles_out``, w = A^T) or of
    the input transform's adjoint (``_tiles_adjoint``, w = B)."""
    c = src.shape[2]
    s0, s1, s2, s3 = src[p * 8, r], src[p * 8 + 1, r], src[p * 8 + 2, r], src[p * 8 + 3, r]
    s4, s5, s6, s7 = src[p * 8 + 4, r], src[p * 8 + 5, r], src[p * 8 + 6, r], src[p * 8 + 7, r]
    for j in range(w.shape[0]):
        w0, w1, w2, w3 = w[j, 0], w[j, 1], w[j, 2], w[j, 3]
        w4, w5, w6, w7 = w[j, 4], w[j, 5], w[j, 6], w[j, 7]
        o = tmp[p, j * c : j * c + c]
        for k in range(c):
            o[k] = (
                w0 * s0[k]
                + w1 * s1[k]
                + w2 * s2[k]
                + w3 * s3[k]
                + w4 * s4[k]
                + w5 * s5[k]
                + w6 * s6[k]
                + w7 * s7[k]
            )


@njit(cache=True, nogil=True)
def _tiles_out(src, at, th, tw, t0, t1, tmp, out, brow, relu):  # pragma: no cover - compiled
    """out[b, ty * m + i, tx * m + j, :] = (at @ S @ at^T)[i, j] where the output (N, Ho, Wo * c)
    has them, S the 8 x 8 transform-domain tile t (src[p * 8 + q, t - t0, :]), ``at`` (m, 8):
    columns first over c, then rows over an output row's m * c contiguous values; ``tmp`` is
    (8, m * c). The epilogue of a fused bias add and ReLU (runtime/fusion.py), on each output row
    while it is in cache: ``brow`` (the bias repeated m times, or empty) added, then ``relu``
    (NaN stays NaN) -- the same rounding as the separate ops."""
    m = at.shape[0]
    c = src.shape[2]
    ho, woc = out.shape[1], out.shape[2]
    for t in range(t0, t1):
        b = t // (th * tw)
        y0 = (t // tw) % th * m
        x0 = t % tw * m * c
        r = t - t0
        for p in range(8):
            _columns(src, r, p, at, tmp)
        width = min(m * c, woc - x0)
        s0, s1, s2, s3, s4, s5, s6, s7 = (
            tmp[0],
            tmp[1],
            tmp[2],
            tmp[3],
            tmp[4],
            tmp[5],
            tmp[6],
            tmp[7],
        )
        for i in range(min(m, ho - y0)):
            w0, w1, w2, w3, w4, w5, w6, w7 = (
                at[i, 0],
                at[i, 1],
                at[i, 2],
                at[i, 3],
                at[i, 4],
                at[i, 5],
                at[i, 6],
                at[i, 7],
            )
            o = out[b, y0 + i, x0 : x0 + width]
            for j in range(width):
                o[j] = (
                    w0 * s0[j]
                    + w1 * s1[j]
                    + w2 * s2[j]
                    + w3 * s3[j]
                    + w4 * s4[j]
                    + w5 * s5[j]
                    + w6 * s6[j]
                    + w7 * s7[j]
                )
            if brow.size or relu:
                row_epilogue(o, brow[:width] if brow.size else brow, relu)


@njit(cache=True, nogil=True)
def _tiles_adjoint(src, bt, b_rows, step, th, tw, t0, t1, tmp, out):  # pragma: no cover - compiled
    """The adjoint of ``_tiles_in``: out[b, ty * step + i, tx * step + j, :] += (B Z B^T)[i, j]
    for each tile t (B = bt^T, given as ``b_rows``, C-contiguous; Z the 8 x 8 tile
    src[p * 8 + q, t - t0, :]) where the padded
    input ``out`` (N, Hp, Wp * c) has the tile's window: columns first into ``tmp`` (8, 8 * c),
    then the window's rows added. Windows of one image overlap (by 8 - step): the tiles of an
    image must be added by one thread."""
    c = src.shape[2]
    for t in range(t0, t1):
        b = t // (th * tw)
        y = (t // tw) % th * step
        x = t % tw * step * c
        r = t - t0
        for p in range(8):
            _columns(src, r, p, b_rows, tmp)
        t0r, t1r, t2r, t3r = tmp[0], tmp[1], tmp[2], tmp[3]
        t4r, t5r, t6r, t7r = tmp[4], tmp[5], tmp[6], tmp[7]
        for i in range(8):
            w0, w1, w2, w3 = bt[0, i], bt[1, i], bt[2, i], bt[3, i]
            w4, w5, w6, w7 = bt[4, i], bt[5, i], bt[6, i], bt[7, i]
            o = out[b, y + i, x : x + 8 * c]
            for k in range(8 * c):
                o[k] += (
                    w0 * t0r[k]
                    + w1 * t1r[k]
                    + w2 * t2r[k]
                    + w3 * t3r[k]
                    + w4 * t4r[k]
                    + w5 * t5r[k]
                    + w6 * t6r[k]
                    + w7 * t7r[k]
                )


# ---- the three ops -----------------------------------------------------------------------------


def _both_sides(w: np.ndarray, f: np.ndarray) -> np.ndarray:
    """(w @ f[:, :, i, o] @ w^T) for every channel pair of ``f`` (r, r, C, Co): (k, k, C, Co) for
    ``w`` (k, r), as two GEMMs (einsum took ten times as long)."""
    r, _, c, co = f.shape
    k = w.shape[0]
    rows = (w @ f.reshape(r, -1)).reshape(k, r, c * co)
    return np.matmul(w, rows).reshape(k, k, c, co)


def _pad_to(x: np.ndarray, top: int, left: int, hp: int, wp: int) -> np.ndarray:
    """``x`` placed at (top, left) in zeros of (N, hp, wp, C), cropped where it reaches past."""
    n, h, w, c = x.shape
    out = np.zeros((n, hp, wp, c), dtype=x.dtype)
    y1, x1 = min(h, hp - top), min(w, wp - left)
    out[:, top : top + y1, left : left + x1] = x[:, :y1, :x1]
    return out


def _blocks(tiles: int, per_tile: int) -> tuple[int, int, int]:
    """(tiles per block, blocks, threads): on the intra-op threads (intraop.py) each thread
    transforms and multiplies blocks of _THREAD_BLOCK_ELEMS (at least one block per thread) with
    BLAS on that thread; on one thread, blocks of _BLOCK_ELEMS, each block's GEMMs on BLAS's
    own threads."""
    want = threads_for(tiles)
    if want > 1:
        step = max(1, min(-(-tiles // want), _THREAD_BLOCK_ELEMS // max(per_tile, 1)))
    else:
        step = max(1, min(tiles, _BLOCK_ELEMS // max(per_tile, 1)))
    nblocks = -(-tiles // step)
    return step, nblocks, min(want, nblocks)


def conv2d(
    x: np.ndarray, f: np.ndarray, ho: int, wo: int, ph, pw, bias=None, relu: bool = False
) -> np.ndarray:
    """Stride-1 cross-correlation of NHWC float32 ``x`` with (r, r, C, Co) ``f`` padded by
    (before, after) ``ph``, ``pw``: the (N, ho, wo, Co) output; plus ``bias`` (Co,) and through
    a ReLU when asked (a fused bias add and ReLU)."""
    n, _, _, c = x.shape
    r, _, _, co = f.shape
    m = OUTPUT_TILE[r]
    brow = np.tile(bias, m) if bias is not None else np.empty(0, np.float32)
    at, g, bt = matrices(m, r)
    th, tw = -(-ho // m), -(-wo // m)
    x3 = _pad_to(x, ph[0], pw[0], th * m + r - 1, tw * m + r - 1).reshape(n, th * m + r - 1, -1)
    # filters in the transform domain: (64, C, Co)
    u = _both_sides(g, np.ascontiguousarray(f, np.float32)).reshape(64, c, co)
    out = np.empty((n, ho, wo, co), dtype=np.float32)
    out3 = out.reshape(n, ho, wo * co)
    tiles = n * th * tw
    step, nblocks, threads = _blocks(tiles, 64 * (c + co))

    def scratch():
        return (
            np.empty((64, step, c), np.float32),
            np.empty((64, step, co), np.float32),
            np.empty((8, 8 * max(c, co)), np.float32),
        )

    def work(i: int, buf) -> None:
        v, mm, tmp = buf
        t0 = i * step
        t1 = min(t0 + step, tiles)
        _tiles_in(x3, c, bt, m, th, tw, t0, t1, tmp, v)
        np.matmul(v[:, : t1 - t0], u, out=mm[:, : t1 - t0])
        _tiles_out(mm, at, th, tw, t0, t1, tmp, out3, brow, relu)

    run_blocks(nblocks, threads, scratch, work)
    return out


def conv2d_backprop_input(x_shape: tuple, f: np.ndarray, dy: np.ndarray, ph, pw) -> np.ndarray:
    """The gradient of a stride-1 conv2d with respect to its NHWC input of shape ``x_shape``: the
    forward algorithm on ``dy`` padded by r - 1 - p with the filter turned and transposed."""
    _, h, w, _ = x_shape
    r = f.shape[0]
    ft = np.ascontiguousarray(np.asarray(f)[::-1, ::-1].transpose(0, 1, 3, 2))
    return conv2d(dy, ft, h, w, (r - 1 - ph[0], r - 1 - ph[1]), (r - 1 - pw[0], r - 1 - pw[1]))


def backprop_input_applies(
    x_hw: tuple, f: np.ndarray, dy: np.ndarray, sh: int, sw: int, ph, pw
) -> bool:
    """Whether conv2d_backprop_input runs here (also needs padding of at most r - 1)."""
    r = f.shape[0]
    return (
        applies(dy, f.shape[0], f.shape[1], sh, sw, f.shape[2], x_hw)
        and max(ph[0], ph[1], pw[0], pw[1]) <= r - 1
    )


def conv2d_backprop_filter(x: np.ndarray, dy: np.ndarray, r: int, ph, pw) -> np.ndarray:
    """The gradient of a stride-1 conv2d with respect to its (r, r, C, Co) filter, by
    F(r x r, m x m): 64 GEMMs over the tiles of the transformed input and output gradient."""
    return _gradient_pass(x, dy, r, ph, pw)


def conv2d_backprop_both(x: np.ndarray, f: np.ndarray, dy: np.ndarray, ph, pw) -> tuple:
    """(filter gradient, input gradient) of a stride-1 conv2d of NHWC ``x`` with (r, r, C, Co)
    ``f``, from one pass over the tiles: the output gradient's tiles go through their
    transform once (A dy A^T, which is G dy G^T of the filter gradient's F(r x r, m x m)) and
    serve both: the filter gradient as in ``conv2d_backprop_filter``, and the input gradient as
    the adjoint of the forward algorithm, B [(A dy A^T) (G f G^T)^T] B^T per tile added into
    the padded input's windows."""
    return _gradient_pass(x, dy, f.shape[0], ph, pw, f)


def _gradient_pass(x: np.ndarray, dy: np.ndarray, r: int, ph, pw, f=None) -> Any:
    """The filter gradient and, given the filter ``f``, the input gradient too (see the two
    functions above). Blocks of tiles, or with ``f`` of whole images (an image's windows
    overlap, so one thread adds them); one partial filter gradient per chunk of consecutive
    blocks, the partials added in chunk order: the same bits whichever thread ran which chunk
    (at most _PARTS_ELEMS of partials)."""
    n, h, w, c = x.shape
    _, ho, wo, co = dy.shape
    m = OUTPUT_TILE[r]
    at, g, bt = matrices(r, m)  # r outputs of a length-m "filter" (an output-gradient tile)
    th, tw = -(-ho // m), -(-wo // m)
    hp, wp = th * m + r - 1, tw * m + r - 1
    x3 = _pad_to(x, ph[0], pw[0], hp, wp).reshape(n, hp, -1)
    dyp = dy if (ho, wo) == (th * m, tw * m) else _pad_to(dy, 0, 0, th * m, tw * m)
    dy3 = np.ascontiguousarray(dyp).reshape(n, th * m, -1)
    tiles = n * th * tw
    if f is None:
        step, nblocks, threads = _blocks(tiles, 64 * (c + co))
    else:
        # U = G f G^T of the forward F(m, r), transposed for Z = E U^T; B's rows for the adjoint
        # (B^T is the same for F(m, r) and F(r, m); G of F(r, m) is A of F(m, r))
        ut = _both_sides(matrices(m, r)[1], np.ascontiguousarray(f, np.float32))
        ut = np.ascontiguousarray(ut.reshape(64, c, co).transpose(0, 2, 1))
        b_rows = np.ascontiguousarray(bt.T)
        dxp = np.zeros((n, hp, wp, c), np.float32)
        dx3 = dxp.reshape(n, hp, -1)
        step, nblocks, threads = _image_blocks(n, th * tw, 64 * (2 * c + co))
    chunks = max(1, min(nblocks, _PARTS_ELEMS // (64 * c * co)))
    per = -(-nblocks // chunks)
    chunks = -(-nblocks // per)
    parts = np.empty((chunks, 64, c, co), np.float32)

    def scratch():
        return (
            np.empty((64, step, c), np.float32),
            np.empty((64, step, co), np.float32),
            np.empty((64, c, co), np.float32),
            np.empty((8, 8 * max(c, co)), np.float32),
            None if f is None else np.empty((64, step, c), np.float32),
        )

    def work(j: int, buf) -> None:
        v, e, part, tmp, z = buf
        for i in range(j * per, min((j + 1) * per, nblocks)):
            t0 = i * step
            t1 = min(t0 + step, tiles)
            k = t1 - t0
            _tiles_in(x3, c, bt, m, th, tw, t0, t1, tmp, v)
            _tiles_in_g(dy3, co, g, m, th, tw, t0, t1, tmp, e)
            vt, ek = v[:, :k].transpose(0, 2, 1), e[:, :k]
            if i == j * per:
                np.matmul(vt, ek, out=parts[j])
            else:
                np.matmul(vt, ek, out=part)
                parts[j] += part
            if z is not None:
                np.matmul(ek, ut, out=z[:, :k])
                _tiles_adjoint(z, bt, b_rows, m, th, tw, t0, t1, tmp, dx3)

    run_blocks(chunks, min(threads, chunks), scratch, work)
    total = parts[0]
    for p in parts[1:]:
        total += p
    # out of the transform domain: (8, 8, C, Co) -> (r, r, C, Co)
    df = _both_sides(at, total.reshape(8, 8, c, co))
    if f is None:
        return df
    return df, np.ascontiguousarray(dxp[:, ph[0] : ph[0] + h, pw[0] : pw[0] + w])


def _image_blocks(n: int, per_image: int, per_tile: int) -> tuple[int, int, int]:
    """``_blocks`` in whole images: (tiles per block, blocks, threads)."""
    want = threads_for(n)
    elems = _THREAD_BLOCK_ELEMS if want > 1 else _BLOCK_ELEMS
    images = max(1, elems // (per_image * per_tile))
    if want > 1:
        images = min(images, -(-n // want))
    nblocks = -(-n // images)
    return images * per_image, nblocks, min(want, nblocks)
