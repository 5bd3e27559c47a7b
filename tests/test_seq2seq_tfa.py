"""contrib.seq2seq's attention and beam search and contrib.rnn's NASCell against TensorFlow
Addons (tfa.seq2seq, tfa.rnn: the same mathematics as TF1's contrib, as Keras layers): with the
same weights, the same attention outputs and alignments, beam scores, parents, lengths and
sequence lengths, gather_tree results and NAS cell outputs. Skipped without TensorFlow Addons
(it needs TensorFlow <= 2.15: ``pip install tensorflow-cpu==2.15.1 tensorflow-addons``)."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
tfa = pytest.importorskip("tensorflow_addons")
import tensorflow as tf_real  # noqa: E402

import hetbed.compat.v1 as hb  # noqa: E402

v1 = tf_real.compat.v1


def _both(build):
    """``build(lib, s2s, is_tf)`` -> (fetches, {variable: value by role}) run in a graph of each
    library; returns TF's and hetbed's values."""
    out = []
    for lib, s2s, is_tf in ((v1, tfa.seq2seq, True), (hb, hb.contrib.seq2seq, False)):
        with lib.Graph().as_default():
            fetches, assign = build(lib, s2s, is_tf)
            with lib.Session() as sess:
                sess.run(lib.global_variables_initializer())
                for v in lib.global_variables():
                    v.load(assign(v.name.split(":")[0].strip(), tuple(v.shape.as_list())), sess)
                out.append(sess.run(fetches))
    return out


@pytest.mark.parametrize("kind", ["luong", "luong_scale", "bahdanau", "bahdanau_norm"])
def test_attention_wrapper_steps_equal_tfa(kind):
    b, t, d, u, e, a = 2, 5, 6, 4, 3, 5
    rng = np.random.RandomState(1)
    mem = rng.randn(b, t, d).astype(np.float32)
    lens = np.array([5, 3], np.int32)
    xs = rng.randn(4, b, e).astype(np.float32)
    by_shape = {
        (d, u): rng.randn(d, u).astype(np.float32) * 0.5,
        (u, u): rng.randn(u, u).astype(np.float32) * 0.5,
        (u,): rng.randn(u).astype(np.float32),
        (): np.float32(0.7),
        (u + d, a): rng.randn(u + d, a).astype(np.float32) * 0.5,
        (e + a + u, 4 * u): rng.randn(e + a + u, 4 * u).astype(np.float32) * 0.3,
        (4 * u,): rng.randn(4 * u).astype(np.float32) * 0.1,
    }

    def build(lib, s2s, is_tf):
        kw = {"luong_scale": {"scale": True}, "bahdanau_norm": {"normalize": True}}.get(kind, {})
        cls = s2s.LuongAttention if kind.startswith("luong") else s2s.BahdanauAttention
        mech = cls(u, mem, memory_sequence_length=lens, **kw)
        att = s2s.AttentionWrapper(lib.nn.rnn_cell.BasicLSTMCell(u), mech, attention_layer_size=a)
        st = (
            att.get_initial_state(batch_size=b, dtype=lib.float32)
            if is_tf
            else att.zero_state(b, lib.float32)
        )
        outs, aligns = [], []
        for x in xs:
            o, st = att(lib.constant(x), st)
            outs.append(o)
            aligns.append(st.alignments)

        def assign(name, shape):  # attention_b has the shape of attention_v: zero it
            return np.zeros(shape, np.float32) if name.endswith("attention_b") else by_shape[shape]

        return [outs, aligns], assign

    (want_o, want_a), (got_o, got_a) = _both(build)
    np.testing.assert_allclose(got_o, want_o, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_a, want_a, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "lp, attention, seed", [(0.0, False, 2), (0.6, False, 2), (0.0, True, 3), (1.0, True, 4)]
)
def test_beam_search_equals_tfa(lp, attention, seed):
    b, k, v, e, u, t, d = 2, 3, 6, 3, 4, 5, 4
    rng = np.random.RandomState(seed)
    emb = rng.randn(v, e).astype(np.float32)
    c0, h0 = rng.randn(b, u).astype(np.float32), rng.randn(b, u).astype(np.float32)
    mem, lens = rng.randn(b, t, d).astype(np.float32), np.array([5, 2], np.int32)
    by_shape = {
        (e + u + (u if attention else 0), 4 * u): rng.randn(
            e + u + (u if attention else 0), 4 * u
        ).astype(np.float32),
        (4 * u,): rng.randn(4 * u).astype(np.float32) * 0.3,
        (u, v): rng.randn(u, v).astype(np.float32) * 1.5,
        (v,): rng.randn(v).astype(np.float32),
        (d, u): rng.randn(d, u).astype(np.float32),
        (u + d, u): rng.randn(u + d, u).astype(np.float32) * 0.5,
    }

    def build(lib, s2s, is_tf):
        cell = lib.nn.rnn_cell.BasicLSTMCell(u)
        init = lib.nn.rnn_cell.LSTMStateTuple(
            s2s.tile_batch(lib.constant(c0), k), s2s.tile_batch(lib.constant(h0), k)
        )
        if attention:
            mech = s2s.LuongAttention(
                u,
                s2s.tile_batch(lib.constant(mem), k),
                memory_sequence_length=s2s.tile_batch(lib.constant(lens), k),
            )
            cell = s2s.AttentionWrapper(cell, mech, attention_layer_size=u)
            zero = (
                cell.get_initial_state(batch_size=b * k, dtype=lib.float32)
                if is_tf
                else cell.zero_state(b * k, lib.float32)
            )
            init = zero.clone(cell_state=init)
        start = np.array([1, 2], np.int32)
        if is_tf:
            dec = s2s.BeamSearchDecoder(
                cell,
                k,
                output_layer=tf_real.keras.layers.Dense(v),
                length_penalty_weight=lp,
                maximum_iterations=7,
            )
            outs, st, lengths = dec(
                lib.constant(emb), start_tokens=start, end_token=0, initial_state=init
            )
        else:
            dec = s2s.BeamSearchDecoder(
                cell,
                lib.constant(emb),
                start,
                0,
                init,
                k,
                output_layer=lib.layers.Dense(v),
                length_penalty_weight=lp,
            )
            outs, st, lengths = s2s.dynamic_decode(dec, maximum_iterations=7)
        raw = outs.beam_search_decoder_output
        return [
            raw.scores,
            raw.parent_ids,
            raw.predicted_ids,
            st.lengths,
            lengths,
        ], lambda n, s: by_shape[s]

    want, got = _both(build)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-4)
    for g, w in zip(got[1:], want[1:]):
        np.testing.assert_array_equal(g, w)


def test_gather_tree_equals_tfa():
    if not tf_real.executing_eagerly():  # tfa's graph-mode fallback for gather_tree gives zeros
        pytest.skip("needs eager TensorFlow (another test switched it off)")
    rng = np.random.RandomState(0)
    for _ in range(60):
        t, b, k = rng.randint(1, 7), rng.randint(1, 4), rng.randint(1, 5)
        ids = rng.randint(0, 5, size=(t, b, k)).astype(np.int32)
        parents = rng.randint(0, k, size=(t, b, k)).astype(np.int32)
        lengths = rng.randint(0, t + 3, size=b).astype(np.int32)
        want = tfa.seq2seq.gather_tree(ids, parents, lengths, 0).numpy()
        with hb.Graph().as_default(), hb.Session() as s:
            got = s.run(hb.contrib.seq2seq.gather_tree(ids, parents, lengths, 0))
        np.testing.assert_array_equal(got, want)


def test_nas_cell_equals_tfa():
    b, d, n, p = 2, 3, 4, 5
    rng = np.random.RandomState(0)
    x = rng.randn(3, b, d).astype(np.float32)
    by_shape = {
        (d, 8 * n): rng.randn(d, 8 * n).astype(np.float32) * 0.5,
        (p, 8 * n): rng.randn(p, 8 * n).astype(np.float32) * 0.5,
        (8 * n,): rng.randn(8 * n).astype(np.float32) * 0.2,
        (n, p): rng.randn(n, p).astype(np.float32) * 0.5,
    }
    out = []
    for lib, is_tf in ((v1, True), (hb, False)):
        with lib.Graph().as_default():
            if is_tf:
                cell = tfa.rnn.NASCell(n, projection=p, use_bias=True)
                st = cell.get_initial_state(batch_size=b, dtype=lib.float32)
            else:
                cell = hb.contrib.rnn.NASCell(n, num_proj=p, use_bias=True)
                st = cell.zero_state(b, lib.float32)
            outs = []
            for step in x:
                o, st = cell(lib.constant(step), st)
                outs.append(o)
            with lib.Session() as sess:
                sess.run(lib.global_variables_initializer())
                for var in lib.global_variables():
                    var.load(by_shape[tuple(var.shape.as_list())], sess)
                out.append(sess.run(outs))
    np.testing.assert_allclose(out[1], out[0], rtol=1e-5, atol=1e-6)


@pytest.fixture(autouse=True)
def _tf1_behaviour():
    """Graph-mode Keras layers (tfa's) with TF1's control flow, for each test only."""
    from tensorflow.python import tf2
    from tensorflow.python.ops import control_flow_util

    was = tf2.enabled(), control_flow_util.ENABLE_CONTROL_FLOW_V2
    tf2.disable()
    v1.disable_control_flow_v2()
    yield
    if was[1]:
        v1.enable_control_flow_v2()
    if was[0]:
        tf2.enable()
