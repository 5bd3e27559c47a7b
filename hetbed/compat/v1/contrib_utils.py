"""``tf.contrib.layers.utils`` / ``slim.utils``: the outputs a layer collects under an alias (its
scope's name), turned back into a dict of end points, as slim's nets build theirs; and the
shape helpers the nets use."""

from __future__ import annotations

import weakref
from collections import OrderedDict
from typing import Any

import hetbed as _hb

# a tensor's aliases (a Tensor has slots, so they live here, dropped with the tensor)
_ALIASES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def append_tensor_alias(tensor: Any, alias: str) -> Any:
    """Record ``alias`` (a trailing "/" dropped) as a name of ``tensor``."""
    if alias.endswith("/"):
        alias = alias[:-1]
    _ALIASES.setdefault(tensor, []).append(alias)
    return tensor


def get_tensor_aliases(tensor: Any) -> list:
    """The aliases recorded for ``tensor``, else its name without ":0"."""
    if tensor in _ALIASES:
        return list(_ALIASES[tensor])
    name = tensor.name
    return [name[:-2] if name.endswith(":0") else name]


def collect_named_outputs(collections: Any, alias: str, outputs: Any) -> Any:
    """Add ``outputs`` to ``collections`` (a name or a list of names) under ``alias``."""
    if collections:
        append_tensor_alias(outputs, alias)
        names = [collections] if isinstance(collections, str) else list(collections)
        for c in names:
            _hb.add_to_collection(c, outputs)
    return outputs


def convert_collection_to_dict(collection: str, clear_collection: bool = False) -> OrderedDict:
    """``{alias: tensor}`` of the tensors in ``collection`` (slim's end points)."""
    g = _hb.get_default_graph()
    out = OrderedDict(
        (alias, t) for t in g.get_collection(collection) for alias in get_tensor_aliases(t)
    )
    if clear_collection:
        g.clear_collection(collection)
    return out


def last_dimension(shape: Any, min_rank: int = 1) -> int:
    """The last dimension of a static shape, which must be known and of rank >= ``min_rank``."""
    dims = _hb.TensorShape(shape).dims
    if dims is None:
        raise ValueError("dims of shape must be known but is None")
    if len(dims) < min_rank:
        raise ValueError(f"rank of shape must be at least {min_rank} not: {len(dims)}")
    if dims[-1] is None:
        raise ValueError(f"last dimension shape must be known but is None: {shape}")
    return int(dims[-1])


def two_element_tuple(int_or_tuple: Any) -> tuple:
    """``(v, v)`` of an int, or the pair given."""
    if isinstance(int_or_tuple, (list, tuple)):
        if len(int_or_tuple) != 2:
            raise ValueError(f"Must be a list with 2 elements: {int_or_tuple}")
        return int(int_or_tuple[0]), int(int_or_tuple[1])
    if isinstance(int_or_tuple, int):
        return int_or_tuple, int_or_tuple
    raise ValueError(
        f"Must be an int, a list with 2 elements or a TensorShape of length 2: {int_or_tuple!r}"
    )


__all__ = [
    "append_tensor_alias",
    "collect_named_outputs",
    "convert_collection_to_dict",
    "get_tensor_aliases",
    "last_dimension",
    "two_element_tuple",
]
