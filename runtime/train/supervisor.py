"""TF1's SummarySaverHook and the older managed-session helper ``tf.train.Supervisor``."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from typing import Any

from ..errors import OutOfRangeError
from ..graph import GraphKeys, get_default_graph
from ..session import Session
from ..threadname import name_this_thread
from ..variables import (
    global_variables_initializer,
    local_variables_initializer,
)
from .checkpoint import RESTARTED_ENV, latest_checkpoint
from .hooks_extra import SecondOrStepTimer
from .monitored import SessionRunArgs, SessionRunHook
from .queue_runner import Coordinator, start_queue_runners
from .saver import Saver
from .training_util import get_global_step

_log = logging.getLogger("hetbed")


def _merged_summaries() -> Any:
    from hetbed.summary import merge_all

    return merge_all()


class SummarySaverHook(SessionRunHook):
    """Writes ``summary_op`` (default: every summary of the graph, merged) to ``output_dir``
    (or ``summary_writer``) every ``save_steps`` global steps or ``save_secs`` seconds."""

    def __init__(
        self,
        save_steps: int | None = None,
        save_secs: float | None = None,
        output_dir: str | None = None,
        summary_writer: Any = None,
        scaffold: Any = None,
        summary_op: Any = None,
    ):
        if (output_dir is None) == (summary_writer is None):
            raise ValueError("SummarySaverHook: give exactly one of output_dir and summary_writer")
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
        self._output_dir = output_dir
        self._writer = summary_writer
        self._summary_op = summary_op

    def begin(self) -> None:
        if self._writer is None:
            from hetbed.summary import FileWriter

            self._writer = FileWriter(self._output_dir)
        if self._summary_op is None:
            self._summary_op = _merged_summaries()
        self._gs = get_global_step()
        if self._gs is None:
            raise RuntimeError("SummarySaverHook needs a global step (create_global_step())")
        self._next = None

    def before_run(self, run_context):
        fetches: dict = {"global_step": self._gs}
        step = self._next
        self._request = step is None or self._timer.should_trigger_for_step(step)
        if self._request and self._summary_op is not None:
            fetches["summary"] = self._summary_op
        return SessionRunArgs(fetches)

    def after_run(self, run_context, run_values):
        step = int(run_values.results["global_step"])
        if "summary" in run_values.results:
            self._timer.update_last_triggered_step(step)
            self._writer.add_summary(run_values.results["summary"], step)
        self._next = step + 1

    def end(self, session):
        self._writer.flush()


class Supervisor:
    """TF1's ``tf.train.Supervisor``: ``managed_session()`` initializes the variables or restores
    them from the latest checkpoint in ``logdir``, starts the queue runners and a thread that
    saves a checkpoint every ``save_model_secs``; on leaving it saves a last checkpoint (chief),
    stops the threads and closes the session. An OutOfRangeError inside the block is a clean
    stop. The chief with a ``logdir`` and summaries in the graph also starts TF1's summary
    thread: the merged summaries (``summary_op``) at once, then every ``save_summaries_secs``,
    written to ``logdir`` at the global step (a summary that dequeues takes an element, as in
    TF1); ``summary_op=None`` leaves the writing to the loop (``summary_computed``)."""

    USE_DEFAULT = 0

    def __init__(
        self,
        graph: Any = None,
        ready_op: Any = USE_DEFAULT,
        ready_for_local_init_op: Any = USE_DEFAULT,
        is_chief: bool = True,
        init_op: Any = USE_DEFAULT,
        init_feed_dict: dict | None = None,
        local_init_op: Any = USE_DEFAULT,
        logdir: str | None = None,
        summary_op: Any = USE_DEFAULT,
        saver: Any = USE_DEFAULT,
        global_step: Any = USE_DEFAULT,
        save_summaries_secs: float = 120,
        save_model_secs: float = 600,
        recovery_wait_secs: float = 30,
        stop_grace_secs: float = 120,
        checkpoint_basename: str = "model.ckpt",
        session_manager: Any = None,
        summary_writer: Any = USE_DEFAULT,
        init_fn: Any = None,
        local_init_run_options: Any = None,
    ):
        self._graph = graph if graph is not None else get_default_graph()
        self._is_chief = is_chief
        self._logdir = logdir
        self._init_feed_dict = init_feed_dict
        self._init_fn = init_fn
        self._save_model_secs = save_model_secs
        self._save_summaries_secs = save_summaries_secs
        with self._graph.as_default():
            self._init_op = global_variables_initializer() if init_op == 0 else init_op
            self._local_init_op = (
                local_variables_initializer() if local_init_op == 0 else (local_init_op)
            )
            if global_step == 0:
                global_step = get_global_step(self._graph)
            self._global_step = global_step
            if saver == 0:
                saver = self._graph.get_collection(GraphKeys.SAVERS)
                saver = saver[0] if saver else Saver()
            self._saver = saver
            self._summary_op = _merged_summaries() if summary_op == 0 else summary_op
        self._save_path = os.path.join(logdir, checkpoint_basename) if logdir else None
        self._summary_writer = None
        if summary_writer != 0:
            self._summary_writer = summary_writer
        elif logdir and is_chief and self._summary_op is not None:
            from hetbed.summary import FileWriter

            self._summary_writer = FileWriter(logdir)
        self._coord = Coordinator()
        self._threads: list[threading.Thread] = []
        self._graph.finalize()

    # ---- properties -----------------------------------------------------------------------
    is_chief = property(lambda self: self._is_chief)
    coord = property(lambda self: self._coord)
    saver = property(lambda self: self._saver)
    global_step = property(lambda self: self._global_step)
    init_op = property(lambda self: self._init_op)
    summary_op = property(lambda self: self._summary_op)
    summary_writer = property(lambda self: self._summary_writer)
    save_path = property(lambda self: self._save_path)

    # ---- sessions -------------------------------------------------------------------------
    def prepare_or_wait_for_session(
        self, master: str = "", config: Any = None, start_standard_services: bool = True, **_: Any
    ) -> Session:
        """A session with the variables restored from ``logdir`` or initialized."""
        sess = Session(master, graph=self._graph, config=config)
        ckpt = latest_checkpoint(self._logdir) if self._logdir else None
        if ckpt and self._saver is not None:
            self._saver.restore(sess, ckpt)
            # (a task ``hetbed cluster`` restarted says so where the cluster's log shows it)
            log = _log.warning if os.environ.get(RESTARTED_ENV) else _log.info
            log("Supervisor: restored from %s", ckpt)
        else:
            if self._init_op is not None:
                sess.run(self._init_op, self._init_feed_dict)
            if self._init_fn is not None:
                self._init_fn(sess)
        if self._local_init_op is not None:
            sess.run(self._local_init_op)
        if start_standard_services:
            self._threads = list(start_queue_runners(sess, self._coord))
            self.start_standard_services(sess)
        return sess

    def start_standard_services(self, sess: Session) -> list:
        """As TF1's: the chief's checkpoint thread (every ``save_model_secs``, with a
        ``logdir`` and a saver) and summary thread (with a writer and a summary op); joined
        when the supervisor stops. ``managed_session(start_standard_services=False)`` leaves
        them to this call (slim's ``learning.train``)."""
        started = []
        if self._is_chief and self._save_path and self._saver is not None:
            t = threading.Thread(target=self._checkpoint_loop, args=(sess,), daemon=True)
            t.start()
            started.append(t)
        if (
            self._is_chief
            and self._summary_writer is not None
            and self._summary_op is not None
            and self._save_summaries_secs
        ):
            t = threading.Thread(target=self._summary_loop, args=(sess,), daemon=True)
            t.start()
            started.append(t)
        self._threads.extend(started)
        return started

    def _summary_loop(self, sess: Session) -> None:
        """As TF1's summary thread: the summary op at once, then every ``save_summaries_secs``,
        written at the global step (an error stops the coordinator with it, as a queue
        runner's does)."""
        name_this_thread("hetbed-summary")
        with self._coord.stop_on_exception():
            while not self._coord.should_stop():
                if self._global_step is not None:
                    summary, step = sess.run([self._summary_op, self._global_step])
                else:
                    summary, step = sess.run(self._summary_op), None
                self._summary_writer.add_summary(summary, step)
                if self._coord.wait_for_stop(self._save_summaries_secs):
                    break

    def _checkpoint_loop(self, sess: Session) -> None:
        """As TF1's checkpoint thread (a LooperThread): a checkpoint at once (slim's
        ``learning.train`` leaves ``model.ckpt-0``), then every ``save_model_secs``."""
        name_this_thread("hetbed-ckpt")
        if not self._save_model_secs:
            return
        while not self._coord.should_stop():
            self._save(sess)
            if self._coord.wait_for_stop(self._save_model_secs):
                break

    def _save(self, sess: Session) -> None:
        self._saver.save(sess, self._save_path, global_step=self._global_step)

    @contextlib.contextmanager
    def managed_session(
        self,
        master: str = "",
        config: Any = None,
        start_standard_services: bool = True,
        close_summary_writer: bool = True,
    ) -> Iterator[Session]:
        sess = self.prepare_or_wait_for_session(master, config, start_standard_services)
        try:
            yield sess
        except OutOfRangeError:
            self._coord.request_stop()
        except BaseException as e:
            self._coord.request_stop(e)
            self._stop(sess, close_summary_writer, save=False, raise_errors=False)
            raise
        self._stop(sess, close_summary_writer)

    def stop(
        self,
        threads: list[threading.Thread] | None = None,
        close_summary_writer: bool = True,
        ignore_live_threads: bool = False,
    ) -> None:
        """As TF1's: stop the services it started (and ``threads``), wait for them, close the
        summary writer; the session stays open (``managed_session`` closes it)."""
        self._coord.request_stop()
        try:
            self._coord.join(
                self._threads + list(threads or []), ignore_live_threads=ignore_live_threads
            )
        finally:
            if close_summary_writer and self._summary_writer is not None:
                self._summary_writer.close()

    def _stop(
        self,
        sess: Session | None = None,
        close_summary_writer: bool = True,
        save: bool = True,
        raise_errors: bool = True,
    ) -> None:
        """Stop the services; with the session, save a last checkpoint (chief) and close it."""
        self._coord.request_stop()
        try:
            self._coord.join(self._threads, ignore_live_threads=True)
        except Exception:
            # raise_errors=False: the caller is already raising the error that stopped the
            # block, which takes precedence over a queue runner's (logged, not lost)
            if raise_errors:
                raise
            _log.warning("Supervisor: a queue runner failed while stopping", exc_info=True)
        finally:
            if sess is not None:
                if save and self._is_chief and self._save_path and self._saver is not None:
                    self._save(sess)
                sess.close()
            if close_summary_writer and self._summary_writer is not None:
                self._summary_writer.close()

    def loop(
        self,
        timer_interval_secs: float | None,
        target: Any,
        args: Any = None,
        kwargs: Any = None,
    ) -> threading.Thread:
        """Start a thread calling ``target`` at once and every ``timer_interval_secs`` until
        the supervisor stops (it is joined then), as TF1's ``Supervisor.loop``."""
        from .queue_runner import LooperThread

        looper = LooperThread.loop(self._coord, timer_interval_secs, target, args, kwargs)
        self._threads.append(looper)
        return looper

    def start_queue_runners(self, sess: Session, queue_runners: Any = None) -> list:
        """Start the graph's queue runners (or ``queue_runners``) under the supervisor's
        coordinator; they are joined when it stops."""
        if queue_runners is None:
            threads = list(start_queue_runners(sess, self._coord))
        else:
            threads = [t for qr in queue_runners for t in qr.create_threads(sess, self._coord,
                                                                           daemon=True, start=True)]  # fmt: skip
        self._threads.extend(threads)
        return threads

    def wait_for_stop(self) -> None:
        """Block until the supervisor's coordinator is asked to stop."""
        self._coord.wait_for_stop()

    def should_stop(self) -> bool:
        return self._coord.should_stop()

    def request_stop(self, ex: Any = None) -> None:
        self._coord.request_stop(ex)

    def stop_on_exception(self) -> Any:
        return self._coord.stop_on_exception()

    def summary_computed(self, sess: Session, summary: Any, global_step: Any = None) -> None:
        """Write a summary computed by the training loop."""
        if self._summary_writer is None:
            raise RuntimeError("Supervisor has no summary writer (give it a logdir)")
        if global_step is None and self._global_step is not None:
            global_step = sess.run(self._global_step)
        self._summary_writer.add_summary(summary, global_step)
