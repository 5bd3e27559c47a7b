"""A simulated step's concrete shapes: an op whose graph shapes are all known, fed inputs of
exactly those shapes, takes its static output shapes without running its shape rule
(runtime/shapes.py); the rule would give the same, and anything else still runs it."""

import numpy as np
import pytest

import hetbed as hb
import hetbed.runtime.shapes as shapes
from hetbed.scenarios.models.zoo import build


def _by_rule(op, in_shapes, values=None):
    shapes._cache.pop(op, None)
    keep = shapes._static_when_same
    shapes._static_when_same = lambda *a: None
    try:
        return shapes.output_shapes(op, in_shapes, None, values)
    finally:
        shapes._static_when_same = keep
        shapes._cache.pop(op, None)


@pytest.mark.parametrize("name", ["cnn", "lstm_lm", "wide_embedding"])
def test_static_shapes_equal_the_shape_rules_on_training_graphs(name):
    g = hb.Graph()
    with g.as_default():
        build(name, 4)
    taken = 0
    for op in g.get_operations():
        dims = [t.shape.dims for t in op.inputs]
        if any(d is None or None in d for d in dims):
            continue
        in_shapes = [tuple(d) for d in dims]
        fast = shapes._static_when_same(op, in_shapes, None)
        if fast is None:
            continue
        taken += 1
        assert fast == [tuple(s) for s in _by_rule(op, in_shapes)], (op.type, op.name)
    assert taken > 50


def test_other_shapes_or_values_run_the_rule():
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, [4, 6])
        shape = hb.placeholder(hb.int32, [2])
        r = hb.reshape(x, shape)
        y = x * 2.0
    assert shapes.output_shapes(y.op, [(4, 6)]) == [(4, 6)]
    assert shapes._static_when_same(y.op, [(2, 6)], None) is None  # fed another shape
    assert shapes.output_shapes(y.op, [(2, 6)]) == [(2, 6)]
    # a shape computed from a value: the rule runs on it
    assert shapes.output_shapes(r.op, [(4, 6), (2,)], None, [None, np.array([3, 8])]) == [(3, 8)]
