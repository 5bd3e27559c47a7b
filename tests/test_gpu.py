"""GPU device on cupy: kernels shared with the CPU through the array module, copies, memory
accounting, NCCL all-reduce. Every test runs on 4 stand-in GPUs (tests/fakecupy, a strict cupy
stand-in) and, where cupy sees a CUDA device, on the real GPUs too (skipped cleanly elsewhere)."""

import numpy as np
import pytest
from gpu_fixtures import install_fake

import hetbed as hb
from hetbed.devices.gpu import cupy_or_none

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
    ],
    autouse=True,
)
def cp(request):
    """The cupy in use: the stand-in with 4 GPUs, or the real one."""
    if request.param == "real":
        yield REAL
        return
    mod, undo = install_fake(4)
    yield mod
    undo()


def n_gpus():
    import cupy

    return cupy.cuda.runtime.getDeviceCount()


def test_gpus_are_listed():
    """Every visible CUDA device appears as /device:gpu:i with its memory."""
    gpus = [d for d in hb.list_devices() if d.device_type == "gpu"]
    assert len(gpus) == n_gpus()
    assert gpus[0].name.endswith("device:gpu:0") and gpus[0].memory_limit_bytes > 0


def test_matmul_and_elementwise_on_gpu_match_numpy():
    """A graph placed on gpu:0 computes what numpy computes; the fetched value is numpy."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 32)).astype(np.float32)
    b = rng.standard_normal((32, 16)).astype(np.float32)
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [64, 32])
        with hb.device("/gpu:0"):
            y = hb.nn.relu(hb.matmul(x, hb.constant(b)) * 2.0 + 1.0)
            s = hb.reduce_sum(y, axis=1)
        with hb.Session() as sess:
            got = sess.run(s, {x: a})
            assert sess.placement().set_index("op").device[y.op.name].endswith("gpu:0")
    assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, np.maximum((a @ b) * 2 + 1, 0).sum(1), rtol=1e-4)


def test_training_on_gpu_matches_cpu():
    """Three SGD steps of an MLP on gpu:0 give the CPU's loss (float32 tolerance)."""
    rng = np.random.default_rng(1)
    xb = rng.standard_normal((32, 20)).astype(np.float32)
    yb = rng.integers(0, 5, 32).astype(np.int32)
    losses = []
    for dev in ("/cpu:0", "/gpu:0"):
        with hb.Graph().as_default():
            with hb.device(dev):
                x = hb.placeholder(hb.float32, [None, 20])
                y = hb.placeholder(hb.int32, [None])
                w = hb.Variable(np.full((20, 5), 0.01, np.float32))
                logits = hb.matmul(x, w)
                loss = hb.reduce_mean(
                    hb.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
                )
                train = hb.train.GradientDescentOptimizer(0.5).minimize(loss)
            with hb.Session() as s:
                s.run(hb.global_variables_initializer())
                for _ in range(3):
                    s.run(train, {x: xb, y: yb})
                losses.append(s.run(loss, {x: xb, y: yb}))
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-4)


def test_gpu_memory_accounting():
    """A variable on the GPU shows up in the device's memory in use."""
    gpu = next(d for d in hb.list_devices() if d.device_type == "gpu")
    before = gpu.memory_in_use_bytes
    with hb.Graph().as_default():
        with hb.device("/gpu:0"):
            v = hb.Variable(hb.zeros([1024, 1024]))
        with hb.Session() as s:
            s.run(v.initializer)
            assert gpu.memory_in_use_bytes >= before + 4 * 1024 * 1024


def test_copy_between_gpus_and_nccl_all_reduce():
    """A tensor moves gpu:0 -> gpu:1, and an all-reduce over two GPUs sums (NCCL when available)."""
    from hetbed.runtime.ops.collective import all_reduce

    if n_gpus() < 2:
        pytest.skip("needs two GPUs")

    with hb.Graph().as_default():
        with hb.device("/gpu:0"):
            a = hb.constant(np.arange(4, dtype=np.float32)) * 1.0
        with hb.device("/gpu:1"):
            b = a + 1.0
            c = hb.constant(np.ones(4, np.float32)) * 2.0
        outs = all_reduce([a, c])
        with hb.Session() as s:
            got_b, r0, r1 = s.run([b, outs[0], outs[1]])
    np.testing.assert_array_equal(got_b, [1, 2, 3, 4])
    np.testing.assert_array_equal(r0, [2, 3, 4, 5])
    np.testing.assert_array_equal(r1, r0)


def _gpu_of(sess):
    return next(n.device for n in sess._last_plan.prepared.nodes if n.device.device_type == "gpu")


def test_a_step_enqueues_kernels_inline_and_returns_with_them_done(cp):
    """On one GPU a step takes the straight-line schedule: each kernel is enqueued on the calling
    thread, on the device's stream, with no wait per node; the step ends by waiting for the
    stream (TensorFlow's sync_on_finish), so an update that fetches nothing is done on return."""
    with hb.Graph().as_default():
        with hb.device("/gpu:0"):
            v = hb.Variable(np.zeros(3, np.float32))
            x = hb.placeholder(hb.float32, [3])
            up = hb.assign_add(v, hb.square(x) + 1.0)
        with hb.Session() as s:
            s.run(v.initializer)
            for _ in range(2):
                s.run(up.op, {x: np.arange(3, dtype=np.float32)})
            plan = s._last_plan.prepared
            assert plan.straight_line and len(plan.stream_syncs) == 1
            stream = _gpu_of(s).stream
            if getattr(cp, "is_fake", False):
                assert stream.synced == stream.seq > 0  # everything enqueued has been waited for
            else:
                assert stream.done
            np.testing.assert_array_equal(s.run(v), [2, 4, 10])


def test_a_traced_step_times_kernels_not_launches(cp):
    """With a trace, each GPU node completes when its kernels have finished (an event after
    them), so a traced matmul lasts at least its FLOPs at a peak no GPU reaches (1 PFLOP/s):
    137 us at n = 4096, where a launch alone takes tens of microseconds."""
    n = 256 if getattr(cp, "is_fake", False) else 4096  # the stand-in computes on the CPU
    a = np.random.default_rng(3).standard_normal((n, n)).astype(np.float32)
    with hb.Graph().as_default():
        with hb.device("/gpu:0"):
            x = hb.placeholder(hb.float32, [n, n])
            y = hb.matmul(hb.matmul(x, x), x)
            s_ = hb.reduce_sum(y)
        with hb.Session() as s:
            s.run(s_, {x: a})  # warm up (cuBLAS handles, kernel caches)
            meta = hb.RunMetadata()
            opts = hb.RunOptions(trace_level=hb.RunOptions.FULL_TRACE)
            s.run(s_, {x: a}, options=opts, run_metadata=meta)
    ops = meta.step_stats
    mm = ops[ops.type == "MatMul"]
    assert len(mm) == 2 and (mm.device.str.endswith("gpu:0")).all()
    assert (mm.duration_s >= 2.0 * n**3 / 1e15).all(), mm[["op", "duration_s"]]
