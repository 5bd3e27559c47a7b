"""``GatherTree`` (TF's ``gather_tree``, used by contrib.seq2seq's beam search): the full
sequences of a beam search, recovered from each step's ids and parent beams.

For batch entry ``b`` and beam ``k`` the sequence is read backwards from step
``L = min(max_sequence_lengths[b], max_time) - 1``: ``out[L] = step_ids[L, b, k]``, then each
earlier step takes the id of the beam the later step came from
(``out[t] = step_ids[t, b, p]``, ``p = parent_ids[t + 1, b, p']``). Steps at or past ``L + 1``
hold ``end_token``, and so does every step after the first ``end_token`` of a sequence. A
parent index outside ``[0, beam_width)`` ends the walk with ``-1`` at that step (TF's answer to
a broken trajectory).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..registry import apply, convert_to_tensor, defop

GatherTree = defop("GatherTree", differentiable=False)


@GatherTree.shape
def _gather_tree_shape(op):
    ids = op.inputs[0]
    return [(ids.shape, ids.dtype)]


def gather_tree_np(step_ids: Any, parent_ids: Any, lengths: Any, end_token: int, where: str):
    """The kernel on numpy arrays (``where`` names the op in errors)."""
    step_ids, parent_ids = np.asarray(step_ids), np.asarray(parent_ids)
    lengths = np.asarray(lengths).astype(np.int64)
    if step_ids.ndim != 3 or parent_ids.shape != step_ids.shape:
        raise InvalidArgumentError(
            f"{where}: step_ids and parent_ids must be [max_time, batch, beam] of one shape, got "
            f"{list(step_ids.shape)} and {list(parent_ids.shape)}"
        )
    t_max, batch, beam = step_ids.shape
    if lengths.shape != (batch,):
        raise InvalidArgumentError(
            f"{where}: max_sequence_lengths must be [batch] = [{batch}], got {list(lengths.shape)}"
        )
    end = step_ids.dtype.type(end_token)
    out = np.full(step_ids.shape, end, step_ids.dtype)
    last = np.minimum(lengths, t_max) - 1  # [batch]
    cur = np.broadcast_to(np.arange(beam), (batch, beam)).copy()  # the beam read at step t
    alive = np.zeros((batch, beam), bool)
    bi = np.arange(batch)[:, None]
    for t in range(t_max - 1, -1, -1):
        start = (last == t)[:, None] & ~alive
        cur = np.where(start, np.arange(beam)[None, :], cur)
        alive = alive | start
        if not alive.any():
            continue
        bad = alive & ((cur < 0) | (cur >= beam))
        safe = np.clip(cur, 0, beam - 1)
        out[t] = np.where(alive, step_ids[t][bi, safe], out[t])
        out[t][bad] = -1
        alive = alive & ~bad
        cur = np.where(alive, parent_ids[t][bi, safe], cur)
    # everything after a sequence's first end_token is end_token
    is_end = out == end
    seen_before = (np.cumsum(is_end, axis=0) - is_end) > 0
    out[seen_before] = end
    return out


@GatherTree.kernel("cpu")
def _gather_tree(ctx, step_ids, parent_ids, lengths, end_token):
    return gather_tree_np(
        step_ids, parent_ids, lengths, int(end_token), f"GatherTree {ctx.op.name!r}"
    )


def gather_tree(
    step_ids: Any, parent_ids: Any, max_sequence_lengths: Any, end_token: Any, name: Any = None
) -> Any:
    """Beam search sequences ``[max_time, batch, beam]`` from per-step ids and parents."""
    ids = convert_to_tensor(step_ids, _dt.int32)
    parents = convert_to_tensor(parent_ids, ids.dtype)
    lengths = convert_to_tensor(max_sequence_lengths, _dt.int32)
    end = convert_to_tensor(end_token, ids.dtype)
    if ids.shape.ndims not in (None, 3):
        raise ValueError(f"gather_tree: step_ids must be [max_time, batch, beam], got {ids.shape}")
    return apply("GatherTree", [ids, parents, lengths, end], {}, name or "GatherTree")


__all__ = ["gather_tree"]
