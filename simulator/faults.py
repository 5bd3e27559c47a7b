"""The worker processes of a step-level driver under failures (``WorkerFaults``, a mixin of
driver.py's ``_Driver``): a worker's loop restarted after it is interrupted, a task or the whole
job failing at its scheduled time, the rollback to the last checkpoint and the restart, and
checkpoints taken as the steps finish. It uses the driver's state: ``env``, ``procs``,
``failures``, ``records`` and ``rec_of``, ``step``, ``ckpt_step``, ``epoch``, ``ps_down`` and
``ps_up``, ``down_until``, ``inflight``, ``learner``."""

from __future__ import annotations

import math
from typing import Any

import simpy

from .failures import Failure
from .fluid import Transfer


class WorkerFaults:
    """Failures, rollback and restart of a step-level driver's workers (see the module)."""

    def _worker(self, i: int) -> Any:
        while True:
            try:
                yield from self._loop(i)
            except simpy.Interrupt:
                self._abandon(i)
            while True:  # down: wait for this worker's restart and for the PS
                try:
                    yield from self._wait_up(i)
                    break
                except simpy.Interrupt:
                    self._abandon(i)

    def _wait_up(self, i: int) -> Any:
        env = self.env
        while True:
            if env.now < self.down_until[i]:
                yield env.timeout(self.down_until[i] - env.now)
            elif self.ps_down:
                yield self.ps_up
            else:
                return

    def _loop(self, i: int) -> Any:
        raise NotImplementedError
        yield  # pragma: no cover

    def _abandon(self, i: int) -> None:
        tr = self.inflight[i]
        if isinstance(tr, Transfer):
            self.net.cancel(tr)
        self.inflight[i] = None
        if self.uses_ps:
            self._drop_flying(i)

    def _fail_loop(self) -> Any:
        env = self.env
        for f in self.failures:
            if f.at_s > env.now:
                yield env.timeout(f.at_s - env.now)
            self._fail(f)

    def _fail(self, f: Failure) -> None:
        now = self.env.now
        rollback = f.rollback if f.rollback is not None else (f.kind == "ps" or not self.uses_ps)
        everyone = f.kind == "ps" or rollback
        row = {
            "kind": f.kind,
            "index": f.index,
            "at_s": now,
            "restart_s": now + f.restart_delay_s,
            "step_at_failure": self.step,
            "restored_step": self.step,
            "steps_lost": 0,
        }
        self.failure_rows.append(row)
        if not everyone:
            self.down_until[f.index] = max(self.down_until[f.index], now + f.restart_delay_s)
            self._interrupt(f.index)
            return
        if rollback:
            lost = self.step - self.ckpt_step
            row["restored_step"] = self.ckpt_step
            row["steps_lost"] = lost
            for rec in self.records:
                if rec[0] >= self.ckpt_step and not math.isnan(rec[2]):
                    rec[5] = True
            self._rollback(self.ckpt_step)
            if self.learner is not None:
                self.learner.restore(self.ckpt_step)
        self.epoch += 1
        self.ps_down = True
        for i in range(self.n_tasks):
            self._interrupt(i)
        self._stall()
        epoch = self.epoch
        self.env.timeout(f.restart_delay_s).callbacks.append(lambda _e: self._restart(epoch))

    def _interrupt(self, i: int) -> None:
        p = self.procs[i]
        if p.is_alive and p is not self.env.active_process:
            p.interrupt("failure")

    def _rollback(self, step: int) -> None:
        """Go back to the checkpoint at ``step`` (the unfinished step's record stays unfinished
        and is left out of the result)."""
        self.step = step
        self.rec_of = {s: r for s, r in self.rec_of.items() if s < step}

    def _stall(self) -> None:
        """Everything stops (a PS or the job failed); subclasses drop per-step state."""

    def _restart(self, epoch: int) -> None:
        if epoch != self.epoch:
            return  # another failure since: its restart will come
        now = self.env.now
        self.ps_down = False
        if self.step not in self.rec_of:  # rolled back: the step starts again now
            self._open_record(self.step, now)
        self._reopen(now)
        ev, self.ps_up = self.ps_up, self.env.event()
        ev.succeed()

    def _reopen(self, now: float) -> None:
        """After a global restart: let the workers start the current step again."""

    def _maybe_checkpoint(self) -> float:
        """Checkpoint after the step just finished if due; returns the stall it costs (a
        synchronous driver delays the next step by it; asynchronous workers keep going)."""
        if self.checkpoint_every and self.step % self.checkpoint_every == 0:
            self.ckpt_step = self.step
            if self.learner is not None:
                self.learner.checkpoint(self.step)
            return self.checkpoint_s
        return 0.0
