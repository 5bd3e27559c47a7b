"""The profiled cost model: measured entries, and shapes it never measured priced from their
family's entries by an affine fit in roofline time (closed forms)."""

import json

import numpy as np
import pytest

import hetbed as hb
from hetbed.devices.costmodel import MIN_THREADS_WALL_S, DevicePerf, Roofline, cache_hit
from hetbed.devices.profiled import (
    Profiled,
    affine_fit,
    profile_key,
)
from hetbed.runtime.ops.math import broadcast_like
from hetbed.simulator.calibrate import profile_ops

PERF = DevicePerf("box", {"float32": 1e11}, memory_bandwidth=1e10, launch_overhead_s=0.0)


def _roof(op, ins, outs):
    c = op.op_def.cost_fn(op, list(ins), list(outs))
    return max(c.flops / 1e11, (c.bytes_read + c.bytes_written) / 1e10)


@pytest.fixture(scope="module")
def profiled():
    """A MatMul profiled at batch 4 and 64 (work recorded by profile_ops), and the op."""
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, [None, 256])
        w = hb.Variable(np.ones((256, 128), np.float32))
        y = hb.matmul(x, w)
        sess = hb.Session(graph=g)
        sess.run(hb.global_variables_initializer())
        work: dict = {}
        table: dict = {}
        for batch in (4, 64):
            t, _ = profile_ops(sess, y, {x: np.ones((batch, 256), np.float32)}, 2, work=work)
            table.update(t)
        sess.close()
    return table, work, y.op


def test_affine_fit_recovers_a_line_and_clamps_to_nonnegative():
    assert affine_fit([(1.0, 3.0), (2.0, 5.0), (4.0, 9.0)]) == pytest.approx((1.0, 2.0))
    a, b = affine_fit([(1.0, 0.5), (2.0, 2.5)])  # a line through a negative intercept
    assert a == 0.0 and b == pytest.approx((1 * 0.5 + 2 * 2.5) / 5)
    assert affine_fit([(1.0, 3.0), (2.0, 1.0)]) == (3.0, 0.0)  # falling: the median, flat
    assert affine_fit([(2.0, 5.0)], call_s=1.0) == (1.0, 2.0)  # one point: a call's fixed cost
    assert affine_fit([(2.0, 0.5)], call_s=1.0) == (0.5, 0.0)  # (at most what it took)
    # one point whose work is below a call's fixed cost: what it took is the op's own fixed cost
    assert affine_fit([(0.5, 68.0)], call_s=4.0) == (67.5, 1.0)
    # no point of positive work (a view): the median time is the fixed cost
    assert affine_fit([(0.0, 1.0), (0.0, 3.0), (0.0, 2.0)]) == (2.0, 1.0)
    assert affine_fit([]) is None


def test_a_family_measured_with_no_work_is_priced_at_its_measured_calls():
    """A broadcast is a view (its cost moves nothing) yet its call was measured: a shape it
    never measured takes the family's median call, not the roofline's nothing."""
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, [1])
        outs = {n: broadcast_like(x, hb.zeros([n])) for n in (32, 1024, 4096, 1 << 18)}
    op = outs[32].op
    work, table = {}, {}
    for n, t in ((32, 25e-6), (1024, 11e-6), (4096, 16e-6)):
        key = profile_key(outs[n].op, [(1,), (n,)])
        table[key], work[key] = t, (0.0, 0.0)
    prof = Profiled(table, Roofline(), overhead_s=1e-6, work=work)
    big = outs[1 << 18].op
    assert big.type == op.type == "BroadcastLike"
    got = prof.duration(big, [(1,), (1 << 18,)], [(1 << 18,)], PERF)
    assert got == pytest.approx(16e-6 + 1e-6)
    assert (prof.misses, prof.scaled) == (1, 1)


def test_unmeasured_shapes_take_the_affine_fit_of_their_family(profiled):
    """Entries timed as t = 2 us + 3 w: batch 1,024 (never measured) is priced 2 us + 3 w(1024);
    measured shapes keep their own times; a family without entries takes the fallback."""
    table, work, op = profiled
    keys = [k for k in table if json.loads(k)[0] == "MatMul"]
    keys.sort(key=lambda k: json.loads(k)[2][0][0])
    assert [json.loads(k)[2] for k in keys] == [[[4, 256], [256, 128]], [[64, 256], [256, 128]]]
    assert all(k in work and work[k][0] > 0 for k in keys)
    ins = {b: [(b, 256), (256, 128)] for b in (4, 64, 1024)}
    outs = {b: [(b, 128)] for b in (4, 64, 1024)}
    synthetic = {profile_key(op, ins[b]): 2e-6 + 3 * _roof(op, ins[b], outs[b]) for b in (4, 64)}
    prof = Profiled(synthetic, Roofline(), overhead_s=1e-6, work=work)
    got = prof.duration(op, ins[1024], outs[1024], PERF)
    assert got == pytest.approx(2e-6 + 3 * _roof(op, ins[1024], outs[1024]) + 1e-6)
    assert prof.duration(op, ins[64], outs[64], PERF) == pytest.approx(synthetic[keys[1]] + 1e-6)
    assert (prof.hits, prof.misses, prof.scaled) == (1, 1, 1)
    bare = Profiled(synthetic, Roofline(), overhead_s=1e-6)  # no work: the roofline
    want = Roofline().duration(op, ins[1024], outs[1024], PERF) + 1e-6
    assert bare.duration(op, ins[1024], outs[1024], PERF) == pytest.approx(want)


def test_the_work_survives_save_and_load(profiled, tmp_path):
    table, work, op = profiled
    prof = Profiled(table, overhead_s=1e-6, device="box", work=work)
    prof.save(tmp_path / "p.json")
    back = Profiled.load(tmp_path / "p.json")
    ins, outs = [(512, 256), (256, 128)], [(512, 128)]
    assert back.duration(op, ins, outs, PERF) == pytest.approx(prof.duration(op, ins, outs, PERF))
    assert back.scaled == 1
    doc = json.loads((tmp_path / "p.json").read_text())
    doc["version"], doc["work"] = 1, None  # an older file: still read, measured entries only
    (tmp_path / "v1.json").write_text(json.dumps(doc))
    assert Profiled.load(tmp_path / "v1.json").work == {}
    doc["version"] = 4
    (tmp_path / "v4.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="v4.json: not a hetbed-profile version 1, 2 or 3 file"):
        Profiled.load(tmp_path / "v4.json")


def test_profile_ops_measures_the_cores_a_kernel_keeps_busy():
    """``threads`` per key: the process's CPU seconds per wall second while the op ran, at least
    1 and at most the usable CPUs; a kernel that waits (a py_func sleeping 5 ms) gets 1, a
    numpy elementwise kernel of 4M floats (one thread) stays below 1.5; ops too short to tell
    are left out."""
    import time

    from hetbed.simulator.machine import host_cores

    def nap(v):
        time.sleep(0.005)
        return v

    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, [4 << 20])
        big = hb.multiply(x, 3.0)  # numpy, one thread
        slept = hb.py_func(nap, [hb.constant(1.0)], hb.float32)
        tiny = hb.add(hb.constant(1.0), 2.0)
        sess = hb.Session(graph=g)
        threads: dict = {}
        table, _ = profile_ops(
            sess, [big, slept, tiny], {x: np.ones(4 << 20, np.float32)}, 3, threads=threads
        )
        sess.close()
    keys = {k.split('"')[1]: k for k in threads}
    assert set(keys) >= {"Mul", "PyFunc"} and "AddV2" not in keys and "Add" not in keys
    assert all(1.0 <= v <= host_cores() for v in threads.values())
    assert threads[keys["PyFunc"]] == pytest.approx(1.0, abs=0.05)
    assert threads[keys["Mul"]] < 1.5
    assert table[keys["Mul"]] >= MIN_THREADS_WALL_S


def test_an_unmeasured_short_kernel_of_a_measured_profile_takes_one_core(profiled):
    """``measured_cores``: where a profile with threads measured says nothing of a kernel's
    shape or family, a kernel predicted shorter than ``MIN_THREADS_WALL_S`` takes one core (as
    the measured ones that short did: numpy runs it on the calling thread), a longer one the
    device's rule (None); a profile without threads, or a model without the notion, keeps the
    device's rule for both. (A PS's 23 us gather of an embedding's rows had taken both cores of
    a shared machine and waited for the worker's message on the other one: 158 us a step.)"""
    from hetbed.devices.simulated import measured_cores

    table, work, op = profiled
    other = {k: 2.0 for k in table if json.loads(k)[0] != "MatMul"} or {"x": 2.0}
    prof = Profiled({}, work={}, threads=other)  # (nothing of MatMul's family measured)
    shapes = [(7, 256), (256, 128)]
    assert prof.cores_used(op, shapes) is None
    assert measured_cores(prof, op, shapes, 2, MIN_THREADS_WALL_S / 8) == 1
    assert measured_cores(prof, op, shapes, 2, 2 * MIN_THREADS_WALL_S) is None
    assert measured_cores(prof, op, shapes, 2) is None  # (no duration given)
    bare = Profiled(table, work=work)  # (an older profile: no threads)
    assert measured_cores(bare, op, shapes, 2, MIN_THREADS_WALL_S / 8) is None
    assert measured_cores(Roofline(), op, shapes, 2, MIN_THREADS_WALL_S / 8) is None


def test_profiled_cores_used_by_key_then_family_and_saved(tmp_path, profiled):
    """``cores_used``: the measured entry, else its family's median, else one core for an entry
    measured shorter than ``MIN_THREADS_WALL_S``, else None (the device's rule); the threads
    survive save and load; a value below 1 is refused naming the file."""
    table, work, op = profiled
    keys = sorted(table)
    threads = {keys[0]: 2.0}
    prof = Profiled(table, work=work, threads=threads)
    measured = json.loads(keys[0])[2]
    assert prof.cores_used(op, [tuple(s) for s in measured]) == 2.0
    assert prof.cores_used(op, [(7, 256), (256, 128)]) == 2.0  # same family, unmeasured
    assert Profiled(table, work=work).cores_used(op, [(7, 256), (256, 128)]) is None
    # an entry measured shorter than a thread pool splits, in a family whose threads nobody
    # measured: one core (longer: the device's rule)
    entry = next(k for k in keys[1:] if json.loads(k)[0] == "MatMul")  # (the other batch)
    other = [tuple(s) for s in json.loads(entry)[2]]
    elsewhere = {next(k for k in keys if json.loads(k)[0] != "MatMul"): 2.0}
    for took, cores in ((MIN_THREADS_WALL_S / 2, 1.0), (2 * MIN_THREADS_WALL_S, None)):
        timed = Profiled(dict(table, **{entry: took}), work=work, threads=elsewhere)
        assert timed.cores_used(op, other) == cores
        timed = Profiled(dict(table, **{entry: took}), work=work, threads=threads)
        assert timed.cores_used(op, other) == 2.0  # (its family's measured threads)
    prof.save(tmp_path / "p.json")
    assert Profiled.load(tmp_path / "p.json").threads == threads
    doc = json.loads((tmp_path / "p.json").read_text())
    doc["threads"] = {keys[0]: 0.5}
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="bad.json: threads.* must be a number >= 1"):
        Profiled.load(tmp_path / "bad.json")


def test_a_measured_entry_slows_down_with_a_smaller_share_of_the_cache(tmp_path, profiled):
    """A table measured with a 32 MB cache (one process): with the whole cache an entry takes
    its measured time; as one of two tasks of the host (half the cache) an entry of 30 MB
    takes at least the roofline's time with the half (14 of its 30 MB from memory): a kernel
    that ran at the cache's rate slows to it, one slower than that keeps its own time; an entry
    that fits the half does not change; ``cache_bytes`` survives save/load."""
    _, _, op = profiled
    ins, outs = [(512, 256), (256, 128)], [(512, 128)]
    key = profile_key(op, ins)
    cache = DevicePerf("box", {"float32": 1e15}, memory_bandwidth=1e10, launch_overhead_s=0.0,
                       cache_bytes=32e6, cache_bandwidth=4e10)  # fmt: skip
    prof = Profiled({key: 1e-3}, work={key: (1.0, 30e6)}, cache_bytes=32e6)
    assert prof.duration(op, ins, outs, cache) == pytest.approx(1e-3)
    half = cache.cache_share(2)  # 16 MB: a 30 MB sweep overflows nearly all its sets
    hit = cache_hit(30e6, 16e6)
    assert hit < 0.01
    shared_s = 30e6 * (hit / 4e10 + (1 - hit) / 1e10)  # 3.0 ms
    assert prof.duration(op, ins, outs, half) == pytest.approx(shared_s)
    slow = Profiled({key: 5e-3}, work={key: (1.0, 30e6)}, cache_bytes=32e6)
    assert slow.duration(op, ins, outs, half) == pytest.approx(5e-3)
    small = Profiled({key: 1e-3}, work={key: (1.0, 10e6)}, cache_bytes=32e6)
    assert small.duration(op, ins, outs, half) == pytest.approx(1e-3)
    older = Profiled({key: 1e-3}, work={key: (1.0, 30e6)})  # no cache recorded: as measured
    assert older.duration(op, ins, outs, half) == pytest.approx(1e-3)
    prof.save(tmp_path / "p.json")
    assert Profiled.load(tmp_path / "p.json").cache_bytes == 32e6


def test_a_family_fit_relates_its_entries_to_the_cache_they_ran_with(profiled):
    """An unmeasured shape of a measured family: the entries' roofline times are taken with the
    cache they were measured with, the new shape's with the task's share, so a smaller share
    makes it slower (fitting the entries to the share instead cancelled it out)."""
    _, _, op = profiled
    cache = DevicePerf("box", {"float32": 1e15}, memory_bandwidth=1e10, launch_overhead_s=0.0,
                       cache_bytes=32e6, cache_bandwidth=4e10)  # fmt: skip
    k1 = profile_key(op, [(512, 256), (256, 128)])
    k2 = profile_key(op, [(1024, 256), (256, 128)])
    table, work = {k1: 0.25e-3, k2: 0.75e-3}, {k1: (1.0, 10e6), k2: (1.0, 30e6)}
    prof = Profiled(table, work=work, cache_bytes=32e6)
    ins, outs = [(20000, 256), (256, 128)], [(20000, 128)]  # 30.8 MB: over half the cache
    c = op.op_def.cost_fn(op, ins, outs)
    moved = c.bytes_read + c.bytes_written
    whole, half = cache, cache.cache_share(2)
    a, b = affine_fit(
        [(whole.memory_seconds(10e6), 0.25e-3), (whole.memory_seconds(30e6), 0.75e-3)]
    )
    # every entry within the whole cache, the op over its share: the slope's own speed (its
    # bytes hitting as the largest entry's did) or the memory's, whichever is slower
    largest = cache_hit(30e6, 32e6)
    own = b * half.sweep_seconds(moved, largest)
    want = a + max(own, half.memory_seconds(moved))
    assert prof.duration(op, ins, outs, half) == pytest.approx(want, rel=1e-9)
    assert prof.duration(op, ins, outs, half) > prof.duration(op, ins, outs, whole)
    # a kernel four times slower than those entries' rooflines: out of the cache it keeps its
    # own speed, slower than the memory's 3.1 ms for the bytes
    slow = Profiled({k1: 4 * whole.memory_seconds(10e6), k2: 4 * whole.memory_seconds(30e6)},
                    work=work, cache_bytes=32e6)  # fmt: skip
    own = 4 * half.sweep_seconds(moved, largest)
    assert own > half.memory_seconds(moved)
    assert slow.duration(op, ins, outs, half) == pytest.approx(own, rel=1e-6)
