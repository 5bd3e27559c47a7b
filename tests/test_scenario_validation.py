"""Scenario validation (issue 15, item 4): no NaN/inf, bounded fractions and sizes, [failures]
wired into the drivers, file fields never echoing contents; errors name file, path and range."""

from __future__ import annotations

import pytest

from hetbed.scenarios import runner
from hetbed.scenarios.schema import ScenarioError, expand, load

BASE = """
[scenario]
name = "validation"

[model]
name = "mlp"
batch_size = 64
compute_s = 0.5

[cluster]
workers = 4
ps = 2

[strategy]
kind = "sync"

[run]
steps = 30
seed = 1
"""


def _load(tmp_path, extra: str = "", base: str = BASE):
    p = tmp_path / "study.toml"
    p.write_text(base + extra)
    return load(str(p))


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            "[stragglers]\nlognormal_sigma = nan",
            r"stragglers.lognormal_sigma: .*\[0, 10\], got nan",
        ),
        ("[stragglers]\nslow_factor = inf", r"stragglers.slow_factor: .*\(0, 1e\+06\], got inf"),
        ("[stragglers]\nslow_fraction = 2.0", r"stragglers.slow_fraction: .*\[0, 1\], got 2.0"),
        (
            "[stragglers]\npareto_probability = 2",
            r"stragglers.pareto_probability: .*\[0, 1\], got 2",
        ),
        ("[hybrid]\ntarget_accuracy = 2", r"hybrid.target_accuracy: .*\(0, 1\], got 2"),
        ("[stragglers]\npareto_alpha = -inf", r"stragglers.pareto_alpha: .*\[0, 1000\], got -inf"),
    ],
)
def test_non_finite_and_out_of_range_numbers_name_field_and_range(tmp_path, extra, message):
    with pytest.raises(ScenarioError, match="study.toml: " + message):
        _load(tmp_path, extra)


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("ps = 2", "ps = 9223372036854775807", r"cluster.ps: expected an integer in \[0, 10_000\]"),
        ("batch_size = 64", "batch_size = 2147483648", r"model.batch_size: .*\[1, 1_048_576\]"),
        ("workers = 4", "workers = 1000000000", r"cluster.workers: .*\[1, 100_000\]"),
        ("compute_s = 0.5", "compute_s = inf", r"model.compute_s: .*got inf"),
    ],
)
def test_sizes_are_bounded(tmp_path, old, new, message):
    with pytest.raises(ScenarioError, match="study.toml: " + message):
        _load(tmp_path, base=BASE.replace(old, new))


def test_worker_efficiency_is_a_fraction(tmp_path):
    with pytest.raises(ScenarioError, match=r"cluster.worker_efficiency: .*\(0, 1\], got inf"):
        _load(tmp_path, base=BASE.replace("ps = 2", "ps = 2\nworker_efficiency = inf"))


def test_empirical_file_errors_never_echo_contents(tmp_path):
    secret = tmp_path / "env"
    secret.write_text("HETBED_CLUSTER_TOKEN=deadbeefcafe\nPATH=/usr/bin\n")
    sc = _load(tmp_path, f'[stragglers]\nempirical_file = "{secret}"')
    with pytest.raises(ScenarioError, match="stragglers.empirical_file") as e:
        runner.run(expand(sc)[0])
    assert "deadbeef" not in str(e.value) and "PATH" not in str(e.value)
    csv = tmp_path / "t.csv"
    csv.write_text("HETBED_CLUSTER_TOKEN_deadbeef\nx\n")
    sc = _load(tmp_path, f'[stragglers]\nempirical_file = "{csv}"')
    with pytest.raises(ScenarioError, match="stragglers.empirical_file") as e:
        runner.run(expand(sc)[0])
    assert "deadbeef" not in str(e.value)
    with pytest.raises(ScenarioError, match="stragglers.empirical_file: no such file"):
        _load(tmp_path, f'[stragglers]\nempirical_file = "{tmp_path / "nope"}"')


def test_failures_section_is_validated(tmp_path):
    for events, message in [
        ('[{kind = "gpu", index = 0, at_s = 1.0}]', r"failures.events\[0\].kind: expected"),
        ('[{kind = "ps", index = 2, at_s = 1.0}]', r"failures.events\[0\].index: .*\[0, 1\]"),
        ('[{kind = "worker", index = 0, at_s = nan}]', r"failures.events\[0\].at_s: .*nan"),
        ('[{kind = "worker", index = 0}]', r"failures.events\[0\]: expected a table with exactly"),
    ]:
        with pytest.raises(ScenarioError, match="study.toml: " + message):
            _load(tmp_path, f"[failures]\nevents = {events}")
    with pytest.raises(ScenarioError, match="hybrid: only used by a hybrid model"):
        _load(tmp_path, "[hybrid]\nlearning_rate = 0.1")


def test_failures_are_wired_into_the_drivers(tmp_path):
    """A PS failure with rollback redoes steps: fewer steps per second, steps_lost reported."""
    plain = runner.run(expand(_load(tmp_path))[0]).summary
    failing = (
        "[failures]\n"
        'events = [{kind = "ps", index = 1, at_s = 5.0}]\n'
        "restart_delay_s = 2.0\ncheckpoint_every_steps = 4\n"
    )
    s = runner.run(expand(_load(tmp_path, failing))[0]).summary
    assert s["failures"] == 1 and s["steps_lost"] >= 1
    assert s["sim_time_s"] > plain["sim_time_s"] + 2.0
    assert "failures" not in plain


@pytest.mark.parametrize(
    "extra, message",
    [
        ("[stragglers]\npareto_alpha = 0.001\n", r"stragglers.pareto_alpha: expected 0 \(off\)"),
        (
            "[stragglers]\nslow_factor = 0.01\n",
            r"stragglers.slow_factor: expected a number in \[1,",
        ),
        ("", None),  # the base itself is fine
    ],
)
def test_straggler_settings_that_cannot_be_simulated_are_named(tmp_path, extra, message):
    if message is None:
        _load(tmp_path, extra)
        return
    with pytest.raises(ScenarioError, match=message):
        _load(tmp_path, extra)


def test_the_smallest_pareto_tail_index_draws_finite_factors():
    """The bound's reason: at PARETO_ALPHA_MIN and the largest scale, the largest draw numpy can
    make (its exponential variate's largest value) is still a finite float."""
    import math

    from hetbed.scenarios.schema import PARETO_ALPHA_MIN, SCHEMA

    largest_exponential = -math.log(2.0**-53)
    scale = SCHEMA["stragglers"]["pareto_scale"].max
    assert largest_exponential / PARETO_ALPHA_MIN + math.log(scale) < math.log(1.7e308)
    assert largest_exponential / (PARETO_ALPHA_MIN / 2) > math.log(1.7e308)  # not far below


@pytest.mark.parametrize(
    "change, message",
    [
        ('nic = "eth_10g"', None),
        ('nic = "nvlink2"', r"cluster.nic: 'nvlink2' is a nvlink link, not a network"),
        ('nic = "pcie3_x16"', r"cluster.nic: 'pcie3_x16' is a pcie link"),
        (
            'worker_device = "k40"\nhost_topology = "dgx1_v100"',
            r"'dgx1_v100' is built of v100_sxm2",
        ),
    ],
)
def test_cluster_settings_that_contradict_the_catalog(tmp_path, change, message):
    base = BASE.replace("ps = 2", "ps = 2\n" + change)
    if message is None:
        _load(tmp_path, base=base)
        return
    with pytest.raises(ScenarioError, match=message):
        _load(tmp_path, base=base)


def test_a_precision_mode_needs_its_peak_and_a_float32_model(tmp_path):
    v100 = BASE.replace("ps = 2", 'ps = 2\nworker_device = "v100_sxm2"')
    for precision, ok in (("tf32", False), ("mixed_float16", True), ("mixed_bfloat16", False)):
        base = v100.replace("compute_s = 0.5", f'compute_s = 0.5\nprecision = "{precision}"')
        if ok:
            _load(tmp_path, base=base)
        else:
            with pytest.raises(ScenarioError, match=r"model.precision: .* 'v100_sxm2' has no peak"):
                _load(tmp_path, base=base)
    a100 = BASE.replace("ps = 2", 'ps = 2\nworker_device = "a100_sxm4_40gb"')
    _load(tmp_path, base=a100.replace("compute_s = 0.5", 'compute_s = 0.5\nprecision = "tf32"'))
    half = a100.replace("compute_s = 0.5", 'compute_s = 0.5\ndtype = "float16"\nprecision = "tf32"')
    with pytest.raises(ScenarioError, match="model.precision: 'tf32' is how a float32 model"):
        _load(tmp_path, base=half)


def test_sweeps_name_their_entries_and_refuse_repeats(tmp_path):
    with pytest.raises(ScenarioError, match=r'sweep."cluster.workers"\[1\]: expected an integer'):
        _load(tmp_path, '[sweep]\n"cluster.workers" = [1, -2]\n')
    with pytest.raises(ScenarioError, match=r'sweep."cluster.workers"\[2\]: 4 is already'):
        _load(tmp_path, '[sweep]\n"cluster.workers" = [4, 8, 4]\n')
    with pytest.raises(ScenarioError, match=r'sweep."stragglers.slow_factor"\[1\]: 2.0 is already'):
        _load(tmp_path, '[sweep]\n"stragglers.slow_factor" = [2, 2.0]\n')
    with pytest.raises(ScenarioError, match=r'sweep."scenario.name": \[scenario\] describes'):
        _load(tmp_path, '[sweep]\n"scenario.name" = ["a", "b"]\n')
    with pytest.raises(ScenarioError, match=r'sweep."cluster.workers": expected a non-empty'):
        _load(tmp_path, '[sweep]\n"cluster.workers" = []\n')  # (spelled as the entries are)
    with pytest.raises(ScenarioError, match=r"run.seeds: seeds .* pass the largest seed"):
        _load(tmp_path, base=BASE.replace("seed = 1", "seed = 9223372036854775807\nseeds = 2"))


def test_an_empirical_file_is_relative_to_the_scenario_and_never_quoted(tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "times.txt").write_text("0.5 0.6 0.55\n")
    p = tmp_path / "sub" / "study.toml"
    p.write_text(BASE + '[stragglers]\nempirical_file = "times.txt"\n')
    monkeypatch.chdir(tmp_path)  # not the scenario's folder
    sc = load(str(p))
    assert sc["stragglers"]["empirical_file"] == str(tmp_path / "sub" / "times.txt")
    assert runner.run(expand(sc)[0]).summary["step_time_p50_s"] > 0
    (tmp_path / "sub" / "times.txt").write_text("0.5 0.6 -0.7 0.55 nan\n")
    with pytest.raises(ScenarioError, match=r"2 of 5 values are not \(the first is value 3\)") as e:
        runner.run(expand(load(str(p)))[0])
    assert "-0.7" not in str(e.value) and "nan" not in str(e.value)


def test_an_empirical_csv_of_several_numeric_columns_needs_its_column(tmp_path):
    # a step index beside the times was once read as the times: now the column is named
    rows = "\n".join(f"{i},{0.1 + 0.001 * (i % 7)}" for i in range(1, 60))
    (tmp_path / "times.csv").write_text("step,step_time_s\n" + rows + "\n")
    p = tmp_path / "study.toml"
    p.write_text(BASE + '[stragglers]\nempirical_file = "times.csv"\n')
    with pytest.raises(
        ScenarioError, match=r"2 numeric columns \('step', 'step_time_s'\).*empirical_column"
    ):
        runner.run(expand(load(str(p)))[0])
    p.write_text(
        BASE + '[stragglers]\nempirical_file = "times.csv"\nempirical_column = "step_time_s"\n'
    )
    named = runner.run(expand(load(str(p)))[0]).summary["step_time_p50_s"]
    (tmp_path / "only.csv").write_text(
        "step_time_s\n" + "\n".join(r.split(",")[1] for r in rows.split("\n"))
    )
    p.write_text(BASE + '[stragglers]\nempirical_file = "only.csv"\n')
    assert runner.run(expand(load(str(p)))[0]).summary["step_time_p50_s"] == named


def test_unreadable_scenario_files_are_named(tmp_path):
    binary = tmp_path / "binary.toml"
    binary.write_bytes(bytes(range(128, 256)) * 4)
    with pytest.raises(ScenarioError, match=r"binary.toml: not valid TOML: not UTF-8 text"):
        load(str(binary))
    folder = tmp_path / "adir.toml"
    folder.mkdir()
    with pytest.raises(ScenarioError, match="a folder, not a scenario file"):
        load(runner.find_scenario(str(folder)))
    big = tmp_path / "big.toml"
    big.write_text(BASE.replace('"validation"', '"' + "x" * (1 << 20) + '"'))
    with pytest.raises(
        ScenarioError, match=r"big.toml: .* bytes, expected a scenario file of at most"
    ):
        load(str(big))


def test_a_batch_that_does_not_fit_names_the_setting(tmp_path):
    base = BASE.replace("compute_s = 0.5\n", "").replace("batch_size = 64", "batch_size = 1048576")
    base = base.replace('name = "mlp"', 'name = "cnn"')
    sc = _load(tmp_path, base=base.replace("ps = 2", 'ps = 2\nworker_device = "k40"'))
    with pytest.raises(ScenarioError, match=r"model.batch_size: cnn at batch 1048576 does not fit"):
        runner.run(expand(sc)[0])


def test_a_failure_studys_report_shows_what_the_failures_cost(tmp_path):
    """The report's table of a study with [failures] events has the failures, the steps lost
    and the simulated time; a study without has none of them."""
    import pandas as pd

    from hetbed.reports import study
    from hetbed.scenarios.runner import summary_frame

    failing = (
        "[failures]\n"
        'events = [{kind = "ps", index = 1, at_s = 5.0}]\n'
        "restart_delay_s = 2.0\ncheckpoint_every_steps = 4\n"
    )
    for extra, shown in ((failing, True), ("", False)):
        sc = _load(tmp_path, extra)
        res = [runner.run(p) for p in expand(sc)]
        md = study.build(sc, summary_frame(res), pd.DataFrame(), {}).markdown()
        table = md[md.index("## All settings") :]
        header = table.splitlines()[2]
        for col in ("failures", "steps_lost", "sim_time_s"):
            assert (col in header) == shown, header
        if shown:
            row = dict(
                zip(header.strip("|").split("|"), table.splitlines()[4].strip("|").split("|"))
            )
            assert float(row[" failures "]) == 1 and float(row[" steps_lost "]) >= 1


def test_failure_events_after_the_runs_end_are_said_not_dropped(tmp_path):
    """An event timed after the run ends does not happen: the summary counts it apart, and the
    report names it with the simulated time the run ended at; one that happens is not named."""
    import pandas as pd

    from hetbed.reports import study
    from hetbed.scenarios.runner import summary_frame

    failing = (
        "[failures]\n"
        'events = [{kind = "ps", index = 1, at_s = 5.0}, {kind = "worker", index = 3, '
        "at_s = 1e5}]\nrestart_delay_s = 2.0\ncheckpoint_every_steps = 4\n"
    )
    sc = _load(tmp_path, failing)
    res = [runner.run(p) for p in expand(sc)]
    s = res[0].summary
    assert s["failures"] == 1 and s["failures_not_reached"] == 1 and s["sim_time_s"] < 1e5
    md = study.build(sc, summary_frame(res), pd.DataFrame(), {}).markdown()
    line = next(ln for ln in md.splitlines() if ln.startswith("Not every failure event"))
    assert "worker 3 at 100,000 s" in line and "ps 1" not in line
    assert f"{s['sim_time_s']:.4g}" in line.replace(",", "")
    on_time = _load(tmp_path, failing.replace("at_s = 1e5", "at_s = 6.0"))
    res = [runner.run(p) for p in expand(on_time)]
    assert res[0].summary["failures_not_reached"] == 0
    md = study.build(on_time, summary_frame(res), pd.DataFrame(), {}).markdown()
    assert "Not every failure event" not in md


def test_describe_asks_about_a_nic_rate_typed_in_the_wrong_unit(tmp_path, monkeypatch):
    """A link of 10 "bytes/s" (someone wrote Gb/s) is accepted, and describe says what the
    field's unit is; a real NIC gets no such line."""
    from hetbed.scenarios.schema import describe

    cat = tmp_path / "cat"
    (cat / "links").mkdir(parents=True)
    (cat / "links" / "eth_typo.toml").write_text(
        'name = "typo"\nkind = "ethernet"\n'
        'bandwidth_bytes_per_s = { value = 10, source = "mine" }\n'
        'latency_s = { value = 25e-6, source = "mine" }\n'
    )
    monkeypatch.setenv("HETBED_CATALOG_PATH", str(cat))
    base = BASE.replace("ps = 2", 'ps = 2\nnic = "eth_typo"')
    checks = [ln for ln in describe(_load(tmp_path, base=base)).splitlines() if "check" in ln]
    assert checks == [
        "  check    eth_typo moves 10 bytes/s (80 bit/s): its bandwidth_bytes_per_s is in bytes "
        "per second (10 Gb/s is 1.25e9)"
    ]
    assert "check" not in describe(_load(tmp_path))


def test_describe_names_settings_that_change_nothing_here(tmp_path):
    from hetbed.scenarios.schema import describe

    assert "no effect" not in describe(_load(tmp_path))
    base = BASE.replace("ps = 2", "ps = 2\noversubscription = 4.0")
    base = base.replace('kind = "sync"', 'kind = "sync"\nbucket_mb = 1.0')
    text = describe(_load(tmp_path, "[stragglers]\nslow_factor = 3.0\n", base=base))
    notes = [line for line in text.splitlines() if "no effect" in line]
    assert notes == [
        '  no effect cluster.oversubscription: only a fabric = "two_level" has racks; '
        'cluster.fabric is "switch"',
        '  no effect strategy.bucket_mb: only strategy.kind = "allreduce" uses them',
        "  no effect stragglers.slow_factor: stragglers.slow_fraction is 0: no worker is slow",
    ]
    few = describe(_load(tmp_path, "[stragglers]\nslow_fraction = 0.1\nslow_factor = 3.0\n"))
    assert (  # 0.1 of 4 workers: no whole machine
        "no effect stragglers.slow_fraction, stragglers.slow_factor: slow_fraction x (workers + "
        "backup_workers) rounds to 0 slow machines" in few
    )
    assert "no effect" not in describe(_load(tmp_path, "[stragglers]\nslow_fraction = 0.2\n"))
    text = describe(_load(tmp_path))
    assert (
        "assumed  cluster.worker_efficiency = 1: workers compute at their datasheet roofline"
        in text
    )
    tpu = BASE.replace("ps = 2", 'ps = 2\nworker_device = "tpu_v3"\nworker_efficiency = 0.5')
    text = describe(_load(tmp_path, base=tpu))
    assert (
        "assumed  tpu_v3 lists no float32 peak: the model's float32 ops are priced at its bfloat16 peak"
        in text
    )
    assert "worker_efficiency = 1" not in text  # (set: not an assumption)
    two_level = BASE.replace("ps = 2", 'ps = 2\nfabric = "two_level"\noversubscription = 4.0')
    with pytest.raises(ScenarioError, match="cluster.fabric: 'two_level' is not modelled"):
        _load(tmp_path, base=two_level)  # (the step-level drivers have one switch)
