"""Variable scopes and ``get_variable``: TF1's named, shareable variables.

Each graph has one variable store (name -> Variable, kept here in a weak map keyed by the graph)
and, per thread, a current ``VariableScope``. The sharing rules are TF1's:

- ``reuse=None/False``: ``get_variable`` creates; a name that exists is an error.
- ``reuse=True``: ``get_variable`` returns the existing variable; a missing name is an error.
- ``reuse=AUTO_REUSE``: returns it when it exists, creates it otherwise.

Reuse is inherited by nested scopes. ``variable_scope`` also opens a name scope, so the ops built
inside are named after it (``foo/MatMul``) while variables get the variable scope's name
(``foo/w``) even when the name scope had to be made unique (``foo_1/MatMul``).

With a partitioner (argument or scope default) ``get_variable`` makes a ``PartitionedVariable``
(``runtime/partitioned.py``) whose shards ``<name>/part_<i>`` are stored like any variable. The store itself (creating,
reusing and partitioning variables, one per graph) lives in variable_store.py.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from . import dtypes as _dt
from .graph import Graph, GraphKeys, get_default_graph
from .partitioned import PartitionedVariable
from .variable_store import (  # noqa: F401  (AUTO_REUSE: re-exported)
    AUTO_REUSE,
    _VariableStore,
    constant_initial_dtype,
)
from .variables import Variable


class VariableScope:
    """What ``get_variable`` uses in a scope: the name prefix, reuse mode and defaults."""

    def __init__(
        self,
        reuse: Any,
        name: str = "",
        initializer: Any = None,
        regularizer: Callable | None = None,
        dtype: Any = _dt.float32,
        custom_getter: Callable | None = None,
        name_scope: str = "",
        constraint: Callable | None = None,
        partitioner: Callable | None = None,
        **unused: Any,
    ):
        self._reuse = reuse
        self._partitioner = partitioner
        self._name = name
        self._initializer = initializer
        self._regularizer = regularizer
        self._dtype = _dt.as_dtype(dtype)
        self._custom_getter = custom_getter
        self._name_scope = name_scope
        self._constraint = constraint

    @property
    def name(self) -> str:
        return self._name

    @property
    def original_name_scope(self) -> str:
        return self._name_scope

    @property
    def reuse(self) -> Any:
        return self._reuse

    @property
    def initializer(self) -> Any:
        return self._initializer

    @property
    def regularizer(self) -> Callable | None:
        return self._regularizer

    @property
    def dtype(self) -> _dt.DType:
        return self._dtype

    @property
    def custom_getter(self) -> Callable | None:
        return self._custom_getter

    @property
    def constraint(self) -> Callable | None:
        return self._constraint

    @property
    def partitioner(self) -> Callable | None:
        return self._partitioner

    def reuse_variables(self) -> None:
        """From now on, ``get_variable`` in this scope returns existing variables."""
        self._reuse = True

    def set_initializer(self, initializer: Any) -> None:
        self._initializer = initializer

    def set_regularizer(self, regularizer: Callable | None) -> None:
        self._regularizer = regularizer

    def set_dtype(self, dtype: Any) -> None:
        self._dtype = _dt.as_dtype(dtype)

    def set_custom_getter(self, custom_getter: Callable | None) -> None:
        self._custom_getter = custom_getter

    def set_partitioner(self, partitioner: Callable | None) -> None:
        self._partitioner = partitioner

    def get_variable(
        self, name: str, shape: Any = None, dtype: Any = None, **kw: Any
    ) -> Variable | PartitionedVariable:
        """``get_variable`` with this scope's name prefix and defaults."""
        full = f"{self._name}/{name}" if self._name else name
        dtype = constant_initial_dtype(full, dtype, kw.get("initializer"))
        if dtype is None:
            dtype = self._dtype
        if kw.get("initializer") is None:
            kw["initializer"] = self._initializer
        if kw.get("regularizer") is None:
            kw["regularizer"] = self._regularizer
        if kw.get("constraint") is None:
            kw["constraint"] = self._constraint
        if kw.get("partitioner") is None:
            kw["partitioner"] = self._partitioner
        reuse = kw.pop("reuse", None) or self._reuse
        store = _state(get_default_graph()).store
        getter = self._custom_getter
        if getter is None:
            return store.get_variable(full, shape, dtype, reuse=reuse, **kw)

        def true_getter(name: str, shape: Any = None, dtype: Any = None, **kw2: Any) -> Any:
            kw2.setdefault("reuse", reuse)
            return store.get_variable(name, shape, dtype, **kw2)

        return getter(true_getter, full, shape=shape, dtype=dtype, **kw)

    def global_variables(self) -> list[Variable]:
        return get_default_graph().get_collection(GraphKeys.GLOBAL_VARIABLES, self._prefix())

    def trainable_variables(self) -> list[Variable]:
        return get_default_graph().get_collection(GraphKeys.TRAINABLE_VARIABLES, self._prefix())

    def _prefix(self) -> str | None:
        return None if not self._name else self._name + "/"

    def __repr__(self) -> str:
        return f"<hb.VariableScope {self._name!r} reuse={self._reuse}>"


class _ScopeState:
    """Per-graph variable store, per-thread current scope, and default-name counts."""

    def __init__(self) -> None:
        self.store = _VariableStore()
        self._local = threading.local()

    @property
    def current(self) -> VariableScope:
        cur = getattr(self._local, "current", None)
        if cur is None:
            cur = self._local.current = VariableScope(False)
        return cur

    @current.setter
    def current(self, scope: VariableScope) -> None:
        self._local.current = scope

    @property
    def counts(self) -> dict[str, int]:
        c = getattr(self._local, "counts", None)
        if c is None:
            c = self._local.counts = {}
        return c

    @counts.setter
    def counts(self, value: dict[str, int]) -> None:
        self._local.counts = value

    def open(self, name: str) -> None:
        self.counts[name] = self.counts.get(name, 0) + 1

    def close_subscopes(self, name: str) -> None:
        prefix = name + "/" if name else ""
        for k in self.counts:
            if k.startswith(prefix):
                self.counts[k] = 0

    def unique_name(self, prefix: str) -> str:
        """``prefix``, or ``prefix_1``, ``prefix_2``, ... if used in the current scope."""
        base = self.current.name
        full = f"{base}/{prefix}" if base else prefix
        if self.counts.get(full, 0) == 0:
            return prefix
        i = 1
        while self.counts.get(f"{full}_{i}", 0) > 0:
            i += 1
        return f"{prefix}_{i}"


_STATES: weakref.WeakKeyDictionary[Graph, _ScopeState] = weakref.WeakKeyDictionary()
_STATES_LOCK = threading.Lock()


def _state(g: Graph) -> _ScopeState:
    with _STATES_LOCK:
        s = _STATES.get(g)
        if s is None:
            s = _STATES[g] = _ScopeState()
        return s


def get_variable_scope() -> VariableScope:
    """The current variable scope of the default graph (the root scope has name "")."""
    return _state(get_default_graph()).current


def get_variable(
    name: str,
    shape: Any = None,
    dtype: Any = None,
    initializer: Any = None,
    regularizer: Callable | None = None,
    trainable: bool | None = None,
    collections: Iterable[str] | None = None,
    caching_device: Any = None,
    partitioner: Any = None,
    validate_shape: bool = True,
    use_resource: Any = None,
    custom_getter: Callable | None = None,
    constraint: Callable | None = None,
    **unused: Any,
) -> Variable | PartitionedVariable:
    """Get the variable ``scope/name``, or create it (under the current scope's reuse rules).

    ``initializer`` is an initializer, a name ("glorot_uniform"), a Tensor or a constant value
    (then ``shape`` must be None, and a Tensor or numpy array gives the dtype); None uses the
    scope's initializer, else glorot_uniform for floats and zeros for ints and bools.
    ``regularizer(v)`` adds its loss to REGULARIZATION_LOSSES.

    With a ``partitioner`` (or the scope's), a variable of rank >= 1 is a ``PartitionedVariable``
    of shards ``name/part_<i>`` (even when the partitioner asks for one shard, as in TF1); scalars
    are never partitioned. Each shard is initialized with its own shape and a ``partition_info``
    (full shape, offset): a constant or Tensor initial value is sliced; an initializer is called
    per shard (the variance-scaling family scales by the full shape; a seeded random initializer
    gives equal-shaped shards the same values, as in TF1). Under reuse the PartitionedVariable is
    returned as it was made; ``partitioner`` may then be omitted. Differences from TF1: a numpy or
    list initial value fixes the shape without ``shape=``; reuse under ``AUTO_REUSE`` without a
    partitioner also finds a partitioned variable (TF1 needs ``reuse=True``).

    Raises ValueError when the variable exists and the scope does not allow reuse, when it does not
    exist under ``reuse=True``, when a shared variable's shape, dtype or partitions differ, when a
    new variable's shape is not fully defined, when a partitioned and an unpartitioned variable
    would share a name, and when a partitioner's answer is not one count (1..size) per dimension
    with at most one dimension cut.
    """
    scope = get_variable_scope()
    kw = dict(
        initializer=initializer,
        regularizer=regularizer,
        trainable=trainable,
        collections=collections,
        partitioner=partitioner,
        validate_shape=validate_shape,
        constraint=constraint,
    )
    if custom_getter is not None:
        store = _state(get_default_graph()).store
        full = f"{scope.name}/{name}" if scope.name else name

        def true_getter(name: str, shape: Any = None, dtype: Any = None, **kw2: Any) -> Any:
            kw2.setdefault("reuse", scope.reuse)
            return store.get_variable(name, shape, dtype, **kw2)

        dtype = constant_initial_dtype(full, dtype, initializer)
        if dtype is None:
            dtype = scope.dtype
        if partitioner is None:
            kw["partitioner"] = scope.partitioner
        return custom_getter(true_getter, full, shape=shape, dtype=dtype, **kw)
    return scope.get_variable(name, shape, dtype, **kw)


def get_local_variable(
    name: str,
    shape: Any = None,
    dtype: Any = None,
    initializer: Any = None,
    regularizer: Any = None,
    trainable: bool = False,
    collections: list | None = None,
    **kw: Any,
) -> Any:
    """``get_variable`` into LOCAL_VARIABLES, not trainable (TF1's positional order)."""
    kw["collections"] = list(collections or []) + [GraphKeys.LOCAL_VARIABLES]
    kw["trainable"] = False
    return get_variable(name, shape, dtype, initializer=initializer, regularizer=regularizer, **kw)


@contextlib.contextmanager
def variable_scope(
    name_or_scope: str | VariableScope | None,
    default_name: str | None = None,
    values: Any = None,
    initializer: Any = None,
    regularizer: Callable | None = None,
    caching_device: Any = None,
    partitioner: Any = None,
    custom_getter: Callable | None = None,
    reuse: Any = None,
    dtype: Any = None,
    use_resource: Any = None,
    constraint: Callable | None = None,
    auxiliary_name_scope: bool = True,
) -> Iterator[VariableScope]:
    """Enter a variable scope (and a name scope for ops); yields the VariableScope.

    ``name_or_scope`` is a name (nested under the current scope), a VariableScope (re-entered
    by its absolute name), or None with ``default_name`` (made unique: dense, dense_1, ...).
    ``reuse`` is True, AUTO_REUSE or None/False (inherit); arguments left None are inherited
    (``initializer``, ``regularizer``, ``partitioner``, ... become ``get_variable``'s defaults).
    Raises ValueError when both ``name_or_scope`` and ``default_name`` are None, or when
    ``reuse`` is not one of those values.
    """
    if name_or_scope is None and default_name is None:
        raise ValueError("variable_scope: if name_or_scope is None, default_name is required")
    if reuse not in (None, False, True, AUTO_REUSE):
        raise ValueError(
            f"variable_scope: reuse must be True, False, None or AUTO_REUSE: {reuse!r}"
        )
    g = get_default_graph()
    st = _state(g)
    old = st.current
    is_object = isinstance(name_or_scope, VariableScope)
    if is_object:
        src: VariableScope = name_or_scope  # type: ignore[assignment]
        new_name = src.name
        # TF1 (1.x's variable_scope._enter_scope_uncached): re-entering a scope object opens a
        # new name scope named by its last component under the current name scope, made
        # unique ("a_1/"); the root scope opens none, so ops stay where they are.
        ns_name: str | None = new_name.split("/")[-1] if new_name else None
        scope_reuse = reuse if reuse else src.reuse
        parent = src
    else:
        rel = name_or_scope if name_or_scope is not None else st.unique_name(default_name)  # type: ignore[arg-type]
        new_name = f"{old.name}/{rel}" if old.name else rel
        ns_name = name_or_scope if name_or_scope is not None else default_name
        scope_reuse = reuse or old.reuse
        parent = old
    opens = auxiliary_name_scope and ns_name is not None
    name_ctx = g.name_scope(ns_name) if opens else contextlib.nullcontext(None)
    with name_ctx as opened:
        if is_object:
            name_scope = src.original_name_scope or (new_name + "/" if new_name else "")
        elif opened is not None:
            name_scope = opened
        else:
            current = g.get_name_scope()
            name_scope = current + "/" if current else ""
        scope = VariableScope(
            scope_reuse,
            name=new_name,
            initializer=initializer if initializer is not None else parent.initializer,
            regularizer=regularizer if regularizer is not None else parent.regularizer,
            dtype=dtype if dtype is not None else parent.dtype,
            custom_getter=custom_getter if custom_getter is not None else parent.custom_getter,
            name_scope=name_scope,
            constraint=constraint if constraint is not None else parent.constraint,
            partitioner=partitioner if partitioner is not None else parent.partitioner,
        )
        st.open(new_name)
        saved_counts = dict(st.counts) if is_object else None
        st.current = scope
        try:
            yield scope
        finally:
            st.current = old
            if saved_counts is not None:
                st.counts = saved_counts
            else:
                st.close_subscopes(new_name)


class Template:
    """A function whose variables are made on its first call and shared by every later one
    (TF1's ``tf.make_template``): each call runs under the same variable scope, the later ones
    with ``reuse=True`` (so a later call that would make a new variable fails)."""

    def __init__(
        self, name: str, func: Callable, unique_name: str | None = None, custom_getter=None
    ):
        if not callable(func):
            raise TypeError(f"make_template: {func!r} is not callable")
        self._name = name
        self._unique = unique_name
        self._func = func
        self._custom_getter = custom_getter
        self._scope: VariableScope | None = None

    @property
    def variable_scope(self) -> VariableScope | None:
        return self._scope

    @property
    def variable_scope_name(self) -> str | None:
        return None if self._scope is None else self._scope.name

    def _owned(self, key: str) -> list:
        if self._scope is None:
            return []
        return get_default_graph().get_collection(key, self._scope.name + "/")

    @property
    def trainable_variables(self) -> list:
        return self._owned(GraphKeys.TRAINABLE_VARIABLES)

    @property
    def global_variables(self) -> list:
        return self._owned(GraphKeys.GLOBAL_VARIABLES)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._scope is None:
            with variable_scope(
                self._unique, default_name=self._name, custom_getter=self._custom_getter
            ) as sc:
                self._scope = sc
                return self._func(*args, **kwargs)
        with variable_scope(self._scope, reuse=True, custom_getter=self._custom_getter):
            return self._func(*args, **kwargs)


def make_template(
    name_: str,
    func_: Callable,
    create_scope_now_: bool = False,
    unique_name_: str | None = None,
    custom_getter_: Callable | None = None,
    **kwargs: Any,
) -> Template:
    """TF1's ``tf.make_template``: ``func_`` (with ``kwargs`` bound) wrapped so that all its
    calls share the variables its first call makes, under the scope ``name_`` (made unique)."""
    import functools

    fn = functools.partial(func_, **kwargs) if kwargs else func_
    t = Template(name_, fn, unique_name_, custom_getter_)
    if create_scope_now_:
        with variable_scope(unique_name_, default_name=name_) as sc:
            t._scope = sc
    return t
