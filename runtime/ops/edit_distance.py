"""``tf.edit_distance`` (TF1 semantics): the Levenshtein distance between the sequences of two
SparseTensors, one per position of their dense shape without its last dimension.

The values of a sequence are those whose indices share all coordinates but the last, in index
order. The output's shape is the larger of the two dense shapes (all dimensions but the last).
``normalize`` divides by the truth's length: a position with a hypothesis but no truth gives inf,
one with neither gives 0. Values may be numbers or strings; the kernel runs on the CPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import TensorShape
from ..registry import apply, defop

EditDistance = defop("EditDistance", differentiable=False)


def _rank(op: Any) -> int | None:
    for t in (op.inputs[0], op.inputs[3]):
        if t.shape.ndims == 2 and t.shape.dims[1] is not None:
            return t.shape.dims[1]
    for t in (op.inputs[2], op.inputs[5]):
        if t.shape.ndims == 1 and t.shape.dims[0] is not None:
            return t.shape.dims[0]
    return None


@EditDistance.shape
def _edit_distance_shape(op):
    hi, hv, hs, ti, tv, ts = op.inputs
    if hv.dtype != tv.dtype:
        raise InvalidArgumentError(
            f"EditDistance: hypothesis values are {hv.dtype.name} but truth values are "
            f"{tv.dtype.name}"
        )
    r = _rank(op)
    if r is not None and r < 1:
        raise InvalidArgumentError("EditDistance: the SparseTensors must have rank >= 1")
    shape = TensorShape(None) if r is None else TensorShape([None] * (r - 1))
    return [(shape, _dt.float32)]


def _expected_shapes(op, in_shapes):
    """Shape-only simulation: one position per truth value (the dense shape is data)."""
    r = in_shapes[5][0] if in_shapes[5] else 1
    n = in_shapes[4][0] if in_shapes[4] else 1
    return [(n,) + (1,) * max(r - 2, 0) if r > 1 else ()]


EditDistance.expected_shapes = _expected_shapes


def _levenshtein(a: list, b: list) -> int:
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y))
        prev = cur
    return prev[-1]


def _sequences(ctx: Any, which: str, idx: Any, vals: Any, shape: Any) -> dict:
    idx = np.asarray(idx, dtype=np.int64)
    shape = np.asarray(shape, dtype=np.int64).reshape(-1)
    if idx.ndim != 2 or idx.shape[1] != shape.size or idx.shape[0] != len(vals):
        raise InvalidArgumentError(
            f"EditDistance {ctx.op.name!r}: {which} indices of shape {list(idx.shape)} do not fit "
            f"{len(vals)} values and dense_shape {shape.tolist()}",
            ctx.op,
        )
    if idx.size and ((idx < 0).any() or (idx[:, :-1] >= shape[:-1]).any()):
        raise InvalidArgumentError(
            f"EditDistance {ctx.op.name!r}: a {which} index is outside dense_shape "
            f"{shape.tolist()}",
            ctx.op,
        )
    order = np.lexsort(idx.T[::-1]) if idx.size else np.arange(len(vals))
    seqs: dict = {}
    for k in order:
        seqs.setdefault(tuple(idx[k, :-1].tolist()), []).append(vals[k])
    return seqs


@EditDistance.kernel("cpu")
def _edit_distance(ctx, hi, hv, hs, ti, tv, ts):
    hs = np.asarray(hs, dtype=np.int64).reshape(-1)
    ts = np.asarray(ts, dtype=np.int64).reshape(-1)
    if hs.size != ts.size:
        raise InvalidArgumentError(
            f"EditDistance {ctx.op.name!r}: hypothesis dense_shape {hs.tolist()} and truth "
            f"dense_shape {ts.tolist()} differ in rank",
            ctx.op,
        )
    hyp = _sequences(ctx, "hypothesis", hi, list(hv.reshape(-1)), hs)
    truth = _sequences(ctx, "truth", ti, list(tv.reshape(-1)), ts)
    out = np.zeros(tuple(np.maximum(hs[:-1], ts[:-1]).tolist()), dtype=np.float32)
    normalize = ctx.attrs["normalize"]
    with np.errstate(divide="ignore", invalid="ignore"):
        for pos in set(hyp) | set(truth):
            h, t = hyp.get(pos, []), truth.get(pos, [])
            d = np.float32(_levenshtein(h, t))
            out[pos] = d / np.float32(len(t)) if normalize else d
    return out


def edit_distance(
    hypothesis: Any, truth: Any, normalize: bool = True, name: str = "edit_distance"
) -> Any:
    """Levenshtein distance between the sequences of two SparseTensors of the same rank, per
    position of all but their last dimension (float32); ``normalize`` divides by the truth's
    length."""
    from .strings import SparseTensor, SparseTensorValue

    parts = []
    for what, sp in (("hypothesis", hypothesis), ("truth", truth)):
        if isinstance(sp, SparseTensorValue):
            sp = SparseTensor(*sp)
        if not isinstance(sp, SparseTensor):
            raise TypeError(f"edit_distance: {what} must be a SparseTensor, got {sp!r}")
        parts += [sp.indices, sp.values, sp.dense_shape]
    return apply("EditDistance", parts, {"normalize": bool(normalize)}, name)
