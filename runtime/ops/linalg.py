"""Linear algebra ops (TF1 semantics, batched over leading dimensions): einsum and tensordot,
diagonals and bands, inverse, determinant, Cholesky, solves, QR, SVD and symmetric eigen-
decomposition; plus eye, trace, matrix_transpose and linspace."""

from __future__ import annotations

import contextlib
import string
from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import Tensor, TensorShape
from ..registry import Cost, apply, apply_op, convert_to_tensor, defop, nbytes, numel
from .math import matmul, multiply, negative, reduce_sum

# ---- shared shape helpers -------------------------------------------------------------------


def _square(op_name: str, t: Tensor) -> None:
    s = t.shape
    if s.ndims is None:
        return
    if s.ndims < 2:
        raise InvalidArgumentError(f"{op_name}: input {t.name} must have rank >= 2, got {s}")
    a, b = s.dims[-2], s.dims[-1]
    if a is not None and b is not None and a != b:
        raise InvalidArgumentError(f"{op_name}: input {t.name} must be square, got shape {s}")


def _float(op_name: str, t: Tensor) -> None:
    if not t.dtype.is_floating:
        raise InvalidArgumentError(f"{op_name}: {t.name} must be float, got {t.dtype.name}")


def _n3_cost(factor: float):
    """``factor * n^3`` flops per matrix of the first input, bytes in and out."""

    def cost(op, ins, outs):
        s = ins[0]
        n = s[-1] if s else 1
        batch = numel(s[:-2]) if len(s) > 2 else 1
        r = sum(nbytes(x, t.dtype) for x, t in zip(ins, op.inputs))
        w = sum(nbytes(x, t.dtype) for x, t in zip(outs, op.outputs))
        return Cost(factor * batch * float(n) ** 3, float(r), float(w))

    return cost


def _square_op(name: str, factor: float, out: str = "same", differentiable: bool = True):
    d = defop(name, cost=_n3_cost(factor), differentiable=differentiable)

    @d.shape
    def _shape(op):
        x = op.inputs[0]
        _float(name, x)
        _square(name, x)
        if out == "same":
            return [(x.shape, x.dtype)]
        return [(x.shape[:-2] if x.shape.ndims is not None else TensorShape(None), x.dtype)]

    return d


def _raising(xp: Any) -> Any:
    """On a GPU, cupy's solvers report a singular or indefinite matrix only when asked
    (``cupyx.errstate(linalg="raise")``; else they return NaNs); numpy's always raise."""
    if xp is np:
        return contextlib.nullcontext()
    import cupyx

    return cupyx.errstate(linalg="raise")


def _linalg_error(ctx: Any, what: str, e: Exception) -> InvalidArgumentError:
    return InvalidArgumentError(f"{ctx.op.type} {ctx.op.name!r}: {what} ({e})")


# ---- MatrixInverse, MatrixDeterminant, Cholesky --------------------------------------------------

MatrixInverse = _square_op("MatrixInverse", 2.0)


@MatrixInverse.kernel("cpu", "gpu", dtypes=_dt.FLOATS)
def _inverse(ctx, x):
    xp = ctx.xp
    if ctx.attrs.get("adjoint"):
        x = xp.swapaxes(x, -1, -2)
    try:
        with _raising(xp):
            return xp.linalg.inv(x).astype(x.dtype, copy=False)
    except np.linalg.LinAlgError as e:
        raise _linalg_error(ctx, f"input of shape {tuple(x.shape)} is not invertible", e) from None


@MatrixInverse.gradient
def _inverse_grad(op, g):
    y = op.outputs[0]
    if op.attrs.get("adjoint"):
        return [negative(matmul(y, matmul(g, y, transpose_a=True)))]
    return [negative(matmul(y, matmul(g, y, transpose_b=True), transpose_a=True))]


MatrixDeterminant = _square_op("MatrixDeterminant", 2.0 / 3.0, out="batch")


@MatrixDeterminant.kernel("cpu", "gpu", dtypes=_dt.FLOATS)
def _det(ctx, x):
    return ctx.xp.asarray(ctx.xp.linalg.det(x)).astype(x.dtype, copy=False)


@MatrixDeterminant.gradient
def _det_grad(op, g):
    from .manip import expand_dims

    x, d = op.inputs[0], op.outputs[0]
    s = expand_dims(expand_dims(multiply(g, d), -1), -1)
    return [multiply(s, matrix_inverse(x, adjoint=True))]


Cholesky = _square_op("Cholesky", 1.0 / 3.0)


@Cholesky.kernel("cpu", "gpu", dtypes=_dt.FLOATS)
def _cholesky(ctx, x):
    try:
        with _raising(ctx.xp):
            return ctx.xp.linalg.cholesky(x).astype(x.dtype, copy=False)
    except np.linalg.LinAlgError as e:
        raise _linalg_error(ctx, "input is not symmetric positive definite", e) from None


@Cholesky.gradient
def _cholesky_grad(op, g):
    return [apply("CholeskyGrad", [op.outputs[0], g], name="CholeskyGrad")]


# dA from L = cholesky(A) and dL: sym(L^-T Phi(L^T dL) L^-1) with Phi the lower triangle with a
# halved diagonal (the symmetric split TF uses, as A's two triangles are one parameter).
CholeskyGrad = defop("CholeskyGrad", cost=_n3_cost(2.0), differentiable=False)


@CholeskyGrad.shape
def _chol_grad_shape(op):
    return [(op.inputs[0].shape, op.inputs[0].dtype)]


@CholeskyGrad.kernel("cpu", "gpu", dtypes=_dt.FLOATS)
def _cholesky_grad_kernel(ctx, lo, g):
    xp = ctx.xp
    n = lo.shape[-1]
    eye = xp.eye(n, dtype=lo.dtype)
    linv = xp.linalg.solve(lo, xp.broadcast_to(eye, lo.shape))
    mid = xp.matmul(xp.swapaxes(lo, -1, -2), g)
    mid = xp.tril(mid) - 0.5 * mid * eye
    ga = xp.matmul(xp.matmul(xp.swapaxes(linv, -1, -2), mid), linv)
    return (0.5 * (ga + xp.swapaxes(ga, -1, -2))).astype(lo.dtype, copy=False)


# ---- MatrixSolve, MatrixTriangularSolve ----------------------------------------------------------


def _solve_shape(op):
    a, b = op.inputs
    for t in (a, b):
        _float(op.type, t)
    if a.dtype != b.dtype:
        raise InvalidArgumentError(f"{op.type}: matrix is {a.dtype.name}, rhs is {b.dtype.name}")
    _square(op.type, a)
    if b.shape.ndims is not None and b.shape.ndims < 2:
        raise InvalidArgumentError(f"{op.type}: rhs {b.name} must have rank >= 2, got {b.shape}")
    if a.shape.ndims is not None and b.shape.ndims is not None:
        m, mb = a.shape.dims[-1], b.shape.dims[-2]
        if m is not None and mb is not None and m != mb:
            raise InvalidArgumentError(
                f"{op.type}: matrix {a.shape} and rhs {b.shape} differ in rows ({m} vs {mb})"
            )
    return [(b.shape, b.dtype)]


def _solve_cost(op, ins, outs):
    a, b = ins
    n = a[-1] if a else 1
    k = b[-1] if b else 1
    batch = numel(a[:-2]) if len(a) > 2 else 1
    tri = op.type == "MatrixTriangularSolve"
    flops = batch * (float(n) ** 2 * k if tri else 2.0 / 3.0 * float(n) ** 3 + 2.0 * n * n * k)
    r = nbytes(a, op.inputs[0].dtype) + nbytes(b, op.inputs[1].dtype)
    return Cost(flops, float(r), float(nbytes(outs[0], op.outputs[0].dtype)))


MatrixSolve = defop("MatrixSolve", shape=_solve_shape, cost=_solve_cost)
MatrixTriangularSolve = defop("MatrixTriangularSolve", shape=_solve_shape, cost=_solve_cost)


@MatrixSolve.kernel("cpu", "gpu", dtypes=_dt.FLOATS)
def _solve(ctx, a, b):
    xp = ctx.xp
    if ctx.attrs["adjoint"]:
        a = xp.swapaxes(a, -1, -2)
    try:
        with _raising(xp):
            return xp.linalg.solve(a, b).astype(b.dtype, copy=False)
    except np.linalg.LinAlgError as e:
        raise _linalg_error(ctx, "matrix is singular", e) from None


@MatrixSolve.gradient
def _solve_grad(op, g):
    a = op.inputs[0]
    x = op.outputs[0]
    adj = op.attrs["adjoint"]
    gb = matrix_solve(a, g, adjoint=not adj)
    if adj:
        ga = negative(matmul(x, gb, transpose_b=True))
    else:
        ga = negative(matmul(gb, x, transpose_b=True))
    return [ga, gb]


@MatrixTriangularSolve.kernel("cpu", "gpu", dtypes=_dt.FLOATS)
def _tri_solve(ctx, a, b):
    xp = ctx.xp
    a = xp.tril(a) if ctx.attrs["lower"] else xp.triu(a)
    if ctx.attrs["adjoint"]:
        a = xp.swapaxes(a, -1, -2)
    try:
        with _raising(xp):
            return xp.linalg.solve(a, b).astype(b.dtype, copy=False)
    except np.linalg.LinAlgError as e:
        raise _linalg_error(ctx, "matrix has a zero on its diagonal", e) from None


@MatrixTriangularSolve.gradient
def _tri_solve_grad(op, g):
    a = op.inputs[0]
    x = op.outputs[0]
    lower, adj = op.attrs["lower"], op.attrs["adjoint"]
    gb = matrix_triangular_solve(a, g, lower=lower, adjoint=not adj)
    ga = negative(matmul(x, gb, transpose_b=True) if adj else matmul(gb, x, transpose_b=True))
    ga = matrix_band_part(ga, -1, 0) if lower else matrix_band_part(ga, 0, -1)
    return [ga, gb]


# ---- Qr, Svd, SelfAdjointEigV2 (no gradients) ----------------------------------------------------

Qr = defop("Qr", cost=_n3_cost(4.0 / 3.0))


@Qr.shape
def _qr_shape(op):
    x = op.inputs[0]
    _float("Qr", x)
    if x.shape.ndims is None:
        return [(TensorShape(None), x.dtype)] * 2
    if x.shape.ndims < 2:
        raise InvalidArgumentError(f"Qr: input {x.name} must have rank >= 2, got {x.shape}")
    *b, m, n = x.shape.dims
    k = None if m is None or n is None else min(m, n)
    if op.attrs["full_matrices"]:
        return [(TensorShape([*b, m, m]), x.dtype), (TensorShape([*b, m, n]), x.dtype)]
    return [(TensorShape([*b, m, k]), x.dtype), (TensorShape([*b, k, n]), x.dtype)]


@Qr.kernel("cpu", "gpu", dtypes=_dt.FLOATS)
def _qr(ctx, x):
    xp = ctx.xp
    mode = "complete" if ctx.attrs["full_matrices"] else "reduced"
    q, r = xp.linalg.qr(x, mode=mode)
    return q.astype(x.dtype, copy=False), r.astype(x.dtype, copy=False)


Svd = defop("Svd", cost=_n3_cost(4.0))


@Svd.shape
def _svd_shape(op):
    x = op.inputs[0]
    _float("Svd", x)
    n_out = 3 if op.attrs["compute_uv"] else 1
    if x.shape.ndims is None:
        return [(TensorShape(None), x.dtype)] * n_out
    if x.shape.ndims < 2:
        raise InvalidArgumentError(f"Svd: input {x.name} must have rank >= 2, got {x.shape}")
    *b, m, n = x.shape.dims
    k = None if m is None or n is None else min(m, n)
    s = (TensorShape([*b, k]), x.dtype)
    if not op.attrs["compute_uv"]:
        return [s]
    if op.attrs["full_matrices"]:
        return [s, (TensorShape([*b, m, m]), x.dtype), (TensorShape([*b, n, n]), x.dtype)]
    return [s, (TensorShape([*b, m, k]), x.dtype), (TensorShape([*b, n, k]), x.dtype)]


@Svd.kernel("cpu", "gpu", dtypes=_dt.FLOATS)
def _svd(ctx, x):
    xp = ctx.xp
    if not ctx.attrs["compute_uv"]:
        return xp.linalg.svd(x, compute_uv=False).astype(x.dtype, copy=False)
    u, s, vh = xp.linalg.svd(x, full_matrices=ctx.attrs["full_matrices"])
    v = xp.ascontiguousarray(xp.swapaxes(vh, -1, -2))
    return s.astype(x.dtype, copy=False), u.astype(x.dtype, copy=False), v.astype(x.dtype)


SelfAdjointEigV2 = defop("SelfAdjointEigV2", cost=_n3_cost(9.0))


@SelfAdjointEigV2.shape
def _eig_shape(op):
    x = op.inputs[0]
    _float("SelfAdjointEigV2", x)
    _square("SelfAdjointEigV2", x)
    e = (x.shape[:-1] if x.shape.ndims is not None else TensorShape(None), x.dtype)
    return [e, (x.shape, x.dtype)] if op.attrs["compute_v"] else [e]


@SelfAdjointEigV2.kernel("cpu", "gpu", dtypes=_dt.FLOATS)
def _eigh(ctx, x):
    xp = ctx.xp
    if not ctx.attrs["compute_v"]:
        return xp.linalg.eigvalsh(x).astype(x.dtype, copy=False)
    e, v = xp.linalg.eigh(x)
    return e.astype(x.dtype, copy=False), v.astype(x.dtype, copy=False)


# ---- diagonals and bands ----------------------------------------------------------------------

MatrixDiag = defop("MatrixDiag")


@MatrixDiag.shape
def _mdiag_shape(op):
    d = op.inputs[0]
    if d.shape.ndims is None:
        return [(TensorShape(None), d.dtype)]
    if d.shape.ndims < 1:
        raise InvalidArgumentError(f"MatrixDiag: diagonal {d.name} must have rank >= 1")
    return [(TensorShape([*d.shape.dims, d.shape.dims[-1]]), d.dtype)]


@MatrixDiag.kernel("cpu", "gpu")
def _mdiag(ctx, d):
    xp = ctx.xp
    n = d.shape[-1]
    out = xp.zeros(d.shape + (n,), dtype=d.dtype)
    i = xp.arange(n)
    out[..., i, i] = d
    return out


MatrixDiag.gradient(lambda op, g: [matrix_diag_part(g)])

MatrixDiagPart = defop("MatrixDiagPart")


@MatrixDiagPart.shape
def _mdiag_part_shape(op):
    x = op.inputs[0]
    if x.shape.ndims is None:
        return [(TensorShape(None), x.dtype)]
    if x.shape.ndims < 2:
        raise InvalidArgumentError(f"MatrixDiagPart: input {x.name} must have rank >= 2")
    *b, m, n = x.shape.dims
    return [(TensorShape([*b, None if m is None or n is None else min(m, n)]), x.dtype)]


@MatrixDiagPart.kernel("cpu", "gpu")
def _mdiag_part(ctx, x):
    return ctx.xp.ascontiguousarray(ctx.xp.diagonal(x, 0, -2, -1))


@MatrixDiagPart.gradient
def _mdiag_part_grad(op, g):
    from .math import zeros_like

    return [matrix_set_diag(zeros_like(op.inputs[0]), g)]


MatrixSetDiag = defop("MatrixSetDiag")


@MatrixSetDiag.shape
def _mset_diag_shape(op):
    x, d = op.inputs
    if x.dtype != d.dtype:
        raise InvalidArgumentError(
            f"MatrixSetDiag: input is {x.dtype.name}, diagonal is {d.dtype.name}"
        )
    want = TensorShape(None)
    if x.shape.ndims is not None and x.shape.ndims >= 2:
        *b, m, n = x.shape.dims
        want = TensorShape([*b, None if m is None or n is None else min(m, n)])
    if not want.is_compatible_with(d.shape):
        raise InvalidArgumentError(
            f"MatrixSetDiag: diagonal {d.name} has shape {d.shape}, expected {want} for input "
            f"{x.shape}"
        )
    return [(x.shape, x.dtype)]


@MatrixSetDiag.kernel("cpu", "gpu")
def _mset_diag(ctx, x, d):
    xp = ctx.xp
    out = x.copy()
    i = xp.arange(min(x.shape[-2], x.shape[-1]))
    out[..., i, i] = d
    return out


@MatrixSetDiag.gradient
def _mset_diag_grad(op, g):
    from .math import zeros_like

    return [matrix_set_diag(g, zeros_like(op.inputs[1])), matrix_diag_part(g)]


MatrixBandPart = defop("MatrixBandPart")


@MatrixBandPart.shape
def _band_shape(op):
    x = op.inputs[0]
    if x.shape.ndims is not None and x.shape.ndims < 2:
        raise InvalidArgumentError(f"MatrixBandPart: input {x.name} must have rank >= 2")
    return [(x.shape, x.dtype)]


@MatrixBandPart.kernel("cpu", "gpu")
def _band(ctx, x):
    xp = ctx.xp
    lo, up = ctx.attrs["num_lower"], ctx.attrs["num_upper"]
    m, n = x.shape[-2], x.shape[-1]
    d = xp.arange(m).reshape(-1, 1) - xp.arange(n).reshape(1, -1)  # row - column
    keep = xp.ones((m, n), dtype=bool)
    if lo >= 0:
        keep &= d <= lo
    if up >= 0:
        keep &= -d <= up
    return xp.where(keep, x, xp.zeros((), dtype=x.dtype))


MatrixBandPart.gradient(
    lambda op, g: [matrix_band_part(g, op.attrs["num_lower"], op.attrs["num_upper"])]
)


# ---- Einsum -----------------------------------------------------------------------------------


def _parse_einsum(eq: str, n: int) -> tuple[list[str], str]:
    eq = eq.replace(" ", "")
    if "->" in eq:
        lhs, out = eq.split("->")
    else:
        lhs = eq
        counts: dict[str, int] = {}
        for c in lhs.replace(",", "").replace(".", ""):
            counts[c] = counts.get(c, 0) + 1
        out = ("..." if "..." in lhs else "") + "".join(
            sorted(c for c, k in counts.items() if k == 1)
        )
    ins = lhs.split(",")
    if len(ins) != n:
        raise InvalidArgumentError(f"einsum: equation {eq!r} names {len(ins)} operands, got {n}")
    return ins, out


Einsum = defop("Einsum")


@Einsum.shape
def _einsum_shape(op):
    eq = op.attrs["equation"]
    ins, out = _parse_einsum(eq, len(op.inputs))
    dt = op.inputs[0].dtype
    dims: dict[str, Any] = {}
    for t, sub in zip(op.inputs, ins):
        if t.dtype != dt:
            raise InvalidArgumentError(
                f"Einsum: inputs must share a dtype, got {dt.name} and {t.dtype.name} ({t.name})"
            )
        if "..." in sub or t.shape.ndims is None:
            continue
        if len(sub) != t.shape.ndims:
            raise InvalidArgumentError(
                f"Einsum: operand {t.name} of shape {t.shape} does not match {sub!r} in {eq!r}"
            )
        for c, d in zip(sub, t.shape.dims):
            have = dims.get(c)
            if have is not None and d is not None and have != d and 1 not in (have, d):
                raise InvalidArgumentError(
                    f"Einsum: index {c!r} is {have} in one operand and {d} in {t.name} ({eq!r})"
                )
            if have is None or have == 1:
                dims[c] = d
    if "..." in out or any("..." in s for s in ins):
        return [(TensorShape(None), dt)]
    for c in out:
        if c not in "".join(ins):
            raise InvalidArgumentError(f"Einsum: output index {c!r} is in no operand ({eq!r})")
    known = all(t.shape.ndims is not None for t in op.inputs)
    return [(TensorShape([dims.get(c) for c in out]) if known else TensorShape(None), dt)]


@Einsum.kernel("cpu", "gpu", dtypes=_dt.NUMERIC_COMPLEX)
def _einsum(ctx, *xs):
    xp = ctx.xp
    r = xp.einsum(ctx.attrs["equation"], *xs)
    r = r if isinstance(r, xp.ndarray) else xp.asarray(r)
    r = r.astype(xs[0].dtype, copy=False)
    return xp.ascontiguousarray(r) if r.ndim else r.copy()


@Einsum.cost
def _einsum_cost(op, ins, outs):
    subs, out = _parse_einsum(op.attrs["equation"], len(ins))
    sizes: dict[str, int] = {}
    for s, shape in zip(subs, ins):
        if "..." not in s:
            for c, d in zip(s, shape):
                sizes[c] = max(sizes.get(c, 1), d)
    flops = float(numel(list(sizes.values()))) * max(len(ins), 1)
    r = sum(nbytes(s, t.dtype) for s, t in zip(ins, op.inputs))
    return Cost(flops, float(r), float(nbytes(outs[0], op.outputs[0].dtype)))


@Einsum.gradient
def _einsum_grad(op, g):
    subs, out = _parse_einsum(op.attrs["equation"], len(op.inputs))
    eq = op.attrs["equation"]
    if "..." in eq or len(set(out)) != len(out):
        raise InvalidArgumentError(
            f"Einsum {op.name!r}: no gradient for equation {eq!r} (ellipsis or repeated output "
            f"index); supported: each index at most once per operand"
        )
    grads = []
    for i, (x, s) in enumerate(zip(op.inputs, subs)):
        if len(set(s)) != len(s):
            raise InvalidArgumentError(
                f"Einsum {op.name!r}: no gradient for operand {i} ({s!r}) of {eq!r}: it "
                f"repeats an index (a diagonal); use matrix_diag_part instead"
            )
        others = [(t, o) for j, (t, o) in enumerate(zip(op.inputs, subs)) if j != i]
        avail = set(out).union(*[set(o) for _, o in others])
        keep = "".join(c for c in s if c in avail)
        geq = ",".join([out] + [o for _, o in others]) + "->" + keep
        attrs = {"equation": geq, "target": s}
        from .complex_ops import conj_if_complex  # complex: the others' conjugates, as TF's

        others_in = [conj_if_complex(t) for t, _ in others]
        grads.append(apply("EinsumGrad", [g, *others_in, x], attrs, name="EinsumGrad"))
    return grads


# einsum of the output gradient and the other operands, broadcast over the indices of the
# operand that appear nowhere else (summed out in the forward pass).
EinsumGrad = defop("EinsumGrad", differentiable=False)


@EinsumGrad.shape
def _einsum_grad_shape(op):
    return [(op.inputs[-1].shape, op.inputs[-1].dtype)]


@EinsumGrad.kernel("cpu", "gpu", dtypes=_dt.NUMERIC_COMPLEX)
def _einsum_grad_kernel(ctx, *ins):
    xp = ctx.xp
    *ops, x = ins
    r = xp.einsum(ctx.attrs["equation"], *ops)
    r = r if isinstance(r, xp.ndarray) else xp.asarray(r)
    keep = ctx.attrs["equation"].split("->")[1]
    target = ctx.attrs["target"]
    r = r.reshape([r.shape[keep.index(c)] if c in keep else 1 for c in target])
    r = xp.broadcast_to(r, x.shape).astype(x.dtype)  # a copy: broadcast views are read-only
    return r


# ---- public functions --------------------------------------------------------------------------


def einsum(equation: str, *inputs: Any, name: str | None = None, **kwargs: Any) -> Tensor:
    """Einstein summation over ``inputs`` (numpy's rules). Gradients cover equations whose
    operands name each index once (no ellipsis)."""
    if len(inputs) == 1 and isinstance(inputs[0], (list, tuple)):
        inputs = tuple(inputs[0])
    ts = [convert_to_tensor(x) for x in inputs]
    if not ts:
        raise InvalidArgumentError("einsum: needs at least one operand")
    _parse_einsum(equation, len(ts))
    return apply("Einsum", ts, {"equation": equation.replace(" ", "")}, name or "Einsum")


def tensordot(a: Any, b: Any, axes: Any, name: str | None = None) -> Tensor:
    """Sum of products over ``axes`` (an int: the last ``axes`` of ``a`` with the first of
    ``b``; or a pair of axis lists). Needs known ranks."""
    a, b = convert_to_tensor(a), convert_to_tensor(b)
    ra, rb = a.shape.ndims, b.shape.ndims
    if ra is None or rb is None:
        raise InvalidArgumentError("tensordot: needs operands of known rank in hetbed")
    if isinstance(axes, Tensor):
        raise TypeError("tensordot: axes must be static in hetbed")
    if np.ndim(axes) == 0:
        k = int(axes)
        if not 0 <= k <= min(ra, rb):
            raise InvalidArgumentError(f"tensordot: axes={k} for ranks {ra} and {rb}")
        xa, xb = list(range(ra - k, ra)), list(range(k))
    else:
        xa, xb = axes
        xa = [int(xa)] if np.ndim(xa) == 0 else [int(i) for i in xa]
        xb = [int(xb)] if np.ndim(xb) == 0 else [int(i) for i in xb]
        if len(xa) != len(xb):
            raise InvalidArgumentError(f"tensordot: axes {axes} pair different counts")
        xa, xb = [i % ra for i in xa], [i % rb for i in xb]
    letters = iter(string.ascii_letters)
    sa = [next(letters) for _ in range(ra)]
    sb = [next(letters) for _ in range(rb)]
    for i, j in zip(xa, xb):
        sb[j] = sa[i]
    out = [c for i, c in enumerate(sa) if i not in xa] + [
        c for j, c in enumerate(sb) if j not in xb
    ]
    eq = f"{''.join(sa)},{''.join(sb)}->{''.join(out)}"
    return einsum(eq, a, b, name=name or "Tensordot")


def matrix_inverse(input: Any, adjoint: bool = False, name: str | None = None) -> Tensor:
    """Inverse of each square matrix (of its transpose when ``adjoint``)."""
    return apply("MatrixInverse", [input], {"adjoint": bool(adjoint)}, name or "MatrixInverse")


def matrix_determinant(input: Any, name: str | None = None) -> Tensor:
    """Determinant of each square matrix."""
    return apply("MatrixDeterminant", [input], name=name or "MatrixDeterminant")


def cholesky(input: Any, name: str | None = None) -> Tensor:
    """Lower Cholesky factor L of each symmetric positive definite matrix (A = L L^T); only the
    lower triangle of A is read."""
    return apply("Cholesky", [input], name=name or "Cholesky")


def matrix_solve(matrix: Any, rhs: Any, adjoint: bool = False, name: str | None = None) -> Tensor:
    """X with ``matrix @ X = rhs`` (``matrix^T`` when ``adjoint``)."""
    return apply("MatrixSolve", [matrix, rhs], {"adjoint": bool(adjoint)}, name or "MatrixSolve")


def matrix_triangular_solve(
    matrix: Any, rhs: Any, lower: bool = True, adjoint: bool = False, name: str | None = None
) -> Tensor:
    """X with ``T @ X = rhs`` where T is the lower (or upper) triangle of ``matrix``."""
    return apply(
        "MatrixTriangularSolve",
        [matrix, rhs],
        {"lower": bool(lower), "adjoint": bool(adjoint)},
        name or "MatrixTriangularSolve",
    )


def qr(input: Any, full_matrices: bool = False, name: str | None = None) -> tuple:
    """``(q, r)``: orthonormal q and upper triangular r with ``q @ r = input``."""
    op = apply_op("Qr", [input], {"full_matrices": bool(full_matrices)}, name or "Qr")
    return op.outputs[0], op.outputs[1]


def svd(
    tensor: Any, full_matrices: bool = False, compute_uv: bool = True, name: str | None = None
) -> Any:
    """``(s, u, v)`` with ``tensor = u @ diag(s) @ v^T`` (s descending); only s when not
    ``compute_uv``."""
    attrs = {"full_matrices": bool(full_matrices), "compute_uv": bool(compute_uv)}
    op = apply_op("Svd", [tensor], attrs, name or "Svd")
    return tuple(op.outputs) if compute_uv else op.outputs[0]


def self_adjoint_eig(tensor: Any, name: str | None = None) -> tuple:
    """``(e, v)``: ascending eigenvalues and eigenvectors (columns) of each symmetric matrix
    (its lower triangle is read)."""
    op = apply_op("SelfAdjointEigV2", [tensor], {"compute_v": True}, name or "SelfAdjointEigV2")
    return op.outputs[0], op.outputs[1]


def self_adjoint_eigvals(tensor: Any, name: str | None = None) -> Tensor:
    """Ascending eigenvalues of each symmetric matrix."""
    return apply("SelfAdjointEigV2", [tensor], {"compute_v": False}, name or "SelfAdjointEigV2")


def matrix_diag(diagonal: Any, name: str | None = None) -> Tensor:
    """Square matrices with ``diagonal``'s last axis on their diagonals."""
    return apply("MatrixDiag", [diagonal], name=name or "MatrixDiag")


def matrix_diag_part(input: Any, name: str | None = None) -> Tensor:
    """The main diagonal of each matrix (length min(rows, cols))."""
    return apply("MatrixDiagPart", [input], name=name or "MatrixDiagPart")


def matrix_set_diag(input: Any, diagonal: Any, name: str | None = None) -> Tensor:
    """``input`` with the main diagonal of each matrix replaced by ``diagonal``."""
    return apply("MatrixSetDiag", [input, diagonal], name=name or "MatrixSetDiag")


def matrix_band_part(input: Any, num_lower: Any, num_upper: Any, name: str | None = None):
    """Keep entries at most ``num_lower`` below and ``num_upper`` above the diagonal (negative:
    the whole triangle); zero the rest. The bounds must be static ints here."""
    if isinstance(num_lower, Tensor) or isinstance(num_upper, Tensor):
        raise TypeError("matrix_band_part: num_lower and num_upper must be static ints in hetbed")
    attrs = {"num_lower": int(num_lower), "num_upper": int(num_upper)}
    return apply("MatrixBandPart", [input], attrs, name or "MatrixBandPart")


def diag(diagonal: Any, name: str | None = None) -> Tensor:
    """TF1's ``tf.diag``: for an input of shape D, a tensor of shape D + D holding it on the
    diagonal (a matrix for a vector). Needs a fully known shape."""
    from .array import reshape

    d = convert_to_tensor(diagonal)
    if not d.shape.is_fully_defined():
        raise InvalidArgumentError(f"diag: needs a fully known shape, {d.name} has {d.shape}")
    dims = list(d.shape.as_list())
    if not dims:
        raise InvalidArgumentError("diag: input must have rank >= 1")
    m = matrix_diag(reshape(d, [-1]))
    return reshape(m, dims + dims, name=name or "Diag")


def diag_part(input: Any, name: str | None = None) -> Tensor:
    """TF1's ``tf.diag_part``: the inverse of ``diag`` (input of shape D + D gives D)."""
    from .array import reshape

    x = convert_to_tensor(input)
    if not x.shape.is_fully_defined() or x.shape.ndims % 2 or x.shape.ndims == 0:
        raise InvalidArgumentError(f"diag_part: needs a known shape D + D, {x.name} has {x.shape}")
    dims = x.shape.as_list()
    half = dims[: len(dims) // 2]
    if half != dims[len(dims) // 2 :]:
        raise InvalidArgumentError(f"diag_part: shape {x.shape} is not D + D")
    n = int(np.prod(half))
    return reshape(matrix_diag_part(reshape(x, [n, n])), half, name=name or "DiagPart")


def trace(x: Any, name: str | None = None) -> Tensor:
    """Sum of the main diagonal of each matrix."""
    return reduce_sum(matrix_diag_part(x), axis=-1, name=name or "Trace")


def matrix_transpose(a: Any, name: str = "matrix_transpose", conjugate: bool = False) -> Tensor:
    """Swap the last two dimensions (needs a known rank >= 2)."""
    from .manip import transpose

    x = convert_to_tensor(a)
    n = x.shape.ndims
    if n is None or n < 2:
        raise InvalidArgumentError(f"matrix_transpose: needs a known rank >= 2, got {x.shape}")
    return transpose(x, list(range(n - 2)) + [n - 1, n - 2], name=name)


def eye(
    num_rows: int,
    num_columns: int | None = None,
    batch_shape: Any = None,
    dtype: Any = _dt.float32,
    name: str | None = None,
) -> Tensor:
    """Identity matrices (``num_rows`` x ``num_columns``), stacked over ``batch_shape``."""
    from .array import constant

    if any(isinstance(v, Tensor) for v in (num_rows, num_columns, batch_shape)):
        raise TypeError("eye: sizes must be static ints in hetbed")
    m = np.eye(int(num_rows), int(num_rows if num_columns is None else num_columns))
    if batch_shape is not None:
        m = np.broadcast_to(m, tuple(int(b) for b in batch_shape) + m.shape)
    return constant(np.array(m, dtype=_dt.as_dtype(dtype).np), name=name or "eye")


def linspace(start: Any, stop: Any, num: Any, name: str | None = None, axis: int = 0) -> Tensor:
    """``num`` evenly spaced values from ``start`` to ``stop`` inclusive (scalars)."""
    from ..graph import name_scope
    from .array import cast, constant
    from .manip import range_
    from .math import add, divide, maximum, subtract

    if axis != 0:
        raise InvalidArgumentError("linspace: only axis=0 is supported")
    if not any(isinstance(v, Tensor) or hasattr(v, "_as_graph_element") for v in (start, stop)):
        dt = np.asarray(start).dtype if isinstance(start, np.ndarray | np.floating) else None
        dt = dt if dt is not None and dt.kind == "f" else np.dtype(np.float32)
        if not isinstance(num, Tensor):
            v = np.linspace(start, stop, int(num)).astype(dt)
            return constant(v, name=name or "LinSpace")
        start = constant(np.asarray(start, dtype=dt))
    with name_scope(name or "LinSpace"):
        start = convert_to_tensor(start)
        stop = (
            convert_to_tensor(stop, dtype=start.dtype)
            if isinstance(stop, Tensor)
            else (convert_to_tensor(np.asarray(stop, dtype=start.dtype.np)))
        )
        n = convert_to_tensor(num) if isinstance(num, Tensor) else int(num)
        steps = cast(range_(n), start.dtype)
        one = np.asarray(1, dtype=start.dtype.np)
        denom = maximum(subtract(cast(n, start.dtype), one), one)
        return add(start, multiply(steps, divide(subtract(stop, start), denom)))


def cross(a: Any, b: Any, name: str | None = None) -> Tensor:
    """TF1's ``tf.cross`` (``tf.linalg.cross``): pairwise cross products of 3-vectors along the
    last axis."""
    from ..graph import name_scope
    from .manip import stack
    from .math import subtract

    x, y = convert_to_tensor(a), convert_to_tensor(b)
    for t in (x, y):
        if t.shape.ndims is not None and t.shape.dims[-1] not in (None, 3):
            raise InvalidArgumentError(f"cross: the last dimension must be 3, got {t.shape}")
    with name_scope(name or "Cross"):
        xs = [x[..., i] for i in range(3)]
        ys = [y[..., i] for i in range(3)]
        return stack(
            [
                subtract(multiply(xs[1], ys[2]), multiply(xs[2], ys[1])),
                subtract(multiply(xs[2], ys[0]), multiply(xs[0], ys[2])),
                subtract(multiply(xs[0], ys[1]), multiply(xs[1], ys[0])),
            ],
            axis=-1,
        )


# ---- WP7: gradients of Qr, Svd and SelfAdjointEigV2 ---------------------------------------------


def _t(x: Tensor) -> Tensor:
    return matrix_transpose(x)


def _mm(a: Tensor, b: Tensor, ta: bool = False, tb: bool = False) -> Tensor:
    return matmul(a, b, transpose_a=ta, transpose_b=tb)


def _gap_inverse(d: Tensor) -> Tensor:
    """F[..., i, j] = 1 / (d_j - d_i) off the diagonal, 0 on it (d: [..., k])."""
    from .manip import expand_dims
    from .math import add, ones_like, reciprocal, subtract, zeros_like

    diff = subtract(expand_dims(d, -2), expand_dims(d, -1))
    return matrix_set_diag(
        reciprocal(add(diff, matrix_diag(ones_like(d)))), zeros_like(d)
    )  # fmt: skip


def _need_rank(op: Any) -> None:
    if op.inputs[0].shape.ndims is None or None in op.inputs[0].shape.dims[-2:]:
        raise InvalidArgumentError(
            f"{op.type} {op.name!r}: its gradient needs a known rank and matrix shape, got "
            f"{op.inputs[0].shape}"
        )


@SelfAdjointEigV2.gradient
def _eigh_grad(op, ge, gv=None):
    """A = V diag(e) V^T: dA = V (diag(ge) + F o (V^T gv)) V^T, folded onto the lower triangle
    (the only part the kernel reads)."""
    from .math import add, multiply

    _need_rank(op)
    if op.attrs["compute_v"]:
        e, v = op.outputs
        inner = add(matrix_diag(ge), multiply(_gap_inverse(e), _mm(v, gv, ta=True)))
    else:
        e, v = self_adjoint_eig(op.inputs[0])
        inner = matrix_diag(ge)
    g = _mm(v, _mm(inner, v, tb=True))
    full = add(g, _t(g))  # an entry below the diagonal stands for itself and its mirror
    lower = matrix_band_part(full, -1, 0)
    return [matrix_set_diag(lower, multiply(matrix_diag_part(full), 0.5))]


@Svd.gradient
def _svd_grad(op, gs, gu=None, gv=None):
    """A = U diag(s) V^T (thin): dA = U [(F o (U^T gU - gU^T U)) S + diag(gs)
    + S (F o (V^T gV - gV^T V))] V^T + (I - U U^T) gU S^-1 V^T + U S^-1 gV^T (I - V V^T),
    F_ij = 1 / (s_j^2 - s_i^2)."""
    from .math import add, multiply, reciprocal, subtract

    _need_rank(op)
    m, n = op.inputs[0].shape.dims[-2:]
    if not op.attrs["compute_uv"]:
        s, u, v = svd(op.inputs[0])
        return [_mm(multiply(u, _expand(gs)), v, tb=True)]
    if op.attrs["full_matrices"] and m != n:
        raise InvalidArgumentError(
            f"Svd {op.name!r}: no gradient with full_matrices=True for a non-square input "
            f"{op.inputs[0].shape}"
        )
    s, u, v = op.outputs
    f = _gap_inverse(multiply(s, s))
    j = multiply(f, subtract(_mm(u, gu, ta=True), _mm(gu, u, ta=True)))
    k = multiply(f, subtract(_mm(v, gv, ta=True), _mm(gv, v, ta=True)))
    sd = matrix_diag(s)
    core = add(add(_mm(j, sd), matrix_diag(gs)), _mm(sd, k))
    out = _mm(u, _mm(core, v, tb=True))
    inv_s = _expand(reciprocal(s))
    if m > n:  # (I - U U^T) gU S^-1 V^T
        proj = subtract(gu, _mm(u, _mm(u, gu, ta=True)))
        out = add(out, _mm(multiply(proj, inv_s), v, tb=True))
    if n > m:  # U S^-1 gV^T (I - V V^T)
        proj = subtract(gv, _mm(v, _mm(v, gv, ta=True)))
        out = add(out, _mm(multiply(u, inv_s), proj, tb=True))
    return [out]


def _expand(x: Tensor) -> Tensor:
    """[..., k] -> [..., 1, k]: scales the columns of a matrix when multiplied."""
    from .manip import expand_dims

    return expand_dims(x, -2)


@Qr.gradient
def _qr_grad(op, gq, gr):
    """A = QR with m >= n (reduced, or square): M = R gR^T - gQ^T Q and
    dA = (gQ + Q sym_lower(M)) R^-T, sym_lower copying M's lower triangle to its upper."""
    from .math import add, subtract

    _need_rank(op)
    m, n = op.inputs[0].shape.dims[-2:]
    if m < n or (op.attrs["full_matrices"] and m != n):
        raise InvalidArgumentError(
            f"Qr {op.name!r}: a gradient needs rows >= columns (and full_matrices=False unless "
            f"square), got {op.inputs[0].shape}"
        )
    q, r = op.outputs
    mm = subtract(_mm(r, gr, tb=True), _mm(gq, q, ta=True))
    sym = add(matrix_band_part(mm, -1, 0), _t(_strict_lower(mm)))
    b = add(gq, _mm(q, sym))
    # X R^T = B  <=>  R X^T = B^T (R upper triangular)
    return [_t(matrix_triangular_solve(r, _t(b), lower=False))]


def _strict_lower(x: Tensor) -> Tensor:
    from .math import subtract

    return subtract(matrix_band_part(x, -1, 0), matrix_diag(matrix_diag_part(x)))
