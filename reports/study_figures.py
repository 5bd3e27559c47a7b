"""The figures of a study report: line figures laid out by the swept settings (x, one line per
value, panels) with the published values drawn beside them, bar figures, and the detail sections
(where the time goes, the busiest links over time, step-time and staleness distributions, time to
accuracy)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from . import figures
from .report import Report
from .study_tables import METRICS, _unit, col, label, layout, short


def _overlays(cmp: pd.DataFrame, agg: pd.DataFrame, metric: str, lay: dict) -> pd.DataFrame:
    rows = []
    if not len(cmp) or lay["x"] is None:
        return pd.DataFrame(rows)
    for r in cmp[cmp.metric == metric].itertuples():
        if lay["x"] not in r.at:
            continue
        sel = agg
        for k, v in r.at.items():
            if col(k) in sel:
                sel = sel[sel[col(k)] == v]
        for _, a in sel.iterrows():
            rows.append(
                {
                    "x": a[col(lay["x"])],
                    "value": r.published,
                    "series": a[col(lay["series"])] if lay["series"] else None,
                    "facet": a["_facet"] if "_facet" in a else None,
                    "kind": r.kind,
                    "label": f"published {r.published:.4g}, error {r.error_pct:+.1f}%",
                }
            )
    return pd.DataFrame(rows)


# ---- line and bar figures ------------------------------------------------------------------


def _with_facet(agg: pd.DataFrame, lay: dict) -> tuple[pd.DataFrame, str | None]:
    if not lay["facets"]:
        return agg, None
    return agg.assign(_facet=[label(r, lay["facets"]) for _, r in agg.iterrows()]), "_facet"


def _line_figure(
    rep: Report,
    agg: pd.DataFrame,
    keys: list[str],
    cmp: pd.DataFrame,
    metric: str,
    name: str,
    title: str,
    prefer: str | None = None,
    note: str = "",
    ideal: bool = False,
) -> None:
    lay = layout(agg, keys, prefer)
    if lay["x"] is None or metric not in agg or agg[metric].isna().all():
        return
    data, facet = _with_facet(agg, lay)
    x = col(lay["x"])
    seeds = int(agg.seeds.max())
    ideal_line = None
    if ideal:
        xs = sorted(data[x].unique())
        ideal_line = {None: (xs, [float(v) for v in xs])}
    band = (f"{metric}_min", f"{metric}_max") if seeds > 1 else None
    fig = figures.grid(
        data,
        x,
        metric,
        col(lay["series"]) if lay["series"] else None,
        facet,
        _unit(lay["x"]),
        METRICS[metric],
        title,
        band=band,
        logx=_is_pow2(data[x]),
        ideal=ideal_line,
        overlays=_overlays(cmp, data, metric, lay),
        series_title=short(lay["series"]) if lay["series"] else "",
    )
    spread = f"Median over {seeds} seeds; band: min to max over seeds. " if seeds > 1 else ""
    rep.figure(fig, name, (spread + note).strip())


def _is_pow2(v: pd.Series) -> bool:
    """Whether the swept values want a logarithmic axis (ticked at the values): two or more,
    all positive, spanning 8x or more (checkpoints every 20 and 1,000 steps, 1 to 64 workers)."""
    u = sorted(set(v))
    return len(u) >= 2 and min(u) > 0 and max(u) / min(u) >= 8


def _bar_figure(rep: Report, agg: pd.DataFrame, metric: str, name: str, title: str) -> None:
    if metric not in agg or agg[metric].isna().all():
        return
    seeds = int(agg.seeds.max())
    lo, hi = (agg[f"{metric}_min"], agg[f"{metric}_max"]) if seeds > 1 else (None, None)
    fig = figures.bars(list(agg.setting), list(agg[metric]), METRICS[metric], title, lo, hi)
    rep.figure(fig, name, f"Median over {seeds} seeds; bars: min to max." if seeds > 1 else "")


# ---- the detail sections -------------------------------------------------------------------

_PARTS = {
    "wait": "wait to start (barrier)",
    "pull": "pull parameters",
    "compute": "compute (median worker)",
    "straggler": "wait for stragglers",
    "push": "push gradients",
    "apply": "PS aggregate + apply",
}


def _breakdown(
    rep: Report, runs: pd.DataFrame, agg: pd.DataFrame, steps: pd.DataFrame, gradients: Any
) -> None:
    cols = [f"breakdown_{p}_s" for p in _PARTS]
    if not all(c in runs for c in cols) or runs[cols].isna().all().all():
        return
    med = {p: [] for p in _PARTS}
    for r in agg.itertuples():
        sel = runs[runs.point.isin(r.points)]
        for p in _PARTS:
            med[p].append(float(sel[f"breakdown_{p}_s"].median()))
    rep.heading("Where the time goes")
    rep.figure(
        figures.stacked(
            list(agg.setting),
            {_PARTS[p]: [v * 1e3 for v in med[p]] for p in _PARTS},
            "time per step on the critical path (ms)",
            "Step-time breakdown",
        ),
        "breakdown",
        "Mean over steps (median over seeds). Sync: the critical worker of a step is the accepted "
        "gradient that finished its push last; its time from the step's start splits into "
        "waiting to start, pull, compute up to the step's median compute, compute beyond it "
        "(stragglers), push, and PS aggregation and apply until the step ends. Workers do not "
        "overlap transfers with compute in the step-level model, so the parts are disjoint and "
        "add up to the mean step time. Async: the same parts per applied gradient.",
    )
    if gradients is None or not len(gradients) or "pull_start_s" not in gradients:
        return
    from .trace import step_trace

    _links_over_time(rep, runs, agg, steps, gradients)
    picked = [(r.setting, r.points[0]) for r in agg.itertuples()][:12]
    doc = step_trace(
        [(s, steps[steps.point == p], gradients[gradients.point == p]) for s, p in picked]
    )
    import json

    rep.attachment(
        "step_trace.json",
        json.dumps(doc).encode(),
        "A trace of the first 10 steps of each setting (first seed; a track per worker, up to 32; "
        "pulls, compute and pushes as slices): open it in ui.perfetto.dev:",
    )


def _links_over_time(
    rep: Report, runs: pd.DataFrame, agg: pd.DataFrame, steps: pd.DataFrame, gradients: Any
) -> None:
    """Utilization over the first 10 steps of the busiest links, for up to 6 settings (the
    first and last ones when there are more), first seed."""
    from .trace import link_utilization

    need = ["step_bytes", "busiest_shard_step_bytes", "worker_nic_bytes_per_s"]
    if not all(c in runs for c in need):
        return
    rows = list(agg.itertuples())
    rows = rows if len(rows) <= 6 else rows[:3] + rows[-3:]
    frames = []
    for r in rows:
        run = runs[runs.point == r.points[0]].iloc[0]
        st = steps[steps.point == r.points[0]].sort_values("step").head(10)
        if not len(st) or pd.isna(run.step_bytes):
            continue
        u = link_utilization(
            gradients[gradients.point == r.points[0]],
            int(run.cluster_workers + run.strategy_backup_workers),
            run.step_bytes,
            run.busiest_shard_step_bytes,
            run.worker_nic_bytes_per_s,
            run.ps_nic_bytes_per_s,
            float(st.end_s.max()),
        )
        long = u.melt(id_vars="time_s", var_name="link", value_name="utilization")
        frames.append(long.assign(setting=r.setting))
    if not frames:
        return
    data = pd.concat(frames, ignore_index=True)
    rep.figure(
        figures.grid(
            data,
            "time_s",
            "utilization",
            "link",
            "setting" if len(frames) > 1 else None,
            "simulated time (s)",
            "link utilization (fraction)",
            "Busiest links over the first 10 steps",
            series_title="link",
        ),
        "links_over_time",
        "First seed. PS NIC: the busiest shard's link; worker NIC: the mean over workers. Each "
        "transfer's bytes are spread evenly over its duration (the flow model's rate varies "
        "within a transfer; this is its average, clipped at 1), in 200 intervals.",
    )


def _distributions(
    rep: Report,
    sc: dict,
    runs: pd.DataFrame,
    agg: pd.DataFrame,
    keys: list[str],
    steps: pd.DataFrame,
    gradients: Any,
    curves: Any,
) -> None:
    setting_of = {p: r.setting for r in agg.itertuples() for p in r.points}
    sync = runs[runs.get("strategy_kind", pd.Series("sync", runs.index)) != "async"]
    if len(sync) and len(steps):
        st = steps[steps.point.isin(set(sync.point))].copy()
        st["setting"] = st.point.map(setting_of)
        lay = layout(agg, keys)
        facet = None
        if len(agg) > 6 and lay["series"] is not None:
            st["panel"] = st.point.map(
                {
                    p: f"{short(lay['series'])}={v}"
                    for p, v in zip(runs.point, runs[col(lay["series"])])
                }
            )
            facet = "panel"
            st["setting"] = st.point.map(
                {
                    p: label(r, [k for k in keys if k != lay["series"]])
                    for p, (_, r) in zip(runs.point, runs.iterrows())
                }
            )
        rep.heading("Step-time distribution")
        rep.figure(
            figures.step_time_cdf(st, "setting", {}, "Step times (synchronous runs)", facet),
            "step_cdf",
            "Steps of every seed pooled per setting." if int(agg.seeds.max()) > 1 else "",
        )
    if gradients is not None and len(gradients) and "strategy_kind" in runs:
        async_points = set(runs.point[runs.strategy_kind == "async"])
        acc = gradients[gradients.accepted & gradients.point.isin(async_points)]
    else:
        acc = gradients[gradients.accepted] if gradients is not None and len(gradients) else None
    if acc is not None and len(acc):
        rep.heading("Staleness of asynchronous updates")
        rep.figure(
            figures.histograms(
                {s: g.staleness.to_numpy() for s, g in acc.groupby(acc.point.map(setting_of))},
                "staleness (global steps between read and apply)",
                "Staleness of applied gradients",
            ),
            "staleness",
            "Same integer bins for every series; seeds pooled.",
        )
    if curves is not None and len(curves):
        first = {r.points[0] for r in agg.itertuples()}
        c = curves[curves.point.isin(first)]
        c = c.assign(setting=c.point.map(setting_of))
        rep.heading("Time to accuracy (real gradients, simulated time)")
        rep.figure(
            figures.grid(
                c,
                "time_s",
                "accuracy",
                "setting",
                None,
                "simulated time (s)",
                "test accuracy (fraction)",
                "Accuracy vs simulated time",
                series_title="setting",
            ),
            "time_to_accuracy",
            "First seed of each setting.",
        )
