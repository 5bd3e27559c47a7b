"""The ops of synchronous updates in calibrate's op profile (scenarios/models/small.py's
``build_sync_update``), and cluster_fidelity's choice of op costs."""

from __future__ import annotations

import importlib.util
import os

import numpy as np

import hetbed as hb
from hetbed.devices.costmodel import Profiled
from hetbed.scenarios.models.small import (
    BUILDERS,
    CALIBRATION_BUILDERS,
    build_sparse_sync_update,
    build_stream_update,
    build_sync_update,
)
from hetbed.simulator.calibrate import calibrate_models


def test_sync_update_step_values():
    """Each step applies the averaged gradient of one replica by SGD and hands the new global
    step back as the local step (token)."""
    g = hb.Graph()
    with g.as_default():
        train, feed = build_sync_update(n=8)
        (x,) = feed.values()
        sess = hb.Session(graph=g)
        sess.run(hb.global_variables_initializer())
        s, v = 0.5, np.zeros(8, np.float32)
        for k in range(3):
            sess.run(train, feed)
            # loss = mean((v * x - 1)^2): d/dv = 2 x (v x - 1) / n (elementwise for the vector,
            # summed over the elements for the scalar)
            s -= 0.01 * float(np.mean(2 * x * (s * x - 1)))
            v -= 0.01 * (2 * x * (v * x - 1) / 8)
            assert sess.run("sync_local_step:0") == k + 1 == sess.run("sync_global_step:0")
        np.testing.assert_allclose(sess.run("sync_scalar:0"), s, rtol=1e-5)
        np.testing.assert_allclose(sess.run("sync_vector:0"), v, rtol=1e-5, atol=1e-7)


def test_stream_update_step_values():
    """Each step of the large-variable update applies d/dv sum(v * x) = x by SGD through the
    accumulator, and moves the local step on (so the next gradient is not stale and the step
    does not wait)."""
    g = hb.Graph()
    with g.as_default():
        train, feed = build_stream_update(n=8)
        (x,) = feed.values()
        sess = hb.Session(graph=g)
        sess.run(hb.global_variables_initializer())
        for k in range(3):
            sess.run(train, feed, options=hb.RunOptions(timeout_in_ms=20_000))
            assert sess.run("stream_local_step:0") == k + 1
        np.testing.assert_allclose(sess.run("stream_v:0"), -0.03 * x, rtol=1e-5)


def test_sparse_sync_update_step_values():
    """Each step of the sparse update applies d/d(rows) sum(rows * x) = x to the looked-up rows
    only, by sparse SGD through the sparse accumulator, and moves the local step on."""
    g = hb.Graph()
    with g.as_default():
        train, feed = build_sparse_sync_update(rows=40, dim=3, k=5)
        (x,) = feed.values()
        sess = hb.Session(graph=g)
        sess.run(hb.global_variables_initializer())
        for k in range(2):
            sess.run(train, feed)
            assert sess.run("sparse_local_step:0") == k + 1
        table = sess.run("sparse_table:0")
        touched = np.flatnonzero(np.abs(table).sum(axis=1))
        assert len(touched) == 5
        np.testing.assert_allclose(table[touched], -0.02 * x, rtol=1e-5)


def test_calibrate_profiles_the_sync_update_ops():
    assert set(CALIBRATION_BUILDERS) == {
        *BUILDERS,
        "sync_update",
        "sparse_sync_update",
        "stream_update",
    }
    sparse = calibrate_models(
        {"s": lambda: build_sparse_sync_update(rows=1000, dim=8, k=16)}, repeats=2
    )
    assert {
        "SparseAccumulatorApplyGradient",
        "SparseAccumulatorTakeGradient",
        "SparseApplyGradientDescent",
        "GatherV2",
    } <= {k.split('"')[1] for k in sparse}
    table = calibrate_models({"sync_update": lambda: build_sync_update(n=16)}, repeats=2)
    types = {k.split('"')[1] for k in table}
    assert {
        "AccumulatorApplyGradient",
        "AccumulatorTakeGradient",
        "ApplyGradientDescent",
        "QueueEnqueueMany",
        "QueueDequeue",
        "AssignAdd",
        "Assign",
    } <= types
    assert all(v > 0 for v in table.values())
    # a take that finds its gradient in place is done in microseconds: its entry is not the
    # time of the other variable's update, which the schedule runs before taking its completion
    # (the scalar's take read 210 us against 6 us for its apply that way)
    takes = [v for k, v in table.items() if '"AccumulatorTakeGradient"' in k]
    applies = [v for k, v in table.items() if '"AccumulatorApplyGradient"' in k]
    assert len(takes) == len(applies) == 2 and max(takes) < 10 * max(applies)


def test_cluster_fidelity_prices_ops_by_the_calibrated_profile(tmp_path, monkeypatch):
    path = os.path.join(os.path.dirname(__file__), "..", "bench", "cluster_fidelity.py")

    def load():
        spec = importlib.util.spec_from_file_location("cluster_fidelity_under_test", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    monkeypatch.setenv("HETBED_CATALOG_PATH", str(tmp_path))
    mod = load()
    assert mod.OP_COSTS is None and "roofline" in mod.OP_COSTS_NOTE
    Profiled({'["Add", "float32", [[], []], {}]': 1e-6}).save(str(tmp_path / "profile.json"))
    mod = load()
    assert isinstance(mod.OP_COSTS, Profiled) and str(tmp_path) in mod.OP_COSTS_NOTE
    assert mod.OP_COSTS.table == {'["Add", "float32", [[], []], {}]': 1e-6}
