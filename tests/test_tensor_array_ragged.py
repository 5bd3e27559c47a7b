"""tf.TensorArray with elements of different shapes: write/read, stack and gather errors, concat,
split and unstack against numpy, static shapes as TensorFlow reports them, gradients (also
through while_loop) against finite differences, and TensorFlow itself."""

import numpy as np
import pytest
from opcheck import check_gradient

import hetbed.compat.v1 as tf

RNG = np.random.default_rng(8)


def test_write_read_concat_and_size_against_numpy():
    a, b, c = np.float32([1, 2]), np.float32([3]), np.float32([4, 5, 6])
    with tf.Graph().as_default():
        ta = tf.TensorArray(tf.float32, size=3, infer_shape=False)
        ta = ta.write(0, a).write(2, c).write(1, b)
        grown = tf.TensorArray(tf.float32, 0, dynamic_size=True, infer_shape=False)
        grown = grown.write(0, a).write(1, c)
        rows = tf.TensorArray(tf.float32, size=2, element_shape=[None, 2], infer_shape=False)
        rows = rows.write(0, np.ones((1, 2), np.float32)).write(1, np.zeros((3, 2), np.float32))
        empty = tf.TensorArray(tf.float32, size=0, element_shape=[None, 2], infer_shape=False)
        assert ta.element_shape.ndims is None and ta.read(1).shape.ndims is None
        assert ta.concat().shape.ndims is None
        assert rows.element_shape.as_list() == [None, 2]
        assert rows.read(0).shape.as_list() == [None, 2]
        assert rows.concat().shape.as_list() == [None, 2]
        with tf.Session() as s:
            got = s.run(
                [ta.concat(), ta.read(0), ta.read(1), ta.read(2), ta.size(), grown.concat()]
                + [grown.size(), rows.concat(), empty.concat()]
            )
    np.testing.assert_array_equal(got[0], np.concatenate([a, b, c]))
    for k, want in enumerate([a, b, c]):
        np.testing.assert_array_equal(got[1 + k], want)
    assert got[4] == 3 and got[6] == 2
    np.testing.assert_array_equal(got[5], np.concatenate([a, c]))
    np.testing.assert_array_equal(got[7], np.concatenate([np.ones((1, 2)), np.zeros((3, 2))]))
    assert got[8].shape == (0, 2)


def test_scalar_elements_and_elements_of_unknown_rank():
    """Scalars into an array of fixed size; elements whose rank is known only when the graph
    runs, first a vector then a scalar (the array keeps both)."""
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32)
        scalars = tf.TensorArray(tf.float32, size=3).write(1, 5.0).write(2, x)
        mixed = tf.TensorArray(tf.float32, size=0, dynamic_size=True).write(0, x).write(1, 2.0)
        with tf.Session() as s:
            got = s.run([mixed.read(0), mixed.read(1), mixed.size()], {x: [1, 2]})
            np.testing.assert_array_equal(s.run(scalars.stack(), {x: 7.0}), [0, 5, 7])
    np.testing.assert_array_equal(got[0], [1, 2])
    assert got[1] == 2.0 and got[2] == 2


def test_stack_and_gather_of_unequal_shapes_name_the_array_indices_and_shapes():
    with tf.Graph().as_default():
        ta = tf.TensorArray(tf.float32, size=3, infer_shape=False, tensor_array_name="rows")
        ta = ta.write(0, [1.0, 2.0]).write(1, [3.0, 4.0]).write(2, [5.0])
        with tf.Session() as s:
            np.testing.assert_array_equal(s.run(ta.gather([1, 0])), [[3, 4], [1, 2]])
            for t in (ta.stack(), ta.gather([1, 2])):
                with pytest.raises(
                    tf.errors.InvalidArgumentError,
                    match=r"'rows'.*element [01] has shape \[2\], element 2 has shape \[1\]",
                ):
                    s.run(t)
            scalar = tf.TensorArray(tf.float32, size=2, infer_shape=False)
            scalar = scalar.write(0, 1.0).write(1, [2.0])
            with pytest.raises(tf.errors.InvalidArgumentError, match="element 0 is a scalar"):
                s.run(scalar.concat())
            np.testing.assert_array_equal(s.run(scalar.read(0)), 1.0)  # any rank reads back
            wide = tf.TensorArray(tf.float32, size=2, infer_shape=False)
            wide = wide.write(0, np.zeros((1, 2), np.float32)).write(
                1, np.zeros((1, 3), np.float32)
            )
            with pytest.raises(
                tf.errors.InvalidArgumentError,
                match=r"more than their first dimension: element 0 has shape \[1, 2\], element 1",
            ):
                s.run(wide.concat())
            # an element never written reads as zeros of the written elements' one shape (TF's
            # rule), and is an error when they have none
            unwritten = tf.TensorArray(tf.float32, size=3, infer_shape=False).write(0, [1.0])
            np.testing.assert_array_equal(s.run(unwritten.write(2, [2.0]).concat()), [1, 0, 2])
            np.testing.assert_array_equal(s.run(unwritten.stack()), [[1], [0], [0]])
            unwritten = unwritten.write(2, [2.0, 3.0])
            with pytest.raises(tf.errors.InvalidArgumentError, match="element 1, which was never"):
                s.run(unwritten.concat())
            x = tf.placeholder(tf.float32, [None])
            bad = tf.TensorArray(tf.float32, size=2).split(x, [1, 2])
            with pytest.raises(tf.errors.InvalidArgumentError, match=r"sum 3.*dimension 4"):
                s.run(bad.concat(), {x: np.ones(4)})


def test_split_with_unequal_lengths_and_unstack():
    v = RNG.standard_normal((6, 2)).astype(np.float32)
    with tf.Graph().as_default():
        sp = tf.TensorArray(tf.float32, size=4, infer_shape=False).split(v, [1, 0, 3, 2])
        un = tf.TensorArray(tf.float32, size=3, infer_shape=False).unstack(v[:3])
        un = un.write(1, v[3:5].reshape(-1))  # an element of another shape
        eq = tf.TensorArray(tf.float32, size=3).split(v, [2, 2, 2])
        assert sp.element_shape.ndims is None and eq.element_shape.as_list() == [2, 2]
        with tf.Session() as s:
            got = s.run([sp.read(0), sp.read(1), sp.read(3), sp.concat(), sp.size()])
            got += s.run([un.read(0), un.read(1), un.concat(), eq.stack()])
            more = tf.TensorArray(tf.float32, size=1).split(v, [2, 4])  # more pieces than size
            np.testing.assert_array_equal(s.run(more.concat()), v)
            with pytest.raises(tf.errors.InvalidArgumentError, match="different shapes"):
                s.run(un.stack())
    np.testing.assert_array_equal(got[0], v[:1])
    assert got[1].shape == (0, 2)
    np.testing.assert_array_equal(got[2], v[4:])
    np.testing.assert_array_equal(got[3], v)
    assert got[4] == 4
    np.testing.assert_array_equal(got[5], v[0])
    np.testing.assert_array_equal(got[6], v[3:5].reshape(-1))
    np.testing.assert_array_equal(got[7], np.concatenate([v[0], v[3:5].reshape(-1), v[2]]))
    np.testing.assert_array_equal(got[8], v.reshape(3, 2, 2))


def test_gradients_of_write_read_concat_split_match_finite_differences():
    x = RNG.standard_normal(5)
    y = RNG.standard_normal((2, 3))

    def ragged(x, y):  # split into pieces of 2 and 3, rewrite one longer, read and concat
        ta = tf.TensorArray(tf.float64, size=3, infer_shape=False).split(x, [2, 3])
        ta = ta.write(1, tf.concat([ta.read(1), ta.read(0) * 2.0], 0))
        ta = ta.write(2, tf.reshape(y, [-1]) * ta.read(0)[0])
        out = ta.concat() + tf.reduce_sum(ta.read(1))
        out.set_shape([13])
        return out

    def dense(x, y):  # a TensorArray of one element shape: its writes' own gradients
        ta = tf.TensorArray(tf.float64, size=3).write(0, x[:3]).write(1, y[0] * x[4])
        out = ta.write(0, ta.read(1) * y[1]).concat()
        out.set_shape([9])
        return out

    def stacked(x, y):  # elements that may differ in shape, here equal: stack and gather
        ta = tf.TensorArray(tf.float64, size=2, infer_shape=False).write(0, x[:3]).write(1, y[1])
        out = tf.concat([ta.stack(), ta.gather([1, 1]) * x[3]], 0)
        out.set_shape([4, 3])
        return out

    check_gradient(ragged, [x, y])
    check_gradient(dense, [x, y])
    check_gradient(stacked, [x, y])


def _prefixes(xv):
    return np.concatenate([xv[: i + 1] * xv[i] for i in range(len(xv))])


@pytest.mark.parametrize("infer_shape", [True, False])
def test_a_while_loop_writing_growing_prefixes_then_concat(infer_shape):
    """Step i writes x[:i+1] * x[i]; concat gives every prefix; the gradient of a loss of it
    matches finite differences."""
    xv = RNG.standard_normal(4)
    w = RNG.standard_normal(len(_prefixes(xv)))

    def loss(xv):
        return float(np.sum(np.sin(_prefixes(xv)) * w))

    with tf.Graph().as_default():
        x = tf.placeholder(tf.float64, [None])
        n = tf.shape(x)[0]

        def body(i, ta):
            return i + 1, ta.write(i, x[: i + 1] * x[i])

        ta0 = tf.TensorArray(tf.float64, size=n, infer_shape=infer_shape)
        _, ta = tf.while_loop(lambda i, ta: i < n, body, [0, ta0])
        y = ta.concat()
        assert y.shape.ndims in (None, 1) and (y.shape.ndims is None or y.shape.dims[0] is None)
        (gx,) = tf.gradients(tf.reduce_sum(tf.sin(y) * w), [x])
        with tf.Session() as s:
            got, g = s.run([y, gx], {x: xv})
    np.testing.assert_allclose(got, _prefixes(xv))
    e = 1e-6
    num = [(loss(xv + e * d) - loss(xv - e * d)) / (2 * e) for d in np.eye(len(xv))]
    np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-8)


def test_a_loop_extending_the_element_it_wrote_before():
    """e_0 = [x_0], e_i = [sin(e_{i-1}), x_i]: each step reads the array it writes (ragged
    gradients from a read and a write of one flow are summed); values and gradient against
    numpy and finite differences."""
    xv = RNG.standard_normal(4)

    def f(xv):
        e, out = xv[:1], [xv[:1]]
        for v in xv[1:]:
            e = np.concatenate([np.sin(e), [v]])
            out.append(e)
        return np.concatenate(out)

    w = RNG.standard_normal(len(f(xv)))
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float64, [None])
        ta0 = tf.TensorArray(tf.float64, size=0, dynamic_size=True, infer_shape=False)
        ta0 = ta0.write(0, x[:1])

        def body(i, ta):
            return i + 1, ta.write(i, tf.concat([tf.sin(ta.read(i - 1)), x[i : i + 1]], 0))

        _, ta = tf.while_loop(lambda i, ta: i < tf.shape(x)[0], body, [1, ta0])
        y = ta.concat()
        (gx,) = tf.gradients(tf.reduce_sum(y * w), [x])
        with tf.Session() as s:
            got, g = s.run([y, gx], {x: xv})
    np.testing.assert_allclose(got, f(xv))
    e = 1e-6
    num = [(f(xv + e * d) @ w - f(xv - e * d) @ w) / (2 * e) for d in np.eye(len(xv))]
    np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-8)


def test_a_loop_reading_a_ragged_array_split_outside_it():
    """A ragged array split outside a loop and read inside it: the sums of its pieces, and
    their gradient."""
    xv = RNG.standard_normal(6)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float64, [6])
        pieces = tf.TensorArray(tf.float64, size=3, infer_shape=False).split(x, [1, 3, 2])

        def body(i, acc):
            return i + 1, acc + tf.reduce_sum(pieces.read(i)) * tf.cast(i + 1, tf.float64)

        _, total = tf.while_loop(lambda i, a: i < 3, body, [0, tf.constant(0.0, tf.float64)])
        (gx,) = tf.gradients(total, [x])
        with tf.Session() as s:
            got, g = s.run([total, gx], {x: xv})
    weights = np.array([1, 2, 2, 2, 3, 3], np.float64)
    assert got == pytest.approx(float(np.sum(xv * weights)))
    np.testing.assert_allclose(g, weights)


def _static(shape):
    return None if shape.ndims is None else tuple(shape.as_list())


@pytest.mark.parametrize("infer_shape", [False, True])
def test_same_as_tensorflow(infer_shape):
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    tf1.disable_eager_execution()
    xv = RNG.standard_normal(5).astype(np.float32)

    def program(tf):
        with tf.Graph().as_default():
            x = tf.placeholder(tf.float32, [None])
            n = tf.shape(x)[0]

            def body(i, ta):
                return i + 1, ta.write(i, tf.tanh(x[: i + 1]) * x[i])

            ta0 = tf.TensorArray(tf.float32, size=n, infer_shape=infer_shape)
            _, ta = tf.while_loop(lambda i, ta: i < n, body, [0, ta0])
            y = ta.concat()
            rows = tf.TensorArray(tf.float32, 2, infer_shape=infer_shape, element_shape=[None, 2])
            rows = rows.write(0, tf.ones([1, 2]))
            sp = tf.TensorArray(tf.float32, size=3, infer_shape=False).split(y[:6], [1, 2, 3])
            z = sp.concat() * 2.0 + sp.read(2)[0]
            loss = tf.reduce_sum(tf.square(y)) + tf.reduce_sum(z * z)
            (gx,) = tf.gradients(loss, [x])
            ts = [y, sp.read(1), ta.read(0), ta.stack(), sp.concat(), rows.stack()]
            ts += [rows.gather([0]), rows.concat()]
            static = [_static(t.shape) for t in ts] + [_static(ta.element_shape)]
            with tf.Session() as s:
                return static, s.run([y, z, ta.size(), sp.read(1), loss, gx], {x: xv})

    (want_static, want), (got_static, got) = program(tf1), program(tf)
    assert got_static == want_static
    for a, b in zip(want, got):
        np.testing.assert_allclose(b, a, rtol=2e-5, atol=1e-6)
