"""Estimator.export_savedmodel, tf.estimator.export and the exporters (estimator_export.py)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import hetbed.compat.v1 as tf

RNG = np.random.RandomState(0)
X = RNG.randn(60, 5).astype(np.float32)
Y = np.argmax(X @ RNG.randn(5, 3), 1).astype(np.int32)


def _input_fn(train=True):
    def fn():
        ds = tf.data.Dataset.from_tensor_slices(({"x": X}, Y))
        return (ds.repeat() if train else ds).batch(20)

    return fn


def _model_fn(features, labels, mode, params):
    logits = tf.layers.dense(features["x"], 3, name="logits")
    probs = tf.nn.softmax(logits)
    preds = {"class": tf.argmax(logits, 1), "prob": probs}
    if mode == tf.estimator.ModeKeys.PREDICT:
        outs = params.get("outputs")
        return tf.estimator.EstimatorSpec(
            mode, predictions=preds, export_outputs=outs and outs(preds)
        )
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss)
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _serve(path, feeds, want_sig="serving_default"):
    with tf.Graph().as_default(), tf.Session() as s:
        meta = tf.saved_model.loader.load(s, [tf.saved_model.tag_constants.SERVING], path)
        if want_sig is None:
            return sorted(meta.signature_def), None
        sig = meta.signature_def[want_sig]
        outs = {k: v.name for k, v in sig.outputs.items()}
        return sorted(meta.signature_def), s.run(
            outs, {sig.inputs[k].name: v for k, v in feeds.items()}
        )


def test_an_export_serves_what_predict_gives(tmp_path):
    est = tf.estimator.Estimator(_model_fn, str(tmp_path / "m"), params={})
    with pytest.raises(ValueError, match="Couldn't find trained model"):
        est.export_savedmodel(str(tmp_path / "e"), lambda: None)
    est.train(_input_fn(), steps=20)
    want = list(est.predict(_input_fn(False)))
    receiver = tf.estimator.export.build_raw_serving_input_receiver_fn(
        {"x": tf.placeholder(tf.float32, [None, 5])}
    )
    path = est.export_savedmodel(str(tmp_path / "e"), receiver)
    assert isinstance(path, bytes) and os.listdir(str(tmp_path / "e")) == [
        os.path.basename(path.decode())
    ]
    sigs, got = _serve(path.decode(), {"x": X})
    assert sigs == ["serving_default"]
    np.testing.assert_allclose(got["prob"], np.stack([p["prob"] for p in want]), rtol=1e-6)
    assert got["class"].tolist() == [p["class"] for p in want]
    again = est.export_saved_model(str(tmp_path / "e"), receiver)  # TF2's name; a new folder
    assert again != path and len(os.listdir(str(tmp_path / "e"))) == 2


def test_export_outputs_give_signatures_as_tensorflows(tmp_path):
    def outputs(preds):
        classes = tf.as_string(preds["class"])
        return {
            "predict": tf.estimator.export.PredictOutput(preds["prob"]),
            "classify": tf.estimator.export.ClassificationOutput(
                scores=preds["prob"], classes=classes
            ),
        }

    est = tf.estimator.Estimator(_model_fn, str(tmp_path / "m"), params={"outputs": outputs})
    est.train(_input_fn(), steps=5)
    raw = tf.estimator.export.build_raw_serving_input_receiver_fn(
        {"x": tf.placeholder(tf.float32, [None, 5])}
    )
    with pytest.raises(ValueError, match="none of them is specified as the default"):
        est.export_savedmodel(str(tmp_path / "bad"), raw)
    assert not os.path.exists(str(tmp_path / "bad")) or os.listdir(str(tmp_path / "bad")) == []

    def one(preds):
        return {"classify": tf.estimator.export.ClassificationOutput(scores=preds["prob"])}

    est2 = tf.estimator.Estimator(_model_fn, str(tmp_path / "m"), params={"outputs": one})
    # a classification of float inputs cannot be made: left out (TF 2.15 writes the export
    # with no signature at all)
    sigs, _ = _serve(est2.export_savedmodel(str(tmp_path / "raw"), raw).decode(), {}, None)
    assert sigs == []
    spec = {"x": tf.FixedLenFeature([5], tf.float32)}
    parsing = tf.estimator.export.build_parsing_serving_input_receiver_fn(spec)
    path = est2.export_savedmodel(str(tmp_path / "parse"), parsing).decode()
    examples = [
        tf.train.Example(
            features=tf.train.Features(
                feature={"x": tf.train.Feature(float_list=tf.train.FloatList(value=row))}
            )
        ).SerializeToString()
        for row in X[:4]
    ]
    sigs, got = _serve(path, {"inputs": np.array(examples, dtype=object)})
    assert sigs == ["classify", "serving_default"]  # the single output is also the default (TF's)
    want = np.stack([p["prob"] for p in est2.predict(_input_fn(False))])[:4]
    np.testing.assert_allclose(got["scores"], want, rtol=1e-6)


def test_exporters_after_train_and_evaluate(tmp_path):
    receiver = tf.estimator.export.build_raw_serving_input_receiver_fn(
        {"x": tf.placeholder(tf.float32, [None, 5])}
    )
    cfg = tf.estimator.RunConfig(tf_random_seed=1)
    est = tf.estimator.Estimator(_model_fn, str(tmp_path / "m"), params={}, config=cfg)
    latest = tf.estimator.LatestExporter("latest", receiver, exports_to_keep=2)
    best = tf.estimator.BestExporter("best", receiver)
    final = tf.estimator.FinalExporter("final", receiver)
    user = tmp_path / "m" / "export" / "latest" / "1"  # a folder the user put there
    user.mkdir(parents=True)
    for steps in (5, 10, 15):
        metrics, exports = tf.estimator.train_and_evaluate(
            est,
            tf.estimator.TrainSpec(_input_fn(), max_steps=steps),
            tf.estimator.EvalSpec(_input_fn(False), steps=None, exporters=[latest, best, final]),
        )
        assert metrics["global_step"] == steps and len(exports) == 3
    root = str(tmp_path / "m" / "export")
    assert len(os.listdir(os.path.join(root, "latest"))) == 3  # the newest two, and "1"
    assert user.is_dir()  # (only exports' own ten-digit folders are collected)
    assert len(os.listdir(os.path.join(root, "best"))) == 3  # the loss fell every time
    assert len(os.listdir(os.path.join(root, "final"))) == 3
    assert best.export(est, os.path.join(root, "best"), None, {"loss": 1e9}, True) is None
    with pytest.raises(ValueError, match="distinct names"):
        tf.estimator.EvalSpec(_input_fn(False), exporters=[latest, latest])
    with pytest.raises(ValueError, match="must be a Tensor"):
        tf.estimator.export.ServingInputReceiver({"x": np.zeros(3)}, {})
