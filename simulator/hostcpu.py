"""The hosts' CPUs in the step-level drivers (``HostCpus``, a base of ``_Driver``): what each
end of a worker step's messages costs (RunGraph calls, reads, gradients, local steps, replies),
each task's message handler (one message at a time, in the order they arrive: ``_handle``), the
PS's kernels on its host's cores, and the shared machine's copies when every task is on one."""

from __future__ import annotations

from functools import partial
from typing import Any

from hetbed.devices.simulated import HostCores, book_copy


class HostCpus:
    """Message costs, handlers and the PS's kernels (mixed into ``_Driver``, whose ``_build``
    calls ``_build_messages``)."""

    # ---- host CPUs: messages and the PS's kernels ------------------------------------------------

    def _build_messages(self, t: Any) -> None:
        """What each end of the step's messages costs (see ``_request`` and the drivers' loops):
        a worker step is TF's distributed step, its client being the worker's own process. It
        calls RunGraph on its own task and on every PS task holding variables (a request and a
        reply each, at the control-message cost); each variable is read from its shard (a RecvTensor call: request and reply
        with the bytes) and its gradient sent there (the PS's RecvTensor call on the worker).
        A task handles its messages one at a time (``message_s`` each, plus
        ``message_s_per_byte`` per payload byte), the PS on its host's cores, where its
        aggregations and applies also run. Shards of a group are alike, so one stands for all.
        With ``machine_cores`` every task shares one machine of that many cores (its workers'
        compute too)."""
        p = self.profile
        mw, bw_, mp, bp = (
            p.worker_message_s,
            p.worker_message_s_per_byte,
            p.ps_message_s,
            p.ps_message_s_per_byte,
        )
        cw = mw if p.worker_control_message_s is None else p.worker_control_message_s
        # (a call of the worker's own task: both ends in its process)
        cwo = cw if p.worker_own_control_message_s is None else p.worker_own_control_message_s
        cp = mp if p.ps_control_message_s is None else p.ps_control_message_s
        active = self.active_groups
        G = len(self.groups)
        n_ps_active = sum(len(self.groups[g]) for g in active)
        nvars = [int(t.iloc[ks[0]].variables) for ks in self.groups]
        nbytes = [float(t.iloc[ks[0]].step_bytes) for ks in self.groups]
        self.w_lat, self.ps_lat = p.worker_message_latency_s, p.ps_message_latency_s
        self.msg_on = any(
            x > 0 for x in (mw, bw_, mp, bp, cw, cwo, cp, p.worker_step_s, self.w_lat, self.ps_lat)
        )
        # a message of one client's step that finds its task's handler busy with another's
        # waits, then its thread is handed the interpreter (``_handle``; the op-level
        # ``SimulatedDevice.occupy``)
        self.w_handoff = p.worker_wake_s if self.msg_on else 0.0
        self.ps_handoff = p.ps_wake_s if self.msg_on else 0.0
        self.nvars = nvars
        # worker handler: Session.run's own work, RunGraph requests (each PS task: send; own
        # task: send + receive)
        self.req_ps_w = p.worker_step_s + n_ps_active * cw
        self.req_own_w = 2 * cwo
        # ... with the values fed to the step (``_request``): each end's bytes
        self.feed_bytes = p.feed_bytes
        self.feed_end_w = cwo + bw_ * p.feed_bytes
        # ... and the values it fetches from its own task, in that task's reply (``_own_reply``;
        # without a loopback NIC handed over in the process, free, as fed values)
        self.fetch_bytes = p.fetch_bytes if self.loop_rate else 0.0
        self.fetch_end_w = bw_ * self.fetch_bytes  # (each end's bytes)
        # a worker's reads or gradients: per shard of each group, each variable's call and bytes
        self.xfer_w = sum(
            len(self.groups[g]) * (2 * mw * nvars[g] + bw_ * nbytes[g]) for g in active
        )
        # ... and a shard's end of them, per group
        self.xfer_ps = [2 * mp * nvars[g] + bp * nbytes[g] for g in range(G)]
        # (no new pages at the receiving end: the runtime lands a tensor of 1 MiB or more in a
        # pooled buffer that its previous step's tensor left, wire.RECEIVED)
        self.msg_ps = cp  # a PS receives a RunGraph request, or sends its reply
        # TF's SyncReplicasOptimizer moves two more scalars per worker step (SyncPS): its local
        # step to every PS task holding accumulators (read as the step starts), and a token
        # from the global step's PS task once the update is done. Without it the worker's step
        # runs the update ops, and what else they take from the worker (a learning rate:
        # profile.update_inputs) goes to every PS task holding variables as the step starts.
        tf_sync = getattr(self, "sync_replicas", False)
        sent_first = 1 if tf_sync else p.update_inputs
        self.local_step_w = n_ps_active * 2 * mw * sent_first
        self.local_step_ps = 2 * mp * sent_first
        self.token_ps = 2 * mp if tf_sync else 0.0
        # (the worker receives the token; its own task's partition, which assigns the token to
        # its local step, then replies to its RunGraph call: send + receive)
        self.token_w = 2 * mw + 2 * cwo if tf_sync else 0.0
        self.token_group = self.group_of[0]
        # ... and what the real program's graph moves besides (scenarios/models/grid.py's
        # op_level_clients shows each): the optimizer's ops are on the global step's task, so
        # each other shard asks it for what else its update takes (a learning rate: a
        # RecvTensor call each, every step); the token queue and the global step's increment
        # wait for every other shard's accumulator and update (control edges: a RecvTensor
        # call from each other shard to the global step's task, after each worker's gradient
        # is in and after the update)
        several = tf_sync and n_ps_active > 1
        self.qr_inputs_ps = 2 * mp * p.update_inputs if several else 0.0
        self.ctrl_ps = 2 * mp if several else 0.0
        self.step_bytes_all = sum(len(self.groups[g]) * nbytes[g] for g in active)
        # worker handler: its own task's reply (send + receive: its partition is done once the
        # gradients leave; with a token, once it has the token: token_w) and each PS task's
        # reply (receive)
        self.reply_own_w = 0.0 if tf_sync else 2 * cwo
        self.token_reply = tf_sync  # (its own task replies after the token: ``_replied``)
        self.token_own_w = 2 * cwo if tf_sync else 0.0  # (token_w's own reply)
        self.reply_w = n_ps_active * cw
        self.reply_w_of = [len(self.groups[g]) * cw for g in range(G)]  # (one group's)
        self._reset_cpus()

    def _reset_cpus(self) -> None:
        """Idle host CPUs: a handler per worker and per PS group, and the PS hosts' cores (one
        machine for everything with ``machine_cores``)."""
        G = len(self.groups)
        shared = HostCores(self.machine_cores, self.env) if self.machine_cores else None
        self.machine = shared
        # each task's message handler: one message at a time, in the order they arrive (a
        # message booked later for an earlier time goes in a gap before those booked ahead)
        self.w_lane = [HostCores(1, self.env) for _ in range(self.n_tasks)]
        self.ps_lane = [HostCores(1, self.env) for _ in range(G)]
        self.shard_lane = [[HostCores(1, self.env) for _ in ks] for ks in self.groups]
        self.lane_owner: dict[HostCores, Any] = {}  # whose step each handler served last
        self.own_at = [0.0] * self.n_tasks  # when each worker has its own task's last reply
        self.ps_cpu = [shared or HostCores(self.profile.ps_cores, self.env) for _ in range(G)]

    def _to_ps(self, i: int) -> float:
        """Delay of a message from worker ``i`` to a PS task: the NICs' and the PS runtime's."""
        return (self.worker_nics[i].latency_s + self.ps_nic.latency_s) / 2 + self.ps_lat

    def _to_worker(self, i: int) -> float:
        return (self.worker_nics[i].latency_s + self.ps_nic.latency_s) / 2 + self.w_lat

    def _w_msg(self, i: int, now: float, seconds: float, owner: Any = None) -> float:
        """Worker ``i`` handles ``seconds`` of messages of ``owner``'s steps (default: its
        own) from ``now``; returns when done."""
        lane = self.w_lane[i]
        h = _handoff(self.lane_owner, lane, i if owner is None else owner, self.w_handoff)
        return _handle(lane, self.machine, now, seconds, h)

    def _ps_msg(
        self,
        g: int,
        now: float,
        seconds: float,
        first: float = 0.0,
        owner: Any = None,
        k: int = 1,
    ) -> float:
        """Each shard of group ``g`` handles ``seconds`` of messages of ``owner``'s steps (a
        worker's index, "qr" the queue runner's; None: no client's, as a wake-up, itself a
        hand-off) from ``now``, its first shard ``first`` more (the global step's task: the
        token it serves); returns when the last is done. Shards on hosts of their own are
        alike, so one stands for all (the first, the longest); on one machine
        (``machine_cores``) every shard's handler takes its cores, after its own earlier
        messages. Of ``k`` messages booked at once (a request and the reads it serves), each
        pays the interpreter hand-off when they find the handler busy with another step's
        (``_handoff``)."""
        hc = self.ps_cpu[g]
        owners, handoff = self.lane_owner, self.ps_handoff
        if self.machine is not None:  # each shard's handler on the machine's cores
            ends = []
            for j, lane in enumerate(self.shard_lane[g]):
                h = _handoff(owners, lane, owner, handoff * k)
                ends.append(_handle(lane, hc, now, seconds + (first if j == 0 else 0.0), h))
            return max(ends)
        lane = self.ps_lane[g]
        h = _handoff(owners, lane, owner, handoff * k)
        return _handle(lane, hc, now, seconds + first, h)

    def _ps_kernel(self, g: int, now: float, seconds: float, serial: float = 0.0) -> float:
        """Each shard of group ``g`` runs ``seconds`` of kernels from ``now``: their ``serial``
        part on one of its host's cores (kernels that are mostly their dispatch, or measured to
        keep one core busy: ``ReplicaProfile.apply_cores`` ...), then the rest on all of them;
        on one machine the shards' kernels share its cores. Returns when the last is done."""
        hc = self.ps_cpu[g]
        serial = min(serial, seconds)

        def one() -> float:
            end = hc.reserve(now, serial, 1) if serial > 0 else now
            return hc.reserve(end, seconds - serial, hc.cores) if seconds > serial else end

        end = one()
        if self.machine is not None:
            for _ in range(len(self.groups[g]) - 1):
                end = max(end, one())
        return end

    def _pull(self, i: int) -> Any:
        """Worker ``i`` reads the parameters: its step's RunGraph requests and the shards'
        serialization (with message costs), the transfer (and the machine's copy of it on one
        machine), then its own deserialization."""
        if self.msg_on:
            yield from self._request(i)
        tr = self.inflight[i] = self.net.pull(i, self.parts)
        copied = self._copy(i)
        yield tr.event
        yield from self._copied(copied)
        if self.msg_on:
            yield from self._handle(i)

    def _request(self, i: int) -> Any:
        """Worker ``i`` starts a step: it sends its RunGraph requests to the PS tasks, then to
        its own task (which receives it at once); each PS shard receives its request and
        serializes the variables it reads for the worker; returns (as a SimPy process step)
        once the reads can leave (the worker may still be sending: it receives them after)."""
        env = self.env
        sent = self._w_msg(i, env.now, self.req_ps_w)
        if self.feed_bytes and self.loop_rate:  # the fed values follow its own task's
            # request: sent, carried by the loopback (the machine's cores copying them), received
            out = self._w_msg(i, sent, self.feed_end_w)
            carried = out + self.feed_bytes / self.loop_rate
            if self.machine is not None:
                book_copy(self.machine, out, carried - out, self.copy_shares)
            own = self._w_msg(i, carried, self.feed_end_w + self.local_step_w)
        else:
            own = self._w_msg(i, sent, self.req_own_w + self.local_step_w)
        # each PS task handles the request when it arrives (in turn with what other workers'
        # steps bring it meanwhile), and the local step, sent last, when that arrives
        yield env.timeout(sent + self._to_ps(i) - env.now)
        now = ready = env.now
        for g in self.active_groups:
            k = 1 + self.nvars[g]  # (its request, then each variable's tensor)
            ready = max(ready, self._ps_msg(g, now, self.msg_ps + self.xfer_ps[g], owner=i, k=k))
        if self.local_step_ps:
            self._at(own + self._to_ps(i), partial(self._local_step, i))
        if ready > now:
            yield env.timeout(ready - now)

    def _local_step(self, i: int) -> None:
        """Worker ``i``'s local step (or what else the update takes from it) reaches the PS
        tasks: each handles it."""
        for g in self.active_groups:
            self._ps_msg(g, self.env.now, self.local_step_ps, owner=i)

    def _handle(self, i: int, sending: bool = False) -> Any:
        """Worker ``i`` deserializes what it pulled (once its runtime has it), or serializes
        what it pushes (``sending``: then its own task's partition is done, and the reply to
        that RunGraph call is sent and received while the gradients travel)."""
        env = self.env
        now = env.now
        cost = self.xfer_w
        end = self._w_msg(i, now if sending else now + self.w_lat, cost)
        if sending and not self.token_reply:  # (with a token: after it, ``_replied``)
            self._own_reply(i, end, self.reply_own_w)
        if end > now:
            yield env.timeout(end - now)

    def _reply(self, i: int) -> Any:
        """The replies to worker ``i``'s RunGraph calls on the PS tasks of its last step: each
        shard sends one, the worker receives them."""
        env = self.env
        now = env.now
        sent = now
        for g in self.active_groups:
            sent = max(sent, self._ps_msg(g, now, self.msg_ps, owner=i))
        end = max(self._w_msg(i, sent + self._to_worker(i), self.reply_w), self.own_at[i])
        if end > now:
            yield env.timeout(end - now)

    def _own_reply(self, i: int, now: float, seconds: float) -> float:
        """Worker ``i``'s own task replies to its RunGraph call from ``now``, ``seconds`` of
        control messages at both ends (its send and its client's receipt), with the values
        the step fetches from it (``fetch_bytes``: each end's per-byte cost, the loopback
        carrying them meanwhile, the machine's cores copying them, as the op-level
        ``SimSession._reply_out`` and ``_reply_in``; the step ends no sooner: ``own_at``);
        returns when its client has them."""
        if not self.fetch_bytes:
            return self._w_msg(i, now, seconds)
        out = self._w_msg(i, now, seconds / 2 + self.fetch_end_w)
        carried = out + self.fetch_bytes / self.loop_rate
        if self.machine is not None:
            book_copy(self.machine, out, carried - out, self.copy_shares)
        end = self.own_at[i] = self._w_msg(i, carried, seconds / 2 + self.fetch_end_w)
        return end

    def _copy(self, i: int, share: float = 1.0) -> float:
        """With every task on one machine: the machine's kernel copies a pull's or a push's
        bytes (``share`` of the step's) at both ends, taking the link's sender's and
        receiver's CPU shares of a core each (``copy_shares``) for as long as the link carries
        them; returns when that copy ends (0 on machines of their own)."""
        hc = self.machine
        if hc is None or not self.step_bytes_all:
            return 0.0
        bw = self.worker_nics[i].bandwidth_bytes_per_s
        return book_copy(hc, self.env.now, self.step_bytes_all * share / bw, self.copy_shares)

    def _copied(self, until: float) -> Any:
        env = self.env
        if until > env.now:
            yield env.timeout(until - env.now)


def _handoff(owners: dict, lane: HostCores, owner: Any, seconds: float) -> float:
    """The interpreter hand-off that messages of ``owner``'s steps pay on ``lane`` if they
    find its handler busy (``_handle``): ``seconds`` when it served another client's step
    last, else 0 (``owner`` None: nothing, and nothing recorded); records ``owner``."""
    if owner is None:
        return 0.0
    last = owners.get(lane)
    owners[lane] = owner
    return seconds if last is not None and last != owner else 0.0


def _handle(
    lane: HostCores, cores: HostCores | None, now: float, seconds: float, handoff: float = 0.0
) -> float:
    """A task's handler (``lane``: one message at a time) handles ``seconds`` of messages from
    ``now`` on one of its host's ``cores`` (None: its own): at the first time both are free,
    which may be before messages booked earlier for later times; returns when it is done.
    Messages that find it busy (work booked past ``now``) with another client's step first
    wait for the interpreter and are handed it, ``handoff`` seconds of one core (``_handoff``;
    the op-level ``SimulatedDevice.occupy``)."""
    if seconds <= 0.0:
        return now
    if handoff > 0.0 and lane.all_free > now:
        seconds += handoff
    t = now
    while True:
        a = lane.first_free(t, seconds)
        b = a if cores is None else cores.first_free(a, seconds)
        if b == a:
            break
        t = b
    lane.book(a, seconds)
    if cores is not None:
        cores.book(a, seconds, 1)
    return a + seconds
