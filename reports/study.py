"""The report of a study: a scenario's runs (every sweep point, every seed) as tables and
figures. This module owns study reporting; ``report.Report`` only lays out a document and
``figures`` only draws.

Rules it follows:
- Layout: the first numeric swept setting is the x axis, the next swept setting gives one line
  per value, any further ones give a panel each (small multiples). A figure about one setting
  (normalized speedup of backup workers) puts that setting on x.
- Derived metrics are computed within each group of runs that share every other setting and
  the seed, against that group's own baseline, which the figure names.
- Seeds: every metric is the median over seeds, drawn with a band from the minimum to the
  maximum over seeds; tables show "median [min, max]".
- Published values (``[scenario] published``) are drawn beside the prediction with the error,
  marked fitted (used to calibrate the scenario: in sample) or predicted (out of sample).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from . import figures
from .report import Report

METRICS = {
    "step_time_p50_s": "median step time (s)",
    "step_time_p90_s": "p90 step time (s)",
    "step_time_p99_s": "p99 step time (s)",
    "mean_step_time_s": "mean step time (s)",
    "examples_per_s": "throughput (examples/s)",
    "normalized_speedup": "normalized speedup (x)",
    "speedup": "speedup (x one worker)",
    "efficiency": "scaling efficiency (fraction)",
    "dropped_gradients": "dropped gradients (count)",
    "mean_staleness": "mean staleness (steps)",
    "ps_nic_utilization": "busiest PS NIC utilization (fraction)",
    "final_accuracy": "final test accuracy (fraction)",
    "time_to_target_s": "time to target accuracy (s)",
}
PUBLISHED_METRICS = (*METRICS, "sync_over_async_median_step")
TABLE = (  # the columns of the "All settings" table (every metric is in summary.parquet)
    "step_time_p50_s",
    "step_time_p99_s",
    "examples_per_s",
    "normalized_speedup",
    "speedup",
    "efficiency",
    "dropped_gradients",
    "mean_staleness",
    "ps_nic_utilization",
    "final_accuracy",
    "time_to_target_s",
)
_ZERO_OK = ("dropped_gradients", "mean_staleness")
_NAMES = {"strategy.kind": "strategy", "model.name": "model", "run.seed": "seed"}
_BACKUP, _WORKERS = "strategy.backup_workers", "cluster.workers"


def col(key: str) -> str:
    """The summary column of a setting: ``cluster.workers`` -> ``cluster_workers``."""
    return key.replace(".", "_")


def short(key: str) -> str:
    """A setting's name in labels: ``cluster.workers`` -> ``workers``."""
    return _NAMES.get(key, key.split(".")[-1])


def _unit(key: str) -> str:
    name = short(key)
    return {
        "workers": "workers (count)",
        "backup_workers": "backup workers (count)",
        "ps": "PS tasks (count)",
    }.get(name, f"{name.replace('_', ' ')} (setting)")


def keys_of(sc: dict, summary: pd.DataFrame) -> list[str]:
    """Swept settings that take more than one value in ``summary``."""
    return [k for k in sc.get("sweep", {}) if col(k) in summary and summary[col(k)].nunique() > 1]


def layout(summary: pd.DataFrame, keys: list[str], prefer: str | None = None) -> dict:
    """x, series and facet settings for a figure: ``prefer`` (if swept) or the first numeric
    swept setting on x; the next setting one line per value; the rest a panel per combination."""
    numeric = [k for k in keys if pd.api.types.is_numeric_dtype(summary[col(k)])]
    x = prefer if prefer in keys else (numeric[0] if numeric else None)
    rest = [k for k in keys if k != x]
    return {"x": x, "series": rest[0] if rest else None, "facets": rest[1:]}


# ---- derived metrics ------------------------------------------------------------------------


def derive(summary: pd.DataFrame, keys: list[str]) -> tuple[pd.DataFrame, dict[str, str]]:
    """``summary`` with normalized_speedup (when backup workers are swept) and speedup and
    efficiency (when workers are swept), each run against the baseline run of its group (same
    other settings, same seed); and a sentence per derived metric naming the baselines."""
    s = summary.copy()
    notes: dict[str, str] = {}
    seed = ["run_seed"] if "run_seed" in s else []
    if _BACKUP in keys:
        b, w = col(_BACKUP), col(_WORKERS)
        grp = [col(k) for k in keys if k != _BACKUP] + seed
        b0 = s.groupby(grp)[b].transform("min") if grp else pd.Series(s[b].min(), s.index)
        base = s[s[b] == b0].set_index(grp)["step_time_p50_s"] if grp else None
        t0 = (
            s.set_index(grp).index.map(base).to_numpy(float)
            if grp
            else np.full(len(s), float(s.loc[s[b] == b0.iloc[0], "step_time_p50_s"].iloc[0]))
        )
        s["normalized_speedup"] = t0 / s.step_time_p50_s * (s[w] + b0) / (s[w] + s[b])
        lows = sorted(set(b0))
        notes["normalized_speedup"] = (
            f"normalized speedup = t(b0)/t(b) x (N+b0)/(N+b), median step times, against "
            f"b0 = {', '.join(map(str, lows))} backup workers of the same "
            + ("group (every other setting and seed equal)" if grp else "run")
        )
    if _WORKERS in keys:
        w = col(_WORKERS)
        grp = [col(k) for k in keys if k != _WORKERS] + seed
        w0 = s.groupby(grp)[w].transform("min") if grp else pd.Series(s[w].min(), s.index)
        base = s[s[w] == w0]
        if grp:
            thr0 = s.set_index(grp).index.map(base.set_index(grp)["examples_per_s"])
            thr0 = thr0.to_numpy(float)
        else:
            thr0 = np.full(len(s), float(base.examples_per_s.iloc[0]))
        s["speedup"] = s.examples_per_s / thr0 * w0
        s["efficiency"] = s.speedup / s[w]
        notes["speedup"] = (
            f"speedup = throughput / throughput at the fewest workers of the same group x "
            f"those workers ({', '.join(map(str, sorted(set(w0))))}): linear below them"
        )
    return s, notes


def aggregate(runs: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """One row per setting (combination of swept values): for every metric its median over
    seeds and ``<metric>_min`` / ``<metric>_max``; ``seeds`` counts the runs; ``setting`` is a
    label, ``points`` lists the runs."""
    cols = [col(k) for k in keys]
    metrics = [m for m in METRICS if m in runs]
    rows = []
    groups = runs.groupby(cols, sort=False) if cols else [((), runs)]
    for vals, g in groups:
        vals = vals if isinstance(vals, tuple) else (vals,)
        row: dict[str, Any] = dict(zip(cols, vals))
        for m in metrics:
            v = g[m].astype(float)
            row[m], row[f"{m}_min"], row[f"{m}_max"] = v.median(), v.min(), v.max()
        row["seeds"] = len(g)
        row["points"] = list(g.point) if "point" in g else []
        row["setting"] = label(row, keys)
        rows.append(row)
    return pd.DataFrame(rows)


def label(row: Any, keys: list[str]) -> str:
    return ", ".join(f"{short(k)}={row[col(k)]}" for k in keys) if keys else "run"


# ---- published values -----------------------------------------------------------------------


def comparison(sc: dict, agg: pd.DataFrame, runs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Published vs predicted, one row per ``[scenario] published`` value: the predicted median
    over seeds (and its min-max), the error in percent, and whether the value was ``fitted``
    (the scenario's fit used it: in sample) or ``predicted`` (out of sample).

    An entry with ``best`` ("min"/"max") and ``over`` (a swept setting) compares the paper's
    best with the model's own best over that setting, found per seed (``runs``, one row per
    run, is needed for it); ``model_at`` says where the model's best lies. ``error_on = "gain"``
    takes the error on value - 1 (a 9.5% gain, not the ratio 1.095). A point naming a setting
    the runs do not have, a value no run has, or leaving a swept setting open raises
    ValueError naming the entry."""
    rows = []
    for i, pub in enumerate(sc["scenario"].get("published", [])):
        where = f"scenario.published[{i}]"
        point = dict(pub.get("point", {}))
        metric, value = pub["metric"], float(pub["value"])
        over, model_at = pub.get("over"), ""
        if over or metric == "sync_over_async_median_step":
            if runs is None:
                raise ValueError(f"{where}: {metric} needs the runs (one row per run)")
            free = over or "strategy.kind"
            per_seed, at = _per_seed(sc, runs, point, free, where, pub.get("best"), metric)
            pred = float(np.median(per_seed))
            lo, hi = float(np.min(per_seed)), float(np.max(per_seed))
            if over:
                model_at = _where_best(over, at)
        else:
            sel = _select(sc, agg, point, where)
            if metric not in sel:
                raise ValueError(f"{where}: the runs have no metric {metric!r}")
            pred = float(sel[metric].iloc[0])
            lo, hi = float(sel[f"{metric}_min"].iloc[0]), float(sel[f"{metric}_max"].iloc[0])
        gain = pub.get("error_on", "value") == "gain"
        ref, got = (value - 1, pred - 1) if gain else (value, pred)
        rows.append(
            {
                "what": pub.get("note", metric),
                "where": ", ".join(f"{short(k)}={v}" for k, v in point.items()) or "all",
                "metric": metric,
                "published": value,
                "predicted": pred,
                "predicted_min": lo,
                "predicted_max": hi,
                "model_at": model_at,
                "error_of": "gain (value - 1)" if gain else "value",
                "error_pct": (got - ref) / ref * 100 if ref else math.nan,
                "kind": "fitted" if pub.get("fitted") else "predicted",
                "at": point,
            }
        )
    return pd.DataFrame(rows)


def _fixed(sc: dict, key: str) -> Any:
    sec, _, name = key.partition(".")
    return sc.get(sec, {}).get(name)


def _select(sc: dict, frame: pd.DataFrame, point: dict, where: str, free: str = "") -> pd.DataFrame:
    """The rows of ``frame`` at ``point``: every value named must exist, a setting that was not
    swept must equal the scenario's own value, and a swept setting (but ``free``) the point
    leaves open is taken at the scenario's own value (its ``[section]`` field: the published
    setting), which must be among the runs."""
    sel = frame
    swept = [k for k in sc.get("sweep", {}) if col(k) in frame and frame[col(k)].nunique() > 1]
    for k, v in point.items():
        if k == free:
            continue
        if col(k) not in frame or k not in sc.get("sweep", {}):
            if _fixed(sc, k) != v:
                raise ValueError(
                    f"{where}.point: {k} = {v!r} is not among the runs ({k} is not swept and "
                    f"is {_fixed(sc, k)!r} in every run)"
                )
            continue
        got = sel[sel[col(k)] == v]
        if not len(got):
            vals = set(frame[col(k)])
            have = sorted(v for v in vals if not isinstance(v, str)) + sorted(
                v for v in vals if isinstance(v, str)
            )
            raise ValueError(
                f"{where}.point: no run has {k} = {v!r} (the runs have {', '.join(map(str, have))})"
            )
        sel = got
    for k in swept:  # a swept setting the point leaves open: the scenario's own value
        if k == free or k in point:
            continue
        v = _fixed(sc, k)
        if v not in set(frame[col(k)]):
            raise ValueError(
                f"{where}.point: fix {k} too: the runs sweep it and the scenario's own value "
                f"({v!r}) is not among them, so the entry would match several settings"
            )
        sel = sel[sel[col(k)] == v]
    return sel


def _per_seed(
    sc: dict, runs: pd.DataFrame, point: dict, free: str, where: str, best: str | None, metric: str
) -> tuple[list[float], list[Any]]:
    """Per seed: the best ``metric`` over the ``free`` setting and where it lies, or (for
    sync_over_async_median_step) the sync median step over the async one."""
    sel = _select(sc, runs, point, where, free=free)
    seeds = sel.groupby("run_seed") if "run_seed" in sel else [(0, sel)]
    vals, at = [], []
    for _, g in seeds:
        if best is None:
            kinds = dict(zip(g[col(free)], g.step_time_p50_s))
            if not {"sync", "async"} <= set(kinds):
                raise ValueError(f"{where}: needs runs of both sync and async (strategy.kind)")
            vals.append(float(kinds["sync"] / kinds["async"]))
            continue
        if metric not in g or g[metric].isna().all():
            raise ValueError(f"{where}: the runs have no metric {metric!r}")
        i = g[metric].idxmin() if best == "min" else g[metric].idxmax()
        vals.append(float(g.loc[i, metric]))
        at.append(g.loc[i, col(free)])
    return vals, at


def _where_best(over: str, at: list) -> str:
    counts = pd.Series(at).value_counts()
    mode = counts.index[0]
    spread = ", ".join(f"{v}: {n}" for v, n in sorted(counts.items(), key=lambda kv: str(kv[0])))
    return f"{short(over)}={mode}" + (f" (seeds: {spread})" if len(at) > 1 else "")


def fit_sentence(sc: dict) -> str:
    """What the scenario's fit is: the parameters, what they were fitted to, and how."""
    fit = sc["scenario"].get("fit") or {}
    if not fit:
        return "Nothing in this scenario was fitted to a published value."
    return (
        f"Fitted parameters: {', '.join(fit['parameters'])}, fitted to {fit['fitted_to']} "
        f"(by `{fit['procedure']}`)."
    )


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


# ---- the report -----------------------------------------------------------------------------


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
    u = sorted(set(v))
    return len(u) >= 3 and min(u) > 0 and max(u) / min(u) >= 8


def _bar_figure(rep: Report, agg: pd.DataFrame, metric: str, name: str, title: str) -> None:
    if metric not in agg or agg[metric].isna().all():
        return
    seeds = int(agg.seeds.max())
    lo, hi = (agg[f"{metric}_min"], agg[f"{metric}_max"]) if seeds > 1 else (None, None)
    fig = figures.bars(list(agg.setting), list(agg[metric]), METRICS[metric], title, lo, hi)
    rep.figure(fig, name, f"Median over {seeds} seeds; bars: min to max." if seeds > 1 else "")


def _cell(r: Any, m: str, seeds: int) -> Any:
    v = r[m]
    if seeds > 1 and not (isinstance(v, float) and math.isnan(v)):
        return f"{v:.4g} [{r[m + '_min']:.4g}, {r[m + '_max']:.4g}]"
    return v


def header(rep: Report, sc: dict, manifest: dict, describe_text: str, n_runs: int) -> None:
    """Scenario, every non-default setting, and where/how it ran (machine, versions, time)."""
    rep.code(describe_text)
    if sc["scenario"].get("description"):
        rep.text(sc["scenario"]["description"])
    versions = manifest.get("versions", {})
    rep.text(
        f"{n_runs} runs simulated in {manifest.get('wall_s', 0):.1f} s of wall time on "
        f"{manifest.get('platform', '?')} ({manifest.get('cpus', '?')} CPUs), "
        + ", ".join(f"{k} {v}" for k, v in versions.items())
        + f"; created {manifest.get('created', '?')}."
    )


def build(
    sc: dict,
    summary: pd.DataFrame,
    steps: pd.DataFrame,
    manifest: dict,
    gradients: pd.DataFrame | None = None,
    curves: pd.DataFrame | None = None,
    describe_text: str = "",
) -> Report:
    """The report of a study from its saved tables (``summary`` one row per run, keyed by
    ``point`` like ``steps``, ``gradients`` and ``curves``)."""
    keys = keys_of(sc, summary)
    runs, notes = derive(summary, keys)
    agg = aggregate(runs, keys)
    seeds = int(agg.seeds.max()) if len(agg) else 1
    rep = Report(sc["scenario"]["name"])
    header(rep, sc, manifest, describe_text or sc["scenario"]["name"], len(runs))
    cmp = comparison(sc, agg, runs)
    if len(cmp):
        rep.heading("Predicted vs published")
        rep.text(
            f"Reference: {sc['scenario'].get('reference') or 'as stated in the scenario'}. "
            + fit_sentence(sc)
            + " 'fitted': the fit used this value (in sample); 'predicted': it did not (out of "
            "sample). A best value (shortest step, best speedup) is the model's own best over "
            "the swept setting, per seed; 'model at' says where it lies."
            + (f" Predicted: median [min, max] over {seeds} seeds." if seeds > 1 else "")
        )
        shown = ["what", "where", "metric", "published", "predicted"]
        if seeds > 1:
            shown += ["predicted_min", "predicted_max"]
        if cmp.model_at.any():
            shown.append("model_at")
        rep.table(cmp[shown + ["error_of", "error_pct", "kind"]], ".3g")
    numeric = layout(agg, keys)["x"] is not None
    if keys:
        rep.heading("Step time and throughput")
    if numeric:
        _line_figure(rep, agg, keys, cmp, "step_time_p50_s", "step_time", "Median step time")
        _line_figure(rep, agg, keys, cmp, "examples_per_s", "throughput", "Throughput")
    elif len(agg) > 1:
        _bar_figure(rep, agg, "step_time_p50_s", "step_time", "Median step time")
        _bar_figure(rep, agg, "examples_per_s", "throughput", "Throughput")
    if "normalized_speedup" in runs:
        rep.heading("Backup workers")
        _line_figure(
            rep,
            agg,
            keys,
            cmp,
            "normalized_speedup",
            "backup_speedup",
            "Normalized speedup vs backup workers",
            prefer=_BACKUP,
            note=notes["normalized_speedup"] + ".",
        )
    if "speedup" in runs:
        rep.heading("Scaling")
        _line_figure(
            rep,
            agg,
            keys,
            cmp,
            "speedup",
            "speedup",
            "Speedup vs workers",
            prefer=_WORKERS,
            note=notes["speedup"] + "; dashed grey: ideal.",
            ideal=True,
        )
    _breakdown(rep, runs, agg, steps, gradients)
    _distributions(rep, sc, runs, agg, keys, steps, gradients, curves)
    if "ps_nic_utilization" in agg and len(agg) > 1 and not agg.ps_nic_utilization.isna().all():
        rep.heading("Network: the busiest PS link")
        if numeric:
            _line_figure(
                rep,
                agg,
                keys,
                cmp,
                "ps_nic_utilization",
                "ps_link_utilization",
                "Busiest PS NIC, per direction, over the run",
                note="Bytes moved by the busiest PS shard / (NIC bandwidth x time).",
            )
        else:
            _bar_figure(
                rep,
                agg,
                "ps_nic_utilization",
                "ps_link_utilization",
                "Busiest PS NIC, per direction, over the run",
            )
    rep.heading("All settings")
    metrics = [m for m in TABLE if m in agg and not agg[m].isna().all()]
    metrics = [m for m in metrics if m not in _ZERO_OK or agg[m].abs().max() > 0]
    table = pd.DataFrame(
        [
            {**{short(k): r[col(k)] for k in keys}, **{m: _cell(r, m, seeds) for m in metrics}}
            for _, r in agg.iterrows()
        ]
    )
    if seeds > 1:
        table.insert(len(keys), "seeds", list(agg.seeds))
    rep.table(
        table,
        ".4g",
        f"Median [min, max] over {seeds} seeds." if seeds > 1 else "One run per setting.",
    )
    return rep


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


# ---- two studies side by side ------------------------------------------------------------------


def compare(
    a: tuple, b: tuple, names: tuple[str, str] = ("A", "B"), threshold_pct: float = 5.0
) -> Report:
    """The report comparing two studies, each (scenario, summary, manifest): the settings that
    differ, the same figures with both studies (A solid, B dashed), and per setting the metric
    deltas B - A; a change is flagged when it exceeds ``threshold_pct`` and the min-max spread
    over seeds of both studies."""
    (sa, ra, _), (sb, rb, _) = a, b
    keys = [
        k for k in dict.fromkeys(keys_of(sa, ra) + keys_of(sb, rb)) if col(k) in ra and col(k) in rb
    ]
    aggs = []
    for name, sc, runs in ((names[0], sa, ra), (names[1], sb, rb)):
        derived, _ = derive(runs, [k for k in keys if k in keys_of(sc, runs)])
        aggs.append(aggregate(derived, keys).assign(study=name))
    rep = Report(f"Comparison: {names[0]} vs {names[1]}")
    rep.text(f"A = {names[0]}: {sa['scenario']['name']}. B = {names[1]}: {sb['scenario']['name']}.")
    fixed = [
        c
        for c in ra.columns
        if c in rb.columns
        and c.split("_")[0]
        in ("model", "cluster", "strategy", "stragglers", "failures", "hybrid", "run")
    ]
    diff = [
        {"setting": c, names[0]: _values(ra[c]), names[1]: _values(rb[c])}
        for c in fixed
        if _values(ra[c]) != _values(rb[c])
    ]
    rep.heading("Settings that differ")
    if diff:
        rep.table(pd.DataFrame(diff))
    else:
        rep.text("None: the two studies have the same settings (different code or seeds?).")
    both = pd.concat(aggs, ignore_index=True)
    lay = layout(both, keys)
    if lay["x"] is not None:
        order = [lay["x"], "study"] + [k for k in keys if k != lay["x"]]
        rep.heading("Figures (A and B as separate lines)")
        for metric, title in (
            ("step_time_p50_s", "Median step time"),
            ("examples_per_s", "Throughput"),
        ):
            _line_figure(rep, both, order, pd.DataFrame(), metric, f"compare_{metric}", title)
    rep.heading("Metric deltas (B - A)")
    delta = _deltas(aggs[0], aggs[1], keys, threshold_pct)
    rep.table(
        delta,
        ".4g",
        f"changed: |B - A| > {threshold_pct:g}% of A and beyond the min-max "
        "spread over seeds of both.",
    )
    rep.data["deltas"] = delta.to_dict(orient="records")
    return rep


def _values(s: pd.Series) -> str:
    return ", ".join(map(str, sorted(set(s.astype(str)))))


def _deltas(
    a: pd.DataFrame, b: pd.DataFrame, keys: list[str], threshold_pct: float
) -> pd.DataFrame:
    cols = [col(k) for k in keys]
    m = (
        a.merge(b, on=cols, suffixes=("_a", "_b"))
        if cols
        else a.join(b, lsuffix="_a", rsuffix="_b")
    )
    rows = []
    for _, r in m.iterrows():
        for metric in TABLE:
            if f"{metric}_a" not in r or f"{metric}_b" not in r:
                continue
            va, vb = float(r[f"{metric}_a"]), float(r[f"{metric}_b"])
            if math.isnan(va) or math.isnan(vb) or va == vb:  # nothing to say (baselines too)
                continue
            pct = (vb - va) / abs(va) * 100 if va else math.nan
            apart = r[f"{metric}_min_b"] > r[f"{metric}_max_a"] or (
                r[f"{metric}_max_b"] < r[f"{metric}_min_a"]
            )
            rows.append(
                {
                    **{short(k): r[col(k)] for k in keys},
                    "metric": metric,
                    "A": va,
                    "B": vb,
                    "delta": vb - va,
                    "delta_pct": pct,
                    "changed": "yes" if apart and abs(pct) > threshold_pct else "",
                }
            )
    return pd.DataFrame(rows)


__all__ = ["aggregate", "build", "col", "compare", "comparison", "derive", "layout"]
