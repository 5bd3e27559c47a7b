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
    host_topology = "dgx1_v100"  # optional: how each worker host is built (catalog hosts)

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
import math
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
    max: float | None = None  # inclusive upper bound of a number (sizes: what a machine holds)


SCHEMA: dict[str, dict[str, Field]] = {
    "scenario": {
        "name": Field("str", required=True, doc="a title for reports"),
        "description": Field("str", ""),
        "reference": Field("str", "", doc="where published numbers come from"),
        "published": Field(
            "list", [], doc="published values: {point = {...}, metric = ..., value = ...}"
        ),
        "fit": Field(
            "table",
            {},
            doc="the calibration: {parameters = [field paths], fitted_to = what they were "
            "fitted to, procedure = the command that fits them}",
        ),
    },
    "model": {
        "name": Field("str", required=True, doc="a model of the zoo"),
        "batch_size": Field("int+", 32, max=1 << 20),
        "dtype": Field("choice", "float32", choices=("float16", "float32")),
        "precision": Field(
            "choice",
            "float32",
            choices=("float32", "tf32", "mixed_float16", "mixed_bfloat16"),
            doc="how a float32 model computes: TF32 tensor cores, or mixed precision",
        ),
        "optimizer": Field("choice", "sgd", choices=("sgd", "momentum", "adam", "rmsprop")),
        "compute_s": Field(
            "float+", None, doc="override the simulated per-step compute time", max=1e6
        ),
    },
    "cluster": {
        "workers": Field("int+", required=True, max=100_000),
        "ps": Field("int0", 1, max=10_000),
        "worker_device": Field("str", "k40"),
        "ps_device": Field("str", "xeon_e5_2630v3_ps"),
        "nic": Field("str", "eth_10g"),
        "fabric": Field(
            "choice",
            "switch",
            choices=("switch", "two_level"),
            doc="the step-level drivers model one switch: two_level is refused (see the error)",
        ),
        "rack_size": Field("int+", 16, max=100_000),
        "oversubscription": Field("float+", 1.0, max=1000.0),
        "host_topology": Field(
            "str",
            "",
            doc="a catalog host topology (devices/catalog/hosts) each worker host is built as; "
            "empty: a plain host (device on PCIe to host memory)",
        ),
        "worker_efficiency": Field(
            "float+",
            1.0,
            doc="achieved fraction of the worker's roofline speed (calibration)",
            max=1.0,
        ),
    },
    "strategy": {
        "kind": Field("choice", "sync", choices=("sync", "async", "allreduce")),
        "backup_workers": Field("int0", 0, max=100_000),
        "placement": Field("choice", "greedy", choices=("round_robin", "greedy", "balanced")),
        "fast_worker_can_contribute_twice": Field("bool", False),
        "bucket_mb": Field(
            "float0",
            25.0,
            doc="allreduce: gradient bucket size in MiB (PyTorch DDP's 25); 0: one bucket",
            max=1e6,
        ),
        "ps_bucket_mb": Field(
            "float0",
            0.0,
            doc="sync/async: granularity in MiB at which a worker's pulls and pushes overlap its "
            "compute (simulator/overlap.py); 0: pull, compute, push in turn",
            max=1e6,
        ),
        "all_reduce": Field(
            "choice",
            "ring",
            choices=("ring", "tree"),
            doc="allreduce: NCCL's ring, or its double binary tree (simulator/collectives.py)",
        ),
    },
    "stragglers": {
        "lognormal_sigma": Field("float0", 0.0, max=10.0),
        "pareto_alpha": Field("float0", 0.0, max=1000.0),
        "pareto_probability": Field("float0", 1.0, max=1.0),
        "pareto_scale": Field("float0", 1.0, max=1e6),
        "slow_fraction": Field(
            "float0",
            0.0,
            max=1.0,
            doc="the share of worker tasks (backups included) that are slow, as a whole number "
            "of machines: round(slow_fraction x (workers + backup_workers))",
        ),
        "slow_factor": Field("float+", 1.0, max=1e6),
        "empirical_file": Field("str", ""),
        "empirical_column": Field(
            "str",
            "",
            doc="the CSV column of step times in empirical_file (needed when it has several "
            "numeric columns)",
        ),
    },
    "failures": {
        "events": Field(
            "list", [], doc='tasks that die: [{kind = "worker"|"ps", index = 0, at_s = 10.0}]'
        ),
        "restart_delay_s": Field("float0", 0.0, max=1e9),
        "checkpoint_every_steps": Field("int+", 100, max=10**9),
    },
    "hybrid": {
        "learning_rate": Field("float+", 0.5, max=1000.0),
        "eval_every": Field("int+", 10, max=1_000_000),
        "target_accuracy": Field("float+", 0.9, max=1.0),
    },
    "run": {
        "steps": Field("int+", 100, doc="training steps (per worker for async)", max=10**8),
        "seed": Field("int0", 0, max=2**63 - 1),
        "seeds": Field("int+", 1, doc="repeat every point with seeds seed, seed+1, ...", max=1000),
    },
}
REQUIRED_SECTIONS = ("scenario", "model", "cluster")


def _expect(path: str, where: str, what: str, got: Any) -> ScenarioError:
    return ScenarioError(f"{where}: {path}: expected {what}, got {got!r}")


def _bound(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else f"{x:,}".replace(",", "_")


def _check(path: str, where: str, f: Field, v: Any) -> Any:
    k = f.kind
    if k in ("int+", "int0"):
        lo = 1 if k == "int+" else 0
        if isinstance(v, bool) or not isinstance(v, int) or v < lo or (f.max and v > f.max):
            what = "a positive integer" if k == "int+" else "an integer >= 0"
            if f.max is not None:
                what = f"an integer in [{lo}, {_bound(f.max)}]"
            raise _expect(path, where, what, v)
    elif k in ("float+", "float0", "number"):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise _expect(path, where, "a number", v)
        lo = {"float+": "(0", "float0": "[0"}.get(k)
        what = "a finite number"
        if lo is not None:
            what = (
                f"a number in {lo}, {_bound(f.max)}]"
                if f.max is not None
                else ("a finite number > 0" if k == "float+" else "a finite number >= 0")
            )
        if not math.isfinite(v):
            raise _expect(path, where, what, v)
        if (
            (k == "float+" and not v > 0)
            or (k == "float0" and v < 0)
            or (f.max is not None and v > f.max)
        ):
            raise _expect(path, where, what, v)
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
    elif k == "table":
        if not isinstance(v, dict):
            raise _expect(path, where, "a table", v)
    return v


def validate(doc: dict, where: str = "<scenario>", check_files: bool = True) -> dict:
    """A complete scenario dict (defaults filled in) from a parsed document; raises ScenarioError.
    ``check_files=False`` skips the files it names (a results folder's copy of the scenario)."""
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
    if cl["fabric"] != "switch":
        raise ScenarioError(
            f"{where}: cluster.fabric: {cl['fabric']!r} is not modelled by a scenario study: its "
            "step-level drivers put every host on one non-blocking switch. Simulate racks "
            "behind oversubscribed uplinks op by op, with simulator.Cluster(fabric='two_level', "
            "rack_size=..., oversubscription=...) and a SimSession"
        )
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
    _check_stragglers(out["stragglers"], where)
    _check_precision(out, where)
    r = out["run"]
    if r["seed"] + r["seeds"] - 1 > SCHEMA["run"]["seed"].max:
        raise ScenarioError(
            f"{where}: run.seeds: seeds {r['seed']} to {r['seed'] + r['seeds'] - 1} pass the "
            f"largest seed, {_bound(SCHEMA['run']['seed'].max)}; lower run.seed"
        )
    _check_failures(out, where)
    if check_files:
        _check_empirical_file(out, where)
    hybrid_set = {
        k: v for k, v in (doc.get("hybrid") or {}).items() if v != SCHEMA["hybrid"][k].default
    }
    if hybrid_set and out["model"]["name"] not in HYBRID_MODELS:
        raise ScenarioError(
            f"{where}: hybrid: only used by a hybrid model ({', '.join(sorted(HYBRID_MODELS))}); "
            f"model.name is {out['model']['name']!r}: remove the section"
        )
    sweep = doc.get("sweep", {})
    if not isinstance(sweep, dict):
        raise ScenarioError(f"{where}: sweep: expected a table of 'section.field' = [values]")
    for key, values in sweep.items():
        sec, _, name = key.partition(".")
        if sec not in SCHEMA or name not in SCHEMA[sec]:
            paths = [f"{x}.{n}" for x, fs in SCHEMA.items() for n in fs]
            raise ScenarioError(
                f'{where}: sweep."{key}": not a field of the scenario{did_you_mean(key, paths)}'
            )
        if not isinstance(values, list) or not values:
            raise ScenarioError(f'{where}: sweep."{key}": expected a non-empty list of values')
        if sec == "scenario":
            raise ScenarioError(
                f'{where}: sweep."{key}": [scenario] describes the study and changes no result; '
                "sweep a setting of the model, cluster, strategy, stragglers, failures or run"
            )
        for i, v in enumerate(values):
            _check(f'sweep."{key}"[{i}]', where, SCHEMA[sec][name], v)
            if any(_same(v, u) for u in values[:i]):
                raise ScenarioError(
                    f'{where}: sweep."{key}"[{i}]: {v!r} is already in the list: each value is '
                    "one point (repeat a point with run.seeds)"
                )
    out["sweep"] = {k: list(v) for k, v in sweep.items()}
    _check_fit(out["scenario"]["fit"], where)
    _check_published(out["scenario"], out["sweep"] if "sweep" in doc else None, where)
    return out


#: the smallest Pareto tail index (besides 0, off) whose draws stay finite: numpy draws
#: 1 + X = exp(E / alpha) with E an exponential variate below -ln(2^-53) = 36.7, so alpha must
#: keep 36.7 / alpha + ln(pareto_scale <= 1e6) under ln(largest float) = 709.8
PARETO_ALPHA_MIN = 0.06


def _check_stragglers(s: dict, where: str) -> None:
    if 0.0 < s["pareto_alpha"] < PARETO_ALPHA_MIN:
        raise ScenarioError(
            f"{where}: stragglers.pareto_alpha: expected 0 (off) or a number in "
            f"[{PARETO_ALPHA_MIN:g}, 1000], got {s['pareto_alpha']!r} (a smaller tail index "
            "draws step times beyond a float's range)"
        )
    if s["slow_factor"] < 1.0:
        raise ScenarioError(
            f"{where}: stragglers.slow_factor: expected a number in [1, 1e+06] (how many times "
            f"longer a slow worker's step takes), got {s['slow_factor']!r}"
        )


#: the peak a precision mode computes at (``model.precision``), by the catalog's dtype name
_PRECISION_DTYPE = {
    "tf32": "tensorfloat32",
    "mixed_float16": "float16",
    "mixed_bfloat16": "bfloat16",
}


def _check_precision(out: dict, where: str) -> None:
    """A precision mode needs a float32 model and a worker device with that mode's peak."""
    from hetbed.devices import catalog

    m, worker = out["model"], out["cluster"]["worker_device"]
    want = _PRECISION_DTYPE.get(m["precision"])
    if want is None:
        return
    if m["dtype"] != "float32":
        raise ScenarioError(
            f"{where}: model.precision: {m['precision']!r} is how a float32 model computes; "
            f"model.dtype is {m['dtype']!r} (use precision = 'float32' with it)"
        )
    spec = catalog.load_device(worker)
    if want not in spec.peak_flops and want not in spec.matrix_peak_flops:
        have = sorted(set(spec.peak_flops) | set(spec.matrix_peak_flops))
        raise ScenarioError(
            f"{where}: model.precision: {m['precision']!r} computes in {want}, which "
            f"cluster.worker_device {worker!r} has no peak for (its catalog entry has "
            f"{', '.join(have)})"
        )


#: the largest step-time file read for ``stragglers.empirical_file``
MAX_EMPIRICAL_FILE_BYTES = 64 << 20


def _check_empirical_file(out: dict, where: str) -> None:
    """The file must be a regular file of sane size; its contents are read (and never echoed) by
    the straggler model."""
    path = out["stragglers"]["empirical_file"]
    if not path:
        return
    if not os.path.isfile(path):
        raise ScenarioError(f"{where}: stragglers.empirical_file: no such file {path!r}")
    size = os.path.getsize(path)
    if size > MAX_EMPIRICAL_FILE_BYTES:
        raise ScenarioError(
            f"{where}: stragglers.empirical_file: {path!r} has {size} bytes, expected at most "
            f"{MAX_EMPIRICAL_FILE_BYTES} (a list of step times)"
        )


def _check_failures(out: dict, where: str) -> None:
    """``failures.events``: tables {kind, index, at_s} naming tasks of the cluster."""
    cl, st = out["cluster"], out["strategy"]
    n = {"worker": cl["workers"] + st["backup_workers"], "ps": cl["ps"]}
    fields = {"kind", "index", "at_s"}
    for i, e in enumerate(out["failures"]["events"]):
        path = f"failures.events[{i}]"
        if not isinstance(e, dict) or set(e) != fields:
            raise ScenarioError(
                f"{where}: {path}: expected a table with exactly kind, index, at_s, got {e!r:.200}"
            )
        if e["kind"] not in ("worker", "ps"):
            raise _expect(f"{path}.kind", where, "'worker' or 'ps'", e["kind"])
        count = n[e["kind"]]
        _check(f"{path}.index", where, Field("int0", max=max(count - 1, 0)), e["index"])
        if e["index"] >= count:
            raise _expect(f"{path}.index", where, f"a {e['kind']} task below {count}", e["index"])
        e["at_s"] = _check(f"{path}.at_s", where, Field("float0", max=1e9), e["at_s"])


_FIELDS = [f"{x}.{n}" for x, fs in SCHEMA.items() for n in fs]


def _check_fit(fit: dict, where: str) -> None:
    """``[scenario] fit``: which parameters were fitted, to what, and by which command."""
    if not fit:
        return
    keys = ("parameters", "fitted_to", "procedure")
    extra = sorted(set(fit) - set(keys))
    if extra:
        raise ScenarioError(
            f"{where}: scenario.fit.{extra[0]}: unknown field{did_you_mean(extra[0], keys)}; "
            f"the fit has {', '.join(keys)}"
        )
    params = fit.get("parameters")
    if not isinstance(params, list) or not params:
        raise _expect("scenario.fit.parameters", where, "a non-empty list of field paths", params)
    for i, k in enumerate(params):
        if k not in _FIELDS:
            raise ScenarioError(
                f"{where}: scenario.fit.parameters[{i}]: {k!r} is not a field of the scenario"
                f"{did_you_mean(k, _FIELDS)}"
            )
    for k in ("fitted_to", "procedure"):
        if not isinstance(fit.get(k), str) or not fit[k].strip():
            raise _expect(f"scenario.fit.{k}", where, "a non-empty string", fit.get(k))


def _check_published(scenario: dict, sweep: dict | None, where: str) -> None:
    """Each ``[scenario] published`` entry: {point = {"section.field" = value}, metric, value,
    note, fitted (true when the scenario's fit used it: in sample), best = "min" or "max" with
    over = a swept setting (the value is the best of the metric over that setting, compared
    with the model's own best), error_on = "value" or "gain" (the error of value - 1, for a
    ratio the paper states as a gain)}."""
    from hetbed.reports.study import PUBLISHED_METRICS

    keys = ("point", "metric", "value", "note", "fitted", "best", "over", "error_on")
    for i, e in enumerate(scenario["published"]):
        path = f"scenario.published[{i}]"
        if not isinstance(e, dict):
            raise _expect(path, where, "a table {point, metric, value}", e)
        extra = sorted(set(e) - set(keys))
        if extra:
            raise ScenarioError(
                f"{where}: {path}.{extra[0]}: unknown field{did_you_mean(extra[0], keys)}; "
                f"an entry has {', '.join(keys)}"
            )
        if e.get("metric") not in PUBLISHED_METRICS:
            raise ScenarioError(
                f"{where}: {path}.metric: expected one of {', '.join(PUBLISHED_METRICS)}, got "
                f"{e.get('metric')!r}{did_you_mean(e.get('metric'), PUBLISHED_METRICS)}"
            )
        v = e.get("value")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise _expect(f"{path}.value", where, "a finite number", v)
        point = e.get("point", {})
        if not isinstance(point, dict):
            raise _expect(f"{path}.point", where, 'a table {"section.field" = value}', point)
        for k in point:
            if k not in _FIELDS:
                raise ScenarioError(
                    f"{where}: {path}.point: {k!r} is not a field of the scenario"
                    f"{did_you_mean(k, _FIELDS)}"
                )
        if not isinstance(e.get("fitted", False), bool):
            raise _expect(f"{path}.fitted", where, "true or false", e["fitted"])
        if e.get("fitted") and not scenario["fit"]:
            raise ScenarioError(
                f"{where}: {path}.fitted: the scenario has no [scenario.fit] saying which "
                "parameters were fitted to this value and how"
            )
        if e.get("error_on", "value") not in ("value", "gain"):
            raise _expect(f"{path}.error_on", where, "'value' or 'gain'", e["error_on"])
        if "best" in e or "over" in e:
            if e.get("best") not in ("min", "max"):
                raise _expect(f"{path}.best", where, "'min' or 'max'", e.get("best"))
            if e.get("over") not in (_FIELDS if sweep is None else sweep):
                swept = ", ".join(sweep or ()) or "none is swept"
                raise _expect(f"{path}.over", where, f"a swept setting ({swept})", e.get("over"))


def _same(a: Any, b: Any) -> bool:
    """Whether two sweep values are one setting (1 and 1.0 are; True and 1 are not)."""
    return (
        type(a) is type(b)
        and a == b
        or (
            isinstance(a, (int, float))
            and isinstance(b, (int, float))
            and not isinstance(a, bool)
            and not isinstance(b, bool)
            and a == b
        )
    )


def did_you_mean(name: str, known: Any) -> str:
    """`` (did you mean X?)`` naming the closest of ``known``, or nothing."""
    near = difflib.get_close_matches(str(name), list(known), n=2, cutoff=0.5)
    return f" (did you mean {' or '.join(near)}?)" if near else ""


#: link kinds that join hosts (``cluster.nic``); the others join devices within a host
_NIC_KINDS = ("ethernet", "infiniband", "loopback")


def _check_catalog(out: dict, where: str) -> None:
    """Devices and links must be catalog keys; the error names the closest ones."""
    from hetbed.devices import catalog

    for path, known in (
        ("cluster.worker_device", catalog.list_devices()),
        ("cluster.ps_device", catalog.list_devices()),
        ("cluster.nic", catalog.list_links()),
        ("cluster.host_topology", catalog.list_hosts()),
    ):
        sec, _, name = path.partition(".")
        v = out[sec][name]
        if v not in known and (v or path != "cluster.host_topology"):
            raise ScenarioError(
                f"{where}: {path}: no catalog entry {v!r}{did_you_mean(v, known)}; "
                f"`hetbed catalog` lists {', '.join(known)}"
            )
    for path, load in (
        ("cluster.worker_device", catalog.load_device),
        ("cluster.ps_device", catalog.load_device),
        ("cluster.nic", catalog.load_link),
    ):
        sec, _, name = path.partition(".")
        try:
            load(out[sec][name])
        except catalog.CatalogError as e:  # its file is there but broken
            raise ScenarioError(f"{where}: {path}: {e}") from None
    nic = catalog.load_link(out["cluster"]["nic"])
    if nic.kind not in _NIC_KINDS:
        nics = [k for k in catalog.list_links() if catalog.load_link(k).kind in _NIC_KINDS]
        raise ScenarioError(
            f"{where}: cluster.nic: {out['cluster']['nic']!r} is a {nic.kind} link, not a network "
            f"between hosts; NICs: {', '.join(nics)}"
        )
    topo, worker = out["cluster"]["host_topology"], out["cluster"]["worker_device"]
    if topo and catalog.load_device(worker).kind != "gpu":
        raise ScenarioError(
            f"{where}: cluster.host_topology: {topo!r} places GPUs, but cluster.worker_device "
            f"{worker!r} is a {catalog.load_device(worker).kind}; drop host_topology"
        )
    built_of = catalog.load_host(topo).gpu if topo else None
    if built_of and built_of != worker:
        raise ScenarioError(
            f"{where}: cluster.host_topology: {topo!r} is built of {built_of} GPUs, but "
            f"cluster.worker_device is {worker!r}"
        )


#: the largest scenario file read (a study is a page of TOML)
MAX_SCENARIO_BYTES = 1 << 20


def load(path: str, check_files: bool = True) -> dict:
    """Read and validate a scenario file; raises ScenarioError naming the file on any problem.
    A relative ``stragglers.empirical_file`` is relative to the scenario file's folder.
    ``check_files=False`` skips the files the scenario names (see ``validate``)."""
    where = os.path.basename(path)
    if os.path.isdir(path):
        raise ScenarioError(f"{path}: a folder, not a scenario file")
    try:
        size = os.path.getsize(path)
        if size > MAX_SCENARIO_BYTES:
            raise ScenarioError(
                f"{where}: {size:,} bytes, expected a scenario file of at most "
                f"{MAX_SCENARIO_BYTES:,} bytes"
            )
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such scenario file") from None
    except UnicodeDecodeError as e:
        raise ScenarioError(f"{where}: not valid TOML: not UTF-8 text (byte {e.start})") from None
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{where}: not valid TOML: {e}") from None
    _resolve_files(doc, os.path.dirname(os.path.abspath(path)))
    sc = validate(doc, where, check_files)
    sc["_path"] = os.path.abspath(path)
    return sc


def _resolve_files(doc: dict, base: str) -> None:
    """Relative paths of files a scenario names, made relative to its folder."""

    def resolve(v: Any) -> Any:
        return os.path.join(base, v) if isinstance(v, str) and v and not os.path.isabs(v) else v

    s = doc.get("stragglers")
    if isinstance(s, dict) and "empirical_file" in s:
        s["empirical_file"] = resolve(s["empirical_file"])
    sweep = doc.get("sweep")
    values = sweep.get("stragglers.empirical_file") if isinstance(sweep, dict) else None
    if isinstance(values, list):
        sweep["stragglers.empirical_file"] = [resolve(v) for v in values]


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
    fit = sc["scenario"].get("fit")
    if fit:
        lines.append(f"  fitted   {', '.join(fit['parameters'])} to {fit['fitted_to']}")
    if sweep:
        n = r.get("seeds", 1)
        for x in sweep.values():
            n *= len(x)
        lines.append(f"  sweep    {', '.join(f'{k}={x}' for k, x in sweep.items())} ({n} runs)")
    for note in assumed(sc):
        lines.append(f"  assumed  {note}")
    for note in ignored(sc):
        lines.append(f"  no effect {note}")
    for note in suspect(sc):
        lines.append(f"  check    {note}")
    return "\n".join(lines)


def assumed(sc: dict) -> list[str]:
    """Modelling assumptions the scenario leaves at what may surprise: the worker speed at its
    untuned roofline, and a worker device with no peak for the model's dtype (its ops priced at
    another's)."""
    from hetbed.devices import catalog

    sweep = sc.get("sweep") or {}

    def values(path: str) -> list:
        sec, _, name = path.partition(".")
        return list(sweep[path]) if path in sweep else [sc[sec][name]]

    out = []
    if (
        "cluster.worker_efficiency" not in non_defaults(sc)
        and "cluster.worker_efficiency" not in sweep
    ):
        out.append(
            f"cluster.worker_efficiency = {sc['cluster']['worker_efficiency']:g}: workers compute "
            "at their datasheet roofline (the paper studies fit 0.25-0.5)"
        )
    for device in dict.fromkeys(values("cluster.worker_device")):
        spec = catalog.load_device(device)
        peaks = set(spec.peak_flops) | set(spec.matrix_peak_flops)
        for dtype in dict.fromkeys(values("model.dtype")):
            if dtype not in peaks:
                used = (
                    "float32"
                    if "float32" in spec.peak_flops
                    else min(spec.peak_flops, key=spec.peak_flops.get)
                )
                out.append(
                    f"{device} lists no {dtype} peak: the model's {dtype} ops are priced at its "
                    f"{used} peak"
                )
    return out


def suspect(sc: dict) -> list[str]:
    """Catalog numbers the scenario uses that look like a unit mistaken: a NIC slower than
    ``SLOW_LINK_BYTES_PER_S`` (a rate in Gb/s or MB/s typed where bytes/s go)."""
    from hetbed.devices import catalog

    sweep = sc.get("sweep") or {}
    nics = sweep.get("cluster.nic") or [sc["cluster"]["nic"]]
    out = []
    for nic in dict.fromkeys(nics):
        bw = catalog.load_link(nic).bandwidth_bytes_per_s
        if bw < SLOW_LINK_BYTES_PER_S:
            out.append(
                f"{nic} moves {bw:g} bytes/s ({bw * 8:g} bit/s): its bandwidth_bytes_per_s is "
                "in bytes per second (10 Gb/s is 1.25e9)"
            )
    return out


SLOW_LINK_BYTES_PER_S = 1e6  # below it `describe` asks whether a link's unit was mistaken


def ignored(sc: dict) -> list[str]:
    """The settings given (or swept) that change nothing in this study, each with why: a
    setting of another fabric, strategy or straggler model than the one the study uses."""
    given = non_defaults(sc)
    sweep = sc.get("sweep") or {}

    def values(path: str) -> list:
        sec, _, name = path.partition(".")
        return list(sweep[path]) if path in sweep else [sc[sec][name]]

    kinds, fabrics = set(values("strategy.kind")), set(values("cluster.fabric"))
    slow_counts = {
        int(round(f * (w + b)))  # (runner.straggler_model's count of slow machines)
        for f in values("stragglers.slow_fraction")
        for w in values("cluster.workers")
        for b in values("strategy.backup_workers")
    }
    rules = [
        (("cluster.rack_size", "cluster.oversubscription"), fabrics == {"switch"},
         'only a fabric = "two_level" has racks; cluster.fabric is "switch"'),
        (("strategy.bucket_mb", "strategy.all_reduce"), "allreduce" not in kinds,
         'only strategy.kind = "allreduce" uses them'),
        (("strategy.ps_bucket_mb", "cluster.ps_device"), kinds == {"allreduce"},
         "an all-reduce study has no parameter servers"),
        (("cluster.ps",), kinds == {"allreduce"} and set(values("cluster.ps")) != {0},
         "an all-reduce study has no parameter servers"),
        (("strategy.fast_worker_can_contribute_twice",), "sync" not in kinds,
         "only synchronous training with backup workers uses it"),
        (("stragglers.pareto_probability", "stragglers.pareto_scale"),
         set(values("stragglers.pareto_alpha")) == {0.0}, "stragglers.pareto_alpha is 0 (off)"),
        (("stragglers.empirical_column",), set(values("stragglers.empirical_file")) == {""},
         "stragglers.empirical_file is not given"),
        (("stragglers.slow_factor",), set(values("stragglers.slow_fraction")) == {0.0},
         "stragglers.slow_fraction is 0: no worker is slow"),
        (("stragglers.slow_fraction", "stragglers.slow_factor"),
         slow_counts == {0} and set(values("stragglers.slow_fraction")) != {0.0},
         "slow_fraction x (workers + backup_workers) rounds to 0 slow machines"),
    ]  # fmt: skip
    out = []
    for paths, idle, why in rules:
        set_here = [p for p in paths if p in given]
        if idle and set_here:
            out.append(f"{', '.join(set_here)}: {why}")
    return out
