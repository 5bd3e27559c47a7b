"""contrib.seq2seq's attention mechanisms, AttentionWrapper and beam search, against numpy
references written here (the formulas step by step), enumeration of every sequence (beam
search wide enough to prune nothing returns the best sequences) and hand-made trees."""

import numpy as np
import pytest

import hetbed.compat.v1 as tf

s2s = tf.contrib.seq2seq
B, T, D, U, E, A = 2, 5, 6, 4, 3, 5


def _sig(x):
    return 1 / (1 + np.exp(-x))


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _lstm(x, c, h, k, b):
    i, j, f, o = np.split(np.concatenate([x, h], 1) @ k + b, 4, axis=1)
    c2 = c * _sig(f + 1.0) + _sig(i) * np.tanh(j)
    return np.tanh(c2) * _sig(o), c2


def _assign_by_role(sess, values):
    """Set every global variable to values[its last name part or its layer's name]."""
    for v in tf.global_variables():
        parts = v.op.name.split("/")
        key = parts[-2] if parts[-1] == "kernel" and parts[-2].endswith("_layer") else parts[-1]
        v.load(values[key], sess)


@pytest.mark.parametrize("kind", ["luong", "luong_scale", "bahdanau", "bahdanau_norm"])
def test_attention_wrapper_steps_equal_the_formulas(kind):
    rng = np.random.RandomState(1)
    mem = rng.randn(B, T, D).astype(np.float32)
    lens = np.array([5, 3], np.int32)
    xs = rng.randn(4, B, E).astype(np.float32)
    w = {
        "memory_layer": rng.randn(D, U).astype(np.float32) * 0.5,
        "query_layer": rng.randn(U, U).astype(np.float32) * 0.5,
        "attention_v": rng.randn(U).astype(np.float32),
        "attention_g": np.float32(0.7),
        "attention_b": rng.randn(U).astype(np.float32) * 0.1,
        "attention_layer": rng.randn(U + D, A).astype(np.float32) * 0.5,
        "kernel": rng.randn(E + A + U, 4 * U).astype(np.float32) * 0.3,
        "bias": rng.randn(4 * U).astype(np.float32) * 0.1,
    }
    with tf.Graph().as_default():
        if kind.startswith("luong"):
            mech = s2s.LuongAttention(
                U, mem, memory_sequence_length=lens, scale=kind.endswith("scale")
            )
        else:
            mech = s2s.BahdanauAttention(
                U, mem, memory_sequence_length=lens, normalize=kind.endswith("norm")
            )
        att = s2s.AttentionWrapper(tf.nn.rnn_cell.BasicLSTMCell(U), mech, attention_layer_size=A)
        st = att.zero_state(B, tf.float32)
        outs, aligns = [], []
        for t in range(4):
            o, st = att(tf.constant(xs[t]), st)
            outs.append(o)
            aligns.append(st.alignments)
        names = sorted(v.op.name for v in tf.global_variables())
        with tf.Session() as sess:
            _assign_by_role(sess, w)
            got_o, got_a, got_t = sess.run([outs, aligns, st.time])
    # numpy, step by step
    values = mem * (np.arange(T)[None, :] < lens[:, None])[:, :, None]
    keys = values @ w["memory_layer"]
    c = h = np.zeros((B, U), np.float32)
    attention = np.zeros((B, A), np.float32)
    for t in range(4):
        h, c = _lstm(np.concatenate([xs[t], attention], 1), c, h, w["kernel"], w["bias"])
        if kind.startswith("luong"):
            score = np.einsum("bu,btu->bt", h, keys) * (
                w["attention_g"] if kind.endswith("scale") else 1
            )
        else:
            q = h @ w["query_layer"]
            v = w["attention_v"]
            if kind.endswith("norm"):
                v = w["attention_g"] * v / np.sqrt((v**2).sum())
                score = (v * np.tanh(keys + q[:, None] + w["attention_b"])).sum(-1)
            else:
                score = (v * np.tanh(keys + q[:, None])).sum(-1)
        score = np.where(np.arange(T)[None, :] < lens[:, None], score, -np.inf)
        align = _softmax(score)
        context = np.einsum("bt,btd->bd", align, values)
        attention = np.concatenate([h, context], 1) @ w["attention_layer"]
        np.testing.assert_allclose(got_a[t], align, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got_o[t], attention, rtol=1e-4, atol=1e-5)
    assert got_t == 4
    scope = "luong_attention" if kind.startswith("luong") else "bahdanau_attention"
    expect = {
        "memory_layer/kernel",
        "attention_wrapper/basic_lstm_cell/kernel",
        "attention_wrapper/basic_lstm_cell/bias",
        "attention_wrapper/attention_layer/kernel",
    }
    if kind == "luong_scale":
        expect.add(f"attention_wrapper/{scope}/attention_g")
    if kind.startswith("bahdanau"):
        expect |= {
            f"attention_wrapper/{scope}/query_layer/kernel",
            f"attention_wrapper/{scope}/attention_v",
        }
    if kind == "bahdanau_norm":
        expect |= {
            f"attention_wrapper/{scope}/attention_g",
            f"attention_wrapper/{scope}/attention_b",
        }
    assert names == sorted(expect)


def test_monotonic_attention_modes_agree_with_the_recursion():
    rng = np.random.RandomState(3)
    p = rng.uniform(0.05, 0.95, size=(3, 6)).astype(np.float32)
    prev = _softmax(rng.randn(3, 6)).astype(np.float32)
    ref = np.zeros_like(p)
    for b in range(3):
        q = 0.0
        for i in range(6):
            q = (1 - p[b, i - 1]) * q + prev[b, i] if i else prev[b, 0]
            ref[b, i] = p[b, i] * q
    hard_p = (p > 0.5).astype(np.float32)
    hard_prev = np.eye(6, dtype=np.float32)[[0, 2, 5]]
    hard_ref = np.zeros_like(hard_p)
    for b in range(3):
        start = int(hard_prev[b].argmax())
        on = np.nonzero(hard_p[b, start:])[0]
        if len(on):
            hard_ref[b, start + on[0]] = 1
    with tf.Graph().as_default(), tf.Session() as sess:
        rec, par, hard = sess.run(
            [
                s2s.monotonic_attention(p, prev, "recursive"),
                s2s.monotonic_attention(p, prev, "parallel"),
                s2s.monotonic_attention(hard_p, hard_prev, "hard"),
            ]
        )
        with pytest.raises(ValueError, match="recursive"):
            s2s.monotonic_attention(p, prev, "soft")
    np.testing.assert_allclose(rec, ref, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(par, ref, rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(hard, hard_ref)


def test_gather_tree_follows_parents_and_pads_with_end_token():
    # max_time 4, batch 2, beam 2; end token 9
    ids = np.array(
        [[[1, 2], [5, 6]], [[3, 4], [9, 7]], [[5, 9], [8, 8]], [[6, 7], [1, 1]]], np.int32
    )
    parents = np.array(
        [[[0, 0], [0, 0]], [[1, 0], [1, 0]], [[1, 0], [0, 1]], [[0, 1], [1, 0]]], np.int32
    )
    lengths = np.array([4, 3], np.int32)
    with tf.Graph().as_default(), tf.Session() as sess:
        out = sess.run(s2s.gather_tree(ids, parents, lengths, 9))
    # batch 0, beam 0: t3 id 6 (parent 0) <- t2 beam 0 id 5 (parent 1) <- t1 beam 1 id 4 (parent 0) <- t0 beam 0 id 1
    np.testing.assert_array_equal(out[:, 0, 0], [1, 4, 5, 6])
    # beam 1: t3 id 7 (parent 1) <- t2 beam 1 id 9: end, so t3 becomes 9 too
    np.testing.assert_array_equal(out[:, 0, 1], [2, 3, 9, 9])
    # batch 1 has length 3: t3 is padding; beam 0: t2 id 8 (parent 0) <- t1 beam 0 id 9 = end
    np.testing.assert_array_equal(out[:, 1, 0], [6, 9, 9, 9])
    np.testing.assert_array_equal(out[:, 1, 1], [5, 7, 8, 9])
    bad = parents.copy()
    bad[1, 0, 1] = 7  # a parent outside the beam ends the walk with -1
    with tf.Graph().as_default(), tf.Session() as sess:
        out = sess.run(s2s.gather_tree(ids, bad, np.array([4, 0], np.int32), 9))
    np.testing.assert_array_equal(out[:, 0, 0], [-1, 4, 5, 6])
    assert (out[:, 1] == 9).all()  # length 0: all padding


def test_tile_batch_repeats_each_entry_in_place():
    x = np.arange(6).reshape(3, 2)
    with tf.Graph().as_default(), tf.Session() as sess:
        t = s2s.tile_batch(tf.constant(x), 2)
        assert t.shape.as_list() == [6, 2]
        np.testing.assert_array_equal(sess.run(t), np.repeat(x, 2, axis=0))


def _rnn_model(rng, v, emb_dim, units):
    return {
        "emb": rng.randn(v, emb_dim).astype(np.float32),
        "kernel": rng.randn(emb_dim + units, units).astype(np.float32),
        "bias": rng.randn(units).astype(np.float32) * 0.3,
        "out_k": rng.randn(units, v).astype(np.float32) * 2,
        "out_b": rng.randn(v).astype(np.float32),
    }


def _enumerate(m, h0, start, end, steps, lp):
    """Every sequence a beam search can keep, with its final score (numpy)."""
    out = []

    def go(prefix, h, total, tok):
        if len(prefix) == steps:
            # TF's lengths: the step emitting end_token scores without it, later steps with it
            first = prefix.index(end) if end in prefix else steps
            n = first + 1 if first < steps - 1 else first
            out.append((total / (((5 + n) / 6) ** lp if lp else 1), tuple(prefix)))
            return
        if prefix and prefix[-1] == end:
            go(prefix + [end], h, total, end)
            return
        h2 = np.tanh(np.concatenate([m["emb"][tok], h]) @ m["kernel"] + m["bias"])
        logits = h2 @ m["out_k"] + m["out_b"]
        logp = logits - np.log(np.exp(logits - logits.max()).sum()) - logits.max()
        for w in range(len(logp)):
            go(prefix + [w], h2, total + logp[w], w)

    go([], h0, 0.0, start)
    return sorted(out, reverse=True)


@pytest.mark.parametrize("lp", [0.0, 0.8])
def test_beam_search_wide_enough_keeps_the_best_sequences(lp):
    v, emb_dim, units, steps, k = 3, 2, 3, 3, 16  # 15 sequences at most: nothing is pruned
    rng = np.random.RandomState(5)
    m = _rnn_model(rng, v, emb_dim, units)
    h0 = rng.randn(2, units).astype(np.float32)
    start, end = np.array([1, 2], np.int32), 0
    with tf.Graph().as_default():
        cell = tf.nn.rnn_cell.BasicRNNCell(units)
        dense = tf.layers.Dense(v)
        dec = s2s.BeamSearchDecoder(
            cell,
            m["emb"],
            start,
            end,
            s2s.tile_batch(tf.constant(h0), k),
            k,
            output_layer=dense,
            length_penalty_weight=lp,
        )
        outs, state, _ = s2s.dynamic_decode(dec, maximum_iterations=steps)
        with tf.Session() as sess:
            for var in tf.global_variables():
                name = var.op.name
                var.load(
                    m["out_k"]
                    if "dense/kernel" in name
                    else m["out_b"]
                    if "dense/bias" in name
                    else m["kernel"]
                    if name.endswith("kernel")
                    else m["bias"],
                    sess,
                )
            ids, scores = sess.run([outs.predicted_ids, outs.beam_search_decoder_output.scores])
    assert ids.shape == (2, steps, k)
    for b in range(2):
        ref = _enumerate(m, h0[b], start[b], end, steps, lp)
        finite = scores[b, -1] > -1e30
        assert finite.sum() == len(ref)
        np.testing.assert_allclose(scores[b, -1][finite], [s for s, _ in ref], rtol=1e-4)
        assert [tuple(ids[b, :, j]) for j in np.nonzero(finite)[0]] == [p for _, p in ref]


def test_beam_search_with_attention_reorders_the_alignment_history():
    rng = np.random.RandomState(7)
    k, v, steps = 3, 5, 4
    mem = rng.randn(2, T, D).astype(np.float32)
    lens = np.array([5, 2], np.int32)
    emb = rng.randn(v, E).astype(np.float32)
    got = {}
    for reorder in (False, True):
        with tf.Graph().as_default():
            tf.set_random_seed(3)
            mech = s2s.BahdanauAttention(
                U, s2s.tile_batch(mem, k), memory_sequence_length=s2s.tile_batch(lens, k)
            )
            cell = s2s.AttentionWrapper(
                tf.nn.rnn_cell.GRUCell(U), mech, attention_layer_size=A, alignment_history=True
            )
            dec = s2s.BeamSearchDecoder(
                cell,
                emb,
                np.array([1, 1], np.int32),
                0,
                cell.zero_state(2 * k, tf.float32),
                k,
                output_layer=tf.layers.Dense(v),
                reorder_tensor_arrays=reorder,
            )
            outs, state, _ = s2s.dynamic_decode(dec, maximum_iterations=steps)
            hist = state.cell_state.alignment_history
            hist = hist.stack() if isinstance(hist, tf.TensorArray) else hist
            with tf.Session() as sess:
                sess.run(tf.global_variables_initializer())
                got[reorder] = sess.run(
                    [hist, outs.beam_search_decoder_output.parent_ids, state.lengths]
                )
    raw, parents, lengths = got[False]
    sorted_hist = got[True][0]
    np.testing.assert_array_equal(got[True][1], parents)  # the same search both times
    n = raw.shape[0]
    ref = np.empty_like(raw)
    for b in range(2):
        top = int(lengths[b].max())
        for j in range(k):
            beam = j
            for t in range(n - 1, -1, -1):
                if t < top:
                    if t < top - 1:
                        beam = parents[b, t + 1, beam]
                    src = beam if t < lengths[b, j] else j
                else:
                    src = j
                ref[t, b * k + j] = raw[t, b * k + src]
    np.testing.assert_allclose(sorted_hist, ref)
    # attention past a memory's length is zero, and each row is a distribution
    np.testing.assert_allclose(sorted_hist.sum(-1), 1, rtol=1e-5)
    assert (sorted_hist[:, k:, 2:] == 0).all()


def test_attention_and_beam_search_errors_name_the_problem():
    with tf.Graph().as_default():
        mem = tf.zeros([2, 3, 4])
        mech = s2s.LuongAttention(5, mem)
        att = s2s.AttentionWrapper(tf.nn.rnn_cell.BasicLSTMCell(4), mech)
        with pytest.raises(ValueError, match="Query .* has units: 4.*Keys .* have units: 5"):
            att(tf.zeros([2, 3]), att.zero_state(2, tf.float32))
        with pytest.raises(TypeError, match="AttentionMechanism"):
            s2s.AttentionWrapper(tf.nn.rnn_cell.BasicLSTMCell(4), mem)
        with pytest.raises(ValueError, match="tile_batch"):
            s2s.AttentionWrapper(tf.nn.rnn_cell.BasicLSTMCell(4), mech).zero_state(6, tf.float32)
        with pytest.raises(TypeError, match="AttentionWrapperState"):
            att(tf.zeros([2, 3]), tf.zeros([2, 4]))
        with pytest.raises(NotImplementedError, match="coverage_penalty_weight"):
            s2s.BeamSearchDecoder(
                tf.nn.rnn_cell.BasicLSTMCell(4),
                tf.zeros([3, 2]),
                [0, 0],
                1,
                tf.zeros([6, 4]),
                3,
                coverage_penalty_weight=0.5,
            )
        with pytest.raises(ValueError, match="multiplier must be >= 1"):
            s2s.tile_batch(mem, 0)
        untiled = s2s.AttentionWrapper(
            tf.nn.rnn_cell.BasicLSTMCell(4), s2s.LuongAttention(4, mem), name="untiled"
        )
        with pytest.raises(ValueError, match="need 6: tile the encoder's state"):
            s2s.BeamSearchDecoder(
                untiled, tf.zeros([3, 2]), [0, 0], 1, untiled.zero_state(2, tf.float32), 3
            )
        with pytest.raises(ValueError, match="Non-matching batch sizes.*tile_batch"):
            untiled(
                tf.zeros([6, 3]),
                untiled.zero_state(2, tf.float32)._replace(
                    cell_state=tf.nn.rnn_cell.LSTMStateTuple(tf.zeros([6, 4]), tf.zeros([6, 4])),
                    attention=tf.zeros([6, 4]),
                ),
            )
        with pytest.raises(TypeError, match="LSTMStateTuple"):
            tf.contrib.rnn.NASCell(4)(tf.zeros([2, 3]), tf.zeros([2, 4]))
        with pytest.raises(ValueError, match="inner dims"):
            s2s.LuongAttention(4, tf.placeholder(tf.float32, [2, 3, None]))


@pytest.mark.parametrize("kind", ["bahdanau", "luong"])
def test_monotonic_mechanisms_in_a_wrapper(kind):
    mem = np.random.RandomState(2).randn(2, 5, 4).astype(np.float32)
    with tf.Graph().as_default():
        if kind == "bahdanau":
            m = s2s.BahdanauMonotonicAttention(
                4, mem, memory_sequence_length=[5, 3], score_bias_init=-1.0
            )
        else:
            m = s2s.LuongMonotonicAttention(
                4, mem, memory_sequence_length=[5, 3], score_bias_init=-1.0
            )
        att = s2s.AttentionWrapper(tf.nn.rnn_cell.GRUCell(4), m)
        st = att.zero_state(2, tf.float32)
        first = st.alignments
        for _ in range(3):
            _, st = att(tf.ones([2, 3]), st)
        names = [v.op.name for v in tf.global_variables()]
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            a0, a = s.run([first, st.alignments])
    np.testing.assert_array_equal(a0, np.eye(5, dtype=np.float32)[[0, 0]])  # all on the first entry
    assert (a >= 0).all() and (a.sum(1) <= 1 + 1e-6).all() and (a[1, 3:] == 0).all()
    assert f"attention_wrapper/{kind}_monotonic_attention/attention_score_bias" in names
