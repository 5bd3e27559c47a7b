"""tf.while_loop with execution frames (Enter, Merge, Switch, LoopCond, NextIteration, Exit):
values against numpy, gradients against finite differences, nesting with loops and conds,
shape invariants, maximum_iterations, errors, simulated runs, and TensorFlow itself."""

import collections

import numpy as np
import pytest

import hetbed.compat.v1 as tf


def _run(fetches, feed=None, init=False):
    with tf.Session() as s:
        if init:
            s.run(tf.global_variables_initializer())
        return s.run(fetches, feed)


def test_counter_and_product_against_numpy():
    with tf.Graph().as_default():
        n = tf.placeholder(tf.int32, [])
        x0 = tf.placeholder(tf.float32, [3])
        i, x = tf.while_loop(lambda i, x: i < n, lambda i, x: (i + 1, x * 1.5 + 1.0), [0, x0])
        xv = np.array([1.0, -2.0, 0.5], np.float32)
        for k in (0, 1, 7):  # zero iterations: the initial values come out
            want = xv.copy()
            for _ in range(k):
                want = want * 1.5 + 1.0
            got = _run([i, x], {n: k, x0: xv})
            assert got[0] == k
            np.testing.assert_allclose(got[1], want, rtol=1e-6)


def test_structures_captured_tensors_and_a_single_variable():
    Pair = collections.namedtuple("Pair", "a b")
    with tf.Graph().as_default():
        w = tf.constant(np.float32(0.5))  # captured from outside: entered once, every iteration
        out = tf.while_loop(
            lambda p: p.a < 10.0, lambda p: Pair(p.a + p.b * w, p.b + 1.0), [Pair(0.0, 1.0)]
        )
        single = tf.while_loop(lambda v: v < 100, lambda v: v * 3, [1])
        d = tf.while_loop(
            lambda s: s["k"] < 4,
            lambda s: {"k": s["k"] + 1, "v": s["v"] * 2.0},
            [{"k": 0, "v": tf.ones([2])}],
        )
        got = _run([out, single, d])
    a, b = 0.0, 1.0
    while a < 10.0:
        a, b = a + b * 0.5, b + 1.0
    assert isinstance(got[0], Pair) and got[0] == pytest.approx(Pair(a, b))
    assert got[1] == 243
    assert got[2]["k"] == 4 and got[2]["v"].tolist() == [16.0, 16.0]


def test_nested_loops_and_conds_inside_loops():
    """An inner loop runs anew in every iteration of the outer one; a cond in the body takes
    its branch per iteration; a loop in an untaken branch does not run."""
    with tf.Graph().as_default():

        def outer_body(i, acc):
            inner = tf.while_loop(lambda j, s: j < i, lambda j, s: (j + 1, s + j), [0, 0])[1]
            step = tf.cond(tf.equal(i % 2, 0), lambda: inner * 10, lambda: inner)
            return i + 1, acc + step

        _, total = tf.while_loop(lambda i, a: i < 6, outer_body, [0, 0])
        flag = tf.placeholder(tf.bool, [])
        r = tf.cond(
            flag,
            lambda: tf.while_loop(lambda k: k < 5, lambda k: k + 2, [tf.constant(0)]),
            lambda: tf.constant(-1),
        )
        with tf.Session() as s:
            got = s.run(total)
            assert s.run(r, {flag: True}) == 6 and s.run(r, {flag: False}) == -1
    want = sum((10 if i % 2 == 0 else 1) * sum(range(i)) for i in range(6))
    assert got == want


def test_shape_invariants_and_maximum_iterations():
    with tf.Graph().as_default():
        x = tf.zeros([0, 2])
        grown = tf.while_loop(
            lambda x: tf.shape(x)[0] < 5,
            lambda x: tf.concat([x, tf.ones([1, 2])], 0),
            [x],
            shape_invariants=[tf.TensorShape([None, 2])],
        )
        assert grown.shape.as_list() == [None, 2]
        capped = tf.while_loop(lambda v: v < 1000, lambda v: v + 1, [0], maximum_iterations=7)
        with pytest.raises(tf.errors.InvalidArgumentError, match="shape_invariants"):
            tf.while_loop(
                lambda x: tf.shape(x)[0] < 5, lambda x: tf.concat([x, tf.ones([1, 2])], 0), [x]
            )
        got = _run([grown, capped])
    assert got[0].shape == (5, 2) and got[1] == 7


def _numeric_grad(f, x, eps=1e-4):
    g = np.zeros_like(x, dtype=np.float64)
    it = np.nditer(x, flags=["multi_index"])
    for _ in it:
        k = it.multi_index
        xp, xm = x.astype(np.float64).copy(), x.astype(np.float64).copy()
        xp[k] += eps
        xm[k] -= eps
        g[k] = (f(xp) - f(xm)) / (2 * eps)
    return g


def test_gradients_through_a_loop_match_finite_differences():
    """An RNN-like loop x <- tanh(W x + b), 5 steps: gradients of a loss of the last state with
    respect to W (captured), b (captured) and x0 (a loop variable) match finite differences."""
    rng = np.random.default_rng(1)
    wv = (rng.standard_normal((3, 3)) * 0.6).astype(np.float32)
    bv = rng.standard_normal(3).astype(np.float32) * 0.1
    xv = rng.standard_normal(3).astype(np.float32)

    def f(w, b, x):
        x = x.astype(np.float64)
        for _ in range(5):
            x = np.tanh(w @ x + b)
        return float((x**2).sum() + x[0])

    with tf.Graph().as_default():
        x0 = tf.placeholder(tf.float32, [3])
        w = tf.Variable(wv)
        b = tf.Variable(bv)

        def body(i, x):
            h = tf.reshape(tf.matmul(w, tf.reshape(x, [3, 1])), [3]) + b
            return i + 1, tf.tanh(h)

        _, xn = tf.while_loop(lambda i, x: i < 5, body, [0, x0])
        loss = tf.reduce_sum(xn * xn) + xn[0]
        gw, gb, gx = tf.gradients(loss, [w, b, x0])
        got = _run([loss, gw, gb, gx], {x0: xv}, init=True)
    assert got[0] == pytest.approx(f(wv, bv, xv), rel=1e-5)
    np.testing.assert_allclose(got[1], _numeric_grad(lambda w: f(w, bv, xv), wv), atol=1e-5)
    np.testing.assert_allclose(got[2], _numeric_grad(lambda b: f(wv, b, xv), bv), atol=1e-5)
    np.testing.assert_allclose(got[3], _numeric_grad(lambda x: f(wv, bv, x), xv), atol=1e-5)


def test_gradient_of_nested_loops_and_of_a_cond_in_the_body():
    """y = prod over i<3 of (sum over j<=i of x * c_j) with a cond choosing c_j: the gradient
    through both loops and the cond matches finite differences."""
    xv = np.float32(0.7)

    def f(x):
        y = 1.0
        for i in range(3):
            s = 0.0
            for j in range(i + 1):
                s += x * (2.0 if j % 2 == 0 else -1.0)
            y *= s + 1.0
        return y

    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [])

        def inner(i):
            def b(j, s):
                c = tf.cond(tf.equal(j % 2, 0), lambda: tf.constant(2.0), lambda: tf.constant(-1.0))
                return j + 1, s + x * c

            return tf.while_loop(lambda j, s: j <= i, b, [0, 0.0])[1]

        _, y = tf.while_loop(
            lambda i, y: i < 3, lambda i, y: (i + 1, y * (inner(i) + 1.0)), [0, 1.0]
        )
        (gx,) = tf.gradients(y, [x])
        got = _run([y, gx], {x: xv})
    assert got[0] == pytest.approx(f(float(xv)), rel=1e-5)
    num = (f(float(xv) + 1e-4) - f(float(xv) - 1e-4)) / 2e-4
    assert got[1] == pytest.approx(num, rel=1e-3)


def test_training_through_a_loop_against_numpy():
    """A linear recurrence h <- a*h + x_t over a fed sequence, trained by gradient descent on a
    and the initial h; every update equals numpy's."""
    rng = np.random.default_rng(2)
    seq = rng.standard_normal(6).astype(np.float32)
    target = np.float32(0.3)
    with tf.Graph().as_default():
        xs = tf.constant(seq)
        a = tf.Variable(np.float32(0.5))
        h0 = tf.Variable(np.float32(0.1))
        _, h = tf.while_loop(
            lambda t, h: t < 6, lambda t, h: (t + 1, a * h + tf.gather(xs, t)), [0, h0.value()]
        )
        loss = tf.square(h - target)
        train = tf.train.GradientDescentOptimizer(0.05).minimize(loss)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            for _ in range(5):
                s.run(train)
            got = s.run([a, h0])
    av, hv = 0.5, 0.1
    for _ in range(5):
        hs = [hv]
        for x in seq:
            hs.append(av * hs[-1] + float(x))
        d = 2 * (hs[-1] - float(target))
        da = dh = 0.0
        g = d
        for t in range(5, -1, -1):  # h_{t+1} = a h_t + x_t
            da += g * hs[t]
            g *= av
        dh = g
        av, hv = av - 0.05 * da, hv - 0.05 * dh
    assert got[0] == pytest.approx(av, rel=1e-4) and got[1] == pytest.approx(hv, rel=1e-4)


def test_errors_name_the_problem():
    with tf.Graph().as_default():
        with pytest.raises(tf.errors.InvalidArgumentError, match="2 values for 1"):
            tf.while_loop(lambda v: v < 3, lambda v: (v + 1, v), [0])
        with pytest.raises(tf.errors.InvalidArgumentError, match="enters as int32.*float32"):
            tf.while_loop(lambda v: v < 3, lambda v: tf.cast(v, tf.float32), [0])
        with pytest.raises(tf.errors.InvalidArgumentError, match="scalar bool"):
            tf.while_loop(lambda v: v, lambda v: v + 1, [0])
        with pytest.raises(TypeError, match="callables"):
            tf.while_loop(None, lambda v: v, [0])


def test_simulated_loops_run_their_real_trip_count():
    """In a shape-only simulation a loop whose condition is integer arithmetic runs its real
    number of iterations: the step takes that many times the body's matmul."""
    from hetbed.devices.costmodel import DevicePerf
    from hetbed.simulator import Cluster, SimSession, sim_value

    perf = DevicePerf("toy", {"float32": 1e12}, memory_bandwidth=1e15, launch_overhead_s=0.0)
    times = []
    for trips in (2, 6):
        c = Cluster()
        c.add_task("worker", 0, cpu=None, gpu=(perf, 1))
        g = tf.Graph()
        with g.as_default():
            x = tf.placeholder(tf.float32, [256, 256])
            _, y = tf.while_loop(
                lambda i, y, n=trips: i < n, lambda i, y: (i + 1, tf.matmul(y, y)), [0, x]
            )
            s = SimSession(c, graph=g)
        s.run(y, {x: sim_value([256, 256])})
        times.append(s.step_times[-1])
    mm = 2 * 256**3 / 1e12
    assert times[0] == pytest.approx(2 * mm, rel=0.05) and times[1] == pytest.approx(
        6 * mm, rel=0.05
    )


def test_same_as_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    tf1.disable_eager_execution()
    rng = np.random.default_rng(3)
    wv = (rng.standard_normal((4, 4)) * 0.5).astype(np.float32)
    xv = rng.standard_normal((2, 4)).astype(np.float32)

    def program(tf):
        with tf.Graph().as_default():
            x = tf.placeholder(tf.float32, [None, 4])
            w = tf.Variable(wv)
            n = tf.placeholder(tf.int32, [])

            def body(i, h, acc):
                h = tf.nn.relu(tf.matmul(h, w)) + 0.1
                return i + 1, h, acc + tf.reduce_sum(h)

            _, h, acc = tf.while_loop(lambda i, h, a: i < n, body, [0, x, 0.0])
            loss = tf.reduce_mean(h) + 0.01 * acc
            gw, gx = tf.gradients(loss, [w, x])
            with tf.Session() as s:
                s.run(tf.global_variables_initializer())
                return [s.run([loss, gw, gx], {x: xv, n: k}) for k in (0, 3)]

    want, got = program(tf1), program(tf)
    for a, b in zip(want, got):
        np.testing.assert_allclose(b[0], a[0], rtol=1e-5)
        if a[1] is None:
            assert b[1] is None or not np.any(b[1])
        else:
            np.testing.assert_allclose(b[1], a[1], rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(b[2], a[2], rtol=1e-4, atol=1e-6)


def test_a_loop_on_a_worker_reading_a_variable_on_a_ps_task():
    """A distributed session: the loop runs on the worker, its body reads a variable held by
    the PS task (the value enters the loop once, after the Recv), and its gradient reaches the
    variable: the same numbers as numpy."""
    servers = _ps_and_worker()
    try:
        with tf.Graph().as_default():
            with tf.device("/job:ps/task:0"):
                w = tf.Variable(np.float32(0.5))
            with tf.device("/job:worker/task:0"):
                x = tf.placeholder(tf.float32, [3])
                _, y = tf.while_loop(lambda i, y: i < 4, lambda i, y: (i + 1, y * w + 1.0), [0, x])
                loss = tf.reduce_sum(y)
                (gw,) = tf.gradients(loss, [w])
            with tf.Session(servers[1].target) as s:
                s.run(tf.global_variables_initializer())
                got = s.run([y, gw], {x: np.ones(3, np.float32)})
    finally:
        for s in servers:
            s.stop(grace=0)

    def f(wv):
        v = np.ones(3)
        for _ in range(4):
            v = v * wv + 1.0
        return v

    np.testing.assert_allclose(got[0], f(0.5), rtol=1e-6)
    assert got[1] == pytest.approx((f(0.5 + 1e-5).sum() - f(0.5 - 1e-5).sum()) / 2e-5, rel=1e-4)


def _fast_path_runs(monkeypatch):
    """Count the fast path's runs (runtime/frame_step.py ``_LoopRunner``)."""
    from hetbed.runtime import frame_step

    runs = []
    orig = frame_step._LoopRunner.fn

    def fn(self, ctx):
        runs.append(self.plan.conds)
        return orig(self, ctx)

    monkeypatch.setattr(frame_step._LoopRunner, "fn", fn)
    return runs


def test_the_fast_path_gives_what_the_general_path_gives(monkeypatch):
    """Simple loops (with or without a cond inside) run their later iterations on the fast
    path; values, gradients (a backward loop) and a variable updated in the body (once per
    iteration) are the same as on the general path, which an observed step takes."""
    from hetbed.runtime import frames
    from hetbed.runtime.executor import StepObserver

    runs = _fast_path_runs(monkeypatch)
    rng = np.random.default_rng(3)
    wv = (rng.standard_normal((3, 3)) * 0.5).astype(np.float32)
    with tf.Graph().as_default():
        n = tf.placeholder(tf.int32, [])
        x0 = tf.placeholder(tf.float32, [3])
        w = tf.Variable(wv)
        hits = tf.Variable(0)

        def body(i, x):
            h = tf.reshape(tf.matmul(w, tf.reshape(x, [3, 1])), [3])
            h = tf.cond(tf.equal(i % 3, 0), lambda: tf.tanh(h), lambda: h * 0.5)
            with tf.control_dependencies([tf.assign_add(hits, 1)]):
                return i + 1, tf.identity(h)

        _, xn = tf.while_loop(lambda i, x: i < n, body, [0, x0])
        gw, gx = tf.gradients(tf.reduce_sum(xn * xn), [w, x0])
        _, plain = tf.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v * 1.5 - 1.0), [0, 2.0])
        fetches = [xn, gw, gx, plain]
        feed = {n: 7, x0: rng.standard_normal(3).astype(np.float32)}
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            fast = s.run(fetches, feed)
            fast_hits = s.run(hits)
            assert sorted(set(runs)) == [False, True]  # both kinds of fast path ran
            del runs[:]
            s.run(tf.global_variables_initializer())
            s.run_observed(fetches, feed, lambda prep, feeds: StepObserver())
            assert not runs and s.run(hits) == fast_hits
        monkeypatch.setattr(frames, "_fast_plan", lambda *a: None)
        with tf.Session() as s:  # a fresh session prepares the graph without fast paths
            s.run(tf.global_variables_initializer())
            general = s.run(fetches, feed)
            assert not runs and s.run(hits) == fast_hits
    assert fast_hits == 7  # once per iteration (the gradient reads the forward loop's stacks)
    for a, b in zip(fast, general):
        np.testing.assert_array_equal(a, b)
    x = feed[x0].astype(np.float64)
    for i in range(7):
        x = wv @ x
        x = np.tanh(x) if i % 3 == 0 else x * 0.5
    np.testing.assert_allclose(fast[0], x, rtol=1e-5)
    assert fast[3] == pytest.approx(2.0 * 1.5**7 - sum(1.5**k for k in range(7)))


def test_an_op_failing_on_the_fast_path_is_named(monkeypatch):
    runs = _fast_path_runs(monkeypatch)
    with tf.Graph().as_default():
        table = tf.constant([1.0, 2.0, 3.0])
        _, total = tf.while_loop(
            lambda i, t: i < 5,
            lambda i, t: (i + 1, t + tf.gather(table, i, name="lookup")),
            [0, 0.0],
        )
        with tf.Session() as s:
            with pytest.raises(tf.errors.InvalidArgumentError, match="lookup"):
                s.run(total)
    assert runs  # the failure happened on the fast path (iteration 4, index 3)


def test_a_loop_across_two_devices_of_one_process():
    """The body's multiply runs on cpu:1, the loop's control on cpu:0: Send/Recv inside the
    frame carry values (and, in the last iteration, dead ones) each iteration; an inner loop
    across devices runs anew in every outer iteration; gradients flow back across both."""
    config = tf.ConfigProto(device_count={"CPU": 2})
    with tf.Graph().as_default():
        w = tf.placeholder(tf.float32, [])

        def body(i, x):
            with tf.device("/cpu:1"):
                y = x * w + 1.0
            return i + 1, y

        def outer(k, acc):
            def inner(j, s):
                with tf.device("/cpu:1"):
                    return j + 1, s + tf.cast(j, tf.float32) * w

            return k + 1, acc + tf.while_loop(lambda j, s: j < k, inner, [0, 0.0])[1]

        with tf.device("/cpu:0"):
            _, x = tf.while_loop(lambda i, x: i < 5, body, [0, tf.constant(1.0)])
            (g,) = tf.gradients(x, [w])
            _, total = tf.while_loop(lambda k, a: k < 4, outer, [0, 0.0])
        with tf.Session(config=config) as s:
            for wv in (1.5, -0.5):  # the rendezvous keys come round every iteration and step
                got = s.run([x, g, total], {w: wv})
                want = sum(wv**k for k in range(6))
                assert got[0] == pytest.approx(want, rel=1e-6)
                assert got[1] == pytest.approx(
                    sum(k * wv ** (k - 1) for k in range(1, 6)), rel=1e-6
                )
                assert got[2] == pytest.approx(wv * sum(j for k in range(4) for j in range(k)))


def _worker_loop_with_a_ps_body(w, parallel: int = 10):
    """``y = y * w + 1`` five times from 1: the loop on the worker, the body on the PS."""
    with tf.device("/job:worker/task:0"):

        def body(i, y):
            with tf.device("/job:ps/task:0"):
                z = y * w + 1.0
            return i + 1, z

        return tf.while_loop(lambda i, y: i < 5, body, [0, 1.0], parallel_iterations=parallel)[1]


def _spanning_loops(parallel: int):
    """A loop on the worker whose body runs on the PS, its gradient, and an outer loop on the
    worker whose inner loop runs on the PS."""
    w = tf.placeholder(tf.float32, [])
    y = _worker_loop_with_a_ps_body(w, parallel)
    with tf.device("/job:worker/task:0"):
        (gw,) = tf.gradients(y, [w])

        def outer(k, acc):
            with tf.device("/job:ps/task:0"):
                inner = tf.while_loop(
                    lambda j, s: j < k,
                    lambda j, s: (j + 1, s + tf.cast(j, tf.float32) * w),
                    [0, 0.0],
                )[1]
            return k + 1, acc + inner

        _, total = tf.while_loop(lambda k, a: k < 4, outer, [0, 0.0])
    return w, y, gw, total


def test_loops_spanning_two_tasks():
    """A loop on the worker whose body multiplies on the PS task; an outer loop on the worker
    whose inner loop runs on the PS; and the gradient of the first. The PS gets control loops
    fed the loop's predicate every iteration (partition._control_loops), and the tensors that
    cross carry the iteration in their rendezvous keys: the numbers are numpy's, for several
    steps and for one and several iterations in flight."""
    servers = _ps_and_worker()
    try:
        for parallel in (1, 10):
            with tf.Graph().as_default():
                w, y, gw, total = _spanning_loops(parallel)
                with tf.Session(servers[1].target) as s:
                    for wv in (1.5, -0.5):
                        got = s.run([y, gw, total], {w: wv})
                        want = sum(wv**k for k in range(6))
                        assert got[0] == pytest.approx(want, rel=1e-6)
                        assert got[1] == pytest.approx(
                            sum(k * wv ** (k - 1) for k in range(1, 6)), rel=1e-5
                        )
                        assert got[2] == pytest.approx(
                            wv * sum(j for k in range(4) for j in range(k)), rel=1e-6
                        )
    finally:
        for s in servers:
            s.stop(grace=0)


def test_a_simulated_loop_across_two_gpus_pays_its_transfers_every_iteration():
    """Shape-only simulation of a loop whose body runs on gpu:1 and its control on gpu:0: each
    iteration costs the matmul plus the two transfers, the same for every iteration."""
    from hetbed.devices.costmodel import DevicePerf
    from hetbed.simulator import Cluster, SimSession, sim_value

    perf = DevicePerf("toy", {"float32": 1e12}, memory_bandwidth=1e15, launch_overhead_s=0.0)
    times = []
    for trips in (2, 4, 6):
        c = Cluster()
        c.add_task("worker", 0, cpu=None, gpu=(perf, 2))
        g = tf.Graph()
        with g.as_default():
            x = tf.placeholder(tf.float32, [256, 256])

            def body(i, y):
                with tf.device("/gpu:1"):
                    z = tf.matmul(y, y)
                return i + 1, z

            with tf.device("/gpu:0"):
                _, y = tf.while_loop(lambda i, y, n=trips: i < n, body, [0, x])
            s = SimSession(c, graph=g)
        s.run(y, {x: sim_value([256, 256])})
        times.append(s.step_times[-1])
    mm = 2 * 256**3 / 1e12
    per = (times[2] - times[0]) / 4
    assert times[1] - times[0] == pytest.approx(times[2] - times[1], rel=1e-6)
    assert per > 1.2 * mm  # the matmul and 2 x 256 KiB over the GPUs' link


def test_a_simulated_loop_spanning_two_tasks_sends_its_predicate_every_iteration():
    """In a simulated cluster too, the PS task running the body gets a control loop: the loop's
    predicate crosses to it once per iteration (the last one false), each a 1-byte tensor, and
    the values (hybrid mode) are numpy's."""
    from hetbed.simulator import Cluster, SimSession

    c = Cluster(hybrid=True)
    c.add_task("worker", 0)
    c.add_task("ps", 0)
    g = tf.Graph()
    with g.as_default():
        w = tf.placeholder(tf.float32, [])
        y = _worker_loop_with_a_ps_body(w)
        s = SimSession(c, graph=g)
    assert s.run(y, {w: 1.5}) == pytest.approx(sum(1.5**k for k in range(6)))
    flows = s.last_record.flows
    preds = flows[flows.tag == "while/LoopCond:0"]
    assert len(preds) == 6 and set(preds.bytes) == {1}
    assert preds.dst.str.contains("/job:ps/").all()


def test_a_loop_spanning_tasks_that_fails_midway_fails_its_step_and_the_next_runs():
    """An Assert in the PS's part of the body fails in the third iteration: the step fails
    naming it (no hang: the worker's keyed receives are aborted), and the next step, with a
    value that passes, runs to the numpy result on the same servers."""
    servers = _ps_and_worker()
    try:
        with tf.Graph().as_default():
            w = tf.placeholder(tf.float32, [])
            with tf.device("/job:worker/task:0"):

                def body(i, y):
                    with tf.device("/job:ps/task:0"):
                        ok = tf.Assert(y < 10.0, [y], name="small_enough")
                        with tf.control_dependencies([ok]):
                            z = y * w + 1.0
                    return i + 1, z

                _, y = tf.while_loop(lambda i, y: i < 5, body, [0, 1.0])
            config = tf.ConfigProto(operation_timeout_in_ms=20000)
            with tf.Session(servers[1].target, config=config) as s:
                with pytest.raises(tf.errors.InvalidArgumentError, match="small_enough"):
                    s.run(y, {w: 3.0})  # 1, 4, 13: the third iteration's check fails
                assert s.run(y, {w: 0.5}) == pytest.approx(sum(0.5**k for k in range(6)))
    finally:
        for s in servers:
            s.stop(grace=0)


def _ps_and_worker():
    """In-process servers of a /job:ps task and a /job:worker task on free loopback ports."""
    import socket

    import hetbed as hb
    from hetbed.runtime.distributed.cluster import ClusterSpec

    def free_port():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    spec = ClusterSpec({"ps": [f"127.0.0.1:{free_port()}"], "worker": [f"127.0.0.1:{free_port()}"]})
    return [hb.train.Server(spec, job, 0) for job in ("ps", "worker")]
