"""Small models for scikit-learn's 8x8 digits: softmax regression, an MLP and a CNN.

Each builder takes the input placeholder and returns logits; ``classifier`` wraps one into a
training graph (loss, train op, accuracy) with a seeded initialisation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import hetbed as hb


def softmax_regression(x: Any) -> Any:
    """Logits of a linear model on the 64 pixel features."""
    return hb.layers.dense(x, 10, kernel_initializer=hb.zeros_initializer(), name="linear")


def mlp(x: Any, hidden: tuple[int, ...] = (128, 64)) -> Any:
    """Logits of a ReLU MLP on the 64 pixel features."""
    h = x
    for i, n in enumerate(hidden):
        h = hb.layers.dense(h, n, activation=hb.nn.relu, name=f"hidden{i}")
    return hb.layers.dense(h, 10, name="logits")


def cnn(x: Any) -> Any:
    """Logits of a small CNN on (N, 8, 8, 1) images: conv-pool-conv-dense."""
    h = hb.layers.conv2d(x, 16, 3, padding="same", activation=hb.nn.relu, name="conv1")
    h = hb.layers.max_pooling2d(h, 2, 2)
    h = hb.layers.conv2d(h, 32, 3, padding="same", activation=hb.nn.relu, name="conv2")
    h = hb.layers.flatten(h)
    h = hb.layers.dense(h, 64, activation=hb.nn.relu, name="fc")
    return hb.layers.dense(h, 10, name="logits")


@dataclass
class Classifier:
    x: Any
    y: Any
    logits: Any
    loss: Any
    train_op: Any
    accuracy: Any


def classifier(
    builder: Any, image: bool = False, optimizer: Any = None, seed: int = 0
) -> Classifier:
    """A training graph around ``builder`` in the default graph (Adam, lr 0.01, by default)."""
    hb.set_random_seed(seed)
    shape = [None, 8, 8, 1] if image else [None, 64]
    x = hb.placeholder(hb.float32, shape, name="x")
    y = hb.placeholder(hb.int32, [None], name="y")
    logits = builder(x)
    loss = hb.reduce_mean(hb.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    opt = optimizer or hb.train.AdamOptimizer(0.01)
    train_op = opt.minimize(loss, global_step=hb.train.get_or_create_global_step())
    pred = hb.cast(hb.argmax(logits, 1), hb.int32)
    accuracy = hb.reduce_mean(hb.cast(hb.equal(pred, y), hb.float32))
    return Classifier(x, y, logits, loss, train_op, accuracy)
