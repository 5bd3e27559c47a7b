"""Bounded fuzz tests (hypothesis; a few hundred cases each, seconds in total): malformed graph
files, checkpoints, wire messages and scenarios raise only their documented errors."""

from __future__ import annotations

import hashlib
import json

import msgpack
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hetbed as hb
from hetbed.runtime.distributed import wire
from hetbed.runtime.errors import (
    DataLossError,
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
    UnimplementedError,
)
from hetbed.runtime.serialize import GraphFormatError, graph_from_dict, graph_to_dict
from hetbed.runtime.train.checkpoint import CheckpointReader, write_checkpoint
from hetbed.scenarios.schema import ScenarioError, validate

FAST = settings(
    max_examples=200,
    deadline=None,
    derandomize=True,  # the same cases every run: a failure here is reproducible
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
GRAPH_ERRORS = (GraphFormatError, UnimplementedError, InvalidArgumentError)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)

msgpack_values = st.recursive(  # what msgpack can encode (64-bit integers)
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=8)
    | st.binary(max_size=16),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


def _graph_doc() -> dict:
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, [None, 3], name="x")
        w = hb.Variable(np.ones((3, 2), np.float32), name="w")
        hb.nn.relu(hb.matmul(x, w), name="y")
    return graph_to_dict(g)


DOC = _graph_doc()
PATHS = [
    (i, key)
    for i, n in enumerate(DOC["nodes"])
    for key in ("op", "inputs", "attrs", "outputs", "name", "device", "control_inputs")
]


@FAST
@given(st.sampled_from(PATHS), json_values)
def test_graph_documents_with_a_field_replaced_raise_format_errors(where, value):
    i, key = where
    doc = json.loads(json.dumps(DOC))
    doc["nodes"][i][key] = value
    try:
        graph_from_dict(doc)
    except GRAPH_ERRORS:
        pass


@FAST
@given(json_values)
def test_arbitrary_graph_documents_raise_format_errors(doc):
    try:
        graph_from_dict(doc)
    except GRAPH_ERRORS:
        pass
    try:
        graph_from_dict({"format": "hetbed-graph", "version": 1, "nodes": [doc]})
    except GRAPH_ERRORS:
        pass


CKPT: bytes | None = None


def _checkpoint(tmp_path_factory) -> bytes:
    global CKPT
    if CKPT is None:
        p = tmp_path_factory.mktemp("ck") / "c"
        write_checkpoint(str(p), {"a": np.arange(6.0).reshape(2, 3), "b": np.int32(7)})
        CKPT = p.read_bytes()
    return CKPT


@FAST
@given(st.data())
def test_corrupted_checkpoints_raise_data_loss(tmp_path_factory, data):
    blob = bytearray(_checkpoint(tmp_path_factory))
    kind = data.draw(st.sampled_from(["flip", "truncate", "header"]))
    if kind == "flip":
        i = data.draw(st.integers(0, len(blob) - 1))
        blob[i] ^= data.draw(st.integers(1, 255))
    elif kind == "truncate":
        blob = blob[: data.draw(st.integers(0, len(blob) - 1))]
    else:  # a forged header with a valid checksum: only the structure can catch it
        header = data.draw(json_values)
        body = b"HBCKPT\x00\x01"
        raw = json.dumps(header).encode()
        body += len(raw).to_bytes(8, "little") + raw
        blob = bytearray(body + hashlib.sha256(body).digest())
    p = tmp_path_factory.mktemp("bad") / "c"
    p.write_bytes(bytes(blob))
    try:
        CheckpointReader(str(p))
    except (DataLossError, NotFoundError):
        pass


@FAST
@given(st.binary(max_size=200) | msgpack_values.map(lambda v: msgpack.packb(v)))
def test_wire_messages_raise_wire_errors(data):
    try:
        msg = wire.unpack(data, "Fuzz")
    except wire.WireError:
        return
    for name in ("step_id", "key"):
        try:
            wire.field(msg, name, int, "Fuzz")
        except wire.WireError:
            pass
    try:
        wire.tensor_from_wire(msg, "fuzz")
    except wire.WireError:
        pass
    try:
        wire.InTensor(msg, "fuzz", 1 << 20)
    except (wire.WireError, ResourceExhaustedError):
        pass


BASE = {
    "scenario": {"name": "fuzz"},
    "model": {"name": "mlp", "compute_s": 0.5},
    "cluster": {"workers": 4, "ps": 1},
}
FIELDS = [
    ("cluster", "workers"),
    ("cluster", "ps"),
    ("model", "batch_size"),
    ("stragglers", "lognormal_sigma"),
    ("stragglers", "slow_fraction"),
    ("stragglers", "pareto_probability"),
    ("strategy", "backup_workers"),
    ("failures", "events"),
    ("run", "steps"),
    ("cluster", "worker_efficiency"),
]


@FAST
@given(st.sampled_from(FIELDS), json_values | st.floats(allow_nan=True, allow_infinity=True))
def test_scenarios_with_any_value_validate_or_raise_scenario_errors(field, value):
    doc = json.loads(json.dumps(BASE))
    sec, name = field
    doc.setdefault(sec, {})[name] = value
    try:
        sc = validate(doc, "fuzz.toml")
    except ScenarioError as e:
        assert str(e).startswith("fuzz.toml: ")
        return
    for sec_fields in sc.values():  # whatever passed is finite
        if isinstance(sec_fields, dict):
            for v in sec_fields.values():
                if isinstance(v, float):
                    assert np.isfinite(v)
