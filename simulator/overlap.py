"""A PS worker's step with its transfers overlapped with its compute, bucket by bucket.

TensorFlow's dataflow does not pull every variable, then compute, then push every gradient: a
forward op runs once the variables it reads have arrived, and each gradient leaves for its
parameter server as soon as the backward pass has computed it. The step-level PS drivers
(``SyncPS``, ``AsyncPS``) model this at the granularity of buckets of ``bucket_bytes``
(``profile.forward_buckets`` and ``profile.gradient_buckets``):

- **pulls**: the worker reads every variable in one ``PSNetwork`` transfer (TF starts every
  Recv of a step at once) whose bytes are taken to come in the order the forward pass reads
  them (variable order), at the transfer's average rate: bucket ``b`` is usable once that
  share of the bytes is in (and, with message costs, the worker's runtime has deserialized
  it, bucket after bucket);
- **compute** starts with the first bucket; it waits where the forward pass reaches a bucket
  not yet usable (bucket ``b`` is needed once the forward pass has done the share of its work
  that the bytes before ``b`` are of all bytes). A gradient is never ready before the forward
  pass has read every variable, so the whole timeline of the compute is known once the pull
  is in;
- **pushes** go one bucket after another in the order the backward pass produces the gradients
  (``ready_fractions``): a bucket leaves once its last gradient is computed (and serialized)
  and the previous bucket has arrived (one transfer in flight per worker and direction, which
  is what the network's symmetry-class solver needs; a bucket is spread over the PS groups as
  the step's bytes are); the PS counts a worker's gradient once every bucket of it has arrived
  at that shard, deserializing each part as it comes.

Every task on one machine (``machine_cores``) keeps the pull-compute-push step: its transfers
are copies by the same cores the compute needs.

With one bucket each way (a model of at most ``bucket_bytes``) this is exactly the old
pull-compute-push step, and the drivers run that path itself.
"""

from __future__ import annotations

import math
from typing import Any

from .fluid import Transfer


class OverlappedStep:
    """Mixin of ``_Driver``: plans the buckets and runs one overlapped worker step."""

    def _plan_buckets(self, fwd: list[tuple[float, float]], bwd: list[tuple[float, float]]) -> None:
        """``fwd``: ``[(needed at fraction of the compute, share of the step's bytes)]`` in pull
        order; ``bwd``: ``[(ready at fraction, share)]`` in push order."""
        self.overlap = len(fwd) > 1 or len(bwd) > 1
        self.fwd, self.bwd = fwd, bwd
        self.fwd_parts = [[(g, b * f) for g, b in self.parts] for _, f in fwd]
        self.bwd_parts = [[(g, b * f) for g, b in self.parts] for _, f in bwd]
        # where the compute meets a bucket: (fraction, 0, pull bucket needed) or (fraction, 1,
        # push bucket ready), in order
        self.ov_points = sorted(
            [(f, 0, b) for b, (f, _) in enumerate(fwd) if b]
            + [(r, 1, j) for j, (r, _) in enumerate(bwd)]
        )
        self.flying: list[list[Transfer]] = [[] for _ in range(self.n_tasks)]
        self.gen = [0] * self.n_tasks

    def _drop_flying(self, i: int) -> None:
        """Worker ``i`` abandons its step: cancel its transfers, ignore its pending callbacks."""
        self.gen[i] += 1
        for tr in self.flying[i]:
            self.net.cancel(tr)
        self.flying[i] = []

    def _at(self, t: float, fn: Any) -> None:
        """Call ``fn()`` at simulated time ``t`` (now if ``t`` has passed)."""
        env = self.env
        if t > env.now:
            env.timeout(t - env.now).callbacks.append(lambda _e: fn())
        else:
            fn()

    def _overlapped(self, i: int, g: Any, computed: Any) -> Any:
        """Worker ``i``'s step for gradient ``g`` (its ``tag`` names the step it computes for):
        pulls, compute and pushes overlapped (see the module docstring). ``computed()`` is
        called when the compute ends; ``g.phases`` gets (start, compute start, compute end,
        last push sent: NaN until then). Parts reach ``self._arrive(g, group, share)``."""
        env = self.env
        gen = self.gen[i]
        mine = self.flying[i]
        t0 = env.now
        if self.msg_on:
            yield from self._request(i)
        sent = env.now
        tr = self.net.pull(i, self.parts)
        mine.append(tr)
        yield tr.event
        mine.remove(tr)
        now = env.now
        # when each bucket was usable: its bytes in at the transfer's average rate, in order
        # (then deserialized by the worker's runtime, bucket after bucket)
        usable, done = [], 0.0
        for _, f in self.fwd:
            done += f
            t = sent + (now - sent) * min(done, 1.0)
            if self.msg_on:
                t = self._w_msg(i, t + self.w_lat, self.xfer_w * f)
            usable.append(t)
        s = self._compute_s(i, g.tag)
        # the compute's timeline: it starts with the first bucket and waits for each next one
        # where the forward pass reaches it; a gradient bucket is ready where the backward pass
        # has computed it
        t = t1 = usable[0]
        pos = 0.0
        ready = [0.0] * len(self.bwd)
        for frac, kind, k in self.ov_points:
            t += (frac - pos) * s
            pos = frac
            if kind == 0:
                t = max(t, usable[k])
            else:
                ready[k] = t
        t2 = t + (1.0 - pos) * s
        g.phases = (t0, t1, t2, math.nan)
        self._at(t2, lambda: computed() if self.gen[i] == gen else None)
        pushed = env.event()
        left = [len(self.bwd)]

        def push(j: int) -> None:
            if self.gen[i] != gen:
                return
            share = self.bwd[j][1]
            t = max(env.now, ready[j])
            if self.msg_on:  # the worker serializes the bucket (after the last: its reply)
                t = self._w_msg(i, t, self.xfer_w * share)
                if j == len(self.bwd) - 1 and not self.token_reply:
                    self._own_reply(i, t, self.reply_own_w)
            self._at(t, lambda: send(j, share))

        def send(j: int, share: float) -> None:
            if self.gen[i] != gen:
                return
            tr = self.net.push(i, self.bwd_parts[j], lambda grp, _n: self._arrive(g, grp, share))
            mine.append(tr)
            tr.event.callbacks.append(lambda _e: sent_(j, tr))

        def sent_(j: int, tr: Transfer) -> None:
            if self.gen[i] != gen:
                return
            mine.remove(tr)
            left[0] -= 1
            if left[0]:
                push(j + 1)
            else:
                g.phases = (*g.phases[:3], env.now)
                pushed.succeed()

        self._at(ready[0], lambda: push(0))
        yield pushed
