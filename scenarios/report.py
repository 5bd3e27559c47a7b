"""The report of a scenario run: tables and figures chosen by what the sweep varies, and a
predicted-vs-published table where the scenario names published values."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from hetbed.reports import Report, figures

from .runner import normalized_speedups
from .schema import describe

_SHOW = [
    "workers",
    "backup_workers",
    "strategy",
    "ps",
    "nic",
    "step_time_p50_s",
    "step_time_p90_s",
    "step_time_p99_s",
    "examples_per_s",
    "dropped_gradients",
    "mean_staleness",
    "ps_nic_utilization",
    "final_accuracy",
    "time_to_target_s",
]


def _point_label(row: Any, keys: list[str]) -> str:
    return ", ".join(f"{k.split('.')[-1]}={row[k]}" for k in keys) if keys else "run"


def comparison(sc: dict, summary: pd.DataFrame) -> pd.DataFrame:
    """Predicted vs published rows for the scenario's ``published`` values."""
    rows = []
    for pub in sc["scenario"].get("published", []):
        point = pub.get("point", {})
        sel = summary
        for k, v in point.items():
            if k in sel:
                sel = sel[sel[k] == v]
        metric = pub["metric"]
        predicted = math.nan
        if metric == "normalized_speedup" and "backup_workers" in summary:
            ns = normalized_speedups(summary)
            predicted = float(ns.loc[sel.index[0]]) if len(sel) else math.nan
        elif metric == "sync_over_async_median_step":
            s = sel[sel.strategy == "sync"].step_time_p50_s
            a = sel[sel.strategy == "async"].step_time_p50_s
            if len(s) and len(a):
                predicted = float(s.iloc[0] / a.iloc[0])
        elif len(sel) and metric in sel:
            predicted = float(sel[metric].iloc[0])
        value = float(pub["value"])
        rows.append(
            {
                "what": pub.get("note", metric),
                "where": ", ".join(f"{k.split('.')[-1]}={v}" for k, v in point.items()),
                "metric": metric,
                "published": value,
                "predicted": predicted,
                "error_pct": (predicted - value) / value * 100 if value else math.nan,
            }
        )
    return pd.DataFrame(rows)


def build(
    sc: dict,
    summary: pd.DataFrame,
    steps: pd.DataFrame,
    manifest: dict,
    gradients: pd.DataFrame | None = None,
    curves: pd.DataFrame | None = None,
) -> Report:
    keys = list(sc.get("sweep", {}))
    rep = Report(sc["scenario"]["name"])
    rep.code(describe(sc))
    if sc["scenario"].get("description"):
        rep.text(sc["scenario"]["description"])
    cmp = comparison(sc, summary)
    if len(cmp):
        rep.heading("Predicted vs published")
        rep.text(f"Reference: {sc['scenario'].get('reference') or 'as stated in the scenario'}.")
        rep.table(cmp, ".3g")
    s = summary.copy()
    label_cols = [k for k in keys if k in s]
    labels = {i: _point_label(r, label_cols) for i, r in s.iterrows()}
    if "backup_workers" in [k.split(".")[-1] for k in keys]:
        s["normalized_speedup"] = normalized_speedups(s)
        rep.heading("Backup workers")
        rep.figure(
            figures.lines(
                s.assign(series="median"),
                "backup_workers",
                "step_time_p50_s",
                "series",
                "backup workers",
                "median step time (s)",
                "Median step time vs backup workers",
            ),
            "backup_median",
        )
        rep.figure(
            figures.lines(
                s.assign(series="t(0)/t(b) x N/(N+b)"),
                "backup_workers",
                "normalized_speedup",
                "series",
                "backup workers",
                "normalized speedup",
                "Normalized speedup vs backup workers",
            ),
            "backup_speedup",
        )
    if "workers" in [k.split(".")[-1] for k in keys] and "strategy" in s:
        rep.heading("Scaling")
        rep.figure(
            figures.lines(
                s,
                "workers",
                "examples_per_s",
                "strategy",
                "workers",
                "throughput (examples/s)",
                "Throughput vs workers",
                logx=True,
            ),
            "throughput",
        )
        base = s.loc[s.workers.idxmin()]

        def speedup(r: Any) -> float:
            ref = s[(s.workers == base.workers) & (s.strategy == r.strategy)]
            return (
                r.examples_per_s / ref.examples_per_s.iloc[0] * base.workers
                if len(ref)
                else math.nan
            )

        s["speedup"] = [speedup(r) for r in s.itertuples()]
        ideal = pd.DataFrame({"workers": sorted(s.workers.unique()), "strategy": "ideal"})
        ideal["speedup"] = ideal.workers.astype(float)
        rep.figure(
            figures.lines(
                pd.concat([s, ideal], ignore_index=True),
                "workers",
                "speedup",
                "strategy",
                "workers",
                f"speedup (x one worker, scaled from {base.workers} workers)",
                "Speedup vs workers",
                logx=True,
            ),
            "speedup",
        )
        rep.figure(
            figures.lines(
                s,
                "workers",
                "step_time_p50_s",
                "strategy",
                "workers",
                "median step time (s)",
                "Median step time per worker",
                logx=True,
            ),
            "step_time",
        )
    sync_points = [i for i, r in s.iterrows() if r.get("strategy") != "async"]
    if sync_points and len(steps):
        st = steps[steps.point.isin(sync_points)]
        rep.heading("Step-time distribution")
        rep.figure(
            figures.step_time_cdf(
                st,
                "point",
                {i: labels.get(i, str(i)) for i in sync_points},
                "Step times (synchronous points)",
            ),
            "step_cdf",
        )
    if curves is not None and len(curves):
        rep.heading("Time to accuracy (real gradients, simulated time)")
        c = curves.assign(point=[labels.get(i, str(i)) for i in curves.point])
        rep.figure(
            figures.lines(
                c,
                "time_s",
                "accuracy",
                "point",
                "simulated time (s)",
                "test accuracy",
                "Accuracy vs simulated time",
            ),
            "time_to_accuracy",
        )
    grads = gradients
    if grads is not None and len(grads):
        acc = grads[grads.accepted]
        rep.heading("Staleness of asynchronous updates")
        rep.figure(
            figures.histograms(
                {labels.get(i, str(i)): g.staleness.to_numpy() for i, g in acc.groupby("point")},
                "staleness (global steps between read and apply)",
                "Staleness of applied gradients",
            ),
            "staleness",
        )
    if "ps_nic_utilization" in s and len(s) > 1:
        rep.heading("Network: the busiest PS link")
        rep.figure(
            figures.bars(
                [labels[i] for i in s.index],
                list(100 * s.ps_nic_utilization),
                "utilization (%)",
                "Busiest PS NIC, per direction, over the run",
            ),
            "ps_link_utilization",
            "Bytes moved by the busiest PS shard / (NIC bandwidth x simulated time).",
        )
    if len(s) > 1 and not {"backup_workers", "workers"} & {k.split(".")[-1] for k in keys}:
        rep.heading("Throughput per configuration")
        rep.figure(
            figures.bars(
                [labels[i] for i in s.index],
                list(s.examples_per_s),
                "throughput (examples/s)",
                "Throughput",
            ),
            "throughput_bars",
        )
    rep.heading("All points")
    rep.table(
        s[
            [
                c
                for c in _SHOW + (["normalized_speedup"] if "normalized_speedup" in s else [])
                if c in s
            ]
        ],
        ".4g",
    )
    rep.text(
        f"Simulated in {manifest.get('wall_s', 0):.1f} s of wall time; seed "
        f"{manifest.get('seed')}; hetbed {manifest.get('versions', {}).get('hetbed', '?')}."
    )
    return rep


def write(
    out_dir: str,
    sc: dict,
    summary: pd.DataFrame,
    steps: pd.DataFrame,
    manifest: dict,
    gradients: pd.DataFrame | None = None,
    curves: pd.DataFrame | None = None,
) -> dict:
    return build(sc, summary, steps, manifest, gradients, curves).write(out_dir)


def regenerate(out_dir: str) -> dict:
    """Rebuild the report of a saved results folder (``hetbed report DIR``)."""
    from . import results

    sc, summary, steps, manifest = results.load(out_dir)
    return write(
        out_dir,
        sc,
        summary,
        steps,
        manifest,
        results.load_gradients(out_dir),
        results.load_curves(out_dir),
    )


__all__ = ["build", "comparison", "regenerate", "write"]
