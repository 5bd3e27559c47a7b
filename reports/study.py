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

Its parts: study_tables.py (settings, derived metrics, the aggregate over seeds), published.py
(published vs predicted), study_figures.py (the figures and detail sections), compare.py (two
studies side by side); their public names are re-exported here.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from .compare import compare
from .published import comparison, fit_sentence
from .report import Report, number
from .study_figures import _bar_figure, _breakdown, _distributions, _line_figure
from .study_tables import (  # noqa: F401  (re-exported: callers import them from here)
    _BACKUP,
    _WORKERS,
    _ZERO_OK,
    METRICS,
    PUBLISHED_METRICS,
    TABLE,
    aggregate,
    col,
    derive,
    keys_of,
    label,
    layout,
    short,
)


def _cell(r: Any, m: str, seeds: int) -> Any:
    v = r[m]
    if seeds > 1 and not (isinstance(v, float) and math.isnan(v)):
        return f"{number(v)} [{number(r[m + '_min'])}, {number(r[m + '_max'])}]"
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
    outside = {k: v for k, v in manifest.get("catalog", {}).items() if not v.get("builtin", True)}
    if outside:  # numbers that are not the shipped catalog's: say so where the results are read
        rep.text(
            "Catalog entries read from outside the shipped catalog (HETBED_CATALOG_PATH): "
            + "; ".join(
                f"{k} from {v['file']} (sha256 {v['sha256'][:12]}"
                + (", in place of the shipped entry" if v.get("shadows_builtin") else "")
                + ")"
                for k, v in outside.items()
            )
            + "."
        )


def failures_not_reached(sc: dict, summary: pd.DataFrame) -> str:
    """A sentence naming the ``[failures]`` events that some runs ended before (they did not
    happen there, and the failures column counts only those that did); "" when all happened."""
    if "failures_not_reached" not in summary:
        return ""
    short_runs = summary[summary.failures_not_reached.fillna(0) > 0]
    if not len(short_runs):
        return ""
    ended = float(short_runs.sim_time_s.min())
    late = [e for e in (sc.get("failures") or {}).get("events", []) if e["at_s"] >= ended]
    what = "; ".join(f"{e['kind']} {e['index']} at {number(e['at_s'])} s" for e in late)
    return (
        f"Not every failure event happened: {len(short_runs)} of {len(summary)} runs ended "
        f"(from {number(ended)} s of simulated time) before "
        + (what or "some of the events")
        + ". The failures column counts the events that did happen; give run.steps more steps or "
        "an earlier at_s to see them."
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
    late = failures_not_reached(sc, summary)
    if late:
        rep.text(late)
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
        rep.table(cmp[shown + ["error_of", "error_pct", "kind"]])
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
    if "failures" not in agg:  # the simulated time is the table's news where tasks fail
        metrics = [m for m in metrics if m != "sim_time_s"]
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
        None,
        f"Median [min, max] over {seeds} seeds." if seeds > 1 else "One run per setting.",
    )
    return rep


__all__ = ["aggregate", "build", "col", "compare", "comparison", "derive", "layout"]
