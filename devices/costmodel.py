"""Cost models: how long one op takes on one (simulated) device.

``Roofline`` is the default: ``max(flops / peak, bytes / bandwidth) + launch overhead``, with the
op's FLOPs and bytes from its cost rule, the peak chosen by dtype (and the matrix units' peak for
matrix products), and, for systolic-array devices (TPU-like), the peak scaled by how well the
product's dimensions fill the array. ``Profiled`` (``profiled.py``, re-exported here) looks an op
up in a table measured on the real executor (``hetbed calibrate``) and falls back to another
model where the table has no entry.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

MATRIX_OPS = {"MatMul", "BatchMatMul", "Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter"}

#: the precision a simulated float32 model computes in (``Roofline(precision=...)``,
#: ``SimSession(..., precision=...)``, a scenario's ``model.precision``):
#: "float32" as written; "tf32": float32 matrix products and convolutions on the tensor cores'
#: TensorFloat-32 mode where the device has one (its ``matrix_peak_flops.tensorfloat32``), else
#: float32 as before; "mixed_float16" / "mixed_bfloat16": automatic mixed precision with float32
#: master weights: float32 ops compute in the half type (matrix ops on its tensor-core peak,
#: every op moving half the bytes), except the ops that stay in float32 (``FLOAT32_OPS``: the
#: optimizer updates, losses and normalizations); each weight is cast to the half type where a
#: half op reads it and each weight gradient back to float32 for its update (4 + 2 bytes an
#: element, charged to those ops).
PRECISIONS = ("float32", "tf32", "mixed_float16", "mixed_bfloat16")
_HALF = {"mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}
#: ops automatic mixed precision keeps in float32 (TF's deny and clear lists, in short)
FLOAT32_OPS = {
    "SoftmaxCrossEntropyWithLogits",
    "SparseSoftmaxCrossEntropyWithLogits",
    "Softmax",
    "LogSoftmax",
    "Exp",
    "Log",
    "Sum",
    "Mean",
    "FusedBatchNorm",
    "FusedBatchNormGrad",
    "L2Loss",
}
_WEIGHT_READS = {"ReadVariable", "VariableV2"}


#: the share of its cache a sweep may take and still hit it all (``cache_hit`` > 0.9999 with 16
#: ways): where ``hetbed calibrate`` measures the cache's rate
CACHE_ALL_HITS = 0.25
#: ways of a last-level cache (``cache_hit``): 16 on the EPYC and Xeon servers of this
#: project's measurements (Linux sysfs, cpu0/cache/index3/ways_of_associativity)
CACHE_WAYS = 16


def cache_hit(moved: float, cache: float, ways: int = CACHE_WAYS) -> float:
    """The share of a sweep over ``moved`` bytes that hits a set-associative cache of ``cache``
    bytes holding the previous sweep. Pages land in the cache's sets at random, so a set holds
    a Poisson number of the sweep's lines, of mean ways x moved / cache; each set is
    least-recently-used, and keeps none of a cyclic sweep of more lines than its ``ways``
    (each line is evicted before it comes round again) and all of one that fits: the hits are
    the lines in sets that do not overflow, P(Poisson(ways x moved / cache) <= ways - 1) of
    them. So a sweep of a quarter of the cache hits it all (where ``hetbed calibrate`` measures
    its rate), one as large as it about half (0.47 with 16 ways) and one of twice its size
    almost none. Measured on a 2-core EPYC VM (a 16-way 32 MiB L3 shared with other tenants;
    out-of-place float32 add, hits read between its rates at a quarter of the cache and eight
    times it), in two runs an hour apart: 0.85 / 0.86 at half the cache, 0.34 / 0.66 at three
    quarters, 0 / 0.51 at its size, 0 / 0.27 at 1.5 times it, 0 at 2.25 times (this rule:
    0.99, 0.84, 0.47, 0.04, 0). The share min(1, cache / moved) (a cache keeping the last
    bytes seen) gave 1 up to the cache's size, 0.67 at 1.5 times it and 0.44 at 2.25 times."""
    lam = ways * moved / cache
    if lam <= 0.0:
        return 1.0
    if lam > 4.0 * ways + 40.0:
        return 0.0
    term = math.exp(-lam)
    total = term
    for i in range(1, ways):
        term *= lam / i
        total += term
    return min(1.0, total)


def oversubscription(processes: int, cores: int) -> float:
    """How many other processes run on a core between two turns of one, when ``processes``
    runnable ones share ``cores`` cores: (processes - cores) / cores, 0 with a core each. The
    per-event software costs of an oversubscribed host grow in proportion to it
    (``DevicePerf.shared_host``): measured on a 2-core machine, the CPU of a small remote step
    grew by about 2%, 12% and 39% with 3, 5 and 9 processes against 1 at 2, where the share of
    wake-ups finding their core last ran another process (1 - cores / processes) would have it
    saturate (``hetbed calibrate``'s contention steps, five calibrations)."""
    if cores <= 0 or processes <= cores:
        return 0.0
    return (processes - cores) / cores


@dataclass
class DevicePerf:
    """The numbers a cost model needs of a device (usually read from the hardware catalog)."""

    name: str
    peak_flops: dict[str, float]  # dtype name -> FLOP/s of the vector/scalar units
    matrix_flops: dict[str, float] = field(default_factory=dict)  # dtype -> FLOP/s of matrix units
    #: dtype -> FLOP/s of matrix products whose rows the GPU's bulk tile copies cannot load
    unaligned_matrix_flops: dict[str, float] = field(default_factory=dict)
    memory_bandwidth: float = 10e9  # bytes/s
    memory_bytes: float = 16e9
    #: the last-level cache an op's data streams from when it fits (cpu hosts; None: one level)
    cache_bytes: float | None = None
    cache_bandwidth: float | None = None  # bytes/s of a working set that fits the cache
    #: the allocator's fresh pages (cpu hosts): an output array over ``fresh_threshold_bytes``
    #: gets newly mapped pages, which the OS faults in and zeroes at ``fresh_s_per_byte``
    fresh_threshold_bytes: float | None = None
    fresh_s_per_byte: float = 0.0
    launch_overhead_s: float = 5e-6
    systolic: tuple[int, int] | None = None  # (rows, cols) of one matrix unit, TPU-like devices
    multiprocessors: int | None = None  # SMs of a GPU (the tiled GEMM model, gpukernels.py)
    fp32_lanes: int | None = None  # FP32 lanes of a GPU (its issue limit, gpukernels.py)
    warp_issue_per_clock: int | None = None  # warp instructions an SM of a GPU issues a clock
    tile_loads: str | None = None  # "tma": tensor-core GEMM tiles loaded by bulk copies (Hopper)
    clock_hz: float | None = None  # a GPU's clock (its shared memory's rate, gpukernels.py)
    #: (dtype, names) pairs: the convolution algorithms a GPU's library runs (gpuconv.py)
    conv_algorithms: tuple[tuple[str, tuple[str, ...]], ...] | None = None
    cores: int | None = None  # CPU cores of a host (a cpu device's kernels use them all)
    #: CPU time at one end of a message between tasks: fixed, and per payload byte (cpu hosts)
    message_s: float = 0.0
    message_s_per_byte: float = 0.0
    step_s: float = 0.0  # CPU time of a client's distributed Session.run besides its messages
    message_latency_s: float = 0.0  # delay the runtime adds to a message it receives (no CPU)
    #: per-op dispatch of the executor's clocked schedule (every partition of a distributed
    #: step); None: ``launch_overhead_s``. ``clocked()`` gives the perf with it in place.
    clocked_launch_overhead_s: float | None = None
    #: CPU time at one end of a control message (a RunGraph call's request or reply); None:
    #: ``message_s`` (``control_s`` gives the one in force)
    control_message_s: float | None = None
    #: CPU time at one end of a RunGraph call from a client to a task of its own process (both
    #: ends in one process: no wake-up of another); None: ``control_s`` (``own_control_s``)
    own_control_message_s: float | None = None
    #: extra share of the per-event software CPU costs (messages, a step's own, per-op dispatch)
    #: a task pays when its host runs more processes than ``cores`` (``shared_host``)
    switch_share: float = 0.0
    #: extra share of the CPU a message's bytes take (``message_s_per_byte``, and the loopback
    #: copies of a machine's tasks: ``byte_factor``) on such a host
    switch_byte_share: float = 0.0
    #: CPU time of handing a blocked op to its own thread again: a queue dequeue or an
    #: accumulator take that waited is woken by the thread of the step that fed it, and its
    #: step's thread runs again only after this (a hand-off between two threads of a process)
    wake_s: float = 0.0

    def memory_seconds(self, moved: float) -> float:
        """Seconds to move ``moved`` bytes, taken as the op's working set, swept once. With a
        cache (``cache_bytes``, ``cache_bandwidth``) the share ``cache_hit(moved)`` of the bytes
        hits it and moves at its rate, the rest at ``memory_bandwidth``."""
        c, cb = self.cache_bytes, self.cache_bandwidth
        if not c or not cb or moved <= 0:
            return moved / self.memory_bandwidth
        return self.sweep_seconds(moved, cache_hit(moved, c))

    def sweep_seconds(self, moved: float, hit: float) -> float:
        """Seconds to move ``moved`` bytes of which the share ``hit`` come from the cache."""
        cb = self.cache_bandwidth
        if not cb or hit <= 0.0:
            return moved / self.memory_bandwidth
        return moved * (hit / cb + (1.0 - hit) / self.memory_bandwidth)

    def cache_share(self, tasks: int) -> DevicePerf:
        """This perf as one of ``tasks`` processes of one host: the last-level cache holds all
        their working sets, so each is priced with an equal share of it (the first-order model
        of processes sharing a cache; the cores they share are booked apart, ``HostCores``)."""
        if not self.cache_bytes or tasks <= 1:
            return self
        return replace(self, cache_bytes=self.cache_bytes / tasks)

    def shared_host(self, tasks: int) -> DevicePerf:
        """This perf as one of ``tasks`` processes of one host: an equal share of its cache
        (``cache_share``) and, where the processes outnumber its ``cores``, each per-event
        software cost (``message_s``, both control message costs, ``step_s``, ``wake_s`` and the
        per-op dispatch)
        times 1 + switch_share x ``oversubscription(tasks, cores)``: between two turns of a task
        on a core, the other processes queued for it run there and each evicts a share of the
        task's caches and TLB, so a wake-up pays in proportion to how many ran in between
        ((tasks - cores) / cores of them), none with a core each; and the CPU of a message's
        bytes (``message_s_per_byte``) times ``byte_factor(tasks)``: the buffers a message is
        copied from and into come back cold after the other processes' turns (measured on a
        2-core machine: a step moving 1 MiB each way took 7%, 26% and 46% more CPU for its
        bytes with 3, 5 and 9 processes against 2, a scalar step 2% less, 7% and 19% more).
        The FLOPs and bytes of kernels are not scaled (the cores they need are booked,
        ``HostCores``; their cache share is ``cache_share``). Both shares come from ``hetbed
        calibrate`` (steps of 1, 2, 4 and 8 clients against one PS process, of a scalar and of
        1 MiB)."""
        out = self.cache_share(tasks)
        cores = self.cores
        if not (self.switch_share or self.switch_byte_share) or not cores or tasks <= cores:
            return out
        k = 1.0 + self.switch_share * oversubscription(tasks, cores)
        clocked = self.clocked_launch_overhead_s
        control, own = self.control_message_s, self.own_control_message_s
        return replace(
            out,
            message_s=self.message_s * k,
            control_message_s=None if control is None else control * k,
            own_control_message_s=None if own is None else own * k,
            step_s=self.step_s * k,
            wake_s=self.wake_s * k,
            launch_overhead_s=self.launch_overhead_s * k,
            clocked_launch_overhead_s=None if clocked is None else clocked * k,
            message_s_per_byte=self.message_s_per_byte * self.byte_factor(tasks),
        )

    def byte_factor(self, tasks: int) -> float:
        """What the CPU of a message's bytes (its per-byte cost, and the loopback copies between
        tasks of one host) is multiplied by on a host of ``tasks`` processes (``shared_host``):
        1 + switch_byte_share x ``oversubscription(tasks, cores)``; 1 with a core each."""
        if not self.switch_byte_share or not self.cores or tasks <= self.cores:
            return 1.0
        return 1.0 + self.switch_byte_share * oversubscription(tasks, self.cores)

    def fresh_seconds(self, nbytes: float) -> float:
        """Seconds of faulting in and zeroing a new array of ``nbytes``: 0 under the
        allocator's threshold, where freed memory is reused (glibc maps new pages for a request
        of the threshold or more)."""
        t = self.fresh_threshold_bytes
        return nbytes * self.fresh_s_per_byte if t is not None and nbytes >= t else 0.0

    @property
    def control_s(self) -> float:
        c = self.control_message_s
        return self.message_s if c is None else c

    @property
    def own_control_s(self) -> float:
        c = self.own_control_message_s
        return self.control_s if c is None else c

    def clocked(self) -> DevicePerf:
        """This perf as a task of a distributed step runs: ops at the clocked dispatch cost."""
        c = self.clocked_launch_overhead_s
        if c is None or c == self.launch_overhead_s:
            return self
        return replace(self, launch_overhead_s=c, clocked_launch_overhead_s=None)

    def peak(self, dtype: str, matrix: bool) -> float:
        if matrix and dtype in self.matrix_flops:
            return self.matrix_flops[dtype]
        if dtype == "tensorfloat32":  # (not a matrix op, or no TF32 mode: float32 as written)
            dtype = "float32"
        if dtype in self.peak_flops:
            return self.peak_flops[dtype]
        if dtype in ("int32", "int64", "bool"):
            return self.peak_flops.get("float32", min(self.peak_flops.values()))
        if dtype == "float64":
            return self.peak_flops.get("float32", min(self.peak_flops.values())) / 2
        return self.peak_flops.get("float32", min(self.peak_flops.values()))


def perf_from_spec(spec: Any) -> DevicePerf:
    """A DevicePerf from a catalog HardwareSpec (or anything with the same attribute names)."""
    if isinstance(spec, DevicePerf):
        return spec
    return DevicePerf(
        name=spec.key,
        peak_flops=dict(spec.peak_flops),
        matrix_flops=dict(spec.matrix_peak_flops),
        unaligned_matrix_flops=dict(getattr(spec, "unaligned_matrix_peak_flops", None) or {}),
        memory_bandwidth=getattr(spec, "stream_bandwidth_bytes_per_s", None)
        or spec.memory_bandwidth_bytes_per_s,
        memory_bytes=spec.memory_bytes,
        cache_bytes=getattr(spec, "cache_bytes", None),
        cache_bandwidth=getattr(spec, "cache_bandwidth_bytes_per_s", None),
        fresh_threshold_bytes=getattr(spec, "fresh_memory_threshold_bytes", None),
        fresh_s_per_byte=getattr(spec, "fresh_memory_s_per_byte", None) or 0.0,
        launch_overhead_s=spec.kernel_launch_overhead_s,
        systolic=spec.systolic_array_shape,
        multiprocessors=getattr(spec, "multiprocessors", None),
        fp32_lanes=getattr(spec, "fp32_lanes", None),
        warp_issue_per_clock=getattr(spec, "warp_issue_per_clock", None),
        tile_loads=getattr(spec, "tile_loads", None),
        clock_hz=getattr(spec, "clock_hz", None),
        conv_algorithms=getattr(spec, "conv_algorithms", None),
        cores=getattr(spec, "cores", None),
        message_s=getattr(spec, "message_overhead_s", None) or 0.0,
        message_s_per_byte=getattr(spec, "message_overhead_s_per_byte", None) or 0.0,
        step_s=getattr(spec, "step_overhead_s", None) or 0.0,
        message_latency_s=getattr(spec, "message_latency_s", None) or 0.0,
        clocked_launch_overhead_s=getattr(spec, "kernel_launch_overhead_clocked_s", None),
        control_message_s=getattr(spec, "control_message_overhead_s", None),
        own_control_message_s=getattr(spec, "own_control_message_overhead_s", None),
        switch_share=getattr(spec, "switch_cpu_share", None) or 0.0,
        switch_byte_share=getattr(spec, "switch_byte_cpu_share", None) or 0.0,
        wake_s=getattr(spec, "wake_overhead_s", None) or 0.0,
    )


def systolic_efficiency(m: int, k: int, n: int, rows: int, cols: int) -> float:
    """Fraction of a rows x cols systolic array kept busy by an (m x k) @ (k x n) product.

    The array holds a (rows x cols) tile of the weights (k x n): the k and n dimensions are cut
    into tiles, and the last partial tile of each wastes the rest of the array.
    """
    fk = k / (math.ceil(k / rows) * rows)
    fn = n / (math.ceil(n / cols) * cols)
    return max(fk * fn, 1e-3)


def _matmul_dims(op: Any, ins: Sequence[tuple]) -> tuple[int, int, int] | None:
    t = op.type
    if t == "MatMul":
        a, b = ins
        m, k = (a[1], a[0]) if op.attrs.get("transpose_a") else (a[0], a[1])
        n = b[0] if op.attrs.get("transpose_b") else b[1]
        return m, k, n
    if t == "BatchMatMul":
        a, b = ins
        m = int(math.prod(a[:-1]))
        k = a[-2] if op.attrs.get("adj_x") else a[-1]
        n = b[-2] if op.attrs.get("adj_y") else b[-1]
        return m, k, n
    if t == "Conv2D":
        x, f = ins
        kh, kw, ci, co = f
        return int(math.prod(x[:3])), kh * kw * ci, co
    return None


def pricing_dtype(op: Any) -> str:
    """The dtype an op computes in: that of its first floating-point (or complex: its parts')
    operand (inputs first,
    then outputs), else of its first input or output ("float32" for an op with neither). Not
    simply the first input: Conv2DBackpropInput's is an int32 shape, Fill's and OneHot's too."""
    tensors = (*op.inputs, *op.outputs)
    for t in tensors:
        if t.dtype.is_floating or t.dtype.is_complex:  # complex: its parts' (float32, float64)
            return t.dtype.real_dtype.name
    return tensors[0].dtype.name if tensors else "float32"


class CostModel:
    """Interface: ``duration(op, in_shapes, out_shapes, perf) -> seconds`` for concrete shapes;
    optionally ``cores_used(op, in_shapes) -> cores or None``: how many of a CPU host's cores the
    kernel keeps busy (None: the device's rule, all of them unless the kernel is mostly its
    dispatch)."""

    def duration(
        self, op: Any, ins: Sequence[tuple], outs: Sequence[tuple], perf: DevicePerf
    ) -> float:
        raise NotImplementedError(f"{type(self).__name__} needs a duration()")

    def cores_used(self, op: Any, ins: Sequence[tuple]) -> float | None:
        return None


#: a measured profile's kernels shorter than this are not measured for their threads (the
#: process clock's reads and the dispatch around the kernel would be most of it) and run on one
#: core (``Profiled.cores_used``)
MIN_THREADS_WALL_S = 200e-6


ZERO_TIME_OPS = {
    "Const",
    "VariableV2",
    "NoOp",
    "Placeholder",
    "_Send",
    "_Recv",
    "Identity",
    "ReadVariable",
    "StopGradient",
    "Reshape",
    "ReshapeLike",
    "KeepDims",
    "Shape",
}


#: how a GPU's matrix products and convolutions are priced: "peak" at the roofline of the
#: device's peak; "tiled" by the tiled GEMM model (devices/gpukernels.py: tiles, waves, split-K,
#: saturating efficiency, issue and memory limits, fitted to per-kernel benchmarks; convolutions
#: by devices/gpuconv.py on top of it: cuDNN's algorithms, fitted per pass) where the device lists
#: its SMs
GPU_KERNEL_MODELS = ("peak", "tiled")


class Roofline(CostModel):
    """max(flops / peak, bytes / bandwidth) + launch overhead (systolic fill for matrix ops), in
    one of the ``PRECISIONS`` (see there); with ``gpu_kernels="tiled"`` a GPU's matrix products
    and convolutions take the tiled GEMM model's time instead (see ``GPU_KERNEL_MODELS``).
    Raises ValueError for an unknown precision or kernel model."""

    def __init__(self, precision: str = "float32", gpu_kernels: str = "peak"):
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        if gpu_kernels not in GPU_KERNEL_MODELS:
            raise ValueError(f"gpu_kernels must be one of {GPU_KERNEL_MODELS}, got {gpu_kernels!r}")
        self.precision = precision
        self.gpu_kernels = gpu_kernels
        self._gemm_params: dict | None = None
        self._conv_params: dict | None = None

    def duration(
        self, op: Any, ins: Sequence[tuple], outs: Sequence[tuple], perf: DevicePerf
    ) -> float:
        if op.type in ZERO_TIME_OPS:
            return 0.0
        c = op.op_def.cost_fn(op, list(ins), list(outs))
        dtype = pricing_dtype(op)
        matrix = op.type in MATRIX_OPS
        moved = c.bytes_read + c.bytes_written
        extra = 0.0  # bytes of the casts mixed precision implies
        mode = self.precision
        if dtype == "float32" and mode != "float32":
            if mode == "tf32":
                if matrix and "tensorfloat32" in perf.matrix_flops:
                    dtype = "tensorfloat32"
            elif op.type.startswith("Apply"):  # a float32 update of a weight from a half
                extra = 6.0 * _numel(ins[0])  # gradient: the gradient's cast (the var's shape)
            elif op.type.startswith("SparseApply"):
                pass  # float32 update of some rows (their cast is not charged)
            elif op.type not in FLOAT32_OPS:
                dtype = _HALF[mode]
                moved /= 2
                for t, shape in zip(op.inputs, ins):
                    if t.op.type in _WEIGHT_READS:
                        extra += 6.0 * _numel(shape)  # the weight's cast to the half type
        peak = perf.peak(dtype, matrix)
        if matrix and self.gpu_kernels == "tiled" and perf.multiprocessors:
            t = self._tiled(op, ins, outs, perf, dtype, peak, moved)
            if t is not None:
                return t + extra / perf.memory_bandwidth + perf.launch_overhead_s
        if matrix and perf.systolic is not None:
            dims = _matmul_dims(op, ins)
            if dims is not None:
                peak *= systolic_efficiency(*dims, *perf.systolic)
        compute = c.flops / peak if peak > 0 else 0.0
        memory = perf.memory_seconds(moved)
        fresh = fresh_output_seconds(op, outs, perf)
        return max(compute, memory) + fresh + extra / perf.memory_bandwidth + perf.launch_overhead_s

    def _tiled(self, op, ins, outs, perf, dtype, peak, moved) -> float | None:
        from . import gpuconv as gc
        from . import gpukernels as gk

        dims = gk.gemm_dims(op.type, op.attrs, ins, outs)
        if not dims:
            return None
        if self._gemm_params is None:
            self._gemm_params = gk.load_params()
        unit = gk.unit_class(dtype) if dtype in perf.matrix_flops else "cuda_cores"
        p = self._gemm_params[unit]
        share = gk.issue_share(
            unit, perf.fp32_lanes, perf.multiprocessors, perf.warp_issue_per_clock
        )
        layout = gk.op_layout(
            op.type, op.attrs, unit, dtype, perf.tile_loads, perf.clock_hz
        )  # (transposed operands read slower)
        if op.type in gc.PASS_OF_OP:  # cuDNN's algorithms, the pass's fitted efficiency
            if self._conv_params is None:
                self._conv_params = gc.load_params()
            sh = gc.op_shape(op.type, op.attrs, ins, outs)
            # (TF32 passes may run float32 kernels on the CUDA cores: gc.ALSO_RUNS_AS)
            peaks = {dtype: peak}
            other = gc.ALSO_RUNS_AS.get(dtype)
            if other is not None:
                peaks[other] = perf.peak(other, True)
            shares = {
                u: gk.issue_share(u, perf.fp32_lanes, perf.multiprocessors,
                                  perf.warp_issue_per_clock)
                for u in self._gemm_params
            }  # fmt: skip
            t, _ = gc.pass_seconds(gc.PASS_OF_OP[op.type], sh, dtype, peaks,
                                   perf.memory_bandwidth, perf.multiprocessors, self._gemm_params,
                                   self._conv_params, shares, perf.tile_loads,
                                   dict(perf.conv_algorithms or ()), unit,
                                   perf.clock_hz)  # fmt: skip
            return t
        return gk.gemm_seconds(*dims, moved, peak, perf.memory_bandwidth, perf.multiprocessors, p,
                               gk.TILES[unit], share, layout,
                               unaligned_peak=perf.unaligned_matrix_flops.get(dtype))  # fmt: skip


def _numel(shape: Any) -> float:
    return float(math.prod(shape)) if shape is not None else 0.0


#: ops that write into an existing buffer (a variable, an accumulator) rather than a new array
_IN_PLACE = ("Apply", "SparseApply", "Resource", "Assign", "Scatter", "Accumulator")


def fresh_output_seconds(op: Any, outs: Sequence[tuple], perf: DevicePerf) -> float:
    """Seconds ``op``'s new output arrays take to fault in (``DevicePerf.fresh_seconds``); ops
    that update a buffer in place allocate none, nor do views of an input (a kernel that
    ``aliases_input``: a broadcast, a reshape)."""
    if perf.fresh_threshold_bytes is None or op.type.startswith(_IN_PLACE) or _views(op):
        return 0.0
    total = 0.0
    for t, shape in zip(op.outputs, outs):
        size = getattr(t.dtype, "size", 0) or 0
        total += perf.fresh_seconds(_numel(shape) * size)
    return total


def _views(op: Any) -> bool:
    """Whether ``op``'s kernels return views of an input (``Kernel.aliases_input``)."""
    kernels = getattr(getattr(op, "op_def", None), "kernels", None)
    if not kernels:
        return False
    return any(k.aliases_input for ks in kernels.values() for k in ks)


def roofline_seconds(
    flops: float, moved: float, perf: DevicePerf, dtype: str = "float32", matrix: bool = False
) -> float:
    """The roofline's time of ``flops`` and ``moved`` bytes on ``perf`` (no launch cost)."""
    peak = perf.peak(dtype, matrix)
    return max(flops / peak if peak > 0 else 0.0, perf.memory_seconds(moved))


#: names of ``profiled.py`` (the measured cost model) this module still answers for
_PROFILED_NAMES = ("Profiled", "profile_key", "affine_fit")


def __getattr__(name: str) -> Any:
    """``costmodel.Profiled`` and the other names of ``profiled.py`` (imported when first asked
    for: that module imports this one)."""
    if name in _PROFILED_NAMES:
        from . import profiled

        return getattr(profiled, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
