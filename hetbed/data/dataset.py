"""``Dataset`` (TF1's ``tf.data.Dataset``): a recipe for a stream of elements, its sources and
transformations. ``map``, ``filter``, ``flat_map`` and ``interleave`` functions are traced once
into a private graph (``_GraphFunction``, ``_DatasetFunction``) and run by a private session per
element. Iterators over a dataset live in iterator.py."""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Iterator as _PyIterator
from typing import TYPE_CHECKING, Any

import numpy as np

from hetbed.runtime import dtypes as _dt
from hetbed.runtime.errors import InvalidArgumentError
from hetbed.runtime.graph import Graph, Tensor, TensorShape, get_default_graph
from hetbed.runtime.registry import convert_to_tensor

from .elements import (
    _bound,
    _flatten,
    _flatten_shapes,
    _map_nest,
    _ndim,
    _pack,
    _shape_of,
    _to_array,
)

if TYPE_CHECKING:
    from .iterator import Iterator


class Dataset:
    """A stream of elements with fixed structure, dtypes and (partly known) shapes."""

    def __init__(
        self,
        structure: Any,
        types: list,
        shapes: list,
        make: Callable[[dict], Any],
        captures: list | None = None,
        controls: list | None = None,
    ):
        self._structure = structure  # a nest whose leaves are placeholders (None)
        self._types = [_dt.as_dtype(t) for t in types]
        self._shapes = [TensorShape(s) for s in shapes]
        self._make = make  # env -> iterator over flat lists of arrays
        #: graph tensors the sources read (placeholders fed when the iterator is initialized);
        #: ``env`` maps each to its value when the elements are made
        self._captures: list = list(captures or [])
        #: ops its iterator's initializer runs first: those of the control_dependencies the
        #: dataset (or one it derives from) was made under, as TF's MakeIterator depends on them
        self._controls: list = _joined(list(controls or []), _current_controls())

    def _elements(self, env: dict | None = None) -> _PyIterator:
        return iter(self._make(env or {}))

    def _derive(self, make: Callable, types: Any = None, shapes: Any = None) -> Dataset:
        return Dataset(
            self._structure,
            self._types if types is None else types,
            self._shapes if shapes is None else shapes,
            make,
            self._captures,
            self._controls,
        )

    # TF1's properties
    @property
    def output_types(self) -> Any:
        return _pack(self._structure, self._types)

    @property
    def output_shapes(self) -> Any:
        return _pack(self._structure, self._shapes)

    # ---- sources ----------------------------------------------------------------------
    @staticmethod
    def from_tensor_slices(tensors: Any) -> Dataset:
        """One element per row of the arrays in ``tensors`` (all with the same first dim).
        A component may be a graph tensor (a placeholder, as in TF1's way of feeding numpy
        data): its value is read when an initializable iterator's initializer runs."""
        arrs = [_to_array(x, "from_tensor_slices", capture=True) for x in _flatten(tensors)]
        if any(_ndim(a) == 0 for a in arrs):
            raise ValueError("Dataset.from_tensor_slices: every component needs a first dimension")
        known = [a for a in arrs if not isinstance(a, Tensor)]
        if len({a.shape[0] for a in known}) > 1:
            raise ValueError(
                "Dataset.from_tensor_slices: the components' first dimensions differ: "
                + ", ".join(str(list(a.shape)) for a in known)
            )

        def make(env: dict) -> Any:
            vals = _bound(arrs, env)
            n = {a.shape[0] for a in vals}
            if len(n) != 1:
                raise InvalidArgumentError(
                    "Dataset.from_tensor_slices: the components' first dimensions differ: "
                    + ", ".join(str(list(a.shape)) for a in vals)
                )
            (rows,) = n
            return ([a[i] for a in vals] for i in range(rows))

        return Dataset(
            _map_nest(lambda _: None, tensors),
            [a.dtype for a in arrs],
            [None if _shape_of(a) is None else _shape_of(a)[1:] for a in arrs],
            make,
            [a for a in arrs if isinstance(a, Tensor)],
        )

    @staticmethod
    def from_tensors(tensors: Any) -> Dataset:
        """A dataset of one element: ``tensors``."""
        arrs = [_to_array(x, "from_tensors", capture=True) for x in _flatten(tensors)]
        return Dataset(
            _map_nest(lambda _: None, tensors),
            [a.dtype for a in arrs],
            [_shape_of(a) for a in arrs],
            lambda env: iter([_bound(arrs, env)]),
            [a for a in arrs if isinstance(a, Tensor)],
        )

    @staticmethod
    def range(*args: Any) -> Dataset:
        """``range(stop)``, ``range(start, stop)`` or ``range(start, stop, step)`` as int64;
        each an int or an integer scalar tensor (read when the dataset starts)."""
        if not 1 <= len(args) <= 3:
            raise TypeError(f"Dataset.range takes 1 to 3 arguments, got {len(args)}")
        what = ("stop",) if len(args) == 1 else ("start", "stop", "step")[: len(args)]
        parts = [_count_arg(a, f"range: {w}") for a, w in zip(args, what)]
        caps = [t for _, c in parts for t in c]

        def bounds(env: dict) -> range:
            vals = [get(env) for get, _ in parts]
            if len(vals) == 3 and vals[2] == 0:
                raise InvalidArgumentError("Dataset.range: step must be a non-zero integer")
            return range(*vals)

        if not caps:
            bounds({})  # a bad step is refused as the dataset is built

        def make(env: dict) -> Any:
            return ([np.int64(i)] for i in bounds(env))

        return Dataset(None, [_dt.int64], [[]], make, caps)

    @staticmethod
    def from_generator(
        generator: Callable, output_types: Any, output_shapes: Any = None, args: Any = None
    ) -> Dataset:
        """Elements from ``generator(*args)`` (called anew for each pass), converted to
        ``output_types``; ``output_shapes`` (default: unknown) is checked when they are read."""
        types = [_dt.as_dtype(t) for t in _flatten(output_types)]
        if output_shapes is None:
            shapes = [None] * len(types)
        else:
            shapes = [
                s if s is None or isinstance(s, TensorShape) else list(s)
                for s in _flatten_shapes(output_shapes)
            ]
            if len(shapes) != len(types):
                raise ValueError(
                    f"Dataset.from_generator: {len(types)} output_types but {len(shapes)} "
                    "output_shapes"
                )
        structure = _map_nest(lambda _: None, output_types)
        cargs = tuple(args or ())

        def make(env: dict) -> Any:
            for el in generator(*cargs):
                flat = _flatten(el)
                if len(flat) != len(types):
                    raise ValueError(
                        f"Dataset.from_generator: the generator yielded {len(flat)} components, "
                        f"output_types has {len(types)}"
                    )
                yield [np.asarray(x, dtype=t.np) for x, t in zip(flat, types)]

        return Dataset(structure, types, shapes, make)

    @staticmethod
    def zip(datasets: Any) -> Dataset:
        """Elements of several datasets side by side, in their nest; ends with the shortest."""
        dss = _flatten(datasets)
        for d in dss:
            if not isinstance(d, Dataset):
                raise TypeError(f"Dataset.zip: expected datasets, got {type(d).__name__}")

        def make(env: dict) -> Any:
            for parts in zip(*(d._elements(env) for d in dss)):
                yield [x for p in parts for x in p]

        structure = _pack(datasets, [d._structure for d in dss])
        return Dataset(
            structure,
            [t for d in dss for t in d._types],
            [s for d in dss for s in d._shapes],
            make,
            [c for d in dss for c in d._captures],
            [c for d in dss for c in d._controls],
        )

    # ---- transformations ----------------------------------------------------------------
    def map(self, map_func: Callable, num_parallel_calls: Any = None) -> Dataset:
        """``map_func`` (graph ops over the element's components) applied to each element."""
        fn = _GraphFunction(self, map_func)
        if not fn.outs or any(x is None for x in _flatten(fn.returned)):
            raise ValueError(
                f"Dataset.map: the function returned {fn.returned!r}; it must return tensors "
                "(not None)"
            )

        def make(env: dict) -> Any:
            run = fn.runner(env)
            return (run(el) for el in self._elements(env))

        return Dataset(
            fn.out_structure,
            fn.out_types,
            fn.out_shapes,
            make,
            _joined(self._captures, fn.outer),
            self._controls,
        )

    def filter(self, predicate: Callable) -> Dataset:
        """The elements for which ``predicate`` (graph ops returning a scalar bool) is true."""
        fn = _GraphFunction(self, predicate)
        if len(fn.out_types) != 1 or fn.out_types[0] != _dt.bool_:
            raise TypeError(
                f"Dataset.filter: the predicate must return one bool scalar, got {fn.out_types}"
            )
        if fn.out_shapes[0].ndims not in (None, 0):
            raise ValueError(
                "Dataset.filter: the predicate must return a bool scalar, got one of shape "
                f"{fn.out_shapes[0]}"
            )

        def make(env: dict) -> Any:
            run = fn.runner(env)
            for el in self._elements(env):
                keep = np.asarray(run(el)[0])
                if keep.ndim:
                    raise InvalidArgumentError(
                        f"Dataset.filter: the predicate returned shape {list(keep.shape)}, not a "
                        "scalar"
                    )
                if keep:
                    yield el

        out = self._derive(make)
        out._captures = _joined(self._captures, fn.outer)
        return out

    def batch(self, batch_size: int, drop_remainder: bool = False) -> Dataset:
        """Stack ``batch_size`` consecutive elements (the last batch may be smaller unless
        ``drop_remainder``)."""
        return self._batch(batch_size, drop_remainder, None, None, "batch")

    def padded_batch(
        self,
        batch_size: int,
        padded_shapes: Any = None,
        padding_values: Any = None,
        drop_remainder: bool = False,
    ) -> Dataset:
        """``batch`` that pads each component to ``padded_shapes`` (None dims: the batch's
        largest) with ``padding_values`` (default 0)."""
        n = len(self._types)
        ps = [None] * n if padded_shapes is None else _flatten_shapes(padded_shapes)
        ps = [_shape_arg(p, i) for i, p in enumerate(ps)]
        pv = (
            [b"" if t.is_string else 0 for t in self._types]  # TF pads strings with b""
            if padding_values is None
            else _flatten(padding_values)
        )
        if len(ps) != n or len(pv) != n:
            raise ValueError(
                f"Dataset.padded_batch: the element has {n} components; padded_shapes has "
                f"{len(ps)} and padding_values {len(pv)}"
            )
        for i, (v, t) in enumerate(zip(pv, self._types)):
            _check_padding_value(v, t, i)
        return self._batch(batch_size, drop_remainder, ps, pv, "padded_batch")

    def _batch(self, batch_size: int, drop: bool, ps: Any, pv: Any, what: str) -> Dataset:
        try:
            size, caps = _count_arg(batch_size, f"{what}: batch_size", 1)
        except InvalidArgumentError as e:
            raise ValueError(str(e).replace("must be >= 1", "must be positive")) from None
        b = size({}) if not caps else None  # known when the graph is built
        pv_get = None
        if pv is not None:  # padding values may be tensors too (nmt's eos ids, from a table)
            pv_get = [_value_arg(v) for v in pv]
            caps = caps + [t for _, extra in pv_get for t in extra]
        ps_fed = [] if ps is None else [p for p in ps if isinstance(p, Tensor)]
        caps = caps + ps_fed

        def stack(rows: list, pv: Any, ps: Any) -> list:
            out = []
            for i, comp in enumerate(zip(*rows)):
                if ps is None:
                    shapes = {np.shape(c) for c in comp}
                    if len(shapes) != 1:
                        raise ValueError(
                            f"Dataset.batch: component {i} has different shapes in one batch "
                            f"{sorted(shapes)}; use padded_batch"
                        )
                    out.append(np.stack(comp))
                else:
                    out.append(_pad(comp, ps[i], pv[i], self._types[i], i))
            return out

        def make(env: dict) -> Any:
            n = size(env)
            pads = None if pv_get is None else [get(env) for get, _ in pv_get]
            shapes = ps
            if ps_fed:  # padded shapes computed in the run that starts the dataset
                shapes = [_fed_shape(p, env) if isinstance(p, Tensor) else p for p in ps]
            rows: list = []
            for el in self._elements(env):
                rows.append(el)
                if len(rows) == n:
                    yield stack(rows, pads, shapes)
                    rows = []
            if rows and not drop:
                yield stack(rows, pads, shapes)

        def out_shape(i: int, s: TensorShape) -> list:
            inner = s.as_list() if s.ndims is not None else None
            if ps is not None and isinstance(ps[i], Tensor):  # its length, if known, is the rank
                length = ps[i].shape.as_list()[0] if ps[i].shape.ndims == 1 else None
                inner = None if length is None else [None] * length
            elif ps is not None and ps[i] is not None:
                inner = list(TensorShape(ps[i]).as_list())
            elif ps is not None and inner is not None:
                inner = [None] * len(inner)
            return None if inner is None else [b if drop else None, *inner]

        out = self._derive(make, shapes=[out_shape(i, s) for i, s in enumerate(self._shapes)])
        out._captures = _joined(self._captures, caps)
        return out

    def shuffle(
        self, buffer_size: int, seed: int | None = None, reshuffle_each_iteration: bool = True
    ) -> Dataset:
        """TF's buffered shuffle: keep ``buffer_size`` elements, emit a random one, refill.
        With a ``seed`` the sequence of orders is reproducible: pass k (counted over the
        dataset's life, re-initialized iterators included) uses the seed's k-th stream; every
        pass uses the first when ``reshuffle_each_iteration`` is False."""
        try:
            size, caps = _count_arg(buffer_size, "shuffle: buffer_size", 1)
        except InvalidArgumentError as e:
            raise ValueError(str(e).replace("must be >= 1", "must be positive")) from None
        seeds = np.random.SeedSequence(seed)
        passes = [0]

        def make(env: dict) -> Any:
            k = passes[0] if reshuffle_each_iteration else 0
            passes[0] += 1
            rng = np.random.default_rng(seeds.spawn(k + 1)[k] if seed is not None else None)
            n = size(env)
            buf: list = []
            for el in self._elements(env):
                buf.append(el)
                if len(buf) == n:
                    j = int(rng.integers(n))
                    buf[j], buf[-1] = buf[-1], buf[j]
                    yield buf.pop()
            while buf:
                j = int(rng.integers(len(buf)))
                buf[j], buf[-1] = buf[-1], buf[j]
                yield buf.pop()

        return self._with(make, caps)

    def _with(self, make: Callable, caps: list) -> Dataset:
        out = self._derive(make)
        out._captures = _joined(self._captures, caps)
        return out

    def repeat(self, count: int | None = None) -> Dataset:
        """The dataset ``count`` times (forever when None or -1)."""
        get, caps = _count_arg(-1 if count is None else count, "repeat: count")

        def make(env: dict) -> Any:
            c = get(env)
            i = 0
            while c < 0 or i < c:
                i += 1
                yield from self._elements(env)

        return self._with(make, caps)

    def take(self, count: int) -> Dataset:
        """The first ``count`` elements (all when -1)."""
        get, caps = _count_arg(count, "take: count")

        def make(env: dict) -> Any:
            c = get(env)
            for i, el in enumerate(self._elements(env)):
                if 0 <= c <= i:
                    return
                yield el

        return self._with(make, caps)

    def skip(self, count: int) -> Dataset:
        """The elements after the first ``count`` (none when -1)."""
        get, caps = _count_arg(count, "skip: count")

        def make(env: dict) -> Any:
            c = get(env)
            for i, el in enumerate(self._elements(env)):
                if c < 0:
                    return
                if i >= c:
                    yield el

        return self._with(make, caps)

    def concatenate(self, dataset: Dataset) -> Dataset:
        """This dataset's elements, then ``dataset``'s (the same structure and dtypes; each
        component's shape is what both have in common: a dimension they disagree on is
        unknown)."""
        if not isinstance(dataset, Dataset):
            raise TypeError(
                f"Dataset.concatenate: expected a Dataset, got {type(dataset).__name__}"
            )
        if len(dataset._types) != len(self._types) or any(
            a != b for a, b in zip(self._types, dataset._types)
        ):
            raise TypeError(
                "Dataset.concatenate: the datasets' elements differ: "
                f"{[t.name for t in self._types]} and {[t.name for t in dataset._types]}"
            )
        shapes = common_shapes(self._shapes, dataset._shapes)

        def make(env: dict) -> Any:
            yield from self._elements(env)
            yield from dataset._elements(env)

        return Dataset(
            self._structure,
            self._types,
            shapes,
            make,
            self._captures + dataset._captures,
            _joined(self._controls, dataset._controls),
        )

    def window(
        self, size: int, shift: int | None = None, stride: int = 1, drop_remainder: bool = False
    ) -> Dataset:
        """Windows of ``size`` elements taken every ``stride``, one starting every ``shift``
        (``size`` by default), each a nest of datasets to read with ``flat_map`` (windows.py)."""
        from .windows import window

        return window(self, size, shift, stride, drop_remainder)

    def reduce(self, initial_state: Any, reduce_func: Callable) -> Any:
        """The state after ``reduce_func(state, element)`` took every element, from
        ``initial_state`` (numbers or arrays): tensors, computed when run (windows.py)."""
        from .windows import reduce

        return reduce(self, initial_state, reduce_func)

    def enumerate(self, start: int = 0) -> Dataset:
        """Each element with its position, ``(index, element)``, the index an int64 counted
        from ``start`` (an int)."""
        if not isinstance(start, (int, np.integer)):
            raise TypeError(f"Dataset.enumerate: start must be an int in hetbed, got {start!r}")
        first = int(start)

        def make(env: dict) -> Any:
            return ([np.int64(i), *el] for i, el in enumerate(self._elements(env), first))

        types = [_dt.int64, *self._types]
        shapes = [TensorShape([]), *self._shapes]
        return Dataset((None, self._structure), types, shapes, make, self._captures, self._controls)

    def shard(self, num_shards: int, index: int) -> Dataset:
        """Every ``num_shards``-th element from the ``index``-th (worker ``index`` of
        ``num_shards`` reading its part of the input)."""
        n, i = int(num_shards), int(index)
        if n < 1 or not 0 <= i < n:
            raise InvalidArgumentError(
                f"Dataset.shard: need num_shards >= 1 and 0 <= index < num_shards, got {n}, {i}"
            )

        def make(env: dict) -> Any:
            for k, el in enumerate(self._elements(env)):
                if k % n == i:
                    yield el

        return self._derive(make)

    def flat_map(self, map_func: Callable) -> Dataset:
        """The elements of the datasets ``map_func`` makes from each element, one after the
        other. ``map_func`` is traced once with placeholders (graph ops on the element run in a
        private session per element, as ``map``'s do); the dataset it returns may read them
        (``from_tensor_slices``, ``from_tensors``, ``TextLineDataset``)."""
        return self.interleave(map_func, cycle_length=1, block_length=1, what="flat_map")

    def interleave(
        self,
        map_func: Callable,
        cycle_length: Any = None,
        block_length: int = 1,
        num_parallel_calls: Any = None,
        what: str = "interleave",
    ) -> Dataset:
        """TF's interleave: ``cycle_length`` of the datasets ``map_func`` makes (one per input
        element, traced as in ``flat_map``) are read in turn, ``block_length`` elements from
        each; an exhausted one is replaced by the next input element's."""
        inner = _DatasetFunction(self, map_func, what)
        cycle = max(1, int(cycle_length)) if cycle_length not in (None, -1) else 1
        block = int(block_length)
        if block < 1:
            raise ValueError(f"Dataset.{what}: block_length must be positive, got {block}")

        def make(env: dict) -> Any:
            opened = (inner.open(el, env) for el in self._elements(env))
            slots: list = []
            for it in opened:  # fill the cycle
                slots.append(it)
                if len(slots) == cycle:
                    break
            while slots:
                for k in range(len(slots)):
                    it = slots[k]
                    for _ in range(block):
                        el = next(it, None)
                        if el is None:
                            nxt = next(opened, None)
                            slots[k] = nxt
                            break
                        yield el
                slots = [it for it in slots if it is not None]

        return Dataset(
            inner.ds._structure,
            inner.ds._types,
            inner.ds._shapes,
            make,
            _joined(self._captures, inner.outer),
            self._controls,
        )

    def unbatch(self) -> Dataset:
        """Each element split along its first dimension into rows."""
        if any(s.ndims == 0 for s in self._shapes):
            raise ValueError("Dataset.unbatch: every component needs a first dimension")

        def make(env: dict) -> Any:
            for el in self._elements(env):
                n = {np.shape(c)[0] for c in el}
                if len(n) != 1:
                    raise InvalidArgumentError(
                        f"Dataset.unbatch: the components' first dimensions differ: {sorted(n)}"
                    )
                for i in range(n.pop()):
                    yield [c[i] for c in el]

        shapes = [None if s.ndims is None else s.as_list()[1:] for s in self._shapes]
        return self._derive(make, shapes=shapes)

    def apply(self, transformation_func: Callable) -> Dataset:
        """``transformation_func(self)`` (TF's way of applying ``unbatch()`` and friends)."""
        out = transformation_func(self)
        if not isinstance(out, Dataset):
            raise TypeError(
                f"Dataset.apply: the function returned {type(out).__name__}, not a Dataset"
            )
        return out

    @staticmethod
    def list_files(
        file_pattern: Any, shuffle: bool | None = None, seed: int | None = None
    ) -> Dataset:
        """The names of the files matching ``file_pattern`` (a glob or a list of them), as
        scalar strings, in sorted order or, by default (``shuffle``), shuffled anew on every
        pass (repeatably with a ``seed``). No match fails the pass naming the pattern."""
        import glob as _glob

        pats = [
            p.decode() if isinstance(p, bytes) else str(p)
            for p in np.asarray(file_pattern, dtype=object).ravel()
        ]
        mix = True if shuffle is None else bool(shuffle)
        seeds = np.random.SeedSequence(seed)
        passes = [0]

        def make(env: dict) -> Any:
            names = sorted({n for p in pats for n in _glob.glob(p)})
            if not names:
                raise InvalidArgumentError(f"Dataset.list_files: no files match {pats}")
            if mix:
                k = passes[0]
                passes[0] += 1
                rng = np.random.default_rng(seeds.spawn(k + 1)[k] if seed is not None else None)
                names = [names[i] for i in rng.permutation(len(names))]
            return ([np.array(n.encode(), dtype=object)] for n in names)

        return Dataset(None, [_dt.string], [[]], make)

    def prefetch(self, buffer_size: Any) -> Dataset:
        """The same dataset (elements are made when asked for)."""
        return self

    def cache(self, filename: str = "") -> Dataset:
        """The same elements, computed once (in memory) and replayed on later passes."""
        store: list = []
        done = [False]

        def make(env: dict) -> Any:
            if done[0]:
                yield from store
                return
            store.clear()
            for el in self._elements(env):
                store.append(el)
                yield el
            done[0] = True

        return self._derive(make)

    # ---- iterators -------------------------------------------------------------------------
    def make_one_shot_iterator(self) -> Iterator:
        from .iterator import Iterator

        for c in self._captures:  # a one-shot iterator starts itself: nothing can be fed then
            if c.op.type in ("Placeholder", "PlaceholderV2"):
                raise ValueError(
                    f"Cannot capture a placeholder (name:{c.op.name}, type:Placeholder) by "
                    "value: a one-shot iterator starts itself; use make_initializable_iterator "
                    "and feed the placeholder when running its initializer"
                )
        return Iterator(self, one_shot=True)

    def make_initializable_iterator(self, shared_name: str | None = None) -> Iterator:
        from .iterator import Iterator

        return Iterator(self, one_shot=False, shared_name=shared_name)


def common_shapes(a: list, b: list) -> list:
    """Each component's shape as two datasets' elements have it in common: a dimension they
    disagree on is unknown, and so is the rank where theirs differ."""
    out = []
    for x, y in zip(a, b):
        if x.ndims is None or y.ndims is None or x.ndims != y.ndims:
            out.append(TensorShape(None))
        else:
            out.append(TensorShape(i if i == j else None for i, j in zip(x.dims, y.dims)))
    return out


def _pad(comp: tuple, shape: Any, value: Any, dtype: Any, i: int) -> np.ndarray:
    rank = np.ndim(comp[0])
    want = TensorShape(shape).as_list() if shape is not None else [None] * rank
    if len(want) != rank or any(np.ndim(c) != rank for c in comp):
        raise ValueError(f"Dataset.padded_batch: component {i} does not have rank {len(want)}")
    dims = [max(np.shape(c)[d] for c in comp) if w is None else int(w) for d, w in enumerate(want)]
    out = np.full([len(comp), *dims], value, dtype=dtype.np)
    for j, c in enumerate(comp):
        if any(a > b for a, b in zip(np.shape(c), dims)):
            raise ValueError(
                f"Dataset.padded_batch: component {i} of shape {list(np.shape(c))} is larger "
                f"than its padded shape {dims}"
            )
        out[(j, *(slice(0, n) for n in np.shape(c)))] = c
    return out


def _check_padding_value(value: Any, dtype: Any, i: int) -> None:
    """A padding value must be a scalar of the component's kind, as TF requires."""
    from hetbed.runtime.graph import Tensor

    if isinstance(value, Tensor):
        if value.shape.ndims not in (None, 0):
            raise ValueError(
                f"Dataset.padded_batch: padding_values values should be scalars, component {i} "
                f"has {value.name} of shape {value.shape}"
            )
        if value.dtype != dtype:
            raise TypeError(
                f"Dataset.padded_batch: component {i} is {dtype.name}, its padding value "
                f"{value.name} is {value.dtype.name}"
            )
        return
    arr = np.asarray(value)
    if arr.ndim != 0:
        raise ValueError(
            f"Dataset.padded_batch: padding_values values should be scalars, component {i} has "
            f"{value!r}"
        )
    kind = arr.dtype.kind
    ok = (
        kind in "SUO"
        if dtype.is_string
        else kind == "b"
        if dtype == _dt.bool_
        else kind in "iub"
        if dtype.is_integer
        else kind in "iubf"
    )
    if not ok:
        raise TypeError(
            f"Dataset.padded_batch: component {i} is {dtype.name}, its padding value {value!r} "
            "is not of that kind"
        )


def _value_arg(value: Any) -> tuple[Callable, list]:
    """A value argument (a padding value): a number or array, or a tensor computed in the run
    that starts the dataset (then a capture)."""
    from hetbed.runtime.graph import Tensor

    if isinstance(value, Tensor) and value.op.type != "Const":
        return (lambda env: np.asarray(env[value])), [value]
    if isinstance(value, Tensor):
        value = value.op.attrs["value"]
    return (lambda env: value), []


def _shape_arg(shape: Any, i: int) -> Any:
    """A padded shape: a list, a TensorShape, None, or a 1-D integer tensor (a constant is
    read now, -1 meaning the batch's largest; another tensor when the dataset starts)."""
    from hetbed.runtime.graph import Tensor

    if not isinstance(shape, Tensor):
        return shape
    if not shape.dtype.is_integer or shape.shape.ndims not in (None, 1):
        raise TypeError(
            f"Dataset.padded_batch: padded_shapes for component {i} must be a 1-D integer "
            f"tensor, got {shape.name} ({shape.dtype.name}, shape {shape.shape})"
        )
    if shape.op.type == "Const":
        return [None if int(d) == -1 else int(d) for d in np.asarray(shape.op.attrs["value"])]
    return shape


def _fed_shape(shape: Any, env: dict) -> list:
    v = np.asarray(env[shape])
    if v.ndim != 1:
        raise InvalidArgumentError(
            f"Dataset.padded_batch: padded shape {shape.name} is {list(v.shape)}, not 1-D"
        )
    return [None if int(d) == -1 else int(d) for d in v]


def _count_arg(value: Any, what: str, low: int | None = None) -> tuple[Callable, list]:
    """A count argument (batch size, skip, take, repeat, buffer size): an int, or a scalar
    integer tensor fed or computed in the run that starts the dataset (then one of its
    captures). Returns (its value given the run's env, the captures it adds)."""
    from hetbed.runtime.graph import Tensor

    def checked(v: int) -> int:
        if low is not None and v < low:
            raise InvalidArgumentError(f"Dataset.{what} must be >= {low}, got {v}")
        return v

    if isinstance(value, Tensor):
        if not value.dtype.is_integer or value.shape.ndims not in (None, 0):
            raise TypeError(
                f"Dataset.{what} must be an integer scalar, got {value.name} "
                f"({value.dtype.name}, shape {value.shape})"
            )
        if value.op.type != "Const":
            return (lambda env: checked(int(np.asarray(env[value])))), [value]
        value = value.op.attrs["value"]
    if isinstance(value, (bool, np.bool_)) or np.asarray(value).dtype.kind not in "iu":
        raise TypeError(f"Dataset.{what} must be an integer, got {value!r}")
    v = checked(int(value))
    return (lambda env: v), []


def _joined(a: list, b: list) -> list:
    return list(a) + [t for t in b if t not in a]


def _current_controls() -> list:
    """The ops of the control_dependencies blocks open in the default graph (none in a dataset
    function's graph, which drops its caller's control inputs as TF's does)."""
    g = get_default_graph()
    return [] if g._capture_hook is not None else g.current_control_inputs()


class _Captures:
    """The tensors of the calling graph a dataset function uses (a constant, a lookup table's
    default, a tensor computed outside): each stands in the function's private graph as a
    placeholder, and the dataset takes the outer tensor as one of its captures, so the op that
    reads the dataset gets its value in the run that starts it (TF's capture by value). Lookup
    tables are found in the reading op's session (``_session``)."""

    def _trace(self, ds: Dataset, fn: Callable) -> tuple:
        from hetbed.runtime.ops.array import placeholder

        self.graph = Graph()
        self.outer: list = []  # tensors of the calling graph, in the order first used
        self._inner: dict = {}

        def capture(t: Any) -> Any:
            if t not in self._inner and t.op.type == "VariableV2":
                # a caller's variable given to an assignment: the same storage, by reference,
                # found in the reading session's resources (_TablesOf), as TF's resource
                # variables are; reading a variable's value captures that value instead
                from hetbed.runtime.registry import apply_op

                key = t.op.attrs.get("shared_name") or t.op.name
                with self.graph.as_default(), self.graph.name_scope("captured"):
                    self._inner[t] = apply_op(
                        "VariableV2",
                        [],
                        {
                            "dtype": t.dtype,
                            "shape": t.op.attrs["shape"],
                            "shared_name": _OUTER + key,
                        },
                        name=t.op.name.replace("/", "_"),
                    ).outputs[0]
            if t not in self._inner:
                with self.graph.as_default(), self.graph.name_scope("captured"):
                    self._inner[t] = placeholder(t.dtype, t.shape)
                self.outer.append(t)
            return self._inner[t]

        with self.graph.capturing(capture), self.graph.as_default():
            phs = [placeholder(t, s) for t, s in zip(ds._types, ds._shapes)]
            arg = _pack(ds._structure, phs)
            out = fn(*arg) if isinstance(arg, tuple) else fn(arg)
        return phs, out

    def _captured_feed(self, env: dict) -> dict:
        return {self._inner[t]: env[t] for t in self.outer if t in self._inner}

    def _session(self, env: dict) -> Any:
        """A session of the private graph whose lookup tables are the reading session's."""
        from hetbed.runtime.ops.iterator import RESOURCES
        from hetbed.runtime.session import Session

        sess = Session(graph=self.graph)
        outer = env.get(RESOURCES)
        if outer is not None:
            for d in sess._devices:
                sess._resources[d.name] = _TablesOf(outer)
        return sess


_OUTER = "caller:"  # a captured variable's storage key: the caller's key after it


class _TablesOf(dict):
    """A private session's resources that read the lookup tables of ``outer`` (those the
    dataset's reader initialized) and the caller's variables the function assigns to, and keep
    everything else their own."""

    def __init__(self, outer: dict):
        super().__init__()
        self._outer = outer

    def get(self, key: Any, default: Any = None) -> Any:
        if key in self:
            return self[key]
        if isinstance(key, str) and key.startswith("table:"):
            return self._outer.get(key, default)
        if isinstance(key, str) and key.startswith(_OUTER):
            return self._outer.get(key[len(_OUTER) :], default)
        return default


class _GraphFunction(_Captures):
    """``fn`` traced on placeholders in a private graph; ``runner(env)`` evaluates it per
    element."""

    def __init__(self, ds: Dataset, fn: Callable):
        phs, out = self._trace(ds, fn)
        if isinstance(out, list):  # TF converts a returned list (decode_csv's) to a tuple
            out = tuple(out)
        with self.graph.as_default():
            self.outs = [convert_to_tensor(x) for x in _flatten(out) if x is not None]
        self.phs = phs
        self.returned = out
        self.out_structure = _map_nest(lambda _: None, out)
        self.out_types = [t.dtype for t in self.outs]
        self.out_shapes = [t.shape for t in self.outs]

    def runner(self, env: dict | None = None) -> Callable:
        env = env or {}
        sess = self._session(env)
        fixed = self._captured_feed(env)

        def run(el: list) -> list:
            return list(sess.run(self.outs, {**fixed, **dict(zip(self.phs, el))}))

        return run


class _DatasetFunction(_Captures):
    """``fn`` (element -> Dataset) traced once on placeholders in a private graph; ``open(el,
    env)`` iterates the dataset it made with the element's values: the graph tensors that
    dataset reads are evaluated by a private session with the element (and the calling graph's
    captured tensors) fed."""

    def __init__(self, ds: Dataset, fn: Callable, what: str):
        phs, out = self._trace(ds, fn)
        if not isinstance(out, Dataset):
            raise TypeError(
                f"Dataset.{what}: the function must return a Dataset, got {type(out).__name__}"
            )
        self.ds, self.phs = out, phs
        self._sess, self._sess_key = None, None
        # the inner dataset's captures of tensors of the caller's graph (a map inside the
        # function using them) come from the caller's run, as this function's own captures do
        self.outer += [
            c for c in out._captures if c.graph is not self.graph and c not in self.outer
        ]

    def open(self, el: list, outer_env: dict | None = None) -> Any:
        env: dict = {}
        outer_env = outer_env or {}
        caps = self.ds._captures
        if caps:
            direct = {ph: v for ph, v in zip(self.phs, el)} | self._captured_feed(outer_env)
            direct |= {
                c: outer_env[c] for c in caps if c.graph is not self.graph and c in outer_env
            }
            computed = [c for c in caps if c not in direct]
            if computed:
                from hetbed.runtime.ops.iterator import RESOURCES

                key = id(outer_env.get(RESOURCES))  # one private session per reading session
                if self._sess is None or self._sess_key != key:
                    self._sess, self._sess_key = self._session(outer_env), key
                vals = self._sess.run(computed, direct)
                env.update(zip(computed, vals))
            env.update((c, direct[c]) for c in caps if c in direct)
        from hetbed.runtime.ops.iterator import RESOURCES

        if RESOURCES in outer_env:
            env[RESOURCES] = outer_env[RESOURCES]
        return self.ds._elements(env)
