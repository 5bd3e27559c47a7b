# ruff: noqa: B023 - each lambda is timed at once, inside the iteration that made it
"""Per-kernel timings on a CUDA GPU (PyTorch, CUDA events): GEMMs in float32, TF32, float16 and
bfloat16, cuDNN forward convolutions, elementwise adds and the host's launch rate, written to
``$OUT/kernels.csv`` (``$OUT`` defaults to the current folder). Its rows from an H200 are
devices/catalog/kernels/h200_*.csv, against which bench/gpu_kernels.py checks the tiled GEMM
model. Without PyTorch and a CUDA device it says so and measures nothing."""

import csv
import json
import os
import statistics
import sys
import time

try:
    import torch
except ImportError:
    torch = None
if torch is None or not torch.cuda.is_available():
    print("gpu_kernel_sweep: no PyTorch with a CUDA device here: nothing measured")
    sys.exit(0)

OUT = os.environ.get("OUT", ".")
dev = torch.device("cuda")
rows = []
torch.backends.cudnn.benchmark = True


def timeit(fn, min_ms=20.0, groups=5):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    e.record()
    torch.cuda.synchronize()
    one = max(s.elapsed_time(e), 1e-3)
    n = int(max(1, min(200, min_ms / one)))
    res = []
    for _ in range(groups):
        s.record()
        for _ in range(n):
            fn()
        e.record()
        torch.cuda.synchronize()
        res.append(s.elapsed_time(e) / n / 1e3)
    return statistics.median(res), n


def mode(dt):
    torch.backends.cuda.matmul.allow_tf32 = dt == "tf32"
    torch.backends.cudnn.allow_tf32 = dt == "tf32"
    return {
        "fp32": torch.float32,
        "tf32": torch.float32,
        "fp16": torch.float16,
        "bf16": torch.bfloat16,
    }[dt]


def measure(kind, dtype, shape, flops, moved, fn):
    """Time ``fn`` and record one row."""
    sec, reps = timeit(fn)
    rows.append(dict(kind=kind, dtype=dtype, shape=shape, flops=flops, bytes=moved,
                     seconds=sec, reps=reps))  # fmt: skip


t0 = time.time()
gemms = [(n, n, n) for n in (64, 128, 256, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192)]
gemms += [(1760, b, 1760) for b in (16, 32, 64, 128, 7000)] + [
    (2048, b, 2048) for b in (16, 64, 128, 7000)
]
gemms += [(2560, b, 2560) for b in (16, 64, 128, 7000)] + [
    (4096, b, 4096) for b in (16, 64, 128, 7000)
]
gemms += [
    (5124, 9124, 2560),
    (35, 8457, 2560),
    (7680, 64, 2560),
    (3072, 128, 1024),
    (512, 24000, 2816),
]
for dt in ("fp32", "tf32", "fp16", "bf16"):
    ty = mode(dt)
    for m, n, k in gemms:
        a = torch.randn(m, k, device=dev, dtype=ty)
        b = torch.randn(k, n, device=dev, dtype=ty)
        el = 2 if ty != torch.float32 else 4
        measure("gemm", dt, f"{m}x{n}x{k}", 2 * m * n * k, el * (m * k + k * n + m * n),
                lambda: torch.mm(a, b))  # fmt: skip
print("gemm done", time.time() - t0, flush=True)
convs = [  # N, H, W, C, K, R, stride, pad
    (32, 224, 224, 3, 64, 7, 2, 3),
    (32, 56, 56, 64, 64, 3, 1, 1),
    (32, 56, 56, 64, 256, 1, 1, 0),
    (32, 28, 28, 128, 128, 3, 1, 1),
    (32, 14, 14, 256, 256, 3, 1, 1),
    (32, 7, 7, 512, 512, 3, 1, 1),
    (32, 35, 35, 192, 64, 1, 1, 0),
    (32, 17, 17, 768, 192, 1, 1, 0),
    (32, 8, 8, 1280, 320, 1, 1, 0),
    (32, 35, 35, 64, 96, 3, 1, 1),
    (32, 17, 17, 160, 160, 3, 1, 1),
    (64, 28, 28, 1, 32, 5, 1, 2),
    (64, 14, 14, 32, 64, 5, 1, 2),
    (16, 112, 112, 64, 64, 3, 1, 1),
    (8, 56, 56, 256, 512, 1, 2, 0),
]
for dt in ("fp32", "tf32", "fp16"):
    ty = mode(dt)
    for N, H, W, C, K, R, st, pad in convs:
        x = torch.randn(N, C, H, W, device=dev, dtype=ty).to(memory_format=torch.channels_last)
        w = torch.randn(K, C, R, R, device=dev, dtype=ty).to(memory_format=torch.channels_last)
        P = (H + 2 * pad - R) // st + 1
        Q = (W + 2 * pad - R) // st + 1
        el = 2 if ty != torch.float32 else 4
        measure("conv_fwd", dt, f"N{N}H{H}W{W}C{C}K{K}R{R}s{st}", 2 * N * P * Q * K * C * R * R,
                el * (N * H * W * C + K * C * R * R + N * P * Q * K),
                lambda: torch.nn.functional.conv2d(x, w, stride=st, padding=pad))  # fmt: skip
print("conv done", time.time() - t0, flush=True)
mode("fp32")
for n in (1, 1000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000):
    a = torch.randn(n, device=dev)
    b = torch.randn(n, device=dev)
    c = torch.empty_like(a)
    measure("add", "fp32", str(n), n, 12 * n, lambda: torch.add(a, b, out=c))
# host-side launch rate: back-to-back tiny kernels, timed on the host
a = torch.zeros(1, device=dev)
torch.cuda.synchronize()
t = time.perf_counter()
for _ in range(20000):
    a.add_(1.0)
torch.cuda.synchronize()
rows.append(
    dict(
        kind="launch_host",
        dtype="fp32",
        shape="1",
        flops=0,
        bytes=0,
        seconds=(time.perf_counter() - t) / 20000,
        reps=20000,
    )
)
with open(os.path.join(OUT, "kernels.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
info = dict(
    name=torch.cuda.get_device_name(0),
    sms=torch.cuda.get_device_properties(0).multi_processor_count,
    torch=torch.__version__,
    cudnn=torch.backends.cudnn.version(),
    seconds=time.time() - t0,
)
json.dump(info, open(os.path.join(OUT, "kernels_info.json"), "w"))
print(info)
for r in rows[::7]:
    print(
        r["kind"],
        r["dtype"],
        r["shape"],
        f"{r['flops'] / r['seconds'] / 1e12:.1f} TFLOP/s",
        f"{r['seconds'] * 1e6:.1f} us",
    )
