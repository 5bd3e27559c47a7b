"""contrib.legacy_seq2seq and the contrib.rnn cells added with it, against numpy references
written here (TF 1.15's formulas step by step) and TF's variable names."""

import copy

import numpy as np
import pytest

import hetbed.compat.v1 as tf

ls = tf.contrib.legacy_seq2seq


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _load(sess, values):
    """Set each global variable to values[its name without the ':0']."""
    for v in tf.global_variables():
        v.load(values[v.op.name], sess)


def _rand(rng, shapes):
    return {k: rng.randn(*s).astype(np.float32) * 0.5 for k, s in shapes.items()}


def test_rnn_decoder_with_a_loop_function_feeds_back_its_outputs():
    rng = np.random.RandomState(0)
    n, d, steps = 3, 3, 4
    x0 = rng.randn(2, d).astype(np.float32)
    h0 = rng.randn(2, n).astype(np.float32)
    w = _rand(
        rng,
        {"rnn_decoder/basic_rnn_cell/kernel": (d + n, n), "rnn_decoder/basic_rnn_cell/bias": (n,)},
    )
    with tf.Graph().as_default():
        cell = tf.nn.rnn_cell.BasicRNNCell(n)
        inputs = [tf.constant(x0)] + [tf.zeros([2, d]) for _ in range(steps - 1)]
        outs, state = ls.rnn_decoder(
            inputs, tf.constant(h0), cell, loop_function=lambda prev, i: prev * 2.0
        )
        assert sorted(v.op.name for v in tf.global_variables()) == sorted(w)
        with tf.Session() as s:
            _load(s, w)
            got, st = s.run([outs, state])
    k, b = w["rnn_decoder/basic_rnn_cell/kernel"], w["rnn_decoder/basic_rnn_cell/bias"]
    h, x = h0, x0
    for t in range(steps):
        h = np.tanh(np.concatenate([x, h], 1) @ k + b)
        np.testing.assert_allclose(got[t], h, rtol=1e-5, atol=1e-6)
        x = 2 * h
    np.testing.assert_allclose(st, h, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("heads", [1, 2])
def test_attention_decoder_equals_the_formulas(heads):
    rng = np.random.RandomState(heads)
    batch, length, size, n, d, out_size, steps = 2, 4, 3, 3, 2, 5, 3
    states = rng.randn(batch, length, size).astype(np.float32)
    xs = rng.randn(steps, batch, d).astype(np.float32)
    h0 = rng.randn(batch, n).astype(np.float32)
    p = "attention_decoder/"
    shapes = {
        p + "kernel": (d + heads * size, d),
        p + "bias": (d,),
        p + "basic_rnn_cell/kernel": (d + n, n),
        p + "basic_rnn_cell/bias": (n,),
        p + "AttnOutputProjection/kernel": (n + heads * size, out_size),
        p + "AttnOutputProjection/bias": (out_size,),
    }
    for a in range(heads):
        shapes |= {
            f"{p}AttnW_{a}": (1, 1, size, size),
            f"{p}AttnV_{a}": (size,),
            f"{p}Attention_{a}/kernel": (n, size),
            f"{p}Attention_{a}/bias": (size,),
        }
    w = _rand(rng, shapes)
    with tf.Graph().as_default():
        outs, state = ls.attention_decoder(
            [tf.constant(x) for x in xs],
            tf.constant(h0),
            tf.constant(states),
            tf.nn.rnn_cell.BasicRNNCell(n),
            output_size=out_size,
            num_heads=heads,
        )
        assert sorted(v.op.name for v in tf.global_variables()) == sorted(w)
        with tf.Session() as s:
            _load(s, w)
            got = s.run(outs)
    feats = [states @ w[f"{p}AttnW_{a}"][0, 0] for a in range(heads)]

    def attend(q):
        reads = []
        for a in range(heads):
            y = q @ w[f"{p}Attention_{a}/kernel"] + w[f"{p}Attention_{a}/bias"]
            s = (w[f"{p}AttnV_{a}"] * np.tanh(feats[a] + y[:, None])).sum(-1)
            reads.append(np.einsum("bl,bls->bs", _softmax(s), states))
        return reads

    h, attns = h0, [np.zeros((batch, size), np.float32)] * heads
    for t in range(steps):
        x = np.concatenate([xs[t], *attns], 1) @ w[p + "kernel"] + w[p + "bias"]
        h = np.tanh(
            np.concatenate([x, h], 1) @ w[p + "basic_rnn_cell/kernel"]
            + w[p + "basic_rnn_cell/bias"]
        )
        attns = attend(h)
        out = (
            np.concatenate([h, *attns], 1) @ w[p + "AttnOutputProjection/kernel"]
            + w[p + "AttnOutputProjection/bias"]
        )
        np.testing.assert_allclose(got[t], out, rtol=1e-4, atol=1e-5)


def test_sequence_losses_equal_numpy():
    rng = np.random.RandomState(3)
    logits = [rng.randn(3, 5).astype(np.float32) for _ in range(4)]
    targets = [rng.randint(0, 5, 3) for _ in range(4)]
    weights = [rng.uniform(0.2, 1, 3).astype(np.float32) for _ in range(4)]
    xent = [-np.log(_softmax(lg)[np.arange(3), tg]) for lg, tg in zip(logits, targets)]
    per_example = sum(x * wt for x, wt in zip(xent, weights)) / (sum(weights) + 1e-12)
    with tf.Graph().as_default(), tf.Session() as s:
        a, b, c = s.run(
            [
                ls.sequence_loss_by_example(logits, targets, weights),
                ls.sequence_loss(logits, targets, weights),
                ls.sequence_loss(
                    logits,
                    targets,
                    weights,
                    average_across_timesteps=False,
                    average_across_batch=False,
                ),
            ]
        )
    np.testing.assert_allclose(a, per_example, rtol=1e-5)
    np.testing.assert_allclose(b, per_example.sum() / 3, rtol=1e-5)
    np.testing.assert_allclose(c, sum((x * wt).sum() for x, wt in zip(xent, weights)), rtol=1e-5)
    with pytest.raises(ValueError, match="must be the same"):
        ls.sequence_loss(logits, targets[:2], weights)


def test_model_with_buckets_shares_one_set_of_variables_named_as_tf():
    with tf.Graph().as_default():
        cell = tf.nn.rnn_cell.GRUCell(4)
        enc = [tf.placeholder(tf.int32, [None]) for _ in range(5)]
        dec = [tf.placeholder(tf.int32, [None]) for _ in range(6)]
        targets = dec[1:] + [tf.zeros_like(dec[0])]
        weights = [tf.ones([2]) for _ in dec]

        def seq2seq(e, d):
            return ls.embedding_attention_seq2seq(e, d, copy.deepcopy(cell), 7, 8, 3)

        outs, losses = ls.model_with_buckets(enc, dec, targets, weights, [(3, 4), (5, 6)], seq2seq)
        names = [v.op.name for v in tf.global_variables()]
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            feed = {p: np.array([1, 2]) for p in enc + dec}
            l0, l1 = s.run(losses, feed)
        with pytest.raises(ValueError, match="last bucket"):
            ls.model_with_buckets(enc[:2], dec, targets, weights, [(3, 4)], seq2seq)
    assert [len(o) for o in outs] == [4, 6] and np.isfinite([l0, l1]).all()
    p = "embedding_attention_seq2seq/"
    q = p + "embedding_attention_decoder/attention_decoder/"
    assert sorted(names) == sorted(
        [
            p + "rnn/embedding_wrapper/embedding",
            *(
                f"{p}rnn/embedding_wrapper/gru_cell/{g}/{k}"
                for g in ("gates", "candidate")
                for k in ("kernel", "bias")
            ),
            p + "embedding_attention_decoder/embedding",
            q + "AttnW_0",
            q + "AttnV_0",
            q + "kernel",
            q + "bias",
            *(
                f"{q}output_projection_wrapper/gru_cell/{g}/{k}"
                for g in ("gates", "candidate")
                for k in ("kernel", "bias")
            ),
            q + "output_projection_wrapper/kernel",
            q + "output_projection_wrapper/bias",
            q + "Attention_0/kernel",
            q + "Attention_0/bias",
            q + "AttnOutputProjection/kernel",
            q + "AttnOutputProjection/bias",
        ]
    )


def test_nas_and_highway_cells_equal_the_formulas():
    rng = np.random.RandomState(4)
    x = rng.randn(2, 3).astype(np.float32)
    c0, m0 = rng.randn(2, 4).astype(np.float32), rng.randn(2, 4).astype(np.float32)
    w = _rand(
        rng,
        {
            "nas_cell/kernel": (3, 32),
            "nas_cell/recurrent_kernel": (4, 32),
            "nas_cell/bias": (32,),
            "carry_w": (3, 3),
            "carry_b": (3,),
            "basic_rnn_cell/kernel": (6, 3),
            "basic_rnn_cell/bias": (3,),
        },
    )
    with tf.Graph().as_default():
        nas = tf.contrib.rnn.NASCell(4, use_bias=True)
        out, (c1, m1) = nas(
            tf.constant(x), tf.nn.rnn_cell.LSTMStateTuple(tf.constant(c0), tf.constant(m0))
        )
        hw = tf.contrib.rnn.HighwayWrapper(tf.nn.rnn_cell.BasicRNNCell(3))
        hout, _ = hw(tf.constant(x), tf.constant(x))
        with tf.Session() as s:
            _load(s, w)
            got, gc, hgot = s.run([out, c1, hout])
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    xs = np.split(x @ w["nas_cell/kernel"], 8, 1)
    ms = np.split(m0 @ w["nas_cell/recurrent_kernel"] + w["nas_cell/bias"], 8, 1)
    relu = lambda v: np.maximum(v, 0)  # noqa: E731
    l1 = [
        sig(xs[0] + ms[0]),
        relu(xs[1] + ms[1]),
        sig(xs[2] + ms[2]),
        relu(xs[3] * ms[3]),
        np.tanh(xs[4] + ms[4]),
        sig(xs[5] + ms[5]),
        np.tanh(xs[6] + ms[6]),
        sig(xs[7] + ms[7]),
    ]
    c = np.tanh(np.tanh(l1[0] * l1[1]) + c0) * np.tanh(l1[2] + l1[3])
    m = np.tanh(c * np.tanh(np.tanh(l1[4] * l1[5]) + sig(l1[6] + l1[7])))
    np.testing.assert_allclose(gc, c, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got, m, rtol=1e-5, atol=1e-6)
    cell_out = np.tanh(
        np.concatenate([x, x], 1) @ w["basic_rnn_cell/kernel"] + w["basic_rnn_cell/bias"]
    )
    carry = sig(x @ w["carry_w"] + w["carry_b"])
    np.testing.assert_allclose(hgot, x * carry + cell_out * (1 - carry), rtol=1e-5, atol=1e-6)


def test_fused_lstm_and_stacked_bidirectional_rnns_match_their_compositions():
    rng = np.random.RandomState(6)
    x = rng.randn(5, 2, 3).astype(np.float32)  # time major
    lengths = np.array([5, 3], np.int32)
    with tf.Graph().as_default():
        fused = tf.contrib.rnn.LSTMBlockFusedCell(4)
        out, (c, h) = fused(tf.constant(x), dtype=tf.float32, sequence_length=lengths)
        with tf.variable_scope("ref"):
            ref_out, ref_state = tf.nn.dynamic_rnn(
                tf.nn.rnn_cell.BasicLSTMCell(4),
                x,
                sequence_length=lengths,
                dtype=tf.float32,
                time_major=True,
            )
        stacked, fw_states, _ = tf.contrib.rnn.stack_bidirectional_dynamic_rnn(
            [tf.nn.rnn_cell.GRUCell(2), tf.nn.rnn_cell.GRUCell(2)],
            [tf.nn.rnn_cell.GRUCell(2), tf.nn.rnn_cell.GRUCell(2)],
            tf.constant(x),
            dtype=tf.float32,
            time_major=True,
        )
        names = [v.op.name for v in tf.global_variables()]
        assert names[:2] == ["lstm_block_fused_cell/kernel", "lstm_block_fused_cell/bias"]
        assert "stack_bidirectional_rnn/cell_1/bidirectional_rnn/bw/gru_cell/gates/kernel" in names
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            for v in tf.global_variables():
                if v.op.name.startswith("ref/"):
                    v.load(
                        s.run(
                            tf.global_variables()[
                                names.index("lstm_block_fused_cell/" + v.op.name.split("/")[-1])
                            ]
                        ),
                        s,
                    )
            got, gh, want, wh, st = s.run([out, h, ref_out, ref_state.h, stacked])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gh, wh, rtol=1e-5, atol=1e-6)
    assert (got[3:, 1] == 0).all() and st.shape == (5, 2, 4) and len(fw_states) == 2


def test_deep_copies_of_a_built_cell_reuse_its_variables_by_name():
    with tf.Graph().as_default():
        cell = tf.nn.rnn_cell.BasicLSTMCell(3)
        x = tf.ones([2, 2])
        with tf.variable_scope("m"):
            cell(x, cell.zero_state(2, tf.float32))
        twin = copy.deepcopy(cell)
        assert twin._vars is None and cell._vars is not None
        with tf.variable_scope("m", reuse=True):
            twin(x, twin.zero_state(2, tf.float32))
        assert twin._vars["kernel"] is cell._vars["kernel"]
        assert len(tf.global_variables()) == 2
