"""Fidelity of the simulator: calibrate on this machine, then predict the step time of four
models on the real CPU executor and compare with the measured step time.

For each model, traced steps (the op profile) and untraced steps (the measurement) alternate in
one session so that both see the same machine; the simulator then runs the model's graph on one
simulated CPU device with the profiled cost model. The roofline column uses only this machine's
measured GEMM rate, memory bandwidth and dispatch cost. Target (issue): within 5% after
calibration.
"""

from __future__ import annotations

from hetbed.devices.costmodel import Profiled, Roofline
from hetbed.scenarios.models.small import BUILDERS
from hetbed.simulator.calibrate import measure_machine, predict_step, profile_and_measure


def main() -> None:
    perf = measure_machine()
    print("\nfidelity: predicted vs measured step time on this machine (1 CPU device)")
    print(
        f"{'model':10s} {'measured ms':>12s} {'profiled ms':>12s} {'err':>7s} "
        f"{'roofline ms':>12s} {'err':>7s}"
    )
    errs = []
    for name, build in BUILDERS.items():
        table, measured = profile_and_measure(build)
        prof = Profiled(table, Roofline(), overhead_s=perf.launch_overhead_s)
        p = predict_step(build, perf, prof)
        r = predict_step(build, perf, Roofline())
        e, er = (p - measured) / measured, (r - measured) / measured
        errs.append(abs(e))
        print(
            f"{name:10s} {measured * 1e3:12.3f} {p * 1e3:12.3f} {e:+7.1%} {r * 1e3:12.3f} {er:+7.1%}"
        )
    worst = max(errs)
    print(
        f"machine: {perf.peak_flops['float32'] / 1e9:.0f} GFLOP/s float32, "
        f"{perf.memory_bandwidth / 1e9:.1f} GB/s, {perf.launch_overhead_s * 1e6:.2f} us/op dispatch"
    )
    print(f"target: profiled within 5%: worst {worst:.1%}, {'met' if worst <= 0.05 else 'NOT met'}")


if __name__ == "__main__":
    main()
