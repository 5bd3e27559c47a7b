"""``AllReduceRing``: step-level synchronous data parallelism by ring (or tree) all-reduce
among workers, no PS (see ``simulator/training.py`` for the step-level drivers' model)."""

from __future__ import annotations

import math
from typing import Any

from .collectives import ring_all_reduce, tree_all_reduce
from .driver import _Driver
from .fluid import PSNetwork, ring_allreduce_time
from .profile import DEFAULT_BUCKET_BYTES, ReplicaProfile, _nonneg, gradient_buckets

__all__ = ["AllReduceRing"]


class AllReduceRing(_Driver):
    """Synchronous data parallelism by ring all-reduce among ``n_workers`` workers, no PS.

    Each step every worker computes (``compute_s`` x its straggler factor); its gradients become
    ready during the backward pass (``ReplicaProfile.ready_fractions``) and are reduced in
    buckets of ``bucket_bytes`` (``gradient_buckets``; None: one bucket of every gradient, after
    the compute). A bucket's ring all-reduce starts once every worker has its gradients and the
    previous bucket's all-reduce has finished (the buckets of one ring run one after another, as
    the collectives of one NCCL communicator): 2(N-1) rounds, in each of which every worker
    sends a chunk of the bucket's bytes/N to its ring successor over the switch (see
    ``fluid.ring_allreduce_time``). The last bucket waits for the whole compute, so a step is at
    least the compute plus the last bucket's all-reduce. Then every worker applies the averaged
    gradient on its own device (``apply_s``, default the profile's ``worker_apply_s_of`` summed
    over the variables) and starts the next step. ``network="exact"`` sends every chunk as a
    ``Network`` flow instead of the closed recurrence. ``algorithm="tree"`` reduces each bucket
    by NCCL's double binary tree, its chunks always flows (simulator/collectives.py). Any
    worker failure restarts the job from the last checkpoint.
    """

    kind = "AllReduceRing"
    uses_ps = False

    def __init__(
        self,
        profile: ReplicaProfile,
        n_workers: int,
        nic: Any = "eth_10g",
        apply_s: float | None = None,
        bucket_bytes: float | None = DEFAULT_BUCKET_BYTES,
        algorithm: str = "ring",
        **kw: Any,
    ):
        if kw.get("n_backup"):
            raise ValueError("AllReduceRing: backup workers are not supported (use SyncPS)")
        if algorithm not in ("ring", "tree"):
            raise ValueError(
                f"AllReduceRing: algorithm must be 'ring' or 'tree', got {algorithm!r}"
            )
        self.algorithm = algorithm
        kw.pop("n_backup", None)
        super().__init__(profile, n_workers, 0, None, nic=nic, bucket_bytes=bucket_bytes, **kw)
        if apply_s is None:
            apply_s = sum(profile.worker_apply_s_of(v) for v in profile.variables)
        _nonneg("AllReduceRing: apply_s", apply_s)
        self.local_apply_s = float(apply_s)
        self.buckets = gradient_buckets(profile, math.inf if bucket_bytes is None else bucket_bytes)

    def _config(self) -> dict[str, Any]:
        return {
            "bucket_bytes": self.bucket_bytes,
            "buckets": len(self.buckets),
            "algorithm": self.algorithm,
        }

    def _build(self) -> None:
        self.release = self.env.event()
        self.ready = 0
        self.grads: list[Any] = []
        self._new_step()
        self.net = None
        if self.network_mode == "exact" or self.algorithm == "tree":  # (a tree: always flows)
            self.net = PSNetwork(self.env, self.worker_nics, [self.ps_nic], [[0]], "exact")
        else:
            self.ring_s = [ring_allreduce_time(b, self.worker_nics) for b, _ in self.buckets]

    def _new_step(self) -> None:
        self.begun: dict[int, tuple[float, float]] = {}  # worker -> (compute start, seconds)
        self.computed = self.env.event()  # every worker's compute is done

    def _loop(self, i: int) -> Any:
        env, learner = self.env, self.learner
        while True:
            step = self.step
            params = learner.read(i, step, env.now) if learner is not None else None
            c = self._compute_s(i, step)
            begun = self.begun
            fresh = len(begun) < self.n_workers
            begun[i] = (env.now, c)
            if fresh and len(begun) == self.n_workers:
                env.process(self._collective(self.epoch, begun, self.computed))
            yield env.timeout(c)
            if learner is not None:
                self.grads.append(learner.gradient(i, params, env.now))
            self.ready += 1
            wait = self.release
            if self.ready == self.n_workers:
                self.computed.succeed()
            yield wait

    def _collective(self, epoch: int, begun: dict, computed: Any) -> Any:
        env = self.env
        last = len(self.buckets) - 1
        for k, (nbytes, frac) in enumerate(self.buckets):
            if k == last:
                yield computed
            else:  # every worker has this bucket's gradients
                at = max(t + c * frac for t, c in begun.values())
                if at > env.now:
                    yield env.timeout(at - env.now)
            if epoch != self.epoch:
                return
            if self.net is None:
                yield env.timeout(self.ring_s[k])
            else:
                yield from self._flows(nbytes)
            if epoch != self.epoch:
                return
        yield env.timeout(self.local_apply_s)
        if epoch != self.epoch:
            return
        now = env.now
        rec = self.rec_of[self.step]
        rec[2] = now
        rec[3] = self.n_workers
        if self.learner is not None:
            self.learner.apply_sync([self.grads], self.step, now)
        self.grads = []
        self.ready = 0
        self._new_step()
        self._count_step()
        stall = self._maybe_checkpoint()
        if stall:
            yield env.timeout(stall)
            if epoch != self.epoch:
                return
        self._open_record(self.step, env.now)
        ev, self.release = self.release, env.event()
        ev.succeed()

    def _flows(self, nbytes: float) -> Any:
        """One bucket's all-reduce as flows of the network (simulator/collectives.py)."""
        env, net, n = self.env, self.net, self.n_workers
        finished = env.event()
        left = [n]

        def send(i: int, j: int, size: float, arrived: Any) -> None:
            net.send(i, j, size).callbacks.append(lambda _e: arrived())

        def after(seconds: float, fn: Any) -> None:
            env.timeout(seconds).callbacks.append(lambda _e: fn())

        def done(_j: int) -> None:
            left[0] -= 1
            if not left[0]:
                finished.succeed()

        run = tree_all_reduce if self.algorithm == "tree" else ring_all_reduce
        run(n, nbytes, send, after, done)
        yield finished

    def _stall(self) -> None:
        self.ready = 0
        self.grads = []
        self._new_step()

    def _reopen(self, now: float) -> None:
        ev, self.release = self.release, self.env.event()
        ev.succeed()
