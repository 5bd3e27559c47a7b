"""``hb.train``: TF1's ``tf.train`` namespace (optimizers, Saver, global step, schedules)."""

from typing import Any

from hetbed.runtime.device_setter import (
    GreedyLoadBalancingStrategy,
    RoundRobinStrategy,
    byte_size_load_fn,
    replica_device_setter,
)
from hetbed.runtime.distributed import ClusterSpec, Server
from hetbed.runtime.distributed.launcher import cluster_from_env
from hetbed.runtime.train import queue_runner
from hetbed.runtime.train.checkpoint import (
    CheckpointReader,
    CheckpointState,
    checkpoint_exists,
    get_checkpoint_state,
    init_from_checkpoint,
    latest_checkpoint,
    list_variables,
    load_checkpoint,
    load_variable,
    recover_checkpoint,
    update_checkpoint_state,
)
from hetbed.runtime.train.input import (
    batch,
    batch_join,
    input_producer,
    limit_epochs,
    range_input_producer,
    shuffle_batch,
    shuffle_batch_join,
    slice_input_producer,
)
from hetbed.runtime.train.monitored import (
    CheckpointSaverHook,
    ChiefSessionCreator,
    MonitoredSession,
    MonitoredTrainingSession,
    Scaffold,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    SingularMonitoredSession,
    StepCounterHook,
    StopAtStepHook,
    WorkerSessionCreator,
)
from hetbed.runtime.train.moving_averages import ExponentialMovingAverage
from hetbed.runtime.train.optimizers import (
    AdagradOptimizer,
    AdamOptimizer,
    GradientDescentOptimizer,
    LazyAdamOptimizer,
    MomentumOptimizer,
    Optimizer,
    RMSPropOptimizer,
)
from hetbed.runtime.train.queue_runner import (
    Coordinator,
    LooperThread,
    QueueRunner,
    add_queue_runner,
    start_queue_runners,
)
from hetbed.runtime.train.saver import Saver, export_meta_graph, import_meta_graph
from hetbed.runtime.train.sync_replicas import SyncReplicasOptimizer
from hetbed.runtime.train.training_util import (
    assert_global_step,
    cosine_decay,
    cosine_decay_restarts,
    create_global_step,
    exponential_decay,
    get_global_step,
    get_or_create_global_step,
    global_step,
    inverse_time_decay,
    natural_exp_decay,
    piecewise_constant,
    polynomial_decay,
)


def write_graph(graph_or_graph_def: Any, logdir: str, name: str, as_text: bool = True) -> str:
    """TF1's ``tf.train.write_graph``: the graph as TensorFlow's ``GraphDef`` proto (text, or
    binary with ``as_text=False``) at ``logdir/name``, written atomically; returns the path.
    A hetbed graph gives ``Graph.as_graph_def()`` (names, types, inputs, devices)."""
    import os

    from google.protobuf import text_format

    from hetbed.devices.fileio import atomic_write

    gd = graph_or_graph_def
    if not hasattr(gd, "SerializeToString"):
        gd = gd.as_graph_def()
    os.makedirs(logdir, exist_ok=True)
    path = os.path.join(logdir, name)
    data = text_format.MessageToString(gd).encode() if as_text else gd.SerializeToString()
    atomic_write(path, data)
    return path


def checkpoints_iterator(
    checkpoint_dir: str,
    min_interval_secs: float = 0,
    timeout: float | None = None,
    timeout_fn: Any = None,
) -> Any:
    """TF1's: yields each new latest checkpoint of ``checkpoint_dir`` as it appears (an
    evaluation loop), waiting at least ``min_interval_secs`` between them; after ``timeout``
    seconds without a new one it ends, or asks ``timeout_fn()`` whether to (True: end)."""
    import time

    last = None
    while True:
        deadline = None if timeout is None else time.monotonic() + timeout
        path = latest_checkpoint(checkpoint_dir)
        while path is None or path == last:
            if deadline is not None and time.monotonic() > deadline:
                break
            time.sleep(0.1 if timeout is None else min(0.1, max(timeout, 0.01)))
            path = latest_checkpoint(checkpoint_dir)
        if path is None or path == last:
            if timeout_fn is None or timeout_fn():
                return
            continue
        start = time.monotonic()
        last = path
        yield path
        wait = min_interval_secs - (time.monotonic() - start)
        if wait > 0:
            time.sleep(wait)


def NewCheckpointReader(filepattern: str) -> CheckpointReader:  # noqa: N802 (TF1's name)
    """TF1's ``tf.train.NewCheckpointReader``: a ``CheckpointReader`` of ``filepattern``."""
    return CheckpointReader(filepattern)


piecewise_constant_decay = piecewise_constant  # (TF1's other name)

__all__ = [
    "Coordinator",
    "LooperThread",
    "QueueRunner",
    "add_queue_runner",
    "batch",
    "batch_join",
    "input_producer",
    "limit_epochs",
    "queue_runner",
    "range_input_producer",
    "shuffle_batch",
    "shuffle_batch_join",
    "slice_input_producer",
    "start_queue_runners",
    "ClusterSpec",
    "Server",
    "cluster_from_env",
    "CheckpointSaverHook",
    "ChiefSessionCreator",
    "MonitoredSession",
    "MonitoredTrainingSession",
    "SingularMonitoredSession",
    "WorkerSessionCreator",
    "Scaffold",
    "StepCounterHook",
    "SessionRunArgs",
    "SessionRunContext",
    "SessionRunHook",
    "SessionRunValues",
    "StopAtStepHook",
    "GreedyLoadBalancingStrategy",
    "RoundRobinStrategy",
    "byte_size_load_fn",
    "replica_device_setter",
    "AdagradOptimizer",
    "AdamOptimizer",
    "CheckpointReader",
    "CheckpointState",
    "GradientDescentOptimizer",
    "LazyAdamOptimizer",
    "MomentumOptimizer",
    "NewCheckpointReader",
    "Optimizer",
    "RMSPropOptimizer",
    "ExponentialMovingAverage",
    "Saver",
    "export_meta_graph",
    "import_meta_graph",
    "SyncReplicasOptimizer",
    "assert_global_step",
    "checkpoint_exists",
    "create_global_step",
    "cosine_decay",
    "cosine_decay_restarts",
    "exponential_decay",
    "get_checkpoint_state",
    "init_from_checkpoint",
    "get_global_step",
    "get_or_create_global_step",
    "global_step",
    "inverse_time_decay",
    "latest_checkpoint",
    "recover_checkpoint",
    "list_variables",
    "load_checkpoint",
    "load_variable",
    "natural_exp_decay",
    "piecewise_constant",
    "piecewise_constant_decay",
    "polynomial_decay",
    "update_checkpoint_state",
    "write_graph",
    "checkpoints_iterator",
]

# ---- WP5: string tensors and file readers ----
from hetbed.runtime.ops.readers import string_input_producer  # noqa: E402, F401
from hetbed.runtime.ops.strings import match_filenames_once  # noqa: E402, F401

# ---- WP4: more optimizers and hooks ----
from hetbed.runtime.train.hooks_extra import (  # noqa: E402
    FeedFnHook,
    LoggingTensorHook,
    NanLossDuringTrainingError,
    NanTensorHook,
    SecondOrStepTimer,
)
from hetbed.runtime.train.optimizers_extra import (  # noqa: E402
    AdadeltaOptimizer,
    FtrlOptimizer,
    ProximalGradientDescentOptimizer,
)
from hetbed.runtime.train.supervisor import SummarySaverHook, Supervisor  # noqa: E402

__all__ += [
    "AdadeltaOptimizer",
    "FeedFnHook",
    "FtrlOptimizer",
    "LoggingTensorHook",
    "NanLossDuringTrainingError",
    "NanTensorHook",
    "ProximalGradientDescentOptimizer",
    "SecondOrStepTimer",
    "SummarySaverHook",
    "Supervisor",
]
