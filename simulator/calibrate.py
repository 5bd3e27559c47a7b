"""Calibration: measure this machine so that the simulator predicts what the real executor does.

Two products, both written by ``hetbed calibrate``:

* a catalog device file ``this_machine.toml``: float32 GEMM FLOP/s, streaming memory bandwidth
  and the executor's per-op dispatch cost, measured here (the roofline's three numbers);
* a profile table (``profile.json``): the measured time of every op of the given graphs, keyed by
  op type, dtype, input shapes and attrs, for ``devices.profiled.Profiled``.

The measurements themselves live in machine.py (roofline numbers, ``Measurement``),
messages.py (loopback link, message costs) and contention.py (thread hand-offs, processes
sharing the cores); this module profiles ops, writes the files and re-exports those names.
"""

from __future__ import annotations

import datetime
import os
import statistics
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from hetbed.devices.catalog import LinkSpec
from hetbed.devices.costmodel import MIN_THREADS_WALL_S, DevicePerf, Roofline
from hetbed.devices.fileio import atomic_write
from hetbed.devices.profiled import Profiled, profile_key
from hetbed.devices.simulated import value_shape
from hetbed.runtime.config_protos import GraphOptions, RewriterConfig
from hetbed.runtime.graph import Graph
from hetbed.runtime.session import ConfigProto, Session
from hetbed.runtime.timeline import TracingObserver
from hetbed.runtime.variables import global_variables_initializer

from .contention import (  # noqa: F401
    BYTE_ELEMENTS,
    contention_table,
    message_contention,
    simulate_contention,
    switch_share_fit,
    wake_cost,
)
from .handoffs import CLIENTS, measure_clients, measure_fed, simulate_clients, simulate_fed
from .handoffs import STEP as HANDOFF_STEP
from .machine import (  # noqa: F401  (re-exported: callers import them from here)
    NOISY_LOAD_CORES,
    NOISY_SPREAD,
    LoadMeter,
    Measurement,
    best_of,
    host_cores,
    measure,
    measure_machine,
    repeated,
)
from .messages import (  # noqa: F401
    MESSAGE_STEPS,
    loopback_aggregate,
    loopback_copy_cpu,
    loopback_link,
    message_costs,
)

_COST_FIELDS = (
    "message_s",
    "control_message_s",
    "own_control_message_s",
    "message_latency_s",
    "step_s",
    "message_s_per_byte",
)


def _per_op() -> ConfigProto:
    """A session config that runs each op as itself: no fused convolution or MatMul with its
    bias add and ReLU (runtime/fusion.py), since the simulator prices the ops one by one."""
    return ConfigProto(
        graph_options=GraphOptions(rewrite_options=RewriterConfig(remapping=RewriterConfig.OFF))
    )


class _ShapeTracer(TracingObserver):
    """Records each op's wall time together with its input shapes, and the process's CPU time
    while it ran (``cpu``: (key, CPU seconds per wall second) of ops long enough to tell)."""

    def __init__(self, prepared: Any, feeds: dict):
        super().__init__()
        self.slot_shape: dict[int, tuple] = {
            s: value_shape(feeds[t]) for t, s in prepared.feed_slots.items()
        }
        self.samples: list[tuple[str, float]] = []
        self.work: dict[str, tuple[float, float]] = {}
        self.cpu: list[tuple[str, float]] = []
        self._cpu_start: dict[int, float] = {}
        self._cpu_done: dict[int, float] = {}

    def node_started(self, node: Any) -> None:
        self._cpu_start[node.index] = time.process_time()
        super().node_started(node)

    def node_done(self, node: Any) -> None:
        self._cpu_done[node.index] = time.process_time()  # (the node's end: TracingObserver)
        super().node_done(node)

    def node_finished(self, node: Any, result: Any, released: Any = ()) -> None:
        cpu_end = self._cpu_done.pop(node.index, None)
        if cpu_end is None:
            cpu_end = time.process_time()
        super().node_finished(node, result)
        outs = result if node.n_out > 1 else (result,)
        for s, v in zip(node.outs, outs or ()):
            if s is not None:
                self.slot_shape[s] = value_shape(v)
        ins = [self.slot_shape.get(s, ()) for s in node.ins]
        row = self.rows[-1]
        key = profile_key(node.op, ins)
        self.samples.append((key, row["duration_s"]))
        wall = row["duration_s"]
        if wall >= MIN_THREADS_WALL_S and node.index in self._cpu_start:
            self.cpu.append((key, (cpu_end - self._cpu_start[node.index]) / wall))
        if key not in self.work:
            outs_shapes = [value_shape(v) for v in (outs or ())]
            try:
                c = node.op.op_def.cost_fn(node.op, ins, outs_shapes)
                self.work[key] = (float(c.flops), float(c.bytes_read + c.bytes_written))
            except (TypeError, ValueError, IndexError) as e:  # a rule that cannot price them
                # the entry keeps its measured time but is never scaled to other shapes
                warnings.warn(
                    f"profile: the cost rule of {node.op.type} {node.op.name!r} cannot price "
                    f"input shapes {ins} ({type(e).__name__}: {e}); this entry will not be "
                    "scaled to shapes the profile did not measure",
                    stacklevel=2,
                )


def profile_ops(
    sess: Any,
    fetches: Any,
    feed_dict: dict,
    repeats: int = 10,
    timed_between: int = 0,
    work: dict[str, tuple[float, float]] | None = None,
    threads: dict[str, float] | None = None,
) -> tuple[dict[str, float], list[float]]:
    """Median measured seconds per profile key over ``repeats`` traced steps of ``fetches``.

    With ``timed_between > 0``, that many untraced steps are timed between traced ones, so that
    the measured step times and the op profile see the same machine state; their wall times are
    returned as the second element. ``work``, if given, receives each key's FLOPs and bytes
    (for ``Profiled`` to scale the entries to shapes it did not measure). Build ``sess`` with
    fusion off (``config=_per_op()``): a fused convolution or MatMul carries the time of the
    bias add and ReLU after it, which the simulator prices as ops of their own. ``threads``,
    if given, receives per key the median of the process's CPU seconds per wall second while
    the op ran (ops of at least ``MIN_THREADS_WALL_S``; at least 1, at most the usable CPUs):
    how many cores the kernel kept busy (``Profiled.cores_used``).
    """
    sess.run(fetches, feed_dict)  # warm up caches and kernels
    samples: dict[str, list[float]] = {}
    per_wall: dict[str, list[float]] = {}
    step_times: list[float] = []
    for _ in range(repeats):
        for _ in range(timed_between):
            t = time.perf_counter()
            sess.run(fetches, feed_dict)
            step_times.append(time.perf_counter() - t)
        tracer = sess.run_observed(fetches, feed_dict, _ShapeTracer)
        for key, d in tracer.samples:
            samples.setdefault(key, []).append(d)
        for key, r in tracer.cpu:
            per_wall.setdefault(key, []).append(r)
        if work is not None:
            work.update(tracer.work)
    if threads is not None:
        most = float(host_cores())
        threads.update({k: min(most, max(1.0, statistics.median(v))) for k, v in per_wall.items()})
    return {k: statistics.median(v) for k, v in samples.items()}, step_times


def calibrate_models(
    builders: dict[str, Callable],
    repeats: int = 10,
    work: dict[str, tuple[float, float]] | None = None,
    passes: int = 1,
    apart: list | None = None,
    threads: dict[str, float] | None = None,
) -> dict[str, float]:
    """One profile table over the training steps of ``builders`` (name -> build fn); ``work``
    receives each entry's FLOPs and bytes. With ``passes`` > 1 every model is profiled that
    many times and each entry keeps its fastest pass (a pass slowed by a passing disturbance
    then does not price the op); ``apart`` (a list) receives, per entry measured in several
    passes, the ratio of its slowest pass to its fastest; ``threads`` receives each entry's
    cores kept busy (``profile_ops``) from its fastest pass."""
    table: dict[str, float] = {}
    for build in builders.values():
        g = Graph()
        with g.as_default():
            train, feed = build()
            sess = Session(graph=g, config=_per_op())
            sess.run(global_variables_initializer())
            cores: list[dict[str, float]] = [{} for _ in range(passes)]
            runs = [
                profile_ops(sess, train, feed, repeats, work=work, threads=cores[i])[0]
                for i in range(passes)
            ]
            sess.close()
        for key in runs[0]:
            vals = [r[key] for r in runs if key in r]
            table[key] = min(vals)
            fastest = min((i for i, r in enumerate(runs) if key in r), key=lambda i: runs[i][key])
            if threads is not None and key in cores[fastest]:
                threads[key] = cores[fastest][key]
            if apart is not None and len(vals) > 1 and min(vals) > 0:
                apart.append(max(vals) / min(vals))
    return table


def write_link_toml(
    bandwidth: float,
    latency: float,
    path: str,
    aggregate: float | None = None,
    shares: tuple[float, float] | None = None,
) -> None:
    """A catalog link file ``loopback`` for the measured loopback TCP rate and latency (and the
    rate two concurrent streams reach together, and the CPU a stream takes at each end)."""
    when = datetime.date.today().isoformat()
    src = f"measured by hetbed calibrate on {when}"
    text = "\n".join(
        [
            "# This machine's loopback TCP, as measured by `hetbed calibrate`.",
            'name = "Loopback TCP (measured)"',
            'kind = "loopback"',
            f'bandwidth_bytes_per_s = {{ value = {bandwidth!r}, source = "{src}", note = "one '
            'TCP stream, 32 MiB as one message, less a round trip" }',
            f'latency_s = {{ value = {latency!r}, source = "{src}", note = "half the median round '
            'trip of a 1-byte message" }',
            *(
                [
                    f"aggregate_bandwidth_bytes_per_s = {{ value = {aggregate!r}, "
                    f'source = "{src}", note = "two concurrent streams of 32 MiB messages '
                    'from two threads of one process, together: the best of 4 rounds" }'
                ]
                if aggregate
                else []
            ),
            *(
                [
                    f'sender_cpu_share = {{ value = {shares[0]!r}, source = "{src}", note = '
                    '"CPU seconds of the sending process per second of a stream at '
                    "bandwidth_bytes_per_s: its CPU per byte on a stream of 32 MiB messages "
                    'times that rate" }',
                    f'receiver_cpu_share = {{ value = {shares[1]!r}, source = "{src}", note = '
                    '"CPU seconds of the receiving process per second of such a stream, the '
                    'same way" }',
                ]
                if shares and min(shares) > 0
                else []
            ),
            "",
        ]
    )
    atomic_write(path, text)


def write_machine_toml(perf: DevicePerf, path: str) -> None:
    """A catalog device file for ``perf`` (every number sourced as measured, with the date)."""
    when = datetime.date.today().isoformat()
    src = f"measured by hetbed calibrate on {when}"

    def num(v: float, note: str) -> str:
        return f'{{ value = {v!r}, source = "{src}", note = "{note}" }}'

    def fit(v: float, floor: float, note: str) -> str:
        """A fitted value, or its floor where the fit gave no more: then not a measurement."""
        if v > floor:
            return num(v, note)
        return (
            f'{{ value = {floor!r}, source = "not resolved by hetbed calibrate on {when}: the '
            f'fit gave {v:.3g}, at or below its floor {floor:g} (too small to measure here)", '
            f'note = "{note}" }}'
        )

    text = "\n".join(
        [
            "# This machine, as measured by `hetbed calibrate`.",
            'name = "this machine (measured)"',
            'kind = "cpu"',
            f"memory_bandwidth_bytes_per_s = {num(perf.memory_bandwidth, 'out-of-place float32 add over 8 times the cache (at least 96 MiB)')}",
            *(
                [
                    f"cache_bytes = {num(int(perf.cache_bytes), 'the largest CPU cache (sysfs)')}",
                    f"cache_bandwidth_bytes_per_s = {num(perf.cache_bandwidth, 'out-of-place float32 add over a quarter of the cache')}",
                ]
                if perf.cache_bytes and perf.cache_bandwidth
                else []
            ),
            *(
                [
                    f"fresh_memory_threshold_bytes = {{ value = {int(perf.fresh_threshold_bytes)}, "
                    'source = "glibc mallopt(3): DEFAULT_MMAP_THRESHOLD_MAX on 64-bit", '
                    'note = "the largest threshold above which malloc maps new pages" }',
                    f"fresh_memory_s_per_byte = {fit(perf.fresh_s_per_byte, 1e-15, 'an add into a new 128 MiB array less the same add into a reused one, per byte')}",
                ]
                if perf.fresh_threshold_bytes is not None
                else []
            ),
            f"memory_bytes = {num(int(perf.memory_bytes), 'physical memory')}",
            f"kernel_launch_overhead_s = {num(perf.launch_overhead_s, 'executor dispatch per op')}",
            f"kernel_launch_overhead_clocked_s = {num(perf.clocked_launch_overhead_s or perf.launch_overhead_s, 'executor dispatch per op on the clocked schedule (a chain after a queue dequeue)')}",
            f"cores = {num(host_cores(), 'cores this process may run on')}",
            f"message_overhead_s = {fit(perf.message_s, 1e-9, 'fitted to steps reading 0, 1 and 4 scalars across two processes (message_costs)')}",
            f"control_message_overhead_s = {fit(perf.control_s, 1e-9, 'fitted with message_overhead_s: the RunGraph calls of those steps (message_costs)')}",
            f"own_control_message_overhead_s = {fit(perf.own_control_s, 1e-9, 'fitted with message_overhead_s: the RunGraph calls of those steps from a client to its own task (message_costs)')}",
            f"message_overhead_s_per_byte = {fit(perf.message_s_per_byte, 1e-15, 'fitted to steps reading 1, 8 and 64 MiB across two processes, less the loopback rate (message_costs)')}",
            f"step_overhead_s = {fit(perf.step_s, 1e-9, 'counted in own_control_message_overhead_s: each of those steps makes one call to its own task, and the work of a client per step is not told apart from the ends of that call (message_costs)')}",
            f"message_latency_s = {fit(perf.message_latency_s, 1e-9, 'fitted with message_overhead_s and step_overhead_s (message_costs)')}",
            f"switch_cpu_share = {fit(perf.switch_share, 1e-9, 'fitted to the CPU per step of 1, 2, 4 and 8 client processes stepping against one PS process at once (message_contention), through the simulation of the same runs with the hand-offs it books (contention_table, switch_share_fit)')}",
            f"switch_byte_cpu_share = {fit(perf.switch_byte_share, 1e-9, 'fitted to the CPU per step of 1, 2, 4 and 8 client processes stepping against one PS process at once, each step moving 1 MiB each way (message_contention), through the simulation of the same runs with the switch share fitted before (contention_table, switch_share_fit)')}",
            f"wake_overhead_s = {fit(perf.wake_s, 1e-9, 'two threads of one session ping-ponging an element through two queues, less one thread enqueueing and dequeueing alone, per blocked dequeue (wake_cost); also each interpreter hand-off of a message that finds its task busy with another client (check: simulator/handoffs.py)')}",
            "",
            "[peak_flops]",
            f"float32 = {num(perf.peak_flops['float32'], 'numpy float32 GEMM 1024^3')}",
            f"float64 = {num(perf.peak_flops['float64'], 'half the float32 rate (estimate)')}",
            "",
        ]
    )
    atomic_write(path, text)


def calibrate(
    out_dir: str,
    builders: dict[str, Callable],
    repeats: int = 10,
    progress: Callable[[str], None] = print,
) -> tuple[DevicePerf, Profiled, list[Measurement]]:
    """Measure this machine (each number ``repeats`` times) and profile the training steps of
    ``builders`` (name -> function adding a step to the default graph and returning
    (train_op, feed_dict)); write ``this_machine.toml`` and ``profile.json`` into ``out_dir``.
    Returns the roofline numbers (medians), the profile and the measurements."""
    os.makedirs(out_dir, exist_ok=True)
    progress(f"measuring GEMM rate, memory bandwidth and per-op dispatch cost ({repeats} x) ...")
    perf, ms = measure(repeats)
    for m in ms:
        progress(f"  {m.name}: {m.describe()}")
    progress("measuring loopback TCP (rate and latency) ...")
    links = [loopback_link() for _ in range(max(min(repeats, 5), 1))]
    rate = Measurement("loopback TCP rate", "bytes/s", [r for r, _ in links], None, (1e-9, "GB/s"))
    lat = Measurement("loopback TCP latency", "s", [t for _, t in links], None, (1e6, "us"))
    agg = Measurement(
        "loopback TCP, two streams together",
        "bytes/s",
        [loopback_aggregate() for _ in range(max(min(repeats, 3), 1))],
        None,
        (1e-9, "GB/s"),
    )
    copies = [loopback_copy_cpu() for _ in range(max(min(repeats, 3), 1))]
    send = Measurement("loopback TCP, sender's CPU per byte", "s/B",
                       [a for a, _ in copies], None, (1e9, "ns/B"))  # fmt: skip
    recv = Measurement("loopback TCP, receiver's CPU per byte", "s/B",
                       [b for _, b in copies], None, (1e9, "ns/B"))  # fmt: skip
    # the link books a stream's CPU as shares of a core while it carries the bytes at its rate:
    # per byte, what the stream measured (a share above a whole core cannot be: capped)
    write_link_toml(
        rate.median,
        lat.median,
        os.path.join(out_dir, "loopback.toml"),
        agg.median,
        (min(send.median * rate.median, 1.0), min(recv.median * rate.median, 1.0)),
    )
    for m in (rate, lat, agg, send, recv):
        progress(f"  {m.name}: {m.describe()}")
    progress("measuring the runtime's CPU time per message and per byte (two processes) ...")
    fits = [message_costs(rate.median, lat.median, perf) for _ in range(max(min(repeats, 3), 1))]
    costs = [
        Measurement(name, "s", [getattr(f[0], attr) for f in fits], None, shown)
        for name, attr, shown in (
            ("message CPU time per end", "message_s", (1e6, "us")),
            ("control message CPU time per end", "control_message_s", (1e6, "us")),
            ("own-task control message CPU time per end", "own_control_message_s", (1e6, "us")),
            ("message latency of the runtime", "message_latency_s", (1e6, "us")),
            ("distributed Session.run CPU time per step", "step_s", (1e6, "us")),
            ("message CPU time per byte per end", "message_s_per_byte", (1e9, "ns/byte")),
        )
    ]
    for m in costs:
        progress(f"  {m.name}: {m.describe()}")
    measured, simulated = fits[-1][1], fits[-1][2]
    for name in measured:
        progress(
            f"    check, {name} step: measured {measured[name] * 1e6:.0f} us, simulated with the "
            f"fit {simulated[name] * 1e6:.0f} us ({simulated[name] / measured[name] - 1:+.0%})"
        )
    perf = replace(perf, **{a: c.median for a, c in zip(_COST_FIELDS, costs)})
    # the hand-off first: the switch share is fitted through the simulation of the contention
    # runs, which books a hand-off where a message finds its task busy with another client's
    progress("measuring a blocked op's thread hand-off (two threads of one process) ...")
    woken = Measurement(
        "thread hand-off of a blocked op",
        "s",
        [wake_cost() for _ in range(max(min(repeats, 5), 1))],
        None,
        (1e6, "us"),
    )
    progress(f"  {woken.name}: {woken.describe()}")
    perf = replace(perf, wake_s=woken.median)
    # the contention runs are simulated on the loopback just measured, its copies' CPU shares
    # with it (they take the machine's cores as the bytes cross)
    link = LinkSpec(
        "loopback", "Loopback TCP (measured)", "loopback", rate.median, lat.median,
        aggregate_bandwidth_bytes_per_s=agg.median,
        sender_cpu_share=min(send.median * rate.median, 1.0),
        receiver_cpu_share=min(recv.median * rate.median, 1.0),
    )  # fmt: skip
    shared: list[Measurement] = []
    for field, elements, what in (
        ("switch_share", 1, "small remote step"),
        ("switch_byte_share", BYTE_ELEMENTS, "remote step moving 1 MiB each way"),
    ):
        progress(
            f"measuring the CPU per {what} of 1, 2, 4 and 8 processes stepping against one PS "
            "process ..."
        )
        ps_n: dict[int, list[float]] = {}
        per_n = message_contention(repeats=max(min(repeats, 5), 1), elements=elements, ps_out=ps_n)
        shared += [
            Measurement(f"CPU per {what}, {n} client(s) at once", "s", v, None, (1e6, "us"))
            for n, v in per_n.items()
        ]
        # the byte share is fitted with the switch share in place: what it leaves to the bytes
        table = contention_table(perf, link, clients=tuple(per_n), elements=elements, field=field)
        # one fit per repetition (its runs close in time: a drift of the machine's speed
        # between repetitions cancels out in each one's ratios), then their median
        fits = [
            switch_share_fit({n: v[r] for n, v in per_n.items()}, table)
            for r in range(len(next(iter(per_n.values()))))
        ]
        name = "switch_cpu_share" if field == "switch_share" else "switch_byte_cpu_share"
        shared.append(Measurement(f"{name}, one fit per repetition", "", fits, None))
        for m in shared[-len(per_n) - 1 :]:
            progress(f"  {m.name}: {m.describe()}")
        perf = replace(perf, **{field: statistics.median(fits)})
        # how well the simulators then follow the measurements: the CPU per step of each
        # client count over the fewest's, measured and simulated with the fitted share
        sim_ps: dict[int, float] = {}
        sim = simulate_contention(perf, link, tuple(per_n), elements=elements, ps_out=sim_ps)
        base_n = min(per_n)
        base = statistics.median(per_n[base_n])
        ps_base = statistics.median(ps_n[base_n])
        for n, v in per_n.items():
            if n != base_n and base > 0 and ps_base > 0:
                # (the PS process's part apart: the fit sees the total only)
                progress(
                    f"    check, {n} clients and the PS, {what}: CPU per step "
                    f"{statistics.median(v) / base - 1:+.0%} over {base_n}, simulated "
                    f"{sim[n] / sim[base_n] - 1:+.0%}; the PS's part "
                    f"{statistics.median(ps_n[n]) / ps_base - 1:+.0%}, simulated "
                    f"{sim_ps[n] / sim_ps[base_n] - 1:+.0%}"
                )
    # a check no fit sees: client threads of one process at once, each message on a thread of
    # its own, handed the interpreter when it finds its task busy with another client's
    progress(f"checking {', '.join(map(str, CLIENTS))} client threads of one process at once ...")
    got = measure_clients()
    sim = simulate_clients(perf, (rate.median, lat.median))
    for k in got:
        progress(
            f"    check, {k} client thread(s) at once, {HANDOFF_STEP} step: measured "
            f"{got[k] * 1e6:.0f} us a step, simulated {sim[k] * 1e6:.0f} us "
            f"({sim[k] / got[k] - 1:+.0%})"
        )
    progress("checking a step fed values against one fed almost nothing ...")
    got = measure_fed()
    sim = simulate_fed(perf, (rate.median, lat.median))
    small, big = min(got), max(got)
    progress(
        f"    check, a step fed {big / 2**20:.0f} MiB against one fed {small / 2**10:.0f} KiB "
        f"(its own task): measured {(got[big] - got[small]) * 1e6:+.0f} us, simulated "
        f"{(sim[big] - sim[small]) * 1e6:+.0f} us"
    )
    write_machine_toml(perf, os.path.join(out_dir, "this_machine.toml"))
    ms += [rate, lat, *costs, *shared, woken]
    progress(f"profiling the ops of {', '.join(builders)} (twice, each op's faster pass) ...")
    work: dict[str, tuple[float, float]] = {}
    apart: list[float] = []
    meter = LoadMeter().start()
    threads: dict[str, float] = {}
    table = calibrate_models(builders, repeats, work, passes=2, apart=apart, threads=threads)
    load = meter.stop()
    wide = sum(1 for r in apart if r > 1.25)
    note = f", other load {load:.2f} cores" if load is not None else ""
    flag = (wide > len(apart) // 10) or (load is not None and load > NOISY_LOAD_CORES)
    progress(
        f"  {wide} of {len(apart)} entries differ by more than 25% between the two passes{note}"
        + ("  NOISY (rerun on a quiet machine)" if flag else "")
    )
    prof = Profiled(
        table,
        Roofline(),
        overhead_s=perf.launch_overhead_s,
        device="this_machine",
        work=work,
        threads=threads,
        cache_bytes=perf.cache_bytes,
    )
    prof.save(os.path.join(out_dir, "profile.json"))
    progress(f"  {len(table)} op entries -> {os.path.join(out_dir, 'profile.json')}")
    noisy = [m.name for m in ms if m.noisy] + (["the op profile"] if flag else [])
    if noisy:
        progress(
            f"NOISY: {', '.join(noisy)}: other work disturbed the measurement; rerun when the machine is quiet"
        )
    return perf, prof, ms


def load_builders(specs: Iterable[str]) -> dict[str, Callable]:
    """Training-step builders named ``module:function`` or ``path/to/file.py:function``: each
    function adds a training step to the default graph and returns ``(train_op, feed_dict)``.
    Raises ValueError naming the spec when it cannot be found or is not callable."""
    import importlib
    import importlib.util

    out: dict[str, Callable] = {}
    for spec in specs:
        where, sep, name = spec.rpartition(":")
        if not sep or not where or not name:
            raise ValueError(f"--model {spec!r}: expected module:function or file.py:function")
        try:
            if where.endswith(".py"):
                if not os.path.isfile(where):
                    raise ValueError(f"--model {spec!r}: no file {where}")
                loader = importlib.util.spec_from_file_location(f"_hetbed_model_{len(out)}", where)
                mod = importlib.util.module_from_spec(loader)
                loader.loader.exec_module(mod)
            else:
                mod = importlib.import_module(where)
        except ImportError as e:
            raise ValueError(f"--model {spec!r}: cannot import {where} ({e})") from None
        fn = getattr(mod, name, None)
        if not callable(fn):
            raise ValueError(f"--model {spec!r}: {where} has no function {name!r}")
        out[name] = fn
    return out


def predict_step(
    build: Callable, perf: DevicePerf, cost_model: Any, nic: Any = "loopback"
) -> float:
    """Simulated step time of ``build``'s training step on one device of ``perf`` (a one-task
    cluster: ``nic``, default the catalog's ``loopback`` link, carries nothing unless the
    graph names other tasks)."""
    from .cluster import Cluster
    from .session import SimSession

    c = Cluster(cost_model=cost_model)
    c.add_task("localhost", 0, cpu=perf, nic=nic)
    g = Graph()
    with g.as_default():
        train, feed = build()
        sess = SimSession(c, graph=g)
        sess.run(global_variables_initializer())
        sess.run(train, feed)
        return sess.last_record.step_time_s


def profile_and_measure(
    build: Callable,
    rounds: int = 15,
    steps_per_round: int = 4,
    work: dict[str, tuple[float, float]] | None = None,
) -> tuple[dict[str, float], Measurement]:
    """Profile table of ``build``'s step and its measured step time, interleaved: the
    Measurement holds the median of each round's timed steps (its ``median`` is the step time,
    its spread the rounds' spread) and the other processes' load; ``work`` receives each
    entry's FLOPs and bytes."""
    g = Graph()
    with g.as_default():
        train, feed = build()
        sess = Session(graph=g, config=_per_op())
        sess.run(global_variables_initializer())
        meter = LoadMeter().start()
        table, times = profile_ops(sess, train, feed, rounds, steps_per_round, work)
        load = meter.stop()
        sess.close()
    k = max(steps_per_round, 1)
    rounds_ = [statistics.median(times[i : i + k]) for i in range(0, len(times), k)]
    return table, Measurement("step time", "s", rounds_, load)


def measure_step(build: Callable, steps: int = 40) -> float:
    """Median wall time of one training step of ``build`` on the real executor (the statistic
    the profile table uses too)."""
    g = Graph()
    with g.as_default():
        train, feed = build()
        sess = Session(graph=g, config=_per_op())
        sess.run(global_variables_initializer())
        for _ in range(3):
            sess.run(train, feed)
        times = []
        for _ in range(steps):
            t = time.perf_counter()
            sess.run(train, feed)
            times.append(time.perf_counter() - t)
        return statistics.median(times)


__all__: Iterable[str] = [
    "calibrate",
    "load_builders",
    "loopback_link",
    "message_costs",
    "Measurement",
    "measure",
    "measure_machine",
    "profile_ops",
    "predict_step",
    "measure_step",
]
