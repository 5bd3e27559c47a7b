"""Graph files: a versioned JSON or msgpack description of a graph, and Graphviz DOT text.

A document (``graph_to_dict``) lists the nodes in creation order and the graph's collections::

    {"format": "hetbed-graph", "version": 1, "seed": null,
     "nodes": [{"name": "x", "op": "Placeholder", "inputs": [], "control_inputs": [],
                "device": "", "colocation_groups": [],
                "attrs": {"dtype": {"dtype": "float32"}, "shape": {"shape": [null, 3]}},
                "outputs": [{"dtype": "float32", "shape": [null, 3]}]}, ...],
     "collections": {"variables": [{"variable": {"ref": "w:0", ...}}], "train_op": [{"op": "t"}]}}

Inputs are ``"op:index"``, control inputs ``"^op"``. Attr values are typed explicitly (no pickle,
no eval): null, booleans, strings, finite floats, 64-bit ints and lists stand for themselves; any
other value is an object with exactly one tag:

    {"float": "inf" | "-inf" | "nan"}   {"int": "<digits>"} (beyond 64 bits)
    {"tuple": [...]}                    {"dict": {"key": value, ...}}
    {"dtype": "float32"}                {"shape": null | [2, null]}
    {"ndarray": {"dtype": "<f4", "shape": [2, 3], "data": "<base64 of little-endian bytes>"}}
    {"npscalar": {... as ndarray, shape []}}      {"bytes": "<base64>"}
    {"strings": {"shape": [2], "data": ["<base64>", ...]}} (a string tensor's elements, C order)

The msgpack form is the same dict with raw bytes in place of the base64 strings. Loading rebuilds
every op through the registry (so kernels, gradients and costs are the registered ones), keeps
names exactly, re-runs the shape functions and checks them against the stored output shapes.

The value codec lives in typed_values.py and the Graphviz form in dot.py; both are re-exported
here (``encode_value``, ``decode_value``, ``GraphFormatError``, ``to_dot``).
"""

from __future__ import annotations

import json
import os
import warnings
from typing import Any

from ..devices.fileio import atomic_write
from . import dtypes as _dt
from . import ops as _ops  # noqa: F401  (registers every op type a document may use)
from .dot import to_dot  # noqa: F401  (re-exported)
from .errors import InvalidArgumentError, UnimplementedError
from .graph import _NAME_RE, Graph, Operation, Tensor, get_default_graph
from .registry import apply_op, get_op_def
from .typed_values import (  # noqa: F401  (GraphFormatError, encode_value: re-exported)
    GraphFormatError,
    _decode_dtype,
    _decode_shape,
    decode_value,
    encode_value,
)
from .variables import Variable

FORMAT = "hetbed-graph"
VERSION = 1


# ---- graph -> document --------------------------------------------------------------------


def graph_to_dict(graph: Graph | None = None, binary: bool = False) -> dict:
    """The document describing ``graph`` (default graph if None): nodes, seed and collections.

    Raises TypeError naming the op and attr when an attr value has no typed encoding.
    """
    g = graph if graph is not None else get_default_graph()
    nodes = [_node_to_dict(op, binary) for op in g.get_operations()]
    colls: dict[str, list] = {}
    for key in g.get_all_collection_keys():
        items = [_collection_item(key, x, binary) for x in g.get_collection(key)]
        colls[key] = [x for x in items if x is not None]
    seed = None if g.seed is None else int(g.seed)
    return {
        "format": FORMAT,
        "version": VERSION,
        "seed": seed,
        "nodes": nodes,
        "collections": colls,
    }


def as_graph_def(graph: Graph | None = None) -> dict:
    """The JSON-ready document of ``graph`` (default graph if None), like TF1's ``as_graph_def``."""
    return graph_to_dict(graph)


def _node_to_dict(op: Operation, binary: bool) -> dict:
    attrs = {}
    for k, v in op.attrs.items():
        if not isinstance(k, str):
            raise TypeError(f"op {op.name!r} ({op.type}): attr name {k!r} is not a string")
        attrs[k] = encode_value(v, binary, f"attr {k!r} of op {op.name!r} ({op.type})")
    return {
        "name": op.name,
        "op": op.type,
        "inputs": [t.name for t in op.inputs],
        "control_inputs": ["^" + c.name for c in op.control_inputs],
        "device": op.device if isinstance(op.device, str) else op.device.to_string(),
        "colocation_groups": list(op.colocation_groups),
        "attrs": attrs,
        "outputs": [
            {"dtype": t.dtype.name, "shape": None if t.shape.dims is None else list(t.shape.dims)}
            for t in op.outputs
        ],
    }


def _collection_item(key: str, x: Any, binary: bool) -> dict | None:
    if isinstance(x, Variable):
        return {
            "variable": {
                "ref": x._ref.name,
                "initializer": x._initializer_op.name,
                "snapshot": x._snapshot.name,
                "initial_value": x._initial_value.name,
                "trainable": bool(x._trainable),
            }
        }
    if isinstance(x, Operation):
        return {"op": x.name}
    if isinstance(x, Tensor):
        return {"tensor": x.name}
    runner = _queue_runner_item(x)
    if runner is not None:
        return runner
    try:
        return {"value": encode_value(x, binary, f"item of collection {key!r}")}
    except TypeError:
        warnings.warn(
            f"collection {key!r}: skipping {type(x).__name__} {x!r:.60}, which has no "
            "serialized form (only ops, tensors, variables and plain values are written)",
            stacklevel=3,
        )
        return None


# ---- document -> graph --------------------------------------------------------------------


def graph_from_dict(doc: Any, into: Graph | None = None) -> Graph:
    """A new Graph rebuilt from a ``graph_to_dict`` document, names and collections intact
    (``into``: build into that graph instead, which must have no op of the same name).

    Raises GraphFormatError (a ValueError) for another format or version, a malformed or
    inconsistent document (missing input, duplicate name, shapes that disagree with the op's
    shape function, an attribute of the wrong type), naming the node and field;
    UnimplementedError for an unknown op type. No other exception escapes for a bad document.
    """
    try:
        return _graph_from_dict(doc, into)
    except (GraphFormatError, UnimplementedError, InvalidArgumentError):
        raise
    except RecursionError:
        raise GraphFormatError("malformed graph document: nested too deeply") from None
    except (KeyError, AttributeError, TypeError, IndexError, OverflowError, ValueError) as e:
        raise GraphFormatError(f"malformed graph document: {type(e).__name__}: {e}") from None


def _graph_from_dict(doc: Any, into: Graph | None = None) -> Graph:
    if not isinstance(doc, dict):
        raise GraphFormatError(f"a graph document is an object, got {type(doc).__name__}")
    if doc.get("format") != FORMAT:
        raise GraphFormatError(f"not a {FORMAT} document (format={doc.get('format')!r})")
    if doc.get("version") != VERSION:
        raise GraphFormatError(
            f"unsupported {FORMAT} version {doc.get('version')!r}; this hetbed reads version "
            f"{VERSION}"
        )
    nodes = doc.get("nodes")
    if not isinstance(nodes, list):
        raise GraphFormatError("document field 'nodes' must be a list")
    seed = doc.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise GraphFormatError(f"document field 'seed' must be an int or null, got {seed!r}")
    specs = [_parse_node(i, n) for i, n in enumerate(nodes)]
    if into is not None:
        clash = [sp["name"] for sp in specs if _has_op(into, sp["name"])]
        if clash:
            raise InvalidArgumentError(
                f"the graph already has ops named like the imported ones ({', '.join(clash[:3])}"
                f"{', ...' if len(clash) > 3 else ''}); import into an empty graph "
                "(tf.reset_default_graph() or a new tf.Graph())"
            )
    g = into if into is not None else Graph()
    if into is None or g.seed is None:
        g.seed = seed
    built: dict[str, Operation] = {}
    with g.as_default(), g.control_dependencies(None):
        for spec in _topological(specs):
            built[spec["name"]] = _build_node(g, spec, built)
    for spec in specs:
        op = built[spec["name"]]
        for c in spec["control_inputs"]:
            if c[1:] not in built:
                raise GraphFormatError(
                    f"node {spec['name']!r}: control input {c!r} names no node of the document"
                )
            op._add_control_input(built[c[1:]])
    _reserve_scope_names(g)
    colls = doc.get("collections", {})
    if not isinstance(colls, dict):
        raise GraphFormatError("document field 'collections' must be an object")
    variables: dict[str, Variable] = {}
    for key, items in colls.items():
        if not isinstance(items, list):
            raise GraphFormatError(f"collection {key!r} must be a list")
        for i, item in enumerate(items):
            g.add_to_collection(key, _load_item(g, f"collection {key!r} item {i}", item, variables))
    return g


def _has_op(g: Graph, name: str) -> bool:
    try:
        g.get_operation_by_name(name)
    except (KeyError, ValueError):
        return False
    return True


def read_graph_document(data: bytes) -> dict:
    """The document in graph file bytes (JSON or msgpack, recognized by content)."""
    if data.lstrip()[:1] == b"{":
        try:
            doc = json.loads(data)
        except (ValueError, UnicodeDecodeError) as e:
            raise GraphFormatError(f"not a JSON graph document: {e}") from None
        except RecursionError:
            raise GraphFormatError("not a JSON graph document: nested too deeply") from None
        return doc
    import msgpack

    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=True)
    except (ValueError, msgpack.UnpackException) as e:
        raise GraphFormatError(f"not a msgpack graph document: {e}") from None


def _parse_node(i: int, node: Any) -> dict:
    if not isinstance(node, dict):
        raise GraphFormatError(f"node {i}: expected an object, got {type(node).__name__}")
    name = node.get("name")
    where = f"node {i} ({name!r})"
    if not isinstance(name, str) or not _NAME_RE.match(name) or name.endswith("/"):
        raise GraphFormatError(f"{where}: field 'name' must be a valid op name")
    where = f"node {name!r}"

    def field(key: str, kind: type, default: Any = None) -> Any:
        if key not in node and default is not None:
            return default
        v = node.get(key)
        if not isinstance(v, kind):
            raise GraphFormatError(
                f"{where}: field {key!r} must be a {kind.__name__}, got {v!r:.60}"
            )
        return v

    op_type = field("op", str)
    inputs = field("inputs", list)
    controls = field("control_inputs", list, [])
    groups = field("colocation_groups", list, [])
    for key, vals in (
        ("inputs", inputs),
        ("control_inputs", controls),
        ("colocation_groups", groups),
    ):
        if not all(isinstance(v, str) for v in vals):
            raise GraphFormatError(f"{where}: field {key!r} must be a list of strings")
    for ref in inputs:
        _split_ref(ref, f"{where}: input")
    for c in controls:
        if not c.startswith("^"):
            raise GraphFormatError(f"{where}: control input {c!r} must look like '^op'")
    raw_attrs = field("attrs", dict, {})
    attrs = {k: decode_value(v, f"{where}: attr {k!r}") for k, v in raw_attrs.items()}
    for k in _DTYPE_ATTRS & set(attrs):
        if attrs[k] is not None and not isinstance(attrs[k], _dt.DType):
            raise GraphFormatError(
                f'{where}: attr {k!r} must be a dtype, written {{"dtype": "float32"}}, got '
                f"{raw_attrs[k]!r:.60}"
            )
    outputs = []
    for j, o in enumerate(field("outputs", list)):
        if not isinstance(o, dict) or set(o) != {"dtype", "shape"}:
            raise GraphFormatError(f"{where}: output {j} needs exactly 'dtype' and 'shape'")
        ow = f"{where}: output {j}"
        outputs.append((_decode_dtype(o["dtype"], ow), _decode_shape(o["shape"], ow)))
    return {
        "name": name,
        "op": op_type,
        "inputs": inputs,
        "control_inputs": controls,
        "device": field("device", str, ""),
        "colocation_groups": groups,
        "attrs": attrs,
        "outputs": outputs,
    }


def _split_ref(ref: str, where: str) -> tuple[str, int]:
    op_name, sep, idx = ref.rpartition(":")
    if not sep or not op_name or not idx.isdigit():
        raise GraphFormatError(f"{where} {ref!r} must look like 'op:index'")
    return op_name, int(idx)


def _topological(specs: list[dict]) -> list[dict]:
    """The nodes in document order, moved only where a data input comes later (hand edits)."""
    by_name: dict[str, dict] = {}
    for s in specs:
        if s["name"] in by_name:
            raise GraphFormatError(f"node {s['name']!r}: the name appears twice in the document")
        by_name[s["name"]] = s
    order: list[dict] = []
    state: dict[str, int] = {}  # 1: on the stack, 2: placed
    for s in specs:
        if state.get(s["name"]):
            continue
        state[s["name"]] = 1
        stack = [(s, iter(s["inputs"]))]
        while stack:
            node, it = stack[-1]
            ref = next(it, None)
            if ref is None:
                stack.pop()
                state[node["name"]] = 2
                order.append(node)
                continue
            src = _split_ref(ref, "")[0]
            if src not in by_name:
                raise GraphFormatError(
                    f"node {node['name']!r}: input {ref!r} names no node of the document"
                )
            if state.get(src) == 1:
                raise GraphFormatError(f"node {node['name']!r}: input {ref!r} closes a cycle")
            if not state.get(src):
                state[src] = 1
                stack.append((by_name[src], iter(by_name[src]["inputs"])))
    return order


def _build_node(
    g: Graph, spec: dict, built: dict[str, Operation], mapped: dict | None = None
) -> Operation:
    """Add the node ``spec`` to ``g``; its inputs are outputs of ``built`` ops, or the tensors
    ``mapped`` gives for their names (``import_graph_def``'s ``input_map``)."""
    name = spec["name"]
    inputs = []
    for ref in spec["inputs"]:
        if mapped and ref in mapped:
            inputs.append(mapped[ref])
            continue
        src, idx = _split_ref(ref, "")
        outs = built[src].outputs
        if idx >= len(outs):
            raise GraphFormatError(f"node {name!r}: input {ref!r}: {src} has {len(outs)} outputs")
        inputs.append(outs[idx])
    try:
        get_op_def(spec["op"])
    except UnimplementedError:
        raise UnimplementedError(
            f"node {name!r}: unknown op type {spec['op']!r}; import the module that defines it "
            "before loading the graph"
        ) from None
    try:
        # A trailing "/" makes the name absolute: Graph._add_op keeps it as is (no uniquifying).
        op = apply_op(spec["op"], inputs, spec["attrs"], name=name + "/", graph=g)
    except (InvalidArgumentError, KeyError, IndexError, TypeError, ValueError) as e:
        why = f"missing attr {e}" if isinstance(e, KeyError) else str(e)
        raise GraphFormatError(
            f"node {name!r} ({spec['op']}): the op's shape function rejects it: {why}"
        ) from None
    stored = spec["outputs"]
    if len(stored) != len(op.outputs):
        raise GraphFormatError(
            f"node {name!r} ({spec['op']}): stored {len(stored)} outputs, the op has "
            f"{len(op.outputs)}"
        )
    for j, (t, (dt, shape)) in enumerate(zip(op.outputs, stored)):
        if t.dtype != dt or not t.shape.is_compatible_with(shape):
            raise GraphFormatError(
                f"node {name!r} ({spec['op']}): output {j} is stored as {dt.name} {shape} but "
                f"the shape function gives {t.dtype.name} {t.shape}"
            )
        t.set_shape(shape)  # keep refinements made with set_shape
    op.device = spec["device"]
    op.colocation_groups = list(spec["colocation_groups"])
    return op


def _reserve_scope_names(g: Graph) -> None:
    """Mark every name scope of the loaded names as used, so new ops and scopes get fresh names.

    Graph._add_op reserves the op names themselves; the scopes that produced them ("gradients" of
    "gradients/MatMul_grad/MatMul") were reserved by name_scope when the graph was first built.
    """
    for op in g.get_operations():
        parts = op.name.split("/")
        for k in range(1, len(parts)):
            g._names_in_use.setdefault("/".join(parts[:k]).lower(), 1)


def variable_from_ops(
    ref: Tensor,
    initial_value: Tensor,
    initializer_op: Operation,
    snapshot: Tensor,
    trainable: bool = True,
) -> Variable:
    """A Variable over existing ops (a loaded graph's), adding no op and no collection entry.

    The fields are those Variable.__init__ sets; ``constraint`` (a Python function) is not
    serialized and comes back as None.
    """
    v = Variable.__new__(Variable)
    v._ref = ref
    v._initial_value = initial_value
    v._initializer_op = initializer_op
    v._snapshot = snapshot
    v._trainable = trainable
    v.constraint = None
    v._save_slice_info = None
    return v


def _load_item(g: Graph, where: str, item: Any, variables: dict[str, Variable]) -> Any:
    if not isinstance(item, dict) or len(item) != 1:
        raise GraphFormatError(
            f"{where}: expected one of {{op, tensor, variable, queue_runner, value}}"
        )
    ((tag, body),) = item.items()
    if tag == "value":
        return decode_value(body, where)
    if tag in ("op", "tensor"):
        return _lookup(g, where, body, tag == "tensor")
    if tag == "queue_runner":
        return _load_queue_runner(g, where, body)
    if tag != "variable":
        raise GraphFormatError(f"{where}: unknown collection item tag {tag!r}")
    keys = {"ref", "initializer", "snapshot", "initial_value", "trainable"}
    if not isinstance(body, dict) or set(body) != keys:
        raise GraphFormatError(f"{where}: a variable needs exactly {sorted(keys)}")
    if not isinstance(body["trainable"], bool):
        raise GraphFormatError(f"{where}: variable field 'trainable' must be a bool")
    ref = _lookup(g, where + " ref", body["ref"], True)
    if ref.name not in variables:  # the same Variable in several collections stays one object
        variables[ref.name] = variable_from_ops(
            ref,
            _lookup(g, where + " initial_value", body["initial_value"], True),
            _lookup(g, where + " initializer", body["initializer"], False),
            _lookup(g, where + " snapshot", body["snapshot"], True),
            body["trainable"],
        )
    return variables[ref.name]


#: the exceptions a serialized queue runner may name as meaning "the queue is closed"
_CLOSED_TYPES = ("OutOfRangeError", "CancelledError")


def _queue_runner_item(x: Any) -> dict | None:
    """A ``QueueRunner`` as TF's ``QueueRunnerDef`` holds it (the queue, its enqueue, close and
    cancel ops by name, the exceptions that mean the queue closed), or None for anything else."""
    from .train.queue_runner import QueueRunner

    if not isinstance(x, QueueRunner):
        return None

    def op_name(o: Any) -> str:
        return o.op.name if isinstance(o, Tensor) else o.name

    closed = [t.__name__ for t in x.queue_closed_exception_types]
    if any(c not in _CLOSED_TYPES for c in closed):
        warnings.warn(
            f"queue runner {x.name!r}: only {', '.join(_CLOSED_TYPES)} are written as its "
            f"queue-closed exceptions; {closed} kept as those it names",
            stacklevel=4,
        )
    return {
        "queue_runner": {
            "queue": x.queue.queue_ref.name,
            "enqueue_ops": [op_name(o) for o in x.enqueue_ops],
            "close_op": op_name(x.close_op),
            "cancel_op": op_name(x.cancel_op),
            "closed_exceptions": [c for c in closed if c in _CLOSED_TYPES],
            "name": x.name,
        }
    }


def _load_queue_runner(g: Graph, where: str, body: Any) -> Any:
    """The ``QueueRunner`` of a ``_queue_runner_item`` body, on the ops of ``g``."""
    from . import errors
    from .ops.data_flow import QueueBase
    from .train.queue_runner import QueueRunner

    keys = {"queue", "enqueue_ops", "close_op", "cancel_op", "closed_exceptions", "name"}
    if not isinstance(body, dict) or set(body) != keys:
        raise GraphFormatError(f"{where}: a queue runner needs exactly {sorted(keys)}")
    ops = body["enqueue_ops"]
    if not isinstance(ops, list) or not ops:
        raise GraphFormatError(
            f"{where}: queue runner field 'enqueue_ops' must be a non-empty list"
        )
    closed = body["closed_exceptions"]
    if not isinstance(closed, list) or any(c not in _CLOSED_TYPES for c in closed):
        raise GraphFormatError(
            f"{where}: queue runner field 'closed_exceptions' must list names among "
            f"{list(_CLOSED_TYPES)}, got {closed!r:.80}"
        )
    if not isinstance(body["name"], str):
        raise GraphFormatError(f"{where}: queue runner field 'name' must be a string")
    ref = _lookup(g, where + " queue", body["queue"], True)
    if not ref.op.type.endswith("Queue") or "component_types" not in ref.op.attrs:
        raise GraphFormatError(
            f"{where}: queue runner field 'queue' names {ref.op.type} op, not a queue"
        )
    return QueueRunner(
        QueueBase.from_queue_ref(ref),
        [_lookup(g, f"{where} enqueue op {i}", n, False) for i, n in enumerate(ops)],
        _lookup(g, where + " close_op", body["close_op"], False),
        _lookup(g, where + " cancel_op", body["cancel_op"], False),
        tuple(getattr(errors, c) for c in closed) or None,
        name=body["name"],
    )


def _lookup(g: Graph, where: str, name: Any, tensor: bool) -> Any:
    if not isinstance(name, str):
        raise GraphFormatError(f"{where}: expected a name, got {name!r:.60}")
    try:
        return g.get_tensor_by_name(name) if tensor else g.get_operation_by_name(name)
    except (KeyError, ValueError) as e:
        raise GraphFormatError(f"{where}: {e.args[0] if e.args else e}") from None


# ---- files and msgpack --------------------------------------------------------------------


def graph_to_json(graph: Graph | None = None, indent: int | None = None) -> str:
    """The document of ``graph`` as JSON text (strict JSON: no NaN/Infinity literals)."""
    return json.dumps(graph_to_dict(graph), indent=indent, allow_nan=False)


def graph_from_json(text: str | bytes) -> Graph:
    """The graph of a ``graph_to_json`` text; GraphFormatError when it is not valid JSON."""
    try:
        doc = json.loads(text)
    except (ValueError, UnicodeDecodeError) as e:
        raise GraphFormatError(f"not a JSON graph document: {e}") from None
    except RecursionError:
        raise GraphFormatError("not a JSON graph document: nested too deeply") from None
    return graph_from_dict(doc)


def graph_to_msgpack(graph: Graph | None = None) -> bytes:
    """The document of ``graph`` as msgpack bytes (arrays as raw bytes, not base64)."""
    import msgpack

    return msgpack.packb(graph_to_dict(graph, binary=True), use_bin_type=True)


def graph_from_msgpack(data: bytes) -> Graph:
    """The graph of ``graph_to_msgpack`` bytes; GraphFormatError when they do not decode."""
    import msgpack

    try:
        doc = msgpack.unpackb(data, raw=False, strict_map_key=True)
    except (ValueError, msgpack.UnpackException) as e:
        raise GraphFormatError(f"not a msgpack graph document: {e}") from None
    return graph_from_dict(doc)


_MSGPACK_SUFFIXES = (".msgpack", ".mpk", ".mp")
#: attributes that always hold a dtype (a bare string there would fail only at run time)
_DTYPE_ATTRS = frozenset({"dtype", "T", "DstT", "SrcT", "out_type", "Tidx", "output_type"})


def write_graph(
    graph: Graph | None,
    path: str | os.PathLike,
    format: str | None = None,
    indent: int | None = None,
) -> None:
    """Write ``graph`` to ``path`` atomically (temporary file, fsync, rename).

    ``format`` is "json" or "msgpack"; None picks msgpack for .msgpack/.mpk/.mp files, else JSON.
    """
    path = os.fspath(path)
    if format is None:
        format = "msgpack" if path.lower().endswith(_MSGPACK_SUFFIXES) else "json"
    if format == "json":
        data = graph_to_json(graph, indent).encode("utf-8")
    elif format == "msgpack":
        data = graph_to_msgpack(graph)
    else:
        raise ValueError(f"unknown graph file format {format!r}; use 'json' or 'msgpack'")
    atomic_write(path, data)


def read_graph(path: str | os.PathLike) -> Graph:
    """The graph stored at ``path`` by write_graph (JSON or msgpack, recognized by content)."""
    with open(path, "rb") as f:
        data = f.read()
    if data.lstrip()[:1] == b"{":
        return graph_from_json(data)
    return graph_from_msgpack(data)
