"""String hashing into buckets (TF1 semantics), with the hash functions written from their
specifications: FarmHash's Fingerprint64 (``string_to_hash_bucket_fast``), keyed SipHash-2-4
(``string_to_hash_bucket_strong``) and TensorFlow's legacy 64-bit Murmur-style hash with seed
0xDECAFCAFFE (``string_to_hash_bucket``). Every bucket is ``hash % num_buckets`` (unsigned),
as int64. Kernels run on the CPU only (string tensors never go to a GPU).
"""

from __future__ import annotations

import itertools
import struct
from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import TensorShape
from ..registry import apply, convert_to_tensor, defop

_M64 = (1 << 64) - 1

# ---- FarmHash Fingerprint64 (farmhashna::Hash64) -------------------------------------------------

_K0 = 0xC3A5C85C97CB3127
_K1 = 0xB492B66FBE98F273
_K2 = 0x9AE16A3B2F90404F


def _f64(s: bytes, i: int) -> int:
    return int.from_bytes(s[i : i + 8], "little")


def _f32(s: bytes, i: int) -> int:
    return int.from_bytes(s[i : i + 4], "little")


def _rot(v: int, r: int) -> int:
    return v if r == 0 else ((v >> r) | (v << (64 - r))) & _M64


def _smix(v: int) -> int:
    return v ^ (v >> 47)


def _len16(u: int, v: int, mul: int) -> int:
    a = ((u ^ v) * mul) & _M64
    a ^= a >> 47
    b = ((v ^ a) * mul) & _M64
    b ^= b >> 47
    return (b * mul) & _M64


def _len0to16(s: bytes, n: int) -> int:
    if n >= 8:
        mul = _K2 + n * 2
        a = (_f64(s, 0) + _K2) & _M64
        b = _f64(s, n - 8)
        c = (_rot(b, 37) * mul + a) & _M64
        d = ((_rot(a, 25) + b) * mul) & _M64
        return _len16(c, d, mul)
    if n >= 4:
        mul = _K2 + n * 2
        return _len16(n + (_f32(s, 0) << 3), _f32(s, n - 4), mul)
    if n > 0:
        y = (s[0] + (s[n >> 1] << 8)) & 0xFFFFFFFF
        z = (n + (s[n - 1] << 2)) & 0xFFFFFFFF
        return (_smix(((y * _K2) ^ (z * _K0)) & _M64) * _K2) & _M64
    return _K2


def _len17to32(s: bytes, n: int) -> int:
    mul = _K2 + n * 2
    a = (_f64(s, 0) * _K1) & _M64
    b = _f64(s, 8)
    c = (_f64(s, n - 8) * mul) & _M64
    d = (_f64(s, n - 16) * _K2) & _M64
    return _len16(
        (_rot((a + b) & _M64, 43) + _rot(c, 30) + d) & _M64,
        (a + _rot((b + _K2) & _M64, 18) + c) & _M64,
        mul,
    )


def _len33to64(s: bytes, n: int) -> int:
    mul = _K2 + n * 2
    a = (_f64(s, 0) * _K2) & _M64
    b = _f64(s, 8)
    c = (_f64(s, n - 8) * mul) & _M64
    d = (_f64(s, n - 16) * _K2) & _M64
    y = (_rot((a + b) & _M64, 43) + _rot(c, 30) + d) & _M64
    z = _len16(y, (a + _rot((b + _K2) & _M64, 18) + c) & _M64, mul)
    e = (_f64(s, 16) * mul) & _M64
    f = _f64(s, 24)
    g = ((y + _f64(s, n - 32)) * mul) & _M64
    h = ((z + _f64(s, n - 24)) * mul) & _M64
    return _len16(
        (_rot((e + f) & _M64, 43) + _rot(g, 30) + h) & _M64,
        (e + _rot((f + a) & _M64, 18) + g) & _M64,
        mul,
    )


def _weak32(s: bytes, i: int, a: int, b: int) -> tuple[int, int]:
    w, x, y, z = _f64(s, i), _f64(s, i + 8), _f64(s, i + 16), _f64(s, i + 24)
    a = (a + w) & _M64
    b = _rot((b + a + z) & _M64, 21)
    c = a
    a = (a + x + y) & _M64
    b = (b + _rot(a, 44)) & _M64
    return (a + z) & _M64, (b + c) & _M64


def fingerprint64(s: bytes) -> int:
    """FarmHash's Fingerprint64 of ``s`` (an unsigned 64-bit int)."""
    n = len(s)
    if n <= 16:
        return _len0to16(s, n)
    if n <= 32:
        return _len17to32(s, n)
    if n <= 64:
        return _len33to64(s, n)
    seed = 81
    x = seed
    y = (seed * _K1 + 113) & _M64
    z = (_smix((y * _K2 + 113) & _M64) * _K2) & _M64
    v0 = v1 = w0 = w1 = 0
    x = (x * _K2 + _f64(s, 0)) & _M64
    end = ((n - 1) // 64) * 64
    last64 = end + ((n - 1) & 63) - 63
    p = 0
    while True:
        x = (_rot((x + y + v0 + _f64(s, p + 8)) & _M64, 37) * _K1) & _M64
        y = (_rot((y + v1 + _f64(s, p + 48)) & _M64, 42) * _K1) & _M64
        x ^= w1
        y = (y + v0 + _f64(s, p + 40)) & _M64
        z = (_rot((z + w0) & _M64, 33) * _K1) & _M64
        v0, v1 = _weak32(s, p, (v1 * _K1) & _M64, (x + w0) & _M64)
        w0, w1 = _weak32(s, p + 32, (z + w1) & _M64, (y + _f64(s, p + 16)) & _M64)
        z, x = x, z
        p += 64
        if p == end:
            break
    mul = _K1 + ((z & 0xFF) << 1)
    p = last64
    w0 = (w0 + ((n - 1) & 63)) & _M64
    v0 = (v0 + w0) & _M64
    w0 = (w0 + v0) & _M64
    x = (_rot((x + y + v0 + _f64(s, p + 8)) & _M64, 37) * mul) & _M64
    y = (_rot((y + v1 + _f64(s, p + 48)) & _M64, 42) * mul) & _M64
    x ^= (w1 * 9) & _M64
    y = (y + v0 * 9 + _f64(s, p + 40)) & _M64
    z = (_rot((z + w0) & _M64, 33) * mul) & _M64
    v0, v1 = _weak32(s, p, (v1 * mul) & _M64, (x + w0) & _M64)
    w0, w1 = _weak32(s, p + 32, (z + w1) & _M64, (y + _f64(s, p + 16)) & _M64)
    z, x = x, z
    return _len16(
        (_len16(v0, w0, mul) + _smix(y) * _K0 + z) & _M64, (_len16(v1, w1, mul) + x) & _M64, mul
    )


# ---- SipHash-2-4 -------------------------------------------------------------------------------


def siphash24(k0: int, k1: int, s: bytes) -> int:
    """SipHash-2-4 of ``s`` under the 128-bit key ``(k0, k1)`` (two unsigned 64-bit halves, k0
    the first 8 key bytes read little-endian)."""
    v0 = k0 ^ 0x736F6D6570736575
    v1 = k1 ^ 0x646F72616E646F6D
    v2 = k0 ^ 0x6C7967656E657261
    v3 = k1 ^ 0x7465646279746573

    def rounds(v0: int, v1: int, v2: int, v3: int, k: int) -> tuple:
        for _ in range(k):
            v0 = (v0 + v1) & _M64
            v1 = _rotl(v1, 13) ^ v0
            v0 = _rotl(v0, 32)
            v2 = (v2 + v3) & _M64
            v3 = _rotl(v3, 16) ^ v2
            v0 = (v0 + v3) & _M64
            v3 = _rotl(v3, 21) ^ v0
            v2 = (v2 + v1) & _M64
            v1 = _rotl(v1, 17) ^ v2
            v2 = _rotl(v2, 32)
        return v0, v1, v2, v3

    n = len(s)
    tail = s[n - n % 8 :] + bytes(7 - n % 8) + bytes([n & 0xFF])
    for i in range(0, n - n % 8, 8):
        m = _f64(s, i)
        v3 ^= m
        v0, v1, v2, v3 = rounds(v0, v1, v2, v3, 2)
        v0 ^= m
    m = int.from_bytes(tail, "little")
    v3 ^= m
    v0, v1, v2, v3 = rounds(v0, v1, v2, v3, 2)
    v0 ^= m
    v2 ^= 0xFF
    v0, v1, v2, v3 = rounds(v0, v1, v2, v3, 4)
    return v0 ^ v1 ^ v2 ^ v3


def _rotl(v: int, r: int) -> int:
    return ((v << r) | (v >> (64 - r))) & _M64


# ---- TensorFlow's legacy Hash64 (MurmurHash64A with TF's byte-tail order) --------------------------


def tf_hash64(s: bytes, seed: int = 0xDECAFCAFFE) -> int:
    """TensorFlow's legacy 64-bit string hash (``string_to_hash_bucket``)."""
    m, r = 0xC6A4A7935BD1E995, 47
    n = len(s)
    h = (seed ^ (n * m)) & _M64
    body = n - n % 8
    for (k,) in struct.iter_unpack("<Q", s[:body]):
        k = (k * m) & _M64
        k ^= k >> r
        k = (k * m) & _M64
        h ^= k
        h = (h * m) & _M64
    if n % 8:
        h ^= int.from_bytes(s[body:], "little")
        h = (h * m) & _M64
    h ^= h >> r
    h = (h * m) & _M64
    h ^= h >> r
    return h


# ---- the ops -------------------------------------------------------------------------------------


def _bucket_shape(op):
    x = op.inputs[0]
    if not x.dtype.is_string:
        raise InvalidArgumentError(
            f"{op.type}: input must be a string tensor, got {x.dtype.name} (shape {x.shape})"
        )
    return [(x.shape, _dt.int64)]


def _bucket_kernel(hash_fn: Any) -> Any:
    def kernel(ctx, x):
        nb = ctx.attrs["num_buckets"]
        flat = [hash_fn(ctx, v if isinstance(v, bytes) else str(v).encode()) % nb for v in x.flat]
        return np.array(flat, dtype=np.int64).reshape(x.shape)

    return kernel


StringToHashBucketFast = defop("StringToHashBucketFast", shape=_bucket_shape, differentiable=False)
StringToHashBucketFast.kernel("cpu")(_bucket_kernel(lambda ctx, s: fingerprint64(s)))
StringToHashBucketStrong = defop(
    "StringToHashBucketStrong", shape=_bucket_shape, differentiable=False
)
StringToHashBucketStrong.kernel("cpu")(
    _bucket_kernel(lambda ctx, s: siphash24(*ctx.attrs["key"], s))
)
StringToHashBucket = defop("StringToHashBucket", shape=_bucket_shape, differentiable=False)
StringToHashBucket.kernel("cpu")(_bucket_kernel(lambda ctx, s: tf_hash64(s)))


def _num_buckets(fn: str, num_buckets: Any) -> int:
    nb = int(num_buckets)
    if nb < 1:
        raise InvalidArgumentError(f"{fn}: num_buckets must be at least 1, got {num_buckets}")
    return nb


def string_to_hash_bucket_fast(input: Any, num_buckets: int, name: str | None = None) -> Any:  # noqa: A002
    """Fingerprint64 of each string, modulo ``num_buckets`` (int64, same shape)."""
    nb = _num_buckets("string_to_hash_bucket_fast", num_buckets)
    return apply("StringToHashBucketFast", [input], {"num_buckets": nb}, name)


def string_to_hash_bucket_strong(
    input: Any,  # noqa: A002
    num_buckets: int,
    key: Any,
    name: str | None = None,
) -> Any:
    """SipHash-2-4 of each string under ``key`` (two 64-bit ints, negative ones taken as their
    unsigned bits, as TF does), modulo ``num_buckets``."""
    nb = _num_buckets("string_to_hash_bucket_strong", num_buckets)
    key = [int(k) for k in key]
    if len(key) != 2 or any(k < -(1 << 63) or k > _M64 for k in key):
        raise InvalidArgumentError(
            f"string_to_hash_bucket_strong: key must be two 64-bit ints, got {key}"
        )
    attrs = {"num_buckets": nb, "key": tuple(k & _M64 for k in key)}
    return apply("StringToHashBucketStrong", [input], attrs, name)


def string_to_hash_bucket(
    string_tensor: Any, num_buckets: int, name: str | None = None, input: Any = None
) -> Any:  # noqa: A002
    """TF1's legacy ``string_to_hash_bucket`` (TensorFlow's own 64-bit hash)."""
    nb = _num_buckets("string_to_hash_bucket", num_buckets)
    x = string_tensor if string_tensor is not None else input
    return apply("StringToHashBucket", [x], {"num_buckets": nb}, name)


# ---- SparseCrossHashed: the hashed cross of several sparse features (feature columns) -----------

#: the hash key TF's ``sparse_cross_hashed`` uses when none is given
DEFAULT_CROSS_HASH_KEY = 0xDECAFCAFFE


def fingerprint_cat64(fp1: int, fp2: int) -> int:
    """TensorFlow's FingerprintCat64: two 64-bit fingerprints combined into one (the
    multiply-and-shift mix of MurmurHash2, as ``sparse_cross_hashed`` chains it)."""
    mul = 0xC6A4A7935BD1E995
    h = fp1 ^ mul
    h ^= _smix((fp2 * mul) & _M64) * mul & _M64
    h = (h * mul) & _M64
    h = (_smix(h) * mul) & _M64
    return _smix(h)


SparseCrossHashed = defop("SparseCrossHashed", differentiable=False)


@SparseCrossHashed.shape
def _cross_shape(op):
    for i in range(1, len(op.inputs), 3):
        v = op.inputs[i]
        if not (v.dtype.is_string or v.dtype in (_dt.int64, _dt.int32)):
            raise InvalidArgumentError(
                f"SparseCrossHashed: input {i // 3} must be string or int64, got {v.dtype.name}"
            )
    return [
        (TensorShape([None, 2]), _dt.int64),
        (TensorShape([None]), _dt.int64),
        (TensorShape([2]), _dt.int64),
    ]


SparseCrossHashed.expected_shapes = lambda op, ins: [(ins[0][0], 2), (ins[0][0],), (2,)]


@SparseCrossHashed.kernel("cpu")
def _sparse_cross_hashed(ctx, *parts):
    """For each row, every combination of one feature per input (the last input varying
    fastest), each feature a 64-bit value (an integer's bits, a string's Fingerprint64),
    chained from the hash key by FingerprintCat64, modulo num_buckets."""
    n_in = len(parts) // 3
    batch = {int(parts[3 * i + 2][0]) for i in range(n_in)}
    if len(batch) != 1:
        raise InvalidArgumentError(
            f"SparseCrossHashed: inputs have different batch sizes {sorted(batch)}"
        )
    rows = batch.pop()
    per_input = []
    for i in range(n_in):
        idx, vals = parts[3 * i], parts[3 * i + 1]
        feats: list[list[int]] = [[] for _ in range(rows)]
        for r, v in zip(idx[:, 0].tolist(), vals.reshape(-1).tolist()):
            feats[r].append(fingerprint64(v) if isinstance(v, bytes) else int(v) & _M64)
        per_input.append(feats)
    nb, key = ctx.attrs["num_buckets"], ctx.attrs["hash_key"]
    mod = nb if nb > 0 else (1 << 63) - 1
    out_idx, out_vals, width = [], [], 0
    for r in range(rows):
        j = 0
        for combo in itertools.product(*(feats[r] for feats in per_input)):
            h = key
            for f in combo:
                h = fingerprint_cat64(h, f)
            out_idx.append((r, j))
            out_vals.append(h % mod)
            j += 1
        width = max(width, j)
    return (
        np.array(out_idx, np.int64).reshape(-1, 2),
        np.array(out_vals, np.int64),
        np.array([rows, width], np.int64),
    )


def sparse_cross_hashed(
    inputs: list, num_buckets: int = 0, hash_key: int | None = None, name: str | None = None
) -> Any:
    """TF1's ``tf.sparse.cross_hashed``: a SparseTensor [batch, crosses] of the hashed crosses
    of ``inputs`` (SparseTensors or dense [batch, k] tensors, integer or string) row by row,
    each ``FingerprintCat64`` chained over one feature per input, modulo ``num_buckets`` (0:
    none). As TF does, the SparseTensors are crossed first, then the dense inputs (every entry
    of a dense input is a feature, "" and 0 too). Bucket ids equal TF's for the same inputs."""
    from .array import cast, reshape
    from .array import shape as shape_of
    from .math import equal, where
    from .scatter import gather_nd
    from .sparse import SparseTensor

    def as_int64(v: Any) -> Any:
        return v if v.dtype.is_string or v.dtype == _dt.int64 else cast(v, _dt.int64)

    sparse = [x for x in inputs if isinstance(x, SparseTensor)]
    dense = [convert_to_tensor(x) for x in inputs if not isinstance(x, SparseTensor)]
    parts = []
    for sp in sparse:
        parts += [sp.indices, as_int64(sp.values), sp.dense_shape]
    for t in dense:
        idx = where(equal(t, t))  # every entry, in row-major order
        parts += [idx, as_int64(reshape(gather_nd(t, idx), [-1])), shape_of(t, out_type=_dt.int64)]
    attrs = {
        "num_buckets": int(num_buckets),
        "hash_key": int(hash_key) & _M64 if hash_key else DEFAULT_CROSS_HASH_KEY,  # 0 too, as TF
    }
    out = apply("SparseCrossHashed", parts, attrs, name or "SparseCrossHashed")
    return SparseTensor(*out)
