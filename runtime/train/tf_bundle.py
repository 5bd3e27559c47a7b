"""Reading checkpoints TensorFlow wrote (its V2 "tensor bundle": ``PREFIX.index`` and
``PREFIX.data-NNNNN-of-MMMMM``), so that ``Saver.restore``, ``load_checkpoint`` and friends take
weights trained with TensorFlow. Read only; hetbed writes its own format (checkpoint.py).

The index is a LevelDB-style sorted table: a 48-byte footer (the metaindex and index block
handles as varints, padding, the magic number), an index block mapping the last key of each
data block to its handle, and data blocks of prefix-compressed entries (shared key bytes,
unshared bytes, value length, then the key's tail and the value) ending in restart offsets;
every block is followed by a 1-byte compression type (only "none" is written by TensorFlow
for indexes) and a 4-byte checksum. The entry under the empty key is the bundle's header
(``BundleHeaderProto``: shard count, endianness); every other key is a tensor's name mapped to a
``BundleEntryProto`` (dtype, shape, shard, offset, size, CRC32C) read here from its protobuf
wire format. A numeric tensor is its raw little-endian bytes at that offset of its shard's data
file; a string tensor is the varint lengths of its elements, a 4-byte checksum, then their
bytes. Every defect raises DataLossError naming the file and what is wrong.
"""

from __future__ import annotations

import math
import os
import struct
from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import DataLossError, NotFoundError

_MAGIC = 0xDB4775248B80FB57
_FOOTER = 48
#: TensorFlow's DataType enum -> hetbed dtype (bfloat16 and quantized types: none)
_DTYPES = {
    8: _dt.complex64,
    18: _dt.complex128,
    1: _dt.float32,
    2: _dt.float64,
    3: _dt.int32,
    4: _dt.uint8,
    5: _dt.int16,
    6: _dt.int8,
    7: _dt.string,
    9: _dt.int64,
    10: _dt.bool_,
    17: _dt.uint16,
    19: _dt.float16,
}


def is_bundle(prefix: str) -> bool:
    """Whether ``prefix`` names a TensorFlow tensor bundle (``prefix.index`` exists)."""
    return not os.path.isfile(prefix) and os.path.isfile(prefix + ".index")


class _Bad(Exception):
    pass


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    out = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise _Bad("a varint runs past its block")
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if not b & 0x80:
            return out, pos
        shift += 7


def _num(v: Any) -> int:
    """A field that must be a number (a varint or fixed): a length-delimited one is corrupt."""
    if not isinstance(v, int):
        raise _Bad("a number field holds bytes (a corrupt or mistyped field)")
    return v


def _fields(buf: Any) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) of a protobuf message: varints as ints, fixed32/64 as
    ints, length-delimited as bytes."""
    if not isinstance(buf, (bytes, bytearray, memoryview)):
        raise _Bad("a message field holds a number (a corrupt or mistyped field)")
    out = []
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, pos = _varint(buf, pos)
        elif wt == 1:
            if pos + 8 > len(buf):
                raise _Bad("a fixed64 field runs past its message")
            (v,) = struct.unpack_from("<Q", buf, pos)
            pos += 8
        elif wt == 2:
            n, pos = _varint(buf, pos)
            if pos + n > len(buf):
                raise _Bad("a length-delimited field runs past its message")
            v = bytes(buf[pos : pos + n])
            pos += n
        elif wt == 5:
            if pos + 4 > len(buf):
                raise _Bad("a fixed32 field runs past its message")
            (v,) = struct.unpack_from("<I", buf, pos)
            pos += 4
        else:
            raise _Bad(f"protobuf wire type {wt} is not one a bundle uses")
        out.append((num, wt, v))
    return out


def _crc_table() -> np.ndarray:
    t = np.zeros(256, np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1  # CRC-32C (Castagnoli), reflected
        t[i] = c
    return t


_CRC_TABLE = _crc_table()


def _crc32c_loop(data: np.ndarray, table: np.ndarray) -> np.uint32:  # pragma: no cover
    c = np.uint32(0xFFFFFFFF)
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> np.uint32(8))
    return c ^ np.uint32(0xFFFFFFFF)


_CRC_COMPILED: list = []


def _crc32c_bytes(data: np.ndarray, table: np.ndarray) -> np.uint32:
    """The byte loop, compiled when a TF checkpoint is first read (numba is imported then, not
    with hetbed)."""
    if not _CRC_COMPILED:
        from numba import njit

        _CRC_COMPILED.append(njit(cache=True, nogil=True)(_crc32c_loop))
    return _CRC_COMPILED[0](data, table)


def masked_crc32c(data: bytes) -> int:
    """TensorFlow's masked CRC-32C of ``data`` (what a bundle entry's ``crc32c`` holds)."""
    c = int(_crc32c_bytes(np.frombuffer(data, np.uint8), _CRC_TABLE))
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _entry_crc(buf: bytes, dt: Any, dims: tuple, offset: int, size: int) -> int | None:
    """The masked CRC-32C TensorFlow stores for an entry: over its bytes; for a string tensor
    over its lengths as 4-byte little-endian integers (they are written as varints), the
    lengths' checksum and the strings, as TF's bundle writer computes it (checked against a
    checkpoint TensorFlow wrote)."""
    region = buf[offset : offset + size]
    if not dt.is_string:
        return masked_crc32c(region)
    try:
        n = int(np.prod(dims, dtype=np.int64))
        pos, lengths = 0, []
        for _ in range(n):
            ln, pos = _varint(region, pos)
            lengths.append(ln)
        rest = region[pos:]
    except _Bad:
        return None  # (tensor() reports the malformed entry)
    data = b"".join(struct.pack("<I", ln & 0xFFFFFFFF) for ln in lengths) + rest
    return masked_crc32c(data)


def _block(blob: bytes, offset: int, size: int) -> bytes:
    if offset + size + 5 > len(blob):
        raise _Bad(f"a block at {offset} of {size} bytes runs past the file")
    if blob[offset + size] != 0:
        raise _Bad(f"block at {offset} is compressed (type {blob[offset + size]}); not supported")
    return blob[offset : offset + size]


def _entries(block: bytes) -> list[tuple[bytes, bytes]]:
    """The (key, value) entries of a table block."""
    if len(block) < 4:
        raise _Bad("a block too short for its restart count")
    (n_restarts,) = struct.unpack_from("<I", block, len(block) - 4)
    end = len(block) - 4 - 4 * n_restarts
    if end < 0:
        raise _Bad("a block's restart array does not fit in it")
    out = []
    pos = 0
    key = b""
    while pos < end:
        shared, pos = _varint(block, pos)
        unshared, pos = _varint(block, pos)
        vlen, pos = _varint(block, pos)
        if shared > len(key) or pos + unshared + vlen > end:
            raise _Bad("an entry runs past its block")
        key = key[:shared] + block[pos : pos + unshared]
        pos += unshared
        out.append((key, block[pos : pos + vlen]))
        pos += vlen
    return out


def _handle(buf: bytes, pos: int = 0) -> tuple[int, int, int]:
    off, pos = _varint(buf, pos)
    size, pos = _varint(buf, pos)
    return off, size, pos


def read_bundle(prefix: str) -> tuple[dict[str, tuple], list[bytes]]:
    """``({name: (dtype, shape, shard, offset, size)}, [shard bytes])`` of the bundle at
    ``prefix``. Raises NotFoundError for a missing file, DataLossError for a malformed one."""
    index = prefix + ".index"
    try:
        with open(index, "rb") as f:
            blob = f.read()
    except FileNotFoundError:
        raise NotFoundError(f"checkpoint index {index!r} does not exist") from None
    try:
        if len(blob) < _FOOTER:
            raise _Bad(f"{len(blob)} bytes, less than a table footer")
        (magic,) = struct.unpack_from("<Q", blob, len(blob) - 8)
        if magic != _MAGIC:
            raise _Bad("it does not end with the table magic number")
        footer = blob[len(blob) - _FOOTER :]
        _, _, pos = _handle(footer)  # the metaindex block (unused)
        ioff, isize, _ = _handle(footer, pos)
        raw: dict[str, bytes] = {}
        slice_raw: dict[bytes, bytes] = {}  # a partitioned tensor's slices, under binary keys
        for _last, h in _entries(_block(blob, ioff, isize)):
            off, size, _ = _handle(h)
            for k, v in _entries(_block(blob, off, size)):
                if k.startswith(b"\x00"):
                    slice_raw[k] = v
                else:
                    raw[k.decode("utf-8", "replace")] = v
        header = raw.pop("", None)
        n_shards = 1
        if header is not None:
            for num, _wt, v in _fields(header):
                if num == 1:
                    n_shards = _num(v)
                elif num == 2 and v != 0:
                    raise _Bad("the bundle is big-endian; only little-endian ones are read")
        entries: dict[str, tuple] = {}
        checked: list[tuple] = []  # (what, plain entry, crc) of every stored run of bytes
        for name, value in raw.items():
            entry, crc, slices = _entry(name, value, n_shards)
            if slices is None:
                entries[name] = entry
                checked.append((f"tensor {name!r}", entry, crc))
                continue
            parts = []
            for starts, lengths in slices:
                key = _slice_key(name, starts, lengths)
                what = f"slice {_slice_spec(starts, lengths)} of tensor {name!r}"
                if key not in slice_raw:
                    raise _Bad(f"the {what} is listed but not stored")
                part, pcrc, _ = _entry(what, slice_raw[key], n_shards)
                full = tuple(d if n < 0 else n for d, n in zip(entry[1], lengths))
                if part[0] != entry[0] or part[1] != full:
                    raise _Bad(
                        f"the {what} is {part[0].name} {list(part[1])}, the tensor "
                        f"{entry[0].name} {list(full)}"
                    )
                parts.append((tuple(starts), part))
                checked.append((f"the {what}", part, pcrc))
            _check_tiling(name, entry[1], [(st, p[1]) for st, p in parts])
            entries[name] = (entry[0], entry[1], tuple(parts), 0, 0)
    except _Bad as e:
        raise DataLossError(f"checkpoint index {index}: {e}") from None
    shards = []
    for k in range(n_shards):
        path = f"{prefix}.data-{k:05d}-of-{n_shards:05d}"
        try:
            with open(path, "rb") as f:
                shards.append(f.read())
        except FileNotFoundError:
            raise NotFoundError(f"checkpoint data file {path!r} does not exist") from None
    for what, (dt, dims, shard, offset, size), crc in checked:
        if offset + size > len(shards[shard]):
            raise DataLossError(f"checkpoint {prefix}: {what} runs past the end of its data file")
        if not dt.is_string:
            want = math.prod(dims) * dt.size  # (Python ints: a crafted shape cannot wrap)
            if want != size:
                raise DataLossError(
                    f"checkpoint {prefix}: {what} of shape {list(dims)} and dtype "
                    f"{dt.name} needs {want} bytes, its entry says {size}"
                )
        if crc is not None and _entry_crc(shards[shard], dt, dims, offset, size) != crc:
            raise DataLossError(
                f"checkpoint {prefix}: {what} does not match its checksum (crc32c): "
                "the data file is corrupt"
            )
    return entries, shards


def _entry(name: str, value: bytes, n_shards: int) -> tuple[tuple, int | None, list | None]:
    """A ``BundleEntryProto``: ``((dtype, shape, shard, offset, size), crc32c or None, slices)``
    where ``slices`` lists the ``(starts, lengths)`` of a partitioned tensor's slices (a
    length of -1: the whole dimension) and is None for a tensor stored whole."""
    dtype = shard = offset = size = 0
    crc = None
    dims: list[int] = []
    slices: list | None = None
    for num, _wt, v in _fields(value):
        if num == 1:
            dtype = _num(v)
        elif num == 2:  # TensorShapeProto: dim (2) {size (1)}, unknown_rank (3)
            for n2, _w2, part in _fields(v):
                if n2 == 2:
                    size_ = [_signed(d) for k2, _w3, d in _fields(part) if k2 == 1]
                    dims.append(size_[0] if size_ else 0)
                    if dims[-1] < 0:
                        raise _Bad(f"{name!r} has an unknown or negative dimension {dims[-1]}")
                elif n2 == 3 and part:
                    raise _Bad(f"{name!r} has an unknown rank")
        elif num == 3:
            shard = _num(v)
        elif num == 4:
            offset = _num(v)
        elif num == 5:
            size = _num(v)
        elif num == 6:
            crc = _num(v)
        elif num == 7:  # TensorSliceProto: extent (1) {start (1), length (2)}; none: whole
            starts, lengths = [], []
            for n2, _w2, ext in _fields(v):
                if n2 == 1:
                    f = {k3: _signed(d) for k3, _w3, d in _fields(ext)}
                    starts.append(f.get(1, 0))
                    lengths.append(f.get(2, -1))
            slices = (slices or []) + [(starts, lengths)]
    dt = _DTYPES.get(dtype)
    if dt is None:
        raise _Bad(f"{name!r} has TensorFlow dtype {dtype}, which hetbed lacks")
    if shard >= n_shards:
        raise _Bad(f"{name!r} names shard {shard} of {n_shards}")
    if slices is not None and any(len(st) != len(dims) for st, _ in slices):
        raise _Bad(f"tensor {name!r} of rank {len(dims)} lists a slice of another rank")
    if slices is not None and any(n < -1 or s < 0 for st, ln in slices for s, n in zip(st, ln)):
        raise _Bad(f"tensor {name!r} lists a slice of negative start or length")
    return (dt, tuple(dims), shard, offset, size), crc, slices


def _signed(v: int) -> int:
    """A protobuf int64 read as a varint (two's complement over 64 bits)."""
    v = _num(v)
    return v - (1 << 64) if v >= 1 << 63 else v


def _slice_spec(starts: list[int], lengths: list[int]) -> str:
    return ":".join("-" if n < 0 else f"{s},{n}" for s, n in zip(starts, lengths))


def _ordered_string(s: bytes) -> bytes:
    """TensorFlow's OrderedCode string: 0x00 and 0xff escaped, ended by 0x00 0x01."""
    return s.replace(b"\xff", b"\xff\x00").replace(b"\x00", b"\x00\xff") + b"\x00\x01"


def _ordered_num(v: int) -> bytes:
    """OrderedCode's increasing unsigned number: its byte count, then it big-endian."""
    b = v.to_bytes((v.bit_length() + 7) // 8, "big")
    return bytes([len(b)]) + b


def _ordered_signed(v: int) -> bytes:
    """OrderedCode's increasing signed number: n bytes of two's complement whose first n bits
    (flipped) give n, the value in the remaining 7n - 1 bits."""
    x = ~v if v < 0 else v
    n = (x.bit_length() + 7) // 7  # the least n with bit_length <= 7n - 1
    header = ((1 << n) - 1) << (7 * n)
    return (int.from_bytes(v.to_bytes(n, "big", signed=True), "big") ^ header).to_bytes(n, "big")


def _slice_key(name: str, starts: list[int], lengths: list[int]) -> bytes:
    """The key TensorFlow stores a slice of ``name`` under (``EncodeTensorNameSlice``): 0, the
    name, the rank, then each dimension's start and length (-1: whole), in OrderedCode."""
    key = _ordered_num(0) + _ordered_string(name.encode("utf-8")) + _ordered_num(len(starts))
    for s, n in zip(starts, lengths):
        key += _ordered_signed(s) + _ordered_signed(n)
    return key


def _check_tiling(name: str, dims: tuple, parts: list[tuple]) -> None:
    """The slices lie inside the tensor, no two overlap, and together they hold as many
    elements as it: they cover it exactly once (TF refuses overlapping slices too)."""
    total = 0
    for starts, shape in parts:
        for s, n, d in zip(starts, shape, dims):
            if s < 0 or n < 0 or s + n > d:
                raise _Bad(
                    f"a slice of tensor {name!r} at {list(starts)} runs outside {list(dims)}"
                )
        total += math.prod(shape)
    for i, (a, sa) in enumerate(parts):
        for b, sb in parts[i + 1 :]:
            if all(x < y + m and y < x + n for x, n, y, m in zip(a, sa, b, sb)):
                raise _Bad(f"tensor {name!r} has overlapping slices at {list(a)} and {list(b)}")
    if total != math.prod(dims):
        raise _Bad(
            f"the slices of tensor {name!r} hold {total} elements, its shape {list(dims)} "
            f"{math.prod(dims)}"
        )


def tensor(prefix: str, name: str, entry: tuple, shards: list[bytes]) -> np.ndarray:
    """One tensor of a bundle (``read_bundle``), read only where numeric; a partitioned one is
    put together from its slices (a new array)."""
    dt, dims, shard, offset, size = entry
    if isinstance(shard, tuple):
        out = np.empty(dims, dtype=object if dt.is_string else dt.np)
        for starts, part in shard:
            where = tuple(slice(s, s + n) for s, n in zip(starts, part[1]))
            out[where] = tensor(prefix, name, part, shards)
        return out
    buf = shards[shard]
    if not dt.is_string:
        le = dt.np.newbyteorder("<")
        count = int(np.prod(dims, dtype=np.int64))
        arr = np.frombuffer(buf, dtype=le, count=count, offset=offset).reshape(dims)
        return arr if le == dt.np else arr.astype(dt.np)
    n = int(np.prod(dims, dtype=np.int64))
    try:
        pos = offset
        lengths = []
        for _ in range(n):
            ln, pos = _varint(buf, pos)
            lengths.append(ln)
        pos += 4  # the lengths' checksum
        out = np.empty(n, dtype=object)
        for i, ln in enumerate(lengths):
            if pos + ln > offset + size:
                raise _Bad("a string runs past its tensor")
            out[i] = bytes(buf[pos : pos + ln])
            pos += ln
    except _Bad as e:
        raise DataLossError(f"checkpoint {prefix}: tensor {name!r}: {e}") from None
    return out.reshape(dims)
