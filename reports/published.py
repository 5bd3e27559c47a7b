"""Published values beside a study's predictions: ``comparison`` finds, for each
``[scenario] published`` value, the predicted median over seeds at its point (or the model's
own best over a swept setting, per seed) and the error, marked fitted (in sample) or predicted
(out of sample); ``fit_sentence`` says what the scenario's fit is."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from .study_tables import col, short


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
