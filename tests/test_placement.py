"""Device names, scopes, device functions, colocation, soft placement, replica_device_setter."""

import numpy as np
import pytest

import hetbed as hb
from hetbed.devices.naming import DeviceSpec
from hetbed.runtime.device_setter import replica_device_setter

PS_WORKER = [
    "/job:ps/replica:0/task:0/device:cpu:0",
    "/job:ps/replica:0/task:1/device:cpu:0",
    "/job:worker/replica:0/task:0/device:cpu:0",
]


def placed(sess):
    df = sess.placement()
    return dict(zip(df.op, df.device))


def test_device_spec_parse_and_print():
    """Full, partial and legacy device strings parse to fields and print canonically."""
    s = DeviceSpec.from_string("/job:worker/replica:0/task:3/device:GPU:1")
    assert (s.job, s.replica, s.task, s.device_type, s.device_index) == ("worker", 0, 3, "gpu", 1)
    assert DeviceSpec.from_string("/gpu:1").to_string() == "/device:gpu:1"
    assert DeviceSpec.from_string("/job:ps/task:0").to_string() == "/job:ps/task:0"
    assert DeviceSpec.from_string("/cpu:*").device_index is None


@pytest.mark.parametrize(
    "bad", ["/job:", "/task:x", "/replica:-1", "/foo:1", "/device:", "/job", "/replica", "cpu0"]
)
def test_malformed_device_string(bad):
    """Malformed device strings are errors that quote the string; a field without its colon
    (TensorFlow refuses "cpu0" too) is shown as meant."""
    with pytest.raises(ValueError, match="malformed device spec") as e:
        DeviceSpec.from_string(bad)
    if bad == "cpu0":
        assert "did you mean 'cpu:0'?" in str(e.value)
    assert DeviceSpec.from_string("/cpu").to_string() == "/device:cpu:*"


def test_nested_scopes_inner_wins_per_field():
    """Inner device scopes override only the fields they set."""
    with hb.Graph().as_default():
        with hb.device("/job:worker/task:1"), hb.device("/device:cpu:0"):
            a = hb.constant(1.0)
        with hb.device("/job:worker/task:1"), hb.device("/task:2"):
            b = hb.constant(1.0)
    assert a.op.device == "/job:worker/task:1/device:cpu:0"
    assert b.op.device == "/job:worker/task:2"


def test_device_function_and_scopes_place_ops():
    """A device function picks a device per op; the session runs ops where they were asked to."""
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [2])
        with hb.device(lambda op: "/cpu:1" if op.type == "Mul" else "/cpu:0"):
            y = x * 3.0
            z = y + 1.0
        with hb.Session(config=hb.ConfigProto(device_count={"CPU": 2})) as s:
            np.testing.assert_array_equal(s.run(z, {x: [1, 2]}), [4, 7])
            p = placed(s)
    assert p[y.op.name].endswith("cpu:1")
    assert p[z.op.name].endswith("cpu:0")


def test_variable_ops_colocate_with_variable():
    """Assign and read ops of a variable run on the variable's device."""
    with hb.Graph().as_default():
        with hb.device("/cpu:1"):
            v = hb.Variable(hb.constant([1.0, 2.0]), name="v")
        with hb.device("/cpu:0"):
            upd = hb.assign_add(v, [1.0, 1.0])  # asks for cpu:0, but takes v's reference
        with hb.Session(config=hb.ConfigProto(device_count={"CPU": 2})) as s:
            s.run(hb.global_variables_initializer())
            s.run(upd)
            np.testing.assert_array_equal(s.run(v), [2.0, 3.0])
            np.testing.assert_array_equal(s.run(v.value()), [2.0, 3.0])  # (the read op)
            p = placed(s)
    assert p["v/read"].endswith("cpu:1")
    assert p["v"].endswith("cpu:1")


def test_conflicting_colocation_without_soft_placement():
    """With soft placement off, a ref consumer asking for another device is an error naming both."""
    with hb.Graph().as_default():
        with hb.device("/cpu:1"):
            v = hb.Variable(hb.constant([1.0]), name="v")
        with hb.device("/cpu:0"):
            upd = hb.assign_add(v, [1.0], name="upd")
        cfg = hb.ConfigProto(device_count={"CPU": 2}, allow_soft_placement=False)
        with hb.Session(config=cfg) as s:
            with pytest.raises(
                hb.errors.InvalidArgumentError, match=r"upd.*cpu:0.*v.*cpu:1|v.*upd"
            ):
                s.run(upd)


def test_unknown_device_errors_without_soft_placement():
    """A device that does not exist is an error listing the session's devices (soft off)."""
    with hb.Graph().as_default():
        with hb.device("/gpu:3"):
            y = hb.constant(1.0) + 1.0
        with hb.Session(config=hb.ConfigProto(allow_soft_placement=False)) as s:
            with pytest.raises(hb.errors.InvalidArgumentError, match=r"gpu:3.*cpu:0"):
                s.run(y)
        with hb.Session() as s:  # soft placement: falls back to the CPU
            assert s.run(y) == 2.0


def test_colocate_with_ignores_device_scope():
    """Inside colocate_with, an op takes the device of the op it is colocated with."""
    with hb.Graph().as_default():
        with hb.device("/cpu:1"):
            a = hb.constant(1.0, name="a")
        with hb.device("/cpu:0"), hb.colocate_with(a):
            b = hb.identity(a, name="b")
    assert b.op.device == a.op.device == "/device:cpu:1"


def _vars_for_ps(strategy):
    g = hb.Graph()
    with g.as_default():
        with hb.device(replica_device_setter(ps_tasks=2, ps_strategy=strategy)):
            big1 = hb.Variable(np.zeros((1000, 100), np.float32), name="big1")
            small1 = hb.Variable(np.zeros(10, np.float32), name="small1")
            big2 = hb.Variable(np.zeros((1000, 100), np.float32), name="big2")
            small2 = hb.Variable(np.zeros(10, np.float32), name="small2")
            loss = hb.reduce_sum(big1) + hb.reduce_sum(big2) + hb.reduce_sum(small1 + small2)
    vs = [big1, small1, big2, small2]
    return g, vs, loss


def test_replica_device_setter_round_robin_vs_greedy():
    """Round robin puts both large variables on one PS; greedy-by-bytes spreads them."""
    _, vs, loss = _vars_for_ps(None)
    assert [v.device for v in vs] == ["/job:ps/task:0", "/job:ps/task:1"] * 2
    assert loss.op.device == "/job:worker"
    loads = {}
    for v in vs:
        loads[v.device] = loads.get(v.device, 0) + v.shape.num_elements() * 4
    assert max(loads.values()) / sum(loads.values()) > 0.99  # round robin: one PS has ~all bytes

    _, vs, _ = _vars_for_ps("greedy")
    loads = {}
    for v in vs:
        loads[v.device] = loads.get(v.device, 0) + v.shape.num_elements() * 4
    assert max(loads.values()) / sum(loads.values()) < 0.51


def test_replica_device_setter_runs_on_virtual_ps_and_worker():
    """A between-graph style model runs with variables on two PS devices and compute on a worker."""
    g, vs, loss = _vars_for_ps("greedy")
    with g.as_default():
        cfg = hb.ConfigProto(virtual_devices=PS_WORKER)
        with hb.Session(config=cfg) as s:
            s.run(hb.global_variables_initializer())
            assert s.run(loss) == 0.0
            p = placed(s)
    assert p["big1"].startswith("/job:ps/replica:0/task:0")
    assert p["big2"].startswith("/job:ps/replica:0/task:1")
    assert p[loss.op.name].startswith("/job:worker")


def test_cost_aware_placer_spreads_independent_heavy_work():
    """The cost-aware placer puts two independent large matmuls on different devices."""
    with hb.Graph().as_default():
        a = hb.placeholder(hb.float32, [256, 256])
        b = hb.placeholder(hb.float32, [256, 256])
        y1 = hb.matmul(a, a)
        y2 = hb.matmul(b, b)
        cfg = hb.ConfigProto(device_count={"CPU": 2}, placement="cost")
        av = np.eye(256, dtype=np.float32)
        with hb.Session(config=cfg) as s:
            r1, r2 = s.run([y1, y2], {a: av, b: 2 * av})
            p = placed(s)
    np.testing.assert_array_equal(r1, av)
    np.testing.assert_array_equal(r2, 4 * av)
    assert p[y1.op.name] != p[y2.op.name]


def test_list_devices():
    """hb.Session lists one CPU by default and N virtual CPUs when asked."""
    with hb.Graph().as_default():
        with hb.Session(config=hb.ConfigProto(device_count={"CPU": 3})) as s:
            names = [d.name for d in s.list_devices() if d.device_type == "cpu"]
    assert names == [f"/job:localhost/replica:0/task:0/device:cpu:{i}" for i in range(3)]


def test_cpu_device_reports_memory_of_its_variables():
    """A CPU device's memory in use counts the buffers of the variables placed on it."""
    with hb.Graph().as_default():
        with hb.device("/cpu:1"):
            v = hb.Variable(np.zeros((256, 256), np.float32))
        with hb.Session(config=hb.ConfigProto(device_count={"CPU": 2})) as s:
            cpu0, cpu1 = s.list_devices()[:2]
            assert cpu1.memory_in_use_bytes == 0
            s.run(v.initializer)
            assert cpu1.memory_in_use_bytes == 256 * 256 * 4
            assert cpu0.memory_in_use_bytes == 0


def test_replica_device_setter_strategy_shorthand():
    """strategy="greedy" is the same as ps_strategy="greedy"; giving both is an error."""
    g1 = _vars_for_ps("greedy")[1]
    with hb.Graph().as_default():
        with hb.device(replica_device_setter(ps_tasks=2, strategy="greedy")):
            vs = [hb.Variable(np.zeros(s, np.float32)) for s in [(1000, 100), 10, (1000, 100), 10]]
    assert [v.device for v in vs] == [v.device for v in g1]
    with pytest.raises(ValueError, match="not both"):
        replica_device_setter(ps_tasks=2, strategy="greedy", ps_strategy="greedy")


def test_ops_alike_take_the_first_ones_choice_as_if_placed_alone():
    """``place`` decides a lone op once per (request, kernels, dtype) and hands the choice to
    the ops alike: every op lands where placing it alone puts it (float adds on the GPU asked
    for, string joins and a string identity of the same request on the CPU: no GPU kernel for
    a string), a pinned op stays where it was pinned though ops alike go elsewhere, and every
    unconstrained op reaches the spreader as a group of its own (with the choice it makes)."""
    from types import SimpleNamespace

    from hetbed.runtime.placement import place

    names = ["/job:w/replica:0/task:0/device:cpu:0", "/job:w/replica:0/task:0/device:gpu:0"]
    cpu, gpu = (SimpleNamespace(name=n, kernel_type=n.rsplit(":", 2)[1]) for n in names)
    g = hb.Graph()
    with g.as_default():
        x = hb.constant(np.ones(3, np.float32))
        with hb.device("/device:gpu:0"):
            adds = [x + float(i) for i in range(4)]
            joins = [hb.string_join([hb.constant("a"), hb.constant("b")]) for _ in range(2)]
            same = [hb.identity(x), hb.identity(hb.constant("s")), hb.identity(x)]  # (one op
            # type, two dtypes: no GPU kernel for a string)
        free = [x * float(i) for i in range(3)]
    ops = g.get_operations()
    pinned = {adds[2].op.name: cpu}
    seen = []

    def spread(groups):
        seen.extend(root for root, _ in groups)
        return {root: gpu for root, _ in groups}

    out = place(ops, [cpu, gpu], cpu, soft=True, pinned=pinned, spread=spread)
    assert out[adds[0].op] is gpu and out[adds[3].op] is gpu
    assert out[adds[2].op] is cpu  # (pinned)
    assert all(out[j.op] is cpu for j in joins)
    assert [out[t.op] for t in same] == [gpu, cpu, gpu]
    assert all(out[f.op] is gpu for f in free)  # (the spreader's choice)
    assert {f.op for f in free} <= set(seen) and len(seen) == len(set(seen))
    assert len(seen) == sum(1 for op in ops if not op.device)  # (every op with no request)
    for op in ops:  # the same as each op placed by itself (the spread ones aside)
        alone = place([op], [cpu, gpu], cpu, soft=True, pinned=pinned)
        if op not in seen:
            assert alone[op] is out[op], op.name


def test_soft_placement_keeps_the_job_and_task_of_a_missing_device(caplog):
    """As TF's placer: a device the task lacks relaxes to the task's devices, the requested
    type first (gpu:3 -> that task's gpu:0, a GPU on a CPU-only task -> its CPU); a task or job
    the session lacks falls back to the default device with a warning naming the op."""
    from types import SimpleNamespace

    from hetbed.runtime.placement import place

    names = [
        "/job:ps/replica:0/task:0/device:cpu:0",
        "/job:worker/replica:0/task:0/device:cpu:0",
        "/job:worker/replica:0/task:0/device:gpu:0",
        "/job:worker/replica:0/task:1/device:cpu:0",
    ]
    ps, w0cpu, w0gpu, w1cpu = (
        SimpleNamespace(name=n, kernel_type=n.rsplit(":", 2)[1]) for n in names
    )
    g = hb.Graph()
    with g.as_default():
        x = hb.constant(np.ones(3, np.float32))
        wants = {}
        for spec in (
            "/job:worker/task:0/gpu:3",
            "/job:worker/task:1/gpu:0",
            "/job:worker/task:9/gpu:0",
            "/job:wroker/task:0",
        ):
            with hb.device(spec):
                wants[spec] = x * 2.0
    with caplog.at_level("WARNING", logger="hetbed"):
        out = place(g.get_operations(), [ps, w0cpu, w0gpu, w1cpu], ps, soft=True)
    assert out[wants["/job:worker/task:0/gpu:3"].op] is w0gpu
    assert out[wants["/job:worker/task:1/gpu:0"].op] is w1cpu
    assert out[wants["/job:worker/task:9/gpu:0"].op] is ps
    assert out[wants["/job:wroker/task:0"].op] is ps
    warned = [r.getMessage() for r in caplog.records if "soft placement" in r.getMessage()]
    assert any("task:9" in m for m in warned) and any("wroker" in m for m in warned)
    assert len(warned) == 2
