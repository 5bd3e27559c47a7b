"""Tensor transfers between tasks over loopback gRPC, against a raw socket copy of the same bytes
(the floor), and the latency of a trivial remote step.

A variable of N bytes lives on /job:ps; a step on /job:worker reads it (a cross-task Send/Recv)
and reduces it to a scalar. Transfer time = that step's time minus the same step with a
1-element variable. Target (issue): large transfers at no less than half the raw socket rate.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import best_of, optional  # noqa: E402

import hetbed as hb  # noqa: E402

SIZES = [("1 KB", 1 << 10), ("1 MB", 1 << 20), ("64 MB", 64 << 20), ("256 MB", 256 << 20)]


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


def main() -> None:
    spec = hb.train.ClusterSpec(
        {"ps": [f"127.0.0.1:{_port()}"], "worker": [f"127.0.0.1:{_port()}"]}
    )
    servers = [hb.train.Server(spec, "ps", 0), hb.train.Server(spec, "worker", 0)]
    try:
        rows = []
        sess = hb.Session(servers[1].target)
        steps = {}
        for label, n in [("tiny", 4)] + SIZES:
            with hb.Graph().as_default() as g:
                with hb.device("/job:ps/task:0"):
                    v = hb.Variable(np.ones(n // 4, np.float32), name=f"payload_{n}")
                with hb.device("/job:worker/task:0"):
                    y = hb.reduce_sum(hb.identity(v))
                s = hb.Session(servers[1].target, graph=g)
                s.run(v.initializer)
                number = 20 if n <= (1 << 20) else 3
                steps[label] = best_of(lambda s=s, y=y: s.run(y), repeat=3, number=number)
                s.close()
        sess.close()
        base = steps["tiny"]
        print("\ngrpc_transfer: PS -> worker tensor transfer over loopback gRPC")
        print(
            f"{'size':>8s} {'gRPC GB/s':>10s} {'socket GB/s':>12s} {'x socket':>9s} {'target >=0.5':>13s}"
        )
        worst = float("inf")
        for label, n in SIZES:
            t = max(steps[label] - base, 1e-9)
            raw = raw_socket_s(n)
            g_rate, s_rate = n / t / 1e9, n / raw / 1e9
            ratio = g_rate / s_rate
            if n >= (64 << 20):
                worst = min(worst, ratio)
            ok = "met" if ratio >= 0.5 else "NOT met"
            rows.append((label, g_rate, s_rate, ratio))
            print(
                f"{label:>8s} {g_rate:10.2f} {s_rate:12.2f} {ratio:9.2f} {ok if n >= (64 << 20) else '-':>13s}"
            )
        print(f"trivial remote step latency: {base * 1e6:.0f} us")
        print(
            f"target: large transfers >= 0.5x raw socket: worst {worst:.2f}x, "
            f"{'met' if worst >= 0.5 else 'NOT met'}"
        )
        if optional("tensorflow") is not None:
            print(
                "(tensorflow is installed; a side-by-side TF gRPC server run is not implemented yet)"
            )
    finally:
        for s in servers:
            s.stop()


if __name__ == "__main__":
    main()
