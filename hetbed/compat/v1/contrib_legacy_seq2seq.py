"""TF1's ``tf.contrib.legacy_seq2seq``: sequence-to-sequence models over Python lists of
per-step tensors (the static-graph API of TF's translate and chatbot tutorials), with TF 1.15's
arithmetic and variable names.

* ``rnn_decoder``: the cell over ``decoder_inputs`` from ``initial_state``; with
  ``loop_function(prev_output, i)`` each step after the first reads the previous output through
  it instead (greedy decoding).
* ``basic_rnn_seq2seq`` / ``tied_rnn_seq2seq``: an encoder (a copy of the cell, or the same cell)
  whose final state starts the decoder.
* ``embedding_rnn_decoder`` / ``embedding_rnn_seq2seq``: symbol ids embedded (``embedding``), the
  decoder's outputs projected to the vocabulary (``OutputProjectionWrapper``) unless an
  ``output_projection`` (W, b) is given; ``feed_previous`` feeds back the argmax's embedding.
* ``attention_decoder`` (Bahdanau-style, ``num_heads`` heads over ``attention_states`` [batch,
  length, size]: ``AttnW_<a>`` as a 1x1 convolution, ``AttnV_<a>``, the query's linear map under
  ``Attention_<a>``, the input merged with the previous attention by a linear map, the output by
  ``AttnOutputProjection``), ``embedding_attention_decoder``, ``embedding_attention_seq2seq``.
* ``sequence_loss_by_example`` / ``sequence_loss``: weighted sparse softmax cross entropy summed
  over the steps (divided by the summed weights with ``average_across_timesteps``; by the batch
  size with ``average_across_batch``); ``model_with_buckets`` builds one model per bucket, sharing
  variables.

``feed_previous`` must be a Python bool (TF also takes a boolean tensor and builds both graphs).
"""

from __future__ import annotations

import copy
from typing import Any

import hetbed as _hb
from hetbed.runtime import dtypes as _dt
from hetbed.runtime.rnn_cell import OutputProjectionWrapper
from hetbed.runtime.rnn_cell_extra import EmbeddingWrapper


def _linear(args: Any, output_size: int, bias: bool = True) -> Any:
    """TF's ``_Linear`` in the current variable scope: ``concat(args) kernel + bias``."""
    args = args if isinstance(args, (list, tuple)) else [args]
    total = 0
    for a in args:
        d = a.shape.dims[1] if a.shape.ndims == 2 else None
        if d is None:
            raise ValueError(f"linear is expecting 2D arguments with a known depth: {a.shape}")
        total += d
    dtype = args[0].dtype
    kernel = _hb.get_variable("kernel", [total, output_size], dtype=dtype)
    x = args[0] if len(args) == 1 else _hb.concat(args, 1)
    out = _hb.matmul(x, kernel)
    if bias:
        b = _hb.get_variable(
            "bias", [output_size], dtype=dtype, initializer=_hb.constant_initializer(0.0)
        )
        out = _hb.nn.bias_add(out, b)
    return out


def _reuse_after_first(i: int) -> None:
    if i > 0:
        _hb.get_variable_scope().reuse_variables()


def rnn_decoder(
    decoder_inputs: list,
    initial_state: Any,
    cell: Any,
    loop_function: Any = None,
    scope: Any = None,
) -> tuple:
    """``(outputs, state)``: the cell stepped over ``decoder_inputs``."""
    with _hb.variable_scope(scope or "rnn_decoder"):
        state, outputs, prev = initial_state, [], None
        for i, inp in enumerate(decoder_inputs):
            if loop_function is not None and prev is not None:
                with _hb.variable_scope("loop_function", reuse=True):
                    inp = loop_function(prev, i)
            _reuse_after_first(i)
            output, state = cell(inp, state)
            outputs.append(output)
            if loop_function is not None:
                prev = output
    return outputs, state


def basic_rnn_seq2seq(
    encoder_inputs: list, decoder_inputs: list, cell: Any, dtype: Any = _dt.float32, scope=None
) -> tuple:
    """An encoder (a copy of ``cell``: its own variables) then ``rnn_decoder`` from its state."""
    with _hb.variable_scope(scope or "basic_rnn_seq2seq"):
        _, enc_state = _hb.nn.static_rnn(copy.deepcopy(cell), encoder_inputs, dtype=dtype)
        return rnn_decoder(decoder_inputs, enc_state, cell)


def tied_rnn_seq2seq(
    encoder_inputs: list,
    decoder_inputs: list,
    cell: Any,
    loop_function: Any = None,
    dtype: Any = _dt.float32,
    scope: Any = None,
) -> tuple:
    """Encoder and decoder share ``cell`` and its variables."""
    with _hb.variable_scope("combined_tied_rnn_seq2seq"):
        sc = scope or "tied_rnn_seq2seq"
        _, enc_state = _hb.nn.static_rnn(cell, encoder_inputs, dtype=dtype, scope=sc)
        _hb.get_variable_scope().reuse_variables()
        return rnn_decoder(decoder_inputs, enc_state, cell, loop_function=loop_function, scope=sc)


def _extract_argmax_and_embed(
    embedding: Any, output_projection: Any = None, update_embedding: bool = True
) -> Any:
    """A ``loop_function`` feeding back the embedding of the previous output's argmax."""

    def loop_function(prev: Any, _i: int) -> Any:
        if output_projection is not None:
            prev = _hb.nn.xw_plus_b(prev, output_projection[0], output_projection[1])
        emb = _hb.nn.embedding_lookup(embedding, _hb.argmax(prev, 1))
        return emb if update_embedding else _hb.stop_gradient(emb)

    return loop_function


def _embedded(inputs, num_symbols, embedding_size, output_projection, feed, update) -> tuple:
    """The decoder's ``embedding`` variable applied to the ids ``inputs``, and the loop function
    feeding back the previous output's argmax when ``feed``."""
    embedding = _hb.get_variable("embedding", [num_symbols, embedding_size])
    loop = _extract_argmax_and_embed(embedding, output_projection, update) if feed else None
    return [_hb.nn.embedding_lookup(embedding, i) for i in inputs], loop


def _encode(cell: Any, inputs: list, num_symbols: int, embedding_size: int, dtype: Any) -> tuple:
    """The embedding encoder: a copy of ``cell`` (its own variables) over the embedded ids."""
    enc = EmbeddingWrapper(copy.deepcopy(cell), num_symbols, embedding_size)
    return _hb.nn.static_rnn(enc, inputs, dtype=dtype or _dt.float32)


def _bool_feed(feed_previous: Any, fn: str) -> bool:
    if not isinstance(feed_previous, bool):
        raise NotImplementedError(
            f"{fn}: feed_previous must be a Python bool in hetbed (TF also takes a boolean "
            "tensor); build the model twice, with True and with False, sharing variables"
        )
    return feed_previous


def embedding_rnn_decoder(
    decoder_inputs: list,
    initial_state: Any,
    cell: Any,
    num_symbols: int,
    embedding_size: int,
    output_projection: Any = None,
    feed_previous: bool = False,
    update_embedding_for_previous: bool = True,
    scope: Any = None,
) -> tuple:
    """``rnn_decoder`` on the embeddings of the symbol ids ``decoder_inputs``."""
    feed = _bool_feed(feed_previous, "embedding_rnn_decoder")
    with _hb.variable_scope(scope or "embedding_rnn_decoder"):
        emb_inp, loop = _embedded(
            decoder_inputs,
            num_symbols,
            embedding_size,
            output_projection,
            feed,
            update_embedding_for_previous,
        )
        return rnn_decoder(emb_inp, initial_state, cell, loop_function=loop)


def embedding_rnn_seq2seq(
    encoder_inputs: list,
    decoder_inputs: list,
    cell: Any,
    num_encoder_symbols: int,
    num_decoder_symbols: int,
    embedding_size: int,
    output_projection: Any = None,
    feed_previous: bool = False,
    dtype: Any = None,
    scope: Any = None,
) -> tuple:
    """Embedding encoder (``rnn/embedding_wrapper``) and embedding decoder."""
    with _hb.variable_scope(scope or "embedding_rnn_seq2seq"):
        _, enc_state = _encode(cell, encoder_inputs, num_encoder_symbols, embedding_size, dtype)
        if output_projection is None:
            cell = OutputProjectionWrapper(cell, num_decoder_symbols)
        return embedding_rnn_decoder(
            decoder_inputs,
            enc_state,
            cell,
            num_decoder_symbols,
            embedding_size,
            output_projection=output_projection,
            feed_previous=feed_previous,
        )


def attention_decoder(
    decoder_inputs: list,
    initial_state: Any,
    attention_states: Any,
    cell: Any,
    output_size: Any = None,
    num_heads: int = 1,
    loop_function: Any = None,
    dtype: Any = None,
    scope: Any = None,
    initial_state_attention: bool = False,
) -> tuple:
    """The attention decoder of Bahdanau et al. / Vinyals et al. (see the module docstring)."""
    if not decoder_inputs:
        raise ValueError("Must provide at least 1 input to attention decoder.")
    if num_heads < 1:
        raise ValueError("With less than 1 heads, use a non-attention decoder.")
    states = _hb.convert_to_tensor(attention_states)
    if states.shape.ndims != 3 or states.shape[2] is None:
        raise ValueError(f"Shape[2] of attention_states must be known: {states.shape}")
    if output_size is None:
        output_size = cell.output_size
    with _hb.variable_scope(scope or "attention_decoder"):
        dt = dtype or states.dtype
        batch = _hb.shape(decoder_inputs[0])[0]
        length = states.shape[1] if states.shape[1] is not None else _hb.shape(states)[1]
        size = states.shape[2]
        hidden = _hb.reshape(states, _hb.stack([-1, length, 1, size]))
        features, vs = [], []
        for a in range(num_heads):
            k = _hb.get_variable(f"AttnW_{a}", [1, 1, size, size], dtype=dt)
            features.append(_hb.nn.conv2d(hidden, k, [1, 1, 1, 1], "SAME"))
            vs.append(_hb.get_variable(f"AttnV_{a}", [size], dtype=dt))

        def attention(query: Any) -> list:
            if isinstance(query, (list, tuple)):
                query = _hb.concat(_hb.nest.flatten(query), 1)
            reads = []
            for a in range(num_heads):
                with _hb.variable_scope(f"Attention_{a}"):
                    y = _hb.reshape(_linear(query, size), [-1, 1, 1, size])
                    s = _hb.reduce_sum(vs[a] * _hb.tanh(features[a] + y), [2, 3])
                    w = _hb.nn.softmax(s)
                    d = _hb.reduce_sum(
                        _hb.reshape(w, _hb.stack([-1, length, 1, 1])) * hidden, [1, 2]
                    )
                    reads.append(_hb.reshape(d, [-1, size]))
            return reads

        state, outputs, prev = initial_state, [], None
        attns = [_hb.zeros(_hb.stack([batch, size]), dtype=dt) for _ in range(num_heads)]
        for a in attns:
            a.set_shape(_hb.TensorShape([None, size]))
        if initial_state_attention:
            attns = attention(initial_state)
        for i, inp in enumerate(decoder_inputs):
            _reuse_after_first(i)
            if loop_function is not None and prev is not None:
                with _hb.variable_scope("loop_function", reuse=True):
                    inp = loop_function(prev, i)
            inp = _hb.convert_to_tensor(inp)
            if inp.shape.ndims != 2 or inp.shape[1] is None:
                raise ValueError(f"Could not infer input size from input: {inp.name}")
            x = _linear([inp, *attns], inp.shape[1])
            cell_output, state = cell(x, state)
            if i == 0 and initial_state_attention:
                with _hb.variable_scope(_hb.get_variable_scope(), reuse=True):
                    attns = attention(state)
            else:
                attns = attention(state)
            with _hb.variable_scope("AttnOutputProjection"):
                output = _linear([cell_output, *attns], output_size)
            if loop_function is not None:
                prev = output
            outputs.append(output)
    return outputs, state


def embedding_attention_decoder(
    decoder_inputs: list,
    initial_state: Any,
    attention_states: Any,
    cell: Any,
    num_symbols: int,
    embedding_size: int,
    num_heads: int = 1,
    output_size: Any = None,
    output_projection: Any = None,
    feed_previous: bool = False,
    update_embedding_for_previous: bool = True,
    dtype: Any = None,
    scope: Any = None,
    initial_state_attention: bool = False,
) -> tuple:
    """``attention_decoder`` on the embeddings of the symbol ids ``decoder_inputs``."""
    feed = _bool_feed(feed_previous, "embedding_attention_decoder")
    if output_size is None:
        output_size = cell.output_size
    with _hb.variable_scope(scope or "embedding_attention_decoder"):
        emb_inp, loop = _embedded(
            decoder_inputs,
            num_symbols,
            embedding_size,
            output_projection,
            feed,
            update_embedding_for_previous,
        )
        return attention_decoder(
            emb_inp,
            initial_state,
            attention_states,
            cell,
            output_size=output_size,
            num_heads=num_heads,
            loop_function=loop,
            initial_state_attention=initial_state_attention,
        )


def embedding_attention_seq2seq(
    encoder_inputs: list,
    decoder_inputs: list,
    cell: Any,
    num_encoder_symbols: int,
    num_decoder_symbols: int,
    embedding_size: int,
    num_heads: int = 1,
    output_projection: Any = None,
    feed_previous: bool = False,
    dtype: Any = None,
    scope: Any = None,
    initial_state_attention: bool = False,
) -> tuple:
    """Embedding encoder, attention over its outputs, embedding attention decoder (the
    translate tutorial's model)."""
    with _hb.variable_scope(scope or "embedding_attention_seq2seq"):
        enc_outputs, enc_state = _encode(
            cell, encoder_inputs, num_encoder_symbols, embedding_size, dtype
        )
        top = [_hb.reshape(e, [-1, 1, cell.output_size]) for e in enc_outputs]
        attention_states = _hb.concat(top, 1)
        output_size = None
        if output_projection is None:
            cell = OutputProjectionWrapper(cell, num_decoder_symbols)
            output_size = num_decoder_symbols
        return embedding_attention_decoder(
            decoder_inputs,
            enc_state,
            attention_states,
            cell,
            num_decoder_symbols,
            embedding_size,
            num_heads=num_heads,
            output_size=output_size,
            output_projection=output_projection,
            feed_previous=feed_previous,
            initial_state_attention=initial_state_attention,
        )


def sequence_loss_by_example(
    logits: list,
    targets: list,
    weights: list,
    average_across_timesteps: bool = True,
    softmax_loss_function: Any = None,
    name: Any = None,
) -> Any:
    """Per-example log perplexity ``[batch]``: the weighted cross entropies summed over steps."""
    if not len(logits) == len(targets) == len(weights):
        raise ValueError(
            "Lengths of logits, weights, and targets must be the same "
            f"{len(logits)}, {len(weights)}, {len(targets)}."
        )
    with _hb.name_scope(name or "sequence_loss_by_example"):
        terms = []
        for logit, target, weight in zip(logits, targets, weights):
            if softmax_loss_function is None:
                target = _hb.reshape(target, [-1])
                xent = _hb.nn.sparse_softmax_cross_entropy_with_logits(labels=target, logits=logit)
            else:
                xent = softmax_loss_function(labels=target, logits=logit)
            terms.append(xent * weight)
        total = _hb.add_n(terms)
        if average_across_timesteps:
            total = total / (_hb.add_n(weights) + 1e-12)
    return total


def sequence_loss(
    logits: list,
    targets: list,
    weights: list,
    average_across_timesteps: bool = True,
    average_across_batch: bool = True,
    softmax_loss_function: Any = None,
    name: Any = None,
) -> Any:
    """The summed per-example losses, divided by the batch size with ``average_across_batch``."""
    with _hb.name_scope(name or "sequence_loss"):
        cost = _hb.reduce_sum(
            sequence_loss_by_example(
                logits,
                targets,
                weights,
                average_across_timesteps=average_across_timesteps,
                softmax_loss_function=softmax_loss_function,
            )
        )
        if average_across_batch:
            return cost / _hb.cast(_hb.shape(targets[0])[0], cost.dtype)
        return cost


def model_with_buckets(
    encoder_inputs: list,
    decoder_inputs: list,
    targets: list,
    weights: list,
    buckets: list,
    seq2seq: Any,
    softmax_loss_function: Any = None,
    per_example_loss: bool = False,
    name: Any = None,
) -> tuple:
    """One ``seq2seq(encoder_inputs[:e], decoder_inputs[:d])`` per bucket ``(e, d)``, the later
    ones reusing the first one's variables; ``(outputs, losses)`` per bucket."""
    for what, seq, k in (
        ("encoder_inputs", encoder_inputs, 0),
        ("targets", targets, 1),
        ("weights", weights, 1),
    ):
        if len(seq) < buckets[-1][k]:
            raise ValueError(
                f"Length of {what} ({len(seq)}) must be at least that of last bucket "
                f"({buckets[-1][k]})."
            )
    losses, outputs = [], []
    with _hb.name_scope(name or "model_with_buckets"):
        for j, (e, d) in enumerate(buckets):
            with _hb.variable_scope(_hb.get_variable_scope(), reuse=True if j > 0 else None):
                out, _ = seq2seq(encoder_inputs[:e], decoder_inputs[:d])
                outputs.append(out)
                fn = sequence_loss_by_example if per_example_loss else sequence_loss
                losses.append(
                    fn(out, targets[:d], weights[:d], softmax_loss_function=softmax_loss_function)
                )
    return outputs, losses


__all__ = [
    "attention_decoder",
    "basic_rnn_seq2seq",
    "embedding_attention_decoder",
    "embedding_attention_seq2seq",
    "embedding_rnn_decoder",
    "embedding_rnn_seq2seq",
    "model_with_buckets",
    "rnn_decoder",
    "sequence_loss",
    "sequence_loss_by_example",
    "tied_rnn_seq2seq",
]
