"""Clean errors for the escapes of issue 15, item 5: deep or ill-typed graph documents, malformed
RegisterGraph calls, huge checkpoint shapes, fed values that would change, huge fills."""

from __future__ import annotations

import json
import socket
import struct

import grpc
import msgpack
import numpy as np
import pytest

import hetbed as hb
from hetbed.runtime.distributed import rpc
from hetbed.runtime.serialize import GraphFormatError, graph_from_json, graph_to_dict
from hetbed.runtime.train.checkpoint import MAGIC, CheckpointReader


def test_deeply_nested_graph_json_is_a_format_error():
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(GraphFormatError, match="nested too deeply"):
        graph_from_json('{"format": ' + deep + "}")
    nested = '{"dict": {"a": ' * 400 + "1" + "}}" * 400  # deep inside an attr value
    node = '{"name": "c", "op": "Const", "inputs": [], "outputs": [], "attrs": {"value": %s}}'
    with pytest.raises(GraphFormatError):
        graph_from_json('{"format": "hetbed-graph", "version": 1, "nodes": [%s]}' % (node % nested))


def test_ill_typed_dtype_attr_fails_at_load_naming_node_and_attr():
    g = hb.Graph()
    with g.as_default():
        hb.placeholder(hb.float32, [2], name="x")
    doc = graph_to_dict(g)
    (node,) = [n for n in doc["nodes"] if n["name"] == "x"]
    node["attrs"]["dtype"] = "float32"  # a bare string, not {"dtype": "float32"}
    with pytest.raises(GraphFormatError, match=r"node 'x': attr 'dtype' must be a dtype"):
        _load(doc)


def _load(doc):
    from hetbed.runtime.serialize import graph_from_dict

    return graph_from_dict(doc)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_malformed_register_graph_calls_are_invalid_argument():
    spec = hb.train.ClusterSpec({"ps": [f"127.0.0.1:{_free_port()}"]})
    s = hb.train.Server(spec, "ps", 0, token="t")
    g = hb.Graph()
    with g.as_default():
        hb.constant(1.0, name="c")
    good = {
        "graph": graph_to_dict(g),
        "devices": {"c": "/job:ps/replica:0/task:0/device:cpu:0"},
        "op_ids": {},
        "sends": [],
        "recvs": [],
        "order": ["c"],
        "feeds": [],
        "fetches": [],
    }
    bad = [
        {**good, "recvs": [{"standin": "c"}]},  # no 'name' (KeyError inside)
        {**good, "recvs": ["not a table"]},  # AttributeError inside
        {**good, "sends": [{"name": "s"}]},
        {**good, "graph": {"format": "x", "nodes": "y"}},
    ]
    try:
        with grpc.insecure_channel(s.target[len("grpc://") :]) as ch:
            call = ch.unary_unary("/hetbed.WorkerService/RegisterGraph")
            for req in bad:
                with pytest.raises(grpc.RpcError) as e:
                    body = msgpack.packb({"graph": req})
                    auth = rpc.call_auth(b"t", "RegisterGraph", "/job:ps/replica:0/task:0", body)
                    call(body, metadata=((rpc.TOKEN_KEY, auth),))
                assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value.details()
    finally:
        s.stop(grace=0)


def test_checkpoint_with_a_huge_shape_is_data_loss(tmp_path):
    """A checksum-valid file whose header claims shape [2**64] is DataLossError, not Overflow."""
    import hashlib

    header = json.dumps(
        {
            "format": 1,
            "data_length": 0,
            "tensors": [
                {"name": "w", "dtype": "float32", "shape": [2**64], "offset": 0, "length": 0}
            ],
        }
    ).encode()
    body = MAGIC + struct.pack("<Q", len(header)) + header
    p = tmp_path / "ckpt"
    p.write_bytes(body + hashlib.sha256(body).digest())
    with pytest.raises(hb.errors.DataLossError, match="claims bytes"):
        CheckpointReader(str(p))


@pytest.mark.parametrize(
    "dtype, value, match",
    [
        (hb.int32, 2**40, r"outside int32's"),
        (hb.int32, np.array([1, 2**31], np.int64), r"outside int32's"),
        (hb.int64, np.array([2**63], np.uint64), r"outside int64.s"),
        (hb.float32, np.array([1 + 2j]), "nonzero imaginary part"),
        (hb.float32, np.array([1e300]), "beyond float32's largest"),
        (hb.bool, np.array([2]), "must be 0 or 1"),
    ],
)
def test_fed_values_that_would_change_raise(dtype, value, match):
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(dtype, None, name="x")
        y = hb.identity(x)
    with hb.Session(graph=g) as sess, pytest.raises(hb.errors.InvalidArgumentError, match=match):
        sess.run(y, {x: value})


def test_exactly_representable_feeds_still_convert():
    g = hb.Graph()
    with g.as_default():
        i = hb.placeholder(hb.int32, None)
        f = hb.placeholder(hb.float32, None)
        yi, yf = hb.identity(i), hb.identity(f)
    with hb.Session(graph=g) as sess:
        got_i, got_f = sess.run([yi, yf], {i: np.array([-(2**31), 2**31 - 1]), f: [0.1, np.inf]})
    assert got_i.dtype == np.int32 and got_i.tolist() == [-(2**31), 2**31 - 1]
    assert got_f.dtype == np.float32 and got_f[0] == np.float32(0.1) and np.isinf(got_f[1])
    with hb.Session(graph=g) as sess:
        assert sess.run(yf, {f: np.array([3 + 0j])}).tolist() == [3.0]


def test_fill_beyond_the_machine_memory_is_resource_exhausted():
    g = hb.Graph()
    with g.as_default():
        big = hb.fill([1 << 40, 1 << 10], 1.0, name="big")
    with (
        hb.Session(graph=g) as sess,
        pytest.raises(
            hb.errors.ResourceExhaustedError, match=r"big \(Fill\).*more than this machine"
        ),
    ):
        sess.run(big)
