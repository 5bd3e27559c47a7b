"""TF1's ``tf.contrib.seq2seq`` decoding loop: ``TrainingHelper`` (teacher forcing),
``GreedyEmbeddingHelper`` (feeding back each step's argmax), ``BasicDecoder`` (a cell, a helper
and an optional output layer) and ``dynamic_decode`` (a ``while_loop`` over decoder steps until
every sequence has finished or ``maximum_iterations``), with ``sequence_loss`` from
contrib_training.py. Variables are made where TF makes them: the cell's and the output layer's
under ``decoder/`` (``decoder/basic_lstm_cell/kernel``, ``decoder/dense/kernel``). The attention
mechanisms and wrapper are in contrib_seq2seq_attention.py, beam search in contrib_seq2seq_beam.py;
a decoder with ``finalize`` (beam search) has it called on the time-major outputs, and one that
``tracks_own_finished`` decides alone when a sequence has finished.
"""

from __future__ import annotations

import collections
from typing import Any

import hetbed as _hb
from hetbed.runtime import dtypes as _dt

BasicDecoderOutput = collections.namedtuple("BasicDecoderOutput", ("rnn_output", "sample_id"))


def _flat(x: Any) -> list:
    return _hb.nest.flatten(x)


class TrainingHelper:
    """Reads ``inputs`` [batch, time, ...] (``time_major``: [time, batch, ...]) step by step;
    a sequence finishes after ``sequence_length`` steps."""

    def __init__(self, inputs: Any, sequence_length: Any, time_major: bool = False, name=None):
        x = _hb.convert_to_tensor(inputs)
        self._inputs_tm = x if time_major else _hb.transpose(x, [1, 0, *range(2, x.shape.ndims)])
        self._lengths = _hb.cast(_hb.convert_to_tensor(sequence_length), _dt.int32)
        self._batch = _hb.shape(self._lengths)[0]
        self._max_len = _hb.shape(self._inputs_tm)[0]

    @property
    def batch_size(self) -> Any:
        return self._batch

    def _read(self, t: Any) -> Any:
        safe = _hb.minimum(t, self._max_len - 1)
        return _hb.gather(self._inputs_tm, safe)

    def initialize(self, name=None) -> tuple:
        finished = _hb.equal(self._lengths, 0)
        return finished, self._read(0)

    def sample(self, time: Any, outputs: Any, state: Any, name=None) -> Any:
        return _hb.cast(_hb.argmax(outputs, axis=-1), _dt.int32)

    def next_inputs(self, time: Any, outputs: Any, state: Any, sample_ids: Any, name=None):
        nxt = time + 1
        finished = _hb.greater_equal(nxt, self._lengths)
        return finished, self._read(nxt), state


class GreedyEmbeddingHelper:
    """Feeds back the embedding of each step's argmax, from ``start_tokens``; a sequence
    finishes when it emits ``end_token``."""

    def __init__(self, embedding: Any, start_tokens: Any, end_token: Any):
        if callable(embedding):
            self._embed = embedding
        else:
            table = _hb.convert_to_tensor(embedding)
            self._embed = lambda ids: _hb.nn.embedding_lookup(table, ids)
        self._start = _hb.cast(_hb.convert_to_tensor(start_tokens), _dt.int32)
        self._end = _hb.cast(_hb.convert_to_tensor(end_token), _dt.int32)
        self._batch = _hb.shape(self._start)[0]
        self._start_inputs = self._embed(self._start)

    @property
    def batch_size(self) -> Any:
        return self._batch

    def initialize(self, name=None) -> tuple:
        return _hb.zeros_like(self._start, dtype=_dt.bool_), self._start_inputs

    def sample(self, time: Any, outputs: Any, state: Any, name=None) -> Any:
        return _hb.cast(_hb.argmax(outputs, axis=-1), _dt.int32)

    def next_inputs(self, time: Any, outputs: Any, state: Any, sample_ids: Any, name=None):
        finished = _hb.equal(sample_ids, self._end)
        return finished, self._embed(sample_ids), state


class SampleEmbeddingHelper(GreedyEmbeddingHelper):
    """GreedyEmbeddingHelper that samples each step's id from the softmax of the logits
    (divided by ``softmax_temperature``) instead of taking the argmax."""

    def __init__(
        self,
        embedding: Any,
        start_tokens: Any,
        end_token: Any,
        softmax_temperature: Any = None,
        seed: Any = None,
    ):
        super().__init__(embedding, start_tokens, end_token)
        self._temperature = softmax_temperature
        self._seed = seed

    def sample(self, time: Any, outputs: Any, state: Any, name=None) -> Any:
        logits = outputs if self._temperature is None else outputs / self._temperature
        ids = _hb.multinomial(logits, 1, seed=self._seed, output_dtype=_dt.int32)
        return _hb.reshape(ids, [-1])


class InferenceHelper:
    """Feeds ``next_inputs_fn(sample_ids)`` back from ``start_inputs``; ``sample_fn(outputs)``
    makes the ids; a sequence ends where ``end_fn(sample_ids)`` is true (never without it)."""

    def __init__(
        self, sample_fn, sample_shape, sample_dtype, start_inputs, end_fn, next_inputs_fn=None
    ):
        self._sample_fn, self._end_fn = sample_fn, end_fn
        self._next_inputs_fn = next_inputs_fn or (lambda ids: ids)
        self._start = _hb.convert_to_tensor(start_inputs)
        self._batch = _hb.shape(self._start)[0]

    @property
    def batch_size(self) -> Any:
        return self._batch

    def initialize(self, name=None) -> tuple:
        return _hb.zeros(_hb.stack([self._batch]), dtype=_dt.bool_), self._start

    def sample(self, time: Any, outputs: Any, state: Any, name=None) -> Any:
        return self._sample_fn(outputs)

    def next_inputs(self, time: Any, outputs: Any, state: Any, sample_ids: Any, name=None):
        return self._end_fn(sample_ids), self._next_inputs_fn(sample_ids), state


class BasicDecoder:
    """One step: the cell on the helper's inputs, the output layer, the helper's sample."""

    def __init__(self, cell: Any, helper: Any, initial_state: Any, output_layer: Any = None):
        self._cell, self._helper = cell, helper
        self._initial_state = initial_state
        self._output_layer = output_layer

    @property
    def batch_size(self) -> Any:
        return self._helper.batch_size

    def initialize(self, name=None) -> tuple:
        finished, inputs = self._helper.initialize()
        return finished, inputs, self._initial_state

    def step(self, time: Any, inputs: Any, state: Any, name=None) -> tuple:
        out, cell_state = self._cell(inputs, state)
        if self._output_layer is not None:
            out = self._output_layer(out)
        ids = self._helper.sample(time, out, cell_state)
        finished, nxt, nxt_state = self._helper.next_inputs(time, out, cell_state, ids)
        return BasicDecoderOutput(out, ids), nxt_state, nxt, finished


def dynamic_decode(
    decoder: BasicDecoder,
    output_time_major: bool = False,
    impute_finished: bool = False,
    maximum_iterations: Any = None,
    parallel_iterations: int = 32,
    swap_memory: bool = False,
    scope: Any = None,
) -> tuple:
    """``(final_outputs, final_state, final_sequence_lengths)``: the decoder stepped until
    every sequence finished (or ``maximum_iterations``); outputs [batch, time, ...] (or time
    major), zero past a sequence's end and its state held there when ``impute_finished``."""
    with _hb.variable_scope(scope or "decoder"):
        finished, inputs, state = decoder.initialize()
        limit = None if maximum_iterations is None else _hb.cast(maximum_iterations, _dt.int32)
        if limit is not None:
            finished = _hb.logical_or(finished, _hb.greater_equal(0, limit))
        lengths = _hb.zeros_like(finished, dtype=_dt.int32)
        own_finished = getattr(decoder, "tracks_own_finished", False)
        time = _hb.constant(0, dtype=_dt.int32)
        # one step built outside the loop gives the outputs' dtypes and the cell's variables
        probe, _, _, _ = decoder.step(time, inputs, state)
        out_tas = [
            _hb.TensorArray(t.dtype, size=0, dynamic_size=True, element_shape=t.shape)
            for t in _flat(probe)
        ]
        _hb.get_variable_scope().reuse_variables()

        def cond(t, fin, *_rest):
            return _hb.logical_not(_hb.reduce_all(fin))

        def body(t, fin, lens, inp, st, *tas):
            out, nxt_state, nxt_inputs, dec_fin = decoder.step(t, inp, st)
            nxt_fin = dec_fin if own_finished else _hb.logical_or(fin, dec_fin)
            if limit is not None:
                nxt_fin = _hb.logical_or(nxt_fin, _hb.greater_equal(t + 1, limit))
            # TF's rule: a sequence not finished before this step has length t + 1 (with
            # beam search the flags move with the beams, so they can also turn false again)
            # a decoder tracking its own finished flags may carry the lengths in its state
            base = lens
            if own_finished and getattr(nxt_state, "lengths", None) is not None:
                base = _hb.cast(nxt_state.lengths, _dt.int32)
            nxt_lens = _hb.where(_hb.logical_not(fin), _hb.fill(_hb.shape(lens), t + 1), base)
            flat_out = _flat(out)
            if impute_finished:
                flat_out = [
                    _hb.where(_hb.broadcast_to(_expand(fin, o), _hb.shape(o)), _hb.zeros_like(o), o)
                    for o in flat_out
                ]
                st_flat = _flat(st)
                nxt_flat = [  # a finished sequence keeps its state (TensorArrays, scalars pass)
                    n
                    if isinstance(n, _hb.TensorArray) or n.shape.ndims == 0
                    else _hb.where(_hb.broadcast_to(_expand(fin, n), _hb.shape(n)), s, n)
                    for s, n in zip(st_flat, _flat(nxt_state))
                ]
                nxt_state = _hb.nest.pack_sequence_as(nxt_state, nxt_flat)
            tas = [ta.write(t, o) for ta, o in zip(tas, flat_out)]
            return (t + 1, nxt_fin, nxt_lens, nxt_inputs, nxt_state, *tas)

        loop = _hb.while_loop(
            cond,
            body,
            (time, finished, lengths, inputs, state, *out_tas),
            parallel_iterations=parallel_iterations,
        )
        _, _, final_lens, _, final_state, *final_tas = loop
        final = _hb.nest.pack_sequence_as(probe, [ta.stack() for ta in final_tas])
        if hasattr(decoder, "finalize"):
            final, final_state = decoder.finalize(final, final_state, final_lens)
        if not output_time_major:
            final = _hb.nest.map_structure(
                lambda o: _hb.transpose(o, [1, 0, *range(2, o.shape.ndims)]), final
            )
        return final, final_state, final_lens


def _expand(fin: Any, like: Any) -> Any:
    """``fin`` ([batch], or [batch, beam]) with as many trailing axes as ``like`` has."""
    out = fin
    for _ in range(max((like.shape.ndims or 1) - (fin.shape.ndims or 1), 0)):
        out = _hb.expand_dims(out, -1)
    return out


__all__ = [
    "BasicDecoder",
    "BasicDecoderOutput",
    "GreedyEmbeddingHelper",
    "InferenceHelper",
    "SampleEmbeddingHelper",
    "TrainingHelper",
    "dynamic_decode",
]
