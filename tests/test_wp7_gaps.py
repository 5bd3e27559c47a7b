"""WP7: edit_distance, softmax cross entropy with differently shaped labels, string hashing into
buckets (FarmHash Fingerprint64, SipHash-2-4, TF's legacy hash), out-of-vocabulary buckets in
lookup tables, and parse_single_sequence_example. Values against closed forms, published test
vectors, numpy and finite differences."""

from __future__ import annotations

import numpy as np
import pytest
from opcheck import check_gradient

import hetbed as hb
import hetbed.compat.v1 as tf
from hetbed.runtime.ops.hashing import fingerprint64, siphash24, tf_hash64


def _run(fetches, feed=None):
    with tf.Session() as s:
        s.run(tf.tables_initializer())
        return s.run(fetches, feed)


# ---- edit_distance ------------------------------------------------------------------------------


def _lev(a, b):
    """Levenshtein distance by the textbook full-matrix recurrence."""
    d = np.zeros((len(a) + 1, len(b) + 1), int)
    d[:, 0], d[0, :] = np.arange(len(a) + 1), np.arange(len(b) + 1)
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i, j] = min(
                d[i - 1, j] + 1, d[i, j - 1] + 1, d[i - 1, j - 1] + (a[i - 1] != b[j - 1])
            )
    return d[-1, -1]


def _sparse(seqs):
    """A rank-2 SparseTensor whose row i holds the sequence seqs[i]."""
    idx = [[i, j] for i, s in enumerate(seqs) for j in range(len(s))]
    vals = [v for s in seqs for v in s]
    width = max([len(s) for s in seqs] + [1])
    return tf.SparseTensor(np.array(idx, np.int64).reshape(-1, 2), vals, [len(seqs), width])


def test_edit_distance_matches_levenshtein():
    """Random int sequences: the distance per row is the textbook Levenshtein distance, and
    normalize divides by the truth's length."""
    rng = np.random.RandomState(0)
    hyp = [list(rng.randint(0, 3, rng.randint(0, 6))) for _ in range(6)]
    truth = [list(rng.randint(0, 3, rng.randint(1, 6))) for _ in range(6)]
    with tf.Graph().as_default():
        h, t = _sparse(hyp), _sparse(truth)
        raw, norm = _run([tf.edit_distance(h, t, normalize=False), tf.edit_distance(h, t)])
    want = np.array([_lev(a, b) for a, b in zip(hyp, truth)], np.float32)
    np.testing.assert_array_equal(raw, want)
    np.testing.assert_allclose(norm, want / [len(b) for b in truth], rtol=1e-6)
    assert raw.dtype == np.float32


def test_edit_distance_strings_rank3_and_empty_truth():
    """The cookbook's string case; the output takes the larger dense shape; a position with a
    hypothesis but no truth is inf when normalized, one with neither is 0."""
    with tf.Graph().as_default():
        h = tf.SparseTensor(
            [[0, 0, 0], [0, 0, 1], [0, 1, 0], [1, 0, 0]], ["a", "b", "c", "d"], [2, 2, 3]
        )
        t = tf.SparseTensor(
            [[0, 0, 0], [0, 0, 1], [0, 0, 2], [1, 1, 0]], ["a", "x", "b", "d"], [2, 3, 3]
        )
        raw = tf.edit_distance(h, t, normalize=False)
        assert raw.shape.ndims == 2
        raw, norm = _run([raw, tf.edit_distance(h, t)])
    np.testing.assert_array_equal(raw, [[1, 1, 0], [1, 1, 0]])
    np.testing.assert_array_equal(norm, np.float32([[1 / 3, np.inf, 0], [np.inf, 1, 0]]))
    with tf.Graph().as_default():  # nfmcclure's cookbook: "bear" vs "beers"
        h = tf.SparseTensor([[0, 0, i] for i in range(4)], list("bear"), [1, 1, 4])
        t = tf.SparseTensor([[0, 0, i] for i in range(5)], list("beers"), [1, 1, 5])
        np.testing.assert_array_equal(_run(tf.edit_distance(h, t, normalize=False)), [[2.0]])


def test_edit_distance_errors():
    with tf.Graph().as_default():
        h = tf.SparseTensor([[0, 0]], [1], [1, 1])
        t = tf.SparseTensor([[0, 0]], ["a"], [1, 1])
        with pytest.raises(hb.errors.InvalidArgumentError, match="EditDistance.*int32.*string"):
            tf.edit_distance(h, t)
        with pytest.raises(TypeError, match="SparseTensor"):
            tf.edit_distance(h, tf.constant([1]))
        bad = tf.SparseTensor([[0, 5]], [1], [1, 1])
        bad_pos = tf.SparseTensor([[3, 0]], [1], [1, 1])
        with pytest.raises(hb.errors.InvalidArgumentError, match="outside dense_shape"):
            _run(tf.edit_distance(h, bad_pos))
        _run(tf.edit_distance(h, bad))  # like TF, the last coordinate is only an order


# ---- softmax cross entropy with differently shaped labels ----------------------------------------


def _xent_ref(labels, logits):
    """TF's route: both flattened to [rows, classes], broadcast, loss per row."""
    c = logits.shape[-1]
    lg, lb = logits.reshape(-1, c), labels.reshape(-1, labels.shape[-1])
    lg, lb = np.broadcast_arrays(lg, lb)
    m = lg.max(-1, keepdims=True)
    logp = lg - m - np.log(np.exp(lg - m).sum(-1, keepdims=True))
    return (-(lb * logp).sum(-1)).reshape(logits.shape[:-1])


@pytest.mark.parametrize(
    "lshape,yshape",
    [((4, 3), (4, 1, 3)), ((4, 3), (1, 3)), ((4, 3), (3,)), ((2, 2, 3), (4, 3)), ((4, 3), (4, 1))],
)
def test_xent_labels_of_other_shapes(lshape, yshape):
    """Labels whose shape flattens to the logits' rows (or one row, or one class) work as in TF;
    the gradient reaches logits (and labels, in _v2) by finite differences (labels whose rows,
    broadcast, sum to 1: the logits' gradient is TF's kernel's, softmax - labels)."""
    rng = np.random.RandomState(1)
    logits = rng.randn(*lshape)
    labels = np.abs(rng.randn(*yshape))
    if yshape[-1] == lshape[-1]:
        labels = labels / labels.sum(-1, keepdims=True)
    else:  # (one class column, broadcast over the logits' classes)
        labels = np.full(yshape, 1.0 / lshape[-1])
    with tf.Graph().as_default():
        out = tf.nn.softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits)
        assert out.shape.as_list() == list(lshape[:-1])
        got = _run(out)
    np.testing.assert_allclose(got, _xent_ref(labels, logits), rtol=1e-10)
    check_gradient(
        lambda lg, lb: tf.nn.softmax_cross_entropy_with_logits_v2(labels=lb, logits=lg),
        [logits, labels],
    )


def test_xent_axis_and_errors():
    """A non-last class axis moves to the end; shapes that TF refuses are refused, naming the op
    and both shapes."""
    rng = np.random.RandomState(2)
    logits, labels = rng.randn(2, 3, 2), np.abs(rng.randn(2, 3, 2))
    with tf.Graph().as_default():
        got = _run(tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits, dim=1))
    want = _xent_ref(np.moveaxis(labels, 1, -1), np.moveaxis(logits, 1, -1))
    np.testing.assert_allclose(got, want, rtol=1e-10)
    xent = tf.nn.softmax_cross_entropy_with_logits_v2
    for lshape, yshape, kw, msg in [
        ((4, 3), (4, 3, 1), {}, r"12 rows.*\(4, 3\).*\(4, 3, 1\)"),
        ((4, 3), (2, 3), {}, r"2 rows.*\(4, 3\).*\(2, 3\)"),
        ((3,), (4, 3), {}, r"4 rows"),
        ((4, 3), (4, 1, 3), {"axis": 0}, "same rank"),
    ]:
        with tf.Graph().as_default():
            with pytest.raises(
                hb.errors.InvalidArgumentError, match="softmax_cross_entropy.*" + msg
            ):
                xent(labels=np.ones(yshape), logits=np.ones(lshape), **kw)


# ---- string hashing ----------------------------------------------------------------------------

#: byte strings of every FarmHash length class (0, 1-3, 4-7, 8-16, 17-32, 33-64, > 64)
_LENGTHS = [0, 1, 3, 4, 7, 8, 16, 17, 32, 33, 63, 64, 65, 128, 129, 200]
_STRS = [bytes((i * 7 + 3) % 256 for i in range(n)) for n in _LENGTHS]
# TensorFlow 2.21's string_to_hash_bucket_fast / _strong (key [12345, -7]) / string_to_hash_bucket
# of _STRS with num_buckets = 2**63 - 1
_TF_FAST = [1936946117179621456, 4521786392703311244, 4662423180930907492, 8342898540396837779, 5759834791111993764, 907454142650066470, 9140634717936656744, 5283162056940282152, 2684005117763720425, 4778210889463820522, 1604338371932276381, 389040666157116578, 8638051931306504420, 7379187116787024497, 1738507677182238852, 7886090686657605591]  # fmt: skip
_TF_STRONG = [8647742951945173729, 7900218367374998494, 6926316735982082126, 4906567114654156492, 1462940695318709291, 1842557664401092586, 553413440464375050, 6584678194354124384, 181859043350575901, 8122434454974823348, 3715622020702811586, 6929039440274366702, 1270205697345124222, 5332886538201870045, 9039953401776467415, 7329425191501091183]  # fmt: skip
_TF_LEGACY = [105434511174508092, 7001769250909271135, 5276484929406308779, 5799242685562273649, 1142397842043859391, 384654127350334882, 5129953047346710616, 7037566801403733717, 1458650421252541103, 2574933530128875931, 5271103884795240918, 3945209722589307479, 8278743160437407290, 8132594031198021779, 1361456403630484005, 2651614156366774965]  # fmt: skip


def test_siphash_published_vectors():
    """The SipHash paper's vectors: key 00..0f, messages 00..(n-1)."""
    k0 = int.from_bytes(bytes(range(8)), "little")
    k1 = int.from_bytes(bytes(range(8, 16)), "little")
    assert siphash24(k0, k1, b"") == 0x726FDB47DD0E0E31
    assert siphash24(k0, k1, bytes(range(15))) == 0xA129CA6149BE45E5
    assert siphash24(k0, k1, bytes(range(8))) == 0x93F5F5799A932462


def test_hashes_match_tensorflow_bit_for_bit():
    """The three hash functions against TensorFlow's outputs over every length class."""
    m = 2**63 - 1
    assert [fingerprint64(s) % m for s in _STRS] == _TF_FAST
    assert [siphash24(12345, (-7) % 2**64, s) % m for s in _STRS] == _TF_STRONG
    assert [tf_hash64(s) % m for s in _STRS] == _TF_LEGACY
    assert fingerprint64(b"") == 0x9AE16A3B2F90404F  # FarmHash's k2 for the empty string


def test_hash_bucket_ops():
    """The ops give the hashes modulo num_buckets as int64, keeping the shape."""
    x = np.array([[s for s in _STRS[:3]], [s for s in _STRS[3:6]]], dtype=object)
    with tf.Graph().as_default():
        ph = tf.placeholder(tf.string, [2, 3])
        outs = [
            tf.string_to_hash_bucket_fast(ph, 1000),
            tf.strings.to_hash_bucket_strong(ph, 1000, [12345, -7]),
            tf.string_to_hash_bucket(ph, 1000),
            tf.strings.to_hash_bucket(ph, 1000),
        ]
        assert all(o.shape.as_list() == [2, 3] and o.dtype == tf.int64 for o in outs)
        fast, strong, legacy, legacy2 = _run(outs, {ph: x})
    flat = list(x.reshape(-1))
    np.testing.assert_array_equal(fast.reshape(-1), [fingerprint64(s) % 1000 for s in flat])
    np.testing.assert_array_equal(
        strong.reshape(-1), [siphash24(12345, 2**64 - 7, s) % 1000 for s in flat]
    )
    np.testing.assert_array_equal(legacy.reshape(-1), [tf_hash64(s) % 1000 for s in flat])
    np.testing.assert_array_equal(legacy, legacy2)
    with tf.Graph().as_default():
        with pytest.raises(hb.errors.InvalidArgumentError, match="num_buckets"):
            tf.string_to_hash_bucket_fast("a", 0)
        with pytest.raises((hb.errors.InvalidArgumentError, TypeError), match="string"):
            tf.string_to_hash_bucket_fast(tf.constant([1]), 3)


def test_index_table_oov_buckets(tmp_path):
    """Unknown keys go to vocab_size + fingerprint64(key) % num_oov_buckets (int keys hashed as
    their decimal strings); size() counts the buckets. Values from TensorFlow 2.21."""
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("a\nb\nc\n")
    with tf.Graph().as_default():
        t = tf.contrib.lookup.index_table_from_tensor(["a", "b", "c"], num_oov_buckets=3)
        tf_ = tf.contrib.lookup.index_table_from_file(str(vocab), num_oov_buckets=3)
        ti = tf.contrib.lookup.index_table_from_tensor(
            tf.constant([10, 20], tf.int64), num_oov_buckets=4, dtype=tf.int64
        )
        keys = tf.constant(["a", "zz", "c", "q", "hello"])
        got = _run(
            [t.lookup(keys), tf_.lookup(keys), ti.lookup(tf.constant([20, 5, 7, 10, 99], tf.int64))]
            + [t.size()]
        )
    np.testing.assert_array_equal(got[0], [0, 4, 2, 5, 4])
    np.testing.assert_array_equal(got[1], [0, 4, 2, 5, 4])
    np.testing.assert_array_equal(got[2], [1, 5, 2, 0, 4])
    assert got[3] == 6
    assert 3 + fingerprint64(b"zz") % 3 == 4


# ---- parse_single_sequence_example --------------------------------------------------------------


def _sequence_example():
    ex = tf.train.SequenceExample()
    ex.context.feature["length"].int64_list.value.append(3)
    ex.context.feature["tag"].bytes_list.value.extend([b"x", b"yz"])
    for v in [4, 5, 6]:
        ex.feature_lists.feature_list["tokens"].feature.add().int64_list.value.append(v)
    for v in [[1.5, 2.0], [3.0, 4.0], [0.5, -1.0]]:
        ex.feature_lists.feature_list["vecs"].feature.add().float_list.value.extend(v)
    for w in [[b"a"], [], [b"b", b"c"]]:
        ex.feature_lists.feature_list["words"].feature.add().bytes_list.value.extend(w)
    ex.feature_lists.feature_list["empty"].SetInParent()
    return ex.SerializeToString()


_CTX = {
    "length": tf.FixedLenFeature([], tf.int64),
    "tag": tf.VarLenFeature(tf.string),
    "missing": tf.FixedLenFeature([2], tf.float32, default_value=[1.0, 2.0]),
}
_SEQ = {
    "tokens": tf.FixedLenSequenceFeature([], tf.int64),
    "vecs": tf.FixedLenSequenceFeature([2], tf.float32),
    "words": tf.VarLenFeature(tf.string),
    "empty": tf.FixedLenSequenceFeature([3], tf.float32),
    "absent": tf.FixedLenSequenceFeature([], tf.int64, allow_missing=True),
}


def test_parse_single_sequence_example():
    """Context features as parse_single_example; fixed-length lists as [frames, *shape]; var-length
    lists as SparseTensors [frames, longest]; an allowed missing list has zero frames."""
    with tf.Graph().as_default():
        ctx, seq = tf.parse_single_sequence_example(_sequence_example(), _CTX, _SEQ)
        assert seq["vecs"].shape.as_list() == [None, 2]
        c, q = _run([ctx, seq])
    assert c["length"] == 3
    np.testing.assert_array_equal(c["missing"], [1.0, 2.0])
    assert list(c["tag"].values) == [b"x", b"yz"]
    np.testing.assert_array_equal(q["tokens"], [4, 5, 6])
    np.testing.assert_array_equal(q["vecs"], [[1.5, 2.0], [3.0, 4.0], [0.5, -1.0]])
    np.testing.assert_array_equal(q["words"].indices, [[0, 0], [2, 0], [2, 1]])
    assert list(q["words"].values) == [b"a", b"b", b"c"]
    np.testing.assert_array_equal(q["words"].dense_shape, [3, 2])
    assert q["empty"].shape == (0, 3) and q["absent"].shape == (0,)


def test_parse_single_sequence_example_errors():
    ser = _sequence_example()
    for spec, msg in [
        ({"absent": tf.FixedLenSequenceFeature([], tf.int64)}, "'absent' is missing"),
        ({"vecs": tf.FixedLenSequenceFeature([3], tf.float32)}, "frame 0 .*'vecs' has 2 values"),
        ({"tokens": tf.FixedLenSequenceFeature([], tf.float32)}, "int64_list"),
    ]:
        with tf.Graph().as_default():
            _, seq = tf.parse_single_sequence_example(ser, sequence_features=spec)
            with pytest.raises(hb.errors.InvalidArgumentError, match=msg):
                _run(seq)
    with tf.Graph().as_default():
        _, seq = tf.parse_single_sequence_example(b"\xff\xff", sequence_features=_SEQ)
        with pytest.raises(hb.errors.InvalidArgumentError, match="not a tf.train.SequenceExample"):
            _run(seq)


# ---- gradients of qr, svd, self_adjoint_eig (finite differences) ---------------------------------


def test_eigh_gradient():
    """Eigenvalues, and eigenvectors through a sign-free function of them; the gradient sits on
    the lower triangle, the only part the op reads."""
    rng = np.random.RandomState(4)
    a = rng.randn(2, 4, 4)
    a = a + np.swapaxes(a, -1, -2)
    check_gradient(hb.self_adjoint_eigvals, [a])

    def eig(t):
        e, v = tf.self_adjoint_eig(t)
        return hb.concat([hb.expand_dims(e, -1), v * v], -1)

    check_gradient(eig, [a])
    with tf.Graph().as_default():
        x = tf.constant(a)
        g = tf.Session().run(tf.gradients(tf.reduce_sum(tf.self_adjoint_eigvals(x)), x)[0])
    np.testing.assert_allclose(g, np.broadcast_to(np.eye(4), a.shape), atol=1e-12)  # d tr / dA


@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (3, 5), (2, 4, 2)])
def test_svd_gradient(shape):
    """Singular values, and U, V through sign-free functions (U diag(s^2) V^T, squares)."""
    a = np.random.RandomState(5).randn(*shape)
    check_gradient(lambda t: tf.svd(t, compute_uv=False), [a])

    def uv(t):
        s, u, v = tf.svd(t)
        w = np.arange(1.0, min(shape[-2:]) + 1)
        recon = hb.matmul(u * hb.expand_dims(s * s, -2), v, transpose_b=True)
        return hb.concat([hb.reshape(recon, [-1]), hb.reshape(u * u * w, [-1]),
                          hb.reshape(v * v * w, [-1])], 0)  # fmt: skip

    check_gradient(uv, [a])


@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (2, 5, 2)])
def test_qr_gradient(shape):
    a = np.random.RandomState(6).randn(*shape)
    check_gradient(lambda t: hb.concat(list(tf.qr(t)), -2), [a])
    with tf.Graph().as_default():
        q, r = tf.qr(tf.constant(np.ones((2, 3))))
        with pytest.raises(hb.errors.InvalidArgumentError, match="Qr.*rows >= columns"):
            tf.gradients(tf.reduce_sum(q), q.op.inputs[0])


# ---- contrib.rnn.LayerNormBasicLSTMCell -----------------------------------------------------------


def _ln(x, gamma, beta):
    mu, var = x.mean(1, keepdims=True), x.var(1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-12) * gamma + beta


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


@pytest.mark.parametrize("layer_norm", [True, False])
def test_layer_norm_basic_lstm_cell(layer_norm):
    """Three steps of static_rnn against a numpy LSTM with TF's gate order and layer norms,
    reading the cell's own variables (TF's names)."""
    rng = np.random.RandomState(7)
    xs = rng.randn(3, 2, 4)
    with tf.Graph().as_default():
        cell = tf.contrib.rnn.LayerNormBasicLSTMCell(
            3, forget_bias=0.5, layer_norm=layer_norm, norm_gain=1.5, norm_shift=0.1
        )
        inputs = [tf.constant(x) for x in xs]
        outs, state = tf.nn.static_rnn(cell, inputs, dtype=tf.float64)
        names = sorted(v.op.name for v in tf.global_variables())
        with tf.Session() as s:
            s.run(tf.global_variables_initializer())
            got, got_c = s.run([outs, state.c])
            var = {v.op.name: s.run(v) for v in tf.global_variables()}
    p = "rnn/layer_norm_basic_lstm_cell/"
    norms = ("input", "transform", "forget", "output", "state")
    if layer_norm:
        assert names == sorted(
            [p + "kernel"] + [p + f"{n}/{w}" for n in norms for w in ("beta", "gamma")]
        )
    else:
        assert names == sorted([p + "kernel", p + "bias"])

    def ln(x, n):
        return _ln(x, var[p + n + "/gamma"], var[p + n + "/beta"]) if layer_norm else x

    c = h = np.zeros((2, 3))
    for t, x in enumerate(xs):
        z = np.concatenate([x, h], 1) @ var[p + "kernel"] + (0 if layer_norm else var[p + "bias"])
        i, j, f, o = np.split(z, 4, 1)
        i, j, f, o = ln(i, "input"), ln(j, "transform"), ln(f, "forget"), ln(o, "output")
        c = ln(c * _sigmoid(f + 0.5) + _sigmoid(i) * np.tanh(j), "state")
        h = np.tanh(c) * _sigmoid(o)
        np.testing.assert_allclose(got[t], h, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got_c, c, rtol=1e-10, atol=1e-12)
    if layer_norm:
        np.testing.assert_allclose(var[p + "input/gamma"], 1.5)
        np.testing.assert_allclose(var[p + "state/beta"], 0.1)
