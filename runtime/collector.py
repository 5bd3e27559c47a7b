"""The cyclic garbage collector and the objects that importing hetbed creates.

Importing hetbed and its dependencies (numpy, ...) leaves about 35,000 objects that live
as long as the process: modules, functions, classes and their dictionaries. CPython's collector
scans every one of them in each full collection, and building a graph starts one soon: a
graph's operations, tensors and shapes are new long-lived objects, and a full collection
follows once they number a quarter of the old ones. In a fresh process, building the 2,000-op
graph of ``bench/sim_speed.py`` took 31-40 ms, 16 ms of it one full collection that found
nothing to free; with the import's objects frozen, 19-22 ms.

``freeze_imported()``, called once at the end of ``import hetbed``, moves the objects alive at
that moment to the collector's permanent generation (``gc.freeze``): later collections leave
them alone, and everything created afterwards is collected as before. An object alive at that
moment that later becomes unreachable only through a reference cycle is then never freed (its
memory stays with the process). ``HETBED_GC=system`` leaves the collector as it is.
"""

from __future__ import annotations

import gc
import os

_CHOICES = ("freeze", "system")


def freeze_imported() -> bool:
    """Freeze the objects alive now (see the module docstring); True when it did."""
    choice = os.environ.get("HETBED_GC", "freeze").strip().lower()
    if choice not in _CHOICES:
        raise ValueError(f"HETBED_GC={choice!r}: use 'freeze' (default) or 'system'")
    if choice == "system" or not gc.isenabled():
        return False
    gc.freeze()
    return True
