# ruff: noqa: B023 - each lambda is timed at once, inside the iteration that made it
"""cuDNN convolutions on a CUDA GPU (PyTorch, CUDA events), all three passes: forward, backward
data and backward filter of DeepBench's convolution shapes and bench/gpu_kernel_sweep.py's, in
float32, TF32 and float16, NHWC (channels_last), timed as replays of a CUDA graph of
back-to-back calls (the kernels' time; the eager time, launched from Python, beside it), with the algorithm cuDNN picked (autotuned, as
TensorFlow and DeepBench do) read off the names of the kernels it ran. Writes
``$OUT/conv_passes.csv`` (``$OUT`` defaults to the current folder) row by row, so a run cut
short keeps what it measured. Its rows from an H200 are
devices/catalog/kernels/h200_conv_passes.csv, which bench/gpu_kernels.py predicts (never fitted)
and uses to check the convolution model's choice of algorithm. Without PyTorch and a CUDA device
it says so and measures nothing.

``--budget S`` stops starting new shapes after S seconds (default 240); ``--from K`` starts at
the K-th shape (0-based), to go on where a run cut short stopped.

``--kernels`` times nothing as a whole: each pass of each shape is run ``KERNEL_CALLS`` times
under the profiler and every kernel it launched is written to ``$OUT/conv_kernels.csv``, one
row per (shape, precision, pass, kernel name): how many times a call launches it and its mean
duration (the profiler's GPU-side span of each launch). A pass's main kernel and the ones around
it (layout conversions, padding, Memsets, split-K reductions) are then counted and timed apart,
which the whole-pass timings cannot do."""

from __future__ import annotations

import csv
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_gemm_sweep import kernel_rows, torch  # noqa: E402 - the profiler's kernel list, shared

# DeepBench's training convolution shapes (N, H, W, C, K, R, S, pad_h, pad_w, stride_h, stride_w)
# are read from the catalog; these come first (the shapes of h200_conv.csv, whose backward passes
# were not timed), then DeepBench's in an order that spreads a cut-short run over all of them.
SWEEP_SHAPES = [
    (32, 224, 224, 3, 64, 7, 7, 3, 3, 2, 2),
    (32, 56, 56, 64, 64, 3, 3, 1, 1, 1, 1),
    (32, 56, 56, 64, 256, 1, 1, 0, 0, 1, 1),
    (32, 28, 28, 128, 128, 3, 3, 1, 1, 1, 1),
    (32, 14, 14, 256, 256, 3, 3, 1, 1, 1, 1),
    (32, 7, 7, 512, 512, 3, 3, 1, 1, 1, 1),
    (32, 35, 35, 192, 64, 1, 1, 0, 0, 1, 1),
    (32, 17, 17, 768, 192, 1, 1, 0, 0, 1, 1),
    (32, 8, 8, 1280, 320, 1, 1, 0, 0, 1, 1),
    (32, 35, 35, 64, 96, 3, 3, 1, 1, 1, 1),
    (32, 17, 17, 160, 160, 3, 3, 1, 1, 1, 1),
    (64, 28, 28, 1, 32, 5, 5, 2, 2, 1, 1),
    (64, 14, 14, 32, 64, 5, 5, 2, 2, 1, 1),
    (16, 112, 112, 64, 64, 3, 3, 1, 1, 1, 1),
    (8, 56, 56, 256, 512, 1, 1, 0, 0, 2, 2),
]
FIELDS = "n h w c k r s pad_h pad_w stride_h stride_w".split()
PASSES = ("fwd", "bwd_input", "bwd_filter")
KERNEL_CALLS = 5


def deepbench_shapes() -> list[tuple]:
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "devices", "catalog", "kernels", "deepbench_conv.csv")
    seen: list[tuple] = []
    with open(path) as f:
        for r in csv.DictReader(f):
            key = tuple(int(r[x]) for x in FIELDS)
            if key not in seen:
                seen.append(key)
    stride = 7  # coprime with the count: every shape once, neighbours far apart
    return [seen[(i * stride) % len(seen)] for i in range(len(seen))]


def algorithm(names: list[str]) -> str:
    """cuDNN's algorithm family from its kernels' names (the longest-running first)."""
    joined = " ".join(n.lower() for n in names)
    for key, label in (
        ("winograd", "winograd"),
        ("fft", "fft"),
        ("implicit", "implicit_gemm"),
        ("xmma", "implicit_gemm"),
        ("cutlass", "implicit_gemm"),
        ("im2col", "gemm_im2col"),
        ("col2im", "gemm_col2im"),
        ("gemm", "gemm"),
        ("conv", "direct"),
    ):
        if key in joined:
            return label
    return "unknown"


def main() -> int:
    if torch is None or not torch.cuda.is_available():
        print("gpu_conv_sweep: no PyTorch with a CUDA device here: nothing measured")
        return 0
    budget = float(sys.argv[sys.argv.index("--budget") + 1]) if "--budget" in sys.argv else 240.0
    out_dir = os.environ.get("OUT", ".")
    dev = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    from torch.profiler import ProfilerActivity, profile

    def events_ms(fn, n: int, groups: int = 3) -> float:
        """Median over ``groups`` of the mean time of ``n`` back-to-back calls, by CUDA events."""
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        res = []
        for _ in range(groups):
            s.record()
            for _ in range(n):
                fn()
            e.record()
            torch.cuda.synchronize()
            res.append(s.elapsed_time(e) / n)
        return statistics.median(res)

    def timeit(fn, out_bytes: int) -> tuple[float, float]:
        """(graph ms, eager ms) of one call of ``fn``: eager, calls launched back to back from
        Python (a small convolution's time is then the host's per-call cost); graph, ``n`` calls
        captured in one CUDA graph and replayed, so that only the kernels' time counts."""
        for _ in range(3):  # cuDNN's autotuning happens here
            fn()
        torch.cuda.synchronize()
        one = events_ms(fn, 1, 1)
        eager = events_ms(fn, int(max(1, min(200, 8.0 / max(one, 1e-3)))))
        n = int(max(1, min(100, 4.0 / max(eager, 1e-3), (8 << 30) // max(out_bytes, 1))))
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                fn()
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for _ in range(n):
                    fn()
            g.replay()
            torch.cuda.synchronize()
            graph = events_ms(g.replay, 1, 5) / n
            del g
        except Exception as e:  # the eager time stands
            print(f"no graph: {type(e).__name__}: {e}", flush=True)
            graph = float("nan")
        return graph, eager

    def kernels(fn) -> list[str]:
        """The names of the (at most 3) kernels that took longest in one call of ``fn``."""
        try:
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                fn()
                torch.cuda.synchronize()
            times: dict[str, float] = {}
            for ev in prof.events():
                if str(ev.device_type).endswith("CUDA"):
                    times[ev.name] = times.get(ev.name, 0.0) + ev.time_range.elapsed_us()
            return [k for k, _ in sorted(times.items(), key=lambda kv: -kv[1])][:3]
        except Exception as e:  # the timings stand without the names
            print(f"no kernel names: {type(e).__name__}: {e}", flush=True)
            return ["?"]

    name = torch.cuda.get_device_name(0).replace("NVIDIA ", "").split()[0]
    if "--kernels" in sys.argv:
        kernels_only = True
        path = os.path.join(out_dir, "conv_kernels.csv")
        header = ["device", "precision", *FIELDS, "pass", "algo", "kernel", "per_call", "us"]
    else:
        kernels_only = False
        path = os.path.join(out_dir, "conv_passes.csv")
        header = ["device", "precision", *FIELDS]
        header += [f"{p}_ms" for p in PASSES] + [f"{p}_eager_ms" for p in PASSES]
        header += [f"{p}_algo" for p in PASSES]
        header += [f"{p}_kernels" for p in PASSES]
    t0 = time.time()
    done = 0
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        first = int(sys.argv[sys.argv.index("--from") + 1]) if "--from" in sys.argv else 0
        for shape in (SWEEP_SHAPES + deepbench_shapes())[first:]:
            if time.time() - t0 > budget:
                break
            n, h, wd, c, k, r, s, ph, pw, sh, sw = shape
            for prec in ("fp32", "tf32", "fp16"):
                torch.backends.cudnn.allow_tf32 = prec == "tf32"
                torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
                torch.cuda.empty_cache()
                ty = torch.float16 if prec == "fp16" else torch.float32
                try:
                    x = torch.randn(n, c, h, wd, device=dev, dtype=ty)
                    x = x.to(memory_format=torch.channels_last)
                    wt = torch.randn(k, c, r, s, device=dev, dtype=ty)
                    wt = wt.to(memory_format=torch.channels_last)
                    y = torch.nn.functional.conv2d(x, wt, stride=(sh, sw), padding=(ph, pw))
                    dy = torch.randn_like(y).contiguous(memory_format=torch.channels_last)
                    conv_bwd = torch.ops.aten.convolution_backward

                    def bwd(mask, dy=dy, x=x, wt=wt):
                        return conv_bwd(
                            dy, x, wt, None, [sh, sw], [ph, pw], [1, 1], False, [0, 0], 1, mask
                        )

                    fns = {
                        "fwd": lambda x=x, wt=wt: torch.nn.functional.conv2d(
                            x, wt, stride=(sh, sw), padding=(ph, pw)
                        ),
                        "bwd_input": lambda: bwd([True, False, False]),
                        "bwd_filter": lambda: bwd([False, True, False]),
                    }
                    ms, eager, algo, names = {}, {}, {}, {}
                    sizes = {"fwd": y, "bwd_input": x, "bwd_filter": wt}
                    if kernels_only:
                        for p, fn in fns.items():  # cuDNN autotunes in the unprofiled calls
                            rows = kernel_rows(fn, KERNEL_CALLS)
                            algo[p] = algorithm([r[0] for r in rows[:3]])
                            for kname, per_call, us in rows:
                                w.writerow(
                                    [name, prec, *shape, p, algo[p], kname[:160]]
                                    + [f"{per_call:.3g}", f"{us:.4g}"]
                                )
                        f.flush()
                        done += 1
                        print(f"{prec} {shape}: " + " ".join(f"{p} {algo[p]}" for p in PASSES))
                        continue
                    for p, fn in fns.items():
                        nb = sizes[p].numel() * sizes[p].element_size()
                        ms[p], eager[p] = timeit(fn, nb)
                        names[p] = kernels(fn)
                        algo[p] = algorithm(names[p])
                except Exception as e:  # a shape cuDNN refuses: say so, go on
                    print(f"skipped {prec} {shape}: {type(e).__name__}: {e}", flush=True)
                    continue
                w.writerow(
                    [name, prec, *shape]
                    + [f"{ms[p]:.6g}" for p in PASSES]
                    + [f"{eager[p]:.6g}" for p in PASSES]
                    + [algo[p] for p in PASSES]
                    + ["|".join(x[:90] for x in names[p]) for p in PASSES]
                )
                f.flush()
                done += 1
                print(
                    f"{prec} {shape}: " + " ".join(f"{p} {ms[p]:.4f} ms {algo[p]}" for p in PASSES),
                    flush=True,
                )
    print(
        f"gpu_conv_sweep: {done} rows in {time.time() - t0:.0f} s on {name} "
        f"(cuDNN {torch.backends.cudnn.version()}, torch {torch.__version__}) -> {path}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
