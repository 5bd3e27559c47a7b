"""Iterators over ``hb.data`` datasets in a graph: ``Iterator`` (one-shot, initializable and
reinitializable) adds the ``MakeIterator`` and ``IteratorGetNext`` ops (runtime/ops/iterator.py);
running ``get_next`` past the end raises ``OutOfRangeError``."""

from __future__ import annotations

from typing import Any

import numpy as np

from hetbed.runtime import dtypes as _dt
from hetbed.runtime.errors import FailedPreconditionError
from hetbed.runtime.graph import TensorShape, get_default_graph
from hetbed.runtime.ops.iterator import register_dataset
from hetbed.runtime.registry import apply_op

from .dataset import Dataset
from .elements import _flatten, _flatten_shapes, _map_nest, _pack


class Iterator:
    """A dataset's iterator in the default graph: ``get_next()`` and, for an initializable
    iterator, ``initializer``."""

    def __init__(self, dataset: Dataset, one_shot: bool, shared_name: str | None = None):
        self.graph = get_default_graph()
        self._ds = dataset
        self._index = register_dataset(self.graph, dataset)
        self._one_shot = one_shot
        self.name = shared_name or self.graph.unique_name("Iterator")
        self._init = None

    @property
    def output_types(self) -> Any:
        return self._ds.output_types

    @property
    def output_shapes(self) -> Any:
        return self._ds.output_shapes

    def _attrs(self) -> dict:
        return {"dataset": self._index, "iterator": self.name}

    @property
    def initializer(self) -> Any:
        """The op that (re)starts this iterator at the dataset's beginning."""
        if self._one_shot:
            raise ValueError(f"iterator {self.name!r} is one-shot and has no initializer")
        if self._init is None:
            self._init = self.make_initializer(self._ds)
        return self._init

    def make_initializer(self, dataset: Dataset, name: str | None = None) -> Any:
        """The op that starts this iterator on ``dataset`` (which must have this iterator's
        types and compatible shapes): a reinitializable iterator (``Iterator.from_structure``)
        switches datasets this way (train / validation)."""
        if dataset is not self._ds:
            if [t.name for t in dataset._types] != [t.name for t in self._ds._types] or not all(
                a.is_compatible_with(b) for a, b in zip(dataset._shapes, self._ds._shapes)
            ):
                raise TypeError(
                    f"iterator {self.name!r}: the dataset's types/shapes {dataset.output_types} "
                    f"{dataset.output_shapes} differ from the iterator's {self.output_types} "
                    f"{self.output_shapes}"
                )
        index = self._index if dataset is self._ds else register_dataset(self.graph, dataset)
        with self.graph.control_dependencies(dataset._controls):
            return apply_op(
                "MakeIterator",
                list(dataset._captures),
                {"dataset": index, "iterator": self.name},
                name=name or self.name + "/MakeIterator",
                graph=self.graph,
            )

    @staticmethod
    def from_structure(
        output_types: Any,
        output_shapes: Any = None,
        shared_name: str | None = None,
        output_classes: Any = None,
    ) -> Iterator:
        """A reinitializable iterator of the given structure, started on a dataset by the op
        ``make_initializer(dataset)`` returns (TF1's ``tf.data.Iterator.from_structure``)."""
        types = [_dt.as_dtype(t) for t in _flatten(output_types)]
        shapes = (
            [None] * len(types)
            if output_shapes is None
            else [
                s if s is None or isinstance(s, TensorShape) else list(s)
                for s in _flatten_shapes(output_shapes)
            ]
        )
        if len(shapes) != len(types):
            raise ValueError(
                f"Iterator.from_structure: {len(types)} output_types but {len(shapes)} output_shapes"
            )

        def make(env: dict) -> Any:
            raise FailedPreconditionError("the iterator has not been initialized with a dataset")

        shape_of = Dataset(_map_nest(lambda _: None, output_types), types, shapes, make)
        return Iterator(shape_of, one_shot=False, shared_name=shared_name)

    def string_handle(self, name: str | None = None) -> Any:
        """A string tensor naming this iterator, to feed a ``from_string_handle`` iterator's
        handle placeholder (TF1's train/validation switch)."""
        from hetbed.runtime.ops.array import constant
        from hetbed.runtime.ops.iterator import make_handle

        with self.graph.as_default():
            return constant(
                np.array(make_handle(self.name, self._index, self._one_shot), dtype=object),
                dtype=_dt.string,
                name=name or self.name + "/string_handle",
            )

    @staticmethod
    def from_string_handle(
        string_handle: Any,
        output_types: Any,
        output_shapes: Any = None,
        output_classes: Any = None,
    ) -> Any:
        """An iterator whose ``get_next`` reads the iterator the fed ``string_handle`` names
        (TF1's feedable iterator); its elements have ``output_types`` and ``output_shapes``."""
        shaped = Iterator.from_structure(output_types, output_shapes)
        return _FeedableIterator(shaped, string_handle)

    def get_next(self, name: str | None = None) -> Any:
        """The next element, as tensors in the dataset's nest; running them past the end
        raises ``OutOfRangeError``."""
        attrs = dict(
            self._attrs(),
            one_shot=self._one_shot,
            output_types=[t.name for t in self._ds._types],
            output_shapes=[s.as_list() if s.ndims is not None else None for s in self._ds._shapes],
        )
        # a one-shot iterator reads the graph tensors its dataset captures when it starts, so
        # they are its get_next's inputs (a placeholder among them must be fed with that run)
        ins = list(self._ds._captures) if self._one_shot else []
        op = apply_op(
            "IteratorGetNext", ins, attrs, name=name or "IteratorGetNext", graph=self.graph
        )
        return _pack(self._ds._structure, list(op.outputs))


class _FeedableIterator:
    """``Iterator.from_string_handle``'s iterator: ``get_next`` takes the handle tensor."""

    def __init__(self, shaped: Iterator, handle: Any):
        self._shaped = shaped
        self._handle = handle
        self.graph = shaped.graph

    output_types = property(lambda self: self._shaped.output_types)
    output_shapes = property(lambda self: self._shaped.output_shapes)

    def get_next(self, name: str | None = None) -> Any:
        ds = self._shaped._ds
        attrs = {
            "output_types": [t.name for t in ds._types],
            "output_shapes": [s.as_list() if s.ndims is not None else None for s in ds._shapes],
        }
        op = apply_op(
            "IteratorGetNextFromHandle",
            [self._handle],
            attrs,
            name=name or "IteratorGetNext",
            graph=self.graph,
        )
        return _pack(ds._structure, list(op.outputs))


def make_one_shot_iterator(dataset: Dataset) -> Iterator:
    return dataset.make_one_shot_iterator()


def make_initializable_iterator(dataset: Dataset, shared_name: str | None = None) -> Iterator:
    return dataset.make_initializable_iterator(shared_name)
