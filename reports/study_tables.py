"""A study's runs as tables: the names of its settings and metrics, the metrics derived within
each group of runs against that group's baseline (``derive``), and one row per setting with the
median, minimum and maximum over seeds (``aggregate``). study.py builds the report from them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

METRICS = {
    "step_time_p50_s": "median step time (s)",
    "step_time_p90_s": "p90 step time (s)",
    "step_time_p99_s": "p99 step time (s)",
    "mean_step_time_s": "simulated time per completed step (s; async: per applied gradient)",
    "examples_per_s": "throughput (examples/s)",
    "normalized_speedup": "normalized speedup (x)",
    "speedup": "speedup (x one worker)",
    "efficiency": "scaling efficiency (fraction)",
    "dropped_gradients": "dropped gradients (count)",
    "mean_staleness": "mean staleness (steps)",
    "ps_nic_utilization": "busiest PS NIC utilization (fraction)",
    "final_accuracy": "final test accuracy (fraction)",
    "time_to_target_s": "time to target accuracy (s)",
    "failures": "task failures (count)",
    "steps_lost": "steps redone after rollbacks (count)",
    "sim_time_s": "simulated time of the run (s)",
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
    "failures",  # a study with [failures] events: what they cost (shown even when 0)
    "steps_lost",
    "sim_time_s",
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
