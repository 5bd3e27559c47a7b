"""``Dataset.window`` and ``tf.data.experimental.scan``.

A window dataset's elements are windows: nests of datasets (one per component) of up to
``size`` consecutive elements, as TF's are; TF1 programs read them with ``flat_map`` (``lambda
w: w.batch(size)``, ``lambda x, y: Dataset.zip((x, y)).batch(n)``), which is what a window
dataset offers (and ``interleave`` with one window at a time). The function is called once on
stand-in datasets; each window then feeds them its rows.

``Dataset.reduce`` folds a dataset into the last state of such a scan, in an op that reads the
dataset when it runs. ``scan`` carries a state through the elements: ``scan_func(state, element) -> (new_state,
output)`` is traced once on placeholders (as ``map``'s function is) and run per element.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import numpy as np

from hetbed.runtime import dtypes as _dt
from hetbed.runtime.errors import InvalidArgumentError
from hetbed.runtime.graph import TensorShape
from hetbed.runtime.registry import convert_to_tensor

from .dataset import Dataset, _Captures
from .elements import _flatten, _map_nest, _pack


def _window_rows(source: Any, size: int, shift: int, stride: int, drop: bool) -> Any:
    """Lists of rows: windows starting every ``shift`` elements, each ``size`` elements taken
    every ``stride``; partial windows at the end unless ``drop``."""
    span = (size - 1) * stride + 1
    buf: collections.deque = collections.deque()
    base = 0  # the index of buf[0] in the source
    it = iter(source)
    ended = False
    start = 0
    while True:
        while not ended and base + len(buf) < start + span:
            el = next(it, None)
            if el is None:
                ended = True
            else:
                buf.append(el)
        while buf and base < start:
            buf.popleft()
            base += 1
        if not buf or base < start:
            return
        window = [buf[i] for i in range(0, min(span, len(buf)), stride)]
        if len(window) == size or not drop:
            yield window
        start += shift


class WindowDataset(Dataset):
    """A dataset whose elements are windows of another's (``Dataset.window``)."""

    def __init__(self, parent: Dataset, size: int, shift: int, stride: int, drop: bool):
        self._parent = parent
        self._spec = (size, shift, stride, drop)
        super().__init__(
            parent._structure,
            parent._types,
            parent._shapes,
            self._windows,
            parent._captures,
            parent._controls,
        )

    def _windows(self, env: dict) -> Any:
        size, shift, stride, drop = self._spec
        return _window_rows(self._parent._elements(env), size, shift, stride, drop)

    def flat_map(self, map_func: Callable) -> Dataset:
        """The elements of the dataset ``map_func`` makes of each window, one window after
        another (``map_func`` gets the window's datasets, one per component)."""
        rows: list = []
        n = len(self._types)

        def proxy(k: int) -> Dataset:
            return Dataset(
                None,
                [self._types[k]],
                [self._shapes[k]],
                lambda env, k=k: ([r[k]] for r in list(rows)),
            )

        parts = _pack(self._structure, [proxy(k) for k in range(n)])
        inner = map_func(*parts) if isinstance(parts, tuple) else map_func(parts)
        if not isinstance(inner, Dataset):
            raise TypeError(
                f"Dataset.flat_map: the function must return a Dataset, got {type(inner).__name__}"
            )

        def make(env: dict) -> Any:
            for window in self._windows(env):
                rows[:] = window
                yield from list(inner._elements(env))

        return Dataset(
            inner._structure, inner._types, inner._shapes, make, self._captures, self._controls
        )

    def interleave(self, map_func: Callable, cycle_length: Any = None, block_length: int = 1,
                   num_parallel_calls: Any = None, what: str = "interleave") -> Dataset:  # fmt: skip
        if cycle_length not in (None, 1, -1):
            raise NotImplementedError(
                "interleave over windows: hetbed reads one window at a time (cycle_length=1); "
                "use flat_map"
            )
        return self.flat_map(map_func)

    def _not_here(self, what: str) -> Any:
        raise NotImplementedError(
            f"Dataset.{what} of a window dataset: its elements are datasets; read them with "
            "flat_map (e.g. .flat_map(lambda w: w.batch(size)))"
        )

    def map(self, *a: Any, **k: Any) -> Dataset:
        return self._not_here("map")

    def batch(self, *a: Any, **k: Any) -> Dataset:
        return self._not_here("batch")

    def filter(self, *a: Any, **k: Any) -> Dataset:
        return self._not_here("filter")

    def make_one_shot_iterator(self) -> Any:
        return self._not_here("make_one_shot_iterator")

    def make_initializable_iterator(self, shared_name: str | None = None) -> Any:
        return self._not_here("make_initializable_iterator")


def window(ds: Dataset, size: int, shift: int | None, stride: int, drop_remainder: bool):
    size = int(size)
    shift = size if shift is None else int(shift)
    stride = int(stride)
    if size <= 0 or shift <= 0 or stride <= 0:
        raise InvalidArgumentError(
            f"Dataset.window: size, shift and stride must be positive, got {size}, {shift}, "
            f"{stride}"
        )
    return WindowDataset(ds, size, shift, stride, bool(drop_remainder))


# ---- scan ------------------------------------------------------------------------------------


class _ScanFunction(_Captures):
    """``fn(state, element) -> (new_state, output)`` traced on placeholders (the calling
    graph's tensors it uses captured, as ``map``'s are)."""

    def __init__(self, ds: Dataset, init: Any, fn: Callable):

        init_flat = [np.asarray(v) for v in _flatten(init)]
        self.init = init_flat
        # traced on the initial state's shapes, then again on shapes relaxed to take the new
        # state's too, until they hold (TF's rule: a state may grow from element to element)
        shapes = [TensorShape(v.shape) for v in init_flat]
        for _ in range(sum(v.ndim + 1 for v in init_flat) + 1):  # each pass relaxes one more
            st_phs, el_phs, got = self._trace_on(ds, init, init_flat, shapes, fn)
            new_shapes = [_relaxed(s, t.shape) for s, t in zip(shapes, self.state_outs)]
            if all(
                a.as_list() == b.as_list() if a.ndims is not None else b.ndims is None
                for a, b in zip(shapes, new_shapes)
            ):
                break
            shapes = new_shapes
        self.st_phs, self.el_phs = st_phs, el_phs
        _new_state, out = got
        if isinstance(out, list):
            out = tuple(out)
        self.out_structure = _map_nest(lambda _: None, out)

    def _trace_on(self, ds: Dataset, init: Any, init_flat: list, shapes: list, fn: Callable):
        from hetbed.runtime.ops.array import placeholder

        st_phs: list = []

        def with_state(*el: Any) -> Any:
            st_phs.extend(placeholder(_dt.as_dtype(v.dtype), s) for v, s in zip(init_flat, shapes))
            state = _pack(init, st_phs)
            return fn(state, *el)

        el_phs, got = self._trace(ds, with_state)
        with self.graph.as_default():
            if not isinstance(got, (tuple, list)) or len(got) != 2:
                raise TypeError("scan: scan_func must return (new_state, output_element)")
            new_state, out = got
            if isinstance(out, list):
                out = tuple(out)
            self.state_outs = [convert_to_tensor(x) for x in _flatten(new_state)]
            self.outs = [convert_to_tensor(x) for x in _flatten(out)]
        if [t.dtype for t in self.state_outs] != [p.dtype for p in st_phs]:
            raise TypeError(
                "scan: the new state's dtypes "
                f"{[t.dtype.name for t in self.state_outs]} differ from the initial state's "
                f"{[p.dtype.name for p in st_phs]}"
            )
        return st_phs, el_phs, got

    def run(self, elements: Any, env: dict | None = None) -> Any:
        env = env or {}
        sess = self._session(env)
        fixed = self._captured_feed(env)
        state = list(self.init)
        n = len(self.state_outs)
        for el in elements:
            feed = fixed | dict(zip(self.st_phs, state)) | dict(zip(self.el_phs, el))
            vals = sess.run(self.state_outs + self.outs, feed)
            state = vals[:n]
            yield list(vals[n:])


def _relaxed(a: TensorShape, b: TensorShape) -> TensorShape:
    """The most specific shape both ``a`` and ``b`` are instances of."""
    if a.ndims is None or b.ndims is None or a.ndims != b.ndims:
        return TensorShape(None)
    return TensorShape([x if x == y else None for x, y in zip(a.as_list(), b.as_list())])


def scan(initial_state: Any, scan_func: Callable) -> Callable[[Dataset], Dataset]:
    """For ``dataset.apply``: each element mapped by ``scan_func`` with a state carried from one
    element to the next, starting at ``initial_state`` (numbers or arrays, in a nest)."""

    def apply(ds: Dataset) -> Dataset:
        for v in _flatten(initial_state):
            if hasattr(v, "_as_graph_element") or type(v).__name__ == "Tensor":
                raise TypeError(
                    "scan: initial_state must be numbers or numpy arrays in hetbed (a graph "
                    "tensor's value is not known when the dataset is made)"
                )
        fn = _ScanFunction(ds, initial_state, scan_func)
        return Dataset(
            fn.out_structure,
            [t.dtype for t in fn.outs],
            [t.shape for t in fn.outs],
            lambda env: fn.run(ds._elements(env), env),
            list(ds._captures) + [t for t in fn.outer if t not in ds._captures],
        )

    return apply


def reduce(ds: Dataset, initial_state: Any, reduce_func: Callable) -> Any:
    """``Dataset.reduce``: the state after ``reduce_func(state, element)`` has taken every
    element, starting at ``initial_state`` (numbers or arrays, in a nest): tensors computed when
    they are run (each run reads the dataset from its start)."""
    from hetbed.runtime.graph import get_default_graph
    from hetbed.runtime.ops.iterator import register_dataset
    from hetbed.runtime.registry import apply_op

    def both(state: Any, *el: Any) -> tuple:
        new = reduce_func(state, *el)
        return new, new

    states = scan(initial_state, both)(ds)
    states._initial = [np.asarray(v) for v in _flatten(initial_state)]
    g = get_default_graph()
    attrs = {
        "dataset": register_dataset(g, states),
        "output_types": [t.name for t in states._types],
        "output_shapes": [s.as_list() if s.ndims is not None else None for s in states._shapes],
    }
    op = apply_op("DatasetReduce", list(states._captures), attrs, name="DatasetReduce", graph=g)
    return _pack(initial_state, list(op.outputs))


def get_single_element(ds: Dataset) -> Any:
    """``tf.data.experimental.get_single_element``: the only element of ``ds`` as tensors in its
    nest, computed when run (an empty dataset, or one of several elements, fails the step)."""
    from hetbed.runtime.graph import get_default_graph
    from hetbed.runtime.ops.iterator import register_dataset
    from hetbed.runtime.registry import apply_op

    if not isinstance(ds, Dataset):
        raise TypeError(
            f"get_single_element: expected a tf.data.Dataset, got {type(ds).__name__} {ds!r}"
        )
    g = get_default_graph()
    attrs = {
        "dataset": register_dataset(g, ds),
        "output_types": [t.name for t in ds._types],
        "output_shapes": [s.as_list() if s.ndims is not None else None for s in ds._shapes],
    }
    op = apply_op(
        "DatasetSingleElement", list(ds._captures), attrs, name="DatasetSingleElement", graph=g
    )
    return _pack(ds._structure, list(op.outputs))


# ---- group_by_window ------------------------------------------------------------------------------


def group_by_window(
    key_func: Callable,
    reduce_func: Callable,
    window_size: Any = None,
    window_size_func: Callable | None = None,
) -> Callable[[Dataset], Dataset]:
    """For ``dataset.apply``: elements grouped by ``key_func`` (an int64 scalar per element);
    each time a group holds ``window_size`` elements (or ``window_size_func(key)``) it becomes a
    window dataset, and the elements of ``reduce_func(key, window)`` follow; at the end the
    partial groups are emitted, smallest key first (TF keeps them in an ordered map)."""
    from .dataset import _count_arg, _DatasetFunction, _GraphFunction

    if (window_size is None) == (window_size_func is None):
        raise ValueError("Must pass either window_size or window_size_func.")

    def apply(ds: Dataset) -> Dataset:
        keys = _GraphFunction(ds, key_func)
        if (
            len(keys.outs) != 1
            or keys.out_types[0] != _dt.int64
            or keys.out_shapes[0].ndims not in (None, 0)
        ):
            raise ValueError(
                f"group_by_window: key_func must return a scalar int64 tensor, got "
                f"{[t.name for t in keys.out_types]} of shapes {keys.out_shapes}"
            )
        key_stub = Dataset(None, [_dt.int64], [TensorShape([])], lambda env: iter(()))
        sizes = None
        if window_size_func is not None:
            sizes = _GraphFunction(key_stub, window_size_func)
        rows: list = []
        window = Dataset(ds._structure, ds._types, ds._shapes, lambda env: iter(list(rows)))
        # reduce_func traced in a function graph on the key, as flat_map's function is: what it
        # computes from the key is computed per window
        reduce = _DatasetFunction(key_stub, lambda k: reduce_func(k, window), "group_by_window")
        inner = reduce.ds
        size_get, size_caps = (None, [])
        if window_size is not None:
            size_get, size_caps = _count_arg(window_size, "group_by_window: window_size", 1)

        def make(env: dict) -> Any:
            key_of = keys.runner(env)
            fixed_size = size_get(env) if size_get is not None else None
            size_of = sizes.runner(env) if sizes is not None else None
            groups: dict = {}
            limits: dict = {}

            def emit(k: int) -> Any:
                rows[:] = groups.pop(k)
                yield from list(reduce.open([np.int64(k)], env))

            for el in ds._elements(env):
                k = int(np.asarray(key_of(el)[0]))
                if k not in limits:
                    n = (
                        fixed_size
                        if size_of is None
                        else int(np.asarray(size_of([np.int64(k)])[0]))
                    )
                    if n < 1:
                        raise InvalidArgumentError(
                            f"group_by_window: Window size must be greater than zero, but got {n}."
                        )
                    limits[k] = n
                groups.setdefault(k, []).append(el)
                if len(groups[k]) == limits[k]:
                    yield from emit(k)
            for k in sorted(groups):
                yield from emit(k)

        caps = list(ds._captures) + [
            c for c in keys.outer + reduce.outer + size_caps if c not in ds._captures
        ]
        if sizes is not None:
            caps += [c for c in sizes.outer if c not in caps]
        return Dataset(inner._structure, inner._types, inner._shapes, make, caps)

    return apply
