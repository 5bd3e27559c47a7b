"""CTC (runtime/ops/ctc.py): the loss against a brute-force sum over every alignment, its
gradient against finite differences, the decoders on cases worked by hand and by brute force,
TF's options and errors, and all of it against TensorFlow where it is installed (the beam
search with pruning included)."""

import itertools

import numpy as np
import pytest
from opcheck import check_gradient

import hetbed.compat.v1 as tf

RNG = np.random.default_rng(9)


def _collapse(path, blank, merge=True):
    out, prev = [], None
    for c in path:
        if c != blank and (not merge or c != prev):
            out.append(c)
        prev = c
    return tuple(out)


def _brute(logits, blank, merge=True):
    """{labeling: log p} summing every alignment of a [T, C] sequence."""
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    probs: dict = {}
    for path in itertools.product(range(logits.shape[1]), repeat=logits.shape[0]):
        lab = _collapse(path, blank, merge)
        probs[lab] = np.logaddexp(
            probs.get(lab, -np.inf), sum(logp[t, c] for t, c in enumerate(path))
        )
    return probs


def _sparse(labels):
    idx = [[b, i] for b, lab in enumerate(labels) for i in range(len(lab))]
    val = [v for lab in labels for v in lab]
    width = max(len(lab) for lab in labels)
    return tf.SparseTensor(np.array(idx, np.int64).reshape(-1, 2), np.array(val, np.int32),
                           [len(labels), width])  # fmt: skip


@pytest.mark.parametrize("merge", [True, False])
def test_ctc_loss_is_minus_log_the_sum_over_alignments(merge):
    t_len, n_cls = 5, 3  # classes 0, 1 and the blank 2
    x = RNG.standard_normal((t_len, 4, n_cls))
    labels = [[0, 1], [1, 1], [0], [0, 0, 1]]
    seq = [5, 5, 4, 5]
    with tf.Graph().as_default(), tf.Session() as s:
        got = s.run(tf.nn.ctc_loss(_sparse(labels), x, seq, ctc_merge_repeated=merge))
    for b, lab in enumerate(labels):
        want = _brute(x[: seq[b], b], 2, merge).get(tuple(lab), -np.inf)
        assert got[b] == pytest.approx(-want, rel=1e-9), (b, lab)


def test_ctc_loss_gradient_matches_finite_differences():
    x = RNG.standard_normal((6, 2, 4))
    labels = [[0, 2, 2], [1]]
    for opts in ({}, {"ctc_merge_repeated": False}, {"preprocess_collapse_repeated": True}):
        check_gradient(lambda a, o=opts: tf.nn.ctc_loss(_sparse(labels), a, [6, 4], **o), [x])


def test_ctc_loss_options_and_errors():
    x = RNG.standard_normal((3, 2, 3)).astype(np.float32)
    with tf.Graph().as_default(), tf.Session() as s:
        long = _sparse([[0, 0, 1], [1]])  # "0 0 1" needs 4 frames: 0, blank, 0, 1
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"required: 4, available: 3"):
            s.run(tf.nn.ctc_loss(long, x, [3, 3]))
        xt = tf.constant(x)
        loss = tf.nn.ctc_loss(long, xt, [3, 3], ignore_longer_outputs_than_inputs=True)
        (g,) = tf.gradients(tf.reduce_sum(loss), [xt])
        lv, gv = s.run([loss, g])
        assert lv[0] == 0 and not gv[:, 0].any() and lv[1] > 0
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"labels must be in \[0, 2\)"):
            s.run(tf.nn.ctc_loss(_sparse([[2], [1]]), x, [3, 3]))
        # batch-major inputs give the same loss
        a = s.run(tf.nn.ctc_loss(_sparse([[0], [1]]), x, [3, 2]))
        b = s.run(
            tf.nn.ctc_loss(_sparse([[0], [1]]), x.transpose(1, 0, 2), [3, 2], time_major=False)
        )
        np.testing.assert_allclose(a, b)


def test_greedy_decoder_merges_repeats_and_drops_blanks():
    best = [[0, 0, 2, 0, 1, 1], [1, 2, 2, 1, 0, 0]]  # per frame, batch 0 and 1; blank 2
    x = np.full((6, 2, 3), -5.0, np.float32)
    for b, row in enumerate(best):
        for t, c in enumerate(row):
            x[t, b, c] = 1.0
    with tf.Graph().as_default(), tf.Session() as s:
        (d,), score = tf.nn.ctc_greedy_decoder(x, [6, 4])
        (dm,), _ = tf.nn.ctc_greedy_decoder(x, [6, 4], merge_repeated=False)
        dv, sv, dmv = s.run([d, score, dm])
    rows = [[v for (r, _), v in zip(dv.indices, dv.values) if r == b] for b in range(2)]
    assert rows == [[0, 0, 1], [1, 1]] and dv.dense_shape.tolist() == [2, 3]
    assert sv.ravel().tolist() == [-6.0, -4.0]
    rows = [[v for (r, _), v in zip(dmv.indices, dmv.values) if r == b] for b in range(2)]
    assert rows == [[0, 0, 0, 1, 1], [1, 1]]


def test_beam_search_with_a_wide_beam_finds_the_most_probable_labelings():
    x = RNG.standard_normal((5, 1, 3)) * 2
    brute = sorted(_brute(x[:, 0], 2).items(), key=lambda kv: -kv[1])[:3]
    with tf.Graph().as_default(), tf.Session() as s:
        dec, lp = tf.nn.ctc_beam_search_decoder(x, [5], beam_width=200, top_paths=3,
                                                merge_repeated=False)  # fmt: skip
        dv, lv = s.run([dec, lp])
    assert [tuple(d.values.tolist()) for d in dv] == [lab for lab, _ in brute]
    np.testing.assert_allclose(lv[0], [p for _, p in brute], rtol=1e-9)
    with pytest.raises(tf.errors.InvalidArgumentError, match="top_paths <= beam_width"):
        tf.nn.ctc_beam_search_decoder(x, [5], beam_width=2, top_paths=3)


def test_ctc_matches_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    x = (RNG.standard_normal((14, 4, 6)) * 2).astype(np.float32)
    seq = np.array([14, 9, 7, 12], np.int32)
    labels = [[1, 2, 2, 3], [0, 4], [3, 3, 3], [4, 1, 0, 2, 2, 1]]
    w = np.array([1.0, 2.0, -1.0, 0.5], np.float32)

    def build(t):
        xt = t.constant(x)
        idx = np.array([[b, i] for b, lab in enumerate(labels) for i in range(len(lab))])
        sp = t.SparseTensor(idx.astype(np.int64), np.concatenate(labels).astype(np.int32), [4, 6])
        outs = []
        for opts in ({}, {"preprocess_collapse_repeated": True}, {"ctc_merge_repeated": False}):
            loss = t.nn.ctc_loss(sp, xt, seq, **opts)
            outs += [loss, t.gradients(t.reduce_sum(loss * w), [xt])[0]]
        (g,), score = t.nn.ctc_greedy_decoder(xt, seq)
        outs += [g.indices, g.values, score]
        for width, top, merge in ((3, 2, False), (5, 3, True), (2, 1, True)):
            dec, lp = t.nn.ctc_beam_search_decoder(xt, seq, width, top, merge)
            outs += [lp, *[v for d in dec for v in (d.indices, d.values, d.dense_shape)]]
        return outs

    g = tf1.Graph()
    with g.as_default(), tf1.Session(graph=g) as s:
        theirs = s.run(build(tf1))
    with tf.Graph().as_default(), tf.Session() as s:
        ours = s.run(build(tf))
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5)
