"""The column kinds of ``tf.feature_column`` (feature_column.py builds them and the layers):
how a dict of raw features (dense tensors, SparseTensors, strings) becomes model input.

A column is an immutable description (a frozen dataclass, so equal columns are one key in a
call's transform cache). Dense columns (numeric, bucketized, embedding, indicator) give a
[batch, width] float32 tensor; categorical columns (identity, vocabulary list or file, hash
bucket, crossed, weighted, and bucketized too) give int64 ids as a SparseTensor with optional
weights (``IdWeights``).

As in TF: a dense input of rank 1 is one value per example; -1 (integer) and "" (string) in a
dense categorical input mean "missing" and are dropped; ids < 0 (out of vocabulary without OOV
buckets) weigh nothing; hash buckets and crosses give TF's ids (FarmHash Fingerprint64 and
FingerprintCat64, runtime/ops/hashing.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

import hetbed as hb
from hetbed.runtime.ops import lookup as _lookup
from hetbed.runtime.ops.hashing import sparse_cross_hashed
from hetbed.runtime.ops.records import FixedLenFeature, VarLenFeature
from hetbed.runtime.ops.sparse import SparseTensor, SparseTensorValue


class IdWeights(NamedTuple):
    """What a categorical column gives: int64 ids (a SparseTensor) and float weights for them
    (a SparseTensor of the same indices) or None."""

    ids: SparseTensor
    weights: SparseTensor | None


# ---- one call's features, each raw feature and each column transformed once --------------------


class _Transforms:
    def __init__(self, features: dict):
        if not isinstance(features, dict):
            raise TypeError(f"feature_column: features must be a dict, got {type(features)}")
        self._features = features
        self._cache: dict = {}

    def get(self, key: Any) -> Any:
        if key not in self._cache:
            self._cache[key] = self._raw(key) if isinstance(key, str) else key._transform(self)
        return self._cache[key]

    def _raw(self, key: str) -> Any:
        if key not in self._features:
            raise ValueError(
                f"feature_column: feature {key!r} is not in the features dictionary "
                f"(keys: {sorted(self._features)})"
            )
        v = self._features[key]
        if isinstance(v, SparseTensorValue):
            v = SparseTensor(*(hb.constant(np.asarray(p)) for p in v))
        if isinstance(v, SparseTensor):
            return v
        t = hb.convert_to_tensor(v)
        if t.shape.ndims == 0:
            raise ValueError(f"feature_column: feature {key!r} is a scalar; give one per example")
        return hb.expand_dims(t, -1) if t.shape.ndims == 1 else t


def _sparse_dropping(x: Any, ignore: Any) -> SparseTensor:
    """The entries of dense ``x`` other than ``ignore``, as a SparseTensor."""
    idx = hb.where(hb.not_equal(x, ignore))
    return SparseTensor(idx, hb.gather_nd(x, idx), hb.shape(x, out_type=hb.int64))


def _as_ids_input(col: Any, x: Any) -> SparseTensor:
    """A categorical column's raw input as a SparseTensor, missing entries dropped."""
    if isinstance(x, SparseTensor):
        return x
    dt = x.dtype
    if not (dt.is_string or dt.is_integer):
        raise ValueError(
            f"{type(col).__name__} {col.name!r}: input must be string or integer, got {dt.name}"
        )
    return _sparse_dropping(x, "" if dt.is_string else hb.constant(-1, dtype=dt))


def _check_kind(col: Any, x: SparseTensor, want_string: bool) -> None:
    got = x.values.dtype
    if got.is_string != want_string or not (got.is_string or got.is_integer):
        raise ValueError(
            f"{type(col).__name__} {col.name!r}: column dtype "
            f"{'string' if want_string else 'integer'} and input dtype {got.name} are not "
            "compatible"
        )


def _batch(x: Any) -> Any:
    return x.dense_shape[0] if isinstance(x, SparseTensor) else hb.shape(x, out_type=hb.int64)[0]


# ---- column kinds --------------------------------------------------------------------------


class _Column:
    name: str

    def _spec(self) -> dict:
        raise NotImplementedError


class DenseColumn(_Column):
    """A column giving [batch, width] float32 values; ``width`` is fixed by the column."""

    width: int

    def _dense(self, tr: _Transforms, collections: Any, trainable: bool) -> Any:
        raise NotImplementedError


class CategoricalColumn(_Column):
    """A column giving ids in [0, num_buckets) (and optional weights) per example."""

    num_buckets: int

    def _ids(self, tr: _Transforms) -> IdWeights:
        return tr.get(self)


@dataclass(frozen=True)
class NumericColumn(DenseColumn):
    key: str
    shape: tuple
    default_value: Any
    dtype: Any
    normalizer_fn: Callable | None

    name = property(lambda self: self.key)
    width = property(lambda self: int(np.prod(self.shape)))

    def _spec(self) -> dict:
        return {self.key: FixedLenFeature(self.shape, self.dtype, self.default_value)}

    def _transform(self, tr: _Transforms) -> Any:
        x = tr.get(self.key)
        if isinstance(x, SparseTensor):
            raise ValueError(
                f"numeric_column {self.key!r}: input must be a dense Tensor, got a SparseTensor"
            )
        if x.dtype.is_string:
            raise ValueError(
                f"numeric_column {self.key!r}: input must be numeric, got {x.dtype.name}"
            )
        if self.normalizer_fn is not None:
            x = self.normalizer_fn(x)
        return self._per_example(hb.cast(x, hb.float32))

    def _per_example(self, x: Any) -> Any:
        """``x`` as [batch, width], batch its first dimension: an input whose examples do not
        hold ``shape``'s values each fails (ValueError when its shape is known, else
        InvalidArgumentError when run) rather than being re-batched, as TF's
        ``reshape(x, [batch, width])`` fails."""
        want = f"numeric_column {self.key!r}: expected {self.width} values per example (shape {self.shape})"  # fmt: skip
        dims = x.shape.as_list() if x.shape.ndims is not None else None
        if dims is not None and None not in dims[1:] and dims[0] != 0:
            got = int(np.prod(dims[1:], dtype=np.int64))
            if got != self.width:
                raise ValueError(f"{want}, got input of shape {tuple(dims)}")
        batch = hb.shape(x, out_type=hb.int64)[0]
        check = hb.assert_equal(
            hb.size(x, out_type=hb.int64), batch * np.int64(self.width),
            data=[f"{want}; the input's shape is", hb.shape(x)], name="check_shape",
        )  # fmt: skip
        with hb.control_dependencies([check]):
            return hb.reshape(x, hb.stack([batch, np.int64(self.width)]))

    def _dense(self, tr, collections, trainable):
        return tr.get(self)


@dataclass(frozen=True)
class BucketizedColumn(DenseColumn, CategoricalColumn):
    source_column: NumericColumn
    boundaries: tuple

    name = property(lambda self: self.source_column.name + "_bucketized")
    num_buckets = property(lambda self: self.source_column.width * (len(self.boundaries) + 1))
    width = num_buckets

    def _spec(self) -> dict:
        return self.source_column._spec()

    def _transform(self, tr: _Transforms) -> Any:
        """The bucket of each value: the number of boundaries <= it (int64, [batch, n])."""
        x = hb.reshape(tr.get(self.source_column), [-1, self.source_column.width, 1])
        b = hb.constant(np.asarray(self.boundaries, np.float32).reshape(1, 1, -1))
        return hb.reduce_sum(hb.cast(hb.greater_equal(x, b), hb.int64), axis=2)

    def _dense(self, tr, collections, trainable):
        hot = hb.one_hot(tr.get(self), len(self.boundaries) + 1, dtype=hb.float32)
        return hb.reshape(hot, [-1, self.width])

    def _ids(self, tr: _Transforms) -> IdWeights:
        """Element j's bucket b as id j * (len(boundaries) + 1) + b, one per element."""
        buckets = tr.get(self)
        n = self.source_column.width
        offsets = hb.constant(
            np.arange(n, dtype=np.int64).reshape(1, n) * (len(self.boundaries) + 1)
        )
        ids = buckets + offsets
        idx = hb.where(hb.ones_like(ids, dtype=hb.bool_))
        return IdWeights(
            SparseTensor(idx, hb.reshape(ids, [-1]), hb.shape(ids, out_type=hb.int64)), None
        )


@dataclass(frozen=True)
class IdentityCategoricalColumn(CategoricalColumn):
    key: str
    num_buckets: int
    default_value: int | None

    name = property(lambda self: self.key)

    def _spec(self) -> dict:
        return {self.key: VarLenFeature(hb.int64)}

    def _transform(self, tr: _Transforms) -> IdWeights:
        x = _as_ids_input(self, tr.get(self.key))
        if not x.values.dtype.is_integer:
            raise ValueError(
                f"categorical_column_with_identity {self.key!r}: input must be integer, got "
                f"{x.values.dtype.name}"
            )
        v = hb.cast(x.values, hb.int64)
        n = np.int64(self.num_buckets)
        if self.default_value is None:
            checks = [
                hb.assert_less(
                    v, n, message=f"identity column {self.key!r}: id >= num_buckets {n}"
                ),
                hb.assert_greater_equal(
                    v, np.int64(0), message=f"identity column {self.key!r}: negative id"
                ),
            ]
            with hb.control_dependencies(checks):
                v = hb.identity(v)
        else:
            bad = hb.logical_or(hb.less(v, np.int64(0)), hb.greater_equal(v, n))
            v = hb.where(bad, hb.fill(hb.shape(v), np.int64(self.default_value)), v)
        return IdWeights(SparseTensor(x.indices, v, x.dense_shape), None)


@dataclass(frozen=True)
class VocabularyListCategoricalColumn(CategoricalColumn):
    key: str
    vocabulary_list: tuple
    dtype: Any
    default_value: int
    num_oov_buckets: int

    name = property(lambda self: self.key)
    num_buckets = property(lambda self: len(self.vocabulary_list) + self.num_oov_buckets)

    def _spec(self) -> dict:
        return {self.key: VarLenFeature(self.dtype)}

    def _transform(self, tr: _Transforms) -> IdWeights:
        x = _as_ids_input(self, tr.get(self.key))
        _check_kind(self, x, self.dtype.is_string)
        keys = x.values if self.dtype.is_string else hb.cast(x.values, hb.int64)
        table = _lookup.index_table_from_tensor(
            list(self.vocabulary_list),
            num_oov_buckets=self.num_oov_buckets,
            default_value=self.default_value,
            dtype=self.dtype,
            name=f"{self.key}_lookup",
        )
        return IdWeights(SparseTensor(x.indices, table.lookup(keys), x.dense_shape), None)


@dataclass(frozen=True)
class VocabularyFileCategoricalColumn(CategoricalColumn):
    key: str
    vocabulary_file: str
    vocabulary_size: int
    num_oov_buckets: int
    default_value: int
    dtype: Any

    name = property(lambda self: self.key)
    num_buckets = property(lambda self: self.vocabulary_size + self.num_oov_buckets)

    def _spec(self) -> dict:
        return {self.key: VarLenFeature(self.dtype)}

    def _transform(self, tr: _Transforms) -> IdWeights:
        x = _as_ids_input(self, tr.get(self.key))
        _check_kind(self, x, self.dtype.is_string)
        keys = x.values if self.dtype.is_string else hb.cast(x.values, hb.int64)
        table = _lookup._index_table_from_file(
            self.vocabulary_file, self.num_oov_buckets, self.vocabulary_size,
            self.default_value, None, self.dtype, f"{self.key}_lookup",
            context=f"categorical_column_with_vocabulary_file {self.key!r}",
        )  # fmt: skip
        return IdWeights(SparseTensor(x.indices, table.lookup(keys), x.dense_shape), None)


@dataclass(frozen=True)
class HashedCategoricalColumn(CategoricalColumn):
    key: str
    hash_bucket_size: int
    dtype: Any

    name = property(lambda self: self.key)
    num_buckets = property(lambda self: self.hash_bucket_size)

    def _spec(self) -> dict:
        return {self.key: VarLenFeature(self.dtype)}

    def _transform(self, tr: _Transforms) -> IdWeights:
        """Fingerprint64 of each value (integers as their decimal strings) mod the size."""
        x = _as_ids_input(self, tr.get(self.key))
        _check_kind(self, x, self.dtype.is_string)
        s = x.values if x.values.dtype.is_string else hb.as_string(x.values)
        ids = hb.string_to_hash_bucket_fast(s, self.hash_bucket_size, name="lookup")
        return IdWeights(SparseTensor(x.indices, ids, x.dense_shape), None)


@dataclass(frozen=True)
class CrossedColumn(CategoricalColumn):
    keys: tuple
    hash_bucket_size: int
    hash_key: int | None

    name = property(lambda self: "_X_".join(sorted(_key_name(k) for k in self.keys)))
    num_buckets = property(lambda self: self.hash_bucket_size)

    def _leaves(self) -> list:
        out = []
        for k in self.keys:
            out += k._leaves() if isinstance(k, CrossedColumn) else [k]
        return out

    def _spec(self) -> dict:
        spec: dict = {}
        for k in self._leaves():
            spec.update({k: VarLenFeature(hb.string)} if isinstance(k, str) else k._spec())
        return spec

    def _transform(self, tr: _Transforms) -> IdWeights:
        """The hashed cross (TF's sparse_cross_hashed) of the raw features named by string keys
        (dense ones taken whole, "" and -1 included, as TF takes them) and the ids of the
        categorical columns among the keys."""
        parts = []
        for k in self._leaves():
            if isinstance(k, str):
                parts.append(tr.get(k))
                continue
            got = k._ids(tr)
            if got.weights is not None:
                raise ValueError(
                    f"crossed_column {self.name!r}: weighted column {k.name!r} cannot be crossed"
                )
            parts.append(got.ids)
        ids = sparse_cross_hashed(parts, self.hash_bucket_size, self.hash_key)
        return IdWeights(ids, None)


@dataclass(frozen=True)
class WeightedCategoricalColumn(CategoricalColumn):
    categorical_column: CategoricalColumn
    weight_feature_key: str
    dtype: Any

    name = property(
        lambda self: f"{self.categorical_column.name}_weighted_by_{self.weight_feature_key}"
    )
    num_buckets = property(lambda self: self.categorical_column.num_buckets)

    def _spec(self) -> dict:
        return {
            **self.categorical_column._spec(),
            self.weight_feature_key: VarLenFeature(self.dtype),
        }

    def _transform(self, tr: _Transforms) -> IdWeights:
        got = self.categorical_column._ids(tr)
        if got.weights is not None:
            raise ValueError(f"weighted_categorical_column {self.name!r}: column is weighted twice")
        w = tr.get(self.weight_feature_key)
        if w.dtype != self.dtype:
            raise ValueError(
                f"weighted_categorical_column {self.name!r}: weights {self.weight_feature_key!r} "
                f"must be {self.dtype.name}, got {w.dtype.name}"
            )
        if not isinstance(w, SparseTensor):
            w = _sparse_dropping(w, hb.constant(0, dtype=w.dtype))
        with hb.control_dependencies([self._check_indices(got.ids, w)]):
            values = hb.identity(hb.cast(w.values, hb.float32))
        return IdWeights(got.ids, SparseTensor(w.indices, values, w.dense_shape))

    def _check_indices(self, ids: SparseTensor, w: SparseTensor) -> Any:
        """An op failing (InvalidArgumentError) unless the weights have the ids' indices: a
        weight for every id and no other (TF's SparseMerge fails on a count mismatch)."""
        a, b = hb.cast(ids.indices, hb.int64), hb.cast(w.indices, hb.int64)
        ra, rb = (t.shape.as_list()[-1:] if t.shape.ndims else [None] for t in (a, b))
        if None not in (ra[0], rb[0]) and ra != rb:
            raise ValueError(
                f"weighted_categorical_column {self.name!r}: the ids have rank {ra[0]} and the "
                f"weights {self.weight_feature_key!r} rank {rb[0]}; they must have the same "
                "indices"
            )
        sa, sb = hb.shape(a, out_type=hb.int64), hb.shape(b, out_type=hb.int64)
        common = hb.minimum(sa, sb)
        same = hb.logical_and(
            hb.reduce_all(hb.equal(sa, sb)),
            hb.reduce_all(hb.equal(hb.slice(a, [0, 0], common), hb.slice(b, [0, 0], common))),
        )
        msg = (
            f"weighted_categorical_column {self.name!r}: the weights "
            f"{self.weight_feature_key!r} must have the same indices as the ids (one weight per "
            "id; a dense weight of 0 is dropped); ids, weights:"
        )
        return hb.Assert(same, [msg, sa, sb], name="check_weight_indices")


@dataclass(frozen=True)
class EmbeddingColumn(DenseColumn):
    categorical_column: CategoricalColumn
    dimension: int
    combiner: str
    initializer: Any
    ckpt_to_load_from: str | None
    tensor_name_in_ckpt: str | None
    max_norm: float | None
    trainable: bool

    name = property(lambda self: self.categorical_column.name + "_embedding")
    width = property(lambda self: self.dimension)

    def _spec(self) -> dict:
        return self.categorical_column._spec()

    def _transform(self, tr: _Transforms) -> IdWeights:
        return self.categorical_column._ids(tr)

    def _dense(self, tr, collections, trainable):
        init = self.initializer or hb.truncated_normal_initializer(
            mean=0.0, stddev=1.0 / math.sqrt(self.dimension)
        )
        table = hb.get_variable(
            "embedding_weights",
            [self.categorical_column.num_buckets, self.dimension],
            dtype=hb.float32,
            initializer=init,
            trainable=self.trainable and trainable,
            collections=collections,
        )
        if self.ckpt_to_load_from is not None:
            hb.train.init_from_checkpoint(self.ckpt_to_load_from, {self.tensor_name_in_ckpt: table})
        got = tr.get(self)
        return combine_embeddings(table, got.ids, got.weights, self.combiner, self.max_norm)


@dataclass(frozen=True)
class IndicatorColumn(DenseColumn):
    categorical_column: CategoricalColumn

    name = property(lambda self: self.categorical_column.name + "_indicator")
    width = property(lambda self: self.categorical_column.num_buckets)

    def _spec(self) -> dict:
        return self.categorical_column._spec()

    def _transform(self, tr: _Transforms) -> Any:
        """Per example and id, the count of the id (or the sum of its weights)."""
        got = self.categorical_column._ids(tr)
        n = self.width
        ids = got.ids.values
        w = hb.ones_like(ids, dtype=hb.float32) if got.weights is None else got.weights.values
        ok = hb.logical_and(hb.greater_equal(ids, np.int64(0)), hb.less(ids, np.int64(n)))
        w = hb.where(ok, w, hb.zeros_like(w))
        slot = got.ids.indices[:, 0] * n + hb.where(ok, ids, hb.zeros_like(ids))
        batch = got.ids.dense_shape[0]
        flat = hb.unsorted_segment_sum(w, slot, batch * n)
        return hb.reshape(flat, hb.stack([batch, np.int64(n)]))

    def _dense(self, tr, collections, trainable):
        return tr.get(self)


def _key_name(k: Any) -> str:
    return k if isinstance(k, str) else k.name


def combine_embeddings(
    params: Any, ids: SparseTensor, weights: SparseTensor | None, combiner: str, max_norm=None
) -> Any:
    """One row per example: the rows of ``params`` at its ids (ids < 0, and weights <= 0,
    skipped), weighted, combined by "sum", "mean" (sum / total weight) or "sqrtn" (sum /
    sqrt(sum of squared weights)); an example without ids gives zeros (TF's
    ``safe_embedding_lookup_sparse``)."""
    batch = ids.dense_shape[0]
    keep = hb.greater_equal(ids.values, np.int64(0))
    w = None
    if weights is not None:
        w = hb.cast(weights.values, params.dtype)
        keep = hb.logical_and(keep, hb.greater(w, 0.0))
    at = hb.reshape(hb.where(keep), [-1])
    rows = hb.gather(ids.indices[:, 0], at)
    emb = hb.nn.embedding_lookup(params, hb.gather(ids.values, at), max_norm=max_norm)
    if w is None:
        w = hb.ones_like(rows, dtype=params.dtype)
    else:
        w = hb.gather(w, at)
        emb = emb * hb.expand_dims(w, 1)
    total = hb.unsorted_segment_sum(emb, rows, batch)
    if combiner == "sum":
        return total
    den = hb.unsorted_segment_sum(w if combiner == "mean" else w * w, rows, batch)
    if combiner == "sqrtn":
        den = hb.sqrt(den)
    den = hb.expand_dims(den, 1)
    empty = hb.equal(den, 0.0)
    return hb.where(
        hb.logical_or(empty, hb.zeros_like(total, dtype=hb.bool_)),
        hb.zeros_like(total),
        total / hb.where(empty, hb.ones_like(den), den),
    )
