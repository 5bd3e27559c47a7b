"""``hb.train.SyncReplicasOptimizer``: synchronous data-parallel training with backup workers.

As in TensorFlow 1.x (and the OSDI paper, section 4.4): every worker replica computes gradients on
its own batch and pushes them into one ``ConditionalAccumulator`` per variable, colocated with the
variable, tagged with the worker's ``local_step``; a gradient whose local step is behind the
accumulator's global step is stale and dropped. The chief takes the average of
``replicas_to_aggregate`` gradients per variable, applies it with the wrapped optimizer,
increments the global step and puts ``max(total_num_replicas, replicas_to_aggregate)`` tokens
(the new global step) into the ``sync_token_q`` queue, colocated with the global step. A worker's
train op applies its gradients, then dequeues a token into its ``local_step``, so it cannot start
its next step before the aggregate it contributed to (or a later one) has been applied. With
``total_num_replicas > replicas_to_aggregate`` the slowest workers are backups whose late
gradients are dropped.

What hetbed does like TensorFlow: the same graph (accumulators with ``shared_name``
``<var>/grad_accum``, the token queue ``sync_token_q``, the local step variable
``sync_rep_local_step`` in LOCAL_VARIABLES), the same train op (apply, then a control dependency
on the token dequeue, then ``assign(local_step, token)``), the same ``chief_init_op``,
``local_step_init_op``, ``ready_for_local_init_op`` and ``get_init_tokens_op``, and the chief's
"sync op" (take, apply, increment, enqueue) running in its own thread beside the chief's training
loop (``get_chief_queue_runner()``, started by the hook).

As in TF, tokens and gradients are not tied to a worker: a fast worker may contribute several
gradients to one update, and when a worker dies the others fill in. Without backup workers a
dead worker can still leave the others waiting at the barrier (its token taken, its gradient
missing); with ``ConfigProto.operation_timeout_in_ms`` their step then fails with
DeadlineExceededError, and running it again pushes a fresh gradient that completes the update.
A dead chief stops all updates until it is restarted (it restores its latest checkpoint, or
initializes, runs ``chief_init_op`` and the init tokens again, and the workers go on).

Where it differs: the chief's runner is a small thread object, not a ``tf.train.QueueRunner``
(there are no queue runners or coordinators here); stopping it fails the waiting takes with
AbortedError through ``AccumulatorCancelTakes`` (TF cancels them when the session closes). A
take that runs past the operation timeout is withdrawn and the runner waits again (TF's runner
would report the error to the coordinator and stop training); any other error that ends the
runner fails the chief's next step (so MonitoredTrainingSession recovers from Aborted and
Unavailable). On a session recreated after such an error, the hook retires the old runner,
cancels its waiting take and starts a new one. When the chief's session ends, the hook enqueues
``total_num_replicas`` more tokens so that workers waiting at the barrier finish their step and
see the final global step, then closes the token queue: a worker's next step fails with
OutOfRangeError, a clean stop for MonitoredTrainingSession (TF leaves them blocked).
IndexedSlices gradients (embedding lookups) go into a SparseConditionalAccumulator, as in TF:
only their rows cross to the PS, averaged row by row; ``variable_averages`` is not supported.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import DeadlineExceededError
from ..gradients import IndexedSlices
from ..graph import GraphKeys, Operation, Tensor
from ..ops import state
from ..ops.control import group, no_op
from ..ops.data_flow import ConditionalAccumulator, FIFOQueue
from ..ops.manip import fill
from ..ops.sparse_accumulator import SparseConditionalAccumulator
from ..registry import apply
from ..threadname import name_this_thread
from ..variables import Variable, global_variables, initialized_flags
from .monitored import SessionRunHook
from .optimizers import Optimizer, _on

_log = logging.getLogger("hetbed.train")


class SyncReplicasOptimizer(Optimizer):
    """Wraps ``opt`` so that ``replicas_to_aggregate`` gradients are averaged per update.

    ``total_num_replicas`` (default: ``replicas_to_aggregate``) is the number of worker replicas;
    more replicas than gradients to aggregate means backup workers. Raises ValueError for a
    non-positive count and NotImplementedError for ``variable_averages``.
    """

    def __init__(
        self,
        opt: Optimizer,
        replicas_to_aggregate: int,
        total_num_replicas: int | None = None,
        variable_averages: Any = None,
        variables_to_average: Any = None,
        use_locking: bool = False,
        name: str = "sync_replicas",
    ):
        super().__init__(use_locking, name)
        if total_num_replicas is None:
            total_num_replicas = replicas_to_aggregate
        if replicas_to_aggregate < 1 or total_num_replicas < 1:
            raise ValueError(
                f"SyncReplicasOptimizer: replicas_to_aggregate ({replicas_to_aggregate}) and "
                f"total_num_replicas ({total_num_replicas}) must be >= 1"
            )
        if variable_averages is not None or variables_to_average is not None:
            raise NotImplementedError(
                "SyncReplicasOptimizer: variable_averages is not supported; apply "
                "ExponentialMovingAverage yourself after the train op"
            )
        self._opt = opt
        self._replicas_to_aggregate = int(replicas_to_aggregate)
        self._total_num_replicas = int(total_num_replicas)
        self._tokens_per_step = max(self._total_num_replicas, self._replicas_to_aggregate)
        self._gradients_applied = False
        self._global_step: Any = None
        self._sync_token_queue: FIFOQueue | None = None
        self._accumulators: list[ConditionalAccumulator] = []
        self._chief_sync_op: Operation | None = None
        self._cancel_sync_op: Operation | None = None
        self._local_step: Variable | None = None
        self.local_step_init_op: Operation | None = None
        self.chief_init_op: Operation | None = None
        #: one IsVariableInitialized flag per global variable (as hb's report_uninitialized_...)
        self.ready_for_local_init_op: list[Tensor] | None = None
        self._ready_vars: list[Variable] = []

    def compute_gradients(self, *args: Any, **kwargs: Any) -> list:
        """The wrapped optimizer's ``compute_gradients``."""
        return self._opt.compute_gradients(*args, **kwargs)

    def apply_gradients(
        self, grads_and_vars: Iterable, global_step: Any = None, name: str | None = None
    ) -> Operation:
        """Build the accumulators, the chief's sync op and this worker's train op; return it.

        The train op pushes this worker's gradients (tagged with its local step) and then waits
        for a token, which becomes its next local step. Raises ValueError without a global step
        or without any gradient.
        """
        if global_step is None:
            raise ValueError("SyncReplicasOptimizer.apply_gradients: global_step is required")
        pairs = [(g, v) for g, v in grads_and_vars]
        if not any(g is not None for g, _ in pairs):
            names = ", ".join(v.op.name for _, v in pairs) or "none"
            raise ValueError(f"SyncReplicasOptimizer: no gradients for any variable: {names}")
        gs_ref = state._ref_of(global_step)
        graph = gs_ref.graph
        self._global_step = global_step
        with graph.as_default():
            with graph.control_dependencies(None):
                anchor = no_op(name="sync_rep_local_anchor")
                with graph.colocate_with(anchor):
                    self._local_step = Variable(
                        _zero(gs_ref.dtype),
                        trainable=False,
                        collections=[GraphKeys.LOCAL_VARIABLES],
                        name="sync_rep_local_step",
                    )
                self.local_step_init_op = state.assign(self._local_step, _read(gs_ref)).op
                self._ready_vars = global_variables()
                self.ready_for_local_init_op = initialized_flags(self._ready_vars)
            local_step = self._local_step.value()
            push_ops, averaged, var_list = [], [], []
            with graph.name_scope(name or self._name):
                for g, v in pairs:
                    var_list.append(v)
                    if g is None:
                        averaged.append(None)
                        continue
                    with _on(graph, v.op):
                        if isinstance(g, IndexedSlices):  # rows only, averaged row by row
                            acc = SparseConditionalAccumulator(
                                g.dtype, shape=v.shape, shared_name=v.op.name + "/grad_accum"
                            )
                            push_ops.append(acc.apply_indexed_slices_grad(g, local_step=local_step))
                            averaged.append(
                                acc.take_indexed_slices_grad(
                                    self._replicas_to_aggregate, dense=g.dense_shape
                                )
                            )
                        else:
                            acc = ConditionalAccumulator(
                                g.dtype, shape=v.shape, shared_name=v.op.name + "/grad_accum"
                            )
                            push_ops.append(acc.apply_grad(g, local_step=local_step))
                            averaged.append(acc.take_grad(self._replicas_to_aggregate))
                    self._accumulators.append(acc)
            # As TF: on the global step's device (a device scope, not colocation with it), so
            # that the wrapped optimizer keeps each update and slot with its variable.
            with graph.device(None), graph.device(gs_ref.op.device or None):
                update_op = self._opt.apply_gradients(list(zip(averaged, var_list)), global_step)
            with _on(graph, gs_ref.op):
                queue = FIFOQueue(
                    -1, gs_ref.dtype, shapes=(), name="sync_token_q", shared_name="sync_token_q"
                )
                self._sync_token_queue = queue
                with graph.control_dependencies(push_ops):
                    token = queue.dequeue()
                with graph.control_dependencies([update_op]):
                    tokens = fill([self._tokens_per_step], _read(gs_ref))
                    self._chief_sync_op = queue.enqueue_many(tokens, name="sync_op")
            train_op = state.assign(self._local_step, token, name="sync_rep_train_op").op
            with graph.control_dependencies(None):
                init = [self.local_step_init_op]
                cancel = []
                for acc in self._accumulators:
                    # the read lives with the global step: a read of it colocated with the
                    # accumulator would join the variable's group with the global step's
                    with _on(graph, gs_ref.op):
                        now = _read(gs_ref)
                    with _on(graph, acc.accumulator_ref.op):
                        init.append(acc.set_global_step(now, name="SetGlobalStep"))
                        cancel.append(acc.cancel_takes())
                self.chief_init_op = group(*init, name="sync_rep_chief_init")
                self._cancel_sync_op = group(*cancel, name="sync_rep_cancel_takes")
        ref = graph.get_collection_ref(GraphKeys.TRAIN_OP)
        if train_op not in ref:
            ref.append(train_op)
        self._gradients_applied = True
        return train_op

    @property
    def chief_sync_op(self) -> Operation:
        """The chief's op: take the averages, apply them, increment, enqueue the tokens."""
        self._need_applied("chief_sync_op")
        return self._chief_sync_op

    def get_chief_queue_runner(self) -> _ChiefSyncRunner:
        """A runner whose thread runs ``chief_sync_op`` in a loop (start it on the chief only)."""
        self._need_applied("get_chief_queue_runner()")
        return _ChiefSyncRunner(self._chief_sync_op, self._cancel_sync_op)

    def get_init_tokens_op(self, num_tokens: int = -1) -> Operation:
        """An op that enqueues ``num_tokens`` tokens (the global step) so that workers can start.

        ``-1`` means ``replicas_to_aggregate``, as in TF. Raises ValueError before
        ``apply_gradients`` or when fewer than ``replicas_to_aggregate - total_num_replicas``
        tokens are asked for (the first step could not finish).
        """
        self._need_applied("get_init_tokens_op()")
        needed = self._replicas_to_aggregate - self._total_num_replicas
        if num_tokens == -1:
            num_tokens = self._replicas_to_aggregate
        elif num_tokens < needed:
            raise ValueError(
                f"too few tokens to finish the first step: {num_tokens} (given) vs {needed} "
                "(needed: replicas_to_aggregate - total_num_replicas)"
            )
        gs_ref = state._ref_of(self._global_step)
        g = gs_ref.graph
        with g.as_default(), g.control_dependencies(None), _on(g, gs_ref.op):
            if num_tokens <= 0:
                return no_op(name="no_init_tokens")
            tokens = fill([num_tokens], _read(gs_ref))
            return self._sync_token_queue.enqueue_many(tokens, name="init_tokens")

    def make_session_run_hook(self, is_chief: bool, num_tokens: int = -1) -> SessionRunHook:
        """A hook for MonitoredTrainingSession that runs the init ops (and, on the chief, the
        init tokens once and the sync runner thread)."""
        return _SyncReplicasOptimizerHook(self, is_chief, num_tokens)

    def _release_tokens_op(self) -> Operation:
        """The chief's op at the end of training: ``total_num_replicas`` tokens (the global step),
        one for every worker that may wait at the barrier."""
        self._need_applied("_release_tokens_op()")
        gs_ref = state._ref_of(self._global_step)
        g = gs_ref.graph
        with g.as_default(), g.control_dependencies(None), _on(g, gs_ref.op):
            tokens = fill([self._total_num_replicas], _read(gs_ref))
            return self._sync_token_queue.enqueue_many(tokens, name="release_tokens")

    def get_slot(self, *args: Any, **kwargs: Any) -> Any:
        return self._opt.get_slot(*args, **kwargs)

    def get_slot_names(self, *args: Any, **kwargs: Any) -> list[str]:
        return self._opt.get_slot_names(*args, **kwargs)

    def variables(self) -> list[Variable]:
        return self._opt.variables()

    def _need_applied(self, what: str) -> None:
        if not self._gradients_applied:
            raise ValueError(f"SyncReplicasOptimizer: call apply_gradients() before {what}")


def _zero(dtype: _dt.DType) -> Any:
    return np.zeros((), dtype=dtype.np)


def _read(ref: Tensor) -> Tensor:
    """A fresh read of a variable, so that control dependencies around it take effect."""
    return apply("ReadVariable", [ref], name="read_global_step")


class _ChiefSyncRunner:
    """Runs the chief's sync op in a loop on one thread, like TF's chief queue runner."""

    def __init__(self, sync_op: Operation, cancel_op: Operation):
        self._sync_op = sync_op
        self._cancel_op = cancel_op
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sess: Any = None
        self.exceptions: list[BaseException] = []

    def create_threads(
        self, sess: Any, coord: Any = None, daemon: bool = True, start: bool = False
    ) -> list[threading.Thread]:
        """The runner's thread (started when ``start``); one runner, one thread."""
        if self._thread is None:
            self._sess = sess
            self._thread = threading.Thread(
                target=self._loop, name="sync_replicas_chief", daemon=daemon
            )
            if start:
                self._thread.start()
        return [self._thread]

    def _loop(self) -> None:
        name_this_thread("hetbed-syncrep")
        waited = 0
        while not self._stop.is_set():
            try:
                self._sess.run(self._sync_op)
                waited = 0
            except DeadlineExceededError as e:
                # Too few gradients within the session's operation timeout (a worker is slow or
                # dead): the waiting takes were withdrawn with nothing consumed; wait again.
                if self._stop.is_set():
                    return
                waited += 1
                if waited == 1:
                    _log.warning(
                        "SyncReplicasOptimizer chief: no aggregate within the operation "
                        "timeout, still waiting for gradients (%s)",
                        e,
                    )
            except Exception as e:  # noqa: BLE001 - a stop cancels the take; else report it
                if not self._stop.is_set():
                    self.exceptions.append(e)
                return

    def failed(self) -> BaseException | None:
        """The error that ended the runner's thread (not a stop), if it ended."""
        t = self._thread
        if self.exceptions and t is not None and not t.is_alive():
            return self.exceptions[0]
        return None

    def stop(self, timeout_s: float = 10.0) -> None:
        """Cancel the waiting take and join the thread."""
        self._stop.set()
        t = self._thread
        if t is None or not t.is_alive():
            return
        try:
            self._sess.run(self._cancel_op)
        except Exception:  # noqa: BLE001 - session already closed: the daemon stays blocked
            return
        t.join(timeout_s)


class _SyncReplicasOptimizerHook(SessionRunHook):
    """Runs SyncReplicasOptimizer's init ops after the session is created (see
    ``make_session_run_hook``) and, on the chief, the sync runner until the session ends."""

    def __init__(self, opt: SyncReplicasOptimizer, is_chief: bool, num_tokens: int):
        self._opt = opt
        self._is_chief = bool(is_chief)
        self._num_tokens = num_tokens
        self._runner: _ChiefSyncRunner | None = None
        self._release_op: Operation | None = None
        self._close_op: Operation | None = None

    def begin(self) -> None:
        self._opt._need_applied("using its session hook")
        if self._is_chief:
            self._local_init_op = self._opt.chief_init_op
            self._init_tokens_op = self._opt.get_init_tokens_op(self._num_tokens)
            self._release_op = self._opt._release_tokens_op()
            with self._opt._sync_token_queue.queue_ref.graph.control_dependencies(None):
                self._close_op = self._opt._sync_token_queue.close(name="close_sync_token_q")
        else:
            self._local_init_op = self._opt.local_step_init_op
            self._init_tokens_op = None
        self._ready = self._opt.ready_for_local_init_op

    def after_create_session(self, session: Any, coord: Any) -> None:
        flags = session.run(self._ready)
        missing = [v.op.name for v, ok in zip(self._opt._ready_vars, flags) if not ok]
        if missing:
            names = ", ".join(missing[:10])
            raise RuntimeError(
                f"model is not ready for SyncReplicasOptimizer local init: uninitialized {names}"
            )
        if self._runner is not None:
            # a new session after a recoverable error: retire the old runner and withdraw its
            # waiting take, so that only the new runner takes aggregates
            self._runner._stop.set()
            session.run(self._opt._cancel_sync_op)
            self._runner = None
        session.run(self._local_init_op)
        if self._init_tokens_op is not None:
            session.run(self._init_tokens_op)
        if self._is_chief:
            self._runner = self._opt.get_chief_queue_runner()
            self._runner.create_threads(session, coord, daemon=True, start=True)

    def after_run(self, run_context: Any, run_values: Any) -> None:
        # like TF's coordinator: an error that ended the chief's sync thread fails the chief's
        # next step (MonitoredTrainingSession recovers from Aborted/Unavailable by recreating it)
        err = self._runner.failed() if self._runner is not None else None
        if err is not None:
            raise err

    def end(self, session: Any) -> None:
        if self._runner is not None:
            self._runner.stop()
        if self._release_op is not None:
            # workers waiting at the barrier get a token, finish their step and see the final
            # global step (in TF they stay blocked until killed)
            session.run(self._release_op)
        if self._close_op is not None:
            # then no more tokens: a worker's next dequeue fails with OutOfRangeError, which
            # MonitoredTrainingSession takes as a clean stop (TF's workers would wait forever)
            session.run(self._close_op)
