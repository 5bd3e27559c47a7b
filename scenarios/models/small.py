"""Small training graphs used to check the simulator against the real executor: an MLP, a CNN,
an embedding model with about a million parameters, and an unrolled LSTM-style cell.

Each ``build_*`` adds a full training step (forward, gradients, SGD update) to the default graph
and returns ``(train_op, feed_dict)`` with seeded random inputs of the given batch size.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import hetbed as hb


def _sgd(loss: Any, lr: float = 0.01) -> Any:
    return hb.train.GradientDescentOptimizer(lr).minimize(loss)


def _ce(logits: Any, labels: Any) -> Any:
    return hb.reduce_mean(
        hb.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    )


def build_mlp(batch: int = 128, sizes: tuple[int, ...] = (784, 512, 512, 10), seed: int = 0):
    rng = np.random.default_rng(seed)
    x = hb.placeholder(hb.float32, [None, sizes[0]], name="x")
    y = hb.placeholder(hb.int32, [None], name="y")
    h = x
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        w = hb.Variable(
            (rng.standard_normal((a, b)) * np.sqrt(2 / a)).astype(np.float32), name=f"w{i}"
        )
        bias = hb.Variable(np.zeros(b, np.float32), name=f"b{i}")
        h = hb.nn.bias_add(hb.matmul(h, w), bias)
        if i < len(sizes) - 2:
            h = hb.nn.relu(h)
    feed = {
        x: rng.standard_normal((batch, sizes[0])).astype(np.float32),
        y: rng.integers(0, sizes[-1], batch).astype(np.int32),
    }
    return _sgd(_ce(h, y)), feed


def build_cnn(batch: int = 32, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = hb.placeholder(hb.float32, [None, 28, 28, 1], name="x")
    y = hb.placeholder(hb.int32, [None], name="y")

    def var(shape, fan_in):
        return hb.Variable((rng.standard_normal(shape) * np.sqrt(2 / fan_in)).astype(np.float32))

    h = hb.nn.relu(hb.nn.conv2d(x, var((5, 5, 1, 16), 25), [1, 1, 1, 1], "SAME"))
    h = hb.nn.max_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
    h = hb.nn.relu(hb.nn.conv2d(h, var((5, 5, 16, 32), 400), [1, 1, 1, 1], "SAME"))
    h = hb.nn.max_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
    h = hb.reshape(h, [-1, 7 * 7 * 32])
    h = hb.nn.relu(hb.matmul(h, var((7 * 7 * 32, 128), 7 * 7 * 32)))
    logits = hb.matmul(h, var((128, 10), 128))
    feed = {
        x: rng.standard_normal((batch, 28, 28, 1)).astype(np.float32),
        y: rng.integers(0, 10, batch).astype(np.int32),
    }
    return _sgd(_ce(logits, y)), feed


def build_embedding(
    batch: int = 256, vocab: int = 16384, dim: int = 64, bag: int = 8, seed: int = 0
):
    """A bag-of-ids classifier: 16,384 x 64 embedding (1.05M parameters), sparse gradient."""
    rng = np.random.default_rng(seed)
    ids = hb.placeholder(hb.int32, [None, bag], name="ids")
    y = hb.placeholder(hb.int32, [None], name="y")
    emb = hb.Variable(
        (rng.standard_normal((vocab, dim)) * 0.05).astype(np.float32), name="embedding"
    )
    h = hb.reduce_mean(hb.nn.embedding_lookup(emb, ids), axis=1)
    w = hb.Variable((rng.standard_normal((dim, 32)) * 0.1).astype(np.float32), name="w")
    logits = hb.matmul(hb.nn.relu(h), w)
    feed = {
        ids: rng.integers(0, vocab, (batch, bag)).astype(np.int32),
        y: rng.integers(0, 32, batch).astype(np.int32),
    }
    return _sgd(_ce(logits, y)), feed


def build_lstm(
    batch: int = 64, steps: int = 10, n_in: int = 64, n_hidden: int = 128, seed: int = 0
):
    """An LSTM cell unrolled over ``steps`` time steps, classifying from the last hidden state."""
    rng = np.random.default_rng(seed)
    xs = hb.placeholder(hb.float32, [None, steps, n_in], name="xs")
    y = hb.placeholder(hb.int32, [None], name="y")
    w = hb.Variable(
        (rng.standard_normal((n_in + n_hidden, 4 * n_hidden)) * 0.05).astype(np.float32),
        name="lstm_w",
    )
    b = hb.Variable(np.zeros(4 * n_hidden, np.float32), name="lstm_b")
    h = hb.zeros([batch, n_hidden])
    c = hb.zeros([batch, n_hidden])
    for t in range(steps):
        gates = hb.nn.bias_add(hb.matmul(hb.concat([xs[:, t, :], h], 1), w), b)
        i, f, o, g = hb.split(gates, 4, axis=1)
        c = hb.sigmoid(f) * c + hb.sigmoid(i) * hb.tanh(g)
        h = hb.sigmoid(o) * hb.tanh(c)
    w_out = hb.Variable(
        (rng.standard_normal((n_hidden, 10)) * 0.1).astype(np.float32), name="w_out"
    )
    feed = {
        xs: rng.standard_normal((batch, steps, n_in)).astype(np.float32),
        y: rng.integers(0, 10, batch).astype(np.int32),
    }
    return _sgd(_ce(hb.matmul(h, w_out), y)), feed


BUILDERS = {"mlp": build_mlp, "cnn": build_cnn, "embedding": build_embedding, "lstm": build_lstm}


def build_sync_update(n: int = 1024, seed: int = 0):
    """The kernels a synchronous replicated step runs around its gradients, in one local step
    (no step of any cluster): each gradient goes into a ConditionalAccumulator with the worker's
    local step, the average is taken and applied by SGD, the global step is incremented, a token
    is enqueued and dequeued and becomes the local step; for a scalar and for an ``n``-float
    variable. What ``hetbed calibrate`` profiles besides ``BUILDERS``, so that a simulated
    cluster prices these ops by what they cost here rather than by their few FLOPs."""
    rng = np.random.default_rng(seed)
    x = hb.placeholder(hb.float32, [n], name="x")
    global_step = hb.Variable(np.int64(0), name="sync_global_step", trainable=False)
    local = hb.Variable(np.int64(0), name="sync_local_step", trainable=False)
    tokens = hb.FIFOQueue(-1, [hb.int64], shapes=[[]], name="sync_tokens")
    updates = []
    for name, v in (
        ("scalar", hb.Variable(np.float32(0.5), name="sync_scalar")),
        ("vector", hb.Variable(np.zeros(n, np.float32), name="sync_vector")),
    ):
        loss = hb.reduce_mean(hb.square(v * x - 1.0))
        (grad,) = hb.gradients(loss, [v])
        acc = hb.ConditionalAccumulator(hb.float32, v.shape, name=f"sync_acc_{name}")
        push = acc.apply_grad(grad, local_step=local.value())
        with hb.control_dependencies([push]):
            avg = acc.take_grad(1)
        updates.append(hb.train.GradientDescentOptimizer(0.01).apply_gradients([(avg, v)]))
    with hb.control_dependencies(updates):
        inc = hb.assign_add(global_step, 1)
    with hb.control_dependencies([inc]):
        put = tokens.enqueue_many([hb.fill([1], global_step.value())])
    with hb.control_dependencies([put]):
        train = hb.assign(local, tokens.dequeue())
    return train, {x: rng.standard_normal(n).astype(np.float32)}


def build_stream_update(n: int = 4 << 20, seed: int = 0):
    """The ops of a large variable's step and update, at 16 MiB (``n`` float32): its product
    with an input and the product's sum, the gradient, a ConditionalAccumulator taking it and
    handing its average to SGD. ``sync_update`` measures such ops at 4 KiB, where a call's fixed
    cost hides what a byte costs; measured here too, a simulated cluster prices them on large
    tensors from a size where streaming through memory dominates, not from a slope read off
    4 KiB calls."""
    rng = np.random.default_rng(seed)
    x = hb.placeholder(hb.float32, [n], name="stream_x")
    v = hb.Variable(np.zeros(n, np.float32), name="stream_v")
    (grad,) = hb.gradients(hb.reduce_sum(v * x), [v])
    acc = hb.ConditionalAccumulator(hb.float32, v.shape, name="stream_acc")
    local = hb.Variable(np.int64(0), name="stream_local_step", trainable=False)
    push = acc.apply_grad(grad, local_step=local.value())
    with hb.control_dependencies([push]):
        avg = acc.take_grad(1)
    update = hb.train.GradientDescentOptimizer(0.01).apply_gradients([(avg, v)])
    with hb.control_dependencies([update]):  # the next gradient is for the next time step
        train = hb.assign_add(local, 1)
    return train, {x: rng.standard_normal(n).astype(np.float32)}


def build_sparse_sync_update(rows: int = 50_000, dim: int = 64, k: int = 64, seed: int = 0):
    """``sync_update`` for an embedding: ``k`` rows of a ``rows`` x ``dim`` float32 table read
    (GatherV2), their IndexedSlices gradient into a SparseConditionalAccumulator with the local
    step, the per-row average taken and applied by sparse SGD, the local step advanced. Profiled
    by ``hetbed calibrate`` so that a simulated cluster prices the sparse accumulator's calls
    and the sparse update by what they cost here, not by their few FLOPs."""
    rng = np.random.default_rng(seed)
    x = hb.placeholder(hb.float32, [k, dim], name="sparse_x")
    table = hb.Variable(np.zeros((rows, dim), np.float32), name="sparse_table")
    ids = np.sort(rng.choice(rows, size=k, replace=False)).astype(np.int64)
    loss = hb.reduce_sum(hb.nn.embedding_lookup(table, ids) * x)
    (grad,) = hb.gradients(loss, [table])
    local = hb.Variable(np.int64(0), name="sparse_local_step", trainable=False)
    acc = hb.SparseConditionalAccumulator(hb.float32, table.shape, name="sparse_acc")
    push = acc.apply_indexed_slices_grad(grad, local_step=local.value())
    with hb.control_dependencies([push]):
        avg = acc.take_indexed_slices_grad(1, dense=table)
    update = hb.train.GradientDescentOptimizer(0.01).apply_gradients([(avg, table)])
    with hb.control_dependencies([update]):
        train = hb.assign_add(local, 1)
    return train, {x: rng.standard_normal((k, dim)).astype(np.float32)}


#: what ``hetbed calibrate`` profiles by default: the models, the ops of synchronous updates
#: (dense and sparse), and the ops of a large variable's update
CALIBRATION_BUILDERS = {
    **BUILDERS,
    "sync_update": build_sync_update,
    "sparse_sync_update": build_sparse_sync_update,
    "stream_update": build_stream_update,
}


def build_ps_towers(
    n_workers: int,
    sizes: tuple[int, ...] = (784, 1024, 1024, 10),
    batch_per_worker: int = 64,
    ps_device: str = "/job:ps/task:0/device:cpu:0",
    worker_device: str = "/job:worker/task:{i}/device:gpu:0",
    lr: float = 0.01,
    seed: int = 0,
):
    """Synchronous in-graph data parallelism: variables on one PS device, one tower per worker
    device, gradients averaged on the PS and applied once. Returns (train_op, feed_dict)."""
    rng = np.random.default_rng(seed)
    with hb.device(ps_device):
        params = []
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
            w0 = (rng.standard_normal((a, b)) * np.sqrt(2 / a)).astype(np.float32)
            params += [
                hb.Variable(w0, name=f"w{i}"),
                hb.Variable(np.zeros(b, np.float32), name=f"b{i}"),
            ]
    feed = {}
    tower_grads = []
    for t in range(n_workers):
        with hb.device(worker_device.format(i=t)), hb.name_scope(f"tower{t}"):
            x = hb.placeholder(hb.float32, [None, sizes[0]], name="x")
            y = hb.placeholder(hb.int32, [None], name="y")
            h = x
            for i in range(len(sizes) - 1):
                h = hb.nn.bias_add(hb.matmul(h, params[2 * i]), params[2 * i + 1])
                if i < len(sizes) - 2:
                    h = hb.nn.relu(h)
            tower_grads.append(hb.gradients(_ce(h, y), params))
            feed[x] = rng.standard_normal((batch_per_worker, sizes[0])).astype(np.float32)
            feed[y] = rng.integers(0, sizes[-1], batch_per_worker).astype(np.int32)
    with hb.device(ps_device):
        updates = []
        for k, p in enumerate(params):
            g = hb.add_n([tg[k] for tg in tower_grads])
            if n_workers > 1:
                g = g * (1.0 / n_workers)
            updates.append(hb.assign_sub(p, g * lr))
        train = hb.group(*updates)
    return train, feed
