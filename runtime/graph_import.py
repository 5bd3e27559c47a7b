"""TF1's ``tf.import_graph_def``: the nodes of a ``GraphDef`` added to the default graph under a
name prefix, with some of their inputs replaced (``input_map``).

hetbed's ``Graph.as_graph_def()`` writes TensorFlow's ``GraphDef`` message, and puts in each
node, beside its name, type, inputs and device, one attribute ``_hetbed``: the JSON of the node's
attributes and outputs as hetbed's graph files write them (serialize.py), so the message
rebuilds the graph exactly, through the op registry. A ``GraphDef`` written by TensorFlow has
no such attribute and is refused naming its first node. hetbed's own graph documents
(``serialize.graph_to_dict``) are accepted too.
"""

from __future__ import annotations

import json
from typing import Any

from .errors import InvalidArgumentError
from .graph import Operation, Tensor, get_default_graph
from .serialize import (
    FORMAT,
    GraphFormatError,
    _build_node,
    _node_to_dict,
    _parse_node,
    _reserve_scope_names,
    _topological,
)

HETBED_ATTR = "_hetbed"


def node_payload(op: Operation) -> bytes | None:
    """The ``_hetbed`` attribute of ``op``'s NodeDef: its attributes, outputs and colocation
    groups as JSON (None where an attribute has no encoding, e.g. a py_func's function)."""
    try:
        d = _node_to_dict(op, binary=False)
    except TypeError:
        return None
    keep = {k: d[k] for k in ("attrs", "outputs", "colocation_groups")}
    return json.dumps(keep, separators=(",", ":")).encode()


def _ref(name: str) -> str:
    """A NodeDef input ("x", "x:1", "^x") as a document input ("x:0", "x:1", "^x")."""
    if name.startswith("^") or ":" in name:
        return name
    return name + ":0"


def _nodes_of(graph_def: Any) -> list[dict]:
    """Document nodes of a GraphDef message or of a hetbed graph document."""
    if isinstance(graph_def, dict):
        if graph_def.get("format") != FORMAT or not isinstance(graph_def.get("nodes"), list):
            raise GraphFormatError("import_graph_def: not a GraphDef or a hetbed graph document")
        return list(graph_def["nodes"])
    if not hasattr(graph_def, "node"):
        raise TypeError(
            f"import_graph_def: graph_def must be a GraphDef, got {type(graph_def).__name__}"
        )
    nodes = []
    for nd in graph_def.node:
        if HETBED_ATTR not in nd.attr:
            raise GraphFormatError(
                f"import_graph_def: node {nd.name!r} ({nd.op}) carries no hetbed attributes: "
                "hetbed imports the GraphDefs it wrote (Graph.as_graph_def, "
                "graph_util.convert_variables_to_constants), not TensorFlow's"
            )
        try:
            extra = json.loads(nd.attr[HETBED_ATTR].s)
        except (ValueError, RecursionError) as e:
            raise GraphFormatError(
                f"import_graph_def: node {nd.name!r}: bad {HETBED_ATTR}: {type(e).__name__}"
            ) from None
        if not isinstance(extra, dict) or not set(extra) <= {
            "attrs",
            "outputs",
            "colocation_groups",
        }:
            raise GraphFormatError(
                f"import_graph_def: node {nd.name!r}: {HETBED_ATTR} must be an object of "
                "attrs, outputs and colocation_groups"
            )
        ins = [_ref(i) for i in nd.input]
        nodes.append(
            {
                "name": nd.name,
                "op": nd.op,
                "inputs": [i for i in ins if not i.startswith("^")],
                "control_inputs": [i for i in ins if i.startswith("^")],
                "device": nd.device,
                **extra,
            }
        )
    return nodes


def _rename(node: dict, prefix: str) -> dict:
    if not prefix:
        return node
    out = dict(node)
    out["name"] = prefix + node["name"]
    out["inputs"] = [prefix + i for i in node.get("inputs", [])]
    out["control_inputs"] = ["^" + prefix + c[1:] for c in node.get("control_inputs", [])]
    out["colocation_groups"] = [prefix + c for c in node.get("colocation_groups", [])]
    return out


def scoped_document(doc: dict, scope: str) -> dict:
    """A graph document with every name under ``scope/``: nodes, their inputs and colocation,
    and the names its collections hold (``import_meta_graph``'s ``import_scope``)."""
    prefix = scope.rstrip("/") + "/"

    def item(x: Any) -> Any:
        if not isinstance(x, dict) or len(x) != 1:
            return x
        ((kind, body),) = x.items()
        if kind in ("op", "tensor") and isinstance(body, str):
            return {kind: prefix + body}
        if kind == "variable" and isinstance(body, dict):
            keys = ("ref", "initializer", "snapshot", "initial_value")
            return {kind: {k: prefix + v if k in keys else v for k, v in body.items()}}
        if kind == "queue_runner" and isinstance(body, dict):
            out = dict(body)
            for k in ("queue", "close_op", "cancel_op", "name"):
                out[k] = prefix + body[k]
            out["enqueue_ops"] = [prefix + n for n in body["enqueue_ops"]]
            return {kind: out}
        return x

    nodes = doc.get("nodes")
    colls = doc.get("collections", {})
    if not isinstance(nodes, list) or not isinstance(colls, dict):
        raise GraphFormatError("import_scope: not a graph document (nodes, collections)")
    return dict(
        doc,
        nodes=[_rename(n, prefix) if isinstance(n, dict) else n for n in nodes],
        collections={
            k: [item(x) for x in v] if isinstance(v, list) else v for k, v in colls.items()
        },
    )


def import_graph_def(
    graph_def: Any,
    input_map: dict | None = None,
    return_elements: Any = None,
    name: str | None = None,
    op_dict: Any = None,
    producer_op_list: Any = None,
) -> list | None:
    """Add ``graph_def``'s nodes to the default graph, each named ``<name>/<its name>``
    (``name`` defaults to "import", made unique as a name scope is; "" adds no prefix).
    ``input_map`` maps names of the imported graph's tensors ("x:0", or "x" for output 0) to
    tensors of this graph that replace them; ``return_elements`` names imported ops ("x") and
    tensors ("x:0") to return, in order."""
    g = get_default_graph()
    raw = _nodes_of(graph_def)
    if name == "":
        prefix = ""
    else:
        with g.name_scope(name or "import") as scope:
            prefix = scope
    try:
        specs = [_parse_node(i, _rename(n, prefix)) for i, n in enumerate(raw)]
    except GraphFormatError:
        raise
    except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as e:
        raise GraphFormatError(
            f"import_graph_def: malformed node: {type(e).__name__}: {e}"
        ) from None
    names = {sp["name"] for sp in specs}
    clash = [n for n in names if _exists(g, n)]
    if clash:
        raise InvalidArgumentError(
            f"import_graph_def: the graph already has ops named {sorted(clash)[:3]}; import "
            "under another name"
        )
    mapped: dict[str, Any] = {}
    controls: dict[str, Operation] = {}
    for key, value in (input_map or {}).items():
        if not isinstance(key, str):
            raise TypeError(f"import_graph_def: input_map keys are tensor names, got {key!r}")
        ref = _ref(key)
        if ref.startswith("^"):
            if not isinstance(value, Operation):
                raise TypeError(f"import_graph_def: input_map[{key!r}] must be an Operation")
            controls["^" + prefix + ref[1:]] = value
            continue
        src, idx = ref.rsplit(":", 1)
        outs = {sp["name"]: len(sp["outputs"]) for sp in specs}.get(prefix + src)
        if outs is None or not idx.isdigit() or int(idx) >= outs:
            raise ValueError(
                f"import_graph_def: input_map key {key!r} names no output of an imported node"
            )
        if not isinstance(value, Tensor):
            raise TypeError(
                f"import_graph_def: input_map[{key!r}] must be a Tensor, got {type(value).__name__}"
            )
        mapped[prefix + ref] = value
    _dry_run(specs, mapped, controls, prefix, return_elements)
    built: dict[str, Operation] = {}
    with g.control_dependencies(None):
        for spec in _topological(specs):
            built[spec["name"]] = _build_node(g, spec, built, mapped)
    for spec in specs:
        op = built[spec["name"]]
        for c in spec["control_inputs"]:
            if c in controls:
                op._add_control_input(controls[c])
            elif c[1:] in built:
                op._add_control_input(built[c[1:]])
            else:
                raise GraphFormatError(
                    f"node {spec['name']!r}: control input {c!r} names no imported node"
                )
    _reserve_scope_names(g)
    if return_elements is None:
        return None
    out = []
    for el in return_elements:
        if not isinstance(el, str):
            raise TypeError(f"import_graph_def: return_elements are names, got {el!r}")
        op_name, sep, idx = el.partition(":")
        op = built.get(prefix + op_name)
        if op is None:
            raise ValueError(f"import_graph_def: requested return element {el!r} not found")
        if not sep:
            out.append(op)
            continue
        if not idx.isdigit() or int(idx) >= len(op.outputs):
            raise ValueError(
                f"import_graph_def: requested return element {el!r}: {op_name} has "
                f"{len(op.outputs)} outputs"
            )
        out.append(op.outputs[int(idx)])
    return out


def _dry_run(specs: list, mapped: dict, controls: dict, prefix: str, returns: Any) -> None:
    """Build the nodes into a scratch graph first (mapped inputs as placeholders of their dtype
    and shape), so that a node that fails leaves the real graph as it was, as TF's import does."""
    from .graph import Graph
    from .ops.array import placeholder

    scratch = Graph()
    with scratch.as_default():
        stand_in = {k: placeholder(v.dtype, v.shape) for k, v in mapped.items()}
        built: dict[str, Operation] = {}
        for spec in _topological(specs):
            built[spec["name"]] = _build_node(scratch, spec, built, stand_in)
    for spec in specs:
        for c in spec["control_inputs"]:
            if c not in controls and c[1:] not in built:
                raise GraphFormatError(
                    f"node {spec['name']!r}: control input {c!r} names no imported node"
                )
    for el in returns or ():
        if not isinstance(el, str):
            raise TypeError(f"import_graph_def: return_elements are names, got {el!r}")
        op_name, sep, idx = el.partition(":")
        op = built.get(prefix + op_name)
        if op is None:
            raise ValueError(f"import_graph_def: requested return element {el!r} not found")
        if sep and (not idx.isdigit() or int(idx) >= len(op.outputs)):
            raise ValueError(
                f"import_graph_def: requested return element {el!r}: {op_name} has "
                f"{len(op.outputs)} outputs"
            )


def _exists(g: Any, name: str) -> bool:
    try:
        g.get_operation_by_name(name)
    except (KeyError, ValueError):
        return False
    return True
