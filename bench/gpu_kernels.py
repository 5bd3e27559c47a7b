"""The tiled GEMM model of GPU kernels (devices/gpukernels.py) against per-kernel timings it was
not fitted to: DeepBench's published V100 and P100 results, hetbed's own H200 measurements, and
an H100 run that is never fitted to
(devices/catalog/kernels/README.md says where each comes from). Needs scipy.

The GEMM timings of each (GPU, precision) are numbered in file order; every third one is held
out. The parameters of each unit class (CUDA cores: float32; tensor cores: float16, bfloat16,
TF32) are fitted to the other GEMMs of all GPUs: those rows are "fitted" (in sample). Predicted
(out of sample): the held-out GEMMs, and, GPU by GPU, every timing of that GPU from parameters
refitted without it (one generation held out).

Convolutions (forward and the two backward passes) are priced by the convolution model
(devices/gpuconv.py: cuDNN's algorithms on top of the GEMM model) whose five parameters per unit
class are fitted the same way: the convolution shapes of each (GPU, precision) numbered in file
order, every third shape (all its passes) held out, the rest fitted with the GEMM parameters
and floors held at their GEMM fit; each generation refitted (GEMMs, then convolutions) without
itself; the H100 never fitted. The errors of the plain implicit GEMM (GEMM parameters alone, the
earlier model) are printed beside them, with a breakdown by pass, filter, stride, precision,
GPU, batch, channels and the algorithm the model picks. No case is dropped.

DeepBench's GEMM shapes (each layout) and the sweep's, in four precisions, timed on an H200 and
an H100 as CUDA graph replays (bench/gpu_gemm_sweep.py) are never fitted either: with no host
floor under them they show the kernels' fixed cost, which every fitted timing hides under its
harness's floor (8-14 us a call). Fitting the H200's (two of every three) was tried: its 520
rows then set the tensor-core parameters for Hopper and the V100 held out went to 29% / 494%
(GEMMs) and every convolution case to 27% / 699%, so they stay a test.

All three passes of DeepBench's convolution shapes timed on an H200 (105 shapes) and an H100 (63)
as CUDA graph replays (bench/gpu_conv_sweep.py; no per-call floor: their calls are not issued one
by one) are never fitted: predicted by the full fit, and the H200's by the fit without H200. The
kernels cuDNN ran there give the algorithm it chose; the bench prints how often the model picks
the same family. Which algorithms a GPU offers is its catalog ``conv_algorithms``. The kernels each H200 pass
launched (bench/gpu_conv_sweep.py --kernels) give two more predicted rows, not targets: the
H200's passes against their longest kernel alone, and against all their kernels but the layout
conversions and channel padding.

Each data file's timing loop (DeepBench's C++ benchmark, hetbed's PyTorch sweep) has a per-call
floor, the host's time to issue one call, that a short kernel cannot go below
(``gk.observed_seconds``); it is fitted per harness with the parameters. A harness with no row
in a fit (the PyTorch sweep when H200 is held out) takes the other harness's floor, predicted.
DeepBench's rows are priced with their layouts: its column-major a_t/b_t flags become hetbed's
row-major MatMul (``deepbench_as_matmul``: m and n swap, transpose_a = b_t, transpose_b = a_t),
and the model reads an operand stored with the reduction contiguous in shorter runs
(``gk.read_factor``). The same shape in two layouts differs by up to 2.5x there (V100 float16
1024 x 16 x 500000), which bounds a layout-blind model's worst error on those rows
(``layout_bound``, printed for comparison).

Targets (issue 19): on the held-out GEMMs and convolution shapes, on the H100 and on each
held-out generation, median |error| <= 10% and worst <= 30%. ``--write`` stores the fitted
parameters in catalog/kernels/gemm.toml and conv.toml.
"""

from __future__ import annotations

import csv
import functools
import math
import statistics
import sys
from pathlib import Path

import hetbed.devices.gpuconv as gc
import hetbed.devices.gpukernels as gk
from hetbed.devices import catalog

DATA = Path(gk.__file__).resolve().parent / "catalog" / "kernels"
#: the catalog entry each benchmark's GPU is priced as
GPUS = {"P100": "p100_pcie", "V100": "v100_sxm2", "H200": "h200_sxm", "H100": "h100_sxm5"}
#: the GPUs fitted to (one at a time held out), and the files of each side
FITTED_GPUS = ("P100", "V100", "H200")
FIT_FILES = (("deepbench_gemm.csv", "h200_gemm.csv"), ("deepbench_conv.csv", "h200_conv.csv"))
#: timings of a machine never fitted to: an H100 measured on another day by the same sweep
UNSEEN_FILES = (("h100_gemm.csv",), ("h100_conv.csv",))
#: every convolution pass of DeepBench's shapes (and the sweep's) on an H200 and (63 of them) an
#: H100, timed as CUDA graph replays, with the algorithm cuDNN picked: never fitted to
#: (bench/gpu_conv_sweep.py)
PASSES_FILES = ("h200_conv_passes.csv", "h100_conv_passes.csv")
#: DeepBench's GEMM shapes (each layout) and the sweep's on an H200 and an H100, four precisions,
#: timed as CUDA graph replays (bench/gpu_gemm_sweep.py: no host floor, so a small kernel's
#: fixed cost shows): never fitted to
GEMM_GRAPH_FILES = ("h200_gemm_graph.csv", "h100_gemm_graph.csv")
GRAPH_FILES, GRAPH_HARNESS = PASSES_FILES + GEMM_GRAPH_FILES, "cuda_graph"
#: every kernel each H200 pass of ``PASSES_FILES`` launched, with its time (bench/gpu_conv_sweep.py
#: --kernels): the pass's longest kernel apart from the rest; never fitted to
KERNEL_LIST_FILE = "h200_conv_kernels.csv"
#: names of kernels that only change a tensor's layout (NHWC <-> NCHW) or pad its channels
LAYOUT_KERNELS = ("nhwcToNchw", "nchwToNhwc", "convertTensor", "tensorTransform", "AddPadding")
#: the precision labels of the data files -> (dtype priced, element bytes)
PRECISION = {"fp32": ("float32", 4), "tf32": ("tensorfloat32", 4), "fp16": ("float16", 2),
             "bf16": ("bfloat16", 2)}  # fmt: skip
MEDIAN_TARGET, WORST_TARGET = 0.10, 0.30


def devices() -> dict:
    out = {}
    for label, key in GPUS.items():
        spec = catalog.load_device(key)
        peak = {d: spec.peak(d, matrix=True) for d, _ in PRECISION.values() if _has(spec, d)}
        out[label] = {"peak": peak, "bandwidth": spec.memory_rate,
                      "sms": spec.multiprocessors, "fp32_lanes": spec.fp32_lanes,
                      "issue": spec.warp_issue_per_clock, "tile_loads": spec.tile_loads,
                      "clock_hz": spec.clock_hz,
                      "unaligned": dict(spec.unaligned_matrix_peak_flops),
                      "conv_algorithms": spec.conv_algorithms}  # fmt: skip
    return out


@functools.cache
def tile_loads(label: str) -> tuple[str | None, float | None]:
    """How a benchmark GPU's tensor-core kernels load their tiles and its clock (its catalog's
    ``tile_loads`` and ``clock_hz``), as ``gk.layout_of`` takes them."""
    spec = catalog.load_device(GPUS[label])
    return spec.tile_loads, spec.clock_hz


def _has(spec, dtype: str) -> bool:
    try:
        spec.peak(dtype, matrix=True)
        return True
    except KeyError:
        return False


def gemm_rows(files: tuple = FIT_FILES[0]) -> list[tuple]:
    """(device, dtype, m, n, k, bytes, seconds, harness, layout, index within its (device,
    precision)), in hetbed's (TensorFlow's, row-major) terms (``deepbench_as_matmul``)."""
    rows, seen = [], {}
    for name in files:
        for r in csv.DictReader(open(DATA / name)):
            dtype, el = PRECISION[r["precision"]]
            m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
            ta = tb = False  # PyTorch's torch.mm of (m x k) and (k x n) row-major tensors
            if "a_t" in r:
                m, n, k, ta, tb = deepbench_as_matmul(m, n, k, r["a_t"], r["b_t"])
            i = seen[(r["device"], dtype)] = seen.get((r["device"], dtype), -1) + 1
            moved = el * (m * k + k * n + m * n)
            lay = gk.layout_of(gk.unit_class(dtype), el, ta, tb, *tile_loads(r["device"]))
            rows.append((r["device"], dtype, m, n, k, moved, float(r["ms"]) * 1e-3, harness(name),
                         lay, i))  # fmt: skip
    return rows


def deepbench_as_matmul(m: int, n: int, k: int, a_t: str, b_t: str) -> tuple:
    """DeepBench's GEMM (cuBLAS, column-major: C (m x n) = op(A) (m x k) op(B) (k x n), A stored
    (m x k), or (k x m) when ``a_t`` is "T") as hetbed's MatMul (row-major, like TensorFlow's):
    a column-major matrix is the row-major transpose, so C^T (n x m) = op(B)^T op(A)^T: the
    MatMul's m is DeepBench's n, its n DeepBench's m, its first operand DeepBench's B (stored
    (n x k) row-major when ``b_t`` is "N": transpose_a = b_t is "T"), its second DeepBench's A
    (stored (k x m) row-major when ``a_t`` is "N": transpose_b = a_t is "T").
    Returns (m, n, k, transpose_a, transpose_b)."""
    return n, m, k, b_t == "T", a_t == "T"


def conv_rows(files: tuple = FIT_FILES[1]) -> list[tuple]:
    """Each convolution pass as (device, dtype, pass name, ``gc.ConvShape``, element bytes,
    seconds, harness, layout, index of its shape within its (device, precision)); every pass of
    one shape (one line of the file) shares the index."""
    rows, seen = [], {}
    for name in files:
        for r in csv.DictReader(open(DATA / name)):
            dtype, el = PRECISION[r["precision"]]
            N, H, W, C, K = (int(r[x]) for x in ("n", "h", "w", "c", "k"))
            sh = gc.shape_of(N, H, W, C, K, int(r["r"]), int(r["s"]),
                             (int(r["stride_h"]), int(r["stride_w"])),
                             (int(r["pad_h"]), int(r["pad_w"])))  # fmt: skip
            # (the implicit GEMM's operands as NHWC lays them: rows of im2col contiguous along
            # the reduction (its channels), the filter (RSC x K) along the output channels)
            lay = gk.layout_of(gk.unit_class(dtype), el, False, False, *tile_loads(r["device"]))
            i = seen[(r["device"], dtype)] = seen.get((r["device"], dtype), -1) + 1
            for what in gc.PASSES:
                ms = r.get(f"{what}_ms")
                if ms:  # DeepBench leaves some passes out ("N/A")
                    rows.append((r["device"], dtype, what, sh, el, float(ms) * 1e-3,
                                 harness(name), lay, i))  # fmt: skip
    return rows


def pass_kernels() -> dict:
    """(dtype, pass, ``gc.ConvShape``) -> seconds a call of its longest kernel, of its layout
    kernels (``LAYOUT_KERNELS``) and of the rest, from ``KERNEL_LIST_FILE``."""
    out: dict = {}
    for r in csv.DictReader(open(DATA / KERNEL_LIST_FILE)):
        sh = gc.shape_of(*(int(r[x]) for x in ("n", "h", "w", "c", "k", "r", "s")),
                         (int(r["stride_h"]), int(r["stride_w"])),
                         (int(r["pad_h"]), int(r["pad_w"])))  # fmt: skip
        key = (PRECISION[r["precision"]][0], r["pass"], sh)
        out.setdefault(key, []).append((r["kernel"], float(r["per_call"]) * float(r["us"]) * 1e-6))
    split = {}
    for key, ks in out.items():
        ks.sort(key=lambda k: -k[1])
        lay = sum(t for name, t in ks[1:] if any(x in name for x in LAYOUT_KERNELS))
        split[key] = (ks[0][1], lay, sum(t for _, t in ks[1:]) - lay)
    return split


def harness(file_name: str) -> str:
    """The timing loop a data file was measured with: DeepBench's C++ benchmark, hetbed's
    PyTorch sweep (each has its own per-call floor, fitted; see ``gk.observed_seconds``), or
    replays of a CUDA graph of back-to-back calls (bench/gpu_conv_sweep.py: no host per call)."""
    if file_name.startswith("deepbench"):
        return "deepbench"
    return GRAPH_HARNESS if file_name in GRAPH_FILES else "torch_sweep"


def layout_bound() -> dict:
    """Per DeepBench (GPU, precision): the least worst error any model blind to the operands'
    layouts can have, (slow - fast) / (slow + fast) over shapes timed in several layouts."""
    times: dict = {}
    for r in csv.DictReader(open(DATA / "deepbench_gemm.csv")):
        times.setdefault((r["device"], r["precision"], r["m"], r["n"], r["k"]), []).append(
            float(r["ms"])
        )
    out: dict = {}
    for (dev, prec, *_), ts in times.items():
        b = (max(ts) - min(ts)) / (max(ts) + min(ts))
        out[(dev, prec)] = max(out.get((dev, prec), 0.0), b)
    return out


def layout_ratios(gemms: list[tuple], fits: dict, devs: dict) -> str:
    """Per DeepBench (GPU, dtype): the range of the observed and of the predicted ratios of a
    shape's time with B stored transposed (DeepBench's TN) to its time without (NN)."""
    pairs: dict = {}
    for e, r in zip(errors(gemms, fits, devs), gemms):
        if r[7] == "deepbench" and not r[8].transpose_a:
            pairs.setdefault(r[:5], {})[r[8].transpose_b] = (r[6], r[6] * (1.0 + e))
    out: dict = {}
    for key, v in pairs.items():
        if len(v) == 2:
            (o0, p0), (o1, p1) = v[False], v[True]
            out.setdefault(key[:2], []).append((o1 / o0, p1 / p0))
    return "; ".join(
        f"{d} {dt} {min(o for o, _ in rs):.2f}-{max(o for o, _ in rs):.2f} vs "
        f"{min(p for _, p in rs):.2f}-{max(p for _, p in rs):.2f}"
        for (d, dt), rs in sorted(out.items())
    )


def errors(rows: list[tuple], fits: dict, devs: dict) -> list[float]:
    out = []
    for d, dtype, m, n, k, moved, s, h, lay, _ in rows:
        dev = devs[d]
        unit = gk.unit_class(dtype)
        p, floors = fits[unit]
        share = gk.issue_share(unit, dev["fp32_lanes"], dev["sms"], dev["issue"])
        t = gk.gemm_seconds(m, n, k, moved, dev["peak"][dtype], dev["bandwidth"], dev["sms"], p,
                            gk.TILES[unit], share, lay,
                            unaligned_peak=dev["unaligned"].get(dtype))  # fmt: skip
        out.append(gk.observed_seconds(t, floor_of(floors, h)) / s - 1.0)
    return out


def conv_errors(rows: list[tuple], fits: dict, cfits: dict | None, devs: dict) -> list[float]:
    """Relative errors of convolution rows: by the convolution model (``gc.pass_seconds``) with
    the GEMM fits ``fits`` and the convolution fits ``cfits``; with ``cfits`` None, as the plain
    implicit GEMM priced by the GEMM parameters alone (no convolution mechanism or parameter)."""
    out = []
    for r in rows:
        d, dtype, what, sh, el, s, h, lay = r[:8]
        unit = gk.unit_class(dtype)
        p, floors = fits[unit]
        dev = devs[d]
        if cfits is None:
            share = gk.issue_share(unit, dev["fp32_lanes"], dev["sms"], dev["issue"])
            m, n, k = gc.conv_gemm(what, sh)
            moved = el * (sh.n * sh.h * sh.w * sh.c + sh.r * sh.s * sh.c * sh.k
                          + sh.n * sh.p * sh.q * sh.k)  # fmt: skip
            t = gk.gemm_seconds(m, n, k, moved, dev["peak"][dtype],
                                dev["bandwidth"], dev["sms"], p, gk.TILES[unit], share, lay)  # fmt: skip
        else:
            t = gc.predict(r, devs, {u: f[0] for u, f in fits.items()}, cfits, {})
        out.append(gk.observed_seconds(t, floor_of(floors, h)) / s - 1.0)
    return out


def algorithms(rows: list[tuple], fits: dict, cfits: dict, devs: dict) -> list[str]:
    """The algorithm the convolution model picks for each row (``algo:float32`` where a TF32
    pass runs float32 kernels)."""
    out = []
    for d, dtype, what, sh, *_ in rows:
        dev = devs[d]
        shares = {u: gk.issue_share(u, dev["fp32_lanes"], dev["sms"], dev["issue"]) for u in fits}
        out.append(gc.pass_seconds(what, sh, dtype, dev["peak"], dev["bandwidth"], dev["sms"],
                                   {u: f[0] for u, f in fits.items()}, cfits, shares,
                                   dev["tile_loads"], menus(dev),
                                   clock_hz=dev["clock_hz"])[1])  # fmt: skip
    return out


def menus(dev: dict) -> dict:
    """dtype -> the convolution algorithms a benchmark GPU's library runs in it (its catalog's
    ``conv_algorithms``; a dtype absent: gpuconv's default menu)."""
    return dict(dev.get("conv_algorithms") or ())


def cudnn_family(row: dict, what: str) -> str:
    """The model's algorithm family of what cuDNN ran for one pass of a row of
    ``PASSES_FILES``: a GEMM where its longest kernel is one of cuBLASLt's (nvjet), Winograd or
    FFT where any of its kernels is named so (the sweep's ``{pass}_algo``), else an implicit GEMM
    (its dgrad and wgrad engines, direct, xmma and cutlass kernels; col2im included: their names
    do not tell them apart)."""
    if "nvjet" in row[f"{what}_kernels"].split("|")[0]:
        return "gemm_1x1"
    algo = row[f"{what}_algo"]
    return algo if algo in ("winograd", "fft") else "implicit_gemm"


def passes_families() -> list[str]:
    """cuDNN's algorithm family for each row of ``conv_rows(PASSES_FILES)``, in its order."""
    out = []
    for name in PASSES_FILES:
        for r in csv.DictReader(open(DATA / name)):
            out += [cudnn_family(r, what) for what in gc.PASSES if r.get(f"{what}_ms")]
    return out


#: pieces of the names of tensor-core kernels (cuDNN's and cuBLASLt's: tf32 / f16 types, mma
#: shapes, tensorop, nvjet); a pass whose longest kernel has none ran on the CUDA cores
TENSOR_CORE_NAMES = ("tf32", "f16", "s1688", "h1688", "16816", "tensorop", "nvjet", "hmma")


def tf32_units(rows: list[tuple], fits: dict, cfits: dict, devs: dict) -> str:
    """Of the TF32 passes of ``rows`` (``conv_rows(PASSES_FILES)``): how many cuDNN ran with a
    CUDA-core kernel as the longest (no ``TENSOR_CORE_NAMES`` in its name), how many of those
    the model runs on CUDA cores too (``gc.ALSO_RUNS_AS``), and how many it runs there where
    cuDNN used tensor cores."""
    simt = []
    for name in PASSES_FILES:
        for r in csv.DictReader(open(DATA / name)):
            for what in gc.PASSES:
                if r.get(f"{what}_ms"):
                    main = r[f"{what}_kernels"].split("|")[0].lower()
                    simt.append(not any(x in main for x in TENSOR_CORE_NAMES))
    picked = [a.endswith(":float32") for a in algorithms(rows, fits, cfits, devs)]
    both = [(c, m) for r, c, m in zip(rows, simt, picked) if r[1] == "tensorfloat32"]
    return (f"{sum(c for c, _ in both)} of {len(both)} ran CUDA-core kernels; the model runs "
            f"{sum(c and m for c, m in both)} of those on CUDA cores, and "
            f"{sum(m and not c for c, m in both)} where cuDNN used tensor cores")  # fmt: skip


def agreement(rows: list[tuple], fits: dict, cfits: dict, devs: dict) -> str:
    """Per pass and dtype: how often the model's algorithm is the family cuDNN ran."""
    picked = [a.split(":")[0] for a in algorithms(rows, fits, cfits, devs)]
    picked = [a.split("_")[0] if a.startswith("winograd") else a for a in picked]
    picked = ["implicit_gemm" if a == "gemm_col2im" else a for a in picked]
    groups: dict = {}
    for r, a, c in zip(rows, picked, passes_families()):
        groups.setdefault((r[2], r[1]), []).append(a == c)
    return "; ".join(f"{p} {d} {sum(v)}/{len(v)}" for (p, d), v in sorted(groups.items()))


def fit_conv(rows: list[tuple], devs: dict, fits: dict) -> dict:
    """unit class -> ``gc.ConvParams`` fitted to convolution ``rows``, the GEMM parameters and
    the harnesses' floors of ``fits`` (fitted to GEMMs) held fixed."""
    out: dict = {}
    gemm = {u: f[0] for u, f in fits.items()}
    for unit in ("cuda_cores", "tensor_cores"):  # (a TF32 pass may run the CUDA cores' kernels)
        floors = fits[unit][1]
        mine = [r for r in rows if gk.unit_class(r[1]) == unit]
        fl = {h: floor_of(floors, h) for h in {r[6] for r in mine}}
        out[unit] = gc.fit_params(mine, devs, gemm, fl, unit, dict(out))
    return out


def breakdown(rows: list[tuple], plain: list[float], model: list[float], algos: list[str]) -> str:
    """A table of median / worst |error| per group of convolution cases: pass, filter, stride,
    precision, GPU, batch, input channels, algorithm picked; the plain implicit GEMM's errors
    (GEMM parameters only) beside the convolution model's."""
    keys = {
        "pass": lambda r, a: r[2],
        "filter": lambda r, a: f"{r[3].r}x{r[3].s}" if r[3].r * r[3].s in (1, 9, 25) else "larger",
        "stride": lambda r, a: f"stride {max(r[3].stride)}",
        "precision": lambda r, a: r[1],
        "GPU": lambda r, a: r[0],
        "batch": lambda r, a: f"n={r[3].n}",
        "in channels": lambda r, a: "c<=4" if r[3].c <= 4 else "c<64" if r[3].c < 64 else "c>=64",
        "out channels": lambda r, a: "k<64" if r[3].k < 64 else "k>=64",
        "algorithm": lambda r, a: a,
    }
    out = [f"{'group':28s} {'n':>4s}  {'plain GEMM med/worst':>20s}  {'conv model med/worst':>20s}"
           f"  {'model mean':>10s}"]  # fmt: skip
    for title, f in keys.items():
        groups: dict = {}
        for r, e0, e1, a in zip(rows, plain, model, algos):
            groups.setdefault(f(r, a), []).append((e0, e1))
        for g in sorted(groups, key=str):
            es = groups[g]
            m0, w0 = summary([e for e, _ in es])
            m1, w1 = summary([e for _, e in es])
            mean = statistics.fmean(e for _, e in es)
            out.append(f"{title + ' ' + str(g):28s} {len(es):4d}  {m0:9.1%} {w0:9.1%}  "
                       f"{m1:9.1%} {w1:9.1%}  {mean:+10.1%}")  # fmt: skip
    return "\n".join(out)


def floor_of(floors: dict, h: str) -> float:
    """A harness's fitted floor; one with no row fitted to takes the geometric mean of the
    others' (predicted, not fitted: e.g. the PyTorch sweep's when H200 is held out). A graph
    replay has none: its calls are not launched one by one from the host."""
    if h == GRAPH_HARNESS:
        return 0.0
    if h in floors:
        return floors[h]
    vals = list(floors.values())
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else 0.0


#: the fewest rows read by threads (not by bulk tile copies) a unit class's fit needs to fit
#: ``run_half`` itself; with fewer (tensor cores with the V100 held out: two H200 rows the TMA
#: cannot load) it is held at the CUDA-core fit's, the same memory system's answer to short runs
MIN_THREAD_READ_ROWS = 20


def thread_read(r: tuple) -> bool:
    """Whether a GEMM row's operands are read by threads, in runs whose length shows."""
    lay = r[8]
    return lay is not None and not (lay.bulk and gk.bulk_aligned(r[2], r[3], r[4], lay))


def fit(rows: list[tuple], devs: dict) -> dict:
    """unit class -> (parameters, {harness: floor}), fitted to ``rows`` (the CUDA-core fit
    first: its ``run_half`` may be held for the tensor cores, ``MIN_THREAD_READ_ROWS``)."""
    out = {}
    for unit in ("cuda_cores", "tensor_cores"):
        mine = [r[:9] for r in rows if gk.unit_class(r[1]) == unit]
        held = None
        if out and sum(map(thread_read, mine)) < MIN_THREAD_READ_ROWS:
            held = out["cuda_cores"][0].run_half
        out[unit] = gk.fit_params(mine, devs, unit=unit, run_half=held)
    return out


def shape(r: tuple) -> str:
    """A row's product as m x n x k of hetbed's MatMul, with its transposed operands (a^T, b^T)."""
    lay = r[8]
    return f"{r[2]}x{r[3]}x{r[4]}" + "".join(
        t for t, f in ((" a^T", lay.transpose_a), (" b^T", lay.transpose_b)) if f
    )


def conv_shape(sh: gc.ConvShape) -> str:
    """A convolution as n x h x w x c -> k, r x s filter, stride."""
    return f"{sh.n}x{sh.h}x{sh.w}x{sh.c}->{sh.k} {sh.r}x{sh.s}/{max(sh.stride)}"


def split(gemms: list[tuple]) -> tuple[list[tuple], list[tuple]]:
    """(fitted, held out): every third GEMM of each (GPU, precision), in file order, held out."""
    return [r for r in gemms if r[-1] % 3], [r for r in gemms if not r[-1] % 3]


def summary(errs: list[float]) -> tuple[float, float]:
    a = [abs(e) for e in errs]
    return (statistics.median(a), max(a)) if a else (float("nan"), float("nan"))


def main(argv: list[str]) -> int:
    devs = devices()
    gemms, convs = gemm_rows(), conv_rows()
    train, held = split(gemms)
    params = fit(train, devs)
    print("gpu_kernels: the tiled GEMM model vs per-kernel timings")
    print("--------------------------------------------------------")
    for unit, (p, floors) in params.items():
        print(f"fitted {unit}: " + ", ".join(f"{f} {v:.4g}" for f, v in zip(gk.FIELDS, p.vector()))
              + "; per-call floor " + ", ".join(f"{h} {v:.3g}" for h, v in floors.items()))  # fmt: skip
    lines, checks = [], []

    def row(name: str, label: str, rs: list[tuple], ps: dict, target: bool,
            cps: dict | None = None, conv: bool = False) -> None:  # fmt: skip
        errs = conv_errors(rs, ps, cps, devs) if conv else errors(rs, ps, devs)
        med, worst = summary(errs)
        print(f"{name:60s} {label:>9s} {len(rs):4d} {med:7.1%} {worst:7.1%}")
        if target:
            checks.append((name, med, worst))

    ctrain, cheld = split(convs)
    cparams = fit_conv(ctrain, devs, params)
    for unit, cp in cparams.items():
        print(f"fitted {unit} convolutions: "
              + ", ".join(f"{f} {v:.4g}" for f, v in zip(gc.FIELDS, cp.vector())))  # fmt: skip
    print(f"\n{'set':60s} {'label':>9s} {'n':>4s} {'median':>7s} {'worst':>7s}")
    row("GEMMs fitted to (2 of every 3, all GPUs)", "fitted", train, params, False)
    for gen in FITTED_GPUS:
        row(f"{gen}: its GEMMs fitted to", "fitted", [r for r in train if r[0] == gen], params,
            False)  # fmt: skip
    row("GEMMs held out (every third)", "predicted", held, params, True)
    row("H100 GEMMs (another machine, never fitted)", "predicted", gemm_rows(UNSEEN_FILES[0]),
        params, True)  # fmt: skip
    graph_gemms = gemm_rows(GEMM_GRAPH_FILES)
    for gpu in ("H200", "H100"):
        mine = [r for r in graph_gemms if r[0] == gpu]
        row(f"{gpu}: GEMMs, {len(mine) // 4} shapes x 4 precisions (graph-timed, never fitted)",
            "predicted", mine, params, True)  # fmt: skip
    h100c = conv_rows(UNSEEN_FILES[1])
    row("convs as plain implicit GEMM (GEMM parameters only)", "predicted", convs + h100c, params,
        False, None, True)  # fmt: skip
    row("conv shapes fitted to (2 of every 3 shapes, all GPUs)", "fitted", ctrain, params, False,
        cparams, True)  # fmt: skip
    for gen in FITTED_GPUS:
        row(f"{gen}: its conv shapes fitted to", "fitted", [r for r in ctrain if r[0] == gen],
            params, False, cparams, True)  # fmt: skip
    row("conv shapes held out (every third shape)", "predicted", cheld, params, True, cparams, True)
    row("H100 convolutions (another machine, never fitted)", "predicted", h100c, params, True,
        cparams, True)  # fmt: skip
    passes = conv_rows(PASSES_FILES)
    for gpu in ("H200", "H100"):
        mine = [r for r in passes if r[0] == gpu]
        shapes = len({(r[1], r[-1]) for r in mine}) // 3
        row(f"{gpu}: all passes, {shapes} shapes (graph-timed, never fitted)", "predicted", mine,
            params, True, cparams, True)  # fmt: skip
    for what in gc.PASSES:
        row(f"  of which {what}", "predicted", [r for r in passes if r[2] == what], params, False,
            cparams, True)  # fmt: skip
    listed = pass_kernels()
    h200 = [r for r in passes if r[0] == "H200" and r[1:4] in listed]
    row("  H200 passes against their longest kernel alone", "predicted",
        [(*r[:5], listed[r[1:4]][0], *r[6:]) for r in h200], params, False, cparams, True)  # fmt: skip
    row("  H200 passes against all their kernels but layout ones", "predicted",
        [(*r[:5], listed[r[1:4]][0] + listed[r[1:4]][2], *r[6:]) for r in h200], params, False,
        cparams, True)  # fmt: skip
    worst, gen_errs, gen_plain, gen_rows = [], [], [], []
    for gen in FITTED_GPUS:
        ps = fit([r for r in train if r[0] != gen], devs)
        row(f"{gen}: GEMMs, refitted without {gen}", "predicted", [r for r in gemms if r[0] == gen],
            ps, True)  # fmt: skip
        cps = fit_conv([r for r in ctrain if r[0] != gen], devs, ps)
        mine = [r for r in convs if r[0] == gen]
        row(f"{gen}: convolutions, refitted without {gen}", "predicted", mine, ps, True, cps, True)
        if gen == "H200":
            row("H200: all passes, refitted without H200", "predicted",
                [r for r in passes if r[0] == gen], ps, True, cps, True)  # fmt: skip
            row("H200: graph-timed GEMMs, refitted without H200", "predicted",
                [r for r in graph_gemms if r[0] == gen], ps, True)  # fmt: skip
        gen_rows += mine
        gen_errs += conv_errors(mine, ps, cps, devs)
        gen_plain += conv_errors(mine, ps, None, devs)
        mine = [r for r in gemms if r[0] == gen]
        worst.append((gen, sorted(zip(errors(mine, ps, devs), mine), key=lambda x: -abs(x[0]))[:3]))
    every = gen_rows + h100c
    every_errs = gen_errs + conv_errors(h100c, params, cparams, devs)
    every_plain = gen_plain + conv_errors(h100c, params, None, devs)
    med, wst = summary(every_errs)
    print(f"{'every conv case (each GPU by the fits without it; H100)':60s} "
          f"{'predicted':>9s} {len(every):4d} {med:7.1%} {wst:7.1%}")  # fmt: skip
    print(
        "\nconvolution errors by group, every case predicted (each GPU by the fits without it, "
        "H100 by the full fit): plain implicit GEMM vs the convolution model"
    )
    print(breakdown(every, every_plain, every_errs, algorithms(every, params, cparams, devs)))
    print("the model's algorithm vs cuDNN's (kernel names) on the H200's and H100's passes "
          "(fitted parameters): " + agreement(passes, params, cparams, devs))  # fmt: skip
    print("TF32 passes of the H200 and H100 (fitted parameters): "
          + tf32_units(passes, params, cparams, devs))  # fmt: skip
    cw = sorted(zip(every_errs, every), key=lambda x: -abs(x[0]))[:8]
    print("worst predicted convolutions: " + "; ".join(
        f"{r[0]} {r[1]} {r[2]} {conv_shape(r[3])} {e:+.0%}" for e, r in cw))  # fmt: skip
    worst_rows = sorted(zip(errors(held, params, devs), held), key=lambda x: -abs(x[0]))[:5]
    bands = ((0.0, 10e-6, "< 10 us"), (10e-6, 100e-6, "10-100 us"), (100e-6, math.inf, ">= 100 us"))
    ge = errors(graph_gemms, params, devs)
    print("graph-timed GEMMs (H200, H100; fitted parameters), signed median error by measured "
          "time (the fits' timings all have a host floor of 8-14 us a call, under which a kernel's "
          "fixed cost hides): " + "; ".join(
              f"{name} {statistics.median(e for e, r in zip(ge, graph_gemms) if lo <= r[6] < hi):+.0%}"
              f" (n={sum(lo <= r[6] < hi for r in graph_gemms)})" for lo, hi, name in bands))  # fmt: skip
    by_b = []  # TF32 wgmma reads B (k x n) MN-major only after a transposition (gk docstring)
    for dt in ("tensorfloat32", "float16"):
        for tb, what in ((False, "B (k x n), MN-major"), (True, "B^T (n x k), K-major")):
            es = [e for e, r in zip(ge, graph_gemms) if r[1] == dt and r[6] >= 20e-6
                  and not r[8].transpose_a and r[8].transpose_b == tb]  # fmt: skip
            by_b.append(f"{dt} {what} {statistics.median(es):+.0%} (n={len(es)})")
    print(
        "graph-timed GEMMs of 20 us or more (fitted parameters), signed median error by B's "
        "layout: " + "; ".join(by_b)
    )
    gw = sorted(zip(ge, graph_gemms), key=lambda x: -abs(x[0]))[:5]
    print("worst graph-timed GEMMs: " + "; ".join(
        f"{r[0]} {r[1]} {shape(r)} {e:+.0%}" for e, r in gw))  # fmt: skip
    print("\nworst held-out GEMMs: " + "; ".join(
        f"{r[0]} {r[1]} {shape(r)} {e:+.0%}" for e, r in worst_rows))  # fmt: skip
    for gen, rows in worst:
        print(f"worst {gen} GEMMs refitted without {gen}: " + "; ".join(
            f"{r[1]} {shape(r)} {e:+.0%}" for e, r in rows))  # fmt: skip
    print("a layout-blind model's floor on the worst error (DeepBench shapes timed in several "
          "layouts; this model prices layouts): "
          + ", ".join(f"{d} {p} {b:.0%}" for (d, p), b in sorted(layout_bound().items())))  # fmt: skip
    print("DeepBench's TN/NN time ratios (same shape; B stored transposed / not), observed vs "
          "predicted (fitted parameters): " + layout_ratios(gemms, params, devs))  # fmt: skip
    for name, med, worst in checks:
        ok = med <= MEDIAN_TARGET and worst <= WORST_TARGET
        lines.append(
            f"target {name}: median <= {MEDIAN_TARGET:.0%} and worst <= {WORST_TARGET:.0%}: "
            f"{med:.1%} / {worst:.1%}, {'met' if ok else 'NOT met'}"
        )
    print("\n".join(lines))
    if "--write" in argv:
        write(params, len(train))
        write_conv(cparams, len(ctrain))
    return 0


def write(params: dict, n_train: int) -> None:
    src = (
        f"fitted by bench/gpu_kernels.py (robust least squares, soft-L1 loss, on log time) to "
        f"{n_train} GEMM timings: "
        "DeepBench's published V100 and P100 results and hetbed's H200 measurements, every third "
        "shape of each GPU and precision held out (in sample for those; see catalog/kernels)"
    )
    floor_src = (
        "fitted with the parameters above (same rows): the timing loop's per-call floor of that "
        "harness; used by the bench only (the simulator adds each device's kernel launch cost)"
    )
    out = ["# The tiled GEMM model's parameters (hetbed/devices/gpukernels.py), per unit class.",
           "# Fitted values: written by `python bench/gpu_kernels.py --write`.", ""]  # fmt: skip
    for unit, (p, _) in params.items():
        out.append(f"[{unit}]")
        for f, v in zip(gk.FIELDS, p.vector()):
            why = src
            if unit == "tensor_cores" and f == "issue_overhead":
                why = "fixed at 0, not fitted: a tensor-core instruction does a whole matrix block"
            out.append(f'{f} = {{ value = {v:.6g}, source = "{why}" }}')
        out.append("")
    for unit, (_, floors) in params.items():
        out.append(f"[timing_floor_s.{unit}]")
        for h, v in floors.items():
            out.append(f'{h} = {{ value = {v:.6g}, source = "{floor_src}" }}')
        out.append("")
    gk.PARAMS_FILE.write_text("\n".join(out))
    print(f"wrote {gk.PARAMS_FILE}")


def write_conv(cparams: dict, n_train: int) -> None:
    src = (
        f"fitted by bench/gpu_kernels.py (robust least squares, soft-L1 loss, on log time) to "
        f"{n_train} convolution pass timings: DeepBench's published V100 and P100 results and "
        "hetbed's H200 measurements, every third shape of each GPU and precision held out, the "
        "GEMM parameters of gemm.toml held fixed (in sample for those; see catalog/kernels)"
    )
    out = ["# The convolution model's parameters (hetbed/devices/gpuconv.py), per unit class.",
           "# Fitted values: written by `python bench/gpu_kernels.py --write`.", ""]  # fmt: skip
    for unit, cp in cparams.items():
        out.append(f"[{unit}]")
        for f, v in zip(gc.FIELDS, cp.vector()):
            why = src
            if unit == "tensor_cores" and f == "issue_overhead":
                why = "fixed at 0, not fitted: tensor-core products have no issue limit"
            out.append(f'{f} = {{ value = {v:.6g}, source = "{why}" }}')
        out.append("")
    gc.PARAMS_FILE.write_text("\n".join(out))
    print(f"wrote {gc.PARAMS_FILE}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
