"""More of tf.metrics (hetbed/metrics_extra.py), tf.contrib.metrics' streaming forms and slim's
evaluation: values over three streamed batches against numpy, and, where TensorFlow is
installed, against TF 2.21's compat.v1 (values, every update, local variable names)."""

from __future__ import annotations

import numpy as np
import pytest

import hetbed.compat.v1 as tf

RNG = np.random.RandomState(0)
BATCHES = [
    (RNG.rand(20).astype(np.float32), RNG.rand(20) > 0.5, RNG.rand(20).astype(np.float32))
    for _ in range(3)
]
CLASSES = [
    (RNG.randint(0, 4, 15), RNG.randint(0, 4, 15), RNG.rand(15).astype(np.float32))
    for _ in range(3)
]
T = [0.1, 0.5, 0.9]


def _cases(tf):
    """name -> (builder of (value, update) from placeholders, the batches it streams)."""
    out = {
        "tn": (lambda p, l, w: tf.metrics.true_negatives(l, p > 0.5, weights=w), BATCHES),
        "prec_at": (lambda p, l, w: tf.metrics.precision_at_thresholds(l, p, T), BATCHES),
        "rec_at": (lambda p, l, w: tf.metrics.recall_at_thresholds(l, p, T, weights=w), BATCHES),
        "mean_tensor": (
            lambda p, l, w: tf.metrics.mean_tensor(tf.reshape(p, [4, 5]), tf.reshape(w, [4, 5])),
            BATCHES,
        ),
        "mre": (
            lambda p, l, w: tf.metrics.mean_relative_error(
                w, p, tf.where(p > 0.8, tf.zeros_like(p), p)
            ),
            BATCHES,
        ),
        "mcd": (
            lambda p, l, w: tf.metrics.mean_cosine_distance(
                tf.reshape(p, [5, 4]), tf.reshape(w, [5, 4]), 1
            ),
            BATCHES,
        ),
        "mpca": (lambda a, b, w: tf.metrics.mean_per_class_accuracy(a, b, 5, weights=w), CLASSES),
        "pb": (lambda p, l, w: tf.metrics.percentage_below(p, 0.4, weights=w), BATCHES),
    }
    for k in ("true_positives", "false_positives", "true_negatives", "false_negatives"):
        out[k] = (
            lambda p, l, w, k=k: getattr(tf.metrics, k + "_at_thresholds")(l, p, T, weights=w),
            BATCHES,
        )
    for x in (0.0, 0.3, 0.77, 1.0):  # ties at 0 and 1: TF's first / last closest threshold
        out[f"sens{x}"] = (
            lambda p, l, w, x=x: tf.metrics.sensitivity_at_specificity(l, p, x, num_thresholds=50),
            BATCHES,
        )
        out[f"spec{x}"] = (
            lambda p, l, w, x=x: tf.metrics.specificity_at_sensitivity(l, p, x, weights=w),
            BATCHES,
        )
    return out


def _stream(tf, build, batches):
    with tf.Graph().as_default():
        phs = [tf.placeholder(tf.as_dtype(np.asarray(a).dtype), np.shape(a)) for a in batches[0]]
        value, update = build(*phs)
        with tf.Session() as s:
            s.run(tf.local_variables_initializer())
            ups = [np.asarray(s.run(update, dict(zip(phs, b)))) for b in batches]
            names = sorted(v.op.name for v in tf.local_variables())
            return np.asarray(s.run(value)), ups, names


def _all(k):
    return np.concatenate([b[k] for b in BATCHES])


def test_streamed_metrics_equal_numpy():
    got = {name: _stream(tf, *case) for name, case in _cases(tf).items()}
    p, lab, w = _all(0), _all(1), _all(2)
    assert got["tn"][0] == pytest.approx(np.sum(w * (~lab & (p <= 0.5))), rel=1e-6)
    for k, pick in (
        ("true_positives", lambda pos: lab & pos),
        ("false_positives", lambda pos: ~lab & pos),
        ("true_negatives", lambda pos: ~lab & ~pos),
        ("false_negatives", lambda pos: lab & ~pos),
    ):
        want = [np.sum(w * pick(p > t)) for t in T]
        np.testing.assert_allclose(got[k][0], want, rtol=1e-6)
    tp = np.array([np.sum(lab & (p > t)) for t in T])
    fp = np.array([np.sum(~lab & (p > t)) for t in T])
    np.testing.assert_allclose(got["prec_at"][0], tp / (tp + fp + 1e-7), rtol=1e-6)
    np.testing.assert_allclose(got["pb"][0], np.sum(w * (p < 0.4)) / np.sum(w), rtol=1e-6)
    pt, wt = p.reshape(3, 4, 5), w.reshape(3, 4, 5)
    np.testing.assert_allclose(got["mean_tensor"][0], (pt * wt).sum(0) / wt.sum(0), rtol=1e-5)
    dots = (p.reshape(3, 5, 4) * w.reshape(3, 5, 4)).sum(-1)
    assert got["mcd"][0] == pytest.approx(1 - dots.mean(), abs=1e-6)  # (float32 sums)
    a, b, cw = (np.concatenate([c[i] for c in CLASSES]) for i in range(3))
    per = [
        np.sum(cw * ((a == c) & (b == c))) / np.sum(cw * (a == c)) if np.any(a == c) else 0.0
        for c in range(5)
    ]
    assert got["mpca"][0] == pytest.approx(np.mean(per), rel=1e-5)  # class 4 never seen: 0
    # sensitivity at specificity 0: the first threshold (below every prediction), recall 1
    assert got["sens0.0"][0] == pytest.approx(1.0, abs=1e-6)
    assert got["spec1.0"][0] >= 0.0


def test_streaming_forms_take_predictions_first_and_aggregate():
    cm = tf.contrib.metrics
    with tf.Graph().as_default():
        logits = tf.constant(
            [[0.1, 0.9, 0.0], [0.8, 0.15, 0.05], [0.2, 0.3, 0.5], [0.35, 0.4, 0.25]]
        )
        labels = tf.constant([1, 2, 2, 0])
        pred = tf.argmax(logits, 1)
        values, updates = tf.contrib.slim.metrics.aggregate_metric_map(
            {
                "acc": cm.streaming_accuracy(pred, labels),
                "recall_2": cm.streaming_recall_at_k(logits, labels, 2),
                "mae": cm.streaming_mean_absolute_error(
                    tf.cast(pred, tf.float32), tf.cast(labels, tf.float32)
                ),
            }
        )
        vals, ups = cm.aggregate_metrics(
            cm.streaming_mean([1.0, 3.0]), cm.streaming_precision(pred > 0, labels > 0)
        )
        with tf.Session() as s:
            s.run(tf.local_variables_initializer())
            s.run([updates, ups])
            got = s.run(values)
            assert got["acc"] == pytest.approx(0.5) and got["recall_2"] == pytest.approx(0.75)
            assert got["mae"] == pytest.approx(
                np.mean(np.abs(np.array([1, 0, 2, 1]) - [1, 2, 2, 0]))
            )
            assert s.run(vals) == pytest.approx([2.0, 2 / 3])
            assert s.run(cm.accuracy(pred, labels)) == pytest.approx(0.5)


def test_slim_evaluate_once_and_evaluation_loop(tmp_path):
    slim = tf.contrib.slim
    x_np = np.arange(8, dtype=np.float32).reshape(4, 2)
    with tf.Graph().as_default():
        w = tf.get_variable("w", initializer=np.array([[1.0], [-1.0]], np.float32))
        step = tf.train.get_or_create_global_step()
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(tf.assign(step, 7))
            tf.train.Saver().save(s, str(tmp_path / "train" / "model.ckpt"), global_step=7)
    with tf.Graph().as_default():
        w = tf.get_variable("w", [2, 1])
        tf.train.get_or_create_global_step()
        y = tf.matmul(tf.constant(x_np), w)  # -1 for every row
        values, updates = slim.metrics.aggregate_metric_map(
            {
                "mean_y": slim.metrics.streaming_mean(y),
                "below": slim.metrics.streaming_percentage_less(y, 0.0),
            }
        )
        tf.summary.scalar("mean_y", values["mean_y"])
        ckpt = tf.train.latest_checkpoint(str(tmp_path / "train"))
        out = slim.evaluation.evaluate_once(
            "",
            ckpt,
            str(tmp_path / "eval"),
            num_evals=3,
            eval_op=list(updates.values()),
            final_op=values,
        )
        assert out == {"mean_y": pytest.approx(-1.0), "below": pytest.approx(1.0)}
        assert any(f.name.startswith("events") for f in (tmp_path / "eval").iterdir())
    with tf.Graph().as_default():  # (a monitored session finalizes its graph, as TF's)
        w = tf.get_variable("w", [2, 1])
        y = tf.matmul(tf.constant(x_np), w)
        values, updates = slim.metrics.aggregate_metric_map(
            {"mean_y": slim.metrics.streaming_mean(y)}
        )
        again = slim.evaluation.evaluation_loop(
            "",
            str(tmp_path / "train"),
            None,
            eval_op=list(updates.values()),
            final_op=values["mean_y"],
            eval_interval_secs=0,
            max_number_of_evaluations=1,
            timeout=5,
        )
        assert again == pytest.approx(-1.0)


def test_the_same_values_updates_and_variables_as_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    for name, (build, batches) in _cases(tf).items():
        mine = _stream(tf, build, batches)
        theirs = _stream(tf1, _cases(tf1)[name][0], batches)
        np.testing.assert_allclose(mine[0], theirs[0], rtol=1e-5, atol=1e-6, err_msg=name)
        for a, b in zip(mine[1], theirs[1]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=name)
        assert mine[2] == theirs[2], name


def test_squeezable_shapes_weights_and_ranges_as_tensorflow():
    """[N, 1] against [N] is squeezed (not broadcast to [N, N]), weights one rank off are
    squeezed or expanded, threshold metrics refuse predictions outside [0, 1] (TF 2.21's
    values and errors)."""
    cm = tf.contrib.metrics
    with tf.Graph().as_default():
        lab = tf.constant([[1.0], [2.0], [4.0]])
        pred = tf.constant([1.5, 2.0, 3.0])
        mre = tf.metrics.mean_relative_error(lab, pred, tf.constant([[1.0], [2.0], [4.0]]))
        tn = tf.metrics.true_negatives(
            tf.constant([0, 0, 1, 0]), tf.constant([0, 1, 1, 0]), weights=tf.ones([4, 1])
        )
        acc = cm.accuracy(tf.constant([1, 2, 3]), tf.constant([[1], [2], [0]]))
        mt = tf.metrics.mean_tensor(
            tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), weights=tf.constant([1.0, 0.0, 1.0])
        )
        bad = tf.metrics.precision_at_thresholds(tf.constant([True]), tf.constant([1.5]), [0.5])
        top = cm.streaming_sparse_precision_at_top_k(
            tf.constant([[0, 1], [2, 1]], tf.int64), tf.constant([[0], [1]], tf.int64), 1
        )  # (the third argument is class_id, as TF1 contrib's)
        r2 = cm.streaming_recall_at_k(tf.constant([[0.1, 0.9], [0.8, 0.2]]), tf.constant([1, 1]), 1)
        names = sorted(v.op.name for v in tf.local_variables())
        with tf.Session() as s:
            s.run(tf.local_variables_initializer())
            assert s.run(mre[1]) == pytest.approx((0.5 / 1 + 0 + 1 / 4) / 3)
            assert s.run(tn[1]) == 2.0
            assert s.run(acc) == pytest.approx(2 / 3)
            np.testing.assert_allclose(s.run(mt[1]), [[1.0, 2.0], [0.0, 0.0], [5.0, 6.0]])
            with pytest.raises(
                tf.errors.InvalidArgumentError, match=r"predictions must be in \[0, 1\]"
            ):
                s.run(bad[1])
            assert s.run(top[1]) == pytest.approx(0.5) and s.run(r2[1]) == pytest.approx(0.5)
    assert "recall_at_1/count" in names and "recall_at_1/total" in names


def test_slim_evaluation_runs_its_hooks(tmp_path):
    with tf.Graph().as_default():
        tf.get_variable("w", initializer=3.0)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            ck = tf.train.Saver().save(s, str(tmp_path / "m"))
    calls = []

    class Hook(tf.train.SessionRunHook):
        def begin(self):
            calls.append("begin")

        def after_create_session(self, session, coord):
            calls.append("created")

        def before_run(self, ctx):
            calls.append("before")

        def after_run(self, ctx, values):
            calls.append("after")

        def end(self, session):
            calls.append("end")

    with tf.Graph().as_default():
        w = tf.get_variable("w", initializer=0.0)
        m, up = tf.metrics.mean(w)
        out = tf.contrib.slim.evaluation.evaluate_once(
            "", ck, None, num_evals=2, eval_op=up, final_op=m, hooks=[Hook()]
        )
    assert out == 3.0
    assert calls == ["begin", "created"] + ["before", "after"] * 3 + ["end"]
