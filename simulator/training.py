"""Step-level simulation of distributed training: hundreds of workers, thousands of steps.

A ``ReplicaProfile`` says what one worker replica does per step: its compute time, the bytes of
each variable it pulls and pushes and the PS shard holding it, and the PS's cost to apply a
gradient (``profile_from_graph`` measures all of it on a hetbed graph with the op-level
simulator). Drivers replay that profile on a simulated cluster, as SimPy processes on one clock:

- ``SyncPS``: synchronous data parallelism with parameter servers and optional backup workers;
- ``AsyncPS``: asynchronous data parallelism; every gradient's staleness is recorded;
- ``AllReduceRing``: synchronous ring all-reduce among workers, no PS.

Every worker and PS task is a host on one non-blocking switch (``SwitchFabric``: hosts
``ps0..psK``, ``w0..wN``); parameter pulls and gradient pushes are fluid max-min flows, one per
(worker, shard) sized by that shard's bytes, so PS incast emerges from flows sharing a PS NIC.
``network="fast"`` (default) computes the same max-min rates on symmetry classes of workers and
of identical shards (``simulator/fluid.py``, exact for this topology); ``network="exact"`` runs
``simulator/network.py`` flow by flow (the reference; slow past a few thousand flows per step).

``run(steps)`` returns a ``TrainingResult`` of tidy DataFrames. Randomness comes only from the
straggler models' explicitly seeded generators, so one seed gives one result.

Layout: this module holds the PS drivers, ``allreduce.py`` the ring's; ``driver.py`` the
machinery they share (validation, failures and rollbacks, checkpoints, records, ``run``),
``hostcpu.py`` the hosts' message handlers and PS kernels, ``results.py`` the result frames and
``learner.py`` the hybrid hooks. Their public names are re-exported here.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any

import simpy

from .allreduce import AllReduceRing
from .driver import _Driver, _Grad
from .learner import Learner
from .profile import (
    DEFAULT_BUCKET_BYTES,
    ReplicaProfile,
    forward_buckets,
    gradient_buckets,
)
from .profiling import profile_from_graph
from .results import GRADIENT_COLUMNS, STEP_COLUMNS, TrainingResult, normalized_speedup

__all__ = [
    "AllReduceRing",
    "DEFAULT_BUCKET_BYTES",
    "AsyncPS",
    "GRADIENT_COLUMNS",
    "Learner",
    "ReplicaProfile",
    "STEP_COLUMNS",
    "SyncPS",
    "TrainingResult",
    "forward_buckets",
    "gradient_buckets",
    "normalized_speedup",
    "profile_from_graph",
]


class SyncPS(_Driver):
    """Synchronous training with parameter servers and ``n_backup`` backup workers.

    N = ``n_workers`` gradients make a step; N + b workers compute them. Each step, every worker
    pulls the current parameters from every PS shard, computes (``compute_s`` x its straggler
    factor) and pushes its gradient to every shard. A shard aggregates the first N gradients
    computed for the current step and drops the rest (late or stale: counted in ``dropped``);
    once every shard has N, each applies (its ``apply_s``), and the step is released.

    Which worker may compute what (``fast_worker_can_contribute_twice``):

    - False (the default; the "first m of n" of Chen et al., Revisiting Distributed
      Synchronous SGD, 2016): each worker contributes at most once per step; after pushing it
      waits for the next release (a worker whose gradient came too late starts on the current
      step at once).
    - True (TensorFlow's ``SyncReplicasOptimizer``): a token queue. Every worker starts step 0
      without a token and ``init_tokens`` tokens of step 0 are queued (default N, TF's
      ``get_init_tokens_op``); each release queues N + b tokens of the new step (TF's
      ``tokens_per_step``). After pushing, a worker takes the next token in FIFO order (waiting
      if none) and computes for the step it names: a fast worker may take a spare token and
      contribute twice to one step, and a token of an older step yields a gradient that is
      dropped as stale (as in TF, so with the default init tokens each worker's second gradient
      is usually stale; ``init_tokens=0`` avoids it).

    Messages (when the profile gives its hosts message costs; see ``_Driver._build_messages``):
    each worker step is a distributed step of its own session; ``sync_replicas`` (default: as
    ``fast_worker_can_contribute_twice``) adds the two scalars TF's SyncReplicasOptimizer moves
    per step (the worker's local step to each PS task, a token back) and its chief's queue
    runner: a session of its own in the chief's process (worker 0) that runs one step per
    global step, a RunGraph call on every PS task holding accumulators (their ops are all
    there: take the average gradients, apply them, queue the tokens). Each shard's update
    waits for that call; once the update is done the shard replies, and the chief receives the
    replies and runs the next step (Session.run's own work, ``worker_step_s``, and a request
    to each shard) on its process's time, as its own steps do. While the chief is down its
    queue runner costs nothing (the driver does not stop the job without its chief).

    A slow worker always finishes and pushes its gradient (it is then dropped). Each accepted
    gradient is added into its shard's accumulator as it arrives (``aggregate_s`` of the
    shard's variables, on the shard's CPU, one gradient after another: gradients arriving
    together queue), so only what is left of that work when the N-th arrives, and the apply,
    follow the last push; a dropped gradient costs nothing (its step is checked first).
    """

    kind = "SyncPS"

    def __init__(
        self,
        profile: ReplicaProfile,
        n_workers: int,
        n_backup: int = 0,
        n_ps: int | None = None,
        nic: Any = "eth_10g",
        *,
        fast_worker_can_contribute_twice: bool = False,
        init_tokens: int | None = None,
        sync_replicas: bool | None = None,
        **kw: Any,
    ):
        self.twice = bool(fast_worker_can_contribute_twice)
        self.sync_replicas = self.twice if sync_replicas is None else bool(sync_replicas)
        super().__init__(profile, n_workers, n_backup, n_ps, nic=nic, **kw)
        if init_tokens is None:
            init_tokens = self.n_workers
        if isinstance(init_tokens, bool) or int(init_tokens) != init_tokens or init_tokens < 0:
            raise ValueError(f"SyncPS: init_tokens must be an integer >= 0, got {init_tokens!r}")
        self.init_tokens = int(init_tokens)

    def _config(self) -> dict[str, Any]:
        return {"fast_worker_can_contribute_twice": self.twice}

    def _build(self) -> None:
        super()._build()
        self.release = self.env.event()
        self.tokens: deque[int] = deque([0] * self.init_tokens) if self.twice else deque()
        self.waiters: deque[tuple[int, simpy.Event]] = deque()
        self.last_tag = [-1] * self.n_tasks
        self.reply_at = [0.0] * self.n_tasks  # when each worker's token and reply arrive
        #: when each worker's last reply from another group arrives, and when its handler has
        #: taken them (each as it arrives)
        self.other_at = [0.0] * self.n_tasks
        self.other_end = [0.0] * self.n_tasks
        #: the chief's queue runner (sync_replicas with message costs): when each group's PS
        #: has its next RunGraph call, and when the chief has the last replies of the step
        self.qr_on = self.msg_on and self.sync_replicas
        # the queue runner's take of each variable waits for the step's last gradient, and a
        # worker waiting for its token for the update's enqueue: each blocked op is woken by
        # another step's thread, a hand-off its own thread pays on the PS (ps_wake_s)
        wake = self.profile.ps_wake_s if self.qr_on else 0.0
        self.take_wake = [wake * int(self.shards.iloc[ks[0]].variables) for ks in self.groups]
        self.token_wake = wake
        self.qr_ready = [0.0] * len(self.groups)
        self.qr_back = 0.0
        self.token_applied = 0.0
        self.replied: set[int] = set()  # waiters whose replies the update booked (token queue)
        self._reset_step()

    def _reset_step(self) -> None:
        G = len(self.groups)
        self.count = [0] * G
        self.closed = [False] * G
        self.acc: list[list[Any]] = [[] for _ in range(G)]
        self.contrib: list[set[int]] = [set() for _ in range(G)]
        self.n_applied = 0

    def _chainable(self) -> bool:
        """Without a learner, message costs, a shared machine, overlap, failures or a token
        queue, a worker's step is a chain of callbacks (``_chain_*``: the pull's end issues the
        push, to leave when the compute ends; the push's end starts the next step or waits for
        the release): no process and no SimPy event of its own, the same actions in the same
        order as ``_loop``'s plain branch (tested: identical frames). A process resumes after
        the events already due at its instant, a callback at once: the two orders agree unless
        a release can fall at the instant of a push's end, so every shard's take and update
        must take time (else the processes run)."""
        return (self._plain_steps() and not self.twice
                and all(self.group_take_s[g] + self.group_apply_s[g] > 0
                        for g in self.active_groups))  # fmt: skip

    def _chain_step(self, i: int, _event: Any = None) -> None:
        """Worker ``i`` starts a step: pulls, or waits for the release (``_loop``, plain)."""
        if self.step <= self.last_tag[i]:
            self.release.callbacks.append(partial(self._chain_step, i))
            return
        self._chain_pull(i, self.step, None)

    def _chain_done(self, i: int) -> None:
        """Worker ``i``'s push has ended: its step's end (``_chain_pull``)."""
        g = self._chain_state[i][3]
        self.inflight[i] = None
        t0, t1, t2, _ = g.phases
        now = self.env.now
        g.phases = (t0, t1, t2, now)
        self._pushed(g, now)
        self.last_tag[i] = g.tag
        self._chain_step(i)

    def _loop(self, i: int) -> Any:
        env, net, parts, learner = self.env, self.net, self.parts, self.learner
        tag = None
        msg = self.msg_on
        plain = not msg and self.machine is None
        stepped = False
        while True:
            if self.twice:
                if tag is None or self.last_tag[i] < 0:
                    tag = self.step  # a (re)started worker computes for the current step
                elif self.tokens:
                    tag = self.tokens.popleft()
                    if msg:  # its partitions on the PS tasks end with the token it took
                        self._token_replies(i)
                else:
                    ev = env.event()
                    self.waiters.append((i, ev))
                    tag = yield ev
            else:
                while self.step <= self.last_tag[i]:
                    yield self.release
                tag = self.step
            if msg and stepped:  # the last step's RunGraph calls on the PS tasks return
                yield from self._replied(i)
            stepped = True
            read = self.step
            params = learner.read(i, read, env.now) if learner is not None else None
            if self.overlap:
                g = _Grad(i, tag, read)
                g.pending = [len(self.bwd)] * len(self.groups)
                yield from self._overlapped(i, g, self._gradient_hook(g, i, params))
                self._pushed(g)
                self.last_tag[i] = tag
                continue
            t0 = env.now
            if plain:  # (_pull and _compute without messages or a shared machine, inlined)
                tr = self.inflight[i] = net.pull(i, parts)
                yield tr.event
                t1 = env.now
                c = self._compute_s(i, tag)
                if learner is None:  # the push issued as the compute starts, to leave as it ends
                    g = _Grad(i, tag, read)
                    tr = self.inflight[i] = net.push(
                        i, parts, lambda grp, now, g=g: self._arrive(g, grp), c
                    )
                    yield tr.event
                    self.inflight[i] = None
                    g.phases = (t0, t1, t1 + c, env.now)
                    self._pushed(g)
                    self.last_tag[i] = tag
                    continue
                yield env.timeout(c)
            else:
                yield from self._pull(i)
                t1 = env.now
                yield from self._compute(i, tag)
            g = _Grad(i, tag, read)
            t2 = env.now
            if learner is not None:
                g.value = learner.gradient(i, params, env.now)
            if msg:
                yield from self._handle(i, sending=True)
            tr = self.inflight[i] = net.push(i, parts, lambda grp, now, g=g: self._arrive(g, grp))
            if not plain:
                g.copied = self._copy(i)
            yield tr.event
            self.inflight[i] = None
            g.phases = (t0, t1, t2, env.now)
            self._pushed(g)
            self.last_tag[i] = tag

    def _arrive(
        self,
        g: _Grad,
        grp: int,
        share: float = 1.0,
        copied: float | None = None,
        now: float | None = None,
    ) -> None:
        """Gradient ``g``'s part for group ``grp`` arrives (``share`` of its bytes: a bucket of
        an overlapped step, counted once its last bucket is in) at ``now`` (the clock's)."""
        now = max(self.env.now if now is None else now, g.copied if copied is None else copied)
        if self.msg_on:  # the shard receives the gradient (and the call for it) first
            cost = self.xfer_ps[grp] * share
            now = self._ps_msg(grp, now + self.ps_lat, cost, owner=g.worker)
        if g.pending is not None:
            g.pending[grp] -= 1
            if g.pending[grp]:
                return
        if (
            g.tag == self.step
            and not self.closed[grp]
            and not self.ps_down
            and (self.twice or g.worker not in self.contrib[grp])
        ):
            g.ok += 1
            self.count[grp] += 1
            if not self.twice:
                self.contrib[grp].add(g.worker)
            if self.learner is not None:
                self.acc[grp].append(g.value)
            done = self._ps_kernel(
                grp, now, self.group_aggregate_s[grp], self.group_aggregate_serial_s[grp]
            )
            if self.ctrl_ps and grp != self.token_group:  # (the token queue's control edge)
                self._to_token_ps(grp, done, g.worker)
            if self.count[grp] == self.n_workers:
                self.closed[grp] = True
                epoch = self.epoch
                if self.qr_on and self.qr_ready[grp] > done:  # (the queue runner's call)
                    done = self.qr_ready[grp]
                if self.take_wake[grp]:  # (the takes woken, on the PS's runtime thread)
                    done = self._ps_msg(grp, done, self.take_wake[grp])
                work = self.group_take_s[grp] + self.group_apply_s[grp]  # take, then apply
                serial = self.group_take_serial_s[grp] + self.group_apply_serial_s[grp]
                applied = self._ps_kernel(grp, done, work, serial)
                if self.ctrl_ps and grp != self.token_group:  # the global step's task hears
                    known = self._to_token_ps(grp, applied, "qr")  # of the update: then done
                    self._step_replies(grp, applied)
                    applied = known
                elif self.ctrl_ps:  # (the global step's task replies once every shard is done)
                    self.token_applied = applied
                else:
                    self._step_replies(grp, applied)
                wait = applied - self.env.now
                self.env.timeout(wait).callbacks.append(lambda _e: self._applied(epoch))
        else:
            g.bad += 1

    def _to_token_ps(self, grp: int, at: float, owner: Any) -> float:
        """Each shard of group ``grp`` sends the global step's task a control message (a
        RecvTensor call: the edge of a control dependency) of ``owner``'s step from ``at``;
        returns when that task has handled them all."""
        sent = self._ps_msg(grp, at, self.ctrl_ps, owner=owner)
        lat = self.ps_nic.latency_s + self.ps_lat
        n = len(self.groups[grp])
        return self._ps_msg(self.token_group, sent + lat, 0.0, self.ctrl_ps * n, owner)

    def _step_replies(self, grp: int, at: float) -> None:
        """Group ``grp``'s part of the step is done at ``at``: its replies to the queue runner,
        then to the workers."""
        if self.qr_on:
            back = self._ps_msg(grp, at, self.msg_ps, owner="qr") + self._to_worker(0)
            if grp != self.token_group:  # (the token group's: with the queue runner's next call)
                self._at(back, partial(self._reply_in, 0, self.reply_w_of[grp], None, "qr"))
            elif back > self.qr_back:
                self.qr_back = back
        if self.msg_on:
            self._ps_replies(grp, at)

    def _ps_replies(self, grp: int, at: float) -> None:
        """A shard's partition of the step is done at ``at``: it replies to every worker's
        RunGraph call, one after another (on one machine each shard's handler in its own
        sequence: a shard does not wait for another's reply); each reply reaches its worker
        after the latency. Only the global step's task serves the tokens. With a token queue,
        to the workers waiting for one now (the others have theirs when they take a token:
        ``_token_replies``)."""
        token = self.token_ps if grp == self.token_group else 0.0
        workers = range(self.n_tasks)
        if self.twice:
            workers = [w for w, _ in self.waiters if w not in self.replied]
            self.replied.update(workers)
        if token and self.token_wake:  # the update's enqueue wakes each waiting dequeue first
            at = self._ps_msg(grp, at, 0.0, self.token_wake * len(workers))
        for i in workers:
            t = self._ps_msg(grp, at, self.msg_ps, token, i)
            self._reply_to(i, grp, t + self._to_worker(i))

    def _reply_to(self, i: int, grp: int, arrive: float) -> None:
        """Group ``grp``'s reply reaches worker ``i`` at ``arrive``: the token's group's (with
        the token) is taken by ``_replied``, another's by the worker's handler as it arrives."""
        if grp == self.token_group:
            if arrive > self.reply_at[i]:
                self.reply_at[i] = arrive
            return
        if arrive > self.other_at[i]:
            self.other_at[i] = arrive
        self._at(arrive, partial(self._reply_in, i, self.reply_w_of[grp], self.other_end))

    def _reply_in(
        self, i: int, seconds: float, ends: list[float] | None, owner: Any = None
    ) -> None:
        end = self._w_msg(i, self.env.now, seconds, owner)
        if ends is not None and end > ends[i]:
            ends[i] = end

    def _token_replies(self, i: int) -> None:
        """Worker ``i`` takes a token (one already queued, or one the release hands it): its
        step's partitions on the PS tasks are done now (the global step's task has served the
        token), and each replies, behind what its handler is doing (another worker's gradient,
        the update)."""
        now = self.env.now
        self.reply_at[i] = now
        for g in self.active_groups:
            token = self.token_ps if g == self.token_group else 0.0
            sent = self._ps_msg(g, now, self.msg_ps, token, i)
            self._reply_to(i, g, sent + self._to_worker(i))

    def _replied(self, i: int) -> Any:
        """Worker ``i`` receives the PS tasks' replies to its last step's calls: the other
        groups' as they arrive (``_reply_to``), the token's group's, with the token, here."""
        env = self.env
        if self.other_at[i] > env.now:  # (every reply has arrived)
            yield env.timeout(self.other_at[i] - env.now)
        now = env.now
        cost = self.reply_w_of[self.token_group] + self.token_w
        if self.fetch_bytes and self.token_reply:  # its own task's reply, with what it fetches
            cost -= self.token_own_w
            end = self._w_msg(i, max(now, self.reply_at[i]), cost)
            end = self._own_reply(i, end, self.token_own_w)
        else:
            end = self._w_msg(i, max(now, self.reply_at[i]), cost)
        end = max(end, self.other_end[i], self.own_at[i])
        if end > now:
            yield env.timeout(end - now)

    def _pushed(self, g: _Grad, now: float | None = None) -> None:
        accepted = g.bad == 0
        if not accepted:
            rec = self.rec_of.get(g.tag)
            if rec is not None:
                rec[4] += 1
        if now is None:
            now = self.env.now
        self.grad_log.add(
            g.worker, g.read, g.tag, g.tag if accepted else -1, now, accepted, g.phases
        )

    def _applied(self, epoch: int) -> None:
        if epoch != self.epoch:
            return
        self.n_applied += 1
        if self.n_applied < self.n_active_groups:
            return
        now = self.env.now
        if self.ctrl_ps:  # every shard is done: the global step's task's replies (the tokens)
            self._step_replies(self.token_group, max(now, self.token_applied))
        rec = self.rec_of[self.step]
        rec[2] = now
        rec[3] = self.n_workers
        if self.learner is not None:
            per_shard = [self.acc[self.group_of[k]] for k in range(self.n_ps)]
            self.learner.apply_sync(per_shard, self.step, now)
        if self.qr_on:
            self._queue_runner_step(now)
        self._reset_step()
        self._count_step()
        stall = self._maybe_checkpoint()
        if stall > 0:
            epoch = self.epoch
            self.env.timeout(stall).callbacks.append(
                lambda _e: self._open_step() if epoch == self.epoch else None
            )
        else:
            self._open_step()

    def _queue_runner_step(self, now: float) -> None:
        """The chief's queue runner receives the shards' replies to its last step and runs
        the next one: Session.run's own work and a RunGraph request to every shard, each of
        which receives it (see the class docstring)."""
        if self.down_until[0] > now:
            return
        cost = self.reply_w_of[self.token_group] + self.req_ps_w  # (the other replies: in)
        t = self._w_msg(0, max(now, self.qr_back), cost, "qr")
        for g in self.active_groups:
            got = self._ps_msg(g, t + self._to_ps(0), self.msg_ps, owner="qr")
            if self.qr_inputs_ps and g != self.token_group:  # the update's other inputs,
                # asked of the global step's task (where the optimizer's ops are)
                lat = self.ps_nic.latency_s + self.ps_lat
                n = len(self.groups[g])
                served = self._ps_msg(self.token_group, got + lat, 0.0, self.qr_inputs_ps * n, "qr")
                got = self._ps_msg(g, served + lat, self.qr_inputs_ps, owner="qr")
            self.qr_ready[g] = got

    def _open_step(self) -> None:
        now = self.env.now
        self._open_record(self.step, now)
        if self.twice:
            self.tokens.extend([self.step] * self.n_tasks)
            while self.waiters and self.tokens:
                i, ev = self.waiters.popleft()
                if self.msg_on and i not in self.replied:  # (it began waiting since)
                    self._token_replies(i)
                ev.succeed(self.tokens.popleft())
            self.replied.clear()
        else:
            ev, self.release = self.release, self.env.event()
            ev.succeed()

    def _abandon(self, i: int) -> None:
        super()._abandon(i)
        if any(w == i for w, _ in self.waiters):
            self.waiters = deque(x for x in self.waiters if x[0] != i)

    def _stall(self) -> None:
        self._reset_step()
        self._reset_cpus()
        self.qr_ready = [0.0] * len(self.groups)
        self.qr_back = 0.0
        self.tokens.clear()
        self.waiters.clear()

    def _rollback(self, step: int) -> None:
        super()._rollback(step)
        self.last_tag = [-1] * self.n_tasks

    def _reopen(self, now: float) -> None:
        self._reset_step()
        self.last_tag = [-1] * self.n_tasks
        if self.twice:
            self.tokens = deque([self.step] * self.init_tokens)  # as at the start


class AsyncPS(_Driver):
    """Asynchronous training with parameter servers: each worker loops pull -> compute -> push
    -> wait until its gradient is applied, on its own. Each PS shard applies the gradients it
    receives one at a time in arrival order (``apply_s`` each); a gradient is applied once every
    shard has applied its part, and then the global step advances by one. Each gradient's
    staleness is the global step at its apply minus the global step when its worker read.
    ``n_backup`` must be 0 (backups have no meaning without synchronization).
    """

    kind = "AsyncPS"

    def __init__(
        self,
        profile: ReplicaProfile,
        n_workers: int,
        n_ps: int | None = None,
        nic: Any = "eth_10g",
        **kw: Any,
    ):
        if kw.get("n_backup"):
            raise ValueError("AsyncPS: backup workers need synchronous training (use SyncPS)")
        kw.pop("n_backup", None)
        super().__init__(profile, n_workers, 0, n_ps, nic=nic, **kw)

    def _chainable(self) -> bool:
        """Without a learner, message costs, a shared machine, overlap or failures, a worker's
        step is a chain of callbacks (as SyncPS's): the pull's end issues the push, to leave
        when the compute ends, and the gradient's apply (its event, kept so that the next step
        starts where the process would resume) starts the next step. The same frames as the
        processes (tested), two SimPy events a step fewer."""
        return self._plain_steps()

    def _chain_step(self, i: int, _event: Any = None) -> None:
        self._chain_pull(i, self.step, partial(self._chain_computing, i))

    def _chain_computing(self, i: int, g: _Grad) -> Callable[[], None]:
        g.left = len(self.parts)
        g.event = self.env.event()  # (applied: the next step starts where the process would)
        g.event.callbacks.append(partial(self._chain_step, i))
        g.copied = 0.0
        return partial(self._push_done, g)

    def _loop(self, i: int) -> Any:
        env, net, parts, learner = self.env, self.net, self.parts, self.learner
        msg = self.msg_on
        while True:
            read = self.step
            params = learner.read(i, read, env.now) if learner is not None else None
            if self.overlap:
                g = _Grad(i, read, read)
                g.left = len(parts) * len(self.bwd)
                g.event = env.event()
                yield from self._overlapped(i, g, self._gradient_hook(g, i, params))
                yield g.event
                if msg:
                    yield from self._reply(i)
                continue
            t0 = env.now
            yield from self._pull(i)
            t1 = env.now
            if not msg and self.machine is None and learner is None:
                # (as SyncPS's: the push issued as the compute starts, to leave as it ends)
                c = self._compute_s(i, read)
                g = _Grad(i, read, read)
                g.phases = (t0, t1, t1 + c, math.nan)
                g.left = len(parts)
                g.event = env.event()
                tr = self.inflight[i] = net.push(
                    i, parts, lambda grp, now, g=g: self._arrive(g, grp), c
                )
                g.copied = 0.0
                tr.event.callbacks.append(lambda _e, g=g: self._push_done(g))
                yield g.event
                self.inflight[i] = None
                continue
            yield from self._compute(i, read)
            g = _Grad(i, read, read)
            g.phases = (t0, t1, env.now, math.nan)
            if learner is not None:
                g.value = learner.gradient(i, params, env.now)
            g.left = len(parts)
            g.event = env.event()
            if msg:
                yield from self._handle(i, sending=True)
            tr = self.inflight[i] = net.push(i, parts, lambda grp, now, g=g: self._arrive(g, grp))
            g.copied = self._copy(i)
            tr.event.callbacks.append(lambda _e, g=g: self._push_done(g))
            yield g.event
            self.inflight[i] = None
            if msg:
                yield from self._reply(i)

    def _arrive(
        self,
        g: _Grad,
        grp: int,
        share: float = 1.0,
        copied: float | None = None,
        now: float | None = None,
    ) -> None:
        """Gradient ``g``'s part for group ``grp`` arrives (``share`` of its bytes: a bucket of
        an overlapped step, applied as it comes) at ``now`` (the clock's)."""
        if now is None:
            now = self.env.now
        start = max(now, g.copied if copied is None else copied)
        if self.msg_on:
            cost = self.xfer_ps[grp] * share
            start = self._ps_msg(grp, start + self.ps_lat, cost, owner=g.worker)
        end = self._ps_kernel(
            grp, start, self.group_apply_s[grp] * share, self.group_apply_serial_s[grp] * share
        )
        if end == now:
            self._part_applied(g, self.epoch)
        else:
            epoch = self.epoch
            self.env.timeout(end - now).callbacks.append(lambda _e: self._part_applied(g, epoch))

    def _push_done(self, g: _Grad) -> None:
        g.phases = (*g.phases[:3], self.env.now)

    def _part_applied(self, g: _Grad, epoch: int) -> None:
        if epoch != self.epoch:
            return
        g.left -= 1
        if g.left:
            return
        now = self.env.now
        step = self.step
        if math.isnan(g.phases[3]):  # applied the moment its last part arrived
            g.phases = (*g.phases[:3], now)
        self.grad_log.add(g.worker, g.read, g.read, step, now, True, g.phases)
        rec = self.rec_of[step]
        rec[2] = now
        rec[3] = 1
        if self.learner is not None:
            self.learner.apply_async(g.value, step, now)
        self._count_step()
        self._maybe_checkpoint()
        self._open_record(self.step, now)
        g.event.succeed()

    def _step_examples(self, rec: list[Any]) -> int:
        return self.profile.examples_per_step

    def _stall(self) -> None:
        self._reset_cpus()
