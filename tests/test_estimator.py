"""tf.estimator (hetbed/estimator.py): a linear model trained through Estimator.train converges
to the generating weights, evaluate's metrics equal the same metrics computed with numpy on the
checkpointed weights, predict gives X w + b example by example, training resumes from the
checkpoint, and misuse is refused by name."""

import numpy as np
import pytest

import hetbed.compat.v1 as tf

RNG = np.random.default_rng(0)
X = RNG.standard_normal((256, 3)).astype(np.float32)
W = np.array([[1.0], [-2.0], [0.5]], np.float32)
Y = (X @ W + 0.3).astype(np.float32)


def model_fn(features, labels, mode, params):
    pred = tf.layers.dense(features["x"], 1, name="lin")
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"y": pred})
    loss = tf.losses.mean_squared_error(labels, pred)
    if mode == tf.estimator.ModeKeys.EVAL:
        mae = tf.metrics.mean_absolute_error(labels, pred)
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={"mae": mae})
    opt = tf.train.GradientDescentOptimizer(params["lr"])
    step = tf.train.get_global_step()
    return tf.estimator.EstimatorSpec(
        mode, loss=loss, train_op=opt.minimize(loss, global_step=step)
    )


def _inputs(x, y=None, **kw):
    return tf.estimator.inputs.numpy_input_fn({"x": x}, y, **kw)


def test_train_evaluate_predict_and_resume(tmp_path):
    cfg = tf.estimator.RunConfig(save_checkpoints_steps=50, tf_random_seed=1)
    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path), params={"lr": 0.05},
                                 config=cfg)  # fmt: skip
    est.train(_inputs(X, Y, batch_size=32, num_epochs=None, shuffle=True), steps=60)
    w = est.get_variable_value("lin/kernel")
    b = est.get_variable_value("lin/bias")
    ev = est.evaluate(_inputs(X, Y, batch_size=64, num_epochs=1, shuffle=False))
    pred = X @ w + b
    assert ev["global_step"] == 60
    assert ev["mae"] == pytest.approx(np.abs(pred - Y).mean(), rel=1e-5)
    assert ev["loss"] == pytest.approx(((pred - Y) ** 2).mean(), rel=1e-4)
    got = list(est.predict(_inputs(X[:5], batch_size=2, shuffle=False)))
    assert len(got) == 5
    np.testing.assert_allclose([p["y"][0] for p in got], pred[:5, 0], rtol=1e-5)
    est.train(_inputs(X, Y, batch_size=32, num_epochs=None, shuffle=True), max_steps=400)
    assert est.evaluate(_inputs(X, Y, batch_size=256, shuffle=False))["global_step"] == 400
    np.testing.assert_allclose(est.get_variable_value("lin/kernel"), W, atol=1e-3)
    est.train(_inputs(X, Y, shuffle=False), max_steps=100)  # already past: nothing runs
    assert int(est.get_variable_value("global_step")) == 400


def test_dataset_input_fn_train_and_evaluate_and_misuse(tmp_path):
    def input_fn():
        ds = tf.data.Dataset.from_tensor_slices(({"x": X}, Y))
        return ds.batch(64)  # one epoch: training ends when the input does

    def small_model(features, labels, mode):
        return model_fn(features, labels, mode, {"lr": 0.1})

    est = tf.estimator.Estimator(small_model, model_dir=str(tmp_path))
    train = tf.estimator.TrainSpec(input_fn, max_steps=1000)
    metrics, _ = tf.estimator.train_and_evaluate(est, train, tf.estimator.EvalSpec(input_fn))
    assert metrics["global_step"] == 4  # 256 rows in batches of 64, one pass
    with pytest.raises(ValueError, match="TRAIN needs loss and train_op"):
        tf.estimator.EstimatorSpec(tf.estimator.ModeKeys.TRAIN, loss=tf.constant(1.0))
    with pytest.raises(ValueError, match="no checkpoint"):
        tf.estimator.Estimator(model_fn, model_dir=str(tmp_path / "fresh")).evaluate(input_fn)
    with pytest.raises(ValueError, match="shuffle must be given"):
        tf.estimator.inputs.numpy_input_fn({"x": X}, Y)
    with pytest.raises(ValueError, match="steps or max_steps"):
        est.train(input_fn, steps=1, max_steps=2)


def test_warm_start_from_a_checkpoint_a_model_dir_or_a_saved_model(tmp_path):
    first = tf.estimator.Estimator(model_fn, str(tmp_path / "a"), params={"lr": 0.1})
    first.train(_inputs(X, Y, batch_size=32, num_epochs=None, shuffle=False), steps=20)
    kernel, bias = first.get_variable_value("lin/kernel"), first.get_variable_value("lin/bias")
    assert abs(bias[0]) > 0.01  # trained away from its zero start

    def warm(name, ws):
        est = tf.estimator.Estimator(
            model_fn, str(tmp_path / name), params={"lr": 0.0}, warm_start_from=ws
        )
        est.train(_inputs(X, Y, batch_size=32, shuffle=False), steps=1)  # lr 0: the start kept
        return est.get_variable_value("lin/kernel"), est.get_variable_value("lin/bias")

    k, b = warm("b", first.model_dir)  # a model_dir: its latest checkpoint, every trainable
    np.testing.assert_array_equal(k, kernel)
    np.testing.assert_array_equal(b, bias)
    k, b = warm("c", tf.estimator.WarmStartSettings(first.latest_checkpoint(), "lin/kernel"))
    np.testing.assert_array_equal(k, kernel)
    assert b.tolist() == [0.0]  # not chosen: its own initializer
    receiver = tf.estimator.export.build_raw_serving_input_receiver_fn(
        {"x": tf.placeholder(tf.float32, [None, 3])}
    )
    saved = first.export_savedmodel(str(tmp_path / "export"), receiver).decode()
    k, b = warm("d", saved)
    np.testing.assert_array_equal(b, bias)

    def renamed_fn(features, labels, mode, params):
        pred = tf.layers.dense(features["x"], 1, name="new")
        loss = tf.losses.mean_squared_error(labels, pred)
        opt = tf.train.GradientDescentOptimizer(0.0)
        return tf.estimator.EstimatorSpec(
            mode, loss=loss, train_op=opt.minimize(loss, tf.train.get_global_step())
        )

    ws = tf.estimator.WarmStartSettings(
        first.model_dir,
        var_name_to_prev_var_name={"new/kernel": "lin/kernel", "new/bias": "lin/bias"},
    )
    est = tf.estimator.Estimator(renamed_fn, str(tmp_path / "e"), warm_start_from=ws)
    est.train(_inputs(X, Y, batch_size=32, shuffle=False), steps=1)
    np.testing.assert_array_equal(est.get_variable_value("new/kernel"), kernel)
    bad = tf.estimator.Estimator(renamed_fn, str(tmp_path / "f"), warm_start_from=first.model_dir)
    with pytest.raises(ValueError, match="'new/kernel'.*is not in"):
        bad.train(_inputs(X, Y, batch_size=32, shuffle=False), steps=1)
    assert bad.latest_checkpoint() is None  # nothing written
    # a model_dir that has a checkpoint resumes from it, not from the warm start
    again = tf.estimator.Estimator(
        model_fn, str(tmp_path / "c"), params={"lr": 0.0}, warm_start_from=first.model_dir
    )
    again.train(_inputs(X, Y, batch_size=32, shuffle=False), steps=1)
    assert again.get_variable_value("lin/bias").tolist() == [0.0]


def test_warm_start_refuses_what_tensorflow_refuses(tmp_path):
    first = tf.estimator.Estimator(model_fn, str(tmp_path / "a"), params={"lr": 0.1})
    first.train(_inputs(X, Y, batch_size=32, shuffle=False), steps=2)

    def int_fn(features, labels, mode, params):
        w = tf.get_variable("lin/kernel", [3, 1], tf.int32, tf.zeros_initializer())
        loss = tf.reduce_mean(tf.cast(w, tf.float32)) + 0 * tf.reduce_sum(features["x"])
        return tf.estimator.EstimatorSpec(
            mode, loss=loss, train_op=tf.assign_add(tf.train.get_global_step(), 1)
        )

    cases = [
        (int_fn, first.model_dir, "lin/kernel is int32, the checkpoint's 'lin/kernel' float32"),
        (
            model_fn,
            tf.estimator.WarmStartSettings(
                first.model_dir, var_name_to_prev_var_name={"lin/kernle": "lin/kernel"}
            ),
            "not warm-started: \\['lin/kernle'\\]",
        ),
        (
            model_fn,
            tf.estimator.WarmStartSettings(first.model_dir, ("lin/kernel",)),
            "must be a list or a str",
        ),
    ]
    for i, (fn, ws, message) in enumerate(cases):
        est = tf.estimator.Estimator(
            fn, str(tmp_path / f"b{i}"), params={"lr": 0.0}, warm_start_from=ws
        )
        with pytest.raises(ValueError, match=message):
            est.train(_inputs(X, Y, batch_size=32, shuffle=False), steps=1)
    # "lin/kernel$" matches no variable name (they end ":0"), as in TF: nothing is warm-started
    ws = tf.estimator.WarmStartSettings(first.model_dir, "lin/kernel$")
    est = tf.estimator.Estimator(
        model_fn, str(tmp_path / "c"), params={"lr": 0.0}, warm_start_from=ws
    )
    est.train(_inputs(X, Y, batch_size=32, shuffle=False), steps=1)
    assert not np.array_equal(
        est.get_variable_value("lin/kernel"), first.get_variable_value("lin/kernel")
    )
