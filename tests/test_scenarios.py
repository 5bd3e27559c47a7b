"""Scenario files: validation names file, field path and expectation; sweeps expand."""

import pytest

from hetbed.scenarios.schema import ScenarioError, describe, expand, load

GOOD = """
[scenario]
name = "backup workers"

[model]
name = "inception_v3"
batch_size = 32

[cluster]
workers = 50
ps = 17

[strategy]
kind = "sync"

[run]
steps = 100
seed = 3

[sweep]
"strategy.backup_workers" = [0, 1, 2]
"""


def write(tmp_path, text, name="study.toml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_defaults_filled_and_sweep_expanded(tmp_path):
    """A valid file gets defaults; a sweep gives one validated scenario per value."""
    sc = load(write(tmp_path, GOOD))
    assert sc["cluster"]["nic"] == "eth_10g" and sc["strategy"]["placement"] == "greedy"
    points = expand(sc)
    assert [p["strategy"]["backup_workers"] for p in points] == [0, 1, 2]
    assert points[2]["_point"] == {"strategy.backup_workers": 2}
    assert "50 x k40 workers" in describe(sc) and "(3 runs)" in describe(sc)


@pytest.mark.parametrize(
    "change, message",
    [
        (
            ("workers = 50", "workers = -3"),
            r"study.toml: cluster.workers: expected an integer in \[1, 100_000\], got -3",
        ),
        (("ps = 17", "ps = 17\nspeed = 2"), r"study.toml: cluster.speed: unknown field"),
        (
            ('kind = "sync"', 'kind = "hogwild"'),
            r"strategy.kind: expected one of 'sync', 'async', 'allreduce'",
        ),
        (
            ("batch_size = 32", 'batch_size = "big"'),
            r"model.batch_size: expected an integer in \[1, 1_048_576\], got 'big'",
        ),
        (
            ('kind = "sync"', 'kind = "sync"\nbackup_workers = 60'),
            r"backup_workers: expected fewer backup workers than workers \(50\), got 60",
        ),
        (("ps = 17", "ps = 0"), r"cluster.ps: expected >= 1 PS task"),
        (
            ('kind = "sync"', 'kind = "allreduce"\nall_reduce = "star"'),
            r"strategy.all_reduce: expected one of 'ring', 'tree'",
        ),
        (
            ('"strategy.backup_workers" = [0, 1, 2]', '"strategy.backup_workers" = [0, 60]'),
            r"sweep point.*backup_workers",
        ),
        (
            ('"strategy.backup_workers" = [0, 1, 2]', '"cluster.colour" = [1]'),
            r"sweep.\"cluster.colour\": not a field",
        ),
    ],
)
def test_errors_name_file_field_and_expectation(tmp_path, change, message):
    """Each bad value is an error naming the file, the field path and what was expected."""
    text = GOOD.replace(*change)
    with pytest.raises(ScenarioError, match=message):
        for _ in expand(load(write(tmp_path, text))):
            pass


def test_missing_section_and_bad_toml(tmp_path):
    """A missing required section and malformed TOML are errors naming the file."""
    with pytest.raises(ScenarioError, match=r"study.toml: missing section \[cluster\]"):
        load(write(tmp_path, GOOD.replace("[cluster]\nworkers = 50\nps = 17\n", "")))
    with pytest.raises(ScenarioError, match="bad.toml: not valid TOML"):
        load(write(tmp_path, "[model\nname=1", "bad.toml"))
    with pytest.raises(ScenarioError, match="no such scenario file"):
        load(str(tmp_path / "missing.toml"))
