"""Run a validated scenario (see ``schema``): build the model from the zoo, profile one replica
with the op-level simulator, and drive the step-level training simulation.

``run(sc)`` returns a ``ScenarioResult`` (per-step rows and a one-row summary); ``run_all(points)``
runs sweep points in a process pool (or a Dask cluster) with the same results whichever runs them.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

import hetbed as hb
from hetbed.devices.costmodel import Roofline
from hetbed.scenarios.hybrid_models import HYBRID_MODELS, digits_learner
from hetbed.scenarios.models import zoo
from hetbed.scenarios.schema import ScenarioError
from hetbed.simulator import AllReduceRing, AsyncPS, SyncPS, profile_from_graph, sim_value
from hetbed.simulator import stragglers as sg
from hetbed.simulator.failures import Failure
from hetbed.simulator.hybrid import time_to_accuracy

_profiles: dict[tuple, Any] = {}


@dataclasses.dataclass
class ScenarioResult:
    scenario: dict
    steps: pd.DataFrame
    summary: dict
    gradients: pd.DataFrame | None = None
    curve: pd.DataFrame | None = None


def replica_profile(sc: dict) -> Any:
    """The ReplicaProfile of the scenario's model (cached per model, batch, devices, PS layout)."""
    m, c, st = sc["model"], sc["cluster"], sc["strategy"]
    n_ps = max(c["ps"], 1)
    key = (
        m["name"],
        m["batch_size"],
        m["dtype"],
        m["precision"],
        m["optimizer"],
        c["worker_device"],
        c["ps_device"],
        n_ps,
        st["placement"],
        c["host_topology"],
    )
    prof = _profiles.get(key)
    if prof is None:
        with hb.Graph().as_default():
            dtype = hb.float16 if m["dtype"] == "float16" else hb.float32
            mg = zoo.build(m["name"], m["batch_size"], dtype=dtype, optimizer=m["optimizer"])
            feeds = {ph: sim_value(mg.input_shapes[k], ph.dtype.np) for k, ph in mg.inputs.items()}
            strategy = "greedy" if st["placement"] == "balanced" else st["placement"]
            try:
                prof = profile_from_graph(
                    mg.train_op,
                    feeds,
                    worker=c["worker_device"],
                    ps=c["ps_device"],
                    ps_tasks=n_ps,
                    strategy=strategy,
                    examples_per_step=m["batch_size"],
                    cost_model=Roofline(m["precision"]),
                    host_topology=c["host_topology"] or None,
                )
            except hb.errors.ResourceExhaustedError as e:  # the setting's fault, not the code's
                where = os.path.basename(sc.get("_path", "")) or "<scenario>"
                raise ScenarioError(
                    f"{where}: model.batch_size: {m['name']} at batch {m['batch_size']} does "
                    f"not fit in the memory of cluster.worker_device {c['worker_device']!r}: "
                    f"{e.message.splitlines()[0]}"
                ) from None
        if st["placement"] == "balanced":
            prof = balanced(prof, n_ps)
        _profiles[key] = prof
    compute = (
        m["compute_s"] if m["compute_s"] is not None else prof.compute_s / c["worker_efficiency"]
    )
    return dataclasses.replace(prof, compute_s=compute)


def balanced(prof: Any, n_ps: int) -> Any:
    """The profile with its dense variables partitioned evenly over ``n_ps`` PS tasks (as TF's
    variable partitioners do for large variables): one shard of equal bytes, apply, aggregation
    and take time on each task (the cores its kernels keep busy: one where every dense
    variable's did). Sparse variables keep their placement (and their measured
    gradient readiness; the shards' follows ``ReplicaProfile.ready_fractions``' model)."""
    total = sum(b for b, _ in prof.dense.values())
    apply = prof.apply_s
    if isinstance(apply, dict):
        apply_total = sum(apply.get(v, 0.0) for v in prof.dense)
        sparse_apply = {v: apply[v] for v in prof.sparse if v in apply}
    else:
        apply_total = apply * len(prof.dense)
        sparse_apply = dict.fromkeys(prof.sparse, apply)
    dense = {f"dense_shard_{j}": (int(math.ceil(total / n_ps)), j) for j in range(n_ps)}
    apply_s = {**dict.fromkeys(dense, apply_total / n_ps), **sparse_apply}
    agg_dense = sum(prof.aggregate_s_of(v) for v in prof.dense)
    aggregate_s = {
        **dict.fromkeys(dense, agg_dense / n_ps),
        **{v: prof.aggregate_s_of(v) for v in prof.sparse},
    }
    resident = {v: b for v, (b, _) in dense.items()}
    if prof.resident_bytes:
        ratio = sum(prof.resident_bytes.get(v, 0.0) for v in prof.dense) / max(total, 1)
        resident = {v: b * ratio for v, b in resident.items()}
        resident.update(
            {v: prof.resident_bytes[v] for v in prof.sparse if v in prof.resident_bytes}
        )
    take_dense = sum(prof.take_s_of(v) for v in prof.dense)
    take_s = {
        **dict.fromkeys(dense, take_dense / n_ps),
        **{v: prof.take_s_of(v) for v in prof.sparse},
    }

    def cores(per: dict) -> dict:
        """A shard's kernels keep one core busy where every dense variable's did."""
        one = bool(prof.dense) and all(per.get(v) == 1 for v in prof.dense)
        return {**(dict.fromkeys(dense, 1) if one else {}),
                **{v: c for v, c in per.items() if v in prof.sparse}}  # fmt: skip

    # shards mix every layer: their gradients' readiness is left to the profile's model
    worker_apply = {
        **dict.fromkeys(dense, sum(prof.worker_apply_s_of(v) for v in prof.dense) / n_ps),
        **{v: prof.worker_apply_s_of(v) for v in prof.sparse},
    }
    return dataclasses.replace(
        prof,
        dense=dense,
        apply_s=apply_s,
        aggregate_s=aggregate_s,
        take_s=take_s,
        apply_cores=cores(prof.apply_cores),
        aggregate_cores=cores(prof.aggregate_cores),
        take_cores=cores(prof.take_cores),
        resident_bytes=resident,
        grad_ready={v: f for v, f in prof.grad_ready.items() if v in prof.sparse},
        worker_apply_s=worker_apply,
    )


def straggler_model(sc: dict, rng: np.random.Generator) -> Any:
    s = sc["stragglers"]
    n_tasks = sc["cluster"]["workers"] + sc["strategy"]["backup_workers"]
    parts = []
    if s["lognormal_sigma"] > 0:
        parts.append(sg.LogNormal(s["lognormal_sigma"], rng))
    if s["pareto_alpha"] > 0:
        parts.append(
            sg.ParetoTail(
                s["pareto_alpha"], rng, probability=s["pareto_probability"], scale=s["pareto_scale"]
            )
        )
    if s["slow_fraction"] > 0:
        k = int(round(s["slow_fraction"] * n_tasks))
        slow = rng.choice(n_tasks, size=k, replace=False) if k else []
        if k:
            parts.append(sg.SlowWorkers([int(w) for w in slow], s["slow_factor"]))
    if s["empirical_file"]:
        try:
            parts.append(
                sg.Empirical(s["empirical_file"], rng, column=s["empirical_column"] or None)
            )
        except ValueError as e:  # the message names the file, never its contents
            where = os.path.basename(sc.get("_path", "")) or "<scenario>"
            hint = " with stragglers.empirical_column" if "numeric columns" in str(e) else ""
            raise ScenarioError(f"{where}: stragglers.empirical_file: {e}{hint}") from None
    return sg.combine(*parts) if parts else None


def driver(sc: dict) -> Any:
    """The step-level driver of one scenario point (SyncPS, AsyncPS or AllReduceRing), built
    and checked (memory, straggler files) but not run."""
    c, st, r, m = sc["cluster"], sc["strategy"], sc["run"], sc["model"]
    rng = np.random.default_rng(r["seed"])
    kw: dict[str, Any] = {"straggler": straggler_model(sc, rng)}
    if st["kind"] != "allreduce" and st["ps_bucket_mb"] > 0:
        kw["bucket_bytes"] = st["ps_bucket_mb"] * 2**20
    fl = sc["failures"]
    if fl["events"]:  # tasks die and restart; drivers checkpoint and roll back (failures.py)
        kw["failures"] = [
            Failure(e["kind"], e["index"], e["at_s"], fl["restart_delay_s"]) for e in fl["events"]
        ]
        kw["checkpoint_every"] = fl["checkpoint_every_steps"]
    if m["name"] in HYBRID_MODELS:
        hy = sc["hybrid"]
        learner, prof = digits_learner(
            m["name"],
            m["batch_size"],
            hy["learning_rate"],
            hy["eval_every"],
            max(c["ps"], 1),
            m["compute_s"],
            r["seed"],
        )
        kw["learner"] = learner
    else:
        prof = replica_profile(sc)
    if st["kind"] == "sync":
        drv = SyncPS(
            prof,
            c["workers"],
            st["backup_workers"],
            c["ps"],
            c["nic"],
            fast_worker_can_contribute_twice=st["fast_worker_can_contribute_twice"],
            **kw,
        )
    elif st["kind"] == "async":
        drv = AsyncPS(prof, c["workers"], c["ps"], c["nic"], **kw)
    else:
        bucket = st["bucket_mb"] * 2**20 if st["bucket_mb"] > 0 else None
        drv = AllReduceRing(
            prof,
            c["workers"],
            nic=c["nic"],
            bucket_bytes=bucket,
            algorithm=st["all_reduce"],
            **kw,
        )
    return drv


def preflight(points: list[dict]) -> None:
    """Build every point's driver without running it, so that a point that cannot run (a
    batch the worker cannot hold, a step-time file without its column, ...) fails the study
    before any point has spent its time."""
    for p in points:
        driver(p)


def run(sc: dict, on_step: Callable[[int, int], None] | None = None) -> ScenarioResult:
    """Simulate one scenario point; ``on_step(done, total)`` as its steps complete (progress;
    an asynchronous run counts every applied gradient)."""
    c, st, r, fl = sc["cluster"], sc["strategy"], sc["run"], sc["failures"]
    drv = driver(sc)
    prof = drv.profile
    # Async: a step is one applied gradient; run.steps counts steps per worker.
    res = drv.run(r["steps"] * (c["workers"] if st["kind"] == "async" else 1), on_step)
    steps = res.completed.copy()
    examples_per_s = res.throughput()
    if st["kind"] == "async":  # a worker's step: between its successive applied gradients
        g = res.gradients[res.gradients.accepted].sort_values(["worker", "apply_s"])
        per_worker = g.groupby("worker").apply_s.diff().dropna().to_numpy()
    else:
        per_worker = steps.step_time_s.to_numpy()
    summary = {
        "steps_completed": len(steps),
        "compute_s": prof.compute_s,
        "step_time_p50_s": _pct(per_worker, 50),
        "step_time_p90_s": _pct(per_worker, 90),
        "step_time_p99_s": _pct(per_worker, 99),
        "mean_step_time_s": res.mean_step_time(),
        "examples_per_s": examples_per_s,
        "dropped_gradients": int(steps.dropped.sum()) if "dropped" in steps else 0,
        "mean_staleness": res.mean_staleness if st["kind"] == "async" else 0.0,
        "sim_time_s": res.sim_time_s,
        "wall_s": res.wall_s,
    }
    if fl["events"]:
        summary["failures"] = len(res.failures)
        summary["steps_lost"] = res.steps_lost
        # events the run ended before: said in the report and by `hetbed run`, not dropped
        summary["failures_not_reached"] = len(fl["events"]) - len(res.failures)
    if st["kind"] != "allreduce" and res.sim_time_s > 0:
        # Derived from the bytes each PS shard moved (every gradient that reached a shard was
        # pulled from it first): the busiest shard's NIC, per direction, over the whole run.
        shard_bytes: dict[int, float] = {}
        for _name, (nbytes, ps) in prof.dense.items():
            shard_bytes[ps] = shard_bytes.get(ps, 0.0) + nbytes
        for _name, (row_bytes, rows, ps) in prof.sparse.items():
            shard_bytes[ps] = shard_bytes.get(ps, 0.0) + row_bytes * rows
        pushes = len(res.gradients) if res.gradients is not None else 0
        if shard_bytes and pushes:
            moved = max(shard_bytes.values()) * pushes
            summary["ps_nic_utilization"] = moved / (
                drv.ps_nic.bandwidth_bytes_per_s * res.sim_time_s
            )
    if res.curve is not None:
        summary["final_accuracy"] = float(res.curve.accuracy.iloc[-1])
        summary["time_to_target_s"] = time_to_accuracy(res.curve, sc["hybrid"]["target_accuracy"])
    grads = res.gradients if st["kind"] != "allreduce" else None
    if grads is not None and len(grads):
        summary.update(breakdown(steps, grads, st["kind"]))
        summary.update(  # what link utilization over time is derived from (reports)
            step_bytes=float(res.config["step_bytes"]),
            busiest_shard_step_bytes=float(drv.shards.step_bytes.max()),
            worker_nic_bytes_per_s=float(res.config["worker_nic_bytes_per_s"]),
            ps_nic_bytes_per_s=float(res.config["ps_nic_bytes_per_s"]),
        )
    return ScenarioResult(sc, steps, summary, grads, res.curve)


BREAKDOWN = ("wait", "pull", "compute", "straggler", "push", "apply")


def breakdown(steps: pd.DataFrame, grads: pd.DataFrame, kind: str) -> dict[str, float]:
    """Where a step's time went on its critical path, as the mean over steps of
    ``breakdown_<part>_s`` for the parts of ``BREAKDOWN``; the parts add up to the mean step
    time (sync) or to a worker's mean time per applied gradient (async).

    Rule (sync): the critical worker of a step is the accepted gradient that finished its push
    last. Its time from the step's start splits into waiting to start (``wait``: the barrier of
    the previous step, a token), its ``pull``, its compute up to the median compute of that
    step's accepted gradients (``compute``) and beyond it (``straggler``), its ``push``, and the
    rest up to the step's end (``apply``: PS aggregation and apply). A worker's transfers and
    compute do not overlap in the step-level model, so the parts are disjoint. Async: per
    applied gradient the same parts, with ``apply`` from the end of the push to the apply and
    ``wait`` 0 (no barrier), ``straggler`` 0 (nobody waits for a slow worker)."""
    g = grads[grads.accepted].dropna(subset=["pull_start_s", "push_end_s"])
    if not len(g):
        return {}
    compute = g.compute_end_s - g.pull_end_s
    parts = {
        "pull": g.pull_end_s - g.pull_start_s,
        "push": g.push_end_s - g.compute_end_s,
    }
    if kind == "async":
        parts.update(compute=compute, apply=g.apply_s - g.push_end_s)
        out = {k: float(v.mean()) for k, v in parts.items()}
        out.update(wait=0.0, straggler=0.0)
    else:
        g = g.assign(compute=compute, typical=compute.groupby(g.step).transform("median"))
        crit = g.loc[g.groupby("step").push_end_s.idxmax()].set_index("step")
        st = steps.set_index("step").loc[crit.index]
        straggler = (crit.compute - crit.typical).clip(lower=0)
        out = {
            "wait": float((crit.pull_start_s - st.start_s).mean()),
            "pull": float((crit.pull_end_s - crit.pull_start_s).mean()),
            "compute": float((crit.compute - straggler).mean()),
            "straggler": float(straggler.mean()),
            "push": float((crit.push_end_s - crit.compute_end_s).mean()),
            "apply": float((st.end_s - crit.push_end_s).mean()),
        }
    return {f"breakdown_{k}_s": out[k] for k in BREAKDOWN}


def _pct(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q)) if len(x) else math.nan


def _run_point(sc: dict, on_step: Callable[[int, int], None] | None = None) -> tuple:
    res = run(sc, on_step)
    return res.summary, res.steps, res.gradients, res.curve


def _run_pool(points: list, jobs: int, out: list, progress: Callable | None) -> None:
    """``run_all``'s points in ``jobs`` spawned processes (not forked: the caller may hold
    threads, a server or a test harness, whose locks a forked child would inherit).

    A worker that dies fails the sweep (SweepWorkerDied). Ctrl-C and SIGTERM are noted by
    handlers of this loop's own while it waits (never raised inside the pool's machinery, where
    an interrupt can leave its exit waiting for ever), then the pending points are cancelled,
    the workers ended by their pids and the pool shut down, and the signal is handed to the
    handler that was in place (KeyboardInterrupt, the CLI's SIGTERM); a failing point ends the
    sweep the same way. No worker outlives the sweep."""
    import multiprocessing
    import signal
    import threading
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    got: list[int] = []
    old: dict = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            if signal.getsignal(sig) is not signal.SIG_IGN:  # (an ignored one stays ignored)
                old[sig] = signal.signal(sig, lambda signum, frame: got.append(signum))
    ctx = multiprocessing.get_context("spawn")
    before = set(multiprocessing.active_children())
    pool = ProcessPoolExecutor(
        max_workers=min(jobs, len(points)), mp_context=ctx, initializer=_ignore_sigint
    )
    try:
        futs = {}
        for i, p in enumerate(points):
            if got:
                break
            futs[pool.submit(_run_point, p)] = i
        pending, done_n = set(futs), 0
        while pending and not got:
            finished, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            for fut in finished:
                i = futs[fut]
                try:
                    out[i] = fut.result()
                except BrokenProcessPool:
                    raise SweepWorkerDied(
                        f"a worker process of the sweep died while it ran point {i} (killed, "
                        "or out of memory: try fewer --jobs); no results were written"
                    ) from None
                done_n += 1
                if progress:
                    progress(done_n, len(points), out[i][0])
    except BaseException:
        _end_pool(pool, before)
        raise
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    if got:
        _end_pool(pool, before)
        handler = old.get(got[0])
        if callable(handler):
            handler(got[0], None)  # (raises: KeyboardInterrupt, or the CLI's SIGTERM)
        signal.raise_signal(got[0])  # (the default action: the process ends)
    pool.shutdown(wait=True)


def _end_pool(pool: Any, before: set) -> None:
    """Cancel ``pool``'s pending points and end its workers (the children started since
    ``before``) by their pids."""
    import multiprocessing

    workers = set(multiprocessing.active_children()) - before
    pool.shutdown(wait=False, cancel_futures=True)
    for w in workers:
        w.terminate()
    for w in workers:
        w.join(5)


class SweepWorkerDied(RuntimeError):
    """A worker process of ``run_all``'s pool ended abruptly (killed, out of memory)."""


def _ignore_sigint() -> None:
    """A sweep's worker process leaves Ctrl-C (sent to the whole process group) to its parent,
    which ends the pool (no traceback from every worker)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_all(
    points: list[dict],
    jobs: int = 1,
    dask_address: str | None = None,
    progress: Callable[[int, int, dict], None] | None = None,
    dask_timeout_s: float = 5.0,
    step_progress: Callable[[int, int], None] | None = None,
) -> list[ScenarioResult]:
    """Run sweep points: in this process (jobs=1), a process pool, or on a Dask cluster.
    ``progress(done, total, summary)`` as points finish; ``step_progress(done, total)`` as the
    steps of a point run in this process complete."""
    out: list[Any] = [None] * len(points)
    if dask_address:
        from dask.distributed import Client, as_completed

        try:
            client = Client(dask_address, timeout=f"{dask_timeout_s}s")
        except (OSError, TimeoutError) as e:
            raise ConnectionError(
                f"cannot reach the Dask scheduler at {dask_address} within {dask_timeout_s:g} s "
                f"({type(e).__name__}); start one (`dask scheduler`, then `dask worker "
                f"{dask_address}`) or leave out --dask to use local processes"
            ) from None
        with client:
            futs = {client.submit(_run_point, p, pure=False): i for i, p in enumerate(points)}
            for done, fut in enumerate(as_completed(futs), 1):
                i = futs[fut]
                out[i] = fut.result()
                if progress:
                    progress(done, len(points), out[i][0])
    elif jobs > 1 and len(points) > 1:
        _run_pool(points, jobs, out, progress)
    else:
        for i, p in enumerate(points):
            out[i] = _run_point(p, step_progress)
            if progress:
                progress(i + 1, len(points), out[i][0])
    return [
        ScenarioResult(p, steps, summary, grads, curve)
        for p, (summary, steps, grads, curve) in zip(points, out)
    ]


LIBRARY = os.path.join(os.path.dirname(__file__), "library")


def library() -> list[str]:
    """Names of the scenario library's studies (``hetbed run NAME`` finds them)."""
    return sorted(f[:-5] for f in os.listdir(LIBRARY) if f.endswith(".toml"))


def find_scenario(name: str) -> str:
    """The path of scenario ``name``: a file, or a study of the library by name (with or
    without ``.toml``); raises ScenarioError with the closest library names."""
    if os.path.isfile(name) or os.path.isdir(name):  # (schema.load says what a folder is)
        return name
    stem = os.path.basename(name)
    stem = stem[:-5] if stem.endswith(".toml") else stem
    if os.sep not in name and stem in library():
        return os.path.join(LIBRARY, f"{stem}.toml")
    from .schema import ScenarioError

    near = difflib.get_close_matches(stem, library(), n=3, cutoff=0.4)
    hint = f"did you mean {' or '.join(near)}? " if near else ""
    raise ScenarioError(
        f"{name}: no such scenario file or library study; {hint}library: {', '.join(library())}"
    )


def settings(sc: dict) -> dict[str, Any]:
    """Every setting of a scenario point as a flat ``section_field`` column (lists as JSON)."""
    from .schema import SCHEMA

    out: dict[str, Any] = {}
    for sec, fields in SCHEMA.items():
        if sec == "scenario":
            continue
        for name in fields:
            v = sc[sec][name]
            out[f"{sec}_{name}"] = json.dumps(v) if isinstance(v, (list, dict)) else v
    return out


def summary_frame(results: list[ScenarioResult]) -> pd.DataFrame:
    """One row per run: ``point`` (the run's index, the key of ``steps.point``), every setting
    as a ``section_field`` column (``cluster_workers``, ``strategy_kind``, ``run_seed``), then
    the run's metrics (units in their names)."""
    rows = [{"point": i, **settings(r.scenario), **r.summary} for i, r in enumerate(results)]
    return pd.DataFrame(rows)
