"""Tensor transfers between tasks over loopback, per protocol, against a raw socket copy of the
same bytes (the floor), and the latency of a trivial remote step.

Two servers (/job:ps, /job:worker) in this process, for each protocol of ``hb.train.Server``:
``grpc+tcp`` (tensors over the TCP data channel, gRPC for control) and ``grpc`` (tensors as a
chunked gRPC stream). Two measures per size:

- ``RecvTensor``: one fetch of an N-byte array the PS task has sent (by the worker task's peer
  client, as a Recv does): request, header and payload, round trip included.
- ``in a step``: a variable of N bytes lives on /job:ps; a step on /job:worker reads it (a
  cross-task Send/Recv, the PS lending the variable's buffer to its Send) and fetches one element
  of it. Its transfer time is the median, over the steps of a repetition, of that step's time
  minus the time of the same step reading a 1-element variable, run just before it (paired, so
  that both see the machine in the same state).

The floor counts the same way on a plain socket, in the same loop: one loopback TCP connection to
a thread of this process that reads each message (by blocking MSG_WAITALL reads) and acks it with
one byte; after each pair of steps it sends 8 bytes, then N bytes, and its transfer time is the
median of the second send minus the first. Both sides so give the cost the N bytes add to a round
trip that is paid anyway, under the same drift of the machine. (Tried and dropped: the best of N
steps minus the best of M trivial steps against the best of back-to-back sends moved 0.4-1.9x
between repetitions, three minima of different runs; the floor's pairs in a loop of their own
before the steps moved 0.66-1.34x between repetitions and runs, the machine's state drifting in
between.) The best-of figures are printed beside, not judged. The whole measurement runs REPS
times (TensorFlow's too, the same way, in one child process); the table gives medians over the
repetitions and the spread (min-max) beside them.

Targets (issue), for the default protocol (grpc+tcp): a trivial remote step no slower than
TensorFlow's; transfers of 1 MB and more in a step at >= 0.8x the raw socket rate and >= 1.0x
TensorFlow's rate.
"""

from __future__ import annotations

import os
import socket
import statistics
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import verdict  # noqa: E402

import hetbed as hb  # noqa: E402

SIZES = [("1 KB", 1 << 10), ("1 MB", 1 << 20), ("64 MB", 64 << 20), ("256 MB", 256 << 20)]
PROTOCOLS = ("grpc+tcp", "grpc")
LARGE = 1 << 20
REPS = 5
# Steps timed per measure: a trivial step (its best is the trivial-step target's number, TF's
# alike), and pairs of steps for a transfer of at most 1 MB and for a larger one.
TINY_STEPS, SMALL_STEPS, BIG_STEPS = 300, 200, 6
PS = "/job:ps/replica:0/task:0"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Floor:
    """A loopback TCP connection to a thread of this process that reads each message (an 8-byte
    length, then that many bytes, by blocking MSG_WAITALL reads: the fastest plain way, no
    return to Python per segment) and acks it with one byte: ``send(n)`` is the seconds of one.
    Each size has buffers of its own at both ends, written once before its first send, as
    hetbed's side has (a variable filled on the PS, receive buffers reused): 1 MB sends out of
    the first megabyte of 256 MB buffers measured 2x slower than out of 1 MB ones."""

    def __init__(self):
        self._bufs: dict[int, tuple[memoryview, memoryview]] = {}
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        self._thread = threading.Thread(target=self._serve, args=(srv,), daemon=True)
        self._thread.start()
        self._conn = socket.create_connection(srv.getsockname())

    def _serve(self, srv: socket.socket) -> None:
        conn, _ = srv.accept()
        srv.close()
        with conn:
            while True:
                head = conn.recv(8, socket.MSG_WAITALL)
                if len(head) < 8:
                    return
                n, got = int.from_bytes(head, "little"), 0
                into = self._bufs[n][1]
                while got < n:  # one system call for all of it, the GIL let go meanwhile
                    k = conn.recv_into(into[got:], n - got, socket.MSG_WAITALL)
                    if not k:
                        return
                    got += k
                conn.sendall(b"k")

    def send(self, nbytes: int) -> float:
        if nbytes not in self._bufs:  # (its first sends ran up to 1.6x slower: three untimed)
            self._bufs[nbytes] = tuple(memoryview(np.ones(nbytes, np.uint8)) for _ in range(2))
            for _ in range(3):
                self.send(nbytes)
        payload = self._bufs[nbytes][0]
        t0 = time.perf_counter()
        self._conn.sendmsg([nbytes.to_bytes(8, "little"), payload])
        if self._conn.recv(1) != b"k":
            raise RuntimeError("the floor's reader hung up")
        return time.perf_counter() - t0

    def close(self) -> None:
        self._conn.close()
        self._thread.join()


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


def _session(target: str, sizes: list[int]) -> tuple:
    """A session on ``target`` whose graph reads a variable of each of ``sizes`` bytes (and a
    1-element one, ``tiny``) living on the PS from the worker: (session, {nbytes: fetch})."""
    g = hb.Graph()
    fetch = {}
    with g.as_default():
        for n in sizes:
            with hb.device("/job:ps/task:0"):
                # filled on the PS: a constant initial value would travel in the graph itself
                v = hb.Variable(hb.ones([max(n // 4, 1)], hb.float32), name=f"payload_{n}")
            with hb.device("/job:worker/task:0"):
                fetch[n] = hb.identity(v)[:1]  # O(1) on the worker: the rest is the transfer
        s = hb.Session(target, graph=g)
        s.run(hb.global_variables_initializer())
    for y in fetch.values():
        assert s.run(y)[0] == 1.0
    return s, fetch


def _timed(s, y) -> float:
    t0 = time.perf_counter()
    s.run(y)
    return time.perf_counter() - t0


def in_step(target: str, sizes: list[int], floor: Floor) -> tuple[float, dict]:
    """The best trivial step (seconds), and per size, over a loop of [trivial step, step
    reading that size, 8-byte send, send of that size]: (median of the second step minus the
    first, median of the second send minus the first, the best of the steps reading that size
    minus the best trivial step, the best send of that size minus the best 8-byte one), seconds."""
    s, fetch = _session(target, [4, *sizes])
    try:
        tiny = fetch[4]
        best_tiny = min(_timed(s, tiny) for _ in range(TINY_STEPS))
        out = {}
        for n in sizes:
            steps, sends = ([], []), ([], [])
            for i in range((SMALL_STEPS if n <= LARGE else BIG_STEPS) + 2):  # 2 to warm up
                a, b = _timed(s, tiny), _timed(s, fetch[n])
                c, d = floor.send(8), floor.send(n)
                if i >= 2:
                    for (small, big), x, y in ((steps, a, b), (sends, c, d)):
                        small.append(x)
                        big.append(y)
            out[n] = (
                statistics.median(y - x for x, y in zip(*steps)),
                statistics.median(y - x for x, y in zip(*sends)),
                min(steps[1]) - best_tiny,
                min(sends[1]) - min(sends[0]),
            )
        return best_tiny, out
    finally:
        s.close()


def measure(protocol: str, floor: Floor) -> tuple[dict, dict, float]:
    """RecvTensor seconds per size, ``in_step``'s tuples per size, and the best trivial step."""
    spec = hb.train.ClusterSpec(
        {"ps": [f"127.0.0.1:{_port()}"], "worker": [f"127.0.0.1:{_port()}"]}
    )
    servers = [
        hb.train.Server(spec, "ps", 0, protocol=protocol),
        hb.train.Server(spec, "worker", 0, protocol=protocol),
    ]
    try:
        direct = {n: recv_tensor_s(servers, n, 50 if n <= LARGE else 5) for _, n in SIZES}
        tiny, steps = in_step(servers[1].target, [n for _, n in SIZES], floor)
        return direct, steps, tiny
    finally:
        for s in servers:
            s.stop()


# TensorFlow's own gRPC runtime doing the same steps (PS variables read by an O(1) op on the
# worker; each transfer the median of paired steps, as for hetbed), in a child process so that
# TF's import and threads stay out of hetbed's numbers. It prints one JSON object: {"tiny":
# [best trivial step per repetition], "<nbytes>": [[median paired, best-of] per repetition]}.
_TF_SCRIPT = r"""
import json, socket, statistics, sys, time
import numpy as np
import tensorflow.compat.v1 as tf
tf.disable_eager_execution()
sizes = [int(a) for a in sys.argv[5:]]
def port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
spec = tf.train.ClusterSpec({"ps": [f"127.0.0.1:{port()}"], "worker": [f"127.0.0.1:{port()}"]})
ps = tf.distribute.Server(spec, "ps", 0, start=True)
wk = tf.distribute.Server(spec, "worker", 0, start=True)
def timed(s, y):
    t = time.perf_counter()
    s.run(y)
    return time.perf_counter() - t
reps, tiny_steps, small_steps, big_steps = (int(a) for a in sys.argv[1:5])
out = {"tiny": []}
for _ in range(reps):
    g = tf.Graph()
    with g.as_default():
        fetch = {}
        for n in [4, *sizes]:
            with tf.device("/job:ps/task:0"):
                v = tf.Variable(np.ones(max(n // 4, 1), np.float32))
            with tf.device("/job:worker/task:0"):
                fetch[n] = tf.identity(v)[:1]
        with tf.Session(wk.target, graph=g) as s:
            s.run(tf.global_variables_initializer())
            for y in fetch.values():
                s.run(y)
            best_tiny = min(timed(s, fetch[4]) for _ in range(tiny_steps))
            out["tiny"].append(best_tiny)
            for n in sizes:
                pairs, bigs = [], []
                for i in range((small_steps if n <= (1 << 20) else big_steps) + 2):
                    a, b = timed(s, fetch[4]), timed(s, fetch[n])
                    if i >= 2:
                        pairs.append(b - a)
                        bigs.append(b)
                out.setdefault(str(n), []).append(
                    [statistics.median(pairs), min(bigs) - best_tiny]
                )
print(json.dumps(out))
"""


def tensorflow_step_s(sizes: list[int]) -> dict | None:
    """Step times of TensorFlow's gRPC runtime, a list of REPS per measure (None when tensorflow
    is not installed or fails)."""
    import importlib.util
    import json
    import subprocess

    if importlib.util.find_spec("tensorflow") is None:  # no import here: TF stays in the child
        return None

    r = subprocess.run(
        [
            sys.executable,
            "-c",
            _TF_SCRIPT,
            *map(str, (REPS, TINY_STEPS, SMALL_STEPS, BIG_STEPS)),
            *map(str, sizes),
        ],
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


def _med(xs: list[float]) -> float:
    """The median of the finite values (NaN: none)."""
    xs = [x for x in xs if np.isfinite(x)]
    return float(np.median(xs)) if xs else float("nan")


def _spread(xs: list[float], fmt: str = "{:.2f}") -> str:
    return f"{fmt.format(min(xs))}-{fmt.format(max(xs))}" if xs else "-"


def _rate(n: int, seconds: float) -> float:
    """GB/s; NaN when the step-time difference is too small to resolve."""
    return n / seconds / 1e9 if seconds > 20e-6 and n >= LARGE else float("nan")


def main() -> None:
    t_start = time.perf_counter()
    floor = Floor()
    # per protocol and size, one entry per repetition: RecvTensor GB/s; in a step GB/s (median
    # paired), the floor's GB/s (median paired) and their ratio; the best-of ratio
    direct = {p: {n: [] for _, n in SIZES} for p in PROTOCOLS}
    in_step_rate = {p: {n: [] for _, n in SIZES} for p in PROTOCOLS}
    floor_rate = {p: {n: [] for _, n in SIZES} for p in PROTOCOLS}
    ratio = {p: {n: [] for _, n in SIZES} for p in PROTOCOLS}
    best_ratio = {p: {n: [] for _, n in SIZES} for p in PROTOCOLS}
    tiny = {p: [] for p in PROTOCOLS}
    for rep in range(REPS):
        print(f"(repetition {rep + 1} of {REPS})", flush=True)
        for p in PROTOCOLS:
            d, steps, t = measure(p, floor)
            tiny[p].append(t)
            for _, n in SIZES:
                pair, send, best_pair, best_send = steps[n]
                direct[p][n].append(n / d[n] / 1e9)
                in_step_rate[p][n].append(_rate(n, pair))
                floor_rate[p][n].append(_rate(n, send))
                ratio[p][n].append(_rate(n, pair) / _rate(n, send))
                best_ratio[p][n].append(_rate(n, best_pair) / _rate(n, best_send))
    floor.close()
    tf_times = tensorflow_step_s([n for _, n in SIZES if n >= LARGE])
    tf_rate, tf_best = {}, {}
    if tf_times is not None:
        for _, n in SIZES:
            rows = tf_times.get(str(n), [])
            tf_rate[n] = [_rate(n, pair) for pair, _ in rows]
            tf_best[n] = [_rate(n, best) for _, best in rows]

    title = (
        f"grpc_transfer: PS -> worker tensor over loopback, GB/s, median of {REPS} "
        "(in a step and socket: medians of pairs; spread of x socket)"
    )
    print(f"\n{title}\n{'-' * len(title)}")
    print(
        f"{'size':>7s} {'protocol':>9s} {'RecvTensor':>11s} {'in a step':>10s} {'socket':>7s} "
        f"{'x socket':>9s} {'spread':>10s} {'x TF':>6s}   {'best-of x socket (not judged)':>29s}"
    )
    for label, n in SIZES:
        for p in PROTOCOLS:
            st, sock = _med(in_step_rate[p][n]), _med(floor_rate[p][n])
            ratios = [r for r in ratio[p][n] if np.isfinite(r)]
            vs_tf = st / _med(tf_rate[n]) if tf_rate.get(n) else float("nan")
            best = [r for r in best_ratio[p][n] if np.isfinite(r)]
            print(
                f"{label:>7s} {p:>9s} {_med(direct[p][n]):11.2f} {st:10.2f} {sock:7.2f} "
                f"{_med(ratios):9.2f} {_spread(ratios):>10s} {vs_tf:6.2f}   "
                f"{_med(best):8.2f} ({_spread(best)})"
            )
    if tf_times is not None:
        for label, n in SIZES:
            if tf_rate.get(n):
                print(
                    f"{label:>7s} {'TF 2 gRPC':>9s} {'':11s} {_med(tf_rate[n]):10.2f}"
                    f"   (best-of {_med(tf_best[n]):.2f})"
                )
    print()
    for p in PROTOCOLS:
        print(
            f"trivial remote step ({p}): best of {TINY_STEPS}, median {_med(tiny[p]) * 1e6:.0f} us "
            f"(spread {_spread([t * 1e6 for t in tiny[p]], '{:.0f}')} us)"
        )
    tf_tiny = tf_times["tiny"] if tf_times is not None else []
    if tf_tiny:
        print(
            f"trivial remote step (TensorFlow): median {_med(tf_tiny) * 1e6:.0f} us "
            f"(spread {_spread([t * 1e6 for t in tf_tiny], '{:.0f}')} us)"
        )
    else:
        print(
            "(TensorFlow's gRPC runtime: not measured; tensorflow is not installed: pip install .[peers])"
        )
    p = "grpc+tcp"
    large = [n for _, n in SIZES if n >= LARGE]
    vs_socket = [_med(ratio[p][n]) for n in large]
    print(
        f"target: trivial remote step <= TensorFlow's ({p}): "
        f"{_med(tiny[p]) * 1e6:.0f} vs {_med(tf_tiny) * 1e6:.0f} us, "
        f"{verdict([_med(tiny[p]) / _med(tf_tiny)] if tf_tiny else [], lambda r: r <= 1.0)}"
    )
    print(
        f"target: transfers >= 1 MB in a step >= 0.8x raw socket ({p}): worst "
        f"{min(vs_socket):.2f}x, {verdict(vs_socket, lambda r: r >= 0.8)}"
    )
    vs_tf = [_med(in_step_rate[p][n]) / _med(tf_rate[n]) for n in large if tf_rate.get(n)]
    worst = f"{min(vs_tf):.2f}x" if vs_tf else "-"
    print(
        f"target: transfers >= 1 MB in a step >= 1.0x TensorFlow's ({p}): worst {worst}, "
        f"{verdict(vs_tf if len(vs_tf) == len(large) else [], lambda r: r >= 1.0)}"
    )
    print(f"(benchmark ran in {time.perf_counter() - t_start:.0f} s)")


if __name__ == "__main__":
    main()
