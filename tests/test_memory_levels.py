"""The host memory model of the cost model: a cache level in the roofline, a profiled family's
slope kept to where it was measured, and the allocator's new pages for large op outputs (not
received tensors: the runtime pools their buffers), with the catalog fields and calibrate's
measurements that feed them."""

from __future__ import annotations

import math
import platform
from dataclasses import replace

import numpy as np
import pytest
from simsteps import read_step

import hetbed as hb
from hetbed.devices.catalog import CatalogError, load_device
from hetbed.devices.costmodel import (
    DevicePerf,
    Profiled,
    Roofline,
    cache_hit,
    fresh_output_seconds,
    perf_from_spec,
    profile_key,
)
from hetbed.runtime.distributed.wire import _RecvPool
from hetbed.runtime.ops.math import broadcast_like
from hetbed.simulator import Cluster, SimSession, sim_value
from hetbed.simulator.training import ReplicaProfile, SyncPS

MB = 1 << 20
# round numbers: 1 TFLOP/s, memory 10 GB/s, a 32 MiB cache at 100 GB/s, new pages 0.05 ns/byte
# over 32 MiB, 1 us per op, one core
PLAIN = DevicePerf(
    "host", {"float32": 1e12}, memory_bandwidth=10e9, memory_bytes=8e9, launch_overhead_s=1e-6
)
HOST = replace(
    PLAIN,
    cores=1,
    cache_bytes=32 * MB,
    cache_bandwidth=100e9,
    fresh_threshold_bytes=32 * MB,
    fresh_s_per_byte=5e-11,
)


def _poisson_cdf(k: int, lam: float) -> float:
    return math.fsum(math.exp(-lam) * lam**i / math.factorial(i) for i in range(k + 1))


def test_a_sweep_hits_the_lines_of_the_sets_it_does_not_overflow():
    """``cache_hit``: the sweep's lines fall into a 16-way cache's sets as a Poisson number of
    mean 16 x moved / cache; a set that overflows keeps none of a cyclic sweep (LRU), one that
    does not keeps all: the hits are P(Poisson <= 15)."""
    for share in (0.25, 0.5, 0.75, 1.0, 1.5, 2.0):
        assert cache_hit(share * 32 * MB, 32 * MB) == pytest.approx(
            _poisson_cdf(15, 16 * share), rel=1e-9, abs=1e-12
        )
    assert cache_hit(8 * MB, 32 * MB) > 0.99999  # a quarter: calibrate's cache rate
    assert 0.45 < cache_hit(32 * MB, 32 * MB) < 0.5  # its size: about half
    assert cache_hit(96 * MB, 32 * MB) < 1e-6  # three times: none (min(1, c / moved): a third)
    assert cache_hit(0.0, 32 * MB) == 1.0
    assert cache_hit(10 * MB, 32 * MB, ways=4) == pytest.approx(_poisson_cdf(3, 4 * 10 / 32))


def test_memory_seconds_hit_the_cache_for_the_share_that_hits():
    assert PLAIN.memory_seconds(100 * MB) == pytest.approx(100 * MB / 10e9)
    assert HOST.memory_seconds(4 * MB) == pytest.approx(4 * MB / 100e9)  # fits: cache rate
    for moved in (16 * MB, 32 * MB, 48 * MB):
        hit = cache_hit(moved, 32 * MB)
        want = moved * (hit / 100e9 + (1 - hit) / 10e9)
        assert HOST.memory_seconds(moved) == pytest.approx(want, rel=1e-12)
    assert HOST.memory_seconds(128 * MB) == pytest.approx(128 * MB / 10e9)  # all from memory
    assert HOST.memory_seconds(0.0) == 0.0


def test_new_pages_cost_only_from_the_threshold_on():
    """glibc maps new pages for a request of its threshold or more (its chunk, header
    included, is then over it): a 32 MiB array is one; 31 MiB is reused memory."""
    assert HOST.fresh_seconds(31 * MB) == 0.0
    assert HOST.fresh_seconds(32 * MB) == pytest.approx(32 * MB * 5e-11)
    assert HOST.fresh_seconds(64 * MB) == pytest.approx(64 * MB * 5e-11)
    assert PLAIN.fresh_seconds(1e9) == 0.0


def _op(build):
    """(op, input shapes, output shapes) of the last op ``build`` makes."""
    with hb.Graph().as_default() as g:
        build()
        op = g.get_operations()[-1]
        ins = [tuple(t.shape.as_list()) for t in op.inputs]
        outs = [tuple(t.shape.as_list()) for t in op.outputs]
    return op, ins, outs


N = 25 * MB // 4 * 4  # 100 MiB of float32


def _mul(n=N):
    return _op(lambda: hb.placeholder(hb.float32, [n]) * hb.placeholder(hb.float32, [n]))


def test_roofline_prices_a_large_elementwise_op_from_memory_with_its_new_output():
    op, ins, outs = _mul()
    moved = 3 * 4 * N  # two inputs read, one output written
    want = HOST.memory_seconds(moved) + HOST.fresh_seconds(4 * N) + 1e-6
    assert Roofline().duration(op, ins, outs, HOST) == pytest.approx(want, rel=1e-9)
    small_op, small_ins, small_outs = _mul(1 << 16)
    want_small = 3 * 4 * (1 << 16) / 100e9 + 1e-6  # in the cache, no new pages
    assert Roofline().duration(small_op, small_ins, small_outs, HOST) == pytest.approx(want_small)
    # an update in place allocates nothing
    upd, uins, uouts = _op(
        lambda: hb.assign(hb.Variable(np.zeros(N, np.float32)), hb.placeholder(hb.float32, [N]))
    )
    assert Roofline().duration(upd, uins, uouts, HOST) < HOST.memory_seconds(3 * 4 * N) + 2e-6


def test_a_view_of_a_large_tensor_moves_no_bytes_and_allocates_no_pages():
    """A broadcast (the gradient of a sum: a read-only view, its kernel ``aliases_input``)
    and a reshape of 100 MiB cost their dispatch only: no bytes move, no new pages (the
    broadcast was priced as writing 100 MiB, 7.6 ms of a 100 MB model's simulated step
    against 0.06 ms traced)."""
    big = _op(lambda: broadcast_like(hb.placeholder(hb.float32, []),
                                        hb.placeholder(hb.float32, [N])))  # fmt: skip
    assert big[2] == [(N,)]
    assert Roofline().duration(*big, HOST) == pytest.approx(1e-6)
    assert fresh_output_seconds(big[0], big[2], HOST) == 0.0
    flat = _op(lambda: hb.reshape(hb.placeholder(hb.float32, [N]), [N // 4, 4]))
    assert fresh_output_seconds(flat[0], flat[2], HOST) == 0.0
    op, _ins, outs = _mul()  # a new array: its pages
    assert fresh_output_seconds(op, outs, HOST) == pytest.approx(4 * N * 5e-11)


def _profiled(points):
    """A Profiled whose Mul family was measured at ``points``: (elements, seconds)."""
    table, work = {}, {}
    for n, t in points:
        op, ins, _ = _mul(n)
        k = profile_key(op, ins)
        table[k] = t
        work[k] = [float(n), 12.0 * n]
    return Profiled(table, work=work)


def test_a_profiled_slope_does_not_carry_cache_speed_out_of_the_cache():
    """A Mul family measured in the cache at 4x the cache's rate (b = 0.25) prices a 100 MiB
    Mul at no less than the memory roofline; inside the cache it keeps its measured slope."""
    pts = [(n, 2e-6 + 0.25 * 12 * n / 100e9) for n in (1 << 12, 1 << 14, 1 << 16, 1 << 18)]
    prof = _profiled(pts)
    op, ins, outs = _mul()
    floor = HOST.memory_seconds(12.0 * N) + HOST.fresh_seconds(4 * N)
    assert prof.duration(op, ins, outs, HOST) == pytest.approx(2e-6 + floor, rel=1e-6)
    op2, ins2, outs2 = _mul(1 << 20)  # 12 MiB: mostly in the cache (0.9995), measured slope
    assert prof.duration(op2, ins2, outs2, HOST) == pytest.approx(
        2e-6 + 0.25 * HOST.memory_seconds(12 * (1 << 20)), rel=1e-6
    )


def test_a_slope_from_entries_that_are_all_fixed_cost_is_not_trusted():
    """Two tiny entries whose times differ by noise (a slope of 40 against the roofline) price
    a large op at the roofline plus the fixed cost, not at 40 times it."""
    pts = [(1, 4.0e-6), (1024, 4.0e-6 + 40 * 12 * 1024 / 100e9)]
    prof = _profiled(pts)
    op, ins, outs = _mul(1 << 20)
    fixed = prof._fit(next(iter(prof._families)), HOST, "float32", False)[0]
    assert prof.duration(op, ins, outs, HOST) == pytest.approx(
        fixed + HOST.memory_seconds(12.0 * (1 << 20)), rel=1e-6
    )


def _read_step(perf, nbytes):
    return read_step(perf, nbytes, (1e12, 0.0))[1]


@pytest.mark.parametrize("mb", [16, 64])
def test_a_received_tensor_lands_in_a_pooled_buffer_without_new_pages(mb):
    """The runtime receives a tensor of 1 MiB or more into a buffer of its pool that the last
    step's tensor left (wire.RECEIVED), so the receiving end faults in no new pages: a 64 MiB
    read costs the same with and without a price on new pages. (Charged before, at 5e-11 s a
    byte here: on this VM a 96 MiB read step costs 0.29-0.31 ns a byte over a 1 MiB one, as an
    8 MiB one does, 0.30.)"""
    nbytes = mb * MB
    base = _read_step(replace(HOST, fresh_s_per_byte=0.0), nbytes).step_time_s
    assert _read_step(HOST, nbytes).step_time_s == pytest.approx(base, rel=1e-12)
    pool = _RecvPool(512 * MB, MB)
    first = pool.take(nbytes)
    first_id = id(first)
    del first  # (the step's tensor is gone)
    assert id(pool.take(nbytes)) == first_id


def _write(dirpath, extra):
    (dirpath / "box.toml").write_text(
        'name = "box"\nkind = "cpu"\n'
        'memory_bandwidth_bytes_per_s = { value = 1e10, source = "test" }\n'
        'memory_bytes = { value = 1000000000, source = "test" }\n'
        'kernel_launch_overhead_s = { value = 1e-6, source = "test" }\n'
        + extra
        + '\n[peak_flops]\nfloat32 = { value = 1e11, source = "test" }\n'
    )


def test_catalog_fields_reach_the_cost_model_and_go_in_pairs(tmp_path, monkeypatch):
    monkeypatch.setenv("HETBED_CATALOG_PATH", str(tmp_path))
    _write(
        tmp_path,
        'cache_bytes = { value = 33554432, source = "test" }\n'
        'cache_bandwidth_bytes_per_s = { value = 1e11, source = "test" }\n'
        'fresh_memory_threshold_bytes = { value = 33554432, source = "test" }\n'
        'fresh_memory_s_per_byte = { value = 4e-11, source = "test" }\n',
    )
    perf = perf_from_spec(load_device("box"))
    assert (perf.cache_bytes, perf.cache_bandwidth) == (33554432, 1e11)
    assert (perf.fresh_threshold_bytes, perf.fresh_s_per_byte) == (33554432, 4e-11)
    _write(tmp_path, 'cache_bytes = { value = 33554432, source = "test" }\n')
    with pytest.raises(CatalogError, match="cache_bandwidth_bytes_per_s"):
        load_device("box")
    _write(tmp_path, 'fresh_memory_s_per_byte = { value = 4e-11, source = "test" }\n')
    with pytest.raises(CatalogError, match="fresh_memory_threshold_bytes"):
        load_device("box")


def test_calibrate_writes_the_memory_fields_that_load_back(tmp_path, monkeypatch):
    from hetbed.simulator.calibrate import write_machine_toml

    perf = replace(
        HOST,
        name="this_machine",
        peak_flops={"float32": 1e11, "float64": 5e10},
        clocked_launch_overhead_s=2e-6,
    )
    write_machine_toml(perf, str(tmp_path / "this_machine.toml"))
    monkeypatch.setenv("HETBED_CATALOG_PATH", str(tmp_path))
    back = perf_from_spec(load_device("this_machine"))
    assert back.cache_bytes == HOST.cache_bytes and back.cache_bandwidth == HOST.cache_bandwidth
    assert back.fresh_threshold_bytes == HOST.fresh_threshold_bytes
    assert back.fresh_s_per_byte == pytest.approx(HOST.fresh_s_per_byte)
    assert back.memory_seconds(128 * MB) == pytest.approx(HOST.memory_seconds(128 * MB))


def test_the_measured_rates_of_this_machine_are_ordered():
    """calibrate's measurements here: a cache (sysfs) whose rate is above memory's, and new
    pages that cost time (glibc) or are left out (another C library)."""
    from hetbed.simulator import machine as m

    cache = m.last_level_cache()
    if cache is None:
        pytest.skip("no CPU cache size readable here")
    assert cache >= 1 << 16
    fresh = m.fresh_memory_cost(64 * MB)
    if platform.libc_ver()[0] == "glibc":  # an add into new pages: twice the time into reused
        assert fresh > 0.0
    else:
        assert fresh is None


def _loopback(dirpath, aggregate):
    extra = (
        f'aggregate_bandwidth_bytes_per_s = {{ value = {aggregate}, source = "test" }}\n'
        if aggregate
        else ""
    )
    (dirpath / "lo_test.toml").write_text(
        'name = "lo"\nkind = "loopback"\n'
        'bandwidth_bytes_per_s = { value = 4e9, source = "test" }\n'
        'latency_s = { value = 1e-5, source = "test" }\n' + extra
    )


def _two_pulls(aggregate, tmp_path, monkeypatch, machine="m"):
    """Seconds each of two 40 MB flows takes, PS -> two workers at once on one machine."""
    (tmp_path / "links").mkdir(exist_ok=True)
    _loopback(tmp_path / "links", aggregate)
    monkeypatch.setenv("HETBED_CATALOG_PATH", str(tmp_path))
    c = Cluster()
    host = replace(PLAIN, cores=8)
    c.add_task("ps", 0, cpu=host, nic="lo_test", machine=machine)
    for i in range(2):
        c.add_task("worker", i, cpu=host, nic="lo_test", machine=machine)
    n = 10_000_000
    with hb.Graph().as_default():
        with hb.device("/job:ps/task:0/device:cpu:0"):
            x = hb.placeholder(hb.float32, [n])
            a = hb.identity(x)
        outs = []
        for i in range(2):
            with hb.device(f"/job:worker/task:{i}/device:cpu:0"):
                outs.append(hb.identity(a))
        s = SimSession(c)
        s.run(outs, {x: sim_value([n])})
    fl = s.last_record.flows
    big = fl[fl.bytes > 1e6]
    return sorted((big.end_s - big.start_s).tolist())


def test_loopback_streams_share_the_machine_aggregate_not_a_nic(tmp_path, monkeypatch):
    """Two concurrent 40 MB pulls between tasks of one machine: with an aggregate of 6 GB/s
    each runs at 3 GB/s (its single-stream rate is 4); with an aggregate of 10 GB/s each at
    its own 4 GB/s; without one they share the PS task's NIC at 4 GB/s (2 each), as before."""
    nbytes, lat = 40e6, 1e-5
    for agg, rate in ((6e9, 3e9), (10e9, 4e9), (None, 2e9)):
        got = _two_pulls(agg, tmp_path, monkeypatch)
        assert got == pytest.approx([lat + nbytes / rate] * 2, rel=1e-3), agg


def test_step_level_loopback_streams_use_the_aggregate(tmp_path):
    """SyncPS with every task on one machine: two workers' pulls of a 40 MB variable share the
    PS task's rate; with the loopback's aggregate (6 GB/s) they are faster than through a NIC
    of the single-stream rate (4 GB/s), and slower than with no limit but each stream's."""
    from hetbed.devices.catalog import LinkSpec

    prof = ReplicaProfile(1e-4, dense={"w": (40e6, 0)})

    def step(agg):
        link = LinkSpec("lo", "lo", "loopback", 4e9, 1e-5, aggregate_bandwidth_bytes_per_s=agg)
        return SyncPS(prof, 2, nic=link, machine_cores=8).run(6).step_time()

    assert step(None) > step(6e9) > step(1e12)


def test_calibrate_profiles_twice_and_keeps_each_ops_faster_pass(monkeypatch):
    """calibrate_models with passes=2: an entry slowed in one pass (a passing disturbance)
    keeps the other pass's time, and the ratio of the two is reported."""
    from hetbed.simulator import calibrate as cal

    passes = iter([{"a": 2.0e-3, "b": 1.0e-6}, {"a": 1.0e-3, "b": 1.1e-6}])
    monkeypatch.setattr(cal, "profile_ops", lambda *a, **k: (next(passes), None))
    apart: list = []
    table = cal.calibrate_models({"m": lambda: (hb.no_op(), {})}, repeats=1, passes=2, apart=apart)
    assert table == {"a": 1.0e-3, "b": 1.0e-6}
    assert apart == pytest.approx([2.0, 1.1])


def test_tasks_of_one_machine_share_its_cache():
    """DevicePerf.cache_share splits the cache among the tasks of a host; a Cluster gives each
    CPU task of a shared machine its share (tasks on machines of their own keep the whole);
    a Profiled family's fit is kept per cache size, not reused across shares."""
    assert HOST.cache_share(4).cache_bytes == 8 * MB
    assert HOST.cache_share(1) is HOST and PLAIN.cache_share(3) is PLAIN
    c = Cluster()
    for k, job in enumerate(("ps", "worker", "worker")):
        c.add_task(job, k if job == "worker" else 0, cpu=HOST, nic=(1e12, 0.0), machine="m")
    c.add_task("worker", 7, cpu=HOST, nic=(1e12, 0.0))
    shares = {t: c.task_cpu(t).perf_spec.cache_bytes for t in c.tasks}
    assert sorted(shares.values()) == [32 * MB / 3] * 3 + [32 * MB]
    pts = [(n, 2e-6 + 0.25 * 12 * n / 100e9) for n in (1 << 12, 1 << 14, 1 << 16, 1 << 18)]
    op, ins, outs = _mul(1 << 21)  # 24 MiB moved: in the whole cache, not in a third of it
    both = _profiled(pts)
    whole = both.duration(op, ins, outs, HOST)
    third = both.duration(op, ins, outs, HOST.cache_share(3))
    assert third == _profiled(pts).duration(op, ins, outs, HOST.cache_share(3))
    assert whole == _profiled(pts).duration(op, ins, outs, HOST)
    assert third > 2 * whole  # out of its share of the cache: from memory, slope at least 1


def test_an_accumulators_take_does_its_averaging_once_unblocked():
    """A simulated AccumulatorTakeGradient costs its bytes once the gradients it waits for are
    in (the cost model's price of the op), after the apply that completes it, in the step."""
    n = 4 * MB // 4
    perf = replace(HOST, cores=1)
    c = Cluster()
    c.add_task("ps", 0, cpu=perf, nic=(1e12, 0.0))
    with hb.Graph().as_default():
        with hb.device("/job:ps/task:0/device:cpu:0"):
            acc = hb.ConditionalAccumulator(hb.float32, [n], shared_name="acc")
            g = hb.placeholder(hb.float32, [n])
            apply = acc.apply_grad(g, local_step=0)
            with hb.control_dependencies([apply]):
                take = acc.take_grad(1)
        with SimSession(c) as s:
            s.run(take, {g: sim_value([n])})
            rec = s.last_record
            take_op = s.graph.get_operation_by_name(take.op.name)
    ops = rec.ops.set_index("type")
    t = ops.loc["AccumulatorTakeGradient"]
    a = ops.loc["AccumulatorApplyGradient"]
    want = Roofline().duration(take_op, [(n,), ()], [(n,)], perf.clocked())
    assert t.duration_s == pytest.approx(want, rel=1e-9) and want > 4 * MB * 2 / 100e9
    assert t.start_s >= a.end_s - 1e-12
    assert rec.step_time_s >= t.end_s - 1e-12


def test_a_sparse_take_is_priced_by_the_rows_it_hands_out():
    """A simulated SparseAccumulatorTakeGradient costs the rows it averaged (the shapes of what
    it hands out, known only once it runs), as the cost model prices them."""
    perf = replace(HOST, cores=1)
    rows, dim = 5000, 64
    c = Cluster()
    c.add_task("ps", 0, cpu=perf, nic=(1e12, 0.0))
    with hb.Graph().as_default():
        with hb.device("/job:ps/task:0/device:cpu:0"):
            acc = hb.SparseConditionalAccumulator(hb.float32, [100_000, dim], shared_name="e")
            idx = hb.placeholder(hb.int64, [None])
            vals = hb.placeholder(hb.float32, [None, dim])
            apply = acc.apply_grad(idx, vals, local_step=0)
            with hb.control_dependencies([apply]):
                take = acc.take_grad(1)
        with SimSession(c) as s:
            s.run(take, {idx: sim_value([rows], np.int64), vals: sim_value([rows, dim])})
            rec = s.last_record
            op = s.graph.get_operation_by_name(take[0].op.name)
    t = rec.ops.set_index("type").loc["SparseAccumulatorTakeGradient"]
    want = Roofline().duration(op, [(), ()], [(rows,), (rows, dim), (2,)], perf)
    assert t.duration_s == pytest.approx(want, rel=1e-9)
    assert want > (rows * dim * 4 * 2) / 100e9  # the rows' bytes, not a 1-row guess


def test_a_loopback_stream_books_each_ends_cpu_share(tmp_path, monkeypatch):
    """A stream between two tasks of one machine books the sender's and the receiver's CPU
    shares of a core for the stream's time (the link's ``sender_cpu_share`` and
    ``receiver_cpu_share``; one core for the sender without them), in the op-level rendezvous
    and the step-level driver alike; calibrate writes the two fields, the catalog reads them
    and refuses more than one CPU second per second."""
    from hetbed.devices.catalog import CatalogError, LinkSpec, load_link
    from hetbed.devices.simulated import HostCores, book_copy
    from hetbed.simulator.calibrate import write_link_toml
    from hetbed.simulator.cluster import loop_copy_shares

    cores = HostCores(2)
    assert book_copy(cores, 0.0, 1.0, (0.8, 0.5)) == pytest.approx(0.8)
    assert sorted(e for _, e, _ in cores.busy) == pytest.approx([0.5, 0.8])
    assert book_copy(HostCores(1), 0.0, 1.0, (0.8, 0.5)) == pytest.approx(1.3)  # one core
    (tmp_path / "links").mkdir()
    write_link_toml(4e9, 1e-5, str(tmp_path / "links" / "lo_cal.toml"), 6e9, (0.8, 0.5))
    monkeypatch.setenv("HETBED_CATALOG_PATH", str(tmp_path))
    spec = load_link("lo_cal")
    assert (spec.sender_cpu_share, spec.receiver_cpu_share) == (0.8, 0.5)
    assert loop_copy_shares("lo_cal") == (0.8, 0.5)
    assert loop_copy_shares((4e9, 1e-5)) == (1.0, 0.0)
    text = (tmp_path / "links" / "lo_cal.toml").read_text()
    (tmp_path / "links" / "lo_bad.toml").write_text(text.replace("value = 0.8", "value = 1.5"))
    with pytest.raises(CatalogError, match="sender_cpu_share"):
        load_link("lo_bad")

    def busy_core_seconds(cluster):
        hc = cluster.task_cpu(cluster.tasks[0]).host_cores
        return sum((e - b) * w for b, e, w in hc.busy)

    n = 10_000_000  # 40 MB: 10 ms on the 4 GB/s link
    for shares, want in (("lo_cal", 1.3), ("lo_test", 1.0)):
        if shares == "lo_test":
            _loopback(tmp_path / "links", 6e9)
        c, _rec = read_step(replace(PLAIN, cores=2), 4 * n, shares, machine="m")
        copy = 4 * n / 4e9
        assert busy_core_seconds(c) == pytest.approx(want * copy, rel=0.05), shares
    prof = ReplicaProfile(1e-4, dense={"w": (40e6, 0)})
    link = LinkSpec(
        "lo",
        "lo",
        "loopback",
        4e9,
        1e-5,
        aggregate_bandwidth_bytes_per_s=6e9,
        sender_cpu_share=0.8,
        receiver_cpu_share=0.5,
    )
    drv = SyncPS(prof, 1, nic=link, machine_cores=2)
    assert drv.copy_shares == (0.8, 0.5)
    with_shares = drv.run(4).step_time()
    one_core = SyncPS(prof, 1, nic=replace(link, receiver_cpu_share=None), machine_cores=2)
    assert one_core.copy_shares == (1.0, 0.0)
    assert with_shares >= one_core.run(4).step_time() - 1e-12
