"""Graph serialization (JSON, msgpack) and Graphviz export: round trips, typed attrs, errors."""

import json
import math
import re

import msgpack
import numpy as np
import pytest

import hetbed as hb
from hetbed.runtime import serialize as S
from hetbed.runtime.registry import apply

# ---- typed attr values --------------------------------------------------------------------

VALUES = [
    None,
    True,
    False,
    0,
    -7,
    2**63 - 1,
    2**70,
    -(2**80),
    1.5,
    -0.0,
    1e-310,
    float("inf"),
    float("-inf"),
    "",
    "héllo/wörld",
    [1, 2.5, "a", None],
    (1, 2),
    (),
    [(1, [2, (3,)]), []],
    {"a": 1, "b": (2.0, [3]), "c": {"nested": None}},
    {},
    hb.float32,
    hb.int64,
    hb.bool_,
    hb.TensorShape([2, None, 3]),
    hb.TensorShape([]),
    hb.TensorShape(None),
    b"\x00\xffraw",
    np.float32(2.5),
    np.int64(-3),
    np.bool_(True),
]


def _same(a, b):
    """Equal in value and in type, recursively (tuple is not list, np.float32 is not float)."""
    assert type(a) is type(b), (a, b)
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b)
    else:
        assert a == b
        if isinstance(a, float):
            assert math.copysign(1, a) == math.copysign(1, b)


def _via_json(v):
    return S.decode_value(json.loads(json.dumps(S.encode_value(v), allow_nan=False)))


def _via_msgpack(v):
    packed = msgpack.packb(S.encode_value(v, binary=True), use_bin_type=True)
    return S.decode_value(msgpack.unpackb(packed, raw=False))


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
@pytest.mark.parametrize("codec", [_via_json, _via_msgpack], ids=["json", "msgpack"])
def test_attr_values_round_trip_with_their_types(value, codec):
    """Every supported attr value comes back equal and of the same type (tuple vs list kept)."""
    _same(value, codec(value))


def test_nan_round_trips_as_strict_json():
    """NaN is tagged, so the JSON text has no non-standard NaN literal."""
    enc = S.encode_value([float("nan"), float("inf")])
    text = json.dumps(enc, allow_nan=False)
    assert "NaN" not in text and "Infinity" not in text
    out = S.decode_value(json.loads(text))
    assert math.isnan(out[0]) and out[1] == math.inf


ARRAYS = [
    np.arange(12, dtype=np.float32).reshape(3, 4),
    np.array([[1.5, -2.0]], dtype=np.float16),
    np.array([1, -(2**40)], dtype=np.int64),
    np.array([True, False, True]),
    np.array(3.25, dtype=np.float64),
    np.zeros((0, 5), dtype=np.int32),
    np.arange(20, dtype=np.float64).reshape(4, 5)[:, ::2],  # not contiguous
    np.arange(6, dtype=">i4").reshape(2, 3),  # big-endian input
    np.array([np.nan, np.inf, -0.0], dtype=np.float32),
    np.array(["ab", "c"]),
]


@pytest.mark.parametrize("arr", ARRAYS, ids=lambda a: f"{a.dtype.str}{a.shape}")
@pytest.mark.parametrize("codec", [_via_json, _via_msgpack], ids=["json", "msgpack"])
def test_arrays_round_trip_bit_exactly(arr, codec):
    """Arrays keep dtype, shape and every bit (NaN, -0.0), come back writable and native-endian."""
    out = codec(arr)
    assert out.shape == arr.shape and out.dtype == arr.dtype.newbyteorder("=")
    assert out.tobytes() == arr.astype(out.dtype).tobytes()
    assert out.flags.writeable and out.flags.c_contiguous


def test_array_encoding_is_little_endian_base64_in_json_and_raw_in_msgpack():
    """JSON holds base64 of little-endian bytes; the msgpack form holds the raw bytes."""
    arr = np.array([1, 2], dtype=">i4")
    body = S.encode_value(arr)["ndarray"]
    assert body["dtype"] == "<i4" and body["shape"] == [2]
    assert body["data"] == "AQAAAAIAAAA="
    raw = S.encode_value(arr, binary=True)["ndarray"]["data"]
    assert raw == b"\x01\x00\x00\x00\x02\x00\x00\x00"


@pytest.mark.parametrize(
    "value, match",
    [
        ({1, 2}, "set"),
        (lambda: 0, "function"),
        (np.array([object()], dtype=object), "numpy dtype object"),
        ({1: "a"}, "dict key 1"),
        ([1, {"k": (2, {3})}], r"\[1\]\['k'\]\[1\]"),
    ],
)
def test_unsupported_attr_values_raise_type_error_naming_op_and_attr(value, match):
    """An attr with no typed encoding raises TypeError naming the op, the attr and where inside."""
    g = hb.Graph()
    with g.as_default():
        x = hb.constant(1.0, name="x")
        apply("Identity", [x], {"odd": value}, name="weird")
    with pytest.raises(TypeError, match=match) as info:
        S.graph_to_dict(g)
    assert "'weird'" in str(info.value) and "'odd'" in str(info.value)


@pytest.mark.parametrize(
    "obj, match",
    [
        ({"pickle": "gASV"}, "unknown value tag 'pickle'"),
        ({"tuple": [1], "dict": {}}, "one-key tagged object"),
        ({"dtype": "bfloat16"}, "unknown dtype 'bfloat16'"),
        ({"shape": [2, -1]}, "shape"),
        ({"float": "1e5"}, "malformed 'float'"),
        ({"ndarray": {"dtype": "|O8", "shape": [1], "data": ""}}, "unsupported array dtype"),
        ({"ndarray": {"dtype": "|S0", "shape": [1], "data": ""}}, "unsupported array dtype"),
        ({"ndarray": {"dtype": "<f4", "shape": [2], "data": "AAAAAA=="}}, "4 bytes of data"),
        ({"ndarray": {"dtype": "<f4", "shape": [1], "data": "not base64!"}}, "bad base64"),
        ({"bytes": 3}, "expected bytes or base64"),
    ],
)
def test_malformed_values_are_rejected_by_name(obj, match):
    """Unknown tags, dtypes and inconsistent arrays raise GraphFormatError; nothing is eval'd."""
    with pytest.raises(S.GraphFormatError, match=match):
        S.decode_value(obj, "attr 'v'")


# ---- graph round trips --------------------------------------------------------------------


def _model(trainable_b: bool = False):
    """x -> matmul with a Variable -> loss, its gradient, an assign and an extra variable."""
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, [None, 3], name="x")
        w = hb.Variable(np.arange(6, dtype=np.float32).reshape(3, 2) / 7, name="w")
        b = hb.Variable(np.array([0.5, -1.0], dtype=np.float32), trainable=trainable_b, name="b")
        with hb.name_scope("layer"):
            y = hb.matmul(x, w) + b
        loss = hb.reduce_mean(hb.square(y), name="loss")
        gw, gb = hb.gradients(loss, [w, b])
        with hb.control_dependencies([gw]):
            step = hb.assign_sub(w, gw * 0.5, name="step")
        bump = hb.assign_add(b, gb, name="bump")
        hb.assign(b, [0.25, 0.75], name="reset")
        init = hb.global_variables_initializer()
        hb.add_to_collection("train_op", step.op)
        hb.add_to_collection("outputs", y)
        hb.add_to_collection("meta", ("lr", 0.5))
    names = {"x": x, "y": y, "loss": loss, "gw": gw, "gb": gb, "step": step, "bump": bump}
    return g, names, init


def _run(g, init, fetch_names, feed):
    """Initialize, fetch, update, fetch again: values from one session of ``g``."""
    els = [g.as_graph_element(n) for n in fetch_names]
    with hb.Session(graph=g) as s:
        s.run(g.as_graph_element(init.name))
        first = s.run(els, {g.as_graph_element("x:0"): feed})
        s.run(g.as_graph_element("step:0"), {g.as_graph_element("x:0"): feed})
        s.run(g.as_graph_element("bump:0"), {g.as_graph_element("x:0"): feed})
        second = s.run(els, {g.as_graph_element("x:0"): feed})
        s.run(g.as_graph_element("reset:0"))
        third = s.run(els, {g.as_graph_element("x:0"): feed})
    return first + second + third


@pytest.mark.parametrize(
    "codec",
    [
        lambda g: S.graph_from_dict(json.loads(json.dumps(S.graph_to_dict(g), allow_nan=False))),
        lambda g: S.graph_from_json(S.graph_to_json(g)),
        lambda g: S.graph_from_msgpack(S.graph_to_msgpack(g)),
    ],
    ids=["dict", "json", "msgpack"],
)
def test_loaded_graph_computes_exactly_what_the_original_computes(codec):
    """Same feeds, same values bit for bit: forward, gradients, and after an assign."""
    g, t, init = _model()
    g2 = codec(g)
    feed = np.random.default_rng(3).standard_normal((4, 3)).astype(np.float32)
    fetch = [t["y"].name, t["loss"].name, t["gw"].name, t["gb"].name, "w/read:0", "b/read:0"]
    want = _run(g, init, fetch, feed)
    got = _run(g2, init, fetch, feed)
    for a, b in zip(want, got):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def test_loaded_graph_has_the_same_document():
    """Loading keeps every node field: names, order, inputs, control inputs, devices, shapes."""
    g, _, _ = _model()
    with g.as_default():
        with hb.device("/device:cpu:1"):
            c = hb.constant([1, 2], name="on_cpu1")
        with hb.colocate_with(c):
            hb.identity(c, name="near_c")
    doc = S.graph_to_dict(g)
    g2 = S.graph_from_dict(doc)
    assert S.graph_to_dict(g2) == doc
    assert [op.name for op in g2.get_operations()] == [op.name for op in g.get_operations()]
    assert g2.get_operation_by_name("on_cpu1").device == "/device:cpu:1"
    assert g2.get_operation_by_name("near_c").colocation_groups == ["on_cpu1"]
    ctrl = g2.get_operation_by_name("step").control_inputs
    assert [op.name for op in ctrl] == [
        op.name for op in g.get_operation_by_name("step").control_inputs
    ]
    assert ctrl  # the test really has a control edge


def test_variables_come_back_as_variables_without_new_ops():
    """Collections keep Variables (one object per variable), ops, tensors and plain values."""
    g, _, _ = _model(trainable_b=False)
    g2 = S.graph_from_dict(S.graph_to_dict(g))
    assert len(g2.get_operations()) == len(g.get_operations())
    gv = g2.get_collection(hb.GraphKeys.GLOBAL_VARIABLES)
    tv = g2.get_collection(hb.GraphKeys.TRAINABLE_VARIABLES)
    assert [type(v) for v in gv] == [hb.Variable, hb.Variable]
    assert [v.name for v in gv] == ["w:0", "b:0"] and [v.name for v in tv] == ["w:0"]
    assert tv[0] is gv[0]
    w = gv[0]
    assert w.graph is g2 and w.trainable and not gv[1].trainable
    assert w.initializer is g2.get_operation_by_name("w/Assign")
    assert w.value() is g2.get_tensor_by_name("w/read:0")
    assert w.initial_value is g2.get_tensor_by_name("w/Initializer/Const:0")
    assert w.shape == hb.TensorShape([3, 2]) and w.dtype == hb.float32
    assert g2.get_collection("train_op") == [g2.get_operation_by_name("step")]
    assert g2.get_collection("outputs") == [
        g2.get_tensor_by_name(g.get_collection("outputs")[0].name)
    ]
    assert g2.get_collection("meta") == [("lr", 0.5)]
    with g2.as_default():
        init = hb.global_variables_initializer()
        with hb.Session() as s:
            s.run(init)
            np.testing.assert_array_equal(
                s.run(w), np.arange(6, dtype=np.float32).reshape(3, 2) / 7
            )


def test_loaded_graph_can_be_differentiated_and_extended():
    """hb.gradients works on loaded tensors and new ops get fresh names beside the loaded ones."""
    g, t, init = _model()
    g2 = S.graph_from_dict(S.graph_to_dict(g))
    with g2.as_default():
        loss = g2.get_tensor_by_name(t["loss"].name)
        w = g2.get_collection(hb.GraphKeys.GLOBAL_VARIABLES)[0]
        (gw2,) = hb.gradients(loss, [w])
        extra = hb.identity(loss, name="loss")
        with hb.name_scope("layer"):
            z = hb.identity(loss)
    assert gw2.name.startswith("gradients_1/")
    assert extra.op.name == "loss_1" and z.op.name.startswith("layer_1/")
    feed = np.ones((2, 3), dtype=np.float32)
    with hb.Session(graph=g2) as s:
        s.run(g2.get_operation_by_name("init"))
        got, want = s.run([gw2, t["gw"].name], {"x:0": feed})
    np.testing.assert_array_equal(got, want)


def test_array_manipulation_graphs_round_trip():
    """Ops with list/tuple attrs and sparse gradients (concat, gather, split, slices) round-trip."""
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, [2, 3], name="x")
        c = hb.concat([x, x * 2.0], axis=0)
        gathered = hb.gather(hb.transpose(c, [1, 0]), [0, 2])
        parts = hb.split(c, 2, axis=0)
        sl = hb.strided_slice(c, [0, 1], [3, 3], [2, 1])
        loss = hb.reduce_sum(gathered) + hb.reduce_sum(parts[1] * 3.0) + hb.reduce_sum(sl * sl)
        (gx,) = hb.gradients(loss, [x])
    g2 = S.graph_from_msgpack(S.graph_to_msgpack(g))
    assert S.graph_to_dict(g2) == S.graph_to_dict(g)
    xv = np.arange(6, dtype=np.float32).reshape(2, 3)
    with hb.Session(graph=g) as s:
        want = s.run([loss, gx], {x: xv})
    with hb.Session(graph=g2) as s:
        got = s.run([loss.name, gx.name], {"x:0": xv})
    for a, b in zip(want, got):
        np.testing.assert_array_equal(a, b)


def test_static_shape_refinements_survive():
    """A shape narrowed with set_shape is restored; consumers' shapes are re-inferred from it."""
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, None, name="x")
        hb.identity(x, name="y")
        x.set_shape([4, None])
    g2 = S.graph_from_dict(S.graph_to_dict(g))
    assert g2.get_tensor_by_name("x:0").shape == hb.TensorShape([4, None])
    assert g.get_tensor_by_name("y:0").shape == hb.TensorShape(None)
    assert g2.get_tensor_by_name("y:0").shape == hb.TensorShape([4, None])


def test_seeded_random_ops_draw_the_same_values_after_loading():
    """Graph seed and op order are kept, so seeded random ops reproduce the original draws."""
    random = pytest.importorskip("hetbed.runtime.ops.random")
    g = hb.Graph()
    with g.as_default():
        hb.set_random_seed(11)
        r = random.random_uniform([3, 2], name="r")
        q = random.random_normal([4], seed=5, name="q")
    g2 = S.graph_from_msgpack(S.graph_to_msgpack(g))
    assert g2.seed == 11
    with hb.Session(graph=g) as s:
        want = s.run([r, q])
    with hb.Session(graph=g2) as s:
        got = s.run(["r:0", "q:0"])
    for a, b in zip(want, got):
        np.testing.assert_array_equal(a, b)


def test_write_and_read_graph_files(tmp_path):
    """write_graph picks JSON or msgpack by suffix, writes atomically; read_graph sniffs content."""
    g, t, init = _model()
    for fname in ("g.json", "g.msgpack", "g.bin"):
        path = tmp_path / fname
        S.write_graph(g, path, format="msgpack" if fname == "g.bin" else None)
        g2 = S.read_graph(path)
        assert S.graph_to_dict(g2) == S.graph_to_dict(g)
    assert (tmp_path / "g.json").read_bytes()[:1] == b"{"
    assert (tmp_path / "g.msgpack").read_bytes()[:1] != b"{"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.bin", "g.json", "g.msgpack"]
    with pytest.raises(ValueError, match="unknown graph file format 'xml'"):
        S.write_graph(g, tmp_path / "g.xml", format="xml")


def test_public_names_are_exported():
    """The serialization entry points are reachable as hb.*."""
    for name in ("write_graph", "read_graph", "graph_to_dict", "graph_from_dict", "to_dot"):
        assert getattr(hb, name) is getattr(S, name)


def test_unserializable_collection_items_are_skipped_with_a_warning():
    """A Python object in a collection is left out with a warning; the rest is kept."""
    g = hb.Graph()
    with g.as_default():
        c = hb.constant(1.0, name="c")
        hb.add_to_collection("mixed", c)
        hb.add_to_collection("mixed", object())
    with pytest.warns(UserWarning, match="collection 'mixed': skipping object"):
        doc = S.graph_to_dict(g)
    assert doc["collections"]["mixed"] == [{"tensor": "c:0"}]


# ---- errors on loading --------------------------------------------------------------------


def _small_doc():
    g = hb.Graph()
    with g.as_default():
        a = hb.placeholder(hb.float32, [2], name="a")
        b = hb.multiply(a, 2.0, name="b")
        with hb.control_dependencies([b]):
            hb.no_op(name="done")
    return S.graph_to_dict(g)


def _edit(fn):
    doc = json.loads(json.dumps(_small_doc()))
    fn(doc)
    return doc


def _node(doc, name):
    return next(n for n in doc["nodes"] if n["name"] == name)


@pytest.mark.parametrize(
    "edit, err, match",
    [
        (lambda d: d.update(format="tf-graph"), S.GraphFormatError, "not a hetbed-graph document"),
        (lambda d: d.update(version=2), S.GraphFormatError, "unsupported hetbed-graph version 2"),
        (lambda d: d.update(nodes={}), S.GraphFormatError, "'nodes' must be a list"),
        (
            lambda d: _node(d, "b").update(op="Frobnicate"),
            hb.errors.UnimplementedError,
            "node 'b': unknown op type 'Frobnicate'",
        ),
        (
            lambda d: _node(d, "b").update(inputs=["a:0", "ghost:0"]),
            S.GraphFormatError,
            "node 'b': input 'ghost:0' names no node",
        ),
        (
            lambda d: _node(d, "b").update(inputs=["a:0", "b/y:3"]),
            S.GraphFormatError,
            "node 'b': input 'b/y:3': b/y has 1 outputs",
        ),
        (
            lambda d: _node(d, "b").update(inputs=["a", "b/y:0"]),
            S.GraphFormatError,
            "node 'b': input 'a' must look like 'op:index'",
        ),
        (
            lambda d: _node(d, "done").update(control_inputs=["^nowhere"]),
            S.GraphFormatError,
            "node 'done': control input '\\^nowhere' names no node",
        ),
        (
            lambda d: _node(d, "done").update(control_inputs=["b"]),
            S.GraphFormatError,
            "must look like '\\^op'",
        ),
        (
            lambda d: _node(d, "b").update(inputs="a:0"),
            S.GraphFormatError,
            "node 'b': field 'inputs' must be a list",
        ),
        (lambda d: _node(d, "b").pop("outputs"), S.GraphFormatError, "node 'b': field 'outputs'"),
        (
            lambda d: _node(d, "a").update(name="bad name!"),
            S.GraphFormatError,
            "field 'name' must be a valid op name",
        ),
        (
            lambda d: d["nodes"].append(dict(_node(d, "b"))),
            S.GraphFormatError,
            "node 'b': the name appears twice",
        ),
        (
            lambda d: _node(d, "a").update(inputs=["b:0"], op="Identity"),
            S.GraphFormatError,
            "closes a cycle",
        ),
        (
            lambda d: _node(d, "b")["outputs"][0].update(shape=[3]),
            S.GraphFormatError,
            r"node 'b' \(Mul\): output 0 is stored as float32 \(3,\) but the shape function "
            r"gives float32 \(2,\)",
        ),
        (
            lambda d: _node(d, "b")["outputs"][0].update(dtype="int32"),
            S.GraphFormatError,
            "output 0 is stored as int32",
        ),
        (
            lambda d: _node(d, "b")["outputs"].append({"dtype": "float32", "shape": None}),
            S.GraphFormatError,
            "stored 2 outputs, the op has 1",
        ),
        (
            lambda d: _node(d, "b").update(
                op="MatMul", attrs={"transpose_a": False, "transpose_b": False}
            ),
            S.GraphFormatError,
            r"node 'b' \(MatMul\): the op's shape function rejects it",
        ),
        (
            lambda d: _node(d, "b").update(op="MatMul"),
            S.GraphFormatError,
            "node 'b' .* rejects it: missing attr 'transpose_a'",
        ),
        (
            lambda d: _node(d, "a")["attrs"].update(dtype={"eval": "1"}),
            S.GraphFormatError,
            "node 'a': attr 'dtype': unknown value tag 'eval'",
        ),
        (
            lambda d: d["collections"].update(x=[{"tensor": "nope:0"}]),
            S.GraphFormatError,
            "collection 'x' item 0: no operation named 'nope'",
        ),
        (
            lambda d: d["collections"].update(x=[{"variable": {"ref": "a:0"}}]),
            S.GraphFormatError,
            "collection 'x' item 0: a variable needs exactly",
        ),
    ],
)
def test_bad_documents_fail_with_errors_naming_node_and_field(edit, err, match):
    """Every malformed or inconsistent document is rejected with a message that points at it."""
    with pytest.raises(err, match=match):
        S.graph_from_dict(_edit(edit))


def test_out_of_order_nodes_are_sorted_by_their_inputs():
    """A hand-edited document listing a consumer before its input still loads."""
    doc = _small_doc()
    doc["nodes"].reverse()
    g = S.graph_from_dict(doc)
    position = {op: i for i, op in enumerate(g.get_operations())}
    assert all(position[t.op] < position[op] for op in position for t in op.inputs)
    with hb.Session(graph=g) as s:
        np.testing.assert_array_equal(s.run("b:0", {"a:0": [1.0, 2.0]}), [2.0, 4.0])


def test_non_documents_are_rejected():
    """Garbage bytes or text raise GraphFormatError, not an arbitrary exception."""
    with pytest.raises(S.GraphFormatError, match="not a JSON graph document"):
        S.graph_from_json("{nope")
    with pytest.raises(S.GraphFormatError, match="not a msgpack graph document"):
        S.graph_from_msgpack(b"\xc1")
    with pytest.raises(S.GraphFormatError, match="is an object, got list"):
        S.graph_from_dict([])


# ---- Graphviz -----------------------------------------------------------------------------

_NODE = re.compile(r'^\s*"([^"]+)" \[label=')
_EDGE = re.compile(r'^\s*"([^"]+)" -> "([^"]+)" \[(.*)\];$')


def _parse_dot(text):
    nodes = [m.group(1) for line in text.splitlines() if (m := _NODE.match(line))]
    edges = [m.groups() for line in text.splitlines() if (m := _EDGE.match(line))]
    return nodes, edges


def test_dot_has_every_op_and_every_edge():
    """One node per op; as many edges as data inputs plus control inputs, control ones dashed."""
    g, _, _ = _model()
    text = S.to_dot(g)
    assert text.startswith("digraph hetbed {") and text.rstrip().endswith("}")
    assert text.count("{") == text.count("}")
    nodes, edges = _parse_dot(text)
    ops = g.get_operations()
    assert sorted(nodes) == sorted(op.name for op in ops)
    n_data = sum(len(op.inputs) for op in ops)
    n_ctrl = sum(len(op.control_inputs) for op in ops)
    assert n_ctrl > 0
    assert len(edges) == n_data + n_ctrl
    assert sum("style=dashed" in attrs for *_, attrs in edges) == n_ctrl
    assert any(a == "x" and 'label="(?, 3) float32"' in attrs for a, _, attrs in edges)


def test_dot_clusters_ops_by_device_and_prunes_to_fetches():
    """Each requested device is a cluster; with fetches only their ancestors are drawn."""
    g = hb.Graph()
    with g.as_default():
        with hb.device("/device:cpu:0"):
            a = hb.constant(1.0, name="a")
        with hb.device("/device:gpu:0"):
            b = hb.add(a, a, name="b")
        hb.identity(b, name="unfetched")
    text = S.to_dot(g)
    assert text.count('subgraph "cluster_') == 2
    assert 'label="/device:gpu:0"' in text and "b\\nAdd\\n/device:gpu:0" in text
    nodes, edges = _parse_dot(text)
    assert sorted(nodes) == ["a", "b", "unfetched"] and len(edges) == 3
    nodes, edges = _parse_dot(S.to_dot(g, fetches=b))
    assert "unfetched" not in nodes and "b" in nodes and "a" in nodes
    assert len(edges) == sum(len(g.get_operation_by_name(n).inputs) for n in nodes)
    assert '"b" [label="b\\nAdd\\n/device:gpu:0", peripheries=2]' in S.to_dot(g, fetches=[b])
