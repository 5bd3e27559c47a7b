"""In-graph data parallelism: towers on several devices, gradients averaged on a parameter
device or by all-reduce, applied once."""

import numpy as np
import pytest

import hetbed as hb
from hetbed.runtime.ops.collective import all_reduce
from hetbed.scenarios import datasets

HIDDEN = 64


def _init_params(seed=0):
    rng = np.random.default_rng(seed)
    return [
        (rng.standard_normal((64, HIDDEN)) * np.sqrt(2 / 64)).astype(np.float32),
        np.zeros(HIDDEN, np.float32),
        (rng.standard_normal((HIDDEN, 10)) * np.sqrt(1 / HIDDEN)).astype(np.float32),
        np.zeros(10, np.float32),
    ]


def _tower_loss(x, y, params):
    w1, b1, w2, b2 = params
    h = hb.nn.relu(hb.matmul(x, w1) + b1)
    logits = hb.matmul(h, w2) + b2
    loss = hb.reduce_mean(hb.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    return loss, logits


def build(n_dev, mode, lr=0.5):
    """Params on cpu:0; tower i on cpu:i; mean gradient by 'ps' (add_n on cpu:0) or 'allreduce'."""
    x = hb.placeholder(hb.float32, [None, 64])
    y = hb.placeholder(hb.int32, [None])
    with hb.device("/cpu:0"):
        params = [hb.Variable(p, name=f"p{i}") for i, p in enumerate(_init_params())]
    xs = hb.split(x, n_dev) if n_dev > 1 else [x]
    ys = hb.split(y, n_dev) if n_dev > 1 else [y]
    tower_grads = []
    for i in range(n_dev):
        with hb.device(f"/cpu:{i}"), hb.name_scope(f"tower_{i}"):
            loss, _ = _tower_loss(xs[i], ys[i], params)
            tower_grads.append(hb.gradients(loss, params))
    if mode == "ps" or n_dev == 1:
        with hb.device("/cpu:0"):
            grads = [hb.add_n([tg[k] for tg in tower_grads]) / float(n_dev) for k in range(4)]
    else:
        grads = [all_reduce([tg[k] for tg in tower_grads], "mean")[0] for k in range(4)]
    with hb.device("/cpu:0"):
        train = hb.group(*[hb.assign_sub(p, g * lr) for p, g in zip(params, grads)])
        _, logits = _tower_loss(x, y, params)
        correct = hb.reduce_mean(
            hb.cast(hb.equal(hb.cast(hb.argmax(logits, 1), hb.int32), y), hb.float32)
        )
    return x, y, grads, train, correct


@pytest.mark.parametrize("n_dev,mode", [(2, "ps"), (4, "ps"), (2, "allreduce"), (4, "allreduce")])
def test_averaged_gradient_equals_single_device_gradient(n_dev, mode):
    """The mean of tower gradients equals the one-device gradient of the whole batch (1e-5)."""
    data = datasets.digits()
    xb, yb = data.x_train[:64], data.y_train[:64]
    with hb.Graph().as_default():
        x, y, grads, _, _ = build(1, "ps")
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            want = s.run(grads, {x: xb, y: yb})
    with hb.Graph().as_default():
        x, y, grads, _, _ = build(n_dev, mode)
        with hb.Session(config=hb.ConfigProto(device_count={"CPU": n_dev})) as s:
            s.run(hb.global_variables_initializer())
            got = s.run(grads, {x: xb, y: yb})
            devices = set(s.placement().device)
    assert len(devices) == n_dev
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _train(n_dev, mode, epochs=30):
    data = datasets.digits()
    rng = np.random.default_rng(1)
    with hb.Graph().as_default():
        x, y, _, train, correct = build(n_dev, mode)
        with hb.Session(config=hb.ConfigProto(device_count={"CPU": n_dev})) as s:
            s.run(hb.global_variables_initializer())
            for _ in range(epochs):
                for xb, yb in datasets.batches(data.x_train, data.y_train, 64, rng):
                    s.run(train, {x: xb, y: yb})
            return float(s.run(correct, {x: data.x_test, y: data.y_test}))


def test_towers_train_to_the_same_accuracy():
    """MLP on digits: 2 and 4 towers reach the accuracy of one device (same updates)."""
    one = _train(1, "ps")
    assert one >= 0.97
    assert abs(_train(2, "ps") - one) <= 0.005
    assert abs(_train(4, "allreduce") - one) <= 0.005
