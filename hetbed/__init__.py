"""hetbed: TensorFlow-style dataflow graphs whose devices can be real or simulated.

``import hetbed as hb`` gives the TF1-style API (``hb.placeholder``, ``hb.Session``, ``hb.nn``,
``hb.train``, ...); ``import hetbed.compat.v1 as tf`` gives the same names in TF1's layout.
"""

from hetbed import (
    data,
    distributions,
    estimator,
    graph_util,
    initializers,
    layers,
    losses,
    nest,
    nn,
    saved_model,
    sets,
    summary,
    train,
)
from hetbed.devices.naming import DeviceSpec
from hetbed.runtime import errors
from hetbed.runtime.control_flow import case, cond, foldl, foldr, map_fn, scan, while_loop
from hetbed.runtime.dtypes import (
    DType,
    as_dtype,
    bool_,
    complex64,
    complex128,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    uint8,
    uint16,
)
from hetbed.runtime.errors import OpError
from hetbed.runtime.gradients import IndexedSlices, IndexedSlicesValue, gradients
from hetbed.runtime.graph import (
    Graph,
    GraphKeys,
    NodeDef,
    Operation,
    Tensor,
    TensorShape,
    add_to_collection,
    colocate_with,
    control_dependencies,
    device,
    get_collection,
    get_collection_ref,
    get_default_graph,
    name_scope,
    reset_default_graph,
    set_random_seed,
)
from hetbed.runtime.graph_import import import_graph_def
from hetbed.runtime.initializers import (
    constant_initializer,
    glorot_normal_initializer,
    glorot_uniform_initializer,
    identity_initializer,
    ones_initializer,
    orthogonal_initializer,
    random_normal_initializer,
    random_uniform_initializer,
    truncated_normal_initializer,
    variance_scaling_initializer,
    zeros_initializer,
)
from hetbed.runtime.ops.array import (
    cast,
    constant,
    identity,
    placeholder,
    placeholder_with_default,
    rank,
    reshape,
    shape,
    size,
    stop_gradient,
    to_float,
    to_int32,
    to_int64,
)
from hetbed.runtime.ops.control import (
    Assert,
    assert_equal,
    assert_greater,
    assert_greater_equal,
    assert_less,
    assert_less_equal,
    assert_negative,
    assert_non_negative,
    assert_non_positive,
    assert_none_equal,
    assert_positive,
    group,
    no_op,
)
from hetbed.runtime.ops.control import tuple_ as tuple
from hetbed.runtime.ops.data_flow import (
    ConditionalAccumulator,
    FIFOQueue,
    PaddingFIFOQueue,
    QueueBase,
    RandomShuffleQueue,
)
from hetbed.runtime.ops.manip import (
    concat,
    expand_dims,
    fill,
    gather,
    indexed_slices_to_dense,
    one_hot,
    ones,
    pad,
    reverse,
    reverse_sequence,
    split,
    squeeze,
    stack,
    strided_slice,
    tile,
    transpose,
    unsorted_segment_sum,
    unstack,
    zeros,
)
from hetbed.runtime.ops.manip import range_ as range
from hetbed.runtime.ops.manip import slice_ as slice
from hetbed.runtime.ops.math import (
    abs,
    add,
    add_n,
    argmax,
    argmin,
    ceil,
    div,
    divide,
    equal,
    exp,
    floor,
    floordiv,
    floormod,
    greater,
    greater_equal,
    less,
    less_equal,
    log,
    log1p,
    logical_and,
    logical_not,
    logical_or,
    matmul,
    maximum,
    minimum,
    multiply,
    negative,
    not_equal,
    ones_like,
    pow,
    reciprocal,
    reduce_all,
    reduce_any,
    reduce_max,
    reduce_mean,
    reduce_min,
    reduce_prod,
    reduce_sum,
    rint,
    round,
    rsqrt,
    scalar_mul,
    sign,
    sqrt,
    square,
    squared_difference,
    subtract,
    truediv,
    where,
    zeros_like,
)
from hetbed.runtime.ops.nn import sigmoid, tanh
from hetbed.runtime.ops.random import (
    multinomial,
    random_normal,
    random_shuffle,
    random_uniform,
    truncated_normal,
)
from hetbed.runtime.ops.sparse_accumulator import SparseConditionalAccumulator
from hetbed.runtime.ops.state import (
    assign,
    assign_add,
    assign_sub,
    count_up_to,
    is_variable_initialized,
    scatter_add,
    scatter_sub,
    scatter_update,
)
from hetbed.runtime.partitioned import (
    PartitionedVariable,
    fixed_size_partitioner,
    min_max_variable_partitioner,
    variable_axis_size_partitioner,
)
from hetbed.runtime.registry import convert_to_tensor
from hetbed.runtime.serialize import (
    graph_from_dict,
    graph_to_dict,
    read_graph,
    to_dot,
    write_graph,
)
from hetbed.runtime.session import (
    ConfigProto,
    InteractiveSession,
    Session,
    get_default_session,
    register_session_kind,
)
from hetbed.runtime.tensor_array import TensorArray
from hetbed.runtime.timeline import RunMetadata, RunOptions
from hetbed.runtime.variable_scope import (
    AUTO_REUSE,
    VariableScope,
    get_local_variable,
    get_variable,
    get_variable_scope,
    make_template,
    variable_scope,
)
from hetbed.runtime.variables import (
    Variable,
    global_variables,
    global_variables_initializer,
    initialize_all_variables,
    local_variables,
    local_variables_initializer,
    report_uninitialized_variables,
    trainable_variables,
    variables_initializer,
)

# ---- WP5: string tensors, string ops and file readers ----
# isort: split
from hetbed.runtime.dtypes import string
from hetbed.runtime.ops.readers import (
    FixedLengthRecordReader,
    ReaderBase,
    TextLineReader,
    TFRecordReader,
    WholeFileReader,
)
from hetbed.runtime.ops.strings import (
    SparseTensor,
    SparseTensorValue,
    as_string,
    decode_csv,
    decode_raw,
    matching_files,
    read_file,
    reduce_join,
    regex_replace,
    sparse_tensor_to_dense,
    string_join,
    string_split,
    string_to_number,
    substr,
    write_file,
)

# ---- WP1: math, reductions, linear algebra, clipping ----
# isort: split
from hetbed.runtime.ops.linalg import (
    cholesky,
    diag,
    diag_part,
    einsum,
    eye,
    linspace,
    matrix_band_part,
    matrix_determinant,
    matrix_diag,
    matrix_diag_part,
    matrix_inverse,
    matrix_set_diag,
    matrix_solve,
    matrix_transpose,
    matrix_triangular_solve,
    qr,
    self_adjoint_eig,
    self_adjoint_eigvals,
    svd,
    tensordot,
    trace,
)
from hetbed.runtime.ops.linalg import linspace as lin_space
from hetbed.runtime.ops.math import floormod as mod
from hetbed.runtime.ops.math_extra import (
    accumulate_n,
    acos,
    argsort,
    asin,
    atan,
    atan2,
    clip_by_global_norm,
    clip_by_norm,
    cos,
    cosh,
    count_nonzero,
    cumprod,
    cumsum,
    digamma,
    erf,
    erfc,
    expm1,
    global_norm,
    is_finite,
    is_inf,
    is_nan,
    lgamma,
    norm,
    reduce_logsumexp,
    sin,
    sinh,
    sort,
    tan,
)

# ---- end WP1 ----

bool = bool_  # noqa: A001 - TF's name
sub = subtract
mul = multiply
neg = negative

# ---- WP3: nn and image ops (tf.image, tf.random_crop) ----
from hetbed import image  # noqa: E402
from hetbed.runtime.ops.image import random_crop  # noqa: E402


def list_devices(config: ConfigProto | None = None) -> list:
    """The devices a Session with ``config`` would have in this process."""
    from hetbed.devices import local_devices

    return local_devices(config)


__version__ = "0.1.0"

# ---- WP2: indexing, scatter, segments, sets, shape ops ----
# isort: split
from hetbed.runtime.ops.dynamic import dynamic_partition, dynamic_stitch  # noqa: E402
from hetbed.runtime.ops.scatter import (  # noqa: E402
    gather_nd,
    scatter_div,
    scatter_max,
    scatter_min,
    scatter_mul,
    scatter_nd,
    scatter_nd_add,
    scatter_nd_sub,
    scatter_nd_update,
    tensor_scatter_nd_add,
    tensor_scatter_nd_sub,
    tensor_scatter_nd_update,
)
from hetbed.runtime.ops.segments import (  # noqa: E402
    bincount,
    boolean_mask,
    histogram_fixed_width,
    invert_permutation,
    searchsorted,
    segment_max,
    segment_mean,
    segment_min,
    segment_prod,
    segment_sum,
    setdiff1d,
    unique,
    unique_with_counts,
    unsorted_segment_max,
    unsorted_segment_mean,
    unsorted_segment_min,
    unsorted_segment_prod,
)
from hetbed.runtime.ops.shape_ops import (  # noqa: E402
    batch_to_space,
    batch_to_space_nd,
    broadcast_dynamic_shape,
    broadcast_static_shape,
    broadcast_to,
    depth_to_space,
    meshgrid,
    roll,
    sequence_mask,
    shape_n,
    space_to_batch,
    space_to_batch_nd,
    space_to_depth,
)

tensor_scatter_update = tensor_scatter_nd_update
tensor_scatter_add = tensor_scatter_nd_add
tensor_scatter_sub = tensor_scatter_nd_sub
# ---- end WP2 ----
from hetbed.runtime.ops.math import where_v2  # noqa: E402


def _distributed_session() -> type:
    from hetbed.runtime.distributed.master import DistributedSession

    return DistributedSession


register_session_kind("grpc://", _distributed_session)  # hb.Session("grpc://host:port")

# ---- WP4: debugging ops, Python callbacks, tf.test, tf.metrics, config options ----
from hetbed import metrics, test  # noqa: E402
from hetbed.runtime.config_protos import (  # noqa: E402
    GPUOptions,
    GraphOptions,
    OptimizerOptions,
    RewriterConfig,
)
from hetbed.runtime.custom_gradient import (  # noqa: E402
    NotDifferentiable,
    RegisterGradient,
    custom_gradient,
    identity_n,
    no_gradient,
)
from hetbed.runtime.ops.debug import (  # noqa: E402
    Print,
    add_check_numerics_ops,
    assert_integer,
    assert_rank,
    assert_rank_at_least,
    assert_rank_in,
    assert_same_float_dtype,
    assert_scalar,
    assert_type,
    check_numerics,
    is_numeric_tensor,
    verify_tensor_all_finite,
)
from hetbed.runtime.ops.debug import print_ as print  # noqa: E402
from hetbed.runtime.ops.py_func import numpy_function, py_func, py_function  # noqa: E402

# ---- lookup tables ----
# isort: split
from hetbed.runtime.ops.lookup import tables_initializer  # noqa: E402
from hetbed.runtime.ops.math_extra import clip_by_average_norm  # noqa: E402
from hetbed.runtime.ops.sparse import (  # noqa: E402
    embedding_lookup_sparse,
    sparse_add,
    sparse_concat,
    sparse_placeholder,
    sparse_reduce_sum,
    sparse_reorder,
    sparse_reshape,
    sparse_retain,
    sparse_segment_mean,
    sparse_segment_sqrt_n,
    sparse_segment_sum,
    sparse_tensor_dense_matmul,
    sparse_to_dense,
    sparse_transpose,
)

# ---- WP7: edit distance, string hashing, SequenceExample parsing ----
# isort: split
from hetbed.runtime.ops.edit_distance import edit_distance  # noqa: E402
from hetbed.runtime.ops.hashing import (  # noqa: E402
    string_to_hash_bucket,
    string_to_hash_bucket_fast,
    string_to_hash_bucket_strong,
)

# ---- end WP7 ----

# ---- complex numbers ----
# isort: split
from hetbed.runtime.ops.complex_ops import angle, complex, conj, imag, real  # noqa: E402

# tf.feature_column (its constructors take hetbed's dtypes as defaults: imported last)
# isort: split
from hetbed import feature_column  # noqa: E402

# the objects the imports above created live as long as the process: no collection scans them
# isort: split
from hetbed.runtime.collector import freeze_imported  # noqa: E402

freeze_imported()
del freeze_imported
