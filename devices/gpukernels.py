"""How long a GEMM-shaped kernel takes on a GPU: tiles, waves, split-K, a saturating efficiency.

A matrix product (m x k) @ (k x n), and a convolution as the implicit GEMM that cuDNN runs, is
cut into output tiles of ``tm x tn``; each tile is one thread block on one multiprocessor (SM).
With ``tiles`` blocks on ``sms`` SMs the kernel runs ``ceil(tiles / sms)`` waves, the last one
partly idle; where the tiles cannot fill the GPU, the reduction is split (split-K) into as many
parts as fill it, each part at least ``MIN_SPLIT_K`` long. A block's rate saturates with its
size: ``area / (area + tile_half)`` of the peak for its tile's area and ``kk / (kk + k_half)``
for its reduction length ``kk``, times ``efficiency`` (what a large, well-shaped product
reaches). The library picks the tile (from ``TILES``) that finishes first, so the model does.
The kernel then takes

    max(flops / (peak x efficiency x fill), bytes / (bandwidth x memory_efficiency)) + fixed_s

where ``fill`` is the fraction of the GPU's work slots the tiles keep busy. The five parameters
are per unit class ("cuda_cores": float32 and float64 products on the vector units;
"tensor_cores": float16, bfloat16 and TF32 products), read from
``catalog/kernels/gemm.toml`` and fitted by ``bench/gpu_kernels.py`` to per-kernel timings
(DeepBench's published V100 and P100 results, hetbed's own H200 measurements); the device
supplies its peak, bandwidth and SM count from its catalog entry.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:  # Python >= 3.11
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10 needs the tomli backport
    import tomli as tomllib  # type: ignore[no-redef]

#: output tiles a GEMM library chooses among (rows x cols of the output per thread block)
TILES = ((128, 128), (128, 64), (64, 64), (64, 32), (32, 32))
#: the shortest reduction a split-K part is given
MIN_SPLIT_K = 256
PARAMS_FILE = Path(__file__).resolve().parent / "catalog" / "kernels" / "gemm.toml"
#: the parameters, in the order ``GemmParams.vector`` and ``from_vector`` use
FIELDS = ("efficiency", "k_half", "tile_half", "memory_efficiency", "fixed_s")
#: dtypes whose products run on tensor cores where the device has them
TENSOR_CORE_DTYPES = {"float16", "bfloat16", "tensorfloat32", "float8"}


@dataclass(frozen=True)
class GemmParams:
    """The five numbers of one unit class (see the module docstring)."""

    efficiency: float
    k_half: float
    tile_half: float
    memory_efficiency: float
    fixed_s: float

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
) -> float:
    """Seconds of an (m x k) @ (k x n) product on a GPU of ``sms`` SMs (see the module
    docstring); ``moved_bytes`` is what it reads and writes in device memory."""
    m, n, k = (
        max(int(m), 1),
        max(int(n), 1),
        max(float(k), 1.0),
    )  # (k: an average, may be fractional)
    flops = 2.0 * m * n * k
    best = math.inf
    for tm, tn in TILES:
        tiles = math.ceil(m / tm) * math.ceil(n / tn)
        split = max(1, min(sms // tiles, k // MIN_SPLIT_K)) if tiles < sms else 1
        blocks = tiles * split
        waves = math.ceil(blocks / sms)
        fill = blocks / (waves * sms) * (m * n) / (tiles * tm * tn)
        kk = k / split
        rate = p.efficiency * fill * (tm * tn) / (tm * tn + p.tile_half) * kk / (kk + p.k_half)
        best = min(best, flops / (peak * rate))
    memory = moved_bytes / (bandwidth * p.memory_efficiency)
    return max(best, memory) + p.fixed_s


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
        m = math.prod(a[:-1])
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


def load_params(path: str | Path = PARAMS_FILE) -> dict[str, GemmParams]:
    """The fitted parameters per unit class, from ``gemm.toml`` (each value sourced there)."""
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    out = {}
    for unit in ("cuda_cores", "tensor_cores"):
        t = doc[unit]
        out[unit] = GemmParams(*(float(t[f]["value"]) for f in FIELDS))
    return out


def fit_params(
    rows: Sequence[tuple], devices: dict[str, dict[str, Any]], start: GemmParams | None = None
) -> GemmParams:
    """Least-squares fit (of log time) of one unit class's parameters to ``rows`` of
    (device, dtype, m, n, k, moved_bytes, seconds); ``devices[name]`` gives ``peak`` (per
    dtype), ``bandwidth`` and ``sms``. Needs scipy."""
    from scipy.optimize import least_squares

    start = start or GemmParams(0.8, 64.0, 1000.0, 0.8, 5e-6)
    lo = [0.02, 1.0, 1.0, 0.02, 1e-7]
    hi = [1.0, 1e5, 1e6, 1.0, 1e-4]

    def to_x(p: GemmParams) -> list[float]:
        e, kh, th, me, fx = p.vector()
        return [e, math.log(kh), math.log(th), me, math.log(fx)]

    def from_x(x: Sequence[float]) -> GemmParams:
        return GemmParams(x[0], math.exp(x[1]), math.exp(x[2]), x[3], math.exp(x[4]))

    def resid(x: Sequence[float]) -> list[float]:
        p = from_x(x)
        return [
            math.log(gemm_seconds(m, n, k, b, devices[d]["peak"][dt], devices[d]["bandwidth"],
                                  devices[d]["sms"], p) / s)
            for d, dt, m, n, k, b, s in rows
        ]  # fmt: skip

    lb = to_x(GemmParams(*lo))
    ub = to_x(GemmParams(*hi))
    x0 = [min(max(v, a), b) for v, a, b in zip(to_x(start), lb, ub)]
    return from_x(least_squares(resid, x0, bounds=(lb, ub)).x)
