"""Ranking metrics (hetbed/metrics_at_k.py): precision/recall at k and average precision at k on
hand-counted cases, streaming over batches, and against TensorFlow where it is installed."""

import numpy as np
import pytest

import hetbed.compat.v1 as tf

SCORES = np.array(
    [
        [0.1, 0.5, 0.3, 0.9, 0.0],  # top-2: 3, 1; top-3: 3, 1, 2
        [0.8, 0.1, 0.2, 0.3, 0.6],  # top-2: 0, 4; top-3: 0, 4, 3
    ],
    np.float32,
)
LABELS = np.array([[1, 2, 2], [4, -1, 7]], np.int64)  # row 0: {1, 2}; row 1: {4, -1, 7}


def _stream(build, batches):
    """Runs each batch's update op in turn; returns (updates, final value)."""
    with tf.Graph().as_default():
        lab = tf.placeholder(tf.int64, [None, None])
        pred = tf.placeholder(tf.float32, [None, 5])
        value, update = build(lab, pred)
        with tf.Session() as s:
            s.run(tf.local_variables_initializer())
            ups = [s.run(update, {lab: a, pred: b}) for a, b in batches]
            return ups, s.run(value)


def test_precision_and_recall_at_k_count_each_rows_label_set():
    # k=2: row 0 retrieves {3, 1}: 1 hit of 2; row 1 retrieves {0, 4}: 1 hit of 2
    ups, v = _stream(lambda a, b: tf.metrics.precision_at_k(a, b, 2), [(LABELS, SCORES)])
    assert v == pytest.approx(2 / 4) and ups[0] == pytest.approx(2 / 4)
    # recall: labels {1, 2} and {4, -1, 7}: 1 of 2 and 1 of 3 found
    _, v = _stream(lambda a, b: tf.metrics.recall_at_k(a, b, 2), [(LABELS, SCORES)])
    assert v == pytest.approx(2 / 5)
    # k=3 adds 2 to row 0 and 3 to row 1
    _, v = _stream(lambda a, b: tf.metrics.precision_at_k(a, b, 3), [(LABELS, SCORES)])
    assert v == pytest.approx(3 / 6)
    # class 4: retrieved in row 1 (a label there): precision 1, recall 1
    _, v = _stream(lambda a, b: tf.metrics.precision_at_k(a, b, 2, class_id=4), [(LABELS, SCORES)])
    assert v == pytest.approx(1.0)
    # class 2: never retrieved at k=2, a label of row 0: recall 0, precision 0/0 = NaN (as TF)
    _, v = _stream(lambda a, b: tf.metrics.recall_at_k(a, b, 2, class_id=2), [(LABELS, SCORES)])
    assert v == 0.0
    _, v = _stream(lambda a, b: tf.metrics.precision_at_k(a, b, 2, class_id=2), [(LABELS, SCORES)])
    assert np.isnan(v)


def test_precision_at_k_streams_over_batches_with_weights():
    def build(a, b):
        return tf.metrics.precision_at_k(a, b, 2, weights=tf.constant([1.0, 3.0]))

    ups, v = _stream(build, [(LABELS, SCORES), (LABELS[:, :1], SCORES)])
    # batch 1: rows hit 1 of 2 each -> (1 + 3) / (2 + 6); batch 2 labels {1} and {4}: same hits
    assert ups == pytest.approx([0.5, 0.5]) and v == pytest.approx(0.5)
    ups, v = _stream(
        lambda a, b: tf.metrics.recall_at_k(a, b, 2, weights=tf.constant([1.0, 3.0])),
        [(LABELS, SCORES), (LABELS[:, :1], SCORES)],
    )
    # batch 1: TP 1 + 3, FN 1 + 3*2; batch 2: TP 1 + 3, FN 0
    assert ups[0] == pytest.approx(4 / 11) and v == pytest.approx(8 / 15)


def test_average_precision_at_k_by_hand():
    # row 0, k=3: ranked 3, 1, 2 -> hits at ranks 2 and 3: (1/2 + 2/3) / min(3 labels, 3)
    # (a dense row's repeats count towards the divisor, as in TF); row 1, k=3: ranked 0, 4, 3
    # -> hit at rank 2: (1/2) / 1 (-1 and 7 >= 5 classes are not labels there)
    _, v = _stream(lambda a, b: tf.metrics.average_precision_at_k(a, b, 3), [(LABELS, SCORES)])
    want = ((1 / 2 + 2 / 3) / 3 + (1 / 2) / 1) / 2
    assert v == pytest.approx(want)


def test_sparse_labels_count_only_their_values():
    with tf.Graph().as_default():
        sp = tf.SparseTensor([[0, 0], [0, 1], [1, 0]], np.array([1, 2, 4], np.int64), [2, 3])
        p, p_up = tf.metrics.recall_at_k(sp, SCORES, 2)
        ap, ap_up = tf.metrics.average_precision_at_k(sp, SCORES, 3)
        with tf.Session() as s:
            s.run(tf.local_variables_initializer())
            s.run([p_up, ap_up])
            r, a = s.run([p, ap])
    assert r == pytest.approx(2 / 3)  # {1, 2}: 1 found; {4}: found
    assert a == pytest.approx(((1 / 2 + 2 / 3) / 2 + (1 / 2) / 1) / 2)


def test_ranking_metrics_match_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    rng = np.random.default_rng(5)
    batches = [
        (
            rng.integers(0, 12, (6, 3)).astype(np.int64),
            rng.standard_normal((6, 10)).astype(np.float32),
            rng.uniform(0, 2, 6).astype(np.float32),
        )
        for _ in range(3)
    ]

    def run(t):
        g = t.Graph()
        with g.as_default():
            lab = t.placeholder(t.int64, [None, 3])
            pred = t.placeholder(t.float32, [None, 10])
            w = t.placeholder(t.float32, [None])
            _, top = t.nn.top_k(pred, 4)
            ms = [
                t.metrics.precision_at_k(lab, pred, 3),
                t.metrics.recall_at_k(lab, pred, 3),
                t.metrics.precision_at_k(lab, pred, 2, class_id=4, weights=w),
                t.metrics.recall_at_k(lab, pred, 5, class_id=1),
                t.metrics.average_precision_at_k(lab, pred, 4),
                t.metrics.average_precision_at_k(lab, pred, 2, weights=w),
                t.metrics.precision_at_top_k(lab, top, 4),
                t.metrics.recall_at_top_k(lab[:, 0], top, 4),
            ]
            with t.Session(graph=g) as s:
                s.run(t.local_variables_initializer())
                ups = [s.run([u for _, u in ms], {lab: a, pred: b, w: c}) for a, b, c in batches]
                return np.array(ups), np.array(s.run([v for v, _ in ms]))

    ours, theirs = run(tf), run(tf1)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6, equal_nan=True)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6, equal_nan=True)
