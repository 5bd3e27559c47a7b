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
