"""TF1's ``tf.feature_column``: the column constructors, ``input_layer``, ``linear_model`` and
``make_parse_example_spec``.

Constructors check their arguments as TF does (and raise ValueError naming the column and the
value); the columns themselves are in fc_kinds.py. ``input_layer`` builds the dense columns
sorted by name, each under a variable scope of its name inside ``input_layer``, and concatenates
them; ``linear_model`` gives each column a ``weights`` variable (zeros) under
``linear_model/<column name>`` and adds ``linear_model/bias_weights``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

import hetbed as hb
from hetbed.fc_kinds import (
    BucketizedColumn,
    CategoricalColumn,
    CrossedColumn,
    DenseColumn,
    EmbeddingColumn,
    HashedCategoricalColumn,
    IdentityCategoricalColumn,
    IndicatorColumn,
    NumericColumn,
    VocabularyFileCategoricalColumn,
    VocabularyListCategoricalColumn,
    WeightedCategoricalColumn,
    _Transforms,
    combine_embeddings,
)

# ---- constructors ----------------------------------------------------------------------------


def _check_key(fn: str, key: Any) -> str:
    if not isinstance(key, str) or not key:
        raise ValueError(f"{fn}: key must be a non-empty string, got {key!r}")
    return key


def numeric_column(
    key: str,
    shape: Any = (1,),
    default_value: Any = None,
    dtype: Any = hb.float32,
    normalizer_fn: Callable | None = None,
) -> NumericColumn:
    """Real values of ``shape`` per example, cast to float32 after ``normalizer_fn``."""
    _check_key("numeric_column", key)
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)
    if any(d < 1 for d in shape):
        raise ValueError(f"numeric_column {key!r}: shape dimensions must be >= 1, got {shape}")
    dtype = hb.as_dtype(dtype)
    if not (dtype.is_floating or dtype.is_integer):
        raise ValueError(f"numeric_column {key!r}: dtype must be numeric, got {dtype.name}")
    if default_value is not None:
        arr = np.asarray(default_value, dtype=dtype.np)
        if arr.ndim == 0:
            default_value = arr.item()
        elif arr.size != int(np.prod(shape)):
            raise ValueError(
                f"numeric_column {key!r}: default_value {default_value!r} does not fit shape "
                f"{shape}"
            )
        else:
            default_value = tuple(arr.reshape(shape).tolist())
    if normalizer_fn is not None and not callable(normalizer_fn):
        raise TypeError(f"numeric_column {key!r}: normalizer_fn must be callable")
    return NumericColumn(key, shape, default_value, dtype, normalizer_fn)


def bucketized_column(source_column: Any, boundaries: Any) -> BucketizedColumn:
    """The bucket of each value of a 1-D ``numeric_column``: bucket i holds
    boundaries[i-1] <= x < boundaries[i] (len(boundaries) + 1 buckets per value)."""
    if not isinstance(source_column, NumericColumn):
        raise ValueError(
            f"bucketized_column: source_column must be a numeric_column, got {source_column!r}"
        )
    if len(source_column.shape) != 1:
        raise ValueError(
            f"bucketized_column {source_column.key!r}: source_column must be one-dimensional, "
            f"got shape {source_column.shape}"
        )
    if not isinstance(boundaries, (list, tuple)) or not boundaries:
        raise ValueError(
            f"bucketized_column {source_column.key!r}: boundaries must be a non-empty sorted "
            f"list, got {boundaries!r}"
        )
    b = [float(x) for x in boundaries]
    bad = [i for i in range(len(b) - 1) if b[i] >= b[i + 1]]
    if bad:
        raise ValueError(
            f"bucketized_column {source_column.key!r}: boundaries must be a sorted list "
            f"(strictly increasing), got {boundaries!r} (at index {bad[0]})"
        )
    return BucketizedColumn(source_column, tuple(b))


def categorical_column_with_identity(
    key: str, num_buckets: int, default_value: int | None = None
) -> IdentityCategoricalColumn:
    """Integer inputs used as ids in [0, num_buckets); others become ``default_value`` (or fail
    when the step runs, if it is None)."""
    _check_key("categorical_column_with_identity", key)
    if int(num_buckets) < 1:
        raise ValueError(f"categorical_column_with_identity {key!r}: num_buckets {num_buckets} < 1")
    if default_value is not None and not 0 <= int(default_value) < int(num_buckets):
        raise ValueError(
            f"categorical_column_with_identity {key!r}: default_value {default_value} not in "
            f"range [0, {num_buckets})"
        )
    dv = None if default_value is None else int(default_value)
    return IdentityCategoricalColumn(key, int(num_buckets), dv)


def _vocab_dtype(fn: str, key: str, dtype: Any, found: Any) -> Any:
    if dtype is None:
        return found
    dtype = hb.as_dtype(dtype)
    if dtype.is_string != found.is_string or not (dtype.is_string or dtype.is_integer):
        raise ValueError(f"{fn} {key!r}: dtype {dtype.name} and vocabulary dtype do not match")
    return hb.string if dtype.is_string else hb.int64


def _check_oov(fn: str, key: str, num_oov_buckets: int, default_value: Any) -> int:
    if int(num_oov_buckets) < 0:
        raise ValueError(f"{fn} {key!r}: num_oov_buckets {num_oov_buckets} < 0")
    if int(num_oov_buckets) and default_value not in (None, -1):
        raise ValueError(
            f"{fn} {key!r}: can't specify both num_oov_buckets ({num_oov_buckets}) and "
            f"default_value ({default_value})"
        )
    return int(num_oov_buckets)


def categorical_column_with_vocabulary_list(
    key: str,
    vocabulary_list: Iterable,
    dtype: Any = None,
    default_value: int = -1,
    num_oov_buckets: int = 0,
) -> VocabularyListCategoricalColumn:
    """The index of each input in ``vocabulary_list`` (strings or integers); an unknown input
    is ``default_value``, or (num_oov_buckets > 0) ``len(vocab) + fingerprint % num_oov``."""
    fn = "categorical_column_with_vocabulary_list"
    _check_key(fn, key)
    vocab = tuple(v.decode() if isinstance(v, bytes) else v for v in vocabulary_list)
    if not vocab:
        raise ValueError(f"{fn} {key!r}: vocabulary_list must be non-empty")
    if len(set(vocab)) != len(vocab):
        dup = sorted({v for v in vocab if vocab.count(v) > 1}, key=str)
        raise ValueError(f"{fn} {key!r}: duplicate keys in vocabulary_list: {dup}")
    is_str = all(isinstance(v, str) for v in vocab)
    if not is_str and not all(isinstance(v, (int, np.integer)) for v in vocab):
        raise ValueError(f"{fn} {key!r}: vocabulary must be all strings or all integers")
    dt = _vocab_dtype(fn, key, dtype, hb.string if is_str else hb.int64)
    n_oov = _check_oov(fn, key, num_oov_buckets, default_value)
    vocab = vocab if is_str else tuple(int(v) for v in vocab)
    return VocabularyListCategoricalColumn(key, vocab, dt, int(default_value), n_oov)


def categorical_column_with_vocabulary_file(
    key: str,
    vocabulary_file: str,
    vocabulary_size: int | None = None,
    num_oov_buckets: int = 0,
    default_value: int | None = None,
    dtype: Any = hb.string,
) -> VocabularyFileCategoricalColumn:
    """As ``categorical_column_with_vocabulary_list`` with the vocabulary one entry per line of
    ``vocabulary_file`` (its first ``vocabulary_size`` lines; all of them when None)."""
    fn = "categorical_column_with_vocabulary_file"
    _check_key(fn, key)
    if not vocabulary_file:
        raise ValueError(f"{fn} {key!r}: missing vocabulary_file")
    path = os.fspath(vocabulary_file)
    if vocabulary_size is None:
        if not os.path.exists(path):
            raise ValueError(f"{fn} {key!r}: vocabulary_file {path!r} does not exist")
        with open(path, "rb") as f:
            *lines, last = f.read().split(b"\n")
        # TF's count (gfile's lines): a last piece without "\n" is a line unless only "\r"s
        vocabulary_size = len(lines) + (1 if last.replace(b"\r", b"") else 0)
    if int(vocabulary_size) < 1:
        raise ValueError(f"{fn} {key!r}: invalid vocabulary_size {vocabulary_size} in {path!r}")
    n_oov = _check_oov(fn, key, num_oov_buckets, default_value)
    dt = hb.as_dtype(dtype)
    if not (dt.is_string or dt.is_integer):
        raise ValueError(f"{fn} {key!r}: dtype must be string or integer, got {dt.name}")
    dt = hb.string if dt.is_string else hb.int64
    dv = -1 if default_value is None else int(default_value)
    return VocabularyFileCategoricalColumn(key, path, int(vocabulary_size), n_oov, dv, dt)


def categorical_column_with_hash_bucket(
    key: str, hash_bucket_size: int, dtype: Any = hb.string
) -> HashedCategoricalColumn:
    """FarmHash Fingerprint64 of each input (integers as decimal strings) modulo
    ``hash_bucket_size``: TF's ids for the same inputs."""
    fn = "categorical_column_with_hash_bucket"
    _check_key(fn, key)
    if hash_bucket_size is None or int(hash_bucket_size) < 1:
        raise ValueError(
            f"{fn} {key!r}: hash_bucket_size must be at least 1, got {hash_bucket_size}"
        )
    dt = hb.as_dtype(dtype)
    if not (dt.is_string or dt.is_integer):
        raise ValueError(f"{fn} {key!r}: dtype must be string or integer, got {dt.name}")
    return HashedCategoricalColumn(key, int(hash_bucket_size), dt)


def crossed_column(keys: Any, hash_bucket_size: int, hash_key: int | None = None) -> CrossedColumn:
    """Every combination of one feature per key (raw features named by strings, or the ids of
    categorical columns), hashed into ``hash_bucket_size`` buckets as TF's
    ``sparse_cross_hashed`` does (same ids as TF)."""
    keys = tuple(keys) if isinstance(keys, (list, tuple)) else keys
    if not isinstance(keys, tuple) or len(keys) < 2:
        raise ValueError(f"crossed_column: keys must be a list of at least 2, got {keys!r}")
    if hash_bucket_size is None or int(hash_bucket_size) < 1:
        raise ValueError(
            f"crossed_column: hash_bucket_size must be at least 1, got {hash_bucket_size}"
        )
    for k in keys:
        if isinstance(k, HashedCategoricalColumn):
            raise ValueError(
                f"crossed_column: categorical_column_with_hash_bucket {k.name!r} cannot be "
                "crossed (hashing before crossing adds collisions): give its key as a string"
            )
        if not isinstance(k, (str, CategoricalColumn)):
            raise ValueError(
                f"crossed_column: keys must be strings or categorical columns, got {k!r}"
            )
    return CrossedColumn(keys, int(hash_bucket_size), hash_key)


def weighted_categorical_column(
    categorical_column: Any, weight_feature_key: str, dtype: Any = hb.float32
) -> WeightedCategoricalColumn:
    """``categorical_column``'s ids weighted by the feature ``weight_feature_key``, entry by
    entry: the weights must have the ids' indices (a dense weight of 0 is dropped, as a
    dense id of -1 is, so give 0 where an id is missing)."""
    if not isinstance(categorical_column, CategoricalColumn):
        raise ValueError(
            f"weighted_categorical_column: categorical_column must be categorical, got "
            f"{categorical_column!r}"
        )
    dt = hb.as_dtype(dtype)
    if not dt.is_floating:
        raise ValueError(
            f"weighted_categorical_column {categorical_column.name!r}: dtype {dt.name} is not "
            "a float type"
        )
    _check_key("weighted_categorical_column", weight_feature_key)
    return WeightedCategoricalColumn(categorical_column, weight_feature_key, dt)


def embedding_column(
    categorical_column: Any,
    dimension: int,
    combiner: str = "mean",
    initializer: Any = None,
    ckpt_to_load_from: str | None = None,
    tensor_name_in_ckpt: str | None = None,
    max_norm: float | None = None,
    trainable: bool = True,
) -> EmbeddingColumn:
    """A learned ``dimension``-vector per id (variable ``embedding_weights``, by default
    truncated normal with stddev 1/sqrt(dimension)), combined per example by ``combiner``;
    optionally loaded from ``tensor_name_in_ckpt`` of the checkpoint ``ckpt_to_load_from``."""
    if not isinstance(categorical_column, CategoricalColumn):
        raise ValueError(
            f"embedding_column: categorical_column must be categorical, got {categorical_column!r}"
        )
    name = categorical_column.name
    if dimension is None or int(dimension) < 1:
        raise ValueError(f"embedding_column {name!r}: invalid dimension {dimension}")
    if combiner not in ("mean", "sqrtn", "sum"):
        raise ValueError(
            f"embedding_column {name!r}: combiner must be mean, sqrtn or sum, got {combiner!r}"
        )
    if (ckpt_to_load_from is None) != (tensor_name_in_ckpt is None):
        raise ValueError(
            f"embedding_column {name!r}: give both ckpt_to_load_from and tensor_name_in_ckpt, "
            "or neither"
        )
    if initializer is not None and not callable(initializer):
        raise ValueError(f"embedding_column {name!r}: initializer must be callable")
    return EmbeddingColumn(
        categorical_column, int(dimension), combiner, initializer, ckpt_to_load_from,
        tensor_name_in_ckpt, max_norm, bool(trainable),
    )  # fmt: skip


def indicator_column(categorical_column: Any) -> IndicatorColumn:
    """A multi-hot [batch, num_buckets] vector: each id's count (or summed weight)."""
    if not isinstance(categorical_column, CategoricalColumn):
        raise ValueError(
            f"indicator_column: categorical_column must be categorical, got {categorical_column!r}"
        )
    return IndicatorColumn(categorical_column)


# ---- layers ----------------------------------------------------------------------------------


def _columns(fn: str, columns: Any, kinds: tuple) -> list:
    cols = [columns] if isinstance(columns, (DenseColumn, CategoricalColumn)) else list(columns)
    if not cols:
        raise ValueError(f"{fn}: feature_columns must not be empty")
    for c in cols:
        if not isinstance(c, kinds):
            raise ValueError(
                f"{fn}: items of feature_columns must be "
                f"{' or '.join(k.__name__ for k in kinds)}; wrap a categorical column with "
                f"embedding_column or indicator_column. Given: {c!r}"
            )
    names = [c.name for c in cols]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"{fn}: duplicate feature column names {dup}")
    return sorted(cols, key=lambda c: c.name)


def _collections(weight_collections: Any) -> list | None:
    if not weight_collections:
        return None
    out = list(weight_collections)
    return out if hb.GraphKeys.GLOBAL_VARIABLES in out else [*out, hb.GraphKeys.GLOBAL_VARIABLES]


def _vars_under(scope_name: str, before: set) -> list:
    return [
        v
        for v in hb.global_variables()
        if v.name.startswith(scope_name + "/") and id(v) not in before
    ]


def input_layer(
    features: dict,
    feature_columns: Any,
    weight_collections: Any = None,
    trainable: bool = True,
    cols_to_vars: dict | None = None,
    cols_to_output_tensors: dict | None = None,
) -> Any:
    """The dense columns' values for ``features``, [batch, sum of widths] float32, columns in
    the order of their names. Variables go to ``weight_collections`` too (and GLOBAL_VARIABLES);
    ``cols_to_vars`` / ``cols_to_output_tensors``, when given, are filled per column."""
    cols = _columns("input_layer", feature_columns, (DenseColumn,))
    tr = _Transforms(features)
    colls = _collections(weight_collections)
    outs = []
    with hb.variable_scope(None, default_name="input_layer"):
        for col in cols:
            before = {id(v) for v in hb.global_variables()}
            with hb.variable_scope(None, default_name=col.name) as vs:
                t = hb.reshape(col._dense(tr, colls, trainable), [-1, col.width])
            if cols_to_vars is not None:
                cols_to_vars[col] = _vars_under(vs.name, before)
            if cols_to_output_tensors is not None:
                cols_to_output_tensors[col] = t
            outs.append(t)
        return hb.concat(outs, 1, name="concat")


def linear_model(
    features: dict,
    feature_columns: Any,
    units: int = 1,
    sparse_combiner: str = "sum",
    weight_collections: Any = None,
    trainable: bool = True,
    cols_to_vars: dict | None = None,
) -> Any:
    """A linear function of the columns, [batch, units]: per categorical column the weight rows
    of its ids combined by ``sparse_combiner`` ("sum", "mean", "sqrtn"); per dense column its
    values times its weights; plus ``bias_weights``. All variables start at zero."""
    if sparse_combiner not in ("sum", "mean", "sqrtn"):
        raise ValueError(
            f"linear_model: sparse_combiner must be sum, mean or sqrtn, got {sparse_combiner!r}"
        )
    cols = _columns("linear_model", feature_columns, (DenseColumn, CategoricalColumn))
    tr = _Transforms(features)
    colls = _collections(weight_collections)
    parts = []

    def weights(rows: int) -> Any:
        return hb.get_variable(
            "weights", [rows, int(units)], dtype=hb.float32,
            initializer=hb.zeros_initializer(), trainable=trainable, collections=colls,
        )  # fmt: skip

    with hb.variable_scope(None, default_name="linear_model"):
        for col in cols:
            before = {id(v) for v in hb.global_variables()}
            with hb.variable_scope(None, default_name=col.name) as vs:
                if isinstance(col, CategoricalColumn):
                    got = col._ids(tr)
                    w = weights(col.num_buckets)
                    parts.append(combine_embeddings(w, got.ids, got.weights, sparse_combiner))
                else:
                    x = hb.reshape(col._dense(tr, colls, trainable), [-1, col.width])
                    parts.append(hb.matmul(x, weights(col.width)))
            if cols_to_vars is not None:
                cols_to_vars[col] = _vars_under(vs.name, before)
        bias = hb.get_variable(
            "bias_weights", [int(units)], dtype=hb.float32,
            initializer=hb.zeros_initializer(), trainable=trainable, collections=colls,
        )  # fmt: skip
        if cols_to_vars is not None:
            cols_to_vars["bias"] = [bias]
        total = parts[0] if len(parts) == 1 else hb.add_n(parts)
        return hb.nn.bias_add(total, bias, name="weighted_sum")


def make_parse_example_spec(feature_columns: Any) -> dict:
    """The ``parse_example`` spec the columns read: FixedLenFeature for numeric columns,
    VarLenFeature for categorical inputs and weights."""
    spec: dict = {}
    for col in feature_columns:
        if not isinstance(col, (DenseColumn, CategoricalColumn)):
            raise ValueError(f"make_parse_example_spec: not a feature column: {col!r}")
        for k, v in col._spec().items():
            if k in spec and spec[k] != v:
                raise ValueError(
                    f"make_parse_example_spec: feature {k!r} is read as {spec[k]} and as {v} "
                    f"(column {col.name!r})"
                )
            spec[k] = v
    return spec


__all__ = [
    "bucketized_column",
    "categorical_column_with_hash_bucket",
    "categorical_column_with_identity",
    "categorical_column_with_vocabulary_file",
    "categorical_column_with_vocabulary_list",
    "crossed_column",
    "embedding_column",
    "indicator_column",
    "input_layer",
    "linear_model",
    "make_parse_example_spec",
    "numeric_column",
    "weighted_categorical_column",
]
