"""Training steps on one GPU: bench/mlp_step.py's MLP and bench/cnn_step.py's CNN on hetbed's
cupy device beside PyTorch CUDA (when installed).

Each step feeds the batch from host memory (both frameworks copy it to the GPU) and ends with a
device synchronisation, so kernels are timed, not launches. Without cupy and a CUDA device the
table says so and every target line reads NOT measured.
Target (issue 18): hetbed on cupy <= 1.2x PyTorch CUDA, for each model.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import cnn_step  # noqa: E402
import mlp_step  # noqa: E402
from common import best_of, optional, table, verdict  # noqa: E402

import hetbed as hb  # noqa: E402
from hetbed.devices.gpu import cupy_or_none  # noqa: E402

TARGET = 1.2


def hetbed_mlp(cp):
    x_np, y_np, ws, bs = mlp_step.data()
    g = hb.Graph()
    with g.as_default(), hb.device("/gpu:0"):
        x = hb.placeholder(hb.float32, [None, mlp_step.SIZES[0]])
        y = hb.placeholder(hb.int32, [None])
        h = x
        for i, (w0, b0) in enumerate(zip(ws, bs)):
            h = hb.nn.bias_add(hb.matmul(h, hb.Variable(w0)), hb.Variable(b0))
            if i < len(ws) - 1:
                h = hb.nn.relu(h)
        loss = hb.reduce_mean(hb.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h))
        train = hb.train.GradientDescentOptimizer(mlp_step.LR).minimize(loss)
        sess = hb.Session(graph=g)
        sess.run(hb.global_variables_initializer())
    feed = {x: x_np, y: y_np}
    return _synced(lambda: sess.run(train, feed), cp.cuda.Device(0).synchronize)


def hetbed_cnn(cp):
    x_np, y_np, params = cnn_step.data()
    g = hb.Graph()
    with g.as_default(), hb.device("/gpu:0"):
        x = hb.placeholder(hb.float32, [None, cnn_step.H, cnn_step.H, 1])
        y = hb.placeholder(hb.int32, [None])
        loss = cnn_step._lenet(hb, hb.nn, x, y, params, hb.Variable)
        train = hb.train.GradientDescentOptimizer(cnn_step.LR).minimize(loss)
        sess = hb.Session(graph=g)
        sess.run(hb.global_variables_initializer())
    feed = {x: x_np, y: y_np}
    return _synced(lambda: sess.run(train, feed), cp.cuda.Device(0).synchronize)


def torch_mlp(torch):
    x, y, ws, bs = mlp_step.data()
    dev = torch.device("cuda")
    params = [torch.tensor(a, device=dev, requires_grad=True) for a in ws + bs]
    opt = torch.optim.SGD(params, lr=mlp_step.LR)

    def step():
        h = torch.from_numpy(x).to(dev)
        yt = torch.from_numpy(y).to(dev).long()
        for i in range(3):
            h = h @ params[i] + params[3 + i]
            if i < 2:
                h = torch.relu(h)
        loss = torch.nn.functional.cross_entropy(h, yt)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return _synced(step, torch.cuda.synchronize)


def torch_cnn(torch):
    F = torch.nn.functional
    x_np, y_np, params = cnn_step.data()
    dev = torch.device("cuda")
    w1, b1, w2, b2, w3, b3, w4, b4 = params
    init = [w1.transpose(3, 2, 0, 1), b1, w2.transpose(3, 2, 0, 1), b2, w3, b3, w4, b4]
    ps = [torch.tensor(a.copy(), device=dev, requires_grad=True) for a in init]
    opt = torch.optim.SGD(ps, lr=cnn_step.LR)
    x_nchw = x_np.transpose(0, 3, 1, 2).copy()

    def step():
        xt = torch.from_numpy(x_nchw).to(dev)
        yt = torch.from_numpy(y_np).to(dev).long()
        h = F.max_pool2d(F.relu(F.conv2d(xt, ps[0], ps[1], padding=2)), 2)
        h = F.max_pool2d(F.relu(F.conv2d(h, ps[2], ps[3], padding=2)), 2)
        h = F.relu(h.flatten(1) @ ps[4] + ps[5])
        loss = F.cross_entropy(h @ ps[6] + ps[7], yt)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return _synced(step, torch.cuda.synchronize)


def _synced(step, sync):
    def run():
        step()
        sync()

    run()  # warm up (allocations, kernel compilation)
    return run


def main() -> int:
    cp = cupy_or_none()
    torch = optional("torch")
    if torch is not None and not torch.cuda.is_available():
        torch = None
    lines = []
    for model, ours, theirs in (("mlp", hetbed_mlp, torch_mlp), ("cnn", hetbed_cnn, torch_cnn)):
        rows = []
        h = t = float("nan")
        if cp is not None:
            h = best_of(ours(cp), repeat=5, number=10) * 1e3
            rows.append(("hetbed on cupy", h))
        if torch is not None:
            t = best_of(theirs(torch), repeat=5, number=10) * 1e3
            rows.append(("PyTorch CUDA", t))
        if rows:
            base = "PyTorch CUDA" if torch is not None else rows[0][0]
            print(table(f"gpu_step: {model} step on one GPU", rows, "ms/step", base))
        else:
            print(f"\ngpu_step: {model} step: no cupy with a CUDA device and no PyTorch CUDA here")
        ratio = h / t
        lines.append(
            f"target hetbed {model} step <= {TARGET}x PyTorch CUDA: "
            + (f"{ratio:.2f}x, " if ratio == ratio else "")
            + verdict([ratio], lambda r: r <= TARGET)
        )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
