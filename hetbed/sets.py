"""``tf.sets``: set operations over the last dimension (runtime/ops/sets.py), under TF1's names
and the shorter ones of later releases (``intersection``, ``union``, ``difference``, ``size``)."""

from hetbed.runtime.ops.sets import set_difference, set_intersection, set_size, set_union

intersection = set_intersection
union = set_union
difference = set_difference
size = set_size

__all__ = [
    "difference",
    "intersection",
    "set_difference",
    "set_intersection",
    "set_size",
    "set_union",
    "size",
    "union",
]
