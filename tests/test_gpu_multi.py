"""Multi-GPU on the strict cupy stand-in: in-graph replication on 2 and 4 GPUs (gradients averaged
by the NCCL all-reduce or on a parameter device) equals the CPU run; device-to-device copies;
soft placement of CPU-only kernels; memory accounting per GPU."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_fixtures import install_fake

import hetbed as hb
from hetbed.runtime.ops.collective import all_reduce

D_IN, HIDDEN, N_CLS, BATCH, STEPS, LR = 12, 16, 5, 16, 3, 0.5


@pytest.fixture
def gpus4():
    cp, undo = install_fake(4)
    yield cp
    undo()


def _params():
    rng = np.random.default_rng(0)
    return [
        (rng.standard_normal((D_IN, HIDDEN)) * 0.3).astype(np.float32),
        np.zeros(HIDDEN, np.float32),
        (rng.standard_normal((HIDDEN, N_CLS)) * 0.3).astype(np.float32),
        np.full(N_CLS, 0.1, np.float32),
    ]


def _data():
    rng = np.random.default_rng(1)
    return (
        rng.standard_normal((BATCH, D_IN)).astype(np.float32),
        rng.integers(0, N_CLS, BATCH).astype(np.int32),
    )


def _loss(x, y, p):
    h = hb.nn.relu(hb.matmul(x, p[0]) + p[1])
    logits = hb.matmul(h, p[2]) + p[3]
    return hb.reduce_mean(hb.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))


def _train(n: int, mode: str):
    """Final parameters (per replica) and losses after STEPS steps.

    mode "cpu": one tower on the CPU; "ps_cpu"/"ps_gpu": parameters on cpu:0/gpu:0, towers on
    gpu:0..n-1, gradients averaged there; "nccl": parameters mirrored on every GPU, gradients
    averaged by the NCCL all-reduce, each replica applying the same mean.
    """
    xb, yb = _data()
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [BATCH, D_IN])
        y = hb.placeholder(hb.int32, [BATCH])
        if mode == "cpu":
            with hb.device("/cpu:0"):
                p = [hb.Variable(v) for v in _params()]
                loss = _loss(x, y, p)
                grads = hb.gradients(loss, p)
                train = hb.group(*[hb.assign_sub(v, g * LR) for v, g in zip(p, grads)])
            replicas = [p]
        else:
            xs, ys = hb.split(x, n), hb.split(y, n)
            if mode == "nccl":
                replicas = []
                for i in range(n):
                    with hb.device(f"/gpu:{i}"):
                        replicas.append(
                            [hb.Variable(v, name=f"r{i}_p{k}") for k, v in enumerate(_params())]
                        )
            else:
                with hb.device("/cpu:0" if mode == "ps_cpu" else "/gpu:0"):
                    replicas = [[hb.Variable(v) for v in _params()]]
            tower_grads, losses = [], []
            for i in range(n):
                with hb.device(f"/gpu:{i}"):
                    p = replicas[i] if mode == "nccl" else replicas[0]
                    losses.append(_loss(xs[i], ys[i], p))
                    tower_grads.append(hb.gradients(losses[-1], p))
            updates = []
            if mode == "nccl":
                for k in range(4):
                    means = all_reduce([tg[k] for tg in tower_grads], "mean")
                    for i in range(n):
                        with hb.device(f"/gpu:{i}"):
                            updates.append(hb.assign_sub(replicas[i][k], means[i] * LR))
            else:
                with hb.device("/cpu:0" if mode == "ps_cpu" else "/gpu:0"):
                    for k in range(4):
                        g = hb.add_n([tg[k] for tg in tower_grads]) / float(n)
                        updates.append(hb.assign_sub(replicas[0][k], g * LR))
            train = hb.group(*updates)
            with hb.device("/gpu:0"):
                loss = hb.add_n(losses) / float(n)
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            seen = []
            for _ in range(STEPS):
                seen.append(s.run(loss, {x: xb, y: yb}))
                s.run(train, {x: xb, y: yb})
            placed = s.placement().set_index("op").device.to_dict()
            final = [s.run(r) for r in replicas]
            mem = {
                "gpu:" + d.name.rsplit(":", 1)[-1]: d.memory_in_use_bytes
                for d in s.list_devices()
                if d.device_type == "gpu"
            }
    return final, seen, mem, placed


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("mode", ["nccl", "ps_cpu", "ps_gpu"])
def test_replicated_training_on_gpus_equals_cpu(gpus4, n, mode):
    (want,), want_losses, _, _ = _train(1, "cpu")
    final, losses, mem, placed = _train(n, mode)
    np.testing.assert_allclose(losses, want_losses, rtol=2e-5, atol=1e-6)
    for replica in final:
        for got, w in zip(replica, want):
            np.testing.assert_allclose(got, w, rtol=2e-5, atol=1e-6)
    towers = {dev.rsplit(":", 1)[-1] for op, dev in placed.items() if "gpu" in dev}
    assert towers == {str(i) for i in range(n)}
    param_bytes = sum(v.nbytes for v in _params())
    if mode == "nccl":  # each GPU holds its own replica (the stand-in pools count per device)
        assert all(mem[f"gpu:{i}"] >= param_bytes for i in range(n)), mem
        assert any(op.startswith("AllReduce") for op in placed)
    if mode == "ps_gpu":
        assert mem["gpu:0"] >= param_bytes
    if n == 2:
        assert mem["gpu:2"] == mem["gpu:3"] == 0, mem  # unused GPUs hold nothing


def test_device_to_device_copies_through_send_recv(gpus4):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [3, 4])
        t = x
        for i in (0, 1, 2, 3, 1):
            with hb.device(f"/gpu:{i}"):
                t = t * 2.0 + float(i)
        with hb.Session() as s:
            got = s.run(t, {x: a})
            types = set(s.placement().type)
    want = a
    for i in (0, 1, 2, 3, 1):
        want = want * 2 + i
    np.testing.assert_array_equal(got, want)
    assert {"_Send", "_Recv"} <= types


def test_cpu_only_kernels_soft_place_with_copies(gpus4):
    """A queue (CPU-only kernels) asked for on gpu:0 runs on the CPU; GPU ops around it get the
    values through Send/Recv copies."""
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [2, 3])
        with hb.device("/gpu:0"):
            y = hb.exp(x)
            q = hb.FIFOQueue(-1, [hb.float32], shapes=[[3]])
            enq = q.enqueue_many(y)
            z = q.dequeue() * 2.0
        with hb.Session() as s:
            s.run(enq, {x: a})
            p1 = s.placement()
            first = s.run(z)
            p2 = s.placement()
    np.testing.assert_allclose(first, np.exp(a[0]) * 2, rtol=1e-6)
    dev = dict(zip(p1.op, p1.device)) | dict(zip(p2.op, p2.device))
    assert dev[q.queue_ref.op.name].endswith("cpu:0") and dev[enq.name].endswith("cpu:0")
    assert dev[y.op.name].endswith("gpu:0") and dev[z.op.name].endswith("gpu:0")
    assert {"_Send", "_Recv"} <= set(p1.type) and {"_Send", "_Recv"} <= set(p2.type)


def test_accumulator_on_a_gpu(gpus4):
    """A conditional accumulator on gpu:0 averages gradients; cancelling with no take waiting
    is a no-op and later takes still work."""
    from hetbed.runtime.ops import data_flow

    with hb.Graph().as_default():
        with hb.device("/gpu:0"):
            acc = data_flow.ConditionalAccumulator(hb.float32, shape=[3])
            g = hb.placeholder(hb.float32, [3])
            apply = acc.apply_grad(g, local_step=0)
            take = acc.take_grad(2)
            cancel = acc.cancel_takes()
        with hb.Session() as s:
            s.run(cancel)
            s.run(apply, {g: [1.0, 2.0, 3.0]})
            s.run(apply, {g: [3.0, 2.0, 1.0]})
            got = s.run(take)
            dev = dict(zip(s.placement().op, s.placement().device))
    np.testing.assert_allclose(got, [2.0, 2.0, 2.0])
    assert dev[take.op.name].endswith("gpu:0")


def _sync_replicas_run(device: str) -> tuple[np.ndarray, dict]:
    """Three SyncReplicasOptimizer steps (one replica) of a linear model under ``device``."""
    xv = np.random.default_rng(3).standard_normal((8, 3)).astype(np.float32)
    yv = xv @ np.array([[1.0], [-2.0], [0.5]], np.float32)
    with hb.Graph().as_default():
        with hb.device(device):
            step = hb.train.get_or_create_global_step()
            w = hb.Variable(np.zeros((3, 1), np.float32), name="w")
            loss = hb.reduce_mean(hb.square(hb.matmul(hb.constant(xv), w) - hb.constant(yv)))
            opt = hb.train.SyncReplicasOptimizer(
                hb.train.GradientDescentOptimizer(0.1), 1, total_num_replicas=1
            )
            train = opt.minimize(loss, global_step=step)
        hooks = [opt.make_session_run_hook(is_chief=True), hb.train.StopAtStepHook(last_step=3)]
        with hb.train.MonitoredTrainingSession(is_chief=True, hooks=hooks) as sess:
            while not sess.should_stop():
                sess.run(train)
            raw = sess.raw_session()
            got = raw.run(w)
            pinned = {name: d.name for name, d in raw._pinned.items()}  # stateful ops' devices
    return got, pinned


def test_sync_replicas_under_a_gpu_default_device(gpus4):
    """SyncReplicasOptimizer with everything asked for on gpu:0: the token queue (no GPU kernel)
    and the global step it is colocated with go to the CPU from the first step on (the step
    that first reads the global step pins it), the model stays on the GPU, and the weights equal
    the CPU run's."""
    got, dev = _sync_replicas_run("/gpu:0")
    want, _ = _sync_replicas_run("/cpu:0")
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert dev["global_step"].endswith("cpu:0") and dev["sync_token_q"].endswith("cpu:0")
    assert dev["w"].endswith("gpu:0")
