"""tf.feature_column and the canned estimators, checked against numpy and hand computation
(TensorFlow's ids where noted were computed once with TF 2.15; tests/test_feature_column_tf.py
compares with a live TensorFlow)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import hetbed.compat.v1 as tf
from hetbed.runtime.ops.hashing import fingerprint64

fc = tf.feature_column


def _run(build, features, values=None):
    """Build ``build(features)`` in a fresh graph, set the variables named in ``values``,
    run it."""
    g = tf.Graph()
    with g.as_default():
        feats = {
            k: tf.SparseTensor(*v) if isinstance(v, tuple) else tf.constant(v)
            for k, v in features.items()
        }
        out = build(feats)
        with tf.Session(graph=g) as sess:
            sess.run([tf.global_variables_initializer(), tf.tables_initializer()])
            by_name = {v.op.name: v for v in tf.global_variables()}
            for name, value in (values or {}).items():
                by_name[name].load(np.asarray(value, np.float32), sess)
            return sess.run(out)


def _dense(cols, features, values=None):
    return _run(lambda f: fc.input_layer(f, cols), features, values)


def test_numeric_columns_concatenate_in_name_order():
    """input_layer puts columns in the order of their names, each flattened, after the
    normalizer; a rank-1 input is one value per example."""
    got = _dense(
        [
            fc.numeric_column("b", shape=(2,), normalizer_fn=lambda x: x * 10),
            fc.numeric_column("a"),
        ],
        {"a": np.array([1, 2], np.int32), "b": [[0.5, 1.0], [2.0, 3.0]]},
    )
    np.testing.assert_array_equal(got, [[1, 5, 10], [2, 20, 30]])


def test_bucketized_one_hot_and_linear_ids():
    """A value equal to a boundary falls in the bucket above it; each element of a 2-vector
    gets its own block of len(boundaries) + 1 buckets."""
    col = fc.bucketized_column(fc.numeric_column("x", shape=(2,)), [0.0, 1.0])
    x = np.array([[-5.0, 0.0], [1.0, 0.5]], np.float32)
    got = _dense([col], {"x": x})
    np.testing.assert_array_equal(got, [[1, 0, 0, 0, 1, 0], [0, 0, 1, 0, 1, 0]])
    w = np.arange(6, dtype=np.float32).reshape(6, 1) * 10
    lin = _run(
        lambda f: fc.linear_model(f, [col]),
        {"x": x},
        {"linear_model/x_bucketized/weights": w, "linear_model/bias_weights": [0.5]},
    )
    np.testing.assert_allclose(lin, [[0 + 40 + 0.5], [20 + 40 + 0.5]])


def test_identity_indicator_counts_and_missing():
    """-1 in a dense integer input is missing; a repeated id counts twice; default_value
    replaces ids out of range."""
    col = fc.categorical_column_with_identity("k", 4)
    got = _dense([fc.indicator_column(col)], {"k": [[1, -1], [3, 3]]})
    np.testing.assert_array_equal(got, [[0, 1, 0, 0], [0, 0, 0, 2]])
    col = fc.categorical_column_with_identity("k", 4, default_value=0)
    got = _dense([fc.indicator_column(col)], {"k": [[7, 2]]})
    np.testing.assert_array_equal(got, [[1, 0, 1, 0]])


def test_identity_out_of_range_fails_when_run():
    """Without default_value an id >= num_buckets fails the step, naming the column."""
    col = fc.categorical_column_with_identity("k", 4)
    with pytest.raises(tf.errors.InvalidArgumentError, match="'k'"):
        _dense([fc.indicator_column(col)], {"k": [[1, 9]]})


def test_vocabulary_list_oov_buckets_and_default():
    """Known words get their index; unknown ones len(vocab) + Fingerprint64 % num_oov (or -1,
    which weighs nothing); "" is missing."""
    col = fc.categorical_column_with_vocabulary_list("w", ["a", "b"], num_oov_buckets=3)
    got = _dense([fc.indicator_column(col)], {"w": [["b", "zz"], ["", "a"]]})
    oov = 2 + fingerprint64(b"zz") % 3
    want = np.zeros((2, 5))
    want[0, [1, oov]] = 1
    want[1, 0] = 1
    np.testing.assert_array_equal(got, want)
    col = fc.categorical_column_with_vocabulary_list("w", [10, 20])
    got = _dense([fc.indicator_column(col)], {"w": np.array([[20], [30]], np.int64)})
    np.testing.assert_array_equal(got, [[0, 1], [0, 0]])


def test_vocabulary_file(tmp_path):
    """A vocabulary file's line numbers are the ids; its size is its line count."""
    path = tmp_path / "v.txt"
    path.write_text("red\ngreen\nblue\n")
    col = fc.categorical_column_with_vocabulary_file("c", str(path))
    assert col.num_buckets == 3
    got = _dense([fc.indicator_column(col)], {"c": [["blue"], ["pink"]]})
    np.testing.assert_array_equal(got, [[0, 0, 1], [0, 0, 0]])


def test_hash_bucket_ids_are_tfs():
    """Hash bucket ids equal TF's (string_to_hash_bucket_fast, values computed with TF 2.15)."""
    col = fc.categorical_column_with_hash_bucket("s", 1000)
    words = ["hello", "feature columns", "x" * 70, "42"]
    want = [296, 103, 745, 736]
    got = _dense([fc.indicator_column(col)], {"s": [[w] for w in words]})
    assert [int(np.argmax(r)) for r in got] == want
    col = fc.categorical_column_with_hash_bucket("n", 1000, dtype=tf.int64)
    got = _dense([fc.indicator_column(col)], {"n": np.array([[42], [-7]], np.int64)})
    assert [int(np.argmax(r)) for r in got] == [736, 62]  # integers hash as decimal strings


def test_cross_hashed_ids_are_tfs():
    """sparse.cross_hashed gives TF's ids and order (computed with TF 2.15); dense inputs keep
    "" and every entry."""
    with tf.Graph().as_default(), tf.Session() as s:
        a = tf.constant([["a", "b"], ["c", ""]])
        b = tf.constant([[3], [-1]], tf.int64)
        got = s.run(tf.sparse.cross_hashed([a, b], 97))
    np.testing.assert_array_equal(got.indices, [[0, 0], [0, 1], [1, 0], [1, 1]])
    np.testing.assert_array_equal(got.values, [96, 31, 24, 71])
    np.testing.assert_array_equal(got.dense_shape, [2, 2])


def test_crossed_column_counts_combinations():
    """A cross gives one id per combination of one feature per key: 2 x 1 for the first row,
    none for a row where one key has no feature."""
    col = fc.crossed_column(["a", fc.categorical_column_with_identity("k", 5)], 50)
    assert col.name == "a_X_k"
    got = _dense([fc.indicator_column(col)], {"a": [["p", "q"], ["r", "s"]], "k": [[4], [-1]]})
    np.testing.assert_array_equal(got.sum(axis=1), [2, 0])


@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrtn"])
def test_embedding_combiners(combiner):
    """An embedding is the combined rows at the example's ids (weighted), zeros for an
    example without ids, as numpy computes it (a dense weight of 0 marks a missing id)."""
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    ids = fc.categorical_column_with_identity("k", 4)
    weighted = fc.weighted_categorical_column(ids, "w")
    got = _dense(
        [fc.embedding_column(weighted, 3, combiner=combiner)],
        {"k": [[1, 3], [2, -1], [-1, -1]], "w": [[2.0, 0.5], [4.0, 0.0], [0.0, 0.0]]},
        {"input_layer/k_weighted_by_w_embedding/embedding_weights": table},
    )
    rows = [([1, 3], [2.0, 0.5]), ([2], [4.0])]
    want = np.zeros((3, 3), np.float32)
    for i, (k, w) in enumerate(rows):
        total = (table[k] * np.array(w)[:, None]).sum(0)
        den = {"sum": 1.0, "mean": sum(w), "sqrtn": np.sqrt(sum(x * x for x in w))}[combiner]
        want[i] = total / den
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_embedding_sparse_input_and_default_initializer():
    """A SparseTensor input works as a dense one; the default initializer is a truncated normal
    with stddev 1/sqrt(dimension) (all within 2 stddev)."""
    col = fc.embedding_column(fc.categorical_column_with_vocabulary_list("w", ["a", "b"]), 4)
    sp = (
        np.array([[0, 0], [0, 1], [2, 0]], np.int64),
        np.array(["a", "b", "b"]),
        np.array([3, 2], np.int64),
    )

    def build(f):
        out = fc.input_layer(f, [col])
        return out, tf.global_variables()[0]

    out, table = _run(build, {"w": sp})
    assert np.all(np.abs(table) <= 2 / np.sqrt(4) + 1e-6)
    np.testing.assert_allclose(out, [table.mean(0), np.zeros(4), table[1]], rtol=1e-6)


def test_linear_model_sums_weights_and_bias():
    """linear_model = sum over columns of weight rows at ids (sparse_combiner) or values x
    weights, plus bias; variables named as TF names them."""
    cols = [
        fc.numeric_column("x", shape=(2,)),
        fc.categorical_column_with_identity("k", 3),
    ]
    w_x = np.array([[1.0, -1.0], [2.0, 0.5]], np.float32)
    w_k = np.array([[10.0, 0.0], [20.0, 1.0], [30.0, 2.0]], np.float32)
    bias = np.array([0.25, -0.25], np.float32)
    feats = {"x": [[1.0, 2.0], [0.0, 1.0]], "k": [[0, 2], [1, -1]]}
    values = {
        "linear_model/x/weights": w_x,
        "linear_model/k/weights": w_k,
        "linear_model/bias_weights": bias,
    }
    for combiner, scale in [("sum", [1.0, 1.0]), ("mean", [0.5, 1.0]), ("sqrtn", [2**-0.5, 1.0])]:
        got = _run(
            lambda f, c=combiner: fc.linear_model(f, cols, units=2, sparse_combiner=c),
            feats,
            values,
        )
        k_part = np.stack([(w_k[0] + w_k[2]) * scale[0], w_k[1] * scale[1]])
        want = np.array(feats["x"]) @ w_x + k_part + bias
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_variable_names_and_collections():
    """Variables are input_layer/<col>/embedding_weights, linear_model/<col>/weights and
    linear_model/bias_weights; weight_collections get them too."""
    k = fc.categorical_column_with_identity("k", 3)
    with tf.Graph().as_default():
        feats = {"k": tf.constant([[1]]), "x": tf.constant([[1.0]])}
        fc.input_layer(feats, [fc.embedding_column(k, 2)], weight_collections=["mine"])
        fc.linear_model(feats, [k, fc.numeric_column("x")])
        names = [v.op.name for v in tf.global_variables()]
        mine = [v.op.name for v in tf.get_collection("mine")]
    assert names == [
        "input_layer/k_embedding/embedding_weights",
        "linear_model/k/weights",
        "linear_model/x/weights",
        "linear_model/bias_weights",
    ]
    assert mine == ["input_layer/k_embedding/embedding_weights"]


def test_make_parse_example_spec():
    """Numeric columns read FixedLenFeature, categorical ones VarLenFeature, weights too."""
    k = fc.categorical_column_with_identity("k", 3)
    spec = fc.make_parse_example_spec(
        [
            fc.numeric_column("x", shape=(2,), default_value=0.5),
            fc.embedding_column(fc.weighted_categorical_column(k, "w"), 2),
            fc.indicator_column(fc.crossed_column(["s", k], 10)),
        ]
    )
    assert spec == {
        "x": tf.FixedLenFeature((2,), tf.float32, 0.5),
        "k": tf.VarLenFeature(tf.int64),
        "w": tf.VarLenFeature(tf.float32),
        "s": tf.VarLenFeature(tf.string),
    }


# ---- errors --------------------------------------------------------------------------------


def test_errors_name_the_column_and_the_problem(tmp_path):
    """Bad columns and bad inputs raise ValueError naming the column and the value."""
    x = fc.numeric_column("x")
    with pytest.raises(ValueError, match="boundaries must be a sorted list.*2.0, 1.0"):
        fc.bucketized_column(x, [0.0, 2.0, 1.0])
    with pytest.raises(ValueError, match="'v'.*nope.txt.*does not exist"):
        fc.categorical_column_with_vocabulary_file("v", str(tmp_path / "nope.txt"))
    with pytest.raises(ValueError, match="'v'.*duplicate keys.*'a'"):
        fc.categorical_column_with_vocabulary_list("v", ["a", "b", "a"])
    with pytest.raises(ValueError, match="'v'.*both num_oov_buckets"):
        fc.categorical_column_with_vocabulary_list("v", ["a"], default_value=0, num_oov_buckets=1)
    with pytest.raises(ValueError, match="hash_bucket.*cannot be crossed"):
        fc.crossed_column([fc.categorical_column_with_hash_bucket("h", 5), "y"], 10)
    with pytest.raises(ValueError, match="'k'.*default_value 5 not in range"):
        fc.categorical_column_with_identity("k", 3, default_value=5)
    feats = {"x": [[1.0]], "s": [["a"]]}
    with pytest.raises(ValueError, match="feature 'y' is not in the features.*'s', 'x'"):
        _dense([fc.numeric_column("y")], feats)
    with pytest.raises(ValueError, match="'s'.*column dtype integer and input dtype string"):
        _dense(
            [fc.indicator_column(fc.categorical_column_with_hash_bucket("s", 5, dtype=tf.int64))],
            feats,
        )
    with pytest.raises(ValueError, match="numeric_column 's'.*numeric, got string"):
        _dense([fc.numeric_column("s")], feats)
    with pytest.raises(ValueError, match="wrap a categorical column with embedding_column"):
        _dense([fc.categorical_column_with_identity("x", 3)], feats)
    with pytest.raises(ValueError, match="duplicate feature column names \\['x'\\]"):
        _dense([x, fc.numeric_column("x", shape=(1,))], feats)
    sp = (np.array([[0, 0]], np.int64), np.array([1.0], np.float32), np.array([1, 1], np.int64))
    with pytest.raises(ValueError, match="numeric_column 'x'.*SparseTensor"):
        _dense([x], {"x": sp})


# ---- canned estimators -----------------------------------------------------------------------


def _numpy_input(x, y=None, batch=4):
    return tf.estimator.inputs.numpy_input_fn(
        {"x": np.asarray(x, np.float32)}, None if y is None else np.asarray(y), batch_size=batch,
        shuffle=False, num_epochs=1,
    )  # fmt: skip


def test_linear_regressor_one_sgd_step_by_hand(tmp_path):
    """LinearRegressor's loss is the SUM of squared errors over the batch (TF1's default); one
    SGD step from zeros moves w by lr * sum(2 (y - 0) x) and b by lr * sum(2 y)."""
    x = np.array([[1.0], [2.0], [3.0], [4.0]], np.float32)
    y = np.array([[2.0], [4.0], [5.0], [9.0]], np.float32)
    lr = 0.01
    est = tf.estimator.LinearRegressor(
        [fc.numeric_column("x")], model_dir=str(tmp_path),
        optimizer=tf.train.GradientDescentOptimizer(lr),
    )  # fmt: skip
    est.train(_numpy_input(x, y), steps=1)
    w = lr * float((2 * y * x).sum())
    b = lr * float((2 * y).sum())
    assert est.get_variable_value("linear/linear_model/x/weights")[0, 0] == pytest.approx(w)
    assert est.get_variable_value("linear/linear_model/bias_weights")[0] == pytest.approx(b)
    m = est.evaluate(_numpy_input(x, y))
    err = (x * w + b - y) ** 2
    assert m["loss"] == pytest.approx(err.sum(), rel=1e-5)
    assert m["average_loss"] == pytest.approx(err.mean(), rel=1e-5)
    assert m["label/mean"] == pytest.approx(y.mean())
    assert m["prediction/mean"] == pytest.approx((x * w + b).mean(), rel=1e-5)
    preds = [p["predictions"][0] for p in est.predict(_numpy_input(x))]
    np.testing.assert_allclose(preds, (x * w + b)[:, 0], rtol=1e-5)


def test_dnn_classifier_learns_and_reports_tf_keys(tmp_path):
    """A DNNClassifier with a label vocabulary learns a separable problem; evaluate and predict
    give TF's keys, loss = batch size x average_loss for one batch (SUM reduction)."""
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(-1, 1)
    y = np.where(x[:, 0] > 0, "yes", "no")
    est = tf.estimator.DNNClassifier(
        [4], [fc.numeric_column("x")], model_dir=str(tmp_path), label_vocabulary=["no", "yes"],
        optimizer=tf.train.AdamOptimizer(0.1), config=tf.estimator.RunConfig(tf_random_seed=3),
    )  # fmt: skip
    train = tf.estimator.inputs.numpy_input_fn(
        {"x": x}, y, batch_size=8, shuffle=False, num_epochs=None
    )
    est.train(train, steps=60)
    m = est.evaluate(_numpy_input(x, y, batch=8))
    assert set(m) == {
        "accuracy", "accuracy_baseline", "auc", "auc_precision_recall", "average_loss",
        "label/mean", "loss", "precision", "prediction/mean", "recall", "global_step",
    }  # fmt: skip
    assert m["accuracy"] == 1.0 and m["global_step"] == 60
    assert m["loss"] == pytest.approx(8 * m["average_loss"], rel=1e-5)
    p = next(est.predict(_numpy_input(x[:1])))
    assert set(p) == {
        "logits", "logistic", "probabilities", "class_ids", "classes", "all_class_ids",
        "all_classes",
    }  # fmt: skip
    assert p["classes"][0] == b"no" and p["class_ids"][0] == 0
    assert p["probabilities"] == pytest.approx([1 - p["logistic"][0], p["logistic"][0]])


def test_canned_estimator_defaults_and_errors():
    """TF1's default optimizers and learning rates; bad arguments name the problem."""
    from hetbed import estimator_canned as ec

    assert isinstance(ec._optimizer("Adagrad", 0.05, "t"), tf.train.AdagradOptimizer)
    lin = ec._linear_part(
        "t", [fc.numeric_column(c) for c in "abcdefghijklmnopqrstuvwxyz"], None, "sum", 0.2
    )
    assert lin["lr"] == pytest.approx(1 / np.sqrt(26))
    with pytest.raises(ValueError, match="unknown optimizer 'Nope'"):
        ec._optimizer("Nope", 0.1, "DNNClassifier")
    with pytest.raises(ValueError, match="DNNClassifier: hidden_units must be given"):
        tf.estimator.DNNClassifier([], [fc.numeric_column("x")])
    with pytest.raises(ValueError, match="label_vocabulary has 1 entries, n_classes is 2"):
        tf.estimator.LinearClassifier([fc.numeric_column("x")], label_vocabulary=["a"])
    with pytest.raises(ValueError, match="linear_feature_columns, dnn_feature_columns or both"):
        tf.estimator.DNNLinearCombinedRegressor()


def test_embedding_loads_from_checkpoint(tmp_path):
    """embedding_column(ckpt_to_load_from=...) starts from the checkpoint's tensor, not from its
    initializer."""
    table = np.arange(8, dtype=np.float32).reshape(4, 2) / 10
    with tf.Graph().as_default():
        v = tf.Variable(table, name="emb/table")
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            path = tf.train.Saver([v]).save(s, str(tmp_path / "m.ckpt"))
    col = fc.embedding_column(
        fc.categorical_column_with_identity("k", 4), 2, combiner="sum",
        ckpt_to_load_from=path, tensor_name_in_ckpt="emb/table",
    )  # fmt: skip
    got = _dense([col], {"k": [[3], [0]]})
    np.testing.assert_allclose(got, table[[3, 0]])


def test_dnn_dropout_only_while_training(tmp_path):
    """dropout applies in training only: evaluating twice gives the same loss, and it equals
    the loss of the predictions (SUM of squared errors)."""
    x = np.linspace(0, 1, 8, dtype=np.float32).reshape(-1, 1)
    y = 2 * x
    est = tf.estimator.DNNRegressor(
        [16], [fc.numeric_column("x")], model_dir=str(tmp_path), dropout=0.5,
        config=tf.estimator.RunConfig(tf_random_seed=2),
    )  # fmt: skip
    est.train(_numpy_input(x, y, batch=8), steps=3)
    a = est.evaluate(_numpy_input(x, y, batch=8))
    b = est.evaluate(_numpy_input(x, y, batch=8))
    preds = np.array([p["predictions"][0] for p in est.predict(_numpy_input(x, batch=8))])
    assert a["loss"] == b["loss"]
    assert a["loss"] == pytest.approx(float(((preds - y[:, 0]) ** 2).sum()), rel=1e-5)


# ---- bad inputs fail, naming the column, rather than giving numbers -------------------------------


def test_numeric_column_of_the_wrong_width_fails():
    """An input whose examples do not hold the column's shape fails (TF's reshape to
    [batch, width] fails) instead of being re-batched: ValueError when its shape is known,
    InvalidArgumentError naming the column when run."""
    col = fc.numeric_column("n", shape=(2,))
    with pytest.raises(ValueError, match=r"numeric_column 'n': expected 2 values per example.*\(2, 3\)"):  # fmt: skip
        _dense([col], {"n": np.zeros((2, 3), np.float32)})
    with tf.Graph().as_default():
        p = tf.placeholder(tf.float32, [None, None])
        out = fc.input_layer({"n": p}, [col])
        bucket = fc.input_layer({"n": p}, [fc.bucketized_column(col, [0.5])])
        with tf.Session() as s:
            for bad in (np.arange(6).reshape(2, 3), np.ones((3, 4))):
                for t in (out, bucket):
                    with pytest.raises(tf.errors.InvalidArgumentError, match="numeric_column 'n': expected 2 values per example"):  # fmt: skip
                        s.run(t, {p: bad})
            np.testing.assert_array_equal(s.run(out, {p: [[1, 2], [3, 4]]}), [[1, 2], [3, 4]])
            np.testing.assert_array_equal(s.run(bucket, {p: [[0, 1]]}), [[1, 0, 0, 1]])
            assert s.run(out, {p: np.zeros((0, 5))}).shape == (0, 2)


def test_weighted_column_needs_a_weight_per_id():
    """The weights must have the ids' indices (TF's SparseMerge fails on fewer weights than
    ids): a missing or misplaced weight is an InvalidArgumentError naming the column, not an
    invented weight."""
    col = fc.weighted_categorical_column(fc.categorical_column_with_identity("k", 5), "w")
    ind = fc.indicator_column(col)
    msg = "weighted_categorical_column 'k_weighted_by_w': the weights 'w' must have the same indices"  # fmt: skip
    with pytest.raises(tf.errors.InvalidArgumentError, match=msg):
        _dense([ind], {"k": np.array([[1, 2]], np.int64), "w": [[0.5]]})
    with pytest.raises(tf.errors.InvalidArgumentError, match=msg):  # a dense weight 0 is dropped
        _dense([ind], {"k": np.array([[1, 2]], np.int64), "w": [[0.5, 0.0]]})
    ids = (np.array([[0, 0], [1, 0]], np.int64), np.array([1, 3], np.int64), np.array([2, 2], np.int64))  # fmt: skip
    moved = (np.array([[0, 0], [1, 1]], np.int64), np.array([0.5, 2.0], np.float32), ids[2])
    with pytest.raises(tf.errors.InvalidArgumentError, match=msg):
        _dense([ind], {"k": ids, "w": moved})
    with pytest.raises(tf.errors.InvalidArgumentError, match=msg):
        _run(lambda f: fc.linear_model(f, [col]), {"k": ids, "w": moved})
    same = (ids[0], np.array([0.5, 2.0], np.float32), ids[2])
    np.testing.assert_array_equal(
        _dense([ind], {"k": ids, "w": same}), [[0, 0.5, 0, 0, 0], [0, 0, 0, 2, 0]]
    )
    got = _dense([ind], {"k": np.array([[1, 2], [4, -1]], np.int64), "w": [[0.5, 1.5], [2, 0]]})
    np.testing.assert_array_equal(got, [[0, 0.5, 1.5, 0, 0], [0, 0, 0, 0, 2]])


def test_vocabulary_file_content_is_checked_at_table_init(tmp_path):
    """As TF's table init: an empty line, fewer lines than vocabulary_size, or a word in an
    int64 vocabulary is an InvalidArgumentError naming the column and the file (not the key "",
    a wider indicator, or a bare int() error); lines end at \\n, a \\r before it dropped."""
    cases = [
        ("a\n\nb\n", {}, [["a"]], "Invalid content in {}: empty line found at position 3"),
        ("a\r\n\r\nb\r\n", {}, [["a"]], "Invalid content in {}: empty line found at position 5"),
        (
            "a\nb\n",
            {"vocabulary_size": 5},
            [["a"]],
            "Invalid vocab_size in {}: expected 5 but got 2",
        ),  # fmt: skip
        (
            "a\nb\n",
            {"dtype": tf.int64},
            np.array([[1]], np.int64),
            "Field 'a' in line 0 of {} is not a valid int64",
        ),  # fmt: skip
    ]
    for i, (text, kw, feats, msg) in enumerate(cases):
        path = tmp_path / f"v{i}.txt"
        path.write_bytes(text.encode())
        col = fc.indicator_column(fc.categorical_column_with_vocabulary_file("k", str(path), **kw))
        msg = "categorical_column_with_vocabulary_file 'k': " + msg.format(path)
        with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(msg)):
            _dense([col], {"k": feats})
    path = tmp_path / "ok.txt"
    path.write_bytes(b"7\r\n-3\r\n\n")  # an empty line after vocabulary_size lines is not read
    col = fc.categorical_column_with_vocabulary_file("k", str(path), 2, dtype=tf.int64)
    got = _dense([fc.indicator_column(col)], {"k": np.array([[-3], [7], [5]], np.int64)})
    np.testing.assert_array_equal(got, [[0, 1], [1, 0], [0, 0]])
    path.write_bytes(b"x\x0cy\nz")  # only \n ends a line; a last line needs none
    col = fc.categorical_column_with_vocabulary_file("k", str(path))
    assert col.num_buckets == 2
    got = _dense([fc.indicator_column(col)], {"k": [["z"], ["x\x0cy"], ["x"]]})
    np.testing.assert_array_equal(got, [[0, 1], [1, 0], [0, 0]])


def _const_input(x, y):
    """An input_fn giving the whole batch; ``y`` as it is, or a placeholder_with_default of
    unknown shape (its shape known only when run)."""

    def input_fn():
        lab = y() if callable(y) else tf.constant(y)
        return {"x": tf.constant(np.asarray(x, np.float32))}, lab

    return input_fn


def _trained(tmp_path, make, x, y):
    """An estimator trained one step on good labels, and its variables."""
    est = make(str(tmp_path))
    est.train(_const_input(x, y), steps=1)
    return est, {n: est.get_variable_value(n) for n in est.get_variable_names()}


def _unchanged(est, before):
    for n, v in before.items():
        np.testing.assert_array_equal(est.get_variable_value(n), v, err_msg=n)


def test_canned_heads_check_the_label_shape(tmp_path):
    """Labels must be [batch, label_dimension] ([batch] when it is 1), as TF's heads check:
    a known wrong last dimension is TF's ValueError when the graph is built; one seen only
    when run fails the step (InvalidArgumentError) before any variable changes."""
    x = np.linspace(0, 1, 8, dtype=np.float32).reshape(8, 1)
    cols = [fc.numeric_column("x")]
    reg = lambda d, n=1: tf.estimator.LinearRegressor(cols, model_dir=d, label_dimension=n)  # noqa: E731
    cls = lambda d, n=2: tf.estimator.LinearClassifier(cols, model_dir=d, n_classes=n)  # noqa: E731
    wrong = [
        (reg, np.ones((8, 2), np.float32), 1, 2),
        (lambda d: reg(d, 3), np.ones(8, np.float32), 3, 1),
        (cls, np.ones((8, 2), np.int64), 1, 2),
        (lambda d: cls(d, 3), np.ones((8, 3), np.int64), 1, 3),
    ]
    for i, (make, y, want, got) in enumerate(wrong):
        est = make(str(tmp_path / f"s{i}"))
        msg = f"Mismatched label shape. Expected labels dimension={want}.  Received {got}."
        with pytest.raises(ValueError, match=re.escape(msg)):
            est.train(_const_input(x, y), steps=1)
    unknown = lambda v: lambda: tf.placeholder_with_default(v, [None, None])  # noqa: E731
    for i, (make, good, bad) in enumerate([
        (reg, np.ones((8, 1), np.float32), np.ones((8, 2), np.float32)),
        (lambda d: reg(d, 2), np.ones((8, 2), np.float32), np.ones((4, 2), np.float32)),
        (cls, np.ones((8, 1), np.int64), np.ones((4, 2), np.int64)),
        (lambda d: cls(d, 3), np.ones((8, 1), np.int64), np.ones((8, 3), np.int64)),
    ]):  # fmt: skip
        est, before = _trained(tmp_path / f"r{i}", make, x, good)
        with pytest.raises(tf.errors.InvalidArgumentError, match="labels shape must be"):
            est.train(_const_input(x, unknown(bad)), steps=1)
        _unchanged(est, before)
        with pytest.raises(tf.errors.InvalidArgumentError, match="labels shape must be"):
            est.evaluate(_const_input(x, unknown(bad)), steps=1)
    est = reg(str(tmp_path / "ok"))  # rank-1 labels, shape known only when run: fine
    est.train(_const_input(x, lambda: tf.placeholder_with_default(x[:, 0], [None])), steps=1)


def test_binary_classifier_keeps_soft_labels(tmp_path):
    """Float labels in [0, 1] are kept (TF's sigmoid loss takes them as they are): one SGD step
    from zeros moves the bias by lr * sum(y - 0.5); evaluate gives TF 2.15's metrics for the
    same soft labels (accuracy counts class_id == label, so 0.7 never matches; precision, recall
    and AUC take label > 0 as positive). A label outside [0, 1] fails the step."""
    x = np.array([[-0.2], [0.4], [0.1], [-0.5], [0.3], [0.5], [0.2], [-0.1]], np.float32)
    y = np.array([0, 1, 0.7, 0, 0.3, 1, 1, 0], np.float32)
    lr = 0.5
    est = tf.estimator.LinearClassifier(
        [fc.numeric_column("x")], model_dir=str(tmp_path),
        optimizer=tf.train.GradientDescentOptimizer(lr),
    )  # fmt: skip
    est.train(_const_input(x, y), steps=1)
    b = est.get_variable_value("linear/linear_model/bias_weights")[0]
    w = est.get_variable_value("linear/linear_model/x/weights")[0, 0]
    assert b == pytest.approx(lr * float((y - 0.5).sum()))
    assert w == pytest.approx(lr * float(((y - 0.5) * x[:, 0]).sum()))
    m = est.evaluate(_const_input(x, y), steps=1)
    logits = x[:, 0] * w + b
    p = 1 / (1 + np.exp(-logits))
    ce = -(y * np.log(p) + (1 - y) * np.log(1 - p))
    assert m["average_loss"] == pytest.approx(ce.mean(), rel=1e-5)
    assert m["label/mean"] == pytest.approx(y.mean())
    assert m["accuracy"] == pytest.approx(np.mean((p > 0.5) == y))
    pos = y > 0
    assert m["precision"] == pytest.approx(np.sum((p > 0.5) & pos) / np.sum(p > 0.5))
    assert m["recall"] == pytest.approx(np.sum((p > 0.5) & pos) / np.sum(pos))
    before = {n: est.get_variable_value(n) for n in est.get_variable_names()}
    for bad in ([1.5], [-0.1]):
        yb = np.concatenate([y[:7], np.float32(bad)])
        with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape("LinearClassifier: labels must be in [0, 1]")):  # fmt: skip
            est.train(_const_input(x, yb), steps=1)
    _unchanged(est, before)
    with pytest.raises(ValueError, match="labels must be integer class ids.*float32"):
        tf.estimator.LinearClassifier([fc.numeric_column("x")], n_classes=3).train(
            _const_input(x, y), steps=1
        )
