"""TF1's file readers: TextLineReader, WholeFileReader, FixedLengthRecordReader, TFRecordReader.

A reader is a resource op (like a queue): its handle is kept per session in ``ctx.resources``.
``ReaderRead`` takes the reader and a queue of filenames (``string_input_producer``); when the
reader has no records left it dequeues the next filename, waiting without a thread like
``QueueDequeue``, and gets OutOfRangeError once that queue is closed and empty. A file is read
whole when it is dequeued, then handed out a record at a time.

Keys are TF1's: ``b"<file>:<line>"`` (lines count from 1, skipped header lines included) for
text lines, ``b"<file>:<record>"`` (from 0) for fixed-length records, ``b"<file>:<offset>"``
(the byte offset where the record starts) for TFRecords, the file name for whole files. A trailing partial fixed-length record is dropped, as in TF.
"""

from __future__ import annotations

import collections
import os
import threading
from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import DataLossError, InvalidArgumentError, NotFoundError, OutOfRangeError
from ..graph import Tensor, TensorShape
from ..registry import Cost, apply, apply_op, defop
from .data_flow import _QUEUE_TYPES, _handle


def _no_cost(op, ins, outs):
    return Cost()


class _Reader:
    """A reader's state: the records of the files dequeued so far that are not yet read."""

    def __init__(self, name: str, attrs: dict):
        self.name = name
        self.kind = attrs["kind"]
        self.attrs = attrs
        self.pending: collections.deque = collections.deque()
        self.produced = 0
        self.completed = 0
        self.lock = threading.Lock()

    def matches(self, attrs: dict) -> bool:
        return self.attrs == attrs

    def describe(self) -> str:
        return f"{self.kind} {dict(self.attrs)}"

    def records(self, path: bytes) -> list:
        """(key, value) for each record of the file ``path``."""
        with open(os.fsdecode(path), "rb") as f:
            data = f.read()
        a = self.attrs
        if self.kind == "WholeFileReader":
            return [(path, data)]
        if self.kind == "TFRecordReader":
            from .records import tfrecords

            return [(b"%s:%d" % (path, off), rec) for off, rec in tfrecords(data, path)]
        if self.kind == "TextLineReader":
            lines = data.split(b"\n")
            if lines and lines[-1] == b"":
                lines.pop()  # the newline that ends the last line
            skip = a["skip_header_lines"]
            return [
                (b"%s:%d" % (path, i + 1), ln[:-1] if ln.endswith(b"\r") else ln)
                for i, ln in enumerate(lines)
                if i >= skip
            ]
        n, head, foot = a["record_bytes"], a["header_bytes"], a["footer_bytes"]
        hop = a["hop_bytes"] or n
        body = data[head : len(data) - foot]
        out = []
        pos = 0
        while pos + n <= len(body):
            out.append((b"%s:%d" % (path, len(out)), body[pos : pos + n]))
            pos += hop
        return out

    def read(self, queue: Any, n: int | None, op_name: str, step: Any, done: Any) -> None:
        """Hand ``n`` records to ``done`` (one when ``n`` is None; up to ``n``, fewer when the
        current file ends: a call dequeues another file only when it has no record yet)."""
        keys: list = []
        values: list = []
        want = 1 if n is None else n

        def finish() -> None:
            if n is None:
                done((np.array(keys[0], dtype=object), np.array(values[0], dtype=object)))
                return
            k, v = np.empty(len(keys), dtype=object), np.empty(len(values), dtype=object)
            k[:], v[:] = keys, values
            done((k, v))

        def pump() -> None:
            while len(keys) < want:
                with self.lock:
                    rec = self.pending.popleft() if self.pending else None
                    if rec is not None:
                        self.produced += 1
                if rec is None:
                    if keys:  # as TF's ReadUpTo: one call hands out at most the rest of one file
                        break
                    queue.get(None, False, got_file, step)
                    return
                keys.append(rec[0])
                values.append(rec[1])
            finish()

        def got_file(value: Any = None, error: BaseException | None = None) -> None:
            if error is not None:
                if isinstance(error, OutOfRangeError):
                    with self.lock:
                        more = bool(self.pending)  # another step's file arrived meanwhile
                    if more:
                        pump()
                        return
                    if keys and n is not None:
                        finish()
                        return
                    error = OutOfRangeError(
                        f"{op_name}: the filename queue {queue.name} is closed and empty "
                        f"({self.produced} records read)"
                    )
                done(None, error)
                return
            path = value.item() if isinstance(value, np.ndarray) else value
            try:
                recs = self.records(path)
            except OSError as e:
                done(None, NotFoundError(f"{op_name}: cannot read {path!r}: {e}"))
                return
            except DataLossError as e:
                done(None, DataLossError(f"{op_name}: {e.message}"))
                return
            with self.lock:
                self.pending.extend(recs)
                self.completed += 1
            pump()

        pump()


def _reader_op(kind: str) -> Any:
    d = defop(kind, stateful=True, is_ref=True, differentiable=False)
    d.shape(lambda op: [(TensorShape([]), _dt.string)])
    d.cost(_no_cost)

    @d.kernel("cpu")
    def _reader(ctx):
        return _handle(ctx, lambda key: _Reader(key, ctx.attrs))

    return d


TextLineReaderOp = _reader_op("TextLineReader")
WholeFileReaderOp = _reader_op("WholeFileReader")
FixedLengthRecordReaderOp = _reader_op("FixedLengthRecordReader")
TFRecordReaderOp = _reader_op("TFRecordReader")
_READER_TYPES = ("TextLineReader", "WholeFileReader", "FixedLengthRecordReader", "TFRecordReader")


def _check_reader_inputs(op: Any) -> None:
    r, q = op.inputs[0], op.inputs[1]
    if r.op.type not in _READER_TYPES:
        raise InvalidArgumentError(f"{op.type}: input 0 must be a reader, got {r.name}")
    if q.op.type not in _QUEUE_TYPES:
        raise InvalidArgumentError(f"{op.type}: input 1 must be a queue, got {q.name}")
    if q.op.attrs["component_types"] != (_dt.string,):
        raise InvalidArgumentError(
            f"{op.type}: the queue {q.op.name} must hold filenames (one string component), "
            f"it holds {[d.name for d in q.op.attrs['component_types']]}"
        )


ReaderRead = defop("ReaderRead", stateful=True, differentiable=False)
ReaderRead.cost(_no_cost)


@ReaderRead.shape
def _reader_read_shape(op):
    _check_reader_inputs(op)
    return [(TensorShape([]), _dt.string), (TensorShape([]), _dt.string)]


@ReaderRead.kernel("cpu", is_async=True)
def _reader_read(ctx, step, inputs, done):
    reader, queue = inputs
    reader.read(queue, None, f"ReaderRead {ctx.op.name!r}", step, done)


ReaderReadUpTo = defop("ReaderReadUpTo", stateful=True, differentiable=False)
ReaderReadUpTo.cost(_no_cost)


@ReaderReadUpTo.shape
def _reader_read_up_to_shape(op):
    _check_reader_inputs(op)
    return [(TensorShape([None]), _dt.string), (TensorShape([None]), _dt.string)]


ReaderReadUpTo.expected_shapes = lambda op, in_shapes: [(1,), (1,)]


@ReaderReadUpTo.kernel("cpu", is_async=True)
def _reader_read_up_to(ctx, step, inputs, done):
    reader, queue, n = inputs
    n = int(n)
    if n <= 0:
        done(None, InvalidArgumentError(f"ReaderReadUpTo {ctx.op.name!r}: num_records {n} <= 0"))
        return
    reader.read(queue, n, f"ReaderReadUpTo {ctx.op.name!r}", step, done)


def _reader_stat(op_type: str, fn: Any) -> None:
    d = defop(op_type, stateful=True, differentiable=False)
    d.shape(lambda op: [(TensorShape([]), _dt.int64)])
    d.cost(_no_cost)

    @d.kernel("cpu")
    def _stat(ctx, reader):
        with reader.lock:
            return np.array(fn(reader), dtype=np.int64)


_reader_stat("ReaderNumRecordsProduced", lambda r: r.produced)
_reader_stat("ReaderNumWorkUnitsCompleted", lambda r: r.completed)

ReaderReset = defop("ReaderReset", stateful=True, differentiable=False)
ReaderReset.shape(lambda op: [])
ReaderReset.cost(_no_cost)


@ReaderReset.kernel("cpu")
def _reader_reset(ctx, reader):
    with reader.lock:
        reader.pending.clear()
        reader.produced = reader.completed = 0


# ---- the Python classes ---------------------------------------------------------------------------


def _queue_ref(queue: Any) -> Tensor:
    return getattr(queue, "queue_ref", queue)


class ReaderBase:
    """A reader: ``read(queue)`` gives the next (key, value) of the files named by ``queue``."""

    _kind = ""

    def __init__(self, attrs: dict, name: str | None = None):
        self._reader_ref = apply(self._kind, [], {"kind": self._kind, **attrs}, name or self._kind)

    @property
    def reader_ref(self) -> Tensor:
        return self._reader_ref

    @property
    def supports_serialize(self) -> bool:
        return False

    def read(self, queue: Any, name: str | None = None) -> tuple[Tensor, Tensor]:
        """(key, value): the next record, dequeuing a filename when the current file is done."""
        op = apply_op(
            "ReaderRead", [self._reader_ref, _queue_ref(queue)], name=name or "ReaderRead"
        )
        return op.outputs[0], op.outputs[1]

    def read_up_to(
        self, queue: Any, num_records: Any, name: str | None = None
    ) -> tuple[Tensor, Tensor]:
        """(keys, values): up to ``num_records`` records (fewer once the queue is exhausted)."""
        op = apply_op(
            "ReaderReadUpTo",
            [self._reader_ref, _queue_ref(queue), np.int64(num_records)],
            name=name or "ReaderReadUpTo",
        )
        return op.outputs[0], op.outputs[1]

    def num_records_produced(self, name: str | None = None) -> Tensor:
        return apply("ReaderNumRecordsProduced", [self._reader_ref], name=name)

    def num_work_units_completed(self, name: str | None = None) -> Tensor:
        return apply("ReaderNumWorkUnitsCompleted", [self._reader_ref], name=name)

    def reset(self, name: str | None = None) -> Any:
        return apply("ReaderReset", [self._reader_ref], name=name or "ReaderReset")


class TextLineReader(ReaderBase):
    """Reads the lines of each file (without the newline), after ``skip_header_lines``."""

    _kind = "TextLineReader"

    def __init__(self, skip_header_lines: int | None = None, name: str | None = None):
        skip = int(skip_header_lines or 0)
        if skip < 0:
            raise InvalidArgumentError(f"TextLineReader: skip_header_lines {skip} < 0")
        super().__init__({"skip_header_lines": skip}, name)


class WholeFileReader(ReaderBase):
    """Reads each file whole: the key is the file name, the value its contents."""

    _kind = "WholeFileReader"

    def __init__(self, name: str | None = None):
        super().__init__({}, name)


class FixedLengthRecordReader(ReaderBase):
    """Reads records of ``record_bytes`` bytes, after ``header_bytes`` and before
    ``footer_bytes`` of each file, starting every ``hop_bytes`` (default record_bytes)."""

    _kind = "FixedLengthRecordReader"

    def __init__(
        self,
        record_bytes: int,
        header_bytes: int | None = None,
        footer_bytes: int | None = None,
        hop_bytes: int | None = None,
        name: str | None = None,
        encoding: str | None = None,
    ):
        if encoding:
            raise InvalidArgumentError(
                "FixedLengthRecordReader: compressed files are not supported"
            )
        attrs = {
            "record_bytes": int(record_bytes),
            "header_bytes": int(header_bytes or 0),
            "footer_bytes": int(footer_bytes or 0),
            "hop_bytes": int(hop_bytes or 0),
        }
        if attrs["record_bytes"] <= 0 or min(attrs.values()) < 0:
            raise InvalidArgumentError(
                f"FixedLengthRecordReader: record_bytes must be > 0 and the others >= 0, got {attrs}"
            )
        super().__init__(attrs, name)


class TFRecordReader(ReaderBase):
    """Reads the records of TFRecord files (uncompressed); a bad checksum or a truncated record
    fails the read with DataLossError naming the file and offset."""

    _kind = "TFRecordReader"

    def __init__(self, name: str | None = None, options: Any = None):
        kind = getattr(options, "compression_type", options)
        if kind not in (None, "", 0) and str(kind) not in ("", "0", "None"):
            raise InvalidArgumentError("TFRecordReader: compressed records are not supported")
        super().__init__({}, name)


def string_input_producer(
    string_tensor: Any,
    num_epochs: int | None = None,
    shuffle: bool = True,
    seed: int | None = None,
    capacity: int = 32,
    shared_name: str | None = None,
    name: str | None = None,
    cancel_op: Any = None,
) -> Any:
    """TF1's ``tf.train.string_input_producer``: a queue of the strings (filenames) of the
    vector ``string_tensor``, fed by a queue runner ``num_epochs`` times (None: forever),
    shuffled each epoch with ``shuffle``."""
    from ..registry import convert_to_tensor
    from ..train.input import input_producer

    if isinstance(string_tensor, (list, tuple)) and not string_tensor:
        raise InvalidArgumentError("string_input_producer: string_tensor is empty")
    t = convert_to_tensor(string_tensor, dtype=_dt.string)
    if t.shape.ndims not in (None, 1):
        raise InvalidArgumentError(
            f"string_input_producer: string_tensor must be a vector, got shape {t.shape}"
        )
    if t.shape.ndims == 1 and t.shape.dims[0] == 0:
        raise InvalidArgumentError("string_input_producer: string_tensor is empty")
    return input_producer(
        t, [], num_epochs, shuffle, seed, capacity, shared_name,
        summary_name=f"fraction_of_{capacity}_full",
        name=name or "input_producer", cancel_op=cancel_op,
    )  # fmt: skip
