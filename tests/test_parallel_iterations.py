"""Iterations of a while loop running in parallel (runtime/frames.py, parallel frames)."""

from __future__ import annotations

import numpy as np
import pytest

import hetbed.compat.v1 as tf
from hetbed.devices.costmodel import DevicePerf
from hetbed.simulator import Cluster, SimSession, sim_value

PERF = DevicePerf("toy", {"float32": 1e12}, memory_bandwidth=1e15, launch_overhead_s=0.0)
N = 512
MM = 2 * N**3 / 1e12  # one N x N matmul on the toy GPU


def _pipeline_time(trips: int, parallel: int) -> float:
    """A loop on gpu:0 whose body multiplies a captured matrix on gpu:1 and adds the product
    into the loop's accumulator back on gpu:0: the iterations only depend on each other
    through the counter and the accumulator."""
    c = Cluster()
    c.add_task("worker", 0, cpu=None, gpu=(PERF, 2))
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [N, N])

        def body(i, acc):
            with tf.device("/gpu:1"):
                h = tf.matmul(x, x)
            return i + 1, acc + h

        with tf.device("/gpu:0"):
            _, y = tf.while_loop(
                lambda i, acc: i < trips,
                body,
                [0, tf.zeros([N, N])],
                parallel_iterations=parallel,
            )
        s = SimSession(c, graph=g)
    s.run(y, {x: sim_value([N, N])})
    return s.step_times[-1]


def test_parallel_iterations_overlap_a_pipeline_across_two_devices():
    """One iteration at a time, each pays its matmul and both transfers; with iterations in
    parallel the transfers of one overlap the matmuls of others, and the step grows by one
    matmul per iteration (gpu:1 is the bottleneck)."""
    seq = [_pipeline_time(n, 1) for n in (2, 6)]
    par = [_pipeline_time(n, 10) for n in (2, 6)]
    per_seq = (seq[1] - seq[0]) / 4
    per_par = (par[1] - par[0]) / 4
    assert per_par == pytest.approx(MM, rel=0.02)
    assert per_seq > 1.2 * MM  # + the matrix to gpu:1 and the product back, in turn
    assert par[0] < seq[0] and par[1] < seq[1]
    # two in flight are enough to keep gpu:1 busy here: the transfers take less than a matmul
    two = [_pipeline_time(n, 2) for n in (2, 6)]
    assert (two[1] - two[0]) / 4 == pytest.approx(MM, rel=0.02)


def test_a_captured_tensor_arriving_late_reaches_iterations_already_started():
    """The counter runs ahead while the tensor the body reads (a slow matmul outside the loop,
    on gpu:1) is still being computed: the iterations started meanwhile wait for it and get it
    when it arrives. Real values (hybrid simulation), against numpy."""
    c = Cluster(hybrid=True)
    c.add_task("worker", 0, cpu=None, gpu=(PERF, 2))
    rng = np.random.default_rng(3)
    a = rng.standard_normal((N, N)).astype(np.float32) / N
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [N, N])
        with tf.device("/gpu:1"):
            slow = tf.matmul(tf.matmul(x, x), x)
        with tf.device("/gpu:0"):

            def body(i, acc):
                return i + 1, acc + tf.reduce_sum(slow) * tf.cast(i, tf.float32)

            _, y = tf.while_loop(lambda i, acc: i < 7, body, [0, 0.0], parallel_iterations=4)
        s = SimSession(c, graph=g)
    got = s.run(y, {x: a})
    want = float(np.sum(a @ a @ a, dtype=np.float64)) * sum(range(7))
    assert got == pytest.approx(want, rel=1e-4)


def test_values_and_gradients_do_not_depend_on_parallel_iterations():
    """A loop across two CPU devices of one process (Send/Recv inside: a parallel frame) and its
    gradient give the same values for 1 and for 10 iterations in flight, against numpy."""
    config = tf.ConfigProto(device_count={"CPU": 2})
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((4, 4)).astype(np.float32) / 2
    x0 = rng.standard_normal((3, 4)).astype(np.float32)
    got = []
    for p in (1, 10):
        with tf.Graph().as_default():
            w = tf.constant(w0)
            x = tf.constant(x0)

            def body(i, h, w=w):
                with tf.device("/cpu:1"):
                    z = tf.tanh(tf.matmul(h, w))
                return i + 1, z

            with tf.device("/cpu:0"):
                _, h = tf.while_loop(lambda i, h: i < 5, body, [0, x], parallel_iterations=p)
                loss = tf.reduce_sum(h * h)
                (dw,) = tf.gradients(loss, [w])
            with tf.Session(config=config) as s:
                got.append(s.run([h, dw]))
    h = x0
    for _ in range(5):
        h = np.tanh(h @ w0)
    np.testing.assert_allclose(got[0][0], h, rtol=1e-5)
    np.testing.assert_allclose(got[1][0], got[0][0], rtol=1e-6)
    np.testing.assert_allclose(got[1][1], got[0][1], rtol=1e-6)
    # the gradient against finite differences of the numpy loop
    eps, k = 1e-3, (1, 2)

    def f(wv):
        hh = x0.astype(np.float64)
        for _ in range(5):
            hh = np.tanh(hh @ wv)
        return np.sum(hh * hh)

    wp, wm = w0.astype(np.float64), w0.astype(np.float64)
    wp = wp.copy()
    wm = wm.copy()
    wp[k] += eps
    wm[k] -= eps
    assert got[1][1][k] == pytest.approx((f(wp) - f(wm)) / (2 * eps), rel=2e-3)


def test_parallel_iterations_must_be_a_positive_integer():
    with tf.Graph().as_default():
        for bad in (0, -2, 1.5, True):
            with pytest.raises(ValueError, match="parallel_iterations must be a positive"):
                tf.while_loop(lambda i: i < 3, lambda i: i + 1, [0], parallel_iterations=bad)


def test_a_failing_iteration_fails_the_step_and_the_next_step_runs():
    """With several iterations in flight, an Assert failing in one of them fails the step naming
    it (the iterations still in flight are abandoned, nothing hangs); the session's next step,
    with a value that passes, gives numpy's result."""
    config = tf.ConfigProto(device_count={"CPU": 2})
    with tf.Graph().as_default():
        w = tf.placeholder(tf.float32, [])

        def body(i, y):
            with tf.device("/cpu:1"):
                ok = tf.Assert(y < 10.0, [i, y], name="bounded")
                with tf.control_dependencies([ok]):
                    z = y * w + 1.0
            return i + 1, z

        with tf.device("/cpu:0"):
            _, y = tf.while_loop(lambda i, y: i < 6, body, [0, 1.0], parallel_iterations=4)
        with tf.Session(config=config) as s:
            with pytest.raises(tf.errors.InvalidArgumentError, match="bounded"):
                s.run(y, {w: 3.0})
            assert s.run(y, {w: 0.5}) == pytest.approx(sum(0.5**k for k in range(7)))
