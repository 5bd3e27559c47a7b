"""The simulator runs the very graph a real session runs: closed-form timings, flows, memory,
hybrid values and traces."""

import json

import numpy as np
import pytest

import hetbed as hb
from hetbed.devices.costmodel import DevicePerf, Roofline, systolic_efficiency
from hetbed.devices.simulated import SimValue
from hetbed.simulator import Cluster, SimSession, sim_value

# A device with round numbers: 1 TFLOP/s, 100 GB/s, 10 us per kernel, 1 GB of memory.
TOY = DevicePerf(
    "toy", {"float32": 1e12}, memory_bandwidth=100e9, memory_bytes=1e9, launch_overhead_s=10e-6
)
NIC = (1e9, 50e-6)  # 1 GB/s, 50 us end to end


def cluster(n_workers=1, hybrid=False, memory=None, **kw):
    perf = (
        TOY
        if memory is None
        else DevicePerf(
            "small",
            {"float32": 1e12},
            memory_bandwidth=100e9,
            memory_bytes=memory,
            launch_overhead_s=10e-6,
        )
    )
    c = Cluster(hybrid=hybrid, **kw)
    c.add_task("ps", 0, cpu=perf, nic=NIC)
    for i in range(n_workers):
        c.add_task("worker", i, cpu=perf, gpu=(perf, 1), nic=NIC)
    return c


def roofline(flops, nbytes):
    return max(flops / 1e12, nbytes / 100e9) + 10e-6


def test_chain_on_one_device_takes_the_sum_of_durations():
    """Three dependent matmuls on one device take the sum of their roofline durations."""
    c = cluster()
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [512, 512])
        with hb.device("/job:worker/task:0/device:gpu:0"):
            y = x
            for _ in range(3):
                y = hb.matmul(y, y)
        s = SimSession(c)
        out = s.run(y, {x: sim_value([512, 512])})
    one = roofline(2 * 512**3, 3 * 512 * 512 * 4)
    assert out.shape == (512, 512)
    mm = s.last_record.ops[s.last_record.ops.type == "MatMul"]
    assert np.allclose(mm.duration_s, one, rtol=1e-12)
    starts = mm.start_s.to_numpy()
    assert np.allclose(np.diff(starts), one, rtol=1e-9)  # back to back on the stream


def test_changing_the_cost_model_or_hybrid_mode_replans_the_next_step():
    """Steps reuse per-node plans, but a new cost model or hybrid mode takes effect at once."""

    class Doubled(Roofline):
        def duration(self, op, in_shapes, out_shapes, perf):
            return 2.0 * super().duration(op, in_shapes, out_shapes, perf)

    c = cluster()
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [256, 256])
        with hb.device("/job:worker/task:0/device:gpu:0"):
            y = hb.matmul(x, x)
        s = SimSession(c)
        s.run(y, {x: sim_value([256, 256])})
        one = s.last_record.step_time_s
        dev = next(d for d in c.devices() if d.name.endswith("gpu:0"))
        dev.cost_model = Doubled()
        s.run(y, {x: sim_value([256, 256])})
        assert s.last_record.step_time_s == pytest.approx(2 * one, rel=1e-12)
        assert one == pytest.approx(roofline(2 * 256**3, 3 * 256 * 256 * 4), rel=1e-12)
        a = np.arange(256 * 256, dtype=np.float32).reshape(256, 256) / 1e5
        assert isinstance(s.run(y, {x: a}), SimValue)
        dev.hybrid = True
        np.testing.assert_allclose(s.run(y, {x: a}), a @ a, rtol=1e-5)


def test_transfer_between_hosts_is_latency_plus_bytes_over_bandwidth():
    """A tensor of B bytes from the PS host to a worker arrives after L + B/W."""
    c = cluster()
    n = 250_000  # 1 MB of float32
    with hb.Graph().as_default():
        with hb.device("/job:ps/task:0/device:cpu:0"):
            a = hb.identity(hb.placeholder(hb.float32, [n]))
        with hb.device("/job:worker/task:0/device:cpu:0"):
            b = hb.identity(a)
        s = SimSession(c)
        s.run(b, {a.op.inputs[0]: sim_value([n])})
    f = s.last_record.flows
    assert len(f) == 1 and f.bytes[0] == 4 * n
    assert f.end_s[0] - f.start_s[0] == pytest.approx(NIC[1] + 4 * n / NIC[0], rel=1e-9)


def test_two_equal_flows_share_the_nic():
    """Two tensors of B bytes leaving one host together each take L + 2B/W."""
    c = cluster()
    n = 250_000
    with hb.Graph().as_default():
        p = hb.placeholder(hb.float32, [n])
        with hb.device("/job:ps/task:0/device:cpu:0"):
            a1, a2 = hb.identity(p), hb.identity(p)
        with hb.device("/job:worker/task:0/device:cpu:0"):
            out = hb.identity(a1), hb.identity(a2)
        s = SimSession(c)
        s.run(list(out), {p: sim_value([n])})
    f = s.last_record.flows
    assert len(f) == 2
    assert np.allclose(f.end_s - f.start_s, NIC[1] + 2 * 4 * n / NIC[0], rtol=1e-9)


def _mlp(setter):
    with hb.device(setter):
        x = hb.placeholder(hb.float32, [None, 20], name="x")
        y = hb.placeholder(hb.int32, [None], name="y")
        w1 = hb.Variable(
            np.random.default_rng(0).standard_normal((20, 16)).astype(np.float32) * 0.3
        )
        w2 = hb.Variable(np.random.default_rng(1).standard_normal((16, 4)).astype(np.float32) * 0.3)
        logits = hb.matmul(hb.nn.relu(hb.matmul(x, w1)), w2)
        loss = hb.reduce_mean(
            hb.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
        )
        train = hb.train.GradientDescentOptimizer(0.5).minimize(loss)
    return x, y, loss, train


def test_hybrid_mode_computes_the_real_values():
    """In hybrid mode a simulated PS/worker training step yields exactly the real session's numbers."""
    rng = np.random.default_rng(2)
    xb = rng.standard_normal((8, 20)).astype(np.float32)
    yb = rng.integers(0, 4, 8).astype(np.int32)
    results = []
    for sim in (True, False):
        with hb.Graph().as_default():
            setter = hb.train.replica_device_setter(
                ps_tasks=1, worker_device="/job:worker/task:0/device:gpu:0"
            )
            x, y, loss, train = _mlp(setter)
            if sim:
                s = SimSession(cluster(hybrid=True))
            else:
                s = hb.Session(
                    config=hb.ConfigProto(
                        virtual_devices=["/job:ps/task:0/cpu:0", "/job:worker/task:0/cpu:0"]
                    )
                )
            s.run(hb.global_variables_initializer())
            for _ in range(3):
                s.run(train, {x: xb, y: yb})
            results.append(s.run(loss, {x: xb, y: yb}))
            if sim:
                rec = s.last_record
    assert results[0] == results[1]
    assert rec.step_time_s > 0 and len(rec.flows) > 0


def _accumulated_step(hybrid: bool, steps: int = 2) -> tuple[list, float]:
    """Two workers push their gradients into per-variable accumulators on the PS (TF's
    SyncReplicasOptimizer program, in one graph), which takes the average of 2 and applies it;
    the local step is the global step, as SyncReplicas feeds it."""
    rng = np.random.default_rng(0)
    with hb.Graph().as_default():
        with hb.device("/job:ps/task:0/device:cpu:0"):
            w = hb.Variable(rng.standard_normal((64, 8)).astype(np.float32), name="w")
            gstep = hb.Variable(np.int64(0), name="global_step")
            acc = hb.ConditionalAccumulator(hb.float32, w.shape, shared_name="acc_w")
        feeds, applies = {}, []
        for t in range(2):
            with hb.device(f"/job:worker/task:{t}/device:gpu:0"):
                x = hb.placeholder(hb.float32, [None, 64])
                (g,) = hb.gradients(hb.reduce_sum(hb.square(hb.matmul(x, w))), [w])
                xv = rng.standard_normal((32, 64)).astype(np.float32)
                feeds[x] = xv if hybrid else sim_value(xv.shape)
            with hb.device("/job:ps/task:0/device:cpu:0"):
                applies.append(acc.apply_grad(g, local_step=gstep))
        with hb.device("/job:ps/task:0/device:cpu:0"):
            with hb.control_dependencies(applies):
                update = hb.assign_sub(w, 0.001 * acc.take_grad(2))
            with hb.control_dependencies([update]):
                train = hb.assign_add(gstep, 1)
        s = SimSession(cluster(n_workers=2, hybrid=hybrid))
        s.run(hb.global_variables_initializer())
        times = []
        for _ in range(steps):
            s.run(train, feeds)
            times.append(s.last_record.step_time_s)
        return times, s.run(w) if hybrid else None


def test_synchronous_accumulators_run_shape_only_with_the_same_times():
    """A shape-only simulation runs the accumulators' synchronization for real (counts and
    steps, no values): the SyncReplicas program completes step after step, in the simulated
    times hybrid mode (real values) gives."""
    shape_only, _ = _accumulated_step(False)
    hybrid, w = _accumulated_step(True)
    assert shape_only == pytest.approx(hybrid, rel=1e-12)
    assert all(t > 0 for t in shape_only) and np.isfinite(w).all()


def test_out_of_memory_names_device_op_and_bytes():
    """A tensor that does not fit the simulated device is an OOM error naming device, op, bytes."""
    c = cluster(memory=3_000_000)
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [1000, 1000])
        with hb.device("/job:worker/task:0/device:gpu:0"):
            big = hb.matmul(x, x, name="big_product")
        s = SimSession(c)
        with pytest.raises(
            hb.errors.ResourceExhaustedError, match=r"gpu:0.*big_product.*4,000,000 bytes"
        ):
            s.run(big, {x: sim_value([1000, 1000])})


def test_memory_peak_counts_live_tensors_only():
    """Intermediates are freed after their last consumer: the peak is below the sum of all outputs."""
    c = cluster()
    n = 1000
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [n])
        with hb.device("/job:worker/task:0/device:gpu:0"):
            y = x
            for _ in range(10):
                y = y * 2.0
        s = SimSession(c)
        s.run(y, {x: sim_value([n])})
    gpu = s.last_record.devices.set_index("device").loc["/job:worker/replica:0/task:0/device:gpu:0"]
    assert 2 * 4 * n <= gpu.memory_peak_bytes <= 3 * 4 * n + 64


def test_an_input_stays_allocated_until_its_last_consumer_has_finished():
    """t feeds a and then b (b = a * t): when b's output is allocated, t and a are still live,
    so the peak is exactly three tensors, step after step; when a step ends (b fetched, or the
    step failed) nothing stays charged to the device."""
    c = cluster()
    n = 1000
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [n])
        with hb.device("/job:worker/task:0/device:gpu:0"):
            t = x * 2.0
            a = t * 3.0
            b = a * t
        s = SimSession(c)
        gpu = next(d for d in c.devices() if d.name.endswith("gpu:0"))
        for _ in range(3):
            s.run(b, {x: sim_value([n])})
            assert gpu.peak_bytes == 3 * 4 * n
            assert gpu.memory_in_use_bytes == 0
        gpu.memory_limit_bytes = 3 * 4 * n - 1  # b no longer fits: the step fails ...
        with pytest.raises(hb.errors.ResourceExhaustedError, match="gpu:0"):
            s.run(b, {x: sim_value([n])})
        assert gpu.memory_in_use_bytes == 0  # ... and leaves nothing charged
        gpu.memory_limit_bytes = 3 * 4 * n
        s.run(b, {x: sim_value([n])})
        assert gpu.peak_bytes == 3 * 4 * n


def test_views_keep_their_buffer_alive():
    """split(t, 2) returns two views of t (no new bytes), yet t's buffer lives as long as either
    half does: when b = a + h1 is allocated, t (2n floats), a and b are live, 4n floats; without
    the views holding t, the peak would be t alone."""
    c = cluster()
    n = 1000
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [2 * n])
        with hb.device("/job:worker/task:0/device:gpu:0"):
            t = x * 2.0
            h0, h1 = hb.split(t, 2)
            a = h0 * 3.0
            b = a + h1
        s = SimSession(c)
        s.run(b, {x: sim_value([2 * n])})
    gpu = next(d for d in c.devices() if d.name.endswith("gpu:0"))
    assert gpu.peak_bytes == 4 * 4 * n
    assert gpu.memory_in_use_bytes == 0


def test_a_multi_output_op_allocates_all_its_outputs_at_once():
    """SoftmaxCrossEntropyWithLogits makes the loss [b] and the backprop [b, k]: both are
    charged when it finishes (one byte short of both: the OOM names their sum), and with room
    for both the peak is exactly their sum."""
    b, k = 100, 50
    both = b * 4 + b * k * 4
    for limit in (both - 1, both):
        c = cluster(memory=limit)
        with hb.Graph().as_default():
            x = hb.placeholder(hb.float32, [b, k])
            y = hb.placeholder(hb.float32, [b, k])
            with hb.device("/job:worker/task:0/device:gpu:0"):
                loss = hb.nn.softmax_cross_entropy_with_logits(labels=y, logits=x)
            s = SimSession(c)
            feed = {x: sim_value([b, k]), y: sim_value([b, k])}
            if limit < both:
                with pytest.raises(hb.errors.ResourceExhaustedError, match=f"{both:,} bytes"):
                    s.run(list(loss.op.outputs), feed)
            else:
                s.run(list(loss.op.outputs), feed)
        gpu = next(d for d in c.devices() if d.name.endswith("gpu:0"))
        assert gpu.peak_bytes == (both if limit == both else 0)
        assert gpu.memory_in_use_bytes == 0


def test_a_step_failing_with_transfers_in_flight_leaves_the_next_step_intact():
    """Worker 0 sends a to worker 1 (a 4 ms flow) and runs out of memory on d meanwhile: the
    step fails with the OOM; the flow still in flight finishes during the next step, sharing the
    NIC with that step's own transfer of a, without failing it."""
    n = 1_000_000
    c = cluster(n_workers=2, memory=3 * 4 * n - 1)
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [None])
        with hb.device("/job:worker/task:0/device:gpu:0"):
            a = x * 2.0
            b = a * 3.0
            cc = b * 3.0
            d = hb.multiply(cc, b, name="d")
        with hb.device("/job:worker/task:1/device:gpu:0"):
            y = a + 1.0
        s = SimSession(c)
        with pytest.raises(hb.errors.ResourceExhaustedError, match="'d'"):
            s.run([d, y], {x: sim_value([n])})
        assert s.run(y, {x: sim_value([n])}).shape == (n,)
    flows = c.network.flow_frame()
    assert list(flows.bytes) == [4 * n, 4 * n]  # the first step's transfer, then the second's
    first, second = flows.itertuples()
    assert first.end_s < second.end_s
    # they shared the NIC: the second took longer than alone (latency + bytes / 1 GB/s)
    assert second.end_s - second.start_s > 50e-6 + 4 * n / 1e9 * 1.1
    assert all(dev.memory_in_use_bytes == 0 for dev in c.devices())


def test_traced_simulated_step_reports_simulated_times():
    """RunOptions(trace_level=FULL_TRACE) on a simulated session fills RunMetadata with the
    step's simulated ops and flows (the same rows as the RunRecord), not host wall-clock times."""
    c = cluster()
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [512, 512])
        with hb.device("/job:worker/task:0/device:gpu:0"):
            y = hb.matmul(x, x)
        s = SimSession(c)
        meta = hb.RunMetadata()
        s.run(
            y, {x: sim_value([512, 512])}, options=hb.RunOptions(trace_level=3), run_metadata=meta
        )
    mm = meta.step_stats[meta.step_stats.type == "MatMul"]
    assert np.allclose(mm.duration_s, roofline(2 * 512**3, 3 * 512 * 512 * 4), rtol=1e-12)
    assert meta.step_stats.equals(s.last_record.ops)
    assert meta.flow_stats.equals(s.last_record.flows)


def test_same_placement_as_the_real_session():
    """The simulated session places every op where a real session with the same devices does."""
    placements = []
    for sim in (True, False):
        with hb.Graph().as_default():
            setter = hb.train.replica_device_setter(ps_tasks=1, worker_device="/job:worker/task:0")
            _, _, _, train = _mlp(setter)
            if sim:
                s = SimSession(cluster())
            else:
                s = hb.Session(
                    config=hb.ConfigProto(
                        virtual_devices=["/job:ps/task:0/cpu:0", "/job:worker/task:0/cpu:0"]
                    )
                )
            df = s.placement(train).set_index("op")
            placements.append(df.device[~df.type.isin(["_Send", "_Recv"])])
    assert placements[0].sort_index().equals(placements[1].sort_index())


def test_chrome_trace_has_device_and_link_tracks():
    """The trace has one process per device that ran ops and one per link path used by flows."""
    c = cluster()
    with hb.Graph().as_default():
        setter = hb.train.replica_device_setter(
            ps_tasks=1, worker_device="/job:worker/task:0/device:gpu:0"
        )
        x, y, _, train = _mlp(setter)
        s = SimSession(c)
        s.run(hb.global_variables_initializer())
        s.run(train, {x: sim_value([32, 20]), y: sim_value([32], np.int32)})
    trace = json.loads(json.dumps(s.last_record.chrome_trace()))
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
    assert any("gpu:0" in n for n in names) and any(n.startswith("link ") for n in names)
    assert sum(e["ph"] == "X" for e in trace["traceEvents"]) == len(s.last_record.ops) + len(
        s.last_record.flows
    )


def test_systolic_efficiency_closed_form():
    """A 128x128 array is full for multiples of 128 and half used for 64-wide weights."""
    assert systolic_efficiency(1000, 256, 384, 128, 128) == 1.0
    assert systolic_efficiency(1000, 64, 128, 128, 128) == 0.5
    tpu = DevicePerf(
        "tpu",
        {"float32": 1e12},
        {"bfloat16": 100e12, "float32": 100e12},
        memory_bandwidth=1e15,
        systolic=(128, 128),
        launch_overhead_s=0.0,
    )
    with hb.Graph().as_default():
        a = hb.placeholder(hb.float32, [4096, 64])
        b = hb.placeholder(hb.float32, [64, 128])
        op = hb.matmul(a, b).op
    t = Roofline().duration(op, [(4096, 64), (64, 128)], [(4096, 128)], tpu)
    assert t == pytest.approx(2 * 4096 * 64 * 128 / (100e12 * 0.5), rel=1e-12)


def test_two_level_fabric_oversubscription_slows_cross_rack_transfers():
    """With racks of one host behind 4x oversubscribed uplinks, a transfer takes 4x the bytes time."""
    n = 250_000
    times = {}
    for fabric in ("switch", "two_level"):
        c = Cluster(fabric=fabric, rack_size=1, oversubscription=4.0)
        c.add_task("ps", 0, cpu=TOY, nic=(1e9, 0.0))
        c.add_task("worker", 0, cpu=TOY, nic=(1e9, 0.0))
        with hb.Graph().as_default():
            p = hb.placeholder(hb.float32, [n])
            with hb.device("/job:ps/task:0/device:cpu:0"):
                a = hb.identity(p)
            with hb.device("/job:worker/task:0/device:cpu:0"):
                b = hb.identity(a)
            s = SimSession(c)
            s.run(b, {p: sim_value([n])})
        f = s.last_record.flows
        times[fabric] = float(f.end_s[0] - f.start_s[0])
    assert times["switch"] == pytest.approx(4 * n / 1e9, rel=1e-9)
    assert times["two_level"] == pytest.approx(4 * times["switch"], rel=1e-9)


def test_ops_are_priced_in_the_dtype_of_their_floating_operands():
    """Conv2DBackpropInput's first input is an int32 shape: in a float16 graph it is priced at
    the float16 matrix rate, like the forward convolution, not at the float32 rate."""
    perf = DevicePerf(
        "fp16",
        {"float32": 1e12, "float16": 2e12},
        matrix_flops={"float16": 8e12},
        memory_bandwidth=1e15,  # compute-bound
        launch_overhead_s=0.0,
    )
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float16, [8, 32, 32, 16])
        f = hb.placeholder(hb.float16, [3, 3, 16, 32])
        y = hb.nn.conv2d(x, f, [1, 1, 1, 1], "SAME")
        (dx,) = hb.gradients(hb.reduce_sum(y), [x])
        back = dx.op
        assert back.type == "Conv2DBackpropInput" and back.inputs[0].dtype == hb.int32
        ins = [(4,), (3, 3, 16, 32), (8, 32, 32, 32)]
        t_back = Roofline().duration(back, ins, [(8, 32, 32, 16)], perf)
        t_fwd = Roofline().duration(
            y.op, [(8, 32, 32, 16), (3, 3, 16, 32)], [(8, 32, 32, 32)], perf
        )
    flops = 2 * 8 * 32 * 32 * 32 * 3 * 3 * 16
    assert t_fwd == pytest.approx(flops / 8e12, rel=1e-9)
    assert t_back == pytest.approx(flops / 8e12, rel=1e-9)  # was flops / 1e12 (float32 rate)


def test_a_stale_gradient_costs_only_its_dispatch():
    """A hybrid simulation knows when an accumulator drops a gradient as stale (its local step
    behind the accumulator's global step): the apply adds nothing, and its device books only
    the op's dispatch; a current gradient of the same 4 MB costs its roofline time."""
    with hb.Graph().as_default():
        with hb.device("/job:ps/task:0/device:cpu:0"):
            acc = hb.ConditionalAccumulator(hb.float32, [1 << 20], shared_name="acc")
            step = hb.placeholder(hb.int64, [])
            apply = acc.apply_grad(hb.ones([1 << 20]), local_step=step)
            take = acc.take_grad(1)
        s = SimSession(cluster(hybrid=True))

        def apply_s(local_step: int) -> float:
            s.run(apply, {step: local_step})
            ops = s.last_record.ops
            return float(ops[ops.type == "AccumulatorApplyGradient"].duration_s.iloc[0])

        current = apply_s(0)
        s.run(take)  # (the accumulator's global step is 1 now)
        stale = apply_s(0)
        assert current == pytest.approx(roofline(1 << 20, 3 * 4 * (1 << 20)), rel=1e-9)
        assert stale == pytest.approx(10e-6, rel=1e-9)  # (the toy device's launch cost)
        assert apply_s(1) == pytest.approx(current, rel=1e-9)


def test_nodes_alike_share_one_plan_and_time_as_planned_alone(monkeypatch):
    """A device plans a kind of node once per input signature (``_plan_alike``): a graph of
    repeated layers (matmuls of one shape, transposed or not, biases, relus, a reshape to a
    fed shape, two convolutions that differ only in padding) simulates to the same op
    timings as with every node planned alone, with far fewer plans than nodes."""
    import hetbed.devices.simulated as simulated

    def run(alone: bool):
        if alone:
            monkeypatch.setattr(simulated, "_alike_key", lambda node: None)
        else:
            monkeypatch.undo()
        c = cluster()
        g = hb.Graph()
        with g.as_default():
            x = hb.placeholder(hb.float32, [64, 128])
            shape = hb.placeholder(hb.int32, [2])
            h = x
            for i in range(12):
                w = hb.constant(np.ones((128, 128), np.float32) * 0.01)
                h = hb.nn.relu(hb.matmul(h, w, transpose_b=i % 2 == 1) + float(i))
            r = hb.reshape(h, shape)
            img = hb.placeholder(hb.float32, [8, 16, 16, 4])
            k = hb.constant(np.ones((1, 1, 4, 8), np.float32))
            convs = [hb.nn.conv2d(img, k, [1, 1, 1, 1], p) for p in ("SAME", "VALID")]
            out = [hb.reduce_sum(r), *[hb.reduce_sum(v) for v in convs]]
            s = SimSession(c, graph=g)
        feed = {x: sim_value([64, 128]), shape: np.array([128, 64], np.int32),
                img: sim_value([8, 16, 16, 4])}  # fmt: skip
        s.run(out, feed)
        dev = next(d for d in c.devices() if d.records)
        ops = s.last_record.ops.sort_values("op").reset_index(drop=True)
        return ops, dev, g

    alone, dev0, _ = run(True)
    shared, dev1, g = run(False)
    assert list(shared.op) == list(alone.op) and len(shared) > 40
    np.testing.assert_allclose(shared.duration_s, alone.duration_s, rtol=1e-12)
    np.testing.assert_allclose(shared.end_s, alone.end_s, rtol=1e-12)
    assert not dev0._alike and 0 < len(dev1._alike) < len(shared) // 2
    # the key tells apart what the inputs' signature does not: an attr (not a Const's value)
    from types import SimpleNamespace

    def key(op):
        return simulated._alike_key(SimpleNamespace(op=op, input_tensors=op.inputs))

    mm = [op for op in g.get_operations() if op.type == "MatMul"]
    assert key(mm[0]) == key(mm[2]) != key(mm[1]) == key(mm[3])
    conv = [op for op in g.get_operations() if op.type == "Conv2D"]
    assert key(conv[0]) != key(conv[1])
    consts = [
        op for op in g.get_operations() if op.type == "Const" and not op.outputs[0].shape.dims
    ]
    assert len(consts) >= 2 and key(consts[0]) == key(consts[1])  # (values computed for real)
