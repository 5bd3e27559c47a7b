"""Typed values of graph documents (serialize.py): attr values and constants as plain data that
JSON and msgpack carry (no pickle, no eval), and back. Null, booleans, strings, finite floats,
64-bit ints and lists stand for themselves; any other value is an object with exactly one tag
(``float``, ``int``, ``tuple``, ``dict``, ``dtype``, ``shape``, ``ndarray``, ``npscalar``,
``bytes``, ``strings``), as serialize.py's docstring lists them. ``binary`` puts raw bytes
(msgpack) where JSON has base64 text."""

from __future__ import annotations

import base64
import math
import re
from typing import Any

import numpy as np

from . import dtypes as _dt
from .graph import TensorShape

_INT64 = (-(2**63), 2**63 - 1)
_ARRAY_DTYPE_RE = re.compile(r"^[<|][biufcSU][1-9][0-9]*$")
_TAGS = (
    "float", "int", "tuple", "dict", "dtype", "shape", "ndarray", "npscalar", "bytes", "strings",
)  # fmt: skip


class GraphFormatError(ValueError):
    """A graph document is malformed, of another format or version, or inconsistent."""


def encode_value(value: Any, binary: bool = False, where: str = "value") -> Any:
    """The tagged plain-data form of ``value`` (see the module docstring).

    ``binary`` puts raw bytes (msgpack) instead of base64 text (JSON). Raises TypeError naming
    ``where`` and the path inside it for anything else (functions, tensors, object arrays, ...).
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value if _INT64[0] <= value <= _INT64[1] else {"int": str(value)}
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return {"float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if isinstance(value, list):
        return [encode_value(v, binary, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, tuple):
        return {"tuple": [encode_value(v, binary, f"{where}[{i}]") for i, v in enumerate(value)]}
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"cannot serialize {where}: dict key {k!r} is not a string")
            out[k] = encode_value(v, binary, f"{where}[{k!r}]")
        return {"dict": out}
    if isinstance(value, _dt.DType):
        return {"dtype": value.name}
    if isinstance(value, TensorShape):
        return {"shape": None if value.dims is None else list(value.dims)}
    if isinstance(value, np.ndarray) and value.dtype.kind == "O":  # a string tensor's value
        items = []
        for v in value.reshape(-1):
            if not isinstance(v, bytes):
                raise TypeError(
                    f"cannot serialize {where}: numpy dtype object is plain data only as a "
                    f"string tensor (bytes elements), got an element of type {type(v).__name__}"
                )
            items.append(_bytes_out(v, binary))
        return {"strings": {"shape": list(value.shape), "data": items}}
    if isinstance(value, (np.ndarray, np.generic)):
        arr = np.asarray(value)
        if arr.dtype.kind not in "biufcSU":
            raise TypeError(f"cannot serialize {where}: numpy dtype {arr.dtype} is not plain data")
        le = arr.dtype.newbyteorder("<")  # files are little-endian whatever the machine
        raw = arr.astype(le, copy=False).tobytes(order="C")
        body = {"dtype": le.str, "shape": list(arr.shape), "data": _bytes_out(raw, binary)}
        return {"ndarray" if isinstance(value, np.ndarray) else "npscalar": body}
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": _bytes_out(bytes(value), binary)}
    raise TypeError(
        f"cannot serialize {where}: unsupported type {type(value).__name__} ({value!r:.60}); "
        "attrs must be ints, floats, bools, strings, None, lists, tuples, str-keyed dicts, "
        "hb dtypes, TensorShapes or numpy arrays"
    )


def decode_value(obj: Any, where: str = "value") -> Any:
    """The value that ``encode_value`` encoded; raises GraphFormatError naming ``where``."""
    if obj is None or isinstance(obj, (bool, str, int, float)):
        return obj
    if isinstance(obj, list):
        return [decode_value(v, f"{where}[{i}]") for i, v in enumerate(obj)]
    if not isinstance(obj, dict) or len(obj) != 1:
        raise GraphFormatError(
            f"{where}: expected a plain value or a one-key tagged object, got {obj!r:.80}"
        )
    ((tag, body),) = obj.items()
    if tag == "float" and body in ("inf", "-inf", "nan"):
        return float(body)
    if tag == "int" and isinstance(body, str) and re.fullmatch(r"-?[0-9]+", body):
        return int(body)
    if tag == "tuple" and isinstance(body, list):
        return tuple(decode_value(v, f"{where}[{i}]") for i, v in enumerate(body))
    if tag == "dict" and isinstance(body, dict):
        return {k: decode_value(v, f"{where}[{k!r}]") for k, v in body.items()}
    if tag == "dtype":
        return _decode_dtype(body, where)
    if tag == "shape":
        return _decode_shape(body, where)
    if tag in ("ndarray", "npscalar"):
        arr = _decode_array(body, where)
        return arr if tag == "ndarray" else arr[()]
    if tag == "bytes":
        return _bytes_in(body, where)
    if tag == "strings" and isinstance(body, dict) and set(body) == {"shape", "data"}:
        shape = _decode_shape(body["shape"], where + ".shape")
        data = body["data"]
        if shape.dims is None or not isinstance(data, list) or len(data) != shape.num_elements():
            raise GraphFormatError(
                f"{where}: a string array needs a shape and one item per element"
            )
        out = np.empty(len(data), dtype=object)
        for i, v in enumerate(data):
            out[i] = _bytes_in(v, f"{where}.data[{i}]")
        return out.reshape(shape.dims)
    if tag not in _TAGS:
        raise GraphFormatError(f"{where}: unknown value tag {tag!r}; known: {', '.join(_TAGS)}")
    raise GraphFormatError(f"{where}: malformed {tag!r} value {body!r:.80}")


def _bytes_out(raw: bytes, binary: bool) -> Any:
    return raw if binary else base64.b64encode(raw).decode("ascii")


def _bytes_in(data: Any, where: str) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, str):
        try:
            return base64.b64decode(data.encode("ascii"), validate=True)
        except (ValueError, UnicodeEncodeError) as e:
            raise GraphFormatError(f"{where}: bad base64 data ({e})") from None
    raise GraphFormatError(f"{where}: expected bytes or base64 text, got {type(data).__name__}")


def _decode_dtype(name: Any, where: str) -> _dt.DType:
    for d in _dt.ALL:
        if d.name == name:
            return d
    raise GraphFormatError(
        f"{where}: unknown dtype {name!r}; hetbed has {', '.join(d.name for d in _dt.ALL)}"
    )


def _decode_shape(dims: Any, where: str) -> TensorShape:
    if dims is None:
        return TensorShape(None)
    if isinstance(dims, list) and all(
        d is None or (isinstance(d, int) and not isinstance(d, bool) and d >= 0) for d in dims
    ):
        return TensorShape(dims)
    raise GraphFormatError(
        f"{where}: a shape is null or a list of ints >= 0 and nulls, got {dims!r}"
    )


def _decode_array(body: Any, where: str) -> np.ndarray:
    if not isinstance(body, dict) or set(body) != {"dtype", "shape", "data"}:
        raise GraphFormatError(f"{where}: an array needs exactly 'dtype', 'shape' and 'data'")
    dt = body["dtype"]
    if not isinstance(dt, str) or not _ARRAY_DTYPE_RE.match(dt):
        raise GraphFormatError(f"{where}: unsupported array dtype {dt!r}")
    shape = _decode_shape(body["shape"], where + ".shape")
    if shape.dims is None:
        raise GraphFormatError(f"{where}: an array's shape must be a list")
    dtype = np.dtype(dt)
    raw = _bytes_in(body["data"], where + ".data")
    n = int(np.prod(shape.dims, dtype=np.int64))
    if len(raw) != n * dtype.itemsize:
        raise GraphFormatError(
            f"{where}: {len(raw)} bytes of data do not fill shape {list(shape.dims)} of {dt} "
            f"({n * dtype.itemsize} bytes)"
        )
    arr = np.frombuffer(raw, dtype=dtype).reshape(shape.dims)
    return arr.astype(dtype.newbyteorder("="), copy=True)
