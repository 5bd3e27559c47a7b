"""Fidelity of the simulator: calibrate on this machine, then predict the step time of four
models on the real CPU executor and compare with the measured step time.

For each model, traced steps (the op profile) and untraced steps (the measurement) alternate in
one session so that both see the same machine; the simulator then runs the model's graph on one
simulated CPU device with the profiled cost model. The roofline column uses only this machine's
measured GEMM rate, memory bandwidth and dispatch cost.

In sample vs out of sample: the "profiled" column predicts the very step that was profiled
(same model, same batch: every op's time was measured, so it checks the simulator's schedule,
not its cost model). The "other batch" columns predict the same models at half and twice the
profiled batch, shapes the profile never saw: each op is priced from its family's measured
entries scaled by its FLOPs and bytes (``Profiled``'s affine fit), and each is measured here for
the comparison. Targets: in sample within 5%; out of sample within 15% (median over the eight
predictions).
"""

from __future__ import annotations

import functools
import statistics

from hetbed.devices.costmodel import Roofline
from hetbed.devices.profiled import Profiled
from hetbed.scenarios.models.small import BUILDERS
from hetbed.simulator.calibrate import (
    measure_machine,
    measure_step,
    predict_step,
    profile_and_measure,
)

DEFAULT_BATCH = {"mlp": 128, "cnn": 32, "embedding": 256, "lstm": 64}


def main() -> None:
    perf = measure_machine()
    print("\nfidelity: predicted vs measured step time on this machine (1 CPU device)")
    print(
        f"{'model':10s} {'measured ms':>12s} {'profiled ms':>12s} {'err':>7s} "
        f"{'roofline ms':>12s} {'err':>7s}"
    )
    errs, out_errs, out_rows = [], [], []
    for name, build in BUILDERS.items():
        work: dict = {}
        table, step = profile_and_measure(build, work=work)
        measured = step.median
        prof = Profiled(table, Roofline(), overhead_s=perf.launch_overhead_s, work=work)
        p = predict_step(build, perf, prof)
        r = predict_step(build, perf, Roofline())
        e, er = (p - measured) / measured, (r - measured) / measured
        errs.append(abs(e))
        print(
            f"{name:10s} {measured * 1e3:12.3f} {p * 1e3:12.3f} {e:+7.1%} {r * 1e3:12.3f} {er:+7.1%}"
            + ("  NOISY: " + step.describe(1e3, "ms") if step.noisy else "")
        )
        for factor in (0.5, 2.0):
            batch = int(DEFAULT_BATCH[name] * factor)
            other = functools.partial(build, batch=batch)
            m = measure_step(other)
            scaled = Profiled(table, Roofline(), overhead_s=perf.launch_overhead_s, work=work)
            q = predict_step(other, perf, scaled)
            out_errs.append(abs(q - m) / m)
            out_rows.append((name, batch, m, q, (q - m) / m, scaled.scaled, scaled.misses))
    print("\nout of sample: the same models at batch sizes the profile never saw")
    print(
        f"{'model':10s} {'batch':>6s} {'measured ms':>12s} {'predicted ms':>13s} {'err':>7s} "
        f"{'ops scaled':>11s}"
    )
    for name, batch, m, q, e, n_scaled, n_miss in out_rows:
        print(
            f"{name:10s} {batch:6d} {m * 1e3:12.3f} {q * 1e3:13.3f} {e:+7.1%} "
            f"{n_scaled:5d}/{n_miss:<5d}"
        )
    worst = max(errs)
    print(
        f"machine: {perf.peak_flops['float32'] / 1e9:.0f} GFLOP/s float32, "
        f"{perf.memory_bandwidth / 1e9:.1f} GB/s, {perf.launch_overhead_s * 1e6:.2f} us/op dispatch"
    )
    print(
        f"target: profiled within 5% (in sample): worst {worst:.1%}, "
        f"{'met' if worst <= 0.05 else 'NOT met'}"
    )
    med = statistics.median(out_errs)
    print(
        f"target: other batch sizes within 15% (out of sample, median of {len(out_errs)}): "
        f"{med:.1%} (worst {max(out_errs):.1%}), {'met' if med <= 0.15 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
