"""String ops (TF1 semantics) over ``string`` tensors: object arrays whose elements are bytes.

Every kernel is registered for the CPU only: string tensors never go to a GPU. The ops: split
(into a minimal ``SparseTensor``), string <-> number, join, substr, length, regex_replace,
reduce_join, decode_raw, decode_csv and read_file / write_file.

Differences from TensorFlow 1.x: delimiters, separators, patterns and CSV defaults are Python
values fixed when the graph is built (TF also takes them as tensors); regular expressions are
Python's ``re`` (RE2's common syntax behaves the same).
"""

from __future__ import annotations

import csv
import os
import re
from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError, NotFoundError
from ..graph import Tensor, TensorShape
from ..registry import apply, apply_op, broadcast_shapes, convert_to_tensor, defop
from .sparse import (  # noqa: F401 - string_split's result; also imported from here
    SparseTensor,
    SparseTensorValue,
    sparse_placeholder,
    sparse_tensor_to_dense,
)

# ---- helpers -------------------------------------------------------------------------------------


def _string_input(op: Any, i: int = 0, what: str = "input") -> Tensor:
    t = op.inputs[i]
    if not t.dtype.is_string:
        raise InvalidArgumentError(f"{op.type}: {what} must be a string tensor, got {t.dtype.name}")
    return t


def _as_bytes(v: Any, what: str) -> bytes:
    if isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode("utf-8")
    raise TypeError(f"{what} must be str or bytes, got {type(v).__name__} {v!r}")


def _strings(shape: tuple, values: Any) -> np.ndarray:
    out = np.empty(shape, dtype=object)
    out.reshape(-1)[:] = list(values) if not isinstance(values, list) else values
    return out


def _map(x: np.ndarray, fn: Any, dtype: Any = object) -> np.ndarray:
    """``fn`` applied to every element of ``x``, keeping its shape."""
    flat = [fn(v) for v in x.reshape(-1)]
    if dtype is object:
        return _strings(x.shape, flat)
    return np.array(flat, dtype=dtype).reshape(x.shape)


def _string_shape(op: Any) -> list:
    return [(_string_input(op).shape, _dt.string)]


# ---- SparseTensor (the result of string_split): runtime/ops/sparse.py ---------------------------

# ---- StringSplit ----------------------------------------------------------------------------------

StringSplit = defop("StringSplit", differentiable=False)


@StringSplit.shape
def _string_split_shape(op):
    x = _string_input(op)
    if x.shape.ndims not in (None, 1):
        raise InvalidArgumentError(f"StringSplit: input must be a vector, got shape {x.shape}")
    return [
        (TensorShape([None, 2]), _dt.int64),
        (TensorShape([None]), _dt.string),
        (TensorShape([2]), _dt.int64),
    ]


def _expected_split_shapes(op, in_shapes):
    n = in_shapes[0][0] if in_shapes[0] else 1
    return [(n, 2), (n,), (2,)]


StringSplit.expected_shapes = _expected_split_shapes


def _split_one(s: bytes, attrs: dict) -> list:
    sep = attrs["sep"]
    if attrs["chars"]:  # TF1's string_split: every byte of the delimiter splits
        if not sep:
            return [s[i : i + 1] for i in range(len(s))]
        parts = re.split(b"[" + re.escape(sep) + b"]", s) if s else []
        return [p for p in parts if p] if attrs["skip_empty"] else parts
    if sep is None:
        return s.split(None, attrs["maxsplit"])
    return s.split(sep, attrs["maxsplit"])  # b"" gives [b""], as in TF


@StringSplit.kernel("cpu")
def _string_split(ctx, x):
    idx, vals = [], []
    width = 0
    for i, s in enumerate(x.reshape(-1)):
        parts = _split_one(s, ctx.attrs)
        width = max(width, len(parts))
        idx.extend((i, j) for j in range(len(parts)))
        vals.extend(parts)
    indices = np.array(idx, dtype=np.int64).reshape(-1, 2)
    return indices, _strings((len(vals),), vals), np.array([x.shape[0], width], dtype=np.int64)


def string_split(source: Any, delimiter: Any = " ", skip_empty: bool = True, name=None):
    """TF1's ``tf.string_split``: split each element of the vector ``source`` at every byte of
    ``delimiter`` ("" splits into bytes); a SparseTensor of shape [len(source), most parts]."""
    sep = _as_bytes(delimiter, "string_split: delimiter")
    attrs = {"sep": sep, "chars": True, "skip_empty": bool(skip_empty), "maxsplit": -1}
    op = apply_op("StringSplit", [source], attrs, name=name or "StringSplit")
    return SparseTensor(*op.outputs)


def strings_split(
    input: Any = None, sep: Any = None, maxsplit: int = -1, result_type: str = "SparseTensor",
    source: Any = None, name=None,
):  # fmt: skip
    """TF1's ``tf.strings.split``: split at the separator ``sep`` (None: runs of whitespace), at
    most ``maxsplit`` times; a SparseTensor (the only ``result_type`` hetbed has)."""
    if result_type != "SparseTensor":
        raise ValueError(
            f"strings.split: hetbed has result_type='SparseTensor' only, got {result_type!r}"
        )
    x = input if input is not None else source
    s = None if sep is None else _as_bytes(sep, "strings.split: sep")
    if s == b"":
        raise ValueError("strings.split: sep must not be empty")
    attrs = {"sep": s, "chars": False, "skip_empty": False, "maxsplit": int(maxsplit)}
    op = apply_op("StringSplit", [x], attrs, name=name or "StringSplit")
    return SparseTensor(*op.outputs)


# ---- StringToNumber, AsString -------------------------------------------------------------------

StringToNumber = defop("StringToNumber", differentiable=False)


@StringToNumber.shape
def _s2n_shape(op):
    return [(_string_input(op, 0, "string_tensor").shape, op.attrs["out_type"])]


def _parse_number(s: bytes, dtype: _dt.DType) -> Any:
    text = s.decode("utf-8", "replace").strip()
    if dtype.is_integer:
        v = int(text)
        info = np.iinfo(dtype.np)
        if not info.min <= v <= info.max:
            raise ValueError("out of range")
        return v
    return float(text)


@StringToNumber.kernel("cpu")
def _string_to_number(ctx, x):
    dt = ctx.attrs["out_type"]

    def parse(s):
        try:
            return _parse_number(s, dt)
        except ValueError:
            raise InvalidArgumentError(
                f"StringToNumber {ctx.op.name!r}: {s!r} is not a valid {dt.name} "
                f"(input shape {list(x.shape)})"
            ) from None

    return _map(x, parse, dt.np)


def string_to_number(
    string_tensor: Any = None, out_type: Any = _dt.float32, name=None, input: Any = None
) -> Tensor:
    """Parse each string as a number of ``out_type`` (float32, float64, int32 or int64)."""
    if string_tensor is None:
        string_tensor = input
    dt = _dt.as_dtype(out_type)
    if dt not in (_dt.float32, _dt.float64, _dt.int32, _dt.int64):
        raise TypeError(f"string_to_number: out_type must be float32/64 or int32/64, got {dt.name}")
    return apply("StringToNumber", [string_tensor], {"out_type": dt}, name or "StringToNumber")


AsString = defop("AsString", differentiable=False)


@AsString.shape
def _as_string_shape(op):
    x = op.inputs[0]
    if x.dtype.is_string:
        raise InvalidArgumentError("AsString: input is already a string tensor")
    return [(x.shape, _dt.string)]


@AsString.kernel("cpu")
def _as_string(ctx, x):
    a = ctx.attrs
    if x.dtype.kind == "b":
        fmt = None
    elif x.dtype.kind in "iu":
        fmt = "%d"
    else:
        prec = "" if a["precision"] < 0 else f".{a['precision']}"
        fmt = "%" + prec + ("e" if a["scientific"] else "g" if a["shortest"] else "f")
    width, fill = a["width"], a["fill"]

    def fmt_one(v):
        s = ("true" if v else "false") if fmt is None else fmt % v
        if width > 0 and len(s) < width:
            if fill == "0" and fmt is not None:
                sign = s[0] if s[0] in "+-" else ""
                s = sign + s[len(sign) :].rjust(width - len(sign), "0")
            else:
                s = s.rjust(width, fill or " ")
        return s.encode("ascii")

    return _map(x, fmt_one)


def as_string(
    input: Any, precision: int = -1, scientific: bool = False, shortest: bool = False,
    width: int = -1, fill: str = "", name=None,
):  # fmt: skip
    """Format each number as a string: integers as ``%d``, bools as true/false, floats as ``%f``
    (``%e`` with ``scientific``, ``%g`` with ``shortest``) with ``precision`` digits, padded on
    the left to ``width`` with ``fill`` (a space or "0")."""
    if scientific and shortest:
        raise InvalidArgumentError("as_string: scientific and shortest cannot both be set")
    if fill not in ("", " ", "0"):
        raise InvalidArgumentError(f"as_string: fill must be '', ' ' or '0', got {fill!r}")
    attrs = {
        "precision": int(precision),
        "scientific": bool(scientific),
        "shortest": bool(shortest),
        "width": int(width),
        "fill": fill,
    }
    return apply("AsString", [input], attrs, name or "AsString")


# ---- StringJoin, ReduceJoin ----------------------------------------------------------------------

StringJoin = defop("StringJoin", differentiable=False)


@StringJoin.shape
def _string_join_shape(op):
    shape = TensorShape([])
    for i in range(len(op.inputs)):
        shape = broadcast_shapes("StringJoin", shape, _string_input(op, i, f"input {i}").shape)
    return [(shape, _dt.string)]


@StringJoin.kernel("cpu")
def _string_join(ctx, *xs):
    sep = ctx.attrs["separator"]
    b = np.broadcast_arrays(*xs)
    out = np.empty(b[0].shape, dtype=object)
    flat = out.reshape(-1)
    cols = [x.reshape(-1) for x in b]
    for i in range(flat.size):
        flat[i] = sep.join(c[i] for c in cols)
    return out


def string_join(inputs: list, separator: Any = "", name=None) -> Tensor:
    """Join the strings of ``inputs`` (same shapes, or scalars) element by element."""
    if not inputs:
        raise InvalidArgumentError("string_join: inputs must not be empty")
    attrs = {"separator": _as_bytes(separator, "string_join: separator")}
    return apply("StringJoin", list(inputs), attrs, name or "StringJoin")


ReduceJoin = defop("ReduceJoin", differentiable=False)


def _join_axes(ndims: int, axis: Any) -> tuple:
    if axis is None:
        return tuple(range(ndims))
    axes = [axis] if isinstance(axis, (int, np.integer)) else list(axis)
    out = []
    for a in axes:
        if not -ndims <= a < ndims:
            raise InvalidArgumentError(f"ReduceJoin: axis {a} is out of range for rank {ndims}")
        out.append(int(a) % ndims)
    return tuple(out)


@ReduceJoin.shape
def _reduce_join_shape(op):
    x = _string_input(op, 0, "inputs")
    if x.shape.dims is None:
        return [(TensorShape(None), _dt.string)]
    axes = _join_axes(len(x.shape.dims), op.attrs["axis"])
    dims = [1 if i in axes else d for i, d in enumerate(x.shape.dims)]
    if not op.attrs["keep_dims"]:
        dims = [d for i, d in enumerate(x.shape.dims) if i not in axes]
    return [(TensorShape(dims), _dt.string)]


@ReduceJoin.kernel("cpu")
def _reduce_join(ctx, x):
    axes = _join_axes(x.ndim, ctx.attrs["axis"])
    keep = [i for i in range(x.ndim) if i not in axes]
    moved = np.transpose(x, keep + list(axes))
    rows = moved.reshape(int(np.prod([x.shape[i] for i in keep])), -1)
    sep = ctx.attrs["separator"]
    out = _strings((rows.shape[0],), [sep.join(r) for r in rows])
    shape = [1 if i in axes else n for i, n in enumerate(x.shape)]
    if not ctx.attrs["keep_dims"]:
        shape = [x.shape[i] for i in keep]
    return out.reshape(shape)


def reduce_join(
    inputs: Any, axis: Any = None, keep_dims: bool = False, separator: Any = "", name=None,
    reduction_indices: Any = None, keepdims: Any = None,
):  # fmt: skip
    """Join the strings of ``inputs`` along ``axis`` (None: all), in order."""
    if axis is None:
        axis = reduction_indices
    if keepdims is not None:
        keep_dims = keepdims
    if axis is not None and not isinstance(axis, (int, np.integer)):
        axis = [int(a) for a in axis]
    attrs = {
        "axis": axis,
        "keep_dims": bool(keep_dims),
        "separator": _as_bytes(separator, "reduce_join: separator"),
    }
    return apply("ReduceJoin", [inputs], attrs, name or "ReduceJoin")


# ---- Substr, StringLength, RegexReplace ----------------------------------------------------------

Substr = defop("Substr", differentiable=False)


@Substr.shape
def _substr_shape(op):
    x, pos, n = op.inputs
    _string_input(op)
    for t, what in ((pos, "pos"), (n, "len")):
        if not t.dtype.is_integer:
            raise InvalidArgumentError(f"Substr: {what} must be int32/int64, got {t.dtype.name}")
    return [(broadcast_shapes("Substr", broadcast_shapes("Substr", x.shape, pos.shape), n.shape),
             _dt.string)]  # fmt: skip


@Substr.kernel("cpu")
def _substr(ctx, x, pos, n):
    utf8 = ctx.attrs["unit"] == "UTF8_CHAR"
    xs, ps, ns = np.broadcast_arrays(x, pos, n)
    out = np.empty(xs.shape, dtype=object)
    flat = out.reshape(-1)
    for i, (s, p, k) in enumerate(zip(xs.reshape(-1), ps.reshape(-1), ns.reshape(-1))):
        seq = s.decode("utf-8") if utf8 else s
        p, k = int(p), int(k)
        if not -len(seq) <= p <= len(seq) or k < 0:
            raise InvalidArgumentError(
                f"Substr {ctx.op.name!r}: pos {p} (len {k}) is out of range for {s!r} "
                f"(input shape {list(x.shape)})"
            )
        p = p % len(seq) if p < 0 else p
        r = seq[p : p + k]
        flat[i] = r.encode("utf-8") if utf8 else r
    return out


def substr(input: Any, pos: Any, len: Any, name=None, unit: str = "BYTE") -> Tensor:  # noqa: A002
    """``len`` bytes (or UTF-8 characters with unit="UTF8_CHAR") of each string from ``pos``
    (negative: from the end); InvalidArgumentError when ``pos`` is past the end."""
    if unit not in ("BYTE", "UTF8_CHAR"):
        raise ValueError(f"substr: unit must be 'BYTE' or 'UTF8_CHAR', got {unit!r}")
    x = convert_to_tensor(input)
    p = convert_to_tensor(pos, graph=x.graph)
    k = convert_to_tensor(len, graph=x.graph)
    return apply("Substr", [x, p, k], {"unit": unit}, name or "Substr")


StringLength = defop("StringLength", differentiable=False)


@StringLength.shape
def _string_length_shape(op):
    return [(_string_input(op).shape, _dt.int32)]


@StringLength.kernel("cpu")
def _string_length(ctx, x):
    if ctx.attrs["unit"] == "UTF8_CHAR":
        return _map(x, lambda s: len(s.decode("utf-8", "replace")), np.int32)
    return _map(x, len, np.int32)


def string_length(input: Any, name=None, unit: str = "BYTE") -> Tensor:
    """The length of each string in bytes (or UTF-8 characters with unit="UTF8_CHAR")."""
    if unit not in ("BYTE", "UTF8_CHAR"):
        raise ValueError(f"strings.length: unit must be 'BYTE' or 'UTF8_CHAR', got {unit!r}")
    return apply("StringLength", [input], {"unit": unit}, name or "StringLength")


RegexReplace = defop("RegexReplace", shape=_string_shape, differentiable=False)


@RegexReplace.kernel("cpu")
def _regex_replace(ctx, x):
    if ctx.state is None:
        ctx.state = re.compile(ctx.attrs["pattern"])
    rx, rewrite = ctx.state, ctx.attrs["rewrite"]
    count = 0 if ctx.attrs["replace_global"] else 1
    return _map(x, lambda s: rx.sub(rewrite, s, count=count))


def regex_replace(
    input: Any, pattern: Any, rewrite: Any, replace_global: bool = True, name=None
) -> Tensor:
    """Replace the matches of ``pattern`` (all, or the first) by ``rewrite`` (``\\1`` refers to a
    group) in each string."""
    pat = _as_bytes(pattern, "regex_replace: pattern")
    try:
        re.compile(pat)
    except re.error as e:
        raise InvalidArgumentError(f"regex_replace: invalid pattern {pat!r}: {e}") from None
    attrs = {
        "pattern": pat,
        "rewrite": _as_bytes(rewrite, "regex_replace: rewrite"),
        "replace_global": bool(replace_global),
    }
    return apply("RegexReplace", [input], attrs, name or "RegexReplace")


# ---- DecodeRaw ----------------------------------------------------------------------------------

DecodeRaw = defop("DecodeRaw", differentiable=False)


@DecodeRaw.shape
def _decode_raw_shape(op):
    x = _string_input(op, 0, "bytes")
    dims = None if x.shape.dims is None else [*x.shape.dims, None]
    return [(TensorShape(dims), op.attrs["out_type"])]


@DecodeRaw.kernel("cpu")
def _decode_raw(ctx, x):
    dt: _dt.DType = ctx.attrs["out_type"]
    raw = np.dtype(ctx.attrs["raw"])
    raw = raw.newbyteorder("<" if ctx.attrs["little_endian"] else ">")
    flat = x.reshape(-1)
    sizes = {len(s) for s in flat}
    if len(sizes) > 1:
        raise InvalidArgumentError(
            f"DecodeRaw {ctx.op.name!r}: every element needs the same length, got lengths "
            f"{sorted(sizes)} (input shape {list(x.shape)})"
        )
    n = sizes.pop() if sizes else 0
    if n % raw.itemsize:
        raise InvalidArgumentError(
            f"DecodeRaw {ctx.op.name!r}: input of {n} bytes is not a multiple of "
            f"{raw.itemsize} ({raw.name})"
        )
    rows = [np.frombuffer(s, dtype=raw) for s in flat]
    out = np.stack(rows) if rows else np.zeros((0, n // raw.itemsize), raw)
    return out.astype(dt.np).reshape(*x.shape, n // raw.itemsize)


def decode_raw(
    input_bytes: Any = None, out_type: Any = None, little_endian: bool = True, name=None,
    bytes: Any = None,  # noqa: A002 - TF1's older name
):  # fmt: skip
    """Reinterpret each string's bytes as a vector of ``out_type``; output shape is the input's
    plus the number of values per string (all strings must be as long).

    ``out_type``: any numeric hetbed dtype (uint8 for the bytes themselves)."""
    x = input_bytes if input_bytes is not None else bytes
    if out_type is None:
        raise TypeError("decode_raw: out_type is required")
    dt = _dt.as_dtype(out_type)
    if dt.is_string:
        raise TypeError("decode_raw: out_type must be numeric")
    raw = dt.np.name
    attrs = {"out_type": dt, "raw": raw, "little_endian": bool(little_endian)}
    return apply("DecodeRaw", [x], attrs, name or "DecodeRaw")


# ---- DecodeCSV ----------------------------------------------------------------------------------

DecodeCSV = defop("DecodeCSV", differentiable=False)


@DecodeCSV.shape
def _decode_csv_shape(op):
    x = _string_input(op, 0, "records")
    return [(x.shape, d) for d, _ in op.attrs["defaults"]]


def _csv_fields(record: bytes, attrs: dict) -> list:
    text = record.decode("utf-8")
    delim = attrs["field_delim"]
    if not attrs["use_quote_delim"]:
        return text.split(delim)
    rows = list(csv.reader([text], delimiter=delim, quotechar='"', strict=True))
    return rows[0] if rows else [""]


@DecodeCSV.kernel("cpu")
def _decode_csv(ctx, records):
    attrs = ctx.attrs
    defaults, cols, na = attrs["defaults"], attrs["select_cols"], attrs["na_value"]
    flat = records.reshape(-1)
    outs = [np.empty(flat.shape, dtype=d.np) for d, _ in defaults]

    def bad(i, rec, why):
        return InvalidArgumentError(
            f"DecodeCSV {ctx.op.name!r}: record {i} {rec!r}: {why} "
            f"(records shape {list(records.shape)})"
        )

    for i, rec in enumerate(flat):
        try:
            fields = _csv_fields(rec, attrs)
        except (csv.Error, UnicodeDecodeError) as e:
            raise bad(i, rec, f"cannot be parsed ({e})") from None
        if cols is not None:
            if len(fields) <= cols[-1]:
                raise bad(i, rec, f"has {len(fields)} fields, select_cols needs {cols[-1] + 1}")
            fields = [fields[c] for c in cols]
        if len(fields) != len(defaults):
            raise bad(i, rec, f"has {len(fields)} fields, expected {len(defaults)}")
        for j, ((dt, default), f) in enumerate(zip(defaults, fields)):
            if f == "" or (na and f == na):
                if default is None:
                    raise bad(i, rec, f"field {j} is empty and has no default")
                outs[j][i] = default
            elif dt.is_string:
                outs[j][i] = f.encode("utf-8")
            else:
                try:
                    outs[j][i] = _parse_number(f.encode("utf-8"), dt)
                except ValueError:
                    raise bad(i, rec, f"field {j} {f!r} is not a valid {dt.name}") from None
    outs = [o.reshape(records.shape) for o in outs]
    return outs[0] if len(outs) == 1 else tuple(outs)  # one output: the array itself


def _csv_default(v: Any, j: int) -> tuple:
    """(dtype, default or None) from one entry of record_defaults."""
    if isinstance(v, Tensor):
        if v.op.type != "Const":
            raise TypeError(f"decode_csv: record_defaults[{j}] must be a constant, got {v.name}")
        arr, dt = v.op.attrs["value"], v.dtype
    elif isinstance(v, _dt.DType):
        return v, None
    else:
        if isinstance(v, (list, tuple)) and len(v) == 1:
            v = v[0]
        if isinstance(v, (list, tuple)) and not v:
            raise TypeError(
                f"decode_csv: record_defaults[{j}] is empty; give a dtype to mark a required column"
            )
        if isinstance(v, (bytes, str)):
            return _dt.string, _as_bytes(v, "decode_csv")
        arr = np.asarray(v)
        dt = _dt.float32 if arr.dtype.kind == "f" else _dt.as_dtype(arr.dtype)
        if arr.dtype.kind in "iu" and not isinstance(v, np.generic):
            dt = _dt.int32
    arr = np.asarray(arr).reshape(-1)
    if arr.size == 0:
        return dt, None
    if arr.size != 1:
        raise ValueError(f"decode_csv: record_defaults[{j}] must have one value, got {arr.size}")
    if dt not in (_dt.float32, _dt.float64, _dt.int32, _dt.int64, _dt.string):
        raise TypeError(f"decode_csv: record_defaults[{j}] has unsupported type {dt.name}")
    val = arr[0]
    return dt, (val if dt.is_string else dt.np.type(val))


def decode_csv(
    records: Any, record_defaults: list, field_delim: str = ",", use_quote_delim: bool = True,
    name=None, na_value: str = "", select_cols: Any = None,
):  # fmt: skip
    """Parse CSV ``records`` into one tensor per column, typed by ``record_defaults``: each entry
    is a one-value list (its type and the value of an empty field) or an empty list / a dtype
    (the column is required). Raises InvalidArgumentError naming the record that does not parse.
    """
    if len(field_delim) != 1:
        raise ValueError(f"decode_csv: field_delim must be one character, got {field_delim!r}")
    defaults = tuple(_csv_default(v, j) for j, v in enumerate(record_defaults))
    if not defaults:
        raise ValueError("decode_csv: record_defaults must not be empty")
    cols = None
    if select_cols is not None:
        cols = [int(c) for c in select_cols]
        if cols != sorted(set(cols)) or (cols and cols[0] < 0):
            raise ValueError("decode_csv: select_cols must be increasing, non-negative")
        if len(cols) != len(defaults):
            raise ValueError("decode_csv: select_cols and record_defaults differ in length")
    attrs = {
        "defaults": defaults,
        "field_delim": field_delim,
        "use_quote_delim": bool(use_quote_delim),
        "na_value": na_value,
        "select_cols": cols,
    }
    op = apply_op("DecodeCSV", [records], attrs, name=name or "DecodeCSV")
    return list(op.outputs)


# ---- ReadFile, WriteFile ------------------------------------------------------------------------

ReadFile = defop("ReadFile", stateful=True, differentiable=False)


@ReadFile.shape
def _read_file_shape(op):
    x = _string_input(op, 0, "filename")
    if x.shape.ndims not in (None, 0):
        raise InvalidArgumentError(f"ReadFile: filename must be a scalar, got shape {x.shape}")
    return [(TensorShape([]), _dt.string)]


@ReadFile.kernel("cpu")
def _read_file(ctx, filename):
    path = os.fsdecode(filename.item() if isinstance(filename, np.ndarray) else filename)
    try:
        with open(path, "rb") as f:
            return np.array(f.read(), dtype=object)
    except OSError as e:
        raise NotFoundError(f"ReadFile {ctx.op.name!r}: cannot read {path!r}: {e}") from None


def read_file(filename: Any, name=None) -> Tensor:
    """The contents of the file ``filename`` (a scalar string) as one string."""
    return apply("ReadFile", [filename], name=name or "ReadFile")


WriteFile = defop("WriteFile", stateful=True, differentiable=False)


@WriteFile.shape
def _write_file_shape(op):
    _string_input(op, 0, "filename")
    _string_input(op, 1, "contents")
    return []


@WriteFile.kernel("cpu")
def _write_file(ctx, filename, contents):
    path = os.fsdecode(filename.item() if isinstance(filename, np.ndarray) else filename)
    data = contents.item() if isinstance(contents, np.ndarray) else contents
    try:
        with open(path, "wb") as f:
            f.write(data)
    except OSError as e:
        raise NotFoundError(f"WriteFile {ctx.op.name!r}: cannot write {path!r}: {e}") from None


def write_file(filename: Any, contents: Any, name=None) -> Any:
    """Write the scalar string ``contents`` to the file ``filename`` (an op)."""
    return apply("WriteFile", [filename, contents], name=name or "WriteFile")


# ---- MatchingFiles ------------------------------------------------------------------------------

MatchingFiles = defop("MatchingFiles", stateful=True, differentiable=False)


@MatchingFiles.shape
def _matching_files_shape(op):
    p = _string_input(op, 0, "pattern")
    if p.shape.ndims not in (None, 0, 1):
        raise InvalidArgumentError(
            f"MatchingFiles: pattern must be a scalar or a vector, got {p.shape}"
        )
    return [(TensorShape([None]), _dt.string)]


MatchingFiles.expected_shapes = lambda op, in_shapes: [(1,)]


@MatchingFiles.kernel("cpu")
def _matching_files(ctx, pattern):
    import glob

    found: list = []
    for p in np.asarray(pattern, dtype=object).reshape(-1):
        found.extend(sorted(glob.glob(os.fsdecode(p))))
    return _strings((len(found),), [os.fsencode(f) for f in found])


def matching_files(pattern: Any, name=None) -> Tensor:
    """The sorted names of the files matching the glob ``pattern`` (a scalar or a vector)."""
    return apply("MatchingFiles", [pattern], name=name or "MatchingFiles")


def match_filenames_once(pattern: Any, name=None) -> Any:
    """TF1's ``tf.train.match_filenames_once``: a local variable holding the files matching
    ``pattern`` when local variables are initialized."""
    from ..graph import GraphKeys
    from ..variables import Variable

    return Variable(
        matching_files(pattern),
        trainable=False,
        collections=[GraphKeys.LOCAL_VARIABLES],
        validate_shape=False,
        name=name or "matching_filenames",
    )
