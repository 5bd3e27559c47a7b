"""TF1's GPUOptions, OptimizerOptions, RewriterConfig and GraphOptions, accepted by
``ConfigProto(gpu_options=..., graph_options=...)`` so TF1 programs that set them run. hetbed
records them and acts on one field: ``RewriterConfig.remapping = OFF`` turns off the fusion of
convolutions and MatMuls with their bias add and ReLU (runtime/fusion.py). GPU memory is managed
by cupy's pool."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class GPUOptions:
    """TF1's ``tf.GPUOptions`` fields (recorded only)."""

    per_process_gpu_memory_fraction: float = 0.0
    allow_growth: bool = False
    allocator_type: str = ""
    deferred_deletion_bytes: int = 0
    visible_device_list: str = ""
    polling_active_delay_usecs: int = 0
    polling_inactive_delay_msecs: int = 0
    force_gpu_compatible: bool = False
    experimental: Any = None

    def __post_init__(self) -> None:
        f = float(self.per_process_gpu_memory_fraction)
        if not 0.0 <= f <= 1.0:
            raise ValueError(
                f"GPUOptions: per_process_gpu_memory_fraction must be in [0, 1], got {f}"
            )
        if not isinstance(self.visible_device_list, str):
            raise TypeError(
                "GPUOptions: visible_device_list is a string such as '0,1', got "
                f"{self.visible_device_list!r}"
            )


@dataclass
class OptimizerOptions:
    """TF1's ``tf.OptimizerOptions`` (recorded only)."""

    L0 = -1  # noqa: N815 - TF's names
    L1 = 0
    DEFAULT = 0
    OFF = -1
    ON_1 = 1
    ON_2 = 2

    do_common_subexpression_elimination: bool = False
    do_constant_folding: bool = False
    max_folded_constant_in_bytes: int = 0
    do_function_inlining: bool = False
    opt_level: int = 0
    global_jit_level: int = 0


@dataclass
class RewriterConfig:
    """TF1's ``RewriterConfig`` toggles (grappler's optimizers). ``remapping`` (the fusion of a
    convolution or MatMul with its bias add and ReLU) is acted on: OFF turns it off; the others
    are recorded."""

    DEFAULT = 0
    ON = 1
    OFF = 2
    AGGRESSIVE = 3

    layout_optimizer: int = 0
    constant_folding: int = 0
    shape_optimization: int = 0
    remapping: int = 0
    arithmetic_optimization: int = 0
    dependency_optimization: int = 0
    loop_optimization: int = 0
    function_optimization: int = 0
    debug_stripper: int = 0
    disable_model_pruning: bool = False
    scoped_allocator_optimization: int = 0
    pin_to_host_optimization: int = 0
    auto_mixed_precision: int = 0
    disable_meta_optimizer: bool = False
    memory_optimization: int = 0
    min_graph_nodes: int = 0


@dataclass
class GraphOptions:
    """TF1's ``tf.GraphOptions`` (recorded only)."""

    enable_recv_scheduling: bool = False
    optimizer_options: OptimizerOptions = field(default_factory=OptimizerOptions)
    build_cost_model: int = 0
    build_cost_model_after: int = 0
    infer_shapes: bool = False
    place_pruned_graph: bool = False
    enable_bfloat16_sendrecv: bool = False
    timeline_step: int = 0
    rewrite_options: Any = field(default_factory=RewriterConfig)
