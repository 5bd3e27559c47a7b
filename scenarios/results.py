"""Saved results of a scenario run: Parquet tables, the scenario file and a manifest, so that a
report can be regenerated without rerunning (``hetbed report DIR``)."""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import time
from typing import Any

import pandas as pd

from hetbed.devices.fileio import atomic_write as _atomic

from . import schema


def save(out_dir: str, sc: dict, results: list, wall_s: float) -> dict[str, str]:
    """Write summary.parquet, steps.parquet, scenario.toml and manifest.json into ``out_dir``."""
    from .runner import summary_frame

    os.makedirs(out_dir, exist_ok=True)
    summary = summary_frame(results)
    steps = []
    for i, r in enumerate(results):
        df = r.steps.copy()
        df.insert(0, "point", i)
        steps.append(df)
    steps_df = pd.concat(steps, ignore_index=True) if steps else pd.DataFrame()
    grads = [r.gradients.assign(point=i) for i, r in enumerate(results) if r.gradients is not None]
    grads_df = pd.concat(grads, ignore_index=True) if grads else pd.DataFrame()
    curves = [r.curve.assign(point=i) for i, r in enumerate(results) if r.curve is not None]
    curve_df = pd.concat(curves, ignore_index=True) if curves else pd.DataFrame()
    paths = {
        "summary": os.path.join(out_dir, "summary.parquet"),
        "steps": os.path.join(out_dir, "steps.parquet"),
        "scenario": os.path.join(out_dir, "scenario.toml"),
        "manifest": os.path.join(out_dir, "manifest.json"),
    }
    _atomic(paths["summary"], lambda p: summary.to_parquet(p, index=False))
    _atomic(paths["steps"], lambda p: steps_df.to_parquet(p, index=False))
    for name, df in (("gradients", grads_df), ("curves", curve_df)):
        path = os.path.join(out_dir, f"{name}.parquet")
        if len(df):  # no empty files; none left over from an earlier run in this folder
            _atomic(path, lambda p, df=df: df.to_parquet(p, index=False))
            paths[name] = path
        elif os.path.exists(path):
            os.remove(path)
    if sc.get("_path"):
        _atomic(paths["scenario"], lambda p: shutil.copyfile(sc["_path"], p))
    import hetbed

    manifest = {
        "format": "hetbed-results",
        "version": 1,
        "scenario": sc["scenario"]["name"],
        "seed": sc["run"]["seed"],
        "seeds": sc["run"].get("seeds", 1),
        "points": len(results),
        "wall_s": wall_s,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "versions": {
            "hetbed": hetbed.__version__,
            "python": sys.version.split()[0],
            "numpy": _version("numpy"),
            "pandas": pd.__version__,
            "simpy": _version("simpy"),
            "matplotlib": _version("matplotlib"),
        },
        "catalog": _catalog_provenance(sc),
        "catalog_path": os.environ.get("HETBED_CATALOG_PATH", ""),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
    }
    _atomic(paths["manifest"], lambda p: _write_json(p, manifest))
    return paths


def load(out_dir: str) -> tuple[dict, pd.DataFrame, pd.DataFrame, dict]:
    """(scenario, summary, steps, manifest) from a results folder; raises ValueError naming
    what is missing or malformed."""
    need = ["summary.parquet", "steps.parquet", "scenario.toml", "manifest.json"]
    missing = [n for n in need if not os.path.exists(os.path.join(out_dir, n))]
    if missing:
        raise ValueError(f"{out_dir}: not a hetbed results folder (missing {', '.join(missing)})")
    with open(os.path.join(out_dir, "manifest.json")) as f:
        manifest = json.load(f)
    if manifest.get("format") != "hetbed-results":
        raise ValueError(f"{out_dir}/manifest.json: not a hetbed-results manifest")
    # (the files the scenario names were read when it ran: a report needs its settings only)
    try:
        sc = schema.load(os.path.join(out_dir, "scenario.toml"), check_files=False)
    except schema.ScenarioError as e:
        used = manifest.get("catalog_path", "")
        if "catalog entry" in str(e) and used and os.environ.get("HETBED_CATALOG_PATH") != used:
            raise schema.ScenarioError(
                f"{e}; the study was run with HETBED_CATALOG_PATH={used} (manifest.json): set "
                "it again to rebuild its report"
            ) from None
        raise
    sc["run"]["seeds"] = manifest.get("seeds", sc["run"]["seeds"])  # --seeds N overrides
    summary = pd.read_parquet(os.path.join(out_dir, "summary.parquet"))
    steps = pd.read_parquet(os.path.join(out_dir, "steps.parquet"))
    return sc, summary, steps, manifest


def _catalog_provenance(sc: dict) -> dict:
    """The catalog files of the devices, links and host topology the study used (every value
    a sweep gives them included): file, shipped or not, SHA-256."""
    from hetbed.devices import catalog

    fields = {
        "cluster.worker_device": "devices",
        "cluster.ps_device": "devices",
        "cluster.nic": "links",
        "cluster.host_topology": "hosts",
    }
    entries = {}
    for path, sub in fields.items():
        sec, _, name = path.partition(".")
        for v in [sc[sec][name], *sc.get("sweep", {}).get(path, [])]:
            if v:
                entries[f"{path}={v}"] = (v, sub)
    return catalog.provenance(entries)


def report(out_dir: str) -> dict[str, str]:
    """Write the report of a saved results folder into it (``hetbed report DIR``); return the
    paths written."""
    return build_report(out_dir).write(out_dir)


def build_report(out_dir: str) -> Any:
    """The ``hetbed.reports.Report`` of a saved results folder."""
    from hetbed.reports import study

    sc, summary, steps, manifest = load(out_dir)
    return study.build(
        sc,
        summary,
        steps,
        manifest,
        load_gradients(out_dir),
        load_curves(out_dir),
        schema.describe(sc),
    )


def compare(a_dir: str, b_dir: str, out_dir: str) -> dict[str, str]:
    """Write the report comparing results folders ``a_dir`` and ``b_dir`` into ``out_dir``."""
    from hetbed.reports import study

    a, b = load(a_dir), load(b_dir)
    names = (os.path.basename(os.path.normpath(a_dir)), os.path.basename(os.path.normpath(b_dir)))
    if names[0] == names[1]:
        names = (a_dir, b_dir)
    rep = study.compare((a[0], a[1], a[3]), (b[0], b[1], b[3]), names)
    return rep.write(out_dir)


def load_gradients(out_dir: str) -> pd.DataFrame:
    """Per-gradient rows of the asynchronous points (empty when there are none)."""
    return _optional(out_dir, "gradients.parquet")


def load_curves(out_dir: str) -> pd.DataFrame:
    """Time-to-accuracy rows of hybrid points (empty when there are none)."""
    return _optional(out_dir, "curves.parquet")


def _optional(out_dir: str, name: str) -> pd.DataFrame:
    path = os.path.join(out_dir, name)
    return pd.read_parquet(path) if os.path.exists(path) else pd.DataFrame()


def _version(mod: str) -> str:
    try:
        return __import__(mod).__version__
    except Exception:  # noqa: BLE001
        return "?"


def _write_json(path: str, obj: Any) -> None:
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)
