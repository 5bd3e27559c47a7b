"""Fitting a scenario's free parameters to its published values by grid search.

The published entries marked ``fitted = true`` are the targets; every combination of the grid
is simulated (every sweep point, every seed) and scored by the root mean square of the
entries' errors in percent, each error taken as the report takes it (the model's own best
for a ``best`` entry, the gain for ``error_on = "gain"``). The entries not marked fitted are
never looked at, so they stay out of sample. ``hetbed fit`` runs this and prints the table.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable
from typing import Any

import pandas as pd

from hetbed.reports import study

from . import runner, schema


def parse_grid(specs: list[str]) -> dict[str, list[Any]]:
    """``["cluster.worker_efficiency=0.2,0.25", ...]`` -> {field path: values}; each value is
    checked against the field's schema, and an error names the spec."""
    grid: dict[str, list[Any]] = {}
    for spec in specs:
        key, eq, text = spec.partition("=")
        key = key.strip()
        sec, _, name = key.partition(".")
        if not eq or sec not in schema.SCHEMA or name not in schema.SCHEMA[sec]:
            paths = [f"{x}.{n}" for x, fs in schema.SCHEMA.items() for n in fs]
            raise ValueError(
                f"--grid {spec!r}: expected FIELD=V1,V2,... with FIELD a scenario field"
                f"{schema.did_you_mean(key, paths)}"
            )
        field = schema.SCHEMA[sec][name]
        values = []
        for v in text.split(","):
            v = v.strip()
            try:
                parsed: Any = int(v) if field.kind.startswith("int") else float(v)
            except ValueError:
                parsed = v
            if field.kind in ("float+", "float0", "number") and isinstance(parsed, int):
                parsed = float(parsed)
            values.append(schema._check(key, "--grid", field, parsed))
        if not values:
            raise ValueError(f"--grid {spec!r}: no values")
        grid[key] = values
    if not grid:
        raise ValueError("give at least one --grid FIELD=V1,V2,...")
    return grid


def targets(sc: dict) -> list[int]:
    """Indices of the published entries the fit aims at (``fitted = true``)."""
    idx = [i for i, e in enumerate(sc["scenario"]["published"]) if e.get("fitted")]
    if not idx:
        raise ValueError(
            f"{sc['scenario']['name']}: no published entry is marked fitted = true: nothing to "
            "fit to"
        )
    return idx


def score(sc: dict, jobs: int = 1) -> pd.DataFrame:
    """Simulate ``sc`` (every point and seed) and return its comparison table."""
    res = runner.run_all(schema.expand(sc), jobs=jobs)
    summary = runner.summary_frame(res)
    keys = study.keys_of(sc, summary)
    runs, _ = study.derive(summary, keys)
    return study.comparison(sc, study.aggregate(runs, keys), runs)


def grid_search(
    sc: dict,
    grid: dict[str, list[Any]],
    jobs: int = 1,
    progress: Callable[[int, int, dict], None] | None = None,
) -> pd.DataFrame:
    """One row per combination of ``grid``: its values, each fitted entry's prediction and
    error, and ``rms_error_pct``; sorted best first."""
    idx = targets(sc)
    for key in grid:
        if key in sc.get("sweep", {}):
            raise ValueError(f"--grid {key}: the scenario sweeps it; a fitted value is one value")
    rows = []
    combos = list(itertools.product(*grid.values()))
    for n, combo in enumerate(combos, 1):
        one = copy.deepcopy(sc)
        for key, v in zip(grid, combo):
            sec, _, name = key.partition(".")
            one[sec][name] = v
        doc = {k: v for k, v in one.items() if k in schema.SCHEMA or k == "sweep"}
        one = {**schema.validate(doc, f"grid point {dict(zip(grid, combo))}"), "_path": ""}
        cmp = score(one, jobs)
        row: dict[str, Any] = dict(zip(grid, combo))
        errs = []
        for i in idx:
            r = cmp.iloc[i]
            row[f"[{i}] predicted"] = r.predicted
            row[f"[{i}] error_pct"] = r.error_pct
            if r.model_at:
                row[f"[{i}] model_at"] = r.model_at
            errs.append(r.error_pct)
        row["rms_error_pct"] = math.sqrt(sum(e * e for e in errs) / len(errs))
        rows.append(row)
        if progress:
            progress(n, len(combos), row)
    return pd.DataFrame(rows).sort_values("rms_error_pct", kind="stable").reset_index(drop=True)


__all__ = ["grid_search", "parse_grid", "score", "targets"]
