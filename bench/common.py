"""Shared helpers for benchmarks: timing and a ratio table."""

from __future__ import annotations

import math
from collections.abc import Callable

from hetbed.simulator.calibrate import best_of

__all__ = ["best_of", "table", "optional", "verdict"]


def table(
    title: str, rows: list[tuple[str, float]], unit: str, base: str, floor: str | None = None
) -> str:
    """Rows of (name, value) with ratios to the ``base`` row and, if given, the ``floor`` row."""
    values = dict(rows)
    out = [f"\n{title}", "-" * len(title)]
    head = f"{'':28s} {unit:>12s} {'x ' + base:>16s}"
    if floor:
        head += f" {'x ' + floor:>16s}"
    out.append(head)
    for name, v in rows:
        line = f"{name:28s} {v:12.3f} {v / values[base]:16.2f}"
        if floor:
            line += f" {v / values[floor]:16.2f}"
        out.append(line)
    return "\n".join(out)


def optional(module: str):
    """Import a peer framework if installed, else None."""
    try:
        return __import__(module)
    except Exception:  # noqa: BLE001 - any import failure means "not available"
        return None


def verdict(values: list[float], passes: Callable[[float], bool]) -> str:
    """A target line's word: 'met' only when there are measurements, all finite and all passing;
    'NOT measured' when there are none or one failed (NaN, inf), so a failed measurement can never
    read as a pass; else 'NOT met'."""
    vals = [float(v) for v in values]
    if not vals or not all(math.isfinite(v) for v in vals):
        return "NOT measured"
    return "met" if all(passes(v) for v in vals) else "NOT met"
