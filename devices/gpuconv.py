"""How long a convolution pass takes on a GPU: cuDNN's choice among algorithms, each priced by the
tiled GEMM model (devices/gpukernels.py), with five fitted numbers per unit class; a TF32 pass
takes the faster of its tensor-core and float32 CUDA-core prices (``pass_seconds``).

A 2-D convolution of an NHWC input (n x h x w x c) with an (r x s x c x k) filter at stride
``stride``, giving an (n x p x q x k) output, runs one of three passes: ``fwd`` (the output),
``bwd_input`` (the gradient to the input) and ``bwd_filter`` (the gradient to the filter).
cuDNN picks, per shape, the fastest of its algorithms (``cudnnFindConvolution*Algorithm``, or
TensorFlow's autotuning); the model does the same among:

* implicit GEMM (every pass, every shape): the GEMM of ``conv_gemm``, fwd
  (n p q) x k over r s c, bwd_input (n h w) x c over r s k p q / (h w) (the taps that reach an
  input pixel, on average), bwd_filter (r s c) x k over n p q (a reduction over the batch: the
  GEMM model's split-K and its partial sums price it). On tensor cores the channel counts are
  padded to multiples of ``TC_CHANNEL_ALIGN`` (8): cuDNN's tensor-core kernels need them so and
  pad a first layer's 1 or 3 channels (cuDNN Developer Guide, "Tensor Core Operations"). Besides
  the GEMM library's tiles, forward kernels have narrow ones (``NARROW_TILES``: 8 or 16 output
  channels wide, the mma instruction's n = 8) for passes with few output channels; the
  gradient kernels have none (``pass_tiles``: a first layer's 1 or 3 input channels ran 256 x 32
  and 256 x 64 data-gradient tiles on an H200).
* Winograd ``F(m x m, r x r)`` (``WINOGRAD_TILES``; stride 1, square 3x3 or 5x5 filters, no
  dilation; every pass): the input is cut into tiles of ``a = m + r - 1`` squared pixels, each
  transformed, multiplied elementwise and transformed back (Lavin & Gray, "Fast Algorithms for
  Convolutional Neural Networks", CVPR 2016): ``a^2`` GEMMs (cuDNN's ``WINOGRAD_NONFUSED``), so
  a^2 / m^2 multiplies per output pixel and channel pair instead of r^2 (F(2x2,3x3): 16/4 = 4
  for 9, 2.25x fewer; F(4x4,3x3): 36/16, 4x fewer; F(2x2,5x5): 36/4 = 9 for 25; F(5x5,5x5), the
  9x9 tiles cuDNN's kernels are named for on an H200: 81/25 for 25). Priced as one
  GEMM of the a^2 products stacked ((a^2 t) x k over c, t = n ceil(p/m) ceil(q/m) tiles; the
  passes as for implicit GEMM) moving the transformed tensors, plus the transforms' own passes
  over memory (input -> transformed input, transformed output -> output) at the memory rate.
* bwd_input as the GEMM over the output gradient and col2im (``col2im_gemm``; every stride):
  columns (n p q) x (r s c) = dy (n p q x k) @ w^T, every tap of every output pixel, then each
  column element added into the input pixel its tap reaches (cuDNN's BWD_DATA_ALGO_0 adds them
  in place with atomics): the GEMM at the pass's efficiency plus the columns read back and the
  input gradient written at the memory rate. Its tile runs along r s c, so it wins where the
  implicit GEMM's output is a few input channels wide (a first layer's 1 or 3, where a tile of
  32 columns holds 1/32 or 3/32 work) and loses elsewhere (r s times the columns' traffic).

* a 1x1 stride-1 pass as a plain GEMM (``gemm_1x1``; unpadded, undilated): the convolution is
  then exactly a matrix product (fwd x (n h w x c) @ w (c x k), bwd_input dy @ w^T, bwd_filter
  x^T @ dy), which a library can hand to its GEMM kernels (cuDNN 9 on Hopper runs most float16
  ones as cuBLASLt's ``nvjet`` kernels: kernel names, catalog/kernels/h200_conv_passes.csv),
  priced at the GEMM model's rate with the GEMM parameters, no convolution efficiency.

Which of these a GPU's library offers is the device's ``conv_algorithms`` (catalog), per dtype:
read off the kernels cuDNN ran where hetbed measured them (H200: Winograd only for float32
bwd_filter, never on tensor cores; ``gemm_1x1`` only in float16). A device without it offers
``DEFAULT_MENU`` (implicit GEMM, Winograd, col2im: what DeepBench's cuDNN 7 era GPUs were
fitted with; no kernel names were published with those timings).

A stride-1 bwd_input is a forward convolution (``dgrad_as_fwd``): the output gradient convolved
with the filter turned half round, c and k swapped, padded by r - 1 and s - 1, which cuDNN runs
with its forward kernels: its implicit GEMM is (n h w) x c over r s k (every tap, as the forward
kernel runs the zero padding) at ``fwd_efficiency``; a 1x1 one is exactly the product
dy (n h w x k) @ w^T, priced as the forward pass of the swapped shape. ``bwd_input_efficiency``
is left to the strided passes, whose taps reaching a pixel vary from pixel to pixel.

An implicit GEMM runs at its pass's fitted share of the GEMM model's rate: its time is divided
by ``fwd_efficiency``, ``bwd_input_efficiency`` or ``bwd_filter_efficiency`` (an implicit GEMM's
im2col address arithmetic, a strided bwd_input's scattered taps, bwd_filter's reduction over
the batch are not in the GEMM fit), and the convolutions' GEMMs saturate with the reduction
length by ``k_half`` (in place of the GEMM fit's). On CUDA cores an implicit GEMM's main loop
issues ``issue_overhead`` more instructions per FMA than a GEMM's (its taps' im2col addresses),
added to the GEMM parameters' own: they cost time only on a GPU whose FMAs alone fill the SM's
issue slots (``gk.issue_share`` 1, Hopper), not on P100 or V100 (1/2) while the sum stays
below 1 (tensor cores: 0, no issue limit). Winograd's stacked products are plain GEMMs
(cuDNN's nonfused Winograd calls a batched GEMM), priced at the GEMM model's rate. Fitted by bench/gpu_kernels.py to per-kernel convolution timings
(DeepBench's V100 and P100, hetbed's H200), stored in ``catalog/kernels/conv.toml``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from . import gpukernels as gk

try:  # Python >= 3.11
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10 needs the tomli backport
    import tomli as tomllib  # type: ignore[no-redef]

PARAMS_FILE = Path(__file__).resolve().parent / "catalog" / "kernels" / "conv.toml"
#: the passes, by the names the bench and the simulator use
PASSES = ("fwd", "bwd_input", "bwd_filter")
#: the op type that runs each pass
PASS_OF_OP = {"Conv2D": "fwd", "Conv2DBackpropInput": "bwd_input",
              "Conv2DBackpropFilter": "bwd_filter"}  # fmt: skip
#: the fitted parameters, in the order ``ConvParams.vector`` uses
FIELDS = (
    "fwd_efficiency",
    "bwd_input_efficiency",
    "bwd_filter_efficiency",
    "k_half",
    "issue_overhead",
)
#: channel counts of tensor-core convolutions are padded to multiples of this (cuDNN Developer
#: Guide, "Tensor Core Operations": channels a multiple of 8 for FP16 / TF32 NHWC kernels)
TC_CHANNEL_ALIGN = 8
#: output tiles forward convolution kernels have besides the GEMM library's: narrow ones for a
#: pass with few output channels (an mma instruction is 8 wide; cuDNN ran a 128 x 16 tile for a
#: 16-channel float16 forward pass on an H200). The data-gradient kernels have none: for a first
#: layer's 1 or 3 input channels cuDNN ran 256 x 32 and 256 x 64 tiles there (kernel names,
#: catalog/kernels/h200_conv_kernels.csv), so ``pass_tiles`` offers them to ``fwd`` only
NARROW_TILES = ((256, 8), (128, 16))
#: the most parts bwd_filter's reduction over the batch (n p q) is split into: as many as fill the
#: GPU (the split search stops at four blocks an SM; CUTLASS's conv2d wgrad takes any
#: ``split_k_slices``, cuDNN's wgrad kernels spread the batch over the grid)
WGRAD_MAX_SPLIT = 4096
#: Winograd output tiles m (F(m x m, r x r)) cuDNN runs, per filter size r (stride 1; for 5x5
#: filters its kernels are named ``...9x9_5x5``, tiles of 9 = m + 4: m = 5, on an H200 and H100)
WINOGRAD_TILES = {3: (2, 4), 5: (2, 5)}
#: dtypes whose convolutions the library may run with another dtype's kernels, the faster one
#: kept: TF32 only allows tensor cores for float32 data, and cuDNN's autotuner keeps a float32
#: CUDA-core kernel (SIMT GEMMs, direct engines) where it is faster: on an H200 the longest
#: kernel of 36 of the 315 TF32 passes timed was one of those (kernel names in
#: catalog/kernels/h200_conv_passes.csv)
ALSO_RUNS_AS = {"tensorfloat32": "float32"}
#: whether each pass's implicit GEMM reads A and B "MN-major" (an output dimension contiguous;
#: ``gk.transposition_seconds``) from NHWC data and a KRSC filter, the layouts cuDNN's kernels
#: name (``nhwckrsc``): fwd im2col(x) (n p q x r s c) and the filter, both contiguous along the
#: reduction over r s c; bwd_input dy along its reduction over k, the filter along c, an output
#: dimension; bwd_filter reduces over the batch's pixels, along which neither dy nor x is
#: contiguous
CONV_MN_MAJOR = {"fwd": (False, False), "bwd_input": (False, True), "bwd_filter": (True, True)}
#: the algorithm families, by the names of a device's ``conv_algorithms`` (catalog)
ALGORITHMS = ("implicit_gemm", "winograd", "gemm_col2im", "gemm_1x1")
#: what a device without ``conv_algorithms`` offers
DEFAULT_MENU = ("implicit_gemm", "winograd", "gemm_col2im")


def offered(menu: Sequence[str] | None, algorithm: str, pass_: str) -> bool:
    """Whether ``menu`` (entries ``name`` or ``name:pass``; None: ``DEFAULT_MENU``) offers
    ``algorithm`` for ``pass_``."""
    entries = DEFAULT_MENU if menu is None else menu
    return algorithm in entries or f"{algorithm}:{pass_}" in entries


@dataclass(frozen=True)
class ConvParams:
    """The five fitted numbers of one unit class (module docstring; ``issue_overhead`` fitted
    for CUDA cores only, 0 for tensor cores)."""

    fwd_efficiency: float
    bwd_input_efficiency: float
    bwd_filter_efficiency: float
    k_half: float
    issue_overhead: float = 0.0

    def vector(self) -> list[float]:
        return [getattr(self, f) for f in FIELDS]

    def efficiency(self, pass_: str) -> float:
        return getattr(self, f"{pass_}_efficiency")


class ConvShape(NamedTuple):
    """One convolution: NHWC input (n, h, w, c), filter (r, s, c, k), output (n, p, q, k)."""

    n: int
    h: int
    w: int
    c: int
    k: int
    r: int
    s: int
    p: int
    q: int
    stride: tuple[int, int] = (1, 1)
    dilated: bool = False


def shape_of(n: int, h: int, w: int, c: int, k: int, r: int, s: int, stride: tuple[int, int],
             pad: tuple[int, int]) -> ConvShape:  # fmt: skip
    """The ``ConvShape`` of a convolution with explicit padding ``pad`` (rows, columns a side)."""
    p = (h + 2 * pad[0] - r) // stride[0] + 1
    q = (w + 2 * pad[1] - s) // stride[1] + 1
    return ConvShape(n, h, w, c, k, r, s, p, q, (int(stride[0]), int(stride[1])))


def op_shape(op_type: str, attrs: dict, ins: Sequence[tuple], outs: Sequence[tuple]) -> ConvShape:
    """The ``ConvShape`` of a simulated convolution op (hetbed's NHWC ops) from its shapes."""
    if op_type == "Conv2D":
        x, f, y = ins[0], ins[1], outs[0]
    elif op_type == "Conv2DBackpropInput":
        x, f, y = outs[0], ins[1], ins[2]
    else:  # Conv2DBackpropFilter
        x, f, y = ins[0], outs[0], ins[2]
    st = tuple(attrs.get("strides") or (1, 1, 1, 1))
    dil = tuple(attrs.get("dilations") or (1, 1, 1, 1))
    return ConvShape(x[0], x[1], x[2], x[3], f[3], f[0], f[1], y[1], y[2],
                     (int(st[1]), int(st[2])), any(int(d) != 1 for d in dil))  # fmt: skip


def aligned(channels: int, unit: str) -> int:
    """Channels as a kernel on ``unit`` runs them: padded to ``TC_CHANNEL_ALIGN`` on tensor cores."""
    if unit == "tensor_cores":
        return -(-int(channels) // TC_CHANNEL_ALIGN) * TC_CHANNEL_ALIGN
    return int(channels)


def pass_tiles(pass_: str, unit: str) -> tuple[tuple[int, int], ...]:
    """The output tiles a pass's implicit GEMM chooses among on ``unit``: the GEMM library's, and
    for ``fwd`` the ``NARROW_TILES``."""
    return tuple(gk.TILES[unit]) + (NARROW_TILES if pass_ == "fwd" else ())


def conv_gemm(pass_: str, sh: ConvShape, unit: str = "cuda_cores") -> tuple[int, int, float]:
    """(m, n, k) of a pass's implicit GEMM (channels padded as ``unit`` runs them)."""
    c, k = aligned(sh.c, unit), aligned(sh.k, unit)
    if pass_ == "fwd":
        return sh.n * sh.p * sh.q, k, sh.r * sh.s * c
    if pass_ == "bwd_input":
        return sh.n * sh.h * sh.w, c, sh.r * sh.s * k * sh.p * sh.q / (sh.h * sh.w)
    return sh.r * sh.s * c, k, sh.n * sh.p * sh.q


def touched(sh: ConvShape) -> float:
    """The share of the input's pixels a convolution reads: where the stride is longer than the
    filter (a 1x1 filter at stride 2) the rows and columns between its taps are never read (an
    NHWC pixel's channels are one contiguous run, so the skipped ones are not fetched)."""
    return min(1.0, sh.r / sh.stride[0]) * min(1.0, sh.s / sh.stride[1])


def conv_bytes(sh: ConvShape, elem: float) -> float:
    """Bytes a pass reads and writes at least: the input's pixels it touches (``touched``),
    filter and output once each."""
    x = sh.n * sh.h * sh.w * sh.c * touched(sh)
    return elem * (x + sh.r * sh.s * sh.c * sh.k + sh.n * sh.p * sh.q * sh.k)


def winograd_multiplies(m: int, r: int) -> float:
    """Multiplies per output pixel and (input, output) channel pair of F(m x m, r x r):
    (m + r - 1)^2 / m^2 (direct convolution: r^2)."""
    return (m + r - 1) ** 2 / m**2


def winograd_applies(sh: ConvShape) -> tuple[int, ...]:
    """The Winograd output tiles m cuDNN offers for this shape (none: strided, dilated, or not a
    square 3x3 / 5x5 filter)."""
    if sh.stride != (1, 1) or sh.dilated or sh.r != sh.s:
        return ()
    return WINOGRAD_TILES.get(sh.r, ())


def winograd_gemm(pass_: str, sh: ConvShape, m: int) -> tuple[float, float, float, float, float]:
    """(rows, cols, reduction, transformed elements moved by the GEMMs, elements the transforms
    move) of F(m x m, r x r)'s a^2 products stacked as one GEMM."""
    a2 = (m + sh.r - 1) ** 2
    t = sh.n * math.ceil(sh.p / m) * math.ceil(sh.q / m)
    xt, yt, ut = a2 * t * sh.c, a2 * t * sh.k, a2 * sh.c * sh.k
    if pass_ == "fwd":
        dims = (a2 * t, sh.k, sh.c)
    elif pass_ == "bwd_input":
        dims = (a2 * t, sh.c, sh.k)
    else:
        dims = (a2 * sh.c, sh.k, t)
    x, y = sh.n * sh.h * sh.w * sh.c, sh.n * sh.p * sh.q * sh.k
    return (*dims, xt + yt + ut, x + xt + yt + y)


def conv_seconds(
    pass_: str,
    sh: ConvShape,
    elem: float,
    peak: float,
    bandwidth: float,
    sms: int,
    p: gk.GemmParams,
    c: ConvParams,
    unit: str = "cuda_cores",
    issue_share: float = 0.0,
    layout: gk.Layout | None = None,
    menu: Sequence[str] | None = None,
) -> tuple[float, str]:
    """(seconds, algorithm) of one pass on a GPU of ``sms`` SMs: the fastest that ``menu`` (the
    device's ``conv_algorithms`` for the dtype; None: ``DEFAULT_MENU``) offers of implicit GEMM,
    at the pass's fitted efficiency (a stride-1 bwd_input as the forward convolution it is,
    ``dgrad_as_fwd``; always offered), the Winograd tilings that apply, for bwd_input the GEMM
    over the output gradient with its column buffer folded back (``col2im_gemm``), and a 1x1
    pass as the plain GEMM it is (``gemm_1x1``), these three at the GEMM model's rate (module
    docstring)."""
    q = dataclasses.replace(p, k_half=c.k_half)
    # an implicit GEMM's main loop issues more instructions per FMA than a GEMM's (the im2col
    # addresses of its taps): they share the SM's issue slots where the FMAs alone fill them
    qi = dataclasses.replace(q, issue_overhead=p.issue_overhead + c.issue_overhead)
    tiles = pass_tiles(pass_, unit)
    m, n, k = conv_gemm(pass_, sh, unit)
    lay_w = layout  # the Winograd transforms write their operands as the products read them
    if layout is not None:
        lay_w = layout._replace(mn_major=(False, False))
        layout = layout._replace(mn_major=CONV_MN_MAJOR[pass_])
    eff = c.efficiency(pass_)
    if pass_ == "bwd_input" and dgrad_as_fwd(sh):
        # a forward convolution of the output gradient (k channels) with the filter turned half
        # round, c and k swapped, padded by r - 1, s - 1: every tap of every input pixel
        k, eff = sh.r * sh.s * aligned(sh.k, unit), c.fwd_efficiency
    # bwd_filter reduces over the whole batch: its kernels split that into as many parts as fill
    # the GPU (``WGRAD_MAX_SPLIT``), not the GEMM library's few
    most = WGRAD_MAX_SPLIT if pass_ == "bwd_filter" else gk.MAX_SPLIT_K
    best = gk.gemm_seconds(m, n, k, conv_bytes(sh, elem), peak, bandwidth, sms, qi, tiles,
                           issue_share, layout, most)  # fmt: skip
    best /= eff  # (implicit GEMM's address arithmetic, scattered taps ...)
    algo = "implicit_gemm"
    for wm in winograd_applies(sh) if offered(menu, "winograd", pass_) else ():
        rows, cols, red, moved, transformed = winograd_gemm(pass_, sh, wm)
        t = gk.gemm_seconds(rows, cols, red, elem * moved, peak, bandwidth, sms, q, tiles,
                            issue_share, lay_w, most)  # fmt: skip
        t += elem * transformed / (bandwidth * p.memory_efficiency) + 2.0 * p.fixed_s
        if t < best:
            best, algo = t, f"winograd_{wm}x{wm}"
    if pass_ == "bwd_input" and offered(menu, "gemm_col2im", pass_):
        rows, cols, red, moved, folded = col2im_gemm(sh, unit)
        lay = layout._replace(transpose_b=True, mn_major=None) if layout is not None else None
        t = gk.gemm_seconds(rows, cols, red, elem * moved, peak, bandwidth, sms, q, tiles,
                            issue_share, lay) / c.bwd_input_efficiency  # fmt: skip
        t += elem * folded / (bandwidth * p.memory_efficiency) + p.fixed_s
        if t < best:
            best, algo = t, "gemm_col2im"
    if offered(menu, "gemm_1x1", pass_) and pointwise(sh):
        (rows, cols, red), lay = plain_gemm(pass_, sh), lay_w and lay_w._replace(mn_major=None)
        if pass_ == "bwd_filter" and layout is not None:
            lay = layout._replace(transpose_a=True)  # x^T: x is (n h w) x c, rows along c
        elif pass_ == "bwd_input" and layout is not None:
            lay = layout._replace(transpose_b=True)  # w^T: the filter is c x k, rows along k
        t = gk.gemm_seconds(rows, cols, red, conv_bytes(sh, elem), peak, bandwidth, sms, p,
                            gk.TILES[unit], issue_share, lay)  # fmt: skip
        if t < best:
            best, algo = t, "gemm_1x1"
    return best, algo


def pass_seconds(
    pass_: str,
    sh: ConvShape,
    dtype: str,
    peaks: dict[str, float],
    bandwidth: float,
    sms: int,
    gemm: dict[str, gk.GemmParams],
    conv: dict[str, ConvParams],
    shares: dict[str, float] | None = None,
    tile_loads: str | None = None,
    menus: dict[str, Sequence[str]] | None = None,
    unit: str | None = None,
    clock_hz: float | None = None,
) -> tuple[float, str]:
    """(seconds, algorithm) of one pass in ``dtype``: ``conv_seconds`` on the dtype's unit class
    and, for a dtype in ``ALSO_RUNS_AS``, on the other dtype's too (its algorithm then named
    ``algo:dtype``), the faster kept. ``peaks`` maps dtypes to the device's matrix peak, ``gemm``
    and ``conv`` unit classes to their parameters (a unit class absent: not priced), ``shares``
    unit classes to ``gk.issue_share``, ``menus`` dtypes to ``conv_algorithms``; the operands lie
    as NHWC lays them out (``gk.layout_of``) on a device whose catalog says ``tile_loads``.
    ``unit``: the unit class ``dtype`` runs on (default ``gk.unit_class``; "cuda_cores" on a
    device without tensor cores for it); ``clock_hz`` prices the kernels' shared memory
    (``gk.transposition_seconds``)."""
    best, algo = math.inf, ""
    for i, dt in enumerate((dtype, ALSO_RUNS_AS.get(dtype))):
        if dt is None:
            continue
        u = (unit or gk.unit_class(dt)) if i == 0 else gk.unit_class(dt)
        if dt not in peaks or u not in gemm or u not in conv:
            continue
        el = gk.ELEM_BYTES.get(dt, 4)
        t, a = conv_seconds(pass_, sh, el, peaks[dt], bandwidth, sms, gemm[u], conv[u], u,
                            (shares or {}).get(u, 0.0), gk.layout_of(u, el, tile_loads=tile_loads, clock_hz=clock_hz),
                            (menus or {}).get(dt))  # fmt: skip
        if t < best:
            best, algo = t, a if i == 0 else f"{a}:{dt}"
    return best, algo


def pointwise(sh: ConvShape) -> bool:
    """Whether a convolution is a matrix product: a 1x1 filter at stride 1, unpadded, undilated
    (every output pixel the input pixel under it)."""
    return (sh.r, sh.s, sh.stride, sh.p, sh.q) == (1, 1, (1, 1), sh.h, sh.w) and not sh.dilated


def plain_gemm(pass_: str, sh: ConvShape) -> tuple[int, int, int]:
    """(rows, cols, reduction) of a ``pointwise`` pass as the matrix product it is: fwd
    x (n h w x c) @ w (c x k); bwd_input dy (n h w x k) @ w^T; bwd_filter x^T @ dy (c x k over
    n h w)."""
    pixels = sh.n * sh.p * sh.q
    if pass_ == "fwd":
        return pixels, sh.k, sh.c
    if pass_ == "bwd_input":
        return pixels, sh.c, sh.k
    return sh.c, sh.k, pixels


def dgrad_as_fwd(sh: ConvShape) -> bool:
    """Whether a bwd_input pass is a forward convolution: at stride 1 (undilated) the gradient to
    an input pixel is the output gradient's r x s neighbourhood times the filter turned half
    round, channels swapped, so cuDNN runs its forward kernels on it (every tap, at the forward
    pass's efficiency; a 1x1 one is the product dy (n p q x k) @ w^T, the forward GEMM's shape
    with c and k swapped). Strided, the taps that reach a pixel vary from pixel to pixel."""
    return sh.stride == (1, 1) and not sh.dilated


def col2im_gemm(sh: ConvShape, unit: str = "cuda_cores") -> tuple[int, int, int, float, float]:
    """(rows, cols, reduction, elements the GEMM moves, elements col2im moves) of bwd_input as
    the GEMM of the output gradient with the filter: columns (n p q) x (r s c) = dy (n p q x k)
    @ w^T (k x r s c), every tap of every output pixel, then folded back (col2im: each column
    element added to the input pixel its tap reaches; cuDNN's BWD_DATA_ALGO_0 adds them in place
    with atomics). The GEMM reads dy and w and writes the columns; col2im reads the columns and
    writes the input gradient. Its tile runs along r s c, so a pass with one or three input
    channels fills its tiles where the implicit GEMM's c-wide output does not."""
    c, k = aligned(sh.c, unit), aligned(sh.k, unit)
    rows, cols = sh.n * sh.p * sh.q, sh.r * sh.s * c
    columns = rows * cols
    moved = rows * k + cols * k + columns
    return rows, cols, k, moved, columns + sh.n * sh.h * sh.w * sh.c


def load_params(path: str | Path = PARAMS_FILE) -> dict[str, ConvParams]:
    """The fitted parameters per unit class, from ``conv.toml`` (each value sourced there)."""
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    return {u: ConvParams(*(float(doc[u][f]["value"]) for f in FIELDS if f in doc[u]))
            for u in ("cuda_cores", "tensor_cores")}  # fmt: skip


#: bounds of the fit (``FIELDS`` order) and where it starts
LOWER, UPPER = (0.05, 0.05, 0.05, 1.0, 0.0), (1.5, 1.5, 1.5, 1e5, 4.0)
START = ConvParams(0.7, 0.7, 0.7, 64.0, 0.0)


def fit_params(rows: Sequence[tuple], devices: dict[str, dict[str, Any]],
               gemm: dict[str, gk.GemmParams], floors: dict[str, float], unit: str,
               fixed: dict[str, ConvParams] | None = None) -> ConvParams:  # fmt: skip
    """Least-squares fit (of log time; soft-L1 loss, as the GEMM fit) of one unit class's
    ``ConvParams`` to ``rows`` of (device, dtype, pass, ConvShape, elem bytes, seconds,
    harness), the GEMM parameters ``gemm`` (per unit class), the other unit classes' ``fixed``
    convolution parameters (a TF32 pass may run on CUDA cores: ``ALSO_RUNS_AS``) and the
    harnesses' per-call ``floors`` held fixed (fitted to GEMMs). ``devices[name]``: ``peak``
    (per dtype), ``bandwidth``, ``sms``, ``fp32_lanes``, ``issue``, ``tile_loads``,
    ``conv_algorithms``. Needs scipy."""
    from scipy.optimize import least_squares

    fit_issue = unit == "cuda_cores"  # (tensor-core convolutions have no issue limit: 0)

    def from_x(x: Sequence[float]) -> ConvParams:
        return ConvParams(x[0], x[1], x[2], math.exp(x[3]), x[4] if fit_issue else 0.0)

    def resid(x: Sequence[float]) -> list[float]:
        cps = {**(fixed or {}), unit: from_x(x)}
        return [math.log(predict(r, devices, gemm, cps, floors) / r[5]) for r in rows]

    lb = [*LOWER[:3], math.log(LOWER[3])] + ([LOWER[4]] if fit_issue else [])
    ub = [*UPPER[:3], math.log(UPPER[3])] + ([UPPER[4]] if fit_issue else [])
    x0 = [*START.vector()[:3], math.log(START.k_half)] + (
        [START.issue_overhead] if fit_issue else []
    )
    res = least_squares(resid, x0, bounds=(lb, ub), loss=gk.LOSS, f_scale=gk.LOSS_SCALE)
    return from_x(res.x)


def predict(row: tuple, devices: dict, gemm: dict[str, gk.GemmParams],
            cps: dict[str, ConvParams], floors: dict[str, float]) -> float:  # fmt: skip
    """What a timing loop measures for one fit row (``fit_params``): the pass's time
    (``pass_seconds``), or the harness's per-call floor (``gk.observed_seconds``; a harness with
    no floor: none)."""
    d, dtype, pass_, sh, _, _, h = row[:7]
    dv = devices[d]
    shares = {u: gk.issue_share(u, dv.get("fp32_lanes"), dv["sms"], dv.get("issue"))
              for u in gemm}  # fmt: skip
    t, _ = pass_seconds(pass_, sh, dtype, dv["peak"], dv["bandwidth"], dv["sms"], gemm, cps,
                        shares, dv.get("tile_loads"), dict(dv.get("conv_algorithms") or ()),
                        clock_hz=dv.get("clock_hz"))  # fmt: skip
    return gk.observed_seconds(t, floors.get(h, 0.0)) if h is not None else t
