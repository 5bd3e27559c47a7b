"""Running scenario files: results saved and reloaded, reports regenerated, and the same
results whether points run here, in a process pool or on a Dask cluster."""

import json

import pandas as pd
import pytest

from hetbed.cli import main
from hetbed.reports import study as studies
from hetbed.scenarios import results, runner, schema

SMALL = """
[scenario]
name = "small sync study"
published = [ { point = { "strategy.backup_workers" = 1 }, metric = "examples_per_s", value = 1000.0 } ]

[model]
name = "mlp"
batch_size = 64
compute_s = 0.5

[cluster]
workers = 4
ps = 2
worker_device = "k40"
nic = "eth_10g"

[strategy]
kind = "sync"
placement = "balanced"

[stragglers]
lognormal_sigma = 0.2

[run]
steps = 40
seed = 7

[sweep]
"strategy.backup_workers" = [0, 1, 2]
"""


@pytest.fixture
def study(tmp_path):
    p = tmp_path / "small.toml"
    p.write_text(SMALL)
    return str(p)


def test_run_saves_results_and_report(study, tmp_path, capsys):
    """`hetbed run` writes Parquet tables, the scenario, a manifest and a report with the
    predicted-vs-published table; `hetbed report` regenerates it from the files alone."""
    out = tmp_path / "out"
    assert main(["run", study, "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["summary"]) == 3
    sc, summary, steps, manifest = results.load(str(out))
    assert manifest["seed"] == 7 and manifest["points"] == 3
    assert list(summary.strategy_backup_workers) == [0, 1, 2]
    assert set(steps.point) == {0, 1, 2} and (steps.step_time_s > 0).all()
    md = (out / "report.md").read_text()
    assert "Predicted vs published" in md and "backup_speedup.png" in md
    (out / "report.md").unlink()
    assert main(["report", str(out), "--quiet"]) == 0
    assert (out / "report.md").read_text() == md


def test_backup_workers_cut_the_straggler_tail(study):
    """With lognormal stragglers, backup workers lower the p90 step time and drop gradients."""
    summary = runner.summary_frame(runner.run_all(schema.expand(schema.load(study))))
    assert summary.step_time_p90_s.iloc[2] < summary.step_time_p90_s.iloc[0]
    assert summary.dropped_gradients.iloc[0] == 0 and summary.dropped_gradients.iloc[2] > 0
    runs, _ = studies.derive(summary, ["strategy.backup_workers"])
    t = summary.step_time_p50_s
    assert runs.normalized_speedup.tolist() == pytest.approx(
        [t[0] / t[b] * 4 / (4 + b) for b in range(3)]
    )


def test_same_results_in_a_process_pool(study):
    """A sweep in two worker processes gives exactly the in-process results."""
    points = schema.expand(schema.load(study))
    ticks = []
    here = runner.summary_frame(runner.run_all(points, step_progress=lambda d, t: ticks.append(t)))
    steps = [p["run"]["steps"] for p in points]
    assert ticks == [n for n in steps for _ in range(n)]  # (in-process: each step of each point)
    pool = runner.summary_frame(runner.run_all(points, jobs=2))
    cols = ["step_time_p50_s", "step_time_p99_s", "examples_per_s", "dropped_gradients"]
    pd.testing.assert_frame_equal(here[cols], pool[cols])


def test_same_results_on_a_dask_cluster(study):
    """The same sweep on a Dask LocalCluster gives exactly the in-process results."""
    distributed = pytest.importorskip("dask.distributed")
    points = schema.expand(schema.load(study))[:2]
    here = runner.summary_frame(runner.run_all(points))
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster:
        remote = runner.summary_frame(
            runner.run_all(points, dask_address=cluster.scheduler_address)
        )
    cols = ["step_time_p50_s", "examples_per_s"]
    pd.testing.assert_frame_equal(here[cols], remote[cols])


def test_comparison_reports_error(study):
    """The predicted-vs-published table carries the relative error."""
    sc = schema.load(study)
    summary = runner.summary_frame(runner.run_all(schema.expand(sc)))
    cmp = studies.comparison(sc, studies.aggregate(summary, ["strategy.backup_workers"]))
    row = cmp.iloc[0]
    assert row.published == 1000.0
    assert row.error_pct == pytest.approx((row.predicted - 1000.0) / 10.0)


def test_bad_file_exits_2(tmp_path, capsys):
    """A scenario error is reported with its field path and exit status 2."""
    p = tmp_path / "bad.toml"
    p.write_text(SMALL.replace("workers = 4", "workers = 0"))
    assert main(["describe", str(p)]) == 2
    assert "cluster.workers: expected an integer in [1, 100_000], got 0" in capsys.readouterr().err


def test_hybrid_scenario_learns_with_real_gradients(tmp_path):
    """A hybrid scenario (digits MLP) trains real parameters on simulated time: accuracy rises
    from chance and the report gets a time-to-accuracy figure; async gradients are stale."""
    text = """
[scenario]
name = "hybrid"
[model]
name = "digits_mlp"
batch_size = 32
compute_s = 0.05
[cluster]
workers = 4
ps = 1
[strategy]
placement = "balanced"
[hybrid]
learning_rate = 0.1
eval_every = 10
target_accuracy = 0.8
[run]
steps = 60
seed = 1
[sweep]
"strategy.kind" = ["sync", "async"]
"""
    p = tmp_path / "hy.toml"
    p.write_text(text)
    out = tmp_path / "out"
    assert main(["run", str(p), "--out", str(out), "--quiet"]) == 0
    summary = pd.read_parquet(out / "summary.parquet")
    curves = results.load_curves(str(out))
    assert (curves.groupby("point").accuracy.first() < 0.3).all()
    assert (summary.final_accuracy > 0.8).all()
    assert summary.set_index("strategy_kind").mean_staleness["async"] > 1
    assert "time_to_accuracy.png" in (out / "report.md").read_text()


def test_unknown_model_name_is_a_field_error(tmp_path):
    """model.name must be a zoo or hybrid model; the error lists them."""
    p = tmp_path / "m.toml"
    p.write_text(SMALL.replace('name = "mlp"', 'name = "gpt5"'))
    with pytest.raises(
        schema.ScenarioError, match=r"model.name: expected one of .*inception_v3.*got 'gpt5'"
    ):
        schema.load(str(p))


def test_ps_link_utilization_is_a_fraction_that_grows_with_backups(study):
    """The busiest PS NIC's utilization is in (0, 1] and grows as backups push more gradients."""
    summary = runner.summary_frame(runner.run_all(schema.expand(schema.load(study))))
    u = summary.ps_nic_utilization
    assert ((u > 0) & (u <= 1)).all()
    assert u.iloc[2] > u.iloc[0]


def test_fit_ranks_a_grid_by_the_error_on_the_fitted_values(study, tmp_path, capsys):
    """`hetbed fit` simulates every grid value and ranks them by the RMS error on the entries
    marked fitted; each row is what the scenario gives with that value (rerun here)."""
    from hetbed.scenarios import fit

    text = SMALL.replace("value = 1000.0 }", "value = 1000.0, fitted = true }").replace(
        "[model]",
        '[scenario.fit]\nparameters = ["model.compute_s"]\nfitted_to = "1,000 examples/s"\n'
        'procedure = "hetbed fit"\n\n[model]',
    )
    p = tmp_path / "fit.toml"
    p.write_text(text)
    csv = tmp_path / "grid.csv"
    assert main(["fit", str(p), "--grid", "model.compute_s=0.5,0.1,0.2", "--out", str(csv)]) == 0
    out = capsys.readouterr().out
    table = pd.read_csv(csv)
    assert sorted(table["model.compute_s"]) == [0.1, 0.2, 0.5]
    assert list(table.rms_error_pct) == sorted(table.rms_error_pct)
    assert list(table.rms_error_pct) == pytest.approx(list(table["[0] error_pct"].abs()))
    best = table.iloc[0]
    sc = schema.load(str(p))
    sc["model"]["compute_s"] = float(best["model.compute_s"])
    again = fit.score(sc)
    assert again.predicted[0] == pytest.approx(best["[0] predicted"])
    assert f"best: model.compute_s = {best['model.compute_s']}" in out
    assert main(["fit", str(p), "--grid", "model.compute=0.1"]) == 2
    assert "did you mean model.compute_s" in capsys.readouterr().err
    assert main(["fit", str(p), "--grid", "strategy.backup_workers=1"]) == 2
    assert "the scenario sweeps it" in capsys.readouterr().err
    assert main(["fit", study, "--grid", "model.compute_s=0.1"]) == 2
    assert "no published entry is marked fitted = true" in capsys.readouterr().err


def test_an_allreduce_study_sweeps_ring_and_tree(tmp_path):
    """``strategy.all_reduce`` reaches the driver: each point's steps are those of
    AllReduceRing run with that algorithm on the scenario's profile, and the two differ."""
    from hetbed.simulator import AllReduceRing

    text = (
        SMALL.replace('kind = "sync"\nplacement = "balanced"', 'kind = "allreduce"')
        .replace("workers = 4", "workers = 8")
        .replace("lognormal_sigma = 0.2", "lognormal_sigma = 0.0")
        .replace(
            '"strategy.backup_workers" = [0, 1, 2]', '"strategy.all_reduce" = ["ring", "tree"]'
        )
        .replace("steps = 40", "steps = 5")
    )
    text = "\n".join(line for line in text.splitlines() if not line.startswith("published"))
    p = tmp_path / "ar.toml"
    p.write_text(text)
    medians = {}
    for pt in schema.expand(schema.load(str(p))):
        alg = pt["strategy"]["all_reduce"]
        got = runner.run(pt).steps.step_time_s.median()
        drv = AllReduceRing(
            runner.replica_profile(pt), 8, nic="eth_10g", bucket_bytes=25 * 2**20, algorithm=alg
        )
        assert got == pytest.approx(drv.run(5).steps.step_time_s.median(), rel=1e-9), alg
        medians[alg] = got
    assert medians["ring"] != medians["tree"]
