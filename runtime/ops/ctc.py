"""Connectionist temporal classification (TF1's ``tf.nn.ctc_loss``, ``ctc_greedy_decoder``,
``ctc_beam_search_decoder``).

Inputs are logits ``[max_time, batch, num_classes]`` (``time_major``), the blank is the last
class, and each batch entry is read for its ``sequence_length`` frames. The loss is
-log p(labels | inputs) by the forward-backward recursions in log space over the labels with
blanks between (Graves et al., 2006), with TF's options: ``preprocess_collapse_repeated``
(repeated labels merged before training) and ``ctc_merge_repeated`` (False: repeated
non-blank classes in a path are each a label). Its gradient with respect to the logits is
TF's: softmax minus the posterior of each class at each frame, times the loss's upstream
gradient. The greedy decoder takes each frame's best class, merges repeats and drops blanks; the
beam search is TensorFlow's prefix beam search step for step (its pruning decides which prefixes
survive, so the same rule gives the same paths).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import TensorShape
from ..registry import apply, convert_to_tensor, defop

NEG_INF = -np.inf

CTCLoss = defop("CTCLoss", differentiable=True)
CTCGreedyDecoder = defop("CTCGreedyDecoder", differentiable=False)
CTCBeamSearchDecoder = defop("CTCBeamSearchDecoder", differentiable=False)


def _log_softmax(x: np.ndarray) -> np.ndarray:
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def _lse(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        m = np.maximum(a, b)
        out = m + np.log(np.exp(a - m) + np.exp(b - m))
    return np.where(np.isneginf(m), NEG_INF, out)


def _sequence(ctx: Any, values: np.ndarray, blank: int) -> np.ndarray:
    if values.size and (values.min() < 0 or values.max() >= blank):
        raise InvalidArgumentError(
            f"CTCLoss {ctx.op.name!r}: labels must be in [0, {blank}) (class {blank} is the "
            f"blank), got {values[(values < 0) | (values >= blank)][:3].tolist()}"
        )
    if ctx.attrs["preprocess_collapse_repeated"] and values.size:
        values = values[np.concatenate([[True], values[1:] != values[:-1]])]
    return values


def _one(logp: np.ndarray, lab: np.ndarray, blank: int, merge: bool):
    """(-log p, d(-log p)/d logits) for one sequence: logp [T, C] log-softmax, lab [U]."""
    t_len, n_cls = logp.shape
    ext = np.full(2 * len(lab) + 1, blank, np.int64)
    ext[1::2] = lab
    s_len = len(ext)
    nonblank = ext != blank
    # s -> s+2 skips a blank between two labels: always without merging, else if they differ
    skip = np.zeros(s_len, bool)
    skip[2:] = nonblank[2:] & (~merge | (ext[2:] != ext[:-2]))
    stay = np.ones(s_len, bool) if merge else ~nonblank
    emit = logp[:, ext]  # [T, S]
    alpha = np.full((t_len, s_len), NEG_INF)
    alpha[0, :2] = emit[0, :2]
    for t in range(1, t_len):
        prev = alpha[t - 1]
        a = np.where(stay, prev, NEG_INF)
        a[1:] = _lse(a[1:], prev[:-1])
        a[2:] = _lse(a[2:], np.where(skip[2:], prev[:-2], NEG_INF))
        alpha[t] = a + emit[t]
    beta = np.full((t_len, s_len), NEG_INF)
    beta[-1, -2:] = emit[-1, -2:]
    for t in range(t_len - 2, -1, -1):
        nxt = beta[t + 1]
        b = np.where(stay, nxt, NEG_INF)
        b[:-1] = _lse(b[:-1], nxt[1:])
        b[:-2] = _lse(b[:-2], np.where(skip[2:], nxt[2:], NEG_INF))
        beta[t] = b + emit[t]
    end = alpha[-1, -1] if s_len == 1 else _lse(alpha[-1, -1], alpha[-1, -2])
    log_p = float(end)
    post = alpha + beta - emit  # log of sum over paths through (t, s), times p
    occ = np.full((t_len, n_cls), NEG_INF)
    for k in np.unique(ext):
        cols = post[:, ext == k]
        m = cols.max(axis=1)
        with np.errstate(invalid="ignore"):
            val = m + np.log(np.exp(cols - m[:, None]).sum(axis=1))
        occ[:, k] = np.where(np.isneginf(m), NEG_INF, val)
    grad = np.exp(logp) - np.exp(occ - log_p)
    return -log_p, grad


@CTCLoss.shape
def _ctc_loss_shape(op):
    logits = op.inputs[3]
    if logits.shape.ndims is not None and logits.shape.ndims != 3:
        raise InvalidArgumentError(
            f"CTCLoss {op.name!r}: inputs must be [max_time, batch, num_classes], got "
            f"{logits.shape}"
        )
    dims = logits.shape.as_list() if logits.shape.ndims == 3 else [None] * 3
    return [(TensorShape([dims[1]]), logits.dtype), (TensorShape(dims), logits.dtype)]


@CTCLoss.kernel("cpu")
def _ctc_loss(ctx, indices, values, seq_len, logits):
    logits = np.asarray(logits)
    name = f"CTCLoss {ctx.op.name!r}"
    if logits.dtype not in (np.float32, np.float64):
        raise InvalidArgumentError(f"{name}: inputs must be float32 or float64, not {logits.dtype}")
    t_max, batch, n_cls = logits.shape
    if n_cls == 0:
        raise InvalidArgumentError(f"{name}: inputs need at least one class (the blank)")
    seq_len = np.asarray(seq_len).astype(np.int64)
    if seq_len.shape != (batch,):
        raise InvalidArgumentError(
            f"{name}: sequence_length has shape {seq_len.shape}; the batch is {batch}"
        )
    if batch and (seq_len.min() < 0 or seq_len.max() > t_max):
        raise InvalidArgumentError(
            f"{name}: sequence_length must be in [0, {t_max}], got {seq_len.tolist()}"
        )
    indices, values = np.asarray(indices).astype(np.int64), np.asarray(values).astype(np.int64)
    if indices.ndim != 2 or indices.shape[1] != 2 or len(indices) != len(values):
        raise InvalidArgumentError(f"{name}: labels must be a 2-D SparseTensor [batch, time]")
    if len(indices) and (indices[:, 0].min() < 0 or indices[:, 0].max() >= batch):
        raise InvalidArgumentError(f"{name}: a label's batch index is outside [0, {batch})")
    if len(indices) > 1:
        seen: dict = {}
        for k, key in enumerate(map(tuple, indices.tolist())):
            if key in seen:
                raise InvalidArgumentError(
                    f"{name}: label SparseTensor is not valid: indices[{k}] = {list(key)} is "
                    "repeated"
                )
            seen[key] = k
    blank = n_cls - 1
    merge = ctx.attrs["ctc_merge_repeated"]
    loss = np.zeros(batch, logits.dtype)
    grad = np.zeros_like(logits)
    order = np.lexsort((indices[:, 1], indices[:, 0]))
    for b in range(batch):
        lab = _sequence(ctx, values[order][indices[order][:, 0] == b], blank)
        t_len = int(seq_len[b])
        repeats = int(np.sum(lab[1:] == lab[:-1])) if merge else 0
        if len(lab) + repeats > t_len:
            if ctx.attrs["ignore_longer_outputs_than_inputs"]:
                continue
            raise InvalidArgumentError(
                f"{name}: not enough time for target transition sequence of batch entry {b} "
                f"(required: {len(lab) + repeats}, available: {t_len}); pass "
                "ignore_longer_outputs_than_inputs=True to skip such entries"
            )
        if t_len == 0:  # no frames and no labels: the empty labeling, probability 1
            continue
        logp = _log_softmax(logits[:t_len, b].astype(np.float64))
        nll, g = _one(logp, lab, blank, merge)
        loss[b] = nll
        grad[:t_len, b] = g
    return loss, grad


@CTCLoss.gradient
def _ctc_loss_grad(op, grad_loss, _unused):
    from . import manip

    g = manip.expand_dims(manip.expand_dims(grad_loss, 0), 2)
    return [None, None, None, g * op.outputs[1]]


def ctc_loss(
    labels: Any,
    inputs: Any = None,
    sequence_length: Any = None,
    preprocess_collapse_repeated: bool = False,
    ctc_merge_repeated: bool = True,
    ignore_longer_outputs_than_inputs: bool = False,
    time_major: bool = True,
    logits: Any = None,
) -> Any:
    """TF1's ``tf.nn.ctc_loss``: -log p(labels | inputs) per batch entry (labels an int32
    SparseTensor [batch, max_label_length], inputs logits, the blank the last class)."""
    from .manip import transpose
    from .sparse import _as_sparse

    inputs = logits if inputs is None else inputs
    if sequence_length is None:
        raise TypeError("ctc_loss: sequence_length is required")
    sp = _as_sparse(labels, "ctc_loss", "labels")
    x = convert_to_tensor(inputs)
    if not time_major:
        x = transpose(x, [1, 0, 2])
    attrs = {
        "preprocess_collapse_repeated": bool(preprocess_collapse_repeated),
        "ctc_merge_repeated": bool(ctc_merge_repeated),
        "ignore_longer_outputs_than_inputs": bool(ignore_longer_outputs_than_inputs),
    }
    ins = [
        convert_to_tensor(sp.indices, _dt.int64),
        convert_to_tensor(sp.values, _dt.int32),
        convert_to_tensor(sequence_length, _dt.int32),
        x,
    ]
    return apply("CTCLoss", ins, attrs, "CTCLoss")[0]


# ---- decoders --------------------------------------------------------------------------------


def _decoded_shape(op, paths: int):
    outs = []
    for _ in range(paths):
        outs += [
            (TensorShape([None, 2]), _dt.int64),
            (TensorShape([None]), _dt.int64),
            (TensorShape([2]), _dt.int64),
        ]
    logits = op.inputs[0]
    batch = logits.shape.as_list()[1] if logits.shape.ndims == 3 else None
    outs.append((TensorShape([batch, paths]), logits.dtype))
    return outs


def _as_sparse_outputs(seqs: list) -> list:
    idx = [(b, i) for b, s in enumerate(seqs) for i in range(len(s))]
    vals = [v for s in seqs for v in s]
    width = max((len(s) for s in seqs), default=0)
    return [
        np.asarray(idx, np.int64).reshape(-1, 2),
        np.asarray(vals, np.int64),
        np.asarray([len(seqs), width], np.int64),
    ]


def _check_decoder(ctx, logits, seq_len):
    logits = np.asarray(logits)
    if logits.ndim != 3:
        raise InvalidArgumentError(f"{ctx.op.type} {ctx.op.name!r}: inputs must be 3-D")
    if logits.shape[2] == 0:
        raise InvalidArgumentError(
            f"{ctx.op.type} {ctx.op.name!r}: inputs need at least one class (the blank)"
        )
    seq_len = np.asarray(seq_len).astype(np.int64)
    if seq_len.shape != (logits.shape[1],) or (
        len(seq_len) and (seq_len.min() < 0 or seq_len.max() > logits.shape[0])
    ):
        raise InvalidArgumentError(
            f"{ctx.op.type} {ctx.op.name!r}: sequence_length {seq_len.tolist()} does not fit "
            f"inputs of shape {logits.shape}"
        )
    return logits, seq_len


CTCGreedyDecoder.shape(lambda op: _decoded_shape(op, 1))


@CTCGreedyDecoder.kernel("cpu", dtypes=(_dt.float32, _dt.float64))
def _greedy(ctx, logits, seq_len):
    logits, seq_len = _check_decoder(ctx, logits, seq_len)
    blank = logits.shape[2] - 1
    seqs, score = [], np.zeros((logits.shape[1], 1), logits.dtype)
    for b in range(logits.shape[1]):
        frames = logits[: seq_len[b], b]
        best = frames.argmax(axis=1)
        score[b, 0] = -frames.max(axis=1).sum() if len(frames) else 0
        out, prev = [], -1
        for c in best.tolist():
            if c != blank and not (ctx.attrs["merge_repeated"] and c == prev):
                out.append(c)
            prev = c
        seqs.append(out)
    return (*_as_sparse_outputs(seqs), score)


def ctc_greedy_decoder(inputs: Any, sequence_length: Any, merge_repeated: bool = True):
    """TF1's: ``([decoded SparseTensor], neg_sum_logits [batch, 1])`` from each frame's most
    likely class (repeats merged, blanks dropped)."""
    from .sparse import SparseTensor

    ins = [convert_to_tensor(inputs), convert_to_tensor(sequence_length, _dt.int32)]
    out = apply("CTCGreedyDecoder", ins, {"merge_repeated": bool(merge_repeated)}, "CTCGreedy")
    return [SparseTensor(out[0], out[1], out[2])], out[3]


CTCBeamSearchDecoder.shape(lambda op: _decoded_shape(op, op.attrs["top_paths"]))


class _Prefix:
    """A node of the beam's prefix trie: probabilities (log) of the prefix ending in a blank,
    in its last label, and in all, at the previous frame (``old``) and this one (``new``)."""

    __slots__ = ("parent", "label", "children", "old", "new")

    def __init__(self, parent: _Prefix | None, label: int):
        self.parent, self.label, self.children = parent, label, {}
        self.old = [NEG_INF, NEG_INF, NEG_INF]
        self.new = [NEG_INF, NEG_INF, NEG_INF]

    def active(self) -> bool:
        return self.new[2] != NEG_INF

    def child(self, c: int) -> _Prefix:
        node = self.children.get(c)
        if node is None:
            node = self.children[c] = _Prefix(self, c)
        return node

    def labels(self, merge: bool) -> list:
        out, node, prev = [], self, -1
        while node.parent is not None:
            if not merge or node.label != prev:
                out.append(node.label)
            prev, node = node.label, node.parent
        return out[::-1]


def _beam(logp: np.ndarray, blank: int, width: int, top: int, merge: bool):
    """TF's CTC beam search, step for step (tensorflow/core/util/ctc/ctc_beam_search.h): the
    beam's prefixes first carry on (a blank, or their last label again, or their last label
    newly reached from their parent when it is in the beam), then each prefix still above the
    beam's bottom grows a child per label; a child that enters a full beam pushes out the
    bottom, which is then inactive (its probability forgotten) for the rest of the frame."""
    import heapq

    root = _Prefix(None, -1)
    root.new = [0.0, NEG_INF, 0.0]
    leaves: list = [(0.0, 0, root)]  # a min-heap on the new total probability
    tick = 1
    for frame in logp:
        branches = [e for _, _, e in sorted(leaves, key=lambda x: (-x[0], x[1]))]
        leaves = []
        for b in branches:
            b.old = list(b.new)
        for b in branches:
            if b.parent is not None:
                if b.parent.active():
                    prev = b.parent.old[0] if b.label == b.parent.label else b.parent.old[2]
                    b.new[1] = np.logaddexp(b.new[1], prev)
                b.new[1] += frame[b.label]
            b.new[0] = b.old[2] + frame[blank]
            b.new[2] = np.logaddexp(b.new[0], b.new[1])
            heapq.heappush(leaves, (b.new[2], tick, b))
            tick += 1

        def candidate(total: float, leaves: list = leaves) -> bool:
            return total > NEG_INF and (len(leaves) < width or total > leaves[0][0])

        for b in branches:
            if not candidate(b.old[2]):
                continue
            for c in range(len(frame)):
                if c == blank:
                    continue
                ch = b.child(c)
                if ch.active():
                    continue
                prev = b.old[0] if c == b.label else b.old[2]
                ch.new = [NEG_INF, prev + frame[c], prev + frame[c]]
                if candidate(ch.new[2]):
                    if len(leaves) == width:
                        _, _, bottom = heapq.heappop(leaves)
                        bottom.new = [NEG_INF, NEG_INF, NEG_INF]
                    heapq.heappush(leaves, (ch.new[2], tick, ch))
                    tick += 1
                else:
                    ch.old = [NEG_INF, NEG_INF, NEG_INF]
                    ch.new = [NEG_INF, NEG_INF, NEG_INF]
    best = sorted(leaves, key=lambda x: (-x[0], x[1]))[:top]
    out = [(e.labels(merge), float(e.new[2])) for _, _, e in best]
    while len(out) < top:
        out.append(([], NEG_INF))
    return out


@CTCBeamSearchDecoder.kernel("cpu", dtypes=(_dt.float32, _dt.float64))
def _beam_search(ctx, logits, seq_len):
    logits, seq_len = _check_decoder(ctx, logits, seq_len)
    at = ctx.attrs
    blank = logits.shape[2] - 1
    top = at["top_paths"]
    per_path: list[list] = [[] for _ in range(top)]
    scores = np.zeros((logits.shape[1], top), logits.dtype)
    for b in range(logits.shape[1]):
        logp = _log_softmax(logits[: seq_len[b], b].astype(np.float64))
        for k, (seq, lp) in enumerate(_beam(logp, blank, at["beam_width"], top, at["merge"])):
            per_path[k].append(seq)
            scores[b, k] = lp
    outs: list = []
    for seqs in per_path:
        outs += _as_sparse_outputs(seqs)
    return (*outs, scores)


def ctc_beam_search_decoder(
    inputs: Any,
    sequence_length: Any,
    beam_width: int = 100,
    top_paths: int = 1,
    merge_repeated: bool = True,
):
    """TF1's: ``(decoded, log_probabilities)``: the ``top_paths`` most probable labelings
    (SparseTensors) found by a beam of ``beam_width`` prefixes, and their log probabilities
    [batch, top_paths]."""
    from .sparse import SparseTensor

    if int(top_paths) < 1 or int(beam_width) < int(top_paths):
        raise InvalidArgumentError(
            f"ctc_beam_search_decoder: need 1 <= top_paths <= beam_width, got {top_paths}, "
            f"{beam_width}"
        )
    attrs = {"beam_width": int(beam_width), "top_paths": int(top_paths)}
    attrs["merge"] = bool(merge_repeated)
    ins = [convert_to_tensor(inputs), convert_to_tensor(sequence_length, _dt.int32)]
    out = apply("CTCBeamSearchDecoder", ins, attrs, "CTCBeamSearchDecoder")
    decoded = [SparseTensor(*out[3 * k : 3 * k + 3]) for k in range(int(top_paths))]
    return decoded, out[-1]


__all__ = ["ctc_beam_search_decoder", "ctc_greedy_decoder", "ctc_loss"]
