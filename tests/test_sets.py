"""tf.sets (runtime/ops/sets.py): intersections, unions, differences and sizes of the rows of
dense tensors and SparseTensors against Python's sets, and against TensorFlow where installed."""

import numpy as np
import pytest

import hetbed.compat.v1 as tf

A = np.array([[[1, 2, 2], [5, 6, 7]], [[9, 9, 9], [0, 3, 1]]], np.int64)
B = np.array([[[2, 4, 1], [7, 5, 8]], [[1, 2, 3], [3, 3, 3]]], np.int64)


def _rows(sp):
    out = {}
    for idx, v in zip(sp.indices.tolist(), sp.values.tolist()):
        out.setdefault(tuple(idx[:-1]), []).append(v)
    return out


def test_set_operations_are_pythons_set_operations_row_by_row():
    with tf.Graph().as_default(), tf.Session() as s:
        sp = tf.SparseTensor([[0, 0, 0], [0, 1, 0], [1, 1, 1]], np.array([2, 8, 3]), [2, 2, 4])
        got = s.run({
            "and": tf.sets.set_intersection(A, B),
            "or": tf.sets.union(A, B),
            "a-b": tf.sets.set_difference(A, B),
            "b-a": tf.sets.difference(A, B, aminusb=False),
            "sparse": tf.sets.set_intersection(A, sp),
            "size": tf.sets.set_size(sp),
        })  # fmt: skip
    for key, fn in (("and", set.__and__), ("or", set.__or__), ("a-b", set.__sub__),
                    ("b-a", lambda x, y: y - x)):  # fmt: skip
        rows = _rows(got[key])
        for i in range(2):
            for j in range(2):
                want = sorted(fn(set(A[i, j].tolist()), set(B[i, j].tolist())))
                assert rows.get((i, j), []) == want, (key, i, j)
        width = max(len(v) for v in rows.values())
        assert got[key].dense_shape.tolist() == [2, 2, width]
    assert _rows(got["sparse"]) == {(0, 0): [2], (1, 1): [3]}
    assert got["size"].tolist() == [[1, 1], [0, 1]]


def test_sets_refuse_floats_and_mismatched_rows():
    with tf.Graph().as_default(), tf.Session() as s:
        with pytest.raises(TypeError, match="integers or strings"):
            tf.sets.set_union(A.astype(np.float32), B.astype(np.float32))
        with pytest.raises(tf.errors.InvalidArgumentError, match="same leading dimensions"):
            s.run(tf.sets.set_union(A, B[:1]))


def test_sets_match_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")

    def run(t):
        g = t.Graph()
        with g.as_default(), t.Session(graph=g) as s:
            sp = t.SparseTensor([[0, 0, 0], [0, 1, 0], [1, 1, 1]], np.array([2, 8, 3]), [2, 2, 4])
            outs = [t.sets.set_intersection(A, B), t.sets.set_union(A, B),
                    t.sets.set_difference(A, B), t.sets.set_difference(A, B, aminusb=False),
                    t.sets.set_intersection(A, sp), t.sets.set_union(sp, B)]  # fmt: skip
            vals = s.run(outs)
            size = s.run(t.sets.set_size(t.sets.set_union(A, B)))
            return [
                (v.indices.tolist(), v.values.tolist(), v.dense_shape.tolist()) for v in vals
            ], size

    ours, theirs = run(tf), run(tf1)
    assert ours[0] == theirs[0]
    assert ours[1].tolist() == theirs[1].tolist()
