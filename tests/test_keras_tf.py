"""hetbed's tf.keras against TensorFlow's legacy Keras (Keras 2) in graph mode: the same
models with the same initial weights (set by name) give the same variable names, fit losses,
metrics and predictions. Skipped without TensorFlow or where its tf.keras is not Keras 2."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
tf_real = pytest.importorskip("tensorflow")
if not tf_real.keras.__name__.startswith(("tf_keras", "keras.api._v1", "tensorflow.python")):
    pytest.skip("TensorFlow's tf.keras here is not legacy Keras 2", allow_module_level=True)
import hetbed.compat.v1 as hb  # noqa: E402


@pytest.fixture(autouse=True)
def _tf1_behaviour():
    """TF1 behaviour (metric names such as "acc") during each test only: switching it off for
    the whole process would change every later TF-backed test's TensorFlow."""
    from tensorflow.python import tf2
    from tensorflow.python.ops import control_flow_util

    v1 = tf_real.compat.v1
    was = tf2.enabled(), control_flow_util.ENABLE_CONTROL_FLOW_V2
    tf2.disable()
    v1.disable_control_flow_v2()
    yield
    if was[1]:
        v1.enable_control_flow_v2()
    if was[0]:
        tf2.enable()


def _run_both(build, fit_kw, x, y, seed=0):
    """Build with each library in a fresh graph, give every weight the same seeded values (by
    name), fit, and return (names, history, predictions, evaluate) for each."""
    results = []
    init: dict = {}
    for lib in (tf_real, hb):
        keras = lib.keras if lib is hb else tf_real.compat.v1.keras
        with lib.Graph().as_default():
            sess = lib.compat.v1.Session() if lib is tf_real else lib.Session()
            keras.backend.set_session(sess)
            model = build(keras)
            names = [w.name for w in model.weights]
            if not init:
                r = np.random.default_rng(seed)
                init = {w.name: r.uniform(-0.5, 0.5, w.shape.as_list()) for w in model.weights}
                for n in init:  # (a variance is positive)
                    init[n] = init[n] + 1.0 if "variance" in n else init[n]
            model.set_weights([init[n].astype(np.float32) for n in names])
            hist = model.fit(x, y, verbose=0, shuffle=False, **fit_kw)
            results.append((names, hist.history, model.predict(x), model.evaluate(x, y, verbose=0)))
            keras.backend.set_session(None) if lib is hb else None
    return results


def _compare(results, rtol=1e-4):
    (n1, h1, p1, e1), (n2, h2, p2, e2) = results
    assert n1 == n2
    assert set(h1) == set(h2)
    for k in h1:
        np.testing.assert_allclose(h2[k], h1[k], rtol=rtol, atol=1e-6, err_msg=k)
    np.testing.assert_allclose(p2, p1, rtol=rtol, atol=1e-5)
    np.testing.assert_allclose(e2, e1, rtol=rtol, atol=1e-6)


def test_tutorial_mlp_adam_sparse_crossentropy_matches_tf():
    """Flatten-Dense(relu)-Dense(softmax), 'adam', sparse CE, accuracy: 3 epochs as TF's."""
    r = np.random.default_rng(1)
    x = r.random((48, 4, 3)).astype(np.float32)
    y = r.integers(0, 3, 48).astype(np.uint8)

    def build(keras):
        model = keras.Sequential(
            [
                keras.layers.Flatten(input_shape=(4, 3)),
                keras.layers.Dense(8, activation="relu"),
                keras.layers.Dense(3, activation="softmax"),
            ]
        )
        model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
        return model

    results = _run_both(build, {"epochs": 3, "batch_size": 16}, x, y)
    assert results[0][0] == ["dense/kernel:0", "dense/bias:0", "dense_1/kernel:0", "dense_1/bias:0"]
    _compare(results)


def test_lstm_gru_rmsprop_matches_tf():
    """LSTM (TF1 defaults: hard_sigmoid) -> GRU (reset_after=False) -> Dense, RMSprop, mse."""
    r = np.random.default_rng(2)
    x = r.normal(size=(24, 5, 3)).astype(np.float32)
    y = r.normal(size=(24, 2)).astype(np.float32)

    def build(keras):
        model = keras.Sequential(
            [
                keras.layers.LSTM(4, return_sequences=True, input_shape=(5, 3)),
                keras.layers.GRU(3),
                keras.layers.Dense(2),
            ]
        )
        model.compile(keras.optimizers.RMSprop(0.01), "mse", metrics=["mae"])
        return model

    results = _run_both(build, {"epochs": 2, "batch_size": 8}, x, y)
    assert results[0][0][:3] == [
        "lstm/lstm_cell/kernel:0",
        "lstm/lstm_cell/recurrent_kernel:0",
        "lstm/lstm_cell/bias:0",
    ]
    _compare(results)


def test_conv_batchnorm_sgd_momentum_matches_tf():
    """Conv2D-BatchNormalization-MaxPooling2D-Flatten-Dense(sigmoid), SGD with Nesterov momentum,
    binary CE: batch statistics in training, moving ones in predict."""
    r = np.random.default_rng(3)
    x = r.normal(size=(16, 6, 6, 2)).astype(np.float32)
    y = r.integers(0, 2, (16, 1)).astype(np.float32)

    def build(keras):
        model = keras.Sequential(
            [
                keras.layers.Conv2D(3, 3, activation="relu", input_shape=(6, 6, 2)),
                keras.layers.BatchNormalization(),
                keras.layers.MaxPooling2D(),
                keras.layers.Flatten(),
                keras.layers.Dense(1, activation="sigmoid"),
            ]
        )
        opt = keras.optimizers.SGD(0.05, momentum=0.9, nesterov=True)
        model.compile(opt, "binary_crossentropy", metrics=["accuracy"])
        return model

    _compare(_run_both(build, {"epochs": 2, "batch_size": 8}, x, y))


def test_functional_bidirectional_embedding_adagrad_matches_tf():
    """Embedding -> Bidirectional(SimpleRNN) concatenated with a Dense branch, Adagrad,
    categorical CE: same names, losses and predictions."""
    r = np.random.default_rng(4)
    x = r.integers(0, 7, (20, 4)).astype(np.int32)
    y = np.eye(3, dtype=np.float32)[r.integers(0, 3, 20)]

    def build(keras):
        inp = keras.Input(shape=(4,))
        e = keras.layers.Embedding(7, 3)(inp)
        h = keras.layers.Bidirectional(keras.layers.SimpleRNN(2))(e)
        out = keras.layers.Dense(3, activation="softmax")(h)
        model = keras.Model(inp, out)
        model.compile(keras.optimizers.Adagrad(0.1), "categorical_crossentropy", ["accuracy"])
        return model

    results = _run_both(build, {"epochs": 2, "batch_size": 10}, x, y)
    assert results[1][0][1].startswith("bidirectional/forward_simple_rnn")
    _compare(results)


def test_placeholder_pattern_losses_match_tf():
    """Keras layers on placeholders with a tf.train optimizer (repro_9's pattern)."""
    xs = np.linspace(-1, 1, 32 * 8).reshape(32, 8).astype(np.float32)
    ys = np.eye(10, dtype=np.float32)[np.arange(32) % 10]
    out = []
    for lib in (tf_real.compat.v1, hb):
        with lib.Graph().as_default():
            keras = lib.keras
            img = lib.placeholder(lib.float32, shape=(None, 8))
            labels = lib.placeholder(lib.float32, shape=(None, 10))
            init = lib.constant_initializer(0.05)
            h = keras.layers.Dense(16, activation="relu", kernel_initializer=init)(img)
            preds = keras.layers.Dense(10, activation="softmax", kernel_initializer="zeros")(h)
            loss = lib.reduce_mean(keras.losses.categorical_crossentropy(labels, preds))
            step = lib.train.GradientDescentOptimizer(0.5).minimize(loss)
            with lib.Session() as sess:
                sess.run(lib.global_variables_initializer())
                names = [v.name for v in lib.trainable_variables()]
                out.append(
                    (names, [sess.run([loss, step], {img: xs, labels: ys})[0] for _ in range(3)])
                )
    assert out[0][0] == out[1][0]
    np.testing.assert_allclose(out[1][1], out[0][1], rtol=1e-6)


def test_preprocessing_matches_tf_keras():
    """keras.preprocessing's sequence and text helpers give tf_keras's values."""
    import random

    tk, hk = tf_real.compat.v1.keras.preprocessing, hb.keras.preprocessing
    texts = [
        "The cat sat on the mat.",
        "The dog ate my homework!",
        "Cat, dog; and\tbird",
        "",
        "a a b",
    ]
    queries = ["the cat and the unknown zebra", "mat homework bird", "A B"]
    for kw in [
        {},
        {"num_words": 4},
        {"oov_token": "<OOV>"},
        {"num_words": 5, "oov_token": "<UNK>"},
        {"lower": False, "filters": "."},
        {"char_level": True},
    ]:
        a, b = tk.text.Tokenizer(**kw), hk.text.Tokenizer(**kw)
        a.fit_on_texts(texts)
        b.fit_on_texts(texts)
        assert a.word_index == b.word_index, kw
        sa, sb = a.texts_to_sequences(queries), b.texts_to_sequences(queries)
        assert sa == sb, kw
        assert a.sequences_to_texts(sa) == b.sequences_to_texts(sb), kw
        for mode in ("binary", "count", "tfidf", "freq"):
            np.testing.assert_array_equal(
                a.texts_to_matrix(queries, mode), b.texts_to_matrix(queries, mode)
            )
        assert a.to_json() == b.to_json(), kw
    for t in texts:
        assert tk.text.text_to_word_sequence(t) == hk.text.text_to_word_sequence(t)
        assert tk.text.hashing_trick(t, 17, "md5") == hk.text.hashing_trick(t, 17, "md5")
        assert tk.text.one_hot(t, 11) == hk.text.one_hot(t, 11)  # same process: same hash
    seqs = [[1, 2, 3], [4, 5], [], [6, 7, 8, 9, 10]]
    for kw in [
        {},
        {"maxlen": 3},
        {"maxlen": 3, "padding": "post"},
        {"maxlen": 3, "truncating": "post"},
        {"value": -1, "dtype": "float32"},
        {"maxlen": 6, "padding": "post", "truncating": "post", "value": 9},
    ]:
        a, b = tk.sequence.pad_sequences(seqs, **kw), hk.sequence.pad_sequences(seqs, **kw)
        assert a.dtype == b.dtype and a.tolist() == b.tolist(), kw
    np.testing.assert_array_equal(
        tk.sequence.make_sampling_table(20), hk.sequence.make_sampling_table(20)
    )
    table = tk.sequence.make_sampling_table(12, 0.1)
    pairs_kw = [{}, {"categorical": True}, {"negative_samples": 0.5, "window_size": 2}]
    for kw in [*pairs_kw, {"sampling_table": table}]:
        random.seed(3)
        a = tk.sequence.skipgrams([1, 2, 0, 3, 4, 5, 6, 7], 12, seed=5, **kw)
        random.seed(3)
        b = hk.sequence.skipgrams([1, 2, 0, 3, 4, 5, 6, 7], 12, seed=5, **kw)
        assert a == b, kw


def test_embedding_without_input_shape_builds_and_fits_as_tf():
    """basic_text_classification's model: Embedding with no input_shape (TF: (None,)), so the
    names, shapes and counts exist before fit; then fit losses and predictions equal TF's."""
    r = np.random.default_rng(3)
    x = r.integers(0, 50, (24, 9)).astype(np.int32)
    y = r.integers(0, 2, 24).astype(np.float32)
    shapes = []

    def build(keras):
        model = keras.Sequential()
        model.add(keras.layers.Embedding(50, 4))
        model.add(keras.layers.GlobalAveragePooling1D())
        model.add(keras.layers.Dense(8, activation="relu"))
        model.add(keras.layers.Dense(1, activation="sigmoid"))
        shapes.append(([tuple(x.output_shape) for x in model.layers], model.count_params()))
        model.compile("adam", "binary_crossentropy", metrics=["acc"])
        return model

    results = _run_both(build, {"epochs": 2, "batch_size": 8}, x, y)
    assert shapes[0] == shapes[1] and shapes[0][1] == 249
    _compare(results)


def test_checkpoint_index_of_keras_weights_as_tf(tmp_path):
    """ModelCheckpoint(save_weights_only) and save_weights to TF-format names list the same
    latest checkpoint (and only it) as TF's, and an .h5 name lists none."""
    x = np.ones((8, 4), np.float32)
    y = np.ones((8, 3), np.float32)
    states = []
    for lib in (tf_real, hb):
        keras = lib.keras if lib is hb else tf_real.compat.v1.keras
        v1 = tf_real.compat.v1 if lib is tf_real else hb
        d = tmp_path / ("tf" if lib is tf_real else "hb")
        with lib.Graph().as_default():
            sess = v1.Session()
            keras.backend.set_session(sess)
            model = keras.Sequential([keras.layers.Dense(3, input_shape=(4,))])
            model.compile("sgd", "mse")
            cb = keras.callbacks.ModelCheckpoint(
                str(d / "training" / "cp-{epoch:04d}.ckpt"), save_weights_only=True, period=2
            )
            model.fit(x, y, epochs=5, callbacks=[cb], verbose=0)
            model.save_weights(str(d / "checkpoints" / "my_checkpoint"))
            (d / "h5").mkdir()  # (TF's h5 writer makes no folder)
            model.save_weights(str(d / "h5" / "w.h5"))
            state = v1.train.get_checkpoint_state(str(d / "training"))
            states.append(
                (
                    os.path.relpath(v1.train.latest_checkpoint(str(d / "training")), d),
                    [os.path.relpath(p, d) for p in state.all_model_checkpoint_paths],
                    os.path.relpath(v1.train.latest_checkpoint(str(d / "checkpoints")), d),
                    v1.train.latest_checkpoint(str(d / "h5")),
                )
            )
            if lib is hb:
                other = keras.Sequential([keras.layers.Dense(3, input_shape=(4,))])
                other.load_weights(v1.train.latest_checkpoint(str(d / "training")))
                other.load_weights(v1.train.latest_checkpoint(str(d / "checkpoints")))
                np.testing.assert_array_equal(other.get_weights()[0], model.get_weights()[0])
            keras.backend.set_session(None) if lib is hb else None
    assert states[0] == states[1]
    assert states[1][0] == os.path.join("training", "cp-0004.ckpt")
