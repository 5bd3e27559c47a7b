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
