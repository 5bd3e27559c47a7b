"""Figures for reports (matplotlib, headless): every axis labelled with its unit, a legend
whenever a panel has more than one series, and colours plus markers that stay distinct for
many series (``style``). ``check`` enforces the first two on any Figure."""

from __future__ import annotations

import re
from typing import Any

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")
LINESTYLES = ("-", "--", "-.", ":")
_UNIT = re.compile(r"\([^()]+\)\s*$")


def style(i: int, n: int) -> dict[str, Any]:
    """Colour, marker and line style of series ``i`` of ``n``: tab10 up to 10 series, beyond
    that evenly spaced viridis colours; markers and dashes cycle at other periods so that no two
    of up to 48 series look alike."""
    if n <= 10:
        color = plt.get_cmap("tab10")(i % 10)
    else:
        color = plt.get_cmap("viridis")(0.92 * i / max(n - 1, 1))
    return {
        "color": color,
        "marker": MARKERS[i % len(MARKERS)],
        "linestyle": LINESTYLES[(i // len(MARKERS)) % len(LINESTYLES)],
    }


def check(fig: Any) -> None:
    """Raise ValueError unless every panel of ``fig`` labels both axes, numeric axes with a
    unit in parentheses ("step time (s)"), and has a legend when it draws more than one
    labelled series."""
    for ax in fig.axes:
        if not ax.get_visible() or not ax.has_data():
            continue
        title = ax.get_title() or "(untitled panel)"
        for name, axis, label in (
            ("x", ax.xaxis, ax.get_xlabel()),
            ("y", ax.yaxis, ax.get_ylabel()),
        ):
            categorical = _categorical(axis)
            if not label.strip():
                raise ValueError(f"figure panel {title!r}: the {name} axis has no label")
            if not categorical and not _UNIT.search(label):
                raise ValueError(
                    f"figure panel {title!r}: {name} label {label!r} names no unit in "
                    "parentheses, e.g. 'step time (s)'"
                )
        series = [h for h in ax.get_lines() + ax.containers if _labelled(h)]
        series += [c for c in ax.collections if _labelled(c)]
        if len(series) > 1 and ax.get_legend() is None and not _fig_legend(fig):
            raise ValueError(f"figure panel {title!r}: {len(series)} series and no legend")
        _check_annotations(fig, ax, title)


def _check_annotations(fig: Any, ax: Any, title: str) -> None:
    """Raise ValueError when a point's label (an annotation) leaves its panel upwards or
    downwards (into the title or the axis below) or leaves the figure."""
    from matplotlib.text import Annotation

    notes = [t for t in ax.texts if isinstance(t, Annotation) and t.get_text()]
    if not notes:
        return
    renderer = fig.canvas.get_renderer()
    box, page = ax.get_window_extent(renderer), fig.bbox
    for t in notes:
        b = t.get_window_extent(renderer)
        if b.y1 > box.y1 + 0.5 or b.y0 < box.y0 - 0.5 or b.x0 < page.x0 or b.x1 > page.x1:
            raise ValueError(
                f"figure panel {title!r}: the label {t.get_text()!r} runs out of its panel"
            )


def _categorical(axis: Any) -> bool:
    """Whether the axis's ticks are named by text (configurations), not numbers."""
    for t in axis.get_ticklabels():
        text = t.get_text().replace("\u2212", "-").strip()
        if text:
            try:
                float(text)
            except ValueError:
                return True
    return False


def pd_integer(values: Any) -> bool:
    """Whether a column holds integers only (integer ticks on its axis)."""
    v = np.asarray(values)
    return v.dtype.kind in "iu"


def _labelled(h: Any) -> bool:
    label = h.get_label() if hasattr(h, "get_label") else ""
    return bool(label) and not label.startswith("_")


def _fig_legend(fig: Any) -> bool:
    return bool(fig.legends)


def describe(fig: Any) -> list[dict[str, Any]]:
    """What a figure shows, panel by panel: title, axis labels, legend entries and each labelled
    line's data (what tests and ``hetbed compare`` read instead of pixels)."""
    out = []
    for ax in fig.axes:
        if not ax.has_data():
            continue
        legend = ax.get_legend()
        entries = [t.get_text() for t in legend.get_texts()] if legend is not None else []
        if not entries and fig.legends:
            entries = [t.get_text() for t in fig.legends[0].get_texts()]
        out.append(
            {
                "title": ax.get_title(),
                "xlabel": ax.get_xlabel(),
                "ylabel": ax.get_ylabel(),
                "xscale": ax.get_xscale(),
                "legend": entries,
                "lines": {
                    ln.get_label(): (
                        np.asarray(ln.get_xdata(), float).tolist(),
                        np.asarray(ln.get_ydata(), float).tolist(),
                    )
                    for ln in ax.get_lines()
                    if _labelled(ln)
                },
            }
        )
    return out


def grid(
    data: Any,
    x: str,
    y: str,
    series: str | None,
    facet: str | None,
    xlabel: str,
    ylabel: str,
    title: str,
    *,
    band: tuple[str, str] | None = None,
    band_label: str = "",
    logx: bool = False,
    ideal: dict | None = None,
    overlays: Any = None,
    series_title: str = "",
    facet_title: str = "",
) -> Any:
    """Small multiples: a panel per value of ``facet``, in each a line per value of ``series``
    (x ascending) with an optional shaded band between the columns ``band`` (lo, hi).

    ``ideal``: {facet value or None: (xs, ys)} drawn thin and grey *under* the data.
    ``overlays``: rows with ``x``, ``value``, ``series``, ``facet``, ``label`` (published points),
    drawn as black-edged stars of the series' colour with their label beside them.
    """
    facets = list(dict.fromkeys(data[facet])) if facet else [None]
    keys = list(dict.fromkeys(data[series])) if series else [None]
    n = len(facets)
    cols = min(n, 3)
    rows = -(-n // cols)
    fig, axes = plt.subplots(
        rows,
        cols,
        figsize=(6.4 if n == 1 else 4.6 * cols, 4.0 if n == 1 else 3.6 * rows),
        squeeze=False,
        sharey=True,
    )
    uniq: dict[str, Any] = {}
    labelled = False  # a published value drawn with its label
    for k, fv in enumerate(facets):
        ax = axes[k // cols][k % cols]
        part = data if facet is None else data[data[facet] == fv]
        if ideal and (fv in ideal or None in ideal):
            xs, ys = ideal.get(fv, ideal.get(None))
            ax.plot(xs, ys, color="0.6", lw=1, ls=(0, (4, 3)), zorder=1, label="ideal (linear)")
        for i, key in enumerate(keys):
            g = part if series is None else part[part[series] == key]
            if g.empty:
                continue
            g = g.sort_values(x)
            st = style(i, len(keys))
            label = "simulated" if series is None else f"{series_title or series} = {key}"
            if series is not None and "=" in str(key):  # the key names itself
                label = str(key)
            ax.plot(
                g[x],
                g[y],
                label=label,
                zorder=3,
                ms=5,
                lw=1.6,
                markevery=max(len(g) // 12, 1),
                **st,
            )
            if band is not None and (g[band[1]] > g[band[0]]).any():
                ax.fill_between(
                    g[x], g[band[0]], g[band[1]], color=st["color"], alpha=0.18, lw=0, zorder=2
                )
            if overlays is not None and len(overlays):
                ov = overlays[overlays.series == key] if series else overlays
                if facet is not None:
                    ov = ov[ov.facet == fv]
                for o in ov.itertuples():
                    ax.plot(
                        [o.x],
                        [o.value],
                        marker="*",
                        ms=14,
                        color=st["color"],
                        mec="black",
                        ls="none",
                        zorder=4,
                        label="published ("
                        + ("fitted, in sample" if o.kind == "fitted" else "out of sample")
                        + ")",
                    )
                    ax.annotate(
                        o.label,
                        (o.x, o.value),
                        xytext=(6, 6),
                        textcoords="offset points",
                        fontsize=7,
                    )
                labelled = labelled or len(ov) > 0
        if pd_integer(data[x]):
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if logx:
            ax.set_xscale("log", base=2)
            ticks = sorted(data[x].unique())
            ax.set_xticks(ticks)
            ax.set_xticklabels([f"{t:g}" for t in ticks])
            ax.minorticks_off()
        ax.set_xlabel(xlabel)
        if k % cols == 0:
            ax.set_ylabel(ylabel)
        else:
            ax.set_ylabel(ylabel, alpha=0)  # shared y: keep the label (checked), hide the ink
        ax.set_title(
            title if facet is None else (f"{facet_title} = {fv}" if facet_title else str(fv)),
            fontsize=10 if facet else None,
        )
        ax.grid(alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        uniq.update(zip(labels, handles))
        if facet is None and len(uniq) > 1:
            ax.legend(
                uniq.values(),
                uniq.keys(),
                fontsize=7 if len(uniq) > 6 else 8,
                ncol=2 if len(uniq) > 8 else 1,
            )
    for k in range(n, rows * cols):
        axes[k // cols][k % cols].set_visible(False)
    top = axes[0][0]  # (the panels share y)
    low = data[y].min() if len(data) else None
    if top.get_yscale() == "linear" and low is not None and low >= 0:
        # a magnitude (a step time, a rate, a share) from 0: a 2% difference must not fill the
        # panel as if it were a 2x one
        top.set_ylim(bottom=0)
    if labelled and top.get_yscale() == "linear":
        # headroom for the labels of published values: one at the top of a panel would run
        # into its title
        lo, hi = top.get_ylim()
        top.set_ylim(lo, hi + 0.1 * (hi - lo))
    if facet is not None:
        fig.suptitle(title)
        fig.tight_layout()
        if len(uniq) > 1:  # one legend for every panel, below them
            fig.legend(
                uniq.values(),
                uniq.keys(),
                loc="upper center",
                fontsize=8,
                ncol=min(len(uniq), 4),
                bbox_to_anchor=(0.5, 0.0),
            )
    else:
        fig.tight_layout()
    if band_label:
        fig.text(0.01, -0.02, band_label, fontsize=8, color="0.35")
    return fig


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
    ax.set_ylabel("device or transfer path")
    ax.invert_yaxis()
    ax.set_xlabel("simulated time (ms)")
    ax.set_title(title or "one training step (blue: ops on devices, orange: transfers)")
    ax.grid(axis="x", alpha=0.3)
    return fig


def lines(
    df: Any, x: str, y: str, by: str, xlabel: str, ylabel: str, title: str, logx: bool = False
) -> Any:
    """One line per value of ``by``, with distinct markers."""
    return grid(df, x, y, by, None, xlabel, ylabel, title, logx=logx)


def step_time_cdf(steps: Any, by: str, labels: dict, title: str, facet: str | None = None) -> Any:
    """Empirical CDF of step times (s), one curve per value of ``by`` (a panel per ``facet``)."""
    facets = list(dict.fromkeys(steps[facet])) if facet else [None]
    keys = list(dict.fromkeys(steps[by]))
    cols = min(len(facets), 3)
    rows = -(-len(facets) // cols)
    fig, axes = plt.subplots(
        rows,
        cols,
        figsize=(6.4 if cols == 1 else 4.6 * cols, 4.0 if cols == 1 else 3.6 * rows),
        squeeze=False,
        sharex=True,
        sharey=True,
    )
    for k, fv in enumerate(facets):
        ax = axes[k // cols][k % cols]
        part = steps if facet is None else steps[steps[facet] == fv]
        for i, key in enumerate(keys):
            t = np.sort(part[part[by] == key].step_time_s.to_numpy())
            if len(t) == 0:
                continue
            st = style(i, len(keys))
            ax.plot(
                t,
                np.arange(1, len(t) + 1) / len(t),
                label=labels.get(key, str(key)),
                color=st["color"],
                ls=st["linestyle"],
                marker=st["marker"],
                markevery=max(len(t) // 6, 1),
                ms=4,
            )
        ax.set_xlabel("step time (s)")
        ax.set_ylabel("fraction of steps (CDF)")
        ax.set_title(title if facet is None else f"{fv}", fontsize=10 if facet else None)
        ax.grid(alpha=0.3)
        if len(ax.get_lines()) > 1:
            ax.legend(fontsize=7)
    for k in range(len(facets), rows * cols):
        axes[k // cols][k % cols].set_visible(False)
    if facet is not None:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def bars(
    labels: list,
    values: list,
    ylabel: str,
    title: str,
    lo: Any = None,
    hi: Any = None,
    xlabel: str = "configuration",
) -> Any:
    """A bar per labelled value; ``lo``/``hi`` draw an interval on each bar."""
    fig, ax = plt.subplots(figsize=(max(6.4, 0.5 * len(values) + 2), 3.6))
    v = np.asarray(values, float)
    err = None
    if lo is not None and hi is not None:
        err = np.vstack([v - np.asarray(lo, float), np.asarray(hi, float) - v])
    ax.bar(range(len(v)), v, color="tab:blue", yerr=err, capsize=3 if err is not None else 0)
    ax.set_xticks(range(len(v)))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    return fig


def histograms(samples: dict, xlabel: str, title: str, ylabel: str = "gradients (fraction)") -> Any:
    """Overlaid step histograms (fraction of samples) on one set of integer-aligned bins
    shared by every series, so the series compare bin for bin."""
    arrays = {k: np.asarray(x) for k, x in samples.items() if len(x)}
    hi = max((float(x.max()) for x in arrays.values()), default=1.0)
    width = max(1, int(np.ceil((hi + 1) / 60)))
    edges = np.arange(-0.5, hi + width + 0.5, width)
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for i, (label, x) in enumerate(arrays.items()):
        st = style(i, len(arrays))
        ax.hist(
            x,
            bins=edges,
            histtype="step",
            weights=np.full(len(x), 1 / len(x)),
            label=label,
            color=st["color"],
            ls=st["linestyle"],
            lw=1.5,
        )
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if len(arrays) > 1:
        ax.legend(fontsize=8)
    return fig


def stacked(
    labels: list, parts: dict, ylabel: str, title: str, xlabel: str = "configuration"
) -> Any:
    """A stacked bar per label: ``parts`` maps a part's name to its value per label."""
    fig, ax = plt.subplots(figsize=(max(6.4, 0.55 * len(labels) + 2.5), 4.0))
    bottom = np.zeros(len(labels))
    names = list(parts)
    for i, name in enumerate(names):
        v = np.nan_to_num(np.asarray(parts[name], float))
        ax.bar(
            range(len(labels)), v, bottom=bottom, label=name, color=plt.get_cmap("tab10")(i % 10)
        )
        bottom += v
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig
