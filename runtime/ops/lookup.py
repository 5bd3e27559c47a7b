"""Lookup tables (TF1's ``tf.contrib.lookup`` / ``tf.lookup``): a table maps keys (strings or
integers) to values; it lives in the session (one per session, like a variable) and is filled by
its initializer op, which ``tf.tables_initializer()`` groups. Until then a lookup fails with
FailedPreconditionError naming the table.

Ops (CPU only): ``LookupTableInit(keys, values)`` fills the table named by its ``table`` attr
(a second run refills it), ``LookupTableFind(keys, default)`` maps every key (a missing one gives
``default``), ``LookupTableSize()``.
"""

from __future__ import annotations

import os
import re
from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import FailedPreconditionError, InvalidArgumentError, NotFoundError
from ..graph import GraphKeys, TensorShape, get_default_graph
from ..registry import Cost, apply, apply_op, convert_to_tensor, defop

TABLE_INITIALIZERS = "table_initializer"


def _no_cost(op: Any, ins: list, outs: list) -> Cost:
    return Cost()


def _key(v: Any) -> Any:
    return v if isinstance(v, bytes) else v.item() if hasattr(v, "item") else v


def _table(ctx: Any) -> dict:
    t = ctx.resources.get("table:" + ctx.attrs["table"])
    if t is None:
        raise FailedPreconditionError(
            f"{ctx.op.type} {ctx.op.name!r}: table {ctx.attrs['table']!r} is not initialized; "
            "run tf.tables_initializer() (or the table's init op) first",
            ctx.op,
        )
    return t


LookupTableInit = defop("LookupTableInit", stateful=True, differentiable=False, cost=_no_cost)


@LookupTableInit.shape
def _init_shape(op):
    keys, values = op.inputs
    if keys.shape.ndims not in (None, 1) or values.shape.ndims not in (None, 1):
        raise InvalidArgumentError(f"{op.name}: keys and values must be vectors")
    return []


@LookupTableInit.kernel("cpu")
def _init(ctx, keys, values):
    if ctx.attrs.get("error"):
        raise InvalidArgumentError(f"{ctx.op.name}: {ctx.attrs['error']}", ctx.op)
    if len(keys) != len(values):
        raise InvalidArgumentError(
            f"{ctx.op.name}: {len(keys)} keys but {len(values)} values", ctx.op
        )
    table: dict = {}
    for k, v in zip(keys.tolist(), values.tolist()):
        k = _key(k)
        if table.setdefault(k, v) != v:
            raise InvalidArgumentError(
                f"{ctx.op.name}: table {ctx.attrs['table']!r} has different values for the key "
                f"{k!r}",
                ctx.op,
            )
    ctx.resources["table:" + ctx.attrs["table"]] = table
    return None


LookupTableFind = defop("LookupTableFind", stateful=True, differentiable=False, cost=_no_cost)


@LookupTableFind.shape
def _find_shape(op):
    keys, default = op.inputs
    if default.shape.ndims not in (None, 0):
        raise InvalidArgumentError(f"{op.name}: the default value must be a scalar")
    return [(keys.shape, op.attrs["value_dtype"])]


@LookupTableFind.kernel("cpu")
def _find(ctx, keys, default):
    table = _table(ctx)
    d = default.item() if hasattr(default, "item") else default
    flat = [table.get(_key(k), d) for k in np.asarray(keys, dtype=object).reshape(-1)]
    dt = ctx.attrs["value_dtype"].np
    out = np.empty(len(flat), dtype=dt)
    out[:] = flat
    return out.reshape(np.shape(keys))


LookupTableSize = defop("LookupTableSize", stateful=True, differentiable=False, cost=_no_cost)
LookupTableSize.shape(lambda op: [(TensorShape([]), _dt.int64)])


@LookupTableSize.kernel("cpu")
def _size(ctx):
    return np.int64(len(_table(ctx)))


# ---- the Python API ------------------------------------------------------------------------


class KeyValueTensorInitializer:
    """Fills a table with ``keys[i] -> values[i]`` (tensors or values, vectors)."""

    def __init__(
        self, keys: Any, values: Any, key_dtype: Any = None, value_dtype: Any = None, name=None
    ):
        self.keys = convert_to_tensor(keys, dtype=key_dtype)
        self.values = convert_to_tensor(values, dtype=value_dtype)
        self.key_dtype, self.value_dtype = self.keys.dtype, self.values.dtype

    def _tensors(self) -> tuple:
        return self.keys, self.values


class TextFileInitializer:
    """Fills a table from a text file, one entry per line: the key is the whole line
    (``key_index=-2``) or a ``delimiter``-separated column, the value the line number
    (``value_index=-1``) or a column; ``vocab_size`` reads only that many lines.

    Lines end at "\\n" (a "\\r" before it is dropped), as TF reads them. The file is read when
    the table is built; what TF's table init rejects (an empty line, fewer lines than
    ``vocab_size``, too few columns, a field that is not a number of the key or value dtype)
    makes the table's init op fail with InvalidArgumentError, as TF's does."""

    WHOLE_LINE, LINE_NUMBER = -2, -1

    def __init__(
        self,
        filename: Any,
        key_dtype: Any,
        key_index: int,
        value_dtype: Any,
        value_index: int,
        vocab_size: int | None = None,
        delimiter: str = "\t",
        name: str | None = None,
    ):
        self.filename = (
            os.fspath(filename) if not isinstance(filename, bytes) else filename.decode()
        )
        self.key_dtype, self.value_dtype = _dt.as_dtype(key_dtype), _dt.as_dtype(value_dtype)
        self.key_index, self.value_index = key_index, value_index
        if vocab_size is not None and int(vocab_size) <= 0:
            raise ValueError(f"TextFileInitializer: invalid vocab_size {vocab_size}")
        self.vocab_size, self.delimiter = vocab_size, delimiter
        # who reads the file, for the messages (e.g. a feature column); the init op's error
        self.context = ""
        self.error = ""

    def _lines(self) -> tuple:
        """The file's lines as TF's InputBuffer reads them (split at "\\n", a trailing "\\r"
        dropped, an empty last piece not a line), and each one's length in the file (with its
        "\\n")."""
        try:
            with open(self.filename, "rb") as f:
                pieces = f.read().split(b"\n")
        except FileNotFoundError:
            raise NotFoundError(f"lookup table: no vocabulary file {self.filename!r}") from None
        sizes = [len(p) + 1 for p in pieces]
        sizes[-1] -= 1
        lines = [p[:-1] if p.endswith(b"\r") else p for p in pieces]
        if not lines[-1]:
            lines.pop()
        return lines, sizes

    def _tensors(self) -> tuple:
        from .array import constant

        try:
            keys, values = self._read()
        except InvalidArgumentError as e:
            self.error = (self.context + ": " if self.context else "") + e.message
            keys, values = [], []
        return (
            constant(np.array(keys, dtype=self.key_dtype.np), dtype=self.key_dtype),
            constant(np.array(values, dtype=self.value_dtype.np), dtype=self.value_dtype),
        )

    def _read(self) -> tuple:
        """The keys and values, or InvalidArgumentError with TF's reason."""
        keys, values = [], []
        n = None if self.vocab_size is None else int(self.vocab_size)
        lines, sizes = self._lines()
        if n is not None:
            lines = lines[:n]
        need = max(self.key_index, self.value_index) + 1
        for i, line in enumerate(lines):
            if not line:
                at = sum(sizes[: i + 1])  # TF gives the position after the line
                raise InvalidArgumentError(
                    f"Invalid content in {self.filename}: empty line found at position {at}."
                )
            cols = line.split(self.delimiter.encode()) if need > 0 else []
            if len(cols) < need:
                raise InvalidArgumentError(
                    f"Invalid number of columns in {self.filename} line {i} ({line.decode(errors='replace')}) : "
                    f"expected {need} got {len(cols)}"
                )  # fmt: skip
            keys.append(self._field(line, cols, i, self.key_index, self.key_dtype))
            values.append(self._field(line, cols, i, self.value_index, self.value_dtype))
        if n is not None and len(lines) != n:
            raise InvalidArgumentError(
                f"Invalid vocab_size in {self.filename}: expected {n} but got {len(lines)}"
            )
        return keys, values

    def _field(self, line: bytes, cols: list, i: int, index: int, dtype: Any) -> Any:
        if index == self.LINE_NUMBER:
            v: Any = i
            return str(v).encode() if dtype.is_string else v
        tok = line if index == self.WHOLE_LINE else cols[index]
        if dtype.is_string:
            return tok
        text = tok.decode(errors="replace")
        try:
            if dtype.is_integer:
                if not re.fullmatch(r"\s*[-+]?[0-9]+\s*", text):
                    raise ValueError(text)
                v = int(text)
                info = np.iinfo(dtype.np)
                if not info.min <= v <= info.max:
                    raise ValueError(text)
                return v
            return float(text.replace("_", "x"))
        except ValueError:
            raise InvalidArgumentError(
                f"Field {text!r} in line {i} of {self.filename} is not a valid {dtype.name}."
            ) from None


class HashTable:
    """A table of keys to values filled by ``initializer`` (TF1's ``HashTable`` /
    ``StaticHashTable``); ``lookup(keys)`` gives ``default_value`` for a missing key."""

    def __init__(
        self,
        initializer: Any,
        default_value: Any,
        shared_name: str | None = None,
        name: str | None = None,
    ):
        g = get_default_graph()
        self.name = shared_name or g.unique_name(name or "hash_table")
        self.key_dtype = initializer.key_dtype
        self.value_dtype = initializer.value_dtype
        self.default_value = convert_to_tensor(default_value, dtype=self.value_dtype)
        keys, values = initializer._tensors()
        attrs = {"table": self.name}
        if getattr(initializer, "error", ""):
            attrs["error"] = initializer.error
        self.init = apply_op(
            "LookupTableInit", [keys, values], attrs, name=self.name + "/table_init"
        )
        g.add_to_collection(TABLE_INITIALIZERS, self.init)

    @property
    def initializer(self) -> Any:
        return self.init

    def lookup(self, keys: Any, name: str | None = None) -> Any:
        k = convert_to_tensor(keys, dtype=self.key_dtype)
        if k.dtype != self.key_dtype:
            raise InvalidArgumentError(
                f"table {self.name!r}: keys are {self.key_dtype.name}, got {k.dtype.name}"
            )
        attrs = {"table": self.name, "value_dtype": self.value_dtype}
        return apply(
            "LookupTableFind", [k, self.default_value], attrs, name or self.name + "/lookup"
        )

    def size(self, name: str | None = None) -> Any:
        return apply("LookupTableSize", [], {"table": self.name}, name or self.name + "/size")


StaticHashTable = HashTable


class IdTableWithHashBuckets:
    """A vocabulary table whose unknown keys go to one of ``num_oov_buckets`` extra ids after
    the vocabulary: ``size() + fingerprint64(key) % num_oov_buckets`` (integer keys are hashed
    as their decimal strings), TF1's ``IdTableWithHashBuckets`` with its default hasher."""

    def __init__(self, table: HashTable, num_oov_buckets: int):
        self._table = table
        self.num_oov_buckets = int(num_oov_buckets)
        self.name = table.name
        self.key_dtype = table.key_dtype
        self.value_dtype = table.value_dtype
        self.init = table.init

    @property
    def initializer(self) -> Any:
        return self.init

    def lookup(self, keys: Any, name: str | None = None) -> Any:
        from .array import cast
        from .hashing import string_to_hash_bucket_fast
        from .math import add, not_equal, where
        from .strings import as_string

        k = convert_to_tensor(keys, dtype=self.key_dtype)
        found = self._table.lookup(k)
        s = k if k.dtype.is_string else as_string(k)
        oov = add(
            string_to_hash_bucket_fast(s, self.num_oov_buckets),
            cast(self._table.size(), _dt.int64),
        )
        return where(
            not_equal(found, self._table.default_value),
            found,
            oov,
            name=name or self.name + "/oov_lookup",
        )

    def size(self, name: str | None = None) -> Any:
        from .math import add

        return add(self._table.size(), np.int64(self.num_oov_buckets), name=name)


def _with_oov(table: HashTable, num_oov_buckets: Any, hasher_spec: Any, fn: str) -> Any:
    """``table`` itself, or (num_oov_buckets > 0) a table sending an unknown key to
    ``vocab_size + fingerprint64(key) % num_oov_buckets``, as TF1 does."""
    n = int(num_oov_buckets or 0)
    if n < 0:
        raise InvalidArgumentError(f"{fn}: num_oov_buckets must be >= 0, got {num_oov_buckets}")
    if hasher_spec is not None:
        raise InvalidArgumentError(
            f"{fn}: hetbed hashes out-of-vocabulary keys with the default (fast) hasher only; "
            f"got hasher_spec={hasher_spec!r}"
        )
    return IdTableWithHashBuckets(table, n) if n else table


def index_table_from_tensor(
    mapping: Any, num_oov_buckets: int = 0, default_value: int = -1, hasher_spec: Any = None,
    dtype: Any = _dt.string, name: str | None = None,
) -> HashTable:  # fmt: skip
    """A table from each element of the vector ``mapping`` to its index (int64)."""
    from .manip import range_

    keys = convert_to_tensor(mapping, dtype=dtype)
    ids = range_(0, _size_i64(keys))
    table = HashTable(
        KeyValueTensorInitializer(keys, ids), default_value, name=name or "string_to_index"
    )
    return _with_oov(table, num_oov_buckets, hasher_spec, "index_table_from_tensor")


def _size_i64(t: Any) -> Any:
    from .array import cast, size

    return cast(size(t), _dt.int64)


def index_table_from_file(
    vocabulary_file: Any = None, num_oov_buckets: int = 0, vocab_size: int | None = None,
    default_value: int = -1, hasher_spec: Any = None, key_dtype: Any = _dt.string,
    name: str | None = None, key_column_index: int = -2, value_column_index: int = -1,
    delimiter: str = "\t",
) -> HashTable:  # fmt: skip
    """A table from each line of ``vocabulary_file`` (or its ``key_column_index`` column) to its
    line number (int64)."""
    return _index_table_from_file(
        vocabulary_file, num_oov_buckets, vocab_size, default_value, hasher_spec, key_dtype,
        name, key_column_index, value_column_index, delimiter,
    )  # fmt: skip


def _index_table_from_file(
    vocabulary_file, num_oov_buckets, vocab_size, default_value, hasher_spec, key_dtype, name,
    key_column_index=-2, value_column_index=-1, delimiter="\t", context: str = "",
) -> Any:  # fmt: skip
    """``index_table_from_file``; ``context`` (who reads the file) starts the init op's error."""
    init = TextFileInitializer(
        vocabulary_file, key_dtype, key_column_index, _dt.int64, value_column_index, vocab_size, delimiter
    )  # fmt: skip
    init.context = context
    table = HashTable(init, default_value, name=name or "string_to_index")
    return _with_oov(table, num_oov_buckets, hasher_spec, "index_table_from_file")


def index_to_string_table_from_tensor(
    mapping: Any, default_value: Any = "UNK", name: str | None = None
) -> HashTable:
    """A table from each index (int64) to the element of ``mapping`` there."""
    vals = convert_to_tensor(mapping, dtype=_dt.string)
    from .manip import range_

    return HashTable(
        KeyValueTensorInitializer(range_(0, _size_i64(vals)), vals), default_value,
        name=name or "index_to_string",
    )  # fmt: skip


def index_to_string_table_from_file(
    vocabulary_file: Any, vocab_size: int | None = None, default_value: Any = "UNK", name=None,
    key_column_index: int = -1, value_column_index: int = -2, delimiter: str = "\t",
) -> HashTable:  # fmt: skip
    """A table from each line number (int64) to the line of ``vocabulary_file``."""
    init = TextFileInitializer(
        vocabulary_file, _dt.int64, key_column_index, _dt.string, value_column_index, vocab_size, delimiter
    )  # fmt: skip
    return HashTable(init, default_value, name=name or "index_to_string")


def tables_initializer(name: str = "init_all_tables") -> Any:
    """One op running every table initializer of the default graph."""
    from .control import group, no_op

    inits = get_default_graph().get_collection(TABLE_INITIALIZERS)
    return group(*inits, name=name) if inits else no_op(name=name)


GraphKeys.TABLE_INITIALIZERS = TABLE_INITIALIZERS  # type: ignore[attr-defined]
