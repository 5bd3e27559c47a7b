"""Gaps found running TF1 programs by others (round eleven: DCGAN-tensorflow, char-rnn-tensorflow,
object_detection's core, tf.keras tutorials), each checked against the value TF gives."""

import sys

import numpy as np
import pytest

import hetbed.compat.v1 as tf


def test_pad_with_paddings_known_at_run_time_and_its_gradient():
    x = tf.placeholder(tf.float32, [None, 3])
    n = tf.shape(x)[0]
    as_list = tf.pad(x, [[1, 4 - n], [0, 2]], constant_values=7.0)
    as_tensor = tf.pad(x, tf.stack([tf.stack([0, 5 - n]), tf.constant([0, 0])]))
    w = tf.range(1.0, 6.0)
    loss = tf.reduce_sum(as_list * w[:, None] * w[None, :])
    (grad,) = tf.gradients(loss, x)
    with tf.Session() as s:
        a, b, g = s.run([as_list, as_tensor, grad], {x: np.ones((2, 3), np.float32)})
    want = np.full((5, 5), 7.0, np.float32)
    want[1:3, :3] = 1
    np.testing.assert_array_equal(a, want)
    np.testing.assert_array_equal(b, np.pad(np.ones((2, 3)), [[0, 3], [0, 0]]))
    np.testing.assert_array_equal(g, np.outer([2, 3], [1, 2, 3]))  # d/dx of w_i w_j at (i+1, j)
    with tf.Session() as s, pytest.raises(tf.errors.InvalidArgumentError, match=">= 0"):
        s.run(as_tensor, {x: np.ones((7, 3), np.float32)})


def test_stack_packs_a_nested_list_holding_tensors():
    x = tf.placeholder(tf.float32, [None, 4])
    n = tf.shape(x)[0]
    t = tf.stack([tf.zeros(2, dtype=tf.int32), [n, n - 1]], axis=1)
    with tf.Session() as s:
        assert s.run(t, {x: np.ones((3, 4))}).tolist() == [[0, 3], [0, 2]]


def test_ones_and_zeros_take_a_scalar_shape_tensor():
    x = tf.placeholder(tf.float32, [None, 4])
    n = tf.shape(x)[0]
    with tf.Session() as s:
        a, b = s.run([tf.ones(n, dtype=tf.bool), tf.zeros(n)], {x: np.ones((3, 4))})
    assert a.tolist() == [True] * 3 and b.tolist() == [0.0] * 3


def test_flags_dunder_flags_is_the_flag_dict():
    flags = tf.app.flags
    flags.DEFINE_integer("round11_batch", 32, "")
    flags.FLAGS(sys.argv[:1])
    d = getattr(flags.FLAGS, "__flags")
    assert d["round11_batch"].value == 32


def test_init_scope_and_forward_compatible():
    assert tf.compat.forward_compatible(2019, 6, 6)
    assert not tf.compat.forward_compatible(2030, 1, 1)
    with tf.compat.forward_compatibility_horizon(2031, 1, 1):
        assert tf.compat.forward_compatible(2030, 1, 1)
    with tf.Graph().as_default():
        with tf.control_dependencies([tf.no_op()]):
            with tf.init_scope():
                c = tf.constant(2.0) + 1
            d = tf.constant(1.0) + 1
        assert c.op.control_inputs == [] and len(d.op.control_inputs) == 1
