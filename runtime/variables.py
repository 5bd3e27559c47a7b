"""``hb.Variable``: a VariableV2 op, its initializer (Assign) and its read op, in TF1's shape."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from . import dtypes as _dt
from .graph import (
    GraphKeys,
    Operation,
    Tensor,
    TensorShape,
    as_shape,
    get_default_graph,
)
from .ops import state
from .registry import apply, convert_to_tensor


@contextlib.contextmanager
def outside_control_flow(g: Any) -> Iterator[None]:
    """Build ops outside any cond or while_loop being built (TF's ``init_scope``, for the
    control-flow part): a variable's initial value, an optimizer's slots."""
    local = g._local
    flow, local.cond = getattr(local, "cond", None), None
    try:
        yield
    finally:
        local.cond = flow


class Variable:
    """A mutable tensor that lives across steps: ``w = hb.Variable(hb.zeros([3, 4]), name="w")``.

    Used where a tensor is expected it reads its current value (the ``w/read`` op). ``initializer``
    must run (usually via ``hb.global_variables_initializer()``) before the value is read.
    """

    def __init__(
        self,
        initial_value: Any = None,
        trainable: bool = True,
        collections: Iterable[str] | None = None,
        validate_shape: bool = True,
        name: str | None = None,
        dtype: Any = None,
        expected_shape: Any = None,
        shape: Any = None,
        constraint: Callable | None = None,
        **unused: Any,
    ):
        if initial_value is None:
            raise ValueError("Variable needs an initial_value")
        g = get_default_graph()
        self._trainable = trainable
        self.constraint = constraint
        # A variable (and its initializer) lives outside any cond or while_loop being built, as
        # TF's init_scope: made inside a loop body, it is still made once.
        with outside_control_flow(g):
            self._build(g, initial_value, collections, validate_shape, name, dtype, shape)

    def _build(self, g, initial_value, collections, validate_shape, name, dtype, shape) -> None:
        with g.name_scope(name or "Variable") as scope:
            base = scope[:-1]
            with g.name_scope("Initializer"), g.control_dependencies(None):
                if callable(initial_value):
                    initial_value = initial_value()
                init = convert_to_tensor(initial_value, dtype=None)
            if dtype is not None and init.dtype != _dt.as_dtype(dtype):
                from .ops.array import cast

                with g.control_dependencies(None):
                    init = cast(init, dtype)
            var_shape = as_shape(shape) if shape is not None else init.shape
            if not validate_shape:
                var_shape = TensorShape(None)
            if validate_shape and not var_shape.is_fully_defined():
                raise ValueError(
                    f"initial value of variable {base!r} must have a fully defined shape, got "
                    f"{init.shape}; pass validate_shape=False to allow it"
                )
            with g.control_dependencies(None):
                self._ref = apply(
                    "VariableV2",
                    [],
                    {"shape": var_shape, "dtype": init.dtype, "shared_name": ""},
                    base + "/",
                )
                self._initial_value = init
                with g.colocate_with(self._ref.op):
                    self._initializer_op = state.assign(
                        self._ref, init, validate_shape=validate_shape, name="Assign"
                    ).op
                    self._snapshot = apply("ReadVariable", [self._ref], name="read")
        if collections is None:
            collections = [GraphKeys.GLOBAL_VARIABLES]
        collections = list(collections)
        if self._trainable and GraphKeys.TRAINABLE_VARIABLES not in collections:
            collections.append(GraphKeys.TRAINABLE_VARIABLES)
        g.add_to_collections(dict.fromkeys(collections), self)
        self._save_slice_info = None

    # ---- TF1 surface -----------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._ref.name

    @property
    def op(self) -> Operation:
        return self._ref.op

    @property
    def graph(self) -> Any:
        return self._ref.graph

    @property
    def dtype(self) -> _dt.DType:
        return self._ref.dtype

    @property
    def shape(self) -> TensorShape:
        return self._ref.shape

    def get_shape(self) -> TensorShape:
        return self._ref.shape

    @property
    def device(self) -> str:
        return self._ref.op.device

    @property
    def trainable(self) -> bool:
        return self._trainable

    @property
    def initializer(self) -> Operation:
        return self._initializer_op

    @property
    def initial_value(self) -> Tensor:
        return self._initial_value

    def value(self) -> Tensor:
        return self._snapshot

    def read_value(self) -> Tensor:
        return apply("ReadVariable", [self._ref], name=self.op.name + "/read_value")

    def _as_graph_element(self) -> Tensor:
        return self._snapshot

    def assign(
        self, value: Any, use_locking: bool = False, name: str | None = None, read_value=True
    ):
        return state.assign(self, value, name=name)

    def assign_add(
        self, delta: Any, use_locking: bool = False, name: str | None = None, read_value=True
    ):
        return state.assign_add(self, delta, name=name)

    def assign_sub(
        self, delta: Any, use_locking: bool = False, name: str | None = None, read_value=True
    ):
        return state.assign_sub(self, delta, name=name)

    def count_up_to(self, limit: int):
        """Increment this scalar integer variable; its value before, until ``limit``
        (OutOfRangeError from then on)."""
        return state.count_up_to(self, limit)

    def scatter_add(self, sparse_delta: Any, use_locking: bool = False, name: str | None = None):
        return state.scatter_add(self, sparse_delta.indices, sparse_delta.values, name=name)

    def scatter_sub(self, sparse_delta: Any, use_locking: bool = False, name: str | None = None):
        return state.scatter_sub(self, sparse_delta.indices, sparse_delta.values, name=name)

    # ---- WP2: the other scatter updates of TF1's Variable ----
    def scatter_update(self, sparse_delta: Any, use_locking: bool = False, name: str | None = None):
        return state.scatter_update(self, sparse_delta.indices, sparse_delta.values, name=name)

    def _scatter_rows(self, fn: str, sparse_delta: Any, use_locking: bool, name: str | None):
        from .ops import scatter

        f = getattr(scatter, fn)
        return f(self, sparse_delta.indices, sparse_delta.values, use_locking, name)

    def scatter_mul(self, sparse_delta: Any, use_locking: bool = False, name: str | None = None):
        return self._scatter_rows("scatter_mul", sparse_delta, use_locking, name)

    def scatter_div(self, sparse_delta: Any, use_locking: bool = False, name: str | None = None):
        return self._scatter_rows("scatter_div", sparse_delta, use_locking, name)

    def scatter_max(self, sparse_delta: Any, use_locking: bool = False, name: str | None = None):
        return self._scatter_rows("scatter_max", sparse_delta, use_locking, name)

    def scatter_min(self, sparse_delta: Any, use_locking: bool = False, name: str | None = None):
        return self._scatter_rows("scatter_min", sparse_delta, use_locking, name)

    def scatter_nd_update(self, indices: Any, updates: Any, name: str | None = None):
        from .ops.scatter import scatter_nd_update

        return scatter_nd_update(self, indices, updates, name=name)

    def scatter_nd_add(self, indices: Any, updates: Any, name: str | None = None):
        from .ops.scatter import scatter_nd_add

        return scatter_nd_add(self, indices, updates, name=name)

    def scatter_nd_sub(self, indices: Any, updates: Any, name: str | None = None):
        from .ops.scatter import scatter_nd_sub

        return scatter_nd_sub(self, indices, updates, name=name)

    def eval(self, session: Any = None) -> Any:
        return self._snapshot.eval(session=session)

    def load(self, value: Any, session: Any = None) -> None:
        """Write ``value`` into the variable in ``session`` (default session if omitted)."""
        from .session import get_default_session

        sess = session or get_default_session()
        if sess is None:
            raise ValueError("Variable.load() needs a session")
        sess._load_variable(self, value)

    def __repr__(self) -> str:
        return f"<hb.Variable '{self.name}' shape={self.shape} dtype={self.dtype.name}>"

    __hash__ = object.__hash__  # identity, as a C slot

    def __eq__(self, other: object) -> bool:
        return self is other

    # Arithmetic operators delegate to the read tensor (attached in runtime.ops.math).


def global_variables(scope: str | None = None) -> list[Variable]:
    return get_default_graph().get_collection(GraphKeys.GLOBAL_VARIABLES, scope)


def trainable_variables(scope: str | None = None) -> list[Variable]:
    return get_default_graph().get_collection(GraphKeys.TRAINABLE_VARIABLES, scope)


def local_variables(scope: str | None = None) -> list[Variable]:
    return get_default_graph().get_collection(GraphKeys.LOCAL_VARIABLES, scope)


def variables_initializer(var_list: Iterable[Variable], name: str = "init") -> Operation:
    """One op that runs the initializers of ``var_list``."""
    from .ops.control import group

    return group(*[v.initializer for v in var_list], name=name)


def global_variables_initializer() -> Operation:
    return variables_initializer(global_variables(), name="init")


def local_variables_initializer() -> Operation:
    return variables_initializer(local_variables(), name="init_local")


def initialize_all_variables() -> Operation:
    return global_variables_initializer()


def initialized_flags(var_list: Iterable[Variable] | None = None) -> list[Tensor]:
    """One op per variable (default: every global one), each returning whether it is
    initialized, colocated with it (a session asks a PS task only for its own)."""
    var_list = list(var_list) if var_list is not None else global_variables()
    return [state.is_variable_initialized(v) for v in var_list]


def report_uninitialized_variables(
    var_list: Iterable[Variable] | None = None, name: str = "report_uninitialized_variables"
) -> Tensor:
    """As TF1's: a 1-D string tensor of the names (``op.name``) of the variables of
    ``var_list`` (default: every global one) not yet initialized, in their order."""
    from .graph import name_scope
    from .ops.array import constant
    from .ops.manip import stack
    from .ops.math import logical_not
    from .ops.segments import boolean_mask

    var_list = list(var_list) if var_list is not None else global_variables()
    with name_scope(name):
        if not var_list:
            return constant(np.array([], dtype=object), dtype=_dt.string)
        uninitialized = logical_not(stack(initialized_flags(var_list)))
        names = constant(np.array([v.op.name.encode() for v in var_list], dtype=object))
        return boolean_mask(names, uninitialized)
