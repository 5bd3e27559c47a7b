"""Fixtures that put the strict cupy stand-in (tests/fakecupy) in place of cupy."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

FAKE_DIR = Path(__file__).resolve().parent / "fakecupy"


def _drop_cupy_modules() -> dict:
    gone = {}
    for name in list(sys.modules):
        if name in ("cupy", "cupyx") or name.startswith(("cupy.", "cupyx.")):
            gone[name] = sys.modules.pop(name)
    return gone


_FAKE_MODULES: dict = {}


def install_fake(n: int = 2, **kw):
    """Import the stand-in as ``cupy`` with ``n`` GPUs; returns (module, undo)."""
    saved = _drop_cupy_modules()
    if not _FAKE_MODULES:  # imported once per process, then swapped in and out
        sys.path.insert(0, str(FAKE_DIR))
        try:
            import cupy
            import cupy.cuda.nccl  # noqa: F401
            import cupyx  # noqa: F401
        finally:
            sys.path.remove(str(FAKE_DIR))
        _FAKE_MODULES.update(_drop_cupy_modules())
    sys.modules.update(_FAKE_MODULES)
    cupy = sys.modules["cupy"]
    assert getattr(cupy, "is_fake", False), cupy

    cupy._reset(n, **kw)

    def undo():
        _drop_cupy_modules()
        sys.modules.update(saved)

    return cupy, undo


@pytest.fixture
def fake_gpus():
    """``fake_gpus(n, name=..., memory=...)`` installs n stand-in GPUs for this test."""
    undos = []

    def make(n: int = 2, **kw):
        cp, undo = install_fake(n, **kw)
        undos.append(undo)
        return cp

    yield make
    for u in reversed(undos):
        u()


def fake_env(n: int = 2) -> dict:
    """Environment for a subprocess that should see n stand-in GPUs as cupy."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(FAKE_DIR), env.get("PYTHONPATH", "")) if p)
    env["HETBED_FAKECUPY_GPUS"] = str(n)
    return env
