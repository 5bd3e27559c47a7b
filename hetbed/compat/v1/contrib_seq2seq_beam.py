"""TF1's ``tf.contrib.seq2seq`` beam search: ``BeamSearchDecoder``, ``tile_batch`` and
``gather_tree``, as TF 1.15 defines them.

The decoder keeps ``beam_width`` hypotheses per batch entry. The cell runs on all of them at
once (``[batch * beam_width, ...]``: the initial state and any attention memory must be tiled
with ``tile_batch``). At each step every hypothesis' log probabilities (a log-softmax of the
logits; a finished hypothesis can only emit ``end_token``, at no cost) are added to its total,
each candidate is scored ``total / ((5 + length) / 6) ** length_penalty_weight`` (Wu et al.
2016; the length is the state's ``lengths``, which count ``end_token`` from the step after
it is emitted, plus one for a new token other than ``end_token``: TF's arithmetic) and the ``beam_width`` best
candidates of each batch entry (``top_k`` over ``beam_width * vocab``) become the new beams; the
cell states follow their parents. At the start only beam 0 is alive (the others start finished,
with log probability -inf), so the first step does not fill the beam with copies. ``finalize``
reads the sequences back with ``gather_tree``.

``dynamic_decode`` runs it: the outputs are ``FinalBeamSearchDecoderOutput(predicted_ids
[batch, time, beam], beam_search_decoder_output=(scores, predicted_ids, parent_ids))``, the beams
ordered best first. The coverage penalty (``coverage_penalty_weight``) is not implemented.
"""

from __future__ import annotations

import collections
from typing import Any

import numpy as np

import hetbed as _hb
from hetbed.runtime import dtypes as _dt
from hetbed.runtime.graph import TensorShape
from hetbed.runtime.ops.gather_tree import gather_tree


class BeamSearchDecoderState(
    collections.namedtuple(
        "BeamSearchDecoderState",
        ("cell_state", "log_probs", "finished", "lengths", "accumulated_attention_probs"),
    )
):
    pass


class BeamSearchDecoderOutput(
    collections.namedtuple("BeamSearchDecoderOutput", ("scores", "predicted_ids", "parent_ids"))
):
    pass


class FinalBeamSearchDecoderOutput(
    collections.namedtuple(
        "FinalBeamSearchDecoderOutput", ("predicted_ids", "beam_search_decoder_output")
    )
):
    pass


def _static(t: Any, axis: int) -> Any:
    dims = t.shape.dims
    return dims[axis] if dims is not None and len(dims) > axis else None


def _tile_one(t: Any, multiplier: int) -> Any:
    t = _hb.convert_to_tensor(t, name="t")
    if t.shape.ndims is None:
        raise ValueError(f"tile_batch: {t.name} must have a statically known rank")
    if t.shape.ndims == 0:
        raise ValueError(f"tile_batch: {t.name} is a scalar; it needs a batch dimension")
    tiling = [1] * (t.shape.ndims + 1)
    tiling[1] = multiplier
    tiled = _hb.tile(_hb.expand_dims(t, 1), tiling)
    shape = _hb.shape(t)
    tiled = _hb.reshape(tiled, _hb.concat([_hb.stack([shape[0] * multiplier]), shape[1:]], 0))
    b = _static(t, 0)
    tiled.set_shape(TensorShape([None if b is None else b * multiplier, *t.shape.dims[1:]]))
    return tiled


def tile_batch(t: Any, multiplier: int, name: Any = None) -> Any:
    """Each batch entry of every tensor in ``t`` repeated ``multiplier`` times in place:
    ``[b0, b1]`` -> ``[b0, b0, b0, b1, b1, b1]`` for 3 (not ``tf.tile``'s order)."""
    if int(multiplier) < 1:
        raise ValueError(f"tile_batch: multiplier must be >= 1, got {multiplier}")
    with _hb.name_scope(name or "tile_batch"):
        return _hb.nest.map_structure(lambda x: _tile_one(x, int(multiplier)), t)


def _mask_probs(probs: Any, end_token: Any, finished: Any) -> Any:
    """A finished beam's row becomes 0 at ``end_token`` and the dtype's lowest value elsewhere."""
    vocab = _static(probs, 2) or _hb.shape(probs)[2]
    low = float(np.finfo(probs.dtype.np).min)
    row = _hb.one_hot(end_token, vocab, dtype=probs.dtype, on_value=0.0, off_value=low)
    rows = _hb.zeros_like(probs) + _hb.reshape(row, [1, 1, -1])
    reps = [1, 1, vocab] if isinstance(vocab, int) else _hb.stack([1, 1, vocab])
    return _hb.where(_hb.tile(_hb.expand_dims(finished, 2), reps), rows, probs)


def _length_penalty(lengths: Any, weight: float, dtype: Any) -> Any:
    if weight == 0:
        return 1.0
    return ((5.0 + _hb.cast(lengths, dtype)) ** weight) / ((5.0 + 1.0) ** weight)


def _gather_beams(indices: Any, values: Any, batch: Any, range_size: Any, flat: bool) -> Any:
    """``values[b, indices[b, k], ...]`` for every ``b`` and ``k`` (``flat``: ``values`` read as
    ``[batch, range_size]``, the indices running over it)."""
    offsets = _hb.expand_dims(_hb.range(batch) * range_size, 1)
    idx = _hb.reshape(indices + offsets, [-1])
    shape = _hb.shape(values)
    if flat:
        out = _hb.gather(_hb.reshape(values, [-1]), idx)
        out = _hb.reshape(out, _hb.shape(indices))
        out.set_shape(indices.shape)
        return out
    rows = _hb.reshape(values, _hb.concat([_hb.constant([-1]), shape[2:]], 0))
    out = _hb.reshape(_hb.gather(rows, idx), shape)
    out.set_shape(values.shape)
    return out


class BeamSearchDecoder:
    """Beam search over ``cell`` (see the module's docstring)."""

    def __init__(
        self,
        cell: Any,
        embedding: Any,
        start_tokens: Any,
        end_token: Any,
        initial_state: Any,
        beam_width: int,
        output_layer: Any = None,
        length_penalty_weight: float = 0.0,
        coverage_penalty_weight: float = 0.0,
        reorder_tensor_arrays: bool = True,
    ):
        if not callable(cell):
            raise TypeError(f"cell must be an RNNCell, received: {type(cell).__name__}")
        if output_layer is not None and not callable(output_layer):
            raise TypeError(f"output_layer must be a Layer, received: {type(output_layer)}")
        if coverage_penalty_weight:
            raise NotImplementedError(
                "BeamSearchDecoder: coverage_penalty_weight is not supported; use 0.0"
            )
        self._cell, self._output_layer = cell, output_layer
        self._reorder_tensor_arrays = reorder_tensor_arrays
        if callable(embedding):
            self._embedding_fn = embedding
        else:
            table = _hb.convert_to_tensor(embedding, name="embedding")
            self._embedding_fn = lambda ids: _hb.nn.embedding_lookup(table, ids)
        self._start_tokens = _hb.convert_to_tensor(start_tokens, _dt.int32, name="start_tokens")
        if self._start_tokens.shape.ndims not in (None, 1):
            raise ValueError(f"start_tokens must be a vector, got {self._start_tokens.shape}")
        self._end_token = _hb.convert_to_tensor(end_token, _dt.int32, name="end_token")
        if self._end_token.shape.ndims not in (None, 0):
            raise ValueError(f"end_token must be a scalar, got {self._end_token.shape}")
        self._beam_width = int(beam_width)
        if self._beam_width < 1:
            raise ValueError(f"beam_width must be >= 1, got {beam_width}")
        self._length_penalty_weight = float(length_penalty_weight)
        b = _static(self._start_tokens, 0)
        self._batch_size = b if b is not None else _hb.shape(self._start_tokens)[0]
        if b is not None:
            for t in _hb.nest.flatten(initial_state):
                rows = _static(t, 0) if hasattr(t, "shape") and t.shape.ndims else None
                if rows is not None and rows != b * self._beam_width:
                    raise ValueError(
                        f"BeamSearchDecoder: the initial state {getattr(t, 'name', t)} has "
                        f"{rows} rows; {b} start tokens times beam_width {self._beam_width} "
                        f"need {b * self._beam_width}: tile the encoder's state (and any "
                        "attention memory) with tf.contrib.seq2seq.tile_batch(..., "
                        "multiplier=beam_width)"
                    )
        self._initial_cell_state = _hb.nest.map_structure(self._maybe_split, initial_state)
        tokens = _hb.tile(_hb.expand_dims(self._start_tokens, 1), [1, self._beam_width])
        self._start_inputs = self._embedding_fn(tokens)
        zeros = self._batch_zeros(_dt.int32)
        self._finished = _hb.one_hot(
            zeros, self._beam_width, on_value=False, off_value=True, dtype=_dt.bool_
        )

    # ---- shapes --------------------------------------------------------------------------------
    def _batch_zeros(self, dtype: Any) -> Any:
        b = self._batch_size
        return _hb.zeros([b] if isinstance(b, int) else _hb.stack([b]), dtype=dtype)

    def _split(self, t: Any) -> Any:
        """``[batch * beam, ...]`` -> ``[batch, beam, ...]``."""
        k = self._beam_width
        out = _hb.reshape(t, _hb.concat([_hb.stack([self._batch_size, k]), _hb.shape(t)[1:]], 0))
        b = self._batch_size if isinstance(self._batch_size, int) else None
        out.set_shape(TensorShape([b, k, *t.shape.dims[1:]]))
        return out

    def _merge(self, t: Any) -> Any:
        """``[batch, beam, ...]`` -> ``[batch * beam, ...]``."""
        k = self._beam_width
        out = _hb.reshape(t, _hb.concat([_hb.stack([self._batch_size * k]), _hb.shape(t)[2:]], 0))
        b = self._batch_size * k if isinstance(self._batch_size, int) else None
        out.set_shape(TensorShape([b, *t.shape.dims[2:]]))
        return out

    def _maybe_split(self, t: Any) -> Any:
        if isinstance(t, _hb.TensorArray):
            return t
        t = _hb.convert_to_tensor(t)
        if t.shape.ndims is None:
            raise ValueError(f"BeamSearchDecoder: the cell state {t.name} has an unknown rank")
        return self._split(t) if t.shape.ndims >= 1 else t

    def _maybe_merge(self, t: Any) -> Any:
        if isinstance(t, _hb.TensorArray):
            return t
        return self._merge(t) if t.shape.ndims >= 2 else t

    # ---- the decoder interface ----------------------------------------------------------------
    @property
    def batch_size(self) -> Any:
        return self._batch_size

    @property
    def tracks_own_finished(self) -> bool:
        return True

    def initialize(self, name: Any = None) -> tuple:
        dtype = _hb.nest.flatten(self._initial_cell_state)[0].dtype
        log_probs = _hb.one_hot(
            self._batch_zeros(_dt.int32),
            self._beam_width,
            on_value=0.0,
            off_value=-np.inf,
            dtype=dtype,
        )
        state = BeamSearchDecoderState(
            cell_state=self._initial_cell_state,
            log_probs=log_probs,
            finished=self._finished,
            lengths=_hb.zeros_like(log_probs, dtype=_dt.int64),
            accumulated_attention_probs=(),
        )
        return self._finished, self._start_inputs, state

    def step(self, time: Any, inputs: Any, state: BeamSearchDecoderState, name: Any = None):
        with _hb.name_scope(name or "BeamSearchDecoderStep"):
            cell_inputs = _hb.nest.map_structure(self._merge, inputs)
            cell_state = _hb.nest.map_structure(self._maybe_merge, state.cell_state)
            out, next_cell_state = self._cell(cell_inputs, cell_state)
            out = _hb.nest.map_structure(self._split, out)
            next_cell_state = _hb.nest.map_structure(self._maybe_split, next_cell_state)
            if self._output_layer is not None:
                out = self._output_layer(out)
            output, next_state = self._search_step(out, next_cell_state, state)
            finished = next_state.finished
            ids = output.predicted_ids
            next_inputs = _hb.cond(
                _hb.reduce_all(finished),
                lambda: self._start_inputs,
                lambda: self._embedding_fn(ids),
            )
        return output, next_state, next_inputs, finished

    def _search_step(self, logits: Any, next_cell_state: Any, state: BeamSearchDecoderState):
        batch, k, end = self._batch_size, self._beam_width, self._end_token
        vocab = _static(logits, 2)
        if vocab is None:
            vocab = _hb.shape(logits)[2]
        prev_finished = state.finished
        step_log_probs = _mask_probs(_hb.nn.log_softmax(logits), end, prev_finished)
        total = _hb.expand_dims(state.log_probs, 2) + step_log_probs
        # a candidate's length grows by one unless its beam had finished or it is end_token
        not_end = _hb.one_hot(
            _hb.fill(_hb.shape(prev_finished), end),
            vocab,
            on_value=np.int64(0),
            off_value=np.int64(1),
            dtype=_dt.int64,
        )
        alive = _hb.expand_dims(_hb.cast(_hb.logical_not(prev_finished), _dt.int64), 2)
        new_lengths = not_end * alive + _hb.expand_dims(state.lengths, 2)
        scores = total / _length_penalty(new_lengths, self._length_penalty_weight, total.dtype)
        flat_scores = _hb.reshape(scores, _hb.stack([batch, -1]))
        best, word = _hb.nn.top_k(flat_scores, k=k)
        b = batch if isinstance(batch, int) else None
        best.set_shape(TensorShape([b, k]))
        word.set_shape(TensorShape([b, k]))
        next_probs = _gather_beams(word, total, batch, k * vocab, flat=True)
        word_ids = _hb.cast(_hb.floormod(word, vocab), _dt.int32)
        parent = _hb.cast(_hb.floordiv(word, vocab), _dt.int32)
        parent_finished = _gather_beams(parent, prev_finished, batch, k, flat=True)
        next_finished = _hb.logical_or(parent_finished, _hb.equal(word_ids, end))
        grow = _hb.cast(_hb.logical_not(parent_finished), _dt.int64)
        next_lengths = _gather_beams(parent, state.lengths, batch, k, flat=True) + grow

        def follow(t: Any) -> Any:
            if isinstance(t, _hb.TensorArray) or t.shape.ndims < 2:
                return t
            return _gather_beams(parent, t, batch, k, flat=False)

        next_state = BeamSearchDecoderState(
            cell_state=_hb.nest.map_structure(follow, next_cell_state),
            log_probs=next_probs,
            lengths=next_lengths,
            finished=next_finished,
            accumulated_attention_probs=(),
        )
        return BeamSearchDecoderOutput(best, word_ids, parent), next_state

    def finalize(self, outputs: BeamSearchDecoderOutput, final_state: Any, sequence_lengths: Any):
        """The sequences read back through the parents (time major), the final state's
        TensorArrays (alignment histories) reordered the same way."""
        lengths = _hb.cast(_hb.reduce_max(final_state.lengths, axis=1), _dt.int32)
        ids = gather_tree(outputs.predicted_ids, outputs.parent_ids, lengths, self._end_token)
        if self._reorder_tensor_arrays:
            cell_state = _hb.nest.map_structure(
                lambda t: self._sort_array(t, outputs.parent_ids, final_state.lengths),
                final_state.cell_state,
            )
            final_state = final_state._replace(cell_state=cell_state)
        return FinalBeamSearchDecoderOutput(ids, outputs), final_state

    def _sort_array(self, t: Any, parent_ids: Any, lengths: Any) -> Any:
        if not isinstance(t, _hb.TensorArray):
            return t
        return gather_tree_from_array(t.stack(), parent_ids, lengths)


def gather_tree_from_array(t: Any, parent_ids: Any, sequence_length: Any) -> Any:
    """``t`` [max_time, batch * beam, ...] reordered along the beams as ``gather_tree`` orders
    the ids (steps past a beam's length keep their beam)."""
    t_max = _hb.shape(parent_ids)[0]
    batch = _hb.shape(parent_ids)[1]
    beam = _hb.shape(parent_ids)[2]
    beam_ids = _hb.tile(_hb.reshape(_hb.range(beam), [1, 1, -1]), _hb.stack([t_max, batch, 1]))
    max_lengths = _hb.cast(_hb.reduce_max(sequence_length, axis=1), _dt.int32)
    sorted_ids = gather_tree(beam_ids, parent_ids, max_lengths, beam + 1)
    in_bound = _hb.transpose(_hb.sequence_mask(sequence_length, maxlen=t_max), [2, 0, 1])
    sorted_ids = _hb.where(in_bound, sorted_ids, beam_ids)
    time_ind = _hb.tile(_hb.reshape(_hb.range(t_max), [-1, 1, 1]), _hb.stack([1, batch, beam]))
    batch_ind = _hb.tile(_hb.reshape(_hb.range(batch), [1, -1, 1]), _hb.stack([t_max, 1, beam]))
    indices = _hb.stack([time_ind, batch_ind, sorted_ids], -1)
    shape = _hb.shape(t)
    ordered = _hb.gather_nd(_hb.reshape(t, _hb.stack([t_max, batch, beam, -1])), indices)
    return _hb.reshape(ordered, shape)


__all__ = [
    "BeamSearchDecoder",
    "BeamSearchDecoderOutput",
    "BeamSearchDecoderState",
    "FinalBeamSearchDecoderOutput",
    "gather_tree",
    "gather_tree_from_array",
    "tile_batch",
]
