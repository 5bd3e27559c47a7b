"""TF1's functional ops over the first dimension of tensors: ``map_fn``, ``scan``, ``foldl``,
``foldr``. Over a first dimension known when the graph is built they are unrolled (one copy of
``fn``'s ops per slice); over one known only when the graph runs they are a ``while_loop`` with one
iteration per slice, the results appended row by row (``_appended``, ops/loop.py AppendRow)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .errors import InvalidArgumentError
from .graph import Tensor, get_default_graph
from .nest import _flatten, _pack
from .registry import apply_op, convert_to_tensor
from .while_loop import while_loop


def _leading(elems: Any, what: str) -> tuple[list, int, bool]:
    """(flat tensors, their common static leading size, whether ``elems`` was a structure)."""
    structured = isinstance(elems, (list, tuple, dict))
    flat = [convert_to_tensor(e) for e in _flatten(elems)]
    if any(t.shape.ndims == 0 for t in flat):
        names = ", ".join(f"{t.name} {t.shape}" for t in flat)
        raise InvalidArgumentError(f"{what}: the elements need a first dimension; got {names}")
    sizes = {t.shape.dims[0] if t.shape.ndims else None for t in flat}
    if len(sizes) != 1 or None in sizes:
        return flat, None, structured  # known when the graph runs: a while_loop goes over it
    return flat, int(sizes.pop()), structured


def _stacked(seq: list) -> Any:
    """Structures of tensors, one per slice, as one structure of stacked tensors."""
    from .ops.manip import stack

    leaves = [_flatten(r) for r in seq]
    stacked = [stack([leaf[k] for leaf in leaves]) for k in range(len(leaves[0]))]
    return _pack(seq[0], stacked) if isinstance(seq[0], (list, tuple, dict)) else stacked[0]


def _slices(elems: Any, flat: list, i: int, structured: bool) -> Any:
    items = [t[i] for t in flat]
    return _pack(elems, items) if structured else items[0]


def map_fn(
    fn: Callable,
    elems: Any,
    dtype: Any = None,
    parallel_iterations: Any = None,
    back_prop: bool = True,
    swap_memory: bool = False,
    infer_shape: bool = True,
    name: str | None = None,
) -> Any:
    """TF1's ``tf.map_fn`` for elements whose first dimension is known when the graph is built:
    ``fn`` applied to each slice along it (a structure of tensors in, a structure out), the
    results stacked. Unrolled: one copy of ``fn``'s ops per slice."""

    g = get_default_graph()
    with g.name_scope(name or "map"):
        flat, n, structured = _leading(elems, "map_fn")
        if n is None:
            return _map_loop(fn, elems, flat, structured, dtype, parallel_iterations)
        if n == 0:
            raise InvalidArgumentError("map_fn: no elements (a first dimension of 0)")
        return _stacked([fn(_slices(elems, flat, i, structured)) for i in range(n)])


def scan(
    fn: Callable,
    elems: Any,
    initializer: Any = None,
    parallel_iterations: Any = None,
    back_prop: bool = True,
    swap_memory: bool = False,
    infer_shape: bool = True,
    reverse: bool = False,
    name: str | None = None,
) -> Any:
    """TF1's ``tf.scan`` for a first dimension known when the graph is built: ``acc = fn(acc,
    x)`` over the slices (from the last with ``reverse``), the accumulators stacked; without
    ``initializer`` the first slice is the first accumulator. Unrolled."""
    g = get_default_graph()
    with g.name_scope(name or "scan"):
        flat, n, structured = _leading(elems, "scan")
        if n is None:
            return _scan_loop(
                fn, elems, flat, structured, initializer, reverse, parallel_iterations
            )
        order = list(range(n))[::-1] if reverse else list(range(n))
        if initializer is None:
            if not order:
                raise InvalidArgumentError("scan: no elements and no initializer")
            acc = _slices(elems, flat, order[0], structured)
            results = {order[0]: acc}
            order = order[1:]
        else:
            acc, results = initializer, {}
        for i in order:
            acc = fn(acc, _slices(elems, flat, i, structured))
            results[i] = acc
        return _stacked([results[i] for i in sorted(results)])


def foldl(
    fn: Callable,
    elems: Any,
    initializer: Any = None,
    parallel_iterations: int = 10,
    back_prop: bool = True,
    swap_memory: bool = False,
    name: str | None = None,
):
    """TF1's ``tf.foldl`` (first dimension known when the graph is built; unrolled, so
    ``parallel_iterations``, ``back_prop`` and ``swap_memory`` change nothing)."""
    return _fold(fn, elems, initializer, False, name or "foldl")


def foldr(
    fn: Callable,
    elems: Any,
    initializer: Any = None,
    parallel_iterations: int = 10,
    back_prop: bool = True,
    swap_memory: bool = False,
    name: str | None = None,
):
    """TF1's ``tf.foldr``: ``foldl`` from the last slice."""
    return _fold(fn, elems, initializer, True, name or "foldr")


def _fold(fn: Callable, elems: Any, initializer: Any, reverse: bool, name: str) -> Any:
    g = get_default_graph()
    with g.name_scope(name):
        flat, n, structured = _leading(elems, name)
        if n is None:
            return _fold_loop(fn, elems, flat, structured, initializer, reverse)
        order = list(range(n))[::-1] if reverse else list(range(n))
        if initializer is None:
            if not order:
                raise InvalidArgumentError(f"{name}: no elements and no initializer")
            acc, order = _slices(elems, flat, order[0], structured), order[1:]
        else:
            acc = initializer
        for i in order:
            acc = fn(acc, _slices(elems, flat, i, structured))
        return acc


# ---- over a first dimension known only when the graph runs ---------------------------------


def _slice_at(elems: Any, flat: list, i: Tensor, structured: bool) -> Any:
    from .ops.manip import gather

    items = [gather(t, i) for t in flat]
    return _pack(elems, items) if structured else items[0]


def _position(i: Tensor, n: Tensor, reverse: bool) -> Tensor:
    from .ops.math import subtract

    return subtract(subtract(n, i), convert_to_tensor(np.int32(1))) if reverse else i


def _appended(acc: Tensor, v: Tensor, first: Tensor, front: bool) -> Tensor:
    """``acc`` with ``v`` added as a new row at its end (its front with ``front``), or ``v`` alone
    as the first row when ``first``."""
    from .control_flow import cond
    from .ops.manip import concat, expand_dims

    if not front:  # amortized O(row) per append (ops/loop.py AppendRow)
        return apply_op("AppendRow", [acc, v, first], name="AppendRow").outputs[0]
    row = expand_dims(v, 0)
    return cond(first, lambda: row, lambda: concat([row, acc], 0))


def _rows_shape(flat_out: list, shapes: list) -> list:
    """Give stacked results their static shape when each row's is known."""
    from .graph import TensorShape
    from .ops.array import reshape

    out = []
    for t, s in zip(flat_out, shapes):
        if s is not None and s.is_fully_defined():
            t = reshape(t, [-1, *s.as_list()])
        elif s is not None and s.ndims is not None:
            t.set_shape(TensorShape([None, *s.as_list()]))
        out.append(t)
    return out


def _map_loop(
    fn: Callable, elems: Any, flat: list, structured: bool, dtype: Any, parallel: Any = None
) -> Any:
    """map_fn with a while_loop: one iteration per slice, the results stacked as they come."""
    from . import dtypes as _dt
    from .graph import TensorShape
    from .ops.array import shape
    from .ops.manip import zeros
    from .ops.math import equal, less

    out_structure = dtype if dtype is not None else elems
    out_dtypes = [
        _dt.as_dtype(d) for d in (_flatten(dtype) if dtype is not None else [t.dtype for t in flat])
    ]
    n = shape(flat[0])[0]
    seen: dict[str, Any] = {}

    def body(i, *accs):
        r = fn(_slice_at(elems, flat, i, structured))
        fr = [convert_to_tensor(v) for v in _flatten(r)]
        if len(fr) != len(accs):
            raise InvalidArgumentError(
                f"map_fn: fn returned {len(fr)} tensors; give dtype= for a result that is not "
                f"shaped like elems ({len(accs)} tensors)"
            )
        seen["structure"], seen["shapes"] = r, [v.shape for v in fr]
        first = equal(i, convert_to_tensor(np.int32(0)))
        return (i + 1, *[_appended(a, v, first, False) for a, v in zip(accs, fr)])

    init = [zeros([0], d) for d in out_dtypes]
    res = while_loop(
        lambda i, *a: less(i, n),
        body,
        [convert_to_tensor(np.int32(0)), *init],
        shape_invariants=[TensorShape([]), *[TensorShape(None)] * len(init)],
        parallel_iterations=10 if parallel is None else parallel,
        return_same_structure=True,
    )
    outs = _rows_shape(list(res[1:]), seen.get("shapes", [None] * len(init)))
    if isinstance(out_structure, (list, tuple, dict)):
        return _pack(out_structure, outs)
    return outs[0]


def _scan_loop(fn, elems, flat, structured, initializer, reverse, parallel=None) -> Any:
    """scan with a while_loop (see ``_map_loop``); ``reverse`` goes from the last slice."""
    from .graph import TensorShape
    from .ops.array import shape
    from .ops.manip import zeros
    from .ops.math import equal, less

    n = shape(flat[0])[0]
    one = convert_to_tensor(np.int32(1))
    if initializer is None:
        acc0 = _slice_at(
            elems, flat, _position(convert_to_tensor(np.int32(0)), n, reverse), structured
        )
        start = one
    else:
        acc0, start = initializer, convert_to_tensor(np.int32(0))
    acc_flat = [convert_to_tensor(a) for a in _flatten(acc0)]
    k = len(acc_flat)
    seen: dict[str, Any] = {"shapes": [a.shape for a in acc_flat]}

    def body(i, *state):
        acc = _pack(acc0, list(state[:k])) if isinstance(acc0, (list, tuple, dict)) else state[0]
        new = fn(acc, _slice_at(elems, flat, _position(i, n, reverse), structured))
        fr = [convert_to_tensor(v) for v in _flatten(new)]
        if len(fr) != k:
            raise InvalidArgumentError(f"scan: fn returned {len(fr)} tensors for {k}")
        seen["shapes"] = [v.shape for v in fr]
        first = equal(i, convert_to_tensor(np.int32(0)))
        outs = [_appended(o, v, first, reverse) for o, v in zip(state[k:], fr)]
        return (i + 1, *fr, *outs)

    if initializer is None:  # the first slice is the first result
        from .ops.manip import expand_dims

        outs0 = [expand_dims(a, 0) for a in acc_flat]
    else:
        outs0 = [zeros([0], a.dtype) for a in acc_flat]
    res = while_loop(
        lambda i, *s: less(i, n),
        body,
        [start, *acc_flat, *outs0],
        shape_invariants=[TensorShape([]), *[a.shape for a in acc_flat]] + [TensorShape(None)] * k,
        parallel_iterations=10 if parallel is None else parallel,
        return_same_structure=True,
    )
    outs = _rows_shape(list(res[1 + k :]), seen["shapes"])
    return _pack(acc0, outs) if isinstance(acc0, (list, tuple, dict)) else outs[0]


def _fold_loop(fn, elems, flat, structured, initializer, reverse) -> Any:
    """foldl/foldr with a while_loop."""
    from .ops.array import shape
    from .ops.math import less

    n = shape(flat[0])[0]
    if initializer is None:
        acc0 = _slice_at(
            elems, flat, _position(convert_to_tensor(np.int32(0)), n, reverse), structured
        )
        start = convert_to_tensor(np.int32(1))
    else:
        acc0, start = initializer, convert_to_tensor(np.int32(0))
    acc_flat = [convert_to_tensor(a) for a in _flatten(acc0)]
    k = len(acc_flat)

    def body(i, *state):
        acc = _pack(acc0, list(state)) if isinstance(acc0, (list, tuple, dict)) else state[0]
        new = fn(acc, _slice_at(elems, flat, _position(i, n, reverse), structured))
        fr = [convert_to_tensor(v) for v in _flatten(new)]
        if len(fr) != k:
            raise InvalidArgumentError(f"fold: fn returned {len(fr)} tensors for {k}")
        return (i + 1, *fr)

    res = while_loop(lambda i, *s: less(i, n), body, [start, *acc_flat], return_same_structure=True)
    out = list(res[1:])
    return _pack(acc0, out) if isinstance(acc0, (list, tuple, dict)) else out[0]
