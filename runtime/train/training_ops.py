"""Fused optimizer updates as ops (TF1's ``training_ops``): one op updates a variable and its slots.

Every op takes the variable and its slots as references (VarHandles), hyper-parameters as scalar
tensors of the variable's dtype, and the gradient. It updates the buffers in place and returns the
variable's buffer. The formulas are TensorFlow's kernels (``training_ops.cc``), written once per
optimizer as a *body* over flat arrays, ``body(xp, scratch, grad, var, *slots, *hyper)``:

* dense ``Apply*`` kernels run the body over the whole arrays in cache-sized blocks, with one
  scratch buffer kept per op between steps, so a step allocates nothing;
* sparse ``SparseApply*`` kernels take the rows of an IndexedSlices gradient, sum the rows of
  duplicate indices (as TF1's ``Optimizer._apply_sparse_duplicate_indices`` does), gather those
  rows of the variable and slots, run the same body on them and scatter them back. The gradient is
  never densified and other rows are not touched (except by TF1's Adam, see ``SparseApplyAdam``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import Tensor, TensorShape
from ..ops import intraop
from ..ops.manip import _add_at
from ..ops.state import _locking, _ref_of
from ..registry import Cost, apply, defop, nbytes, numel

# Elements per pass of a dense update: the block of every operand (var, slots, grad, scratch)
# stays in cache while the body's passes run over it. Measured (2-core EPYC, 32 MiB L3): Adam on
# 10M floats 17 ms blocked vs 30 ms unblocked; 1M floats 1.8 ms vs 3.4 ms for plain numpy.
BLOCK = 1 << 17


# ---- shape and cost rules shared by every update op -------------------------------------------


def _update_shape(n_refs: int, grad: int, indices: int | None = None) -> Callable:
    """Shape rule: refs share the variable's shape and dtype, hypers are scalars, grad fits."""

    def shape(op: Any) -> list:
        var = op.inputs[0]
        dt = var.dtype
        if not dt.is_floating:
            raise InvalidArgumentError(
                f"{op.type}: variable {var.op.name} must be float16/32/64, got {dt.name}"
            )
        for i, t in enumerate(op.inputs):
            if i != indices and t.dtype != dt:
                raise InvalidArgumentError(
                    f"{op.type}: input {i} ({t.name}) is {t.dtype.name} but variable "
                    f"{var.op.name} is {dt.name}"
                )
        for t in op.inputs[1:n_refs]:
            if not t.shape.is_compatible_with(var.shape):
                raise InvalidArgumentError(
                    f"{op.type}: slot {t.op.name} has shape {t.shape}, variable {var.op.name} "
                    f"has shape {var.shape}"
                )
        for i, t in enumerate(op.inputs):
            if i >= n_refs and i not in (grad, indices) and t.shape.ndims not in (None, 0):
                raise InvalidArgumentError(
                    f"{op.type}: hyper-parameter {t.name} must be a scalar, got shape {t.shape}"
                )
        g = op.inputs[grad]
        if indices is None:
            want = var.shape
        else:
            idx = op.inputs[indices]
            if not idx.dtype.is_integer:
                raise InvalidArgumentError(
                    f"{op.type}: indices {idx.name} must be int32/int64, got {idx.dtype.name}"
                )
            if var.shape.ndims == 0:
                raise InvalidArgumentError(
                    f"{op.type}: a sparse update needs a variable of rank >= 1; "
                    f"{var.op.name} is a scalar"
                )
            if idx.shape.dims is None or var.shape.dims is None:
                want = TensorShape(None)
            else:
                want = TensorShape(list(idx.shape.dims) + list(var.shape.dims[1:]))
        if not g.shape.is_compatible_with(want):
            what = "variable" if indices is None else "indices.shape + variable.shape[1:]"
            raise InvalidArgumentError(
                f"{op.type}: gradient {g.name} has shape {g.shape}, expected {what} = {want} "
                f"for variable {var.op.name}"
            )
        return [(var.shape, dt)]

    return shape


def _update_cost(flops: float, n_refs: int, grad: int, indices: int | None = None) -> Callable:
    """Cost rule: ``flops`` per updated element; refs read and written, other inputs read."""

    def cost(op: Any, ins: list, outs: list) -> Cost:
        size = op.inputs[0].dtype.size
        touched = numel(ins[0]) if indices is None else numel(ins[grad])
        others = sum(nbytes(s, t.dtype) for s, t in zip(ins[n_refs:], op.inputs[n_refs:]))
        ref_bytes = float(n_refs * touched * size)
        return Cost(flops * touched, ref_bytes + others, ref_bytes)

    return cost


def _define(name: str, n_refs: int, grad: int, flops: float, indices: int | None = None):
    d = defop(
        name,
        shape=_update_shape(n_refs, grad, indices),
        cost=_update_cost(flops, n_refs, grad, indices),
        stateful=True,
        differentiable=False,
    )
    #: which inputs are the variable and its slots (the first n), the gradient and the row
    #: indices; the others are hyperparameters (a learning rate, beta powers, ...)
    d.update_inputs = (n_refs, grad, indices)
    return d


# ---- the two drivers ---------------------------------------------------------------------------


def _scratch(ctx: Any, n: int, dtype: Any) -> Any:
    """A flat buffer of at least ``n`` elements owned by this call (kept per op across steps)."""
    pool = ctx.state
    if pool is None:
        pool = ctx.state = []
    try:
        buf = pool.pop()  # atomic: concurrent steps of one op never share a buffer
    except IndexError:
        buf = None
    if buf is None or buf.size < n or buf.dtype != dtype:
        buf = ctx.xp.empty(max(n, 1), dtype)
    return buf


def _release(ctx: Any, buf: Any) -> None:
    if len(ctx.state) < 4:
        ctx.state.append(buf)


def dense_update(ctx: Any, handles: tuple, grad: Any, body: Callable, *hyper: Any) -> Any:
    """Run ``body(xp, s, g, var, *slots, *hyper)`` over the whole variable, block by block."""
    arrays = [h.read() for h in handles]
    var = arrays[0]
    if grad is not None and grad.shape != var.shape:
        raise InvalidArgumentError(
            f"{ctx.op.type}: gradient of shape {tuple(grad.shape)} does not match variable "
            f"{handles[0].name} of shape {tuple(var.shape)}"
        )
    for h, a in zip(handles[1:], arrays[1:]):
        if a.shape != var.shape:
            raise InvalidArgumentError(
                f"{ctx.op.type}: slot {h.name} has shape {tuple(a.shape)}, variable "
                f"{handles[0].name} has shape {tuple(var.shape)}"
            )
    xp = ctx.xp
    n = var.size
    with _locking(ctx, handles[0]):
        arrays = [h.writable() for h in handles]  # (a copy of a buffer a Send is streaming)
        var = arrays[0]
        if not all(a.flags.c_contiguous for a in arrays):  # cannot flatten in place: one pass
            s = xp.empty_like(var)
            body(xp, s, grad, *arrays, *hyper)
            return var
        flats = [a.reshape(-1) for a in arrays]
        g = None if grad is None else grad.reshape(-1)
        step = BLOCK if xp is np else max(n, 1)
        bufs: list = []  # one scratch buffer per thread running blocks

        def scratch() -> Any:
            b = _scratch(ctx, min(n, step), var.dtype)
            bufs.append(b)
            return b

        def block(k: int, buf: Any) -> None:
            i = k * step
            j = min(i + step, n)
            blocks = [f[i:j] for f in flats]
            body(xp, buf[: j - i], None if g is None else g[i:j], *blocks, *hyper)

        nblocks = -(-n // step)
        # elementwise, block by block: the blocks may run on the intra-op threads, the result
        # the same whichever thread ran which
        threads = intraop.threads_for(nblocks) if xp is np else 1
        try:
            intraop.run_blocks(nblocks, threads, scratch, block)
        finally:
            for b in bufs:
                _release(ctx, b)
    return var


def unique_rows(ctx: Any, h: Any, var: Any, grad: Any, indices: Any) -> tuple[Any, Any]:
    """(unique row indices, their summed gradient rows), after checking shapes and ranges."""
    idx = indices.reshape(-1)
    tail = tuple(var.shape[1:])
    if grad.shape != tuple(indices.shape) + tail:
        raise InvalidArgumentError(
            f"{ctx.op.type}: gradient values of shape {tuple(grad.shape)} do not match "
            f"indices {tuple(indices.shape)} + variable {h.name} rows {tail}"
        )
    g = grad.reshape((idx.size,) + tail)
    if idx.size:
        lo, hi = int(idx.min()), int(idx.max())
        if lo < 0 or hi >= var.shape[0]:
            bad = lo if lo < 0 else hi
            raise InvalidArgumentError(
                f"{ctx.op.type}: index {bad} out of range for variable {h.name} with "
                f"{var.shape[0]} rows"
            )
    if idx.size > 1:
        xp = ctx.xp
        uniq, inverse = xp.unique(idx, return_inverse=True)
        if uniq.size < idx.size:
            summed = xp.zeros((uniq.size,) + tail, g.dtype)
            _add_at(xp, summed, inverse.reshape(-1), g)
            return uniq, summed
    return idx, g


def sparse_update(
    ctx: Any, handles: tuple, grad: Any, indices: Any, body: Callable, *hyper: Any
) -> Any:
    """Run ``body`` on the rows named by ``indices`` of the variable and its slots."""
    arrays = [h.read() for h in handles]
    var = arrays[0]
    idx, g = unique_rows(ctx, handles[0], var, grad, indices)
    with _locking(ctx, handles[0]):
        arrays = [h.writable() for h in handles]  # (a copy of a buffer a Send is streaming)
        var = arrays[0]
        rows = [a[idx] for a in arrays]  # gathered copies
        body(ctx.xp, ctx.xp.empty_like(g), g, *rows, *hyper)
        for a, r in zip(arrays, rows):
            a[idx] = r
    return var


# ---- the formulas (TensorFlow's training_ops.cc), one body per optimizer --------------------


def _sgd_body(xp, s, g, var, lr):
    # var -= lr * grad
    lr_a = np.asarray(lr) if xp is np else None
    if (
        lr_a is not None
        and lr_a.ndim == 0
        and var.ndim == g.ndim == 1
        and var.size >= _ONE_PASS_MIN
        and var.dtype in _ONE_PASS
        and g.dtype == var.dtype == lr_a.dtype
    ):  # one compiled pass over the block (numba: imported on first use)
        from ..ops import nn_cpu

        nn_cpu.sub_scaled(var, g, lr_a[()])
        return
    xp.multiply(g, lr, out=s)
    var -= s


_ONE_PASS = (np.dtype(np.float32), np.dtype(np.float64))
#: the smallest block updated in one compiled pass. The pass is about twice as fast as numpy's
#: two at every size (measured: 0.4 against 0.9-1.5 us up to 1,024 elements, 28 against 54 us
#: at 262,144), but its first use imports numba, 0.35-0.7 s (more where its cache must be
#: compiled), which a distributed job's PS task paid inside its first step; below this size a
#: step saves at most about 2 us by it
_ONE_PASS_MIN = 1 << 14


def _momentum_body(xp, s, g, var, accum, lr, momentum, nesterov):
    # accum = accum * momentum + grad
    # var -= lr * accum                           (plain)
    # var -= lr * grad + lr * momentum * accum     (Nesterov)
    accum *= momentum
    accum += g
    if nesterov:
        xp.multiply(accum, momentum, out=s)
        s += g
        s *= lr
    else:
        xp.multiply(accum, lr, out=s)
    var -= s


def _adagrad_body(xp, s, g, var, accum, lr):
    # accum += grad^2; var -= lr * grad / sqrt(accum)
    xp.multiply(g, g, out=s)
    accum += s
    xp.sqrt(accum, out=s)
    xp.divide(g, s, out=s)
    s *= lr
    var -= s


def _adam_moments_body(xp, s, g, m, v, one_minus_b1, one_minus_b2):
    # m += (grad - m) * (1 - beta1); v += (grad^2 - v) * (1 - beta2)
    xp.subtract(g, m, out=s)
    s *= one_minus_b1
    m += s
    xp.multiply(g, g, out=s)
    s -= v
    s *= one_minus_b2
    v += s


def _adam_var_body(xp, s, g, var, m, v, lr_t, eps):
    # var -= lr_t * m / (sqrt(v) + epsilon)
    xp.sqrt(v, out=s)
    s += eps
    xp.divide(m, s, out=s)
    s *= lr_t
    var -= s


def _adam_body(xp, s, g, var, m, v, one_minus_b1, one_minus_b2, lr_t, eps):
    _adam_moments_body(xp, s, g, m, v, one_minus_b1, one_minus_b2)
    _adam_var_body(xp, s, g, var, m, v, lr_t, eps)


def _adam_hyper(xp, beta1_power, beta2_power, lr, beta1, beta2, eps):
    one = beta1.dtype.type(1)
    lr_t = lr * xp.sqrt(one - beta2_power) / (one - beta1_power)
    return one - beta1, one - beta2, lr_t, eps


def _ms_update(xp, s, g, ms, one_minus_rho):
    # ms += (grad^2 - ms) * (1 - rho)
    xp.multiply(g, g, out=s)
    s -= ms
    s *= one_minus_rho
    ms += s


def _rmsprop_body(xp, s, g, var, ms, mom, lr, one_minus_rho, momentum, eps):
    # mom = mom * momentum + lr * grad / sqrt(ms + epsilon); var -= mom
    _ms_update(xp, s, g, ms, one_minus_rho)
    xp.add(ms, eps, out=s)
    xp.sqrt(s, out=s)
    xp.divide(g, s, out=s)
    s *= lr
    mom *= momentum
    mom += s
    var -= mom


def _centered_rmsprop_body(xp, s, g, var, mg, ms, mom, lr, one_minus_rho, momentum, eps):
    # mg += (grad - mg) * (1 - rho)
    # mom = mom * momentum + lr * grad / sqrt(ms - mg^2 + epsilon); var -= mom
    _ms_update(xp, s, g, ms, one_minus_rho)
    xp.subtract(g, mg, out=s)
    s *= one_minus_rho
    mg += s
    xp.multiply(mg, mg, out=s)
    xp.subtract(ms, s, out=s)
    s += eps
    xp.sqrt(s, out=s)
    xp.divide(g, s, out=s)
    s *= lr
    mom *= momentum
    mom += s
    var -= mom


def _one_minus(x: Any) -> Any:
    return x.dtype.type(1) - x


# ---- gradient descent ---------------------------------------------------------------------------

ApplyGradientDescent = _define("ApplyGradientDescent", 1, grad=2, flops=2)


@ApplyGradientDescent.kernel("cpu", "gpu", dtypes=_dt.FLOATS)
def _apply_gd(ctx, var, alpha, delta):
    return dense_update(ctx, (var,), delta, _sgd_body, alpha)


SparseApplyGradientDescent = _define("SparseApplyGradientDescent", 1, grad=2, flops=2, indices=3)


@SparseApplyGradientDescent.kernel("cpu", "gpu", dtypes=_dt.FLOATS)
def _sparse_apply_gd(ctx, var, alpha, grad, indices):
    return sparse_update(ctx, (var,), grad, indices, _sgd_body, alpha)


# ---- momentum -------------------------------------------------------------------------------------

ApplyMomentum = _define("ApplyMomentum", 2, grad=3, flops=5)


@ApplyMomentum.kernel("cpu", "gpu", dtypes=_dt.FLOATS)
def _apply_momentum(ctx, var, accum, lr, grad, momentum):
    nesterov = ctx.attrs.get("use_nesterov", False)
    return dense_update(ctx, (var, accum), grad, _momentum_body, lr, momentum, nesterov)


SparseApplyMomentum = _define("SparseApplyMomentum", 2, grad=3, flops=5, indices=4)


@SparseApplyMomentum.kernel("cpu", "gpu", dtypes=_dt.FLOATS)
def _sparse_apply_momentum(ctx, var, accum, lr, grad, indices, momentum):
    nesterov = ctx.attrs.get("use_nesterov", False)
    return sparse_update(ctx, (var, accum), grad, indices, _momentum_body, lr, momentum, nesterov)


# ---- Adagrad --------------------------------------------------------------------------------------

ApplyAdagrad = _define("ApplyAdagrad", 2, grad=3, flops=12)


@ApplyAdagrad.kernel("cpu", "gpu", dtypes=_dt.FLOATS)
def _apply_adagrad(ctx, var, accum, lr, grad):
    return dense_update(ctx, (var, accum), grad, _adagrad_body, lr)


SparseApplyAdagrad = _define("SparseApplyAdagrad", 2, grad=3, flops=12, indices=4)


@SparseApplyAdagrad.kernel("cpu", "gpu", dtypes=_dt.FLOATS)
def _sparse_apply_adagrad(ctx, var, accum, lr, grad, indices):
    return sparse_update(ctx, (var, accum), grad, indices, _adagrad_body, lr)


# ---- Adam -------------------------------------------------------------------------------------------

ApplyAdam = _define("ApplyAdam", 3, grad=9, flops=18)


@ApplyAdam.kernel("cpu", "gpu", dtypes=_dt.FLOATS)
def _apply_adam(ctx, var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad):
    hyper = _adam_hyper(ctx.xp, beta1_power, beta2_power, lr, beta1, beta2, epsilon)
    return dense_update(ctx, (var, m, v), grad, _adam_body, *hyper)


# SparseApplyAdam has two semantics, chosen by the ``lazy`` attr:
#  * lazy=False (TF1's AdamOptimizer with an IndexedSlices gradient): m and v decay on *every* row
#    (m *= beta1, v *= beta2), the rows of the gradient are added (m[i] += (1-beta1) g,
#    v[i] += (1-beta2) g^2), and every row of var moves by lr_t * m / (sqrt(v) + eps). Its cost is
#    dense in the variable even though the gradient stays sparse.
#  * lazy=True (tf.contrib.opt.LazyAdamOptimizer): only the gradient's rows of m, v and var change.
SparseApplyAdam = _define("SparseApplyAdam", 3, grad=9, flops=18, indices=10)


@SparseApplyAdam.kernel("cpu", "gpu", dtypes=_dt.FLOATS)
def _sparse_apply_adam(
    ctx, var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, indices
):
    omb1, omb2, lr_t, eps = _adam_hyper(ctx.xp, beta1_power, beta2_power, lr, beta1, beta2, epsilon)
    if ctx.attrs.get("lazy", False):
        return sparse_update(ctx, (var, m, v), grad, indices, _adam_body, omb1, omb2, lr_t, eps)
    idx, g = unique_rows(ctx, var, var.read(), grad, indices)
    with _locking(ctx, var):
        marr, varr_v = m.writable(), v.writable()
        marr *= beta1
        marr[idx] += g * omb1
        varr_v *= beta2
        varr_v[idx] += (g * g) * omb2
    return dense_update(ctx, (var, m, v), None, _adam_var_body, lr_t, eps)


@SparseApplyAdam.cost
def _sparse_adam_cost(op, ins, outs):
    if op.attrs.get("lazy", False):
        return _update_cost(18, 3, 9, 10)(op, ins, outs)
    size = op.inputs[0].dtype.size
    n, k = numel(ins[0]), numel(ins[9])
    dense = float(3 * n * size)
    return Cost(10.0 * n + 8.0 * k, dense + nbytes(ins[9], op.inputs[9].dtype), dense)


# ---- RMSProp ---------------------------------------------------------------------------------------

ApplyRMSProp = _define("ApplyRMSProp", 3, grad=7, flops=16)


@ApplyRMSProp.kernel("cpu", "gpu", dtypes=_dt.FLOATS)
def _apply_rmsprop(ctx, var, ms, mom, lr, rho, momentum, epsilon, grad):
    hyper = (lr, _one_minus(rho), momentum, epsilon)
    return dense_update(ctx, (var, ms, mom), grad, _rmsprop_body, *hyper)


SparseApplyRMSProp = _define("SparseApplyRMSProp", 3, grad=7, flops=16, indices=8)


@SparseApplyRMSProp.kernel("cpu", "gpu", dtypes=_dt.FLOATS)
def _sparse_apply_rmsprop(ctx, var, ms, mom, lr, rho, momentum, epsilon, grad, indices):
    hyper = (lr, _one_minus(rho), momentum, epsilon)
    return sparse_update(ctx, (var, ms, mom), grad, indices, _rmsprop_body, *hyper)


ApplyCenteredRMSProp = _define("ApplyCenteredRMSProp", 4, grad=8, flops=22)


@ApplyCenteredRMSProp.kernel("cpu", "gpu", dtypes=_dt.FLOATS)
def _apply_centered_rmsprop(ctx, var, mg, ms, mom, lr, rho, momentum, epsilon, grad):
    hyper = (lr, _one_minus(rho), momentum, epsilon)
    return dense_update(ctx, (var, mg, ms, mom), grad, _centered_rmsprop_body, *hyper)


SparseApplyCenteredRMSProp = _define("SparseApplyCenteredRMSProp", 4, grad=8, flops=22, indices=9)


@SparseApplyCenteredRMSProp.kernel("cpu", "gpu", dtypes=_dt.FLOATS)
def _sparse_apply_centered_rmsprop(
    ctx, var, mg, ms, mom, lr, rho, momentum, epsilon, grad, indices
):
    hyper = (lr, _one_minus(rho), momentum, epsilon)
    return sparse_update(ctx, (var, mg, ms, mom), grad, indices, _centered_rmsprop_body, *hyper)


# ---- public builders (TF1's training_ops / raw_ops names) ---------------------------------------


def _build(op_type: str, refs: list, others: list, attrs: dict, name: str | None) -> Tensor:
    """Add an update op: ``refs`` are variables (or ref tensors), ``others`` tensors or values."""
    rs = [_ref_of(r) for r in refs]
    dt = rs[0].dtype
    ins: list = list(rs)
    for x in others:
        if isinstance(x, Tensor) or hasattr(x, "_as_graph_element"):
            ins.append(x)
        else:
            arr = np.asarray(x)
            ins.append(arr if arr.dtype.kind in "iu" and arr.ndim else arr.astype(dt.np))
    return apply(op_type, ins, attrs, name or op_type)


def apply_gradient_descent(var, alpha, delta, use_locking=False, name=None) -> Tensor:
    return _build("ApplyGradientDescent", [var], [alpha, delta], {"use_locking": use_locking}, name)


def sparse_apply_gradient_descent(var, alpha, grad, indices, use_locking=False, name=None):
    return _build(
        "SparseApplyGradientDescent",
        [var],
        [alpha, grad, indices],
        {"use_locking": use_locking},
        name,
    )


def apply_momentum(
    var, accum, lr, grad, momentum, use_locking=False, use_nesterov=False, name=None
) -> Tensor:
    attrs = {"use_locking": use_locking, "use_nesterov": use_nesterov}
    return _build("ApplyMomentum", [var, accum], [lr, grad, momentum], attrs, name)


def sparse_apply_momentum(
    var, accum, lr, grad, indices, momentum, use_locking=False, use_nesterov=False, name=None
) -> Tensor:
    attrs = {"use_locking": use_locking, "use_nesterov": use_nesterov}
    return _build("SparseApplyMomentum", [var, accum], [lr, grad, indices, momentum], attrs, name)


def apply_adagrad(var, accum, lr, grad, use_locking=False, name=None) -> Tensor:
    return _build("ApplyAdagrad", [var, accum], [lr, grad], {"use_locking": use_locking}, name)


def sparse_apply_adagrad(var, accum, lr, grad, indices, use_locking=False, name=None) -> Tensor:
    return _build(
        "SparseApplyAdagrad",
        [var, accum],
        [lr, grad, indices],
        {"use_locking": use_locking},
        name,
    )


def apply_adam(
    var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, use_locking=False,
    name=None,
) -> Tensor:  # fmt: skip
    others = [beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad]
    return _build("ApplyAdam", [var, m, v], others, {"use_locking": use_locking}, name)


def sparse_apply_adam(
    var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, indices,
    use_locking=False, lazy=False, name=None,
) -> Tensor:  # fmt: skip
    others = [beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, indices]
    attrs = {"use_locking": use_locking, "lazy": lazy}
    return _build("SparseApplyAdam", [var, m, v], others, attrs, name)


def apply_rms_prop(
    var, ms, mom, lr, rho, momentum, epsilon, grad, use_locking=False, name=None
) -> Tensor:
    others = [lr, rho, momentum, epsilon, grad]
    return _build("ApplyRMSProp", [var, ms, mom], others, {"use_locking": use_locking}, name)


def sparse_apply_rms_prop(
    var, ms, mom, lr, rho, momentum, epsilon, grad, indices, use_locking=False, name=None
) -> Tensor:
    others = [lr, rho, momentum, epsilon, grad, indices]
    return _build("SparseApplyRMSProp", [var, ms, mom], others, {"use_locking": use_locking}, name)


def apply_centered_rms_prop(
    var, mg, ms, mom, lr, rho, momentum, epsilon, grad, use_locking=False, name=None
) -> Tensor:
    others = [lr, rho, momentum, epsilon, grad]
    attrs = {"use_locking": use_locking}
    return _build("ApplyCenteredRMSProp", [var, mg, ms, mom], others, attrs, name)


def sparse_apply_centered_rms_prop(
    var, mg, ms, mom, lr, rho, momentum, epsilon, grad, indices, use_locking=False, name=None
) -> Tensor:
    others = [lr, rho, momentum, epsilon, grad, indices]
    attrs = {"use_locking": use_locking}
    return _build("SparseApplyCenteredRMSProp", [var, mg, ms, mom], others, attrs, name)
