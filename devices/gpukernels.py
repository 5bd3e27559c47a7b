"""How long a GEMM-shaped kernel takes on a GPU: tiles, waves, split-K, issue and memory limits.

A matrix product (m x k) @ (k x n), and a convolution as the implicit GEMM that cuDNN runs, is
cut into output tiles of ``tm x tn`` from the library's menu (``TILES``: tensor-core kernels run
larger tiles, up to 256 x 128, than the CUDA-core ones); each tile is one thread block on one
multiprocessor (SM). The reduction may be split (split-K) into ``split`` parts of at least
``MIN_SPLIT_K`` (at most ``MAX_SPLIT_K`` parts); ``tiles x split`` blocks on ``sms`` SMs run in
``ceil(blocks / sms)`` waves, the last one partly idle. The library picks the tile and the
split that finish first, so the model does. For one choice:

* compute: ``flops / (peak' x efficiency x fill x area/(area + tile_half) x kk/(kk + k_half))``
  where ``fill`` is the share of the waves' block slots and of the tiles' area that holds work,
  ``area = tm x tn`` and ``kk = k / split`` (a block's rate saturates with its tile's area and
  its reduction length). ``peak'`` is the catalog's peak, capped for CUDA-core products by the
  SM's instruction issue: its FMAs take ``share`` of the issue slots at the peak
  (``issue_share``: FP32 lanes per SM / (32 x the warp instructions it issues a clock, the
  catalog's ``warp_issue_per_clock``): 1 on Hopper, 1/2 on P100 and V100), and each FMA brings ``issue_overhead`` other instructions (loads, addresses), so
  ``peak' = peak x min(1, 1 / (share x (1 + issue_overhead)))``.
  On Hopper (``Layout.smem_rate``), a TF32 block whose operand is stored with an output
  dimension contiguous first transposes its tiles in shared memory
  (``transposition_seconds``), added to each wave.
* memory: ``bytes / min(bandwidth x memory_efficiency, min(blocks, sms) x block_bandwidth)``,
  the bytes being what the caller counts moved plus, when split, the float32 partial sums each
  part writes and the reduction pass reads back (``2 x split x m x n x 4``); the second term is
  the blocks in flight (one an SM), each pulling at most ``block_bandwidth``. Where the caller
  gives the operands' ``Layout`` (TensorFlow's row-major ``transpose_a`` / ``transpose_b``),
  each operand's bytes take longer the shorter the contiguous runs a block reads them in
  (``read_factor``): a run of ``r`` bytes reaches ``r / (r + run_half)`` of the rate. A block
  reads an operand along its contiguous dimension: along an output dimension (A transposed,
  B not, C) a tile edge (tm or tn elements), along the reduction (A not transposed, B
  transposed) one step of its main loop (``K_TILE_BYTES``: 32 B on CUDA cores, 64 B on tensor
  cores); where a row is shorter than that, the rows the tile covers abut and the run is theirs.
  So a skinny product whose large operand is stored with the reduction contiguous (x @ W^T with
  W (n x k)) is slower than with W (k x n): DeepBench's TN against NN.
* the two overlap partly: ``(compute^q + memory^q)^(1/q)`` with ``q = overlap_q`` (1: their
  sum; infinity: the larger).

The kernel then takes that plus ``fixed_s``; a split product pays ``fixed_s`` twice, its
reduction being one more kernel launch: the second pass that sums the parts (cuBLAS's
``splitKreduce_kernel``) or the zeroing of a buffer the parts add into (a ``Memset``; kernel
names in catalog/kernels/h200_gemm_kernels.csv). A timing loop of back-to-back calls measures
``max(kernel, floor)`` per call (``observed_seconds``), the floor being the host's time to issue
one call; the fit prices it per timing harness (bench/gpu_kernels.py), the simulator adds each
device's launch cost instead. The nine parameters are per unit class ("cuda_cores": float32
and float64 products on the vector units; "tensor_cores": float16, bfloat16 and TF32 products,
which have no issue limit: ``issue_overhead`` 0), read from ``catalog/kernels/gemm.toml`` and
fitted by ``bench/gpu_kernels.py`` to per-kernel timings (DeepBench's published V100 and P100
results, hetbed's own H200 measurements); a device supplies its peak, memory rate (the catalog's
measured streaming rate where it has one, ``HardwareSpec.memory_rate``), SM count and
FP32 lanes and issue width from its catalog entry.

Parameters (``GemmParams``; fitted by robust least squares on log time, ``fit_params``):

====================  =====  ==========================================================
efficiency            1      fraction of the (issue-capped) peak a large block reaches
k_half                elems  reduction length per block at which a block runs at half rate
tile_half             elems  output-tile area (tm x tn) at which a block runs at half rate
memory_efficiency     1      fraction of the memory rate a streaming product reaches (held at 1
                             by the fit: the rate is the device's measured streaming rate)
fixed_s               s      the kernel's fixed time on the GPU (ramp-up, tail)
overlap_q             1      exponent of the compute/memory overlap (1 sum ... inf max)
issue_overhead        1      other instructions per FMA sharing the SM's issue (CUDA cores)
block_bandwidth       B/s    memory rate one block in flight on one SM can pull
run_half              B      contiguous run at which a read reaches half the memory rate
====================  =====  ==========================================================
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

try:  # Python >= 3.11
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10 needs the tomli backport
    import tomli as tomllib  # type: ignore[no-redef]

#: output tiles (rows x cols of the output per thread block) a GEMM library chooses among, per
#: unit class: tensor-core kernels run larger tiles than the CUDA-core ones
TILES = {
    "cuda_cores": ((128, 128), (128, 64), (64, 64), (64, 32), (32, 32)),
    "tensor_cores": ((256, 128), (128, 256), (128, 128), (128, 64), (64, 64), (64, 32)),
}
#: the shortest reduction a split-K part is given
MIN_SPLIT_K = 256
#: the most parts a reduction is split into
MAX_SPLIT_K = 16
#: bytes of one partial-sum element a split-K part writes and the reduction pass reads (float32)
PARTIAL_BYTES = 4
PARAMS_FILE = Path(__file__).resolve().parent / "catalog" / "kernels" / "gemm.toml"
#: the parameters, in the order ``GemmParams.vector`` and ``from_vector`` use
FIELDS = ("efficiency", "k_half", "tile_half", "memory_efficiency", "fixed_s", "overlap_q",
          "issue_overhead", "block_bandwidth", "run_half")  # fmt: skip
#: bytes of the reduction a thread block reads per step of its main loop (its tile's depth):
#: CUTLASS's default threadblock shapes, 128 x 128 x 8 on CUDA cores (SIMT: 32 B of float32) and
#: 128 x 256 x 32 on Volta and Turing tensor cores (Sm70, Sm75: 64 B of float16)
#: (github.com/NVIDIA/cutlass, include/cutlass/gemm/device/default_gemm_configuration.h; its
#: Sm80 default is x 64, 128 B, but one value serves a unit class here: V100's, the generation
#: whose DeepBench times show layouts; Hopper's bulk tile copies have no runs); an operand
#: stored with the reduction contiguous is read in runs this long
K_TILE_BYTES = {"cuda_cores": 32, "tensor_cores": 64}
#: bytes a stored row must be a multiple of for the TMA's bulk tile copies: a tensor map's global
#: strides are multiples of 16 bytes (CUDA driver API, cuTensorMapEncodeTiled)
BULK_ALIGN = 16
#: bytes an SM's shared memory moves a clock: 32 banks of 32 bits each (NVIDIA CUDA C++
#: Programming Guide, shared memory of compute capabilities 5.x to 9.0)
SMEM_BYTES_PER_CLOCK = 128
#: dtypes whose products run on tensor cores where the device has them
TENSOR_CORE_DTYPES = {"float16", "bfloat16", "tensorfloat32", "float8"}


@dataclass(frozen=True)
class GemmParams:
    """The nine numbers of one unit class (see the module docstring)."""

    efficiency: float
    k_half: float
    tile_half: float
    memory_efficiency: float
    fixed_s: float
    overlap_q: float = math.inf
    issue_overhead: float = 0.0
    block_bandwidth: float = math.inf
    run_half: float = 0.0

    def vector(self) -> list[float]:
        return [getattr(self, f) for f in FIELDS]

    @classmethod
    def from_vector(cls, v: Sequence[float]) -> GemmParams:
        return cls(*(float(x) for x in v))


def gemm_seconds(
    m: int,
    n: int,
    k: int,
    moved_bytes: float,
    peak: float,
    bandwidth: float,
    sms: int,
    p: GemmParams,
    tiles: Sequence[tuple[int, int]] = TILES["cuda_cores"],
    issue_share: float = 0.0,
    layout: Layout | None = None,
    max_split: int = MAX_SPLIT_K,
    unaligned_peak: float | None = None,
) -> float:
    """Seconds of an (m x k) @ (k x n) product on a GPU of ``sms`` SMs, from the kernel's start
    to its end on the GPU (see the module docstring); ``moved_bytes`` is what it reads and writes
    in device memory, ``tiles`` the library's tile menu (``TILES[unit_class(dtype)]``),
    ``layout`` how the operands lie in memory (None: every byte read at the full rate),
    ``max_split`` the most parts the library splits the reduction into; ``unaligned_peak``
    (the catalog's ``unaligned_matrix_peak_flops``) replaces ``peak`` where the layout's bulk
    tile copies cannot load the operands (``bulk_aligned`` false): the library then runs other
    kernels, which reach less."""
    m, n, k = (
        max(int(m), 1),
        max(int(n), 1),
        max(float(k), 1.0),
    )  # (k: an average, may be fractional)
    flops = 2.0 * m * n * k
    if unaligned_peak is not None and layout is not None and layout.bulk:
        if not bulk_aligned(m, n, k, layout):
            peak = min(peak, unaligned_peak)
            # (the previous generation's kernels: no wgmma, no transposition in shared memory)
            layout = layout._replace(smem_rate=0.0)
    if issue_share > 0.0:  # the FMAs and the rest of the loop share the SM's issue slots
        peak *= min(1.0, 1.0 / (issue_share * (1.0 + p.issue_overhead)))
    best = math.inf
    for tm, tn in tiles:
        t = tile_seconds(m, n, k, flops, moved_bytes, peak, bandwidth, sms, p, tm, tn, layout,
                         max_split)  # fmt: skip
        best = min(best, t)
    return best + p.fixed_s


def tile_seconds(
    m: int, n: int, k: float, flops: float, moved: float, peak: float, bandwidth: float,
    sms: int, p: GemmParams, tm: int, tn: int, layout: Layout | None = None,
    max_split: int = MAX_SPLIT_K,
) -> float:  # fmt: skip
    """Time of the product in ``tm x tn`` tiles, without the kernel's fixed cost (a split's second
    launch included), at the best split of
    the reduction (module docstring)."""
    tiles = math.ceil(m / tm) * math.ceil(n / tn)
    most = max(1, min(max_split, int(k // MIN_SPLIT_K)))
    best = math.inf
    for split in range(1, most + 1):
        blocks = tiles * split
        waves = math.ceil(blocks / sms)
        fill = blocks / (waves * sms) * (m * n) / (tiles * tm * tn)
        kk = k / split
        rate = p.efficiency * fill * (tm * tn) / (tm * tn + p.tile_half) * kk / (kk + p.k_half)
        compute = flops / (peak * rate) + waves * transposition_seconds(kk, tm, tn, layout)
        traffic = moved
        if layout is not None and p.run_half > 0.0:  # short contiguous runs read slower
            traffic *= read_factor(m, n, k, tm, tn, layout, p.run_half)
        if split > 1:  # each part writes its partial sums, the reduction pass reads them back
            part = PARTIAL_BYTES * (tn if n > tn else n * min(tm, m))
            slow = 1.0 + p.run_half / part if layout is not None else 1.0
            traffic += 2.0 * split * m * n * PARTIAL_BYTES * slow
        # a split reduction launches one kernel more: its second pass (cuBLAS's
        # splitKreduce_kernel), or the zeroing of a buffer its parts add into (a Memset)
        launches = p.fixed_s if split > 1 else 0.0
        # the blocks in flight (one an SM) can pull only so much: ``block_bandwidth`` each
        memory = traffic / min(
            bandwidth * p.memory_efficiency, min(blocks, sms) * p.block_bandwidth
        )
        best = min(best, overlapped(compute, memory, p.overlap_q) + launches)
        if blocks >= sms * 4:  # more splits cannot fill the GPU better than this
            break
    return best


class Layout(NamedTuple):
    """How a product's operands lie in memory, in TensorFlow's (row-major) terms: ``a`` is
    (m x k), or (k x m) read transposed (``transpose_a``), ``b`` (k x n), or (n x k)
    (``transpose_b``); ``elem_bytes`` of each element; a block reads its tile of an operand
    stored with the reduction contiguous in runs of ``k_tile_bytes`` (``K_TILE_BYTES``);
    ``bulk``: the kernel loads whole tiles by bulk copies (Hopper's TMA; ``read_factor``);
    ``smem_rate``: bytes a second one SM's shared memory moves (0: not priced); ``mn_major``:
    whether A and B lie with an output dimension contiguous rather than the reduction (None:
    as ``transpose_a`` / ``transpose_b`` say; a convolution's implicit GEMM sets its own:
    ``transposition_seconds``)."""

    elem_bytes: float
    transpose_a: bool = False
    transpose_b: bool = False
    k_tile_bytes: float = K_TILE_BYTES["cuda_cores"]
    bulk: bool = False
    smem_rate: float = 0.0
    mn_major: tuple[bool, bool] | None = None


def layout_of(unit: str, elem_bytes: float, transpose_a: bool = False,
              transpose_b: bool = False, tile_loads: str | None = None,
              clock_hz: float | None = None) -> Layout:  # fmt: skip
    """The ``Layout`` of a product on ``unit`` ("cuda_cores" or "tensor_cores") of a device
    whose catalog entry says ``tile_loads`` ("tma": its tensor-core kernels copy whole tiles)
    and ``clock_hz`` (its shared memory's rate, ``SMEM_BYTES_PER_CLOCK`` a clock, is priced
    where the kernels transpose operands in it: ``transposition_seconds``)."""
    bulk = unit == "tensor_cores" and tile_loads == "tma"
    smem = SMEM_BYTES_PER_CLOCK * float(clock_hz) if bulk and clock_hz else 0.0
    return Layout(float(elem_bytes), bool(transpose_a), bool(transpose_b), K_TILE_BYTES[unit],
                  bulk, smem)  # fmt: skip


def transposition_seconds(kk: float, tm: int, tn: int, lay: Layout | None) -> float:
    """Seconds one block spends transposing its operand tiles in shared memory over a
    reduction of ``kk``: Hopper's tensor-core instruction (wgmma) reads an operand stored with an
    output dimension contiguous ("MN-major": A transposed, B not, in TensorFlow's row-major
    terms) from shared memory only for 16-bit types (PTX ISA, wgmma: the transpose of A and B
    is supported for .f16 / .bf16 alone); a TF32 (or 8-bit) kernel first rewrites such a tile
    K-major, reading and writing each of its elements once in shared memory at ``smem_rate``:
    ``2 x elem x kk x (tm [A MN-major] + tn [B MN-major]) / smem_rate``, in the block's
    critical path. 0 where the layout prices no shared memory, or for 16-bit elements."""
    if lay is None or lay.smem_rate <= 0.0 or lay.elem_bytes == 2:
        return 0.0
    a_mn, b_mn = (
        lay.mn_major if lay.mn_major is not None else (lay.transpose_a, not lay.transpose_b)
    )
    if not (a_mn or b_mn):
        return 0.0
    return 2.0 * lay.elem_bytes * kk * (tm * a_mn + tn * b_mn) / lay.smem_rate


def run_bytes(extent: float, edge: float, other_extent: float, other_edge: float,
              elem: float) -> float:  # fmt: skip
    """The contiguous bytes a block reads at once from an operand whose contiguous dimension is
    ``extent`` elements long and its tile's edge along it ``edge`` (the other dimension: its
    extent and edge): ``edge`` elements, or, where one row is no longer than the edge, the rows
    the tile covers, which abut in memory."""
    if extent > edge:
        return elem * edge
    return elem * extent * min(other_edge, other_extent)


def bulk_aligned(m: int, n: int, k: float, lay: Layout) -> bool:
    """Whether every stored row of the product's operands and output is a multiple of
    ``BULK_ALIGN`` bytes, as bulk tile copies (the TMA) need: A's rows are k long (m when
    transposed), B's n (k when transposed), C's n. (On an H200, float16, bfloat16 and TF32
    products with n or k two short of such rows ran the previous generation's kernels at about
    a third of the rate, with m two short at the full rate: catalog/kernels/h200_gemm_unaligned.csv.)"""
    rows = (m if lay.transpose_a else k, k if lay.transpose_b else n, n)
    return all((r * lay.elem_bytes) % BULK_ALIGN == 0 for r in rows)


def read_factor(m: int, n: int, k: float, tm: int, tn: int, lay: Layout, run_half: float) -> float:
    """How much longer the operands' bytes take than at the full rate: each of A (m x k), B
    (k x n) and the output C (m x n) is read (written) in contiguous runs of ``run_bytes`` along
    its contiguous dimension (A: k, or m when transposed; B: n, or k when transposed; C: n), and
    a run of ``r`` bytes reaches ``r / (r + run_half)`` of the rate: the bytes-weighted mean of
    ``1 + run_half / r``. A kernel that copies whole tiles in bulk (``lay.bulk``: Hopper's Tensor
    Memory Accelerator) reads at the full rate (1), where every stored row is a multiple of
    ``BULK_ALIGN`` bytes, as the TMA needs (else the library falls back to thread loads)."""
    el, kt = lay.elem_bytes, max(lay.k_tile_bytes / lay.elem_bytes, 1.0)
    if lay.bulk and bulk_aligned(m, n, k, lay):
        return 1.0
    if lay.transpose_a:  # stored (k x m): runs along m
        ra = run_bytes(m, tm, k, kt, el)
    else:  # stored (m x k): runs along the reduction
        ra = run_bytes(k, kt, m, tm, el)
    if lay.transpose_b:  # stored (n x k): runs along the reduction
        rb = run_bytes(k, kt, n, tn, el)
    else:  # stored (k x n): runs along n
        rb = run_bytes(n, tn, k, kt, el)
    rc = run_bytes(n, tn, m, tm, el)
    sizes = (m * k, k * n, m * n)
    slow = sum(s * (1.0 + run_half / r) for s, r in zip(sizes, (ra, rb, rc)))
    return slow / sum(sizes)


def overlapped(compute: float, memory: float, q: float) -> float:
    """Compute and memory time of one kernel, partly overlapped: ``(c^q + m^q)^(1/q)`` (``q`` =
    1: no overlap, their sum; ``q`` -> infinity: full overlap, the larger)."""
    if math.isinf(q):
        return max(compute, memory)
    hi = max(compute, memory)
    if hi <= 0.0:
        return 0.0
    return hi * ((compute / hi) ** q + (memory / hi) ** q) ** (1.0 / q)


def observed_seconds(kernel_s: float, floor_s: float) -> float:
    """What a timing loop of back-to-back calls measures per call: the kernel's time, or the
    host's time to issue one call (``floor_s``) where that is longer (the GPU then idles)."""
    return max(kernel_s, floor_s)


def issue_share(unit: str, fp32_lanes: int | None, sms: int | None, issue: int | None) -> float:
    """The share of an SM's instruction issue slots its FMAs take at the CUDA-core peak: lanes
    per SM / (32 threads a warp x ``issue`` warp instructions the SM issues a clock, the catalog's
    ``warp_issue_per_clock``); 0 (no issue limit priced) for tensor-core products, whose one
    instruction does a whole matrix block, or where the catalog lacks a number."""
    if unit != "cuda_cores" or not fp32_lanes or not sms or not issue:
        return 0.0
    return fp32_lanes / sms / (32.0 * issue)


def unit_class(dtype: str) -> str:
    """ "tensor_cores" for the dtypes tensor cores compute, else "cuda_cores"."""
    return "tensor_cores" if dtype in TENSOR_CORE_DTYPES else "cuda_cores"


def gemm_dims(op_type: str, attrs: dict, ins: Sequence[tuple], outs: Sequence[tuple]) -> tuple:
    """(m, n, k) of the GEMM an op runs (a convolution: its implicit GEMM), or () if none."""
    if op_type == "MatMul":
        a, b = ins
        m, k = (a[1], a[0]) if attrs.get("transpose_a") else (a[0], a[1])
        n = b[0] if attrs.get("transpose_b") else b[1]
        return m, n, k
    if op_type == "BatchMatMul":
        a, b = ins
        m = math.prod(a[:-2]) * (a[-1] if attrs.get("adj_x") else a[-2])
        k = a[-2] if attrs.get("adj_x") else a[-1]
        n = b[-2] if attrs.get("adj_y") else b[-1]
        return m, n, k
    if op_type == "Conv2D":  # (N*P*Q) x (R*S*C) @ (R*S*C) x K
        (kh, kw, ci, co), y = ins[1], outs[0]
        return y[0] * y[1] * y[2], co, kh * kw * ci
    if op_type == "Conv2DBackpropInput":  # (N*H*W) x (R*S*K*P*Q/(H*W)) @ (...) x C
        # an input pixel is reached by R*S*P*Q/(H*W) taps on average (all R*S at stride 1, SAME)
        x, (kh, kw, ci, co), dy = outs[0], ins[1], ins[2]
        return x[0] * x[1] * x[2], ci, kh * kw * co * dy[1] * dy[2] / (x[1] * x[2])
    if op_type == "Conv2DBackpropFilter":  # (R*S*C) x (N*P*Q) @ (N*P*Q) x K
        (kh, kw, ci, co), dy = outs[0], ins[2]
        return kh * kw * ci, co, dy[0] * dy[1] * dy[2]
    return ()


#: bytes of one element of the dtypes the model prices
ELEM_BYTES = {"float64": 8, "float32": 4, "tensorfloat32": 4, "float16": 2, "bfloat16": 2,
              "float8": 1}  # fmt: skip


def op_layout(op_type: str, attrs: dict, unit: str, dtype: str,
              tile_loads: str | None = None, clock_hz: float | None = None) -> Layout:  # fmt: skip
    """The ``Layout`` of the GEMM an op runs: a MatMul's ``transpose_a`` / ``transpose_b``, a
    BatchMatMul's ``adj_x`` / ``adj_y``; a convolution's implicit GEMM as NHWC lays it out (rows
    of im2col contiguous along the reduction, the filter along the output channels), on a
    device whose catalog entry says ``tile_loads``."""
    ta = tb = False
    if op_type == "MatMul":
        ta, tb = bool(attrs.get("transpose_a")), bool(attrs.get("transpose_b"))
    elif op_type == "BatchMatMul":
        ta, tb = bool(attrs.get("adj_x")), bool(attrs.get("adj_y"))
    return layout_of(unit, ELEM_BYTES.get(dtype, 4), ta, tb, tile_loads, clock_hz)


def load_params(path: str | Path = PARAMS_FILE) -> dict[str, GemmParams]:
    """The fitted parameters per unit class, from ``gemm.toml`` (each value sourced there)."""
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    out = {}
    for unit in ("cuda_cores", "tensor_cores"):
        t = doc[unit]
        out[unit] = GemmParams(*(float(t[f]["value"]) for f in FIELDS if f in t))
    return out


#: bounds of the fit (the parameters in ``FIELDS`` order)
LOWER = (0.02, 1.0, 1.0, 0.02, 1e-8, 1.0, 0.0, 1e9, 0.1)
UPPER = (1.0, 1e5, 1e6, 1.0, 1e-4, 64.0, 2.0, 1e12, 1e4)
FLOOR_BOUNDS = (1e-7, 1e-4)
#: the fit's loss on log-time residuals: robust (soft L1: quadratic below ``LOSS_SCALE``, linear
#: beyond), so that a few shapes a library runs pathologically slowly do not bend the rest
LOSS, LOSS_SCALE = "soft_l1", 0.2
#: where the fit starts: one with the memory rate set by the bandwidth, one by the blocks in flight
STARTS = (
    GemmParams(0.8, 64.0, 1000.0, 0.8, 3e-6, 4.0, 0.2, 3e10, 32.0),
    GemmParams(0.8, 100.0, 500.0, 0.9, 2e-6, 4.0, 0.3, 1.5e10, 8.0),
)


def fit_params(
    rows: Sequence[tuple],
    devices: dict[str, dict[str, Any]],
    starts: Sequence[GemmParams] | None = None,
    unit: str = "cuda_cores",
    run_half: float | None = None,
) -> tuple[GemmParams, dict[str, float]]:
    """Least-squares fit (of log time) of one unit class's parameters to ``rows`` of
    (device, dtype, m, n, k, moved_bytes, seconds, harness[, layout]) (``layout``: a ``Layout``,
    or None); ``devices[name]`` gives ``peak``
    (per dtype), ``bandwidth`` and ``sms`` (and may give ``unaligned``: per dtype, the
    ``unaligned_peak`` of ``gemm_seconds``). ``harness`` names the timing loop a row was measured
    with (None: the kernel's own time); each harness's per-call floor (``observed_seconds``) is
    fitted with the parameters. Each of ``starts`` (default ``STARTS``) seeds a fit; the one of
    least squared error wins. ``run_half``, where given, is held at that value (how the memory
    system answers short runs is not the unit class's: the bench holds a unit class's at the
    CUDA-core fit's where too few of its rows are read by threads to show it, e.g. tensor-core
    rows of Hopper alone, which bulk copies read; ``bench/gpu_kernels.MIN_THREAD_READ_ROWS``).
    Returns the parameters and the floors. Needs scipy."""
    from scipy.optimize import least_squares

    harnesses = sorted({r[7] for r in rows if len(r) > 7 and r[7] is not None})
    tiles = TILES[unit]

    fit_issue = unit == "cuda_cores"  # (tensor-core products have no issue limit)
    hold_rh = run_half is not None
    npar = (8 if fit_issue else 7) - hold_rh

    # memory_efficiency is held at 1: each device's memory rate is its measured streaming rate
    # (the catalog's stream_bandwidth_bytes_per_s), so the fit cannot trade it against the
    # blocks' rate (block_bandwidth x SMs), which it could not tell apart on one GPU
    def to_x(p: GemmParams) -> list[float]:
        e, kh, th, _me, fx, q, r, bb, rh = p.vector()
        x = [e, math.log(kh), math.log(th), math.log(fx), math.log(q), math.log(bb)]
        x += [] if hold_rh else [math.log(rh)]
        return x + [r] if fit_issue else x

    def from_x(x: Sequence[float]) -> GemmParams:
        e, kh, th, fx, q, bb = x[:6]
        rh = run_half if hold_rh else math.exp(x[6])
        r = x[npar - 1] if fit_issue else 0.0
        return GemmParams(e, math.exp(kh), math.exp(th), 1.0, math.exp(fx), math.exp(q), r,
                          math.exp(bb), rh)  # fmt: skip

    def resid(x: Sequence[float]) -> list[float]:
        p = from_x(x)
        floors = {h: math.exp(v) for h, v in zip(harnesses, x[npar:])}
        out = []
        for r in rows:
            d, dt, m, n, k, b, s = r[:7]
            dv = devices[d]
            share = issue_share(unit, dv.get("fp32_lanes"), dv["sms"], dv.get("issue"))
            lay = r[8] if len(r) > 8 else None
            t = gemm_seconds(m, n, k, b, dv["peak"][dt], dv["bandwidth"], dv["sms"], p, tiles,
                             share, lay, unaligned_peak=dv.get("unaligned", {}).get(dt))  # fmt: skip
            if len(r) > 7 and r[7] is not None:
                t = observed_seconds(t, floors[r[7]])
            out.append(math.log(t / s))
        return out

    lb = to_x(GemmParams(*LOWER)) + [math.log(FLOOR_BOUNDS[0])] * len(harnesses)
    ub = to_x(GemmParams(*UPPER)) + [math.log(FLOOR_BOUNDS[1])] * len(harnesses)
    best = None
    for start in starts or STARTS:
        x0 = to_x(start) + [math.log(8e-6)] * len(harnesses)
        x0 = [min(max(v, a), b) for v, a, b in zip(x0, lb, ub)]
        res = least_squares(resid, x0, bounds=(lb, ub), loss=LOSS, f_scale=LOSS_SCALE)
        if best is None or res.cost < best.cost:
            best = res
    x = best.x
    return from_x(x), {h: math.exp(v) for h, v in zip(harnesses, x[npar:])}
