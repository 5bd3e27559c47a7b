"""contrib.rnn's research cells (hetbed/compat/v1/contrib_rnn_research.py) run through
dynamic_rnn against numpy re-implementations of TF 1.15's formulas, fed the variables the
cells made; TF 1.15's variable names and shapes."""

from __future__ import annotations

import numpy as np
import pytest

import hetbed.compat.v1 as tf

rnn = tf.contrib.rnn
RNG = np.random.default_rng(0)
T, B, D = 3, 2, 4
XS = RNG.normal(size=(B, T, D)).astype(np.float32)


def sig(x):
    return 1 / (1 + np.exp(-x))


def _run(cell, xs=XS, **kw):
    """dynamic_rnn over ``xs``: outputs, final state, {short variable name: value}."""
    with tf.Graph().as_default():
        tf.set_random_seed(1)
        out, st = tf.nn.dynamic_rnn(cell, tf.constant(xs), dtype=tf.float32, **kw)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            o, f = s.run([out, st])
            vs = {v.op.name: s.run(v) for v in tf.global_variables()}
    return o, f, vs


def _steps(step, state):
    outs = []
    for t in range(T):
        o, state = step(XS[:, t].astype(np.float64), state)
        outs.append(o)
    return np.stack(outs, 1), state


def test_coupled_input_forget_gate_lstm_cell_peepholes_projection_shards():
    n, p = 5, 3
    cell = rnn.CoupledInputForgetGateLSTMCell(
        n, use_peepholes=True, num_proj=p, proj_clip=0.3, num_unit_shards=2, forget_bias=0.5
    )
    o, (c, m), v = _run(cell)
    pre = "rnn/coupled_input_forget_gate_lstm_cell/"
    assert sorted(v) == sorted(pre + k for k in ("W_0", "W_1", "B", "W_F_diag", "W_O_diag", "W_P"))
    assert v[pre + "W_0"].shape == (4, 15) and v[pre + "W_1"].shape == (3, 15)  # 7 rows
    w = np.concatenate([v[pre + "W_0"], v[pre + "W_1"]])

    def step(x, s):
        c0, m0 = s
        j, f, oo = np.split(np.concatenate([x, m0], 1) @ w + v[pre + "B"], 3, 1)
        fa = sig(f + 0.5 + v[pre + "W_F_diag"] * c0)
        c1 = fa * c0 + (1 - fa) * np.tanh(j)
        m1 = sig(oo + v[pre + "W_O_diag"] * c1) * np.tanh(c1)
        m1 = np.clip(m1 @ v[pre + "W_P"], -0.3, 0.3)
        return m1, (c1, m1)

    want, (wc, wm) = _steps(step, (np.zeros((B, n)), np.zeros((B, p))))
    np.testing.assert_allclose(o, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c, wc, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m, wm, rtol=1e-5, atol=1e-6)


def test_coupled_input_forget_gate_lstm_cell_layer_norm():
    n = 4
    o, _, v = _run(rnn.CoupledInputForgetGateLSTMCell(n, layer_norm=True, norm_gain=1.5))
    pre = "rnn/coupled_input_forget_gate_lstm_cell/"
    for sc in ("transform", "forget", "output", "state"):
        np.testing.assert_array_equal(v[f"{pre}{sc}/gamma"], 1.5)
        np.testing.assert_array_equal(v[f"{pre}{sc}/beta"], 0.0)

    def ln(x):
        return (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-12) * 1.5

    def step(x, s):
        c0, m0 = s
        j, f, oo = np.split(np.concatenate([x, m0], 1) @ v[pre + "W"], 3, 1)  # no B
        fa = sig(ln(f) + 1.0)
        c1 = ln(fa * c0 + (1 - fa) * np.tanh(ln(j)))
        m1 = sig(ln(oo)) * np.tanh(c1)
        return m1, (c1, m1)

    want, _ = _steps(step, (np.zeros((B, n)), np.zeros((B, n))))
    np.testing.assert_allclose(o, want, rtol=1e-4, atol=1e-5)


def test_ugrnn_cell():
    n = 3
    o, h, v = _run(rnn.UGRNNCell(n, forget_bias=0.7, initializer=tf.constant_initializer(0.1)))
    pre = "rnn/ugrnn_cell/"
    assert sorted(v) == [pre + "bias", pre + "kernel"]
    np.testing.assert_allclose(v[pre + "kernel"], 0.1)  # the cell's initializer

    def step(x, s):
        g, c = np.split(np.concatenate([x, s], 1) @ v[pre + "kernel"] + v[pre + "bias"], 2, 1)
        g = sig(g + 0.7)
        s = g * s + (1 - g) * np.tanh(c)
        return s, s

    want, wh = _steps(step, np.zeros((B, n)))
    np.testing.assert_allclose(o, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h, wh, rtol=1e-5, atol=1e-6)


def test_ind_rnn_cell():
    n = 3
    o, _, v = _run(rnn.IndRNNCell(n, activation=tf.nn.relu))
    pre = "rnn/ind_rnn_cell/"
    assert sorted(v) == [pre + "bias", pre + "kernel_u", pre + "kernel_w"]
    assert v[pre + "kernel_u"].shape == (1, n) and np.abs(v[pre + "kernel_u"]).max() <= 1

    def step(x, s):
        s = np.maximum(x @ v[pre + "kernel_w"] + s * v[pre + "kernel_u"] + v[pre + "bias"], 0)
        return s, s

    want, _ = _steps(step, np.zeros((B, n)))
    np.testing.assert_allclose(o, want, rtol=1e-5, atol=1e-6)


def test_indy_gru_cell():
    n = 3
    o, _, v = _run(rnn.IndyGRUCell(n))
    pre = "rnn/indy_gru_cell/"
    names = ["gates/kernel_w", "gates/kernel_u", "gates/bias"]
    names += ["candidate/kernel", "candidate/kernel_u", "candidate/bias"]
    assert sorted(v) == sorted(pre + k for k in names)
    np.testing.assert_array_equal(v[pre + "gates/bias"], 1.0)

    def step(x, s):
        g = x @ v[pre + "gates/kernel_w"] + np.tile(s, [1, 2]) * v[pre + "gates/kernel_u"]
        r, u = np.split(sig(g + v[pre + "gates/bias"]), 2, 1)
        cand = x @ v[pre + "candidate/kernel"] + r * s * v[pre + "candidate/kernel_u"]
        h = u * s + (1 - u) * np.tanh(cand + v[pre + "candidate/bias"])
        return h, h

    want, _ = _steps(step, np.zeros((B, n)))
    np.testing.assert_allclose(o, want, rtol=1e-5, atol=1e-6)


def test_indy_lstm_cell():
    n = 3
    o, (c, h), v = _run(rnn.IndyLSTMCell(n, forget_bias=0.25))
    pre = "rnn/indy_lstm_cell/"
    assert sorted(v) == [pre + "bias", pre + "kernel_u", pre + "kernel_w"]

    def step(x, s):
        c0, h0 = s
        g = x @ v[pre + "kernel_w"] + np.tile(h0, [1, 4]) * v[pre + "kernel_u"] + v[pre + "bias"]
        i, j, f, oo = np.split(g, 4, 1)
        c1 = c0 * sig(f + 0.25) + sig(i) * np.tanh(j)
        h1 = np.tanh(c1) * sig(oo)
        return h1, (c1, h1)

    want, (wc, wh) = _steps(step, (np.zeros((B, n)), np.zeros((B, n))))
    np.testing.assert_allclose(o, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c, wc, rtol=1e-5, atol=1e-6)


def _conv_same_np(x, k):
    """SAME, stride 1 correlation over the spatial axes of x [B, *S, C] with k [*K, C, F]."""
    nd = x.ndim - 2
    pads = [(0, 0)] + [((ks - 1) // 2, ks - 1 - (ks - 1) // 2) for ks in k.shape[:nd]] + [(0, 0)]
    xp = np.pad(x, pads)
    out = np.zeros(x.shape[:-1] + (k.shape[-1],))
    for off in np.ndindex(*k.shape[:nd]):
        sl = tuple(slice(o, o + s) for o, s in zip(off, x.shape[1:-1], strict=True))
        out += xp[(slice(None), *sl)] @ k[off]
    return out


@pytest.mark.parametrize("nd", [1, 2])
def test_conv_lstm_cell(nd):
    spatial = [5] if nd == 1 else [4, 3]
    xs = RNG.normal(size=(B, T, *spatial, 2)).astype(np.float32)
    cls = rnn.Conv1DLSTMCell if nd == 1 else rnn.Conv2DLSTMCell
    cell = cls(input_shape=[*spatial, 2], output_channels=3, kernel_shape=[3] * nd, forget_bias=0.5)
    assert cell.output_size.as_list() == [*spatial, 3]
    with tf.Graph().as_default():
        x = tf.constant(xs)
        state = cell.zero_state(B, tf.float32)
        outs = []
        with tf.variable_scope("rnn"):
            for t in range(T):
                out, state = cell(x[:, t], state)
                outs.append(out)
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            o, (c, h) = s.run([tf.stack(outs, 1), state])
            v = {w.op.name: s.run(w) for w in tf.global_variables()}
    pre = f"rnn/conv_{nd}d_lstm_cell/"
    assert sorted(v) == [pre + "biases", pre + "kernel"]
    assert v[pre + "kernel"].shape == (*([3] * nd), 5, 12)
    cc = np.zeros((B, *spatial, 3))
    hh = np.zeros((B, *spatial, 3))
    for t in range(T):
        g = _conv_same_np(np.concatenate([xs[:, t], hh], -1), v[pre + "kernel"]) + v[pre + "biases"]
        i, j, f, oo = np.split(g, 4, -1)
        cc = sig(f + 0.5) * cc + sig(i) * np.tanh(j)
        hh = np.tanh(cc) * sig(oo)
        np.testing.assert_allclose(o[:, t], hh, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(c, cc, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="Invalid input_shape"):
        rnn.ConvLSTMCell(2, [4, 2], 3, [3, 3])


def test_attention_cell_wrapper():
    n, L = 4, 2
    cell = rnn.AttentionCellWrapper(tf.nn.rnn_cell.BasicLSTMCell(n), attn_length=L)
    o, (cs, attns, attn_states), v = _run(cell)
    pre = "rnn/attention_cell_wrapper/"
    want_names = ["kernel", "bias", "basic_lstm_cell/kernel", "basic_lstm_cell/bias"]
    want_names += ["attention/attn_w", "attention/attn_v", "attention/kernel", "attention/bias"]
    want_names += ["attn_output_projection/kernel", "attn_output_projection/bias"]
    assert sorted(v) == sorted(pre + k for k in want_names)
    assert attn_states.shape == (B, L * n)
    g = {k[len(pre) :]: val.astype(np.float64) for k, val in v.items()}

    def step(x, s):
        (c0, h0), att, ast = s
        ast = ast.reshape(B, L, n)
        inp = np.concatenate([x, att], 1) @ g["kernel"] + g["bias"]
        z = np.concatenate([inp, h0], 1) @ g["basic_lstm_cell/kernel"] + g["basic_lstm_cell/bias"]
        i, j, f, oo = np.split(z, 4, 1)
        c1 = c0 * sig(f + 1.0) + sig(i) * np.tanh(j)
        h1 = np.tanh(c1) * sig(oo)
        q = np.concatenate([c1, h1], 1)
        feats = ast @ g["attention/attn_w"][0, 0]  # [B, L, V]
        y = q @ g["attention/kernel"] + g["attention/bias"]
        sc = (g["attention/attn_v"] * np.tanh(feats + y[:, None])).sum(-1)
        a = np.exp(sc - sc.max(1, keepdims=True))
        a /= a.sum(1, keepdims=True)
        new_att = (a[:, :, None] * ast).sum(1)
        out = (
            np.concatenate([h1, new_att], 1) @ g["attn_output_projection/kernel"]
            + g["attn_output_projection/bias"]
        )
        ast = np.concatenate([ast[:, 1:], out[:, None]], 1).reshape(B, L * n)
        return out, ((c1, h1), new_att, ast)

    zeros = np.zeros((B, n))
    want, ((wc, wh), watt, wast) = _steps(step, ((zeros, zeros), zeros, np.zeros((B, L * n))))
    np.testing.assert_allclose(o, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(attns, watt, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(attn_states, wast, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="attn_length"):
        rnn.AttentionCellWrapper(tf.nn.rnn_cell.BasicLSTMCell(n), attn_length=0)


def test_research_cells_train():
    """Gradients flow through every cell's variables."""
    for cell in (
        rnn.CoupledInputForgetGateLSTMCell(3, use_peepholes=True),
        rnn.UGRNNCell(3),
        rnn.IndRNNCell(3),
        rnn.IndyGRUCell(3),
        rnn.IndyLSTMCell(3),
        rnn.AttentionCellWrapper(rnn.GRUCell(3), attn_length=2),
    ):
        with tf.Graph().as_default():
            out, _ = tf.nn.dynamic_rnn(cell, tf.constant(XS), dtype=tf.float32)
            loss = tf.reduce_sum(tf.square(out))
            grads = tf.gradients(loss, tf.trainable_variables())
            assert all(g is not None for g in grads), type(cell).__name__
            with tf.Session() as s:
                s.run(tf.global_variables_initializer())
                assert all(np.isfinite(g).all() for g in s.run(grads))


def test_conv_lstm_cell_in_dynamic_rnn_known_and_unknown_time():
    xs = RNG.normal(size=(2, 3, 4, 4, 2)).astype(np.float32)
    with tf.Graph().as_default():
        cell = rnn.ConvLSTMCell(2, [4, 4, 2], 3, [3, 3])
        out, (c, h) = tf.nn.dynamic_rnn(cell, tf.constant(xs), dtype=tf.float32)
        ph = tf.placeholder(tf.float32, [None, None, 4, 4, 2])
        out2, (c2, _) = tf.nn.dynamic_rnn(cell, ph, dtype=tf.float32)
        assert out.shape.as_list() == [2, 3, 4, 4, 3]
        assert out2.shape.as_list() == [None, None, 4, 4, 3]
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            a, ca = s.run([out, c])
            b, cb = s.run([out2, c2], {ph: xs})
    np.testing.assert_allclose(a, b, rtol=1e-6)
    np.testing.assert_allclose(ca, cb, rtol=1e-6)


@pytest.mark.parametrize("ln", [False, True])
def test_layer_norm_lstm_cell(ln):
    n, p = 4, 3
    cell = rnn.LayerNormLSTMCell(
        n, use_peepholes=True, cell_clip=0.8, num_proj=p, layer_norm=ln, norm_shift=0.1
    )
    o, (c, m), v = _run(cell)
    pre = "rnn/layer_norm_lstm_cell/"
    names = ["kernel", "bias", "w_f_diag", "w_i_diag", "w_o_diag", "projection/kernel"]
    if ln:
        names += [
            f"{s}/{g}"
            for s in ("input", "transform", "forget", "output", "state")
            for g in ("gamma", "beta")
        ]
    assert sorted(v) == sorted(pre + k for k in names)
    g = {k[len(pre) :]: val.astype(np.float64) for k, val in v.items()}

    def norm(x):
        if not ln:
            return x
        return (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-12) + 0.1

    def step(x, s):
        c0, m0 = s
        z = np.concatenate([x, m0], 1) @ g["kernel"] + (0 if ln else g["bias"])
        i, j, f, oo = (norm(t) for t in np.split(z, 4, 1))
        c1 = sig(f + 1.0 + g["w_f_diag"] * c0) * c0 + sig(i + g["w_i_diag"] * c0) * np.tanh(j)
        c1 = np.clip(norm(c1), -0.8, 0.8)
        m1 = sig(oo + g["w_o_diag"] * c1) * np.tanh(c1)
        m1 = m1 @ g["projection/kernel"]
        return m1, (c1, m1)

    want, (wc, _) = _steps(step, (np.zeros((B, n)), np.zeros((B, p))))
    np.testing.assert_allclose(o, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(c, wc, rtol=1e-4, atol=1e-5)


def test_sru_cell():
    n = 3
    o, c, v = _run(rnn.SRUCell(n))
    pre = "rnn/sru_cell/"
    assert sorted(v) == [pre + "bias", pre + "kernel"] and v[pre + "bias"].shape == (2 * n,)

    def step(x, s):
        xb, fi, ri, xt = np.split(x @ v[pre + "kernel"], 4, 1)
        f, r = np.split(sig(np.concatenate([fi, ri], 1) + v[pre + "bias"]), 2, 1)
        c1 = f * s + (1 - f) * xb
        return r * np.tanh(c1) + (1 - r) * xt, c1

    want, wc = _steps(step, np.zeros((B, n)))
    np.testing.assert_allclose(o, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c, wc, rtol=1e-5, atol=1e-6)


def test_intersection_rnn_cell_with_input_projection():
    n = 3
    o, h, v = _run(rnn.IntersectionRNNCell(n, num_in_proj=n, forget_bias=0.5))
    pre = "rnn/intersection_rnn_cell/"
    names = ["in_projection/kernel", "in_projection/bias", "kernel", "bias"]
    assert sorted(v) == sorted(pre + k for k in names)
    g = {k[len(pre) :]: val for k, val in v.items()}

    def step(x, s):
        x = x @ g["in_projection/kernel"] + g["in_projection/bias"]
        z = np.concatenate([x, s], 1) @ g["kernel"] + g["bias"]
        gh, hh, gy, yy = np.split(z, 4, 1)
        gh, gy = sig(gh + 0.5), sig(gy + 0.5)
        return gy * x + (1 - gy) * np.maximum(yy, 0), gh * s + (1 - gh) * np.tanh(hh)

    want, wh = _steps(step, np.zeros((B, n)))
    np.testing.assert_allclose(o, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h, wh, rtol=1e-5, atol=1e-6)
    with tf.Graph().as_default(), pytest.raises(ValueError, match="num_in_proj"):
        tf.nn.dynamic_rnn(rnn.IntersectionRNNCell(n), tf.constant(XS), dtype=tf.float32)


def test_glstm_cell_groups_and_projection():
    n, p, G = 4, 2, 2  # noqa: N806
    o, (c, m), v = _run(rnn.GLSTMCell(n, num_proj=p, number_of_groups=G))
    pre = "rnn/glstm_cell/"
    names = ["group0/kernel", "group1/kernel", "bias_i", "bias_j", "bias_f", "bias_o"]
    assert sorted(v) == sorted(pre + k for k in [*names, "projection/kernel"])
    assert v[pre + "group0/kernel"].shape == (D // G + p // G, 4 * n // G)
    g = {k[len(pre) :]: val.astype(np.float64) for k, val in v.items()}

    def step(x, s):
        c0, m0 = s
        parts = [[], [], [], []]
        for k in range(G):
            xg = np.concatenate([x[:, k * 2 : k * 2 + 2], m0[:, k : k + 1]], 1)
            for lst, t in zip(parts, np.split(xg @ g[f"group{k}/kernel"], 4, 1), strict=True):
                lst.append(t)
        i, j, f, oo = (np.concatenate(pp, 1) + g[f"bias_{q}"] for pp, q in zip(parts, "ijfo"))
        c1 = sig(f + 1.0) * c0 + sig(i) * np.tanh(j)
        m1 = (sig(oo) * np.tanh(c1)) @ g["projection/kernel"]
        return m1, (c1, m1)

    want, (wc, _) = _steps(step, (np.zeros((B, n)), np.zeros((B, p))))
    np.testing.assert_allclose(o, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c, wc, rtol=1e-5, atol=1e-6)
