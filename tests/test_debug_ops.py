"""WP4 debugging ops and Python callbacks: Print / print, check_numerics, is_nan / is_inf /
is_finite, add_check_numerics_ops, the static assert_* helpers, py_func / numpy_function,
and ConfigProto's gpu_options / graph_options."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from opcheck import check_forward, check_gradient

import hetbed as hb
import hetbed.compat.v1 as tf
from hetbed.runtime.errors import InvalidArgumentError


def _run(fetch, feed=None, graph=None):
    with hb.Session(graph=graph or hb.get_default_graph()) as s:
        return s.run(fetch, feed)


# ---- Print / print ----------------------------------------------------------------------------


def test_print_is_identity_and_prints_first_n(capsys):
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, [2, 3])
        y = tf.Print(x, [x, hb.reduce_sum(x)], "x: ", first_n=2, summarize=4) * 2.0
        with hb.Session(graph=g) as s:
            v = np.arange(6, dtype=np.float32).reshape(2, 3)
            for _ in range(3):
                np.testing.assert_array_equal(s.run(y, {x: v}), v * 2)
    err = capsys.readouterr().err.splitlines()
    assert err == ["x: [[0 1 2][3...]][15]"] * 2  # printed on the first 2 runs only


def test_print_gradient_passes_through():
    check_gradient(lambda x: tf.Print(x, [x], "m") * x, [np.array([1.0, -2.0, 3.0])])


def test_tf_print_to_stdout_and_stderr(capsys):
    g = hb.Graph()
    with g.as_default():
        x = hb.constant(np.arange(10, dtype=np.int32))
        p1 = tf.print("x:", x, output_stream=sys.stdout)
        p2 = tf.print("sum", hb.reduce_sum(x), sep="=", end="!\n")
        with hb.control_dependencies([p1, p2]):
            y = hb.identity(x)
        _run(y, graph=g)
    out = capsys.readouterr()
    assert out.out == "x: [0 1 2 ... 7 8 9]\n"
    assert out.err == "sum=45!\n"
    with pytest.raises(ValueError, match="output_stream"):
        tf.print("a", output_stream=object())


# ---- check_numerics and friends -------------------------------------------------------------


def test_check_numerics_identity_and_error_names_op_and_message():
    check_forward(
        lambda x: tf.check_numerics(x, "fine"), [np.array([1.0, 2.0], np.float32)], lambda x: x
    )
    check_gradient(lambda x: tf.check_numerics(x, "m") * x, [np.array([1.0, -2.0])])
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, [3])
        y = tf.check_numerics(hb.log(x), "log of x", name="chk")
        with hb.Session(graph=g) as s:
            with pytest.raises(InvalidArgumentError, match=r"log of x : Tensor had NaN.*'chk'"):
                s.run(y, {x: np.array([1.0, -1.0, 2.0], np.float32)})
            with pytest.raises(InvalidArgumentError, match="Inf"):
                s.run(y, {x: np.array([1.0, 0.0, 2.0], np.float32)})
        with pytest.raises(InvalidArgumentError, match="floating point"):
            tf.check_numerics(hb.constant([1, 2]), "ints")


def test_check_numerics_gradient_is_checked():
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, [2])
        y = hb.sqrt(tf.check_numerics(x, "x"))
        (dx,) = hb.gradients(y, [x])
        with hb.Session(graph=g) as s:
            with pytest.raises(InvalidArgumentError, match="detected in gradient"):
                s.run(dx, {x: np.array([0.0, 1.0], np.float32)})


def test_is_nan_inf_finite_against_numpy():
    v = np.array([1.0, np.nan, np.inf, -np.inf, 0.0], np.float32)
    check_forward(lambda x: tf.math.is_nan(x), [v], np.isnan)
    check_forward(lambda x: tf.debugging.is_inf(x), [v], np.isinf)
    check_forward(lambda x: tf.is_finite(x), [v], np.isfinite)


def test_verify_and_add_check_numerics_ops():
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, [2])
        y = tf.verify_tensor_all_finite(hb.log(x), "bad log")
        w = hb.Variable(3.0)  # a variable and its optimizer: references are not checked
        z = hb.reduce_sum(y * w)
        train = tf.train.GradientDescentOptimizer(0.0).minimize(z)
        check = tf.add_check_numerics_ops()
        with hb.Session(graph=g) as s:
            s.run(w.initializer)
            feed = {x: np.array([1.0, 2.0], np.float32)}
            assert s.run([z, check, train], feed)[0] == pytest.approx(3 * np.log(2.0))
            with pytest.raises(InvalidArgumentError, match="Log"):
                s.run(check, {x: np.array([-1.0, 2.0], np.float32)})
    with hb.Graph().as_default():
        hb.cond(hb.constant(True), lambda: hb.constant(1.0), lambda: hb.constant(2.0))
        with pytest.raises(ValueError, match="control flow"):
            tf.add_check_numerics_ops()


# ---- static assertions --------------------------------------------------------------------


def test_static_asserts_raise_at_build_time():
    with hb.Graph().as_default():
        m = hb.zeros([2, 3])
        assert tf.assert_rank(m, 2).type == "NoOp"
        with pytest.raises(ValueError, match="must have rank 1"):
            tf.assert_rank(m, 1)
        tf.assert_rank_at_least(m, 1)
        with pytest.raises(ValueError, match="at least 3"):
            tf.assert_rank_at_least(m, 3)
        tf.assert_rank_in(m, [1, 2])
        with pytest.raises(ValueError, match=r"in \(0, 1\)"):
            tf.assert_rank_in(m, [0, 1])
        tf.assert_type(m, hb.float32)
        with pytest.raises(TypeError, match="must be of type int32"):
            tf.assert_type(m, hb.int32)
        tf.assert_integer(hb.constant([1]))
        with pytest.raises(TypeError, match="integer"):
            tf.assert_integer(m)
        s = hb.constant(1.0)
        assert tf.assert_scalar(s) is s
        with pytest.raises(ValueError, match="scalar"):
            tf.assert_scalar(m)
        assert tf.assert_same_float_dtype([m, s]) == hb.float32
        with pytest.raises(ValueError):
            tf.assert_same_float_dtype([m, hb.constant(1.0, hb.float64)])
        with pytest.raises(ValueError, match="floating"):
            tf.assert_same_float_dtype([hb.constant([1])])
        assert tf.is_numeric_tensor(m) and not tf.is_numeric_tensor(hb.constant(True))
        assert not tf.is_numeric_tensor(np.zeros(2))


def test_rank_asserts_at_run_time_when_rank_unknown():
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32)
        a = tf.debugging.assert_rank(x, 2, message="need a matrix")
        b = tf.assert_rank_in(x, (1, 2))
        with hb.control_dependencies([a, b]):
            y = hb.identity(x)
        with hb.Session(graph=g) as s:
            np.testing.assert_array_equal(s.run(y, {x: np.ones((2, 2))}), np.ones((2, 2)))
            with pytest.raises(InvalidArgumentError, match="need a matrix"):
                s.run(y, {x: np.ones(3)})
            with pytest.raises(InvalidArgumentError, match="rank in"):
                s.run(b, {x: np.ones((1, 1, 1))})


# ---- py_func ----------------------------------------------------------------------------------


def test_py_func_single_and_multiple_outputs():
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, [3])
        y = tf.py_func(lambda a: np.sort(a)[::-1].copy(), [x], tf.float32)
        lo, n = tf.numpy_function(
            lambda a, b: (np.minimum(a, b), np.int64(a.size)), [x, x * 2.0], [tf.float32, tf.int64]
        )
        assert y.shape.ndims is None and n.dtype == hb.int64
        v = np.array([3.0, -1.0, 2.0], np.float32)
        got = _run([y, lo, n], {x: v}, graph=g)
    np.testing.assert_array_equal(got[0], [3.0, 2.0, -1.0])
    np.testing.assert_array_equal(got[1], np.minimum(v, 2 * v))
    assert got[2] == 3


def test_py_func_errors_name_the_op():
    def boom(a):
        raise ValueError("no good")

    g = hb.Graph()
    with g.as_default():
        x = hb.constant([1.0, 2.0])
        bad = tf.py_func(boom, [x], tf.float32, name="boomer")
        wrong_type = tf.py_func(lambda a: a.astype(np.int32), [x], tf.float32, name="wt")
        wrong_count = tf.py_func(lambda a: (a, a), [x], [tf.float32], name="wc")
        with hb.Session(graph=g) as s:
            with pytest.raises(InvalidArgumentError, match="'boomer'.*ValueError: no good"):
                s.run(bad)
            with pytest.raises(InvalidArgumentError, match="'wt'.*int32.*float32"):
                s.run(wrong_type)
            with pytest.raises(InvalidArgumentError, match="'wc'.*returned 2 values"):
                s.run(wrong_count)
        (grad,) = hb.gradients(hb.reduce_sum(bad), [x])
        assert grad is None  # no gradient, as in TF


def test_py_func_refused_where_it_cannot_run(tmp_path):
    from hetbed.devices.costmodel import DevicePerf
    from hetbed.simulator import Cluster, SimSession, sim_value

    g = hb.Graph()
    with g.as_default(), hb.device("/job:worker/task:0/device:cpu:0"):
        x = hb.placeholder(hb.float32, [2])
        y = tf.py_func(lambda a: a + 1, [x], tf.float32, name="cb")
        z = tf.py_func(lambda a: a + 1, [x], tf.float32, name="declared")
        z.set_shape([2])
    # a graph that left this process (a remote task gets it serialized) has no function
    g2 = hb.graph_from_dict(hb.graph_to_dict(g))
    with pytest.raises(InvalidArgumentError, match="'cb'.*not in this process.*remote task"):
        _run(g2.get_tensor_by_name("cb:0"), {g2.get_tensor_by_name(x.name): [1.0, 2.0]}, g2)
    # a shape-only simulation needs declared shapes
    perf = DevicePerf("toy", {"float32": 1e12}, memory_bandwidth=1e11, memory_bytes=1e9)
    c = Cluster()
    c.add_task("worker", 0, cpu=perf)
    with g.as_default():
        s = SimSession(c)
        assert s.run(z, {x: sim_value([2])}).shape == (2,)
        with pytest.raises(InvalidArgumentError, match="'cb'.*shape-only simulation"):
            s.run(y, {x: sim_value([2])})
    assert y.op.op_def.kernels.keys() == {"cpu"}


# ---- config options -------------------------------------------------------------------------


def test_gpu_and_graph_options_accepted():
    cfg = tf.ConfigProto(
        gpu_options=tf.GPUOptions(per_process_gpu_memory_fraction=0.5, visible_device_list="0"),
        graph_options=tf.GraphOptions(
            optimizer_options=tf.OptimizerOptions(opt_level=tf.OptimizerOptions.L1)
        ),
    )
    assert cfg.gpu_options.per_process_gpu_memory_fraction == 0.5
    plain = tf.ConfigProto(allow_soft_placement=True)
    plain.gpu_options.allow_growth = True  # the common TF1 idiom
    with hb.Graph().as_default():
        assert _run(hb.constant(2.0) * 3.0) == 6.0
        with tf.Session(config=plain) as s:
            assert s.run(hb.constant(1) + 1) == 2
    with pytest.raises(ValueError, match="per_process_gpu_memory_fraction"):
        tf.GPUOptions(per_process_gpu_memory_fraction=1.5)


def test_py_func_refused_in_a_remote_task():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = hb.train.Server(hb.train.ClusterSpec({"worker": [f"127.0.0.1:{port}"]}), "worker", 0)
    try:
        with hb.Graph().as_default():
            y = tf.py_func(lambda a: a * 2, [hb.constant([1.0])], tf.float32, name="remote_cb")
            with hb.Session(server.target) as s:
                with pytest.raises(InvalidArgumentError, match="'remote_cb'.*remote task"):
                    s.run(y)
    finally:
        server.stop(grace=0)
