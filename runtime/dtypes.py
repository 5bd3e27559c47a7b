"""Data types: a small closed set, each tied to a numpy dtype."""

from __future__ import annotations

import numpy as np


class DType:
    """A tensor element type (``hb.float32``, ...), comparable with numpy dtypes and names."""

    __slots__ = (
        "name", "np", "size", "is_floating", "is_integer", "is_bool", "is_string", "is_complex",
    )  # fmt: skip

    def __init__(self, name: str, np_dtype: type):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.size = self.np.itemsize
        self.is_floating = self.np.kind == "f"
        self.is_integer = self.np.kind in "iu"
        self.is_bool = self.np.kind == "b"
        self.is_string = self.np.kind == "O"
        self.is_complex = self.np.kind == "c"

    @property
    def as_numpy_dtype(self) -> type:
        return self.np.type

    @property
    def base_dtype(self) -> DType:
        return self

    @property
    def is_numeric(self) -> bool:
        return self.np.kind in "fiuc"

    @property
    def real_dtype(self) -> DType:
        """The dtype of a complex dtype's real and imaginary parts (complex64 -> float32); a
        real dtype's is itself, as TF's."""
        if self.is_complex:
            return float32 if self.size == 8 else float64
        return self

    @property
    def is_differentiable(self) -> bool:
        """Whether gradients flow through tensors of this dtype (floats and complex, as TF)."""
        return self.is_floating or self.is_complex

    def __repr__(self) -> str:
        return f"hb.{self.name}"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DType):
            return self is other
        try:
            return self is as_dtype(other)
        except (TypeError, ValueError):
            return False

    def __hash__(self) -> int:
        return hash(self.name)

    def __reduce__(self):  # pragma: no cover - dtypes are singletons
        raise TypeError("hetbed dtypes are not picklable")

    def __copy__(self) -> DType:  # a singleton: copies are itself (sklearn's clone copies
        return self  # estimator parameters such as initializers holding a dtype)

    def __deepcopy__(self, memo: dict) -> DType:
        return self


float16 = DType("float16", np.float16)
float32 = DType("float32", np.float32)
float64 = DType("float64", np.float64)
int32 = DType("int32", np.int32)
int64 = DType("int64", np.int64)
# TF's narrow integers: arithmetic wraps at their width, as numpy's (and TF's) does. Images
# decode to uint8.
int8 = DType("int8", np.int8)
int16 = DType("int16", np.int16)
uint8 = DType("uint8", np.uint8)
uint16 = DType("uint16", np.uint16)
bool_ = DType("bool", np.bool_)
# TF1's tf.string: numpy object arrays whose elements are Python bytes (str is encoded utf-8).
# String tensors live on the CPU only (see OpDef.find_kernel).
string = DType("string", np.object_)
# complex numbers: pairs of float32 (complex64) or float64 (complex128), as numpy's and TF's.
complex64 = DType("complex64", np.complex64)
complex128 = DType("complex128", np.complex128)

COMPLEX = (complex64, complex128)

SMALL_INTS = (int8, int16, uint8, uint16)
ALL = (float16, float32, float64, int32, int64, bool_, string, *SMALL_INTS, *COMPLEX)
NON_STRING = (float16, float32, float64, int32, int64, bool_, *SMALL_INTS, *COMPLEX)
FLOATS = (float16, float32, float64)
INTS = (int32, int64)  # the index types (shapes, indices, sizes)
NUMERIC = FLOATS + INTS + SMALL_INTS  # the real number types (ordered: max, min, less, ...)
FLOAT_COMPLEX = FLOATS + COMPLEX  # what TF's transcendental functions (exp, log, ...) take
NUMERIC_COMPLEX = NUMERIC + COMPLEX  # what TF's arithmetic (add, mul, sum, matmul) takes
_BY_NAME = {d.name: d for d in ALL}
_BY_NP = {d.np: d for d in ALL}
# TensorFlow's other spellings of the same types (its dtype-name table): "float" is float32, not
# numpy's float64; "double" and "half" are the C names; "int" follows Python's int -> int32 here.
_TF_ALIASES = {
    "float": float32,
    "double": float64,
    "half": float16,
    "int": int32,
    "long": int64,
    "bool_": bool_,
    "cfloat": complex64,
    "cdouble": complex128,
}


def as_dtype(value: object) -> DType:
    """Return the DType for a DType, a name ('float32'), a numpy dtype or a Python type.

    Names follow TensorFlow's table: "float" is float32, "double" float64, "half" float16.
    numpy's bytes, str and object dtypes (and Python's ``str``/``bytes``) are ``string``.
    Python's ``complex`` is complex128. Raises TypeError for anything else (e.g. bfloat16).
    """
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        d = _BY_NAME.get(value) or _TF_ALIASES.get(value)
        if d is not None:
            return d
    if value is float:
        return float32
    if value is int:
        return int32
    if value is bool:
        return bool_
    if value is complex:
        return complex128
    if value is str or value is bytes:
        return string
    try:
        npd = np.dtype(value)  # type: ignore[call-overload]
    except TypeError as e:
        raise TypeError(f"not a dtype: {value!r}") from e
    if npd in _BY_NP:
        return _BY_NP[npd]
    if npd.kind in "SU":
        return string
    if npd.kind == "u":  # uint32, uint64: values kept in int64
        return int64
    raise TypeError(f"unsupported dtype {npd}; hetbed has {', '.join(_BY_NAME)}")


def to_string_array(value: object, where: str) -> np.ndarray:
    """``value`` (bytes, str or nested lists/arrays of them) as an object array of bytes.

    str is encoded utf-8. Raises TypeError naming ``where`` for any other element type.
    """
    arr = np.asarray(value, dtype=object) if not isinstance(value, np.ndarray) else value
    if arr.dtype.kind in "SU":
        arr = arr.astype(object)
    elif arr.dtype.kind != "O":
        raise TypeError(
            f"{where}: expected bytes or str values for a string tensor, got {arr.dtype}"
        )
    out = np.empty(arr.shape, dtype=object)
    flat_in, flat_out = arr.reshape(-1), out.reshape(-1)
    for i, v in enumerate(flat_in):
        if isinstance(v, bytes):
            flat_out[i] = v
        elif isinstance(v, str):
            flat_out[i] = v.encode("utf-8")
        elif isinstance(v, (bytearray, np.bytes_)):
            flat_out[i] = bytes(v)
        else:
            raise TypeError(
                f"{where}: expected bytes or str values for a string tensor, got {type(v).__name__}"
                f" {v!r}"
            )
    return out


def pack_strings(arr: np.ndarray, where: str) -> bytes:
    """An object array of bytes as bytes: the little-endian uint64 length of every element (C
    order), then the elements, concatenated (the wire and checkpoint form; never pickle).
    Raises TypeError naming ``where`` for an element that is not bytes."""
    flat = arr.reshape(-1)
    for v in flat:
        if not isinstance(v, bytes):
            raise TypeError(
                f"{where}: a string tensor holds bytes only, got an element of type "
                f"{type(v).__name__}"
            )
    lengths = np.fromiter((len(v) for v in flat), dtype="<u8", count=flat.size)
    return lengths.tobytes() + b"".join(flat)


def unpack_strings(data: object, shape: list | tuple) -> np.ndarray:
    """The object array of bytes of shape ``shape`` that ``pack_strings`` packed into ``data``
    (bytes-like); ValueError when the lengths do not match the data."""
    raw = bytes(data)  # type: ignore[call-overload]
    n = 1
    for d in shape:
        n *= int(d)
    head = 8 * n
    if len(raw) < head:
        raise ValueError(f"{len(raw)} bytes cannot hold {n} string lengths")
    lengths = np.frombuffer(raw, dtype="<u8", count=n)
    total = int(lengths.sum()) if n else 0
    if total != len(raw) - head:
        raise ValueError(f"string lengths add up to {total} bytes, {len(raw) - head} follow them")
    out = np.empty(n, dtype=object)
    pos = head
    for i, k in enumerate(lengths.tolist()):
        out[i] = raw[pos : pos + k]
        pos += k
    return out.reshape(tuple(shape))
