"""The model zoo: published parameter counts, forward FLOPs, complete training graphs, small models
that train for real; the sampled softmax and the sharded embedding lookup it relies on."""

from __future__ import annotations

import time

import numpy as np
import pytest
from opcheck import check_forward, check_gradient

import hetbed as hb
from hetbed.runtime.ops.sampled import (
    compute_sampled_logits,
    log_uniform_candidate_sampler,
    log_uniform_prob,
    sampled_softmax_loss,
)
from hetbed.scenarios.models import sharded
from hetbed.scenarios.models.zoo import ZOO, ModelGraph, build, count_flops, make_optimizer

BATCH = 2


@pytest.fixture(scope="module")
def built() -> dict:
    """Every zoo model built once, each in its own graph, with the time it took."""
    out = {}
    for name, fn in ZOO.items():
        g = hb.Graph()
        with g.as_default():
            t0 = time.perf_counter()
            m = fn(BATCH)
            out[name] = (g, m, time.perf_counter() - t0)
    return out


def _params(built: dict, name: str) -> int:
    return built[name][1].params


def _close(got: float, want: float, rel: float) -> None:
    assert abs(got - want) <= rel * want, f"{got:,} is not within {rel:.1%} of {want:,}"


# ---- parameter counts against published ones --------------------------------------------------


def test_resnet50_params(built):
    """ResNet-50 has 25.6M parameters ±1% (He et al. 2016; torchvision resnet50: 25,557,032)."""
    _close(_params(built, "resnet50"), 25_557_032, 0.01)
    _close(_params(built, "resnet101"), 44_549_160, 0.01)
    _close(_params(built, "resnet152"), 60_192_808, 0.01)


def test_inception_v3_params(built):
    """Inception-v3: 23.8M without aux head (Keras InceptionV3), 27.2M with it (torchvision) ±1.5%."""
    _close(_params(built, "inception_v3"), 23_817_352, 0.015)
    _close(_params(built, "inception_v3_aux"), 27_161_264, 0.015)


def test_alexnet_params(built):
    """AlexNet one tower: 62.38M for 96-256-384-384-256 (LearnOpenCV), 61.1M OWT (torchvision) ±2%."""
    _close(_params(built, "alexnet"), 62_378_344, 0.02)
    _close(_params(built, "alexnet_owt"), 61_100_840, 0.02)


def test_vgg_params(built):
    """VGG-A has 133M parameters ±1% (Simonyan & Zisserman 2015, Table 2; torchvision vgg11)."""
    _close(_params(built, "vgg_a"), 132_863_336, 0.01)
    _close(_params(built, "vgg16"), 138_357_544, 0.01)
    _close(_params(built, "vgg19"), 143_667_240, 0.01)


def test_googlenet_params(built):
    """GoogLeNet without auxiliary heads has about 6.8M parameters ±5% (Szegedy et al. 2015)."""
    _close(_params(built, "googlenet"), 6_800_000, 0.05)


def test_overfeat_params(built):
    """Overfeat's fast model has 145M parameters ±3% (Sermanet et al. 2014, OverFeat)."""
    _close(_params(built, "overfeat"), 145_000_000, 0.03)


def test_small_and_sequence_model_params(built):
    """Closed-form counts: MLP, Deep MNIST CNN (TF tutorial), LSTM-512-512 LM, 10M x 64 table."""
    assert _params(built, "mlp") == 784 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10
    assert _params(built, "cnn") == 3_274_634
    lm = 2 * 40_000 * 512 + 40_000 + (512 + 512) * 2048 + 2048
    assert _params(built, "lstm_lm") == lm
    assert _params(built, "lstm_lm_sampled") == lm
    assert _params(built, "wide_embedding") == 10_000_000 * 64 + 64 * 256 + 256 + 256 * 2 + 2


# ---- shapes, FLOPs, complete training graphs ---------------------------------------------------


def test_logits_shapes(built):
    """Image models give [batch, 1000] logits (the MLPs and CNN 10); the full-softmax LM
    [batch * steps, vocab]."""
    for name, (_, m, _) in built.items():
        if name in ("mlp", "cnn", "dense_1gb"):
            want = [BATCH, 10]
        elif name == "lstm_lm":
            want = [BATCH * 20, 40_000]
        elif name == "lstm_lm_sampled":
            assert m.logits is None
            continue
        elif name == "wide_embedding":
            want = [BATCH, 2]
        else:
            want = [BATCH, 1000]
        assert m.logits.shape.as_list() == want, name


def test_input_shapes(built):
    """input_shapes are concrete, include the batch and match the placeholders."""
    assert built["inception_v3"][1].input_shapes == {"images": (BATCH, 299, 299, 3), "labels": (2,)}
    assert built["resnet50"][1].input_shapes["images"] == (BATCH, 224, 224, 3)
    assert built["alexnet"][1].input_shapes["images"] == (BATCH, 227, 227, 3)
    assert built["overfeat"][1].input_shapes["images"] == (BATCH, 231, 231, 3)
    assert built["lstm_lm"][1].input_shapes == {"ids": (BATCH, 20), "labels": (BATCH, 20)}
    for _, m, _ in built.values():
        for k, ph in m.inputs.items():
            assert tuple(ph.shape.as_list()) == m.input_shapes[k]


def test_resnet50_flops(built):
    """ResNet-50 forward: 3.9-4.1 G multiply-adds per 224x224 image (He et al.: 3.8; v1.5: 4.1),
    which hetbed's cost rules count as 2 FLOPs each."""
    _, m, _ = built["resnet50"]
    macs = count_flops([m.logits], m.input_shapes, op_types={"Conv2D", "MatMul"}) / BATCH / 2
    assert 3.9e9 <= macs <= 4.1e9
    assert 3.9e9 <= m.flops_per_example / 2 <= 4.2e9  # batch norm, ReLU, pools add ~1%


def test_vgg_a_flops(built):
    """VGG-A forward: about 7.6 G multiply-adds (torchvision vgg11: 7.61) per 224x224 image."""
    assert 14.8e9 <= built["vgg_a"][1].flops_per_example <= 15.6e9


def test_inception_v3_flops(built):
    """Inception-v3 forward: about 5.7 G multiply-adds per 299x299 image (torchvision: 5.71)."""
    assert 5.5e9 <= built["inception_v3"][1].flops_per_example / 2 <= 6.0e9


def test_sampled_softmax_cuts_lm_flops(built):
    """The sampled softmax's forward FLOPs are a small fraction of the full softmax's."""
    full = built["lstm_lm"][1].flops_per_example
    sampled = built["lstm_lm_sampled"][1].flops_per_example
    assert sampled < 0.2 * full


def _updated_variables(train_op) -> set:
    """Variables that some update op reachable from ``train_op`` writes."""
    seen, stack, out = set(), [train_op], set()
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
        if "Apply" in op.type or op.type == "AssignSub":
            out.update(t.op.name for t in op.inputs if t.op.type == "VariableV2")
    return out


def test_every_trainable_variable_is_updated(built):
    """Each training graph has a gradient update for every trainable variable, and runs the
    batch-norm moving-average updates."""
    for name, (_, m, _) in built.items():
        assert isinstance(m, ModelGraph)
        updated = _updated_variables(m.train_op)
        for v in m.variables:
            assert v.op.name in updated, f"{name}: {v.op.name} is never updated"
        assert m.params == sum(int(np.prod(v.shape.as_list())) for v in m.variables if v.trainable)


def test_sparse_gradients_stay_sparse(built):
    """Embeddings, sampled softmax weights and table shards get sparse updates; the full softmax
    a dense one."""

    def update_types(m):
        out = {}
        for op in m.train_op.graph.get_operations():
            for t in op.inputs:
                if t.op.type == "VariableV2" and "Apply" in op.type:
                    out[t.op.name] = op.type
        return out

    full = update_types(built["lstm_lm"][1])
    sampled = update_types(built["lstm_lm_sampled"][1])
    assert full["embedding"].startswith("Sparse") and sampled["embedding"].startswith("Sparse")
    assert not full["softmax/weights"].startswith("Sparse")
    assert sampled["softmax/weights"].startswith("Sparse")
    wide = update_types(built["wide_embedding"][1])
    assert all(wide[f"embedding/part_{i}"].startswith("Sparse") for i in range(8))


def test_builds_in_callers_device_scope():
    """Builders set no devices: a replica_device_setter spreads variables over PS tasks and the
    table shards' gathers run beside their shards."""
    g = hb.Graph()
    setter = hb.train.replica_device_setter(ps_tasks=4, worker_device="/job:worker/task:0")
    with g.as_default(), hb.device(setter):
        m = build("wide_embedding", 4, num_shards=4)
    devices = {v.op.name: v.op.device for v in m.variables}
    assert [devices[f"embedding/part_{i}"] for i in range(4)] == [
        f"/job:ps/task:{i}" for i in range(4)
    ]
    gathers = [op for op in g.get_operations() if op.name.startswith("embedding_lookup/Gather")]
    assert sorted(op.device for op in gathers) == [f"/job:ps/task:{i}" for i in range(4)]
    assert m.loss.op.device == "/job:worker/task:0"


def test_zoo_errors():
    """Unknown model, optimizer or option values raise naming the choices."""
    with pytest.raises(KeyError, match="no model 'resnet51'.*resnet50"):
        build("resnet51", 2)
    with pytest.raises(ValueError, match="unknown optimizer 'adagrad2'"):
        make_optimizer("adagrad2")
    with hb.Graph().as_default():
        with pytest.raises(ValueError, match="variant must be one of"):
            build("alexnet", 2, variant="grouped")
        with pytest.raises(ValueError, match="softmax must be 'full' or 'sampled'"):
            ZOO["lstm_lm"](2, softmax="hierarchical")


# ---- count_flops ---------------------------------------------------------------------------------


def test_count_flops_closed_forms():
    """count_flops sums cost rules on concrete shapes: matmul 2BKN, conv 2*N*Ho*Wo*Co*Kh*Kw*Ci."""
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, [None, 8, 8, 3], name="x")
        f = hb.constant(np.zeros((3, 3, 3, 4), np.float32))
        y = hb.nn.conv2d(x, f, [1, 1, 1, 1], "SAME")
        flat = hb.reshape(y, [-1, 8 * 8 * 4])
        w = hb.constant(np.zeros((256, 5), np.float32))
        z = hb.matmul(flat, w)
    conv = 2 * 16 * 8 * 8 * 4 * 3 * 3 * 3
    mm = 2 * 16 * 256 * 5
    assert count_flops([z], {"x": (16, 8, 8, 3)}, op_types={"Conv2D", "MatMul"}) == conv + mm
    assert count_flops([y], {x: (16, 8, 8, 3)}) == conv
    assert count_flops(g, {"x:0": (16, 8, 8, 3)}, op_types={"MatMul"}) == mm


# ---- small models train for real -----------------------------------------------------------------

SMOKE = [
    ("mlp", {"learning_rate": 0.05}),
    ("cnn", {"learning_rate": 0.02}),
    ("lstm_lm", {"vocab_size": 50, "hidden_size": 16, "embedding_size": 16, "num_steps": 5}),
    (
        "lstm_lm_sampled",
        {
            "vocab_size": 50,
            "hidden_size": 16,
            "embedding_size": 16,
            "num_steps": 5,
            "num_sampled": 8,
            "seed": 3,
        },
    ),
    ("wide_embedding", {"vocab_size": 1000, "dim": 8, "num_shards": 3, "ids_per_example": 4}),
]


@pytest.mark.parametrize("name,options", SMOKE, ids=[s[0] for s in SMOKE])
def test_small_models_train(name, options):
    """One real training step runs; over a few steps on one batch the loss stays finite and falls."""
    g = hb.Graph()
    with g.as_default():
        hb.set_random_seed(0)
        options = {"learning_rate": 0.5, **options}
        m = ZOO[name](8, optimizer="sgd", **options)
        feed = m.random_feed(seed=1)
        with hb.Session(graph=g) as s:
            s.run(hb.global_variables_initializer())
            losses = []
            for _ in range(6):
                s.run(m.train_op, feed)
                losses.append(float(s.run(m.loss, feed)))
    assert np.all(np.isfinite(losses))
    assert losses[-1] < losses[0], losses


@pytest.mark.parametrize("optimizer", ["momentum", "adam", "rmsprop"])
def test_optimizers(optimizer):
    """Each named optimizer builds a training step that lowers the MLP's loss."""
    g = hb.Graph()
    with g.as_default():
        hb.set_random_seed(0)
        m = ZOO["mlp"](8, optimizer=optimizer)
        feed = m.random_feed(seed=1)
        with hb.Session(graph=g) as s:
            s.run(hb.global_variables_initializer())
            first = s.run(m.loss, feed)
            for _ in range(3):
                s.run(m.train_op, feed)
            assert s.run(m.loss, feed) < first


def test_random_feed_respects_ranges():
    """random_feed gives each input its shape, dtype and valid integer range."""
    with hb.Graph().as_default():
        m = ZOO["lstm_lm"](3, vocab_size=7, hidden_size=4, embedding_size=4, num_steps=2)
    feed = m.random_feed(0)
    ids = feed[m.inputs["ids"]]
    assert ids.shape == (3, 2) and ids.dtype == np.int32 and 0 <= ids.min() and ids.max() < 7


# ---- DynamicPartition / DynamicStitch and the sharded lookup ---------------------------------------


def test_dynamic_partition_and_stitch():
    """dynamic_partition splits rows by partition; dynamic_stitch puts them back (TF semantics)."""
    data = np.arange(12, dtype=np.float64).reshape(6, 2)
    parts = np.array([1, 0, 2, 1, 1, 0], np.int32)
    check_forward(
        lambda d, p: sharded.dynamic_partition(d, p, 3),
        [data, parts],
        lambda d, p: [d[p == i] for i in range(3)],
    )
    idx = [np.array([0, 2], np.int32), np.array([1, 3], np.int32)]
    vals = [np.array([[1.0], [2.0]]), np.array([[3.0], [4.0]])]
    check_forward(
        lambda i0, i1, d0, d1: sharded.dynamic_stitch([i0, i1], [d0, d1]),
        [*idx, *vals],
        lambda *_: np.array([[1.0], [3.0], [2.0], [4.0]]),
    )

    def scaled_round_trip(d, p):  # partition, scale each part differently, stitch back
        pos = sharded.dynamic_partition(sharded.range_like(p), p, 3)
        pieces = [x * float(k + 1) for k, x in enumerate(sharded.dynamic_partition(d, p, 3))]
        return hb.reshape(sharded.dynamic_stitch(pos, pieces), [6, 2])

    check_gradient(scaled_round_trip, [data, parts], wrt=[0])
    check_gradient(
        lambda i0, i1, d0, d1: hb.reshape(sharded.dynamic_stitch([i0, i1], [d0, d1]), [4, 1]),
        [*idx, *vals],
        wrt=[2, 3],
    )


def test_dynamic_partition_rejects_bad_partition():
    """A partition outside [0, n) raises naming it."""
    with hb.Graph().as_default():
        parts = sharded.dynamic_partition(hb.constant([1.0, 2.0]), hb.constant([0, 3]), 2)
        with hb.Session() as s, pytest.raises(hb.errors.InvalidArgumentError, match="partition 3"):
            s.run(parts)


@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_sharded_lookup_matches_whole_table(strategy):
    """A lookup in shards equals the whole table's rows; each shard's gradient is sparse and sums
    to the whole table's gradient laid out by the partition strategy."""
    rng = np.random.default_rng(0)
    vocab, dim, n = 10, 3, 3
    table = rng.standard_normal((vocab, dim))
    ids = rng.integers(0, vocab, (4, 5))
    rows = sharded.shard_rows(vocab, n)
    assert rows == [4, 3, 3]
    if strategy == "mod":
        owner = [(i % n, i // n) for i in range(vocab)]
    else:
        starts = np.cumsum([0, *rows])
        owner = [(int(np.searchsorted(starts, i, "right") - 1), 0) for i in range(vocab)]
        owner = [(p, i - int(starts[p])) for i, (p, _) in enumerate(owner)]
    parts = [np.zeros((r, dim)) for r in rows]
    for i, (p, r) in enumerate(owner):
        parts[p][r] = table[i]
    g = hb.Graph()
    with g.as_default():
        shards = [hb.Variable(p, name=f"part_{i}") for i, p in enumerate(parts)]
        out = sharded.embedding_lookup(shards, hb.constant(ids), strategy)
        assert out.shape.as_list() == [4, 5, dim]
        w = rng.standard_normal((4, 5, dim))
        grads = hb.gradients(hb.reduce_sum(out * w), shards)
        assert all(isinstance(gr, hb.IndexedSlices) for gr in grads)
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            got, gvals = s.run(out, None), s.run(grads)
    np.testing.assert_allclose(got, table[ids])
    dense = np.zeros((vocab, dim))
    np.add.at(dense, ids.reshape(-1), w.reshape(-1, dim))
    for i, (p, r) in enumerate(owner):
        np.testing.assert_allclose(gvals[p].to_dense()[r], dense[i])


# ---- candidate sampler and sampled softmax ---------------------------------------------------------


def _sample(true, num_sampled, unique, range_max, seed=1):
    g = hb.Graph()
    with g.as_default():
        hb.set_random_seed(seed)
        outs = log_uniform_candidate_sampler(
            hb.constant(np.asarray(true, np.int64)), 1, num_sampled, unique, range_max
        )
        with hb.Session() as s:
            return s.run(list(outs))


def test_log_uniform_sampler_unique():
    """Unique sampling gives distinct in-range int64 classes and expected counts from the number
    of tries, never above 1; the same seeds give the same sample."""
    true = [[0], [5], [99]]
    sampled, tc, sc = _sample(true, 20, True, 100)
    assert sampled.dtype == np.int64 and sampled.shape == (20,)
    assert len(set(sampled.tolist())) == 20 and sampled.min() >= 0 and sampled.max() < 100
    assert tc.dtype == np.float32 and tc.shape == (3, 1) and sc.shape == (20,)
    p = log_uniform_prob(np.array(true), 100)
    # the expected count is 1 - (1 - p)^tries for one shared number of tries >= 20
    tries = np.log1p(-tc.astype(np.float64)) / np.log1p(-p)
    assert np.allclose(tries, tries[0, 0], rtol=1e-4) and tries[0, 0] >= 20 - 1e-3
    assert np.all(sc <= 1.0)
    again = _sample(true, 20, True, 100)
    np.testing.assert_array_equal(sampled, again[0])


def test_log_uniform_sampler_distribution():
    """Without uniqueness, class frequencies follow P(c) = log((c + 2) / (c + 1)) / log(R + 1) and
    expected counts are P(c) * num_sampled."""
    n, r = 40_000, 8
    sampled, tc, sc = _sample([[3]], n, False, r, seed=7)
    p = log_uniform_prob(np.arange(r), r)
    assert abs(p.sum() - 1.0) < 1e-12
    freq = np.bincount(sampled, minlength=r) / n
    np.testing.assert_allclose(freq, p, atol=4 * np.sqrt(p * (1 - p) / n).max())
    np.testing.assert_allclose(sc, p[sampled] * n, rtol=1e-5)
    np.testing.assert_allclose(tc, [[p[3] * n]], rtol=1e-5)


def test_sampler_rejects_impossible_unique():
    """Asking for more unique candidates than classes raises."""
    with hb.Graph().as_default(), pytest.raises(hb.errors.InvalidArgumentError, match="unique"):
        log_uniform_candidate_sampler(hb.constant([[0]], hb.int64), 1, 11, True, 10)


def _reference_sampled_loss(w, b, labels, x, sampled, tc, sc, remove_hits):
    true_logits = np.sum(x * w[labels[:, 0]], axis=1, keepdims=True) + b[labels]
    samp_logits = x @ w[sampled].T + b[sampled]
    if remove_hits:
        samp_logits = np.where(labels == sampled[None, :], np.finfo(x.dtype).min, samp_logits)
    logits = np.concatenate([true_logits - np.log(tc), samp_logits - np.log(sc)], 1)
    m = logits.max(1, keepdims=True)
    logp = logits - m - np.log(np.exp(logits - m).sum(1, keepdims=True))
    return -logp[:, 0]


@pytest.mark.parametrize("remove_hits", [False, True])
def test_sampled_softmax_loss_forward(remove_hits):
    """sampled_softmax_loss equals TF1's formula on given candidates (log Q subtracted; a sampled
    true class pushed to -FLT_MAX when remove_accidental_hits)."""
    rng = np.random.default_rng(0)
    v, d, n = 7, 3, 4
    w, b, x = rng.standard_normal((v, d)), rng.standard_normal(v), rng.standard_normal((n, d))
    labels = np.array([[1], [4], [0], [4]], np.int64)
    sampled = np.array([4, 2, 6], np.int64)
    tc = rng.uniform(0.1, 0.9, (n, 1))
    sc = rng.uniform(0.1, 0.9, 3)

    def build(w_, b_, x_):
        return sampled_softmax_loss(
            w_,
            b_,
            hb.constant(labels),
            x_,
            num_sampled=3,
            num_classes=v,
            sampled_values=(hb.constant(sampled), hb.constant(tc), hb.constant(sc)),
            remove_accidental_hits=remove_hits,
        )

    check_forward(
        build,
        [w, b, x],
        lambda w_, b_, x_: _reference_sampled_loss(
            w_, b_, labels, x_, sampled, tc, sc, remove_hits
        ),
        rtol=1e-10,
    )
    check_gradient(build, [w, b, x])


def test_sampled_softmax_weight_gradient_is_sparse():
    """The gradient w.r.t. the softmax weights holds only the true and sampled rows."""
    g = hb.Graph()
    with g.as_default():
        hb.set_random_seed(0)
        w = hb.Variable(np.ones((1000, 4), np.float32), name="w")
        b = hb.Variable(np.zeros(1000, np.float32), name="b")
        x = hb.constant(np.ones((6, 4), np.float32))
        labels = hb.constant(np.arange(6, dtype=np.int64).reshape(6, 1))
        loss = hb.reduce_mean(sampled_softmax_loss(w, b, labels, x, 16, 1000))
        gw, gb = hb.gradients(loss, [w, b])
        assert isinstance(gw, hb.IndexedSlices) and isinstance(gb, hb.IndexedSlices)
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            val = s.run(gw)
    assert val.values.shape == (6 + 16, 4)


def test_compute_sampled_logits_shapes():
    """Sampled logits are [batch, num_true + num_sampled] with labels 1/num_true then zeros."""
    with hb.Graph().as_default():
        hb.set_random_seed(0)
        w = hb.constant(np.ones((50, 4), np.float32))
        b = hb.constant(np.zeros(50, np.float32))
        x = hb.constant(np.ones((3, 4), np.float32))
        labels = hb.constant(np.array([[1, 2], [3, 4], [5, 6]], np.int64))
        logits, lab = compute_sampled_logits(w, b, labels, x, 5, 50, num_true=2)
        assert logits.shape.as_list() == [3, 7]
        with hb.Session() as s:
            lv = s.run(lab)
    np.testing.assert_allclose(lv[:, :2], 0.5)
    np.testing.assert_allclose(lv[:, 2:], 0.0)


def test_dense_1gb_is_one_gigabyte(built):
    """dense_1gb: 784-16384-16384-10, 281.2M float32 parameters (closed form), 1.12 GB."""
    _, m, _ = built["dense_1gb"]
    want = 784 * 16384 + 16384 + 16384 * 16384 + 16384 + 16384 * 10 + 10
    assert m.params == want
    assert 1.1e9 < 4 * m.params < 1.15e9
