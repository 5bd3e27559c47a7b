"""Precision modes of the simulated devices (float32, TF32, mixed float16/bfloat16): op times
against the roofline's closed form with the catalog's peaks, the casts mixed precision implies,
devices without the mode, errors, and a scenario field."""

import pytest

import hetbed as hb
from hetbed.devices.catalog import load_device
from hetbed.simulator import Cluster, SimSession, sim_value

N = 1024


def _times(device: str, precision: str, build) -> dict:
    c = Cluster(precision=precision)
    c.add_task("worker", 0, cpu=None, gpu=(device, 1))
    g = hb.Graph()
    with g.as_default(), hb.device("/job:worker/task:0/device:gpu:0"):
        fetch, feeds = build()
        init = hb.global_variables_initializer()
        s = SimSession(c, graph=g)
    s.run(init)
    s.run(fetch, feeds)
    ops = s.last_record.ops
    out = dict(zip(ops.type, ops.duration_s))
    out.update(zip(ops.op, ops.duration_s))  # (by name too: several ops of one type)
    return out


def _matmul():
    a = hb.placeholder(hb.float32, [N, N])
    b = hb.placeholder(hb.float32, [N, N])
    return hb.matmul(a, b), {a: sim_value([N, N]), b: sim_value([N, N])}


def test_matrix_products_use_the_modes_peak_where_the_device_has_it():
    a100, v100 = load_device("a100_sxm4_40gb"), load_device("v100_sxm2")
    flops = 2.0 * N**3
    for dev, hw, precision, peak in (
        ("a100_sxm4_40gb", a100, "float32", a100.peak_flops["float32"]),
        ("a100_sxm4_40gb", a100, "tf32", a100.matrix_peak_flops["tensorfloat32"]),
        ("a100_sxm4_40gb", a100, "mixed_float16", a100.matrix_peak_flops["float16"]),
        ("a100_sxm4_40gb", a100, "mixed_bfloat16", a100.matrix_peak_flops["bfloat16"]),
        ("v100_sxm2", v100, "tf32", v100.peak_flops["float32"]),  # no TF32 mode on Volta
        ("v100_sxm2", v100, "mixed_float16", v100.matrix_peak_flops["float16"]),
    ):
        bw = hw.memory_rate
        moved = 3 * N * N * 4 / (2 if precision.startswith("mixed") else 1)
        want = max(flops / peak, moved / bw) + hw.kernel_launch_overhead_s
        got = _times(dev, precision, _matmul)["MatMul"]
        assert got == pytest.approx(want, rel=1e-9), (dev, precision)


def test_mixed_precision_halves_traffic_and_charges_the_casts():
    hw = load_device("a100_sxm4_40gb")
    bw, launch = hw.memory_rate, hw.kernel_launch_overhead_s
    n = 1 << 20

    def build():
        x = hb.placeholder(hb.float32, [n])
        w = hb.Variable(hb.zeros([64, 64]))
        h = hb.placeholder(hb.float32, [32, 64])
        y = hb.matmul(h, w, name="forward")
        opt = hb.train.GradientDescentOptimizer(0.1).minimize(hb.reduce_sum(y))
        return [x + 1.0, opt], {x: sim_value([n]), h: sim_value([32, 64])}

    f32 = _times("a100_sxm4_40gb", "float32", build)
    mixed = _times("a100_sxm4_40gb", "mixed_float16", build)
    # an elementwise add moves half the bytes
    assert mixed["AddV2" if "AddV2" in mixed else "Add"] - launch == pytest.approx(
        (f32["AddV2" if "AddV2" in f32 else "Add"] - launch) / 2, rel=1e-9
    )
    # the update stays float32 and pays the gradient's cast (4 + 2 bytes an element)
    assert mixed["ApplyGradientDescent"] == pytest.approx(
        f32["ApplyGradientDescent"] + 6 * 64 * 64 / bw, rel=1e-9
    )
    # the matmul reading the weight pays its cast to float16
    peak = hw.matrix_peak_flops["float16"]
    want = max(2 * 32 * 64 * 64 / peak, (32 * 64 + 64 * 64 + 32 * 64) * 2 / bw)
    assert mixed["forward"] == pytest.approx(want + 6 * 64 * 64 / bw + launch, rel=1e-9)


def test_set_precision_and_errors():
    c = Cluster()
    c.add_task("worker", 0, cpu=None, gpu=("a100_sxm4_40gb", 1))
    (dev,) = c.devices()
    assert dev.cost_model.precision == "float32"
    c.set_precision("tf32")
    assert dev.cost_model.precision == "tf32"
    with pytest.raises(ValueError, match="precision must be one of"):
        Cluster(precision="fp8")
    with pytest.raises(ValueError, match="mixed_bfloat16"):
        SimSession(c, graph=hb.Graph(), precision="half")


def test_a_scenario_picks_its_precision():
    from hetbed.scenarios.runner import replica_profile
    from hetbed.scenarios.schema import ScenarioError, validate

    def doc(precision):
        return {
            "scenario": {"name": "p"},
            "model": {"name": "mlp", "batch_size": 256, "precision": precision},
            "cluster": {"workers": 1, "worker_device": "a100_sxm4_40gb"},
        }

    times = {p: replica_profile(validate(doc(p))).compute_s for p in ("float32", "tf32")}
    assert times["tf32"] < times["float32"]
    with pytest.raises(ScenarioError, match="model.precision"):
        validate(doc("fp8"))
