"""Graphviz DOT text of a graph (``to_dot``): one box per op, data edges labeled with shape and
dtype, control edges dashed, one cluster per requested device."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .graph import Graph, Operation, Tensor, get_default_graph


def to_dot(graph: Graph | None = None, fetches: Any = None) -> str:
    """Graphviz DOT text of ``graph``: one box per op (name, type, requested device), data
    edges labeled with shape and dtype, control edges dashed, one cluster per requested device.

    With ``fetches`` (tensors, ops, variables or names) only the ops they depend on are drawn,
    the fetched ones with a double border.
    """
    g = graph if graph is not None else get_default_graph()
    ops = g.get_operations()
    fetched: set[Operation] = set()
    if fetches is not None:
        items = fetches if isinstance(fetches, (list, tuple, set)) else [fetches]
        for x in items:
            el = g.as_graph_element(x)
            fetched.add(el.op if isinstance(el, Tensor) else el)
        keep = _ancestors(fetched)
        ops = [op for op in ops if op in keep]
    lines = [
        "digraph hetbed {",
        '  node [shape=box, style=rounded, fontname="Helvetica", fontsize=10];',
        '  edge [fontname="Helvetica", fontsize=9];',
    ]
    by_device: dict[str, list[Operation]] = {}
    for op in ops:
        by_device.setdefault(op.device or "", []).append(op)
    for k, (dev, members) in enumerate(sorted(by_device.items())):
        indent = "  "
        if dev:
            lines.append(f'  subgraph "cluster_{k}" {{')
            lines.append(f"    label={_q(dev)};")
            indent = "    "
        for op in members:
            label = "\\n".join(_esc(s) for s in (op.name, op.type, op.device) if s)
            extra = ", peripheries=2" if op in fetched else ""
            lines.append(f'{indent}{_q(op.name)} [label="{label}"{extra}];')
        if dev:
            lines.append("  }")
    for op in ops:
        for t in op.inputs:
            label = _esc(f"{t.shape} {t.dtype.name}")
            lines.append(f'  {_q(t.op.name)} -> {_q(op.name)} [label="{label}"];')
        for c in op.control_inputs:
            lines.append(f"  {_q(c.name)} -> {_q(op.name)} [style=dashed];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _ancestors(roots: Iterable[Operation]) -> set[Operation]:
    seen: set[Operation] = set()
    stack = list(roots)
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    return seen


def _esc(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


def _q(s: str) -> str:
    return f'"{_esc(s)}"'
