"""Graph IR: Graph, Operation, Tensor, shapes, name scopes, control dependencies, collections."""

from __future__ import annotations

import contextlib
import re
import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from . import dtypes as _dt


class Dimension(int):
    """A known dimension as TF1 programs read one from a shape (``x.get_shape()[1].value``): an
    int that also has TF1's ``value``. ``Dimension(None)`` is the unknown one
    (``UnknownDimension``), which a TF1 program gets from an unknown dimension of a shape; hetbed's
    own code reads None there (``TensorShape.__getitem__``)."""

    __slots__ = ()

    def __new__(cls, value: Any = None) -> Any:
        if value is None or isinstance(value, UnknownDimension):
            return UNKNOWN_DIMENSION
        return int.__new__(cls, int(value))

    @property
    def value(self) -> int:
        return int(self)

    def _op(self, other: Any, fn: Any) -> Any:
        if isinstance(other, UnknownDimension):
            return other
        if isinstance(other, (int, np.integer)):
            return Dimension(fn(int(self), int(other)))
        return NotImplemented

    # TF1's arithmetic of dimensions gives dimensions ((s[1] * s[2]).value)
    def __add__(self, o: Any) -> Any:
        return self._op(o, lambda a, b: a + b)

    def __radd__(self, o: Any) -> Any:
        return self._op(o, lambda a, b: b + a)

    def __sub__(self, o: Any) -> Any:
        return self._op(o, lambda a, b: a - b)

    def __rsub__(self, o: Any) -> Any:
        return self._op(o, lambda a, b: b - a)

    def __mul__(self, o: Any) -> Any:
        return self._op(o, lambda a, b: a * b)

    def __rmul__(self, o: Any) -> Any:
        return self._op(o, lambda a, b: b * a)

    def __floordiv__(self, o: Any) -> Any:
        return self._op(o, lambda a, b: a // b)

    def __mod__(self, o: Any) -> Any:
        return self._op(o, lambda a, b: a % b)

    def is_compatible_with(self, other: Any) -> bool:
        other = Dimension(other) if not isinstance(other, UnknownDimension) else other
        return isinstance(other, UnknownDimension) or int(other) == int(self)

    def merge_with(self, other: Any) -> Dimension:
        if not self.is_compatible_with(other):
            raise ValueError(f"Dimensions {int(self)} and {other} are not compatible")
        return self


class UnknownDimension:
    """TF1's ``Dimension(None)``: ``value`` is None, comparisons with it are unknown (None,
    which is false), arithmetic gives it again; it is not an int."""

    __slots__ = ()
    value = None

    def __repr__(self) -> str:
        return "Dimension(None)"

    def __str__(self) -> str:
        return "?"

    def __eq__(self, other: object) -> Any:
        return other is None or isinstance(other, UnknownDimension) or None

    def __ne__(self, other: object) -> Any:
        return not (other is None or isinstance(other, UnknownDimension)) and None

    def __hash__(self) -> int:
        return hash(None)

    def __bool__(self) -> bool:
        return False

    def __int__(self) -> int:
        raise TypeError("an unknown Dimension has no int value")

    __index__ = __int__

    def _unknown(self, other: Any = None) -> Any:
        if isinstance(other, (int, np.integer, Dimension, UnknownDimension)) or other is None:
            return self
        return NotImplemented  # a tensor: its own operator then refuses this dimension

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _unknown
    __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _unknown
    __lt__ = __le__ = __gt__ = __ge__ = lambda self, other: None  # noqa: E731

    def is_compatible_with(self, other: Any) -> bool:
        return True

    def merge_with(self, other: Any) -> Any:
        return Dimension(other) if not isinstance(other, UnknownDimension) else self


UNKNOWN_DIMENSION = object.__new__(UnknownDimension)

#: how many graphs are capturing (Graph.capturing): op building checks it before anything else
CAPTURING = 0


def _caller_is_user(depth: int = 2) -> bool:
    """Whether the code asking for a dimension is not hetbed's own (which reads None)."""
    name = sys._getframe(depth).f_globals.get("__name__", "")
    return not (name == "hetbed" or name.startswith("hetbed."))


def dimension_value(d: Any) -> int | None:
    """TF1's ``tf.compat.dimension_value``: a dimension (or int, or None) as an int or None."""
    return None if d is None or isinstance(d, UnknownDimension) else int(d)


class TensorShape:
    """A possibly partial shape: ``dims`` is a tuple of ints and Nones, or None for unknown rank.
    Indexing or iterating it gives ``Dimension``s (an int with TF1's ``value``); an unknown one is
    ``Dimension(None)`` to a TF1 program and None to hetbed's own code."""

    __slots__ = ("dims",)

    def __init__(self, dims: Iterable[int | None] | TensorShape | None):
        if isinstance(dims, TensorShape):
            dims = dims.dims
        self.dims = (
            None
            if dims is None
            else tuple(
                None if d is None or isinstance(d, UnknownDimension) else int(d) for d in dims
            )
        )

    @property
    def ndims(self) -> int | None:
        return None if self.dims is None else len(self.dims)

    rank = ndims

    def as_list(self) -> list[int | None]:
        if self.dims is None:
            raise ValueError("as_list() is not defined on an unknown TensorShape")
        return list(self.dims)

    def is_fully_defined(self) -> bool:
        return self.dims is not None and all(d is not None for d in self.dims)

    def num_elements(self) -> int | None:
        if not self.is_fully_defined():
            return None
        return int(np.prod(self.dims, dtype=np.int64))

    def is_compatible_with(self, other: TensorShape | Sequence[int | None] | None) -> bool:
        other = as_shape(other)
        if self.dims is None or other.dims is None:
            return True
        if len(self.dims) != len(other.dims):
            return False
        return all(a is None or b is None or a == b for a, b in zip(self.dims, other.dims))

    def merge_with(self, other: TensorShape | Sequence[int | None] | None) -> TensorShape:
        other = as_shape(other)
        if not self.is_compatible_with(other):
            raise ValueError(f"shapes {self} and {other} are not compatible")
        if self.dims is None:
            return other
        if other.dims is None:
            return self
        return TensorShape(a if a is not None else b for a, b in zip(self.dims, other.dims))

    def assert_is_compatible_with(self, other: TensorShape | Sequence[int | None] | None) -> None:
        """ValueError naming both shapes unless they are compatible (TF1's)."""
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {as_shape(other)} are incompatible")

    def assert_is_fully_defined(self) -> None:
        if not self.is_fully_defined():
            raise ValueError(f"Shape {self} is not fully defined")

    def assert_has_rank(self, rank: int) -> None:
        if self.dims is not None and len(self.dims) != rank:
            raise ValueError(f"Shape {self} must have rank {rank}")

    def with_rank(self, rank: int) -> TensorShape:
        """This shape, with its rank known to be ``rank`` (ValueError if it is another)."""
        try:
            return self.merge_with(TensorShape([None] * rank))
        except ValueError:
            raise ValueError(f"Shape {self} must have rank {rank}") from None

    def with_rank_at_least(self, rank: int) -> TensorShape:
        if self.dims is not None and len(self.dims) < rank:
            raise ValueError(f"Shape {self} must have rank at least {rank}")
        return self

    def with_rank_at_most(self, rank: int) -> TensorShape:
        if self.dims is not None and len(self.dims) > rank:
            raise ValueError(f"Shape {self} must have rank at most {rank}")
        return self

    def concatenate(self, other: TensorShape | Sequence[int | None] | None) -> TensorShape:
        """The dimensions of this shape, then ``other``'s (unknown rank if either is)."""
        other = as_shape(other)
        if self.dims is None or other.dims is None:
            return TensorShape(None)
        return TensorShape(self.dims + other.dims)

    def __iter__(self) -> Iterator[Any]:
        if self.dims is None:
            raise ValueError("cannot iterate over a shape of unknown rank")
        if _caller_is_user():  # TF1 programs iterate Dimensions ([d.value for d in shape])
            return iter([UNKNOWN_DIMENSION if d is None else Dimension(d) for d in self.dims])
        return iter(self.dims)

    def __len__(self) -> int:
        if self.dims is None:
            raise ValueError("cannot take the length of a shape of unknown rank")
        return len(self.dims)

    def __getitem__(self, i):
        if self.dims is None:
            return None if isinstance(i, int) else TensorShape(None)
        if isinstance(i, slice):
            return TensorShape(self.dims[i])
        d = self.dims[i]
        if d is None:  # TF1 programs get Dimension(None); hetbed's own code None
            return UNKNOWN_DIMENSION if _caller_is_user() else None
        return Dimension(d)

    def __eq__(self, other: object) -> bool:
        try:
            return self.dims == as_shape(other).dims  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False

    def __hash__(self) -> int:
        return hash(self.dims)

    def __repr__(self) -> str:
        if self.dims is None:
            return "<unknown>"
        dims = ["?" if d is None else str(d) for d in self.dims]
        return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"  # TF1's: (4,)


def as_shape(value: object) -> TensorShape:
    if isinstance(value, TensorShape):
        return value
    if value is None:
        return TensorShape(None)
    if isinstance(value, (int, np.integer)):
        return TensorShape([int(value)])
    if isinstance(value, UnknownDimension):
        return TensorShape([None])
    return TensorShape(value)  # type: ignore[arg-type]


class Tensor:
    """The ``index``-th output of an Operation: a symbolic value with a static dtype and shape."""

    __slots__ = ("op", "value_index", "dtype", "_shape", "__weakref__")
    #: numpy defers to the Tensor's operators (``ndarray - tensor`` is a Sub op, not an object
    #: array of one Sub per element), as for TensorFlow's tensors
    __array_priority__ = 100

    def __init__(self, op: Operation, value_index: int, dtype: _dt.DType, shape: TensorShape):
        self.op = op
        self.value_index = value_index
        self.dtype = dtype
        self._shape = shape

    @property
    def name(self) -> str:
        return f"{self.op.name}:{self.value_index}"

    # TF1's private fields, which programs read (openai/baselines' policies test
    # ``inpt._op.type == 'Placeholder'``)
    @property
    def _op(self) -> Operation:
        return self.op

    @property
    def _value_index(self) -> int:
        return self.value_index

    @property
    def _dtype(self) -> _dt.DType:
        return self.dtype

    @property
    def graph(self) -> Graph:
        return self.op.graph

    @property
    def device(self) -> str:
        return self.op.device

    @property
    def shape(self) -> TensorShape:
        return self._shape

    def get_shape(self) -> TensorShape:
        return self._shape

    def set_shape(self, shape: object) -> None:
        """Refine the static shape; raises ValueError when it contradicts what is known."""
        self._shape = self._shape.merge_with(as_shape(shape))

    def consumers(self) -> list[Operation]:
        return [op for op in self.graph._consumers.get(self, ())]

    def eval(self, feed_dict: dict | None = None, session: Any = None) -> Any:
        from .session import get_default_session

        sess = session or get_default_session()
        if sess is None:
            raise ValueError(
                "Tensor.eval() needs a session: pass session= or use `with sess.as_default()`"
            )
        return sess.run(self, feed_dict)

    def __repr__(self) -> str:
        return f"<hb.Tensor '{self.name}' shape={self._shape} dtype={self.dtype.name}>"

    __hash__ = object.__hash__  # identity (a C slot: tensors key the planners' dicts)

    def __eq__(self, other: object) -> bool:  # identity, like TF1 graph tensors
        return self is other

    def __bool__(self) -> bool:
        raise TypeError(
            f"using {self.name} as a Python bool is not allowed: the value is only known when "
            "the graph runs; use hb.where / hb.cond-style ops instead"
        )

    def __iter__(self):
        raise TypeError(f"{self.name} is not iterable; use hb.unstack or hb.split")

    # Arithmetic operators are attached by runtime.ops.math (kept next to the ops they build).


class NodeDef:
    """TF1's ``tf.NodeDef`` (the fields a program reads): ``name``, ``op`` (the op type),
    ``input`` (input tensor names, ``^name`` for control inputs), ``device`` and ``attr``."""

    __slots__ = ("name", "op", "input", "device", "attr")

    def __init__(
        self,
        name: str = "",
        op: str = "",
        input: list | None = None,  # noqa: A002 - TF's field name
        device: str = "",
        attr: dict | None = None,
    ):
        self.name, self.op, self.device = name, op, device
        self.input = list(input or [])
        self.attr = dict(attr or {})

    def __repr__(self) -> str:
        return f"NodeDef(name={self.name!r}, op={self.op!r}, device={self.device!r})"


class Operation:
    """A node of the graph: an op type, its inputs, attributes, device request and outputs."""

    __slots__ = (
        "graph",
        "name",
        "type",
        "inputs",
        "control_inputs",
        "attrs",
        "outputs",
        "device",
        "colocation_groups",
        "_id",
        "op_def",
        "__weakref__",
    )

    def __init__(self, graph: Graph, name: str, op_type: str, inputs: list[Tensor], attrs: dict):
        self.graph = graph
        self.name = name
        self.type = op_type
        self.inputs = inputs
        self.control_inputs: list[Operation] = []
        self.attrs = attrs
        self.outputs: list[Tensor] = []
        self.device = ""
        self.colocation_groups: list[str] = []
        self._id = 0
        self.op_def: Any = None

    @property
    def node_def(self) -> NodeDef:
        """The op as TF1's NodeDef describes it (``name``, ``op``, ``input``, ``device``,
        ``attr``): what device functions such as ``lambda op: ... op.node_def.op ...`` read."""
        ins = [t.name[:-2] if t.name.endswith(":0") else t.name for t in self.inputs]
        ins += [f"^{c.name}" for c in self.control_inputs]
        return NodeDef(self.name, self.type, ins, self.device, dict(self.attrs))

    def values(self) -> tuple[Tensor, ...]:
        """The op's outputs (TF1's ``Operation.values()``)."""
        return tuple(self.outputs)

    def get_attr(self, name: str) -> Any:
        try:
            return self.attrs[name]
        except KeyError:
            raise ValueError(f"op {self.name} ({self.type}) has no attr {name!r}") from None

    def _add_control_input(self, op: Operation) -> None:
        if op not in self.control_inputs:
            self.control_inputs.append(op)

    def run(self, feed_dict: dict | None = None, session: Any = None) -> None:
        from .session import get_default_session

        sess = session or get_default_session()
        if sess is None:
            raise ValueError("Operation.run() needs a session")
        sess.run(self, feed_dict)

    def describe(self) -> str:
        """One line naming the op, its type and its inputs with shapes (for error messages)."""
        ins = ", ".join(f"{t.name} {t.shape} {t.dtype.name}" for t in self.inputs)
        return f"{self.name} ({self.type}) with inputs [{ins}]"

    def __repr__(self) -> str:
        return f"<hb.Operation '{self.name}' type={self.type}>"


class GraphKeys:
    GLOBAL_VARIABLES = "variables"
    TRAINABLE_VARIABLES = "trainable_variables"
    LOCAL_VARIABLES = "local_variables"
    MODEL_VARIABLES = "model_variables"
    MOVING_AVERAGE_VARIABLES = "moving_average_variables"
    UPDATE_OPS = "update_ops"
    LOSSES = "losses"
    REGULARIZATION_LOSSES = "regularization_losses"
    SUMMARIES = "summaries"
    GLOBAL_STEP = "global_step"
    TRAIN_OP = "train_op"
    INIT_OP = "init_op"
    SAVERS = "savers"
    QUEUE_RUNNERS = "queue_runners"
    # TF1's other keys (collections hetbed's own code does not fill unless said)
    VARIABLES = GLOBAL_VARIABLES  # (TF1's deprecated alias)
    METRIC_VARIABLES = "metric_variables"  # (tf.metrics' local variables go here too)
    LOCAL_RESOURCES = "local_resources"
    RESOURCES = "resources"
    TRAINABLE_RESOURCE_VARIABLES = "trainable_resource_variables"
    WEIGHTS = "weights"
    BIASES = "biases"
    ACTIVATIONS = "activations"
    EVAL_STEP = "eval_step"
    LOCAL_INIT_OP = "local_init_op"
    READY_OP = "ready_op"
    READY_FOR_LOCAL_INIT_OP = "ready_for_local_init_op"
    SUMMARY_OP = "summary_op"
    CONCATENATED_VARIABLES = "concatenated_variables"
    SAVEABLE_OBJECTS = "saveable_objects"
    ASSET_FILEPATHS = "asset_filepaths"
    COND_CONTEXT = "cond_context"
    WHILE_CONTEXT = "while_context"
    TABLE_INITIALIZERS = "table_initializer"


_NAME_RE = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\-/>]*$")
_VALID_NAMES: set[str] = set()  # names _NAME_RE accepted (ops repeat a few: "Const", "add")


class Graph:
    """A dataflow graph. Ops are added through op constructors while it is the default graph."""

    def __init__(self) -> None:
        self._ops: list[Operation] = []
        self._by_name: dict[str, Operation] = {}
        self._names_in_use: dict[str, int] = {}
        self._consumers: dict[Tensor, list[Operation]] = {}
        self._collections: dict[str, list] = {}
        self._lock = threading.RLock()
        self._local = _BuilderState()
        self.seed: int | None = None
        self._last_id = 0
        self._finalized = False
        #: where a tensor of another graph used as an input is turned into one of this graph
        #: (a dataset function's graph captures its caller's tensors: hetbed/data/dataset.py);
        #: set with ``capturing``
        self._capture_hook: Any = None
        self.version = 0  # bumped whenever an op is added; sessions use it to invalidate caches
        #: op type -> registered gradient name for the ops added meanwhile (gradient_override_map)
        self._gradient_override_map: dict[str, str] = {}

    # ---- thread-local builder state -------------------------------------------------
    def _state(self) -> threading.local:
        return self._local

    # ---- ops -----------------------------------------------------------------------
    def get_operations(self) -> list[Operation]:
        return list(self._ops)

    def get_operation_by_name(self, name: str) -> Operation:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"no operation named {name!r} in this graph") from None

    def get_tensor_by_name(self, name: str) -> Tensor:
        if ":" not in name:
            raise ValueError(f"tensor names look like 'op:index', got {name!r}")
        op_name, idx = name.rsplit(":", 1)
        op = self.get_operation_by_name(op_name)
        i = int(idx)
        if not 0 <= i < len(op.outputs):
            raise KeyError(f"op {op_name} has {len(op.outputs)} outputs; no output {i}")
        return op.outputs[i]

    def as_graph_def(self, from_version: Any = None, add_shapes: bool = False) -> Any:
        """TensorFlow's ``GraphDef`` proto of this graph (TensorBoard's copy of the message):
        each op's name, type, inputs (``^name`` for control inputs) and device, for
        TensorBoard, ``tf.train.write_graph`` and inspection; no attributes, so it does not
        rebuild the graph (hetbed's own graph files do: ``export_meta_graph``)."""
        from hetbed.summary import graph_def

        return graph_def(self)

    @property
    def graph_def_versions(self) -> Any:
        return self.as_graph_def().versions

    def as_graph_element(self, obj: object) -> Tensor | Operation:
        """Resolve a Tensor, Operation, Variable or name to an element of this graph."""
        if hasattr(obj, "_as_graph_element"):
            obj = obj._as_graph_element()  # type: ignore[union-attr]
        if isinstance(obj, str):
            return self.get_tensor_by_name(obj) if ":" in obj else self.get_operation_by_name(obj)
        if isinstance(obj, (Tensor, Operation)):
            if obj.graph is not self:
                raise ValueError(f"{obj.name} is from another graph than this session's")
            return obj
        raise TypeError(f"cannot interpret {type(obj).__name__} {obj!r} as a graph element")

    def unique_name(self, name: str, mark_as_used: bool = True) -> str:
        scope = self._state().scope
        full = f"{scope}{name}" if scope else name
        key = full.lower()
        n = self._names_in_use.get(key, 0)
        if mark_as_used:
            self._names_in_use[key] = n + 1
        if n > 0:
            base = full
            while True:
                full = f"{base}_{n}"
                if full.lower() not in self._names_in_use:
                    break
                n += 1
            if mark_as_used:
                self._names_in_use[full.lower()] = 1
        return full

    def _add_op(
        self,
        op_type: str,
        inputs: list[Tensor],
        attrs: dict,
        name: str | None,
        output_specs: list | None = None,
        op_def: Any = None,
    ) -> Operation:
        """Add an op with outputs of ``output_specs`` [(shape, dtype)]; device functions see it whole."""
        if self._finalized:
            raise RuntimeError("graph is finalized and cannot be modified")
        if self._capture_hook is not None and any(t.graph is not self for t in inputs):
            inputs = [t if t.graph is self else self._capture_hook(t) for t in inputs]
        for t in inputs:
            if t.graph is not self:
                raise ValueError(
                    f"{op_type} {name or ''}: input {t.name} is from another graph; "
                    "every input of an op must be in the same graph"
                )
        with self._lock:
            if name is not None and name.endswith("/"):
                full = name[:-1]  # an absolute name (as returned by name_scope)
                self._names_in_use[full.lower()] = max(self._names_in_use.get(full.lower(), 0), 1)
            else:
                raw = name or op_type
                if raw not in _VALID_NAMES:
                    if not _NAME_RE.match(raw):
                        raise ValueError(f"{raw!r} is not a valid op name")
                    if len(_VALID_NAMES) < 4096:
                        _VALID_NAMES.add(raw)
                full = self.unique_name(raw)
            override = self._gradient_override_map.get(op_type)
            if override is not None:
                attrs = dict(attrs, _gradient_op_type=override)
            op = Operation(self, full, op_type, inputs, attrs)
            op.op_def = op_def
            op.outputs = [
                Tensor(op, i, dt, as_shape(sh)) for i, (sh, dt) in enumerate(output_specs or [])
            ]
            st = self._state()
            for c in st.control:
                if c is not None:
                    for dep in c:
                        op._add_control_input(dep)
            self._last_id += 1
            op._id = self._last_id
            if st.colocate and st.colocate[-1]:
                # Like TF: inside colocate_with, device scopes are ignored and the op takes the
                # device of the op it is colocated with.
                op.colocation_groups = list(st.colocate[-1])
                target = self._by_name.get(op.colocation_groups[0])
                op.device = target.device if target is not None else ""
            elif st.device:
                op.device = _merged_device(st.device, op)
            self._ops.append(op)
            self._by_name[full] = op
            for t in inputs:
                self._consumers.setdefault(t, []).append(op)
            self.version += 1
        return op

    # ---- scopes --------------------------------------------------------------------
    @contextlib.contextmanager
    def gradient_override_map(self, op_type_map: dict) -> Iterator[None]:
        """TF1's: ops of the types in ``op_type_map`` added inside take their gradient from the
        function registered (``RegisterGradient``) under the name it maps them to."""
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in op_type_map.items()):
            raise TypeError("Keys and values in op_type_map must be strings")
        saved = {k: self._gradient_override_map.get(k) for k in op_type_map}
        self._gradient_override_map.update(op_type_map)
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    self._gradient_override_map.pop(k, None)
                else:
                    self._gradient_override_map[k] = v

    @contextlib.contextmanager
    def name_scope(self, name: str | None) -> Iterator[str]:
        st = self._state()
        old = st.scope
        if name is None or name == "":
            st.scope = ""
        elif name.endswith("/"):
            st.scope = name
        else:
            st.scope = self.unique_name(name) + "/"
        try:
            yield st.scope
        finally:
            st.scope = old

    def get_name_scope(self) -> str:
        return self._state().scope.rstrip("/")

    @contextlib.contextmanager
    def control_dependencies(self, control_inputs: Iterable | None) -> Iterator[None]:
        st = self._state()
        if control_inputs is None:
            saved, st.control = st.control, []
            try:
                yield
            finally:
                st.control = saved
            return
        ops = []
        for c in control_inputs:
            if self._capture_hook is not None and getattr(c, "graph", self) is not self:
                continue  # a function graph drops its caller's control inputs, as TF's do
            el = self.as_graph_element(c)
            ops.append(el.op if isinstance(el, Tensor) else el)
        st.control.append(ops)
        try:
            yield
        finally:
            st.control.pop()

    def current_control_inputs(self) -> list:
        """The ops the open control_dependencies blocks give an op made now (in order)."""
        return [dep for c in self._state().control if c is not None for dep in c]

    @contextlib.contextmanager
    def device(self, spec: Any) -> Iterator[None]:
        st = self._state()
        st.device.append(spec)
        try:
            yield
        finally:
            st.device.pop()

    @contextlib.contextmanager
    def colocate_with(self, op: object, ignore_existing: bool = False) -> Iterator[None]:
        st = self._state()
        if op is None:
            st.colocate.append([])
        else:
            el = self.as_graph_element(op)
            target = el.op if isinstance(el, Tensor) else el
            groups = target.colocation_groups or [target.name]
            prev = [] if ignore_existing or not st.colocate else st.colocate[-1]
            st.colocate.append(list(dict.fromkeys(prev + groups)))
        try:
            yield
        finally:
            st.colocate.pop()

    # ---- collections ---------------------------------------------------------------
    def add_to_collection(self, name: str, value: object) -> None:
        self._collections.setdefault(name, []).append(value)

    def add_to_collections(self, names: Iterable[str], value: object) -> None:
        for n in names:
            self.add_to_collection(n, value)

    def get_collection(self, name: str, scope: str | None = None) -> list:
        items = list(self._collections.get(name, ()))
        if scope is None:
            return items
        rx = re.compile(scope)
        return [x for x in items if rx.match(getattr(x, "name", ""))]

    def get_collection_ref(self, name: str) -> list:
        return self._collections.setdefault(name, [])

    def clear_collection(self, name: str) -> None:
        self._collections.pop(name, None)

    def get_all_collection_keys(self) -> list[str]:
        return list(self._collections)

    # ---- misc ----------------------------------------------------------------------
    def finalize(self) -> None:
        self._finalized = True

    @property
    def finalized(self) -> bool:
        return self._finalized

    @contextlib.contextmanager
    def capturing(self, hook: Any) -> Iterator[None]:
        """While inside, an op of this graph given a tensor of another graph takes
        ``hook(tensor)`` (a tensor of this graph) instead, and ops are built in this graph
        whatever graph their inputs come from (``registry._graph_of``)."""
        global CAPTURING
        self._capture_hook = hook
        CAPTURING += 1
        try:
            yield
        finally:
            CAPTURING -= 1
            self._capture_hook = None

    def as_default(self):
        return _default_graph_stack.get_controller(self)

    def __repr__(self) -> str:
        return f"<hb.Graph with {len(self._ops)} ops>"


def _merged_device(stack: list, op: Operation) -> str:
    """Combine the device scopes in force, inner scopes winning field by field."""
    merge_device = _merge_device or _load_merge_device()
    dev = ""
    for spec in stack:
        if callable(spec):
            op.device = dev  # a device function sees what outer scopes asked for
            picked = spec(op)
            if picked is not None:
                dev = picked if isinstance(picked, str) else picked.to_string()
        elif spec is None:
            dev = ""
        else:
            dev = merge_device(dev, spec)
    return dev


class _BuilderState(threading.local):
    """A graph's builder state, each thread its own: the name scope, control dependencies,
    device and colocation scopes in force, and the ``hb.cond`` branch being built
    (control_flow.py; None outside one)."""

    def __init__(self) -> None:
        self.scope = ""
        self.control: list = []
        self.device: list = []
        self.colocate: list = []
        self.cond: Any = None


_merge_device = None  # devices.naming.merge_device, once first needed (an import per op cost
# a microsecond or two: a third of placing an op under a device scope)


def _load_merge_device() -> Any:
    global _merge_device
    from ..devices.naming import merge_device

    _merge_device = merge_device
    return merge_device


class _DefaultGraphStack(threading.local):
    def __init__(self) -> None:
        self.stack: list[Graph] = []

    def get_default(self) -> Graph:
        if self.stack:
            return self.stack[-1]
        global _global_default_graph
        if _global_default_graph is None:
            _global_default_graph = Graph()
        return _global_default_graph

    @contextlib.contextmanager
    def get_controller(self, g: Graph) -> Iterator[Graph]:
        self.stack.append(g)
        try:
            yield g
        finally:
            self.stack.pop()


_global_default_graph: Graph | None = None
_default_graph_stack = _DefaultGraphStack()


def get_default_graph() -> Graph:
    return _default_graph_stack.get_default()


def reset_default_graph() -> None:
    """Replace the global default graph with a new empty one (not allowed inside a graph scope)."""
    global _global_default_graph
    if _default_graph_stack.stack:
        raise AssertionError(
            "reset_default_graph() called inside a `with graph.as_default()` block"
        )
    _global_default_graph = Graph()


def name_scope(name: str | None, default_name: str | None = None, values: object = None):
    return get_default_graph().name_scope(name if name is not None else default_name)


def control_dependencies(control_inputs: Iterable | None):
    return get_default_graph().control_dependencies(control_inputs)


def device(device_name_or_function: Any):
    return get_default_graph().device(device_name_or_function)


def colocate_with(op: object, ignore_existing: bool = False):
    return get_default_graph().colocate_with(op, ignore_existing)


def add_to_collection(name: str, value: object) -> None:
    get_default_graph().add_to_collection(name, value)


def get_collection(key: str, scope: str | None = None) -> list:
    return get_default_graph().get_collection(key, scope)


def get_collection_ref(key: str) -> list:
    return get_default_graph().get_collection_ref(key)


def set_random_seed(seed: int | None) -> None:
    """Set the graph-level seed of the default graph (ops combine it with their own seed)."""
    get_default_graph().seed = seed
