"""TensorFlow 1.x's namespace over hetbed: ``import hetbed.compat.v1 as tf``.

Every public name of ``hetbed`` is here (``tf.placeholder``, ``tf.Session``, ``tf.nn``,
``tf.train``, ``tf.layers``, ``tf.get_variable``, ...), plus what TF1 lays out differently:
``tf.random``, ``tf.math``, ``tf.dtypes``, ``tf.logging``, ``tf.bool`` and the switches of TF2
(``tf.disable_v2_behavior()`` and ``tf.disable_eager_execution()`` do nothing: hetbed always
builds graphs), ``tf.app.run`` with ``tf.app.flags`` (= ``tf.flags``, see ``flags.py``) and
``tf.clip_by_value``. The names are copied from ``hetbed`` when this module is imported, so it
mirrors whatever ``hetbed`` exports.
"""

from __future__ import annotations

import contextlib as _contextlib
import datetime as _dt_mod
import logging as _pylogging
import os as _os
import types as _types
from typing import Any as _Any

import numpy as _np

import hetbed as _hb
from hetbed import errors, initializers, layers, losses, nn, train

# Subpackages of hetbed that are not part of TF1's namespace.
_NOT_TF = {
    "runtime", "devices", "simulator", "scenarios", "reports", "compat", "cli", "fc_kinds",
    "estimator_canned",
}  # fmt: skip

for _name in dir(_hb):
    if not _name.startswith("_") and _name not in _NOT_TF:
        globals()[_name] = getattr(_hb, _name)

bool = _hb.bool_  # noqa: A001 - TF's name
AUTO_REUSE = _hb.AUTO_REUSE


def _namespace(name: str, doc: str, names: dict[str, _Any]) -> _types.ModuleType:
    mod = _types.ModuleType(f"{__name__}.{name}", doc)
    for k, v in names.items():
        if v is not None:
            setattr(mod, k, v)
    return mod


def _pick(*names: str) -> dict[str, _Any]:
    return {n: getattr(_hb, n, None) for n in names}


from hetbed.runtime.ops.random import categorical as _categorical  # noqa: E402

random = _namespace(
    "random",
    "TF1's tf.random: samplers and the graph-level seed.",
    {
        "normal": _hb.random_normal,
        "uniform": _hb.random_uniform,
        "truncated_normal": _hb.truncated_normal,
        "set_random_seed": _hb.set_random_seed,
        "shuffle": getattr(_hb, "random_shuffle", None),
        "categorical": _categorical,
        "multinomial": _hb.multinomial,
    },
)

math = _namespace(
    "math",
    "TF1's tf.math: elementwise math and reductions.",
    _pick(
        "abs",
        "add",
        "add_n",
        "angle",
        "argmax",
        "argmin",
        "ceil",
        "complex",
        "conj",
        "divide",
        "equal",
        "exp",
        "floor",
        "floordiv",
        "floormod",
        "greater",
        "greater_equal",
        "imag",
        "less",
        "less_equal",
        "log",
        "log1p",
        "logical_and",
        "logical_not",
        "logical_or",
        "maximum",
        "minimum",
        "multiply",
        "negative",
        "not_equal",
        "pow",
        "reciprocal",
        "real",
        "reduce_all",
        "reduce_any",
        "reduce_max",
        "reduce_mean",
        "reduce_min",
        "reduce_prod",
        "reduce_sum",
        "rint",
        "round",
        "rsqrt",
        "sigmoid",
        "sign",
        "sqrt",
        "square",
        "squared_difference",
        "subtract",
        "tanh",
        "truediv",
    )
    | {"softplus": getattr(nn, "softplus", None), "log_softmax": getattr(nn, "log_softmax", None)},
)

from hetbed.runtime.dtypes import int8, int16, uint8, uint16  # noqa: E402

dtypes = _namespace(
    "dtypes",
    "TF1's tf.dtypes.",
    _pick(
        "DType",
        "as_dtype",
        "float16",
        "float32",
        "float64",
        "int32",
        "int64",
        "cast",
        "complex",
        "complex64",
        "complex128",
    )
    | {"bool": _hb.bool_, "int8": int8, "int16": int16, "uint8": uint8, "uint16": uint16}
    | {"string": getattr(_hb, "string", None)},
)


# ---- TF1 names hetbed has no op for, composed from hetbed ops ----------------------------


def clip_by_value(t: _Any, clip_value_min: _Any, clip_value_max: _Any, name: str | None = None):
    """TF1's ``tf.clip_by_value``: ``minimum(maximum(t, min), max)``; the gradient flows where
    ``t`` is inside the bounds, as in TF."""
    with _hb.name_scope(name or "clip_by_value"):
        return _hb.minimum(_hb.maximum(t, clip_value_min), clip_value_max)


def arg_max(input: _Any, dimension: _Any = None, output_type: _Any = None, name: str | None = None):
    """TF1's deprecated ``tf.arg_max``: ``argmax`` along ``dimension`` (int64 by default)."""
    kw = {} if output_type is None else {"output_type": output_type}
    return _hb.argmax(input, axis=dimension, name=name, **kw)


def arg_min(input: _Any, dimension: _Any = None, output_type: _Any = None, name: str | None = None):
    """TF1's deprecated ``tf.arg_min``: ``argmin`` along ``dimension`` (int64 by default)."""
    kw = {} if output_type is None else {"output_type": output_type}
    return _hb.argmin(input, axis=dimension, name=name, **kw)


# ---- tf.compat: text and bytes ---------------------------------------------------------------


def _as_bytes(bytes_or_text: _Any, encoding: str = "utf-8") -> bytes:
    if isinstance(bytes_or_text, bytearray):
        return bytes(bytes_or_text)
    if isinstance(bytes_or_text, bytes):
        return bytes_or_text
    if isinstance(bytes_or_text, str):
        return bytes_or_text.encode(encoding)
    raise TypeError(f"Expected binary or unicode string, got {bytes_or_text!r}")


def _as_text(bytes_or_text: _Any, encoding: str = "utf-8") -> str:
    if isinstance(bytes_or_text, str):
        return bytes_or_text
    if isinstance(bytes_or_text, (bytes, bytearray)):
        return bytes(bytes_or_text).decode(encoding)
    raise TypeError(f"Expected binary or unicode string, got {bytes_or_text!r}")


def _as_str_any(value: _Any) -> str:
    return _as_text(value) if isinstance(value, (bytes, bytearray)) else str(value)


compat = _namespace(
    "compat",
    "TF1's tf.compat: text/bytes conversions and the integral/real/complex type tuples.",
    {
        "as_bytes": _as_bytes,
        "as_text": _as_text,
        "as_str": _as_text,
        "as_str_any": _as_str_any,
        "path_to_str": lambda path: _os.fspath(path),
        "integral_types": (int, _np.integer),
        "real_types": (int, float, _np.integer, _np.floating),
        "complex_types": (int, float, complex, _np.number),
        "bytes_or_text_types": (bytes, str),
    },
)


# ---- tf.contrib: rnn, layers, slim's layer functions, framework's arg_scope -----------------

from . import contrib_crf as _crf  # noqa: E402
from . import contrib_layers as _cl  # noqa: E402
from . import contrib_slim as _cs  # noqa: E402
from . import contrib_training as _contrib_training  # noqa: E402
from . import contrib_utils as _cu  # noqa: E402

_layer_names = {k: getattr(_cl, k) for k in _cl.__all__}
_layer_names |= {
    k: getattr(_cs, k)
    for k in ("softmax", "separable_conv2d", "conv2d_transpose", "conv2d_in_plane")
}
_layer_names |= {"separable_convolution2d": _cs.separable_conv2d}
_layer_names |= {"convolution2d_transpose": _cs.conv2d_transpose}
_utils = _namespace(
    "contrib.layers.utils",
    "slim's utils: end points by alias, shape helpers (contrib_utils.py).",
    {k: getattr(_cu, k) for k in _cu.__all__},
)
_initializers = _namespace(
    "contrib.slim.initializers",
    "slim's initializers.",
    {
        k: _layer_names[k]
        for k in ("xavier_initializer", "xavier_initializer_conv2d", "variance_scaling_initializer")
    },
)
_slim_variables = {k: getattr(_cs, k) for k in _cs.__all__ if k.startswith(("get_", "assign"))}
_slim_variables |= {"variable": _cs.variable, "model_variable": _cs.model_variable}
contrib = _namespace(
    "contrib",
    "TF1's tf.contrib: contrib.rnn (the cells of tf.nn.rnn_cell), contrib.layers, the layer "
    "functions of contrib.slim and contrib.framework's arg_scope (contrib_layers.py).",
    {
        "rnn": _namespace(
            "contrib.rnn",
            "tf.contrib.rnn: aliases of tf.nn.rnn_cell's cells and static_rnn.",
            {k: getattr(nn.rnn_cell, k) for k in nn.rnn_cell.__all__ + nn.rnn_cell.CONTRIB},
        ),
        "layers": _namespace(
            "contrib.layers",
            "tf.contrib.layers (see contrib_layers.py).",
            {
                **_layer_names,
                **{k: getattr(_cl, k) for k in _cl.SUMMARIES},
                "utils": _utils,
                "summaries": _namespace(
                    "contrib.layers.summaries",
                    "tf.contrib.layers.summaries: summaries of activations and tensors.",
                    {k: getattr(_cl, k) for k in _cl.SUMMARIES},
                ),
            },
        ),
        "slim": _namespace(
            "contrib.slim",
            "tf.contrib.slim's layers, regularizers, initializers and arg_scope.",
            {
                **_layer_names,
                **_slim_variables,
                "utils": _utils,
                "initializers": _initializers,
                "variables": _namespace(
                    "contrib.slim.variables", "slim's variable helpers.", _slim_variables
                ),
                "learning": _namespace(
                    "contrib.slim.learning",
                    "slim's learning: create_train_op, train, train_step.",
                    {
                        "create_train_op": _cs.create_train_op,
                        "train": _cs.train,
                        "train_step": _cs.train_step,
                    },
                ),
                "get_or_create_global_step": train.get_or_create_global_step,
                "model_analyzer": _namespace(
                    "contrib.slim.model_analyzer",
                    "slim's model_analyzer: sizes of variables and ops.",
                    {"analyze_vars": _cl.analyze_vars, "analyze_ops": _cl.analyze_ops},
                ),
            },
        ),
        "crf": _namespace(
            "contrib.crf",
            "tf.contrib.crf: a linear-chain CRF (contrib_crf.py).",
            {k: getattr(_crf, k) for k in _crf.__all__},
        ),
        "framework": _namespace(
            "contrib.framework",
            "tf.contrib.framework: arg_scope, add_arg_scope and the global step.",
            {
                "arg_scope": _cl.arg_scope,
                "add_arg_scope": _cl.add_arg_scope,
                "nest": _hb.nest,
                "get_or_create_global_step": train.get_or_create_global_step,
                "get_global_step": train.get_global_step,
            },
        ),
    },
)


def _projector(name: str) -> _Any:
    """``contrib.tensorboard.plugins.projector``: TensorBoard's projector plugin (where TF1's
    module went), imported when first asked for."""
    if name == "projector":
        from tensorboard.plugins import projector

        return projector
    raise AttributeError(f"tf.contrib.tensorboard.plugins has no {name!r} (only projector)")


from . import slim_nets as _slim_nets  # noqa: E402

contrib.slim.nets = _slim_nets  # type: ignore[attr-defined]
contrib.slim.python = _namespace(  # type: ignore[attr-defined]
    "contrib.slim.python",
    "TF1's tensorflow.contrib.slim.python: slim.nets (slim_nets/).",
    {
        "slim": _namespace(
            "contrib.slim.python.slim",
            "TF1's tensorflow.contrib.slim.python.slim: nets (slim_nets/).",
            {"nets": _slim_nets},
        )
    },
)


def _slim_nets_paths() -> None:
    """``tensorflow.contrib.slim.nets`` and ``tensorflow.contrib.slim.python.slim.nets`` (and
    their modules: ``...nets.resnet_v1``, ``...nets.inception``) importable under this
    package's name: the same module objects as ``contrib.slim.nets``'s attributes."""
    import sys as _sys

    for prefix in (f"{__name__}.contrib.slim.nets", f"{__name__}.contrib.slim.python.slim.nets"):
        _sys.modules.setdefault(prefix, _slim_nets)
        for sub in _slim_nets.__all__:
            _sys.modules.setdefault(f"{prefix}.{sub}", getattr(_slim_nets, sub))


_slim_nets_paths()

contrib.tensorboard = _namespace(
    "contrib.tensorboard",
    "tf.contrib.tensorboard: plugins.projector (TensorBoard's).",
    {
        "plugins": _namespace(
            "contrib.tensorboard.plugins",
            "tf.contrib.tensorboard.plugins: projector (TensorBoard's projector plugin).",
            {"__getattr__": _projector},
        )
    },
)


# ---- WP2: indexing, scatter, segments, sets, shape ops ------------------------------------------

for _k in (
    "bincount",
    "invert_permutation",
    "segment_max",
    "segment_mean",
    "segment_min",
    "segment_prod",
    "segment_sum",
    "unsorted_segment_max",
    "unsorted_segment_mean",
    "unsorted_segment_min",
    "unsorted_segment_prod",
    "unsorted_segment_sum",
):
    setattr(math, _k, getattr(_hb, _k))
for _k in ("space_to_depth", "depth_to_space"):
    if not hasattr(nn, _k):
        setattr(nn, _k, getattr(_hb, _k))
manip = _namespace(
    "manip",
    "TF1's tf.manip: roll, gather_nd/scatter_nd, space/batch moves, reshape, reverse, tile.",
    _pick(
        "batch_to_space_nd",
        "gather_nd",
        "reshape",
        "reverse",
        "roll",
        "scatter_nd",
        "space_to_batch_nd",
        "tile",
    ),
)
del _k


# ---- tf.gfile -------------------------------------------------------------------------------

from . import gfile  # noqa: E402

io = _namespace("io", "TF1's tf.io (its gfile).", {"gfile": gfile})


# ---- tf.app and tf.flags -------------------------------------------------------------------

from . import flags  # noqa: E402 - after the names copied from hetbed, which has no `flags`

app = _namespace("app", "TF1's tf.app: run() and flags.", {"run": flags.run, "flags": flags})


# ---- TF2 switches: hetbed is graph mode only -----------------------------------------------


def disable_v2_behavior() -> None:
    """Does nothing: hetbed always has TF1 behavior."""


def disable_eager_execution() -> None:
    """Does nothing: hetbed always builds graphs."""


def enable_v2_behavior() -> None:
    raise NotImplementedError("hetbed implements TF1's graph mode only")


def enable_eager_execution(*args: _Any, **kwargs: _Any) -> None:
    raise NotImplementedError("hetbed has no eager execution; build a graph and run a Session")


def executing_eagerly() -> bool:
    return False


# ---- tf.logging --------------------------------------------------------------------------

_logger = _pylogging.getLogger("hetbed")


class _StderrHandler(_pylogging.StreamHandler):
    """TF1's handler of its logger: each record as ``INFO:tensorflow:message`` (here
    ``INFO:hetbed:``) on the stderr of the moment."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(_pylogging.Formatter(_pylogging.BASIC_FORMAT))

    @property  # type: ignore[override]
    def stream(self):
        import sys

        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def _set_verbosity(level: int) -> None:
    """As TF1's: the level of the logger, whose records then print on stderr (TF1's logger has
    its own handler unless the root logger has one: ``tf.logging.set_verbosity(INFO)`` shows
    a program's ``tf.logging.info`` lines; Python's logging alone would print warnings only)."""
    _logger.setLevel(level)
    # as TF1's: no handler of its own when the root logger has one (no line printed twice)
    if not _pylogging.getLogger().handlers and not any(
        isinstance(h, _StderrHandler) for h in _logger.handlers
    ):
        _logger.addHandler(_StderrHandler())


logging = _namespace(
    "logging",
    "TF1's tf.logging over Python's logging (logger 'hetbed').",
    {
        "DEBUG": _pylogging.DEBUG,
        "INFO": _pylogging.INFO,
        "WARN": _pylogging.WARNING,
        "WARNING": _pylogging.WARNING,
        "ERROR": _pylogging.ERROR,
        "FATAL": _pylogging.FATAL,
        "set_verbosity": _set_verbosity,
        "get_verbosity": _logger.getEffectiveLevel,
        "debug": _logger.debug,
        "info": _logger.info,
        "warn": _logger.warning,
        "warning": _logger.warning,
        "error": _logger.error,
        "fatal": _logger.critical,
        "log": _logger.log,
    },
)


# ---- WP5: string tensors and file readers: tf.strings, tf.io, tf.sparse ----------------------

from hetbed.runtime.ops import strings as _strings  # noqa: E402

strings = _namespace(
    "strings",
    "TF1's tf.strings: string ops over string tensors (CPU only).",
    {
        "split": _strings.strings_split,
        "length": _strings.string_length,
        "join": _strings.string_join,
        "reduce_join": _strings.reduce_join,
        "regex_replace": _strings.regex_replace,
        "substr": _strings.substr,
        "to_number": _strings.string_to_number,
        "as_string": _strings.as_string,
        "format": None,
    },
)
for _k, _v in {
    "decode_csv": _strings.decode_csv,
    "decode_raw": _strings.decode_raw,
    "read_file": _strings.read_file,
    "write_file": _strings.write_file,
    "matching_files": _strings.matching_files,
}.items():
    setattr(io, _k, _v)
from hetbed.runtime.ops import image_codecs as _codecs  # noqa: E402

for _k in _codecs.__all__:  # tf.io.decode_jpeg etc. (also tf.image.*)
    setattr(io, _k, getattr(_codecs, _k))
from hetbed.runtime.ops import hashing as _hashing  # noqa: E402
from hetbed.runtime.ops import sparse as _sparse  # noqa: E402

sparse = _namespace(
    "sparse",
    "TF1's tf.sparse: SparseTensor and the ops hetbed has on it (runtime/ops/sparse.py).",
    {
        "SparseTensor": _sparse.SparseTensor,
        "SparseTensorValue": _sparse.SparseTensorValue,
        "to_dense": _sparse.sparse_tensor_to_dense,
        "from_dense": _sparse.from_dense,
        "placeholder": _sparse.sparse_placeholder,
        "add": _sparse.sparse_add,
        "concat": _sparse.sparse_concat,
        "reduce_sum": _sparse.sparse_reduce_sum,
        "reorder": _sparse.sparse_reorder,
        "reshape": _sparse.sparse_reshape,
        "retain": _sparse.sparse_retain,
        "transpose": _sparse.sparse_transpose,
        "matmul": _sparse.sparse_tensor_dense_matmul,
        "sparse_dense_matmul": _sparse.sparse_tensor_dense_matmul,
        "segment_sum": _sparse.sparse_segment_sum,
        "segment_mean": _sparse.sparse_segment_mean,
        "segment_sqrt_n": _sparse.sparse_segment_sqrt_n,
        "cross_hashed": _hashing.sparse_cross_hashed,
        "SparseConditionalAccumulator": _hb.SparseConditionalAccumulator,
    },
)
dtypes.string = _hb.string
from hetbed.runtime.ops import sparse_extra as _sparse_extra  # noqa: E402

for _k in _sparse_extra.__all__:  # tf.sparse_slice and tf.sparse.slice, ...
    globals()[_k] = getattr(_sparse_extra, _k)
    setattr(sparse, _k[len("sparse_") :], getattr(_sparse_extra, _k))
del sparse_expand_dims  # noqa: F821 - TF1 has only tf.sparse.expand_dims
del _k, _v
# ---- WP3: tf.math name of a new tf.nn activation ----
math.softsign = nn.softsign

del _name


# ---- WP4: tf.debugging, tf.math.is_nan/is_inf/is_finite ----------------------------------

debugging = _namespace(
    "debugging",
    "TF1's tf.debugging: check_numerics, the assert_* helpers and is_nan/is_inf/is_finite.",
    _pick(
        "Assert",
        "assert_equal",
        "assert_greater",
        "assert_greater_equal",
        "assert_integer",
        "assert_less",
        "assert_less_equal",
        "assert_negative",
        "assert_non_negative",
        "assert_non_positive",
        "assert_none_equal",
        "assert_positive",
        "assert_rank",
        "assert_rank_at_least",
        "assert_rank_in",
        "assert_same_float_dtype",
        "assert_scalar",
        "assert_type",
        "check_numerics",
        "is_finite",
        "is_inf",
        "is_nan",
        "is_numeric_tensor",
    )
    | {"assert_all_finite": _hb.verify_tensor_all_finite},
)
for _k in ("is_nan", "is_inf", "is_finite"):
    setattr(math, _k, getattr(_hb, _k))
del _k
# ---- WP1: math, reductions, linear algebra, clipping ----

from hetbed.runtime.ops import math_extra as _wp1_math  # noqa: E402

for _wp1_name in (
    "sin cos tan asin acos atan atan2 sinh cosh erf erfc lgamma digamma expm1 mod is_nan is_inf "
    "is_finite cumsum cumprod reduce_logsumexp count_nonzero accumulate_n"
).split():
    setattr(math, _wp1_name, getattr(_hb, _wp1_name))
math.reduce_std = _wp1_math.reduce_std
math.reduce_variance = _wp1_math.reduce_variance
math.top_k = _wp1_math.top_k

linalg = _namespace(
    "linalg",
    "TF1's tf.linalg: matrix products, decompositions, solves, diagonals and norms.",
    {
        "inv": _hb.matrix_inverse,
        "det": _hb.matrix_determinant,
        "cholesky": _hb.cholesky,
        "solve": _hb.matrix_solve,
        "triangular_solve": _hb.matrix_triangular_solve,
        "qr": _hb.qr,
        "svd": _hb.svd,
        "eigh": _hb.self_adjoint_eig,
        "eigvalsh": _hb.self_adjoint_eigvals,
        "matmul": _hb.matmul,
        "diag": _hb.matrix_diag,
        "diag_part": _hb.matrix_diag_part,
        "set_diag": _hb.matrix_set_diag,
        "trace": _hb.trace,
        "transpose": _hb.matrix_transpose,
        "band_part": _hb.matrix_band_part,
        "einsum": _hb.einsum,
        "tensordot": _hb.tensordot,
        "norm": _hb.norm,
        "eye": _hb.eye,
        "global_norm": _hb.global_norm,
    },
)
del _wp1_name
# ---- end WP1 ----


# ---- tf.contrib.data: the transformations that take a dataset ---------------------------------

contrib.data = _namespace(  # type: ignore[attr-defined]
    "contrib.data",
    "TF1's tf.contrib.data: tf.data.experimental's transformations and mixes.",
    {k: getattr(_hb.data.experimental, k) for k in _hb.data.experimental.__all__},
)


# ---- lookup tables: tf.contrib.lookup and tf.lookup ----------------------------------------

from hetbed.runtime.ops import lookup as _lookup  # noqa: E402

_tables = {
    k: getattr(_lookup, k)
    for k in (
        "HashTable",
        "StaticHashTable",
        "KeyValueTensorInitializer",
        "TextFileInitializer",
        "index_table_from_tensor",
        "index_table_from_file",
        "index_to_string_table_from_tensor",
        "index_to_string_table_from_file",
    )
}
contrib.lookup = _namespace(  # type: ignore[attr-defined]
    "contrib.lookup", "TF1's tf.contrib.lookup (lookup tables, runtime/ops/lookup.py).", _tables
)
lookup = _namespace("lookup", "TF1's tf.lookup (lookup tables).", _tables)


# ---- tf.contrib.metrics (also slim.metrics) and slim.evaluation ------------------------------

from . import contrib_metrics as _contrib_metrics  # noqa: E402
from . import contrib_slim_evaluation as _slim_evaluation  # noqa: E402

contrib.metrics = _namespace(  # type: ignore[attr-defined]
    "contrib.metrics",
    "TF1's tf.contrib.metrics: streaming metrics and their aggregation (contrib_metrics.py).",
    {k: getattr(_contrib_metrics, k) for k in _contrib_metrics.__all__},
)
contrib.slim.metrics = contrib.metrics  # type: ignore[attr-defined]


def _filter_variables(
    var_list: _Any, include_patterns: _Any = None, exclude_patterns: _Any = None,
    reg_search: _Any = True,
) -> list:  # fmt: skip
    """TF1's ``contrib.framework.filter_variables``: the variables whose names match one of
    ``include_patterns`` (all when None) and none of ``exclude_patterns`` (regular
    expressions, searched anywhere in the name, or matched at its start without
    ``reg_search``)."""
    import re as _re

    def hit(pattern: str, name: str) -> bool:
        found = _re.search(pattern, name) if reg_search else _re.match(pattern, name)
        return found is not None  # (this module's ``bool`` is tf.bool)

    out = []
    for v in var_list:
        name = v.op.name
        if include_patterns is not None and not any(hit(p, name) for p in include_patterns):
            continue
        if exclude_patterns is not None and any(hit(p, name) for p in exclude_patterns):
            continue
        out.append(v)
    return out


for _k, _v in {**_slim_variables, "filter_variables": _filter_variables}.items():
    setattr(contrib.framework, _k, _v)

from . import contrib_norm as _contrib_norm  # noqa: E402
from . import contrib_slim_data as _slim_data  # noqa: E402


def _slim_data_ns(name: str, doc: str, keys: tuple) -> _types.ModuleType:
    return _namespace(f"contrib.slim.{name}", doc, {k: getattr(_slim_data, k) for k in keys})


_slim_data_modules = {
    "dataset": _slim_data_ns("dataset", "slim's Dataset description.", ("Dataset",)),
    "data_decoder": _slim_data_ns("data_decoder", "slim's DataDecoder.", ("DataDecoder",)),
    "data_provider": _slim_data_ns("data_provider", "slim's DataProvider.", ("DataProvider",)),
    "dataset_data_provider": _slim_data_ns(
        "dataset_data_provider", "slim's DatasetDataProvider.", ("DatasetDataProvider",)
    ),
    "parallel_reader": _slim_data_ns(
        "parallel_reader",
        "slim's parallel readers feeding one common queue.",
        ("ParallelReader", "parallel_read", "single_pass_read", "get_data_files"),
    ),
    "prefetch_queue": _slim_data_ns(
        "prefetch_queue", "slim's prefetch_queue.", ("prefetch_queue",)
    ),
    "queues": _slim_data_ns(
        "queues", "slim's QueueRunners context.", ("QueueRunners", "NestedQueueRunnerError")
    ),
    "tfexample_decoder": _slim_data_ns(
        "tfexample_decoder",
        "slim's TFExampleDecoder and item handlers.",
        (
            "ItemHandler", "ItemHandlerCallback", "BoundingBox", "Tensor", "LookupTensor",
            "BackupHandler", "SparseTensor", "Image", "BoundingBoxSequence",
            "NumBoxesSequence", "KeypointsSequence", "TFExampleDecoder",
            "TFSequenceExampleDecoder",
        ),
    ),
}  # fmt: skip
for _k, _v in _slim_data_modules.items():
    setattr(contrib.slim, _k, _v)
contrib.slim.data = _namespace(  # type: ignore[attr-defined]
    "contrib.slim.data", "slim's data pipeline (contrib_slim_data.py).", _slim_data_modules
)
contrib.slim.create_global_step = train.create_global_step  # type: ignore[attr-defined]
contrib.slim.get_or_create_global_step = train.get_or_create_global_step  # type: ignore[attr-defined]

for _k in _contrib_norm.__all__:  # (instance_norm, group_norm, ...: slim's too)
    setattr(contrib.layers, _k, getattr(_contrib_norm, _k))
    setattr(contrib.slim, _k, getattr(_contrib_norm, _k))
for _k in _cl.SUMMARIES:  # (contrib.layers' summaries: slim's too)
    setattr(contrib.slim, _k, getattr(_cl, _k))

from hetbed.runtime.ops import audio as _audio  # noqa: E402

from . import contrib_opt as _contrib_opt  # noqa: E402

audio = _namespace(
    "audio",
    "TF's tf.audio: decode_wav and encode_wav (runtime/ops/audio.py).",
    {"decode_wav": _audio.decode_wav, "encode_wav": _audio.encode_wav},
)
_audio_ops = _namespace(
    "contrib.framework.python.ops.audio_ops",
    "TF1's audio ops (contrib.framework.python.ops.audio_ops, gen_audio_ops): WAV files, "
    "audio_spectrogram and mfcc (runtime/ops/audio.py).",
    {k: getattr(_audio, k) for k in _audio.__all__},
)
contrib.framework.python = _namespace(  # type: ignore[attr-defined]
    "contrib.framework.python",
    "tf.contrib.framework.python: its ops modules.",
    {"ops": _namespace("contrib.framework.python.ops", "audio_ops.", {"audio_ops": _audio_ops})},
)

contrib.opt = _namespace(  # type: ignore[attr-defined]
    "contrib.opt",
    "TF1's tf.contrib.opt: LazyAdam, decoupled weight decay, Nadam (contrib_opt.py).",
    {k: getattr(_contrib_opt, k) for k in _contrib_opt.__all__},
)
contrib.slim.evaluation = _namespace(  # type: ignore[attr-defined]
    "contrib.slim.evaluation",
    "slim's evaluation: evaluate_once and evaluation_loop (contrib_slim_evaluation.py).",
    {k: getattr(_slim_evaluation, k) for k in _slim_evaluation.__all__},
)


# ---- TFRecord files and tf.train.Example (runtime/ops/records.py) ----------------------------

from hetbed.runtime.ops import records as _records  # noqa: E402

for _k in ("Example", "Features", "Feature", "BytesList", "FloatList", "Int64List"):
    setattr(train, _k, getattr(_records, _k))
parse_single_example = _records.parse_single_example
parse_example = _records.parse_example
FixedLenFeature = _records.FixedLenFeature
VarLenFeature = _records.VarLenFeature
python_io = _namespace(
    "python_io",
    "TF1's tf.python_io: TFRecord files.",
    {"TFRecordWriter": _records.TFRecordWriter, "tf_record_iterator": _records.tf_record_iterator},
)
for _k in ("TFRecordWriter", "tf_record_iterator", "parse_single_example", "parse_example"):
    setattr(io, _k, getattr(_records, _k))
io.FixedLenFeature, io.VarLenFeature = _records.FixedLenFeature, _records.VarLenFeature


# ---- tf.python: the private modules TF1 programs import from ------------------------------

from . import contrib_seq2seq as _s2s  # noqa: E402
from . import contrib_seq2seq_attention as _s2s_att  # noqa: E402
from . import contrib_seq2seq_beam as _s2s_beam  # noqa: E402
from . import python  # noqa: E402, F401

contrib.seq2seq = _namespace(  # type: ignore[attr-defined]
    "contrib.seq2seq",
    "TF1's tf.contrib.seq2seq: sequence_loss, the helpers, BasicDecoder, dynamic_decode, the "
    "attention mechanisms and AttentionWrapper, BeamSearchDecoder, tile_batch, gather_tree.",
    {"sequence_loss": _contrib_training.sequence_loss}
    | {k: getattr(m, k) for m in (_s2s, _s2s_att, _s2s_beam) for k in m.__all__},
)
from hetbed.runtime.ops.linalg import cross  # noqa: E402

linalg.cross = cross  # type: ignore[attr-defined]


# ---- WP7: tf.strings.to_hash_bucket*, SequenceExample parsing -------------------------------------

strings.to_hash_bucket = _hb.string_to_hash_bucket  # type: ignore[attr-defined]
from hetbed.runtime.ops import strings_extra as _strings_extra  # noqa: E402

for _k in _strings_extra.__all__:
    setattr(strings, _k, getattr(_strings_extra, _k))
encode_base64, decode_base64 = _strings_extra.encode_base64, _strings_extra.decode_base64
io.encode_base64, io.decode_base64 = encode_base64, decode_base64  # type: ignore[attr-defined]
strings.to_hash_bucket_fast = _hb.string_to_hash_bucket_fast  # type: ignore[attr-defined]
strings.to_hash_bucket_strong = _hb.string_to_hash_bucket_strong  # type: ignore[attr-defined]
for _k in ("SequenceExample", "FeatureList", "FeatureLists"):
    setattr(train, _k, getattr(_records, _k))
parse_single_sequence_example = _records.parse_single_sequence_example
FixedLenSequenceFeature = _records.FixedLenSequenceFeature
io.parse_single_sequence_example = _records.parse_single_sequence_example
io.FixedLenSequenceFeature = _records.FixedLenSequenceFeature
del _k
from hetbed.runtime.rnn_cell import LayerNormBasicLSTMCell as _LNLSTM  # noqa: E402

contrib.rnn.LayerNormBasicLSTMCell = _LNLSTM  # type: ignore[attr-defined]
from hetbed.runtime import rnn_cell_extra as _rnn_extra  # noqa: E402

for _k in _rnn_extra.__all__:
    setattr(contrib.rnn, _k, getattr(_rnn_extra, _k))
nn.rnn_cell.DeviceWrapper = _rnn_extra.DeviceWrapper  # type: ignore[attr-defined]
from . import contrib_rnn_research as _rnn_research  # noqa: E402

for _k in _rnn_research.__all__:
    setattr(contrib.rnn, _k, getattr(_rnn_research, _k))
from hetbed.runtime.ops import image_transform as _img_tf  # noqa: E402

from . import contrib_image_warp as _img_warp  # noqa: E402
from . import contrib_legacy_seq2seq as _legacy_s2s  # noqa: E402

_image_ops = _namespace(
    "contrib.image.python.ops.image_ops",
    "TF1's contrib image ops (the module object_detection imports).",
    {k: getattr(_img_tf, k) for k in _img_tf.__all__},
)
contrib.image = _namespace(  # type: ignore[attr-defined]
    "contrib.image",
    "TF1's tf.contrib.image: projective transforms (rotate, translate, transform), "
    "bipartite_match, and the warps (dense_image_warp, interpolate_spline, sparse_image_warp).",
    {k: getattr(_img_tf, k) for k in _img_tf.__all__}
    | {k: getattr(_img_warp, k) for k in ("dense_image_warp", "interpolate_spline")}
    | {"sparse_image_warp": _img_warp.sparse_image_warp}
    | {
        "python": _namespace(
            "contrib.image.python",
            "",
            {"ops": _namespace("contrib.image.python.ops", "", {"image_ops": _image_ops})},
        )
    },
)

contrib.legacy_seq2seq = _namespace(  # type: ignore[attr-defined]
    "contrib.legacy_seq2seq",
    "TF1's tf.contrib.legacy_seq2seq: list-of-steps seq2seq models and losses.",
    {k: getattr(_legacy_s2s, k) for k in _legacy_s2s.__all__},
)
# ---- end WP7 ----

from . import contrib_factorization as _contrib_fact  # noqa: E402

contrib.factorization = _namespace(  # type: ignore[attr-defined]
    "contrib.factorization",
    "TF1's tf.contrib.factorization: the KMeans graph (contrib_factorization.py).",
    {k: getattr(_contrib_fact, k) for k in _contrib_fact.__all__},
)
from hetbed.estimator_kmeans import KMeansClustering as _KMeansClustering  # noqa: E402

contrib.factorization.KMeansClustering = _KMeansClustering  # type: ignore[attr-defined]
from hetbed.estimator_kmeans import GMM as _GMM  # noqa: E402

contrib.factorization.GMM = _GMM  # type: ignore[attr-defined]

# ---- the TF1 API version this layout follows -----------------------------------------------------
#: ``tf.__version__``: the TensorFlow 1.x API hetbed.compat.v1 follows (programs print and compare
#: it); hetbed's own version is ``hetbed.__version__``
__version__ = VERSION = "1.15.0"
GIT_VERSION = f"hetbed-{_hb.__version__}"
COMPILER_VERSION = "hetbed (Python)"
if "version" not in globals():
    version = _namespace(
        "version",
        "TF1's tf.version.",
        {"VERSION": VERSION, "GIT_VERSION": GIT_VERSION, "COMPILER_VERSION": COMPILER_VERSION},
    )
from hetbed.runtime.graph import Dimension, dimension_value  # noqa: E402

compat.dimension_value = dimension_value  # type: ignore[attr-defined]

#: TF 1.15.0's forward-compatibility horizon: its release day (TF moved the horizon daily, so a
#: check within days of it may answer differently from a given TF build)
_FORWARD_HORIZON = [_dt_mod.date(2019, 10, 16)]


def _forward_compatible(year: int, month: int, day: int) -> bool:
    """Whether graphs may use an op feature released on that day (``tf.compat``)."""
    return _FORWARD_HORIZON[0] > _dt_mod.date(year, month, day)


@_contextlib.contextmanager
def _forward_compatibility_horizon(year: int, month: int, day: int):
    old = _FORWARD_HORIZON[0]
    _FORWARD_HORIZON[0] = _dt_mod.date(year, month, day)
    try:
        yield
    finally:
        _FORWARD_HORIZON[0] = old


compat.forward_compatible = _forward_compatible  # type: ignore[attr-defined]
compat.forward_compatibility_horizon = _forward_compatibility_horizon  # type: ignore[attr-defined]


@_contextlib.contextmanager
def container(container_name: str):
    """TF1's ``tf.container``: resources made inside go in the named container (hetbed keeps
    one resource namespace per session, so only the scope is kept)."""
    yield container_name


contrib.learn = _namespace(  # type: ignore[attr-defined]
    "contrib.learn",
    "TF1's tf.contrib.learn: only the ModeKeys names programs compare modes with.",
    {
        "ModeKeys": _types.SimpleNamespace(TRAIN="train", EVAL="eval", INFER="infer"),
    },
)
contrib.framework.list_variables = train.list_variables  # type: ignore[attr-defined]
contrib.framework.load_checkpoint = train.load_checkpoint  # type: ignore[attr-defined]
contrib.framework.load_variable = train.load_variable  # type: ignore[attr-defined]


@_contextlib.contextmanager
def init_scope():
    """TF's ``init_scope`` in graph mode: ops made inside wait for no control dependencies
    (there are no function graphs to lift out of)."""
    with _hb.control_dependencies(None):
        yield


# ---- tf.contrib.losses (also slim.losses): tf.losses with contrib's argument order ---------------


def _contrib_losses() -> _types.ModuleType:
    from hetbed.runtime import losses as _l

    def softmax_cross_entropy(logits, onehot_labels, weights=1.0, label_smoothing=0, scope=None):
        return _l.softmax_cross_entropy(onehot_labels, logits, weights, label_smoothing, scope)

    def sparse_softmax_cross_entropy(logits, labels, weights=1.0, scope=None):
        return _l.sparse_softmax_cross_entropy(labels, logits, weights, scope)

    def sigmoid_cross_entropy(
        logits, multi_class_labels, weights=1.0, label_smoothing=0, scope=None
    ):
        return _l.sigmoid_cross_entropy(multi_class_labels, logits, weights, label_smoothing, scope)

    def mean_squared_error(predictions, labels=None, weights=1.0, scope=None):
        return _l.mean_squared_error(labels, predictions, weights, scope)

    def absolute_difference(predictions, labels=None, weights=1.0, scope=None):
        return _l.absolute_difference(labels, predictions, weights, scope)

    def log_loss(predictions, labels=None, weights=1.0, epsilon=1e-7, scope=None):
        return _l.log_loss(labels, predictions, weights, epsilon, scope)

    def hinge_loss(logits, labels=None, scope=None):
        return _l.hinge_loss(labels, logits, scope=scope)

    def get_total_loss(add_regularization_losses=True, name="total_loss"):
        return _l.get_total_loss(add_regularization_losses, name)

    names = {
        f.__name__: f
        for f in (
            softmax_cross_entropy,
            sparse_softmax_cross_entropy,
            sigmoid_cross_entropy,
            mean_squared_error,
            absolute_difference,
            log_loss,
            hinge_loss,
            get_total_loss,
        )
    }
    names.update(
        add_loss=_l.add_loss,
        get_losses=_l.get_losses,
        get_regularization_losses=_l.get_regularization_losses,
        compute_weighted_loss=_l.compute_weighted_loss,
    )
    return _namespace(
        "contrib.losses", "TF1's tf.contrib.losses: tf.losses with contrib's argument order.", names
    )


contrib.losses = _contrib_losses()  # type: ignore[attr-defined]
contrib.slim.losses = contrib.losses  # type: ignore[attr-defined]
from . import contrib_metric_learning as _metric_learning  # noqa: E402

contrib.losses.metric_learning = _namespace(  # type: ignore[attr-defined]
    "contrib.losses.metric_learning",
    "TF1's tf.contrib.losses.metric_learning (contrib_metric_learning.py).",
    {k: getattr(_metric_learning, k) for k in _metric_learning.__all__},
)
contrib.losses.python = _namespace(  # type: ignore[attr-defined]
    "contrib.losses.python",
    "tensorflow.contrib.losses.python: metric_learning.metric_loss_ops.",
    {
        "metric_learning": _namespace(
            "contrib.losses.python.metric_learning",
            "",
            {"metric_loss_ops": contrib.losses.metric_learning},  # type: ignore[attr-defined]
        )
    },
)

# ---- tf.contrib.training.HParams ---------------------------------------------------------------

import builtins as _builtins  # noqa: E402


class _HParams:
    """TF1's ``tf.contrib.training.HParams``: named hyperparameters as attributes
    (``HParams(n_layer=12)``, ``add_hparam``, ``set_hparam``, ``override_from_dict``, ``values``,
    ``parse("a=1,b=x")`` converting to each value's type, ``to_json``)."""

    def __init__(self, hparam_def: _Any = None, model_structure: _Any = None, **kwargs: _Any):
        self._names: list[str] = []
        for k, v in kwargs.items():
            self.add_hparam(k, v)

    def add_hparam(self, name: str, value: _Any) -> None:
        if name in self._names or name.startswith("_") or hasattr(type(self), name):
            raise ValueError(f"HParams: hyperparameter name {name!r} is taken")
        self._names.append(name)
        setattr(self, name, value)

    def set_hparam(self, name: str, value: _Any) -> None:
        if name not in self._names:
            raise ValueError(f"HParams: unknown hyperparameter {name!r}")
        setattr(self, name, value)

    def del_hparam(self, name: str) -> None:
        if name in self._names:
            self._names.remove(name)
            delattr(self, name)

    def override_from_dict(self, values_dict: dict) -> _HParams:
        for k, v in values_dict.items():
            self.set_hparam(k, v)
        return self

    def values(self) -> dict:
        return {k: getattr(self, k) for k in self._names}

    def parse(self, values: str) -> _HParams:
        for item in filter(None, (s.strip() for s in values.split(","))):
            name, sep, text = item.partition("=")
            if not sep or name not in self._names:
                raise ValueError(f"HParams.parse: cannot parse {item!r}")
            old = getattr(self, name)
            if isinstance(old, _builtins.bool):  # (tf.bool is a dtype here)
                value: _Any = text.strip().lower() in ("true", "1")
            elif isinstance(old, (_builtins.int, _builtins.float)):
                value = type(old)(text)
            else:
                value = text
            self.set_hparam(name, value)
        return self

    def to_json(self, indent: _Any = None, separators: _Any = None, sort_keys: bool = False) -> str:
        import json as _json

        return _json.dumps(self.values(), indent=indent, separators=separators, sort_keys=sort_keys)

    def parse_json(self, values_json: str) -> _HParams:
        import json as _json

        return self.override_from_dict(_json.loads(values_json))

    def __contains__(self, name: str) -> bool:
        return name in self._names

    def __repr__(self) -> str:
        return f"HParams({self.values()!r})"


_HParams.__name__ = _HParams.__qualname__ = "HParams"
contrib.training = _namespace(  # type: ignore[attr-defined]
    "contrib.training",
    "TF1's tf.contrib.training: HParams, multiply_gradients.",
    {"HParams": _HParams, "multiply_gradients": _contrib_training.multiply_gradients},
)

#: TF1's ``tf.newaxis`` (``x[:, tf.newaxis]``), numpy's None
newaxis = None


# ---- TF1's other names for what hetbed has, and small functions TF1 programs call ----------
double = _hb.float64
half = _hb.float16
all_variables = _hb.global_variables
initialize_local_variables = _hb.local_variables_initializer
initialize_variables = _hb.variables_initializer
initialize_all_tables = _hb.tables_initializer
reverse_v2 = _hb.reverse
in_top_k = nn.in_top_k


def model_variables(scope: str | None = None) -> list:
    """The variables of the MODEL_VARIABLES collection (under ``scope``)."""
    return _hb.get_collection(_hb.GraphKeys.MODEL_VARIABLES, scope)


def moving_average_variables(scope: str | None = None) -> list:
    """The variables of the MOVING_AVERAGE_VARIABLES collection (under ``scope``)."""
    return _hb.get_collection(_hb.GraphKeys.MOVING_AVERAGE_VARIABLES, scope)


def to_double(x: _Any, name: str = "ToDouble") -> _Any:
    return _hb.cast(x, _hb.float64, name=name)


def log_sigmoid(x: _Any, name: str | None = None) -> _Any:
    """log(1 / (1 + exp(-x))) = -softplus(-x), stable for large |x|, as TF1's."""
    return _hb.negative(nn.softplus(_hb.negative(x)), name=name or "LogSigmoid")


def div_no_nan(x: _Any, y: _Any, name: str | None = None) -> _Any:
    """x / y, 0 where y is 0 (its gradient too), as TF1's."""
    x = _hb.convert_to_tensor(x)
    y = _hb.convert_to_tensor(y, dtype=x.dtype)
    zero = _hb.equal(y, _hb.zeros_like(y))
    q = _hb.divide(x, _hb.where(zero, _hb.ones_like(y), y))
    return _hb.where(
        _hb.logical_or(zero, _hb.zeros_like(q, dtype=_hb.bool_)),
        _hb.zeros_like(q),
        q,
        name=name or "div_no_nan",
    )


def is_tensor(x: _Any) -> bool:
    """Whether ``x`` is a graph tensor (a Tensor, SparseTensor or Variable), as TF1's."""
    return isinstance(x, (_hb.Tensor, _hb.SparseTensor, _hb.Variable))


def no_regularizer(_: _Any) -> None:
    """TF1's regularizer that regularizes nothing."""
    return None


def confusion_matrix(
    labels: _Any,
    predictions: _Any,
    num_classes: _Any = None,
    dtype: _Any = None,
    name: str | None = None,
    weights: _Any = None,
) -> _Any:
    """TF1's: a [n, n] matrix counting (or summing ``weights`` over) each (label, prediction)
    pair, labels along the rows; n = ``num_classes``, or one more than the largest label or
    prediction."""
    dtype = _hb.int32 if dtype is None else dtype
    with _hb.name_scope(name or "confusion_matrix"):
        lab = _hb.cast(labels, _hb.int64)
        pred = _hb.cast(predictions, _hb.int64)
        if num_classes is None:
            n = _hb.maximum(_hb.reduce_max(lab), _hb.reduce_max(pred)) + 1
        else:
            n = _hb.cast(num_classes, _hb.int64)
        w = _hb.ones_like(lab, dtype=dtype) if weights is None else _hb.cast(weights, dtype)
        flat = _hb.unsorted_segment_sum(w, lab * n + pred, n * n)
        return _hb.reshape(flat, _hb.stack([n, n]))


math.divide_no_nan = div_no_nan
math.log_sigmoid = log_sigmoid
math.in_top_k = nn.in_top_k
math.l2_normalize = nn.l2_normalize
math.confusion_matrix = confusion_matrix


def __getattr__(name: str) -> _Any:
    """TF1's ``tf.Summary`` (and ``tf.SummaryMetadata``, ``tf.Event``, ``tf.GraphDef``,
    ``tf.NodeDef``): TensorBoard's protos, imported when first asked for."""
    if name in ("Summary", "SummaryMetadata"):
        from tensorboard.compat.proto import summary_pb2

        return getattr(summary_pb2, name)
    if name == "Event":
        from tensorboard.compat.proto import event_pb2

        return event_pb2.Event
    if name in ("GraphDef", "NodeDef"):
        from tensorboard.compat.proto import graph_pb2, node_def_pb2

        return graph_pb2.GraphDef if name == "GraphDef" else node_def_pb2.NodeDef
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---- tf.keras (hetbed/keras/) -------------------------------------------------------------------

from hetbed import keras  # noqa: E402


def _keras_paths() -> None:
    """``tensorflow.keras.layers`` and ``tensorflow.python.keras.layers`` (renamed to
    ``hetbed.compat.v1.keras.layers`` / ``hetbed.compat.v1.python.keras.layers``) importable."""
    import sys as _sys

    def alias(prefix: str, module: _types.ModuleType) -> None:
        _sys.modules.setdefault(prefix, module)
        for attr, value in vars(module).items():
            if isinstance(value, _types.ModuleType) and value.__name__.startswith(
                f"{module.__name__}."
            ):
                alias(f"{prefix}.{attr}", value)  # packages too: keras.preprocessing.sequence

    for prefix in (f"{__name__}.keras", f"{__name__}.python.keras"):
        alias(prefix, keras)
    python.keras = keras  # type: ignore[attr-defined]


_keras_paths()


def _importable(ns: _types.ModuleType) -> None:
    """Register ``ns`` and the namespaces under it in ``sys.modules``, so that TF1's import forms
    work with the package renamed: ``from hetbed.compat.v1.contrib import rnn`` for ``from
    tensorflow.contrib import rnn``, ``import hetbed.compat.v1.contrib.slim as slim``. A real
    submodule (a file of this package) keeps its own entry."""
    import sys as _sys

    for value in list(vars(ns).values()):
        if (
            isinstance(value, _types.ModuleType)
            and value.__name__.startswith(ns.__name__ + ".")
            and value.__name__.count(".") == ns.__name__.count(".") + 1
            and value.__name__ not in _sys.modules
        ):
            _sys.modules[value.__name__] = value
            _importable(value)


def _aliases() -> None:
    """``tf.nn``, ``tf.train``, ``tf.layers`` and the others this namespace takes from hetbed's
    own modules, importable under its name too (``from hetbed.compat.v1.nn import rnn_cell``
    for ``from tensorflow.nn import rnn_cell``)."""
    import sys as _sys

    this = _sys.modules[__name__]
    compat.v1 = this  # (tf.compat.v1.Session inside TF1 code run on compat.v1)
    _importable(this)
    for attr, value in list(vars(this).items()):
        key = f"{__name__}.{attr}"
        if not attr.startswith("_") and isinstance(value, _types.ModuleType):
            _sys.modules.setdefault(key, value)


_aliases()


# ---- tf.signal, tf.spectral and the FFTs ------------------------------------------------------

from hetbed.runtime.ops import spectral as _spectral  # noqa: E402

for _k in _spectral.__all__:
    globals()[_k] = getattr(_spectral, _k)
spectral = _namespace(
    "spectral",
    "TF1's tf.spectral: Fourier transforms (runtime/ops/spectral.py).",
    {k: getattr(_spectral, k) for k in _spectral.__all__},
)
from hetbed.runtime.ops import signal_ops as _signal_ops  # noqa: E402

spectral.dct = _signal_ops.dct  # type: ignore[attr-defined]
spectral.idct = _signal_ops.idct  # type: ignore[attr-defined]
signal = _namespace(
    "signal",
    "TF1's tf.signal: Fourier transforms (runtime/ops/spectral.py), framing, windows, STFT, "
    "mel matrices, MFCCs and DCTs (runtime/ops/signal_ops.py).",
    {k: getattr(_spectral, k) for k in _spectral.__all__}
    | {k: getattr(_signal_ops, k) for k in _signal_ops.__all__},
)
contrib.signal = signal  # type: ignore[attr-defined]
