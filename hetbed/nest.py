"""``tf.nest`` (and TF1's ``tf.contrib.framework.nest``): nested structures of lists, tuples,
namedtuples and dicts (in sorted key order), as the control-flow ops take them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hetbed.runtime.nest import _flatten, _structure


def _pack(structure: Any, flat: list) -> Any:
    """``flat`` in the shape of ``structure``: dicts take their leaves in sorted key order and
    keep their own key order, as TF's."""
    it = iter(flat)

    def build(x: Any) -> Any:
        if isinstance(x, (list, tuple)):
            items = [build(i) for i in x]
            return type(x)(*items) if hasattr(x, "_fields") else type(x)(items)
        if isinstance(x, dict):
            got = {k: build(x[k]) for k in sorted(x)}
            return type(x)((k, got[k]) for k in x)
        return next(it)

    return build(structure)


def is_nested(seq: Any) -> bool:
    """Whether ``seq`` is a list, tuple (namedtuple) or dict: a structure, not a leaf."""
    return isinstance(seq, (list, tuple, dict))


is_sequence = is_nested


def flatten(structure: Any, expand_composites: bool = False) -> list:
    """The leaves of ``structure``, depth first (dicts by sorted key)."""
    return _flatten(structure)


def pack_sequence_as(structure: Any, flat_sequence: Any, expand_composites: bool = False) -> Any:
    """``flat_sequence`` in the shape of ``structure``."""
    flat = list(flat_sequence)
    n = len(_flatten(structure))
    if n != len(flat):
        raise ValueError(
            f"Could not pack sequence. Structure had {n} elements, but flat_sequence had "
            f"{len(flat)} elements."
        )
    return _pack(structure, flat)


def assert_same_structure(
    nest1: Any, nest2: Any, check_types: bool = True, expand_composites: bool = False
) -> None:
    """Raise ValueError (TypeError for differing sequence types with ``check_types``) where
    the two structures differ."""
    a, b = _structure(nest1), _structure(nest2)
    if a == b:
        return

    def shape_only(s: Any) -> Any:
        if isinstance(s, tuple) and s and s[0] == "dict":
            return ("dict", s[1], [shape_only(x) for x in s[2]])
        if isinstance(s, tuple):
            return ("seq", [shape_only(x) for x in s[1]])
        return s

    if shape_only(a) == shape_only(b):
        if check_types:
            raise TypeError(
                f"The two structures don't have the same sequence type: {nest1!r:.80} and "
                f"{nest2!r:.80}"
            )
        return
    raise ValueError(
        f"The two structures don't have the same nested structure: {nest1!r:.80} and {nest2!r:.80}"
    )


def map_structure(func: Callable, *structures: Any, **kwargs: Any) -> Any:
    """``func`` applied leaf by leaf across ``structures`` (which must match), in the first's
    shape."""
    if not structures:
        raise ValueError("Must provide at least one structure")
    check = kwargs.pop("check_types", True)
    kwargs.pop("expand_composites", None)
    if kwargs:
        raise ValueError(f"Only valid keyword arguments are check_types, got {sorted(kwargs)}")
    for other in structures[1:]:
        assert_same_structure(structures[0], other, check_types=check)
    flats = [_flatten(s) for s in structures]
    return _pack(structures[0], [func(*leaves) for leaves in zip(*flats)])


__all__ = [
    "assert_same_structure",
    "flatten",
    "is_nested",
    "is_sequence",
    "map_structure",
    "pack_sequence_as",
]
