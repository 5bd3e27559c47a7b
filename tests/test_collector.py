"""runtime/collector.py: importing hetbed freezes the objects alive then, so no later collection
scans them, while what is created afterwards is collected as before; HETBED_GC=system opts out."""

import os
import subprocess
import sys

import pytest

PROGRAM = r"""
import gc, weakref
import hetbed as hb
frozen = gc.get_freeze_count()
scanned = len(gc.get_objects())  # what a full collection examines
class Node:
    pass
a, b = Node(), Node()
a.other, b.other = b, a  # a cycle made after the import
alive = weakref.ref(a)
del a, b
g = hb.Graph()  # and a graph built and dropped
with g.as_default():
    hb.constant(1.0) * 2.0
dropped = weakref.ref(g)
del g
gc.collect()
print(frozen, scanned, int(alive() is None), int(dropped() is None))
"""


def _run(env_value):
    env = dict(os.environ)
    env.pop("HETBED_GC", None)
    if env_value is not None:
        env["HETBED_GC"] = env_value
    return subprocess.run(
        [sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=120
    )


def test_import_freezes_its_objects_and_later_garbage_is_still_collected():
    on, off = _run(None), _run("system")
    assert on.returncode == 0, on.stderr
    assert off.returncode == 0, off.stderr
    frozen, scanned, cycle_freed, graph_freed = map(int, on.stdout.split())
    frozen_off, scanned_off, cycle_freed_off, graph_freed_off = map(int, off.stdout.split())
    assert frozen > 10_000 and frozen_off == 0
    # the frozen objects are the ones a full collection no longer examines
    assert scanned_off - scanned > 0.9 * frozen
    assert cycle_freed and graph_freed and cycle_freed_off and graph_freed_off


def test_a_bad_setting_is_named(monkeypatch):
    from hetbed.runtime import collector

    monkeypatch.setenv("HETBED_GC", "off")
    with pytest.raises(ValueError, match="HETBED_GC='off'"):
        collector.freeze_imported()
