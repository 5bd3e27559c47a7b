"""Several clients stepping at once on one simulated cluster: between-graph replication op by op.

On a real cluster every worker runs its own client (its own graph, its own ``Session.run``
loop) and the chief's queue runner one more; they meet only through what the tasks hold
(variables, accumulators, the token queue), each step starting when that client's last one
returned. ``run_clients(cluster, programs)`` runs each program (a function making ``sess.run``
calls on SimSessions of ``cluster``) as one such client: each step of each client goes through
the executor's one clocked schedule, and the clients take turns in simulated-time order.

How: every program runs in a thread of its own, but only one thread runs at a time (a baton
passed by ``threading.Event``); the simulation stays deterministic. A client's step waits on a
``_ClientClock``, which the executor binds to its heap of timed ends and its completions
(``run_clocked``'s ``bind``). When a step has nothing to do before the next thing on the shared
clock, the conductor picks what happens next, in this order: a client that is ready to run
(started, or its step's replies are in), a step with completions waiting (another client's op
completed its queue dequeue or accumulator take), then the earliest of the SimPy clock's next
event, each waiting step's next timed end and each sleeping client's wake-up time (the SimPy
event first at a tie, then the lower client). A step resumed for its timed end is let pop it
(its clock's ``peek`` looks past that one entry). Each step keeps the clock at its own time
(the executor advances a bound clock at every timed end), so whatever a step does to a shared
resource happens at the time it happens.

A SimSession notices that it runs inside ``run_clients`` (its cluster's ``conductor``): it waits
for its RunGraph requests to arrive before its step starts and for its replies after it, by
sleeping on the conductor instead of advancing the clock; it leaves the devices' records to
the other clients (no reset between steps) and keeps, in each RunRecord, the ops of its own
graph. Sessions that should share the tasks' resources (variables, queues, accumulators: one
server's, as on a real cluster) are made with ``SimSession(..., shared_resources=True)``.

When every client waits and nothing is scheduled, the clients are stuck (a dequeue that no
enqueue will serve): each waiting client's step fails with FailedPreconditionError naming it.
An exception in a program ends that client; ``run_clients`` raises the first one once the others
have finished.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

from hetbed.runtime.errors import FailedPreconditionError

__all__ = ["run_clients"]

_INF = math.inf


class _Client:
    """One program's thread and what the conductor knows of it."""

    __slots__ = ("index", "name", "fn", "go", "state", "timers", "completions", "wake",
                 "forced", "error", "thread")  # fmt: skip

    def __init__(self, index: int, name: str, fn: Callable[[], Any]):
        self.index, self.name, self.fn = index, name, fn
        self.go = threading.Event()
        self.state = "ready"  # ready | running | waiting | sleeping | done
        self.timers: list | None = None  # the waiting step's heap of timed ends (bound)
        self.completions: Any = None  # ... and its completions
        self.wake = _INF  # sleeping: until when
        self.forced: Any = None  # the timed end this client was resumed to pop
        self.error: BaseException | None = None
        self.thread: threading.Thread | None = None


class _ClientClock:
    """The clock protocol for one client's step (see the module docstring)."""

    __slots__ = ("conductor", "client", "env")

    def __init__(self, conductor: Conductor, client: _Client):
        self.conductor, self.client, self.env = conductor, client, conductor.env

    @property
    def now(self) -> float:
        return self.env.now

    def bind(self, timers: list, completions: Any) -> None:
        self.client.timers, self.client.completions = timers, completions

    def peek(self) -> float:
        c = self.client
        if c.forced is not None:
            if c.timers and c.timers[0] is c.forced:
                return _INF  # resumed to pop this timed end: nothing comes first
            c.forced = None
        return min(self.env.peek(), self.conductor.others_next(c))

    def step(self) -> None:
        self.conductor.wait(self.client, "waiting")

    def advance(self, t: float) -> None:
        self.env.advance(t)


class Conductor:
    """Runs client programs in turn on ``env`` (see the module docstring)."""

    def __init__(self, env: Any):
        self.env = env
        self.clients: list[_Client] = []
        self.local = threading.local()
        self.finished = threading.Event()
        self.stuck = False

    # ---- what sessions ask ------------------------------------------------------------------

    def client(self) -> _Client | None:
        """The client whose thread calls (None outside the programs)."""
        return getattr(self.local, "client", None)

    def clock(self) -> _ClientClock:
        c = self.client()
        if c is None:
            raise RuntimeError("the conductor's clock is for its clients' threads only")
        return _ClientClock(self, c)

    def sleep_until(self, t: float) -> None:
        """The calling client waits until the clock reads ``t`` (its step's replies are in)."""
        c = self.client()
        if c is None:
            raise RuntimeError("sleep_until is for the conductor's clients' threads only")
        if t > self.env.now:
            c.wake = t
            self.wait(c, "sleeping")

    # ---- taking turns -----------------------------------------------------------------------

    def others_next(self, me: _Client) -> float:
        """The earliest time another client has something to do (now if one is ready)."""
        best = _INF
        now = self.env.now
        for d in self.clients:
            if d is me:
                continue
            st = d.state
            if st == "ready" or (st == "waiting" and d.completions):
                return now
            if st == "waiting" and d.timers:
                t = d.timers[0][0]
            elif st == "sleeping":
                t = d.wake
            else:
                continue
            if t < best:
                best = t
        return best

    def wait(self, c: _Client, state: str) -> None:
        """Client ``c`` (running) waits: others run, or the clock moves, until ``c`` may go on."""
        c.state = state
        try:
            while True:
                pick = self._pick()
                if pick is c:
                    return
                if pick == "env":
                    self.env.step()
                    continue
                if pick is None:
                    self.stuck = True
                    raise FailedPreconditionError(
                        f"simulated clients are stuck: {self._waiting_names()} wait and nothing "
                        "is scheduled (a dequeue or take that no other client will serve)"
                    )
                self._resume(pick)
                c.go.wait()
                c.go.clear()
                if self.stuck:
                    raise FailedPreconditionError(
                        f"simulated clients are stuck: {c.name} waits and nothing is scheduled"
                    )
                return
        finally:
            c.state = "running"
            c.wake = _INF

    def _waiting_names(self) -> str:
        return ", ".join(d.name for d in self.clients if d.state in ("waiting", "sleeping"))

    def _pick(self) -> Any:
        """What happens next: a client to resume, "env" (step the SimPy clock), or None (stuck)."""
        for d in self.clients:
            if d.state == "ready":
                return d
        for d in self.clients:
            if d.state == "waiting" and d.completions:
                return d
        t_env = self.env.peek()
        best, bt = None, _INF
        for d in self.clients:
            if d.state == "waiting" and d.timers:
                t = d.timers[0][0]
            elif d.state == "sleeping":
                t = d.wake
            else:
                continue
            if t < bt:
                best, bt = d, t
        if best is None or t_env <= bt:
            return "env" if t_env < _INF else None
        if best.state == "sleeping":
            if bt > self.env.now:
                self.env.advance(bt)
        else:
            best.forced = best.timers[0]
        return best

    def _resume(self, d: _Client) -> None:
        d.go.set()

    def _hand_on(self) -> None:
        """The running client has finished: the next one runs, or the run is over."""
        if all(d.state == "done" for d in self.clients):
            self.finished.set()
            return
        pick = self._pick()
        while pick == "env":
            self.env.step()
            pick = self._pick()
        if pick is None:  # every client left waits for something no one will do
            self.stuck = True
            pick = next(d for d in self.clients if d.state in ("waiting", "sleeping"))
        self._resume(pick)

    def _body(self, c: _Client) -> None:
        c.go.wait()
        c.go.clear()
        self.local.client = c
        c.state = "running"
        try:
            c.fn()
        except BaseException as e:  # noqa: BLE001 - reported by run_clients
            c.error = e
        c.state = "done"
        c.timers = c.completions = None
        if not self.stuck:
            self._hand_on()
            return
        for d in self.clients:  # wake the others so that they fail too
            if d.state in ("waiting", "sleeping"):
                self._resume(d)
                return
        self.finished.set()

    def run(self, programs: Sequence[Callable[[], Any]], names: Sequence[str]) -> None:
        self.clients = [_Client(k, n, fn) for k, (n, fn) in enumerate(zip(names, programs))]
        for c in self.clients:
            c.thread = threading.Thread(target=self._body, args=(c,), daemon=True,
                                        name=f"hetbed-client-{c.name}")  # fmt: skip
            c.thread.start()
        self._resume(self.clients[0])
        self.finished.wait()
        for c in self.clients:
            c.thread.join()
        errors = [c.error for c in self.clients if c.error is not None]
        if errors:
            raise errors[0]


def run_clients(
    cluster: Any, programs: Sequence[Callable[[], Any]], names: Sequence[str] | None = None
) -> None:
    """Run ``programs`` (functions of no argument, each one client making ``sess.run`` calls on
    SimSessions of ``cluster``) at once in simulated time, as a cluster's clients run (see the
    module docstring); returns when every one has returned. ``names`` label them in errors.
    Raises the first exception a program raised (the others run to their end or get stuck
    and fail), ValueError for no programs or a cluster already running clients."""
    programs = list(programs)
    if not programs:
        raise ValueError("run_clients: no programs to run")
    names = [f"client {k}" for k in range(len(programs))] if names is None else list(names)
    if len(names) != len(programs):
        raise ValueError(f"run_clients: {len(names)} names for {len(programs)} programs")
    if getattr(cluster, "conductor", None) is not None:
        raise ValueError("run_clients: this cluster is already running clients")
    conductor = Conductor(cluster.env)
    cluster.conductor = conductor
    try:
        conductor.run(programs, names)
    finally:
        cluster.conductor = None
