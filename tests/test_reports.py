"""Study reports: sweeps of any dimension (a line per series, baselines per group), seeds with
intervals, published overlays, self-describing results, comparisons, and figures that carry
axis labels with units and legends. Figures are checked on their data, not their pixels."""

import json
import re

import numpy as np
import pandas as pd
import pytest

from hetbed.cli import main
from hetbed.reports import Report, figures, study
from hetbed.reports.report import number
from hetbed.scenarios import schema

# A study over workers x backup workers with 2 seeds whose numbers are known in closed form:
# t(N, b, seed) = 0.1 * N**0.5 / (1 + 0.1 b) * (1 + 0.01 seed).
W, B, SEEDS = (4, 8, 16), (0, 1, 2), (1, 2)


def _t(n, b, s):
    return 0.1 * n**0.5 / (1 + 0.1 * b) * (1 + 0.01 * s)


def synthetic():
    rows = []
    for n in W:
        for b in B:
            for s in SEEDS:
                t = _t(n, b, s)
                rows.append(
                    {
                        "point": len(rows),
                        "cluster_workers": n,
                        "strategy_backup_workers": b,
                        "strategy_kind": "sync",
                        "run_seed": s,
                        "step_time_p50_s": t,
                        "step_time_p99_s": 1.5 * t,
                        "examples_per_s": 32 * n / t,
                        "dropped_gradients": 10 * b,
                    }
                )
    summary = pd.DataFrame(rows)
    rng = np.random.default_rng(0)
    steps = pd.DataFrame(
        [
            {"point": r.point, "step": k, "step_time_s": r.step_time_p50_s * rng.uniform(0.9, 1.1)}
            for r in summary.itertuples()
            for k in range(20)
        ]
    )
    sc = schema.validate(
        {
            "scenario": {
                "name": "synthetic 2-D study",
                "fit": {
                    "parameters": ["cluster.worker_efficiency"],
                    "fitted_to": "the normalized speedup at 8 workers, 2 backups",
                    "procedure": "by hand",
                },
                "published": [
                    {
                        "point": {"cluster.workers": 8, "strategy.backup_workers": 2},
                        "metric": "normalized_speedup",
                        "value": 1.1,
                        "fitted": True,
                    },
                    {
                        "point": {"cluster.workers": 16, "strategy.backup_workers": 0},
                        "metric": "examples_per_s",
                        "value": 1500.0,
                    },
                ],
            },
            "model": {"name": "mlp"},
            "cluster": {"workers": 4},
            "sweep": {"cluster.workers": list(W), "strategy.backup_workers": list(B)},
        }
    )
    manifest = {"wall_s": 1.0, "platform": "test", "cpus": 2, "versions": {"hetbed": "x"}}
    return sc, summary, steps, manifest


@pytest.fixture(scope="module")
def rep():
    sc, summary, steps, manifest = synthetic()
    return study.build(sc, summary, steps, manifest, describe_text=schema.describe(sc))


def test_two_settings_give_a_line_per_value_and_a_baseline_per_group(rep):
    """Normalized speedup: backup workers on x, one line per worker count, each against b = 0
    of its own worker count and seed (closed form); speedup: one line per backup count, each
    against the fewest workers of its group."""
    (panel,) = rep.figure_data("backup_speedup")
    assert {k for k in panel["lines"] if not k.startswith("published")} == {
        f"workers = {n}" for n in W
    }
    for n in W:
        xs, ys = panel["lines"][f"workers = {n}"]
        assert xs == list(B)
        want = [np.median([_t(n, 0, s) / _t(n, b, s) * n / (n + b) for s in SEEDS]) for b in B]
        assert ys == pytest.approx(want)
    (panel,) = rep.figure_data("speedup")
    assert {k for k in panel["lines"] if k.startswith("backup")} == {
        f"backup_workers = {b}" for b in B
    }
    for b in B:
        xs, ys = panel["lines"][f"backup_workers = {b}"]
        assert xs == list(W) and ys[0] == pytest.approx(4)  # its own baseline: 4 workers
        assert ys[2] == pytest.approx(
            np.median([_t(4, b, s) / _t(16, b, s) * 16 / 4 * 4 for s in SEEDS])
        )
    assert "ideal (linear)" in panel["lines"]
    md = rep.markdown()
    assert "against b0 = 0 backup workers of the same group" in md
    assert "throughput at the fewest workers of the same group" in md


def test_a_wide_sweep_is_drawn_on_a_log_axis_ticked_at_its_values(rep):
    """Two or more positive values spanning 8x or more (checkpoints every 20 and 1,000 steps)
    get a logarithmic x axis; 4 to 16 workers, or 0 to 2 backups, a linear one."""
    from hetbed.reports.study_figures import _is_pow2

    assert _is_pow2(pd.Series([20, 1000])) and _is_pow2(pd.Series([1, 8, 64]))
    assert not _is_pow2(pd.Series([4, 8, 16])) and not _is_pow2(pd.Series([0, 1, 2]))
    assert not _is_pow2(pd.Series([50.0]))
    assert {p["xscale"] for p in rep.figure_data("step_time")} == {"linear"}


def test_seeds_give_a_median_with_a_min_max_band_and_table_spread(rep):
    """Every point is the median over seeds; the table gives median [min, max]."""
    (panel,) = rep.figure_data("step_time")
    xs, ys = panel["lines"]["backup_workers = 1"]
    assert ys == pytest.approx([np.median([_t(n, 1, s) for s in SEEDS]) for n in W])
    agg = study.aggregate(synthetic()[1], ["cluster.workers", "strategy.backup_workers"])
    row = agg[(agg.cluster_workers == 8) & (agg.strategy_backup_workers == 2)].iloc[0]
    assert row.step_time_p50_s_min == pytest.approx(_t(8, 2, 1))
    assert row.step_time_p50_s_max == pytest.approx(_t(8, 2, 2)) and row.seeds == 2
    cell = f"{number(row.step_time_p50_s)} [{number(_t(8, 2, 1))}, {number(_t(8, 2, 2))}]"
    assert cell in rep.markdown()
    assert "band: min to max over seeds" in rep.markdown()


def test_report_numbers_have_four_significant_digits_and_one_notation_a_column():
    """Fixed notation with thousands separators and 4 significant digits (two values 0.3%
    apart read apart), whole-number columns without decimals, and a column that has one value
    outside [1e-4, 1e9) written wholly in scientific notation."""
    assert [number(x) for x in (2300.0, 1986.4, 1.0951, 1.0921, 0.0969, -3.4913)] == [
        "2,300",
        "1,986",
        "1.095",
        "1.092",
        "0.09690",
        "-3.491",
    ]
    assert number(4.2e-5) == "4.200e-05" and number(1.5e12) == "1.500e+12"
    assert number(float("nan")) == "\u2014" and number(0.0) == "0"  # (no value)
    r = Report("t")
    r.table(
        pd.DataFrame(
            {
                "setting": ["a", "b"],
                "workers": [1000.0, 20.0],
                "published": [2300.0, 1.0951],
                "bytes": [1.2e10, 5.0],
                "n": [3, 4],
            }
        )
    )
    md = r.markdown()
    assert "| a | 1,000 | 2,300 | 1.200e+10 | 3 |" in md
    assert "| b | 20 | 1.095 | 5.000e+00 | 4 |" in md
    assert "<td>1.200e+10</td>" in r.html()
    r2 = Report("t")
    r2.table(pd.DataFrame({"x": [1.23456]}), ".2f")  # (a format given: as it says)
    assert "| 1.23 |" in r2.markdown()


def test_published_values_are_drawn_beside_the_prediction(rep):
    """A published value appears on its figure at its setting, labelled fitted or out of sample,
    and the table carries its error."""
    (panel,) = rep.figure_data("backup_speedup")
    assert panel["lines"]["published (fitted, in sample)"] == ([2.0], [1.1])
    (panel,) = rep.figure_data("throughput")
    assert panel["lines"]["published (out of sample)"] == ([16.0], [1500.0])
    sc, summary, *_ = synthetic()
    runs, _ = study.derive(summary, ["cluster.workers", "strategy.backup_workers"])
    cmp = study.comparison(
        sc, study.aggregate(runs, ["cluster.workers", "strategy.backup_workers"])
    )
    assert list(cmp.kind) == ["fitted", "predicted"]
    pred = np.median([32 * 16 / _t(16, 0, s) for s in SEEDS])
    assert cmp.predicted[1] == pytest.approx(pred)
    assert cmp.error_pct[1] == pytest.approx((pred - 1500) / 15)


def test_a_third_setting_gives_small_multiples():
    """With three swept settings the third gives a panel per value, each with its lines."""
    sc, summary, steps, manifest = synthetic()
    both = pd.concat(
        [summary.assign(cluster_nic="eth_10g"), summary.assign(cluster_nic="eth_100g")]
    )
    both["point"] = range(len(both))
    both.loc[both.cluster_nic == "eth_100g", "examples_per_s"] *= 2
    sc["sweep"]["cluster.nic"] = ["eth_10g", "eth_100g"]
    rep = study.build(sc, both, steps.iloc[:0], manifest)
    panels = rep.figure_data("throughput")
    assert [p["title"] for p in panels] == ["nic=eth_10g", "nic=eth_100g"]
    for p in panels:
        assert len([k for k in p["lines"] if k.startswith("backup")]) == len(B)
    a = panels[0]["lines"]["backup_workers = 0"][1]
    b = panels[1]["lines"]["backup_workers = 0"][1]
    assert b == pytest.approx([2 * v for v in a])


def test_figures_need_axis_labels_with_units_and_a_legend(rep):
    """Every figure of a report passes the check; a panel without a unit, or with two series
    and no legend, is refused with the panel named."""
    assert {"step_time", "throughput", "backup_speedup", "speedup", "step_cdf"} <= set(rep.data)
    for panels in rep.data.values():
        for p in panels:
            assert re.search(r"\(.+\)$", p["xlabel"]) and re.search(r"\(.+\)$", p["ylabel"])
            if len(p["lines"]) > 1:
                assert sorted(p["legend"]) == sorted(p["lines"])
    fig = figures.grid(
        pd.DataFrame({"x": [1, 2, 1, 2], "y": [1, 2, 3, 4], "s": [0, 0, 1, 1]}),
        "x",
        "y",
        "s",
        None,
        "workers",
        "time (s)",
        "t",
    )
    with pytest.raises(ValueError, match=r"panel 't': x label 'workers' names no unit"):
        figures.check(fig)
    fig.axes[0].set_xlabel("workers (count)")
    fig.axes[0].get_legend().remove()
    with pytest.raises(ValueError, match="2 series and no legend"):
        Report("r").figure(fig, "f")


def test_a_published_values_label_stays_in_its_panel():
    """A published value at the top of a panel gets headroom for its label (``grid``), and
    ``check`` refuses a label that runs out of its panel into the title."""
    import matplotlib.pyplot as plt

    data = pd.DataFrame({"x": [1, 2, 3], "y": [1.0, 1.05, 1.08]})
    over = pd.DataFrame({"x": [3], "value": [1.095], "label": ["published 1.095, error -1.4%"],
                         "kind": ["fitted"], "series": [None], "facet": [None]})  # fmt: skip
    fig = figures.grid(data, "x", "y", None, None, "workers (count)", "speedup (x)", "t",
                       overlays=over)  # fmt: skip
    figures.check(fig)  # (headroom: it fits)
    plt.close(fig)
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], label="a")
    ax.set_xlabel("x (s)")
    ax.set_ylabel("y (s)")
    ax.set_title("t")
    ax.annotate("too high", (1, 1), xytext=(0, 30), textcoords="offset points")
    with pytest.raises(ValueError, match="panel 't': the label 'too high' runs out of its panel"):
        figures.check(fig)
    plt.close(fig)


def test_many_series_keep_distinct_styles():
    """Up to 48 series, no two share colour, marker and line style."""
    for n in (3, 10, 12, 48):
        looks = {
            (
                tuple(figures.style(i, n)["color"]),
                figures.style(i, n)["marker"],
                figures.style(i, n)["linestyle"],
            )
            for i in range(n)
        }
        assert len(looks) == n


def test_staleness_histograms_share_bins():
    """Every series of the staleness figure is binned on the same integer edges."""
    fig = figures.histograms({"a": [0, 1, 1, 2], "b": [0, 5, 9, 9]}, "staleness (steps)", "s")
    edges = [tuple(np.unique(p.get_xy()[:, 0])) for p in fig.axes[0].patches]
    assert len(edges) == 2 and edges[0] == edges[1]


SMALL = """
[scenario]
name = "small"
[model]
name = "mlp"
batch_size = 64
compute_s = 0.2
[cluster]
workers = 4
ps = 2
[strategy]
placement = "balanced"
[stragglers]
lognormal_sigma = 0.3
[run]
steps = 20
seed = 5
seeds = 2
[sweep]
"strategy.backup_workers" = [0, 1]
"""


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("studies")
    (d / "a.toml").write_text(SMALL)
    (d / "b.toml").write_text(SMALL.replace("\nps = 2", '\nps = 2\nnic = "eth_100g"'))
    for name in ("a", "b"):
        assert main(["run", str(d / f"{name}.toml"), "--out", str(d / name), "--quiet"]) == 0
    return d


def test_results_are_self_describing(two_runs):
    """summary.parquet: a unique `point` key that joins steps.point, every setting (fixed ones
    too) as a snake_case column, no duplicates, one row per seed; no empty files; the report
    header lists non-default settings, machine, versions and wall time."""
    out = two_runs / "a"
    summary = pd.read_parquet(out / "summary.parquet")
    steps = pd.read_parquet(out / "steps.parquet")
    assert summary.point.is_unique and set(steps.point) == set(summary.point)
    assert len(summary.columns) == len(set(summary.columns))
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", c) for c in summary.columns)
    assert {"cluster_nic", "cluster_ps", "stragglers_lognormal_sigma", "run_seed"} <= set(summary)
    assert "workers" not in summary and "cluster.workers" not in summary
    assert sorted(zip(summary.strategy_backup_workers, summary.run_seed)) == [
        (0, 5),
        (0, 6),
        (1, 5),
        (1, 6),
    ]
    assert summary.groupby("strategy_backup_workers").step_time_p50_s.nunique().min() == 2
    assert not (out / "curves.parquet").exists()  # no hybrid model: no empty file
    grads = pd.read_parquet(out / "gradients.parquet")
    assert len(grads) and set(grads.point) <= set(summary.point)
    md = (out / "report.md").read_text()
    assert "stragglers.lognormal_sigma = 0.3" in md and "model.compute_s = 0.2" in md
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["seeds"] == 2 and manifest["cpus"] >= 1
    assert f"pandas {pd.__version__}" in md and "s of wall time" in md


def test_compare_shows_settings_figures_and_deltas(two_runs, capsys):
    """`hetbed compare A B` names the settings that differ, draws both studies, and tabulates
    B - A per setting and metric."""
    out = two_runs / "cmp"
    assert main(["compare", str(two_runs / "a"), str(two_runs / "b"), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    assert "| cluster_nic | eth_10g | eth_100g |" in md
    a = pd.read_parquet(two_runs / "a" / "summary.parquet")
    b = pd.read_parquet(two_runs / "b" / "summary.parquet")
    rep = study.compare(
        (schema.load(str(two_runs / "a.toml")), a, {}),
        (schema.load(str(two_runs / "b.toml")), b, {}),
    )
    deltas = pd.DataFrame(rep.data["deltas"])
    row = deltas[(deltas.backup_workers == 1) & (deltas.metric == "examples_per_s")].iloc[0]
    med = lambda s: s[s.strategy_backup_workers == 1].examples_per_s.median()  # noqa: E731
    assert row.A == pytest.approx(med(a)) and row.B == pytest.approx(med(b))
    assert row.delta_pct == pytest.approx((med(b) - med(a)) / med(a) * 100)
    (panel,) = rep.figure_data("compare_examples_per_s")
    assert {"study = A", "study = B"} <= set(panel["lines"])


def test_describe_lists_every_non_default_and_swept_setting(tmp_path):
    """describe shows swept values where a setting is swept and every other non-default."""
    p = tmp_path / "s.toml"
    p.write_text(SMALL.replace('"strategy.backup_workers" = [0, 1]', '"cluster.workers" = [4, 8]'))
    text = schema.describe(schema.load(str(p)))
    assert "[4, 8] x k40 workers" in text and "2 seeds per point" in text
    assert "stragglers.lognormal_sigma = 0.3" in text and "(4 runs)" in text
    assert schema.non_defaults(schema.load(str(p)))["cluster.workers"] == [4, 8]


BREAKDOWN = """
[scenario]
name = "breakdown"
[model]
name = "mlp"
batch_size = 64
compute_s = 0.1
[cluster]
workers = 3
ps = 1
[strategy]
kind = "sync"
[stragglers]
slow_fraction = 0.34
slow_factor = 3.0
[run]
steps = 10
seed = 1
"""


def test_breakdown_follows_the_critical_worker_and_adds_up(tmp_path):
    """3 workers, one 3x slow: per step the critical path is the slow worker, whose compute
    splits into the median worker's compute (c) and 2c waiting for the straggler; the parts
    add up to the mean step time. The report stacks them and writes a step-level trace with a
    track per worker whose pull, compute and push follow one another."""
    p = tmp_path / "b.toml"
    p.write_text(BREAKDOWN)
    out = tmp_path / "out"
    assert main(["run", str(p), "--out", str(out), "--quiet"]) == 0
    s = pd.read_parquet(out / "summary.parquet").iloc[0]
    steps = pd.read_parquet(out / "steps.parquet")
    parts = [
        s[f"breakdown_{k}_s"] for k in ("wait", "pull", "compute", "straggler", "push", "apply")
    ]
    assert sum(parts) == pytest.approx(steps.step_time_s.mean(), rel=1e-9)
    assert s.breakdown_compute_s == pytest.approx(0.1, rel=1e-9)
    assert s.breakdown_straggler_s == pytest.approx(0.2, rel=1e-9)
    assert s.breakdown_pull_s > 0 and s.breakdown_push_s > 0
    md = (out / "report.md").read_text()
    assert "breakdown.png" in md and "links_over_time.png" in md
    trace = json.loads((out / "step_trace.json").read_text())["traceEvents"]
    slices = [e for e in trace if e["ph"] == "X" and e["tid"] > 0]
    assert {e["tid"] for e in slices} == {1, 2, 3}
    for tid in (1, 2, 3):
        mine = sorted((e for e in slices if e["tid"] == tid), key=lambda e: e["ts"])
        assert [e["name"] for e in mine[:3]] == ["pull", "compute", "push"]
        for a, b in zip(mine, mine[1:]):
            assert a["ts"] + a["dur"] <= b["ts"] + 1e-6


def test_link_utilization_over_time_is_bytes_over_capacity():
    """One worker pulls over [0, 1] s and pushes over [2, 3] s exactly the bytes its links carry
    in a second: each link is full while its transfer runs, idle otherwise; half the bytes
    give half the utilization."""
    from hetbed.reports.trace import link_utilization

    g = pd.DataFrame(
        {"pull_start_s": [0.0], "pull_end_s": [1.0], "compute_end_s": [2.0], "push_end_s": [3.0]}
    )
    u = link_utilization(g, 1, 100.0, 50.0, 100.0, 100.0, 4.0, bins=8).set_index("time_s")
    assert u["PS NIC out (pulls)"].tolist() == pytest.approx([0.5] * 2 + [0] * 6)
    assert u["PS NIC in (pushes)"].tolist() == pytest.approx([0] * 4 + [0.5] * 2 + [0] * 2)
    assert u["worker NIC in (pulls)"].tolist() == pytest.approx([1] * 2 + [0] * 6)
    assert u["worker NIC out (pushes)"].tolist() == pytest.approx([0] * 4 + [1] * 2 + [0] * 2)


@pytest.mark.parametrize(
    "entry, message",
    [
        (
            '{ metric = "examples_per_sec", value = 1.0 }',
            r"published\[0\]\.metric: .*did you mean examples_per_s",
        ),
        (
            '{ metric = "examples_per_s", value = "fast" }',
            r"published\[0\]\.value: expected a finite number",
        ),
        (
            '{ metric = "examples_per_s", value = 1.0, fited = true }',
            r"published\[0\]\.fited: unknown field \(did you mean fitted",
        ),
        (
            '{ point = { "cluster.worker" = 2 }, metric = "examples_per_s", value = 1.0 }',
            r"'cluster.worker' is not a field .*did you mean cluster.workers",
        ),
    ],
)
def test_published_entries_are_validated(tmp_path, entry, message):
    """A published value names a known metric, a finite value and real fields."""
    p = tmp_path / "p.toml"
    p.write_text(SMALL.replace('name = "small"', f'name = "small"\npublished = [{entry}]'))
    with pytest.raises(schema.ScenarioError, match=message):
        schema.load(str(p))


def _best_study():
    """4 workers, 0-3 backups, 5 seeds; seed s has its shortest step at b = 2 + s % 2, of
    1 - 0.01 s seconds, and 1.2 s elsewhere."""
    rows = []
    for s in range(1, 6):
        for b in range(4):
            t = 1.0 - 0.01 * s if b == 2 + s % 2 else 1.2
            rows.append(
                {
                    "point": len(rows),
                    "cluster_workers": 4,
                    "strategy_backup_workers": b,
                    "run_seed": s,
                    "step_time_p50_s": t,
                    "examples_per_s": 128 / t,
                }
            )
    doc = {
        "scenario": {
            "name": "best",
            "fit": {
                "parameters": ["stragglers.lognormal_sigma"],
                "fitted_to": "the shortest step",
                "procedure": "hetbed fit best --grid stragglers.lognormal_sigma=0.1,0.2",
            },
            "published": [
                {
                    "point": {"strategy.backup_workers": 3},
                    "best": "min",
                    "over": "strategy.backup_workers",
                    "metric": "step_time_p50_s",
                    "value": 0.9,
                    "fitted": True,
                },
                {
                    "point": {"strategy.backup_workers": 1},
                    "best": "max",
                    "over": "strategy.backup_workers",
                    "metric": "normalized_speedup",
                    "value": 1.10,
                    "error_on": "gain",
                },
            ],
        },
        "model": {"name": "mlp"},
        "cluster": {"workers": 4},
        "sweep": {"strategy.backup_workers": [0, 1, 2, 3]},
    }
    return schema.validate(doc), pd.DataFrame(rows)


def test_a_best_value_is_the_models_own_best_per_seed_and_a_gain_is_compared_as_a_gain():
    """The shortest step is taken per seed wherever it lies (median of the per-seed minima, not
    the value at the paper's point), 'model at' counts where; the best normalized speedup's
    error is on the gain (value - 1)."""
    sc, summary = _best_study()
    runs, _ = study.derive(summary, ["strategy.backup_workers"])
    agg = study.aggregate(runs, ["strategy.backup_workers"])
    cmp = study.comparison(sc, agg, runs)
    mins = [1.0 - 0.01 * s for s in range(1, 6)]
    assert cmp.predicted[0] == pytest.approx(np.median(mins))
    assert (cmp.predicted_min[0], cmp.predicted_max[0]) == pytest.approx((min(mins), max(mins)))
    assert cmp.model_at[0] == "backup_workers=3 (seeds: 2: 2, 3: 3)"
    assert cmp.error_pct[0] == pytest.approx((np.median(mins) - 0.9) / 0.9 * 100)
    assert list(cmp.kind) == ["fitted", "predicted"]
    best = [
        max(
            1.2 / t * 4 / (4 + b)
            for b, t in [(b, 1.0 - 0.01 * s if b == 2 + s % 2 else 1.2) for b in range(4)]
        )
        for s in range(1, 6)
    ]
    assert cmp.predicted[1] == pytest.approx(np.median(best))
    assert cmp.error_of[1] == "gain (value - 1)"
    assert cmp.error_pct[1] == pytest.approx((np.median(best) - 1 - 0.10) / 0.10 * 100)
    with pytest.raises(ValueError, match=r"published\[0\]: .* needs the runs"):
        study.comparison(sc, agg)
    md = study.build(sc, summary, summary.iloc[:0].assign(step=[], step_time_s=[]), {}).markdown()
    assert "Fitted parameters: stragglers.lognormal_sigma, fitted to the shortest step" in md
    assert "backup_workers=3 (seeds: 2: 2, 3: 3)" in md


def test_comparison_refuses_a_point_it_cannot_find():
    """A value no run has, a setting fixed at another value, or a swept setting left open is an
    error naming the entry: never the first row."""
    sc, summary = synthetic()[:2]
    runs, _ = study.derive(summary, ["cluster.workers", "strategy.backup_workers"])
    agg = study.aggregate(runs, ["cluster.workers", "strategy.backup_workers"])

    def pub(point, metric="examples_per_s"):
        return {
            **sc,
            "scenario": {
                **sc["scenario"],
                "published": [{"point": point, "metric": metric, "value": 1.0}],
            },
        }

    cases = [
        (
            {"cluster.workers": 5, "strategy.backup_workers": 0},
            r"no run has cluster.workers = 5 "
            r"\(the runs have 4, 8, 16\)",
        ),
        (
            {"cluster.workers": 4, "strategy.backup_workers": 0, "cluster.nic": "eth_100g"},
            r"cluster.nic = 'eth_100g' is not among the runs .*'eth_10g' in every run",
        ),
        ({"cluster.workers": 4}, r"fix strategy.backup_workers too: .* own value \(3\) is not"),
    ]
    one = {**sc, "strategy": {**sc["strategy"], "backup_workers": 3}}  # 3: not among the runs
    for point, msg in cases:
        with pytest.raises(ValueError, match=r"scenario.published\[0\].point: " + msg):
            study.comparison({**pub(point), "strategy": one["strategy"]}, agg, runs)
    # left open, a swept setting is taken at the scenario's own value (0 backups here)
    assert study.comparison(pub({"cluster.workers": 8}), agg, runs).predicted[0] == pytest.approx(
        np.median([32 * 8 / _t(8, 0, s) for s in SEEDS])
    )
    ok = study.comparison(
        pub({"cluster.workers": 4, "strategy.backup_workers": 0, "cluster.nic": "eth_10g"}),
        agg,
        runs,
    )
    assert ok.predicted[0] == pytest.approx(np.median([32 * 4 / _t(4, 0, s) for s in SEEDS]))


@pytest.mark.parametrize(
    "entry, fit, msg",
    [
        ({"fitted": True}, None, r"published\[0\].fitted: the scenario has no \[scenario.fit\]"),
        ({"best": "lowest", "over": "cluster.workers"}, None, r"published\[0\].best: expected "),
        ({"best": "min", "over": "cluster.ps"}, None, r"published\[0\].over: expected a swept"),
        ({"error_on": "ratio"}, None, r"published\[0\].error_on: expected 'value' or 'gain'"),
        (
            {},
            {"parameters": ["cluster.efficiency"], "fitted_to": "x", "procedure": "y"},
            r"scenario.fit.parameters\[0\]: 'cluster.efficiency' is not a field .*did you mean",
        ),
        ({}, {"parameters": ["cluster.ps"], "fitted_to": "x"}, r"scenario.fit.procedure: "),
    ],
)
def test_published_entries_and_the_fit_are_checked(entry, fit, msg):
    scen = {"name": "x", "published": [{"metric": "step_time_p50_s", "value": 1.0, **entry}]}
    if fit is not None:
        scen["fit"] = fit
    doc = {
        "scenario": scen,
        "model": {"name": "mlp"},
        "cluster": {"workers": 4},
        "sweep": {"cluster.workers": [4, 8]},
    }
    with pytest.raises(schema.ScenarioError, match=msg):
        schema.validate(doc)


def test_a_report_removes_the_figures_an_earlier_report_wrote_in_its_folder(tmp_path):
    """A folder rerun with another study holds this study's files alone; a user's file stays."""
    first = Report("one")
    first.attachment("a.csv", b"x\n1\n", "data")
    first.attachment("b.csv", b"y\n2\n", "data")
    first.write(str(tmp_path))
    (tmp_path / "notes.txt").write_text("mine")
    second = Report("two")
    second.attachment("b.csv", b"y\n3\n", "data")
    second.write(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == [
        "b.csv",
        "notes.txt",
        "report.html",
        "report.md",
    ]
    assert (tmp_path / "b.csv").read_bytes() == b"y\n3\n"
    # a listing that names other files (copied with a folder, edited, crafted) removes none
    # of them, nor a file the report wrote and someone changed since
    listing = tmp_path / ".report-files.json"
    names = json.loads(listing.read_text())
    listing.write_text(json.dumps({**names, "notes.txt": names["b.csv"], "../x": "0"}))
    (tmp_path / "b.csv").write_bytes(b"edited")
    Report("three").write(str(tmp_path))
    assert {"b.csv", "notes.txt"} <= {p.name for p in tmp_path.iterdir()}


def test_compare_says_when_nothing_differs_and_which_settings_one_study_lacks(two_runs):
    """A study compared with itself: no broken empty table but a sentence naming the settings
    compared; settings only one study has are listed, not dropped in silence."""
    a = pd.read_parquet(two_runs / "a" / "summary.parquet")
    sc = schema.load(str(two_runs / "a.toml"))
    md = study.compare((sc, a, {}), (sc, a, {})).markdown()
    deltas = md[md.index("## Metric deltas") :]
    assert "No metric differs between A and B at the 2 setting(s) both have" in deltas
    assert "|  |" not in deltas and "one study only" not in deltas
    part = a[a.strategy_backup_workers == 1]
    md = study.compare((sc, a, {}), (sc, part, {})).markdown()
    assert "Settings in one study only (not compared): A only: backup_workers=0." in md


def test_device_count_and_replica_device_setter_refuse_nonsense():
    import hetbed as hb

    with pytest.raises(ValueError, match=r"unknown device type 'CUP' \(did you mean CPU\?\)"):
        hb.Session(config=hb.ConfigProto(device_count={"CUP": 2})).close()
    with pytest.raises(ValueError, match=r"device_count CPU must be in \[1, 1024\]"):
        hb.Session(config=hb.ConfigProto(device_count={"CPU": 100000})).close()
    with pytest.raises(ValueError, match="ps_tasks must be >= 0, got -1"):
        hb.train.replica_device_setter(ps_tasks=-1)
    assert hb.train.replica_device_setter(ps_tasks=0) is None
