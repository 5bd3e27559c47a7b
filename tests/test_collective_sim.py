"""Collectives that cost time: the op-level all-reduce as a ring of flows on the simulated
network, and the step-level AllReduceRing's buckets overlapping the backward pass."""

import numpy as np
import pytest

import hetbed as hb
from hetbed.runtime.ops.collective import all_reduce
from hetbed.simulator import AllReduceRing, Cluster, SimSession, profile_from_graph, sim_value
from hetbed.simulator.fluid import ring_allreduce_time
from hetbed.simulator.topology import Nic
from hetbed.simulator.training import ReplicaProfile, gradient_buckets


def _ring_step(n, nbytes, link, hybrid=False, values=None, collective="ring"):
    """One step of an all-reduce of ``nbytes`` per GPU over n GPUs of one host, every pair
    joined by a peer link ``link`` = (bytes/s, latency s): the ring's links are all equal."""
    c = Cluster(hybrid=hybrid, collective=collective)
    c.add_task("worker", 0, gpu=("v100_sxm2", n), peer_link=link)
    size = int(nbytes // 4)
    g = hb.Graph()
    with g.as_default():
        xs = []
        for i in range(n):
            with hb.device(f"/job:worker/task:0/device:gpu:{i}"):
                xs.append(hb.placeholder(hb.float32, [size]))
        outs = all_reduce(xs)
    feeds = {x: (values[i] if values else sim_value((size,))) for i, x in enumerate(xs)}
    with SimSession(c, graph=g) as s:
        got = s.run(outs, feeds)
        rec = s.last_record
    return c, rec, got


@pytest.mark.parametrize("n", [2, 4])
def test_op_level_ring_all_reduce_takes_its_closed_form_and_loads_each_ring_link(n):
    """n GPUs on a ring of equal links (b, L): 2(n-1)(L + B/(n b)) plus n-1 chunk additions;
    each ring link carries 2(n-1) B/n bytes, other links none; 2(n-1) flows per GPU."""
    b, L, B = 10e9, 5e-6, 64e6
    c, rec, _ = _ring_step(n, B, (b, L))
    add = c.devices()[1].reduction_s(B / n, np.float32)
    assert 0 < (n - 1) * add < 0.02 * rec.step_time_s  # the arithmetic is small
    want = 2 * (n - 1) * (L + B / (n * b)) + (n - 1) * add
    assert rec.step_time_s == pytest.approx(want, rel=1e-9)
    flows = rec.flows[rec.flows.tag.astype(str).str.startswith("allreduce")]
    assert len(flows) == n * 2 * (n - 1)
    assert np.allclose(flows.bytes, B / n)
    links = rec.links.set_index("link").bytes
    gpus = [d.name for d in c.devices() if d.device_type == "gpu"]
    ring = {c.route(gpus[i], gpus[(i + 1) % n])[0].name for i in range(n)}
    assert len(ring) == n
    for name, carried in links.items():
        want_bytes = 2 * (n - 1) * B / n if name in ring else 0.0
        assert carried == pytest.approx(want_bytes, rel=1e-9, abs=1e-6), name


def test_op_level_all_reduce_sums_in_hybrid_mode_and_takes_latency_rounds():
    """Real values (hybrid): every GPU gets the sum; a tiny buffer takes 2(n-1) latencies."""
    n, L = 3, 1e-3
    vals = [np.full(6, i + 1.0, np.float32) for i in range(n)]
    c, rec, got = _ring_step(n, 24, (1e12, L), hybrid=True, values=vals)
    for v in got:
        np.testing.assert_array_equal(v, np.full(6, 6.0, np.float32))
    assert rec.step_time_s == pytest.approx(2 * (n - 1) * L, rel=1e-4)


def _mlp(x, y):
    h = hb.layers.dense(x, 512, activation=hb.nn.relu)
    h = hb.layers.dense(h, 256, activation=hb.nn.relu)
    logits = hb.layers.dense(h, 10)
    return hb.reduce_mean(hb.square(logits - y))


@pytest.fixture(scope="module")
def mlp_profile():
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, [64, 784])
        y = hb.placeholder(hb.float32, [64, 10])
        train = hb.train.GradientDescentOptimizer(0.1).minimize(_mlp(x, y))
    return profile_from_graph(train, {x: (64, 784), y: (64, 10)}, worker="k40")


@pytest.mark.parametrize("algorithm", ["ring", "tree"])
def test_op_level_and_step_level_all_reduce_agree_within_5_percent(mlp_profile, algorithm):
    """One model's gradient bytes, n workers with one K40 each on 10 GbE: the op-level ring's
    (or tree's) communication time equals the step-level AllReduceRing's within 5%."""
    prof, n = mlp_profile, 4
    drv = AllReduceRing(prof, n, nic="eth_10g", bucket_bytes=None, algorithm=algorithm)
    r = drv.run(1)
    step_comm = r.steps.step_time_s[0] - prof.compute_s - drv.local_apply_s
    c = Cluster(collective=algorithm)
    for i in range(n):
        c.add_task("worker", i, gpu=("k40", 1), nic="eth_10g")
    size = int(prof.step_bytes // 4)
    g = hb.Graph()
    with g.as_default():
        xs = []
        for i in range(n):
            with hb.device(f"/job:worker/task:{i}/device:gpu:0"):
                xs.append(hb.placeholder(hb.float32, [size]))
        outs = all_reduce(xs)
    with SimSession(c, graph=g) as s:
        s.run(outs, {x: sim_value((size,)) for x in xs})
        f = s.last_record.flows
    f = f[f.tag.astype(str).str.startswith("allreduce")]
    op_comm = f.end_s.max() - f.start_s.min()
    assert step_comm > 0.5 * r.steps.step_time_s[0]  # communication dominates this step
    assert op_comm == pytest.approx(step_comm, rel=0.05)


def test_op_level_all_reduces_start_as_gradients_become_ready():
    """Towers on 2 GPUs, one all-reduce per gradient: the last layer's all-reduce has finished
    before the backward pass ends (they are not chained after the whole backward pass)."""
    c = Cluster()
    c.add_task("worker", 0, gpu=("k40", 2), peer_link="nvlink2")
    g = hb.Graph()
    feeds, tower = {}, []
    with g.as_default():
        for i in range(2):
            with (
                hb.device(f"/job:worker/task:0/device:gpu:{i}"),
                hb.variable_scope("m", reuse=i > 0),
            ):
                x = hb.placeholder(hb.float32, [64, 784])
                y = hb.placeholder(hb.float32, [64, 10])
                feeds[x], feeds[y] = sim_value((64, 784)), sim_value((64, 10))
                opt = hb.train.GradientDescentOptimizer(0.1)
                tower.append(opt.compute_gradients(_mlp(x, y)))
        means = [all_reduce([t[k][0] for t in tower], "mean")[0] for k in range(len(tower[0]))]
    with SimSession(c, graph=g) as s:
        s.run(means, feeds)
        rec = s.last_record
    grad_ops = rec.ops[rec.ops.op.str.contains("gradients/")]
    last_layer = means[-2].op.attrs["group_key"]  # dense_2/kernel's all-reduce
    f = rec.flows[rec.flows.tag == last_layer]
    assert len(f) == 2 * 2 * (2 - 1)
    assert f.end_s.max() < grad_ops.end_s.max()


# ---- step level: buckets --------------------------------------------------------------------

W, L, C, A = 1e9, 1e-4, 0.05, 0.002
S = 1e6  # bytes per variable


def _profile(k=4, ready=None):
    dense = {f"v{j}": (int(S), 0) for j in range(k)}
    ready = ready or {f"v{j}": 1.0 - 0.2 * (k - 1 - j) / k for j in range(k)}
    return ReplicaProfile(C, dense, apply_s=1.0, worker_apply_s={"v0": A}, grad_ready=ready)


def test_one_bucket_is_the_whole_compute_then_the_whole_ring():
    """bucket_bytes None or >= the model: compute + ring(all bytes) + the worker's apply."""
    n, p = 4, _profile()
    want = C + ring_allreduce_time(p.step_bytes, [Nic(W, L)] * n) + A
    for bucket in (None, 4 * S, 1e12):
        for mode in ("fast", "exact"):
            r = AllReduceRing(p, n, nic=(W, L), bucket_bytes=bucket, network=mode).run(2)
            assert np.allclose(r.steps.step_time_s, want, rtol=1e-12), (bucket, mode)


def test_buckets_overlap_the_backward_pass_leaving_the_last_buckets_ring():
    """Compute >> comm, one bucket per variable: step = compute + ring(last bucket) + apply,
    as the update on the worker (the profile's worker_apply_s, not the PS's apply_s)."""
    n, p = 4, _profile()
    ring1 = ring_allreduce_time(S, [Nic(W, L)] * n)
    assert ring1 < 0.2 * C / 4  # each bucket's ring ends before the next bucket is ready
    for mode in ("fast", "exact"):
        r = AllReduceRing(p, n, nic=(W, L), bucket_bytes=S, network=mode).run(3)
        assert r.config["buckets"] == 4
        assert np.allclose(r.steps.step_time_s, C + ring1 + A, rtol=1e-9), mode


def test_buckets_wait_for_the_previous_bucket_when_comm_dominates():
    """Comm >> compute: buckets run back to back from the first one's ready time."""
    n = 4
    p = _profile(ready={"v0": 1.0, "v1": 0.9, "v2": 0.5, "v3": 0.1})
    ring1 = ring_allreduce_time(S, [Nic(W / 100, L)] * n)
    assert ring1 > C
    r = AllReduceRing(p, n, nic=(W / 100, L), bucket_bytes=2 * S).run(1)
    assert gradient_buckets(p, 2 * S) == [(2 * S, 0.5), (2 * S, 1.0)]
    ring2 = ring_allreduce_time(2 * S, [Nic(W / 100, L)] * n)
    assert r.steps.step_time_s[0] == pytest.approx(0.5 * C + 2 * ring2 + A, rel=1e-9)


def test_default_readiness_model_yields_gradients_in_reverse_order_over_the_backward_pass():
    """Unmeasured: the backward pass is the last 2/3 of compute, shares by bytes, v0 last."""
    p = ReplicaProfile(C, {"a": (100, 0), "b": (300, 0)})
    assert p.ready_fractions() == pytest.approx({"b": 1 / 3 + 2 / 3 * 0.75, "a": 1.0})
    with pytest.raises(ValueError, match=r"grad_ready\['a'\] must be in \[0, 1\], got 2"):
        ReplicaProfile(C, {"a": (100, 0)}, grad_ready={"a": 2.0})
    with pytest.raises(ValueError, match="bucket_bytes must be > 0 or None, got 0"):
        AllReduceRing(p, 2, bucket_bytes=0)


def test_profile_measures_gradient_readiness_and_the_update_on_the_worker(mlp_profile):
    """profile_from_graph: the last layer's gradient is ready before the first's (backward
    order); the worker's update is priced on the worker GPU, which AllReduceRing uses."""
    p = mlp_profile
    ready = p.ready_fractions()
    assert 0 < ready["dense_2/kernel"] < ready["dense_1/kernel"] < ready["dense/kernel"] <= 1
    assert p.worker_apply_s["dense/kernel"] < p.apply_s["dense/kernel"]  # a K40 vs a PS CPU
    drv = AllReduceRing(p, 2)
    assert drv.local_apply_s == pytest.approx(sum(p.worker_apply_s.values()), rel=1e-12)


def test_bucketed_all_reduce_packs_gradients_in_reverse_order_and_keeps_values():
    """Hybrid, 2 GPUs, gradients of 16, 8, 40 and 4 bytes: buckets of >= 20 bytes taken from the
    last are [4, 40] and [8, 16] (two all-reduces); 1 byte: one per gradient; values are sums."""
    from hetbed.runtime.ops.collective import bucketed_all_reduce

    shapes = [(2, 2), (2,), (5, 2), (1,)]
    c = Cluster(hybrid=True)
    c.add_task("worker", 0, gpu=("v100_sxm2", 2), peer_link="nvlink2")
    g = hb.Graph()
    with g.as_default():
        towers = []
        for i in range(2):
            with hb.device(f"/job:worker/task:0/device:gpu:{i}"):
                towers.append(
                    [
                        hb.constant(np.full(s, 10.0 * i + k, np.float32))
                        for k, s in enumerate(shapes)
                    ]
                )
        for bucket, groups in ((20, 2), (1, 4)):
            outs = bucketed_all_reduce(towers, bucket, "sum")
            with SimSession(c, graph=g) as s:
                got = s.run(outs)
                tags = set(s.last_record.flows.tag.astype(str))
            assert len({t for t in tags if t.startswith("allreduce")}) == groups
            for tower in got:
                for k, v in enumerate(tower):
                    np.testing.assert_array_equal(v, np.full(shapes[k], 10.0 + 2 * k, np.float32))
    with pytest.raises(Exception, match="bucket_bytes must be > 0, got 0"):
        bucketed_all_reduce(towers, 0)


def test_ring_hops_sharing_a_nic_split_its_bandwidth():
    """2 hosts x 2 GPUs, ring alternating hosts: each NIC carries two chunks per round, so a round
    takes the path's latency (NIC L + two PCIe hops) + 2 (B/n) / b."""
    b, L, B, n = 1e9, 20e-6, 8e6, 4
    c = Cluster()
    for t in range(2):
        c.add_task("worker", t, gpu=("k40", 2), nic=(b, L))
    devs = [f"/job:worker/task:{t}/device:gpu:{k}" for k in range(2) for t in range(2)]
    size = int(B // 4)
    g = hb.Graph()
    with g.as_default():
        xs = []
        for d in devs:
            with hb.device(d):
                xs.append(hb.placeholder(hb.float32, [size]))
        outs = all_reduce(xs)
    with SimSession(c, graph=g) as s:
        s.run(outs, {x: sim_value((size,)) for x in xs})
        f = s.last_record.flows
    f = f[f.tag.astype(str).str.startswith("allreduce")]
    pcie_lat = 2 * 1e-6  # pcie3_x16 up and down
    add = c.devices()[1].reduction_s(B / n, np.float32)
    want = 2 * (n - 1) * (L + pcie_lat + 2 * B / (n * b)) + (n - 1) * add
    assert f.end_s.max() - f.start_s.min() == pytest.approx(want, rel=1e-9)


# ---- the double binary tree (simulator/collectives.py) -----------------------------------------


def test_tree_parents_make_two_complementary_trees():
    from hetbed.simulator.collectives import tree_depth, tree_parents

    for n in range(2, 17):
        a, b = tree_parents(n)
        for par in (a, b):
            assert par.count(-1) == 1  # one root
            for p in par:  # every rank reaches the root within the depth
                hops = 0
                while p >= 0:
                    p, hops = par[p], hops + 1
                assert hops <= tree_depth(n)
        inner_a = {p for p in a if p >= 0}
        inner_b = {p for p in b if p >= 0}
        if n % 2 == 0:
            assert not inner_a & inner_b  # a rank is an inner node of one tree at most


@pytest.mark.parametrize("n", [4, 5, 8])
def test_tree_all_reduce_sums_and_takes_2_depth_latencies(n):
    """Real values (hybrid): every GPU gets the sum; a tiny buffer takes 2 floor(log2 n)
    latencies, where the ring takes 2(n-1)."""
    L = 1e-3
    vals = [np.full(6, i + 1.0, np.float32) for i in range(n)]
    c, rec, got = _ring_step(n, 24, (1e12, L), hybrid=True, values=vals, collective="tree")
    for v in got:
        np.testing.assert_array_equal(v, np.full(6, n * (n + 1) / 2, np.float32))
    depth = int(np.floor(np.log2(n)))
    assert rec.step_time_s == pytest.approx(2 * depth * L, rel=1e-4)
    assert rec.step_time_s < 2 * (n - 1) * L


def test_tree_all_reduce_bandwidth_closed_form_and_bytes():
    """Two GPUs: each tree moves half the buffer up and back down, the two trees in opposite
    directions: 2 (L + B/(2 b)) plus one chunk addition. Four GPUs: the links carry
    2(n-1) B in all, as the ring's do, in 2 trees x 2 directions x (n-1) edges x chunks flows."""
    from hetbed.simulator.collectives import TREE_CHUNK_BYTES

    b, L, B = 10e9, 5e-6, 1 << 20
    c, rec, _ = _ring_step(2, B, (b, L), collective="tree")
    add = c.devices()[1].reduction_s(B / 2, np.float32)
    assert rec.step_time_s == pytest.approx(2 * (L + B / 2 / b) + add, rel=1e-9)
    n, B = 4, 8 * TREE_CHUNK_BYTES
    c, rec, _ = _ring_step(n, B, (b, L), collective="tree")
    flows = rec.flows[rec.flows.tag.astype(str).str.startswith("allreduce")]
    k = B / 2 / TREE_CHUNK_BYTES
    assert len(flows) == 2 * 2 * (n - 1) * k
    assert flows.bytes.sum() == pytest.approx(2 * (n - 1) * B, rel=1e-12)
    assert rec.links.bytes.sum() == pytest.approx(2 * (n - 1) * B, rel=1e-12)
    ring = _ring_step(n, B, (b, L))[1].step_time_s
    assert rec.step_time_s < 1.2 * ring  # pipelined: close to the ring's bandwidth term


def test_bad_collective_names_are_refused():
    with pytest.raises(ValueError, match="collective must be 'ring' or 'tree'"):
        Cluster(collective="butterfly")
    with pytest.raises(ValueError, match="algorithm must be 'ring' or 'tree'"):
        AllReduceRing(ReplicaProfile(1.0), 2, algorithm="star")
