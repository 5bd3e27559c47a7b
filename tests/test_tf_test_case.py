"""WP4: tf.test — a TF1-style test file (TestCase, sessions, assertions) runs on hetbed."""

from __future__ import annotations

import os
import unittest

import numpy as np
import pytest

import hetbed.compat.v1 as tf


class SquareTest(tf.test.TestCase):
    """Written as a TF1 test: the graph is fresh in each test."""

    def test_session_and_assertions(self):
        assert tf.get_default_graph().get_operations() == []
        with self.session() as sess:
            x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
            y = tf.square(x)
            self.assertAllClose(sess.run(y), [[1.0, 4.0], [9.0, 16.0]])
            self.assertAllClose(y, np.array([[1.0, 4.0], [9.0, 16.0]]))  # evaluated
            self.assertAllEqual(tf.shape(y), [2, 2])
            self.assertShapeEqual(np.zeros((2, 2)), y)
            assert tf.get_default_session() is sess
        self.assertArrayNear([1.0, 2.0], [1.0, 2.0 + 1e-7], 1e-6)
        self.assertAllCloseAccordingToType(
            np.float16([1.0, 2.0]), np.float16([1.0, 2.001]), rtol=1e-6, atol=1e-6
        )
        with self.assertRaises(AssertionError):
            self.assertAllClose([1.0, 2.0], [1.0, 2.1])
        with self.assertRaises(AssertionError):
            self.assertAllEqual([1, 2], [1, 2, 3])
        with self.assertRaises(AssertionError):
            self.assertAllCloseAccordingToType(np.float64([1.0]), np.float64([1.001]))
        with self.assertRaises(AssertionError):
            self.assertShapeEqual(np.zeros(3), tf.constant([1.0, 2.0]))

    def test_cached_session_is_reused_and_evaluate(self):
        v = tf.Variable(3.0)
        with self.cached_session() as s1:
            s1.run(tf.global_variables_initializer())
        with self.test_session() as s2:
            assert s2 is s1
            self.assertEqual(self.evaluate(v * 2.0), 6.0)
        self.assertEqual(self.evaluate({"a": tf.constant(1)}), {"a": 1})
        assert os.path.isdir(self.get_temp_dir())


def test_a_tf1_test_case_runs_under_unittest():
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(SquareTest)
    result = unittest.TextTestRunner(stream=open(os.devnull, "w"), verbosity=0).run(suite)
    assert result.wasSuccessful(), result.failures + result.errors
    assert result.testsRun - len(result.skipped) == 2  # test_session is a helper, skipped


def test_failing_tf1_test_is_reported():
    class Bad(tf.test.TestCase):
        def test_wrong(self):
            with self.session():
                self.assertAllClose(tf.constant([1.0]), [2.0])

    result = unittest.TextTestRunner(stream=open(os.devnull, "w")).run(
        unittest.defaultTestLoader.loadTestsFromTestCase(Bad)
    )
    assert len(result.failures) == 1


def test_module_functions():
    from hetbed.devices.gpu import cupy_or_none

    has_gpu = cupy_or_none() is not None
    assert tf.test.is_built_with_cuda() is has_gpu
    assert tf.test.is_gpu_available() is has_gpu
    assert tf.test.gpu_device_name() == ("/device:GPU:0" if has_gpu else "")
    assert os.path.isdir(tf.test.get_temp_dir())
    assert tf.test.main is not None
    with pytest.raises(SystemExit):
        tf.test.main(argv=["prog", "--help"])


def test_compute_gradient_error():
    with tf.Graph().as_default(), tf.Session():
        x = tf.placeholder(tf.float64, [2, 3])
        y = tf.reduce_sum(tf.square(x), axis=1)
        theory, numeric = tf.test.compute_gradient(x, [2, 3], y, [2])
        v = np.random.default_rng(0).uniform(-1, 1, (2, 3))
        want = np.zeros((6, 2))
        want[:3, 0], want[3:, 1] = 2 * v[0], 2 * v[1]
        np.testing.assert_allclose(theory, want, rtol=1e-12)
        np.testing.assert_allclose(numeric, want, rtol=1e-6)
        assert tf.test.compute_gradient_error(x, [2, 3], y, [2]) < 1e-6
        # a wrong gradient shows: stop_gradient hides half of it
        z = tf.stop_gradient(x) * x
        assert tf.test.compute_gradient_error(x, [2, 3], z, [2, 3], x_init_value=v) > 0.1
    with pytest.raises(ValueError, match="default session"):
        with tf.Graph().as_default():
            p = tf.placeholder(tf.float64, [1])
            tf.test.compute_gradient(p, [1], p * 2.0, [1])
