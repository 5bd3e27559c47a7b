"""tf.contrib.seq2seq's decoding loop (hetbed/compat/v1/contrib_seq2seq.py): a TrainingHelper
decode equals dynamic_rnn with the same cell and projection (zeros past each sequence's end with
impute_finished), a greedy decode equals the same steps unrolled by hand, and it stops where
each sequence emits the end token; TF's variable names."""

import numpy as np

import hetbed.compat.v1 as tf

RNG = np.random.default_rng(0)
B, T, D, H, V = 3, 5, 4, 6, 7
X = RNG.standard_normal((B, T, D)).astype(np.float32)
LENS = np.array([5, 3, 1], np.int32)
EMB = RNG.standard_normal((V, D)).astype(np.float32)


def _decoders(end_token):
    cell = tf.nn.rnn_cell.BasicLSTMCell(H)
    init = cell.zero_state(B, tf.float32)
    proj = tf.layers.Dense(V, name="dense")
    s2s = tf.contrib.seq2seq
    helper = s2s.TrainingHelper(tf.constant(X), LENS)
    out, _, lens = s2s.dynamic_decode(
        s2s.BasicDecoder(cell, helper, init, output_layer=proj), impute_finished=True
    )
    greedy = s2s.GreedyEmbeddingHelper(tf.constant(EMB), tf.fill([B], 1), end_token)
    gout, _, glens = s2s.dynamic_decode(
        s2s.BasicDecoder(cell, greedy, init, output_layer=proj),
        maximum_iterations=6,
        scope="decoder",
    )
    with tf.variable_scope("decoder", reuse=True):
        ref, _ = tf.nn.dynamic_rnn(cell, tf.constant(X), sequence_length=LENS, initial_state=init)
        ref = proj(ref)
        # the greedy steps by hand
        inp, st, ids = tf.nn.embedding_lookup(EMB, tf.fill([B], 1)), init, []
        for _ in range(6):
            o, st = cell(inp, st)
            k = tf.cast(tf.argmax(proj(o), -1), tf.int32)
            ids.append(k)
            inp = tf.nn.embedding_lookup(EMB, k)
        manual = tf.stack(ids, 1)
    return out, lens, gout, glens, ref, manual


def test_training_and_greedy_decoding():
    with tf.Graph().as_default():
        out, lens, gout, glens, ref, manual = _decoders(end_token=V + 1)  # never emitted
        names = sorted(v.op.name for v in tf.global_variables())
        assert names == ["decoder/basic_lstm_cell/bias", "decoder/basic_lstm_cell/kernel",
                         "decoder/dense/bias", "decoder/dense/kernel"]  # fmt: skip
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            o, l, r, gi, gl, m = s.run([out.rnn_output, lens, ref, gout.sample_id, glens, manual])
    assert o.shape == (B, T, V) and l.tolist() == [5, 3, 1]
    for b, n in enumerate(LENS):
        np.testing.assert_allclose(o[b, :n], r[b, :n], rtol=1e-6, atol=1e-6)
        assert not o[b, n:].any()
    np.testing.assert_array_equal(gi, m)
    assert gl.tolist() == [6, 6, 6]


def test_greedy_decoding_stops_at_the_end_token():
    with tf.Graph().as_default():
        tf.set_random_seed(3)
        *_, gout, glens, _, manual = _decoders(end_token=V + 1)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            m = s.run(manual)
            values = {v.op.name: s.run(v) for v in tf.global_variables()}
    end = int(m[0, 2])  # the token row 0 emits third
    want = [int(np.flatnonzero(row == end)[0]) + 1 if (row == end).any() else 6 for row in m]
    with tf.Graph().as_default():
        *_, gout, glens, _, _ = _decoders(end_token=end)
        with tf.Session() as s:
            for v in tf.global_variables():
                v.load(values[v.op.name], s)
            ids, gl = s.run([gout.sample_id, glens])
    assert gl.tolist() == want and ids.shape == (B, max(want))
    np.testing.assert_array_equal(ids[0, : want[0]], m[0, : want[0]])
