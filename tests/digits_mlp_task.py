"""The digits MLP that the real-process tests train: 64-256-10, inputs standardized, L2 1e-3,
Adam with the learning rate decaying from 0.01 to 0.0005 over the run, variables placed over the
PS tasks by ``replica_device_setter``. Task scripts import it from their own directory (the
tests copy this file next to them)."""

from __future__ import annotations

from types import SimpleNamespace

import hetbed as hb
from hetbed.scenarios import datasets


def build(cluster, index: int, last_step: int) -> SimpleNamespace:
    """The graph (seeded) and its pieces: g, setter (the device function), step, x, y, w1, b1, w2, b2, logits, loss, opt (the
    Adam optimizer, not yet applied), acc, and the data (data, x_train, x_test)."""
    data = datasets.digits()
    mean, std = data.x_train.mean(0), data.x_train.std(0) + 0.1
    g = hb.Graph()
    g.seed = 1
    setter = hb.train.replica_device_setter(
        cluster=cluster, worker_device=f"/job:worker/task:{index}"
    )
    with g.as_default(), hb.device(setter):
        step = hb.train.get_or_create_global_step()
        x = hb.placeholder(hb.float32, [None, 64], name="x")
        y = hb.placeholder(hb.int32, [None], name="y")
        w1 = hb.Variable(hb.truncated_normal([64, 256], stddev=0.125), name="w1")
        b1 = hb.Variable(hb.zeros([256]), name="b1")
        w2 = hb.Variable(hb.truncated_normal([256, 10], stddev=0.0625), name="w2")
        b2 = hb.Variable(hb.zeros([10]), name="b2")
        logits = hb.matmul(hb.nn.relu(hb.matmul(x, w1) + b1), w2) + b2
        xent = hb.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
        loss = hb.reduce_mean(xent) + 1e-3 * (hb.nn.l2_loss(w1) + hb.nn.l2_loss(w2))
        opt = hb.train.AdamOptimizer(hb.train.exponential_decay(0.01, step, last_step, 0.05))
        hit = hb.equal(hb.cast(hb.argmax(logits, 1), hb.int32), y)
        acc = hb.reduce_mean(hb.cast(hit, hb.float32))
    return SimpleNamespace(
        g=g,
        setter=setter,
        step=step,
        x=x,
        y=y,
        w1=w1,
        b1=b1,
        w2=w2,
        b2=b2,
        logits=logits,
        loss=loss,
        opt=opt,
        acc=acc,
        data=data,
        x_train=(data.x_train - mean) / std,
        x_test=(data.x_test - mean) / std,
    )
