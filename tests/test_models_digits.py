"""Real models on real data: scikit-learn's digits trained with hetbed on the CPU."""

import numpy as np

import hetbed as hb
from hetbed.scenarios import datasets
from hetbed.scenarios.models import digits as models


def train(builder, image=False, epochs=20, batch=32, lr=0.01):
    data = datasets.digits(image=image)
    rng = np.random.default_rng(0)
    with hb.Graph().as_default():
        m = models.classifier(builder, image=image, optimizer=hb.train.AdamOptimizer(lr))
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            first = s.run(m.loss, {m.x: data.x_train, m.y: data.y_train})
            for _ in range(epochs):
                for xb, yb in datasets.batches(data.x_train, data.y_train, batch, rng):
                    s.run(m.train_op, {m.x: xb, m.y: yb})
            last = s.run(m.loss, {m.x: data.x_train, m.y: data.y_train})
            acc = s.run(m.accuracy, {m.x: data.x_test, m.y: data.y_test})
    return float(first), float(last), float(acc)


def test_softmax_regression_learns_digits():
    """Softmax regression starts at chance (loss ln 10) and reaches >= 93% test accuracy."""
    first, last, acc = train(models.softmax_regression)
    assert abs(first - np.log(10)) < 1e-5  # zero weights: uniform prediction
    assert last < 0.2 and acc >= 0.93


def test_mlp_reaches_97_percent():
    """The MLP reaches at least 97% test accuracy with fixed seeds."""
    _, last, acc = train(models.mlp, epochs=40, lr=0.001)
    assert acc >= 0.97, acc


def test_cnn_reaches_97_percent():
    """The small CNN reaches at least 97% test accuracy with fixed seeds.

    At lr 0.003: at Adam's default 0.01 the outcome hinged on float rounding (seed 0 gave 95.8%,
    98.2% or 99.1% with conv kernels that agree to 1e-6); at 0.003 those kernels give 98.7%."""
    _, last, acc = train(models.cnn, image=True, epochs=12, lr=0.003)
    assert acc >= 0.97, acc
