"""tf.contrib.crf (hetbed/compat/v1/contrib_crf.py) against brute force: the log partition
function is the log-sum-exp of every tag sequence's score, the likelihood its complement, its
gradient matches finite differences, and Viterbi finds the best sequence by enumeration."""

import itertools

import numpy as np
import pytest
from opcheck import check_gradient

import hetbed.compat.v1 as tf

RNG = np.random.default_rng(4)
crf = tf.contrib.crf


def _score(x, tags, trans):
    return sum(x[t, k] for t, k in enumerate(tags)) + sum(
        trans[a, b] for a, b in zip(tags[:-1], tags[1:])
    )


def _brute(x, trans, n):
    scores = {
        seq: _score(x[:n], seq, trans) for seq in itertools.product(range(x.shape[1]), repeat=n)
    }
    vals = np.array(list(scores.values()))
    return np.log(np.exp(vals - vals.max()).sum()) + vals.max(), scores


def test_log_likelihood_and_norm_by_enumeration():
    b, t, n = 3, 4, 3
    x = RNG.standard_normal((b, t, n))
    trans = RNG.standard_normal((n, n))
    tags = RNG.integers(0, n, (b, t))
    lengths = np.array([4, 2, 1])
    with tf.Graph().as_default(), tf.Session() as s:
        ll, tp = crf.crf_log_likelihood(x, tags, lengths, tf.constant(trans))
        norm = crf.crf_log_norm(x, lengths, trans)
        got_ll, got_norm = s.run([ll, norm])
    for k in range(b):
        z, scores = _brute(x[k], trans, lengths[k])
        assert got_norm[k] == pytest.approx(z, rel=1e-9)
        assert got_ll[k] == pytest.approx(scores[tuple(tags[k, : lengths[k]])] - z, rel=1e-9)


def test_log_likelihood_gradient_and_its_variable():
    x = RNG.standard_normal((2, 3, 3))
    trans = RNG.standard_normal((3, 3))
    tags = np.array([[0, 2, 1], [1, 1, 0]])
    lengths = np.array([3, 2])
    check_gradient(lambda a, m: crf.crf_log_likelihood(a, tags, lengths, m)[0], [x, trans])
    with tf.Graph().as_default():
        inputs = tf.placeholder(tf.float32, [None, None, 5])
        _, tp = crf.crf_log_likelihood(inputs, tf.zeros([2, 4], tf.int32), [4, 3])
        assert tp.op.name == "transitions" and tp.shape.as_list() == [5, 5]


def test_viterbi_finds_the_best_sequence():
    x = RNG.standard_normal((2, 5, 3))
    trans = RNG.standard_normal((3, 3))
    lengths = np.array([5, 3])
    with tf.Graph().as_default(), tf.Session() as s:
        tags, best = s.run(crf.crf_decode(tf.constant(x), tf.constant(trans), lengths))
    for k in range(2):
        _, scores = _brute(x[k], trans, lengths[k])
        want = max(scores, key=scores.get)
        assert tuple(tags[k, : lengths[k]]) == want and not tags[k, lengths[k] :].any()
        assert best[k] == pytest.approx(scores[want])
        seq, sc = crf.viterbi_decode(x[k, : lengths[k]], trans)
        assert tuple(seq) == want and sc == pytest.approx(scores[want])
