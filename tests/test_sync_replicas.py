"""SyncReplicasOptimizer and its data-flow ops (token queue, conditional accumulator), in process:
one Session, one thread per worker replica, every replica's ops in the same graph."""

import threading

import numpy as np
import pytest

import hetbed as hb
from hetbed.runtime.ops import data_flow

LR = 0.1
TIMEOUT_MS = 20000
rng = np.random.default_rng(7)
W0 = rng.normal(size=(3, 1))
DATA = [(rng.normal(size=(4, 3)), rng.normal(size=(4, 1))) for _ in range(3)]


def grad(w, x, y):
    """d/dw mean((x w - y)^2)."""
    return 2.0 * x.T @ (x @ w - y) / x.shape[0]


def build(n_replicas, to_aggregate, total=None):
    """Shared w and global step; one SyncReplicasOptimizer and train op per replica."""
    w = hb.Variable(W0, name="w")
    gs = hb.train.get_or_create_global_step()
    opts, trains = [], []
    for x, y in DATA[:n_replicas]:
        loss = hb.reduce_mean(hb.square(hb.matmul(hb.constant(x), w) - hb.constant(y)))
        opt = hb.train.SyncReplicasOptimizer(
            hb.train.GradientDescentOptimizer(LR), to_aggregate, total_num_replicas=total
        )
        trains.append(opt.minimize(loss, global_step=gs))
        opts.append(opt)
    return w, gs, opts, trains


def start(opts):
    sess = hb.Session(
        config=hb.ConfigProto(inter_op_parallelism_threads=0, operation_timeout_in_ms=TIMEOUT_MS)
    )
    sess.run(hb.global_variables_initializer())
    sess.run(hb.local_variables_initializer())
    sess.run(opts[0].chief_init_op)
    for o in opts:
        sess.run(o.local_step_init_op)
    return sess


def in_thread(fn, *args):
    errors = []

    def body():
        try:
            fn(*args)
        except BaseException as e:  # noqa: BLE001 - re-raised by join
            errors.append(e)

    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t, errors


def join(*started):
    for t, errors in started:
        t.join(TIMEOUT_MS / 1000 + 5)
        assert not t.is_alive(), "thread still blocked"
        if errors:
            raise errors[0]


def wait_for(fn, what, timeout_s=10.0):
    import time

    deadline = time.monotonic() + timeout_s
    while not fn():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def test_two_replicas_match_synchronous_sgd_on_the_average_gradient():
    """N=2 replicas aggregating 2: k steps equal k SGD steps on the mean of both gradients."""
    k = 5
    with hb.Graph().as_default():
        w, gs, opts, trains = build(2, 2)
        sess = start(opts)
        chief = in_thread(lambda: [sess.run(opts[0].chief_sync_op) for _ in range(k)])
        workers = [in_thread(lambda t=t: [sess.run(t) for _ in range(k)]) for t in trains]
        join(chief, *workers)
        ref = W0.copy()
        for _ in range(k):
            ref -= LR * (grad(ref, *DATA[0]) + grad(ref, *DATA[1])) / 2
        np.testing.assert_allclose(sess.run(w), ref, rtol=1e-12)
        assert int(sess.run(gs)) == k
        acc = opts[0]._accumulators[0]
        assert sess.run(acc.num_dropped()) == 0
        assert sess.run(opts[0]._sync_token_queue.size()) == 0
        sess.close()


def test_backup_worker_gradient_is_dropped_and_step_advances_per_two_gradients():
    """2 of 3 replicas aggregate: the global step advances per 2 gradients; the late one drops."""
    with hb.Graph().as_default():
        w, gs, opts, trains = build(3, 2, total=3)
        sess = start(opts)
        acc = opts[0]._accumulators[0]
        queue = opts[0]._sync_token_queue
        n_acc = acc.num_accumulated()
        b = in_thread(sess.run, trains[1])
        c = in_thread(sess.run, trains[2])
        wait_for(lambda: sess.run(n_acc) == 2, "two gradients")
        sess.run(opts[0].chief_sync_op)  # take 2, apply, global step 1, enqueue 3 tokens
        join(b, c)
        ref = W0 - LR * (grad(W0, *DATA[1]) + grad(W0, *DATA[2])) / 2
        np.testing.assert_allclose(sess.run(w), ref, rtol=1e-12)
        assert int(sess.run(gs)) == 1
        assert sess.run(queue.size()) == 1  # the backup's token
        sess.run(trains[0])  # the late replica: stale gradient dropped, takes the last token
        assert (sess.run(acc.num_dropped()), sess.run(n_acc), sess.run(queue.size())) == (1, 0, 0)
        np.testing.assert_allclose(sess.run(w), ref, rtol=1e-12)
        # second round: replicas 0 and 1 are in time, replica 2 is late again
        a = in_thread(sess.run, trains[0])
        b = in_thread(sess.run, trains[1])
        wait_for(lambda: sess.run(n_acc) == 2, "two gradients")
        sess.run(opts[0].chief_sync_op)
        join(a, b)
        sess.run(trains[2])
        ref = ref - LR * (grad(ref, *DATA[0]) + grad(ref, *DATA[1])) / 2
        np.testing.assert_allclose(sess.run(w), ref, rtol=1e-12)
        assert int(sess.run(gs)) == 2
        assert sess.run(acc.num_dropped()) == 2
        sess.close()


def test_accumulator_drops_stale_gradients_and_averages_the_rest():
    """apply_grad with local_step < global step is dropped; take averages and advances the step."""
    with hb.Graph().as_default():
        acc = data_flow.ConditionalAccumulator(hb.float64, shape=[2], shared_name="acc")
        g = hb.placeholder(hb.float64, [2])
        step = hb.placeholder(hb.int64, [])
        apply = acc.apply_grad(g, local_step=step)
        take = acc.take_grad(2)
        take1 = acc.take_grad(1)
        counts = [acc.num_accumulated(), acc.num_dropped()]
        with hb.Session() as sess:
            sess.run(acc.set_global_step(5))
            sess.run(apply, {g: [1.0, 2.0], step: 4})
            assert sess.run(counts) == [0, 1]
            sess.run(apply, {g: [1.0, 2.0], step: 5})
            sess.run(apply, {g: [3.0, 6.0], step: 7})
            np.testing.assert_allclose(sess.run(take), [2.0, 4.0])
            assert sess.run(counts) == [0, 1]
            sess.run(apply, {g: [1.0, 1.0], step: 5})  # behind the new global step 6
            assert sess.run(counts) == [0, 2]
            # the average is divided in place and handed out: later gradients start a new sum,
            # neither the fed gradient nor an average taken before changes
            fed = np.array([4.0, 8.0])
            sess.run(apply, {g: fed, step: 6})
            avg = sess.run(take1)
            sess.run(apply, {g: [10.0, 10.0], step: 7})
            np.testing.assert_array_equal(fed, [4.0, 8.0])
            np.testing.assert_allclose(avg, [4.0, 8.0])
            np.testing.assert_allclose(sess.run(take1), [10.0, 10.0])
            np.testing.assert_allclose(avg, [4.0, 8.0])


def test_apply_grad_rejects_a_gradient_of_the_wrong_shape():
    """A gradient whose shape differs from the accumulator's fails naming both shapes."""
    with hb.Graph().as_default():
        acc = data_flow.ConditionalAccumulator(hb.float64, shape=[2])
        with pytest.raises(
            hb.errors.InvalidArgumentError,
            match=r"gradient shape \(3,\) does not match.*shape \(2,\)",
        ):
            acc.apply_grad(hb.constant(np.zeros(3)), local_step=0)


def test_waiting_ops_complete_in_one_step_without_a_pool_thread(monkeypatch):
    """With inter_op_parallelism_threads=0 a step that dequeues (takes) before it enqueues
    (applies) completes: the waiting kernels hold no thread."""
    waited = []
    orig_dequeue, orig_take = data_flow._Queue.get, data_flow._Accumulator.take

    def dequeue(self, n, up_to, done, step=None):
        waited.append(("dequeue", not self.items))
        orig_dequeue(self, n, up_to, done, step)

    def take(self, n, done, step=None):
        waited.append(("take", self.count < n))
        orig_take(self, n, done, step)

    monkeypatch.setattr(data_flow._Queue, "get", dequeue)
    monkeypatch.setattr(data_flow._Accumulator, "take", take)
    with hb.Graph().as_default():
        q = data_flow.FIFOQueue(-1, hb.int64, shapes=())
        acc = data_flow.ConditionalAccumulator(hb.float32, shape=[])
        vals = hb.constant(np.array([7, 8], np.int64))
        enq = q.enqueue_many(vals)
        deq = q.dequeue()
        took = acc.take_grad(2)  # built first: in this schedule it starts before the applies
        g1, g2 = hb.constant(np.float32(1.0)), hb.constant(np.float32(3.0))
        applies = [acc.apply_grad(g1, 0), acc.apply_grad(g2, 0)]
        config = hb.ConfigProto(inter_op_parallelism_threads=0, operation_timeout_in_ms=TIMEOUT_MS)
        with hb.Session(config=config) as sess:
            got = sess.run([deq, took, enq, *applies])
            assert (int(got[0]), float(got[1])) == (7, 2.0)
            assert sess.run(q.size()) == 1
            # many steps waiting at once, all served by one enqueue from the main thread
            waiting = [in_thread(sess.run, deq) for _ in range(6)]
            wait_for(lambda: sum(1 for k, _ in waited if k == "dequeue") == 7, "dequeues")
            assert sum(1 for k, w in waited if k == "dequeue" and w) >= 5  # 8 served one at once
            sess.run(q.enqueue_many(np.arange(5, dtype=np.int64)))
            join(*waiting)
            assert sess.run(q.size()) == 0
    assert ("dequeue", True) in waited and ("take", True) in waited


def test_init_tokens_op_counts_and_rejects_too_few():
    """get_init_tokens_op(-1) enqueues replicas_to_aggregate tokens (the global step); asking for
    fewer than replicas_to_aggregate - total_num_replicas raises."""
    with hb.Graph().as_default():
        w, gs, opts, trains = build(1, 3, total=2)
        init_tokens = opts[0].get_init_tokens_op()
        with pytest.raises(ValueError, match=r"too few tokens.*0 \(given\) vs 1"):
            opts[0].get_init_tokens_op(0)
        sess = start(opts)
        sess.run(init_tokens)
        q = opts[0]._sync_token_queue
        assert sess.run(q.size()) == 3
        assert sess.run(q.dequeue()) == 0
        sess.close()


def test_apply_gradients_needs_a_global_step_and_get_init_tokens_needs_apply():
    """No global step is a ValueError, as is asking for init tokens before apply_gradients."""
    with hb.Graph().as_default():
        w = hb.Variable(W0)
        opt = hb.train.SyncReplicasOptimizer(hb.train.GradientDescentOptimizer(LR), 2)
        with pytest.raises(ValueError, match="apply_gradients"):
            opt.get_init_tokens_op()
        loss = hb.reduce_mean(hb.square(w))
        with pytest.raises(ValueError, match="global_step is required"):
            opt.minimize(loss)


def test_hook_runs_init_tokens_once_and_the_chief_sync_loop():
    """MonitoredTrainingSession with the chief's hook: one replica, no init tokens, lockstep;
    after 3 global steps w equals 3 SGD steps and closing stops the sync thread."""
    with hb.Graph().as_default():
        w, gs, opts, trains = build(1, 1)
        hook = opts[0].make_session_run_hook(is_chief=True, num_tokens=0)
        stop = hb.train.StopAtStepHook(last_step=3)
        config = hb.ConfigProto(operation_timeout_in_ms=TIMEOUT_MS)
        with hb.train.MonitoredTrainingSession(hooks=[hook, stop], config=config) as mts:
            while not mts.should_stop():
                mts.run(trains[0])
            assert int(mts.raw_session().run(gs)) == 3
            got = mts.raw_session().run(w)
        ref = W0.copy()
        for _ in range(3):
            ref -= LR * grad(ref, *DATA[0])
        np.testing.assert_allclose(got, ref, rtol=1e-12)
        runner = hook._runner
        assert not runner._thread.is_alive() and runner.exceptions == []


@pytest.fixture
def cluster():
    """In-process gRPC servers: one PS task and two worker tasks, stopped at the end."""
    import socket

    def free_port():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    spec = hb.train.ClusterSpec(
        {
            "ps": [f"127.0.0.1:{free_port()}"],
            "worker": [f"127.0.0.1:{free_port()}" for _ in range(2)],
        }
    )
    servers = {
        (job, i): hb.train.Server(spec, job, i)
        for job in ("ps", "worker")
        for i in range(spec.num_tasks(job))
    }
    yield spec, servers
    for s in servers.values():
        s.stop(grace=0)


def test_two_workers_through_grpc_match_synchronous_sgd(cluster):
    """Between-graph replication over gRPC (accumulators and token queue on the PS): two workers
    aggregating 2 give k SGD steps on the average gradient."""
    spec, servers = cluster
    k = 3
    workers = []
    for i in range(2):
        g = hb.Graph()
        setter = hb.train.replica_device_setter(cluster=spec, worker_device=f"/job:worker/task:{i}")
        with g.as_default(), hb.device(setter):
            gs = hb.train.get_or_create_global_step()
            w = hb.Variable(W0, name="w")
            x, y = DATA[i]
            loss = hb.reduce_mean(hb.square(hb.matmul(hb.constant(x), w) - hb.constant(y)))
            opt = hb.train.SyncReplicasOptimizer(hb.train.GradientDescentOptimizer(LR), 2)
            train = opt.minimize(loss, global_step=gs)
            inits = [hb.global_variables_initializer(), hb.local_variables_initializer()]
        config = hb.ConfigProto(operation_timeout_in_ms=TIMEOUT_MS)
        sess = hb.Session(servers[("worker", i)].target, graph=g, config=config)
        workers.append((sess, w, gs, opt, train, inits))
    try:
        chief_sess, w, gs, chief_opt, _, chief_inits = workers[0]
        chief_sess.run(chief_inits[0])
        chief_sess.run(chief_opt.chief_init_op)
        for sess, _, _, opt, _, inits in workers:
            sess.run(inits[1])
            sess.run(opt.local_step_init_op)
        sync = in_thread(lambda: [chief_sess.run(chief_opt.chief_sync_op) for _ in range(k)])
        steps = [
            in_thread(lambda s=sess, t=train: [s.run(t) for _ in range(k)])
            for sess, _, _, _, train, _ in workers
        ]
        join(sync, *steps)
        ref = W0.copy()
        for _ in range(k):
            ref -= LR * (grad(ref, *DATA[0]) + grad(ref, *DATA[1])) / 2
        np.testing.assert_allclose(workers[1][0].run(workers[1][1]), ref, rtol=1e-12)
        assert int(chief_sess.run(gs)) == k
        assert "/job:ps" in chief_opt._accumulators[0].accumulator_ref.op.device
        assert "/job:ps" in chief_opt._sync_token_queue.queue_ref.op.device
        assert "/job:worker/task:0" in chief_opt._local_step.op.device
    finally:
        for sess, *_ in workers:
            sess.close()


def test_a_timed_out_dequeue_does_not_swallow_the_next_element():
    """A dequeue whose step times out is withdrawn: the next element goes to a live step."""
    with hb.Graph().as_default():
        q = data_flow.FIFOQueue(-1, hb.int64, shapes=())
        deq = q.dequeue()
        enq = q.enqueue_many(hb.constant(np.array([42], np.int64)))
        config = hb.ConfigProto(operation_timeout_in_ms=200)
        with hb.Session(config=config) as sess:
            with pytest.raises(hb.errors.DeadlineExceededError):
                sess.run(deq)
            sess.run(enq)
            assert int(sess.run(deq)) == 42


def test_closing_the_session_fails_a_waiting_take():
    """Closing a session aborts a step blocked in a take instead of leaving it waiting forever."""
    with hb.Graph().as_default():
        acc = data_flow.ConditionalAccumulator(hb.float32, shape=[])
        took = acc.take_grad(1)
        sess = hb.Session()
        errors = []

        def run():
            try:
                sess.run(took)
            except hb.errors.OpError as e:
                errors.append(e)

        t = threading.Thread(target=run)
        t.start()
        wait_for(lambda: len(sess._active) == 1, "the take to start waiting")
        sess.close()
        t.join(timeout=10)
        assert not t.is_alive() and errors and "closed" in str(errors[0])
