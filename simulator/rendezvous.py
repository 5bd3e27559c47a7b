"""``SimRendezvous``: a simulated cluster's Send/Recv and all-reduce. A tensor crossing tasks
is a RecvTensor call (CPU time at both ends, each on its task's message handler) and a flow on
the cluster's network; an all-reduce is NCCL's ring or tree of flows."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hetbed.devices.simulated import SoftwareWork, book_copy, value_nbytes
from hetbed.runtime.rendezvous import LocalRendezvous
from hetbed.simulator.collectives import ring_all_reduce, tree_all_reduce

from .network import Network


def _task(device: str) -> str:
    return device.rsplit("/", 1)[0]


_RECV_TENSOR = "RecvTensor"  # the type of a message's record in RunRecord.ops


class SimRendezvous(LocalRendezvous):
    """A Send starts a network flow from its device to the Recv's; the value is delivered when
    the flow's last byte arrives.

    A tensor crossing tasks is a RecvTensor call, as in the real runtime: a request from the
    receiving task and a reply carrying the bytes. Each end spends CPU time on it (its task's
    cpu device, queued on its host's cores: ``DevicePerf.message_s`` per message and
    ``message_s_per_byte`` per payload byte, from the catalog): the sender handles the request
    and serializes the reply before the bytes leave, the receiver sent the request and
    deserializes the reply after they arrive and its runtime has handed them over
    (``message_latency_s``, no CPU time); both of its messages are charged then, its handler
    taking them at that moment, after the messages that reached it before. Between tasks
    of one machine the bytes also take the machine's cores for as long as the link takes to
    carry them (loopback TCP is a copy by the machine's kernel at both ends): the link's
    sender's and receiver's CPU shares of a core (``copy_shares`` of each task's cpu device;
    one core for the sender without them). Tensors between devices of one task
    are in-process copies and cost no message time.
    """

    __slots__ = ("network", "route", "parsed", "cpu_of", "called", "ends", "owner")

    def __init__(
        self,
        network: Network,
        route: Callable[[str, str], list],
        parsed: dict,
        cpu_of: Callable[[str], Any] | None = None,
        called: dict | None = None,
        collective: str = "ring",
    ):
        super().__init__()
        self.network = network
        self.route = route
        self.collective = collective  # the all-reduce algorithm: "ring" or "tree"
        self.parsed = parsed  # key -> (path, src, dst, tensor, src cpu, dst cpu, call), all steps
        self.cpu_of = cpu_of
        #: (task, client) -> when the task received the client's RunGraph request this step: a
        #: task sends a client's tensors only once that client's call has arrived
        self.called = called if called is not None else {}
        #: cpu device -> when the last message this rendezvous's step handled there ends (a
        #: concurrent client's RunGraph reply waits for its own messages only)
        self.ends: dict[Any, float] = {}
        #: whose steps this rendezvous carries (their session): its messages' ``occupy`` owner
        self.owner: Any = None

    def _occupy(self, cpu: Any, now: float, seconds: float, what: Any) -> float:
        end = cpu.occupy(now, seconds, what, self.owner)
        if end > self.ends.get(cpu, 0.0):
            self.ends[cpu] = end
        return end

    def send(self, key: str, value: Any) -> None:
        p = self.parsed.get(key)
        if p is None:
            src, _inc, dst, tensor, _frame = key.split(";")
            cpus = (None, None)
            if self.cpu_of is not None and _task(src) != _task(dst):
                cpus = (self.cpu_of(_task(src)), self.cpu_of(_task(dst)))
                if cpus[0] is None or cpus[1] is None:
                    cpus = (None, None)
            tasks = (_task(src), _task(dst))
            route = self.route(src, dst)
            copy_bw = None  # tasks of one machine: the bytes cross by a copy at both ends
            hc = cpus[0].host_cores if cpus[0] is not None else None
            if hc is not None and hc is cpus[1].host_cores and route:
                copy_bw = (
                    min(link.bandwidth_bytes_per_s for link in route),
                    (cpus[0].copy_shares[0], cpus[1].copy_shares[1]),
                )
            p = self.parsed[key] = (route, src, dst, tensor, *cpus, tasks, copy_bw)
        nbytes = value_nbytes(value)
        src_cpu = p[4]
        if src_cpu is None:
            self._flow(p, key, value, nbytes)
            return
        env = self.network.env
        now = env.now
        called = self.called.get(p[6])
        if called is not None and called > now:
            now = called
        ready = self._occupy(
            src_cpu, now, _end_cost(src_cpu, nbytes), SoftwareWork(p[3], _RECV_TENSOR)
        )
        if ready > env.now:
            env.timeout(ready - env.now).callbacks.append(
                lambda _e: self._flow(p, key, value, nbytes)
            )
        else:
            self._flow(p, key, value, nbytes)

    def _flow(self, p: tuple, key: str, value: Any, nbytes: int) -> None:
        copied = 0.0
        if p[7] is not None and nbytes:  # the machine's kernel copies them: its cores are busy
            bw, shares = p[7]
            copied = book_copy(p[4].host_cores, self.network.env.now, nbytes / bw, shares)
        self.network.transfer(
            p[0],
            nbytes,
            p[1],
            p[2],
            p[3],
            lambda _record: self._arrived(p, key, value, nbytes, copied),
        )

    def _arrived(
        self, p: tuple, key: str, value: Any, nbytes: int, copied: float = 0.0, there: bool = False
    ) -> None:
        dst_cpu = p[5]
        if dst_cpu is None:
            self._deliver(key, value)
            return
        env = self.network.env
        now = env.now
        if not there:
            now = max(now, copied) + dst_cpu.perf_spec.message_latency_s  # (handed over)
            if now > env.now:  # its handler takes it once it is there, in turn with the others
                env.timeout(now - env.now).callbacks.append(
                    lambda _e: self._arrived(p, key, value, nbytes, there=True)
                )
                return
        # (no new pages: the runtime lands a large tensor in a pooled buffer, wire.RECEIVED)
        cost = _end_cost(dst_cpu, nbytes)
        done = self._occupy(dst_cpu, now, cost, SoftwareWork(p[3], _RECV_TENSOR))
        if done > env.now:
            env.timeout(done - env.now).callbacks.append(lambda _e: self._deliver(key, value))
        else:
            self._deliver(key, value)

    def all_reduce(
        self,
        group: str,
        devices: Sequence[Any],
        nbytes: float,
        dtype: Any,
        dones: Sequence[Callable[[], None]],
    ) -> None:
        """An all-reduce of ``nbytes`` per participant as NCCL runs it, every chunk a flow along
        the cluster's route (so latency and links shared with other traffic count): a ring, or
        a double binary tree when the cluster says ``collective="tree"``
        (simulator/collectives.py). Adding a received chunk costs the device its
        ``reduction_s``. ``dones[i]()`` is called when participant i holds the result. No RPC
        messages: the GPUs' collective library moves the bytes itself."""
        n = len(devices)
        names = [d.name for d in devices]
        routes: dict[tuple[int, int], Any] = {}
        env, net = self.network.env, self.network

        def send(i: int, j: int, size: float, arrived: Callable[[], None]) -> None:
            path = routes.get((i, j))
            if path is None:
                path = routes[(i, j)] = self.route(names[i], names[j])
            net.transfer(path, size, names[i], names[j], group, lambda _rec: arrived())

        def after(seconds: float, fn: Callable[[], None]) -> None:
            env.timeout(seconds).callbacks.append(lambda _e: fn())

        def adds(chunk: float) -> list[float]:
            return [
                d.reduction_s(chunk, dtype) if hasattr(d, "reduction_s") else 0.0 for d in devices
            ]

        def alive() -> bool:
            return self._error is None  # a failed step: nobody waits for the result

        def done(j: int) -> None:
            dones[j]()

        if self.collective == "tree":
            tree_all_reduce(n, nbytes, send, after, done, adds, alive)
        else:
            ring_all_reduce(n, nbytes, send, after, done, adds(nbytes / max(n, 1)), alive)

    def _deliver(self, key: str, value: Any) -> None:
        # A flow of a failed (aborted) step still finishes on the network, later, during another
        # step: its value is dropped instead of failing that step.
        if self._error is None:
            LocalRendezvous.send(self, key, value)


def _end_cost(cpu: Any, nbytes: float) -> float:
    """CPU seconds one end of a RecvTensor call spends: two messages (request and reply) and
    the payload's bytes once."""
    perf = cpu.perf_spec
    return 2.0 * perf.message_s + nbytes * perf.message_s_per_byte
