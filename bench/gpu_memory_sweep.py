"""A CUDA GPU's achievable memory rate and its per-kernel fixed cost (PyTorch, CUDA events and
CUDA graphs), measured for the catalog rather than fitted: the GEMM and convolution models of
devices/gpukernels.py and devices/gpuconv.py otherwise have to infer both from the kernels'
timings, where the memory rate trades against the per-block rate and the fixed cost against
the smallest kernels' efficiency.

Measures, each as replays of a CUDA graph of back-to-back calls (the kernels' time, not
Python's launches), the best of several replays:

* ``copy``: ``dst.copy_(src)`` of 1 MiB to 2 GiB float32 buffers; the rate counts the bytes
  read and written (2 x size), as STREAM's copy does;
* ``scale``: ``torch.mul(src, 3.0, out=dst)``, an elementwise kernel that reads and writes;
* ``read``: ``torch.sum(src)``, a reduction that reads only (its output is one number);
* ``tiny``: a one-element ``add_``, the fixed cost of a kernel that does nothing measurable,
  in a graph (device side) and launched one by one from Python (host side, beside it).

Writes ``$OUT/memory.csv`` (``$OUT`` defaults to the current folder) and prints it. Without
PyTorch and a CUDA device it says so and measures nothing."""

from __future__ import annotations

import csv
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_gemm_sweep import graph_seconds, torch  # noqa: E402 - the CUDA-graph timing, shared

OUT = os.environ.get("OUT", ".")
SIZES = [1 << k for k in range(20, 32)]  # bytes a buffer: 1 MiB .. 2 GiB


def eager_time(fn, calls: int) -> float:
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / calls


def main() -> int:
    if torch is None or not torch.cuda.is_available():
        print("gpu_memory_sweep: needs PyTorch and a CUDA device (none here); measured nothing")
        return 0
    props = torch.cuda.get_device_properties(0)
    print(f"# {props.name}, {props.multi_processor_count} SMs, torch {torch.__version__}")
    rows = []
    for size in SIZES:
        n = size // 4
        src = torch.rand(n, device="cuda")
        dst = torch.empty_like(src)
        # enough calls that a replay takes a few ms at ~4 TB/s, at most 200
        calls = max(2, min(200, int(4e-3 * 4e12 / (2 * size))))
        for kind, fn, moved in (
            ("copy", lambda s=src, d=dst: d.copy_(s), 2 * size),
            ("scale", lambda s=src, d=dst: torch.mul(s, 3.0, out=d), 2 * size),
            ("read", lambda s=src: torch.sum(s), size),
        ):
            t = graph_seconds(fn, calls)
            rows.append({"kind": kind, "bytes": size, "moved": moved, "seconds": t,
                         "rate_gbs": moved / t / 1e9})  # fmt: skip
            print(f"{kind:6s} {size:>11d} B  {t * 1e6:10.2f} us  {moved / t / 1e9:8.1f} GB/s")
        src = dst = None
        torch.cuda.empty_cache()
    one = torch.zeros(1, device="cuda")
    for calls in (100, 1000):
        t = graph_seconds(lambda: one.add_(1.0), calls)
        rows.append({"kind": f"tiny_graph_{calls}", "bytes": 4, "moved": 8, "seconds": t,
                     "rate_gbs": 0.0})  # fmt: skip
        print(f"tiny kernel in a graph of {calls}: {t * 1e6:.2f} us a kernel")
    t = eager_time(lambda: one.add_(1.0), 2000)
    rows.append({"kind": "tiny_eager", "bytes": 4, "moved": 8, "seconds": t, "rate_gbs": 0.0})
    print(f"tiny kernel launched from Python: {t * 1e6:.2f} us a kernel")
    with open(os.path.join(OUT, "memory.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
