"""tf.nn.dynamic_rnn / bidirectional_dynamic_rnn: unrolled for a static number of steps (the
same values as static_rnn over the unstacked steps), a while_loop for a number known only when
the graph runs (the same values and gradients as unrolled), rows of different lengths both ways
(reverse_sequence), TF's variable names, and TensorFlow's own values."""

from __future__ import annotations

import numpy as np
import pytest

import hetbed as hb
import hetbed.compat.v1 as hbtf

B, T, D, H = 3, 5, 4, 6
RNG = np.random.default_rng(0)
XV = RNG.standard_normal((B, T, D)).astype(np.float32)
LENS = np.array([5, 2, 0], np.int32)


def _run(build):
    with hb.Graph().as_default():
        fetches = build()
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            return s.run(fetches)


def test_dynamic_rnn_equals_static_rnn_with_lengths_and_time_major():
    def build():
        x = hb.constant(XV)
        cell = hb.nn.rnn_cell.BasicLSTMCell(H)
        out, st = hb.nn.dynamic_rnn(cell, x, sequence_length=LENS, dtype=hb.float32)
        tm_out, tm_st = hb.nn.dynamic_rnn(
            cell, hb.transpose(x, [1, 0, 2]), LENS, dtype=hb.float32, time_major=True
        )
        s_out, s_st = hb.nn.static_rnn(
            cell, hb.unstack(x, axis=1), dtype=hb.float32, sequence_length=LENS
        )
        return out, st, tm_out, tm_st, hb.stack(s_out, axis=1), s_st

    out, st, tm_out, tm_st, s_out, s_st = _run(build)
    assert out.shape == (B, T, H)
    np.testing.assert_allclose(out, s_out, rtol=1e-6)
    np.testing.assert_allclose(tm_out, np.transpose(s_out, (1, 0, 2)), rtol=1e-6)
    for a, b in ((st, s_st), (tm_st, s_st)):
        np.testing.assert_allclose(a.c, b.c, rtol=1e-6)
        np.testing.assert_allclose(a.h, b.h, rtol=1e-6)
    assert np.all(out[1, 2:] == 0) and np.all(out[2] == 0)  # past each row's length
    np.testing.assert_allclose(st.h[1], out[1, 1], rtol=1e-6)  # state at the last live step


def test_bidirectional_reads_the_steps_both_ways():
    names = []

    def build():
        x = hb.constant(XV)
        fw, bw = hb.nn.rnn_cell.GRUCell(H), hb.nn.rnn_cell.GRUCell(H)
        (o_fw, o_bw), (s_fw, s_bw) = hb.nn.bidirectional_dynamic_rnn(fw, bw, x, dtype=hb.float32)
        names.extend(sorted(v.op.name for v in hb.trainable_variables()))
        with hb.variable_scope("bidirectional_rnn/bw", reuse=True):
            r_out, _ = hb.nn.static_rnn(bw, hb.unstack(x, axis=1)[::-1], dtype=hb.float32)
        return o_fw, o_bw, s_fw, s_bw, hb.stack(r_out[::-1], axis=1)

    o_fw, o_bw, s_fw, s_bw, want_bw = _run(build)
    assert o_fw.shape == o_bw.shape == (B, T, H)
    np.testing.assert_allclose(o_bw, want_bw, rtol=1e-6)
    np.testing.assert_allclose(s_fw, o_fw[:, -1], rtol=1e-6)
    np.testing.assert_allclose(s_bw, o_bw[:, 0], rtol=1e-6)
    assert names == [
        "bidirectional_rnn/bw/gru_cell/candidate/bias",
        "bidirectional_rnn/bw/gru_cell/candidate/kernel",
        "bidirectional_rnn/bw/gru_cell/gates/bias",
        "bidirectional_rnn/bw/gru_cell/gates/kernel",
        "bidirectional_rnn/fw/gru_cell/candidate/bias",
        "bidirectional_rnn/fw/gru_cell/candidate/kernel",
        "bidirectional_rnn/fw/gru_cell/gates/bias",
        "bidirectional_rnn/fw/gru_cell/gates/kernel",
    ]


def test_unknown_time_dimension_runs_a_while_loop():
    """A time dimension known only when the graph runs: dynamic_rnn goes over it with a
    while_loop, giving the unrolled version's values, final states and gradients exactly
    (multi-layer cells, sequence lengths, time major), with the same variables."""
    weights = {}

    def run(known: bool, time_major: bool):
        with hb.Graph().as_default():
            shape = (
                [T if known else None, None, D] if time_major else [None, T if known else None, D]
            )
            x = hb.placeholder(hb.float32, shape)
            lens = hb.placeholder(hb.int32, [None])
            cell = hb.nn.rnn_cell.MultiRNNCell(
                [hb.nn.rnn_cell.BasicLSTMCell(H), hb.nn.rnn_cell.GRUCell(H)]
            )
            out, st = hb.nn.dynamic_rnn(
                cell, x, sequence_length=lens, dtype=hb.float32, time_major=time_major
            )
            loss = hb.reduce_sum(out * out) + hb.reduce_sum(st[1])
            variables = hb.trainable_variables()
            grads = hb.gradients(loss, variables)
            with hb.Session() as s:
                s.run(hb.global_variables_initializer())
                for v in variables:
                    w = weights.setdefault(
                        v.op.name, RNG.standard_normal(v.shape.as_list()).astype(np.float32) * 0.3
                    )
                    v.load(w, s)
                xv = np.transpose(XV, (1, 0, 2)) if time_major else XV
                got = s.run([out, st[0].h, st[1], *grads], {x: xv, lens: LENS})
            return [v.op.name for v in variables], got

    for time_major in (False, True):
        names_u, unrolled = run(True, time_major)
        names_l, looped = run(False, time_major)
        assert names_l == names_u
        for a, b in zip(unrolled, looped):
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def _np_reverse_sequence(x, lens, seq, batch):
    out = x.copy()
    for i, n in enumerate(lens):
        idx = [slice(None)] * x.ndim
        idx[batch], idx[seq] = i, slice(0, n)
        out[tuple(idx)] = np.flip(x[tuple(idx)], axis=seq - (seq > batch))
    return out


def test_reverse_sequence_is_numpy_and_its_own_gradient():
    """Each row's first seq_lengths entries reversed along seq_axis, whatever the two axes
    are; the gradient is the same reversal of the incoming gradient (its own inverse)."""
    x = RNG.standard_normal((4, 3, 5, 2)).astype(np.float32)
    w = RNG.standard_normal(x.shape).astype(np.float32)
    for seq, batch, lens in ((2, 0, [5, 0, 3, 1]), (0, 1, [4, 2, 0]), (-2, 3, [1, 5])):
        lv = np.array(lens, np.int64)
        with hb.Graph().as_default():
            xt = hb.constant(x)
            y = hb.reverse_sequence(xt, lv, seq_axis=seq, batch_axis=batch)
            (g,) = hb.gradients(hb.reduce_sum(y * w), [xt])
            with hb.Session() as s:
                yv, gv = s.run([y, g])
        want = _np_reverse_sequence(x, lv, seq % 4, batch)
        np.testing.assert_array_equal(yv, want)
        np.testing.assert_array_equal(gv, _np_reverse_sequence(w, lv, seq % 4, batch))
    with hb.Graph().as_default():
        with pytest.raises(hb.errors.InvalidArgumentError, match="seq_lengths has 2 entries but"):
            hb.reverse_sequence(hb.constant(x), [1, 2], seq_axis=1, batch_axis=0)
        with pytest.raises(hb.errors.InvalidArgumentError, match="must differ, both are 1"):
            hb.reverse_sequence(hb.constant(x), [1, 2, 3, 0], seq_axis=1, batch_axis=1)
        lens = hb.placeholder(hb.int32, [None])
        y = hb.reverse_sequence(hb.constant(x), lens, seq_dim=1, batch_dim=0, name="rs")
        with hb.Session() as s:
            with pytest.raises(hb.errors.InvalidArgumentError, match=r"'rs'.* lie in \[0, 3\]"):
                s.run(y, {lens: [1, 4, 0, 0]})


def _np_rnn(xs, lens, kernel, bias, reverse):
    """BasicRNNCell over each row within its length, in numpy: outputs zero past the length."""
    b, t, _ = xs.shape
    out = np.zeros((b, t, bias.shape[0]), np.float64)
    last = np.zeros((b, bias.shape[0]))
    for i in range(b):
        h = np.zeros(bias.shape[0])
        steps = range(lens[i])
        for k in reversed(steps) if reverse else steps:
            h = np.tanh(np.concatenate([xs[i, k], h]) @ kernel + bias)
            out[i, k] = h
        last[i] = h
    return out, last


@pytest.mark.parametrize("time_known", [True, False])
def test_bidirectional_with_lengths_reverses_each_row_within_its_length(time_known):
    """With sequence_length the backward cell reads each row's steps from its last live one
    down (numpy reference with the cells' own weights); outputs are zero past each row's
    length and the states are those at each row's end; also when the time dimension is known
    only when the graph runs (a while_loop each way)."""
    lens = np.array([5, 3, 0], np.int32)

    def build():
        x = hb.placeholder(hb.float32, [None, T if time_known else None, D])
        ln = hb.placeholder(hb.int32, [None])
        fw, bw = hb.nn.rnn_cell.BasicRNNCell(H), hb.nn.rnn_cell.BasicRNNCell(H)
        (o_fw, o_bw), (s_fw, s_bw) = hb.nn.bidirectional_dynamic_rnn(
            fw, bw, x, sequence_length=ln, dtype=hb.float32
        )
        variables = sorted(hb.trainable_variables(), key=lambda v: v.op.name)
        return x, ln, [o_fw, o_bw, s_fw, s_bw], variables

    with hb.Graph().as_default():
        x, ln, fetches, variables = build()
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            o_fw, o_bw, s_fw, s_bw = s.run(fetches, {x: XV, ln: lens})
            bw_b, bw_k, fw_b, fw_k = s.run(variables)
    assert [v.op.name for v in variables] == [
        "bidirectional_rnn/bw/basic_rnn_cell/bias",
        "bidirectional_rnn/bw/basic_rnn_cell/kernel",
        "bidirectional_rnn/fw/basic_rnn_cell/bias",
        "bidirectional_rnn/fw/basic_rnn_cell/kernel",
    ]
    want_fw, last_fw = _np_rnn(XV, lens, fw_k, fw_b, reverse=False)
    want_bw, last_bw = _np_rnn(XV, lens, bw_k, bw_b, reverse=True)
    np.testing.assert_allclose(o_fw, want_fw, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(o_bw, want_bw, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(s_fw, last_fw, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(s_bw, last_bw, rtol=1e-5, atol=1e-6)


def test_same_as_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    try:
        tf1.nn.rnn_cell.LSTMCell  # noqa: B018 - Keras 3 removed it
    except (AttributeError, ImportError):
        pytest.skip(
            "this TensorFlow has no tf.compat.v1.nn.rnn_cell (Keras 3): pip install tf-keras "
            "and set TF_USE_LEGACY_KERAS=1"
        )
    yv = RNG.standard_normal((B, T, H)).astype(np.float32)

    def program(tf, weights=None, steps=T):
        g = tf.Graph()
        with g.as_default():
            tf.set_random_seed(1)
            x = tf.placeholder(tf.float32, [None, steps, D])
            lens = tf.placeholder(tf.int32, [None])
            cell = tf.nn.rnn_cell.LSTMCell(H)
            out, st = tf.nn.dynamic_rnn(cell, x, sequence_length=lens, dtype=tf.float32)
            loss = tf.reduce_mean(tf.square(out - yv))
            variables = sorted(tf.trainable_variables(), key=lambda v: v.op.name)
            grads = tf.gradients(loss, variables)
            with tf.Session(graph=g) as s:
                s.run(tf.global_variables_initializer())
                if weights is not None:
                    for v, w in zip(variables, weights):
                        s.run(v.assign(w))
                vals = s.run([v for v in variables])
                got = s.run([out, st.h, loss] + grads, {x: XV, lens: LENS})
                return [v.op.name for v in variables], vals, got

    names_tf, weights, want = program(tf1)
    for steps in (T, None):  # unrolled, and a while_loop over a time dimension unknown to both
        names_hb, _, got = program(hbtf, weights, steps)
        assert names_hb == names_tf
        for a, b in zip(want, got):
            np.testing.assert_allclose(b, a, rtol=2e-5, atol=1e-6)


def test_bidirectional_same_as_tensorflow():
    """bidirectional_dynamic_rnn with rows of different lengths (LSTM both ways), its loss and
    gradients, against TensorFlow's, unrolled and over an unknown time dimension."""
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    try:
        tf1.nn.rnn_cell.LSTMCell  # noqa: B018 - Keras 3 removed it
    except (AttributeError, ImportError):
        pytest.skip("this TensorFlow has no tf.compat.v1.nn.rnn_cell (Keras 3)")
    yv = RNG.standard_normal((B, T, 2 * H)).astype(np.float32)

    def program(tf, weights=None, steps=T):
        g = tf.Graph()
        with g.as_default():
            tf.set_random_seed(2)
            x = tf.placeholder(tf.float32, [None, steps, D])
            lens = tf.placeholder(tf.int32, [None])
            (o_fw, o_bw), (s_fw, s_bw) = tf.nn.bidirectional_dynamic_rnn(
                tf.nn.rnn_cell.LSTMCell(H),
                tf.nn.rnn_cell.LSTMCell(H),
                x,
                sequence_length=lens,
                dtype=tf.float32,
            )
            out = tf.concat([o_fw, o_bw], 2)
            loss = tf.reduce_mean(tf.square(out - yv))
            variables = sorted(tf.trainable_variables(), key=lambda v: v.op.name)
            grads = tf.gradients(loss, variables + [x])
            with tf.Session(graph=g) as s:
                s.run(tf.global_variables_initializer())
                if weights is not None:
                    for v, w in zip(variables, weights):
                        s.run(v.assign(w))
                vals = s.run(list(variables))
                got = s.run([out, s_fw.h, s_bw.c, loss] + grads, {x: XV, lens: LENS})
                return [v.op.name for v in variables], vals, got

    names_tf, weights, want = program(tf1)
    for steps in (T, None):
        names_hb, _, got = program(hbtf, weights, steps)
        assert names_hb == names_tf
        for a, b in zip(want, got):
            np.testing.assert_allclose(b, a, rtol=2e-5, atol=1e-6)
