"""Cost models: how long one op takes on one (simulated) device.

``Roofline`` is the default: ``max(flops / peak, bytes / bandwidth) + launch overhead``, with the
op's FLOPs and bytes from its cost rule, the peak chosen by dtype (and the matrix units' peak for
matrix products), and, for systolic-array devices (TPU-like), the peak scaled by how well the
product's dimensions fill the array. ``Profiled`` looks an op up in a table measured on the real
executor (``hetbed calibrate``) and falls back to another model where the table has no entry.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .fileio import atomic_write

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


@dataclass
class DevicePerf:
    """The numbers a cost model needs of a device (usually read from the hardware catalog)."""

    name: str
    peak_flops: dict[str, float]  # dtype name -> FLOP/s of the vector/scalar units
    matrix_flops: dict[str, float] = field(default_factory=dict)  # dtype -> FLOP/s of matrix units
    memory_bandwidth: float = 10e9  # bytes/s
    memory_bytes: float = 16e9
    launch_overhead_s: float = 5e-6
    systolic: tuple[int, int] | None = None  # (rows, cols) of one matrix unit, TPU-like devices

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
        memory_bandwidth=spec.memory_bandwidth_bytes_per_s,
        memory_bytes=spec.memory_bytes,
        launch_overhead_s=spec.kernel_launch_overhead_s,
        systolic=spec.systolic_array_shape,
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
    """The dtype an op computes in: that of its first floating-point operand (inputs first,
    then outputs), else of its first input or output ("float32" for an op with neither). Not
    simply the first input: Conv2DBackpropInput's is an int32 shape, Fill's and OneHot's too."""
    tensors = (*op.inputs, *op.outputs)
    for t in tensors:
        if t.dtype.is_floating:
            return t.dtype.name
    return tensors[0].dtype.name if tensors else "float32"


class CostModel:
    """Interface: ``duration(op, in_shapes, out_shapes, perf) -> seconds`` for concrete shapes."""

    def duration(
        self, op: Any, ins: Sequence[tuple], outs: Sequence[tuple], perf: DevicePerf
    ) -> float:
        raise NotImplementedError(f"{type(self).__name__} needs a duration()")


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


class Roofline(CostModel):
    """max(flops / peak, bytes / bandwidth) + launch overhead (systolic fill for matrix ops), in
    one of the ``PRECISIONS`` (see there). Raises ValueError for an unknown precision."""

    def __init__(self, precision: str = "float32"):
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        self.precision = precision

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
        if matrix and perf.systolic is not None:
            dims = _matmul_dims(op, ins)
            if dims is not None:
                peak *= systolic_efficiency(*dims, *perf.systolic)
        compute = c.flops / peak if peak > 0 else 0.0
        memory = moved / perf.memory_bandwidth
        return max(compute, memory) + extra / perf.memory_bandwidth + perf.launch_overhead_s


def _numel(shape: Any) -> float:
    return float(math.prod(shape)) if shape is not None else 0.0


def profile_key(op: Any, ins: Sequence[tuple]) -> str:
    """Table key: op type, dtype, input shapes and the attrs that change the work done."""
    dtype = (
        op.inputs[0].dtype.name if op.inputs else (op.outputs[0].dtype.name if op.outputs else "")
    )
    attrs = {
        k: v
        for k, v in sorted(op.attrs.items())
        if isinstance(v, (bool, int, str, tuple))
        and k not in ("seed", "key", "tensor_name", "group_key")
    }
    return json.dumps([op.type, dtype, [list(s) for s in ins], attrs], default=str)


class Profiled(CostModel):
    """Measured seconds per (op type, dtype, input shapes, attrs); ``fallback`` for the rest.

    ``overhead_s`` is added per op: the executor's own dispatch cost, measured by calibration.
    """

    def __init__(
        self,
        table: dict[str, float],
        fallback: CostModel | None = None,
        overhead_s: float = 0.0,
        device: str = "",
    ):
        self.table = table
        self.fallback = fallback or Roofline()
        self.overhead_s = overhead_s
        self.device = device
        self.hits = 0
        self.misses = 0

    def duration(
        self, op: Any, ins: Sequence[tuple], outs: Sequence[tuple], perf: DevicePerf
    ) -> float:
        t = self.table.get(profile_key(op, ins))
        if t is not None:
            self.hits += 1
            return t + self.overhead_s
        self.misses += 1
        return self.fallback.duration(op, ins, outs, perf) + self.overhead_s

    def save(self, path: str) -> None:
        """Write the table as JSON (atomically)."""
        doc = {
            "format": "hetbed-profile",
            "version": 1,
            "device": self.device,
            "overhead_s": self.overhead_s,
            "table": self.table,
        }
        atomic_write(path, json.dumps(doc, indent=0, sort_keys=True))

    @classmethod
    def load(cls, path: str, fallback: CostModel | None = None) -> Profiled:
        """Read a table written by ``save``; raises ValueError naming the file when malformed."""
        try:
            with open(path) as f:
                doc = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not a profile table ({e})") from None
        if doc.get("format") != "hetbed-profile" or doc.get("version") != 1:
            raise ValueError(f"{path}: not a hetbed-profile version 1 file")
        return cls(
            dict(doc["table"]), fallback, float(doc.get("overhead_s", 0.0)), doc.get("device", "")
        )
