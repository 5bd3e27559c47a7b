"""tf.TensorArray: its operations against numpy, inside while loops (values and gradients against
finite differences), errors, and TensorFlow itself."""

import numpy as np
import pytest

import hetbed.compat.v1 as tf

RNG = np.random.default_rng(4)


def test_operations_against_numpy():
    v = RNG.standard_normal((4, 2)).astype(np.float32)
    with tf.Graph().as_default():
        ta = tf.TensorArray(tf.float32, size=3)
        ta = ta.write(0, v[0]).write(2, v[2]).write(1, v[1])
        un = tf.TensorArray(tf.float32, size=4).unstack(v)
        sc = tf.TensorArray(tf.float32, size=4).scatter([3, 0], v[:2])
        grown = tf.TensorArray(tf.float32, size=0, dynamic_size=True).write(0, v[0]).write(1, v[3])
        got = tf.Session().run(
            [
                ta.stack(),
                ta.read(1),
                un.gather([3, 1]),
                un.concat(),
                sc.stack(),
                grown.stack(),
                grown.size(),
                ta.size(),
            ]
        )
    np.testing.assert_array_equal(got[0], v[:3])
    np.testing.assert_array_equal(got[1], v[1])
    np.testing.assert_array_equal(got[2], v[[3, 1]])
    np.testing.assert_array_equal(got[3], v.reshape(-1))
    np.testing.assert_array_equal(got[4], np.stack([v[1], 0 * v[0], 0 * v[0], v[0]]))
    np.testing.assert_array_equal(got[5], v[[0, 3]])
    assert got[6] == 2 and got[7] == 3


def test_an_rnn_writing_a_tensor_array_in_a_loop_and_its_gradients():
    """h <- tanh(w h + x_t) over the rows of a fed x (unstacked into one TensorArray), each h
    written to another: the stacked outputs and the gradients of a loss of them with respect to
    w and x match numpy and finite differences."""
    xv = RNG.standard_normal((5, 3)).astype(np.float32)

    def f(w, x):
        h, outs = np.zeros(3), []
        for r in x:
            h = np.tanh(h * w + r)
            outs.append(h)
        outs = np.array(outs)
        return float((outs**2).sum()), outs

    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 3])
        n = tf.shape(x)[0]
        inputs = tf.TensorArray(tf.float32, size=0, dynamic_size=True).unstack(x)
        w = tf.Variable(np.float32(0.7))

        def body(i, h, ta):
            h = tf.tanh(h * w + inputs.read(i))
            return i + 1, h, ta.write(i, h)

        _, _, ta = tf.while_loop(
            lambda i, h, ta: i < n,
            body,
            [0, tf.zeros([3]), tf.TensorArray(tf.float32, size=0, dynamic_size=True)],
        )
        out = ta.stack()
        loss = tf.reduce_sum(out * out)
        gw, gx = tf.gradients(loss, [w, x])
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            got = s.run([out, gw, gx], {x: xv})
    np.testing.assert_allclose(got[0], f(0.7, xv)[1], rtol=1e-5, atol=1e-6)
    e = 1e-5
    assert got[1] == pytest.approx((f(0.7 + e, xv)[0] - f(0.7 - e, xv)[0]) / (2 * e), rel=1e-4)
    num = np.zeros(xv.shape)
    for k in np.ndindex(*xv.shape):
        xp, xm = xv.astype(np.float64), xv.astype(np.float64)
        xp[k] += e
        xm[k] -= e
        num[k] = (f(0.7, xp)[0] - f(0.7, xm)[0]) / (2 * e)
    np.testing.assert_allclose(got[2], num, rtol=1e-4, atol=1e-6)


def test_errors_name_the_problem():
    with tf.Graph().as_default():
        with pytest.raises(tf.errors.InvalidArgumentError, match="give a size"):
            tf.TensorArray(tf.float32)
        ta = tf.TensorArray(tf.float32, size=2, element_shape=[3])
        with pytest.raises(tf.errors.InvalidArgumentError, match="shape"):
            ta.write(0, np.zeros(4, np.float32))
        with pytest.raises((tf.errors.InvalidArgumentError, TypeError, ValueError)):
            ta.write(0, tf.constant([1, 2, 3]))  # an int32 tensor into a float32 array
        far = ta.write(5, np.zeros(3, np.float32))
        with tf.Session() as s, pytest.raises(tf.errors.InvalidArgumentError, match="out of range"):
            s.run(far.stack())


def test_same_as_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    tf1.disable_eager_execution()
    xv = RNG.standard_normal((6, 2, 3)).astype(np.float32)
    wv = (RNG.standard_normal((3, 3)) * 0.5).astype(np.float32)

    def program(tf):
        with tf.Graph().as_default():
            x = tf.placeholder(tf.float32, [None, 2, 3])
            w = tf.Variable(wv)
            steps = tf.shape(x)[0]
            xs = tf.TensorArray(tf.float32, size=steps).unstack(x)

            def body(t, h, out):
                h = tf.tanh(tf.matmul(h, w) + xs.read(t))
                return t + 1, h, out.write(t, h)

            _, h, out = tf.while_loop(
                lambda t, h, o: t < steps,
                body,
                [0, tf.zeros([2, 3]), tf.TensorArray(tf.float32, size=steps)],
            )
            y = out.stack()
            loss = tf.reduce_mean(tf.square(y)) + tf.reduce_sum(h)
            gw, gx = tf.gradients(loss, [w, x])
            with tf.Session() as s:
                s.run(tf.global_variables_initializer())
                return s.run([y, loss, gw, gx], {x: xv})

    want, got = program(tf1), program(tf)
    for a, b in zip(want, got):
        np.testing.assert_allclose(b, a, rtol=2e-5, atol=1e-6)


def test_appending_writes_leave_every_earlier_array_as_it_was():
    """Writes of the next element of a dynamic array append in place; arrays written before,
    and a second write onto the same array, keep their own elements."""
    with tf.Graph().as_default():
        ta0 = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        ta1 = ta0.write(0, tf.constant([1.0, 2.0]))
        ta2 = ta1.write(1, tf.constant([3.0, 4.0]))
        ta3 = ta2.write(2, tf.constant([5.0, 6.0]))
        other = ta1.write(1, tf.constant([7.0, 8.0]))
        with tf.Session() as s:
            got = s.run([ta1.stack(), ta2.stack(), ta3.stack(), other.stack(), ta2.read(1)])
    np.testing.assert_array_equal(got[0], [[1, 2]])
    np.testing.assert_array_equal(got[1], [[1, 2], [3, 4]])
    np.testing.assert_array_equal(got[2], [[1, 2], [3, 4], [5, 6]])
    np.testing.assert_array_equal(got[3], [[1, 2], [7, 8]])
    np.testing.assert_array_equal(got[4], [3, 4])
