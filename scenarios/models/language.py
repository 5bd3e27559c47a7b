"""An LSTM language model, LSTM-512-512 over a 40,000-word vocabulary (the model of the
TensorFlow paper's Figure: full softmax vs. sampled softmax with 512 samples).

Embedding (vocab x 512), one LSTM layer of 512 units (TF1's BasicLSTMCell: gates i, j, f, o from
one matmul of [x, h], forget bias 1.0) unrolled over ``num_steps`` time steps, then a softmax
over the vocabulary with weights laid out ``[vocab, 512]`` as ``sampled_softmax_loss`` wants
them. With the defaults: 20,480,000 + 2,099,200 + 20,520,000 = 43,099,200 parameters.
The input embedding's gradient is sparse (a gather); so are the softmax weights' with the
sampled softmax, while the full softmax updates all of them densely.
"""

from __future__ import annotations

from typing import Any

import hetbed as hb
from hetbed.runtime.ops.sampled import sampled_softmax_loss

from .modelgraph import ModelGraph, Recorder, training_step


def lstm_cell(x: Any, h: Any, c: Any, kernel: Any, bias: Any, forget_bias: float = 1.0):
    """One step of TF1's BasicLSTMCell: returns (h, c)."""
    gates = hb.nn.bias_add(hb.matmul(hb.concat([x, h], 1), kernel), bias)
    i, j, f, o = hb.split(gates, 4, axis=1)
    c = hb.sigmoid(f + forget_bias) * c + hb.sigmoid(i) * hb.tanh(j)
    return hb.sigmoid(o) * hb.tanh(c), c


def lstm_lm(
    batch_size: int,
    dtype: Any = hb.float32,
    optimizer: Any = "sgd",
    image_size: int | None = None,
    *,
    vocab_size: int = 40_000,
    hidden_size: int = 512,
    embedding_size: int = 512,
    num_steps: int = 20,
    softmax: str = "full",
    num_sampled: int = 512,
    forget_bias: float = 1.0,
    seed: int | None = None,
    **kw: Any,
) -> ModelGraph:
    """LSTM LM training step on ``ids`` / next-word ``labels`` of shape [batch, num_steps].

    ``softmax`` is "full" (logits over the whole vocabulary, returned as ``logits`` of shape
    [batch * num_steps, vocab]) or "sampled" (``num_sampled`` log-uniform candidates per step,
    no logits). The loss is the mean cross entropy per word.
    """
    if image_size is not None:
        raise ValueError("lstm_lm takes no image_size")
    if softmax not in ("full", "sampled"):
        raise ValueError(f"lstm_lm: softmax must be 'full' or 'sampled', got {softmax!r}")
    b, t, h_dim = batch_size, num_steps, hidden_size
    init = hb.random_uniform_initializer(-0.05, 0.05)
    with Recorder() as rec:
        ids = hb.placeholder(hb.int32, [b, t], name="ids")
        labels = hb.placeholder(hb.int32, [b, t], name="labels")
        emb = hb.get_variable("embedding", [vocab_size, embedding_size], dtype, init)
        with hb.variable_scope("lstm"):
            kernel = hb.get_variable("kernel", [embedding_size + h_dim, 4 * h_dim], dtype, init)
            bias = hb.get_variable("bias", [4 * h_dim], dtype, hb.zeros_initializer())
        xs = hb.unstack(hb.gather(emb, ids), num=t, axis=1)
        h = c = hb.zeros([b, h_dim], dtype)
        outputs = []
        for step in range(t):
            with hb.name_scope(f"step{step}"):
                h, c = lstm_cell(xs[step], h, c, kernel, bias, forget_bias)
            outputs.append(h)
        out = hb.reshape(hb.stack(outputs, axis=1), [b * t, h_dim])
        with hb.variable_scope("softmax"):
            w = hb.get_variable("weights", [vocab_size, h_dim], dtype, init)
            sb = hb.get_variable("biases", [vocab_size], dtype, hb.zeros_initializer())
        flat_labels = hb.reshape(labels, [b * t])
        if softmax == "full":
            logits = hb.nn.bias_add(hb.matmul(out, w, transpose_b=True), sb)
            losses = hb.nn.sparse_softmax_cross_entropy_with_logits(
                labels=flat_labels, logits=logits
            )
        else:
            logits = None
            losses = sampled_softmax_loss(
                w,
                sb,
                hb.reshape(flat_labels, [b * t, 1]),
                out,
                num_sampled=num_sampled,
                num_classes=vocab_size,
                seed=seed,
            )
        loss = hb.reduce_mean(losses, name="loss")
    return training_step(
        "lstm_lm" if softmax == "full" else "lstm_lm_sampled",
        rec,
        {"ids": ids, "labels": labels},
        loss,
        optimizer=optimizer,
        logits=logits,
        input_high={"ids": vocab_size, "labels": vocab_size},
        **kw,
    )


def lstm_lm_sampled(
    batch_size: int, dtype: Any = hb.float32, optimizer: Any = "sgd", image_size=None, **kw: Any
) -> ModelGraph:
    """The LSTM LM with a sampled softmax (512 log-uniform samples by default)."""
    return lstm_lm(batch_size, dtype, optimizer, image_size, softmax="sampled", **kw)
