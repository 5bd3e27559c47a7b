"""File readers and TF1's queue-based input pipeline over temp files written by the tests: keys,
values, headers/footers and epochs against the files' contents, the classic CSV training
pipeline end to end, and a reader on another task sending strings over the wire."""

from __future__ import annotations

import socket

import numpy as np
import pytest

import hetbed as hb
import hetbed.compat.v1 as tf
from hetbed.runtime.distributed.cluster import ClusterSpec
from hetbed.runtime.errors import InvalidArgumentError


@pytest.fixture(autouse=True)
def _graph():
    with tf.Graph().as_default() as g:
        yield g


def _drain(sess, fetches, limit=200):
    """Run ``fetches`` until OutOfRangeError; the values, in order."""
    out = []
    with pytest.raises(tf.errors.OutOfRangeError):
        for _ in range(limit):
            out.append(sess.run(fetches))
    return out


def _start(sess):
    sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
    coord = tf.train.Coordinator()
    return coord, tf.train.start_queue_runners(sess, coord)


def _stop(coord, threads):
    coord.request_stop()
    coord.join(threads)


def test_text_line_reader_keys_values_headers_and_epochs(tmp_path):
    """Lines without their newline (CRLF too, an empty line kept, no trailing newline needed),
    keys b"file:line" counting the skipped header; each file num_epochs times, then
    OutOfRangeError; read_up_to returns the last records short."""
    f1, f2 = tmp_path / "a.txt", tmp_path / "b.txt"
    f1.write_bytes(b"head\nx1\r\n\nx3\n")
    f2.write_bytes(b"head\ny1")
    files = [str(f1), str(f2)]
    q = tf.train.string_input_producer(files, num_epochs=2, shuffle=False)
    key, value = tf.TextLineReader(skip_header_lines=1).read(q)
    with tf.Session() as s:
        coord, threads = _start(s)
        got = _drain(s, [key, value])
        _stop(coord, threads)
    lines = [(f"{f1}:2", b"x1"), (f"{f1}:3", b""), (f"{f1}:4", b"x3"), (f"{f2}:2", b"y1")]
    assert [(k.decode(), v) for k, v in got] == lines * 2
    with tf.Graph().as_default():
        q = tf.train.string_input_producer(files, num_epochs=1, shuffle=False)
        reader = tf.TextLineReader()
        keys, values = reader.read_up_to(q, 4)
        n = reader.num_records_produced()
        with tf.Session() as s:
            coord, threads = _start(s)
            got = _drain(s, [keys, values])
            produced = s.run(n)
            _stop(coord, threads)
    assert [v.tolist() for _, v in got] == [[b"head", b"x1", b"", b"x3"], [b"head", b"y1"]]
    assert produced == 6


def test_whole_file_and_fixed_length_record_readers(tmp_path):
    """WholeFileReader gives (name, contents); FixedLengthRecordReader skips header and footer
    bytes and drops a trailing partial record; decode_raw reads CIFAR-like records."""
    rng = np.random.default_rng(0)
    recs = rng.integers(0, 256, (3, 5), dtype=np.uint8)
    data = b"HDR" + recs.tobytes() + b"xy" + b"FOOT"  # 2 stray bytes: a partial record
    p = tmp_path / "r.bin"
    p.write_bytes(data)
    q = tf.train.string_input_producer([str(p)], num_epochs=1, shuffle=False)
    key, value = tf.FixedLengthRecordReader(5, header_bytes=3, footer_bytes=4).read(q)
    label = tf.cast(tf.decode_raw(value, np.uint8)[0], tf.int32)
    with tf.Session() as s:
        coord, threads = _start(s)
        got = _drain(s, [key, tf.decode_raw(value, np.uint8), label])
        _stop(coord, threads)
    assert [k for k, _, _ in got] == [f"{p}:{i}".encode() for i in range(3)]
    np.testing.assert_array_equal(np.stack([r for _, r, _ in got]), recs)
    assert [int(lab) for _, _, lab in got] == recs[:, 0].tolist()
    with tf.Graph().as_default():
        q = tf.train.string_input_producer([str(p)], num_epochs=1, shuffle=False)
        key, value = tf.WholeFileReader().read(q)
        with tf.Session() as s:
            coord, threads = _start(s)
            assert s.run([key, value]) == [str(p).encode(), data]
            _stop(coord, threads)


def test_reader_errors(tmp_path):
    """A queue of numbers is refused when the graph is built; a missing file is NotFoundError
    naming it."""
    nums = tf.FIFOQueue(4, [tf.int32])
    with pytest.raises(InvalidArgumentError, match="must hold filenames"):
        tf.TextLineReader().read(nums)
    with pytest.raises(InvalidArgumentError, match="string_tensor is empty"):
        tf.train.string_input_producer([])
    q = tf.FIFOQueue(4, [tf.string])
    _, value = tf.TextLineReader().read(q)
    with tf.Session() as s:
        s.run(q.enqueue([str(tmp_path / "missing.csv")]))
        with pytest.raises(tf.errors.NotFoundError, match="missing.csv"):
            s.run(value)


def _write_csvs(tmp_path, rng, n_files=2, rows=6):
    files, table = [], []
    for i in range(n_files):
        p = tmp_path / f"part{i}.csv"
        lines = ["x1,x2,label"]
        for _ in range(rows):
            x = np.round(rng.uniform(-1, 1, 2), 3)
            y = int(x[0] + x[1] > 0)
            lines.append(f"{x[0]},{x[1]},{y}")
            table.append((float(np.float32(x[0])), float(np.float32(x[1])), y))
        p.write_text("\n".join(lines) + "\n")
        files.append(str(p))
    return files, table


@pytest.mark.parametrize("shuffled", [False, True])
def test_classic_csv_pipeline_trains_on_the_files(tmp_path, shuffled):
    """filenames (match_filenames_once) -> string_input_producer -> TextLineReader -> decode_csv -> batch /
    shuffle_batch -> one SGD step of logistic regression per batch, with Coordinator and queue
    runners: every row is seen once per epoch, the final weights are numpy's replay of SGD on the
    batches fetched, and OutOfRangeError comes after num_epochs."""
    rng = np.random.default_rng(1)
    epochs, bs, lr = 2, 4, 0.5
    files, table = _write_csvs(tmp_path, rng)
    if not shuffled:  # the files found by a glob when local variables are initialized (sorted)
        files = tf.train.match_filenames_once(str(tmp_path / "part*.csv"))
    q = tf.train.string_input_producer(files, num_epochs=epochs, shuffle=shuffled, seed=3)
    _, line = tf.TextLineReader(skip_header_lines=1).read(q)
    x1, x2, label = tf.decode_csv(line, record_defaults=[[0.0], [0.0], [0]])
    feats = tf.stack([x1, x2])
    if shuffled:
        xb, yb = tf.train.shuffle_batch(
            [feats, label], bs, capacity=32, min_after_dequeue=4, seed=5, num_threads=2,
            allow_smaller_final_batch=True,
        )  # fmt: skip
    else:
        xb, yb = tf.train.batch([feats, label], bs, allow_smaller_final_batch=True)
    w = tf.Variable(tf.zeros([2, 1]), name="w")
    b = tf.Variable(0.0, name="b")
    logits = tf.squeeze(tf.matmul(xb, w), 1) + b
    loss = tf.reduce_mean(
        tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.cast(yb, tf.float32), logits=logits)
    )
    train = tf.train.GradientDescentOptimizer(lr).minimize(loss)
    with tf.Session() as s:
        coord, threads = _start(s)
        batches = _drain(s, [xb, yb, train])
        final_w, final_b = s.run([w, b])
        _stop(coord, threads)
    seen = [(float(r[0]), float(r[1]), int(y)) for xs, ys, _ in batches for r, y in zip(xs, ys)]
    assert len(seen) == epochs * len(table)
    assert sorted(seen) == sorted(table * epochs)
    if not shuffled:  # files and lines in order
        assert seen == table * epochs
    wn, bn = np.zeros(2), 0.0
    for xs, ys, _ in batches:  # numpy's SGD on the same batches
        p = 1 / (1 + np.exp(-(xs.astype(np.float64) @ wn + bn)))
        wn = wn - lr * xs.T @ (p - ys) / len(ys)
        bn = bn - lr * float(np.mean(p - ys))
    np.testing.assert_allclose(final_w.ravel(), wn, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(final_b, bn, rtol=1e-4, atol=1e-5)


def _free_port() -> int:
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        return sk.getsockname()[1]


def test_reader_on_another_task_sends_strings(tmp_path):
    """The filename queue and reader on the ps task, parsing on the worker: the lines cross
    tasks as string tensors (and come back to the client as bytes)."""
    p = tmp_path / "d.csv"
    p.write_text("1,a\n2,bb\n3,\n")
    spec = ClusterSpec(
        {"ps": [f"127.0.0.1:{_free_port()}"], "worker": [f"127.0.0.1:{_free_port()}"]}
    )
    servers = [hb.train.Server(spec, job, 0) for job in ("ps", "worker")]
    try:
        with tf.device("/job:ps/task:0/cpu:0"):
            q = tf.train.string_input_producer([str(p)], num_epochs=1, shuffle=False)
            key, line = tf.TextLineReader().read(q)
        with tf.device("/job:worker/task:0/cpu:0"):
            n, word = tf.decode_csv(line, [[0], ["-"]])
            tagged = tf.string_join([word, tf.as_string(n * 10)], separator=":")
        with tf.Session(servers[1].target) as s:
            coord, threads = _start(s)
            got = _drain(s, [key, tagged])
            _stop(coord, threads)
    finally:
        for sv in servers:
            sv.stop(grace=0)
    assert [k for k, _ in got] == [f"{p}:{i}".encode() for i in (1, 2, 3)]
    assert [t for _, t in got] == [b"a:10", b"bb:20", b"-:30"]


def test_text_line_dataset_and_string_slices(tmp_path):
    """tf.data over strings: TextLineDataset's lines (CRLF stripped) parsed by decode_csv in
    map (its list becomes a tuple, as in TF), and from_tensor_slices of str giving bytes."""
    p = tmp_path / "t.csv"
    p.write_bytes(b"1,x\r\n2,yy\n3,z")
    ds = tf.data.TextLineDataset(str(p)).map(lambda ln: tf.decode_csv(ln, [[0], ["?"]])).batch(2)
    nxt = ds.make_one_shot_iterator().get_next()
    sl = tf.data.Dataset.from_tensor_slices((["a", "bé"], [1, 2]))
    sl = sl.map(lambda s, n: (tf.strings.length(s) + n, s))
    nxt2 = sl.make_one_shot_iterator().get_next()
    with tf.Session() as s:
        got = _drain(s, nxt)
        got2 = _drain(s, nxt2)
    assert [(a.tolist(), b.tolist()) for a, b in got] == [([1, 2], [b"x", b"yy"]), ([3], [b"z"])]
    assert [(int(a), b) for a, b in got2] == [(2, b"a"), (5, "bé".encode())]
