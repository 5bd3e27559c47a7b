"""TF1's queue-runner idiom: ``QueueRunner`` threads that keep running enqueue ops into a queue,
``Coordinator`` to stop them together and report the first error, ``start_queue_runners``.

A runner thread runs its enqueue op in a loop until the coordinator asks to stop or the op fails
because its input ran out or the queue closed (OutOfRangeError, CancelledError); the last of a
runner's threads to finish then closes the queue, so that readers get what is left and then
OutOfRangeError. Any other error is handed to the coordinator (``coord.join`` raises it). When the
coordinator stops, each runner closes its queue with ``cancel_pending_enqueues`` so that threads
waiting for room return at once.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from ..errors import CancelledError, OutOfRangeError
from ..graph import GraphKeys, get_default_graph
from ..threadname import name_this_thread

__all__ = ["Coordinator", "QueueRunner", "add_queue_runner", "start_queue_runners"]


class Coordinator:
    """Stops a set of threads together: ``should_stop``, ``request_stop(ex)``, ``join``.

    ``request_stop(ex)`` records the first exception it is given (OutOfRangeError, the normal
    end of the input, counts as a clean stop and is not recorded); ``join`` waits for the threads
    and raises that exception. ``stop_on_exception()`` is a context manager that stops the
    coordinator with whatever escapes it.
    """

    def __init__(self, clean_stop_exception_types: tuple | None = None):
        self._clean = (
            (OutOfRangeError,)
            if clean_stop_exception_types is None
            else tuple(clean_stop_exception_types)
        )
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._exc_info: tuple | None = None
        self._registered: list[threading.Thread] = []
        self._joined = False

    def request_stop(self, ex: BaseException | tuple | None = None) -> None:
        """Ask every thread to stop; remember ``ex`` (an exception or an exc_info tuple)
        unless an exception was remembered already or it is a clean stop."""
        with self._lock:
            if ex is not None and self._exc_info is None and not self._joined:
                info = ex if isinstance(ex, tuple) else (type(ex), ex, ex.__traceback__)
                if not isinstance(info[1], self._clean):
                    self._exc_info = info
            self._stop_event.set()

    def clear_stop(self) -> None:
        """Forget the stop request and the exception (to reuse the coordinator)."""
        with self._lock:
            self._joined = False
            self._exc_info = None
            self._stop_event.clear()

    def should_stop(self) -> bool:
        return self._stop_event.is_set()

    def wait_for_stop(self, timeout: float | None = None) -> bool:
        """Wait until a stop is requested (at most ``timeout`` seconds); whether it was."""
        return self._stop_event.wait(timeout)

    @contextlib.contextmanager
    def stop_on_exception(self) -> Iterator[None]:
        try:
            yield
        except BaseException:  # noqa: BLE001 - handed to the coordinator
            self.request_stop(sys.exc_info())

    def register_thread(self, thread: threading.Thread) -> None:
        with self._lock:
            self._registered.append(thread)

    def join(
        self,
        threads: list[threading.Thread] | None = None,
        stop_grace_period_secs: float = 120,
        ignore_live_threads: bool = False,
    ) -> None:
        """Wait for the registered threads and ``threads`` to end; once a stop is requested,
        give them ``stop_grace_period_secs`` more, then raise RuntimeError naming the live ones
        (unless ``ignore_live_threads``). Raises the exception given to ``request_stop``."""
        with self._lock:
            every = list({id(t): t for t in [*self._registered, *(threads or [])]}.values())
        while any(t.is_alive() for t in every) and not self.wait_for_stop(0.05):
            pass
        deadline = time.monotonic() + stop_grace_period_secs
        for t in every:
            t.join(max(0.0, deadline - time.monotonic()))
        live = [t.name for t in every if t.is_alive()]
        with self._lock:
            self._joined = True
            self._registered = []
            info = self._exc_info
        if info is not None:
            raise info[1].with_traceback(info[2])
        if live and not ignore_live_threads:
            raise RuntimeError(
                f"Coordinator stopped with threads still running after "
                f"{stop_grace_period_secs:g} s: {', '.join(live)}"
            )

    @property
    def joined(self) -> bool:
        return self._joined

    def raise_requested_exception(self) -> None:
        """Raise the exception given to ``request_stop``, if any."""
        with self._lock:
            info = self._exc_info
        if info is not None:
            raise info[1].with_traceback(info[2])


class LooperThread(threading.Thread):
    """TF1's ``tf.train.LooperThread``: calls ``target(*args, **kwargs)`` (or ``run_loop``) at
    once and then every ``timer_interval_secs`` (back to back when None) until ``coord`` stops;
    an exception stops the coordinator with it."""

    def __init__(
        self,
        coord: Coordinator,
        timer_interval_secs: float | None,
        target: Any = None,
        args: Any = None,
        kwargs: Any = None,
    ):
        if not isinstance(coord, Coordinator):
            raise ValueError(f"LooperThread: coord must be a Coordinator, got {coord!r}")
        super().__init__(daemon=True)
        self._coord = coord
        self._interval = timer_interval_secs
        self._target_fn = target
        self._args = tuple(args or ())
        self._kwargs = dict(kwargs or {})
        if target is None and type(self).run_loop is LooperThread.run_loop:
            raise ValueError("LooperThread: give a target or override run_loop")

    @staticmethod
    def loop(coord, timer_interval_secs, target, args=None, kwargs=None) -> LooperThread:
        """Start a LooperThread calling ``target`` and return it."""
        looper = LooperThread(coord, timer_interval_secs, target, args, kwargs)
        looper.start()
        return looper

    def run(self) -> None:
        with self._coord.stop_on_exception():
            self.start_loop()
            if self._interval is None:
                while not self._coord.should_stop():
                    self.run_loop()
            else:
                due = time.monotonic()
                while not self._coord.wait_for_stop(max(due - time.monotonic(), 0.0)):
                    due += self._interval
                    self.run_loop()
            self.stop_loop()

    def start_loop(self) -> None:
        """Called once before the loop."""

    def stop_loop(self) -> None:
        """Called once after the loop."""

    def run_loop(self) -> None:
        self._target_fn(*self._args, **self._kwargs)


class QueueRunner:
    """Threads that run ``enqueue_ops`` (one thread each) into ``queue`` until stopped.

    ``create_threads(sess, coord)`` makes them for one session (none if that session's threads
    of this runner are still running); ``exceptions_raised`` lists what stopped threads without
    a coordinator.
    """

    def __init__(
        self,
        queue: Any = None,
        enqueue_ops: list | None = None,
        close_op: Any = None,
        cancel_op: Any = None,
        queue_closed_exception_types: tuple | None = None,
        name: str | None = None,
    ):
        if queue is None or not enqueue_ops:
            raise ValueError("QueueRunner needs a queue and at least one enqueue op")
        self.queue = queue
        self.enqueue_ops = list(enqueue_ops)
        self.close_op = close_op if close_op is not None else queue.close()
        self.cancel_op = (
            cancel_op if cancel_op is not None else queue.close(cancel_pending_enqueues=True)
        )
        self.queue_closed_exception_types = tuple(
            queue_closed_exception_types or (OutOfRangeError, CancelledError)
        )
        self.name = name or queue.name
        self.exceptions_raised: list[BaseException] = []
        self._lock = threading.Lock()
        self._runs: dict[int, int] = {}  # id(session) -> threads still running

    def create_threads(
        self, sess: Any, coord: Coordinator | None = None, daemon: bool = False, start: bool = False
    ) -> list[threading.Thread]:
        key = id(sess)
        with self._lock:
            if self._runs.get(key, 0) > 0:
                return []  # this session's threads are still running
            self._runs[key] = len(self.enqueue_ops)
            self.exceptions_raised = []
        threads = [
            threading.Thread(
                target=self._run, args=(sess, op, coord), name=f"QueueRunner:{self.name}:{i}"
            )
            for i, op in enumerate(self.enqueue_ops)
        ]
        if coord is not None:
            threads.append(
                threading.Thread(
                    target=self._close_on_stop,
                    args=(sess, coord),
                    name=f"QueueRunner:{self.name}:close_on_stop",
                )
            )
        for t in threads:
            if coord is not None:
                coord.register_thread(t)
            t.daemon = daemon
            if start:
                t.start()
        return threads

    def _run(self, sess: Any, enqueue_op: Any, coord: Coordinator | None) -> None:
        name_this_thread("hetbed-queue")
        key, counted = id(sess), True
        try:
            while coord is None or not coord.should_stop():
                try:
                    sess.run(enqueue_op)
                except self.queue_closed_exception_types:
                    with self._lock:
                        self._runs[key] -= 1
                        counted = False
                        last = self._runs[key] == 0
                    if last:  # the last thread closes the queue: readers drain it, then stop
                        with contextlib.suppress(Exception):
                            sess.run(self.close_op)
                    return
                except RuntimeError:
                    if getattr(sess, "_closed", False):
                        return  # the session was closed under the thread: nothing to report
                    raise
        except Exception as e:  # noqa: BLE001 - reported to the coordinator or kept
            if coord is not None:
                coord.request_stop(e)
            else:
                with self._lock:
                    self.exceptions_raised.append(e)
                raise
        finally:
            if counted:
                with self._lock:
                    self._runs[key] -= 1

    def _close_on_stop(self, sess: Any, coord: Coordinator) -> None:
        name_this_thread("hetbed-queue")
        coord.wait_for_stop()
        with contextlib.suppress(Exception):  # the session may be closed already
            sess.run(self.cancel_op)


def add_queue_runner(qr: QueueRunner, collection: str = GraphKeys.QUEUE_RUNNERS) -> None:
    """Add ``qr`` to the default graph's queue runners (``start_queue_runners`` starts them)."""
    get_default_graph().add_to_collection(collection, qr)


def start_queue_runners(
    sess: Any = None,
    coord: Coordinator | None = None,
    daemon: bool = True,
    start: bool = True,
    collection: str = GraphKeys.QUEUE_RUNNERS,
) -> list[threading.Thread]:
    """Create (and start) the threads of every queue runner of ``sess``'s graph; returns them."""
    if sess is None:
        from ..session import get_default_session

        sess = get_default_session()
        if sess is None:
            raise ValueError("start_queue_runners: no session given and no default session")
    threads = []
    for qr in sess.graph.get_collection(collection):
        threads.extend(qr.create_threads(sess, coord=coord, daemon=daemon, start=start))
    return threads
