"""``tf.graph_util`` (TF1's ``tensorflow.python.framework.graph_util``): the GraphDef
rewrites that freeze a trained model for inference.

``convert_variables_to_constants`` keeps the nodes the named outputs need and replaces each
variable among them by a constant holding its value in the session (its reads become
``Identity``); the result imports with ``tf.import_graph_def`` into a graph with no variables.
They work on the ``GraphDef`` messages hetbed writes (``Graph.as_graph_def()``).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import numpy as np

from hetbed.runtime.graph_import import HETBED_ATTR
from hetbed.runtime.typed_values import encode_value

_VARIABLE_OPS = ("VariableV2", "Variable", "VarHandleOp")


def _node_name(ref: str) -> str:
    return ref[1:] if ref.startswith("^") else ref.split(":")[0]


def extract_sub_graph(graph_def: Any, dest_nodes: Any) -> Any:
    """The nodes ``dest_nodes`` (names) need, through data and control inputs, in
    ``graph_def``'s order."""
    if isinstance(dest_nodes, str):
        raise TypeError("extract_sub_graph: dest_nodes must be a list of node names")
    by_name = {n.name: n for n in graph_def.node}
    for d in dest_nodes:
        if _node_name(d) not in by_name:
            raise AssertionError(f"{d} is not in graph")
    keep: set[str] = set()
    todo = [_node_name(d) for d in dest_nodes]
    while todo:
        n = todo.pop()
        if n in keep:
            continue
        keep.add(n)
        todo.extend(_node_name(i) for i in by_name[n].input)
    out = type(graph_def)()
    out.node.extend(copy.deepcopy(n) for n in graph_def.node if n.name in keep)
    return out


def convert_variables_to_constants(
    sess: Any,
    input_graph_def: Any,
    output_node_names: Any,
    variable_names_whitelist: Any = None,
    variable_names_blacklist: Any = None,
) -> Any:
    """The part of ``input_graph_def`` that ``output_node_names`` need, with every variable in
    it (those of ``variable_names_whitelist`` only, when given; none of
    ``variable_names_blacklist``) replaced by a constant of its current value in ``sess``."""
    sub = extract_sub_graph(input_graph_def, output_node_names)
    allow = None if variable_names_whitelist is None else set(variable_names_whitelist)
    deny = set(variable_names_blacklist or ())
    frozen = [
        n.name
        for n in sub.node
        if n.op in _VARIABLE_OPS and (allow is None or n.name in allow) and n.name not in deny
    ]
    values = sess.run([f"{n}:0" for n in frozen]) if frozen else []
    value_of = dict(zip(frozen, values))
    for node in sub.node:
        if node.name in value_of:
            _make_const(node, np.asarray(value_of[node.name]))
        elif node.op == "ReadVariable" and node.input and _node_name(node.input[0]) in value_of:
            extra = json.loads(node.attr[HETBED_ATTR].s)
            extra["attrs"] = {}
            node.op = "Identity"
            node.attr[HETBED_ATTR].s = json.dumps(extra).encode()
    return sub


def _make_const(node: Any, value: np.ndarray) -> None:
    where = f"variable {node.name!r}"
    extra = json.loads(node.attr[HETBED_ATTR].s)
    dtype = extra["attrs"]["dtype"]
    extra["attrs"] = {"value": encode_value(value, False, where), "dtype": dtype}
    extra["outputs"] = [{"dtype": dtype["dtype"], "shape": list(value.shape)}]
    extra["colocation_groups"] = []
    node.op = "Const"
    del node.input[:]
    node.attr[HETBED_ATTR].s = json.dumps(extra).encode()


def remove_training_nodes(input_graph: Any, protected_nodes: Any = None) -> Any:
    """``input_graph`` without its ``Identity`` and ``CheckNumerics`` nodes (their consumers
    read what they read), except those named in ``protected_nodes`` or with control inputs."""
    protected = set(protected_nodes or ())
    drop: dict[str, str] = {}
    for n in input_graph.node:
        if (
            n.op in ("Identity", "CheckNumerics")
            and n.name not in protected
            and len(n.input) == 1
            and not n.input[0].startswith("^")
        ):
            drop[n.name] = n.input[0]

    def through(ref: str) -> str:
        ctrl = ref.startswith("^")
        name = _node_name(ref)
        seen = 0
        while name in drop and seen <= len(drop):
            ref, name, seen = drop[name], _node_name(drop[name]), seen + 1
        return "^" + name if ctrl else ref

    out = type(input_graph)()
    for n in input_graph.node:
        if n.name in drop:
            continue
        m = copy.deepcopy(n)
        new = [through(i) for i in m.input]
        del m.input[:]
        m.input.extend(new)
        out.node.append(m)
    return out


__all__ = ["convert_variables_to_constants", "extract_sub_graph", "remove_training_nodes"]
