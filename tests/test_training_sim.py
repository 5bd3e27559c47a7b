"""Step-level training simulation: drivers against closed forms, the fast flow model against the
exact one, stragglers, failures, hybrid (real-gradient) runs and bad input."""

import math

import numpy as np
import pandas as pd
import pytest
import simpy

import hetbed as hb
from hetbed.devices.costmodel import DevicePerf, Roofline
from hetbed.simulator import Cluster, SimSession, sim_value
from hetbed.simulator.failures import Failure, poisson_failures
from hetbed.simulator.fluid import PSNetwork, ring_allreduce_time
from hetbed.simulator.hybrid import HybridLearner, time_to_accuracy
from hetbed.simulator.learner import Learner
from hetbed.simulator.stragglers import (
    Empirical,
    Interference,
    LogNormal,
    ParetoTail,
    SlowWorkers,
    combine,
)
from hetbed.simulator.topology import Nic
from hetbed.simulator.training import (
    AllReduceRing,
    AsyncPS,
    ReplicaProfile,
    SyncPS,
    normalized_speedup,
    profile_from_graph,
)

W, L = 1e9, 1e-4  # NIC: 1 GB/s, 100 us end to end
B = 1e6  # bytes of the model
C = 0.01  # compute seconds
A = 0.002  # PS apply seconds
FAST_NIC = (1e15, 0.0)  # a network too fast to matter


def profile(compute=C, nbytes=B, apply=A, **kw):
    return ReplicaProfile(compute, {"w": (int(nbytes), 0)}, apply_s=apply, **kw)


def approx(x, rel=1e-9):
    return pytest.approx(x, rel=rel)


# ---- closed forms ------------------------------------------------------------------------------


def test_one_worker_sync_step_is_pull_compute_push_apply():
    """1 worker, 1 PS: a step takes (L + B/W) + compute + (L + B/W) + apply."""
    r = SyncPS(profile(), 1, nic=(W, L)).run(4)
    want = (L + B / W) + C + (L + B / W) + A
    assert np.allclose(r.steps.step_time_s, want, rtol=1e-12)
    assert r.steps.step.tolist() == [0, 1, 2, 3] and (r.steps.contributors == 1).all()
    assert r.sim_time_s == approx(4 * want)


def test_incast_n_workers_pulling_from_one_ps_share_its_nic():
    """N workers pulling B bytes from one PS all finish at L + N B / W: the PS uplink is shared."""
    for n in (1, 4, 16):
        env = simpy.Environment()
        net = PSNetwork(env, [Nic(W, L)] * n, [Nic(W, L)], [[0]], "fast")
        done = []
        for i in range(n):
            ev = net.pull(i, [(0, B)]).event
            ev.callbacks.append(lambda _e, done=done, env=env: done.append(env.now))
        env.run()
        assert np.allclose(done, L + n * B / W, rtol=1e-12)
    # and in a synchronous step: pull and push both see the incast
    r = SyncPS(profile(), 8, nic=(W, L)).run(3)
    assert r.step_time() == approx(2 * (L + 8 * B / W) + C + A)


def test_the_ps_adds_each_gradient_into_its_accumulator_one_after_another():
    """Aggregation a per gradient: N pushes that arrive together (incast, fair share) queue on
    the shard's CPU, so a step takes 2 (L + N B / W) + C + N a + apply; with a worker 0.2 s
    slower, the others' gradients are added while it computes and only its own (a) is left
    after its push."""
    a = 0.003
    for n in (1, 4):
        r = SyncPS(profile(aggregate_s=a), n, nic=(W, L)).run(3)
        assert r.step_time() == approx(2 * (L + n * B / W) + C + n * a + A)
    slow = SlowWorkers({0: 1 + 0.2 / C})
    r = SyncPS(profile(aggregate_s=a), 4, nic=(W, L), straggler=slow).run(3)
    # the slow worker pulls with the others (incast of 4), pushes alone (B/W) after 0.2 s more
    assert r.step_time() == approx((L + 4 * B / W) + (C + 0.2) + (L + B / W) + a + A)
    prof = profile(aggregate_s=a)
    assert prof.shard_table(1).aggregate_s.tolist() == [a]
    with pytest.raises(ValueError, match="aggregate_s names 'v', which is not a profile variable"):
        profile(aggregate_s={"v": 1.0})


def test_more_ps_tasks_split_the_incast():
    """With the model split over K PS shards, the incast pull takes L + N B / (K W)."""
    n, k = 8, 4
    prof = ReplicaProfile.balanced(int(B / 4), k, C, examples_per_step=32)
    r = SyncPS(prof, n, nic=(W, L)).run(3)
    assert r.step_time() == approx(2 * (L + n * B / (k * W)) + C)
    assert r.throughput() == approx(n * 32 / r.step_time())


def test_backup_workers_hide_a_deterministic_straggler():
    """One worker 10x slower: the step waits for it with b = 0, not with b >= 1 (both semantics;
    TF's FIFO token queue sometimes hands a fast worker a stale token, costing it one compute)."""
    slow = SlowWorkers({0: 10.0})
    for twice in (False, True):
        kw = dict(nic=FAST_NIC, straggler=slow, fast_worker_can_contribute_twice=twice)
        r0 = SyncPS(profile(), 4, n_backup=0, init_tokens=0, **kw).run(20)
        assert r0.step_time() == approx(10 * C + A, rel=1e-6)
        for b in (1, 2):
            rb = SyncPS(profile(), 4, n_backup=b, **kw).run(20)
            if twice:
                assert rb.step_time(100) <= 2 * C + A + 1e-9
                assert np.isclose(rb.steps.step_time_s, C + A, rtol=1e-6).mean() > 0.3
            else:
                assert rb.step_time(100) == approx(C + A, rel=1e-6)  # even the slowest step
            assert (rb.steps.contributors == 4).all() and rb.steps.dropped.sum() > 0
            g = rb.gradients
            assert not g[g.worker == 0].accepted.any()  # the straggler never makes it


def test_first_m_of_n_contributes_once_token_queue_may_contribute_twice():
    """Without double contributions a step's accepted gradients come from distinct workers;
    with TF's token queue one fast worker can fill two slots of a step."""
    rng = np.random.default_rng(3)
    strag = SlowWorkers({0: 1.0, 1: 1.0, 2: 3.0, 3: 3.0})  # two fast, two slow
    for twice, expect_repeat in ((False, False), (True, True)):
        r = SyncPS(
            profile(),
            3,
            n_backup=1,
            nic=FAST_NIC,
            straggler=combine(strag, LogNormal(0.01, rng)),
            fast_worker_can_contribute_twice=twice,
        ).run(30)
        g = r.gradients[r.gradients.accepted]
        repeats = g.groupby("step").worker.apply(lambda w: w.duplicated().any())
        assert repeats.any() == expect_repeat
        assert (r.steps.contributors == 3).all()


def test_async_staleness_is_zero_alone_and_about_n_minus_one():
    """Async: staleness is 0 with one worker and averages about N - 1 with N identical workers."""
    r1 = AsyncPS(profile(), 1, nic=(W, L)).run(20)
    assert (r1.gradients.staleness == 0).all()
    assert r1.step_time() == approx((L + B / W) + C + (L + B / W) + A)
    for n in (4, 12):
        r = AsyncPS(profile(), n, nic=(W, L)).run(40 * n)
        tail = r.gradients.iloc[2 * n :]
        assert abs(tail.staleness.mean() - (n - 1)) < 0.5
        assert (r.gradients.apply_step == np.arange(40 * n)).all()


def test_ring_allreduce_matches_its_closed_form_and_the_exact_network():
    """Ring all-reduce step = compute + 2(N-1)(L + B/(N W)) + apply, in both network modes."""
    n = 5
    want = C + 2 * (n - 1) * (L + B / (n * W)) + A
    assert ring_allreduce_time(B, [Nic(W, L)] * n) == approx(want - C - A)
    for mode in ("fast", "exact"):
        r = AllReduceRing(profile(), n, nic=(W, L), network=mode).run(3)
        assert np.allclose(r.steps.step_time_s, want, rtol=1e-9)
    assert ring_allreduce_time(B, [Nic(W, L)]) == 0.0


# ---- the fast flow model is the exact one --------------------------------------------------------


def _random_transfers(mode, seed, groups=((0, 1), (2,), (3, 4, 5)), equal_workers=False):
    rng = np.random.default_rng(seed)
    env = simpy.Environment()
    n_ps = sum(len(g) for g in groups)
    ps = [None] * n_ps
    for g in groups:
        nic = Nic(float(rng.choice([1e9, 3e9])), float(rng.choice([0.0, 2e-4])))
        for k in g:
            ps[k] = nic
    bws = [1e9] if equal_workers else [1e9, 2e9]
    workers = [Nic(float(rng.choice(bws)), 1e-4) for _ in range(12)]
    net = PSNetwork(env, workers, ps, groups, mode)
    out = {}

    def proc(i):
        for rep in range(3):
            yield env.timeout(float(rng.uniform(0, 0.01)))
            parts = [
                (g, float(rng.uniform(1e5, 5e6)))
                for g in range(len(groups))
                if rng.random() < 0.8 or len(groups) == 1
            ]
            got = {}
            send = net.pull if rng.random() < 0.5 else net.push
            yield send(i, parts, lambda g, now, got=got: got.__setitem__(g, now)).event
            out[(i, rep)] = (env.now, got)

    for i in range(len(workers)):
        env.process(proc(i))
    env.run()
    return out


def test_fast_flow_model_equals_exact_max_min_flows():
    """Random pulls and pushes between heterogeneous workers and shard groups: every part ends at
    the same instant under the class-aggregated model as under one Network flow per shard."""
    cases = [(seed, {}) for seed in range(4)]
    cases += [(seed, {"groups": [(0, 1, 2)], "equal_workers": True}) for seed in range(4)]
    for seed, kw in cases:
        fast, exact = _random_transfers("fast", seed, **kw), _random_transfers("exact", seed, **kw)
        assert fast.keys() == exact.keys()
        for k in fast:
            assert fast[k][0] == pytest.approx(exact[k][0], rel=1e-12, abs=1e-15)
            for g, t in fast[k][1].items():
                assert t == pytest.approx(exact[k][1][g], rel=1e-12, abs=1e-15)


def test_a_cancelled_transfer_frees_its_share_at_once():
    """Two pulls share a PS NIC at W/2 each; cancelling one at time t lets the other finish its
    B - (t - L) W / 2 remaining bytes at the full W."""
    t = L + 0.5 * B / W  # a quarter of each flow sent
    for worker_bw in ((W, W), (W, 2 * W)):  # one queue, and the class-based engine
        env = simpy.Environment()
        net = PSNetwork(env, [Nic(bw, L) for bw in worker_bw], [Nic(W, L)], [[0]], "fast")
        keep, drop = net.pull(0, [(0, B)]), net.pull(1, [(0, B)])
        ended = []
        keep.event.callbacks.append(lambda _e, env=env, ended=ended: ended.append(env.now))
        env.run(until=t)
        net.cancel(drop)
        env.run()
        assert ended == [approx(t + (B - (t - L) * W / 2) / W, rel=1e-12)]
        assert not drop.event.triggered


def test_sync_and_async_drivers_agree_between_network_modes():
    """Unequal shards (round-robin variables of different sizes) with stragglers: the fast and
    exact network modes give the same step times."""
    prof = ReplicaProfile(
        0.005, {"a": (3_000_000, 0), "b": (500_000, 1), "c": (1_000_000, 2)}, apply_s=1e-4
    )
    for cls, kw in ((SyncPS, {"n_backup": 1}), (AsyncPS, {})):
        times = []
        for mode in ("fast", "exact"):
            d = cls(
                prof,
                6,
                nic=(W, L),
                network=mode,
                **kw,
                straggler=LogNormal(0.3, np.random.default_rng(7)),
            )
            times.append(d.run(30).steps.end_s.to_numpy())
        assert np.allclose(times[0], times[1], rtol=1e-9)


# ---- stragglers ---------------------------------------------------------------------------------


def test_straggler_models_draw_what_they_promise(tmp_path):
    """LogNormal has median 1; ParetoTail is >= 1 with tail x^-alpha; SlowWorkers is fixed;
    Interference slows about rate x duration of the time; Empirical resamples normalized times."""
    rng = np.random.default_rng(0)
    ln = np.array([LogNormal(0.5, rng).factor(0, s, 0.0) for s in range(1)])
    m = LogNormal(0.5, rng)
    x = np.array([m.factor(0, s, 0.0) for s in range(20000)])
    assert abs(np.median(x) - 1) < 0.03 and ln.size == 1
    p = ParetoTail(2.0, rng)
    y = np.array([p.factor(0, s, 0.0) for s in range(20000)])
    assert y.min() >= 1.0 and abs((y > 3).mean() - 3.0**-2) < 0.01
    assert SlowWorkers({3: 4.0}).factor(3, 0, 0.0) == 4.0
    assert SlowWorkers([1, 2], factor=2.0).factor(0, 0, 0.0) == 1.0
    inter = Interference(0.1, 1.0, 5.0, rng, random_duration=False)
    z = np.array([inter.factor(0, 0, t) for t in np.arange(0, 20000, 0.5)])
    assert abs((z == 5.0).mean() - (1 - math.exp(-0.1))) < 0.02
    times = np.array([1.0, 2.0, 2.0, 4.0])
    (tmp_path / "t.txt").write_text("\n".join(map(str, times)))
    pd.DataFrame({"step": range(4), "seconds": times}).to_csv(tmp_path / "t.csv", index=False)
    for src, kw in ((tmp_path / "t.txt", {}), (tmp_path / "t.csv", {"column": "seconds"})):
        e = Empirical(str(src), rng, **kw)
        assert sorted(set(e.factors)) == [0.5, 1.0, 2.0]
        assert {e.factor(0, s, 0.0) for s in range(200)} == {0.5, 1.0, 2.0}
    (tmp_path / "bad.txt").write_text("1.0\n-2\n")
    with pytest.raises(ValueError, match="finite and > 0"):
        Empirical(str(tmp_path / "bad.txt"), rng)
    with pytest.raises(ValueError, match="no column"):
        Empirical(str(tmp_path / "t.csv"), rng, column="nope")
    with pytest.raises(TypeError, match="Generator"):
        LogNormal(0.1, 0)


def test_same_seed_same_result():
    """Two runs with equally seeded straggler models give identical frames; another seed differs."""

    def once(seed):
        rng = np.random.default_rng(seed)
        s = combine(
            LogNormal(0.2, rng), ParetoTail(1.5, rng, 0.05), Interference(0.5, 0.05, 3, rng)
        )
        return SyncPS(profile(), 6, n_backup=2, nic=(W, L), straggler=s).run(40)

    a, b, c = once(1), once(1), once(2)
    pd.testing.assert_frame_equal(a.steps, b.steps)
    pd.testing.assert_frame_equal(a.gradients, b.gradients)
    assert not a.steps.end_s.equals(c.steps.end_s)


# ---- failures -----------------------------------------------------------------------------------


def test_ps_failure_redoes_the_steps_since_the_last_checkpoint():
    """A PS dying during step 7 with checkpoints every 5 steps loses steps 5 and 6; the run takes
    the failure time + restart delay + the remaining steps from the checkpoint."""
    T = (L + B / W) + C + (L + B / W) + A
    delay = 0.05
    f = Failure("ps", 0, at_s=7.5 * T, restart_delay_s=delay)
    r = SyncPS(profile(), 1, nic=(W, L), failures=[f], checkpoint_every=5).run(10)
    assert r.failures.steps_lost.tolist() == [2] and r.steps_lost == 2
    assert r.failures.restored_step.tolist() == [5] and r.failures.step_at_failure.tolist() == [7]
    assert r.steps[r.steps.lost].step.tolist() == [5, 6]
    assert r.completed.step.tolist() == list(range(10))
    assert r.sim_time_s == approx(7.5 * T + delay + 5 * T)
    # async: the same rule
    ra = AsyncPS(profile(), 1, nic=(W, L), failures=[f], checkpoint_every=5).run(10)
    assert ra.steps_lost == 2 and ra.sim_time_s == approx(7.5 * T + delay + 5 * T)


def test_progress_counts_each_completed_step_and_falls_back_after_a_rollback():
    """``run``'s ``on_step(done, steps)``: once per completed step of each driver (an
    asynchronous run's steps are applied gradients), in order, and after a PS failure with
    checkpoints every 5 steps it goes back to 5 after 7 (the next call says 6) and counts on."""
    for drv in (SyncPS(profile(), 2, nic=(W, L)), AsyncPS(profile(), 2, nic=(W, L))):
        calls: list = []
        drv.run(6, lambda done, total, calls=calls: calls.append((done, total)))
        assert calls == [(k, 6) for k in range(1, 7)]
    seen = []
    AllReduceRing(profile(), 2, nic=(W, L)).run(3, lambda d, t: seen.append((d, t)))
    assert seen == [(1, 3), (2, 3), (3, 3)]
    T = (L + B / W) + C + (L + B / W) + A
    f = Failure("ps", 0, at_s=7.5 * T, restart_delay_s=0.05)
    seen = []
    SyncPS(profile(), 1, nic=(W, L), failures=[f], checkpoint_every=5).run(
        10, lambda d, t: seen.append(d)
    )
    assert seen == [1, 2, 3, 4, 5, 6, 7, 6, 7, 8, 9, 10]


def test_worker_failure_loses_its_gradient_only_and_backups_cover_it():
    """A worker dying without rollback loses no steps; with a backup worker the step goes on
    without it, without backups the step waits for its restart."""
    T = C + A
    f = Failure("worker", 2, at_s=3.5 * T, restart_delay_s=10 * T)
    r = SyncPS(profile(), 4, n_backup=1, nic=FAST_NIC, failures=[f]).run(20)
    assert r.steps_lost == 0 and r.step_time(100) == approx(T, rel=1e-6)
    r0 = SyncPS(profile(), 4, nic=FAST_NIC, failures=[f]).run(20)
    assert r0.steps_lost == 0 and r0.sim_time_s == approx(3.5 * T + 10 * T + T + 16 * T, rel=1e-6)
    # all-reduce: any worker failure restarts the job from the checkpoint
    ra = AllReduceRing(profile(), 4, nic=FAST_NIC, failures=[f], checkpoint_every=2).run(8)
    assert ra.steps_lost == 1 and ra.sim_time_s == approx(3.5 * T + 10 * T + 6 * T, rel=1e-6)


def test_poisson_failures_are_sorted_and_seeded():
    """poisson_failures draws each task's failures from its own Poisson process, in time order."""
    a = poisson_failures(np.random.default_rng(5), 1000.0, 200.0, 10.0, n_workers=4, n_ps=2)
    b = poisson_failures(np.random.default_rng(5), 1000.0, 200.0, 10.0, n_workers=4, n_ps=2)
    assert a == b and [f.at_s for f in a] == sorted(f.at_s for f in a) and len(a) > 5


# ---- profiles from graphs -------------------------------------------------------------------------


def test_profile_from_graph_measures_compute_placement_and_apply_cost():
    """compute_s is the forward + backward time on the worker device; variables land on PS tasks
    by the chosen strategy; apply_s is the roofline of the update op on the PS device."""
    toy = DevicePerf(
        "toy", {"float32": 1e12}, memory_bandwidth=1e18, memory_bytes=1e12, launch_overhead_s=0.0
    )
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [1024, 1024])
        ids = hb.placeholder(hb.int32, [50])
        w = hb.Variable(np.zeros((1024, 1024), np.float32), name="w")
        b = hb.Variable(np.zeros((1024,), np.float32), name="b")
        emb = hb.Variable(np.zeros((1000, 8), np.float32), name="emb")
        loss = hb.reduce_sum(hb.matmul(x, w) + b) + hb.reduce_sum(hb.gather(emb, ids))
        train = hb.train.GradientDescentOptimizer(0.1).minimize(loss)
        feeds = {x: [1024, 1024], ids: ([50], np.int32)}
        p = profile_from_graph(train, feeds, worker=toy, ps=toy, ps_tasks=2)
        g = profile_from_graph(train, feeds, worker=toy, ps=toy, ps_tasks=2, strategy="greedy")
        update = next(op for op in train.control_inputs if "update_w" in op.name)
        with pytest.raises(ValueError, match="unknown PS strategy 'nearest'"):
            profile_from_graph(train, feeds, worker=toy, ps=toy, strategy="nearest")
    two_matmuls = 2 * (2 * 1024**3) / 1e12  # forward x@w and backward x^T @ dy
    assert p.compute_s == pytest.approx(two_matmuls, rel=0.01)
    assert p.dense == {"w": (4 * 1024**2, 0), "b": (4096, 1)}
    assert p.sparse == {"emb": (32, 50, 0)}  # round robin: w, b, emb
    assert g.dense["w"][1] == 0 and g.dense["b"][1] == 1 and g.sparse["emb"][2] == 1  # greedy
    roof = Roofline().duration(update, [(1024, 1024), (), (1024, 1024)], [(1024, 1024)], toy)
    assert p.apply_s["w"] == approx(roof)
    # adding one gradient into an accumulator: read both, write one (the bandwidth is infinite
    # here, so the adds at the toy's 1 TFLOP/s); the sparse one adds its 50 touched rows
    assert p.aggregate_s == approx({"w": 1024**2 / 1e12, "b": 1024 / 1e12, "emb": 400 / 1e12})
    assert p.examples_per_step == 1024 and p.worker_memory_bytes > 4 * 1024**2


def test_a_model_of_scalars_profiles_its_compute():
    """A scalar variable's gradient is a scalar: its forward and backward pass still count
    (compute_s is the time of the same gradient run on the worker), not zero."""
    toy = DevicePerf(
        "toy", {"float32": 1e9}, memory_bandwidth=1e9, memory_bytes=1e12, launch_overhead_s=0.0
    )
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [None])
        w = hb.Variable(np.float32(0.0), name="w")
        loss = hb.reduce_mean(hb.square(w * x - 1.0))
        train = hb.train.GradientDescentOptimizer(0.1).minimize(loss)
        (grad,) = hb.gradients(loss, [w])
        p = profile_from_graph(train, {x: [1 << 20]}, worker=toy, ps=toy)
        c = Cluster()
        c.add_task("worker", 0, cpu=toy)
        sess = SimSession(c)
        sess.run(grad, {x: sim_value([1 << 20])})
    assert p.dense == {"w": (4, 0)}
    assert p.compute_s > 1e-3  # ~4 MB read and written several times at 1 GB/s
    assert p.compute_s == approx(sess.last_record.step_time_s, rel=1e-6)


def test_placed_reshards_a_profile():
    """placed(k, strategy) re-places the variables with the device setter's strategies."""
    prof = ReplicaProfile(1.0, {"a": (100, 0), "b": (10, 0), "c": (10, 0), "d": (10, 0)})
    assert [ps for _, ps in prof.placed(2).dense.values()] == [0, 1, 0, 1]
    assert [ps for _, ps in prof.placed(2, "greedy").dense.values()] == [0, 1, 1, 1]
    assert prof.placed(3).shard_table(3).step_bytes.tolist() == [110.0, 10.0, 10.0]


# ---- bad input ----------------------------------------------------------------------------------


def test_impossible_configurations_are_clear_errors():
    """Backups beyond workers, no PS, negative counts, PS shards out of range, models that do not
    fit the PS or the worker: ValueError before any simulation."""
    p = profile()
    with pytest.raises(ValueError, match="n_backup=5 is more than n_workers=4"):
        SyncPS(p, 4, n_backup=5)
    with pytest.raises(ValueError, match="at least one PS"):
        SyncPS(p, 4, n_ps=0, ps_strategy="greedy")
    with pytest.raises(ValueError, match="ps_tasks >= 1"):
        p.placed(0, "greedy")
    with pytest.raises(ValueError, match="n_workers must be an integer >= 1, got -1"):
        AsyncPS(p, -1)
    with pytest.raises(ValueError, match="n_workers must be an integer >= 1, got 0"):
        SyncPS(p, 0)
    with pytest.raises(ValueError, match="n_backup must be an integer >= 0, got -2"):
        SyncPS(p, 2, n_backup=-2)
    with pytest.raises(ValueError, match="on PS 3 but there are only 2"):
        SyncPS(ReplicaProfile(1.0, {"w": (10, 3)}), 2, n_ps=2)
    with pytest.raises(ValueError, match="more than its memory"):
        SyncPS(profile(nbytes=2e9, ps_capacity_bytes=1e9), 2)
    with pytest.raises(ValueError, match="one step needs"):
        SyncPS(profile(worker_memory_bytes=13e9), 2, worker_device="k40")
    with pytest.raises(ValueError, match="backup workers need synchronous"):
        AsyncPS(p, 4, n_backup=1)
    with pytest.raises(ValueError, match="compute_s must be a finite number"):
        ReplicaProfile(-1.0, {"w": (1, 0)})
    with pytest.raises(ValueError, match="no variables"):
        SyncPS(ReplicaProfile(1.0), 2, n_ps=1)
    with pytest.raises(ValueError, match="worker 9 cannot fail"):
        SyncPS(p, 2, failures=[Failure("worker", 9, 1.0, 1.0)])
    with pytest.raises(ValueError, match="steps must be an integer >= 1"):
        SyncPS(p, 2).run(0)
    d = SyncPS(p, 1)
    d.run(1)
    with pytest.raises(RuntimeError, match="runs once"):
        d.run(1)


def test_normalized_speedup_helper():
    """normalized_speedup = t(0)/t(b) x N/(N+b)."""
    assert normalized_speedup(2.0, 1.0, 100, 4) == approx(2.0 * 100 / 104)
    slow = SlowWorkers({0: 3.0})
    r0 = SyncPS(profile(), 4, nic=FAST_NIC, straggler=slow).run(10)
    r1 = SyncPS(profile(), 4, n_backup=1, nic=FAST_NIC, straggler=slow).run(10)
    assert normalized_speedup(r0, r1, 4, 1) == approx((3 * C + A) / (C + A) * 4 / 5, rel=1e-6)


# ---- hybrid: real gradients on simulated time ------------------------------------------------------


@pytest.fixture(scope="module")
def digits_model():
    """Softmax regression on scikit-learn's digits as grad_fn / apply_fn / eval_fn over a hetbed
    graph whose parameters are fed."""
    from hetbed.scenarios.datasets import digits

    data = digits(seed=0)
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, [None, 64])
        y = hb.placeholder(hb.int32, [None])
        w = hb.placeholder(hb.float32, [64, 10])
        b = hb.placeholder(hb.float32, [10])
        logits = hb.matmul(x, w) + b
        loss = hb.reduce_mean(
            hb.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
        )
        grads = hb.gradients(loss, [w, b])
    sess = hb.Session(graph=g)
    bs = 32
    n_batches = len(data.x_train) // bs
    order = np.random.default_rng(0).permutation(len(data.x_train))

    def grad_fn(params, batch):
        j = order[(batch % n_batches) * bs : (batch % n_batches + 1) * bs]
        lv, gw, gb = sess.run(
            [loss, *grads], {x: data.x_train[j], y: data.y_train[j], w: params[0], b: params[1]}
        )
        return float(lv), [gw, gb]

    def apply_fn(params, gr):
        return [p - 0.5 * d for p, d in zip(params, gr)]

    def eval_fn(params):
        pred = (data.x_test @ params[0] + params[1]).argmax(1)
        return float((pred == data.y_test).mean())

    init = [np.zeros((64, 10), np.float32), np.zeros(10, np.float32)]
    yield grad_fn, apply_fn, eval_fn, init
    sess.close()


def test_hybrid_async_learns_despite_staleness(digits_model):
    """Async with 16 workers: gradients are N-1 steps stale on average, and the model still learns."""
    grad_fn, apply_fn, eval_fn, init = digits_model
    learner = HybridLearner(grad_fn, apply_fn, init, eval_fn, eval_every=50)
    prof = ReplicaProfile(0.01, {"w": (2560, 0), "b": (40, 0)}, apply_s=1e-5, examples_per_step=32)
    r = AsyncPS(
        prof, 16, nic=(W, L), learner=learner, straggler=LogNormal(0.3, np.random.default_rng(1))
    ).run(400)
    assert r.mean_staleness > 10
    curve = r.curve
    assert curve.accuracy.iloc[0] < 0.2 and curve.accuracy.iloc[-1] > 0.85
    assert curve.step.iloc[-1] == 400 and time_to_accuracy(curve, 0.8) < r.sim_time_s


def test_hybrid_sync_backups_drop_gradients_and_learn_as_well(digits_model):
    """Sync with 2 backup workers drops late gradients, yet reaches about the accuracy of b = 0."""
    grad_fn, apply_fn, eval_fn, init = digits_model
    prof = ReplicaProfile(0.01, {"w": (2560, 0), "b": (40, 0)}, apply_s=1e-5, examples_per_step=32)
    acc = {}
    for b in (0, 2):
        learner = HybridLearner(grad_fn, apply_fn, init, eval_fn, eval_every=20)
        r = SyncPS(
            prof,
            4,
            n_backup=b,
            nic=(W, L),
            learner=learner,
            straggler=LogNormal(0.5, np.random.default_rng(2)),
        ).run(80)
        acc[b] = r.curve.accuracy.iloc[-1]
        if b:
            assert r.steps.dropped.sum() > 0 and learner.batches > 4 * 80
    assert acc[0] > 0.85 and abs(acc[0] - acc[2]) < 0.05


def test_hybrid_rollback_restores_the_checkpointed_parameters(digits_model):
    """A PS failure rolls the learned parameters back to the last checkpoint with the step."""
    grad_fn, apply_fn, eval_fn, init = digits_model
    prof = ReplicaProfile(0.01, {"w": (2560, 0), "b": (40, 0)}, apply_s=1e-5)
    learner = HybridLearner(grad_fn, apply_fn, init, eval_fn, eval_every=5)
    T = 2 * (L + 2 * 2600 / W) + 0.01 + 1e-5
    fail = Failure("ps", 0, at_s=12.5 * T, restart_delay_s=0.1)
    r = SyncPS(prof, 2, nic=(W, L), learner=learner, failures=[fail], checkpoint_every=10).run(30)
    assert r.steps_lost == 2 and learner.applied == 30
    curve = r.curve
    assert curve.step.tolist() == [0, 5, 10, 15, 20, 25, 30]  # 11 and 12 were undone, redone
    assert curve.time_s.iloc[3] > fail.at_s + fail.restart_delay_s


def test_a_push_issued_as_the_compute_starts_gives_the_same_run():
    """Without a learner, a SyncPS worker issues its push as its compute starts, to leave when it
    ends (one event a step fewer); with one, it waits for the compute and pushes then. With
    stragglers, backup workers, a token queue and a worker failure, both give the same frames."""
    f = Failure("worker", 1, at_s=2.5 * (C + A), restart_delay_s=3 * C)
    for kw in ({"n_backup": 0}, {"n_backup": 1}, {"n_backup": 2, "init_tokens": 2}):
        runs = []
        for learner in (None, Learner()):
            s = LogNormal(0.3, np.random.default_rng(5))
            d = SyncPS(profile(), 5, nic=(W, L), straggler=s, failures=[f], learner=learner, **kw)
            runs.append(d.run(30))
        a, b = runs
        pd.testing.assert_frame_equal(a.steps, b.steps)
        pd.testing.assert_frame_equal(a.gradients, b.gradients)
        assert len(a.completed) == 30 and a.events < b.events


def test_workers_run_as_callbacks_give_the_same_run():
    """Without failures (nor a learner, messages or a token queue) SyncPS runs each worker as a
    chain of callbacks, with no process or transfer event of its own; with stragglers, backup
    workers, two shard groups and a zero-latency network, the frames equal those of the
    learner's path (a process a worker), whose pull, compute and push are an event each. An
    update of no time releases the step at the instant of the last push's end, where the order
    of a callback and a process differ: the processes run then (same frames)."""
    two = ReplicaProfile(C, {"a": (300_000, 0), "b": (700_000, 1)}, apply_s=A)
    for prof, nic, kw in (
        (profile(), (W, L), {"n_backup": 0}),
        (profile(), (W, L), {"n_backup": 2}),
        (two, (W, 0.0), {"n_backup": 1, "n_ps": 2}),
        (profile(apply=0.0), (W, L), {"n_backup": 1}),
    ):
        runs = []
        chained = prof.apply_s > 0
        for learner in (None, Learner()):
            s = LogNormal(0.3, np.random.default_rng(7))
            d = SyncPS(prof, 5, nic=nic, straggler=s, learner=learner, **kw)
            runs.append(d.run(25))
            assert (d.procs == []) == (learner is None and chained)
        a, b = runs
        pd.testing.assert_frame_equal(a.steps, b.steps)
        pd.testing.assert_frame_equal(a.gradients, b.gradients)
        assert len(a.completed) == 25 and a.events + (3 * 5 * 25 if chained else 1) <= b.events


def test_async_workers_run_as_callbacks_give_the_same_run():
    """AsyncPS likewise runs its workers as callbacks without failures (nor a learner, messages
    or a shared machine): with stragglers, two shard groups, a zero-latency network and updates
    of no time, the frames equal the learner's path (a process a worker), in fewer events."""
    two = ReplicaProfile(C, {"a": (300_000, 0), "b": (700_000, 1)}, apply_s=A)
    for prof, nic, kw in (
        (profile(), (W, L), {}),
        (two, (W, 0.0), {"n_ps": 2}),
        (profile(apply=0.0), (W, L), {}),
    ):
        runs = []
        for learner in (None, Learner()):
            s = LogNormal(0.3, np.random.default_rng(11))
            d = AsyncPS(prof, 4, nic=nic, straggler=s, learner=learner, **kw)
            runs.append(d.run(60))
            assert (d.procs == []) == (learner is None)
        a, b = runs
        pd.testing.assert_frame_equal(a.steps, b.steps)
        pd.testing.assert_frame_equal(a.gradients, b.gradients)
        assert a.events + 2 * 60 <= b.events


def test_ps_kernels_that_keep_one_core_busy_run_side_by_side_on_a_shared_machine():
    """Two PS tasks on one machine of 2 cores, one variable each: updates that keep all its
    cores busy take turns (a step of C + 2A), single-core ones run side by side (C + A), as the
    op-level simulator books kernels; the shard table carries the single-core seconds."""
    for cores, want in (({}, C + 2 * A), ({"a": 1, "b": 1}, C + A)):
        prof = ReplicaProfile(C, {"a": (1000, 0), "b": (1000, 1)}, apply_s=A, apply_cores=cores)
        r = SyncPS(prof, 1, n_ps=2, nic=FAST_NIC, machine_cores=2).run(5)
        assert np.allclose(r.steps.step_time_s, want, rtol=1e-6)
        assert prof.shard_table(2).apply_serial_s.tolist() == [A if cores else 0.0] * 2
    with pytest.raises(ValueError, match=r"apply_cores\['a'\] must be an integer >= 1"):
        ReplicaProfile(C, {"a": (1000, 0)}, apply_cores={"a": 0})


def test_the_profile_gives_each_ps_kernel_the_op_level_simulators_cores():
    """profile_from_graph books the update and the accumulator's add and take on the cores the
    op-level simulator would (devices.simulated's rule): one for a kernel that is mostly its
    dispatch, the measured cores where the cost model measured them, all the PS host's for the
    rest."""

    class Measured(Roofline):
        def cores_used(self, op, ins):
            return 3.4 if op.type == "ApplyGradientDescent" else None

    def profile(n, model=None):
        perf = DevicePerf("toy", {"float32": 1e9}, memory_bandwidth=1e9, memory_bytes=1e12,
                          launch_overhead_s=1e-4, cores=8)  # fmt: skip
        with hb.Graph().as_default():
            x = hb.placeholder(hb.float32, [n])
            w = hb.Variable(np.zeros(n, np.float32), name="w")
            loss = hb.reduce_sum(hb.square(w * x - 1.0))
            train = hb.train.GradientDescentOptimizer(0.1).minimize(loss)
            return profile_from_graph(train, {x: [n]}, worker=perf, ps=perf, cost_model=model)

    small, big = profile(4), profile(1 << 22)  # 16 B: dispatch; 16 MB at 1 GB/s: 50 ms
    assert (small.apply_cores, small.aggregate_cores, small.take_cores) == ({"w": 1},) * 3
    assert (big.apply_cores, big.aggregate_cores, big.take_cores) == ({"w": 8},) * 3
    assert profile(1 << 22, Measured()).apply_cores == {"w": 3}


def test_an_async_push_issued_as_the_compute_starts_gives_the_same_run():
    """AsyncPS likewise: without a learner the push is issued as the compute starts; with stragglers
    and a worker failure, the frames equal those of the learner's path (push after the
    compute)."""
    f = Failure("worker", 2, at_s=3.5 * C, restart_delay_s=2 * C)
    runs = []
    for learner in (None, Learner()):
        s = LogNormal(0.3, np.random.default_rng(9))
        runs.append(AsyncPS(profile(), 4, nic=(W, L), straggler=s, failures=[f],
                            learner=learner).run(60))  # fmt: skip
    a, b = runs
    pd.testing.assert_frame_equal(a.steps, b.steps)
    pd.testing.assert_frame_equal(a.gradients, b.gradients)
    assert a.events < b.events
