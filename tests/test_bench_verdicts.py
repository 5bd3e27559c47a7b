"""Benchmarks judge honestly: a target line says 'met' only on real, finite, passing numbers."""

import importlib.util
import os

import pytest

_PATH = os.path.join(os.path.dirname(__file__), "..", "bench", "common.py")


@pytest.fixture(scope="module")
def verdict():
    spec = importlib.util.spec_from_file_location("bench_common", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.verdict


def test_failed_measurements_never_pass(verdict):
    """No measurement, a NaN or an inf among them is 'NOT measured', even if the rest pass."""
    at_least_half = lambda r: r >= 0.5  # noqa: E731
    assert verdict([], at_least_half) == "NOT measured"
    assert verdict([float("nan")], at_least_half) == "NOT measured"
    assert verdict([0.9, float("nan")], at_least_half) == "NOT measured"
    assert verdict([float("inf")], at_least_half) == "NOT measured"


def test_every_repetition_must_pass(verdict):
    """'met' needs every value to pass; one failing repetition (a negative difference too) is
    judged with the others, not alone."""
    under_20 = lambda us: us < 20  # noqa: E731
    assert verdict([4.0, 5.5, -1.0], under_20) == "met"
    assert verdict([4.0, 25.0, 5.0], under_20) == "NOT met"
    assert verdict([0.6, 0.7], lambda r: r >= 0.5) == "met"
    assert verdict([0.4, 0.7], lambda r: r >= 0.5) == "NOT met"


def test_cluster_fidelity_judges_the_measurements_as_taken_and_normalized(capsys):
    """cluster_fidelity's target lines, against each row's measurements as taken and normalized
    by the machine's speed factor while each ran (the probes either side of it): a model that
    predicts the normalized times exactly meets every normalized target and misses the others
    by the factor (here 1.25, 20% under), and the scaling compares W = max with W = 1."""
    path = os.path.join(os.path.dirname(__file__), "..", "bench", "cluster_fidelity.py")
    spec = importlib.util.spec_from_file_location("bench_cluster_fidelity", path)
    cf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cf)
    # (mode, model, W, measured per repetition, step-level, op-level, factor per repetition)
    rows = [
        ("sync", "scalar", 1, [2.5e-3, 2.5e-3, 2.5e-3], 2e-3, 2e-3, [1.25, 1.25, 1.25]),
        ("sync", "scalar", 4, [10e-3, 5e-3, 7.5e-3], 8e-3, None, [2.5, 1.25, 1.25]),
        ("async", "scalar", 1, [1.25e-3] * 3, 1e-3, 1e-3, [1.25] * 3),
    ]
    assert cf._normalized(rows[1]) == pytest.approx([4e-3, 4e-3, 6e-3])
    cf._targets(rows, lambda r: r[3], "")
    cf._targets(rows, cf._normalized, ", normalized")
    out = capsys.readouterr().out.splitlines()
    assert "target: step-level median |error| <= 10%: 20%, NOT met" in out
    assert "target: step-level worst |error| <= 25%: 20%, met" in out
    # normalized: W = 4 reads 4 ms (median of 4, 4, 6), predicted 8 ms: +100%, and its scaling
    # 4x against 2x measured; W = 1 exact; the op-level has no W = 4 prediction
    assert "target: step-level median |error| <= 10%, normalized: 0%, met" in out
    assert "target: step-level worst |error| <= 25%, normalized: 100%, NOT met" in out
    assert (
        "target: step-level scaling (W=max / W=1) within 25% for every model, normalized: "
        "worst 100%, NOT met" in out
    )
    assert "target: op-level worst |error| <= 25%, normalized: 0%, met" in out
    assert (
        "target: op-level scaling (W=max / W=1) within 25% for every model, normalized: "
        "NOT measured" in out
    )
