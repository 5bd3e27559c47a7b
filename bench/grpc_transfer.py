"""Tensor transfers between tasks over loopback, per protocol, against a raw socket copy of the
same bytes (the floor), and the latency of a trivial remote step.

Two servers (/job:ps, /job:worker) in this process, for each protocol of ``hb.train.Server``:
``grpc+tcp`` (tensors over the TCP data channel, gRPC for control) and ``grpc`` (tensors as a
chunked gRPC stream). Two measures per size:

- ``RecvTensor``: one fetch of an N-byte array the PS task has sent (by the worker task's peer
  client, as a Recv does): request, header and payload, round trip included.
- ``in a step``: a variable of N bytes lives on /job:ps; a step on /job:worker reads it (a
  cross-task Send/Recv, the PS snapshotting the variable as the Send runs) and fetches one
  element of it. Transfer time = that step's time minus the same step with a 1-element variable
  (too small a difference to resolve at 1 KB: "-").

The floor sends N bytes over one loopback TCP connection and waits for a 1-byte ack. Target
(issue): large transfers (64 MB, 256 MB) at no less than half the raw socket rate, in a step.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import best_of, verdict  # noqa: E402

import hetbed as hb  # noqa: E402

SIZES = [("1 KB", 1 << 10), ("1 MB", 1 << 20), ("64 MB", 64 << 20), ("256 MB", 256 << 20)]
PROTOCOLS = ("grpc+tcp", "grpc")
LARGE = 64 << 20
PS = "/job:ps/replica:0/task:0"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def raw_socket_s(nbytes: int, repeat: int = 3) -> float:
    """Best seconds to send ``nbytes`` over a loopback TCP connection and receive them."""
    payload = memoryview(bytearray(nbytes))
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    got = bytearray(nbytes)

    def serve():
        conn, _ = srv.accept()
        with conn:
            for _ in range(repeat + 1):
                view, n = memoryview(got), 0
                while n < nbytes:
                    n += conn.recv_into(view[n:], nbytes - n)
                conn.sendall(b"k")

    t = threading.Thread(target=serve)
    t.start()
    best = float("inf")
    with socket.create_connection(("127.0.0.1", port)) as c:
        for i in range(repeat + 1):
            t0 = time.perf_counter()
            c.sendall(payload)
            c.recv(1)
            if i:
                best = min(best, time.perf_counter() - t0)
    t.join()
    srv.close()
    return best


def recv_tensor_s(servers: list, nbytes: int, repeat: int) -> float:
    """Best seconds for the worker task to fetch an ``nbytes`` array sent by the PS task."""
    ps, worker = servers
    client = worker._peer(PS)
    value = np.ones(nbytes // 4, np.float32)
    key = f"{PS}/device:cpu:0;1;/job:worker/replica:0/task:0/device:cpu:0;bench;0:0"
    best = float("inf")
    for i in range(repeat + 1):
        step = 10_000_000 + i
        ps.worker.steps.get(step).send(key, value)
        t0 = time.perf_counter()
        got = client.recv_tensor(step, key, 60.0)
        if i:
            best = min(best, time.perf_counter() - t0)
        ps.worker.steps.collect(step)
    assert got.shape == value.shape
    return best


def step_s(target: str, nbytes: int, repeat: int) -> float:
    """Best seconds of one worker step that reads an ``nbytes`` variable living on the PS."""
    with hb.Graph().as_default() as g:
        with hb.device("/job:ps/task:0"):
            v = hb.Variable(np.ones(max(nbytes // 4, 1), np.float32), name=f"payload_{nbytes}")
        with hb.device("/job:worker/task:0"):
            y = hb.identity(v)[:1]  # O(1) on the worker: the step time is the transfer's
        with hb.Session(target, graph=g) as s:
            s.run(v.initializer)
            assert s.run(y)[0] == 1.0
            return best_of(lambda: s.run(y), repeat=repeat, number=1)


def measure(protocol: str) -> tuple[dict, dict, float]:
    spec = hb.train.ClusterSpec(
        {"ps": [f"127.0.0.1:{_port()}"], "worker": [f"127.0.0.1:{_port()}"]}
    )
    servers = [
        hb.train.Server(spec, "ps", 0, protocol=protocol),
        hb.train.Server(spec, "worker", 0, protocol=protocol),
    ]
    try:
        direct, in_step = {}, {}
        tiny = step_s(servers[1].target, 4, 60)
        for _, n in SIZES:
            small = n <= (1 << 20)
            direct[n] = recv_tensor_s(servers, n, 50 if small else 5)
            in_step[n] = step_s(servers[1].target, n, 40 if small else 6) - tiny
        return direct, in_step, tiny
    finally:
        for s in servers:
            s.stop()


# TensorFlow's own gRPC runtime doing the same step (a PS variable read by an O(1) op on the
# worker), in a child process so that TF's import and threads stay out of hetbed's numbers. It
# prints one JSON object: {"tiny": s, "<nbytes>": s, ...} (best step times).
_TF_SCRIPT = r"""
import json, socket, sys, time
import numpy as np
import tensorflow.compat.v1 as tf
tf.disable_eager_execution()
sizes = [int(a) for a in sys.argv[1:]]
def port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
spec = tf.train.ClusterSpec({"ps": [f"127.0.0.1:{port()}"], "worker": [f"127.0.0.1:{port()}"]})
ps = tf.distribute.Server(spec, "ps", 0, start=True)
wk = tf.distribute.Server(spec, "worker", 0, start=True)
def step_s(nbytes, repeat):
    g = tf.Graph()
    with g.as_default():
        with tf.device("/job:ps/task:0"):
            v = tf.Variable(np.ones(max(nbytes // 4, 1), np.float32))
        with tf.device("/job:worker/task:0"):
            y = tf.identity(v)[:1]
        with tf.Session(wk.target, graph=g) as s:
            s.run(v.initializer)
            s.run(y)
            best = float("inf")
            for _ in range(repeat):
                t = time.perf_counter()
                s.run(y)
                best = min(best, time.perf_counter() - t)
            return best
out = {"tiny": step_s(4, 60)}
for n in sizes:
    out[str(n)] = step_s(n, 40 if n <= (1 << 20) else 6) - out["tiny"]
print(json.dumps(out))
"""


def tensorflow_step_s(sizes: list[int]) -> dict | None:
    """Step times of TensorFlow's gRPC runtime (None when tensorflow is not installed or fails)."""
    import importlib.util
    import json
    import subprocess

    if importlib.util.find_spec("tensorflow") is None:  # no import here: TF stays in the child
        return None

    r = subprocess.run(
        [sys.executable, "-c", _TF_SCRIPT, *map(str, sizes)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        print(f"(tensorflow side-by-side failed: {r.stderr.strip().splitlines()[-1:]})")
        return None
    return json.loads(lines[-1])


def main() -> None:
    t_start = time.perf_counter()
    floor = {n: raw_socket_s(n, 50 if n <= (1 << 20) else 5) for _, n in SIZES}
    results = {p: measure(p) for p in PROTOCOLS}
    title = "grpc_transfer: PS -> worker tensor transfer over loopback, GB/s (x raw socket)"
    print(f"\n{title}\n{'-' * len(title)}")
    print(
        f"{'size':>7s} {'protocol':>9s} {'RecvTensor':>11s} {'x socket':>9s} {'in a step':>10s} "
        f"{'x socket':>9s} {'socket':>7s} {'target >=0.5':>13s}"
    )
    # x raw socket of each large transfer in a step, per protocol; NaN when it was unmeasurable
    large: dict[str, list[float]] = {p: [] for p in PROTOCOLS}
    for label, n in SIZES:
        s_rate = n / floor[n] / 1e9
        for p in PROTOCOLS:
            direct, in_step, _ = results[p]
            d_rate = n / direct[n] / 1e9
            if in_step[n] > 20e-6 and n >= (1 << 20):
                st_rate = n / in_step[n] / 1e9
                st = f"{st_rate:10.2f} {st_rate / s_rate:9.2f}"
            else:
                st_rate, st = float("nan"), f"{'-':>10s} {'-':>9s}"
            word = "-"
            if n >= LARGE:
                large[p].append(st_rate / s_rate)
                word = verdict([st_rate / s_rate], lambda r: r >= 0.5)
            print(
                f"{label:>7s} {p:>9s} {d_rate:11.2f} {d_rate / s_rate:9.2f} {st} {s_rate:7.2f} "
                f"{word:>13s}"
            )
    for p in PROTOCOLS:
        tiny = results[p][2]
        print(f"trivial remote step latency ({p}): {tiny * 1e6:.0f} us")
    for p in PROTOCOLS:
        worst = min(large[p], default=float("nan"))
        print(
            f"target: large transfers >= 0.5x raw socket ({p}): worst {worst:.2f}x, "
            f"{verdict(large[p], lambda r: r >= 0.5)}"
        )
    tf_times = tensorflow_step_s([n for _, n in SIZES if n >= (1 << 20)])
    if tf_times is None:
        print(
            "(TensorFlow's gRPC server: not measured, tensorflow is not installed: pip install .[peers])"
        )
    else:
        print(
            "\nsame step on TensorFlow's gRPC runtime (tensorflow-cpu), GB/s (x raw socket; x hetbed)"
        )
        for label, n in SIZES:
            t = tf_times.get(str(n))
            if t is None or t <= 20e-6:
                continue
            rate = n / t / 1e9
            ours = {p: n / results[p][1][n] / 1e9 for p in PROTOCOLS if results[p][1][n] > 20e-6}
            rel = "  ".join(f"{p} {v / rate:.2f}x" for p, v in ours.items())
            print(f"{label:>7s} {rate:8.2f} {rate / (n / floor[n] / 1e9):6.2f}   hetbed: {rel}")
        print(f"trivial remote step latency (TensorFlow): {tf_times['tiny'] * 1e6:.0f} us")
    print(f"(benchmark ran in {time.perf_counter() - t_start:.0f} s)")


if __name__ == "__main__":
    main()
