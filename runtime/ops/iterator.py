"""Iterator ops: the graph side of ``tf.data`` (``hetbed.data``).

A dataset is a Python object that yields elements (flat lists of numpy arrays); the graph only
refers to it by index in a per-graph table (``register_dataset``), so graphs stay plain data.
``IteratorGetNext`` returns the next element of the iterator named by its ``iterator`` attr and
raises ``OutOfRangeError`` at the end; ``MakeIterator`` (an initializable iterator's
``initializer``) starts it over. The iterator's position is per session, like TF's resources:
two sessions on one graph read the dataset independently. A one-shot iterator starts on its
first ``get_next``; an initializable one raises ``FailedPreconditionError`` until initialized.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import FailedPreconditionError, InvalidArgumentError, OutOfRangeError
from ..graph import TensorShape
from ..registry import Cost, defop

_DATASETS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def register_dataset(graph: Any, dataset: Any) -> int:
    """Keep ``dataset`` alive with ``graph``; return its index for the ops' ``dataset`` attr."""
    table = _DATASETS.setdefault(graph, [])
    table.append(dataset)
    return len(table) - 1


def _dataset(op: Any) -> Any:
    try:
        return _DATASETS[op.graph][op.attrs["dataset"]]
    except (KeyError, IndexError):
        raise FailedPreconditionError(
            f"{op.type} {op.name}: its dataset is not in this process (graphs with iterators "
            "cannot be shipped to other processes)",
            op,
        ) from None


class _State:
    """One session's position in one iterator."""

    def __init__(self) -> None:
        self.it: Any = None


def _state(ctx: Any) -> _State:
    key = "iterator:" + ctx.attrs["iterator"]
    st = ctx.resources.get(key)
    if st is None:
        st = ctx.resources[key] = _State()
    return st


def _no_cost(op: Any, ins: list, outs: list) -> Cost:
    return Cost()


MakeIterator = defop("MakeIterator", stateful=True, differentiable=False, cost=_no_cost)


@MakeIterator.shape
def _make_iterator_shape(op):
    return []


@MakeIterator.kernel("cpu")
def _make_iterator(ctx, *captured):
    """Start the iterator; ``captured`` are the values of the graph tensors the dataset reads
    (placeholders fed with this run), in the order of its ``_captures``."""
    ds = _dataset(ctx.op)
    _state(ctx).it = iter(ds._elements(_env(ds, captured)))
    return None


def _env(ds: Any, captured: tuple) -> dict:
    """The captured graph tensors of ``ds`` with their values in this run."""
    return dict(
        zip(ds._captures, (v if isinstance(v, np.ndarray) else np.asarray(v) for v in captured))
    )


IteratorGetNext = defop("IteratorGetNext", stateful=True, differentiable=False, cost=_no_cost)


@IteratorGetNext.shape
def _get_next_shape(op):
    return [
        (TensorShape(s), _dt.as_dtype(d))
        for s, d in zip(op.attrs["output_shapes"], op.attrs["output_types"])
    ]


@IteratorGetNext.kernel("cpu")
def _get_next(ctx, *captured):
    st = _state(ctx)
    if st.it is None:
        if not ctx.attrs["one_shot"]:
            raise FailedPreconditionError(
                f"IteratorGetNext {ctx.op.name}: the iterator {ctx.attrs['iterator']!r} has not "
                "been initialized; run its initializer first",
                ctx.op,
            )
        ds = _dataset(ctx.op)
        st.it = iter(ds._elements(_env(ds, captured)))
    try:
        comps = next(st.it)
    except StopIteration:
        raise OutOfRangeError(
            f"End of sequence (iterator {ctx.attrs['iterator']!r}, op {ctx.op.name})", ctx.op
        ) from None
    out = []
    for i, (c, d, s) in enumerate(
        zip(comps, ctx.attrs["output_types"], ctx.attrs["output_shapes"])
    ):
        a = np.asarray(c, dtype=_dt.as_dtype(d).np)
        if not TensorShape(s).is_compatible_with(TensorShape(list(a.shape))):
            raise InvalidArgumentError(
                f"IteratorGetNext {ctx.op.name}: component {i} has shape {list(a.shape)}, "
                f"not compatible with the dataset's {s}",
                ctx.op,
            )
        out.append(ctx.device.to_device(a))
    return out[0] if len(out) == 1 else tuple(out)
