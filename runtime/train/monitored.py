"""``hb.train.MonitoredTrainingSession``: a session that initializes or restores, runs hooks and
saves checkpoints, like TF1's.

The chief initializes the variables, or restores them from the latest checkpoint in
``checkpoint_dir``; other workers wait until the chief has done so. Each ``run`` asks every hook
what to fetch as well (``before_run``), runs it all in one step and hands the hooks their values
(``after_run``); a hook may ask the session to stop (``should_stop()``). The chief saves a
checkpoint every ``save_checkpoint_steps`` global steps or ``save_checkpoint_secs`` seconds, and
when it closes.
"""

from __future__ import annotations

import logging
import os
import re
import time
from typing import Any

from ..errors import AbortedError, DeadlineExceededError, OutOfRangeError, UnavailableError
from ..graph import get_default_graph
from ..session import ConfigProto, Session
from ..variables import (
    global_variables,
    global_variables_initializer,
    initialized_flags,
    local_variables_initializer,
)
from .checkpoint import RESTARTED_ENV, get_checkpoint_state, recover_checkpoint
from .queue_runner import Coordinator, start_queue_runners
from .saver import Saver
from .training_util import get_global_step, get_or_create_global_step

_log = logging.getLogger("hetbed.train")

#: errors after which MonitoredTrainingSession recreates its session, as TF's _RecoverableSession
#: does: a task went away (Unavailable) or restarted / aborted the step (Aborted)
RECOVERABLE_ERRORS = (AbortedError, UnavailableError)

# ---- hooks -------------------------------------------------------------------------------------


class SessionRunArgs:
    """What a hook adds to a step: ``fetches`` (any fetch structure) and ``feed_dict``."""

    def __init__(self, fetches: Any, feed_dict: dict | None = None, options: Any = None):
        self.fetches = fetches
        self.feed_dict = feed_dict
        self.options = options


class SessionRunContext:
    """Given to hooks around a step: the step's ``original_args`` and ``session``; a hook calls
    ``request_stop()`` to end training after this step."""

    def __init__(self, original_args: SessionRunArgs, session: Any):
        self.original_args = original_args
        self.session = session
        self.stop_requested = False

    def request_stop(self) -> None:
        self.stop_requested = True


class SessionRunValues:
    """The values of a hook's ``SessionRunArgs.fetches`` after a step (``results``)."""

    def __init__(self, results: Any, options: Any = None, run_metadata: Any = None):
        self.results = results
        self.options = options
        self.run_metadata = run_metadata


class SessionRunHook:
    """Base class of hooks; every method does nothing unless overridden.

    ``begin()`` (graph may still change), ``after_create_session(session, coord)``,
    ``before_run(run_context) -> SessionRunArgs | None``, ``after_run(run_context, run_values)``,
    ``end(session)`` (on a clean close only).
    """

    def begin(self) -> None:
        pass

    def after_create_session(self, session: Any, coord: Any) -> None:
        pass

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        return None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        pass

    def end(self, session: Any) -> None:
        pass


class StopAtStepHook(SessionRunHook):
    """Requests a stop once the global step reaches ``last_step`` (or ``num_steps`` more steps
    than it had when the session was created). Give exactly one of them."""

    def __init__(self, num_steps: int | None = None, last_step: int | None = None):
        if (num_steps is None) == (last_step is None):
            raise ValueError(
                f"StopAtStepHook: give exactly one of num_steps and last_step, "
                f"got num_steps={num_steps}, last_step={last_step}"
            )
        self._num_steps = num_steps
        self._last_step = last_step
        self._gs: Any = None

    def begin(self) -> None:
        self._gs = get_global_step()
        if self._gs is None:
            raise RuntimeError(
                "StopAtStepHook needs a global step; create it with "
                "hb.train.get_or_create_global_step()"
            )

    def after_create_session(self, session: Any, coord: Any) -> None:
        if self._last_step is None:
            self._last_step = int(session.run(self._gs)) + int(self._num_steps)

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        return SessionRunArgs(self._gs)

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        # the value fetched may have been read before this step's increment: confirm it
        if int(run_values.results) + 1 >= self._last_step:
            if int(run_context.session.run(self._gs)) >= self._last_step:
                run_context.request_stop()


def _step_of(path: str) -> int | None:
    m = re.search(r"-(\d+)$", path)
    return int(m.group(1)) if m else None


def _is_step_of(path: str, prefix: str) -> bool:
    """Whether ``path`` is ``prefix-<step>`` (a checkpoint of the saver writing ``prefix``)."""
    head, _, step = os.path.abspath(path).rpartition("-")
    return head == prefix and step.isdigit()


class CheckpointSaverHook(SessionRunHook):
    """Saves ``checkpoint_dir/model.ckpt-<global step>`` when the session is made (TF's step-0
    checkpoint, with ``graph.pbtxt``), every ``save_steps`` steps or ``save_secs`` seconds (give
    one), and at the end."""

    def __init__(
        self,
        checkpoint_dir: str,
        save_secs: float | None = None,
        save_steps: int | None = None,
        saver: Saver | None = None,
        checkpoint_basename: str = "model.ckpt",
    ):
        if (save_secs is None) == (save_steps is None):
            raise ValueError(
                f"CheckpointSaverHook: give exactly one of save_secs and save_steps, "
                f"got save_secs={save_secs}, save_steps={save_steps}"
            )
        self._dir = checkpoint_dir
        self._path = os.path.join(checkpoint_dir, checkpoint_basename)
        self._secs, self._steps = save_secs, save_steps
        self._saver = saver
        self._gs: Any = None
        self._last_step = -1
        self._last_time = 0.0

    def begin(self) -> None:
        self._gs = get_global_step()
        if self._gs is None:
            raise RuntimeError(
                "CheckpointSaverHook needs a global step; create it with "
                "hb.train.get_or_create_global_step()"
            )
        if self._saver is None:
            self._saver = Saver()

    def after_create_session(self, session: Any, coord: Any) -> None:
        if os.path.exists(self._dir) and not os.path.isdir(self._dir):
            raise ValueError(
                f"checkpoint_dir {self._dir!r} exists and is not a directory; checkpoints go "
                "into a folder"
            )
        os.makedirs(self._dir, exist_ok=True)
        # Checkpoints written before a restart keep counting toward the saver's max_to_keep.
        state = get_checkpoint_state(self._dir)
        if state is not None and not self._saver.last_checkpoints:
            mine = os.path.abspath(self._path)  # (this hook's checkpoints: model.ckpt-<step>)
            self._saver.recover_last_checkpoints(
                [p for p in state.all_model_checkpoint_paths if _is_step_of(p, mine)]
            )
        # as TF's: the graph beside the checkpoints, and the state at the starting step saved
        # at once (model.ckpt-0 for a new run), so even a run stopped before its first save
        # period leaves a checkpoint
        self._write_graph(session)
        step = int(session.run(self._gs))
        latest = state.model_checkpoint_path if state is not None else None
        if latest is not None and _step_of(latest) == step:
            # the session restored this very step: it is saved already (and a checkpoint
            # another program wrote at that name is not to be overwritten)
            self._last_step, self._last_time = step, time.monotonic()
        else:
            self._save(session, step)

    def _write_graph(self, session: Any) -> None:
        """``graph.pbtxt``: the graph as TensorFlow's GraphDef, in protobuf text format."""
        from google.protobuf import text_format

        from hetbed.devices.fileio import atomic_write

        text = text_format.MessageToString(session.graph.as_graph_def())
        atomic_write(os.path.join(self._dir, "graph.pbtxt"), text.encode())

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs:
        return SessionRunArgs(self._gs)

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        if self._steps is not None:
            # the value fetched may have been read before this step's increment: confirm it
            if int(run_values.results) + 1 >= self._last_step + self._steps:
                step = int(run_context.session.run(self._gs))
                if step >= self._last_step + self._steps:
                    self._save(run_context.session, step)
        elif time.monotonic() - self._last_time >= self._secs:
            self._save(run_context.session)

    def end(self, session: Any) -> None:
        if int(session.run(self._gs)) != self._last_step:
            self._save(session)

    def _save(self, session: Any, step: int | None = None) -> None:
        if step is None:
            step = int(session.run(self._gs))
        self._saver.save(session, self._path, global_step=step)
        self._last_step, self._last_time = step, time.monotonic()


class StepCounterHook(SessionRunHook):
    """Logs the global steps a second (logger ``hetbed.train``, INFO) every ``every_n_steps``
    global steps, as TF1's (which also writes them as a summary; this one does not)."""

    def __init__(self, every_n_steps: int = 100):
        self._every = int(every_n_steps)
        self._gs: Any = None
        self._last: tuple[int, float] | None = None

    def begin(self) -> None:
        self._gs = get_global_step()

    def before_run(self, run_context: SessionRunContext) -> SessionRunArgs | None:
        return SessionRunArgs(self._gs) if self._gs is not None else None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        if self._gs is None:
            return
        step, now = int(run_values.results), time.monotonic()
        if self._last is None or step < self._last[0]:
            self._last = (step, now)
        elif step - self._last[0] >= self._every:
            rate = (step - self._last[0]) / max(now - self._last[1], 1e-9)
            _log.info("global_step/sec: %g", rate)
            self._last = (step, now)


#: "not given": the argument takes TF1's default (``MonitoredTrainingSession``)
USE_DEFAULT = object()


def _either(steps: Any, secs: Any, default_steps: Any, default_secs: Any) -> tuple[Any, Any]:
    """TF1's rule for a pair of "every N steps" / "every N seconds" arguments: neither given,
    the defaults; one given, the other None."""
    if steps is USE_DEFAULT and secs is USE_DEFAULT:
        return default_steps, default_secs
    return (None if steps is USE_DEFAULT else steps), (None if secs is USE_DEFAULT else secs)


class Scaffold:
    """TF1's ``tf.train.Scaffold``: what a ``MonitoredTrainingSession`` initializes, restores and
    summarizes with; ``finalize`` fills what was not given (every global variable's initializer,
    the local ones', every summary merged) in the default graph; a chief that saves checkpoints
    and was given no ``saver`` makes one of every saveable variable (``ready_op`` is the
    session's: a flag per global variable, not TF's list of names). ``init_fn(scaffold,
    session)`` runs after ``init_op`` (not after a restore), ``init_feed_dict`` feeds it."""

    def __init__(
        self,
        init_op: Any = None,
        init_feed_dict: dict | None = None,
        init_fn: Any = None,
        ready_op: Any = None,
        ready_for_local_init_op: Any = None,
        local_init_op: Any = None,
        summary_op: Any = None,
        saver: Saver | None = None,
        copy_from_scaffold: Scaffold | None = None,
    ):
        if copy_from_scaffold is not None:
            if not isinstance(copy_from_scaffold, Scaffold):
                raise TypeError(
                    "Scaffold: copy_from_scaffold must be a Scaffold, got "
                    f"{type(copy_from_scaffold).__name__}"
                )
            c = copy_from_scaffold
            init_op = init_op if init_op is not None else c.init_op
            init_feed_dict = init_feed_dict if init_feed_dict is not None else c.init_feed_dict
            init_fn = init_fn if init_fn is not None else c.init_fn
            ready_op = ready_op if ready_op is not None else c.ready_op
            local_init_op = local_init_op if local_init_op is not None else c.local_init_op
            summary_op = summary_op if summary_op is not None else c.summary_op
            saver = saver if saver is not None else c.saver
        self.init_op, self.init_feed_dict, self.init_fn = init_op, init_feed_dict, init_fn
        self.ready_op, self.ready_for_local_init_op = ready_op, ready_for_local_init_op
        self.local_init_op, self.summary_op, self.saver = local_init_op, summary_op, saver
        self._finalized = False

    def finalize(self) -> None:
        if self._finalized:
            return
        if self.init_op is None:
            self.init_op = global_variables_initializer()
        if self.local_init_op is None:  # TF's default: local variables and lookup tables
            from ..ops.control import group
            from ..ops.lookup import tables_initializer

            self.local_init_op = group(local_variables_initializer(), tables_initializer())
        if self.summary_op is None:
            from hetbed.summary import merge_all

            self.summary_op = merge_all()
        self._finalized = True


# ---- the session ---------------------------------------------------------------------------------


class MonitoredTrainingSession:
    """A training session for one task: ``with MonitoredTrainingSession(...) as sess:
    while not sess.should_stop(): sess.run(train_op)``.

    ``master``: "" (an in-process Session) or ``"grpc://host:port"`` (usually ``server.target``).
    The chief initializes the variables or restores them from ``checkpoint_dir``'s latest
    checkpoint and saves checkpoints there (every ``save_checkpoint_steps`` global steps or
    ``save_checkpoint_secs`` seconds, 600 s when neither is given, and at close); non-chiefs wait
    up to ``init_timeout_s`` for the chief and raise DeadlineExceededError naming the variables
    still uninitialized. Session creation is retried while the cluster's tasks are not up yet
    (UnavailableError) for ``init_timeout_s``. The global step is created if the graph has none
    (in a cluster, create it yourself inside the ``replica_device_setter`` scope so that it is
    shared). The graph is finalized.

    Recovery, as TF's recoverable session: when a step fails with AbortedError or
    UnavailableError (a task died or restarted), the error is logged (logger ``hetbed.train``),
    the session is closed and a new one is created (retrying for ``init_timeout_s`` while tasks
    are down), and the step is run again. On the new session the chief keeps the variables if
    every one is still initialized (the PS tasks survived; TF would restore the checkpoint
    anyway), else restores the latest checkpoint (initializes when there is none), so at most the
    steps since that checkpoint are lost; non-chiefs wait for the chief again; every hook's
    ``after_create_session`` runs again. ``recoveries`` counts them. Other errors (e.g.
    DeadlineExceededError after ``ConfigProto.operation_timeout_in_ms``) reach the caller, who
    may simply call ``run`` again.

    TF1's arguments, in TF1's order: ``scaffold`` (``Scaffold``: the init op and feed, an
    ``init_fn``, the saver and summary op to use), ``chief_only_hooks``, checkpoints every
    ``save_checkpoint_secs`` (default 600 when neither it nor ``save_checkpoint_steps`` is
    given; both None: none), summaries of the graph's summary ops every ``save_summaries_steps``
    (default 100) or ``save_summaries_secs`` to ``summary_dir`` (default ``checkpoint_dir``; a
    graph without summary ops writes no event file), the global steps a second logged every
    ``log_step_count_steps`` (INFO; ``StepCounterHook``), ``stop_grace_period_secs`` for the
    queue runners to stop, ``max_wait_secs`` for a non-chief to wait for the chief (hetbed's
    default is 60 s, ``init_timeout_s``; TF's 7,200). ``save_graph_def`` is accepted: every
    checkpoint is written with its meta graph whatever it says. hetbed's own, keyword-only:
    ``token`` (the cluster's), ``init_timeout_s``, ``poll_interval_s``,
    ``checkpoint_filename_with_path`` (the chief restores that file: ``MonitoredSession``'s
    ``ChiefSessionCreator``), ``create_global_step`` (False for ``MonitoredSession``).
    """

    def __init__(
        self,
        master: str = "",
        is_chief: bool = True,
        checkpoint_dir: str | None = None,
        scaffold: Scaffold | None = None,
        hooks: list[SessionRunHook] | None = None,
        chief_only_hooks: list[SessionRunHook] | None = None,
        save_checkpoint_secs: Any = USE_DEFAULT,
        save_summaries_steps: Any = USE_DEFAULT,
        save_summaries_secs: Any = USE_DEFAULT,
        config: ConfigProto | None = None,
        stop_grace_period_secs: float = 120.0,
        log_step_count_steps: int | None = 100,
        max_wait_secs: Any = USE_DEFAULT,
        save_checkpoint_steps: Any = USE_DEFAULT,
        summary_dir: str | None = None,
        save_graph_def: bool = True,
        *,
        token: str | None = None,
        init_timeout_s: float | None = None,
        poll_interval_s: float = 0.1,
        checkpoint_filename_with_path: str | None = None,
        create_global_step: bool = True,
    ):
        self.graph = get_default_graph()
        self.is_chief = bool(is_chief)
        self._hooks = list(hooks or [])
        if is_chief:
            self._hooks += list(chief_only_hooks or [])
        self._grace_s = float(stop_grace_period_secs)
        if init_timeout_s is None:  # (TF's max_wait_secs; hetbed waits a minute by default)
            init_timeout_s = 60.0 if max_wait_secs is USE_DEFAULT else float(max_wait_secs)
        scaffold = scaffold or Scaffold()
        with self.graph.as_default():
            if create_global_step:
                get_or_create_global_step(self.graph)
            scaffold.finalize()
            saver = scaffold.saver
            summary_dir = summary_dir or checkpoint_dir
            if is_chief and (checkpoint_dir or checkpoint_filename_with_path) and saver is None:
                saver = scaffold.saver = Saver()
            if is_chief and checkpoint_dir:
                steps, secs = _either(save_checkpoint_steps, save_checkpoint_secs, None, 600.0)
                if steps is not None and secs is not None:
                    raise ValueError(
                        "MonitoredTrainingSession: give save_checkpoint_secs or "
                        f"save_checkpoint_steps, not both (got {secs} and {steps})"
                    )
                if (secs and secs > 0) or (steps and steps > 0):
                    self._hooks.append(
                        CheckpointSaverHook(
                            checkpoint_dir, secs if not steps else None, steps or None, saver
                        )
                    )
            # (summaries only where the graph has some: without, TF's hook writes the graph)
            if is_chief and summary_dir and scaffold.summary_op is not None:
                steps, secs = _either(save_summaries_steps, save_summaries_secs, 100, None)
                if (secs and secs > 0) or (steps and steps > 0):
                    from .supervisor import SummarySaverHook  # (supervisor imports this module)

                    self._hooks.append(
                        SummarySaverHook(
                            steps or None,
                            secs or None,
                            summary_dir,
                            None,
                            scaffold,
                            scaffold.summary_op,
                        )  # fmt: skip
                    )
            if is_chief and log_step_count_steps and log_step_count_steps > 0:
                self._hooks.append(StepCounterHook(log_step_count_steps))
            variables = global_variables()
            init_op = scaffold.init_op
            local_init_op = scaffold.local_init_op
            # (readiness: every global variable's flag, whatever ready_op the scaffold holds)
            ready = initialized_flags(variables)
            if scaffold.ready_op is None:
                scaffold.ready_op = ready
            for h in self._hooks:
                h.begin()
        self.graph.finalize()
        self._stop = False
        self._closed = False
        self._master, self._config, self._token = master, config, token
        self._timeout_s, self._poll_s = init_timeout_s, poll_interval_s
        self._saver, self._checkpoint_dir = saver, checkpoint_dir
        self._restore_path = checkpoint_filename_with_path
        self._variables, self._ready = variables, ready
        self._init_op, self._local_init_op = init_op, local_init_op
        self._init_feed, self._init_fn, self._scaffold = (
            scaffold.init_feed_dict,
            scaffold.init_fn,
            scaffold,
        )
        #: how many times the session was recreated after a recoverable error
        self.recoveries = 0
        self._coord: Coordinator | None = None
        self._threads: list = []
        self._sess: Session | None = None
        self._sess = self._open(recovering=False)

    def _open(self, recovering: bool) -> Session:
        """``_new_session``, tried again while it fails with a recoverable error (a task that
        restarts meanwhile), for ``init_timeout_s``."""
        deadline = time.monotonic() + self._timeout_s
        while True:
            try:
                sess = self._new_session(recovering)
            except RECOVERABLE_ERRORS as e:
                if time.monotonic() >= deadline:
                    raise
                _log.warning("MonitoredTrainingSession: %s: %s; trying again", type(e).__name__, e)
                time.sleep(self._poll_s)
                continue
            if recovering:
                self.recoveries += 1
            return sess

    def _new_session(self, recovering: bool) -> Session:
        """Create a session, initialize/restore or wait for the model, run the hooks'
        ``after_create_session``."""
        sess = self._create_session(
            self._master, self._config, self._token, self._timeout_s, self._poll_s
        )
        try:
            if self.is_chief:
                self._prepare_chief(sess, recovering)
            else:
                self._wait_until_ready(sess, self._timeout_s, self._poll_s)
            sess.run(self._local_init_op)
            # the graph's queue runners feed their queues from now on (as TF's MonitoredSession)
            self._coord = Coordinator()
            self._threads = start_queue_runners(sess, self._coord, daemon=True)
            for h in self._hooks:
                h.after_create_session(sess, self._coord)
        except BaseException:
            self._stop_runners(raise_error=False)
            sess.close()
            raise
        return sess

    def _stop_runners(self, raise_error: bool) -> None:
        """Stop the queue runners (their pending enqueues are cancelled) and wait for them;
        with ``raise_error``, raise the first error a runner thread reported."""
        coord, self._coord = self._coord, None
        if coord is None:
            return
        coord.request_stop()
        try:
            coord.join(
                self._threads, stop_grace_period_secs=self._grace_s, ignore_live_threads=True
            )
        except Exception:
            if raise_error:
                raise
            _log.warning("MonitoredTrainingSession: a queue runner failed", exc_info=True)

    def _prepare_chief(self, sess: Session, recovering: bool) -> None:
        """Restore the latest checkpoint or initialize; after a recoverable error, keep the
        variables as they are when every one of them is still initialized (the PS tasks
        survived)."""
        if recovering and not self._uninitialized(sess):
            _log.warning(
                "MonitoredTrainingSession (chief): every variable is still initialized; "
                "continuing from global step %d",
                int(sess.run(get_global_step(self.graph))),
            )
            return
        # the newest checkpoint that verifies; DataLossError when there are some but none does
        if self._restore_path is not None:  # (a given checkpoint file, as an evaluation's)
            ckpt = self._restore_path
        else:
            ckpt = (  # (no index: its checkpoint saver's own name, never another Saver's)
                recover_checkpoint(self._checkpoint_dir, default_basename="model.ckpt")
                if self._checkpoint_dir
                else None
            )
        restarted = os.environ.get(RESTARTED_ENV)  # (this process: a restarted task)
        if ckpt is not None:
            self._saver.restore(sess, ckpt)
            if recovering or restarted:
                _log.warning("MonitoredTrainingSession (chief): restored %s", ckpt)
        else:
            sess.run(self._init_op, self._init_feed)
            if self._init_fn is not None:
                self._init_fn(self._scaffold, sess)
            if recovering or restarted:
                _log.warning(
                    "MonitoredTrainingSession (chief): no checkpoint to restore; the variables "
                    "were initialized again"
                )

    def _uninitialized(self, sess: Session) -> list[str]:
        flags = sess.run(self._ready) if self._ready else []
        return [v.op.name for v, ok in zip(self._variables, flags) if not ok]

    def _create_session(
        self, master: str, config: Any, token: str | None, timeout_s: float, poll_s: float
    ) -> Session:
        kw = {"token": token} if master else {}
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return Session(master, graph=self.graph, config=config, **kw)
            except UnavailableError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(poll_s)

    def _wait_until_ready(self, sess: Session, timeout_s: float, poll_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                missing = self._uninitialized(sess)
            except UnavailableError:  # a PS task is (re)starting: ask again
                if time.monotonic() >= deadline:
                    raise
                time.sleep(poll_s)
                continue
            if not missing:
                return
            if time.monotonic() >= deadline:
                shown = ", ".join(missing[:10]) + (" ..." if len(missing) > 10 else "")
                raise DeadlineExceededError(
                    f"MonitoredTrainingSession (non-chief): {len(missing)} variables still "
                    f"uninitialized after {timeout_s:g} s: {shown}; is the chief (is_chief=True) "
                    "running and using the same variables?"
                )
            time.sleep(poll_s)

    # ---- running ---------------------------------------------------------------------------
    def run(
        self,
        fetches: Any,
        feed_dict: dict | None = None,
        options: Any = None,
        run_metadata: Any = None,
    ) -> Any:
        """Run ``fetches`` (plus what the hooks ask for) in one step; return ``fetches``' values."""
        if self._closed:
            raise RuntimeError("MonitoredTrainingSession.run: the session is closed")
        while True:
            if self._sess is None:
                self._sess = self._open(recovering=True)
            try:
                return self._run_once(fetches, feed_dict, options, run_metadata)
            except OutOfRangeError:
                self._stop = True  # should_stop() is True from now on
                raise
            except RECOVERABLE_ERRORS as e:
                _log.warning(
                    "MonitoredTrainingSession (%s): %s: %s; recreating the session",
                    "chief" if self.is_chief else "non-chief",
                    type(e).__name__,
                    e,
                )
                sess, self._sess = self._sess, None
                self._stop_runners(raise_error=False)
                try:
                    sess.close()
                except Exception:  # noqa: BLE001 - its tasks may be gone
                    pass

    def _run_once(
        self, fetches: Any, feed_dict: dict | None, options: Any, run_metadata: Any
    ) -> Any:
        context = SessionRunContext(SessionRunArgs(fetches, feed_dict), self._sess)
        hook_fetches, feeds = [], dict(feed_dict or {})
        for h in self._hooks:
            args = h.before_run(context)
            hook_fetches.append(args.fetches if args is not None else [])
            for k, v in ((args.feed_dict or {}) if args is not None else {}).items():
                if k in feeds:
                    raise RuntimeError(f"hook {type(h).__name__} feeds {k!r}, which is already fed")
                feeds[k] = v
        results, hook_results = self._sess.run(
            [fetches, hook_fetches], feeds or None, options, run_metadata
        )
        for h, r in zip(self._hooks, hook_results):
            h.after_run(context, SessionRunValues(r, options, run_metadata))
        self._stop = self._stop or context.stop_requested
        return results

    def should_stop(self) -> bool:
        """True once a hook or a queue runner's coordinator asked to stop (or the session is
        closed)."""
        return self._stop or self._closed or (self._coord is not None and self._coord.should_stop())

    def raw_session(self) -> Session:
        """The Session underneath (hooks do not run for its steps); a new one after a
        recovery."""
        if self._sess is None and not self._closed:
            self._sess = self._open(recovering=True)
        return self._sess

    def close(self) -> None:
        self._close(clean=True)

    def _close(self, clean: bool) -> None:
        if self._closed:
            return
        self._closed = True
        if self._sess is None:
            return
        try:
            if clean:
                for h in self._hooks:
                    h.end(self._sess)
            self._stop_runners(raise_error=clean)
        finally:
            self._stop_runners(raise_error=False)
            self._sess.close()

    def __enter__(self) -> MonitoredTrainingSession:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        # as TF: a closed input (OutOfRangeError, e.g. the chief closed the sync token queue)
        # ends training cleanly
        clean = exc_type is None or issubclass(exc_type, (StopIteration, OutOfRangeError))
        self._close(clean)
        return exc_type is not None and clean


class ChiefSessionCreator:
    """TF1's: what a ``MonitoredSession`` of the chief is made with (it initializes, or restores
    ``checkpoint_filename_with_path`` or ``checkpoint_dir``'s newest checkpoint)."""

    def __init__(
        self,
        scaffold: Scaffold | None = None,
        master: str = "",
        config: ConfigProto | None = None,
        checkpoint_dir: str | None = None,
        checkpoint_filename_with_path: str | None = None,
    ):
        self.scaffold, self.master, self.config = scaffold, master, config
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_filename_with_path = checkpoint_filename_with_path


class WorkerSessionCreator:
    """TF1's: what a ``MonitoredSession`` of a non-chief is made with (it waits up to
    ``max_wait_secs`` for the chief to initialize the model)."""

    def __init__(
        self,
        scaffold: Scaffold | None = None,
        master: str = "",
        config: ConfigProto | None = None,
        max_wait_secs: float = 30 * 60,
    ):
        self.scaffold, self.master, self.config = scaffold, master, config
        self.max_wait_secs = max_wait_secs


class MonitoredSession(MonitoredTrainingSession):
    """TF1's ``tf.train.MonitoredSession``: a session made by ``session_creator`` (default: a
    ``ChiefSessionCreator``) that runs ``hooks``, restores but saves nothing (no checkpoints, no
    summaries), and creates no global step."""

    def __init__(
        self,
        session_creator: ChiefSessionCreator | WorkerSessionCreator | None = None,
        hooks: list[SessionRunHook] | None = None,
        stop_grace_period_secs: float = 120.0,
    ):
        c = session_creator if session_creator is not None else ChiefSessionCreator()
        if not isinstance(c, (ChiefSessionCreator, WorkerSessionCreator)):
            raise TypeError(
                "MonitoredSession: session_creator must be a ChiefSessionCreator or a "
                f"WorkerSessionCreator, got {type(c).__name__}"
            )
        chief = isinstance(c, ChiefSessionCreator)
        super().__init__(
            c.master,
            chief,
            c.checkpoint_dir if chief else None,
            c.scaffold,
            hooks,
            save_checkpoint_secs=None,
            save_summaries_steps=None,
            save_summaries_secs=None,
            config=c.config,
            stop_grace_period_secs=stop_grace_period_secs,
            log_step_count_steps=None,
            max_wait_secs=USE_DEFAULT if chief else c.max_wait_secs,
            checkpoint_filename_with_path=c.checkpoint_filename_with_path if chief else None,
            create_global_step=False,
        )


class SingularMonitoredSession(MonitoredSession):
    """TF1's: a ``MonitoredSession`` of one chief (``raw_session()`` gives the plain session)."""

    def __init__(
        self,
        hooks: list[SessionRunHook] | None = None,
        scaffold: Scaffold | None = None,
        master: str = "",
        config: ConfigProto | None = None,
        checkpoint_dir: str | None = None,
        stop_grace_period_secs: float = 120.0,
        checkpoint_filename_with_path: str | None = None,
    ):
        super().__init__(
            ChiefSessionCreator(
                scaffold, master, config, checkpoint_dir, checkpoint_filename_with_path
            ),
            hooks,
            stop_grace_period_secs,
        )


__all__ = [
    "CheckpointSaverHook",
    "ChiefSessionCreator",
    "MonitoredSession",
    "MonitoredTrainingSession",
    "Scaffold",
    "SingularMonitoredSession",
    "StepCounterHook",
    "WorkerSessionCreator",
    "SessionRunArgs",
    "SessionRunContext",
    "SessionRunHook",
    "SessionRunValues",
    "StopAtStepHook",
]
