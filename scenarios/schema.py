"""Scenario files: a TOML description of one study, validated field by field.

    [scenario]
    name = "backup workers, 50 workers"
    reference = "Abadi et al., OSDI 2016, Figure 8"   # optional

    [model]
    name = "inception_v3"        # from the model zoo
    batch_size = 32
    dtype = "float32"

    [cluster]
    workers = 50
    ps = 17
    worker_device = "k40"        # catalog keys
    ps_device = "xeon_e5_2630v3_ps"
    nic = "eth_10g"
    fabric = "switch"            # or "two_level" with rack_size, oversubscription

    [strategy]
    kind = "sync"                # sync | async | allreduce
    backup_workers = 0
    placement = "greedy"         # round_robin | greedy

    [stragglers]                 # optional, each part optional
    lognormal_sigma = 0.1
    slow_fraction = 0.05
    slow_factor = 2.0

    [run]
    steps = 1000
    seed = 1

    [sweep]                      # optional: parameters to vary, by dotted path
    "strategy.backup_workers" = [0, 1, 2, 3, 4, 5]

Errors name the file, the field path and what was expected
(``study.toml: cluster.workers: expected a positive integer, got -3``); unknown fields are errors.
"""

from __future__ import annotations

import copy
import difflib
import itertools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class ScenarioError(ValueError):
    """A scenario file or value is invalid; the message names the file and field path."""


@dataclass(frozen=True)
class Field:
    kind: str  # "int+", "int0", "float+", "float0", "str", "bool", "choice", "list", "number"
    default: Any = None
    required: bool = False
    choices: tuple = ()
    doc: str = ""


SCHEMA: dict[str, dict[str, Field]] = {
    "scenario": {
        "name": Field("str", required=True, doc="a title for reports"),
        "description": Field("str", ""),
        "reference": Field("str", "", doc="where published numbers come from"),
        "published": Field(
            "list", [], doc="published values: {point = {...}, metric = ..., value = ...}"
        ),
    },
    "model": {
        "name": Field("str", required=True, doc="a model of the zoo"),
        "batch_size": Field("int+", 32),
        "dtype": Field("choice", "float32", choices=("float16", "float32")),
        "optimizer": Field("choice", "sgd", choices=("sgd", "momentum", "adam", "rmsprop")),
        "compute_s": Field("float+", None, doc="override the simulated per-step compute time"),
    },
    "cluster": {
        "workers": Field("int+", required=True),
        "ps": Field("int0", 1),
        "worker_device": Field("str", "k40"),
        "ps_device": Field("str", "xeon_e5_2630v3_ps"),
        "nic": Field("str", "eth_10g"),
        "fabric": Field("choice", "switch", choices=("switch", "two_level")),
        "rack_size": Field("int+", 16),
        "oversubscription": Field("float+", 1.0),
        "worker_efficiency": Field(
            "float+", 1.0, doc="achieved fraction of the worker's roofline speed (calibration)"
        ),
    },
    "strategy": {
        "kind": Field("choice", "sync", choices=("sync", "async", "allreduce")),
        "backup_workers": Field("int0", 0),
        "placement": Field("choice", "greedy", choices=("round_robin", "greedy", "balanced")),
        "fast_worker_can_contribute_twice": Field("bool", False),
    },
    "stragglers": {
        "lognormal_sigma": Field("float0", 0.0),
        "pareto_alpha": Field("float0", 0.0),
        "pareto_probability": Field("float0", 1.0),
        "pareto_scale": Field("float0", 1.0),
        "slow_fraction": Field("float0", 0.0),
        "slow_factor": Field("float+", 1.0),
        "empirical_file": Field("str", ""),
    },
    "failures": {
        "worker_fail_at_s": Field("list", []),
        "restart_delay_s": Field("float0", 0.0),
        "checkpoint_every_steps": Field("int+", 100),
    },
    "hybrid": {
        "learning_rate": Field("float+", 0.5),
        "eval_every": Field("int+", 10),
        "target_accuracy": Field("float+", 0.9),
    },
    "run": {
        "steps": Field("int+", 100, doc="training steps (per worker for async)"),
        "seed": Field("int0", 0),
        "seeds": Field("int+", 1, doc="repeat every point with seeds seed, seed+1, ..."),
    },
}
REQUIRED_SECTIONS = ("scenario", "model", "cluster")


def _expect(path: str, where: str, what: str, got: Any) -> ScenarioError:
    return ScenarioError(f"{where}: {path}: expected {what}, got {got!r}")


def _check(path: str, where: str, f: Field, v: Any) -> Any:
    k = f.kind
    if k in ("int+", "int0"):
        if isinstance(v, bool) or not isinstance(v, int) or v < (1 if k == "int+" else 0):
            raise _expect(
                path, where, "a positive integer" if k == "int+" else "an integer >= 0", v
            )
    elif k in ("float+", "float0", "number"):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise _expect(path, where, "a number", v)
        if k == "float+" and not v > 0:
            raise _expect(path, where, "a number > 0", v)
        if k == "float0" and v < 0:
            raise _expect(path, where, "a number >= 0", v)
        v = float(v)
    elif k == "str":
        if not isinstance(v, str):
            raise _expect(path, where, "a string", v)
    elif k == "bool":
        if not isinstance(v, bool):
            raise _expect(path, where, "true or false", v)
    elif k == "choice":
        if v not in f.choices:
            raise _expect(path, where, "one of " + ", ".join(map(repr, f.choices)), v)
    elif k == "list":
        if not isinstance(v, list):
            raise _expect(path, where, "a list", v)
    return v


def validate(doc: dict, where: str = "<scenario>") -> dict:
    """A complete scenario dict (defaults filled in) from a parsed document; raises ScenarioError."""
    if not isinstance(doc, dict):
        raise ScenarioError(f"{where}: expected a table at the top level")
    unknown = set(doc) - set(SCHEMA) - {"sweep"}
    if unknown:
        raise ScenarioError(
            f"{where}: unknown section(s) {', '.join(sorted(unknown))}; sections are "
            f"{', '.join(list(SCHEMA) + ['sweep'])}"
        )
    out: dict = {}
    for sec, fields in SCHEMA.items():
        raw = doc.get(sec)
        if raw is None:
            if sec in REQUIRED_SECTIONS:
                raise ScenarioError(f"{where}: missing section [{sec}]")
            raw = {}
        if not isinstance(raw, dict):
            raise ScenarioError(f"{where}: {sec}: expected a table, got {raw!r}")
        extra = set(raw) - set(fields)
        if extra:
            name = sorted(extra)[0]
            raise ScenarioError(
                f"{where}: {sec}.{name}: unknown field{did_you_mean(name, fields)}; "
                f"[{sec}] has {', '.join(fields)}"
            )
        vals = {}
        for name, f in fields.items():
            path = f"{sec}.{name}"
            if name in raw and not (raw[name] is None and f.default is None):
                vals[name] = _check(path, where, f, raw[name])
            elif f.required:
                raise ScenarioError(f"{where}: {path}: missing (required)")
            else:
                vals[name] = copy.deepcopy(f.default)
        out[sec] = vals
    from .hybrid_models import HYBRID_MODELS
    from .models.zoo import ZOO

    known = sorted(ZOO) + sorted(HYBRID_MODELS)
    if out["model"]["name"] not in known:
        raise ScenarioError(
            f"{where}: model.name: expected one of {', '.join(known)}, got "
            f"{out['model']['name']!r}{did_you_mean(out['model']['name'], known)}"
        )
    _check_catalog(out, where)
    if out["model"]["name"] in HYBRID_MODELS and out["model"]["compute_s"] is None:
        raise ScenarioError(
            f"{where}: model.compute_s: a hybrid model ({out['model']['name']}) needs the "
            "simulated compute time per step"
        )
    cl, st = out["cluster"], out["strategy"]
    if st["kind"] != "allreduce" and cl["ps"] < 1:
        raise ScenarioError(
            f"{where}: cluster.ps: expected >= 1 PS task for strategy "
            f"{st['kind']!r}, got {cl['ps']}"
        )
    if st["backup_workers"] > 0 and st["kind"] != "sync":
        raise ScenarioError(
            f"{where}: strategy.backup_workers: only sync training has backup "
            f"workers, got {st['backup_workers']} with {st['kind']!r}"
        )
    if st["backup_workers"] >= cl["workers"]:
        raise ScenarioError(
            f"{where}: strategy.backup_workers: expected fewer backup workers than workers "
            f"({cl['workers']}), got {st['backup_workers']}"
        )
    sweep = doc.get("sweep", {})
    if not isinstance(sweep, dict):
        raise ScenarioError(f"{where}: sweep: expected a table of 'section.field' = [values]")
    for key, values in sweep.items():
        sec, _, name = key.partition(".")
        if sec not in SCHEMA or name not in SCHEMA[sec]:
            paths = [f"{x}.{n}" for x, fs in SCHEMA.items() for n in fs]
            raise ScenarioError(
                f"{where}: sweep.{key}: not a field of the scenario{did_you_mean(key, paths)}"
            )
        if not isinstance(values, list) or not values:
            raise ScenarioError(f"{where}: sweep.{key}: expected a non-empty list of values")
        for v in values:
            _check(key, where, SCHEMA[sec][name], v)
    out["sweep"] = {k: list(v) for k, v in sweep.items()}
    return out


def did_you_mean(name: str, known: Any) -> str:
    """`` (did you mean X?)`` naming the closest of ``known``, or nothing."""
    near = difflib.get_close_matches(str(name), list(known), n=2, cutoff=0.5)
    return f" (did you mean {' or '.join(near)}?)" if near else ""


def _check_catalog(out: dict, where: str) -> None:
    """Devices and links must be catalog keys; the error names the closest ones."""
    from hetbed.devices import catalog

    for path, known in (
        ("cluster.worker_device", catalog.list_devices()),
        ("cluster.ps_device", catalog.list_devices()),
        ("cluster.nic", catalog.list_links()),
    ):
        sec, _, name = path.partition(".")
        v = out[sec][name]
        if v not in known:
            raise ScenarioError(
                f"{where}: {path}: no catalog entry {v!r}{did_you_mean(v, known)}; "
                f"`hetbed catalog` lists {', '.join(known)}"
            )


def load(path: str) -> dict:
    """Read and validate a scenario file; raises ScenarioError naming the file on any problem."""
    where = os.path.basename(path)
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such scenario file") from None
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{where}: not valid TOML: {e}") from None
    sc = validate(doc, where)
    sc["_path"] = os.path.abspath(path)
    return sc


def expand(sc: dict) -> list[dict]:
    """One scenario per point of the sweep grid (the scenario itself when there is no sweep),
    each validated again so that combinations are checked too."""
    sweep = sc.get("sweep") or {}
    keys = list(sweep)
    where = os.path.basename(sc.get("_path", "<scenario>"))
    seeds = sc["run"].get("seeds", 1)
    points = []
    for combo in itertools.product(*(sweep[k] for k in keys)):
        point = copy.deepcopy({k: v for k, v in sc.items() if k not in ("sweep",)})
        for key, v in zip(keys, combo):
            sec, _, name = key.partition(".")
            point[sec][name] = v
        doc = {k: v for k, v in point.items() if k in SCHEMA}
        checked = validate(doc, f"{where} (sweep point {dict(zip(keys, combo))})")
        for rep in range(seeds):  # replicates: the same setting with seeds seed, seed+1, ...
            one = copy.deepcopy(checked)
            one["run"]["seed"] = checked["run"]["seed"] + rep
            one["_path"] = sc.get("_path", "")
            one["_point"] = dict(zip(keys, combo))
            one["_replicate"] = rep
            points.append(one)
    return points


def non_defaults(sc: dict) -> dict[str, Any]:
    """Every setting (``section.field``) whose value differs from the schema's default, in schema
    order; swept fields map to their list of values."""
    out: dict[str, Any] = {}
    sweep = sc.get("sweep") or {}
    for sec, fields in SCHEMA.items():
        if sec == "scenario":
            continue
        for name, f in fields.items():
            key = f"{sec}.{name}"
            if key in sweep:
                out[key] = list(sweep[key])
            elif sc[sec][name] != f.default:
                out[key] = sc[sec][name]
    return out


def describe(sc: dict, fmt: Callable[[str], str] = str) -> str:
    """A few lines saying what the scenario will simulate."""
    sweep = sc.get("sweep") or {}

    def v(path: str) -> Any:  # the value, or the swept values
        sec, _, name = path.partition(".")
        return "[" + ", ".join(map(str, sweep[path])) + "]" if path in sweep else sc[sec][name]

    r = sc["run"]
    lines = [
        fmt(sc["scenario"]["name"]),
        f"  model    {v('model.name')}, batch {v('model.batch_size')} per worker, "
        f"{v('model.dtype')}, {v('model.optimizer')}",
        f"  cluster  {v('cluster.workers')} x {v('cluster.worker_device')} workers, "
        f"{v('cluster.ps')} x {v('cluster.ps_device')} PS, {v('cluster.nic')}, "
        f"{v('cluster.fabric')} fabric",
        f"  strategy {v('strategy.kind')}, {v('strategy.backup_workers')} backup workers, "
        f"{v('strategy.placement')} placement",
        f"  run      {v('run.steps')} steps, seed {r['seed']}"
        + (f", {r['seeds']} seeds per point" if r.get("seeds", 1) > 1 else ""),
    ]
    shown = {"model.name", "model.batch_size", "model.dtype", "model.optimizer", "run.steps"}
    shown |= {"run.seed", "run.seeds", "strategy.kind", "strategy.backup_workers"}
    shown |= {"strategy.placement"} | {f"cluster.{k}" for k in ("workers", "worker_device")}
    shown |= {f"cluster.{k}" for k in ("ps", "ps_device", "nic", "fabric")}
    other = {k: x for k, x in non_defaults(sc).items() if k not in shown and k not in sweep}
    if other:
        lines.append("  also     " + ", ".join(f"{k} = {x}" for k, x in other.items()))
    if sweep:
        n = r.get("seeds", 1)
        for x in sweep.values():
            n *= len(x)
        lines.append(f"  sweep    {', '.join(f'{k}={x}' for k, x in sweep.items())} ({n} runs)")
    return "\n".join(lines)
