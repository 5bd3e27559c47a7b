"""Sparse tensors (TF1 semantics): ``SparseTensor`` and the ops TF1 programs apply to it.

A SparseTensor is three tensors: int64 ``indices`` [N, rank], ``values`` [N] and int64
``dense_shape`` [rank]. Most ops here are compositions of dense ops on those parts (gathers,
scatters, segment sums), so their gradients with respect to ``values`` (and to a dense operand)
come from the dense ops' rules; three kernels do what has no dense equivalent: the product with a
dense matrix (``SparseTensorDenseMatMul``, with its gradient), the sum of two SparseTensors
(``SparseAdd`` and the kernel routing its gradient back, ``SparseAddGrad``) and the row-major
order of a set of indices (``SparseOrder``). Every kernel runs on the CPU.

As in TensorFlow: a product, a sum or a reduction takes the entries as they are (repeated
indices add up); ``sparse_add`` of two SparseTensors in row-major order and ``sparse_reorder``
give indices in row-major order, and ``sparse_add`` of entries out of order merges them in one
pass as TF's kernel does (keeping their order, an index repeated in one input kept repeated);
``SparseTensor * dense`` broadcasts the dense operand to the dense shape and keeps the sparse
operand's indices. Differences: ``sparse_reshape`` needs no ordering of its input (TensorFlow's
assumes it); shapes a SparseTensor's static ``dense_shape`` does not give are unknown until the
step runs.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import Tensor, TensorShape, get_default_graph
from ..registry import Cost, apply, apply_op, convert_to_tensor, defop
from .manip import _add_at

SparseTensorValue = namedtuple("SparseTensorValue", ["indices", "values", "dense_shape"])
SparseTensorValue.__doc__ = "A fetched SparseTensor: numpy indices, values and dense_shape."


class SparseTensor(namedtuple("SparseTensor", ["indices", "values", "dense_shape"])):
    """TF1's ``tf.SparseTensor``: int64 ``indices`` [N, rank], ``values`` [N] and int64
    ``dense_shape`` [rank]. Fetching one gives a ``SparseTensorValue``; ``sp * dense`` and
    ``sp / dense`` multiply or divide its values by the dense operand broadcast to its shape
    (a SparseTensor again). Other arithmetic refuses it, as TensorFlow does, rather than acting
    on the tuple it is here."""

    __slots__ = ()
    _value_type = SparseTensorValue

    def __new__(cls, indices: Any, values: Any, dense_shape: Any) -> SparseTensor:
        return super().__new__(
            cls,
            convert_to_tensor(indices, dtype=_dt.int64),
            convert_to_tensor(values),
            convert_to_tensor(dense_shape, dtype=_dt.int64),
        )

    @classmethod
    def from_value(cls, value: Any) -> SparseTensor:
        """A SparseTensor of constants from a SparseTensorValue (a SparseTensor as it is)."""
        if isinstance(value, SparseTensor):
            return value
        if isinstance(value, SparseTensorValue) or (isinstance(value, tuple) and len(value) == 3):
            return cls(*value)
        raise TypeError(f"SparseTensor.from_value: expected a SparseTensorValue, got {value!r}")

    @property
    def dtype(self) -> _dt.DType:
        return self.values.dtype

    @property
    def graph(self) -> Any:
        return self.values.graph

    @property
    def op(self) -> Any:
        return self.values.op

    @property
    def shape(self) -> TensorShape:
        """The static dense shape: what the graph knows of ``dense_shape``'s value."""
        return _static_shape(self.dense_shape)

    def get_shape(self) -> TensorShape:
        return self.shape

    def eval(self, feed_dict: Any = None, session: Any = None) -> SparseTensorValue:
        from ..session import get_default_session

        s = session or get_default_session()
        if s is None:
            raise ValueError("SparseTensor.eval: no session given and no default session")
        return s.run(self, feed_dict)

    def __mul__(self, other: Any) -> SparseTensor:
        return _cwise(self, other, "mul")

    def __truediv__(self, other: Any) -> SparseTensor:
        return _cwise(self, other, "div")

    __div__ = __truediv__

    # tuple arithmetic would concatenate or repeat the parts: refused, as TensorFlow refuses it
    def __add__(self, other: Any) -> Any:
        return NotImplemented

    def __radd__(self, other: Any) -> Any:
        return NotImplemented

    def __rmul__(self, other: Any) -> Any:
        return NotImplemented


def _as_sparse(sp: Any, fn: str, what: str = "sp_input") -> SparseTensor:
    if isinstance(sp, SparseTensorValue):
        return SparseTensor(*sp)
    if not isinstance(sp, SparseTensor):
        raise TypeError(f"{fn}: {what} must be a SparseTensor, got {type(sp).__name__} {sp!r}")
    return sp


def _static_dims(t: Tensor) -> list | None:
    """The value of the 1-D int64 tensor ``t`` as far as the graph knows it (ints and Nones)."""
    from .array import _shape_dims

    op = t.op
    if op.type == "PlaceholderWithDefault":  # sparse_placeholder's dense shape with a default
        t = op.inputs[0]
    dims = _shape_dims(t)
    if dims is not None:
        return [d if isinstance(d, int) else None for d in dims]
    return None


def _static_shape(dense_shape: Tensor) -> TensorShape:
    dims = _static_dims(dense_shape)
    if dims is not None:
        return TensorShape(dims)
    n = dense_shape.shape.dims[0] if dense_shape.shape.dims else None
    return TensorShape(None if n is None else [None] * n)


def _rank(sp: SparseTensor, fn: str) -> int:
    r = sp.shape.ndims
    if r is None and sp.indices.shape.ndims == 2:
        r = sp.indices.shape.dims[1]
    if r is None:
        raise InvalidArgumentError(
            f"{fn}: the SparseTensor's rank must be known to build the graph"
        )
    return r


def _fix_shape(t: Tensor, shape: TensorShape) -> Tensor:
    if shape.ndims is not None:
        t.set_shape(shape)
    return t


# ---- SparseToDense (also TF1's legacy sparse_to_dense) -------------------------------------------

SparseToDense = defop("SparseToDense")


@SparseToDense.shape
def _sparse_to_dense_shape(op):
    idx, shape, values, default = op.inputs
    if values.dtype != default.dtype:
        raise InvalidArgumentError(
            f"SparseToDense: default_value is {default.dtype.name}, values are {values.dtype.name}"
        )
    return [(_static_shape(shape), values.dtype)]


@SparseToDense.kernel("cpu")
def _sparse_to_dense(ctx, idx, shape, values, default):
    shape = tuple(int(d) for d in np.asarray(shape).reshape(-1))
    if any(d < 0 for d in shape):
        raise InvalidArgumentError(
            f"SparseToDense {ctx.op.name!r}: dense_shape {list(shape)} has a negative size"
        )
    out = np.empty(shape, dtype=values.dtype)
    out[...] = default
    idx = np.asarray(idx, dtype=np.int64)
    n = idx.shape[0] if idx.ndim == 2 else idx.size
    if idx.ndim == 2 and idx.shape[1] != len(shape):
        raise InvalidArgumentError(
            f"SparseToDense {ctx.op.name!r}: indices have {idx.shape[1]} columns for a dense "
            f"shape of rank {len(shape)}"
        )
    idx = idx.reshape(n, len(shape)) if n else idx.reshape(0, len(shape))
    if values.ndim and values.shape[0] != n:
        raise InvalidArgumentError(
            f"SparseToDense {ctx.op.name!r}: {values.shape[0]} values for {n} indices"
        )
    for d, size in enumerate(shape):
        if n and (idx[:, d].min() < 0 or idx[:, d].max() >= size):
            raise InvalidArgumentError(
                f"SparseToDense {ctx.op.name!r}: an index is outside dense_shape {list(shape)}"
            )
    if ctx.attrs.get("validate_indices") and n > 1:
        lin = np.ravel_multi_index(tuple(idx.T), shape) if shape else np.zeros(n, np.int64)
        step = np.diff(lin)
        if (step <= 0).any():
            k = int(np.argmax(step <= 0)) + 1
            what = "repeated" if step[k - 1] == 0 else "out of order"
            raise InvalidArgumentError(
                f"SparseToDense {ctx.op.name!r}: index {idx[k].tolist()} is {what} (indices must "
                "be sorted in row-major order and distinct; validate_indices=False skips this)"
            )
    out[tuple(idx.T)] = values
    return out


@SparseToDense.gradient
def _sparse_to_dense_grad(op, g):
    from .math import reduce_sum, subtract
    from .scatter import gather_nd

    idx, shape, values, default = op.inputs
    rank = shape.shape.dims[0] if shape.shape.dims else None
    if idx.shape.ndims == 2 or rank is None:
        at = idx
    else:  # TF1's sparse_to_dense: a 0-d or 1-d index list of a rank-1 result
        from .array import reshape

        at = reshape(idx, [-1, 1])
    g_values = gather_nd(g, at)
    if values.shape.ndims == 0:
        g_values = reduce_sum(g_values)
    return [None, None, g_values, subtract(reduce_sum(g), reduce_sum(g_values))]


def sparse_tensor_to_dense(
    sp_input: SparseTensor, default_value: Any = None, validate_indices: bool = True, name=None
) -> Tensor:
    """The dense tensor of ``sp_input``, ``default_value`` (0 or b"") where it has no value.
    Its gradient with respect to the values gathers the dense gradient at the indices."""
    sp = _as_sparse(sp_input, "sparse_tensor_to_dense")
    if default_value is None:
        default_value = b"" if sp.dtype.is_string else 0
    if sp.dtype.is_string:
        d = convert_to_tensor(default_value, dtype=_dt.string)
    else:
        d = convert_to_tensor(np.asarray(default_value, dtype=sp.dtype.np))
    return apply(
        "SparseToDense",
        [sp.indices, sp.dense_shape, sp.values, d],
        {"validate_indices": bool(validate_indices)},
        name=name or "SparseToDense",
    )


def sparse_to_dense(
    sparse_indices: Any,
    output_shape: Any,
    sparse_values: Any,
    default_value: Any = 0,
    validate_indices: bool = True,
    name: str | None = None,
) -> Tensor:
    """TF1's legacy ``tf.sparse_to_dense``: ``sparse_indices`` a scalar, a vector (positions of a
    vector result) or [N, rank]; ``sparse_values`` a scalar (the same everywhere) or [N]. With
    ``validate_indices`` the indices must be distinct and in row-major order."""
    v = convert_to_tensor(sparse_values)
    return apply(
        "SparseToDense",
        [
            convert_to_tensor(sparse_indices, dtype=_dt.int64),
            convert_to_tensor(output_shape, dtype=_dt.int64),
            v,
            convert_to_tensor(np.asarray(default_value, dtype=v.dtype.np)),
        ],
        {"validate_indices": bool(validate_indices)},
        name=name or "SparseToDense",
    )


def sparse_placeholder(dtype: Any, shape: Any = None, name: str | None = None) -> SparseTensor:
    """TF1's ``tf.sparse_placeholder``: a SparseTensor of three placeholders (``indices``,
    ``values``, ``dense_shape``) fed together with a SparseTensorValue (or a 3-tuple). A
    ``shape`` fully known (a list of ints, or a 1-D integer tensor) is the default of the dense
    shape, which may still be fed."""
    from .array import placeholder, placeholder_with_default

    with get_default_graph().name_scope(name or "SparsePlaceholder"):
        if isinstance(shape, Tensor):
            rank = shape.shape.dims[0] if shape.shape.dims else None
            from .array import cast

            default = shape if shape.dtype == _dt.int64 else cast(shape, _dt.int64)
            dense_shape = placeholder_with_default(default, [rank], name="shape")
        else:
            ts = None if shape is None else TensorShape(shape)
            rank = None if ts is None else ts.ndims
            if ts is not None and ts.is_fully_defined():
                dense_shape = placeholder_with_default(
                    np.asarray(ts.as_list(), np.int64), [rank], name="shape"
                )
            else:
                dense_shape = placeholder(_dt.int64, [rank], name="shape")
        return SparseTensor(
            placeholder(_dt.int64, [None, rank], name="indices"),
            placeholder(_dt.as_dtype(dtype), [None], name="values"),
            dense_shape,
        )


# ---- element-wise products with a dense operand ---------------------------------------------------


def _cwise(sp: SparseTensor, other: Any, kind: str) -> SparseTensor:
    """``sp`` times (or divided by) ``other`` broadcast to its dense shape, at its indices."""
    from .array import cast, reshape
    from .array import shape as shape_of
    from .math import divide, multiply, not_equal
    from .scatter import gather_nd

    if isinstance(other, SparseTensor):
        raise TypeError(
            f"SparseTensor {'*' if kind == 'mul' else '/'} SparseTensor is not defined; "
            "densify one operand (sparse_tensor_to_dense)"
        )
    d = other if isinstance(other, Tensor) else convert_to_tensor(other, dtype=sp.dtype)
    op = multiply if kind == "mul" else divide
    r = d.shape.ndims
    if r == 0 or (r is not None and d.shape.num_elements() == 1):
        factor = reshape(d, [])
    else:
        rank = sp.shape.ndims
        if rank is None and sp.indices.shape.ndims == 2:
            rank = sp.indices.shape.dims[1]
        if r is None or (rank is not None and r > rank):
            raise InvalidArgumentError(
                f"SparseTensor * dense: the dense operand's shape {d.shape} must broadcast to the "
                f"sparse one's rank {rank}"
            )
        if rank is None:
            # a sparse_placeholder without a shape (PetarV-/GAT's sparse attention): TF's
            # kernel broadcasts at run time; the dense operand's rank picks the last columns.
            cols = sp.indices[:, -r:]
        else:
            cols = sp.indices if r == rank else sp.indices[:, rank - r :]
        keep = cast(not_equal(shape_of(d, out_type=_dt.int64), 1), _dt.int64)
        factor = gather_nd(d, cols * keep)  # a dimension of size 1 broadcasts: index 0
    return SparseTensor(sp.indices, op(sp.values, factor), sp.dense_shape)


# ---- SparseTensorDenseMatMul --------------------------------------------------------------------

SparseTensorDenseMatMul = defop("SparseTensorDenseMatMul")


def _matmul_dims(adj: bool, rows: Any, cols: Any) -> tuple:
    return (cols, rows) if adj else (rows, cols)


@SparseTensorDenseMatMul.shape
def _sdmm_shape(op):
    idx, values, shape, b = op.inputs
    if values.dtype != b.dtype:
        raise InvalidArgumentError(
            f"SparseTensorDenseMatMul {op.name!r}: the sparse values are {values.dtype.name}, "
            f"the dense matrix {b.dtype.name}"
        )
    if b.shape.ndims not in (None, 2):
        raise InvalidArgumentError(
            f"SparseTensorDenseMatMul {op.name!r}: the dense operand must be a matrix, got shape "
            f"{b.shape}"
        )
    dims = _static_dims(shape)
    if dims is not None and len(dims) != 2:
        raise InvalidArgumentError(
            f"SparseTensorDenseMatMul {op.name!r}: the SparseTensor must be a matrix, got dense "
            f"shape {dims}"
        )
    a_rows, a_inner = _matmul_dims(op.attrs["adjoint_a"], *(dims or (None, None)))
    b_inner, b_cols = (None, None) if b.shape.dims is None else b.shape.dims
    b_inner, b_cols = _matmul_dims(op.attrs["adjoint_b"], b_inner, b_cols)
    if a_inner is not None and b_inner is not None and a_inner != b_inner:
        raise InvalidArgumentError(
            f"SparseTensorDenseMatMul {op.name!r}: inner dimensions differ: {a_inner} (sparse, "
            f"dense shape {dims}) and {b_inner} (dense, shape {b.shape})"
        )
    return [(TensorShape([a_rows, b_cols]), b.dtype)]


def _sdmm_parts(ctx, idx, shape, b):
    xp = ctx.xp
    idx = xp.asarray(idx, dtype=xp.int64).reshape(-1, 2)
    m, k = (int(d) for d in shape.reshape(-1).tolist())
    rows, cols = idx[:, 0], idx[:, 1]
    if ctx.attrs["adjoint_a"]:
        rows, cols, m, k = cols, rows, k, m
    bm = b.T if ctx.attrs["adjoint_b"] else b
    if bm.shape[0] != k:
        raise InvalidArgumentError(
            f"SparseTensorDenseMatMul {ctx.op.name!r}: the sparse matrix has {k} columns "
            f"(after its adjoint), the dense one {bm.shape[0]} rows"
        )
    if len(rows) and bool(
        (rows.min() < 0) | (rows.max() >= m) | (cols.min() < 0) | (cols.max() >= k)
    ):
        raise InvalidArgumentError(
            f"SparseTensorDenseMatMul {ctx.op.name!r}: an index is outside dense_shape "
            f"{shape.reshape(-1).tolist()}"
        )
    return rows, cols, m, bm


@SparseTensorDenseMatMul.kernel("cpu", "gpu")
def _sdmm(ctx, idx, values, shape, b):
    xp = ctx.xp
    rows, cols, m, bm = _sdmm_parts(ctx, idx, shape, b)
    out = xp.zeros((m, bm.shape[1]), dtype=b.dtype)
    if not len(rows):
        return out
    prod = values[:, None] * bm[cols]
    if xp is not np:
        _add_at(xp, out, rows, prod)
        return out
    # each row's entries summed in order (np.add.at is several times slower)
    if len(rows) > 1 and (rows[1:] < rows[:-1]).any():
        order = np.argsort(rows, kind="stable")
        rows, prod = rows[order], prod[order]
    starts = np.flatnonzero(np.concatenate([[True], rows[1:] != rows[:-1]]))
    out[rows[starts]] = np.add.reduceat(prod, starts, axis=0)
    return out


@SparseTensorDenseMatMul.cost
def _sdmm_cost(op, ins, outs):
    """Two FLOPs an entry and output column; each entry reads a row of the dense operand and
    adds into a row of the result."""
    nnz = ins[1][0] if ins[1] else 1
    n = outs[0][1] if len(outs[0]) == 2 else 1
    item = op.inputs[3].dtype.size
    out = float(np.prod(outs[0]))
    return Cost(2.0 * nnz * n, item * (2.0 * nnz * n + out), item * out)


@SparseTensorDenseMatMul.gradient
def _sdmm_grad(op, g):
    """d values[e] = sum_j g[row_e, j] b[col_e, j] (in the adjoints' terms); d b = A^T g."""
    from .manip import gather, transpose
    from .math import multiply, reduce_sum

    idx, values, shape, b = op.inputs
    adj_a, adj_b = op.attrs["adjoint_a"], op.attrs["adjoint_b"]
    rows, cols = idx[:, 0], idx[:, 1]
    if adj_a:
        rows, cols = cols, rows
    bm = transpose(b) if adj_b else b
    g_values = reduce_sum(multiply(gather(g, rows), gather(bm, cols)), axis=1)
    # A^T g is (k x n): the same kernel with the sparse operand's adjoint flipped
    g_b = apply(
        "SparseTensorDenseMatMul",
        [idx, values, shape, g],
        {"adjoint_a": not adj_a, "adjoint_b": False},
        name="SparseTensorDenseMatMulGrad",
    )
    return [None, g_values, None, transpose(g_b) if adj_b else g_b]


def sparse_tensor_dense_matmul(
    sp_a: Any,
    b: Any,
    adjoint_a: bool = False,
    adjoint_b: bool = False,
    name: str | None = None,
) -> Tensor:
    """The product of a rank-2 SparseTensor and a dense matrix (either adjoint: transposed),
    differentiable in the sparse values and in ``b``. Repeated indices add up."""
    sp = _as_sparse(sp_a, "sparse_tensor_dense_matmul", "sp_a")
    bt = b if isinstance(b, Tensor) else convert_to_tensor(b, dtype=sp.dtype)
    return apply(
        "SparseTensorDenseMatMul",
        [sp.indices, sp.values, sp.dense_shape, bt],
        {"adjoint_a": bool(adjoint_a), "adjoint_b": bool(adjoint_b)},
        name=name or "SparseTensorDenseMatMul",
    )


# ---- SparseOrder, reorder, transpose, reshape, concat ---------------------------------------------

SparseOrder = defop("SparseOrder", differentiable=False)


@SparseOrder.shape
def _sparse_order_shape(op):
    n = op.inputs[0].shape.dims[0] if op.inputs[0].shape.dims else None
    return [(TensorShape([n]), _dt.int64)]


@SparseOrder.kernel("cpu")
def _sparse_order(ctx, idx):
    idx = np.asarray(idx, dtype=np.int64)
    if idx.ndim != 2:
        raise InvalidArgumentError(f"SparseOrder {ctx.op.name!r}: indices must be [N, rank]")
    if idx.shape[1] == 0 or idx.shape[0] < 2:
        return np.arange(idx.shape[0], dtype=np.int64)
    return np.lexsort(idx.T[::-1]).astype(np.int64)  # row-major, stable among repeats


def _reordered(indices: Tensor, values: Tensor, dense_shape: Tensor) -> SparseTensor:
    """The entries in row-major order; the values' gradient is dense, as TF's SparseReorder's
    (gather_nd's, where gather's would be an IndexedSlices)."""
    from .manip import expand_dims, gather
    from .scatter import gather_nd

    order = apply("SparseOrder", [indices], name="SparseOrder")
    return SparseTensor(
        gather(indices, order), gather_nd(values, expand_dims(order, 1)), dense_shape
    )


def sparse_reorder(sp_input: Any, name: str | None = None) -> SparseTensor:
    """The same SparseTensor with its entries in row-major order of their indices."""
    sp = _as_sparse(sp_input, "sparse_reorder")
    with get_default_graph().name_scope(name or "SparseReorder"):
        out = _reordered(sp.indices, sp.values, sp.dense_shape)
    return out


def sparse_transpose(sp_input: Any, perm: Any = None, name: str | None = None) -> SparseTensor:
    """The SparseTensor with its dimensions permuted (``perm``: reversed by default), in
    row-major order."""
    from .manip import gather

    sp = _as_sparse(sp_input, "sparse_transpose")
    rank = _rank(sp, "sparse_transpose")
    p = list(range(rank))[::-1] if perm is None else [int(a) for a in perm]
    if sorted(p) != list(range(rank)):
        raise InvalidArgumentError(f"sparse_transpose: perm {p} is no permutation of {rank} axes")
    with get_default_graph().name_scope(name or "SparseTranspose"):
        pt = convert_to_tensor(np.asarray(p, np.int64))
        static = sp.shape
        if static.is_fully_defined():  # known: a constant, as TF folds it
            shape = convert_to_tensor(np.asarray([static.dims[a] for a in p], np.int64))
        else:
            shape = gather(sp.dense_shape, pt)
        out = _reordered(gather(sp.indices, pt, axis=1), sp.values, shape)
    return out


def _strides(dense_shape: Tensor) -> Tensor:
    from .math_extra import cumprod

    return cumprod(dense_shape, exclusive=True, reverse=True)


def sparse_reshape(sp_input: Any, shape: Any, name: str | None = None) -> SparseTensor:
    """The same entries in a dense shape of as many elements (one dimension may be -1); each
    keeps its row-major position."""
    from .math import equal, floordiv, floormod, maximum, reduce_prod, reduce_sum, where

    sp = _as_sparse(sp_input, "sparse_reshape")
    new = convert_to_tensor(shape, dtype=_dt.int64)
    if new.shape.ndims != 1 or new.shape.dims[0] is None:
        raise InvalidArgumentError(
            f"sparse_reshape: shape must be a vector of known length, got shape {new.shape}"
        )
    static, old = _static_dims(new), sp.shape
    if static is not None and static.count(-1) > 1:
        raise InvalidArgumentError(f"sparse_reshape: shape {static} has more than one -1")
    if static is not None and -1 in static and old.is_fully_defined():
        n, k = int(np.prod(old.as_list())), int(np.prod([d for d in static if d != -1]))
        if k == 0 or n % k:
            raise InvalidArgumentError(
                f"sparse_reshape: cannot reshape dense shape {old.as_list()} to {static}"
            )
        static[static.index(-1)] = n // k
    with get_default_graph().name_scope(name or "SparseReshape"):
        if static is not None and None not in static and -1 not in static:
            if old.is_fully_defined() and int(np.prod(static)) != int(np.prod(old.as_list())):
                raise InvalidArgumentError(
                    f"sparse_reshape: cannot reshape dense shape {old.as_list()} to {static}"
                )
            new = convert_to_tensor(np.asarray(static, np.int64))  # known: a constant
        else:  # -1 is what the other dimensions leave of the dense shape's size
            ones = new * 0 + 1
            known = reduce_prod(where(equal(new, -1), ones, new))
            rest = floordiv(reduce_prod(sp.dense_shape), maximum(known, 1))
            new = where(equal(new, -1), ones * rest, new)
        lin = reduce_sum(sp.indices * _strides(sp.dense_shape), axis=1, keepdims=True)
        out = SparseTensor(floormod(floordiv(lin, _strides(new)), new), sp.values, new)
    return out


def sparse_concat(
    axis: Any,
    sp_inputs: list,
    name: str | None = None,
    expand_nonconcat_dim: bool = False,
    concat_dim: Any = None,
    expand_nonconcat_dims: Any = None,
) -> SparseTensor:
    """The SparseTensors side by side along ``axis`` (their other dimensions equal, or with
    ``expand_nonconcat_dim`` the largest of each), in row-major order."""
    from .manip import concat, stack
    from .math import add_n, reduce_max
    from .math_extra import cumsum

    if concat_dim is not None:
        axis = concat_dim
    if expand_nonconcat_dims is not None:
        expand_nonconcat_dim = expand_nonconcat_dims
    sps = [_as_sparse(s, "sparse_concat", "sp_inputs[i]") for s in sp_inputs]
    if not sps:
        raise ValueError("sparse_concat: no SparseTensors to concatenate")
    rank = _rank(sps[0], "sparse_concat")
    a = int(axis) + rank if int(axis) < 0 else int(axis)
    if not 0 <= a < rank:
        raise InvalidArgumentError(f"sparse_concat: axis {axis} is out of range for rank {rank}")
    with get_default_graph().name_scope(name or "SparseConcat"):
        shapes = stack([s.dense_shape for s in sps])  # [n, rank]
        sizes = shapes[:, a]
        offsets = cumsum(sizes, exclusive=True)
        onehot = np.zeros(rank, np.int64)
        onehot[a] = 1
        hot = convert_to_tensor(onehot)
        indices = concat([s.indices + offsets[i] * hot for i, s in enumerate(sps)], axis=0)
        values = concat([s.values for s in sps], axis=0)
        other = reduce_max(shapes, axis=0) if expand_nonconcat_dim else sps[0].dense_shape
        shape = other * (1 - hot) + add_n([s.dense_shape * hot for s in sps])
        out = _reordered(indices, values, shape)
    return out


# ---- sums ----------------------------------------------------------------------------------------

SparseAdd = defop("SparseAdd")


@SparseAdd.shape
def _sparse_add_shape(op):
    ai, av, ash, bi, bv, bsh, thresh = op.inputs
    if av.dtype != bv.dtype:
        raise InvalidArgumentError(
            f"SparseAdd {op.name!r}: values are {av.dtype.name} and {bv.dtype.name}"
        )
    rank = ai.shape.dims[1] if ai.shape.ndims == 2 else None
    return [
        (TensorShape([None, rank]), _dt.int64),
        (TensorShape([None]), av.dtype),
        (ash.shape, _dt.int64),
    ]


def _sparse_add_parts(ai, ash, bi, bsh, name):
    ash, bsh = np.asarray(ash, np.int64).reshape(-1), np.asarray(bsh, np.int64).reshape(-1)
    if ash.shape != bsh.shape or (ash != bsh).any():
        raise InvalidArgumentError(
            f"SparseAdd {name!r}: dense shapes differ: {ash.tolist()} and {bsh.tolist()}"
        )
    idx = np.concatenate(
        [
            np.asarray(ai, np.int64).reshape(-1, len(ash)),
            np.asarray(bi, np.int64).reshape(-1, len(ash)),
        ]
    )
    if len(idx) and ((idx < 0).any() or (idx >= ash).any()):
        raise InvalidArgumentError(
            f"SparseAdd {name!r}: an index is outside dense_shape {ash.tolist()}"
        )
    order = np.lexsort(idx.T[::-1]) if len(ash) else np.arange(len(idx))
    srt = idx[order]
    new = np.ones(len(srt), bool)
    if len(srt) > 1:
        new[1:] = (srt[1:] != srt[:-1]).any(axis=1)
    slot = np.empty(len(srt), np.int64)
    slot[order] = np.cumsum(new) - 1  # each input entry's place in the sum
    return srt[new], slot, ash


def _strictly_row_major(idx: np.ndarray) -> bool:
    """Whether the rows of ``idx`` are in row-major order, none repeated."""
    if len(idx) < 2:
        return True
    if idx.shape[1] == 0:
        return False
    d = idx[1:] - idx[:-1]
    nz = d != 0
    first = nz.argmax(axis=1)
    return bool(nz.any(axis=1).all() and (d[np.arange(len(d)), first] > 0).all())


def _sparse_add_merge(ai, av, bi, bv, t):
    """TF's SparseAdd kernel for entries not in strict row-major order: one pass merging the two
    lists as if sorted (an entry of ``a`` first where it compares lower, equal indices summed),
    so the result keeps the inputs' order and an index repeated within one input stays
    repeated (PetarV-/GAT adds two SparseTensors of its column-major adjacency)."""
    la, lb = ai.tolist(), bi.tolist()
    out_idx, vals = [], []
    i = j = 0
    while i < len(la) and j < len(lb):
        if la[i] < lb[j]:
            out_idx.append(la[i])
            vals.append(av[i])
            i += 1
        elif la[i] > lb[j]:
            out_idx.append(lb[j])
            vals.append(bv[j])
            j += 1
        else:
            total = av[i] + bv[j]
            if t <= abs(total):
                out_idx.append(la[i])
                vals.append(total)
            i += 1
            j += 1
    out_idx += la[i:] + lb[j:]
    vals += list(av[i:]) + list(bv[j:])
    return out_idx, vals


@SparseAdd.kernel("cpu")
def _sparse_add(ctx, ai, av, ash, bi, bv, bsh, thresh):
    out_idx, slot, shape = _sparse_add_parts(ai, ash, bi, bsh, ctx.op.name)
    rank = len(shape)
    a2 = np.asarray(ai, np.int64).reshape(-1, rank)
    b2 = np.asarray(bi, np.int64).reshape(-1, rank)
    if not (_strictly_row_major(a2) and _strictly_row_major(b2)):
        t = np.asarray(thresh)
        idx, vals = _sparse_add_merge(
            a2, av.reshape(-1), b2, bv.reshape(-1), float(t) if t.size else 0.0
        )
        return (
            np.asarray(idx, np.int64).reshape(-1, rank),
            np.asarray(vals, dtype=av.dtype).reshape(-1),
            shape,
        )
    vals = np.zeros(len(out_idx), dtype=av.dtype)
    np.add.at(vals, slot, np.concatenate([av.reshape(-1), bv.reshape(-1)]))
    t = np.asarray(thresh)
    if t.size and float(t) > 0:
        # as TF's kernel: only a sum of an entry of each input can fall under the threshold
        # and be dropped; an entry of one input alone is kept whatever its magnitude
        n_a = np.asarray(av).size  # (the first n_a entries summed are a's)
        both = np.zeros(len(out_idx), bool)
        both[np.intersect1d(slot[:n_a], slot[n_a:])] = True
        keep = ~both | (np.abs(vals) >= t)
        out_idx, vals = out_idx[keep], vals[keep]
    return out_idx, vals, shape


@SparseAdd.gradient
def _sparse_add_grad(op, g_idx, g_vals, g_shape):
    ai, av, ash, bi, bv, bsh, thresh = op.inputs
    grads = apply_op("SparseAddGrad", [g_vals, ai, bi, op.outputs[0]], name="SparseAddGrad").outputs
    return [None, grads[0], None, None, grads[1], None, None]


SparseAddGrad = defop("SparseAddGrad", differentiable=False)


@SparseAddGrad.shape
def _sparse_add_grad_shape(op):
    g, ai, bi, si = op.inputs
    n = [t.shape.dims[0] if t.shape.dims else None for t in (ai, bi)]
    return [(TensorShape([n[0]]), g.dtype), (TensorShape([n[1]]), g.dtype)]


@SparseAddGrad.kernel("cpu")
def _sparse_add_grad_kernel(ctx, g, ai, bi, si):
    """Each input entry gets the gradient of the sum's entry at its index (0 where the sum's
    threshold dropped it)."""
    rank = si.shape[1] if si.ndim == 2 else 0
    # TF's SparseAddGrad kernel: walk a, b and the sum together as the forward merge did, so
    # entries out of order or repeated get the gradient of the entry they made
    la = np.asarray(ai, np.int64).reshape(-1, rank).tolist()
    lb = np.asarray(bi, np.int64).reshape(-1, rank).tolist()
    ls = np.asarray(si, np.int64).reshape(-1, rank).tolist()
    ga, gb = np.zeros(len(la), dtype=g.dtype), np.zeros(len(lb), dtype=g.dtype)
    i = j = k = 0

    def step(lst, grads, p):
        """Compare lst[p] with the sum's entry k: (new p, whether lst[p] was >= it)."""
        if lst[p] == ls[k]:
            grads[p] = g[k]
            return p + 1, True
        if lst[p] < ls[k]:
            return p + 1, False
        return p, True

    while i < len(la) and j < len(lb) and k < len(ls):
        i, a_geq = step(la, ga, i)
        j, b_geq = step(lb, gb, j)
        if a_geq and b_geq:
            k += 1
    while i < len(la) and k < len(ls):
        i, a_geq = step(la, ga, i)
        if a_geq:
            k += 1
    while j < len(lb) and k < len(ls):
        j, b_geq = step(lb, gb, j)
        if b_geq:
            k += 1
    return ga, gb


def sparse_add(a: Any, b: Any, thresh: Any = 0, threshold: Any = None, name=None) -> Any:
    """``a + b`` where either is a SparseTensor: two SparseTensors give a SparseTensor (entries
    in row-major order, repeated indices summed; a sum of an entry of each whose magnitude is
    below ``thresh`` dropped, as TF's kernel does: an entry of one alone is always kept);
    a SparseTensor and a dense tensor give the dense sum."""
    from .scatter import tensor_scatter_nd_add

    if threshold is not None:
        thresh = threshold
    a_sp = isinstance(a, (SparseTensor, SparseTensorValue))
    b_sp = isinstance(b, (SparseTensor, SparseTensorValue))
    if not (a_sp or b_sp):
        raise TypeError("sparse_add: at least one operand must be a SparseTensor")
    if a_sp and b_sp:
        sa, sb = _as_sparse(a, "sparse_add", "a"), _as_sparse(b, "sparse_add", "b")
        t = convert_to_tensor(np.asarray(thresh, dtype=sa.dtype.np))
        i, v, s = apply_op(
            "SparseAdd",
            [sa.indices, sa.values, sa.dense_shape, sb.indices, sb.values, sb.dense_shape, t],
            name=name or "SparseAdd",
        ).outputs
        return SparseTensor(i, v, s)
    sp, dense = (
        (_as_sparse(a, "sparse_add", "a"), b) if a_sp else (_as_sparse(b, "sparse_add", "b"), a)
    )
    d = dense if isinstance(dense, Tensor) else convert_to_tensor(dense, dtype=sp.dtype)
    return tensor_scatter_nd_add(d, sp.indices, sp.values, name=name or "SparseTensorDenseAdd")


def sparse_reduce_sum(
    sp_input: Any,
    axis: Any = None,
    keepdims: Any = None,
    reduction_axes: Any = None,
    keep_dims: Any = None,
    name: str | None = None,
) -> Tensor:
    """The sum of a SparseTensor's entries over ``axis`` (all by default): a dense tensor."""
    from .array import reshape
    from .manip import gather
    from .math import reduce_sum
    from .scatter import scatter_nd

    sp = _as_sparse(sp_input, "sparse_reduce_sum")
    if axis is None:
        axis = reduction_axes
    keep = bool(keepdims if keepdims is not None else keep_dims)
    rank = _rank(sp, "sparse_reduce_sum")
    static = sp.shape
    with get_default_graph().name_scope(name or "SparseReduceSum"):
        if axis is None:
            out = reduce_sum(sp.values)
            return reshape(out, [1] * rank) if keep else out
        axes = [axis] if isinstance(axis, (int, np.integer)) else list(axis)
        axes = sorted({int(x) + rank if int(x) < 0 else int(x) for x in axes})
        if any(not 0 <= x < rank for x in axes):
            raise InvalidArgumentError(
                f"sparse_reduce_sum: axis {axis} is out of range for rank {rank}"
            )
        kept = [d for d in range(rank) if d not in axes]
        if keep:
            mask = np.ones(rank, np.int64)
            mask[axes] = 0
            m = convert_to_tensor(mask)
            idx, shape = sp.indices * m, sp.dense_shape * m + (1 - m)
            dims = [
                1 if d in axes else (static.dims[d] if static.dims else None) for d in range(rank)
            ]
        else:
            k = convert_to_tensor(np.asarray(kept, np.int64))
            idx, shape = gather(sp.indices, k, axis=1), gather(sp.dense_shape, k)
            dims = [static.dims[d] if static.dims else None for d in kept]
        out = scatter_nd(idx, sp.values, shape)
        return _fix_shape(out, TensorShape(dims))


def sparse_retain(sp_input: Any, to_retain: Any) -> SparseTensor:
    """The entries of ``sp_input`` whose flag in the boolean vector ``to_retain`` is true."""
    from .array import reshape
    from .manip import gather
    from .math import where

    sp = _as_sparse(sp_input, "sparse_retain")
    keep = convert_to_tensor(to_retain)
    if keep.dtype != _dt.bool_:
        raise TypeError(f"sparse_retain: to_retain must be bool, got {keep.dtype.name}")
    if keep.shape.ndims not in (None, 1):
        raise InvalidArgumentError(
            f"sparse_retain: to_retain must be a vector, got shape {keep.shape}"
        )
    at = reshape(where(keep), [-1])
    return SparseTensor(gather(sp.indices, at), gather(sp.values, at), sp.dense_shape)


def from_dense(tensor: Any, name: str | None = None) -> SparseTensor:
    """The SparseTensor of ``tensor``'s non-zero (non-empty) entries, in row-major order."""
    from .array import shape as shape_of
    from .math import not_equal, where, zeros_like
    from .scatter import gather_nd

    t = convert_to_tensor(tensor)
    with get_default_graph().name_scope(name or "dense_to_sparse"):
        zero = convert_to_tensor(b"") if t.dtype.is_string else zeros_like(t)
        idx = where(not_equal(t, zero))
        out = SparseTensor(idx, gather_nd(t, idx), shape_of(t, out_type=_dt.int64))
    return out


# ---- segment sums of gathered rows (dense ops TF1 files under "sparse") ---------------------------


def _sparse_segment(kind: str, data, indices, segment_ids, name, num_segments):
    from .array import cast
    from .manip import gather, unsorted_segment_sum
    from .math import divide, maximum, ones_like, sqrt
    from .segments import segment_sum

    rows = gather(data, indices)
    ids = convert_to_tensor(segment_ids)
    with get_default_graph().name_scope(name or f"SparseSegment{kind}"):
        if num_segments is not None:
            total = unsorted_segment_sum(rows, ids, num_segments)
        else:
            total = segment_sum(rows, ids)
        if kind == "Sum":
            return total
        ones = ones_like(cast(ids, rows.dtype))
        if num_segments is not None:
            count = unsorted_segment_sum(ones, ids, num_segments)
        else:
            count = segment_sum(ones, ids)
        count = maximum(count, 1)
        if kind == "SqrtN":
            count = sqrt(count)
        r = rows.shape.ndims
        if r is not None and r > 1:
            from .array import reshape

            count = reshape(count, [-1] + [1] * (r - 1))
        return divide(total, count)


def sparse_segment_sum(data, indices, segment_ids, name=None, num_segments=None) -> Tensor:
    """``segment_sum(gather(data, indices), segment_ids)`` (TF1's ``tf.sparse_segment_sum``)."""
    return _sparse_segment("Sum", data, indices, segment_ids, name, num_segments)


def sparse_segment_mean(data, indices, segment_ids, name=None, num_segments=None) -> Tensor:
    """The mean of the gathered rows by segment; an empty segment gives 0."""
    return _sparse_segment("Mean", data, indices, segment_ids, name, num_segments)


def sparse_segment_sqrt_n(data, indices, segment_ids, name=None, num_segments=None) -> Tensor:
    """The sum of the gathered rows by segment over the square root of their count."""
    return _sparse_segment("SqrtN", data, indices, segment_ids, name, num_segments)


def embedding_lookup_sparse(
    params: Any,
    sp_ids: Any,
    sp_weights: Any,
    partition_strategy: str = "mod",
    name: str | None = None,
    combiner: str | None = None,
    max_norm: Any = None,
) -> Tensor:
    """One embedding per row of the SparseTensor ``sp_ids`` (a batch of id lists): the rows of
    ``params`` at its ids, weighted by ``sp_weights`` (a SparseTensor of the same indices, or
    None), combined by ``combiner``: "sum", "mean" (the default) or "sqrtn". As in TF1, the
    result has ``max(row) + 1`` rows (a row without ids gives zeros)."""
    from .array import cast, reshape
    from .manip import gather
    from .math import divide, equal, multiply, ones_like, sqrt, where, zeros_like
    from .nn import embedding_lookup
    from .segments import segment_sum, unique

    combiner = "mean" if combiner is None else combiner
    if combiner not in ("sum", "mean", "sqrtn"):
        raise ValueError(
            f"embedding_lookup_sparse: combiner must be sum, mean or sqrtn, got {combiner!r}"
        )
    ids_sp = _as_sparse(sp_ids, "embedding_lookup_sparse", "sp_ids")
    with get_default_graph().name_scope(name or "embedding_lookup_sparse"):
        segment_ids = cast(ids_sp.indices[:, 0], _dt.int32)
        ids, idx = unique(ids_sp.values)
        emb = embedding_lookup(
            params, ids, partition_strategy=partition_strategy, max_norm=max_norm
        )
        if sp_weights is None:
            return _sparse_segment(
                {"sum": "Sum", "mean": "Mean", "sqrtn": "SqrtN"}[combiner],
                emb,
                idx,
                segment_ids,
                None,
                None,
            )
        w_sp = _as_sparse(sp_weights, "embedding_lookup_sparse", "sp_weights")
        w = cast(w_sp.values, emb.dtype) if w_sp.dtype != emb.dtype else w_sp.values
        rows = multiply(gather(emb, idx), reshape(w, [-1, 1]))
        total = segment_sum(rows, segment_ids)
        if combiner == "sum":
            return total
        denom = segment_sum(w if combiner == "mean" else w * w, segment_ids)
        if combiner == "sqrtn":
            denom = sqrt(denom)
        # a row whose weights sum to 0 (or without ids) gives 0, as TF's div_no_nan
        denom = reshape(denom, [-1, 1])
        none = equal(denom, 0)
        return where(none, zeros_like(total), divide(total, where(none, ones_like(denom), denom)))
