"""Calibration measurements: repeated, with min/median/max, the load other processes put on the
machine meanwhile, and a noisy flag that says why."""

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
