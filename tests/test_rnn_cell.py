"""RNN cells and static_rnn against numpy re-implementations of TF's formulas, and gradients
against finite differences."""

from __future__ import annotations

import numpy as np
import pytest

import hetbed.compat.v1 as tf

rnn = tf.nn.rnn_cell


def sig(v):
    return 1 / (1 + np.exp(-v))


def np_basic_rnn(x, h, c, v):
    h = np.tanh(np.concatenate([x, h], 1) @ v["kernel"] + v["bias"])
    return h, h, None


def np_lstm(x, h, c, v, fb=1.0, peep=False, clip=None, proj=False):
    z = np.concatenate([x, h], 1) @ v["kernel"] + v["bias"]
    i, j, f, o = np.split(z, 4, axis=1)
    if peep:
        c = sig(f + fb + v["w_f_diag"] * c) * c + sig(i + v["w_i_diag"] * c) * np.tanh(j)
    else:
        c = sig(f + fb) * c + sig(i) * np.tanh(j)
    if clip is not None:
        c = np.clip(c, -clip, clip)
    m = sig(o + v["w_o_diag"] * c) * np.tanh(c) if peep else sig(o) * np.tanh(c)
    if proj:
        m = m @ v["projection/kernel"]
    return m, m, c


def np_gru(x, h, c, v):
    g = sig(np.concatenate([x, h], 1) @ v["gates/kernel"] + v["gates/bias"])
    r, u = np.split(g, 2, axis=1)
    cand = np.tanh(np.concatenate([x, r * h], 1) @ v["candidate/kernel"] + v["candidate/bias"])
    h = u * h + (1 - u) * cand
    return h, h, None


def _vars(sess, prefix):
    vs = {
        v.name[len(prefix) : -2]: v for v in tf.trainable_variables() if v.name.startswith(prefix)
    }
    return dict(zip(vs, sess.run(list(vs.values()))))


CASES = {
    "basic_rnn": (lambda: rnn.BasicRNNCell(4), np_basic_rnn, "basic_rnn_cell/", 4, 4),
    "basic_lstm": (lambda: rnn.BasicLSTMCell(4, forget_bias=0.5), None, "basic_lstm_cell/", 4, 4),
    "lstm_peep_proj": (
        lambda: rnn.LSTMCell(4, use_peepholes=True, cell_clip=0.8, num_proj=3),
        lambda x, h, c, v: np_lstm(x, h, c, v, peep=True, clip=0.8, proj=True),
        "lstm_cell/",
        4,
        3,
    ),
    "lstm_plain": (lambda: rnn.LSTMCell(4), np_lstm, "lstm_cell/", 4, 4),
    "gru": (lambda: rnn.GRUCell(4), np_gru, "gru_cell/", 4, 4),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_static_rnn_matches_numpy_with_sequence_lengths(case):
    make, ref, prefix, n_c, n_h = CASES[case]
    if ref is None:
        ref = lambda x, h, c, v: np_lstm(x, h, c, v, fb=0.5)  # noqa: E731
    tf.reset_default_graph()
    tf.set_random_seed(1)
    rng = np.random.default_rng(2)
    steps, batch, depth = 5, 3, 2
    xs = rng.normal(size=(steps, batch, depth)).astype(np.float32)
    lengths = np.array([5, 2, 0])
    inputs = [tf.placeholder(tf.float32, [None, depth], name=f"x{t}") for t in range(steps)]
    seq = tf.placeholder(tf.int32, [None])
    outs, state = tf.nn.static_rnn(make(), inputs, dtype=tf.float32, sequence_length=seq)
    feed = {p: xs[t] for t, p in enumerate(inputs)}
    feed[seq] = lengths
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got_outs, got_state = sess.run([outs, state], feed)
        v = _vars(sess, "rnn/" + prefix)
    h = np.zeros((batch, n_h), np.float32)
    c = np.zeros((batch, n_c), np.float32)
    for t in range(steps):
        out, nh, nc = ref(xs[t], h, c, v)
        live = (lengths > t)[:, None]
        np.testing.assert_allclose(got_outs[t], np.where(live, out, 0), rtol=1e-5, atol=1e-6)
        h = np.where(live, nh, h)
        if nc is not None:
            c = np.where(live, nc, c)
    if isinstance(got_state, tuple):
        np.testing.assert_allclose(got_state.c, c, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got_state.h, h, rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_allclose(got_state, h, rtol=1e-5, atol=1e-6)


def test_multi_cell_names_state_and_contrib_alias():
    tf.reset_default_graph()
    cell = tf.contrib.rnn.MultiRNNCell([tf.contrib.rnn.GRUCell(3), rnn.BasicLSTMCell(2)])
    assert cell.state_size == (3, tf.nn.rnn_cell.LSTMStateTuple(2, 2))
    x = [tf.placeholder(tf.float32, [4, 5]) for _ in range(2)]
    outs, (s0, s1) = tf.nn.static_rnn(cell, x, dtype=tf.float32)
    assert outs[-1].shape.as_list() == [4, 2] and s0.shape.as_list() == [4, 3]
    assert isinstance(s1, tf.nn.rnn_cell.LSTMStateTuple)
    names = sorted(v.name for v in tf.trainable_variables())
    assert names == [
        "rnn/multi_rnn_cell/cell_0/gru_cell/candidate/bias:0",
        "rnn/multi_rnn_cell/cell_0/gru_cell/candidate/kernel:0",
        "rnn/multi_rnn_cell/cell_0/gru_cell/gates/bias:0",
        "rnn/multi_rnn_cell/cell_0/gru_cell/gates/kernel:0",
        "rnn/multi_rnn_cell/cell_1/basic_lstm_cell/bias:0",
        "rnn/multi_rnn_cell/cell_1/basic_lstm_cell/kernel:0",
    ]
    zs = cell.zero_state(4, tf.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        z = sess.run(zs)
        gb = sess.run([v for v in tf.trainable_variables() if "gates/bias" in v.name][0])
    assert z[0].shape == (4, 3) and not z[0].any() and z[1].c.shape == (4, 2)
    np.testing.assert_array_equal(gb, np.ones(6))  # TF's GRU gate bias starts at 1


def test_lstm_gradients_match_finite_differences():
    tf.reset_default_graph()
    rng = np.random.default_rng(3)
    xs = rng.normal(size=(3, 2, 2))
    inputs = [tf.constant(xs[t]) for t in range(3)]
    cell = rnn.LSTMCell(3, use_peepholes=True, num_proj=2)
    outs, state = tf.nn.static_rnn(cell, inputs, dtype=tf.float64)
    loss = tf.reduce_sum(tf.square(outs[-1])) + tf.reduce_sum(state.c)
    params = tf.trainable_variables()
    grads = tf.gradients(loss, params)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        g = sess.run(grads)
        for p, gp in zip(params, g):
            val = sess.run(p)
            flat = val.ravel()
            for k in rng.choice(flat.size, size=min(3, flat.size), replace=False):
                eps = 1e-6
                vals = []
                for d in (eps, -eps):
                    w = flat.copy()
                    w[k] += d
                    sess.run(tf.assign(p, w.reshape(val.shape)))
                    vals.append(sess.run(loss))
                sess.run(tf.assign(p, val))
                np.testing.assert_allclose(
                    gp.ravel()[k], (vals[0] - vals[1]) / (2 * eps), rtol=1e-4, atol=1e-7
                )


def test_dropout_wrapper_scales_kept_outputs_and_errors():
    tf.reset_default_graph()
    x = [tf.constant(np.ones((200, 3), np.float32))]
    base = rnn.BasicRNNCell(4)
    outs, _ = tf.nn.static_rnn(
        rnn.DropoutWrapper(base, output_keep_prob=0.5, seed=7), x, dtype=tf.float32
    )
    plain = base(x[0], tf.zeros([200, 4]))[0]  # the same cell's weights, no dropout
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        d, p = sess.run([outs[0], plain])
    kept = d != 0
    np.testing.assert_allclose(d[kept], 2 * p[kept], rtol=1e-5)
    assert 0.35 < kept.mean() < 0.65
    with pytest.raises(ValueError, match="output_keep_prob"):
        rnn.DropoutWrapper(base, output_keep_prob=0.0)
    with pytest.raises(ValueError, match="initial_state or dtype"):
        tf.nn.static_rnn(base, x)
    z = base.zero_state(tf.constant(3), tf.float32)  # a constant batch size: a static shape
    assert (z[0] if isinstance(z, tuple) else z).shape.as_list() == [3, 4]
    with pytest.raises(ValueError, match=r"\[batch, depth\]"):
        base(tf.zeros([2, 3, 4]), tf.zeros([2, 4]))


def test_zero_state_for_a_batch_size_known_when_the_step_runs():
    """``cell.zero_state(tf.shape(x)[0], tf.float32)`` as TF1 programs write it: zeros of the
    fed batch, and dynamic_rnn from it matches dynamic_rnn with dtype=."""
    xv = np.random.default_rng(0).standard_normal((5, 2, 3)).astype(np.float32)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 2, 3])
        cell = tf.nn.rnn_cell.MultiRNNCell([tf.nn.rnn_cell.LSTMCell(4) for _ in range(2)])
        st = cell.zero_state(tf.shape(x)[0], tf.float32)
        assert st[0].c.shape.as_list() == [None, 4]
        with tf.variable_scope("rnn"):
            a, _ = tf.nn.dynamic_rnn(cell, x, initial_state=st)
        with tf.variable_scope("rnn", reuse=True):
            b, _ = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            zs, got_a, got_b = s.run([st, a, b], {x: xv})
        with pytest.raises(TypeError, match="integer scalar"):
            cell.zero_state(tf.constant(2.0), tf.float32)
    assert zs[1].h.shape == (5, 4) and not zs[1].h.any()
    np.testing.assert_allclose(got_a, got_b, rtol=1e-6)


def test_static_bidirectional_rnn_is_the_dynamic_one_over_a_list():
    """static_bidirectional_rnn (with sequence lengths) gives, step by step, the forward and
    backward outputs of bidirectional_dynamic_rnn with the same variables, joined on depth."""
    rng = np.random.default_rng(1)
    xv = rng.standard_normal((3, 4, 2)).astype(np.float32)  # batch, time, depth
    lens = np.array([4, 2, 3], np.int32)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [3, 4, 2])
        n = tf.placeholder(tf.int32, [3])
        fw, bw = tf.nn.rnn_cell.GRUCell(3), tf.nn.rnn_cell.LSTMCell(2)
        outs, st_fw, st_bw = tf.contrib.rnn.static_bidirectional_rnn(
            fw, bw, tf.unstack(x, 4, 1), dtype=tf.float32, sequence_length=n
        )
        assert outs[0].shape.as_list() == [3, 5]
        names = sorted(v.op.name for v in tf.global_variables())
        assert all(
            m.startswith("bidirectional_rnn/fw/") or m.startswith("bidirectional_rnn/bw/")
            for m in names
        )
        with tf.variable_scope(tf.get_variable_scope(), reuse=True):
            (o_fw, o_bw), (d_fw, d_bw) = tf.nn.bidirectional_dynamic_rnn(
                fw, bw, x, sequence_length=n, dtype=tf.float32
            )
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            got, want, sf, sb, wf, wb = s.run(
                [outs, tf.concat([o_fw, o_bw], 2), st_fw, st_bw, d_fw, d_bw], {x: xv, n: lens}
            )
    np.testing.assert_allclose(np.stack(got, 1), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(sf, wf, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(sb.h, wb.h, rtol=1e-5, atol=1e-6)
    assert not np.stack(got, 1)[1, 2:].any()  # zeros past a row's length, both directions


def test_residual_wrapper_block_cells_and_make_template():
    """ResidualWrapper adds the input to the cell's output; contrib's LSTMBlockCell and
    GRUBlockCell are the LSTM and GRU of BasicLSTMCell and GRUCell (same variables, same
    values); make_template shares its first call's variables with every later call."""
    rng = np.random.default_rng(5)
    xv = rng.standard_normal((2, 3, 4)).astype(np.float32)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [2, 3, 4])
        with tf.variable_scope("res"):
            plain, _ = tf.nn.dynamic_rnn(tf.nn.rnn_cell.GRUCell(4), x, dtype=tf.float32)
        with tf.variable_scope("res", reuse=True):
            res, _ = tf.nn.dynamic_rnn(
                tf.nn.rnn_cell.ResidualWrapper(tf.nn.rnn_cell.GRUCell(4)), x, dtype=tf.float32
            )
        with tf.variable_scope("blk"):
            a, _ = tf.nn.dynamic_rnn(tf.contrib.rnn.LSTMBlockCell(4), x, dtype=tf.float32)
        with tf.variable_scope("blk", reuse=True):
            b, _ = tf.nn.dynamic_rnn(
                tf.nn.rnn_cell.BasicLSTMCell(4, name="lstm_cell"), x, dtype=tf.float32
            )
        dense = tf.make_template("lin", lambda v, units: tf.layers.dense(v, units), units=2)
        y1, y2 = dense(x), dense(x * 2.0)
        n_vars = len(dense.trainable_variables)
        assert dense.variable_scope_name == "lin"
        bias = [v for v in dense.trainable_variables if "bias" in v.op.name][0]
        bias_init = tf.assign(bias, [0.5, -1.0])
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            s.run(bias_init)
            got = s.run([plain, res, a, b, y1, y2], {x: xv})
    assert n_vars == 2
    np.testing.assert_allclose(got[1], got[0] + xv, rtol=1e-6)
    np.testing.assert_allclose(got[2], got[3], rtol=1e-6)
    # one kernel w and bias b for both calls: 2 * (x w + b) - (2x w + b) = b everywhere
    np.testing.assert_allclose(
        2 * got[4] - got[5], np.broadcast_to([0.5, -1.0], got[4].shape), atol=1e-5
    )
