"""Two studies side by side: the settings that differ, the same figures with both studies, and
per setting the metric deltas B - A, flagged where they exceed a threshold and the spread over
seeds of both."""

from __future__ import annotations

import math

import pandas as pd

from .report import Report
from .study_figures import _line_figure
from .study_tables import TABLE, aggregate, col, derive, keys_of, layout, short


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
    shared = [x for x in aggs[0].setting if x in set(aggs[1].setting)]
    if len(delta):
        rep.table(
            delta,
            None,
            f"changed: |B - A| > {threshold_pct:g}% of A and beyond the min-max "
            "spread over seeds of both.",
        )
    elif shared:
        rep.text(
            f"No metric differs between A and B at the {len(shared)} setting(s) both have "
            f"({'; '.join(shared)})."
        )
    else:
        rep.text("A and B have no setting in common: there is nothing to subtract.")
    only = [
        f"{n} only: {'; '.join(x for x in ag.setting if x not in shared)}"
        for n, ag in zip(("A", "B"), aggs)
        if any(x not in shared for x in ag.setting)
    ]
    if only:
        rep.text("Settings in one study only (not compared): " + ". ".join(only) + ".")
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
