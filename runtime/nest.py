"""Nested structures of tensors (lists, tuples, namedtuples, dicts; a dict in sorted key order)
as flat lists and back, as cond, while_loop and the functional ops take and return them."""

from __future__ import annotations

from typing import Any


def _flatten(x: Any) -> list:
    if isinstance(x, (list, tuple)):
        return [leaf for item in x for leaf in _flatten(item)]
    if isinstance(x, dict):
        return [leaf for k in sorted(x) for leaf in _flatten(x[k])]
    return [x]


def _pack(structure: Any, flat: list) -> Any:
    it = iter(flat)

    def build(x: Any) -> Any:
        if isinstance(x, (list, tuple)):
            items = [build(i) for i in x]
            return type(x)(*items) if hasattr(x, "_fields") else type(x)(items)
        if isinstance(x, dict):
            return {k: build(x[k]) for k in sorted(x)}
        return next(it)

    return build(structure)


def _structure(x: Any) -> Any:
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_structure(i) for i in x])
    if isinstance(x, dict):
        return ("dict", sorted(x), [_structure(x[k]) for k in sorted(x)])
    return None
