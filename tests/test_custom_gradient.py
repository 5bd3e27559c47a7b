"""Program-defined gradients (runtime/custom_gradient.py): RegisterGradient with
gradient_override_map (a gradient-reversal identity, a py_func's gradient), NotDifferentiable,
custom_gradient, py_function; values against closed forms, and against TensorFlow where
installed."""

import itertools

import numpy as np
import pytest

import hetbed.compat.v1 as tf

_N = itertools.count()


def _name(base):
    return f"{base}_{next(_N)}"  # the registry is process-wide, as TF's


def test_an_override_reverses_an_identitys_gradient_and_survives_a_graph_file(tmp_path):
    flip = _name("Flip")

    @tf.RegisterGradient(flip)
    def _flip(op, grad):
        return [-0.5 * grad]

    with tf.Graph().as_default() as g:
        x = tf.constant([1.0, -2.0, 3.0])
        with g.gradient_override_map({"Identity": flip}):
            y = tf.identity(x)
        plain = tf.identity(x)  # outside the map: its own gradient
        (gx,) = tf.gradients(tf.reduce_sum(y * y), x)
        (gp,) = tf.gradients(tf.reduce_sum(plain * plain), x)
        assert y.op.attrs["_gradient_op_type"] == flip
        assert "_gradient_op_type" not in plain.op.attrs
        with tf.Session() as s:
            assert s.run(gx).tolist() == [-1.0, 2.0, -3.0]  # -0.5 * 2x
            assert s.run(gp).tolist() == [2.0, -4.0, 6.0]
        path = str(tmp_path / "g.json")
        tf.train.export_meta_graph(path)
    with tf.Graph().as_default() as g2:
        tf.train.import_meta_graph(path)
        y2 = g2.get_tensor_by_name(y.name)
        x2 = g2.get_tensor_by_name(x.name)
        (gx2,) = tf.gradients(tf.reduce_sum(y2), x2)
        with tf.Session() as s:
            assert s.run(gx2).tolist() == [-0.5, -0.5, -0.5]


def test_a_py_funcs_gradient_through_an_override():
    sq = _name("SqGrad")

    @tf.RegisterGradient(sq)
    def _sq(op, grad):
        return tf.py_func(lambda a, g: (2 * a * g).astype(np.float32), [op.inputs[0], grad],
                          tf.float32)  # fmt: skip

    with tf.Graph().as_default() as g:
        x = tf.constant([1.0, -2.0, 3.0])
        with g.gradient_override_map({"PyFunc": sq}):
            p = tf.py_func(lambda a: (a * a).astype(np.float32), [x], tf.float32)
        (gp,) = tf.gradients(tf.reduce_sum(p * 3.0), x)
        with tf.Session() as s:
            assert s.run(gp).tolist() == [6.0, -12.0, 18.0]


def test_custom_gradient_replaces_the_functions_own():
    @tf.custom_gradient
    def log1pexp(x):
        e = tf.exp(x)

        def grad(dy):
            return dy * (1 - 1 / (1 + e))

        return tf.log(1 + e), grad

    @tf.custom_gradient
    def scaled(a, b):
        def grad(dprod, dtotal):
            return tf.clip_by_value(dprod, -0.1, 0.1), dprod * 2.0 + dtotal

        return [a * b, a + b], grad

    with tf.Graph().as_default():
        x = tf.constant([0.0, 2.0, 100.0])
        l = log1pexp(x)
        (gl,) = tf.gradients(tf.reduce_sum(l), x)
        a, b = tf.constant([1.0, 2.0]), tf.constant([3.0, -4.0])
        prod, total = scaled(a, b)
        ga, gb = tf.gradients(tf.reduce_sum(prod * 5.0 + total), [a, b])
        assert prod.shape.as_list() == [2]
        with tf.Session() as s, np.errstate(over="ignore"):
            np.testing.assert_allclose(s.run(gl), 1 / (1 + np.exp(-np.array([0, 2, 100.0]))))
            assert s.run(prod).tolist() == [3.0, -8.0] and s.run(total).tolist() == [4.0, -2.0]
            # the results' gradients arrive one each: dprod = 5, dtotal = 1
            np.testing.assert_allclose(s.run(ga), [0.1, 0.1])
            np.testing.assert_allclose(s.run(gb), [11.0, 11.0])


def test_not_differentiable_registration_errors_and_py_function():
    kind = _name("NoGradOp")
    with tf.Graph().as_default() as g:
        x = tf.constant([1.0, 2.0])
        with g.gradient_override_map({"Identity": _name("Unregistered")}):
            y = tf.identity(x)
        with pytest.raises(LookupError, match="no gradient registered under"):
            tf.gradients(tf.reduce_sum(y), x)
        r = tf.py_function(lambda t: t.numpy() * 3, [x], tf.float32)
        tf.NotDifferentiable("PyFunc")
        try:
            (gr,) = tf.gradients(tf.reduce_sum(r), x)
            assert gr is None
        finally:
            from hetbed.runtime import custom_gradient

            custom_gradient._NOT_DIFFERENTIABLE.discard("PyFunc")
        with tf.Session() as s:
            assert s.run(r).tolist() == [3.0, 6.0]
    tf.RegisterGradient(kind)(lambda op, g: [g])
    with pytest.raises(KeyError, match="Registering two gradient"):
        tf.RegisterGradient(kind)(lambda op, g: [g])
    with pytest.raises(KeyError, match="'Relu'"):
        tf.RegisterGradient("Relu")(lambda op, g: [g])


def test_program_gradients_match_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")

    def run(t, tag):
        flip = f"FlipMatch{tag}"
        t.RegisterGradient(flip)(lambda op, grad: [tf_neg(t, grad) * 0.5])

        @t.custom_gradient
        def soft(x):
            e = t.exp(x)
            return t.log(1 + e), lambda dy: dy * (1 - 1 / (1 + e))

        g = t.Graph()
        with g.as_default():
            x = t.constant([1.0, -2.0, 3.0, 7.0])
            with g.gradient_override_map({"Identity": flip}):
                y = t.identity(x)
            outs = [t.gradients(t.reduce_sum(y * y), x)[0], soft(x)]
            outs.append(t.gradients(t.reduce_sum(outs[-1] * x), x)[0])
            with t.Session(graph=g) as s:
                return s.run(outs)

    def tf_neg(t, v):
        return t.negative(v)

    for a, b in zip(run(tf, "hb"), run(tf1, "tf")):
        np.testing.assert_allclose(a, b, rtol=1e-6)
