"""TF-Slim's data pipeline (``slim.dataset``, ``slim.tfexample_decoder``,
``slim.dataset_data_provider``, ``slim.parallel_reader``, ``slim.prefetch_queue``,
``slim.queues``), as TF1's research/slim training scripts use it, built on the queue ops:

* ``parallel_read(data_sources, reader_class, ...)``: the files (globs expanded) go through a
  ``string_input_producer`` named ``filenames``; ``num_readers`` readers each enqueue their
  (key, record) into one ``common_queue`` (a RandomShuffleQueue when ``shuffle``, else a
  FIFOQueue) run by a queue runner; returns one dequeued (key, record).
* ``TFExampleDecoder(keys_to_features, items_to_handlers)``: ``parse_single_example`` of the
  record, each FixedLenFeature reshaped to its shape, then each item made by its handler
  (``Tensor``, ``Image``, ``BoundingBox``, ``SparseTensor``, ``LookupTensor``,
  ``BackupHandler``, ``ItemHandlerCallback``, the ``*Sequence`` handlers).
* ``DatasetDataProvider(dataset, ...)``: the items of ``parallel_read`` of a ``Dataset``
  (``provider.get(["image", "label"])``), plus ``record_key``.
* ``prefetch_queue(tensors, capacity=8, num_threads=1, dynamic_pad=False)``: a FIFOQueue (a
  PaddingFIFOQueue with ``dynamic_pad``) filled by a queue runner; returns the queue.
* ``queues.QueueRunners(session)``: the graph's queue runners started for a ``with`` block.

Names follow TF-Slim's (``parallel_read/filenames``, ``parallel_read/common_queue``, the
``fraction_of_<capacity>_full`` summaries).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

import hetbed as _hb
from hetbed.runtime.ops import records as _records

from . import gfile as _gfile

__all__ = [
    "BackupHandler",
    "BoundingBox",
    "BoundingBoxSequence",
    "DataDecoder",
    "DataProvider",
    "Dataset",
    "DatasetDataProvider",
    "Image",
    "ItemHandler",
    "ItemHandlerCallback",
    "KeypointsSequence",
    "LookupTensor",
    "NestedQueueRunnerError",
    "NumBoxesSequence",
    "ParallelReader",
    "QueueRunners",
    "SparseTensor",
    "TFExampleDecoder",
    "TFSequenceExampleDecoder",
    "Tensor",
    "get_data_files",
    "parallel_read",
    "prefetch_queue",
    "single_pass_read",
]


# ---- slim.dataset ------------------------------------------------------------------------
class Dataset:
    """A dataset's description: ``data_sources`` (files or globs), ``reader`` (a reader
    class), ``decoder``, ``num_samples``, ``items_to_descriptions`` and any other keyword
    (``num_classes``, ``labels_to_names``, ...) as attributes."""

    def __init__(
        self,
        data_sources: Any,
        reader: Any,
        decoder: Any,
        num_samples: Any,
        items_to_descriptions: Any,
        **kwargs: Any,
    ):
        kwargs.update(
            data_sources=data_sources,
            reader=reader,
            decoder=decoder,
            num_samples=num_samples,
            items_to_descriptions=items_to_descriptions,
        )
        self.__dict__.update(kwargs)


# ---- slim.data_decoder / data_provider -----------------------------------------------------
class DataDecoder:
    """Decodes a record into items (``decode(data, items)``, ``list_items()``)."""

    def decode(self, data: Any, items: Any) -> list:
        raise NotImplementedError

    def list_items(self) -> list:
        raise NotImplementedError


class DataProvider:
    """Items by name: ``get(items)`` gives their tensors, ``num_samples()``."""

    def __init__(self, items_to_tensors: dict, num_samples: Any):
        self._items_to_tensors = items_to_tensors
        self._num_samples = num_samples

    def get(self, items: Any) -> list:
        if not isinstance(items, (list, tuple)):
            raise ValueError(f"DataProvider.get: items must be a list or tuple, got {items!r}")
        valid = list(self.list_items())
        for item in items:
            if item not in valid:
                raise ValueError(
                    f"DataProvider.get: item [{item}] is invalid; valid entries: {valid}"
                )
        return [self._items_to_tensors[item] for item in items]

    def list_items(self) -> Any:
        return self._items_to_tensors.keys()

    def num_samples(self) -> Any:
        return self._num_samples


# ---- slim.parallel_reader ------------------------------------------------------------------
def get_data_files(data_sources: Any) -> list:
    """The files of ``data_sources`` (a path, a glob, or a list of them); ValueError when
    none exist."""
    if isinstance(data_sources, (list, tuple)):
        files: list = []
        for source in data_sources:
            files += get_data_files(source)
    elif any(c in data_sources for c in "*?["):
        files = sorted(_gfile.Glob(data_sources))
    else:
        files = [data_sources]
    if not files:
        raise ValueError(f"No data files found in {data_sources!r}")
    return files


def _fraction_full(queue: Any, capacity: int) -> None:
    _hb.summary.scalar(
        f"fraction_of_{capacity}_full",
        _hb.cast(queue.size(), _hb.float32) * (1.0 / capacity),
    )


class ParallelReader:
    """``num_readers`` readers of ``reader_class`` feeding one ``common_queue`` of (key,
    record) strings; ``read(filename_queue)`` adds their queue runner and dequeues one."""

    def __init__(
        self,
        reader_class: Callable,
        common_queue: Any,
        num_readers: int = 4,
        reader_kwargs: dict | None = None,
    ):
        types = list(common_queue.dtypes)
        if len(types) != 2 or any(_hb.as_dtype(t) != _hb.string for t in types):
            raise TypeError("ParallelReader: common_queue.dtypes must be [tf.string, tf.string]")
        if num_readers < 1:
            raise ValueError(f"ParallelReader: num_readers must be >= 1, got {num_readers}")
        self._readers = [reader_class(**(reader_kwargs or {})) for _ in range(num_readers)]
        self._common_queue = common_queue

    @property
    def num_readers(self) -> int:
        return len(self._readers)

    @property
    def common_queue(self) -> Any:
        return self._common_queue

    def _configure_readers_by(self, queue: Any) -> None:
        enqueues = [self._common_queue.enqueue(r.read(queue)) for r in self._readers]
        _hb.train.add_queue_runner(_hb.train.QueueRunner(self._common_queue, enqueues))

    def read(self, queue: Any, name: str | None = None) -> Any:
        self._configure_readers_by(queue)
        return self._common_queue.dequeue(name=name)

    def read_up_to(self, queue: Any, num_records: Any, name: str | None = None) -> Any:
        self._configure_readers_by(queue)
        return self._common_queue.dequeue_up_to(num_records, name=name)

    def num_records_produced(self, name: str | None = None) -> Any:
        return _hb.add_n([r.num_records_produced() for r in self._readers], name=name)

    def num_work_units_completed(self, name: str | None = None) -> Any:
        return _hb.add_n([r.num_work_units_completed() for r in self._readers], name=name)


def parallel_read(
    data_sources: Any,
    reader_class: Callable,
    num_epochs: int | None = None,
    num_readers: int = 4,
    reader_kwargs: dict | None = None,
    shuffle: bool = True,
    dtypes: Any = None,
    capacity: int = 256,
    min_after_dequeue: int = 128,
    seed: int | None = None,
    scope: str | None = None,
) -> Any:
    """(key, record) of one of ``data_sources``' records, read by ``num_readers`` readers
    in parallel (shuffled through a RandomShuffleQueue when ``shuffle``)."""
    files = get_data_files(data_sources)
    with _hb.name_scope(scope or "parallel_read"):
        names = _hb.train.string_input_producer(
            files, num_epochs=num_epochs, shuffle=shuffle, seed=seed, name="filenames"
        )
        dtypes = dtypes or [_hb.string, _hb.string]
        if shuffle:
            common = _hb.RandomShuffleQueue(
                capacity=capacity,
                min_after_dequeue=min_after_dequeue,
                dtypes=dtypes,
                seed=seed,
                name="common_queue",
            )
        else:
            common = _hb.FIFOQueue(capacity=capacity, dtypes=dtypes, name="common_queue")
        _fraction_full(common, capacity)
        reader = ParallelReader(reader_class, common, num_readers, reader_kwargs)
        return reader.read(names)


def single_pass_read(
    data_sources: Any,
    reader_class: Callable,
    reader_kwargs: dict | None = None,
    scope: str | None = None,
) -> Any:
    """(key, record) read once through ``data_sources`` in order by one reader."""
    files = get_data_files(data_sources)
    with _hb.name_scope(scope or "single_pass_read"):
        names = _hb.train.string_input_producer(
            files, num_epochs=1, shuffle=False, capacity=1, name="filenames"
        )
        return reader_class(**(reader_kwargs or {})).read(names)


# ---- slim.prefetch_queue -------------------------------------------------------------------
def prefetch_queue(
    tensors: Any,
    capacity: int = 8,
    num_threads: int = 1,
    dynamic_pad: bool = False,
    shared_name: str | None = None,
    name: str | None = None,
) -> Any:
    """A queue holding ``tensors`` (a list, or a dict: then dequeued as a dict) that
    ``num_threads`` queue-runner threads keep filling; dequeue from it."""
    if isinstance(tensors, dict):
        names = sorted(tensors)
        tensor_list = [tensors[n] for n in names]
    else:
        names, tensor_list = None, list(tensors)
    with _hb.name_scope(name or "prefetch_queue"):
        kind = _hb.PaddingFIFOQueue if dynamic_pad else _hb.FIFOQueue
        queue = kind(
            capacity=capacity,
            dtypes=[t.dtype for t in tensor_list],
            shapes=[t.get_shape() for t in tensor_list],
            names=names,
            shared_name=shared_name,
        )
        enqueue = queue.enqueue(tensors)
        _hb.train.add_queue_runner(_hb.train.QueueRunner(queue, [enqueue] * num_threads))
        _fraction_full(queue, capacity)
        return queue


# ---- slim.queues ---------------------------------------------------------------------------
class NestedQueueRunnerError(Exception):
    pass


_queue_runner_lock = threading.Lock()


@contextlib.contextmanager
def QueueRunners(session: Any) -> Any:  # noqa: N802 (TF-Slim's name)
    """The default graph's queue runners, started for the ``with`` block and stopped after."""
    if not _queue_runner_lock.acquire(False):
        raise NestedQueueRunnerError("QueueRunners cannot be nested")
    coord = _hb.train.Coordinator()
    threads: list = []
    try:
        for qr in _hb.get_collection(_hb.GraphKeys.QUEUE_RUNNERS):
            threads.extend(qr.create_threads(session, coord=coord, daemon=True, start=True))
        yield
    finally:
        coord.request_stop()
        try:
            coord.join(threads, stop_grace_period_secs=120)
        except RuntimeError:
            session.close()
        _queue_runner_lock.release()


# ---- slim.tfexample_decoder ----------------------------------------------------------------
def _is_sparse(x: Any) -> bool:
    return isinstance(x, _hb.SparseTensor)


class ItemHandler:
    """Turns the parsed features named by ``keys`` into one item."""

    def __init__(self, keys: Any):
        self._keys = list(keys) if isinstance(keys, (tuple, list)) else [keys]

    @property
    def keys(self) -> list:
        return self._keys

    def tensors_to_item(self, keys_to_tensors: dict) -> Any:
        raise NotImplementedError


class ItemHandlerCallback(ItemHandler):
    """An item made by ``func(keys_to_tensors)``."""

    def __init__(self, keys: Any, func: Callable):
        super().__init__(keys)
        self._func = func

    def tensors_to_item(self, keys_to_tensors: dict) -> Any:
        return self._func(keys_to_tensors)


class BoundingBox(ItemHandler):
    """[N, 4] boxes from four features (``prefix`` + ymin, xmin, ymax, xmax)."""

    def __init__(self, keys: Any = None, prefix: str = ""):
        keys = ["ymin", "xmin", "ymax", "xmax"] if keys is None else list(keys)
        if len(keys) != 4:
            raise ValueError(f"BoundingBox expects 4 keys but got {len(keys)}")
        self._prefix = prefix
        self._full_keys = [prefix + k for k in keys]
        super().__init__(self._full_keys)

    def tensors_to_item(self, keys_to_tensors: dict) -> Any:
        sides = []
        for key in self._full_keys:
            side = keys_to_tensors[key]
            sides.append(_hb.expand_dims(side.values if _is_sparse(side) else side, 0))
        return _hb.transpose(_hb.concat(sides, 0))


class Tensor(ItemHandler):
    """A feature as it is, reshaped to ``shape`` or to the values of ``shape_keys``; a sparse
    one made dense with ``default_value``."""

    def __init__(
        self, tensor_key: str, shape_keys: Any = None, shape: Any = None, default_value: Any = 0
    ):
        if shape_keys and shape is not None:
            raise ValueError("Cannot specify both shape_keys and shape parameters.")
        if shape_keys and not isinstance(shape_keys, list):
            shape_keys = [shape_keys]
        self._tensor_key = tensor_key
        self._shape_keys = shape_keys
        self._shape = shape
        self._default_value = default_value
        super().__init__([tensor_key] + list(shape_keys or []))

    def tensors_to_item(self, keys_to_tensors: dict) -> Any:
        tensor = keys_to_tensors[self._tensor_key]
        shape = self._shape
        if self._shape_keys:
            dims = []
            for k in self._shape_keys:
                d = keys_to_tensors[k]
                dims.append(_hb.sparse_tensor_to_dense(d) if _is_sparse(d) else d)
            shape = _hb.reshape(_hb.stack(dims), [-1])
        if _is_sparse(tensor):
            if shape is not None:
                tensor = _hb.sparse_reshape(tensor, shape)
            return _hb.sparse_tensor_to_dense(tensor, self._default_value)
        return tensor if shape is None else _hb.reshape(tensor, shape)


class LookupTensor(Tensor):
    """A ``Tensor`` item mapped through ``table`` (``table.lookup``)."""

    def __init__(
        self,
        tensor_key: str,
        table: Any,
        shape_keys: Any = None,
        shape: Any = None,
        default_value: Any = "",
    ):
        self._table = table
        super().__init__(tensor_key, shape_keys, shape, default_value)

    def tensors_to_item(self, keys_to_tensors: dict) -> Any:
        return self._table.lookup(super().tensors_to_item(keys_to_tensors))


class BackupHandler(ItemHandler):
    """``handler``'s item, or ``backup``'s when that item has no elements."""

    def __init__(self, handler: Any, backup: Any):
        for what, h in (("Primary", handler), ("Backup", backup)):
            if not isinstance(h, ItemHandler):
                raise ValueError(f"{what} handler is of type {type(h)} instead of ItemHandler")
        self._handler, self._backup = handler, backup
        super().__init__(handler.keys + backup.keys)

    def tensors_to_item(self, keys_to_tensors: dict) -> Any:
        item = self._handler.tensors_to_item(keys_to_tensors)
        return _hb.cond(
            _hb.equal(_hb.reduce_prod(_hb.shape(item)), 0),
            lambda: self._backup.tensors_to_item(keys_to_tensors),
            lambda: item,
        )


class SparseTensor(ItemHandler):
    """A SparseTensor whose last index is the values of the ``indices_key`` feature (the ids)
    and whose values are the ``values_key`` feature's; dense with ``densify``."""

    def __init__(
        self,
        indices_key: str | None = None,
        values_key: str | None = None,
        shape_key: str | None = None,
        shape: Any = None,
        densify: bool = False,
        default_value: Any = 0,
    ):
        self._indices_key = indices_key or "indices"
        self._values_key = values_key or "values"
        self._shape_key = shape_key
        self._shape = shape
        self._densify = densify
        self._default_value = default_value
        keys = [self._indices_key, self._values_key] + ([shape_key] if shape_key else [])
        super().__init__(keys)

    def tensors_to_item(self, keys_to_tensors: dict) -> Any:
        indices = keys_to_tensors[self._indices_key]
        values = keys_to_tensors[self._values_key]
        if self._shape_key:
            shape = keys_to_tensors[self._shape_key]
            if _is_sparse(shape):
                shape = _hb.sparse_tensor_to_dense(shape)
        elif self._shape:
            shape = self._shape
        else:
            shape = indices.dense_shape
        rank = _hb.shape(indices.indices)[1]
        ids = _hb.cast(indices.values, _hb.int64)
        kept = _hb.slice(indices.indices, [0, 0], _hb.stack([-1, rank - 1]))
        new_indices = _hb.concat([kept, _hb.reshape(ids, [-1, 1])], 1)
        tensor = _hb.SparseTensor(new_indices, values.values, shape)
        if self._densify:
            return _hb.sparse_tensor_to_dense(tensor, self._default_value)
        return tensor


class Image(ItemHandler):
    """An image decoded from ``image_key`` by the format in ``format_key``: raw bytes
    (``raw``/``RAW``: ``decode_raw`` to ``dtype``), JPEG (``decode_jpeg``), else
    ``decode_image``; [H, W, channels], or ``shape``; ``repeated``: a list of images."""

    def __init__(
        self,
        image_key: str | None = None,
        format_key: str | None = None,
        shape: Any = None,
        channels: int = 3,
        dtype: Any = None,
        repeated: bool = False,
        dct_method: str = "",
    ):
        self._image_key = image_key or "image/encoded"
        self._format_key = format_key or "image/format"
        super().__init__([self._image_key, self._format_key])
        self._shape = shape
        self._channels = channels
        self._dtype = _hb.as_dtype(dtype) if dtype is not None else _hb.uint8
        self._repeated = repeated
        self._dct_method = dct_method

    def tensors_to_item(self, keys_to_tensors: dict) -> Any:
        buf = keys_to_tensors[self._image_key]
        fmt = keys_to_tensors[self._format_key]
        if self._repeated:
            return _hb.map_fn(lambda x: self._decode(x, fmt), buf, dtype=self._dtype)
        return self._decode(buf, fmt)

    def _decode(self, buf: Any, fmt: Any) -> Any:
        def decode_image() -> Any:
            return _hb.cast(_hb.image.decode_image(buf, channels=self._channels), self._dtype)

        def decode_jpeg() -> Any:
            img = _hb.image.decode_jpeg(buf, channels=self._channels, dct_method=self._dct_method)
            return _hb.cast(img, self._dtype)

        def check_jpeg() -> Any:
            return _hb.cond(_hb.image.is_jpeg(buf), decode_jpeg, decode_image, name="cond_jpeg")

        def decode_raw() -> Any:
            return _hb.decode_raw(buf, out_type=self._dtype)

        raw = _hb.logical_or(_hb.equal(fmt, "raw"), _hb.equal(fmt, "RAW"))
        image = _hb.case([(raw, decode_raw)], default=check_jpeg, exclusive=True)
        image.set_shape([None, None, self._channels])
        return image if self._shape is None else _hb.reshape(image, self._shape)


def _sequence_of(values: list, return_dense: bool, default_value: float) -> Any:
    """Sparse [T, N] features stacked along a new last axis: [T, N, len(values)]."""
    parts = []
    for v in values:
        dims = _hb.concat(
            [_hb.cast(_hb.shape(v), _hb.int64), _hb.constant([1], dtype=_hb.int64)], 0
        )
        parts.append(_hb.sparse_reshape(v, dims))
    out = _hb.sparse_concat(2, parts)
    return _hb.sparse_tensor_to_dense(out, default_value=default_value) if return_dense else out


class BoundingBoxSequence(ItemHandler):
    """Per-frame boxes of a sequence example: [T, max boxes, 4] (``default_value`` padding)."""

    def __init__(
        self,
        keys: Any = None,
        prefix: str | None = None,
        return_dense: bool = True,
        default_value: float = -1.0,
    ):
        keys = ["ymin", "xmin", "ymax", "xmax"] if keys is None else list(keys)
        if len(keys) != 4:
            raise ValueError(f"BoundingBoxSequence expects 4 keys but got {len(keys)}")
        self._full_keys = [(prefix or "") + k for k in keys]
        self._return_dense, self._default_value = return_dense, default_value
        super().__init__(self._full_keys)

    def tensors_to_item(self, keys_to_tensors: dict) -> Any:
        values = [keys_to_tensors[k] for k in self._full_keys]
        return _sequence_of(values, self._return_dense, self._default_value)


class KeypointsSequence(ItemHandler):
    """Per-frame keypoints of a sequence example: [T, max points, 2]."""

    def __init__(
        self,
        keys: Any = None,
        prefix: str | None = None,
        return_dense: bool = True,
        default_value: float = -1.0,
    ):
        keys = ["y", "x"] if keys is None else list(keys)
        if len(keys) != 2:
            raise ValueError(f"KeypointsSequence expects 2 keys but got {len(keys)}")
        self._full_keys = [(prefix or "") + k for k in keys]
        self._return_dense, self._default_value = return_dense, default_value
        super().__init__(self._full_keys)

    def tensors_to_item(self, keys_to_tensors: dict) -> Any:
        values = [keys_to_tensors[k] for k in self._full_keys]
        return _sequence_of(values, self._return_dense, self._default_value)


class NumBoxesSequence(ItemHandler):
    """The number of boxes in each frame of a sequence example (from the sparse features'
    indices); with ``check_consistency``, every key must give the same counts."""

    def __init__(self, keys: Any = None, check_consistency: bool = True):
        if not keys:
            raise ValueError("keys must not be empty.")
        self._check_consistency = check_consistency
        super().__init__(keys)

    @staticmethod
    def _count(t: Any) -> Any:
        if not _is_sparse(t):
            raise ValueError("tensor must be of type tf.SparseTensor.")
        ids = _hb.SparseTensor(t.indices, t.indices[:, 1], t.dense_shape)
        ids = _hb.sparse_tensor_to_dense(ids, default_value=-1)
        return _hb.reduce_max(_hb.pad(ids + 1, [[0, 0], [0, 1]]), axis=1)

    def tensors_to_item(self, keys_to_tensors: dict) -> Any:
        n = self._count(keys_to_tensors[self._keys[0]])
        checks = []
        if self._check_consistency:
            for k in self._keys[1:]:
                checks.append(_hb.assert_equal(n, self._count(keys_to_tensors[k])))
        with _hb.control_dependencies(checks):
            return _hb.identity(n)


class TFExampleDecoder(DataDecoder):
    """Items of a serialized tf.Example: parsed with ``keys_to_features``, then each item made
    by its handler in ``items_to_handlers``."""

    def __init__(self, keys_to_features: dict, items_to_handlers: dict):
        self._keys_to_features = keys_to_features
        self._items_to_handlers = items_to_handlers

    def list_items(self) -> list:
        return list(self._items_to_handlers.keys())

    def decode(self, serialized_example: Any, items: Any = None) -> list:
        example = _records.parse_single_example(serialized_example, self._keys_to_features)
        for k in sorted(self._keys_to_features):
            v = self._keys_to_features[k]
            if isinstance(v, _records.FixedLenFeature):
                example[k] = _hb.reshape(example[k], v.shape)
        return _items(self._items_to_handlers, items, example)


class TFSequenceExampleDecoder(DataDecoder):
    """Items of a serialized tf.SequenceExample (context and sequence features, whose keys
    must differ)."""

    def __init__(
        self,
        keys_to_context_features: dict,
        keys_to_sequence_features: dict,
        items_to_handlers: dict,
    ):
        shared = set(keys_to_context_features) & set(keys_to_sequence_features)
        if shared:
            raise ValueError(
                f"Context and sequence keys are not unique: {sorted(shared)} are in both"
            )
        self._context = keys_to_context_features
        self._sequence = keys_to_sequence_features
        self._items_to_handlers = items_to_handlers

    def list_items(self) -> list:
        return list(self._items_to_handlers.keys())

    def decode(self, serialized_example: Any, items: Any = None) -> list:
        context, lists = _records.parse_single_sequence_example(
            serialized_example, self._context, self._sequence
        )
        context = dict(context)
        for k, v in self._context.items():
            if isinstance(v, _records.FixedLenFeature):
                context[k] = _hb.reshape(context[k], v.shape)
        return _items(self._items_to_handlers, items, {**lists, **context})


def _items(handlers: dict, items: Any, features: dict) -> list:
    out = []
    for item in items or list(handlers.keys()):
        if item not in handlers:
            raise ValueError(f"decode: no handler for item {item!r}; items: {list(handlers)}")
        h = handlers[item]
        out.append(h.tensors_to_item({key: features[key] for key in h.keys}))
    return out


class DatasetDataProvider(DataProvider):
    """Every item of ``dataset`` (its decoder's) for one record read by ``parallel_read``,
    and ``record_key`` (the record's key)."""

    def __init__(
        self,
        dataset: Dataset,
        num_readers: int = 1,
        reader_kwargs: dict | None = None,
        shuffle: bool = True,
        num_epochs: int | None = None,
        common_queue_capacity: int = 256,
        common_queue_min: int = 128,
        record_key: str = "record_key",
        seed: int | None = None,
        scope: str | None = None,
    ):
        key, data = parallel_read(
            dataset.data_sources,
            reader_class=dataset.reader,
            num_epochs=num_epochs,
            num_readers=num_readers,
            reader_kwargs=reader_kwargs,
            shuffle=shuffle,
            capacity=common_queue_capacity,
            min_after_dequeue=common_queue_min,
            seed=seed,
            scope=scope,
        )
        items = dataset.decoder.list_items()
        items_to_tensors = dict(zip(items, dataset.decoder.decode(data, items)))
        if record_key in items_to_tensors:
            raise ValueError(
                "The item name used for `record_key` cannot also be used for a dataset item: "
                f"{record_key}"
            )
        items_to_tensors[record_key] = key
        super().__init__(items_to_tensors, dataset.num_samples)
