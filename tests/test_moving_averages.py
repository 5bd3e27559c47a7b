"""ExponentialMovingAverage against the recurrence by hand, its names, restoring averages into
the variables; multinomial / random.categorical against their probabilities."""

import numpy as np
import pytest

import hetbed.compat.v1 as tf


def test_moving_averages_follow_the_recurrence_and_restore(tmp_path):
    with tf.Graph().as_default():
        w = tf.Variable(1.0, name="w")
        x = tf.placeholder(tf.float32, [])
        t = tf.identity(x * 2.0, name="t")
        step = tf.Variable(0, trainable=False)
        ema = tf.train.ExponentialMovingAverage(0.9, num_updates=step)
        new_w = tf.assign(w, x)
        with tf.control_dependencies([new_w]):
            update = ema.apply([w, t])
        bump = tf.assign_add(step, 1)
        assert ema.average(w).op.name == "w/ExponentialMovingAverage"
        assert ema.average_name(w) == "w/ExponentialMovingAverage"
        assert tf.get_collection(tf.GraphKeys.MOVING_AVERAGE_VARIABLES) == [w]
        saver = tf.train.Saver()
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            want_w, want_t = 1.0, 0.0
            for k, xv in enumerate([3.0, -1.0, 5.0, 2.0]):
                s.run(update, {x: xv})
                s.run(bump)
                d = min(0.9, (1 + k) / (10 + k))
                want_w -= (1 - d) * (want_w - xv)
                want_t -= (1 - d) * (want_t - 2 * xv)
            got = s.run([ema.average(w), ema.average(t)])
            path = saver.save(s, str(tmp_path / "m"))
        with pytest.raises(ValueError, match="averaged already"):
            ema.apply([w])
    assert got == pytest.approx([want_w, want_t], rel=1e-6)
    with tf.Graph().as_default():  # evaluation with the averaged weights
        w2 = tf.Variable(0.0, name="w")
        ema2 = tf.train.ExponentialMovingAverage(0.9)
        with tf.Session() as s:
            tf.train.Saver(ema2.variables_to_restore([w2])).restore(s, path)
            assert s.run(w2) == pytest.approx(want_w, rel=1e-6)


def test_multinomial_and_categorical_draw_from_the_softmax():
    with tf.Graph().as_default():
        tf.set_random_seed(1)
        probs = np.array([[0.2, 0.8, 0.0], [0.5, 0.25, 0.25]])
        with np.errstate(divide="ignore"):
            logits = tf.constant(np.log(probs), tf.float32)
        draws = tf.multinomial(logits, 20000, seed=3)
        cat = tf.random.categorical(logits, 4, dtype=tf.int32)
        with tf.Session() as s:
            got, c = s.run([draws, cat])
    assert got.dtype == np.int64 and got.shape == (2, 20000) and c.dtype == np.int32
    for row, p in zip(got, probs):
        freq = np.bincount(row, minlength=3) / row.size
        np.testing.assert_allclose(freq, p, atol=0.015)  # ~5 standard errors
    assert set(got[0]) <= {0, 1}
