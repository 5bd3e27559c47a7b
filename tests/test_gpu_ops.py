"""Every op with a GPU kernel, checked on a stand-in GPU (tests/fakecupy).

The CPU op suites (forward vs numpy, gradients vs finite differences, and the summary ops) run again here with every
graph built under ``/gpu:0`` on two strict stand-in GPUs; ops without a GPU kernel fall back to
the CPU (soft placement) with the copies that implies. Each GPU kernel that runs is recorded, and
the last test fails if an op registered for "gpu" ran on a GPU in none of them (so a new op cannot be
skipped). With real cupy and a CUDA device present, ``HETBED_GPU_OPS=real`` runs the same matrix
on the real GPU instead.
"""

from __future__ import annotations

import os
import sys

import pytest
import test_cond
import test_debug_ops
import test_dynamic_rnn
import test_map_scan
import test_ops_image  # WP3
import test_ops_indexing  # WP2
import test_ops_linalg
import test_ops_manip
import test_ops_math
import test_ops_nn
import test_ops_nn_extra  # WP3
import test_ops_random
import test_ops_state
import test_sync_replicas
import test_tensor_array
import test_tensor_array_ragged  # WP8
import test_train_optimizers
import test_while_loop
import test_zoo
from gpu_fixtures import install_fake

from hetbed.devices.gpu import cupy_or_none
from hetbed.runtime.graph import Graph
from hetbed.runtime.registry import OpDef, registered_ops

MODULES = [
    test_ops_math,
    test_ops_manip,
    test_ops_nn,
    test_ops_state,
    test_ops_random,
    test_train_optimizers,
    test_ops_indexing,  # WP2
    test_ops_image,  # WP3
    test_ops_nn_extra,  # WP3
    test_ops_linalg,  # WP1
]
try:  # skips itself (at import) where tensorboard is missing; its ops then go unchecked here
    import test_summary

    MODULES.append(test_summary)
except pytest.skip.Exception:
    pass
#: single tests of other suites that reach the remaining GPU ops (accumulators, samplers)
EXTRA = [
    (test_sync_replicas, "test_accumulator_drops_stale_gradients_and_averages_the_rest"),
    (test_zoo, "test_log_uniform_sampler_unique"),
    (test_zoo, "test_log_uniform_sampler_distribution"),
    (test_cond, "test_values_and_gradients_of_each_branch"),
    (test_cond, "test_training_through_a_cond_matches_numpy"),
    (test_cond, "test_nested_structures_constants_and_case"),
    (test_while_loop, "test_counter_and_product_against_numpy"),
    (test_while_loop, "test_gradients_through_a_loop_match_finite_differences"),
    (test_tensor_array, "test_an_rnn_writing_a_tensor_array_in_a_loop_and_its_gradients"),
    # WP8: TensorArrays of ragged elements (read, gather, concat, split, size and gradients)
    (test_tensor_array_ragged, "test_write_read_concat_and_size_against_numpy"),
    (
        test_tensor_array_ragged,
        "test_gradients_of_write_read_concat_split_match_finite_differences",
    ),
    (test_tensor_array_ragged, "test_a_loop_reading_a_ragged_array_split_outside_it"),
    (test_tensor_array_ragged, "test_a_while_loop_writing_growing_prefixes_then_concat"),
    (test_tensor_array_ragged, "test_a_loop_extending_the_element_it_wrote_before"),
    (test_dynamic_rnn, "test_reverse_sequence_is_numpy_and_its_own_gradient"),
    (test_map_scan, "test_unknown_first_dimension_runs_a_while_loop"),
    # WP4: CheckNumerics, IsNan, IsInf, IsFinite
    (test_debug_ops, "test_check_numerics_identity_and_error_names_op_and_message"),
    (test_debug_ops, "test_check_numerics_gradient_is_checked"),
    (test_debug_ops, "test_is_nan_inf_finite_against_numpy"),
    (test_debug_ops, "test_print_is_identity_and_prints_first_n"),  # CPU-only ops fall back
    (test_debug_ops, "test_py_func_single_and_multiple_outputs"),
]
USE_REAL = os.environ.get("HETBED_GPU_OPS") == "real"

#: tests of CPU-only behaviour not meant for a GPU ("module.py::test_name"); none so far
CPU_ONLY: set[str] = set()

#: GPU-registered ops no op suite reaches here, each with the test that covers it elsewhere
COVERED_ELSEWHERE = {
    "CollectiveAllReduce": "test_gpu.py / test_gpu_standin.py / test_gpu_multi.py",
    "_Send": "every cross-device test here (and test_gpu_multi.py)",
    "_Recv": "every cross-device test here (and test_gpu_multi.py)",
    "Placeholder": "fed in every test: a fed placeholder never runs its kernel",
    "AccumulatorCancelTakes": "test_gpu_multi.py::test_accumulator_on_a_gpu",
}

RAN: set[str] = set()


@pytest.fixture(autouse=True)
def on_gpu(monkeypatch):
    """Graphs default to /gpu:0; the GPU kernels that run are recorded in RAN."""
    if USE_REAL:
        if cupy_or_none() is None:
            pytest.skip("HETBED_GPU_OPS=real needs cupy and a CUDA device")
        undo = None
    else:
        _, undo = install_fake(2)
    orig_state = Graph._state

    def state(self):
        s = self._local
        fresh = not hasattr(s, "scope")
        s = orig_state(self)
        if fresh:
            s.device.append("/gpu:0")
        return s

    orig_find = OpDef.find_kernel

    def find_kernel(self, device_type, dtype, op_name=""):
        k = orig_find(self, device_type, dtype, op_name)
        caller = sys._getframe(1).f_code.co_filename
        if device_type == "gpu" and caller.endswith("executor.py"):
            RAN.add(self.name)  # a node of this op was prepared to run on a GPU
        return k

    monkeypatch.setattr(Graph, "_state", state)
    monkeypatch.setattr(OpDef, "find_kernel", find_kernel)
    yield
    monkeypatch.undo()
    if undo is not None:
        undo()


def _collect():
    for mod in MODULES:
        for name in dir(mod):
            if name.startswith("test_") and callable(getattr(mod, name)):
                key = f"{mod.__name__}.py::{name}"
                if key not in CPU_ONLY:
                    yield f"gpu_{mod.__name__[5:]}__{name[5:]}", getattr(mod, name)
    for mod, name in EXTRA:
        yield f"gpu_{mod.__name__[5:]}__{name[5:]}", getattr(mod, name)


for _name, _fn in _collect():
    globals()["test_" + _name] = _fn


def test_zz_every_gpu_op_ran_on_a_gpu():
    """Every op with a "gpu" kernel ran on a stand-in GPU in the tests above."""
    if len(RAN) < 20:
        pytest.skip("only part of this module ran (select the whole file to check coverage)")
    gpu_ops = {n for n, d in registered_ops().items() if "gpu" in d.kernels}
    missing = sorted(gpu_ops - RAN - set(COVERED_ELSEWHERE))
    assert not missing, f"ops with a GPU kernel that no GPU test ran: {missing}"
