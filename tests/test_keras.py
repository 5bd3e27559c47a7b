"""tf.keras on hetbed (hetbed/keras/): layer outputs against numpy formulas with the layers' own
weights, training steps against hand-written numpy updates, Keras's names, summary counts,
weights files and errors."""

from __future__ import annotations

import numpy as np
import pytest

import hetbed.compat.v1 as tf
from hetbed.compat.v1 import keras

K = keras.backend
L = keras.layers


@pytest.fixture(autouse=True)
def fresh_graph():
    with tf.Graph().as_default():
        K.set_session(None)
        yield


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _hard_sigmoid(x):
    return np.clip(0.2 * x + 0.5, 0.0, 1.0)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


# ---- layers ----------------------------------------------------------------------------------


def test_dense_forward_is_relu_of_affine_and_names_are_kerass():
    """Dense(relu) = relu(x W + b) with its own weights; names dense/kernel:0, dense_1/..."""
    x = tf.placeholder(tf.float32, [None, 4])
    d1, d2 = L.Dense(3, activation="relu"), L.Dense(2)
    y = d2(d1(x))
    assert [v.name for v in tf.trainable_variables()] == [
        "dense/kernel:0",
        "dense/bias:0",
        "dense_1/kernel:0",
        "dense_1/bias:0",
    ]
    xs = _rng().normal(size=(5, 4)).astype(np.float32)
    out = K.get_session().run(y, {x: xs})
    (w1, b1), (w2, b2) = d1.get_weights(), d2.get_weights()
    np.testing.assert_allclose(out, np.maximum(xs @ w1 + b1, 0) @ w2 + b2, rtol=1e-5, atol=1e-6)
    assert not np.any(b1) and np.abs(w1).max() <= np.sqrt(6 / 7)  # zeros, glorot_uniform


def test_conv2d_forward_equals_numpy_correlation():
    """Conv2D(valid) = sum over the window of x * kernel, plus bias."""
    x = keras.Input(shape=(5, 5, 2))
    conv = L.Conv2D(3, (2, 3), bias_initializer="ones")
    y = conv(x)
    xs = _rng(1).normal(size=(2, 5, 5, 2)).astype(np.float32)
    out = K.get_session().run(y, {x: xs})
    k, b = conv.get_weights()
    want = np.zeros((2, 4, 3, 3), np.float32)
    for i in range(4):
        for j in range(3):
            want[:, i, j] = np.einsum("nhwc,hwcf->nf", xs[:, i : i + 2, j : j + 3], k) + b
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def _lstm_numpy(xs, k, r, b, u):
    h = np.zeros((xs.shape[0], u), np.float32)
    c = np.zeros_like(h)
    hs = []
    for t in range(xs.shape[1]):
        z = xs[:, t] @ k + h @ r + b
        i, f, o = (
            _hard_sigmoid(z[:, :u]),
            _hard_sigmoid(z[:, u : 2 * u]),
            _hard_sigmoid(z[:, 3 * u :]),
        )
        c = f * c + i * np.tanh(z[:, 2 * u : 3 * u])
        h = o * np.tanh(c)
        hs.append(h)
    return np.stack(hs, 1), h, c


def test_lstm_forward_gates_ifco_and_states():
    """LSTM: gates i, f, c, o, hard_sigmoid, forget bias 1; return_sequences and return_state."""
    x = keras.Input(shape=(4, 3))
    lstm = L.LSTM(2, return_sequences=True, return_state=True)
    seq, h, c = lstm(x)
    names = [v.name for v in lstm.weights]
    assert names == [
        "lstm/lstm_cell/kernel:0",
        "lstm/lstm_cell/recurrent_kernel:0",
        "lstm/lstm_cell/bias:0",
    ]
    xs = _rng(2).normal(size=(3, 4, 3)).astype(np.float32)
    got = K.get_session().run([seq, h, c], {x: xs})
    k, r, b = lstm.get_weights()
    np.testing.assert_array_equal(b, [0, 0, 1, 1, 0, 0, 0, 0])
    np.testing.assert_allclose(r @ r.T, np.eye(2), atol=1e-5)  # orthogonal
    for a, w in zip(got, _lstm_numpy(xs, k, r, b, 2)):
        np.testing.assert_allclose(a, w, rtol=1e-5, atol=1e-6)


def test_gru_and_simple_rnn_forward_equal_numpy():
    """GRU (z, r, h; reset before the product) and SimpleRNN (tanh) over known steps."""
    x = keras.Input(shape=(3, 2))
    gru, rnn = L.GRU(2, bias_initializer="ones"), L.SimpleRNN(3, go_backwards=True)
    yg, yr = gru(x), rnn(x)
    xs = _rng(3).normal(size=(2, 3, 2)).astype(np.float32)
    og, orr = K.get_session().run([yg, yr], {x: xs})
    k, r, b = gru.get_weights()
    h = np.zeros((2, 2), np.float32)
    for t in range(3):
        xz = xs[:, t] @ k + b
        z = _hard_sigmoid(xz[:, :2] + h @ r[:, :2])
        rr = _hard_sigmoid(xz[:, 2:4] + h @ r[:, 2:4])
        hh = np.tanh(xz[:, 4:] + (rr * h) @ r[:, 4:])
        h = z * h + (1 - z) * hh
    np.testing.assert_allclose(og, h, rtol=1e-5, atol=1e-6)
    k, r, b = rnn.get_weights()
    h = np.zeros((2, 3), np.float32)
    for t in (2, 1, 0):
        h = np.tanh(xs[:, t] @ k + h @ r + b)
    np.testing.assert_allclose(orr, h, rtol=1e-5, atol=1e-6)


def test_wrappers_names_and_values():
    """Bidirectional concatenates forward and reversed backward runs; TimeDistributed(Dense)
    keeps its weights as time_distributed/kernel."""
    x = keras.Input(shape=(3, 2))
    bi = L.Bidirectional(L.SimpleRNN(2, return_sequences=True))
    td = L.TimeDistributed(L.Dense(4))
    y, z = bi(x), td(x)
    assert [v.name for v in td.weights] == ["time_distributed/kernel:0", "time_distributed/bias:0"]
    assert bi.weights[0].name == "bidirectional/forward_simple_rnn/simple_rnn_cell/kernel:0"
    xs = _rng(4).normal(size=(2, 3, 2)).astype(np.float32)
    oy, oz = K.get_session().run([y, z], {x: xs})
    k, b = td.get_weights()
    np.testing.assert_allclose(oz, xs @ k + b, rtol=1e-5, atol=1e-6)
    kf, rf, bf, kb, rb, bb = bi.get_weights()

    def run(order, k, r, b):
        h, hs = np.zeros((2, 2), np.float32), {}
        for t in order:
            h = np.tanh(xs[:, t] @ k + h @ r + b)
            hs[t] = h
        return np.stack([hs[t] for t in range(3)], 1)

    want = np.concatenate([run([0, 1, 2], kf, rf, bf), run([2, 1, 0], kb, rb, bb)], -1)
    np.testing.assert_allclose(oy, want, rtol=1e-5, atol=1e-6)


def test_merge_embedding_reshape_pooling_shapes_and_values():
    """Concatenate/Add/Multiply, Embedding rows, Reshape, pooling and padding by numpy."""
    a, b = keras.Input(shape=(3,)), keras.Input(shape=(3,))
    cat, s, m = L.concatenate([a, b]), L.add([a, b]), L.Multiply()([a, b])
    ids = keras.Input(shape=(2,), dtype="int32")
    emb = L.Embedding(5, 2)
    e = emb(ids)
    img = keras.Input(shape=(4, 4, 1))
    pools = [
        L.MaxPooling2D()(img),
        L.AveragePooling2D()(img),
        L.GlobalAveragePooling2D()(img),
        L.GlobalMaxPooling2D()(img),
        L.ZeroPadding2D(1)(img),
        L.UpSampling2D()(img),
        L.Reshape((2, 8))(img),
        L.LeakyReLU(0.1)(img),
    ]
    av, bv = np.array([[1.0, 2, 3]], np.float32), np.array([[4.0, 5, 6]], np.float32)
    iv = np.array([[0, 4]], np.int32)
    im = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1) - 5
    out = K.get_session().run([cat, s, m, e, *pools], {a: av, b: bv, ids: iv, img: im})
    np.testing.assert_array_equal(out[0], [[1, 2, 3, 4, 5, 6]])
    np.testing.assert_array_equal(out[1], av + bv)
    np.testing.assert_array_equal(out[2], av * bv)
    np.testing.assert_array_equal(out[3][0], emb.get_weights()[0][[0, 4]])
    x = im[0, :, :, 0]
    blocks = x.reshape(2, 2, 2, 2).transpose(0, 2, 1, 3).reshape(2, 2, 4)
    np.testing.assert_array_equal(out[4][0, :, :, 0], blocks.max(-1))
    np.testing.assert_allclose(out[5][0, :, :, 0], blocks.mean(-1))
    np.testing.assert_allclose(out[6], [[x.mean()]])
    np.testing.assert_array_equal(out[7], [[x.max()]])
    np.testing.assert_array_equal(out[8][0, :, :, 0], np.pad(x, 1))
    np.testing.assert_array_equal(out[9][0, :, :, 0], x.repeat(2, 0).repeat(2, 1))
    np.testing.assert_array_equal(out[10], im.reshape(1, 2, 8))
    np.testing.assert_allclose(out[11], np.where(im > 0, im, 0.1 * im))


def test_dropout_follows_the_learning_phase():
    """Dropout is the identity unless the learning phase is fed True (then it zeroes ~rate)."""
    x = tf.placeholder(tf.float32, [None, 1000])
    y = L.Dropout(0.5)(x)
    ones = np.ones((1, 1000), np.float32)
    sess = K.get_session()
    np.testing.assert_array_equal(sess.run(y, {x: ones}), ones)
    train = sess.run(y, {x: ones, K.learning_phase(): True})
    assert set(np.unique(train)) <= {0.0, 2.0} and 400 < (train == 0).sum() < 600


# ---- models and training ---------------------------------------------------------------------


def _softmax_model(lr=0.1, optimizer=None):
    model = keras.Sequential([L.Dense(3, activation="softmax", input_shape=(4,))])
    model.compile(optimizer or keras.optimizers.SGD(lr), "categorical_crossentropy", ["accuracy"])
    return model


def _data(n=8):
    r = _rng(5)
    x = r.normal(size=(n, 4)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[r.integers(0, 3, n)]
    return x, y


def _grads(model, x, y):
    w, b = model.get_weights()
    p = _softmax(x @ w + b)
    d = (p - y) / len(x)
    loss = -np.mean(np.sum(y * np.log(p), 1))
    return loss, x.T @ d, d.sum(0)


def test_fit_one_batch_equals_numpy_sgd_step_and_reports_its_loss():
    """One fit batch = one SGD step w -= lr dL/dw; the epoch loss is the loss before the step."""
    model = _softmax_model(0.1)
    x, y = _data()
    loss, gw, gb = _grads(model, x, y)
    w, b = model.get_weights()
    hist = model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    w2, b2 = model.get_weights()
    np.testing.assert_allclose(w2, w - 0.1 * gw, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b2, b - 0.1 * gb, rtol=1e-5, atol=1e-6)
    assert set(hist.history) == {"loss", "acc"}
    np.testing.assert_allclose(hist.history["loss"][0], loss, rtol=1e-5)
    acc = np.mean(np.argmax(x @ w + b, 1) == np.argmax(y, 1))
    np.testing.assert_allclose(hist.history["acc"][0], acc)


def test_fit_reduces_loss_and_evaluate_predict_agree_with_numpy():
    """Five epochs lower the loss; evaluate's loss and predict equal numpy on the weights."""
    model = _softmax_model(0.5)
    x, y = _data(64)
    hist = model.fit(x, y, batch_size=16, epochs=5, verbose=0)
    losses = hist.history["loss"]
    assert losses[-1] < losses[0] and hist.epoch == [0, 1, 2, 3, 4]
    w, b = model.get_weights()
    p = _softmax(x @ w + b)
    np.testing.assert_allclose(model.predict(x, batch_size=10), p, rtol=1e-5, atol=1e-6)
    loss, acc = model.evaluate(x, y, verbose=0)
    np.testing.assert_allclose(loss, -np.mean(np.sum(y * np.log(p), 1)), rtol=1e-5)
    np.testing.assert_allclose(acc, np.mean(p.argmax(1) == y.argmax(1)))
    assert model.metrics_names == ["loss", "acc"]


@pytest.mark.parametrize("name", ["adam", "rmsprop", "adagrad", "nesterov"])
def test_keras_optimizers_one_step_equal_their_formulas(name):
    """Adam (eps 1e-7), RMSprop (ms from 0, eps outside the root), Adagrad (accum 0.1), SGD
    with Nesterov momentum: one train_on_batch step equals the numpy update."""
    opt = {
        "adam": keras.optimizers.Adam(0.01),
        "rmsprop": keras.optimizers.RMSprop(0.01),
        "adagrad": keras.optimizers.Adagrad(0.1),
        "nesterov": keras.optimizers.SGD(0.1, momentum=0.9, nesterov=True),
    }[name]
    model = _softmax_model(optimizer=opt)
    x, y = _data()
    _, gw, _ = _grads(model, x, y)
    w = model.get_weights()[0]
    model.train_on_batch(x, y)
    if name == "adam":
        m, v = 0.1 * gw, 0.001 * gw**2
        want = w - 0.01 * np.sqrt(1 - 0.999) / (1 - 0.9) * m / (np.sqrt(v) + 1e-7)
    elif name == "rmsprop":
        want = w - 0.01 * gw / (np.sqrt(0.1 * gw**2) + 1e-7)
    elif name == "adagrad":
        want = w - 0.1 * gw / (np.sqrt(0.1 + gw**2) + 1e-7)
    else:
        vel = -0.1 * gw
        want = w + 0.9 * vel - 0.1 * gw
    np.testing.assert_allclose(model.get_weights()[0], want, rtol=1e-4, atol=1e-6)


def test_loss_functions_equal_numpy():
    """categorical (probabilities and logits), sparse categorical, binary, mse and mae."""
    p = np.array([[0.2, 0.5, 0.3], [0.1, 0.1, 0.8]], np.float32)
    t = np.array([[0, 1, 0], [0, 0, 1]], np.float32)
    logits = np.log(p) + 1.0
    fns = keras.losses
    out = K.get_session().run(
        [
            fns.categorical_crossentropy(t, p),
            fns.categorical_crossentropy(t, logits, from_logits=True),
            fns.sparse_categorical_crossentropy(np.array([1, 2]), p),
            fns.binary_crossentropy(t, p),
            fns.mse(t, p),
            fns.mae(t, p),
        ]
    )
    ce = -np.log([0.5, 0.8])
    for v in out[:3]:
        np.testing.assert_allclose(v, ce, rtol=1e-5)
    bce = -(t * np.log(p + 1e-7) + (1 - t) * np.log(1 - p + 1e-7)).mean(1)
    np.testing.assert_allclose(out[3], bce, rtol=1e-5)
    np.testing.assert_allclose(out[4], ((t - p) ** 2).mean(1), rtol=1e-6)
    np.testing.assert_allclose(out[5], np.abs(t - p).mean(1), rtol=1e-6)


def test_functional_model_reuse_and_summary_counts():
    """A two-input functional model: called on new inputs it gives the same predictions;
    summary counts its parameters."""
    a, b = keras.Input(shape=(3,)), keras.Input(shape=(2,))
    h = L.concatenate([L.Dense(4, activation="tanh")(a), b])
    out = L.Dense(1)(h)
    model = keras.Model([a, b], out)
    lines: list[str] = []
    model.summary(print_fn=lines.append)
    assert "Total params: 23" in lines and "Trainable params: 23" in lines
    assert [x.name for x in model.layers] == [
        "input_1",
        "input_2",
        "dense",
        "concatenate",
        "dense_1",
    ]
    a2, b2 = keras.Input(shape=(3,)), keras.Input(shape=(2,))
    again = model([a2, b2])
    xa, xb = _rng(6).normal(size=(4, 3)), _rng(7).normal(size=(4, 2))
    want = model.predict([xa, xb])
    got = K.get_session().run(again, {a2: xa, b2: xb})
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_sequential_summary_and_batchnorm_counts():
    """The tutorial's model: 100,480 + 1,290 parameters; BN's moving stats are non-trainable
    and fit updates them."""
    model = keras.Sequential(
        [
            L.Flatten(input_shape=(28, 28)),
            L.Dense(128, activation=tf.nn.relu),
            L.Dense(10, activation=tf.nn.softmax),
        ]
    )
    lines: list[str] = []
    model.summary(print_fn=lines.append)
    assert lines[0] == 'Model: "sequential"'
    assert any(
        x.startswith("dense (Dense)") and "(None, 128)" in x and "100480" in x for x in lines
    )
    assert "Total params: 101,770" in lines
    bn = keras.Sequential([L.BatchNormalization(input_shape=(3,))])
    bn.compile("sgd", "mse")
    assert bn.count_params() == 12 and len(bn.trainable_weights) == 2
    x = _rng(8).normal(3.0, 1.0, size=(16, 3)).astype(np.float32)
    bn.fit(x, x, batch_size=16, epochs=1, verbose=0)
    moving = bn.layers[0].get_weights()[2]
    np.testing.assert_allclose(moving, 0.01 * x.mean(0), rtol=1e-4)


def test_subclassed_model_trains_and_names_its_weights():
    """A subclassed Model's layers are tracked; its weights live under its name scope."""

    class Net(keras.Model):
        def __init__(self):
            super().__init__()
            self.hidden = L.Dense(4, activation="relu")
            self.out = L.Dense(1)

        def call(self, x):
            return self.out(self.hidden(x))

    net = Net()
    net.compile(keras.optimizers.SGD(0.05), "mse")
    x = _rng(9).normal(size=(32, 2)).astype(np.float32)
    y = x.sum(1, keepdims=True)
    hist = net.fit(x, y, epochs=4, batch_size=8, verbose=0)
    assert hist.history["loss"][-1] < hist.history["loss"][0]
    assert [w.name for w in net.weights][0] == "net/dense/kernel:0"
    assert len(net.layers) == 2


def test_save_and_load_weights_round_trip(tmp_path):
    """Weights saved (npz, even named .h5) load into a fresh model of the same shape; a model
    of another shape is refused, naming both."""
    model = _softmax_model()
    path = str(tmp_path / "w.h5")
    model.save_weights(path)
    saved = model.get_weights()
    other = _softmax_model()
    other.load_weights(path)
    for a, b in zip(other.get_weights(), saved):
        np.testing.assert_array_equal(a, b)
    with np.load(path, allow_pickle=False) as z:
        assert sorted(z.files) == ["0000/dense/000", "0000/dense/001"]
    wrong = keras.Sequential([L.Dense(3, input_shape=(5,))])
    with pytest.raises(ValueError, match=r"weight .*kernel.* has shape \(5, 3\)"):
        wrong.load_weights(path)


def test_callbacks_history_early_stopping_checkpoint_lambda(tmp_path):
    """EarlyStopping stops after `patience` epochs without improvement; ModelCheckpoint writes
    a weights file per epoch; LambdaCallback sees each epoch's logs."""
    model = _softmax_model(0.0)  # lr 0: the loss never improves
    x, y = _data(16)
    seen: list = []
    cbs = [
        keras.callbacks.EarlyStopping(monitor="loss", patience=2),
        keras.callbacks.ModelCheckpoint(str(tmp_path / "w{epoch:02d}.npz"), save_weights_only=True),
        keras.callbacks.LambdaCallback(on_epoch_end=lambda e, logs: seen.append((e, logs["loss"]))),
    ]
    hist = model.fit(x, y, epochs=10, verbose=0, callbacks=cbs, shuffle=False)
    assert hist.epoch == [0, 1, 2] and [e for e, _ in seen] == [0, 1, 2]
    names = ["checkpoint", "w01.npz", "w02.npz", "w03.npz"]  # (a TF-format name: an index)
    assert sorted(p.name for p in tmp_path.iterdir()) == names


def test_validation_split_and_tf_train_optimizer():
    """validation_split holds out the last samples (val_ metrics); a tf.train optimizer works."""
    model = keras.Sequential([L.Dense(1, input_shape=(2,))])
    model.compile(tf.train.GradientDescentOptimizer(0.1), "mse", metrics=["mae"])
    x = _rng(10).normal(size=(10, 2)).astype(np.float32)
    y = x[:, :1] * 2
    hist = model.fit(x, y, epochs=1, validation_split=0.2, verbose=0, shuffle=False)
    assert set(hist.history) == {
        "loss",
        "mean_absolute_error",
        "val_loss",
        "val_mean_absolute_error",
    }
    w, b = model.get_weights()
    pred = x[8:] @ w + b
    np.testing.assert_allclose(hist.history["val_loss"][0], np.mean((pred - y[8:]) ** 2), rtol=1e-5)


# ---- argument checks before any step (hostile review F1-F4, F9-F13) ---------------------------


def _mse_model(units=3):
    model = keras.Sequential([L.Dense(units, input_shape=(4,))])
    model.compile(keras.optimizers.SGD(0.1), "mse")
    return model


def _unchanged(model, before):
    for a, b in zip(model.get_weights(), before):
        np.testing.assert_array_equal(a, b)


def test_fit_and_evaluate_refuse_sample_counts_that_differ_before_any_step():
    """x, y and sample_weight must have one number of samples (Keras's messages); nothing is
    trained or evaluated on part of them."""
    model = _mse_model()
    before = model.get_weights()
    x = _rng(1).normal(size=(10, 4)).astype(np.float32)
    y = _rng(2).normal(size=(16, 3)).astype(np.float32)
    msg = "same number of samples as target arrays. Found 10 input samples and 16 target samples"
    for run in (lambda: model.fit(x, y, verbose=0), lambda: model.evaluate(x, y, verbose=0)):
        with pytest.raises(ValueError, match=msg):
            run()
    with pytest.raises(ValueError, match="Found 10 input samples and 6 target samples"):
        model.fit(x, y[:6], batch_size=4, verbose=0)
    for n in (30, 3):
        with pytest.raises(
            ValueError,
            match=rf"sample_weight array with shape \({n},\) for an input with shape \(10, 3\)",
        ):
            model.fit(x, y[:10], sample_weight=np.ones(n), batch_size=4, verbose=0)
    with pytest.raises(ValueError, match="sample_weight array is 1D"):
        model.fit(x, y[:10], sample_weight=np.ones((10, 1)), verbose=0)
    _unchanged(model, before)
    a, b = keras.Input(shape=(4,)), keras.Input(shape=(4,))
    two = keras.Model([a, b], L.Dense(1)(L.Add()([a, b])))
    two.compile("sgd", "mse")
    before = two.get_weights()
    with pytest.raises(ValueError, match=r"All input arrays \(x\) should have the same number"):
        two.fit([x, x[:5]], np.zeros((10, 1)), batch_size=4, verbose=0)
    _unchanged(two, before)


def test_targets_must_fit_the_output_for_their_loss():
    """mse targets of shape (n, 1) or (n,) for an output (None, 3) and integer labels for
    categorical_crossentropy are refused with Keras's messages, not broadcast."""
    model = _mse_model()
    before = model.get_weights()
    x = np.ones((10, 4), np.float32)
    for y in (np.zeros((10, 1)), np.zeros(10)):
        with pytest.raises(
            ValueError,
            match=r"target array with shape \(10, 1\) was passed for an output of shape "
            r"\(None, 3\) while using as loss `mean_squared_error`",
        ):
            model.fit(x, y, verbose=0)
    _unchanged(model, before)
    clf = _softmax_model()
    with pytest.raises(ValueError, match="`categorical_crossentropy` expects targets to be binary"):
        clf.evaluate(x, np.arange(10) % 3, verbose=0)
    loss_obj = keras.Sequential([L.Dense(3, input_shape=(4,))])
    loss_obj.compile("sgd", keras.losses.MeanSquaredError())
    with pytest.raises(ValueError, match="while using as loss `mean_squared_error`"):
        loss_obj.evaluate(x, np.zeros((10, 2)), verbose=0)
    mae = keras.Sequential([L.Dense(3, input_shape=(4,))])  # as Keras, only its key losses
    mae.compile("sgd", "mae")
    assert np.isfinite(mae.evaluate(x, np.zeros((10, 1)), verbose=0))


def test_loss_object_honours_sample_weight_as_the_string_loss():
    """A keras.losses object weights the per-sample losses as the string loss does,
    sum(w * l) / n (TF: 2.7337 weighted, 5.5008 not), or sum(w * l) with reduction "sum"."""
    x = np.random.RandomState(0).rand(10, 4).astype(np.float32)
    y = np.zeros((10, 1), np.float32)
    sw = np.r_[np.zeros(5), np.ones(5)]
    per_sample = (x.sum(1)) ** 2  # kernel of ones, bias 0
    for loss in ("mse", keras.losses.MeanSquaredError(), keras.losses.MeanSquaredError("sum")):
        model = keras.Sequential([L.Dense(1, input_shape=(4,), kernel_initializer="ones")])
        model.compile("sgd", loss)
        scale = 1.0 if getattr(loss, "reduction", "") == "sum" else 0.1  # sum, or sum / n
        weighted = model.evaluate(x, y, sample_weight=sw, verbose=0)
        np.testing.assert_allclose(weighted, scale * np.sum(sw * per_sample), rtol=1e-5)
        np.testing.assert_allclose(model.evaluate(x, y, verbose=0), scale * per_sample.sum(), 1e-5)
        if scale < 1:
            np.testing.assert_allclose(weighted, 2.7337115, rtol=1e-5)


def test_validation_data_and_split_use_their_sample_weights():
    """fit's validation_data=(x, y, w) weights val_loss by w (all zero: 0.0, as TF), and
    validation_split splits sample_weight with the data."""
    x = np.random.RandomState(0).rand(10, 4).astype(np.float32)
    y = np.ones((10, 1), np.float32)
    model = keras.Sequential([L.Dense(1, input_shape=(4,))])
    model.compile("sgd", "mse")
    hist = model.fit(x, y, validation_data=(x, y, np.zeros(10)), verbose=0)
    assert hist.history["val_loss"] == [0.0]
    hist = model.fit(x, y, sample_weight=np.r_[np.ones(8), 0, 0], validation_split=0.2, verbose=0)
    assert hist.history["val_loss"] == [0.0]
    vw = np.r_[np.zeros(5), np.full(5, 2.0)]
    hist = model.fit(x, y, validation_data=(x, y, vw), verbose=0, shuffle=False)
    w, b = model.get_weights()
    want = np.sum(vw * ((x @ w + b - y) ** 2)[:, 0]) / 10
    np.testing.assert_allclose(hist.history["val_loss"][0], want, rtol=1e-5)


def test_degenerate_batch_size_split_and_empty_data_are_refused():
    """batch_size <= 0, validation_split outside [0, 1), a split that leaves no training data
    and 0 samples raise ValueErrors (no loss of 0.0 or nan); predict on 0 samples returns an
    empty array of the output's shape."""
    model = _mse_model()
    before = model.get_weights()
    x = np.ones((10, 4), np.float32)
    y = np.ones((10, 3), np.float32)
    for bs in (-1, 0, 2.5):
        with pytest.raises(ValueError, match="batch_size must be a positive integer"):
            model.fit(x, y, batch_size=bs, verbose=0)
    for split in (-0.5, 1.0):
        with pytest.raises(ValueError, match=r"validation_split must be in \[0, 1\)"):
            model.fit(x, y, validation_split=split, verbose=0)
    with pytest.raises(ValueError, match="Empty training data.*validation_split=0.99"):
        model.fit(x, y, validation_split=0.99, verbose=0)
    with pytest.raises(ValueError, match="Empty training data"):
        model.fit(x[:0], y[:0], verbose=0)
    with pytest.raises(ValueError, match="Empty training data"):
        model.evaluate(x[:0], y[:0], verbose=0)
    with pytest.raises(ValueError, match="validation_data holds 0 samples"):
        model.fit(x, y, validation_data=(x[:0], y[:0]), verbose=0)
    _unchanged(model, before)
    out = model.predict(x[:0])
    assert out.shape == (0, 3) and out.dtype == np.float32


def test_best_of_checkpoint_and_early_stopping_starts_at_inf_so_nan_is_never_best(tmp_path):
    """With val_loss nan, 0.9, 0.5, 0.2, 0.1: ModelCheckpoint(save_best_only) writes at epochs
    1-4, not 0; EarlyStopping(patience=1) runs all 5 epochs (as TF)."""
    path = tmp_path / "best.npz"
    vals = iter([float("nan"), 0.9, 0.5, 0.2, 0.1])
    written: list = []

    class FakeVal(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            logs["val_loss"] = next(vals)
            if path.exists():
                path.unlink()

    class Spy(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if path.exists():
                written.append(epoch)

    ck = keras.callbacks.ModelCheckpoint(str(path), save_best_only=True, save_weights_only=True)
    es = keras.callbacks.EarlyStopping(monitor="val_loss", patience=1)
    model = keras.Sequential([L.Dense(1, input_shape=(1,))])
    model.compile("sgd", "mse")
    hist = model.fit(
        np.ones((4, 1)), np.ones((4, 1)), epochs=5, callbacks=[FakeVal(), ck, es, Spy()], verbose=0
    )
    assert hist.epoch == [0, 1, 2, 3, 4] and written == [1, 2, 3, 4]
    assert ck.best == 0.1 and es.best == 0.1
    acc = keras.callbacks.ModelCheckpoint(str(path), monitor="val_acc", save_best_only=True)
    assert acc.best == -np.inf


def test_load_weights_checks_every_layer_before_assigning_any(tmp_path):
    """A file whose first layer fits and whose second does not changes no weight."""
    src = keras.Sequential([L.Dense(5, input_shape=(4,)), L.Dense(3)])
    path = str(tmp_path / "w.h5")
    src.save_weights(path)
    dst = keras.Sequential([L.Dense(5, input_shape=(4,)), L.Dense(2)])
    before = dst.get_weights()
    with pytest.raises(ValueError, match=r"w.h5: layer 'dense_3'.*\(5, 2\).*\(5, 3\)"):
        dst.load_weights(path)
    _unchanged(dst, before)
    named = keras.Sequential(
        [L.Dense(5, input_shape=(4,), name="d1"), L.Dense(2, name="d2")], name="named"
    )
    src_named = keras.Sequential(
        [L.Dense(5, input_shape=(4,), name="d1"), L.Dense(3, name="d2")], name="src_named"
    )
    src_named.save_weights(path)
    before = named.get_weights()
    with pytest.raises(ValueError, match=r"layer 'd2'"):
        named.load_weights(path, by_name=True)
    _unchanged(named, before)


def test_load_weights_of_a_foreign_file_says_what_is_wrong(tmp_path):
    """A foreign npz, an .npy, a text file, an empty and a truncated file: an OSError or
    ValueError naming the file and the problem."""
    model = _mse_model()
    good = str(tmp_path / "good.h5")
    model.save_weights(good)
    np.savez(tmp_path / "foreign.npz", a=np.zeros(3))
    np.save(tmp_path / "plain.npy", np.zeros(3))
    (tmp_path / "text.h5").write_text("hello\n")
    (tmp_path / "empty.h5").write_bytes(b"")
    (tmp_path / "trunc.h5").write_bytes(open(good, "rb").read()[:100])
    cases = [
        ("foreign.npz", ValueError, r"foreign.npz is an npz archive but not one written by save"),
        ("plain.npy", OSError, r"plain.npy is not a weights file .* single numpy array"),
        ("text.h5", OSError, r"text.h5 is not a weights file .* not a zip archive"),
        ("empty.h5", OSError, r"empty.h5 is not a weights file .* it is empty"),
        ("trunc.h5", OSError, r"trunc.h5 is truncated or corrupt"),
    ]
    before = model.get_weights()
    for name, err, msg in cases:
        with pytest.raises(err, match=msg):
            model.load_weights(str(tmp_path / name))
    _unchanged(model, before)


def test_bad_validation_data_missing_dict_input_and_lr_schedule_messages():
    """validation_data of one item, predict with a dict missing an input and a schedule that
    returns no float raise Keras's ValueErrors (before any step)."""
    x = np.ones((10, 4), np.float32)
    model = _mse_model(1)
    before = model.get_weights()
    with pytest.raises(ValueError, match="must contain either 2 items"):
        model.fit(x, np.zeros((10, 1)), validation_data=(x,), verbose=0)
    _unchanged(model, before)
    a = keras.Input(shape=(4,), name="a")
    f = keras.Model(a, L.Dense(1)(a))
    with pytest.raises(
        ValueError, match=r"No data provided for \"a\". Need data for each key in: \['a'\]"
    ):
        f.predict({"b": x})
    np.testing.assert_allclose(f.predict({"a": x}), f.predict(x))
    for bad in (None, 1, "0.1"):
        sched = keras.callbacks.LearningRateScheduler((lambda v: lambda epoch: v)(bad))
        with pytest.raises(ValueError, match=f'"schedule" function should be float. Got: {bad}'):
            model.fit(x, np.zeros((10, 1)), callbacks=[sched], verbose=0)
    _unchanged(model, before)
    sched = keras.callbacks.LearningRateScheduler(lambda epoch: 0.5)
    model.fit(x, np.zeros((10, 1)), callbacks=[sched], verbose=0)
    np.testing.assert_allclose(K.get_value(model.optimizer.lr), 0.5)


# ---- backend, utils, errors ------------------------------------------------------------------


def test_backend_values_and_utils():
    """get/set_value on a variable, K.function, to_categorical, floatx and epsilon."""
    v = K.variable(np.ones((2, 2)), name="v")
    K.set_value(v, [[1, 2], [3, 4]])
    np.testing.assert_array_equal(K.get_value(v), [[1, 2], [3, 4]])
    x = K.placeholder(shape=(None, 2))
    f = K.function([x], [K.sum(x * 2.0, axis=1)])
    np.testing.assert_array_equal(f([np.ones((3, 2), np.float32)])[0], [4, 4, 4])
    np.testing.assert_array_equal(keras.utils.to_categorical([2, 0], 3), [[0, 0, 1], [1, 0, 0]])
    assert (K.floatx(), K.epsilon(), K.image_data_format()) == ("float32", 1e-7, "channels_last")


def test_datasets_without_cache_say_there_is_no_network(monkeypatch, tmp_path):
    """load_data raises, naming the cache path and telling how to pass arrays."""
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    with pytest.raises(OSError, match="does not download.*pass them to model.fit"):
        keras.datasets.fashion_mnist.load_data()
    np.savez(
        tmp_path / "mnist.npz",
        x_train=np.zeros((2, 28, 28)),
        y_train=np.zeros(2),
        x_test=np.zeros((1, 28, 28)),
        y_test=np.zeros(1),
    )
    (os_dir := tmp_path / "datasets").mkdir()
    (tmp_path / "mnist.npz").rename(os_dir / "mnist.npz")
    (xt, _), (xs, _) = keras.datasets.mnist.load_data()
    assert xt.shape == (2, 28, 28) and xs.shape == (1, 28, 28)


def test_errors_name_the_layer_and_shapes():
    """A layer called on an incompatible input, fit on arrays of the wrong shape, an unknown
    activation and fit before compile raise errors that say what is wrong."""
    dense = L.Dense(2)
    dense(tf.placeholder(tf.float32, [None, 4]))
    with pytest.raises(ValueError, match=r"layer 'dense'.*\(None, 4\).*\(None, 5\)"):
        dense(tf.placeholder(tf.float32, [None, 5]))
    model = keras.Sequential([L.Flatten(input_shape=(28, 28)), L.Dense(10)])
    model.compile("adam", "sparse_categorical_crossentropy")
    with pytest.raises(ValueError, match=r"expected flatten_input to have shape \(28, 28\)"):
        model.fit(np.zeros((4, 27, 28)), np.zeros(4), verbose=0)
    with pytest.raises(ValueError, match="unknown activation 'relux'"):
        L.Dense(3, activation="relux")
    fresh = keras.Sequential([L.Dense(1, input_shape=(2,))])
    with pytest.raises(RuntimeError, match="must be compiled"):
        fresh.fit(np.zeros((2, 2)), np.zeros(2), verbose=0)
    with pytest.raises(ValueError, match=r"layer 'lstm' \(LSTM\) takes inputs \[batch, time"):
        L.LSTM(2)(tf.placeholder(tf.float32, [None, 3]))


def test_module_paths_of_tensorflow_keras():
    """`from tensorflow.keras.layers import Dense` and tensorflow.python.keras paths work."""
    import importlib

    assert importlib.import_module("hetbed.compat.v1.keras.layers").Dense is L.Dense
    assert importlib.import_module("hetbed.compat.v1.python.keras.backend") is K
    assert tf.keras is keras


# ---- keras.preprocessing ------------------------------------------------------------------------


def test_pad_sequences_as_keras():
    """Keras's documented results: int32, padded and cut at the front unless told otherwise."""
    pad = keras.preprocessing.sequence.pad_sequences
    seqs = [[1], [2, 3], [4, 5, 6]]
    a = pad(seqs)
    assert a.dtype == np.int32
    assert a.tolist() == [[0, 0, 1], [0, 2, 3], [4, 5, 6]]
    assert pad(seqs, value=-1).tolist() == [[-1, -1, 1], [-1, 2, 3], [4, 5, 6]]
    assert pad(seqs, padding="post").tolist() == [[1, 0, 0], [2, 3, 0], [4, 5, 6]]
    assert pad(seqs, maxlen=2).tolist() == [[0, 1], [2, 3], [5, 6]]
    assert pad(seqs, maxlen=2, truncating="post").tolist() == [[0, 1], [2, 3], [4, 5]]
    assert pad([[1, 2], []], maxlen=3, dtype="float32", value=0.5).tolist() == [
        [0.5, 1, 2],
        [0.5, 0.5, 0.5],
    ]
    assert pad([[[1, 2]], [[3, 4], [5, 6]]]).shape == (2, 2, 2)  # items' own shape kept
    assert keras.utils.pad_sequences(seqs).tolist() == a.tolist()
    with pytest.raises(ValueError, match='Padding type "mid" not understood'):
        pad(seqs, padding="mid")
    with pytest.raises(ValueError, match="dtype=object"):
        pad(seqs, value="x")
    from hetbed.compat.v1.keras.preprocessing.sequence import pad_sequences

    assert pad_sequences is pad


def test_tokenizer_and_text_helpers():
    text = keras.preprocessing.text
    assert text.text_to_word_sequence("This is a sample, sentence.") == [
        "this",
        "is",
        "a",
        "sample",
        "sentence",
    ]
    tok = text.Tokenizer(num_words=4, oov_token="<unk>")
    tok.fit_on_texts(["the cat sat", "the dog", "the cat"])
    assert tok.word_index == {"<unk>": 1, "the": 2, "cat": 3, "sat": 4, "dog": 5}
    assert tok.texts_to_sequences(["the cat ate the dog"]) == [[2, 3, 1, 2, 1]]
    assert tok.sequences_to_texts([[2, 3, 4]]) == ["the cat <unk>"]
    m = tok.texts_to_matrix(["the cat the"], mode="count")
    assert m.shape == (1, 4) and m.tolist() == [[0, 0, 2, 1]]
    assert tok.texts_to_matrix(["the cat the"], mode="freq").tolist() == [[0, 0, 2 / 3, 1 / 3]]
    idf_the = np.log(1 + 3 / (1 + 3))
    np.testing.assert_allclose(
        tok.texts_to_matrix(["the the"], mode="tfidf")[0, 2], (1 + np.log(2)) * idf_the
    )
    again = text.tokenizer_from_json(tok.to_json())
    assert again.word_index == tok.word_index and again.index_word == tok.index_word
    # md5 hashing is stable: int(md5(word).hexdigest(), 16) % (n - 1) + 1
    assert text.hashing_trick("Cat dog", 7, hash_function="md5") == [
        int(__import__("hashlib").md5(w.encode()).hexdigest(), 16) % 6 + 1 for w in ("cat", "dog")
    ]
    assert all(1 <= i < 5 for i in text.one_hot("a b c d e", 5))


def test_embedding_first_layer_implies_ids_of_any_length():
    """TF 1.13+: Embedding without input_shape/input_length is built as input_shape=(None,), so
    the Sequential model has its weights, shapes and summary before any data."""
    model = keras.Sequential()
    model.add(L.Embedding(10000, 16))
    model.add(L.GlobalAveragePooling1D())
    model.add(L.Dense(16, activation=tf.nn.relu))
    model.add(L.Dense(1, activation=tf.nn.sigmoid))
    assert model.built and model.count_params() == 160289 and len(model.weights) == 5
    assert [tuple(x.output_shape) for x in model.layers] == [
        (None, None, 16),
        (None, 16),
        (None, 16),
        (None, 1),
    ]
    assert model.input.shape.as_list() == [None, None] and model.input_shape == (None, None)
    assert model.output_shape == (None, 1)
    lines: list = []
    model.summary(print_fn=lines.append)
    assert any("(None, None, 16)" in x and "160000" in x for x in lines)
    assert "Total params: 160,289" in lines
    fixed = keras.Sequential([L.Embedding(50, 4, input_length=7), L.Flatten(), L.Dense(1)])
    assert fixed.input_shape == (None, 7) and fixed.count_params() == 229
    model.compile("adam", "binary_crossentropy")
    model.fit(np.array([[1, 2, 3, 0], [4, 5, 0, 0]]), np.array([1, 0]), verbose=0)


def test_tf_format_weights_are_the_folders_latest_checkpoint(tmp_path, monkeypatch):
    """save_weights/ModelCheckpoint to a TF-format name (save_and_restore_models) write the
    folder's `checkpoint` index, listing only that file as TF's; load_weights reads exactly the
    path tf.train.latest_checkpoint returns. An .h5 name writes no index."""
    monkeypatch.chdir(tmp_path)
    x, y = _data(16)
    model = _softmax_model()
    cb = keras.callbacks.ModelCheckpoint("training_2/cp-{epoch:04d}.ckpt", save_weights_only=True)
    model.fit(x, y, epochs=3, verbose=0, callbacks=[cb], shuffle=False)
    latest = tf.train.latest_checkpoint("training_2")
    assert latest == "training_2/cp-0003.ckpt"
    state = tf.train.get_checkpoint_state("training_2")
    assert state.all_model_checkpoint_paths == ["training_2/cp-0003.ckpt"]
    fresh = _softmax_model()
    fresh.load_weights(latest)
    for a, b in zip(fresh.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)
    model.save_weights("./checkpoints/my_checkpoint")
    assert tf.train.latest_checkpoint("./checkpoints").endswith("checkpoints/my_checkpoint")
    model.save_weights("bare.ckpt")  # the current folder's index
    assert tf.train.latest_checkpoint(".") == "./bare.ckpt"
    _softmax_model().load_weights(tf.train.latest_checkpoint("."))
    model.save_weights("h5/w.h5")
    model.save_weights("h5/w2", save_format="h5")
    assert sorted(p.name for p in (tmp_path / "h5").iterdir()) == ["w.h5", "w2"]
    assert tf.train.latest_checkpoint("h5") is None
    with pytest.raises(ValueError, match="looks like an HDF5 file"):
        model.save_weights("x.h5", save_format="tf")
    with pytest.raises(ValueError, match="Unknown format"):
        model.save_weights("x", save_format="pickle")


def test_load_weights_of_tf_checkpoints_says_so(tmp_path):
    """A TensorFlow-written prefix (only prefix.index there) and a tf.train.Saver checkpoint
    are named as such."""
    model = _mse_model()
    (tmp_path / "tfw.index").write_bytes(b"\0")
    with pytest.raises(FileNotFoundError, match="tfw.index is a TensorFlow-written checkpoint"):
        model.load_weights(str(tmp_path / "tfw"))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        path = tf.train.Saver().save(sess, str(tmp_path / "saver.ckpt"))
    with pytest.raises(OSError, match="is a tf.train.Saver checkpoint"):
        model.load_weights(path)


def test_whole_sequential_model_save_and_load(tmp_path):
    """model.save / keras.models.load_model: the same layers, weights, predictions and compile
    arguments (the optimizer by its config), in one npz file whatever its name."""
    import hetbed.compat.v1 as tf
    from hetbed.compat.v1 import keras

    rng = np.random.RandomState(0)
    x = rng.randint(0, 20, (32, 6))
    y = rng.randint(0, 2, 32).astype(np.float32)
    with tf.Graph().as_default():
        model = keras.Sequential(
            [
                keras.layers.Embedding(20, 4, input_length=6),
                keras.layers.Conv1D(
                    3, 2, activation=tf.nn.relu, kernel_regularizer=keras.regularizers.l2(0.01)
                ),
                keras.layers.LSTM(5),
                keras.layers.Dropout(0.1),
                keras.layers.Dense(1, activation="sigmoid"),
            ]
        )
        model.compile(
            keras.optimizers.SGD(lr=0.05, momentum=0.9), "binary_crossentropy", metrics=["accuracy"]
        )
        model.fit(x, y, epochs=1, verbose=0)
        want, ev = model.predict(x), model.evaluate(x, y, verbose=0)
        path = str(tmp_path / "m.h5")
        model.save(path)
        back = keras.models.load_model(path)
        assert [type(a) for a in back.layers] == [type(a) for a in model.layers]
        assert back.weights and back.optimizer.momentum == 0.9 and back.optimizer._lr_value == 0.05
        np.testing.assert_allclose(back.predict(x), want, rtol=1e-6)
        np.testing.assert_allclose(back.evaluate(x, y, verbose=0), ev, rtol=1e-6)
        back.fit(x, y, epochs=1, verbose=0)  # compiled again: it trains
        with pytest.raises(NotImplementedError, match="lambda"):
            keras.Sequential(
                [keras.layers.Dense(2, activation=lambda t: t, input_shape=(3,))]
            ).save(path)
        inp = keras.layers.Input((3,))
        with pytest.raises(NotImplementedError, match="graph ops between its layers"):
            keras.Model(inp, keras.layers.Dense(2)(inp) * 2.0).save(path)

        class Sub(keras.Model):
            def __init__(self):
                super().__init__()
                self.d = keras.layers.Dense(2)

            def call(self, t):
                return self.d(t)

        sub = Sub()
        sub(inp)
        with pytest.raises(NotImplementedError, match="subclassed"):
            sub.save(path)
        np.testing.assert_allclose(
            keras.models.load_model(path).predict(x), want, rtol=1e-6
        )  # kept
        with pytest.raises(ValueError, match="holds no model"):
            model.save_weights(str(tmp_path / "w.h5"))
            keras.models.load_model(str(tmp_path / "w.h5"))


def test_whole_functional_model_save_and_load(tmp_path):
    """A functional model with two inputs, two outputs, a layer called twice, dropout and batch
    norm: load_model gives the same predictions and evaluation, in the graph it was saved from
    and in a fresh one, and it trains again."""
    rng = np.random.RandomState(1)
    xa, xb = rng.randn(32, 4).astype("f"), rng.randn(32, 4).astype("f")
    ya, yb = rng.randint(0, 3, 32), rng.randn(32, 1).astype("f")
    path = str(tmp_path / "fm.h5")
    with tf.Graph().as_default():
        a, b = keras.Input(shape=(4,), name="a"), keras.Input(shape=(4,), name="b")
        shared = keras.layers.Dense(5, activation="tanh", name="shared")
        x = keras.layers.Concatenate()([shared(a), shared(b), keras.layers.Subtract()([a, b])])
        x = keras.layers.Dropout(0.3)(x)
        out_a = keras.layers.Dense(3, activation="softmax", name="cls")(x)
        out_b = keras.layers.Dense(1, name="reg")(keras.layers.BatchNormalization()(x))
        model = keras.Model([a, b], [out_a, out_b], name="two_heads")
        model.compile(keras.optimizers.Adam(0.01), ["sparse_categorical_crossentropy", "mse"])
        model.fit([xa, xb], [ya, yb], epochs=2, verbose=0)
        want = model.predict([xa, xb])
        ev = model.evaluate([xa, xb], [ya, yb], verbose=0)
        model.save(path)
        same = keras.models.load_model(path)
        for got, w in zip(same.predict([xa, xb]), want):
            np.testing.assert_allclose(got, w, rtol=1e-6)
    with tf.Graph().as_default():
        back = keras.models.load_model(path)
        assert [layer.name for layer in back.layers] == [layer.name for layer in model.layers]
        assert len(back.weights) == len(model.weights)  # the shared layer's kernel once
        for got, w in zip(back.predict([xa, xb]), want):
            np.testing.assert_allclose(got, w, rtol=1e-6)
        np.testing.assert_allclose(back.evaluate([xa, xb], [ya, yb], verbose=0), ev, rtol=1e-5)
        before = back.get_layer("shared").get_weights()[0].copy()
        back.fit([xa, xb], [ya, yb], epochs=1, verbose=0)
        assert not np.allclose(back.get_layer("shared").get_weights()[0], before)
