"""GEMMs on a CUDA GPU timed as replays of a CUDA graph of back-to-back calls (PyTorch, CUDA
events): the kernels' own time, with no host cost per call under it. DeepBench's training GEMM
shapes in each of their operand layouts and bench/gpu_kernel_sweep.py's shapes, in float32,
TF32, float16 and bfloat16. bench/gpu_kernel_sweep.py timed its shapes with a Python loop, whose
per-call floor (about 12 us on an H200) hides a small kernel's fixed cost; here nothing does.

Rows are written in DeepBench's column-major terms (``m, n, k, a_t, b_t``: C (m x n) =
op(A) op(B), A stored (m x k) or, with ``a_t`` "T", (k x m)), so bench/gpu_kernels.py reads them
as it reads DeepBench's file; a sweep shape ``torch.mm`` of (m x k) and (k x n) row-major
tensors is DeepBench's (n, m, k, N, N). Each call is ``torch.mm`` of the row-major views that
are the column-major operands (transposed views where DeepBench's are not: cuBLAS takes the
transpose flags, nothing is copied). Writes ``$OUT/gemm_graph.csv`` (``$OUT`` defaults to the
current folder) row by row, so a run cut short keeps what it measured. Without PyTorch and a
CUDA device it says so and measures nothing.

``--budget S`` stops starting new shapes after S seconds (default 240).

``--kernels`` times no graphs: each (shape, precision) is called ``KERNEL_CALLS`` times under
the profiler and every kernel it launched goes to ``$OUT/gemm_kernels.csv``, one row per
(shape, precision, kernel name): launches per call and mean duration. It shows which products
cuBLAS splits over the reduction with a reduction kernel of its own (``splitKreduce``) and what
that kernel costs.

``--unaligned`` measures what a product whose stored rows are not a multiple of 16 bytes runs
at, for the catalog: Hopper's tensor-core kernels load their tiles with the TMA, which needs
such rows, and cuBLAS runs other kernels where they are not. Large products (``UNALIGNED``:
4096 and 8192 cubed, and the same with m, n or k two less) in each precision, timed as graph
replays, with the longest kernel's name, go to ``$OUT/gemm_unaligned.csv``."""

from __future__ import annotations

import csv
import os
import sys
import time

try:
    import torch
except ImportError:
    torch = None

#: bench/gpu_kernel_sweep.py's shapes, as torch.mm's (m, n, k)
SWEEP = [(n, n, n) for n in (64, 128, 256, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192)]
SWEEP += [(m, b, m) for m in (1760, 2048, 2560, 4096) for b in (16, 64, 128, 7000)]
SWEEP += [(1760, 32, 1760), (5124, 9124, 2560), (35, 8457, 2560), (7680, 64, 2560),
          (3072, 128, 1024), (512, 24000, 2816)]  # fmt: skip
PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
#: how long one replay should take at least, and the most calls a graph holds
REPLAY_S, MAX_CALLS, REPLAYS = 2e-3, 100, 5


def shapes() -> list[tuple[int, int, int, str, str]]:
    """(m, n, k, a_t, b_t) in DeepBench's terms: its own shapes, then the sweep's, each once."""
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "devices", "catalog", "kernels", "deepbench_gemm.csv")
    out: list[tuple[int, int, int, str, str]] = []
    with open(path) as f:
        for r in csv.DictReader(f):
            key = (int(r["m"]), int(r["n"]), int(r["k"]), r["a_t"], r["b_t"])
            if key not in out:
                out.append(key)
    for m, n, k in SWEEP:
        key = (n, m, k, "N", "N")
        if key not in out:
            out.append(key)
    return out


def operands(m: int, n: int, k: int, a_t: str, b_t: str, dtype) -> tuple:
    """Row-major (X1, X2) with X1 @ X2 = C^T (n x m): X1 is op(B)^T (n x k), X2 op(A)^T (k x m)."""
    dev = "cuda"
    x1 = torch.randn(n, k, device=dev, dtype=dtype) if b_t == "N" else (
        torch.randn(k, n, device=dev, dtype=dtype).t())  # fmt: skip
    x2 = torch.randn(k, m, device=dev, dtype=dtype) if a_t == "N" else (
        torch.randn(m, k, device=dev, dtype=dtype).t())  # fmt: skip
    return x1, x2


def graph_seconds(fn, calls: int | None = None) -> float:
    """Seconds a call: the best of REPLAYS replays of a CUDA graph of ``calls`` back-to-back
    calls (default: enough for REPLAY_S a replay, at most MAX_CALLS)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if calls is None:
        a.record()
        fn()
        b.record()
        b.synchronize()
        calls = int(max(2, min(MAX_CALLS, REPLAY_S / max(a.elapsed_time(b) / 1e3, 1e-7))))
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    best = float("inf")
    for _ in range(REPLAYS + 1):  # the first replay uploads the graph: not counted
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        best = min(best, a.elapsed_time(b) / 1e3 / calls)
    del g
    return best


KERNEL_CALLS = 5
#: (m, n, k) of torch.mm: aligned cubes, then each with one dimension two shorter (float16 rows
#: of 8190 elements are 16380 bytes; float32 ones 32760: neither a multiple of 16)
UNALIGNED = [(s, s, s) for s in (4096, 8192)]
UNALIGNED += [(s - (i == 0) * 2, s - (i == 1) * 2, s - (i == 2) * 2) for s in (4096, 8192)
              for i in range(3)]  # fmt: skip


def unaligned(label: str, out_dir: str) -> int:
    """The ``--unaligned`` measurement (module docstring)."""
    out = os.path.join(out_dir, "gemm_unaligned.csv")
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["device", "precision", "m", "n", "k", "ms", "tflops", "kernel"])
        for p in PRECISIONS:
            torch.backends.cuda.matmul.allow_tf32 = p == "tf32"
            dtype = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16,
                     "bf16": torch.bfloat16}[p]  # fmt: skip
            for m, n, k in UNALIGNED:
                x1 = torch.randn(m, k, device="cuda", dtype=dtype)
                x2 = torch.randn(k, n, device="cuda", dtype=dtype)
                sec = graph_seconds(lambda x1=x1, x2=x2: torch.mm(x1, x2))
                name = kernel_rows(lambda x1=x1, x2=x2: torch.mm(x1, x2), 2)[0][0]
                tf = 2.0 * m * n * k / sec / 1e12
                w.writerow([label, p, m, n, k, f"{sec * 1e3:.6g}", f"{tf:.1f}", name[:160]])
                f.flush()
                print(f"{p} {m}x{n}x{k}: {sec * 1e3:.3f} ms {tf:.0f} TFLOP/s {name[:60]}")
    print(f"gpu_gemm_sweep --unaligned -> {out}")
    return 0


def kernel_rows(fn, calls: int) -> list[tuple[str, float, float]]:
    """(name, launches per call, mean us per launch) of every kernel that ``calls`` calls of
    ``fn`` launched (after three unprofiled calls), the longest in total first."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    seen: dict[str, list[float]] = {}
    for ev in prof.events():
        if str(ev.device_type).endswith("CUDA"):
            seen.setdefault(ev.name, []).append(ev.time_range.elapsed_us())
    rows = [(k, len(v) / calls, sum(v) / len(v)) for k, v in seen.items()]
    return sorted(rows, key=lambda r: -r[1] * r[2])


def main(argv: list[str]) -> int:
    if torch is None or not torch.cuda.is_available():
        print("gpu_gemm_sweep: needs PyTorch and a CUDA device (none here); measured nothing")
        return 0
    budget = float(argv[argv.index("--budget") + 1]) if "--budget" in argv else 240.0
    name = torch.cuda.get_device_name(0)
    label = next((g for g in ("H200", "H100", "A100", "V100") if g in name), name)
    if "--unaligned" in argv:
        return unaligned(label, os.environ.get("OUT", "."))
    kernels = "--kernels" in argv
    out = os.path.join(
        os.environ.get("OUT", "."), "gemm_kernels.csv" if kernels else "gemm_graph.csv"
    )
    t0 = time.perf_counter()
    done = 0
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        head = ["device", "precision", "m", "n", "k", "a_t", "b_t"]
        w.writerow(head + (["kernel", "per_call", "us"] if kernels else ["ms"]))
        for m, n, k, a_t, b_t in shapes():
            if time.perf_counter() - t0 > budget:
                print(f"budget of {budget:.0f} s spent: stopped after {done} shapes")
                break
            for p in PRECISIONS:
                torch.backends.cuda.matmul.allow_tf32 = p == "tf32"
                dtype = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16,
                         "bf16": torch.bfloat16}[p]  # fmt: skip
                x1, x2 = operands(m, n, k, a_t, b_t, dtype)
                if kernels:
                    for kname, per_call, us in kernel_rows(
                        lambda x1=x1, x2=x2: torch.mm(x1, x2), KERNEL_CALLS
                    ):
                        w.writerow([label, p, m, n, k, a_t, b_t, kname[:160]]
                                   + [f"{per_call:.3g}", f"{us:.4g}"])  # fmt: skip
                    continue
                sec = graph_seconds(lambda x1=x1, x2=x2: torch.mm(x1, x2))
                w.writerow([label, p, m, n, k, a_t, b_t, f"{sec * 1e3:.6g}"])
                f.flush()
            done += 1
    print(f"gpu_gemm_sweep: {name}, {done} shapes x {len(PRECISIONS)} precisions -> {out} "
          f"({time.perf_counter() - t0:.0f} s)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
