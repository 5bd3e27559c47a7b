"""Datasets that read files: ``TextLineDataset`` (lines of text files), ``TFRecordDataset``
(records of TFRecord files) and ``FixedLengthRecordDataset`` (records of one length); the file names are numpy values or a string tensor, and the files
are read when the dataset is iterated."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from hetbed.runtime import dtypes as _dt
from hetbed.runtime.errors import InvalidArgumentError
from hetbed.runtime.graph import Tensor

from .dataset import Dataset
from .elements import _bound, _to_array


def TextLineDataset(  # noqa: N802 - TF's class name
    filenames: Any, compression_type: Any = None, buffer_size: Any = None, num_parallel_reads=None
) -> Dataset:
    """The lines of the files ``filenames`` (a name or a list of names), in order, as scalar
    strings without their newline ("\r\n" too); files are read when iterated."""
    if compression_type:
        raise ValueError(f"TextLineDataset: compression {compression_type!r} is not supported")
    given = _to_array(filenames, "TextLineDataset", capture=True)

    def lines(path: bytes) -> Any:
        import os

        with open(os.fsdecode(path), "rb") as f:
            for ln in f:
                ln = ln[:-1] if ln.endswith(b"\n") else ln
                yield np.array(ln[:-1] if ln.endswith(b"\r") else ln, dtype=object)

    def make(env: dict) -> Any:
        (value,) = _bound([given], env)
        names = [
            n.encode() if isinstance(n, str) else n for n in np.asarray(value, dtype=object).ravel()
        ]
        return ([ln] for path in names for ln in lines(path))

    return Dataset(None, [_dt.string], [[]], make, [given] if isinstance(given, Tensor) else [])


def TFRecordDataset(  # noqa: N802 - TF's class name
    filenames: Any, compression_type: Any = None, buffer_size: Any = None, num_parallel_reads=None
) -> Dataset:
    """The records of the TFRecord files ``filenames`` (a name, a list of names or a string
    tensor), in order, as scalar strings (``parse_single_example`` them); a bad checksum or a
    truncated record fails naming the file and offset."""
    from hetbed.runtime.ops.records import tf_record_iterator

    if compression_type:
        raise ValueError(f"TFRecordDataset: compression {compression_type!r} is not supported")
    given = _to_array(filenames, "TFRecordDataset", capture=True)

    def make(env: dict) -> Any:
        import os

        (value,) = _bound([given], env)
        names = [
            n.decode() if isinstance(n, bytes) else str(n)
            for n in np.asarray(value, dtype=object).ravel()
        ]
        return (
            [np.array(r, dtype=object)]
            for path in names
            for r in tf_record_iterator(os.fspath(path))
        )

    return Dataset(None, [_dt.string], [[]], make, [given] if isinstance(given, Tensor) else [])


def FixedLengthRecordDataset(  # noqa: N802 - TF's class name
    filenames: Any,
    record_bytes: int,
    header_bytes: int | None = None,
    footer_bytes: int | None = None,
    buffer_size: Any = None,
    compression_type: Any = None,
    num_parallel_reads: Any = None,
) -> Dataset:
    """The ``record_bytes``-long records of the files ``filenames`` (CIFAR-10's binary batches,
    say), after each file's ``header_bytes`` and before its ``footer_bytes``, as scalar strings
    (``decode_raw`` them). A file whose body is not a whole number of records fails naming the
    file and its lengths, as TF's reader does."""
    if compression_type:
        raise ValueError(
            f"FixedLengthRecordDataset: compression {compression_type!r} is not supported"
        )
    for what, v in (("record_bytes", record_bytes), ("header_bytes", header_bytes),
                    ("footer_bytes", footer_bytes)):  # fmt: skip
        if v is not None and not isinstance(v, (int, np.integer)):
            raise TypeError(f"FixedLengthRecordDataset: {what} must be an int, got {v!r}")
    rec, head, foot = int(record_bytes), int(header_bytes or 0), int(footer_bytes or 0)
    if rec <= 0 or head < 0 or foot < 0:
        raise InvalidArgumentError(
            "FixedLengthRecordDataset: record_bytes must be positive and header_bytes and "
            f"footer_bytes not negative, got {rec}, {head}, {foot}"
        )
    given = _to_array(filenames, "FixedLengthRecordDataset", capture=True)

    def records(path: str) -> Any:
        if not os.path.isfile(path):
            from hetbed.runtime.errors import NotFoundError

            raise NotFoundError(f"FixedLengthRecordDataset: no file {path!r}")
        body = os.path.getsize(path) - head - foot
        if body < 0 or body % rec:
            raise InvalidArgumentError(
                f"FixedLengthRecordDataset: excluding the header ({head} bytes) and footer "
                f"({foot} bytes), input file {path!r} has body length {body} bytes, which is "
                f"not an exact multiple of the record length ({rec} bytes)"
            )
        with open(path, "rb") as f:
            f.seek(head)
            for _ in range(body // rec):
                yield [np.array(f.read(rec), dtype=object)]

    def make(env: dict) -> Any:
        (value,) = _bound([given], env)
        names = [os.fsdecode(n) for n in np.asarray(value, dtype=object).ravel()]
        return (r for path in names for r in records(path))

    return Dataset(None, [_dt.string], [[]], make, [given] if isinstance(given, Tensor) else [])
