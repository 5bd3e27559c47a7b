"""runtime/host_memory.py: with glibc, freed kernel buffers stay in the process, so a step that
allocates the same large buffers again touches no fresh pages (counted as minor page faults)."""

import os
import subprocess
import sys

import pytest

PROGRAM = r"""
import resource, sys
import numpy as np
from hetbed.runtime.host_memory import keep_freed_memory
on = keep_freed_memory()
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
def step():  # what an unrolled RNN's gradient does: 20 live 2 MB buffers, then freed
    bufs = [np.ones((512, 1024), np.float32) for _ in range(20)]
    return sum(float(b[0, 0]) for b in bufs)
step()
before = faults()
for _ in range(10):
    step()
print(int(on), faults() - before)
"""


def _run(env_value):
    env = dict(os.environ)
    env.pop("HETBED_MALLOC", None)
    if env_value is not None:
        env["HETBED_MALLOC"] = env_value
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    on, faults = out.stdout.split()
    return bool(int(on)), int(faults)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt: Linux only")
def test_freed_buffers_are_reused_without_page_faults():
    on, kept = _run(None)
    off, system = _run("system")
    assert on and not off
    pages = 10 * 20 * (512 * 1024 * 4) // 4096  # what touching fresh pages every step costs
    assert system > pages // 2  # glibc's defaults: every step faults its buffers in again
    assert kept < pages // 20


def test_a_bad_setting_is_named(monkeypatch):
    from hetbed.runtime import host_memory

    monkeypatch.setenv("HETBED_MALLOC", "fast")
    with pytest.raises(ValueError, match="HETBED_MALLOC='fast'"):
        host_memory._tune()
