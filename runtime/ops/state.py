"""State ops: variables are buffers owned by a session's device, read and updated in place."""

from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import FailedPreconditionError, InvalidArgumentError, OutOfRangeError
from ..graph import Tensor, TensorShape, control_dependencies
from ..registry import Cost, apply, apply_op, convert_to_tensor, defop, nbytes, numel
from .manip import _add_at


class VarHandle:
    """The mutable storage behind one variable in one session (the value of a VariableV2 op)."""

    __slots__ = ("name", "dtype", "shape", "value", "lock", "_lent")

    def __init__(self, name: str, dtype: Any, shape: TensorShape):
        self.name = name
        self.dtype = dtype
        self.shape = shape
        self.value: Any = None
        self.lock = threading.Lock()
        self._lent: list | None = None  # weak references to borrowers of the current buffer

    def lend(self, borrower: Any) -> None:
        """``borrower`` reads the current buffer (or a view of it) for a while without a copy
        of its own (a Send streaming it to another task): until its ``borrowing`` is false or it
        is freed, the next in-place update writes to a copy instead (``writable``), so that the
        borrower sees the value as of the lending. Lend under ``lock`` where updates take it."""
        lent = self._lent
        if lent is None:
            self._lent = [weakref.ref(borrower)]
        else:
            lent.append(weakref.ref(borrower))

    def writable(self) -> Any:
        """The buffer to update in place (what every kernel that updates a variable in place
        takes, under ``lock`` with ``use_locking``): the current one, or, while it is lent
        (``lend``), a copy that becomes the variable's buffer (copy on write)."""
        v = self.read()
        lent = self._lent
        if lent is not None:
            self._lent = None
            for ref in lent:
                b = ref()
                if b is not None and b.borrowing:
                    v = self.value = v.copy()
                    break
        return v

    def snapshot(self, value: Any) -> Any:
        """A private copy of ``value`` (this variable's buffer or a view of it) taken under the
        variable's lock: updates run with ``use_locking`` are then seen whole or not at all."""
        with self.lock:
            return value.copy()

    def read(self) -> Any:
        v = self.value
        if v is None:
            raise FailedPreconditionError(
                f"attempting to use uninitialized value {self.name}; "
                "run hb.global_variables_initializer() (or the variable's initializer) first"
            )
        return v

    def set(self, value: Any, validate_shape: bool = True) -> Any:
        """Bind a copy of ``value``, cast to the variable's dtype; the old buffer is left untouched.

        The variable always owns its buffer (a writeable, C-contiguous array, also for scalars):
        in-place updates (assign_add, scatter_*, optimizers) must never write into a fed array,
        another op's output or a fetched value.
        """
        if validate_shape and not self.shape.is_compatible_with(tuple(np.shape(value))):
            raise InvalidArgumentError(
                f"assign to {self.name}: value of shape {tuple(np.shape(value))} does not match "
                f"the variable's shape {self.shape}"
            )
        if isinstance(value, (np.ndarray, np.generic)) or not hasattr(value, "astype"):
            value = np.array(value, dtype=self.dtype.np, order="C", copy=True)
        else:  # a device array (cupy): copy on its device
            value = value.astype(self.dtype.np, order="C", copy=True)
        self.value = value
        self._lent = None  # lent buffers are the old one
        return value


#: arrays below this many bytes are copied without looking for their variable: numpy updates
#: them without releasing the GIL, so no copy can see half an update
LOCKED_COPY_BYTES = 2048


def owner_of(value: Any, containers: Any) -> VarHandle | None:
    """The variable (among the resource ``containers``: dicts of name -> resource) whose buffer
    ``value`` is or views, or None."""
    if not isinstance(value, np.ndarray):
        return None
    root = value
    while isinstance(root.base, np.ndarray):
        root = root.base
    for res in list(containers):
        for h in list(res.values()):
            if isinstance(h, VarHandle) and h.value is root:
                return h
    return None


def snapshot(value: np.ndarray, containers: Any) -> np.ndarray:
    """A copy of ``value``; under its variable's lock when it is (a view of) a variable buffer
    large enough that an in-place update could be caught half done."""
    if value.nbytes >= LOCKED_COPY_BYTES:
        h = owner_of(value, containers)
        if h is not None:
            return h.snapshot(value)
    return value.copy()


#: update kernels hold the variable's lock only when built with ``use_locking``
_NO_LOCK = contextlib.nullcontext()


def _locking(ctx: Any, h: VarHandle) -> Any:
    return h.lock if ctx.attrs.get("use_locking") else _NO_LOCK


def _ref_cost(op, ins, outs):
    return Cost()


# ---- VariableV2 ----------------------------------------------------------------------------

VariableV2 = defop("VariableV2", stateful=True, is_ref=True, differentiable=False)


@VariableV2.shape
def _var_shape(op):
    return [(op.attrs["shape"], op.attrs["dtype"])]


@VariableV2.kernel("cpu", "gpu")
def _variable(ctx):
    h = ctx.state
    if h is None:
        key = ctx.attrs.get("shared_name") or ctx.op.name
        h = ctx.resources.get(key)
        if h is None:
            h = ctx.resources[key] = VarHandle(key, ctx.attrs["dtype"], ctx.attrs["shape"])
        ctx.state = h
    return h


VariableV2.cost(_ref_cost)


# ---- ReadVariable: dereference (the `var/read` op of TF1) ---------------------------------

ReadVariable = defop("ReadVariable", passes_sparse=True)


@ReadVariable.shape
def _read_shape(op):
    return [(op.inputs[0].shape, op.inputs[0].dtype)]


@ReadVariable.kernel("cpu", "gpu", aliases_input=True)
def _read(ctx, h):
    return h.read()


@ReadVariable.gradient
def _read_grad(op, g):
    return [g]


ReadVariable.cost(_ref_cost)


IsVariableInitialized = defop("IsVariableInitialized", differentiable=False)


@IsVariableInitialized.shape
def _is_init_shape(op):
    from .. import dtypes

    return [(TensorShape([]), dtypes.bool_)]


@IsVariableInitialized.kernel("cpu", "gpu")
def _is_init(ctx, h):
    return np.array(h.value is not None)


# ---- Assign and friends ----------------------------------------------------------------------


def _assign_shape(op):
    ref, val = op.inputs[0], op.inputs[1]
    if op.attrs.get("validate_shape", True) and not ref.shape.is_compatible_with(val.shape):
        raise InvalidArgumentError(
            f"{op.type}: value shape {val.shape} does not match variable {ref.op.name} shape {ref.shape}"
        )
    if ref.dtype != val.dtype:
        raise InvalidArgumentError(
            f"{op.type}: value dtype {val.dtype.name} does not match variable "
            f"{ref.op.name} dtype {ref.dtype.name}"
        )
    return [(ref.shape if op.attrs.get("validate_shape", True) else val.shape, ref.dtype)]


def _update_cost(op, ins, outs):
    """AssignAdd/AssignSub: one flop per element, read variable and value, write the variable."""
    b = nbytes(ins[1], op.inputs[1].dtype)
    return Cost(float(numel(ins[1])), 2.0 * b, float(b))


def _assign_cost(op, ins, outs):
    """Assign copies the value: no arithmetic, read and write it once."""
    b = nbytes(ins[1], op.inputs[1].dtype)
    return Cost(0.0, float(b), float(b))


Assign = defop("Assign", shape=_assign_shape, stateful=True, differentiable=False)


@Assign.kernel("cpu", "gpu")
def _assign(ctx, h, value):
    with h.lock:
        return h.set(value, ctx.attrs.get("validate_shape", True))


Assign.cost(_assign_cost)

AssignAdd = defop("AssignAdd", shape=_assign_shape, stateful=True, differentiable=False)


@AssignAdd.kernel("cpu", "gpu")
def _assign_add(ctx, h, value):
    with _locking(ctx, h):
        v = h.writable()
        v += value  # in place: readers holding the buffer see the new value, as in TF1
    return v


AssignAdd.cost(_update_cost)

AssignSub = defop("AssignSub", shape=_assign_shape, stateful=True, differentiable=False)


@AssignSub.kernel("cpu", "gpu")
def _assign_sub(ctx, h, value):
    with _locking(ctx, h):
        v = h.writable()
        v -= value
    return v


AssignSub.cost(_update_cost)


def _scatter_shape(op):
    ref, idx, upd = op.inputs
    if not idx.dtype.is_integer:
        raise InvalidArgumentError(f"{op.type}: indices must be int32/int64, got {idx.dtype.name}")
    if ref.shape.ndims == 0:
        raise InvalidArgumentError(
            f"{op.type}: variable {ref.op.name} is a scalar; scatter needs rank >= 1 (use assign)"
        )
    if ref.shape.ndims is not None and idx.shape.ndims is not None and upd.shape.ndims is not None:
        want = TensorShape(list(idx.shape.dims) + list(ref.shape.dims[1:]))
        if not want.is_compatible_with(upd.shape):
            raise InvalidArgumentError(
                f"{op.type}: updates shape {upd.shape} must be indices.shape + ref.shape[1:] = {want}"
            )
    if upd.dtype != ref.dtype:
        raise InvalidArgumentError(f"{op.type}: updates dtype {upd.dtype.name} != {ref.dtype.name}")
    return [(ref.shape, ref.dtype)]


def _scatter_cost(op, ins, outs):
    b = nbytes(ins[2], op.inputs[2].dtype)
    return Cost(float(numel(ins[2])), 2.0 * b, float(b))


def _check_rows(h, idx, name):
    """The variable's buffer to update rows of in place (``writable``), once ``idx`` is checked."""
    v = h.read()
    if idx.size and (idx.min() < 0 or idx.max() >= v.shape[0]):
        raise InvalidArgumentError(
            f"{name}: index {int(idx.max() if idx.max() >= v.shape[0] else idx.min())} "
            f"out of range for {h.name} with {v.shape[0]} rows"
        )
    return h.writable()


ScatterAdd = defop("ScatterAdd", shape=_scatter_shape, stateful=True, differentiable=False)


@ScatterAdd.kernel("cpu", "gpu")
def _scatter_add(ctx, h, idx, upd):
    with _locking(ctx, h):
        v = _check_rows(h, idx, ctx.op.name)
        _add_at(ctx.xp, v, idx, upd)
    return v


ScatterAdd.cost(_scatter_cost)

ScatterSub = defop("ScatterSub", shape=_scatter_shape, stateful=True, differentiable=False)


@ScatterSub.kernel("cpu", "gpu")
def _scatter_sub(ctx, h, idx, upd):
    with _locking(ctx, h):
        v = _check_rows(h, idx, ctx.op.name)
        if ctx.xp is np:
            np.subtract.at(v, idx, upd)
        else:
            _add_at(ctx.xp, v, idx, -upd)
    return v


ScatterSub.cost(_scatter_cost)

ScatterUpdate = defop("ScatterUpdate", shape=_scatter_shape, stateful=True, differentiable=False)


@ScatterUpdate.kernel("cpu", "gpu")
def _scatter_update(ctx, h, idx, upd):
    with _locking(ctx, h):
        v = _check_rows(h, idx, ctx.op.name)
        v[idx] = upd
    return v


ScatterUpdate.cost(_scatter_cost)


_CHAINED_UPDATES = ("Assign", "AssignAdd", "AssignSub")


def _ref_of(ref: Any) -> Tensor:
    r = getattr(ref, "_ref", None)
    if r is not None:
        return r
    if isinstance(ref, Tensor) and ref.op.op_def.is_ref:
        return ref
    if isinstance(ref, Tensor) and ref.op.type in _CHAINED_UPDATES:
        t = ref.op.inputs[0]
        while t.op.type in ("Switch", "RefSwitch", "Enter", "RefEnter", "Identity"):
            t = t.op.inputs[0]  # the variable as a cond or a loop took it in
        return _ref_of(t)
    raise TypeError(f"expected a variable, got {ref!r}")


def _after_update(ref: Any) -> Any:
    """TF1's update ops output the variable's ref, and a program may update that again
    (``tf.assign_add(tf.assign(v, v * d), x)``, baselines' K-FAC): the next update runs
    after the one whose output it was given."""
    if isinstance(ref, Tensor) and ref.op.type in _CHAINED_UPDATES:
        return control_dependencies([ref.op])
    return contextlib.nullcontext()


def assign(ref: Any, value: Any, validate_shape: bool = True, use_locking: bool = True, name=None):
    r = _ref_of(ref)
    v = convert_to_tensor(value, dtype=r.dtype) if not isinstance(value, Tensor) else value
    with _after_update(ref):
        return apply("Assign", [r, v], {"validate_shape": validate_shape}, name or "Assign")


def _update(op_type: str, ref: Any, value: Any, use_locking: bool, name: str | None) -> Tensor:
    r = _ref_of(ref)
    v = convert_to_tensor(value, dtype=r.dtype) if not isinstance(value, Tensor) else value
    with _after_update(ref):
        return apply(op_type, [r, v], {"use_locking": bool(use_locking)}, name or op_type)


def assign_add(ref: Any, value: Any, use_locking: bool = False, name=None):
    """``ref += value`` in place. With ``use_locking`` the update holds the variable's lock, so
    that other locked updates, fetches and transfers of the variable see it whole."""
    return _update("AssignAdd", ref, value, use_locking, name)


def assign_sub(ref: Any, value: Any, use_locking: bool = False, name=None):
    """``ref -= value`` in place (``use_locking`` as for assign_add)."""
    return _update("AssignSub", ref, value, use_locking, name)


def _scatter(op_type: str, ref: Any, indices: Any, updates: Any, use_locking: bool, name) -> Tensor:
    r = _ref_of(ref)
    if not isinstance(updates, Tensor):  # Python values take the variable's dtype, as in TF
        updates = convert_to_tensor(updates, dtype=r.dtype)
    attrs = {"use_locking": bool(use_locking)}
    return apply(op_type, [r, indices, updates], attrs, name or op_type)


def scatter_add(ref: Any, indices: Any, updates: Any, use_locking: bool = False, name=None):
    """``ref[indices] += updates``; repeated indices all add (``np.add.at``)."""
    return _scatter("ScatterAdd", ref, indices, updates, use_locking, name)


def scatter_sub(ref: Any, indices: Any, updates: Any, use_locking: bool = False, name=None):
    """``ref[indices] -= updates``; repeated indices all subtract."""
    return _scatter("ScatterSub", ref, indices, updates, use_locking, name)


def scatter_update(ref: Any, indices: Any, updates: Any, use_locking: bool = True, name=None):
    """``ref[indices] = updates``; with repeated indices one of the updates wins."""
    return _scatter("ScatterUpdate", ref, indices, updates, use_locking, name)


CountUpTo = defop("CountUpTo", stateful=True, differentiable=False)


@CountUpTo.shape
def _count_up_to_shape(op):
    ref = op.inputs[0]
    if ref.dtype not in (_dt.int32, _dt.int64) or ref.shape.ndims not in (None, 0):
        raise InvalidArgumentError(
            f"CountUpTo {op.name}: needs a scalar int32/int64 variable, got {ref.op.name} "
            f"({ref.dtype.name}, shape {ref.shape})"
        )
    return [(TensorShape([]), ref.dtype)]


@CountUpTo.kernel("cpu")
def _count_up_to(ctx, h):
    limit = ctx.attrs["limit"]
    with h.lock:
        v = h.writable()
        before = v.copy()
        if int(before) >= limit:
            raise OutOfRangeError(f"Reached limit of {limit} ({ctx.op.inputs[0].op.name})")
        v += 1
    return before


CountUpTo.cost(lambda op, ins, outs: Cost(1.0, 8.0, 8.0))


def count_up_to(ref: Any, limit: int, name=None):
    """Increment the scalar integer variable ``ref`` and return its value before the increment;
    OutOfRangeError (and no change) once it has reached ``limit``."""
    return apply("CountUpTo", [_ref_of(ref)], {"limit": int(limit)}, name or "CountUpTo")


def is_variable_initialized(variable: Any, name=None):
    return apply("IsVariableInitialized", [_ref_of(variable)], {}, name or "IsVariableInitialized")


__all__ = [
    "VarHandle",
    "owner_of",
    "snapshot",
    "assign",
    "assign_add",
    "assign_sub",
    "scatter_add",
    "scatter_sub",
    "scatter_update",
    "is_variable_initialized",
    "count_up_to",
    "apply_op",
]
