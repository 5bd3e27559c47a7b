"""The op registry: each op is defined once with its shape rule, gradient, cost and kernels.

An op module reads like this (one block per op)::

    Add = defop("Add", shape=broadcast_shape, cost=elementwise_cost(1))

    @Add.kernel("cpu", "gpu")
    def _add(ctx, x, y):
        return ctx.xp.add(x, y)

    @Add.gradient
    def _add_grad(op, g):
        ...

    def add(x, y, name=None):
        return apply_op("Add", [x, y], name=name)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import dtypes as _dt
from . import graph as _graph_mod
from .errors import InvalidArgumentError, UnimplementedError
from .graph import Operation, Tensor, TensorShape, get_default_graph


@dataclass(frozen=True)
class Cost:
    """What one execution of an op costs: arithmetic and memory traffic."""

    flops: float = 0.0
    bytes_read: float = 0.0
    bytes_written: float = 0.0

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            self.flops + other.flops,
            self.bytes_read + other.bytes_read,
            self.bytes_written + other.bytes_written,
        )


@dataclass
class Kernel:
    fn: Callable
    dtypes: tuple | None  # None: any dtype
    is_async: bool = False
    # A view kernel returns an output that may alias an input (reshape, identity, ...).
    aliases_input: bool = False
    # An async kernel that completes inline when its peer ran earlier in the same thread
    # (Send/Recv on a local rendezvous), so the straight-line schedule may run it.
    inline_in_order: bool = False


class OpDef:
    """Definition of one op type. Attach rules with the decorator methods."""

    def __init__(
        self,
        name: str,
        *,
        shape: Callable | None = None,
        cost: Callable | None = None,
        stateful: bool = False,
        is_ref: bool = False,
        differentiable: bool = True,
        passes_sparse: bool = False,
        gang: bool = False,
    ):
        self.name = name
        self.shape_fn = shape
        self.cost_fn = cost or default_cost
        self.grad_fn: Callable | None = None
        self.kernels: dict[str, list[Kernel]] = {}
        self.stateful = stateful
        self.is_ref = is_ref
        self.differentiable = differentiable
        # The gradient rule accepts IndexedSlices as is (identity-like ops); others get dense.
        self.passes_sparse = passes_sparse
        # An optimizer's update op: (variable and slot inputs, gradient input, row indices input
        # or None); the other inputs are hyperparameters (runtime/train/training_ops.py)
        self.update_inputs: tuple[int, int, int | None] | None = None
        # Ops sharing attrs["group_key"] (collectives) are pruned in or out together; they are
        # listed in the graph collection "collective:<group_key>".
        self.gang = gang
        # Optional fn(op, in_shapes) -> [shape per output] for outputs whose size depends on the
        # data (e.g. DynamicPartition): what a shape-only simulation should assume.
        self.expected_shapes: Callable | None = None

    # ---- decorators ------------------------------------------------------------------
    def kernel(
        self,
        *device_types: str,
        dtypes: Sequence | None = None,
        is_async: bool = False,
        aliases_input: bool = False,
        inline_in_order: bool = False,
    ) -> Callable:
        """Register ``fn(ctx, *inputs)`` (or ``fn(ctx, step, inputs, done)`` when async)."""
        dts = None if dtypes is None else tuple(_dt.as_dtype(d) for d in dtypes)

        def deco(fn: Callable) -> Callable:
            for dev in device_types or ("cpu",):
                self.kernels.setdefault(dev, []).append(
                    Kernel(fn, dts, is_async, aliases_input, inline_in_order)
                )
            return fn

        return deco

    def gradient(self, fn: Callable) -> Callable:
        """Register ``fn(op, *output_grads) -> [grad per input]`` (None where not differentiable)."""
        self.grad_fn = fn
        return fn

    def shape(self, fn: Callable) -> Callable:
        """Register ``fn(op) -> [(TensorShape, DType) per output]``."""
        self.shape_fn = fn
        return fn

    def cost(self, fn: Callable) -> Callable:
        """Register ``fn(op, in_shapes, out_shapes) -> Cost`` for concrete shapes."""
        self.cost_fn = fn
        return fn

    # ---- lookups ---------------------------------------------------------------------
    def find_kernel(self, device_type: str, dtype: _dt.DType | None, op_name: str = "") -> Kernel:
        """Return the kernel for (device type, dtype); raises UnimplementedError listing options.

        A string dtype matches a kernel registered for any dtype on the CPU only: elsewhere it
        needs a kernel that names ``string`` (none does, so string tensors stay on the CPU).
        """
        for k in self.kernels.get(device_type, ()):
            if k.dtypes is None:
                if dtype is None or not dtype.is_string or device_type == "cpu":
                    return k
            elif dtype is None or dtype in k.dtypes:
                return k
        where = ", ".join(
            f"{dev} ({'any' if any(k.dtypes is None for k in ks) else _dtype_names(ks)})"
            for dev, ks in sorted(self.kernels.items())
        )
        dt = dtype.name if dtype is not None else "?"
        raise UnimplementedError(
            f"no kernel for {self.name} on {device_type} ({dt})"
            + (f" for op {op_name!r}" if op_name else "")
            + f"; registered: {where or 'none'}"
        )

    def has_kernel(self, device_type: str, dtype: _dt.DType | None) -> bool:
        try:
            self.find_kernel(device_type, dtype)
            return True
        except UnimplementedError:
            return False

    def __repr__(self) -> str:
        return f"<OpDef {self.name}>"


def _dtype_names(ks: list[Kernel]) -> str:
    names = []
    for k in ks:
        for d in k.dtypes or ():
            if d.name not in names:
                names.append(d.name)
    return ", ".join(names)


_REGISTRY: dict[str, OpDef] = {}


def defop(name: str, **kw: Any) -> OpDef:
    """Create and register an op definition; a name may be defined only once."""
    if name in _REGISTRY:
        raise ValueError(f"op {name!r} is already registered")
    d = OpDef(name, **kw)
    _REGISTRY[name] = d
    return d


def get_op_def(name: str) -> OpDef:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnimplementedError(f"unknown op type {name!r}") from None


def registered_ops() -> dict[str, OpDef]:
    return dict(_REGISTRY)


# ---- building ops ------------------------------------------------------------------------


class _ShapeView:
    """What a shape function sees of an op before it is added to the graph."""

    __slots__ = ("name", "type", "inputs", "attrs", "graph")

    def __init__(self, name: str, op_type: str, inputs: list[Tensor], attrs: dict, graph: Any):
        self.name = name
        self.type = op_type
        self.inputs = inputs
        self.attrs = attrs
        self.graph = graph

    def describe(self) -> str:
        ins = ", ".join(f"{t.name} {t.shape} {t.dtype.name}" for t in self.inputs)
        return f"{self.name} ({self.type}) with inputs [{ins}]"


class _Dead:
    """The value of a dead tensor: an output of the branch of a cond that did not run."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<dead tensor>"


#: the value of a dead tensor (see ops/cond.py)
DEAD = _Dead()


def apply_op(
    op_type: str,
    inputs: Sequence[Any],
    attrs: dict | None = None,
    name: str | None = None,
    graph: Any = None,
) -> Operation:
    """Add an op of ``op_type`` to the graph, inferring its output shapes and dtypes.

    Raises InvalidArgumentError (naming the op, its inputs and their shapes) when the shape rule
    rejects the inputs; nothing is added to the graph then.
    """
    op_def = get_op_def(op_type)
    attrs = attrs or {}
    g = graph or _graph_of(inputs)
    tensors = [convert_to_tensor(x, graph=g) for x in inputs]
    if not op_def.stateful and op_type not in _PASSES_REFS:
        for i, t in enumerate(tensors):
            if t.op.type == "VariableV2":  # a variable's own output, not its value
                tensors[i] = _read_ref(t, g)
    cond = getattr(g._local, "cond", None)  # building a branch of hb.cond (control_flow.py)
    if cond is not None:
        tensors = [cond.enter(t) for t in tensors]
    view = _ShapeView(name or op_type, op_type, tensors, attrs, g)
    if op_def.kernels and any(t.dtype.is_string for t in tensors):
        _check_takes_strings(op_def, view)
    try:
        specs = op_def.shape_fn(view) if op_def.shape_fn else []
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"{e.message}\n  in {view.describe()}") from None
    except (ValueError, TypeError) as e:
        raise InvalidArgumentError(f"{op_type}: {e}\n  in {view.describe()}") from None
    op = g._add_op(op_type, tensors, attrs, name, specs, op_def)
    if cond is not None:
        cond.added(op)
    return op


#: op types that take a variable's reference as it is: reading it, asking whether it is
#: initialized, and the ops that only forward a value; every stateful op (the updates) too
_PASSES_REFS = frozenset(
    (
        "ReadVariable",
        "IsVariableInitialized",
        "Identity",
        "Enter",
        "Exit",
        "Switch",
        "Merge",
        "NextIteration",
    )
)


def _read_ref(ref: Tensor, g: Any) -> Tensor:
    """The value of the variable whose reference ``ref`` is (``graph.get_tensor_by_name(
    "layer/kernel:0")``), read where it lives, when the op given it as an input runs: TF1 reads a
    reference used as an ordinary input the same way."""
    with g.colocate_with(ref.op):
        return apply_op("ReadVariable", [ref], name=ref.op.name + "/read_ref").outputs[0]


def _check_takes_strings(op_def: OpDef, view: _ShapeView) -> None:
    """Refuse string inputs for an op with no kernel that takes them (arithmetic, ...)."""
    for ks in op_def.kernels.values():
        for k in ks:
            if k.dtypes is None or _dt.string in k.dtypes:
                return
    t = next(t for t in view.inputs if t.dtype.is_string)
    raise TypeError(
        f"{view.type} does not take string tensors: input {t.name} of {view.name!r} is a string "
        f"(shape {t.shape})"
    )


def apply(op_type: str, inputs: Sequence[Any], attrs: dict | None = None, name: str | None = None):
    """Like apply_op but return the single output (or the list of outputs, or the op if none)."""
    op = apply_op(op_type, inputs, attrs, name)
    if len(op.outputs) == 1:
        return op.outputs[0]
    if not op.outputs:
        return op
    return op.outputs


def _graph_of(inputs: Sequence[Any]) -> Any:
    if _graph_mod.CAPTURING:
        g = get_default_graph()
        if g._capture_hook is not None:  # tracing a function: its ops go in its graph,
            return g  # whatever graph their inputs come from (those are captured)
    for x in inputs:
        if isinstance(x, Tensor):
            return x.graph
        el = getattr(x, "_as_graph_element", None)
        if el is not None:
            return el().graph
    return get_default_graph()


_constant = None  # ops.array.constant, once first needed (it imports this module; an import
# statement per constant cost a microsecond or two of every op built with a Python number)


def _load_constant() -> Callable:
    global _constant
    from .ops.array import constant

    _constant = constant
    return constant


def convert_to_tensor(
    value: Any,
    dtype: Any = None,
    name: str | None = None,
    preferred_dtype: Any = None,
    graph: Any = None,
    dtype_hint: Any = None,
) -> Tensor:
    """Return ``value`` as a Tensor: tensors pass through, variables read, constants are added.

    Raises InvalidArgumentError when a tensor's dtype differs from the requested one.
    ``preferred_dtype`` (or ``dtype_hint``), without ``dtype``: the dtype to try first for a
    value that is not a tensor, as TF1's (a value it does not fit takes its own).
    """
    hint = preferred_dtype if preferred_dtype is not None else dtype_hint
    if dtype is None and hint is not None and not isinstance(value, Tensor):
        try:
            return convert_to_tensor(value, hint, name, graph=graph)
        except (TypeError, ValueError):  # (InvalidArgumentError is a ValueError)
            pass
    if isinstance(value, Tensor):
        t = value
    elif hasattr(value, "_as_graph_element"):
        t = value._as_graph_element()
        if isinstance(t, Operation):
            raise TypeError(f"cannot use operation {t.name} as a tensor")
    elif isinstance(value, Operation):
        raise TypeError(f"cannot use operation {value.name} as a tensor (it has no value)")
    elif isinstance(value, _graph_mod.UnknownDimension) or (
        isinstance(value, (list, tuple))
        and any(isinstance(v, _graph_mod.UnknownDimension) for v in value)
    ):
        raise ValueError("Cannot convert an unknown Dimension to a Tensor: ?")
    elif type(value).__name__ == "IndexedSlices" and hasattr(value, "indices"):
        # a sparse gradient used as a tensor becomes dense, as in TF
        from .ops.manip import indexed_slices_to_dense

        t = indexed_slices_to_dense(value)
    elif isinstance(value, (list, tuple)) and _has_tensor(value):
        # TF1 packs a (nested) list holding tensors: [t1, t2] is tf.stack([t1, t2])
        from .ops.manip import stack

        t = stack(
            [convert_to_tensor(v, dtype=dtype, graph=graph) for v in value], name=name or "packed"
        )
    else:
        constant = _constant or _load_constant()
        with (graph or get_default_graph()).as_default():
            return constant(value, dtype=dtype, name=name or "Const")
    if dtype is not None and t.dtype != _dt.as_dtype(dtype):
        raise InvalidArgumentError(
            f"expected {_dt.as_dtype(dtype).name} but {t.name} is {t.dtype.name}", t.op
        )
    return t


def _has_tensor(value: Any) -> bool:
    for v in value:
        if isinstance(v, Tensor) or hasattr(v, "_as_graph_element"):
            return True
        if isinstance(v, (list, tuple)) and _has_tensor(v):
            return True
    return False


def convert_pair(x: Any, y: Any, names: tuple = ("Const", "Const")) -> tuple[Tensor, Tensor]:
    """Convert two operands, giving a Python scalar the dtype of the tensor beside it (a
    constant named ``names[0]`` for x, ``names[1]`` for y: an operator's "x" and "y")."""
    if isinstance(x, Tensor) or hasattr(x, "_as_graph_element"):
        x = convert_to_tensor(x)
        if not isinstance(y, Tensor) and not hasattr(y, "_as_graph_element"):
            y = _operand_constant(y, x, names[1])
        else:
            y = convert_to_tensor(y)
    elif isinstance(y, Tensor) or hasattr(y, "_as_graph_element"):
        y = convert_to_tensor(y)
        x = _operand_constant(x, y, names[0])
    else:
        x, y = convert_to_tensor(x), convert_to_tensor(y)
    return x, y


#: the Python scalars an operand may be, made a constant of its partner's dtype directly
_PY_NUMBERS = (float, int, bool, complex)


def _operand_constant(v: Any, partner: Tensor, name: str = "Const") -> Tensor:
    """``v`` (not a tensor) as a constant of ``partner``'s dtype, in its graph. A Python number
    beside a numeric tensor (``h * 2.0``: the commonest constant of a TF1 program) becomes its
    Const op directly: the value cast as ``constant`` would cast it, without its checks for
    text, shapes and dtypes that such a value cannot need, or the default-graph switch."""
    dt = partner.dtype
    if isinstance(v, (list, tuple)) and any(
        isinstance(e, Tensor) or hasattr(e, "_as_graph_element") for e in v
    ):
        # a list holding tensors is packed, as TF1 packs it ([w1_loss, w2_loss] + 0.0)
        return convert_to_tensor(v, dtype=dt, name=name)
    arr = _as_array(v, dt)
    if v.__class__ not in _PY_NUMBERS or dt.is_string:
        return convert_to_tensor(arr, graph=partner.graph, name=name)
    return apply_op("Const", (), {"value": arr, "dtype": dt}, name, partner.graph).outputs[0]


def _as_array(v: Any, dtype: _dt.DType) -> np.ndarray:
    arr = np.asarray(v)
    if arr.dtype.kind == "f" and dtype.is_integer:
        raise InvalidArgumentError(f"cannot use float value {v!r} with an {dtype.name} tensor")
    if arr.dtype.kind == "c" and not dtype.is_complex:
        raise InvalidArgumentError(f"cannot use complex value {v!r} with a {dtype.name} tensor")
    return arr.astype(dtype.np)


# ---- shared shape and cost rules ----------------------------------------------------------


def nbytes(shape: Sequence[int], dtype: _dt.DType) -> int:
    n = 1
    for d in shape:
        n *= d
    return n * dtype.size


def numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def default_cost(op: Any, in_shapes: list, out_shapes: list) -> Cost:
    """Memory traffic only: read every input once, write every output once."""
    r = sum(nbytes(s, t.dtype) for s, t in zip(in_shapes, op.inputs))
    w = sum(nbytes(s, t.dtype) for s, t in zip(out_shapes, op.outputs))
    return Cost(0.0, float(r), float(w))


def elementwise_cost(flops_per_element: float, complex_factor: float = 4.0) -> Callable:
    """``flops_per_element`` real flops per output element; an op on complex numbers does
    ``complex_factor`` times as many (a complex product is four real products and two sums;
    a sum, two: pass 2)."""

    def cost(op: Any, in_shapes: list, out_shapes: list) -> Cost:
        base = default_cost(op, in_shapes, out_shapes)
        n = sum(numel(s) for s in out_shapes)
        f = flops_per_element
        if any(t.dtype.is_complex for t in op.inputs):
            f *= complex_factor
        return Cost(f * n, base.bytes_read, base.bytes_written)

    return cost


def broadcast_shapes(op_name: str, a: TensorShape, b: TensorShape) -> TensorShape:
    """numpy broadcasting on static shapes; raises InvalidArgumentError on a mismatch."""
    da, db = a.dims, b.dims
    if da is None or db is None:
        return TensorShape(None)
    if da == db or not db:  # (shapes are immutable: the result may be an operand's)
        return a
    if not da:
        return b
    ra, rb = list(da), list(db)
    n = max(len(ra), len(rb))
    ra = [1] * (n - len(ra)) + ra
    rb = [1] * (n - len(rb)) + rb
    out = []
    for x, y in zip(ra, rb):
        if x == 1:
            out.append(y)
        elif y == 1:
            out.append(x)
        elif x is None or y is None:
            out.append(x if y is None else y)
        elif x == y:
            out.append(x)
        else:
            raise InvalidArgumentError(
                f"{op_name}: shapes {a} and {b} cannot be broadcast together"
            )
    return TensorShape(out)


def same_dtype(op: Any) -> _dt.DType:
    """All inputs must share one dtype; return it or raise naming both."""
    d0 = op.inputs[0].dtype
    for t in op.inputs[1:]:
        if t.dtype != d0:
            raise InvalidArgumentError(
                f"{op.type}: inputs must have the same dtype, got {d0.name} "
                f"({op.inputs[0].name}) and {t.dtype.name} ({t.name})"
            )
    return d0


def broadcast_shape(op: Any) -> list:
    dt = same_dtype(op)
    shape = op.inputs[0].shape
    for t in op.inputs[1:]:
        shape = broadcast_shapes(op.type, shape, t.shape)
    return [(shape, dt)]


def unchanged_shape(op: Any) -> list:
    return [(op.inputs[0].shape, op.inputs[0].dtype)]
