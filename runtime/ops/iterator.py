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
    _state(ctx).it = iter(ds._elements(_env(ds, captured, ctx)))
    return None


#: the env key of the session resources of the op reading a dataset (its lookup tables)
RESOURCES = "__session_resources__"


def _env(ds: Any, captured: tuple, ctx: Any = None) -> dict:
    """The captured graph tensors of ``ds`` with their values in this run (and the reading op's
    session resources, where functions of the dataset find their lookup tables)."""
    # copies: the values as they are when the dataset starts (TF captures by value), not the
    # caller's arrays or variables, which may change while it is read
    env: dict = dict(zip(ds._captures, (np.array(v, copy=True) for v in captured)))
    if ctx is not None:
        env[RESOURCES] = ctx.resources
    return env


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
        st.it = iter(ds._elements(_env(ds, captured, ctx)))
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


# ---- feedable iterators: a string handle names the iterator a get_next reads -----------------

#: what a handle string starts with (``Iterator.string_handle``)
HANDLE_PREFIX = "hetbed-iterator"


def make_handle(name: str, dataset: int, one_shot: bool) -> bytes:
    """The handle of iterator ``name`` (its dataset's index, whether it starts itself)."""
    return f"{HANDLE_PREFIX}:{int(one_shot)}:{int(dataset)}:{name}".encode()


IteratorGetNextFromHandle = defop(
    "IteratorGetNextFromHandle", stateful=True, differentiable=False, cost=_no_cost
)
IteratorGetNextFromHandle.shape(_get_next_shape)


@IteratorGetNextFromHandle.kernel("cpu")
def _get_next_from_handle(ctx, handle):
    """The next element of the iterator the fed ``handle`` names (TF1's feedable iterator,
    ``Iterator.from_string_handle``); the types and shapes must be this op's."""
    raw = handle.item() if isinstance(handle, np.ndarray) else handle
    raw = raw.decode() if isinstance(raw, bytes) else str(raw)
    parts = raw.split(":", 3)
    if len(parts) != 4 or parts[0] != HANDLE_PREFIX:
        raise InvalidArgumentError(
            f"{ctx.op.type} {ctx.op.name}: {raw[:60]!r} is not an iterator handle (run an "
            "iterator's string_handle() to get one)",
            ctx.op,
        )
    one_shot, index, name = parts[1] == "1", int(parts[2]), parts[3]
    st = ctx.resources.get("iterator:" + name)
    if st is None:
        st = ctx.resources["iterator:" + name] = _State()
    if st.it is None:
        if not one_shot:
            raise FailedPreconditionError(
                f"{ctx.op.type} {ctx.op.name}: the iterator {name!r} has not been initialized; "
                "run its initializer first",
                ctx.op,
            )
        try:
            ds = _DATASETS[ctx.op.graph][index]
        except (KeyError, IndexError):
            raise FailedPreconditionError(
                f"{ctx.op.type} {ctx.op.name}: the iterator {name!r} is not of this graph",
                ctx.op,
            ) from None
        if ds._captures:
            raise FailedPreconditionError(
                f"{ctx.op.type} {ctx.op.name}: the one-shot iterator {name!r} reads graph "
                "tensors; start it with its own get_next (or make it initializable)",
                ctx.op,
            )
        st.it = iter(ds._elements({}))
    return _get_next(_Handled(ctx, name, one_shot))


class _Handled:
    """``ctx`` as ``_get_next`` sees it for the iterator a handle names."""

    def __init__(self, ctx: Any, name: str, one_shot: bool):
        self._ctx = ctx
        self.attrs = dict(ctx.attrs, iterator=name, one_shot=one_shot)

    def __getattr__(self, key: str) -> Any:
        return getattr(self._ctx, key)


# ---- Dataset.reduce: a fold over a dataset, computed when the op runs ----------------------------

DatasetReduce = defop("DatasetReduce", stateful=True, differentiable=False, cost=_no_cost)


@DatasetReduce.shape
def _reduce_shape(op):
    return [
        (TensorShape(s), _dt.as_dtype(d))
        for s, d in zip(op.attrs["output_shapes"], op.attrs["output_types"])
    ]


@DatasetReduce.kernel("cpu")
def _reduce(ctx, *captured):
    """The last of the states the dataset (``windows.reduce_states``) yields, one per element:
    the fold's result; the initial state when the dataset is empty."""
    ds = _dataset(ctx.op)
    last = None
    for last in ds._elements(_env(ds, captured, ctx)):  # noqa: B007 - only the last is kept
        pass
    if last is None:
        last = ds._initial
    outs = tuple(
        np.asarray(v, dtype=_dt.as_dtype(d).np) for v, d in zip(last, ctx.attrs["output_types"])
    )
    return outs if len(outs) != 1 else outs[0]


# ---- get_single_element: a dataset's only element ------------------------------------------------

DatasetSingleElement = defop(
    "DatasetSingleElement", stateful=True, differentiable=False, cost=_no_cost, shape=_reduce_shape
)


@DatasetSingleElement.kernel("cpu")
def _single_element(ctx, *captured):
    """The dataset's one element (read from its start on every run); an empty dataset or one
    with a second element is an InvalidArgumentError, as TF's."""
    ds = _dataset(ctx.op)
    it = iter(ds._elements(_env(ds, captured, ctx)))
    first = next(it, None)
    if first is None:
        raise InvalidArgumentError(f"DatasetSingleElement {ctx.op.name!r}: Dataset was empty.")
    if next(it, None) is not None:
        raise InvalidArgumentError(
            f"DatasetSingleElement {ctx.op.name!r}: Dataset had more than one element."
        )
    outs = tuple(
        np.asarray(v, dtype=_dt.as_dtype(d).np) for v, d in zip(first, ctx.attrs["output_types"])
    )
    return outs if len(outs) != 1 else outs[0]
