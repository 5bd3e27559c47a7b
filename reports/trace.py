"""Perfetto / Chrome trace JSON of a step-level run: a process per setting, a track per worker,
each gradient's pull, compute and push as slices, and the steps on a track of their own."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

PHASES = (
    ("pull", "pull_start_s", "pull_end_s"),
    ("compute", "pull_end_s", "compute_end_s"),
    ("push", "compute_end_s", "push_end_s"),
)


def step_trace(
    runs: list[tuple[str, pd.DataFrame, pd.DataFrame]], max_steps: int = 10, max_workers: int = 32
) -> dict:
    """The trace of ``runs`` (label, steps, gradients), each cut to its first ``max_steps``
    steps and ``max_workers`` workers; open it in ui.perfetto.dev."""
    events: list[dict[str, Any]] = []
    for pid, (label, steps, grads) in enumerate(runs):
        events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": label}})
        events.append(
            {"ph": "M", "name": "thread_name", "pid": pid, "tid": 0, "args": {"name": "steps"}}
        )
        first = steps.sort_values("step").head(max_steps)
        end = float(first.end_s.max()) if len(first) else math.inf
        for r in first.itertuples():
            events.append(
                _slice(
                    pid,
                    0,
                    f"step {r.step}",
                    r.start_s,
                    r.end_s,
                    "step",
                    {"dropped": int(r.dropped)},
                )
            )
        g = grads[(grads.worker < max_workers) & (grads.pull_start_s <= end)]
        for w in sorted(set(g.worker)):
            events.append(
                {
                    "ph": "M",
                    "name": "thread_name",
                    "pid": pid,
                    "tid": int(w) + 1,
                    "args": {"name": f"worker {w}"},
                }
            )
        for r in g.itertuples():
            for name, a, b in PHASES:
                t0, t1 = getattr(r, a), getattr(r, b)
                if not (math.isnan(t0) or math.isnan(t1)):
                    events.append(
                        _slice(
                            pid,
                            int(r.worker) + 1,
                            name,
                            t0,
                            t1,
                            name,
                            {"step": int(r.step), "accepted": bool(r.accepted)},
                        )
                    )
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def _slice(pid: int, tid: int, name: str, t0: float, t1: float, cat: str, args: dict) -> dict:
    return {
        "ph": "X",
        "name": name,
        "cat": cat,
        "pid": pid,
        "tid": tid,
        "ts": t0 * 1e6,
        "dur": max(t1 - t0, 0.0) * 1e6,
        "args": args,
    }


def link_utilization(
    grads: pd.DataFrame,
    n_workers: int,
    step_bytes: float,
    shard_bytes: float,
    worker_bw: float,
    ps_bw: float,
    until_s: float,
    bins: int = 200,
) -> pd.DataFrame:
    """Utilization over time of the busiest links of a PS run: the busiest PS shard's NIC out
    (pulls) and in (pushes), and the mean worker NIC in (pulls) and out (pushes), in ``bins``
    intervals up to ``until_s``. Each transfer's bytes are spread evenly over its duration (the
    flow model's rate varies within a transfer; this is its average), clipped at 1 where the
    averaging overstates overlapping transfers."""
    edges = np.linspace(0.0, until_s, bins + 1)
    out = {"time_s": (edges[:-1] + edges[1:]) / 2}
    for name, a, b, nbytes, bw in (
        ("PS NIC out (pulls)", "pull_start_s", "pull_end_s", shard_bytes, ps_bw),
        ("PS NIC in (pushes)", "compute_end_s", "push_end_s", shard_bytes, ps_bw),
        ("worker NIC in (pulls)", "pull_start_s", "pull_end_s", step_bytes, worker_bw * n_workers),
        (
            "worker NIC out (pushes)",
            "compute_end_s",
            "push_end_s",
            step_bytes,
            worker_bw * n_workers,
        ),
    ):
        g = grads.dropna(subset=[a, b])
        g = g[(g[a] < until_s) & (g[b] > g[a])]
        t0, t1 = g[a].to_numpy(float), g[b].to_numpy(float)
        rate = nbytes / (t1 - t0)
        moved = np.zeros(bins)
        for lo, hi, r in zip(t0, t1, rate):  # bytes of each transfer falling in each bin
            overlap = np.clip(np.minimum(edges[1:], hi) - np.maximum(edges[:-1], lo), 0, None)
            moved += overlap * r
        out[name] = np.minimum(moved / (np.diff(edges) * bw), 1.0)
    return pd.DataFrame(out)
