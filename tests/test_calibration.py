"""Calibration measurements: repeated, with min/median/max, the load other processes put on the
machine meanwhile, and a noisy flag that says why."""

import re
import subprocess
import sys

import pytest

from hetbed.simulator.calibrate import (
    NOISY_SPREAD,
    LoadMeter,
    Measurement,
    profile_and_measure,
)


def test_a_measurement_gives_median_min_max_and_flags_spread_or_load():
    m = Measurement("x", "s", [1.0, 1.02, 0.99], load_cores=0.0)
    assert m.median == 1.0 and m.spread == pytest.approx(0.8 * 0.03) and not m.noisy
    wide = Measurement("x", "s", [1.0, 1.0, 1.3, 1.3], load_cores=0.0)  # 0.3 / 1.15
    assert wide.spread == pytest.approx(0.3 / 1.15) and wide.spread > NOISY_SPREAD
    assert wide.noisy and "NOISY (spread 26% > 10%" in wide.describe()
    one_outlier = Measurement("x", "s", [1.0] * 19 + [3.0], load_cores=0.0)
    assert not one_outlier.noisy  # the 10th to 90th percentile: one slow round is not noise
    busy = Measurement("x", "s", [1.0, 1.0], load_cores=1.5)
    assert busy.noisy and "other processes used 1.50 cores" in busy.describe()
    assert busy.row(1e3) == {
        "median": 1e3,
        "min": 1e3,
        "max": 1e3,
        "repeats": 2,
        "other_load_cores": 1.5,
        "noisy": True,
    }
    assert "1000 [1000, 1000] ms over 2, other load 1.50 cores" in busy.describe(1e3, "ms")


def test_the_load_meter_sees_another_busy_process():
    """A child spinning for 1 s is load from another process (about one core)."""
    meter = LoadMeter().start()
    if meter.busy is None:
        pytest.skip("this machine has no /proc/stat")
    child = subprocess.Popen(
        [sys.executable, "-c", "import time\nt=time.time()\nwhile time.time()-t<1: pass"]
    )
    child.wait(timeout=30)
    assert meter.stop() > 0.3


def test_profile_and_measure_reports_the_rounds():
    from hetbed.scenarios.models.small import build_mlp

    work: dict = {}
    table, step = profile_and_measure(lambda: build_mlp(batch=8, sizes=(16, 8, 4)), 3, 2, work)
    assert len(step.values) == 3 and step.median > 0 and step.unit == "s"
    assert table and set(work) <= set(table)


def test_loopback_is_measured_and_written_as_a_catalog_link(tmp_path):
    """The loopback TCP rate and latency come from a socket on 127.0.0.1; the link file loads
    from the catalog with every number's source."""
    from hetbed.devices.catalog import load_file
    from hetbed.simulator.calibrate import loopback_link, write_link_toml
    from hetbed.simulator.messages import loopback_aggregate

    rate, latency = loopback_link(big=4 << 20, pings=50)
    assert 1e7 < rate < 1e12 and 0 < latency < 0.05
    together = loopback_aggregate(big=4 << 20, rounds=2)  # two streams' best round
    assert 1e7 < together < 1e12
    write_link_toml(rate, latency, str(tmp_path / "loopback.toml"), together)
    link = load_file(str(tmp_path / "loopback.toml"))
    assert (link.kind, link.bandwidth_bytes_per_s, link.latency_s) == ("loopback", rate, latency)
    assert link.aggregate_bandwidth_bytes_per_s == together
    assert all(v.startswith("measured by hetbed calibrate on ") for v in link.sources.values())


def test_calibrate_profiles_a_users_own_model(tmp_path, capsys):
    """`hetbed calibrate --model FILE.py:FUNCTION` profiles that step (its MatMul is in the
    profile), writes this_machine.toml with the cores and loopback.toml, and reports each
    measurement with its spread; a bad spec is a clear error."""
    import json

    from hetbed.cli import main
    from hetbed.devices.catalog import load_file
    from hetbed.simulator.calibrate import host_cores

    (tmp_path / "mine.py").write_text(
        "import numpy as np\n"
        "import hetbed as hb\n\n"
        "def step():\n"
        "    x = hb.placeholder(hb.float32, [None, 48])\n"
        "    w = hb.Variable(np.ones((48, 24), np.float32))\n"
        "    loss = hb.reduce_sum(hb.matmul(x, w))\n"
        "    train = hb.train.GradientDescentOptimizer(0.1).minimize(loss)\n"
        "    return train, {x: np.ones((8, 48), np.float32)}\n"
    )
    out = tmp_path / "cal"
    spec = f"{tmp_path / 'mine.py'}:step"
    assert main(["calibrate", "--model", spec, "--repeats", "1", "--out", str(out), "--json"]) == 0
    cap = capsys.readouterr()
    doc = json.loads(cap.out)
    # (the switch-cost fit's shape against what each client count added, printed)
    for what in ("small remote step", "remote step moving 1 MiB each way"):
        assert re.search(
            rf"check, 8 clients and the PS, {what}: CPU per step [+-]\d+% over 1, "
            r"simulated \+\d+%; the PS's part [+-]\d+%, simulated [+-]\d+%",
            cap.err,
        )
    # (the checks no fit sees: client threads of one process at once, a step's fed values)
    for k in (1, 2, 3):
        assert re.search(
            rf"check, {k} client thread\(s\) at once, 1 scalar read and sent back step: "
            r"measured \d+ us a step, simulated \d+ us \([+-]\d+%\)",
            cap.err,
        )
    assert re.search(
        r"check, a step fed 8 MiB against one fed 4 KiB \(its own task\): measured [+-]\d+ us, "
        r"simulated \+\d+ us",
        cap.err,
    )
    names = [m["name"] for m in doc["measurements"]]
    assert names[-19:] == [
        "loopback TCP rate",
        "loopback TCP latency",
        "message CPU time per end",
        "control message CPU time per end",
        "own-task control message CPU time per end",
        "message latency of the runtime",
        "distributed Session.run CPU time per step",
        "message CPU time per byte per end",
        *(f"CPU per small remote step, {n} client(s) at once" for n in (1, 2, 4, 8)),
        "switch_cpu_share, one fit per repetition",
        *(
            f"CPU per remote step moving 1 MiB each way, {n} client(s) at once"
            for n in (1, 2, 4, 8)
        ),
        "switch_byte_cpu_share, one fit per repetition",
        "thread hand-off of a blocked op",
    ]
    assert all(
        m["repeats"] == 1 and m["min"] <= m["median"] <= m["max"] for m in doc["measurements"]
    )
    table = json.loads((out / "profile.json").read_text())
    assert any('"MatMul", "float32", [[8, 48], [48, 24]]' in k for k in table["table"])
    assert table["version"] == 3 and set(table["work"]) <= set(table["table"])
    assert set(table["threads"]) <= set(table["table"]) and all(
        v >= 1 for v in table["threads"].values()
    )
    machine = load_file(str(out / "this_machine.toml"))
    assert table["cache_bytes"] == machine.cache_bytes  # the cache the entries ran with
    assert machine.cores == host_cores()
    per_msg = next(m for m in doc["measurements"] if m["name"] == "message CPU time per end")
    assert machine.message_overhead_s == pytest.approx(per_msg["median"])
    assert 1e-6 < machine.message_overhead_s < 5e-3  # a message of a Python runtime, per end
    own = next(
        m for m in doc["measurements"] if m["name"] == "own-task control message CPU time per end"
    )
    assert machine.own_control_message_overhead_s == pytest.approx(max(own["median"], 1e-9))
    assert machine.step_overhead_s == 1e-9  # (counted in the own-task call's ends)
    clocked = next(
        m for m in doc["measurements"] if m["name"] == "executor dispatch per op, clocked schedule"
    )
    assert machine.kernel_launch_overhead_clocked_s == pytest.approx(clocked["median"])
    assert 0 < machine.switch_cpu_share <= 4  # fitted to those steps (1e-9 when none)
    assert 0 < machine.switch_byte_cpu_share <= 4  # (the steps moving 1 MiB)
    woken = next(m for m in doc["measurements"] if m["name"] == "thread hand-off of a blocked op")
    assert machine.wake_overhead_s == pytest.approx(max(woken["median"], 1e-9))
    assert machine.wake_overhead_s < 5e-3  # two threads of a Python process trading the lock
    one = next(m for m in doc["measurements"] if m["name"].endswith("1 client(s) at once"))
    assert 1e-5 < one["median"] < 2e-2  # CPU of both processes per small remote step
    assert load_file(str(out / "loopback.toml")).kind == "loopback"
    assert main(["calibrate", "--model", f"{tmp_path / 'mine.py'}:nope", "--out", str(out)]) == 2
    assert "has no function 'nope'" in capsys.readouterr().err
    assert main(["calibrate", "--model", "no_such_module_xyz:f", "--out", str(out)]) == 2
    assert "cannot import no_such_module_xyz" in capsys.readouterr().err


def test_a_dispatch_cost_lost_in_noise_is_still_positive(monkeypatch, tmp_path):
    """Where the executor's chain takes no longer than calling its kernels directly (noise on a
    busy machine), the measured dispatch cost is the clock's resolution per op, not 0, and the
    machine file calibrate writes with it loads (the catalog needs it positive)."""
    from hetbed.devices.catalog import load_device
    from hetbed.devices.costmodel import DevicePerf
    from hetbed.simulator import machine
    from hetbed.simulator.calibrate import write_machine_toml

    monkeypatch.setattr(machine, "best_of", lambda fn, repeat=5, number=5: 0.01)
    d = machine.dispatch_overhead(n_ops=10)
    assert 0.0 < d <= 1e-6
    perf = DevicePerf("this_machine", {"float32": 1e10, "float64": 5e9}, 1e10,
                      launch_overhead_s=d, clocked_launch_overhead_s=d, cores=2)  # fmt: skip
    write_machine_toml(perf, str(tmp_path / "this_machine.toml"))
    monkeypatch.setenv("HETBED_CATALOG_PATH", str(tmp_path))
    assert load_device("this_machine").kernel_launch_overhead_s == pytest.approx(d)


def test_a_fit_at_its_floor_is_not_called_measured(tmp_path, monkeypatch):
    """A fitted cost the fit left at 0 (below what this machine resolves) is written at the
    catalog's floor with a source saying so, not "measured"; a resolved one stays measured."""
    from hetbed.devices.catalog import load_device
    from hetbed.devices.costmodel import DevicePerf
    from hetbed.simulator.calibrate import write_machine_toml

    perf = DevicePerf("this_machine", {"float32": 1e10, "float64": 5e9}, 1e10,
                      launch_overhead_s=2e-6, clocked_launch_overhead_s=2e-6, cores=2)  # fmt: skip
    perf.message_s, perf.message_s_per_byte = 3e-5, 0.0
    write_machine_toml(perf, str(tmp_path / "this_machine.toml"))
    monkeypatch.setenv("HETBED_CATALOG_PATH", str(tmp_path))
    spec = load_device("this_machine")
    assert spec.message_overhead_s_per_byte == 1e-15
    assert spec.sources["message_overhead_s_per_byte"].startswith("not resolved by hetbed")
    assert "at or below its floor 1e-15" in spec.sources["message_overhead_s_per_byte"]
    assert spec.message_overhead_s == pytest.approx(3e-5)
    assert spec.sources["message_overhead_s"].startswith("measured by hetbed calibrate")
