"""hb.cond / hb.case from Switch and Merge with dead tensors (ops/cond.py, control_flow.py):
values, only the taken branch runs, gradients, nesting, structures, devices, the simulator,
errors; a differential check against TensorFlow when it is installed."""

from __future__ import annotations

import numpy as np
import pytest

import hetbed as hb
from hetbed.simulator import Cluster, SimSession, sim_value

X = np.array([1.0, -2.0, 3.0], np.float32)


def _fd(f, x, eps=1e-3):
    g = np.zeros_like(x, dtype=np.float64)
    for i in range(x.size):
        d = np.zeros_like(x)
        d.flat[i] = eps
        g.flat[i] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


def test_values_and_gradients_of_each_branch():
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [3])
        p = hb.placeholder(hb.bool_, [])
        y = hb.cond(p, lambda: hb.square(x) * 2.0, lambda: hb.tanh(x) + 10.0)
        loss = hb.reduce_sum(y * y)
        (gx,) = hb.gradients(loss, [x])
        with hb.Session() as s:
            for taken, f in [(True, lambda v: 2 * v**2), (False, lambda v: np.tanh(v) + 10)]:
                yv, gv = s.run([y, gx], {x: X, p: taken})
                np.testing.assert_allclose(yv, f(X), rtol=1e-6)
                num = _fd(lambda v, f=f: float(np.sum(f(v.astype(np.float64)) ** 2)), X)
                np.testing.assert_allclose(gv, num, rtol=1e-3)


def test_only_the_taken_branch_runs():
    """Side effects happen only in the taken branch, and an untaken branch that would fail
    (a reshape to the wrong size) does not."""
    with hb.Graph().as_default():
        count = hb.Variable(np.zeros((), np.float32), name="count")
        x = hb.placeholder(hb.float32, [None])
        p = hb.placeholder(hb.bool_, [])

        def counted():
            with hb.control_dependencies([hb.assign_add(count, 1.0)]):
                return hb.identity(x) * 3.0

        y = hb.cond(p, counted, lambda: hb.reshape(x, [7]) * 0.0 + 1.0)
        with hb.Session() as s:
            s.run(count.initializer)
            xv = np.arange(6, dtype=np.float32)
            np.testing.assert_array_equal(s.run(y, {x: xv, p: True}), xv * 3)
            np.testing.assert_array_equal(s.run(y, {x: xv, p: True}), xv * 3)
            with pytest.raises(hb.errors.InvalidArgumentError, match="Reshape"):
                s.run(y, {x: xv, p: False})  # the other branch does run, and fails
            assert s.run(count) == 2.0


def test_nested_structures_constants_and_case():
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [3])
        a = hb.placeholder(hb.bool_, [])
        b = hb.placeholder(hb.bool_, [])
        out = hb.cond(
            a,
            lambda: {"v": x * 2.0, "t": (hb.constant(1), x)},
            lambda: {
                "v": hb.cond(b, lambda: x + 1.0, lambda: hb.constant([7.0, 7.0, 7.0])),
                "t": (hb.constant(2), -x),
            },
        )
        picked = hb.case(
            [(a, lambda: hb.constant(10.0)), (b, lambda: hb.constant(20.0))],
            default=lambda: hb.constant(30.0),
        )
        with hb.Session() as s:
            for av, bv in [(True, True), (True, False), (False, True), (False, False)]:
                got, c = s.run([out, picked], {x: X, a: av, b: bv})
                if av:
                    want_v, want_t = X * 2, (1, X)
                else:
                    want_v, want_t = (X + 1 if bv else np.full(3, 7.0)), (2, -X)
                np.testing.assert_allclose(got["v"], want_v)
                assert got["t"][0] == want_t[0]
                np.testing.assert_allclose(got["t"][1], want_t[1])
                assert c == (10.0 if av else 20.0 if bv else 30.0)


def test_training_through_a_cond_matches_numpy():
    """GD on loss = cond(p, w^2, 3w) alternating p: each step's update follows the branch."""
    with hb.Graph().as_default():
        w = hb.Variable(np.float32(2.0), name="w")
        p = hb.placeholder(hb.bool_, [])
        loss = hb.cond(p, lambda: w * w, lambda: 3.0 * w)
        train = hb.train.GradientDescentOptimizer(0.1).minimize(loss)
        with hb.Session() as s:
            s.run(w.initializer)
            want = 2.0
            for i in range(6):
                taken = i % 2 == 0
                s.run(train, {p: taken})
                want -= 0.1 * (2 * want if taken else 3.0)
                assert s.run(w) == pytest.approx(want, rel=1e-6)


def test_branches_on_other_devices():
    """Dead tensors cross devices as dead values (Send/Recv), live ones as usual."""
    devs = ["/job:localhost/replica:0/task:0/device:cpu:1"]
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [3])
        p = hb.placeholder(hb.bool_, [])

        def on_other():
            with hb.device(devs[0]):
                return hb.exp(x) * 2.0

        y = hb.cond(p, on_other, lambda: x - 1.0)
        (gx,) = hb.gradients(hb.reduce_sum(y), [x])
        with hb.Session(config=hb.ConfigProto(virtual_devices=devs)) as s:
            np.testing.assert_allclose(s.run(y, {x: X, p: True}), np.exp(X) * 2, rtol=1e-6)
            np.testing.assert_allclose(s.run(gx, {x: X, p: True}), np.exp(X) * 2, rtol=1e-6)
            np.testing.assert_allclose(s.run(y, {x: X, p: False}), X - 1)
            placed = s.placement(y)
            assert "_Send" in set(placed.type)


def test_errors_name_the_problem():
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [3])
        p = hb.placeholder(hb.bool_, [])
        with pytest.raises(hb.errors.InvalidArgumentError, match="pred must be a scalar bool"):
            hb.cond(x, lambda: x, lambda: x)
        with pytest.raises(hb.errors.InvalidArgumentError, match="same structure"):
            hb.cond(p, lambda: (x, x), lambda: x)
        with pytest.raises(hb.errors.InvalidArgumentError, match="float32.*int32"):
            hb.cond(p, lambda: x, lambda: hb.constant([1, 2, 3]))
        inner = []

        def keep():
            inner.append(x * 5.0)
            return inner[-1]

        hb.cond(p, keep, lambda: x)
        with hb.Session() as s:
            with pytest.raises(hb.errors.InvalidArgumentError, match="not computed.*cond"):
                s.run(inner[0], {x: X, p: False})
            np.testing.assert_allclose(s.run(inner[0], {x: X, p: True}), X * 5)


def test_simulated_cond_times_only_the_taken_branch():
    from hetbed.devices.costmodel import DevicePerf

    perf = DevicePerf("toy", {"float32": 1e12}, memory_bandwidth=100e9, memory_bytes=1e9)
    c = Cluster()
    c.add_task("worker", 0, cpu=perf, nic=(1e9, 1e-6))
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [256, 256])
        p = hb.placeholder(hb.bool_, [])
        y = hb.cond(p, lambda: hb.matmul(hb.matmul(x, x), x), lambda: x + 1.0)
        s = SimSession(c)
        s.run(y, {x: sim_value([256, 256]), p: np.array(True)})
        heavy = s.last_record.ops
        s.run(y, {x: sim_value([256, 256]), p: np.array(False)})
        light = s.last_record.ops
        assert (heavy.type == "MatMul").sum() == 2 and (light.type == "MatMul").sum() == 0
        mm = 2 * 256**3 / 1e12  # one matmul at the toy device's 1 TFLOP/s
        assert s.step_times[0] >= 2 * mm and s.step_times[1] < mm
        with pytest.raises(hb.errors.UnimplementedError, match="cannot decide the conditional"):
            s.run(y, {x: sim_value([256, 256]), p: sim_value([], "bool")})


def test_same_as_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    import hetbed.compat.v1 as hbtf

    rng = np.random.default_rng(0)
    xv = rng.standard_normal((4, 3)).astype(np.float32)
    wv = rng.standard_normal((3, 2)).astype(np.float32)

    def program(tf):
        g = tf.Graph()
        with g.as_default():
            x = tf.placeholder(tf.float32, [None, 3])
            flag = tf.placeholder(tf.bool, [])
            w = tf.Variable(wv)
            h = tf.cond(flag, lambda: tf.nn.relu(tf.matmul(x, w)), lambda: tf.tanh(tf.matmul(x, w)))
            loss = tf.reduce_mean(tf.square(h))
            gw = tf.gradients(loss, [w])[0]
            with tf.Session(graph=g) as s:
                s.run(tf.global_variables_initializer())
                return [s.run([loss, gw], {x: xv, flag: f}) for f in (True, False)]

    out = [program(tf1), program(hbtf)]
    for a, b in zip(out[0], out[1]):
        np.testing.assert_allclose(b[0], a[0], rtol=1e-5)
        np.testing.assert_allclose(b[1], a[1], rtol=1e-5, atol=1e-6)


def test_a_cond_whose_branches_run_on_another_task():
    """The predicate and the merge on the worker, each branch's work on the PS task: the untaken
    branch's tensors cross tasks as dead values (a header and no bytes), so only the taken
    branch runs there; values and gradients as on one task."""
    import socket

    import hetbed.compat.v1 as tf
    from hetbed.runtime.distributed.cluster import ClusterSpec

    def free_port():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    spec = ClusterSpec({"ps": [f"127.0.0.1:{free_port()}"], "worker": [f"127.0.0.1:{free_port()}"]})
    servers = [hb.train.Server(spec, job, 0) for job in ("ps", "worker")]
    try:
        with tf.Graph().as_default():
            with tf.device("/job:ps/task:0"):
                w = tf.Variable(np.float32(2.0))
                count = tf.Variable(0)
            with tf.device("/job:worker/task:0"):
                x = tf.placeholder(tf.float32, [])
                flag = tf.placeholder(tf.bool, [])

                def taken():
                    with tf.device("/job:ps/task:0"):
                        with tf.control_dependencies([tf.assign_add(count, 1)]):
                            return x * w * w

                def other():
                    with tf.device("/job:ps/task:0"):
                        return x + w

                y = tf.cond(flag, taken, other)
                (gw,) = tf.gradients(y, [w])
            with tf.Session(servers[1].target) as s:
                s.run(tf.global_variables_initializer())
                assert s.run([y, gw], {x: 3.0, flag: True}) == [12.0, 12.0]
                assert s.run([y, gw], {x: 3.0, flag: False}) == [5.0, 1.0]
                assert s.run(count) == 1  # the other branch's side effect ran when taken only
    finally:
        for s in servers:
            s.stop(grace=0)


def test_a_dead_tensor_on_the_wire_is_a_header_without_bytes():
    from hetbed.runtime.distributed.wire import InTensor, WireError, out_tensor
    from hetbed.runtime.registry import DEAD

    out = out_tensor(DEAD)
    assert out.header["dead"] is True and out.nbytes == 0 and len(out.payload) == 0
    assert InTensor(out.header, "t", 1 << 20).value() is DEAD
    with pytest.raises(WireError, match="'dead' must be a bool"):
        InTensor({**out.header, "dead": 1}, "t", 1 << 20)
    bad = {"dtype": "<f4", "shape": [2], "nbytes": 8, "scalar": False, "dead": True}
    with pytest.raises(WireError, match="on an empty tensor"):
        InTensor(bad, "t", 1 << 20)


def test_control_dependencies_in_a_branch_do_not_kill_a_captured_tensor():
    """A branch built under control_dependencies([side effect]) still leaves the captured
    tensor's Switch free of them: with the other branch taken, the gradient is that branch's
    (1), not a dead value."""
    import hetbed.compat.v1 as tf

    with tf.Graph().as_default():
        w = tf.Variable(np.float32(2.0))
        count = tf.Variable(0)
        flag = tf.placeholder(tf.bool, [])

        def taken():
            with tf.control_dependencies([tf.assign_add(count, 1)]):
                return w * w

        y = tf.cond(flag, taken, lambda: w + 1.0)
        (gw,) = tf.gradients(y, [w])
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            assert s.run([y, gw], {flag: False}) == [3.0, 1.0]
            assert s.run([y, gw], {flag: True}) == [4.0, 4.0]
            assert s.run(count) == 1
