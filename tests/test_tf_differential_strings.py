"""Differential tests of string tensors and readers: the same TF1 program under TensorFlow and
under hetbed, values compared. Skipped when TensorFlow is not installed."""

from __future__ import annotations

import numpy as np
import pytest

import hetbed.compat.v1 as hbtf

tf1 = pytest.importorskip("tensorflow.compat.v1")


def both(program, *args):
    """``program(tf, *args) -> fetches`` run under TF1 and hetbed; both results."""
    out = []
    for tf in (tf1, hbtf):
        g = tf.Graph()
        with g.as_default():
            fetches = program(tf, *args)
            with tf.Session(graph=g) as s:
                out.append(s.run(fetches))
    return out


def assert_same(a, b):
    if isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
        return
    if isinstance(a, bytes):
        assert a == b
        return
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    if a.dtype.kind == "O":
        assert a.tolist() == b.tolist()
    else:
        np.testing.assert_allclose(b, a, rtol=1e-6)


def string_ops(tf):
    w = tf.constant(["héllo wörld", "a  b", ""])
    sp = tf.string_split(w)
    n = tf.constant([3.25, -1.0])
    f = tf.constant(np.array([1.5, -2.0], np.float32).tobytes())
    return [
        sp.indices,
        sp.values,
        sp.dense_shape,
        tf.sparse_tensor_to_dense(sp, default_value=""),
        tf.string_to_number(["1.5", "-7"]),
        tf.string_to_number(["12", "-3"], out_type=tf.int64),
        tf.as_string(n),
        tf.as_string(n, precision=3),
        tf.as_string(tf.constant([7, -12]), width=5),
        tf.string_join([w, "|", w], separator="_"),
        tf.substr(w[:2], 1, 4),
        tf.strings.length(w),
        tf.strings.length(w, unit="UTF8_CHAR"),
        tf.regex_replace(w, "[lo]+", "#"),
        tf.reduce_join(tf.reshape(tf.constant(list("abcdef")), [2, 3]), axis=1, separator="-"),
        tf.decode_raw(f, tf.float32),
        tf.equal(w, "a  b"),
    ] + [
        getattr(t, f)
        for t in (tf.strings.split(w, sep=" "), tf.string_split(w, "l ", skip_empty=False))
        for f in ("indices", "values", "dense_shape")
    ]


def test_string_ops_match_tensorflow():
    """Split, number parsing and formatting, join, substr, length, regex, reduce_join,
    decode_raw and Equal give TF's values."""
    a, b = both(string_ops)
    assert_same(a, b)


def csv_parse(tf):
    lines = tf.constant(['1,2.5,"q,r"', ",,", "-4,1e3,z"])
    return tf.decode_csv(lines, [[7], [0.5], ["d"]])


def test_decode_csv_matches_tensorflow():
    a, b = both(csv_parse)
    assert_same(a, b)


def test_reader_pipeline_matches_tensorflow(tmp_path):
    """string_input_producer -> TextLineReader (skipping a header) -> decode_csv -> batch:
    the same keys, values and batches as TensorFlow, then OutOfRangeError in both."""
    files = []
    for i in range(2):
        p = tmp_path / f"f{i}.csv"
        p.write_text("h1,h2\n" + "".join(f"{i * 10 + j},w{j}\n" for j in range(3)))
        files.append(str(p))
    got = []
    for tf in (tf1, hbtf):
        with tf.Graph().as_default():
            q = tf.train.string_input_producer(files, num_epochs=1, shuffle=False)
            key, line = tf.TextLineReader(skip_header_lines=1).read(q)
            num, word = tf.decode_csv(line, [[0], [""]])
            batch = tf.train.batch([key, num, word], 4, allow_smaller_final_batch=True)
            out = []
            with tf.Session() as s:
                s.run(tf.local_variables_initializer())
                coord = tf.train.Coordinator()
                threads = tf.train.start_queue_runners(s, coord)
                with pytest.raises(tf.errors.OutOfRangeError):
                    for _ in range(10):
                        out.append(s.run(batch))
                coord.request_stop()
                coord.join(threads)
            got.append(out)
    assert len(got[0]) == 2
    assert_same(got[0], got[1])


def test_fixed_length_records_and_read_up_to_match_tensorflow(tmp_path):
    """FixedLengthRecordReader (header, footer, a trailing partial record) and
    TextLineReader.read_up_to (CRLF, an empty line, no final newline): TF's keys and values."""
    rec = tmp_path / "r.bin"
    rec.write_bytes(b"HDR" + bytes(range(15)) + b"xy" + b"FOOT")
    txt = tmp_path / "t.txt"
    txt.write_bytes(b"a\r\n\nb")
    got = []
    for tf in (tf1, hbtf):
        with tf.Graph().as_default():
            q = tf.train.string_input_producer([str(rec)], num_epochs=1, shuffle=False)
            kv = tf.FixedLengthRecordReader(5, header_bytes=3, footer_bytes=4).read(q)
            q2 = tf.train.string_input_producer([str(txt)], num_epochs=1, shuffle=False)
            kv2 = tf.TextLineReader().read_up_to(q2, 2)
            out = []
            with tf.Session() as s:
                s.run(tf.local_variables_initializer())
                coord = tf.train.Coordinator()
                threads = tf.train.start_queue_runners(s, coord)
                for fetch in (kv, kv2):
                    with pytest.raises(tf.errors.OutOfRangeError):
                        for _ in range(6):
                            out.append(s.run(list(fetch)))
                coord.request_stop()
                coord.join(threads)
            got.append(out)
    assert len(got[0]) == 5
    assert_same(got[0], got[1])
