"""String tensors (tf.string) and the string ops: values against Python's own str/bytes methods,
the csv module and numpy; placement (strings stay on the CPU), graph files, the wire format and
checkpoints carry them."""

from __future__ import annotations

import csv
import io
import os
import re

import numpy as np
import pytest
from gpu_fixtures import fake_gpus  # noqa: F401 - fixture

import hetbed as hb
import hetbed.compat.v1 as tf
from hetbed.runtime import serialize
from hetbed.runtime.distributed import wire
from hetbed.runtime.errors import DataLossError, InvalidArgumentError


def _obj(values, shape=None):
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out.reshape(shape if shape is not None else (len(values),))


def _run(fetches, feed=None, config=None):
    with tf.Session(config=config) as s:
        return s.run(fetches, feed)


@pytest.fixture(autouse=True)
def _graph():
    with tf.Graph().as_default() as g:
        yield g


def test_dtype_constants_feeds_and_generic_array_ops():
    """tf.string holds bytes (str is utf-8); the generic array ops and Equal work on it."""
    assert tf.as_dtype("string") is tf.string is tf.dtypes.string
    assert tf.as_dtype(np.object_) is tf.string and tf.as_dtype(np.dtype("S3")) is tf.string
    c = tf.constant(["ab", "é"])
    assert c.dtype == tf.string and c.shape.as_list() == [2]
    p = tf.placeholder(tf.string, [None])
    both = tf.concat([c, p], 0)
    out = _run(
        [
            c,
            tf.reshape(both, [2, 2]),
            tf.gather(both, [3, 0]),
            tf.stack([c, c], axis=1),
            both[1:3],
            c[0],
            tf.identity(p),
            tf.equal(c, p),
            tf.not_equal(c, "ab"),
            tf.shape(both),
        ],
        {p: ["ab", b"x"]},
    )
    e = "é".encode()
    np.testing.assert_array_equal(out[0], _obj([b"ab", e]))
    assert out[0].dtype == object
    np.testing.assert_array_equal(out[1], _obj([b"ab", e, b"ab", b"x"], (2, 2)))
    np.testing.assert_array_equal(out[2], _obj([b"x", b"ab"]))
    np.testing.assert_array_equal(out[3], _obj([b"ab", b"ab", e, e], (2, 2)))
    np.testing.assert_array_equal(out[4], _obj([e, b"ab"]))
    assert out[5] == b"ab" and isinstance(out[5], bytes)  # a scalar string is bytes, as in TF
    np.testing.assert_array_equal(out[6], _obj([b"ab", b"x"]))
    assert out[7].tolist() == [True, False] and out[7].dtype == np.bool_
    assert out[8].tolist() == [False, True]
    assert out[9].tolist() == [4]


def test_bad_values_and_arithmetic_are_refused():
    """Numbers fed for a string, strings in arithmetic or ordering: clear errors."""
    p = tf.placeholder(tf.string, [2])
    with pytest.raises(InvalidArgumentError, match="expected bytes or str.*int"):
        _run(p, {p: [1, 2]})
    with pytest.raises(TypeError, match="Add does not take string tensors.*Const"):
        tf.add(tf.constant("a"), tf.constant("b"))
    with pytest.raises(TypeError, match="Less does not take string tensors"):
        tf.less(p, p)
    with pytest.raises(InvalidArgumentError, match="AsString: input is already a string"):
        tf.as_string(p)
    with pytest.raises(InvalidArgumentError, match="cannot cast string to float32; use string_to"):
        tf.cast(p, tf.float32)
    with pytest.raises(InvalidArgumentError, match="cannot cast int32 to string; use as_string"):
        tf.cast(tf.constant([1]), tf.string)


def test_strings_stay_on_the_cpu_under_a_gpu_device(fake_gpus):  # noqa: F811
    """Under tf.device("/gpu:0") string ops land on the CPU with soft placement; numeric ops
    beside them stay on the GPU; without soft placement it is an error naming the op."""
    fake_gpus(1)
    with tf.device("/gpu:0"):
        s = tf.constant(["1.5", "2.5"], name="s")
        n = tf.string_to_number(s, name="num")
        y = tf.multiply(n, 2.0, name="double")
        back = tf.as_string(y, precision=1, name="back")
    cfg = tf.ConfigProto(allow_soft_placement=True)
    with tf.Session(config=cfg) as sess:
        got = sess.run([y, back])
        dev = sess.placement().set_index("op").device
    np.testing.assert_allclose(got[0], [3.0, 5.0])
    np.testing.assert_array_equal(got[1], _obj([b"3.0", b"5.0"]))
    assert dev["s"].endswith("cpu:0") and dev["num"].endswith("cpu:0")
    assert dev["back"].endswith("cpu:0") and dev["double"].endswith("gpu:0")
    with pytest.raises(InvalidArgumentError, match="cannot place op 's'.*soft placement is off"):
        _run(n, config=tf.ConfigProto(allow_soft_placement=False))


def test_split_into_a_sparse_tensor():
    """string_split (every delimiter byte splits) and strings.split (a separator, like
    bytes.split) give TF1's SparseTensor; to_dense pads with b""."""
    src = ["a b  c", "", "de"]
    sp = tf.string_split(src)
    ss = tf.strings.split(tf.constant(["a,,b", "c"]), sep=",")
    ws = tf.strings.split(tf.constant([" x  y ", "z"]))
    chars = tf.string_split(["ab"], delimiter="")
    got, dense, got_s, got_w, got_c = _run([sp, tf.sparse.to_dense(sp), ss, ws, chars])
    assert isinstance(got, tf.SparseTensorValue)
    assert got.indices.tolist() == [[0, 0], [0, 1], [0, 2], [2, 0]]
    assert got.values.tolist() == [b"a", b"b", b"c", b"de"]
    assert got.dense_shape.tolist() == [3, 3]
    assert dense.tolist() == [[b"a", b"b", b"c"], [b"", b"", b""], [b"de", b"", b""]]
    assert got_s.values.tolist() == b"a,,b".split(b",") + [b"c"]
    assert got_s.dense_shape.tolist() == [2, 3]
    assert got_w.values.tolist() == b" x  y ".split() + [b"z"]
    assert got_c.values.tolist() == [b"a", b"b"]


def test_numbers_to_strings_and_back():
    """string_to_number parses like Python's int/float; as_string formats like %d/%f/%e/%g."""
    ints = tf.string_to_number(["12", "-3", " 7"], out_type=tf.int64)
    floats = tf.string_to_number(["1.25", "-2e3", "inf"])
    x = np.array([3.14159, -20.5], np.float32)
    out = _run(
        [
            ints,
            floats,
            tf.as_string(x),
            tf.as_string(x, precision=2, scientific=True),
            tf.as_string(x, shortest=True),
            tf.as_string(tf.constant([5, -42]), width=4, fill="0"),
            tf.as_string(tf.constant([True, False])),
        ]
    )
    assert out[0].dtype == np.int64 and out[0].tolist() == [12, -3, 7]
    assert out[1].dtype == np.float32 and out[1].tolist() == [1.25, -2000.0, np.inf]
    assert out[2].tolist() == [b"%f" % v for v in x]
    assert out[3].tolist() == [b"%.2e" % v for v in x]
    assert out[4].tolist() == [b"%g" % v for v in x]
    assert out[5].tolist() == [b"0005", b"-042"]
    assert out[6].tolist() == [b"true", b"false"]
    bad = tf.string_to_number(["1", "x1"], name="parse")
    with pytest.raises(InvalidArgumentError, match=r"StringToNumber 'parse': b'x1' is not a valid"):
        _run(bad)


def test_join_substr_length_regex_reduce_join():
    """The element-wise ops against Python's bytes methods and re."""
    words = ["héllo", "a", ""]
    w = tf.constant(words)
    out = _run(
        [
            tf.string_join([w, "!", w], separator="-"),
            tf.substr(w[:2], 1, 3),
            tf.substr(w[:2], -1, 1),
            tf.substr(w[:1], 1, 2, unit="UTF8_CHAR"),
            tf.strings.length(w),
            tf.strings.length(w, unit="UTF8_CHAR"),
            tf.regex_replace(w, "l+", "L"),
            tf.regex_replace(w, "(.)(.)", r"\2\1", replace_global=False),
            tf.reduce_join(tf.reshape(tf.constant(list("abcdef")), [2, 3]), axis=0, separator=","),
            tf.reduce_join(tf.reshape(tf.constant(list("abcdef")), [2, 3]), axis=1, keep_dims=True),
            tf.reduce_join(tf.constant(list("abc"))),
        ]
    )
    b = [s.encode() for s in words]
    assert out[0].tolist() == [x + b"-!-" + x for x in b]
    assert out[1].tolist() == [x[1:4] for x in b[:2]]
    assert out[2].tolist() == [x[-1:] for x in b[:2]]
    assert out[3].tolist() == ["él".encode()]
    assert out[4].tolist() == [len(x) for x in b]
    assert out[5].tolist() == [len(s) for s in words]
    assert out[6].tolist() == [re.sub(b"l+", b"L", x) for x in b]
    assert out[7].tolist() == [re.sub(b"(.)(.)", rb"\2\1", x, count=1) for x in b]
    assert out[8].tolist() == [b"a,d", b"b,e", b"c,f"]
    assert out[9].tolist() == [[b"abc"], [b"def"]]
    assert out[10] == b"abc"
    with pytest.raises(InvalidArgumentError, match=r"Substr 'cut': pos 9"):
        _run(tf.substr(w, 9, 1, name="cut"))


def test_decode_raw_matches_numpy_frombuffer():
    """decode_raw reinterprets bytes like numpy.frombuffer, in either byte order."""
    rng = np.random.default_rng(0)
    vals = rng.standard_normal((2, 3)).astype(np.float32)
    recs = [r.tobytes() for r in vals]
    ints = np.array([1, -2, 300], np.int32)
    u8 = np.arange(250, 256, dtype=np.uint8)
    out = _run(
        [
            tf.decode_raw(tf.constant(recs), tf.float32),
            tf.decode_raw(tf.constant(ints.astype(">i4").tobytes()), tf.int32, little_endian=False),
            tf.decode_raw(tf.constant([u8.tobytes()]), np.uint8),
        ]
    )
    np.testing.assert_array_equal(out[0], vals)
    np.testing.assert_array_equal(out[1], ints)
    assert out[2].tolist() == [u8.tolist()]
    with pytest.raises(InvalidArgumentError, match="DecodeRaw 'raw'.*same length"):
        _run(tf.decode_raw(tf.constant([b"abcd", b"ab"]), tf.int32, name="raw"))
    with pytest.raises(InvalidArgumentError, match="not a multiple of 4"):
        _run(tf.decode_raw(tf.constant([b"abc"]), tf.float32))


def test_decode_csv_types_defaults_quotes_and_errors():
    """decode_csv agrees with the csv module; empty fields take the defaults; a bad field is an
    error naming the record."""
    lines = ['1,2.5,"x,y"', ",,", '7,-1e2,""', "3,0.5,plain"]
    a, b, c = tf.decode_csv(tf.constant(lines), [[-1], [9.0], ["dflt"]])
    got = _run([a, b, c])
    want = list(csv.reader(io.StringIO("\n".join(lines))))
    assert got[0].dtype == np.int32 and got[1].dtype == np.float32
    assert got[0].tolist() == [int(r[0]) if r[0] else -1 for r in want]
    assert got[1].tolist() == [float(r[1]) if r[1] else 9.0 for r in want]
    assert got[2].tolist() == [r[2].encode() if r[2] else b"dflt" for r in want]
    semi = tf.decode_csv(
        "4;NA;q", [tf.constant([0], tf.int64), [1.0], [""]], field_delim=";", na_value="NA"
    )
    got = _run(semi)
    assert got[0] == 4 and got[0].dtype == np.int64 and got[1] == 1.0 and got[2] == b"q"
    cols = _run(tf.decode_csv(["1,2,3"], [[0], [0]], select_cols=[0, 2]))
    assert [c.tolist() for c in cols] == [[1], [3]]
    (one,) = tf.decode_csv("8", [[0]])  # one column: a scalar record gives a scalar
    assert one.shape.as_list() == [] and _run(one) == 8 and _run(one).shape == ()
    bad = tf.decode_csv(tf.constant(["1,2", "3,oops"]), [[0], [0.0]], name="rows")
    with pytest.raises(
        InvalidArgumentError, match=r"DecodeCSV 'rows': record 1 b'3,oops'.*field 1"
    ):
        _run(bad)
    with pytest.raises(InvalidArgumentError, match="record 0 b'1'.*has 1 fields, expected 2"):
        _run(tf.decode_csv(["1"], [[0], [0]]))
    with pytest.raises(InvalidArgumentError, match="field 1 is empty and has no default"):
        _run(tf.decode_csv(["1,"], [[0], tf.int32]))


def test_read_and_write_file(tmp_path):
    """read_file gives a file's bytes; write_file writes them; a missing file is NotFoundError."""
    data = bytes(range(256)) * 3
    (tmp_path / "in.bin").write_bytes(data)
    out = str(tmp_path / "out.bin")
    content = tf.read_file(str(tmp_path / "in.bin"))
    w = tf.io.write_file(out, content)
    got = _run([content, w])
    assert got[0] == data and open(out, "rb").read() == data
    with pytest.raises(tf.errors.NotFoundError, match="ReadFile.*nope"):
        _run(tf.read_file(str(tmp_path / "nope")))


def test_graph_files_wire_and_checkpoints_carry_strings(tmp_path):
    """String constants survive JSON and msgpack graph files; string tensors cross the wire
    (length-prefixed, no pickle) and go into checkpoints; a truncated payload is refused."""
    g = tf.get_default_graph()
    tf.constant([["a", ""], ["é", "xyz"]], name="c")
    tf.decode_csv(tf.constant(["5,w"]), [[0], ["d"]], name="csv")
    for g2 in (
        serialize.graph_from_json(serialize.graph_to_json(g)),
        serialize.graph_from_msgpack(serialize.graph_to_msgpack(g)),
    ):
        with tf.Session(graph=g2) as s:
            c, n, t = s.run(["c:0", "csv:0", "csv:1"])
        assert c.tolist() == [[b"a", b""], ["é".encode(), b"xyz"]]
        assert n.tolist() == [5] and t.tolist() == [b"w"]
    arr = _obj([b"", b"ab", "é".encode(), b"\x00" * 5], (2, 2))
    back = wire.tensor_from_wire(wire.unpack(wire.pack(wire.tensor_to_wire(arr)), "t"), "t")
    np.testing.assert_array_equal(back, arr)
    o = wire.out_tensor(arr)
    got = wire.InTensor(o.header, "t", 1 << 20)
    got.write(bytes(o.payload))
    np.testing.assert_array_equal(got.value(), arr)
    short = wire.InTensor({**o.header, "nbytes": o.nbytes - 1}, "t", 1 << 20)
    short.write(bytes(o.payload)[:-1])
    with pytest.raises(DataLossError, match="string lengths add up"):
        short.value()
    with pytest.raises(TypeError, match="holds bytes only"):
        wire.tensor_to_wire(_obj([b"a", 3]))
    with tf.Graph().as_default():
        v = tf.Variable(["a", "bcd"], name="v")
        reset = v.assign(["", "z"])
        saver = tf.train.Saver()
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            path = saver.save(s, os.path.join(tmp_path, "m"))
            s.run(reset)
            saver.restore(s, path)
            assert s.run(v).tolist() == [b"a", b"bcd"]
    assert tf.train.load_variable(path, "v").tolist() == [b"a", b"bcd"]
    assert hb.train.list_variables(path) == [("v", [2])]


def test_shape_only_simulation_runs_string_ops():
    """A SimSession fed a shape-only string value times the string ops with the rest."""
    from hetbed.devices.costmodel import DevicePerf
    from hetbed.simulator import Cluster, SimSession, sim_value

    perf = DevicePerf("toy", {"float32": 1e12}, memory_bandwidth=100e9, memory_bytes=1e9)
    c = Cluster()
    c.add_task("worker", 0, cpu=perf, nic=(1e9, 1e-6))
    lines = tf.placeholder(tf.string, [8])
    a, b = tf.decode_csv(lines, [[0.0], [0.0]])
    y = tf.reduce_sum(tf.matmul(tf.stack([a, b], 1), tf.ones([2, 3])))
    words = tf.string_split(lines).values
    s = SimSession(c)
    s.run([y, words], {lines: sim_value([8], tf.string)})
    ops = s.last_record.ops
    assert {"DecodeCSV", "StringSplit", "MatMul"} <= set(ops.type) and s.step_times[0] > 0


def test_queues_hold_strings_and_padding_uses_empty_bytes():
    """FIFOQueue keeps string elements; PaddingFIFOQueue pads a string batch with b""."""
    q = tf.FIFOQueue(4, [tf.string, tf.int32], shapes=[[], []])
    enq = q.enqueue_many([["x", "yz"], [1, 2]])
    pq = tf.PaddingFIFOQueue(4, [tf.string], shapes=[[None]])
    pe = [pq.enqueue([tf.constant(v)]) for v in (["a"], ["b", "c"])]
    with tf.Session() as s:
        s.run(enq)
        assert s.run(q.dequeue()) == [b"x", 1]
        assert [v.tolist() for v in s.run(q.dequeue_many(1))] == [[b"yz"], [2]]
        s.run(pe[0])
        s.run(pe[1])
        assert s.run(pq.dequeue_many(2)).tolist() == [[b"a", b""], [b"b", b"c"]]


def test_sparse_placeholder_fed_with_a_sparse_tensor_value():
    import hetbed.compat.v1 as tf

    with tf.Graph().as_default():
        sp = tf.sparse_placeholder(tf.float32, shape=[None, None])
        dense = tf.sparse_tensor_to_dense(sp)
        assert sp.indices.shape.as_list() == [None, 2]
        with tf.Session() as s:
            got = s.run(dense, {sp: tf.SparseTensorValue([[0, 1], [2, 0]], [1.5, 2.5], [3, 2])})
            with pytest.raises(TypeError, match="SparseTensorValue"):
                s.run(dense, {sp: np.zeros((3, 2))})
    np.testing.assert_array_equal(got, [[0, 1.5], [0, 0], [2.5, 0]])
