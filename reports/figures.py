"""Figures for reports (matplotlib, headless): every axis labelled with its unit."""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def step_timeline(ops: Any, flows: Any = None, title: str = "", max_tracks: int = 24) -> Any:
    """A Gantt chart of one step: a row per device (ops) and per transfer path (flows), in ms."""
    tracks: list[tuple[str, list[tuple[float, float]], str]] = []
    for dev, g in ops.groupby("device", sort=True):
        short = dev.replace("/replica:0", "").replace("/device:", " ")
        tracks.append((short, list(zip(g.start_s, g.duration_s)), "tab:blue"))
    if flows is not None and len(flows):
        for (src, dst), g in flows.groupby(["src", "dst"], sort=True):
            s = src.replace("/replica:0", "").split("/device:")[0]
            d = dst.replace("/replica:0", "").split("/device:")[0]
            if s == d:
                continue
            tracks.append((f"{s} -> {d}", list(zip(g.start_s, g.end_s - g.start_s)), "tab:orange"))
    tracks = tracks[:max_tracks]
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(tracks) + 1.4))
    for i, (_, spans, color) in enumerate(tracks):
        ax.broken_barh(
            [(s * 1e3, max(d * 1e3, 1e-4)) for s, d in spans], (i - 0.4, 0.8), facecolors=color
        )
    ax.set_yticks(range(len(tracks)))
    ax.set_yticklabels([t[0] for t in tracks], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("simulated time (ms)")
    ax.set_title(title or "one training step (blue: ops on devices, orange: transfers)")
    ax.grid(axis="x", alpha=0.3)
    return fig


def lines(
    df: Any, x: str, y: str, by: str, xlabel: str, ylabel: str, title: str, logx: bool = False
) -> Any:
    """One line per value of ``by``, with markers."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for key, g in df.groupby(by, sort=False):
        g = g.sort_values(x)
        ax.plot(g[x], g[y], marker="o", label=str(key))
    if logx:
        ax.set_xscale("log", base=2)
        ticks = sorted(df[x].unique())
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(t) for t in ticks])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(title=by)
    return fig


def step_time_cdf(steps: Any, by: str, labels: dict, title: str) -> Any:
    """Empirical CDF of step times (s), one curve per value of ``by``."""
    import numpy as np

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for key, g in steps.groupby(by, sort=True):
        t = np.sort(g.step_time_s.to_numpy())
        if len(t) == 0:
            continue
        ax.plot(t, np.arange(1, len(t) + 1) / len(t), label=labels.get(key, str(key)))
    ax.set_xlabel("step time (s)")
    ax.set_ylabel("fraction of steps")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def bars(labels: list, values: list, ylabel: str, title: str) -> Any:
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    ax.bar(range(len(values)), values, color="tab:blue")
    ax.set_xticks(range(len(values)))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    return fig


def histograms(samples: dict, xlabel: str, title: str, bins: int = 40) -> Any:
    """Overlaid histograms (fraction of samples), one per labelled array."""
    import numpy as np

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for label, x in samples.items():
        x = np.asarray(x)
        if len(x):
            ax.hist(x, bins=bins, histtype="step", weights=np.full(len(x), 1 / len(x)), label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of gradients")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig
