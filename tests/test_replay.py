"""Step programs: a replayed shape-only step gives exactly what the full timed schedule gives
(ops, flows, links, devices, memory, clock), and the replay steps aside whenever it would not."""

import numpy as np
import pytest

import hetbed as hb
from hetbed.devices.costmodel import DevicePerf, Roofline
from hetbed.devices.simulated import SimValue
from hetbed.runtime.errors import ResourceExhaustedError
from hetbed.simulator import Cluster, SimSession, sim_value

GPU = DevicePerf(
    "toy", {"float32": 2e12}, memory_bandwidth=50e9, memory_bytes=4e9, launch_overhead_s=4e-6
)


def _cluster(fabric: str, latency: float) -> Cluster:
    c = Cluster(fabric=fabric, rack_size=2, oversubscription=3.0)
    for t in range(4):
        # 10 GbE NICs; the devices of a host talk over their host links
        c.add_task("worker", t, cpu=GPU, gpu=(GPU, 2), nic=(1.25e9, latency))
    return c


DEVICES = [
    f"/job:worker/task:{t}/device:{kind}:{i}"
    for t in range(4)
    for kind, i in (("cpu", 0), ("gpu", 0), ("gpu", 1))
]


def _model(seed: int, n_ops: int = 60):
    """A random graph over 12 devices on 4 hosts: matmuls, adds, views (split, reshape),
    concats and control edges, so that transfers of two sizes (and of none) cross shared links
    at once."""
    rng = np.random.default_rng(seed)
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, [None, 64])
        pool = {64: [x], 256: []}
        w_up = np.full((64, 256), 0.01, np.float32)
        w_down = np.full((256, 64), 0.01, np.float32)
        for _ in range(n_ops):
            with hb.device(DEVICES[rng.integers(len(DEVICES))]):
                kind = rng.integers(7)
                a = pool[64][rng.integers(len(pool[64]))]
                if kind == 0:
                    pool[256].append(hb.matmul(a, hb.constant(w_up)))
                elif kind == 1 and pool[256]:
                    wide = pool[256][rng.integers(len(pool[256]))]
                    pool[64].append(hb.tanh(hb.matmul(wide, hb.constant(w_down))))
                elif kind == 2:
                    b = pool[64][rng.integers(len(pool[64]))]
                    pool[64].append(a + b)
                elif kind == 3:
                    left, right = hb.split(a, 2, axis=1)
                    pool[64].append(hb.concat([right, left], axis=1))
                elif kind == 4:
                    pool[64].append(hb.reshape(hb.reshape(a, [-1]), [-1, 64]) * 2.0)
                elif kind == 5:
                    pool[64].append(hb.tanh(a))
                else:  # a control edge, often across devices: a zero-byte transfer
                    b = pool[64][rng.integers(len(pool[64]))]
                    with hb.control_dependencies([b.op]):
                        pool[64].append(hb.identity(a))
        with hb.device(DEVICES[0]):
            total = hb.add_n(pool[64][-6:])
            shape = hb.shape(total)
    fetches = [total, shape, pool[64][len(pool[64]) // 2]]
    return g, x, fetches


def _run(fabric: str, latency: float, seed: int, replay: bool, batches: list[int]):
    c = _cluster(fabric, latency)
    g, x, fetches = _model(seed)
    sess = SimSession(c, graph=g, replay=replay)
    steps = []
    for b in batches:
        out = sess.run(fetches, {x: sim_value([b, 64])})
        r = sess.last_record
        devs = sess.cluster.devices()
        steps.append(
            {
                "out": out,
                "step": r.step_time_s,
                "ops": r.ops,
                "flows": r.flows,
                "devices": r.devices,
                "links": r.links,
                "now": c.env.now,
                "recomputations": c.network.recomputations,
                "memory": [(d.memory_in_use_bytes, d.busy_until) for d in devs],
                "all_flows": c.network.flow_frame(),
                "all_links": c.network.link_frame(),
            }
        )
    return sess, steps


def _same_values(a, b) -> bool:
    if isinstance(a, SimValue):
        return isinstance(b, SimValue) and a.shape == b.shape and a.dtype == b.dtype
    return np.array_equal(a, b) and np.asarray(a).dtype == np.asarray(b).dtype


@pytest.mark.parametrize(
    "fabric,latency,seed",
    [("switch", 20e-6, 0), ("switch", 0.0, 1), ("two_level", 5e-6, 2), ("two_level", 0.0, 3)],
)
def test_a_replayed_step_equals_the_full_schedule_to_the_last_bit(fabric, latency, seed):
    batches = [32, 32, 32, 128, 32, 128, 128]
    full_sess, full = _run(fabric, latency, seed, False, batches)
    fast_sess, fast = _run(fabric, latency, seed, True, batches)
    assert full_sess.replayed_steps == 0
    # each batch size's first step records its program; its second runs in full too
    assert fast_sess.replayed_steps == 3
    assert len(full[0]["flows"]) > 10  # transfers took place
    assert (full[0]["flows"].bytes == 0).any()  # control edges across devices
    assert any(s["recomputations"] for s in full)  # flows shared links
    for k, (a, b) in enumerate(zip(full, fast)):
        for key in ("ops", "flows", "devices", "links", "all_flows", "all_links"):
            assert a[key].equals(b[key]), (k, key)
        for key in ("step", "now", "recomputations", "memory"):
            assert a[key] == b[key], (k, key)
        assert all(_same_values(u, v) for u, v in zip(a["out"], b["out"])), k
    assert fast[3]["out"][1].tolist() == [128, 64]  # the Shape op's value, per signature


def _small():
    c = Cluster()
    c.add_task("worker", 0, cpu=GPU, gpu=(GPU, 1), nic=(1.25e9, 10e-6))
    c.add_task("worker", 1, cpu=GPU, gpu=(GPU, 1), nic=(1.25e9, 10e-6))
    with hb.Graph().as_default() as g:
        x = hb.placeholder(hb.float32, [256, 256])
        with hb.device("/job:worker/task:0/device:gpu:0"):
            y = hb.matmul(x, x)
        with hb.device("/job:worker/task:1/device:gpu:0"):
            z = hb.tanh(hb.matmul(y, y))
    return c, g, x, z


def _replaying():
    """A session that has replayed one step of ``_small`` (it replays from a signature's
    second step); returns the cluster, the session, the fetch and the feed."""
    c, g, x, z = _small()
    sess = SimSession(c, graph=g)
    sess.replay_after = 1
    feed = {x: sim_value([256, 256])}
    sess.run(z, feed)
    sess.run(z, feed)
    assert sess.replayed_steps == 1
    return c, sess, x, z, feed


def test_replay_steps_aside_when_something_else_is_on_the_clock():
    c, sess, _x, z, feed = _replaying()
    fired = []
    c.env.timeout(10.0).callbacks.append(lambda _e: fired.append(c.env.now))
    sess.run(z, feed)
    assert sess.replayed_steps == 1  # a foreign event is pending: the full schedule ran
    assert c.env.peek() < float("inf")  # and the foreign event is still there
    c.env.run()
    assert fired and fired[0] >= 10.0


def test_a_replay_that_would_run_out_of_memory_runs_in_full_and_raises():
    c, sess, _x, z, feed = _replaying()
    dev = c.devices()[-1]  # worker 1's gpu
    assert dev.name.endswith("task:1/device:gpu:0")
    dev.memory_limit_bytes = 300_000  # less than the two 256 KiB tensors it holds at once
    with pytest.raises(
        ResourceExhaustedError, match="simulated out of memory.*task:1/device:gpu:0"
    ):
        sess.run(z, feed)
    assert sess.replayed_steps == 1
    assert all(d.memory_in_use_bytes == 0 for d in c.devices())  # nothing left charged
    dev.memory_limit_bytes = 0
    sess.run(z, feed)
    assert sess.replayed_steps == 2
    sess.replay = False  # turned off: every step runs in full
    sess.run(z, feed)
    assert sess.replayed_steps == 2


def test_a_new_cost_model_or_hybrid_mode_is_not_replayed_from_an_old_program():
    c, sess, x, z, feed = _replaying()
    before = sess.last_record.step_time_s

    class Slower(Roofline):
        def duration(self, op, in_shapes, out_shapes, perf):
            return 2 * super().duration(op, in_shapes, out_shapes, perf)

    for d in c.devices():
        d.cost_model = Slower()
    sess.run(z, feed)
    assert sess.replayed_steps == 1
    slower = sess.last_record.step_time_s
    assert slower > before
    sess.run(z, feed)  # the new program replays with the new durations
    assert sess.replayed_steps == 2
    assert sess.last_record.step_time_s == slower
    for d in c.devices():
        d.hybrid = True
    xv = np.full((256, 256), 0.01, np.float32)
    for _ in range(2):
        out = sess.run(z, {x: xv})
        assert np.allclose(out, np.tanh((xv @ xv) @ (xv @ xv)), rtol=1e-5)
    assert sess.replayed_steps == 2  # hybrid steps compute values: never replayed


@pytest.mark.parametrize("name,batch", [("cnn", 16), ("lstm_lm", 8)])
def test_a_zoo_models_replayed_training_steps_equal_the_full_schedule(name, batch):
    """Data-parallel training steps (variables on two PS tasks, updates, Send/Recv both ways)."""
    from hetbed.scenarios.models import zoo

    def steps(replay: bool):
        c = Cluster()
        c.add_task("ps", 0, cpu=GPU, nic=(1.25e9, 20e-6))
        c.add_task("ps", 1, cpu=GPU, nic=(1.25e9, 20e-6))
        c.add_task("worker", 0, cpu=GPU, gpu=(GPU, 1), nic=(1.25e9, 20e-6))
        g = hb.Graph()
        with g.as_default():
            with hb.device(
                hb.train.replica_device_setter(
                    ps_tasks=2, worker_device="/job:worker/task:0/device:gpu:0"
                )
            ):
                m = zoo.build(name, batch)
            sess = SimSession(c, graph=g, replay=replay)
            sess.run(hb.global_variables_initializer())
            feed = {ph: sim_value(m.input_shapes[k], ph.dtype.np) for k, ph in m.inputs.items()}
            out = []
            for _ in range(4):
                sess.run(m.train_op, feed)
                r = sess.last_record
                out.append((r.step_time_s, r.ops, r.flows, r.devices, r.links, c.env.now))
        return sess, out

    full_sess, full = steps(False)
    fast_sess, fast = steps(True)
    assert fast_sess.replayed_steps == 2 and full_sess.replayed_steps == 0
    assert len(full[-1][2]) > 4  # variables and gradients crossed the network
    for a, b in zip(full, fast):
        assert a[0] == b[0] and a[5] == b[5]
        assert all(u.equals(v) for u, v in zip(a[1:5], b[1:5]))
