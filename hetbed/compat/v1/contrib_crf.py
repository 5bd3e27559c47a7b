"""TF1's ``tf.contrib.crf``: a linear-chain conditional random field over per-step tag scores
(BiLSTM-CRF taggers): ``crf_log_likelihood`` (and the transition matrix variable it makes),
``crf_sequence_score``, ``crf_log_norm`` (the forward algorithm in log space, a ``scan`` over
time, so its gradient is the ops'), ``crf_unary_score``, ``crf_binary_score``, ``crf_decode``
(Viterbi as a graph op) and ``viterbi_decode`` (numpy, on fetched scores). Steps beyond a
sequence's length count for nothing, as in TF.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import hetbed as _hb
from hetbed.runtime import dtypes as _dt
from hetbed.runtime.errors import InvalidArgumentError
from hetbed.runtime.graph import TensorShape
from hetbed.runtime.registry import apply, convert_to_tensor, defop


def _mask(sequence_lengths: Any, steps: Any, dtype: Any) -> Any:
    return _hb.sequence_mask(sequence_lengths, maxlen=steps, dtype=dtype)


def crf_unary_score(tag_indices: Any, sequence_lengths: Any, inputs: Any) -> Any:
    """Sum over each sequence's steps of the score of its tag: [batch]."""
    inputs = convert_to_tensor(inputs)
    tags = _hb.cast(tag_indices, _dt.int32)
    n = _hb.shape(inputs)[2]
    picked = _hb.reduce_sum(inputs * _hb.one_hot(tags, n, dtype=inputs.dtype), axis=2)
    mask = _mask(sequence_lengths, _hb.shape(inputs)[1], inputs.dtype)
    return _hb.reduce_sum(picked * mask, axis=1)


def crf_binary_score(tag_indices: Any, sequence_lengths: Any, transition_params: Any) -> Any:
    """Sum over each sequence's consecutive tag pairs of their transition score: [batch]."""
    trans = convert_to_tensor(transition_params)
    tags = _hb.cast(tag_indices, _dt.int32)
    n = _hb.shape(trans)[0]
    start, end = tags[:, :-1], tags[:, 1:]
    flat = _hb.reshape(trans, [-1])
    pair = _hb.gather(flat, start * n + end)
    steps = _hb.shape(tags)[1]
    mask = _mask(sequence_lengths, steps, trans.dtype)[:, 1:]
    return _hb.reduce_sum(pair * mask, axis=1)


def crf_sequence_score(
    inputs: Any, tag_indices: Any, sequence_lengths: Any, transition_params: Any
) -> Any:
    """The unnormalized score of each tag sequence: unary plus binary."""
    return crf_unary_score(tag_indices, sequence_lengths, inputs) + crf_binary_score(
        tag_indices, sequence_lengths, transition_params
    )


def crf_log_norm(inputs: Any, sequence_lengths: Any, transition_params: Any) -> Any:
    """log of the sum over all tag sequences of exp(score): the forward algorithm, [batch]."""
    inputs = convert_to_tensor(inputs)
    trans = convert_to_tensor(transition_params)
    lengths = _hb.cast(sequence_lengths, _dt.int32)
    first = inputs[:, 0]  # [B, N]
    rest = _hb.transpose(inputs[:, 1:], [1, 0, 2])  # [T-1, B, N]
    steps = _hb.range(1, _hb.shape(inputs)[1])

    def step(alpha, elems):
        x, t = elems
        nxt = _hb.reduce_logsumexp(_hb.expand_dims(alpha, 2) + trans, axis=1) + x
        keep = _hb.expand_dims(_hb.cast(_hb.less(t, lengths), alpha.dtype), 1)
        return nxt * keep + alpha * (1 - keep)  # past its length a sequence's alpha stays

    steps_static = inputs.shape.as_list()[1]
    if steps_static == 1:
        last = first
    elif steps_static is not None:
        last = _hb.scan(step, (rest, steps), initializer=first)[-1]
    else:
        last = _hb.cond(
            _hb.greater(_hb.shape(inputs)[1], 1),
            lambda: _hb.scan(step, (rest, steps), initializer=first)[-1],
            lambda: first,
        )
    norm = _hb.reduce_logsumexp(last, axis=1)
    # a sequence of no steps has no score and no partition function: 0, as TF masks it
    return _hb.where(_hb.greater(lengths, 0), norm, _hb.zeros_like(norm))


def crf_log_likelihood(
    inputs: Any, tag_indices: Any, sequence_lengths: Any, transition_params: Any = None
) -> tuple[Any, Any]:
    """``(log_likelihood [batch], transition_params)``; without ``transition_params`` a
    variable ``transitions`` [num_tags, num_tags] is made (glorot uniform, as TF's)."""
    inputs = convert_to_tensor(inputs)
    n = inputs.shape.as_list()[2] if inputs.shape.ndims == 3 else None
    if inputs.shape.ndims != 3 or n is None:
        raise InvalidArgumentError(
            f"crf_log_likelihood: inputs must be [batch, steps, num_tags] with num_tags known, "
            f"got {inputs.shape}"
        )
    if transition_params is None:
        transition_params = _hb.get_variable("transitions", [n, n], dtype=inputs.dtype)
    score = crf_sequence_score(inputs, tag_indices, sequence_lengths, transition_params)
    norm = crf_log_norm(inputs, sequence_lengths, transition_params)
    return score - norm, transition_params


# ---- Viterbi ---------------------------------------------------------------------------------


def viterbi_decode(score: Any, transition_params: Any) -> tuple[list, float]:
    """The best tag sequence of one sequence's [steps, num_tags] scores (numpy) and its score."""
    score = np.asarray(score)
    trans = np.asarray(transition_params)
    if score.ndim != 2 or score.shape[0] == 0:
        raise ValueError(f"viterbi_decode: score must be [steps >= 1, num_tags], got {score.shape}")
    trellis = np.zeros_like(score)
    back = np.zeros_like(score, dtype=np.int32)
    trellis[0] = score[0]
    for t in range(1, score.shape[0]):
        v = trellis[t - 1][:, None] + trans
        trellis[t] = score[t] + v.max(axis=0)
        back[t] = v.argmax(axis=0)
    best = [int(trellis[-1].argmax())]
    for bp in reversed(back[1:]):
        best.append(int(bp[best[-1]]))
    best.reverse()
    return best, float(trellis[-1].max())


CrfDecode = defop("CrfDecode", differentiable=False)


@CrfDecode.shape
def _crf_decode_shape(op):
    pot = op.inputs[0]
    dims = pot.shape.as_list() if pot.shape.ndims == 3 else [None] * 3
    return [(TensorShape(dims[:2]), _dt.int32), (TensorShape(dims[:1]), pot.dtype)]


@CrfDecode.kernel("cpu", dtypes=(_dt.float16, _dt.float32, _dt.float64))
def _crf_decode(ctx, potentials, trans, lengths):
    pot = np.asarray(potentials)
    batch, steps, _ = pot.shape
    lengths = np.asarray(lengths).astype(np.int64)
    tags = np.zeros((batch, steps), np.int32)
    best = np.zeros(batch, pot.dtype)
    for b in range(batch):
        n = int(min(max(lengths[b], 0), steps))
        if n == 0:
            continue
        seq, sc = viterbi_decode(pot[b, :n], trans)
        tags[b, :n] = seq
        best[b] = sc
    return tags, best


def crf_decode(potentials: Any, transition_params: Any, sequence_length: Any) -> tuple:
    """``(decode_tags [batch, steps] int32, best_score [batch])``: Viterbi in the graph; steps
    beyond a sequence's length get tag 0."""
    ins = [
        convert_to_tensor(potentials),
        convert_to_tensor(transition_params),
        _hb.cast(sequence_length, _dt.int32),
    ]
    tags, score = apply("CrfDecode", ins, {}, "CrfDecode")
    return tags, score


__all__ = [
    "crf_binary_score",
    "crf_decode",
    "crf_log_likelihood",
    "crf_log_norm",
    "crf_sequence_score",
    "crf_unary_score",
    "viterbi_decode",
]
