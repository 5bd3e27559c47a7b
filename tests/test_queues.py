"""TF1's queues and queue-runner input pipelines: FIFOQueue and RandomShuffleQueue with several
components, bounded capacity, dequeue_many/up_to, close; count_up_to and limit_epochs; QueueRunner,
Coordinator, start_queue_runners; slice_input_producer, batch, shuffle_batch; MonitoredTrainingSession
running the runners; against numpy and, when installed, TensorFlow."""

import threading
import time

import numpy as np
import pytest

import hetbed.compat.v1 as tf

WAIT_S = 20


def _thread(fn, *args):
    box = []

    def run():
        try:
            box.append(("ok", fn(*args)))
        except Exception as e:  # noqa: BLE001 - returned to the test
            box.append(("err", e))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box


def _config():
    return tf.ConfigProto(operation_timeout_in_ms=WAIT_S * 1000)


def test_fifo_queue_components_batches_and_close():
    """Two components keep their pairing; dequeue_many stacks; a closed queue serves what it
    holds (dequeue_up_to a short batch), then OutOfRangeError; names give dicts."""
    with tf.Graph().as_default():
        q = tf.FIFOQueue(10, [tf.float32, tf.int64], shapes=[[2], []])
        a = np.arange(10, dtype=np.float32).reshape(5, 2)
        b = np.arange(5, dtype=np.int64) * 7
        put_many = q.enqueue_many([a, b])
        put_one = q.enqueue([np.float32([9, 9]), np.int64(99)])
        one = q.dequeue()
        two = q.dequeue_many(2)
        up_to = q.dequeue_up_to(4)
        named = tf.FIFOQueue(-1, [tf.int32, tf.int32], shapes=[[], []], names=["x", "y"])
        nput = named.enqueue({"x": 1, "y": 2})
        nget = named.dequeue()
        with tf.Session(config=_config()) as s:
            s.run([put_many])
            s.run(put_one)
            assert s.run(q.size()) == 6 and not s.run(q.is_closed())
            x, y = s.run(one)
            np.testing.assert_array_equal(x, a[0])
            assert y == 0
            x, y = s.run(two)
            np.testing.assert_array_equal(x, a[1:3])
            np.testing.assert_array_equal(y, b[1:3])
            s.run(q.close())
            assert s.run(q.is_closed())
            with pytest.raises(tf.errors.CancelledError, match="is closed"):
                s.run(put_one)
            x, y = s.run(up_to)  # 3 left: a short batch
            np.testing.assert_array_equal(y, [21, 28, 99])
            with pytest.raises(tf.errors.OutOfRangeError, match="closed and empty"):
                s.run(up_to)
            s.run(nput)
            assert s.run(nget) == {"x": 1, "y": 2}


def test_bounded_queue_blocks_enqueues_until_room_and_cancels_them_on_close():
    with tf.Graph().as_default():
        q = tf.FIFOQueue(2, tf.int32, shapes=[])
        put = q.enqueue_many([np.arange(5, dtype=np.int32)])
        take = q.dequeue_many(2)
        with tf.Session(config=_config()) as s:
            t, box = _thread(s.run, put)
            deadline = time.monotonic() + WAIT_S
            while s.run(q.size()) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(0.1)
            assert not box and s.run(q.size()) == 2  # full: the enqueue waits for room
            np.testing.assert_array_equal(s.run(take), [0, 1])
            np.testing.assert_array_equal(s.run(take), [2, 3])
            t.join(WAIT_S)
            assert box == [("ok", None)]
            assert s.run(q.dequeue()) == 4
            # a waiting enqueue is cancelled by close(cancel_pending_enqueues=True)
            s.run(q.enqueue_many([np.arange(2, dtype=np.int32)]))
            t, box = _thread(s.run, q.enqueue(7))
            time.sleep(0.2)
            assert not box
            s.run(q.close(cancel_pending_enqueues=True))
            t.join(WAIT_S)
            assert box[0][0] == "err" and isinstance(box[0][1], tf.errors.CancelledError)
            np.testing.assert_array_equal(s.run(q.dequeue_up_to(5)), [0, 1])


def test_random_shuffle_queue_keeps_min_after_dequeue_and_loses_nothing():
    with tf.Graph().as_default():
        q = tf.RandomShuffleQueue(100, 5, tf.int64, shapes=[], seed=3)
        put = q.enqueue_many([np.arange(20, dtype=np.int64)])
        take = q.dequeue_many(5)
        with tf.Session(config=_config()) as s:
            s.run(q.enqueue_many([np.arange(7, dtype=np.int64)]))
            t, box = _thread(s.run, take)
            time.sleep(0.2)
            assert not box  # 7 held: taking 5 would leave fewer than min_after_dequeue
            s.run(q.enqueue_many([np.arange(7, 10, dtype=np.int64)]))
            t.join(WAIT_S)
            got = list(box[0][1])
            s.run(put)
            s.run(q.close())
            while True:
                try:
                    got += list(s.run(q.dequeue_up_to(6)))
                except tf.errors.OutOfRangeError:
                    break
        assert sorted(got) == sorted([*range(10), *range(20)])
        assert got[:10] != sorted(got[:10])  # shuffled


def test_count_up_to_and_limit_epochs():
    with tf.Graph().as_default():
        v = tf.Variable(np.int64(0), name="counter")
        c = v.count_up_to(3)
        limited = tf.train.limit_epochs(tf.constant([1, 2]), num_epochs=2)
        with tf.Session() as s:
            s.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
            assert [int(s.run(c)) for _ in range(3)] == [0, 1, 2]
            with pytest.raises(tf.errors.OutOfRangeError, match="Reached limit of 3"):
                s.run(c)
            assert int(s.run(v)) == 3
            assert [s.run(limited).tolist() for _ in range(2)] == [[1, 2], [1, 2]]
            with pytest.raises(tf.errors.OutOfRangeError):
                s.run(limited)


def _drain(s, fetches, errors=tf.errors):
    out = []
    try:
        while True:
            out.append(s.run(fetches))
    except errors.OutOfRangeError:
        return out


def test_slice_input_producer_and_batch_run_the_epochs_in_order():
    """Unshuffled, one thread: the batches are the rows in order, twice, the last one short."""
    x = np.arange(20, dtype=np.float32).reshape(10, 2)
    y = np.arange(10, dtype=np.int64)
    with tf.Graph().as_default():
        xs, ys = tf.train.slice_input_producer([x, y], num_epochs=2, shuffle=False)
        bx, by = tf.train.batch([xs, ys], batch_size=3, allow_smaller_final_batch=True)
        assert bx.shape.as_list() == [None, 2]
        with tf.Session(config=_config()) as s:
            s.run(tf.local_variables_initializer())
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(s, coord)
            out = _drain(s, [bx, by])
            coord.request_stop()
            coord.join(threads)
    order = np.concatenate([y, y])
    assert [len(b[1]) for b in out] == [3] * 6 + [2]
    np.testing.assert_array_equal(np.concatenate([b[1] for b in out]), order)
    np.testing.assert_array_equal(np.concatenate([b[0] for b in out]), x[order])


def test_shuffle_batch_with_threads_sees_every_example_once_per_epoch():
    x = np.arange(30, dtype=np.int64)
    with tf.Graph().as_default():
        (xs,) = tf.train.slice_input_producer([x], num_epochs=3, shuffle=True, seed=1)
        b = tf.train.shuffle_batch(
            [xs],
            8,
            capacity=40,
            min_after_dequeue=10,
            num_threads=3,
            seed=2,
            allow_smaller_final_batch=True,
        )
        with tf.Session(config=_config()) as s:
            s.run(tf.local_variables_initializer())
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(s, coord)
            out = _drain(s, b)
            coord.request_stop()
            coord.join(threads)
    got = np.concatenate([o[0] if isinstance(o, list) else o for o in out])
    assert sorted(got.tolist()) == sorted(np.tile(x, 3).tolist())
    assert all(len(o[0] if isinstance(o, list) else o) == 8 for o in out[:-1])


def test_coordinator_reports_the_first_error_and_treats_out_of_range_as_clean():
    coord = tf.train.Coordinator()
    with coord.stop_on_exception():
        raise tf.errors.OutOfRangeError("end of input")
    assert coord.should_stop()
    coord.join([])  # clean: nothing raised
    coord.clear_stop()
    t = threading.Thread(target=lambda: coord.request_stop(ValueError("bad input")))
    coord.register_thread(t)
    t.start()
    with pytest.raises(ValueError, match="bad input"):
        coord.join(stop_grace_period_secs=5)
    with pytest.raises(ValueError, match="needs a queue"):
        tf.train.QueueRunner(None, [])


def test_a_failing_enqueue_stops_the_coordinator_with_its_error():
    with tf.Graph().as_default():
        p = tf.placeholder(tf.float32, [])
        q = tf.FIFOQueue(4, tf.float32, shapes=[])
        qr = tf.train.QueueRunner(q, [q.enqueue(p)])  # the placeholder is never fed
        tf.train.add_queue_runner(qr)
        with tf.Session(config=_config()) as s:
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(s, coord)
            assert coord.wait_for_stop(WAIT_S)
            with pytest.raises(tf.errors.InvalidArgumentError, match="Placeholder"):
                coord.join(threads, stop_grace_period_secs=WAIT_S)


def test_monitored_session_runs_the_queue_runners_until_the_input_ends():
    """Linear regression fed by slice_input_producer + shuffle_batch under
    MonitoredTrainingSession: the runners start by themselves, training stops cleanly at the
    end of the last epoch, and the weights approach the least-squares solution."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 3)).astype(np.float32)
    w_true = np.array([[1.5], [-2.0], [0.5]], np.float32)
    y = x @ w_true
    steps = 0
    with tf.Graph().as_default():
        xs, ys = tf.train.slice_input_producer([x, y], num_epochs=40, seed=0)
        bx, by = tf.train.shuffle_batch([xs, ys], 16, capacity=64, min_after_dequeue=16, seed=1)
        w = tf.Variable(tf.zeros([3, 1]))
        loss = tf.reduce_mean(tf.square(tf.matmul(bx, w) - by))
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        wv = None
        with tf.train.MonitoredTrainingSession(config=_config()) as sess:
            while not sess.should_stop():  # the last run raises OutOfRangeError: a clean stop
                _, wv = sess.run([train, w])
                steps += 1
        assert sess.should_stop()
        with pytest.raises(RuntimeError, match="closed"):
            sess.run(train)
    assert steps == 64 * 40 // 16  # every example of every epoch, no partial batch
    np.testing.assert_allclose(wv, w_true, atol=0.02)


def test_queue_errors_name_the_problem():
    with tf.Graph().as_default():
        q = tf.FIFOQueue(4, [tf.float32, tf.int32])
        with pytest.raises(tf.errors.InvalidArgumentError, match="needs fully defined"):
            q.dequeue_many(2)
        with pytest.raises(tf.errors.InvalidArgumentError, match="2 values for 2|1 values for 2"):
            q.enqueue([1.0])
        with pytest.raises(tf.errors.InvalidArgumentError, match="capacity must be > 0"):
            tf.FIFOQueue(0, tf.float32)
        with pytest.raises(tf.errors.InvalidArgumentError, match="min_after_dequeue"):
            tf.RandomShuffleQueue(4, 4, tf.float32)
        s = tf.FIFOQueue(4, tf.float32, shapes=[[2]])
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"shape \(3,\).*\(2,\)|\[3\]"):
            s.enqueue(np.zeros(3, np.float32))
        with pytest.raises(tf.errors.InvalidArgumentError, match="must be known"):
            tf.train.slice_input_producer([tf.placeholder(tf.float32, [None, 2])])


def test_same_batches_as_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    tf1.disable_eager_execution()
    x = np.arange(24, dtype=np.float32).reshape(12, 2)
    y = np.arange(12, dtype=np.int32)

    def program(tf):  # (shadows the module's tf: the same program under both)
        with tf.Graph().as_default():
            xs, ys = tf.train.slice_input_producer([x, y], num_epochs=2, shuffle=False)
            b = tf.train.batch({"x": xs, "y": ys}, batch_size=5, allow_smaller_final_batch=True)
            q = tf.FIFOQueue(8, [tf.int32], shapes=[[]])
            fill, close = q.enqueue_many([np.arange(6, dtype=np.int32)]), q.close()
            many, up_to = q.dequeue_many(4), q.dequeue_up_to(4)
            with tf.Session() as s:
                s.run(tf.local_variables_initializer())
                coord = tf.train.Coordinator()
                threads = tf.train.start_queue_runners(s, coord)
                batches = _drain(s, b, tf.errors)
                coord.request_stop()
                coord.join(threads)
                s.run(fill)
                s.run(close)
                rest = [s.run(many).tolist(), s.run(up_to).tolist()]
                try:
                    s.run(up_to)
                    rest.append("no error")
                except tf.errors.OutOfRangeError:
                    rest.append("OutOfRange")
                return batches, rest

    want, got = program(tf1), program(tf)
    assert len(want[0]) == len(got[0]) == 5
    for a, b in zip(want[0], got[0]):
        np.testing.assert_array_equal(a["x"], b["x"])
        np.testing.assert_array_equal(a["y"], b["y"])
    assert want[1] == got[1] == [[0, 1, 2, 3], [4, 5], "OutOfRange"]


def test_padding_fifo_queue_pads_each_batch_to_its_largest_element():
    """Components with dimensions of unknown size: each batch is zero-padded at the end of every
    dimension to its largest element (numpy reference), dequeue_up_to too; an element of the
    wrong rank or size is refused naming the component and the queue."""
    rng = np.random.default_rng(0)
    seqs = [rng.integers(1, 9, n).astype(np.int32) for n in (3, 1, 5, 2)]
    mats = [rng.standard_normal((2, n)).astype(np.float32) for n in (4, 2, 1, 3)]
    with tf.Graph().as_default():
        q = tf.PaddingFIFOQueue(8, [tf.int32, tf.float32], shapes=[[None], [2, None]])
        x, m = tf.placeholder(tf.int32, [None]), tf.placeholder(tf.float32, None)
        enq = q.enqueue([x, m])
        many, up_to, close = q.dequeue_many(3), q.dequeue_up_to(3), q.close()
        assert many[0].shape.as_list() == [3, None] and many[1].shape.as_list() == [3, 2, None]
        with tf.Session() as s:
            for a, b in zip(seqs, mats):
                s.run(enq, {x: a, m: b})
            got = s.run(many)
            s.run(close)
            last = s.run(up_to)
            with pytest.raises(
                tf.errors.InvalidArgumentError, match=r"component 1 of shape \[3, 1\]"
            ):
                s.run(enq, {x: seqs[0], m: np.ones((3, 1), np.float32)})

    def padded(vals, top):
        out = np.zeros((len(vals), *top), vals[0].dtype)
        for i, v in enumerate(vals):
            out[(i, *(slice(0, k) for k in v.shape))] = v
        return out

    np.testing.assert_array_equal(got[0], padded(seqs[:3], (5,)))
    np.testing.assert_array_equal(got[1], padded(mats[:3], (2, 4)))
    np.testing.assert_array_equal(last[0], padded(seqs[3:], (2,)))
    with tf.Graph().as_default(), pytest.raises(tf.errors.InvalidArgumentError, match="known rank"):
        tf.PaddingFIFOQueue(4, [tf.int32], shapes=[None])


def test_batch_with_dynamic_pad_pads_variable_length_examples():
    """tf.train.batch(dynamic_pad=True) over examples of different lengths (from a queue of
    sequences of unknown length): batches in order, each padded to its longest example."""
    seqs = [np.arange(n, dtype=np.int32) + 10 * k for k, n in enumerate([3, 1, 4, 2, 5, 2])]
    with tf.Graph().as_default():
        src = tf.FIFOQueue(10, [tf.int32], shapes=[[None]])
        x = tf.placeholder(tf.int32, [None])
        fill, close = src.enqueue([x]), src.close()
        seq = src.dequeue()
        (b,) = tf.train.batch([seq], batch_size=4, dynamic_pad=True, allow_smaller_final_batch=True)
        assert b.shape.as_list() == [None, None]
        with tf.Session(config=_config()) as s:
            for v in seqs:
                s.run(fill, {x: v})
            s.run(close)
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(s, coord)
            out = _drain(s, b)
            coord.request_stop()
            coord.join(threads)
    assert len(out) == 2
    for start, a in zip((0, 4), out):
        rows = seqs[start : start + 4]
        top = max(len(r) for r in rows)
        np.testing.assert_array_equal(a, np.array([np.pad(r, (0, top - len(r))) for r in rows]))


def test_padding_same_as_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    tf1.disable_eager_execution()
    seqs = [np.arange(n, dtype=np.float32) + n for n in (2, 5, 1, 3)]

    def program(tf):
        with tf.Graph().as_default():
            q = tf.PaddingFIFOQueue(8, [tf.float32, tf.int32], shapes=[[None], []])
            x, k = tf.placeholder(tf.float32, [None]), tf.placeholder(tf.int32, [])
            enq, close = q.enqueue([x, k]), q.close()
            many, up_to = q.dequeue_many(3), q.dequeue_up_to(3)
            with tf.Session() as s:
                for j, v in enumerate(seqs):
                    s.run(enq, {x: v, k: j})
                s.run(close)
                return s.run(many), s.run(up_to)

    want, got = program(tf1), program(tf)
    for a, b in zip(want, got):
        for u, v in zip(a, b):
            np.testing.assert_array_equal(u, v)


def test_several_threads_waiting_to_enqueue_arrays_lose_nothing():
    """A full queue with several enqueuers waiting, each holding an array (the CIFAR-10 input
    idiom: shuffle_batch with num_threads > 1): every element arrives once. Waiting requests
    are told apart by identity (comparing them element by element raised ValueError)."""
    with tf.Graph().as_default():
        q = tf.FIFOQueue(1, [tf.float32], shapes=[[3]])
        x = tf.placeholder(tf.float32, [3])
        enq = q.enqueue([x])
        deq = q.dequeue()
        with tf.Session(config=_config()) as s:
            jobs = [_thread(s.run, enq, {x: np.full(3, k, np.float32)}) for k in range(6)]
            got = sorted(float(s.run(deq)[0]) for _ in range(6))
            for t, box in jobs:
                t.join(WAIT_S)
                assert box and box[0][0] == "ok", box
    assert got == [float(k) for k in range(6)]
