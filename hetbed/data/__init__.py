"""``hb.data`` (TF1's ``tf.data``): input pipelines feeding a graph through an iterator.

A ``Dataset`` is a recipe for a stream of elements; an element is an array or a nest (tuples,
dicts) of arrays. Sources: ``from_tensor_slices``, ``from_tensors``, ``from_generator``,
``range``, ``zip``; transformations: ``map``, ``filter``, ``batch``, ``padded_batch``,
``shuffle``, ``repeat``, ``prefetch``, ``take``, ``skip``. ``map`` and ``filter`` functions are
written with graph ops as in TF: each is traced once into a private graph (placeholders for the
element) and run by a private session per element. Elements are made on the host, in numpy.

``make_one_shot_iterator(ds)`` / ``make_initializable_iterator(ds)`` (or the methods of the same
names) give an ``Iterator`` whose ``get_next()`` adds an ``IteratorGetNext`` op; running it past
the end raises ``OutOfRangeError``, which ``MonitoredTrainingSession`` takes as a stop.

Sources are numpy values, or graph tensors (``from_tensor_slices``, ``from_tensors``,
``TextLineDataset``): a dataset *captures* them, and their values are read when the iterator
starts: the ``initializer`` of an initializable iterator (feed the placeholders there, TF1's way
of feeding numpy data), or the first ``get_next`` of a one-shot one. ``Iterator.from_structure``
makes a reinitializable iterator (``make_initializer(dataset)``); ``Iterator.from_string_handle``
a feedable one, whose ``get_next`` reads the iterator whose ``string_handle()`` is fed. ``flat_map`` and
``interleave`` functions are traced once like ``map``'s, and the dataset they return is read
per element with its captured tensors evaluated by a private session.

The modules of the package: ``elements`` (nests of arrays and the graph tensors a dataset
reads), ``experimental`` (tf.data.experimental's transformations and mixes), ``dataset`` (``Dataset``, its sources and transformations), ``iterator``
(``Iterator`` and the ops that start and read it), ``readers`` (``TextLineDataset``,
``TFRecordDataset``, ``FixedLengthRecordDataset``).
"""

from __future__ import annotations

from . import experimental
from .dataset import Dataset
from .experimental import AUTOTUNE
from .iterator import Iterator, make_initializable_iterator, make_one_shot_iterator
from .readers import FixedLengthRecordDataset, TextLineDataset, TFRecordDataset

__all__ = [
    "AUTOTUNE",
    "Dataset",
    "FixedLengthRecordDataset",
    "Iterator",
    "TFRecordDataset",
    "TextLineDataset",
    "experimental",
    "get_output_shapes",
    "get_output_types",
    "make_initializable_iterator",
    "make_one_shot_iterator",
]


def get_output_types(dataset_or_iterator: Dataset | Iterator) -> object:
    """TF1's ``tf.data.get_output_types``: the element's dtypes, in its nest."""
    return dataset_or_iterator.output_types


def get_output_shapes(dataset_or_iterator: Dataset | Iterator) -> object:
    """TF1's ``tf.data.get_output_shapes``: the element's static shapes, in its nest."""
    return dataset_or_iterator.output_shapes
