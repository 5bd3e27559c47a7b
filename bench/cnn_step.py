"""One SGD training step of a LeNet-style CNN, batch 64, float32, NHWC.

28x28x1 input, conv 5x5x32 SAME + ReLU, max-pool 2x2, conv 5x5x64 SAME + ReLU, max-pool 2x2,
dense 256 + ReLU, dense 10, softmax cross-entropy, SGD (about 4.3 GFLOP per step).

Prints hetbed's time per step, the BLAS floor (the step's FLOPs at this machine's float32 GEMM
rate, measured in the same run) and, when installed (pip install .[peers]), TensorFlow's compat.v1
Session running the same program (intra_op_parallelism_threads=2, inter_op=1) and PyTorch eager
(2 threads). Each time is the median over rounds of steps run back to back after a pause and
untimed steps, with the spread (min-max) printed; the first step after the pause is printed
apart ("after idle").
Target (issue 17): hetbed within 1.3x of TF1 in the same run.

``--profile`` instead prints where hetbed's step goes: each op's median time over traced steps
(``RunOptions(trace_level=FULL_TRACE)``), the largest first.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import optional, verdict  # noqa: E402

import hetbed as hb  # noqa: E402

B, H, C1, C2, K, D, NCLS, LR = 64, 28, 32, 64, 5, 256, 10, 0.01
FLAT = (H // 4) * (H // 4) * C2
TARGET = 1.3
PAUSE = 0.3  # seconds between two frameworks' rounds (OpenBLAS workers spin ~0.1 s after work)
# Steps run after the pause before the timed ones. On this machine kind (a 2-vCPU VM) the cores
# come back from a 0.3 s idle pause slowly: hetbed's steps 1-4 after it took 23.9 / 24.5 / 18.3 /
# 15.3 ms against 15.1 ms with no pause, and a step after 0.3 s of busy-waiting on one core 17.5
# ms; TF1's 15.7 / 13.7 / 13.4 / 11.5 ms against 11.2 ms. The first step after the pause is
# printed too ("after idle"), not judged.
WARM = 4
NUMBER = 5  # timed steps per round


def data(seed: int = 0):
    """Inputs, labels and initial weights: w1, b1, w2, b2, w3, b3, w4, b4 (numpy, float32)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((B, H, H, 1)).astype(np.float32)
    y = rng.integers(0, NCLS, B).astype(np.int32)

    def he(*shape):
        fan_in = int(np.prod(shape[:-1]))
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)

    params = [
        he(K, K, 1, C1),
        np.zeros(C1, np.float32),
        he(K, K, C1, C2),
        np.zeros(C2, np.float32),
        he(FLAT, D),
        np.zeros(D, np.float32),
        he(D, NCLS),
        np.zeros(NCLS, np.float32),
    ]
    return x, y, params


def step_flops() -> float:
    """Multiply-adds x 2 of the forward pass, the weight gradients and the input gradients (none
    for the image itself)."""
    conv1 = 2.0 * B * H * H * C1 * K * K * 1
    conv2 = 2.0 * B * (H // 2) ** 2 * C2 * K * K * C1
    d1 = 2.0 * B * FLAT * D
    d2 = 2.0 * B * D * NCLS
    return 3 * (conv1 + conv2 + d1 + d2) - conv1


def gemm_rate() -> float:
    a = np.random.default_rng(1).standard_normal((1024, 1024)).astype(np.float32)
    return 2.0 * 1024**3 / min(timed(lambda: a @ a, rounds=7, number=5))


def blas_line() -> str:
    """Which BLAS numpy runs, its kernel architecture and threads (threadpoolctl), in one line."""
    tpc = optional("threadpoolctl")
    if tpc is None:
        return "numpy's BLAS: unknown (threadpoolctl is not installed)"
    infos = [i for i in tpc.threadpool_info() if i.get("user_api") == "blas"]
    infos = [i for i in infos if "numpy" in str(i.get("filepath"))] or infos  # not scipy's
    if not infos:
        return "numpy's BLAS: none found by threadpoolctl"
    parts = [
        f"{i.get('internal_api')} {i.get('version') or ''} ({i.get('prefix')}), "
        f"kernels {i.get('architecture') or 'unknown'}, {i.get('num_threads')} threads"
        for i in infos
    ]
    return "numpy's BLAS: " + "; ".join(parts)


def interleaved(
    fns: dict, rounds: int = 15, number: int = NUMBER, warm: int = WARM
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Seconds per step of each (step, reset) pair in ``fns``: ``rounds`` rounds, each running
    every entry in turn: its ``reset`` (the variables back to their initial values, untimed), a
    pause, ``warm`` steps and then ``number`` steps back to back, so that all see the same machine
    load and the same stretch of training (a single batch learned for long drives gradients
    toward denormals). Returns (per round, the mean of the ``number`` steps; per round, the first
    step after the pause): a training loop runs its steps back to back, and the cores of this
    machine kind come back from an idle pause slowly (see WARM)."""
    for step, reset in fns.values():  # warm-up: compiles, caches, thread pools
        step()
        reset()
    out: dict[str, list[float]] = {name: [] for name in fns}
    first: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, (step, reset) in fns.items():
            reset()
            time.sleep(PAUSE)  # let the previous entry's spinning worker threads go idle
            for i in range(warm):
                t = time.perf_counter()
                step()
                if i == 0:
                    first[name].append(time.perf_counter() - t)
            t = time.perf_counter()
            for _ in range(number):
                step()
            out[name].append((time.perf_counter() - t) / number)
    return out, first


def timed(fn, rounds: int = 7, number: int = 5) -> list[float]:
    """Mean seconds per call of each of ``rounds`` rounds of ``number`` calls (after a warm-up)."""
    fn()
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        out.append((time.perf_counter() - t) / number)
    return out


def _lenet(api, nn, x, y, params, variable):
    """The model written once for hetbed and TF1 (same op names in both)."""
    vs = [variable(p) for p in params]
    w1, b1, w2, b2, w3, b3, w4, b4 = vs
    pool = dict(ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME")
    h = nn.relu(nn.bias_add(nn.conv2d(x, w1, strides=[1, 1, 1, 1], padding="SAME"), b1))
    h = nn.max_pool(h, **pool)
    h = nn.relu(nn.bias_add(nn.conv2d(h, w2, strides=[1, 1, 1, 1], padding="SAME"), b2))
    h = nn.max_pool(h, **pool)
    h = api.reshape(h, [-1, FLAT])
    h = nn.relu(nn.bias_add(api.matmul(h, w3), b3))
    logits = nn.bias_add(api.matmul(h, w4), b4)
    return api.reduce_mean(nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))


def hetbed_step_fn(traced: list | None = None):
    """(step, reset) of hetbed's training step; reset puts the variables back. With ``traced``
    (a list), each step is traced and appends its per-op DataFrame there."""
    x_np, y_np, params = data()
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, [None, H, H, 1])
        y = hb.placeholder(hb.int32, [None])
        loss = _lenet(hb, hb.nn, x, y, params, hb.Variable)
        train = hb.train.GradientDescentOptimizer(LR).minimize(loss)
        init = hb.global_variables_initializer()
        sess = hb.Session(graph=g)
        sess.run(init)
    feed = {x: x_np, y: y_np}
    if traced is None:
        return (lambda: sess.run(train, feed)), (lambda: sess.run(init))

    def step():
        md = hb.RunMetadata()
        sess.run(train, feed, options=hb.RunOptions(trace_level=3), run_metadata=md)
        traced.append(md.step_stats)

    return step, (lambda: sess.run(init))


def profile(steps: int = 30, top: int = 15) -> None:
    """Prints the ``top`` ops of hetbed's step by median time over ``steps`` traced steps."""
    frames: list = []
    step, reset = hetbed_step_fn(frames)
    for i in range(steps + 3):
        if i % 5 == 0:
            reset()  # the same stretch of training as the timed rounds
        step()
    import pandas as pd

    df = pd.concat([f.assign(step=i) for i, f in enumerate(frames[3:])])
    per = df.groupby(["op", "type"]).duration_s.median().sort_values(ascending=False) * 1e3
    total = df.groupby("step").duration_s.sum().median() * 1e3
    print(f"hetbed step, median over {steps} traced steps: ops sum to {total:.2f} ms")
    print(f"{'op':58s} {'type':22s} {'ms':>7s} {'share':>6s}")
    for (op, kind), ms in per.head(top).items():
        print(f"{op[:58]:58s} {kind[:22]:22s} {ms:7.3f} {ms / total:6.1%}")


def tf1_step_fn():
    """(step, reset) of the same program on TensorFlow's compat.v1 Session, or None."""
    tf = optional("tensorflow")
    if tf is None:
        return None
    v1 = tf.compat.v1
    x_np, y_np, params = data()
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [None, H, H, 1])
        y = v1.placeholder(tf.int32, [None])
        loss = _lenet(tf, tf.nn, x, y, params, v1.Variable)
        train = v1.train.GradientDescentOptimizer(LR).minimize(loss)
        init = v1.global_variables_initializer()
        cfg = v1.ConfigProto(intra_op_parallelism_threads=2, inter_op_parallelism_threads=1)
        sess = v1.Session(graph=g, config=cfg)
        sess.run(init)
    return (lambda: sess.run(train, {x: x_np, y: y_np})), (lambda: sess.run(init))


def torch_step_fn():
    """(step, reset) of the same model in PyTorch eager (NCHW, 2 threads), or None."""
    torch = optional("torch")
    if torch is None:
        return None
    torch.set_num_threads(2)
    F = torch.nn.functional
    x_np, y_np, params = data()
    xt = torch.from_numpy(x_np.transpose(0, 3, 1, 2).copy())
    yt = torch.from_numpy(y_np).long()
    w1, b1, w2, b2, w3, b3, w4, b4 = params
    init = [w1.transpose(3, 2, 0, 1), b1, w2.transpose(3, 2, 0, 1), b2, w3, b3, w4, b4]
    ps = [torch.tensor(np.ascontiguousarray(a), requires_grad=True) for a in init]
    opt = torch.optim.SGD(ps, lr=LR)

    def step():
        h = F.max_pool2d(F.relu(F.conv2d(xt, ps[0], ps[1], padding=2)), 2)
        h = F.max_pool2d(F.relu(F.conv2d(h, ps[2], ps[3], padding=2)), 2)
        h = h.flatten(1)
        h = F.relu(h @ ps[4] + ps[5])
        loss = F.cross_entropy(h @ ps[6] + ps[7], yt)
        opt.zero_grad()
        loss.backward()
        opt.step()

    def reset():
        with torch.no_grad():
            for p, a in zip(ps, init):
                p.copy_(torch.from_numpy(np.ascontiguousarray(a)))

    return step, reset


def _fmt(name: str, ts: list[float], ref: float | None, floor: float) -> str:
    med = float(np.median(ts)) * 1e3
    spread = f"{min(ts) * 1e3:.1f}-{max(ts) * 1e3:.1f}"
    rel = f"{med / ref:8.2f}" if ref else f"{'-':>8s}"
    return f"{name:22s} {med:9.2f} {spread:>13s} {rel} {med / floor:9.2f}"


def main() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    floor_ms = step_flops() / gemm_rate() * 1e3
    fns = {
        "hetbed": hetbed_step_fn(),
        "TF1 Session": tf1_step_fn(),
        "PyTorch eager": torch_step_fn(),
    }
    runs, first = interleaved({k: v for k, v in fns.items() if v is not None})
    floor_ms = min(floor_ms, step_flops() / gemm_rate() * 1e3)  # the GEMM rate after, too
    ref = float(np.median(runs["TF1 Session"])) * 1e3 if "TF1 Session" in runs else None
    title = f"cnn_step: LeNet-style CNN, batch {B}, SGD ({step_flops() / 1e9:.2f} GFLOP/step)"
    print(f"\n{title}\n{'-' * len(title)}")
    print(
        f"{'':22s} {'ms/step':>9s} {'spread (ms)':>13s} {'x TF1':>8s} {'x floor':>9s} "
        f"{'after idle':>11s}"
    )
    for name in fns:
        if name in runs:
            idle = float(np.median(first[name])) * 1e3
            print(f"{_fmt(name, runs[name], ref, floor_ms)} {idle:11.2f}")
        else:
            print(f"{name:22s} not measured: not installed (pip install .[peers])")
    print(f"{'BLAS floor':22s} {floor_ms:9.2f} {'':>13s} {'':8s} {1.0:9.2f}")
    print(
        f"(medians of {len(runs['hetbed'])} interleaved rounds of {NUMBER} steps back to back, after "
        f"{PAUSE} s idle and {WARM} untimed steps; spread = fastest-slowest round; after idle = "
        "the first step after the pause, not judged)"
    )
    print(blas_line())
    core = os.environ.get("OPENBLAS_CORETYPE")
    if core:  # numpy's BLAS does the convolutions' GEMMs; TF's oneDNN is not bound by this
        print(
            f"note: OPENBLAS_CORETYPE={core} is set in this environment: numpy's OpenBLAS runs "
            f"{core} kernels whatever the CPU supports (the floor above is measured with them); "
            "to measure with the processor's own kernels, unset both in that command alone: "
            "env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/cnn_step.py"
        )
    ratio = float(np.median(runs["hetbed"])) * 1e3 / ref if ref else float("nan")
    word = verdict([ratio], lambda r: r <= TARGET)
    if ref is None:
        word += " (tensorflow is not installed)"
    print(f"target: hetbed <= {TARGET}x TF1: {ratio:.2f}x, {word}")


if __name__ == "__main__":
    if "--profile" in sys.argv[1:]:
        profile()
    else:
        main()
