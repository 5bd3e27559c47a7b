"""The strict cupy stand-in (tests/fakecupy) and the GPU failures it was built to catch.

The strictness tests run on the stand-in and, where a CUDA device is present, on real cupy too,
so a stand-in laxer than cupy is caught. The other tests pin the GPU path's fixes: per-device
NCCL means, serialised NCCL groups, per-device memory accounting, copies ordered on the
consumer's stream, and perf()/link() read from the catalog entry of the detected GPU.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from gpu_fixtures import install_fake

import hetbed as hb
from hetbed.devices import catalog, local_devices
from hetbed.devices.gpu import GPUDevice, catalog_spec, cupy_or_none
from hetbed.runtime.registry import get_op_def

REAL = cupy_or_none()


@pytest.fixture(
    params=[
        "fake",
        pytest.param(
            "real",
            marks=[
                pytest.mark.gpu,
                pytest.mark.skipif(REAL is None, reason="needs cupy and a CUDA device (none here)"),
            ],
        ),
    ]
)
def xp(request):
    if request.param == "real":
        yield REAL
        return
    mod, undo = install_fake(2)
    yield mod
    undo()


@pytest.fixture
def fake():
    mod, undo = install_fake(2)
    yield mod
    undo()


# ---- strictness shared with cupy ---------------------------------------------------------------


def test_no_implicit_conversion_to_numpy(xp):
    a = xp.arange(6, dtype=np.float32).reshape(2, 3)
    with pytest.raises(TypeError, match="Implicit conversion"):
        np.asarray(a)
    with pytest.raises(TypeError):
        float(a)
    with pytest.raises(TypeError):
        int(a)
    with pytest.raises(ValueError, match="ambiguous"):
        bool(a)
    np.testing.assert_array_equal(a.get(), np.arange(6).reshape(2, 3))
    assert float(a.sum()) == 15.0 and xp.asnumpy(a * 2)[1, 2] == 10


def test_numpy_array_operands_are_refused(xp):
    a = xp.ones(3, dtype=np.float32)
    with pytest.raises(TypeError):
        a + np.ones(3, np.float32)
    with pytest.raises(TypeError):
        xp.add(a, np.ones(3, np.float32))
    assert (a + np.float32(2)).get().tolist() == [3.0, 3.0, 3.0]  # numpy scalars are fine


def test_arrays_remember_their_device_and_copy_moves_them(xp):
    if xp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs")
    with xp.cuda.Device(1):
        b = xp.arange(4, dtype=np.float32)
    assert b.device.id == 1
    xp.cuda.Device(1).synchronize()
    with xp.cuda.Device(0):
        c = b.copy()  # cupy copies to the current device
        assert c.device.id == 0
        assert (c + 1).get().tolist() == [1, 2, 3, 4]
        if xp is REAL and xp.cuda.runtime.deviceCanAccessPeer(0, 1):
            return  # with peer access cupy may mix devices; the stand-in models no-P2P
        with pytest.raises(ValueError, match="device"):
            b + 1


def test_pool_counts_bytes_per_device(xp):
    pool = xp.get_default_memory_pool()
    with xp.cuda.Device(0):
        before0 = pool.used_bytes()
    x = None
    with xp.cuda.Device(0):
        x = xp.zeros((1024, 256), dtype=np.float32)
        assert pool.used_bytes() >= before0 + x.nbytes
        free, total = xp.cuda.runtime.memGetInfo()
        assert 0 < free <= total
    del x
    with xp.cuda.Device(0):
        assert pool.used_bytes() == before0


# ---- strictness beyond cupy (stand-in only) ----------------------------------------------------


def test_numpy_functions_on_device_arrays_are_refused(fake):
    a = fake.ones(3, dtype=np.float32)
    with pytest.raises(TypeError, match="ctx.xp"):
        np.where(a > 0, a, 0)
    with pytest.raises(TypeError, match="ctx.xp"):
        np.sum(a)
    with pytest.raises(TypeError):
        np.exp(a, out=np.empty(3, np.float32))
    assert (np.float32(1) - np.exp(a)).get().tolist() == pytest.approx([1 - np.e] * 3)
    assert np.shape(a) == (3,)  # metadata only


def test_stream_race_is_caught(fake):
    s1 = fake.cuda.Stream(non_blocking=True)
    s2 = fake.cuda.Stream(non_blocking=True)
    with s1:
        a = fake.ones(3, dtype=np.float32) * 2
    with s2, pytest.raises(RuntimeError, match="stream race"):
        a + 1
    ev = fake.cuda.Event()
    ev.record(s1)
    s2.wait_event(ev)
    with s2:
        assert (a + 1).get(stream=s2).tolist() == [3, 3, 3]


def test_standin_catches_a_kernel_calling_numpy(fake, monkeypatch):
    """A GPU kernel that calls numpy on its device input fails on the stand-in, naming the op."""
    kernel = get_op_def("Exp").find_kernel("gpu", hb.float32)

    def bad(ctx, x):
        return np.exp(np.where(x > 0, x, 0))  # a stray `np.` in a kernel

    monkeypatch.setattr(kernel, "fn", bad)
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [3])
        with hb.device("/gpu:0"):
            y = hb.exp(x)
        with hb.Session() as s, pytest.raises(hb.errors.OpError, match="Exp.*where.*ctx.xp"):
            s.run(y, {x: np.zeros(3, np.float32)})
    monkeypatch.undo()
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [3])
        with hb.device("/gpu:0"):
            y = hb.exp(x)
        with hb.Session() as s:
            np.testing.assert_allclose(s.run(y, {x: np.zeros(3, np.float32)}), 1.0)


def test_local_devices_find_the_standin_gpus(fake):
    devs = [d for d in local_devices() if d.device_type == "gpu"]
    assert [d.name.rsplit(":", 1)[-1] for d in devs] == ["0", "1"]
    assert all(d.memory_limit_bytes == 16 << 30 for d in devs)


# ---- the failures the issue names ------------------------------------------------------------


def _gpus():
    return [d for d in local_devices() if d.device_type == "gpu"]


def test_nccl_mean_lands_on_each_gpu(fake):
    """The mean is divided on each member's own GPU (outside it cupy raises or mixes devices)."""
    from hetbed.runtime.ops.collective import all_reduce

    vals = [np.arange(4, dtype=np.float32) * (i + 1) for i in range(2)]
    with hb.Graph().as_default():
        outs = []
        ins = []
        for i in range(2):
            with hb.device(f"/gpu:{i}"):
                ins.append(hb.constant(vals[i]) * 1.0)
        outs = all_reduce(ins, reduction="mean")
        with hb.Session() as s:
            got = s.run(outs)
    for g in got:
        np.testing.assert_allclose(g, (vals[0] + vals[1]) / 2)


def test_nccl_groups_do_not_interleave_across_threads(fake):
    """Concurrent all-reduces over the same GPUs take turns (the stand-in raises on overlap)."""
    from hetbed.runtime.ops.collective import _nccl_all_reduce

    gpus = _gpus()
    errors = []

    def worker(k):
        try:
            for _ in range(6):
                members = []
                for d in gpus:
                    with fake.cuda.Device(d.index), d.stream:
                        members.append((fake.full(5, float(k), dtype=np.float32), d, None))
                outs = _nccl_all_reduce(members, "sum")
                for o, d in zip(outs, gpus):
                    assert o.device.id == d.index
                    assert o.get().tolist() == [2.0 * k] * 5
        except Exception as e:  # noqa: BLE001 - collected for the assertion below
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(k,)) for k in (1, 2, 3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    assert not errors, errors


def test_memory_in_use_is_each_gpus_own(fake):
    g0, g1 = _gpus()
    before0, before1 = g0.memory_in_use_bytes, g1.memory_in_use_bytes
    with hb.Graph().as_default():
        with hb.device("/gpu:1"):
            v = hb.Variable(hb.zeros([512, 512]))
        with hb.Session() as s:
            s.run(v.initializer)
            gpu1 = next(d for d in s.list_devices() if d.name.endswith("gpu:1"))
            assert gpu1.memory_in_use_bytes >= before1 + 512 * 512 * 4
            gpu0 = next(d for d in s.list_devices() if d.name.endswith("gpu:0"))
            assert gpu0.memory_in_use_bytes == before0
    with pytest.raises(AttributeError, match="memory pool"):
        g0.memory_in_use_bytes = 123


def test_copies_are_ordered_on_the_consumers_stream(fake, monkeypatch):
    """With non-blocking device streams, host->GPU, GPU->GPU and GPU->host copies through
    Send/Recv and fetches are still ordered (the stand-in raises on any unsynchronised read)."""
    monkeypatch.setattr(GPUDevice, "non_blocking", True)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [2, 3])
        with hb.device("/cpu:0"):
            x1 = x * 1.0
        with hb.device("/gpu:0"):
            y = hb.exp(x1) * 2.0
        with hb.device("/gpu:1"):
            z = y + 1.0
        with hb.device("/cpu:0"):
            w = z * 3.0
        with hb.Session() as s:
            for _ in range(2):
                gy, gw = s.run([y, w], {x: a})
    np.testing.assert_allclose(gy, np.exp(a) * 2, rtol=1e-6)
    np.testing.assert_allclose(gw, (np.exp(a) * 2 + 1) * 3, rtol=1e-6)


def test_recv_copy_off_the_device_stream_is_a_race(fake, monkeypatch):
    """What Recv used to do (copy on the rendezvous thread's default stream) races a consumer on a
    non-blocking device stream; the device's own to_device does not."""
    monkeypatch.setattr(GPUDevice, "non_blocking", True)
    (g0, _) = _gpus()
    host = np.ones(4, np.float32)
    with fake.cuda.Device(0):
        racy = fake.asarray(host)  # the default stream of the calling thread
    with fake.cuda.Device(0), g0.stream, pytest.raises(RuntimeError, match="stream race"):
        racy * 2
    good = g0.to_device(host)
    with fake.cuda.Device(0), g0.stream:
        assert (good * 2).get(stream=g0.stream).tolist() == [2.0] * 4


@pytest.mark.parametrize(
    "model, key",
    [("Tesla V100-SXM2-16GB", "v100_sxm2"), ("NVIDIA A100-SXM4-40GB", "a100_sxm4_40gb")],
)
def test_perf_and_link_come_from_the_detected_gpus_catalog_entry(model, key):
    cp, undo = install_fake(2, name=model)
    try:
        g0, g1 = _gpus()
        cpu = local_devices()[0]
        spec = catalog.load_device(key)
        assert g0.perf() == (
            spec.peak("float32"),
            spec.memory_rate,
            spec.kernel_launch_overhead_s,
        )
        peer, host = catalog.load_link(spec.peer_link), catalog.load_link(spec.host_link)
        assert g1.link(g0) == (peer.bandwidth_bytes_per_s, peer.latency_s)
        assert g0.link(cpu) == (host.bandwidth_bytes_per_s, host.latency_s)
        assert g0.describe()["catalog"] == key
    finally:
        undo()


def test_unknown_gpu_model_says_it_has_no_catalog_entry():
    assert catalog_spec("Some Future GPU 9000") is None
    cp, undo = install_fake(1, name="Some Future GPU 9000")
    try:
        (g,) = _gpus()
        assert g.describe()["catalog"] is None and g.perf()[0] > 0
    finally:
        undo()


def test_done_fires_when_the_kernels_have_finished(fake):
    """GPUDevice.run calls ``done`` only after an event recorded behind the node's kernels has
    completed (on the stand-in: the stream is synchronised up to them), not when they are queued;
    a failing kernel reports its error through ``done``."""
    import types

    (g0, _) = _gpus()
    seen = []
    finished = threading.Event()

    def done(r=None, e=None):
        seen.append((r, e, g0.stream.synced >= r._seq if r is not None else None))
        finished.set()

    node = types.SimpleNamespace(fn=lambda ctx, x: fake.exp(x) * 2, ctx=None)
    g0.run(node, [np.zeros(3, np.float32)], done)
    assert finished.wait(10)
    (r, e, complete) = seen[0]
    assert e is None and complete, "done fired before the node's kernels finished"
    assert r.get().tolist() == [2.0, 2.0, 2.0]

    finished.clear()
    bad = types.SimpleNamespace(fn=lambda ctx, x: x + np.ones(3), ctx=None)  # a numpy operand
    g0.run(bad, [np.zeros(3, np.float32)], done)
    assert finished.wait(10)
    assert isinstance(seen[1][1], TypeError)
    g0.close()
