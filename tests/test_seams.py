"""Layering seams: what each package may import, and the extension points between them."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import hetbed as hb
from hetbed.runtime import errors as runtime_errors
from hetbed.runtime.session import BaseSession, Session, register_session_kind

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _imports(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, module) of every import in a file, relative ones resolved to hetbed.<pkg>."""
    pkg = "hetbed." + ".".join(path.relative_to(ROOT).parent.parts)
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.append((node.lineno, mod))
    return out


def test_devices_import_nothing_above_them():
    bad = [
        f"{p.relative_to(ROOT)}:{line}: {mod}"
        for p in (ROOT / "devices").rglob("*.py")
        for line, mod in _imports(p)
        if mod.startswith(
            ("hetbed.runtime", "hetbed.simulator", "hetbed.scenarios", "hetbed.reports")
        )
    ]
    assert not bad, bad


def test_runtime_never_imports_the_simulator_and_session_not_distributed():
    bad = [
        f"{p.relative_to(ROOT)}:{line}: {mod}"
        for p in (ROOT / "runtime").rglob("*.py")
        for line, mod in _imports(p)
        if mod.startswith(("hetbed.simulator", "hetbed.scenarios", "hetbed.reports"))
    ]
    assert not bad, bad
    session = [m for _l, m in _imports(ROOT / "runtime" / "session.py")]
    assert not [m for m in session if "distributed" in m], session


def test_the_simulator_imports_pandas_only_to_build_a_frame():
    """pandas (with pyarrow, ~40,000 objects every full garbage collection walks and a third of
    a second of start-up) comes in when a record or result is turned into a DataFrame."""
    code = (
        "import sys, hetbed as hb, hetbed.simulator as sim\n"
        "assert 'pandas' not in sys.modules, 'imported with the package'\n"
        "c = sim.Cluster(); c.add_task('worker', 0, cpu=None, gpu=('v100_sxm2', 1))\n"
        "g = hb.Graph()\n"
        "with g.as_default():\n"
        "    x = hb.placeholder(hb.float32, [8])\n"
        "    y = hb.identity(x * 2.0)\n"
        "    s = sim.SimSession(c, graph=g)\n"
        "s.run(y, {x: sim.sim_value([8])})\n"
        "assert 'pandas' not in sys.modules, 'imported by a step'\n"
        "f = s.last_record.ops\n"
        "assert 'pandas' in sys.modules and len(f) >= 2, f\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]


def test_errors_are_one_set_of_classes():
    from hetbed.devices import errors as device_errors

    assert runtime_errors.ResourceExhaustedError is device_errors.ResourceExhaustedError
    assert hb.errors.OpError is device_errors.OpError


def test_session_kinds_are_registered_not_imported(monkeypatch):
    from hetbed.runtime import session

    monkeypatch.setattr(session, "_SESSION_KINDS", dict(session._SESSION_KINDS))

    class Echo(Session):
        def __init__(self, target: str = "", graph=None, config=None):
            super().__init__("", graph, config)
            self.target = target

    register_session_kind("echo://", lambda: Echo)
    s = Session("echo://here")
    assert type(s) is Echo and s.target == "echo://here"
    s.close()
    with pytest.raises(hb.errors.InvalidArgumentError, match="no session kind.*grpc://"):
        BaseSession("nowhere://x")
    with pytest.raises(ValueError, match="scheme"):
        register_session_kind("", lambda: Echo)
    from hetbed.runtime.distributed.master import DistributedSession

    assert session._SESSION_KINDS["grpc://"]() is DistributedSession


def test_run_observed_hands_the_step_to_an_observer_and_profile_ops_uses_it():
    from hetbed.runtime.executor import StepObserver
    from hetbed.simulator.calibrate import profile_ops

    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, [None, 8])
        w = hb.Variable(np.ones((8, 4), np.float32))
        y = hb.matmul(x, w)
        sess = hb.Session(graph=g)
        sess.run(hb.global_variables_initializer())

    class Names(StepObserver):
        def __init__(self, prepared, feeds):
            self.feeds = dict(feeds)
            self.names: list[str] = []

        def node_finished(self, node, result, released=()):
            self.names.append(node.op.name)

    feed = {x: np.ones((5, 8), np.float32)}
    obs = sess.run_observed(y, feed, Names)
    assert y.op.name in obs.names and list(obs.feeds) == [x]
    table, times = profile_ops(sess, y, feed, repeats=2, timed_between=1)
    assert len(times) == 2
    keys = [k for k in table if '"MatMul"' in k]
    assert len(keys) == 1 and "[5, 8]" in keys[0] and table[keys[0]] > 0
    sess.close()


def test_prepared_graphs_carry_the_simulator_data_as_an_extension():
    from hetbed.simulator import Cluster, SimSession, sim_value

    c = Cluster()
    c.add_task("worker", 0, cpu=None, gpu=("v100_sxm2", 1))
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, [4, 4])
        y = hb.matmul(x, x)
        sess = SimSession(c, graph=g)
    sess.run(y, {x: sim_value([4, 4])})
    prep = sess._last_plan.prepared
    assert not hasattr(prep, "sim_charges")
    charges = prep.extensions["sim"]  # per node: new buffers or views (devices/memory.py)
    assert len(charges) == len(prep.nodes)
